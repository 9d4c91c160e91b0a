/* test_reuse.c — slot reuse under hook calls that are still running
 * (issue 9.1; the protocol and its proof are at the top of
 * src/record/reclaim.c).
 *
 * frozen_emitter_*: the reproduction of the hostile review. Thread A loops
 * ttft_token_emitted(r, x, 7, TTFT_NOW) on the only slot; the main thread
 * stops A with a signal whose handler spins (A is often inside the hook),
 * ends x (CANCELLED), makes one unrelated rejected mark, begins y (which
 * wants x's slot), and lets A go. Nobody emits on y, so its stats must show
 * no emission and no token; a begin that had to refuse (A still inside)
 * must succeed once A has left. Run for max_threads 0 (A and main on the
 * shared shard), 1 (A private, main shared; and the other way round) and 4
 * (both private). Rounds: TTFT_REUSE_ROUNDS (default 500).
 *
 * shared_handles_stress: more threads than max_threads; each owns a few
 * sequences whose emissions carry a per-sequence token count, while a
 * canceller ends random live handles; an owner checks before every
 * emission that its sequence holds exactly (emissions x its count) tokens:
 * any stale write into a reused slot breaks that. Runs under TSan in CI.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "ttft.h"
#include "task.h"

static unsigned rounds_wanted(void) {
  const char *e = getenv("TTFT_REUSE_ROUNDS");
  long v = e ? strtol(e, NULL, 10) : 500;
  return v > 0 ? (unsigned)v : 500;
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------ frozen emitter */
typedef struct emitter {
  ttft_registry *r;
  pthread_t th;
  _Atomic ttft_seq x;        /* the handle A emits on                  */
  _Atomic int stop;
  _Atomic int go;            /* A waits for it before its first call  */
  _Atomic unsigned long calls;
  _Atomic int in_hook;       /* A is between entering and leaving the call */
} emitter;

static emitter *g_em;
static _Atomic int g_freeze, g_frozen, g_frozen_in_hook;

static void on_freeze(int sig) {
  (void)sig;
  atomic_store(&g_frozen_in_hook, atomic_load_explicit(&g_em->in_hook, memory_order_relaxed));
  atomic_store(&g_frozen, 1);
  while (atomic_load(&g_freeze)) {
  }
  atomic_store(&g_frozen, 0);
}

static void *emitter_main(void *arg) {
  emitter *em = arg;
  while (!atomic_load(&em->go)) {
  }
  while (!atomic_load(&em->stop)) {
    ttft_seq x = atomic_load(&em->x);
    atomic_store_explicit(&em->in_hook, 1, memory_order_relaxed);
    (void)ttft_token_emitted(em->r, x, 7, TTFT_NOW);
    atomic_store_explicit(&em->in_hook, 0, memory_order_relaxed);
    atomic_fetch_add(&em->calls, 1);
  }
  return NULL;
}

/* wait until A has made `more` calls after now (bounded: 2 s) */
static int wait_calls(emitter *em, unsigned long more) {
  unsigned long c0 = atomic_load(&em->calls);
  uint64_t t0 = mono_ns();
  while (atomic_load(&em->calls) < c0 + more)
    if (mono_ns() - t0 > 2000000000u) return 0;
  return 1;
}

static int seq_clean(ttft_registry *r, ttft_seq y) {
  ttft_seq_info in;
  memset(&in, 0, sizeof in);
  in.struct_size = sizeof in;
  int rc = ttft_seq_stats(r, y, &in);
  if (rc != TTFT_OK) {
    fprintf(stderr, "seq_stats(y) = %s\n", ttft_err_name(rc));
    return 0;
  }
  if (in.emissions || in.tokens || in.ttft_ns) {
    fprintf(stderr, "y corrupted: %u emissions, %llu tokens, ttft %llu ns (nobody emitted on it)\n",
            in.emissions, (unsigned long long)in.tokens, (unsigned long long)in.ttft_ns);
    return 0;
  }
  return 1;
}

/* a_first: A makes the registry's first hook call (takes the first
 * private shard when there is one) */
static void frozen_emitter(uint32_t max_threads, int a_first) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 1;
  c.max_threads = max_threads;
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  if (!r) return;
  emitter em;
  memset(&em, 0, sizeof em);
  em.r = r;
  g_em = &em;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_freeze;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);

  ttft_seq x = 0;
  if (!a_first) x = ttft_begin(r, TTFT_NOW); /* main takes a shard first */
  EXPECT_EQ_INT(0, pthread_create(&em.th, NULL, emitter_main, &em));
  if (a_first) {
    /* A's first call (on a handle that does not exist) takes its shard */
    atomic_store(&em.go, 1);
    if (!wait_calls(&em, 1)) EXPECT_TRUE(!"emitter never ran");
    x = ttft_begin(r, TTFT_NOW);
  }
  EXPECT_TRUE(x != 0);
  atomic_store(&em.x, x);
  atomic_store(&em.go, 1);

  unsigned n = rounds_wanted(), corrupted = 0, in_hook = 0, refused = 0, frozen_rounds = 0;
  for (unsigned k = 0; k < n && x; k++) {
    if (!wait_calls(&em, 2)) {
      EXPECT_TRUE(!"emitter stopped making calls");
      break;
    }
    atomic_store(&g_freeze, 1);
    pthread_kill(em.th, SIGUSR1);
    uint64_t t0 = mono_ns();
    while (!atomic_load(&g_frozen) && mono_ns() - t0 < 1000000000u) {
    }
    int frozen = atomic_load(&g_frozen);
    frozen_rounds += frozen;
    in_hook += frozen && atomic_load(&g_frozen_in_hook);

    EXPECT_ERR(TTFT_OK, ttft_stream_end(r, x, TTFT_CANCELLED, TTFT_NOW));
    EXPECT_ERR(TTFT_ESTALE, ttft_mark(r, 0, TTFT_PHASE_PREEMPTED, TTFT_NOW));
    ttft_seq y = ttft_begin(r, TTFT_NOW);
    atomic_store(&g_freeze, 0);
    t0 = mono_ns();
    while (atomic_load(&g_frozen) && mono_ns() - t0 < 1000000000u) {
    }
    /* A runs on, on the ended handle x: its calls are rejected now */
    if (!wait_calls(&em, 3)) {
      EXPECT_TRUE(!"emitter stopped making calls");
      break;
    }
    if (!y) {
      /* refused while A was inside: now that A has left, it must succeed */
      refused++;
      y = ttft_begin(r, TTFT_NOW);
      EXPECT_TRUE(y != 0);
      if (!y) break;
    }
    if (!seq_clean(r, y)) corrupted++;
    x = y; /* the next round cancels y under A */
    atomic_store(&em.x, x);
  }
  atomic_store(&em.stop, 1);
  pthread_join(em.th, NULL);
  fprintf(stderr,
          "max_threads %u (%s first): %u rounds, %u froze A (%u inside the hook), %u begins "
          "waited out and refused, %u corrupted\n",
          max_threads, a_first ? "emitter" : "main", n, frozen_rounds, in_hook, refused, corrupted);
  EXPECT_EQ_U64(0, corrupted);
  /* the registry's books: every emission A made on x before its end is a
   * token; y never received one */
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_NOT_NULL(s);
  if (s) {
    EXPECT_EQ_U64(ttft_snapshot_counter(s, TTFT_COUNTER_TOKENS) % 7, 0);
    EXPECT_GE_U64(ttft_snapshot_counter(s, TTFT_COUNTER_STALE), n);
    ttft_snapshot_free(s);
  }
  ttft_registry_free(r);
  signal(SIGUSR1, SIG_DFL);
}

TEST(frozen_emitter_shared_shard) { frozen_emitter(0, 0); }
TEST(frozen_emitter_one_private_main) { frozen_emitter(1, 0); }
TEST(frozen_emitter_one_private_emitter) { frozen_emitter(1, 1); }
TEST(frozen_emitter_private_shards) { frozen_emitter(4, 0); }

/* ------------------------------------------------------ shared stress */
#define S_THREADS 6
#define S_PER_THREAD 3
#define S_MAXTHREADS 2

typedef struct sstate {
  ttft_registry *r;
  _Atomic ttft_seq live[S_THREADS * S_PER_THREAD]; /* what the canceller may end */
  _Atomic int stop;
  _Atomic unsigned long corrupted, checks, cancels, emits;
} sstate;

/* tokens per emission of a sequence: changes from one generation of a
 * slot to the next (the generation's count is above its low 8 bits) */
static uint32_t tag_of(ttft_seq h) { return 1 + (uint32_t)((h >> 40) % 13); }

static uint64_t xorshift(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

typedef struct owner_arg {
  sstate *st;
  unsigned id;
} owner_arg;

static void *owner_main(void *p) {
  owner_arg *a = p;
  sstate *st = a->st;
  uint64_t rs = 0x9E3779B97F4A7C15u * (a->id + 1);
  ttft_seq mine[S_PER_THREAD] = {0};
  while (!atomic_load(&st->stop)) {
    unsigned k = (unsigned)(xorshift(&rs) % S_PER_THREAD);
    _Atomic ttft_seq *pub = &st->live[a->id * S_PER_THREAD + k];
    if (!mine[k]) {
      mine[k] = ttft_begin(st->r, TTFT_NOW);
      atomic_store(pub, mine[k]);
      continue;
    }
    ttft_seq_info in;
    memset(&in, 0, sizeof in);
    in.struct_size = sizeof in;
    int rc = ttft_seq_stats(st->r, mine[k], &in);
    if (rc == TTFT_OK) {
      /* only this thread emits on it: the books must balance exactly */
      atomic_fetch_add(&st->checks, 1);
      if (in.tokens != (uint64_t)in.emissions * tag_of(mine[k])) {
        atomic_fetch_add(&st->corrupted, 1);
        fprintf(stderr, "corrupted: %u emissions, %llu tokens, expected %u per emission\n",
                in.emissions, (unsigned long long)in.tokens, tag_of(mine[k]));
      }
    }
    if (rc == TTFT_ESTALE || xorshift(&rs) % 64 == 0) {
      /* cancelled by the canceller, or we end it ourselves */
      (void)ttft_stream_end(st->r, mine[k], TTFT_COMPLETED, TTFT_NOW);
      atomic_store(pub, 0);
      mine[k] = 0;
      continue;
    }
    if (ttft_token_emitted(st->r, mine[k], tag_of(mine[k]), TTFT_NOW) == TTFT_OK)
      atomic_fetch_add(&st->emits, 1);
  }
  for (unsigned k = 0; k < S_PER_THREAD; k++)
    if (mine[k]) (void)ttft_stream_end(st->r, mine[k], TTFT_COMPLETED, TTFT_NOW);
  return NULL;
}

static void *canceller_main(void *p) {
  sstate *st = p;
  uint64_t rs = 12345;
  while (!atomic_load(&st->stop)) {
    unsigned i = (unsigned)(xorshift(&rs) % (S_THREADS * S_PER_THREAD));
    ttft_seq h = atomic_load(&st->live[i]);
    if (h && ttft_stream_end(st->r, h, TTFT_CANCELLED, TTFT_NOW) == TTFT_OK)
      atomic_fetch_add(&st->cancels, 1);
  }
  return NULL;
}

TEST(shared_handles_stress) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = S_THREADS * S_PER_THREAD + 4; /* tight: slots are reused constantly */
  c.max_threads = S_MAXTHREADS;                  /* most threads on the shared shard */
  sstate st;
  memset(&st, 0, sizeof st);
  st.r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(st.r);
  if (!st.r) return;
  pthread_t th[S_THREADS + 2];
  owner_arg args[S_THREADS];
  for (unsigned i = 0; i < S_THREADS; i++) {
    args[i].st = &st;
    args[i].id = i;
    EXPECT_EQ_INT(0, pthread_create(&th[i], NULL, owner_main, &args[i]));
  }
  for (unsigned i = 0; i < 2; i++)
    EXPECT_EQ_INT(0, pthread_create(&th[S_THREADS + i], NULL, canceller_main, &st));
  /* At least TTFT_REUSE_STRESS_MS, and until the races this test is for
   * happened often enough: cancels that won against the owner's own
   * emissions, and checks. How fast they come depends on scheduling, not
   * on the library: with 8 threads on 2 cores a thread preempted inside a
   * call holds batches back, so most begins at this tight capacity are
   * refused (by design) and the canceller finds few live handles (a
   * loaded CI run won 4 cancels in 1.5 s; runs here 3 to 3385). Bounded:
   * 60 s, then the expectations below fail and say so. */
  const char *e = getenv("TTFT_REUSE_STRESS_MS");
  long ms = e ? strtol(e, NULL, 10) : 1500;
  uint64_t t_start = mono_ns(), t_min = (uint64_t)ms * 1000000u, t_cap = UINT64_C(60000000000);
  for (;;) {
    uint64_t el = mono_ns() - t_start;
    if (el >= t_cap) break;
    if (el >= t_min && atomic_load(&st.cancels) > 10 && atomic_load(&st.checks) > 100) break;
    struct timespec d = {0, 10000000L};
    nanosleep(&d, NULL);
  }
  ms = (long)((mono_ns() - t_start) / 1000000u);
  atomic_store(&st.stop, 1);
  for (unsigned i = 0; i < S_THREADS + 2; i++) pthread_join(th[i], NULL);
  fprintf(stderr, "%d threads (max_threads %d) + 2 cancellers, %ld ms: %lu emissions, %lu checks, "
                  "%lu cancels won, %lu corrupted\n",
          S_THREADS, S_MAXTHREADS, ms, atomic_load(&st.emits), atomic_load(&st.checks),
          atomic_load(&st.cancels), atomic_load(&st.corrupted));
  EXPECT_EQ_U64(0, atomic_load(&st.corrupted));
  EXPECT_GT_U64(atomic_load(&st.checks), 100);
  EXPECT_GT_U64(atomic_load(&st.cancels), 10);
  EXPECT_EQ_INT(0, ttft_inflight(st.r));
  ttft_registry_free(st.r);
}

TU_MAIN()
