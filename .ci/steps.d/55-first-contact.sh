#!/usr/bin/env bash
# First contact (issue 13): what a new user does first, checked as they do it.
#  1. `make demo` in a fresh clone: builds only the demo and ttft-report
#     (no test, benchmark or C++ check is built) and runs; the time from
#     `make demo` to the demo's first line, and in all, is printed (a
#     figure, not an assertion: the machine is shared).
#  2. `make deb`: four packages as Debian splits a library — libttft1 (the
#     shared library, shlibs, ldconfig trigger), libttft-dev (headers,
#     static library, libttft.so, ttft.pc, CMake package), ttft-tools
#     (ttft-report, its manual page), python3-ttft — each with its DEP-5
#     copyright and changelog, no file in two; lintian finds no error and
#     no warning docs/install.md does not explain; extracted, a program
#     builds against them; then (as root) `dpkg -i` of the four, a program
#     through the system's pkg-config, examples/consumer from a fresh
#     directory through find_package, /usr/bin/python3 importing the module,
#     ttft-report and its manual page, and `dpkg --purge` leaving nothing.
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
for t in git cmake cc dpkg-deb pkg-config python3 lintian; do
  command -v "$t" >/dev/null || fail "$t is missing (.ci/packages.d/first-contact.txt)"
done
expect="TTFT p50 = 42.000 ms, TPOT p50 = 20.000 ms, tokens = 10"
expect_app="consumer: 3 streams, TTFT p50 = 30 ms, TPOT p50 = 10 ms"   # examples/consumer/app.c

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
echo "== make deb: libttft1, libttft-dev, ttft-tools, python3-ttft"
(cd "$tmp/clone" && make deb JOBS="$JOBS" >"$tmp/deb.log" 2>&1) || { tail -40 "$tmp/deb.log"; fail "make deb failed"; }
debdir="$tmp/clone/build-deb"
for p in libttft1 libttft-dev ttft-tools python3-ttft; do
  f=$(ls "$debdir/${p}_"*.deb 2>/dev/null | head -n1)
  [ -n "$f" ] || fail "make deb wrote no $p package"
  [ "$(dpkg-deb -f "$f" Package)" = "$p" ] || fail "$f is not package $p"
  echo "   $(basename "$f"): $(stat -c %s "$f") bytes; Depends: $(dpkg-deb -f "$f" Depends)"
  dpkg-deb -c "$f" | awk '{print $6, $7, $8}' | sed 's/  *$//' >"$tmp/$p.contents"
  # every package: its own DEP-5 copyright and changelog
  grep -E "^\./usr/share/doc/$p/copyright$" "$tmp/$p.contents" >/dev/null || fail "$p lacks /usr/share/doc/$p/copyright"
  grep -E "^\./usr/share/doc/$p/changelog\.Debian\.gz$" "$tmp/$p.contents" >/dev/null || fail "$p lacks its changelog.Debian.gz"
done
[ "$(ls "$debdir"/*.deb | wc -l)" -eq 4 ] || fail "make deb wrote $(ls "$debdir"/*.deb | wc -l) packages, expected 4"
want_in() { # PACKAGE REGEX...: the package holds a path matching each
  p=$1; shift
  for w in "$@"; do grep -E -- "$w" "$tmp/$p.contents" >/dev/null || fail "$p lacks $w"; done
}
want_in libttft1 '/libttft\.so\.1\.[0-9.]*$' '/libttft\.so\.1 -> '
want_in libttft-dev '/usr/include/ttft\.h$' '/usr/include/ttft\.hpp$' '/libttft\.a$' '/libttft\.so -> libttft\.so\.1$' \
  '/pkgconfig/ttft\.pc$' '/cmake/ttft/ttftConfig\.cmake$' '/cmake/ttft/ttftTargets\.cmake$'
want_in ttft-tools '^\./usr/bin/ttft-report$' '^\./usr/share/man/man1/ttft-report\.1\.gz$' \
  '^\./usr/bin/ttft-top$' '^\./usr/share/man/man1/ttft-top\.1\.gz$'
want_in python3-ttft '^\./usr/lib/python3/dist-packages/ttft/__init__\.py$' '/dist-packages/ttft/_install_paths\.py$'
# nothing in two packages, nothing of the library outside libttft1
cat "$tmp"/*.contents | grep -v '/$' | sort | uniq -d >"$tmp/dups"
[ ! -s "$tmp/dups" ] || fail "files in two packages: $(tr '\n' ' ' <"$tmp/dups")"
for p in libttft-dev ttft-tools python3-ttft; do
  ! grep -E '/libttft\.so\.1' "$tmp/$p.contents" >/dev/null || fail "$p holds the runtime library"
done
dpkg-deb -f "$debdir"/libttft1_*.deb Package >/dev/null
dpkg-deb --ctrl-tarfile "$debdir"/libttft1_*.deb | tar -xO ./shlibs | grep -E '^libttft 1 libttft1 \(>= ' >/dev/null ||
  fail "libttft1 has no shlibs entry for libttft.so.1"
dpkg-deb --ctrl-tarfile "$debdir"/libttft1_*.deb | tar -xO ./triggers | grep -x 'activate-noawait ldconfig' >/dev/null ||
  fail "libttft1 does not activate the ldconfig trigger"
# the copyright files are machine-readable (DEP-5) and carry the license
x0="$tmp/x0"
dpkg-deb -x "$debdir"/python3-ttft_*.deb "$x0"
cr="$x0/usr/share/doc/python3-ttft/copyright"
head -n1 "$cr" | grep -x 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' >/dev/null ||
  fail "copyright is not DEP-5"
grep -E '^License: Expat$' "$cr" >/dev/null && grep -F 'THE SOFTWARE IS PROVIDED "AS IS"' "$cr" >/dev/null ||
  fail "copyright lacks the Expat license text"

echo "== lintian"
command -v lintian >/dev/null || fail "lintian is missing (.ci/packages.d/first-contact.txt)"
t0=$(date +%s.%N)
set +e
lintian --fail-on error --pedantic --info "$debdir"/*.deb >"$tmp/lintian.txt" 2>&1
rc_lintian=$?
set -e
t1=$(date +%s.%N)
grep -E '^[EWIPX]: ' "$tmp/lintian.txt" | sort | uniq -c | sed 's/^/   /' || true
printf '   lintian: exit %d, %d errors, %d warnings (%.0f s)\n' "$rc_lintian" \
  "$(grep -c '^E: ' "$tmp/lintian.txt" || true)" "$(grep -c '^W: ' "$tmp/lintian.txt" || true)" "$(echo "$t1 - $t0" | bc)"
[ "$rc_lintian" -eq 0 ] && ! grep '^E: ' "$tmp/lintian.txt" >/dev/null || { cat "$tmp/lintian.txt"; fail "lintian found errors"; }
# the warnings docs/install.md explains, and no other
other=$(grep -E '^W: ' "$tmp/lintian.txt" | grep -vE ': (initial-upload-closes-no-bugs|maintscript-calls-ldconfig) ' || true)
[ -z "$other" ] || fail "lintian warnings docs/install.md does not explain: $other"

# extracted (no root needed): a program against the headers and library
x="$tmp/x"
for f in "$debdir"/*.deb; do dpkg-deb -x "$f" "$x"; done
lib=$(dirname "$(find "$x/usr/lib" -name 'libttft.so.1' | head -n1)")
[ -d "$lib" ] || fail "no libttft.so.1 in the packages"
cc -std=c11 -Wall -Wextra -Werror -I"$x/usr/include" "$src/examples/hello.c" -L"$lib" -lttft \
   -Wl,-rpath,"$lib" -o "$tmp/hello"
out=$("$tmp/hello")
[ "$out" = "$expect" ] || fail "hello against the extracted packages printed '$out'"
ldd "$tmp/hello" | grep "$lib/libttft.so.1" >/dev/null || fail "hello did not load the package's libttft.so.1"
echo "   ok: extracted: cc -I.../usr/include -L$(realpath --relative-to="$x" "$lib") -lttft: $out"
# the packaged ttft.pc names /usr (so that pkg-config drops the system
# directories); extracted elsewhere, the sysroot says where
out=$(PKG_CONFIG_SYSROOT_DIR="$x" PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --cflags --libs ttft)
incdir=$(echo "$out" | tr ' ' '\n' | sed -n 's/^-I//p' | head -n1)
[ -n "$incdir" ] && [ "$(realpath "$incdir")" = "$(realpath "$x/usr/include")" ] ||
  fail "pkg-config on the extracted ttft.pc with PKG_CONFIG_SYSROOT_DIR: $out"
echo "   ok: extracted: PKG_CONFIG_SYSROOT_DIR=... pkg-config --cflags --libs ttft: $out"
# and without one it names nothing but the library: /usr/include and
# /usr/lib/<multiarch> are system directories, which pkg-config drops only
# when it sees them as such (issue 32.8; 1.2 printed -I/usr/lib/<multiarch>/
# pkgconfig/../../../include and the same -L)
out=$(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --cflags --libs ttft | tr -s ' ' | sed 's/ *$//')
[ "$out" = "-lttft" ] || fail "pkg-config on the packaged ttft.pc prints more than -lttft: '$out'"
echo "   ok: packaged ttft.pc: pkg-config --cflags --libs ttft = $out"

# installed for real, used, then purged: nothing may be left behind
echo "== dpkg -i the four packages, use them, dpkg --purge"
if [ "$(id -u)" != 0 ]; then
  [ -z "${CI:-}" ] || fail "installing the packages needs root"
  echo "   skipped: not root"
else
  ! dpkg-query -W libttft libttft1 libttft-dev ttft-tools python3-ttft >/dev/null 2>&1 ||
    fail "a libttft package is installed already: $(dpkg-query -W libttft libttft1 libttft-dev ttft-tools python3-ttft 2>/dev/null | tr '\n' ' ')"
  purge() { dpkg --purge python3-ttft ttft-tools libttft-dev libttft1 >"$tmp/purge.log" 2>&1; }
  # every path the packages hold, and which of them (shared directories
  # such as /usr/lib/<multiarch>/cmake) exist before the install
  for f in "$debdir"/*.deb; do dpkg-deb -c "$f"; done | awk '{print $6}' | sed 's|^\.||; s|/$||' |
    grep . | sort -u >"$tmp/paths"
  while read -r f; do [ -e "$f" ] || [ -L "$f" ] && echo "$f"; done <"$tmp/paths" >"$tmp/before" || true
  trap 'purge || true; rm -rf "$tmp"' EXIT
  dpkg -i "$debdir"/*.deb >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i of the four packages failed"; }
  dpkg-query -W libttft1 libttft-dev ttft-tools python3-ttft | sed 's/^/   installed: /'
  ldconfig -p | grep -F "libttft.so.1 " >/dev/null || fail "the loader's cache does not know libttft.so.1 (ldconfig trigger)"
  # pkg-config and cc with nothing but the system paths
  cc -std=c11 "$src/examples/hello.c" $(pkg-config --cflags --libs ttft) -o "$tmp/hello_sys"
  [ "$("$tmp/hello_sys")" = "$expect" ] || fail "hello built with the system's pkg-config"
  ldd "$tmp/hello_sys" | grep -E '=> /(usr/)?lib/[^ ]*/libttft\.so\.1 ' >/dev/null || fail "hello_sys did not load /usr/lib/.../libttft.so.1"
  echo "   ok: cc hello.c \$(pkg-config --cflags --libs ttft): $expect"
  # the consumer project from a fresh directory, find_package with no hints
  mkdir -p "$tmp/consumer"
  cp "$src/examples/consumer/CMakeLists.txt" "$src/examples/consumer/app.c" "$tmp/consumer/"
  cmake -S "$tmp/consumer" -B "$tmp/consumer/build" >/dev/null && cmake --build "$tmp/consumer/build" >/dev/null ||
    fail "examples/consumer against the installed libttft-dev"
  out=$("$tmp/consumer/build/app")
  [ "$out" = "$expect_app" ] || fail "examples/consumer printed '$out'"
  echo "   ok: examples/consumer (find_package(ttft), ttft::ttft): $out"
  got=$(cd "$tmp" && env -u TTFT_LIBRARY -u PYTHONPATH /usr/bin/python3 -c '
import ttft
r = ttft.Registry(max_inflight=8)
s = r.begin(t_ns=10**9); s.token(t_ns=10**9 + 42 * 10**6); s.end(t_ns=10**9 + 50 * 10**6)
print(ttft.__file__, ttft.library_path(), r.snapshot().quantile("ttft", 0.5))')
  case "$got" in "/usr/lib/python3/dist-packages/ttft/__init__.py /usr/lib/"*"/libttft.so.1 0.042") ;;
    *) fail "/usr/bin/python3 with python3-ttft: $got" ;; esac
  echo "   ok: /usr/bin/python3 imports python3-ttft: $got"
  ttft-report "$tmp/clone/build/demo.ttfs" | grep "^ttft " >/dev/null || fail "the installed ttft-report"
  man -w ttft-report >/dev/null 2>&1 || [ ! -d /usr/share/man/man1 ] || fail "man ttft-report: no manual page"
  echo "   ok: ttft-report reads the demo's snapshot; man -w ttft-report: $(man -w ttft-report 2>/dev/null || echo '(no man-db)')"
  purge || { cat "$tmp/purge.log"; fail "dpkg --purge failed"; }
  trap 'rm -rf "$tmp"' EXIT
  ! dpkg-query -W libttft1 libttft-dev ttft-tools python3-ttft 2>/dev/null | grep . >/dev/null || fail "packages still known to dpkg after --purge"
  left=$(while read -r f; do
            grep -qxF -- "$f" "$tmp/before" && continue
            [ -e "$f" ] || [ -L "$f" ] && printf ' %s' "$f"
          done <"$tmp/paths"; true)
  [ -z "$left" ] || fail "left behind after dpkg --purge:$left"
  ! ldconfig -p | grep -F "libttft.so.1 " >/dev/null || fail "the loader's cache still lists libttft.so.1"
  echo "   ok: dpkg --purge removed all $(($(wc -l <"$tmp/paths") - $(wc -l <"$tmp/before"))) paths the install added ($(wc -l <"$tmp/before") shared directories existed before) and the loader's cache entry"
fi

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
