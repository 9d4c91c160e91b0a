/*
 * test_merge_n.c — the n-way merge (ttft__snapshot_merge_n, what the
 * gatherer merges with; src/report/snapshot_ops.c) against the chain of
 * two-way merges it replaces, merge(merge(v0, v1), v2)...:
 *
 *  - k = 1, 2, 3 and 64 snapshots of registries with differing class sets
 *    (in differing orders): the same classes in the same order, and every
 *    counter, stall cause, gauge, histogram bucket, count, sum, min, max,
 *    quantile, slowest list, split and engine-step histogram equal;
 *  - a counter whose sum would pass 2^64 - 1: TTFT_ERANGE from both;
 *  - NULL and empty inputs: TTFT_EINVAL.
 * The static program calls the n-way merge itself and compares the
 * internals; the shared one (no hidden symbols) compares, through the
 * public API, the chain against a balanced tree of two-way merges (the
 * same union, grouped differently: what the n-way merge must also equal).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"
#include "task.h"
#include "common/snapshot.h"
#ifdef TTFT_TEST_STATIC
#include "report/format.h"
#endif

static const double QS[] = {0.0, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0};
#define NQ (sizeof QS / sizeof QS[0])
#define NAMES 11

/* Registry p: 1 + p % 4 classes named c<(p*3 + i) % NAMES> (some
 * processes hold none of the others' classes, orders differ), requests
 * whose latencies, lengths, statuses and ids depend on p. */
static ttft_snapshot *make(int p) {
  ttft_config cfg;
  ttft_config_init(&cfg);
  ttft_registry *r = ttft_registry_new(&cfg);
  if (!r) return NULL;
  int ids[4] = {0};
  int ncls = 1 + p % 4;
  for (int i = 0; i < ncls; i++) {
    char name[16];
    snprintf(name, sizeof name, "c%d", (p * 3 + i) % NAMES);
    ids[i] = ttft_class_add(r, name, NULL);
    if (ids[i] < 0) {
      ttft_registry_free(r);
      return NULL;
    }
  }
  uint64_t t = 1000000000ull + (uint64_t)p * 7919;
  for (int i = 0; i < 40 + p % 13; i++) {
    ttft_request rq;
    ttft_request_init(&rq);
    rq.class_id = i % 5 == 4 ? 0 : ids[i % ncls];
    rq.prompt_tokens = (uint32_t)(50 + (i * 131 + p * 17) % 6000);
    char rid[24];
    snprintf(rid, sizeof rid, "p%d-r%d", p, i);
    rq.request_id = rid;
    /* (1.3) two in three with their own TPOT budget (10 ms, or 5 ms on
     * odd processes): token deadlines, so the slowest entries carry
     * fluidity and budgets */
    rq.tpot_slo_ns = i % 3 ? (p % 2 ? 5000000u : 10000000u) : 0;
    ttft_seq s = ttft_begin_ex(r, &rq, t);
    if (!s) continue;
    uint64_t u = t + 1000000ull * (uint64_t)(5 + (i * 37 + p * 11) % 900);
    int toks = 1 + (i + p) % 23;
    for (int j = 0; j < toks; j++) {
      (void)ttft_token_emitted(r, s, 1, u);
      u += 100000ull * (uint64_t)(1 + (i * j + p) % 400);
    }
    ttft_status st = (i + p) % 9 == 0 ? TTFT_CANCELLED : (i + p) % 13 == 0 ? TTFT_ERROR : TTFT_COMPLETED;
    (void)ttft_stream_end(r, s, st, u);
    t += 3000000ull;
  }
  ttft_snapshot *snap = ttft_snapshot_take(r);
  ttft_registry_free(r);
  return snap;
}

/* the chain of two-way merges over v[0..n) (n == 1: NULL, nothing merged) */
static ttft_snapshot *chain(ttft_snapshot *const *v, int n, int *err) {
  *err = TTFT_OK;
  if (n < 2) return NULL;
  ttft_snapshot *m = ttft_snapshot_merge(v[0], v[1], err);
  for (int k = 2; k < n && m; k++) {
    ttft_snapshot *x = ttft_snapshot_merge(m, v[k], err);
    ttft_snapshot_free(m);
    m = x;
  }
  return m;
}

/* balanced: merge(tree(left half), tree(right half)) */
static ttft_snapshot *tree(ttft_snapshot *const *v, int n, int *err) {
  if (n == 1) return ttft_snapshot_merge(v[0], v[0], err); /* unused for n == 1 */
  if (n == 2) return ttft_snapshot_merge(v[0], v[1], err);
  int h = n / 2;
  ttft_snapshot *a = h == 1 ? NULL : tree(v, h, err);
  ttft_snapshot *b = n - h == 1 ? NULL : tree(v + h, n - h, err);
  ttft_snapshot *m = ttft_snapshot_merge(a ? a : v[0], b ? b : v[h], err);
  ttft_snapshot_free(a);
  ttft_snapshot_free(b);
  return m;
}

/* Differences between x and y through the public API (0 when equal). */
static int diff_public(const ttft_snapshot *x, const ttft_snapshot *y) {
  int d = 0;
  int nc = ttft_snapshot_classes(x);
  d += nc != ttft_snapshot_classes(y);
  for (int c = -1; c < nc && !d; c++) { /* -1: TTFT_CLASS_ALL */
    int id = c < 0 ? TTFT_CLASS_ALL : c;
    if (c >= 0) d += strcmp(ttft_snapshot_class_name(x, c), ttft_snapshot_class_name(y, c)) != 0;
    for (int k = 0; k < TTFT_COUNTER_COUNT_; k++)
      d += ttft_snapshot_class_counter(x, id, (ttft_counter)k) !=
           ttft_snapshot_class_counter(y, id, (ttft_counter)k);
    for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
      d += ttft_snapshot_class_count(x, id, (ttft_metric)m) != ttft_snapshot_class_count(y, id, (ttft_metric)m);
      for (size_t q = 0; q < NQ; q++)
        d += ttft_snapshot_class_quantile(x, id, (ttft_metric)m, QS[q]) !=
             ttft_snapshot_class_quantile(y, id, (ttft_metric)m, QS[q]);
    }
    for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++)
      d += ttft_snapshot_slowest_count(x, id, (ttft_slowest_by)by) !=
           ttft_snapshot_slowest_count(y, id, (ttft_slowest_by)by);
  }
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++)
    d += ttft_snapshot_sum(x, (ttft_metric)m) != ttft_snapshot_sum(y, (ttft_metric)m);
  return d;
}

#ifdef TTFT_TEST_STATIC
static int diff_hist(const ttft__shist *a, const ttft__shist *b) {
  int d = a->count != b->count || a->sum != b->sum || a->sum_hi != b->sum_hi ||
          ttft__shist_lo(a) != ttft__shist_lo(b) || ttft__shist_hi(a) != ttft__shist_hi(b);
  if (a->count) d += a->min != b->min || a->max != b->max;
  for (uint32_t i = ttft__shist_lo(a); i < ttft__shist_hi(a) && !d; i++)
    d += ttft__shist_at(a, i) != ttft__shist_at(b, i);
  for (size_t q = 0; q < NQ && !d; q++) d += ttft__shist_quantile(a, QS[q]) != ttft__shist_quantile(b, QS[q]);
  return d;
}

static int diff_class(const ttft__sclass *a, const ttft__sclass *b) {
  int d = strcmp(a->name, b->name) != 0;
  d += memcmp(a->ctr, b->ctr, sizeof a->ctr) != 0;
  d += memcmp(a->stall_n, b->stall_n, sizeof a->stall_n) != 0;
  d += memcmp(a->stall_ns, b->stall_ns, sizeof a->stall_ns) != 0;
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) d += diff_hist(a->h[m], b->h[m]);
  for (int st = 0; st < TTFT_STATUS_COUNT_; st++)
    for (int v = 0; v < TTFT__STATUS_VIEWS; v++) d += diff_hist(a->sv[st][v], b->sv[st][v]);
  for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++) {
    d += a->nslow[by] != b->nslow[by];
    for (uint32_t j = 0; j < a->nslow[by] && j < b->nslow[by]; j++) {
      const ttft__slow *x = &a->slow[by][j], *y = &b->slow[by][j];
      d += x->value != y->value || x->t_begin != y->t_begin || x->t_end != y->t_end ||
           x->ttft != y->ttft || x->cls != y->cls || x->status != y->status || strcmp(x->id, y->id) != 0 ||
           x->dl != y->dl || x->dl_missed != y->dl_missed || x->dl_ns != y->dl_ns ||
           x->ttft_slo != y->ttft_slo || x->tpot_slo != y->tpot_slo;
    }
  }
  return d;
}

/* Differences between x and y's internals (0 when equal). */
static int diff_internal(const ttft_snapshot *x, const ttft_snapshot *y) {
  int d = x->nclasses != y->nclasses || x->registry_id != y->registry_id ||
          x->t_start_ns != y->t_start_ns || x->t_end_ns != y->t_end_ns || x->slowest_k != y->slowest_k;
  d += memcmp(x->gauge, y->gauge, sizeof x->gauge) != 0;
  for (uint32_t c = 0; c < x->nclasses && !d; c++) d += diff_class(&x->cls[c], &y->cls[c]);
  if (!d) d += diff_class(&x->all, &y->all);
  for (int i = 0; i < TTFT_PREFIX_BAND_COUNT_; i++)
    d += diff_hist(x->split_cache[i], y->split_cache[i]) + diff_hist(x->split_prefill[i], y->split_prefill[i]);
  for (int i = 0; i < TTFT_MAX_BANDS; i++) d += diff_hist(x->split_band[i], y->split_band[i]);
  for (int i = 0; i < 2; i++) d += diff_hist(x->step[i], y->step[i]);
  return d;
}
#endif

static void check_k(int k) {
  ttft_snapshot **v = calloc((size_t)k, sizeof *v);
  if (!v) abort();
  for (int p = 0; p < k; p++) {
    v[p] = make(p);
    EXPECT_NOT_NULL(v[p]);
    if (!v[p]) return;
  }
  int err = -1;
  ttft_snapshot *ref = chain(v, k, &err);
  EXPECT_EQ_INT(TTFT_OK, err);
#ifdef TTFT_TEST_STATIC
  int nerr = -1;
  ttft_snapshot *n = ttft__snapshot_merge_n((const ttft_snapshot *const *)v, (size_t)k, &nerr);
  EXPECT_EQ_INT(TTFT_OK, nerr);
  EXPECT_NOT_NULL(n);
  if (k == 1) { /* one source: its data, rebuilt; no longer one registry's */
    EXPECT_EQ_U64(0, n->registry_id);
    n->registry_id = v[0]->registry_id;
    EXPECT_EQ_INT(0, diff_internal(v[0], n));
  } else {
    EXPECT_EQ_INT(0, diff_internal(ref, n));
    EXPECT_EQ_INT(0, diff_public(ref, n));
  }
  ttft_snapshot_free(n);
#endif
  if (k >= 3) {
    ttft_snapshot *t = tree(v, k, &err);
    EXPECT_EQ_INT(TTFT_OK, err);
    EXPECT_EQ_INT(0, diff_public(ref, t));
    ttft_snapshot_free(t);
  }
  { /* (1.3) the lists compared carry token deadlines and budgets */
    uint64_t dl = 0, budgets = 0;
    for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++)
      for (unsigned j = 0; j < ttft_snapshot_slowest_count(ref ? ref : v[0], TTFT_CLASS_ALL, (ttft_slowest_by)by); j++) {
        ttft_slow_request o;
        memset(&o, 0, sizeof o);
        o.struct_size = sizeof o;
        if (ttft_snapshot_slowest(ref ? ref : v[0], TTFT_CLASS_ALL, (ttft_slowest_by)by, j, &o) != TTFT_OK) continue;
        dl += o.deadlines;
        budgets += o.tpot_slo_ns != 0;
      }
    EXPECT_GT_INT((int)(dl > 0), 0);
    EXPECT_GT_INT((int)(budgets > 0), 0);
  }
  if (k >= 2) { /* the union holds every name the sources hold */
    int names = 0;
    for (int c = 0; c < ttft_snapshot_classes(ref); c++) names += ttft_snapshot_class_name(ref, c)[0] == 'c';
    EXPECT_EQ_INT(k >= 8 ? NAMES : names, names);
    EXPECT_GT_INT(names, 1);
  }
  ttft_snapshot_free(ref);
  for (int p = 0; p < k; p++) ttft_snapshot_free(v[p]);
  free(v);
}

TEST(k1) { check_k(1); }
TEST(k2) { check_k(2); }
TEST(k3) { check_k(3); }
TEST(k64) { check_k(64); }

/* Three snapshots whose BEGUN counters sum past 2^64 - 1 (each pair
 * does not): the chain fails at its second step, the n-way merge at once. */
TEST(erange_overflow) {
  ttft_snapshot *v[3];
  for (int p = 0; p < 3; p++) v[p] = make(p);
  for (int p = 0; p < 3; p++) EXPECT_NOT_NULL(v[p]);
  if (!v[0] || !v[1] || !v[2]) return;
#ifdef TTFT_TEST_STATIC
  for (int p = 0; p < 3; p++) v[p]->cls[0].ctr[TTFT_COUNTER_BEGUN] = UINT64_MAX / 3 + 1;
  int err = 0;
  ttft_snapshot *two = ttft_snapshot_merge(v[0], v[1], &err);
  EXPECT_EQ_INT(TTFT_OK, err); /* two of them fit */
  ttft_snapshot_free(two);
  err = 0;
  EXPECT_NULL(chain(v, 3, &err));
  EXPECT_EQ_INT(TTFT_ERANGE, err);
  err = 0;
  EXPECT_NULL(ttft__snapshot_merge_n((const ttft_snapshot *const *)v, 3, &err));
  EXPECT_EQ_INT(TTFT_ERANGE, err);
  /* gauges saturate instead: the same three at the top still merge */
  for (int p = 0; p < 3; p++) v[p]->cls[0].ctr[TTFT_COUNTER_BEGUN] = 1;
  for (int p = 0; p < 3; p++) v[p]->gauge[TTFT_GAUGE_INFLIGHT] = UINT64_MAX / 2;
  ttft_snapshot *m = ttft__snapshot_merge_n((const ttft_snapshot *const *)v, 3, &err);
  EXPECT_NOT_NULL(m);
  if (m) EXPECT_EQ_U64(UINT64_MAX, m->gauge[TTFT_GAUGE_INFLIGHT]);
  ttft_snapshot_free(m);
#else
  /* public: a snapshot merged with itself until a counter would wrap is
   * not reachable through the API; the two-way merge's refusal of NULL is */
  int err = 0;
  EXPECT_NULL(ttft_snapshot_merge(v[0], NULL, &err));
  EXPECT_EQ_INT(TTFT_EINVAL, err);
#endif
  for (int p = 0; p < 3; p++) ttft_snapshot_free(v[p]);
}

TEST(invalid) {
  ttft_snapshot *s = make(1);
  EXPECT_NOT_NULL(s);
  int err = 0;
#ifdef TTFT_TEST_STATIC
  const ttft_snapshot *v[2] = {s, NULL};
  EXPECT_NULL(ttft__snapshot_merge_n(NULL, 2, &err));
  EXPECT_EQ_INT(TTFT_EINVAL, err);
  err = 0;
  EXPECT_NULL(ttft__snapshot_merge_n(v, 0, &err));
  EXPECT_EQ_INT(TTFT_EINVAL, err);
  err = 0;
  EXPECT_NULL(ttft__snapshot_merge_n(v, 2, &err));
  EXPECT_EQ_INT(TTFT_EINVAL, err);
  EXPECT_NULL(ttft__snapshot_merge_n(v, 2, NULL));
#else
  EXPECT_NULL(ttft_snapshot_merge(NULL, s, &err));
  EXPECT_EQ_INT(TTFT_EINVAL, err);
#endif
  ttft_snapshot_free(s);
}

TU_MAIN()
