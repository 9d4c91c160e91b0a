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

static void class_add(ttft__sclass *dst, const ttft__sclass *src) {
  for (unsigned i = 0; i < TTFT_COUNTER_COUNT_; i++) dst->ctr[i] += src->ctr[i];
  for (unsigned m = 0; m < TTFT_METRIC_COUNT_; m++) ttft__shist_add(dst->h[m], src->h[m]);
}

static void class_meta(ttft__sclass *dst, const ttft__sclass *src) {
  memcpy(dst->name, src->name, sizeof dst->name);
  dst->name[sizeof dst->name - 1] = '\0';
  dst->slo = src->slo;
}

ttft_snapshot *ttft_snapshot_merge(const ttft_snapshot *a, const ttft_snapshot *b, int *err) {
  if (!a || !b) return fail(err, TTFT_EINVAL);
  /* the union of classes: a's in a's order, then b's new ones in b's order */
  uint32_t n = a->nclasses;
  for (uint32_t j = 0; j < b->nclasses; j++)
    if (class_index(a, b->cls[j].name) < 0) n++;

  ttft_snapshot *s = ttft__snapshot_new(n);
  if (!s) return fail(err, TTFT_ENOMEM);
  ttft__snapshot_copy_meta(s, a);
  s->registry_id = 0; /* no longer one registry's history: delta refuses it */
  s->t_start_ns = a->t_start_ns < b->t_start_ns ? a->t_start_ns : b->t_start_ns;
  s->t_end_ns = a->t_end_ns > b->t_end_ns ? a->t_end_ns : b->t_end_ns;
  for (unsigned g = 0; g < TTFT_GAUGE_COUNT_; g++) s->gauge[g] = a->gauge[g] + b->gauge[g];

  for (uint32_t i = 0; i < a->nclasses; i++) {
    class_meta(&s->cls[i], &a->cls[i]);
    class_add(&s->cls[i], &a->cls[i]);
  }
  uint32_t next = a->nclasses;
  for (uint32_t j = 0; j < b->nclasses; j++) {
    int i = class_index(a, b->cls[j].name);
    ttft__sclass *dst;
    if (i >= 0) {
      dst = &s->cls[i];
    } else {
      dst = &s->cls[next++];
      class_meta(dst, &b->cls[j]);
    }
    class_add(dst, &b->cls[j]);
  }

  for (unsigned i = 0; i < 2; i++) {
    ttft__shist_add(s->split_cache[i], a->split_cache[i]);
    ttft__shist_add(s->split_cache[i], b->split_cache[i]);
  }
  /* bands only add up when they mean the same prompt lengths; otherwise
   * a's edges and a's band data stand alone (docs/encoding.md) */
  int bands_match = same_band_edges(a, b);
  for (unsigned i = 0; i < TTFT_MAX_BANDS; i++) {
    ttft__shist_add(s->split_band[i], a->split_band[i]);
    if (bands_match) ttft__shist_add(s->split_band[i], b->split_band[i]);
  }
  ttft__snapshot_finish(s);
  if (err) *err = TTFT_OK;
  return s;
}

/* dst = newer - older, bucket by bucket; 0 when a count would go negative.
 * min/max: exact when the interval provably holds the extreme (it beat
 * older's), else the edge of the delta's outermost bucket, clamped by
 * newer's extremes. */
static int hist_sub(ttft__shist *dst, const ttft__shist *newer, const ttft__shist *older) {
  if (newer->count < older->count) return 0;
  uint32_t first = TTFT__HIST_BUCKETS, last = 0;
  uint64_t n = 0;
  for (uint32_t i = 0; i < TTFT__HIST_BUCKETS; i++) {
    if (newer->b[i] < older->b[i]) return 0;
    uint64_t d = newer->b[i] - older->b[i];
    dst->b[i] = d;
    if (!d) continue;
    n += d;
    if (first == TTFT__HIST_BUCKETS) first = i;
    last = i;
  }
  dst->count = n;
  if (n == 0) {
    dst->sum = dst->min = dst->max = 0;
    return 1;
  }
  dst->sum = newer->sum - older->sum;
  if (older->count == 0) {
    dst->min = newer->min;
    dst->max = newer->max;
    return 1;
  }
  uint64_t lo = ttft__bucket_lo(first), hi = ttft__bucket_hi(last);
  dst->min = newer->min < older->min ? newer->min : lo;
  if (dst->min < newer->min) dst->min = newer->min;
  dst->max = newer->max > older->max ? newer->max : hi;
  if (dst->max > newer->max) dst->max = newer->max;
  return 1; /* ttft__snapshot_finish keeps them within the outer buckets */
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

  int ok = 1;
  for (uint32_t i = 0; i < newer->nclasses && ok; i++) {
    const ttft__sclass *nc = &newer->cls[i];
    ttft__sclass *dc = &s->cls[i];
    class_meta(dc, nc);
    int j = class_index(older, nc->name);
    if (j < 0) { /* added in the interval: everything it has happened in it */
      class_add(dc, nc);
      continue;
    }
    const ttft__sclass *oc = &older->cls[j];
    for (unsigned c = 0; c < TTFT_COUNTER_COUNT_ && ok; c++) {
      if (nc->ctr[c] < oc->ctr[c]) ok = 0;
      else dc->ctr[c] = nc->ctr[c] - oc->ctr[c];
    }
    for (unsigned m = 0; m < TTFT_METRIC_COUNT_ && ok; m++) ok = hist_sub(dc->h[m], nc->h[m], oc->h[m]);
  }
  for (unsigned i = 0; i < 2 && ok; i++)
    ok = hist_sub(s->split_cache[i], newer->split_cache[i], older->split_cache[i]);
  for (unsigned i = 0; i < TTFT_MAX_BANDS && ok; i++)
    ok = hist_sub(s->split_band[i], newer->split_band[i], older->split_band[i]);
  if (!ok) {
    ttft_snapshot_free(s);
    return fail(err, TTFT_EINVAL);
  }
  ttft__snapshot_finish(s);
  if (err) *err = TTFT_OK;
  return s;
}
