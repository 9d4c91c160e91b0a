/*
 * testutil.h — kept for compatibility: the test harness is tests/task.h.
 *
 * Every test program now includes task.h (TEST(name) { ... }, TU_MAIN(),
 * one ctest test per TEST). This header only includes it, so a program
 * written the old way — its own main() ending in `return TU_DONE();` —
 * still builds and runs (as a single ctest test, see tests/CMakeLists.txt)
 * with the same EXPECT_* macros. New tests: include task.h directly.
 */
#ifndef TTFT_TESTUTIL_H
#define TTFT_TESTUTIL_H

#include "task.h"

/* A program without TEST() never touches the test list's tail, which GCC
 * would report as an unused variable (-Werror): this reference is its use. */
static inline void tu_compat_uses_list_(void) { (void)tu_tail_; }

#endif
