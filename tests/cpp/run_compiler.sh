#!/bin/sh
# run_compiler.sh COMPILER OUTPUT RUN ARGS...
# Compile ARGS with COMPILER into OUTPUT (a program), then run it when RUN
# is 1 (through $TTFT_EMULATOR when set: a cross build, tests/cpp.cmake).
# A missing compiler fails under CI (CI set) and is reported as a skip
# (exit 77, shown by ctest as "Skipped") elsewhere.
set -eu
cc=$1 out=$2 run=$3
shift 3
if ! command -v "$cc" >/dev/null 2>&1; then
  if [ -n "${CI:-}" ]; then
    echo "FAIL: compiler '$cc' not found and CI is set (add it to .ci/packages.d/cpp.txt)" >&2
    exit 1
  fi
  echo "SKIP: compiler '$cc' not found (install it to run this test)" >&2
  exit 77
fi
mkdir -p "$(dirname "$out")"
echo "+ $cc $* -o $out"
"$cc" "$@" -o "$out"
if [ "$run" = 1 ]; then
  echo "+ ${TTFT_EMULATOR:+$TTFT_EMULATOR }$out"
  # shellcheck disable=SC2086 # the emulator's command line is words
  ${TTFT_EMULATOR:-} "$out"
fi
