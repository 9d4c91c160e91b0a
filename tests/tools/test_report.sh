#!/bin/sh
# test_report.sh — ttft-report end to end.
#   usage: test_report.sh TTFT_REPORT MKSNAP WORKDIR
# Writes snapshots of known workloads with mksnap, runs the tool over them
# and checks: text/JSON/Prometheus output of a merge, binary concatenation
# and base64 log lines as input, duplicates skipped and rates over the time
# covered, --delta, --diff flagging a significant regression (and neither
# an identical pair, nor samples of one distribution, nor changes too small
# a sample cannot tell: "not enough data"), --svg well-formed (xmllint),
# its tail axis, every SLO line, labels that do not overlap, its errors,
# exit codes for bad input (2) and bad usage (1). Needs python3 (JSON, SVG
# geometry) and xmllint (libxml2-utils); under CI a missing tool fails.
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
# large enough for p99 (>= 1000 per side) to be judged
"$MKSNAP" --seed 11 --requests 3000 --classes chat,batch big.ttfs >>snaps.txt || fail "mksnap big"
"$MKSNAP" --seed 12 --requests 3000 --classes chat,batch big2.ttfs >>snaps.txt || fail "mksnap big2"
"$MKSNAP" --seed 13 --requests 3000 --classes chat,batch --scale 1.5 bigslow.ttfs >>snaps.txt || fail "mksnap bigslow"
"$MKSNAP" --seed 14 --requests 3000 --classes chat,batch --scale 1.1 big10.ttfs >>snaps.txt || fail "mksnap big10"
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
# the header says what the time is: a merge covers its snapshots' windows,
# one snapshot of a registry the registry's age
expect_grep merged.txt "^libttft .* report over [0-9.]* [a-z]*: the time covered by the snapshots of this delta or merge$" \
  "text report of a merge: its interval explained"
expect_rc 0 "$REPORT" a.ttfs
expect_grep out.txt "^libttft .* report over [0-9.]* [^ ]*, the registry's age: from its creation to this snapshot$" \
  "text report of one snapshot: the registry's age"
# one unit style, the diff's too: a number, a space, a unit ("19.1 ms")
GLUED='[0-9]\(ns\|us\|µs\|ms\|s\|min\)\([^A-Za-z]\|$\)'
expect_no_grep merged.txt "$GLUED" "text report: a unit glued to its number"
expect_no_grep out.txt "$GLUED" "text report: a unit glued to its number"

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
# 1.5x slower, 3000 requests a side: the tail is judged and flagged
expect_rc 0 "$REPORT" --diff big.ttfs bigslow.ttfs
cp out.txt diff.txt
expect_grep diff.txt "REGRESSION" "--diff of a 1.5x slower run"
expect_grep diff.txt "^  ttft  *p99  .*<< REGRESSION" "--diff ttft p99 row"
expect_grep diff.txt "^  ttft  *p50  .*<< REGRESSION" "--diff ttft p50 row"
expect_grep diff.txt "^  ttft  *p99  *[0-9.]* [^ ]*s \[[0-9.]*, [0-9.]*\]" "--diff prints the confidence interval"
expect_no_grep diff.txt "$GLUED" "--diff: a unit glued to its number"
expect_grep diff.txt "regressions worse than 5.0 % and significant" "--diff summary"
expect_rc 3 "$REPORT" --diff big.ttfs bigslow.ttfs --fail-on-regression
expect_rc 0 "$REPORT" --diff a.ttfs a.ttfs --fail-on-regression
expect_grep out.txt "no regressions worse than 5.0 %" "--diff of a snapshot with itself"
expect_no_grep out.txt "<< REGRESSION" "--diff of a snapshot with itself"
# a threshold above the change: nothing flagged
expect_rc 0 "$REPORT" --diff big.ttfs bigslow.ttfs --threshold 1000 --fail-on-regression
# the faster direction is an improvement, not a regression
expect_rc 0 "$REPORT" --diff bigslow.ttfs big.ttfs
expect_grep out.txt "(better)" "--diff of a faster run"
expect_no_grep out.txt "<< REGRESSION" "--diff of a faster run"
# 10 % slower is still found with 3000 requests a side
expect_rc 3 "$REPORT" --diff big.ttfs big10.ttfs --fail-on-regression
expect_grep out.txt "^  tpot  *p50  .*<< REGRESSION" "--diff of a 1.1x slower run"
# two samples of one workload (different seeds): noise, never a regression
for pair in "big.ttfs big2.ttfs" "big2.ttfs big.ttfs" "a.ttfs a_later.ttfs"; do
  # shellcheck disable=SC2086
  expect_rc 0 "$REPORT" --diff $pair --fail-on-regression
  expect_grep out.txt "no regressions worse than 5.0 %" "--diff of two samples of one workload ($pair)"
done
for seed in 21 22 23 24 25; do
  "$MKSNAP" --seed $seed --requests 1500 --classes chat,batch s$seed.ttfs >/dev/null || fail "mksnap s$seed"
done
for pair in "21 22" "22 23" "23 24" "24 25" "25 21"; do
  set -- $pair
  expect_rc 0 "$REPORT" --diff s$1.ttfs s$2.ttfs --fail-on-regression
done
# a small sample (37 a side, as a short demo run) cannot judge its tail:
# "not enough data", not a regression, even when it moved by 50 %
"$MKSNAP" --seed 1 --requests 37 small.ttfs >/dev/null || fail "mksnap small"
"$MKSNAP" --seed 1 --requests 37 --scale 1.5 smallslow.ttfs >/dev/null || fail "mksnap smallslow"
"$MKSNAP" --seed 2 --requests 37 small2.ttfs >/dev/null || fail "mksnap small2"
expect_rc 0 "$REPORT" --diff small.ttfs small2.ttfs --fail-on-regression
expect_grep out.txt "^  ttft  *p99  .*not enough data (n >= 1000 per side)" "--diff of 37 vs 37: p99"
expect_grep out.txt "^  ttft  *p90  .*not enough data (n >= 100 per side)" "--diff of 37 vs 37: p90"
expect_grep out.txt "^  itl  *p99  .*not enough data (n >= 1000 sequences per side)" "--diff: gaps count by sequence"
expect_no_grep out.txt "<< REGRESSION" "--diff of 37 vs 37 of one workload"
expect_rc 0 "$REPORT" --diff small.ttfs smallslow.ttfs
expect_grep out.txt "^  ttft  *p99  .*not enough data" "--diff of 37 vs 37 slowed: p99 not judged"
expect_no_grep out.txt "^  ttft  *p99  .*REGRESSION" "--diff of 37 vs 37 slowed: p99 not flagged"
# microseconds are written as the text report writes them, and keep the columns aligned
"$MKSNAP" --seed 1 --requests 300 --scale 0.001 us1.ttfs >/dev/null || fail "mksnap us1"
"$MKSNAP" --seed 2 --requests 300 --scale 0.0015 us2.ttfs >/dev/null || fail "mksnap us2"
expect_rc 0 "$REPORT" --diff us1.ttfs us2.ttfs
expect_grep out.txt "^  tpot  *p50  *[0-9.]* µs \[" "--diff in microseconds: the µs unit"
expect_no_grep out.txt "[0-9] us" "--diff in microseconds: no 'us'"
expect_no_grep out.txt "$GLUED" "--diff in microseconds: a unit glued to its number"
if need_tool python3; then
  got=$(python3 - out.txt <<'PY'
import sys
rows = [l for l in open(sys.argv[1], encoding="utf-8").read().splitlines()
        if l.startswith("  tpot ") or l.startswith("  ttft ")]
# "change" ends at column 98 and "rel" at 108 on every row (counted in
# characters: the µ of a value is one column, two bytes)
bad = [l for l in rows if len(l) < 108 or l[97] == " " or l[98] != " " or l[107] == " "]
print("ok" if len(rows) > 4 and not bad else "misaligned: %r" % bad[:2])
PY
)
  if [ "$got" = "ok" ]; then ok; else fail "--diff in microseconds: $got"; fi
fi
# --confidence
expect_rc 0 "$REPORT" --diff big.ttfs big2.ttfs
expect_grep out.txt "outside the 99 % confidence intervals" "--diff: 99 % by default"
expect_rc 0 "$REPORT" --diff big.ttfs big2.ttfs --confidence 95
expect_grep out.txt "outside the 95 % confidence intervals" "--confidence 95"
expect_rc 1 "$REPORT" --diff big.ttfs big2.ttfs --confidence 30
expect_rc 1 "$REPORT" --diff big.ttfs big2.ttfs --confidence abc

# ------------------------------------------------------------ merge: duplicates, time covered
expect_rc 0 "$REPORT" --format json a.ttfs a.ttfs
expect_grep err.txt "a.ttfs (snapshot 1) is the same snapshot as a.ttfs (snapshot 1)" "duplicate warning"
cp out.txt dup.json
cat a.ttfs a.ttfs | "$REPORT" --format json - >dupcat.json 2>err.txt || fail "duplicate on stdin: exit $?"
expect_grep err.txt "is the same snapshot as" "duplicate warning (concatenated)"
expect_rc 0 "$REPORT" a.ttfs a_later.ttfs
expect_grep err.txt "intervals overlap" "cumulative snapshots of one registry"
# two processes, one after the other, with a pause between them
"$MKSNAP" --seed 5 --requests 300 w1.ttfs >/dev/null || fail "mksnap w1"
sleep 1
"$MKSNAP" --seed 6 --requests 300 w2.ttfs >/dev/null || fail "mksnap w2"
expect_rc 0 "$REPORT" --format json w1.ttfs w2.ttfs
cp out.txt w12.json
expect_grep err.txt "cover .* of a .* span" "disjoint windows note"
if need_tool python3; then
  got=$(json_get dup.json "d['metrics']['ttft']['count']" 2>&1)
  if [ "$got" = "$na" ]; then ok; else fail "a.ttfs twice: ttft count expected $na (once), got $got"; fi
  got=$(json_get dupcat.json "d['metrics']['ttft']['count']" 2>&1)
  if [ "$got" = "$na" ]; then ok; else fail "a.ttfs twice on stdin: ttft count expected $na, got $got"; fi
  "$REPORT" --format json w1.ttfs >w1.json && "$REPORT" --format json w2.ttfs >w2.json || fail "w1/w2 json"
  # rates over the sum of the two intervals, not over the >= 1 s span between them
  got=$(python3 - w1.json w2.json w12.json <<'PY'
import json, sys
a, b, m = (json.load(open(p)) for p in sys.argv[1:4])
sec = a["interval"]["seconds"] + b["interval"]["seconds"]
tok = m["counters"]["tokens"] if "counters" in m else None
ms = m["interval"]["seconds"]
# (no bound on the windows' own length: under an emulator each mksnap run
# is slower; equal to their sum, the merged interval excludes the pause)
ok = abs(ms - sec) <= 1e-6 * max(sec, 1e-9) + 1e-9
tps = m["throughput"]["tokens_per_second"]
want = (a["throughput"]["tokens_per_second"] * a["interval"]["seconds"] +
        b["throughput"]["tokens_per_second"] * b["interval"]["seconds"]) / sec
ok = ok and abs(tps - want) <= 1e-6 * want
print("ok" if ok else "merged %.6f s (want %.6f s), %.1f tokens/s (want %.1f)" % (ms, sec, tps, want))
PY
)
  if [ "$got" = "ok" ]; then ok; else fail "disjoint windows: $got"; fi
fi

# ------------------------------------------------------------ svg
expect_rc 0 "$REPORT" --svg merged.svg a.ttfs b.ttfs
expect_rc 0 "$REPORT" --diff a.ttfs slow.ttfs --svg diff.svg
expect_rc 0 "$REPORT" --svg - a.ttfs
cp out.txt stdout.svg
expect_rc 0 "$REPORT" --svg big.svg big.ttfs bigslow.ttfs
expect_rc 0 "$REPORT" --svg linear.svg --cdf-axis linear a.ttfs
for f in merged.svg diff.svg stdout.svg big.svg linear.svg; do
  if need_tool xmllint; then
    if xmllint --noout "$f" 2>err.txt; then ok; else fail "$f is not well-formed XML: $(cat err.txt)"; fi
  fi
  expect_grep "$f" "<svg xmlns=\"http://www.w3.org/2000/svg\"" "$f"
  expect_grep "$f" "<polyline" "$f (curves)"
  # a p99 marker, or (600 streams a side: too few to judge p99) the note
  # that says why there is none
  if grep -q 'class="note">[^<]*p99' "$f"; then ok; else expect_grep "$f" "p99 " "$f (p99 markers)"; fi
  expect_no_grep "$f" "<script" "$f"
  expect_no_grep "$f" "href=" "$f (external references)"
done
expect_grep merged.svg "TTFT" "svg panels"
expect_grep merged.svg "TPOT" "svg panels"
expect_grep merged.svg "ITL" "svg panels"
expect_grep merged.svg "E2E" "svg panels"
expect_grep merged.svg "chat SLO 300 ms" "svg SLO budget line label"
expect_grep merged.svg "chat p50 " "svg direct curve label"
expect_grep big.svg "p99 " "svg p99 marker label"
expect_no_grep merged.svg "code p99 " "svg: no p99 marker where the note says not enough data"
expect_grep merged.svg ">99.9%<" "svg tail axis tick"
expect_grep merged.svg "(tail scale)" "svg tail axis title"
expect_grep linear.svg ">100%<" "svg linear axis"
expect_no_grep linear.svg ">99.9%<" "svg linear axis"
# every class's budgets: batch's TTFT and E2E SLOs, chat's stall budget
expect_grep big.svg "batch SLO 5.00 s" "svg batch TTFT SLO"
expect_grep big.svg "batch SLO 60.0 s" "svg E2E SLO line"
expect_grep big.svg "chat stall 250 ms" "svg stall budget"
expect_grep big.svg ">99.99%<" "svg tail axis, 10^4 observations"
expect_grep diff.svg "old p50 " "diff svg"
expect_grep diff.svg ">old: a.ttfs" "diff svg: old snapshot's subtitle"
expect_grep diff.svg ">new: slow.ttfs" "diff svg: new snapshot's subtitle"
if need_tool python3; then
  # no two labels overlap, and every label is inside the picture (boxes
  # as the drawing code measures text: 0.62 em per character)
  for f in merged.svg diff.svg big.svg linear.svg; do
    got=$(python3 - "$f" <<'PY'
import re, sys
svg = open(sys.argv[1], encoding="utf-8").read()
w = float(re.search(r'<svg [^>]*width="([0-9.]+)"', svg).group(1))
boxes = []
for m in re.finditer(r'<text x="([0-9.-]+)" y="([0-9.-]+)"[^>]*paint-order="stroke">([^<]*)</text>', svg):
    x, y, t = float(m.group(1)), float(m.group(2)), m.group(3)
    t = t.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    boxes.append((x, y - 10, x + len(t) * 12 * 0.6, y + 2, t))
bad = []
for i, a in enumerate(boxes):
    if a[0] < 0 or a[2] > w:
        bad.append("outside: %r" % a[4])
    for b in boxes[i + 1:]:
        if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
            bad.append("%r overlaps %r" % (a[4], b[4]))
print("ok %d labels" % len(boxes) if not bad and len(boxes) >= 8 else "; ".join(bad) or "too few labels")
PY
)
    case "$got" in ok*) ok ;; *) fail "$f labels: $got" ;; esac
  done
fi
# a panel says when its n is too small for a marked percentile, by the
# text diff's rule: a vs slow (600 streams) cannot judge p99 (the text diff
# says "not enough data (n >= 1000 per side)"), 3000 per side can
expect_rc 0 "$REPORT" --diff a.ttfs slow.ttfs
expect_grep out.txt "^  ttft  *p99 .*not enough data (n >= 1000 per side)$" "text diff: p99 of 600 not judged"
expect_grep diff.svg 'class="note">p99: not enough data (n &gt;= 1000 per side)<' "diff svg: p99 note"
expect_grep diff.svg 'class="note">p99: not enough data (n &gt;= 1000 sequences per side)<' "diff svg: ITL counts sequences"
expect_no_grep diff.svg 'class="note">p50' "diff svg: p50 of 600 is judged"
# and it says so only where it draws nothing (issue 32.5): no p99 marker
# where the note stands, the p50 markers drawn
expect_no_grep diff.svg 'paint-order="stroke">[^<]*p99 ' "diff svg: no p99 marker on 600 per side"
expect_grep diff.svg 'paint-order="stroke">[^<]*p50 ' "diff svg: p50 markers drawn"
expect_rc 0 "$REPORT" --diff big.ttfs bigslow.ttfs --svg bigdiff.svg
expect_no_grep bigdiff.svg 'class="note"' "diff svg of 3000 per side: no note"
expect_grep bigdiff.svg 'paint-order="stroke">[^<]*p99 ' "diff svg of 3000 per side: p99 markers drawn"
expect_grep merged.svg 'class="note">.*p99.*: not enough data (n &gt;= 1000)<' "svg of one merge: p99 note"
# the header is never clipped: long paths are elided in their middle,
# keeping the file name
long="long/$(printf 'deeply-nested-ci-artifact-directory-%s/' 1 2 3 4 5 6)run"
mkdir -p "$long" && cp a.ttfs "$long/old-baseline-snapshot.ttfs" && cp slow.ttfs "$long/new-candidate-snapshot.ttfs"
expect_rc 0 "$REPORT" --diff "$long/old-baseline-snapshot.ttfs" "$long/new-candidate-snapshot.ttfs" --svg longdiff.svg
expect_rc 0 "$REPORT" --svg longone.svg "$long/new-candidate-snapshot.ttfs"
expect_grep longdiff.svg '>old: long/deeply.*….*/old-baseline-snapshot\.ttfs<' "diff svg: old path elided, name kept"
expect_grep longdiff.svg '>new: long/deeply.*….*/new-candidate-snapshot\.ttfs<' "diff svg: new path elided, name kept"
expect_grep longone.svg '>long/deeply.*….*/new-candidate-snapshot\.ttfs<' "svg: path elided, name kept"
if need_tool python3; then
  # every text line with its own font size fits the picture (0.62 em per
  # character, as the drawing code measures)
  for f in merged.svg diff.svg bigdiff.svg longdiff.svg longone.svg; do
    got=$(python3 - "$f" <<'PY'
import html, re, sys
svg = open(sys.argv[1], encoding="utf-8").read()
w = float(re.search(r'<svg [^>]*width="([0-9.]+)"', svg).group(1))
bad, n = [], 0
for m in re.finditer(r'<text x="([0-9.-]+)" y="[0-9.-]+" font-size="([0-9.]+)"([^>]*)>([^<]*)</text>', svg):
    x, size, attrs, t = float(m.group(1)), float(m.group(2)), m.group(3), m.group(4)
    if "transform=" in attrs:
        continue  # the rotated axis titles run down the left margin
    t = html.unescape(t)
    width = len(t) * size * 0.62
    x0, x1 = (x - width, x) if 'text-anchor="end"' in attrs else (x - width / 2, x + width / 2) if 'text-anchor="middle"' in attrs else (x, x + width)
    n += 1
    if x0 < 0 or x1 > w:
        bad.append("%r clipped (%.0f..%.0f of %.0f)" % (t, x0, x1, w))
print("ok %d lines" % n if not bad and n >= 10 else "; ".join(bad) or "too few lines")
PY
)
    case "$got" in ok*) ok ;; *) fail "$f text lines: $got" ;; esac
  done
fi
if need_tool rsvg-convert; then
  # renders (what people do with it: docs/ttft-report.md)
  if rsvg-convert -o big.png big.svg 2>err.txt && [ -s big.png ]; then ok; else fail "rsvg-convert big.svg: $(cat err.txt)"; fi
fi
# --svg mistakes: no snapshot named; a snapshot given as the output;
# an output that cannot be written fails before anything is printed
expect_rc 1 "$REPORT" --svg out.svg
expect_grep err.txt "no snapshot to draw" "--svg without a snapshot"
cp a.ttfs keep.ttfs
expect_rc 1 "$REPORT" --svg keep.ttfs
expect_grep err.txt "no snapshot to draw" "--svg SNAPSHOT alone"
if cmp -s a.ttfs keep.ttfs; then ok; else fail "--svg SNAPSHOT overwrote the snapshot"; fi
expect_rc 2 "$REPORT" --svg keep.ttfs b.ttfs
expect_grep err.txt "holds a snapshot" "--svg onto a snapshot"
if cmp -s a.ttfs keep.ttfs; then ok; else fail "--svg onto a snapshot overwrote it"; fi
expect_rc 2 "$REPORT" --svg no-such-dir/x.svg a.ttfs
expect_grep err.txt "no-such-dir/x.svg: cannot write" "unwritable --svg path"
if [ -s out.txt ]; then fail "unwritable --svg: the report was printed before failing"; else ok; fi
expect_rc 2 "$REPORT" --diff a.ttfs slow.ttfs --svg no-such-dir/x.svg
if [ -s out.txt ]; then fail "unwritable --svg: the diff was printed before failing"; else ok; fi
expect_rc 1 "$REPORT" --cdf-axis log a.ttfs

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

# ------------------------------------------------------------ older encodings
# a snapshot written by libttft 1.0 (encoding version 1) reads, merges with
# a current one, and the merge writes JSON with the 1.1 fields
FIXTURE="$(cd "$(dirname "$0")/.." && pwd)/fixtures/snapshot-1.0.ttfs"
expect_rc 0 "$REPORT" "$FIXTURE"
expect_grep out.txt "clock starts at: client_send" "1.0 file: labels"
expect_grep out.txt "^chat " "1.0 file: classes"
expect_rc 0 "$REPORT" --format json "$FIXTURE" a.ttfs
if need_tool python3; then
  cp out.txt v1merge.json
  n=$(json_get v1merge.json "d['counters']['begun']")
  [ "$n" = "1203" ] && ok || fail "1.0 file merged with a.ttfs: begun $n, expected 603 + 600"
  k=$(json_get v1merge.json "sorted(d['by_status'].keys())")
  [ "$k" = "['cancelled', 'completed', 'error']" ] && ok || fail "by_status keys $k"
fi

# ------------------------------------------------------------ usage
expect_rc 1 "$REPORT"
expect_rc 1 "$REPORT" --format yaml a.ttfs
expect_rc 1 "$REPORT" --bogus a.ttfs
expect_rc 1 "$REPORT" --diff a.ttfs
expect_rc 1 "$REPORT" --diff a.ttfs b.ttfs c.ttfs
expect_rc 1 "$REPORT" --threshold abc --diff a.ttfs b.ttfs
expect_rc 1 "$REPORT" --svg
expect_rc 0 "$REPORT" --help
expect_grep out.txt "usage:" "--help"
expect_grep out.txt "--version" "--help lists --version"
# every tool says its version (issue 32.8): the library's, as it is linked in
expect_rc 0 "$REPORT" --version
expect_grep out.txt "^ttft-report (libttft) [0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*$" "--version"

echo "test_report.sh: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
