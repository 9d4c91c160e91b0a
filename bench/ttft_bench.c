/*
 * ttft_bench.c — how much libttft costs, against the machine's floor and a
 * peer library, measured in one run (docs/performance.md shows a run).
 *
 *   ttft-bench [--quick] [--json FILE] [--reps N] [--only GROUP[,GROUP]]
 *              [--no-membarrier] [--rounds N] [--baseline BIN]
 *
 * The group "compare" runs the hooks of this library and of 1.1 (the same
 * file built against it, ttft-bench-baseline) alternately, in child
 * processes: see "against 1.1" below and docs/performance.md.
 *
 * Every row is the median of >= 5 repetitions. A repetition runs the loop
 * on fresh threads that start together from a spin barrier, after a
 * warm-up; each thread times itself. Nothing is pinned (the machines we
 * run on have two shared cores). Caller-timestamp rows never read the
 * clock in the loop: each sequence's timestamp advances by a pre-generated
 * gap (20 ms +- 5 ms, one in 64 a 100..800 ms stall), so values spread
 * over buckets as a decode loop's would. Hot-path rows feed sequences that
 * were begun once, round-robin over 64 per thread (and one, for the
 * single-sequence figure).
 *
 * Ratios are printed next to their targets (SPEC section 5) and marked met
 * or MISSED; the program never fails because of a timing, only when a call
 * it measures returns an error (exit 1) or it cannot run (exit 2).
 */
#include <ttft.h>

#include <errno.h>
#include <math.h>
#if defined(__GLIBC__) || defined(__linux__)
#  include <malloc.h>
#endif
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "floor.h"
#include "../tests/deny_membarrier.h"
#include "peer.h"

#if defined(__x86_64__) || defined(__i386__)
#  include <x86intrin.h>
#  define HAVE_RDTSC 1
#  define cpu_relax() _mm_pause()
#else
#  define HAVE_RDTSC 0
#  define cpu_relax() ((void)0)
#endif

#ifdef TTFT_BENCH_HAVE_PROMCPP
#  define HAVE_PEER 1
#else
#  define HAVE_PEER 0
#endif

/* ttft_engine_step and ttft_step_info came with 1.2: this file also builds
 * against the 1.1 baseline's ttft.h (ttft-bench-baseline) */
#if TTFT_VERSION_NUMBER >= 10200
#  define HAVE_ENGINE 1
#else
#  define HAVE_ENGINE 0
#endif

#define MAX_REPS 64
#define MAX_THREADS 4
#define NSEQ 64 /* sequences per thread in the hot rows (a power of two) */
#define GAP_N 4096
#define GAP_MASK (GAP_N - 1)
#define PAD 128 /* two cache lines: no false sharing, no adjacent-line prefetch */

/* ------------------------------------------------------------ options */
static struct {
  int quick;
  int reps;
  double rep_ms;       /* wall time one repetition aims at */
  const char *json;
  const char *only;    /* comma-separated groups, NULL = all */
  int no_membarrier;   /* membarrier(2) denied before any registry: fence mode */
  int child;           /* --compare-child: the compare cases only, on stdout */
  int rounds;          /* compare: rounds of the two binaries (0: default) */
  const char *baseline; /* compare: the baseline binary (default: built with this one) */
} opt;

static int group_on(const char *g) {
  if (!opt.only) return 1;
  size_t n = strlen(g);
  for (const char *p = opt.only; *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && memcmp(p, g, n) == 0) return 1;
    if (!e) break;
    p = e + 1;
  }
  return 0;
}

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("ttft-bench: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(2);
}

static int call_errors; /* calls that returned an error: exit status 1 */

static void check_rc(int bad, const char *what) {
  if (bad) {
    fprintf(stderr, "ttft-bench: %s returned an error during the run\n", what);
    call_errors++;
  }
}

/* ------------------------------------------------------------- helpers */
static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/* this thread's CPU time: time spent off the CPU (preempted by other work
 * on a shared machine) does not count */
static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

static void *xalloc(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, PAD, n ? n : 1) != 0) die("out of memory");
  memset(p, 0, n);
  return p;
}

/* the compiler must believe the value is used */
static volatile uint64_t g_sink;

static uint64_t g_gaps[GAP_N]; /* ns between two emissions of one sequence */

static uint64_t xorshift(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

static void gaps_init(void) {
  uint64_t s = UINT64_C(0x9E3779B97F4A7C15);
  for (int i = 0; i < GAP_N; i++) {
    uint64_t r = xorshift(&s);
    if (r % 64 == 0) /* a stall: 100 .. 800 ms */
      g_gaps[i] = UINT64_C(100000000) + (r >> 8) % UINT64_C(700000000);
    else /* a decode step: 15 .. 25 ms */
      g_gaps[i] = UINT64_C(15000000) + (r >> 8) % UINT64_C(10000000);
  }
}

static long rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, res = -1;
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &size, &res) != 2) res = -1;
  fclose(f);
  return res < 0 ? -1 : res * sysconf(_SC_PAGESIZE);
}

/* the 1-minute load average: other work on the machine skews every row */
static double loadavg(void) {
  double l = -1;
  FILE *f = fopen("/proc/loadavg", "r");
  if (!f) return -1;
  if (fscanf(f, "%lf", &l) != 1) l = -1;
  fclose(f);
  return l;
}

static double g_load_start, g_load_end;

/* bytes the process has allocated from malloc right now (-1: unknown) */
static long heap_bytes(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 mi = mallinfo2();
  return (long)(mi.uordblks + mi.hblkhd);
#else
  return -1;
#endif
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median_of(const double *v, int n) {
  double tmp[MAX_REPS];
  memcpy(tmp, v, (size_t)n * sizeof *v);
  qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
  return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

/* --------------------------------------------------------------- rows */
typedef struct row {
  char key[32];
  char group[16];
  char name[80];
  const char *unit;
  int threads;
  int reps;
  uint64_t iters;        /* per thread per repetition */
  double med, min, max;  /* unit per op (per thread, CPU time), median over reps */
  double wall;           /* the same by wall-clock time, median over reps */
  double agg;            /* threads > 1: slowest thread's wall / all ops (throughput) */
  double samples[MAX_REPS];
  char note[160];
} row;

static row g_rows[160];
static int g_nrows;

typedef struct target {
  char name[96];
  char num[32], den[32]; /* row keys, den empty: an absolute target */
  double value, limit;
  const char *unit;      /* "x" for ratios, else the unit of value */
  int met;
} target;

static target g_targets[32];
static int g_ntargets;

static row *row_find(const char *key) {
  for (int i = 0; i < g_nrows; i++)
    if (strcmp(g_rows[i].key, key) == 0) return &g_rows[i];
  return NULL;
}

static row *row_add(const char *key, const char *group, const char *name, const char *unit) {
  if (g_nrows == (int)(sizeof g_rows / sizeof g_rows[0])) die("too many rows");
  row *r = &g_rows[g_nrows++];
  memset(r, 0, sizeof *r);
  snprintf(r->key, sizeof r->key, "%s", key);
  snprintf(r->group, sizeof r->group, "%s", group);
  snprintf(r->name, sizeof r->name, "%s", name);
  r->unit = unit;
  r->threads = 1;
  return r;
}

static void row_print(const row *r) {
  char val[32];
  if (strcmp(r->unit, "ns/op") == 0 || strcmp(r->unit, "us") == 0 || strcmp(r->unit, "ms") == 0)
    snprintf(val, sizeof val, "%10.2f %-5s", r->med, r->unit);
  else
    snprintf(val, sizeof val, "%10.0f %-5s", r->med, r->unit);
  printf("  %-52s %s", r->name, val);
  if (r->reps > 1) printf("  [%.2f .. %.2f, %d reps", r->min, r->max, r->reps);
  if (r->reps > 1 && r->iters) printf(" x %llu", (unsigned long long)r->iters);
  if (r->reps > 1) printf("]");
  if (r->wall > 0) printf("  wall %.2f", r->wall);
  if (r->threads > 1 && r->agg > 0) printf("  all threads: %.2f ns/op", r->agg);
  if (r->note[0]) printf("  %s", r->note);
  printf("\n");
  fflush(stdout);
}

static void row_set_samples(row *r, const double *v, int n) {
  r->reps = n;
  if (v != r->samples) memmove(r->samples, v, (size_t)n * sizeof *v);
  r->med = median_of(v, n);
  r->min = r->max = v[0];
  for (int i = 1; i < n; i++) {
    if (v[i] < r->min) r->min = v[i];
    if (v[i] > r->max) r->max = v[i];
  }
}

static void target_add(const char *name, const char *num, const char *den, double limit,
                       const char *unit) {
  const row *a = row_find(num);
  const row *b = den ? row_find(den) : NULL;
  if (!a || (den && !b)) return; /* a group was left out with --only */
  target *t = &g_targets[g_ntargets++];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  snprintf(t->num, sizeof t->num, "%s", num);
  if (den) snprintf(t->den, sizeof t->den, "%s", den);
  t->value = den ? (b->med > 0 ? a->med / b->med : INFINITY) : a->med;
  t->limit = limit;
  t->unit = den ? "x" : unit;
  t->met = t->value <= limit;
}

/* ------------------------------------------------ the measuring harness */
typedef void (*loop_fn)(void *ctx, uint64_t n, int tid);

typedef struct harness {
  loop_fn fn;
  void *ctx;
  uint64_t n, warm;
  int tid;
  _Atomic int *ready, *go;
  double ns, wall;
} harness;

static void *harness_thread(void *p) {
  harness *h = p;
  if (h->warm) h->fn(h->ctx, h->warm, h->tid);
  atomic_fetch_add_explicit(h->ready, 1, memory_order_relaxed);
  /* acquire: pairs with the release that starts every thread at once */
  while (!atomic_load_explicit(h->go, memory_order_acquire)) cpu_relax();
  uint64_t c0 = cpu_ns(), t0 = mono_ns();
  h->fn(h->ctx, h->n, h->tid);
  uint64_t t1 = mono_ns(), c1 = cpu_ns();
  h->ns = (double)(c1 - c0);
  h->wall = (double)(t1 - t0);
  return NULL;
}

/* One repetition on nthreads fresh threads; *per_op = mean over threads of
 * own CPU time / n, *wall the same by wall clock, *agg = slowest thread's
 * wall time / (n * nthreads). */
static void run_once(loop_fn fn, void *ctx, int nthreads, uint64_t n, double *per_op, double *wall,
                     double *agg) {
  pthread_t th[MAX_THREADS];
  harness h[MAX_THREADS];
  _Atomic int ready = 0, go = 0;
  uint64_t warm = n / 8 + 1;
  for (int i = 0; i < nthreads; i++) {
    h[i] = (harness){fn, ctx, n, warm, i, &ready, &go, 0, 0};
    if (pthread_create(&th[i], NULL, harness_thread, &h[i]) != 0) die("pthread_create failed");
  }
  while (atomic_load_explicit(&ready, memory_order_relaxed) < nthreads) sched_yield();
  /* release: the threads' acquire loads see everything set up before */
  atomic_store_explicit(&go, 1, memory_order_release);
  double sum = 0, wsum = 0, slowest = 0;
  for (int i = 0; i < nthreads; i++) {
    pthread_join(th[i], NULL);
    sum += h[i].ns / (double)n;
    wsum += h[i].wall / (double)n;
    if (h[i].wall > slowest) slowest = h[i].wall;
  }
  *per_op = sum / nthreads;
  *wall = wsum / nthreads;
  *agg = slowest / ((double)n * nthreads);
}

/* Iterations that make one repetition last about opt.rep_ms (1 thread). */
static uint64_t calibrate(loop_fn fn, void *ctx) {
  uint64_t n = 1;
  double min_ns = opt.rep_ms * 1e6 / 8;
  for (;;) {
    uint64_t t0 = mono_ns();
    fn(ctx, n, 0);
    double ns = (double)(mono_ns() - t0);
    if (ns >= min_ns || n >= (UINT64_C(1) << 32)) {
      double want = (double)n * (opt.rep_ms * 1e6) / (ns > 1 ? ns : 1);
      if (want < 64) want = 64;
      if (want > 4e9) want = 4e9;
      return (uint64_t)want;
    }
    n *= 4;
  }
}

/* Measure fn on nthreads threads; n = 0 means calibrate on one thread. */
static row *measure(const char *key, const char *group, const char *name, loop_fn fn, void *ctx,
                    int nthreads, uint64_t n) {
  double v[MAX_REPS], w[MAX_REPS], a[MAX_REPS];
  if (!n) n = calibrate(fn, ctx);
  for (int i = 0; i < opt.reps; i++) run_once(fn, ctx, nthreads, n, &v[i], &w[i], &a[i]);
  row *r = row_add(key, group, name, "ns/op");
  row_set_samples(r, v, opt.reps);
  r->threads = nthreads;
  r->iters = n;
  r->wall = median_of(w, opt.reps);
  r->agg = nthreads > 1 ? median_of(a, opt.reps) : 0;
  return r;
}

/* ============================================================ baselines */
static void loop_clock_mono(void *ctx, uint64_t n, int tid) {
  uint64_t acc = 0;
  struct timespec ts;
  for (uint64_t i = 0; i < n; i++) {
    clock_gettime(CLOCK_MONOTONIC, &ts);
    acc += (uint64_t)ts.tv_nsec;
  }
  g_sink = acc;
}

static void loop_clock_coarse(void *ctx, uint64_t n, int tid) {
  uint64_t acc = 0;
  struct timespec ts;
  for (uint64_t i = 0; i < n; i++) {
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    acc += (uint64_t)ts.tv_nsec;
  }
  g_sink = acc;
}

#if HAVE_RDTSC
static void loop_rdtsc(void *ctx, uint64_t n, int tid) {
  uint64_t acc = 0;
  for (uint64_t i = 0; i < n; i++) acc += __rdtsc();
  g_sink = acc;
}
#endif

#if HAVE_RDTSC && (defined(__x86_64__) || defined(__i386__))
/* the counter read the TSC clock makes (clock.c): lfence, then rdtsc */
static void loop_rdtsc_ordered(void *ctx, uint64_t n, int tid) {
  (void)ctx, (void)tid;
  uint64_t acc = 0;
  for (uint64_t i = 0; i < n; i++) {
    uint32_t lo, hi;
    __asm__ __volatile__("lfence\n\trdtsc" : "=a"(lo), "=d"(hi) : : "memory");
    acc += ((uint64_t)hi << 32) | lo;
  }
  g_sink = acc;
}
#define HAVE_RDTSC_ORDERED 1
#endif

typedef struct per_thread {
  uint64_t t[NSEQ];       /* each sequence's last timestamp */
  ttft_seq seq[NSEQ];
  floor_hist *floor;
  int bad;
  char pad[PAD];
} per_thread;

typedef struct hot_ctx {
  ttft_registry *r;
  int now;                /* sequences fed with TTFT_NOW */
  unsigned mask;          /* sequences used per thread - 1 */
  per_thread *th[MAX_THREADS];
  _Atomic int bad;
} hot_ctx;

/* The floor loops: the SPEC's floor (hdr 0: a bucket increment behind a
 * call, nothing else) and HdrHistogram's hdr_record_value work (hdr 1:
 * bucket, total, min, max). One body, inlined into each with hdr a
 * constant, so neither pays for the choice. */
static inline void floor_loop(hot_ctx *c, uint64_t n, int tid, const int hdr) {
  per_thread *pt = c->th[tid];
  uint64_t *t = pt->t;
  floor_hist *h = pt->floor;
  unsigned mask = c->mask;
  int ok = 1;
  for (uint64_t i = 0; i < n; i++) {
    unsigned k = (unsigned)i & mask;
    uint64_t g = g_gaps[i & GAP_MASK];
    t[k] += g;
    ok &= hdr ? floor_record(h, (int64_t)g) : floor_record_bucket(h, (int64_t)g);
  }
  if (!ok) atomic_fetch_add_explicit(&c->bad, 1, memory_order_relaxed);
}
static void loop_floor(void *p, uint64_t n, int tid) { floor_loop(p, n, tid, 0); }
static void loop_floor_hdr(void *p, uint64_t n, int tid) { floor_loop(p, n, tid, 1); }

typedef struct atom_ctx {
  _Atomic uint64_t *ctr[MAX_THREADS];
} atom_ctx;

static void loop_atomic(void *p, uint64_t n, int tid) {
  _Atomic uint64_t *ctr = ((atom_ctx *)p)->ctr[tid];
  for (uint64_t i = 0; i < n; i++) floor_atomic_add(ctr, 1);
}

/* ============================================================ hot path */
static void loop_tok(void *p, uint64_t n, int tid) {
  hot_ctx *c = p;
  per_thread *pt = c->th[tid];
  ttft_registry *r = c->r;
  uint64_t *t = pt->t;
  const ttft_seq *seq = pt->seq;
  unsigned mask = c->mask;
  int bad = 0;
  for (uint64_t i = 0; i < n; i++) {
    unsigned k = (unsigned)i & mask;
    uint64_t tk = t[k] + g_gaps[i & GAP_MASK];
    t[k] = tk;
    bad |= ttft_token_emitted(r, seq[k], 1, tk);
  }
  if (bad) atomic_fetch_add_explicit(&c->bad, 1, memory_order_relaxed);
}

static void loop_tok_now(void *p, uint64_t n, int tid) {
  hot_ctx *c = p;
  per_thread *pt = c->th[tid];
  ttft_registry *r = c->r;
  const ttft_seq *seq = pt->seq;
  unsigned mask = c->mask;
  int bad = 0;
  for (uint64_t i = 0; i < n; i++) bad |= ttft_token_emitted(r, seq[(unsigned)i & mask], 1, TTFT_NOW);
  if (bad) atomic_fetch_add_explicit(&c->bad, 1, memory_order_relaxed);
}

/* One ttft_step_emitted per decode step over the thread's 64 sequences;
 * n counts tokens (n / 64 steps), so the per-op figure is per token. */
static void loop_step(void *p, uint64_t n, int tid) {
  hot_ctx *c = p;
  per_thread *pt = c->th[tid];
  uint64_t t = pt->t[0];
  long bad = 0;
  for (uint64_t i = 0; i < n; i += NSEQ) {
    t += g_gaps[(i / NSEQ) & GAP_MASK];
    bad |= ttft_step_emitted(c->r, pt->seq, NULL, NSEQ, t) != NSEQ;
  }
  pt->t[0] = t;
  for (int k = 1; k < NSEQ; k++) pt->t[k] = t;
  if (bad) atomic_fetch_add_explicit(&c->bad, 1, memory_order_relaxed);
}

static void loop_step_now(void *p, uint64_t n, int tid) {
  hot_ctx *c = p;
  per_thread *pt = c->th[tid];
  long bad = 0;
  for (uint64_t i = 0; i < n; i += NSEQ) bad |= ttft_step_emitted(c->r, pt->seq, NULL, NSEQ, TTFT_NOW) != NSEQ;
  if (bad) atomic_fetch_add_explicit(&c->bad, 1, memory_order_relaxed);
}

#if HAVE_ENGINE
/* ttft_engine_step (1.2): one engine iteration, caller timestamps; one
 * step in 8 carries prefill */
static void loop_engine_step(void *p, uint64_t n, int tid) {
  hot_ctx *c = p;
  per_thread *pt = c->th[tid];
  uint64_t t = pt->t[0];
  ttft_step_info in;
  ttft_step_info_init(&in);
  int bad = 0;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t d = g_gaps[i & GAP_MASK];
    in.prefill_tokens = (i & 7) == 0 ? 512 : 0;
    bad |= ttft_engine_step(c->r, &in, t, t + d);
    t += d + 1000;
  }
  pt->t[0] = t;
  if (bad) atomic_fetch_add_explicit(&c->bad, 1, memory_order_relaxed);
}

static void loop_engine_step_now(void *p, uint64_t n, int tid) {
  hot_ctx *c = p;
  ttft_step_info in;
  ttft_step_info_init(&in);
  int bad = 0;
  uint64_t t0 = ttft_registry_now_ns(c->r);
  (void)tid;
  for (uint64_t i = 0; i < n; i++) {
    in.prefill_tokens = (i & 7) == 0 ? 512 : 0;
    bad |= ttft_engine_step(c->r, &in, t0, TTFT_NOW);
  }
  if (bad) atomic_fetch_add_explicit(&c->bad, 1, memory_order_relaxed);
}

/* A decode loop as a 1.2 server runs it: per step one ttft_engine_step
 * and one ttft_step_emitted over 64 sequences; per token. */
static void loop_engine_and_step(void *p, uint64_t n, int tid) {
  hot_ctx *c = p;
  per_thread *pt = c->th[tid];
  uint64_t t = pt->t[0];
  ttft_step_info in;
  ttft_step_info_init(&in);
  in.decode_seqs = NSEQ;
  long bad = 0;
  for (uint64_t i = 0; i < n; i += NSEQ) {
    uint64_t d = g_gaps[(i / NSEQ) & GAP_MASK];
    bad |= ttft_engine_step(c->r, &in, t, t + d) != TTFT_OK;
    t += d;
    bad |= ttft_step_emitted(c->r, pt->seq, NULL, NSEQ, t) != NSEQ;
  }
  pt->t[0] = t;
  for (int k = 1; k < NSEQ; k++) pt->t[k] = t;
  if (bad) atomic_fetch_add_explicit(&c->bad, 1, memory_order_relaxed);
}

/* The stall path with its cause: every emission of one sequence closes a
 * 600 ms gap holding 30 recorded 20 ms engine steps (what a stall reads);
 * per stall. */
static void loop_stall_cause(void *p, uint64_t n, int tid) {
  hot_ctx *c = p;
  per_thread *pt = c->th[tid];
  uint64_t t = pt->t[0];
  int bad = 0;
  for (uint64_t i = 0; i < n; i++) {
    for (int k = 0; k < 30; k++) {
      bad |= ttft_engine_step(c->r, NULL, t, t + 20000000);
      t += 20000000;
    }
    bad |= ttft_token_emitted(c->r, pt->seq[0], 1, t);
  }
  pt->t[0] = t;
  if (bad) atomic_fetch_add_explicit(&c->bad, 1, memory_order_relaxed);
}

/* The stall path when every recent engine step carried prefill (chunked
 * prefill): one 600 ms prefill step stalls a batch of STALL_BATCH
 * sequences (each token closes a gap over the 500 ms budget, which that
 * step covers), and the ring's other 1023 steps carried prefill too, so no
 * step without prefill is anywhere before the gap. Per stalled token: the
 * step's share, step_emitted's per-token work and one stall path each. */
#define STALL_BATCH 256
#define STALL_STEP UINT64_C(600000000)
typedef struct stall_ctx {
  ttft_registry *r;
  ttft_seq seq[STALL_BATCH];
  uint64_t t;
  _Atomic int bad;
} stall_ctx;

static void loop_stall_prefill(void *p, uint64_t n, int tid) {
  stall_ctx *c = p;
  (void)tid;
  ttft_step_info in;
  ttft_step_info_init(&in);
  in.prefill_tokens = 512;
  in.decode_seqs = STALL_BATCH;
  uint64_t t = c->t;
  long bad = 0;
  for (uint64_t i = 0; i < n; i += STALL_BATCH) {
    bad |= ttft_engine_step(c->r, &in, t, t + STALL_STEP) != TTFT_OK;
    t += STALL_STEP;
    bad |= ttft_step_emitted(c->r, c->seq, NULL, STALL_BATCH, t) != STALL_BATCH;
  }
  c->t = t;
  if (bad) atomic_fetch_add_explicit(&c->bad, 1, memory_order_relaxed);
}

/* STALL_BATCH sequences with their first token, after a ring full of 20 ms
 * prefill steps. */
static stall_ctx *stall_new(ttft_registry *r) {
  stall_ctx *c = xalloc(sizeof *c);
  c->r = r;
  uint64_t t = mono_ns();
  for (int k = 0; k < STALL_BATCH; k++)
    if (!(c->seq[k] = ttft_begin(r, t))) die("ttft_begin refused a sequence while setting up");
  ttft_step_info in;
  ttft_step_info_init(&in);
  in.prefill_tokens = 512;
  for (int k = 0; k < TTFT_STEP_RING; k++, t += 20000000)
    check_rc(ttft_engine_step(r, &in, t, t + 20000000) != TTFT_OK, "ttft_engine_step (setup)");
  check_rc(ttft_step_emitted(r, c->seq, NULL, STALL_BATCH, t) != STALL_BATCH, "ttft_step_emitted (setup)");
  c->t = t;
  return c;
}

static void stall_free(stall_ctx *c) {
  check_rc(atomic_load_explicit(&c->bad, memory_order_relaxed) != 0, "stall path, all steps prefill");
  for (int k = 0; k < STALL_BATCH; k++)
    check_rc(ttft_stream_end(c->r, c->seq[k], TTFT_COMPLETED, c->t + 1) != TTFT_OK,
             "ttft_stream_end (teardown)");
  free(c);
}
#endif /* HAVE_ENGINE */

static void loop_lib_now(void *p, uint64_t n, int tid) {
  const ttft_registry *r = ((hot_ctx *)p)->r;
  uint64_t acc = 0;
  for (uint64_t i = 0; i < n; i++) acc += ttft_registry_now_ns(r);
  g_sink = acc;
}

/* Begin NSEQ sequences per thread (and their first token, so the timed
 * loop measures the steady state: ITL, not TTFT). */
static hot_ctx *hot_new(ttft_registry *r, int nthreads, int now) {
  hot_ctx *c = xalloc(sizeof *c);
  c->r = r;
  c->now = now;
  c->mask = NSEQ - 1;
  uint64_t t0 = mono_ns();
  for (int th = 0; th < nthreads; th++) {
    per_thread *pt = c->th[th] = xalloc(sizeof *pt);
    pt->floor = xalloc(sizeof *pt->floor);
    floor_init(pt->floor);
    for (int k = 0; k < NSEQ; k++) {
      pt->t[k] = t0 + (uint64_t)(th * NSEQ + k) * 1000;
      pt->seq[k] = ttft_begin(r, now ? TTFT_NOW : pt->t[k]);
      if (!pt->seq[k]) die("ttft_begin refused a sequence while setting up");
      pt->t[k] += 300000000; /* first token 300 ms later */
      check_rc(ttft_token_emitted(r, pt->seq[k], 1, now ? TTFT_NOW : pt->t[k]) != TTFT_OK,
               "ttft_token_emitted (setup)");
    }
  }
  return c;
}

static void hot_free(hot_ctx *c, int nthreads, const char *what) {
  check_rc(atomic_load_explicit(&c->bad, memory_order_relaxed) != 0, what);
  for (int th = 0; th < nthreads; th++) {
    per_thread *pt = c->th[th];
    if (c->r)
      for (int k = 0; k < NSEQ; k++)
        check_rc(ttft_stream_end(c->r, pt->seq[k], TTFT_COMPLETED,
                                 c->now ? TTFT_NOW : pt->t[k] + 1) != TTFT_OK,
                 "ttft_stream_end (teardown)");
    free(pt->floor);
    free(pt);
  }
  free(c);
}

/* Two threads feed ONE sequence, handing it over every k tokens. */
typedef struct pingpong {
  ttft_registry *r;
  ttft_seq s;
  uint64_t t;             /* the sequence's last timestamp: moves with the turn */
  floor_hist *fh;         /* non-NULL: the baseline, a floor increment instead */
  unsigned k;
  char pad0[PAD];
  _Atomic int turn;
  char pad1[PAD];
  _Atomic int bad;
} pingpong;

static void loop_pingpong(void *p, uint64_t n, int tid) {
  pingpong *c = p;
  int bad = 0;
  uint64_t gi = (uint64_t)tid * 977;
  for (uint64_t done = 0; done < n; done += c->k) {
    unsigned spins = 0;
    /* acquire: the other thread's emissions and c->t happen before ours */
    while (atomic_load_explicit(&c->turn, memory_order_acquire) != tid)
      if (++spins % 1024 == 0) sched_yield(); else cpu_relax();
    uint64_t t = c->t;
    if (c->fh) {
      for (unsigned j = 0; j < c->k; j++) {
        uint64_t g = g_gaps[gi++ & GAP_MASK];
        t += g;
        bad |= !floor_record(c->fh, (int64_t)g);
      }
    } else {
      for (unsigned j = 0; j < c->k; j++) {
        t += g_gaps[gi++ & GAP_MASK];
        bad |= ttft_token_emitted(c->r, c->s, 1, t);
      }
    }
    c->t = t;
    /* release: hand the sequence (and c->t) to the other thread */
    atomic_store_explicit(&c->turn, tid ^ 1, memory_order_release);
  }
  if (bad) atomic_fetch_add_explicit(&c->bad, 1, memory_order_relaxed);
}

/* begin + stream_end, one sequence at a time per thread */
typedef struct life_ctx {
  ttft_registry *r;
  uint64_t t[MAX_THREADS][PAD / 8];
  _Atomic uint64_t dropped;
  _Atomic int bad;
  int ids;      /* loop_life_tokens: begin_ex with a request and a trace id */
  int growing;  /* loop_life_tokens: every stream slower than the ones
                   before, so every end enters both slowest lists */
  uint64_t k;
} life_ctx;

/* A whole stream: begin, two tokens, stream_end (the slowest lists are
 * offered its TTFT and its gap at the end). */
static void loop_life_tokens(void *p, uint64_t n, int tid) {
  life_ctx *c = p;
  ttft_registry *r = c->r;
  uint64_t t = c->t[tid][0], dropped = 0;
  int bad = 0;
  ttft_request q;
  ttft_request_init(&q);
#ifdef TTFT_MAX_REQUEST_ID /* 1.2: this file also builds against an older ttft.h (baseline runs) */
  if (c->ids) {
    q.request_id = "chatcmpl-0123456789abcdef";
    q.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  }
#endif
  for (uint64_t i = 0; i < n; i++) {
    t += 1000;
    ttft_seq s = c->ids ? ttft_begin_ex(r, &q, t) : ttft_begin(r, t);
    if (!s) {
      dropped++;
      continue;
    }
    uint64_t d = c->growing ? 1000 + c->k++ : g_gaps[i & GAP_MASK];
    bad |= ttft_token_emitted(r, s, 1, t + d);
    bad |= ttft_token_emitted(r, s, 1, t + 2 * d);
    t += 2 * d;
    bad |= ttft_stream_end(r, s, TTFT_COMPLETED, t);
  }
  c->t[tid][0] = t;
  atomic_fetch_add_explicit(&c->dropped, dropped, memory_order_relaxed);
  if (bad) atomic_fetch_add_explicit(&c->bad, 1, memory_order_relaxed);
}

static void loop_life(void *p, uint64_t n, int tid) {
  life_ctx *c = p;
  ttft_registry *r = c->r;
  uint64_t t = c->t[tid][0], dropped = 0;
  int bad = 0;
  for (uint64_t i = 0; i < n; i++) {
    t += 1000;
    ttft_seq s = ttft_begin(r, t);
    if (!s) {
      dropped++;
      continue;
    }
    t += g_gaps[i & GAP_MASK];
    bad |= ttft_stream_end(r, s, TTFT_COMPLETED, t);
  }
  c->t[tid][0] = t;
  atomic_fetch_add_explicit(&c->dropped, dropped, memory_order_relaxed);
  if (bad) atomic_fetch_add_explicit(&c->bad, 1, memory_order_relaxed);
}

#if HAVE_PEER
typedef struct peer_ctx {
  void *h;
} peer_ctx;

static void loop_peer(void *p, uint64_t n, int tid) {
  peer_observe_loop(((peer_ctx *)p)->h, g_gaps, GAP_MASK, n);
}
#endif

/* ============================================================ snapshots */
typedef struct snap_ctx {
  ttft_registry *r;
  ttft_snapshot *s;
  int bad;
} snap_ctx;

static void loop_snapshot(void *p, uint64_t n, int tid) {
  snap_ctx *c = p;
  for (uint64_t i = 0; i < n; i++) {
    ttft_snapshot *s = ttft_snapshot_take(c->r);
    if (!s) c->bad = 1;
    ttft_snapshot_free(s);
  }
}

static void loop_quantile(void *p, uint64_t n, int tid) {
  static const double qs[8] = {0.5, 0.9, 0.95, 0.99, 0.999, 0.1, 0.75, 0.9999};
  const ttft_snapshot *s = ((snap_ctx *)p)->s;
  uint64_t acc = 0;
  for (uint64_t i = 0; i < n; i++) acc += ttft_snapshot_quantile(s, TTFT_METRIC_ITL, qs[i & 7]);
  g_sink = acc;
}

/* Record `events` emissions into r from this thread: 64 sequences at a
 * time, each ending after 1000 tokens and replaced by a new one (so every
 * metric, the slot recycling and the per-sequence histograms are used). */
typedef struct filler {
  ttft_seq seq[NSEQ];
  uint64_t t[NSEQ];
  uint32_t left[NSEQ];
  uint64_t gi;
} filler;

static uint64_t fill(ttft_registry *r, filler *f, uint64_t events) {
  int bad = 0;
  uint64_t refused = 0;
  for (uint64_t i = 0; i < events; i++) {
    unsigned k = (unsigned)i & (NSEQ - 1);
    if (!f->seq[k]) {
      f->t[k] += 1000000;
      f->seq[k] = ttft_begin(r, f->t[k] ? f->t[k] : 1);
      if (!f->seq[k]) {
        refused++;
        continue;
      }
      f->t[k] += 200000000 + (f->gi * 7919) % 300000000; /* TTFT 200..500 ms */
      f->left[k] = 1000;
    } else {
      f->t[k] += g_gaps[f->gi++ & GAP_MASK];
    }
    bad |= ttft_token_emitted(r, f->seq[k], 1, f->t[k]);
    if (--f->left[k] == 0) {
      f->t[k] += 1000;
      bad |= ttft_stream_end(r, f->seq[k], TTFT_COMPLETED, f->t[k]);
      f->seq[k] = 0;
    }
  }
  check_rc(bad, "fill (token_emitted / stream_end)");
  return refused;
}

static filler *filler_new(void) {
  filler *f = xalloc(sizeof *f);
  uint64_t t0 = mono_ns();
  for (int k = 0; k < NSEQ; k++) f->t[k] = t0 + (uint64_t)k * 1000;
  return f;
}

static void filler_end(ttft_registry *r, filler *f) {
  for (int k = 0; k < NSEQ; k++)
    if (f->seq[k]) check_rc(ttft_stream_end(r, f->seq[k], TTFT_CANCELLED, f->t[k] + 1) != TTFT_OK,
                            "ttft_stream_end (filler)");
}

/* snapshot and quantile cost of r now, as two rows */
static void measure_reads(ttft_registry *r, const char *key, const char *label) {
  snap_ctx sc = {r, NULL, 0};
  char k[32], name[80];
  uint64_t n = opt.quick ? 2 : 0;
  snprintf(k, sizeof k, "snap_%s", key);
  snprintf(name, sizeof name, "snapshot_take+free, %s", label);
  row *rs = measure(k, "growth", name, loop_snapshot, &sc, 1, n);
  rs->unit = "us";
  for (int i = 0; i < rs->reps; i++) rs->samples[i] /= 1000;
  row_set_samples(rs, rs->samples, rs->reps);
  rs->wall /= 1000;
  row_print(rs);
  check_rc(sc.bad, "ttft_snapshot_take");
  sc.s = ttft_snapshot_take(r);
  if (!sc.s) die("ttft_snapshot_take failed");
  snprintf(k, sizeof k, "q_%s", key);
  snprintf(name, sizeof name, "quantile (ITL), %s", label);
  row_print(measure(k, "growth", name, loop_quantile, &sc, 1, 0));
  ttft_snapshot_free(sc.s);
}

/* ====================================================== against 1.1 */
/* SPEC section 9: token_emitted and step_emitted, per token, within 10 % of
 * 1.1 measured in the same run; SPEC section 5: two threads on their own
 * sequences <= 1.3x one thread. The same cases run in this binary and in
 * ttft-bench-baseline (this file built against the 1.1 library that
 * bench/CMakeLists.txt extracts from git history), each in a child process
 * ("--compare-child") that prints one line per case. The parent runs the
 * two children alternately, swapping their order every round, and reports
 * the median over rounds of each child's fastest repetition (fresh threads
 * land on either core, and on this shared 2-core machine one core can be
 * 1.7x slower than the other for seconds: a run's median is a coin flip,
 * its fastest repetition is not). The iteration counts are fixed: both
 * libraries do the same work. */
typedef struct cmp_case {
  const char *key, *name;
  int threads;   /* each thread feeds sequences of its own */
  int nseq;      /* sequences per thread (step: one step_emitted over all) */
  int step;      /* ttft_step_emitted, else ttft_token_emitted */
  int now;       /* TTFT_NOW, else caller timestamps */
  uint64_t n;    /* tokens per thread per repetition (a multiple of nseq) */
  double limit;  /* target for current / baseline; 0: none */
  uint64_t tpot; /* the sequences' class has this TPOT budget (ns), so that
                    1.3's token deadlines (fluidity) run; 0: class 0      */
} cmp_case;

static const cmp_case cmp_cases[] = {
    {"tok_ts", "token_emitted, 1 seq, caller t", 1, 1, 0, 0, UINT64_C(2) << 20, 1.10, 0},
    {"tok_now", "token_emitted, 1 seq, TTFT_NOW", 1, 1, 0, 1, UINT64_C(5) << 17, 1.10, 0},
    {"step_1", "step_emitted, 1 seq, per token", 1, 1, 1, 0, UINT64_C(2) << 20, 1.10, 0},
    {"step_64", "step_emitted, 64 seqs, per token", 1, 64, 1, 0, UINT64_C(4) << 20, 1.10, 0},
    {"step_256", "step_emitted, 256 seqs, per token", 1, 256, 1, 0, UINT64_C(4) << 20, 1.10, 0},
    {"tok_2t", "token_emitted, 2 threads x own seq", 2, 1, 0, 0, UINT64_C(2) << 20, 0, 0},
    /* a class with a 50 ms TPOT budget: since 1.3 (issue 29) every gap
     * also meets or misses a token deadline (the gaps are 15 .. 25 ms and
     * 1 in 64 a stall of 100 .. 800 ms, so nearly all meet it) */
    {"tok_slo", "token_emitted, 1 seq, class TPOT 50 ms", 1, 1, 0, 0, UINT64_C(2) << 20, 1.10,
     UINT64_C(50000000)},
    {"step_64_slo", "step_emitted, 64 seqs, class TPOT 50 ms", 1, 64, 1, 0, UINT64_C(4) << 20, 1.10,
     UINT64_C(50000000)},
};
#define NCMP (sizeof cmp_cases / sizeof cmp_cases[0])
#define CMP_CHILD_REPS 5
#define CMP_ROUNDS_MAX 64

typedef struct cmp_ctx {
  ttft_registry *r;
  const cmp_case *cc;
  struct {
    ttft_seq *seq;
    uint64_t t;  /* the sequences' last timestamp */
    char pad[PAD];
  } th[MAX_THREADS];
  _Atomic int bad;
} cmp_ctx;

static uint64_t cmp_iters(const cmp_case *cc) {
  return opt.quick ? cc->n >> 10 : cc->n; /* stays a multiple of 256 */
}

static void loop_cmp(void *p, uint64_t n, int tid) {
  cmp_ctx *c = p;
  const cmp_case *cc = c->cc;
  ttft_registry *r = c->r;
  const ttft_seq *seq = c->th[tid].seq;
  uint64_t t = c->th[tid].t;
  int bad = 0;
  if (cc->step) {
    size_t ns = (size_t)cc->nseq;
    for (uint64_t i = 0; i < n; i += ns) {
      t += g_gaps[(i / ns) & GAP_MASK];
      bad |= ttft_step_emitted(r, seq, NULL, ns, t) != (long)ns;
    }
  } else if (cc->now) {
    ttft_seq s = seq[0];
    for (uint64_t i = 0; i < n; i++) bad |= ttft_token_emitted(r, s, 1, TTFT_NOW);
  } else {
    ttft_seq s = seq[0];
    for (uint64_t i = 0; i < n; i++) {
      t += g_gaps[i & GAP_MASK];
      bad |= ttft_token_emitted(r, s, 1, t);
    }
  }
  c->th[tid].t = t;
  if (bad) atomic_fetch_add_explicit(&c->bad, 1, memory_order_relaxed);
}

static ttft_registry *registry_or_die(const ttft_config *cfg);
static void section(const char *title);

/* --compare-child: every case, opt.reps repetitions each, on stdout as
 * "case KEY ns ns ...", per token, each thread's CPU time */
static int compare_child(void) {
  ttft_config cfg;
  ttft_config_init(&cfg);
  printf("version %s\n", ttft_version_string());
  for (size_t i = 0; i < NCMP; i++) {
    const cmp_case *cc = &cmp_cases[i];
    cmp_ctx *c = xalloc(sizeof *c);
    c->r = registry_or_die(&cfg);
    c->cc = cc;
    ttft_request req;
    ttft_request_init(&req);
    if (cc->tpot) {
      ttft_slo slo;
      ttft_slo_init(&slo);
      slo.tpot_ns = cc->tpot;
      req.class_id = ttft_class_add(c->r, "slo", &slo);
      if (req.class_id < 0) die("ttft_class_add refused the bench class");
    }
    uint64_t t0 = mono_ns();
    for (int th = 0; th < cc->threads; th++) {
      c->th[th].seq = xalloc(sizeof(ttft_seq) * (size_t)cc->nseq);
      for (int k = 0; k < cc->nseq; k++) {
        ttft_seq s = ttft_begin_ex(c->r, &req, cc->now ? TTFT_NOW : t0);
        if (!s) die("ttft_begin refused a sequence while setting up");
        /* the first token: the loop measures the steady state (ITL) */
        check_rc(ttft_token_emitted(c->r, s, 1, cc->now ? TTFT_NOW : t0 + 300000000) != TTFT_OK,
                 "ttft_token_emitted (setup)");
        c->th[th].seq[k] = s;
      }
      c->th[th].t = t0 + 300000000;
    }
    double v[MAX_REPS], w, a;
    for (int rep = 0; rep < opt.reps; rep++) run_once(loop_cmp, c, cc->threads, cmp_iters(cc), &v[rep], &w, &a);
    printf("case %s", cc->key);
    for (int rep = 0; rep < opt.reps; rep++) printf(" %.4f", v[rep]);
    printf("\n");
    check_rc(atomic_load_explicit(&c->bad, memory_order_relaxed) != 0, cc->key);
    for (int th = 0; th < cc->threads; th++) {
      for (int k = 0; k < cc->nseq; k++)
        check_rc(ttft_stream_end(c->r, c->th[th].seq[k], TTFT_COMPLETED,
                                 cc->now ? TTFT_NOW : c->th[th].t + 1) != TTFT_OK,
                 "ttft_stream_end (teardown)");
      free(c->th[th].seq);
    }
    ttft_registry_free(c->r);
    free(c);
  }
  fflush(stdout);
  return call_errors ? 1 : 0;
}

/* Run `exe --compare-child`; its stdout into buf. 0 when it exited 0. */
static int run_child(const char *exe, char *buf, size_t cap) {
  int fd[2];
  fflush(stdout);
  if (pipe(fd) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    char reps[16];
    snprintf(reps, sizeof reps, "%d", CMP_CHILD_REPS);
    char *argv[8];
    int a = 0;
    argv[a++] = (char *)exe;
    argv[a++] = "--compare-child";
    argv[a++] = "--reps";
    argv[a++] = reps;
    if (opt.quick) argv[a++] = "--quick";
    if (opt.no_membarrier) argv[a++] = "--no-membarrier";
    argv[a] = NULL;
    dup2(fd[1], STDOUT_FILENO);
    close(fd[0]);
    close(fd[1]);
    execv(exe, argv);
    fprintf(stderr, "ttft-bench: cannot run %s: %s\n", exe, strerror(errno));
    _exit(127);
  }
  close(fd[1]);
  size_t len = 0;
  for (;;) {
    char tmp[4096];
    ssize_t k = read(fd[0], tmp, sizeof tmp);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    size_t take = (size_t)k < cap - 1 - len ? (size_t)k : cap - 1 - len;
    memcpy(buf + len, tmp, take);
    len += take;
  }
  buf[len] = 0;
  close(fd[0]);
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* a child's output: best[i] = its fastest repetition of cmp_cases[i], med[i]
 * their median; 0 when every case is there */
static int parse_child(const char *buf, double best[NCMP], double med[NCMP], char *version, size_t vcap) {
  int seen = 0;
  for (const char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    if (strncmp(l, "version ", 8) == 0) {
      size_t n = strcspn(l + 8, "\n");
      snprintf(version, vcap, "%.*s", (int)n, l + 8);
    } else if (strncmp(l, "case ", 5) == 0) {
      const char *k = l + 5;
      size_t kn = strcspn(k, " \n");
      for (size_t i = 0; i < NCMP; i++) {
        if (strlen(cmp_cases[i].key) != kn || memcmp(k, cmp_cases[i].key, kn) != 0) continue;
        double v[MAX_REPS];
        int n = 0;
        char *e;
        for (const char *q = k + kn; n < MAX_REPS; q = e) {
          double x = strtod(q, &e);
          if (e == q) break;
          v[n++] = x;
        }
        if (n == 0) return -1;
        med[i] = median_of(v, n);
        best[i] = v[0];
        for (int j = 1; j < n; j++)
          if (v[j] < best[i]) best[i] = v[j];
        seen |= 1 << i;
      }
    }
  }
  return seen == (1 << NCMP) - 1 ? 0 : -1;
}

static struct {
  int ran;               /* the compare group ran */
  const char *skipped;   /* why there was no baseline (NULL: there was one) */
  const char *binary, *commit;
  char version[64];
  int rounds;
} g_cmp;

static const char *self_exe(void) {
  static char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return NULL;
  path[n] = 0;
  return path;
}

static double ratio_stats(const double *a, const double *b, int n, double *lo, double *hi) {
  double v[CMP_ROUNDS_MAX] = {0};
  for (int i = 0; i < n; i++) v[i] = b[i] > 0 ? a[i] / b[i] : INFINITY;
  *lo = *hi = v[0];
  for (int i = 1; i < n; i++) {
    if (v[i] < *lo) *lo = v[i];
    if (v[i] > *hi) *hi = v[i];
  }
  return median_of(v, n);
}

static void run_compare(void) {
  g_cmp.ran = 1;
  g_cmp.rounds = opt.rounds ? opt.rounds : opt.quick ? 2 : 9;
  g_cmp.binary = opt.baseline;
#if defined(TTFT_BENCH_IS_BASELINE)
  g_cmp.skipped = "this binary is the baseline (run ttft-bench)";
#else
#  if defined(TTFT_BENCH_BASELINE_COMMIT)
  g_cmp.commit = TTFT_BENCH_BASELINE_COMMIT;
#  endif
#  if defined(TTFT_BENCH_BASELINE_BIN)
  if (!g_cmp.binary) g_cmp.binary = TTFT_BENCH_BASELINE_BIN;
#  elif defined(TTFT_BENCH_BASELINE_SKIPPED)
  if (!g_cmp.binary) g_cmp.skipped = TTFT_BENCH_BASELINE_SKIPPED;
#  else
  if (!g_cmp.binary) g_cmp.skipped = "built without a baseline";
#  endif
#endif
  if (g_cmp.binary && !g_cmp.skipped && access(g_cmp.binary, X_OK) != 0) g_cmp.skipped = "the baseline binary is missing";
  if (g_cmp.skipped) g_cmp.binary = NULL;
  const char *self = self_exe();
  if (!self) die("compare: cannot find this program (/proc/self/exe)");

  section("against the 1.1 baseline: the same cases in this library and in 1.1, alternately");
  if (g_cmp.skipped) {
    printf("  ************************************************************************\n"
           "  NO BASELINE: %s.\n"
           "  The hooks are measured alone; nothing says whether they are within\n"
           "  10 %% of 1.1 (SPEC section 9). Build from a git clone with history.\n"
           "  ************************************************************************\n",
           g_cmp.skipped);
    fprintf(stderr, "ttft-bench: NO BASELINE: %s\n", g_cmp.skipped);
  } else {
    printf("  baseline: %s%s%s\n", g_cmp.binary, g_cmp.commit ? ", git " : "", g_cmp.commit ? g_cmp.commit : "");
  }

  /* per round: each run's fastest repetition (the figures), and its median */
  static double cur[NCMP][CMP_ROUNDS_MAX], bas[NCMP][CMP_ROUNDS_MAX];
  static double cur_med[NCMP][CMP_ROUNDS_MAX], bas_med[NCMP][CMP_ROUNDS_MAX];
  static char buf[1 << 16];
  char cur_version[64] = "", ver[64] = "";
  int runs = g_cmp.binary ? 2 : 1;
  for (int rd = 0; rd < g_cmp.rounds; rd++) {
    for (int j = 0; j < runs; j++) {
      int is_base = runs == 2 && (rd + j) % 2 == 1; /* rounds alternate who goes first */
      const char *exe = is_base ? g_cmp.binary : self;
      double best[NCMP], med[NCMP];
      if (run_child(exe, buf, sizeof buf) != 0 || parse_child(buf, best, med, ver, sizeof ver) != 0) {
        fputs(buf, stdout);
        die("compare: %s --compare-child failed", exe);
      }
      snprintf(is_base ? g_cmp.version : cur_version, sizeof cur_version, "%s", ver);
      for (size_t i = 0; i < NCMP; i++) {
        (is_base ? bas : cur)[i][rd] = best[i];
        (is_base ? bas_med : cur_med)[i][rd] = med[i];
      }
    }
  }

  for (size_t i = 0; i < NCMP; i++) {
    const cmp_case *cc = &cmp_cases[i];
    char key[32], name[80];
    snprintf(key, sizeof key, "cur_%s", cc->key);
    snprintf(name, sizeof name, "current: %s", cc->name);
    row *rc = row_add(key, "compare", name, "ns/op");
    row_set_samples(rc, cur[i], g_cmp.rounds);
    rc->threads = cc->threads;
    rc->iters = cmp_iters(cc);
    if (!g_cmp.binary) continue;
    snprintf(key, sizeof key, "base_%s", cc->key);
    snprintf(name, sizeof name, "%s: %s", g_cmp.version, cc->name);
    row *rb = row_add(key, "compare", name, "ns/op");
    row_set_samples(rb, bas[i], g_cmp.rounds);
    rb->threads = cc->threads;
    rb->iters = cmp_iters(cc);
    double lo, hi, m = ratio_stats(cur[i], bas[i], g_cmp.rounds, &lo, &hi);
    double mm = median_of(cur_med[i], g_cmp.rounds) / median_of(bas_med[i], g_cmp.rounds);
    snprintf(rc->note, sizeof rc->note,
             "(current/%s per round: median %.3fx, %.3f .. %.3f; medians of medians: %.3fx)", g_cmp.version, m,
             lo, hi, mm);
  }

  printf("  libttft %s (this build) against %s; %d rounds, the two alternating, first swapped\n"
         "  every round; a figure = median over rounds of one run's fastest of %d reps,\n"
         "  CPU time per token per thread\n",
         cur_version, g_cmp.binary ? g_cmp.version : "nothing", g_cmp.rounds, CMP_CHILD_REPS);
  printf("  %-38s %10s %10s %8s %24s %10s\n", "case", "current", g_cmp.binary ? g_cmp.version : "-",
         "cur/base", "per round: median [range]", "target");
  for (size_t i = 0; i < NCMP; i++) {
    const cmp_case *cc = &cmp_cases[i];
    double c = median_of(cur[i], g_cmp.rounds);
    printf("  %-38s %7.2f ns", cc->name, c);
    if (g_cmp.binary) {
      double b = median_of(bas[i], g_cmp.rounds), lo, hi;
      double m = ratio_stats(cur[i], bas[i], g_cmp.rounds, &lo, &hi);
      char pr[48];
      snprintf(pr, sizeof pr, "%.3fx [%.2f .. %.2f]", m, lo, hi);
      printf(" %7.2f ns %7.3fx %24s", b, c / b, pr);
      if (cc->limit > 0) printf("   <= %.2fx %s", cc->limit, c / b <= cc->limit ? "met" : "MISSED");
    }
    printf("\n");
  }
  size_t i1 = 0, i2 = NCMP - 1; /* tok_ts, tok_2t */
  double s_cur = median_of(cur[i2], g_cmp.rounds) / median_of(cur[i1], g_cmp.rounds);
  double lo, hi, m = ratio_stats(cur[i2], cur[i1], g_cmp.rounds, &lo, &hi);
  char pr[48];
  snprintf(pr, sizeof pr, "%.3fx [%.2f .. %.2f]", m, lo, hi);
  printf("  %-38s %8.3fx", "2 threads x own seq / 1 thread", s_cur);
  if (g_cmp.binary)
    printf(" %9.3fx %8s %24s", median_of(bas[i2], g_cmp.rounds) / median_of(bas[i1], g_cmp.rounds), "", pr);
  else
    printf(" %10s %8s %24s", "", "", pr);
  printf("   <= 1.30x %s\n", s_cur <= 1.30 ? "met" : "MISSED");

  for (size_t i = 0; i < NCMP && g_cmp.binary; i++) {
    const cmp_case *cc = &cmp_cases[i];
    if (cc->limit <= 0) continue;
    char num[32], den[32], name[96];
    snprintf(num, sizeof num, "cur_%s", cc->key);
    snprintf(den, sizeof den, "base_%s", cc->key);
    snprintf(name, sizeof name, "current / %s: %s", g_cmp.version, cc->name);
    target_add(name, num, den, cc->limit, NULL);
  }
  target_add("token_emitted 2 threads x own seq / 1 thread (compare)", "cur_tok_2t", "cur_tok_ts", 1.30, NULL);
  /* issue 29.6: the fluidity bookkeeping rides on the ITL path within 5 %:
   * the same hook, the same gaps, in a class with token deadlines against
   * one without, both in this library (1.1 had no fluidity to compare) */
  target_add("fluidity: token_emitted, class TPOT 50 ms / no budget", "cur_tok_slo", "cur_tok_ts",
             1.05, NULL);
  target_add("fluidity: step_emitted 64 seqs, class TPOT 50 ms / no budget", "cur_step_64_slo",
             "cur_step_64", 1.05, NULL);
}

/* ================================================================ JSON */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

static void json_num(FILE *f, double v) {
  if (isfinite(v)) fprintf(f, "%.6g", v);
  else fputs("null", f);
}

static void cpu_model(char *buf, size_t cap) {
  snprintf(buf, cap, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) == 0) {
      char *c = strchr(line, ':');
      if (c) {
        c += 1 + (c[1] == ' ');
        c[strcspn(c, "\n")] = 0;
        snprintf(buf, cap, "%s", c);
      }
      break;
    }
  }
  fclose(f);
}

static int write_json(const char *path, double total_s) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  struct utsname u;
  char cpu[256];
  cpu_model(cpu, sizeof cpu);
  if (uname(&u) != 0) memset(&u, 0, sizeof u);
  fprintf(f, "{\n  \"schema\": \"ttft-bench/1\",\n  \"library_version\": ");
  json_str(f, ttft_version_string());
  fprintf(f, ",\n  \"quick\": %s,\n  \"no_membarrier\": %s,\n  \"reps\": %d,\n  \"seconds\": %.1f,\n",
          opt.quick ? "true" : "false", opt.no_membarrier ? "true" : "false", opt.reps, total_s);
  fprintf(f, "  \"machine\": {\"cpu\": ");
  json_str(f, cpu);
  fprintf(f, ", \"online_cpus\": %ld, \"kernel\": ", sysconf(_SC_NPROCESSORS_ONLN));
  json_str(f, u.release);
  fprintf(f, ", \"arch\": ");
  json_str(f, u.machine);
  fprintf(f, ", \"loadavg_start\": ");
  json_num(f, g_load_start);
  fprintf(f, ", \"loadavg_end\": ");
  json_num(f, g_load_end);
  fprintf(f, "},\n  \"peer\": ");
  if (HAVE_PEER) json_str(f, "prometheus-cpp");
  else fputs("null", f);
  fprintf(f, ",\n  \"compare\": ");
  if (!g_cmp.ran) {
    fputs("null", f);
  } else {
    fprintf(f, "{\"baseline_binary\": ");
    if (g_cmp.binary) json_str(f, g_cmp.binary);
    else fputs("null", f);
    fprintf(f, ", \"baseline_commit\": ");
    if (g_cmp.commit && g_cmp.binary) json_str(f, g_cmp.commit);
    else fputs("null", f);
    fprintf(f, ", \"baseline_version\": ");
    if (g_cmp.binary) json_str(f, g_cmp.version);
    else fputs("null", f);
    fprintf(f, ", \"skipped\": ");
    if (g_cmp.skipped) json_str(f, g_cmp.skipped);
    else fputs("null", f);
    fprintf(f, ", \"rounds\": %d, \"child_reps\": %d}", g_cmp.rounds, CMP_CHILD_REPS);
  }
  fprintf(f, ",\n  \"rows\": [\n");
  for (int i = 0; i < g_nrows; i++) {
    const row *r = &g_rows[i];
    fprintf(f, "    {\"key\": ");
    json_str(f, r->key);
    fprintf(f, ", \"group\": ");
    json_str(f, r->group);
    fprintf(f, ", \"name\": ");
    json_str(f, r->name);
    fprintf(f, ", \"unit\": ");
    json_str(f, r->unit);
    fprintf(f, ", \"threads\": %d, \"reps\": %d, \"iters\": %llu, \"median\": ", r->threads, r->reps,
            (unsigned long long)r->iters);
    json_num(f, r->med);
    fprintf(f, ", \"min\": ");
    json_num(f, r->min);
    fprintf(f, ", \"max\": ");
    json_num(f, r->max);
    if (r->wall > 0) {
      fprintf(f, ", \"wall_median\": ");
      json_num(f, r->wall);
    }
    if (r->threads > 1) {
      fprintf(f, ", \"all_threads_ns_per_op\": ");
      json_num(f, r->agg);
    }
    fprintf(f, ", \"samples\": [");
    for (int j = 0; j < r->reps; j++) {
      if (j) fputs(", ", f);
      json_num(f, r->samples[j]);
    }
    fprintf(f, "], \"note\": ");
    json_str(f, r->note);
    fprintf(f, "}%s\n", i + 1 < g_nrows ? "," : "");
  }
  fprintf(f, "  ],\n  \"targets\": [\n");
  for (int i = 0; i < g_ntargets; i++) {
    const target *t = &g_targets[i];
    fprintf(f, "    {\"name\": ");
    json_str(f, t->name);
    fprintf(f, ", \"numerator\": ");
    json_str(f, t->num);
    fprintf(f, ", \"denominator\": ");
    if (t->den[0]) json_str(f, t->den);
    else fputs("null", f);
    fprintf(f, ", \"unit\": ");
    json_str(f, t->unit);
    fprintf(f, ", \"value\": ");
    json_num(f, t->value);
    fprintf(f, ", \"limit\": ");
    json_num(f, t->limit);
    fprintf(f, ", \"met\": %s}%s\n", t->met ? "true" : "false", i + 1 < g_ntargets ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  return fclose(f) == 0 ? 0 : -1;
}


/* ============================================================ publish (1.3)
 * A registry with shared_dir (record/publish.c): what the hooks pay (the
 * same loops on two registries, one publishing every 100 ms from its
 * thread, alternated repetition by repetition), what one publish costs
 * for 8 classes with data, and what a segment weighs per class. */
#if !defined(TTFT_BENCH_IS_BASELINE)
static char g_pub_dir[256];

static const char *pub_dir(void) {
  if (!g_pub_dir[0]) {
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(g_pub_dir, sizeof g_pub_dir, "%s/ttft-bench-XXXXXX", base);
    if (!mkdtemp(g_pub_dir)) die("mkdtemp %s: %s", g_pub_dir, strerror(errno));
    chmod(g_pub_dir, 0700);
  }
  return g_pub_dir;
}

static void pub_dir_remove(void) {
  if (!g_pub_dir[0]) return;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_pub_dir);
  if (system(cmd) != 0) fprintf(stderr, "ttft-bench: could not remove %s\n", g_pub_dir);
}

/* Rows num (with shared_dir) and den (without): fn on ctx_on and ctx_off,
 * alternately, one repetition each, so drift and load fall on both. */
static void measure_pair(const char *key_on, const char *key_off, const char *name_on,
                         const char *name_off, loop_fn fn, void *ctx_on, void *ctx_off) {
  double v_on[MAX_REPS], v_off[MAX_REPS], w[MAX_REPS], a[MAX_REPS];
  uint64_t n = calibrate(fn, ctx_off);
  for (int i = 0; i < opt.reps; i++) { /* which goes first alternates too */
    void *first = i & 1 ? ctx_on : ctx_off, *second = i & 1 ? ctx_off : ctx_on;
    run_once(fn, first, 1, n, i & 1 ? &v_on[i] : &v_off[i], &w[i], &a[i]);
    run_once(fn, second, 1, n, i & 1 ? &v_off[i] : &v_on[i], &w[i], &a[i]);
  }
  row *off = row_add(key_off, "publish", name_off, "ns/op");
  row_set_samples(off, v_off, opt.reps);
  off->iters = n;
  row_print(off);
  row *on = row_add(key_on, "publish", name_on, "ns/op");
  row_set_samples(on, v_on, opt.reps);
  on->iters = n;
  snprintf(on->note, sizeof on->note, "(%.3fx without)", off->med > 0 ? on->med / off->med : 0.0);
  row_print(on);
}

/* ------------------------------------------------------- otlp_render
 * One OTLP request (TTFT_FORMAT_OTLP_PROTOBUF, an ExportMetricsServiceRequest
 * as the 1.3 pusher sends it) of a default registry with 1 and 8 classes
 * of filled data, against the Prometheus protobuf render of the same
 * snapshot in the same run (SPEC §11: a push <= 2 ms of CPU). */
typedef struct otlp_ctx {
  const ttft_snapshot *s;
  ttft_format f;
  char *buf;
  size_t cap;
  int bad;
} otlp_ctx;

static void loop_render(void *p, uint64_t n, int tid) {
  (void)tid;
  otlp_ctx *c = p;
  for (uint64_t i = 0; i < n; i++) c->bad |= ttft_snapshot_format(c->s, c->f, c->buf, c->cap) <= 0;
}

static void fill_classes(ttft_registry *r, int nclasses, int streams);
static void run_otlp_render(void) {
  section("otlp_render (1.3): one OTLP request of a default registry, vs the protobuf exposition");
  static const int classes[2] = {1, 8};
  for (int k = 0; k < 2; k++) {
    ttft_registry *r = registry_or_die(NULL);
    fill_classes(r, classes[k], opt.quick ? 20 : 500);
    ttft_snapshot *s = ttft_snapshot_take(r);
    if (!s) die("ttft_snapshot_take failed");
    long need = ttft_snapshot_format(s, TTFT_FORMAT_OTLP_PROTOBUF, NULL, 0);
    long need_pb = ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS_PROTOBUF, NULL, 0);
    if (need <= 0 || need_pb <= 0) die("render failed");
    otlp_ctx c = {s, TTFT_FORMAT_OTLP_PROTOBUF, NULL, (size_t)(need > need_pb ? need : need_pb) + 1, 0};
    c.buf = malloc(c.cap);
    if (!c.buf) die("out of memory");
    char key[32], name[96];
    snprintf(key, sizeof key, "otlp_render_%d", classes[k]);
    snprintf(name, sizeof name, "OTLP request render, %d class%s", classes[k], classes[k] > 1 ? "es" : "");
    row *ro = measure(key, "otlp_render", name, loop_render, &c, 1, opt.quick ? 2 : 0);
    c.f = TTFT_FORMAT_PROMETHEUS_PROTOBUF;
    snprintf(key, sizeof key, "pb_render_%d", classes[k]);
    snprintf(name, sizeof name, "protobuf exposition render, %d class%s", classes[k],
             classes[k] > 1 ? "es" : "");
    row *rp = measure(key, "otlp_render", name, loop_render, &c, 1, opt.quick ? 2 : 0);
    check_rc(c.bad, "ttft_snapshot_format");
    row *rows[2] = {ro, rp};
    for (int j = 0; j < 2; j++) {
      row *x = rows[j];
      x->unit = "us";
      for (int i = 0; i < x->reps; i++) x->samples[i] /= 1e3;
      row_set_samples(x, x->samples, x->reps);
      x->wall /= 1e3;
    }
    snprintf(ro->note, sizeof ro->note, "(%ld bytes; %.2fx the protobuf exposition's time)", need,
             rp->med > 0 ? ro->med / rp->med : 0.0);
    snprintf(rp->note, sizeof rp->note, "(%ld bytes)", need_pb);
    row_print(ro);
    row_print(rp);
    free(c.buf);
    ttft_snapshot_free(s);
    ttft_registry_free(r);
  }
}

/* nclasses classes, each with streams of varied TTFT, gaps and lengths */
static void fill_classes(ttft_registry *r, int nclasses, int streams);
static ttft_registry *pub_registry(int nclasses, uint32_t interval_ms, int streams) {
  ttft_config c;
  ttft_config_init(&c);
  c.shared_dir = pub_dir();
  c.publish_interval_ms = interval_ms;
  ttft_registry *r = registry_or_die(&c);
  fill_classes(r, nclasses, streams);
  return r;
}

static void fill_classes(ttft_registry *r, int nclasses, int streams) {
  uint64_t t = mono_ns();
  for (int k = 0; k < nclasses; k++) {
    char name[32];
    snprintf(name, sizeof name, "class_%d", k);
    int id = k ? ttft_class_add(r, name, NULL) : 0;
    if (id < 0) die("ttft_class_add failed");
    ttft_request rq;
    ttft_request_init(&rq);
    rq.class_id = id;
    for (int i = 0; i < streams; i++) {
      rq.prompt_tokens = 100u + (uint32_t)(i * 37 % 9000);
      ttft_seq s = ttft_begin_ex(r, &rq, t);
      if (!s) die("ttft_begin_ex refused a sequence while filling");
      uint64_t u = t + 20000000 + g_gaps[(uint64_t)i & GAP_MASK] * 50;
      int toks = 2 + i % 60;
      for (int j = 0; j < toks; j++) {
        u += g_gaps[(uint64_t)(i + j) & GAP_MASK];
        check_rc(ttft_token_emitted(r, s, 1, u) != TTFT_OK, "ttft_token_emitted (publish fill)");
      }
      check_rc(ttft_stream_end(r, s, i % 50 ? TTFT_COMPLETED : TTFT_CANCELLED, u + 1000) != TTFT_OK,
               "ttft_stream_end (publish fill)");
      t += 1000000;
    }
  }
}

static void loop_publish(void *p, uint64_t n, int tid) {
  (void)tid;
  int bad = 0;
  for (uint64_t i = 0; i < n; i++) bad |= ttft_publish((ttft_registry *)p) != TTFT_OK;
  check_rc(bad, "ttft_publish");
}

/* the size of the segment file r published last */
static long seg_bytes(ttft_registry *r) {
  ttft_snapshot *s = ttft_snapshot_take(r);
  long n = s ? ttft_snapshot_encode(s, NULL, 0) : -1;
  ttft_snapshot_free(s);
  return n < 0 ? -1 : n + 160; /* + the segment header (common/segment.h) */
}

static void run_publish(const ttft_config *cfg) {
  section("publishing (1.3): shared_dir set against not, in the same run, alternated");
  ttft_registry *off = registry_or_die(cfg);
  ttft_registry *on = pub_registry(1, 100, 0); /* the default interval: its thread runs */
  hot_ctx *h_off = hot_new(off, 1, 0), *h_on = hot_new(on, 1, 0);
  measure_pair("pub_tok_on", "pub_tok_off", "token_emitted, shared_dir set (100 ms)",
               "token_emitted, no shared_dir", loop_tok, h_on, h_off);
  hot_free(h_off, 1, "ttft_token_emitted (publish off)");
  hot_free(h_on, 1, "ttft_token_emitted (publish on)");
  life_ctx *l_off = xalloc(sizeof *l_off), *l_on = xalloc(sizeof *l_on);
  memset(l_off, 0, sizeof *l_off);
  memset(l_on, 0, sizeof *l_on);
  l_off->r = off;
  l_on->r = on;
  for (int i = 0; i < MAX_THREADS; i++) l_off->t[i][0] = l_on->t[i][0] = mono_ns();
  measure_pair("pub_life_on", "pub_life_off", "begin + stream_end, shared_dir set (100 ms)",
               "begin + stream_end, no shared_dir", loop_life, l_on, l_off);
  check_rc(atomic_load_explicit(&l_on->bad, memory_order_relaxed) ||
               atomic_load_explicit(&l_off->bad, memory_order_relaxed),
           "ttft_stream_end (publish)");
  free(l_off);
  free(l_on);
  ttft_registry_free(off);
  ttft_registry_free(on);

  /* one publish of 8 classes with data (interval 0: only these calls) */
  int streams = opt.quick ? 200 : 2000;
  ttft_registry *r8 = pub_registry(8, 0, streams);
  row *rp = measure("pub_cost", "publish", "ttft_publish, 8 classes with data", loop_publish, r8, 1, 0);
  for (int i = 0; i < rp->reps; i++) rp->samples[i] /= 1000.0;
  row_set_samples(rp, rp->samples, rp->reps);
  rp->wall /= 1000.0;
  rp->unit = "us";
  snprintf(rp->note, sizeof rp->note, "(per interval; CPU of the caller, wall incl. the file write)");
  row_print(rp);

  /* segment bytes per class: 8 classes against 1, with the same data */
  ttft_registry *r1 = pub_registry(1, 0, streams);
  long b8 = seg_bytes(r8), b1 = seg_bytes(r1);
  ttft_registry *r0 = pub_registry(1, 0, 0);
  long b0 = seg_bytes(r0);
  row *rb = row_add("pub_seg_class", "publish", "segment bytes per class with data", "bytes");
  double per_class = b8 > 0 && b1 > 0 ? (double)(b8 - b1) / 7.0 : -1;
  row_set_samples(rb, &per_class, 1); /* one exact figure, not a timing */
  snprintf(rb->note, sizeof rb->note, "(segment: %ld bytes for 8 classes, %ld for 1, %ld empty)", b8, b1,
           b0);
  row_print(rb);
  ttft_registry_free(r0);
  ttft_registry_free(r1);
  ttft_registry_free(r8);
  pub_dir_remove();
}
#endif

/* ====================================================== gather_merge (1.3)
 * What a gather of 64 processes x 8 classes costs, piece by piece: the
 * decode of their 64 segments, ttft_gather_take (merged view, and
 * TTFT_GATHER_BY_PROCESS with 64 process names), the protobuf render of
 * each view, and take + render together (SPEC §11: <= 50 ms). The 64
 * "processes" are 64 registries of this process with shared_dir (each has
 * its own identity and holds its own lock: live to a gatherer), each with
 * 8 classes of 500 requests whose latencies differ from process to
 * process. CPU ms of the calling thread per operation (the wall-clock
 * median beside it), median of 20 (5 with --quick). */
#if !defined(TTFT_BENCH_IS_BASELINE)
#define GM_PROCS 64
#define GM_CLASSES 8

static ttft_registry *gm_registry(const char *dir, int p, int streams) {
  ttft_config c;
  ttft_config_init(&c);
  char pname[32];
  snprintf(pname, sizeof pname, "worker-%02d", p);
  c.shared_dir = dir;
  c.process_name = pname;
  c.publish_interval_ms = 0; /* only ttft_publish */
  ttft_registry *r = registry_or_die(&c);
  uint64_t t = mono_ns();
  for (int k = 0; k < GM_CLASSES; k++) {
    char name[32];
    snprintf(name, sizeof name, "class_%d", k);
    int id = k ? ttft_class_add(r, name, NULL) : 0;
    if (id < 0) die("ttft_class_add failed");
    ttft_request rq;
    ttft_request_init(&rq);
    rq.class_id = id;
    for (int i = 0; i < streams; i++) {
      rq.prompt_tokens = 100u + (uint32_t)((i * 37 + p * 101) % 9000);
      ttft_seq s = ttft_begin_ex(r, &rq, t);
      if (!s) die("ttft_begin_ex refused a sequence while filling");
      /* TTFT 20 ms .. 1.3 s, scaled per process and class */
      uint64_t u = t + (20000000 + g_gaps[(uint64_t)(i + p) & GAP_MASK] * 50) * (uint64_t)(8 + (p + k) % 9) / 8;
      int toks = 2 + (i + p) % 60;
      for (int j = 0; j < toks; j++) {
        u += g_gaps[(uint64_t)(i + j + 7 * p) & GAP_MASK] * (uint64_t)(4 + p % 5) / 4;
        check_rc(ttft_token_emitted(r, s, 1, u) != TTFT_OK, "ttft_token_emitted (gather_merge fill)");
      }
      ttft_status st = i % 50 == 7 ? TTFT_CANCELLED : i % 97 == 3 ? TTFT_ERROR : TTFT_COMPLETED;
      check_rc(ttft_stream_end(r, s, st, u + 1000) != TTFT_OK, "ttft_stream_end (gather_merge fill)");
      t += 1000000;
    }
  }
  check_rc(ttft_publish(r) != TTFT_OK, "ttft_publish (gather_merge)");
  return r;
}

/* the payloads (segment minus its 160-byte header) of dir's .seg files */
static int gm_payloads(const char *dir, unsigned char **buf, size_t *len, int max) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "ls '%s' | grep -v archive | grep '\\.seg$'", dir);
  FILE *ls = popen(cmd, "r");
  if (!ls) return 0;
  int n = 0;
  char name[256];
  while (n < max && fgets(name, sizeof name, ls)) {
    name[strcspn(name, "\n")] = '\0';
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    unsigned char *b = xalloc(1 << 22);
    size_t got = fread(b, 1, 1 << 22, f);
    fclose(f);
    if (got <= 160) {
      free(b);
      continue;
    }
    buf[n] = b;
    len[n++] = got;
  }
  pclose(ls);
  return n;
}

typedef struct gm_ctx {
  ttft_gather *g;
  char *out;
  size_t cap;
  long bytes;
} gm_ctx;

static long gm_render(gm_ctx *c, const ttft_snapshot *s) {
  long n = ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS_PROTOBUF, c->out, c->cap);
  if (n < 0) die("protobuf render failed (%ld)", n);
  if ((size_t)n >= c->cap) die("protobuf render: %ld bytes do not fit", n);
  return n;
}

/* a row of CPU ms (this thread's: what a loaded machine's preemption
 * does not inflate) with the wall-clock median beside it */
static row *gm_row(const char *key, const char *name, const double *v, const double *wall, int n,
                   const char *note) {
  row *r = row_add(key, "gather_merge", name, "ms");
  row_set_samples(r, v, n);
  r->wall = median_of(wall, n);
  if (note) snprintf(r->note, sizeof r->note, "%s", note);
  row_print(r);
  return r;
}

static void run_gather_merge(void) {
  section("gather_merge (1.3): 64 processes x 8 classes, decode / merge / protobuf render");
  char dir[256];
  const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(dir, sizeof dir, "%s/ttft-bench-gm-XXXXXX", base);
  if (!mkdtemp(dir)) die("mkdtemp %s: %s", dir, strerror(errno));
  chmod(dir, 0700);
  int streams = opt.quick ? 50 : 500, reps = opt.quick ? 5 : 20;
  ttft_registry *reg[GM_PROCS];
  for (int p = 0; p < GM_PROCS; p++) reg[p] = gm_registry(dir, p, streams);

  unsigned char *pay[GM_PROCS];
  size_t plen[GM_PROCS];
  int np = gm_payloads(dir, pay, plen, GM_PROCS);
  size_t total = 0;
  for (int i = 0; i < np; i++) total += plen[i];
  double v[MAX_REPS], vw[MAX_REPS];
  for (int r = 0; r < reps; r++) {
    uint64_t t0 = mono_ns(), c0 = cpu_ns();
    for (int i = 0; i < np; i++) {
      int err = 0;
      ttft_snapshot *s = ttft_snapshot_decode(pay[i] + 160, plen[i] - 160, &err);
      if (!s) die("decode of a segment failed (%d)", err);
      ttft_snapshot_free(s);
    }
    v[r] = (double)(cpu_ns() - c0) / 1e6;
    vw[r] = (double)(mono_ns() - t0) / 1e6;
  }
  char note[160];
  snprintf(note, sizeof note, "(%d segments, %zu bytes each on average)", np, np ? total / (size_t)np : 0);
  gm_row("gm_decode", "ttft_snapshot_decode of the 64 segments", v, vw, reps, note);
  for (int i = 0; i < np; i++) free(pay[i]);

  gm_ctx c = {0};
  c.cap = 64u << 20;
  c.out = xalloc(c.cap);
  static const struct {
    unsigned flags;
    const char *k_take, *n_take, *k_pb, *n_pb, *k_all, *n_all;
  } views[2] = {
      {0, "gm_take", "ttft_gather_take, merged view", "gm_pb", "protobuf render, merged view",
       "gm_total", "take + protobuf render, merged view"},
      {TTFT_GATHER_BY_PROCESS, "gm_take_proc", "ttft_gather_take, BY_PROCESS (64 names)",
       "gm_pb_proc", "protobuf render, BY_PROCESS (64 names)", "gm_total_proc",
       "take + protobuf render, BY_PROCESS"},
  };
  for (int w = 0; w < 2; w++) {
    ttft_gather *g = ttft_gather_open(dir, views[w].flags);
    if (!g) die("ttft_gather_open %s failed", dir);
    double vt[MAX_REPS], vp[MAX_REPS], va[MAX_REPS], wt[MAX_REPS], wp[MAX_REPS], wa[MAX_REPS];
    long bytes = 0;
    for (int r = 0; r < reps; r++) {
      uint64_t t0 = mono_ns(), c0 = cpu_ns();
      ttft_snapshot *s = ttft_gather_take(g);
      if (!s) die("ttft_gather_take failed: %s", strerror(errno));
      uint64_t t1 = mono_ns(), c1 = cpu_ns();
      bytes = gm_render(&c, s);
      uint64_t t2 = mono_ns(), c2 = cpu_ns();
      ttft_snapshot_free(s);
      vt[r] = (double)(c1 - c0) / 1e6;
      vp[r] = (double)(c2 - c1) / 1e6;
      va[r] = (double)(c2 - c0) / 1e6;
      wt[r] = (double)(t1 - t0) / 1e6;
      wp[r] = (double)(t2 - t1) / 1e6;
      wa[r] = (double)(t2 - t0) / 1e6;
    }
    ttft_gather_close(g);
    gm_row(views[w].k_take, views[w].n_take, vt, wt, reps, NULL);
    snprintf(note, sizeof note, "(%ld bytes)", bytes);
    gm_row(views[w].k_pb, views[w].n_pb, vp, wp, reps, note);
    gm_row(views[w].k_all, views[w].n_all, va, wa, reps, "(target <= 50 ms)");
  }
  free(c.out);
  for (int p = 0; p < GM_PROCS; p++) ttft_registry_free(reg[p]);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "ttft-bench: could not remove %s\n", dir);
}
#endif


/* ========================================================= otlp_push (1.3)
 * The CPU of one OTLP push of a default registry (one class, 2000 streams
 * of varied TTFT, gaps and lengths; SPEC §11: <= 2 ms): take the snapshot,
 * encode it as OTLP protobuf, POST it to a sink on loopback, read the
 * answer. The push runs on the pusher's thread, so what is measured is
 * this process's CPU time (CLOCK_PROCESS_CPUTIME_ID) across
 * ttft_otlp_flush, the flushing thread only waiting; the sink is a forked
 * child (its CPU is not ours) that answers 200 and reports each body's
 * size through a pipe. Median over reps of 20 pushes (5 with --quick),
 * cumulative and delta. */
#if !defined(TTFT_BENCH_IS_BASELINE)
static uint64_t proc_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/* the sink: accept, read the head and Content-Length bytes, answer 200,
 * write the body's size (uint32) to out; until the listener is shut */
static void otlp_sink(int lfd, int out) {
  static char buf[1 << 20];
  for (;;) {
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0) _exit(0);
    size_t n = 0, hl = 0, cl = 0;
    for (;;) {
      ssize_t k = recv(fd, buf + n, sizeof buf - 1 - n, 0);
      if (k <= 0) break;
      n += (size_t)k;
      buf[n] = 0;
      char *e = hl ? NULL : strstr(buf, "\r\n\r\n");
      if (e) {
        char *c = strcasestr(buf, "\r\ncontent-length:");
        hl = (size_t)(e - buf) + 4;
        cl = c ? strtoul(c + 17, NULL, 10) : 0;
      }
      if (hl && n >= hl + cl) break;
      if (n == sizeof buf - 1) n = hl = 0; /* too big for the sink: keep draining */
    }
    static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    if (send(fd, ok, sizeof ok - 1, MSG_NOSIGNAL) < 0) {}
    uint32_t len = (uint32_t)cl;
    if (write(out, &len, sizeof len) < 0) {}
    close(fd);
  }
}

static void run_otlp_push(void) {
  section("OTLP push (1.3): CPU of one push of a default registry to a loopback sink");
  int pfd[2];
  struct sockaddr_in a;
  socklen_t sl = sizeof a;
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 64) < 0 ||
      getsockname(lfd, (struct sockaddr *)&a, &sl) < 0 || pipe(pfd) < 0)
    die("otlp_push: cannot set up the sink");
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) die("otlp_push: fork");
  if (pid == 0) {
    close(pfd[0]);
    otlp_sink(lfd, pfd[1]);
    _exit(0);
  }
  close(pfd[1]);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(a.sin_port));

  ttft_config c;
  ttft_config_init(&c);
  ttft_registry *r = registry_or_die(&c);
  uint64_t t = mono_ns();
  int streams = 2000;
  for (int i = 0; i < streams; i++) {
    ttft_seq s = ttft_begin(r, t);
    if (!s) die("ttft_begin refused a sequence while filling");
    uint64_t u = t + 20000000 + g_gaps[(uint64_t)i & GAP_MASK] * 50;
    int toks = 2 + i % 60;
    for (int j = 0; j < toks; j++) {
      u += g_gaps[(uint64_t)(i + j) & GAP_MASK];
      check_rc(ttft_token_emitted(r, s, 1, u) != TTFT_OK, "ttft_token_emitted (otlp fill)");
    }
    check_rc(ttft_stream_end(r, s, i % 50 ? TTFT_COMPLETED : TTFT_CANCELLED, u + 1000) != TTFT_OK,
             "ttft_stream_end (otlp fill)");
    t += 1000000;
  }

  static const struct { const char *key, *name; int temporality; } modes[2] = {
      {"otlp_push", "OTLP push, cumulative (snapshot + encode + POST)", TTFT_OTLP_CUMULATIVE},
      {"otlp_push_delta", "OTLP push, delta, nothing new (+ snapshot_delta)", TTFT_OTLP_DELTA}};
  uint32_t bytes[2] = {0, 0};
  for (int m = 0; m < 2; m++) {
    ttft_otlp_config oc;
    ttft_otlp_config_init(&oc);
    oc.endpoint = url;
    oc.interval_ms = 3600000; /* only the flushes push */
    oc.temporality = modes[m].temporality;
    char why[256];
    ttft_otlp *o = NULL;
    if (ttft_otlp_start_msg(r, &oc, &o, why, sizeof why) != TTFT_OK) die(why);
    int per = opt.quick ? 5 : 20;
    uint32_t last_len = 0;
    double v[MAX_REPS], w[MAX_REPS];
    check_rc(ttft_otlp_flush(o) != TTFT_OK, "ttft_otlp_flush (warm-up)");
    if (read(pfd[0], &bytes[m], sizeof bytes[m]) != (ssize_t)sizeof bytes[m]) die("otlp_push: sink");
    for (int i = 0; i < opt.reps; i++) {
      uint64_t c0 = proc_cpu_ns(), w0 = mono_ns();
      for (int k = 0; k < per; k++) check_rc(ttft_otlp_flush(o) != TTFT_OK, "ttft_otlp_flush");
      v[i] = (double)(proc_cpu_ns() - c0) / per / 1000.0;
      w[i] = (double)(mono_ns() - w0) / per / 1000.0;
      for (int k = 0; k < per; k++) {
        uint32_t len;
        if (read(pfd[0], &len, sizeof len) != (ssize_t)sizeof len) die("otlp_push: sink");
        last_len = len;
      }
    }
    ttft_otlp_stop(o);
    uint32_t len;
    if (read(pfd[0], &len, sizeof len) != (ssize_t)sizeof len) die("otlp_push: sink");
    row *rw = row_add(modes[m].key, "otlp_push", modes[m].name, "us");
    row_set_samples(rw, v, opt.reps);
    rw->iters = (uint64_t)per;
    rw->wall = median_of(w, opt.reps);
    snprintf(rw->note, sizeof rw->note, "(process CPU per push; body %u bytes, the first %u)", last_len,
             bytes[m]);
    row_print(rw);
  }
  row *rb = row_add("otlp_bytes", "otlp_push", "OTLP body bytes, default registry, cumulative", "bytes");
  double b = bytes[0];
  row_set_samples(rb, &b, 1); /* one exact figure, not a timing */
  row_print(rb);
  shutdown(lfd, SHUT_RDWR);
  close(lfd);
  kill(pid, SIGTERM);
  waitpid(pid, NULL, 0);
  close(pfd[0]);
  ttft_registry_free(r);
}
#endif

/* ================================================================ main */
static void usage(FILE *f) {
  fprintf(f,
          "usage: ttft-bench [--quick] [--json FILE] [--reps N] [--only GROUPS] [--no-membarrier]\n"
          "                  [--rounds N] [--baseline BIN]\n"
          "  --quick       tiny iteration counts (a smoke test; numbers mean little)\n"
          "  --json FILE   write the results there (default bench/results.json when\n"
          "                ./bench exists, else ttft-bench.json)\n"
          "  --reps N      repetitions per row, 5 .. %d (default 7; medians are reported)\n"
          "  --only GROUPS comma-separated subset of: compare,baseline,hot,threads,clock,\n"
          "                peer,step,engine,lifecycle,publish,gather_merge,otlp_render,\n"
          "                otlp_push,\n"
          "                snapshot,growth,memory\n"
          "  --rounds N    compare: rounds of this library and the 1.1 baseline, run\n"
          "                alternately (default 9; --quick: 2)\n"
          "  --baseline BIN  compare: the baseline binary (default: ttft-bench-baseline,\n"
          "                built beside this one from git history)\n"
          "  --no-membarrier  deny membarrier(2) (a seccomp filter) before any\n"
          "                registry exists: every registry runs in fence mode, as\n"
          "                under a sandbox without it (compare the ratios to the\n"
          "                floor with a run without this flag)\n",
          MAX_REPS);
}

static ttft_registry *registry_or_die(const ttft_config *cfg) {
  ttft_registry *r = ttft_registry_new(cfg);
  if (!r) die("ttft_registry_new failed");
  return r;
}

static void section(const char *title) {
  printf("\n%s\n", title);
  fflush(stdout);
}

int main(int argc, char **argv) {
  opt.reps = 7;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) opt.quick = 1;
    else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) opt.json = argv[++i];
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) opt.reps = atoi(argv[++i]);
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) opt.only = argv[++i];
    else if (strcmp(argv[i], "--no-membarrier") == 0) opt.no_membarrier = 1;
    else if (strcmp(argv[i], "--compare-child") == 0) opt.child = 1;
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) opt.rounds = atoi(argv[++i]);
    else if (strcmp(argv[i], "--baseline") == 0 && i + 1 < argc) opt.baseline = argv[++i];
    else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (opt.reps < 5 || opt.reps > MAX_REPS) die("--reps must be 5 .. %d", MAX_REPS);
  if (opt.rounds < 0 || opt.rounds > CMP_ROUNDS_MAX) die("--rounds must be 1 .. %d", CMP_ROUNDS_MAX);
  opt.rep_ms = opt.quick ? 0.5 : 40;
  if (!opt.json) {
    struct stat st;
    opt.json = stat("bench", &st) == 0 && S_ISDIR(st.st_mode) ? "bench/results.json" : "ttft-bench.json";
  }
  if (opt.no_membarrier) {
#ifdef TTFT_HAVE_DENY_MEMBARRIER
    int rc = deny_membarrier();
    if (rc) die("--no-membarrier: the seccomp filter was refused: %s", strerror(-rc));
    if (membarrier_works()) die("--no-membarrier: membarrier(2) still answers");
#else
    die("--no-membarrier: no seccomp filter for this platform (x86_64, aarch64 Linux)");
#endif
  }
  gaps_init();
  if (opt.child) return compare_child();
  uint64_t t_start = mono_ns();
  g_load_start = loadavg();

  char cpu[256];
  cpu_model(cpu, sizeof cpu);
  printf("ttft-bench: libttft %s, %s, %ld online CPUs%s\n", ttft_version_string(), cpu,
         sysconf(_SC_NPROCESSORS_ONLN), opt.quick ? ", QUICK (smoke test: numbers mean little)" : "");
  printf("each row: median of %d repetitions of the per-op CPU time of each thread, [min .. max],\n"
         "the median by wall-clock time, and for several threads 'all threads' = the slowest\n"
         "thread's wall time / all operations (throughput)\n",
         opt.reps);
  printf("load average at start: %.2f (anything else running skews every row)\n", g_load_start);
  if (opt.no_membarrier)
    printf("membarrier(2) denied (--no-membarrier): every registry runs in fence mode, a seq_cst\n"
           "fence in each private-shard hook call\n");

  /* first, while this process holds no registry: the children run alone */
  if (group_on("compare")) run_compare();

  ttft_config cfg;
  ttft_config_init(&cfg);
  ttft_registry *hot_r = registry_or_die(&cfg);
  hot_ctx *hot = hot_new(hot_r, MAX_THREADS, 0);

  /* -------------------------------------------------------- baselines */
  if (group_on("baseline")) {
    section("baselines (the machine's floor)");
    row_print(measure("clock_mono", "baseline", "clock_gettime(CLOCK_MONOTONIC)", loop_clock_mono, NULL, 1, 0));
    row_print(measure("clock_coarse", "baseline", "clock_gettime(CLOCK_MONOTONIC_COARSE)",
                      loop_clock_coarse, NULL, 1, 0));
#if HAVE_RDTSC
    row_print(measure("rdtsc", "baseline", "rdtsc", loop_rdtsc, NULL, 1, 0));
#endif
    row *fl = measure("floor", "baseline", "floor (SPEC): non-atomic bucket increment, call", loop_floor,
                      hot, 1, 0);
    snprintf(fl->note, sizeof fl->note, "(no min/max/total; %d buckets)", FLOOR_COUNTS);
    row_print(fl);
    row *fh = measure("floor_hdr", "baseline", "HDR floor: + total, min, max (hdr_record_value)",
                      loop_floor_hdr, hot, 1, 0);
    snprintf(fh->note, sizeof fh->note, "(not the SPEC's floor; ratios ~1.5x lower)");
    row_print(fh);
    atom_ctx ac;
    _Atomic uint64_t *cells = xalloc(PAD * MAX_THREADS);
    for (int i = 0; i < MAX_THREADS; i++) ac.ctr[i] = cells;
    row_print(measure("atomic_1t", "baseline", "relaxed atomic add, call, 1 thread", loop_atomic, &ac, 1, 0));
    row_print(measure("atomic_2t_same", "baseline", "relaxed atomic add, 2 threads, same line",
                      loop_atomic, &ac, 2, 0));
    for (int i = 0; i < MAX_THREADS; i++) ac.ctr[i] = (_Atomic uint64_t *)((char *)cells + (size_t)i * PAD);
    row_print(measure("atomic_2t_sep", "baseline", "relaxed atomic add, 2 threads, separate lines",
                      loop_atomic, &ac, 2, 0));
    g_sink = atomic_load_explicit(cells, memory_order_relaxed);
    free(cells);
  }

  /* --------------------------------------------------------- hot path */
  if (group_on("hot")) {
    section("ttft_token_emitted, caller timestamp");
    row_print(measure("tok_1t", "hot", "token_emitted, 1 thread, 64 seqs round-robin", loop_tok, hot, 1, 0));
    hot->mask = 0;
    row_print(measure("tok_1t_1seq", "hot", "token_emitted, 1 thread, 1 seq", loop_tok, hot, 1, 0));
    hot->mask = NSEQ - 1;
  }
  if (group_on("threads")) {
    section("threads (one registry; each thread its own sequences unless said)");
    row *r1 = row_find("tok_1t");
    uint64_t n = r1 ? r1->iters : 0;
    row_print(measure("tok_2t", "threads", "token_emitted, 2 threads x 64 seqs", loop_tok, hot, 2, n));
    hot->mask = 0;
    row_print(measure("tok_2t_1seq", "threads", "token_emitted, 2 threads x 1 seq", loop_tok, hot, 2, n));
    hot->mask = NSEQ - 1;
    row_print(measure("tok_s1", "threads", "scaling: 1 thread x 64 seqs", loop_tok, hot, 1, n));
    row_print(measure("tok_s2", "threads", "scaling: 2 threads x 64 seqs", loop_tok, hot, 2, n));
    row_print(measure("tok_s4", "threads", "scaling: 4 threads x 64 seqs (2 cores)", loop_tok, hot, 4, n));
    static const unsigned ks[2] = {64, 1};
    for (int i = 0; i < 4; i++) {
      int base = i % 2 == 0; /* the hand-over alone, with a floor increment */
      unsigned kk = ks[i / 2];
      pingpong *pp = xalloc(sizeof *pp);
      pp->r = hot_r;
      pp->k = kk;
      pp->t = mono_ns();
      if (base) {
        pp->fh = xalloc(sizeof *pp->fh);
        floor_init(pp->fh);
      } else {
        pp->s = ttft_begin(hot_r, pp->t);
        if (!pp->s) die("ttft_begin refused a sequence");
      }
      char key[32], name[80];
      snprintf(key, sizeof key, base ? "pingpong_floor_k%u" : "tok_pingpong_k%u", kk);
      snprintf(name, sizeof name, base ? "baseline: floor increment, handed over every %u"
                                       : "one seq fed by 2 threads, handed over every %u", kk);
      /* fixed counts: a single-thread calibration would wait forever for its partner */
      uint64_t pn = n ? n / 4 : (opt.quick ? 4096 : 2000000);
      if (kk == 1) pn /= 8;
      pn += kk - pn % kk;
      row *r = measure(key, "threads", name, loop_pingpong, pp, 2, pn);
      /* the sequence sees 2n tokens in the wall time: that is its per-token cost */
      for (int j = 0; j < r->reps; j++) r->samples[j] = r->samples[j] / 2;
      row_set_samples(r, r->samples, r->reps);
      r->wall /= 2;
      snprintf(r->note, sizeof r->note, "(per token of the sequence, hand-over included)");
      r->agg = 0;
      row_print(r);
      check_rc(atomic_load_explicit(&pp->bad, memory_order_relaxed) != 0, "ttft_token_emitted (ping-pong)");
      if (!base) check_rc(ttft_stream_end(hot_r, pp->s, TTFT_COMPLETED, pp->t + 1) != TTFT_OK, "ttft_stream_end");
      free(pp->fh);
      free(pp);
    }
  }

  /* ------------------------------------------------------------ clock */
  if (group_on("clock")) {
    section("library clock (t = TTFT_NOW)");
    if (!row_find("clock_mono"))
      row_print(measure("clock_mono", "clock", "clock_gettime(CLOCK_MONOTONIC)", loop_clock_mono, NULL, 1, 0));
    ttft_registry *rm = registry_or_die(&cfg);
    hot_ctx *hm = hot_new(rm, 1, 1);
    row_print(measure("now_mono", "clock", "ttft_registry_now_ns, MONOTONIC registry", loop_lib_now, hm, 1, 0));
    row_print(measure("tok_now_mono", "clock", "token_emitted(TTFT_NOW), MONOTONIC", loop_tok_now, hm, 1, 0));
    hot_free(hm, 1, "ttft_token_emitted (TTFT_NOW, MONOTONIC)");
    ttft_registry_free(rm);
#if HAVE_RDTSC
    if (!row_find("rdtsc")) row_print(measure("rdtsc", "clock", "rdtsc", loop_rdtsc, NULL, 1, 0));
#endif
    ttft_config tc = cfg;
    tc.clock = TTFT_CLOCK_TSC;
    ttft_registry *rt = registry_or_die(&tc);
    hot_ctx *ht = hot_new(rt, 1, 1);
    row_print(measure("now_tsc", "clock", "ttft_registry_now_ns, TSC registry", loop_lib_now, ht, 1, 0));
    row_print(measure("tok_now_tsc", "clock", "token_emitted(TTFT_NOW), TSC", loop_tok_now, ht, 1, 0));
    hot_free(ht, 1, "ttft_token_emitted (TTFT_NOW, TSC)");
    ttft_registry_free(rt);
#ifdef HAVE_RDTSC_ORDERED
    row_print(measure("rdtsc_ordered", "clock", "lfence; rdtsc (the TSC clock's read)", loop_rdtsc_ordered, NULL, 1, 0));
#endif
#if !defined(TTFT_BENCH_IS_BASELINE)
    /* (1.3) the faster of the two, measured once at the first such registry */
    tc.clock = TTFT_CLOCK_FASTEST;
    ttft_registry *rf = registry_or_die(&tc);
    printf("  TTFT_CLOCK_FASTEST chose %s\n",
           ttft_registry_clock(rf) == TTFT_CLOCK_TSC ? "the CPU counter (TSC)" : "CLOCK_MONOTONIC");
    hot_ctx *hf = hot_new(rf, 1, 1);
    row_print(measure("now_fastest", "clock", "ttft_registry_now_ns, FASTEST registry", loop_lib_now, hf, 1, 0));
    row_print(measure("tok_now_fastest", "clock", "token_emitted(TTFT_NOW), FASTEST", loop_tok_now, hf, 1, 0));
    hot_free(hf, 1, "ttft_token_emitted (TTFT_NOW, FASTEST)");
    ttft_registry_free(rf);
#endif
  }

  /* ------------------------------------------------------------- step */
  if (group_on("step")) {
    section("one ttft_step_emitted per decode step (64 sequences), per token");
    if (!row_find("floor"))
      row_print(measure("floor", "baseline", "floor (SPEC): non-atomic bucket increment, call", loop_floor,
                        hot, 1, 0));
    ttft_registry *rs = registry_or_die(&cfg);
    hot_ctx *hs = hot_new(rs, 1, 0);
    for (int k = 1; k < NSEQ; k++) hs->th[0]->t[k] = hs->th[0]->t[0] = hs->th[0]->t[NSEQ - 1];
    row_print(measure("step_ts", "step", "step_emitted, 64 seqs, caller timestamp", loop_step, hs, 1, 0));
    hot_free(hs, 1, "ttft_step_emitted (caller timestamp)");
    ttft_registry_free(rs);
    ttft_registry *rn = registry_or_die(&cfg);
    hot_ctx *hn = hot_new(rn, 1, 1);
    row_print(measure("step_now", "step", "step_emitted, 64 seqs, TTFT_NOW", loop_step_now, hn, 1, 0));
    hot_free(hn, 1, "ttft_step_emitted (TTFT_NOW)");
    ttft_registry_free(rn);
  }

  /* ----------------------------------------------------------- engine */
#if HAVE_ENGINE
  if (group_on("engine")) {
    section("engine steps (1.2): ttft_engine_step, and a decode loop that calls it");
    if (!row_find("floor"))
      row_print(measure("floor", "baseline", "floor: non-atomic log-linear increment, call", loop_floor,
                        hot, 1, 0));
    ttft_registry *re = registry_or_die(&cfg);
    hot_ctx *he = hot_new(re, 1, 0);
    row_print(measure("engine_step_ts", "engine", "engine_step, caller timestamps", loop_engine_step, he, 1, 0));
    row_print(measure("engine_step_now", "engine", "engine_step, t_end = TTFT_NOW", loop_engine_step_now, he,
                      1, 0));
    hot_free(he, 1, "ttft_engine_step");
    ttft_registry_free(re);
    ttft_registry *rs = registry_or_die(&cfg);
    hot_ctx *hs = hot_new(rs, 1, 0);
    for (int k = 1; k < NSEQ; k++) hs->th[0]->t[k] = hs->th[0]->t[0] = hs->th[0]->t[NSEQ - 1];
    row_print(measure("step_engine_ts", "engine", "engine_step + step_emitted, 64 seqs, per token",
                      loop_engine_and_step, hs, 1, 0));
    hot_free(hs, 1, "ttft_engine_step + ttft_step_emitted");
    ttft_registry_free(rs);
    if (!row_find("step_ts")) {
      ttft_registry *rb = registry_or_die(&cfg);
      hot_ctx *hb = hot_new(rb, 1, 0);
      for (int k = 1; k < NSEQ; k++) hb->th[0]->t[k] = hb->th[0]->t[0] = hb->th[0]->t[NSEQ - 1];
      row_print(measure("step_ts", "step", "step_emitted, 64 seqs, caller timestamp", loop_step, hb, 1, 0));
      hot_free(hb, 1, "ttft_step_emitted (caller timestamp)");
      ttft_registry_free(rb);
    }
    ttft_registry *rc = registry_or_die(&cfg);
    hot_ctx *hc = hot_new(rc, 1, 0);
    row *sr = measure("stall_cause", "engine", "30 engine_steps + a stall token (cause found)",
                      loop_stall_cause, hc, 1, opt.quick ? 64 : 20000);
    snprintf(sr->note, sizeof sr->note, "(per stall; minus 30 x engine_step_ts = the stall path)");
    row_print(sr);
    hot_free(hc, 1, "ttft_token_emitted (stall)");
    ttft_registry_free(rc);
    /* the stall path when no step before the gap lacks prefill (issue
     * 27.6), against the common token_emitted of the same run */
    if (!row_find("tok_1t"))
      row_print(measure("tok_1t", "hot", "token_emitted, 1 thread, 64 seqs round-robin", loop_tok, hot, 1, 0));
    ttft_registry *rp = registry_or_die(&cfg);
    stall_ctx *sp = stall_new(rp);
    row *pr = measure("stall_prefill", "engine", "stall path, all steps prefill, per stalled token",
                      loop_stall_prefill, sp, 1, (uint64_t)STALL_BATCH * (opt.quick ? 16 : 512));
    const row *tk = row_find("tok_1t");
    if (tk && tk->med > 0)
      snprintf(pr->note, sizeof pr->note, "(%d seqs stalled by one prefill step; %.1fx token_emitted)",
               STALL_BATCH, pr->med / tk->med);
    row_print(pr);
    stall_free(sp);
    ttft_registry_free(rp);
  }
#else
  if (group_on("engine"))
    printf("\nengine steps: ttft_engine_step is not in libttft %s\n", ttft_version_string());
#endif

  /* ------------------------------------------------------------- peer */
  if (group_on("peer")) {
    section("peer");
#if HAVE_PEER
    peer_ctx pc = {peer_hist_new()};
    if (!pc.h) die("could not create the peer histogram");
    row *p1 = measure("peer_1t", "peer", "prometheus-cpp Histogram::Observe, 1 thread", loop_peer, &pc, 1, 0);
    row_print(p1);
    row_print(measure("peer_2t", "peer", "prometheus-cpp Histogram::Observe, 2 threads", loop_peer, &pc, 2,
                      p1->iters / 4));
    if (peer_hist_count(pc.h) == 0) die("the peer recorded nothing");
    peer_hist_free(pc.h);
#else
    printf("  prometheus-cpp not found at build time (install prometheus-cpp-dev and reconfigure):\n"
           "  the peer rows and their ratios are left out of this run\n");
#endif
  }

  /* -------------------------------------------------------- lifecycle */
  if (group_on("lifecycle")) {
    section("sequence lifecycle");
    ttft_registry *rl = registry_or_die(&cfg);
    life_ctx *lc = xalloc(sizeof *lc);
    lc->r = rl;
    for (int i = 0; i < MAX_THREADS; i++) lc->t[i][0] = mono_ns();
    row *l1 = measure("life_1t", "lifecycle", "ttft_begin + ttft_stream_end, 1 thread", loop_life, lc, 1, 0);
    uint64_t d1 = atomic_exchange_explicit(&lc->dropped, 0, memory_order_relaxed);
    if (d1) snprintf(l1->note, sizeof l1->note, "(%llu begins refused: no free slot)", (unsigned long long)d1);
    row_print(l1);
    row *l2 = measure("life_2t", "lifecycle", "ttft_begin + ttft_stream_end, 2 threads", loop_life, lc, 2,
                      l1->iters);
    uint64_t d2 = atomic_exchange_explicit(&lc->dropped, 0, memory_order_relaxed);
    if (d2) snprintf(l2->note, sizeof l2->note, "(%llu begins refused: no free slot)", (unsigned long long)d2);
    row_print(l2);
    /* whole streams: what the slowest lists (issue 19) add to stream_end,
     * in the usual case and when every end enters them; and begin_ex with
     * a request id and a trace id */
    static const struct {
      const char *key, *name;
      int ids, growing;
    } lt[] = {
        {"life_tok", "begin + 2 tokens + stream_end, 1 thread", 0, 0},
        {"life_tok_grow", "begin + 2 tokens + stream_end, every end enters the slowest lists", 0, 1},
        {"life_tok_ids", "begin_ex (request id, trace id) + 2 tokens + stream_end", 1, 0},
    };
    for (size_t i = 0; i < sizeof lt / sizeof lt[0]; i++) {
      lc->ids = lt[i].ids;
      lc->growing = lt[i].growing;
      row *lr = measure(lt[i].key, "lifecycle", lt[i].name, loop_life_tokens, lc, 1, 0);
      row_print(lr);
    }
    check_rc(atomic_load_explicit(&lc->bad, memory_order_relaxed) != 0, "ttft_stream_end (lifecycle)");
    free(lc);
    ttft_registry_free(rl);
  }

  /* ---------------------------------------------------------- publish */
#if !defined(TTFT_BENCH_IS_BASELINE)
  if (group_on("publish")) run_publish(&cfg);
#endif
#if !defined(TTFT_BENCH_IS_BASELINE)
  if (group_on("gather_merge")) run_gather_merge();
  if (group_on("otlp_render")) run_otlp_render();
  if (group_on("otlp_push")) run_otlp_push();
#endif

  /* --------------------------------------------------------- snapshot */
  if (group_on("snapshot")) {
    section("reads (default registry, the data of the rows above plus 10^6 events)");
    filler *f = filler_new();
    uint64_t refused = fill(hot_r, f, opt.quick ? 10000 : 1000000);
    if (refused) printf("  (%llu begins refused while filling: no free slot)\n", (unsigned long long)refused);
    snap_ctx sc = {hot_r, NULL, 0};
    row *rs = measure("snapshot", "snapshot", "ttft_snapshot_take + free, default registry", loop_snapshot,
                      &sc, 1, opt.quick ? 2 : 0);
    rs->unit = "ms";
    for (int i = 0; i < rs->reps; i++) rs->samples[i] /= 1e6;
    row_set_samples(rs, rs->samples, rs->reps);
    rs->wall /= 1e6;
    row_print(rs);
    check_rc(sc.bad, "ttft_snapshot_take");
    sc.s = ttft_snapshot_take(hot_r);
    if (!sc.s) die("ttft_snapshot_take failed");
    row *rq = measure("quantile", "snapshot", "ttft_snapshot_quantile (ITL), one query", loop_quantile, &sc,
                      1, 0);
    rq->unit = "us";
    for (int i = 0; i < rq->reps; i++) rq->samples[i] /= 1e3;
    row_set_samples(rq, rq->samples, rq->reps);
    rq->wall /= 1e3;
    snprintf(rq->note, sizeof rq->note, "(%llu ITL observations)",
             (unsigned long long)ttft_snapshot_count(sc.s, TTFT_METRIC_ITL));
    row_print(rq);
    ttft_snapshot_free(sc.s);
    filler_end(hot_r, f);
    free(f);
  }

  /* ----------------------------------------------------------- growth */
  long rss_1e6 = -1, rss_end = -1, heap_1e6 = -1, heap_end = -1;
  if (group_on("growth") || group_on("memory")) {
    static const uint32_t sizes[5] = {256, 1024, 4096, 16384, 65536};
    size_t mem[5] = {0};
    int do_growth = group_on("growth");
    if (do_growth) section("cost growth against max_inflight (half the slots in flight, 10^5 events)");
    for (int i = 0; i < 5; i++) {
      ttft_config c2 = cfg;
      c2.max_inflight = sizes[i];
      ttft_registry *r = registry_or_die(&c2);
      mem[i] = ttft_registry_memory(r);
      if (do_growth) {
        filler *f = filler_new();
        uint64_t refused = fill(r, f, opt.quick ? 10000 : 100000);
        uint32_t live = sizes[i] / 2 > NSEQ ? sizes[i] / 2 - NSEQ : 0;
        ttft_seq *held = xalloc(sizeof *held * (live ? live : 1));
        for (uint32_t j = 0; j < live; j++) held[j] = ttft_begin(r, TTFT_NOW);
        char key[32], label[48];
        snprintf(key, sizeof key, "inflight_%u", sizes[i]);
        snprintf(label, sizeof label, "max_inflight %u", sizes[i]);
        if (refused) printf("  (%llu begins refused while filling: no free slot)\n", (unsigned long long)refused);
        measure_reads(r, key, label);
        for (uint32_t j = 0; j < live; j++)
          if (held[j]) ttft_stream_end(r, held[j], TTFT_CANCELLED, TTFT_NOW);
        filler_end(r, f);
        free(held);
        free(f);
      }
      ttft_registry_free(r);
    }
    if (group_on("memory")) {
      section("memory");
      row *m = row_add("mem_default", "memory", "ttft_registry_memory, default registry", "KiB");
      double v = (double)mem[2] / 1024;
      row_set_samples(m, &v, 1);
      row_print(m);
      m = row_add("mem_slot", "memory", "per in-flight slot (65536 vs 256 slots)", "bytes");
      v = (double)(mem[4] - mem[0]) / (double)(sizes[4] - sizes[0]);
      row_set_samples(m, &v, 1);
      row_print(m);
      for (int i = 0; i < 5; i++) {
        char key[32], name[80];
        snprintf(key, sizeof key, "mem_inflight_%u", sizes[i]);
        snprintf(name, sizeof name, "ttft_registry_memory, max_inflight %u", sizes[i]);
        m = row_add(key, "memory", name, "KiB");
        v = (double)mem[i] / 1024;
        row_set_samples(m, &v, 1);
        row_print(m);
      }
    }
    if (do_growth) {
      uint64_t top = opt.quick ? 100000 : 100000000;
      section(opt.quick ? "cost growth against events recorded (default registry; quick: up to 10^5)"
                        : "cost growth against events recorded (default registry)");
      ttft_registry *r = registry_or_die(&cfg);
      filler *f = filler_new();
      uint64_t done = 0, refused = 0;
      long rss0 = rss_bytes();
      for (uint64_t level = 10000; level <= top; level *= 10) {
        uint64_t t0 = mono_ns();
        refused += fill(r, f, level - done);
        double fill_ns = (double)(mono_ns() - t0) / (double)(level - done);
        done = level;
        char key[24], label[48];
        snprintf(key, sizeof key, "events_%llu", (unsigned long long)level);
        snprintf(label, sizeof label, "after 10^%d events", (int)lround(log10((double)level)));
        measure_reads(r, key, label); /* first: the allocator's own caching settles */
        long rss = rss_bytes(), heap = heap_bytes();
        if (level == (opt.quick ? 10000 : 1000000)) {
          rss_1e6 = rss;
          heap_1e6 = heap;
        }
        rss_end = rss;
        heap_end = heap;
        printf("  -- %s: RSS %.1f MiB (+%.1f MiB since creation), fill %.1f ns/event", label,
               rss / 1048576.0, (rss - rss0) / 1048576.0, fill_ns);
        if (refused) printf(", %llu begins refused so far", (unsigned long long)refused);
        printf("\n");
      }
      row *m = row_add("rss_growth", "growth",
                       opt.quick ? "RSS growth, 10^4 -> 10^5 events" : "RSS growth, 10^6 -> 10^8 events",
                       "KiB");
      double v = (double)(rss_end - rss_1e6) / 1024;
      row_set_samples(m, &v, 1);
      snprintf(m->note, sizeof m->note, "(/proc/self/statm: first touches of preallocated pages count)");
      row_print(m);
      m = row_add("heap_growth", "growth",
                  opt.quick ? "malloc'd bytes growth, 10^4 -> 10^5 events"
                            : "malloc'd bytes growth, 10^6 -> 10^8 events",
                  "bytes");
      v = heap_1e6 < 0 ? NAN : (double)(heap_end - heap_1e6);
      row_set_samples(m, &v, 1);
      snprintf(m->note, sizeof m->note, "(glibc mallinfo2: what the process has allocated)");
      row_print(m);
      filler_end(r, f);
      free(f);
      ttft_registry_free(r);
    }
  }

  hot_free(hot, MAX_THREADS, "ttft_token_emitted");
  ttft_registry_free(hot_r);

  /* ---------------------------------------------------------- targets */
  target_add("token_emitted 1 thread / floor", "tok_1t", "floor", 2.0, NULL);
  target_add("token_emitted 2 threads / 1 thread (per op)", "tok_2t", "tok_1t", 1.3, NULL);
  target_add("token_emitted(TTFT_NOW) MONOTONIC / clock_gettime", "tok_now_mono", "clock_mono", 1.2, NULL);
  target_add("token_emitted(TTFT_NOW) TSC / rdtsc", "tok_now_tsc", "rdtsc", 1.2, NULL);
#if !defined(TTFT_BENCH_IS_BASELINE)
  target_add("library clock, FASTEST / clock_gettime", "now_fastest", "clock_mono", 1.0, NULL);
#endif
  target_add("step_emitted, 64 seqs, TTFT_NOW, per token / floor", "step_now", "floor", 3.0, NULL);
  target_add("ttft_engine_step (caller timestamps)", "engine_step_ts", NULL, 50, "ns");
  target_add("engine_step + step_emitted / step_emitted, per token", "step_engine_ts", "step_ts", 1.10, NULL);
  target_add("stall path, all steps prefill, per stalled token", "stall_prefill", NULL, 300, "ns");
  target_add("token_emitted / prometheus-cpp Observe, 1 thread", "tok_1t", "peer_1t", 0.5, NULL);
  target_add("token_emitted / prometheus-cpp Observe, 2 threads", "tok_2t", "peer_2t", 0.1, NULL);
  target_add("ttft_begin + ttft_stream_end, 1 thread", "life_1t", NULL, 150, "ns");
  target_add("ttft_begin + ttft_stream_end, 2 threads", "life_2t", NULL, 150, "ns");
  target_add("snapshot of a default registry", "snapshot", NULL, 2.0, "ms");
  target_add("OTLP push of a default registry, CPU (1.3)", "otlp_push", NULL, 2000, "us");
  target_add("token_emitted, shared_dir set / not (1.3)", "pub_tok_on", "pub_tok_off", 1.05, "x");
  target_add("begin + stream_end, shared_dir set / not (1.3)", "pub_life_on", "pub_life_off", 1.05, "x");
  target_add("one quantile query", "quantile", NULL, 5.0, "us");
  target_add("memory of a default registry", "mem_default", NULL, 16384, "KiB");
  target_add("memory per in-flight slot", "mem_slot", NULL, 2048, "bytes");
  target_add(opt.quick ? "allocation growth 10^4 -> 10^5 events" : "allocation growth 10^6 -> 10^8 events",
             "heap_growth", NULL, 0, "bytes");
  target_add(opt.quick ? "RSS growth 10^4 -> 10^5 events" : "RSS growth 10^6 -> 10^8 events", "rss_growth",
             NULL, 0, "KiB");

  printf("\ntargets (SPEC section 5)%s\n", opt.quick ? " -- QUICK run: not a measurement" : "");
  printf("  %-52s %12s  %12s\n", "", "measured", "target");
  int met = 0;
  for (int i = 0; i < g_ntargets; i++) {
    const target *t = &g_targets[i];
    char a[32], b[32];
    if (strcmp(t->unit, "x") == 0) {
      snprintf(a, sizeof a, "%.2fx", t->value);
      snprintf(b, sizeof b, "<= %.2fx", t->limit);
    } else {
      snprintf(a, sizeof a, "%.2f %s", t->value, t->unit);
      snprintf(b, sizeof b, "<= %g %s", t->limit, t->unit);
    }
    printf("  %-52s %12s  %12s  %s\n", t->name, a, b, t->met ? "met" : "MISSED");
    met += t->met;
  }
  if (!HAVE_PEER && group_on("peer")) printf("  (peer ratios left out: prometheus-cpp not found)\n");
  /* the same two against the HDR floor (bucket + total + min + max), for
   * comparison with earlier reports; not SPEC targets */
  if (row_find("floor_hdr")) {
    const row *a = row_find("tok_1t"), *b = row_find("step_now"), *h = row_find("floor_hdr");
    if (a && h && h->med > 0) printf("  (token_emitted 1 thread / HDR floor: %.2fx)\n", a->med / h->med);
    if (b && h && h->med > 0) printf("  (step_emitted 64 seqs TTFT_NOW per token / HDR floor: %.2fx)\n", b->med / h->med);
  }
  double total_s = (double)(mono_ns() - t_start) / 1e9;
  g_load_end = loadavg();
  printf("%d of %d targets met; %.1f s; load average %.2f at start, %.2f at the end\n", met, g_ntargets,
         total_s, g_load_start, g_load_end);

  if (write_json(opt.json, total_s) != 0) {
    fprintf(stderr, "ttft-bench: cannot write %s: %s\n", opt.json, strerror(errno));
    return 2;
  }
  printf("results written to %s\n", opt.json);
  return call_errors ? 1 : 0;
}
