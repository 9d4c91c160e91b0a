//go:build ttft_nopkgconfig

package ttft

// With -tags ttft_nopkgconfig the include and library directories come
// from the environment, e.g. for a CMake build tree:
//
//	CGO_CFLAGS="-I$REPO/include" CGO_LDFLAGS="-L$REPO/build -Wl,-rpath,$REPO/build" \
//	  go test -tags ttft_nopkgconfig

// #cgo LDFLAGS: -lttft
import "C"
