/*
 * test_slowest.c — issue 19 item 4: which requests were slow.
 *
 *  - ttft_request's request_id and trace_id: copied at begin, bounded
 *    (TTFT_MAX_REQUEST_ID, cut at a whole UTF-8 character), hostile bytes
 *    stored as '?', malformed trace ids ignored and counted, an older
 *    caller's smaller struct still accepted; ids as clients send them
 *    (issue 27.2): every code point, 1 MB ids, and the bound on what is
 *    read that the bindings cut ids at (a guard page);
 *  - the k slowest requests per class by TTFT and by longest gap, against
 *    the exact answer of a recorded workload (also over several threads,
 *    and across classes for TTFT_CLASS_ALL); ttft_config.slowest_k;
 *  - the encoding (version 3), merge (the k slowest of the union) and
 *    delta (newer's entries that ended in the window) carry them;
 *  - JSON and the text report list them; OpenMetrics and protobuf carry
 *    them as exemplars on the buckets they fall in.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ttft.h"
#include "task.h"
#include "begin_retry.h"

#define MS UINT64_C(1000000)
#define T0 UINT64_C(1000000000000)

static ttft_registry *reg_k(uint32_t k, uint32_t threads) {
  ttft_config c;
  ttft_config_init(&c);
  c.slowest_k = k;
  c.max_threads = threads;
  c.stall_threshold_ns = 50 * MS;
  return ttft_registry_new(&c);
}

static ttft_slow_request slow_at(const ttft_snapshot *s, int cls, ttft_slowest_by by, unsigned i) {
  ttft_slow_request o;
  memset(&o, 0xAB, sizeof o);
  o.struct_size = sizeof o;
  EXPECT_ERR(TTFT_OK, ttft_snapshot_slowest(s, cls, by, i, &o));
  return o;
}

static void trace_of(unsigned i, char out[33]) {
  snprintf(out, 33, "%016x%016x", 0xabcdefu + i, i + 1);
}

/* Stream i of a workload: begin at T0 + i ms, first token after
 * ttft(i), then 3 more tokens, one of them after gap(i). */
/* distinct for every i (+ i ns), so that the exact ranking has no ties */
static uint64_t w_ttft(unsigned i) { return (uint64_t)((i * 7919u) % 1000u + 1u) * 100000u + i; }
static uint64_t w_gap(unsigned i) { return (uint64_t)((i * 104729u) % 997u + 1u) * 90000u + i; }

static void play(ttft_registry *r, int cls, unsigned i) {
  char tid[33], rid[32];
  trace_of(i, tid);
  snprintf(rid, sizeof rid, "req-%u", i);
  ttft_request q;
  ttft_request_init(&q);
  q.class_id = cls;
  q.request_id = rid;
  q.trace_id = tid;
  uint64_t t = T0 + (uint64_t)i * MS;
  /* on a loaded machine (or under TSan) a begin may be refused for lack
   * of a reclaimed slot, by design (begin_retry.h): wait for one */
  ttft_seq s = begin_retry(r, &q, t, 200000, NULL);
  EXPECT_TRUE(s != 0);
  t += w_ttft(i);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t));
  t += 1000;
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t));
  t += w_gap(i);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t));
  t += 2000;
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, i % 5 == 0 ? TTFT_CANCELLED : TTFT_COMPLETED, t + 10));
}

typedef struct ranked {
  uint64_t v, t_end;
  unsigned i;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->v != y->v) return x->v > y->v ? -1 : 1;
  return x->t_end < y->t_end ? -1 : x->t_end > y->t_end;
}

static uint64_t w_end(unsigned i) { return T0 + (uint64_t)i * MS + w_ttft(i) + 3000 + w_gap(i) + 10; }

/* the exact k slowest of streams lo..hi-1 by `by` */
static unsigned exact_top(unsigned lo, unsigned hi, unsigned step, ttft_slowest_by by, unsigned k,
                          ranked *out) {
  unsigned n = 0;
  ranked *all = calloc(hi, sizeof *all);
  for (unsigned i = lo; i < hi; i += step) {
    all[n].v = by == TTFT_SLOWEST_TTFT ? w_ttft(i) : (w_gap(i) > 2000 ? w_gap(i) : 2000);
    all[n].t_end = w_end(i);
    all[n++].i = i;
  }
  qsort(all, n, sizeof *all, cmp_ranked);
  if (n > k) n = k;
  memcpy(out, all, n * sizeof *out);
  free(all);
  return n;
}

static void expect_list(const ttft_snapshot *s, int cls, ttft_slowest_by by, const ranked *want,
                        unsigned n) {
  EXPECT_EQ_U64(n, ttft_snapshot_slowest_count(s, cls, by));
  for (unsigned j = 0; j < n && j < ttft_snapshot_slowest_count(s, cls, by); j++) {
    ttft_slow_request o = slow_at(s, cls, by, j);
    unsigned i = want[j].i;
    char tid[33], rid[32];
    trace_of(i, tid);
    snprintf(rid, sizeof rid, "req-%u", i);
    EXPECT_EQ_U64(want[j].v, o.value_ns);
    EXPECT_STREQ(rid, o.request_id);
    EXPECT_STREQ(tid, o.trace_id);
    EXPECT_EQ_U64(w_ttft(i), o.ttft_ns);
    EXPECT_EQ_U64(w_gap(i) > 2000 ? w_gap(i) : 2000, o.max_gap_ns);
    EXPECT_EQ_U64(T0 + (uint64_t)i * MS, o.t_begin_ns);
    EXPECT_EQ_U64(w_end(i), o.t_end_ns);
    EXPECT_EQ_U64(4, o.tokens);
    EXPECT_EQ_INT(i % 5 == 0 ? TTFT_CANCELLED : TTFT_COMPLETED, o.status);
    EXPECT_EQ_INT(TTFT_STALL_UNKNOWN, o.cause);
  }
}

TEST(top_k_by_ttft_and_gap) {
  ttft_registry *r = reg_k(8, 8);
  int chat = ttft_class_add(r, "chat", NULL);
  for (unsigned i = 0; i < 500; i++) play(r, i % 2 ? chat : 0, i);
  ttft_snapshot *s = ttft_snapshot_take(r);
  ranked want[8];
  for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++) {
    unsigned n = exact_top(0, 500, 2, (ttft_slowest_by)by, 8, want);
    expect_list(s, 0, (ttft_slowest_by)by, want, n);
    n = exact_top(1, 500, 2, (ttft_slowest_by)by, 8, want);
    expect_list(s, chat, (ttft_slowest_by)by, want, n);
    n = exact_top(0, 500, 1, (ttft_slowest_by)by, 8, want);
    expect_list(s, TTFT_CLASS_ALL, (ttft_slowest_by)by, want, n);
  }
  ttft_slow_request o = slow_at(s, TTFT_CLASS_ALL, TTFT_SLOWEST_TTFT, 0);
  EXPECT_TRUE(o.class_id == 0 || o.class_id == chat);
  EXPECT_TRUE(o.t_end_unix_ns > UINT64_C(1600000000) * 1000000000u); /* a wall-clock time */
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* An engine loop by hand (as in test_causes.c): a step of `dur` from *t,
 * recorded with ttft_engine_step, then s emits one token at its end. */
static void eng_step(ttft_registry *r, uint64_t *t, uint64_t dur, uint32_t prefill, ttft_seq s) {
  ttft_step_info in;
  ttft_step_info_init(&in);
  in.prefill_tokens = prefill;
  in.decode_seqs = s ? 1 : 0;
  EXPECT_ERR(TTFT_OK, ttft_engine_step(r, &in, *t, *t + dur));
  if (s) EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, *t + dur));
  *t += dur + 1 * MS;
}

/* The cause listed with a request is the one the stall path gave its
 * longest gap — not its latest stall's (ttft_seq_stats last_stall_cause):
 * a (frozen) 3 s gap then a 600 ms prefill stall lists engine_idle; a
 * 600 ms prefill stall then a 300 ms freeze lists prefill; a request
 * whose longest gap is no stall lists unknown. */
TEST(cause_is_the_longest_gaps) {
  ttft_registry *r = reg_k(8, 2);
  EXPECT_NOT_NULL(r);
  uint64_t t = T0;
  ttft_request q;
  ttft_request_init(&q);
  q.request_id = "idle-then-prefill";
  ttft_seq a = ttft_begin_ex(r, &q, t);
  for (int i = 0; i < 8; i++) eng_step(r, &t, 20 * MS, i ? 0 : 100, a);
  t += 3000 * MS; /* a frozen process: no step, no token */
  eng_step(r, &t, 20 * MS, 0, a);
  for (int i = 0; i < 4; i++) eng_step(r, &t, 20 * MS, 0, a);
  eng_step(r, &t, 600 * MS, 8000, a); /* another request's long prompt */
  ttft_seq_info info = {.struct_size = sizeof info};
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(r, a, &info));
  EXPECT_EQ_INT(TTFT_STALL_PREFILL, info.last_stall_cause);
  EXPECT_EQ_U64(2, info.stalls);
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, a, TTFT_COMPLETED, t));

  q.request_id = "prefill-then-idle";
  ttft_seq b = ttft_begin_ex(r, &q, t);
  for (int i = 0; i < 8; i++) eng_step(r, &t, 20 * MS, i ? 0 : 100, b);
  eng_step(r, &t, 600 * MS, 8000, b);
  for (int i = 0; i < 4; i++) eng_step(r, &t, 20 * MS, 0, b);
  t += 300 * MS;
  eng_step(r, &t, 20 * MS, 0, b);
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(r, b, &info));
  EXPECT_EQ_INT(TTFT_STALL_ENGINE_IDLE, info.last_stall_cause);
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, b, TTFT_COMPLETED, t));

  q.request_id = "no-stall";
  ttft_seq c = ttft_begin_ex(r, &q, t);
  for (int i = 0; i < 5; i++) eng_step(r, &t, 20 * MS, i ? 0 : 100, c);
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, c, TTFT_COMPLETED, t));

  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(2, ttft_snapshot_stalls_by_cause(s, 0, TTFT_STALL_PREFILL));
  EXPECT_EQ_U64(2, ttft_snapshot_stalls_by_cause(s, 0, TTFT_STALL_ENGINE_IDLE));
  EXPECT_EQ_U64(3, ttft_snapshot_slowest_count(s, 0, TTFT_SLOWEST_GAP));
  ttft_slow_request o = slow_at(s, 0, TTFT_SLOWEST_GAP, 0);
  EXPECT_STREQ("idle-then-prefill", o.request_id);
  EXPECT_EQ_U64(3021 * MS, o.max_gap_ns);
  EXPECT_EQ_INT(TTFT_STALL_ENGINE_IDLE, o.cause);
  o = slow_at(s, 0, TTFT_SLOWEST_GAP, 1);
  EXPECT_STREQ("prefill-then-idle", o.request_id);
  EXPECT_EQ_U64(601 * MS, o.max_gap_ns);
  EXPECT_EQ_INT(TTFT_STALL_PREFILL, o.cause);
  o = slow_at(s, 0, TTFT_SLOWEST_GAP, 2);
  EXPECT_STREQ("no-stall", o.request_id);
  EXPECT_EQ_U64(21 * MS, o.max_gap_ns);
  EXPECT_EQ_INT(TTFT_STALL_UNKNOWN, o.cause);
  /* the same cause in the TTFT list, and through the encoding */
  for (unsigned j = 0; j < ttft_snapshot_slowest_count(s, 0, TTFT_SLOWEST_TTFT); j++) {
    ttft_slow_request x = slow_at(s, 0, TTFT_SLOWEST_TTFT, j);
    ttft_stall_cause want = !strcmp(x.request_id, "idle-then-prefill")   ? TTFT_STALL_ENGINE_IDLE
                            : !strcmp(x.request_id, "prefill-then-idle") ? TTFT_STALL_PREFILL
                                                                         : TTFT_STALL_UNKNOWN;
    EXPECT_EQ_INT(want, x.cause);
  }
  static unsigned char buf[1 << 20];
  long n = ttft_snapshot_encode(s, buf, sizeof buf);
  EXPECT_TRUE(n > 0);
  int err = -1;
  ttft_snapshot *d = ttft_snapshot_decode(buf, (size_t)n, &err);
  EXPECT_ERR(TTFT_OK, err);
  EXPECT_NOT_NULL(d);
  o = slow_at(d, 0, TTFT_SLOWEST_GAP, 1);
  EXPECT_EQ_INT(TTFT_STALL_PREFILL, o.cause);
  ttft_snapshot_free(d);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TEST(k_is_configurable_and_zero_disables) {
  ttft_config c;
  ttft_config_init(&c);
  EXPECT_EQ_U64(8, c.slowest_k);
  c.slowest_k = TTFT_MAX_SLOWEST_K + 1;
  EXPECT_NULL(ttft_registry_new(&c));
  ttft_registry *r = reg_k(3, 2);
  for (unsigned i = 0; i < 50; i++) play(r, 0, i);
  ttft_snapshot *s = ttft_snapshot_take(r);
  ranked want[3];
  unsigned n = exact_top(0, 50, 1, TTFT_SLOWEST_TTFT, 3, want);
  expect_list(s, 0, TTFT_SLOWEST_TTFT, want, n);
  ttft_slow_request o;
  o.struct_size = sizeof o;
  EXPECT_ERR(TTFT_ERANGE, ttft_snapshot_slowest(s, 0, TTFT_SLOWEST_TTFT, 3, &o));
  EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_slowest(s, 5, TTFT_SLOWEST_TTFT, 0, &o));
  EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_slowest(s, 0, TTFT_SLOWEST_COUNT_, 0, &o));
  EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_slowest(NULL, 0, TTFT_SLOWEST_TTFT, 0, &o));
  EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_slowest(s, 0, TTFT_SLOWEST_TTFT, 0, NULL));
  o.struct_size = sizeof o + 1;
  EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_slowest(s, 0, TTFT_SLOWEST_TTFT, 0, &o));
  EXPECT_EQ_U64(0, ttft_snapshot_slowest_count(NULL, 0, TTFT_SLOWEST_TTFT));
  EXPECT_EQ_U64(0, ttft_snapshot_slowest_count(s, 0, (ttft_slowest_by)7));
  /* an older caller's ttft_slow_request: filled up to its size only */
  union {
    ttft_slow_request o;
    unsigned char b[sizeof(ttft_slow_request)];
  } u;
  memset(&u, 0xEE, sizeof u);
  u.o.struct_size = offsetof(ttft_slow_request, max_gap_ns);
  EXPECT_ERR(TTFT_OK, ttft_snapshot_slowest(s, 0, TTFT_SLOWEST_TTFT, 0, &u.o));
  EXPECT_EQ_U64(want[0].v, u.o.value_ns);
  for (size_t i = offsetof(ttft_slow_request, max_gap_ns); i < sizeof u; i++) EXPECT_EQ_INT(0xEE, u.b[i]);
  ttft_snapshot_free(s);
  ttft_registry_free(r);

  r = reg_k(0, 2);
  for (unsigned i = 0; i < 20; i++) play(r, 0, i);
  s = ttft_snapshot_take(r);
  EXPECT_EQ_U64(0, ttft_snapshot_slowest_count(s, 0, TTFT_SLOWEST_TTFT));
  EXPECT_EQ_U64(0, ttft_snapshot_slowest_count(s, TTFT_CLASS_ALL, TTFT_SLOWEST_GAP));
  EXPECT_EQ_U64(20, ttft_snapshot_count(s, TTFT_METRIC_TTFT));
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* begin one stream with these ids, TTFT 1 s (the slowest), end it; the
 * slowest entry of a fresh registry */
static ttft_slow_request one(const char *rid, const char *tid, uint64_t *invalid) {
  ttft_registry *r = reg_k(2, 2);
  ttft_request q;
  ttft_request_init(&q);
  q.request_id = rid;
  q.trace_id = tid;
  ttft_seq s = ttft_begin_ex(r, &q, T0);
  EXPECT_TRUE(s != 0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, T0 + 1000 * MS));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, T0 + 1001 * MS));
  ttft_snapshot *snap = ttft_snapshot_take(r);
  ttft_slow_request o = slow_at(snap, 0, TTFT_SLOWEST_TTFT, 0);
  EXPECT_EQ_U64(0, ttft_snapshot_slowest_count(snap, 0, TTFT_SLOWEST_GAP)); /* one token: no gap */
  *invalid = ttft_snapshot_counter(snap, TTFT_COUNTER_TRACE_ID_INVALID);
  ttft_snapshot_free(snap);
  ttft_registry_free(r);
  return o;
}

TEST(trace_id_must_be_w3c) {
  uint64_t bad;
  ttft_slow_request o = one(NULL, "4bf92f3577b34da6a3ce929d0e0e4736", &bad);
  EXPECT_STREQ("4bf92f3577b34da6a3ce929d0e0e4736", o.trace_id);
  EXPECT_STREQ("", o.request_id);
  EXPECT_EQ_U64(0, bad);
  static const char *const refused[] = {
      "4BF92F3577B34DA6A3CE929D0E0E4736",  /* upper case */
      "00000000000000000000000000000000",  /* all zero: invalid per W3C */
      "4bf92f3577b34da6a3ce929d0e0e473",   /* 31 digits */
      "4bf92f3577b34da6a3ce929d0e0e47366", /* 33 digits */
      "4bf92f3577b34da6a3ce929d0e0e473g",  /* not hex */
      "4bf92f3577b34da6-3ce929d0e0e4736",
      "",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /* a whole traceparent */
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    o = one("r", refused[i], &bad);
    EXPECT_STREQ("", o.trace_id);
    EXPECT_STREQ("r", o.request_id); /* still measured, with its request id */
    EXPECT_EQ_U64(1000 * MS, o.value_ns);
    EXPECT_EQ_U64(1, bad);
  }
}

TEST(request_id_bounded_and_sanitised) {
  uint64_t bad;
  char longid[300];
  memset(longid, 'x', sizeof longid - 1);
  longid[sizeof longid - 1] = '\0';
  ttft_slow_request o = one(longid, NULL, &bad);
  EXPECT_EQ_U64(TTFT_MAX_REQUEST_ID, strlen(o.request_id));
  EXPECT_TRUE(strspn(o.request_id, "x") == TTFT_MAX_REQUEST_ID);
  /* a two-byte character straddling the bound is left out whole */
  char cut[TTFT_MAX_REQUEST_ID + 8];
  memset(cut, 'a', TTFT_MAX_REQUEST_ID - 1);
  strcpy(cut + TTFT_MAX_REQUEST_ID - 1, "\xc3\xa9z");
  o = one(cut, NULL, &bad);
  EXPECT_EQ_U64(TTFT_MAX_REQUEST_ID - 1, strlen(o.request_id));
  /* control characters and malformed UTF-8 become '?'; good UTF-8 stays */
  o = one("a\nb\"c\x01\x7f\xff\xc3(\xe2\x82\xac\xf0\x9f\x98\x80", NULL, &bad);
  EXPECT_STREQ("a?b\"c???\x3f(\xe2\x82\xac\xf0\x9f\x98\x80", o.request_id);
  o = one("", NULL, &bad);
  EXPECT_STREQ("", o.request_id);
}

/* Issue 27.2: ids as clients send them. Nothing a client puts in an id
 * makes a begin fail or go unmeasured: the bindings pass a NUL as '?' and
 * cut an id to what the library reads (TTFT_MAX_REQUEST_ID + 1 times 4
 * bytes of a request id, 33 of a trace id), which the guard page below
 * proves; in C a string ends at its NUL. */
#define MB (1u << 20)
#define ID_READ ((size_t)TTFT_ID_READ)

/* n copies of pattern p (plen bytes), NUL-terminated, malloc'd */
static char *repeat(const char *p, size_t plen, size_t n) {
  char *b = malloc(plen * n + 1);
  for (size_t i = 0; i < n; i++) memcpy(b + i * plen, p, plen);
  b[plen * n] = '\0';
  return b;
}

TEST(ids_as_clients_send_them) {
  uint64_t bad;
  static const struct {
    const char *rid, *want;
  } rids[] = {
      {"ab\0cd", "ab"}, /* a C string ends at its NUL */
      {"\x01\x1f\x7f", "???"},
      {"caf\xc3\xa9\xf4\x8f\xbf\xbf\xef\xbf\xbf", "caf\xc3\xa9\xf4\x8f\xbf\xbf\xef\xbf\xbf"},
      {"\xed\xa0\xbd\xed\xb8\x80", "??????"},  /* a surrogate pair as CESU-8 */
      {"\xc0\xaf\xe0\x80\xaf", "?????"},       /* overlong '/' */
      {"\xf4\x90\x80\x80", "????"},            /* past U+10FFFF */
      {"\xf0\x9f\x98", "?"},                   /* a cut character, one '?' */
      {"a\xf0\x9f\x98" "b", "a?b"},
      {"\xc2\x85", "\xc2\x85"},                /* a C1 control is kept */
      {"", ""},
  };
  for (size_t i = 0; i < sizeof rids / sizeof rids[0]; i++) {
    ttft_slow_request o = one(rids[i].rid, NULL, &bad); /* measured: TTFT 1 s */
    EXPECT_STREQ(rids[i].want, o.request_id);
    EXPECT_EQ_U64(1000 * MS, o.value_ns);
    EXPECT_EQ_U64(0, bad);
  }
  /* 1 MB request ids */
  static const struct {
    const char *pat, *want_unit;
    size_t units; /* of want_unit kept */
  } big[] = {
      {"x", "x", 63},
      {"\xff", "?", 63},
      {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80", 15},
      {"\xf0\x9f\x98", "?", 63}, /* 3 bytes a '?': the most read per byte kept */
      {"\xed\xa0\xbd", "?", 63},
  };
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
    size_t pl = strlen(big[i].pat);
    char *id = repeat(big[i].pat, pl, MB / pl);
    char *want = repeat(big[i].want_unit, strlen(big[i].want_unit), big[i].units);
    ttft_slow_request o = one(id, NULL, &bad);
    EXPECT_STREQ(want, o.request_id);
    EXPECT_EQ_U64(1000 * MS, o.value_ns);
    free(id);
    free(want);
  }
  /* trace ids: a 1 MB one is ignored and counted; a C string ending after
   * 32 good digits is the trace id (the bindings turn that NUL into '?') */
  char *huge = repeat("4bf92f3577b34da6a3ce929d0e0e4736", 32, MB / 32);
  ttft_slow_request o = one("r", huge, &bad);
  EXPECT_STREQ("", o.trace_id);
  EXPECT_EQ_U64(1, bad);
  EXPECT_EQ_U64(1000 * MS, o.value_ns);
  free(huge);
  o = one("r", "4bf92f3577b34da6a3ce929d0e0e4736\0junk", &bad);
  EXPECT_STREQ("4bf92f3577b34da6a3ce929d0e0e4736", o.trace_id);
  EXPECT_EQ_U64(0, bad);
  o = one("r", "4bf92f3577b34da6a3ce929d0e0e4736?junk", &bad);
  EXPECT_STREQ("", o.trace_id);
  EXPECT_EQ_U64(1, bad);
  o = one("r", "4bf92f3577b34da6?3ce929d0e0e4736", &bad);
  EXPECT_EQ_U64(1, bad);
}

/* The bound the bindings cut ids at: an id with no NUL whose last byte is
 * the last before a PROT_NONE page is read without a fault when it is
 * ID_READ bytes long (33 for a trace id), whatever its bytes. */
TEST(ids_read_no_further_than_the_bindings_cut) {
  long pg = sysconf(_SC_PAGESIZE);
  unsigned char *m = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_TRUE(m != MAP_FAILED);
  if (m == MAP_FAILED) return;
  EXPECT_EQ_INT(0, mprotect(m + pg, (size_t)pg, PROT_NONE));
  static const char *const pats[] = {"\xf0\x9f\x98", "\xf0\x9f\x98\x80", "\xe2\x82", "\xff", "a",
                                     "\xc3\xa9", "\x01"};
  for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++) {
    unsigned char *id = m + pg - ID_READ;
    size_t pl = strlen(pats[i]);
    for (size_t j = 0; j < ID_READ; j++) id[j] = (unsigned char)pats[i][j % pl];
    uint64_t bad;
    ttft_slow_request o = one((const char *)id, (const char *)(m + pg - 33), &bad);
    EXPECT_LE_U64(strlen(o.request_id), TTFT_MAX_REQUEST_ID);
    EXPECT_GE_U64(strlen(o.request_id), TTFT_MAX_REQUEST_ID - 3);
    EXPECT_EQ_U64(1, bad);
  }
  munmap(m, (size_t)pg * 2);
}

/* Every code point as UTF-8, 15 to an id (at most 60 bytes: none is cut),
 * 64 ids per snapshot, each batch slower than the ones before it: control
 * characters (C0, DEL) are '?', the UTF-8 encoded surrogates are 3 '?'
 * each (not well-formed UTF-8), everything else is kept as given. */
static size_t utf8_put(unsigned c, char *o) {
  if (c < 0x80) return o[0] = (char)c, 1;
  if (c < 0x800) return o[0] = (char)(0xC0 | c >> 6), o[1] = (char)(0x80 | (c & 0x3F)), 2;
  if (c < 0x10000) {
    o[0] = (char)(0xE0 | c >> 12), o[1] = (char)(0x80 | (c >> 6 & 0x3F));
    o[2] = (char)(0x80 | (c & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | c >> 18), o[1] = (char)(0x80 | (c >> 12 & 0x3F));
  o[2] = (char)(0x80 | (c >> 6 & 0x3F)), o[3] = (char)(0x80 | (c & 0x3F));
  return 4;
}

TEST(every_code_point) {
  ttft_registry *r = reg_k(TTFT_MAX_SLOWEST_K, 2);
  char want[TTFT_MAX_SLOWEST_K][TTFT_MAX_REQUEST_ID + 1];
  unsigned nw = 0;
  uint64_t n = 0, failed = 0;
  for (unsigned base = 1; base <= 0x10FFFF; base += 15) { /* 0 would end the id */
    char id[64], *w = want[nw];
    size_t k = 0, kw = 0;
    for (unsigned c = base; c < base + 15 && c <= 0x10FFFF; c++) {
      size_t l = utf8_put(c, id + k);
      if (c < 0x20 || c == 0x7F) w[kw++] = '?';
      else if (c >= 0xD800 && c <= 0xDFFF) memcpy(w + kw, "???", 3), kw += 3;
      else memcpy(w + kw, id + k, l), kw += l;
      k += l;
    }
    id[k] = w[kw] = '\0';
    ttft_request q;
    ttft_request_init(&q);
    q.request_id = id;
    ttft_seq s = ttft_begin_ex(r, &q, T0);
    EXPECT_TRUE(s != 0);
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, T0 + (n + 1) * 1000));
    EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, T0 + (n + 1) * 1000));
    n++;
    if (++nw == TTFT_MAX_SLOWEST_K || base + 15 > 0x10FFFF) {
      ttft_snapshot *snap = ttft_snapshot_take(r);
      for (unsigned j = 0; j < nw; j++) { /* the slowest is the last played */
        ttft_slow_request o = slow_at(snap, 0, TTFT_SLOWEST_TTFT, nw - 1 - j);
        if (strcmp(want[j], o.request_id)) {
          failed++;
          EXPECT_STREQ(want[j], o.request_id);
        }
      }
      ttft_snapshot_free(snap);
      nw = 0;
    }
  }
  ttft_snapshot *snap = ttft_snapshot_take(r);
  EXPECT_EQ_U64(n, ttft_snapshot_count(snap, TTFT_METRIC_TTFT));
  EXPECT_EQ_U64(0, ttft_snapshot_counter(snap, TTFT_COUNTER_DROPPED));
  EXPECT_EQ_U64(0, failed);
  ttft_snapshot_free(snap);
  ttft_registry_free(r);
}

TEST(older_request_struct_still_works) {
  ttft_registry *r = reg_k(4, 2);
  ttft_request q;
  ttft_request_init(&q);
  q.request_id = "must-not-be-read";
  q.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  q.struct_size = offsetof(ttft_request, request_id); /* a 1.1 caller */
  ttft_seq s = ttft_begin_ex(r, &q, T0);
  EXPECT_TRUE(s != 0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, T0 + 5 * MS));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, T0 + 6 * MS));
  ttft_snapshot *snap = ttft_snapshot_take(r);
  ttft_slow_request o = slow_at(snap, 0, TTFT_SLOWEST_TTFT, 0);
  EXPECT_STREQ("", o.request_id);
  EXPECT_STREQ("", o.trace_id);
  EXPECT_EQ_U64(5 * MS, o.value_ns);
  ttft_request_init_sized(&q, offsetof(ttft_request, request_id));
  EXPECT_EQ_U64(offsetof(ttft_request, request_id), q.struct_size);
  ttft_snapshot_free(snap);
  ttft_registry_free(r);
}

/* a slot reused by a stream without ids does not inherit the old ones */
/* One slot and one list entry, rewritten by shorter ids: the words past a
 * request id's length are not rewritten (neither in the slot's ids nor in
 * the entry), and nothing of a longer, earlier id shows. */
TEST(shorter_ids_over_longer_ones) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 1;
  c.slowest_k = 1;
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  static const char *const ids[] = {
      "a-very-long-request-identifier-0123456789-abcdefghijklmnopqrstuv", "req-12345678", "b", NULL};
  static const char *const traces[] = {"4bf92f3577b34da6a3ce929d0e0e4736", NULL,
                                       "00000000000000000000000000000001", NULL};
  uint64_t t = T0;
  for (int i = 0; i < 4; i++) {
    ttft_request q;
    ttft_request_init(&q);
    q.request_id = ids[i];
    q.trace_id = traces[i];
    ttft_seq s = 0;
    for (int tries = 0; tries < 1000 && !(s = ttft_begin_ex(r, &q, t)); tries++) {
    }
    EXPECT_TRUE(s != 0);
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t + (uint64_t)(i + 1) * MS)); /* slower each time */
    EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, t + 10 * MS));
    t += 20 * MS;
    ttft_snapshot *snap = ttft_snapshot_take(r);
    EXPECT_EQ_U64(1, ttft_snapshot_slowest_count(snap, 0, TTFT_SLOWEST_TTFT));
    ttft_slow_request o = slow_at(snap, 0, TTFT_SLOWEST_TTFT, 0);
    EXPECT_EQ_U64((uint64_t)(i + 1) * MS, o.value_ns);
    char want[TTFT_MAX_REQUEST_ID + 1] = "";
    if (ids[i]) snprintf(want, sizeof want, "%s", ids[i]); /* the long one is cut at 63 bytes */
    EXPECT_STREQ(want, o.request_id);
    EXPECT_STREQ(traces[i] ? traces[i] : "", o.trace_id);
    ttft_snapshot_free(snap);
  }
  ttft_registry_free(r);
}

TEST(ids_do_not_leak_into_reused_slots) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 1;
  ttft_registry *r = ttft_registry_new(&c);
  ttft_request q;
  ttft_request_init(&q);
  q.request_id = "first";
  q.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  ttft_seq s = ttft_begin_ex(r, &q, T0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, T0 + MS));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, T0 + 2 * MS));
  for (int tries = 0; tries < 1000 && !(s = ttft_begin(r, T0 + 3 * MS)); tries++) {
  }
  EXPECT_TRUE(s != 0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, T0 + 103 * MS));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, T0 + 104 * MS));
  ttft_snapshot *snap = ttft_snapshot_take(r);
  ttft_slow_request o = slow_at(snap, 0, TTFT_SLOWEST_TTFT, 0);
  EXPECT_EQ_U64(100 * MS, o.value_ns);
  EXPECT_STREQ("", o.request_id);
  EXPECT_STREQ("", o.trace_id);
  o = slow_at(snap, 0, TTFT_SLOWEST_TTFT, 1);
  EXPECT_STREQ("first", o.request_id);
  ttft_snapshot_free(snap);
  ttft_registry_free(r);
}

/* Several threads (private shards and, with max_threads 2, the shared
 * one) end streams while snapshots are taken: every snapshot's list is
 * sorted and holds only real streams, and the final one is exact. */
#define THREADS 4
#define PER_THREAD 3000
static ttft_registry *g_r;
static void *worker(void *arg) {
  unsigned t = (unsigned)(uintptr_t)arg;
  for (unsigned j = 0; j < PER_THREAD; j++) play(g_r, 0, t * PER_THREAD + j);
  return NULL;
}

static void concurrent(uint32_t max_threads) {
  g_r = reg_k(8, max_threads);
  pthread_t th[THREADS];
  for (unsigned t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
  for (int k = 0; k < 50; k++) {
    ttft_snapshot *s = ttft_snapshot_take(g_r);
    unsigned n = ttft_snapshot_slowest_count(s, 0, TTFT_SLOWEST_GAP);
    uint64_t prev = UINT64_MAX;
    for (unsigned j = 0; j < n; j++) {
      ttft_slow_request o = slow_at(s, 0, TTFT_SLOWEST_GAP, j);
      unsigned i = 0;
      EXPECT_EQ_INT(1, sscanf(o.request_id, "req-%u", &i));
      EXPECT_EQ_U64(w_gap(i) > 2000 ? w_gap(i) : 2000, o.value_ns);
      EXPECT_EQ_U64(w_ttft(i), o.ttft_ns);
      EXPECT_LE_U64(o.value_ns, prev);
      prev = o.value_ns;
    }
    ttft_snapshot_free(s);
  }
  for (unsigned t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  ttft_snapshot *s = ttft_snapshot_take(g_r);
  ranked want[8];
  for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++) {
    unsigned n = exact_top(0, THREADS * PER_THREAD, 1, (ttft_slowest_by)by, 8, want);
    expect_list(s, 0, (ttft_slowest_by)by, want, n);
  }
  ttft_snapshot_free(s);
  ttft_registry_free(g_r);
}

TEST(concurrent_private_shards) { concurrent(8); }
TEST(concurrent_shared_shard) { concurrent(1); }

static int same_lists(const ttft_snapshot *a, const ttft_snapshot *b, int cls) {
  int ok = 1;
  for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++) {
    unsigned n = ttft_snapshot_slowest_count(a, cls, (ttft_slowest_by)by);
    EXPECT_EQ_U64(n, ttft_snapshot_slowest_count(b, cls, (ttft_slowest_by)by));
    if (n != ttft_snapshot_slowest_count(b, cls, (ttft_slowest_by)by)) ok = 0;
    for (unsigned j = 0; j < n && ok; j++) {
      ttft_slow_request x = slow_at(a, cls, (ttft_slowest_by)by, j);
      ttft_slow_request y = slow_at(b, cls, (ttft_slowest_by)by, j);
      EXPECT_TRUE(memcmp(&x, &y, sizeof x) == 0);
      if (memcmp(&x, &y, sizeof x) != 0) ok = 0;
    }
  }
  return ok;
}

TEST(codec_v3_round_trip) {
  ttft_registry *r = reg_k(5, 2);
  int chat = ttft_class_add(r, "chat", NULL);
  for (unsigned i = 0; i < 200; i++) play(r, i % 3 ? chat : 0, i);
  ttft_snapshot *s = ttft_snapshot_take(r);
  long n = ttft_snapshot_encode(s, NULL, 0);
  unsigned char *b = malloc((size_t)n);
  EXPECT_EQ_INT(n, ttft_snapshot_encode(s, b, (size_t)n));
  EXPECT_EQ_INT(5, b[4]); /* encoding version 5 (1.3): the lists as in 3, with the 1.3 fields */
  int err = 1;
  ttft_snapshot *d = ttft_snapshot_decode(b, (size_t)n, &err);
  EXPECT_ERR(TTFT_OK, err);
  EXPECT_NOT_NULL(d);
  if (d) {
    EXPECT_TRUE(same_lists(s, d, 0));
    EXPECT_TRUE(same_lists(s, d, chat));
    EXPECT_TRUE(same_lists(s, d, TTFT_CLASS_ALL));
    EXPECT_EQ_U64(5, ttft_snapshot_slowest_count(d, chat, TTFT_SLOWEST_TTFT));
    /* and the same bytes again */
    unsigned char *b2 = malloc((size_t)n);
    EXPECT_EQ_INT(n, ttft_snapshot_encode(d, b2, (size_t)n));
    EXPECT_TRUE(memcmp(b, b2, (size_t)n) == 0);
    free(b2);
  }
  ttft_snapshot_free(d);
  /* every truncation is refused */
  for (long cut = 0; cut < n; cut += 7) EXPECT_NULL(ttft_snapshot_decode(b, (size_t)cut, &err));
  free(b);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TEST(merge_keeps_the_k_slowest_of_the_union) {
  ttft_registry *ra = reg_k(6, 2), *rb = reg_k(6, 2);
  int ca = ttft_class_add(ra, "chat", NULL);
  (void)ttft_class_add(rb, "batch", NULL);
  int cb = ttft_class_add(rb, "chat", NULL);
  for (unsigned i = 0; i < 300; i++) play(ra, ca, i);
  for (unsigned i = 300; i < 600; i++) play(rb, cb, i);
  ttft_snapshot *a = ttft_snapshot_take(ra), *b = ttft_snapshot_take(rb);
  int err = 1;
  ttft_snapshot *m = ttft_snapshot_merge(a, b, &err);
  EXPECT_ERR(TTFT_OK, err);
  int cm = 1; /* chat is a's class 1 */
  EXPECT_STREQ("chat", ttft_snapshot_class_name(m, cm));
  ranked want[6];
  for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++) {
    unsigned n = exact_top(0, 600, 1, (ttft_slowest_by)by, 6, want);
    expect_list(m, cm, (ttft_slowest_by)by, want, n);
    expect_list(m, TTFT_CLASS_ALL, (ttft_slowest_by)by, want, n);
    for (unsigned j = 0; j < n; j++) EXPECT_EQ_INT(cm, slow_at(m, TTFT_CLASS_ALL, (ttft_slowest_by)by, j).class_id);
  }
  ttft_snapshot_free(m);
  ttft_snapshot_free(a);
  ttft_snapshot_free(b);
  ttft_registry_free(ra);
  ttft_registry_free(rb);
}

TEST(delta_lists_what_entered_in_the_window) {
  ttft_registry *r = reg_k(4, 2);
  for (unsigned i = 0; i < 100; i++) play(r, 0, i);
  ttft_snapshot *older = ttft_snapshot_take(r);
  /* streams 100..199 with the same shapes scaled up: all slower */
  for (unsigned i = 100; i < 200; i++) play(r, 0, i);
  ttft_snapshot *newer = ttft_snapshot_take(r);
  int err = 1;
  ttft_snapshot *d = ttft_snapshot_delta(newer, older, &err);
  EXPECT_ERR(TTFT_OK, err);
  for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++) {
    unsigned n = ttft_snapshot_slowest_count(d, 0, (ttft_slowest_by)by);
    /* every entry of newer's list that ended after older was taken, and only those */
    unsigned fresh = 0;
    for (unsigned j = 0; j < ttft_snapshot_slowest_count(newer, 0, (ttft_slowest_by)by); j++) {
      ttft_slow_request o = slow_at(newer, 0, (ttft_slowest_by)by, j);
      unsigned i = 0;
      sscanf(o.request_id, "req-%u", &i);
      if (i >= 100) {
        ttft_slow_request x = slow_at(d, 0, (ttft_slowest_by)by, fresh);
        EXPECT_STREQ(o.request_id, x.request_id);
        fresh++;
      }
    }
    EXPECT_EQ_U64(fresh, n);
  }
  /* nothing happened between two equal snapshots: empty lists */
  ttft_snapshot *same = ttft_snapshot_take(r);
  ttft_snapshot *d0 = ttft_snapshot_delta(same, newer, &err);
  EXPECT_EQ_U64(0, ttft_snapshot_slowest_count(d0, 0, TTFT_SLOWEST_TTFT));
  EXPECT_EQ_U64(0, ttft_snapshot_slowest_count(d0, TTFT_CLASS_ALL, TTFT_SLOWEST_GAP));
  ttft_snapshot_free(d0);
  ttft_snapshot_free(same);
  ttft_snapshot_free(d);
  ttft_snapshot_free(older);
  ttft_snapshot_free(newer);
  ttft_registry_free(r);
}

TU_MAIN()
