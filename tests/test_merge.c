/*
 * test_merge.c — ttft_snapshot_merge and ttft_snapshot_delta against the
 * ground truth of one registry that saw the same events:
 *
 *  - merge(a, b) of two registries equals one registry that recorded both
 *    workloads: counts, sums, counters and every quantile exactly, per
 *    class matched by name (classes in different orders, one only in b);
 *  - delta(s2, s1) equals a registry that recorded only the events in
 *    between: counts, sums and counters exactly, quantiles within bucket
 *    resolution (min/max of a delta are bucket edges unless the interval
 *    holds the extreme), a class added in between taken whole;
 *  - delta refuses: wrong order, another registry, a merged snapshot;
 *  - merged snapshots encode, decode and format as text and JSON.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"
#include "task.h"
#include "tools/workload.h"

static const double QS[] = {0.0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0};
#define NQ (sizeof QS / sizeof QS[0])

static ttft_registry *new_registry(const char *model) {
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.model = model;
  return ttft_registry_new(&cfg);
}

/* class ids by name in a snapshot: -1 when absent */
static int class_of(const ttft_snapshot *s, const char *name) {
  for (int i = 0; i < ttft_snapshot_classes(s); i++)
    if (!strcmp(ttft_snapshot_class_name(s, i), name)) return i;
  return -1;
}

/* want and got describe the same observations. exact: quantiles equal;
 * else within one bucket (1/128 relative, +1 ns). */
static void expect_class_same(const ttft_snapshot *want, int wc, const ttft_snapshot *got, int gc,
                              int exact) {
  for (int k = 0; k < TTFT_COUNTER_COUNT_; k++)
    EXPECT_EQ_U64(ttft_snapshot_class_counter(want, wc, (ttft_counter)k),
                  ttft_snapshot_class_counter(got, gc, (ttft_counter)k));
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
    EXPECT_EQ_U64(ttft_snapshot_class_count(want, wc, (ttft_metric)m),
                  ttft_snapshot_class_count(got, gc, (ttft_metric)m));
    EXPECT_EQ_U64(ttft_snapshot_class_sum(want, wc, (ttft_metric)m),
                  ttft_snapshot_class_sum(got, gc, (ttft_metric)m));
    for (size_t q = 0; q < NQ; q++) {
      uint64_t w = ttft_snapshot_class_quantile(want, wc, (ttft_metric)m, QS[q]);
      uint64_t g = ttft_snapshot_class_quantile(got, gc, (ttft_metric)m, QS[q]);
      if (exact) EXPECT_EQ_U64(w, g);
      else EXPECT_LE_U64(w > g ? w - g : g - w, w / 128 + 1);
    }
  }
  EXPECT_EQ_DBL(ttft_snapshot_attainment(want, wc), ttft_snapshot_attainment(got, gc));
}

static void expect_splits_same(const ttft_snapshot *want, const ttft_snapshot *got, int exact) {
  for (unsigned i = 0; i < 2; i++) {
    EXPECT_EQ_U64(ttft_snapshot_split_count(want, TTFT_SPLIT_PREFIX_CACHE, i),
                  ttft_snapshot_split_count(got, TTFT_SPLIT_PREFIX_CACHE, i));
    uint64_t w = ttft_snapshot_split_quantile(want, TTFT_SPLIT_PREFIX_CACHE, i, 0.9);
    uint64_t g = ttft_snapshot_split_quantile(got, TTFT_SPLIT_PREFIX_CACHE, i, 0.9);
    if (exact) EXPECT_EQ_U64(w, g);
    else EXPECT_LE_U64(w > g ? w - g : g - w, w / 128 + 1);
  }
  for (unsigned i = 0; i < ttft_snapshot_bands(want); i++) {
    EXPECT_EQ_U64(ttft_snapshot_split_count(want, TTFT_SPLIT_PROMPT_BAND, i),
                  ttft_snapshot_split_count(got, TTFT_SPLIT_PROMPT_BAND, i));
    uint64_t w = ttft_snapshot_split_quantile(want, TTFT_SPLIT_PROMPT_BAND, i, 0.5);
    uint64_t g = ttft_snapshot_split_quantile(got, TTFT_SPLIT_PROMPT_BAND, i, 0.5);
    if (exact) EXPECT_EQ_U64(w, g);
    else EXPECT_LE_U64(w > g ? w - g : g - w, w / 128 + 1);
  }
}

/* ------------------------------------------------------------- merge
 * a: 1200 requests over default, chat, batch; b: 900 over batch, code,
 * default (another order, a class a lacks, 1.7x slower); ab: one registry
 * that saw both workloads, its classes added in yet another order. */
typedef struct merge_world {
  ttft_registry *ra, *rb, *rab;
  ttft_snapshot *sa, *sb, *sab, *m; /* m = merge(sa, sb) */
} merge_world;

static int merge_open(merge_world *w) {
  wl_params pa, pb;
  wl_params_init(&pa, 101, 1200);
  pa.classes[0] = "default";
  pa.classes[1] = "chat";
  pa.classes[2] = "batch";
  pa.left_open = 2;
  wl_params_init(&pb, 202, 900);
  pb.classes[0] = "batch"; /* other order, and a class a doesn't have */
  pb.classes[1] = "code";
  pb.classes[2] = "default";
  pb.scale = 1.7;
  pb.left_open = 1;

  w->ra = new_registry("model-a");
  w->rb = new_registry("model-b");
  w->rab = new_registry("model-a");
  wl_add_classes(w->ra, &pa);
  wl_add_classes(w->rb, &pb);
  wl_add_classes(w->rab, &pb); /* rab's class ids differ from both */
  wl_add_classes(w->rab, &pa);
  wl_play(w->ra, &pa);
  wl_play(w->rab, &pa);
  wl_play(w->rb, &pb);
  wl_play(w->rab, &pb);
  w->sa = ttft_snapshot_take(w->ra);
  w->sb = ttft_snapshot_take(w->rb);
  w->sab = ttft_snapshot_take(w->rab);
  int err = 1;
  w->m = ttft_snapshot_merge(w->sa, w->sb, &err);
  EXPECT_ERR(TTFT_OK, err);
  EXPECT_NOT_NULL(w->m);
  return w->m && w->sa && w->sb && w->sab;
}

static void merge_close(merge_world *w) {
  ttft_snapshot_free(w->m);
  ttft_snapshot_free(w->sa);
  ttft_snapshot_free(w->sb);
  ttft_snapshot_free(w->sab);
  ttft_registry_free(w->ra);
  ttft_registry_free(w->rb);
  ttft_registry_free(w->rab);
}

/* the union of classes, a's first, default stays 0 */
TEST(merge_class_union) {
  merge_world w;
  if (merge_open(&w)) {
    ttft_snapshot *m = w.m;
    EXPECT_EQ_INT(4, ttft_snapshot_classes(m));
    EXPECT_STREQ("default", ttft_snapshot_class_name(m, 0));
    EXPECT_STREQ("chat", ttft_snapshot_class_name(m, 1));
    EXPECT_STREQ("batch", ttft_snapshot_class_name(m, 2));
    EXPECT_STREQ("code", ttft_snapshot_class_name(m, 3));
    ttft_slo slo;
    slo.struct_size = sizeof slo;
    EXPECT_ERR(TTFT_OK, ttft_snapshot_class_slo(m, 1, &slo));
    EXPECT_EQ_U64(300000000, slo.ttft_ns);
  }
  merge_close(&w);
}

/* merge(a, b) == one registry that saw both: in total, per class matched by
 * name, and in the splits, exactly */
TEST(merge_equals_one_registry) {
  merge_world w;
  if (merge_open(&w)) {
    expect_class_same(w.sab, TTFT_CLASS_ALL, w.m, TTFT_CLASS_ALL, 1);
    static const char *names[] = {"default", "chat", "batch", "code"};
    for (int i = 0; i < 4; i++) {
      int wc = class_of(w.sab, names[i]), gc = class_of(w.m, names[i]);
      EXPECT_TRUE(wc >= 0 && gc >= 0);
      if (wc >= 0 && gc >= 0) expect_class_same(w.sab, wc, w.m, gc, 1);
    }
    expect_splits_same(w.sab, w.m, 1);
    EXPECT_TRUE(ttft_snapshot_count(w.m, TTFT_METRIC_ITL) > 10000);
  }
  merge_close(&w);
}

/* gauges add, the interval is the union, the labels are a's */
TEST(merge_gauges_interval_labels) {
  merge_world w;
  if (merge_open(&w)) {
    ttft_snapshot *sa = w.sa, *sb = w.sb, *m = w.m;
    for (int g = 0; g < TTFT_GAUGE_COUNT_; g++)
      EXPECT_EQ_U64(ttft_snapshot_gauge(sa, (ttft_gauge)g) + ttft_snapshot_gauge(sb, (ttft_gauge)g),
                    ttft_snapshot_gauge(m, (ttft_gauge)g));
    EXPECT_EQ_U64(3, ttft_snapshot_gauge(m, TTFT_GAUGE_INFLIGHT));
    uint64_t a0, a1, b0, b1, m0, m1;
    ttft_snapshot_interval(sa, &a0, &a1);
    ttft_snapshot_interval(sb, &b0, &b1);
    EXPECT_ERR(TTFT_OK, ttft_snapshot_interval(m, &m0, &m1));
    EXPECT_EQ_U64(a0 < b0 ? a0 : b0, m0);
    EXPECT_EQ_U64(a1 > b1 ? a1 : b1, m1);
    EXPECT_STREQ("model-a", ttft_snapshot_label(m, "model"));
  }
  merge_close(&w);
}

/* merge is symmetric in the data, and merges of merges add up */
TEST(merge_symmetric_and_nested) {
  merge_world w;
  if (merge_open(&w)) {
    ttft_snapshot *sa = w.sa, *sb = w.sb, *m = w.m;
    int err = 1;
    ttft_snapshot *mba = ttft_snapshot_merge(sb, sa, &err);
    EXPECT_STREQ("batch", ttft_snapshot_class_name(mba, 1));
    expect_class_same(m, TTFT_CLASS_ALL, mba, TTFT_CLASS_ALL, 1);
    ttft_snapshot *mm = ttft_snapshot_merge(m, sa, &err);
    EXPECT_EQ_U64(2 * ttft_snapshot_count(sa, TTFT_METRIC_TTFT) + ttft_snapshot_count(sb, TTFT_METRIC_TTFT),
                  ttft_snapshot_count(mm, TTFT_METRIC_TTFT));
    EXPECT_EQ_U64(2 * ttft_snapshot_counter(sa, TTFT_COUNTER_TOKENS) + ttft_snapshot_counter(sb, TTFT_COUNTER_TOKENS),
                  ttft_snapshot_counter(mm, TTFT_COUNTER_TOKENS));
    ttft_snapshot_free(mm);
    ttft_snapshot_free(mba);
  }
  merge_close(&w);
}

/* a merged snapshot: delta refuses it, the codec carries it */
TEST(merged_snapshot_delta_and_codec) {
  merge_world w;
  if (merge_open(&w)) {
    ttft_snapshot *m = w.m;
    int err = 0;
    EXPECT_NULL(ttft_snapshot_delta(m, w.sa, &err));
    EXPECT_ERR(TTFT_EINVAL, err);
    long n = ttft_snapshot_encode(m, NULL, 0);
    unsigned char *buf = malloc((size_t)n);
    EXPECT_EQ_INT(n, ttft_snapshot_encode(m, buf, (size_t)n));
    ttft_snapshot *md = ttft_snapshot_decode(buf, (size_t)n, &err);
    EXPECT_NOT_NULL(md);
    if (md) expect_class_same(m, 3, md, 3, 1);
    ttft_snapshot_free(md);
    free(buf);
  }
  merge_close(&w);
}

/* a merged snapshot formats as text and JSON, with every class */
TEST(merged_snapshot_formats) {
  merge_world w;
  if (merge_open(&w)) {
    ttft_snapshot *m = w.m;
    long tl = ttft_snapshot_format(m, TTFT_FORMAT_TEXT, NULL, 0);
    EXPECT_TRUE(tl > 0);
    char *text = malloc((size_t)tl + 1);
    EXPECT_EQ_INT(tl, ttft_snapshot_format(m, TTFT_FORMAT_TEXT, text, (size_t)tl + 1));
    EXPECT_CONTAINS(text, "code");
    EXPECT_CONTAINS(text, "chat");
    free(text);
    long jl = ttft_snapshot_format(m, TTFT_FORMAT_JSON, NULL, 0);
    EXPECT_TRUE(jl > 0);
    char *json = malloc((size_t)jl + 1);
    EXPECT_EQ_INT(jl, ttft_snapshot_format(m, TTFT_FORMAT_JSON, json, (size_t)jl + 1));
    EXPECT_TRUE(json[0] == '{' && json[jl - 1] != ',');
    EXPECT_CONTAINS(json, "\"code\"");
    char count[64];
    snprintf(count, sizeof count, "%llu", (unsigned long long)ttft_snapshot_count(m, TTFT_METRIC_TTFT));
    EXPECT_CONTAINS(json, count);
    free(json);
  }
  merge_close(&w);
}

TEST(merge_refuses_null) {
  merge_world w;
  if (merge_open(&w)) {
    int err = 0;
    EXPECT_NULL(ttft_snapshot_merge(NULL, w.sb, &err));
    EXPECT_ERR(TTFT_EINVAL, err);
    EXPECT_NULL(ttft_snapshot_merge(w.sa, NULL, NULL));
  }
  merge_close(&w);
}

/* merge keeps a's band edges and Prometheus buckets */
TEST(merge_mismatched_config) {
  ttft_config ca, cb;
  ttft_config_init(&ca);
  ttft_config_init(&cb);
  cb.n_prompt_bands = 1;
  cb.prompt_band_edges[0] = 1000;
  static const uint64_t bounds[] = {1000000, 2000000};
  cb.prom_buckets[TTFT_METRIC_TTFT] = bounds;
  cb.prom_n_buckets[TTFT_METRIC_TTFT] = 2;
  ttft_registry *ra = ttft_registry_new(&ca), *rb = ttft_registry_new(&cb);
  wl_params p;
  wl_params_init(&p, 7, 300);
  wl_play(ra, &p);
  wl_play(rb, &p);
  ttft_snapshot *sa = ttft_snapshot_take(ra), *sb = ttft_snapshot_take(rb);
  ttft_snapshot *m = ttft_snapshot_merge(sa, sb, NULL);
  EXPECT_NOT_NULL(m);
  EXPECT_EQ_U64(ttft_snapshot_bands(sa), ttft_snapshot_bands(m));
  /* band data of b can't be placed in a's bands: a's alone stands */
  uint64_t a_bands = 0, m_bands = 0;
  for (unsigned i = 0; i < ttft_snapshot_bands(m); i++) {
    a_bands += ttft_snapshot_split_count(sa, TTFT_SPLIT_PROMPT_BAND, i);
    m_bands += ttft_snapshot_split_count(m, TTFT_SPLIT_PROMPT_BAND, i);
  }
  EXPECT_EQ_U64(a_bands, m_bands);
  EXPECT_EQ_U64(2 * ttft_snapshot_count(sa, TTFT_METRIC_TTFT), ttft_snapshot_count(m, TTFT_METRIC_TTFT));
  EXPECT_EQ_U64(2 * ttft_snapshot_split_count(sa, TTFT_SPLIT_PREFIX_CACHE, 1),
                ttft_snapshot_split_count(m, TTFT_SPLIT_PREFIX_CACHE, 1));
  ttft_snapshot_free(m);
  ttft_snapshot_free(sa);
  ttft_snapshot_free(sb);
  ttft_registry_free(ra);
  ttft_registry_free(rb);
}

/* ------------------------------------------------------------- delta
 * r records workload 1, s1 is taken, then workload 2 (which adds the class
 * "late"), s2 is taken; r2 (ref) records workload 2 only. d = delta(s2, s1). */
typedef struct delta_world {
  ttft_registry *r, *r2;
  ttft_snapshot *s1, *s2, *ref, *d;
} delta_world;

static int delta_open(delta_world *w) {
  wl_params p1, p2;
  wl_params_init(&p1, 301, 800);
  p1.classes[0] = "chat";
  p1.classes[1] = "default";
  wl_params_init(&p2, 302, 700);
  p2.classes[0] = "chat";
  p2.classes[1] = "default";
  p2.classes[2] = "late"; /* added between the two snapshots */
  p2.scale = 0.6;
  ttft_registry *r = w->r = new_registry("m"), *r2 = w->r2 = new_registry("m");
  wl_add_classes(r, &p1);
  p2.t0 = wl_play(r, &p1) + 1000;
  w->s1 = ttft_snapshot_take(r);
  wl_add_classes(r, &p2);
  wl_add_classes(r2, &p2);
  wl_play(r, &p2);
  wl_play(r2, &p2);
  w->s2 = ttft_snapshot_take(r);
  w->ref = ttft_snapshot_take(r2);
  int err = 1;
  w->d = ttft_snapshot_delta(w->s2, w->s1, &err);
  EXPECT_ERR(TTFT_OK, err);
  EXPECT_NOT_NULL(w->d);
  return w->d && w->s1 && w->s2 && w->ref;
}

static void delta_close(delta_world *w) {
  ttft_snapshot_free(w->d);
  ttft_snapshot_free(w->s1);
  ttft_snapshot_free(w->s2);
  ttft_snapshot_free(w->ref);
  ttft_registry_free(w->r);
  ttft_registry_free(w->r2);
}

/* delta(s2, s1) == a registry that saw only the events in between */
TEST(delta_equals_events_between) {
  delta_world w;
  if (delta_open(&w)) {
    ttft_snapshot *d = w.d, *ref = w.ref, *s2 = w.s2;
    EXPECT_EQ_INT(3, ttft_snapshot_classes(d));
    expect_class_same(ref, TTFT_CLASS_ALL, d, TTFT_CLASS_ALL, 0);
    static const char *names[] = {"default", "chat", "late"};
    for (int i = 0; i < 3; i++) {
      int wc = class_of(ref, names[i]), gc = class_of(d, names[i]);
      EXPECT_TRUE(wc >= 0 && gc >= 0);
      if (wc >= 0 && gc >= 0) expect_class_same(ref, wc, d, gc, 0);
    }
    expect_splits_same(ref, d, 0);
    EXPECT_TRUE(ttft_snapshot_count(d, TTFT_METRIC_TTFT) > 500);
    /* the delta's extremes stay inside what newer has seen */
    EXPECT_GE_U64(ttft_snapshot_quantile(d, TTFT_METRIC_ITL, 0.0), ttft_snapshot_quantile(s2, TTFT_METRIC_ITL, 0.0));
    EXPECT_LE_U64(ttft_snapshot_quantile(d, TTFT_METRIC_ITL, 1.0), ttft_snapshot_quantile(s2, TTFT_METRIC_ITL, 1.0));
  }
  delta_close(&w);
}

/* the delta spans the end of s1 to the end of s2; gauges are s2's */
TEST(delta_interval_and_gauges) {
  delta_world w;
  if (delta_open(&w)) {
    uint64_t s1a, s1b, s2a, s2b, da, db;
    ttft_snapshot_interval(w.s1, &s1a, &s1b);
    ttft_snapshot_interval(w.s2, &s2a, &s2b);
    ttft_snapshot_interval(w.d, &da, &db);
    EXPECT_EQ_U64(s1b, da);
    EXPECT_EQ_U64(s2b, db);
    EXPECT_EQ_U64(ttft_snapshot_gauge(w.s2, TTFT_GAUGE_INFLIGHT), ttft_snapshot_gauge(w.d, TTFT_GAUGE_INFLIGHT));
  }
  delta_close(&w);
}

TEST(delta_with_itself_is_empty) {
  delta_world w;
  if (delta_open(&w)) {
    int err = 1;
    ttft_snapshot *z = ttft_snapshot_delta(w.s2, w.s2, &err);
    EXPECT_NOT_NULL(z);
    EXPECT_EQ_U64(0, ttft_snapshot_count(z, TTFT_METRIC_ITL));
    EXPECT_EQ_U64(0, ttft_snapshot_counter(z, TTFT_COUNTER_BEGUN));
    EXPECT_EQ_U64(0, ttft_snapshot_quantile(z, TTFT_METRIC_TTFT, 0.5));
    ttft_snapshot_free(z);
  }
  delta_close(&w);
}

/* delta survives the codec (the registry id travels) */
TEST(delta_of_decoded_snapshots) {
  delta_world w;
  if (delta_open(&w)) {
    int err = 1;
    long n1 = ttft_snapshot_encode(w.s1, NULL, 0), n2 = ttft_snapshot_encode(w.s2, NULL, 0);
    unsigned char *b1 = malloc((size_t)n1), *b2 = malloc((size_t)n2);
    ttft_snapshot_encode(w.s1, b1, (size_t)n1);
    ttft_snapshot_encode(w.s2, b2, (size_t)n2);
    ttft_snapshot *e1 = ttft_snapshot_decode(b1, (size_t)n1, NULL);
    ttft_snapshot *e2 = ttft_snapshot_decode(b2, (size_t)n2, NULL);
    ttft_snapshot *de = ttft_snapshot_delta(e2, e1, &err);
    EXPECT_NOT_NULL(de);
    if (de) expect_class_same(w.d, TTFT_CLASS_ALL, de, TTFT_CLASS_ALL, 1);
    ttft_snapshot_free(de);
    ttft_snapshot_free(e1);
    ttft_snapshot_free(e2);
    free(b1);
    free(b2);
  }
  delta_close(&w);
}

TEST(delta_refuses) {
  delta_world w;
  if (delta_open(&w)) {
    int err = 0;
    EXPECT_NULL(ttft_snapshot_delta(w.s1, w.s2, &err)); /* wrong order */
    EXPECT_ERR(TTFT_EINVAL, err);
    err = 0;
    EXPECT_NULL(ttft_snapshot_delta(w.s2, w.ref, &err)); /* another registry */
    EXPECT_ERR(TTFT_EINVAL, err);
    err = 0;
    EXPECT_NULL(ttft_snapshot_delta(w.d, w.s1, &err)); /* a delta is not a registry's history */
    EXPECT_ERR(TTFT_EINVAL, err);
    err = 0;
    EXPECT_NULL(ttft_snapshot_delta(NULL, w.s1, &err));
    EXPECT_ERR(TTFT_EINVAL, err);
    EXPECT_NULL(ttft_snapshot_delta(w.s2, NULL, NULL));
  }
  delta_close(&w);
}

TU_MAIN()
