#!/usr/bin/env python3
"""Reproduce `vllm bench serve` numbers from a libttft snapshot.

  python3 compare_tools.py RESULT.json [--percentiles 50,90,99] [--json]
  python3 compare_tools.py --demo

RESULT.json is what `vllm bench serve --save-result --save-detailed` writes:
per request `ttfts`, `itls`, `output_lens`, `errors` (and, when present,
`latencies`, `start_times`), in seconds. The script replays every request
into a libttft registry with the recipe of docs/metrics.md ("Comparing with
other tools"):

  - begin at the request's send time, one emission per content chunk (the
    first at ttft, then one per itl entry), end COMPLETED at the last
    content chunk (vLLM's latency stops there) for a successful request,
    ERROR for a failed one (errors[i] not empty);
  - successful requests in class "ok", failed ones in class "failed" (the
    replay knows the outcome, so ITL, which has no status view, can be read
    for the successful requests alone).

Then it prints, for TTFT, TPOT, ITL and E2EL, vLLM's own figure recomputed
from the file the way vLLM computes it (numpy's linear interpolation over
the successful requests), the figure the file itself holds (p<P>_<m>_ms,
median_<m>_ms) when there is one, and two libttft figures read from the
snapshot: the linear interpolation of its two neighbouring order statistics
(what vLLM prints, within libttft's 0.5 %) and its nearest-rank quantile
(libttft's own definition). --json prints the same as one JSON document.

--demo runs the same on a small synthetic result, for a first look without
vLLM. Standard library only.
"""

import argparse
import json
import math
import os
import random
import sys

try:
    import ttft
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import ttft

T0 = 1_000_000_000_000  # ns; any positive origin (t_ns = 0 would mean "now")


def linear(values, q):
    """numpy.percentile's default method: h = (N-1)q, interpolate between
    x[floor h] and x[floor h + 1]."""
    xs = sorted(values)
    if not xs:
        return 0.0
    h = (len(xs) - 1) * q
    lo = int(math.floor(h))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


def lib_linear(snap, metric, q, status=None, cls=None):
    """numpy's linear percentile from a snapshot: the order statistics
    x(floor h + 1) and x(floor h + 2), h = (n-1)q, each read as the
    nearest-rank quantile (k - 1/2)/n, interpolated. ns."""
    n = snap.count(metric, cls=cls, status=status)
    if n == 0:
        return 0.0
    h = (n - 1) * q
    lo = int(h)
    a = snap.quantile_ns(metric, (lo + 0.5) / n, cls=cls, status=status)
    b = snap.quantile_ns(metric, (min(lo + 1, n - 1) + 0.5) / n, cls=cls, status=status)
    return a + (h - lo) * (b - a)


def ns(seconds):
    return int(round(seconds * 1e9))


def replay(res):
    """Record the result's requests into a new registry. Returns (registry,
    the vLLM-style values per metric in seconds, counts)."""
    ttfts, itls = res["ttfts"], res["itls"]
    errors = res.get("errors") or [""] * len(ttfts)
    out_lens = res.get("output_lens") or [0] * len(ttfts)
    latencies = res.get("latencies")
    starts = res.get("start_times")
    t_first = min(starts) if starts else 0.0
    n = len(ttfts)
    reg = ttft.Registry(max_inflight=1024, max_classes=4, start_point="client_send",
                        token_point="sse_content_chunk")
    ok_cls, failed_cls = reg.add_class("ok"), reg.add_class("failed")
    vals = {"ttft": [], "tpot": [], "itl": [], "e2el": []}
    counts = {"completed": 0, "failed": 0, "short_output_lens": 0}
    for i in range(n):
        ok = not errors[i] and ttfts[i] > 0
        begin = T0 + (ns(starts[i] - t_first) if starts else i * 1_000_000)
        gaps = list(itls[i] or [])
        chunks = ([begin + ns(ttfts[i])] if ttfts[i] > 0 else [])
        for g in gaps if chunks else []:
            chunks.append(chunks[-1] + ns(g))
        s = reg.begin(t_ns=begin, cls=ok_cls if ok else failed_cls)
        if ok:
            latency = latencies[i] if latencies and latencies[i] else ttfts[i] + sum(gaps)
            n_tok = out_lens[i] or len(chunks)
            if n_tok < len(chunks):          # fewer tokens than chunks: cannot be
                counts["short_output_lens"] += 1   # split, one token per chunk
                n_tok = len(chunks)
            # the first chunk carries what the later ones (one each) do not
            sizes = [n_tok - (len(chunks) - 1)] + [1] * (len(chunks) - 1)
            for t, k in zip(chunks, sizes):
                s.token(k, t_ns=t, allow_large=True)
            s.end("completed", t_ns=max(chunks[-1], begin + ns(latency)))
            counts["completed"] += 1
            vals["ttft"].append(ttfts[i])
            vals["itl"].extend(gaps)
            vals["e2el"].append(latency)
            if out_lens[i] and out_lens[i] > 1:
                vals["tpot"].append((latency - ttfts[i]) / (out_lens[i] - 1))
        else:
            for t in chunks:
                s.token(1, t_ns=t)
            s.end("error", t_ns=chunks[-1] if chunks else begin + 1)
            counts["failed"] += 1
    return reg, vals, counts


# metric -> (libttft metric, status view or None, class or None, where it is read)
RECIPE = {
    "ttft": ("ttft", "completed", None, "ttft, status=completed"),
    "tpot": ("tpot", "completed", None, "tpot, status=completed"),
    "itl": ("itl", None, "ok", "itl, class ok (replay)"),
    "e2el": ("e2e", "completed", None, "e2e, status=completed, end at last chunk"),
}


def compare(res, percentiles):
    reg, vals, counts = replay(res)
    snap = reg.snapshot()
    doc = dict(counts)
    doc["metrics"] = {}
    for m, (metric, status, cls, where) in RECIPE.items():
        doc["metrics"][m] = {"libttft_view": where}
        for p in percentiles:
            q = p / 100.0
            key = ("%g" % p)
            fkey = "p%s_%s_ms" % (key, m)
            file_ms = res.get(fkey)
            if file_ms is None and p == 50:
                file_ms = res.get("median_%s_ms" % m)
            doc["metrics"][m][key] = {
                "vllm_ms": linear(vals[m], q) * 1000,
                "file_ms": file_ms,
                "libttft_linear_ms": lib_linear(snap, metric, q, status, cls) / 1e6,
                "libttft_ms": snap.quantile_ns(metric, q, cls=cls, status=status) / 1e6,
            }
    snap.close()
    reg.close()
    return doc


def demo_result(seed=7, n=200):
    """A small synthetic vLLM result: 90 % successes, speculative decoding
    on a third of the requests (several tokens per chunk)."""
    rng = random.Random(seed)
    res = {"ttfts": [], "itls": [], "output_lens": [], "errors": [], "start_times": []}
    for i in range(n):
        res["start_times"].append(i * 0.05)
        ok = rng.random() < 0.9
        ttft_s = 0.12 * math.exp(rng.gauss(0, 0.5))
        k = rng.randint(1, 150) if ok else rng.randint(0, 20)
        step = 0.02 * math.exp(rng.gauss(0, 0.3))
        gaps = [step * math.exp(rng.gauss(0, 0.2)) for _ in range(max(k - 1, 0))]
        per_chunk = rng.choice((1, 1, 2, 3))
        res["ttfts"].append(ttft_s if k else 0.0)
        res["itls"].append(gaps)
        res["output_lens"].append(k * per_chunk if ok else 0)
        res["errors"].append("" if ok else "demo: connection reset")
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("result", nargs="?", help="vllm bench serve result JSON (--save-detailed)")
    ap.add_argument("--demo", action="store_true", help="use a synthetic result")
    ap.add_argument("--percentiles", default="50,90,99")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args(argv)
    if args.demo:
        res = demo_result()
    elif args.result:
        with open(args.result) as f:
            res = json.load(f)
    else:
        ap.error("give a result file or --demo")
    for field in ("ttfts", "itls"):
        if field not in res:
            sys.exit("%s: no per-request %r: save the result with --save-detailed"
                     % (args.result, field))
    percentiles = sorted({float(p) for p in args.percentiles.split(",") if p.strip()})
    doc = compare(res, percentiles)
    if args.json:
        print(json.dumps(doc, indent=1, sort_keys=True))
        return 0
    print("%d successful, %d failed requests replayed into libttft%s"
          % (doc["completed"], doc["failed"],
             "" if not doc["short_output_lens"] else
             " (%d with fewer output_lens than chunks: one token per chunk)"
             % doc["short_output_lens"]))
    print("%-5s %-5s %12s %12s %16s %14s   %s" % ("", "p", "vLLM ms", "file ms",
                                               "libttft lin ms", "libttft NR ms", "read from"))
    for m, rows in doc["metrics"].items():
        for p in percentiles:
            r = rows["%g" % p]
            print("%-5s %-5g %12.3f %12s %16.3f %14.3f   %s"
                  % (m, p, r["vllm_ms"], "-" if r["file_ms"] is None else "%.3f" % r["file_ms"],
                     r["libttft_linear_ms"], r["libttft_ms"], rows["libttft_view"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
