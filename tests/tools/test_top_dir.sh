#!/bin/sh
# test_top_dir.sh — `ttft-top --dir` over a shared directory of processes.
#   usage: test_top_dir.sh TTFT_TOP WORKER WORKDIR
# WORKER (tests/tools/top_dir_worker.c) is one process publishing a known
# workload (a, b, c, d) into the directory. Checks:
#  1. three processes (a, b, c) in a fresh 0700 directory under /dev/shm:
#     the batch JSON frames (-b -n 2 --json) are their exact union
#     (requests per class, a class only one process has, tokens, a stall and
#     its cause, SLO attainment, engine steps, b's slow request id), the
#     header's process count; the second frame's refresh window is empty;
#  2. between frames b exits (SIGTERM), c is killed (SIGKILL) and d starts:
#     no frame restarts or has a negative figure (the gathered view never
#     falls), b's and c's counts and classes stay, d's are counted in the
#     refresh windows, exits are counted, the processes gauge follows, and
#     b's open request leaves the in-flight figures (per class too);
#  3. an empty directory (live, "no process has published here yet",
#     exit 0), a missing and a group-writable one (exit 2 with the reason),
#     one removed while watched (a status line, exit 3);
#  4. the screen in tmux: the class rows, "processes N (M exited)", a
#     process that starts while watched, q restoring the terminal.
# tmux and python3 are needed; under CI (CI set) a missing one fails.
set -u
TOP=$1
WORKER=$2
WORK=$3
rm -rf "$WORK"
mkdir -p "$WORK" || exit 1
cd "$WORK" || exit 1
missing=""
[ -x "$TOP" ] || missing="$missing ttft-top (not built: no curses library?)"
command -v tmux >/dev/null 2>&1 || missing="$missing tmux"
command -v python3 >/dev/null 2>&1 || missing="$missing python3"
[ -d /dev/shm ] && [ -w /dev/shm ] || missing="$missing a writable /dev/shm"
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
dirs=""
TM="tmux -L ttft-top-dir-test-$$"
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null; done
  $TM kill-server 2>/dev/null
  for d in $dirs; do rm -rf "$d"; done
}
trap cleanup EXIT
# newdir: a fresh 0700 directory under /dev/shm in $dir
newdir() {
  dir=$(mktemp -d /dev/shm/ttft-top-dir.XXXXXX) || { echo "mktemp failed"; exit 1; }
  dirs="$dirs $dir"
  chmod 700 "$dir"
}
# start DIR NAME WORKLOAD: a worker in the background ($wpid), once it
# has published its workload
start() {
  rm -f "ready.$2"
  "$WORKER" "$1" "$2" "$3" "ready.$2" >"worker.$2.out" 2>&1 &
  wpid=$!
  pids="$pids $wpid"
  i=0
  while [ $i -lt 200 ]; do
    grep -q ready "ready.$2" 2>/dev/null && return 0
    sleep 0.1
    i=$((i + 1))
  done
  echo "worker $2 did not publish: $(cat "worker.$2.out")"
  exit 1
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

# ---------------------------------------------------------------- 1. the union
newdir
D=$dir
start "$D" api-0 a
pa=$wpid
start "$D" api-1 b
pb=$wpid
start "$D" dp-0 c
pc=$wpid
"$TOP" --dir "$D" -b -n 2 -d 0.5 --json >union.json 2>union.err
check "union: exit 0 (every frame live) $(cat union.err)" test $? -eq 0
check "union: two frames" test "$(wc -l <union.json)" -eq 2
python3 - union.json <<'PY' || fail "frames against the union of the workloads"
import json, sys
f = [json.loads(l) for l in open(sys.argv[1])]
bad = []
def want(what, got, exp):
    if got != exp: bad.append("%s: expected %r, got %r" % (what, exp, got))
def near(what, got, exp):
    if got is None or abs(got - exp) > 1e-5: bad.append("%s: expected %r, got %r" % (what, exp, got))
def classes(w): return {c["name"]: c for c in w["classes"]}
for i, fr in enumerate(f):
    want("frame %d live" % (i + 1), fr["live"], True)
    want("frame %d restarts" % (i + 1), fr["restarts"], 0)
w = f[0]["windows"][0]
want("frame 1 since_start", w["since_start"], True)
want("processes", w["processes"], 3)
want("processes exited", w["processes_exited"], 0)
want("in flight", w["in_flight"], 1)
c = classes(w)
want("class names", sorted(n for n in c if n != "default"), ["batch", "chat", "embed"])
for name, k, exp in (("chat", "begun", 8), ("chat", "completed", 7), ("chat", "in_flight", 1),
                     ("chat", "tokens", 45), ("chat", "stalls", 1), ("batch", "begun", 8),
                     ("batch", "completed", 7), ("batch", "cancelled", 1), ("batch", "tokens", 29),
                     ("batch", "in_flight", 0), ("embed", "begun", 2), ("embed", "completed", 2)):
    want("%s %s" % (name, k), c[name][k], exp)
want("chat stall cause", c["chat"]["stalls_by_cause"]["preempted"], 1)
want("chat ttft count", c["chat"]["ttft"]["count"], 8)
near("chat SLO attainment 6/7", c["chat"]["slo_attainment"], 6 / 7)
want("decode steps", w["engine_step"]["decode"]["count"], 45)
slow = [s for s in w["slowest"] if s["by"] == "ttft"]
if not slow: bad.append("no slowest request")
else:
    want("slowest id", slow[0]["id"], "req-slow-7")
    want("slowest class", slow[0]["class"], "chat")
    want("slowest ttft", slow[0]["ttft_ns"], 2500000000)
    want("slowest cause", slow[0]["cause"], "preempted")
    want("slowest gap", slow[0]["max_gap_ns"], 900000000)
# frame 2: nothing happened in between
w = f[1]["windows"][0]
want("frame 2 is a delta", w["since_start"], False)
want("frame 2 processes", w["processes"], 3)
for n, cl in classes(w).items():
    for k in ("begun", "completed", "cancelled", "tokens", "stalls"):
        want("frame 2 %s %s" % (n, k), cl[k], 0)
want("frame 2 chat still in flight", classes(w)["chat"]["in_flight"], 1)
for b in bad: print(b)
sys.exit(1 if bad else 0)
PY
"$TOP" --dir "$D" -b -n 1 >union.txt 2>&1
check "text frame: the process count in the header" grep -q "^ttft-top  dir $D  at .*  processes 3$" union.txt
check "text frame: the slow request" grep -q "^req-slow-7 " union.txt

# ---------------------------------------------------------------- 2. exits and starts
"$TOP" --dir "$D" -b -n 5 -d 1 --json >churn.json 2>churn.err &
tpid=$!
pids="$pids $tpid"
wait_lines churn.json 1 || fail "no first frame"
kill -TERM "$pb"
wait "$pb"
check "api-1 exits 0 on SIGTERM" test $? -eq 0
kill -KILL "$pc"
wait "$pc" 2>/dev/null
start "$D" dp-1 d
pd=$wpid
check "the changes came before the last frame" test "$(wc -l <churn.json)" -lt 5
wait "$tpid"
check "churn: exit 0 $(cat churn.err)" test $? -eq 0
python3 - churn.json <<'PY' || fail "frames across an exit, a kill and a start"
import json, sys
f = [json.loads(l) for l in open(sys.argv[1])]
bad = []
def want(what, got, exp):
    if got != exp: bad.append("%s: expected %r, got %r" % (what, exp, got))
def classes(w): return {c["name"]: c for c in w["classes"]}
want("five frames", len(f), 5)
for i, fr in enumerate(f):
    want("frame %d live" % (i + 1), fr["live"], True)
    want("frame %d restart" % (i + 1), fr["restart"], False)
    want("frame %d restarts" % (i + 1), fr["restarts"], 0)
    for w in fr["windows"] or []:
        for c in w["classes"]:
            for k in ("begun", "completed", "cancelled", "tokens", "stalls", "req_per_s",
                      "stalls_per_s", "in_flight"):
                if c[k] < 0: bad.append("frame %d %s %s %s negative" % (i + 1, w["name"], c["name"], k))
want("frame 1 chat begun (the union)", classes(f[0]["windows"][0])["chat"]["begun"], 8)
# the refresh windows of frames 2..5 add up to what changed
tot = {}
exited = 0
for fr in f[1:]:
    w = fr["windows"][0]
    want("a refresh window is a delta", w["since_start"], False)
    exited += w["processes_exited"]
    for n, c in classes(w).items():
        for k in ("begun", "completed", "cancelled", "stalls"):
            tot[(n, k)] = tot.get((n, k), 0) + c[k]
for (n, k), exp in ((("chat", "begun"), 2), (("chat", "completed"), 2), (("rerank", "begun"), 3),
                    (("rerank", "completed"), 3), (("embed", "begun"), 0), (("batch", "begun"), 0),
                    (("batch", "cancelled"), 0), (("chat", "stalls"), 0)):
    want("frames 2..5 %s %s" % (n, k), tot.get((n, k)), exp)
want("exits counted in the windows", exited, 2)
last = f[-1]["windows"][0]
c = classes(last)
want("last: processes", last["processes"], 2)
want("last: in flight (api-1's open request left)", last["in_flight"], 0)
want("last: chat in flight", c["chat"]["in_flight"], 0)
for n in ("chat", "batch", "embed", "rerank"):
    if n not in c: bad.append("class %s missing from the last frame" % n)
# the long window of the last frame: everything (the source is young) or
# the sum of the refresh windows since frame 1
lw = f[-1]["windows"][1]
lc = classes(lw)
if lw["since_start"]:
    for (n, k), exp in ((("chat", "begun"), 10), (("batch", "begun"), 8), (("embed", "begun"), 2),
                        (("rerank", "begun"), 3), (("chat", "stalls"), 1)):
        want("long window %s %s" % (n, k), lc[n][k], exp)
    want("long window exits", lw["processes_exited"], 2)
else:
    for (n, k), v in tot.items():
        if n in lc and lc[n][k] > v: bad.append("long window %s %s above the refreshes" % (n, k))
for b in bad: print(b)
sys.exit(1 if bad else 0)
PY
"$TOP" --dir "$D" -b -n 1 >churn.txt 2>&1
check "text: processes 2 (2 exited)" grep -q "  processes 2 (2 exited)$" churn.txt
check "text: the exited process's class stays" grep -q "^embed  " churn.txt

# ---------------------------------------------------------------- 3. bad directories
newdir
E=$dir
"$TOP" --dir "$E" -b -n 1 --json >empty.json 2>&1
check "empty directory: exit 0" test $? -eq 0
check "empty directory: live, 0 processes: $(cat empty.json)" \
  grep -q '"live":true.*"processes":0,"processes_exited":0' empty.json
"$TOP" --dir "$E" -b -n 1 >empty.txt 2>&1
check "empty directory: the status line" \
  grep -q "^status: live (frame 1): no process has published here yet$" empty.txt
check "empty directory: processes 0" grep -q "  processes 0$" empty.txt
"$TOP" --dir "$E/none" -b -n 1 >missing.out 2>missing.err
check "missing directory: exit 2" test $? -eq 2
check "missing directory: said: $(cat missing.err)" \
  grep -q "^ttft-top: shared_dir $E/none: No such file or directory" missing.err
check "missing directory: nothing on stdout" test ! -s missing.out
chmod 770 "$E"
"$TOP" --dir "$E" -b -n 1 >open.out 2>open.err
check "group-writable directory: exit 2" test $? -eq 2
check "group-writable directory: said: $(cat open.err)" grep -q "is group- or world-writable" open.err
chmod 700 "$E"
"$TOP" --dir "$E" -b -n 4 -d 0.5 --json >gone.json 2>&1 &
tpid=$!
pids="$pids $tpid"
wait_lines gone.json 1 || fail "no first frame of the directory to remove"
rm -rf "$E"
wait "$tpid"
check "directory removed: exit 3" test $? -eq 3
check "directory removed: the status says so: $(tail -1 gone.json)" \
  sh -c "tail -1 gone.json | grep -q '\"live\":false,\"status\":\"gather: No such file or directory\"'"

# ---------------------------------------------------------------- 4. the screen
cat >run.sh <<EOS
#!/bin/sh
trap : INT
echo before-ttft-top
"$TOP" -d 0.5 --dir "$D"
echo "ttft-top exited \$?"
sleep 120
EOS
chmod +x run.sh
$TM new-session -d -s top -x 120 -y 40 "TERM=screen LANG=C.UTF-8 sh $WORK/run.sh"
screen_has() { # TEXT: the pane shows TEXT within 10 s
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
check "screen: the title with the process count" screen_has "ttft-top  dir $D  at .*  processes 2 (2 exited)"
check "screen: live" screen_has "^status: live"
check "screen: chat row" screen_has "^chat  "
check "screen: batch row" screen_has "^batch  "
check "screen: the exited process's class row" screen_has "^embed  "
check "screen: the late process's class row" screen_has "^rerank  "
start "$D" api-2 b
check "screen: a process that starts is counted" screen_has "processes 3 (2 exited)"
$TM send-keys -t top w
check "screen: the long window has its slow request" screen_has "req-slow-7"
$TM send-keys -t top q
check "q: ttft-top exits 0" screen_has "ttft-top exited 0"
check "q: the normal screen is back" screen_has "before-ttft-top"
$TM kill-server 2>/dev/null

echo "test_top_dir: $passes passed, $fails failed"
[ $fails -eq 0 ]
