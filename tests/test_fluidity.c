/*
 * test_fluidity.c — issue 29: SLOs as users feel them, over scripted
 * timelines whose every figure is computed by hand below.
 *
 *  - the fluidity rule (SPEC 10.2): a stream with token deadline D keeps
 *    slack (from 0); an emission after the first with gap g carrying n
 *    tokens meets its deadline when g <= D + slack (slack = D + slack - g)
 *    else misses m = floor((g - slack - D) / D) + 1 (slack = 0); its other
 *    n - 1 tokens each add one met deadline and D of slack. Cases: early
 *    stall, late stall after slack, a multi-deadline miss, n-token
 *    emissions, a stream that ran ahead then froze, cancellation before
 *    and after a miss (a cancel counts the deadlines already passed);
 *  - the counters TOKEN_DEADLINES / _MISSED (as they happen), FLUID /
 *    FLUID_JUDGED (at the end), ttft_seq_stats' fluidity;
 *  - per-request ttft_slo_ns / tpot_slo_ns beside class budgets in one
 *    registry; the length-aware first-token deadline at its band edges;
 *  - merge, delta, the encoding and every format carry the new counters,
 *    and a snapshot encoded before them (libttft 1.3 before issue 29,
 *    21 counters: tests/fixtures/snapshot-1.3-21ctr.ttfs) still decodes.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "task.h"
#include "ttft.h"

#define MS UINT64_C(1000000)
#define T0 UINT64_C(1000000000)

static ttft_registry *reg_new(void) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 64;
  c.max_threads = 2;
  c.stall_threshold_ns = 10000 * MS; /* stalls play no part here */
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  return r;
}

/* a class with TPOT budget tpot (D = tpot unless dl is set) */
static int class_dl(ttft_registry *r, const char *name, uint64_t tpot, uint64_t dl) {
  ttft_slo s;
  ttft_slo_init(&s);
  s.tpot_ns = tpot;
  s.token_deadline_ns = dl;
  int id = ttft_class_add(r, name, &s);
  EXPECT_GT_INT(id, 0);
  return id;
}

/* One scripted stream: begin at T0, first token at T0 + first, then
 * gaps[i] ms apart carrying n[i] tokens (n NULL: 1 each); ended with
 * status at the last emission + tail ms. Returns the seq_stats just before
 * the end in *info (when not NULL). */
static void play(ttft_registry *r, int cls, const uint64_t *gaps, const uint32_t *n, size_t k,
                 uint64_t tail, ttft_status st, ttft_seq_info *info) {
  ttft_request q;
  ttft_request_init(&q);
  q.class_id = cls;
  ttft_seq s = ttft_begin_ex(r, &q, T0);
  EXPECT_TRUE(s != 0);
  uint64_t t = T0 + 100 * MS;
  EXPECT_EQ_INT(TTFT_OK, ttft_token_emitted(r, s, 1, t));
  for (size_t i = 0; i < k; i++) {
    t += gaps[i] * MS;
    EXPECT_EQ_INT(TTFT_OK, ttft_token_emitted(r, s, n ? n[i] : 1, t));
  }
  if (info) {
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    EXPECT_EQ_INT(TTFT_OK, ttft_seq_stats(r, s, info));
  }
  EXPECT_EQ_INT(TTFT_OK, ttft_stream_end(r, s, st, t + tail * MS));
}

typedef struct want {
  uint64_t deadlines, missed, fluid, judged;
} want;

static void expect_class(ttft_registry *r, int cls, want w) {
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_NOT_NULL(s);
  if (!s) return;
  EXPECT_EQ_U64(w.deadlines, ttft_snapshot_class_counter(s, cls, TTFT_COUNTER_TOKEN_DEADLINES));
  EXPECT_EQ_U64(w.missed, ttft_snapshot_class_counter(s, cls, TTFT_COUNTER_TOKEN_DEADLINES_MISSED));
  EXPECT_EQ_U64(w.fluid, ttft_snapshot_class_counter(s, cls, TTFT_COUNTER_FLUID));
  EXPECT_EQ_U64(w.judged, ttft_snapshot_class_counter(s, cls, TTFT_COUNTER_FLUID_JUDGED));
  ttft_snapshot_free(s);
}

/* D = 50 ms. Gaps 40 40 200 40: slack 10, 20; 200 > 70 misses
 * floor((200 - 20 - 50) / 50) + 1 = 3, slack 0; 40 met (slack 10).
 * deadlines 1 + 1 + 3 + 1 = 6, missed 3, fluidity 0.5: judged, not fluid. */
TEST(late_stall_after_slack_misses_three) {
  ttft_registry *r = reg_new();
  int c = class_dl(r, "chat", 50 * MS, 0);
  static const uint64_t g[] = {40, 40, 200, 40};
  ttft_seq_info in;
  play(r, c, g, NULL, 4, 0, TTFT_COMPLETED, &in);
  EXPECT_EQ_U64(6, in.deadlines);
  EXPECT_EQ_U64(3, in.deadlines_missed);
  EXPECT_EQ_DBL(0.5, in.fluidity);
  expect_class(r, c, (want){6, 3, 0, 1});
  ttft_registry_free(r);
}

/* The same stall of 120 ms: early (no slack yet) it misses
 * floor((120 - 0 - 50) / 50) + 1 = 2; after ten 10 ms gaps (slack
 * 10 * 40 = 400 ms) it misses nothing. Early: 2 + 10 deadlines, 2 missed
 * (fluidity 10/12 < 0.9); late: 11 met. */
TEST(early_stall_misses_late_stall_does_not) {
  ttft_registry *r = reg_new();
  int c = class_dl(r, "chat", 50 * MS, 0);
  uint64_t early[11] = {120, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10};
  uint64_t late[11] = {10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 120};
  ttft_seq_info in;
  play(r, c, early, NULL, 11, 0, TTFT_COMPLETED, &in);
  EXPECT_EQ_U64(12, in.deadlines);
  EXPECT_EQ_U64(2, in.deadlines_missed);
  EXPECT_EQ_DBL(1.0 - 2.0 / 12.0, in.fluidity);
  expect_class(r, c, (want){12, 2, 0, 1});
  play(r, c, late, NULL, 11, 0, TTFT_COMPLETED, &in);
  EXPECT_EQ_U64(11, in.deadlines);
  EXPECT_EQ_U64(0, in.deadlines_missed);
  EXPECT_EQ_DBL(1.0, in.fluidity);
  expect_class(r, c, (want){23, 2, 1, 2});
  ttft_registry_free(r);
}

/* m at its edges, D = 50, no slack: g = 50 met; 51 -> 1; 100 -> 2
 * (floor(50/50) + 1: the deadline at 50 missed, and the rule counts the
 * one at 100 too); 149 -> 2; 150 -> 3. Each a stream of its own. */
TEST(multi_deadline_miss_formula_edges) {
  ttft_registry *r = reg_new();
  int c = class_dl(r, "chat", 50 * MS, 0);
  static const uint64_t gs[] = {50, 51, 100, 149, 150};
  static const uint64_t ms[] = {0, 1, 2, 2, 3};
  uint64_t dl = 0, miss = 0;
  for (size_t i = 0; i < 5; i++) {
    ttft_seq_info in;
    play(r, c, &gs[i], NULL, 1, 0, TTFT_COMPLETED, &in);
    EXPECT_EQ_U64(ms[i], in.deadlines_missed);
    EXPECT_EQ_U64(ms[i] ? ms[i] : 1, in.deadlines);
    dl += ms[i] ? ms[i] : 1;
    miss += ms[i];
  }
  /* fluid: only the first (fluidity 1); the others have fluidity 0 */
  expect_class(r, c, (want){dl, miss, 1, 5});
  ttft_registry_free(r);
}

/* n-token emissions, D = 50. Gaps (tokens): 60 (4): 60 > 50 misses
 * floor(10/50) + 1 = 1, slack 0, then 3 more tokens: +3 deadlines, slack
 * 150. 180 (1): 180 <= 200 met, slack 20. 100 (2): 100 > 70 misses
 * floor(30/50) + 1 = 1, slack 0, +1 token: slack 50. deadlines
 * 1 + 3 + 1 + 1 + 1 = 7, missed 2, fluidity 5/7. */
TEST(n_token_emissions) {
  ttft_registry *r = reg_new();
  int c = class_dl(r, "spec", 50 * MS, 0);
  static const uint64_t g[] = {60, 180, 100};
  static const uint32_t n[] = {4, 1, 2};
  ttft_seq_info in;
  play(r, c, g, n, 3, 0, TTFT_COMPLETED, &in);
  EXPECT_EQ_U64(7, in.deadlines);
  EXPECT_EQ_U64(2, in.deadlines_missed);
  EXPECT_EQ_DBL(1.0 - 2.0 / 7.0, in.fluidity);
  expect_class(r, c, (want){7, 2, 0, 1});
  ttft_registry_free(r);
}

/* A stream that ran ahead then froze, D = 20 (token_deadline_ns set; the
 * TPOT budget 1 s plays no part): 30 gaps of 5 ms build 30 * 15 = 450 ms
 * of slack; a freeze of 600 ms misses floor((600 - 450 - 20) / 20) + 1 = 7;
 * then 3 gaps of 5 ms. deadlines 30 + 7 + 3 = 40, missed 7: fluidity
 * 33/40 = 0.825 < 0.9. With fluid_min 0.8 in a second class the same
 * stream is fluid. */
TEST(ran_ahead_then_froze) {
  ttft_registry *r = reg_new();
  int c = class_dl(r, "a", 1000 * MS, 20 * MS);
  ttft_slo s;
  ttft_slo_init(&s);
  EXPECT_EQ_DBL(0.9, s.fluid_min);
  s.token_deadline_ns = 20 * MS;
  s.fluid_min = 0.8;
  int c2 = ttft_class_add(r, "b", &s);
  uint64_t g[34];
  for (int i = 0; i < 34; i++) g[i] = 5;
  g[30] = 600;
  ttft_seq_info in;
  play(r, c, g, NULL, 34, 0, TTFT_COMPLETED, &in);
  EXPECT_EQ_U64(40, in.deadlines);
  EXPECT_EQ_U64(7, in.deadlines_missed);
  EXPECT_EQ_DBL(1.0 - 7.0 / 40.0, in.fluidity);
  expect_class(r, c, (want){40, 7, 0, 1});
  play(r, c2, g, NULL, 34, 0, TTFT_COMPLETED, NULL);
  expect_class(r, c2, (want){40, 7, 1, 1});
  /* fluid_min outside 0 .. 1 is refused */
  s.fluid_min = 1.5;
  EXPECT_EQ_INT(TTFT_EINVAL, ttft_class_add(r, "c", &s));
  ttft_registry_free(r);
}

/* Cancellation, D = 50. (a) gaps 40 40, cancelled 60 ms after the last
 * token: 60 <= 50 + 20, no deadline passed: not judged; deadlines 2.
 * (b) the same cancelled 200 ms after: floor((200 - 20 - 50) / 50) + 1 = 3
 * deadlines passed with no token, counted at the cancel: judged, not
 * fluid. (c) a miss then a cancel in time: judged. (d) cancelled before
 * the first token (abandoned): no deadline, not judged. (e) ERROR with
 * no miss: judged, not fluid. */
TEST(cancellation_before_and_after_a_miss) {
  ttft_registry *r = reg_new();
  int c = class_dl(r, "chat", 50 * MS, 0);
  static const uint64_t g[] = {40, 40};
  play(r, c, g, NULL, 2, 60, TTFT_CANCELLED, NULL);
  expect_class(r, c, (want){2, 0, 0, 0});
  play(r, c, g, NULL, 2, 200, TTFT_CANCELLED, NULL);
  expect_class(r, c, (want){2 + 2 + 3, 3, 0, 1});
  static const uint64_t g2[] = {120, 10};
  play(r, c, g2, NULL, 2, 10, TTFT_CANCELLED, NULL); /* 120: 2 missed; 10 met */
  expect_class(r, c, (want){7 + 3, 5, 0, 2});
  ttft_request q;
  ttft_request_init(&q);
  q.class_id = c;
  ttft_seq s = ttft_begin_ex(r, &q, T0);
  EXPECT_EQ_INT(TTFT_OK, ttft_stream_end(r, s, TTFT_CANCELLED, T0 + 5000 * MS));
  expect_class(r, c, (want){10, 5, 0, 2});
  play(r, c, g, NULL, 2, 0, TTFT_ERROR, NULL);
  expect_class(r, c, (want){12, 5, 0, 3});
  ttft_registry_free(r);
}

/* A class without a TPOT budget or token deadline has none: no deadline
 * counted, not judged, fluidity 1; a request's own tpot_slo_ns gives it
 * D for that request only. */
TEST(no_deadline_is_not_judged_own_tpot_is) {
  ttft_registry *r = reg_new();
  static const uint64_t g[] = {40, 200};
  ttft_seq_info in;
  play(r, 0, g, NULL, 2, 0, TTFT_COMPLETED, &in);
  EXPECT_EQ_U64(0, in.deadlines);
  EXPECT_EQ_DBL(1.0, in.fluidity);
  expect_class(r, 0, (want){0, 0, 0, 0});
  ttft_request q;
  ttft_request_init(&q);
  q.tpot_slo_ns = 50 * MS;
  ttft_seq s = ttft_begin_ex(r, &q, T0);
  EXPECT_EQ_INT(TTFT_OK, ttft_token_emitted(r, s, 1, T0 + 100 * MS));
  EXPECT_EQ_INT(TTFT_OK, ttft_token_emitted(r, s, 1, T0 + 140 * MS)); /* slack 10 */
  EXPECT_EQ_INT(TTFT_OK, ttft_token_emitted(r, s, 1, T0 + 340 * MS)); /* 200: 3 */
  EXPECT_EQ_INT(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, T0 + 340 * MS));
  expect_class(r, 0, (want){4, 3, 0, 1});
  ttft_registry_free(r);
}

/* Per-request budgets beside class budgets in one registry. Class "chat":
 * TTFT 500 ms, TPOT 50 ms. Four streams, each TTFT 300 ms and TPOT
 * 60 ms (3 tokens, 120 ms decode): (1) class budgets: TPOT missed, bad;
 * (2) own tpot 80 ms: good; (3) own ttft 200 ms and tpot 80: bad (TTFT);
 * (4) own ttft 400 ms: TPOT the class's, bad. SLO_MET 1, JUDGED 4; the
 * class's budget stays 500/50 in the snapshot. */
TEST(per_request_budgets_beside_class_budgets) {
  ttft_registry *r = reg_new();
  ttft_slo s;
  ttft_slo_init(&s);
  s.ttft_ns = 500 * MS;
  s.tpot_ns = 50 * MS;
  int c = ttft_class_add(r, "chat", &s);
  static const uint64_t own[4][2] = {{0, 0}, {0, 80}, {200, 80}, {400, 0}};
  for (int i = 0; i < 4; i++) {
    ttft_request q;
    ttft_request_init(&q);
    q.class_id = c;
    q.ttft_slo_ns = own[i][0] * MS;
    q.tpot_slo_ns = own[i][1] * MS;
    ttft_seq h = ttft_begin_ex(r, &q, T0);
    ttft_seq_info in;
    memset(&in, 0, sizeof in);
    in.struct_size = sizeof in;
    EXPECT_EQ_INT(TTFT_OK, ttft_seq_stats(r, h, &in));
    EXPECT_EQ_U64(own[i][0] ? own[i][0] * MS : 500 * MS, in.ttft_slo_ns);
    EXPECT_EQ_U64(own[i][1] ? own[i][1] * MS : 50 * MS, in.tpot_slo_ns);
    ttft_token_emitted(r, h, 1, T0 + 300 * MS);
    ttft_token_emitted(r, h, 1, T0 + 360 * MS);
    ttft_token_emitted(r, h, 1, T0 + 420 * MS);
    EXPECT_EQ_INT(TTFT_OK, ttft_stream_end(r, h, TTFT_COMPLETED, T0 + 420 * MS));
  }
  ttft_snapshot *sn = ttft_snapshot_take(r);
  EXPECT_EQ_U64(1, ttft_snapshot_class_counter(sn, c, TTFT_COUNTER_SLO_MET));
  EXPECT_EQ_U64(4, ttft_snapshot_class_counter(sn, c, TTFT_COUNTER_SLO_JUDGED));
  /* token deadlines follow each request's TPOT budget: D 50 (two misses
   * of 60 > 50 + 0: 1 each), 80 (met), 80 (met), 50 (two misses) */
  EXPECT_EQ_U64(8, ttft_snapshot_class_counter(sn, c, TTFT_COUNTER_TOKEN_DEADLINES));
  EXPECT_EQ_U64(4, ttft_snapshot_class_counter(sn, c, TTFT_COUNTER_TOKEN_DEADLINES_MISSED));
  EXPECT_EQ_U64(2, ttft_snapshot_class_counter(sn, c, TTFT_COUNTER_FLUID));
  ttft_slo got;
  ttft_slo_init(&got);
  EXPECT_EQ_INT(TTFT_OK, ttft_snapshot_class_slo(sn, c, &got));
  EXPECT_EQ_U64(500 * MS, got.ttft_ns);
  EXPECT_EQ_U64(50 * MS, got.tpot_ns);
  ttft_snapshot_free(sn);
  ttft_registry_free(r);
}

/* Length-aware first-token deadline: 100 ms + 1 ms per prompt token.
 * TTFT 600 ms: a prompt of 500 tokens (deadline 600 ms, the edge) meets
 * it, 499 (599 ms) misses; a prompt given by annotate counts; unknown
 * judges against 100 ms; a request's own 700 ms target replaces the whole
 * deadline (the per-token term does not apply: 499 tokens, met). A
 * cancel before the first token at 550 ms with 400 tokens (500 ms) is
 * judged (missed); with 500 tokens it is not. */
TEST(length_aware_deadline_band_edges) {
  ttft_registry *r = reg_new();
  ttft_slo s;
  ttft_slo_init(&s);
  s.ttft_ns = 100 * MS;
  s.ttft_ns_per_prompt_token = 1 * MS;
  int c = ttft_class_add(r, "long", &s);
  struct {
    uint32_t begin_prompt, annotate_prompt;
    uint64_t own;
    int good;
  } cases[] = {{500, 0, 0, 1}, {499, 0, 0, 0}, {0, 500, 0, 1}, {10, 499, 0, 0},
               {0, 0, 0, 0},   {499, 0, 700, 1}, {0, 0, 700, 1}};
  uint64_t good = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ttft_request q;
    ttft_request_init(&q);
    q.class_id = c;
    q.prompt_tokens = cases[i].begin_prompt;
    q.ttft_slo_ns = cases[i].own * MS;
    ttft_seq h = ttft_begin_ex(r, &q, T0);
    if (cases[i].annotate_prompt)
      EXPECT_EQ_INT(TTFT_OK, ttft_annotate(r, h, cases[i].annotate_prompt, -1));
    ttft_seq_info in;
    memset(&in, 0, sizeof in);
    in.struct_size = sizeof in;
    EXPECT_EQ_INT(TTFT_OK, ttft_seq_stats(r, h, &in));
    uint32_t p = cases[i].annotate_prompt ? cases[i].annotate_prompt : cases[i].begin_prompt;
    EXPECT_EQ_U64(cases[i].own ? cases[i].own * MS : 100 * MS + p * MS, in.ttft_slo_ns);
    ttft_token_emitted(r, h, 1, T0 + 600 * MS);
    EXPECT_EQ_INT(TTFT_OK, ttft_stream_end(r, h, TTFT_COMPLETED, T0 + 600 * MS));
    good += (uint64_t)cases[i].good;
  }
  ttft_snapshot *sn = ttft_snapshot_take(r);
  EXPECT_EQ_U64(good, ttft_snapshot_class_counter(sn, c, TTFT_COUNTER_SLO_MET));
  EXPECT_EQ_U64(7, ttft_snapshot_class_counter(sn, c, TTFT_COUNTER_SLO_JUDGED));
  ttft_snapshot_free(sn);
  static const uint32_t prompts[2] = {400, 500};
  for (int i = 0; i < 2; i++) {
    ttft_request q;
    ttft_request_init(&q);
    q.class_id = c;
    q.prompt_tokens = prompts[i];
    ttft_seq h = ttft_begin_ex(r, &q, T0);
    EXPECT_EQ_INT(TTFT_OK, ttft_stream_end(r, h, TTFT_CANCELLED, T0 + 550 * MS));
  }
  sn = ttft_snapshot_take(r);
  EXPECT_EQ_U64(8, ttft_snapshot_class_counter(sn, c, TTFT_COUNTER_SLO_JUDGED));
  ttft_snapshot_free(sn);
  ttft_registry_free(r);
}

/* ------------------------------------------ merge, delta, codec, formats */
static ttft_snapshot *recorded(ttft_registry **rp, int *cp) {
  ttft_registry *r = reg_new();
  int c = class_dl(r, "chat", 50 * MS, 0);
  static const uint64_t g[] = {40, 40, 200, 40};
  play(r, c, g, NULL, 4, 0, TTFT_COMPLETED, NULL); /* 6 deadlines, 3 missed */
  static const uint64_t g2[] = {10, 10};
  play(r, c, g2, NULL, 2, 0, TTFT_COMPLETED, NULL); /* 2, fluid */
  *rp = r;
  *cp = c;
  return ttft_snapshot_take(r);
}

TEST(merge_delta_codec_carry_the_counters) {
  ttft_registry *r;
  int c;
  ttft_snapshot *a = recorded(&r, &c);
  EXPECT_NOT_NULL(a);
  if (!a) return;
  int err = 0;
  ttft_snapshot *m = ttft_snapshot_merge(a, a, &err);
  EXPECT_EQ_U64(16, ttft_snapshot_class_counter(m, c, TTFT_COUNTER_TOKEN_DEADLINES));
  EXPECT_EQ_U64(6, ttft_snapshot_class_counter(m, c, TTFT_COUNTER_TOKEN_DEADLINES_MISSED));
  EXPECT_EQ_U64(2, ttft_snapshot_class_counter(m, c, TTFT_COUNTER_FLUID));
  EXPECT_EQ_U64(4, ttft_snapshot_class_counter(m, c, TTFT_COUNTER_FLUID_JUDGED));
  static const uint64_t g[] = {120};
  play(r, c, g, NULL, 1, 0, TTFT_COMPLETED, NULL); /* 2 deadlines, 2 missed */
  ttft_snapshot *b = ttft_snapshot_take(r);
  ttft_snapshot *d = ttft_snapshot_delta(b, a, &err);
  EXPECT_EQ_U64(2, ttft_snapshot_class_counter(d, c, TTFT_COUNTER_TOKEN_DEADLINES));
  EXPECT_EQ_U64(2, ttft_snapshot_class_counter(d, c, TTFT_COUNTER_TOKEN_DEADLINES_MISSED));
  EXPECT_EQ_U64(0, ttft_snapshot_class_counter(d, c, TTFT_COUNTER_FLUID));
  EXPECT_EQ_U64(1, ttft_snapshot_class_counter(d, c, TTFT_COUNTER_FLUID_JUDGED));
  long n = ttft_snapshot_encode(b, NULL, 0);
  EXPECT_GT_INT(n, 0);
  void *buf = malloc((size_t)n);
  EXPECT_EQ_INT(n, ttft_snapshot_encode(b, buf, (size_t)n));
  ttft_snapshot *e = ttft_snapshot_decode(buf, (size_t)n, &err);
  EXPECT_NOT_NULL(e);
  for (int k = TTFT_COUNTER_TOKEN_DEADLINES; k <= TTFT_COUNTER_FLUID_JUDGED; k++)
    EXPECT_EQ_U64(ttft_snapshot_class_counter(b, c, (ttft_counter)k),
                  ttft_snapshot_class_counter(e, c, (ttft_counter)k));
  EXPECT_EQ_U64(10, ttft_snapshot_counter(e, TTFT_COUNTER_TOKEN_DEADLINES));
  free(buf);
  ttft_snapshot_free(e);
  ttft_snapshot_free(d);
  ttft_snapshot_free(b);
  ttft_snapshot_free(m);
  ttft_snapshot_free(a);
  ttft_registry_free(r);
}

TEST(every_format_names_the_counters) {
  ttft_registry *r;
  int c;
  ttft_snapshot *a = recorded(&r, &c);
  if (!a) return;
  char *p = render(a, TTFT_FORMAT_PROMETHEUS);
  if (p) {
    EXPECT_CONTAINS(p, "\nllm_token_deadlines_total{class=\"chat\"} 8\n");
    EXPECT_CONTAINS(p, "\nllm_token_deadlines_missed_total{class=\"chat\"} 3\n");
    EXPECT_CONTAINS(p, "\nllm_requests_fluid_total{class=\"chat\"} 1\n");
    EXPECT_CONTAINS(p, "\nllm_requests_fluid_judged_total{class=\"chat\"} 2\n");
    EXPECT_CONTAINS(p, "# TYPE llm_token_deadlines_total counter\n");
  }
  free(p);
  p = render(a, TTFT_FORMAT_OPENMETRICS);
  if (p) {
    EXPECT_CONTAINS(p, "\nllm_token_deadlines_total{class=\"chat\"} 8\n");
    EXPECT_CONTAINS(p, "\nllm_requests_fluid_judged_total{class=\"chat\"} 2\n");
    EXPECT_CONTAINS(p, "# TYPE llm_requests_fluid counter\n");
  }
  free(p);
  long len;
  p = render_len(a, TTFT_FORMAT_PROMETHEUS_PROTOBUF, &len);
  if (p) { /* metric family names are length-prefixed strings */
    int found = 0;
    static const char *const names[] = {"llm_token_deadlines_total", "llm_token_deadlines_missed_total",
                                        "llm_requests_fluid_total", "llm_requests_fluid_judged_total"};
    for (int k = 0; k < 4; k++) {
      size_t nl = strlen(names[k]);
      for (long i = 0; i + (long)nl <= len; i++)
        if (!memcmp(p + i, names[k], nl) && (i + (long)nl == len || p[i + (long)nl] < 0x20)) {
          found++;
          break;
        }
    }
    EXPECT_EQ_INT(4, found);
  }
  free(p);
  p = render(a, TTFT_FORMAT_JSON);
  if (p) {
    EXPECT_CONTAINS(p, "\"token_deadlines\":8");
    EXPECT_CONTAINS(p, "\"token_deadlines_missed\":3");
    EXPECT_CONTAINS(p, "\"fluid\":1");
    EXPECT_CONTAINS(p, "\"fluid_judged\":2");
  }
  free(p);
  p = render(a, TTFT_FORMAT_TEXT);
  if (p) {
    EXPECT_CONTAINS(p, "fluidity");
    EXPECT_CONTAINS(p, "3/8");
    EXPECT_CONTAINS(p, "62.5%");
    EXPECT_CONTAINS(p, "1/2");
  }
  free(p);
  EXPECT_STREQ("token_deadlines", ttft_counter_name(TTFT_COUNTER_TOKEN_DEADLINES));
  EXPECT_STREQ("fluid_judged", ttft_counter_name(TTFT_COUNTER_FLUID_JUDGED));
  ttft_snapshot_free(a);
  ttft_registry_free(r);
}


/* ------------------------------------------ the rule's state, every mode
 * The token path keeps the slack as an anchor (the next token's deadline
 * less D per token) and meets a deadline with a multiply and a compare;
 * past its bounds (D >= 2^47 ns, a clock or slack >= 2^61 ns) it keeps the
 * slack itself, and the general path re-anchors on every emission it
 * takes (registry.h, ttft__slot dl). Streams long enough to cross the
 * counter halving (every 32768 emissions), at clocks and deadlines on
 * both sides of those bounds, mixing met deadlines, misses, multi-token
 * emissions and long runs ahead, must count exactly what the rule,
 * applied here step by step in 128-bit arithmetic, counts. */
typedef struct ref_rule {
  unsigned __int128 slack;
  uint64_t total, missed;
} ref_rule;

static void ref_gap(ref_rule *f, uint64_t d, uint64_t g, uint32_t n) {
  const unsigned __int128 cap = (unsigned __int128)1 << 62;
  if ((unsigned __int128)g <= f->slack + d) {
    f->total++;
    f->slack = f->slack + d - g;
  } else {
    uint64_t m = (uint64_t)((g - f->slack - d) / d) + 1;
    f->missed += m;
    f->total += m;
    f->slack = 0;
  }
  if (f->slack > cap) f->slack = cap;
  f->total += n - 1;
  f->slack += (unsigned __int128)(n - 1) * d;
  if (f->slack > cap) f->slack = cap;
}

static uint64_t lcg(uint64_t *x) {
  *x = *x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
  return *x >> 33;
}

static void modes_case(uint64_t d, uint64_t t0, uint64_t seed, uint32_t emissions) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 4;
  c.max_threads = 2;
  c.stall_threshold_ns = UINT64_C(1) << 62; /* no stalls: the fast path throughout */
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  if (!r) return;
  int cls = class_dl(r, "m", d, 0);
  ttft_request q;
  ttft_request_init(&q);
  q.class_id = cls;
  ttft_seq s = ttft_begin_ex(r, &q, t0);
  uint64_t t = t0 + 1;
  EXPECT_EQ_INT(TTFT_OK, ttft_token_emitted(r, s, 1, t));
  ref_rule f = {0, 0, 0};
  uint64_t x = seed;
  for (uint32_t i = 0; i < emissions; i++) {
    uint64_t k = lcg(&x) % 1000, g;
    uint32_t n = 1;
    if (k < 700) g = d / 2 + lcg(&x) % (d / 2 + 1);      /* met, some slack  */
    else if (k < 900) g = lcg(&x) % (d / 8 + 1);         /* ran ahead        */
    else if (k < 960) g = d + lcg(&x) % (3 * d + 1);     /* a miss, or more  */
    else { g = lcg(&x) % (2 * d + 1); n = 2 + (uint32_t)(lcg(&x) % 5); } /* n tokens */
    if (g > UINT64_MAX - t) break;
    t += g;
    ref_gap(&f, d, g, n);
    if (ttft_token_emitted(r, s, n, t) != TTFT_OK) {
      EXPECT_TRUE(0);
      break;
    }
  }
  ttft_seq_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_EQ_INT(TTFT_OK, ttft_seq_stats(r, s, &info));
  EXPECT_EQ_U64(f.total, info.deadlines);
  EXPECT_EQ_U64(f.missed, info.deadlines_missed);
  ttft_snapshot *a = ttft_snapshot_take(r);
  EXPECT_NOT_NULL(a);
  if (a) {
    EXPECT_EQ_U64(f.total, ttft_snapshot_class_counter(a, cls, TTFT_COUNTER_TOKEN_DEADLINES));
    EXPECT_EQ_U64(f.missed, ttft_snapshot_class_counter(a, cls, TTFT_COUNTER_TOKEN_DEADLINES_MISSED));
    /* every time kept as given (none taken for a wall-clock time) */
    EXPECT_EQ_U64(0, ttft_snapshot_class_counter(a, cls, TTFT_COUNTER_CLOCK_CLAMPED));
    ttft_snapshot_free(a);
  }
  /* a cancel after a long wait counts the deadlines passed since, with
   * the slack the state holds now */
  uint64_t wait = 5 * d + d / 3;
  ref_rule e = f;
  unsigned __int128 passed = wait > e.slack + d ? (wait - e.slack - d) / d + 1 : 0;
  if (wait <= UINT64_MAX - t) {
    EXPECT_EQ_INT(TTFT_OK, ttft_stream_end(r, s, TTFT_CANCELLED, t + wait));
    a = ttft_snapshot_take(r);
    EXPECT_NOT_NULL(a);
    if (a) {
      EXPECT_EQ_U64(f.total + (uint64_t)passed,
                    ttft_snapshot_class_counter(a, cls, TTFT_COUNTER_TOKEN_DEADLINES));
      EXPECT_EQ_U64(f.missed + (uint64_t)passed,
                    ttft_snapshot_class_counter(a, cls, TTFT_COUNTER_TOKEN_DEADLINES_MISSED));
      /* the tokens counter is whole: every token, deadlines or not */
      EXPECT_EQ_U64(info.tokens, ttft_snapshot_class_counter(a, cls, TTFT_COUNTER_TOKENS));
      ttft_snapshot_free(a);
    }
  }
  ttft_registry_free(r);
}

TEST(every_mode_of_the_rule_state_counts_as_the_rule) {
  const uint64_t b47 = UINT64_C(1) << 47, b61 = UINT64_C(1) << 61;
  const uint64_t ds[] = {1000, 50 * MS, b47 - 1, b47, UINT64_C(1) << 50};
  const uint64_t t0s[] = {T0, b61 - 200 * 50 * MS, b61 + 7};
  for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++)
    for (size_t j = 0; j < sizeof t0s / sizeof t0s[0]; j++) {
      /* long streams (across two halvings) where the clock allows them */
      uint32_t em = ds[i] <= 50 * MS ? 70000 : 300;
      modes_case(ds[i], t0s[j], 17 + i * 7 + j, em);
    }
}

/* ---------------------------------------------- the slowest lists (1.3)
 * Each entry carries its stream's token deadlines, misses, fluidity, D
 * and the budgets it was judged against. Class: TTFT 100 ms + 1 ms per
 * prompt token, TPOT 50 ms (D = the request's TPOT budget).
 *  A: prompt 200 (first-token deadline 300 ms), TTFT 400 ms, gaps 120
 *     then ten of 10 ms, D 50: 2 + 10 deadlines, 2 missed (the early
 *     stall), fluidity 10/12;
 *  B: its own targets 700 ms / 80 ms (D 80), TTFT 300 ms, gaps 40 40:
 *     2 deadlines met (slack 40, 80), fluidity 1;
 *  C: no prompt (deadline 100 ms), TTFT 200 ms, a 10 ms gap (slack 40),
 *     then cancelled 300 ms later: floor((300 - 40 - 50) / 50) + 1 = 5
 *     deadlines passed, all missed: 6 deadlines, 5 missed. */
typedef struct slow_case {
  uint32_t prompt;
  uint64_t own_ttft, own_tpot, ttft;
  uint64_t gaps[11];
  size_t k;
  uint64_t tail;
  ttft_status st;
} slow_case;

static const slow_case slow_cases[3] = {
    {200, 0, 0, 400, {120, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10}, 11, 0, TTFT_COMPLETED},
    {0, 700, 80, 300, {40, 40}, 2, 0, TTFT_COMPLETED},
    {0, 0, 0, 200, {10}, 1, 300, TTFT_CANCELLED},
};

static void expect_slow_entries(const ttft_snapshot *s, int c) {
  static const struct {
    uint64_t dl, missed, dl_ns, ttft_slo, tpot_slo;
    double fluidity;
  } w[3] = {{12, 2, 50 * MS, 300 * MS, 50 * MS, 1.0 - 2.0 / 12.0},
            {2, 0, 80 * MS, 700 * MS, 80 * MS, 1.0},
            {6, 5, 50 * MS, 100 * MS, 50 * MS, 1.0 - 5.0 / 6.0}};
  EXPECT_EQ_U64(3, ttft_snapshot_slowest_count(s, c, TTFT_SLOWEST_TTFT));
  for (unsigned i = 0; i < 3; i++) {
    ttft_slow_request o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    EXPECT_EQ_INT(TTFT_OK, ttft_snapshot_slowest(s, c, TTFT_SLOWEST_TTFT, i, &o));
    EXPECT_EQ_U64(slow_cases[i].ttft * MS, o.ttft_ns);
    EXPECT_EQ_U64(w[i].dl, o.deadlines);
    EXPECT_EQ_U64(w[i].missed, o.deadlines_missed);
    EXPECT_EQ_DBL(w[i].fluidity, o.fluidity);
    EXPECT_EQ_U64(w[i].dl_ns, o.token_deadline_ns);
    EXPECT_EQ_U64(w[i].ttft_slo, o.ttft_slo_ns);
    EXPECT_EQ_U64(w[i].tpot_slo, o.tpot_slo_ns);
  }
}

static ttft_snapshot *slow_recorded(ttft_registry **rp, int *cp) {
  ttft_registry *r = *rp = reg_new();
  ttft_slo sl;
  ttft_slo_init(&sl);
  sl.ttft_ns = 100 * MS;
  sl.ttft_ns_per_prompt_token = 1 * MS;
  sl.tpot_ns = 50 * MS;
  int c = *cp = ttft_class_add(r, "chat", &sl);
  for (int i = 0; i < 3; i++) {
    const slow_case *x = &slow_cases[i];
    ttft_request q;
    ttft_request_init(&q);
    q.class_id = c;
    q.prompt_tokens = x->prompt;
    q.ttft_slo_ns = x->own_ttft * MS;
    q.tpot_slo_ns = x->own_tpot * MS;
    ttft_seq h = ttft_begin_ex(r, &q, T0);
    uint64_t t = T0 + x->ttft * MS;
    EXPECT_EQ_INT(TTFT_OK, ttft_token_emitted(r, h, 1, t));
    for (size_t j = 0; j < x->k; j++) {
      t += x->gaps[j] * MS;
      EXPECT_EQ_INT(TTFT_OK, ttft_token_emitted(r, h, 1, t));
    }
    EXPECT_EQ_INT(TTFT_OK, ttft_stream_end(r, h, x->st, t + x->tail * MS));
  }
  return ttft_snapshot_take(r);
}

TEST(slowest_entries_carry_fluidity_and_budgets) {
  ttft_registry *r;
  int c, err = 0;
  ttft_snapshot *a = slow_recorded(&r, &c);
  EXPECT_NOT_NULL(a);
  if (!a) return;
  expect_slow_entries(a, c);
  expect_slow_entries(a, TTFT_CLASS_ALL);
  /* an older caller's struct (up to trace_id) is filled up to its size */
  ttft_slow_request o;
  memset(&o, 0xEE, sizeof o);
  o.struct_size = offsetof(ttft_slow_request, fluidity);
  EXPECT_EQ_INT(TTFT_OK, ttft_snapshot_slowest(a, c, TTFT_SLOWEST_TTFT, 0, &o));
  EXPECT_EQ_U64(UINT64_C(0xEEEEEEEEEEEEEEEE), o.deadlines);
  /* through the encoding, a merge and a delta (the window after an
   * empty first snapshot of a second registry keeps all three) */
  long n = ttft_snapshot_encode(a, NULL, 0);
  void *buf = n > 0 ? malloc((size_t)n) : NULL;
  EXPECT_EQ_INT(n, ttft_snapshot_encode(a, buf, (size_t)n));
  ttft_snapshot *e = ttft_snapshot_decode(buf, (size_t)n, &err);
  EXPECT_NOT_NULL(e);
  if (e) expect_slow_entries(e, c);
  ttft_snapshot *m = ttft_snapshot_merge(a, e, &err);
  EXPECT_NOT_NULL(m);
  if (m) EXPECT_EQ_U64(6, ttft_snapshot_slowest_count(m, c, TTFT_SLOWEST_TTFT));
  ttft_slow_request x;
  memset(&x, 0, sizeof x);
  x.struct_size = sizeof x;
  EXPECT_EQ_INT(TTFT_OK, ttft_snapshot_slowest(m, c, TTFT_SLOWEST_TTFT, 5, &x));
  EXPECT_EQ_U64(5, x.deadlines_missed);
  EXPECT_EQ_U64(100 * MS, x.ttft_slo_ns);
  free(buf);
  /* a delta lists what ended in its window, with its fields: one more
   * stream, own TPOT 20 ms (D 20), TTFT 500 ms, gaps 30 10: the first
   * misses floor((30 - 20) / 20) + 1 = 1, the second meets: 2, 1 missed */
  {
    ttft_request q;
    ttft_request_init(&q);
    q.class_id = c;
    q.tpot_slo_ns = 20 * MS;
    ttft_seq h = ttft_begin_ex(r, &q, T0 + 1000 * MS);
    EXPECT_EQ_INT(TTFT_OK, ttft_token_emitted(r, h, 1, T0 + 1500 * MS));
    EXPECT_EQ_INT(TTFT_OK, ttft_token_emitted(r, h, 1, T0 + 1530 * MS));
    EXPECT_EQ_INT(TTFT_OK, ttft_token_emitted(r, h, 1, T0 + 1540 * MS));
    EXPECT_EQ_INT(TTFT_OK, ttft_stream_end(r, h, TTFT_COMPLETED, T0 + 1540 * MS));
  }
  ttft_snapshot *b = ttft_snapshot_take(r);
  ttft_snapshot *d = b ? ttft_snapshot_delta(b, a, &err) : NULL;
  EXPECT_NOT_NULL(d);
  EXPECT_EQ_U64(1, ttft_snapshot_slowest_count(d, c, TTFT_SLOWEST_TTFT));
  memset(&x, 0, sizeof x);
  x.struct_size = sizeof x;
  EXPECT_EQ_INT(TTFT_OK, ttft_snapshot_slowest(d, c, TTFT_SLOWEST_TTFT, 0, &x));
  EXPECT_EQ_U64(2, x.deadlines);
  EXPECT_EQ_U64(1, x.deadlines_missed);
  EXPECT_EQ_DBL(0.5, x.fluidity);
  EXPECT_EQ_U64(20 * MS, x.token_deadline_ns);
  EXPECT_EQ_U64(100 * MS, x.ttft_slo_ns); /* no prompt: the class's 100 ms */
  EXPECT_EQ_U64(20 * MS, x.tpot_slo_ns);
  ttft_snapshot_free(d);
  ttft_snapshot_free(b);
  /* the text report and JSON show each entry's fluidity and budgets */
  char *p = render(a, TTFT_FORMAT_TEXT);
  if (p) {
    EXPECT_CONTAINS(p, "2/12 83.3%");
    EXPECT_CONTAINS(p, "5/6 16.7%");
    EXPECT_CONTAINS(p, "judged against ttft 300 ms, tpot 50.0 ms, token deadline 50.0 ms\n");
    EXPECT_CONTAINS(p, "judged against ttft 700 ms, tpot 80.0 ms, token deadline 80.0 ms\n");
    /* the class row: 7 of 20 deadlines missed (65.0 %), 1 of 3 judged
     * fluid (C is judged: cancelled after a miss), fluid_min 0.90 */
    EXPECT_CONTAINS(p, "7/20");
    EXPECT_CONTAINS(p, "65.0%");
    EXPECT_CONTAINS(p, "1/3");
    EXPECT_CONTAINS(p, "33.3%");
    EXPECT_CONTAINS(p, "0.90\n");
  }
  free(p);
  p = render(a, TTFT_FORMAT_JSON);
  if (p) {
    EXPECT_CONTAINS(p, "\"deadlines\":12,\"deadlines_missed\":2,\"fluidity\":0.83333333333333337,"
                       "\"token_deadline_ns\":50000000,\"ttft_slo_ns\":300000000,\"tpot_slo_ns\":50000000}");
    EXPECT_CONTAINS(p, "\"fluidity\":{\"deadlines\":20,\"deadlines_missed\":7,\"fluidity\":0.65000000000000002,"
                       "\"judged\":3,\"fluid\":1,\"attainment\":0.33333333333333331}");
    EXPECT_CONTAINS(p, "\"ttft_ns_per_prompt_token\":1000000,\"token_deadline_ns\":0,\"fluid_min\":0.90000000000000002}");
  }
  free(p);
  ttft_snapshot_free(m);
  ttft_snapshot_free(e);
  ttft_snapshot_free(a);
  ttft_registry_free(r);
}

TU_MAIN()
