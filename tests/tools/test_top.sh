#!/bin/sh
# test_top.sh — tools/ttft-top as a person uses it.
#   usage: test_top.sh TTFT_TOP TOP_SERVER WORKDIR
# TOP_SERVER (tests/tools/top_server.c) serves a known workload. Checks:
#  1. batch JSON frames (-b -n 3 --json) against the exact workload: frame 1
#     is everything since the start (workload A), workload B lands between
#     frames 1 and 3, frames 2 and 3 add up to it exactly; rates are the
#     counts over the window's own seconds; the long window of frame 3 is A+B;
#  2. a restart of the server (a new registry on the same port): a frame
#     with live=false and no figures while it is down, then restart=true,
#     the window since the restart, and no negative rate anywhere;
#  3. fake endpoints: garbage, a newer snapshot version, a silent one, none:
#     a status line that says which, exit status 3;
#  4. the screen in tmux (100x40): class rows, a stall cause, the slow
#     request's id, the keys (w, p, s, h), a RESTART line and NOT LIVE
#     status, and q / SIGINT leaving the terminal restored (exit 0, the
#     normal screen back).
# tmux and python3 are needed; under CI (CI set) a missing one fails.
set -u
TOP=$1
SERVER=$2
WORK=$3
rm -rf "$WORK"
mkdir -p "$WORK" || exit 1
cd "$WORK" || exit 1
missing=""
[ -x "$TOP" ] || missing="$missing ttft-top (not built: no curses library?)"
command -v tmux >/dev/null 2>&1 || missing="$missing tmux"
command -v python3 >/dev/null 2>&1 || missing="$missing python3"
if [ -n "$missing" ]; then
  echo "missing:$missing"
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
pids=""
TM="tmux -L ttft-top-test-$$"
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null; done
  $TM kill-server 2>/dev/null
}
trap cleanup EXIT

# serve OUT ARGS...: the server in the background ($spid), its port ($port)
serve() {
  out=$1
  shift
  "$SERVER" "$@" >"$out" 2>&1 &
  spid=$!
  pids="$pids $spid"
  port=""
  i=0
  while [ $i -lt 100 ] && [ -z "$port" ]; do
    port=$(sed -n 's/^port //p' "$out" 2>/dev/null)
    [ -z "$port" ] && sleep 0.1
    i=$((i + 1))
  done
  [ -n "$port" ] || { echo "server did not start: $(cat "$out")"; exit 1; }
}
# wait_lines FILE N: until FILE has N lines (at most 20 s)
wait_lines() {
  i=0
  while [ $i -lt 200 ]; do
    [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ] && return 0
    sleep 0.1
    i=$((i + 1))
  done
  return 1
}

# ---------------------------------------------------------------- 1. frames
serve srv1.out --port 0 --ack ack1
URL=http://127.0.0.1:$port
"$TOP" -b -n 3 -d 1.5 --json "$URL" >frames.json 2>frames.err &
tpid=$!
pids="$pids $tpid"
wait_lines frames.json 1 || fail "no first frame"
kill -USR1 "$spid"
wait_lines ack1 1 || fail "workload B was not recorded"
wait "$tpid"
check "batch frames exit 0 (every frame live)" test $? -eq 0
check "three frames" test "$(wc -l <frames.json)" -eq 3
python3 - frames.json <<'PY' || fail "frames against the workload"
import json, sys
f = [json.loads(l) for l in open(sys.argv[1])]
bad = []
def want(what, got, exp):
    if got != exp: bad.append("%s: expected %r, got %r" % (what, exp, got))
def cls(frame, win, name):
    return next(c for c in frame["windows"][win]["classes"] if c["name"] == name)
for i, fr in enumerate(f):
    want("frame %d live" % (i + 1), fr["live"], True)
    for w in fr["windows"]:
        for c in w["classes"]:
            r = c["begun"] / w["seconds"] if w["seconds"] > 0 else 0.0
            if abs(c["req_per_s"] - r) > 1e-5 * max(1.0, r):
                bad.append("frame %d %s %s req/s %r != begun/seconds %r" % (i + 1, w["name"], c["name"], c["req_per_s"], r))
            s = c["stalls"] / w["seconds"] if w["seconds"] > 0 else 0.0
            if abs(c["stalls_per_s"] - s) > 1e-5 * max(1.0, s):
                bad.append("frame %d stalls/s" % (i + 1))
            for k in ("begun", "completed", "cancelled", "req_per_s", "stalls", "stalls_per_s", "in_flight"):
                if c[k] < 0: bad.append("negative %s" % k)
# frame 1: workload A, since the start
w = f[0]["windows"][0]
want("frame 1 since_start", w["since_start"], True)
chat, batch = cls(f[0], 0, "chat"), cls(f[0], 0, "batch")
want("A chat begun", chat["begun"], 11)
want("A chat completed", chat["completed"], 10)
want("A chat in flight", chat["in_flight"], 1)
want("A chat stalls by cause", chat["stalls_by_cause"]["preempted"], 1)
want("A chat stalls", chat["stalls"], 1)
want("A chat ttft count", chat["ttft"]["count"], 11)
want("A batch begun", batch["begun"], 5)
want("A batch completed", batch["completed"], 5)
want("A batch tokens", batch["tokens"], 20)
want("A chat SLO attainment", chat["slo_attainment"], 0.9)
want("A prefill steps", w["engine_step"]["prefill"]["count"], 2)
want("A decode steps", w["engine_step"]["decode"]["count"], 48)
slow = [s for s in w["slowest"] if s["by"] == "ttft"][0]
want("slowest id", slow["id"], "req-slow-42")
want("slowest cause", slow["cause"], "preempted")
want("slowest ttft", slow["ttft_ns"], 3000000000)
want("slowest gap", slow["max_gap_ns"], 900000000)
# frames 2 and 3: workload B exactly, between them
for name, k, exp in (("chat", "begun", 6), ("chat", "completed", 6), ("batch", "begun", 4),
                     ("batch", "completed", 3), ("batch", "cancelled", 1), ("chat", "stalls", 0)):
    got = cls(f[1], 0, name)[k] + cls(f[2], 0, name)[k]
    want("B %s %s over frames 2+3" % (name, k), got, exp)
for i in (1, 2):
    want("frame %d is a delta" % (i + 1), f[i]["windows"][0]["since_start"], False)
want("chat in flight after B", cls(f[2], 0, "chat")["in_flight"], 1)
# the long window (60 s) of frame 3 reaches the start: A + B
want("long window chat begun", cls(f[2], 1, "chat")["begun"], 17)
want("long window batch begun", cls(f[2], 1, "batch")["begun"], 9)
for b in bad: print(b)
sys.exit(1 if bad else 0)
PY

# ---------------------------------------------------------------- 2. restart
"$TOP" -b -n 14 -d 0.5 --json "$URL" >restart.json 2>restart.err &
tpid=$!
pids="$pids $tpid"
wait_lines restart.json 2 || fail "no frames before the restart"
kill "$spid"
wait "$spid" 2>/dev/null
n=$(wc -l <restart.json)
wait_lines restart.json $((n + 2)) || fail "no frames while down"
serve srv2.out --port "$port"
wait "$tpid"
check "restart: the last frame is live (exit 0)" test $? -eq 0
python3 - restart.json <<'PY' || fail "restart frames"
import json, sys
f = [json.loads(l) for l in open(sys.argv[1])]
bad = []
down = [fr for fr in f if not fr["live"]]
if not down: bad.append("no frame while the server was down")
for fr in down:
    if fr["windows"] is not None: bad.append("figures in a frame that is not live")
    if "connect" not in fr["status"]: bad.append("down status says %r" % fr["status"])
rs = [i for i, fr in enumerate(f) if fr["restart"]]
if len(rs) != 1: bad.append("expected one restart frame, got %r" % rs)
else:
    fr = f[rs[0]]
    w = fr["windows"][0]
    if not w["since_start"]: bad.append("the restart frame's window is not since the restart")
    chat = next(c for c in w["classes"] if c["name"] == "chat")
    if chat["begun"] != 11: bad.append("after restart chat begun %r" % chat["begun"])
    if fr["restarts"] != 1: bad.append("restarts %r" % fr["restarts"])
for fr in f:
    for w in fr["windows"] or []:
        for c in w["classes"]:
            for k in ("req_per_s", "stalls_per_s", "begun"):
                if c[k] < 0: bad.append("negative %s" % k)
for b in bad: print(b)
sys.exit(1 if bad else 0)
PY

# ---------------------------------------------------------------- 3. bad endpoints
bad_endpoint() { # MODE EXPECTED-IN-STATUS
  serve fake_$1.out --garbage "$1" --port 0
  "$TOP" -b -n 1 -d 0.5 --json "http://127.0.0.1:$port" >fake_$1.json 2>&1
  rc=$?
  check "$1 endpoint exits 3 (got $rc)" test $rc -eq 3
  check "$1 endpoint status says '$2': $(cat fake_$1.json)" grep -q "\"live\":false,\"status\":\"[^\"]*$2" fake_$1.json
  "$TOP" -b -n 1 -d 0.5 "http://127.0.0.1:$port" >fake_$1.txt 2>&1
  check "$1 endpoint: a status line in text" grep -q "^status: .*$2" fake_$1.txt
  kill "$spid"
  wait "$spid" 2>/dev/null
}
bad_endpoint text "not a snapshot (garbage"
bad_endpoint newer "snapshot version 9 is newer"
bad_endpoint silent "no answer within"
"$TOP" -b -n 1 -d 0.5 --json "http://127.0.0.1:$port" >down.json 2>&1
rc=$?
check "a port nobody serves exits 3" test $rc -eq 3
check "connection refused is said" grep -q "Connection refused" down.json
"$TOP" "ftp://x" >/dev/null 2>usage.err
check "a bad URL exits 2" test $? -eq 2
"$TOP" --frobnicate >/dev/null 2>&1
check "bad usage exits 1" test $? -eq 1

# ---------------------------------------------------------------- 4. the screen
serve srv3.out --port 0
URL=http://127.0.0.1:$port
cat >run.sh <<EOS
#!/bin/sh
trap : INT
echo before-ttft-top
"$TOP" -d 0.5 "$URL"
echo "ttft-top exited \$?"
sleep 120
EOS
chmod +x run.sh
$TM new-session -d -s top -x 100 -y 40 "TERM=screen LANG=C.UTF-8 sh $WORK/run.sh"
# screen_has TEXT: the pane shows TEXT within 10 s
screen_has() {
  i=0
  while [ $i -lt 100 ]; do
    $TM capture-pane -p -t top >screen.txt 2>/dev/null
    grep -q -- "$1" screen.txt && return 0
    sleep 0.1
    i=$((i + 1))
  done
  echo "--- the screen, without '$1':" >&2
  cat screen.txt >&2
  return 1
}
check "screen: the title" screen_has "ttft-top  $URL"
check "screen: a chat class row" screen_has "^chat  "
check "screen: a batch class row" screen_has "^batch  "
check "screen: the stall cause" screen_has "preempted"
check "screen: the slow request's id" screen_has "req-slow-42"
check "screen: the key line" screen_has "q quit  s sort:name"
check "screen: in the alternate screen" test "$($TM display -p -t top '#{alternate_on}')" = 1
$TM send-keys -t top w
check "key w: the long window" screen_has "window:long"
$TM send-keys -t top s
check "key s: sort by req/s" screen_has "sort:req/s"
$TM send-keys -t top c
check "key c: a class picked" screen_has "class:chat\|class:batch"
$TM send-keys -t top p
check "key p: paused" screen_has "\[PAUSED\]"
$TM send-keys -t top p
$TM send-keys -t top h
check "key h: help" screen_has "ttft-top keys"
$TM send-keys -t top x
check "any key leaves the help" screen_has "q quit"
kill "$spid"
wait "$spid" 2>/dev/null
check "screen: the source down is said" screen_has "NOT LIVE"
serve srv4.out --port "$port"
check "screen: the restart line" screen_has "RESTART at"
$TM send-keys -t top q
check "q: ttft-top exits 0" screen_has "ttft-top exited 0"
check "q: the normal screen is back" screen_has "before-ttft-top"
check "q: out of the alternate screen" test "$($TM display -p -t top '#{alternate_on}')" = 0
$TM kill-session -t top
# SIGINT (C-c in the terminal) restores it too; NO_COLOR and a non-UTF-8 locale
$TM new-session -d -s top -x 80 -y 30 "TERM=screen NO_COLOR=1 LANG=C LC_ALL=C sh $WORK/run.sh"
check "80 columns, C locale: class rows" screen_has "^chat  "
check "80 columns: TTFT99 still shown" screen_has "TTFT99"
$TM send-keys -t top C-c
check "C-c: ttft-top exits 0" screen_has "ttft-top exited 0"
check "C-c: out of the alternate screen" test "$($TM display -p -t top '#{alternate_on}')" = 0
$TM kill-server 2>/dev/null

echo "test_top: $passes passed, $fails failed"
[ $fails -eq 0 ]
