"""Issue 27 item 2 in Python: ids as clients send them. No request_id or
trace_id value — a lone surrogate (what json.loads makes of "\\ud83d"), any
code point, a NUL, malformed UTF-8 bytes, an empty or a 1 MB id — makes
begin(), stream() or instrument() raise; the request is measured, a request
id's bad bytes are shown as '?', a bad trace id is ignored and counted in
"trace_id_invalid"."""

import asyncio
import json
import time
import unittest

from support import MS, T0, registry, ttft

TID = "4bf92f3577b34da6a3ce929d0e0e4736"
MB = 1 << 20
K = 64  # TTFT_MAX_SLOWEST_K

# (request id as a client sent it, as the slowest list shows it)
REQUEST_IDS = [
    (json.loads('"\\ud83d"'), "?"),               # a lone high surrogate
    ("a\udc00b\ud800", "a?b?"),                   # lone surrogates, both halves
    ("\ud83d\ude00", "?" * 2),                    # a pair written as two escapes
    ("r\udcc3\udca9", "r\u00e9"),                 # surrogateescape'd bytes: UTF-8 again
    ("r\udcff", "r?"),                            # surrogateescape'd 0xFF
    ("a\0b", "a?b"),                              # NUL: '?', the rest kept
    ("\0", "?"),
    ("caf\u00e9\U0001F600\uFFFF\U0010FFFF", "caf\u00e9\U0001F600\uFFFF\U0010FFFF"),
    ("\x1b[31m\x7f\x85", "?[31m?\x85"),           # C0 and DEL become '?'
    (b"a\xffb\xc3(\xed\xa0\x80", "a?b?(???"),     # malformed UTF-8 bytes
    (b"a\0b", "a?b"),
    (bytearray(b"ba"), "ba"),
    ("", None),                                   # empty: no id
    (b"", None),
    ("x" * MB, "x" * 63),                         # 1 MB ids: cut at 63 bytes
    ("\ud83d" * MB, "?" * 63),
    (b"\xff" * MB, "?" * 63),
    ("\0" * MB, "?" * 63),
    ("\U0001F600" * MB, "\U0001F600" * 15),       # whole characters only
]

# trace ids the library ignores and counts (each one begin)
BAD_TRACE_IDS = [
    json.loads('"\\ud83d"'),
    TID[:31] + "\ud83d",
    TID + "\0",                                   # C would end it at the NUL: valid
    TID + "\0junk",
    TID[:16] + "\0" + TID[17:],
    "\0",
    "",
    b"",
    b"\xff" * 32,
    TID.upper(),
    "\uff14" + TID[1:],                           # a fullwidth digit
    TID * (MB // 32),                             # 1 MB
    "\ud83d" * MB,
    b"0" * MB,
]


def play(reg, i, **ids):
    """one stream with a TTFT of (i + 1) ms, ended"""
    s = reg.begin(t_ns=T0 + i * MS, **ids)
    s.token(t_ns=T0 + i * MS + (i + 1) * MS)
    s.end(t_ns=T0 + i * MS + (i + 2) * MS)


class ClientIds(unittest.TestCase):
    def test_request_ids(self):
        reg = registry(slowest_k=K)
        for i, (rid, _) in enumerate(REQUEST_IDS):
            play(reg, i, request_id=rid)
        snap = reg.snapshot()
        self.assertEqual(snap.count("ttft"), len(REQUEST_IDS))  # every one measured
        self.assertEqual(snap.counter("trace_id_invalid"), 0)
        got = [r.request_id for r in reversed(snap.slowest("ttft"))]
        self.assertEqual(got, [want for _, want in REQUEST_IDS])

    def test_trace_ids(self):
        reg = registry(slowest_k=K)
        for i, tid in enumerate(BAD_TRACE_IDS):
            play(reg, i, request_id="t%d" % i, trace_id=tid)
        play(reg, 100, request_id="good", trace_id=TID)
        play(reg, 101, request_id="good-bytes", trace_id=TID.encode())
        snap = reg.snapshot()
        self.assertEqual(snap.count("ttft"), len(BAD_TRACE_IDS) + 2)
        self.assertEqual(snap.counter("trace_id_invalid"), len(BAD_TRACE_IDS))
        ids = {r.request_id: r.trace_id for r in snap.slowest("ttft")}
        self.assertEqual(ids, dict([("t%d" % i, None) for i in range(len(BAD_TRACE_IDS))] +
                                   [("good", TID), ("good-bytes", TID)]))

    def test_every_code_point(self):
        # every code point, 15 to an id (at most 60 bytes: nothing is cut),
        # K ids per snapshot, each batch slower than the ones before it
        reg = registry(slowest_k=K, max_inflight=256)
        ids, wants = [], []

        def flush():
            snap = reg.snapshot()
            got = [r.request_id for r in reversed(snap.slowest("ttft"))]
            self.assertEqual(got, wants)
            ids.clear()
            wants.clear()

        n = 0
        for base in range(0, 0x110000, 15):
            cps = range(base, min(base + 15, 0x110000))
            rid = "".join(map(chr, cps))
            want = "".join("?" if c < 0x20 or c == 0x7F or 0xD800 <= c <= 0xDFFF else chr(c)
                           for c in cps)
            s = reg.begin(t_ns=T0, request_id=rid)
            s.token(t_ns=T0 + (n + 1) * 1000)
            s.end(t_ns=T0 + (n + 1) * 1000)
            n += 1
            ids.append(rid)
            wants.append(want)
            if len(ids) == K:
                flush()
        flush_n = len(ids)
        if flush_n:
            got = [r.request_id for r in reversed(reg.snapshot().slowest("ttft"))][K - flush_n:]
            self.assertEqual(got, wants)
        snap = reg.snapshot()
        self.assertEqual(snap.count("ttft"), n)
        self.assertEqual(snap.counter("dropped"), 0)

    def test_stream_and_instrument(self):
        # the context manager's end and instrument's tokens are on the live
        # clock: explicit begin times in its past
        t0 = time.monotonic_ns() - 1000 * MS
        reg = registry(slowest_k=K)
        n = 0
        for rid, tid in [("\ud83d", "\ud83d"), ("a\0b", TID + "\0"), (b"\xff", b"\0"),
                         ("x" * MB, "\ud83d" * MB), ("", "")]:
            with reg.stream(t_ns=t0 + n * MS, request_id=rid, trace_id=tid) as s:
                s.token(t_ns=t0 + n * MS + 500 * MS)
            list(reg.instrument(iter([1, 2]), t_ns=t0 + n * MS, request_id=rid, trace_id=tid))

            async def agen():
                yield 1

            async def drain(rid=rid, tid=tid, t=t0 + n * MS):
                return [x async for x in reg.instrument(agen(), t_ns=t, request_id=rid,
                                                        trace_id=tid)]

            asyncio.run(drain())
            n += 1
        snap = reg.snapshot()
        self.assertEqual(snap.count("ttft"), 3 * n)
        self.assertEqual(snap.count("ttft", status="completed"), 3 * n)
        self.assertEqual(snap.counter("trace_id_invalid"), 3 * n)
        got = sorted({r.request_id or "" for r in snap.slowest("ttft")})
        self.assertEqual(got, ["", "?", "a?b", "x" * 63])

    def test_other_types_are_the_callers_bug(self):
        reg = registry()
        for bad in (12, 1.5, ["a"], object()):
            with self.assertRaises(TypeError):
                reg.begin(request_id=bad)
            with self.assertRaises(TypeError):
                reg.begin(trace_id=bad)
        self.assertEqual(reg.snapshot().counter("begun"), 0)


if __name__ == "__main__":
    unittest.main()
