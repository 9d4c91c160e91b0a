#!/usr/bin/env bash
# Sanitizer builds (issue 6).
#  1. ASan + UBSan (clang): the whole ctest suite except what cannot run
#     inside a sanitized process or builds against the library with another
#     toolchain (see EXCLUDE_LABELS below). Any report fails the step:
#     halt_on_error, -fno-sanitize-recover=all (CMakeLists.txt).
#  2. TSan (clang): the concurrency tests (test_stress, and every test
#     labelled "concurrent" or named *thread*/*stress*), at a size that
#     fits the 2-core CI machine. A program written with tests/task.h is
#     one ctest test per TEST: <program>.<test>.<shared|static>.
set -euo pipefail
cd "$(dirname "$0")/../.."
JOBS="${JOBS:-2}"
CC_SAN="${CC_SAN:-clang}"
CXX_SAN="${CXX_SAN:-clang++}"
command -v "$CC_SAN" >/dev/null || { echo "sanitizers: $CC_SAN is missing (.ci/packages.d/reliability.txt)"; exit 1; }

# Not run under ASan, and why:
#   valgrind  valgrind cannot run ASan binaries (shadow memory); 40-soak-valgrind.sh runs them plain
#   python    CPython loading an ASan libttft.so needs the runtime preloaded; 60-python.sh covers it
#   cpp       compiles test programs with g++ / clang++ outside CMake's flags (mixing gcc's and
#             clang's sanitizer runtimes does not link); the C/C++ header checks are not about memory
#   install   installs and rebuilds a consumer project without the sanitizer flags
#   abi       compares the exported symbol list, which the sanitizer runtime changes
EXCLUDE_LABELS='valgrind|python|cpp|install|abi'

export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"

echo "== ASan+UBSan build (build-asan, $CC_SAN)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$CC_SAN" -DCMAKE_CXX_COMPILER="$CXX_SAN" \
  -DTTFT_SANITIZE=address,undefined -DTTFT_WERROR=ON -DTTFT_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j "$JOBS"
echo "== ctest under ASan+UBSan (excluding labels: $EXCLUDE_LABELS)"
TTFT_SOAK_EVENTS="${TTFT_SOAK_EVENTS_ASAN:-2000000}" \
  ctest --test-dir build-asan --output-on-failure -j "$JOBS" -LE "$EXCLUDE_LABELS"

echo "== TSan build (build-tsan, $CC_SAN)"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$CC_SAN" -DCMAKE_CXX_COMPILER="$CXX_SAN" \
  -DTTFT_SANITIZE=thread -DTTFT_WERROR=ON -DTTFT_BUILD_BENCH=OFF -DTTFT_BUILD_EXAMPLES=OFF \
  -DTTFT_BUILD_TOOLS=OFF >/dev/null
cmake --build build-tsan -j "$JOBS" --target test_stress_static test_stress_shared \
  test_reuse_static test_registry_static test_step_static test_memory_static test_slowest_static \
  test_dead_owner_static test_sums_static test_races_static test_refusals_static test_no_eintr_static test_startup_burst_static \
  test_gather_static test_publish_static
# plus whatever else is labelled concurrent or named after threads: build
# just their programs (<program>.<test>.<kind> is built by <program>_<kind>)
extra=$(ctest --test-dir build-tsan -N -L concurrent 2>/dev/null | sed -n 's/^ *Test *#[0-9]*: //p' || true)
if [ -n "$extra" ]; then
  targets=$(for t in $extra; do echo "${t%%.*}_${t##*.}"; done | sort -u)
  # shellcheck disable=SC2086
  cmake --build build-tsan -j "$JOBS" --target $targets
fi
# the slot-reuse tests (frozen emitter, shared-handle stress, fork) are the
# concurrency proofs of reclaim.c: all of them, at full size, under TSan
regex="^test_stress\\.|^test_[^.]*thread[^.]*(_|\\..*\\.)(shared|static)$|^test_reuse\\..*\\.static$|^test_registry\\..*\\.static$|^test_step\\..*\\.static$|^test_memory\\..*\\.static$|^test_slowest\\.concurrent_.*\\.static$"
# issue 18: threads dying inside hooks, nested hooks in signal handlers,
# the wide sums' concurrent reader (fewer rounds: TSan is ~10x slower)
regex="$regex|^test_dead_owner\\..*\\.static$|^test_sums\\..*\\.static$"
# the lock-free protocols under racing writers and a snapshot reader
# (exact values, reads never going back; ~1 s at this size)
regex="$regex|^test_races\\..*\\.static$"
# issue 27.3/27.4: no begin refused while a slot is free (loaded, with
# membarrier failing), parked owners never interrupted
regex="$regex|^test_refusals\\..*\\.static$|^test_no_eintr\\..*\\.static$"
# issue 27.1: a start-up burst (11 writers, 3 on the shared shard) under
# concurrent scrapes in every format; nothing falls, nothing coarse
regex="$regex|^test_startup_burst\\..*\\.static$"
# issue 28: publishers (thread, fork, SIGKILL mid-publish) and gatherers
# (parallel folds by threads and processes, one gather shared by threads)
regex="$regex|^test_gather\\..*\\.static$|^test_publish\\..*\\.static$"
for t in $extra; do regex="$regex|^${t//./\\.}\$"; done
echo "== ctest under TSan: $regex"
TTFT_STRESS_SEQS="${TTFT_STRESS_SEQS_TSAN:-1500}" TTFT_DEAD_ROUNDS="${TTFT_DEAD_ROUNDS_TSAN:-50}" \
  TTFT_NESTED_SIGNALS="${TTFT_NESTED_SIGNALS_TSAN:-1000}" TTFT_RACE_STREAMS="${TTFT_RACE_STREAMS_TSAN:-6000}" \
  TTFT_REFUSAL_CYCLES="${TTFT_REFUSAL_CYCLES_TSAN:-1000}" \
  TTFT_BURST_STREAMS="${TTFT_BURST_STREAMS_TSAN:-2000}" \
  ctest --test-dir build-tsan --output-on-failure -j 1 -R "$regex" -LE "python|valgrind"
echo "== sanitizers: clean"
