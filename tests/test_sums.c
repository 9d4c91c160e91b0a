/* test_sums.c — histogram sums are 128 bits wide and never wrap (issue
 * 18.4; 1.1 wrapped them modulo 2^64: a real Prometheus showed 4.17e9 s for
 * a true 2.26e10 s). The representation (registry.h, "the wide sum") and
 * its reader are tested at the boundaries: 2^63 (a half crossing), 2^64
 * (a wrap of the low word), single values of 2^63 and more (added in
 * parts), on a private shard and on the shared shard; a writer that died
 * between its two stores (white-box); concurrent writers on the shared
 * shard with a reader that must never see the sum go down.
 *
 * White-box where said: the live histogram is read from
 * src/record/registry.h (the static archive's layout). */
#include <pthread.h>
#include <stdatomic.h>

#include "ttft.h"
#include "task.h"
#include "record/registry.h"

#define P63 (UINT64_C(1) << 63)

static ttft_registry *reg(uint32_t threads) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 64;
  c.max_threads = threads;
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  return r;
}

/* one COMPLETED stream of E2E d (no token) */
static void stream_of(ttft_registry *r, uint64_t d) {
  ttft_seq s = ttft_begin(r, 1);
  EXPECT_TRUE(s != 0);
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, 1 + d));
}

static void wide_sum(ttft_registry *r, ttft_metric m, uint64_t *hi, uint64_t *lo) {
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_NOT_NULL(s);
  *hi = *lo = 0;
  if (s) EXPECT_ERR(TTFT_OK, ttft_snapshot_class_sum_wide(s, TTFT_CLASS_ALL, m, hi, lo));
  ttft_snapshot_free(s);
}

/* E2E values crossing 2^63, 2^64 and 2^65 on one shard kind: the sum is
 * exact after every stream, ttft_snapshot_sum saturates past 2^64 */
static void crossings(uint32_t threads) {
  ttft_registry *r = reg(threads);
  if (!r) return;
  const uint64_t d = P63 - 3; /* a little under 2^63: crossings fall inside adds */
  uint64_t ehi = 0, elo = 0;
  for (int k = 1; k <= 9; k++) {
    stream_of(r, d);
    elo += d;
    ehi += elo < d;
    uint64_t hi, lo;
    wide_sum(r, TTFT_METRIC_E2E, &hi, &lo);
    EXPECT_EQ_U64(ehi, hi);
    EXPECT_EQ_U64(elo, lo);
  }
  EXPECT_EQ_U64(4, ehi); /* 9 (2^63 - 3) = 2^66 + 2^63 - 27 */
  /* single values of 2^63 and more: 2^64 - 2 twice (the largest E2E a
   * timestamp can make), added in parts */
  for (int k = 0; k < 2; k++) {
    stream_of(r, UINT64_MAX - 1);
    uint64_t v = UINT64_MAX - 1;
    elo += v;
    ehi += elo < v;
  }
  uint64_t hi, lo;
  wide_sum(r, TTFT_METRIC_E2E, &hi, &lo);
  EXPECT_EQ_U64(ehi, hi);
  EXPECT_EQ_U64(elo, lo);
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(UINT64_MAX, ttft_snapshot_sum(s, TTFT_METRIC_E2E)); /* saturated */
  EXPECT_EQ_U64(11, ttft_snapshot_count(s, TTFT_METRIC_E2E));
  /* the mean is the wide sum's */
  double exact = (double)ehi * 18446744073709551616.0 + (double)elo;
  EXPECT_EQ_DBL(exact / 11, ttft_snapshot_mean(s, TTFT_METRIC_E2E));
  /* a delta of two snapshots subtracts in 128 bits */
  stream_of(r, 5);
  ttft_snapshot *s2 = ttft_snapshot_take(r);
  int err = 1;
  ttft_snapshot *dl = ttft_snapshot_delta(s2, s, &err);
  EXPECT_ERR(TTFT_OK, err);
  EXPECT_EQ_U64(5, ttft_snapshot_sum(dl, TTFT_METRIC_E2E));
  /* and the other order is refused: a sum does not go down */
  ttft_snapshot *bad = ttft_snapshot_delta(s, s2, &err);
  EXPECT_NULL(bad);
  ttft_snapshot_free(dl);
  ttft_snapshot_free(s2);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TEST(sum_crosses_2_64_private_shard) { crossings(1); }
TEST(sum_crosses_2_64_shared_shard) { crossings(0); }

/* ITL sums through the token path (the inline fast path of private
 * shards bails out to the general path at a crossing) */
TEST(itl_sum_crosses_on_the_token_path) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_threads = 1;
  c.stall_threshold_ns = UINT64_MAX; /* every gap takes the fast path when it can */
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  if (!r) return;
  ttft_seq s = ttft_begin(r, 1);
  uint64_t t = 2, ehi = 0, elo = 0;
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t));
  const uint64_t gap = UINT64_C(1) << 60;
  for (int k = 0; k < 15; k++) { /* 15 * 2^60 < 2^64 - 2: t does not wrap */
    t += gap;
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t));
    elo += gap;
    ehi += elo < gap;
  }
  uint64_t hi, lo;
  wide_sum(r, TTFT_METRIC_ITL, &hi, &lo);
  EXPECT_EQ_U64(ehi, hi);
  EXPECT_EQ_U64(elo, lo);
  /* a second sequence: its gaps add up past 2^64 */
  ttft_seq s2 = ttft_begin(r, 1);
  t = 2;
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s2, 1, t));
  for (int k = 0; k < 15; k++) {
    t += gap;
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s2, 1, t));
    elo += gap;
    ehi += elo < gap;
  }
  wide_sum(r, TTFT_METRIC_ITL, &hi, &lo);
  EXPECT_EQ_U64(1, ehi);
  EXPECT_EQ_U64(ehi, hi);
  EXPECT_EQ_U64(elo, lo);
  ttft_registry_free(r);
}

/* White-box: a writer that stored a sum crossing 2^63 (or wrapping) and
 * died before counting the crossing. The reader reads the true sum from
 * the state alone; the next writer settles it and goes on exactly. */
TEST(sum_of_a_writer_that_died_between_its_stores) {
#ifndef TTFT_TEST_STATIC
  fprintf(stderr, "white-box: runs in test_sums_static (the internals are hidden in the .so)\n");
#else
  ttft__hist h;
  memset(&h, 0, sizeof h);
  uint64_t hi, lo;
  /* settled: 2^63 + 5 is one half crossing */
  atomic_store(&h.sum, P63 + 5);
  atomic_store(&h.half, 1);
  lo = ttft__hist_sum_read(&h, &hi);
  EXPECT_EQ_U64(0, hi);
  EXPECT_EQ_U64(P63 + 5, lo);
  /* the writer wrapped the low word (2^64 + 2) and died: half still 1 */
  atomic_store(&h.sum, 2);
  lo = ttft__hist_sum_read(&h, &hi);
  EXPECT_EQ_U64(1, hi);
  EXPECT_EQ_U64(2, lo);
  /* the next owner adds (fast path, then a crossing) and settles it */
  ttft__hist_sum_add(&h, 10);
  lo = ttft__hist_sum_read(&h, &hi);
  EXPECT_EQ_U64(1, hi);
  EXPECT_EQ_U64(12, lo);
  ttft__hist_sum_add(&h, P63);
  lo = ttft__hist_sum_read(&h, &hi);
  EXPECT_EQ_U64(1, hi);
  EXPECT_EQ_U64(P63 + 12, lo);
  EXPECT_EQ_U64(3, atomic_load(&h.half)); /* settled: 2^64 + 2^63 + 12 */
  /* the same on the shared shard's add */
  memset(&h, 0, sizeof h);
  atomic_store(&h.sum, P63 - 1); /* a writer crossed into the upper half... */
  atomic_store(&h.sum, P63 + 1); /* ...and died: half 0 */
  lo = ttft__hist_sum_read(&h, &hi);
  EXPECT_EQ_U64(0, hi);
  ttft__hist_sum_add_shared(&h, P63); /* wraps: 2^64 + 1 */
  lo = ttft__hist_sum_read(&h, &hi);
  EXPECT_EQ_U64(1, hi);
  EXPECT_EQ_U64(1, lo);
  EXPECT_EQ_U64(2, atomic_load(&h.half));
#endif
}

/* Concurrent writers on the shared shard (max_threads 0) add values of
 * 2^60 while a reader takes snapshots: the sum it sees never goes down
 * (Prometheus would read that as a reset) and ends exact. */
#define W_THREADS 3
#define W_STREAMS 200

static _Atomic int w_stop;
/* streams recorded: a begin is refused (DROPPED) while every free slot
 * waits in limbo behind a writer preempted inside a call, which a loaded
 * 2-core machine does often with 3 writers (~140 of 600 seen) */
static _Atomic uint64_t w_done;

static void *w_main(void *p) {
  ttft_registry *r = p;
  for (int k = 0; k < W_STREAMS; k++) {
    ttft_seq s = ttft_begin(r, 1);
    if (s && ttft_stream_end(r, s, TTFT_COMPLETED, 1 + (UINT64_C(1) << 60)) == TTFT_OK)
      atomic_fetch_add(&w_done, 1);
  }
  return NULL;
}

static void *reader_main(void *p) {
  ttft_registry *r = p;
  uint64_t phi = 0, plo = 0;
  long bad = 0, reads = 0;
  while (!atomic_load(&w_stop)) {
    uint64_t hi, lo;
    ttft_snapshot *s = ttft_snapshot_take(r);
    if (!s) continue;
    ttft_snapshot_class_sum_wide(s, TTFT_CLASS_ALL, TTFT_METRIC_E2E, &hi, &lo);
    ttft_snapshot_free(s);
    if (hi < phi || (hi == phi && lo < plo)) bad++;
    phi = hi;
    plo = lo;
    reads++;
  }
  fprintf(stderr, "reader: %ld snapshots, %ld saw the sum go down\n", reads, bad);
  return (void *)bad;
}

TEST(shared_shard_sum_monotone_under_concurrent_writers) {
  ttft_registry *r = reg(0);
  if (!r) return;
  atomic_store(&w_stop, 0);
  atomic_store(&w_done, 0);
  pthread_t w[W_THREADS], rd;
  EXPECT_EQ_INT(0, pthread_create(&rd, NULL, reader_main, r));
  for (int i = 0; i < W_THREADS; i++) EXPECT_EQ_INT(0, pthread_create(&w[i], NULL, w_main, r));
  for (int i = 0; i < W_THREADS; i++) pthread_join(w[i], NULL);
  atomic_store(&w_stop, 1);
  void *bad = NULL;
  pthread_join(rd, &bad);
  EXPECT_EQ_U64(0, (uint64_t)(uintptr_t)bad);
  uint64_t hi, lo;
  wide_sum(r, TTFT_METRIC_E2E, &hi, &lo);
  /* n * 2^60 = (n / 16) * 2^64 + (n % 16) * 2^60 (600 streams: 37.5 * 2^64) */
  const uint64_t n = atomic_load(&w_done);
  EXPECT_GT_U64(n, 0);
  EXPECT_EQ_U64(n / 16, hi);
  EXPECT_EQ_U64((n % 16) << 60, lo);
  ttft_registry_free(r);
}

/* White-box: writers racing on the shared shard's add alone, many
 * crossings of 2^63 (one every 4 adds of 2^61 + 1), while a reader checks
 * that hi:lo never goes down. The final sum is exact: a writer that read
 * a stale `sum` and a newer `half` must not take the pair for a pending
 * crossing and count it a second time (an earlier 1.2 build did: hi came out one high
 * in CI, once in ~1600 snapshots of the test above). */
#ifdef TTFT_TEST_STATIC
#define RACE_THREADS 3
#define RACE_ADDS 200000
static ttft__hist race_h;
static _Atomic int race_stop;
static void *race_writer(void *p) {
  (void)p;
  for (int k = 0; k < RACE_ADDS; k++) ttft__hist_sum_add_shared(&race_h, (UINT64_C(1) << 61) + 1);
  return NULL;
}
static void *race_reader(void *p) {
  (void)p;
  uint64_t phi = 0, plo = 0;
  long bad = 0;
  while (!atomic_load(&race_stop)) {
    uint64_t hi, lo = ttft__hist_sum_read(&race_h, &hi);
    if (hi < phi || (hi == phi && lo < plo)) bad++;
    phi = hi;
    plo = lo;
  }
  return (void *)bad;
}
#endif

TEST(shared_add_exact_under_racing_crossings) {
#ifndef TTFT_TEST_STATIC
  fprintf(stderr, "white-box: runs in test_sums_static (the internals are hidden in the .so)\n");
#else
  memset(&race_h, 0, sizeof race_h);
  atomic_store(&race_stop, 0);
  pthread_t w[RACE_THREADS], rd;
  EXPECT_EQ_INT(0, pthread_create(&rd, NULL, race_reader, NULL));
  for (int i = 0; i < RACE_THREADS; i++)
    EXPECT_EQ_INT(0, pthread_create(&w[i], NULL, race_writer, NULL));
  for (int i = 0; i < RACE_THREADS; i++) pthread_join(w[i], NULL);
  atomic_store(&race_stop, 1);
  void *bad = NULL;
  pthread_join(rd, &bad);
  EXPECT_EQ_U64(0, (uint64_t)(uintptr_t)bad);
  /* n adds of 2^61 + 1: hi:lo = (n / 8) : ((n % 8) << 61) + n */
  const uint64_t n = (uint64_t)RACE_THREADS * RACE_ADDS;
  uint64_t hi, lo = ttft__hist_sum_read(&race_h, &hi);
  EXPECT_EQ_U64(n / 8, hi);
  EXPECT_EQ_U64(((n % 8) << 61) + n, lo);
  EXPECT_EQ_U64(n / 4, atomic_load(&race_h.half)); /* settled: one per 2^63 */
#endif
}

TU_MAIN()
