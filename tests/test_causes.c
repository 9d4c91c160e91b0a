/* test_causes.c — engine steps and stall causes (issue 19, items 1-3).
 *
 * Each scenario drives one registry with explicit timestamps through a
 * continuous-batching timeline — engine steps recorded with
 * ttft_engine_step before the tokens they produced — and checks the cause
 * the library gave every stall against the one the scenario built in:
 * a long prefill step, a preemption, steps that ran without the
 * sequence, a frozen process, a step that was itself slow (the sequence
 * in it), no step information at all. Then the
 * engine-step histograms, the queries' contracts, the snapshot codec,
 * merge, delta and every exposition format, and engine_step racing the
 * stall path from several threads.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"
#include "task.h"

#define MS UINT64_C(1000000)
#define T0 (UINT64_C(1000) * 1000 * MS) /* 1000 s: clear of 0 (= TTFT_NOW) */

static ttft_registry *reg(void) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 64;
  c.stall_threshold_ns = 200 * MS;
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  return r;
}

/* An engine loop driven by hand: every step runs `dur` from the clock t,
 * is recorded, then the listed sequences emit one token at its end;
 * host overhead `gap` separates steps. */
typedef struct eng {
  ttft_registry *r;
  uint64_t t;
} eng;

static void step(eng *e, uint64_t dur, uint32_t prefill, const ttft_seq *seqs, size_t n) {
  ttft_step_info in;
  ttft_step_info_init(&in);
  in.prefill_tokens = prefill;
  in.decode_seqs = (uint32_t)n;
  uint64_t t0 = e->t, t1 = e->t + dur;
  EXPECT_ERR(TTFT_OK, ttft_engine_step(e->r, &in, t0, t1));
  if (n) EXPECT_EQ_INT((long long)n, ttft_step_emitted(e->r, seqs, NULL, n, t1));
  e->t = t1 + 1 * MS; /* host work between steps */
}

/* a sequence that has emitted its first token and `k` more at 20 ms steps */
static ttft_seq warm(eng *e, int k) {
  ttft_seq s = ttft_begin(e->r, e->t);
  EXPECT_TRUE(s != 0);
  step(e, 20 * MS, 100, &s, 1); /* its own prefill: the first token */
  for (int i = 0; i < k; i++) step(e, 20 * MS, 0, &s, 1);
  return s;
}

/* exactly one stall, with cause `want` */
static void expect_one(ttft_registry *r, ttft_stall_cause want) {
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(1, ttft_snapshot_counter(s, TTFT_COUNTER_STALLS));
  for (int c = 0; c < TTFT_STALL_CAUSE_COUNT; c++) {
    if (ttft_snapshot_stalls_by_cause(s, TTFT_CLASS_ALL, (ttft_stall_cause)c) != (c == (int)want))
      fprintf(stderr, "  cause %s: %llu (wanted %s)\n", ttft_stall_cause_name((ttft_stall_cause)c),
              (unsigned long long)ttft_snapshot_stalls_by_cause(s, TTFT_CLASS_ALL, (ttft_stall_cause)c),
              ttft_stall_cause_name(want));
    EXPECT_EQ_U64(c == (int)want, ttft_snapshot_stalls_by_cause(s, TTFT_CLASS_ALL, (ttft_stall_cause)c));
  }
  ttft_snapshot_free(s);
}

TEST(names) {
  EXPECT_STREQ("unknown", ttft_stall_cause_name(TTFT_STALL_UNKNOWN));
  EXPECT_STREQ("prefill", ttft_stall_cause_name(TTFT_STALL_PREFILL));
  EXPECT_STREQ("preempted", ttft_stall_cause_name(TTFT_STALL_PREEMPTED));
  EXPECT_STREQ("not_scheduled", ttft_stall_cause_name(TTFT_STALL_NOT_SCHEDULED));
  EXPECT_STREQ("engine_idle", ttft_stall_cause_name(TTFT_STALL_ENGINE_IDLE));
  EXPECT_STREQ("slow_step", ttft_stall_cause_name(TTFT_STALL_SLOW_STEP));
  EXPECT_EQ_INT(5, TTFT_STALL_SLOW_STEP); /* appended: the others keep their numbers */
  EXPECT_NULL(ttft_stall_cause_name(TTFT_STALL_CAUSE_COUNT));
  EXPECT_NULL(ttft_stall_cause_name((ttft_stall_cause)-1));
}

/* a server that never reports steps: every stall is unknown, with its gap */
TEST(no_steps_unknown) {
  ttft_registry *r = reg();
  ttft_seq s = ttft_begin(r, T0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, T0 + 50 * MS));
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, T0 + 70 * MS));
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, T0 + 570 * MS)); /* 500 ms gap */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, T0 + 590 * MS));
  expect_one(r, TTFT_STALL_UNKNOWN);
  ttft_snapshot *x = ttft_snapshot_take(r);
  EXPECT_EQ_U64(500 * MS, ttft_snapshot_stall_seconds_by_cause(x, TTFT_CLASS_ALL, TTFT_STALL_UNKNOWN));
  EXPECT_EQ_U64(500 * MS, ttft_snapshot_stall_seconds_by_cause(x, 0, TTFT_STALL_UNKNOWN));
  EXPECT_EQ_U64(0, ttft_snapshot_engine_step_count(x, 0) + ttft_snapshot_engine_step_count(x, 1));
  ttft_snapshot_free(x);
  ttft_registry_free(r);
}

/* a 600 ms step carrying another request's 8k-token prompt */
TEST(prefill) {
  eng e = {reg(), T0};
  ttft_seq s = warm(&e, 10);
  ttft_seq s2 = ttft_begin(e.r, e.t);
  ttft_seq_info info = {.struct_size = sizeof info};
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(e.r, s, &info));
  EXPECT_EQ_INT(-1, info.last_stall_cause); /* no stall yet */
  step(&e, 600 * MS, 8000, &s, 1); /* s decodes in the same (long) step */
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(e.r, s, &info));
  EXPECT_EQ_INT(TTFT_STALL_PREFILL, info.last_stall_cause);
  ttft_seq both[2] = {s, s2};
  step(&e, 20 * MS, 0, both, 2);
  expect_one(e.r, TTFT_STALL_PREFILL);
  ttft_snapshot *x = ttft_snapshot_take(e.r);
  EXPECT_EQ_U64(601 * MS, ttft_snapshot_stall_seconds_by_cause(x, 0, TTFT_STALL_PREFILL));
  ttft_snapshot_free(x);
  ttft_registry_free(e.r);
}

/* the stall on the sequence's very first gap: its usual step comes from
 * the steps before the gap */
TEST(prefill_first_gap) {
  eng e = {reg(), T0};
  ttft_seq other = warm(&e, 12);
  ttft_seq s = ttft_begin(e.r, e.t);
  ttft_seq both[2] = {other, s};
  step(&e, 20 * MS, 50, both, 2); /* s's first token */
  step(&e, 700 * MS, 6000, both, 2);
  /* both stalled on it: `other` by its own usual gap, s by the steps' */
  ttft_snapshot *x = ttft_snapshot_take(e.r);
  EXPECT_EQ_U64(2, ttft_snapshot_counter(x, TTFT_COUNTER_STALLS));
  EXPECT_EQ_U64(2, ttft_snapshot_stalls_by_cause(x, TTFT_CLASS_ALL, TTFT_STALL_PREFILL));
  ttft_snapshot_free(x);
  ttft_registry_free(e.r);
}

/* evicted under KV pressure for 30 steps, then resumed */
TEST(preempted) {
  eng e = {reg(), T0};
  ttft_seq s = warm(&e, 10);
  ttft_seq other = warm(&e, 2);
  EXPECT_ERR(TTFT_OK, ttft_mark(e.r, s, TTFT_PHASE_PREEMPTED, e.t));
  for (int i = 0; i < 30; i++) step(&e, 20 * MS, 0, &other, 1);
  EXPECT_ERR(TTFT_OK, ttft_mark(e.r, s, TTFT_PHASE_RESUMED, e.t));
  step(&e, 60 * MS, 900, &s, 1); /* its recompute is prefill of its own */
  expect_one(e.r, TTFT_STALL_PREEMPTED);
  ttft_seq_info info = {.struct_size = sizeof info};
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(e.r, s, &info));
  EXPECT_EQ_INT(TTFT_STALL_PREEMPTED, info.last_stall_cause);
  /* a preemption is for one gap only: the next stall is judged afresh */
  e.t += 1000 * MS;
  step(&e, 20 * MS, 0, &s, 1);
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(e.r, s, &info));
  EXPECT_EQ_INT(TTFT_STALL_ENGINE_IDLE, info.last_stall_cause);
  EXPECT_EQ_U64(2, info.stalls);
  ttft_snapshot *x = ttft_snapshot_take(e.r);
  EXPECT_EQ_U64(1, ttft_snapshot_counter(x, TTFT_COUNTER_PREEMPTIONS)); /* RESUMED is not counted */
  ttft_snapshot_free(x);
  ttft_registry_free(e.r);
}

/* steps ran without it (a scheduler that skipped it), one short prefill among them */
TEST(not_scheduled) {
  eng e = {reg(), T0};
  ttft_seq s = warm(&e, 10);
  ttft_seq other = warm(&e, 2);
  for (int i = 0; i < 25; i++) step(&e, 20 * MS, i == 7 ? 64 : 0, &other, 1);
  step(&e, 20 * MS, 0, &s, 1);
  expect_one(e.r, TTFT_STALL_NOT_SCHEDULED);
  ttft_registry_free(e.r);
}

/* Slow steps (issue 32): a server whose every generating sequence is in
 * every step, on a loaded host. The step that produced the token was
 * itself 30x its usual length; nothing was left out (1.2 said
 * not_scheduled, whose advice — batch size, scheduling — is wrong). */
TEST(slow_step) {
  eng e = {reg(), T0};
  ttft_seq s = warm(&e, 10);
  step(&e, 600 * MS, 0, &s, 1); /* decode only, s in it */
  expect_one(e.r, TTFT_STALL_SLOW_STEP);
  ttft_seq_info info = {.struct_size = sizeof info};
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(e.r, s, &info));
  EXPECT_EQ_INT(TTFT_STALL_SLOW_STEP, info.last_stall_cause);
  ttft_snapshot *x = ttft_snapshot_take(e.r);
  EXPECT_EQ_U64(601 * MS, ttft_snapshot_stall_seconds_by_cause(x, 0, TTFT_STALL_SLOW_STEP));
  EXPECT_EQ_U64(0, ttft_snapshot_stalls_by_cause(x, 0, TTFT_STALL_NOT_SCHEDULED));
  ttft_snapshot_free(x);
  ttft_registry_free(e.r);
}

/* the whole batch in one slow step: every sequence in it stalls on it,
 * each one a slow step, however many steps each has seen */
TEST(slow_step_whole_batch) {
  eng e = {reg(), T0};
  ttft_seq a = warm(&e, 10);
  ttft_seq b = ttft_begin(e.r, e.t);
  ttft_seq both[2] = {a, b};
  step(&e, 20 * MS, 30, both, 2); /* b's first token */
  step(&e, 20 * MS, 0, both, 2);
  step(&e, 2500 * MS, 0, both, 2); /* b on its second gap: u from the steps before */
  ttft_snapshot *x = ttft_snapshot_take(e.r);
  EXPECT_EQ_U64(2, ttft_snapshot_counter(x, TTFT_COUNTER_STALLS));
  EXPECT_EQ_U64(2, ttft_snapshot_stalls_by_cause(x, TTFT_CLASS_ALL, TTFT_STALL_SLOW_STEP));
  ttft_snapshot_free(x);
  ttft_registry_free(e.r);
}

/* a host hiccup before a slow step: the step still has most of the gap */
TEST(slow_step_after_hiccup) {
  eng e = {reg(), T0};
  ttft_seq s = warm(&e, 10);
  e.t += 150 * MS; /* no step for 150 ms */
  step(&e, 450 * MS, 0, &s, 1);
  expect_one(e.r, TTFT_STALL_SLOW_STEP);
  ttft_registry_free(e.r);
}

/* a slow step without the sequence, then its own usual step: the steps
 * before the one that produced its token cover the gap, so it was left
 * out of them (not scheduled), however long they were; the sequence that
 * was in the slow step stalled on a slow step */
TEST(slow_step_without_it_is_not_scheduled) {
  eng e = {reg(), T0};
  ttft_seq s = warm(&e, 10);
  ttft_seq other = warm(&e, 2);
  step(&e, 500 * MS, 0, &other, 1); /* other's own slow step */
  step(&e, 20 * MS, 0, &s, 1);
  ttft_seq_info info = {.struct_size = sizeof info};
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(e.r, s, &info));
  EXPECT_EQ_INT(TTFT_STALL_NOT_SCHEDULED, info.last_stall_cause);
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(e.r, other, &info));
  EXPECT_EQ_INT(TTFT_STALL_SLOW_STEP, info.last_stall_cause);
  ttft_snapshot *x = ttft_snapshot_take(e.r);
  EXPECT_EQ_U64(2, ttft_snapshot_counter(x, TTFT_COUNTER_STALLS));
  ttft_snapshot_free(x);
  ttft_registry_free(e.r);
}

/* not_scheduled needs evidence that steps ran without the sequence: the
 * steps that ended inside the gap before its own cover most of the gap.
 * Here they cover a third of it, the engine idled a third, and its own
 * step was 7x its usual: no share has half, the largest is the idle time
 * (1.2 said not_scheduled as soon as steps covered half of the gap). */
TEST(not_scheduled_needs_evidence) {
  eng e = {reg(), T0};
  ttft_seq s = warm(&e, 10);
  ttft_seq other = warm(&e, 2);                                 /* 60 ms of steps */
  for (int i = 0; i < 5; i++) step(&e, 20 * MS, 0, &other, 1); /* 100 ms more */
  e.t += 170 * MS;                                              /* 170 ms of nothing */
  step(&e, 150 * MS, 0, &s, 1); /* gap 489 ms, covered 310 */
  expect_one(e.r, TTFT_STALL_ENGINE_IDLE);
  ttft_registry_free(e.r);
  /* the same with the steps without it covering most of the gap */
  e = (eng){reg(), T0};
  s = warm(&e, 10);
  other = warm(&e, 2);
  for (int i = 0; i < 12; i++) step(&e, 20 * MS, 0, &other, 1); /* 300 of 456 ms */
  e.t += 120 * MS;
  step(&e, 20 * MS, 0, &s, 1);
  expect_one(e.r, TTFT_STALL_NOT_SCHEDULED);
  ttft_registry_free(e.r);
}

/* a whole-process freeze between two steps */
TEST(engine_idle) {
  eng e = {reg(), T0};
  ttft_seq s = warm(&e, 10);
  e.t += 3000 * MS; /* frozen: no step, no token */
  step(&e, 20 * MS, 0, &s, 1);
  expect_one(e.r, TTFT_STALL_ENGINE_IDLE);
  ttft_snapshot *x = ttft_snapshot_take(e.r);
  EXPECT_EQ_U64(3021 * MS, ttft_snapshot_stall_seconds_by_cause(x, 0, TTFT_STALL_ENGINE_IDLE));
  ttft_snapshot_free(x);
  ttft_registry_free(e.r);
}

/* freeze and preemption together: the freeze took most of the gap, so it wins */
TEST(idle_precedes_preempted) {
  eng e = {reg(), T0};
  ttft_seq s = warm(&e, 10);
  EXPECT_ERR(TTFT_OK, ttft_mark(e.r, s, TTFT_PHASE_PREEMPTED, e.t));
  e.t += 2000 * MS;
  step(&e, 20 * MS, 0, &s, 1);
  expect_one(e.r, TTFT_STALL_ENGINE_IDLE);
  ttft_registry_free(e.r);
}

/* steps are known, but none ended inside the gap (they stopped being
 * reported long before): unknown, not idle */
TEST(steps_stopped_unknown) {
  eng e = {reg(), T0};
  ttft_seq s = warm(&e, 10);
  uint64_t t = e.t;
  for (int i = 1; i <= 20; i++) EXPECT_ERR(TTFT_OK, ttft_token_emitted(e.r, s, 1, t + (uint64_t)i * 20 * MS));
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(e.r, s, 1, t + 2000 * MS));
  expect_one(e.r, TTFT_STALL_UNKNOWN);
  ttft_registry_free(e.r);
}

/* more steps inside one gap than the ring remembers: still not scheduled */
TEST(ring_wrap) {
  eng e = {reg(), T0};
  ttft_seq s = warm(&e, 10);
  ttft_seq other = warm(&e, 2);
  for (int i = 0; i < TTFT_STEP_RING + 300; i++) step(&e, 2 * MS, 0, &other, 1);
  step(&e, 2 * MS, 0, &s, 1);
  expect_one(e.r, TTFT_STALL_NOT_SCHEDULED);
  ttft_registry_free(e.r);
}

TEST(step_histograms) {
  eng e = {reg(), T0};
  for (int i = 0; i < 90; i++) step(&e, (uint64_t)(10 + i % 10) * MS, 0, NULL, 0);
  for (int i = 0; i < 10; i++) step(&e, 400 * MS, 4096, NULL, 0);
  ttft_snapshot *x = ttft_snapshot_take(e.r);
  EXPECT_EQ_U64(90, ttft_snapshot_engine_step_count(x, 0));
  EXPECT_EQ_U64(10, ttft_snapshot_engine_step_count(x, 1));
  EXPECT_EQ_U64(10, ttft_snapshot_engine_step_count(x, 7)); /* any non-zero = prefill */
  EXPECT_EQ_U64(4000 * MS, ttft_snapshot_engine_step_sum(x, 1));
  EXPECT_EQ_U64(9 * (10 + 11 + 12 + 13 + 14 + 15 + 16 + 17 + 18 + 19) * MS, ttft_snapshot_engine_step_sum(x, 0));
  EXPECT_EQ_U64(10 * MS, ttft_snapshot_engine_step_quantile(x, 0, 0.0));
  EXPECT_EQ_U64(19 * MS, ttft_snapshot_engine_step_quantile(x, 0, 1.0));
  EXPECT_NEAR_REL(400e6, (double)ttft_snapshot_engine_step_quantile(x, 1, 0.5), 0.005);
  EXPECT_EQ_U64(0, ttft_snapshot_engine_step_quantile(x, 1, 1.5));
  EXPECT_EQ_U64(0, ttft_snapshot_engine_step_count(NULL, 0));
  ttft_snapshot_free(x);
  ttft_registry_free(e.r);
}

TEST(engine_step_contract) {
  ttft_registry *r = reg();
  ttft_step_info in;
  ttft_step_info_init(&in);
  EXPECT_EQ_U64(sizeof in, in.struct_size);
  EXPECT_EQ_U64(0, in.prefill_tokens + in.decode_seqs + in.preempted_seqs + in.kind);
  ttft_step_info_init(NULL); /* no-op */
  EXPECT_ERR(TTFT_EINVAL, ttft_engine_step(NULL, &in, 1, 2));
  in.struct_size = 0;
  EXPECT_ERR(TTFT_EINVAL, ttft_engine_step(r, &in, 1, 2));
  in.struct_size = sizeof in + 8;
  EXPECT_ERR(TTFT_EINVAL, ttft_engine_step(r, &in, 1, 2));
  /* an older struct that ends after prefill_tokens is accepted */
  in.struct_size = offsetof(ttft_step_info, decode_seqs);
  in.prefill_tokens = 5;
  EXPECT_ERR(TTFT_OK, ttft_engine_step(r, &in, T0, T0 + MS));
  EXPECT_ERR(TTFT_OK, ttft_engine_step(r, NULL, T0 + 2 * MS, T0 + 3 * MS));
  EXPECT_ERR(TTFT_OK, ttft_engine_step(r, NULL, T0 + 9 * MS, T0 + 5 * MS)); /* clamped to 0 */
  uint64_t now = ttft_registry_now_ns(r);
  EXPECT_ERR(TTFT_OK, ttft_engine_step(r, NULL, now, TTFT_NOW));
  EXPECT_ERR(TTFT_OK, ttft_engine_step(r, NULL, TTFT_NOW, TTFT_NOW));
  ttft_snapshot *x = ttft_snapshot_take(r);
  EXPECT_EQ_U64(1, ttft_snapshot_engine_step_count(x, 1));
  EXPECT_EQ_U64(4, ttft_snapshot_engine_step_count(x, 0));
  EXPECT_EQ_U64(0, ttft_snapshot_engine_step_quantile(x, 0, 0.0)); /* the clamped one */
  /* invalid queries */
  EXPECT_EQ_U64(0, ttft_snapshot_stalls_by_cause(NULL, 0, TTFT_STALL_UNKNOWN));
  EXPECT_EQ_U64(0, ttft_snapshot_stalls_by_cause(x, 5, TTFT_STALL_UNKNOWN));
  EXPECT_EQ_U64(0, ttft_snapshot_stalls_by_cause(x, 0, TTFT_STALL_CAUSE_COUNT));
  EXPECT_EQ_U64(0, ttft_snapshot_stall_seconds_by_cause(x, 0, (ttft_stall_cause)-1));
  ttft_snapshot_free(x);
  EXPECT_ERR(TTFT_EINVAL, ttft_mark(r, 1, TTFT_PHASE_COUNT_, T0));
  ttft_registry_free(r);
}

/* one stall of each cause in class "chat", and unknown ones in default */
static ttft_registry *mixed(void) {
  eng e = {reg(), T0};
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.stall_threshold_ns = 200 * MS;
  EXPECT_EQ_INT(1, ttft_class_add(e.r, "chat", &slo));
  ttft_request q;
  ttft_request_init(&q);
  q.class_id = 1;
  ttft_seq s = ttft_begin_ex(e.r, &q, e.t);
  step(&e, 20 * MS, 10, &s, 1);
  for (int i = 0; i < 8; i++) step(&e, 20 * MS, 0, &s, 1);
  step(&e, 500 * MS, 7000, &s, 1);              /* prefill */
  for (int i = 0; i < 3; i++) step(&e, 20 * MS, 0, &s, 1);
  EXPECT_ERR(TTFT_OK, ttft_mark(e.r, s, TTFT_PHASE_PREEMPTED, e.t));
  for (int i = 0; i < 15; i++) step(&e, 20 * MS, 0, NULL, 0);
  EXPECT_ERR(TTFT_OK, ttft_mark(e.r, s, TTFT_PHASE_RESUMED, e.t));
  step(&e, 20 * MS, 0, &s, 1);                  /* preempted */
  for (int i = 0; i < 15; i++) step(&e, 20 * MS, 0, NULL, 0);
  step(&e, 20 * MS, 0, &s, 1);                  /* not scheduled */
  e.t += 1000 * MS;
  step(&e, 20 * MS, 0, &s, 1);                  /* engine idle */
  for (int i = 0; i < 3; i++) step(&e, 20 * MS, 0, &s, 1);
  step(&e, 400 * MS, 0, &s, 1);                 /* slow step */
  EXPECT_ERR(TTFT_OK, ttft_stream_end(e.r, s, TTFT_COMPLETED, e.t));
  ttft_seq d = ttft_begin(e.r, e.t);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(e.r, d, 1, e.t + MS));
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(e.r, d, 1, e.t + 400 * MS)); /* no step ended: unknown */
  return e.r;
}

static void expect_mixed(const ttft_snapshot *x, uint64_t times) {
  for (int c = 1; c < TTFT_STALL_CAUSE_COUNT; c++)
    EXPECT_EQ_U64(times, ttft_snapshot_stalls_by_cause(x, 1, (ttft_stall_cause)c));
  EXPECT_EQ_U64(0, ttft_snapshot_stalls_by_cause(x, 1, TTFT_STALL_UNKNOWN));
  EXPECT_EQ_U64(times, ttft_snapshot_stalls_by_cause(x, 0, TTFT_STALL_UNKNOWN));
  EXPECT_EQ_U64(times * 399 * MS, ttft_snapshot_stall_seconds_by_cause(x, 0, TTFT_STALL_UNKNOWN));
  EXPECT_EQ_U64(times * 501 * MS, ttft_snapshot_stall_seconds_by_cause(x, 1, TTFT_STALL_PREFILL));
  EXPECT_EQ_U64(times * 1021 * MS, ttft_snapshot_stall_seconds_by_cause(x, TTFT_CLASS_ALL, TTFT_STALL_ENGINE_IDLE));
  uint64_t sum = 0;
  for (int c = 0; c < TTFT_STALL_CAUSE_COUNT; c++)
    sum += ttft_snapshot_stalls_by_cause(x, TTFT_CLASS_ALL, (ttft_stall_cause)c);
  EXPECT_EQ_U64(ttft_snapshot_counter(x, TTFT_COUNTER_STALLS), sum);
  EXPECT_EQ_U64(times * 401 * MS, ttft_snapshot_stall_seconds_by_cause(x, 1, TTFT_STALL_SLOW_STEP));
  EXPECT_EQ_U64(6 * times, sum);
}

TEST(codec_merge_delta) {
  ttft_registry *r = mixed();
  ttft_snapshot *x = ttft_snapshot_take(r);
  expect_mixed(x, 1);
  long n = ttft_snapshot_encode(x, NULL, 0);
  EXPECT_GT_INT(n, 16);
  unsigned char *b = malloc((size_t)n);
  EXPECT_EQ_INT(n, ttft_snapshot_encode(x, b, (size_t)n));
  EXPECT_EQ_INT(5, b[4]); /* encoding version 5 (1.3) */
  int err = 1;
  ttft_snapshot *d = ttft_snapshot_decode(b, (size_t)n, &err);
  EXPECT_ERR(TTFT_OK, err);
  expect_mixed(d, 1);
  for (int p = 0; p < 2; p++) {
    EXPECT_EQ_U64(ttft_snapshot_engine_step_count(x, p), ttft_snapshot_engine_step_count(d, p));
    EXPECT_EQ_U64(ttft_snapshot_engine_step_sum(x, p), ttft_snapshot_engine_step_sum(d, p));
  }
  ttft_snapshot *m = ttft_snapshot_merge(x, d, &err);
  EXPECT_ERR(TTFT_OK, err);
  expect_mixed(m, 2);
  EXPECT_EQ_U64(2 * ttft_snapshot_engine_step_count(x, 0), ttft_snapshot_engine_step_count(m, 0));
  /* delta: the second half of the timeline alone */
  ttft_snapshot *older = ttft_snapshot_take(r);
  ttft_seq s = ttft_begin(r, T0 + 100000 * MS);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, T0 + 100001 * MS));
  EXPECT_ERR(TTFT_OK, ttft_engine_step(r, NULL, T0 + 100002 * MS, T0 + 100300 * MS));
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, T0 + 100301 * MS));
  ttft_snapshot *newer = ttft_snapshot_take(r);
  ttft_snapshot *dl = ttft_snapshot_delta(newer, older, &err);
  EXPECT_ERR(TTFT_OK, err);
  /* one 298 ms step that produced its token: a slow step */
  EXPECT_EQ_U64(1, ttft_snapshot_stalls_by_cause(dl, 0, TTFT_STALL_SLOW_STEP));
  EXPECT_EQ_U64(300 * MS, ttft_snapshot_stall_seconds_by_cause(dl, 0, TTFT_STALL_SLOW_STEP));
  EXPECT_EQ_U64(0, ttft_snapshot_stalls_by_cause(dl, 0, TTFT_STALL_NOT_SCHEDULED));
  EXPECT_EQ_U64(0, ttft_snapshot_stalls_by_cause(dl, 1, TTFT_STALL_PREFILL));
  EXPECT_EQ_U64(1, ttft_snapshot_engine_step_count(dl, 0));
  EXPECT_EQ_U64(0, ttft_snapshot_engine_step_count(dl, 1));
  /* a truncated v3 encoding is refused */
  b[n - 5] ^= 1;
  EXPECT_NULL(ttft_snapshot_decode(b, (size_t)n, &err));
  EXPECT_ERR(TTFT_ECORRUPT, err);
  free(b);
  ttft_snapshot_free(dl);
  ttft_snapshot_free(newer);
  ttft_snapshot_free(older);
  ttft_snapshot_free(m);
  ttft_snapshot_free(d);
  ttft_snapshot_free(x);
  ttft_registry_free(r);
}

static char *render(const ttft_snapshot *x, ttft_format f) {
  long n = ttft_snapshot_format(x, f, NULL, 0);
  EXPECT_GT_INT(n, 0);
  char *out = malloc((size_t)n + 1);
  EXPECT_EQ_INT(n, ttft_snapshot_format(x, f, out, (size_t)n + 1));
  return out;
}

TEST(formats) {
  ttft_registry *r = mixed();
  ttft_snapshot *x = ttft_snapshot_take(r);
  char *p = render(x, TTFT_FORMAT_PROMETHEUS);
  EXPECT_CONTAINS(p, "# TYPE llm_stalls_total counter\n");
  EXPECT_CONTAINS(p, "llm_stalls_total{class=\"chat\",cause=\"prefill\"} 1\n");
  EXPECT_CONTAINS(p, "llm_stalls_total{class=\"chat\",cause=\"unknown\"} 0\n");
  EXPECT_CONTAINS(p, "llm_stalls_total{class=\"default\",cause=\"unknown\"} 1\n");
  EXPECT_CONTAINS(p, "llm_stall_seconds_total{class=\"chat\",cause=\"prefill\"} 0.501\n");
  EXPECT_CONTAINS(p, "llm_stall_seconds_total{class=\"chat\",cause=\"engine_idle\"} 1.021\n");
  EXPECT_CONTAINS(p, "llm_stalls_total{class=\"chat\",cause=\"slow_step\"} 1\n");
  EXPECT_CONTAINS(p, "llm_stall_seconds_total{class=\"chat\",cause=\"slow_step\"} 0.401\n");
  EXPECT_CONTAINS(p, "# TYPE llm_engine_step_seconds histogram\n");
  EXPECT_CONTAINS(p, "llm_engine_step_seconds_count{prefill=\"true\"} 2\n");
  EXPECT_CONTAINS(p, "llm_engine_step_seconds_sum{prefill=\"true\"} 0.52\n");
  EXPECT_CONTAINS(p, "llm_engine_step_seconds_bucket{prefill=\"false\",le=\"+Inf\"}");
  free(p);
  p = render(x, TTFT_FORMAT_OPENMETRICS);
  EXPECT_CONTAINS(p, "# TYPE llm_stall_seconds counter\n# UNIT llm_stall_seconds seconds\n");
  EXPECT_CONTAINS(p, "llm_stalls_total{class=\"chat\",cause=\"not_scheduled\"} 1\n");
  EXPECT_CONTAINS(p, "llm_stall_seconds_total{class=\"chat\",cause=\"preempted\"}");
  free(p);
  p = render(x, TTFT_FORMAT_JSON);
  EXPECT_CONTAINS(p, "\"stall_causes\":{\"unknown\":{\"count\":1,\"ns\":399000000},\"prefill\":{\"count\":1,\"ns\":501000000}");
  EXPECT_CONTAINS(p, "\"engine_steps\":{\"no_prefill\":{");
  free(p);
  p = render(x, TTFT_FORMAT_TEXT);
  EXPECT_CONTAINS(p, "stalls by cause");
  EXPECT_CONTAINS(p, "eng. idle");
  EXPECT_CONTAINS(p, "slow step");
  EXPECT_CONTAINS(p, "engine steps");
  EXPECT_CONTAINS(p, "with prefill");
  free(p);
  p = render(x, TTFT_FORMAT_PROMETHEUS_PROTOBUF);
  long n = ttft_snapshot_format(x, TTFT_FORMAT_PROMETHEUS_PROTOBUF, NULL, 0);
  EXPECT_TRUE(memmem(p, (size_t)n, "llm_stall_seconds_total", 23) != NULL);
  EXPECT_TRUE(memmem(p, (size_t)n, "llm_engine_step_seconds", 23) != NULL);
  EXPECT_TRUE(memmem(p, (size_t)n, "not_scheduled", 13) != NULL);
  free(p);
  ttft_snapshot_free(x);
  ttft_registry_free(r);
}

/* engine_step from several threads while a sequence stalls and is
 * classified: no torn entry is ever read (TSan/ASan), every step is
 * counted, every stall gets a cause */
typedef struct race {
  ttft_registry *r;
  atomic_int stop;
} race;

static void *stepper(void *arg) {
  race *x = arg;
  ttft_step_info in;
  ttft_step_info_init(&in);
  for (int i = 0; i < 20000; i++) {
    in.prefill_tokens = (uint32_t)(i & 1);
    EXPECT_ERR(TTFT_OK, ttft_engine_step(x->r, &in, T0 + (uint64_t)i * MS, T0 + (uint64_t)i * MS + MS / 2));
  }
  return NULL;
}

TEST(concurrent_steps) {
  race x = {reg(), 0};
  pthread_t th[3];
  for (int i = 0; i < 3; i++) EXPECT_EQ_INT(0, pthread_create(&th[i], NULL, stepper, &x));
  ttft_seq s = ttft_begin(x.r, T0);
  uint64_t stalls = 0;
  for (int i = 0; i < 2000; i++) {
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(x.r, s, 1, T0 + (uint64_t)i * 250 * MS));
    stalls += i > 0;
  }
  for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
  ttft_snapshot *sn = ttft_snapshot_take(x.r);
  EXPECT_EQ_U64(30000, ttft_snapshot_engine_step_count(sn, 0));
  EXPECT_EQ_U64(30000, ttft_snapshot_engine_step_count(sn, 1));
  uint64_t sum = 0;
  for (int c = 0; c < TTFT_STALL_CAUSE_COUNT; c++)
    sum += ttft_snapshot_stalls_by_cause(sn, 0, (ttft_stall_cause)c);
  EXPECT_EQ_U64(stalls, sum);
  ttft_snapshot_free(sn);
  ttft_registry_free(x.r);
}

TU_MAIN()
