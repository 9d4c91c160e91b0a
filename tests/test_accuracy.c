/* test_accuracy.c — quantiles against the exact nearest-rank order
 * statistic x(ceil(q*N)) on many distributions, 1 us .. 1 h.
 *
 * The contract (ttft.h, ttft_snapshot_quantile): within 0.5 % relative
 * error; q = 0 is the exact min and q = 1 the exact max; never decreasing
 * in q; always within [min, max]; the mean is exact (sum / count).
 * Values are recorded through the public hooks with caller timestamps, as
 * TTFT (begin at t0, first token at t0 + v) and as ITL gaps of one long
 * sequence. A test per distribution and recording (ttft_<dist>: TTFT and
 * E2E; itl_<dist>: ITL and the sequence's worst gap), each seeding its own
 * values so that it runs alone; sample_sizes covers N = 1 .. 40. The worst
 * relative error seen is printed after each test. */
#include <stdlib.h>

#include "ttft.h"
#include "task.h"

#define US UINT64_C(1000)
#define SEC UINT64_C(1000000000)
#define HOUR (3600 * SEC)
#define T0 UINT64_C(1000)

static const double qs[] = {0,   0.001, 0.01, 0.1,  0.25,  0.5,
                            0.75, 0.9,  0.95, 0.99, 0.999, 1};

static double g_worst;          /* worst relative error over every check */
static char g_worst_where[96];
static double g_worst_q;

/* ------------------------------------------------------------ the PRNG */
static uint64_t g_rng;
static uint64_t splitmix64(void) {
  uint64_t z = (g_rng += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}
/* uniform in (0, 1) */
static double unif(void) { return ((double)(splitmix64() >> 11) + 0.5) / 9007199254740992.0; }
static double normal(void) {
  return sqrt(-2.0 * log(unif())) * cos(6.283185307179586 * unif());
}

static uint64_t clamp_range(double v) {
  if (v < (double)US) return US;
  if (v > (double)HOUR) return HOUR;
  return (uint64_t)v;
}

/* ------------------------------------------------------- distributions */
typedef enum dist {
  D_UNIFORM,     /* 1 ms .. 2 s                       */
  D_LOGUNIFORM,  /* 1 us .. 1 h, log-uniform          */
  D_LOGNORMAL,   /* median 200 ms, sigma 1            */
  D_BIMODAL,     /* 90 % around 50 ms, 10 % around 8 s */
  D_PARETO,      /* alpha 1.1 from 1 ms: heavy tail   */
  D_EDGES,       /* exactly 1 us and exactly 1 h      */
  D_SINGLE,      /* one value                         */
  D_ALL_EQUAL,   /* N times 123456789                 */
  D_TWO,         /* two values                        */
  D_SMALL_INTS,  /* 1 us .. 1 us + 999 ns, integers   */
  D_COUNT
} dist;

static const char *const dist_names[D_COUNT] = {
    "uniform 1ms-2s", "log-uniform 1us-1h", "lognormal", "bimodal",  "pareto a=1.1",
    "edges 1us+1h",   "single value",       "all equal", "two values", "narrow 1us+[0,1us)"};

static size_t gen(dist d, uint64_t *v, size_t n) {
  switch (d) {
  case D_UNIFORM:
    for (size_t i = 0; i < n; i++) v[i] = clamp_range(1e6 + unif() * (2e9 - 1e6));
    return n;
  case D_LOGUNIFORM:
    for (size_t i = 0; i < n; i++) v[i] = clamp_range(exp(log(1e3) + unif() * (log(3.6e12) - log(1e3))));
    return n;
  case D_LOGNORMAL:
    for (size_t i = 0; i < n; i++) v[i] = clamp_range(2e8 * exp(normal()));
    return n;
  case D_BIMODAL:
    for (size_t i = 0; i < n; i++)
      v[i] = clamp_range(unif() < 0.9 ? 5e7 * exp(0.2 * normal()) : 8e9 * exp(0.3 * normal()));
    return n;
  case D_PARETO:
    for (size_t i = 0; i < n; i++) v[i] = clamp_range(1e6 / pow(unif(), 1.0 / 1.1));
    return n;
  case D_EDGES:
    for (size_t i = 0; i < n; i++) v[i] = (i % 3 == 0) ? HOUR : US;
    return n;
  case D_SINGLE:
    v[0] = 987654321;
    return 1;
  case D_ALL_EQUAL:
    for (size_t i = 0; i < n; i++) v[i] = 123456789;
    return n;
  case D_TWO:
    v[0] = 2 * SEC;
    v[1] = 3 * US;
    return 2;
  case D_SMALL_INTS:
    for (size_t i = 0; i < n; i++) v[i] = US + splitmix64() % 1000;
    return n;
  default: return 0;
  }
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* x(ceil(q*N)), computed the way the contract states it: q is the decimal
 * it was written as; every q here is k/1000, so the rank is
 * ceil(k * N / 1000) in integers (test_quantile_rank checks exactly this
 * rank for every k/100 and k/1000) */
static uint64_t exact_quantile(const uint64_t *sorted, size_t n, double q) {
  if (q <= 0) return sorted[0];
  uint64_t k = (uint64_t)(q * 1000.0 + 0.5);
  size_t rank = (size_t)((k * (uint64_t)n + 999) / 1000);
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  return sorted[rank - 1];
}

/* ------------------------------------------------------------- checks */
static void check(const ttft_snapshot *s, ttft_metric m, const uint64_t *sorted, size_t n,
                  const char *what) {
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i++) sum += sorted[i];
  uint64_t min = sorted[0], max = sorted[n - 1];
  unsigned long fails_before = tu_failures();

  EXPECT_EQ_U64(n, ttft_snapshot_count(s, m));
  EXPECT_EQ_U64(sum, ttft_snapshot_sum(s, m));
  EXPECT_NEAR_REL((double)sum / (double)n, ttft_snapshot_mean(s, m), 1e-15);
  EXPECT_EQ_U64(min, ttft_snapshot_quantile(s, m, 0.0));
  EXPECT_EQ_U64(max, ttft_snapshot_quantile(s, m, 1.0));

  for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
    uint64_t want = exact_quantile(sorted, n, qs[i]);
    uint64_t got = ttft_snapshot_quantile(s, m, qs[i]);
    double err = fabs((double)got - (double)want) / (double)want;
    if (err > g_worst) {
      g_worst = err;
      snprintf(g_worst_where, sizeof g_worst_where, "%s", what);
      g_worst_q = qs[i];
    }
    EXPECT_NEAR_REL(want, got, 0.005);
  }

  /* monotone in q and within [min, max], on a fine grid */
  uint64_t prev = 0;
  int monotone = 1, inside = 1;
  for (int k = 0; k <= 2000; k++) {
    uint64_t v = ttft_snapshot_quantile(s, m, k / 2000.0);
    if (v < prev) monotone = 0;
    if (v < min || v > max) inside = 0;
    prev = v;
  }
  EXPECT_TRUE(monotone);
  EXPECT_TRUE(inside);
  if (tu_failures() != fails_before) fprintf(stderr, "  (in: %s)\n", what);
}

static ttft_registry *reg_new(void) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 64;
  c.max_threads = 1;
  c.max_classes = 1;
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  return r;
}

/* every value as the TTFT of its own sequence */
static void run_ttft(dist d, uint64_t *v, size_t n) {
  ttft_registry *r = reg_new();
  if (!r) return;
  for (size_t i = 0; i < n; i++) {
    ttft_seq q = ttft_begin(r, T0);
    if (!q || ttft_token_emitted(r, q, 1, T0 + v[i]) != TTFT_OK ||
        ttft_stream_end(r, q, TTFT_COMPLETED, T0 + v[i]) != TTFT_OK) {
      EXPECT_TRUE(!"recording failed");
      break;
    }
  }
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_NOT_NULL(s);
  if (s) {
    char what[96];
    snprintf(what, sizeof what, "TTFT, %s, N=%zu", dist_names[d], n);
    qsort(v, n, sizeof *v, cmp_u64);
    check(s, TTFT_METRIC_TTFT, v, n, what);
    /* E2E saw the same values */
    snprintf(what, sizeof what, "E2E, %s, N=%zu", dist_names[d], n);
    check(s, TTFT_METRIC_E2E, v, n, what);
  }
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* every value as one ITL gap of one long sequence */
static void run_itl(dist d, uint64_t *v, size_t n) {
  ttft_registry *r = reg_new();
  if (!r) return;
  ttft_seq q = ttft_begin(r, T0);
  uint64_t t = T0 + 10 * US;
  int ok = q && ttft_token_emitted(r, q, 1, t) == TTFT_OK;
  for (size_t i = 0; ok && i < n; i++) {
    t += v[i];
    ok = ttft_token_emitted(r, q, 1, t) == TTFT_OK;
  }
  ok = ok && ttft_stream_end(r, q, TTFT_COMPLETED, t) == TTFT_OK;
  EXPECT_TRUE(ok);
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_NOT_NULL(s);
  if (s) {
    char what[96];
    snprintf(what, sizeof what, "ITL, %s, N=%zu", dist_names[d], n);
    qsort(v, n, sizeof *v, cmp_u64);
    check(s, TTFT_METRIC_ITL, v, n, what);
    /* the sequence's worst gap is exact */
    EXPECT_EQ_U64(v[n - 1], ttft_snapshot_quantile(s, TTFT_METRIC_SEQ_ITL_MAX, 0.5));
  }
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* ------------------------------------------------------------- tests */
enum { N_MAX = 100000 };
static uint64_t g_v[N_MAX];

static void worst_reset(void) {
  g_worst = 0;
  g_worst_where[0] = '\0';
  g_worst_q = 0;
}

static void worst_print(void) {
  if (g_worst_where[0])
    printf("worst relative quantile error: %.4f %% (%s, q=%g); contract: 0.5 %%\n", 100.0 * g_worst,
           g_worst_where, g_worst_q);
}

TU_SETUP(worst_reset)
TU_TEARDOWN(worst_print)

/* N = 100000 values of d, each the TTFT of its own sequence */
static void ttft_of(dist d) {
  TU_SECTION(dist_names[d]);
  g_rng = UINT64_C(0x5EED0000) + (uint64_t)d;
  size_t n = gen(d, g_v, N_MAX);
  run_ttft(d, g_v, n);
}

/* 5000 values of d (20000 for the wide ones) as the ITL gaps of one sequence */
static void itl_of(dist d) {
  TU_SECTION(dist_names[d]);
  g_rng = UINT64_C(0xC0FFEE00) + (uint64_t)d;
  size_t n = gen(d, g_v, d == D_LOGUNIFORM || d == D_PARETO ? 20000 : 5000);
  run_itl(d, g_v, n);
}

TEST(ttft_uniform) { ttft_of(D_UNIFORM); }
TEST(itl_uniform) { itl_of(D_UNIFORM); }
TEST(ttft_loguniform) { ttft_of(D_LOGUNIFORM); }
TEST(itl_loguniform) { itl_of(D_LOGUNIFORM); }
TEST(ttft_lognormal) { ttft_of(D_LOGNORMAL); }
TEST(itl_lognormal) { itl_of(D_LOGNORMAL); }
TEST(ttft_bimodal) { ttft_of(D_BIMODAL); }
TEST(itl_bimodal) { itl_of(D_BIMODAL); }
TEST(ttft_pareto) { ttft_of(D_PARETO); }
TEST(itl_pareto) { itl_of(D_PARETO); }
TEST(ttft_edges) { ttft_of(D_EDGES); }
TEST(itl_edges) { itl_of(D_EDGES); }
TEST(ttft_single_value) { ttft_of(D_SINGLE); }
TEST(itl_single_value) { itl_of(D_SINGLE); }
TEST(ttft_all_equal) { ttft_of(D_ALL_EQUAL); }
TEST(itl_all_equal) { itl_of(D_ALL_EQUAL); }
TEST(ttft_two_values) { ttft_of(D_TWO); }
TEST(itl_two_values) { itl_of(D_TWO); }
TEST(ttft_narrow) { ttft_of(D_SMALL_INTS); }
TEST(itl_narrow) { itl_of(D_SMALL_INTS); }

/* sizes that make ceil(q*N) land on every kind of boundary */
TEST(sample_sizes) {
  for (size_t n = 1; n <= 40; n++) {
    g_rng = UINT64_C(0xABCD00) + n;
    gen(D_LOGUNIFORM, g_v, n);
    run_ttft(D_LOGUNIFORM, g_v, n);
  }
}

TU_MAIN()
