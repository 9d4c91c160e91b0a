/* clock.c — the library's clocks: CLOCK_MONOTONIC, and an invariant TSC
 * calibrated onto CLOCK_MONOTONIC's epoch and rate so that caller-supplied
 * timestamps (time.monotonic_ns(), steady_clock) and TTFT_NOW mix. */
#include <stdatomic.h>
#include <time.h>

#include "record/registry.h"

uint64_t ttft_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define TTFT_HAVE_TSC 1
#endif

#ifdef TTFT_HAVE_TSC
/* The TSC -> ns mapping: ns = base_ns + ((tsc - base_tsc) * mult) >> 32.
 * Published under a sequence lock so that readers on the hot path never
 * block and never see a torn triple. */
static struct {
  _Atomic uint32_t seq;      /* odd while a writer updates the triple    */
  _Atomic uint64_t base_tsc, base_ns, mult;
  _Atomic int state;         /* 0 new, 1 calibrating, 2 ready, 3 unusable */
  _Atomic int refining;      /* try-lock for refinements                 */
  uint64_t first_tsc, first_ns, last_refine_ns;
} g_tsc;

static int cpu_has_invariant_tsc(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return 0;
  __cpuid(0x80000007u, a, b, c, d);
  return (d >> 8) & 1u;
}

/* A (tsc, ns) pair read as close together as we can: the tsc is the
 * midpoint of the two reads that bracket the clock_gettime with the
 * narrowest bracket out of a few tries. */
static void tsc_pair(uint64_t *tsc, uint64_t *ns) {
  uint64_t best = UINT64_MAX;
  *tsc = 0;
  *ns = 0;
  for (int i = 0; i < 5; i++) {
    uint64_t t0 = __rdtsc();
    uint64_t n = ttft_now_ns();
    uint64_t t1 = __rdtsc();
    if (t1 - t0 < best) {
      best = t1 - t0;
      *tsc = t0 + (t1 - t0) / 2;
      *ns = n;
    }
  }
}

static void tsc_publish(uint64_t base_tsc, uint64_t base_ns, uint64_t mult) {
  uint32_t s = TTFT__LD(&g_tsc.seq);
  TTFT__ST(&g_tsc.seq, s + 1);
  /* release stores: the odd sequence is visible before each new value */
  atomic_store_explicit(&g_tsc.base_tsc, base_tsc, memory_order_release);
  atomic_store_explicit(&g_tsc.base_ns, base_ns, memory_order_release);
  atomic_store_explicit(&g_tsc.mult, mult, memory_order_release);
  /* release: the triple is visible before the even sequence that blesses it */
  atomic_store_explicit(&g_tsc.seq, s + 2, memory_order_release);
}

static uint64_t tsc_mult(uint64_t dtsc, uint64_t dns) {
  return (uint64_t)(((unsigned __int128)dns << 32) / dtsc);
}

static void tsc_calibrate(void) {
  int expect = 0;
  /* acq_rel: one thread calibrates; the others wait for state 2/3 below */
  if (!atomic_compare_exchange_strong_explicit(&g_tsc.state, &expect, 1, memory_order_acq_rel,
                                               memory_order_acquire)) {
    while (atomic_load_explicit(&g_tsc.state, memory_order_acquire) == 1) {
    }
    return;
  }
  if (!cpu_has_invariant_tsc()) {
    /* release: publishes "unusable" */
    atomic_store_explicit(&g_tsc.state, 3, memory_order_release);
    return;
  }
  uint64_t t0, n0, t1, n1;
  tsc_pair(&t0, &n0);
  struct timespec d = {0, 20 * 1000 * 1000};
  nanosleep(&d, NULL);
  tsc_pair(&t1, &n1);
  if (t1 <= t0 || n1 <= n0) {
    atomic_store_explicit(&g_tsc.state, 3, memory_order_release); /* publishes "unusable" */
    return;
  }
  g_tsc.first_tsc = t0;
  g_tsc.first_ns = n0;
  g_tsc.last_refine_ns = n1;
  tsc_publish(t1, n1, tsc_mult(t1 - t0, n1 - n0));
  /* release: the triple and first_* are visible to whoever sees "ready" */
  atomic_store_explicit(&g_tsc.state, 2, memory_order_release);
}

/* Re-anchor on CLOCK_MONOTONIC and refine the rate over everything since
 * the first calibration: the rate error shrinks as 1/elapsed, and NTP
 * slewing of CLOCK_MONOTONIC is followed. Called from slow paths only. */
static void tsc_refine(void) {
  if (atomic_load_explicit(&g_tsc.state, memory_order_acquire) != 2) return;
  int expect = 0;
  /* acquire: serialises refiners and orders after the previous one's writes */
  if (!atomic_compare_exchange_strong_explicit(&g_tsc.refining, &expect, 1, memory_order_acquire,
                                               memory_order_relaxed))
    return;
  uint64_t t, n;
  tsc_pair(&t, &n);
  if (n - g_tsc.last_refine_ns >= UINT64_C(1000000000) && t > g_tsc.first_tsc) {
    g_tsc.last_refine_ns = n;
    tsc_publish(t, n, tsc_mult(t - g_tsc.first_tsc, n - g_tsc.first_ns));
  }
  /* release: hands the refine state to the next refiner */
  atomic_store_explicit(&g_tsc.refining, 0, memory_order_release);
}

static uint64_t tsc_now(void) {
  for (;;) {
    /* acquire: the triple read below is not older than this sequence */
    uint32_t s = atomic_load_explicit(&g_tsc.seq, memory_order_acquire);
    /* acquire loads: the re-check of seq below cannot move before them, and
     * a value stored after an odd seq brings that odd seq with it */
    uint64_t bt = atomic_load_explicit(&g_tsc.base_tsc, memory_order_acquire);
    uint64_t bn = atomic_load_explicit(&g_tsc.base_ns, memory_order_acquire);
    uint64_t m = atomic_load_explicit(&g_tsc.mult, memory_order_acquire);
    if (TTFT_LIKELY(!(s & 1u) && TTFT__LD(&g_tsc.seq) == s)) {
      uint64_t t = __rdtsc();
      if (TTFT_UNLIKELY(t < bt)) return bn; /* read just before a re-anchor */
      return bn + (uint64_t)(((unsigned __int128)(t - bt) * m) >> 32);
    }
  }
}
#endif /* TTFT_HAVE_TSC */

int ttft__tsc_usable(void) {
#ifdef TTFT_HAVE_TSC
  int st = atomic_load_explicit(&g_tsc.state, memory_order_acquire); /* pairs with calibrate */
  if (st == 0 || st == 1) {
    tsc_calibrate();
    st = atomic_load_explicit(&g_tsc.state, memory_order_acquire);
  } else {
    tsc_refine();
  }
  return st == 2;
#else
  return 0;
#endif
}

/* In a fork child, another thread of the parent may have been inside
 * tsc_publish (sequence left odd: every TSC read would spin), refining
 * (try-lock left held) or calibrating (state left 1: every registry_new
 * asking for the TSC would spin). Only the forking thread exists: repair
 * each from the values, which are always individually sane. */
void ttft__clock_fork_child(void) {
#ifdef TTFT_HAVE_TSC
  TTFT__ST(&g_tsc.refining, 0);
  int st = TTFT__LD(&g_tsc.state);
  if (st == 1) {
    TTFT__ST(&g_tsc.state, 0); /* calibration never finished: start over */
    return;
  }
  uint32_t s = TTFT__LD(&g_tsc.seq);
  if (st == 2 && (s & 1u)) {
    /* a half-written triple: re-anchor it on a fresh pair, with the rate
     * (one word, old or new, either is a calibrated rate) */
    uint64_t t, n;
    tsc_pair(&t, &n);
    TTFT__ST(&g_tsc.base_tsc, t);
    TTFT__ST(&g_tsc.base_ns, n);
    TTFT__ST(&g_tsc.seq, s + 1);
  }
#endif
}

uint64_t ttft__clock_read(ttft_clock c) {
#ifdef TTFT_HAVE_TSC
  if (c == TTFT_CLOCK_TSC) return tsc_now();
#else
  (void)c;
#endif
  return ttft_now_ns();
}

uint64_t ttft_registry_now_ns(const ttft_registry *r) {
  return r ? ttft__now(r) : ttft_now_ns();
}
