#!/usr/bin/env bash
# Python bindings: the documented install paths work.
#  1. `pip install ./python`, exactly the README's command, from a fresh
#     clone of this repository with nothing built, in a fresh
#     `python3 -m venv` of Debian's /usr/bin/python3 (3.11) and of the
#     oldest and newest pyenv CPythons present (3.8, 3.13), with setuptools
#     and wheel uninstalled from the venv and no index reachable
#     (PIP_NO_INDEX=1, a bogus index URL, no pip configuration, no
#     find-links): the package's own build backend (python/_backend,
#     standard library only) compiles libttft into the package
#     (ttft/_libttft.so). The package must import and record with no
#     TTFT_LIBRARY, no cmake and no build tree; the whole Python test suite
#     must pass against the library Debian's Python's pip built;
#  2. cmake --install into a scratch prefix, then import the installed package
#     with no TTFT_LIBRARY: it must find the installed libttft by itself;
#  3. the Python test suite against the ASan+UBSan library of build-asan
#     (20-sanitizers.sh builds it; 20 excludes the python label because a
#     CPython process needs the ASan runtime preloaded, which is done here).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO="$PWD"
BUILD="$(cd "${BUILD:-build-ci}" && pwd)"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "Debian's /usr/bin/python3 is missing (.ci/packages.d/python.txt)"; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

smoke='import ttft, sys
reg = ttft.Registry(max_inflight=16, max_classes=2)
s = reg.begin(t_ns=10**9); s.token(t_ns=10**9 + 5 * 10**6); s.end(t_ns=10**9 + 9 * 10**6)
q = reg.snapshot().quantile("ttft", 1.0)
assert q == 0.005, q
print("ok", sys.version.split()[0], ttft.__file__, ttft.library_path())'

echo "-- pip install ./python: fresh clone, fresh venvs, no index, no setuptools, no wheel"
git clone -q "$REPO" "$tmp/clone"
if ls -d "$tmp"/clone/build* "$tmp"/clone/python/ttft/*.so* >/dev/null 2>&1; then
  echo "the fresh clone is not fresh: a build tree or library is committed"; exit 1
fi
pythons="$PY"
for v in 3.8 3.13; do   # pyenv's, when this machine has them (not from apt)
  p=$(ls -d /root/.pyenv/versions/"$v".*/bin/python3 2>/dev/null | sort -V | tail -n1 || true)
  if [ -n "$p" ]; then pythons="$pythons $p"; else echo "   (no pyenv CPython $v here: not tried)"; fi
done
n=0
for py in $pythons; do
  n=$((n + 1)); venv="$tmp/venv$n"
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip uninstall -q -y setuptools wheel >/dev/null 2>&1 || true
  if "$venv/bin/python" -c 'import setuptools' 2>/dev/null || "$venv/bin/python" -c 'import wheel' 2>/dev/null; then
    echo "the venv of $py still has setuptools or wheel"; exit 1
  fi
  t0=$(date +%s.%N)
  # the README's command, word for word, with the index out of reach
  (cd "$tmp/clone" && env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null \
     PIP_NO_INDEX=1 PIP_INDEX_URL=http://127.0.0.1:9/no-index PIP_DISABLE_PIP_VERSION_CHECK=1 \
     PATH="$venv/bin:$PATH" pip install ./python >"$tmp/pip$n.log" 2>&1) ||
    { cat "$tmp/pip$n.log"; echo "pip install ./python failed with $py"; exit 1; }
  t1=$(date +%s.%N)
  out="$(cd "$tmp" && env -u TTFT_LIBRARY -u PYTHONPATH "$venv/bin/python" -c "$smoke")"
  echo "   $out"
  printf '   pip install ./python: %.1f s (load %s)\n' "$(echo "$t1 - $t0" | bc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
  case "$out" in
    *"/site-packages/ttft/_libttft.so") ;;
    *) echo "the pip-installed package did not load the library built into it"; exit 1 ;;
  esac
  if [ "$n" -eq 1 ]; then lib="${out##* }"; fi
done
echo "-- the Python test suite against the library pip built ($lib)"
(cd "$REPO/python/tests" && for t in test_*.py; do
   [ "$t" = test_backend.py ] && continue   # builds the library itself (ctest runs it)
   TTFT_LIBRARY="$lib" PYTHONDONTWRITEBYTECODE=1 "$tmp/venv1/bin/python" -m unittest -q "${t%.py}"
 done)

echo "-- cmake --install, then import without TTFT_LIBRARY"
cmake --install "$BUILD" --prefix "$tmp/prefix" >/dev/null
site="$(find "$tmp/prefix" -type d -name ttft -path '*-packages/ttft' | head -n1)"
[ -n "$site" ] || { echo "installed ttft package not found under $tmp/prefix"; exit 1; }
(cd "$tmp" && env -u TTFT_LIBRARY PYTHONPATH="$(dirname "$site")" "$PY" -c "$smoke")

echo "-- the Python test suite under ASan+UBSan (build-asan/libttft.so.1, runtime preloaded)"
ASAN_LIB="$REPO/build-asan/libttft.so.1"
if [ ! -f "$ASAN_LIB" ]; then
  if [ -n "${CI:-}" ]; then
    echo "build-asan/libttft.so.1 is missing: 20-sanitizers.sh must run before this step"; exit 1
  fi
  echo "skipped: no $ASAN_LIB (run .ci/steps.d/20-sanitizers.sh first)"
  exit 0
fi
rt="$(clang -print-file-name=libclang_rt.asan-x86_64.so)"
[ -f "$rt" ] || { echo "the ASan runtime $rt is missing (libclang-rt-14-dev)"; exit 1; }
# detect_leaks=0: CPython itself does not free everything at exit
(cd "$REPO/python/tests" && for t in test_*.py; do
   [ "$t" = test_backend.py ] && continue
   ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1" \
   UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
   LD_PRELOAD="$rt" TTFT_LIBRARY="$ASAN_LIB" PYTHONDONTWRITEBYTECODE=1 \
     "$PY" -m unittest -q "${t%.py}"
 done)
