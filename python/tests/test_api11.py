"""The 1.1 additions other than step_emitted: Stream.annotate, status views,
itl_per_token, the stale counter, the memory/coarse gauges, the protobuf
exposition (bytes) and the new Registry(...) configuration fields."""

import os
import sys
import unittest

from support import HERE, MS, S, T0, registry, ttft

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "prom"))
import pbdecode  # noqa: E402  (the strict, independent protobuf reader of tests/prom)

TTFT_FAMILY = "gen_ai_server_time_to_first_token_seconds"  # docs/prometheus.md


class Annotate(unittest.TestCase):
    def test_before_the_first_token_feeds_the_splits(self):
        reg = registry()
        s = reg.begin(t_ns=T0)                       # arrival: nothing known yet
        self.assertTrue(s.annotate(prompt_tokens=812, prefix_hit=True))   # slot pickup
        s.token(t_ns=T0 + 40 * MS)
        s.end(t_ns=T0 + 50 * MS)
        snap = reg.snapshot()
        self.assertEqual(snap.split_count("prefix_cache", 1), 1)
        self.assertEqual(snap.split_count("prefix_cache", 0), 0)
        self.assertEqual(snap.split_quantile("prefix_cache", 1, 0.5), 0.040)
        self.assertEqual(snap.split_count("prompt_band", 2), 1)          # 512 <= 812 < 2048
        self.assertEqual(snap.quantile("ttft", 1.0), 0.040)             # clock start unchanged

    def test_after_the_first_token_changes_nothing(self):
        reg = registry()
        s = reg.begin(t_ns=T0, prompt_tokens=100, prefix_hit=False)
        s.token(t_ns=T0 + 10 * MS)
        self.assertFalse(s.annotate(prompt_tokens=5000, prefix_hit=True))
        s.token(t_ns=T0 + 20 * MS)
        s.end(t_ns=T0 + 30 * MS)
        snap = reg.snapshot()
        self.assertEqual(snap.split_count("prefix_cache", 0), 1)        # still the miss
        self.assertEqual(snap.split_count("prefix_cache", 1), 0)
        self.assertEqual(snap.split_count("prompt_band", 0), 1)         # still 100 tokens
        self.assertEqual(snap.split_count("prompt_band", 3), 0)
        self.assertEqual(snap.counter("stale"), 0)

    def test_none_and_zero_leave_a_field_as_it_is(self):
        reg = registry()
        s = reg.begin(t_ns=T0, prompt_tokens=3000)
        self.assertTrue(s.annotate(prefix_hit=True))            # prompt length kept
        self.assertTrue(s.annotate(prompt_tokens=0))            # 0 = unknown: kept too
        self.assertTrue(s.annotate())                           # nothing to change
        s.token(t_ns=T0 + 5 * MS)
        s.end(t_ns=T0 + 6 * MS)
        snap = reg.snapshot()
        self.assertEqual(snap.split_count("prompt_band", 3), 1)  # 2048 <= 3000 < 8192
        self.assertEqual(snap.split_count("prefix_cache", 1), 1)

    def test_a_later_annotation_overrides_an_earlier_one(self):
        reg = registry()
        s = reg.begin(t_ns=T0, prefix_hit=True, prompt_tokens=50)
        self.assertTrue(s.annotate(prefix_hit=False, prompt_tokens=600))
        s.token(t_ns=T0 + MS)
        s.end(t_ns=T0 + 2 * MS)
        snap = reg.snapshot()
        self.assertEqual(snap.split_count("prefix_cache", 0), 1)
        self.assertEqual(snap.split_count("prompt_band", 2), 1)

    def test_ended_dropped_and_stale(self):
        reg = registry(max_inflight=1)
        s = reg.begin(t_ns=T0)
        dropped = reg.begin(t_ns=T0)
        self.assertFalse(dropped.annotate(prompt_tokens=10))   # a silent no-op
        handle = s.handle
        s.end("cancelled", t_ns=T0 + MS)
        with self.assertRaises(ttft.StaleHandleError):
            s.annotate(prefix_hit=True)
        ghost = reg.attach(handle)                             # the C library sees this one
        with self.assertRaises(ttft.StaleHandleError):
            ghost.annotate(prefix_hit=True)
        self.assertEqual(reg.snapshot().counter("stale"), 1)

    def test_argument_checks(self):
        reg = registry()
        s = reg.begin(t_ns=T0)
        for bad in (-1, 2**32):
            with self.assertRaises(ValueError):
                s.annotate(prompt_tokens=bad)
        for kw in (dict(prompt_tokens="812"), dict(prompt_tokens=8.5), dict(prefix_hit=1),
                   dict(prefix_hit="yes"), dict(prompt_tokens=True)):
            with self.assertRaises(TypeError, msg=repr(kw)):
                s.annotate(**kw)
        s.token(t_ns=T0 + MS)
        s.end(t_ns=T0 + 2 * MS)
        snap = reg.snapshot()
        self.assertEqual(snap.split_count("prefix_cache", 0) + snap.split_count("prefix_cache", 1), 0)


class StatusViews(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        reg = cls.reg = registry()
        chat = cls.chat = reg.add_class("chat")
        # completed: TTFT 10/20/30 ms, 3 tokens each, end at 100 ms (chat: the 30 ms one)
        for k in (1, 2, 3):
            s = reg.begin(t_ns=T0, cls=chat if k == 3 else None)
            s.token(t_ns=T0 + k * 10 * MS)
            s.token(2, t_ns=T0 + k * 10 * MS + 5 * MS)
            s.end("completed", t_ns=T0 + 100 * MS)
        # cancelled after a first token at 5 ms (twice), end at 60 ms
        for _ in range(2):
            s = reg.begin(t_ns=T0)
            s.token(t_ns=T0 + 5 * MS)
            s.end("cancelled", t_ns=T0 + 60 * MS)
        # cancelled before any token (abandoned) at 2 s
        reg.begin(t_ns=T0).end("cancelled", t_ns=T0 + 2 * S)
        # error after a first token at 400 ms
        s = reg.begin(t_ns=T0)
        s.token(t_ns=T0 + 400 * MS)
        s.end("error", t_ns=T0 + 500 * MS)
        cls.snap = reg.snapshot()

    def test_plain_metrics_count_every_stream(self):
        snap = self.snap
        self.assertEqual(snap.count("ttft"), 6)
        self.assertEqual(snap.quantile("ttft", 0.0), 0.005)
        self.assertEqual(snap.quantile("ttft", 1.0), 0.400)
        self.assertEqual(snap.count("e2e"), 7)

    def test_completed_is_what_client_benchmarks_report(self):
        snap = self.snap
        self.assertEqual(snap.count("ttft", status="completed"), 3)
        self.assertEqual(snap.quantile("ttft", 0.0, status="completed"), 0.010)
        self.assertEqual(snap.quantile("ttft", 1.0, status="completed"), 0.030)
        self.assertAlmostEqual(snap.quantile_ns("ttft", 0.5, status="completed"), 20 * MS,
                               delta=20 * MS * 0.005)          # the 0.5 % bound
        self.assertEqual(snap.count("e2e", status="completed"), 3)
        self.assertEqual(snap.quantile("e2e", 0.99, status="completed"), 0.100)
        self.assertEqual(snap.count("tpot", status="completed"), 3)
        self.assertEqual(snap.quantile("tpot", 1.0, status="completed"), 0.0025)
        self.assertEqual(snap.quantile("output_tokens", 1.0, status="completed"), 3)
        self.assertIsInstance(snap.quantile("output_tokens", 1.0, status="completed"), int)

    def test_cancelled_and_error(self):
        snap = self.snap
        self.assertEqual(snap.count("ttft", status="cancelled"), 2)   # the abandoned one has none
        self.assertEqual(snap.count("e2e", status="cancelled"), 3)
        self.assertEqual(snap.quantile("e2e", 1.0, status="cancelled"), 2.0)
        self.assertEqual(snap.quantile("output_tokens", 0.0, status="cancelled"), 0)
        self.assertEqual(snap.count("tpot", status="cancelled"), 0)
        self.assertEqual(snap.quantile("tpot", 0.5, status="cancelled"), 0.0)  # empty view: 0
        self.assertEqual(snap.count("ttft", status="error"), 1)
        self.assertEqual(snap.quantile("ttft", 0.5, status="error"), 0.400)

    def test_status_and_class_together(self):
        snap = self.snap
        self.assertEqual(snap.count("ttft", cls=self.chat, status="completed"), 1)
        self.assertEqual(snap.quantile("ttft", 0.5, cls="chat", status="completed"), 0.030)
        self.assertEqual(snap.count("ttft", cls="default", status="completed"), 2)
        self.assertEqual(snap.count("ttft", cls=self.chat, status="cancelled"), 0)

    def test_survives_encode_and_merge(self):
        back = ttft.Snapshot.decode(self.snap.encode())
        self.assertEqual(back.count("ttft", status="completed"), 3)
        merged = ttft.merge(self.snap, back)
        self.assertEqual(merged.count("e2e", status="cancelled"), 6)

    def test_argument_checks(self):
        snap = self.snap
        with self.assertRaises(ValueError):
            snap.count("ttft", status="done")
        with self.assertRaises(TypeError):
            snap.quantile("ttft", 0.5, status=0)
        for metric in ("itl", "queue", "seq_itl_max", "itl_per_token"):
            with self.assertRaises(ValueError) as cm:
                snap.quantile(metric, 0.5, status="completed")
            self.assertIn("status views", str(cm.exception))
            with self.assertRaises(ValueError):
                snap.count(metric, status="completed")
        with self.assertRaises(ValueError):
            snap.quantile("ttft", 1.5, status="completed")
        with self.assertRaises(ValueError):
            snap.count("ttft", cls="nope", status="completed")


class NewNames(unittest.TestCase):
    def test_itl_per_token(self):
        reg = registry()
        s = reg.begin(t_ns=T0)
        s.token(t_ns=T0 + 10 * MS)
        s.token(4, t_ns=T0 + 50 * MS)     # 4 tokens after 40 ms: 4 x 10 ms per token
        s.token(1, t_ns=T0 + 70 * MS)     # 1 token after 20 ms
        s.end(t_ns=T0 + 80 * MS)
        snap = reg.snapshot()
        self.assertEqual(snap.count("itl"), 2)
        self.assertEqual(snap.quantile("itl", 1.0), 0.040)
        self.assertEqual(snap.count("itl_per_token"), 5)
        self.assertEqual(snap.quantile("itl_per_token", 0.0), 0.010)
        self.assertEqual(snap.quantile("itl_per_token", 0.8), 0.010)
        self.assertEqual(snap.quantile("itl_per_token", 1.0), 0.020)
        self.assertIn("itl_per_token", ttft.METRICS)

    def test_stale_counter(self):
        reg = registry(max_inflight=2)
        s = reg.begin(t_ns=T0)
        ghost = reg.attach(s.handle)
        s.end(t_ns=T0 + MS)
        for call in (lambda: ghost.token(t_ns=T0 + 2 * MS), lambda: ghost.mark_scheduled(),
                     lambda: ghost.end("completed")):
            with self.assertRaises(ttft.StaleHandleError):
                call()
        snap = reg.snapshot()
        self.assertEqual(snap.counter("stale"), 3)
        self.assertEqual(snap.counters()["stale"], 3)
        self.assertEqual(snap.counter("stale", cls="default"), 3)

    def test_memory_and_coarse_gauges(self):
        def workload(**kw):
            reg = ttft.Registry(max_inflight=64, max_classes=16, **kw)
            classes = [reg.add_class("c%d" % i) for i in range(15)] + [None]
            for c in classes:
                for k in range(40):      # values over 40 powers of two
                    s = reg.begin(t_ns=T0, cls=c)
                    s.token(t_ns=T0 + (1 << k))
                    s.token(t_ns=T0 + (1 << k) + (1 << k))
                    s.end(t_ns=T0 + (1 << 43))
            return reg, reg.snapshot()

        reg, snap = workload()
        self.assertEqual(snap.gauge("coarse"), 0)
        self.assertGreater(snap.gauge("memory"), 0)
        self.assertLessEqual(snap.gauge("memory"), reg.memory())
        tight, tsnap = workload(memory_limit=1 << 20)
        self.assertGreater(tsnap.gauge("coarse"), 0)          # binned by power of two
        self.assertEqual(tsnap.count("ttft"), snap.count("ttft"))      # still counted exactly
        self.assertEqual(tsnap.sum("itl"), snap.sum("itl"))
        self.assertLess(tight.memory(), reg.memory())
        with self.assertRaises(ValueError):
            snap.gauge("nope")

    def test_protobuf_is_bytes_of_length_delimited_families(self):
        reg = registry()
        reg.add_class("chat")
        for k in range(1, 6):
            s = reg.begin(t_ns=T0, cls="chat")
            s.token(t_ns=T0 + k * 10 * MS)
            s.token(t_ns=T0 + k * 10 * MS + 5 * MS)
            s.end(t_ns=T0 + 100 * MS)
        snap = reg.snapshot()
        pb = snap.to_prometheus_protobuf()
        self.assertIsInstance(pb, bytes)
        self.assertEqual(snap.format("prometheus_protobuf"), pb)
        fams = pbdecode.decode_stream(pb)               # strict: any framing error raises
        names = {f["name"] for f in fams}
        text_names = {line.split()[2] for line in snap.to_prometheus().splitlines()
                      if line.startswith("# TYPE ")}
        self.assertGreater(len(names), 10)
        self.assertLessEqual(names, text_names)         # the same families as the text
        ttft_fam = [f for f in fams if f["name"] == TTFT_FAMILY]
        self.assertEqual(len(ttft_fam), 1)
        hist = [m["histogram"] for m in ttft_fam[0]["metric"]
                if {"name": "class", "value": "chat"} in m.get("label", [])]
        self.assertEqual(len(hist), 1)
        self.assertEqual(hist[0]["sample_count"], 5)
        self.assertEqual(hist[0]["schema"], 7)           # native buckets by default
        self.assertIn("positive_span", hist[0])
        for fmt in ("text", "json", "prometheus", "openmetrics"):
            self.assertIsInstance(snap.format(fmt), str)


class ConfigFields(unittest.TestCase):
    def _ttft_histogram(self, reg):
        s = reg.begin(t_ns=T0)
        s.token(t_ns=T0 + 7 * MS)
        s.end(t_ns=T0 + 9 * MS)
        fams = pbdecode.decode_stream(reg.snapshot().to_prometheus_protobuf())
        fam = [f for f in fams if f["name"] == TTFT_FAMILY][0]
        return [m["histogram"] for m in fam["metric"]
                if {"name": "class", "value": "default"} in m.get("label", [])][0]

    def test_native_histograms_and_schema_reach_the_exposition(self):
        h = self._ttft_histogram(registry(native_schema=3))
        self.assertEqual(h["schema"], 3)
        h = self._ttft_histogram(registry(native_histograms=False))
        self.assertNotIn("schema", h)
        self.assertNotIn("positive_span", h)
        self.assertTrue(h["bucket"])                     # classic buckets only

    def test_export_idle_classes(self):
        # an added class is exported at zero from add_class on (its first
        # scrape holds no observation); idle = the default class, unused
        quiet = registry()
        quiet.add_class("chat")
        text = quiet.snapshot().to_prometheus()
        self.assertIn('gen_ai_server_time_to_first_token_seconds_count{class="chat"} 0\n', text)
        self.assertNotIn('class="default"', text)
        loud = registry(export_idle_classes=True)
        loud.add_class("chat")
        text = loud.snapshot().to_prometheus()
        self.assertIn('class="chat"', text)
        self.assertIn('class="default"', text)

    def test_argument_checks(self):
        for kw in (dict(native_schema=-5), dict(native_schema=9),
                   dict(memory_limit=(1 << 20) - 1), dict(memory_limit=-1),
                   dict(max_inflight=(1 << 20) + 1)):
            with self.assertRaises(ValueError, msg=repr(kw)):
                ttft.Registry(**kw)
        for kw in (dict(native_histograms=1), dict(export_idle_classes="yes"),
                   dict(native_schema=7.0), dict(memory_limit=1.5e9)):
            with self.assertRaises(TypeError, msg=repr(kw)):
                ttft.Registry(**kw)
        reg = ttft.Registry(max_inflight=8, native_histograms=True, native_schema=-4,
                            export_idle_classes=False, memory_limit=1 << 20)
        self.assertGreater(reg.memory(), 0)


if __name__ == "__main__":
    unittest.main()
