/* test_timeline.c — scripted sequence timelines with caller timestamps, so
 * that every metric's value is known exactly. Public API only.
 *
 * Timestamps start at T0 = 1000 ns: t_ns == 0 means "now". Quantiles of a
 * metric holding one observation v are exactly v (clamped to [min, max]);
 * values below 256 ns have a histogram bucket each and are exact too. */
#include <stdlib.h>

#include "ttft.h"
#include "task.h"

#define T0 UINT64_C(1000)
#define US UINT64_C(1000)
#define MS UINT64_C(1000000)

static ttft_registry *reg_new(uint32_t max_inflight, uint64_t stall_ns) {
  ttft_config c;
  ttft_config_init(&c);
  if (max_inflight) c.max_inflight = max_inflight;
  if (stall_ns) c.stall_threshold_ns = stall_ns;
  c.max_threads = 2;
  c.max_classes = 2;
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  if (!r) {
    fprintf(stderr, "cannot create a registry; giving up\n");
    TU_DONE();
    exit(1);
  }
  return r;
}

/* A metric holding exactly one observation v. */
static void expect_single(const ttft_snapshot *s, ttft_metric m, uint64_t v, int line) {
  static const double qs[] = {0.0, 0.001, 0.5, 0.9, 0.99, 0.999, 1.0};
  uint64_t n = ttft_snapshot_count(s, m);
  if (n != 1) fprintf(stderr, "  (metric %s, from line %d)\n", ttft_metric_name(m), line);
  EXPECT_EQ_U64(1, n);
  EXPECT_EQ_U64(v, ttft_snapshot_sum(s, m));
  EXPECT_EQ_DBL((double)v, ttft_snapshot_mean(s, m));
  for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
    uint64_t got = ttft_snapshot_quantile(s, m, qs[i]);
    if (got != v)
      fprintf(stderr, "  (metric %s q=%g, from line %d)\n", ttft_metric_name(m), qs[i], line);
    EXPECT_EQ_U64(v, got);
  }
}
#define EXPECT_SINGLE(s, m, v) expect_single((s), (m), (v), __LINE__)

static void expect_empty(const ttft_snapshot *s, ttft_metric m, int line) {
  uint64_t n = ttft_snapshot_count(s, m);
  if (n != 0) fprintf(stderr, "  (metric %s, from line %d)\n", ttft_metric_name(m), line);
  EXPECT_EQ_U64(0, n);
  EXPECT_EQ_U64(0, ttft_snapshot_quantile(s, m, 0.5));
  EXPECT_EQ_U64(0, ttft_snapshot_quantile(s, m, 1.0));
  EXPECT_EQ_U64(0, ttft_snapshot_sum(s, m));
  EXPECT_EQ_DBL(0.0, ttft_snapshot_mean(s, m));
}
#define EXPECT_EMPTY(s, m) expect_empty((s), (m), __LINE__)

#define CTR(s, c) ttft_snapshot_counter((s), TTFT_COUNTER_##c)

/* -------------------------------------------------------------------- */

/* single-token output: TTFT, E2E, no TPOT */
TEST(single_token) {
  ttft_registry *r = reg_new(0, 0);
  ttft_seq q = ttft_begin(r, T0);
  EXPECT_TRUE(q != 0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, T0 + 5 * US));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, T0 + 8 * US));
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_NOT_NULL(s);
  EXPECT_SINGLE(s, TTFT_METRIC_TTFT, 5 * US);
  EXPECT_SINGLE(s, TTFT_METRIC_E2E, 8 * US);
  EXPECT_SINGLE(s, TTFT_METRIC_OUTPUT_TOKENS, 1);
  EXPECT_SINGLE(s, TTFT_METRIC_DECODE, 0); /* t_last - t_first with one emission */
  EXPECT_EMPTY(s, TTFT_METRIC_TPOT);
  EXPECT_EMPTY(s, TTFT_METRIC_ITL);
  EXPECT_EMPTY(s, TTFT_METRIC_SEQ_ITL_P95);
  EXPECT_EMPTY(s, TTFT_METRIC_SEQ_ITL_MAX);
  EXPECT_EMPTY(s, TTFT_METRIC_QUEUE);
  EXPECT_EMPTY(s, TTFT_METRIC_PREFILL);
  EXPECT_EMPTY(s, TTFT_METRIC_ABANDONED_WAIT);
  EXPECT_EQ_U64(1, CTR(s, BEGUN));
  EXPECT_EQ_U64(1, CTR(s, COMPLETED));
  EXPECT_EQ_U64(1, CTR(s, TOKENS));
  EXPECT_EQ_U64(1, CTR(s, NO_TPOT));
  EXPECT_EQ_U64(1, CTR(s, SLO_MET)); /* default class, no budgets: completed is good */
  EXPECT_EQ_U64(0, CTR(s, CANCELLED));
  EXPECT_EQ_U64(0, CTR(s, ERRORS));
  EXPECT_EQ_U64(0, CTR(s, ABANDONED));
  EXPECT_EQ_U64(0, CTR(s, DROPPED));
  EXPECT_EQ_U64(0, CTR(s, STALLS));
  EXPECT_EQ_U64(0, CTR(s, CLOCK_CLAMPED));
  EXPECT_EQ_DBL(1.0, ttft_snapshot_attainment(s, TTFT_CLASS_ALL));
  EXPECT_EQ_U64(0, ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT));
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* The multi-token script: queued 2 us, first token at 10 us, then
 * emissions of 3, 4 and 2 tokens with gaps of 3, 6 and 9 us, one
 * preemption; the sequence is still live at T0 + 28 us. */
static ttft_seq multi_token_script(ttft_registry *r) {
  ttft_seq q = ttft_begin(r, T0);
  EXPECT_ERR(TTFT_OK, ttft_mark(r, q, TTFT_PHASE_SCHEDULED, T0 + 2 * US));       /* queue 2 us */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, T0 + 10 * US));                /* ttft 10 us */
  EXPECT_ERR(TTFT_OK, ttft_mark(r, q, TTFT_PHASE_SCHEDULED, T0 + 11 * US));      /* ignored */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 3, T0 + 13 * US));                /* gap 3 us */
  EXPECT_ERR(TTFT_OK, ttft_mark(r, q, TTFT_PHASE_PREEMPTED, T0 + 14 * US));
  EXPECT_ERR(TTFT_OK, ttft_mark(r, q, TTFT_PHASE_SCHEDULED, T0 + 15 * US));      /* re-admitted */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 4, T0 + 19 * US));                /* gap 6 us */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 2, T0 + 28 * US));                /* gap 9 us */
  return q;
}

/* multi-token steps: the live sequence's own statistics and stall state */
TEST(multi_token_seq_stats) {
  ttft_registry *r = reg_new(0, 0);
  ttft_seq q = multi_token_script(r);
  ttft_seq_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(r, q, &info));
  EXPECT_EQ_INT(0, info.class_id);
  EXPECT_EQ_U64(4, info.emissions);
  EXPECT_EQ_U64(10, info.tokens);
  EXPECT_EQ_U64(T0, info.t_begin_ns);
  EXPECT_EQ_U64(T0 + 28 * US, info.t_last_ns);
  EXPECT_EQ_U64(10 * US, info.ttft_ns);
  EXPECT_EQ_U64(9 * US, info.itl_max_ns);
  EXPECT_NEAR_REL(6 * US, info.itl_p50_ns, 0.035); /* own gap histogram: ~3 % */
  EXPECT_NEAR_REL(9 * US, info.itl_p95_ns, 0.035);
  EXPECT_LE_U64(info.itl_p50_ns, info.itl_p95_ns);
  EXPECT_LE_U64(info.itl_p95_ns, info.itl_max_ns);
  EXPECT_EQ_U64(0, info.stalls);
  EXPECT_EQ_U64(1, info.preemptions);
  EXPECT_EQ_INT(1, ttft_inflight(r));
  EXPECT_EQ_INT(0, ttft_stalled_now(r, T0 + 28 * US + 400 * MS)); /* within 500 ms */
  EXPECT_EQ_INT(1, ttft_stalled_now(r, T0 + 28 * US + 501 * MS)); /* live stall */
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, T0 + 30 * US));
  EXPECT_ERR(TTFT_ESTALE, ttft_seq_stats(r, q, &info));
  EXPECT_EQ_INT(0, ttft_inflight(r));
  ttft_registry_free(r);
}

/* a snapshot of the live multi-token sequence: TTFT and ITL are in, TPOT is not */
TEST(multi_token_live_snapshot) {
  ttft_registry *r = reg_new(0, 0);
  ttft_seq q = multi_token_script(r);
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_SINGLE(s, TTFT_METRIC_TTFT, 10 * US);
  EXPECT_EQ_U64(3, ttft_snapshot_count(s, TTFT_METRIC_ITL));
  EXPECT_EMPTY(s, TTFT_METRIC_TPOT);
  EXPECT_EMPTY(s, TTFT_METRIC_E2E);
  EXPECT_EQ_U64(1, ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT));
  /* the snapshot reads TTFT_NOW, ages after T0 + 28 us: the live stall shows */
  EXPECT_EQ_U64(1, ttft_snapshot_gauge(s, TTFT_GAUGE_LIVE_STALLS));
  ttft_snapshot_free(s);
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, T0 + 30 * US));
  ttft_registry_free(r);
}

/* the multi-token sequence ended: TPOT, ITL, E2E, phases, per-sequence ITL */
TEST(multi_token_completed) {
  ttft_registry *r = reg_new(0, 0);
  ttft_seq q = multi_token_script(r);
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, T0 + 30 * US));
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_SINGLE(s, TTFT_METRIC_TTFT, 10 * US);
  EXPECT_SINGLE(s, TTFT_METRIC_QUEUE, 2 * US);
  EXPECT_SINGLE(s, TTFT_METRIC_PREFILL, 8 * US);
  EXPECT_SINGLE(s, TTFT_METRIC_TPOT, 2 * US); /* (28 - 10) us / (10 - 1) */
  EXPECT_SINGLE(s, TTFT_METRIC_DECODE, 18 * US);
  EXPECT_SINGLE(s, TTFT_METRIC_E2E, 30 * US);
  EXPECT_SINGLE(s, TTFT_METRIC_OUTPUT_TOKENS, 10);
  EXPECT_SINGLE(s, TTFT_METRIC_SEQ_ITL_MAX, 9 * US); /* exact */
  EXPECT_EQ_U64(1, ttft_snapshot_count(s, TTFT_METRIC_SEQ_ITL_P95));
  EXPECT_NEAR_REL(9 * US, ttft_snapshot_quantile(s, TTFT_METRIC_SEQ_ITL_P95, 0.5), 0.035);
  /* ITL: one observation per emission after the first, whatever n is */
  EXPECT_EQ_U64(3, ttft_snapshot_count(s, TTFT_METRIC_ITL));
  EXPECT_EQ_U64(18 * US, ttft_snapshot_sum(s, TTFT_METRIC_ITL));
  EXPECT_EQ_DBL(6000.0, ttft_snapshot_mean(s, TTFT_METRIC_ITL));
  EXPECT_EQ_U64(3 * US, ttft_snapshot_quantile(s, TTFT_METRIC_ITL, 0.0));
  EXPECT_EQ_U64(3 * US, ttft_snapshot_quantile(s, TTFT_METRIC_ITL, 0.2));
  EXPECT_NEAR_REL(6 * US, ttft_snapshot_quantile(s, TTFT_METRIC_ITL, 0.5), 0.005);
  EXPECT_NEAR_REL(6 * US, ttft_snapshot_quantile(s, TTFT_METRIC_ITL, 0.66), 0.005);
  EXPECT_EQ_U64(9 * US, ttft_snapshot_quantile(s, TTFT_METRIC_ITL, 0.67));
  EXPECT_EQ_U64(9 * US, ttft_snapshot_quantile(s, TTFT_METRIC_ITL, 1.0));
  EXPECT_EQ_U64(10, CTR(s, TOKENS));
  EXPECT_EQ_U64(1, CTR(s, PREEMPTIONS));
  EXPECT_EQ_U64(0, CTR(s, NO_TPOT));
  EXPECT_EQ_U64(0, CTR(s, STALLS));
  EXPECT_EQ_U64(0, CTR(s, CLOCK_CLAMPED));
  EXPECT_EQ_U64(0, ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT));
  EXPECT_EQ_U64(0, ttft_snapshot_gauge(s, TTFT_GAUGE_LIVE_STALLS));
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* values below 256 ns are exact at every quantile */
TEST(small_values_exact) {
  ttft_registry *r = reg_new(0, 0);
  /* TTFTs 10, 20, ..., 100 ns */
  for (uint64_t v = 10; v <= 100; v += 10) {
    ttft_seq q = ttft_begin(r, T0);
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, T0 + v));
    EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, T0 + v));
  }
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(10, ttft_snapshot_count(s, TTFT_METRIC_TTFT));
  EXPECT_EQ_U64(10, ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, 0.0));
  EXPECT_EQ_U64(10, ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, 0.1));
  EXPECT_EQ_U64(20, ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, 0.11));
  EXPECT_EQ_U64(50, ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, 0.5));
  EXPECT_EQ_U64(90, ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, 0.9));
  EXPECT_EQ_U64(100, ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, 0.95));
  EXPECT_EQ_U64(100, ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, 1.0));
  EXPECT_EQ_U64(550, ttft_snapshot_sum(s, TTFT_METRIC_TTFT));
  EXPECT_EQ_DBL(55.0, ttft_snapshot_mean(s, TTFT_METRIC_TTFT));
  EXPECT_EQ_U64(10, CTR(s, NO_TPOT));
  /* q outside [0,1] or NaN: 0 */
  EXPECT_EQ_U64(0, ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, -0.1));
  EXPECT_EQ_U64(0, ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, 1.1));
  EXPECT_EQ_U64(0, ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, NAN));
  EXPECT_EQ_U64(0, ttft_snapshot_quantile(s, (ttft_metric)TTFT_METRIC_COUNT_, 0.5));
  EXPECT_EQ_U64(0, ttft_snapshot_count(s, (ttft_metric)-1));
  EXPECT_EQ_U64(0, ttft_snapshot_counter(s, (ttft_counter)TTFT_COUNTER_COUNT_));
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* one emission of 4 tokens: TPOT 0, no ITL */
TEST(one_emission_many_tokens) {
  ttft_registry *r = reg_new(0, 0);
  ttft_seq q = ttft_begin(r, T0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 4, T0 + 7 * US));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, T0 + 9 * US));
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_SINGLE(s, TTFT_METRIC_TPOT, 0); /* (t_last - t_first) / (N - 1) = 0 */
  EXPECT_SINGLE(s, TTFT_METRIC_OUTPUT_TOKENS, 4);
  EXPECT_EMPTY(s, TTFT_METRIC_ITL);
  EXPECT_EMPTY(s, TTFT_METRIC_SEQ_ITL_MAX);
  EXPECT_EQ_U64(0, CTR(s, NO_TPOT));
  EXPECT_EQ_U64(4, CTR(s, TOKENS));
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* cancelled before / after the first token, errors, empty completions */
TEST(cancel_and_error) {
  ttft_registry *r = reg_new(0, 0);
  /* abandoned: cancelled before any token, waited 7 ms */
  ttft_seq a = ttft_begin(r, T0);
  EXPECT_ERR(TTFT_OK, ttft_mark(r, a, TTFT_PHASE_SCHEDULED, T0 + 1 * MS));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, a, TTFT_CANCELLED, T0 + 7 * MS));
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(1, CTR(s, CANCELLED));
  EXPECT_EQ_U64(1, CTR(s, ABANDONED));
  EXPECT_SINGLE(s, TTFT_METRIC_ABANDONED_WAIT, 7 * MS);
  EXPECT_SINGLE(s, TTFT_METRIC_E2E, 7 * MS);
  EXPECT_SINGLE(s, TTFT_METRIC_OUTPUT_TOKENS, 0);
  EXPECT_SINGLE(s, TTFT_METRIC_QUEUE, 1 * MS);
  EXPECT_EMPTY(s, TTFT_METRIC_TTFT);
  EXPECT_EMPTY(s, TTFT_METRIC_PREFILL);
  EXPECT_EMPTY(s, TTFT_METRIC_DECODE);
  EXPECT_EQ_U64(1, CTR(s, NO_TPOT));
  EXPECT_EQ_U64(0, CTR(s, SLO_MET));
  /* no budget to miss: a cancelled stream is not judged, nothing is */
  EXPECT_EQ_U64(0, CTR(s, SLO_JUDGED));
  EXPECT_EQ_DBL(-1.0, ttft_snapshot_attainment(s, TTFT_CLASS_ALL));
  ttft_snapshot_free(s);

  /* cancelled after its first token: not abandoned */
  ttft_seq b = ttft_begin(r, T0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, b, 1, T0 + 5 * MS));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, b, TTFT_CANCELLED, T0 + 9 * MS));
  /* error after two emissions */
  ttft_seq c = ttft_begin(r, T0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, c, 1, T0 + 3 * MS));
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, c, 1, T0 + 4 * MS));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, c, TTFT_ERROR, T0 + 4 * MS));
  /* completed without a single token: OUTPUT_TOKENS 0, not abandoned */
  ttft_seq d = ttft_begin(r, T0);
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, d, TTFT_COMPLETED, T0 + 2 * MS));
  /* an error before any token is not "abandoned" either */
  ttft_seq e = ttft_begin(r, T0);
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, e, TTFT_ERROR, T0 + 6 * MS));

  s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(5, CTR(s, BEGUN));
  EXPECT_EQ_U64(2, CTR(s, CANCELLED));
  EXPECT_EQ_U64(2, CTR(s, ERRORS));
  EXPECT_EQ_U64(1, CTR(s, COMPLETED));
  EXPECT_EQ_U64(1, CTR(s, ABANDONED));
  EXPECT_EQ_U64(1, ttft_snapshot_count(s, TTFT_METRIC_ABANDONED_WAIT));
  EXPECT_EQ_U64(2, ttft_snapshot_count(s, TTFT_METRIC_TTFT));
  EXPECT_EQ_U64(3 * MS, ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, 0.0));
  EXPECT_EQ_U64(5 * MS, ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, 1.0));
  EXPECT_EQ_U64(5, ttft_snapshot_count(s, TTFT_METRIC_E2E));
  EXPECT_EQ_U64((7 + 9 + 4 + 2 + 6) * MS, ttft_snapshot_sum(s, TTFT_METRIC_E2E));
  EXPECT_EQ_U64(5, ttft_snapshot_count(s, TTFT_METRIC_OUTPUT_TOKENS));
  EXPECT_EQ_U64(3, ttft_snapshot_sum(s, TTFT_METRIC_OUTPUT_TOKENS));
  EXPECT_EQ_U64(0, ttft_snapshot_quantile(s, TTFT_METRIC_OUTPUT_TOKENS, 0.0));
  EXPECT_EQ_U64(2, ttft_snapshot_quantile(s, TTFT_METRIC_OUTPUT_TOKENS, 1.0));
  EXPECT_SINGLE(s, TTFT_METRIC_TPOT, 1 * MS); /* the ERROR stream had N = 2 */
  EXPECT_EQ_U64(4, CTR(s, NO_TPOT));
  EXPECT_SINGLE(s, TTFT_METRIC_ITL, 1 * MS);
  EXPECT_EQ_U64(1, CTR(s, SLO_MET)); /* only the completed one (no budgets) */
  EXPECT_EQ_U64(3, CTR(s, SLO_JUDGED)); /* the completed one and the errors */
  EXPECT_NEAR_REL(1.0 / 3.0, ttft_snapshot_attainment(s, TTFT_CLASS_ALL), 1e-12);
  EXPECT_EQ_U64(3, CTR(s, TOKENS));
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* stalls: gaps above the budget, stalled sequences, live stalls */
TEST(stalls) {
  ttft_registry *r = reg_new(0, 1 * MS); /* stall budget 1 ms */
  ttft_seq a = ttft_begin(r, T0);
  ttft_seq b = ttft_begin(r, T0);
  ttft_seq c = ttft_begin(r, T0); /* never emits: waiting for its first token is not a stall */
  uint64_t t = T0 + 1 * MS;
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, a, 1, t));
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, b, 1, t));
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, a, 1, t + 2 * MS));          /* stall */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, a, 1, t + 2 * MS + 500 * US)); /* fine */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, a, 1, t + 5 * MS + 500 * US)); /* stall */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, a, 1, t + 6 * MS + 500 * US)); /* == budget: not */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, b, 1, t + 1 * MS + 500 * US)); /* stall */
  uint64_t a_last = t + 6 * MS + 500 * US, b_last = t + 1 * MS + 500 * US;

  ttft_seq_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(r, a, &info));
  EXPECT_EQ_U64(2, info.stalls);
  EXPECT_EQ_U64(3 * MS, info.itl_max_ns);
  EXPECT_EQ_U64(5, info.emissions);
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(r, c, &info));
  EXPECT_EQ_U64(0, info.emissions);
  EXPECT_EQ_U64(0, info.ttft_ns);
  EXPECT_EQ_U64(0, info.itl_max_ns);
  EXPECT_EQ_U64(0, info.itl_p95_ns);

  /* live stalls: b's last emission is older than a's */
  EXPECT_EQ_INT(0, ttft_stalled_now(r, b_last));
  EXPECT_EQ_INT(1, ttft_stalled_now(r, a_last)); /* b is 5 ms old by then */
  EXPECT_EQ_INT(0, ttft_stalled_now(r, b_last + 1 * MS)); /* exactly the budget */
  EXPECT_EQ_INT(1, ttft_stalled_now(r, b_last + 1 * MS + 1));
  EXPECT_EQ_INT(2, ttft_stalled_now(r, a_last + 1 * MS + 1));
  EXPECT_EQ_INT(2, ttft_stalled_now(r, a_last + 3600 * UINT64_C(1000000000)));
  EXPECT_EQ_INT(3, ttft_inflight(r));

  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, a, TTFT_COMPLETED, a_last));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, b, TTFT_COMPLETED, b_last));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, c, TTFT_CANCELLED, a_last));
  EXPECT_EQ_INT(0, ttft_stalled_now(r, a_last + 1000 * MS));

  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(3, CTR(s, STALLS));
  EXPECT_EQ_U64(2, CTR(s, STALLED_SEQS)); /* once per sequence */
  EXPECT_EQ_U64(5, ttft_snapshot_count(s, TTFT_METRIC_ITL));
  EXPECT_EQ_U64(3 * MS, ttft_snapshot_quantile(s, TTFT_METRIC_ITL, 1.0));
  EXPECT_EQ_U64(500 * US, ttft_snapshot_quantile(s, TTFT_METRIC_ITL, 0.0));
  EXPECT_EQ_U64(2, ttft_snapshot_count(s, TTFT_METRIC_SEQ_ITL_MAX));
  EXPECT_EQ_U64(1 * MS + 500 * US, ttft_snapshot_quantile(s, TTFT_METRIC_SEQ_ITL_MAX, 0.0));
  EXPECT_EQ_U64(3 * MS, ttft_snapshot_quantile(s, TTFT_METRIC_SEQ_ITL_MAX, 1.0));
  EXPECT_EQ_U64(4 * MS + 500 * US, ttft_snapshot_sum(s, TTFT_METRIC_SEQ_ITL_MAX));
  EXPECT_EQ_U64(1, CTR(s, ABANDONED));
  EXPECT_EQ_U64(0, ttft_snapshot_gauge(s, TTFT_GAUGE_LIVE_STALLS));
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* time going backwards is clamped and counted */
TEST(clock_backwards) {
  ttft_registry *r = reg_new(0, 0);
  ttft_seq q = ttft_begin(r, 10 * US);
  EXPECT_ERR(TTFT_OK, ttft_mark(r, q, TTFT_PHASE_SCHEDULED, 5 * US));  /* clamped: queue 0 */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, 4 * US));           /* clamped: ttft 0 */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, 30 * US));          /* gap 20 us */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, 20 * US));          /* clamped: gap 0 */
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, 15 * US)); /* clamped: e2e 20 us */
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(4, CTR(s, CLOCK_CLAMPED));
  EXPECT_SINGLE(s, TTFT_METRIC_QUEUE, 0);
  EXPECT_SINGLE(s, TTFT_METRIC_TTFT, 0);
  EXPECT_SINGLE(s, TTFT_METRIC_PREFILL, 0);
  EXPECT_SINGLE(s, TTFT_METRIC_E2E, 20 * US);
  EXPECT_SINGLE(s, TTFT_METRIC_DECODE, 20 * US);
  EXPECT_SINGLE(s, TTFT_METRIC_TPOT, 10 * US);
  EXPECT_EQ_U64(2, ttft_snapshot_count(s, TTFT_METRIC_ITL));
  EXPECT_EQ_U64(0, ttft_snapshot_quantile(s, TTFT_METRIC_ITL, 0.0));
  EXPECT_EQ_U64(20 * US, ttft_snapshot_quantile(s, TTFT_METRIC_ITL, 1.0));
  EXPECT_SINGLE(s, TTFT_METRIC_SEQ_ITL_MAX, 20 * US);
  /* nothing wrapped: every maximum stays within the script's span */
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++)
    EXPECT_LE_U64(ttft_snapshot_quantile(s, (ttft_metric)m, 1.0), 20 * US);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* every counter and metric count of a snapshot, to check nothing moved */
typedef struct state {
  uint64_t ctr[TTFT_COUNTER_COUNT_];
  uint64_t cnt[TTFT_METRIC_COUNT_];
  uint64_t sum[TTFT_METRIC_COUNT_];
} state;

static void state_of(ttft_registry *r, state *st) {
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_NOT_NULL(s);
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++) st->ctr[c] = ttft_snapshot_counter(s, (ttft_counter)c);
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
    st->cnt[m] = ttft_snapshot_count(s, (ttft_metric)m);
    st->sum[m] = ttft_snapshot_sum(s, (ttft_metric)m);
  }
  ttft_snapshot_free(s);
}

/* Everything but the STALE counter, which counts exactly the rejected
 * calls these checks make (test_registry.c, stale_counter_counts_each_rejected_hook,
 * checks it). */
static void expect_same_state(const state *a, const state *b, int line) {
  int bad = 0;
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++)
    if (c != TTFT_COUNTER_STALE && a->ctr[c] != b->ctr[c]) {
      fprintf(stderr, "  counter %s changed: %llu -> %llu\n", ttft_counter_name((ttft_counter)c),
              (unsigned long long)a->ctr[c], (unsigned long long)b->ctr[c]);
      bad = 1;
    }
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++)
    if (a->cnt[m] != b->cnt[m] || a->sum[m] != b->sum[m]) {
      fprintf(stderr, "  metric %s changed\n", ttft_metric_name((ttft_metric)m));
      bad = 1;
    }
  if (bad) fprintf(stderr, "  (state compared at line %d)\n", line);
  EXPECT_FALSE(bad);
}

/* stale handles: after end, after slot reuse */
TEST(stale_handles) {
  ttft_registry *r = reg_new(1, 0); /* one slot: the second sequence reuses it */
  ttft_seq a = ttft_begin(r, T0);
  EXPECT_TRUE(a != 0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, a, 2, T0 + 1 * US));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, a, TTFT_COMPLETED, T0 + 2 * US));
  state before, after;
  state_of(r, &before);
  /* every hook refuses the ended handle and changes nothing */
  EXPECT_ERR(TTFT_ESTALE, ttft_token_emitted(r, a, 1, T0 + 3 * US));
  EXPECT_ERR(TTFT_ESTALE, ttft_mark(r, a, TTFT_PHASE_SCHEDULED, T0 + 3 * US));
  EXPECT_ERR(TTFT_ESTALE, ttft_mark(r, a, TTFT_PHASE_PREEMPTED, T0 + 3 * US));
  EXPECT_ERR(TTFT_ESTALE, ttft_stream_end(r, a, TTFT_COMPLETED, T0 + 3 * US));
  EXPECT_ERR(TTFT_ESTALE, ttft_stream_end(r, a, TTFT_CANCELLED, T0 + 3 * US));
  ttft_seq_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_ERR(TTFT_ESTALE, ttft_seq_stats(r, a, &info));
  state_of(r, &after);
  expect_same_state(&before, &after, __LINE__);

  /* the slot serves a new sequence; the old handle still cannot touch it */
  ttft_seq b = ttft_begin(r, T0 + 10 * US);
  EXPECT_TRUE(b != 0);
  EXPECT_TRUE(b != a);
  EXPECT_EQ_U64((uint32_t)a, (uint32_t)b); /* same slot, new generation */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, b, 1, T0 + 15 * US));
  state_of(r, &before);
  EXPECT_ERR(TTFT_ESTALE, ttft_token_emitted(r, a, 1, T0 + 16 * US));
  EXPECT_ERR(TTFT_ESTALE, ttft_mark(r, a, TTFT_PHASE_PREEMPTED, T0 + 16 * US));
  EXPECT_ERR(TTFT_ESTALE, ttft_stream_end(r, a, TTFT_ERROR, T0 + 16 * US));
  EXPECT_ERR(TTFT_ESTALE, ttft_seq_stats(r, a, &info));
  state_of(r, &after);
  expect_same_state(&before, &after, __LINE__);
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(r, b, &info));
  EXPECT_EQ_U64(1, info.emissions);
  EXPECT_EQ_U64(1, info.tokens);
  EXPECT_EQ_U64(0, info.preemptions);
  EXPECT_EQ_U64(T0 + 15 * US, info.t_last_ns);
  EXPECT_EQ_U64(5 * US, info.ttft_ns);
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, b, TTFT_COMPLETED, T0 + 20 * US));
  EXPECT_ERR(TTFT_ESTALE, ttft_stream_end(r, b, TTFT_COMPLETED, T0 + 20 * US)); /* twice */

  /* forged handles: slot out of range, generation never issued */
  EXPECT_ERR(TTFT_ESTALE, ttft_token_emitted(r, (ttft_seq)2, 1, T0));
  EXPECT_ERR(TTFT_ESTALE, ttft_token_emitted(r, b + (UINT64_C(7) << 32), 1, T0));
  EXPECT_ERR(TTFT_ESTALE, ttft_stream_end(r, UINT64_MAX, TTFT_COMPLETED, T0));

  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(2, CTR(s, BEGUN));
  EXPECT_EQ_U64(2, CTR(s, COMPLETED));
  EXPECT_EQ_U64(3, CTR(s, TOKENS));
  EXPECT_EQ_U64(0, CTR(s, PREEMPTIONS));
  EXPECT_EQ_U64(2, ttft_snapshot_count(s, TTFT_METRIC_E2E));
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* slot exhaustion counts DROPPED */
TEST(slot_exhaustion) {
  ttft_registry *r = reg_new(2, 0);
  ttft_seq a = ttft_begin(r, T0), b = ttft_begin(r, T0);
  EXPECT_TRUE(a != 0 && b != 0 && a != b);
  EXPECT_EQ_U64(0, ttft_begin(r, T0));
  ttft_request req;
  ttft_request_init(&req);
  EXPECT_EQ_U64(0, ttft_begin_ex(r, &req, T0));
  EXPECT_EQ_INT(2, ttft_inflight(r));
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(2, CTR(s, BEGUN));
  EXPECT_EQ_U64(2, CTR(s, DROPPED));
  EXPECT_EQ_U64(2, ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT));
  ttft_snapshot_free(s);
  /* a slot comes back once a stream ends */
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, a, TTFT_CANCELLED, T0 + 1));
  ttft_seq c = ttft_begin(r, T0 + 2);
  EXPECT_TRUE(c != 0);
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, b, TTFT_CANCELLED, T0 + 3));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, c, TTFT_CANCELLED, T0 + 3));
  s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(3, CTR(s, BEGUN));
  EXPECT_EQ_U64(2, CTR(s, DROPPED));
  EXPECT_EQ_U64(3, CTR(s, ABANDONED));
  EXPECT_EQ_U64(0, ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT));
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* bad input: EINVAL, ESTALE, NULL */
TEST(bad_input) {
  ttft_registry *r = reg_new(0, 0);
  ttft_seq q = ttft_begin(r, T0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, T0 + 1 * US));
  state before, after;
  state_of(r, &before);
  EXPECT_ERR(TTFT_EINVAL, ttft_token_emitted(r, q, 0, T0 + 2 * US));
  EXPECT_ERR(TTFT_EINVAL, ttft_mark(r, q, (ttft_phase)TTFT_PHASE_COUNT_, T0 + 2 * US));
  EXPECT_ERR(TTFT_EINVAL, ttft_mark(r, q, (ttft_phase)-1, T0 + 2 * US));
  EXPECT_ERR(TTFT_EINVAL, ttft_stream_end(r, q, (ttft_status)TTFT_STATUS_COUNT_, T0 + 2 * US));
  EXPECT_ERR(TTFT_EINVAL, ttft_stream_end(r, q, (ttft_status)-1, T0 + 2 * US));
  /* handle 0 */
  EXPECT_ERR(TTFT_ESTALE, ttft_token_emitted(r, 0, 1, T0 + 2 * US));
  EXPECT_ERR(TTFT_ESTALE, ttft_mark(r, 0, TTFT_PHASE_SCHEDULED, T0 + 2 * US));
  EXPECT_ERR(TTFT_ESTALE, ttft_stream_end(r, 0, TTFT_COMPLETED, T0 + 2 * US));
  /* NULL registry */
  EXPECT_EQ_U64(0, ttft_begin(NULL, T0));
  EXPECT_EQ_U64(0, ttft_begin_ex(NULL, NULL, T0));
  EXPECT_ERR(TTFT_EINVAL, ttft_mark(NULL, q, TTFT_PHASE_SCHEDULED, T0));
  EXPECT_ERR(TTFT_EINVAL, ttft_token_emitted(NULL, q, 1, T0));
  EXPECT_ERR(TTFT_EINVAL, ttft_stream_end(NULL, q, TTFT_COMPLETED, T0));
  EXPECT_NULL(ttft_snapshot_take(NULL));
  EXPECT_EQ_INT(TTFT_EINVAL, ttft_stalled_now(NULL, T0));
  EXPECT_EQ_INT(TTFT_EINVAL, ttft_inflight(NULL));
  ttft_seq_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_ERR(TTFT_EINVAL, ttft_seq_stats(NULL, q, &info));
  EXPECT_ERR(TTFT_EINVAL, ttft_seq_stats(r, q, NULL));
  info.struct_size = 0;
  EXPECT_ERR(TTFT_EINVAL, ttft_seq_stats(r, q, &info));
  info.struct_size = sizeof info + 8;
  EXPECT_ERR(TTFT_EINVAL, ttft_seq_stats(r, q, &info));
  EXPECT_EQ_U64(0, ttft_registry_memory(NULL));
  ttft_registry_free(NULL);  /* no-op */
  ttft_snapshot_free(NULL);  /* no-op */
  /* snapshot queries on NULL */
  EXPECT_EQ_U64(0, ttft_snapshot_count(NULL, TTFT_METRIC_TTFT));
  EXPECT_EQ_U64(0, ttft_snapshot_quantile(NULL, TTFT_METRIC_TTFT, 0.5));
  EXPECT_EQ_U64(0, ttft_snapshot_counter(NULL, TTFT_COUNTER_BEGUN));
  EXPECT_EQ_DBL(0.0, ttft_snapshot_mean(NULL, TTFT_METRIC_TTFT));
  state_of(r, &after);
  expect_same_state(&before, &after, __LINE__);

  /* the sequence survived every bad call untouched */
  info.struct_size = sizeof info;
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(r, q, &info));
  EXPECT_EQ_U64(1, info.emissions);
  EXPECT_EQ_U64(T0 + 1 * US, info.t_last_ns);
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, T0 + 2 * US));
  /* a smaller, older ttft_seq_info is filled up to its size */
  ttft_seq q2 = ttft_begin(r, T0);
  _Alignas(ttft_seq_info) unsigned char raw[sizeof(ttft_seq_info)];
  memset(raw, 0xAB, sizeof raw);
  ttft_seq_info *small = (ttft_seq_info *)(void *)raw;
  small->struct_size = offsetof(ttft_seq_info, emissions);
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(r, q2, small));
  EXPECT_EQ_INT(0, small->class_id);
  EXPECT_EQ_U64(0xAB, raw[offsetof(ttft_seq_info, emissions)]); /* untouched */
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q2, TTFT_COMPLETED, T0 + 2 * US));
  ttft_registry_free(r);
}

/* TTFT_NOW reads the library's clock */
TEST(ttft_now) {
  ttft_registry *r = reg_new(0, 0);
  uint64_t t0 = ttft_now_ns();
  ttft_seq q = ttft_begin(r, TTFT_NOW);
  ttft_seq_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(r, q, &info));
  EXPECT_GE_U64(info.t_begin_ns, t0);
  EXPECT_LE_U64(info.t_begin_ns, ttft_now_ns());
  /* a caller timestamp far in the future, then NOW: NOW is clamped */
  uint64_t future = ttft_now_ns() + 3600 * UINT64_C(1000000000);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, future));
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, TTFT_NOW));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, TTFT_NOW));
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(2, CTR(s, CLOCK_CLAMPED));
  EXPECT_SINGLE(s, TTFT_METRIC_ITL, 0);
  EXPECT_SINGLE(s, TTFT_METRIC_TTFT, future - info.t_begin_ns);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TU_MAIN()
