/* What every cgo preamble of this package includes instead of ttft.h: a
 * build that cannot find libttft's header stops with how to point it at
 * one, not only the compiler's "ttft.h: No such file or directory". */
#ifndef TTFT_GO_CGO_H
#define TTFT_GO_CGO_H
#if defined(__has_include)
#if !__has_include("ttft.h")
#error "libttft not found: ttft.h is not on the include path. For a build tree: CGO_CFLAGS=-I<repo>/include CGO_LDFLAGS='-L<build> -Wl,-rpath,<build>' go test. For libttft installed in a custom prefix: go test -tags ttft_pkgconfig with PKG_CONFIG_PATH=<prefix>/lib/pkgconfig. See bindings/go/README.md."
#endif
#endif
#include "ttft.h"
#endif
