/* test_step.c — ttft_step_emitted (issue 11.2): one call per decode step
 * records exactly what one ttft_token_emitted per sequence would.
 *
 * Two registries see the same randomized timeline — begins (with
 * classes, prompt lengths, prefix hits), SCHEDULED marks, cancels and
 * ends between steps, steps that include ended and invented handles,
 * n_tokens of 0, 1 and several, time going backwards now and then — one
 * through ttft_step_emitted, the other through ttft_token_emitted per
 * entry. Every counter, every metric's count, sum and quantiles, every
 * status view and split, and every live sequence's stats must be equal.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "ttft.h"
#include "task.h"

#define MS UINT64_C(1000000)
#define MAXLIVE 96

static uint64_t rng(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

static ttft_registry *reg(uint32_t max_threads) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 256;
  c.max_threads = max_threads;
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  if (r) {
    ttft_slo slo;
    ttft_slo_init(&slo);
    slo.ttft_ns = 300 * MS;
    slo.tpot_ns = 40 * MS;
    slo.stall_threshold_ns = 150 * MS;
    EXPECT_EQ_INT(1, ttft_class_add(r, "chat", &slo));
  }
  return r;
}

static void expect_same_snapshots(ttft_registry *a, ttft_registry *b) {
  static const double qs[] = {0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1};
  ttft_snapshot *x = ttft_snapshot_take(a), *y = ttft_snapshot_take(b);
  EXPECT_NOT_NULL(x);
  EXPECT_NOT_NULL(y);
  if (!x || !y) return;
  for (int cl = TTFT_CLASS_ALL; cl < 2; cl++) {
    for (int k = 0; k < TTFT_COUNTER_COUNT_; k++)
      EXPECT_EQ_U64(ttft_snapshot_class_counter(y, cl, (ttft_counter)k),
                    ttft_snapshot_class_counter(x, cl, (ttft_counter)k));
    for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
      EXPECT_EQ_U64(ttft_snapshot_class_count(y, cl, (ttft_metric)m),
                    ttft_snapshot_class_count(x, cl, (ttft_metric)m));
      EXPECT_EQ_U64(ttft_snapshot_class_sum(y, cl, (ttft_metric)m),
                    ttft_snapshot_class_sum(x, cl, (ttft_metric)m));
      for (size_t q = 0; q < sizeof qs / sizeof qs[0]; q++)
        EXPECT_EQ_U64(ttft_snapshot_class_quantile(y, cl, (ttft_metric)m, qs[q]),
                      ttft_snapshot_class_quantile(x, cl, (ttft_metric)m, qs[q]));
    }
    for (int st = 0; st < TTFT_STATUS_COUNT_; st++)
      for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
        EXPECT_EQ_U64(ttft_snapshot_status_count(y, cl, (ttft_status)st, (ttft_metric)m),
                      ttft_snapshot_status_count(x, cl, (ttft_status)st, (ttft_metric)m));
        EXPECT_EQ_U64(ttft_snapshot_status_quantile(y, cl, (ttft_status)st, (ttft_metric)m, 0.9),
                      ttft_snapshot_status_quantile(x, cl, (ttft_status)st, (ttft_metric)m, 0.9));
      }
  }
  for (unsigned i = 0; i < 2; i++)
    EXPECT_EQ_U64(ttft_snapshot_split_count(y, TTFT_SPLIT_PREFIX_CACHE, i),
                  ttft_snapshot_split_count(x, TTFT_SPLIT_PREFIX_CACHE, i));
  for (unsigned i = 0; i < ttft_snapshot_bands(x); i++)
    EXPECT_EQ_U64(ttft_snapshot_split_quantile(y, TTFT_SPLIT_PROMPT_BAND, i, 0.5),
                  ttft_snapshot_split_quantile(x, TTFT_SPLIT_PROMPT_BAND, i, 0.5));
  ttft_snapshot_free(x);
  ttft_snapshot_free(y);
}

static void expect_same_seq(ttft_registry *a, ttft_seq sa, ttft_registry *b, ttft_seq sb) {
  ttft_seq_info x, y;
  memset(&x, 0, sizeof x);
  memset(&y, 0, sizeof y);
  x.struct_size = y.struct_size = sizeof x;
  int ra = ttft_seq_stats(a, sa, &x), rb = ttft_seq_stats(b, sb, &y);
  EXPECT_ERR(rb, ra);
  if (ra || rb) return;
  EXPECT_EQ_U64(y.emissions, x.emissions);
  EXPECT_EQ_U64(y.tokens, x.tokens);
  EXPECT_EQ_U64(y.t_last_ns, x.t_last_ns);
  EXPECT_EQ_U64(y.ttft_ns, x.ttft_ns);
  EXPECT_EQ_U64(y.itl_p50_ns, x.itl_p50_ns);
  EXPECT_EQ_U64(y.itl_p95_ns, x.itl_p95_ns);
  EXPECT_EQ_U64(y.itl_max_ns, x.itl_max_ns);
  EXPECT_EQ_U64(y.stalls, x.stalls);
}

/* One timeline through both registries. */
static void same_timeline(uint32_t max_threads, uint64_t seed, unsigned steps) {
  ttft_registry *a = reg(max_threads), *b = reg(max_threads);
  if (!a || !b) return;
  ttft_seq la[MAXLIVE], lb[MAXLIVE], deada[16] = {0}, deadb[16] = {0};
  unsigned nlive = 0, ndead = 0;
  uint64_t rs = seed, t = 1000 * MS;
  unsigned long accepted_a = 0, accepted_b = 0;
  for (unsigned step = 0; step < steps; step++) {
    /* arrivals */
    unsigned arrivals = (unsigned)(rng(&rs) % 4);
    for (unsigned i = 0; i < arrivals && nlive < MAXLIVE; i++) {
      ttft_request q;
      ttft_request_init(&q);
      q.class_id = (int)(rng(&rs) % 2);
      q.prompt_tokens = (uint32_t)(rng(&rs) % 40000);
      q.prefix_hit = (int)(rng(&rs) % 3) - 1;
      la[nlive] = ttft_begin_ex(a, &q, t);
      lb[nlive] = ttft_begin_ex(b, &q, t);
      EXPECT_TRUE(la[nlive] && lb[nlive]);
      if (rng(&rs) % 2) {
        uint64_t ts = t + (rng(&rs) % 30) * MS;
        EXPECT_ERR(ttft_mark(b, lb[nlive], TTFT_PHASE_SCHEDULED, ts),
                   ttft_mark(a, la[nlive], TTFT_PHASE_SCHEDULED, ts));
      }
      nlive++;
    }
    /* one decode step over a random subset, plus stale entries */
    ttft_seq va[MAXLIVE + 8], vb[MAXLIVE + 8];
    uint32_t nt[MAXLIVE + 8];
    size_t n = 0;
    for (unsigned i = 0; i < nlive; i++) {
      if (rng(&rs) % 5 == 0) continue;
      va[n] = la[i];
      vb[n] = lb[i];
      uint64_t d = rng(&rs) % 16;
      nt[n++] = d < 11 ? 1 : d < 15 ? 2 + (uint32_t)(rng(&rs) % 4) : 0;
    }
    for (unsigned i = 0; i < 3 && ndead; i++) {
      unsigned k = (unsigned)(rng(&rs) % ndead);
      va[n] = deada[k];
      vb[n] = deadb[k];
      nt[n++] = 1;
    }
    va[n] = vb[n] = rng(&rs) | 1; /* invented */
    nt[n++] = 1;
    /* time mostly moves on; one step in 40 goes back a little */
    t = rng(&rs) % 40 == 0 ? t - 2 * MS : t + (rng(&rs) % 8 == 0 ? (100 + rng(&rs) % 400) * MS
                                                                   : (5 + rng(&rs) % 40) * MS);
    int all_ones = rng(&rs) % 4 == 0;
    if (all_ones)
      for (size_t i = 0; i < n; i++) nt[i] = 1;
    long got = ttft_step_emitted(a, va, all_ones ? NULL : nt, n, t);
    long want = 0;
    for (size_t i = 0; i < n; i++)
      if (nt[i] && ttft_token_emitted(b, vb[i], nt[i], t) == TTFT_OK) want++;
    EXPECT_EQ_INT(want, got);
    accepted_a += got > 0 ? (unsigned long)got : 0;
    accepted_b += (unsigned long)want;
    /* ends: completed, cancelled, errors */
    for (unsigned i = 0; i < nlive;) {
      uint64_t d = rng(&rs) % 100;
      if (d >= 12) {
        i++;
        continue;
      }
      ttft_status st = d < 8 ? TTFT_COMPLETED : d < 11 ? TTFT_CANCELLED : TTFT_ERROR;
      uint64_t te = t + (rng(&rs) % 5) * MS;
      EXPECT_ERR(ttft_stream_end(b, lb[i], st, te), ttft_stream_end(a, la[i], st, te));
      deada[ndead % 16] = la[i];
      deadb[ndead % 16] = lb[i];
      ndead++;
      if (ndead > 16) ndead = 16;
      la[i] = la[nlive - 1];
      lb[i] = lb[nlive - 1];
      nlive--;
    }
  }
  for (unsigned i = 0; i < nlive; i++) expect_same_seq(a, la[i], b, lb[i]);
  expect_same_snapshots(a, b);
  fprintf(stderr, "max_threads %u: %u steps, %lu emissions accepted by the steps, %lu by "
                  "per-sequence calls, %u sequences still live\n",
          max_threads, steps, accepted_a, accepted_b, nlive);
  ttft_registry_free(a);
  ttft_registry_free(b);
}

TEST(step_equals_per_token_private_shard) { same_timeline(4, 0x1234567, 3000); }
TEST(step_equals_per_token_shared_shard) { same_timeline(0, 0x7654321, 3000); }

TEST(step_arguments) {
  ttft_registry *r = reg(1);
  ttft_seq s = ttft_begin(r, 1000);
  EXPECT_EQ_INT(TTFT_EINVAL, ttft_step_emitted(NULL, &s, NULL, 1, 2000));
  EXPECT_EQ_INT(TTFT_EINVAL, ttft_step_emitted(r, NULL, NULL, 1, 2000));
  EXPECT_EQ_INT(0, ttft_step_emitted(r, NULL, NULL, 0, 2000)); /* an empty step */
  uint32_t zero = 0;
  EXPECT_EQ_INT(0, ttft_step_emitted(r, &s, &zero, 1, 2000)); /* not an emission */
  EXPECT_EQ_INT(1, ttft_step_emitted(r, &s, NULL, 1, 2000));
  ttft_snapshot *snap = ttft_snapshot_take(r);
  EXPECT_EQ_U64(1, ttft_snapshot_counter(snap, TTFT_COUNTER_TOKENS));
  EXPECT_EQ_U64(0, ttft_snapshot_counter(snap, TTFT_COUNTER_STALE));
  ttft_snapshot_free(snap);
  ttft_registry_free(r);
}

TEST(step_now_reads_the_clock_once) {
  ttft_registry *r = reg(1);
  ttft_seq v[64];
  for (int i = 0; i < 64; i++) v[i] = ttft_begin(r, TTFT_NOW);
  EXPECT_EQ_INT(64, ttft_step_emitted(r, v, NULL, 64, TTFT_NOW));
  EXPECT_EQ_INT(64, ttft_step_emitted(r, v, NULL, 64, TTFT_NOW));
  /* every sequence's last emission carries the step's one timestamp */
  ttft_seq_info first;
  memset(&first, 0, sizeof first);
  first.struct_size = sizeof first;
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(r, v[0], &first));
  for (int i = 1; i < 64; i++) {
    ttft_seq_info in;
    memset(&in, 0, sizeof in);
    in.struct_size = sizeof in;
    EXPECT_ERR(TTFT_OK, ttft_seq_stats(r, v[i], &in));
    EXPECT_EQ_U64(first.t_last_ns, in.t_last_ns);
  }
  ttft_snapshot *snap = ttft_snapshot_take(r);
  EXPECT_EQ_U64(64, ttft_snapshot_count(snap, TTFT_METRIC_ITL));
  EXPECT_EQ_U64(128, ttft_snapshot_counter(snap, TTFT_COUNTER_TOKENS));
  ttft_snapshot_free(snap);
  ttft_registry_free(r);
}

/* steps on one thread while another cancels: the counts stay consistent
 * (run under TSan in CI) */
typedef struct race {
  ttft_registry *r;
  _Atomic ttft_seq live[32];
  _Atomic int stop;
  _Atomic unsigned long cancels;
} race;

static void *canceller(void *p) {
  race *x = p;
  uint64_t rs = 99;
  while (!atomic_load(&x->stop)) {
    unsigned i = (unsigned)(rng(&rs) % 32);
    ttft_seq h = atomic_load(&x->live[i]);
    if (h && ttft_stream_end(x->r, h, TTFT_CANCELLED, TTFT_NOW) == TTFT_OK)
      atomic_fetch_add(&x->cancels, 1);
  }
  return NULL;
}

TEST(step_races_cancels) {
  race x;
  memset(&x, 0, sizeof x);
  x.r = reg(2);
  if (!x.r) return;
  pthread_t th;
  EXPECT_EQ_INT(0, pthread_create(&th, NULL, canceller, &x));
  ttft_seq v[32];
  unsigned long accepted = 0, ended = 0;
  for (int i = 0; i < 32; i++) atomic_store(&x.live[i], v[i] = ttft_begin(x.r, TTFT_NOW));
  for (int step = 0; step < 20000; step++) {
    long k = ttft_step_emitted(x.r, v, NULL, 32, TTFT_NOW);
    EXPECT_TRUE(k >= 0 && k <= 32);
    accepted += (unsigned long)(k > 0 ? k : 0);
    if (step % 16 == 0) {
      int i = step / 16 % 32;
      if (ttft_stream_end(x.r, v[i], TTFT_COMPLETED, TTFT_NOW) == TTFT_OK) ended++;
      atomic_store(&x.live[i], v[i] = ttft_begin(x.r, TTFT_NOW));
    }
  }
  atomic_store(&x.stop, 1);
  pthread_join(th, NULL);
  for (int i = 0; i < 32; i++)
    if (ttft_stream_end(x.r, v[i], TTFT_COMPLETED, TTFT_NOW) == TTFT_OK) ended++;
  ttft_snapshot *s = ttft_snapshot_take(x.r);
  EXPECT_EQ_U64(accepted, ttft_snapshot_counter(s, TTFT_COUNTER_TOKENS));
  EXPECT_EQ_U64(ended, ttft_snapshot_counter(s, TTFT_COUNTER_COMPLETED));
  EXPECT_EQ_U64(atomic_load(&x.cancels), ttft_snapshot_counter(s, TTFT_COUNTER_CANCELLED));
  EXPECT_EQ_U64(0, ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT));
  fprintf(stderr, "20000 steps of 32 against a canceller: %lu emissions accepted, %lu cancels won\n",
          accepted, atomic_load(&x.cancels));
  ttft_snapshot_free(s);
  ttft_registry_free(x.r);
}

TU_MAIN()
