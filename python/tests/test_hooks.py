"""Hooks with explicit timestamps give exact, known values."""

import unittest

from support import MS, S, T0, registry, ttft


class Scenario(unittest.TestCase):
    """Four streams with hand-computed metrics."""

    @classmethod
    def setUpClass(cls):
        reg = cls.reg = registry(stall_threshold=0.1)
        chat = cls.chat = reg.add_class("chat", ttft_slo=0.5, tpot_slo=0.05)
        # 1: chat, scheduled after 10 ms, tokens 1+1+2 at 100/120/150 ms, completed at 200 ms
        s = reg.begin(t_ns=T0, cls=chat, prompt_tokens=812, prefix_hit=False)
        s.mark_scheduled(t_ns=T0 + 10 * MS)
        s.token(t_ns=T0 + 100 * MS)
        s.token(1, t_ns=T0 + 120 * MS)
        s.token(n=2, t_ns=T0 + 150 * MS)
        s.end("completed", t_ns=T0 + 200 * MS)
        # 2: default class, one token at 1 s, completed at 1.5 s (no TPOT)
        s = reg.begin(t_ns=T0)
        s.token(t_ns=T0 + 1 * S)
        s.end(t_ns=T0 + 1500 * MS)
        # 3: chat, cancelled at 300 ms before any token (abandoned)
        s = reg.begin(t_ns=T0, cls="chat", prefix_hit=True)
        s.end("cancelled", t_ns=T0 + 300 * MS)
        # 4: chat, tokens at 50 ms and 350 ms (a 300 ms stall), error at 400 ms
        s = reg.begin(t_ns=T0, cls=chat)
        s.token(t_ns=T0 + 50 * MS)
        s.token(t_ns=T0 + 350 * MS)
        s.end("error", t_ns=T0 + 400 * MS)
        cls.snap = reg.snapshot()

    def test_counters(self):
        expect = dict(begun=4, completed=2, cancelled=1, errors=1, dropped=0, tokens=7,
                      stalls=1, stalled_seqs=1, abandoned=1, slo_met=2, clock_clamped=0,
                      preemptions=0, no_tpot=2, stale=0, slo_judged=3, trace_id_invalid=0,
                      barrier_fallbacks=0, clock_refused=0, publish_failed=0,
                      segments_skipped=0, processes_exited=0,
                      # 1.3 fluidity, D = 50 ms: stream 1 meets 1 + 2 (the
                      # 2-token emission), stream 4's 300 ms gap misses
                      # floor((300 - 50) / 50) + 1 = 6; 1 fluid, 1 + 4 judged
                      token_deadlines=9, token_deadlines_missed=6, fluid=1,
                      fluid_judged=2)
        self.assertEqual(self.snap.counters(), expect)

    def test_ttft(self):
        snap = self.snap
        self.assertEqual(snap.count("ttft"), 3)
        self.assertEqual(snap.quantile("ttft", 0.0), 0.050)
        self.assertEqual(snap.quantile("ttft", 1.0), 1.0)
        self.assertEqual(snap.quantile_ns("ttft", 0.0), 50 * MS)
        self.assertAlmostEqual(snap.sum("ttft"), 1.150, places=9)
        self.assertAlmostEqual(snap.mean("ttft"), 1.150 / 3, places=9)

    def test_ttft_per_class(self):
        snap, chat = self.snap, self.chat
        self.assertEqual(snap.count("ttft", cls=chat), 2)
        self.assertEqual(snap.quantile("ttft", 0.0, cls=chat), 0.050)
        self.assertEqual(snap.quantile("ttft", 1.0, cls=chat), 0.100)
        self.assertEqual(snap.count("ttft", cls="default"), 1)
        self.assertEqual(snap.quantile("ttft", 0.99, cls=0), 1.0)

    def test_itl_and_tpot(self):
        snap = self.snap
        self.assertEqual(snap.count("itl"), 3)            # 20 ms, 30 ms, 300 ms
        self.assertEqual(snap.quantile("itl", 0.0), 0.020)
        self.assertEqual(snap.quantile("itl", 1.0), 0.300)
        self.assertAlmostEqual(snap.sum("itl"), 0.350, places=9)
        self.assertEqual(snap.count("tpot"), 2)           # streams 1 and 4
        self.assertEqual(snap.quantile_ns("tpot", 0.0), 50 * MS // 3)
        self.assertEqual(snap.quantile_ns("tpot", 1.0), 300 * MS)

    def test_e2e_queue_prefill_decode(self):
        snap = self.snap
        self.assertEqual(snap.count("e2e"), 4)
        self.assertEqual(snap.quantile("e2e", 0.0), 0.200)
        self.assertEqual(snap.quantile("e2e", 1.0), 1.5)
        self.assertAlmostEqual(snap.sum("e2e"), 0.2 + 1.5 + 0.3 + 0.4, places=9)
        self.assertEqual(snap.count("queue"), 1)
        self.assertEqual(snap.quantile("queue", 0.5), 0.010)
        self.assertEqual(snap.count("prefill"), 1)
        self.assertEqual(snap.quantile("prefill", 0.5), 0.090)
        self.assertEqual(snap.count("decode"), 3)
        self.assertEqual(snap.quantile("decode", 1.0), 0.300)

    def test_output_tokens_are_tokens_not_seconds(self):
        snap = self.snap
        self.assertEqual(snap.count("output_tokens"), 4)
        self.assertEqual(snap.quantile("output_tokens", 1.0), 4)
        self.assertIsInstance(snap.quantile("output_tokens", 1.0), int)
        self.assertEqual(snap.sum("output_tokens"), 7)
        self.assertEqual(snap.mean("output_tokens"), 7 / 4)

    def test_per_sequence_gaps_and_abandoned(self):
        snap = self.snap
        self.assertEqual(snap.count("seq_itl_max"), 2)
        self.assertEqual(snap.quantile("seq_itl_max", 0.0), 0.030)
        self.assertEqual(snap.quantile("seq_itl_max", 1.0), 0.300)
        self.assertEqual(snap.count("abandoned_wait"), 1)
        self.assertEqual(snap.quantile("abandoned_wait", 0.5), 0.300)

    def test_attainment(self):
        snap = self.snap
        # chat: stream 3 was cancelled at 300 ms, before its 500 ms TTFT
        # budget: not judged. 1 good of 2 judged (the completed, the error)
        self.assertEqual(snap.attainment(self.chat), 1 / 2)
        self.assertEqual(snap.attainment("default"), 1.0)
        self.assertEqual(snap.attainment(), 2 / 3)
        self.assertEqual(snap.counter("slo_met", cls=self.chat), 1)
        self.assertEqual(snap.counter("slo_judged", cls=self.chat), 2)

    def test_cancelled_after_a_missed_budget_is_judged(self):
        reg = registry()
        chat = reg.add_class("chat", ttft_slo=0.5, tpot_slo=0.05, e2e_slo=2.0)
        ends = [(None, 400 * MS, False),             # no token, left before 500 ms
                (None, 600 * MS, True),              # no token by the TTFT budget
                ((100 * MS, 60 * MS), 400 * MS, True),   # TPOT so far 60 ms > 50 ms
                ((100 * MS, 40 * MS), 1900 * MS, False),  # within every budget so far
                ((100 * MS, 40 * MS), 2100 * MS, True)]   # past the E2E budget
        for first, end, _ in ends:
            s = reg.begin(t_ns=T0, cls=chat)
            if first:
                s.token(t_ns=T0 + first[0])
                s.token(t_ns=T0 + first[0] + first[1])
            s.end("cancelled", t_ns=T0 + end)
        snap = reg.snapshot()
        self.assertEqual(snap.counter("slo_judged", cls=chat), sum(j for *_, j in ends))
        self.assertEqual(snap.counter("slo_met", cls=chat), 0)
        self.assertEqual(snap.attainment(chat), 0.0)

    def test_splits(self):
        snap = self.snap
        self.assertEqual(snap.split_count("prefix_cache", 0), 1)  # stream 1: miss
        self.assertEqual(snap.split_count("prefix_cache", 1), 0)  # stream 3 hit, no token
        self.assertEqual(snap.split_quantile("prefix_cache", 0, 0.5), 0.100)
        bands = snap.bands()
        self.assertEqual(len(bands), 7)
        self.assertEqual(bands[0], (0, 128))
        self.assertEqual(bands[2], (512, 2048))
        self.assertEqual(snap.split_count("prompt_band", 2), 1)  # 812 tokens

    def test_classes_and_labels(self):
        snap = self.snap
        self.assertEqual(snap.classes, ["default", "chat"])
        self.assertEqual(snap.class_slo(self.chat),
                         {"ttft": 0.5, "tpot": 0.05, "e2e": None,
                          "stall_threshold": 0.1})  # the effective budget (registry default)
        self.assertEqual(snap.label("start_point"), "server_arrival")
        self.assertEqual(snap.label("token_point"), "detokenized_flush")
        self.assertIsNone(snap.label("nope"))

    def test_gauges_after_all_ended(self):
        self.assertEqual(self.snap.gauge("inflight"), 0)
        self.assertEqual(self.snap.gauge("live_stalls"), 0)
        self.assertEqual(self.reg.inflight(), 0)


class LiveState(unittest.TestCase):
    def test_inflight_and_stalled_now(self):
        reg = registry(stall_threshold=0.1)
        a = reg.begin(t_ns=T0)
        b = reg.begin(t_ns=T0)
        c = reg.begin(t_ns=T0)
        a.token(t_ns=T0 + 10 * MS)
        b.token(t_ns=T0 + 10 * MS)
        b.token(t_ns=T0 + 150 * MS)
        self.assertEqual(reg.inflight(), 3)
        # at 200 ms: a's last token is 190 ms old (stalled), b's 50 ms, c has no token
        self.assertEqual(reg.stalled_now(now_ns=T0 + 200 * MS), 1)
        self.assertEqual(reg.stalled_now(now_ns=T0 + 300 * MS), 2)
        for s in (a, b, c):
            s.end(t_ns=T0 + 400 * MS)
        self.assertEqual(reg.inflight(), 0)
        self.assertEqual(reg.stalled_now(now_ns=T0 + 10 * S), 0)

    def test_class_stall_budget_overrides_registry(self):
        reg = registry(stall_threshold=1.0)
        fast = reg.add_class("fast", stall_threshold=0.010)
        s = reg.begin(t_ns=T0, cls=fast)
        s.token(t_ns=T0 + 1 * MS)
        s.token(t_ns=T0 + 21 * MS)
        self.assertEqual(s.stats().stalls, 1)
        s.end(t_ns=T0 + 30 * MS)
        self.assertEqual(reg.snapshot().counter("stalls"), 1)

    def test_clock_going_backwards_is_clamped_and_counted(self):
        reg = registry()
        s = reg.begin(t_ns=T0)
        s.token(t_ns=T0 + 100 * MS)
        s.token(t_ns=T0 + 50 * MS)
        s.end(t_ns=T0 + 200 * MS)
        snap = reg.snapshot()
        self.assertEqual(snap.counter("clock_clamped"), 1)
        self.assertEqual(snap.quantile("itl", 0.0), 0.0)

    def test_preempted_and_rescheduled(self):
        reg = registry()
        s = reg.begin(t_ns=T0)
        s.mark_scheduled(t_ns=T0 + 5 * MS)
        s.mark_preempted(t_ns=T0 + 6 * MS)
        s.mark_scheduled(t_ns=T0 + 9 * MS)  # re-admission: t_sched stays
        s.token(t_ns=T0 + 20 * MS)
        s.end(t_ns=T0 + 30 * MS)
        snap = reg.snapshot()
        self.assertEqual(snap.counter("preemptions"), 1)
        self.assertEqual(snap.quantile("queue", 1.0), 0.005)
        self.assertEqual(snap.quantile("prefill", 1.0), 0.015)

    def test_now_timestamps(self):
        reg = registry()
        s = reg.begin()
        s.mark_scheduled()
        s.token()
        s.token(2)
        st = s.stats()
        self.assertEqual((st.emissions, st.tokens), (2, 3))
        s.end()
        snap = reg.snapshot()
        self.assertEqual(snap.count("ttft"), 1)
        self.assertEqual(snap.counter("tokens"), 3)

    def test_dropped_stream_is_a_silent_no_op(self):
        reg = registry(max_inflight=1)
        a = reg.begin(t_ns=T0)
        b = reg.begin(t_ns=T0)
        self.assertFalse(a.dropped)
        self.assertTrue(b.dropped)
        self.assertEqual(b.handle, 0)
        b.mark_scheduled(t_ns=T0 + 1)
        b.token(t_ns=T0 + 2)
        b.end("completed", t_ns=T0 + 3)
        self.assertEqual(b.status, "completed")
        a.end(t_ns=T0 + 4)
        snap = reg.snapshot()
        self.assertEqual(snap.counter("dropped"), 1)
        self.assertEqual(snap.counter("begun"), 1)
        self.assertEqual(snap.counter("completed"), 1)

    def test_stream_properties(self):
        reg = registry()
        chat = reg.add_class("chat")
        s = reg.begin(cls="chat")
        self.assertEqual(s.cls, chat)
        self.assertFalse(s.ended)
        self.assertNotEqual(s.handle, 0)
        s.end("cancelled")
        self.assertTrue(s.ended)
        self.assertEqual(s.status, "cancelled")
        self.assertEqual(reg.find_class("chat"), chat)
        with self.assertRaises(KeyError):
            reg.find_class("nope")

    def test_config_options_reach_the_snapshot(self):
        reg = ttft.Registry(max_inflight=8, stall_threshold=0.25, start_point="client_send",
                            token_point="sse_write", model="tiny-llm", namespace="svc_",
                            labels={"region": "eu"}, prompt_bands=[100, 1000],
                            prom_buckets={"ttft": [0.1, 0.5, 1.0], "output_tokens": [10, 100]},
                            prom_summaries=True, max_threads=2, max_classes=4)
        snap = reg.snapshot()
        self.assertEqual(snap.label("start_point"), "client_send")
        self.assertEqual(snap.label("token_point"), "sse_write")
        self.assertEqual(snap.label("model"), "tiny-llm")
        self.assertEqual(snap.label("namespace"), "svc_")
        self.assertEqual(snap.bands(), [(0, 100), (100, 1000), (1000, 2**32 - 1)])
        prom = snap.to_prometheus()
        self.assertIn('region="eu"', prom)
        self.assertIn('le="0.5"', prom)


if __name__ == "__main__":
    unittest.main()
