/*
 * test_traceparent.c — a W3C traceparent header accepted as a server
 * receives it (issue 32.4): ttft_traceparent_parse and
 * ttft_request.traceparent. The cases follow W3C trace-context level 1
 * ("traceparent Header", "Versioning of traceparent") and its test suite:
 * version 00 is exactly 55 characters; a higher version is read for its
 * first four fields; "ff", upper case, all-zero ids are invalid; optional
 * whitespace around the value is skipped. An invalid header is ignored and
 * counted as an invalid trace_id is.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"
#include "task.h"

#define MS UINT64_C(1000000)
#define T0 UINT64_C(1000000000)
#define TID "4bf92f3577b34da6a3ce929d0e0e4736"
#define TP "00-" TID "-00f067aa0ba902b7-01"

static int parse(const char *h, char out[33]) {
  memset(out, 'x', 33);
  return ttft_traceparent_parse(h, out);
}

TEST(parse_valid) {
  char out[33];
  EXPECT_ERR(TTFT_OK, parse(TP, out));
  EXPECT_STREQ(TID, out);
  EXPECT_ERR(TTFT_OK, parse("00-" TID "-00f067aa0ba902b7-00", out)); /* not sampled */
  EXPECT_STREQ(TID, out);
  /* optional whitespace around a header value (RFC 9110 OWS) */
  EXPECT_ERR(TTFT_OK, parse(" \t" TP " \t ", out));
  EXPECT_STREQ(TID, out);
  /* a higher version: its first four fields, then the end or '-' */
  EXPECT_ERR(TTFT_OK, parse("cc-" TID "-00f067aa0ba902b7-01", out));
  EXPECT_STREQ(TID, out);
  EXPECT_ERR(TTFT_OK, parse("cc-" TID "-00f067aa0ba902b7-01-what-the-future-will-be-like", out));
  EXPECT_STREQ(TID, out);
  EXPECT_ERR(TTFT_OK, parse("01-" TID "-00f067aa0ba902b7-09-", out));
  EXPECT_STREQ(TID, out);
  /* NULL out: only checks */
  EXPECT_ERR(TTFT_OK, ttft_traceparent_parse(TP, NULL));
}

TEST(parse_invalid) {
  static const char *const bad[] = {
      "",
      " ",
      TID, /* a bare trace-id is trace_id's, not a header */
      "00-" TID "-00f067aa0ba902b7-01-",             /* version 00 has exactly 4 fields */
      "00-" TID "-00f067aa0ba902b7-01-extra",
      "00-" TID "-00f067aa0ba902b7-01x",
      "00-" TID "-00f067aa0ba902b7-1",               /* flags: 2 digits */
      "00-" TID "-00f067aa0ba902b7-011",
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", /* upper case */
      "00-" TID "-00F067AA0BA902B7-01",
      "00-" TID "-00f067aa0ba902b7-0A",
      "0A-" TID "-00f067aa0ba902b7-01",
      "ff-" TID "-00f067aa0ba902b7-01",              /* version ff: forbidden */
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01", /* zero trace-id */
      "00-" TID "-0000000000000000-01",              /* zero parent-id */
      "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  /* 31 digits */
      "00-4bf92f3577b34da6a3ce929d0e0e47366-00f067aa0ba902b7-01",/* 33 digits */
      "00-" TID "-00f067aa0ba902b-01",               /* 15 digits */
      "00-" TID "-00f067aa0ba902b7a-01",             /* 17 digits */
      "00_" TID "-00f067aa0ba902b7-01",
      "00-" TID "_00f067aa0ba902b7-01",
      "00-" TID "-00f067aa0ba902b7_01",
      "0-" TID "-00f067aa0ba902b7-01",
      "000-" TID "-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
      "00-" TID "-00f067aa0ba902g7-01",
      "00 -" TID "-00f067aa0ba902b7-01",
      "cc-" TID "-00f067aa0ba902b7-01x",             /* higher version: end or '-' */
      "cc-" TID "-00f067aa0ba902b7-0",               /* shorter than 55 */
      "cc-" TID "-00f067aa0ba902b7",
      "\n" TP,
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char out[33];
    int rc = parse(bad[i], out);
    if (rc != TTFT_EINVAL) fprintf(stderr, "accepted: \"%s\"\n", bad[i]);
    EXPECT_ERR(TTFT_EINVAL, rc);
    EXPECT_STREQ("", out);
  }
  char out[33];
  EXPECT_ERR(TTFT_EINVAL, parse(NULL, out));
  EXPECT_STREQ("", out);
  EXPECT_ERR(TTFT_EINVAL, ttft_traceparent_parse(NULL, NULL));
}

/* a string ending right after any prefix of a valid header: refused, and
 * nothing past its NUL is read (ASan would see it: the copy is exact) */
TEST(parse_prefixes) {
  for (size_t n = 0; n < strlen(TP); n++) {
    char *p = malloc(n + 1);
    memcpy(p, TP, n);
    p[n] = '\0';
    char out[33];
    EXPECT_ERR(TTFT_EINVAL, parse(p, out));
    free(p);
  }
}

static ttft_registry *reg(void) {
  ttft_config c;
  ttft_config_init(&c);
  c.slowest_k = 4;
  return ttft_registry_new(&c);
}

/* begin with this request, TTFT 100 ms; the slowest entry's trace id and
 * TRACE_ID_INVALID */
static void one(const ttft_request *q, char tid[33], uint64_t *invalid) {
  ttft_registry *r = reg();
  ttft_seq s = ttft_begin_ex(r, q, T0);
  EXPECT_TRUE(s != 0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, T0 + 100 * MS));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, T0 + 101 * MS));
  ttft_snapshot *snap = ttft_snapshot_take(r);
  ttft_slow_request o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  EXPECT_ERR(TTFT_OK, ttft_snapshot_slowest(snap, 0, TTFT_SLOWEST_TTFT, 0, &o));
  memcpy(tid, o.trace_id, 33);
  *invalid = ttft_snapshot_counter(snap, TTFT_COUNTER_TRACE_ID_INVALID);
  ttft_snapshot_free(snap);
  ttft_registry_free(r);
}

TEST(request_traceparent) {
  ttft_request q;
  char tid[33];
  uint64_t bad;
  ttft_request_init(&q);
  EXPECT_TRUE(q.traceparent == NULL);
  q.traceparent = TP;
  one(&q, tid, &bad);
  EXPECT_STREQ(TID, tid);
  EXPECT_EQ_U64(0, bad);
  /* as received, whitespace and all; a future version */
  q.traceparent = "  cc-" TID "-00f067aa0ba902b7-01-later ";
  one(&q, tid, &bad);
  EXPECT_STREQ(TID, tid);
  EXPECT_EQ_U64(0, bad);
  /* invalid: ignored, still measured, counted as a bad trace_id is */
  q.traceparent = "00-" TID "-0000000000000000-01";
  one(&q, tid, &bad);
  EXPECT_STREQ("", tid);
  EXPECT_EQ_U64(1, bad);
  q.traceparent = "";
  one(&q, tid, &bad);
  EXPECT_STREQ("", tid);
  EXPECT_EQ_U64(1, bad);
  /* trace_id wins; traceparent is then not read (an invalid one is not
   * counted) */
  q.trace_id = "0af7651916cd43dd8448eb211c80319c";
  q.traceparent = "garbage";
  one(&q, tid, &bad);
  EXPECT_STREQ("0af7651916cd43dd8448eb211c80319c", tid);
  EXPECT_EQ_U64(0, bad);
}

/* A 1.2 caller's struct (no traceparent field): whatever lies past its
 * struct_size is not read */
TEST(older_struct_ignores_traceparent) {
  ttft_request q;
  char tid[33];
  uint64_t bad;
  ttft_request_init(&q);
  q.traceparent = TP;
  q.struct_size = offsetof(ttft_request, traceparent);
  one(&q, tid, &bad);
  EXPECT_STREQ("", tid);
  EXPECT_EQ_U64(0, bad);
  /* ttft_request_init_sized leaves the field alone */
  memset(&q, 0x5A, sizeof q);
  ttft_request_init_sized(&q, offsetof(ttft_request, traceparent));
  EXPECT_EQ_U64(offsetof(ttft_request, traceparent), q.struct_size);
  unsigned char *p = (unsigned char *)&q + offsetof(ttft_request, traceparent);
  EXPECT_EQ_INT(0x5A, p[0]);
}

TU_MAIN()
