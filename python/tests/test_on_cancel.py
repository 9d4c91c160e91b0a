"""Issue 21.3: a handler cancelled by the server's own timeout is not a client cancel.

An asyncio task sees the same CancelledError whether the client went away
(the server cancels the handler on disconnect) or the server's own timeout
fired (asyncio.wait_for, asyncio.timeout). Registry.stream(...,
on_cancel=...) and instrument(..., on_cancel=...) say how it is recorded:
"cancelled" (the default), "error", or a callable deciding per cancel.
"""

import asyncio
import sys
import unittest
import warnings

from support import registry

HAS_TIMEOUT = sys.version_info >= (3, 11)   # asyncio.timeout


def counts(reg):
    snap = reg.snapshot()
    return {k: snap.counter(k) for k in ("begun", "completed", "cancelled", "errors")}


def run(coro):
    return asyncio.run(coro)


async def handler(reg, started, gate=None, **kw):
    """A streaming handler: one token, then waits for the next forever."""
    async with reg.stream(**kw) as s:
        started.append(s)
        s.token()
        await (gate.wait() if gate else asyncio.sleep(3600))
        s.token()


class ServerTimeout(unittest.TestCase):
    def test_default_records_a_timeout_as_cancelled(self):
        # the documented default: a CancelledError is the client leaving
        reg, started = registry(), []

        async def main():
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(handler(reg, started), 0.005)
        run(main())
        self.assertEqual(started[0].status, "cancelled")
        self.assertEqual(counts(reg), dict(begun=1, completed=0, cancelled=1, errors=0))

    def test_wait_for_timeout_recorded_as_error(self):
        reg, started = registry(), []

        async def main():
            with self.assertRaises(asyncio.TimeoutError):   # still propagates
                await asyncio.wait_for(handler(reg, started, on_cancel="error"), 0.005)
        run(main())
        self.assertEqual(started[0].status, "error")
        self.assertEqual(counts(reg), dict(begun=1, completed=0, cancelled=0, errors=1))

    @unittest.skipUnless(HAS_TIMEOUT, "asyncio.timeout is Python 3.11+")
    def test_asyncio_timeout_told_apart_from_a_client_cancel(self):
        reg, started = registry(), []

        async def serve(gate, budget):
            # the server's deadline around the handler; the stream asks it
            async with asyncio.timeout(budget) as deadline:
                await handler(reg, started, gate,
                              on_cancel=lambda e: "error" if deadline.expired() else "cancelled")

        async def main():
            # 1. the deadline fires: the server's failure
            with self.assertRaises(TimeoutError):
                await serve(asyncio.Event(), 0.005)
            # 2. the client leaves first (its task is cancelled), far from the deadline
            t = asyncio.ensure_future(serve(asyncio.Event(), 3600))
            while len(started) < 2:
                await asyncio.sleep(0)
            t.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await t
            # 3. neither: completes
            gate = asyncio.Event()
            t = asyncio.ensure_future(serve(gate, 3600))
            while len(started) < 3:
                await asyncio.sleep(0)
            gate.set()
            await t
        run(main())
        self.assertEqual([s.status for s in started], ["error", "cancelled", "completed"])
        self.assertEqual(counts(reg), dict(begun=3, completed=1, cancelled=1, errors=1))

    def test_callable_sees_the_exception(self):
        reg, started, seen = registry(), [], []

        def decide(e):
            seen.append(e)
            return "error" if "deadline" in str(e.args) else "cancelled"

        async def main():
            for msg in ("deadline", "client gone"):
                t = asyncio.ensure_future(handler(reg, started, on_cancel=decide))
                n = len(started)
                while len(started) == n:
                    await asyncio.sleep(0)
                t.cancel(msg) if sys.version_info >= (3, 9) else t.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await t
        run(main())
        self.assertTrue(all(isinstance(e, asyncio.CancelledError) for e in seen))
        if sys.version_info >= (3, 9):
            self.assertEqual([s.status for s in started], ["error", "cancelled"])

    def test_instrument_takes_on_cancel_too(self):
        reg = registry()

        async def tokens():
            yield "a"
            await asyncio.sleep(3600)
            yield "b"

        async def consume():
            async for _ in reg.instrument(tokens(), on_cancel="error"):
                pass

        async def main():
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(consume(), 0.005)
        run(main())
        self.assertEqual(counts(reg), dict(begun=1, completed=0, cancelled=0, errors=1))


class OnlyTaskCancels(unittest.TestCase):
    def test_other_client_exits_stay_cancelled_and_failures_error(self):
        reg = registry()
        for exc, status in ((BrokenPipeError(), "cancelled"), (ConnectionResetError(), "cancelled"),
                            (KeyError("x"), "error")):
            with self.assertRaises(type(exc)):
                with reg.stream(on_cancel="error") as s:
                    raise exc
            self.assertEqual(s.status, status, exc)
        with reg.stream(on_cancel="error") as s:
            pass
        self.assertEqual(s.status, "completed")

    def test_sync_with_and_concurrent_futures_cancel(self):
        import concurrent.futures
        reg = registry()
        with self.assertRaises(concurrent.futures.CancelledError):
            with reg.stream(on_cancel="error") as s:
                raise concurrent.futures.CancelledError()
        self.assertEqual(s.status, "error")


class BadOnCancel(unittest.TestCase):
    def test_bad_values_are_refused_before_anything_begins(self):
        reg = registry()
        for bad in ("completed", "timeout", None, 0, ["error"]):
            with self.assertRaises(ValueError, msg=repr(bad)):
                reg.stream(on_cancel=bad)
            with self.assertRaises(ValueError, msg=repr(bad)):
                reg.instrument([1], on_cancel=bad)
        with self.assertRaises(TypeError):
            reg.stream(None, None, None, None, "error")   # keyword-only
        self.assertEqual(counts(reg)["begun"], 0)

    def test_a_callable_that_fails_ends_as_error_and_the_cancel_goes_on(self):
        reg = registry()

        def broken(e):
            raise RuntimeError("bug in the server's callback")

        for cb, what in ((broken, "raised"), (lambda e: "completed", "returned 'completed'")):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                with self.assertRaises(asyncio.CancelledError):   # not replaced
                    with reg.stream(on_cancel=cb) as s:
                        raise asyncio.CancelledError()
            self.assertEqual(s.status, "error")
            self.assertEqual(len(w), 1)
            self.assertIs(w[0].category, RuntimeWarning)
            self.assertIn(what, str(w[0].message))


if __name__ == "__main__":
    unittest.main()
