"""reg.stream() and reg.instrument(): sync, async, exceptions, cancellation."""

import asyncio
import unittest

from support import registry, ttft


def counts(reg):
    snap = reg.snapshot()
    return {k: snap.counter(k) for k in ("begun", "completed", "cancelled", "errors", "tokens")}


class Boom(Exception):
    pass


class StreamScope(unittest.TestCase):
    def test_normal_exit_completes(self):
        reg = registry()
        chat = reg.add_class("chat")
        with reg.stream(cls=chat) as s:
            self.assertIsInstance(s, ttft.Stream)
            s.token()
            s.token(3)
        self.assertEqual(s.status, "completed")
        self.assertEqual(counts(reg), dict(begun=1, completed=1, cancelled=0, errors=0, tokens=4))
        self.assertEqual(reg.snapshot().count("ttft", cls=chat), 1)

    def test_exception_is_error_and_propagates(self):
        reg = registry()
        with self.assertRaises(Boom):
            with reg.stream() as s:
                s.token()
                raise Boom()
        self.assertEqual(s.status, "error")
        self.assertEqual(counts(reg)["errors"], 1)

    def test_connection_error_is_cancelled(self):
        reg = registry()
        with self.assertRaises(BrokenPipeError):
            with reg.stream() as s:
                raise BrokenPipeError()
        self.assertEqual(s.status, "cancelled")
        self.assertEqual(reg.snapshot().counter("abandoned"), 1)

    def test_body_may_end_the_stream_itself(self):
        reg = registry()
        with reg.stream() as s:
            s.token()
            s.end("error")
        self.assertEqual(s.status, "error")
        self.assertEqual(counts(reg), dict(begun=1, completed=0, cancelled=0, errors=1, tokens=1))

    def test_begin_happens_on_enter_with_given_time(self):
        reg = registry()
        scope = reg.stream(t_ns=5_000_000_000)
        self.assertEqual(reg.inflight(), 0)
        with scope as s:
            self.assertEqual(reg.inflight(), 1)
            self.assertEqual(s.stats().t_begin_ns, 5_000_000_000)
        self.assertEqual(reg.inflight(), 0)
        with self.assertRaises(RuntimeError):
            with scope:
                pass

    def test_async_with(self):
        reg = registry()

        async def handler():
            async with reg.stream() as s:
                await asyncio.sleep(0)
                s.token()
            return s

        s = asyncio.run(handler())
        self.assertEqual(s.status, "completed")

    def test_task_cancel_is_cancelled(self):
        reg = registry()
        started = []

        async def handler():
            async with reg.stream() as s:
                started.append(s)
                s.token()
                await asyncio.sleep(3600)

        async def main():
            task = asyncio.create_task(handler())
            while not started:
                await asyncio.sleep(0)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        self.assertEqual(started[0].status, "cancelled")
        self.assertEqual(counts(reg), dict(begun=1, completed=0, cancelled=1, errors=0, tokens=1))


class InstrumentSync(unittest.TestCase):
    def test_exhausted_iterable_completes(self):
        reg = registry()
        out = list(reg.instrument(["a", "b", "c"]))
        self.assertEqual(out, ["a", "b", "c"])
        self.assertEqual(counts(reg), dict(begun=1, completed=1, cancelled=0, errors=0, tokens=3))
        snap = reg.snapshot()
        self.assertEqual(snap.count("itl"), 2)
        self.assertEqual(snap.count("ttft"), 1)

    def test_count_callable(self):
        reg = registry()
        chunks = [[1, 2], [], [3, 4, 5]]
        out = list(reg.instrument(chunks, count=len))
        self.assertEqual(out, chunks)
        snap = reg.snapshot()
        self.assertEqual(snap.counter("tokens"), 5)
        self.assertEqual(snap.count("itl"), 1)  # the empty chunk is no emission

    def test_break_closes_the_generator_as_cancelled(self):
        reg = registry()
        closed = []

        def tokens():
            try:
                for i in range(100):
                    yield i
            finally:
                closed.append(True)

        gen = reg.instrument(tokens())
        for tok in gen:
            if tok == 4:
                break
        gen.close()
        self.assertEqual(closed, [True])
        self.assertEqual(counts(reg), dict(begun=1, completed=0, cancelled=1, errors=0, tokens=5))

    def test_generator_collected_unfinished_is_cancelled(self):
        reg = registry()
        gen = reg.instrument(iter(range(10)))
        next(gen)
        del gen  # CPython closes it now: GeneratorExit
        self.assertEqual(counts(reg)["cancelled"], 1)
        self.assertEqual(reg.inflight(), 0)

    def test_iterable_raising_is_error(self):
        reg = registry()

        def tokens():
            yield 1
            raise Boom()

        with self.assertRaises(Boom):
            for _ in reg.instrument(tokens()):
                pass
        self.assertEqual(counts(reg), dict(begun=1, completed=0, cancelled=0, errors=1, tokens=1))

    def test_never_started_never_begins(self):
        reg = registry()
        gen = reg.instrument([1, 2])
        del gen
        self.assertEqual(counts(reg)["begun"], 0)

    def test_class_and_prompt(self):
        reg = registry()
        chat = reg.add_class("chat")
        list(reg.instrument([1, 2], cls=chat, prompt_tokens=100, prefix_hit=True))
        snap = reg.snapshot()
        self.assertEqual(snap.count("ttft", cls=chat), 1)
        self.assertEqual(snap.split_count("prefix_cache", 1), 1)

    def test_not_iterable(self):
        reg = registry()
        with self.assertRaises(TypeError):
            reg.instrument(42)
        with self.assertRaises(TypeError):
            reg.instrument([1], count=3)


class InstrumentAsync(unittest.TestCase):
    def test_async_iterable_completes(self):
        reg = registry()

        async def tokens():
            for i in range(4):
                await asyncio.sleep(0)
                yield i

        async def main():
            return [t async for t in reg.instrument(tokens())]

        self.assertEqual(asyncio.run(main()), [0, 1, 2, 3])
        self.assertEqual(counts(reg), dict(begun=1, completed=1, cancelled=0, errors=0, tokens=4))

    def test_task_cancel_while_waiting_for_a_token(self):
        reg = registry()
        got = []

        async def tokens():
            yield "first"
            await asyncio.sleep(3600)
            yield "never"

        async def consume():
            async for t in reg.instrument(tokens()):
                got.append(t)

        async def main():
            task = asyncio.create_task(consume())
            while not got:
                await asyncio.sleep(0)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        self.assertEqual(counts(reg), dict(begun=1, completed=0, cancelled=1, errors=0, tokens=1))

    def test_aclose_is_cancelled(self):
        reg = registry()

        async def tokens():
            for i in range(100):
                yield i

        async def main():
            agen = reg.instrument(tokens())
            self.assertEqual(await agen.__anext__(), 0)
            self.assertEqual(await agen.__anext__(), 1)
            await agen.aclose()

        asyncio.run(main())
        self.assertEqual(counts(reg), dict(begun=1, completed=0, cancelled=1, errors=0, tokens=2))

    def test_async_iterable_raising_is_error(self):
        reg = registry()

        async def tokens():
            yield 1
            raise Boom()

        async def main():
            async for _ in reg.instrument(tokens()):
                pass

        with self.assertRaises(Boom):
            asyncio.run(main())
        self.assertEqual(counts(reg)["errors"], 1)


if __name__ == "__main__":
    unittest.main()
