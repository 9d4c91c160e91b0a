#!/usr/bin/env bash
# Python bindings: the documented offline install paths work.
#  1. pip, from a fresh clone of this repository with nothing built:
#     `python3 -m venv --system-site-packages` (Debian's setuptools and wheel)
#     + `pip install --no-build-isolation --no-index ./python`. setup.py
#     compiles libttft into the package (ttft/_libttft.so); the package must
#     import and record with no TTFT_LIBRARY, no cmake and no build tree, and
#     the whole Python test suite must pass against that library;
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
command -v "$PY" >/dev/null || PY="$(command -v python3)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

smoke='import ttft, sys
reg = ttft.Registry(max_inflight=16, max_classes=2)
s = reg.begin(t_ns=10**9); s.token(t_ns=10**9 + 5 * 10**6); s.end(t_ns=10**9 + 9 * 10**6)
q = reg.snapshot().quantile("ttft", 1.0)
assert q == 0.005, q
print("ok", ttft.__file__, ttft.library_path())'

echo "-- pip install ./python (offline) from a fresh clone with nothing built"
git clone -q "$REPO" "$tmp/clone"
if ls -d "$tmp"/clone/build* "$tmp"/clone/python/ttft/*.so* >/dev/null 2>&1; then
  echo "the fresh clone is not fresh: a build tree or library is committed"; exit 1
fi
"$PY" -m venv --system-site-packages "$tmp/venv"
(cd "$tmp/clone" && "$tmp/venv/bin/pip" install --no-build-isolation --no-index ./python)
out="$(cd "$tmp" && env -u TTFT_LIBRARY -u PYTHONPATH "$tmp/venv/bin/python" -c "$smoke")"
echo "$out"
case "$out" in
  *"/site-packages/ttft/_libttft.so") ;;
  *) echo "the pip-installed package did not load the library built into it"; exit 1 ;;
esac
lib="${out##* }"
echo "-- the Python test suite against the library pip built ($lib)"
(cd "$REPO/python/tests" && for t in test_*.py; do
   [ "$t" = test_setup.py ] && continue   # builds the library itself (ctest runs it)
   TTFT_LIBRARY="$lib" PYTHONDONTWRITEBYTECODE=1 "$tmp/venv/bin/python" -m unittest -q "${t%.py}"
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
   [ "$t" = test_setup.py ] && continue
   ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1" \
   UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
   LD_PRELOAD="$rt" TTFT_LIBRARY="$ASAN_LIB" PYTHONDONTWRITEBYTECODE=1 \
     "$PY" -m unittest -q "${t%.py}"
 done)
