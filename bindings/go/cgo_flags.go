//go:build !ttft_pkgconfig

package ttft

// The default build: libttft's header and library are found where the C
// compiler and linker look by default (an installed libttft under /usr or
// /usr/local) plus CGO_CFLAGS / CGO_LDFLAGS, e.g. for a build tree:
//
//	CGO_CFLAGS="-I$REPO/include" CGO_LDFLAGS="-L$REPO/build -Wl,-rpath,$REPO/build" go test
//
// -tags ttft_pkgconfig asks pkg-config instead (cgo_pkgconfig.go). The
// tag ttft_nopkgconfig of 1.2 is accepted and means this default.
//
// A missing header stops the build with a hint (ttft_cgo.h), not only the
// compiler's "ttft.h: No such file or directory".

// #cgo LDFLAGS: -lttft
import "C"
