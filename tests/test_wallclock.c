/*
 * test_wallclock.c — a wall-clock timestamp (time.time_ns(), system_clock,
 * CLOCK_REALTIME) passed where the library's monotonic clock is expected
 * (issue 32.7): the begin is refused with TTFT_ECLOCK, whose message names
 * the clock, and counted in TTFT_COUNTER_CLOCK_REFUSED; the other hooks
 * never record a 56-year value (clamped, counted in CLOCK_CLAMPED).
 * The rule (ttft.h, TTFT_ECLOCK): more than a day ahead of the registry's
 * clock now and within a day of the wall clock's. Past monotonic values
 * (replays) and synthetic timelines elsewhere are untouched.
 * Before 1.3 every begin here was accepted and recorded a 56-year TTFT.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ttft.h"
#include "task.h"

#define MS UINT64_C(1000000)
#define SEC UINT64_C(1000000000)
#define DAY TTFT_CLOCK_AHEAD_NS

/* what time.time_ns() returns now: about 1.7e18 */
static uint64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

static ttft_registry *reg(uint64_t stall_ns) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 8;
  if (stall_ns) c.stall_threshold_ns = stall_ns;
  return ttft_registry_new(&c);
}

static uint64_t ctr(ttft_registry *r, ttft_counter c) {
  ttft_snapshot *s = ttft_snapshot_take(r);
  uint64_t v = s ? ttft_snapshot_counter(s, c) : UINT64_MAX;
  ttft_snapshot_free(s);
  return v;
}

static uint64_t qmax(ttft_registry *r, ttft_metric m, uint64_t *count) {
  ttft_snapshot *s = ttft_snapshot_take(r);
  uint64_t v = s ? ttft_snapshot_quantile(s, m, 1.0) : UINT64_MAX;
  if (count) *count = s ? ttft_snapshot_count(s, m) : UINT64_MAX;
  ttft_snapshot_free(s);
  return v;
}

TEST(wall_clock_is_far_ahead) {
  /* the premise of the rule: a wall-clock reading is decades ahead of
   * the monotonic clock on any host up for less than ~50 years */
  EXPECT_GT_U64(wall_ns(), ttft_now_ns() + 365 * DAY);
}

TEST(error_names_the_clock) {
  EXPECT_EQ_INT(-10, TTFT_ECLOCK);
  EXPECT_STREQ("TTFT_ECLOCK", ttft_err_name(TTFT_ECLOCK));
  const char *m = ttft_strerror(TTFT_ECLOCK);
  EXPECT_CONTAINS(m, "CLOCK_MONOTONIC");
  EXPECT_CONTAINS(m, "CLOCK_REALTIME");
  EXPECT_CONTAINS(m, "wall-clock");
  EXPECT_CONTAINS(m, "time.time_ns()");
  EXPECT_STREQ("clock_refused", ttft_counter_name(TTFT_COUNTER_CLOCK_REFUSED));
}

TEST(begin_refuses_wall_clock) {
  ttft_registry *r = reg(0);
  const uint64_t w = wall_ns();
  EXPECT_EQ_U64(0, ttft_begin(r, w));
  ttft_request q;
  ttft_request_init(&q);
  q.request_id = "req-1";
  q.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  EXPECT_EQ_U64(0, ttft_begin_ex(r, &q, w));
  ttft_seq s = 77;
  EXPECT_ERR(TTFT_ECLOCK, ttft_begin_checked(r, &q, w, &s));
  EXPECT_EQ_U64(0, s);
  EXPECT_EQ_U64(3, ctr(r, TTFT_COUNTER_CLOCK_REFUSED));
  EXPECT_EQ_U64(0, ctr(r, TTFT_COUNTER_DROPPED));
  EXPECT_EQ_U64(0, ctr(r, TTFT_COUNTER_BEGUN));
  EXPECT_EQ_U64(0, ctr(r, TTFT_COUNTER_TRACE_ID_INVALID));
  EXPECT_EQ_INT(0, ttft_inflight(r));
  /* nothing took a slot: all 8 still begin */
  ttft_seq h[8];
  for (int i = 0; i < 8; i++) {
    h[i] = ttft_begin(r, TTFT_NOW);
    EXPECT_TRUE(h[i] != 0);
  }
  /* a full table says EFULL, not ECLOCK, for a good time... */
  EXPECT_ERR(TTFT_EFULL, ttft_begin_checked(r, NULL, TTFT_NOW, &s));
  /* ...and ECLOCK for a wall-clock one: the clock is checked first */
  EXPECT_ERR(TTFT_ECLOCK, ttft_begin_checked(r, NULL, w, &s));
  for (int i = 0; i < 8; i++) EXPECT_ERR(TTFT_OK, ttft_stream_end(r, h[i], TTFT_COMPLETED, TTFT_NOW));
  EXPECT_EQ_U64(1, ctr(r, TTFT_COUNTER_DROPPED));
  EXPECT_EQ_U64(4, ctr(r, TTFT_COUNTER_CLOCK_REFUSED));
  EXPECT_EQ_U64(8, ctr(r, TTFT_COUNTER_BEGUN));
  /* no 56-year value anywhere */
  EXPECT_LT_U64(qmax(r, TTFT_METRIC_E2E, NULL), 3600 * SEC);
  ttft_registry_free(r);
}

TEST(begin_checked_args) {
  ttft_registry *r = reg(0);
  ttft_seq s = 5;
  EXPECT_ERR(TTFT_EINVAL, ttft_begin_checked(NULL, NULL, TTFT_NOW, &s));
  EXPECT_EQ_U64(0, s);
  EXPECT_ERR(TTFT_EINVAL, ttft_begin_checked(r, NULL, TTFT_NOW, NULL));
  ttft_request q;
  ttft_request_init(&q);
  q.class_id = 9;
  EXPECT_ERR(TTFT_EINVAL, ttft_begin_checked(r, &q, TTFT_NOW, &s));
  EXPECT_ERR(TTFT_OK, ttft_begin_checked(r, NULL, TTFT_NOW, &s));
  EXPECT_TRUE(s != 0);
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, TTFT_NOW));
  EXPECT_EQ_U64(0, ctr(r, TTFT_COUNTER_CLOCK_REFUSED));
  ttft_registry_free(r);
}

/* the rule: more than a day ahead of the clock and within a day of the
 * wall clock; both sides of each bound */
TEST(begin_boundary) {
  ttft_registry *r = reg(0);
  ttft_seq s;
  uint64_t w = wall_ns();
  EXPECT_ERR(TTFT_ECLOCK, ttft_begin_checked(r, NULL, w - DAY + 60 * SEC, &s));
  EXPECT_ERR(TTFT_ECLOCK, ttft_begin_checked(r, NULL, w + DAY - 60 * SEC, &s));
  EXPECT_ERR(TTFT_ECLOCK, ttft_begin_checked(r, NULL, w / 1000 * 1000, &s)); /* a time in us, times 1000 */
  EXPECT_EQ_U64(3, ctr(r, TTFT_COUNTER_CLOCK_REFUSED));
  /* a day and more from the wall clock: a synthetic timeline, accepted */
  EXPECT_ERR(TTFT_OK, ttft_begin_checked(r, NULL, w - DAY - 60 * SEC, &s));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, w - DAY - 59 * SEC));
  EXPECT_ERR(TTFT_OK, ttft_begin_checked(r, NULL, w + DAY + 60 * SEC, &s));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, w + DAY + 61 * SEC));
  EXPECT_ERR(TTFT_OK, ttft_begin_checked(r, NULL, UINT64_MAX - SEC, &s));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, UINT64_MAX - 1));
  /* a simulation run two days ahead of the monotonic clock */
  uint64_t now = ttft_registry_now_ns(r);
  EXPECT_ERR(TTFT_OK, ttft_begin_checked(r, NULL, now + 2 * DAY, &s));
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, now + 2 * DAY + SEC));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, now + 2 * DAY + 2 * SEC));
  /* past values — a replayed monotonic trace, a caller's own origin —
   * are accepted as ever */
  EXPECT_ERR(TTFT_OK, ttft_begin_checked(r, NULL, 1000, &s));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, 2000));
  EXPECT_ERR(TTFT_OK, ttft_begin_checked(r, NULL, now + DAY - 60 * SEC, &s));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, now + DAY - 59 * SEC));
  /* the bounds cached by those (horizon, wall floor) hide no wall-clock time */
  EXPECT_ERR(TTFT_ECLOCK, ttft_begin_checked(r, NULL, wall_ns(), &s));
  EXPECT_ERR(TTFT_ECLOCK, ttft_begin_checked(r, NULL, wall_ns() - DAY + 60 * SEC, &s));
  EXPECT_EQ_U64(5, ctr(r, TTFT_COUNTER_CLOCK_REFUSED));
  EXPECT_EQ_U64(0, ctr(r, TTFT_COUNTER_CLOCK_CLAMPED));
  EXPECT_EQ_U64(6, ctr(r, TTFT_COUNTER_COMPLETED));
  ttft_registry_free(r);
}

/* begun on the monotonic clock, then given wall-clock times: each is
 * clamped to the stream's previous event and counted, nothing records
 * 56 years (before 1.3: TTFT 56 years, clock_clamped 0) */
TEST(later_hooks_clamp_wall_clock) {
  ttft_registry *r = reg(0);
  uint64_t t0 = ttft_registry_now_ns(r);
  ttft_seq s = ttft_begin(r, t0);
  EXPECT_TRUE(s != 0);
  EXPECT_ERR(TTFT_OK, ttft_mark(r, s, TTFT_PHASE_SCHEDULED, wall_ns()));
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, wall_ns()));  /* first: TTFT */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t0 + 5 * MS)); /* a good one */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, wall_ns()));  /* a gap */
  EXPECT_EQ_INT(1, ttft_step_emitted(r, &s, NULL, 1, wall_ns()));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, wall_ns()));
  EXPECT_EQ_U64(5, ctr(r, TTFT_COUNTER_CLOCK_CLAMPED));
  EXPECT_EQ_U64(0, ctr(r, TTFT_COUNTER_CLOCK_REFUSED));
  EXPECT_EQ_U64(4, ctr(r, TTFT_COUNTER_TOKENS));
  EXPECT_EQ_U64(0, ctr(r, TTFT_COUNTER_STALLS));
  uint64_t n;
  EXPECT_EQ_U64(0, qmax(r, TTFT_METRIC_TTFT, &n));
  EXPECT_EQ_U64(1, n);
  EXPECT_LE_U64(qmax(r, TTFT_METRIC_ITL, &n), 6 * MS);
  EXPECT_EQ_U64(3, n);
  EXPECT_LE_U64(qmax(r, TTFT_METRIC_E2E, &n), 6 * MS);
  EXPECT_EQ_U64(1, n);
  ttft_registry_free(r);
}

/* A stall budget above a day: the token fast path leaves for any gap over
 * a day (the slot's budget is capped), so a wall-clock time reaches the
 * clamp there too */
TEST(huge_stall_budget_still_clamps) {
  ttft_registry *r = reg(UINT64_MAX / 2);
  uint64_t t0 = ttft_registry_now_ns(r);
  ttft_seq s = ttft_begin(r, t0);
  for (int i = 1; i <= 40; i++) EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t0 + (uint64_t)i * MS));
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, wall_ns()));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, t0 + 50 * MS));
  EXPECT_EQ_U64(1, ctr(r, TTFT_COUNTER_CLOCK_CLAMPED));
  EXPECT_EQ_U64(0, ctr(r, TTFT_COUNTER_STALLS));
  EXPECT_LE_U64(qmax(r, TTFT_METRIC_ITL, NULL), 10 * MS);
  EXPECT_LE_U64(qmax(r, TTFT_METRIC_SEQ_ITL_MAX, NULL), 10 * MS);
  ttft_registry_free(r);
}

/* A real gap of more than a day (prev long ago, t not ahead of the
 * clock) is kept: the rule is about the clock, not the gap */
TEST(long_real_gap_kept) {
  ttft_registry *r = reg(0);
  ttft_seq s = ttft_begin(r, 1000);
  uint64_t t = ttft_registry_now_ns(r) + DAY - 60 * SEC; /* > 1000 + a day: uptime > 60 s */
  EXPECT_GT_U64(t - 1000, DAY);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, t + SEC));
  EXPECT_EQ_U64(0, ctr(r, TTFT_COUNTER_CLOCK_CLAMPED));
  uint64_t n;
  EXPECT_GT_U64(qmax(r, TTFT_METRIC_TTFT, &n), DAY / 2);
  EXPECT_EQ_U64(1, n);
  ttft_registry_free(r);
}

/* f rendered into a buffer of its size (freed by the caller) */
static char *render(const ttft_snapshot *s, ttft_format f) {
  long n = ttft_snapshot_format(s, f, NULL, 0);
  EXPECT_GT_INT(n, 0);
  if (n <= 0) return NULL;
  char *buf = malloc((size_t)n + 1);
  EXPECT_EQ_INT(n, ttft_snapshot_format(s, f, buf, (size_t)n + 1));
  return buf;
}

/* exported: Prometheus text, JSON, the text report, also when every
 * begin of the class was refused */
TEST(exported) {
  ttft_registry *r = reg(0);
  ttft_seq s;
  EXPECT_ERR(TTFT_ECLOCK, ttft_begin_checked(r, NULL, wall_ns(), &s));
  ttft_snapshot *snap = ttft_snapshot_take(r);
  char *buf = render(snap, TTFT_FORMAT_PROMETHEUS);
  EXPECT_CONTAINS(buf, "# TYPE llm_clock_refused_total counter\n");
  EXPECT_CONTAINS(buf, "llm_clock_refused_total{class=\"default\"} 1\n");
  free(buf);
  buf = render(snap, TTFT_FORMAT_JSON);
  EXPECT_CONTAINS(buf, "\"clock_refused\":1");
  free(buf);
  buf = render(snap, TTFT_FORMAT_TEXT);
  EXPECT_CONTAINS(buf, "wall-clock time passed for a monotonic one (TTFT_ECLOCK): 1\n");
  free(buf);
  ttft_snapshot_free(snap);
  ttft_registry_free(r);
}

TU_MAIN()
