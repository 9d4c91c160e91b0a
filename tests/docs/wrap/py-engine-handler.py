# py-engine-handler — docs/integration.md, a front end whose engine runs in
# another process: the sample defines the handler; this wrapper gives it a
# stand-in engine (events with monotonic timestamps, deltas of text), calls
# it for two requests (one runs to the end, one whose client goes away) and
# checks what the registry recorded.
import asyncio
import time
import types


def tokenize(request):
    return list(range(request.prompt_len))


sent = []


async def send_sse(request, text):
    if request.disconnect_after is not None and len(request.sent) >= request.disconnect_after:
        raise ConnectionResetError("client went away")
    request.sent.append(text)
    sent.append(text)


class _Engine:
    """vLLM-like outputs: engine events with monotonic timestamps (s), the
    cumulative token ids, the text the detokenizer released, cached tokens."""

    async def generate(self, prompt_ids, request_id=None):
        t = time.monotonic()
        ids = []
        yield types.SimpleNamespace(engine_events=[types.SimpleNamespace(type="SCHEDULED", timestamp=t)],
                                    delta_text="", token_ids=list(ids), num_cached_tokens=None,
                                    new_tokens_since_last_flush=0)
        for k in range(4):
            await asyncio.sleep(0.001)
            ids += [k] * (1 + (k == 2))
            yield types.SimpleNamespace(engine_events=[], delta_text="tok%d " % k, token_ids=list(ids),
                                        num_cached_tokens=len(prompt_ids) // 2,
                                        new_tokens_since_last_flush=1 + (k == 2))


engine = _Engine()

@SAMPLE@


async def _drive():
    ok = types.SimpleNamespace(prompt_len=12, disconnect_after=None, sent=[])
    gone = types.SimpleNamespace(prompt_len=7, disconnect_after=2, sent=[])
    await chat_completions(ok)
    try:
        await chat_completions(gone)
    except ConnectionResetError:
        pass


asyncio.run(_drive())
snap = reg.snapshot()
assert snap.counter("completed") == 1 and snap.counter("cancelled") == 1, (
    snap.counter("completed"), snap.counter("cancelled"))
assert snap.count("queue") == 2, snap.count("queue")        # the SCHEDULED marks arrived
assert snap.counter("tokens") == 5 + 2, snap.counter("tokens")
print("ok: completed 1, cancelled 1, tokens %d" % snap.counter("tokens"))
