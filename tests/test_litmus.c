/*
 * test_litmus.c — one litmus-style test per lock-free protocol, many
 * threads, a bounded number of iterations, exact invariants (no timing):
 *
 *   slot_reuse      streams begin, emit and end on a registry of 4 slots
 *                   (reused all the time) while other threads hold stale
 *                   handles: a stale ttft_seq_stats is refused or
 *                   describes the handle's own stream (its t_begin, tokens
 *                   a multiple of its owner's emission size, emissions
 *                   within one event of tokens: ttft_seq_stats reads its
 *                   fields one by one, "a value may be one event behind",
 *                   and 4 in 6e8 such reads are), never the
 *                   stream now in the slot; a stale ttft_token_emitted is
 *                   always refused; at the end TOKENS and COMPLETED are
 *                   exactly what the owners recorded
 *   wide_sum        (white-box) one private writer and 4 shared writers
 *                   add values near 2^61 (a crossing of 2^63 every few
 *                   adds) while readers read: every read of the private
 *                   sum is one of its prefix sums (never torn: a crossing
 *                   counted twice or missed is 2^64 off), reads never go
 *                   down, the shared total is exact at the end
 *   step_ring       (white-box) one engine loop laps the 1024-entry ring
 *                   while 6 threads read gaps near its head: every step
 *                   duration read whole is one the loop wrote for its kind
 *                   (a field of another lap is thousands of ns off)
 *   clock_seqlock   (white-box) a thread re-anchors the counter clock
 *                   (TTFT_CLOCK_TSC: TSC / CNTVCT_EL0) as fast as it can
 *                   while 6 threads read it: never backwards per thread,
 *                   never below a reading another thread published
 *                   (release/acquire) before this one read (a torn triple
 *                   — an anchor of one triple with the ns of another —
 *                   shows as a step back); within 1 s of CLOCK_MONOTONIC
 *
 * What the emulator shows. Under qemu-user (aarch64 on an x86-64 host)
 * the multi-threaded TCG runs each guest thread on a host thread, truly
 * in parallel: missing atomicity (a torn 128-bit sum, a lost CAS race, a
 * slot reused under a reader without the generation check) and missing
 * synchronisation show up as on hardware. qemu translates the guest's
 * barriers (dmb, ldar/stlr, the acquire/release of C11 atomics) into host
 * fences where the host needs them, but the host is x86: TSO keeps stores
 * in order and loads in order, so most reorderings an ARM core may make
 * (a relaxed load satisfied early, two stores to different lines visible
 * in the other order, a load passing a load) never happen under the
 * emulator. A missing acquire or release is therefore not found there; the
 * comments on each atomic argue those (docs/design.md, src/record). On
 * real ARM hardware the same tests do exercise them.
 *
 * Iterations are bounded so that a run takes seconds natively and well
 * under a minute under qemu-aarch64.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ttft.h"
#include "task.h"
#ifdef TTFT_TEST_STATIC
#include "record/registry.h"
#endif

static uint64_t rng(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

/* ============================================================ slot reuse */
#define OWNERS 4
#define STALES 4
#define STREAMS 1000 /* per owner */
#define RECS 64      /* the last handles an owner published */
#define EMITS 3      /* emissions per stream */

typedef struct rec {
  _Atomic uint64_t seq;    /* the handle                        */
  _Atomic uint64_t t_begin;
} rec;

typedef struct owner {
  _Atomic uint64_t pub; /* streams begun, published; record (pub - 1) % RECS is the newest */
  rec recs[RECS];
} owner;

static struct {
  ttft_registry *r;
  owner own[OWNERS];
  _Atomic int done;
  _Atomic unsigned long bad_stats, bad_emit, stale_ok, stale_refused;
  _Atomic uint64_t tokens;
} g_sr;

static void *sr_owner(void *p) {
  int id = (int)(intptr_t)p;
  owner *o = &g_sr.own[id];
  uint64_t tokens = 0;
  for (uint64_t i = 0; i < STREAMS; i++) {
    /* synthetic times, distinct per (owner, stream) */
    uint64_t tb = 1 + ((uint64_t)id << 40) + (i << 16);
    ttft_seq s = 0;
    while (!(s = ttft_begin(g_sr.r, tb))) sched_yield(); /* 4 slots: wait for one */
    rec *rc = &o->recs[i % RECS];
    atomic_store_explicit(&rc->seq, (uint64_t)s, memory_order_relaxed);
    atomic_store_explicit(&rc->t_begin, tb, memory_order_relaxed);
    /* release: the record above before the count that names it */
    atomic_store_explicit(&o->pub, i + 1, memory_order_release);
    for (int e = 0; e < EMITS; e++) {
      if (ttft_token_emitted(g_sr.r, s, (uint32_t)id + 1, tb + 1000 * (uint64_t)(e + 1)) == TTFT_OK)
        tokens += (uint64_t)id + 1;
      sched_yield(); /* a live stream for the stale threads to look at */
    }
    ttft_stream_end(g_sr.r, s, TTFT_COMPLETED, tb + 10000);
  }
  atomic_fetch_add(&g_sr.tokens, tokens);
  return NULL;
}

/* A handle published by some owner and its t_begin, read as a pair: the
 * owner's count is re-read after the record (acquire fence between), and
 * the record is used only if the owner has not come round to overwrite
 * it. *ended: the owner began a later stream, so this one has ended. */
static int sr_pick(uint64_t *seed, int *id, uint64_t *s, uint64_t *tb, int *ended) {
  *id = (int)(rng(seed) % OWNERS);
  owner *o = &g_sr.own[*id];
  /* acquire: pairs with the owner's release of pub */
  uint64_t p = atomic_load_explicit(&o->pub, memory_order_acquire);
  if (p < 2) return 0;
  /* the newest (often live) half the time, else one up to RECS/2 back */
  uint64_t back = rng(seed) % 2 ? 1 : 1 + rng(seed) % (p < RECS / 2 ? p : RECS / 2);
  uint64_t i = p - back;
  rec *rc = &o->recs[i % RECS];
  *s = atomic_load_explicit(&rc->seq, memory_order_relaxed);
  *tb = atomic_load_explicit(&rc->t_begin, memory_order_relaxed);
  /* acquire fence: the record's loads before the re-read of pub */
  atomic_thread_fence(memory_order_acquire);
  uint64_t p2 = atomic_load_explicit(&o->pub, memory_order_relaxed);
  if (p2 - i >= RECS - 1) return 0; /* overwritten meanwhile (or about to be) */
  *ended = i + 1 < p;
  return 1;
}

static void *sr_stale(void *p) {
  uint64_t seed = 0x9e3779b97f4a7c15u ^ (uint64_t)(intptr_t)p;
  while (!atomic_load_explicit(&g_sr.done, memory_order_relaxed)) {
    int id, ended;
    uint64_t s, tb;
    if (!sr_pick(&seed, &id, &s, &tb, &ended)) {
      sched_yield();
      continue;
    }
    ttft_seq_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    int rc = ttft_seq_stats(g_sr.r, (ttft_seq)s, &info);
    if (rc == TTFT_OK) {
      atomic_fetch_add_explicit(&g_sr.stale_ok, 1, memory_order_relaxed);
      /* the handle's own stream, never the one now in its slot */
      if (info.t_begin_ns != tb || info.tokens % (uint64_t)(id + 1) != 0 ||
          info.tokens > (uint64_t)(id + 1) * EMITS ||
          info.tokens / (uint64_t)(id + 1) + 1 < info.emissions || info.emissions + 1 < info.tokens / (uint64_t)(id + 1)) {
        atomic_fetch_add_explicit(&g_sr.bad_stats, 1, memory_order_relaxed);
        fprintf(stderr, "owner %d handle %llx: t_begin %llu (want %llu), tokens %llu, emissions %u\n", id,
                (unsigned long long)s, (unsigned long long)info.t_begin_ns, (unsigned long long)tb,
                (unsigned long long)info.tokens, info.emissions);
      }
    } else if (rc == TTFT_ESTALE) {
      atomic_fetch_add_explicit(&g_sr.stale_refused, 1, memory_order_relaxed);
    } else {
      atomic_fetch_add_explicit(&g_sr.bad_stats, 1, memory_order_relaxed);
    }
    /* an ended stream's handle: an emission through it is refused, even
     * when its slot now holds another stream */
    if (ended && ttft_token_emitted(g_sr.r, (ttft_seq)s, 1, tb + 5000) != TTFT_ESTALE)
      atomic_fetch_add_explicit(&g_sr.bad_emit, 1, memory_order_relaxed);
    sched_yield(); /* the owners run (2 cores here, 8 threads) */
  }
  return NULL;
}

TEST(slot_reuse) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 4;
  c.max_threads = 4;
  memset(&g_sr, 0, sizeof g_sr);
  g_sr.r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(g_sr.r);
  if (!g_sr.r) return;
  pthread_t o[OWNERS], st[STALES];
  for (int i = 0; i < STALES; i++) pthread_create(&st[i], NULL, sr_stale, (void *)(intptr_t)i);
  for (int i = 0; i < OWNERS; i++) pthread_create(&o[i], NULL, sr_owner, (void *)(intptr_t)i);
  for (int i = 0; i < OWNERS; i++) pthread_join(o[i], NULL);
  atomic_store(&g_sr.done, 1);
  for (int i = 0; i < STALES; i++) pthread_join(st[i], NULL);
  fprintf(stderr, "stale reads: %lu described their own stream, %lu refused\n",
          (unsigned long)atomic_load(&g_sr.stale_ok), (unsigned long)atomic_load(&g_sr.stale_refused));
  EXPECT_EQ_U64(0, atomic_load(&g_sr.bad_stats));
  EXPECT_EQ_U64(0, atomic_load(&g_sr.bad_emit));
  EXPECT_GT_U64(atomic_load(&g_sr.stale_refused), 0);
  ttft_snapshot *snap = ttft_snapshot_take(g_sr.r);
  EXPECT_NOT_NULL(snap);
  if (snap) {
    uint64_t want = 0;
    for (int i = 0; i < OWNERS; i++) want += (uint64_t)(i + 1) * EMITS * STREAMS;
    EXPECT_EQ_U64(want, atomic_load(&g_sr.tokens));
    EXPECT_EQ_U64(want, ttft_snapshot_counter(snap, TTFT_COUNTER_TOKENS));
    EXPECT_EQ_U64((uint64_t)OWNERS * STREAMS, ttft_snapshot_counter(snap, TTFT_COUNTER_COMPLETED));
    EXPECT_EQ_U64((uint64_t)OWNERS * STREAMS, ttft_snapshot_counter(snap, TTFT_COUNTER_BEGUN));
    ttft_snapshot_free(snap);
  }
  ttft_registry_free(g_sr.r);
}

#ifdef TTFT_TEST_STATIC
#define WHITE_BOX(call) call
#else
#define WHITE_BOX(call) \
  fprintf(stderr, "white-box: runs in test_litmus_static (the internals are hidden in the .so)\n")
#endif

#ifdef TTFT_TEST_STATIC
/* ============================================================== wide sum */
#define WS_ADDS 40000
#define WS_SHARED_WRITERS 4
#define WS_READERS 3

typedef unsigned __int128 u128;

static struct {
  ttft__hist priv, shared;
  u128 *prefix; /* prefix[i] = the private sum after i adds */
  _Atomic int done;
  _Atomic unsigned long bad, reads;
} g_ws;

/* adds of 2^61 .. 2^61 + 2^20: a crossing of 2^63 every 4 or so */
static uint64_t ws_value(uint64_t *seed) { return (UINT64_C(1) << 61) + (rng(seed) & 0xfffffu); }

static void *ws_private(void *p) {
  (void)p;
  uint64_t seed = 42;
  for (int i = 0; i < WS_ADDS; i++) ttft__hist_sum_add(&g_ws.priv, ws_value(&seed));
  return NULL;
}

static void *ws_shared(void *p) {
  uint64_t seed = 1000 + (uint64_t)(intptr_t)p;
  for (int i = 0; i < WS_ADDS / 4; i++) ttft__hist_sum_add_shared(&g_ws.shared, ws_value(&seed));
  return NULL;
}

static void *ws_reader(void *p) {
  (void)p;
  size_t j = 0; /* the private sum read last is prefix[j] */
  u128 last_shared = 0;
  unsigned long bad = 0, reads = 0;
  do {
    uint64_t hi, lo = ttft__hist_sum_read(&g_ws.priv, &hi);
    u128 v = (u128)hi << 64 | lo;
    while (j < WS_ADDS && g_ws.prefix[j] < v) j++;
    bad += g_ws.prefix[j] != v; /* not a prefix sum (torn), or below the last one read */
    lo = ttft__hist_sum_read(&g_ws.shared, &hi);
    u128 w = (u128)hi << 64 | lo;
    bad += w < last_shared;
    last_shared = w;
    reads++;
  } while (!atomic_load_explicit(&g_ws.done, memory_order_relaxed));
  atomic_fetch_add(&g_ws.bad, bad);
  atomic_fetch_add(&g_ws.reads, reads);
  return NULL;
}

static void wide_sum(void) {
  memset(&g_ws, 0, sizeof g_ws);
  g_ws.prefix = calloc(WS_ADDS + 1, sizeof *g_ws.prefix);
  EXPECT_NOT_NULL(g_ws.prefix);
  if (!g_ws.prefix) return;
  uint64_t seed = 42;
  for (int i = 0; i < WS_ADDS; i++) g_ws.prefix[i + 1] = g_ws.prefix[i] + ws_value(&seed);
  u128 want_shared = 0;
  for (int t = 0; t < WS_SHARED_WRITERS; t++) {
    uint64_t s2 = 1000 + (uint64_t)t;
    for (int i = 0; i < WS_ADDS / 4; i++) want_shared += ws_value(&s2);
  }
  pthread_t rd[WS_READERS], wr[WS_SHARED_WRITERS + 1];
  for (int i = 0; i < WS_READERS; i++) pthread_create(&rd[i], NULL, ws_reader, NULL);
  pthread_create(&wr[0], NULL, ws_private, NULL);
  for (int i = 0; i < WS_SHARED_WRITERS; i++) pthread_create(&wr[i + 1], NULL, ws_shared, (void *)(intptr_t)i);
  for (int i = 0; i <= WS_SHARED_WRITERS; i++) pthread_join(wr[i], NULL);
  atomic_store(&g_ws.done, 1);
  for (int i = 0; i < WS_READERS; i++) pthread_join(rd[i], NULL);
  fprintf(stderr, "%lu concurrent reads of both sums\n", (unsigned long)atomic_load(&g_ws.reads));
  EXPECT_EQ_U64(0, atomic_load(&g_ws.bad));
  uint64_t hi, lo = ttft__hist_sum_read(&g_ws.priv, &hi);
  EXPECT_EQ_U64((uint64_t)(g_ws.prefix[WS_ADDS] >> 64), hi);
  EXPECT_EQ_U64((uint64_t)g_ws.prefix[WS_ADDS], lo);
  lo = ttft__hist_sum_read(&g_ws.shared, &hi);
  EXPECT_EQ_U64((uint64_t)(want_shared >> 64), hi);
  EXPECT_EQ_U64((uint64_t)want_shared, lo);
  EXPECT_GT_U64(hi, 0); /* it did cross 2^64 */
  free(g_ws.prefix);
}

/* ============================================================= step ring */
#define SR_STEPS (32 * TTFT_STEP_RING)
#define SR_READERS 6

static struct {
  ttft_registry *r;
  _Atomic uint64_t now;
  _Atomic int done;
  _Atomic unsigned long bad, torn, reads;
} g_st;

/* durations: without prefill 1001 + 2000 j, with prefill 2000 + 2000 j
 * (j < 5): odd and even, and a field of another lap (>= 1024 steps of
 * >= 1001 ns away) is far outside both sets */
static int dur_ok(uint64_t d, int prefill) {
  if (prefill) return d >= 2000 && d <= 10000 && d % 2000 == 0;
  return d >= 1001 && d <= 9001 && (d - 1001) % 2000 == 0;
}

static void *st_writer(void *p) {
  (void)p;
  uint64_t seed = 7, t = UINT64_C(1000000000);
  ttft_step_info in;
  ttft_step_info_init(&in);
  for (int k = 0; k < SR_STEPS; k++) {
    int pf = rng(&seed) % 4 == 0;
    uint64_t d = (pf ? 2000 : 1001) + 2000 * (rng(&seed) % 5);
    in.prefill_tokens = pf ? 64 : 0;
    ttft_engine_step(g_st.r, &in, t, t + d);
    t += d;
    atomic_store_explicit(&g_st.now, t, memory_order_relaxed);
  }
  return NULL;
}

static void *st_reader(void *p) {
  uint64_t seed = 77 + (uint64_t)(intptr_t)p;
  unsigned long bad = 0, torn = 0, reads = 0;
  while (!atomic_load_explicit(&g_st.done, memory_order_relaxed)) {
    uint64_t now = atomic_load_explicit(&g_st.now, memory_order_relaxed);
    uint64_t len = 1 + rng(&seed) % 50000, b = now - rng(&seed) % 20000, a = b > len ? b - len : 0;
    ttft__gap_steps g;
    ttft__gap_steps_read(g_st.r, a, b, 1, &g);
    if (g.covered > b - a || g.prod > b - a || g.earlier > g.covered || g.npre > TTFT__GAP_PREFILL ||
        g.nbefore > TTFT__GAP_BEFORE)
      bad++;
    for (unsigned j = 0; j < g.nbefore; j++) bad += !dur_ok(g.before[j], 0);
    for (unsigned j = 0; j < g.npre; j++) bad += g.pre_len[j] > 10000;
    torn += g.torn > 0;
    reads++;
  }
  atomic_fetch_add(&g_st.bad, bad);
  atomic_fetch_add(&g_st.torn, torn);
  atomic_fetch_add(&g_st.reads, reads);
  return NULL;
}

static void step_ring(void) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 4;
  c.max_threads = 8;
  memset(&g_st, 0, sizeof g_st);
  g_st.r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(g_st.r);
  if (!g_st.r) return;
  atomic_store(&g_st.now, UINT64_C(1000000000));
  pthread_t w, rd[SR_READERS];
  for (int i = 0; i < SR_READERS; i++) pthread_create(&rd[i], NULL, st_reader, (void *)(intptr_t)i);
  pthread_create(&w, NULL, st_writer, NULL);
  pthread_join(w, NULL);
  atomic_store(&g_st.done, 1);
  for (int i = 0; i < SR_READERS; i++) pthread_join(rd[i], NULL);
  fprintf(stderr, "%d steps, %lu gap reads, %lu met a torn or overwritten entry\n", SR_STEPS,
          (unsigned long)atomic_load(&g_st.reads), (unsigned long)atomic_load(&g_st.torn));
  EXPECT_EQ_U64(0, atomic_load(&g_st.bad));
  EXPECT_GT_U64(atomic_load(&g_st.reads), 0);
  /* every entry of the last lap reads whole once the writer is done */
  ttft__gap_steps g;
  uint64_t now = atomic_load(&g_st.now);
  ttft__gap_steps_read(g_st.r, now - 1, now, 1, &g);
  EXPECT_EQ_U64(0, g.torn);
  EXPECT_EQ_U64(TTFT__GAP_BEFORE, g.nbefore);
  for (unsigned j = 0; j < g.nbefore; j++) EXPECT_TRUE(dur_ok(g.before[j], 0));
  ttft_registry_free(g_st.r);
}

/* ========================================================= clock seqlock */
static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

#define CK_READS 100000
#define CK_READERS 6

static struct {
  _Atomic uint64_t latest; /* the largest reading published so far */
  _Atomic int done;
  _Atomic unsigned long back, cross_back, far, refines;
} g_ck;

static void *ck_reader(void *p) {
  (void)p;
  uint64_t prev = 0;
  unsigned long back = 0, cross = 0, far = 0;
  for (int i = 0; i < CK_READS; i++) {
    /* acquire: a reading another thread published, read before ours */
    uint64_t seen = atomic_load_explicit(&g_ck.latest, memory_order_acquire);
    uint64_t t = ttft__clock_read(TTFT_CLOCK_TSC);
    back += t < prev;
    cross += t < seen;
    prev = t;
    if ((i & 1023) == 0) {
      uint64_t m = mono_ns();
      far += (t > m ? t - m : m - t) > UINT64_C(1000000000);
    }
    /* release: our reading, for the others to compare theirs with */
    uint64_t cur = seen;
    while (cur < t && !atomic_compare_exchange_weak_explicit(&g_ck.latest, &cur, t, memory_order_release,
                                                             memory_order_relaxed)) {
    }
  }
  atomic_fetch_add(&g_ck.back, back);
  atomic_fetch_add(&g_ck.cross_back, cross);
  atomic_fetch_add(&g_ck.far, far);
  return NULL;
}

static void *ck_refiner(void *p) {
  (void)p;
  unsigned long n = 0;
  while (!atomic_load_explicit(&g_ck.done, memory_order_relaxed)) n += (unsigned long)ttft__counter_refine_now();
  atomic_store(&g_ck.refines, n);
  return NULL;
}

static void clock_seqlock(void) {
  memset(&g_ck, 0, sizeof g_ck);
  int usable = ttft__counter_usable();
  fprintf(stderr, "CPU counter usable: %d\n", usable);
  if (!usable) {
    /* x86 without an invariant TSC, or another architecture: the clock is
     * clock_gettime, there is no seqlock to race. CI runs on machines
     * that have one (x86-64 hosts, aarch64 under qemu): fail there. */
    const char *ci = getenv("CI");
    EXPECT_TRUE(!(ci && !strcmp(ci, "true")));
    return;
  }
  pthread_t ref, rd[CK_READERS];
  pthread_create(&ref, NULL, ck_refiner, NULL);
  for (int i = 0; i < CK_READERS; i++) pthread_create(&rd[i], NULL, ck_reader, NULL);
  for (int i = 0; i < CK_READERS; i++) pthread_join(rd[i], NULL);
  atomic_store(&g_ck.done, 1);
  pthread_join(ref, NULL);
  fprintf(stderr, "%d reads x %d threads against %lu re-anchors\n", CK_READS, CK_READERS,
          (unsigned long)atomic_load(&g_ck.refines));
  EXPECT_EQ_U64(0, atomic_load(&g_ck.back));
  EXPECT_EQ_U64(0, atomic_load(&g_ck.cross_back));
  EXPECT_EQ_U64(0, atomic_load(&g_ck.far));
  EXPECT_GT_U64(atomic_load(&g_ck.refines), 0);
}
#endif /* TTFT_TEST_STATIC */

TEST(wide_sum) { WHITE_BOX(wide_sum()); }
TEST(step_ring) { WHITE_BOX(step_ring()); }
TEST(clock_seqlock) { WHITE_BOX(clock_seqlock()); }

TU_MAIN()
