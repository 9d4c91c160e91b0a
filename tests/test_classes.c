/* test_classes.c — classes and their SLO verdicts, per-class queries,
 * attainment, TTFT splits by prefix-cache hit and prompt band, per-class
 * stall budgets. Public API only, caller timestamps (start at T0 = 1000,
 * since t_ns == 0 means "now"). */
#include <stdlib.h>

#include "ttft.h"
#include "task.h"

#define T0 UINT64_C(1000)
#define US UINT64_C(1000)
#define MS UINT64_C(1000000)

static ttft_registry *reg_new(const ttft_config *cfg) {
  ttft_registry *r = ttft_registry_new(cfg);
  EXPECT_NOT_NULL(r);
  if (!r) {
    fprintf(stderr, "cannot create a registry; giving up\n");
    TU_DONE();
    exit(1);
  }
  return r;
}

static ttft_seq begin_req(ttft_registry *r, int cls, uint32_t prompt, int prefix, uint64_t t) {
  ttft_request q;
  ttft_request_init(&q);
  q.class_id = cls;
  q.prompt_tokens = prompt;
  q.prefix_hit = prefix;
  ttft_seq s = ttft_begin_ex(r, &q, t);
  EXPECT_TRUE(s != 0);
  return s;
}

/* One stream of class cls: first token at T0 + ttft, then (n - 1) more
 * single-token emissions spaced so TPOT = tpot exactly, end at T0 + e2e. */
static void stream(ttft_registry *r, int cls, uint64_t ttft, uint32_t n, uint64_t tpot,
                   uint64_t e2e, ttft_status st) {
  ttft_seq s = begin_req(r, cls, 0, -1, T0);
  uint64_t t = T0 + ttft;
  for (uint32_t i = 0; i < n; i++, t += tpot)
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, st, T0 + e2e));
}

/* -------------------------------------------------------------------- */

/* The registry of the class tests below: max_classes 3, so "default",
 * "chat" (a 100 ms TTFT budget) and the longest name allowed (63 bytes,
 * every allowed sign; LONG_NAME) fill it. */
static const char LONG_NAME[] = "Az09_.:-" "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
_Static_assert(sizeof LONG_NAME == 64, "63 bytes and the NUL");

static ttft_registry *three_classes(void) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_classes = 3;
  c.max_threads = 1;
  ttft_registry *r = reg_new(&c);
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.ttft_ns = 100 * MS;
  EXPECT_EQ_INT(1, ttft_class_add(r, "chat", &slo));
  EXPECT_EQ_INT(2, ttft_class_add(r, LONG_NAME, NULL));
  return r;
}

/* class_add / class_find: ids, name rules, EEXIST, EFULL */
TEST(class_add_and_find) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_classes = 3;
  c.max_threads = 1;
  ttft_registry *r = reg_new(&c);
  ttft_slo slo;
  ttft_slo_init(&slo);
  EXPECT_EQ_U64(sizeof slo, slo.struct_size);
  EXPECT_EQ_U64(0, slo.ttft_ns);
  slo.ttft_ns = 100 * MS;

  EXPECT_EQ_INT(0, ttft_class_find(r, "default"));
  EXPECT_EQ_INT(1, ttft_class_add(r, "chat", &slo));
  EXPECT_ERR(TTFT_EEXIST, ttft_class_add(r, "chat", NULL));
  EXPECT_ERR(TTFT_EEXIST, ttft_class_add(r, "default", NULL));
  /* names: 1..63 bytes of [A-Za-z0-9_.:-] */
  EXPECT_ERR(TTFT_EINVAL, ttft_class_add(r, "", NULL));
  EXPECT_ERR(TTFT_EINVAL, ttft_class_add(r, NULL, NULL));
  EXPECT_ERR(TTFT_EINVAL, ttft_class_add(r, "has space", NULL));
  EXPECT_ERR(TTFT_EINVAL, ttft_class_add(r, "a/b", NULL));
  EXPECT_ERR(TTFT_EINVAL, ttft_class_add(r, "quote\"", NULL));
  EXPECT_ERR(TTFT_EINVAL, ttft_class_add(r, "caf\xC3\xA9", NULL));
  EXPECT_ERR(TTFT_EINVAL, ttft_class_add(r, "new\nline", NULL));
  char name[80];
  memset(name, 'x', 64);
  name[64] = '\0';
  EXPECT_ERR(TTFT_EINVAL, ttft_class_add(r, name, NULL)); /* 64 bytes: too long */
  EXPECT_ERR(TTFT_EINVAL, ttft_class_add(NULL, "ok", NULL));
  ttft_slo bad = slo;
  bad.struct_size = 0;
  EXPECT_ERR(TTFT_EINVAL, ttft_class_add(r, "ok", &bad));
  bad.struct_size = sizeof bad + 16;
  EXPECT_ERR(TTFT_EINVAL, ttft_class_add(r, "ok", &bad));
  EXPECT_EQ_INT(2, ttft_class_add(r, LONG_NAME, NULL)); /* 63 bytes: the longest allowed */
  EXPECT_ERR(TTFT_EFULL, ttft_class_add(r, "batch", NULL)); /* max_classes = 3 */
  EXPECT_EQ_INT(1, ttft_class_find(r, "chat"));
  EXPECT_EQ_INT(2, ttft_class_find(r, LONG_NAME));
  EXPECT_ERR(TTFT_ESTALE, ttft_class_find(r, "batch"));
  EXPECT_ERR(TTFT_ESTALE, ttft_class_find(r, "Chat"));
  EXPECT_ERR(TTFT_EINVAL, ttft_class_find(r, NULL));
  EXPECT_ERR(TTFT_EINVAL, ttft_class_find(NULL, "chat"));
  ttft_registry_free(r);
}

/* begin_ex refuses unknown classes and bad requests without counting */
TEST(begin_ex_refuses_bad_requests) {
  ttft_registry *r = three_classes();
  ttft_request q;
  ttft_request_init(&q);
  EXPECT_EQ_U64(sizeof q, q.struct_size);
  EXPECT_EQ_INT(-1, q.prefix_hit);
  EXPECT_EQ_INT(0, q.class_id);
  q.class_id = 3;
  EXPECT_EQ_U64(0, ttft_begin_ex(r, &q, T0));
  q.class_id = -1;
  EXPECT_EQ_U64(0, ttft_begin_ex(r, &q, T0));
  q.class_id = 1;
  q.struct_size = 0;
  EXPECT_EQ_U64(0, ttft_begin_ex(r, &q, T0));
  ttft_seq s = ttft_begin_ex(r, NULL, T0); /* NULL req = defaults */
  EXPECT_TRUE(s != 0);
  ttft_seq_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(r, s, &info));
  EXPECT_EQ_INT(0, info.class_id);
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, T0 + 1));
  s = begin_req(r, 2, 0, -1, T0);
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(r, s, &info));
  EXPECT_EQ_INT(2, info.class_id);
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, T0 + 1));

  ttft_snapshot *snap = ttft_snapshot_take(r);
  EXPECT_EQ_U64(2, ttft_snapshot_counter(snap, TTFT_COUNTER_BEGUN));
  EXPECT_EQ_U64(0, ttft_snapshot_counter(snap, TTFT_COUNTER_DROPPED));
  ttft_snapshot_free(snap);
  ttft_registry_free(r);
}

/* a snapshot's class queries: names, SLOs, per-class counters, attainment
 * (one completed stream in "default" and one in class 2) */
TEST(snapshot_class_queries) {
  ttft_registry *r = three_classes();
  stream(r, 0, 0, 0, 0, 1, TTFT_COMPLETED);
  stream(r, 2, 0, 0, 0, 1, TTFT_COMPLETED);
  ttft_snapshot *snap = ttft_snapshot_take(r);
  EXPECT_EQ_INT(3, ttft_snapshot_classes(snap));
  EXPECT_STREQ("default", ttft_snapshot_class_name(snap, 0));
  EXPECT_STREQ("chat", ttft_snapshot_class_name(snap, 1));
  EXPECT_STREQ(LONG_NAME, ttft_snapshot_class_name(snap, 2));
  EXPECT_NULL(ttft_snapshot_class_name(snap, 3));
  EXPECT_NULL(ttft_snapshot_class_name(snap, -1));
  ttft_slo got;
  got.struct_size = sizeof got;
  EXPECT_ERR(TTFT_OK, ttft_snapshot_class_slo(snap, 1, &got));
  EXPECT_EQ_U64(100 * MS, got.ttft_ns);
  EXPECT_EQ_U64(0, got.tpot_ns);
  EXPECT_EQ_U64(0, got.e2e_ns);
  EXPECT_EQ_U64(500 * MS, got.stall_threshold_ns); /* resolved to the registry default */
  EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_class_slo(snap, 3, &got));
  EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_class_slo(snap, 0, NULL));
  EXPECT_EQ_U64(1, ttft_snapshot_class_counter(snap, 2, TTFT_COUNTER_COMPLETED));
  EXPECT_EQ_U64(1, ttft_snapshot_class_counter(snap, 0, TTFT_COUNTER_COMPLETED));
  EXPECT_EQ_U64(0, ttft_snapshot_class_counter(snap, 1, TTFT_COUNTER_COMPLETED));
  EXPECT_EQ_U64(0, ttft_snapshot_class_counter(snap, 3, TTFT_COUNTER_COMPLETED));
  EXPECT_EQ_U64(2, ttft_snapshot_class_counter(snap, TTFT_CLASS_ALL, TTFT_COUNTER_COMPLETED));
  EXPECT_EQ_DBL(-1.0, ttft_snapshot_attainment(snap, 1)); /* nothing ended */
  EXPECT_EQ_DBL(-1.0, ttft_snapshot_attainment(snap, 7));
  EXPECT_EQ_DBL(-1.0, ttft_snapshot_attainment(NULL, 0));
  EXPECT_EQ_DBL(1.0, ttft_snapshot_attainment(snap, 2));
  ttft_snapshot_free(snap);
  ttft_registry_free(r);
}

/* The SLO workload: "chat" (TTFT 10 ms, TPOT 2 ms, E2E 100 ms) with 9
 * streams of which 3 are good, "batch" (no budgets) with 4, 2 of them
 * completed, and one completed stream in "default". Returns the registry;
 * *chat_id and *batch_id get the class ids. */
static ttft_registry *slo_workload(int *chat_id, int *batch_id) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_threads = 1;
  ttft_registry *r = reg_new(&c);
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.ttft_ns = 10 * MS;
  slo.tpot_ns = 2 * MS;
  slo.e2e_ns = 100 * MS;
  int chat = ttft_class_add(r, "chat", &slo);
  int batch = ttft_class_add(r, "batch", NULL); /* no budgets */
  EXPECT_EQ_INT(1, chat);
  EXPECT_EQ_INT(2, batch);

  /* chat: 9 streams, 3 good */
  stream(r, chat, 5 * MS, 11, 1 * MS, 50 * MS, TTFT_COMPLETED);   /* good                  */
  stream(r, chat, 10 * MS, 11, 2 * MS, 100 * MS, TTFT_COMPLETED); /* good: every budget == */
  stream(r, chat, 6 * MS, 1, 0, 7 * MS, TTFT_COMPLETED);          /* good: no TPOT exists  */
  stream(r, chat, 10 * MS + 1, 5, 1 * MS, 50 * MS, TTFT_COMPLETED); /* TTFT over           */
  stream(r, chat, 5 * MS, 5, 2 * MS + 1, 50 * MS, TTFT_COMPLETED);  /* TPOT over           */
  stream(r, chat, 5 * MS, 5, 1 * MS, 100 * MS + 1, TTFT_COMPLETED); /* E2E over            */
  stream(r, chat, 5 * MS, 5, 1 * MS, 50 * MS, TTFT_CANCELLED);      /* in time: not judged */
  stream(r, chat, 5 * MS, 5, 1 * MS, 50 * MS, TTFT_ERROR);          /* never good          */
  stream(r, chat, 0, 0, 0, 200 * MS, TTFT_CANCELLED);               /* abandoned after the
                                                                       TTFT budget: bad     */
  /* batch: completed = good whatever the numbers; error bad; cancelled
   * never judged (no budget to miss) */
  stream(r, batch, 30 * 1000 * MS, 3, 900 * MS, 40 * 1000 * MS, TTFT_COMPLETED);
  stream(r, batch, 2 * MS, 1, 0, 3 * MS, TTFT_COMPLETED);
  stream(r, batch, 2 * MS, 2, 1 * MS, 3 * MS, TTFT_CANCELLED);
  stream(r, batch, 2 * MS, 2, 1 * MS, 3 * MS, TTFT_ERROR);
  /* default: one completed stream */
  stream(r, 0, 1 * MS, 2, 1 * MS, 4 * MS, TTFT_COMPLETED);
  *chat_id = chat;
  *batch_id = batch;
  return r;
}

/* SLO verdicts: which streams are good, per class and in all, attainment */
TEST(slo_verdicts) {
  int chat, batch;
  ttft_registry *r = slo_workload(&chat, &batch);
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(3, ttft_snapshot_class_counter(s, chat, TTFT_COUNTER_SLO_MET));
  EXPECT_EQ_U64(6, ttft_snapshot_class_counter(s, chat, TTFT_COUNTER_COMPLETED));
  EXPECT_EQ_U64(2, ttft_snapshot_class_counter(s, chat, TTFT_COUNTER_CANCELLED));
  EXPECT_EQ_U64(1, ttft_snapshot_class_counter(s, chat, TTFT_COUNTER_ERRORS));
  EXPECT_EQ_U64(1, ttft_snapshot_class_counter(s, chat, TTFT_COUNTER_ABANDONED));
  EXPECT_EQ_U64(9, ttft_snapshot_class_counter(s, chat, TTFT_COUNTER_BEGUN));
  EXPECT_EQ_U64(2, ttft_snapshot_class_counter(s, chat, TTFT_COUNTER_NO_TPOT));
  EXPECT_EQ_U64(11 + 11 + 1 + 5 * 5, ttft_snapshot_class_counter(s, chat, TTFT_COUNTER_TOKENS));
  /* judged: 6 completed, the error, the abandoned one (past its TTFT
   * budget); not the one cancelled within every budget */
  EXPECT_EQ_U64(8, ttft_snapshot_class_counter(s, chat, TTFT_COUNTER_SLO_JUDGED));
  EXPECT_NEAR_REL(3.0 / 8.0, ttft_snapshot_attainment(s, chat), 1e-12);

  EXPECT_EQ_U64(2, ttft_snapshot_class_counter(s, batch, TTFT_COUNTER_SLO_MET));
  EXPECT_EQ_U64(3, ttft_snapshot_class_counter(s, batch, TTFT_COUNTER_SLO_JUDGED));
  EXPECT_NEAR_REL(2.0 / 3.0, ttft_snapshot_attainment(s, batch), 1e-12);
  EXPECT_EQ_U64(1, ttft_snapshot_class_counter(s, 0, TTFT_COUNTER_SLO_MET));
  EXPECT_EQ_DBL(1.0, ttft_snapshot_attainment(s, 0));

  /* totals: TTFT_CLASS_ALL and the class-less queries agree with the sums */
  EXPECT_EQ_U64(6, ttft_snapshot_class_counter(s, TTFT_CLASS_ALL, TTFT_COUNTER_SLO_MET));
  EXPECT_EQ_U64(6, ttft_snapshot_counter(s, TTFT_COUNTER_SLO_MET));
  EXPECT_EQ_U64(14, ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN));
  EXPECT_EQ_U64(12, ttft_snapshot_counter(s, TTFT_COUNTER_SLO_JUDGED));
  EXPECT_NEAR_REL(6.0 / 12.0, ttft_snapshot_attainment(s, TTFT_CLASS_ALL), 1e-12);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* Cancellations: judged (and bad) only when a budget was already missed
 * when the client left; the budget edges are inclusive as for completed
 * streams. Budgets: TTFT 10 ms, TPOT 2 ms, E2E 100 ms. */
TEST(slo_judged_cancellations) {
  int chat, batch;
  ttft_registry *r = slo_workload(&chat, &batch);
  ttft_snapshot *before = ttft_snapshot_take(r);
  uint64_t j0 = ttft_snapshot_class_counter(before, chat, TTFT_COUNTER_SLO_JUDGED);
  uint64_t m0 = ttft_snapshot_class_counter(before, chat, TTFT_COUNTER_SLO_MET);
  ttft_snapshot_free(before);
  static const struct {
    uint64_t ttft;
    uint32_t n;
    uint64_t tpot, e2e;
    int judged;
    const char *what;
  } c[] = {
      {0, 0, 0, 3 * MS, 0, "no token yet, cancelled at 3 ms (TTFT budget 10 ms not reached)"},
      {0, 0, 0, 10 * MS, 0, "no token, cancelled exactly at the TTFT budget"},
      {0, 0, 0, 10 * MS + 1, 1, "no token by the TTFT budget"},
      {10 * MS + 1, 3, 1 * MS, 20 * MS, 1, "first token late, then cancelled"},
      {5 * MS, 1, 0, 60 * MS, 0, "one token on time, cancelled (no TPOT yet)"},
      {5 * MS, 4, 2 * MS, 30 * MS, 0, "TPOT so far exactly the budget"},
      {5 * MS, 4, 2 * MS + 1, 30 * MS, 1, "TPOT so far over the budget"},
      {5 * MS, 4, 1 * MS, 100 * MS, 0, "cancelled exactly at the E2E budget"},
      {5 * MS, 4, 1 * MS, 100 * MS + 1, 1, "cancelled past the E2E budget"},
  };
  uint64_t want = j0;
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    stream(r, chat, c[i].ttft, c[i].n, c[i].tpot, c[i].e2e, TTFT_CANCELLED);
    want += (uint64_t)c[i].judged;
    ttft_snapshot *s = ttft_snapshot_take(r);
    uint64_t got = ttft_snapshot_class_counter(s, chat, TTFT_COUNTER_SLO_JUDGED);
    if (got != want) fprintf(stderr, "   case %zu (%s)\n", i, c[i].what);
    EXPECT_EQ_U64(want, got);
    EXPECT_EQ_U64(m0, ttft_snapshot_class_counter(s, chat, TTFT_COUNTER_SLO_MET)); /* never good */
    ttft_snapshot_free(s);
  }
  /* a class without budgets judges no cancellation, however late */
  ttft_snapshot *s = ttft_snapshot_take(r);
  uint64_t jb = ttft_snapshot_class_counter(s, batch, TTFT_COUNTER_SLO_JUDGED);
  ttft_snapshot_free(s);
  stream(r, batch, 0, 0, 0, 3600 * 1000 * MS, TTFT_CANCELLED);
  stream(r, batch, 50 * 1000 * MS, 3, 10 * 1000 * MS, 3600 * 1000 * MS, TTFT_CANCELLED);
  s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(jb, ttft_snapshot_class_counter(s, batch, TTFT_COUNTER_SLO_JUDGED));
  /* attainment = good / judged: 3 good of 8 + 4 judged in chat */
  EXPECT_NEAR_REL(3.0 / 12.0, ttft_snapshot_attainment(s, chat), 1e-12);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* every counter and metric: the sum over classes equals TTFT_CLASS_ALL and
 * the class-less queries */
TEST(class_sums_equal_totals) {
  int chat, batch;
  ttft_registry *r = slo_workload(&chat, &batch);
  ttft_snapshot *s = ttft_snapshot_take(r);
  for (int k = 0; k < TTFT_COUNTER_COUNT_; k++) {
    uint64_t sum = 0;
    for (int cl = 0; cl < 3; cl++) sum += ttft_snapshot_class_counter(s, cl, (ttft_counter)k);
    EXPECT_EQ_U64(sum, ttft_snapshot_counter(s, (ttft_counter)k));
    EXPECT_EQ_U64(sum, ttft_snapshot_class_counter(s, TTFT_CLASS_ALL, (ttft_counter)k));
  }
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
    uint64_t n = 0, sum = 0;
    for (int cl = 0; cl < 3; cl++) {
      n += ttft_snapshot_class_count(s, cl, (ttft_metric)m);
      sum += ttft_snapshot_class_sum(s, cl, (ttft_metric)m);
    }
    EXPECT_EQ_U64(n, ttft_snapshot_count(s, (ttft_metric)m));
    EXPECT_EQ_U64(sum, ttft_snapshot_sum(s, (ttft_metric)m));
    EXPECT_EQ_U64(n, ttft_snapshot_class_count(s, TTFT_CLASS_ALL, (ttft_metric)m));
    EXPECT_EQ_U64(ttft_snapshot_quantile(s, (ttft_metric)m, 0.9),
                  ttft_snapshot_class_quantile(s, TTFT_CLASS_ALL, (ttft_metric)m, 0.9));
  }
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* per-class counts, quantiles, sums and means; invalid per-class queries */
TEST(class_quantiles) {
  int chat, batch;
  ttft_registry *r = slo_workload(&chat, &batch);
  ttft_snapshot *s = ttft_snapshot_take(r);
  /* chat TTFT is {5,10,6,10+1ns,5,5,5,5} ms */
  EXPECT_EQ_U64(8, ttft_snapshot_class_count(s, chat, TTFT_METRIC_TTFT));
  EXPECT_EQ_U64(5 * MS, ttft_snapshot_class_quantile(s, chat, TTFT_METRIC_TTFT, 0.0));
  EXPECT_NEAR_REL(5 * MS, ttft_snapshot_class_quantile(s, chat, TTFT_METRIC_TTFT, 0.5), 0.005);
  EXPECT_EQ_U64(10 * MS + 1, ttft_snapshot_class_quantile(s, chat, TTFT_METRIC_TTFT, 1.0));
  EXPECT_EQ_U64(51 * MS + 1, ttft_snapshot_class_sum(s, chat, TTFT_METRIC_TTFT));
  EXPECT_NEAR_REL((51.0e6 + 1) / 8, ttft_snapshot_class_mean(s, chat, TTFT_METRIC_TTFT), 1e-15);
  /* chat TPOT: {1, 2, -, 1, 2ms+1, 1, 1, 1} ms */
  EXPECT_EQ_U64(7, ttft_snapshot_class_count(s, chat, TTFT_METRIC_TPOT));
  EXPECT_EQ_U64(1 * MS, ttft_snapshot_class_quantile(s, chat, TTFT_METRIC_TPOT, 0.0));
  EXPECT_EQ_U64(2 * MS + 1, ttft_snapshot_class_quantile(s, chat, TTFT_METRIC_TPOT, 1.0));
  EXPECT_EQ_U64(1, ttft_snapshot_class_count(s, chat, TTFT_METRIC_ABANDONED_WAIT));
  EXPECT_EQ_U64(200 * MS, ttft_snapshot_class_quantile(s, chat, TTFT_METRIC_ABANDONED_WAIT, 0.5));
  /* batch TTFT is {30 s, 2, 2, 2} ms; its TPOT {900 ms, 1 ms, 1 ms} */
  EXPECT_EQ_U64(30 * 1000 * MS, ttft_snapshot_class_quantile(s, batch, TTFT_METRIC_TTFT, 1.0));
  EXPECT_NEAR_REL(2 * MS, ttft_snapshot_class_quantile(s, batch, TTFT_METRIC_TTFT, 0.75), 0.005);
  EXPECT_EQ_U64(900 * MS, ttft_snapshot_class_quantile(s, batch, TTFT_METRIC_TPOT, 1.0));
  EXPECT_EQ_U64(3, ttft_snapshot_class_count(s, batch, TTFT_METRIC_TPOT));
  EXPECT_EQ_U64(40 * 1000 * MS, ttft_snapshot_class_quantile(s, batch, TTFT_METRIC_E2E, 1.0));
  EXPECT_EQ_U64(1, ttft_snapshot_class_count(s, 0, TTFT_METRIC_TTFT));
  EXPECT_EQ_U64(1 * MS, ttft_snapshot_class_quantile(s, 0, TTFT_METRIC_TTFT, 0.5));
  /* invalid per-class queries */
  EXPECT_EQ_U64(0, ttft_snapshot_class_count(s, 3, TTFT_METRIC_TTFT));
  EXPECT_EQ_U64(0, ttft_snapshot_class_count(s, -2, TTFT_METRIC_TTFT));
  EXPECT_EQ_U64(0, ttft_snapshot_class_quantile(s, chat, TTFT_METRIC_TTFT, 1.5));
  EXPECT_EQ_U64(0, ttft_snapshot_class_quantile(s, chat, (ttft_metric)99, 0.5));
  EXPECT_EQ_U64(0, ttft_snapshot_class_counter(s, chat, (ttft_counter)99));
  EXPECT_EQ_DBL(0.0, ttft_snapshot_class_mean(s, 3, TTFT_METRIC_TTFT));
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* a completed stream without tokens against a TTFT budget */
TEST(completed_without_tokens) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_threads = 1;
  ttft_registry *r = reg_new(&c);
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.ttft_ns = 10 * MS;
  int cl = ttft_class_add(r, "tool", &slo);
  EXPECT_EQ_INT(1, cl);
  stream(r, cl, 0, 0, 0, 5 * MS, TTFT_COMPLETED);  /* empty answer in time: good */
  stream(r, cl, 0, 0, 0, 50 * MS, TTFT_COMPLETED); /* empty answer late: not    */
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(1, ttft_snapshot_class_counter(s, cl, TTFT_COUNTER_SLO_MET));
  EXPECT_EQ_U64(0, ttft_snapshot_class_counter(s, cl, TTFT_COUNTER_ABANDONED));
  EXPECT_EQ_U64(2, ttft_snapshot_class_count(s, cl, TTFT_METRIC_OUTPUT_TOKENS));
  EXPECT_EQ_U64(0, ttft_snapshot_class_quantile(s, cl, TTFT_METRIC_OUTPUT_TOKENS, 1.0));
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* The split workload (default band edges): 15 streams with prompts at
 * each edge of the 7 bands, one with the prompt unknown, then the prefix
 * cache: 1 hit (TTFT 1 ms), 2 misses (9 ms; 12 ms with a prompt of 300,
 * band 1 too), one more hit (2 ms). What each band got is in *bands. */
typedef struct band_tally {
  uint64_t n[7], min[7], max[7];
} band_tally;

static const uint32_t DEFAULT_EDGES[6] = {128, 512, 2048, 8192, 32768, 131072};

static ttft_registry *split_workload(band_tally *bands) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_threads = 1;
  EXPECT_EQ_U64(6, c.n_prompt_bands);
  for (int i = 0; i < 6; i++) EXPECT_EQ_U64(DEFAULT_EDGES[i], c.prompt_band_edges[i]);
  ttft_registry *r = reg_new(&c);
  int chat = ttft_class_add(r, "chat", NULL);

  /* prompt lengths at each edge; TTFT = 1 ms * (band + 1) + prompt ns so
   * each observation is distinct */
  static const struct {
    uint32_t prompt;
    unsigned band;
  } cases[] = {{1, 0},         {127, 0},    {128, 1},          {511, 1},     {512, 2},
               {2047, 2},      {2048, 3},   {8191, 3},         {8192, 4},    {32767, 4},
               {32768, 5},     {131071, 5}, {131072, 6},       {1000000, 6}, {UINT32_MAX, 6}};
  memset(bands, 0, sizeof *bands);
  for (int b = 0; b < 7; b++) bands->min[b] = UINT64_MAX;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint64_t ttft = MS * (cases[i].band + 1) + (cases[i].prompt % 1000);
    ttft_seq q = begin_req(r, (int)(i % 2) ? chat : 0, cases[i].prompt, -1, T0);
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, T0 + ttft));
    EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, T0 + ttft));
    unsigned b = cases[i].band;
    bands->n[b]++;
    if (ttft > bands->max[b]) bands->max[b] = ttft;
    if (ttft < bands->min[b]) bands->min[b] = ttft;
  }
  /* prompt unknown (0): no band */
  ttft_seq q = begin_req(r, 0, 0, -1, T0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, T0 + 77 * MS));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, T0 + 77 * MS));
  /* prefix cache: 1 hit (TTFT 1 ms), 2 misses (9 ms, 12 ms), one unknown */
  q = begin_req(r, chat, 0, 1, T0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, T0 + 1 * MS));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, T0 + 1 * MS));
  q = begin_req(r, 0, 0, 0, T0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, T0 + 9 * MS));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, T0 + 9 * MS));
  q = begin_req(r, chat, 300, 0, T0); /* a miss with a prompt: band 1 too */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, T0 + 12 * MS));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, T0 + 12 * MS));
  bands->n[1]++;
  bands->max[1] = 12 * MS;
  q = begin_req(r, chat, 0, 1, T0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, T0 + 2 * MS));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, T0 + 2 * MS));
  return r;
}

/* TTFT split by prompt band (default edges): each band's bounds, count,
 * min and max; out-of-range band and split queries */
TEST(prompt_band_split) {
  band_tally bands;
  ttft_registry *r = split_workload(&bands);
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(7, ttft_snapshot_bands(s));
  for (unsigned b = 0; b < 7; b++) {
    uint32_t lo = 1, hi = 1;
    EXPECT_ERR(TTFT_OK, ttft_snapshot_band(s, b, &lo, &hi));
    EXPECT_EQ_U64(b ? DEFAULT_EDGES[b - 1] : 0, lo);
    EXPECT_EQ_U64(b < 6 ? DEFAULT_EDGES[b] : UINT32_MAX, hi);
    EXPECT_EQ_U64(bands.n[b], ttft_snapshot_split_count(s, TTFT_SPLIT_PROMPT_BAND, b));
    EXPECT_EQ_U64(bands.min[b], ttft_snapshot_split_quantile(s, TTFT_SPLIT_PROMPT_BAND, b, 0.0));
    EXPECT_EQ_U64(bands.max[b], ttft_snapshot_split_quantile(s, TTFT_SPLIT_PROMPT_BAND, b, 1.0));
  }
  uint32_t lo, hi;
  EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_band(s, 7, &lo, &hi));
  EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_band(s, 0, NULL, &hi));
  EXPECT_EQ_U64(0, ttft_snapshot_split_count(s, TTFT_SPLIT_PROMPT_BAND, 7));
  EXPECT_EQ_U64(0, ttft_snapshot_split_count(s, (ttft_split)5, 0));
  EXPECT_EQ_U64(0, ttft_snapshot_split_count(NULL, TTFT_SPLIT_PREFIX_CACHE, 0));
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* TTFT split by prefix-cache miss (0) and hit (1); the splits are a second
 * recording, never instead of the TTFT metric */
TEST(prefix_cache_split) {
  band_tally bands;
  ttft_registry *r = split_workload(&bands);
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(2, ttft_snapshot_split_count(s, TTFT_SPLIT_PREFIX_CACHE, 0));
  EXPECT_EQ_U64(2, ttft_snapshot_split_count(s, TTFT_SPLIT_PREFIX_CACHE, 1));
  EXPECT_EQ_U64(0, ttft_snapshot_split_count(s, TTFT_SPLIT_PREFIX_CACHE, 2));
  EXPECT_EQ_U64(9 * MS, ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, 0, 0.5));
  EXPECT_EQ_U64(12 * MS, ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, 0, 1.0));
  EXPECT_EQ_U64(1 * MS, ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, 1, 0.5));
  EXPECT_EQ_U64(2 * MS, ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, 1, 1.0));
  EXPECT_EQ_U64(0, ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, 1, -0.5));
  EXPECT_EQ_U64(15 + 1 + 4, ttft_snapshot_count(s, TTFT_METRIC_TTFT));
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* custom prompt bands: edges 100 and 1000 */
TEST(custom_prompt_bands) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_threads = 1;
  c.n_prompt_bands = 2;
  c.prompt_band_edges[0] = 100;
  c.prompt_band_edges[1] = 1000;
  ttft_registry *r = reg_new(&c);
  static const uint32_t prompts[] = {50, 99, 100, 999, 1000, 5000};
  static const unsigned bands[] = {0, 0, 1, 1, 2, 2};
  for (size_t i = 0; i < 6; i++) {
    ttft_seq q = begin_req(r, 0, prompts[i], -1, T0);
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, T0 + (i + 1) * MS));
    EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, T0 + (i + 1) * MS));
  }
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(3, ttft_snapshot_bands(s));
  for (unsigned b = 0; b < 3; b++) {
    EXPECT_EQ_U64(2, ttft_snapshot_split_count(s, TTFT_SPLIT_PROMPT_BAND, b));
    uint64_t lo_ms = 0;
    for (size_t i = 0; i < 6; i++)
      if (bands[i] == b && !lo_ms) lo_ms = i + 1;
    EXPECT_EQ_U64(lo_ms * MS, ttft_snapshot_split_quantile(s, TTFT_SPLIT_PROMPT_BAND, b, 0.0));
    EXPECT_EQ_U64((lo_ms + 1) * MS, ttft_snapshot_split_quantile(s, TTFT_SPLIT_PROMPT_BAND, b, 1.0));
  }
  uint32_t lo, hi;
  EXPECT_ERR(TTFT_OK, ttft_snapshot_band(s, 1, &lo, &hi));
  EXPECT_EQ_U64(100, lo);
  EXPECT_EQ_U64(1000, hi);
  EXPECT_ERR(TTFT_OK, ttft_snapshot_band(s, 2, &lo, &hi));
  EXPECT_EQ_U64(1000, lo);
  EXPECT_EQ_U64(UINT32_MAX, hi);
  EXPECT_EQ_U64(0, ttft_snapshot_split_count(s, TTFT_SPLIT_PROMPT_BAND, 3));
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* no bands at all: one band holding every known prompt */
TEST(no_prompt_bands) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_threads = 1;
  c.n_prompt_bands = 0;
  ttft_registry *r = reg_new(&c);
  ttft_seq q = begin_req(r, 0, 7, -1, T0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, T0 + 3 * MS));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, T0 + 3 * MS));
  ttft_snapshot *s = ttft_snapshot_take(r);
  uint32_t lo, hi;
  EXPECT_EQ_U64(1, ttft_snapshot_bands(s));
  EXPECT_EQ_U64(1, ttft_snapshot_split_count(s, TTFT_SPLIT_PROMPT_BAND, 0));
  EXPECT_ERR(TTFT_OK, ttft_snapshot_band(s, 0, &lo, &hi));
  EXPECT_EQ_U64(0, lo);
  EXPECT_EQ_U64(UINT32_MAX, hi);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* band configurations: the most edges allowed; too many, not ascending,
 * equal, zero are refused */
TEST(band_config_limits) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_threads = 1;
  c.n_prompt_bands = TTFT_MAX_BANDS - 1;
  for (uint32_t i = 0; i < TTFT_MAX_BANDS - 1; i++) c.prompt_band_edges[i] = 10 * (i + 1);
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  ttft_registry_free(r);
  c.n_prompt_bands = TTFT_MAX_BANDS;
  EXPECT_NULL(ttft_registry_new(&c));
  c.n_prompt_bands = 2;
  c.prompt_band_edges[0] = 500;
  c.prompt_band_edges[1] = 100;
  EXPECT_NULL(ttft_registry_new(&c));
  c.prompt_band_edges[1] = 500;
  EXPECT_NULL(ttft_registry_new(&c));
  c.prompt_band_edges[0] = 0;
  EXPECT_NULL(ttft_registry_new(&c));
}

/* per-class stall budget */
TEST(class_stall_budget) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_threads = 1;
  c.stall_threshold_ns = 10 * MS;
  ttft_registry *r = reg_new(&c);
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.stall_threshold_ns = 2 * MS;
  int fast = ttft_class_add(r, "fast", &slo);
  EXPECT_EQ_INT(1, fast);

  /* the same gaps (3 ms, 1 ms, 12 ms) in both classes */
  ttft_seq a = begin_req(r, fast, 0, -1, T0), b = begin_req(r, 0, 0, -1, T0);
  uint64_t t = T0 + 1 * MS;
  static const uint64_t gaps[] = {0, 3 * MS, 1 * MS, 12 * MS};
  for (size_t i = 0; i < 4; i++) {
    t += gaps[i];
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, a, 1, t));
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, b, 1, t));
  }
  ttft_seq_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(r, a, &info));
  EXPECT_EQ_U64(2, info.stalls);
  EXPECT_EQ_INT(fast, info.class_id);
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(r, b, &info));
  EXPECT_EQ_U64(1, info.stalls);
  /* live: 5 ms after the last token only "fast" is stalled */
  EXPECT_EQ_INT(1, ttft_stalled_now(r, t + 5 * MS));
  EXPECT_EQ_INT(2, ttft_stalled_now(r, t + 11 * MS));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, a, TTFT_COMPLETED, t));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, b, TTFT_COMPLETED, t));

  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(2, ttft_snapshot_class_counter(s, fast, TTFT_COUNTER_STALLS));
  EXPECT_EQ_U64(1, ttft_snapshot_class_counter(s, fast, TTFT_COUNTER_STALLED_SEQS));
  EXPECT_EQ_U64(1, ttft_snapshot_class_counter(s, 0, TTFT_COUNTER_STALLS));
  EXPECT_EQ_U64(1, ttft_snapshot_class_counter(s, 0, TTFT_COUNTER_STALLED_SEQS));
  EXPECT_EQ_U64(3, ttft_snapshot_counter(s, TTFT_COUNTER_STALLS));
  EXPECT_EQ_U64(2, ttft_snapshot_counter(s, TTFT_COUNTER_STALLED_SEQS));
  ttft_slo got;
  got.struct_size = sizeof got;
  EXPECT_ERR(TTFT_OK, ttft_snapshot_class_slo(s, fast, &got));
  EXPECT_EQ_U64(2 * MS, got.stall_threshold_ns);
  EXPECT_ERR(TTFT_OK, ttft_snapshot_class_slo(s, 0, &got));
  EXPECT_EQ_U64(10 * MS, got.stall_threshold_ns);
  /* a stall budget alone is not an SLO: both streams are good */
  EXPECT_EQ_U64(2, ttft_snapshot_counter(s, TTFT_COUNTER_SLO_MET));
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TU_MAIN()
