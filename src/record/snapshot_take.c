/* snapshot_take.c — ttft_snapshot_take: the bridge from the live registry
 * (per-thread shards, slots) to an immutable snapshot. The only file of
 * the recording side that writes a struct ttft_snapshot.
 * Layer: record (src/README.md). */
#include <string.h>
#ifdef TTFT_HAVE_PTHREADS
#include <sched.h>
#endif

#include "record/registry.h"

/* Add live histogram src into the builder: its attached chunks, and its
 * coarse counters (observations recorded while the chunk pool was dry,
 * record/pool.c), each at the middle bucket of its power of two — a fixed
 * bucket, never moved towards min or max: a count placed by where min and
 * max stand moves when a later value widens them, and the bucket it left
 * falls (1.3.0 clamped it into [min, max]: native and classic buckets went
 * down between scrapes, issue 27.1). The snapshot's min and max then
 * widen to that bucket's edges when it lies outside them (ttft__hacc_build).
 * A coarse counter is read when its power of two meets the range below,
 * like the fine buckets, so it too is counted from the first snapshot
 * that sees it on. Only buckets between
 * the indices of src's min and max are read: a bucket outside them belongs
 * to an observation whose min/max store this thread does not see yet, and
 * it is in the next snapshot instead (min and max only widen, so a bucket
 * once inside stays inside: no count of a later snapshot goes down). A
 * histogram whose min is not seen yet has nothing to read, even when its
 * max is: the two loads are not one instant, and a max seen without a min
 * (another writer stored both between them) bounds nothing below, so
 * reading every bucket could count a third writer's observation that the
 * next snapshot, with min seen, leaves outside (1.2.0 did: a count that
 * went down; test_races). A min once seen stays seen, so skipping never
 * hides what an earlier snapshot counted. The one value that stores no
 * min, UINT64_MAX (~v == 0; the hooks never record it: TTFT_NOW is 0),
 * alone: its bucket only, the top one, inside every later range.
 * Returns the coarse observations it added. */
static uint64_t hist_copy_add(ttft__hacc *acc, const ttft__hist *src) {
  uint64_t mnw = TTFT__LD(&src->min), mx = TTFT__LD(&src->max); /* min is stored inverted */
  if (!mnw && mx != UINT64_MAX) return 0;
  uint32_t lo = ttft__hist_index(mnw ? ~mnw : UINT64_MAX);
  uint32_t hi = ttft__hist_index(mx) + 1;
  uint64_t n = 0, coarse = 0;
  for (uint32_t c = lo >> TTFT__CHUNK_BITS; c <= (hi - 1) >> TTFT__CHUNK_BITS; c++) {
    uint32_t base = c * TTFT__CHUNK_BUCKETS;
    uint32_t from = lo > base ? lo : base;
    uint32_t to = hi < base + TTFT__CHUNK_BUCKETS ? hi : base + TTFT__CHUNK_BUCKETS;
    /* acquire: the chunk's zeroed memory and its attach (pool.c) */
    const ttft__chunk *ch = atomic_load_explicit(&src->chunk[c], memory_order_acquire);
    if (ch)
      for (uint32_t i = from; i < to; i++) {
        uint64_t k = TTFT__LD(&ch->b[i - base]);
        if (!k) continue;
        ttft__hacc_add_bucket(acc, i, k);
        n += k;
      }
    uint64_t k = TTFT__LD(&src->coarse[c]);
    if (k) {
      ttft__hacc_add_bucket(acc, base + TTFT__CHUNK_BUCKETS / 2, k);
      n += k;
      coarse += k;
    }
  }
  if (!n) return 0;
  uint64_t sum_hi, sum = ttft__hist_sum_read(src, &sum_hi);
  ttft__hacc_add_stats(acc, sum, sum_hi, mnw ? ~mnw : 0, mx);
  return coarse;
}

/* The live histograms of a class record that make up snapshot metric m
 * (record/registry.h): its own; for ITL also the gaps before multi-token
 * emissions; for ITL_PER_TOKEN also the single-token gaps (each its own
 * per-token value); for E2E, TPOT and OUTPUT_TOKENS the three status views,
 * which are where stream end records them. Returns the coarse observations
 * of the histograms that are nowhere else counted. */
static uint64_t metric_copy_add(ttft__hacc *acc, const ttft__crec *cr, int m) {
  uint64_t coarse = hist_copy_add(acc, &cr->h[m]);
  if (m == TTFT_METRIC_ITL) coarse += hist_copy_add(acc, &cr->h[TTFT__LH_ITL_MULTI]);
  if (m == TTFT_METRIC_ITL_PER_TOKEN) (void)hist_copy_add(acc, &cr->h[TTFT_METRIC_ITL]);
  int v = ttft__status_view((ttft_metric)m);
  if (v > 0) /* not TTFT, whose plain metric is recorded at the first token */
    for (int st = 0; st < TTFT_STATUS_COUNT_; st++)
      (void)hist_copy_add(acc, &cr->h[TTFT__LH_STATUS + st * TTFT__STATUS_VIEWS + v]);
  return coarse;
}

/* Class c's counters and histograms, summed over the shards that have a
 * record for it; recs is scratch for one pointer per shard. */
static int class_take(ttft_registry *r, ttft_snapshot *s, ttft__hacc *acc, uint32_t c,
                      const ttft__crec **recs, uint64_t *coarse) {
  uint32_t nrec = 0;
  for (uint32_t i = 0; i < r->nshards; i++) {
    const ttft__shard *sh = &r->shards[i];
    if (!TTFT__LD(&sh->used)) continue;
    /* acquire: see class_add */
    const ttft__crec *cr = atomic_load_explicit(&sh->cls[c], memory_order_acquire);
    if (cr) recs[nrec++] = cr;
  }
  ttft__sclass *k = &s->cls[c];
  for (uint32_t j = 0; j < nrec; j++)
    for (int x = 0; x < TTFT_COUNTER_COUNT_; x++) k->ctr[x] += TTFT__LD(&recs[j]->ctr[x]);
  /* the tokens that are token deadlines too (registry.h, TTFT__CTR_TOKENS_DL) */
  for (uint32_t j = 0; j < nrec; j++) {
    uint64_t v = TTFT__LD(&recs[j]->ctr[TTFT__CTR_TOKENS_DL]);
    k->ctr[TTFT_COUNTER_TOKENS] += v;
    k->ctr[TTFT_COUNTER_TOKEN_DEADLINES] += v;
  }
  for (uint32_t j = 0; j < nrec; j++)
    for (int x = 0; x < TTFT_STALL_CAUSE_COUNT; x++) {
      k->stall_n[x] += TTFT__LD(&recs[j]->cause_n[x]);
      k->stall_ns[x] += TTFT__LD(&recs[j]->cause_ns[x]);
    }
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
    for (uint32_t j = 0; j < nrec; j++) *coarse += metric_copy_add(acc, recs[j], m);
    int rc = ttft__snapshot_hist(s, acc, &k->h[m]);
    if (rc != TTFT_OK) return rc;
  }
  for (int st = 0; st < TTFT_STATUS_COUNT_; st++)
    for (int v = 0; v < TTFT__STATUS_VIEWS; v++) {
      for (uint32_t j = 0; j < nrec; j++)
        *coarse += hist_copy_add(acc, &recs[j]->h[TTFT__LH_STATUS + st * TTFT__STATUS_VIEWS + v]);
      int rc = ttft__snapshot_hist(s, acc, &k->sv[st][v]);
      if (rc != TTFT_OK) return rc;
    }
  return TTFT_OK;
}

/* Copy live entry e into *d, as a seqlock reader: only a copy that saw an
 * even counter, unchanged around it, is kept. A writer holds an entry for
 * a few stores; an entry still odd after the retries (its writer was
 * descheduled, or died inside a stream end) is left out of this snapshot.
 * Returns 1 for a kept, non-empty entry. */
static int slow_copy(const ttft_registry *r, const ttft__slow_live *e, ttft__slow *d,
                     uint64_t mono_now, uint64_t unix_now) {
  for (int tries = 0; tries < 1000; tries++) {
    /* acquire: the fields read below are at least as new as this count */
    uint32_t q = atomic_load_explicit(&e->seq, memory_order_acquire);
    if (q & 1u) {
#ifdef TTFT_HAVE_PTHREADS
      if (tries > 16) sched_yield();
#endif
      continue;
    }
    d->value = TTFT__LD(&e->value);
    d->ttft = TTFT__LD(&e->ttft);
    d->max_gap = TTFT__LD(&e->max_gap);
    d->t_begin = TTFT__LD(&e->t_begin);
    d->t_end = TTFT__LD(&e->t_end);
    d->tokens = TTFT__LD(&e->tokens);
    d->dl = TTFT__LD(&e->dl);
    d->dl_missed = TTFT__LD(&e->dl_missed);
    d->dl_ns = TTFT__LD(&e->dl_ns);
    d->ttft_slo = TTFT__LD(&e->ttft_slo);
    d->tpot_slo = TTFT__LD(&e->tpot_slo);
    uint32_t meta = TTFT__LD(&e->meta);
    uint64_t tr[2] = {TTFT__LD(&e->trace[0]), TTFT__LD(&e->trace[1])};
    uint64_t id[sizeof e->id / sizeof e->id[0]];
    for (size_t w = 0; w < sizeof id / sizeof id[0]; w++) id[w] = TTFT__LD(&e->id[w]);
    /* acquire fence: the loads above happen before the second look at the
     * counter, so a writer that changed any of them has made it differ */
    atomic_thread_fence(memory_order_acquire);
    if (TTFT__LD(&e->seq) != q) continue;
    if (!d->value) return 0;
    d->status = (uint8_t)(meta & 0xFFu);
    d->cause = (uint8_t)((meta >> 8) & 0xFFu);
    d->has_trace = (uint8_t)((meta >> 16) & 1u);
    size_t idlen = meta >> 24; /* the bytes past it are an earlier id's */
    if (idlen > TTFT_MAX_REQUEST_ID) idlen = TTFT_MAX_REQUEST_ID;
    if (d->status >= TTFT_STATUS_COUNT_) d->status = TTFT_COMPLETED;
    if (d->cause >= TTFT_STALL_CAUSE_COUNT) d->cause = TTFT_STALL_UNKNOWN;
    for (int i = 0; i < 8; i++) {
      d->trace[i] = d->has_trace ? (uint8_t)(tr[0] >> (56 - 8 * i)) : 0;
      d->trace[8 + i] = d->has_trace ? (uint8_t)(tr[1] >> (56 - 8 * i)) : 0;
    }
    memcpy(d->id, id, sizeof d->id);
    memset(d->id + idlen, 0, sizeof d->id - idlen);
    d->id_len = (uint8_t)strlen(d->id);
    d->unix_end = unix_now ? unix_now - (mono_now - (d->t_end < mono_now ? d->t_end : mono_now)) : 0;
    (void)r;
    return 1;
  }
  return 0;
}

/* Class c's slowest lists: every used shard's entries, the k largest. */
static int slow_take(ttft_registry *r, ttft_snapshot *s, uint32_t c, ttft__slow *scratch,
                     uint64_t mono_now, uint64_t unix_now) {
  uint32_t k = r->slowest_k;
  for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->nshards; i++) {
      const ttft__shard *sh = &r->shards[i];
      if (!TTFT__LD(&sh->used)) continue;
      /* acquire: see class_add */
      const ttft__crec *cr = atomic_load_explicit(&sh->cls[c], memory_order_acquire);
      if (!cr || !cr->slow) continue;
      for (uint32_t j = 0; j < k; j++)
        n += (uint32_t)slow_copy(r, &cr->slow[(size_t)by * k + j], &scratch[n], mono_now, unix_now);
    }
    int rc = ttft__slow_set(s, c, by, scratch, ttft__slow_sort(scratch, n, k));
    if (rc != TTFT_OK) return rc;
  }
  return TTFT_OK;
}

/* A TTFT split: histogram at byte offset off of every used shard. */
static int split_take(ttft_registry *r, ttft_snapshot *s, ttft__hacc *acc, const ttft__hist *first,
                      ttft__shist **slot, uint64_t *coarse) {
  size_t off = (size_t)((const char *)first - (const char *)&r->shards[0]);
  for (uint32_t i = 0; i < r->nshards; i++) {
    const ttft__shard *sh = &r->shards[i];
    if (!TTFT__LD(&sh->used)) continue;
    *coarse += hist_copy_add(acc, (const ttft__hist *)((const char *)sh + off));
  }
  return ttft__snapshot_hist(s, acc, slot);
}

static int take_all(ttft_registry *r, ttft_snapshot *s, uint32_t nc, uint64_t *coarse) {
  ttft__hacc *acc = ttft__hacc_new(&s->alloc);
  const ttft__crec **recs = ttft__alloc(&s->alloc, r->nshards * sizeof *recs);
  int rc = (acc && recs) ? TTFT_OK : TTFT_ENOMEM;
  for (uint32_t c = 0; c < nc && rc == TTFT_OK; c++) rc = class_take(r, s, acc, c, recs, coarse);
  if (rc == TTFT_OK && r->slowest_k) {
    ttft__slow *scratch = ttft__alloc(&s->alloc, (size_t)r->nshards * r->slowest_k * sizeof *scratch);
    struct timespec ts;
    uint64_t unix_now = 0, mono_now = ttft__now(r);
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
      unix_now = (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
    rc = scratch ? TTFT_OK : TTFT_ENOMEM;
    for (uint32_t c = 0; c < nc && rc == TTFT_OK; c++)
      rc = slow_take(r, s, c, scratch, mono_now, unix_now);
    ttft__free(&s->alloc, scratch);
  }
  const ttft__shard *sh0 = &r->shards[0];
  for (int k = 0; k < TTFT_PREFIX_BAND_COUNT_ && rc == TTFT_OK; k++)
    rc = split_take(r, s, acc, &sh0->split_cache[k], &s->split_cache[k], coarse);
  for (int k = 0; k < TTFT_PREFIX_BAND_COUNT_ && rc == TTFT_OK; k++)
    rc = split_take(r, s, acc, &sh0->split_prefill[k], &s->split_prefill[k], coarse);
  for (int b = 0; b < TTFT_MAX_BANDS && rc == TTFT_OK; b++)
    rc = split_take(r, s, acc, &sh0->split_band[b], &s->split_band[b], coarse);
  for (int p = 0; p < 2 && rc == TTFT_OK; p++)
    rc = split_take(r, s, acc, &sh0->step[p], &s->step[p], coarse);
  if (rc == TTFT_OK) rc = ttft__snapshot_finish(s, acc);
  ttft__free(&s->alloc, (void *)recs);
  ttft__hacc_free(&s->alloc, acc);
  return rc;
}

ttft_snapshot *ttft_snapshot_take(ttft_registry *r) {
  if (!r) return NULL;
  if (r->clock == TTFT_CLOCK_TSC) (void)ttft__counter_usable(); /* refines the calibration */
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
  if (take_all(r, s, nc, &coarse) != TTFT_OK) {
    ttft_snapshot_free(s);
    return NULL;
  }
  uint64_t now = ttft__now(r);
  ttft__scan_slots(r, now, &s->gauge[TTFT_GAUGE_INFLIGHT], &s->gauge[TTFT_GAUGE_LIVE_STALLS]);
  s->gauge[TTFT_GAUGE_MEMORY] = ttft_registry_memory(r);
  s->gauge[TTFT_GAUGE_COARSE] = coarse;
  s->t_start_ns = r->t_created;
  s->t_end_ns = ttft_now_ns();
  return s;
}
