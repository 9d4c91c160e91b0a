#!/usr/bin/env bash
# Rust and Go bindings (issue 22, bindings/rust and bindings/go), offline:
#  1. Rust: `cargo test` of the crate (exact-value tests, the ABI layout test
#     that compiles tests/abi/layout.c, the doc test), its examples built and
#     the server example run, rustdoc with warnings as errors; linked against
#     the CI build's libttft.a through TTFT_LIB_DIR (static, the default),
#     then once more through build.rs's pkg-config path against a
#     `cmake --install`ed prefix's libttft.so (TTFT_STATIC=0);
#  2. Go: `go test` and `go test -race` of the cgo package (GOPROXY=off, no
#     module downloads) against the same build, and its example program;
#     the server example through -tags ttft_pkgconfig and the prefix;
#  3. tests/bindings/consumers.sh: a crate and a module of their own that
#     depend on the bindings as a user's do (Cargo.toml path dependency,
#     go.mod require + replace), built and run without LD_LIBRARY_PATH
#     against the build tree and a `make install`ed prefix, and the hint a
#     Go build without flags stops with.
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
 echo "$out" | grep -E "^(scraped|chat:|engine:)"
 echo "$out" | grep -E "^scraped :[0-9]+/metrics: [0-9]+ bytes, [0-9]+ series$" >/dev/null
 echo "$out" | grep -E "^chat: TTFT p99 [0-9]+ ns over 201 streams \(160 completed\)" >/dev/null
 echo "$out" | grep -E "^engine: 32 steps \(1 with prefill\)" >/dev/null
 TTFT_LIB_DIR="$BUILD" cargo run --offline --locked --quiet --example quickstart | grep -E "^TTFT p99 [0-9]+ ns over 1 streams$"
 RUSTDOCFLAGS="-D warnings" TTFT_LIB_DIR="$BUILD" cargo doc --offline --locked --no-deps --quiet)
echo "-- Rust: build.rs through pkg-config (an installed prefix, no TTFT_LIB_DIR), the shared library"
# A fixed prefix, not a temporary one: Go's build cache keeps the -L that
# pkg-config gave when it compiled the package and does not re-run
# pkg-config when only the .pc file's location changes (CGO_LDFLAGS, which
# is part of its cache key, names the prefix below for that reason too).
prefix="$BUILD/bindings-prefix"
rm -rf "$prefix"
cmake --install "$BUILD" --prefix "$prefix" >/dev/null
pcdir="$(dirname "$(find "$prefix" -name ttft.pc | head -n1)")"
(cd bindings/rust
 env -u TTFT_LIB_DIR PKG_CONFIG_PATH="$pcdir" TTFT_STATIC=0 CARGO_TARGET_DIR="$BUILD/cargo-target-pc" \
   cargo run --offline --locked --quiet --example server > "$tmp/pc.out"
 grep -E "^chat: TTFT p99 [0-9]+ ns over 201 streams" "$tmp/pc.out")
echo "-- Rust: ok"

command -v go >/dev/null || { echo "go not found: install golang-go (.ci/packages.d/bindings.txt)" >&2; exit 1; }
export GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local
gobuild=(env CGO_CFLAGS="-I$REPO/include" CGO_LDFLAGS="-L$BUILD -Wl,-rpath,$BUILD")
echo "-- Go: $(go version), go vet + go test against $BUILD/libttft.so"
(cd bindings/go
 unformatted="$(gofmt -l .)"
 [ -z "$unformatted" ] || { echo "gofmt: not formatted: $unformatted" >&2; exit 1; }
 "${gobuild[@]}" go vet ./...
 if ! "${gobuild[@]}" go test -count=1 -v . > "$tmp/go-test.log" 2>&1; then
   cat "$tmp/go-test.log"; echo "go test failed" >&2; exit 1
 fi
 echo "go test: $(grep -c -- '^--- PASS' "$tmp/go-test.log") passed (tests and examples), $(grep -c -- '^--- FAIL' "$tmp/go-test.log" || true) failed"
 echo "-- Go: go test -race (concurrent streams, a stream's tokens racing its End)"
 if ! "${gobuild[@]}" go test -race -count=1 . > "$tmp/go-race.log" 2>&1; then
   cat "$tmp/go-race.log"; echo "go test -race failed" >&2; exit 1
 fi
 tail -n1 "$tmp/go-race.log"
 "${gobuild[@]}" go run ./examples/quickstart | grep -E "^TTFT p99 [0-9]+ ns over 1 streams$"
 echo "-- Go: -tags ttft_pkgconfig (#cgo pkg-config: ttft) against the installed prefix"
 PKG_CONFIG_PATH="$pcdir" CGO_LDFLAGS="-Wl,-rpath,$(dirname "$pcdir")" go build -tags ttft_pkgconfig -o "$tmp/go-server" ./examples/server
 "$tmp/go-server" > "$tmp/go-server.out"
 ldd "$tmp/go-server" | grep -F "$prefix/" >/dev/null || { echo "the Go example did not link the installed libttft" >&2; exit 1; }
 grep -E "^(scraped|chat:|engine:)" "$tmp/go-server.out"
 grep -E "^scraped :[0-9]+/metrics: [0-9]+ bytes, [0-9]+ series$" "$tmp/go-server.out" >/dev/null
 grep -E "^chat: TTFT p99 [0-9]+ ns over 200 streams \(160 completed\)" "$tmp/go-server.out" >/dev/null
 grep -E "^engine: 32 steps \(1 with prefill\)" "$tmp/go-server.out" >/dev/null)
echo "-- Go: ok"

echo "-- consumers: a crate and a module of their own (tests/bindings/consumers.sh)"
CI="${CI:-true}" tests/bindings/consumers.sh "$BUILD"
