/* clock.c — the library's clocks: CLOCK_MONOTONIC, and the CPU's own
 * counter (x86's invariant TSC, aarch64's generic timer CNTVCT_EL0)
 * calibrated onto CLOCK_MONOTONIC's epoch and rate so that caller-supplied
 * timestamps (time.monotonic_ns(), steady_clock) and TTFT_NOW mix.
 *
 * One protocol for every counter: only counter_read and counter_present
 * are per architecture; the sequence lock, the calibration, the refinement
 * and its never-backwards rule, and the start-up race between the counter
 * and clock_gettime (TTFT_CLOCK_FASTEST) are shared.
 *
 * Monotonicity. Per thread and across threads (a thread that saw another's
 * reading, through any acquire/release or stronger edge, then reads the
 * clock gets no less):
 *   - the counter is read after the loads before it (lfence / isb): a
 *     counter read is not executed ahead of the load that saw the other
 *     thread's reading, nor ahead of the sequence and triple loads;
 *   - the counter is read inside the sequence window, as the kernel's vDSO
 *     does: a reader that validates a triple read its counter before the
 *     writer of the next triple made the sequence odd, and that writer
 *     reads its anchor after (a full fence between): every value of the old
 *     triple is <= old(anchor);
 *   - a new triple starts at max(old(anchor), CLOCK_MONOTONIC(anchor)): a
 *     clock ahead of CLOCK_MONOTONIC is never stepped back, it is slowed
 *     (at most to half rate) so as to meet CLOCK_MONOTONIC one second
 *     later; a clock behind steps forward;
 *   - a counter value below the anchor (read by a thread that loaded the
 *     new triple early) maps to the anchor's ns, not below.
 * Left: the sequence re-check is a load that the CPU may perform a few
 * cycles before the counter read completes; the two triples differ there
 * by (cycles x rate correction), below one ns at the slew's 1e-6-ish
 * corrections. */
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
#define TTFT_HAVE_COUNTER 1

/* lfence first: rdtsc alone may execute ahead of earlier loads, so that a
 * thread that loaded another's reading (or a fresh sequence) could still
 * read an earlier counter; the kernel's rdtsc_ordered does the same. The
 * "memory" clobber keeps the compiler from moving loads across it. */
static inline uint64_t counter_read(void) {
  uint32_t lo, hi;
  __asm__ __volatile__("lfence\n\trdtsc" : "=a"(lo), "=d"(hi) : : "memory");
  return ((uint64_t)hi << 32) | lo;
}

/* An invariant TSC (CPUID 8000_0007h EDX bit 8) ticks at one rate in every
 * P-, C- and T-state; the nominal rate is not given: *hz = 0 */
static int counter_present(uint64_t *hz) {
  unsigned a, b, c, d;
  *hz = 0;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return 0;
  __cpuid(0x80000007u, a, b, c, d);
  return (d >> 8) & 1u;
}

#elif defined(__aarch64__) && defined(__linux__)
#define TTFT_HAVE_COUNTER 1

/* The virtual count. isb first: without it the read may be performed
 * ahead of earlier instructions (ARM ARM, "reads of the counter are not
 * ordered"); the arm64 vDSO reads it the same way. Linux sets
 * CNTKCTL_EL1.EL0VCTEN, so EL0 may read it (a kernel working around a
 * counter erratum traps and emulates the read: slow, and then
 * TTFT_CLOCK_FASTEST keeps clock_gettime). */
static inline uint64_t counter_read(void) {
  uint64_t v;
  __asm__ __volatile__("isb\n\tmrs %0, cntvct_el0" : "=r"(v) : : "memory");
  return v;
}

/* CNTFRQ_EL0: the frequency firmware programmed (readable at EL0 whenever
 * the counter is); 0 = not set, not usable. The calibration below must
 * agree with it within 1%. */
static int counter_present(uint64_t *hz) {
  uint64_t f;
  __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(f));
  *hz = f;
  return f != 0;
}
#endif

#ifdef TTFT_HAVE_COUNTER
/* The counter -> ns mapping: ns = base_ns + ((ctr - base_ctr) * mult) >> 32.
 * Published under a sequence lock so that readers on the hot path never
 * block and never see a torn triple. One writer at a time: the calibrating
 * thread (state 1), then the holder of `refining`. */
static struct {
  _Atomic uint32_t seq;      /* odd while a writer updates the triple    */
  _Atomic uint64_t base_ctr, base_ns, mult;
  _Atomic int state;         /* 0 new, 1 calibrating, 2 ready, 3 unusable */
  _Atomic int refining;      /* try-lock for refinements                 */
  _Atomic int fastest;       /* 0 unmeasured, else 1 + the faster ttft_clock */
  uint64_t first_ctr, first_ns, last_refine_ns;
} g_ctr;

/* ns per counter tick times 2^32: ns = (ticks * mult) >> 32 */
static inline uint64_t ticks_ns(uint64_t ticks, uint64_t mult) {
  return (uint64_t)(((unsigned __int128)ticks * mult) >> 32);
}

/* A (counter, ns) pair read as close together as we can: the counter is
 * the midpoint of the two reads that bracket the clock_gettime with the
 * narrowest bracket out of a few tries. */
static void counter_pair(uint64_t *ctr, uint64_t *ns) {
  uint64_t best = UINT64_MAX;
  *ctr = 0;
  *ns = 0;
  for (int i = 0; i < 5; i++) {
    uint64_t t0 = counter_read();
    uint64_t n = ttft_now_ns();
    uint64_t t1 = counter_read();
    if (t1 - t0 < best) {
      best = t1 - t0;
      *ctr = t0 + (t1 - t0) / 2;
      *ns = n;
    }
  }
}

/* The writer's half of the sequence lock; the caller is the one writer.
 * Bracketed by the sequence's odd store, then a release fence, and the
 * even store with release. On a weakly ordered machine (ARMv8: the fence
 * is dmb ish, the even store stlr): a reader that loads any new word then
 * runs its acquire fence (counter_now), which synchronises with this
 * release fence, so its sequence re-check reads s + 1 or later and it
 * retries; a reader whose acquire load of seq returns s + 2 sees every
 * word of the new triple. */
static void seq_open(uint32_t *s) {
  *s = TTFT__LD(&g_ctr.seq);
  TTFT__ST(&g_ctr.seq, *s + 1);
  /* release fence: the odd sequence above is ordered before the triple's
   * stores that follow (see above) */
  atomic_thread_fence(memory_order_release);
}
static void seq_close(uint32_t s, uint64_t base_ctr, uint64_t base_ns, uint64_t mult) {
  TTFT__ST(&g_ctr.base_ctr, base_ctr);
  TTFT__ST(&g_ctr.base_ns, base_ns);
  TTFT__ST(&g_ctr.mult, mult);
  /* release: the triple's stores above before the even sequence that
   * blesses it (pairs with the acquire load of seq in counter_now) */
  atomic_store_explicit(&g_ctr.seq, s + 2, memory_order_release);
}

static uint64_t rate_mult(uint64_t dctr, uint64_t dns) {
  return (uint64_t)(((unsigned __int128)dns << 32) / dctr);
}

static void counter_calibrate(void) {
  int expect = 0;
  /* acq_rel: one thread calibrates (its CAS takes state 0 -> 1); a loser's
   * acquire orders its later reads after what an earlier winner published */
  if (!atomic_compare_exchange_strong_explicit(&g_ctr.state, &expect, 1, memory_order_acq_rel,
                                               memory_order_acquire)) {
    /* acquire: once it reads 2, the triple and first_* written before the
     * release store of 2 are visible to this thread */
    while (atomic_load_explicit(&g_ctr.state, memory_order_acquire) == 1) {
    }
    return;
  }
  uint64_t hz;
  if (!counter_present(&hz)) {
    /* release: publishes "unusable" (no data goes with it) */
    atomic_store_explicit(&g_ctr.state, 3, memory_order_release);
    return;
  }
  uint64_t t0, n0, t1, n1;
  counter_pair(&t0, &n0);
  struct timespec d = {0, 20 * 1000 * 1000};
  nanosleep(&d, NULL);
  counter_pair(&t1, &n1);
  /* it must tick, and where the hardware states its rate the rate measured
   * against CLOCK_MONOTONIC must agree within 1% (a wrong CNTFRQ_EL0, a
   * counter stopped or emulated at another rate: clock_gettime instead) */
  int ok = t1 > t0 && n1 > n0;
  if (ok && hz) {
    double measured = (double)(t1 - t0) * 1e9 / (double)(n1 - n0);
    ok = measured > 0.99 * (double)hz && measured < 1.01 * (double)hz;
  }
  if (!ok) {
    atomic_store_explicit(&g_ctr.state, 3, memory_order_release); /* publishes "unusable" */
    return;
  }
  g_ctr.first_ctr = t0;
  g_ctr.first_ns = n0;
  g_ctr.last_refine_ns = n1;
  uint32_t s;
  seq_open(&s);
  seq_close(s, t1, n1, rate_mult(t1 - t0, n1 - n0));
  /* release: the triple and first_* are visible to whoever sees "ready" */
  atomic_store_explicit(&g_ctr.state, 2, memory_order_release);
}

/* Re-anchor on CLOCK_MONOTONIC and refine the rate over everything since
 * the first calibration: the rate error shrinks as 1/elapsed, and NTP
 * slewing of CLOCK_MONOTONIC is followed. Never backwards (the header
 * comment): the new triple starts where the old one is at the anchor, or
 * ahead of it. Called from slow paths only, at most once a second unless
 * `force` (the litmus test's recalibration storm). */
static void counter_refine(int force) {
  /* acquire: pairs with calibrate's release of 2 (first_* below) */
  if (atomic_load_explicit(&g_ctr.state, memory_order_acquire) != 2) return;
  int expect = 0;
  /* acquire: serialises refiners; this one's reads of first_* and
   * last_refine_ns are after the previous refiner's release below */
  if (!atomic_compare_exchange_strong_explicit(&g_ctr.refining, &expect, 1, memory_order_acquire,
                                               memory_order_relaxed))
    return;
  uint64_t t, n;
  counter_pair(&t, &n);
  if ((force || n - g_ctr.last_refine_ns >= UINT64_C(1000000000)) && t > g_ctr.first_ctr) {
    g_ctr.last_refine_ns = n;
    uint64_t m = rate_mult(t - g_ctr.first_ctr, n - g_ctr.first_ns);
    uint32_t s;
    seq_open(&s);
    /* seq_cst fence: the odd sequence is visible to every reader before
     * the anchor is read (x86: mfence, ARMv8: dmb ish; the release fence
     * in seq_open orders only stores). A reader that still validates the
     * old triple read its counter before that, hence below the anchor. */
    atomic_thread_fence(memory_order_seq_cst);
    uint64_t a = counter_read();
    /* the old triple, ours to read: we are its only writer */
    uint64_t obt = TTFT__LD(&g_ctr.base_ctr), obn = TTFT__LD(&g_ctr.base_ns);
    uint64_t old = a > obt ? obn + ticks_ns(a - obt, TTFT__LD(&g_ctr.mult)) : obn;
    uint64_t target = n + ticks_ns(a > t ? a - t : 0, m);
    uint64_t bn = target, mult = m;
    if (old > target) {
      /* ahead of CLOCK_MONOTONIC by e: stay at old, run slower by e per
       * second so as to meet it a second later (at most half rate) */
      const uint64_t sec = UINT64_C(1000000000);
      uint64_t e = old - target;
      bn = old;
      mult = e >= sec / 2 ? m / 2 : (uint64_t)(((unsigned __int128)m * (sec - e)) / sec);
    }
    seq_close(s, a, bn, mult);
  }
  /* release: hands first_* and last_refine_ns to the next refiner */
  atomic_store_explicit(&g_ctr.refining, 0, memory_order_release);
}

/* The reader's half. The counter is read inside the window (header
 * comment). Weakly ordered: the acquire load of seq pairs with seq_close's
 * release store (a reader that sees the even s sees the triple stored
 * before it); the triple's loads are relaxed and the acquire fence after
 * them keeps the re-check of seq from being performed before them (ARMv8:
 * dmb ishld; without it an ARM core may satisfy the re-check first and
 * bless a triple it reads later, torn); it also pairs with seq_open's
 * release fence (see there). On x86 the fence is a compiler barrier. */
static uint64_t counter_now(void) {
  for (;;) {
    /* acquire: pairs with seq_close's release store */
    uint32_t s = atomic_load_explicit(&g_ctr.seq, memory_order_acquire);
    uint64_t bt = TTFT__LD(&g_ctr.base_ctr);
    uint64_t bn = TTFT__LD(&g_ctr.base_ns);
    uint64_t m = TTFT__LD(&g_ctr.mult);
    uint64_t t = counter_read();
    /* acquire fence: the loads above before the re-check below */
    atomic_thread_fence(memory_order_acquire);
    if (TTFT_LIKELY(!(s & 1u) && TTFT__LD(&g_ctr.seq) == s)) {
      if (TTFT_UNLIKELY(t < bt)) return bn; /* read just before a re-anchor */
      return bn + ticks_ns(t - bt, m);
    }
  }
}

/* The cost of reads of one source: the fastest of `rounds` loops of 16
 * reads, timed with clock_gettime */
static uint64_t loop_cost(int counter) {
  volatile uint64_t sink = 0;
  uint64_t a = ttft_now_ns();
  for (int i = 0; i < 16; i++) sink += counter ? counter_now() : ttft_now_ns();
  (void)sink;
  return ttft_now_ns() - a;
}
#endif /* TTFT_HAVE_COUNTER */

int ttft__counter_usable(void) {
#ifdef TTFT_HAVE_COUNTER
  int st = atomic_load_explicit(&g_ctr.state, memory_order_acquire); /* pairs with calibrate */
  if (st == 0 || st == 1) {
    counter_calibrate();
    st = atomic_load_explicit(&g_ctr.state, memory_order_acquire);
  } else {
    counter_refine(0);
  }
  return st == 2;
#else
  return 0;
#endif
}

/* TTFT_CLOCK_FASTEST: measured once per process (the first registry that
 * asks), so that every such registry reads the same source. The rule:
 * the counter when it is usable (above) and the fastest of 4 loops of 16
 * reads through it (seqlock and conversion included) took less than the
 * fastest of 4 such loops of clock_gettime, run alternately; else
 * CLOCK_MONOTONIC. About 2 us. */
ttft_clock ttft__clock_fastest(void) {
#ifdef TTFT_HAVE_COUNTER
  /* relaxed: the value is the whole message (the calibration it depends
   * on is read through ttft__counter_usable's acquire) */
  int f = TTFT__LD(&g_ctr.fastest);
  if (f) return (ttft_clock)(f - 1);
  ttft_clock c = TTFT_CLOCK_MONOTONIC;
  if (ttft__counter_usable()) {
    uint64_t best_m = UINT64_MAX, best_c = UINT64_MAX;
    for (int round = 0; round < 4; round++) {
      uint64_t m = loop_cost(0), k = loop_cost(1);
      if (m < best_m) best_m = m;
      if (k < best_c) best_c = k;
    }
    if (best_c < best_m) c = TTFT_CLOCK_TSC;
  }
  int expect = 0;
  /* relaxed: the first measurement wins, the value is the message */
  if (!atomic_compare_exchange_strong_explicit(&g_ctr.fastest, &expect, (int)c + 1,
                                               memory_order_relaxed, memory_order_relaxed))
    c = (ttft_clock)(expect - 1);
  return c;
#else
  return TTFT_CLOCK_MONOTONIC;
#endif
}

/* White-box (tests/test_litmus.c): a re-anchor now, whatever the time
 * since the last one; 1 when the counter is in use */
int ttft__counter_refine_now(void) {
#ifdef TTFT_HAVE_COUNTER
  if (!ttft__counter_usable()) return 0;
  counter_refine(1);
  return 1;
#else
  return 0;
#endif
}

/* In a fork child, another thread of the parent may have been inside
 * seq_open..seq_close (sequence left odd: every counter read would spin),
 * refining (try-lock left held) or calibrating (state left 1: every
 * registry_new asking for the counter would spin). Only the forking thread
 * exists: repair each from the values, which are always individually
 * sane. */
void ttft__clock_fork_child(void) {
#ifdef TTFT_HAVE_COUNTER
  TTFT__ST(&g_ctr.refining, 0);
  int st = TTFT__LD(&g_ctr.state);
  if (st == 1) {
    TTFT__ST(&g_ctr.state, 0); /* calibration never finished: start over */
    return;
  }
  uint32_t s = TTFT__LD(&g_ctr.seq);
  if (st == 2 && (s & 1u)) {
    /* a half-written triple: re-anchor it on a fresh pair, with the rate
     * (one word, old or new, either is a calibrated rate) */
    uint64_t t, n;
    counter_pair(&t, &n);
    TTFT__ST(&g_ctr.base_ctr, t);
    TTFT__ST(&g_ctr.base_ns, n);
    TTFT__ST(&g_ctr.seq, s + 1);
  }
#endif
}

uint64_t ttft__clock_read(ttft_clock c) {
#ifdef TTFT_HAVE_COUNTER
  if (c == TTFT_CLOCK_TSC) return counter_now();
#else
  (void)c;
#endif
  return ttft_now_ns();
}

uint64_t ttft_registry_now_ns(const ttft_registry *r) {
  return r ? ttft__now(r) : ttft_now_ns();
}

ttft_clock ttft_registry_clock(const ttft_registry *r) {
  return r ? r->clock : TTFT_CLOCK_MONOTONIC;
}
