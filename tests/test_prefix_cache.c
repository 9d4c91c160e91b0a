/*
 * test_prefix_cache.c — cache hits as counts (issue 20, item 1):
 * ttft_annotate_cached and the miss / partial / hit bands of TTFT and
 * PREFILL.
 *
 *  - the band of every (prompt, cached) pair at and around both edges
 *    (prefix_hit_min_tokens, half the prompt), with the default and a
 *    configured minimum; exact TTFT and PREFILL values land in the band's
 *    split, nothing in the others;
 *  - ttft_annotate's hit/miss (and ttft_request.prefix_hit) map to HIT and
 *    MISS; a later annotation overrides an earlier one; the rules of
 *    ttft_annotate: ERANGE after the first token (nothing changes), ESTALE
 *    when ended (counted), EINVAL for bad counts or a NULL registry;
 *  - PREFILL is split only for streams marked SCHEDULED;
 *  - the splits survive encode/decode (version 3), merge (counts add) and
 *    delta (counts subtract), and every format names the partial band and
 *    the prefill split.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"
#include "task.h"

#define US UINT64_C(1000)
#define T0 UINT64_C(1000000000)

static ttft_registry *reg(uint32_t min_tokens) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 8;
  c.max_threads = 1;
  if (min_tokens) c.prefix_hit_min_tokens = min_tokens;
  return ttft_registry_new(&c);
}

/* one stream: begin at t, SCHEDULED at t + queue (when queue), annotate
 * with (prompt, cached), first token at t + ttft; returns the rc of the
 * annotation */
static int stream(ttft_registry *r, uint64_t t, uint64_t queue, uint64_t ttft, uint32_t prompt,
                  uint32_t cached) {
  ttft_seq s = ttft_begin(r, t);
  EXPECT_TRUE(s != 0);
  if (queue) EXPECT_ERR(TTFT_OK, ttft_mark(r, s, TTFT_PHASE_SCHEDULED, t + queue));
  int rc = ttft_annotate_cached(r, s, prompt, cached);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t + ttft));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, t + ttft + 1));
  return rc;
}

static const char *band_name(unsigned b) {
  return b == TTFT_PREFIX_MISS ? "miss" : b == TTFT_PREFIX_HIT ? "hit" : "partial";
}

/* exactly one observation of value v in band want of split sp, none elsewhere */
static void expect_only(const ttft_snapshot *s, ttft_split sp, unsigned want, uint64_t v) {
  for (unsigned b = 0; b < TTFT_PREFIX_BAND_COUNT_; b++) {
    uint64_t n = ttft_snapshot_split_count(s, sp, b);
    if (n != (b == want)) fprintf(stderr, "   split %d band %s: %llu\n", (int)sp, band_name(b), (unsigned long long)n);
    EXPECT_EQ_U64(b == want, n);
  }
  EXPECT_EQ_U64(v, ttft_snapshot_split_quantile(s, sp, want, 1.0));
}

TEST(bands_at_every_edge) {
  static const struct {
    uint32_t min, prompt, cached;
    unsigned band;
  } rows[] = {
      {0, 1000, 0, TTFT_PREFIX_MISS},     {0, 1000, 1, TTFT_PREFIX_MISS},
      {0, 1000, 15, TTFT_PREFIX_MISS},    {0, 1000, 16, TTFT_PREFIX_PARTIAL},
      {0, 1000, 499, TTFT_PREFIX_PARTIAL}, {0, 1000, 500, TTFT_PREFIX_HIT},
      {0, 1000, 1000, TTFT_PREFIX_HIT},   {0, 1001, 500, TTFT_PREFIX_PARTIAL},
      {0, 1001, 501, TTFT_PREFIX_HIT},    {0, 20, 16, TTFT_PREFIX_HIT},
      {0, 10, 10, TTFT_PREFIX_MISS},      {0, 40, 16, TTFT_PREFIX_PARTIAL},
      {0, UINT32_MAX, UINT32_MAX / 2, TTFT_PREFIX_PARTIAL},
      {0, UINT32_MAX, UINT32_MAX / 2 + 1, TTFT_PREFIX_HIT},
      {1, 1000, 0, TTFT_PREFIX_MISS},     {1, 1000, 1, TTFT_PREFIX_PARTIAL},
      {1, 1, 1, TTFT_PREFIX_HIT},         {256, 8192, 255, TTFT_PREFIX_MISS},
      {256, 8192, 256, TTFT_PREFIX_PARTIAL}, {256, 300, 256, TTFT_PREFIX_HIT},
      {UINT32_MAX, UINT32_MAX, UINT32_MAX - 1, TTFT_PREFIX_MISS},
      {UINT32_MAX, UINT32_MAX, UINT32_MAX, TTFT_PREFIX_HIT},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    ttft_registry *r = reg(rows[i].min);
    EXPECT_NOT_NULL(r);
    if (!r) continue;
    uint64_t ttft = (100 + i) * US, queue = (10 + i) * US;
    EXPECT_ERR(TTFT_OK, stream(r, T0, queue, ttft, rows[i].prompt, rows[i].cached));
    ttft_snapshot *s = ttft_snapshot_take(r);
    if (s) {
      if (ttft_snapshot_split_count(s, TTFT_SPLIT_PREFIX_CACHE, rows[i].band) != 1)
        fprintf(stderr, "   row %zu: min %u prompt %u cached %u, want %s\n", i, rows[i].min, rows[i].prompt,
                rows[i].cached, band_name(rows[i].band));
      expect_only(s, TTFT_SPLIT_PREFIX_CACHE, rows[i].band, ttft);
      expect_only(s, TTFT_SPLIT_PREFILL_BY_PREFIX, rows[i].band, ttft - queue);
      EXPECT_EQ_U64(1, ttft_snapshot_count(s, TTFT_METRIC_PREFILL));
    }
    ttft_snapshot_free(s);
    ttft_registry_free(r);
  }
}

TEST(prefill_needs_a_scheduled_mark) {
  ttft_registry *r = reg(0);
  if (!r) return;
  EXPECT_ERR(TTFT_OK, stream(r, T0, 0, 300 * US, 1000, 900)); /* no SCHEDULED */
  ttft_snapshot *s = ttft_snapshot_take(r);
  if (s) {
    expect_only(s, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_HIT, 300 * US);
    for (unsigned b = 0; b < TTFT_PREFIX_BAND_COUNT_; b++)
      EXPECT_EQ_U64(0, ttft_snapshot_split_count(s, TTFT_SPLIT_PREFILL_BY_PREFIX, b));
  }
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TEST(annotate_maps_to_hit_and_miss) {
  ttft_registry *r = reg(0);
  if (!r) return;
  ttft_request q;
  ttft_request_init(&q);
  q.prefix_hit = 1;
  ttft_seq a = ttft_begin_ex(r, &q, T0);               /* hit at begin */
  ttft_seq b = ttft_begin(r, T0);
  ttft_seq c = ttft_begin(r, T0);
  ttft_seq d = ttft_begin(r, T0);
  EXPECT_ERR(TTFT_OK, ttft_annotate(r, b, 0, 0));      /* miss */
  EXPECT_ERR(TTFT_OK, ttft_annotate(r, c, 0, 1));      /* hit, then counts override: partial */
  EXPECT_ERR(TTFT_OK, ttft_annotate_cached(r, c, 1000, 100));
  EXPECT_ERR(TTFT_OK, ttft_annotate_cached(r, d, 1000, 100)); /* partial, then hit/miss override: miss */
  EXPECT_ERR(TTFT_OK, ttft_annotate(r, d, 0, 0));
  EXPECT_ERR(TTFT_OK, ttft_annotate(r, a, 0, -1));     /* -1 leaves the hit */
  ttft_seq all[4] = {a, b, c, d};
  for (int i = 0; i < 4; i++) EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, all[i], 1, T0 + (uint64_t)(i + 1) * US));
  ttft_snapshot *s = ttft_snapshot_take(r);
  if (s) {
    EXPECT_EQ_U64(1, ttft_snapshot_split_count(s, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_HIT));
    EXPECT_EQ_U64(1 * US, ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_HIT, 0.5));
    EXPECT_EQ_U64(2, ttft_snapshot_split_count(s, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_MISS));
    EXPECT_EQ_U64(2 * US, ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_MISS, 0.0));
    EXPECT_EQ_U64(4 * US, ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_MISS, 1.0));
    EXPECT_EQ_U64(1, ttft_snapshot_split_count(s, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_PARTIAL));
    EXPECT_EQ_U64(3 * US, ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_PARTIAL, 0.5));
    EXPECT_EQ_U64(0, ttft_snapshot_split_count(s, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_BAND_COUNT_));
    EXPECT_EQ_U64(0, ttft_snapshot_split_count(s, TTFT_SPLIT_PREFILL_BY_PREFIX, TTFT_PREFIX_BAND_COUNT_));
    EXPECT_EQ_U64(0, ttft_snapshot_split_count(s, TTFT_SPLIT_COUNT_, 0));
  }
  ttft_snapshot_free(s);
  for (int i = 0; i < 4; i++) ttft_stream_end(r, all[i], TTFT_COMPLETED, T0 + 10 * US);
  ttft_registry_free(r);
}

TEST(same_rules_as_annotate) {
  ttft_registry *r = reg(0);
  if (!r) return;
  ttft_seq s = ttft_begin(r, T0);
  EXPECT_ERR(TTFT_EINVAL, ttft_annotate_cached(NULL, s, 100, 50));
  EXPECT_ERR(TTFT_EINVAL, ttft_annotate_cached(r, s, 0, 0));
  EXPECT_ERR(TTFT_EINVAL, ttft_annotate_cached(r, s, 100, 101));
  EXPECT_ERR(TTFT_EINVAL, ttft_annotate_cached(r, s, 100, UINT32_MAX));
  EXPECT_ERR(TTFT_OK, ttft_annotate_cached(r, s, 100, 90));          /* hit */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, T0 + 5 * US));
  EXPECT_ERR(TTFT_ERANGE, ttft_annotate_cached(r, s, 100, 0));       /* too late: stays hit */
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, T0 + 6 * US));
  ttft_snapshot *before = ttft_snapshot_take(r);
  EXPECT_ERR(TTFT_ESTALE, ttft_annotate_cached(r, s, 100, 0));
  EXPECT_ERR(TTFT_ESTALE, ttft_annotate_cached(r, 0, 100, 0));
  EXPECT_ERR(TTFT_ESTALE, ttft_annotate_cached(r, UINT64_C(0xFFFF00000001), 100, 0));
  ttft_snapshot *after = ttft_snapshot_take(r);
  if (before && after) {
    EXPECT_EQ_U64(ttft_snapshot_counter(before, TTFT_COUNTER_STALE) + 3,
                  ttft_snapshot_counter(after, TTFT_COUNTER_STALE));
    expect_only(after, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_HIT, 5 * US);
  }
  ttft_snapshot_free(before);
  ttft_snapshot_free(after);
  ttft_registry_free(r);
}

/* 30 streams, 10 per band, with distinct TTFT and PREFILL values */
static ttft_snapshot *world(void) {
  ttft_registry *r = reg(0);
  if (!r) return NULL;
  static const uint32_t cached[3] = {0, 900, 200}; /* miss, hit, partial */
  for (int i = 0; i < 30; i++)
    stream(r, T0 + (uint64_t)i * 1000 * US, (uint64_t)(1 + i) * US, (uint64_t)(100 + 10 * i) * US, 1000,
           cached[i % 3]);
  ttft_snapshot *s = ttft_snapshot_take(r);
  ttft_registry_free(r);
  return s;
}

static void expect_world(const ttft_snapshot *s, uint64_t mult) {
  for (unsigned b = 0; b < 3; b++) {
    EXPECT_EQ_U64(10 * mult, ttft_snapshot_split_count(s, TTFT_SPLIT_PREFIX_CACHE, b));
    EXPECT_EQ_U64(10 * mult, ttft_snapshot_split_count(s, TTFT_SPLIT_PREFILL_BY_PREFIX, b));
    /* band b holds streams i = b, b + 3, ...: TTFT 100 + 10 i us, prefill that minus (1 + i) us */
    EXPECT_EQ_U64((100 + 10 * b) * US, ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, b, 0.0));
    EXPECT_EQ_U64((100 + 10 * (b + 27)) * US, ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, b, 1.0));
    EXPECT_EQ_U64((100 + 9 * b - 1) * US, ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFILL_BY_PREFIX, b, 0.0));
  }
}

TEST(splits_travel) {
  ttft_snapshot *s = world();
  EXPECT_NOT_NULL(s);
  if (!s) return;
  expect_world(s, 1);
  long n = ttft_snapshot_encode(s, NULL, 0);
  unsigned char *buf = n > 0 ? malloc((size_t)n) : NULL;
  if (buf) {
    EXPECT_EQ_INT(n, ttft_snapshot_encode(s, buf, (size_t)n));
    EXPECT_EQ_U64(5, buf[4]); /* encoding version 5 (1.3) */
    int err = 1;
    ttft_snapshot *d = ttft_snapshot_decode(buf, (size_t)n, &err);
    EXPECT_ERR(TTFT_OK, err);
    if (d) expect_world(d, 1);
    ttft_snapshot *m = d ? ttft_snapshot_merge(s, d, &err) : NULL;
    if (m) expect_world(m, 2);
    ttft_snapshot *dl = m ? ttft_snapshot_delta(s, s, &err) : NULL;
    if (dl)
      for (unsigned b = 0; b < 3; b++) {
        EXPECT_EQ_U64(0, ttft_snapshot_split_count(dl, TTFT_SPLIT_PREFIX_CACHE, b));
        EXPECT_EQ_U64(0, ttft_snapshot_split_count(dl, TTFT_SPLIT_PREFILL_BY_PREFIX, b));
      }
    ttft_snapshot_free(dl);
    ttft_snapshot_free(m);
    ttft_snapshot_free(d);
  }
  free(buf);
  ttft_snapshot_free(s);
}

TEST(delta_subtracts_bands) {
  ttft_registry *r = reg(0);
  if (!r) return;
  stream(r, T0, 5 * US, 50 * US, 1000, 0);
  ttft_snapshot *a = ttft_snapshot_take(r);
  stream(r, T0 + 1000 * US, 5 * US, 70 * US, 1000, 300);
  stream(r, T0 + 2000 * US, 5 * US, 90 * US, 1000, 300);
  ttft_snapshot *b = ttft_snapshot_take(r);
  int err = 1;
  ttft_snapshot *d = (a && b) ? ttft_snapshot_delta(b, a, &err) : NULL;
  EXPECT_NOT_NULL(d);
  if (d) {
    EXPECT_EQ_U64(0, ttft_snapshot_split_count(d, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_MISS));
    EXPECT_EQ_U64(2, ttft_snapshot_split_count(d, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_PARTIAL));
    EXPECT_EQ_U64(2, ttft_snapshot_split_count(d, TTFT_SPLIT_PREFILL_BY_PREFIX, TTFT_PREFIX_PARTIAL));
    EXPECT_NEAR_REL(85.0 * US, (double)ttft_snapshot_split_quantile(d, TTFT_SPLIT_PREFILL_BY_PREFIX,
                                                                     TTFT_PREFIX_PARTIAL, 1.0), 0.005);
  }
  ttft_snapshot_free(d);
  ttft_snapshot_free(a);
  ttft_snapshot_free(b);
  ttft_registry_free(r);
}

static char *render(const ttft_snapshot *s, ttft_format f) {
  long n = ttft_snapshot_format(s, f, NULL, 0);
  char *t = n > 0 ? malloc((size_t)n + 1) : NULL;
  if (t) EXPECT_EQ_INT(n, ttft_snapshot_format(s, f, t, (size_t)n + 1));
  return t;
}

TEST(formats_name_the_bands) {
  ttft_snapshot *s = world();
  if (!s) return;
  char *j = render(s, TTFT_FORMAT_JSON);
  if (j) {
    EXPECT_CONTAINS(j, "\"prefix_cache\":{\"miss\":{\"unit\":\"ns\",\"count\":10,");
    EXPECT_CONTAINS(j, "\"partial\":{\"unit\":\"ns\",\"count\":10,");
    EXPECT_CONTAINS(j, "\"prefill_by_prefix_cache\":{\"miss\":{\"unit\":\"ns\",\"count\":10,");
  }
  char *p = render(s, TTFT_FORMAT_PROMETHEUS);
  if (p) {
    EXPECT_CONTAINS(p, "\nllm_time_to_first_token_by_prefix_cache_seconds_count{prefix_cache=\"partial\"} 10\n");
    EXPECT_CONTAINS(p, "\nllm_request_prefill_time_by_prefix_cache_seconds_count{prefix_cache=\"hit\"} 10\n");
    EXPECT_CONTAINS(p, "# TYPE llm_request_prefill_time_by_prefix_cache_seconds histogram\n");
  }
  char *o = render(s, TTFT_FORMAT_OPENMETRICS);
  if (o) EXPECT_CONTAINS(o, "\nllm_request_prefill_time_by_prefix_cache_seconds_count{prefix_cache=\"miss\"} 10\n");
  char *t = render(s, TTFT_FORMAT_TEXT);
  if (t) {
    EXPECT_CONTAINS(t, "\nprefix partial ");
    EXPECT_CONTAINS(t, "\nprefill hit ");
  }
  long nb = ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS_PROTOBUF, NULL, 0);
  EXPECT_GT_INT(nb, 0);
  free(j);
  free(p);
  free(o);
  free(t);
  ttft_snapshot_free(s);
}

TU_MAIN()
