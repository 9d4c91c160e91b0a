#!/usr/bin/env bash
# check_promtool.sh EXPOSE_BIN WORKDIR — write every exposition variant with
# EXPOSE_BIN (tests/prom/expose.c) and run `promtool check metrics` on each
# Prometheus-text (.prom) file. Passing means: exit status 0 AND no output
# at all (promtool prints lint problems, e.g. "no help text", even when
# the exposition parses).
#
# OpenMetrics (.om) files are fed to promtool too, for information only:
# promtool (2.42) reads the 0.0.4 text format, which has no `info` type, so
# it stops at the info family. OpenMetrics is validated by the Python
# OpenMetrics parser (parse_client.py) and by a real Prometheus scrape
# (scrape_test.py).
#
# promtool missing: FAIL under CI (CI set), otherwise exit 77 (ctest SKIP).
set -u
expose=$1
work=$2
promtool=${PROMTOOL:-$(command -v promtool || true)}
if [ -z "$promtool" ] || [ ! -x "$promtool" ]; then
  if [ -n "${CI:-}" ]; then
    echo "FAIL: promtool not found (Debian package 'prometheus'); CI requires it" >&2
    exit 1
  fi
  echo "SKIP: promtool not found (apt-get install prometheus)" >&2
  exit 77
fi
rm -rf "$work" && mkdir -p "$work" || exit 1
"$expose" "$work" || { echo "FAIL: $expose $work" >&2; exit 1; }

fail=0
n=0
for f in "$work"/*.prom; do
  [ -e "$f" ] || { echo "FAIL: no .prom files written" >&2; exit 1; }
  n=$((n + 1))
  out=$("$promtool" check metrics < "$f" 2>&1)
  rc=$?
  if [ $rc -ne 0 ] || [ -n "$out" ]; then
    echo "FAIL: promtool check metrics $(basename "$f") (exit $rc):" >&2
    printf '%s\n' "$out" | head -20 >&2
    fail=1
  else
    echo "ok   promtool check metrics $(basename "$f") ($(wc -l < "$f") lines, no lint)"
  fi
done
[ $n -ge 6 ] || { echo "FAIL: expected 6 variants, got $n" >&2; fail=1; }
for f in "$work"/*.om; do
  out=$("$promtool" check metrics < "$f" 2>&1 | head -1)
  echo "info promtool on OpenMetrics $(basename "$f"): ${out:-accepted}"
done
exit $fail
