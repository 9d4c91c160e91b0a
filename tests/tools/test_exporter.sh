#!/bin/sh
# test_exporter.sh — tools/ttft-exporter end to end.
#   usage: test_exporter.sh TTFT_EXPORTER WORKDIR
# Starts the exporter on a private directory and a free port, reads the
# address it prints, scrapes /metrics and /snapshot (python3), stops it
# with SIGTERM (exit 0) and with SIGINT (exit 0); a missing directory, a
# world-writable one and a busy port each exit non-zero with one line
# naming the reason; --help, --version, bad usage (1). Needs python3;
# under CI a missing python3 fails.
set -u
EXPORTER=$1
WORK=$2
rm -rf "$WORK"
mkdir -p "$WORK" || exit 1
cd "$WORK" || exit 1
if ! command -v python3 >/dev/null 2>&1; then
  echo "python3 is missing (needed to scrape)"
  [ -n "${CI:-}" ] && exit 1
  exit 77
fi

fails=0
passes=0
ok() { passes=$((passes + 1)); }
fail() {
  fails=$((fails + 1))
  echo "FAIL: $*" >&2
}
check() { # check DESCRIPTION COMMAND...
  d=$1
  shift
  if "$@"; then ok; else fail "$d"; fi
}

mkdir -m 700 dir || exit 1

# start DIR ADDR: the exporter in the background, $pid, its first line in $line
start() {
  rm -f out.txt err.txt
  "$EXPORTER" --dir "$1" --listen "$2" >out.txt 2>err.txt &
  pid=$!
  line=""
  i=0
  while [ $i -lt 100 ]; do
    line=$(head -n 1 out.txt 2>/dev/null)
    [ -n "$line" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
    i=$((i + 1))
  done
}

# fetch URL: the body to body.bin; prints status and content type
fetch() {
  python3 - "$1" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
    open("body.bin", "wb").write(r.read())
    print(r.status, r.headers.get("Content-Type"))
PY
}

# --- serve, scrape, SIGTERM
start dir 127.0.0.1:0
case $line in
"ttft-exporter: serving dir on http://127.0.0.1:"*/metrics) ok ;;
*) fail "start line: '$line' ($(cat err.txt))" ;;
esac
url=${line#*on }
port=${url#http://127.0.0.1:}
port=${port%/metrics}
got=$(fetch "$url")
check "/metrics 200 text: $got" [ "$got" = "200 text/plain; version=0.0.4; charset=utf-8" ]
check "/metrics has the processes gauge" grep -q '^llm_processes\|processes' body.bin
got=$(fetch "${url%/metrics}/snapshot")
check "/snapshot 200 octet-stream: $got" [ "$got" = "200 application/octet-stream" ]
check "/snapshot not empty" test -s body.bin

# --- busy port: the second exporter on the first one's port
"$EXPORTER" --dir dir --listen "127.0.0.1:$port" >out2.txt 2>err2.txt
rc=$?
check "busy port exits non-zero (rc $rc)" [ $rc -ne 0 ]
check "busy port says bind: $(cat err2.txt)" grep -q "^ttft-exporter: 127.0.0.1:$port: bind: " err2.txt
check "busy port: one line" [ "$(wc -l <err2.txt)" -eq 1 ]

kill -TERM "$pid"
wait "$pid"
rc=$?
check "SIGTERM exits 0 (rc $rc)" [ $rc -eq 0 ]
check "SIGTERM said" grep -q "stopped (SIGTERM)" err.txt

# --- SIGINT (sh starts a background job with SIGINT ignored: the exporter
# must take it all the same)
rm -f out.txt err.txt
"$EXPORTER" --dir dir --listen 127.0.0.1:0 >out.txt 2>err.txt &
pid=$!
i=0
while [ $i -lt 100 ] && [ ! -s out.txt ]; do sleep 0.1; i=$((i + 1)); done
kill -INT "$pid"
wait "$pid"
rc=$?
check "SIGINT exits 0 (rc $rc, $(cat err.txt))" [ $rc -eq 0 ]
check "SIGINT said" grep -q "stopped (SIGINT)" err.txt

# --- bad directories
"$EXPORTER" --dir "$WORK/missing" --listen 127.0.0.1:0 >out.txt 2>err.txt
rc=$?
check "missing dir exits non-zero (rc $rc)" [ $rc -ne 0 ]
check "missing dir names it: $(cat err.txt)" grep -q "^ttft-exporter: .*missing: No such file or directory" err.txt
check "missing dir: one line" [ "$(wc -l <err.txt)" -eq 1 ]
check "missing dir: nothing on stdout" [ ! -s out.txt ]
mkdir -m 777 open && chmod 777 open
"$EXPORTER" --dir open --listen 127.0.0.1:0 >out.txt 2>err.txt
rc=$?
check "world-writable dir exits non-zero (rc $rc)" [ $rc -ne 0 ]
check "world-writable dir says so: $(cat err.txt)" grep -q "^ttft-exporter: .*open.*writable" err.txt

# --- usage
"$EXPORTER" --help >out.txt 2>&1
check "--help exits 0" [ $? -eq 0 ]
check "--help names --dir" grep -q -- "--dir DIR" out.txt
"$EXPORTER" --version >out.txt 2>&1
check "--version exits 0" [ $? -eq 0 ]
check "--version: $(cat out.txt)" grep -q "^ttft-exporter (libttft) [0-9]" out.txt
"$EXPORTER" --listen 127.0.0.1:0 >out.txt 2>err.txt
check "no --dir exits 1" [ $? -eq 1 ]
"$EXPORTER" --dir dir --bogus >out.txt 2>err.txt
check "unknown option exits 1" [ $? -eq 1 ]
"$EXPORTER" --dir dir --listen nonsense >out.txt 2>err.txt
rc=$?
check "bad address exits non-zero (rc $rc): $(cat err.txt)" [ $rc -ne 0 ] && grep -q "not an address" err.txt

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
