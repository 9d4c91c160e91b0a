/*
 * debug.h — invariants as code (after zstd's lib/common/debug.h).
 *
 * TTFT_STATIC_ASSERT(cond, msg)  a fact the layout relies on, checked by the
 *                                compiler in every build.
 * TTFT_ASSERT(cond)              a fact about values at an internal entry
 *                                point whose callers are trusted (an index in
 *                                range, q in [0, 1]): compiled into the
 *                                sanitizer and fuzz builds (TTFT_DEBUG, set by
 *                                CMake's TTFT_DEBUG_ASSERTS, which those builds
 *                                turn on) and out of release builds, where it
 *                                costs nothing. A failed assert prints the
 *                                condition and aborts: only in those builds,
 *                                so the library's "never prints, never aborts"
 *                                holds for what users link.
 * Public entry points do not assert: they check their arguments and return
 * TTFT_E* codes (include/ttft.h).
 * Layer: common (src/README.md).
 */
#ifndef TTFT_DEBUG_H
#define TTFT_DEBUG_H

#define TTFT_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)

#if defined(TTFT_DEBUG) && TTFT_DEBUG
#if defined(__GNUC__)
__attribute__((noreturn, cold, visibility("hidden")))
#endif
void ttft__assert_fail(const char *cond, const char *file, int line);
#define TTFT_ASSERT(cond) ((cond) ? (void)0 : ttft__assert_fail(#cond, __FILE__, __LINE__))
#define TTFT_DEBUG_ON 1
#else
#define TTFT_ASSERT(cond) ((void)0)
#define TTFT_DEBUG_ON 0
#endif

#endif /* TTFT_DEBUG_H */
