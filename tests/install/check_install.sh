#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds programs written
# only against the public API the two ways users will: pkg-config and
# CMake's find_package(ttft). Runs them and checks their exact output.
set -euo pipefail
build_dir=$1
src_dir=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT

cmake --install "$build_dir" --prefix "$prefix" >/dev/null
libdir=$(ls -d "$prefix"/lib*/pkgconfig | head -1 | xargs dirname)
export PKG_CONFIG_PATH="$libdir/pkgconfig"

command -v pkg-config >/dev/null || { echo "FAIL: pkg-config missing (apt-get install pkg-config)"; exit 1; }
test "$(pkg-config --modversion ttft)" = "1.1.0" || { echo "FAIL: pkg-config version"; exit 1; }

# 1. pkg-config, shared library
cc -std=c11 -Wall -Wextra -Werror "$src_dir/examples/hello.c" $(pkg-config --cflags --libs ttft) \
   -Wl,-rpath,"$libdir" -o "$prefix/hello"
out=$("$prefix/hello")
expect="TTFT p50 = 42.000 ms, TPOT p50 = 20.000 ms, tokens = 10"
[ "$out" = "$expect" ] || { echo "FAIL: pkg-config build printed '$out', expected '$expect'"; exit 1; }
echo "ok: pkg-config build: $out"

# 2. pkg-config --static against the archive
cc -std=c11 "$src_dir/examples/hello.c" $(pkg-config --cflags ttft) "$libdir/libttft.a" \
   $(pkg-config --libs-only-l --static ttft | sed 's/-lttft//') -o "$prefix/hello_static"
out=$("$prefix/hello_static")
[ "$out" = "$expect" ] || { echo "FAIL: static build printed '$out'"; exit 1; }
echo "ok: static archive build"

# 3. CMake find_package consumer
mkdir -p "$prefix/consumer"
cp "$src_dir/examples/hello.c" "$prefix/consumer/"
cat > "$prefix/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(ttft 1.0 REQUIRED)
add_executable(hello hello.c)
target_link_libraries(hello PRIVATE ttft::ttft)
CM
cmake -S "$prefix/consumer" -B "$prefix/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_RPATH="$libdir" >/dev/null
cmake --build "$prefix/consumer/build" >/dev/null
out=$("$prefix/consumer/build/hello")
[ "$out" = "$expect" ] || { echo "FAIL: find_package build printed '$out'"; exit 1; }
echo "ok: find_package(ttft) build"

# 4. the installed shared library exports only ttft_ symbols and has SONAME libttft.so.1
bad=$(nm -D --defined-only "$libdir/libttft.so" | awk '{print $3}' | grep -v '^ttft_' || true)
[ -z "$bad" ] || { echo "FAIL: non-ttft_ exported symbols: $bad"; exit 1; }
readelf -d "$libdir/libttft.so" | grep -q 'SONAME.*libttft.so.1' || { echo "FAIL: SONAME"; exit 1; }
echo "ok: exports only ttft_ symbols, SONAME libttft.so.1"
echo "4 passed, 0 failed"
