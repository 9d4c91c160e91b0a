#!/bin/sh
# test_report.sh — ttft-report end to end.
#   usage: test_report.sh TTFT_REPORT MKSNAP WORKDIR
# Writes snapshots of known workloads with mksnap, runs the tool over them
# and checks: text/JSON/Prometheus output of a merge, binary concatenation
# and base64 log lines as input, --delta, --diff flagging a regression
# (and not flagging an identical pair), --svg well-formed (xmllint), exit
# codes for bad input (2) and bad usage (1). Needs python3 (JSON) and
# xmllint (libxml2-utils); under CI a missing tool fails the test.
set -u
REPORT=$1
MKSNAP=$2
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
# expect_rc WANT CMD... : run CMD, stdout to out.txt, stderr to err.txt
expect_rc() {
  want=$1
  shift
  "$@" >out.txt 2>err.txt
  got=$?
  if [ "$got" -eq "$want" ]; then ok; else
    fail "'$*': expected exit $want, got $got"
    sed 's/^/  stderr: /' err.txt >&2
  fi
}
expect_grep() { # FILE PATTERN [what]
  if grep -q -e "$2" "$1"; then ok; else fail "${3:-$1}: expected to find '$2'"; fi
}
expect_no_grep() {
  if grep -q -e "$2" "$1"; then fail "${3:-$1}: did not expect '$2'"; else ok; fi
}
need_tool() { # NAME: present, or FAIL under CI / note otherwise
  if command -v "$1" >/dev/null 2>&1; then return 0; fi
  if [ -n "${CI:-}" ]; then fail "$1 is missing (CI=$CI)"; else echo "note: $1 not installed, check skipped"; fi
  return 1
}
count_of() { # mksnap-output-file snapshot-path -> ttft_count
  sed -n "s|^$2 ttft_count=\([0-9]*\) .*|\1|p" "$1"
}
json_get() { # FILE python-expression-on-d
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}

# ------------------------------------------------------------ snapshots
"$MKSNAP" --seed 1 --requests 600 --classes chat,default a.ttfs a_later.ttfs >snaps.txt || fail "mksnap a"
"$MKSNAP" --seed 2 --requests 400 --classes chat,code b.ttfs >>snaps.txt || fail "mksnap b"
"$MKSNAP" --seed 2 --requests 400 --classes chat,code --base64 b.log >>snaps.txt || fail "mksnap b.log"
"$MKSNAP" --seed 1 --requests 600 --classes chat,default --scale 1.5 slow.ttfs >>snaps.txt || fail "mksnap slow"
na=$(count_of snaps.txt a.ttfs)
nlater=$(count_of snaps.txt a_later.ttfs)
nb=$(count_of snaps.txt b.ttfs)
[ -n "$na" ] && [ -n "$nb" ] && [ -n "$nlater" ] || { fail "mksnap output"; na=0; nb=0; nlater=0; }
echo "snapshots: a=$na b=$nb a_later=$nlater TTFT observations"

# ------------------------------------------------------------ merge: text
expect_rc 0 "$REPORT" a.ttfs b.ttfs
cp out.txt merged.txt
expect_grep merged.txt "chat" "text report"
expect_grep merged.txt "code" "text report (class only in b)"
expect_grep merged.txt "server_arrival" "text report (start point)"

# the same two snapshots concatenated on stdin
cat a.ttfs b.ttfs | "$REPORT" --format json - >cat.json 2>err.txt || fail "concatenated stdin: exit $?"
# a log file holding a base64 line
expect_rc 0 "$REPORT" --format json b.log
cp out.txt b64.json

if need_tool python3; then
  expect_rc 0 "$REPORT" --format json a.ttfs b.ttfs
  cp out.txt merged.json
  got=$(json_get merged.json "d['metrics']['ttft']['count']" 2>&1)
  want=$((na + nb))
  if [ "$got" = "$want" ]; then ok; else fail "merged JSON ttft count: expected $want, got $got"; fi
  got=$(json_get merged.json "','.join(c['name'] for c in d['classes'])" 2>&1)
  if [ "$got" = "default,chat,code" ]; then ok; else fail "merged JSON classes: expected default,chat,code, got $got"; fi
  got=$(json_get cat.json "d['metrics']['ttft']['count']" 2>&1)
  if [ "$got" = "$want" ]; then ok; else fail "concatenated stdin ttft count: expected $want, got $got"; fi
  got=$(json_get b64.json "d['metrics']['ttft']['count']" 2>&1)
  if [ "$got" = "$nb" ]; then ok; else fail "base64 log ttft count: expected $nb, got $got"; fi
  # merged percentiles equal the percentiles of the concatenation, not an average
  p1=$(json_get merged.json "d['metrics']['itl']['p99']")
  p2=$(json_get cat.json "d['metrics']['itl']['p99']")
  if [ -n "$p1" ] && [ "$p1" = "$p2" ]; then ok; else fail "merged p99 differs: $p1 vs $p2"; fi

  # --delta: the later snapshot minus the earlier one of the same process
  expect_rc 0 "$REPORT" --delta a.ttfs a_later.ttfs --format json
  got=$(json_get out.txt "d['metrics']['ttft']['count']" 2>&1)
  want=$((nlater - na))
  if [ "$got" = "$want" ]; then ok; else fail "--delta ttft count: expected $want, got $got"; fi
fi
expect_rc 2 "$REPORT" --delta a_later.ttfs a.ttfs # wrong order
expect_rc 2 "$REPORT" --delta a.ttfs b.ttfs       # two processes (b has fewer requests)

# ------------------------------------------------------------ prometheus
expect_rc 0 "$REPORT" --format prometheus a.ttfs b.ttfs
expect_grep out.txt "gen_ai_server_time_to_first_token_seconds_bucket" "prometheus output"
expect_grep out.txt 'class="code"' "prometheus output"
expect_rc 0 "$REPORT" --format openmetrics a.ttfs
expect_grep out.txt "^# EOF" "openmetrics output"

# ------------------------------------------------------------ diff
expect_rc 0 "$REPORT" --diff a.ttfs slow.ttfs
cp out.txt diff.txt
expect_grep diff.txt "REGRESSION" "--diff of a 1.5x slower run"
expect_grep diff.txt "^  ttft  *p99 .*<< REGRESSION" "--diff ttft p99 row"
expect_grep diff.txt "regressions worse than 5.0 %" "--diff summary"
expect_rc 3 "$REPORT" --diff a.ttfs slow.ttfs --fail-on-regression
expect_rc 0 "$REPORT" --diff a.ttfs a.ttfs --fail-on-regression
expect_grep out.txt "no regressions worse than 5.0 %" "--diff of a snapshot with itself"
expect_no_grep out.txt "<< REGRESSION" "--diff of a snapshot with itself"
# a threshold above the change: nothing flagged
expect_rc 0 "$REPORT" --diff a.ttfs slow.ttfs --threshold 1000 --fail-on-regression
# the faster direction is an improvement, not a regression
expect_rc 0 "$REPORT" --diff slow.ttfs a.ttfs
expect_grep out.txt "(better)" "--diff of a faster run"
expect_no_grep out.txt "<< REGRESSION" "--diff of a faster run"

# ------------------------------------------------------------ svg
expect_rc 0 "$REPORT" --svg merged.svg a.ttfs b.ttfs
expect_rc 0 "$REPORT" --diff a.ttfs slow.ttfs --svg diff.svg
expect_rc 0 "$REPORT" --svg - a.ttfs
cp out.txt stdout.svg
for f in merged.svg diff.svg stdout.svg; do
  if need_tool xmllint; then
    if xmllint --noout "$f" 2>err.txt; then ok; else fail "$f is not well-formed XML: $(cat err.txt)"; fi
  fi
  expect_grep "$f" "<svg xmlns=\"http://www.w3.org/2000/svg\"" "$f"
  expect_grep "$f" "<polyline" "$f (curves)"
  expect_grep "$f" "p99 " "$f (p99 markers)"
  expect_no_grep "$f" "<script" "$f"
  expect_no_grep "$f" "href=" "$f (external references)"
done
expect_grep merged.svg "TTFT" "svg panels"
expect_grep merged.svg "TPOT" "svg panels"
expect_grep merged.svg "ITL" "svg panels"
expect_grep merged.svg "chat SLO 300 ms" "svg SLO budget line label"
expect_grep merged.svg "chat p50 " "svg direct curve label"
expect_grep merged.svg "code p99 " "svg direct curve label"
expect_grep diff.svg "old p50 " "diff svg"

# ------------------------------------------------------------ bad input
printf 'not a snapshot\n' >garbage.txt
expect_rc 2 "$REPORT" garbage.txt
expect_grep err.txt "garbage.txt" "error names the file"
head -c 100 a.ttfs >truncated.ttfs
expect_rc 2 "$REPORT" truncated.ttfs
expect_grep err.txt "truncated.ttfs: malformed, truncated or corrupted encoding" "error message"
cp a.ttfs flipped.ttfs
printf 'X' | dd of=flipped.ttfs bs=1 seek=200 conv=notrunc 2>/dev/null
expect_rc 2 "$REPORT" flipped.ttfs
expect_grep err.txt "TTFT_ECORRUPT" "error names the code"
: >empty.ttfs
expect_rc 2 "$REPORT" empty.ttfs
expect_rc 2 "$REPORT" does-not-exist.ttfs
expect_grep err.txt "does-not-exist.ttfs" "error names the file"
expect_rc 2 "$REPORT" a.ttfs truncated.ttfs # one bad file fails the merge
sed 's/ttft-snapshot=VFRGU/ttft-snapshot=VFRGUxx/' b.log >badline.log
expect_rc 2 "$REPORT" badline.log
expect_rc 2 "$REPORT" --diff a.ttfs garbage.txt

# ------------------------------------------------------------ usage
expect_rc 1 "$REPORT"
expect_rc 1 "$REPORT" --format yaml a.ttfs
expect_rc 1 "$REPORT" --bogus a.ttfs
expect_rc 1 "$REPORT" --diff a.ttfs
expect_rc 1 "$REPORT" --diff a.ttfs b.ttfs c.ttfs
expect_rc 1 "$REPORT" --threshold abc --diff a.ttfs b.ttfs
expect_rc 0 "$REPORT" --help
expect_grep out.txt "usage:" "--help"

echo "test_report.sh: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
