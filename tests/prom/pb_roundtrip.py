#!/usr/bin/env python3
"""pb_roundtrip.py EXPOSE_PB_BIN WORKDIR

Round trip of the protobuf exposition through an independent decoder
(pbdecode.py, standard library only). EXPOSE_PB_BIN (tests/prom/expose_pb.c)
writes each variant as .pb (protobuf), .prom (text 0.0.4, the reference),
.json (the library's own numbers) and .meta (native flag, schema). Then for
every variant:

  1. the .pb stream decodes strictly (minimal varints, known fields with the
     right wire types, no repeated singular field, exact lengths, UTF-8);
  2. family by family, in order, it equals the text exposition: names,
     types, help texts, and every sample — counters, gauges, the info
     metric, summary quantiles, classic buckets (le, cumulative count, the
     implied +Inf = count), _sum and _count — with the same label sets.
     Nothing is listed here: whatever families format_prom.c writes, the
     protobuf must have the same;
  3. every histogram: native buckets iff the variant has them, with the
     variant's schema, zero threshold 2^-128, zero_count + buckets = count,
     ascending spans whose lengths match the deltas, no negative count;
     an empty one carries the no-op span;
  4. native vs classic buckets of the same series (both derived from one
     internal histogram whose buckets are at most 1/128 wide):
        N_le(b / (1 + 1/128)) <= C(b) <= N_lt(b)
     for every classic bound b, where N_le(x) counts native buckets whose
     upper bound is <= x and N_lt(x) those whose lower bound is < x (the
     zero bucket included in both), C(b) the classic cumulative count;
  5. against the JSON document (the library's own quantiles, min, max and
     counts): every class's and split's p50 .. p99.9 lies in the native
     bucket that holds its nearest rank ceil(q*count) (the bucket PromQL's
     histogram_quantile interpolates in),
     min lies in the first populated bucket and max in the last (widened by
     the internal bucket, 1/128), and the native count equals JSON's count.
     Values above 2^44 ns (4.9 h) share the internal histogram's last bucket
     and are not bounded (docs/prometheus.md): those are not checked.
Prints a line per variant; exit 1 on any failure.
"""
import bisect
import json
import math
from fractions import Fraction
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pbdecode  # noqa: E402

ZERO_THRESHOLD = 2.0 ** -128
HIST_MAX = 2 ** 44 - 1  # largest value the internal histogram resolves (ns or tokens)
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def same_value(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if a == b:
        return True
    # sums of more than 2^53 ns round once more on one side than the other
    return abs(a - b) <= 4e-16 * max(abs(a), abs(b))


def compare_families(variant, pbf, txf):
    n = 0
    if [f.name for f in pbf] != [f.name for f in txf]:
        fail("%s: families differ: protobuf only %s, text only %s" % (
            variant, sorted({f.name for f in pbf} - {f.name for f in txf}),
            sorted({f.name for f in txf} - {f.name for f in pbf})))
        return 0
    for a, b in zip(pbf, txf):
        if a.type != b.type or a.help != b.help:
            fail("%s: %s: type/help %r/%r vs text %r/%r" % (variant, a.name, a.type, a.help,
                                                            b.type, b.help))
        sa = {(name, labels): v for name, labels, v in a.samples}
        sb = {(name, labels): v for name, labels, v in b.samples}
        if len(sa) != len(a.samples) or len(sb) != len(b.samples):
            fail("%s: %s: a sample appears twice" % (variant, a.name))
        if sa.keys() != sb.keys():
            only_pb = sorted(sa.keys() - sb.keys(), key=repr)[:3]
            only_tx = sorted(sb.keys() - sa.keys(), key=repr)[:3]
            fail("%s: %s: sample sets differ; protobuf only %s; text only %s"
                 % (variant, a.name, only_pb, only_tx))
            continue
        for k, v in sa.items():
            if not same_value(v, sb[k]):
                fail("%s: %s %s: protobuf %r, text %r" % (variant, k[0], dict(k[1]), v, sb[k]))
            n += 1
    return n


def check_native(variant, fam, labels, h, native, schema):
    where = "%s: %s %s" % (variant, fam, labels)
    has = any(k in h for k in ("schema", "zero_threshold", "positive_span", "positive_delta"))
    if not native:
        if has:
            fail(where + ": native fields in a classic-only exposition")
        return None
    if h.get("schema", 0) != schema or "schema" not in h:
        fail(where + ": schema %r, want %d" % (h.get("schema"), schema))
        return None
    if h.get("zero_threshold") != ZERO_THRESHOLD:
        fail(where + ": zero threshold %r" % h.get("zero_threshold"))
    if "negative_span" in h or "negative_delta" in h:
        fail(where + ": negative buckets")
    try:
        nb = pbdecode.native_buckets(h)
    except pbdecode.DecodeError as e:
        fail(where + ": " + str(e))
        return None
    total = h.get("zero_count", 0) + sum(c for _, c in nb)
    if total != h.get("sample_count", 0):
        fail(where + ": zero_count + buckets = %d, sample_count %d" % (total, h.get("sample_count", 0)))
    if not h.get("positive_span"):
        fail(where + ": no span (an empty histogram needs the no-op span)")
    elif not nb and h["positive_span"] != [{"offset": 0, "length": 0}] and \
            h["positive_span"] != [{"length": 0}] and h["positive_span"] != [{}]:
        fail(where + ": empty histogram without the no-op span: %r" % h["positive_span"])
    if nb and (nb[0][1] == 0 or nb[-1][1] == 0):
        fail(where + ": spans start or end on an empty bucket")
    # classic vs native consistency (indices ascend, so do the bounds)
    zc = h.get("zero_count", 0)
    lowers = [pbdecode.native_bounds(schema, i)[0] for i, _ in nb]
    uppers = [pbdecode.native_bounds(schema, i)[1] for i, _ in nb]
    cum = [zc]
    for _, cnt in nb:
        cum.append(cum[-1] + cnt)
    for b in h.get("bucket", []):
        le, c = b.get("upper_bound", 0.0), b.get("cumulative_count", 0)
        n_le = cum[bisect.bisect_right(uppers, le / (1 + 1 / 128.0))]
        n_lt = cum[bisect.bisect_left(lowers, le)]
        if not n_le <= c <= n_lt:
            fail(where + ": classic le=%g count %d outside native [%d, %d]" % (le, c, n_le, n_lt))
    return nb


def json_metric(doc, cls, metric):
    for c in doc["classes"]:
        if c["name"] == cls:
            return c["metrics"].get(metric)
    return None


FAMILY_METRIC = {  # protobuf family (without namespace) -> JSON metric key
    "gen_ai_server_time_to_first_token_seconds": "ttft",
    "gen_ai_server_time_per_output_token_seconds": "tpot",
    "gen_ai_server_request_duration_seconds": "e2e",
    "inter_token_latency_seconds": "itl",
    "inter_token_latency_per_token_seconds": "itl_per_token",
    "request_queue_time_seconds": "queue",
    "request_prefill_time_seconds": "prefill",
    "request_decode_time_seconds": "decode",
    "request_output_tokens": "output_tokens",
    "request_inter_token_latency_p95_seconds": "seq_itl_p95",
    "request_inter_token_latency_max_seconds": "seq_itl_max",
    "abandoned_wait_seconds": "abandoned_wait",
}
VIEW_METRIC = {  # per-status view families -> JSON classes[].by_status[status][key]
    "time_to_first_token_by_status_seconds": "ttft",
    "time_per_output_token_by_status_seconds": "tpot",
    "request_duration_by_status_seconds": "e2e",
    "request_output_tokens_by_status": "output_tokens",
}
QKEYS = [("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999)]
SKIP = object()  # no JSON counterpart known: the samples are still compared


def json_for(doc, fam_name, labels, ns):
    """(JSON metric object, scale) of a histogram series; (SKIP, _) when the
    family has no known JSON counterpart, (None, _) when it should have one
    and the document lacks it."""
    stem = fam_name[len(ns):] if fam_name.startswith(ns) and not fam_name.startswith("gen_ai_") \
        else fam_name
    if stem.startswith("time_to_first_token_by_prefix_cache") or \
            stem.startswith("time_to_first_token_by_prompt_length"):
        sp = doc.get("splits", {})
        if "prefix_cache" in labels:
            return sp.get("prefix_cache", {}).get(labels["prefix_cache"]), 1e9
        if "prompt_tokens" in labels:
            lo = int(labels["prompt_tokens"].split("-")[0].rstrip("+"))
            for band in sp.get("prompt_bands", []):
                if band["lo"] == lo:
                    return band["ttft"], 1e9
        return None, 1e9
    if stem in VIEW_METRIC:
        key = VIEW_METRIC[stem]
        scale = 1.0 if key == "output_tokens" else 1e9
        for c in doc["classes"]:
            if c["name"] == labels.get("class"):
                if "by_status" not in c:
                    return SKIP, scale  # a JSON document without the views
                return c["by_status"].get(labels.get("status"), {}).get(key), scale
        return None, scale
    key = FAMILY_METRIC.get(stem)
    if key is None:
        return SKIP, 1e9
    if "class" not in labels:
        return None, 1e9
    return json_metric(doc, labels["class"], key), (1.0 if key == "output_tokens" else 1e9)


def check_quantiles(where, nb, h, schema, jm, scale):
    count = h.get("sample_count", 0)
    if jm is None:
        fail(where + ": no JSON counterpart")
        return 0
    if jm["count"] != count:
        fail(where + ": count %d, JSON %d" % (count, jm["count"]))
        return 0
    if count == 0:
        return 0
    n = 0
    w = 1 + 1 / 128.0
    for key, q in QKEYS:
        lib = jm[key]
        if lib > HIST_MAX:  # beyond the internal histogram: not bounded (documented)
            continue
        want = math.ceil(Fraction(str(q)) * count)  # the library's exact nearest rank
        sel = pbdecode.native_bucket_of(schema, want, h)
        if sel is None:
            fail(where + ": no bucket reaches rank %d" % want)
            continue
        lo, hi, _ = sel
        v = lib / scale
        if want <= 1 or want >= count:  # the library answers min / max there
            ok = lo / w <= v <= hi * w
        else:
            ok = lo * (1 - 1e-12) <= v <= hi * (1 + 1e-12)
        if not ok:
            fail(where + ": library %s = %r outside PromQL's bucket (%r, %r]" % (key, v, lo, hi))
        n += 1
    populated = [(i, c) for i, c in nb if c]
    mn, mx = jm["min"] / scale, jm["max"] / scale
    if populated:
        lo0 = pbdecode.native_bounds(schema, populated[0][0])[0]
        hi1 = pbdecode.native_bounds(schema, populated[-1][0])[1]
        if h.get("zero_count", 0) == 0 and not lo0 / w <= mn:
            fail(where + ": min %r below the first bucket (%r, ...]" % (mn, lo0))
        if mx > 0 and jm["max"] <= HIST_MAX and not mx <= hi1 * w:
            fail(where + ": max %r above the last bucket (..., %r]" % (mx, hi1))
        if mx > 0 and not mx > pbdecode.native_bounds(schema, populated[-1][0])[0] / w:
            fail(where + ": max %r below the last bucket" % mx)
    elif mx != 0:
        fail(where + ": only the zero bucket, but max %r" % mx)
    return n


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    expose, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    for f in os.listdir(work):
        os.unlink(os.path.join(work, f))
    r = subprocess.run([expose, work])
    if r.returncode != 0:
        fail("%s %s exited with %d" % (expose, work, r.returncode))
        return 1
    variants = sorted(f[:-3] for f in os.listdir(work) if f.endswith(".pb"))
    if len(variants) < 20:
        fail("expected at least 20 variants, got %d" % len(variants))
    total_samples = total_native = total_q = 0
    for v in variants:
        base = os.path.join(work, v)
        meta = dict(line.split() for line in open(base + ".meta") if line.strip())
        native, schema = meta["native"] == "1", int(meta["schema"])
        try:
            fams = pbdecode.decode_stream(open(base + ".pb", "rb").read())
            pbf = pbdecode.pb_families(fams)
        except pbdecode.DecodeError as e:
            fail("%s: %s" % (v, e))
            continue
        with open(base + ".prom", encoding="utf-8") as f:
            txf = pbdecode.text_families(f.read())
        with open(base + ".json", encoding="utf-8") as f:
            doc = json.load(f)
        ns = doc["labels"]["namespace"]
        nsamples = compare_families(v, pbf, txf)
        nnative = nq = 0
        unmatched = set()
        for f in pbf:
            if f.type != "histogram":
                continue
            for labels, m in f.raw:
                h = m["histogram"]
                where = "%s: %s %s" % (v, f.name, labels)
                nb = check_native(v, f.name, labels, h, native, schema)
                if nb is None:
                    continue
                nnative += 1
                jm, scale = json_for(doc, f.name, labels, ns)
                if jm is SKIP:
                    unmatched.add(f.name)
                    continue
                nq += check_quantiles(where, nb, h, schema, jm, scale)
        if native and nnative == 0:
            fail("%s: no native histogram checked" % v)
        total_samples += nsamples
        total_native += nnative
        total_q += nq
        print("ok   %-12s %3d families, %5d samples equal to the text, %3d native histograms, "
              "%4d quantiles in PromQL's bucket" % (v, len(pbf), nsamples, nnative, nq))
        if unmatched:
            print("info %-12s no JSON counterpart known (quantiles not checked): %s"
                  % (v, ", ".join(sorted(unmatched))))
    if total_q < 1000 or total_native < 200:
        fail("too few checks: %d native histograms, %d quantiles" % (total_native, total_q))
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("protobuf round trip: %d variants, %d samples, %d native histograms, %d quantiles"
          % (len(variants), total_samples, total_native, total_q))
    return 0


if __name__ == "__main__":
    sys.exit(main())
