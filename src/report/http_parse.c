/*
 * http_parse.c — the endpoint's request parser, ttft__http_parse
 * (declared, with its contract, in report/http.h).
 *
 * Invariant: a pure function over bytes. No I/O, no allocation, no global
 * or static mutable state; it never reads at or past min(len,
 * TTFT__HTTP_MAX_REQUEST) and needs no NUL terminator; *out is written only
 * for a complete head. The server calls it again with the whole buffer
 * each time more bytes of a request arrive, so every answer depends on
 * the bytes alone: a valid prefix of a request is NEED_MORE, never an
 * error, and the same complete head gives the same answer whatever
 * follows it (tests/fuzz/fuzz_http.c checks both).
 */
#include "report/http.h"

#include <string.h>

static int is_tchar(unsigned char ch) {
  if ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) return 1;
  return ch != 0 && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static int is_ows(unsigned char ch) { return ch == ' ' || ch == '\t'; }

/* Bytes that may not appear anywhere in a request head (LF and CR are
 * handled by find_line). */
static int is_bad_byte(unsigned char ch) {
  return (ch < 0x20 && ch != '\t' && ch != '\r' && ch != '\n') || ch == 0x7f;
}

static unsigned char lower(unsigned char ch) {
  return (ch >= 'A' && ch <= 'Z') ? (unsigned char)(ch + ('a' - 'A')) : ch;
}

/* b[0, n) equals the lower-case literal lit, ignoring ASCII case. */
static int ieq(const unsigned char *b, size_t n, const char *lit) {
  size_t i;
  for (i = 0; i < n; i++)
    if (lit[i] == '\0' || lower(b[i]) != (unsigned char)lit[i]) return 0;
  return lit[n] == '\0';
}

static int starts_ieq(const unsigned char *b, size_t n, const char *lit) {
  size_t k = strlen(lit);
  return n >= k && ieq(b, k, lit);
}

/* The line starting at p: 1 with its content end (before CR LF or LF) in
 * *end and the next line's start in *next; 0 when no LF is there yet;
 * -400 for a control byte or a CR that is not followed by LF. */
static int find_line(const unsigned char *b, size_t p, size_t len, size_t *end, size_t *next) {
  size_t i;
  for (i = p; i < len; i++) {
    unsigned char ch = b[i];
    if (ch == '\n') {
      *end = (i > p && b[i - 1] == '\r') ? i - 1 : i;
      *next = i + 1;
      return 1;
    }
    if (ch == '\r') {
      if (i + 1 < len && b[i + 1] != '\n') return -400;
    } else if (is_bad_byte(ch)) {
      return -400;
    }
  }
  return 0;
}

/* A qvalue ("0", "0.5", "1.000") as thousandths; -1 when malformed. */
static int parse_qvalue(const unsigned char *v, size_t n) {
  int q, scale = 100;
  size_t i;
  if (n == 0 || (v[0] != '0' && v[0] != '1')) return -1;
  q = (v[0] - '0') * 1000;
  if (n == 1) return q;
  if (v[1] != '.' || n > 5) return -1;
  for (i = 2; i < n; i++, scale /= 10) {
    if (v[i] < '0' || v[i] > '9') return -1;
    q += (v[i] - '0') * scale;
  }
  return q > 1000 ? -1 : q;
}

static void trim(const unsigned char *b, size_t *s, size_t *e) {
  while (*s < *e && is_ows(b[*s])) (*s)++;
  while (*e > *s && is_ows(b[*e - 1])) (*e)--;
}

/* ---------------------------------------------------------------- Accept
 * Each representation /metrics can send gets the q-value of the most
 * specific Accept element that matches it (RFC 9110, 12.5.1): a media type
 * with matching parameters beats the bare type, which beats "text/ *" and
 * "* / *". Protobuf and OpenMetrics must be named explicitly (a wildcard
 * never selects them: curl and browsers send "* / *" and expect text);
 * their explicit q=0 refuses them. */
enum { ACC_TEXT = TTFT__HTTP_ACCEPT_TEXT, ACC_OM = TTFT__HTTP_ACCEPT_OPENMETRICS,
       ACC_PB = TTFT__HTTP_ACCEPT_PROTOBUF, ACC_N = 3 };

typedef struct accept_best {
  int spec[ACC_N]; /* specificity of the best match so far, 0 = none */
  int q[ACC_N];    /* its q-value in thousandths */
} accept_best;

static void accept_note(accept_best *a, int rep, int spec, int q) {
  if (spec > a->spec[rep] || (spec == a->spec[rep] && q > a->q[rep])) {
    a->spec[rep] = spec;
    a->q[rep] = q;
  }
}

/* The media parameters of one element, as far as they matter here. */
typedef struct accept_params {
  int q;           /* thousandths; 1000 when absent, -1 malformed */
  int version;     /* 0 absent, 1 "1.x" (OpenMetrics), 2 "0.0.4" (text), -1 other */
  int proto;       /* 0 absent, 1 io.prometheus.client.MetricFamily, -1 other */
  int encoding;    /* 0 absent, 1 delimited, -1 other */
} accept_params;

static int value_is(const unsigned char *v, size_t n, const char *lit) {
  return n == strlen(lit) && memcmp(v, lit, n) == 0; /* parameter values are case-sensitive */
}

/* Parameters b[p, e) of one element, p at the first ';'. Parameters after
 * q are accept-extensions (RFC 9110) and are ignored. */
static void accept_params_parse(const unsigned char *b, size_t p, size_t e, accept_params *ap) {
  int after_q = 0;
  ap->q = 1000;
  ap->version = ap->proto = ap->encoding = 0;
  while (p < e && !after_q) { /* p is at ';' */
    size_t ps = p + 1, pe = ps, eq;
    int quoted = 0;
    while (pe < e && (quoted || b[pe] != ';')) {
      if (b[pe] == '"') quoted = !quoted;
      else if (quoted && b[pe] == '\\' && pe + 1 < e) pe++;
      pe++;
    }
    p = pe;
    trim(b, &ps, &pe);
    for (eq = ps; eq < pe && b[eq] != '='; eq++) {}
    if (eq == pe) continue;
    {
      size_t ns = ps, ne = eq, vs = eq + 1, ve = pe;
      trim(b, &ns, &ne);
      trim(b, &vs, &ve);
      if (ve - vs >= 2 && b[vs] == '"' && b[ve - 1] == '"') {
        vs++;
        ve--;
      }
      if (ieq(b + ns, ne - ns, "q")) {
        ap->q = parse_qvalue(b + vs, ve - vs);
        after_q = 1;
      } else if (ieq(b + ns, ne - ns, "version")) {
        if (value_is(b + vs, ve - vs, "0.0.4")) ap->version = 2;
        else if (ve - vs >= 2 && b[vs] == '1' && b[vs + 1] == '.') ap->version = 1;
        else ap->version = -1;
      } else if (ieq(b + ns, ne - ns, "proto")) {
        ap->proto = value_is(b + vs, ve - vs, "io.prometheus.client.MetricFamily") ? 1 : -1;
      } else if (ieq(b + ns, ne - ns, "encoding")) {
        ap->encoding = value_is(b + vs, ve - vs, "delimited") ? 1 : -1;
      }
    }
  }
}

/* One element of an Accept list, b[s, e). Malformed elements are ignored:
 * a strange Accept never fails a scrape. */
static void accept_element(const unsigned char *b, size_t s, size_t e, accept_best *a) {
  size_t ms, me;
  accept_params ap;
  trim(b, &s, &e);
  ms = s;
  me = s;
  while (me < e && b[me] != ';') me++;
  accept_params_parse(b, me, e, &ap);
  trim(b, &ms, &me);
  if (ap.q < 0) return;
  if (ieq(b + ms, me - ms, "*/*")) {
    accept_note(a, ACC_TEXT, 1, ap.q);
  } else if (ieq(b + ms, me - ms, "text/*")) {
    accept_note(a, ACC_TEXT, 2, ap.q);
  } else if (ieq(b + ms, me - ms, "text/plain")) {
    /* version 0.0.4 (ours) or none; another version is a format we lack */
    if (ap.version == 0) accept_note(a, ACC_TEXT, 3, ap.q);
    else if (ap.version == 2) accept_note(a, ACC_TEXT, 4, ap.q);
  } else if (ieq(b + ms, me - ms, "application/openmetrics-text")) {
    /* we write 1.0.0; any 1.x or no version takes it */
    if (ap.version == 0) accept_note(a, ACC_OM, 3, ap.q);
    else if (ap.version == 1) accept_note(a, ACC_OM, 4, ap.q);
  } else if (ieq(b + ms, me - ms, "application/vnd.google.protobuf")) {
    /* the only protobuf we write: delimited MetricFamily messages; a
     * parameter that names anything else is another representation */
    if (ap.proto >= 0 && ap.encoding >= 0) accept_note(a, ACC_PB, 3 + ap.proto + ap.encoding, ap.q);
  }
}

static void accept_scan(const unsigned char *b, size_t s, size_t e, accept_best *a) {
  while (s < e) {
    size_t k = s;
    int quoted = 0;
    while (k < e && (quoted || b[k] != ',')) {
      if (b[k] == '"') quoted = !quoted;
      else if (quoted && b[k] == '\\' && k + 1 < e) k++;
      k++;
    }
    accept_element(b, s, k, a);
    s = k + 1;
  }
}

/* The representation to send: the highest q above zero, ties to protobuf,
 * then OpenMetrics, then text; text when nothing acceptable is named (a
 * 406 would fail the scrape). */
static ttft__http_accept accept_choose(const accept_best *a) {
  static const int order[ACC_N] = {ACC_PB, ACC_OM, ACC_TEXT};
  int best = ACC_TEXT, best_q = 0, i;
  for (i = 0; i < ACC_N; i++) {
    int rep = order[i];
    if (a->spec[rep] > 0 && a->q[rep] > best_q) {
      best = rep;
      best_q = a->q[rep];
    }
  }
  return (ttft__http_accept)best;
}

/* Content-Length: digits only, saturating; -1 when malformed. */
static int parse_length(const unsigned char *v, size_t n, unsigned long long *out) {
  unsigned long long x = 0;
  size_t i;
  if (n == 0) return -1;
  for (i = 0; i < n; i++) {
    if (v[i] < '0' || v[i] > '9') return -1;
    x = (x > (~0ULL - 9) / 10) ? ~0ULL : x * 10 + (unsigned)(v[i] - '0');
  }
  *out = x;
  return 0;
}

/* The request line b[p, e): method SP request-target SP HTTP-version. */
static int parse_request_line(const unsigned char *b, size_t p, size_t e, ttft__http_req *q) {
  size_t i = p, ms = p, mlen, ts, te, ps;
  while (i < e && is_tchar(b[i])) i++;
  if (i == ms || i >= e || b[i] != ' ') return -400;
  mlen = i - ms;
  if (mlen == 3 && memcmp(b + ms, "GET", 3) == 0) q->method = TTFT__HTTP_GET;
  else if (mlen == 4 && memcmp(b + ms, "HEAD", 4) == 0) q->method = TTFT__HTTP_HEAD;
  else q->method = TTFT__HTTP_OTHER;
  ts = ++i;
  while (i < e && b[i] > 0x20 && b[i] < 0x7f) i++;
  te = i;
  if (te == ts || i >= e || b[i] != ' ') return -400;
  i++;
  if (e - i != 8 || memcmp(b + i, "HTTP/", 5) != 0 || b[i + 6] != '.' || b[i + 5] < '0' ||
      b[i + 5] > '9' || b[i + 7] < '0' || b[i + 7] > '9')
    return -400;
  if (b[i + 5] != '1') return -505;
  q->minor_version = b[i + 7] == '0' ? 0 : 1; /* a later 1.x is served as 1.1 */

  /* request-target: origin-form, absolute-form or (OPTIONS only) '*' */
  if (b[ts] == '/') {
    ps = ts;
  } else if (te - ts == 1 && b[ts] == '*') {
    if (!(mlen == 7 && memcmp(b + ms, "OPTIONS", 7) == 0)) return -400;
    q->path = (const char *)b + ts;
    q->path_len = 1;
    return 0;
  } else {
    size_t a;
    if (starts_ieq(b + ts, te - ts, "http://")) a = ts + 7;
    else if (starts_ieq(b + ts, te - ts, "https://")) a = ts + 8;
    else return -400;
    ps = a;
    while (ps < te && b[ps] != '/' && b[ps] != '?' && b[ps] != '#') ps++;
    if (ps == a) return -400; /* no authority */
  }
  for (i = ps; i < te && b[i] != '?' && b[i] != '#'; i++) {}
  q->path = (const char *)b + ps;
  q->path_len = i - ps;
  return 0;
}

int ttft__http_parse(const char *buf, size_t len, ttft__http_req *out) {
  const unsigned char *b = (const unsigned char *)buf;
  size_t lim = len < TTFT__HTTP_MAX_REQUEST ? len : TTFT__HTTP_MAX_REQUEST;
  size_t p = 0, e, nx;
  unsigned hosts = 0, fields = 0;
  int rc, has_te = 0, has_cl = 0;
  unsigned long long cl = 0;
  ttft__http_req q;
  accept_best acc;

  if (lim == 0) return TTFT__HTTP_NEED_MORE;
  memset(&q, 0, sizeof q);
  memset(&acc, 0, sizeof acc);

  /* empty lines before the request line are ignored (RFC 9112, 2.2) */
  for (;;) {
    rc = find_line(b, p, lim, &e, &nx);
    if (rc < 0) return rc;
    if (rc == 0) {
      size_t i = p;
      if (lim >= TTFT__HTTP_MAX_REQUEST) return -414;
      /* fail early on what cannot become a method */
      while (i < lim && is_tchar(b[i])) i++;
      if (i < lim && !(b[i] == ' ' && i > p) && !(b[i] == '\r' && i == p)) return -400;
      return TTFT__HTTP_NEED_MORE;
    }
    if (e != p) break;
    p = nx;
  }
  rc = parse_request_line(b, p, e, &q);
  if (rc < 0) return rc;
  p = nx;

  for (;;) {
    size_t ns, ne, vs, ve;
    rc = find_line(b, p, lim, &e, &nx);
    if (rc < 0) return rc;
    if (rc == 0) return lim >= TTFT__HTTP_MAX_REQUEST ? -431 : TTFT__HTTP_NEED_MORE;
    if (e == p) break; /* the blank line: end of the head */
    if (is_ows(b[p])) return -400; /* obs-fold or stray whitespace */
    if (++fields > TTFT__HTTP_MAX_FIELDS) return -431;
    ns = p;
    for (ne = ns; ne < e && is_tchar(b[ne]); ne++) {}
    if (ne == ns || ne >= e || b[ne] != ':') return -400;
    vs = ne + 1;
    ve = e;
    trim(b, &vs, &ve);
    if (ieq(b + ns, ne - ns, "host")) {
      hosts++;
    } else if (ieq(b + ns, ne - ns, "content-length")) {
      unsigned long long v;
      if (parse_length(b + vs, ve - vs, &v) < 0 || (has_cl && v != cl)) return -400;
      has_cl = 1;
      cl = v;
    } else if (ieq(b + ns, ne - ns, "transfer-encoding")) {
      has_te = 1;
    } else if (ieq(b + ns, ne - ns, "accept")) {
      accept_scan(b, vs, ve, &acc);
    }
    p = nx;
  }
  if (hosts > 1 || (hosts == 0 && q.minor_version >= 1)) return -400;
  if (has_te) return -501;
  if (cl > TTFT__HTTP_MAX_REQUEST) return -413;
  q.content_length = cl;
  q.accept = accept_choose(&acc);
  q.head_len = nx;
  *out = q;
  return TTFT__HTTP_COMPLETE;
}
