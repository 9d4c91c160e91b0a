#!/usr/bin/env bash
# First contact (issue 13): what a new user does first, checked as they do it.
#  1. `make demo` in a fresh clone: builds only the demo and ttft-report
#     (no test, benchmark or C++ check is built) and runs; the time from
#     `make demo` to the demo's first line, and in all, is printed (a
#     figure, not an assertion: the machine is shared).
#  2. `make deb`: the package holds the library, headers, ttft.pc, the CMake
#     package, ttft-report and the Python package; extracted with
#     `dpkg-deb -x` into a scratch directory, a program is compiled against
#     the extracted headers and library (directly, with pkg-config and with
#     find_package) and run, the Python package is imported, ttft-report runs.
#  3. ttft-report --diff tells signal from noise: two runs of the demo with
#     one seed report no regression; a run slowed down 1.5x is flagged.
set -euo pipefail
# (pipelines end in `grep ... >/dev/null`, never `grep -q`: under pipefail an
# early-exiting grep -q can make the writer die of SIGPIPE and fail a match)
cd "$(dirname "$0")/../.."
src=$(pwd)
JOBS="${JOBS:-2}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "first contact: FAIL: $*"; exit 1; }
for t in git cmake cc dpkg-deb pkg-config python3; do
  command -v "$t" >/dev/null || fail "$t is missing (.ci/packages.d/first-contact.txt)"
done
expect="TTFT p50 = 42.000 ms, TPOT p50 = 20.000 ms, tokens = 10"

# ------------------------------------------------------------ 1. make demo
echo "== make demo in a fresh clone"
git clone -q "$src" "$tmp/clone"
t0=$(date +%s.%N)
first=""
(cd "$tmp/clone" && make demo DEMO_ARGS="--no-http --snapshot build/demo.ttfs" 2>&1) >"$tmp/demo.log" &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  if [ -z "$first" ] && grep -q '^simulating ' "$tmp/demo.log"; then first=$(date +%s.%N); fi
  sleep 0.2
done
wait "$pid" || { tail -40 "$tmp/demo.log"; fail "make demo failed"; }
t1=$(date +%s.%N)
[ -n "$first" ] || first=$t1
grep -q '^simulating ' "$tmp/demo.log" || fail "make demo: the demo printed nothing"
grep -q 'throughput (capacity view' "$tmp/demo.log" || fail "make demo: no report"
[ -s "$tmp/clone/build/demo.ttfs" ] || fail "make demo: no snapshot written"
# only what it runs: the demo, ttft-report and the library they link
built_tests=$(find "$tmp/clone/build/tests" -maxdepth 1 -type f -executable 2>/dev/null | wc -l)
[ "$built_tests" -eq 0 ] || fail "make demo built $built_tests test programs"
[ ! -e "$tmp/clone/build/bench/ttft-bench" ] || fail "make demo built the benchmarks"
[ ! -e "$tmp/clone/build/libttft.so" ] || fail "make demo built the shared library too"
printf '   make demo, fresh clone: %.1f s to the demo'"'"'s first line (configure + build), %.1f s in all; load %s\n' \
  "$(echo "$first - $t0" | bc)" "$(echo "$t1 - $t0" | bc)" "$(cut -d' ' -f1-3 /proc/loadavg)"

# ------------------------------------------------------------ 2. make deb
echo "== make deb"
(cd "$tmp/clone" && make deb JOBS="$JOBS" >"$tmp/deb.log" 2>&1) || { tail -40 "$tmp/deb.log"; fail "make deb failed"; }
deb=$(ls "$tmp"/clone/build-deb/libttft_*.deb 2>/dev/null | head -n1)
[ -n "$deb" ] || fail "make deb wrote no .deb"
echo "   $(basename "$deb"): $(stat -c %s "$deb") bytes"
dpkg-deb -c "$deb" | awk '{print "   " $1, $3, $6, $7, $8}' | sed 's/  *$//'
dpkg-deb -c "$deb" >"$tmp/contents.txt"
for want in '/usr/include/ttft\.h$' '/usr/include/ttft\.hpp$' '/libttft\.so\.1\.[0-9.]*$' '/libttft\.so\.1 -> ' \
            '/libttft\.a$' '/pkgconfig/ttft\.pc$' '/cmake/ttft/ttftConfig\.cmake$' '/cmake/ttft/ttftTargets\.cmake$' \
            '/usr/bin/ttft-report$' '/usr/lib/python3/dist-packages/ttft/__init__\.py$' \
            '/usr/lib/python3/dist-packages/ttft/_install_paths\.py$'; do
  grep -Eq -- "$want" "$tmp/contents.txt" || fail "the package lacks $want"
done
dpkg-deb -f "$deb" Package Version Depends | sed 's/^/   /'
x="$tmp/x"
dpkg-deb -x "$deb" "$x"
lib=$(dirname "$(find "$x/usr/lib" -name 'libttft.so.1' | head -n1)")
[ -d "$lib" ] || fail "no libttft.so.1 in the package"
# a program against the extracted headers and library
cc -std=c11 -Wall -Wextra -Werror -I"$x/usr/include" "$src/examples/hello.c" -L"$lib" -lttft \
   -Wl,-rpath,"$lib" -o "$tmp/hello"
out=$("$tmp/hello")
[ "$out" = "$expect" ] || fail "hello against the package printed '$out'"
ldd "$tmp/hello" | grep "$lib/libttft.so.1" >/dev/null || fail "hello did not load the package's libttft.so.1"
echo "   ok: cc -I.../usr/include -L$(realpath --relative-to="$x" "$lib") -lttft: $out"
# pkg-config: ttft.pc is relocatable, so the extracted tree works as it is
out=$(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --cflags --libs ttft)
incdir=$(echo "$out" | tr ' ' '\n' | sed -n 's/^-I//p' | head -n1)
[ -n "$incdir" ] && [ "$(realpath "$incdir")" = "$(realpath "$x/usr/include")" ] ||
  fail "pkg-config on the extracted ttft.pc: $out"
cc -std=c11 "$src/examples/hello.c" $out -Wl,-rpath,"$lib" -o "$tmp/hello_pc"
[ "$("$tmp/hello_pc")" = "$expect" ] || fail "pkg-config build against the package"
echo "   ok: pkg-config build against the package"
# find_package
mkdir -p "$tmp/consumer"
cp "$src/examples/hello.c" "$tmp/consumer/"
cat >"$tmp/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(ttft 1.1 REQUIRED)
add_executable(hello hello.c)
target_link_libraries(hello PRIVATE ttft::ttft)
CM
cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$x/usr" >/dev/null
cmake --build "$tmp/consumer/build" >/dev/null
[ "$("$tmp/consumer/build/hello")" = "$expect" ] || fail "find_package build against the package"
echo "   ok: find_package(ttft) build against the package"
# the Python package (it names /usr/...; extracted elsewhere, TTFT_LIBRARY says where)
grep -q "^LIBRARY = \"/usr/lib/.*libttft.so.1\"" "$x/usr/lib/python3/dist-packages/ttft/_install_paths.py" ||
  fail "the package's Python records $(cat "$x/usr/lib/python3/dist-packages/ttft/_install_paths.py")"
got=$(cd "$tmp" && PYTHONPATH="$x/usr/lib/python3/dist-packages" TTFT_LIBRARY="$lib/libttft.so.1" python3 -c '
import ttft
r = ttft.Registry(max_inflight=8)
s = r.begin(t_ns=10**9); s.token(t_ns=10**9 + 42 * 10**6); s.end(t_ns=10**9 + 50 * 10**6)
print(ttft.library_path(), r.snapshot().quantile("ttft", 0.5))')
case "$got" in "$lib/libttft.so.1 0.042") ;; *) fail "python from the package: $got" ;; esac
echo "   ok: python3 imports the package's ttft: $got"
"$x/usr/bin/ttft-report" "$tmp/clone/build/demo.ttfs" | grep "^ttft " >/dev/null || fail "the package's ttft-report"
echo "   ok: the package's ttft-report reads the demo's snapshot"

# ------------------------------------------------------------ 3. diff: signal or noise
echo "== ttft-report --diff: two same-seed demo runs, then a 1.5x slower one"
demo="$tmp/clone/build/examples/ttft-demo"
report="$tmp/clone/build/tools/ttft-report"
for run in a b; do
  "$demo" --no-http --no-experiment --seed 7 --snapshot "$tmp/$run.ttfs" >/dev/null || fail "demo run $run"
done
"$demo" --no-http --no-experiment --seed 7 --slowdown 1.5 --snapshot "$tmp/slow.ttfs" >/dev/null || fail "slow demo run"
set +e
"$report" --diff "$tmp/a.ttfs" "$tmp/b.ttfs" --fail-on-regression >"$tmp/same.txt"
rc_same=$?
"$report" --diff "$tmp/a.ttfs" "$tmp/slow.ttfs" --fail-on-regression >"$tmp/slow.txt"
rc_slow=$?
set -e
echo "   same seed:  $(grep -cE '<< REGRESSION' "$tmp/same.txt") flagged; $(tail -n3 "$tmp/same.txt" | tr '\n' ' ')"
echo "   slowed 1.5x: $(grep -cE '<< REGRESSION' "$tmp/slow.txt") flagged; $(grep -E 'regression' "$tmp/slow.txt" | tail -n1)"
[ "$rc_same" -eq 0 ] || { cat "$tmp/same.txt"; fail "two same-seed demo runs: exit $rc_same, expected 0 (no regression)"; }
grep -q "not enough data" "$tmp/same.txt" || fail "a 37-stream diff should say 'not enough data' for its tails"
[ "$rc_slow" -eq 3 ] || { cat "$tmp/slow.txt"; fail "demo slowed 1.5x: exit $rc_slow, expected 3 (regression)"; }
grep -qE '^  (tpot|itl) +p50 .*<< REGRESSION' "$tmp/slow.txt" || fail "the slowed run's TPOT/ITL p50 was not flagged"
echo "== first contact: ok"
