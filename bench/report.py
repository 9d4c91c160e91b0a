#!/usr/bin/env python3
"""Render ttft-bench's JSON (bench/results.json) as the Markdown tables of
docs/performance.md:  python3 bench/report.py [bench/results.json]"""
import json
import sys


def fmt(v, unit):
    if v is None:
        return "n/a"
    if unit in ("KiB", "bytes"):
        return "%.0f %s" % (v, unit)
    return "%.2f %s" % (v, unit)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "bench/results.json"
    with open(path) as f:
        d = json.load(f)
    m = d["machine"]
    print("Run: libttft %s, %s, %s CPUs, kernel %s, load average %.2f -> %.2f, %d reps, %.0f s%s, peer: %s\n"
          % (d["library_version"], m["cpu"], m["online_cpus"], m["kernel"],
             m.get("loadavg_start") or 0, m.get("loadavg_end") or 0, d["reps"], d["seconds"],
             " (QUICK)" if d["quick"] else "", d["peer"] or "not built"))
    print("| group | row | median (CPU) | min .. max | wall | all threads | note |")
    print("|---|---|---:|---:|---:|---:|---|")
    for r in d["rows"]:
        u = r["unit"]
        span = "%.2f .. %.2f" % (r["min"], r["max"]) if r["reps"] > 1 else ""
        wall = "%.2f" % r["wall_median"] if r.get("wall_median") else ""
        agg = "%.2f ns/op" % r["all_threads_ns_per_op"] if r.get("all_threads_ns_per_op") else ""
        print("| %s | %s | %s | %s | %s | %s | %s |" % (r["group"], r["name"], fmt(r["median"], u), span,
                                                      wall, agg, r["note"]))
    print("\n| target | measured | limit | |")
    print("|---|---:|---:|---|")
    for t in d["targets"]:
        if t["unit"] == "x":
            a, b = "%.2fx" % t["value"], "<= %.2fx" % t["limit"]
        else:
            a, b = fmt(t["value"], t["unit"]), "<= %g %s" % (t["limit"], t["unit"])
        print("| %s | %s | %s | %s |" % (t["name"], a, b, "met" if t["met"] else "**MISSED**"))


if __name__ == "__main__":
    main()
