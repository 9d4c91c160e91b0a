/*
 * test_quantile_rank.c — nearest rank without floating-point error.
 *
 * SPEC: "the rank is ceil(q*N) computed without floating-point error, so
 * q = 0.07 of 100 values is x(7), never x(8)": q is the decimal it was
 * written as. Checked for every q = k/100 and k/1000 against x(ceil(qN))
 * worked out in integer arithmetic:
 *
 *  - N = 1 .. 300, the values 1 .. N (below 256 a value has a bucket of its
 *    own, so the quantile is the exact order statistic);
 *  - N from 1000 to 10^14 and odd ones between: 1000 groups of equal
 *    values whose boundaries sit exactly at the ranks ceil(kN/1000), each
 *    group in a bucket of its own, recorded as token-weighted ITL (one
 *    emission of n tokens after a gap of v*n adds n observations of v), so
 *    that rank ceil(qN) + 1 or - 1 would answer a different group;
 *  - the SPEC's example on TTFT (100 values 1 .. 100 ms), the per-status
 *    views, and q that are not short decimals (0.1 + 0.2, the double after
 *    0.07, 1/3): the decimal they print as decides.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ttft.h"
#include "task.h"

#define T0 UINT64_C(1000000000)

/* The bucket layout of docs/design.md, written out independently: below
 * 256 a bucket per value; above, 128 buckets per power of two. */
static uint64_t bucket_lo(uint32_t i) {
  if (i < 256) return i;
  return (uint64_t)(128 + i % 128) << (i / 128 - 1);
}
static uint64_t bucket_mid(uint32_t i) {
  uint64_t lo = bucket_lo(i), hi = bucket_lo(i + 1) - 1;
  return lo + (hi - lo) / 2;
}

/* ceil(k * n / d) exactly (k <= d <= 1000, n < 2^64 / 1000 here) */
static uint64_t rank_of(uint64_t k, uint64_t n, uint64_t d) {
  uint64_t r = (k * n + d - 1) / d;
  return r < 1 ? 1 : r;
}

static ttft_registry *small_registry(void) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 4;
  c.max_threads = 1;
  return ttft_registry_new(&c);
}

/* n observations of v as token-weighted ITL: emissions of up to 2^32 - 1
 * tokens after a gap of v * tokens */
static uint64_t record_many(ttft_registry *r, ttft_seq s, uint64_t t, uint64_t v, uint64_t n) {
  while (n) {
    uint32_t k = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
    t += v * k;
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, k, t));
    n -= k;
  }
  return t;
}

static const double *k_qs(size_t *nq) {
  static double qs[1000 + 100 + 2];
  static size_t n;
  if (!n) {
    for (int k = 0; k <= 100; k++) qs[n++] = k / 100.0;
    for (int k = 0; k <= 1000; k++) qs[n++] = k / 1000.0;
  }
  *nq = n;
  return qs;
}

TEST(small_n_exact_order_statistic) {
  TU_SECTION("N = 1 .. 300, values 1 .. N: q = k/100 and k/1000 give x(ceil(qN)) exactly");
  unsigned long checks = 0, wrong = 0;
  for (uint64_t n = 1; n <= 300; n++) {
    ttft_registry *r = small_registry();
    ttft_seq s = ttft_begin(r, T0);
    uint64_t t = T0 + 10;
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t));
    /* values 1 .. min(n, 255) once each in their own exact bucket; above
     * 255 (n > 255) the values are bucket edges, answered by midpoints */
    for (uint64_t v = 1; v <= n; v++) t = record_many(r, s, t, v < 256 ? v : bucket_lo((uint32_t)v), 1);
    ttft_snapshot *snap = ttft_snapshot_take(r);
    for (int d = 100; d <= 1000; d += 900)
      for (uint64_t k = 0; k <= (uint64_t)d; k++) {
        uint64_t rank = k == 0 ? 1 : rank_of(k, n, (uint64_t)d);
        uint64_t want = rank < 256 ? rank : bucket_mid((uint32_t)rank);
        if (rank == n) want = n < 256 ? n : bucket_lo((uint32_t)n); /* the exact max */
        uint64_t got = ttft_snapshot_quantile(snap, TTFT_METRIC_ITL_PER_TOKEN, (double)k / d);
        checks++;
        if (got != want) {
          if (wrong++ < 10)
            fprintf(stderr, "   N=%llu q=%llu/%d: got %llu, want x(%llu) = %llu\n", (unsigned long long)n,
                    (unsigned long long)k, d, (unsigned long long)got, (unsigned long long)rank,
                    (unsigned long long)want);
        }
      }
    ttft_snapshot_free(snap);
    ttft_registry_free(r);
  }
  printf("small N: %lu quantiles checked, %lu wrong\n", checks, wrong);
  EXPECT_EQ_U64(0, wrong);
  EXPECT_EQ_U64(300 * 1102, checks);
}

/* 1000 groups: group g (1 .. 1000) holds the ranks (B(g-1), B(g)] with
 * B(g) = ceil(g N / 1000), all equal to the lower edge of bucket g + 1. */
TEST(large_n_group_boundaries) {
  TU_SECTION("large N: group boundaries at every ceil(kN/1000)");
  static const uint64_t ns[] = {1000,          1001,          4099,        65536,
                                1000000,       1000003,       UINT64_C(4294967311),
                                UINT64_C(99999999977), UINT64_C(100000000000000)};
  size_t nq;
  const double *qs = k_qs(&nq);
  (void)qs;
  unsigned long checks = 0, wrong = 0;
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    uint64_t n = ns[i];
    ttft_registry *r = small_registry();
    ttft_seq s = ttft_begin(r, T0);
    uint64_t t = T0 + 10;
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t));
    uint64_t prev = 0;
    for (uint32_t g = 1; g <= 1000; g++) {
      uint64_t b = rank_of(g, n, 1000);
      t = record_many(r, s, t, bucket_lo(g + 1), b - prev);
      prev = b;
    }
    ttft_snapshot *snap = ttft_snapshot_take(r);
    EXPECT_EQ_U64(n, ttft_snapshot_count(snap, TTFT_METRIC_ITL_PER_TOKEN));
    for (int d = 100; d <= 1000; d += 900)
      for (uint64_t k = 0; k <= (uint64_t)d; k++) {
        uint64_t rank = k == 0 ? 1 : rank_of(k, n, (uint64_t)d);
        /* the group of that rank: the first g with B(g) >= rank */
        uint32_t g = (uint32_t)(rank * 1000 / n);
        if (g < 1) g = 1;
        while (g > 1 && rank_of(g - 1, n, 1000) >= rank) g--;
        while (rank_of(g, n, 1000) < rank) g++;
        uint64_t want = g + 1 < 256 ? g + 1 : bucket_mid(g + 1);
        if (k == 0) want = bucket_lo(2);           /* exact min */
        if (rank == n) want = bucket_lo(1001);     /* exact max */
        uint64_t got = ttft_snapshot_quantile(snap, TTFT_METRIC_ITL_PER_TOKEN, (double)k / d);
        checks++;
        if (got != want && wrong++ < 10)
          fprintf(stderr, "   N=%llu q=%llu/%d: got %llu, want group %u = %llu (rank %llu)\n",
                  (unsigned long long)n, (unsigned long long)k, d, (unsigned long long)got, g,
                  (unsigned long long)want, (unsigned long long)rank);
      }
    ttft_snapshot_free(snap);
    ttft_registry_free(r);
  }
  printf("large N: %lu quantiles checked, %lu wrong\n", checks, wrong);
  EXPECT_EQ_U64(0, wrong);
}

/* N = 100 values 1 .. 100 ms as TTFT (and so as the completed TTFT view) */
TEST(spec_example_ttft_and_view) {
  TU_SECTION("the SPEC's example: 100 values 1 .. 100 ms, q = 0.07 is x(7), q = 0.55 is x(55)");
  ttft_registry *r = small_registry();
  for (uint64_t v = 1; v <= 100; v++) {
    uint64_t t = T0 + v * UINT64_C(1000000000);
    ttft_seq s = ttft_begin(r, t);
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t + v * 1000000));
    EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, t + v * 1000000 + 1));
  }
  ttft_snapshot *s = ttft_snapshot_take(r);
  static const struct {
    double q;
    uint64_t rank;
  } cases[] = {
      {0.07, 7}, {0.55, 55}, {0.01, 1}, {0.29, 29}, {0.57, 57}, {0.58, 58}, {0.99, 99},
      {0.1 + 0.2, 31},              /* prints as 0.30000000000000004: just above 30 */
      {0.07000000000000002, 8},     /* the double after 0.07 */
      {1.0 / 3.0, 34},              /* 0.3333333333333333 * 100 = 33.33..: 34 */
      {0.069999999999999993, 7},    /* the double 0.07 written with 17 digits */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint64_t want = cases[i].rank * 1000000;
    uint64_t got = ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, cases[i].q);
    uint64_t view = ttft_snapshot_status_quantile(s, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_TTFT, cases[i].q);
    EXPECT_NEAR_REL((double)want, (double)got, 0.005);
    /* and not the neighbour (the order statistics are >= 1 % apart) */
    EXPECT_TRUE(got > (cases[i].rank - 1) * 1000000 + 500000 && got < (cases[i].rank + 1) * 1000000 - 500000);
    EXPECT_EQ_U64(got, view);
  }
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* q = 1/3 and 2/3 of N = 3: 0.3333333333333333 * 3 is just below 1 */
TEST(thirds_of_three_values) {
  TU_SECTION("q that are not short decimals: 1/3, 2/3 of 3 values");
  ttft_registry *r = small_registry();
  ttft_seq s = ttft_begin(r, T0);
  uint64_t t = T0 + 10;
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t));
  for (uint64_t v = 10; v <= 30; v += 10) t = record_many(r, s, t, v, 1);
  ttft_snapshot *snap = ttft_snapshot_take(r);
  EXPECT_EQ_U64(10, ttft_snapshot_quantile(snap, TTFT_METRIC_ITL_PER_TOKEN, 1.0 / 3.0));
  EXPECT_EQ_U64(20, ttft_snapshot_quantile(snap, TTFT_METRIC_ITL_PER_TOKEN, 2.0 / 3.0));
  EXPECT_EQ_U64(30, ttft_snapshot_quantile(snap, TTFT_METRIC_ITL_PER_TOKEN, 0.67));
  EXPECT_EQ_U64(10, ttft_snapshot_quantile(snap, TTFT_METRIC_ITL_PER_TOKEN, 4.9e-324)); /* subnormal q */
  ttft_snapshot_free(snap);
  ttft_registry_free(r);
}

TU_MAIN()
