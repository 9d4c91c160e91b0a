/*
 * test_hostile_decode.c — issue 9, item 6: what a hostile or extreme
 * snapshot did to the decoder and the formatters, one regression test
 * each (docs/reliability.md, "Issue 9 — decoder and formatter"):
 *
 *  1. a maximum of 2^64 - 1 in the text report (it went through a double
 *     and back: undefined behaviour, an abort under UBSan);
 *  2. SLO met above the ended streams: the text report printed more than
 *     100 %; text, JSON and the API now share one clamp;
 *  3. counters that overflow when summed over classes: refused by the
 *     decoder (TTFT_ECORRUPT) and by merge (TTFT_ERANGE);
 *  4. a merge with more classes than an encoding carries (4097): refused
 *     with TTFT_ERANGE, 4096 still encodes and decodes;
 *  5. decoded memory proportional to the input: encodings built to blow up
 *     a dense decoder (4096 classes of histograms spanning every bucket)
 *     stay within the documented budget, 64 bytes per input byte + 256 KiB;
 *  6. sums are exact modulo 2^64: a merge past 2^64 wraps, counts stay
 *     exact (documented, not hidden).
 * Encodings are written by hand from docs/encoding.md (version 2).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ttft.h"
#include "task.h"
#include "render.h"

/* ------------------------------------------------------------ encoder */
typedef struct enc {
  unsigned char *b;
  size_t n, cap;
} enc;

static void e_byte(enc *e, unsigned v) {
  if (e->n == e->cap) {
    e->cap = e->cap ? 2 * e->cap : 4096;
    e->b = realloc(e->b, e->cap);
    if (!e->b) abort();
  }
  e->b[e->n++] = (unsigned char)v;
}
static void e_var(enc *e, uint64_t v) {
  while (v >= 0x80) {
    e_byte(e, (unsigned)(v & 0x7F) | 0x80);
    v >>= 7;
  }
  e_byte(e, (unsigned)v);
}
static void e_str(enc *e, const char *s) {
  e_var(e, strlen(s));
  for (; *s; s++) e_byte(e, (unsigned char)*s);
}

static uint32_t crc32c(const unsigned char *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}

static void e_begin(enc *e) {
  e->n = 0;
  static const unsigned char hdr[12] = {'T', 'T', 'F', 'S', 2, 0x02, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 12; i++) e_byte(e, hdr[i]);
  e_var(e, 7);          /* registry id */
  e_var(e, 1000);       /* t_start */
  e_var(e, 1000000000); /* span: 1 s */
  e_var(e, 500000000);  /* stall budget */
  e_str(e, "server_arrival");
  e_str(e, "detokenized_flush");
  e_str(e, "");
  e_str(e, "llm_");
  e_var(e, 7 + 4);      /* native schema 7 */
  e_var(e, 0);          /* gauges */
  e_var(e, 0);          /* const labels */
  e_var(e, 0);          /* band edges */
  e_var(e, 0);          /* prom lists */
}

/* a class: name, 4 SLO values, counters (NULL: none), then its
 * histograms through hist(e, class, metric) for 12 metrics + 3 x 4 views
 * (NULL: every histogram empty) */
typedef void (*hist_fn)(enc *e, uint32_t cls, unsigned which);
static void e_class(enc *e, const char *name, const uint64_t *ctr, hist_fn hist, uint32_t cls) {
  e_str(e, name);
  for (int i = 0; i < 4; i++) e_var(e, 0);
  e_var(e, ctr ? 14 : 0);
  for (int i = 0; ctr && i < 14; i++) e_var(e, ctr[i]);
  e_var(e, hist ? 12 : 0);
  for (unsigned m = 0; hist && m < 12; m++) hist(e, cls, m);
  e_var(e, hist ? 3 : 0);
  for (unsigned st = 0; hist && st < 3; st++) {
    e_var(e, 4);
    for (unsigned v = 0; v < 4; v++) hist(e, cls, 12 + st * 4 + v);
  }
}

static void e_end(enc *e) {
  e_var(e, 0); /* cache splits */
  e_var(e, 0); /* band splits */
  for (int i = 0; i < 4; i++) e_byte(e, 0);
  size_t n = e->n;
  for (int i = 0; i < 4; i++) e->b[8 + i] = (unsigned char)(n >> (8 * i));
  uint32_t c = crc32c(e->b, n - 4);
  for (int i = 0; i < 4; i++) e->b[n - 4 + i] = (unsigned char)(c >> (8 * i));
}

/* a histogram of the given populated buckets (ascending), each count 1 */
static void e_hist(enc *e, const uint32_t *idx, uint32_t nnz, uint64_t sum, uint64_t min, uint64_t max) {
  e_var(e, nnz);
  if (!nnz) return;
  for (uint32_t k = 0; k < nnz; k++) {
    e_var(e, k ? idx[k] - idx[k - 1] : idx[0]);
    e_var(e, 1);
  }
  e_var(e, nnz);
  e_var(e, sum);
  e_var(e, min);
  e_var(e, max - min);
}

static ttft_snapshot *decode(const enc *e, int *err) { return ttft_snapshot_decode(e->b, e->n, err); }

/* ------------------------------------------------- counting allocator */
static size_t g_live, g_peak;
static void *count_alloc(void *ctx, size_t n) {
  (void)ctx;
  size_t *p = malloc(n + 16);
  if (!p) return NULL;
  *p = n;
  g_live += n;
  if (g_live > g_peak) g_peak = g_live;
  return (char *)p + 16;
}
static void count_free(void *ctx, void *q) {
  (void)ctx;
  if (!q) return;
  size_t *p = (size_t *)((char *)q - 16);
  g_live -= *p;
  free(p);
}

/* -------------------------------------------------- 1. 2^64 - 1 in text */
static void hist_max_u64(enc *e, uint32_t cls, unsigned which) {
  (void)cls;
  static const uint32_t last = 4863;
  if (which == TTFT_METRIC_OUTPUT_TOKENS || which == TTFT_METRIC_TTFT) e_hist(e, &last, 1, UINT64_MAX, UINT64_MAX, UINT64_MAX);
  else e_hist(e, NULL, 0, 0, 0, 0);
}

/* 1. text report of a maximum of 2^64 - 1 (no double round trip) */
TEST(text_max_u64) {
  enc e = {0};
  e_begin(&e);
  e_var(&e, 1);
  uint64_t ctr[14] = {1, 1};
  e_class(&e, "default", ctr, hist_max_u64, 0);
  e_end(&e);
  int err = 1;
  ttft_snapshot *s = decode(&e, &err);
  EXPECT_ERR(TTFT_OK, err);
  if (s) {
    EXPECT_EQ_U64(UINT64_MAX, ttft_snapshot_quantile(s, TTFT_METRIC_OUTPUT_TOKENS, 1.0));
    char *t = render(s, TTFT_FORMAT_TEXT);
    /* tokens are integers: printed exactly, max and mean alike */
    if (t) EXPECT_CONTAINS(t, "18446744073709551615");
    if (t) EXPECT_CONTAINS(t, "18446744073709551616"); /* the mean: the double nearest 2^64 - 1 */
    free(t);
    for (int f = 0; f < TTFT_FORMAT_COUNT_; f++) {
      long n = ttft_snapshot_format(s, (ttft_format)f, NULL, 0);
      EXPECT_TRUE(n > 0);
    }
  }
  ttft_snapshot_free(s);
  free(e.b);
}

/* --------------------------------------- 2. attainment above 100 % */
/* 2. slo_met above ended: <= 100 % in the API, JSON and text alike */
TEST(attainment_clamp) {
  enc e = {0};
  e_begin(&e);
  e_var(&e, 2);
  uint64_t c0[14] = {0};
  c0[TTFT_COUNTER_BEGUN] = 3;
  c0[TTFT_COUNTER_COMPLETED] = 3;
  c0[TTFT_COUNTER_SLO_MET] = 7; /* a hostile (or racily copied) count */
  uint64_t c1[14] = {0};
  c1[TTFT_COUNTER_BEGUN] = 4;
  c1[TTFT_COUNTER_COMPLETED] = 2;
  c1[TTFT_COUNTER_ERRORS] = 2;
  c1[TTFT_COUNTER_SLO_MET] = 1;
  e_class(&e, "default", c0, NULL, 0);
  e_class(&e, "chat", c1, NULL, 1);
  e_end(&e);
  int err = 1;
  ttft_snapshot *s = decode(&e, &err);
  EXPECT_ERR(TTFT_OK, err);
  if (s) {
    EXPECT_EQ_DBL(1.0, ttft_snapshot_attainment(s, 0));
    EXPECT_EQ_DBL(0.25, ttft_snapshot_attainment(s, 1));
    /* all: met 8 of 7 ended, clamped to 7 / 7 */
    EXPECT_EQ_DBL(1.0, ttft_snapshot_attainment(s, TTFT_CLASS_ALL));
    char *t = render(s, TTFT_FORMAT_TEXT);
    if (t) {
      EXPECT_CONTAINS(t, " 3/3   100.0%\n");
      EXPECT_CONTAINS(t, " 1/4    25.0%\n");
      EXPECT_CONTAINS(t, " 7/7   100.0%\n");
      EXPECT_FALSE(strstr(t, "233.3%") != NULL);
      EXPECT_FALSE(strstr(t, "114.3%") != NULL);
    }
    free(t);
    char *j = render(s, TTFT_FORMAT_JSON);
    if (j) {
      EXPECT_CONTAINS(j, "\"attainment\":1,");
      EXPECT_CONTAINS(j, "\"attainment\":0.25,");
    }
    free(j);
  }
  ttft_snapshot_free(s);
  free(e.b);
}

/* ------------------------------------------- 3. counter overflow */
static void hist_one(enc *e, uint32_t cls, unsigned which) {
  (void)cls;
  static const uint32_t i100 = 100;
  if (which == TTFT_METRIC_TTFT) e_hist(e, &i100, 1, 100, 100, 100);
  else e_hist(e, NULL, 0, 0, 0, 0);
}

/* 3. counters that overflow summed over classes: refused, not wrapped */
TEST(counter_sum_overflow) {
  enc e = {0};
  e_begin(&e);
  e_var(&e, 2);
  uint64_t c0[14] = {0}, c1[14] = {0};
  c0[TTFT_COUNTER_TOKENS] = UINT64_MAX - 5;
  c1[TTFT_COUNTER_TOKENS] = 6;
  e_class(&e, "default", c0, NULL, 0);
  e_class(&e, "chat", c1, NULL, 1);
  e_end(&e);
  int err = 0;
  EXPECT_NULL(decode(&e, &err));
  EXPECT_ERR(TTFT_ECORRUPT, err);

  /* at the limit it decodes, and the sum is exact */
  c1[TTFT_COUNTER_TOKENS] = 5;
  e_begin(&e);
  e_var(&e, 2);
  e_class(&e, "default", c0, NULL, 0);
  e_class(&e, "chat", c1, hist_one, 1);
  e_end(&e);
  ttft_snapshot *s = decode(&e, &err);
  EXPECT_ERR(TTFT_OK, err);
  EXPECT_EQ_U64(UINT64_MAX, ttft_snapshot_counter(s, TTFT_COUNTER_TOKENS));
  /* merged with itself the counter would wrap: merge refuses */
  err = 0;
  ttft_snapshot *m = ttft_snapshot_merge(s, s, &err);
  EXPECT_NULL(m);
  EXPECT_ERR(TTFT_ERANGE, err);
  ttft_snapshot_free(m);
  ttft_snapshot_free(s);
  free(e.b);
}

/* 3. a histogram count at 2^63 + 1: merge(s, s) would wrap it, and refuses */
TEST(hist_count_overflow) {
  enc e = {0};
  int err = 0;
  e_begin(&e);
  e_var(&e, 1);
  e_str(&e, "default");
  for (int i = 0; i < 4; i++) e_var(&e, 0);
  e_var(&e, 0);
  e_var(&e, 1); /* one histogram: TTFT, 2^63 + 1 observations of 5 */
  e_var(&e, 1);
  e_var(&e, 5);
  e_var(&e, (UINT64_C(1) << 63) + 1);
  e_var(&e, (UINT64_C(1) << 63) + 1);
  e_var(&e, 5);
  e_var(&e, 5);
  e_var(&e, 0);
  e_var(&e, 0); /* no status views */
  e_end(&e);
  ttft_snapshot *s = decode(&e, &err);
  EXPECT_ERR(TTFT_OK, err);
  EXPECT_EQ_U64((UINT64_C(1) << 63) + 1, ttft_snapshot_count(s, TTFT_METRIC_TTFT));
  err = 0;
  ttft_snapshot *m = ttft_snapshot_merge(s, s, &err);
  EXPECT_NULL(m);
  EXPECT_ERR(TTFT_ERANGE, err);
  ttft_snapshot_free(m);
  ttft_snapshot_free(s);
  free(e.b);
}

/* -------------------------------------------- 4. 4097 classes */
static ttft_snapshot *many_classes(uint32_t n, const char *prefix) {
  enc e = {0};
  e_begin(&e);
  e_var(&e, n);
  char name[32];
  for (uint32_t c = 0; c < n; c++) {
    if (c == 0) snprintf(name, sizeof name, "default");
    else snprintf(name, sizeof name, "%s%u", prefix, c);
    e_class(&e, name, NULL, NULL, c);
  }
  e_end(&e);
  int err = 1;
  ttft_snapshot *s = decode(&e, &err);
  EXPECT_ERR(TTFT_OK, err);
  free(e.b);
  return s;
}

/* 4. a merge with 4097 classes is refused (TTFT_ERANGE); 4096 travels */
TEST(merge_4097_classes) {
  ttft_snapshot *a = many_classes(4096, "a");
  ttft_snapshot *b = many_classes(2, "b");   /* default + b1: one new class */
  ttft_snapshot *a2 = many_classes(4095, "a");
  EXPECT_NOT_NULL(a);
  EXPECT_NOT_NULL(b);
  int err = 0;
  ttft_snapshot *m = ttft_snapshot_merge(a, b, &err);
  EXPECT_NULL(m);
  EXPECT_ERR(TTFT_ERANGE, err);
  ttft_snapshot_free(m);
  m = ttft_snapshot_merge(b, a, &err); /* either order */
  EXPECT_NULL(m);
  EXPECT_ERR(TTFT_ERANGE, err);
  ttft_snapshot_free(m);
  /* 4095 + 1 new = 4096: merges, encodes, decodes */
  m = ttft_snapshot_merge(a2, b, &err);
  EXPECT_ERR(TTFT_OK, err);
  EXPECT_EQ_INT(4096, ttft_snapshot_classes(m));
  long n = m ? ttft_snapshot_encode(m, NULL, 0) : -1;
  EXPECT_TRUE(n > 0);
  unsigned char *buf = n > 0 ? malloc((size_t)n) : NULL;
  if (buf) {
    EXPECT_EQ_INT(n, ttft_snapshot_encode(m, buf, (size_t)n));
    ttft_snapshot *d = ttft_snapshot_decode(buf, (size_t)n, &err);
    EXPECT_ERR(TTFT_OK, err);
    EXPECT_EQ_INT(4096, ttft_snapshot_classes(d));
    EXPECT_STREQ("b1", ttft_snapshot_class_name(d, 4095));
    ttft_snapshot_free(d);
  }
  free(buf);
  ttft_snapshot_free(m);
  ttft_snapshot_free(a);
  ttft_snapshot_free(a2);
  ttft_snapshot_free(b);
}

/* -------------------------------------- 5. decoded size ~ input size */
static void hist_span(enc *e, uint32_t cls, unsigned which) {
  (void)which;
  /* the first and the last bucket: a dense decoder allocates all 4864 */
  static const uint32_t idx[2] = {0, 4863};
  e_hist(e, idx, 2, UINT64_C(1) << 62, 0, (UINT64_C(1) << 62) + cls);
}

static void hist_gappy(enc *e, uint32_t cls, unsigned which) {
  (void)cls;
  /* every 4th bucket, different per metric: a run (and a count) per
   * populated bucket; the views too */
  static uint32_t idx[1216];
  uint32_t n = 0;
  for (uint32_t i = which % 4; i < 4864 && n < 1216; i += 4) idx[n++] = i;
  uint64_t lo = idx[0], hi = idx[n - 1] < 256 ? idx[n - 1] : 0;
  if (!hi) { /* the max must lie in the last bucket: its lower edge */
    uint32_t i = idx[n - 1];
    hi = (uint64_t)(128 + i % 128) << (i / 128 - 1);
  }
  e_hist(e, idx, n, 0, lo, hi);
}

typedef struct hostile {
  const char *what;
  uint32_t classes;
  hist_fn hist;
  int counters;
} hostile;

/* 5. decoded memory is proportional to the input (<= 64 B per byte + 256 KiB) */
TEST(decode_budget) {
  static const hostile cases[] = {
      {"4096 classes, nothing in them", 4096, NULL, 0},
      {"4096 classes, counters only", 4096, NULL, 1},
      {"4096 classes x 24 histograms spanning every bucket", 4096, hist_span, 0},
      {"20 classes x 24 histograms, every 4th bucket", 20, hist_gappy, 0},
      {"1 class x 24 histograms, every 4th bucket", 1, hist_gappy, 1},
  };
  ttft_allocator a = {count_alloc, count_free, NULL};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    enc e = {0};
    e_begin(&e);
    e_var(&e, cases[i].classes);
    uint64_t ctr[14];
    for (int k = 0; k < 14; k++) ctr[k] = UINT64_C(1) << 40;
    char name[32];
    for (uint32_t c = 0; c < cases[i].classes; c++) {
      if (c == 0) snprintf(name, sizeof name, "default");
      else snprintf(name, sizeof name, "c%u", c);
      e_class(&e, name, cases[i].counters ? ctr : NULL, cases[i].hist, c);
    }
    e_end(&e);
    g_live = g_peak = 0;
    EXPECT_ERR(TTFT_OK, ttft_set_allocator(&a));
    int err = 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ttft_snapshot *s = decode(&e, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    size_t held = g_live, peak = g_peak;
    /* formatting it stays bounded too (scratch only) */
    long tl = s ? ttft_snapshot_format(s, TTFT_FORMAT_JSON, NULL, 0) : -1;
    ttft_snapshot_free(s);
    EXPECT_EQ_U64(0, g_live);
    ttft_set_allocator(NULL);
    EXPECT_ERR(TTFT_OK, err);
    EXPECT_NOT_NULL(s);
    EXPECT_TRUE(tl > 0);
    size_t budget = 64 * e.n + 256 * 1024;
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    printf("%-52s %8zu B in: snapshot %9zu B (%5.1f B/B), peak %9zu B, %7.1f ms\n", cases[i].what, e.n, held,
           (double)held / (double)e.n, peak, ms);
    EXPECT_LE_U64(held, budget);
    EXPECT_LE_U64(peak, budget);
    free(e.b);
  }
}

/* ------------------------------------------------ 6. sums past 2^64 */
/* 6. sums are 128 bits wide (issue 18.4; 1.1 wrapped them modulo 2^64): a
 * merge past 2^64 keeps the whole sum, which every reader uses; the
 * uint64 accessor saturates; counts and extremes stay exact */
TEST(sum_wraps) {
  enc e = {0};
  e_begin(&e);
  e_var(&e, 1);
  uint64_t ctr[14] = {1, 1};
  e_class(&e, "default", ctr, hist_max_u64, 0);
  e_end(&e);
  int err = 1;
  ttft_snapshot *s = decode(&e, &err);
  ttft_snapshot *m = s ? ttft_snapshot_merge(s, s, &err) : NULL;
  EXPECT_ERR(TTFT_OK, err);
  if (m) {
    EXPECT_EQ_U64(2, ttft_snapshot_count(m, TTFT_METRIC_TTFT));
    EXPECT_EQ_U64(UINT64_MAX, ttft_snapshot_sum(m, TTFT_METRIC_TTFT)); /* saturated */
    uint64_t hi = 0, lo = 0; /* 2 (2^64 - 1) = 2^65 - 2 */
    EXPECT_ERR(TTFT_OK, ttft_snapshot_class_sum_wide(m, TTFT_CLASS_ALL, TTFT_METRIC_TTFT, &hi, &lo));
    EXPECT_EQ_U64(1, hi);
    EXPECT_EQ_U64(UINT64_MAX - 1, lo);
    EXPECT_EQ_DBL(18446744073709551615.0, ttft_snapshot_mean(m, TTFT_METRIC_TTFT));
    EXPECT_EQ_U64(UINT64_MAX, ttft_snapshot_quantile(m, TTFT_METRIC_TTFT, 1.0)); /* min/max exact */
    /* the merge of the merge with itself: 2^66 - 4, exact; and encoded
     * (version 3) and decoded, still exact */
    int e2 = 1;
    ttft_snapshot *m2 = ttft_snapshot_merge(m, m, &e2);
    EXPECT_NOT_NULL(m2);
    if (m2) {
      EXPECT_ERR(TTFT_OK, ttft_snapshot_class_sum_wide(m2, 0, TTFT_METRIC_TTFT, &hi, &lo));
      EXPECT_EQ_U64(3, hi);
      EXPECT_EQ_U64(UINT64_MAX - 3, lo);
      unsigned char buf[4096];
      long n = ttft_snapshot_encode(m2, buf, sizeof buf);
      ttft_snapshot *d = n > 0 && (size_t)n <= sizeof buf ? ttft_snapshot_decode(buf, (size_t)n, &e2) : NULL;
      EXPECT_NOT_NULL(d);
      if (d) {
        hi = lo = 0;
        EXPECT_ERR(TTFT_OK, ttft_snapshot_class_sum_wide(d, 0, TTFT_METRIC_TTFT, &hi, &lo));
        EXPECT_EQ_U64(3, hi);
        EXPECT_EQ_U64(UINT64_MAX - 3, lo);
        /* Prometheus: (2^66 - 4) ns = 73786976294.838206460 s, exact */
        static char text[262144]; /* the whole exposition (1.2: the prefill split's family too) */
        long tl = ttft_snapshot_format(d, TTFT_FORMAT_PROMETHEUS, text, sizeof text);
        EXPECT_TRUE(tl > 0 && (size_t)tl < sizeof text);
        EXPECT_CONTAINS(text, "gen_ai_server_time_to_first_token_seconds_sum{class=\"default\"} 73786976294.83820646\n");
        tl = ttft_snapshot_format(d, TTFT_FORMAT_JSON, text, sizeof text);
        EXPECT_TRUE(tl > 0 && (size_t)tl < sizeof text);
        EXPECT_CONTAINS(text, "\"sum\":73786976294838206460");
      }
      ttft_snapshot_free(d);
      /* and a delta of the two subtracts in 128 bits: m2 - m = 2^65 - 2 */
    }
    ttft_snapshot_free(m2);
  }
  ttft_snapshot_free(m);
  ttft_snapshot_free(s);
  free(e.b);
}

TU_MAIN()
