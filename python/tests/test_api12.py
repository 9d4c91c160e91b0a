"""The 1.2 additions of issue 20 in Python: configuration errors that say
what is wrong (ttft_config_check), status-view sums and means."""

import unittest

from support import MS, T0, registry, ttft


class ConfigReasons(unittest.TestCase):
    def test_a_reserved_label_names_itself(self):
        with self.assertRaises(ttft.InvalidArgumentError) as cm:
            ttft.Registry(8, labels={"zone": "a", "view": "engine"})
        msg = str(cm.exception)
        self.assertIn('"view" is reserved', msg)
        self.assertIn("TTFT_RESERVED_LABELS", msg)
        self.assertEqual(cm.exception.code, -1)
        self.assertNotIn("\n", msg)

    def test_every_reserved_name_and_double_underscore(self):
        self.assertIn("view", ttft.RESERVED_LABELS)
        for name in ttft.RESERVED_LABELS + ("__meta",):
            with self.assertRaises(ValueError) as cm:
                ttft.Registry(8, labels={name: "x"})
            self.assertIn('"%s"' % name, str(cm.exception))
        ttft.Registry(8, labels={"view_kind": "x", "_private": "y"}).close()

    def test_other_library_rules_say_which_field(self):
        cases = [(dict(namespace="1abc"), 'metric_namespace "1abc"'),
                 (dict(max_classes=2000), "max_classes 2000"),
                 (dict(memory_limit=1 << 20, max_threads=256), None)]
        for kw, want in cases:
            if want is None:
                ttft.Registry(8, **kw).close()  # accepted
                continue
            with self.assertRaises(ttft.InvalidArgumentError) as cm:
                ttft.Registry(8, **kw)
            self.assertIn(want, str(cm.exception))


class StatusSums(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        reg = cls.reg = registry()
        chat = reg.add_class("chat")
        for k in (1, 2, 3):  # completed: TTFT 10/20/30 ms, 3 tokens, end at 100 ms
            s = reg.begin(t_ns=T0, cls=chat if k == 3 else None)
            s.token(t_ns=T0 + k * 10 * MS)
            s.token(2, t_ns=T0 + k * 10 * MS + 5 * MS)
            s.end("completed", t_ns=T0 + 100 * MS)
        s = reg.begin(t_ns=T0)
        s.token(t_ns=T0 + 5 * MS)  # a fast first token, then the client left
        s.end("cancelled", t_ns=T0 + 60 * MS)
        cls.snap = reg.snapshot()

    def test_mean_ttft_of_completed_requests(self):
        snap = self.snap
        self.assertEqual(snap.sum_ns("ttft", status="completed"), 60 * MS)
        self.assertEqual(snap.sum("ttft", status="completed"), 0.060)
        self.assertEqual(snap.mean("ttft", status="completed"), 0.020)
        # the plain mean counts the cancelled stream's first token too
        self.assertAlmostEqual(snap.mean("ttft"), 0.01625, places=12)
        self.assertEqual(snap.sum_ns("ttft"), 65 * MS)

    def test_tokens_classes_and_empty_views(self):
        snap = self.snap
        self.assertEqual(snap.sum("output_tokens", status="completed"), 9)
        self.assertIsInstance(snap.sum("output_tokens", status="completed"), int)
        self.assertEqual(snap.mean("output_tokens", status="completed"), 3.0)
        self.assertEqual(snap.sum_ns("e2e", cls="chat", status="completed"), 100 * MS)
        self.assertEqual(snap.sum("tpot", status="cancelled"), 0.0)
        self.assertEqual(snap.mean("ttft", status="error"), 0.0)
        with self.assertRaises(ValueError):
            snap.sum("itl", status="completed")
        merged = ttft.merge(self.snap, ttft.Snapshot.decode(self.snap.encode()))
        self.assertEqual(merged.sum_ns("ttft", status="completed"), 120 * MS)
        self.assertEqual(merged.mean("ttft", status="completed"), 0.020)


class AnnotateCached(unittest.TestCase):
    def test_bands_of_ttft_and_prefill(self):
        reg = registry()
        rows = [(1000, 0, "miss"), (1000, 15, "miss"), (1000, 16, "partial"),
                (1000, 499, "partial"), (1000, 500, "hit"), (20, 16, "hit")]
        for i, (prompt, cached, _) in enumerate(rows):
            s = reg.begin(t_ns=T0)
            s.mark_scheduled(t_ns=T0 + MS)
            self.assertTrue(s.annotate_cached(prompt, cached))
            s.token(t_ns=T0 + (10 + i) * MS)
            self.assertFalse(s.annotate_cached(prompt, 0))  # after the first token
            s.end(t_ns=T0 + 100 * MS)
        snap = reg.snapshot()
        for band in ("miss", "partial", "hit"):
            self.assertEqual(snap.split_count("prefix_cache", band), 2)
            self.assertEqual(snap.split_count("prefill_by_prefix", band), 2)
        self.assertEqual(snap.split_quantile("prefix_cache", "miss", 0.0), 0.010)
        self.assertEqual(snap.split_quantile("prefill_by_prefix", "hit", 1.0), 0.014)
        self.assertEqual(snap.split_count("prefix_cache", 2), 2)  # index 2 = partial
        with self.assertRaises(ValueError):
            snap.split_count("prefix_cache", "half")
        with self.assertRaises(TypeError):
            snap.split_count("prompt_band", "hit")

    def test_configured_minimum_and_argument_checks(self):
        reg = ttft.Registry(8, prefix_hit_min_tokens=1)
        s = reg.begin(t_ns=T0)
        self.assertTrue(s.annotate_cached(1000, 1))  # partial with a minimum of 1
        with self.assertRaises(ValueError):
            s.annotate_cached(10, 11)
        with self.assertRaises(ValueError):
            s.annotate_cached(0, 0)
        s.token(t_ns=T0 + MS)
        s.end(t_ns=T0 + 2 * MS)
        with self.assertRaises(ttft.StaleHandleError):
            s.annotate_cached(10, 5)
        self.assertEqual(reg.snapshot().split_count("prefix_cache", "partial"), 1)
        with self.assertRaises(ValueError):
            ttft.Registry(8, prefix_hit_min_tokens=0)


if __name__ == "__main__":
    unittest.main()
