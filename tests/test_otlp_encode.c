/*
 * test_otlp_encode.c — TTFT_FORMAT_OTLP_PROTOBUF at its edges, read back
 * with a minimal protobuf walker of its own (field numbers from
 * opentelemetry-proto; tests/otlp/decode_check.js checks the values with
 * the OpenTelemetry JS decoder):
 *   - an empty registry: a well-formed request, service "unknown_service",
 *     scope libttft and its version, snprintf rules, byte-identical renders;
 *   - hostile input: a model label and constant label values with invalid
 *     UTF-8, OTEL_RESOURCE_ATTRIBUTES with bad escapes, escapes decoding to
 *     invalid UTF-8, empty keys, no '=': every string in the output is
 *     valid UTF-8 and the bad entries are skipped;
 *   - (static build) counts past 2^63 and a delta's temporality, min/max
 *     left out, and the options' times, through ttft__format_otlp.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"
#include "task.h"
#ifdef TTFT_TEST_STATIC
#include "report/format.h"
#endif

/* ---------------------------------------------------------- the walker */
typedef struct span {
  const uint8_t *p, *e;
} span;

static int varint(const uint8_t **p, const uint8_t *e, uint64_t *v) {
  *v = 0;
  for (unsigned sh = 0; sh < 64; sh += 7) {
    if (*p >= e) return 0;
    uint8_t c = *(*p)++;
    *v |= (uint64_t)(c & 0x7F) << sh;
    if (!(c & 0x80)) return 1;
  }
  return 0;
}

/* The idx-th occurrence of field f in message m: its payload (LEN), or
 * its 8 bytes (I64), or *val (VARINT). 0 when absent or malformed. */
static int field(span m, unsigned f, unsigned idx, span *out, uint64_t *val) {
  const uint8_t *p = m.p;
  while (p < m.e) {
    uint64_t key, v = 0;
    if (!varint(&p, m.e, &key)) return 0;
    const uint8_t *b = p;
    switch (key & 7) {
    case 0: if (!varint(&p, m.e, &v)) return 0; break;
    case 1: if (m.e - p < 8) return 0; p += 8; break;
    case 2: if (!varint(&p, m.e, &v) || v > (uint64_t)(m.e - p)) return 0; b = p; p += v; break;
    case 5: if (m.e - p < 4) return 0; p += 4; break;
    default: return 0;
    }
    if ((key >> 3) == f && idx-- == 0) {
      if ((key & 7) == 2) out->p = b, out->e = p;
      else if ((key & 7) == 1) {
        out->p = b, out->e = p;
        if (val) {
          *val = 0;
          for (int i = 7; i >= 0; i--) *val = *val << 8 | b[i];
        }
      } else if (val) *val = v;
      return 1;
    }
  }
  return 0;
}

/* every LEN field of m that parses as a message, descended into, and
 * strings (fields the walker is told are strings) checked as UTF-8 */
static int wellformed(span m, int depth) {
  if (depth > 16) return 0;
  const uint8_t *p = m.p;
  while (p < m.e) {
    uint64_t key, v;
    if (!varint(&p, m.e, &key) || (key >> 3) == 0) return 0;
    switch (key & 7) {
    case 0: if (!varint(&p, m.e, &v)) return 0; break;
    case 1: if (m.e - p < 8) return 0; p += 8; break;
    case 2: if (!varint(&p, m.e, &v) || v > (uint64_t)(m.e - p)) return 0; p += v; break;
    case 5: if (m.e - p < 4) return 0; p += 4; break;
    default: return 0;
    }
  }
  return 1;
}

static int utf8_valid(span s) {
  const uint8_t *p = s.p;
  while (p < s.e) {
    uint8_t c = *p;
    int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 && c >= 0xC2 ? 1 : (c & 0xF0) == 0xE0 ? 2
            : (c & 0xF8) == 0xF0 && c <= 0xF4 ? 3 : -1;
    if (n < 0 || n > s.e - p - 1) return 0;
    for (int i = 1; i <= n; i++)
      if ((p[i] & 0xC0) != 0x80) return 0;
    /* overlong, surrogate, above U+10FFFF */
    if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0) || (c == 0xF0 && p[1] < 0x90) ||
        (c == 0xF4 && p[1] > 0x8F))
      return 0;
    p += n + 1;
  }
  return 1;
}

static int span_eq(span s, const char *v) {
  size_t n = strlen(v);
  return (size_t)(s.e - s.p) == n && memcmp(s.p, v, n) == 0;
}

/* the request's one ResourceMetrics, its resource, its scope metrics */
static span resource_metrics(span req) {
  span r = {NULL, NULL};
  field(req, 1, 0, &r, NULL);
  return r;
}

/* resource attribute key's string value, or a NULL span */
static span resource_attr(span req, const char *key) {
  span rm = resource_metrics(req), res = {0}, kv, k, any, v = {NULL, NULL};
  if (!field(rm, 1, 0, &res, NULL)) return v;
  for (unsigned i = 0; field(res, 1, i, &kv, NULL); i++)
    if (field(kv, 1, 0, &k, NULL) && span_eq(k, key) && field(kv, 2, 0, &any, NULL)) {
      field(any, 1, 0, &v, NULL);
      return v;
    }
  return v;
}

/* metric name's message */
static int metric(span req, const char *name, span *out) {
  span rm = resource_metrics(req), sm, m, n;
  if (!field(rm, 2, 0, &sm, NULL)) return 0;
  for (unsigned i = 0; field(sm, 2, i, &m, NULL); i++)
    if (field(m, 1, 0, &n, NULL) && span_eq(n, name)) {
      *out = m;
      return 1;
    }
  return 0;
}

/* every string the request carries (attribute keys and values, names) is
 * valid UTF-8: walk KeyValues of the resource and of every point */
static int kvs_valid(span msg, unsigned f) {
  span kv, s, any;
  for (unsigned i = 0; field(msg, f, i, &kv, NULL); i++) {
    if (!field(kv, 1, 0, &s, NULL) || !utf8_valid(s)) return 0;
    if (!field(kv, 2, 0, &any, NULL) || !field(any, 1, 0, &s, NULL) || !utf8_valid(s)) return 0;
  }
  return 1;
}

static int all_strings_valid(span req) {
  span rm = resource_metrics(req), res, sm, m, data, pt;
  if (!field(rm, 1, 0, &res, NULL) || !kvs_valid(res, 1)) return 0;
  if (!field(rm, 2, 0, &sm, NULL)) return 0;
  for (unsigned i = 0; field(sm, 2, i, &m, NULL); i++) {
    static const unsigned kinds[3] = {5, 7, 10};
    for (int k = 0; k < 3; k++) {
      if (!field(m, kinds[k], 0, &data, NULL)) continue;
      for (unsigned j = 0; field(data, 1, j, &pt, NULL); j++)
        if (!kvs_valid(pt, kinds[k] == 10 ? 1 : 7)) return 0;
    }
  }
  return 1;
}

static uint8_t *render(const ttft_snapshot *s, long *n) {
  *n = ttft_snapshot_format(s, TTFT_FORMAT_OTLP_PROTOBUF, NULL, 0);
  if (*n <= 0) return NULL;
  uint8_t *b = malloc((size_t)*n + 1);
  if (b && ttft_snapshot_format(s, TTFT_FORMAT_OTLP_PROTOBUF, (char *)b, (size_t)*n + 1) != *n) {
    free(b);
    return NULL;
  }
  return b;
}

/* ---------------------------------------------------------------- tests */

TEST(empty_registry) {
  unsetenv("OTEL_SERVICE_NAME");
  unsetenv("OTEL_RESOURCE_ATTRIBUTES");
  ttft_registry *r = ttft_registry_new(NULL);
  ttft_snapshot *s = ttft_snapshot_take(r);
  long n = 0, n2 = 0;
  uint8_t *b = render(s, &n), *b2 = render(s, &n2);
  EXPECT_NOT_NULL(b);
  EXPECT_STREQ("otlp_protobuf", ttft_format_name(TTFT_FORMAT_OTLP_PROTOBUF));
  if (b && b2) {
    span req = {b, b + n};
    EXPECT_TRUE(wellformed(req, 0));
    EXPECT_EQ_INT(n, n2);
    EXPECT_TRUE(n == n2 && memcmp(b, b2, (size_t)n) == 0); /* deterministic */
    EXPECT_TRUE(span_eq(resource_attr(req, "service.name"), "unknown_service"));
    EXPECT_TRUE(span_eq(resource_attr(req, "telemetry.sdk.name"), "libttft"));
    EXPECT_TRUE(span_eq(resource_attr(req, "telemetry.sdk.version"), ttft_version_string()));
    span rm = resource_metrics(req), sm = {NULL, NULL}, scope = {NULL, NULL}, v = {NULL, NULL};
    EXPECT_TRUE(field(rm, 2, 0, &sm, NULL) && field(sm, 1, 0, &scope, NULL));
    EXPECT_TRUE(field(scope, 1, 0, &v, NULL) && span_eq(v, "libttft"));
    /* the default class is idle: the histogram metrics have no point */
    span m, h, pt;
    EXPECT_TRUE(metric(req, "gen_ai.server.time_to_first_token", &m));
    EXPECT_TRUE(field(m, 10, 0, &h, NULL));
    EXPECT_FALSE(field(h, 1, 0, &pt, NULL));
    uint64_t temporality = 0;
    EXPECT_TRUE(field(h, 2, 0, &v, &temporality));
    EXPECT_EQ_U64(2, temporality); /* cumulative */
    /* a gauge with one point */
    EXPECT_TRUE(metric(req, "libttft.requests_in_flight", &m) && field(m, 5, 0, &h, NULL) &&
                field(h, 1, 0, &pt, NULL));
    /* snprintf rules: a prefix, the full size returned, a NUL at cap - 1 */
    char small[64];
    memset(small, 0x5A, sizeof small);
    EXPECT_EQ_INT(n, ttft_snapshot_format(s, TTFT_FORMAT_OTLP_PROTOBUF, small, 40));
    EXPECT_TRUE(memcmp(small, b, 39) == 0 && small[39] == '\0' && (unsigned char)small[40] == 0x5A);
  }
  free(b);
  free(b2);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TEST(hostile_labels_and_environment) {
  setenv("OTEL_SERVICE_NAME", "", 1); /* empty: not a name */
  setenv("OTEL_RESOURCE_ATTRIBUTES",
         "service.name=from%20attrs,bad=%zz,trunc=ab%4,=nokey,noequals,utf=%ff%fe!,"
         " sp = x y ,dup=1,dup=2,plain=ok%41,%E2%82%AC=euro",
         1);
  ttft_label lab[1] = {{"site", "caf\xC3\xA9 \xFF\xFE\xC0\xAF bad"}};
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.model = "m\xED\xA0\x80x"; /* a surrogate: invalid UTF-8 */
  cfg.const_labels = lab;
  cfg.n_const_labels = 1;
  ttft_registry *r = ttft_registry_new(&cfg);
  EXPECT_NOT_NULL(r);
  if (!r) return;
  ttft_seq q = ttft_begin(r, 1000);
  ttft_token_emitted(r, q, 1, 2000);
  ttft_stream_end(r, q, TTFT_COMPLETED, 3000);
  ttft_snapshot *s = ttft_snapshot_take(r);
  long n = 0;
  uint8_t *b = render(s, &n);
  EXPECT_NOT_NULL(b);
  if (b) {
    span req = {b, b + n};
    EXPECT_TRUE(wellformed(req, 0));
    EXPECT_TRUE(all_strings_valid(req));
    EXPECT_TRUE(span_eq(resource_attr(req, "service.name"), "from attrs"));
    EXPECT_TRUE(resource_attr(req, "bad").p == NULL);
    EXPECT_TRUE(resource_attr(req, "trunc").p == NULL);
    EXPECT_TRUE(resource_attr(req, "noequals").p == NULL);
    EXPECT_TRUE(resource_attr(req, "").p == NULL);
    EXPECT_TRUE(span_eq(resource_attr(req, "utf"), "\xEF\xBF\xBD\xEF\xBF\xBD!"));
    EXPECT_TRUE(span_eq(resource_attr(req, "sp"), "x y"));
    EXPECT_TRUE(span_eq(resource_attr(req, "dup"), "1")); /* the first wins */
    EXPECT_TRUE(span_eq(resource_attr(req, "plain"), "okA"));
    EXPECT_TRUE(span_eq(resource_attr(req, "\xE2\x82\xAC"), "euro"));
    span site = resource_attr(req, "site");
    EXPECT_TRUE(site.p && utf8_valid(site));
    EXPECT_TRUE(site.p && (size_t)(site.e - site.p) > 5 && memcmp(site.p, "caf\xC3\xA9 ", 6) == 0);
  }
  free(b);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
  unsetenv("OTEL_SERVICE_NAME");
  unsetenv("OTEL_RESOURCE_ATTRIBUTES");
}

/* the first data point of metric name, and the data message */
static int first_point(span req, const char *name, unsigned kind, span *data, span *pt) {
  span m;
  return metric(req, name, &m) && field(m, kind, 0, data, NULL) && field(*data, 1, 0, pt, NULL);
}

#ifdef TTFT_TEST_STATIC
static uint8_t *render_opts(const ttft_snapshot *s, const ttft__otlp_opts *o, size_t *n) {
  ttft__sb sb;
  ttft__sb_init(&sb, NULL, 0);
  if (ttft__format_otlp(s, o, &sb) != TTFT_OK) return NULL;
  *n = sb.len;
  uint8_t *b = malloc(*n + 1);
  ttft__sb_init(&sb, (char *)b, *n + 1);
  if (!b || ttft__format_otlp(s, o, &sb) != TTFT_OK || sb.len != *n) {
    free(b);
    return NULL;
  }
  return b;
}

/* static build: counts past 2^63 - 1 and a delta, through the options */
static void huge_and_delta(ttft_snapshot *s) {
  s->cls[0].ctr[TTFT_COUNTER_BEGUN] = UINT64_MAX; /* past sfixed64 */
  s->cls[0].ctr[TTFT_COUNTER_TOKENS] = (uint64_t)INT64_MAX;
  ttft__otlp_opts o = {"svc", "", 1, 111, 222};
  size_t n = 0;
  uint8_t *b = render_opts(s, &o, &n);
  EXPECT_NOT_NULL(b);
  if (!b) return;
  span req = {b, b + n}, data, pt, v;
  uint64_t x = 0;
  EXPECT_TRUE(wellformed(req, 0));
  EXPECT_TRUE(span_eq(resource_attr(req, "service.name"), "svc"));
  EXPECT_TRUE(first_point(req, "libttft.requests_started", 7, &data, &pt));
  EXPECT_TRUE(field(data, 2, 0, &v, &x) && x == 1); /* DELTA */
  EXPECT_TRUE(field(data, 3, 0, &v, &x) && x == 1); /* is_monotonic */
  double d = 0;
  EXPECT_TRUE(field(pt, 4, 0, &v, &x)); /* as_double: past 2^63 - 1 */
  memcpy(&d, &x, sizeof d);
  EXPECT_EQ_DBL((double)UINT64_MAX, d);
  EXPECT_TRUE(field(pt, 2, 0, &v, &x) && x == 111); /* start_time_unix_nano */
  EXPECT_TRUE(field(pt, 3, 0, &v, &x) && x == 222); /* time_unix_nano */
  EXPECT_TRUE(first_point(req, "libttft.output_tokens", 7, &data, &pt));
  EXPECT_TRUE(field(pt, 6, 0, &v, &x) && x == (uint64_t)INT64_MAX); /* as_int */
  EXPECT_TRUE(first_point(req, "gen_ai.server.time_to_first_token", 10, &data, &pt));
  EXPECT_TRUE(field(data, 2, 0, &v, &x) && x == 1);
  EXPECT_TRUE(field(pt, 4, 0, &v, &x) && x == 1); /* count */
  EXPECT_FALSE(field(pt, 12, 0, &v, &x));         /* no min in a delta */
  EXPECT_FALSE(field(pt, 13, 0, &v, &x));
  free(b);
}
#endif

TEST(counts_min_max_temporality) {
  ttft_registry *r = ttft_registry_new(NULL);
  ttft_seq q = ttft_begin(r, 1000);
  ttft_token_emitted(r, q, 1, 5000);
  ttft_stream_end(r, q, TTFT_COMPLETED, 9000);
  ttft_snapshot *s = ttft_snapshot_take(r);
  long n = 0;
  uint8_t *b = render(s, &n); /* cumulative: min and max, exact */
  EXPECT_NOT_NULL(b);
  if (b) {
    span req = {b, b + n}, data, pt, v, pos, counts;
    uint64_t x = 0;
    double d = 0;
    EXPECT_TRUE(first_point(req, "gen_ai.server.time_to_first_token", 10, &data, &pt));
    EXPECT_TRUE(field(data, 2, 0, &v, &x) && x == 2); /* CUMULATIVE */
    EXPECT_TRUE(field(pt, 4, 0, &v, &x) && x == 1);   /* count */
    EXPECT_TRUE(field(pt, 12, 0, &v, &x));
    memcpy(&d, &x, sizeof d);
    EXPECT_EQ_DBL(4000 / 1e9, d);
    EXPECT_TRUE(field(pt, 13, 0, &v, &x));
    memcpy(&d, &x, sizeof d);
    EXPECT_EQ_DBL(4000 / 1e9, d);
    EXPECT_TRUE(field(pt, 6, 0, &v, &x) && x == 14); /* scale: sint32 7, zigzag */
    EXPECT_TRUE(field(pt, 8, 0, &pos, NULL) && field(pos, 2, 0, &counts, NULL));
    EXPECT_TRUE(first_point(req, "libttft.requests_started", 7, &data, &pt));
    EXPECT_TRUE(field(data, 3, 0, &v, &x) && x == 1); /* is_monotonic */
    EXPECT_TRUE(field(pt, 6, 0, &v, &x) && x == 1);   /* as_int */
  }
  free(b);
#ifdef TTFT_TEST_STATIC
  huge_and_delta(s);
#endif
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TU_MAIN()
