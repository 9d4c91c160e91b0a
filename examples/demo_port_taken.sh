#!/bin/sh
# ttft-demo --port N on a port another process holds: a loud error naming
# the address and the reason, exit 1, and no endpoint on another port
# (issue 32.5: the demo used to move to a free port without a word).
# Usage: demo_port_taken.sh path/to/ttft-demo
demo=$1
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
# the first demo takes a free port and holds it for a while
"$demo" --seconds 0.2 --no-experiment --port 0 --hold 20 >"$dir/first" 2>&1 &
first=$!
port=
i=0
while [ $i -lt 200 ] && [ -z "$port" ]; do
  port=$(sed -n 's|^serving http://127\.0\.0\.1:\([0-9][0-9]*\)/metrics.*|\1|p' "$dir/first")
  [ -n "$port" ] || sleep 0.1
  i=$((i + 1))
done
if [ -z "$port" ]; then
  kill "$first" 2>/dev/null; wait "$first"
  echo "FAIL: the first demo never said its port:"; cat "$dir/first"; exit 1
fi
"$demo" --seconds 0.2 --no-experiment --port "$port" >"$dir/out" 2>"$dir/err"
rc=$?
kill "$first" 2>/dev/null
wait "$first"
echo "second demo on port $port: exit $rc"; cat "$dir/err"
ok=1
[ "$rc" -eq 1 ] || { echo "FAIL: exit $rc, want 1"; ok=0; }
# (strerror(EADDRINUSE): glibc "Address already in use", musl "Address in use")
grep -qE "ERROR: cannot serve http://127.0.0.1:$port/metrics: Address (already )?in use" "$dir/err" ||
  { echo "FAIL: no error naming the address and the reason"; ok=0; }
if grep -q "^serving" "$dir/out"; then echo "FAIL: it served anyway:"; cat "$dir/out"; ok=0; fi
[ $ok -eq 1 ] && echo "PASS: a taken port is refused loudly"
