#!/bin/sh
# test_capacity.sh — ttft-report --capacity over a synthetic sweep whose
# answer is known exactly (tests/tools/mkcap.c: class "chat", TPOT budget
# and token deadline 50 ms, 11 tokens per stream, 10 s per run):
#   r1: 100 smooth (20 ms gaps)            1100 tokens  110.0/s  fluid 100/100
#   r2: 200 smooth + 1 early stall          2211 tokens  221.1/s  fluid 200/201 (99.5 %)
#   r3: 300 smooth + 10 early stalls        3410 tokens  341.0/s  fluid 300/310 (96.8 %),
#       TPOT p90 still 20 ms (a stalled stream's TPOT is 33 ms)
#   r4: 400 streams at 60 ms gaps           4400 tokens  440.0/s  TPOT over, none fluid
# fluid token generation rate 221.1 tokens/s (r2); TPOT p90 capacity
# 341.0 tokens/s (r3): the two disagree at r3. Then --diff's fluidity rows
# (fluid_share, deadline_miss) between r2 and r3, and none without deadlines.
#   usage: test_capacity.sh TTFT_REPORT MKCAP WORKDIR
set -u
REPORT=$1
MKCAP=$2
WORK=$3
rm -rf "$WORK"
mkdir -p "$WORK" || exit 1
cd "$WORK" || exit 1
fails=0
passes=0
ok() { passes=$((passes + 1)); }
fail() {
  fails=$((fails + 1))
  echo "FAIL: $*" >&2
}
expect_line() { # FILE EXACT-LINE
  if grep -qxF -e "$2" "$1"; then ok; else fail "$1: expected the line '$2'"; sed 's/^/  got: /' "$1" >&2; fi
}

"$MKCAP" r1.ttfs 10000 100 0 20 || fail "mkcap r1"
"$MKCAP" r2.ttfs 10000 200 1 20 || fail "mkcap r2"
"$MKCAP" r3.ttfs 10000 300 10 20 || fail "mkcap r3"
"$MKCAP" r4.ttfs 10000 400 0 60 || fail "mkcap r4"

# runs in any order: sorted by token rate
"$REPORT" --capacity r4.ttfs r2.ttfs r1.ttfs r3.ttfs >out.txt 2>err.txt
[ $? -eq 0 ] && ok || fail "--capacity exit status"
expect_line out.txt "r1.ttfs                         110.0    20.0 ms    50.0 ms      ok        100/100   100.0%    yes"
expect_line out.txt "r2.ttfs                         221.1    20.0 ms    50.0 ms      ok        200/201    99.5%    yes"
expect_line out.txt "r3.ttfs                         341.0    20.0 ms    50.0 ms      ok        300/310    96.8%     no"
expect_line out.txt "r4.ttfs                         440.0    60.0 ms    50.0 ms    over          0/400     0.0%     no"
expect_line out.txt "fluid token generation rate: 221.1 tokens/s (r2.ttfs; fluid_min 0.90)"
expect_line out.txt "TPOT p90 capacity:           341.0 tokens/s (r3.ttfs; budget 50.0 ms)"
expect_line out.txt "  r3.ttfs: TPOT p90 within budget at 341.0 tokens/s, but only 96.8 % of the judged requests"
# the rows come in rate order
order=$(grep -o '^r[0-9]\.ttfs' out.txt | tr '\n' ' ')
[ "$order" = "r1.ttfs r2.ttfs r3.ttfs r4.ttfs " ] && ok || fail "row order: $order"

# a lower target admits r3: 96.8 % >= 95 %
"$REPORT" --capacity --fluid-target 95 --class chat r1.ttfs r2.ttfs r3.ttfs r4.ttfs >out95.txt 2>&1
expect_line out95.txt "fluid token generation rate: 341.0 tokens/s (r3.ttfs; fluid_min 0.90)"
# capacity is the last passing run before the first failing one: with r1
# failing (a sweep whose slowest run is already over) nothing is reached
"$REPORT" --capacity r4.ttfs >out4.txt 2>&1
expect_line out4.txt "fluid token generation rate: - (not reached at the slowest run)"

# usage errors: exit 1
"$REPORT" --capacity >/dev/null 2>&1
[ $? -eq 1 ] && ok || fail "--capacity without runs: exit 1"
"$REPORT" --capacity --format json r1.ttfs >/dev/null 2>&1
[ $? -eq 1 ] && ok || fail "--capacity --format: exit 1"
"$REPORT" --capacity --fluid-target 0 r1.ttfs >/dev/null 2>&1
[ $? -eq 1 ] && ok || fail "--fluid-target 0: exit 1"
"$REPORT" --class chat r1.ttfs >/dev/null 2>&1
[ $? -eq 1 ] && ok || fail "--class without --capacity: exit 1"
# input errors: exit 2
"$REPORT" --capacity --class nosuch r1.ttfs >/dev/null 2>err.txt
[ $? -eq 2 ] && ok || fail "unknown class: exit 2"
grep -q "no class 'nosuch'" err.txt && ok || fail "unknown class: message"
printf 'garbage' >bad.ttfs
"$REPORT" --capacity r1.ttfs bad.ttfs >/dev/null 2>&1
[ $? -eq 2 ] && ok || fail "corrupt run: exit 2"

# --diff between two runs: the fluidity rows (1.3), fluid 200 of 201
# (99.50 %) against 300 of 310 (96.77 %); deadlines missed 3 of 2012
# against 30 of 3120
"$REPORT" --diff r2.ttfs r3.ttfs >diff.txt 2>&1
grep -q '^  chat  *fluid_share  *99.50 % \[.*96.77 % \[' diff.txt && ok || { fail "--diff fluid_share row"; cat diff.txt >&2; }
grep -q '^  chat  *deadline_miss  *0.15 % \[.*0.96 % \[' diff.txt && ok || fail "--diff deadline_miss row"
# a diff of runs without token deadlines has no fluidity rows
"$MKCAP" none.ttfs 10000 0 0 20 || fail "mkcap none"
"$REPORT" --diff none.ttfs none.ttfs >diff0.txt 2>&1
grep -q 'fluid_share' diff0.txt && fail "fluidity rows without token deadlines" || ok

echo "test_capacity: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
