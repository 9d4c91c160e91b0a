#!/bin/sh
# tests/tools/check_static.sh DIR DEMO — the static release artefacts of
# `make static-tools` (DIR/ttft-report, DIR/ttft-exporter) are statically
# linked (file(1), and no PT_INTERP/NEEDED per readelf) and run: the demo
# DEMO writes a snapshot, ttft-report reads it; ttft-exporter --help, then
# ttft-exporter serving an empty shared directory answers GET /metrics
# (curl). Used by .ci/steps.d/65-musl.sh. Exit 0 when every check passes.
set -eu
dir=$1
demo=$2
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "static tools: FAIL: $*"; exit 1; }
for t in file readelf curl; do
  command -v "$t" >/dev/null || fail "$t is missing (.ci/packages.d/musl.txt)"
done
for t in ttft-report ttft-exporter; do
  b="$dir/$t"
  [ -x "$b" ] || fail "$b is missing (make static-tools)"
  file "$b" | grep "statically linked" >/dev/null || fail "$t is not statically linked: $(file "$b")"
  if readelf -l -d "$b" | grep -E "INTERP|\(NEEDED\)" >/dev/null; then
    fail "$t has a program interpreter or needs a shared library"
  fi
  echo "ok: $t statically linked, $(wc -c <"$b") bytes"
done
"$demo" --seconds 1 --no-http --no-experiment --snapshot "$tmp/demo.ttfs" >"$tmp/demo.out" 2>&1 ||
  fail "the demo failed: $(tail -3 "$tmp/demo.out")"
"$dir/ttft-report" "$tmp/demo.ttfs" >"$tmp/report.out" 2>&1 || fail "ttft-report exited $?"
grep -E "^ttft +[1-9][0-9]* " "$tmp/report.out" >/dev/null || fail "ttft-report printed no TTFT row"
echo "ok: ttft-report reads the demo's snapshot"
"$dir/ttft-exporter" --help | grep "^usage: ttft-exporter" >/dev/null || fail "ttft-exporter --help"
mkdir -m 700 "$tmp/shm"
"$dir/ttft-exporter" --dir "$tmp/shm" --listen 127.0.0.1:0 >"$tmp/exp.out" 2>&1 &
pid=$!
url=""
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  url=$(sed -n 's/.* on \(http:[^ ]*\/metrics\)$/\1/p' "$tmp/exp.out")
  [ -n "$url" ] && break
  sleep 0.25
done
[ -n "$url" ] || fail "ttft-exporter printed no address: $(cat "$tmp/exp.out")"
curl -fsS "$url" >"$tmp/metrics" || fail "GET $url failed"
grep "^# TYPE gen_ai_server_time_to_first_token_seconds histogram" "$tmp/metrics" >/dev/null ||
  fail "GET $url: no TTFT histogram"
kill "$pid"
wait "$pid" || fail "ttft-exporter exited $? on SIGTERM"
pid=""
echo "ok: ttft-exporter serves $url and stops on SIGTERM"
echo "static tools: PASS"
