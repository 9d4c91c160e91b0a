# py-step-emitted — docs/integration.md, one decode step recorded with one
# call: the sample runs inside a loop of steps over a stand-in scheduler
# (three requests, one cancelled by its client between steps); afterwards
# what was recorded is checked.
import types

import ttft

reg = ttft.Registry(max_inflight=16)
reqs = [types.SimpleNamespace(stream=reg.begin(), left=n, new_visible_tokens=0) for n in (3, 2, 4)]
reqs[2].stream.end("cancelled")  # the client went away; still in the batch this step
scheduler = types.SimpleNamespace(running=[], finished_this_step=[])
for step in range(4):
    scheduler.running = [r for r in reqs if r.left > 0]
    for r in scheduler.running:
        r.new_visible_tokens = 1
        r.left -= 1
    scheduler.finished_this_step = [r for r in scheduler.running if r.left == 0 and not r.stream.ended]
    @SAMPLE@

snap = reg.snapshot()
assert snap.counter("completed") == 2, snap.counter("completed")
assert snap.counter("tokens") == 3 + 2, snap.counter("tokens")
assert snap.counter("stale") == 4, snap.counter("stale")  # the cancelled one, every step
print("ok: 2 completed, 5 tokens, 4 stale")
