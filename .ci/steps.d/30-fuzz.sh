#!/usr/bin/env bash
# Fuzzing (issue 6): build the libFuzzer targets with clang
# (-fsanitize=fuzzer,address,undefined) and run each for a bounded time,
# starting from the committed seed corpus tests/fuzz/corpus/<target>/.
# New interesting inputs go to tests/fuzz/corpus-work/<target>/ (not
# committed). A crash, sanitizer report or invariant failure fails the step
# and its reproducer is written INTO the committed corpus directory, so that
# once committed it runs on every `make test` (tests fuzz_<target>_corpus).
#   FUZZ_SECONDS   per target (default 60)
set -euo pipefail
cd "$(dirname "$0")/../.."
JOBS="${JOBS:-2}"
SECS="${FUZZ_SECONDS:-60}"
command -v clang >/dev/null || { echo "fuzz: clang is missing (.ci/packages.d/reliability.txt)"; exit 1; }

cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DTTFT_FUZZ=ON -DTTFT_WERROR=ON \
  -DTTFT_BUILD_BENCH=OFF -DTTFT_BUILD_EXAMPLES=OFF -DTTFT_BUILD_TOOLS=OFF >/dev/null
targets=$(cd tests/fuzz && ls fuzz_*.c | sed 's/\.c$//')
built=""
for t in $targets; do
  # fuzz_http exists only when the HTTP endpoint is built
  if cmake --build build-fuzz -j "$JOBS" --target "$t" >/dev/null 2>build-fuzz/"$t".build.log; then
    built="$built $t"
  elif grep -q "No rule to make target\|unknown target" build-fuzz/"$t".build.log; then
    echo "== $t: not part of this configuration"
  else
    cat build-fuzz/"$t".build.log
    exit 1
  fi
done

export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:quarantine_size_mb=16"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
status=0
for t in $built; do
  seeds="tests/fuzz/corpus/$t"
  work="tests/fuzz/corpus-work/$t"
  mkdir -p "$work"
  echo "== $t: ${SECS}s from $(ls "$seeds" | wc -l) seed(s)"
  log="build-fuzz/$t.log"
  if ./build-fuzz/tests/"$t" -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=25 \
       -print_final_stats=1 -artifact_prefix="$seeds/" "$work" "$seeds" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    echo "   $t: $runs executions in ${SECS}s, $cov, corpus $(ls "$work" | wc -l) input(s): ok"
  else
    status=1
    tail -40 "$log"
    echo "   $t: FAILED; reproducer(s):"
    ls -1 "$seeds"/crash-* "$seeds"/leak-* "$seeds"/timeout-* "$seeds"/oom-* 2>/dev/null | sed "s/^/     /" || true
    echo "   replay: build/tests/${t}_replay <file>   (commit it: it becomes a regression test)"
  fi
done
exit $status
