"""OpenTelemetry push from Python (issue 31, item 5): Registry.otlp_start
against a loopback receiver that answers as told and records each request:
flush pushes and waits, stop makes a last push, the context manager and
Registry.close stop it, headers (a dict) arrive percent-decoded, https://
and bad arguments raise with the library's reason, a refused push raises
IoError from flush."""

import http.server
import threading
import unittest

from support import registry, ttft


class Receiver:
    """An HTTP/1.1 server on 127.0.0.1 that answers each POST with the next
    status of `script` (then 200) and records (path, headers, body)."""

    def __init__(self, script=()):
        self.script = list(script)
        self.requests = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                owner.requests.append((self.path, dict(self.headers), body))
                status = owner.script.pop(0) if owner.script else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.srv.server_address[1]
        self.th = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.th.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


class OtlpPushTest(unittest.TestCase):
    def setUp(self):
        self.rcv = Receiver()
        self.reg = registry()

    def tearDown(self):
        self.reg.close()
        self.rcv.close()

    def test_flush_and_stop(self):
        p = self.reg.otlp_start(self.rcv.url, interval_ms=3_600_000, timeout_ms=5000,
                                headers={"api-key": "a b,c", "x-tenant": "t1"},
                                temporality="delta")
        self.assertTrue(p.running)
        p.flush()
        self.assertEqual(1, len(self.rcv.requests))
        path, headers, body = self.rcv.requests[0]
        self.assertEqual("/v1/metrics", path)
        self.assertEqual("application/x-protobuf", headers["Content-Type"])
        self.assertEqual("a b,c", headers["api-key"])
        self.assertEqual("t1", headers["x-tenant"])
        self.assertGreater(len(body), 0)
        p.stop()  # the last push
        self.assertFalse(p.running)
        self.assertEqual(2, len(self.rcv.requests))
        p.stop()  # idempotent
        with self.assertRaises(ttft.ClosedError):
            p.flush()

    def test_context_manager_and_registry_close(self):
        with self.reg.otlp_start(metrics_endpoint=self.rcv.url + "/custom",
                                 interval_ms=3_600_000) as p:
            p.flush()
        self.assertEqual(["/custom", "/custom"], [r[0] for r in self.rcv.requests])
        p2 = self.reg.otlp_start(self.rcv.url, interval_ms=3_600_000)
        self.reg.close()  # stops p2 with a last push
        self.assertFalse(p2.running)
        self.assertEqual(3, len(self.rcv.requests))

    def test_refused_push_raises(self):
        self.rcv.script = [400]
        p = self.reg.otlp_start(self.rcv.url, interval_ms=3_600_000, timeout_ms=2000)
        with self.assertRaises(ttft.IoError):
            p.flush()
        p.flush()  # the next one is accepted
        st = p.stats()
        self.assertEqual((2, 1, 0, 1, 0), (st["pushes"], st["accepted"], st["failed"],
                                           st["dropped"], st["retries"]))
        self.assertEqual(sum(len(r[2]) for r in self.rcv.requests), st["bytes_sent"])
        self.assertEqual(200, st["last_status"])
        self.assertEqual("HTTP 400", st["last_error"])
        p.stop()
        with self.assertRaises(ttft.ClosedError):
            p.stats()

    def test_refusals(self):
        with self.assertRaises(ttft.InvalidArgumentError) as cm:
            self.reg.otlp_start("https://collector.example:4318")
        self.assertIn("https is not supported", str(cm.exception))
        with self.assertRaises(ttft.InvalidArgumentError):
            self.reg.otlp_start("ftp://x")
        with self.assertRaises(ttft.InvalidArgumentError):
            self.reg.otlp_start(self.rcv.url, temporality="sometimes")
        with self.assertRaises(ttft.InvalidArgumentError):
            self.reg.otlp_start(self.rcv.url, headers="no-equals-sign")
        self.assertEqual([], self.rcv.requests)


if __name__ == "__main__":
    unittest.main()
