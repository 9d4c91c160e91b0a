/* snapshot_ops.c — snapshots combined: merge (a fleet, or two windows) and
 * delta (the interval between two snapshots of one registry). Both build a
 * new snapshot from plain counts; neither touches a registry. */
#include <string.h>

#include "report/format.h"

static ttft_snapshot *fail(int *err, int code) {
  if (err) *err = code;
  return NULL;
}

/* index of class name in s, or -1 */
static int class_index(const ttft_snapshot *s, const char *name) {
  for (uint32_t i = 0; i < s->nclasses; i++)
    if (strcmp(s->cls[i].name, name) == 0) return (int)i;
  return -1;
}

static int same_band_edges(const ttft_snapshot *a, const ttft_snapshot *b) {
  if (a->n_band_edges != b->n_band_edges) return 0;
  for (uint32_t i = 0; i < a->n_band_edges && i < TTFT_MAX_BANDS - 1; i++)
    if (a->band_edges[i] != b->band_edges[i]) return 0;
  return 1;
}

/* counters dst += src; TTFT_ERANGE when one would wrap */
static int counters_add(uint64_t *dst, const uint64_t *src) {
  for (unsigned i = 0; i < TTFT_COUNTER_COUNT_; i++) {
    if (src[i] > UINT64_MAX - dst[i]) return TTFT_ERANGE;
    dst[i] += src[i];
  }
  return TTFT_OK;
}

/* stalls by cause: counts like counters, stalled ns modulo 2^64 (sums) */
static int causes_add(ttft__sclass *dst, const ttft__sclass *src) {
  for (unsigned i = 0; i < TTFT_STALL_CAUSE_COUNT; i++) {
    if (src->stall_n[i] > UINT64_MAX - dst->stall_n[i]) return TTFT_ERANGE;
    dst->stall_n[i] += src->stall_n[i];
    dst->stall_ns[i] += src->stall_ns[i];
  }
  return TTFT_OK;
}

/* Every histogram of class dst of s from the same histograms of a and b
 * (either may be NULL): added bucket by bucket. */
static int class_hists_add(ttft_snapshot *s, ttft__hacc *acc, ttft__sclass *dst,
                           const ttft__sclass *a, const ttft__sclass *b) {
  for (unsigned m = 0; m < TTFT_METRIC_COUNT_; m++) {
    if (a) ttft__hacc_add(acc, a->h[m]);
    if (b) ttft__hacc_add(acc, b->h[m]);
    int rc = ttft__snapshot_hist(s, acc, &dst->h[m]);
    if (rc != TTFT_OK) return rc;
  }
  for (unsigned st = 0; st < TTFT_STATUS_COUNT_; st++)
    for (unsigned v = 0; v < TTFT__STATUS_VIEWS; v++) {
      if (a) ttft__hacc_add(acc, a->sv[st][v]);
      if (b) ttft__hacc_add(acc, b->sv[st][v]);
      int rc = ttft__snapshot_hist(s, acc, &dst->sv[st][v]);
      if (rc != TTFT_OK) return rc;
    }
  return TTFT_OK;
}

static void class_meta(ttft__sclass *dst, const ttft__sclass *src) {
  memcpy(dst->name, src->name, sizeof dst->name);
  dst->name[sizeof dst->name - 1] = '\0';
  dst->slo = src->slo;
}

static uint64_t sat_add(uint64_t x, uint64_t y) { return y > UINT64_MAX - x ? UINT64_MAX : x + y; }

/* Class i of s's slowest lists: the k slowest of the union of ca's and
 * cb's (either may be NULL), k = s->slowest_k. */
static int slow_merge(ttft_snapshot *s, uint32_t i, const ttft__sclass *ca, const ttft__sclass *cb) {
  for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++) {
    uint32_t na = ca ? ca->nslow[by] : 0, nb = cb ? cb->nslow[by] : 0;
    if (!na && !nb) continue;
    ttft__slow *v = ttft__alloc(&s->alloc, (size_t)(na + nb) * sizeof *v);
    if (!v) return TTFT_ENOMEM;
    if (na) memcpy(v, ca->slow[by], na * sizeof *v);
    if (nb) memcpy(v + na, cb->slow[by], nb * sizeof *v);
    int rc = ttft__slow_set(s, i, by, v, ttft__slow_sort(v, na + nb, s->slowest_k));
    ttft__free(&s->alloc, v);
    if (rc != TTFT_OK) return rc;
  }
  return TTFT_OK;
}

/* The classes of s from a (same ids) and b (matched by name, the new ones
 * after a's); from_b[i] is b's class for s's class i, or -1. */
static int merge_data(ttft_snapshot *s, ttft__hacc *acc, const ttft_snapshot *a,
                      const ttft_snapshot *b, int32_t *from_b) {
  for (uint32_t i = 0; i < s->nclasses; i++) from_b[i] = -1;
  uint32_t next = a->nclasses;
  for (uint32_t j = 0; j < b->nclasses; j++) {
    int i = class_index(a, b->cls[j].name);
    if (i < 0) {
      i = (int)next++;
      class_meta(&s->cls[i], &b->cls[j]);
    }
    from_b[i] = (int32_t)j;
  }
  for (uint32_t i = 0; i < a->nclasses; i++) class_meta(&s->cls[i], &a->cls[i]);
  for (uint32_t i = 0; i < s->nclasses; i++) {
    const ttft__sclass *ca = i < a->nclasses ? &a->cls[i] : NULL;
    const ttft__sclass *cb = from_b[i] >= 0 ? &b->cls[from_b[i]] : NULL;
    int rc = TTFT_OK;
    if (ca) rc = counters_add(s->cls[i].ctr, ca->ctr);
    if (cb && rc == TTFT_OK) rc = counters_add(s->cls[i].ctr, cb->ctr);
    if (ca && rc == TTFT_OK) rc = causes_add(&s->cls[i], ca);
    if (cb && rc == TTFT_OK) rc = causes_add(&s->cls[i], cb);
    if (rc == TTFT_OK) rc = class_hists_add(s, acc, &s->cls[i], ca, cb);
    if (rc == TTFT_OK) rc = slow_merge(s, i, ca, cb);
    if (rc != TTFT_OK) return rc;
  }
  for (unsigned i = 0; i < TTFT_PREFIX_BAND_COUNT_; i++) {
    ttft__hacc_add(acc, a->split_cache[i]);
    ttft__hacc_add(acc, b->split_cache[i]);
    int rc = ttft__snapshot_hist(s, acc, &s->split_cache[i]);
    if (rc != TTFT_OK) return rc;
    ttft__hacc_add(acc, a->split_prefill[i]);
    ttft__hacc_add(acc, b->split_prefill[i]);
    rc = ttft__snapshot_hist(s, acc, &s->split_prefill[i]);
    if (rc != TTFT_OK) return rc;
  }
  for (unsigned i = 0; i < 2; i++) {
    ttft__hacc_add(acc, a->step[i]);
    ttft__hacc_add(acc, b->step[i]);
    int rc = ttft__snapshot_hist(s, acc, &s->step[i]);
    if (rc != TTFT_OK) return rc;
  }
  /* bands only add up when they mean the same prompt lengths; otherwise
   * a's edges and a's band data stand alone (docs/encoding.md) */
  int bands_match = same_band_edges(a, b);
  for (unsigned i = 0; i < TTFT_MAX_BANDS; i++) {
    ttft__hacc_add(acc, a->split_band[i]);
    if (bands_match) ttft__hacc_add(acc, b->split_band[i]);
    int rc = ttft__snapshot_hist(s, acc, &s->split_band[i]);
    if (rc != TTFT_OK) return rc;
  }
  return ttft__snapshot_finish(s, acc);
}

ttft_snapshot *ttft_snapshot_merge(const ttft_snapshot *a, const ttft_snapshot *b, int *err) {
  if (!a || !b) return fail(err, TTFT_EINVAL);
  /* the union of classes: a's in a's order, then b's new ones in b's order */
  uint32_t n = a->nclasses;
  for (uint32_t j = 0; j < b->nclasses; j++)
    if (class_index(a, b->cls[j].name) < 0) n++;
  /* more classes than an encoding can carry: the result could not travel */
  if (n > TTFT__MAX_CLASSES) return fail(err, TTFT_ERANGE);

  ttft_snapshot *s = ttft__snapshot_new(n);
  if (!s) return fail(err, TTFT_ENOMEM);
  ttft__snapshot_copy_meta(s, a);
  s->registry_id = 0; /* no longer one registry's history: delta refuses it */
  s->t_start_ns = a->t_start_ns < b->t_start_ns ? a->t_start_ns : b->t_start_ns;
  s->t_end_ns = a->t_end_ns > b->t_end_ns ? a->t_end_ns : b->t_end_ns;
  s->slowest_k = a->slowest_k > b->slowest_k ? a->slowest_k : b->slowest_k;
  for (unsigned g = 0; g < TTFT_GAUGE_COUNT_; g++) s->gauge[g] = sat_add(a->gauge[g], b->gauge[g]);

  ttft__hacc *acc = ttft__hacc_new(&s->alloc);
  int32_t *from_b = ttft__alloc(&s->alloc, n * sizeof *from_b);
  int rc = (acc && from_b) ? merge_data(s, acc, a, b, from_b) : TTFT_ENOMEM;
  ttft__free(&s->alloc, from_b);
  ttft__hacc_free(&s->alloc, acc);
  if (rc != TTFT_OK) {
    ttft_snapshot_free(s);
    return fail(err, rc);
  }
  if (err) *err = TTFT_OK;
  return s;
}

/* *slot = newer - older, bucket by bucket. TTFT_EINVAL when a count would
 * go negative. min/max: the builder keeps newer's when they lie in the
 * delta's outermost populated buckets (exact when the interval holds the
 * extreme: it beat older's, or older was empty) and otherwise takes that
 * bucket's edge, which newer's extremes bound from outside. */
static int hist_sub(ttft_snapshot *s, ttft__hacc *acc, ttft__shist **slot, const ttft__shist *newer,
                    const ttft__shist *older) {
  if (newer->count < older->count) return TTFT_EINVAL;
  ttft__hacc_add(acc, newer);
  if (!ttft__hacc_sub(acc, older)) {
    ttft__hacc_clear(acc);
    return TTFT_EINVAL;
  }
  /* sums are 128 bits wide and never wrap: one that went down is not of
   * an older snapshot of the same histogram */
  if (!ttft__hacc_set_sum_diff(acc, newer->sum_hi, newer->sum, older->sum_hi, older->sum)) {
    ttft__hacc_clear(acc);
    return TTFT_EINVAL;
  }
  acc->min = newer->min;
  acc->max = newer->max;
  acc->any = 1;
  return ttft__snapshot_hist(s, acc, slot);
}

static int same_request(const ttft__slow *x, const ttft__slow *y) {
  return x->value == y->value && x->t_begin == y->t_begin && x->t_end == y->t_end &&
         x->has_trace == y->has_trace && memcmp(x->trace, y->trace, sizeof x->trace) == 0 &&
         strcmp(x->id, y->id) == 0;
}

/* Class i of the delta s: the entries of newer's lists (nc) that older's
 * (oc, NULL for a class added in the interval) does not hold — the
 * requests that entered the registry's slowest lists during the window,
 * so each of them ended in it (lists only ever take larger values). */
static int slow_sub(ttft_snapshot *s, uint32_t i, const ttft__sclass *nc, const ttft__sclass *oc) {
  for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++) {
    uint32_t n = 0;
    if (!nc->nslow[by]) continue;
    ttft__slow *v = ttft__alloc(&s->alloc, nc->nslow[by] * sizeof *v);
    if (!v) return TTFT_ENOMEM;
    for (uint32_t j = 0; j < nc->nslow[by]; j++) {
      int old = 0;
      for (uint32_t m = 0; oc && m < oc->nslow[by] && !old; m++)
        old = same_request(&nc->slow[by][j], &oc->slow[by][m]);
      if (!old) v[n++] = nc->slow[by][j];
    }
    int rc = ttft__slow_set(s, i, by, v, n);
    ttft__free(&s->alloc, v);
    if (rc != TTFT_OK) return rc;
  }
  return TTFT_OK;
}

static int class_sub(ttft_snapshot *s, ttft__hacc *acc, ttft__sclass *dc, const ttft__sclass *nc,
                     const ttft__sclass *oc) {
  for (unsigned c = 0; c < TTFT_COUNTER_COUNT_; c++) {
    if (nc->ctr[c] < oc->ctr[c]) return TTFT_EINVAL;
    dc->ctr[c] = nc->ctr[c] - oc->ctr[c];
  }
  for (unsigned c = 0; c < TTFT_STALL_CAUSE_COUNT; c++) {
    if (nc->stall_n[c] < oc->stall_n[c]) return TTFT_EINVAL;
    dc->stall_n[c] = nc->stall_n[c] - oc->stall_n[c];
    dc->stall_ns[c] = nc->stall_ns[c] - oc->stall_ns[c]; /* modulo 2^64, like sums */
  }
  int rc = TTFT_OK;
  for (unsigned m = 0; m < TTFT_METRIC_COUNT_ && rc == TTFT_OK; m++)
    rc = hist_sub(s, acc, &dc->h[m], nc->h[m], oc->h[m]);
  for (unsigned st = 0; st < TTFT_STATUS_COUNT_; st++)
    for (unsigned v = 0; v < TTFT__STATUS_VIEWS && rc == TTFT_OK; v++)
      rc = hist_sub(s, acc, &dc->sv[st][v], nc->sv[st][v], oc->sv[st][v]);
  return rc;
}

static int delta_data(ttft_snapshot *s, ttft__hacc *acc, const ttft_snapshot *newer,
                      const ttft_snapshot *older) {
  int rc = TTFT_OK;
  for (uint32_t i = 0; i < newer->nclasses && rc == TTFT_OK; i++) {
    const ttft__sclass *nc = &newer->cls[i];
    ttft__sclass *dc = &s->cls[i];
    class_meta(dc, nc);
    int j = class_index(older, nc->name);
    if (j < 0) { /* added in the interval: everything it has happened in it */
      memcpy(dc->ctr, nc->ctr, sizeof dc->ctr);
      memcpy(dc->stall_n, nc->stall_n, sizeof dc->stall_n);
      memcpy(dc->stall_ns, nc->stall_ns, sizeof dc->stall_ns);
      rc = class_hists_add(s, acc, dc, nc, NULL);
    } else {
      rc = class_sub(s, acc, dc, nc, &older->cls[j]);
    }
    if (rc == TTFT_OK) rc = slow_sub(s, i, nc, j < 0 ? NULL : &older->cls[j]);
  }
  for (unsigned i = 0; i < TTFT_PREFIX_BAND_COUNT_ && rc == TTFT_OK; i++) {
    rc = hist_sub(s, acc, &s->split_cache[i], newer->split_cache[i], older->split_cache[i]);
    if (rc == TTFT_OK)
      rc = hist_sub(s, acc, &s->split_prefill[i], newer->split_prefill[i], older->split_prefill[i]);
  }
  for (unsigned i = 0; i < TTFT_MAX_BANDS && rc == TTFT_OK; i++)
    rc = hist_sub(s, acc, &s->split_band[i], newer->split_band[i], older->split_band[i]);
  for (unsigned i = 0; i < 2 && rc == TTFT_OK; i++)
    rc = hist_sub(s, acc, &s->step[i], newer->step[i], older->step[i]);
  if (rc == TTFT_OK) rc = ttft__snapshot_finish(s, acc);
  return rc;
}

ttft_snapshot *ttft_snapshot_delta(const ttft_snapshot *newer, const ttft_snapshot *older, int *err) {
  if (!newer || !older) return fail(err, TTFT_EINVAL);
  if (newer->registry_id == 0 || newer->registry_id != older->registry_id ||
      newer->t_end_ns < older->t_end_ns || newer->nclasses < older->nclasses)
    return fail(err, TTFT_EINVAL);
  /* classes are never removed from a registry: every older one is in newer */
  for (uint32_t j = 0; j < older->nclasses; j++)
    if (class_index(newer, older->cls[j].name) < 0) return fail(err, TTFT_EINVAL);

  ttft_snapshot *s = ttft__snapshot_new(newer->nclasses);
  if (!s) return fail(err, TTFT_ENOMEM);
  ttft__snapshot_copy_meta(s, newer);
  s->registry_id = 0; /* an interval, not a registry's cumulative history */
  s->t_start_ns = older->t_end_ns;
  s->t_end_ns = newer->t_end_ns;
  for (unsigned g = 0; g < TTFT_GAUGE_COUNT_; g++) s->gauge[g] = newer->gauge[g];

  ttft__hacc *acc = ttft__hacc_new(&s->alloc);
  int rc = acc ? delta_data(s, acc, newer, older) : TTFT_ENOMEM;
  ttft__hacc_free(&s->alloc, acc);
  if (rc != TTFT_OK) {
    ttft_snapshot_free(s);
    return fail(err, rc == TTFT_ENOMEM ? TTFT_ENOMEM : TTFT_EINVAL);
  }
  if (err) *err = TTFT_OK;
  return s;
}
