#!/usr/bin/env bash
# run.sh DUMP OUTDIR — the OTLP decoder proof (tests/otlp.cmake): installs
# the pinned decoder (package-lock.json) into tests/otlp/node_modules when
# it is missing, runs DUMP into OUTDIR, then decode_check.js on the result.
# A missing node or npm, or an install that fails, fails the test under CI
# (CI set) and skips it (77) elsewhere.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dump="$1"
out="$2"
missing() {
  echo "otlp_decode: $1" >&2
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
"$dump" "$out"
node "$here/decode_check.js" "$out"
