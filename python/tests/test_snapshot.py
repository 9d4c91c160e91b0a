"""Snapshot formats, serialisation, merge, delta and the HTTP endpoint."""

import json
import urllib.request
import unittest

from support import MS, T0, registry, ttft


def fill(reg, n, ttft_ms, cls=None, start=T0):
    for i in range(n):
        s = reg.begin(t_ns=start, cls=cls)
        s.token(t_ns=start + ttft_ms * MS)
        s.token(t_ns=start + (ttft_ms + 10) * MS)
        s.end(t_ns=start + (ttft_ms + 20) * MS)


class Formats(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.reg = registry()
        cls.chat = cls.reg.add_class("chat", ttft_slo=0.5)
        fill(cls.reg, 10, 100, cls.chat)
        cls.snap = cls.reg.snapshot()

    def test_report_text(self):
        text = self.snap.report()
        self.assertIsInstance(text, str)
        for word in ("ttft", "tpot", "itl", "server_arrival", "chat"):
            self.assertIn(word, text)
        self.assertEqual(str(self.snap), text)

    def test_json(self):
        doc = json.loads(self.snap.to_json())
        self.assertIsInstance(doc, dict)
        self.assertEqual(self.snap.as_dict(), doc)
        self.assertIn("100", self.snap.to_json())

    def test_prometheus(self):
        prom = self.snap.to_prometheus()
        self.assertIn("# TYPE ", prom)
        self.assertIn("_bucket{", prom)
        self.assertIn('class="chat"', prom)
        self.assertTrue(prom.endswith("\n"))
        self.assertNotIn("# EOF", prom)

    def test_openmetrics(self):
        om = self.snap.to_openmetrics()
        self.assertTrue(om.endswith("# EOF\n"), om[-40:])
        self.assertEqual(self.snap.format("openmetrics"), om)

    def test_format_is_repeatable(self):
        self.assertEqual(self.snap.format("json"), self.snap.to_json())
        self.assertEqual(self.snap.report(), self.snap.report())

    def test_interval(self):
        start, end = self.snap.interval_ns
        self.assertLessEqual(start, end)
        self.assertGreaterEqual(self.snap.duration, 0.0)


class Serialisation(unittest.TestCase):
    def test_encode_decode_round_trip(self):
        reg = registry()
        chat = reg.add_class("chat")
        fill(reg, 7, 40, chat)
        fill(reg, 3, 900)
        snap = reg.snapshot()
        data = snap.encode()
        self.assertIsInstance(data, bytes)
        back = ttft.Snapshot.decode(data)
        self.assertEqual(back.classes, ["default", "chat"])
        for m in ttft.METRICS:
            self.assertEqual(back.count(m), snap.count(m), m)
            self.assertEqual(back.quantile_ns(m, 0.99), snap.quantile_ns(m, 0.99), m)
        self.assertEqual(back.counters(), snap.counters())
        self.assertEqual(back.quantile("ttft", 1.0, cls=chat), 0.040)  # Class matched by name
        self.assertEqual(back.encode(), data)
        b64 = snap.encode_base64()
        self.assertIsInstance(b64, str)
        self.assertNotIn("\n", b64)
        self.assertEqual(ttft.Snapshot.decode_base64(b64).encode(), data)
        self.assertEqual(ttft.Snapshot.decode(bytearray(data)).counters(), snap.counters())

    def test_merge_adds_counts(self):
        a_reg, b_reg = registry(), registry()
        a_reg.add_class("chat")
        fill(a_reg, 5, 100, "chat")
        fill(b_reg, 15, 300)
        a, b = a_reg.snapshot(), b_reg.snapshot()
        m = ttft.merge(a, b)
        self.assertEqual(m.count("ttft"), 20)
        self.assertEqual(m.counter("completed"), 20)
        self.assertEqual(m.quantile("ttft", 0.0), 0.100)
        self.assertEqual(m.quantile("ttft", 1.0), 0.300)
        self.assertEqual(m.count("ttft", cls="chat"), 5)
        self.assertEqual(a.merge(b).counters(), m.counters())

    def test_delta(self):
        reg = registry()
        fill(reg, 4, 100)
        older = reg.snapshot()
        fill(reg, 6, 200)
        newer = reg.snapshot()
        d = newer - older
        self.assertIsInstance(d, ttft.Snapshot)
        self.assertEqual(d.count("ttft"), 6)
        self.assertEqual(d.counter("begun"), 6)
        self.assertAlmostEqual(d.quantile("ttft", 0.5), 0.200, delta=0.200 * 0.01)
        self.assertEqual(newer.count("ttft"), 10)


class Http(unittest.TestCase):
    def test_serve_http(self):
        reg = registry()
        fill(reg, 3, 100)
        with reg.serve_http("127.0.0.1:0") as srv:
            self.assertGreater(srv.port, 0)
            self.assertTrue(srv.running)
            with urllib.request.urlopen(srv.url + "/metrics", timeout=10) as resp:
                self.assertEqual(resp.status, 200)
                body = resp.read().decode()
            self.assertIn("_bucket{", body)
            with urllib.request.urlopen(srv.url + "/report.json", timeout=10) as resp:
                json.loads(resp.read().decode())
        self.assertFalse(srv.running)
        srv.stop()  # idempotent

    def test_registry_close_stops_its_servers(self):
        reg = registry()
        srv = reg.serve_http()
        reg.close()
        self.assertFalse(srv.running)


if __name__ == "__main__":
    unittest.main()
