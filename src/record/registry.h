/*
 * registry.h — the live state hooks write and snapshots read.
 *
 * Layout (docs/design.md explains why):
 *  - slots[max_inflight]: one per in-flight sequence, on its own cache
 *    lines. Written only by the hooks of that sequence (single writer by
 *    the threading contract), read by snapshots/queries with relaxed loads.
 *  - shards[]: per-thread recording areas (counters + histograms per class
 *    + TTFT splits). A thread owns one exclusively and updates it with
 *    plain relaxed load/store pairs, no lock prefix; threads beyond
 *    max_threads share the last shard and use atomic read-modify-writes.
 *    Snapshots sum the shards.
 *  - slot recycling is deferred by a grace period (reclaim.c) so a
 *    token_emitted that raced a stream_end from another thread can never
 *    write into a slot that already serves a new sequence.
 */
#ifndef TTFT_REGISTRY_H
#define TTFT_REGISTRY_H

#include <stdatomic.h>
#include <time.h>

#include "common/snapshot.h"

#define TTFT__CACHELINE 64
#define TTFT__ALIGNED __attribute__((aligned(TTFT__CACHELINE)))

/* relaxed shorthands: every plain shared access goes through these */
#define TTFT__LD(p) atomic_load_explicit((p), memory_order_relaxed)
#define TTFT__ST(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)

/* ----------------------------------------------------- live histogram
 * The header holds sum, min (bit-inverted, so that zero means "none") and
 * max, one chunk pointer per power of two of the bucket index (128
 * buckets, 1 KiB, attached from the registry's pool the first time a value
 * lands there; pool.c), and one coarse counter per power of two for the
 * observations recorded while the pool was dry. count = the sum of every
 * attached bucket and every coarse counter. */
#define TTFT__CHUNK_BITS TTFT__HIST_SUB_BITS          /* 128 buckets a chunk */
#define TTFT__CHUNK_BUCKETS (1u << TTFT__CHUNK_BITS)
#define TTFT__HIST_CHUNKS (TTFT__HIST_BUCKETS / TTFT__CHUNK_BUCKETS) /* 38 */
_Static_assert(TTFT__HIST_BUCKETS % TTFT__CHUNK_BUCKETS == 0, "chunks tile the buckets");
_Static_assert(TTFT__HIST_CHUNKS == TTFT__HIST_MAX_BITS - TTFT__HIST_SUB_BITS + 1,
               "one chunk per power of two (and one for the exact values below 128)");

typedef struct ttft__chunk {
  _Atomic uint64_t b[TTFT__CHUNK_BUCKETS];
} ttft__chunk;
_Static_assert(sizeof(ttft__chunk) == 1024, "a chunk is 1 KiB");

typedef struct ttft__hist {
  _Atomic uint64_t sum, min, max;
  /* The sum is 128 bits wide: `sum` holds it modulo 2^64 and `half` counts
   * the times it crossed a multiple of 2^63 (ttft__hist_sum_read). */
  _Atomic uint64_t half;
  _Atomic(ttft__chunk *) chunk[TTFT__HIST_CHUNKS];
  _Atomic uint64_t coarse[TTFT__HIST_CHUNKS];
} ttft__hist;

/* ------------------------------------------------------ the wide sum
 * A histogram's sum of observations must not wrap (2^64 ns is 584 years
 * of summed time: a busy fleet's E2E reaches it, and Prometheus reads a
 * wrapped _sum as a counter reset). The hooks add to a 64-bit word `sum`;
 * the carries go to `half`, which counts how often the true sum crossed a
 * multiple of 2^63 (the top bit of `sum` flipped). So in a settled state
 * half's parity equals sum's top bit and the true sum is
 * (half >> 1) * 2^64 + sum.
 *
 * Why half-crossings and not wraps: a reader (snapshot_take) cannot read
 * two words at once, and the writer stores `sum` before `half`. Every add
 * moves `sum` by less than 2^63 (larger values are added in parts), so it
 * flips the top bit at most once, and a writer settles `half` before its
 * next add can flip it again (private shard: program order; shared shard:
 * a CAS on `sum` happens only from a settled state, and a crossing is
 * settled only from a (sum, half) pair that held at one instant, see
 * ttft__hist_sum_add_shared). Hence a reader that sees `half` unchanged
 * around its load of `sum` (release stores, acquire loads) sees it either
 * settled or exactly one crossing behind, and parity tells which: a
 * mismatch means one crossing not yet counted. The state is
 * self-describing: nothing is lost when a writer dies between its two
 * stores (a thread killed inside a hook, a fork child), and the next
 * writer settles it.
 *
 * Hot path cost: an xor and a test on the add the hooks already make;
 * crossings (every 2^63 ns of summed time) take the cold path. */
#define TTFT__SUM_PART (UINT64_C(1) << 62) /* the largest part of one add */

/* What the reader computes: the true sum of a (sum, half) pair, hi:lo. */
static inline uint64_t ttft__sum_hi_of(uint64_t lo, uint64_t half) {
  return (half + ((half ^ (lo >> 63)) & 1u)) >> 1;
}

/* Add v to h's sum on a private shard (this thread is the only writer):
 * the common case inline, crossings and parts in the cold function. */
TTFT_HIDDEN void ttft__hist_sum_add_slow(ttft__hist *h, uint64_t v);
static inline __attribute__((always_inline)) void ttft__hist_sum_add(ttft__hist *h, uint64_t v) {
  uint64_t l = atomic_load_explicit(&h->sum, memory_order_relaxed), n = l + v;
  if (__builtin_expect((int64_t)((l ^ n) | v) < 0, 0)) {
    ttft__hist_sum_add_slow(h, v);
    return;
  }
  /* release: a reader that loads this value sees every earlier store of
   * `half` after it (no crossing is hidden from it) */
  atomic_store_explicit(&h->sum, n, memory_order_release);
}
/* The same on the shared shard (any number of writers; a CAS loop). */
TTFT_HIDDEN void ttft__hist_sum_add_shared(ttft__hist *h, uint64_t v);
/* The reader: h's sum as hi:lo (*hi receives the high word). */
TTFT_HIDDEN uint64_t ttft__hist_sum_read(const ttft__hist *h, uint64_t *hi);

/* The pool of chunks (pool.c): slabs of TTFT__SLAB_CHUNKS chunks; chunk k
 * is slab[k / SLAB][k % SLAB]; chunks [next, limit) are free. */
#define TTFT__SLAB_CHUNKS 256u /* 256 KiB a slab */
typedef struct ttft__pool {
  _Atomic uint64_t next;          /* chunks handed out                     */
  _Atomic uint64_t limit;         /* chunks in published slabs             */
  _Atomic int lock;               /* serialises top-ups (never a hook)     */
  uint32_t nslabs, max_slabs;     /* max_slabs: from the memory limit      */
  ttft__chunk **slab;             /* [max_slabs]                           */
  /* read by every snapshot's top-up while ttft_class_add raises it and
   * other snapshots move it: atomics, relaxed (sizes, no data published) */
  _Atomic uint64_t reserve;       /* the reserve kept free, in chunks      */
  _Atomic uint64_t next_at_refill;/* `next` at the last snapshot top-up    */
  /* chunks promised to the records that may record before the next
   * top-up (pool.c, "sizing"): `next` is kept at least this far from
   * `limit` while it is ahead. Raised by creation and ttft_class_add,
   * at most budget_cap; relaxed, a size */
  _Atomic uint64_t budget;
  uint64_t budget_cap;
} ttft__pool;

/* a lock-free stack of slots: (tag << 32) | (index + 1) */
typedef struct ttft__stack {
  _Atomic uint64_t head;
} ttft__stack;

/* The live histograms of a class record: one per metric, with two
 * differences that keep the per-token path at one histogram update per
 * single-token emission: h[TTFT_METRIC_ITL] holds the gaps before
 * single-token emissions only, and h[TTFT_METRIC_ITL_PER_TOKEN] the
 * per-token values of multi-token emissions only; the gaps before
 * multi-token emissions go to h[TTFT__LH_ITL_MULTI]. snapshot_take adds
 * them up (ITL = ITL + ITL_MULTI; ITL_PER_TOKEN = ITL + ITL_PER_TOKEN),
 * since a one-token emission's per-token value is its gap. Then the
 * per-status views, recorded at stream end (TTFT__LH_STATUS + st *
 * TTFT__STATUS_VIEWS + view, see common/snapshot.h). E2E, TPOT and
 * OUTPUT_TOKENS are recorded at stream end only, so each equals the sum
 * of its three status views: h[] leaves those three empty and
 * snapshot_take adds the views up instead (one histogram update less per
 * stream end, three histograms less per class record). */
enum {
  TTFT__LH_ITL_MULTI = TTFT_METRIC_COUNT_,
  TTFT__LH_STATUS,
  TTFT__LH_COUNT = TTFT__LH_STATUS + TTFT_STATUS_COUNT_ * TTFT__STATUS_VIEWS
};

/* One entry of a live slowest list (ttft_snapshot_slowest), written at
 * stream end under its own sequence counter: seq is odd while a writer
 * fills it (the writer took it with a CAS, so a second writer — another
 * thread of the shared shard, or a signal handler that ends a stream —
 * skips instead of waiting); snapshot_take copies it and keeps the copy
 * when seq was even and unchanged around the copy (a seqlock reader).
 * value 0 = empty. meta = status | cause << 8 | has_trace << 16 |
 * id_len << 24. id[] holds the request id: its first id_len bytes (the
 * words past them are not rewritten, a reader ignores them), trace[] only
 * when has_trace. */
typedef struct ttft__slow_live {
  _Atomic uint32_t seq;
  _Atomic uint32_t meta;
  _Atomic uint64_t value, ttft, max_gap, t_begin, t_end, tokens;
  _Atomic uint64_t dl, dl_missed, dl_ns, ttft_slo, tpot_slo; /* (1.3) ttft__slow's */
  _Atomic uint64_t trace[2];
  _Atomic uint64_t id[(TTFT_MAX_REQUEST_ID + 1) / 8];
} ttft__slow_live;
TTFT_STATIC_ASSERT((TTFT_MAX_REQUEST_ID + 1) % 8 == 0, "request ids fill whole words");

/* per class, per shard */
/* A class record's counter beyond the public ones: the tokens of the
 * emissions after the first of streams with a token deadline. Each of
 * those tokens is one token deadline of the fluidity rule (one per
 * emission, one per other token of it), so the token path counts it once,
 * here instead of in TTFT_COUNTER_TOKENS, and the take adds it to both
 * TTFT_COUNTER_TOKENS and TTFT_COUNTER_TOKEN_DEADLINES (snapshot_take.c):
 * a met deadline costs the token path no store of its own. The deadlines
 * a long gap misses beyond its first go to TOKEN_DEADLINES directly. */
#define TTFT__CTR_TOKENS_DL TTFT_COUNTER_COUNT_
#define TTFT__CTR_COUNT (TTFT_COUNTER_COUNT_ + 1)

typedef struct ttft__crec {
  _Atomic uint64_t ctr[TTFT__CTR_COUNT];
  /* stalls and their summed gaps (ns) by cause: the rare stall path */
  _Atomic uint64_t cause_n[TTFT_STALL_CAUSE_COUNT], cause_ns[TTFT_STALL_CAUSE_COUNT];
  ttft__hist h[TTFT__LH_COUNT];
  /* the slowest lists: slow[by * k .. by * k + k - 1] (k = the registry's
   * slowest_k; NULL when 0), and per list a lower bound of its smallest
   * value (0 while the list has an empty entry): a stream end whose value
   * is not above it touches nothing else */
  _Atomic uint64_t slow_floor[TTFT_SLOWEST_COUNT_];
  ttft__slow_live *slow;
  /* the entries' values side by side, slow_val[by * k + i] =
   * slow[by * k + i].value, written by the entry's writer: an offer scans
   * k values in one or two cache lines, not k entries of 176 bytes */
  _Atomic uint64_t *slow_val;
} ttft__crec;

typedef struct ttft__shard {
  /* private shard: the owner's hazard word (reclaim.c): 0 outside any
   * call; TTFT__HZ_IN | (index + 1) while a call may write that slot;
   * TTFT__HZ_IN alone inside a call that writes no slot of another
   * sequence (begin, stream_end, engine_step). Its own cache line: the
   * reclaimer reads it, the owner writes it twice a call. */
  TTFT__ALIGNED _Atomic uint64_t hz;
  TTFT__ALIGNED _Atomic int owned;   /* 1 while a thread holds it exclusively */
  /* F4 (reclaim.c): 1 once the owner has seen fence_mode 2 and fences
   * every call; reset when the shard changes hands */
  _Atomic int fenced;
  /* the owner's kernel thread id and a count of acquisitions (reclaim.c,
   * F4: what /proc says of the owner): written by the acquiring thread */
  _Atomic int32_t owner_tid;
  _Atomic uint32_t owner_gen;
  /* slots this shard's thread ended, back from their grace period: its
   * next begins take them (cache-hot); other threads may take them too */
  TTFT__ALIGNED ttft__stack free_list;
  _Atomic int used;                  /* ever written: snapshots may skip it   */
  uint32_t id;
  int shared;                        /* the overflow shard: atomic RMW mode   */
  _Atomic(ttft__crec *) *cls;        /* [max_classes], published by class_add */
  ttft__hist split_cache[TTFT_PREFIX_BAND_COUNT_];   /* TTFT by prefix band    */
  ttft__hist split_band[TTFT_MAX_BANDS];
  ttft__hist split_prefill[TTFT_PREFIX_BAND_COUNT_]; /* PREFILL by prefix band */
  ttft__hist step[2];                /* engine-step durations: [prefill?]  */
} ttft__shard;

/* ------------------------------------------------------------- slots */
enum { TTFT__SLOT_FREE = 0, TTFT__SLOT_LIVE = 1, TTFT__SLOT_ENDING = 2 };
/* A private shard's hazard word (reclaim.c): bit 63 set while its owner
 * is inside a call; bits 0..31 the index + 1 of the slot the call may
 * write (0: none — among them every call whose handle was already stale). */
#define TTFT__HZ_IN (UINT64_C(1) << 63)
#define TTFT__SLOT_STATE(gen, ph) ((((uint64_t)(gen)) << 2) | (uint64_t)(ph))
#define TTFT__SLOT_GEN(st) ((uint32_t)((st) >> 2))
#define TTFT__SLOT_PHASE(st) ((unsigned)((st)&3u))
/* generation = 24-bit count << 8 | the registry's tag (registry.c); the
 * next one counts up and keeps the tag, so it is never 0 */
static inline uint32_t ttft__gen_next(uint32_t gen) { return gen + (1u << 8); }

/* per-sequence gap histogram: the aggregate bucket index i (128 per
 * power of two) shifted right by 3 gives 16 buckets per power of two;
 * j = clamp((i >> 3) - 64, 0, 416) keeps gaps from 1.09 us (j = 0 holds
 * everything below) to 73 s (j = 416 everything above). Four 16-bit
 * counters are packed per 64-bit word, so that a slot can be cleared with
 * 105 atomic stores; they are halved every 32768 emissions so none can
 * overflow. */
#define TTFT__SG_OFFSET 64
#define TTFT__SG_BUCKETS 417
#define TTFT__SG_WORDS ((TTFT__SG_BUCKETS + 3) / 4)
static inline uint32_t ttft__sg_index(uint32_t hist_index) {
  uint32_t j = hist_index >> 3;
  j = j < TTFT__SG_OFFSET ? 0 : j - TTFT__SG_OFFSET;
  return j < TTFT__SG_BUCKETS - 1 ? j : TTFT__SG_BUCKETS - 1;
}
static inline uint64_t ttft__sg_count(const _Atomic uint64_t *gh, uint32_t j) {
  return (atomic_load_explicit(&gh[j >> 2], memory_order_relaxed) >> (16 * (j & 3))) & 0xFFFFu;
}

enum {
  SF_SCHED = 1u,      /* SCHEDULED mark seen              */
  SF_STALLED = 2u,    /* counted in STALLED_SEQS already  */
  SF_PREEMPTED = 4u,  /* a PREEMPTED mark was seen; bits SF_PEM_SHIFT.. hold
                         the emission count then (mod 2^26): it was since the
                         last emission iff they equal the current count    */
  SF_CAUSE_SHIFT = 3, /* bits 3..5: the cause of the latest stall          */
  SF_PEM_SHIFT = 6,
};
#define SF_CAUSE_MASK (7u << SF_CAUSE_SHIFT)
#define SF_PEM_MASK 0x3FFFFFFu /* 26 bits */
TTFT_STATIC_ASSERT(TTFT_STALL_CAUSE_COUNT <= 8, "a cause fits in 3 flag bits");

typedef struct ttft__slot {
  TTFT__ALIGNED _Atomic uint64_t state;  /* gen << 2 | phase               */
  _Atomic uint64_t t_begin, t_sched, t_first, t_last; /* t_last: last emission */
  _Atomic uint64_t t_event;       /* last event of any kind (clamping)    */
  _Atomic uint64_t tokens;
  _Atomic uint64_t max_gap;
  _Atomic uint64_t stall_ns;      /* class stall budget, cached at begin  */
  /* the fluidity rule (docs/metrics.md "Fluidity"), on the token path
   * beside stall_ns (ttft__slot_dl, ttft__slot_slack). dl: D, 0 = no
   * token deadlines; with TTFT__DL_SLACK set, dl_anchor is the slack
   * carried forward. Otherwise the slack is kept as the next token's
   * deadline, which a met deadline moves by D per token: dl_anchor is
   * that deadline minus D per token the stream has (modulo 2^64), so the
   * next emission's deadline is dl_anchor + tokens * D and its slack that
   * minus (t_last + D). The common case (a met deadline, one token) thus
   * stores nothing of its own: tokens moves it. The general path
   * re-anchors on every emission it takes (at most 32767 emissions of one
   * token apart: the counter halving), and keeps the slack itself when
   * the deadline could pass 2^63 within those (D above 2^47 ns, a clock
   * or slack past 2^61 ns), so the modular sum is the exact deadline.
   * The deadlines judged are (emissions - 1) + dl_extra: one per
   * emission after the first in the common case, the rest (several
   * missed in one gap, the other tokens of a multi-token emission) in
   * dl_extra */
  _Atomic uint64_t dl, dl_anchor;
  _Atomic uint32_t emissions;
  _Atomic uint32_t gh_clean;      /* emissions when gh[] was last cleared  */
  _Atomic uint32_t flags;
  _Atomic uint32_t stalls;
  _Atomic uint32_t preemptions;
  _Atomic uint32_t cls;           /* class id                              */
  _Atomic int32_t band;           /* prompt band, -1 unknown               */
  _Atomic int32_t prefix;         /* ttft_prefix_band, -1 unknown          */
  _Atomic uint32_t next;          /* free list link (index + 1)            */
  /* shared-shard calls inside on this slot (reclaim.c): a call counts
   * itself here before it checks the state and leaves with a decrement */
  _Atomic uint32_t refs;
  /* 0 while live, free or claimed; once the ending stream_end is done
   * with the slot, the reclaim generation it read after its ending CAS
   * (reclaim.c): a round whose generation is at least this may free it */
  _Atomic uint64_t rstamp;
  _Atomic uint64_t t_preempt;     /* the first PREEMPTED mark since the last
                                     emission (valid when flags say so)   */
  /* the request's budgets, resolved at begin (its own, else its class's):
   * the first-token deadline's fixed part and the TPOT budget; see
   * ttft__slot_ttft_slo for the per-token part */
  _Atomic uint64_t ttft_slo, tpot_slo;
  _Atomic uint64_t dl_missed, dl_extra; /* token deadlines missed; extra  */
  _Atomic uint32_t prompt;        /* prompt tokens (0 unknown), or
                                     TTFT__PROMPT_OWN: the request set its
                                     own first-token deadline             */
  _Atomic uint64_t gh[TTFT__SG_WORDS];
} ttft__slot;
#define TTFT__PROMPT_OWN UINT32_MAX

/* A slot's ids word (ttft__reqid.tag's low half): bit 0 a trace id was
 * given; bits 8..15 the request id's length; bits 16..23 the
 * ttft_stall_cause of the longest gap when that gap was a stall
 * (TTFT_STALL_UNKNOWN until a cause is recorded) */
#define TTFT__IDS_TRACE 1u
#define TTFT__IDS_LEN(ids) (((ids) >> 8) & 0xFFu)
#define TTFT__IDS_CAUSE_SHIFT 16
#define TTFT__IDS_CAUSE_MASK (0xFFu << TTFT__IDS_CAUSE_SHIFT)
#define TTFT__IDS_CAUSE(ids) (((ids) >> TTFT__IDS_CAUSE_SHIFT) & 0xFFu)

/* A slot's ids, beside the slot (r->reqid[index]; allocated when
 * slowest_k > 0), so the slot keeps its 1 KiB and a begin without ids
 * writes nothing here: tag = generation << 32 | ids word, and the word
 * belongs to the slot's current sequence only while the generation is its
 * own (anything else reads as 0: no ids, cause unknown). Written by a
 * begin that carries ids and by the stall path; read at stream end when
 * the stream enters a slowest list. A stale tag matches again only after
 * 2^24 reuses of the slot without ids, and then shows an old id. */
typedef struct ttft__reqid {
  _Atomic uint64_t tag;
  _Atomic uint64_t trace[2];      /* the W3C trace id, big-endian halves  */
  _Atomic uint64_t w[(TTFT_MAX_REQUEST_ID + 1) / 8]; /* the request id, NUL-padded */
} ttft__reqid;

/* the ids word of generation gen in t (0 when t is another's) */
static inline uint32_t ttft__ids_of(uint64_t t, uint32_t gen) {
  return (uint32_t)(t >> 32) == gen ? (uint32_t)t : 0u;
}

/* The facts the layout above relies on, checked by the compiler. */
TTFT_STATIC_ASSERT(TTFT__HIST_BUCKETS == 4864, "38 powers of two of 128 buckets (docs/design.md)");
TTFT_STATIC_ASSERT(((TTFT__HIST_BUCKETS - 1) >> 3) >= TTFT__SG_OFFSET + TTFT__SG_BUCKETS - 1,
                   "every per-sequence gap bucket maps from an aggregate bucket");
TTFT_STATIC_ASSERT(TTFT__SG_WORDS * 4 >= TTFT__SG_BUCKETS, "four 16-bit gap counters a word");
TTFT_STATIC_ASSERT(_Alignof(ttft__slot) == TTFT__CACHELINE && sizeof(ttft__slot) % TTFT__CACHELINE == 0,
                   "a slot starts on its own cache line and ends on one");
TTFT_STATIC_ASSERT(sizeof(ttft__slot) <= 1024, "at most 1 KiB a slot (SPEC: <= 2 KiB per in-flight slot)");
TTFT_STATIC_ASSERT(_Alignof(ttft__shard) == TTFT__CACHELINE, "shards do not share cache lines");
TTFT_STATIC_ASSERT(TTFT__LH_COUNT == TTFT_METRIC_COUNT_ + 1 + TTFT_STATUS_COUNT_ * TTFT__STATUS_VIEWS,
                   "the live histograms of a class record (see the enum above)");
TTFT_STATIC_ASSERT(TTFT_STATUS_COUNT_ == 3 && TTFT_PHASE_COUNT_ == 3, "arrays sized by these enums");

/* ------------------------------------------------------- engine steps
 * The last TTFT_STEP_RING engine steps (ttft_engine_step), read by the
 * stall path to find a stall's cause (step_ring.c). Any thread may
 * record: a writer takes ticket k = step_head++ and fills entry k % RING
 * under a per-entry sequence number (seq = 2k + 1 while it writes,
 * 2k + 2 when done; 0 never written). A reader that wants step k accepts
 * the entry only when seq reads 2k + 2 before and after copying it, so a
 * torn or overwritten entry is skipped, never misread (except when a
 * writer is delayed for a whole lap of the ring inside its four stores:
 * docs/metrics.md).
 *
 * Each entry also links back to the latest step without prefill before
 * it (step_np when its writer took its ticket), so that the stall path
 * finds the steps without prefill before a gap in one read each however
 * many prefill steps lie between (chunked prefill: all of them). With one
 * engine loop (the rule's premise) the link is exact; with several it may
 * skip a step, which changes one stall's fallback u, nothing else. */
#define TTFT__STEP_MASK (TTFT_STEP_RING - 1u)
TTFT_STATIC_ASSERT((TTFT_STEP_RING & (TTFT_STEP_RING - 1)) == 0, "the ring is a power of two");
typedef struct ttft__step_ent {
  _Atomic uint64_t seq;
  _Atomic uint64_t t_start, t_end;
  _Atomic uint64_t meta;  /* prompt tokens in the step (low 32 bits), and
                             how many steps back the latest one without
                             prefill is (high 32 bits; 0 none, saturated) */
} ttft__step_ent;
#define TTFT__STEP_PREFILL(meta) ((uint32_t)(meta))
#define TTFT__STEP_NP_BACK(meta) ((uint32_t)((meta) >> 32))

/* What the steps that overlap a gap (a, b] say, for its cause (hooks.c,
 * stall_cause; the rule is in docs/metrics.md). Read newest first, as one
 * engine loop records them (ending in time order, starting in order):
 * covered is their union clipped to the gap, each step adding what lies
 * below the start of the newer ones; with more steps in the gap than the
 * ring holds, the part of the gap before the oldest is counted as covered
 * too. prod and earlier split covered by the step that produced the token
 * (the newest that ended inside the gap: one engine loop reports a step
 * before the tokens it produced) and the steps that ended before it.
 * pre_len: the part inside the gap of each prefill step, newest
 * first, the first TTFT__GAP_PREFILL of them. before: the durations of
 * the latest TTFT__GAP_BEFORE steps without prefill that ended at or
 * before a, newest first (only when asked for). */
#define TTFT__GAP_BEFORE 16
#define TTFT__GAP_PREFILL 64
typedef struct ttft__gap_steps {
  int ended_inside;                 /* a step ended inside (a, b]        */
  uint32_t npre, nbefore;
  uint64_t covered;
  uint64_t prod;                    /* the part inside the gap of the step
                                       that produced the token at b: the
                                       newest that ended inside (a, b]    */
  uint64_t earlier;                 /* what the steps that ended inside the
                                       gap before that one add to covered
                                       (with the part of the gap before
                                       the ring's oldest step, if any)    */
  uint64_t pre_len[TTFT__GAP_PREFILL];
  uint64_t before[TTFT__GAP_BEFORE];
  uint32_t reads;                   /* ring entries read (tests)         */
  uint32_t torn;                    /* ... of them torn or overwritten   */
} ttft__gap_steps;

/* step_ring.c: fills *g for the gap (a, b] (a < b) from r's ring, reading
 * O(log TTFT_STEP_RING + the steps that overlap the gap + TTFT__GAP_BEFORE)
 * entries (plus at most 64 found torn or overwritten); the before list only when
 * want_before. Lock-free, allocation-free, safe against concurrent
 * writers. */
TTFT_HIDDEN void ttft__gap_steps_read(const ttft_registry *r, uint64_t a, uint64_t b, int want_before,
                                      ttft__gap_steps *g);

/* ------------------------------------------------------------- classes */
typedef struct ttft__class {
  char name[TTFT__NAME_MAX];
  ttft_slo slo;                   /* stall_threshold_ns resolved          */
} ttft__class;


struct ttft_registry {
  ttft_allocator alloc;
  void *base;                     /* the allocation (the struct is 64-aligned) */
  uint64_t id;                    /* process-unique, never reused          */
  /* 0: membarrier; 1: private calls fence (no membarrier when the
   * registry was made); 2: they fence since membarrier failed at run time
   * (reclaim.c, F4; stored once, by the reclaimer). Read relaxed by every
   * private call. */
  _Atomic int fence_mode;
  uint32_t gen_tag;               /* low 8 bits of every generation       */
  struct ttft_registry *live_next, *live_prev; /* registry.c's live list   */
  uint32_t nslots;
  ttft__slot *slots;
  ttft__reqid *reqid;             /* [nslots] when slowest_k > 0, else NULL */
  uint32_t slowest_k;             /* entries per slowest list (config)     */
  uint32_t nshards;               /* max_threads exclusive + 1 shared      */
  ttft__shard *shards;
  uint32_t max_classes;
  _Atomic uint32_t nclasses;      /* published with release by class_add   */
  ttft__class *classes;
  ttft_clock clock;
  uint64_t t_created;
  uint64_t stall_ns;
  /* a clock reading + TTFT_CLOCK_AHEAD_NS: a timestamp up to it is not a
   * wall-clock time, whatever the clock reads now (hooks.c, clock_ahead).
   * Raised (relaxed: any value stored is a valid bound) only by a call
   * that sees a timestamp past it, so a begin checks one load */
  _Atomic uint64_t horizon;
  /* a CLOCK_REALTIME reading - TTFT_CLOCK_AHEAD_NS (0 before the first):
   * a timestamp below it is no wall-clock time either (a synthetic
   * timeline run ahead of the clock), without reading the clocks again.
   * Raised like horizon (relaxed). */
  _Atomic uint64_t wall_floor;
  uint32_t n_band_edges;
  uint32_t band_edges[TTFT_MAX_BANDS - 1];
  uint32_t prefix_min;            /* config.prefix_hit_min_tokens          */
  TTFT__ALIGNED ttft__stack free_list;
  /* the reclaim generation (reclaim.c): every round takes one with a
   * seq_cst increment; ended slots are stamped with it */
  TTFT__ALIGNED _Atomic uint64_t rgen;
  _Atomic uint32_t rounds;        /* reclaim rounds running now            */
  /* white-box figures of the reclaimer (tests, bench; relaxed): membarrier
   * system calls made, rounds run, process-wide barriers made another way
   * (F4), and the most polls one begin at capacity made */
  _Atomic uint64_t dbg_membarriers;
  _Atomic uint64_t dbg_rounds;
  _Atomic uint64_t dbg_fallback_barriers;
  _Atomic uint32_t dbg_polls_max;
  _Atomic int class_lock;         /* serialises class_add (setup path)     */
  _Atomic size_t memory;          /* bytes allocated (ttft__memory_add)     */
  TTFT__ALIGNED ttft__pool pool;  /* chunks for the live histograms       */
  TTFT__ALIGNED _Atomic uint64_t step_head; /* engine steps ever recorded  */
  _Atomic uint64_t step_np;       /* 1 + the latest step taken without
                                     prefill, 0 none (relaxed: a hint the
                                     ring's links copy, see above)        */
  ttft__step_ent *steps;          /* [TTFT_STEP_RING]                      */
  struct ttft_snapshot meta;      /* labels and export config; no classes  */
  struct ttft__pub *pub;          /* the publisher (shared_dir), else NULL;
                                     record/publish.c. No hook reads it    */
};

/* registry.c: the calling thread's shard of r. The thread-local cache is
 * initial-exec TLS (a fixed offset from the thread pointer; no
 * __tls_get_addr call on the hot path even inside a shared library). */
#define TTFT__TLS_WAYS 8
typedef struct ttft__tls_ent {
  uint64_t reg_id;
  ttft__shard *sh;
} ttft__tls_ent;
extern _Thread_local ttft__tls_ent ttft__tl_cache[TTFT__TLS_WAYS]
    __attribute__((tls_model("initial-exec"), visibility("hidden")));
TTFT_HIDDEN ttft__shard *ttft__shard_get_slow(ttft_registry *r);
static inline ttft__shard *ttft__shard_get(ttft_registry *r) {
  if (TTFT_LIKELY(ttft__tl_cache[0].reg_id == r->id)) return ttft__tl_cache[0].sh;
  return ttft__shard_get_slow(r);
}
/* The shard a hook records through: the thread's own, or the shared one
 * when the thread's own private shard is inside a call already — a hook
 * called from a signal handler that interrupted a hook of this thread, or
 * a call left by siglongjmp (reclaim.c, "fault model"). The shared shard
 * takes atomic read-modify-writes, so the nested call's updates and the
 * interrupted call's plain ones are both kept, and the interrupted call's
 * hazard stays published until it leaves. (The shared shard's word always
 * says inside, so its own threads come here too and stay on it.) */
static inline ttft__shard *ttft__shard_for_call(ttft_registry *r) {
  ttft__shard *sh = ttft__shard_get(r);
  /* relaxed: only this thread (and its signal handlers) store it */
  if (__builtin_expect((atomic_load_explicit(&sh->hz, memory_order_relaxed) & TTFT__HZ_IN) != 0, 0)) {
    sh = &r->shards[r->nshards - 1];
    /* snapshots read it; stored once (the shared shard's threads come here
     * on every call) */
    if (!atomic_load_explicit(&sh->used, memory_order_relaxed))
      atomic_store_explicit(&sh->used, 1, memory_order_relaxed);
  }
  return sh;
}

/* Shared-shard calls this thread has open on a slot (between call_enter
 * and call_leave, hooks.c): a stack, nested calls on top. A thread that
 * dies inside one leaves the slot's reference count raised; its exit
 * handler (registry.c) gives back what is still open here. Plain TLS:
 * only this thread, and its signal handlers (LIFO), touch it. */
#define TTFT__OPEN_MAX 4
typedef struct ttft__open_calls {
  uint32_t n; /* open calls; only the first TTFT__OPEN_MAX are recorded */
  struct {
    uint64_t reg_id;
    _Atomic uint32_t *refs; /* the slot's count this call raised      */
  } c[TTFT__OPEN_MAX];
} ttft__open_calls;
extern _Thread_local ttft__open_calls ttft__tl_open
    __attribute__((tls_model("initial-exec"), visibility("hidden")));
/* The slowest-list entry this thread holds claimed (hooks.c, slow_offer,
 * between its claim and its release), for its exit handler: a thread
 * that dies holding one gives it back empty (registry.c), as it balances
 * its open shared-shard calls. e == NULL: none. A hook nested in a signal
 * handler saves the interrupted offer's record and puts it back. Plain
 * TLS, as ttft__tl_open. */
typedef struct ttft__slow_claim {
  uint64_t reg_id;
  ttft__slow_live *e;
  _Atomic uint64_t *val;   /* the entry's slow_val word                */
  _Atomic uint64_t *floor; /* its list's slow_floor                    */
  uint32_t seq;            /* the odd counter of our claim             */
} ttft__slow_claim;
extern _Thread_local ttft__slow_claim ttft__tl_claim
    __attribute__((tls_model("initial-exec"), visibility("hidden")));
/* A non-zero value unique to the calling thread while it lives (the
 * reclaimer's try-lock holds it). */
static inline uintptr_t ttft__thread_token(void) { return (uintptr_t)&ttft__tl_open; }
/* In-flight sequences, and those of them stalled at now, in one pass. */
TTFT_HIDDEN void ttft__scan_slots(const ttft_registry *r, uint64_t now, uint64_t *inflight,
                                  uint64_t *stalled);
TTFT_HIDDEN uint64_t ttft__seq_gap_quantile(const ttft__slot *sl, double q, uint64_t gaps);
/* registry.c: a zeroed, cache-line aligned, resident block (its pages are
 * touched here, so no hook ever takes a page fault on it), counted in
 * ttft_registry_memory; NULL when memory is short. */
TTFT_HIDDEN void *ttft__block_new(ttft_registry *r, size_t n);
TTFT_HIDDEN void ttft__block_free(ttft_registry *r, void *p, size_t n);
static inline void ttft__memory_add(ttft_registry *r, size_t n) {
  /* relaxed: a statistic; allocating paths only */
  atomic_fetch_add_explicit(&r->memory, n, memory_order_relaxed);
}
/* pool.c */
TTFT_HIDDEN int ttft__pool_init(ttft_registry *r, uint64_t memory_limit);
TTFT_HIDDEN void ttft__pool_free(ttft_registry *r);
TTFT_HIDDEN int ttft__pool_reserve(ttft_registry *r, uint64_t chunks);
TTFT_HIDDEN void ttft__pool_refill(ttft_registry *r);
/* Promise `chunks` more to records that may start recording (creation:
 * every shard's splits and class 0; ttft_class_add: the new class on
 * every shard; the budget stops at budget_cap) and add slabs until they
 * are free, and at least `more` chunks more than now are, or the memory
 * limit is reached. TTFT_OK, or TTFT_ENOMEM when a slab could not be
 * allocated (then nothing changed). Not a hook path. */
TTFT_HIDDEN int ttft__pool_promise(ttft_registry *r, uint64_t chunks, uint64_t more);
/* What a record attaches under a realistic workload (pool.c, "sizing") */
#define TTFT__POOL_RECORD_CHUNKS 160u /* one (shard, class) record     */
#define TTFT__POOL_SPLIT_CHUNKS 96u   /* one shard's TTFT splits, steps */
/* A chunk for bucket range c of h from the pool (NULL: the pool is dry);
 * the caller records into it. Cold: once per chunk ever attached. */
TTFT_HIDDEN ttft__chunk *ttft__chunk_attach(ttft_registry *r, ttft__hist *h, uint32_t c,
                                            int shared);
/* reclaim.c */
/* Decide, once per process, between membarrier and fences; returns 1 for
 * membarrier. Called by ttft_registry_new before the registry exists. */
TTFT_HIDDEN int ttft__reclaim_init(void);
TTFT_HIDDEN void ttft__reclaim_atfork_child(void);
TTFT_HIDDEN void ttft__reclaim_fork_child(ttft_registry *r, ttft__shard *mine);
/* The calling thread has just acquired private shard sh: record its
 * thread id (F4: /proc tells whether it sleeps; one gettid system call;
 * cold path) and whether it fences already (fm: the fence_mode it read). */
TTFT_HIDDEN void ttft__reclaim_owner_set(ttft__shard *sh, int fm);
/* F4: a private call found fence_mode 2 and fences from now on; tell the
 * reclaimer (cold: once per owner) */
TTFT_HIDDEN void ttft__reclaim_fence_ack(ttft__shard *sh);
TTFT_HIDDEN void ttft__slot_retire(ttft_registry *r, ttft__shard *sh, uint32_t idx);
TTFT_HIDDEN uint32_t ttft__slot_acquire(ttft_registry *r, ttft__shard *self); /* index + 1, 0 = none */
/* A begin that finds every slot taken, after its own reclaim rounds,
 * polls the rounds other threads are running at most this often, then
 * refuses: it never waits for time to pass (reclaim.c) */
#define TTFT__EXHAUSTED_POLLS 64u
TTFT_HIDDEN void ttft__stack_push(ttft_registry *r, ttft__stack *st, uint32_t idx);
/* hooks.c: empty the slowest-list entries a dead writer left claimed on
 * sh (no writer of sh's lists may be running) */
TTFT_HIDDEN void ttft__slow_abandoned(ttft_registry *r, ttft__shard *sh);
/* hooks.c: the calling thread is exiting: give back, empty, the entry
 * its claim record names if the claim still stands (registry alive) */
TTFT_HIDDEN void ttft__slow_claim_drop(void);
/* clock.c */
TTFT_HIDDEN uint64_t ttft__clock_read(ttft_clock c);
TTFT_HIDDEN int ttft__counter_usable(void); /* calibrates once, then refines */
TTFT_HIDDEN ttft_clock ttft__clock_fastest(void); /* MONOTONIC or TSC, measured once */
TTFT_HIDDEN int ttft__counter_refine_now(void);   /* white-box: a re-anchor now */
TTFT_HIDDEN void ttft__clock_fork_child(void);

/* The stall budget of slot sl's sequence. The slot keeps it capped at
 * TTFT_CLOCK_AHEAD_NS, so that any gap beyond a day leaves the token fast
 * path (hooks.c, event_time); a capped one is read from the class (fixed
 * once class_add published it). */
static inline uint64_t ttft__slot_stall_ns(const ttft_registry *r, const ttft__slot *sl) {
  uint64_t ns = TTFT__LD(&sl->stall_ns);
  if (TTFT_LIKELY(ns < TTFT_CLOCK_AHEAD_NS)) return ns;
  return r->classes[TTFT__LD(&sl->cls)].slo.stall_threshold_ns;
}

/* The token-deadline state of a slot (ttft__slot dl): the bit that says
 * dl_anchor holds the slack, and the bounds under which the general path
 * keeps an anchor instead (within 32767 tokens the deadline stays below
 * 2^62 + 2^61 + 2^47 + 2^62 < 2^64). */
#define TTFT__DL_SLACK (UINT64_C(1) << 63)
#define TTFT__DL_FAST_MAX (UINT64_C(1) << 47)
#define TTFT__DL_ANCHOR_MAX (UINT64_C(1) << 61)

/* Slot sl's token deadline D (<= 2^62), 0 = none. */
static inline uint64_t ttft__slot_dl(const ttft__slot *sl) {
  return TTFT__LD(&sl->dl) & ~TTFT__DL_SLACK;
}

/* The slack of slot sl's next emission (its stream has deadline d > 0 and
 * an emission): what the fluidity rule carries forward from its last
 * emission. Read by the slot's single writer, or after the slot ended. */
static inline uint64_t ttft__slot_slack(const ttft__slot *sl, uint64_t d) {
  if (TTFT__LD(&sl->dl) & TTFT__DL_SLACK) return TTFT__LD(&sl->dl_anchor);
  uint64_t due = TTFT__LD(&sl->dl_anchor) + TTFT__LD(&sl->tokens) * d; /* modulo 2^64 */
  return due - TTFT__LD(&sl->t_last) - d;
}

/* The fluidity rule's state after an emission at t of a stream with
 * deadline d > 0, with `slack` carried forward and `tokens` tokens then:
 * the anchor (the next token's deadline, t + slack + d, less d per
 * token) when the bounds allow, else the slack itself. */
static inline void ttft__slot_slack_set(ttft__slot *sl, uint64_t d, uint64_t t, uint64_t slack,
                                        uint64_t tokens) {
  if (d < TTFT__DL_FAST_MAX && t < TTFT__DL_ANCHOR_MAX && slack < TTFT__DL_ANCHOR_MAX) {
    TTFT__ST(&sl->dl, d);
    TTFT__ST(&sl->dl_anchor, t + slack + d - tokens * d); /* modulo 2^64 */
  } else {
    TTFT__ST(&sl->dl, d | TTFT__DL_SLACK);
    TTFT__ST(&sl->dl_anchor, slack);
  }
}

/* The first-token deadline of slot sl's sequence as known now: its own
 * target, else its class's ttft_ns plus the per-token term for the prompt
 * length known (docs/metrics.md "Length-aware"); 0 = none. Saturates. */
static inline uint64_t ttft__slot_ttft_slo(const ttft_registry *r, const ttft__slot *sl) {
  uint64_t base = TTFT__LD(&sl->ttft_slo);
  uint32_t p = TTFT__LD(&sl->prompt);
  if (p == TTFT__PROMPT_OWN || !p) return base;
  uint64_t per = r->classes[TTFT__LD(&sl->cls)].slo.ttft_ns_per_prompt_token, add;
  if (__builtin_mul_overflow(per, (uint64_t)p, &add) || add > UINT64_MAX - base) return UINT64_MAX;
  return base + add;
}

/* The fluidity of a stream with `total` deadlines, `missed` of them missed */
static inline double ttft__fluidity(uint64_t total, uint64_t missed) {
  return total ? 1.0 - (double)missed / (double)total : 1.0;
}

/* CLOCK_MONOTONIC in ns, inlined into the hooks (ttft_now_ns is exported,
 * so calling it from inside the library would go through the PLT) */
static inline uint64_t ttft__mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ttft__now(const ttft_registry *r) {
  if (TTFT_LIKELY(r->clock == TTFT_CLOCK_MONOTONIC)) return ttft__mono_ns();
  return ttft__clock_read(r->clock);
}

#endif
