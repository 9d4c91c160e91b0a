/* snapshot_take.c — ttft_snapshot_take: the bridge from the live registry
 * (per-thread shards, slots) to an immutable snapshot. The only file of
 * the recording side that writes a struct ttft_snapshot.
 * Layer: record (src/README.md). */
#include <string.h>

#include "record/registry.h"

static void hist_copy_add(ttft__shist *dst, const ttft__hist *src) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < TTFT__HIST_BUCKETS; i++) {
    uint64_t c = TTFT__LD(&src->b[i]);
    dst->b[i] += c;
    n += c;
  }
  if (!n) return;
  uint64_t mn = ~TTFT__LD(&src->min), mx = TTFT__LD(&src->max);
  if (dst->count == 0 || mn < dst->min) dst->min = mn;
  if (dst->count == 0 || mx > dst->max) dst->max = mx;
  dst->count += n;
  dst->sum += TTFT__LD(&src->sum);
}

ttft_snapshot *ttft_snapshot_take(ttft_registry *r) {
  if (!r) return NULL;
  if (r->clock == TTFT_CLOCK_TSC) (void)ttft__tsc_usable(); /* refines the calibration */
  /* acquire: class entries and records published by class_add */
  uint32_t nc = atomic_load_explicit(&r->nclasses, memory_order_acquire);
  ttft_snapshot *s = ttft__snapshot_new(nc);
  if (!s) return NULL;
  ttft__snapshot_copy_meta(s, &r->meta);
  for (uint32_t c = 0; c < nc; c++) {
    memcpy(s->cls[c].name, r->classes[c].name, TTFT__NAME_MAX);
    s->cls[c].slo = r->classes[c].slo;
  }
  for (uint32_t i = 0; i < r->nshards; i++) {
    const ttft__shard *sh = &r->shards[i];
    if (!TTFT__LD(&sh->used)) continue;
    for (uint32_t c = 0; c < nc; c++) {
      /* acquire: see class_add */
      const ttft__crec *cr = atomic_load_explicit(&sh->cls[c], memory_order_acquire);
      if (!cr) continue;
      for (int k = 0; k < TTFT_COUNTER_COUNT_; k++) s->cls[c].ctr[k] += TTFT__LD(&cr->ctr[k]);
      ttft__sclass *k = &s->cls[c];
      for (int m = 0; m < TTFT_METRIC_COUNT_; m++) hist_copy_add(k->h[m], &cr->h[m]);
      /* the live layout (record/registry.h) to the metrics */
      hist_copy_add(k->h[TTFT_METRIC_ITL], &cr->h[TTFT__LH_ITL_MULTI]);
      hist_copy_add(k->h[TTFT_METRIC_ITL_PER_TOKEN], &cr->h[TTFT_METRIC_ITL]);
      for (int st = 0; st < TTFT_STATUS_COUNT_; st++)
        for (int v = 0; v < TTFT__STATUS_VIEWS; v++)
          hist_copy_add(k->sv[st][v], &cr->h[TTFT__LH_STATUS + st * TTFT__STATUS_VIEWS + v]);
    }
    for (int k = 0; k < 2; k++) hist_copy_add(s->split_cache[k], &sh->split_cache[k]);
    for (int b = 0; b < TTFT_MAX_BANDS; b++) hist_copy_add(s->split_band[b], &sh->split_band[b]);
  }
  uint64_t now = ttft__now(r);
  ttft__scan_slots(r, now, &s->gauge[TTFT_GAUGE_INFLIGHT], &s->gauge[TTFT_GAUGE_LIVE_STALLS]);
  s->t_start_ns = r->t_created;
  s->t_end_ns = ttft_now_ns();
  ttft__snapshot_finish(s);
  return s;
}

