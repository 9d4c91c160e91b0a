#!/usr/bin/env bash
# libttft as a subproject: a parent project that does add_subdirectory(libttft)
# and links ttft::ttft must build the library and its own program, nothing
# else — no test, benchmark, fuzzer, example or tool, and no ctest test of
# ours — and BUILD_SHARED_LIBS must decide what ttft::ttft is.
#   check_subproject.sh SRC_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p "$work/parent"
cat > "$work/parent/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.16)
project(parent C)
enable_testing()
add_subdirectory("$src" libttft)
add_executable(app app.c)
target_link_libraries(app PRIVATE ttft::ttft)
add_test(NAME parent_app COMMAND app)
CM
cp "$src/examples/hello.c" "$work/parent/app.c"

for kind in shared static; do
  b="$work/build-$kind"
  flag=ON
  [ "$kind" = static ] && flag=OFF
  cmake -S "$work/parent" -B "$b" -DBUILD_SHARED_LIBS=$flag > "$b.configure.log" 2>&1 \
    || { cat "$b.configure.log"; fail "configure ($kind)"; }
  grep -q "libttft .*subproject, ttft::ttft = $kind" "$b.configure.log" \
    || { cat "$b.configure.log"; fail "configure did not report ttft::ttft = $kind"; }
  cmake --build "$b" -j 2 > "$b.build.log" 2>&1 || { cat "$b.build.log"; fail "build ($kind)"; }
  # what was built: the library (the kind asked for) and the app; nothing else of ours
  built=$(find "$b" -type f -perm -u+x \( -name 'test_*' -o -name 'ttft-*' -o -name 'fuzz_*' \
          -o -name '*_replay' -o -name 'abi_*' \) | sort)
  [ -z "$built" ] || fail "$kind: programs of libttft were built: $built"
  targets=$(grep -c "Built target" "$b.build.log" || true)
  [ "$targets" = 2 ] || { grep "Built target" "$b.build.log"; fail "$kind: $targets targets built, expected 2 (the library and app)"; }
  if [ "$kind" = shared ]; then
    ls "$b"/libttft/libttft.so.1 >/dev/null 2>&1 || fail "shared: no libttft.so.1"
    [ ! -e "$b/libttft/libttft.a" ] || fail "shared: the static library was built too"
    ldd "$b/app" | grep libttft.so.1 >/dev/null || fail "shared: app does not link libttft.so.1"
  else
    ls "$b"/libttft/libttft.a >/dev/null 2>&1 || fail "static: no libttft.a"
    ! ldd "$b/app" | grep libttft >/dev/null || fail "static: app links a shared libttft"
  fi
  out=$("$b/app")
  [ "$out" = "TTFT p50 = 42.000 ms, TPOT p50 = 20.000 ms, tokens = 10" ] || fail "$kind: app printed '$out'"
  # ctest in the parent: only the parent's own test
  n=$(cd "$b" && ctest -N | sed -n 's/^Total Tests: //p')
  [ "$n" = 1 ] || { (cd "$b" && ctest -N); fail "$kind: the parent sees $n tests, expected its own 1"; }
  echo "ok: subproject, BUILD_SHARED_LIBS=$flag: ttft::ttft is $kind, 2 targets built, 1 test registered"
done
echo "2 passed, 0 failed"
