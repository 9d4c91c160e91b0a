//go:build !ttft_nopkgconfig

package ttft

// The default: the pkg-config command finds an installed libttft (ttft.pc,
// installed by `make install`; set PKG_CONFIG_PATH for a custom prefix).
// Build with -tags ttft_nopkgconfig to pass the flags yourself in
// CGO_CFLAGS / CGO_LDFLAGS instead (e.g. a build tree: see doc.go).

// #cgo pkg-config: ttft
import "C"
