/* test_format.c — the TEXT and JSON reports: snprintf rules, contents,
 * well-formed JSON whose values equal the snapshot API's, and hostile label
 * values escaped. PROMETHEUS/OPENMETRICS are tested elsewhere.
 *
 * JSON is checked by a small strict RFC 8259 parser written here (no
 * trailing commas, no leading zeros, no raw control characters in strings,
 * valid UTF-8, valid escapes and surrogate pairs, no duplicate keys). */
#include <stdlib.h>

#include "ttft.h"
#include "task.h"
#include "text_lines.h"

#define T0 UINT64_C(1000)
#define US UINT64_C(1000)
#define MS UINT64_C(1000000)

/* ================================================== a strict JSON parser */
typedef enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jval {
  jtype t;
  int b;
  double num;
  int is_u64; /* a non-negative integer that fits uint64_t */
  uint64_t u;
  char *str; /* decoded, NUL-terminated (J_STR) */
  size_t slen;
  struct jval *items; /* J_ARR, J_OBJ */
  char **keys;        /* J_OBJ */
  size_t n;
} jval;

typedef struct jparser {
  const char *p, *end;
  const char *err;
  int depth;
} jparser;

static void jfree(jval *v) {
  if (!v) return;
  free(v->str);
  for (size_t i = 0; i < v->n; i++) {
    jfree(&v->items[i]);
    if (v->keys) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
}

static int jfail(jparser *ps, const char *why) {
  if (!ps->err) ps->err = why;
  return 0;
}

static void jws(jparser *ps) {
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
    ps->p++;
}

static int jlit(jparser *ps, const char *lit) {
  size_t n = strlen(lit);
  if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, lit, n) != 0) return jfail(ps, "bad literal");
  ps->p += n;
  return 1;
}

static int hex4(jparser *ps, unsigned *out) {
  if (ps->end - ps->p < 4) return jfail(ps, "short \\u escape");
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = ps->p[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return jfail(ps, "bad hex digit");
  }
  ps->p += 4;
  *out = v;
  return 1;
}

typedef struct jbuf {
  char *d;
  size_t n, cap;
} jbuf;

static void jbuf_put(jbuf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    b->cap = (b->n + n + 1) * 2;
    b->d = realloc(b->d, b->cap);
    if (!b->d) abort();
  }
  memcpy(b->d + b->n, s, n);
  b->n += n;
  b->d[b->n] = '\0';
}

static void jbuf_utf8(jbuf *b, unsigned cp) {
  char o[4];
  size_t n;
  if (cp < 0x80) o[0] = (char)cp, n = 1;
  else if (cp < 0x800) o[0] = (char)(0xC0 | (cp >> 6)), o[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
  else if (cp < 0x10000)
    o[0] = (char)(0xE0 | (cp >> 12)), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
    o[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
  else
    o[0] = (char)(0xF0 | (cp >> 18)), o[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
  jbuf_put(b, o, n);
}

/* length of a valid UTF-8 sequence starting at p (lead byte >= 0x80), 0 if invalid */
static size_t utf8_len(const unsigned char *p, const unsigned char *end) {
  unsigned c = p[0], v, min;
  size_t n;
  if (c >= 0xC2 && c <= 0xDF) n = 2, v = c & 0x1F, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, v = c & 0x0F, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, v = c & 0x07, min = 0x10000;
  else return 0;
  if ((size_t)(end - p) < n) return 0;
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    v = (v << 6) | (p[i] & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  return n;
}

static int jstring(jparser *ps, char **out, size_t *len) {
  jbuf b = {NULL, 0, 0};
  jbuf_put(&b, "", 0);
  ps->p++; /* opening quote */
  for (;;) {
    if (ps->p >= ps->end) {
      free(b.d);
      return jfail(ps, "unterminated string");
    }
    unsigned char c = (unsigned char)*ps->p;
    if (c == '"') {
      ps->p++;
      break;
    }
    if (c < 0x20) {
      free(b.d);
      return jfail(ps, "raw control character in string");
    }
    if (c == '\\') {
      ps->p++;
      if (ps->p >= ps->end) break;
      char e = *ps->p++;
      unsigned cp;
      switch (e) {
      case '"': jbuf_put(&b, "\"", 1); break;
      case '\\': jbuf_put(&b, "\\", 1); break;
      case '/': jbuf_put(&b, "/", 1); break;
      case 'b': jbuf_put(&b, "\b", 1); break;
      case 'f': jbuf_put(&b, "\f", 1); break;
      case 'n': jbuf_put(&b, "\n", 1); break;
      case 'r': jbuf_put(&b, "\r", 1); break;
      case 't': jbuf_put(&b, "\t", 1); break;
      case 'u':
        if (!hex4(ps, &cp)) {
          free(b.d);
          return 0;
        }
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
          free(b.d);
          return jfail(ps, "lone low surrogate");
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          unsigned lo;
          if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u') {
            free(b.d);
            return jfail(ps, "lone high surrogate");
          }
          ps->p += 2;
          if (!hex4(ps, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
            free(b.d);
            return jfail(ps, "bad surrogate pair");
          }
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        jbuf_utf8(&b, cp);
        break;
      default: free(b.d); return jfail(ps, "bad escape");
      }
      continue;
    }
    if (c < 0x80) {
      jbuf_put(&b, ps->p, 1);
      ps->p++;
      continue;
    }
    size_t n = utf8_len((const unsigned char *)ps->p, (const unsigned char *)ps->end);
    if (!n) {
      free(b.d);
      return jfail(ps, "invalid UTF-8 in string");
    }
    jbuf_put(&b, ps->p, n);
    ps->p += n;
  }
  *out = b.d;
  *len = b.n;
  return 1;
}

static int jnumber(jparser *ps, jval *v) {
  const char *s = ps->p;
  int neg = 0, integer = 1;
  if (*ps->p == '-') neg = 1, ps->p++;
  if (ps->p >= ps->end) return jfail(ps, "bad number");
  if (*ps->p == '0') {
    ps->p++;
    if (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') return jfail(ps, "leading zero");
  } else if (*ps->p >= '1' && *ps->p <= '9') {
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
  } else {
    return jfail(ps, "bad number");
  }
  if (ps->p < ps->end && *ps->p == '.') {
    integer = 0;
    ps->p++;
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return jfail(ps, "bad fraction");
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
  }
  if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
    integer = 0;
    ps->p++;
    if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return jfail(ps, "bad exponent");
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
  }
  char tmp[64];
  size_t n = (size_t)(ps->p - s);
  if (n >= sizeof tmp) return jfail(ps, "number too long");
  memcpy(tmp, s, n);
  tmp[n] = '\0';
  v->t = J_NUM;
  v->num = strtod(tmp, NULL);
  if (integer && !neg) {
    uint64_t u = 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
      unsigned d = (unsigned)(tmp[i] - '0');
      if (u > (UINT64_MAX - d) / 10) ok = 0;
      u = u * 10 + d;
    }
    v->is_u64 = ok;
    v->u = u;
  }
  return 1;
}

static int jvalue(jparser *ps, jval *v);

static int jcontainer(jparser *ps, jval *v, int obj) {
  if (++ps->depth > 64) return jfail(ps, "too deep");
  v->t = obj ? J_OBJ : J_ARR;
  ps->p++;
  jws(ps);
  if (ps->p < ps->end && *ps->p == (obj ? '}' : ']')) {
    ps->p++;
    ps->depth--;
    return 1;
  }
  size_t cap = 0;
  for (;;) {
    if (v->n == cap) {
      cap = cap ? 2 * cap : 8;
      v->items = realloc(v->items, cap * sizeof *v->items);
      if (obj) v->keys = realloc(v->keys, cap * sizeof *v->keys);
      if (!v->items || (obj && !v->keys)) abort();
    }
    jws(ps);
    if (obj) {
      size_t kl;
      if (ps->p >= ps->end || *ps->p != '"') return jfail(ps, "expected a key");
      if (!jstring(ps, &v->keys[v->n], &kl)) return 0;
      for (size_t i = 0; i < v->n; i++)
        if (!strcmp(v->keys[i], v->keys[v->n])) {
          free(v->keys[v->n]);
          return jfail(ps, "duplicate key");
        }
      jws(ps);
      if (ps->p >= ps->end || *ps->p != ':') {
        free(v->keys[v->n]);
        return jfail(ps, "expected ':'");
      }
      ps->p++;
    }
    memset(&v->items[v->n], 0, sizeof v->items[0]);
    v->n++;
    if (!jvalue(ps, &v->items[v->n - 1])) return 0;
    jws(ps);
    if (ps->p < ps->end && *ps->p == ',') {
      ps->p++;
      continue;
    }
    if (ps->p < ps->end && *ps->p == (obj ? '}' : ']')) {
      ps->p++;
      break;
    }
    return jfail(ps, "expected ',' or a closing bracket");
  }
  ps->depth--;
  return 1;
}

static int jvalue(jparser *ps, jval *v) {
  jws(ps);
  if (ps->p >= ps->end) return jfail(ps, "unexpected end");
  switch (*ps->p) {
  case '{': return jcontainer(ps, v, 1);
  case '[': return jcontainer(ps, v, 0);
  case '"': v->t = J_STR; return jstring(ps, &v->str, &v->slen);
  case 't': v->t = J_BOOL; v->b = 1; return jlit(ps, "true");
  case 'f': v->t = J_BOOL; v->b = 0; return jlit(ps, "false");
  case 'n': v->t = J_NULL; return jlit(ps, "null");
  default: return jnumber(ps, v);
  }
}

/* Parse text[0..len) as one JSON document; NULL (and a message) if invalid. */
static jval *jparse(const char *text, size_t len, const char **err) {
  jparser ps = {text, text + len, NULL, 0};
  jval *v = calloc(1, sizeof *v);
  if (!v) abort();
  int ok = jvalue(&ps, v);
  if (ok) {
    jws(&ps);
    if (ps.p != ps.end) ok = jfail(&ps, "trailing data");
  }
  if (!ok) {
    *err = ps.err;
    fprintf(stderr, "  JSON error at byte %zu: %s\n", (size_t)(ps.p - text), ps.err);
    jfree(v);
    free(v);
    return NULL;
  }
  return v;
}

static void jdestroy(jval *v) {
  jfree(v);
  free(v);
}

static const jval *jget(const jval *o, const char *key) {
  if (!o || o->t != J_OBJ) return NULL;
  for (size_t i = 0; i < o->n; i++)
    if (!strcmp(o->keys[i], key)) return &o->items[i];
  return NULL;
}

static const jval *jat(const jval *a, size_t i) {
  if (!a || a->t != J_ARR || i >= a->n) return NULL;
  return &a->items[i];
}

static int parses(const char *text) {
  const char *err = NULL;
  jval *v = jparse(text, strlen(text), &err);
  if (!v) return 0;
  jdestroy(v);
  return 1;
}

/* ---------------------------------------------- JSON value expectations */
static void expect_ju64(const jval *v, uint64_t want, const char *what, int line) {
  if (v && v->t == J_NUM && v->is_u64 && v->u == want) {
    tu_ok_();
    return;
  }
  tu_fail_(__FILE__, line, "JSON integer", what);
  if (!v) fprintf(stderr, "expected %" PRIu64 ", member missing\n", want);
  else if (v->t != J_NUM || !v->is_u64) fprintf(stderr, "expected %" PRIu64 ", got a non-integer\n", want);
  else fprintf(stderr, "expected %" PRIu64 ", got %" PRIu64 "\n", want, v->u);
}
#define EXPECT_JU64(v, want, what) expect_ju64((v), (want), (what), __LINE__)

static void expect_jnull(const jval *v, const char *what, int line) {
  if (v && v->t == J_NULL) {
    tu_ok_();
    return;
  }
  tu_fail_(__FILE__, line, "JSON null", what);
  fprintf(stderr, "expected null, got %s\n", v ? "another value" : "nothing");
}
#define EXPECT_JNULL(v, what) expect_jnull((v), (what), __LINE__)

/* a double printed by the library reads back exactly */
static void expect_jdbl(const jval *v, double want, const char *what, int line) {
  if (v && v->t == J_NUM && v->num == want) {
    tu_ok_();
    return;
  }
  tu_fail_(__FILE__, line, "JSON number", what);
  if (v && v->t == J_NUM) fprintf(stderr, "expected %.17g, got %.17g\n", want, v->num);
  else fprintf(stderr, "expected %.17g, got a non-number\n", want);
}
#define EXPECT_JDBL(v, want, what) expect_jdbl((v), (want), (what), __LINE__)

static void expect_jstr(const jval *v, const char *want, const char *what, int line) {
  if (v && v->t == J_STR && v->slen == strlen(want) && !memcmp(v->str, want, v->slen)) {
    tu_ok_();
    return;
  }
  tu_fail_(__FILE__, line, "JSON string", what);
  fprintf(stderr, "expected \"%s\", got \"%s\"\n", want, v && v->t == J_STR ? v->str : "(not a string)");
}
#define EXPECT_JSTR(v, want, what) expect_jstr((v), (want), (what), __LINE__)

/* ================================================================ data */
static ttft_registry *populated(const ttft_config *cfg, int *chat_out) {
  ttft_registry *r = ttft_registry_new(cfg);
  EXPECT_NOT_NULL(r);
  if (!r) {
    TU_DONE();
    exit(1);
  }
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.ttft_ns = 50 * MS;
  slo.tpot_ns = 30 * MS;
  int chat = ttft_class_add(r, "chat", &slo);
  EXPECT_EQ_INT(1, chat);
  EXPECT_EQ_INT(2, ttft_class_add(r, "batch", NULL));
  /* 60 streams over two classes, some with prompts and prefix hits */
  for (int i = 0; i < 60; i++) {
    ttft_request q;
    ttft_request_init(&q);
    q.class_id = i % 3 == 0 ? chat : (i % 3 == 1 ? 0 : 2);
    q.prompt_tokens = (uint32_t)(i % 4 == 0 ? 0 : 100 + 70 * i);
    q.prefix_hit = i % 5 == 0 ? -1 : i % 2;
    ttft_seq s = ttft_begin_ex(r, &q, T0);
    EXPECT_TRUE(s != 0);
    EXPECT_ERR(TTFT_OK, ttft_mark(r, s, TTFT_PHASE_SCHEDULED, T0 + (uint64_t)(i + 1) * 100 * US));
    if (i % 11 == 0) {
      EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_CANCELLED, T0 + (uint64_t)(i + 5) * MS));
      continue;
    }
    uint64_t t = T0 + (uint64_t)(i + 2) * MS;
    int n = 1 + i % 7;
    for (int k = 0; k < n; k++, t += (uint64_t)(10 + i % 13) * MS + (k == 3 ? 700 * MS : 0))
      EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, (uint32_t)(1 + k % 2), t));
    if (i % 9 == 0) EXPECT_ERR(TTFT_OK, ttft_mark(r, s, TTFT_PHASE_PREEMPTED, t));
    EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, i % 13 == 0 ? TTFT_ERROR : TTFT_COMPLETED, t));
  }
  /* two live sequences, one of them stalled */
  ttft_seq a = ttft_begin(r, T0);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, a, 1, T0 + 1 * MS));
  (void)ttft_begin(r, T0);
  if (chat_out) *chat_out = chat;
  return r;
}

/* the whole output of format f, malloc'd; *len its length */
static char *render(const ttft_snapshot *s, ttft_format f, long *len) {
  long n = ttft_snapshot_format(s, f, NULL, 0);
  EXPECT_TRUE(n > 0);
  if (n <= 0) {
    *len = 0;
    return NULL;
  }
  char *buf = malloc((size_t)n + 1);
  if (!buf) abort();
  long m = ttft_snapshot_format(s, f, buf, (size_t)n + 1);
  EXPECT_EQ_INT(n, m);
  EXPECT_EQ_U64((uint64_t)n, strlen(buf));
  *len = n;
  return buf;
}

/* ============================================================== tests */
static void expect_snprintf_rules(const ttft_snapshot *s, ttft_format f) {
  long n;
  char *full = render(s, f, &n);
  if (!full) return;
  /* deterministic */
  long n2;
  char *again = render(s, f, &n2);
  EXPECT_EQ_INT(n, n2);
  EXPECT_TRUE(again && !strcmp(full, again));
  free(again);

  char *buf = malloc((size_t)n + 64);
  if (!buf) abort();
  static const size_t caps[] = {1, 2, 10, 37, 100, 511, 512, 513, 1000};
  for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
    size_t cap = caps[i];
    if (cap > (size_t)n) continue;
    memset(buf, 0x5A, (size_t)n + 64);
    EXPECT_EQ_INT(n, ttft_snapshot_format(s, f, buf, cap));
    EXPECT_EQ_U64(cap - 1, strlen(buf));                 /* truncated, NUL-terminated */
    EXPECT_TRUE(memcmp(buf, full, cap - 1) == 0);       /* a prefix of the full output */
    int untouched = 1;
    for (size_t k = cap; k < (size_t)n + 64; k++)
      if ((unsigned char)buf[k] != 0x5A) untouched = 0;
    EXPECT_TRUE(untouched); /* nothing written past cap */
  }
  /* exactly n: one byte short of the NUL */
  memset(buf, 0x5A, (size_t)n + 64);
  EXPECT_EQ_INT(n, ttft_snapshot_format(s, f, buf, (size_t)n));
  EXPECT_EQ_U64((uint64_t)n - 1, strlen(buf));
  EXPECT_EQ_U64(0x5A, (unsigned char)buf[n]);
  /* larger than needed */
  EXPECT_EQ_INT(n, ttft_snapshot_format(s, f, buf, (size_t)n + 64));
  EXPECT_STREQ(full, buf);
  /* cap 0 with a buffer: nothing written */
  memset(buf, 0x5A, 8);
  EXPECT_EQ_INT(n, ttft_snapshot_format(s, f, buf, 0));
  EXPECT_EQ_U64(0x5A, (unsigned char)buf[0]);
  /* errors */
  EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_format(s, f, NULL, 5));
  EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_format(NULL, f, buf, (size_t)n));
  EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_format(s, (ttft_format)TTFT_FORMAT_COUNT_, buf, (size_t)n));
  EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_format(s, (ttft_format)-1, buf, (size_t)n));
  free(buf);
  free(full);
}

/* ------------------------------------------------------------------ JSON */
static const double qv[] = {0.5, 0.9, 0.95, 0.99, 0.999};
static const char *const qk[] = {"p50", "p90", "p95", "p99", "p999"};

static void check_json_metric(const ttft_snapshot *s, int cls, ttft_metric m, const jval *o,
                              const char *where) {
  char what[160];
  uint64_t n = ttft_snapshot_class_count(s, cls, m);
  snprintf(what, sizeof what, "%s.%s", where, ttft_metric_name(m));
  EXPECT_TRUE(o && o->t == J_OBJ);
  EXPECT_JSTR(jget(o, "unit"), m == TTFT_METRIC_OUTPUT_TOKENS ? "tokens" : "ns", what);
  EXPECT_JU64(jget(o, "count"), n, what);
  EXPECT_JU64(jget(o, "sum"), ttft_snapshot_class_sum(s, cls, m), what);
  if (n == 0) {
    EXPECT_JNULL(jget(o, "mean"), what);
    EXPECT_JNULL(jget(o, "min"), what);
    EXPECT_JNULL(jget(o, "max"), what);
    for (size_t i = 0; i < 5; i++) EXPECT_JNULL(jget(o, qk[i]), what);
    return;
  }
  EXPECT_JDBL(jget(o, "mean"), ttft_snapshot_class_mean(s, cls, m), what);
  EXPECT_JU64(jget(o, "min"), ttft_snapshot_class_quantile(s, cls, m, 0.0), what);
  EXPECT_JU64(jget(o, "max"), ttft_snapshot_class_quantile(s, cls, m, 1.0), what);
  for (size_t i = 0; i < 5; i++)
    EXPECT_JU64(jget(o, qk[i]), ttft_snapshot_class_quantile(s, cls, m, qv[i]), what);
  EXPECT_EQ_U64(11, o->n); /* unit count sum mean min max p50 p90 p95 p99 p999 */
}

/* a by_status object: per status, TTFT/TPOT/E2E/OUTPUT_TOKENS as the
 * ttft_snapshot_status_* API gives them */
static void check_json_by_status(const ttft_snapshot *s, int cls, const jval *o, const char *where) {
  static const ttft_metric views[4] = {TTFT_METRIC_TTFT, TTFT_METRIC_TPOT, TTFT_METRIC_E2E,
                                       TTFT_METRIC_OUTPUT_TOKENS};
  EXPECT_TRUE(o && o->t == J_OBJ && o->n == TTFT_STATUS_COUNT_);
  for (int st = 0; st < TTFT_STATUS_COUNT_; st++) {
    const jval *so = jget(o, ttft_status_name((ttft_status)st));
    EXPECT_TRUE(so && so->t == J_OBJ && so->n == 4);
    for (int v = 0; v < 4; v++) {
      char what[160];
      snprintf(what, sizeof what, "%s.by_status.%s.%s", where, ttft_status_name((ttft_status)st),
               ttft_metric_name(views[v]));
      const jval *h = jget(so, ttft_metric_name(views[v]));
      uint64_t n = ttft_snapshot_status_count(s, cls, (ttft_status)st, views[v]);
      EXPECT_JSTR(jget(h, "unit"), views[v] == TTFT_METRIC_OUTPUT_TOKENS ? "tokens" : "ns", what);
      EXPECT_JU64(jget(h, "count"), n, what);
      if (!n) {
        EXPECT_JNULL(jget(h, "p50"), what);
        continue;
      }
      EXPECT_JU64(jget(h, "min"), ttft_snapshot_status_quantile(s, cls, (ttft_status)st, views[v], 0.0), what);
      EXPECT_JU64(jget(h, "max"), ttft_snapshot_status_quantile(s, cls, (ttft_status)st, views[v], 1.0), what);
      for (size_t i = 0; i < 5; i++)
        EXPECT_JU64(jget(h, qk[i]), ttft_snapshot_status_quantile(s, cls, (ttft_status)st, views[v], qv[i]), what);
    }
  }
}

static void check_json_counters(const ttft_snapshot *s, int cls, const jval *o, const char *where) {
  EXPECT_TRUE(o && o->t == J_OBJ && o->n == TTFT_COUNTER_COUNT_);
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++) {
    char what[160];
    snprintf(what, sizeof what, "%s.%s", where, ttft_counter_name((ttft_counter)c));
    EXPECT_JU64(jget(o, ttft_counter_name((ttft_counter)c)),
                ttft_snapshot_class_counter(s, cls, (ttft_counter)c), what);
  }
}

static void check_json_attainment(const ttft_snapshot *s, int cls, const jval *v) {
  double a = ttft_snapshot_attainment(s, cls);
  if (a < 0) EXPECT_JNULL(v, "attainment");
  else EXPECT_JDBL(v, a, "attainment");
}

/* Every value of the JSON document equals what the snapshot API says. */
static void check_json(const ttft_snapshot *s, const char *text, size_t len) {
  const char *err = NULL;
  jval *root = jparse(text, len, &err);
  EXPECT_NOT_NULL(root);
  if (!root) return;
  EXPECT_TRUE(len > 0 && text[len - 1] == '\n');
  EXPECT_JSTR(jget(root, "schema"), "ttft.snapshot/1", "schema");
  EXPECT_JSTR(jget(root, "version"), ttft_version_string(), "version");

  uint64_t t0 = 0, t1 = 0;
  EXPECT_ERR(TTFT_OK, ttft_snapshot_interval(s, &t0, &t1));
  const jval *iv = jget(root, "interval");
  EXPECT_JU64(jget(iv, "start_ns"), t0, "interval.start_ns");
  EXPECT_JU64(jget(iv, "end_ns"), t1, "interval.end_ns");
  double sec = (double)(t1 - t0) / 1e9;
  EXPECT_JDBL(jget(iv, "seconds"), sec, "interval.seconds");

  const jval *lab = jget(root, "labels");
  static const char *const keys[] = {"start_point", "token_point", "model", "namespace"};
  for (size_t i = 0; i < 4; i++) {
    const jval *v = jget(lab, keys[i]);
    EXPECT_TRUE(v && v->t == J_STR);
  }
  EXPECT_JSTR(jget(lab, "namespace"), ttft_snapshot_label(s, "namespace"), "labels.namespace");

  const jval *g = jget(root, "gauges");
  EXPECT_JU64(jget(g, "inflight"), ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT), "gauges.inflight");
  EXPECT_JU64(jget(g, "live_stalls"), ttft_snapshot_gauge(s, TTFT_GAUGE_LIVE_STALLS),
              "gauges.live_stalls");

  check_json_counters(s, TTFT_CLASS_ALL, jget(root, "counters"), "counters");
  check_json_attainment(s, TTFT_CLASS_ALL, jget(root, "attainment"));
  const jval *mets = jget(root, "metrics");
  EXPECT_TRUE(mets && mets->t == J_OBJ && mets->n == TTFT_METRIC_COUNT_);
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++)
    check_json_metric(s, TTFT_CLASS_ALL, (ttft_metric)m, jget(mets, ttft_metric_name((ttft_metric)m)),
                      "metrics");

  check_json_by_status(s, TTFT_CLASS_ALL, jget(root, "by_status"), "all");

  /* the classes array holds the exported classes in id order: those that
   * saw a begin (accepted or dropped), or every one with export_idle_classes */
  const jval *idle = jget(jget(root, "config"), "export_idle_classes");
  EXPECT_TRUE(idle && idle->t == J_BOOL);
  int all_classes = idle && idle->t == J_BOOL && idle->b;
  const jval *cls = jget(root, "classes");
  EXPECT_TRUE(cls && cls->t == J_ARR);
  size_t pos = 0;
  for (int c = 0; c < ttft_snapshot_classes(s); c++) {
    int used = ttft_snapshot_class_counter(s, c, TTFT_COUNTER_BEGUN) ||
               ttft_snapshot_class_counter(s, c, TTFT_COUNTER_DROPPED);
    if (!used && !all_classes) continue;
    const jval *o = jat(cls, pos++);
    char where[96];
    snprintf(where, sizeof where, "classes[%d]", c);
    EXPECT_JU64(jget(o, "id"), (uint64_t)c, where);
    EXPECT_JSTR(jget(o, "name"), ttft_snapshot_class_name(s, c), where);
    ttft_slo slo;
    slo.struct_size = sizeof slo;
    EXPECT_ERR(TTFT_OK, ttft_snapshot_class_slo(s, c, &slo));
    const jval *js = jget(o, "slo");
    const uint64_t budgets[3] = {slo.ttft_ns, slo.tpot_ns, slo.e2e_ns};
    static const char *const bk[3] = {"ttft_ns", "tpot_ns", "e2e_ns"};
    for (int k = 0; k < 3; k++) {
      if (budgets[k]) EXPECT_JU64(jget(js, bk[k]), budgets[k], bk[k]);
      else EXPECT_JNULL(jget(js, bk[k]), bk[k]);
    }
    EXPECT_JU64(jget(js, "stall_ns"), slo.stall_threshold_ns, "stall_ns");
    check_json_attainment(s, c, jget(o, "attainment"));
    check_json_counters(s, c, jget(o, "counters"), where);
    const jval *cm = jget(o, "metrics");
    for (int m = 0; m < TTFT_METRIC_COUNT_; m++)
      check_json_metric(s, c, (ttft_metric)m, jget(cm, ttft_metric_name((ttft_metric)m)), where);
    check_json_by_status(s, c, jget(o, "by_status"), where);
  }
  EXPECT_EQ_U64(pos, cls ? cls->n : 0);

  const jval *sp = jget(root, "splits");
  const jval *pc = jget(sp, "prefix_cache");
  static const char *const pk[2] = {"miss", "hit"};
  for (unsigned i = 0; i < 2; i++) {
    const jval *h = jget(pc, pk[i]);
    uint64_t n = ttft_snapshot_split_count(s, TTFT_SPLIT_PREFIX_CACHE, i);
    EXPECT_JU64(jget(h, "count"), n, pk[i]);
    if (n) {
      EXPECT_JU64(jget(h, "p50"), ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, i, 0.5), pk[i]);
      EXPECT_JU64(jget(h, "p99"), ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, i, 0.99), pk[i]);
      EXPECT_JU64(jget(h, "max"), ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, i, 1.0), pk[i]);
    } else {
      EXPECT_JNULL(jget(h, "p50"), pk[i]);
    }
  }
  const jval *bands = jget(sp, "prompt_bands");
  EXPECT_TRUE(bands && bands->t == J_ARR);
  EXPECT_EQ_U64(ttft_snapshot_bands(s), bands ? bands->n : 0);
  for (unsigned b = 0; b < ttft_snapshot_bands(s); b++) {
    const jval *o = jat(bands, b);
    uint32_t lo = 0, hi = 0;
    EXPECT_ERR(TTFT_OK, ttft_snapshot_band(s, b, &lo, &hi));
    EXPECT_JU64(jget(o, "lo"), lo, "band lo");
    if (hi == UINT32_MAX) EXPECT_JNULL(jget(o, "hi"), "band hi");
    else EXPECT_JU64(jget(o, "hi"), hi, "band hi");
    const jval *h = jget(o, "ttft");
    uint64_t n = ttft_snapshot_split_count(s, TTFT_SPLIT_PROMPT_BAND, b);
    EXPECT_JU64(jget(h, "count"), n, "band count");
    if (n) EXPECT_JU64(jget(h, "p90"), ttft_snapshot_split_quantile(s, TTFT_SPLIT_PROMPT_BAND, b, 0.9), "band p90");
  }

  const jval *tp = jget(root, "throughput");
  EXPECT_JSTR(jget(tp, "kind"), "capacity", "throughput.kind");
  const jval *note = jget(tp, "note");
  EXPECT_TRUE(note && note->t == J_STR && strstr(note->str, "not TPOT"));
  if (sec > 0) {
    EXPECT_JDBL(jget(tp, "tokens_per_second"),
                (double)ttft_snapshot_counter(s, TTFT_COUNTER_TOKENS) / sec, "tokens_per_second");
    EXPECT_JDBL(jget(tp, "goodput_per_second"),
                (double)ttft_snapshot_counter(s, TTFT_COUNTER_SLO_MET) / sec, "goodput_per_second");
  }
  /* no TPOT-looking name anywhere in the throughput object */
  for (size_t i = 0; tp && i < tp->n; i++) EXPECT_FALSE(strstr(tp->keys[i], "tpot"));
  jdestroy(root);
}

/* the test's own JSON validator accepts valid JSON and rejects what it must */
TEST(json_validator_accepts) {
  EXPECT_TRUE(parses("{\"a\":[1,2.5,-3e2,true,false,null,\"x\\u00e9\\ud83d\\ude00\"]}"));
  EXPECT_TRUE(parses(" 0 "));
}

TEST(json_validator_rejects) {
  EXPECT_FALSE(parses("{\"a\":1,}"));
  EXPECT_FALSE(parses("[1,]"));
  EXPECT_FALSE(parses("{\"a\":1,\"a\":2}"));
  EXPECT_FALSE(parses("01"));
  EXPECT_FALSE(parses("1."));
  EXPECT_FALSE(parses("\"a\nb\""));
  EXPECT_FALSE(parses("\"\\x41\""));
  EXPECT_FALSE(parses("\"\\ud83d\""));
  EXPECT_FALSE(parses("\"\xff\""));
  EXPECT_FALSE(parses("\"\xC0\xAF\""));
  EXPECT_FALSE(parses("{} {}"));
  EXPECT_FALSE(parses("nan"));
  EXPECT_FALSE(parses("{\"a\" 1}"));
}

/* the populated registry of most tests: one thread, model llama-3-8b */
static ttft_registry *typical(int *chat_out) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_threads = 1;
  c.model = "llama-3-8b";
  return populated(&c, chat_out);
}

/* JSON of a populated registry equals the snapshot API */
TEST(json_populated_equals_api) {
  ttft_registry *r = typical(NULL);
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_TRUE(ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT) == 2);
  EXPECT_TRUE(ttft_snapshot_counter(s, TTFT_COUNTER_STALLS) > 0);
  long n;
  char *text = render(s, TTFT_FORMAT_JSON, &n);
  if (text) {
    check_json(s, text, (size_t)n);
    const char *err;
    jval *root = jparse(text, (size_t)n, &err);
    const jval *lab = jget(root, "labels");
    EXPECT_JSTR(jget(lab, "start_point"), "server_arrival", "start_point");
    EXPECT_JSTR(jget(lab, "token_point"), "detokenized_flush", "token_point");
    EXPECT_JSTR(jget(lab, "model"), "llama-3-8b", "model");
    const jval *edges = jget(jget(root, "config"), "prompt_band_edges");
    EXPECT_TRUE(edges && edges->t == J_ARR && edges->n == 6);
    EXPECT_JU64(jat(edges, 5), 131072, "edges[5]");
    EXPECT_JU64(jget(jget(root, "config"), "stall_ns"), 500 * MS, "config.stall_ns");
    const jval *cl = jget(root, "const_labels");
    EXPECT_TRUE(cl && cl->t == J_ARR && cl->n == 0);
    jdestroy(root);
  }
  free(text);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

static void snprintf_rules_of(ttft_format f) {
  ttft_registry *r = typical(NULL);
  ttft_snapshot *s = ttft_snapshot_take(r);
  expect_snprintf_rules(s, f);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TEST(json_snprintf_rules) { snprintf_rules_of(TTFT_FORMAT_JSON); }
TEST(text_snprintf_rules) { snprintf_rules_of(TTFT_FORMAT_TEXT); }

/* JSON of an empty registry: nulls, not zeros; idle classes left out unless asked for */
static void json_empty(int idle) {
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.export_idle_classes = idle;
  ttft_registry *r = ttft_registry_new(&cfg);
  ttft_snapshot *s = ttft_snapshot_take(r);
  long n;
  char *text = render(s, TTFT_FORMAT_JSON, &n);
  if (text) {
    check_json(s, text, (size_t)n);
    const char *err;
    jval *root = jparse(text, (size_t)n, &err);
    EXPECT_JNULL(jget(root, "attainment"), "attainment");
    EXPECT_JU64(jget(jget(jget(root, "metrics"), "ttft"), "count"), 0, "ttft.count");
    EXPECT_JNULL(jget(jget(jget(root, "metrics"), "ttft"), "p99"), "ttft.p99");
    EXPECT_JNULL(jget(jget(jget(jget(root, "by_status"), "completed"), "e2e"), "p50"), "by_status p50");
    const jval *cls = jget(root, "classes");
    EXPECT_EQ_U64(idle ? 1 : 0, cls ? cls->n : 99); /* "default" never saw a begin */
    if (idle) {
      EXPECT_JNULL(jget(jat(cls, 0), "attainment"), "classes[0].attainment");
      EXPECT_JSTR(jget(jat(cls, 0), "name"), "default", "classes[0].name");
      EXPECT_JNULL(jget(jget(jat(cls, 0), "slo"), "ttft_ns"), "no budget");
    }
    jdestroy(root);
  }
  free(text);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TEST(json_empty_registry) { json_empty(0); }
TEST(json_empty_registry_idle_classes) { json_empty(1); }

/* ------------------------------------------------------- hostile labels */
#define HOSTILE                                                                                 \
  "q\"b\\s/n\nt\tc\x01\x1f del\x7f e\xC3\xA9 cjk\xE6\x97\xA5 emoji\xF0\x9F\x98\x80 bad\xFF" \
  " ovl\xC0\xAF sur\xED\xA0\x80 \x1b[31mred"
/* what a JSON reader must get back: invalid bytes become U+FFFD each */
#define FFFD "\xEF\xBF\xBD"
#define HOSTILE_DECODED                                                                         \
  "q\"b\\s/n\nt\tc\x01\x1f del\x7f e\xC3\xA9 cjk\xE6\x97\xA5 emoji\xF0\x9F\x98\x80 bad" FFFD \
  " ovl" FFFD FFFD " sur" FFFD FFFD FFFD " \x1b[31mred"

/* a populated registry whose model, clock points and constant labels are hostile */
static ttft_registry *hostile(void) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_threads = 1;
  c.model = HOSTILE;
  c.start_point = "client \"send\"";
  c.token_point = "C:\\flush\\";
  ttft_label labels[2] = {{"region", HOSTILE}, {"pool", "a,b=c}"}};
  c.const_labels = labels;
  c.n_const_labels = 2;
  return populated(&c, NULL);
}

TEST(hostile_labels_kept_as_given) {
  ttft_registry *r = hostile();
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_STREQ(HOSTILE, ttft_snapshot_label(s, "model")); /* kept as given */
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* hostile label values are escaped in JSON and read back as given (invalid
 * UTF-8 as U+FFFD) */
TEST(hostile_labels_json) {
  ttft_registry *r = hostile();
  ttft_snapshot *s = ttft_snapshot_take(r);
  long n;
  char *json = render(s, TTFT_FORMAT_JSON, &n);
  if (json) {
    /* no raw control byte anywhere but the final newline */
    int raw_ctl = 0;
    for (long i = 0; i < n - 1; i++)
      if ((unsigned char)json[i] < 0x20 || json[i] == 0x7F) raw_ctl = 1;
    EXPECT_FALSE(raw_ctl);
    EXPECT_CONTAINS(json, "\\u0001");
    EXPECT_CONTAINS(json, "\\u001b[31mred");
    EXPECT_CONTAINS(json, "\\u007f");
    EXPECT_CONTAINS(json, "q\\\"b\\\\s/n");
    EXPECT_CONTAINS(json, "e\xC3\xA9 cjk\xE6\x97\xA5 emoji\xF0\x9F\x98\x80"); /* UTF-8 passes */
    check_json(s, json, (size_t)n);
    const char *err;
    jval *root = jparse(json, (size_t)n, &err);
    const jval *lab = jget(root, "labels");
    EXPECT_JSTR(jget(lab, "model"), HOSTILE_DECODED, "labels.model");
    EXPECT_JSTR(jget(lab, "start_point"), "client \"send\"", "labels.start_point");
    EXPECT_JSTR(jget(lab, "token_point"), "C:\\flush\\", "labels.token_point");
    const jval *cl = jget(root, "const_labels");
    EXPECT_TRUE(cl && cl->n == 2);
    EXPECT_JSTR(jget(jat(cl, 0), "name"), "region", "const_labels[0].name");
    EXPECT_JSTR(jget(jat(cl, 0), "value"), HOSTILE_DECODED, "const_labels[0].value");
    EXPECT_JSTR(jget(jat(cl, 1), "value"), "a,b=c}", "const_labels[1].value");
    jdestroy(root);
  }
  free(json);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* hostile label values are escaped in the text report */
TEST(hostile_labels_text) {
  ttft_registry *r = hostile();
  ttft_snapshot *s = ttft_snapshot_take(r);
  long n;
  char *text = render(s, TTFT_FORMAT_TEXT, &n);
  if (text) {
    int raw_ctl = 0;
    for (long i = 0; i < n; i++)
      if (((unsigned char)text[i] < 0x20 && text[i] != '\n') || text[i] == 0x7F) raw_ctl = 1;
    EXPECT_FALSE(raw_ctl); /* no ESC, no tab, no stray newline from a label */
    EXPECT_CONTAINS(text, "model: q\"b\\\\s/n\\x0At\\x09c\\x01\\x1F del\\x7F e\xC3\xA9 cjk");
    EXPECT_CONTAINS(text, "bad\\xFF ovl\\xC0\\xAF sur\\xED\\xA0\\x80 \\x1B[31mred");
    EXPECT_CONTAINS(text, "clock starts at: client \"send\"; token counted at: C:\\\\flush\\\\\n");
    EXPECT_CONTAINS(text, "pool=a,b=c}");
    /* the header is still three lines and a blank one */
    const char *blank = strstr(text, "\n\n");
    int lines = 0;
    for (const char *p = text; blank && p < blank; p++) lines += *p == '\n';
    EXPECT_EQ_INT(2, lines);
  }
  free(text);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* ------------------------------------------------------------------ text */

/* the text of the typical registry (text: labels, metric rows, classes,
 * splits, capacity wording) */
typedef struct text_world {
  ttft_registry *r;
  ttft_snapshot *s;
  char *text;
  int chat;
} text_world;

static int text_open(text_world *w) {
  w->r = typical(&w->chat);
  w->s = ttft_snapshot_take(w->r);
  long n;
  w->text = render(w->s, TTFT_FORMAT_TEXT, &n);
  return w->text != NULL;
}

static void text_close(text_world *w) {
  free(w->text);
  ttft_snapshot_free(w->s);
  ttft_registry_free(w->r);
}

TEST(text_header_and_width) {
  text_world w;
  if (text_open(&w)) {
    const char *text = w.text;
    fputs(text, stderr); /* for the log: what the table looks like */
    EXPECT_CONTAINS(text, "clock starts at: server_arrival; token counted at: detokenized_flush");
    EXPECT_CONTAINS(text, "model: llama-3-8b");
    EXPECT_CONTAINS(text, "capacity view, not TPOT");
    EXPECT_CONTAINS(text, "tokens/s");
    EXPECT_CONTAINS(text, "good streams/s");
    EXPECT_CONTAINS(text, "p99.9");
    EXPECT_LE_U64(max_line_columns(text), 100);
  }
  text_close(&w);
}

TEST(text_metric_rows) {
  text_world w;
  if (text_open(&w)) {
    const char *text = w.text;
    ttft_snapshot *s = w.s;
    char line[256], want[64];
    /* every metric has a row, count in the second column */
    for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
      snprintf(want, sizeof want, "%s ", ttft_metric_name((ttft_metric)m));
      EXPECT_TRUE(line_starting(text, want, line, sizeof line));
      char name[64];
      unsigned long long cnt = 0;
      EXPECT_EQ_INT(2, sscanf(line, m == TTFT_METRIC_OUTPUT_TOKENS ? "%63s tok %llu" : "%63s %llu",
                              name, &cnt));
      EXPECT_EQ_U64(ttft_snapshot_count(s, (ttft_metric)m), cnt);
    }
    /* the TTFT row: p50 in ms with three significant digits */
    EXPECT_TRUE(line_starting(text, "ttft ", line, sizeof line));
    char name[64], p50[32], unit[16], shown[48];
    unsigned long long cnt;
    EXPECT_EQ_INT(4, sscanf(line, "%63s %llu %31s %15s", name, &cnt, p50, unit));
    snprintf(shown, sizeof shown, "%s %s", p50, unit); /* number, space, unit */
    double v = (double)ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, 0.5) / 1e6;
    char exp[32];
    snprintf(exp, sizeof exp, v < 9.995 ? "%.2f ms" : v < 99.95 ? "%.1f ms" : "%.0f ms", v);
    EXPECT_STREQ(exp, shown);
  }
  text_close(&w);
}

/* status counts, stalls, abandoned, preemptions */
TEST(text_status_lines) {
  text_world w;
  if (text_open(&w)) {
    const char *text = w.text;
    ttft_snapshot *s = w.s;
    char line[256];
    snprintf(line, sizeof line, "begun %llu, completed %llu, cancelled %llu, errors %llu, dropped 0",
             (unsigned long long)ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN),
             (unsigned long long)ttft_snapshot_counter(s, TTFT_COUNTER_COMPLETED),
             (unsigned long long)ttft_snapshot_counter(s, TTFT_COUNTER_CANCELLED),
             (unsigned long long)ttft_snapshot_counter(s, TTFT_COUNTER_ERRORS));
    EXPECT_CONTAINS(text, line);
    EXPECT_CONTAINS(text, "in flight now 2");
    snprintf(line, sizeof line, "gaps %llu, stalled sequences %llu, stalled now %llu",
             (unsigned long long)ttft_snapshot_counter(s, TTFT_COUNTER_STALLS),
             (unsigned long long)ttft_snapshot_counter(s, TTFT_COUNTER_STALLED_SEQS),
             (unsigned long long)ttft_snapshot_gauge(s, TTFT_GAUGE_LIVE_STALLS));
    EXPECT_CONTAINS(text, line);
    snprintf(line, sizeof line, "abandoned before first token: %llu, waited p50 ",
             (unsigned long long)ttft_snapshot_counter(s, TTFT_COUNTER_ABANDONED));
    EXPECT_CONTAINS(text, line);
    snprintf(line, sizeof line, "preemptions: %llu",
             (unsigned long long)ttft_snapshot_counter(s, TTFT_COUNTER_PREEMPTIONS));
    EXPECT_CONTAINS(text, line);
  }
  text_close(&w);
}

/* SLO rows: one per class, good/judged and percent; chat's budgets */
TEST(text_slo_rows) {
  text_world w;
  if (text_open(&w)) {
    const char *text = w.text;
    ttft_snapshot *s = w.s;
    char line[256], want[64];
    for (int cl = 0; cl < ttft_snapshot_classes(s); cl++) {
      EXPECT_TRUE(line_starting(text, ttft_snapshot_class_name(s, cl), line, sizeof line));
      snprintf(want, sizeof want, " %llu/%llu ",
               (unsigned long long)ttft_snapshot_class_counter(s, cl, TTFT_COUNTER_SLO_MET),
               (unsigned long long)ttft_snapshot_class_counter(s, cl, TTFT_COUNTER_SLO_JUDGED));
      EXPECT_CONTAINS(line, want);
      snprintf(want, sizeof want, " %.1f%%", 100.0 * ttft_snapshot_attainment(s, cl));
      EXPECT_CONTAINS(line, want);
    }
    EXPECT_TRUE(line_starting(text, "chat ", line, sizeof line));
    EXPECT_CONTAINS(line, "50.0 ms"); /* its TTFT budget */
    EXPECT_CONTAINS(line, "30.0 ms"); /* its TPOT budget */
    EXPECT_CONTAINS(text, "per class"); /* more than one class: per-class rows */
    EXPECT_TRUE(line_starting(text, "all classes", line, sizeof line));
  }
  text_close(&w);
}

/* splits: miss/hit rows; bands only when they hold data */
TEST(text_split_rows) {
  text_world w;
  if (text_open(&w)) {
    const char *text = w.text;
    ttft_snapshot *s = w.s;
    char line[256], want[64];
    EXPECT_TRUE(line_starting(text, "prefix miss ", line, sizeof line));
    EXPECT_TRUE(line_starting(text, "prefix hit ", line, sizeof line));
    for (unsigned b = 0; b < ttft_snapshot_bands(s); b++) {
      uint32_t lo, hi;
      ttft_snapshot_band(s, b, &lo, &hi);
      if (b == 0) snprintf(want, sizeof want, "prompt <%u ", (unsigned)hi);
      else if (hi == UINT32_MAX) snprintf(want, sizeof want, "prompt >=%u ", (unsigned)lo);
      else snprintf(want, sizeof want, "prompt %u-%u ", (unsigned)lo, (unsigned)hi - 1);
      int has = ttft_snapshot_split_count(s, TTFT_SPLIT_PROMPT_BAND, b) > 0;
      EXPECT_EQ_INT(has, line_starting(text, want, line, sizeof line));
    }
  }
  text_close(&w);
}

/* a registry (configuration c) holding one completed stream: one token
 * after ns, so one TTFT observation of ns */
static ttft_registry *one_stream(const ttft_config *c, uint64_t ns) {
  ttft_registry *r = ttft_registry_new(c);
  ttft_seq q = ttft_begin(r, T0);
  ttft_token_emitted(r, q, 1, T0 + ns);
  ttft_stream_end(r, q, TTFT_COMPLETED, T0 + ns);
  return r;
}

/* text: empty metrics show '-' */
TEST(text_empty_registry) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_threads = 1;
  ttft_registry *r = ttft_registry_new(&c);
  ttft_snapshot *s = ttft_snapshot_take(r);
  long n;
  char *text = render(s, TTFT_FORMAT_TEXT, &n);
  char line[256];
  if (text) {
    EXPECT_TRUE(line_starting(text, "ttft ", line, sizeof line));
    char name[32], c1[16], c2[16], c3[16];
    EXPECT_EQ_INT(4, sscanf(line, "%31s %15s %15s %15s", name, c1, c2, c3));
    EXPECT_STREQ("0", c1);
    EXPECT_STREQ("-", c2);
    EXPECT_STREQ("-", c3);
    EXPECT_FALSE(strstr(text, "per class")); /* one class: no per-class rows */
    EXPECT_FALSE(strstr(text, "prompt <"));  /* no band with data */
    EXPECT_CONTAINS(text, "model: -");
    EXPECT_CONTAINS(text, "capacity view, not TPOT");
    EXPECT_CONTAINS(text, "waited p50 -, p99 -");
  }
  free(text);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* text: units follow the value; one value per unit, each as a single TTFT
 * observation */
TEST(text_duration_units) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_threads = 1;
  static const struct {
    uint64_t ns;
    const char *shown;
  } units[] = {{999, "999 ns"},           {1000, "1.00 \xC2\xB5s"},  {12345, "12.3 \xC2\xB5s"},
               {999499, "999 \xC2\xB5s"}, {999600, "1.00 ms"},       {250 * MS, "250 ms"},
               {1500 * MS, "1.50 s"},     {59 * 1000 * MS, "59.0 s"}, {90 * 1000 * MS, "1.50 min"},
               {3600 * 1000 * MS, "60.0 min"}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    ttft_registry *r = one_stream(&c, units[i].ns);
    ttft_snapshot *s = ttft_snapshot_take(r);
    long n;
    char line[256];
    char *text = render(s, TTFT_FORMAT_TEXT, &n);
    if (text && line_starting(text, "ttft ", line, sizeof line)) {
      char name[32], cnt[16], p50[32], unit[16], shown[48];
      EXPECT_EQ_INT(4, sscanf(line, "%31s %15s %31s %15s", name, cnt, p50, unit));
      snprintf(shown, sizeof shown, "%s %s", p50, unit);
      EXPECT_STREQ(units[i].shown, shown);
    } else {
      EXPECT_TRUE(!"no ttft row");
    }
    free(text);
    ttft_snapshot_free(s);
    ttft_registry_free(r);
  }
}

/* text: OUTPUT_TOKENS is shown in tokens, not as a duration */
TEST(text_output_tokens_unit) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_threads = 1;
  ttft_registry *r = one_stream(&c, 3600 * 1000 * MS);
  ttft_snapshot *s = ttft_snapshot_take(r);
  long n;
  char line[256];
  char *text = render(s, TTFT_FORMAT_TEXT, &n);
  if (text && line_starting(text, "output_tokens", line, sizeof line)) {
    char name[32], unit[8], cnt[16], p50[32];
    EXPECT_EQ_INT(4, sscanf(line, "%31s %7s %15s %31s", name, unit, cnt, p50));
    EXPECT_STREQ("tok", unit);
    EXPECT_STREQ("1", p50);
  } else {
    EXPECT_TRUE(!"no output_tokens row");
  }
  free(text);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TU_MAIN()
