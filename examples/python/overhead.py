#!/usr/bin/env python3
"""Per-token cost of the Python bindings, against an empty Python method call.

  python3 overhead.py [--calls 200000] [--repeat 7]

Prints one line per case (best of --repeat runs, ns per call) and a JSON
line at the end. Every loop has the same shape (bound method, call with
the loop counter), so the difference to "empty method" is what the binding
adds. docs/python.md quotes the numbers.
"""

import argparse
import ctypes
import json
import os
import sys
import time

try:
    import ttft
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import ttft
from ttft import _lib


class Empty:
    def token(self, n=1, t_ns=None):
        pass


def loop_t(fn, n, t0):
    start = time.perf_counter_ns()
    for i in range(n):
        fn(1, t0 + i)
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
        fn(1, now())
    return time.perf_counter_ns() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()

    reg = ttft.Registry(max_inflight=64)
    lib = _lib.load()
    t0 = time.monotonic_ns()
    results = {}

    def best(name, make, loop):
        runs = []
        for _ in range(args.repeat):
            fn, cleanup = make()
            runs.append(loop(fn, args.calls, time.monotonic_ns()) / args.calls)
            cleanup()
        results[name] = round(min(runs), 1)
        print("%-44s %8.1f ns/call" % (name, results[name]), flush=True)

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

    def raw_ctypes():
        s, done = stream()
        ptr, h, f = reg.address, s.handle, lib.ttft_token_emitted

        def call(n, t):
            return f(ptr, h, n, t)
        return call, done

    def raw_ctypes_direct():
        # the bare foreign call, no Python wrapper function at all
        s, done = stream()
        ptr, h, f = reg.address, s.handle, lib.ttft_token_emitted
        return (lambda n, t, f=f, p=ptr, h=h: f(p, h, n, t)), done

    best("empty Python method call (n, t)", empty, loop_t)
    best("empty Python method call ()", empty, loop_none)
    best("s.token(1, t_ns) caller timestamp", bound("token"), loop_t)
    best("s.token() library clock", bound("token"), loop_none)
    best("s.token(1, time.monotonic_ns())", bound("token"), loop_monotonic)
    best("ctypes ttft_token_emitted via lambda", raw_ctypes_direct, loop_t)
    results["binding_overhead_t_ns"] = round(
        results["s.token(1, t_ns) caller timestamp"] - results["empty Python method call (n, t)"], 1)
    results["binding_overhead_now"] = round(
        results["s.token() library clock"] - results["empty Python method call ()"], 1)
    print(json.dumps({"python": sys.version.split()[0], "calls": args.calls, "ns_per_call": results}))
    del t0, raw_ctypes
    reg.close()


if __name__ == "__main__":
    main()
