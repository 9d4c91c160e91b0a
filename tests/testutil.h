/*
 * testutil.h — typed test asserts that print what they expected and what
 * they got, and count passes and failures.
 *
 *   EXPECT_EQ_U64(expected, actual)     uint64_t
 *   EXPECT_EQ_INT(expected, actual)     long long
 *   EXPECT_ERR(expected, actual)        TTFT_E* codes, printed by name
 *   EXPECT_EQ_DBL(expected, actual)     exact double equality
 *   EXPECT_NEAR_REL(expected, actual, rel)   |a - e| <= rel * |e|
 *   EXPECT_LE_U64(a, b) / EXPECT_GE_U64(a, b)   a <= b / a >= b
 *   EXPECT_TRUE(cond) / EXPECT_FALSE(cond)
 *   EXPECT_STREQ(expected, actual)      NULL-safe
 *   EXPECT_CONTAINS(haystack, needle)   strstr, NULL-safe
 *   EXPECT_NULL(p) / EXPECT_NOT_NULL(p)
 *
 * Each macro evaluates its arguments once and returns nothing; a failure
 * prints "file:line: <macro>(<expressions>): expected X, got Y" to stderr
 * and the run goes on. Call TU_DONE() at the end of main:
 *   return TU_DONE();
 * It prints "N passed, N failed" and returns 1 when anything failed.
 * TU_SECTION("name") prints a progress line so failures have context.
 */
#ifndef TTFT_TESTUTIL_H
#define TTFT_TESTUTIL_H

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static unsigned long tu_passed_, tu_failed_;

static inline void tu_ok_(void) { tu_passed_++; }

static inline void tu_fail_(const char *file, int line, const char *what, const char *exprs) {
  tu_failed_++;
  fprintf(stderr, "%s:%d: %s(%s): ", file, line, what, exprs);
}

#define TU_SECTION(name) fprintf(stderr, "-- %s\n", (name))

#define EXPECT_EQ_U64(e, a)                                                         \
  do {                                                                              \
    uint64_t tu_e_ = (uint64_t)(e), tu_a_ = (uint64_t)(a);                          \
    if (tu_e_ == tu_a_) tu_ok_();                                                   \
    else {                                                                          \
      tu_fail_(__FILE__, __LINE__, "EXPECT_EQ_U64", #e ", " #a);                    \
      fprintf(stderr, "expected %" PRIu64 ", got %" PRIu64 "\n", tu_e_, tu_a_);     \
    }                                                                               \
  } while (0)

#define EXPECT_EQ_INT(e, a)                                                         \
  do {                                                                              \
    long long tu_e_ = (long long)(e), tu_a_ = (long long)(a);                       \
    if (tu_e_ == tu_a_) tu_ok_();                                                   \
    else {                                                                          \
      tu_fail_(__FILE__, __LINE__, "EXPECT_EQ_INT", #e ", " #a);                    \
      fprintf(stderr, "expected %lld, got %lld\n", tu_e_, tu_a_);                   \
    }                                                                               \
  } while (0)

#ifdef TTFT_H
#define EXPECT_ERR(e, a)                                                            \
  do {                                                                              \
    long long tu_e_ = (long long)(e), tu_a_ = (long long)(a);                       \
    if (tu_e_ == tu_a_) tu_ok_();                                                   \
    else {                                                                          \
      tu_fail_(__FILE__, __LINE__, "EXPECT_ERR", #e ", " #a);                       \
      fprintf(stderr, "expected %s (%lld), got %s (%lld)\n",                        \
              ttft_err_name((int)tu_e_), tu_e_, ttft_err_name((int)tu_a_), tu_a_);  \
    }                                                                               \
  } while (0)
#endif

#define EXPECT_EQ_DBL(e, a)                                                         \
  do {                                                                              \
    double tu_e_ = (double)(e), tu_a_ = (double)(a);                                \
    if (tu_e_ == tu_a_) tu_ok_();                                                   \
    else {                                                                          \
      tu_fail_(__FILE__, __LINE__, "EXPECT_EQ_DBL", #e ", " #a);                    \
      fprintf(stderr, "expected %.17g, got %.17g\n", tu_e_, tu_a_);                 \
    }                                                                               \
  } while (0)

#define EXPECT_NEAR_REL(e, a, rel)                                                  \
  do {                                                                              \
    double tu_e_ = (double)(e), tu_a_ = (double)(a), tu_r_ = (double)(rel);         \
    if (fabs(tu_a_ - tu_e_) <= tu_r_ * fabs(tu_e_)) tu_ok_();                       \
    else {                                                                          \
      tu_fail_(__FILE__, __LINE__, "EXPECT_NEAR_REL", #e ", " #a ", " #rel);        \
      fprintf(stderr, "expected %.17g (+-%g rel), got %.17g (rel err %g)\n", tu_e_, \
              tu_r_, tu_a_, tu_e_ != 0 ? fabs(tu_a_ - tu_e_) / fabs(tu_e_) : INFINITY); \
    }                                                                               \
  } while (0)

#define EXPECT_LE_U64(a, b)                                                         \
  do {                                                                              \
    uint64_t tu_x_ = (uint64_t)(a), tu_y_ = (uint64_t)(b);                          \
    if (tu_x_ <= tu_y_) tu_ok_();                                                   \
    else {                                                                          \
      tu_fail_(__FILE__, __LINE__, "EXPECT_LE_U64", #a ", " #b);                    \
      fprintf(stderr, "expected %" PRIu64 " <= %" PRIu64 "\n", tu_x_, tu_y_);       \
    }                                                                               \
  } while (0)

#define EXPECT_GE_U64(a, b)                                                         \
  do {                                                                              \
    uint64_t tu_x_ = (uint64_t)(a), tu_y_ = (uint64_t)(b);                          \
    if (tu_x_ >= tu_y_) tu_ok_();                                                   \
    else {                                                                          \
      tu_fail_(__FILE__, __LINE__, "EXPECT_GE_U64", #a ", " #b);                    \
      fprintf(stderr, "expected %" PRIu64 " >= %" PRIu64 "\n", tu_x_, tu_y_);       \
    }                                                                               \
  } while (0)

#define EXPECT_TRUE(c)                                                              \
  do {                                                                              \
    if (c) tu_ok_();                                                                \
    else {                                                                          \
      tu_fail_(__FILE__, __LINE__, "EXPECT_TRUE", #c);                              \
      fprintf(stderr, "expected true, got false\n");                                \
    }                                                                               \
  } while (0)

#define EXPECT_FALSE(c)                                                             \
  do {                                                                              \
    if (!(c)) tu_ok_();                                                             \
    else {                                                                          \
      tu_fail_(__FILE__, __LINE__, "EXPECT_FALSE", #c);                             \
      fprintf(stderr, "expected false, got true\n");                                \
    }                                                                               \
  } while (0)

#define EXPECT_STREQ(e, a)                                                          \
  do {                                                                              \
    const char *tu_e_ = (e), *tu_a_ = (a);                                          \
    if ((tu_e_ == NULL && tu_a_ == NULL) ||                                         \
        (tu_e_ != NULL && tu_a_ != NULL && strcmp(tu_e_, tu_a_) == 0))              \
      tu_ok_();                                                                     \
    else {                                                                          \
      tu_fail_(__FILE__, __LINE__, "EXPECT_STREQ", #e ", " #a);                     \
      fprintf(stderr, "expected \"%s\", got \"%s\"\n", tu_e_ ? tu_e_ : "(null)",    \
              tu_a_ ? tu_a_ : "(null)");                                            \
    }                                                                               \
  } while (0)

#define EXPECT_CONTAINS(h, n)                                                       \
  do {                                                                              \
    const char *tu_h_ = (h), *tu_n_ = (n);                                          \
    if (tu_h_ != NULL && tu_n_ != NULL && strstr(tu_h_, tu_n_) != NULL) tu_ok_();   \
    else {                                                                          \
      tu_fail_(__FILE__, __LINE__, "EXPECT_CONTAINS", #h ", " #n);                  \
      fprintf(stderr, "expected to find \"%s\" in:\n%s\n",                          \
              tu_n_ ? tu_n_ : "(null)", tu_h_ ? tu_h_ : "(null)");                  \
    }                                                                               \
  } while (0)

#define EXPECT_NULL(p)                                                              \
  do {                                                                              \
    const void *tu_p_ = (const void *)(p);                                          \
    if (tu_p_ == NULL) tu_ok_();                                                    \
    else {                                                                          \
      tu_fail_(__FILE__, __LINE__, "EXPECT_NULL", #p);                              \
      fprintf(stderr, "expected NULL, got %p\n", tu_p_);                            \
    }                                                                               \
  } while (0)

#define EXPECT_NOT_NULL(p)                                                          \
  do {                                                                              \
    const void *tu_p_ = (const void *)(p);                                          \
    if (tu_p_ != NULL) tu_ok_();                                                    \
    else {                                                                          \
      tu_fail_(__FILE__, __LINE__, "EXPECT_NOT_NULL", #p);                          \
      fprintf(stderr, "expected non-NULL, got NULL\n");                             \
    }                                                                               \
  } while (0)

/* Failures so far (lets a test stop early when setup failed). */
static inline unsigned long tu_failures(void) { return tu_failed_; }

static inline int tu_done_(const char *file) {
  fflush(stderr);
  printf("%s: ", file);
  printf("%lu passed, %lu failed\n", tu_passed_, tu_failed_);
  return tu_failed_ ? 1 : 0;
}
#define TU_DONE() tu_done_(__FILE__)

#endif
