"""Issue 19 item 4 in Python: request and trace ids at begin, the slowest
requests of a snapshot (Snapshot.slowest), in JSON, through the encoding,
merge and delta, and as OpenMetrics exemplars."""

import json
import time
import unittest

from support import MS, T0, registry, ttft

TID = "4bf92f3577b34da6a3ce929d0e0e4736"


def play(reg, i, cls=None, ttft_ms=None, gap_ms=None, **ids):
    s = reg.begin(t_ns=T0 + i * MS, cls=cls, **ids)
    t = T0 + i * MS + (ttft_ms if ttft_ms is not None else 1 + i) * MS
    s.token(t_ns=t)
    t += (gap_ms if gap_ms is not None else 1) * MS
    s.token(t_ns=t)
    s.end(t_ns=t + MS)


class Slowest(unittest.TestCase):
    def test_the_k_slowest_with_their_ids(self):
        reg = registry(slowest_k=3)
        for i in range(20):
            play(reg, i, request_id="req-%d" % i, trace_id="%032x" % (i + 1), gap_ms=40 - i)
        snap = reg.snapshot()
        by_ttft = snap.slowest("ttft")
        self.assertEqual([r.request_id for r in by_ttft], ["req-19", "req-18", "req-17"])
        self.assertEqual(by_ttft[0].trace_id, "%032x" % 20)
        self.assertEqual(by_ttft[0].value_ns, 20 * MS)
        self.assertEqual(by_ttft[0].ttft_ns, 20 * MS)
        self.assertEqual(by_ttft[0].max_gap_ns, 21 * MS)
        self.assertEqual(by_ttft[0].cls, "default")
        self.assertEqual(by_ttft[0].status, "completed")
        self.assertEqual(by_ttft[0].cause, "unknown")
        self.assertEqual(by_ttft[0].tokens, 2)
        self.assertIsNotNone(by_ttft[0].t_end_unix_ns)
        by_gap = snap.slowest("gap", cls="default")
        self.assertEqual([r.request_id for r in by_gap], ["req-0", "req-1", "req-2"])
        self.assertEqual([r.value_ns for r in by_gap], [40 * MS, 39 * MS, 38 * MS])
        with self.assertRaises(ValueError):
            snap.slowest("e2e")
        doc = json.loads(snap.to_json())
        self.assertEqual([r["request_id"] for r in doc["slowest"]["ttft"]],
                         ["req-19", "req-18", "req-17"])
        self.assertEqual(doc["classes"][0]["slowest"]["gap"][0]["trace_id"], "%032x" % 1)

    def test_bad_trace_ids_are_ignored_and_counted(self):
        reg = registry()
        play(reg, 0, trace_id="4BF92F3577B34DA6A3CE929D0E0E4736", request_id="a")
        play(reg, 1, trace_id="0" * 32)
        play(reg, 2, trace_id=TID)
        snap = reg.snapshot()
        self.assertEqual(snap.counter("trace_id_invalid"), 2)
        ids = {r.request_id: r.trace_id for r in snap.slowest("ttft")}
        self.assertEqual(ids["a"], None)
        self.assertIn(TID, [r.trace_id for r in snap.slowest("ttft")])
        reg.begin(request_id="a\0b").end()  # a NUL is '?' (test_client_ids)
        with self.assertRaises(TypeError):
            reg.begin(trace_id=12)

    def test_long_and_hostile_request_ids(self):
        reg = registry()
        play(reg, 0, request_id="x" * 500)
        play(reg, 1, request_id="caf\u00e9\n\x1b[31m")
        got = {r.request_id for r in reg.snapshot().slowest("ttft")}
        self.assertIn("x" * 63, got)
        self.assertIn("caf\u00e9??[31m", got)

    def test_stream_and_instrument_take_ids(self):
        # the context manager's end and instrument's tokens are on the live
        # clock: every explicit time here is in that clock's past (T0 =
        # 1000 s would be ahead of it on a machine up for under 17 minutes,
        # and a first token before its begin is clamped to a TTFT of 0)
        t0 = time.monotonic_ns() - 100 * MS
        reg = registry()
        with reg.stream(t_ns=t0, request_id="ctx", trace_id=TID) as s:
            s.token(t_ns=t0 + 5 * MS)
        list(reg.instrument(iter([1, 2]), t_ns=t0 + 10 * MS, request_id="gen"))
        snap = reg.snapshot()
        self.assertEqual({r.request_id for r in snap.slowest("ttft")}, {"ctx", "gen"})
        self.assertGreaterEqual(snap.slowest("ttft")[0].value_ns, 50 * MS)
        self.assertEqual(snap.counter("clock_clamped"), 0)

    def test_a_ttft_of_zero_is_not_listed(self):
        # a first token before its begin is clamped to it (TTFT 0): that
        # stream is counted in clock_clamped and is not one of the slowest
        reg = registry()
        s = reg.begin(t_ns=T0 + 10 * MS, request_id="early")
        s.token(t_ns=T0)
        s.end(t_ns=T0 + 20 * MS)
        play(reg, 1, request_id="late")
        snap = reg.snapshot()
        self.assertEqual(snap.counter("clock_clamped"), 1)
        self.assertEqual([r.request_id for r in snap.slowest("ttft")], ["late"])

    def test_codec_merge_delta(self):
        a, b = registry(slowest_k=2), registry(slowest_k=2)
        for i in range(5):
            play(a, i, request_id="a%d" % i)
            play(b, i + 5, request_id="b%d" % i)
        sa = a.snapshot()
        back = ttft.Snapshot.decode(sa.encode())
        self.assertEqual(back.slowest("ttft"), sa.slowest("ttft"))
        m = ttft.merge(sa, b.snapshot())
        self.assertEqual([r.request_id for r in m.slowest("ttft")], ["b4", "b3"])
        play(a, 50, request_id="late")
        d = a.snapshot() - sa
        self.assertEqual([r.request_id for r in d.slowest("ttft")], ["late"])

    def test_openmetrics_exemplar(self):
        reg = registry()
        play(reg, 0, ttft_ms=300, gap_ms=7, trace_id=TID)
        om = reg.snapshot().to_openmetrics()
        lines = [x for x in om.splitlines() if "# {trace_id" in x]
        # TTFT 0.3 s; the longest gap 7 ms in ITL and in the worst-gap histogram
        self.assertEqual(len(lines), 3)
        ttft_line = [x for x in lines if x.startswith("gen_ai_server_time_to_first_token_seconds_bucket")]
        self.assertEqual(len(ttft_line), 1)
        self.assertIn('# {trace_id="%s"} 0.3 ' % TID, ttft_line[0])
        self.assertTrue(any(x.startswith("llm_inter_token_latency_seconds_bucket") and
                            '} 0.007 ' in x for x in lines))
        self.assertNotIn("trace_id", reg.snapshot().to_prometheus())

    def test_k_zero(self):
        reg = registry(slowest_k=0)
        play(reg, 0, request_id="r", trace_id=TID)
        self.assertEqual(reg.snapshot().slowest("ttft"), [])
        with self.assertRaises(ValueError):
            registry(slowest_k=65)


class SlowestFluidity(unittest.TestCase):
    """1.3: each entry's fluidity and the budgets it was judged against
    (the values of tests/test_fluidity.c slowest_entries_carry_...)."""

    def test_fluidity_and_budgets(self):
        reg = registry()
        chat = reg.add_class("chat", ttft_slo_ms=100, tpot_slo_ms=50, ttft_ns_per_prompt_token=MS)
        # A: prompt 200 (deadline 300 ms), TTFT 400 ms, an early 120 ms
        # stall then ten 10 ms gaps: 12 deadlines, 2 missed
        s = reg.begin(t_ns=T0, cls=chat, prompt_tokens=200, request_id="a")
        t = T0 + 400 * MS
        s.token(t_ns=t)
        for g in [120] + [10] * 10:
            t += g * MS
            s.token(t_ns=t)
        s.end(t_ns=t)
        # B: its own 700 ms / 80 ms (D 80), TTFT 300 ms, gaps 40 40: met
        s = reg.begin(t_ns=T0, cls=chat, request_id="b", ttft_slo_ns=700 * MS, tpot_slo_ns=80 * MS)
        for t in (T0 + 300 * MS, T0 + 340 * MS, T0 + 380 * MS):
            s.token(t_ns=t)
        s.end(t_ns=T0 + 380 * MS)
        snap = reg.snapshot()
        a, b = snap.slowest("ttft", cls="chat")
        self.assertEqual((a.request_id, a.deadlines, a.deadlines_missed), ("a", 12, 2))
        self.assertEqual(a.fluidity, 1.0 - 2.0 / 12.0)
        self.assertEqual((a.token_deadline_ns, a.ttft_slo_ns, a.tpot_slo_ns),
                         (50 * MS, 300 * MS, 50 * MS))
        self.assertEqual((b.request_id, b.deadlines, b.deadlines_missed, b.fluidity), ("b", 2, 0, 1.0))
        self.assertEqual((b.token_deadline_ns, b.ttft_slo_ns, b.tpot_slo_ns),
                         (80 * MS, 700 * MS, 80 * MS))
        # through the encoding
        back = ttft.Snapshot.decode(snap.encode())
        self.assertEqual(back.slowest("ttft", cls="chat"), [a, b])
        # a stream without a TPOT budget has no token deadlines
        plain = reg.add_class("plain")
        s = reg.begin(t_ns=T0, cls=plain)
        s.token(t_ns=T0 + 5 * MS)
        s.end(t_ns=T0 + 6 * MS)
        (p,) = reg.snapshot().slowest("ttft", cls="plain")
        self.assertEqual((p.deadlines, p.fluidity, p.token_deadline_ns, p.ttft_slo_ns), (0, 1.0, None, None))


if __name__ == "__main__":
    unittest.main()
