#!/usr/bin/env bash
# Python bindings: the documented offline install paths work.
#  1. pip install --no-build-isolation --no-index ./python into a venv that
#     sees Debian's setuptools/wheel, then use it with TTFT_LIBRARY;
#  2. cmake --install into a scratch prefix, then import the installed package
#     with no TTFT_LIBRARY: it must find the installed libttft by itself.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="$(cd "${BUILD:-build-ci}" && pwd)"
PY=/usr/bin/python3
command -v "$PY" >/dev/null || PY="$(command -v python3)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp" python/build python/ttft.egg-info' EXIT

smoke='import ttft, sys
reg = ttft.Registry(max_inflight=16, max_classes=2)
s = reg.begin(t_ns=10**9); s.token(t_ns=10**9 + 5 * 10**6); s.end(t_ns=10**9 + 9 * 10**6)
q = reg.snapshot().quantile("ttft", 1.0)
assert q == 0.005, q
print("ok", ttft.__file__, ttft.library_path())'

echo "-- pip install (offline) into a venv"
"$PY" -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/pip" install --no-build-isolation --no-index ./python
(cd "$tmp" && TTFT_LIBRARY="$BUILD/libttft.so.1" "$tmp/venv/bin/python" -c "$smoke")

echo "-- cmake --install, then import without TTFT_LIBRARY"
cmake --install "$BUILD" --prefix "$tmp/prefix" >/dev/null
site="$(find "$tmp/prefix" -type d -name ttft -path '*-packages/ttft' | head -n1)"
[ -n "$site" ] || { echo "installed ttft package not found under $tmp/prefix"; exit 1; }
(cd "$tmp" && env -u TTFT_LIBRARY PYTHONPATH="$(dirname "$site")" "$PY" -c "$smoke")
