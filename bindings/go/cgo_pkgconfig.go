//go:build ttft_pkgconfig

package ttft

// -tags ttft_pkgconfig: the pkg-config command finds an installed libttft
// (ttft.pc, installed by `make install`; set PKG_CONFIG_PATH for a custom
// prefix). pkg-config gives -L, not an rpath: a binary linked against a
// prefix the dynamic loader does not search needs
// CGO_LDFLAGS="-Wl,-rpath,<prefix>/lib" (or LD_LIBRARY_PATH) to run.

// #cgo pkg-config: ttft
import "C"
