#!/usr/bin/env bash
# check_rules.sh check|test RULES_DIR — the SLO rules of deploy/prometheus:
#   check   `promtool check rules ttft.rules.yml` (syntax, PromQL, no lint)
#   test    `promtool test rules ttft.rules.test.yml` (alerts fire where they
#           should, stay quiet where they should; recording rules' values)
# promtool missing: FAIL under CI (CI set), otherwise exit 77 (ctest SKIP).
set -u
mode=$1
dir=$2
promtool=${PROMTOOL:-$(command -v promtool || true)}
if [ -z "$promtool" ] || [ ! -x "$promtool" ]; then
  if [ -n "${CI:-}" ]; then
    echo "FAIL: promtool not found (Debian package 'prometheus'); CI requires it" >&2
    exit 1
  fi
  echo "SKIP: promtool not found (apt-get install prometheus)" >&2
  exit 77
fi
cd "$dir" || exit 1
case "$mode" in
  check)
    out=$("$promtool" check rules ttft.rules.yml 2>&1)
    rc=$?
    printf '%s\n' "$out"
    [ $rc -eq 0 ] || exit 1
    # promtool prints lint findings as warnings without failing: none allowed
    if printf '%s\n' "$out" | grep -qiE "warn|lint"; then
      echo "FAIL: promtool reported findings" >&2
      exit 1
    fi
    n=$(printf '%s\n' "$out" | sed -nE 's/.*SUCCESS: ([0-9]+) rules found.*/\1/p')
    [ "${n:-0}" -ge 20 ] || { echo "FAIL: expected at least 20 rules, got '${n:-none}'" >&2; exit 1; }
    ;;
  test)
    "$promtool" test rules ttft.rules.test.yml || exit 1
    ;;
  *)
    echo "usage: $0 check|test RULES_DIR" >&2
    exit 2
    ;;
esac
