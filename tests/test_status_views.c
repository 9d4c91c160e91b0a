/*
 * test_status_views.c — issue 12, items 2 and 3 on the snapshot side: the
 * views by terminal status and token-weighted ITL, recorded through the
 * hooks with multi-token emissions and checked against the exact values:
 *
 *  - TTFT_METRIC_ITL_PER_TOKEN: exact count (tokens of every emission after
 *    the first), exact sum, quantiles within 0.5 % of the exact nearest-rank
 *    order statistic of the per-token values (an emission of n tokens after
 *    a gap d adds n values d/n); ITL beside it keeps one value per emission;
 *  - ttft_snapshot_status_count / _quantile for TTFT, TPOT, E2E and
 *    OUTPUT_TOKENS per status and per class, the same way;
 *  - the encoding, merge and delta carry both (counts add and subtract,
 *    quantiles of a merge of two copies equal the original's);
 *  - JSON, text and the expositions name them apart from ITL and from the
 *    all-streams metrics.
 *
 * Every test starts from the same recording (TU_SETUP: the RNG reset, the
 * 600 streams played, the exact values sorted, a snapshot taken); the
 * teardown frees it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"
#include "task.h"

#define MS UINT64_C(1000000)
#define T0 UINT64_C(1000000000)

typedef struct vec {
  uint64_t *v;
  size_t n, cap;
} vec;

static void push(vec *x, uint64_t v, uint64_t times) {
  while (times--) {
    if (x->n == x->cap) {
      x->cap = x->cap ? 2 * x->cap : 1024;
      x->v = realloc(x->v, x->cap * sizeof *x->v);
      if (!x->v) abort();
    }
    x->v[x->n++] = v;
  }
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* every q here is k/1000: rank ceil(k n / 1000) */
static const double QS[] = {0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0};
#define NQ (sizeof QS / sizeof QS[0])

static uint64_t exact(vec *x, double q) {
  if (q <= 0.0) return x->v[0];
  uint64_t k = (uint64_t)(q * 1000.0 + 0.5);
  uint64_t r = (k * x->n + 999) / 1000;
  if (r < 1) r = 1;
  return x->v[r - 1];
}

typedef struct truth {
  vec itl, per_token;
  vec view[3][4]; /* status x (ttft, tpot, e2e, tokens), over both classes */
  vec chat_completed_e2e;
  uint64_t per_token_sum;
} truth;

static const ttft_metric VIEWS[4] = {TTFT_METRIC_TTFT, TTFT_METRIC_TPOT, TTFT_METRIC_E2E,
                                     TTFT_METRIC_OUTPUT_TOKENS};

static uint64_t g_rng = 12345;
static uint64_t rnd(uint64_t n) {
  g_rng = g_rng * 6364136223846793005u + 1442695040888963407u;
  return (g_rng >> 33) % n;
}

/* 600 streams over two classes: 1..30 emissions of 1..8 tokens, gaps of
 * 1..200 ms, every status, some with no token */
static ttft_registry *record(truth *tr) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 8;
  c.max_threads = 1;
  ttft_registry *r = ttft_registry_new(&c);
  if (!r) return NULL;
  int chat = ttft_class_add(r, "chat", NULL);
  uint64_t t = T0;
  for (int i = 0; i < 600; i++) {
    ttft_request rq;
    ttft_request_init(&rq);
    rq.class_id = i % 3 ? chat : 0;
    ttft_seq s = ttft_begin_ex(r, &rq, t);
    uint64_t t_begin = t, t_first = 0, t_last = 0, tokens = 0;
    unsigned emissions = (unsigned)rnd(31);
    for (unsigned k = 0; k < emissions; k++) {
      uint64_t gap = (1 + rnd(200)) * MS + rnd(1000);
      uint32_t n = (uint32_t)(1 + (rnd(4) ? 0 : rnd(8)));
      t += gap;
      EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, n, t));
      if (k == 0) {
        t_first = t;
      } else {
        push(&tr->itl, gap, 1);
        push(&tr->per_token, gap / n, n);
        tr->per_token_sum += gap / n * n;
      }
      tokens += n;
      t_last = t;
    }
    t += 1 + rnd(5 * MS);
    ttft_status st = (ttft_status)(rnd(10) < 7 ? TTFT_COMPLETED : rnd(2) ? TTFT_CANCELLED : TTFT_ERROR);
    EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, st, t));
    if (emissions) push(&tr->view[st][0], t_first - t_begin, 1);
    if (emissions && tokens >= 2) push(&tr->view[st][1], (t_last - t_first) / (tokens - 1), 1);
    push(&tr->view[st][2], t - t_begin, 1);
    push(&tr->view[st][3], tokens, 1);
    if (rq.class_id == chat && st == TTFT_COMPLETED) push(&tr->chat_completed_e2e, t - t_begin, 1);
    t += 1000;
  }
  return r;
}

static void sort_all(truth *tr) {
  qsort(tr->itl.v, tr->itl.n, sizeof(uint64_t), cmp_u64);
  qsort(tr->per_token.v, tr->per_token.n, sizeof(uint64_t), cmp_u64);
  for (int st = 0; st < 3; st++)
    for (int v = 0; v < 4; v++)
      if (tr->view[st][v].n) qsort(tr->view[st][v].v, tr->view[st][v].n, sizeof(uint64_t), cmp_u64);
  qsort(tr->chat_completed_e2e.v, tr->chat_completed_e2e.n, sizeof(uint64_t), cmp_u64);
}

static void expect_quantiles(vec *x, const ttft_snapshot *s, int cls, int st, ttft_metric m, const char *what) {
  for (size_t i = 0; i < NQ; i++) {
    uint64_t want = exact(x, QS[i]);
    uint64_t got = st < 0 ? ttft_snapshot_class_quantile(s, cls, m, QS[i])
                          : ttft_snapshot_status_quantile(s, cls, (ttft_status)st, m, QS[i]);
    if (QS[i] == 0.0 || QS[i] == 1.0 || want < 256) {
      if (want != got) fprintf(stderr, "   %s q=%g: %llu, exact %llu\n", what, QS[i], (unsigned long long)got,
                               (unsigned long long)want);
      EXPECT_EQ_U64(want, got);
    } else {
      EXPECT_NEAR_REL((double)want, (double)got, 0.005);
    }
  }
}

static void check(const ttft_snapshot *s, truth *tr, uint64_t mult, const char *what) {
  /* token-weighted ITL next to ITL */
  EXPECT_EQ_U64(mult * tr->per_token.n, ttft_snapshot_count(s, TTFT_METRIC_ITL_PER_TOKEN));
  EXPECT_EQ_U64(mult * tr->per_token_sum, ttft_snapshot_sum(s, TTFT_METRIC_ITL_PER_TOKEN));
  EXPECT_EQ_U64(mult * tr->itl.n, ttft_snapshot_count(s, TTFT_METRIC_ITL));
  EXPECT_TRUE(tr->per_token.n > tr->itl.n); /* multi-token emissions happened */
  expect_quantiles(&tr->per_token, s, TTFT_CLASS_ALL, -1, TTFT_METRIC_ITL_PER_TOKEN, what);
  expect_quantiles(&tr->itl, s, TTFT_CLASS_ALL, -1, TTFT_METRIC_ITL, what);
  /* the views */
  for (int st = 0; st < 3; st++)
    for (int v = 0; v < 4; v++) {
      vec *x = &tr->view[st][v];
      EXPECT_EQ_U64(mult * x->n, ttft_snapshot_status_count(s, TTFT_CLASS_ALL, (ttft_status)st, VIEWS[v]));
      if (x->n) expect_quantiles(x, s, TTFT_CLASS_ALL, st, VIEWS[v], what);
    }
  /* TPOT view counts add up to TPOT */
  uint64_t tpot = 0;
  for (int st = 0; st < 3; st++) tpot += ttft_snapshot_status_count(s, TTFT_CLASS_ALL, (ttft_status)st, TTFT_METRIC_TPOT);
  EXPECT_EQ_U64(ttft_snapshot_count(s, TTFT_METRIC_TPOT), tpot);
  /* E2E views add up to E2E and to the ended counters */
  EXPECT_EQ_U64(ttft_snapshot_counter(s, TTFT_COUNTER_COMPLETED),
                ttft_snapshot_status_count(s, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_E2E));
  EXPECT_EQ_U64(ttft_snapshot_counter(s, TTFT_COUNTER_CANCELLED),
                ttft_snapshot_status_count(s, TTFT_CLASS_ALL, TTFT_CANCELLED, TTFT_METRIC_E2E));
  EXPECT_EQ_U64(ttft_snapshot_counter(s, TTFT_COUNTER_ERRORS),
                ttft_snapshot_status_count(s, TTFT_CLASS_ALL, TTFT_ERROR, TTFT_METRIC_E2E));
  /* per class */
  EXPECT_EQ_U64(mult * tr->chat_completed_e2e.n, ttft_snapshot_status_count(s, 1, TTFT_COMPLETED, TTFT_METRIC_E2E));
  expect_quantiles(&tr->chat_completed_e2e, s, 1, TTFT_COMPLETED, TTFT_METRIC_E2E, what);
  /* sums and means of the views: exact (no sum here comes near 2^64) */
  for (int st = 0; st < 3; st++)
    for (int v = 0; v < 4; v++) {
      vec *x = &tr->view[st][v];
      uint64_t sum = 0;
      for (size_t i = 0; i < x->n; i++) sum += x->v[i];
      EXPECT_EQ_U64(mult * sum, ttft_snapshot_status_sum(s, TTFT_CLASS_ALL, (ttft_status)st, VIEWS[v]));
      EXPECT_EQ_DBL(x->n ? (double)sum / (double)x->n : 0.0,
                    ttft_snapshot_status_mean(s, TTFT_CLASS_ALL, (ttft_status)st, VIEWS[v]));
    }
  {
    uint64_t sum = 0;
    for (size_t i = 0; i < tr->chat_completed_e2e.n; i++) sum += tr->chat_completed_e2e.v[i];
    EXPECT_EQ_U64(mult * sum, ttft_snapshot_status_sum(s, 1, TTFT_COMPLETED, TTFT_METRIC_E2E));
  }
  /* what has no view */
  EXPECT_EQ_U64(0, ttft_snapshot_status_count(s, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_ITL));
  EXPECT_EQ_U64(0, ttft_snapshot_status_quantile(s, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_ITL_PER_TOKEN, 0.5));
  EXPECT_EQ_U64(0, ttft_snapshot_status_sum(s, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_ITL));
  EXPECT_EQ_DBL(0.0, ttft_snapshot_status_mean(s, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_QUEUE));
  EXPECT_EQ_U64(0, ttft_snapshot_status_sum(s, TTFT_CLASS_ALL, TTFT_STATUS_COUNT_, TTFT_METRIC_E2E));
  EXPECT_EQ_U64(0, ttft_snapshot_status_sum(s, 7, TTFT_COMPLETED, TTFT_METRIC_E2E));
  EXPECT_EQ_U64(0, ttft_snapshot_status_sum(NULL, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_E2E));
  EXPECT_EQ_DBL(0.0, ttft_snapshot_status_mean(NULL, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_E2E));
}

static char *render(const ttft_snapshot *s, ttft_format f) {
  long n = ttft_snapshot_format(s, f, NULL, 0);
  char *t = n > 0 ? malloc((size_t)n + 1) : NULL;
  if (t) EXPECT_EQ_INT(n, ttft_snapshot_format(s, f, t, (size_t)n + 1));
  return t;
}

/* ------------------------------------------------------------ fixture */
static struct {
  truth tr;
  ttft_registry *r;
  ttft_snapshot *s;
} g;

static void vec_free(vec *x) {
  free(x->v);
  memset(x, 0, sizeof *x);
}

static void world_setup(void) {
  memset(&g.tr, 0, sizeof g.tr);
  g_rng = 12345;
  g.r = record(&g.tr);
  EXPECT_NOT_NULL(g.r);
  g.s = NULL;
  if (!g.r) return;
  sort_all(&g.tr);
  g.s = ttft_snapshot_take(g.r);
  EXPECT_NOT_NULL(g.s);
}

static void world_teardown(void) {
  ttft_snapshot_free(g.s);
  ttft_registry_free(g.r);
  g.s = NULL;
  g.r = NULL;
  vec_free(&g.tr.itl);
  vec_free(&g.tr.per_token);
  for (int st = 0; st < 3; st++)
    for (int v = 0; v < 4; v++) vec_free(&g.tr.view[st][v]);
  vec_free(&g.tr.chat_completed_e2e);
}

TU_SETUP(world_setup)
TU_TEARDOWN(world_teardown)

/* ---------------------------------------------------------------- tests */
TEST(recorded_exact_counts_and_quantiles) {
  if (!g.s) return;
  check(g.s, &g.tr, 1, "taken");
  printf("%zu gaps, %zu per-token values; views completed/cancelled/error: %zu/%zu/%zu\n", g.tr.itl.n,
         g.tr.per_token.n, g.tr.view[0][2].n, g.tr.view[1][2].n, g.tr.view[2][2].n);
}

TEST(encoding_carries_views) {
  if (!g.s) return;
  long n = ttft_snapshot_encode(g.s, NULL, 0);
  unsigned char *b = malloc((size_t)n);
  EXPECT_EQ_INT(n, ttft_snapshot_encode(g.s, b, (size_t)n));
  int err = 1;
  ttft_snapshot *d = ttft_snapshot_decode(b, (size_t)n, &err);
  EXPECT_ERR(TTFT_OK, err);
  if (d) check(d, &g.tr, 1, "decoded");
  ttft_snapshot_free(d);
  free(b);
}

/* quantiles of two copies are the original's */
TEST(merge_adds_views) {
  if (!g.s) return;
  int err = 1;
  ttft_snapshot *m = ttft_snapshot_merge(g.s, g.s, &err);
  EXPECT_ERR(TTFT_OK, err);
  if (m) {
    check(m, &g.tr, 2, "merged"); /* quantiles are rank-relative: unchanged by doubling every count */
  }
  ttft_snapshot_free(m);
}

TEST(delta_subtracts_views) {
  if (!g.s) return;
  ttft_registry *r = g.r;
  ttft_seq q = ttft_begin(r, UINT64_C(9000000000000));
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, UINT64_C(9000000000000) + 50 * MS));
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 4, UINT64_C(9000000000000) + 90 * MS));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_CANCELLED, UINT64_C(9000000000000) + 100 * MS));
  ttft_snapshot *s2 = ttft_snapshot_take(r);
  int err = 1;
  ttft_snapshot *dl = ttft_snapshot_delta(s2, g.s, &err);
  EXPECT_ERR(TTFT_OK, err);
  if (dl) {
    EXPECT_EQ_U64(4, ttft_snapshot_count(dl, TTFT_METRIC_ITL_PER_TOKEN)); /* 40 ms / 4, four times */
    /* a delta's extremes are exact only where the window holds the
     * snapshot's extreme; else within a bucket (docs/encoding.md) */
    EXPECT_NEAR_REL(10.0 * MS, (double)ttft_snapshot_quantile(dl, TTFT_METRIC_ITL_PER_TOKEN, 0.5), 0.005);
    EXPECT_EQ_U64(1, ttft_snapshot_count(dl, TTFT_METRIC_ITL));
    EXPECT_NEAR_REL(40.0 * MS, (double)ttft_snapshot_quantile(dl, TTFT_METRIC_ITL, 0.5), 0.005);
    EXPECT_EQ_U64(1, ttft_snapshot_status_count(dl, TTFT_CLASS_ALL, TTFT_CANCELLED, TTFT_METRIC_E2E));
    EXPECT_EQ_U64(0, ttft_snapshot_status_count(dl, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_E2E));
    EXPECT_NEAR_REL(100.0 * MS,
                    (double)ttft_snapshot_status_quantile(dl, TTFT_CLASS_ALL, TTFT_CANCELLED, TTFT_METRIC_E2E, 1.0), 0.005);
    EXPECT_EQ_U64(5, ttft_snapshot_status_quantile(dl, TTFT_CLASS_ALL, TTFT_CANCELLED, TTFT_METRIC_OUTPUT_TOKENS, 0.5));
    EXPECT_NEAR_REL(10.0 * MS,
                    (double)ttft_snapshot_status_quantile(dl, TTFT_CLASS_ALL, TTFT_CANCELLED, TTFT_METRIC_TPOT, 0.5), 0.005);
  }
  ttft_snapshot_free(dl);
  ttft_snapshot_free(s2);
}

/* "mean TTFT of completed requests" by hand, as a client benchmark
 * computes it, against the API */
TEST(mean_ttft_of_completed_requests) {
  if (!g.s) return;
  vec *x = &g.tr.view[TTFT_COMPLETED][0];
  uint64_t sum = 0;
  for (size_t i = 0; i < x->n; i++) sum += x->v[i];
  EXPECT_GT_U64(x->n, 100);
  EXPECT_EQ_U64(x->n, ttft_snapshot_status_count(g.s, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_TTFT));
  EXPECT_EQ_U64(sum, ttft_snapshot_status_sum(g.s, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_TTFT));
  EXPECT_EQ_DBL((double)sum / (double)x->n,
                ttft_snapshot_status_mean(g.s, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_TTFT));
  /* the plain mean counts every stream with a first token: another number */
  EXPECT_TRUE(ttft_snapshot_mean(g.s, TTFT_METRIC_TTFT) !=
              ttft_snapshot_status_mean(g.s, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_TTFT));
}

/* Sums at the 2^64 boundary: exact below it, UINT64_MAX (never a wrapped
 * value) from it on; the mean divides the whole 128-bit sum. E2E of
 * streams begun at t = 1. */
static ttft_snapshot *e2e_world(const uint64_t *e2e, size_t n) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 4;
  c.max_threads = 1;
  ttft_registry *r = ttft_registry_new(&c);
  if (!r) return NULL;
  for (size_t i = 0; i < n; i++) {
    ttft_seq q = ttft_begin(r, 1);
    EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, 1 + e2e[i]));
  }
  ttft_snapshot *s = ttft_snapshot_take(r);
  ttft_registry_free(r);
  return s;
}

TEST(status_sum_never_wraps) {
  const uint64_t H = UINT64_C(1) << 63, Q = UINT64_C(1) << 62;
  struct {
    uint64_t v[3];
    size_t n;
    uint64_t want; /* UINT64_MAX: saturated */
    const char *why;
  } rows[] = {
      {{H - 1, H - 1}, 2, 2 * (H - 1), "2^64 - 2: exact"},
      {{UINT64_MAX - 1}, 1, UINT64_MAX - 1, "one observation: exact"},
      {{1, H + 5}, 2, H + 6, "exact"},
      {{1, 1, H + Q}, 3, H + Q + 2, "exact"},
      {{H, H - 1, 1}, 3, UINT64_MAX, "exactly 2^64: saturated"},
      {{H - 1, H - 1, H - 1}, 3, UINT64_MAX, "3 * (2^63 - 1)"},
      {{H + 5, H + 5}, 2, UINT64_MAX, "2^64 + 10 (would wrap to 10)"},
      {{1, H, H + Q}, 3, UINT64_MAX, "2^64 + 2^62 + 1"},
      {{5, H + Q, H + Q}, 3, UINT64_MAX, "1.5 * 2^64 + 5"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    ttft_snapshot *s = e2e_world(rows[i].v, rows[i].n);
    EXPECT_NOT_NULL(s);
    if (!s) continue;
    uint64_t got = ttft_snapshot_status_sum(s, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_E2E);
    if (got != rows[i].want) fprintf(stderr, "   row %zu (%s)\n", i, rows[i].why);
    EXPECT_EQ_U64(rows[i].want, got);
    double mean = ttft_snapshot_status_mean(s, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_E2E);
    double exact_mean = 0;
    for (size_t k = 0; k < rows[i].n; k++) exact_mean += (double)rows[i].v[k];
    exact_mean /= (double)rows[i].n;
    EXPECT_NEAR_REL(exact_mean, mean, 1e-15);
    /* the merge of a saturated view with itself stays saturated */
    int err = 1;
    ttft_snapshot *m = ttft_snapshot_merge(s, s, &err);
    if (m && rows[i].want == UINT64_MAX)
      EXPECT_EQ_U64(UINT64_MAX, ttft_snapshot_status_sum(m, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_E2E));
    ttft_snapshot_free(m);
    ttft_snapshot_free(s);
  }
}

/* the formats name them apart from ITL and from the all-streams metrics */
TEST(json_names_views) {
  if (!g.s) return;
  char *j = render(g.s, TTFT_FORMAT_JSON);
  if (j) {
    EXPECT_CONTAINS(j, "\"itl_per_token\":{\"unit\":\"ns\",\"count\":");
    EXPECT_CONTAINS(j, "\"by_status\":{\"completed\":{\"ttft\":{\"unit\":\"ns\",\"count\":");
    EXPECT_CONTAINS(j, "\"error\":{\"ttft\":");
    EXPECT_CONTAINS(j, "\"output_tokens\":{\"unit\":\"tokens\"");
  }
  free(j);
}

TEST(text_names_views) {
  if (!g.s) return;
  char *t = render(g.s, TTFT_FORMAT_TEXT);
  if (t) {
    EXPECT_CONTAINS(t, "\nitl_per_token ");
    EXPECT_CONTAINS(t, "\nby terminal status ");
    EXPECT_CONTAINS(t, "\ncompleted ttft ");
    EXPECT_CONTAINS(t, "\nerror tok ");
  }
  free(t);
}

TEST(openmetrics_names_views) {
  if (!g.s) return;
  char *p = render(g.s, TTFT_FORMAT_OPENMETRICS);
  if (p) {
    char want[128];
    snprintf(want, sizeof want, "\nllm_inter_token_latency_per_token_seconds_count{class=\"chat\"} %llu\n",
             (unsigned long long)ttft_snapshot_class_count(g.s, 1, TTFT_METRIC_ITL_PER_TOKEN));
    EXPECT_CONTAINS(p, want);
    snprintf(want, sizeof want, "\nllm_request_duration_by_status_seconds_count{class=\"chat\",status=\"completed\"} %llu\n",
             (unsigned long long)g.tr.chat_completed_e2e.n);
    EXPECT_CONTAINS(p, want);
  }
  free(p);
}

TU_MAIN()
