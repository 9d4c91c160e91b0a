/*
 * fuzz_api.c — the whole API driven by a program read from the fuzz input,
 * checked step by step against a shadow model.
 *
 * Input: 4 config bytes (max_inflight 1..8; max_threads 0..1 — 0 puts every
 * call through the shared atomic shard — with, in the same byte, three
 * classic bounds per metric or (1 in 16) the default grids, idle classes
 * exported or not, summaries, the native schema; max_classes 1..3; stall
 * budget), a small registry (the least bucket memory, so the pool runs dry
 * and coarse binning is exercised too), then operations, one opcode byte
 * each followed by its operands:
 *   begin / begin_ex (class id incl. invalid ones, prompt tokens, prefix),
 *   mark (any phase value), token_emitted (any n, incl. 0 and huge),
 *   step_emitted (up to 8 handles, repeats and dead ones, n each or NULL),
 *   annotate (prompt tokens, prefix incl. invalid, before and after the
 *   first token), stream_end (any status value), class_add (valid and
 *   invalid names, budgets), seq_stats, stalled_now, inflight, snapshot
 *   (+ one of: a format chosen by the input, with snprintf rules; the codec
 *   round trip in both forms; merge with itself; delta with the last).
 * Handles are picked among those issued (live or ended) or invented.
 * Timestamps: TTFT_NOW, small steps forward, steps backward, raw 64-bit.
 *
 * The model is exact for everything that does not depend on the library's
 * clock. A sequence that ever used TTFT_NOW is "fuzzy": its clock-dependent
 * outcomes (CLOCK_CLAMPED, STALLS, STALLED_SEQS, SLO_MET with budgets,
 * SLO_JUDGED of a cancelled stream with budgets) are
 * allowed as a range. Invariants after every step: return codes, handles,
 * the inflight count, the stale-call count; after every snapshot: every
 * counter and histogram count per class and in total (token-weighted ITL
 * included), the per-status views per class, exact min/max/sum where the
 * model knows them, quantiles within [min, max] and monotone in q, the
 * split counts, formats well-formed (JSON that parses, exposition lines
 * that parse, protobuf framing), encode -> decode -> encode bit-exact,
 * merge doubles, delta subtracts; after the input: no block left
 * allocated.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "ttft.h"

#if defined(__SANITIZE_ADDRESS__)
#define FZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FZ_ASAN 1
#endif
#endif
#ifdef FZ_ASAN
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(a, n) ((void)(a), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(a, n) ((void)(a), (void)(n))
#endif

/* ------------------------------------------------------------ allocator
 * Every execution creates a registry of about a megabyte (its bucket pool
 * is touched at creation). ASan gives each block above 128 KiB a mapping
 * of its own, so each execution would fault that megabyte in afresh, which
 * cost more than everything else together. Large blocks are therefore kept
 * for the next execution (poisoned while kept, so a use after free is
 * still caught). The allocator also counts live blocks: every execution
 * must end with none (the library leaks nothing). */
#define FZ_CACHE_MIN 16384u
#define FZ_CACHE_SLOTS 256
typedef struct fz_block {
  size_t n;
  size_t pad_;
} fz_block;
static struct {
  size_t n;
  fz_block *b;
} g_cache[FZ_CACHE_SLOTS];
static int g_ncache;
static long g_live_blocks;

static void fz_cache_drop(void) {
  for (int i = 0; i < g_ncache; i++) {
    ASAN_UNPOISON_MEMORY_REGION(g_cache[i].b, sizeof(fz_block) + g_cache[i].n);
    free(g_cache[i].b);
  }
  g_ncache = 0;
}

static void *fz_alloc(void *ctx, size_t n) {
  (void)ctx;
  fz_block *b = NULL;
  if (n >= FZ_CACHE_MIN)
    for (int i = 0; i < g_ncache; i++)
      if (g_cache[i].n == n) {
        b = g_cache[i].b;
        g_cache[i] = g_cache[--g_ncache];
        ASAN_UNPOISON_MEMORY_REGION(b, sizeof *b + n);
        break;
      }
  if (!b) b = malloc(sizeof *b + n);
  if (!b) return NULL;
  b->n = n;
  g_live_blocks++;
  return b + 1;
}

static void fz_free(void *ctx, void *p) {
  (void)ctx;
  if (!p) return;
  fz_block *b = (fz_block *)p - 1;
  g_live_blocks--;
  if (b->n >= FZ_CACHE_MIN && g_ncache < FZ_CACHE_SLOTS) {
    g_cache[g_ncache].n = b->n;
    g_cache[g_ncache++].b = b;
    ASAN_POISON_MEMORY_REGION(b, sizeof *b + b->n);
    return;
  }
  free(b);
}

static void fz_allocator_install(void) {
  static int done;
  if (done) return;
  done = 1;
  static const ttft_allocator a = {fz_alloc, fz_free, NULL};
  ttft_set_allocator(&a);
  atexit(fz_cache_drop);
}

#define MAX_HANDLES 64
#define MAX_OPS 1500
#define MAX_SNAPSHOTS 4
#define NCTR TTFT_COUNTER_COUNT_
#define NMET TTFT_METRIC_COUNT_

typedef struct mseq {
  ttft_seq h;
  int live, cls, fuzzy;
  int prefix, band;  /* split keys: -1 unknown; raw prefix values are clamped as the library does */
  int sched, stalled;
  uint64_t t_begin, t_event, t_last, t_first, t_sched, max_gap;
  uint32_t em, stalls, preempt;
  uint64_t tokens, stall_ns;
  /* fluidity (SPEC 10.2): the token deadline, slack, deadlines missed and
   * those beyond one per emission; dl_fuzzy once a gap was not exact */
  uint64_t dl, slack, dl_missed, dl_extra;
  int dl_fuzzy;
} mseq;

#define NSTATUS TTFT_STATUS_COUNT_
#define NVIEW 4 /* TTFT, TPOT, E2E, OUTPUT_TOKENS: the per-status views */
static const ttft_metric k_views[NVIEW] = {TTFT_METRIC_TTFT, TTFT_METRIC_TPOT, TTFT_METRIC_E2E,
                                           TTFT_METRIC_OUTPUT_TOKENS};

typedef struct mclass {
  char name[64];
  ttft_slo slo;                 /* stall budget resolved              */
  uint64_t ctr[NCTR], fz[NCTR]; /* exact part, clock-dependent slack  */
  uint64_t cnt[NMET];
  uint64_t sv[NSTATUS][NVIEW];  /* per-status view counts             */
} mclass;

/* exact min/max/sum of a metric over all classes while no fuzzy value went in */
typedef struct mstat {
  int fuzzy;
  uint64_t n, min, max, sum, sum_hi; /* the sum is sum_hi:sum, 128 bits, as the library's */
} mstat;

typedef struct model {
  ttft_registry *r;
  uint32_t max_inflight, max_classes;
  uint64_t stall_ns;
  int nclasses;
  mclass cls[4];
  mseq seq[MAX_HANDLES];
  int nseq, live;
  uint64_t clock; /* the program's explicit time */
  mstat st[NMET];
  mstat sv[NSTATUS][NVIEW];
  uint64_t split_cache[2], split_band[TTFT_MAX_BANDS];
  int splits_fuzzy;
  ttft_snapshot *prev;
  int nsnap;
} model;

static const uint32_t k_band_edges[] = {128, 512, 2048, 8192, 32768, 131072};
#define NBANDS (sizeof k_band_edges / sizeof k_band_edges[0] + 1)

static int band_of(uint32_t prompt_tokens) {
  int band = 0;
  while ((size_t)band < NBANDS - 1 && prompt_tokens >= k_band_edges[band]) band++;
  return band;
}

static void stat_add(mstat *s, uint64_t v, uint64_t n, int fuzzy) {
  if (fuzzy) s->fuzzy = 1;
  if (s->n == 0 || v < s->min) s->min = v;
  if (s->n == 0 || v > s->max) s->max = v;
  s->n += n;
  unsigned __int128 t = ((unsigned __int128)s->sum_hi << 64 | s->sum) + (unsigned __int128)v * n;
  s->sum = (uint64_t)t;
  s->sum_hi = (uint64_t)(t >> 64);
}

/* n observations of v in metric k of class cls */
static void rec_n(model *m, int cls, ttft_metric k, uint64_t v, uint64_t n, int fuzzy) {
  m->cls[cls].cnt[k] += n;
  stat_add(&m->st[k], v, n, fuzzy);
}

static void rec(model *m, int cls, ttft_metric k, uint64_t v, int fuzzy) { rec_n(m, cls, k, v, 1, fuzzy); }

/* one observation of view `view` (index into k_views) for terminal status st */
static void rec_view(model *m, int cls, int st, int view, uint64_t v, int fuzzy) {
  m->cls[cls].sv[st][view]++;
  stat_add(&m->sv[st][view], v, 1, fuzzy);
}

/* a hook call refused with TTFT_ESTALE: counted in class 0 */
static void stale_call(model *m) { m->cls[0].ctr[TTFT_COUNTER_STALE]++; }

static int band_of(uint32_t prompt_tokens);

/* ------------------------------------------------------------ operands */
static uint64_t next_time(model *m, fz_in *in) {
  uint8_t k = fz_u8(in);
  switch (k % 8) {
  case 0: return TTFT_NOW;
  case 1: return fz_u64(in) | 1; /* raw, never 0 */
  case 2: { /* backwards */
    uint64_t back = (uint64_t)fz_u8(in) * 1000 + 1;
    return m->clock > back ? m->clock - back : 1;
  }
  case 3: m->clock += (uint64_t)fz_u32(in) * 1000; return m->clock; /* up to 71 min */
  default: m->clock += (uint64_t)(k >> 3) * 997 + 1; return m->clock;
  }
}

/* a handle: one issued (live or ended) or an invented one; *ms is the
 * model's live sequence the handle names, NULL when none */
static ttft_seq pick_handle(model *m, fz_in *in, mseq **ms) {
  uint8_t k = fz_u8(in);
  ttft_seq h;
  if (k < 0xC0 && m->nseq > 0) {
    h = m->seq[k % m->nseq].h;
  } else {
    switch (k % 4) {
    case 0: h = 0; break;
    case 1: h = fz_u64(in); break;
    case 2: h = (ttft_seq)fz_u8(in) | ((ttft_seq)fz_u8(in) << 32); break;
    default: h = m->nseq ? m->seq[fz_u8(in) % m->nseq].h + ((ttft_seq)1 << 32) : 1; break;
    }
  }
  *ms = NULL;
  for (int i = 0; i < m->nseq; i++)
    if (m->seq[i].h == h && m->seq[i].live) *ms = &m->seq[i];
  return h;
}

/* The time the library uses for an event of q at t, or 0 (fuzzy). */
static int event_time(model *m, mseq *q, uint64_t t, uint64_t *out) {
  mclass *c = &m->cls[q->cls];
  if (t == TTFT_NOW) q->fuzzy = 1;
  if (q->fuzzy) {
    c->fz[TTFT_COUNTER_CLOCK_CLAMPED]++;
    return 0;
  }
  if (t < q->t_event) {
    c->ctr[TTFT_COUNTER_CLOCK_CLAMPED]++;
    t = q->t_event;
  }
  *out = t;
  return 1;
}

/* ------------------------------------------------------------------ ops */
static void op_begin(model *m, fz_in *in, int ex) {
  ttft_request req;
  ttft_request_init(&req);
  int cls = 0, valid = 1, prefix = -1, band = -1;
  if (ex) {
    uint8_t c = fz_u8(in);
    req.class_id = (c & 0x80) ? (int)(int8_t)c * 1000 : c % 6; /* 4, 5 are never valid */
    req.prompt_tokens = (fz_u8(in) & 1) ? fz_u32(in) : (uint32_t)fz_u8(in) * 700;
    uint8_t p = fz_u8(in) % 4;
    if (p == 3) {
      req.prefix_hit = (int)fz_u32(in);
      m->splits_fuzzy = 1; /* the header only defines -1, 0, 1 */
      prefix = req.prefix_hit < 0 ? -1 : req.prefix_hit ? 1 : 0;
    } else {
      req.prefix_hit = (int)p - 1;
      prefix = req.prefix_hit;
    }
    if (req.prompt_tokens) band = band_of(req.prompt_tokens);
    cls = req.class_id;
    valid = cls >= 0 && cls < m->nclasses;
  }
  uint64_t t = next_time(m, in);
  ttft_seq h = ex ? ttft_begin_ex(m->r, &req, t) : ttft_begin(m->r, t);
  if (!valid) {
    FUZZ_CHECK(h == 0, "begin_ex with unknown class %d returned a handle", cls);
    return;
  }
  mclass *c = &m->cls[cls];
  if ((uint32_t)m->live >= m->max_inflight) {
    FUZZ_CHECK(h == 0, "begin with %d of %u slots live returned a handle", m->live, m->max_inflight);
    c->ctr[TTFT_COUNTER_DROPPED]++;
    return;
  }
  FUZZ_CHECK(h != 0, "begin refused with %d of %u slots live", m->live, m->max_inflight);
  FUZZ_CHECK((uint32_t)h >= 1 && (uint32_t)h <= m->max_inflight, "handle slot field %u", (uint32_t)h);
  for (int i = 0; i < m->nseq; i++)
    FUZZ_CHECK(m->seq[i].h != h, "handle %llx issued twice", (unsigned long long)h);
  c->ctr[TTFT_COUNTER_BEGUN]++;
  m->live++;
  mseq *q = NULL;
  if (m->nseq < MAX_HANDLES) {
    q = &m->seq[m->nseq++];
  } else { /* forget an ended one (at most 8 are live) */
    for (int i = 0; i < m->nseq && !q; i++)
      if (!m->seq[i].live) q = &m->seq[i];
    FUZZ_CHECK(q != NULL, "more than %d sequences live", MAX_HANDLES);
  }
  memset(q, 0, sizeof *q);
  q->h = h;
  q->live = 1;
  q->cls = cls;
  q->prefix = prefix;
  q->band = band;
  q->fuzzy = t == TTFT_NOW;
  q->t_begin = q->t_event = q->t_last = t;
  q->stall_ns = c->slo.stall_threshold_ns;
  q->dl = c->slo.token_deadline_ns ? c->slo.token_deadline_ns : c->slo.tpot_ns;
  if (q->dl > (UINT64_C(1) << 62)) q->dl = UINT64_C(1) << 62; /* the documented cap */
}

/* Fluidity, as SPEC 10.2 states it (written here from the rule, not from
 * hooks.c): with deadline D and slack, a gap g carrying n tokens meets
 * one deadline when g <= slack + D (slack becomes slack + D - g), else
 * misses m = floor((g - slack - D) / D) + 1 (slack 0); each of its other
 * n - 1 tokens meets one more and adds D to the slack. The library caps
 * the slack at 2^62 ns. A gap the model cannot know makes the class's
 * deadline counters and this stream's verdict fuzzy. */
#define FZ_HUGE (UINT64_C(1) << 60)
#define SLACK_CAP (UINT64_C(1) << 62)
static void model_fluid_gap(mclass *c, mseq *q, uint64_t g, uint32_t n, int exact) {
  if (!q->dl) return;
  if (!exact || q->dl_fuzzy) {
    q->dl_fuzzy = 1;
    c->fz[TTFT_COUNTER_TOKEN_DEADLINES] = FZ_HUGE;
    c->fz[TTFT_COUNTER_TOKEN_DEADLINES_MISSED] = FZ_HUGE;
    return;
  }
  uint64_t d = q->dl, total = 1, missed = 0;
  if (q->slack <= UINT64_MAX - d && g <= q->slack + d) {
    q->slack = q->slack + d - g;
    if (q->slack > SLACK_CAP) q->slack = SLACK_CAP;
  } else {
    missed = (g - q->slack - d) / d + 1;
    total = missed;
    q->slack = 0;
  }
  if (n > 1) {
    unsigned __int128 more = (unsigned __int128)(n - 1) * d;
    total += n - 1;
    q->slack = more > SLACK_CAP - q->slack ? SLACK_CAP : q->slack + (uint64_t)more;
  }
  q->dl_extra += total - 1;
  q->dl_missed += missed;
  c->ctr[TTFT_COUNTER_TOKEN_DEADLINES] += total;
  c->ctr[TTFT_COUNTER_TOKEN_DEADLINES_MISSED] += missed;
}

/* The verdict at the end: a cancelled stream first counts the deadlines
 * that passed since its last token; judged: completed, errors, cancelled
 * after a miss; fluid: completed with 1 - missed/total >= fluid_min. */
static void model_fluid_end(mclass *c, mseq *q, int status, uint64_t wait, int exact) {
  if (!q->dl) return;
  if (!exact || q->dl_fuzzy) {
    c->fz[TTFT_COUNTER_TOKEN_DEADLINES] = FZ_HUGE;
    c->fz[TTFT_COUNTER_TOKEN_DEADLINES_MISSED] = FZ_HUGE;
    c->fz[TTFT_COUNTER_FLUID_JUDGED]++;
    c->fz[TTFT_COUNTER_FLUID]++;
    return;
  }
  uint64_t d = q->dl, missed = q->dl_missed;
  uint64_t total = q->em >= 2 ? (uint64_t)(q->em - 1) + q->dl_extra : 0;
  if (status == TTFT_CANCELLED && q->em && q->slack <= UINT64_MAX - d && wait > q->slack + d) {
    uint64_t k = (wait - q->slack - d) / d + 1;
    missed += k;
    total += k;
    c->ctr[TTFT_COUNTER_TOKEN_DEADLINES] += k;
    c->ctr[TTFT_COUNTER_TOKEN_DEADLINES_MISSED] += k;
  }
  if (status == TTFT_CANCELLED && !missed) return;
  c->ctr[TTFT_COUNTER_FLUID_JUDGED]++;
  double fl = total ? 1.0 - (double)missed / (double)total : 1.0;
  if (status == TTFT_COMPLETED && fl >= c->slo.fluid_min) c->ctr[TTFT_COUNTER_FLUID]++;
}

static void op_mark(model *m, fz_in *in) {
  mseq *q;
  ttft_seq h = pick_handle(m, in, &q);
  uint8_t pk = fz_u8(in);
  int phase = pk < 0xF0 ? (int)(pk % 2) : (int)(int8_t)pk * 100000;
  uint64_t t = next_time(m, in);
  int rc = ttft_mark(m->r, h, (ttft_phase)phase, t);
  int phase_ok = phase == 0 || phase == 1;
  if (!phase_ok) {
    FUZZ_CHECK(rc == TTFT_EINVAL || (!q && rc == TTFT_ESTALE), "mark with phase %d: %d", phase, rc);
    if (rc == TTFT_ESTALE) stale_call(m);
    return;
  }
  if (!q) {
    FUZZ_CHECK(rc == TTFT_ESTALE, "mark on a dead/invented handle %llx: %d", (unsigned long long)h, rc);
    stale_call(m);
    return;
  }
  FUZZ_CHECK(rc == TTFT_OK, "mark on a live handle: %d", rc);
  mclass *c = &m->cls[q->cls];
  uint64_t et = 0;
  int exact = event_time(m, q, t, &et);
  if (phase == TTFT_PHASE_SCHEDULED) {
    if (!q->sched && q->em == 0) {
      q->sched = 1;
      q->t_sched = et;
      rec(m, q->cls, TTFT_METRIC_QUEUE, exact ? et - q->t_begin : 0, !exact);
    }
  } else {
    q->preempt++;
    c->ctr[TTFT_COUNTER_PREEMPTIONS]++;
  }
  if (exact) q->t_event = et;
}

/* The model of one accepted emission of n tokens by live q at t. */
static void model_emit(model *m, mseq *q, uint32_t n, uint64_t t) {
  mclass *c = &m->cls[q->cls];
  uint64_t et = 0;
  int exact = event_time(m, q, t, &et);
  if (q->em) {
    uint64_t gap = exact ? et - q->t_last : 0;
    rec(m, q->cls, TTFT_METRIC_ITL, gap, !exact);
    /* token-weighted: n observations of gap / n */
    rec_n(m, q->cls, TTFT_METRIC_ITL_PER_TOKEN, gap / n, n, !exact);
    model_fluid_gap(c, q, gap, n, exact);
    if (exact) {
      if (gap > q->max_gap) q->max_gap = gap;
      if (gap > q->stall_ns) {
        q->stalls++;
        c->ctr[TTFT_COUNTER_STALLS]++;
        if (!q->stalled) c->ctr[TTFT_COUNTER_STALLED_SEQS]++;
        q->stalled = 1;
      }
    } else {
      c->fz[TTFT_COUNTER_STALLS]++;
      if (!q->stalled) c->fz[TTFT_COUNTER_STALLED_SEQS]++;
      q->stalled = 1; /* as far as the model knows: at most one STALLED_SEQS */
    }
  } else {
    uint64_t ttft = exact ? et - q->t_begin : 0;
    rec(m, q->cls, TTFT_METRIC_TTFT, ttft, !exact);
    if (q->prefix >= 0) m->split_cache[q->prefix]++;
    if (q->band >= 0) m->split_band[q->band]++;
    if (q->sched) rec(m, q->cls, TTFT_METRIC_PREFILL, exact ? et - q->t_sched : 0, !exact);
    q->t_first = et;
  }
  if (exact) {
    q->t_last = et;
    q->t_event = et;
  }
  q->em++;
  q->tokens += n;
  c->ctr[TTFT_COUNTER_TOKENS] += n;
}

static uint32_t pick_n(fz_in *in) {
  uint8_t nk = fz_u8(in);
  return nk < 0xF0 ? nk % 5 : (nk == 0xFF ? UINT32_MAX : fz_u32(in));
}

static void op_emit(model *m, fz_in *in) {
  mseq *q;
  ttft_seq h = pick_handle(m, in, &q);
  uint32_t n = pick_n(in);
  uint64_t t = next_time(m, in);
  int rc = ttft_token_emitted(m->r, h, n, t);
  if (n == 0) {
    FUZZ_CHECK(rc == TTFT_EINVAL || (!q && rc == TTFT_ESTALE), "token_emitted n=0: %d", rc);
    if (rc == TTFT_ESTALE) stale_call(m);
    return;
  }
  if (!q) {
    FUZZ_CHECK(rc == TTFT_ESTALE, "token_emitted on a dead/invented handle %llx: %d", (unsigned long long)h, rc);
    stale_call(m);
    return;
  }
  FUZZ_CHECK(rc == TTFT_OK, "token_emitted on a live handle: %d", rc);
  model_emit(m, q, n, t);
}

/* one decode step: up to 8 handles (repeats and dead ones allowed), n per
 * handle or NULL (1 each) */
static void op_step(model *m, fz_in *in) {
  uint8_t k = fz_u8(in);
  size_t count = k % 9;
  int null_n = (k & 0x80) != 0;
  ttft_seq seqs[8];
  uint32_t ns[8];
  mseq *qs[8];
  for (size_t i = 0; i < count; i++) {
    seqs[i] = pick_handle(m, in, &qs[i]);
    ns[i] = null_n ? 1 : pick_n(in);
  }
  uint64_t t = next_time(m, in);
  long rc = ttft_step_emitted(m->r, count ? seqs : NULL, null_n ? NULL : ns, count, t);
  long accepted = 0;
  for (size_t i = 0; i < count; i++) {
    if (ns[i] == 0) continue; /* not an emission, not a stale call */
    /* the handle's liveness as of this emission (an earlier entry may not end it) */
    mseq *q = NULL;
    for (int j = 0; j < m->nseq; j++)
      if (m->seq[j].h == seqs[i] && m->seq[j].live) q = &m->seq[j];
    if (!q) {
      stale_call(m);
      continue;
    }
    model_emit(m, q, ns[i], t);
    accepted++;
  }
  FUZZ_CHECK(rc == accepted, "step_emitted of %zu: %ld, model %ld", count, rc, accepted);
}

/* details learned after begin */
static void op_annotate(model *m, fz_in *in) {
  mseq *q;
  ttft_seq h = pick_handle(m, in, &q);
  uint8_t k = fz_u8(in);
  uint32_t prompt = (k & 1) ? fz_u32(in) : (k & 2) ? 0 : (uint32_t)fz_u8(in) * 300;
  int prefix = (k & 0xC0) == 0xC0 ? (int)(int8_t)fz_u8(in) : (int)((k >> 2) % 3) - 1;
  int rc = ttft_annotate(m->r, h, prompt, prefix);
  if (prefix < -1 || prefix > 1) {
    FUZZ_CHECK(rc == TTFT_EINVAL, "annotate prefix_hit %d: %d", prefix, rc);
    return;
  }
  if (!q) {
    FUZZ_CHECK(rc == TTFT_ESTALE, "annotate on a dead/invented handle: %d", rc);
    stale_call(m);
    return;
  }
  if (q->em) {
    FUZZ_CHECK(rc == TTFT_ERANGE, "annotate after the first emission: %d", rc);
    return;
  }
  FUZZ_CHECK(rc == TTFT_OK, "annotate of a live handle before its first emission: %d", rc);
  if (prompt) q->band = band_of(prompt);
  if (prefix >= 0) q->prefix = prefix;
}

static void op_end(model *m, fz_in *in) {
  mseq *q;
  ttft_seq h = pick_handle(m, in, &q);
  uint8_t sk = fz_u8(in);
  int status = sk < 0xF0 ? (int)(sk % 3) : (int)(int8_t)sk * 7777;
  uint64_t t = next_time(m, in);
  int rc = ttft_stream_end(m->r, h, (ttft_status)status, t);
  if (status < 0 || status > 2) {
    FUZZ_CHECK(rc == TTFT_EINVAL || (!q && rc == TTFT_ESTALE), "stream_end status %d: %d", status, rc);
    if (rc == TTFT_ESTALE) stale_call(m);
    return;
  }
  if (!q) {
    FUZZ_CHECK(rc == TTFT_ESTALE, "stream_end on a dead/invented handle %llx: %d", (unsigned long long)h, rc);
    stale_call(m);
    return;
  }
  FUZZ_CHECK(rc == TTFT_OK, "stream_end on a live handle: %d", rc);
  mclass *c = &m->cls[q->cls];
  uint64_t et = 0;
  int exact = event_time(m, q, t, &et);
  uint64_t e2e = exact ? et - q->t_begin : 0;
  rec(m, q->cls, TTFT_METRIC_E2E, e2e, !exact);
  rec(m, q->cls, TTFT_METRIC_OUTPUT_TOKENS, q->tokens, 0);
  static const ttft_counter by_status[3] = {TTFT_COUNTER_COMPLETED, TTFT_COUNTER_CANCELLED, TTFT_COUNTER_ERRORS};
  c->ctr[by_status[status]]++;
  if (q->em == 0 && status == TTFT_CANCELLED) {
    c->ctr[TTFT_COUNTER_ABANDONED]++;
    rec(m, q->cls, TTFT_METRIC_ABANDONED_WAIT, e2e, !exact);
  }
  uint64_t tpot = 0;
  int has_tpot = q->em && q->tokens >= 2;
  if (has_tpot) {
    tpot = exact ? (q->t_last - q->t_first) / (q->tokens - 1) : 0;
    rec(m, q->cls, TTFT_METRIC_TPOT, tpot, !exact);
  } else {
    c->ctr[TTFT_COUNTER_NO_TPOT]++;
  }
  if (q->em) rec(m, q->cls, TTFT_METRIC_DECODE, exact ? q->t_last - q->t_first : 0, !exact);
  if (q->em >= 2) {
    rec(m, q->cls, TTFT_METRIC_SEQ_ITL_P95, 0, 1); /* approximate by design */
    rec(m, q->cls, TTFT_METRIC_SEQ_ITL_MAX, q->max_gap, !exact);
  }
  /* the views of this terminal status */
  if (q->em) rec_view(m, q->cls, status, 0, q->t_first - q->t_begin, q->fuzzy);
  if (has_tpot) rec_view(m, q->cls, status, 1, tpot, !exact);
  rec_view(m, q->cls, status, 2, e2e, !exact);
  rec_view(m, q->cls, status, 3, q->tokens, 0);
  const ttft_slo *slo = &c->slo;
  int budgets = slo->ttft_ns || slo->tpot_ns || slo->e2e_ns;
  /* judged: completed and errors always; cancelled only after a missed
   * budget (docs/metrics.md); good: completed within every budget */
  if (!budgets) {
    if (status == TTFT_COMPLETED) c->ctr[TTFT_COUNTER_SLO_MET]++;
    if (status != TTFT_CANCELLED) c->ctr[TTFT_COUNTER_SLO_JUDGED]++;
  } else if (!exact) {
    if (status == TTFT_COMPLETED) c->fz[TTFT_COUNTER_SLO_MET]++;
    if (status != TTFT_CANCELLED) c->ctr[TTFT_COUNTER_SLO_JUDGED]++;
    else c->fz[TTFT_COUNTER_SLO_JUDGED]++;
  } else {
    uint64_t ttft = q->em ? q->t_first - q->t_begin : e2e;
    int within = (!slo->ttft_ns || ttft <= slo->ttft_ns) && (!slo->tpot_ns || !has_tpot || tpot <= slo->tpot_ns) &&
                 (!slo->e2e_ns || e2e <= slo->e2e_ns);
    if (status == TTFT_COMPLETED && within) c->ctr[TTFT_COUNTER_SLO_MET]++;
    if (status != TTFT_CANCELLED || !within) c->ctr[TTFT_COUNTER_SLO_JUDGED]++;
  }
  model_fluid_end(c, q, status, exact ? et - q->t_last : 0, exact);
  q->live = 0;
  m->live--;
}

static int valid_class_name(const char *s) {
  size_t n = strlen(s);
  if (n < 1 || n > 63) return 0;
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
          ch == '.' || ch == ':' || ch == '-'))
      return 0;
  }
  return 1;
}

static void op_class_add(model *m, fz_in *in) {
  static const char *const names[] = {"chat", "batch", "default", "a.b:c-d_1", "", "bad name", "x/y",
                                      "0123456789012345678901234567890123456789012345678901234567890123",
                                      "012345678901234567890123456789012345678901234567890123456789012",
                                      "caf\xc3\xa9", "chat"};
  const char *name = names[fz_u8(in) % (sizeof names / sizeof names[0])];
  ttft_slo slo;
  ttft_slo_init(&slo);
  static const uint64_t budgets[] = {0, 1, 1000, 1000000, 50000000, 1000000000, UINT64_MAX};
  uint8_t b = fz_u8(in);
  slo.ttft_ns = budgets[(b >> 0) % 7];
  slo.tpot_ns = budgets[(b >> 3) % 7];
  slo.e2e_ns = budgets[fz_u8(in) % 7];
  slo.stall_threshold_ns = budgets[fz_u8(in) % 7];
  int use_null = (b & 0xC0) == 0xC0;
  int rc = ttft_class_add(m->r, name, use_null ? NULL : &slo);
  int exists = -1;
  for (int i = 0; i < m->nclasses; i++)
    if (!strcmp(m->cls[i].name, name)) exists = i;
  if (!valid_class_name(name)) {
    FUZZ_CHECK(rc == TTFT_EINVAL, "class_add(\"%s\"): %d", name, rc);
  } else if (exists >= 0) {
    FUZZ_CHECK(rc == TTFT_EEXIST, "class_add of existing \"%s\": %d", name, rc);
  } else if ((uint32_t)m->nclasses >= m->max_classes) {
    FUZZ_CHECK(rc == TTFT_EFULL, "class_add beyond max_classes: %d", rc);
  } else {
    FUZZ_CHECK(rc == m->nclasses, "class_add(\"%s\") = %d, expected id %d", name, rc, m->nclasses);
    mclass *c = &m->cls[m->nclasses++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    ttft_slo_init(&c->slo);
    if (!use_null) c->slo = slo;
    if (!c->slo.stall_threshold_ns) c->slo.stall_threshold_ns = m->stall_ns;
  }
  for (int i = 0; i < m->nclasses; i++)
    FUZZ_CHECK(ttft_class_find(m->r, m->cls[i].name) == i, "class_find(\"%s\")", m->cls[i].name);
}

static void op_seq_stats(model *m, fz_in *in) {
  mseq *q;
  ttft_seq h = pick_handle(m, in, &q);
  ttft_seq_info info;
  memset(&info, 0xAB, sizeof info);
  info.struct_size = sizeof info;
  int rc = ttft_seq_stats(m->r, h, &info);
  if (!q) {
    FUZZ_CHECK(rc == TTFT_ESTALE, "seq_stats on a dead/invented handle: %d", rc);
    return;
  }
  FUZZ_CHECK(rc == TTFT_OK, "seq_stats on a live handle: %d", rc);
  FUZZ_CHECK(info.class_id == q->cls, "seq_stats class %d, model %d", info.class_id, q->cls);
  FUZZ_CHECK(info.emissions == q->em, "seq_stats emissions %u, model %u", info.emissions, q->em);
  FUZZ_CHECK(info.tokens == q->tokens, "seq_stats tokens %llu, model %llu", (unsigned long long)info.tokens,
             (unsigned long long)q->tokens);
  FUZZ_CHECK(info.preemptions == q->preempt, "seq_stats preemptions %u, model %u", info.preemptions, q->preempt);
  if (info.emissions >= 2)
    FUZZ_CHECK(info.itl_p50_ns <= info.itl_p95_ns && info.itl_p95_ns <= info.itl_max_ns,
               "seq_stats p50 %llu p95 %llu max %llu", (unsigned long long)info.itl_p50_ns,
               (unsigned long long)info.itl_p95_ns, (unsigned long long)info.itl_max_ns);
  else
    FUZZ_CHECK(info.itl_p50_ns == 0 && info.itl_p95_ns == 0 && info.itl_max_ns == 0, "seq_stats gaps before 2 emissions");
  if (q->fuzzy) return;
  FUZZ_CHECK(info.t_begin_ns == q->t_begin, "seq_stats t_begin");
  FUZZ_CHECK(info.stalls == q->stalls, "seq_stats stalls %u, model %u", info.stalls, q->stalls);
  FUZZ_CHECK(info.ttft_ns == (q->em ? q->t_first - q->t_begin : 0), "seq_stats ttft %llu",
             (unsigned long long)info.ttft_ns);
  if (q->em >= 2) FUZZ_CHECK(info.itl_max_ns == q->max_gap, "seq_stats itl_max %llu, model %llu",
                             (unsigned long long)info.itl_max_ns, (unsigned long long)q->max_gap);
  /* The header says "last event (begin, mark or emission)"; the library
   * reports the last emission (or the begin). Either is accepted until the
   * two agree (reported to the lead). */
  FUZZ_CHECK(info.t_last_ns == q->t_event || info.t_last_ns == q->t_last, "seq_stats t_last %llu",
             (unsigned long long)info.t_last_ns);
}

static void op_stalled_now(model *m, fz_in *in) {
  uint64_t now = next_time(m, in);
  long n = ttft_stalled_now(m->r, now);
  long lo = 0, hi = 0;
  for (int i = 0; i < m->nseq; i++) {
    mseq *q = &m->seq[i];
    if (!q->live || !q->em) continue;
    if (q->fuzzy || now == TTFT_NOW) {
      hi++;
    } else if (now > q->t_last && now - q->t_last > q->stall_ns) {
      lo++;
      hi++;
    }
  }
  FUZZ_CHECK(n >= lo && n <= hi, "stalled_now = %ld, model [%ld, %ld]", n, lo, hi);
  FUZZ_CHECK(ttft_inflight(m->r) == m->live, "inflight %ld, model %d", ttft_inflight(m->r), m->live);
}

/* ------------------------------------------------------------ snapshots */
/* Render s in format f and check it is well-formed: into a buffer of its
 * exact size plus one when the library's size query is used (thorough),
 * else straight into a large buffer (one render instead of two). Thorough
 * also checks snprintf rules on a truncated copy. Formatting dominated an
 * execution, so only one format per snapshot is done thoroughly. */
static void check_format(const ttft_snapshot *s, ttft_format f, char **out, long *out_len, int thorough) {
  static char big[1 << 20];
  long n;
  char *buf;
  if (thorough) {
    n = ttft_snapshot_format(s, f, NULL, 0);
    FUZZ_CHECK(n > 0, "format %d size: %ld", (int)f, n);
    buf = malloc((size_t)n + 1);
    FUZZ_CHECK(buf != NULL, "malloc");
    long n2 = ttft_snapshot_format(s, f, buf, (size_t)n + 1);
    FUZZ_CHECK(n2 == n, "format %d: %ld then %ld", (int)f, n, n2);
  } else {
    n = ttft_snapshot_format(s, f, big, sizeof big);
    FUZZ_CHECK(n > 0 && (size_t)n < sizeof big, "format %d: %ld", (int)f, n);
    buf = malloc((size_t)n + 1);
    FUZZ_CHECK(buf != NULL, "malloc");
    memcpy(buf, big, (size_t)n + 1);
  }
  if (f == TTFT_FORMAT_PROMETHEUS_PROTOBUF) /* binary: NUL bytes allowed, framing checked */
    FUZZ_CHECK(buf[n] == '\0' && fz_protobuf_delimited_ok((const uint8_t *)buf, (size_t)n),
               "protobuf exposition is not a sequence of length-delimited messages");
  else if (f == TTFT_FORMAT_OTLP_PROTOBUF) /* binary: one message */
    FUZZ_CHECK(buf[n] == '\0' && fz_pb_message_ok((const uint8_t *)buf, (const uint8_t *)buf + n),
               "OTLP request is not a protobuf message");
  else
    FUZZ_CHECK(buf[n] == '\0' && strlen(buf) == (size_t)n, "format %d: NUL at %zu, length %ld", (int)f,
               strlen(buf), n);
  if (f == TTFT_FORMAT_JSON) FUZZ_CHECK(fz_json_valid(buf, (size_t)n), "JSON does not parse:\n%s", buf);
  if (f == TTFT_FORMAT_PROMETHEUS || f == TTFT_FORMAT_OPENMETRICS) {
    int bad = fz_exposition_bad_line(buf, (size_t)n, f == TTFT_FORMAT_OPENMETRICS);
    FUZZ_CHECK(bad == 0, "%s line %d is malformed:\n%s", ttft_format_name(f), bad, buf);
  }
  if (thorough && n % 2 == 0) { /* truncated (half the time): same return, a NUL-terminated prefix */
    size_t cap = (size_t)n / 2 + 1;
    char *part = malloc(cap);
    FUZZ_CHECK(part != NULL, "malloc");
    long n3 = ttft_snapshot_format(s, f, part, cap);
    FUZZ_CHECK(n3 == n && part[cap - 1] == '\0' && memcmp(part, buf, cap - 1) == 0,
               "format %d truncated to %zu: %ld", (int)f, cap, n3);
    free(part);
  }
  *out = buf;
  *out_len = n;
}

static void check_quantiles(const ttft_snapshot *s, int cls, ttft_metric k) {
  static const double qs[] = {0.0, 0.01, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0};
  uint64_t n = ttft_snapshot_class_count(s, cls, k);
  if (!n) {
    FUZZ_CHECK(ttft_snapshot_class_quantile(s, cls, k, 0.5) == 0, "quantile of an empty metric");
    return;
  }
  uint64_t lo = ttft_snapshot_class_quantile(s, cls, k, 0.0), hi = ttft_snapshot_class_quantile(s, cls, k, 1.0);
  FUZZ_CHECK(lo <= hi, "class %d %s: min %llu > max %llu", cls, ttft_metric_name(k), (unsigned long long)lo,
             (unsigned long long)hi);
  uint64_t prev = lo;
  for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
    uint64_t v = ttft_snapshot_class_quantile(s, cls, k, qs[i]);
    FUZZ_CHECK(v >= prev && v <= hi, "class %d %s q%g = %llu, previous %llu, max %llu", cls, ttft_metric_name(k),
               qs[i], (unsigned long long)v, (unsigned long long)prev, (unsigned long long)hi);
    prev = v;
  }
}

/* the per-status views over all classes: counts, exact extremes where the
 * model knows them, quantiles monotone and within them; the other metrics
 * have no view */
static void check_views(const model *m, const ttft_snapshot *s) {
  static const double qs[] = {0.0, 0.07, 0.5, 0.9, 0.99, 1.0};
  for (int st = 0; st < NSTATUS; st++) {
    for (int v = 0; v < NVIEW; v++) {
      const mstat *ms = &m->sv[st][v];
      ttft_status sts = (ttft_status)st;
      uint64_t n = ttft_snapshot_status_count(s, TTFT_CLASS_ALL, sts, k_views[v]);
      FUZZ_CHECK(n == ms->n, "%s view of %s: %llu, model %llu", ttft_status_name(sts),
                 ttft_metric_name(k_views[v]), (unsigned long long)n, (unsigned long long)ms->n);
      uint64_t lo = ttft_snapshot_status_quantile(s, TTFT_CLASS_ALL, sts, k_views[v], 0.0);
      uint64_t hi = ttft_snapshot_status_quantile(s, TTFT_CLASS_ALL, sts, k_views[v], 1.0);
      if (n && !ms->fuzzy)
        FUZZ_CHECK(lo == ms->min && hi == ms->max, "%s view of %s: min %llu max %llu, model %llu %llu",
                   ttft_status_name(sts), ttft_metric_name(k_views[v]), (unsigned long long)lo,
                   (unsigned long long)hi, (unsigned long long)ms->min, (unsigned long long)ms->max);
      /* the sum is exact while count * max < 2^64 (it cannot have wrapped) */
      uint64_t sum = ttft_snapshot_status_sum(s, TTFT_CLASS_ALL, sts, k_views[v]);
      if (n && !ms->fuzzy && (unsigned __int128)ms->n * ms->max <= UINT64_MAX)
        FUZZ_CHECK(sum == ms->sum, "%s view of %s: sum %llu, model %llu", ttft_status_name(sts),
                   ttft_metric_name(k_views[v]), (unsigned long long)sum, (unsigned long long)ms->sum);
      if (!n) FUZZ_CHECK(sum == 0, "empty %s view of %s: sum %llu", ttft_status_name(sts),
                         ttft_metric_name(k_views[v]), (unsigned long long)sum);
      uint64_t prev = lo;
      for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        uint64_t x = ttft_snapshot_status_quantile(s, TTFT_CLASS_ALL, sts, k_views[v], qs[i]);
        FUZZ_CHECK(x >= prev && x <= hi, "%s view of %s: q%g = %llu", ttft_status_name(sts),
                   ttft_metric_name(k_views[v]), qs[i], (unsigned long long)x);
        prev = x;
      }
    }
    for (int k = 0; k < NMET; k++) {
      int is_view = k == TTFT_METRIC_TTFT || k == TTFT_METRIC_TPOT || k == TTFT_METRIC_E2E ||
                    k == TTFT_METRIC_OUTPUT_TOKENS;
      if (!is_view)
        FUZZ_CHECK(ttft_snapshot_status_count(s, TTFT_CLASS_ALL, (ttft_status)st, (ttft_metric)k) == 0,
                   "a status view of %s", ttft_metric_name((ttft_metric)k));
    }
  }
}

static void check_snapshot_data(const model *m, const ttft_snapshot *s) {
  FUZZ_CHECK(ttft_snapshot_classes(s) == m->nclasses, "classes %d, model %d", ttft_snapshot_classes(s), m->nclasses);
  FUZZ_CHECK(ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT) == (uint64_t)m->live, "inflight gauge %llu, model %d",
             (unsigned long long)ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT), m->live);
  uint64_t all_ctr[NCTR] = {0}, all_fz[NCTR] = {0}, all_cnt[NMET] = {0};
  for (int c = 0; c < m->nclasses; c++) {
    const mclass *mc = &m->cls[c];
    const char *nm = ttft_snapshot_class_name(s, c);
    FUZZ_CHECK(nm && !strcmp(nm, mc->name), "class %d name \"%s\", model \"%s\"", c, nm ? nm : "(null)", mc->name);
    for (int k = 0; k < NCTR; k++) {
      uint64_t v = ttft_snapshot_class_counter(s, c, (ttft_counter)k);
      /* a token-deadline count after a gap the model could not know is
       * unbounded (D may be 1 ns and the gap days): not compared */
      FUZZ_CHECK(mc->fz[k] >= FZ_HUGE || (v >= mc->ctr[k] && v <= mc->ctr[k] + mc->fz[k]),
                 "class %d counter %s = %llu, model %llu (+%llu)", c,
                 ttft_counter_name((ttft_counter)k), (unsigned long long)v, (unsigned long long)mc->ctr[k],
                 (unsigned long long)mc->fz[k]);
      all_ctr[k] += mc->ctr[k];
      all_fz[k] += mc->fz[k];
    }
    for (int k = 0; k < NMET; k++) {
      uint64_t v = ttft_snapshot_class_count(s, c, (ttft_metric)k);
      FUZZ_CHECK(v == mc->cnt[k], "class %d count of %s = %llu, model %llu", c, ttft_metric_name((ttft_metric)k),
                 (unsigned long long)v, (unsigned long long)mc->cnt[k]);
      all_cnt[k] += mc->cnt[k];
      check_quantiles(s, c, (ttft_metric)k);
    }
    for (int st = 0; st < NSTATUS; st++)
      for (int v = 0; v < NVIEW; v++) {
        uint64_t n = ttft_snapshot_status_count(s, c, (ttft_status)st, k_views[v]);
        FUZZ_CHECK(n == mc->sv[st][v], "class %d %s view of %s: %llu, model %llu", c,
                   ttft_status_name((ttft_status)st), ttft_metric_name(k_views[v]), (unsigned long long)n,
                   (unsigned long long)mc->sv[st][v]);
      }
  }
  check_views(m, s);
  for (int k = 0; k < NCTR; k++) {
    uint64_t v = ttft_snapshot_counter(s, (ttft_counter)k);
    FUZZ_CHECK(all_fz[k] >= FZ_HUGE || (v >= all_ctr[k] && v <= all_ctr[k] + all_fz[k]),
               "counter %s = %llu, model %llu (+%llu)",
               ttft_counter_name((ttft_counter)k), (unsigned long long)v, (unsigned long long)all_ctr[k],
               (unsigned long long)all_fz[k]);
  }
  for (int k = 0; k < NMET; k++) {
    const mstat *st = &m->st[k];
    uint64_t n = ttft_snapshot_count(s, (ttft_metric)k);
    FUZZ_CHECK(n == all_cnt[k] && n == st->n, "count of %s = %llu, model %llu", ttft_metric_name((ttft_metric)k),
               (unsigned long long)n, (unsigned long long)all_cnt[k]);
    check_quantiles(s, TTFT_CLASS_ALL, (ttft_metric)k);
    if (n && !st->fuzzy) {
      uint64_t lo = ttft_snapshot_quantile(s, (ttft_metric)k, 0.0), hi = ttft_snapshot_quantile(s, (ttft_metric)k, 1.0);
      uint64_t sum = 0, sum_hi = 0;
      ttft_snapshot_class_sum_wide(s, TTFT_CLASS_ALL, (ttft_metric)k, &sum_hi, &sum);
      FUZZ_CHECK(lo == st->min && hi == st->max && sum == st->sum && sum_hi == st->sum_hi,
                 "%s: min %llu max %llu sum %llu:%llu, model %llu %llu %llu:%llu", ttft_metric_name((ttft_metric)k),
                 (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)sum_hi,
                 (unsigned long long)sum, (unsigned long long)st->min, (unsigned long long)st->max,
                 (unsigned long long)st->sum_hi, (unsigned long long)st->sum);
      FUZZ_CHECK(ttft_snapshot_sum(s, (ttft_metric)k) == (st->sum_hi ? UINT64_MAX : st->sum),
                 "%s: the uint64 sum saturates", ttft_metric_name((ttft_metric)k));
    }
  }
  if (!m->splits_fuzzy) {
    for (unsigned i = 0; i < 2; i++)
      FUZZ_CHECK(ttft_snapshot_split_count(s, TTFT_SPLIT_PREFIX_CACHE, i) == m->split_cache[i],
                 "prefix split %u: %llu, model %llu", i,
                 (unsigned long long)ttft_snapshot_split_count(s, TTFT_SPLIT_PREFIX_CACHE, i),
                 (unsigned long long)m->split_cache[i]);
  }
  FUZZ_CHECK(ttft_snapshot_bands(s) == NBANDS, "bands %u", ttft_snapshot_bands(s));
  for (unsigned i = 0; i < NBANDS; i++)
    FUZZ_CHECK(ttft_snapshot_split_count(s, TTFT_SPLIT_PROMPT_BAND, i) == m->split_band[i],
               "band split %u: %llu, model %llu", i,
               (unsigned long long)ttft_snapshot_split_count(s, TTFT_SPLIT_PROMPT_BAND, i),
               (unsigned long long)m->split_band[i]);
}

static void check_same_data(const ttft_snapshot *a, const ttft_snapshot *b, uint64_t mult, const char *what) {
  for (int k = 0; k < NCTR; k++)
    FUZZ_CHECK(ttft_snapshot_counter(b, (ttft_counter)k) == mult * ttft_snapshot_counter(a, (ttft_counter)k),
               "%s: counter %s %llu vs %llu", what, ttft_counter_name((ttft_counter)k),
               (unsigned long long)ttft_snapshot_counter(b, (ttft_counter)k),
               (unsigned long long)ttft_snapshot_counter(a, (ttft_counter)k));
  for (int k = 0; k < NMET; k++) {
    FUZZ_CHECK(ttft_snapshot_count(b, (ttft_metric)k) == mult * ttft_snapshot_count(a, (ttft_metric)k),
               "%s: count of %s", what, ttft_metric_name((ttft_metric)k));
    {
      uint64_t ah = 0, al = 0, bh = 0, bl = 0;
      ttft_snapshot_class_sum_wide(a, TTFT_CLASS_ALL, (ttft_metric)k, &ah, &al);
      ttft_snapshot_class_sum_wide(b, TTFT_CLASS_ALL, (ttft_metric)k, &bh, &bl);
      unsigned __int128 aw = (unsigned __int128)ah << 64 | al, bw = (unsigned __int128)bh << 64 | bl;
      FUZZ_CHECK(bw == aw * mult, "%s: sum of %s", what, ttft_metric_name((ttft_metric)k));
    }
    if (ttft_snapshot_count(a, (ttft_metric)k)) {
      FUZZ_CHECK(ttft_snapshot_quantile(b, (ttft_metric)k, 0.0) == ttft_snapshot_quantile(a, (ttft_metric)k, 0.0) &&
                     ttft_snapshot_quantile(b, (ttft_metric)k, 1.0) == ttft_snapshot_quantile(a, (ttft_metric)k, 1.0),
                 "%s: min/max of %s", what, ttft_metric_name((ttft_metric)k));
    }
    check_quantiles(b, TTFT_CLASS_ALL, (ttft_metric)k);
  }
}

/* the format `pick` names, thoroughly (one per snapshot: the input
 * chooses which; rendering all five each time cost most of an execution) */
static void snap_formats(const ttft_snapshot *s, unsigned pick) {
  char *t;
  long l;
  check_format(s, (ttft_format)(pick % TTFT_FORMAT_COUNT_), &t, &l, 1);
  free(t);
}

/* encode -> decode -> encode is bit-exact; the decoded data formats the
 * same (in the format `pick` names) */
static void snap_codec(const ttft_snapshot *s, unsigned pick) {
  long n = ttft_snapshot_encode(s, NULL, 0);
  FUZZ_CHECK(n > 0, "encode size %ld", n);
  unsigned char *e1 = malloc((size_t)n), *e2 = malloc((size_t)n);
  FUZZ_CHECK(e1 && e2, "malloc");
  FUZZ_CHECK(ttft_snapshot_encode(s, e1, (size_t)n) == n, "encode");
  int err = 0;
  ttft_snapshot *d = ttft_snapshot_decode(e1, (size_t)n, &err);
  FUZZ_CHECK(d != NULL, "decode of a fresh encoding: %d", err);
  FUZZ_CHECK(ttft_snapshot_encode(d, e2, (size_t)n) == n && memcmp(e1, e2, (size_t)n) == 0, "re-encode differs");
  check_same_data(s, d, 1, "decoded");
  if (pick % 4 == 0) { /* one input in four: rendering costs more than the rest */
    ttft_format f = (ttft_format)(pick / 4 % TTFT_FORMAT_COUNT_);
    char *t1, *t2;
    long l1, l2;
    check_format(s, f, &t1, &l1, 0);
    check_format(d, f, &t2, &l2, 0);
    FUZZ_CHECK(l2 == l1 && memcmp(t2, t1, (size_t)l2) == 0, "decoded snapshot formats differently (%s)",
               ttft_format_name(f));
    free(t1);
    free(t2);
  }
  ttft_snapshot_free(d);
  if (pick % 2) { /* the base64 form half the time */
    free(e1);
    free(e2);
    return;
  }
  long b = ttft_snapshot_encode_base64(s, NULL, 0);
  FUZZ_CHECK(b > 0, "encode_base64 size");
  char *txt = malloc((size_t)b + 1);
  FUZZ_CHECK(txt && ttft_snapshot_encode_base64(s, txt, (size_t)b + 1) == b && strlen(txt) == (size_t)b, "encode_base64");
  d = ttft_snapshot_decode_base64(txt, (size_t)b, &err);
  FUZZ_CHECK(d != NULL, "decode_base64: %d", err);
  FUZZ_CHECK(ttft_snapshot_encode(d, e2, (size_t)n) == n && memcmp(e1, e2, (size_t)n) == 0, "base64 round trip");
  ttft_snapshot_free(d);
  free(txt);
  free(e1);
  free(e2);
}

/* merge with itself doubles; classes matched by name */
static int has_counter_from_2_63(const ttft_snapshot *s) {
  for (int c = 0; c < ttft_snapshot_classes(s); c++)
    for (int k = 0; k < NCTR; k++)
      if (ttft_snapshot_class_counter(s, c, (ttft_counter)k) >> 63) return 1;
  return 0;
}

static void snap_merge(const ttft_snapshot *s, unsigned pick) {
  int err = 0;
  ttft_snapshot *mg = ttft_snapshot_merge(s, s, &err);
  /* token deadlines with D = 1 ns and gaps of days count past 2^63: the
   * doubled count would not fit, which merge refuses (never wraps) */
  if (!mg && err == TTFT_ERANGE && has_counter_from_2_63(s)) return;
  FUZZ_CHECK(mg != NULL, "merge: %d", err);
  FUZZ_CHECK(ttft_snapshot_classes(mg) == ttft_snapshot_classes(s), "merge classes");
  check_same_data(s, mg, 2, "merge(s, s)");
  if (pick % 4 == 0) {
    char *t;
    long l;
    check_format(mg, (ttft_format)(pick / 4 % TTFT_FORMAT_COUNT_), &t, &l, 0);
    free(t);
  }
  ttft_snapshot_free(mg);
}

/* delta with the previous snapshot subtracts */
static void snap_delta(const ttft_snapshot *s, const ttft_snapshot *prev, unsigned pick) {
  int err = 0;
  ttft_snapshot *dl = ttft_snapshot_delta(s, prev, &err);
  /* token deadlines with D = 1 ns and gaps of centuries can count past
   * 2^64 and wrap (a limit docs/metrics.md states); delta refuses what
   * went backwards */
  if (!dl && has_counter_from_2_63(prev)) return;
  FUZZ_CHECK(dl != NULL, "delta: %d", err);
  for (int k = 0; k < NCTR; k++)
    FUZZ_CHECK(ttft_snapshot_counter(dl, (ttft_counter)k) ==
                   ttft_snapshot_counter(s, (ttft_counter)k) - ttft_snapshot_counter(prev, (ttft_counter)k),
               "delta counter %s", ttft_counter_name((ttft_counter)k));
  for (int k = 0; k < NMET; k++) {
    FUZZ_CHECK(ttft_snapshot_count(dl, (ttft_metric)k) ==
                   ttft_snapshot_count(s, (ttft_metric)k) - ttft_snapshot_count(prev, (ttft_metric)k),
               "delta count of %s", ttft_metric_name((ttft_metric)k));
    check_quantiles(dl, TTFT_CLASS_ALL, (ttft_metric)k);
  }
  if (pick % 4 == 0) {
    char *t;
    long l;
    check_format(dl, (ttft_format)(pick / 4 % TTFT_FORMAT_COUNT_), &t, &l, 0);
    free(t);
  }
  ttft_snapshot_free(dl);
}

/* A snapshot checked against the model, then one of: a format, the codec
 * round trip, merge, delta — the input picks which, and which format. */
static void op_snapshot(model *m, fz_in *in) {
  uint8_t what = fz_u8(in);
  if (m->nsnap >= MAX_SNAPSHOTS) return;
  m->nsnap++;
  ttft_snapshot *s = ttft_snapshot_take(m->r);
  FUZZ_CHECK(s != NULL, "snapshot_take");
  check_snapshot_data(m, s);
  /* a format in one snapshot of eight (fuzz_decode renders every format
   * of every snapshot it decodes; here rendering cost more than all else) */
  switch (what % 8) {
  case 0: snap_formats(s, what >> 3); break;
  case 1: case 2: snap_codec(s, what >> 3); break;
  case 3: case 4: snap_merge(s, what >> 3); break;
  default:
    if (m->prev) snap_delta(s, m->prev, what >> 3);
    else snap_codec(s, what >> 3);
    break;
  }
  ttft_snapshot_free(m->prev);
  m->prev = s;
}

/* ----------------------------------------------------------------- main */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_in in = {data, size};
  static model mm;
  model *m = &mm;
  memset(m, 0, sizeof *m);
  fz_allocator_install();
  long live_at_start = g_live_blocks;
  static const uint64_t stalls[] = {1, 1000, 40000, 1000000, 500000000, UINT64_MAX};
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.max_inflight = 1 + fz_u8(&in) % 8;
  uint8_t th = fz_u8(&in);
  cfg.max_threads = th % 2; /* 0: every call through the shared shard */
  cfg.max_classes = 1 + fz_u8(&in) % 3;
  /* A small exposition: three classic bounds per metric (the default grids
   * have up to 62, and rendering them dominated an execution), except in
   * one input of sixteen; idle classes exported in one of four. */
  static const uint64_t few_ns[3] = {1000000, 50000000, 2000000000}, few_tok[3] = {0, 4, 64};
  if ((th >> 1) % 16) {
    for (int k = 0; k < TTFT_PROM_CONFIG_METRICS; k++) {
      cfg.prom_buckets[k] = k == TTFT_METRIC_OUTPUT_TOKENS ? few_tok : few_ns;
      cfg.prom_n_buckets[k] = 3;
    }
  }
  cfg.export_idle_classes = (th >> 5) % 4 == 0;
  uint8_t sb = fz_u8(&in);
  cfg.stall_threshold_ns = stalls[sb % 6];
  cfg.prom_summaries = (sb >> 3) % 4 == 0;
  cfg.native_schema = (int)((sb >> 3) % 13) - 4;
  /* the least bucket memory: the pool runs dry, and observations are
   * binned by power of two (TTFT_GAUGE_COARSE), a path worth fuzzing */
  cfg.memory_limit = TTFT_MIN_MEMORY_LIMIT;
  m->r = ttft_registry_new(&cfg);
  FUZZ_CHECK(m->r != NULL, "registry_new");
  m->max_inflight = cfg.max_inflight;
  m->max_classes = cfg.max_classes;
  m->stall_ns = cfg.stall_threshold_ns;
  m->nclasses = 1;
  snprintf(m->cls[0].name, sizeof m->cls[0].name, "default");
  ttft_slo_init(&m->cls[0].slo);
  m->cls[0].slo.stall_threshold_ns = m->stall_ns;
  m->clock = 1000000000ull;

  for (int ops = 0; ops < MAX_OPS && fz_left(&in); ops++) {
    switch (fz_u8(&in) % 16) {
    case 0: op_begin(m, &in, 0); break;
    case 1: case 15: op_begin(m, &in, 1); break;
    case 2: op_mark(m, &in); break;
    case 3: case 4: case 5: op_emit(m, &in); break;
    case 6: case 7: op_end(m, &in); break;
    case 8: op_class_add(m, &in); break;
    case 9: op_seq_stats(m, &in); break;
    case 10: op_stalled_now(m, &in); break;
    case 12: op_annotate(m, &in); break;
    case 13: case 14: op_step(m, &in); break;
    default: op_snapshot(m, &in); break;
    }
    FUZZ_CHECK(ttft_inflight(m->r) == m->live, "inflight %ld, model %d (a slot leaked)", ttft_inflight(m->r), m->live);
  }
  /* end everything: the registry must come back to empty */
  for (int i = 0; i < m->nseq; i++) {
    mseq *q = &m->seq[i];
    if (!q->live) continue;
    FUZZ_CHECK(ttft_stream_end(m->r, q->h, TTFT_ERROR, TTFT_NOW) == TTFT_OK, "final stream_end");
    FUZZ_CHECK(ttft_stream_end(m->r, q->h, TTFT_ERROR, TTFT_NOW) == TTFT_ESTALE, "second stream_end");
    q->live = 0;
    m->live--;
  }
  FUZZ_CHECK(ttft_inflight(m->r) == 0, "inflight %ld after ending everything", ttft_inflight(m->r));
  m->nsnap = 0;
  ttft_snapshot *s = ttft_snapshot_take(m->r);
  FUZZ_CHECK(s && ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT) == 0, "final snapshot");
  FUZZ_CHECK(ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN) ==
                 ttft_snapshot_counter(s, TTFT_COUNTER_COMPLETED) + ttft_snapshot_counter(s, TTFT_COUNTER_CANCELLED) +
                     ttft_snapshot_counter(s, TTFT_COUNTER_ERRORS),
             "begun != ended after ending everything");
  ttft_snapshot_free(s);
  ttft_snapshot_free(m->prev);
  ttft_registry_free(m->r);
  FUZZ_CHECK(g_live_blocks == live_at_start, "%ld block(s) still allocated after freeing everything",
             g_live_blocks - live_at_start);
  return 0;
}
