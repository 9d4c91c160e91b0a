"""Issue 12.5: arguments that used to be silently misread.

  * s.token(150_000_000) meant as a timestamp: t_ns is keyword-only in
    token(), end(), mark_*() and step_emitted(), and a token count above
    ttft.MAX_TOKENS_PER_EMISSION is refused unless allow_large=True;
  * a replayed trace whose first timestamp is 0: 0 means "now" to the C
    library, so an explicit t_ns=0 is refused everywhere; None is the only
    "now".
Every check also proves that nothing reached the library.
"""

import fractions
import time
import unittest

from support import MS, T0, registry, ttft

BIG = ttft.MAX_TOKENS_PER_EMISSION


def counters(reg):
    snap = reg.snapshot()
    return {k: snap.counter(k) for k in ("begun", "tokens", "completed", "cancelled", "stale",
                                           "preemptions", "clock_clamped")}


class KeywordOnlyTimestamps(unittest.TestCase):
    def setUp(self):
        self.reg = registry()
        self.s = self.reg.begin(t_ns=T0)

    def test_token_timestamp_is_keyword_only(self):
        with self.assertRaises(TypeError):
            self.s.token(1, T0 + MS)            # the 1.0 spelling: now an error
        self.s.token(1, t_ns=T0 + MS)
        self.s.token(2, t_ns=T0 + 2 * MS)
        self.assertEqual(self.s.stats().tokens, 3)

    def test_end_and_marks_timestamp_is_keyword_only(self):
        with self.assertRaises(TypeError):
            self.s.mark_scheduled(T0 + MS)
        with self.assertRaises(TypeError):
            self.s.mark_preempted(T0 + MS)
        with self.assertRaises(TypeError):
            self.s.end("completed", T0 + MS)
        self.assertEqual(counters(self.reg)["preemptions"], 0)
        self.assertFalse(self.s.ended)
        self.s.mark_scheduled(t_ns=T0 + MS)
        self.s.mark_preempted(t_ns=T0 + 2 * MS)
        self.s.end("completed", t_ns=T0 + 3 * MS)
        snap = self.reg.snapshot()
        self.assertEqual(snap.counter("preemptions"), 1)
        self.assertEqual(snap.quantile("e2e", 1.0), 0.003)

    def test_step_emitted_timestamp_is_keyword_only(self):
        with self.assertRaises(TypeError):
            self.reg.step_emitted([self.s], None, T0 + MS)
        with self.assertRaises(TypeError):
            self.reg.step_emitted([self.s], [1], T0 + MS)
        self.assertEqual(counters(self.reg)["tokens"], 0)
        self.assertEqual(self.reg.step_emitted([self.s], [1], t_ns=T0 + MS), 1)

    def test_begin_keeps_its_positional_timestamp(self):
        s = self.reg.begin(T0 + 5 * MS)
        self.assertEqual(s.stats().t_begin_ns, T0 + 5 * MS)
        s.end(t_ns=T0 + 6 * MS)


class TokenCountBound(unittest.TestCase):
    def setUp(self):
        self.reg = registry()
        self.s = self.reg.begin(t_ns=T0)

    def test_a_timestamp_passed_as_n_is_refused(self):
        with self.assertRaises(ValueError) as cm:
            self.s.token(150_000_000)
        msg = str(cm.exception)
        self.assertIn("t_ns=", msg)
        self.assertIn("allow_large=True", msg)
        self.assertIn(str(BIG), msg)
        self.assertEqual(counters(self.reg)["tokens"], 0)
        self.assertEqual(self.s.stats().emissions, 0)

    def test_every_timestamp_shape_gets_the_hint(self):
        # time.monotonic_ns() is above 2**32 after 4.3 s of uptime and
        # time.time_ns() always; floats are time.monotonic() / time.time()
        other = self.reg.begin(t_ns=T0)
        for bad in (time.monotonic_ns(), time.time_ns(), 2**32, 2**64, 2**70, 150_000_000,
                    time.monotonic(), time.time(), 1.0, float("nan"), fractions.Fraction(3, 2)):
            calls = (lambda: self.s.token(bad),
                     lambda: self.s.token(bad, allow_large=True),
                     lambda: self.reg.step_emitted([self.s, other], bad),
                     lambda: self.reg.step_emitted([self.s, other], [1, bad]),
                     lambda: self.reg.step_emitted([self.s, other], (bad, 1), allow_large=True))
            for i, call in enumerate(calls):
                if isinstance(bad, int) and bad <= 2**32 - 1 and i in (1, 4):
                    continue  # allow_large: a real (if huge) count
                with self.assertRaises((ValueError, TypeError), msg="%r call %d" % (bad, i)) as cm:
                    call()
                self.assertIn("was a timestamp passed as the token count?", str(cm.exception),
                              "%r call %d" % (bad, i))
                self.assertIn("t_ns=", str(cm.exception))
        # instrument's count() results too
        with self.assertRaises(ValueError) as cm:
            list(self.reg.instrument(["x"], count=lambda item: time.monotonic_ns()))
        self.assertIn("was a timestamp passed", str(cm.exception))
        self.assertEqual(counters(self.reg)["tokens"], 0)
        self.assertEqual(self.s.stats().emissions, 0)

    def test_non_counts_that_are_not_times_get_no_hint(self):
        for bad, err in ((0, ValueError), (-1, ValueError), ("3", TypeError), (None, TypeError),
                         (True, TypeError)):
            with self.assertRaises(err) as cm:
                self.s.token(bad)
            self.assertNotIn("timestamp", str(cm.exception), repr(bad))

    def test_the_bound_is_inclusive(self):
        self.assertEqual(BIG, 1 << 20)
        self.s.token(BIG, t_ns=T0 + MS)
        with self.assertRaises(ValueError):
            self.s.token(BIG + 1, t_ns=T0 + 2 * MS)
        self.assertEqual(counters(self.reg)["tokens"], BIG)

    def test_allow_large_lets_a_real_count_through(self):
        self.s.token(150_000_000, t_ns=T0 + MS, allow_large=True)
        self.assertEqual(counters(self.reg)["tokens"], 150_000_000)
        with self.assertRaises(ValueError):       # still a uint32_t
            self.s.token(2**32, t_ns=T0 + 2 * MS, allow_large=True)

    def test_a_dropped_stream_checks_its_arguments_too(self):
        reg = registry(max_inflight=1)
        reg.begin(t_ns=T0)
        dropped = reg.begin(t_ns=T0)
        self.assertTrue(dropped.dropped)
        with self.assertRaises(ValueError):
            dropped.token(150_000_000)
        with self.assertRaises(ValueError):
            dropped.token(t_ns=0)
        with self.assertRaises(TypeError):
            dropped.end("completed", 5)
        dropped.token(t_ns=T0 + 1)               # valid calls stay silent no-ops

    def test_step_emitted_counts_are_bounded_too(self):
        other = self.reg.begin(t_ns=T0)
        for bad in ([1, BIG + 1], BIG + 1):
            with self.assertRaises(ValueError) as cm:
                self.reg.step_emitted([self.s, other], bad, t_ns=T0 + MS)
            self.assertIn("allow_large=True", str(cm.exception))
        self.assertEqual(counters(self.reg)["tokens"], 0)
        self.assertEqual(self.reg.step_emitted([self.s, other], [1, BIG + 1], t_ns=T0 + MS,
                                               allow_large=True), 2)
        self.assertEqual(counters(self.reg)["tokens"], BIG + 2)


class ZeroIsNotATimestamp(unittest.TestCase):
    def test_every_timestamp_argument_refuses_zero(self):
        reg = registry()
        s = reg.begin(t_ns=T0)
        calls = {
            "token": lambda: s.token(t_ns=0),
            "mark_scheduled": lambda: s.mark_scheduled(t_ns=0),
            "mark_preempted": lambda: s.mark_preempted(t_ns=0),
            "end": lambda: s.end("cancelled", t_ns=0),
            "begin": lambda: reg.begin(t_ns=0),
            "begin positional": lambda: reg.begin(0),
            "stream": lambda: reg.stream(t_ns=0),
            "instrument": lambda: reg.instrument([1], t_ns=0),
            "step_emitted": lambda: reg.step_emitted([s], t_ns=0),
            "stalled_now": lambda: reg.stalled_now(now_ns=0),
        }
        for name, call in calls.items():
            with self.assertRaises(ValueError, msg=name) as cm:
                call()
            self.assertIn("None", str(cm.exception), name)
        self.assertEqual(counters(reg), dict(begun=1, tokens=0, completed=0, cancelled=0,
                                             stale=0, preemptions=0, clock_clamped=0))
        self.assertFalse(s.ended)

    def test_replaying_a_trace_that_starts_at_zero_fails_at_once(self):
        # A trace of (event, relative ns): the first timestamp is 0. With 0
        # read as "now" the begin would take the live clock (hours since
        # boot), every later event would be "earlier" and be clamped: TTFT
        # 0, silently. Now the first call says so.
        trace = [("begin", 0), ("token", 150 * MS), ("token", 180 * MS), ("end", 200 * MS)]
        reg = registry()
        with self.assertRaises(ValueError) as cm:
            for event, t in trace:
                if event == "begin":
                    s = reg.begin(t_ns=t)
                elif event == "token":
                    s.token(t_ns=t)
                else:
                    s.end(t_ns=t)
        self.assertIn("shift the trace", str(cm.exception))
        self.assertEqual(counters(reg)["begun"], 0)
        # Shifted by a base time, the same trace replays exactly.
        for event, t in trace:
            if event == "begin":
                s = reg.begin(t_ns=T0 + t)
            elif event == "token":
                s.token(t_ns=T0 + t)
            else:
                s.end(t_ns=T0 + t)
        snap = reg.snapshot()
        self.assertEqual(snap.quantile("ttft", 1.0), 0.150)
        self.assertEqual(snap.quantile("itl", 1.0), 0.030)
        self.assertEqual(snap.counter("clock_clamped"), 0)

    def test_none_is_now_and_mixes_with_explicit_times(self):
        reg = registry()
        t0 = ttft.now_ns()
        s = reg.begin(t_ns=t0)              # arrival stamped by the caller
        s.token()                           # None: the library reads the clock
        s.token(t_ns=ttft.now_ns())
        s.end()
        snap = reg.snapshot()
        self.assertEqual(snap.counter("clock_clamped"), 0)
        self.assertEqual(snap.count("ttft"), 1)
        self.assertGreaterEqual(snap.quantile_ns("ttft", 1.0), 1)

    def test_bad_timestamp_types(self):
        reg = registry()
        s = reg.begin(t_ns=T0)
        for bad in (1.5, "now", True, b"1"):
            for call in (lambda: s.token(t_ns=bad), lambda: s.end(t_ns=bad),
                         lambda: s.mark_scheduled(t_ns=bad), lambda: reg.step_emitted([s], t_ns=bad)):
                with self.assertRaises(TypeError, msg=repr(bad)):
                    call()
        for bad in (-1, 2**64):
            for call in (lambda: s.token(t_ns=bad), lambda: s.end(t_ns=bad),
                         lambda: s.mark_preempted(t_ns=bad), lambda: reg.step_emitted([s], t_ns=bad)):
                with self.assertRaises(ValueError, msg=repr(bad)):
                    call()
        self.assertEqual(counters(reg)["tokens"], 0)
        self.assertFalse(s.ended)


if __name__ == "__main__":
    unittest.main()
