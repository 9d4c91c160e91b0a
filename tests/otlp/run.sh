#!/usr/bin/env bash
# run.sh PROG OUTDIR [push] — the OTLP decoder proofs (tests/otlp.cmake):
# installs the pinned decoder (package-lock.json) into tests/otlp/node_modules
# when it is missing, then
#   otlp_decode:   PROG (otlp_dump) writes into OUTDIR, decode_check.js checks;
#   otlp_push_e2e: (push) PROG (otlp_push_e2e) pushes to receiver.js and
#                  writes into OUTDIR, push_check.js checks.
# A missing node or npm, or an install that fails, fails the test under CI
# (CI set) and skips it (77) elsewhere.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dump="$1"
out="$2"
missing() {
  echo "otlp ($(basename "$dump")): $1" >&2
  if [ -n "${CI:-}" ]; then exit 1; fi
  exit 77
}
command -v node >/dev/null || missing "node not found (.ci/packages.d/otlp.txt: nodejs)"
gen="$here/node_modules/@opentelemetry/otlp-transformer/build/src/generated/root.js"
if [ ! -f "$gen" ]; then
  command -v npm >/dev/null || missing "npm not found (.ci/packages.d/otlp.txt: npm)"
  # one installer at a time (the shared and static builds may share the tree)
  (
    flock 9
    [ -f "$gen" ] || (cd "$here" && npm ci --no-audit --no-fund --ignore-scripts >&2)
  ) 9>"$here/.npm-lock" || missing "npm ci failed"
  [ -f "$gen" ] || missing "npm ci did not bring $gen"
fi
rm -rf "$out"
mkdir -p "$out"
if [ "${3:-}" = push ]; then
  "$dump" "$(command -v node)" "$here/receiver.js" "$out"
  node "$here/push_check.js" "$out"
else
  "$dump" "$out"
  node "$here/decode_check.js" "$out"
fi
