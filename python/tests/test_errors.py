"""Errors: stale and ended streams, bad arguments, closed objects. Nothing
here may crash the interpreter."""

import gc
import unittest

from support import MS, T0, registry, ttft


class StaleAndEnded(unittest.TestCase):
    def test_hooks_on_an_ended_stream(self):
        reg = registry()
        s = reg.begin(t_ns=T0)
        s.end(t_ns=T0 + MS)
        for call in (lambda: s.token(), lambda: s.mark_scheduled(), lambda: s.mark_preempted(),
                     lambda: s.end("completed"), lambda: s.stats()):
            with self.assertRaises(ttft.StaleHandleError) as cm:
                call()
            e = cm.exception
            self.assertIsInstance(e, ttft.Error)
            self.assertEqual(e.code, -2)
            self.assertEqual(e.name, "TTFT_ESTALE")
            self.assertEqual(e.strerror, "stale or unknown sequence handle (stream already ended?)")
            self.assertIn(e.strerror, str(e))
        self.assertEqual(reg.snapshot().counter("completed"), 1)  # counted once

    def test_stale_handle_after_slot_reuse_is_rejected_by_c(self):
        reg = registry(max_inflight=1)
        old = reg.begin(t_ns=T0)
        handle = old.handle
        old.end(t_ns=T0 + 1)
        new = reg.begin(t_ns=T0 + 2)           # same slot, new generation
        self.assertNotEqual(new.handle, handle)
        ghost = reg.attach(handle)
        with self.assertRaises(ttft.StaleHandleError) as cm:
            ghost.token(t_ns=T0 + 3)
        self.assertEqual(cm.exception.code, -2)
        with self.assertRaises(ttft.StaleHandleError):
            ghost.end("completed", t_ns=T0 + 3)
        new.token(t_ns=T0 + 4)                  # the live one is untouched
        self.assertEqual(new.stats().tokens, 1)
        new.end(t_ns=T0 + 5)

    def test_attached_stream_drives_a_live_handle(self):
        reg = registry()
        s = reg.begin(t_ns=T0)
        twin = reg.attach(s.handle)
        twin.token(t_ns=T0 + 10 * MS)
        twin.end(t_ns=T0 + 20 * MS)
        with self.assertRaises(ttft.StaleHandleError):
            s.end(t_ns=T0 + 30 * MS)           # already ended through the twin
        self.assertEqual(reg.snapshot().quantile("ttft", 1.0), 0.010)


class BadArguments(unittest.TestCase):
    def setUp(self):
        self.reg = registry()
        self.s = self.reg.begin()

    def tearDown(self):
        if not self.s.ended:
            self.s.end()

    def test_token_n(self):
        for bad in (0, -1, 2**32):
            with self.assertRaises(ValueError):
                self.s.token(bad)
        for bad in (1.0, "1", None, True):
            with self.assertRaises(TypeError):
                self.s.token(bad)
        self.assertEqual(self.reg.snapshot().counter("tokens"), 0)

    def test_timestamps(self):
        for bad in (-1, 2**64):
            with self.assertRaises(ValueError):
                self.s.token(1, t_ns=bad)
            with self.assertRaises(ValueError):
                self.reg.begin(t_ns=bad)
        for bad in (1.5, "now", False):
            with self.assertRaises(TypeError):
                self.s.token(1, t_ns=bad)
            with self.assertRaises(TypeError):
                self.s.mark_scheduled(t_ns=bad)

    def test_status(self):
        with self.assertRaises(ValueError):
            self.s.end("done")
        with self.assertRaises(TypeError):
            self.s.end(0)
        self.assertFalse(self.s.ended)

    def test_registry_arguments(self):
        for kw in (dict(max_inflight=0), dict(max_inflight=2**25), dict(stall_threshold=0),
                   dict(stall_threshold=-1.0), dict(stall_threshold=float("nan")),
                   dict(clock="sundial"), dict(prompt_bands=[10, 5]),
                   dict(labels={"bad-name": "x"}), dict(labels={str(i): "x" for i in range(9)}),
                   dict(prom_buckets={"ttft": [0.5, 0.1]}), dict(prom_buckets={"nope": [1]})):
            with self.assertRaises(ValueError, msg=repr(kw)):
                ttft.Registry(**kw)
        for kw in (dict(max_inflight="4"), dict(stall_threshold="0.5"), dict(labels=[("a", "b")])):
            with self.assertRaises(TypeError, msg=repr(kw)):
                ttft.Registry(**kw)

    def test_class_arguments(self):
        reg = self.reg
        for bad in ("", "has space", "x" * 64):
            with self.assertRaises(ValueError):
                reg.add_class(bad)
        with self.assertRaises(TypeError):
            reg.add_class(7)
        with self.assertRaises(ValueError):
            reg.add_class("chat", ttft_slo=-1)
        reg.add_class("chat")
        with self.assertRaises(ttft.ExistsError) as cm:
            reg.add_class("chat")
        self.assertEqual(cm.exception.code, -7)
        self.assertIsInstance(cm.exception, ValueError)
        with self.assertRaises(ttft.ExistsError):
            reg.add_class("default")

    def test_class_slots_run_out(self):
        reg = ttft.Registry(max_inflight=4, max_classes=2)
        reg.add_class("one")
        with self.assertRaises(ttft.FullError) as cm:
            reg.add_class("two")
        self.assertEqual(cm.exception.code, -3)

    def test_begin_arguments(self):
        other = registry()
        foreign = other.add_class("chat")
        with self.assertRaises(ValueError):
            self.reg.begin(cls=foreign)
        with self.assertRaises(KeyError):
            self.reg.begin(cls="no-such-class")
        with self.assertRaises(TypeError):
            self.reg.begin(cls=1)
        with self.assertRaises(ValueError):
            self.reg.begin(prompt_tokens=-1)
        with self.assertRaises(TypeError):
            self.reg.begin(prefix_hit=1)
        self.assertEqual(self.reg.snapshot().counter("begun"), 1)  # only setUp's

    def test_snapshot_queries(self):
        snap = self.reg.snapshot()
        with self.assertRaises(ValueError):
            snap.quantile("latency", 0.5)         # never one blended latency
        with self.assertRaises(TypeError):
            snap.quantile(0, 0.5)
        for q in (-0.1, 1.5, float("nan")):
            with self.assertRaises(ValueError):
                snap.quantile("ttft", q)
        with self.assertRaises(ValueError):
            snap.counter("nope")
        with self.assertRaises(ValueError):
            snap.gauge("nope")
        with self.assertRaises(ValueError):
            snap.count("ttft", cls="nope")
        with self.assertRaises(ValueError):
            snap.count("ttft", cls=99)
        with self.assertRaises(ValueError):
            snap.format("xml")
        self.assertEqual(snap.quantile("ttft", 0.99), 0.0)  # empty metric: 0
        self.assertIsNone(snap.attainment())                  # nothing ended

    def test_decode_garbage(self):
        with self.assertRaises(ttft.CorruptError) as cm:
            ttft.Snapshot.decode(b"\x00garbage" * 10)
        self.assertEqual(cm.exception.code, -6)
        with self.assertRaises(ttft.CorruptError):
            ttft.Snapshot.decode(b"")
        good = self.reg.snapshot().encode()
        with self.assertRaises(ttft.CorruptError):
            ttft.Snapshot.decode(good[:-1])
        flipped = bytearray(good)
        flipped[len(flipped) // 2] ^= 0x55
        with self.assertRaises(ttft.CorruptError):
            ttft.Snapshot.decode(bytes(flipped))
        with self.assertRaises(TypeError):
            ttft.Snapshot.decode("text")
        with self.assertRaises(ttft.CorruptError):
            ttft.Snapshot.decode_base64("!!!not base64!!!")

    def test_delta_of_unrelated_snapshots(self):
        a = self.reg.snapshot()
        b = registry().snapshot()
        with self.assertRaises(ttft.InvalidArgumentError) as cm:
            b - a
        self.assertEqual(cm.exception.code, -1)
        newer = self.reg.snapshot()
        with self.assertRaises(ValueError):
            a - newer                               # wrong order
        with self.assertRaises(TypeError):
            a - 1
        with self.assertRaises(TypeError):
            ttft.merge(a, "b")

    def test_serve_http_bad_address(self):
        with self.assertRaises(ttft.Error) as cm:
            self.reg.serve_http("not an address")
        self.assertIn(cm.exception.code, (-1, -8))
        with self.assertRaises(TypeError):
            self.reg.serve_http(9464)

    def test_snapshot_cannot_be_constructed_directly(self):
        with self.assertRaises(TypeError):
            ttft.Snapshot()


class Closed(unittest.TestCase):
    def test_calls_after_close_raise(self):
        reg = registry()
        chat = reg.add_class("chat")
        live = reg.begin(t_ns=T0, cls=chat)
        live.token(t_ns=T0 + MS)
        before = reg.snapshot()
        reg.close()
        reg.close()  # idempotent
        self.assertTrue(reg.closed)
        for call in (lambda: reg.begin(), lambda: reg.snapshot(), lambda: reg.add_class("x"),
                     lambda: reg.inflight(), lambda: reg.stalled_now(), lambda: reg.stream(),
                     lambda: reg.serve_http(), lambda: reg.address,
                     lambda: reg.instrument([1])):
            with self.assertRaises(ttft.ClosedError):
                call()
        # the stream keeps the C registry alive; its hooks refuse cleanly
        with self.assertRaises(ttft.ClosedError):
            live.token()
        with self.assertRaises(ttft.ClosedError):
            live.end()
        with self.assertRaises(ttft.ClosedError):
            live.stats()
        # snapshots stay valid after their registry is gone
        del live
        gc.collect()
        self.assertEqual(before.count("ttft", cls="chat"), 1)
        self.assertEqual(before.counter("begun"), 1)

    def test_registry_context_manager(self):
        with registry() as reg:
            reg.begin().end()
        self.assertTrue(reg.closed)

    def test_snapshot_close(self):
        reg = registry()
        with reg.snapshot() as snap:
            self.assertEqual(snap.counter("begun"), 0)
        self.assertTrue(snap.closed)
        for call in (lambda: snap.counter("begun"), lambda: snap.quantile("ttft", 0.5),
                     lambda: snap.report(), lambda: snap.encode(), lambda: snap - snap,
                     lambda: ttft.merge(snap, snap), lambda: snap.classes):
            with self.assertRaises(ttft.ClosedError):
                call()
        snap.close()  # idempotent

    def test_many_registries_and_snapshots_are_freed(self):
        for _ in range(20):
            reg = ttft.Registry(max_inflight=8)
            s = reg.begin()
            s.token()
            snap = reg.snapshot()
            reg.close()
            del s, snap
        gc.collect()


if __name__ == "__main__":
    unittest.main()
