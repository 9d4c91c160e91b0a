#!/usr/bin/env bash
# Installs the build and uses it the ways users will, checking exact output:
#  1. the README's "Install" commands for a non-default prefix, run as
#     written (extracted from README.md after <!-- install-prefix -->):
#     make install PREFIX=$P, pkg-config through PKG_CONFIG_PATH, a program
#     with an rpath and one run with LD_LIBRARY_PATH, the CMake consumer
#     project examples/consumer (copied to a fresh directory) through
#     CMAKE_PREFIX_PATH, the Python package through PYTHONPATH;
#  2. a relative PREFIX: the Makefile makes it absolute, so everything the
#     install records (the Python package's library path) is absolute;
#  3. pkg-config --static against the archive;
#  4. the installed shared library exports only ttft_ symbols, SONAME
#     libttft.so.1, version 1.3.0.
#   usage: check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir=$(cd "$1" && pwd)
src_dir=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
expect="TTFT p50 = 42.000 ms, TPOT p50 = 20.000 ms, tokens = 10"
passed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
die() { echo "FAIL: $*"; echo "$passed passed, 1 failed"; exit 1; }

command -v pkg-config >/dev/null || die "pkg-config missing (apt-get install pkg-config)"

# A user's project: examples/consumer (the README names it), copied to a
# fresh directory: app.c, and a CMakeLists.txt that finds the package with
# find_package(ttft) and links ttft::ttft.
mkdir -p "$work/app"
cp "$src_dir/examples/consumer/CMakeLists.txt" "$src_dir/examples/consumer/app.c" "$work/app/"
expect_app="consumer: 3 streams, TTFT p50 = 30 ms, TPOT p50 = 10 ms"
# `make` in the README is the top-level Makefile run in the source tree;
# here it runs from the user's directory (-f) with the build ctest made.
wrapper="make() { command make --no-print-directory -f '$src_dir/Makefile' BUILD='$build_dir' \"\$@\"; }"

# ---------------------------------------------------------------- 1. README
block=$(awk '/<!-- install-prefix/ {m = 1; next}
             m && /^```sh/ {inside = 1; next}
             inside && /^```/ {exit}
             inside {print}' "$src_dir/README.md")
[ -n "$block" ] || die "README.md: no sh block after <!-- install-prefix -->"
echo "$block" | grep '^P=' >/dev/null || die "README.md install block does not start with P=..."
for want in 'make install PREFIX=$P' 'PKG_CONFIG_PATH=$P/lib/pkgconfig' '-Wl,-rpath,$P/lib' \
            'LD_LIBRARY_PATH=$P/lib' 'CMAKE_PREFIX_PATH=$P'; do
  echo "$block" | grep -F -- "$want" >/dev/null || die "README.md install block lacks '$want'"
done
prefix="$work/opt/ttft"
{
  echo "set -euo pipefail"
  echo "$wrapper"
  echo "$block" | sed "s|^P=.*|P='$prefix'|"
} >"$work/readme_install.sh"
echo "-- running the README's install commands with P=$prefix"
(cd "$work/app" && env -u PKG_CONFIG_PATH -u LD_LIBRARY_PATH -u TTFT_LIBRARY -u PYTHONPATH \
   bash "$work/readme_install.sh") >"$work/readme.log" 2>&1 || {
  sed 's/^/  | /' "$work/readme.log"; die "the README's install commands failed"; }
n=$(grep -cxF "$expect_app" "$work/readme.log" || true)
[ "$n" = 2 ] || { sed 's/^/  | /' "$work/readme.log"; die "README: ./app and LD_LIBRARY_PATH ./app2 should print '$expect_app' (got it $n times)"; }
ok "README commands: pkg-config with PKG_CONFIG_PATH, rpath, LD_LIBRARY_PATH"
grep -qxF "$prefix/lib/libttft.so.1" "$work/readme.log" ||
  { sed 's/^/  | /' "$work/readme.log"; die "README: python's ttft.library_path() is not $prefix/lib/libttft.so.1"; }
ok "README commands: Python package through PYTHONPATH uses $prefix/lib/libttft.so.1"
out=$("$work/app/build/app")
[ "$out" = "$expect_app" ] || die "README: find_package build of examples/consumer printed '$out'"
ok "README commands: examples/consumer from a fresh directory, find_package(ttft) through CMAKE_PREFIX_PATH"
test "$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --modversion ttft)" = "1.3.0" ||
  die "pkg-config --modversion ttft is not 1.3.0"
ok "pkg-config version 1.3.0"

# ---------------------------------------------------------------- 2. relative PREFIX
mkdir -p "$work/rel"
(cd "$work/rel" && bash -c "$wrapper; set -e; make install PREFIX=inst/ttft" >"$work/rel.log" 2>&1) ||
  { sed 's/^/  | /' "$work/rel.log"; die "make install PREFIX=inst/ttft failed"; }
rel="$work/rel/inst/ttft"
[ -f "$rel/include/ttft.h" ] && [ -e "$rel/lib/libttft.so.1" ] || die "relative PREFIX: not installed under $rel"
paths=$(find "$rel" -name _install_paths.py | head -n1)
[ -n "$paths" ] || die "relative PREFIX: no Python package (_install_paths.py) under $rel"
grep -q "^LIBRARY = \"$rel/lib/libttft.so.1\"\$" "$paths" ||
  die "relative PREFIX: $paths records $(grep LIBRARY "$paths"), not the absolute $rel/lib/libttft.so.1"
# the package works from anywhere, without TTFT_LIBRARY
got=$(cd / && env -u TTFT_LIBRARY PYTHONPATH="$(dirname "$(dirname "$paths")")" python3 -c \
      'import ttft; r = ttft.Registry(max_inflight=4); print(ttft.library_path())')
[ "$got" = "$rel/lib/libttft.so.1" ] || die "relative PREFIX: python used '$got'"
# and so do ttft.pc and the CMake package (relocatable)
out=$(cd / && PKG_CONFIG_PATH="$rel/lib/pkgconfig" pkg-config --variable=includedir ttft)
[ "$(cd "$out" && pwd)" = "$rel/include" ] || die "relative PREFIX: ttft.pc includedir is $out"
ok "relative PREFIX: installed under $rel, absolute library path recorded, Python and pkg-config work"

# ---------------------------------------------------------------- 3. static
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc -std=c11 -Wall -Wextra -Werror "$src_dir/examples/hello.c" $(pkg-config --cflags ttft) "$prefix/lib/libttft.a" \
   $(pkg-config --libs-only-l --static ttft | sed 's/-lttft//') -o "$work/hello_static"
out=$("$work/hello_static")
[ "$out" = "$expect" ] || die "static build printed '$out'"
ok "pkg-config --static build against the archive"

# ---------------------------------------------------------------- 4. exports
bad=$(nm -D --defined-only "$prefix/lib/libttft.so" | awk '{print $3}' | grep -v '^ttft_' || true)
[ -z "$bad" ] || die "non-ttft_ exported symbols: $bad"
readelf -d "$prefix/lib/libttft.so" | grep 'SONAME.*libttft.so.1' >/dev/null || die "SONAME"
ok "exports only ttft_ symbols, SONAME libttft.so.1"
echo "$passed passed, 0 failed"
