"""A wall-clock timestamp passed where the monotonic clock is expected
(issue 32.7): begin raises ClockError naming the clock, the registry counts
it (clock_refused), and nothing is recorded; a monotonic time and None
still begin."""
import time
import unittest

from support import registry, ttft


class WallClockTest(unittest.TestCase):
    def test_time_ns_refused_with_clock_error(self):
        r = registry()
        try:
            with self.assertRaises(ttft.ClockError) as cm:
                r.begin(t_ns=time.time_ns())
            msg = str(cm.exception)
            self.assertIn("wall-clock", msg)
            self.assertIn("monotonic", msg)
            self.assertIsInstance(cm.exception, ValueError)
            s = r.snapshot()
            self.assertEqual(1, s.counter("clock_refused"))
            self.assertEqual(0, s.counter("begun"))
            self.assertEqual(0, s.counter("dropped"))
        finally:
            r.close()

    def test_monotonic_and_now_still_begin(self):
        r = registry()
        try:
            a = r.begin(t_ns=time.monotonic_ns())
            b = r.begin()
            self.assertFalse(a.dropped)
            self.assertFalse(b.dropped)
            a.end()
            b.end()
            self.assertEqual(0, r.snapshot().counter("clock_refused"))
        finally:
            r.close()


if __name__ == "__main__":
    unittest.main()
