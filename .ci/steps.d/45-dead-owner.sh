#!/usr/bin/env bash
# Issue 18.1 at full size: a thread that dies inside a hook (pthread_exit
# in a signal handler, asynchronous cancel, siglongjmp) on private shards
# with membarrier, in fence mode and on the shared shard, 500 rounds each
# (ctest runs 50): 0 corrupted, 0 dropped, every begin for a frozen next
# owner refused. The static build (white-box). Uses the build `make test`
# made (build-ci under .ci/run, else build).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BUILD:-build-ci}"
[ -d "$BUILD/tests" ] || BUILD=build
[ -d "$BUILD/tests" ] || { echo "dead-owner: no build directory (run make test first)"; exit 1; }
cmake --build "$BUILD" -j "${JOBS:-2}" --target test_dead_owner_static >/dev/null
bin="$BUILD/tests/test_dead_owner_static"
ROUNDS="${TTFT_DEAD_ROUNDS_CI:-500}"
start=$(date +%s)
for t in $(sed -n 's/^TEST(\(dead_owner_[a-z_]*\)).*/\1/p' tests/test_dead_owner.c); do
  t0=$(date +%s)
  TTFT_DEAD_ROUNDS="$ROUNDS" "$bin" "$t" 2>&1 | grep -E 'rounds|FAIL|passed' || { echo "dead-owner: $t failed"; exit 1; }
  echo "   ($t: $(( $(date +%s) - t0 ))s)"
done
echo "== dead owner ($ROUNDS rounds x 9): clean in $(( $(date +%s) - start ))s"
