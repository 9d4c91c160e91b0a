#!/usr/bin/env bash
# aarch64 (issue 33.1, 33.5): the whole tree cross-built for aarch64 Linux
# (glibc) with Debian's cross toolchain and warnings as errors, its test
# suite run under qemu-user, then `make deb ARCH=arm64` checked.
#  1. cmake/toolchain-aarch64-linux-gnu.cmake: library, tests, tools,
#     examples and benchmarks (built, not run: figures under an emulator
#     mean nothing). ttft-top is not built: there is no arm64 ncurses
#     without adding the arm64 architecture to this machine's dpkg.
#  2. ctest under the emulator: every test that runs a program runs it
#     through qemu-aarch64 (add_test(COMMAND <target>) by CMake, the
#     scripts through the wrappers of cmake/TtftRunner.cmake, the C++
#     tests through TTFT_EMULATOR), at the sizes `make test` uses, with
#     the tests' timeouts x4 (TTFT_TEST_TIMEOUT_SCALE, cmake/TtftRunner.cmake).
#     The unit tests in their .static variant only: both variants are the
#     same test code over the same library sources, and both under qemu do
#     not fit CI's time (see docs/install.md); .static has the white-box
#     checks. The shared library's own aarch64 code (PIC, TLS descriptors,
#     the PLT) still runs under the emulator through the tests that link
#     it: the C++ tests, example_hello, the ttft-demo tests. The .shared
#     unit tests run natively (`make test`). Not run here either, and why:
#       python    the host's CPython cannot dlopen an aarch64 libttft.so, and
#                 no aarch64 CPython can be installed beside it (Debian's
#                 python3 is not co-installable across architectures): the
#                 Python suite, docs_samples, the SSE example, prom_multiproc
#                 (Python workers). The ctypes layer's struct layouts are
#                 those abi_layout prints, and it runs here.
#       valgrind  valgrind cannot run an aarch64 program on this host
#                 (test_http_valgrind; 40-soak-valgrind.sh runs it natively)
#       install   install_and_consume and subproject_build build consumers
#                 with the host's cc, pkg-config and python3: host checks,
#                 run natively by `make test`
#       tools_top, tools_top_dir  ttft-top is not built (no arm64 ncurses)
#       the tests that make membarrier fail with a seccomp filter
#                 (tests/deny_membarrier.h: test_barrier_fallback.
#                 membarrier_fails_mid_run, test_refusals.cycle_*_membarrier_fails,
#                 test_no_eintr.parked_threads_never_see_eintr): qemu-user
#                 does not emulate seccomp (prctl(PR_SET_SECCOMP) returns
#                 ENOSYS), so the failure cannot be injected; they run
#                 natively (`make test`, TSan in 20-sanitizers.sh)
#       prom_fleet  three replicas and two Prometheus servers within a
#                 140 s budget of its own (fleet_test.py), which the
#                 replicas under the emulator do not meet; the other real-
#                 Prometheus tests (prom_scrape, prom_exemplars) scrape
#                 aarch64 workloads here, and prom_fleet runs natively
#       test_soak.long_run  it bounds the process's RSS growth, and under
#                 qemu-user the RSS is the emulator's: its translation cache
#                 grows as code runs for the first time (+3.8 MiB, where
#                 the native run grows +0.7 MiB and the registry's own bytes,
#                 which the test prints, stay constant in both); the soak
#                 runs natively at 10^8 events (40-soak-valgrind.sh)
#     The step fails if any test fails, if any does not run (a skip), or
#     if fewer than FLOOR tests ran.
#  3. `make deb ARCH=arm64`: the four packages, Architecture arm64, the
#     library and the tools ELF aarch64 (file(1)), lintian clean (the
#     warnings docs/install.md explains, as in 55-first-contact.sh).
# Real time on the 2-core CI machine: docs/install.md ("aarch64").
set -euo pipefail
cd "$(dirname "$0")/../.."
JOBS="${JOBS:-2}"
B="${BUILD_AARCH64:-build-aarch64}"
FLOOR="${TTFT_AARCH64_FLOOR:-430}"
EXCLUDE_LABELS='python|valgrind|install'
EXCLUDE_TESTS='\.shared$|^test_[a-z_]*_shared$|^tools_top(_dir)?$|^test_barrier_fallback\.membarrier_fails_mid_run\.|^test_refusals\.cycle_[a-z]*_membarrier_fails\.|^test_no_eintr\.parked_threads_never_see_eintr\.|^test_soak\.long_run\.|^prom_fleet$'
fail() { echo "aarch64: FAIL: $*"; exit 1; }
for t in aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ qemu-aarch64 file lintian dpkg-deb; do
  command -v "$t" >/dev/null || fail "$t is missing (.ci/packages.d/aarch64.txt)"
done
[ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ] || fail "no aarch64 libc (libc6-dev-arm64-cross)"
step0=$(date +%s)
mkdir -p "$B" # its logs: step-*.log

echo "== aarch64: cross build ($B, $(aarch64-linux-gnu-gcc -dumpversion), $(qemu-aarch64 --version | head -n1))"
t0=$(date +%s)
cmake -S . -B "$B" -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTTFT_WERROR=ON >"$B/step-configure.log" 2>&1 ||
  { cat "$B/step-configure.log"; fail "configure"; }
cmake --build "$B" -j "$JOBS" >"$B/step-build.log" 2>&1 || { tail -60 "$B/step-build.log"; fail "build"; }
file -b "$B"/libttft.so.1.* | grep -q 'ARM aarch64' || fail "libttft.so is not aarch64: $(file -b "$B"/libttft.so.1.*)"
t1=$(date +%s)
echo "   built in $((t1 - t0)) s (load $(cut -d' ' -f1-3 /proc/loadavg)); libttft.so: $(file -b "$B"/libttft.so.1.* | cut -d, -f1-2)"

echo "== aarch64: ctest under qemu-aarch64 (excluded: labels $EXCLUDE_LABELS; tests $EXCLUDE_TESTS)"
count() { ctest --test-dir "$B" -N "$@" | sed -n 's/^Total Tests: //p'; }
all=$(count)
planned=$(count -LE "$EXCLUDE_LABELS" -E "$EXCLUDE_TESTS")
for l in python valgrind install; do
  echo "   excluded, label $l: $(count -L "^$l\$")"
done
echo "   excluded by name: $(count -LE "$EXCLUDE_LABELS" -R "$EXCLUDE_TESTS") ($(count -LE "$EXCLUDE_LABELS" -R '\.shared$|^test_[a-z_]*_shared$') of them .shared unit tests)"
echo "   registered $all, to run $planned (floor $FLOOR)"
log="$B/step-ctest.log"
set +e
CI=true ctest --test-dir "$B" --output-on-failure -j "$JOBS" -LE "$EXCLUDE_LABELS" -E "$EXCLUDE_TESTS" >"$log" 2>&1
rc=$?
set -e
t2=$(date +%s)
summary=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n1 || true)
total=$(echo "$summary" | sed -nE 's/.* out of ([0-9]+).*/\1/p')
failed=$(echo "$summary" | sed -nE 's/.*passed, ([0-9]+) tests? failed.*/\1/p')
notrun=$(sed -n '/The following tests did not run:/,/^$/p' "$log" | grep -cE '^\s+[0-9]+ - ' || true)
grep -E '^\s+[0-9]+ - .*\((Failed|Timeout|Not Run|Skipped|Exception|SEGFAULT|Child aborted)\)' "$log" || true
echo "   ctest: ${summary:-no summary} in $((t2 - t1)) s; not run: $notrun"
[ -n "$total" ] || { tail -40 "$log"; fail "ctest printed no summary"; }
[ "$rc" -eq 0 ] && [ "$failed" -eq 0 ] || { grep -A40 -E '\*\*\*Failed|\*\*\*Timeout|Exception' "$log" | head -200; fail "$failed of $total tests failed under the emulator"; }
[ "$notrun" -eq 0 ] || fail "$notrun test(s) did not run (skipped): a skip is a failure here"
[ "$total" -ge "$FLOOR" ] || fail "only $total tests ran, the floor is $FLOOR (tests dropped from the aarch64 run?)"
echo "   aarch64: $((total - failed)) passed, $failed failed, $((all - planned)) excluded (of $all registered)"

echo "== aarch64: make deb ARCH=arm64"
t3=$(date +%s)
debdir="$B-deb"
make deb ARCH=arm64 DEB_BUILD="$debdir" JOBS="$JOBS" >"$B/step-deb.log" 2>&1 || { tail -40 "$B/step-deb.log"; fail "make deb ARCH=arm64"; }
for p in libttft1 libttft-dev ttft-tools python3-ttft; do
  f=$(ls "$debdir/${p}_"*_arm64.deb 2>/dev/null | head -n1)
  [ -n "$f" ] || fail "make deb ARCH=arm64 wrote no ${p}_*_arm64.deb"
  arch=$(dpkg-deb -f "$f" Architecture)
  [ "$arch" = arm64 ] || fail "$f: Architecture $arch"
  echo "   $(basename "$f"): Architecture $arch; Depends: $(dpkg-deb -f "$f" Depends)"
done
[ "$(ls "$debdir"/*.deb | wc -l)" -eq 4 ] || fail "make deb ARCH=arm64 wrote $(ls "$debdir"/*.deb | wc -l) packages, expected 4"
x="$debdir/extracted"
rm -rf "$x"
for f in "$debdir"/*.deb; do dpkg-deb -x "$f" "$x"; done
so=$(find "$x/usr/lib/aarch64-linux-gnu" -name 'libttft.so.1.*' | head -n1)
[ -n "$so" ] || fail "no /usr/lib/aarch64-linux-gnu/libttft.so.1.* in libttft1"
for f in "$so" "$x/usr/bin/ttft-report" "$x/usr/bin/ttft-exporter"; do
  d=$(file -b "$f")
  case "$d" in *"ARM aarch64"*) echo "   $(basename "$f"): $(echo "$d" | cut -d, -f1-2)" ;;
    *) fail "$f is not an aarch64 ELF: $d" ;; esac
done
grep -q 'LIBRARY = "/usr/lib/aarch64-linux-gnu/libttft.so.1"' "$x"/usr/lib/python3/dist-packages/ttft/_install_paths.py ||
  fail "python3-ttft does not record /usr/lib/aarch64-linux-gnu/libttft.so.1"
# the packaged programs run (under the emulator, with the packaged library)
qemu-aarch64 -L /usr/aarch64-linux-gnu "$x/usr/bin/ttft-report" --help >/dev/null 2>&1 ||
  fail "the packaged ttft-report does not run under qemu-aarch64"
set +e
lintian --fail-on error --pedantic --info "$debdir"/*.deb >"$B/step-lintian.log" 2>&1
rc_lintian=$?
set -e
grep -E '^[EWIPX]: ' "$B/step-lintian.log" | sort | uniq -c | sed 's/^/   /' || true
echo "   lintian: exit $rc_lintian, $(grep -c '^E: ' "$B/step-lintian.log" || true) errors, $(grep -c '^W: ' "$B/step-lintian.log" || true) warnings"
[ "$rc_lintian" -eq 0 ] && ! grep '^E: ' "$B/step-lintian.log" >/dev/null || { cat "$B/step-lintian.log"; fail "lintian found errors"; }
other=$(grep -E '^W: ' "$B/step-lintian.log" | grep -vE ': (initial-upload-closes-no-bugs|maintscript-calls-ldconfig) ' || true)
[ -z "$other" ] || fail "lintian warnings docs/install.md does not explain: $other"
t4=$(date +%s)
echo "   make deb ARCH=arm64 + checks: $((t4 - t3)) s"
echo "== aarch64: ok in $((t4 - step0)) s (build $((t1 - t0)) s, ctest $((t2 - t1)) s, deb $((t4 - t3)) s)"
