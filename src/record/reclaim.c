/* reclaim.c — slot lists and deferred slot recycling.
 *
 * ttft_stream_end may race a ttft_token_emitted (or ttft_mark) running on
 * another thread for the same sequence. The loser of that race may already
 * have checked the slot's state and be about to write the slot's fields, so
 * an ended slot must not serve a new sequence until every such writer is
 * out. The writers pay no fence for this (the hot path has no lock-prefixed
 * instruction): each thread's shard carries a call epoch, odd inside a call.
 * Ended slots wait on their shard's `pending` stack; the reclaimer moves
 * everything pending into limbo as one batch,
 * notes every shard's epoch, and frees the batch when, for each other
 * shard, the grace period is over and the epoch is even (no call that began
 * before the batch is still running) or has moved on from an odd value.
 * The grace period covers the time a store needs to leave the writer's
 * store buffer (nanoseconds in practice; we allow 50 us). The shared shard
 * (atomic mode) uses entered/exited counters with sequentially consistent
 * operations instead, which need no grace period. docs/design.md has more.
 */
#include <string.h>

#include "record/registry.h"

#define TTFT__GRACE_NS UINT64_C(50000)

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() ((void)0)
#endif

void ttft__stack_push(ttft_registry *r, ttft__stack *st, uint32_t idx) {
  uint64_t h = LD(&st->head);
  uint64_t nh;
  do {
    ST(&r->slots[idx].next, (uint32_t)h);
    nh = (((h >> 32) + 1) << 32) | (uint64_t)(idx + 1);
    /* release: the link and the slot's reset state are visible to the popper */
  } while (!atomic_compare_exchange_weak_explicit(&st->head, &h, nh, memory_order_release,
                                                  memory_order_relaxed));
}

/* Push onto a shard's pending stack, keeping in each element the tail of
 * the chain below it, so the reclaimer splices whole chains without
 * walking them. */
static void pending_push(ttft_registry *r, ttft__stack *st, uint32_t idx) {
  ttft__slot *sl = &r->slots[idx];
  uint64_t h = LD(&st->head);
  uint64_t nh;
  do {
    uint32_t top = (uint32_t)h;
    ST(&sl->next, top);
    /* stale if the reclaimer took the stack meanwhile: then the CAS fails */
    ST(&sl->tail, top ? LD(&r->slots[top - 1].tail) : idx + 1);
    nh = (((h >> 32) + 1) << 32) | (uint64_t)(idx + 1);
    /* release: the links are visible to the reclaimer that takes the stack */
  } while (!atomic_compare_exchange_weak_explicit(&st->head, &h, nh, memory_order_release,
                                                  memory_order_relaxed));
}

static uint32_t stack_pop(ttft_registry *r, ttft__stack *st) {
  /* acquire: pairs with the pusher's release (slot link and state) */
  uint64_t h = atomic_load_explicit(&st->head, memory_order_acquire);
  for (;;) {
    uint32_t top = (uint32_t)h;
    if (!top) return 0;
    /* may be stale if another thread popped it meanwhile; the tag in the
     * head makes that CAS fail */
    uint32_t next = LD(&r->slots[top - 1].next);
    uint64_t nh = (((h >> 32) + 1) << 32) | next;
    /* acquire: as above, for the head we finally take */
    if (atomic_compare_exchange_weak_explicit(&st->head, &h, nh, memory_order_acquire,
                                              memory_order_acquire))
      return top;
  }
}

/* Is the grace period of the batch in limbo over? Called with the
 * reclaim try-lock held; self is the calling thread's shard. */
static int grace_over(ttft_registry *r, const ttft__shard *self) {
  uint64_t now = ttft_now_ns();
  int done = 1;
  for (uint32_t i = 0; i < r->nshards; i++) {
    if (!r->limbo_wait[i]) continue;
    ttft__shard *sh = &r->shards[i];
    if (sh->shared) {
      /* acquire: the exited calls' slot writes are complete */
      if (atomic_load_explicit(&sh->exited, memory_order_acquire) >= r->limbo_epoch[i])
        r->limbo_wait[i] = 0;
      else
        done = 0;
      continue;
    }
    if (sh == self) { /* our own calls are not running: we are here */
      r->limbo_wait[i] = 0;
      continue;
    }
    /* acquire: pairs with the owner's release at call exit, so its slot
     * writes happen-before the slot's reuse */
    uint64_t e = atomic_load_explicit(&sh->epoch, memory_order_acquire);
    if (r->limbo_wait[i] == 1) {
      if (now - r->limbo_t0 < TTFT__GRACE_NS) {
        done = 0;
        continue;
      }
      /* every epoch store made before the batch started is visible now */
      if (!(e & 1)) {
        r->limbo_wait[i] = 0;
        continue;
      }
      r->limbo_epoch[i] = e; /* inside a call: wait until it leaves */
      r->limbo_wait[i] = 2;
      done = 0;
      continue;
    }
    if (e != r->limbo_epoch[i])
      r->limbo_wait[i] = 0;
    else
      done = 0;
  }
  return done;
}

static void limbo_start(ttft_registry *r) {
  ST(&r->limbo_head, 1);
  r->limbo_t0 = ttft_now_ns();
  for (uint32_t i = 0; i < r->nshards; i++) {
    ttft__shard *sh = &r->shards[i];
    if (sh->shared) {
      /* seq_cst: ordered after the stream_end CASes of the batch (also
       * seq_cst): a call counted later sees those slots as ended */
      r->limbo_epoch[i] = atomic_load_explicit(&sh->entered, memory_order_seq_cst);
      r->limbo_wait[i] = 1;
    } else {
      /* acquire: a shard released by its exiting thread carries that
       * thread's last call exit with it; with no owner, nobody can be
       * inside a call on it */
      int owned = atomic_load_explicit(&sh->owned, memory_order_acquire);
      r->limbo_wait[i] = (LD(&sh->used) && owned) ? 1 : 0;
    }
  }
}

/* Splice the chain first..last onto a free stack with one CAS. */
static void stack_push_chain(ttft_registry *r, ttft__stack *st, uint32_t first, uint32_t last) {
  uint64_t h = LD(&st->head);
  uint64_t nh;
  do {
    ST(&r->slots[last - 1].next, (uint32_t)h);
    nh = (((h >> 32) + 1) << 32) | first;
    /* release: the links are visible to whoever pops */
  } while (!atomic_compare_exchange_weak_explicit(&st->head, &h, nh, memory_order_release,
                                                  memory_order_relaxed));
}

/* Give the batch in limbo back: each shard's part to that shard's free
 * stack, where the thread that ended those streams finds them. The slots
 * keep their ENDING state: ttft_begin moves them to a new generation. */
static void limbo_free(ttft_registry *r) {
  for (uint32_t k = 0; k < r->nshards; k++) {
    if (!r->limbo_first[k]) continue;
    stack_push_chain(r, &r->shards[k].free_list, r->limbo_first[k], r->limbo_last[k]);
    r->limbo_first[k] = r->limbo_last[k] = 0;
  }
  ST(&r->limbo_head, 0);
}

/* Take every shard's pending stack into limbo; 1 when there was any. */
static int take_pending(ttft_registry *r) {
  int any = 0;
  for (uint32_t k = 0; k < r->nshards; k++) {
    ttft__stack *st = &r->shards[k].pending;
    uint64_t h = LD(&st->head);
    if (!(uint32_t)h) continue;
    /* acq_rel: acquire the pushed slots' links; pushers racing us retry */
    while (!atomic_compare_exchange_weak_explicit(&st->head, &h, ((h >> 32) + 1) << 32,
                                                  memory_order_acq_rel, memory_order_relaxed)) {
    }
    uint32_t top = (uint32_t)h;
    if (!top) continue;
    r->limbo_first[k] = top;
    r->limbo_last[k] = LD(&r->slots[top - 1].tail);
    any = 1;
  }
  return any;
}

static int any_pending(const ttft_registry *r) {
  for (uint32_t k = 0; k < r->nshards; k++)
    if ((uint32_t)LD(&r->shards[k].pending.head)) return 1;
  return 0;
}

/* One step of reclamation, never blocking: returns 1 when it freed slots. */
static int try_reclaim(ttft_registry *r, const ttft__shard *self) {
  int z = 0;
  /* acquire: the previous reclaimer's limbo bookkeeping is visible */
  if (!atomic_compare_exchange_strong_explicit(&r->reclaiming, &z, 1, memory_order_acquire,
                                               memory_order_relaxed))
    return 0;
  int freed = 0;
  if (LD(&r->limbo_head) && grace_over(r, self)) {
    limbo_free(r);
    freed = 1;
  }
  if (!LD(&r->limbo_head)) {
    if (take_pending(r)) {
      limbo_start(r);
      if (grace_over(r, self)) {
        limbo_free(r);
        freed = 1;
      }
    }
  }
  /* release: hands the limbo bookkeeping to the next reclaimer */
  atomic_store_explicit(&r->reclaiming, 0, memory_order_release);
  return freed;
}

void ttft__slot_retire(ttft_registry *r, ttft__shard *sh, uint32_t idx) {
  pending_push(r, &sh->pending, idx);
  /* a plain count on a private shard; racy (but harmless) on the shared one */
  uint32_t n = LD(&sh->retired) + 1;
  ST(&sh->retired, n);
  uint32_t batch = r->nslots / 16;
  if (batch < 1) batch = 1;
  if (batch > 64) batch = 64;
  if (n % batch == 0) try_reclaim(r, sh);
}

/* A free slot: the caller's own shard's first (slots it ended, cache-hot),
 * then the initial pool, then any other shard's. */
static uint32_t pop_any(ttft_registry *r, ttft__shard *self) {
  uint32_t s = stack_pop(r, &self->free_list);
  if (TTFT_LIKELY(s)) return s;
  s = stack_pop(r, &r->free_list);
  if (s) return s;
  for (uint32_t k = 0; k < r->nshards; k++) {
    if (&r->shards[k] == self) continue;
    if ((uint32_t)LD(&r->shards[k].free_list.head) && (s = stack_pop(r, &r->shards[k].free_list)))
      return s;
  }
  return 0;
}

uint32_t ttft__slot_acquire(ttft_registry *r, ttft__shard *self) {
  uint32_t s = pop_any(r, self);
  if (TTFT_LIKELY(s)) return s;
  try_reclaim(r, self);
  s = pop_any(r, self);
  if (s) return s;
  /* Full, but ended slots may be waiting for their grace period: wait for
   * it (bounded; this only happens when the registry is exhausted). Give
   * up early only when nothing is pending, in limbo or being moved. */
  uint64_t t0 = ttft_now_ns();
  for (;;) {
    int busy = any_pending(r) || LD(&r->limbo_head) != 0 || LD(&r->reclaiming) != 0;
    try_reclaim(r, self);
    s = pop_any(r, self);
    if (s || !busy) return s;
    if (ttft_now_ns() - t0 > 200 * TTFT__GRACE_NS) break; /* 10 ms */
    cpu_relax();
  }
  return 0;
}
