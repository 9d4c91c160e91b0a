/* pool.c — memory for live histograms, paid for as it is used.
 *
 * A live histogram (registry.h, ttft__hist) is a header — sum, min, max and
 * one pointer per power of two of the bucket index — plus 1 KiB chunks of
 * 128 buckets, attached the first time a value lands in that power of two.
 * A (thread, class) pair that records TTFT between 20 ms and 5 s holds the
 * 8 chunks of those 8 octaves, not all 38: memory follows the classes and
 * threads that record and the range their values cover.
 *
 * Hooks never allocate. Chunks come from this pool: slabs of chunks the
 * registry allocated earlier, outside the hooks — at creation, at each
 * ttft_class_add, and at each ttft_snapshot_take, which tops the pool up.
 * A hook takes a chunk with one CAS on the pool's counter, once per chunk
 * ever attached; the per-token path of a histogram whose chunks exist is
 * unchanged.
 *
 * Sizing. Between two top-ups only the hooks run, and a server's first
 * scrape comes seconds after its first streams: the pool must hold what
 * every record that may start recording meanwhile will attach. A record
 * (one shard's histograms of one class) fed realistic values — TTFT
 * 20 ms-5 s, ITL 5-300 ms, 8-256 tokens, three end statuses — attaches
 * 115-155 chunks (measured by tests/test_startup_burst.c; 1 KiB each),
 * a shard's TTFT splits and steps 80-90. So the registry promises
 * TTFT__POOL_RECORD_CHUNKS to every (shard, class) pair and
 * TTFT__POOL_SPLIT_CHUNKS to every shard — at creation for class 0 and
 * the splits, at each ttft_class_add for the new class — and keeps the
 * pool free down to what is still promised (the budget less the chunks
 * handed out): 6.6 MiB for the default 9 shards and 4 classes, taken
 * from the memory limit as records attach anyway. The budget is capped
 * at an eighth of memory_limit (32 MiB by default: every pair of the
 * default 16 classes fits), so a registry of many classes or threads,
 * most of them idle, does not hold memory nobody records into. Each
 * snapshot then keeps at least the larger of the unspent promise, twice
 * what was taken since the last top-up, and a small floor free.
 *
 * The registry's memory is bounded by ttft_config.memory_limit (default
 * 256 MiB; ttft_registry_memory reports exactly what is allocated). When a
 * hook needs a chunk and the pool is dry (the limit reached, or a burst
 * between snapshots outran the budget: more classes or threads recording
 * at once than it covers, or wider value ranges), the observation is
 * still recorded — count, sum, min and max exactly — but its bucket is a
 * coarse per-octave counter (ttft__hist.coarse), which snapshots place in
 * the octave's middle bucket, always the same one (snapshot_take.c);
 * TTFT_GAUGE_COARSE counts such observations. No observation is ever
 * lost, and no exported bucket ever falls.
 */
#include <string.h>

#include "record/registry.h"

/* --------------------------------------------------------------- top-up */
static int pool_lock(ttft_registry *r) {
  int z = 0;
  /* acquire: serialises top-ups; pairs with the release in pool_unlock */
  while (!atomic_compare_exchange_weak_explicit(&r->pool.lock, &z, 1, memory_order_acquire,
                                                memory_order_relaxed))
    z = 0;
  return 1;
}
static void pool_unlock(ttft_registry *r) {
  /* release: the slab table and accounting are handed to the next top-up */
  atomic_store_explicit(&r->pool.lock, 0, memory_order_release);
}

/* Add slabs until at least `want` chunks are free or the limit is
 * reached, all or none: the slabs are allocated first and published
 * together, so a failure leaves the pool as it was (a hook may take a
 * chunk of a slab as soon as it is published: a published slab is never
 * taken back). Returns TTFT_OK, or TTFT_ENOMEM when a slab could not be
 * allocated. Not a hook path. */
int ttft__pool_reserve(ttft_registry *r, uint64_t want) {
  pool_lock(r);
  int rc = TTFT_OK;
  ttft__pool *p = &r->pool;
  uint64_t limit = TTFT__LD(&p->limit);
  uint64_t next = TTFT__LD(&p->next);
  uint64_t free_now = limit > next ? limit - next : 0;
  uint32_t n = p->nslabs;
  size_t bytes = (size_t)TTFT__SLAB_CHUNKS * sizeof(ttft__chunk);
  for (; free_now < want && n < p->max_slabs; n++, free_now += TTFT__SLAB_CHUNKS) {
    ttft__chunk *slab = ttft__block_new(r, bytes);
    if (!slab) {
      rc = TTFT_ENOMEM;
      break;
    }
    p->slab[n] = slab; /* past nslabs: no hook reads it before the store below */
  }
  if (rc != TTFT_OK) {
    while (n > p->nslabs) ttft__block_free(r, p->slab[--n], bytes);
  } else if (n > p->nslabs) {
    p->nslabs = n;
    /* release: the zeroed slabs and their table entries are visible to
     * any thread that acquires the new limit (ttft__chunk_attach) */
    atomic_store_explicit(&p->limit, (uint64_t)n * TTFT__SLAB_CHUNKS, memory_order_release);
  }
  pool_unlock(r);
  return rc;
}

/* Chunks promised and not yet handed out (0 once the hooks took more). */
static uint64_t budget_unspent(const ttft__pool *p) {
  uint64_t budget = TTFT__LD(&p->budget), next = TTFT__LD(&p->next);
  return budget > next ? budget - next : 0;
}

/* Snapshot-time top-up: keep free at least the floor reserve, what is
 * still promised, and twice what was consumed since the last top-up. */
void ttft__pool_refill(ttft_registry *r) {
  ttft__pool *p = &r->pool;
  uint64_t next = TTFT__LD(&p->next);
  /* relaxed exchange: two snapshots topping up at once each see a
   * different `used_since`; the larger wins the reserve, which is only a
   * sizing heuristic — no chunk or slab is published through it */
  uint64_t prev = atomic_exchange_explicit(&p->next_at_refill, next, memory_order_relaxed);
  uint64_t used_since = next > prev ? next - prev : 0;
  uint64_t want = 2 * used_since;
  uint64_t reserve = TTFT__LD(&p->reserve), unspent = budget_unspent(p);
  if (want < reserve) want = reserve;
  if (want < unspent) want = unspent;
  /* best effort: a short pool is not the snapshot's failure (hooks then
   * bin by power of two until a later top-up succeeds) */
  (void)ttft__pool_reserve(r, want);
}

int ttft__pool_promise(ttft_registry *r, uint64_t chunks, uint64_t more) {
  ttft__pool *p = &r->pool;
  uint64_t was = TTFT__LD(&p->budget), b = was + chunks;
  if (b > p->budget_cap) b = p->budget_cap;
  /* relaxed: creation and class_add (under the class lock) write it,
   * snapshots read it as a size */
  TTFT__ST(&p->budget, b);
  uint64_t limit = TTFT__LD(&p->limit), next = TTFT__LD(&p->next);
  uint64_t want = (limit > next ? limit - next : 0) + more, unspent = budget_unspent(p);
  if (want < unspent) want = unspent;
  /* one reserve, all or none: at the memory limit the slabs simply stop
   * (TTFT_OK); a failed allocation adds none and takes the promise back,
   * and the caller fails */
  int rc = ttft__pool_reserve(r, want);
  if (rc != TTFT_OK) TTFT__ST(&p->budget, was);
  return rc;
}

/* --------------------------------------------------------------- attach */
ttft__chunk *ttft__chunk_attach(ttft_registry *r, ttft__hist *h, uint32_t c, int shared) {
  TTFT_ASSERT(c < TTFT__HIST_CHUNKS);
  ttft__pool *p = &r->pool;
  uint64_t k = TTFT__LD(&p->next);
  for (;;) {
    /* acquire: the slab holding chunk k is published (ttft__pool_reserve) */
    if (k >= atomic_load_explicit(&p->limit, memory_order_acquire)) return NULL;
    /* relaxed: the counter only hands out indices; the slab was acquired above */
    if (atomic_compare_exchange_weak_explicit(&p->next, &k, k + 1, memory_order_relaxed,
                                              memory_order_relaxed))
      break;
  }
  /* max_slabs, not nslabs: nslabs moves under the top-up lock, which a
   * hook never takes; k < limit already says the slab is published */
  TTFT_ASSERT(k / TTFT__SLAB_CHUNKS < p->max_slabs);
  ttft__chunk *ch = &p->slab[k / TTFT__SLAB_CHUNKS][k % TTFT__SLAB_CHUNKS];
  if (!shared) {
    /* release: snapshots that acquire the pointer see a zeroed chunk (only
     * the owner thread attaches chunks of a private shard's histograms) */
    atomic_store_explicit(&h->chunk[c], ch, memory_order_release);
    return ch;
  }
  ttft__chunk *cur = NULL;
  /* acq_rel: several threads of the shared shard may attach the same
   * chunk; one wins (release: its zeroed chunk is visible), the others
   * acquire the winner's and leave theirs unused (counted in memory) */
  if (atomic_compare_exchange_strong_explicit(&h->chunk[c], &cur, ch, memory_order_acq_rel,
                                              memory_order_acquire))
    return ch;
  return cur;
}

/* ---------------------------------------------------------------- setup */
int ttft__pool_init(ttft_registry *r, uint64_t memory_limit) {
  ttft__pool *p = &r->pool;
  size_t slab_bytes = (size_t)TTFT__SLAB_CHUNKS * sizeof(ttft__chunk);
  uint64_t max = memory_limit / slab_bytes;
  /* never more slabs than every chunk of every histogram could fill */
  uint64_t hists = (uint64_t)r->nshards * ((uint64_t)r->max_classes * TTFT__LH_COUNT + 2 * TTFT_PREFIX_BAND_COUNT_ + TTFT_MAX_BANDS);
  uint64_t worst = (hists * TTFT__HIST_CHUNKS + TTFT__SLAB_CHUNKS - 1) / TTFT__SLAB_CHUNKS;
  if (max > worst) max = worst;
  if (max < 1) max = 1;
  p->max_slabs = (uint32_t)max;
  p->slab = ttft__alloc(&r->alloc, (size_t)max * sizeof *p->slab);
  if (!p->slab) return TTFT_ENOMEM;
  ttft__memory_add(r, (size_t)max * sizeof *p->slab);
  /* a first reserve: a few chunks per shard and per class of room, at
   * most a quarter of what the memory limit allows (a small limit is
   * not spent on chunks no histogram has asked for yet) */
  uint64_t reserve = 512 + 64 * (uint64_t)r->nshards;
  uint64_t quarter = max * TTFT__SLAB_CHUNKS / 4;
  if (reserve > quarter) reserve = quarter;
  TTFT__ST(&p->reserve, reserve);
  /* the promise to the records that may start recording (see the top of
   * this file), at most an eighth of the limit */
  p->budget_cap = max * TTFT__SLAB_CHUNKS / 8;
  TTFT__ST(&p->budget, 0);
  return TTFT_OK;
}

void ttft__pool_free(ttft_registry *r) {
  ttft__pool *p = &r->pool;
  if (p->slab)
    for (uint32_t i = 0; i < p->nslabs; i++)
      ttft__block_free(r, p->slab[i], (size_t)TTFT__SLAB_CHUNKS * sizeof(ttft__chunk));
  ttft__free(&r->alloc, p->slab);
  p->slab = NULL;
  p->nslabs = 0;
}
