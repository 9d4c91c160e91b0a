#!/usr/bin/env python3
"""parse_client.py EXPOSE_BIN WORKDIR

Writes every exposition variant with EXPOSE_BIN (tests/prom/expose.c) and
parses each with the reference Python client (python3-prometheus-client):
the .prom files with prometheus_client.parser, the .om files with
prometheus_client.openmetrics.parser. Then checks what the parsers return:

  - the expected families exist with the expected types;
  - every histogram series: buckets ascending in le, cumulative counts
    never decreasing, a +Inf bucket equal to _count, a _sum;
  - every summary series: quantiles 0.5 .. 0.999 never decreasing, and its
    _count equal to the histogram of the same metric and labels;
  - both formats carry exactly the same samples (name, labels, value);
  - the hostile variant's label values parse back to the raw bytes the
    registry was given (labels.expect), invalid UTF-8 as U+FFFD;
  - the exemplars variant: the OpenMetrics parser returns exemplars
    (trace_id, value, timestamp) on TTFT, ITL and worst-gap buckets only,
    each inside its bucket, the slowest request of each class among them
    (the other variants carry none: no trace ids);
  - the default class, never added and never used, has no series (idle),
    unless export_idle_classes is set (idle_all); added classes have
    series at zero from ttft_class_add on; the status views have series
    for the statuses that ended streams; llm_stale_hook_calls_total is one
    sample without a class label (3 in the classes variant).

The module missing: FAIL under CI (CI set), otherwise exit 77 (ctest SKIP).
"""
import math
import os
import subprocess
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families as parse_text
    from prometheus_client.openmetrics.parser import (
        text_string_to_metric_families as parse_om,
    )
except ImportError as e:  # pragma: no cover - environment dependent
    if os.environ.get("CI"):
        print("FAIL: python prometheus_client missing (python3-prometheus-client): %s" % e)
        sys.exit(1)
    print("SKIP: python prometheus_client missing (apt-get install python3-prometheus-client)")
    sys.exit(77)

VARIANTS = ["empty", "default", "classes", "hostile", "custom", "summaries", "idle", "idle_all",
            "exemplars"]
HISTOGRAMS = {
    "gen_ai_server_time_to_first_token_seconds",
    "gen_ai_server_time_per_output_token_seconds",
    "gen_ai_server_request_duration_seconds",
    "{ns}inter_token_latency_seconds",
    "{ns}inter_token_latency_per_token_seconds",
    "{ns}time_to_first_token_by_status_seconds",
    "{ns}time_per_output_token_by_status_seconds",
    "{ns}request_duration_by_status_seconds",
    "{ns}request_output_tokens_by_status",
    "{ns}request_queue_time_seconds",
    "{ns}request_prefill_time_seconds",
    "{ns}request_decode_time_seconds",
    "{ns}request_output_tokens",
    "{ns}request_inter_token_latency_p95_seconds",
    "{ns}request_inter_token_latency_max_seconds",
    "{ns}abandoned_wait_seconds",
}
COUNTERS = {  # family names as the parsers report them (no _total)
    "{ns}requests_started", "{ns}requests_ended", "{ns}requests_dropped",
    "{ns}output_tokens", "{ns}stalls", "{ns}stalled_requests",
    "{ns}requests_abandoned_before_first_token", "{ns}requests_slo_met",
    "{ns}requests_without_tpot", "{ns}preemptions", "{ns}clock_clamped",
    "{ns}stale_hook_calls",
}
SUMMARIES = 12  # one per histogram of a metric (not the splits, not the views)
GAUGES = {"{ns}requests_in_flight", "{ns}live_stalls", "{ns}stall_budget_seconds"}

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def key(labels, drop):
    return tuple(sorted((k, v) for k, v in labels.items() if k not in drop))


def check_histogram(fam, where, expect_series=True):
    series = {}
    for s in fam.samples:
        k = key(s.labels, ("le",))
        d = series.setdefault(k, {"buckets": [], "sum": None, "count": None})
        if s.name.endswith("_bucket"):
            d["buckets"].append((float(s.labels["le"]), s.value))
        elif s.name.endswith("_sum"):
            d["sum"] = s.value
        elif s.name.endswith("_count"):
            d["count"] = s.value
        elif s.name.endswith("_created"):
            fail("%s: %s has a _created sample" % (where, fam.name))
    if not series and expect_series:
        fail("%s: histogram %s has no series" % (where, fam.name))
    if "_by_status" in fam.name:
        for k in series:
            st = dict(k).get("status")
            if st not in ("completed", "cancelled", "error"):
                fail("%s: %s%s: status label %r" % (where, fam.name, k, st))
    for k, d in series.items():
        les = [b[0] for b in d["buckets"]]
        if les != sorted(les) or len(set(les)) != len(les):
            fail("%s: %s%s: le not strictly ascending" % (where, fam.name, k))
        if not les or les[-1] != math.inf:
            fail("%s: %s%s: no +Inf bucket" % (where, fam.name, k))
            continue
        counts = [b[1] for b in d["buckets"]]
        if any(b < a for a, b in zip(counts, counts[1:])):
            fail("%s: %s%s: cumulative counts decrease" % (where, fam.name, k))
        if d["count"] is None or d["sum"] is None:
            fail("%s: %s%s: missing _sum or _count" % (where, fam.name, k))
        elif counts[-1] != d["count"]:
            fail("%s: %s%s: +Inf %s != _count %s" % (where, fam.name, k, counts[-1], d["count"]))
        elif d["sum"] < 0 or (d["count"] == 0 and d["sum"] != 0):
            fail("%s: %s%s: bad _sum %s" % (where, fam.name, k, d["sum"]))
    return series


def check_summary(fam, where):
    series = {}
    for s in fam.samples:
        k = key(s.labels, ("quantile",))
        d = series.setdefault(k, {"q": [], "count": None})
        if "quantile" in s.labels:
            d["q"].append((float(s.labels["quantile"]), s.value))
        elif s.name.endswith("_count"):
            d["count"] = s.value
    for k, d in series.items():
        qs = [q for q, _ in d["q"]]
        if qs != [0.5, 0.9, 0.95, 0.99, 0.999]:
            fail("%s: %s%s: quantiles %s" % (where, fam.name, k, qs))
        vals = [v for _, v in d["q"]]
        if d["count"] == 0:
            if not all(math.isnan(v) for v in vals):
                fail("%s: %s%s: empty summary with values %s" % (where, fam.name, k, vals))
        elif any(math.isnan(v) for v in vals) or any(b < a for a, b in zip(vals, vals[1:])):
            fail("%s: %s%s: quantiles not monotone: %s" % (where, fam.name, k, vals))
    return series


def check_classes(fams, where, name, ns):
    """Which classes have series, and the registry-level stale counter."""
    classes = {s.labels["class"] for f in fams for s in f.samples if "class" in s.labels}
    want = {
        "empty": set(),
        "idle": {"chat", "batch", "tool"},  # added classes: at zero from class_add on
        "idle_all": {"default", "chat", "batch", "tool"},
    }.get(name)
    if want is not None and classes != want:
        fail("%s: classes with series %s, expected %s" % (where, sorted(classes), sorted(want)))
    stale = [s for f in fams for s in f.samples if s.name == ns + "stale_hook_calls_total"]
    if len(stale) != 1 or "class" in stale[0].labels:
        fail("%s: stale_hook_calls_total samples %s" % (where, stale))
    elif stale[0].value != (3 if name == "classes" else 0):
        fail("%s: stale_hook_calls_total = %s" % (where, stale[0].value))
    if name in ("classes", "default"):
        views = {(s.labels.get("class"), s.labels.get("status")) for f in fams
                 if f.name == ns + "request_duration_by_status_seconds" for s in f.samples}
        statuses = {st for _, st in views}
        if statuses != {"completed", "cancelled", "error"}:
            fail("%s: status views for %s" % (where, sorted(statuses)))


def samples_of(fams):
    out = set()
    for f in fams:
        for s in f.samples:
            v = "NaN" if math.isnan(s.value) else float(s.value)
            out.add((s.name, key(s.labels, ()), v))
    return out


def check_variant(work, name):
    ns = "inference_" if name == "custom" else "llm_"
    per_format = {}
    for ext, parser in (("prom", parse_text), ("om", parse_om)):
        where = "%s.%s" % (name, ext)
        with open(os.path.join(work, where), encoding="utf-8") as f:
            text = f.read()
        try:
            fams = list(parser(text))
        except Exception as e:  # the parser's own verdict is the point
            fail("%s: parser raised %s: %s" % (where, type(e).__name__, e))
            continue
        types = {f.name: f.type for f in fams}
        # the one deliberate pair: the text format keeps the deprecated
        # gauge <ns>coarse_observations beside the counter
        # <ns>coarse_observations_total, which this parser names alike
        # (OpenMetrics has the counter only)
        coarse = [f.type for f in fams if f.name == ns + "coarse_observations"]
        want = ["counter", "gauge"] if ext == "prom" else ["counter"]
        if sorted(coarse) != want:
            fail("%s: %scoarse_observations families %s, expected %s" % (where, ns, sorted(coarse), want))
        if len(types) != len(fams) - (ext == "prom"):
            fail("%s: a family appears twice" % where)
        types[ns + "coarse_observations"] = "counter"
        for n in HISTOGRAMS:
            n = n.format(ns=ns)
            if types.get(n) != "histogram":
                fail("%s: %s is %s, expected histogram" % (where, n, types.get(n)))
        for n in COUNTERS:
            n = n.format(ns=ns)
            if types.get(n) != "counter":
                fail("%s: %s is %s, expected counter" % (where, n, types.get(n)))
        for n in GAUGES:
            n = n.format(ns=ns)
            if types.get(n) != "gauge":
                fail("%s: %s is %s, expected gauge" % (where, n, types.get(n)))
        info = ns + ("measurement" if ext == "om" else "measurement_info")
        if types.get(info) != ("info" if ext == "om" else "gauge"):
            fail("%s: info family %s is %s" % (where, info, types.get(info)))
        hists = {}
        for f in fams:
            if f.type == "histogram":
                # a fresh registry has no class that saw a begin: no series
                hists[f.name] = check_histogram(f, where, expect_series=name != "empty")
        check_classes(fams, where, name, ns)
        nsum = 0
        for f in fams:
            if f.type != "summary":
                continue
            nsum += 1
            series = check_summary(f, where)
            stem = f.name[len(ns):].replace("_quantiles", "")
            twin = [h for h in hists if h.endswith(stem) and "_by_" not in h]
            if len(twin) != 1:
                fail("%s: summary %s has no histogram twin (%s)" % (where, f.name, twin))
                continue
            for k, d in series.items():
                hc = hists[twin[0]].get(k, {}).get("count")
                if hc != d["count"]:
                    fail("%s: %s%s count %s != histogram %s" % (where, f.name, k, d["count"], hc))
        if (name == "summaries") != (nsum == SUMMARIES):
            fail("%s: %d summary families" % (where, nsum))
        per_format[ext] = fams
        print("ok   %s: %d families, %d samples" % (where, len(fams), sum(len(f.samples) for f in fams)))
    if len(per_format) == 2:
        a, b = samples_of(per_format["prom"]), samples_of(per_format["om"])
        # the deprecated gauge is in the text format only (above)
        a = {x for x in a if x[0] != ns + "coarse_observations"}
        if a != b:
            fail("%s: formats differ: %d only in .prom, %d only in .om, e.g. %s"
                 % (name, len(a - b), len(b - a), sorted(a ^ b)[:2]))
    return per_format


def check_exemplars(name, fams):
    """Exemplars the OpenMetrics parser returned for variant name."""
    where = name + ".om"
    found = {}
    prev = {}
    for f in fams:
        for s in f.samples:
            key_ = (f.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "le")))
            le = float(s.labels["le"]) if "le" in s.labels else None
            lo = prev.get(key_, 0.0)
            if le is not None:
                prev[key_] = le
            ex = getattr(s, "exemplar", None)
            if ex is None:
                continue
            if f.name not in EXEMPLAR_FAMILIES or not s.name.endswith("_bucket"):
                fail("%s: exemplar on %s" % (where, s.name))
                continue
            tid = ex.labels.get("trace_id", "")
            if set(ex.labels) != {"trace_id"} or len(tid) != 32 or not all(
                    c in "0123456789abcdef" for c in tid):
                fail("%s: exemplar labels %s" % (where, ex.labels))
            if not (lo < ex.value <= le):
                fail("%s: exemplar %s of %s{le=%s} is outside (%s, %s]" % (where, ex.value, f.name, le, lo, le))
            if ex.timestamp is None:
                fail("%s: exemplar without a timestamp" % where)
            found.setdefault((f.name, s.labels.get("class")), []).append((ex.value, tid))
    if name != "exemplars":
        if found:
            fail("%s: exemplars without trace ids: %s" % (where, sorted(found)[:3]))
        return
    # the slowest stream of each class: TTFT (i+1)*50 ms and gap (i+1)*7 ms
    # for i = 38 (default) and 39 (chat); trace id %016x%016x of (0xabc, i+1)
    for cls, i in (("default", 38), ("chat", 39)):
        tid = "%016x%016x" % (0xABC, i + 1)
        for fam, v in (("gen_ai_server_time_to_first_token_seconds", (i + 1) * 0.05),
                       ("llm_inter_token_latency_seconds", (i + 1) * 0.007),
                       ("llm_request_inter_token_latency_max_seconds", (i + 1) * 0.007)):
            got = found.get((fam, cls), [])
            if not any(t == tid and abs(x - v) < 1e-9 for x, t in got):
                fail("%s: %s{class=%s} lacks the slowest request's exemplar %s %s (has %s)"
                     % (where, fam, cls, tid, v, got))
    print("ok   %s: %d exemplars, the slowest of each class among them"
          % (where, sum(len(v) for v in found.values())))


EXEMPLAR_FAMILIES = {"gen_ai_server_time_to_first_token_seconds", "llm_inter_token_latency_seconds",
                     "llm_request_inter_token_latency_max_seconds"}


def check_hostile(work, fams_by_format):
    want = {}
    with open(os.path.join(work, "labels.expect")) as f:
        for line in f:
            k, hexv = line.split()
            raw = b"" if hexv.endswith("-") else bytes.fromhex(hexv)
            want[k] = raw.decode("utf-8", errors="replace")
    for ext, fams in fams_by_format.items():
        info = [s for f in fams for s in f.samples if s.name == "llm_measurement_info"]
        hist = [s for f in fams for s in f.samples
                if s.name == "llm_inter_token_latency_seconds_count"]
        if len(info) != 1 or not hist:
            fail("hostile.%s: info %d, itl series %d" % (ext, len(info), len(hist)))
            continue
        for k, v in want.items():
            got = info[0].labels.get(k)
            if got != v:
                fail("hostile.%s: info label %s = %r, expected %r" % (ext, k, got, v))
            if k in ("start_point", "token_point"):
                continue
            for s in hist:
                if s.labels.get(k) != v:
                    fail("hostile.%s: series label %s = %r, expected %r" % (ext, k, s.labels.get(k), v))
                    break
        classes = sorted(s.labels.get("class") for s in hist)
        if classes != sorted(["default", "chat", "batch", "tool.call:v2-x"]):
            fail("hostile.%s: classes %s" % (ext, classes))
    print("ok   hostile label values round-trip (%d labels)" % len(want))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    expose, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    subprocess.run([expose, work], check=True)
    results = {}
    for v in VARIANTS:
        results[v] = check_variant(work, v)
    check_hostile(work, results["hostile"])
    for v in VARIANTS:
        if "om" in results[v]:
            check_exemplars(v, results[v]["om"])
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("all variants parse and check out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
