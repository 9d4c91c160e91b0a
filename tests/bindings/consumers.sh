#!/usr/bin/env bash
# The Rust and Go bindings as a user consumes them (issue 32, item 6): a
# crate and a module of their own, outside the repository, that depend on
# bindings/rust (Cargo.toml path dependency) and bindings/go (go.mod
# require + replace), built offline and run WITHOUT LD_LIBRARY_PATH:
#  1. Rust, TTFT_LIB_DIR=<build dir>: links libttft.a by default; the binary
#     runs and needs no libttft.so;
#  2. Go, the default build with CGO_CFLAGS/CGO_LDFLAGS naming the build
#     tree (rpath in CGO_LDFLAGS): builds and runs;
#  3. Go without any flags (no tag, no CGO_*): `go test` of bindings/go and
#     `go build` of the module fail with the hint of bindings/go/ttft_cgo.h,
#     not a raw compiler or pkg-config error;
#  4. `make install PREFIX=<tmp>`, then through pkg-config only
#     (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig): the Rust crate (static by
#     default; TTFT_STATIC=0 with an rpath in RUSTFLAGS links the prefix's
#     libttft.so) and the Go module (-tags ttft_pkgconfig, rpath in
#     CGO_LDFLAGS) build and run.
# Usage: tests/bindings/consumers.sh [BUILD_DIR]   (default: build)
# A missing cargo or go fails under CI=true; elsewhere it is reported and
# that half is skipped (exit status 77 when both are).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="$(cd "${1:-$REPO/build}" && pwd)"
HERE="$REPO/tests/bindings/consumer"
for f in libttft.a libttft.so; do
  [ -e "$BUILD/$f" ] || { echo "FAIL: $BUILD/$f missing (cmake --build $BUILD --target ttft_shared ttft_static)" >&2; exit 1; }
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
unset LD_LIBRARY_PATH TTFT_LIB_DIR TTFT_STATIC CGO_CFLAGS CGO_LDFLAGS PKG_CONFIG_PATH
fail() { echo "FAIL: $*" >&2; exit 1; }
# the line each consumer prints (tests/bindings/consumer/*/main.*)
ver="$(for p in MAJOR MINOR PATCH; do sed -n "s/^#define TTFT_VERSION_$p \([0-9][0-9]*\)$/\1/p" "$REPO/include/ttft.h"; done | paste -sd.)"
[[ "$ver" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "no TTFT_VERSION_MAJOR/MINOR/PATCH in include/ttft.h ($ver)"
want="libttft $ver, 1 stream, TTFT p50 within 0.5% of 250 ms: yes"
check_run() { # name binary: runs it with no LD_LIBRARY_PATH, checks its line
  local out
  out="$(env -u LD_LIBRARY_PATH "$2")" || fail "$1: $2 did not run"
  [ "$out" = "${1%% *} consumer: $want" ] || fail "$1: printed '$out', expected '${1%% *} consumer: $want'"
  echo "ok: $1: $out"
}
missing() {
  if [ "${CI:-}" = true ]; then fail "$1 not found: cannot test the $2 binding's consumers (CI=true)"; fi
  echo "SKIP: $1 not found: the $2 binding's consumers are not tested" >&2
}

# the prefix of (4), installed as a user does
make -s -f "$REPO/Makefile" install BUILD="$BUILD" PREFIX="$tmp/prefix" >/dev/null
pc="$(find "$tmp/prefix" -name ttft.pc | head -n1)"
[ -n "$pc" ] || fail "make install put no ttft.pc under $tmp/prefix"
pcdir="$(dirname "$pc")"; libdir="$(dirname "$pcdir")"
[ "$(PKG_CONFIG_PATH="$pcdir" pkg-config --variable=libdir ttft)" -ef "$libdir" ] || fail "ttft.pc's libdir is not $libdir"
ran=0

export PATH="$PATH:${CARGO_HOME:-$HOME/.cargo}/bin"
if command -v cargo >/dev/null; then
  ran=$((ran + 1))
  app="$tmp/rust-app"; mkdir -p "$app/src"; cp "$HERE/rust/src/main.rs" "$app/src/"
  # the two lines a user adds (bindings/rust/README.md)
  cat > "$app/Cargo.toml" <<TOML
[package]
name = "ttft-consumer"
version = "0.1.0"
edition = "2021"

[dependencies]
ttft = { path = "$REPO/bindings/rust" }
TOML
  export CARGO_NET_OFFLINE=true
  cargo_build() { # target-dir, then env assignments
    local t="$1"; shift
    (cd "$app" && env "$@" CARGO_TARGET_DIR="$tmp/$t" cargo build --offline --quiet) > "$tmp/$t.log" 2>&1 \
      || { cat "$tmp/$t.log"; fail "cargo build of the consumer crate ($*)"; }
    bin="$tmp/$t/debug/ttft-consumer"
  }
  cargo_build t-libdir TTFT_LIB_DIR="$BUILD"
  ! readelf -d "$bin" | grep -F libttft >/dev/null || fail "rust TTFT_LIB_DIR: the binary needs a libttft.so (static by default)"
  check_run "rust TTFT_LIB_DIR (static)" "$bin"
  cargo_build t-pc PKG_CONFIG_PATH="$pcdir"
  ! readelf -d "$bin" | grep -F libttft >/dev/null || fail "rust pkg-config: the binary needs a libttft.so (static by default)"
  check_run "rust pkg-config (static)" "$bin"
  cargo_build t-pc-shared PKG_CONFIG_PATH="$pcdir" TTFT_STATIC=0 RUSTFLAGS="-C link-arg=-Wl,-rpath,$libdir"
  ldd "$bin" | grep -E "libttft\.so\.[0-9]+ => $libdir/" >/dev/null || fail "rust TTFT_STATIC=0: the binary does not load $libdir's libttft.so"
  check_run "rust pkg-config TTFT_STATIC=0 (shared, rpath $libdir)" "$bin"
else
  missing cargo Rust
fi

if command -v go >/dev/null; then
  ran=$((ran + 1))
  export GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local GONOSUMDB=ttft
  app="$tmp/go-app"; mkdir -p "$app"; cp "$HERE/go/main.go" "$app/"
  # the two lines a user adds (bindings/go/README.md)
  cat > "$app/go.mod" <<GOMOD
module example.com/consumer

go 1.19

require ttft v0.0.0
replace ttft => $REPO/bindings/go
GOMOD
  # (3) first, with nothing set: the hint, whether through the package's
  # own tests or a dependent's build
  hint="libttft not found: ttft.h is not on the include path"
  if echo '#include <ttft.h>' | ${CC:-cc} -E -x c - >/dev/null 2>&1; then
    fail "a ttft.h is installed on the compiler's default include path: the no-flags hint cannot be tested here"
  fi
  if (cd "$REPO/bindings/go" && go test -count=1 .) > "$tmp/go-plain.log" 2>&1; then
    cat "$tmp/go-plain.log"; fail "go test without tag or CGO flags passed: expected the hint"
  fi
  grep -F "$hint" "$tmp/go-plain.log" >/dev/null || { cat "$tmp/go-plain.log"; fail "go test without flags: no hint"; }
  ! grep -F "pkg-config" "$tmp/go-plain.log" >/dev/null || { cat "$tmp/go-plain.log"; fail "go test without flags ran pkg-config"; }
  echo "ok: go test without flags: exit non-zero, '$(grep -o -F "$hint" "$tmp/go-plain.log" | head -n1) ...'"
  if (cd "$app" && go build -o "$tmp/go-none" .) > "$tmp/go-none.log" 2>&1; then
    fail "go build of the consumer module without flags passed: expected the hint"
  fi
  grep -F "$hint" "$tmp/go-none.log" >/dev/null || { cat "$tmp/go-none.log"; fail "go build without flags: no hint"; }
  echo "ok: go build of the consumer without flags: the hint"
  # (2) the build tree, default build
  (cd "$app" && CGO_CFLAGS="-I$REPO/include" CGO_LDFLAGS="-L$BUILD -Wl,-rpath,$BUILD" go build -o "$tmp/go-tree" .) \
    || fail "go build of the consumer module against $BUILD"
  ldd "$tmp/go-tree" | grep -E "libttft\.so\.[0-9]+ => $BUILD/" >/dev/null || fail "go build tree: the binary does not load $BUILD's libttft.so"
  check_run "go build tree (rpath $BUILD)" "$tmp/go-tree"
  # the tag of 1.2 still means the default
  (cd "$app" && CGO_CFLAGS="-I$REPO/include" CGO_LDFLAGS="-L$BUILD -Wl,-rpath,$BUILD" go build -tags ttft_nopkgconfig -o "$tmp/go-tree-tag" .) \
    || fail "go build -tags ttft_nopkgconfig of the consumer module"
  check_run "go build tree -tags ttft_nopkgconfig" "$tmp/go-tree-tag"
  # (4) the installed prefix through pkg-config (CGO_LDFLAGS names the
  # prefix, which also keeps Go's build cache from reusing another run's -L)
  (cd "$app" && PKG_CONFIG_PATH="$pcdir" CGO_LDFLAGS="-Wl,-rpath,$libdir" go build -tags ttft_pkgconfig -o "$tmp/go-pc" .) \
    || fail "go build -tags ttft_pkgconfig of the consumer module against $tmp/prefix"
  ldd "$tmp/go-pc" | grep -E "libttft\.so\.[0-9]+ => $libdir/" >/dev/null || fail "go pkg-config: the binary does not load $libdir's libttft.so"
  check_run "go pkg-config -tags ttft_pkgconfig (rpath $libdir)" "$tmp/go-pc"
else
  missing go Go
fi
[ "$ran" -gt 0 ] || exit 77
echo "consumers: ok"
