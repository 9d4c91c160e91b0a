#!/usr/bin/env bash
# The cost per token recorded from each language, same run, one table:
# C (ttft_token_emitted), Python (Stream.token), Rust (Stream::token_at)
# and Go (Stream.TokenAt) run the same loop — 64 streams round-robin, one
# call per token with an explicit, increasing timestamp — and then one
# step call per decode step of the 64 streams (ttft_step_emitted,
# Registry.step_emitted / step_emitted_at / StepEmittedAt), per token; then
# one engine_step per decode step with both timestamps (ttft_engine_step,
# Registry.engine_step / engine_step_at / EngineStepAt, 1.2), per call.
# Each program reports the median of its runs; the languages take turns
# for ROUNDS rounds and the table shows the median round, with the ratio
# to C of the same run. docs/ffi.md quotes it.
#
#   bench/bindings.sh [BUILD_DIR]     (default build; needs libttft.so there)
#   ROUNDS=3 N=2000000 NPY=200000 RUNS=5 bench/bindings.sh build
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"
BUILD="$(cd "${1:-build}" && pwd)"
[ -f "$BUILD/libttft.so" ] || { echo "no $BUILD/libttft.so: build the library first (make)" >&2; exit 1; }
ROUNDS="${ROUNDS:-3}" N="${N:-2000000}" NPY="${NPY:-200000}" RUNS="${RUNS:-5}"
export PATH="$PATH:${CARGO_HOME:-$HOME/.cargo}/bin"
for tool in cc python3 cargo go; do
  command -v "$tool" >/dev/null || { echo "bench/bindings.sh needs $tool" >&2; exit 1; }
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

cc -std=c11 -O2 -I include bench/bindings_cost.c -L "$BUILD" -Wl,-rpath,"$BUILD" -lttft -o "$tmp/c"
# TTFT_STATIC=0: the shared library, as C, Go and Python call it here
(cd bindings/rust && CARGO_TARGET_DIR="$BUILD/cargo-target" TTFT_LIB_DIR="$BUILD" TTFT_STATIC=0 \
   cargo build --offline --release --quiet --example token_cost)
rust="$BUILD/cargo-target/release/examples/token_cost"
(cd bindings/go && CGO_CFLAGS="-I$REPO/include" CGO_LDFLAGS="-L$BUILD -Wl,-rpath,$BUILD" \
   GOFLAGS=-mod=mod GOPROXY=off go build -tags ttft_nopkgconfig -o "$tmp/go" ./examples/tokencost)
cat > "$tmp/py.py" <<'PY'
import statistics, sys, time
import ttft
n, runs = int(sys.argv[1]), int(sys.argv[2])
reg = ttft.Registry(max_inflight=128)
t0 = time.monotonic_ns()
tok, step, eng = [], [], []
for _ in range(runs):
    streams = [reg.begin(t_ns=t0) for _ in range(64)]
    t = t0
    a = time.perf_counter_ns()
    for i in range(n):
        if i % 64 == 0:
            t += 1000
        streams[i % 64].token(t_ns=t)
    tok.append((time.perf_counter_ns() - a) / n)
    a = time.perf_counter_ns()
    for _ in range(n // 64):
        t += 1000
        reg.step_emitted(streams, t_ns=t)
    step.append((time.perf_counter_ns() - a) / (n // 64 * 64))
    a = time.perf_counter_ns()
    for _ in range(n // 64):
        t += 1000
        reg.engine_step(decode_seqs=64, t_start_ns=t, t_end_ns=t + 500)
    eng.append((time.perf_counter_ns() - a) / (n // 64))
    for s in streams:
        s.end(t_ns=t + 1000)
print("token %.2f\nstep64 %.2f\nengine %.2f" % (statistics.median(tok), statistics.median(step), statistics.median(eng)))
PY

declare -A results
for round in $(seq "$ROUNDS"); do
  "$tmp/c" "$N" "$RUNS" > "$tmp/out.C"
  PYTHONPATH="$REPO/python" TTFT_LIBRARY="$BUILD/libttft.so.1" python3 "$tmp/py.py" "$NPY" "$RUNS" > "$tmp/out.Python"
  "$rust" "$N" "$RUNS" > "$tmp/out.Rust"
  "$tmp/go" "$N" "$RUNS" > "$tmp/out.Go"
  for lang in C Python Rust Go; do
    results[$lang]+="$(awk '$1=="token"{t=$2} $1=="step64"{s=$2} $1=="engine"{e=$2} END{print t","s","e}' "$tmp/out.$lang") "
  done
done
python3 - "$ROUNDS" "${results[C]}" "${results[Python]}" "${results[Rust]}" "${results[Go]}" <<'PY'
import statistics, sys
rounds = int(sys.argv[1])
names = ["C ttft_token_emitted", "Python Stream.token", "Rust Stream::token_at", "Go Stream.TokenAt"]
rows = []
for name, cell in zip(names, sys.argv[2:]):
    pairs = [tuple(map(float, p.split(","))) for p in cell.split()]
    rows.append((name, statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs),
                 statistics.median(p[2] for p in pairs)))
c_tok, c_step, c_eng = rows[0][1], rows[0][2], rows[0][3]
print("cost per token, ns (median of %d rounds; each round the median of its runs)" % rounds)
print("%-24s %12s %8s %18s %8s %12s %8s" % ("language", "token call", "x C", "step of 64 /token", "x C",
                                            "engine_step", "x C"))
for name, tok, step, eng in rows:
    print("%-24s %12.1f %8.1f %18.1f %8.1f %12.1f %8.1f" % (name, tok, tok / c_tok, step, step / c_step,
                                                         eng, eng / c_eng))
PY
