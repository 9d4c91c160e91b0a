#!/usr/bin/env bash
# Smoke test of the benchmark: ttft-bench --quick runs, exits 0 and writes
# valid JSON with every row group. Timings are never asserted here
# (docs/performance.md has the real numbers; `make bench` measures them).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BUILD:-build-ci}"
bin="$BUILD/bench/ttft-bench"
if [ ! -x "$bin" ]; then
  cmake --build "$BUILD" -j 2 --target ttft-bench
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$bin" --quick --json "$out/results.json" > "$out/stdout.txt" || {
  cat "$out/stdout.txt"; echo "ttft-bench --quick failed" >&2; exit 1; }
python3 - "$out/results.json" <<'PY'
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "ttft-bench/1", d.get("schema")
rows = {r["key"]: r for r in d["rows"]}
need = ["clock_mono", "floor", "tok_1t", "tok_2t", "tok_s4", "tok_pingpong_k64",
        "tok_now_mono", "tok_now_tsc", "life_1t", "life_2t", "snapshot", "quantile",
        "mem_default", "mem_slot", "rss_growth", "heap_growth"]
if d["peer"] is not None:
    need += ["peer_1t", "peer_2t"]
elif __import__("os").environ.get("CI"):
    sys.exit("prometheus-cpp (the peer) was not found at build time; CI installs it")
missing = [k for k in need if k not in rows]
assert not missing, "rows missing: %s" % missing
for r in d["rows"]:
    assert r["reps"] >= 1 and len(r["samples"]) == r["reps"], r["key"]
    assert r["median"] is not None and math.isfinite(r["median"]), r["key"]
    assert r["median"] >= 0 or r["key"] in ("rss_growth", "heap_growth"), r["key"]
# the comparison with the 1.1 baseline (SPEC section 9): both binaries ran,
# at a tiny size; a missing baseline (no git history) is a failure in CI
cmp = d["compare"]
assert cmp is not None and cmp["rounds"] >= 1, cmp
cases = ["tok_ts", "tok_now", "step_1", "step_64", "step_256", "tok_2t", "tok_slo", "step_64_slo"]
need_cmp = ["cur_" + k for k in cases]
if cmp["baseline_binary"]:
    assert cmp["skipped"] is None and cmp["baseline_version"], cmp
    need_cmp += ["base_" + k for k in cases]
elif __import__("os").environ.get("CI"):
    sys.exit("ttft-bench ran without its 1.1 baseline: %s" % cmp["skipped"])
missing = [k for k in need_cmp if k not in rows]
assert not missing, "compare rows missing: %s" % missing
for k in need_cmp:
    assert rows[k]["reps"] == cmp["rounds"] and rows[k]["median"] > 0, rows[k]
names = [t["name"] for t in d["targets"]]
assert sum("current / " in n for n in names) == (7 if cmp["baseline_binary"] else 0), names
assert sum(n.startswith("fluidity: ") for n in names) == 2, names
assert len(d["targets"]) >= 14, len(d["targets"])
for t in d["targets"]:
    assert isinstance(t["met"], bool), t
print("ttft-bench --quick: %d rows, %d targets, baseline %s, valid JSON"
      % (len(d["rows"]), len(d["targets"]), cmp["baseline_version"] or "SKIPPED"))
PY

# fence mode (membarrier denied by a seccomp filter before any registry):
# the hot and lifecycle rows run and the JSON says which mode it measured
"$bin" --quick --no-membarrier --only baseline,hot,lifecycle --json "$out/fence.json" \
  > "$out/fence.txt" || { cat "$out/fence.txt"; echo "ttft-bench --no-membarrier failed" >&2; exit 1; }
python3 - "$out/fence.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["no_membarrier"] is True, d.get("no_membarrier")
keys = {r["key"] for r in d["rows"]}
assert {"floor", "tok_1t", "life_1t"} <= keys, keys
print("ttft-bench --quick --no-membarrier: %d rows, valid JSON" % len(d["rows"]))
PY

# many processes (docs/multiprocess.md): ttft-gather-bench --quick forks
# 1, 8 and 64 publishing processes, checks every gathered view exact
# (exit 1 otherwise) and writes its JSON; the peer script runs once
# (Debian's python3-prometheus-client, .ci/packages.d/prometheus.txt)
gbin="$BUILD/bench/ttft-gather-bench"
if [ ! -x "$gbin" ]; then
  cmake --build "$BUILD" -j 2 --target ttft-gather-bench
fi
"$gbin" --quick --json "$out/gather.json" > "$out/gather.txt" || {
  cat "$out/gather.txt"; echo "ttft-gather-bench --quick failed" >&2; exit 1; }
python3 - "$out/gather.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "ttft-gather-bench/1", d.get("schema")
assert [r["processes"] for r in d["rows"]] == [1, 8, 64], d["rows"]
for r in d["rows"]:
    assert r["take_protobuf_ms"] > 0 and r["protobuf_bytes"] > 0 and r["exemplars"] > 0, r
c = d["churn"]
# bounded: two files per live process plus the archive and the fold lock
assert c["files_after_restarts"] == 2 * c["processes"] + 2, c
assert c["files_after_all_exit"] == 2, c
print("ttft-gather-bench --quick: 3 sizes, churn %d restarts, files %d -> %d, valid JSON"
      % (c["restarts"], c["files_after_restarts"], c["files_after_all_exit"]))
PY
/usr/bin/python3 bench/multiproc_peer.py --quick --metrics minimal > "$out/peer.txt" || {
  rc=$?; cat "$out/peer.txt"
  if [ "$rc" = 77 ] && [ -z "${CI:-}" ]; then echo "multiproc_peer.py: skipped (no prometheus_client)"
  else echo "bench/multiproc_peer.py --quick failed" >&2; exit 1; fi; }
grep -q "^| 8 | 100 |" "$out/peer.txt" || { cat "$out/peer.txt"; echo "multiproc_peer.py: no table" >&2; exit 1; }
echo "bench/multiproc_peer.py --quick: ran"
