#!/usr/bin/env bash
# Rust and Go bindings (issue 22, bindings/rust and bindings/go), offline:
#  1. Rust: `cargo test` of the crate (exact-value tests, the ABI layout test
#     that compiles tests/abi/layout.c, the doc test), its examples built and
#     the server example run, rustdoc with warnings as errors; linked against
#     the CI build's libttft through TTFT_LIB_DIR, then once more through
#     build.rs's pkg-config path against a `cmake --install`ed prefix;
#  2. Go: `go test` and `go test -race` of the cgo package (GOPROXY=off, no
#     module downloads) against the same build, and its example program.
# cargo comes from rustup ($HOME/.cargo/bin, as root in CI) or PATH; go from
# Debian's golang-go (.ci/packages.d/bindings.txt). A missing toolchain fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO="$PWD"
BUILD="${BUILD:-build-ci}"
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTTFT_WERROR=ON >/dev/null
fi
cmake --build "$BUILD" -j 2 --target ttft_shared ttft_static ttft-report >/dev/null
BUILD="$(cd "$BUILD" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

export PATH="$PATH:${CARGO_HOME:-$HOME/.cargo}/bin"
command -v cargo >/dev/null || { echo "cargo not found (PATH or \$HOME/.cargo/bin): cannot test bindings/rust" >&2; exit 1; }
export CARGO_NET_OFFLINE=true CARGO_TARGET_DIR="$BUILD/cargo-target"
echo "-- Rust: $(cargo --version), cargo test against $BUILD/libttft.so"
(cd bindings/rust
 if ! TTFT_LIB_DIR="$BUILD" cargo test --offline --locked > "$tmp/cargo-test.log" 2>&1; then
   cat "$tmp/cargo-test.log"; echo "cargo test failed" >&2; exit 1
 fi
 grep -E "^test result" "$tmp/cargo-test.log"
 out="$(TTFT_LIB_DIR="$BUILD" cargo run --offline --locked --quiet --example server)"
 echo "$out" | grep -E "^(scraped|chat:)"
 echo "$out" | grep -E "^scraped :[0-9]+/metrics: [0-9]+ bytes, [0-9]+ series$" >/dev/null
 echo "$out" | grep -E "^chat: TTFT p99 [0-9]+ ns over 201 streams \(160 completed\)" >/dev/null
 TTFT_LIB_DIR="$BUILD" cargo run --offline --locked --quiet --example quickstart | grep -E "^TTFT p99 [0-9]+ ns over 1 streams$"
 RUSTDOCFLAGS="-D warnings" TTFT_LIB_DIR="$BUILD" cargo doc --offline --locked --no-deps --quiet)
echo "-- Rust: build.rs through pkg-config (an installed prefix, no TTFT_LIB_DIR)"
cmake --install "$BUILD" --prefix "$tmp/prefix" >/dev/null
pcdir="$(dirname "$(find "$tmp/prefix" -name ttft.pc | head -n1)")"
(cd bindings/rust
 env -u TTFT_LIB_DIR PKG_CONFIG_PATH="$pcdir" CARGO_TARGET_DIR="$BUILD/cargo-target-pc" \
   cargo run --offline --locked --quiet --example server > "$tmp/pc.out"
 grep -E "^chat: TTFT p99 [0-9]+ ns over 201 streams" "$tmp/pc.out")
echo "-- Rust: ok"
