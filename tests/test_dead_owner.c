/* test_dead_owner.c — a thread that leaves a hook abnormally must not
 * hold back reuse for good (issue 18.1; 1.2 epochs, 1.3 hazard words; the fault model is
 * at the top of src/record/reclaim.c).
 *
 * Each round, with max_inflight 1 and max_threads 4:
 *  1. thread D loops ttft_token_emitted(x) and dies inside the hook, one
 *     of three ways: pthread_exit from a signal handler, an asynchronous
 *     pthread_cancel, or siglongjmp out of the hook and then a return from
 *     its thread function (a signal handler checks that D is inside a
 *     call — odd epoch, or an open shared-shard call — before it acts);
 *  2. thread N starts and takes the shard D owned (checked), makes calls,
 *     then idles between calls: main ends x and begins y, which must be
 *     accepted (1.1: the inverted epoch read as "inside" for ever and the
 *     begin dropped);
 *  3. N loops step_emitted(64 x y); main freezes it inside the hook (a
 *     spinning signal handler), ends y and begins z on the only slot: the
 *     begin must be refused (N is inside), and once N is released a begin
 *     must be accepted and z must hold no emission (1.1: N's inverted
 *     epoch read as "outside", the slot was reused under it and N wrote
 *     into z).
 * Run on private shards with membarrier, in fence mode (forced on the
 * registry before its first hook), and on the shared shard (max_threads
 * 0). Rounds: TTFT_DEAD_ROUNDS (default 50 under ctest, under a second a
 * test on an idle machine; the 500 rounds run in CI,
 * .ci/steps.d/45-dead-owner.sh).
 * No round waits for time to pass: a begin refused for a frozen next owner
 * is refused after a bounded number of polls (reclaim.c), so every round
 * checks that refusal exactly (refused == rounds). White-box (the epoch, the
 * open-call stack, the fence mode): the static build; the shared build
 * says it skips. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "ttft.h"
#include "task.h"
#include "record/registry.h"

enum { WAY_EXIT, WAY_CANCEL, WAY_LONGJMP };

#ifdef TTFT_TEST_STATIC

static const char *const way_name[] = {"pthread_exit in a handler", "asynchronous cancel",
                                       "siglongjmp out of the hook"};

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static unsigned rounds_wanted(void) {
  const char *e = getenv("TTFT_DEAD_ROUNDS");
  long v = e ? strtol(e, NULL, 10) : 50;
  return v > 0 ? (unsigned)v : 50;
}

typedef struct worker {
  ttft_registry *r;
  pthread_t th;
  int way;
  _Atomic ttft_seq x;
  _Atomic int stop, pause, paused;
  _Atomic unsigned long calls;
  _Atomic(ttft__shard *) shard;
  sigjmp_buf jb;
} worker;

static _Atomic(worker *) g_w;       /* the thread the handlers act on */
static _Atomic int g_act;           /* handler outcome: 1 acted inside a call */
static _Atomic int g_freeze, g_frozen;

/* Is the calling thread inside a hook call on r right now? (Built
 * against 1.1, for the before/after figures of docs/reliability.md, the
 * shared shard has no open-call record: its calls' enter/exit counts.) */
/* Before each call of a worker (1.2 noted its epoch here; the hazard
 * word of 1.3 needs nothing). */
static void note_epoch(ttft_registry *r) {
  (void)r;
  atomic_signal_fence(memory_order_seq_cst);
}

static int inside_call(ttft_registry *r) {
  if (ttft__tl_cache[0].reg_id != r->id) return 0;
  ttft__shard *sh = ttft__tl_cache[0].sh;
  /* a private call publishes its slot (or "inside") in the hazard word;
   * a shared-shard call is on the open-call stack */
  if (!sh->shared) return (atomic_load_explicit(&sh->hz, memory_order_relaxed) & TTFT__HZ_IN) != 0;
  return ttft__tl_open.n > 0;
}

/* An asynchronous cancel acts wherever the thread is, including inside
 * a sanitizer's runtime: ThreadSanitizer's atomic store (g_act's, below)
 * can hold its per-thread slot lock for a moment after the value is
 * visible, and a cancel landing there deadlocks the unwinder, which takes
 * that lock again (seen in CI: 1 run in ~15 of this test under load, a
 * hang in SlotLock inside _Unwind_ForcedUnwind). So the dying thread's
 * last act is a spin in code no sanitizer instruments, which it announces
 * with a plain volatile store (not instrumented either; main reads it with
 * an atomic load), and main cancels only once it has seen that. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DIER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define DIER_TSAN 1
#endif
#ifdef DIER_TSAN
#define DIER_UNINSTRUMENTED __attribute__((noinline, no_sanitize("thread")))
#else
#define DIER_UNINSTRUMENTED __attribute__((noinline))
#endif
static volatile int g_spinning; /* 1: the dying thread spins, uninstrumented */

DIER_UNINSTRUMENTED static void spin_until_cancelled(void) {
  g_spinning = 1;
  for (;;) {
  }
}

static void on_die(int sig) {
  (void)sig;
  int saved = errno;
  worker *w = atomic_load(&g_w);
  /* acted already (another signal of main's was in flight): the thread
   * is on its way out, maybe in its exit handler; leave it alone */
  if (atomic_load(&g_act) || !inside_call(w->r)) { /* not inside: main tries again */
    errno = saved;
    return;
  }
  atomic_store(&g_act, 1);
  switch (w->way) {
  case WAY_EXIT: pthread_exit(NULL);
  case WAY_LONGJMP: siglongjmp(w->jb, 1);
  default: /* asynchronous cancel: wait here, inside the hook, for it */
    spin_until_cancelled();
  }
}

static void on_freeze(int sig) {
  (void)sig;
  int saved = errno;
  if (!inside_call(atomic_load(&g_w)->r)) {
    errno = saved;
    return;
  }
  atomic_store(&g_frozen, 1);
  while (atomic_load(&g_freeze)) {
  }
  atomic_store(&g_frozen, 0);
  errno = saved;
}

/* After each call of a worker: its shard (once), its call count. Lean
 * (relaxed, only the worker writes them), so that most of a worker's time
 * is spent inside the hook, where main's signals must find it. */
static void note_call(worker *w) {
  if (!atomic_load_explicit(&w->shard, memory_order_relaxed) &&
      ttft__tl_cache[0].reg_id == w->r->id)
    atomic_store_explicit(&w->shard, ttft__tl_cache[0].sh, memory_order_relaxed);
  /* release: main's acquire of the count (wait_calls) sees the shard */
  atomic_store_explicit(&w->calls, atomic_load_explicit(&w->calls, memory_order_relaxed) + 1,
                        memory_order_release);
}

/* AddressSanitizer poisons each instrumented frame's redzones and
 * unpoisons them when the frame returns, or on a longjmp (its interceptor)
 * — but not when an asynchronous cancel unwinds the frames (the hook's,
 * the signal handler's): the thread's exit then writes into stack memory
 * still marked as a redzone (a false "stack-buffer-underflow" in
 * sigaltstack). A cleanup handler, which the unwinder runs below every
 * frame it removes, tells ASan the stack above it is being left. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DIER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define DIER_ASAN 1
#endif
#ifdef DIER_ASAN
#include <sanitizer/asan_interface.h>
/* the lowest address of the dying thread's stack, read when it started
 * (__asan_handle_no_return cannot be used here: its own sigaltstack call
 * lands on the stale redzones) */
static _Thread_local char *dier_stack_lo;
static void dier_unwound(void *unused) {
  (void)unused;
  char *here = __builtin_frame_address(0);
  if (dier_stack_lo && here > dier_stack_lo)
    __asan_unpoison_memory_region(dier_stack_lo, (size_t)(here - dier_stack_lo));
}
#endif

static void dier_loop(worker *w) {
  if (sigsetjmp(w->jb, 1)) return; /* jumped out of the hook: leave the thread */
  const ttft_seq x = atomic_load(&w->x);
  uint64_t t = mono_ns();
  while (!atomic_load_explicit(&w->stop, memory_order_relaxed)) {
    note_epoch(w->r);
    /* caller timestamps: no clock read (a system call under valgrind,
     * where signals arrive at system calls) outside the call */
    (void)ttft_token_emitted(w->r, x, 1, ++t);
    note_call(w);
  }
}

static void *dier_main(void *p) {
  worker *w = p;
  if (w->way == WAY_CANCEL) {
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
  }
#ifdef DIER_ASAN
  pthread_attr_t at;
  void *lo = NULL;
  size_t sz = 0;
  if (pthread_getattr_np(pthread_self(), &at) == 0) {
    pthread_attr_getstack(&at, &lo, &sz);
    pthread_attr_destroy(&at);
  }
  dier_stack_lo = lo;
  pthread_cleanup_push(dier_unwound, NULL);
  dier_loop(w);
  pthread_cleanup_pop(0);
#else
  dier_loop(w);
#endif
  return NULL;
}

static void *next_main(void *p) {
  worker *w = p;
  ttft_seq batch[64] = {0};
  while (!atomic_load_explicit(&w->stop, memory_order_relaxed)) {
    if (atomic_load_explicit(&w->pause, memory_order_relaxed)) { /* idle, between calls */
      atomic_store(&w->paused, 1);
      while (atomic_load(&w->pause) && !atomic_load(&w->stop)) {
      }
      atomic_store(&w->paused, 0);
      continue;
    }
    /* one step of 64 emissions of x: a long call, so that most of N's
     * time is inside one and main's signal finds it there at once (with
     * token_emitted, 1 signal in 30 did: most of a loop of short calls is
     * spent between them) */
    ttft_seq x = atomic_load_explicit(&w->x, memory_order_relaxed);
    if (x != batch[0])
      for (int i = 0; i < 64; i++) batch[i] = x;
    note_epoch(w->r);
    (void)ttft_step_emitted(w->r, batch, NULL, 64, TTFT_NOW);
    note_call(w);
  }
  return NULL;
}

/* Wait until *flag == want, giving the CPU away; a wait past 20 s is a
 * hang: say which, and abort (a message instead of ctest's timeout) */
static void wait_flag(_Atomic int *flag, int want, const char *what) {
  uint64_t t0 = mono_ns();
  while (atomic_load(flag) != want) {
    if (mono_ns() - t0 > 20000000000u) {
      fprintf(stderr, "hang: %s\n", what);
      abort();
    }
    sched_yield();
  }
}

/* main's waits give the CPU away: on 2 loaded cores the thread waited
 * for may be the one main would spin against */
static int wait_calls(worker *w, unsigned long more) {
  unsigned long c0 = atomic_load(&w->calls);
  uint64_t t0 = mono_ns();
  while (atomic_load(&w->calls) < c0 + more) {
    if (mono_ns() - t0 > 10000000000u) return 0;
    sched_yield();
  }
  return 1;
}

static int seq_clean(ttft_registry *r, ttft_seq y) {
  ttft_seq_info in;
  memset(&in, 0, sizeof in);
  in.struct_size = sizeof in;
  if (ttft_seq_stats(r, y, &in) != TTFT_OK) return 0;
  if (in.emissions || in.tokens) {
    fprintf(stderr, "corrupted: %u emissions, %llu tokens on a stream nobody emitted on\n",
            in.emissions, (unsigned long long)in.tokens);
    return 0;
  }
  return 1;
}

/* D dies inside a call on handle x. 1 when it did. */
static int kill_inside(worker *d) {
  g_spinning = 0; /* no other thread runs on_die now */
  atomic_store(&g_act, 0);
  atomic_store(&g_w, d);
  uint64_t t0 = mono_ns();
  while (!atomic_load(&g_act)) {
    if (mono_ns() - t0 > 10000000000u) return 0;
    pthread_kill(d->th, SIGUSR2);
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
  if (d->way == WAY_CANCEL) {
    /* not before the thread is in its uninstrumented spin (above);
     * acquire pairs with nothing a sanitizer sees: the store is plain */
    while (!__atomic_load_n(&g_spinning, __ATOMIC_ACQUIRE)) {
      if (mono_ns() - t0 > 20000000000u) {
        fprintf(stderr, "the dying thread acted but never reached its spin\n");
        abort();
      }
      sched_yield();
    }
    pthread_cancel(d->th);
  }
  pthread_join(d->th, NULL);
  return 1;
}

static int freeze_inside(worker *n) {
  atomic_store(&g_w, n);
  atomic_store(&g_freeze, 1);
  uint64_t t0 = mono_ns();
  while (!atomic_load(&g_frozen)) {
    if (mono_ns() - t0 > 10000000000u) return 0;
    pthread_kill(n->th, SIGUSR1);
    uint64_t t1 = mono_ns();
    while (!atomic_load(&g_frozen) && mono_ns() - t1 < 200000)
      sched_yield();
  }
  return 1;
}

/* pthread_exit and cancellation load the unwinder on first use (a dlopen,
 * malloc): do it once outside any signal handler */
static void *exit_at_once(void *p) {
  (void)p;
  pthread_exit(NULL);
}
static void unwinder_warm_up(void) {
  pthread_t th;
  if (pthread_create(&th, NULL, exit_at_once, NULL) == 0) pthread_join(th, NULL);
}

static void dead_owner(uint32_t max_threads, int fence, int way) {
  unwinder_warm_up();
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 1;
  c.max_threads = max_threads;
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  if (!r) return;
  if (fence) r->fence_mode = 1; /* before any hook: both sides fence */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = on_die;
  sigaction(SIGUSR2, &sa, NULL);
  sa.sa_handler = on_freeze;
  sigaction(SIGUSR1, &sa, NULL);

  /* TTFT_DEAD_SKIP_IDLE=1 leaves step 2 out (1.1 never recovers from it,
   * so step 3 could not be measured on 1.1 otherwise) */
  const char *si = getenv("TTFT_DEAD_SKIP_IDLE");
  int skip_idle = si && *si == '1';
  ttft_seq x = ttft_begin(r, TTFT_NOW); /* main takes shard 0 */
  EXPECT_TRUE(x != 0);
  unsigned n = rounds_wanted(), corrupted = 0, idle_dropped = 0, dropped = 0, refused = 0;
  unsigned same_shard = 0, not_killed = 0, not_frozen = 0, done = 0;
  for (unsigned k = 0; k < n && x; k++) {
    worker d, nx;
    memset(&d, 0, sizeof d);
    d.r = r;
    d.way = way;
    atomic_store(&d.x, x);
    EXPECT_EQ_INT(0, pthread_create(&d.th, NULL, dier_main, &d));
    if (!wait_calls(&d, 2) || !kill_inside(&d)) {
      not_killed++;
      atomic_store(&d.stop, 1);
      pthread_join(d.th, NULL);
      break;
    }
    ttft__shard *dsh = atomic_load(&d.shard);
    /* its shard was given back, closed */
    if (dsh && !dsh->shared) {
      EXPECT_EQ_INT(0, atomic_load(&dsh->owned));
      EXPECT_EQ_U64(0, atomic_load(&dsh->hz) & TTFT__HZ_IN);
    }
    /* 2. the next owner, idle between calls */
    memset(&nx, 0, sizeof nx);
    nx.r = r;
    atomic_store(&nx.x, x);
    EXPECT_EQ_INT(0, pthread_create(&nx.th, NULL, next_main, &nx));
    if (!wait_calls(&nx, 2)) break;
    same_shard += atomic_load(&nx.shard) == dsh;
    ttft_seq y = x;
    if (!skip_idle) {
      atomic_store(&nx.pause, 1);
    wait_flag(&nx.paused, 1, "the next owner never paused between calls");
    EXPECT_ERR(TTFT_OK, ttft_stream_end(r, x, TTFT_CANCELLED, TTFT_NOW));
    y = ttft_begin(r, TTFT_NOW);
    if (!y) {
      fprintf(stderr, "idle drop: refs %u rstamp %llu rgen %llu rounds %u\n",
              (unsigned)atomic_load(&r->slots[0].refs), (unsigned long long)atomic_load(&r->slots[0].rstamp),
              (unsigned long long)atomic_load(&r->rgen), (unsigned)atomic_load(&r->rounds));
      idle_dropped++;
      y = ttft_begin(r, TTFT_NOW);
    }
    }
    if (!y) break;
    /* 3. the next owner frozen inside the hook */
    atomic_store(&nx.x, y);
    atomic_store(&nx.pause, 0);
    if (!wait_calls(&nx, 2) || !freeze_inside(&nx)) {
      not_frozen++;
      atomic_store(&g_freeze, 0);
      atomic_store(&nx.stop, 1);
      pthread_join(nx.th, NULL);
      x = y;
      continue;
    }
    EXPECT_ERR(TTFT_OK, ttft_stream_end(r, y, TTFT_CANCELLED, TTFT_NOW));
    ttft_seq z = ttft_begin(r, TTFT_NOW);
    if (!z) refused++; /* N is inside: the only slot must wait for it */
    atomic_store(&g_freeze, 0);
    wait_flag(&g_frozen, 0, "the frozen next owner never left its handler");
    if (!wait_calls(&nx, 3)) break; /* N has left the call */
    if (!z) {
      z = ttft_begin(r, TTFT_NOW);
      if (!z) dropped++;
    }
    atomic_store(&nx.stop, 1);
    pthread_join(nx.th, NULL);
    if (!z) { /* 1.1: the slot is lost to the inverted epoch; measure on */
      if (!skip_idle) break;
      z = ttft_begin(r, TTFT_NOW);
      if (!z) break;
    }
    if (!seq_clean(r, z)) corrupted++;
    x = z;
    done++;
  }
  fprintf(stderr,
          "max_threads %u%s, %s: %u of %u rounds; next owner took the dead one's shard %u times; "
          "idle next owner: %u begins dropped; frozen next owner: %u begins refused while "
          "inside, %u dropped after it left, %u corrupted (%u not killed, %u not frozen)\n",
          max_threads, fence ? " (fence mode)" : max_threads ? " (membarrier)" : " (shared shard)",
          way_name[way], done, n, same_shard, idle_dropped, refused, dropped, corrupted, not_killed,
          not_frozen);
  EXPECT_EQ_U64(n, done);
  EXPECT_EQ_U64(0, corrupted);
  EXPECT_EQ_U64(0, idle_dropped);
  EXPECT_EQ_U64(0, dropped);
  /* N was inside a call on the only slot's ended stream every time: no
   * begin may have had that slot (a bounded refusal, not a timeout) */
  if (!skip_idle) EXPECT_EQ_U64(done, refused);
  /* private shards: the next owner took the dead one's shard (the first
   * free one; rarely another thread of the process holds it a moment) */
  if (max_threads) EXPECT_GE_U64(same_shard, done - done / 10);
  ttft_registry_free(r);
  signal(SIGUSR1, SIG_DFL);
  signal(SIGUSR2, SIG_DFL);
}

#define RUN(max_threads, fence, way) dead_owner(max_threads, fence, way)
#else
#define RUN(max_threads, fence, way) fprintf(stderr, "white-box: runs in the static build\n")
#endif

TEST(dead_owner_exit_private_membarrier) { RUN(4, 0, WAY_EXIT); }
TEST(dead_owner_exit_private_fence) { RUN(4, 1, WAY_EXIT); }
TEST(dead_owner_exit_shared_shard) { RUN(0, 0, WAY_EXIT); }
TEST(dead_owner_cancel_private_membarrier) { RUN(4, 0, WAY_CANCEL); }
TEST(dead_owner_cancel_private_fence) { RUN(4, 1, WAY_CANCEL); }
TEST(dead_owner_cancel_shared_shard) { RUN(0, 0, WAY_CANCEL); }
TEST(dead_owner_longjmp_private_membarrier) { RUN(4, 0, WAY_LONGJMP); }
TEST(dead_owner_longjmp_private_fence) { RUN(4, 1, WAY_LONGJMP); }
TEST(dead_owner_longjmp_shared_shard) { RUN(0, 0, WAY_LONGJMP); }

/* ------------------------------------------------------------- nested
 * F2: a signal handler calls hooks while the thread it interrupted is in
 * the middle of one (of the same registry). Thread A loops
 * token_emitted(x, 1) and ends/begins streams; main signals it; the
 * handler emits 3 tokens on its own sequence h and marks it. Every
 * accepted call must be counted exactly: the per-sequence totals, the
 * registry's TOKENS and PREEMPTIONS (1.1 recorded the nested call with
 * plain load/store pairs on the private shard: an update the interrupted
 * call was in the middle of was lost). Public API only: both builds. */
static ttft_registry *g_nr;
static _Atomic ttft_seq g_nh;
static _Atomic unsigned long g_n_tokens, g_n_marks, g_n_sig;

static void on_nested(int sig) {
  (void)sig;
  ttft_seq h = atomic_load(&g_nh);
  if (ttft_token_emitted(g_nr, h, 3, TTFT_NOW) == TTFT_OK) atomic_fetch_add(&g_n_tokens, 3);
  if (ttft_mark(g_nr, h, TTFT_PHASE_PREEMPTED, TTFT_NOW) == TTFT_OK) atomic_fetch_add(&g_n_marks, 1);
  atomic_fetch_add(&g_n_sig, 1);
}

typedef struct nest_arg {
  _Atomic int stop;
  _Atomic unsigned long tokens, streams;
} nest_arg;

static void *nest_main(void *p) {
  nest_arg *a = p;
  while (!atomic_load(&a->stop)) {
    ttft_seq x = ttft_begin(g_nr, TTFT_NOW);
    for (int i = 0; i < 32 && x; i++)
      if (ttft_token_emitted(g_nr, x, 1, TTFT_NOW) == TTFT_OK) atomic_fetch_add(&a->tokens, 1);
    if (x && ttft_stream_end(g_nr, x, TTFT_COMPLETED, TTFT_NOW) == TTFT_OK) atomic_fetch_add(&a->streams, 1);
  }
  return NULL;
}

static void nested(uint32_t max_threads) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 8;
  c.max_threads = max_threads;
  g_nr = ttft_registry_new(&c);
  EXPECT_NOT_NULL(g_nr);
  if (!g_nr) return;
  atomic_store(&g_n_tokens, 0);
  atomic_store(&g_n_marks, 0);
  atomic_store(&g_n_sig, 0);
  ttft_seq h = ttft_begin(g_nr, TTFT_NOW); /* the handler's sequence */
  atomic_store(&g_nh, h);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = on_nested;
  sigaction(SIGUSR1, &sa, NULL);
  nest_arg a;
  memset(&a, 0, sizeof a);
  pthread_t th;
  EXPECT_EQ_INT(0, pthread_create(&th, NULL, nest_main, &a));
  while (atomic_load(&a.streams) < 2) {
  }
  const char *e = getenv("TTFT_NESTED_SIGNALS");
  unsigned long want = e ? strtoul(e, NULL, 10) : 1000;
  for (unsigned long k = 0; k < want; k++) {
    unsigned long s0 = atomic_load(&g_n_sig);
    pthread_kill(th, SIGUSR1);
    while (atomic_load(&g_n_sig) == s0) {
    }
  }
  atomic_store(&a.stop, 1);
  pthread_join(th, NULL);
  signal(SIGUSR1, SIG_DFL);
  ttft_seq_info in;
  memset(&in, 0, sizeof in);
  in.struct_size = sizeof in;
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(g_nr, h, &in));
  EXPECT_EQ_U64(atomic_load(&g_n_tokens), in.tokens);
  EXPECT_EQ_U64(atomic_load(&g_n_marks), in.preemptions);
  ttft_snapshot *s = ttft_snapshot_take(g_nr);
  uint64_t tokens = ttft_snapshot_counter(s, TTFT_COUNTER_TOKENS);
  uint64_t want_tokens = atomic_load(&a.tokens) + atomic_load(&g_n_tokens);
  fprintf(stderr, "max_threads %u: %lu signals, handler tokens %lu marks %lu; thread tokens %lu in %lu "
                  "streams; TOKENS %llu (expected %llu), PREEMPTIONS %llu, COMPLETED %llu\n",
          max_threads, atomic_load(&g_n_sig), atomic_load(&g_n_tokens), atomic_load(&g_n_marks),
          atomic_load(&a.tokens), atomic_load(&a.streams), (unsigned long long)tokens,
          (unsigned long long)want_tokens,
          (unsigned long long)ttft_snapshot_counter(s, TTFT_COUNTER_PREEMPTIONS),
          (unsigned long long)ttft_snapshot_counter(s, TTFT_COUNTER_COMPLETED));
  EXPECT_EQ_U64(want_tokens, tokens);
  EXPECT_EQ_U64(atomic_load(&g_n_marks), ttft_snapshot_counter(s, TTFT_COUNTER_PREEMPTIONS));
  EXPECT_EQ_U64(atomic_load(&a.streams), ttft_snapshot_counter(s, TTFT_COUNTER_COMPLETED));
  EXPECT_EQ_U64(atomic_load(&a.streams) + 1, ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN));
  ttft_snapshot_free(s);
  ttft_registry_free(g_nr);
}

TEST(nested_hook_in_signal_handler_private_shard) { nested(2); }
TEST(nested_hook_in_signal_handler_shared_shard) { nested(0); }

TU_MAIN()
