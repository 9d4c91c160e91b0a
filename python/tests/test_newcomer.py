"""What a newcomer sends (issue 32.4, 32.7), in Python: a W3C traceparent
header as received, an SLO written in milliseconds, a busy port, and the
URL Prometheus scrapes."""

import asyncio
import datetime
import socket
import unittest
import urllib.request

from support import MS, T0, registry, ttft

TID = "4bf92f3577b34da6a3ce929d0e0e4736"
GOOD = [
    "00-%s-00f067aa0ba902b7-01" % TID,
    "00-%s-00f067aa0ba902b7-00" % TID,
    " 00-%s-00f067aa0ba902b7-01\t" % TID,       # OWS around a field value
    "01-%s-00f067aa0ba902b7-01" % TID,           # a later version, as long
    "cc-%s-00f067aa0ba902b7-09-what-comes" % TID,  # a later version, with more
    ("00-%s-00f067aa0ba902b7-01" % TID).encode(),
]
BAD = [
    TID,                                           # a bare trace id is not a traceparent
    "00-%s-00f067aa0ba902b7-01-extra" % TID,       # version 00 has exactly 4 fields
    "ff-%s-00f067aa0ba902b7-01" % TID,             # version ff is invalid
    "00-%s-00f067aa0ba902b7-01" % TID.upper(),     # uppercase hex
    "00-%s-00f067aa0ba902b7-01" % ("0" * 32),      # all-zero trace id
    "00-%s-0000000000000000-01" % TID,             # all-zero parent id
    "00-%s-00f067aa0ba902b-01" % TID,              # parent id too short
    "00_%s_00f067aa0ba902b7_01" % TID,             # wrong separators
    "0-%s-00f067aa0ba902b7-01" % TID,
    "00-%s-00f067aa0ba902b7-0g" % TID,
    "01-%s-00f067aa0ba902b7-01x" % TID,            # more without a '-'
    "",
    "\0" * 55,
]


def play(reg, i, **kw):
    s = reg.begin(t_ns=T0 + i * MS, **kw)
    s.token(t_ns=T0 + i * MS + (i + 1) * MS)
    s.end(t_ns=T0 + i * MS + (i + 2) * MS)


class Traceparent(unittest.TestCase):
    def test_the_trace_id_of_a_valid_header(self):
        reg = registry(slowest_k=32)
        for i, tp in enumerate(GOOD):
            play(reg, i, request_id="g%d" % i, traceparent=tp)
        snap = reg.snapshot()
        self.assertEqual(snap.counter("trace_id_invalid"), 0)
        ids = {r.request_id: r.trace_id for r in snap.slowest("ttft")}
        self.assertEqual(ids, {"g%d" % i: TID for i in range(len(GOOD))})

    def test_an_invalid_header_is_counted_not_raised(self):
        reg = registry(slowest_k=32)
        for i, tp in enumerate(BAD):
            play(reg, i, request_id="b%d" % i, traceparent=tp)
        snap = reg.snapshot()
        self.assertEqual(snap.count("ttft"), len(BAD))  # every one measured
        self.assertEqual(snap.counter("trace_id_invalid"), len(BAD))
        ids = {r.request_id: r.trace_id for r in snap.slowest("ttft")}
        self.assertEqual(ids, {"b%d" % i: None for i in range(len(BAD))})

    def test_stream_and_instrument_take_it(self):
        reg = registry(slowest_k=8)
        with reg.stream(request_id="s", traceparent=GOOD[0]) as s:
            s.token()
        list(reg.instrument(iter("abc"), request_id="i", traceparent=GOOD[1]))

        async def agen():
            for ch in "xy":
                yield ch

        async def consume():
            return [x async for x in reg.instrument(agen(), request_id="a",
                                                    traceparent=GOOD[2])]
        asyncio.run(consume())
        snap = reg.snapshot()
        ids = {r.request_id: r.trace_id for r in snap.slowest("ttft")}
        self.assertEqual(ids, {"s": TID, "i": TID, "a": TID})

    def test_not_with_trace_id_and_not_other_types(self):
        reg = registry()
        with self.assertRaises(TypeError):
            reg.begin(trace_id=TID, traceparent=GOOD[0])
        with self.assertRaises(TypeError):
            reg.begin(traceparent=12)


class SloUnits(unittest.TestCase):
    def slo(self, reg, cls):
        return reg.snapshot().class_slo(cls)

    def test_a_number_that_only_makes_sense_in_ms_is_refused(self):
        reg = registry()
        for kw in ({"ttft_slo": 500}, {"tpot_slo": 60}, {"stall_threshold": 250},
                   {"e2e_slo": 30000}, {"ttft_slo": 500.0}):
            with self.assertRaises(ValueError, msg=kw) as cm:
                reg.add_class("c", **kw)
            name = next(iter(kw))
            self.assertIn("%s_ms=" % name, str(cm.exception))
            self.assertIn("timedelta", str(cm.exception))
        self.assertEqual(list(reg.snapshot().classes), ["default"])  # nothing was added

    def test_explicit_units(self):
        reg = registry(max_classes=8)
        a = reg.add_class("ms", ttft_slo_ms=500, tpot_slo_ms=50, e2e_slo_ms=30000,
                          stall_threshold_ms=250)
        b = reg.add_class("td", ttft_slo=datetime.timedelta(milliseconds=500),
                          e2e_slo=datetime.timedelta(minutes=20))
        c = reg.add_class("s", ttft_slo=0.5, tpot_slo=0.05, e2e_slo=30)  # 1.2's seconds
        sa, sb, sc = (self.slo(reg, x) for x in (a, b, c))
        self.assertEqual(sa["ttft"], 0.5)
        self.assertEqual(sa["tpot"], 0.05)
        self.assertEqual(sa["e2e"], 30.0)
        self.assertEqual(sa["stall_threshold"], 0.25)
        self.assertEqual(sb["ttft"], 0.5)
        self.assertEqual(sb["e2e"], 1200.0)
        self.assertEqual(sc["ttft"], 0.5)
        self.assertEqual(sc["e2e"], 30.0)

    def test_one_unit_per_budget(self):
        reg = registry()
        with self.assertRaises(TypeError):
            reg.add_class("c", ttft_slo=0.5, ttft_slo_ms=500)
        with self.assertRaises(TypeError):
            reg.add_class("c", ttft_slo_ms=datetime.timedelta(milliseconds=5))
        with self.assertRaises(ValueError):
            reg.add_class("c", ttft_slo_ms=0)


class Endpoint(unittest.TestCase):
    def test_metrics_url(self):
        reg = registry()
        play(reg, 0)
        with reg.serve_http("127.0.0.1:0") as srv:
            self.assertEqual(srv.metrics_url, "http://127.0.0.1:%d/metrics" % srv.port)
            with urllib.request.urlopen(srv.metrics_url, timeout=10) as resp:
                self.assertEqual(resp.status, 200)
                self.assertIn("text/plain", resp.headers["Content-Type"])

    def test_a_busy_port_names_the_address_and_the_reason(self):
        reg = registry()
        with socket.socket() as held:
            held.bind(("127.0.0.1", 0))
            held.listen(1)
            addr = "127.0.0.1:%d" % held.getsockname()[1]
            with self.assertRaises(ttft.IoError) as cm:
                reg.serve_http(addr)
        msg = str(cm.exception)
        self.assertIn(addr + ": bind: ", msg)
        self.assertIn("address already in use", msg.lower())
        self.assertEqual(cm.exception.code, -8)

    def test_a_bad_address_says_so(self):
        with self.assertRaises(ttft.InvalidArgumentError) as cm:
            registry().serve_http("127.0.0.1:99999")
        self.assertIn("127.0.0.1:99999: not an address", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
