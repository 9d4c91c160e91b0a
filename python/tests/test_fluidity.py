"""Issue 29 from Python: a request's own budgets on begin, the 1.3 class
fields (length-aware TTFT, token deadline, fluid_min), the fluidity
counters and SeqStats' fluidity, with the values test_fluidity.c checks."""
import unittest

from support import MS, T0, registry, ttft


class Fluidity(unittest.TestCase):
    def test_late_stall_after_slack(self):
        r = registry()
        c = r.add_class("chat", tpot_slo_ms=50)
        s = r.begin(t_ns=T0, cls=c)
        t = T0 + 100 * MS
        s.token(t_ns=t)
        for g in (40, 40, 200, 40):   # slack 10, 20; 200 misses 3; met
            t += g * MS
            s.token(t_ns=t)
        st = s.stats()
        self.assertEqual(st.deadlines, 6)
        self.assertEqual(st.deadlines_missed, 3)
        self.assertEqual(st.fluidity, 0.5)
        s.end(t_ns=t)
        snap = r.snapshot()
        self.assertEqual(snap.counter("token_deadlines", c), 6)
        self.assertEqual(snap.counter("token_deadlines_missed", c), 3)
        self.assertEqual(snap.counter("fluid", c), 0)
        self.assertEqual(snap.counter("fluid_judged", c), 1)
        self.assertIn("fluid_judged", ttft.COUNTERS)

    def test_own_budgets_and_length_aware_deadline(self):
        r = registry()
        c = r.add_class("long", ttft_slo_ms=100, ttft_ns_per_prompt_token=MS,
                        token_deadline_ms=20, fluid_min=0.8)
        # 499 tokens: deadline 599 ms, TTFT 600 ms misses; own 700 ms meets
        for own in (None, 700 * MS):
            s = r.begin(t_ns=T0, cls=c, prompt_tokens=499, ttft_slo_ns=own)
            self.assertEqual(s.stats().ttft_slo_ns, own or 599 * MS)
            s.token(t_ns=T0 + 600 * MS)
            s.end(t_ns=T0 + 600 * MS)
        snap = r.snapshot()
        self.assertEqual(snap.counter("slo_met", c), 1)
        self.assertEqual(snap.counter("slo_judged", c), 2)
        s = r.begin(t_ns=T0, tpot_slo_ns=50 * MS)
        self.assertEqual(s.stats().tpot_slo_ns, 50 * MS)
        s.end(t_ns=T0 + MS, status="cancelled")
        with self.assertRaises(ValueError):
            r.add_class("bad", fluid_min=1.5)


if __name__ == "__main__":
    unittest.main()
