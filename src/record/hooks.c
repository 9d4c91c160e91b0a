/* hooks.c — begin / mark / token_emitted / stream_end: the hot path.
 *
 * Rules here: no lock, no allocation, no syscall but the clock, no
 * lock-prefixed instruction on the per-token path of a thread that owns
 * its shard. A sequence's slot is written by that sequence's hooks only;
 * aggregates go to the calling thread's shard. */
#include <stddef.h>
#include <string.h>

#include "record/registry.h"

/* ------------------------------------------------------------ recording */
/* c += v on a shard counter: a plain load/store pair for a private shard,
 * an atomic add for the shared one. Relaxed: snapshots only sum them. */
#define TTFT__INLINE static inline __attribute__((always_inline))

TTFT__INLINE void ctr_add(int shared, _Atomic uint64_t *c, uint64_t v) {
  if (TTFT_LIKELY(!shared))
    TTFT__ST(c, TTFT__LD(c) + v);
  else
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/* The bucket of index i in h: in its chunk, attached from the pool the
 * first time a value lands in that power of two (pool.c); the power of
 * two's coarse counter when the pool is dry. */
TTFT__INLINE _Atomic uint64_t *bucket_of(ttft_registry *r, int shared, ttft__hist *h, uint32_t i) {
  TTFT_ASSERT(i < TTFT__HIST_BUCKETS);
  uint32_t c = i >> TTFT__CHUNK_BITS;
  ttft__chunk *ch;
  if (TTFT_LIKELY(!shared))
    /* relaxed: only the shard's owner attaches its chunks (a new owner
     * acquired the shard from the old one) */
    ch = atomic_load_explicit(&h->chunk[c], memory_order_relaxed);
  else
    /* acquire: another thread of the shared shard may have attached it */
    ch = atomic_load_explicit(&h->chunk[c], memory_order_acquire);
  if (TTFT_UNLIKELY(!ch)) {
    ch = ttft__chunk_attach(r, h, c, shared);
    if (TTFT_UNLIKELY(!ch)) return &h->coarse[c];
  }
  return &ch->b[i & (TTFT__CHUNK_BUCKETS - 1)];
}

/* min is stored inverted so that a zeroed histogram means "no minimum" */
TTFT__INLINE void hist_rec_at(ttft_registry *r, int shared, ttft__hist *h, uint32_t i, uint64_t v) {
  _Atomic uint64_t *b = bucket_of(r, shared, h, i);
  if (TTFT_LIKELY(!shared)) {
    TTFT__ST(b, TTFT__LD(b) + 1);
    ttft__hist_sum_add(h, v);
    if (~v > TTFT__LD(&h->min)) TTFT__ST(&h->min, ~v);
    if (v > TTFT__LD(&h->max)) TTFT__ST(&h->max, v);
    return;
  }
  atomic_fetch_add_explicit(b, 1, memory_order_relaxed);
  ttft__hist_sum_add_shared(h, v);
  uint64_t m = TTFT__LD(&h->min);
  while (~v > m && !atomic_compare_exchange_weak_explicit(&h->min, &m, ~v, memory_order_relaxed,
                                                          memory_order_relaxed)) {
  }
  m = TTFT__LD(&h->max);
  while (v > m && !atomic_compare_exchange_weak_explicit(&h->max, &m, v, memory_order_relaxed,
                                                         memory_order_relaxed)) {
  }
}

TTFT__INLINE void hist_rec(ttft_registry *r, int shared, ttft__hist *h, uint64_t v) {
  hist_rec_at(r, shared, h, ttft__hist_index(v), v);
}

/* n observations of v (n >= 1) */
static inline void hist_rec_n(ttft_registry *r, int shared, ttft__hist *h, uint64_t v, uint64_t n) {
  uint32_t i = ttft__hist_index(v);
  if (TTFT_LIKELY(!shared)) {
    _Atomic uint64_t *b = bucket_of(r, 0, h, i);
    TTFT__ST(b, TTFT__LD(b) + n);
    ttft__hist_sum_add(h, v * n); /* v * n <= the gap v was divided from */
    if (~v > TTFT__LD(&h->min)) TTFT__ST(&h->min, ~v);
    if (v > TTFT__LD(&h->max)) TTFT__ST(&h->max, v);
    return;
  }
  hist_rec_at(r, 1, h, i, v);
  atomic_fetch_add_explicit(bucket_of(r, 1, h, i), n - 1, memory_order_relaxed);
  ttft__hist_sum_add_shared(h, v * (n - 1));
}

/* The shard's class record. acquire: pairs with class_add's release of the
 * pointer (free on x86; the class id itself reached us through begin_ex). */
static inline ttft__crec *crec_of(const ttft__shard *sh, uint32_t cls) {
  TTFT_ASSERT(atomic_load_explicit(&sh->cls[cls], memory_order_relaxed) != NULL);
  return atomic_load_explicit(&sh->cls[cls], memory_order_acquire);
}

/* A hook call rejected with TTFT_ESTALE: counted in class 0 (a stale
 * handle has no class), exported registry-wide. */
__attribute__((noinline, cold)) static void stale_seen(ttft__shard *sh, int shared) {
  ctr_add(shared, &crec_of(sh, 0)->ctr[TTFT_COUNTER_STALE], 1);
}

/* ------------------------------------------------ call brackets (reclaim.c)
 * Every call that checks a slot's state and then writes the slot runs
 * between call_enter and call_leave, which publish the slot the call may
 * write: a private shard's hazard word, or the slot's reference count for
 * the shared shard. reclaim.c has the protocol and its proof. A private
 * shard's word says outside on entry (ttft__shard_for_call routes a call
 * nested in a signal handler to the shared shard). A call whose handle is
 * stale already (the pre-check: the state is not the handle's LIVE) names
 * no slot: it will write none, and a thread that calls on with an ended
 * handle holds nothing back. */

/* Is handle s, by a first relaxed look at its slot's state, live? Not
 * yet the check that counts (live_slot's seq_cst load after the hazard):
 * a state that has moved on never comes back to the handle's generation,
 * so "no" is final; relaxed: the seq_cst load follows. */
TTFT__INLINE int seq_fresh(const ttft_registry *r, ttft_seq s) {
  uint32_t idx = (uint32_t)s - 1; /* handle 0 wraps to UINT32_MAX */
  return idx < r->nslots && atomic_load_explicit(&r->slots[idx].state, memory_order_relaxed) ==
                                TTFT__SLOT_STATE(s >> 32, TTFT__SLOT_LIVE);
}

/* A private call's ordering point between its hazard store and its state
 * load; fm: the registry's fence_mode as read. */
TTFT__INLINE void hz_order(ttft__shard *sh, int fm) {
  if (TTFT_UNLIKELY(fm)) {
    /* seq_cst: without membarrier, pairs with the round's fence (classic
     * Dekker: the hazard or the ending CAS is seen) */
    atomic_thread_fence(memory_order_seq_cst);
    /* F4: tell the rounds once that this owner fences (relaxed: only this
     * thread stores 1 here; the ack is a release store) */
    if (fm == 2 && !atomic_load_explicit(&sh->fenced, memory_order_relaxed))
      ttft__reclaim_fence_ack(sh);
  } else {
    /* compiler only: the state load stays after the hazard store in
     * program order; the round's membarrier supplies the hardware
     * ordering (reclaim.c) */
    atomic_signal_fence(memory_order_seq_cst);
  }
}

/* Publish in private shard sh's word the slot x1 (index + 1; 0: none).
 * release: the writes of this thread's earlier calls happen-before a round
 * that reads the new value (a plain store on x86, stlr on ARMv8). */
TTFT__INLINE void hz_publish(const ttft_registry *r, ttft__shard *sh, uint32_t x1) {
  atomic_store_explicit(&sh->hz, TTFT__HZ_IN | x1, memory_order_release);
  hz_order(sh, atomic_load_explicit(&r->fence_mode, memory_order_relaxed));
}

/* Leave a private call. release: this call's slot writes happen-before a
 * round's acquire of the word, hence before the slot is reused. */
TTFT__INLINE void hz_leave(ttft__shard *sh) {
  atomic_store_explicit(&sh->hz, 0, memory_order_release);
}

/* Enter a call on handle s. Returns what call_leave needs: for the shared
 * shard, the index + 1 of the slot whose count was raised (0: none). */
TTFT__INLINE uint32_t call_enter(ttft_registry *r, ttft__shard *sh, int shared, ttft_seq s) {
  int fresh = seq_fresh(r, s);
  if (TTFT_LIKELY(!shared)) {
    hz_publish(r, sh, fresh ? (uint32_t)s : 0u);
    return 0;
  }
  if (!fresh) return 0; /* stale: live_slot refuses it */
  _Atomic uint32_t *rc = &r->slots[(uint32_t)s - 1].refs;
  /* seq_cst: the increment I of reclaim.c's case 2, before our state load */
  atomic_fetch_add_explicit(rc, 1, memory_order_seq_cst);
  /* open until call_leave: a thread that dies inside is given back at its
   * exit (registry.c); nested calls (signal handlers) push on top */
  uint32_t k = ttft__tl_open.n;
  if (TTFT_LIKELY(k < TTFT__OPEN_MAX)) {
    ttft__tl_open.c[k].reg_id = r->id;
    ttft__tl_open.c[k].refs = rc;
  }
  atomic_signal_fence(memory_order_seq_cst); /* compiler only: a handler sees the frame */
  ttft__tl_open.n = k + 1;
  return (uint32_t)s;
}

TTFT__INLINE void call_leave(ttft_registry *r, ttft__shard *sh, int shared, uint32_t tok) {
  if (TTFT_LIKELY(!shared)) {
    hz_leave(sh);
  } else if (tok) {
    /* closed, then counted: a thread killed between the two is the one
     * case the exit handler cannot give back (reclaim.c, fault model) */
    ttft__tl_open.n--;
    atomic_signal_fence(memory_order_seq_cst); /* compiler only: in this order */
    /* release: our slot writes happen-before a round that reads the count
     * (reclaim.c, case 2) */
    atomic_fetch_sub_explicit(&r->slots[tok - 1].refs, 1, memory_order_release);
  }
}

/* A private call that touches no slot of another sequence (begin, the
 * rest of stream_end after its CAS, engine_step): its word says "inside"
 * so that a hook nested in a signal handler records through the shared
 * shard instead of racing the plain updates. No fence: the word names no
 * slot, so no round needs to see it. */
TTFT__INLINE void call_enter_noslot(const ttft_registry *r, ttft__shard *sh) {
  /* release, though no round needs the slot: a round that reads it must
   * still synchronise with the writes of this thread's earlier calls (a
   * relaxed store would end their release sequence; free on x86) */
  atomic_store_explicit(&sh->hz, TTFT__HZ_IN, memory_order_release);
  /* F4's handshake is made by every hook, not only those on a slot: a
   * thread that only begins (refused at capacity, retrying) must not hold
   * the rounds back. relaxed: as hz_publish's */
  if (TTFT_UNLIKELY(atomic_load_explicit(&r->fence_mode, memory_order_relaxed) == 2))
    hz_order(sh, 2);
  atomic_signal_fence(memory_order_seq_cst); /* compiler only: before the updates */
}
TTFT__INLINE void call_leave_noslot(ttft__shard *sh) {
  atomic_signal_fence(memory_order_seq_cst); /* compiler only: after the updates */
  hz_leave(sh);
}

/* The slot of handle s when s names a live sequence, else NULL. */
TTFT__INLINE ttft__slot *live_slot(ttft_registry *r, int shared, ttft_seq s) {
  uint32_t idx = (uint32_t)s - 1; /* handle 0 wraps to UINT32_MAX */
  if (TTFT_UNLIKELY(idx >= r->nslots)) return NULL;
  ttft__slot *sl = &r->slots[idx];
  /* seq_cst: pairs with begin's release, so the slot's initial fields are
   * visible (acquire), and takes part in the seq_cst order of reclaim.c
   * (a call on a shard acquired after the reclaimer looked, and every call
   * of the shared shard, loads the state after the ending CAS). A plain
   * load on x86, ldar on ARM: the price of acquire. */
  uint64_t st = atomic_load_explicit(&sl->state, memory_order_seq_cst);
  if (TTFT_UNLIKELY(st != TTFT__SLOT_STATE(s >> 32, TTFT__SLOT_LIVE))) return NULL;
  return sl;
}

/* Whether t is a wall-clock time (ttft.h, TTFT_ECLOCK): more than
 * TTFT_CLOCK_AHEAD_NS ahead of r's clock, and within that of the wall
 * clock's now (CLOCK_REALTIME). Past the horizon (a reading of r's clock +
 * a day) and below the wall floor (a CLOCK_REALTIME reading - a day) is a
 * synthetic timeline run ahead of the clock: two loads, no clock read.
 * The clocks are read only for a t above both (a wall-clock time, or once
 * a day); each reading raises its bound. The wall clock only moves
 * forward but for a step back: one of more than a day leaves the floor
 * too high until then, and a wall-clock t under it is accepted. */
__attribute__((noinline, cold)) static int clock_ahead_slow(ttft_registry *r, uint64_t t) {
  /* relaxed, all four: bounds, nothing is published with them; two racing
   * stores leave either, both valid (each was a reading +/- a day) */
  if (t < atomic_load_explicit(&r->wall_floor, memory_order_relaxed)) return 0;
  uint64_t h = ttft__now(r) + TTFT_CLOCK_AHEAD_NS;
  if (h > atomic_load_explicit(&r->horizon, memory_order_relaxed))
    atomic_store_explicit(&r->horizon, h, memory_order_relaxed);
  if (t <= h) return 0;
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return 0;
  uint64_t w = (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
  if (w > TTFT_CLOCK_AHEAD_NS &&
      w - TTFT_CLOCK_AHEAD_NS > atomic_load_explicit(&r->wall_floor, memory_order_relaxed))
    atomic_store_explicit(&r->wall_floor, w - TTFT_CLOCK_AHEAD_NS, memory_order_relaxed);
  return t + TTFT_CLOCK_AHEAD_NS >= w && t <= w + TTFT_CLOCK_AHEAD_NS;
}
TTFT__INLINE int clock_ahead(ttft_registry *r, uint64_t t) {
  /* relaxed: as above */
  if (TTFT_LIKELY(t <= atomic_load_explicit(&r->horizon, memory_order_relaxed))) return 0;
  return clock_ahead_slow(r, t);
}

/* event_time's rare case: t before prev, or more than a day after it.
 * Clamped to prev (and counted) when it went backwards or is a wall-clock
 * time; a real gap of more than a day (or a synthetic timeline's) is kept. */
__attribute__((noinline, cold)) static uint64_t event_time_odd(ttft_registry *r, int shared,
                                                              ttft__crec *cr, uint64_t t,
                                                              uint64_t prev) {
  if (t > prev && !clock_ahead(r, t)) return t;
  ctr_add(shared, &cr->ctr[TTFT_COUNTER_CLOCK_CLAMPED], 1);
  return prev;
}

/* t for an event after `prev`: TTFT_NOW read; backwards time and
 * wall-clock times clamped (one more compare than before, in the general
 * paths only: the token fast path leaves for them on its own tests, as
 * every gap beyond the stall budget, at most a day, does) */
TTFT__INLINE uint64_t event_time(ttft_registry *r, int shared, ttft__crec *cr,
                                  uint64_t t, uint64_t prev) {
  if (t == TTFT_NOW) t = ttft__now(r);
  if (TTFT_UNLIKELY(t < prev || t - prev > TTFT_CLOCK_AHEAD_NS))
    t = event_time_odd(r, shared, cr, t, prev);
  return t;
}

static inline uint64_t sub0(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

/* ------------------------------------------------------------------ begin */
static int32_t band_of(const ttft_registry *r, uint32_t prompt_tokens) {
  if (!prompt_tokens) return -1;
  int32_t b = 0;
  while ((uint32_t)b < r->n_band_edges && prompt_tokens >= r->band_edges[b]) b++;
  return b;
}

/* The W3C trace-id in s as two big-endian halves: exactly 32 lowercase
 * hex digits, not all zero. Returns 1, or 0 for anything else. */
static int trace_parse(const char *s, uint64_t out[2]) {
  /* a hex digit's value + 1; 0 for anything else (the NUL too) */
  static const unsigned char hx[256] = {
      ['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,
      ['6'] = 7,  ['7'] = 8,  ['8'] = 9,  ['9'] = 10, ['a'] = 11, ['b'] = 12,
      ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16};
  uint64_t v[2];
  for (int h = 0; h < 2; h++) {
    uint64_t x = 0;
    for (int i = 0; i < 16; i++) {
      unsigned d = hx[(unsigned char)s[16 * h + i]];
      if (!d) return 0; /* also the NUL of a shorter string: nothing past it is read */
      x = x << 4 | (d - 1);
    }
    v[h] = x;
  }
  if (s[32] != '\0' || (v[0] | v[1]) == 0) return 0;
  out[0] = v[0];
  out[1] = v[1];
  return 1;
}

/* hex digit value + 1 of c, 0 for anything else (lowercase only, as W3C
 * trace-context requires) */
static unsigned hex1(char c) {
  if (c >= '0' && c <= '9') return (unsigned)(c - '0') + 1;
  if (c >= 'a' && c <= 'f') return (unsigned)(c - 'a') + 11;
  return 0;
}

/* n lowercase hex digits at s, not all zero when nonzero is set */
static int hex_field(const char *s, unsigned n, int nonzero) {
  unsigned any = 0;
  for (unsigned i = 0; i < n; i++) {
    unsigned d = hex1(s[i]);
    if (!d) return 0; /* the NUL of a shorter string too: nothing past it is read */
    any |= d - 1;
  }
  return !nonzero || any;
}

/* W3C trace-context, "traceparent Header" and "Versioning of traceparent":
 * version-format = trace-id "-" parent-id "-" trace-flags (version 00),
 * 55 characters; a higher version is parsed for its first four fields
 * when at least 55 characters are there, followed by the end or '-'. */
int ttft_traceparent_parse(const char *h, char out[33]) {
  if (out) out[0] = '\0';
  if (!h) return TTFT_EINVAL;
  while (*h == ' ' || *h == '\t') h++;
  /* version: 2 lowercase hex digits, "ff" forbidden */
  if (!hex_field(h, 2, 0) || (h[0] == 'f' && h[1] == 'f') || h[2] != '-') return TTFT_EINVAL;
  if (!hex_field(h + 3, 32, 1) || h[35] != '-') return TTFT_EINVAL;
  if (!hex_field(h + 36, 16, 1) || h[52] != '-') return TTFT_EINVAL;
  if (!hex_field(h + 53, 2, 0)) return TTFT_EINVAL;
  const char *end = h + 55;
  if (h[0] == '0' && h[1] == '0') {
    while (*end == ' ' || *end == '\t') end++;
    if (*end) return TTFT_EINVAL; /* version 00 is exactly its four fields */
  } else if (*end != '\0' && *end != '-' && *end != ' ' && *end != '\t') {
    return TTFT_EINVAL;
  }
  if (out) {
    memcpy(out, h + 3, 32);
    out[32] = '\0';
  }
  return TTFT_OK;
}

/* The request id in s copied into the slot's id words: at most
 * TTFT_MAX_REQUEST_ID bytes, cut at a whole UTF-8 character; malformed
 * UTF-8 and control characters stored as '?'. Returns its length. */
static uint32_t reqid_copy(ttft__reqid *dst, const char *s) {
  char buf[TTFT_MAX_REQUEST_ID + 1 + 8];
  const unsigned char *p = (const unsigned char *)s;
  size_t n = 0;
  while (*p && n < TTFT_MAX_REQUEST_ID) {
    if (*p >= 0x20 && *p < 0x7F) { /* printable ASCII, the usual id */
      buf[n++] = (char)*p++;
      continue;
    }
    size_t bad = 1, k = ttft__utf8_seq(p, SIZE_MAX, NULL, &bad);
    if (!k) { /* a malformed sequence: one '?' for its maximal invalid part */
      buf[n++] = '?';
      p += bad;
      continue;
    }
    if (n + k > TTFT_MAX_REQUEST_ID) break; /* a whole character only */
    if (k == 1 && (*p < 0x20 || *p == 0x7F)) buf[n] = '?';
    else memcpy(buf + n, p, k);
    n += k;
    p += k;
  }
  /* the words that hold it, NUL-padded (slow_offer copies those only;
   * readers stop at its length) */
  memset(buf + n, 0, 8);
  for (uint32_t w = 0; w < (n + 7) / 8; w++) {
    uint64_t x;
    memcpy(&x, buf + 8 * w, 8);
    TTFT__ST(&dst->w[w], x);
  }
  return (uint32_t)n;
}

/* The ids of a request, into slot idx for generation gen (cold: only
 * begins that carry one). */
__attribute__((noinline, cold)) static void ids_store(ttft_registry *r, ttft__shard *sh,
                                                     ttft__crec *cr, uint32_t idx, uint32_t gen,
                                                     const char *rid, const char *tid) {
  uint32_t ids = 0;
  if (tid) {
    uint64_t v[2];
    if (!trace_parse(tid, v)) {
      ctr_add(sh->shared, &cr->ctr[TTFT_COUNTER_TRACE_ID_INVALID], 1);
    } else if (r->reqid) {
      TTFT__ST(&r->reqid[idx].trace[0], v[0]);
      TTFT__ST(&r->reqid[idx].trace[1], v[1]);
      ids = TTFT__IDS_TRACE;
    }
  }
  if (rid && r->reqid) ids |= reqid_copy(&r->reqid[idx], rid) << 8;
  if (r->reqid) TTFT__ST(&r->reqid[idx].tag, (uint64_t)gen << 32 | ids);
}

/* A prompt length as a slot keeps it: TTFT__PROMPT_OWN is taken */
static inline uint32_t prompt_len(uint32_t n) { return n < TTFT__PROMPT_OWN ? n : TTFT__PROMPT_OWN - 1; }

/* *why: TTFT_EFULL or TTFT_ECLOCK when it returns 0 */
static ttft_seq begin_common(ttft_registry *r, uint32_t cls, uint32_t prompt_tokens,
                             int prefix_hit, uint64_t t, const char *rid, const char *tid,
                             uint64_t own_ttft, uint64_t own_tpot, int *why) {
  ttft__shard *sh = ttft__shard_for_call(r);
  ttft__crec *cr = crec_of(sh, cls);
  /* a private shard's plain counter updates are bracketed too, so that a
   * hook called from a signal handler in the middle of them records
   * through the shared shard instead (ttft__shard_for_call) */
  if (!sh->shared) call_enter_noslot(r, sh);
  /* a wall-clock t (time.time_ns(), system_clock): refused before it
   * takes a slot. One load and compare; the clocks are read only past the
   * horizon (clock_ahead) */
  if (TTFT_UNLIKELY(t != TTFT_NOW && clock_ahead(r, t))) {
    ctr_add(sh->shared, &cr->ctr[TTFT_COUNTER_CLOCK_REFUSED], 1);
    if (!sh->shared) call_leave_noslot(sh);
    *why = TTFT_ECLOCK;
    return 0;
  }
  uint32_t s1 = ttft__slot_acquire(r, sh);
  if (TTFT_UNLIKELY(!s1)) {
    ctr_add(sh->shared, &cr->ctr[TTFT_COUNTER_DROPPED], 1);
    if (!sh->shared) call_leave_noslot(sh);
    *why = TTFT_EFULL;
    return 0;
  }
  if (t == TTFT_NOW) t = ttft__now(r);
  ttft__slot *sl = &r->slots[s1 - 1];
  /* release fence (compiler-only on x86): the end of the slot's last
   * sequence (its ENDING CAS, which happened-before our pop of the slot)
   * is visible to a live reader (ttft_seq_stats, a seqlock reader of the
   * old handle) that reads any field stored below, so its re-check of
   * the state sees the old sequence ended */
  atomic_thread_fence(memory_order_release);
  TTFT__ST(&sl->t_begin, t);
  TTFT__ST(&sl->t_sched, 0);
  TTFT__ST(&sl->t_first, 0);
  TTFT__ST(&sl->t_last, t);
  TTFT__ST(&sl->t_event, t);
  TTFT__ST(&sl->tokens, 0);
  TTFT__ST(&sl->max_gap, 0);
  /* at most a day: a gap beyond it leaves the token fast path, whose
   * general path clamps a wall-clock time (event_time); the stall test
   * reads a budget above a day from the class (ttft__slot_stall_ns) */
  uint64_t stall_ns = r->classes[cls].slo.stall_threshold_ns;
  TTFT__ST(&sl->stall_ns, stall_ns < TTFT_CLOCK_AHEAD_NS ? stall_ns : TTFT_CLOCK_AHEAD_NS);
  TTFT__ST(&sl->t_preempt, 0);
  /* the request's budgets (its own, else the class's) and its token
   * deadline D: the class's token_deadline_ns, else its TPOT budget */
  const ttft_slo *cs = &r->classes[cls].slo;
  uint64_t tpot = own_tpot ? own_tpot : cs->tpot_ns;
  TTFT__ST(&sl->ttft_slo, own_ttft ? own_ttft : cs->ttft_ns);
  TTFT__ST(&sl->tpot_slo, tpot);
  TTFT__ST(&sl->prompt, own_ttft ? TTFT__PROMPT_OWN : prompt_len(prompt_tokens));
  /* D at most 2^62 ns (146 years: no deadline at all, in effect), so that
   * slack + D, both capped there, never wraps on the fast path */
  uint64_t dl = cs->token_deadline_ns ? cs->token_deadline_ns : tpot;
  TTFT__ST(&sl->dl, dl < TTFT__SUM_PART ? dl : TTFT__SUM_PART);
  /* the anchor is set by the first emission (first_emission) */
  TTFT__ST(&sl->dl_missed, 0);
  TTFT__ST(&sl->dl_extra, 0);
  TTFT__ST(&sl->flags, 0);
  TTFT__ST(&sl->stalls, 0);
  TTFT__ST(&sl->preemptions, 0);
  TTFT__ST(&sl->cls, cls);
  TTFT__ST(&sl->band, band_of(r, prompt_tokens));
  TTFT__ST(&sl->prefix, prefix_hit < 0 ? -1 : (prefix_hit ? TTFT_PREFIX_HIT : TTFT_PREFIX_MISS));
  /* The gap histogram was cleared by the stream_end of the slot's last
   * sequence, on the core that wrote it; only an emission that raced that
   * end (emissions moved on since) leaves it to clear here. */
  if (TTFT_UNLIKELY(TTFT__LD(&sl->emissions) != TTFT__LD(&sl->gh_clean)))
    for (uint32_t w = 0; w < TTFT__SG_WORDS; w++) TTFT__ST(&sl->gh[w], 0);
  TTFT__ST(&sl->gh_clean, 0);
  TTFT__ST(&sl->emissions, 0);
  ctr_add(sh->shared, &cr->ctr[TTFT_COUNTER_BEGUN], 1);
  /* a new generation: handles of the slot's earlier sequences stop
   * matching here (the slot kept its old ENDING state until now) */
  uint32_t gen = ttft__gen_next(TTFT__SLOT_GEN(TTFT__LD(&sl->state)));
  /* without ids the slot's tag stays another generation's: ids 0, cause unknown */
  if (TTFT_UNLIKELY(rid || tid)) ids_store(r, sh, cr, s1 - 1, gen, rid, tid);
  /* release: publishes the fields above to whoever acquires the live state */
  atomic_store_explicit(&sl->state, TTFT__SLOT_STATE(gen, TTFT__SLOT_LIVE), memory_order_release);
  if (!sh->shared) call_leave_noslot(sh);
  return ((uint64_t)gen << 32) | s1;
}

ttft_seq ttft_begin(ttft_registry *r, uint64_t t_ns) {
  if (!r) return 0;
  int why;
  return begin_common(r, 0, 0, -1, t_ns, NULL, NULL, 0, 0, &why);
}

/* A trace id for begin: trace_id as given, else the traceparent's (an
 * invalid header becomes "", which ids_store counts as invalid). */
__attribute__((noinline, cold)) static const char *traceparent_id(const char *h, char buf[33]) {
  ttft_traceparent_parse(h, buf); /* "" when invalid */
  return buf;
}

int ttft_begin_checked(ttft_registry *r, const ttft_request *req, uint64_t t_ns, ttft_seq *out) {
  if (out) *out = 0;
  if (!r || !out) return TTFT_EINVAL;
  ttft_request q;
  ttft_request_init(&q);
  if (req) {
    if (req->struct_size < sizeof(size_t) || req->struct_size > sizeof q) return TTFT_EINVAL;
    memcpy(&q, req, req->struct_size);
  }
  /* acquire: the class entry and its shard records are published (class_add) */
  uint32_t n = atomic_load_explicit(&r->nclasses, memory_order_acquire);
  if (q.class_id < 0 || (uint32_t)q.class_id >= n) return TTFT_EINVAL;
  char tp[33];
  const char *tid = q.trace_id;
  if (TTFT_UNLIKELY(!tid && q.traceparent)) tid = traceparent_id(q.traceparent, tp);
  int why = TTFT_OK;
  *out = begin_common(r, (uint32_t)q.class_id, q.prompt_tokens, q.prefix_hit, t_ns, q.request_id,
                      tid, q.ttft_slo_ns, q.tpot_slo_ns, &why);
  return *out ? TTFT_OK : why;
}

ttft_seq ttft_begin_ex(ttft_registry *r, const ttft_request *req, uint64_t t_ns) {
  ttft_seq s;
  ttft_begin_checked(r, req, t_ns, &s);
  return s;
}

/* ------------------------------------------------------------------- mark */
int ttft_mark(ttft_registry *r, ttft_seq s, ttft_phase phase, uint64_t t_ns) {
  if (!r || (unsigned)phase >= TTFT_PHASE_COUNT_) return TTFT_EINVAL;
  ttft__shard *sh = ttft__shard_for_call(r);
  const int shared = sh->shared;
  uint32_t e = call_enter(r, sh, shared, s);
  ttft__slot *sl = live_slot(r, shared, s);
  if (!sl) {
    stale_seen(sh, shared);
    call_leave(r, sh, shared, e);
    return TTFT_ESTALE;
  }
  ttft__crec *cr = crec_of(sh, TTFT__LD(&sl->cls));
  uint64_t t = event_time(r, shared, cr, t_ns, TTFT__LD(&sl->t_event));
  if (phase == TTFT_PHASE_SCHEDULED) {
    uint32_t f = TTFT__LD(&sl->flags);
    if (!(f & SF_SCHED) && TTFT__LD(&sl->emissions) == 0) {
      TTFT__ST(&sl->t_sched, t);
      TTFT__ST(&sl->flags, f | SF_SCHED);
      hist_rec(r, sh->shared, &cr->h[TTFT_METRIC_QUEUE], t - TTFT__LD(&sl->t_begin));
    }
  } else if (phase == TTFT_PHASE_PREEMPTED) {
    TTFT__ST(&sl->preemptions, TTFT__LD(&sl->preemptions) + 1);
    uint32_t f = TTFT__LD(&sl->flags);
    uint32_t em = TTFT__LD(&sl->emissions) & SF_PEM_MASK;
    if (!(f & SF_PREEMPTED) || (f >> SF_PEM_SHIFT) != em) { /* the gap's first */
      TTFT__ST(&sl->t_preempt, t);
      f = (f & ((1u << SF_PEM_SHIFT) - 1u)) | SF_PREEMPTED | (em << SF_PEM_SHIFT);
      TTFT__ST(&sl->flags, f);
    }
    ctr_add(sh->shared, &cr->ctr[TTFT_COUNTER_PREEMPTIONS], 1);
  } /* RESUMED: the time check above is all (the PREEMPTED mark decides causes) */
  TTFT__ST(&sl->t_event, t);
  call_leave(r, sh, shared, e);
  return TTFT_OK;
}

/* ---------------------------------------------------------- token_emitted */
/* the slot's gap counters: halved every 32768 emissions, so none can pass
 * 2^16 - 1 (at most 32767 + 32768 increments after a halving) */
__attribute__((noinline, cold)) static void seq_gaps_halve(ttft__slot *sl) {
  for (uint32_t w = 0; w < TTFT__SG_WORDS; w++) {
    uint64_t x = TTFT__LD(&sl->gh[w]), y = 0;
    for (unsigned k = 0; k < 4; k++) y |= ((((x >> (16 * k)) & 0xFFFFu) + 1) / 2) << (16 * k);
    TTFT__ST(&sl->gh[w], y);
  }
}

/* The sequence's own gap counter (the pooled index >> 3) and worst gap. */
TTFT__INLINE void seq_gap(ttft__slot *sl, uint32_t i, uint64_t gap) {
  uint32_t j = ttft__sg_index(i);
  _Atomic uint64_t *w = &sl->gh[j >> 2];
  TTFT__ST(w, TTFT__LD(w) + (UINT64_C(1) << (16 * (j & 3))));
  if (gap > TTFT__LD(&sl->max_gap)) TTFT__ST(&sl->max_gap, gap);
}

/* One gap before an emission of n tokens: the pooled ITL histogram (and,
 * for n > 1, n per-token observations of gap / n; see registry.h), the
 * sequence's own counter (the pooled index >> 3), the exact worst gap. */
TTFT__INLINE void record_gap(ttft_registry *r, int shared, ttft__crec *cr, ttft__slot *sl,
                             uint64_t gap, uint32_t n) {
  uint32_t i = ttft__hist_index(gap);
  if (TTFT_LIKELY(n == 1)) {
    hist_rec_at(r, shared, &cr->h[TTFT_METRIC_ITL], i, gap);
  } else {
    hist_rec_at(r, shared, &cr->h[TTFT__LH_ITL_MULTI], i, gap);
    hist_rec_n(r, shared, &cr->h[TTFT_METRIC_ITL_PER_TOKEN], gap / n, n);
  }
  seq_gap(sl, i, gap);
}

/* The token deadlines a gap of g misses when the stream has `slack` and
 * deadline d (> 0), g > slack + d: m = floor((g - slack - d) / d) + 1 */
static inline uint64_t deadlines_missed(uint64_t g, uint64_t slack, uint64_t d) {
  return (g - slack - d) / d + 1;
}

/* The fluidity rule for one emission after the first (docs/metrics.md
 * "Fluidity", SPEC 10.2): gap g carrying n tokens, with the slot's
 * deadline D and slack. Counts the deadlines as they happen; the slot
 * keeps its missed ones and the deadlines beyond one per emission. */
TTFT__INLINE void fluid_gap(int shared, ttft__crec *cr, ttft__slot *sl, uint64_t t, uint64_t g,
                            uint32_t n) {
  uint64_t d = ttft__slot_dl(sl);
  if (!d) return;
  uint64_t slack = ttft__slot_slack(sl, d), total = 1, missed = 0;
  if (slack <= UINT64_MAX - d && g <= slack + d) {
    slack = slack + d - g;
    if (slack > TTFT__SUM_PART) slack = TTFT__SUM_PART;
  } else {
    missed = deadlines_missed(g, slack, d);
    total = missed;
    slack = 0;
  }
  if (n > 1) {
    uint64_t more;
    /* each of the other n - 1 tokens: one deadline, met, slack + D */
    total += n - 1;
    /* capped (2^62 ns: 146 years of buffered tokens) */
    if (__builtin_mul_overflow((uint64_t)(n - 1), d, &more) || more > TTFT__SUM_PART - slack)
      slack = TTFT__SUM_PART;
    else
      slack += more;
  }
  /* the tokens after this emission (emission_done adds them) */
  ttft__slot_slack_set(sl, d, t, slack, TTFT__LD(&sl->tokens) + n);
  if (total > 1) TTFT__ST(&sl->dl_extra, TTFT__LD(&sl->dl_extra) + total - 1);
  /* n of the deadlines are counted with the tokens (TTFT__CTR_TOKENS_DL,
   * emission_done); a miss of several adds the rest (total >= n) */
  if (total > n) ctr_add(shared, &cr->ctr[TTFT_COUNTER_TOKEN_DEADLINES], total - n);
  if (TTFT_UNLIKELY(missed)) {
    TTFT__ST(&sl->dl_missed, TTFT__LD(&sl->dl_missed) + missed);
    ctr_add(shared, &cr->ctr[TTFT_COUNTER_TOKEN_DEADLINES_MISSED], missed);
  }
}

/* What every accepted emission stores last. */
/* tok: where the tokens are counted, TTFT_COUNTER_TOKENS, or
 * TTFT__CTR_TOKENS_DL for an emission after the first of a stream with a
 * token deadline (its tokens are its deadlines too; registry.h). */
TTFT__INLINE void emission_done(int shared, ttft__crec *cr, ttft__slot *sl, uint64_t t,
                                uint32_t em, uint32_t n_tokens, unsigned tok) {
  TTFT__ST(&sl->t_last, t);
  TTFT__ST(&sl->t_event, t);
  /* release: this emission's gap counter is visible to whoever sees the
   * new count (stream_end clears the counters it has seen) */
  atomic_store_explicit(&sl->emissions, em + 1, memory_order_release);
  TTFT__ST(&sl->tokens, TTFT__LD(&sl->tokens) + n_tokens);
  ctr_add(shared, &cr->ctr[tok], n_tokens);
}

__attribute__((noinline, cold)) static void first_emission(ttft_registry *r, ttft__shard *sh,
                                                           ttft__crec *cr, ttft__slot *sl,
                                                           uint64_t t, uint32_t n_tokens) {
  uint64_t ttft = t - TTFT__LD(&sl->t_begin);
  hist_rec(r, sh->shared, &cr->h[TTFT_METRIC_TTFT], ttft);
  int32_t p = TTFT__LD(&sl->prefix);
  if (p >= 0) hist_rec(r, sh->shared, &sh->split_cache[p], ttft);
  int32_t b = TTFT__LD(&sl->band);
  if (b >= 0) hist_rec(r, sh->shared, &sh->split_band[b], ttft);
  if (TTFT__LD(&sl->flags) & SF_SCHED) {
    uint64_t prefill = t - TTFT__LD(&sl->t_sched);
    hist_rec(r, sh->shared, &cr->h[TTFT_METRIC_PREFILL], prefill);
    if (p >= 0) hist_rec(r, sh->shared, &sh->split_prefill[p], prefill);
  }
  TTFT__ST(&sl->t_first, t);
  /* the fluidity rule starts with slack 0: the next token is due at t + D */
  uint64_t d = ttft__slot_dl(sl);
  if (d) ttft__slot_slack_set(sl, d, t, 0, TTFT__LD(&sl->tokens) + n_tokens);
  (void)r;
}

/* ------------------------------------------------------------ stall causes
 * The rule (docs/metrics.md, "stall causes"), for a gap (a, b] of a
 * sequence whose usual step is u:
 *   UNKNOWN       no engine step ended inside (a, b];
 *   ENGINE_IDLE   the steps cover less than half of the gap;
 *   PREEMPTED     the sequence was marked PREEMPTED since emission a, and
 *                 its first such mark lies in the first half of the gap;
 *   PREFILL       the steps that carried prefill exceed u, inside the gap,
 *                 by at least half of the busy time beyond one usual step;
 *   SLOW_STEP     the step that produced the token at b (the newest that
 *                 ended inside the gap) exceeds u by at least half of the
 *                 busy time beyond one usual step;
 *   NOT_SCHEDULED the steps that ended inside the gap before that one
 *                 (steps that ran without the sequence) cover at least
 *                 half of the gap;
 *   otherwise     the largest share of the gap: those earlier steps
 *                 (NOT_SCHEDULED, when there are any), the time no step
 *                 ran (ENGINE_IDLE), the producing step's excess over u
 *                 (SLOW_STEP; NOT_SCHEDULED when it has none: steps
 *                 still running at b cover the gap).
 * Only the stall path runs this: a gap over the class's stall budget. */

/* The sequence's usual gap: the median of its earlier gaps (em - 1 of
 * them), once it has 3; 0 when it has fewer (the caller falls back). */
static uint64_t usual_gap(const ttft__slot *sl, uint32_t em) {
  if (em < 4) return 0;
  return ttft__seq_gap_quantile(sl, 0.5, em - 1 < 0x8000u ? em - 1 : 0);
}

/* the median of v[0..n) (n >= 1), sorted in place: n is at most 16 */
static uint64_t median_u64(uint64_t *v, unsigned n) {
  for (unsigned i = 1; i < n; i++)
    for (unsigned j = i; j > 0 && v[j - 1] > v[j]; j--) {
      uint64_t x = v[j];
      v[j] = v[j - 1];
      v[j - 1] = x;
    }
  return v[(n - 1) / 2];
}

/* The steps in and before the gap are read by step_ring.c, in
 * O(log ring + steps overlapping the gap + 16) entries. */
static ttft_stall_cause stall_cause(const ttft_registry *r, const ttft__slot *sl, uint64_t a,
                                    uint64_t b, uint32_t em) {
  /* no engine step recorded yet (a server that does not report them):
   * nothing to read, and the usual gap is not needed. relaxed: as the
   * ring reader's */
  if (!TTFT__LD(&r->step_head)) return TTFT_STALL_UNKNOWN;
  const uint64_t gap = b - a;
  uint64_t u = usual_gap(sl, em);
  ttft__gap_steps g;
  ttft__gap_steps_read(r, a, b, u == 0, &g);
  if (!g.ended_inside) return TTFT_STALL_UNKNOWN;
  if (2 * g.covered < gap) return TTFT_STALL_ENGINE_IDLE;
  /* marked PREEMPTED after emission em, i.e. inside this gap, and out of
   * the batch (evicted, waiting, recomputing) for at least half of it */
  uint32_t f = TTFT__LD(&sl->flags);
  uint64_t tp = TTFT__LD(&sl->t_preempt);
  if ((f & SF_PREEMPTED) && (f >> SF_PEM_SHIFT) == (em & SF_PEM_MASK) && tp <= b &&
      2 * (b - tp) >= gap)
    return TTFT_STALL_PREEMPTED;
  /* too few gaps of its own: the median of the non-prefill steps before the gap */
  if (!u && g.nbefore) u = median_u64(g.before, g.nbefore);
  const uint64_t busy = g.covered > u ? g.covered - u : 0;
  uint64_t excess = 0;
  for (unsigned i = 0; i < g.npre; i++)
    if (g.pre_len[i] > u) excess += g.pre_len[i] - u;
  if (excess && 2 * excess >= busy) return TTFT_STALL_PREFILL;
  /* the step that produced the token was itself far longer than usual:
   * the sequence was in it, nothing was left out */
  const uint64_t slow = g.prod > u ? g.prod - u : 0;
  if (slow && 2 * slow >= busy) return TTFT_STALL_SLOW_STEP;
  /* evidence that steps ran without the sequence: they ended inside the
   * gap before the one that produced its token, covering most of it */
  if (2 * g.earlier >= gap) return TTFT_STALL_NOT_SCHEDULED;
  const uint64_t idle = gap > g.covered ? gap - g.covered : 0;
  if (g.earlier && g.earlier >= slow && g.earlier >= idle) return TTFT_STALL_NOT_SCHEDULED;
  if (idle > slow) return TTFT_STALL_ENGINE_IDLE;
  return slow ? TTFT_STALL_SLOW_STEP : TTFT_STALL_NOT_SCHEDULED;
}

/* A gap (a, b] over the stall budget: counted, with its cause. */
__attribute__((noinline, cold)) static void stall_seen(ttft_registry *r, ttft__shard *sh,
                                                       ttft__crec *cr, ttft__slot *sl,
                                                       uint64_t a, uint64_t b, uint32_t em) {
  ttft_stall_cause c = stall_cause(r, sl, a, b, em);
  ctr_add(sh->shared, &cr->cause_n[c], 1);
  ctr_add(sh->shared, &cr->cause_ns[c], b - a);
  TTFT__ST(&sl->stalls, TTFT__LD(&sl->stalls) + 1);
  ctr_add(sh->shared, &cr->ctr[TTFT_COUNTER_STALLS], 1);
  uint32_t f = (TTFT__LD(&sl->flags) & ~SF_CAUSE_MASK) | ((uint32_t)c << SF_CAUSE_SHIFT);
  TTFT__ST(&sl->flags, f);
  /* the sequence's longest gap so far (record_gap raises max_gap after
   * this): its cause goes with the stream into the slowest lists */
  if (r->reqid && b - a > TTFT__LD(&sl->max_gap)) {
    uint32_t idx = (uint32_t)(sl - r->slots), gen = TTFT__SLOT_GEN(TTFT__LD(&sl->state));
    uint32_t ids = ttft__ids_of(TTFT__LD(&r->reqid[idx].tag), gen);
    ids = (ids & ~TTFT__IDS_CAUSE_MASK) | (uint32_t)c << TTFT__IDS_CAUSE_SHIFT;
    TTFT__ST(&r->reqid[idx].tag, (uint64_t)gen << 32 | ids);
  }
  if (!(f & SF_STALLED)) {
    TTFT__ST(&sl->flags, f | SF_STALLED);
    ctr_add(sh->shared, &cr->ctr[TTFT_COUNTER_STALLED_SEQS], 1);
  }
}

/* One emission of s at t (resolved, never TTFT_NOW), inside a call
 * bracket: every case (first emission, stall, shared shard, clamped clock,
 * counter halving). Returns TTFT_OK or TTFT_ESTALE (counted). */
__attribute__((noinline)) static int emit_in_call(ttft_registry *r, ttft__shard *sh, int shared,
                                                   ttft_seq s, uint32_t n_tokens, uint64_t t) {
  ttft__slot *sl = live_slot(r, shared, s);
  if (TTFT_UNLIKELY(!sl)) {
    stale_seen(sh, shared);
    return TTFT_ESTALE;
  }
  ttft__crec *cr = crec_of(sh, TTFT__LD(&sl->cls));
  t = event_time(r, shared, cr, t, TTFT__LD(&sl->t_event));
  uint32_t em = TTFT__LD(&sl->emissions);
  if (TTFT_LIKELY(em != 0)) {
    uint64_t t_last = TTFT__LD(&sl->t_last), gap = t - t_last;
    if (TTFT_UNLIKELY((em & 0x7FFFu) == 0)) seq_gaps_halve(sl);
    /* before record_gap: the sequence's usual gap is read without this one */
    if (TTFT_UNLIKELY(gap > TTFT__LD(&sl->stall_ns)) && gap > ttft__slot_stall_ns(r, sl))
      stall_seen(r, sh, cr, sl, t_last, t, em);
    record_gap(r, shared, cr, sl, gap, n_tokens);
    fluid_gap(shared, cr, sl, t, gap, n_tokens);
  } else {
    first_emission(r, sh, cr, sl, t, n_tokens);
  }
  emission_done(shared, cr, sl, t, em, n_tokens,
                em && TTFT__LD(&sl->dl) ? TTFT__CTR_TOKENS_DL : TTFT_COUNTER_TOKENS);
  return TTFT_OK;
}

/* The common case of one emission on a private shard — a later emission
 * of a live sequence, time moving forward, no stall, no counter halving
 * due — inside a call bracket. Returns 1 when it recorded the emission,
 * 0 when nothing was written and the general path must run. */
TTFT__INLINE int emit_fast_sl(ttft__shard *sh, ttft__slot *sl, uint64_t want, uint32_t n_tokens,
                              uint64_t t) {
  /* seq_cst: as in live_slot (the check that counts, after the hazard) */
  if (TTFT_UNLIKELY(atomic_load_explicit(&sl->state, memory_order_seq_cst) != want)) return 0;
  uint32_t em = TTFT__LD(&sl->emissions);
  uint64_t gap = t - TTFT__LD(&sl->t_last);
  /* ((em - 1) & 0x7FFF) == 0x7FFF: em == 0 (the first emission) or a
   * multiple of 32768 (the gap counters' halving), in one test */
  if (TTFT_UNLIKELY(((em - 1u) & 0x7FFFu) == 0x7FFFu || t < TTFT__LD(&sl->t_event) ||
                    gap > TTFT__LD(&sl->stall_ns)))
    return 0;
  /* single-token emissions whose power of two already has its chunk;
   * anything else (a first value there, several tokens) takes the general
   * path, so that this one makes no call and spills nothing */
  if (TTFT_UNLIKELY(n_tokens != 1)) return 0;
  /* the fluidity rule's common case: a token deadline met. The next
   * token's deadline is the anchor plus D per token (registry.h, ttft__slot
   * dl): a multiply and a compare, and nothing stored but the tokens,
   * which count the deadline too (TTFT__CTR_TOKENS_DL). A miss (t past it:
   * the difference wraps), a slack that would pass its cap (2^62), or a
   * slot keeping the slack itself (the sign bit of dl) takes the general
   * path (fluid_gap) */
  uint64_t dl = TTFT__LD(&sl->dl);
  if (dl) {
    if (TTFT_UNLIKELY((int64_t)dl < 0)) return 0;
    /* modulo 2^64: exact */
    uint64_t due = TTFT__LD(&sl->dl_anchor) + TTFT__LD(&sl->tokens) * dl;
    if (TTFT_UNLIKELY(due - t > TTFT__SUM_PART)) return 0;
  }
  const unsigned tok = dl ? TTFT__CTR_TOKENS_DL : TTFT_COUNTER_TOKENS;
  ttft__crec *cr = crec_of(sh, TTFT__LD(&sl->cls));
  ttft__hist *h = &cr->h[TTFT_METRIC_ITL];
  uint32_t i = ttft__hist_index(gap);
  /* relaxed: only this shard's owner attaches its chunks */
  ttft__chunk *ch = atomic_load_explicit(&h->chunk[i >> TTFT__CHUNK_BITS], memory_order_relaxed);
  if (TTFT_UNLIKELY(!ch)) return 0;
  /* the wide sum's common case (registry.h): no crossing of 2^63 */
  uint64_t sum0 = TTFT__LD(&h->sum), sum = sum0 + gap;
  if (TTFT_UNLIKELY((int64_t)((sum ^ sum0) | gap) < 0)) return 0;
  _Atomic uint64_t *b = &ch->b[i & (TTFT__CHUNK_BUCKETS - 1)];
  TTFT__ST(b, TTFT__LD(b) + 1);
  /* release: see ttft__hist_sum_add */
  atomic_store_explicit(&h->sum, sum, memory_order_release);
  if (~gap > TTFT__LD(&h->min)) TTFT__ST(&h->min, ~gap);
  if (gap > TTFT__LD(&h->max)) TTFT__ST(&h->max, gap);
  seq_gap(sl, i, gap);
  emission_done(0, cr, sl, t, em, 1, tok);
  return 1;
}


/* token_emitted, any case. */
__attribute__((noinline)) static int token_emitted_full(ttft_registry *r, ttft_seq s,
                                                         uint32_t n_tokens, uint64_t t) {
  ttft__shard *sh = ttft__shard_for_call(r);
  const int shared = sh->shared; /* read once: atomics below make the compiler reload it */
  uint32_t e = call_enter(r, sh, shared, s);
  int rc = emit_in_call(r, sh, shared, s, n_tokens, t);
  call_leave(r, sh, shared, e);
  return rc;
}

/* The common case with no call at all, so nothing is spilled. Anything
 * else leaves the call (hazard withdrawn, nothing written) and runs
 * token_emitted_full from the start. t is resolved (never TTFT_NOW). */
TTFT__INLINE int token_emitted_fast(ttft_registry *r, ttft_seq s, uint32_t n_tokens, uint64_t t) {
  if (TTFT_UNLIKELY(ttft__tl_cache[0].reg_id != r->id)) goto full;
  ttft__shard *sh = ttft__tl_cache[0].sh;
  /* a hazard published already — this thread is inside a call (a signal
   * handler's hook) — or the shared shard, whose word always says so: the
   * full path takes the shared shard (relaxed: only this thread and its
   * handlers store a private word) */
  if (TTFT_UNLIKELY(atomic_load_explicit(&sh->hz, memory_order_relaxed) & TTFT__HZ_IN)) goto full;
  uint32_t idx = (uint32_t)s - 1; /* handle 0 wraps to UINT32_MAX */
  if (TTFT_UNLIKELY(idx >= r->nslots)) goto full;
  ttft__slot *sl = &r->slots[idx];
  const uint64_t want = TTFT__SLOT_STATE(s >> 32, TTFT__SLOT_LIVE);
  /* the pre-check (relaxed, see seq_fresh): a stale handle takes the full
   * path, which counts it and publishes no slot */
  if (TTFT_UNLIKELY(atomic_load_explicit(&sl->state, memory_order_relaxed) != want)) goto full;
  hz_publish(r, sh, (uint32_t)s);
  if (TTFT_UNLIKELY(!emit_fast_sl(sh, sl, want, n_tokens, t))) goto leave_full;
  hz_leave(sh);
  return TTFT_OK;
leave_full:
  hz_leave(sh);
full:
  return token_emitted_full(r, s, n_tokens, t);
}

/* TTFT_NOW: read the clock once, then the same paths */
__attribute__((noinline)) static int token_emitted_now(ttft_registry *r, ttft_seq s,
                                                        uint32_t n_tokens) {
  return token_emitted_fast(r, s, n_tokens, ttft__now(r));
}

int ttft_token_emitted(ttft_registry *r, ttft_seq s, uint32_t n_tokens, uint64_t t_ns) {
  if (TTFT_UNLIKELY(!r || !n_tokens)) return TTFT_EINVAL;
  if (t_ns == TTFT_NOW) return token_emitted_now(r, s, n_tokens);
  return token_emitted_fast(r, s, n_tokens, t_ns);
}

/* ---------------------------------------------------------- step_emitted */
/* step_emitted on a private shard: the loop, made for each of its callers'
 * constants (n_tokens NULL or not, fm 0 or not) so that the common one
 * tests neither per sequence. */
TTFT__INLINE long step_private(ttft_registry *r, ttft__shard *sh, const ttft_seq *seqs,
                               const uint32_t *n_tokens, size_t count, uint64_t t, int fm) {
  /* the slot table in locals: the atomics below would make the compiler
   * reload r->slots and r->nslots for every sequence */
  ttft__slot *slots = r->slots;
  const uint32_t nslots = r->nslots;
  long accepted = 0;
  for (size_t i = 0; i < count; i++) {
    uint32_t n = n_tokens ? n_tokens[i] : 1;
    if (TTFT_UNLIKELY(!n)) continue;
    ttft_seq q = seqs[i];
    uint32_t idx = (uint32_t)q - 1; /* handle 0 wraps to UINT32_MAX */
    const uint64_t want = TTFT__SLOT_STATE(q >> 32, TTFT__SLOT_LIVE);
    /* the hazard moves to this sequence's slot, or to none for a stale
     * handle (the pre-check, relaxed: see seq_fresh). release: the previous
     * slot's writes happen-before a round that reads the new value */
    if (TTFT_LIKELY(idx < nslots) &&
        TTFT_LIKELY(atomic_load_explicit(&slots[idx].state, memory_order_relaxed) == want)) {
      atomic_store_explicit(&sh->hz, TTFT__HZ_IN | (uint32_t)q, memory_order_release);
      hz_order(sh, fm);
      if (TTFT_LIKELY(emit_fast_sl(sh, &slots[idx], want, n, t))) {
        accepted++;
        continue;
      }
    } else {
      atomic_store_explicit(&sh->hz, TTFT__HZ_IN, memory_order_release);
      hz_order(sh, fm);
    }
    accepted += emit_in_call(r, sh, 0, q, n, t) == TTFT_OK;
  }
  return accepted;
}

/* One clock read (for TTFT_NOW) for the whole step; per sequence the same
 * recording as ttft_token_emitted, and the hazard moves from slot to slot. */
long ttft_step_emitted(ttft_registry *r, const ttft_seq *seqs, const uint32_t *n_tokens,
                       size_t count, uint64_t t_ns) {
  if (TTFT_UNLIKELY(!r || (!seqs && count))) return TTFT_EINVAL;
  if (!count) return 0;
  uint64_t t = t_ns == TTFT_NOW ? ttft__now(r) : t_ns;
  ttft__shard *sh = ttft__shard_for_call(r);
  long accepted = 0;
  if (TTFT_LIKELY(!sh->shared)) {
    /* relaxed: as hz_publish's (read once a step: a switch to fence mode
     * 2 meanwhile is seen by the next call, and the rounds wait for it) */
    const int fm = atomic_load_explicit(&r->fence_mode, memory_order_relaxed);
    if (TTFT_LIKELY(!fm))
      accepted = n_tokens ? step_private(r, sh, seqs, n_tokens, count, t, 0)
                          : step_private(r, sh, seqs, NULL, count, t, 0);
    else
      accepted = step_private(r, sh, seqs, n_tokens, count, t, fm);
    hz_leave(sh);
  } else {
    for (size_t i = 0; i < count; i++) {
      uint32_t n = n_tokens ? n_tokens[i] : 1;
      if (!n) continue;
      uint32_t e = call_enter(r, sh, 1, seqs[i]);
      if (emit_in_call(r, sh, 1, seqs[i], n, t) == TTFT_OK) accepted++;
      call_leave(r, sh, 1, e);
    }
  }
  return accepted;
}

/* ----------------------------------------------------------- engine_step */
void ttft_step_info_init(ttft_step_info *info) {
  if (!info) return;
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
}

int ttft_engine_step(ttft_registry *r, const ttft_step_info *info, uint64_t t_start_ns,
                     uint64_t t_end_ns) {
  if (TTFT_UNLIKELY(!r)) return TTFT_EINVAL;
  uint32_t prefill = 0;
  if (info) {
    /* an older, shorter struct still carries prefill_tokens (its first field) */
    if (TTFT_UNLIKELY(info->struct_size < offsetof(ttft_step_info, decode_seqs) ||
                      info->struct_size > sizeof *info))
      return TTFT_EINVAL;
    prefill = info->prefill_tokens;
  }
  if (t_start_ns == TTFT_NOW || t_end_ns == TTFT_NOW) {
    uint64_t now = ttft__now(r);
    if (t_start_ns == TTFT_NOW) t_start_ns = now;
    if (t_end_ns == TTFT_NOW) t_end_ns = now;
  }
  if (TTFT_UNLIKELY(t_end_ns < t_start_ns)) t_end_ns = t_start_ns;
  /* relaxed: the ticket only picks the entry; the entry's seq publishes */
  uint64_t k = atomic_fetch_add_explicit(&r->step_head, 1, memory_order_relaxed);
  ttft__step_ent *e = &r->steps[k & TTFT__STEP_MASK];
  /* relaxed: the link to the latest step without prefill is a hint the
   * reader checks against the entry it names (registry.h) */
  uint64_t np = TTFT__LD(&r->step_np), back = np && np <= k ? k + 1 - np : 0;
  if (back > UINT32_MAX) back = UINT32_MAX;
  if (!prefill) TTFT__ST(&r->step_np, k + 1);
  uint64_t old = TTFT__LD(&e->seq);
  /* an entry of a later lap (a writer that overtook this one) is kept;
   * anything older, complete or abandoned mid-write (a thread that died,
   * a fork child), is taken over. acquire on success: pairs with the
   * previous lap's release of its even seq, so our field stores come
   * after its own in each field's order (else a reader could accept a
   * previous lap's field under our 2k + 2); relaxed on failure. Release
   * fence: the odd seq is visible before any field store below (a
   * reader that sees a new field then sees seq changed on its re-check) */
  if (TTFT_LIKELY(old < 2 * k + 1) &&
      atomic_compare_exchange_strong_explicit(&e->seq, &old, 2 * k + 1, memory_order_acquire,
                                              memory_order_relaxed)) {
    atomic_thread_fence(memory_order_release);
    TTFT__ST(&e->t_start, t_start_ns);
    TTFT__ST(&e->t_end, t_end_ns);
    TTFT__ST(&e->meta, back << 32 | prefill);
    uint64_t odd = 2 * k + 1;
    /* release: the fields above happen-before a reader's acquire of 2k + 2;
     * a CAS, so that a writer that took the entry over meanwhile wins */
    atomic_compare_exchange_strong_explicit(&e->seq, &odd, 2 * k + 2, memory_order_release,
                                            memory_order_relaxed);
  }
  ttft__shard *sh = ttft__shard_for_call(r);
  /* a private shard's plain histogram update is bracketed, so that a
   * hook called from a signal handler in the middle of it records through
   * the shared shard instead (ttft__shard_for_call); no slot is touched */
  if (!sh->shared) call_enter_noslot(r, sh);
  hist_rec(r, sh->shared, &sh->step[prefill ? 1 : 0], t_end_ns - t_start_ns);
  if (!sh->shared) call_leave_noslot(sh);
  return TTFT_OK;
}

/* -------------------------------------------------------------- annotate */
/* Set the prompt band (prompt_tokens 0: as it is) and the prefix band
 * (prefix < 0: as it is) of live sequence s before its first emission. */
static int annotate(ttft_registry *r, ttft_seq s, uint32_t prompt_tokens, int32_t prefix) {
  ttft__shard *sh = ttft__shard_for_call(r);
  const int shared = sh->shared;
  uint32_t e = call_enter(r, sh, shared, s);
  ttft__slot *sl = live_slot(r, shared, s);
  int rc = TTFT_OK;
  if (!sl) {
    stale_seen(sh, shared);
    rc = TTFT_ESTALE;
  } else if (TTFT__LD(&sl->emissions) != 0) {
    rc = TTFT_ERANGE; /* the splits were recorded with the first token */
  } else {
    if (prompt_tokens) {
      TTFT__ST(&sl->band, band_of(r, prompt_tokens));
      /* the length the first-token deadline is judged with, unless the
       * request set its own */
      if (TTFT__LD(&sl->prompt) != TTFT__PROMPT_OWN) TTFT__ST(&sl->prompt, prompt_len(prompt_tokens));
    }
    if (prefix >= 0) TTFT__ST(&sl->prefix, prefix);
  }
  call_leave(r, sh, shared, e);
  return rc;
}

int ttft_annotate(ttft_registry *r, ttft_seq s, uint32_t prompt_tokens, int prefix_hit) {
  if (!r || prefix_hit < -1 || prefix_hit > 1) return TTFT_EINVAL;
  return annotate(r, s, prompt_tokens,
                  prefix_hit < 0 ? -1 : prefix_hit ? TTFT_PREFIX_HIT : TTFT_PREFIX_MISS);
}

int ttft_annotate_cached(ttft_registry *r, ttft_seq s, uint32_t prompt_tokens,
                         uint32_t cached_tokens) {
  if (!r || !prompt_tokens || cached_tokens > prompt_tokens) return TTFT_EINVAL;
  int32_t band = cached_tokens < r->prefix_min                         ? TTFT_PREFIX_MISS
                 : (uint64_t)cached_tokens * 2 < (uint64_t)prompt_tokens ? TTFT_PREFIX_PARTIAL
                                                                         : TTFT_PREFIX_HIT;
  return annotate(r, s, prompt_tokens, band);
}

/* ------------------------------------------------------------- stream_end */
/* Clear the gap counters of an ended sequence here, where they are hot in
 * cache, instead of in the next ttft_begin (possibly on another core).
 * Only words up to the worst gap's can be non-zero; gh_clean records which
 * emission count this covers (see begin_common). */
static void seq_gaps_clear(ttft__slot *sl, uint32_t em) {
  if (em >= 2) {
    uint32_t top = ttft__sg_index(ttft__hist_index(TTFT__LD(&sl->max_gap))) >> 2;
    for (uint32_t w = 0; w <= top; w++)
      if (TTFT__LD(&sl->gh[w])) TTFT__ST(&sl->gh[w], 0);
  }
  TTFT__ST(&sl->gh_clean, em);
}

/* ------------------------------------------------------- slowest lists */
/* What a stream end offers its class's slowest lists. */
typedef struct slow_offer_t {
  uint64_t ttft, max_gap, t_begin, t_end, tokens;
  uint32_t status, ids; /* ids: the stream's ids word (TTFT__IDS_*) */
  /* (1.3) its token deadlines judged and missed, its D, its budgets */
  uint64_t dl, dl_missed, dl_ns, ttft_slo, tpot_slo;
} slow_offer_t;

/* Polls of a list entry another writer holds before an offer passes held
 * entries over (slow_offer): a few microseconds, never a wait for a
 * preempted thread. */
#define TTFT__SLOW_CLAIM_POLLS 4096u

#if defined(__x86_64__) || defined(__i386__)
#define slow_relax() __builtin_ia32_pause()
#else
#define slow_relax() ((void)0)
#endif

/* Offer the ended sequence of slot idx to list `by` of cr with value v
 * (above the list's floor): it replaces the list's smallest entry when v
 * is larger. The entry is taken with a CAS on its sequence counter. Only
 * the shared shard's lists have concurrent writers (several threads, or
 * a signal handler ending a stream inside a stream end: nested calls
 * record there); a writer that finds the entry taken, or loses the CAS,
 * scans again, up to TTFT__SLOW_CLAIM_POLLS times, so the list stays
 * exact while the other writer runs; past that (the holder preempted, or
 * the thread's own interrupted stream end) it takes the smallest entry
 * no writer holds, rather than wait: every value larger than the ones
 * listed stays listed, though the held entry's new value may then stand
 * in place of a larger one (ttft.h, ttft_snapshot_slowest); it is left
 * out only if it loses that entry too. Cold: after the first k ends,
 * only a value that beats the list's floor gets here. */
__attribute__((noinline, cold)) static void slow_offer(ttft_registry *r, ttft__crec *cr, int by,
                                                      uint32_t idx, uint64_t v,
                                                      const slow_offer_t *o) {
  uint32_t k = r->slowest_k;
  _Atomic uint64_t *V = cr->slow_val + (size_t)by * k;
  uint64_t floor;
  /* the claim record of an offer this one interrupted (a signal handler's
   * hook), put back below */
  const ttft__slow_claim outer = ttft__tl_claim;
  for (uint32_t poll = 0;; poll++) {
    /* past the polls, the entries another writer holds are passed over:
     * the offer takes the smallest entry nobody holds, once, instead of
     * being left out (1.2.0 left it out: the largest value of a burst
     * could go missing behind a preempted holder, or behind the thread's
     * own stream end a signal handler interrupted) */
    const int pass_held = poll > TTFT__SLOW_CLAIM_POLLS;
    uint32_t mi = 0;
    uint64_t mv = UINT64_MAX, second = UINT64_MAX; /* the smallest two values */
    uint64_t held = UINT64_MAX;                     /* the smallest held one    */
    for (uint32_t i = 0; i < k; i++) {
      uint64_t x = TTFT__LD(&V[i]);
      if (pass_held && (TTFT__LD(&cr->slow[(size_t)by * k + i].seq) & 1u)) {
        held = x < held ? x : held;
        continue;
      }
      second = x < mv ? mv : (x < second ? x : second);
      mi = x < mv ? i : mi;
      mv = x < mv ? x : mv;
    }
    /* a held entry's value only grows too: the floor stays a lower bound */
    if (held < second) second = held;
    floor = mv < held ? mv : held;
    if (v <= mv) break; /* another writer raised the floor past v (or all are held) */
    ttft__slow_live *e = &cr->slow[(size_t)by * k + mi];
    uint32_t q = TTFT__LD(&e->seq);
    /* acquire on success: pairs with the previous holder's release of q,
     * so the check of V[mi] below sees its value (a relaxed claim, as in
     * 1.2.0, may read the stale mv, take the entry for still ours and
     * overwrite a larger value with v: a lost slowest entry) and our
     * stores follow its stores to the entry. Relaxed on failure: nothing
     * is read through it. The release fence below orders the odd value
     * before the entry's new fields */
    if (!(q & 1u) && atomic_compare_exchange_strong_explicit(&e->seq, &q, q + 1, memory_order_acquire,
                                                             memory_order_relaxed)) {
      /* recorded for our exit handler, should this thread die holding
       * the entry (a thread killed between the claim and this record
       * leaves it held: later offers pass it over after their polls) */
      ttft__tl_claim.e = NULL;
      atomic_signal_fence(memory_order_seq_cst); /* compiler only: a handler sees it whole */
      ttft__tl_claim.reg_id = r->id;
      ttft__tl_claim.val = &V[mi];
      ttft__tl_claim.floor = &cr->slow_floor[by];
      ttft__tl_claim.seq = q + 1;
      atomic_signal_fence(memory_order_seq_cst);
      ttft__tl_claim.e = e;
      /* release fence: a snapshot that reads any field written below also
       * sees the odd counter on its second look (seqlock writer) */
      atomic_thread_fence(memory_order_release);
      /* still the value we chose to replace: no writer took the entry
       * between our scan and our claim */
      int mine = TTFT__LD(&V[mi]) == mv;
      if (mine) {
        uint32_t ids = o->ids, idlen = TTFT__IDS_LEN(ids), tr = ids & TTFT__IDS_TRACE;
        const ttft__reqid *ri = &r->reqid[idx];
        TTFT__ST(&V[mi], v);
        TTFT__ST(&e->value, v);
        TTFT__ST(&e->ttft, o->ttft);
        TTFT__ST(&e->max_gap, o->max_gap);
        TTFT__ST(&e->t_begin, o->t_begin);
        TTFT__ST(&e->t_end, o->t_end);
        TTFT__ST(&e->tokens, o->tokens);
        TTFT__ST(&e->dl, o->dl);
        TTFT__ST(&e->dl_missed, o->dl_missed);
        TTFT__ST(&e->dl_ns, o->dl_ns);
        TTFT__ST(&e->ttft_slo, o->ttft_slo);
        TTFT__ST(&e->tpot_slo, o->tpot_slo);
        TTFT__ST(&e->meta, o->status | TTFT__IDS_CAUSE(ids) << 8 | tr << 16 | idlen << 24);
        if (tr) {
          TTFT__ST(&e->trace[0], TTFT__LD(&ri->trace[0]));
          TTFT__ST(&e->trace[1], TTFT__LD(&ri->trace[1]));
        }
        /* the words that hold the id's bytes (a reader stops at id_len) */
        for (uint32_t w = 0; w < (idlen + 7) / 8; w++) TTFT__ST(&e->id[w], TTFT__LD(&ri->w[w]));
      }
      /* release: the fields above before the even counter a reader checks */
      atomic_store_explicit(&e->seq, q + 2, memory_order_release);
      atomic_signal_fence(memory_order_seq_cst); /* compiler only: released, then forgotten */
      ttft__tl_claim.e = NULL;
      if (mine) {
        floor = v < second ? v : second;
        break;
      }
    }
    /* the entry was held or taken by another writer (the shared shard's
     * lists only): once it is done the smallest may be elsewhere, so scan
     * again, a bounded number of times, then once passing held entries
     * over; the offer is left out only when that last claim is lost too */
    if (pass_held) break;
    slow_relax();
  }
  /* the new floor: the smallest value after our replacement, from values
   * read before it; values only grow, so it is never above the true one */
  TTFT__ST(&cr->slow_floor[by], floor);
  atomic_signal_fence(memory_order_seq_cst); /* compiler only */
  ttft__tl_claim = outer;
}

void ttft__slow_claim_drop(void) {
  ttft__slow_claim *c = &ttft__tl_claim;
  /* still our claim: an odd counter changes only by its holder (or a fork
   * child's repair, after which it is even) */
  if (!c->e || TTFT__LD(&c->e->seq) != c->seq) return;
  TTFT__ST(c->val, 0);
  TTFT__ST(&c->e->value, 0);
  TTFT__ST(c->floor, 0); /* the list has an empty entry */
  /* release: the empty value before the even counter a reader checks */
  atomic_store_explicit(&c->e->seq, c->seq + 1, memory_order_release);
  c->e = NULL;
}

/* Give back, empty, every entry of sh's slowest lists that a writer left
 * claimed (odd counter) and will never release: called where no writer
 * of those lists can still run — a private shard released after its
 * owner died inside a call (registry.c, shard_release: its lists have no
 * other writer), every shard of a fork child (reclaim.c: no other thread
 * exists). The half-written entry's offer is lost (the stream that made
 * it is the one the dead call was ending); value 0 marks the entry empty
 * (snapshots skip it, the next offer fills it first, the list's floor is
 * 0 again). 1.2.0 left it claimed: every later offer that chose it
 * polled ~4096 times and left itself out, and every snapshot yielded
 * ~1000 times over it. Cold: thread death and fork only. */
void ttft__slow_abandoned(ttft_registry *r, ttft__shard *sh) {
  const uint32_t k = r->slowest_k;
  if (!k) return;
  /* acquire: the class records published by class_add */
  const uint32_t nc = atomic_load_explicit(&r->nclasses, memory_order_acquire);
  for (uint32_t c = 0; c < nc; c++) {
    /* acquire: as crec_of */
    ttft__crec *cr = atomic_load_explicit(&sh->cls[c], memory_order_acquire);
    if (!cr || !cr->slow) continue;
    for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++) {
      int emptied = 0;
      for (uint32_t i = 0; i < k; i++) {
        const size_t j = (size_t)by * k + i;
        ttft__slow_live *e = &cr->slow[j];
        const uint32_t q = TTFT__LD(&e->seq);
        if (!(q & 1u)) continue;
        TTFT__ST(&cr->slow_val[j], 0);
        TTFT__ST(&e->value, 0);
        /* release: the empty value before the even counter a reader checks */
        atomic_store_explicit(&e->seq, q + 1, memory_order_release);
        emptied = 1;
      }
      if (emptied) TTFT__ST(&cr->slow_floor[by], 0); /* the list has an empty entry */
    }
  }
}

/* The fluidity verdict of a stream with a token deadline, at its end
 * (SPEC 10.2): a CANCELLED stream first counts the deadlines that passed
 * with no token since its last emission (wait: end - last emission), as
 * the rule counts a gap's, so a reader who left a frozen stream judges
 * it. Judged: COMPLETED, ERROR, and CANCELLED after a miss; fluid:
 * COMPLETED with fluidity >= fluid_min. *dl_out / *missed_out receive
 * the stream's totals (for the slowest lists). */
static void fluid_end(int shared, ttft__crec *cr, ttft__slot *sl, ttft_status status, uint32_t em,
                      uint64_t wait, double fluid_min, uint64_t *dl_out, uint64_t *missed_out) {
  uint64_t d = ttft__slot_dl(sl), missed = TTFT__LD(&sl->dl_missed);
  uint64_t total = em >= 2 ? (uint64_t)(em - 1) + TTFT__LD(&sl->dl_extra) : 0;
  if (status == TTFT_CANCELLED && em) {
    uint64_t slack = ttft__slot_slack(sl, d);
    if (slack <= UINT64_MAX - d && wait > slack + d) {
      uint64_t m = deadlines_missed(wait, slack, d);
      missed += m;
      total += m;
      ctr_add(shared, &cr->ctr[TTFT_COUNTER_TOKEN_DEADLINES], m);
      ctr_add(shared, &cr->ctr[TTFT_COUNTER_TOKEN_DEADLINES_MISSED], m);
    }
  }
  *dl_out = total;
  *missed_out = missed;
  if (status == TTFT_CANCELLED && !missed) return; /* the client left; not judged */
  ctr_add(shared, &cr->ctr[TTFT_COUNTER_FLUID_JUDGED], 1);
  if (status == TTFT_COMPLETED && ttft__fluidity(total, missed) >= fluid_min)
    ctr_add(shared, &cr->ctr[TTFT_COUNTER_FLUID], 1);
}

int ttft_stream_end(ttft_registry *r, ttft_seq s, ttft_status status, uint64_t t_ns) {
  if (!r || (unsigned)status >= TTFT_STATUS_COUNT_) return TTFT_EINVAL;
  uint32_t idx = (uint32_t)s - 1;
  ttft__slot *sl = idx < r->nslots ? &r->slots[idx] : NULL;
  uint64_t live = TTFT__SLOT_STATE(s >> 32, TTFT__SLOT_LIVE);
  /* seq_cst: exactly one of racing enders wins; it acquires the fields the
   * sequence's earlier hooks wrote, and it precedes the reclaimer's
   * barrier and loads (reclaim.c: "the ending CAS") */
  if (!sl || !atomic_compare_exchange_strong_explicit(&sl->state, &live,
                                                      TTFT__SLOT_STATE(s >> 32, TTFT__SLOT_ENDING),
                                                      memory_order_seq_cst, memory_order_relaxed)) {
    ttft__shard *sh = ttft__shard_for_call(r);
    stale_seen(sh, sh->shared);
    return TTFT_ESTALE;
  }
  ttft__shard *sh = ttft__shard_for_call(r);
  /* bracketed as begin is (its plain counter updates) */
  if (!sh->shared) call_enter_noslot(r, sh);
  uint32_t cls = TTFT__LD(&sl->cls);
  ttft__crec *cr = crec_of(sh, cls);
  uint64_t t = event_time(r, sh->shared, cr, t_ns, TTFT__LD(&sl->t_event));
  uint64_t t_begin = TTFT__LD(&sl->t_begin), t_first = TTFT__LD(&sl->t_first), t_last = TTFT__LD(&sl->t_last);
  /* acquire: pairs with token_emitted's release, so every gap counted in
   * em is in gh[] when we clear it below */
  uint32_t em = atomic_load_explicit(&sl->emissions, memory_order_acquire);
  uint64_t n = TTFT__LD(&sl->tokens);
  uint64_t e2e = sub0(t, t_begin);

  static const ttft_counter by_status[TTFT_STATUS_COUNT_] = {
      TTFT_COUNTER_COMPLETED, TTFT_COUNTER_CANCELLED, TTFT_COUNTER_ERRORS};
  ctr_add(sh->shared, &cr->ctr[by_status[status]], 1);
  if (em == 0 && status == TTFT_CANCELLED) {
    ctr_add(sh->shared, &cr->ctr[TTFT_COUNTER_ABANDONED], 1);
    hist_rec(r, sh->shared, &cr->h[TTFT_METRIC_ABANDONED_WAIT], e2e);
  }
  uint64_t tpot = 0;
  if (em && n >= 2) {
    tpot = sub0(t_last, t_first) / (n - 1);
  } else {
    ctr_add(sh->shared, &cr->ctr[TTFT_COUNTER_NO_TPOT], 1);
  }
  if (em) hist_rec(r, sh->shared, &cr->h[TTFT_METRIC_DECODE], sub0(t_last, t_first));
  if (em >= 2) {
    /* no halving has happened while fewer than 32768 gaps were recorded */
    uint64_t gaps = em - 1 < 0x8000u ? em - 1 : 0;
    hist_rec(r, sh->shared, &cr->h[TTFT_METRIC_SEQ_ITL_P95], ttft__seq_gap_quantile(sl, 0.95, gaps));
    hist_rec(r, sh->shared, &cr->h[TTFT_METRIC_SEQ_ITL_MAX], TTFT__LD(&sl->max_gap));
  }
  /* The SLO verdict (docs/metrics.md "SLO"): within = every budget its
   * class sets was met up to t. With no token at all, the TTFT budget is
   * judged on the time waited so far. COMPLETED: judged, good when
   * within; ERROR: judged, bad; CANCELLED: judged (bad) only when a budget
   * was already missed, else the client left before the server failed it
   * and the stream is not judged. */
  const ttft_slo *slo = &r->classes[cls].slo;
  uint64_t ttft = em ? sub0(t_first, t_begin) : e2e;
  /* the request's own budgets, else its class's (with the per-token term
   * for the prompt length known at the first token: annotate is refused
   * after it) */
  uint64_t ttft_b = ttft__slot_ttft_slo(r, sl), tpot_b = TTFT__LD(&sl->tpot_slo);
  int within = (!ttft_b || ttft <= ttft_b) &&
               (!tpot_b || !(em && n >= 2) || tpot <= tpot_b) &&
               (!slo->e2e_ns || e2e <= slo->e2e_ns);
  int good = status == TTFT_COMPLETED && within;
  if (status != TTFT_CANCELLED || !within) ctr_add(sh->shared, &cr->ctr[TTFT_COUNTER_SLO_JUDGED], 1);
  if (good) ctr_add(sh->shared, &cr->ctr[TTFT_COUNTER_SLO_MET], 1);
  uint64_t dl_ns = ttft__slot_dl(sl), dl_n = 0, dl_missed = 0;
  if (dl_ns) fluid_end(sh->shared, cr, sl, status, em, t - t_last, slo->fluid_min, &dl_n, &dl_missed);
  /* the views by terminal status (what client benchmarks count); E2E,
   * TPOT and OUTPUT_TOKENS over every status are their sums (registry.h) */
  ttft__hist *sv = &cr->h[TTFT__LH_STATUS + status * TTFT__STATUS_VIEWS];
  if (em) hist_rec(r, sh->shared, &sv[0], sub0(t_first, t_begin));
  if (em && n >= 2) hist_rec(r, sh->shared, &sv[1], tpot);
  hist_rec(r, sh->shared, &sv[2], e2e);
  hist_rec(r, sh->shared, &sv[3], n);
  if (em && r->slowest_k) {
    uint64_t gap = em >= 2 ? TTFT__LD(&sl->max_gap) : 0;
    int by_ttft = ttft > TTFT__LD(&cr->slow_floor[TTFT_SLOWEST_TTFT]);
    int by_gap = gap > TTFT__LD(&cr->slow_floor[TTFT_SLOWEST_GAP]);
    if (TTFT_UNLIKELY(by_ttft || by_gap)) {
      slow_offer_t o = {ttft,      gap,     t_begin, t,      n,     (uint32_t)status,
                        ttft__ids_of(TTFT__LD(&r->reqid[idx].tag), (uint32_t)(s >> 32)),
                        dl_n,      dl_missed, dl_ns,  ttft_b, tpot_b};
      if (by_ttft) slow_offer(r, cr, TTFT_SLOWEST_TTFT, idx, ttft, &o);
      if (by_gap) slow_offer(r, cr, TTFT_SLOWEST_GAP, idx, gap, &o);
    }
  }
  seq_gaps_clear(sl, em);
  ttft__slot_retire(r, sh, idx);
  if (!sh->shared) call_leave_noslot(sh);
  return TTFT_OK;
}
