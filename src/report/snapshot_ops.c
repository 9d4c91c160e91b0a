/* snapshot_ops.c — snapshots combined: merge (a fleet, or two windows) and
 * delta (the interval between two snapshots of one registry). Both build a
 * new snapshot from plain counts; neither touches a registry. */
#include <stddef.h>
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

/* ------------------------------------------------------------ merge, n-way
 * One pass over n sources: the union of classes by name (a hash of the
 * names, first seen first), then every histogram of the result built once
 * from all its sources in one accumulator. A chain of two-way merges
 * instead rebuilds every histogram of the growing result at each step:
 * n times the work for n sources. */

/* one (source, class) pair that feeds a class of the result */
typedef struct contrib {
  const ttft__sclass *c;
} contrib;

typedef struct merge_plan {
  uint32_t nu;        /* classes of the result                             */
  uint32_t *first;    /* nu + 1 offsets into by: result class i is fed by
                         by[first[i] .. first[i + 1]), in source order      */
  contrib *by;
  const ttft__sclass **meta; /* nu: the first source class of each name   */
} merge_plan;

static uint32_t name_hash(const char *p) {
  uint32_t h = 2166136261u; /* FNV-1a, 32 bits */
  for (; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
  return h;
}

/* The union of the classes of v[0..n): v[0]'s in v[0]'s order (class ids
 * kept), then each later source's new names in its order: the order a
 * chain of two-way merges gives. Names within one snapshot are unique
 * (registries and the decoder refuse duplicates). TTFT_ERANGE past
 * TTFT__MAX_CLASSES, TTFT_ENOMEM. */
static int plan_classes(const ttft_allocator *al, const ttft_snapshot *const *v, size_t n,
                        merge_plan *pl) {
  size_t total = 0;
  for (size_t k = 0; k < n; k++) total += v[k]->nclasses;
  /* the union has at most min(total, MAX + 1) names before we refuse */
  size_t cap = 16;
  while (cap < 2 * (total < TTFT__MAX_CLASSES + 1 ? total : TTFT__MAX_CLASSES + 1)) cap *= 2;
  int32_t *tab = ttft__alloc(al, cap * sizeof *tab);
  uint32_t *slot = ttft__alloc(al, (total ? total : 1) * sizeof *slot);
  pl->meta = ttft__alloc(al, (total < TTFT__MAX_CLASSES ? total : TTFT__MAX_CLASSES) * sizeof *pl->meta);
  int rc = (tab && slot && pl->meta) ? TTFT_OK : TTFT_ENOMEM;
  if (rc == TTFT_OK) memset(tab, 0xff, cap * sizeof *tab); /* -1: empty */
  uint32_t nu = 0;
  size_t e = 0;
  for (size_t k = 0; k < n && rc == TTFT_OK; k++)
    for (uint32_t j = 0; j < v[k]->nclasses && rc == TTFT_OK; j++, e++) {
      const ttft__sclass *c = &v[k]->cls[j];
      size_t b = name_hash(c->name) & (cap - 1);
      while (tab[b] >= 0 && strcmp(pl->meta[tab[b]]->name, c->name) != 0) b = (b + 1) & (cap - 1);
      if (tab[b] >= 0 && k > 0) {
        slot[e] = (uint32_t)tab[b];
        continue;
      }
      /* a new name, or one of v[0]'s classes (each keeps its id) */
      if (nu == TTFT__MAX_CLASSES) {
        rc = TTFT_ERANGE; /* more classes than an encoding can carry */
        break;
      }
      if (tab[b] < 0) tab[b] = (int32_t)nu;
      pl->meta[nu] = c;
      slot[e] = nu++;
    }
  if (rc == TTFT_OK) {
    pl->nu = nu;
    pl->first = ttft__alloc(al, (nu + 1) * sizeof *pl->first);
    pl->by = ttft__alloc(al, (total ? total : 1) * sizeof *pl->by);
    if (!pl->first || !pl->by) rc = TTFT_ENOMEM;
  }
  if (rc == TTFT_OK) { /* counting sort of the pairs by result class */
    memset(pl->first, 0, (nu + 1) * sizeof *pl->first);
    for (size_t i = 0; i < total; i++) pl->first[slot[i] + 1]++;
    for (uint32_t i = 0; i < nu; i++) pl->first[i + 1] += pl->first[i];
    uint32_t *fill = (uint32_t *)tab; /* reused: cap >= 2 * nu >= nu + 1 */
    memcpy(fill, pl->first, (nu + 1) * sizeof *fill);
    e = 0;
    for (size_t k = 0; k < n; k++)
      for (uint32_t j = 0; j < v[k]->nclasses; j++, e++) pl->by[fill[slot[e]]++].c = &v[k]->cls[j];
  }
  ttft__free(al, slot);
  ttft__free(al, tab);
  return rc;
}

static void plan_free(const ttft_allocator *al, merge_plan *pl) {
  ttft__free(al, pl->first);
  ttft__free(al, pl->by);
  ttft__free(al, (void *)pl->meta);
  memset(pl, 0, sizeof *pl);
}

/* Class i of s from its sources: counters and stall causes summed
 * (TTFT_ERANGE when a count would wrap), every histogram built once, the
 * slowest lists the k slowest of all of them (k = s->slowest_k). */
static int merge_class(ttft_snapshot *s, ttft__hacc *acc, uint32_t i, const contrib *by, uint32_t nby,
                       ttft__slow **buf, uint32_t *bufcap) {
  ttft__sclass *dst = &s->cls[i];
  for (uint32_t q = 0; q < nby; q++) {
    int rc = counters_add(dst->ctr, by[q].c->ctr);
    if (rc == TTFT_OK) rc = causes_add(dst, by[q].c);
    if (rc != TTFT_OK) return rc;
  }
  for (unsigned m = 0; m < TTFT_METRIC_COUNT_; m++) {
    for (uint32_t q = 0; q < nby; q++) ttft__hacc_add(acc, by[q].c->h[m]);
    int rc = ttft__snapshot_hist(s, acc, &dst->h[m]);
    if (rc != TTFT_OK) return rc;
  }
  for (unsigned st = 0; st < TTFT_STATUS_COUNT_; st++)
    for (unsigned w = 0; w < TTFT__STATUS_VIEWS; w++) {
      for (uint32_t q = 0; q < nby; q++) ttft__hacc_add(acc, by[q].c->sv[st][w]);
      int rc = ttft__snapshot_hist(s, acc, &dst->sv[st][w]);
      if (rc != TTFT_OK) return rc;
    }
  for (int b = 0; b < TTFT_SLOWEST_COUNT_; b++) {
    uint32_t total = 0;
    for (uint32_t q = 0; q < nby; q++) total += by[q].c->nslow[b];
    if (!total) continue;
    if (total > *bufcap) {
      ttft__free(&s->alloc, *buf);
      *bufcap = 0;
      *buf = ttft__alloc(&s->alloc, (size_t)total * sizeof **buf);
      if (!*buf) return TTFT_ENOMEM;
      *bufcap = total;
    }
    uint32_t o = 0;
    for (uint32_t q = 0; q < nby; q++) {
      if (by[q].c->nslow[b]) memcpy(*buf + o, by[q].c->slow[b], by[q].c->nslow[b] * sizeof **buf);
      o += by[q].c->nslow[b];
    }
    int rc = ttft__slow_set(s, i, b, *buf, ttft__slow_sort(*buf, total, s->slowest_k));
    if (rc != TTFT_OK) return rc;
  }
  return TTFT_OK;
}

/* the registry-wide histogram at byte offset off of a snapshot, from
 * every source that `use`s (NULL: all) */
static int merge_wide(ttft_snapshot *s, ttft__hacc *acc, const ttft_snapshot *const *v, size_t n,
                      size_t off, const unsigned char *use) {
  for (size_t k = 0; k < n; k++)
    if (!use || use[k]) ttft__hacc_add(acc, *(ttft__shist *const *)((const char *)v[k] + off));
  return ttft__snapshot_hist(s, acc, (ttft__shist **)((char *)s + off));
}

static int merge_data_n(ttft_snapshot *s, ttft__hacc *acc, const ttft_snapshot *const *v, size_t n,
                        const merge_plan *pl) {
  for (uint32_t i = 0; i < pl->nu; i++) class_meta(&s->cls[i], pl->meta[i]);
  ttft__slow *buf = NULL;
  uint32_t bufcap = 0;
  int rc = TTFT_OK;
  for (uint32_t i = 0; i < pl->nu && rc == TTFT_OK; i++)
    rc = merge_class(s, acc, i, pl->by + pl->first[i], pl->first[i + 1] - pl->first[i], &buf, &bufcap);
  ttft__free(&s->alloc, buf);
  for (unsigned i = 0; i < TTFT_PREFIX_BAND_COUNT_ && rc == TTFT_OK; i++) {
    rc = merge_wide(s, acc, v, n, offsetof(ttft_snapshot, split_cache[i]), NULL);
    if (rc == TTFT_OK) rc = merge_wide(s, acc, v, n, offsetof(ttft_snapshot, split_prefill[i]), NULL);
  }
  for (unsigned i = 0; i < 2 && rc == TTFT_OK; i++)
    rc = merge_wide(s, acc, v, n, offsetof(ttft_snapshot, step[i]), NULL);
  if (rc != TTFT_OK) return rc;
  /* bands only add up when they mean the same prompt lengths; otherwise
   * v[0]'s edges and the band data of the sources with those edges stand
   * alone (docs/encoding.md) */
  unsigned char *use = ttft__alloc(&s->alloc, n);
  if (!use) return TTFT_ENOMEM;
  for (size_t k = 0; k < n; k++) use[k] = (unsigned char)(k == 0 || same_band_edges(v[0], v[k]));
  for (unsigned i = 0; i < TTFT_MAX_BANDS && rc == TTFT_OK; i++)
    rc = merge_wide(s, acc, v, n, offsetof(ttft_snapshot, split_band[i]), use);
  ttft__free(&s->alloc, use);
  return rc == TTFT_OK ? ttft__snapshot_finish(s, acc) : rc;
}

ttft_snapshot *ttft__snapshot_merge_n(const ttft_snapshot *const *v, size_t n, int *err) {
  if (!v || n == 0) return fail(err, TTFT_EINVAL);
  for (size_t k = 0; k < n; k++)
    if (!v[k]) return fail(err, TTFT_EINVAL);
  ttft_allocator al;
  ttft__allocator_current(&al);
  merge_plan pl = {0};
  int rc = plan_classes(&al, v, n, &pl);
  if (rc != TTFT_OK) {
    plan_free(&al, &pl);
    return fail(err, rc);
  }
  ttft_snapshot *s = ttft__snapshot_new(pl.nu);
  if (!s) {
    plan_free(&al, &pl);
    return fail(err, TTFT_ENOMEM);
  }
  ttft__snapshot_copy_meta(s, v[0]);
  s->registry_id = 0; /* no longer one registry's history: delta refuses it */
  s->t_start_ns = v[0]->t_start_ns;
  s->t_end_ns = v[0]->t_end_ns;
  memcpy(s->gauge, v[0]->gauge, sizeof s->gauge);
  for (size_t k = 1; k < n; k++) {
    if (v[k]->t_start_ns < s->t_start_ns) s->t_start_ns = v[k]->t_start_ns;
    if (v[k]->t_end_ns > s->t_end_ns) s->t_end_ns = v[k]->t_end_ns;
    if (v[k]->slowest_k > s->slowest_k) s->slowest_k = v[k]->slowest_k;
    for (unsigned g = 0; g < TTFT_GAUGE_COUNT_; g++) s->gauge[g] = sat_add(s->gauge[g], v[k]->gauge[g]);
  }
  ttft__hacc *acc = ttft__hacc_new(&s->alloc);
  rc = acc ? merge_data_n(s, acc, v, n, &pl) : TTFT_ENOMEM;
  ttft__hacc_free(&s->alloc, acc);
  plan_free(&al, &pl);
  if (rc != TTFT_OK) {
    ttft_snapshot_free(s);
    return fail(err, rc);
  }
  if (err) *err = TTFT_OK;
  return s;
}

ttft_snapshot *ttft_snapshot_merge(const ttft_snapshot *a, const ttft_snapshot *b, int *err) {
  if (!a || !b) return fail(err, TTFT_EINVAL);
  const ttft_snapshot *v[2] = {a, b};
  return ttft__snapshot_merge_n(v, 2, err);
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
