"""Many Python threads recording at once: totals are exact."""

import threading
import unittest

from support import MS, T0, registry, ttft

THREADS = 8
STREAMS = 400          # per thread
TOKENS = 5             # per stream


class Threads(unittest.TestCase):
    def test_eight_threads_exact_totals(self):
        # Ended slots are recycled once no call is inside them
        # (src/record/reclaim.c); capacity is sized for the churn anyway,
        # not for the 16 live streams.
        reg = ttft.Registry(max_inflight=4096, stall_threshold=0.5, max_classes=4)
        chat = reg.add_class("chat")
        errors = []
        barrier = threading.Barrier(THREADS)

        def work(k):
            try:
                barrier.wait()
                for i in range(STREAMS):
                    t = T0 + i * 1000 * MS
                    cls = chat if i % 2 else None
                    s = reg.begin(t_ns=t, cls=cls)
                    for j in range(TOKENS):
                        s.token(t_ns=t + (k + 1) * MS + j * MS)   # TTFT (k+1) ms, ITL 1 ms
                    s.end("cancelled" if i % 10 == 0 else "completed", t_ns=t + 100 * MS)
                    with reg.stream(cls=chat) as s2:
                        s2.token(2)
            except BaseException as e:  # reported by the main thread
                errors.append(e)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        self.assertEqual(errors, [])
        snap = reg.snapshot()
        n = THREADS * STREAMS
        self.assertEqual(snap.counter("begun"), 2 * n)
        self.assertEqual(snap.counter("completed"), n - n // 10 + n)
        self.assertEqual(snap.counter("cancelled"), n // 10)
        self.assertEqual(snap.counter("tokens"), n * TOKENS + 2 * n)
        self.assertEqual(snap.counter("dropped"), 0)
        self.assertEqual(snap.count("ttft"), 2 * n)
        self.assertEqual(snap.count("itl"), n * (TOKENS - 1))
        self.assertEqual(snap.count("ttft", cls=chat), n // 2 + n)
        self.assertEqual(snap.quantile("itl", 0.0), 0.001)
        self.assertEqual(snap.quantile("itl", 1.0), 0.001)
        self.assertEqual(snap.quantile("ttft", 1.0, cls="default"), THREADS * 0.001)
        self.assertEqual(snap.sum("e2e", cls="default"), n // 2 * 0.100)
        self.assertEqual(reg.inflight(), 0)

    def test_end_races_token_exactly_one_outcome(self):
        # A client cancel (end from another thread) racing the decode loop:
        # the loop sees StaleHandleError once the end won, nothing is lost.
        reg = registry(max_inflight=1024)
        rounds = 300
        emitted = [0] * THREADS
        stale = [0] * THREADS
        errors = []

        def decode(k, s, go):
            go.wait()
            try:
                while True:
                    s.token()
                    emitted[k] += 1
            except ttft.StaleHandleError:
                stale[k] += 1
            except BaseException as e:
                errors.append(e)

        for _ in range(rounds // THREADS):
            go = threading.Event()
            streams = [reg.begin() for _ in range(THREADS)]
            ths = [threading.Thread(target=decode, args=(k, s, go)) for k, s in enumerate(streams)]
            for th in ths:
                th.start()
            go.set()
            for s in streams:
                s.end("cancelled")
            for th in ths:
                th.join()
        self.assertEqual(errors, [])
        snap = reg.snapshot()
        ended = (rounds // THREADS) * THREADS
        self.assertEqual(sum(stale), ended)
        self.assertEqual(snap.counter("cancelled"), ended)
        self.assertEqual(snap.counter("tokens"), sum(emitted))
        self.assertEqual(reg.inflight(), 0)

    def test_close_while_threads_record_never_crashes(self):
        reg = registry(max_inflight=64)
        stop = threading.Event()
        seen = []

        def loop():
            outcome = "stopped"
            try:
                while not stop.is_set():
                    s = reg.begin()
                    s.token()
                    s.end()
            except ttft.ClosedError:
                outcome = "closed"
            except BaseException as e:
                outcome = e
            seen.append(outcome)

        ths = [threading.Thread(target=loop) for _ in range(4)]
        for th in ths:
            th.start()
        while reg.inflight() == 0 and reg.snapshot().counter("begun") == 0:
            pass
        reg.close()
        stop.set()
        for th in ths:
            th.join()
        self.assertEqual(len(seen), 4)
        for outcome in seen:
            self.assertIn(outcome, ("closed", "stopped"))


if __name__ == "__main__":
    unittest.main()
