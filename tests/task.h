/*
 * task.h — the test harness: typed expectations that print what they
 * expected and what they got and let the run go on, and tests registered
 * by name so that any one of them runs alone.
 *
 *   TEST(name) { ... }             defines and registers test "name"
 *   TU_MAIN()                      the program's main(): with no argument
 *                                  it runs every test in definition order;
 *                                  with names, those tests; --list prints
 *                                  the names (CMake registers each with
 *                                  ctest as <program>.<name>.<lib kind>)
 *   TU_SETUP(fn) / TU_TEARDOWN(fn) a function run before / after each test
 *
 *   EXPECT_EQ_U64(expected, actual)     uint64_t
 *   EXPECT_EQ_INT(expected, actual)     long long
 *   EXPECT_ERR(expected, actual)        TTFT_E* codes, printed by name
 *   EXPECT_EQ_DBL(expected, actual)     exact double equality
 *   EXPECT_NEAR_REL(expected, actual, rel)   |a - e| <= rel * |e|
 *   EXPECT_LE_U64(a, b) / EXPECT_GE_U64(a, b) / EXPECT_LT_U64 / EXPECT_GT_U64
 *   EXPECT_LE_INT(a, b) / EXPECT_GE_INT(a, b) / EXPECT_LT_INT / EXPECT_GT_INT
 *                                       the same orderings over long long
 *   EXPECT_TRUE(cond) / EXPECT_FALSE(cond)
 *   EXPECT_STREQ(expected, actual)      NULL-safe
 *   EXPECT_CONTAINS(haystack, needle)   strstr, NULL-safe
 *   EXPECT_NULL(p) / EXPECT_NOT_NULL(p)
 *
 * Every expectation is one use of TU_EXPECT_ (below): it evaluates each
 * argument once into a typed local, counts a pass, or prints
 * "file:line: MACRO(expressions): expected X, got Y" to stderr and counts
 * a failure. TU_SECTION("text") prints a progress line for context.
 * A program's exit status is 1 when anything failed (or a named test does
 * not exist), else 0; the last line of output is "N passed, N failed".
 */
#ifndef TTFT_TEST_TASK_H
#define TTFT_TEST_TASK_H

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Expectations may be made from several threads: the counts are atomic. */
static _Atomic unsigned long tu_passed_, tu_failed_;

static inline void tu_ok_(void) { atomic_fetch_add_explicit(&tu_passed_, 1, memory_order_relaxed); }

static inline void tu_fail_(const char *file, int line, const char *what, const char *exprs) {
  atomic_fetch_add_explicit(&tu_failed_, 1, memory_order_relaxed);
  fprintf(stderr, "%s:%d: %s(%s): ", file, line, what, exprs);
}

#define TU_SECTION(name) fprintf(stderr, "-- %s\n", (name))

/* The one base: X and Y are evaluated once into locals tu_x_ and tu_y_ of
 * type T; PASS is an expression over them; REPORT prints the complaint
 * (after the location) when PASS is false. */
#define TU_EXPECT_(NAME, T, X, Y, EXPRS, PASS, REPORT)                          \
  do {                                                                           \
    T tu_x_ = (T)(X);                                                            \
    T tu_y_ = (T)(Y);                                                            \
    (void)tu_y_;                                                                 \
    if (PASS) tu_ok_();                                                          \
    else {                                                                       \
      tu_fail_(__FILE__, __LINE__, NAME, EXPRS);                                 \
      REPORT;                                                                    \
    }                                                                            \
  } while (0)

/* expected X, got Y — for equality */
#define TU_EQ_(NAME, T, FMT, e, a)                                                \
  TU_EXPECT_(NAME, T, e, a, #e ", " #a, tu_x_ == tu_y_,                          \
             fprintf(stderr, "expected " FMT ", got " FMT "\n", tu_x_, tu_y_))
/* expected X op Y — for orderings */
#define TU_CMP_(NAME, T, FMT, x, OP, y)                                           \
  TU_EXPECT_(NAME, T, x, y, #x ", " #y, tu_x_ OP tu_y_,                          \
             fprintf(stderr, "expected " FMT " " #OP " " FMT "\n", tu_x_, tu_y_))

#define EXPECT_EQ_U64(e, a) TU_EQ_("EXPECT_EQ_U64", uint64_t, "%" PRIu64, e, a)
#define EXPECT_EQ_INT(e, a) TU_EQ_("EXPECT_EQ_INT", long long, "%lld", e, a)
#define EXPECT_EQ_DBL(e, a) TU_EQ_("EXPECT_EQ_DBL", double, "%.17g", e, a)
#define EXPECT_LE_U64(a, b) TU_CMP_("EXPECT_LE_U64", uint64_t, "%" PRIu64, a, <=, b)
#define EXPECT_GE_U64(a, b) TU_CMP_("EXPECT_GE_U64", uint64_t, "%" PRIu64, a, >=, b)
#define EXPECT_LT_U64(a, b) TU_CMP_("EXPECT_LT_U64", uint64_t, "%" PRIu64, a, <, b)
#define EXPECT_GT_U64(a, b) TU_CMP_("EXPECT_GT_U64", uint64_t, "%" PRIu64, a, >, b)
#define EXPECT_LE_INT(a, b) TU_CMP_("EXPECT_LE_INT", long long, "%lld", a, <=, b)
#define EXPECT_GE_INT(a, b) TU_CMP_("EXPECT_GE_INT", long long, "%lld", a, >=, b)
#define EXPECT_LT_INT(a, b) TU_CMP_("EXPECT_LT_INT", long long, "%lld", a, <, b)
#define EXPECT_GT_INT(a, b) TU_CMP_("EXPECT_GT_INT", long long, "%lld", a, >, b)

#define EXPECT_TRUE(c)                                                            \
  TU_EXPECT_("EXPECT_TRUE", int, !!(c), 1, #c, tu_x_ == tu_y_,                   \
             fprintf(stderr, "expected true, got false\n"))
#define EXPECT_FALSE(c)                                                           \
  TU_EXPECT_("EXPECT_FALSE", int, !!(c), 0, #c, tu_x_ == tu_y_,                  \
             fprintf(stderr, "expected false, got true\n"))

#define EXPECT_NEAR_REL(e, a, rel)                                                \
  TU_EXPECT_("EXPECT_NEAR_REL", double, e, a, #e ", " #a ", " #rel,              \
             fabs(tu_y_ - tu_x_) <= (double)(rel) * fabs(tu_x_),                 \
             fprintf(stderr, "expected %.17g (+-%g rel), got %.17g (rel err %g)\n", tu_x_, \
                     (double)(rel), tu_y_,                                       \
                     tu_x_ != 0 ? fabs(tu_y_ - tu_x_) / fabs(tu_x_) : INFINITY))

static inline int tu_streq_(const char *e, const char *a) {
  return (!e && !a) || (e && a && strcmp(e, a) == 0);
}
#define EXPECT_STREQ(e, a)                                                        \
  TU_EXPECT_("EXPECT_STREQ", const char *, e, a, #e ", " #a, tu_streq_(tu_x_, tu_y_), \
             fprintf(stderr, "expected \"%s\", got \"%s\"\n", tu_x_ ? tu_x_ : "(null)", \
                     tu_y_ ? tu_y_ : "(null)"))
#define EXPECT_CONTAINS(h, n)                                                     \
  TU_EXPECT_("EXPECT_CONTAINS", const char *, h, n, #h ", " #n,                  \
             tu_x_ && tu_y_ && strstr(tu_x_, tu_y_),                             \
             fprintf(stderr, "expected to find \"%s\" in:\n%s\n", tu_y_ ? tu_y_ : "(null)", \
                     tu_x_ ? tu_x_ : "(null)"))
#define EXPECT_NULL(p)                                                            \
  TU_EXPECT_("EXPECT_NULL", const void *, p, NULL, #p, tu_x_ == NULL,            \
             fprintf(stderr, "expected NULL, got %p\n", tu_x_))
#define EXPECT_NOT_NULL(p)                                                        \
  TU_EXPECT_("EXPECT_NOT_NULL", const void *, p, NULL, #p, tu_x_ != NULL,        \
             fprintf(stderr, "expected non-NULL, got NULL\n"))

#ifdef TTFT_H
#define EXPECT_ERR(e, a)                                                          \
  TU_EXPECT_("EXPECT_ERR", long long, e, a, #e ", " #a, tu_x_ == tu_y_,          \
             fprintf(stderr, "expected %s (%lld), got %s (%lld)\n", ttft_err_name((int)tu_x_), \
                     tu_x_, ttft_err_name((int)tu_y_), tu_y_))
#endif

/* Failures so far (lets a test stop early when its setup failed). */
static inline unsigned long tu_failures(void) { return atomic_load(&tu_failed_); }

/* ------------------------------------------------------------ registry */
typedef struct tu_test {
  const char *name;
  void (*fn)(void);
  struct tu_test *next;
} tu_test;
static tu_test *tu_tests_, **tu_tail_ = &tu_tests_;
static void (*tu_setup_)(void), (*tu_teardown_)(void);

/* Constructors of one translation unit run in definition order, so the
 * list keeps the order of the file. */
#define TEST(name)                                                                \
  static void test_##name(void);                                                 \
  static tu_test tu_reg_##name = {#name, test_##name, NULL};                     \
  __attribute__((constructor)) static void tu_register_##name(void) {            \
    *tu_tail_ = &tu_reg_##name;                                                  \
    tu_tail_ = &tu_reg_##name.next;                                              \
  }                                                                              \
  static void test_##name(void)

#define TU_SETUP(fn)                                                              \
  __attribute__((constructor)) static void tu_setup_register_(void) { tu_setup_ = (fn); }
#define TU_TEARDOWN(fn)                                                           \
  __attribute__((constructor)) static void tu_teardown_register_(void) { tu_teardown_ = (fn); }

static inline int tu_done_(const char *prog) {
  fflush(stderr);
  unsigned long ok = atomic_load(&tu_passed_), bad = atomic_load(&tu_failed_);
  printf("%s: %lu passed, %lu failed\n", prog, ok, bad);
  return bad ? 1 : 0;
}
#define TU_DONE() tu_done_(__FILE__)

static inline void tu_run_(const tu_test *t) {
  fprintf(stderr, "== %s\n", t->name);
  if (tu_setup_) tu_setup_();
  t->fn();
  if (tu_teardown_) tu_teardown_();
}

static inline int tu_main_(int argc, char **argv, const char *file) {
  if (argc > 1 && !strcmp(argv[1], "--list")) {
    for (const tu_test *t = tu_tests_; t; t = t->next) printf("%s\n", t->name);
    return 0;
  }
  if (argc <= 1) {
    for (const tu_test *t = tu_tests_; t; t = t->next) tu_run_(t);
  } else {
    for (int i = 1; i < argc; i++) {
      const tu_test *t = tu_tests_;
      while (t && strcmp(t->name, argv[i])) t = t->next;
      if (!t) {
        fprintf(stderr, "%s: no test named \"%s\" (--list shows them)\n", file, argv[i]);
        atomic_fetch_add(&tu_failed_, 1);
        continue;
      }
      tu_run_(t);
    }
  }
  return tu_done_(file);
}
#define TU_MAIN()                                                                 \
  int main(int argc, char **argv) { return tu_main_(argc, argv, __FILE__); }

#endif
