/* wide_sum.c — the 128-bit sums of the live histograms: the cold path of
 * the hooks' add (crossings of a multiple of 2^63, values of 2^63 and
 * more), the shared shard's add, and the reader. The representation and
 * why a reader never sees a torn value are in registry.h ("the wide sum").
 * Layer: record (src/README.md). */
#include "record/registry.h"

/* One part (< 2^63, so at most one crossing) on a private shard. The
 * state before it may be one crossing behind (a writer died between its
 * two stores): settle that first, then count this add's crossing. */
static void sum_add_part(ttft__hist *h, uint64_t v) {
  TTFT_ASSERT(v < (UINT64_C(1) << 63));
  uint64_t l = TTFT__LD(&h->sum), half = TTFT__LD(&h->half);
  half += (half ^ (l >> 63)) & 1u; /* the crossing a dead writer left uncounted */
  uint64_t n = l + v;
  /* release: as in ttft__hist_sum_add (registry.h) */
  atomic_store_explicit(&h->sum, n, memory_order_release);
  if ((l ^ n) >> 63) half++;
  /* release: a reader that sees the new count sees the sum that crossed
   * (it is never ahead of the sum) */
  if (half != TTFT__LD(&h->half)) atomic_store_explicit(&h->half, half, memory_order_release);
}

void ttft__hist_sum_add_slow(ttft__hist *h, uint64_t v) {
  while (v) {
    uint64_t p = v < TTFT__SUM_PART ? v : TTFT__SUM_PART;
    sum_add_part(h, p);
    v -= p;
  }
}

/* Settle a crossing another writer has not counted yet: when the top bit
 * of sum l disagrees with half's parity, exactly one crossing is missing
 * (the invariant of registry.h); one CAS from that half counts it, once,
 * whoever gets there first. */
static void half_settle(ttft__hist *h, uint64_t l, uint64_t half) {
  if (((half ^ (l >> 63)) & 1u) == 0) return;
  /* release: as in sum_add_part; relaxed on failure: someone counted it */
  atomic_compare_exchange_strong_explicit(&h->half, &half, half + 1, memory_order_release,
                                          memory_order_relaxed);
}

void ttft__hist_sum_add_shared(ttft__hist *h, uint64_t v) {
  while (v) {
    uint64_t p = v < TTFT__SUM_PART ? v : TTFT__SUM_PART;
    /* acquire: the half that goes with this sum (or a later one) */
    uint64_t l = atomic_load_explicit(&h->sum, memory_order_acquire);
    for (;;) {
      /* acquire: the crossings counted so far. Loaded after l, it may
       * already count a crossing made after l (another writer added and
       * settled in between): (l, half) is a pair of one instant only if
       * sum still holds l after this load (below, or the CAS) */
      uint64_t half = atomic_load_explicit(&h->half, memory_order_acquire);
      if ((half ^ (l >> 63)) & 1u) {
        /* acquire: as above */
        uint64_t now = atomic_load_explicit(&h->sum, memory_order_acquire);
        /* a pair of one instant (sum cannot come back to l: that would
         * take 2^64 ns of adds): one crossing pending; count it before
         * adding, so that no add can make a second one while it is.
         * Otherwise l was stale and half ahead of it: nothing to settle
         * (settling it all the same counts a crossing twice). */
        if (now == l) half_settle(h, l, half);
        l = now;
        continue;
      }
      /* release: as in ttft__hist_sum_add; acquire on failure: as above */
      if (atomic_compare_exchange_weak_explicit(&h->sum, &l, l + p, memory_order_release,
                                                memory_order_acquire)) {
        if (((l ^ (l + p)) >> 63) != 0) half_settle(h, l + p, half);
        break;
      }
    }
    v -= p;
  }
}

uint64_t ttft__hist_sum_read(const ttft__hist *h, uint64_t *hi) {
  for (;;) {
    /* acquire: a count of crossings comes with the sums that made them */
    uint64_t h1 = atomic_load_explicit(&h->half, memory_order_acquire);
    /* acquire: the counts stored before this sum are visible to the load
     * of h2 below (pairs with the writers' release stores of sum) */
    uint64_t l = atomic_load_explicit(&h->sum, memory_order_acquire);
    uint64_t h2 = TTFT__LD(&h->half);
    /* unchanged around the load: at most one crossing behind l, and the
     * parity says whether it is. Crossings are 2^63 ns of summed time
     * apart: this loop runs once, in practice always. */
    if (h1 == h2) {
      *hi = ttft__sum_hi_of(l, h1);
      return l;
    }
  }
}
