#!/usr/bin/env bash
# musl (issue 33.4; docs/install.md, "musl (Alpine)"). Natively on this
# host: musl binaries run here (the loader is /lib/ld-musl-<arch>.so.1).
#  1. the library, the C tests, the tools and the examples built with
#     musl-gcc (cmake/toolchain-musl.cmake), warnings as errors; the ctest
#     suite run, shared and static: any failure, or fewer tests than the
#     floor, fails. Not registered under musl, each for its reason (the
#     configure log says it): C++ (no musl libstdc++), Python (the host's
#     CPython is glibc's and cannot load a musl libttft.so), the
#     Prometheus validators, docs samples (Python and C++), valgrind (no
#     malloc replacement in a static musl program), the install and
#     subproject checks (they compile with the host's glibc cc), ttft-top
#     (no musl ncurses).
#  2. the library alone without the kernel's headers (musl's only, as on
#     an Alpine without linux-headers): it must build with -Werror.
#  3. `make static-tools`: ttft-report and ttft-exporter fully static;
#     tests/tools/check_static.sh checks they are, and runs them.
# Each part is timed; the budget of the whole step is 8 minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
JOBS="${JOBS:-2}"
FLOOR="${TTFT_MUSL_FLOOR:-800}"
B="${BUILD_MUSL:-build-ci-musl}"
L="$B-logs" # (the build directories are ignored by git: /build*/)
mkdir -p "$L"
fail() { echo "musl: FAIL: $*"; exit 1; }
command -v musl-gcc >/dev/null || fail "musl-gcc is missing (.ci/packages.d/musl.txt)"
start=$(date +%s)

t0=$(date +%s)
cmake -S . -B "$B" -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-musl.cmake -DTTFT_WERROR=ON \
  -DTTFT_BUILD_BENCH=OFF >"$L/configure.log" 2>&1 || { cat "$L/configure.log"; fail "configure"; }
grep "musl:" "$L/configure.log" || true
cmake --build "$B" -j "$JOBS" >"$L/build.log" 2>&1 || { tail -40 "$L/build.log"; fail "build"; }
echo "   (musl build: $(( $(date +%s) - t0 ))s)"

t0=$(date +%s)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
ctest --test-dir "$B" -j "$JOBS" --output-on-failure --timeout 600 >"$log" 2>&1 || rc=$?
grep -E "tests passed|\*\*\*|Failed|Timeout" "$log" | tail -40 || true
summary=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$log" | tail -1 || true)
total=$(echo "$summary" | sed -E 's/.* out of ([0-9]+).*/\1/')
failed=$(echo "$summary" | sed -E 's/.*passed, ([0-9]+) tests failed.*/\1/')
[ -n "$total" ] || fail "ctest printed no summary (exit $rc)"
for kind in shared static; do
  n=$(ctest --test-dir "$B" -N -L "^${kind}$" | sed -n 's/^Total Tests: //p')
  echo "   musl $kind: $n tests"
done
echo "   (musl ctest: $(( $(date +%s) - t0 ))s)"
echo "== musl ctest: $((total - failed)) passed, $failed failed, $total run (floor $FLOOR)"
[ "$rc" = 0 ] && [ "$failed" = 0 ] || fail "$failed of $total tests failed"
[ "$total" -ge "$FLOOR" ] || fail "only $total tests ran (floor $FLOOR)"

t0=$(date +%s)
cmake -S . -B "$B-nokh" -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-musl.cmake -DTTFT_WERROR=ON \
  -DTTFT_MUSL_KERNEL_HEADERS=OFF -DTTFT_BUILD_TESTS=OFF -DTTFT_BUILD_BENCH=OFF \
  -DTTFT_BUILD_TOOLS=OFF -DTTFT_BUILD_EXAMPLES=OFF -DTTFT_INSTALL_PYTHON=OFF >"$L/nokh.log" 2>&1 ||
  { cat "$L/nokh.log"; fail "configure without kernel headers"; }
grep "linux/membarrier.h - not found" "$L/nokh.log" >/dev/null ||
  fail "the build without kernel headers found <linux/membarrier.h>"
cmake --build "$B-nokh" -j "$JOBS" --target ttft_static ttft_shared >>"$L/nokh.log" 2>&1 ||
  { tail -40 "$L/nokh.log"; fail "the library without kernel headers"; }
echo "   (musl library without kernel headers: $(( $(date +%s) - t0 ))s)"

t0=$(date +%s)
make static-tools BUILD="$B" JOBS="$JOBS" >"$L/static.log" 2>&1 || { tail -40 "$L/static.log"; fail "make static-tools"; }
sh tests/tools/check_static.sh "$B-static" "$B-static/examples/ttft-demo" || fail "static tools"
echo "   (static tools: $(( $(date +%s) - t0 ))s)"
el=$(( $(date +%s) - start ))
echo "== musl: clean in ${el}s (budget 480s)"
[ "$el" -le 480 ] || echo "musl: WARNING: over the 8-minute budget (a shared or slow machine?)"
