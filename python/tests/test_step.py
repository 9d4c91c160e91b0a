"""Registry.step_emitted: one C call per decode step records exactly what one
Stream.token() per stream would, including streams that were cancelled
while still in the batch, dropped streams and multi-token steps."""

import random
import threading
import unittest
from array import array

from support import MS, T0, registry, ttft

QS = (0.0, 0.1, 0.5, 0.9, 0.99, 1.0)


def assert_same_recording(test, a, b, skip_counters=()):
    """Every metric (count, sum, quantiles) and counter of snapshots a, b."""
    for m in ttft.METRICS:
        test.assertEqual(a.count(m), b.count(m), m)
        test.assertEqual(a.sum(m), b.sum(m), m)
        for q in QS:
            test.assertEqual(a.quantile_ns(m, q), b.quantile_ns(m, q), (m, q))
    for c in ttft.COUNTERS:
        if c not in skip_counters:
            test.assertEqual(a.counter(c), b.counter(c), c)
    for st in ttft.STATUSES:
        for m in ttft.STATUS_VIEW_METRICS:
            test.assertEqual(a.count(m, status=st), b.count(m, status=st), (m, st))
            test.assertEqual(a.quantile_ns(m, 0.5, status=st), b.quantile_ns(m, 0.5, status=st),
                             (m, st))


class Equivalence(unittest.TestCase):
    def run_workload(self, seed, steps=120, multi=False):
        """Drive two registries with one random workload: `step` records
        each decode step with step_emitted, `ref` with per-stream token()."""
        rng = random.Random(seed)
        kw = dict(max_inflight=16, stall_threshold=0.030)
        step, ref = registry(**kw), registry(**kw)
        chat_s, chat_r = step.add_class("chat"), ref.add_class("chat")
        live = []            # [(stream in step, stream in ref)]
        ended = []           # pairs whose streams ended, kept around for a while
        t = T0
        expect_stale = expect_accepted = 0
        for k in range(steps):
            t += rng.randrange(1, 60) * MS
            # arrivals (some are dropped once the 16 slots are taken)
            for _ in range(rng.randrange(0, 4)):
                cls = rng.random() < 0.5
                pt = rng.choice((None, 100, 3000))
                a = step.begin(t_ns=t, cls=chat_s if cls else None, prompt_tokens=pt)
                b = ref.begin(t_ns=t, cls=chat_r if cls else None, prompt_tokens=pt)
                self.assertEqual(a.dropped, b.dropped)
                if rng.random() < 0.3:
                    a.mark_scheduled(t_ns=t + MS)
                    b.mark_scheduled(t_ns=t + MS)
                live.append((a, b))
            t += 2 * MS
            # the decode step: most live streams, plus a few that ended
            # (cancelled by their client while the engine had them batched)
            batch = [p for p in live if rng.random() < 0.85]
            batch += [p for p in ended[-6:] if rng.random() < 0.5]
            rng.shuffle(batch)
            if multi:
                ns = [rng.choice((0, 1, 1, 2, 3, 7)) for _ in batch]
            else:
                ns = None
            got = step.step_emitted([a for a, _ in batch], ns, t_ns=t)
            accepted = 0
            for i, (_, b) in enumerate(batch):
                n = 1 if ns is None else ns[i]
                if n == 0:
                    continue
                if b.ended:
                    with self.assertRaises(ttft.StaleHandleError):
                        b.token(n, t_ns=t)
                    expect_stale += 1
                    continue
                b.token(n, t_ns=t)          # a dropped stream: a silent no-op
                if not b.dropped:
                    accepted += 1
            self.assertEqual(got, accepted, "step %d" % k)
            expect_accepted += accepted
            # ends: completions, cancels (client gone) and errors
            for pair in list(live):
                r = rng.random()
                if r < 0.10:
                    status = "completed" if r < 0.06 else ("cancelled" if r < 0.09 else "error")
                    te = t + rng.randrange(0, 3) * MS
                    pair[0].end(status, t_ns=te)
                    pair[1].end(status, t_ns=te)
                    live.remove(pair)
                    if not pair[0].dropped:
                        ended.append(pair)
        for a, b in live:
            a.end("completed", t_ns=t + 100 * MS)
            b.end("completed", t_ns=t + 100 * MS)
        return step.snapshot(), ref.snapshot(), expect_stale, expect_accepted

    def test_single_token_steps_with_cancels(self):
        for seed in range(4):
            a, b, stale, accepted = self.run_workload(seed)
            assert_same_recording(self, a, b, skip_counters=("stale",))
            # the step passed ended handles: the library counted them, the
            # per-stream calls raised in Python instead
            self.assertEqual(a.counter("stale"), stale)
            self.assertEqual(b.counter("stale"), 0)
            self.assertGreater(stale, 0, "the workload must exercise ended streams")
            self.assertGreater(a.counter("dropped"), 0, "the workload must drop some begins")
            self.assertGreater(a.counter("stalls"), 0)
            self.assertGreater(accepted, 200)

    def test_multi_token_steps(self):
        for seed in (11, 12):
            a, b, stale, accepted = self.run_workload(seed, multi=True)
            assert_same_recording(self, a, b, skip_counters=("stale",))
            self.assertEqual(a.counter("stale"), stale)
            self.assertNotEqual(a.count("itl_per_token"), a.count("itl"))


class Semantics(unittest.TestCase):
    def test_returns_accepted_and_counts_tokens(self):
        reg = registry()
        ss = [reg.begin(t_ns=T0) for _ in range(5)]
        self.assertEqual(reg.step_emitted(ss, t_ns=T0 + 10 * MS), 5)
        self.assertEqual(reg.step_emitted(ss, [1, 2, 0, 4, 0], t_ns=T0 + 20 * MS), 3)
        self.assertEqual(reg.step_emitted(ss, 3, t_ns=T0 + 30 * MS), 5)
        self.assertEqual(reg.step_emitted(tuple(ss), array("I", [1] * 5), t_ns=T0 + 40 * MS), 5)
        self.assertEqual(reg.step_emitted(iter(ss[:2]), t_ns=T0 + 50 * MS), 2)
        self.assertEqual(reg.step_emitted([], t_ns=T0 + 60 * MS), 0)
        self.assertEqual([s.stats().tokens for s in ss], [7, 8, 5, 9, 5])
        snap = reg.snapshot()
        self.assertEqual(snap.counter("tokens"), 34)
        self.assertEqual(snap.count("ttft"), 5)
        self.assertEqual(snap.quantile("ttft", 1.0), 0.010)
        self.assertEqual(snap.counter("stale"), 0)

    def test_none_reads_the_clock_once_for_the_whole_step(self):
        reg = registry()
        ss = [reg.begin() for _ in range(40)]
        self.assertEqual(reg.step_emitted(ss), 40)
        stamps = {s.stats().t_last_ns for s in ss}
        self.assertEqual(len(stamps), 1)
        self.assertGreater(stamps.pop(), 0)

    def test_ended_dropped_and_attached_streams(self):
        reg = registry(max_inflight=3)
        a, b, c = (reg.begin(t_ns=T0) for _ in range(3))
        dropped = reg.begin(t_ns=T0)
        self.assertTrue(dropped.dropped)
        b.end("cancelled", t_ns=T0 + MS)           # client left; still in the batch
        twin = reg.attach(c.handle)                 # same sequence via a raw handle
        got = reg.step_emitted([a, b, dropped, twin], [2, 1, 5, 3], t_ns=T0 + 5 * MS)
        self.assertEqual(got, 2)                    # a and c
        self.assertEqual(a.stats().tokens, 2)
        self.assertEqual(c.stats().tokens, 3)
        snap = reg.snapshot()
        self.assertEqual(snap.counter("stale"), 1)  # b only: dropped streams are not stale
        self.assertEqual(snap.counter("tokens"), 5)
        self.assertEqual(snap.counter("dropped"), 1)
        # a batch of nothing but dead streams still makes the library count them
        self.assertEqual(reg.step_emitted([b, dropped], t_ns=T0 + 6 * MS), 0)
        self.assertEqual(reg.snapshot().counter("stale"), 2)

    def test_argument_checks(self):
        reg, other = registry(), registry()
        s = reg.begin(t_ns=T0)
        foreign = other.begin(t_ns=T0)
        cases = [
            (TypeError, lambda: reg.step_emitted(s)),                  # not a list
            (TypeError, lambda: reg.step_emitted([s, 42])),
            (TypeError, lambda: reg.step_emitted([s, None])),
            (TypeError, lambda: reg.step_emitted("abc")),
            (ValueError, lambda: reg.step_emitted([s, foreign])),      # another registry
            (ValueError, lambda: reg.step_emitted([s], [1, 1])),       # length mismatch
            (ValueError, lambda: reg.step_emitted([s], [-1])),
            (ValueError, lambda: reg.step_emitted([s], [2**32])),
            (ValueError, lambda: reg.step_emitted([s], -1)),
            (TypeError, lambda: reg.step_emitted([s], [1.5])),
            (TypeError, lambda: reg.step_emitted([s], 1.0)),
            (TypeError, lambda: reg.step_emitted([s], True)),
            (TypeError, lambda: reg.step_emitted([s], b"\x01\x00\x00\x00")),
            (TypeError, lambda: reg.step_emitted([s], "1")),
        ]
        for exc, call in cases:
            with self.assertRaises(exc):
                call()
        # an ended stream of another registry is still refused (its handle
        # could name a live sequence of this one)
        foreign.end(t_ns=T0 + 1)
        with self.assertRaises(ValueError):
            reg.step_emitted([foreign])
        snap = reg.snapshot()
        self.assertEqual(snap.counter("tokens"), 0)
        self.assertEqual(snap.counter("stale"), 0)
        self.assertEqual(other.snapshot().counter("tokens"), 0)

    def test_closed_registry(self):
        reg = registry()
        s = reg.begin(t_ns=T0)
        reg.close()
        with self.assertRaises(ttft.ClosedError):
            reg.step_emitted([s])
        with self.assertRaises(ttft.ClosedError):
            reg.step_emitted([])

    def test_threads_step_their_own_batches(self):
        reg = registry(max_inflight=256)
        errors, totals = [], []

        def engine(k):
            try:
                batch = [reg.begin(t_ns=T0) for _ in range(32)]
                got = 0
                for step in range(1, 201):
                    got += reg.step_emitted(batch, t_ns=T0 + step * MS)
                for s in batch:
                    s.end(t_ns=T0 + 300 * MS)
                totals.append(got)
            except BaseException as e:
                errors.append(e)

        ths = [threading.Thread(target=engine, args=(k,)) for k in range(4)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        self.assertEqual(errors, [])
        self.assertEqual(totals, [32 * 200] * 4)
        snap = reg.snapshot()
        self.assertEqual(snap.counter("tokens"), 4 * 32 * 200)
        self.assertEqual(snap.count("itl"), 4 * 32 * 199)
        self.assertEqual(snap.quantile("itl", 0.0), 0.001)
        self.assertEqual(snap.quantile("itl", 1.0), 0.001)


if __name__ == "__main__":
    unittest.main()


class EngineSteps(unittest.TestCase):
    """Registry.engine_step and the stall causes it makes possible (1.2)."""

    def test_causes_and_step_histograms(self):
        reg = registry(stall_threshold=0.2)
        s = reg.begin(t_ns=T0)
        t = T0
        for _ in range(8):  # 20 ms decode steps
            reg.engine_step(0, 1, t_start_ns=t, t_end_ns=t + 20 * MS)
            s.token(t_ns=t + 20 * MS)
            t += 21 * MS
        reg.engine_step(prefill_tokens=8000, decode_seqs=1, t_start_ns=t, t_end_ns=t + 600 * MS)
        s.token(t_ns=t + 600 * MS)
        t += 601 * MS
        s.mark_preempted(t_ns=t)
        for _ in range(20):
            reg.engine_step(t_start_ns=t, t_end_ns=t + 20 * MS)
            t += 21 * MS
        s.mark_resumed(t_ns=t)
        s.token(t_ns=t)
        t += 2 * 1000 * MS  # a frozen process
        reg.engine_step(t_start_ns=t, t_end_ns=t + 20 * MS)
        s.token(t_ns=t + 20 * MS)
        s.end(t_ns=t + 21 * MS)
        snap = reg.snapshot()
        self.assertEqual(ttft.STALL_CAUSES,
                         ("unknown", "prefill", "preempted", "not_scheduled", "engine_idle",
                          "slow_step"))
        self.assertEqual(snap.stalls_by_cause("prefill"), 1)
        self.assertEqual(snap.stalls_by_cause("preempted"), 1)
        self.assertEqual(snap.stalls_by_cause("engine_idle"), 1)
        self.assertEqual(snap.stalls_by_cause("unknown"), 0)
        self.assertAlmostEqual(snap.stall_seconds_by_cause("prefill"), 0.601, places=9)
        causes = snap.stall_causes()
        self.assertEqual(sum(n for n, _ in causes.values()), snap.counter("stalls"))
        self.assertEqual(snap.engine_step_count(True), 1)
        self.assertEqual(snap.engine_step_count(False), 29)
        self.assertAlmostEqual(snap.engine_step_quantile(True, 1.0), 0.6, places=9)
        self.assertAlmostEqual(snap.engine_step_sum(False), 29 * 0.020, places=9)
        with self.assertRaises(ValueError):
            snap.stalls_by_cause("gc")

    def test_engine_step_arguments(self):
        reg = registry()
        reg.engine_step()  # now, no prefill
        with self.assertRaises((ValueError, TypeError)):
            reg.engine_step(prefill_tokens=-1)
        with self.assertRaises((ValueError, TypeError)):
            reg.engine_step(t_start_ns=0)
        # every field: the checks are inline for plain ints, full otherwise
        for field in ("prefill_tokens", "decode_seqs", "preempted_seqs", "kind"):
            for bad, err in ((-1, ValueError), (2 ** 32, ValueError), (True, TypeError),
                             (1.0, TypeError), ("1", TypeError)):
                with self.assertRaises(err, msg="%s=%r" % (field, bad)) as cm:
                    reg.engine_step(**{field: bad})
                self.assertIn(field, str(cm.exception))
        # an int subclass and an __index__ type pass the full checks
        class Idx:
            def __index__(self):
                return 7
        reg.engine_step(prefill_tokens=Idx(), decode_seqs=2 ** 32 - 1, kind=0)
        self.assertEqual(reg.snapshot().engine_step_count(False), 1)
        self.assertEqual(reg.snapshot().engine_step_count(True), 1)
