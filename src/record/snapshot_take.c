/* snapshot_take.c — ttft_snapshot_take: the bridge from the live registry
 * (per-thread shards, slots) to an immutable snapshot. The only file of
 * the recording side that writes a struct ttft_snapshot.
 * Layer: record (src/README.md). */
#include <string.h>

#include "record/registry.h"

/* dst += a live histogram: its attached chunks, and its coarse counters
 * (observations recorded while the pool was dry) at the middle of their
 * power of two. Returns how many coarse observations it added. */
static uint64_t hist_copy_add(ttft__shist *dst, const ttft__hist *src) {
  uint64_t n = 0, coarse = 0;
  for (uint32_t c = 0; c < TTFT__HIST_CHUNKS; c++) {
    /* acquire: the chunk's zeroed memory and the owner's attach (pool.c) */
    const ttft__chunk *ch = atomic_load_explicit(&src->chunk[c], memory_order_acquire);
    uint32_t base = c * TTFT__CHUNK_BUCKETS;
    if (ch)
      for (uint32_t j = 0; j < TTFT__CHUNK_BUCKETS; j++) {
        uint64_t k = TTFT__LD(&ch->b[j]);
        dst->b[base + j] += k;
        n += k;
      }
    uint64_t k = TTFT__LD(&src->coarse[c]);
    if (k) {
      dst->b[base + TTFT__CHUNK_BUCKETS / 2] += k;
      n += k;
      coarse += k;
    }
  }
  if (!n) return 0;
  uint64_t mn = ~TTFT__LD(&src->min), mx = TTFT__LD(&src->max);
  if (dst->count == 0 || mn < dst->min) dst->min = mn;
  if (dst->count == 0 || mx > dst->max) dst->max = mx;
  dst->count += n;
  dst->sum += TTFT__LD(&src->sum);
  return coarse;
}

/* the metric of status view v (common/snapshot.h, ttft__status_view) */
static ttft_metric status_view_metric(int v) {
  static const ttft_metric m[TTFT__STATUS_VIEWS] = {TTFT_METRIC_TTFT, TTFT_METRIC_TPOT,
                                                    TTFT_METRIC_E2E, TTFT_METRIC_OUTPUT_TOKENS};
  return m[v];
}

ttft_snapshot *ttft_snapshot_take(ttft_registry *r) {
  if (!r) return NULL;
  if (r->clock == TTFT_CLOCK_TSC) (void)ttft__tsc_usable(); /* refines the calibration */
  /* keep the chunk pool ahead of the hooks' consumption (pool.c) */
  ttft__pool_refill(r);
  uint64_t coarse = 0;
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
      for (int m = 0; m < TTFT_METRIC_COUNT_; m++) coarse += hist_copy_add(k->h[m], &cr->h[m]);
      /* the live layout (record/registry.h) to the metrics */
      coarse += hist_copy_add(k->h[TTFT_METRIC_ITL], &cr->h[TTFT__LH_ITL_MULTI]);
      (void)hist_copy_add(k->h[TTFT_METRIC_ITL_PER_TOKEN], &cr->h[TTFT_METRIC_ITL]); /* counted once, as ITL */
      for (int st = 0; st < TTFT_STATUS_COUNT_; st++)
        for (int v = 0; v < TTFT__STATUS_VIEWS; v++) {
          const ttft__hist *lv = &cr->h[TTFT__LH_STATUS + st * TTFT__STATUS_VIEWS + v];
          coarse += hist_copy_add(k->sv[st][v], lv);
          /* E2E, TPOT, OUTPUT_TOKENS over every status: the sum of the views */
          if (v != ttft__status_view(TTFT_METRIC_TTFT)) (void)hist_copy_add(k->h[status_view_metric(v)], lv);
        }
    }
    for (int k = 0; k < 2; k++) coarse += hist_copy_add(s->split_cache[k], &sh->split_cache[k]);
    for (int b = 0; b < TTFT_MAX_BANDS; b++) coarse += hist_copy_add(s->split_band[b], &sh->split_band[b]);
  }
  uint64_t now = ttft__now(r);
  ttft__scan_slots(r, now, &s->gauge[TTFT_GAUGE_INFLIGHT], &s->gauge[TTFT_GAUGE_LIVE_STALLS]);
  s->gauge[TTFT_GAUGE_MEMORY] = ttft_registry_memory(r);
  s->gauge[TTFT_GAUGE_COARSE] = coarse;
  s->t_start_ns = r->t_created;
  s->t_end_ns = ttft_now_ns();
  ttft__snapshot_finish(s);
  return s;
}

