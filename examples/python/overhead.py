#!/usr/bin/env python3
"""Per-token cost of the Python bindings: Stream.token() against an empty
Python method call, and Registry.step_emitted() (one call per decode step)
against one Stream.token() per stream.

  python3 overhead.py [--calls 200000] [--repeat 9] [--batches 1,8,64,256]

Every case runs --repeat times; the figure is the median (this machine may
be shared and noisy), the minimum is printed beside it. One JSON line at the
end carries every median. Every loop has the same shape, so the difference
to "empty method" is what the binding adds, and the step cases divide the
time of a whole step by the tokens it records. docs/python.md quotes the
numbers.
"""

import argparse
import json
import os
import statistics
import sys
import time

try:
    import ttft
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import ttft
from ttft import _lib


class Empty:
    def token(self, n=1, *, t_ns=None):
        pass


def loop_t(fn, n, t0):
    start = time.perf_counter_ns()
    for i in range(n):
        fn(1, t_ns=t0 + i)
    return time.perf_counter_ns() - start


def loop_none(fn, n, t0):
    start = time.perf_counter_ns()
    for i in range(n):
        fn()
    return time.perf_counter_ns() - start


def loop_monotonic(fn, n, t0):
    now = time.monotonic_ns
    start = time.perf_counter_ns()
    for i in range(n):
        fn(1, t_ns=now())
    return time.perf_counter_ns() - start


# ------------------------------------------------------------- decode steps
# Each returns the time of `steps` decode steps over `batch`.
def steps_token_now(reg, batch, steps, t0):
    start = time.perf_counter_ns()
    for _ in range(steps):
        for s in batch:
            s.token()
    return time.perf_counter_ns() - start


def steps_token_t(reg, batch, steps, t0):
    start = time.perf_counter_ns()
    for k in range(steps):
        t = t0 + k
        for s in batch:
            s.token(t_ns=t)
    return time.perf_counter_ns() - start


def steps_step_now(reg, batch, steps, t0):
    step = reg.step_emitted
    start = time.perf_counter_ns()
    for _ in range(steps):
        step(batch)
    return time.perf_counter_ns() - start


def steps_step_t(reg, batch, steps, t0):
    step = reg.step_emitted
    start = time.perf_counter_ns()
    for k in range(steps):
        step(batch, t_ns=t0 + k)
    return time.perf_counter_ns() - start


def steps_step_n(reg, batch, steps, t0):
    """A speculative step: a list of per-stream token counts."""
    step = reg.step_emitted
    ns = [1 + i % 3 for i in range(len(batch))]
    start = time.perf_counter_ns()
    for k in range(steps):
        step(batch, ns, t_ns=t0 + k)
    return time.perf_counter_ns() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=200_000,
                   help="tokens recorded per run of each case")
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--batches", default="1,8,64,256",
                   help="decode batch sizes (streams per step) for the step cases")
    args = p.parse_args()
    batches = [int(b) for b in args.batches.split(",") if b]

    reg = ttft.Registry(max_inflight=4096)
    lib = _lib.load()
    results = {}

    def report(name, runs):
        results[name] = round(statistics.median(runs), 1)
        print("%-52s %8.1f ns  (min %.1f)" % (name, results[name], min(runs)), flush=True)

    def per_call(name, make, loop):
        runs = []
        for _ in range(args.repeat):
            fn, cleanup = make()
            runs.append(loop(fn, args.calls, time.monotonic_ns()) / args.calls)
            cleanup()
        report(name, runs)

    def stream():
        s = reg.begin()
        return s, lambda: s.end()

    def empty():
        return Empty().token, lambda: None

    def bound(method):
        def make():
            s, done = stream()
            return getattr(s, method), done
        return make

    def raw_ctypes_direct():
        # the bare foreign call, no Python wrapper function at all
        s, done = stream()
        ptr, h, f = reg.address, s.handle, lib.ttft_token_emitted
        return (lambda n, t_ns, f=f, p=ptr, h=h: f(p, h, n, t_ns)), done

    print("-- one call per token (ns per call)")
    per_call("empty Python method call (n, t_ns=t)", empty, loop_t)
    per_call("empty Python method call ()", empty, loop_none)
    per_call("s.token(1, t_ns=t) caller timestamp", bound("token"), loop_t)
    per_call("s.token() library clock", bound("token"), loop_none)
    per_call("s.token(1, t_ns=time.monotonic_ns())", bound("token"), loop_monotonic)
    per_call("ctypes ttft_token_emitted via lambda", raw_ctypes_direct, loop_t)
    results["binding_overhead_t_ns"] = round(
        results["s.token(1, t_ns=t) caller timestamp"]
        - results["empty Python method call (n, t_ns=t)"], 1)
    results["binding_overhead_now"] = round(
        results["s.token() library clock"] - results["empty Python method call ()"], 1)

    cases = [("token() per stream, now", steps_token_now),
             ("step_emitted(batch), now", steps_step_now),
             ("token(t_ns=t) per stream", steps_token_t),
             ("step_emitted(batch, t_ns=t)", steps_step_t),
             ("step_emitted(batch, [1|2|3...], t_ns=t)", steps_step_n)]
    ratios = {}
    for b in batches:
        steps = max(1, args.calls // b)
        print("-- decode steps of %d streams (ns per token)" % b)
        for name, fn in cases:
            runs = []
            for _ in range(args.repeat):
                batch = [reg.begin() for _ in range(b)]
                took = fn(reg, batch, steps, time.monotonic_ns())
                runs.append(took / (steps * b))   # per emission (stream and step)
                for s in batch:
                    s.end()
            report("B=%d %s" % (b, name), runs)
        ratios["B=%d now" % b] = round(results["B=%d step_emitted(batch), now" % b]
                                       / results["B=%d token() per stream, now" % b], 3)
        ratios["B=%d t_ns" % b] = round(results["B=%d step_emitted(batch, t_ns=t)" % b]
                                        / results["B=%d token(t_ns=t) per stream" % b], 3)
        print("   step / token() per token: %.3f (now), %.3f (t_ns)"
              % (ratios["B=%d now" % b], ratios["B=%d t_ns" % b]))
    print(json.dumps({"python": sys.version.split()[0], "calls": args.calls,
                      "repeat": args.repeat, "median_ns": results,
                      "step_over_token_ratio": ratios}))
    reg.close()


if __name__ == "__main__":
    main()
