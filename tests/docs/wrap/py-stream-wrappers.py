# py-stream-wrappers — docs/python.md "The wrappers": the fragment runs as
# the body of a coroutine (it mixes `with`, `for` and `async for`), with a
# registry, a class and the streams of tokens it iterates; afterwards the
# streams it recorded are checked.
import asyncio
import ttft

reg = ttft.Registry(max_inflight=64)
chat = reg.add_class("chat", ttft_slo=0.5, tpot_slo=0.05)
sent = []


def generate():
    yield from ("Hel", "lo", "!")


def send(chunk):
    sent.append(chunk)


token_iterable = ["a", "b", "c"]


async def _tokens():
    for t in ("x", "y"):
        await asyncio.sleep(0)
        yield t


async_tokens = _tokens()


async def _sample():
    @SAMPLE@


asyncio.run(_sample())
snap = reg.snapshot()
assert sent == ["Hel", "lo", "!"], sent
assert snap.counter("completed") == 3, snap.counter("completed")  # stream, instrument, async instrument
assert snap.counter("tokens") == 3 + 3 + 2, snap.counter("tokens")
print("ok: 3 streams, %d tokens" % snap.counter("tokens"))
