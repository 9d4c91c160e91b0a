# py-proxy — docs/integration.md, a streaming proxy: the sample defines the
# registry and the handler; this wrapper imports ttft (the page's first
# sample did), stands in for the upstream server and the client socket,
# proxies one stream and checks what was recorded.
import asyncio
import types

import ttft


class _Upstream:
    def stream(self, request):
        return self

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False

    async def sse_events(self):
        for raw in (b"data: {\"delta\": \"Hel\"}\n\n", b": keep-alive\n\n", b"data: {\"delta\": \"lo\"}\n\n"):
            await asyncio.sleep(0)
            yield types.SimpleNamespace(raw=raw)


upstream = _Upstream()
written = []


class _Client:
    async def write(self, raw):
        written.append(raw)

    async def drain(self):
        await asyncio.sleep(0)


client = _Client()


def classify(request):
    return None


def tokens_in(event):
    return 1 if event.raw.startswith(b"data:") else 0

@SAMPLE@


asyncio.run(proxy(types.SimpleNamespace()))
snap = reg.snapshot()
assert len(written) == 3, written
assert snap.counter("completed") == 1 and snap.counter("tokens") == 2, (
    snap.counter("completed"), snap.counter("tokens"))
print("ok: proxied 3 events, 2 tokens")
