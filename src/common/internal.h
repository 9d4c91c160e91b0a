/*
 * internal.h — what every file of the library shares and nothing exports:
 * compiler macros, the allocator, the string builder, UTF-8 and string
 * helpers. Layer: common (src/README.md). Includes only the public header.
 */
#ifndef TTFT_INTERNAL_H
#define TTFT_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "ttft.h"
#include "common/debug.h"

#if defined(__GNUC__)
#  define TTFT_LIKELY(x) __builtin_expect(!!(x), 1)
#  define TTFT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#  define TTFT_HIDDEN __attribute__((visibility("hidden")))
#  define TTFT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#  define TTFT_LIKELY(x) (x)
#  define TTFT_UNLIKELY(x) (x)
#  define TTFT_HIDDEN
#  define TTFT_PRINTF(a, b)
#endif

/* ------------------------------------------------------------ allocation */
#if TTFT_HAVE_PTHREADS
#include <pthread.h>
/* The library's own threads (the endpoint's, the publisher's) are created
 * with at least TTFT__THREAD_STACK bytes of stack, whatever the C
 * library's default: glibc's follows RLIMIT_STACK (8 MiB here), musl's is
 * 128 KiB. Their deepest path (the endpoint gathering a shared directory:
 * gather's take_once alone has a 35 KB frame, -fstack-usage) needs some
 * 60 KB: 512 KiB leaves room for the C library's own frames. A larger
 * default is kept. 0 or an errno (attr is then destroyed). */
#define TTFT__THREAD_STACK ((size_t)512 << 10)
TTFT_HIDDEN int ttft__thread_attr(pthread_attr_t *attr);
#endif
TTFT_HIDDEN void ttft__allocator_current(ttft_allocator *out);
TTFT_HIDDEN void *ttft__alloc(const ttft_allocator *a, size_t n);  /* zeroed */
TTFT_HIDDEN void ttft__free(const ttft_allocator *a, void *p);

/* ------------------------------------------------------- string builder
 * Writes into a caller buffer with snprintf rules: never past cap, always
 * NUL-terminated when cap > 0, len counts what the full output needs. */
typedef struct ttft__sb {
  char *buf;
  size_t cap, len;
} ttft__sb;
TTFT_HIDDEN void ttft__sb_init(ttft__sb *sb, char *buf, size_t cap);
TTFT_HIDDEN void ttft__sb_put(ttft__sb *sb, const char *s, size_t n);
TTFT_HIDDEN void ttft__sb_puts(ttft__sb *sb, const char *s);
TTFT_HIDDEN void ttft__sb_printf(ttft__sb *sb, const char *fmt, ...) TTFT_PRINTF(2, 3);

/* UTF-8 at p, n bytes available (n >= 1; SIZE_MAX for a NUL-terminated
 * string — a NUL is never a continuation byte): the length of the
 * well-formed sequence that starts there (1 for ASCII), its code point in
 * *cp when cp is not NULL; or 0 when none starts there (bad lead,
 * truncated, overlong, surrogate, above U+10FFFF), and then *bad (when not
 * NULL) is the length of the maximal invalid subpart, which one U+FFFD
 * replaces as the Unicode standard recommends. */
TTFT_HIDDEN size_t ttft__utf8_seq(const unsigned char *p, size_t n, unsigned *cp, size_t *bad);

/* 1 when name is a label the exporters emit themselves (class, model,
 * status, le, quantile, ...) or starts with "__": a constant label may not
 * use it (ttft_registry_new refuses; the exporters also skip it). */
TTFT_HIDDEN int ttft__label_reserved(const char *name);

/* Copy a C string into a fixed field, truncated at a UTF-8 boundary. */
TTFT_HIDDEN void ttft__strlcpy(char *dst, const char *src, size_t cap);

#endif /* TTFT_INTERNAL_H */
