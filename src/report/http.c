/*
 * http.c — the optional /metrics endpoint: one thread, poll(), plain
 * POSIX sockets, HTTP/1.1 with one request per connection.
 *
 * The thread owns everything below the public functions: the listening
 * socket, up to HTTP_MAX_CONN client connections and their buffers. The
 * hooks never see the server; it only calls ttft_snapshot_take, which runs
 * beside them. A client can cost the others at most one short turn of the
 * loop: sockets are non-blocking, every connection has a deadline, and a
 * full table makes room by dropping its oldest idle connection.
 *
 * Life of a connection: READ (until a whole request head is in, within
 * HTTP_HEAD_TIMEOUT) -> WRITE (the response, within HTTP_SEND_TIMEOUT) ->
 * LINGER (write side shut, unread input discarded until the client closes,
 * so that closing does not reset the response away) -> closed.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#  define _GNU_SOURCE /* accept4 */
#endif
#include "report/http.h"

#include <string.h>

/* ================================================================ parser */

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

/* ================================================================ server */
#if defined(TTFT_HAVE_HTTP)

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HTTP_MAX_CONN 64
#define HTTP_MS UINT64_C(1000000)
#define HTTP_HEAD_TIMEOUT (5000 * HTTP_MS)   /* whole request head       */
#define HTTP_SEND_TIMEOUT (10000 * HTTP_MS)  /* whole response           */
#define HTTP_LINGER_TIMEOUT (2000 * HTTP_MS) /* wait for the client's FIN */
#define HTTP_LINGER_BYTES (256 * 1024)       /* input discarded at most   */
#define HTTP_EVICT_GRACE (250 * HTTP_MS)     /* a reader younger than this
                                                is never dropped for room */
#define HTTP_ACCEPT_BACKOFF (100 * HTTP_MS)  /* after EMFILE and the like  */

enum { C_FREE = 0, C_READ, C_WRITE, C_LINGER };

typedef struct http_conn {
  int fd;
  int state;
  uint64_t t_accept, deadline;
  char *in;
  size_t in_len;
  char *out; /* head + body of the response */
  size_t out_len, out_off;
  int out_owned; /* out was allocated (else it is a static string) */
  size_t drained;
} http_conn;

struct ttft_http {
  ttft_allocator alloc;
  ttft_registry *r;
  int lfd, wake_r, wake_w;
  int port;
  pthread_t thread;
  uint64_t accept_pause_until;
  http_conn c[HTTP_MAX_CONN];
  struct pollfd pfd[HTTP_MAX_CONN + 2];
  int pconn[HTTP_MAX_CONN + 2]; /* index into c[] of pfd[i], -1 for others */
};

static const char http_oom_response[] =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

static int set_flags(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
  fl = fcntl(fd, F_GETFD);
  if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0) return -1;
  return 0;
}

static int accept_fd(int lfd) {
  int fd;
#if defined(__linux__)
  do fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  return fd;
#else
  do fd = accept(lfd, NULL, NULL);
  while (fd < 0 && errno == EINTR);
  if (fd >= 0 && set_flags(fd) < 0) {
    close(fd);
    return -1;
  }
#  if defined(SO_NOSIGPIPE)
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
  }
#  endif
  return fd;
#endif
}

#if defined(MSG_NOSIGNAL)
#  define HTTP_SEND_FLAGS MSG_NOSIGNAL
#else
#  define HTTP_SEND_FLAGS 0 /* SO_NOSIGPIPE is set on the socket instead */
#endif

/* ------------------------------------------------------------ responses */

static const char *reason(int status) {
  switch (status) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 413: return "Content Too Large";
  case 414: return "URI Too Long";
  case 431: return "Request Header Fields Too Large";
  case 501: return "Not Implemented";
  case 503: return "Service Unavailable";
  case 505: return "HTTP Version Not Supported";
  default: return "Internal Server Error";
  }
}

/* The response head into hdr (large enough for any, see callers). */
static size_t response_head(char *hdr, size_t cap, int status, const char *ctype, size_t body_len,
                            const char *extra) {
  static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  char date[40] = "";
  time_t now = time(NULL);
  struct tm tm;
  int n;
  if (gmtime_r(&now, &tm) && tm.tm_wday >= 0 && tm.tm_wday < 7 && tm.tm_mon >= 0 && tm.tm_mon < 12)
    snprintf(date, sizeof date, "Date: %s, %02d %s %04d %02d:%02d:%02d GMT\r\n", days[tm.tm_wday],
             tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  n = snprintf(hdr, cap,
               "HTTP/1.1 %d %s\r\n%sServer: libttft/" TTFT_VERSION_STRING "\r\n"
               "Content-Type: %s\r\nContent-Length: %zu\r\n%s"
               "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
               "Connection: close\r\n\r\n",
               status, reason(status), date, ctype, body_len, extra ? extra : "");
  return (n < 0 || (size_t)n >= cap) ? 0 : (size_t)n;
}

static void out_reset(ttft_http *srv, http_conn *c) {
  if (c->out_owned) ttft__free(&srv->alloc, c->out);
  c->out = NULL;
  c->out_owned = 0;
  c->out_len = c->out_off = 0;
}

static void conn_send(ttft_http *srv, http_conn *c, uint64_t now);

/* Make out (len bytes; owned: allocated with srv->alloc) the response of c
 * and start sending it. */
static void start_write(ttft_http *srv, http_conn *c, char *out, size_t len, int owned, uint64_t now) {
  out_reset(srv, c);
  c->out = out;
  c->out_len = len;
  c->out_owned = owned;
  c->state = C_WRITE;
  c->deadline = now + HTTP_SEND_TIMEOUT;
  conn_send(srv, c, now);
}

static void respond(ttft_http *srv, http_conn *c, int status, const char *ctype, const char *body,
                    int head_only, const char *extra, uint64_t now) {
  char hdr[640];
  size_t blen = body ? strlen(body) : 0;
  size_t hlen = response_head(hdr, sizeof hdr, status, ctype, blen, extra);
  size_t total = hlen + (head_only ? 0 : blen);
  char *out = hlen ? ttft__alloc(&srv->alloc, total + 1) : NULL;
  if (!out) {
    start_write(srv, c, (char *)http_oom_response, sizeof http_oom_response - 1, 0, now);
    return;
  }
  memcpy(out, hdr, hlen);
  if (!head_only && blen) memcpy(out + hlen, body, blen);
  start_write(srv, c, out, total, 1, now);
}

static void respond_error(ttft_http *srv, http_conn *c, int status, int head_only, uint64_t now) {
  char body[64];
  snprintf(body, sizeof body, "%d %s\n", status, reason(status));
  respond(srv, c, status, "text/plain; charset=utf-8", body, head_only,
          status == 405 ? "Allow: GET, HEAD\r\n" : NULL, now);
}

/* Take a snapshot and send it in format f: 500 when the format fails
 * (e.g. is not available), 503 when memory is short. */
static void respond_snapshot(ttft_http *srv, http_conn *c, ttft_format f, const char *ctype,
                             int head_only, const char *extra, uint64_t now) {
  char hdr[640];
  ttft_snapshot *s = ttft_snapshot_take(srv->r);
  long n = s ? ttft_snapshot_format(s, f, NULL, 0) : TTFT_ENOMEM;
  /* protobuf falls back to the text format whenever it fails (TTFT_ENOTSUP
   * in a build without it, or anything else): a scrape never fails for it */
  if (f == TTFT_FORMAT_PROMETHEUS_PROTOBUF && s && n < 0) {
    f = TTFT_FORMAT_PROMETHEUS;
    ctype = "text/plain; version=0.0.4; charset=utf-8";
    n = ttft_snapshot_format(s, f, NULL, 0);
  }
  size_t hlen = 0, total = 0;
  char *out = NULL;
  int status = 500;
  if (n >= 0 && (unsigned long)n < (unsigned long)(SIZE_MAX / 2)) {
    hlen = response_head(hdr, sizeof hdr, 200, ctype, (size_t)n, extra);
    total = hlen + (head_only ? 0 : (size_t)n);
    out = hlen ? ttft__alloc(&srv->alloc, total + 1) : NULL;
    if (hlen && !out) status = 503;
  } else if (n == TTFT_ENOMEM) {
    status = 503;
  }
  if (out) {
    memcpy(out, hdr, hlen);
    if (!head_only && ttft_snapshot_format(s, f, out + hlen, (size_t)n + 1) != n) {
      ttft__free(&srv->alloc, out);
      out = NULL;
    }
  }
  ttft_snapshot_free(s);
  if (out) start_write(srv, c, out, total, 1, now);
  else respond_error(srv, c, status, head_only, now);
}

static int path_is(const ttft__http_req *q, const char *p) {
  size_t n = strlen(p);
  if (q->path_len == 0) return strcmp(p, "/") == 0; /* "GET http://host HTTP/1.1" */
  return q->path_len == n && memcmp(q->path, p, n) == 0;
}

static void route(ttft_http *srv, http_conn *c, const ttft__http_req *q, uint64_t now) {
  static const char index_body[] =
      "libttft " TTFT_VERSION_STRING "\n"
      "/metrics      Prometheus text format (OpenMetrics or protobuf when Accept asks for it)\n"
      "/report       the text report\n"
      "/report.json  the JSON report\n";
  int head_only = q->method == TTFT__HTTP_HEAD;
  int known = path_is(q, "/metrics") || path_is(q, "/report") || path_is(q, "/report.json") ||
              path_is(q, "/") || path_is(q, "*");
  if (!known) {
    respond_error(srv, c, 404, head_only, now);
  } else if (q->method == TTFT__HTTP_OTHER || path_is(q, "*")) {
    respond_error(srv, c, 405, 0, now);
  } else if (path_is(q, "/metrics")) {
    if (q->accept == TTFT__HTTP_ACCEPT_PROTOBUF)
      respond_snapshot(srv, c, TTFT_FORMAT_PROMETHEUS_PROTOBUF,
                       "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; "
                       "encoding=delimited",
                       head_only, "Vary: Accept\r\n", now);
    else if (q->accept == TTFT__HTTP_ACCEPT_OPENMETRICS)
      respond_snapshot(srv, c, TTFT_FORMAT_OPENMETRICS,
                       "application/openmetrics-text; version=1.0.0; charset=utf-8", head_only,
                       "Vary: Accept\r\n", now);
    else
      respond_snapshot(srv, c, TTFT_FORMAT_PROMETHEUS, "text/plain; version=0.0.4; charset=utf-8",
                       head_only, "Vary: Accept\r\n", now);
  } else if (path_is(q, "/report")) {
    respond_snapshot(srv, c, TTFT_FORMAT_TEXT, "text/plain; charset=utf-8", head_only, NULL, now);
  } else if (path_is(q, "/report.json")) {
    respond_snapshot(srv, c, TTFT_FORMAT_JSON, "application/json", head_only, NULL, now);
  } else {
    respond(srv, c, 200, "text/plain; charset=utf-8", index_body, head_only, NULL, now);
  }
}

/* ---------------------------------------------------------- connections */

static void conn_close(ttft_http *srv, http_conn *c) {
  if (c->state == C_FREE) return;
  close(c->fd);
  out_reset(srv, c);
  ttft__free(&srv->alloc, c->in);
  memset(c, 0, sizeof *c);
  c->fd = -1;
  c->state = C_FREE;
}

static void conn_send(ttft_http *srv, http_conn *c, uint64_t now) {
  while (c->out_off < c->out_len) {
    ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, HTTP_SEND_FLAGS);
    if (n > 0) {
      c->out_off += (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return; /* poll for POLLOUT */
    } else {
      conn_close(srv, c); /* EPIPE, ECONNRESET: the client left */
      return;
    }
  }
  out_reset(srv, c);
  ttft__free(&srv->alloc, c->in);
  c->in = NULL;
  shutdown(c->fd, SHUT_WR);
  c->state = C_LINGER;
  c->deadline = now + HTTP_LINGER_TIMEOUT;
}

static void conn_linger(ttft_http *srv, http_conn *c) {
  char scratch[4096];
  for (;;) {
    ssize_t n = recv(c->fd, scratch, sizeof scratch, 0);
    if (n > 0) {
      c->drained += (size_t)n;
      if (c->drained > HTTP_LINGER_BYTES) break;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else {
      break; /* EOF or error */
    }
  }
  conn_close(srv, c);
}

static void conn_read(ttft_http *srv, http_conn *c, uint64_t now) {
  ttft__http_req q;
  ssize_t n;
  int rc;
  if (c->in_len >= TTFT__HTTP_MAX_REQUEST) { /* the parser refuses a full buffer first */
    respond_error(srv, c, 431, 0, now);
    return;
  }
  do n = recv(c->fd, c->in + c->in_len, TTFT__HTTP_MAX_REQUEST - c->in_len, 0);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n <= 0) {
    conn_close(srv, c); /* gone before sending a whole request */
    return;
  }
  /* Parse again only when a line may have ended (or on the first bytes, to
   * refuse garbage at once): a byte-at-a-time client costs one scan per
   * line, not one per byte. */
  c->in_len += (size_t)n;
  if (!memchr(c->in + c->in_len - (size_t)n, '\n', (size_t)n) && c->in_len != (size_t)n &&
      c->in_len < TTFT__HTTP_MAX_REQUEST)
    return;
  rc = ttft__http_parse(c->in, c->in_len, &q);
  if (rc == TTFT__HTTP_NEED_MORE) return;
  if (rc == TTFT__HTTP_COMPLETE) route(srv, c, &q, now);
  else respond_error(srv, c, -rc, 0, now);
}

static void conn_step(ttft_http *srv, http_conn *c, uint64_t now) {
  switch (c->state) {
  case C_READ: conn_read(srv, c, now); break;
  case C_WRITE: conn_send(srv, c, now); break;
  case C_LINGER: conn_linger(srv, c); break;
  default: break;
  }
}

static void conn_expire(ttft_http *srv, http_conn *c, uint64_t now) {
  if (c->state == C_FREE || now < c->deadline) return;
  if (c->state == C_READ) respond_error(srv, c, 408, 0, now);
  else conn_close(srv, c);
}

/* The connection to drop for a newcomer when the table is full: the oldest
 * lingering one, else the oldest reader past its grace period. -1 when
 * there is none; then *wake gets the time one will exist (if earlier). */
static int victim(const ttft_http *srv, uint64_t now, uint64_t *wake) {
  int best = -1, best_linger = 0, i;
  uint64_t oldest_reader = UINT64_MAX;
  for (i = 0; i < HTTP_MAX_CONN; i++) {
    const http_conn *c = &srv->c[i];
    int linger = c->state == C_LINGER;
    if (c->state != C_READ && !linger) continue;
    if (!linger && c->t_accept + HTTP_EVICT_GRACE > now) {
      if (c->t_accept < oldest_reader) oldest_reader = c->t_accept;
      continue;
    }
    if (best < 0 || (linger && !best_linger) ||
        (linger == best_linger && c->t_accept < srv->c[best].t_accept)) {
      best = i;
      best_linger = linger;
    }
  }
  if (best < 0 && oldest_reader != UINT64_MAX && wake && oldest_reader + HTTP_EVICT_GRACE < *wake)
    *wake = oldest_reader + HTTP_EVICT_GRACE;
  return best;
}

static int free_slot(const ttft_http *srv) {
  int i;
  for (i = 0; i < HTTP_MAX_CONN; i++)
    if (srv->c[i].state == C_FREE) return i;
  return -1;
}

static void accept_clients(ttft_http *srv, uint64_t now) {
  int k;
  for (k = 0; k < HTTP_MAX_CONN; k++) {
    int slot = free_slot(srv), fd;
    if (slot < 0 && victim(srv, now, NULL) < 0) return;
    fd = accept_fd(srv->lfd);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED)
        srv->accept_pause_until = now + HTTP_ACCEPT_BACKOFF; /* EMFILE, ENOBUFS, ... */
      return;
    }
    if (slot < 0) {
      slot = victim(srv, now, NULL);
      conn_close(srv, &srv->c[slot]);
    }
    http_conn *c = &srv->c[slot];
    c->in = ttft__alloc(&srv->alloc, TTFT__HTTP_MAX_REQUEST + 1);
    if (!c->in) {
      send(fd, http_oom_response, sizeof http_oom_response - 1, HTTP_SEND_FLAGS);
      close(fd);
      continue;
    }
    c->fd = fd;
    c->state = C_READ;
    c->t_accept = now;
    c->deadline = now + HTTP_HEAD_TIMEOUT;
  }
}

static void *serve(void *arg) {
  ttft_http *srv = arg;
  int i;
#if defined(__GLIBC__)
  pthread_setname_np(pthread_self(), "ttft-http");
#endif
  for (;;) {
    uint64_t now = ttft_now_ns(), wake = now + 3600 * 1000 * HTTP_MS;
    int np = 0, listen_at = -1, timeout, rc;
    for (i = 0; i < HTTP_MAX_CONN; i++) conn_expire(srv, &srv->c[i], now);

    srv->pfd[np].fd = srv->wake_r;
    srv->pfd[np].events = POLLIN;
    srv->pconn[np++] = -1;
    if (now < srv->accept_pause_until) {
      wake = srv->accept_pause_until;
    } else if (free_slot(srv) >= 0 || victim(srv, now, &wake) >= 0) {
      listen_at = np;
      srv->pfd[np].fd = srv->lfd;
      srv->pfd[np].events = POLLIN;
      srv->pconn[np++] = -1;
    }
    for (i = 0; i < HTTP_MAX_CONN; i++) {
      http_conn *c = &srv->c[i];
      if (c->state == C_FREE) continue;
      srv->pfd[np].fd = c->fd;
      srv->pfd[np].events = c->state == C_WRITE ? POLLOUT : POLLIN;
      srv->pconn[np++] = i;
      if (c->deadline < wake) wake = c->deadline;
    }
    for (i = 0; i < np; i++) srv->pfd[i].revents = 0;
    timeout = wake <= now ? 0 : (int)((wake - now + HTTP_MS - 1) / HTTP_MS);

    rc = poll(srv->pfd, (nfds_t)np, timeout);
    if (rc < 0) {
      if (errno != EINTR) poll(NULL, 0, 10); /* ENOMEM: let it pass */
      continue;
    }
    if (srv->pfd[0].revents) break; /* ttft_http_stop */
    now = ttft_now_ns();
    for (i = 0; i < np; i++)
      if (srv->pconn[i] >= 0 && srv->pfd[i].revents)
        conn_step(srv, &srv->c[srv->pconn[i]], now);
    if (listen_at >= 0 && srv->pfd[listen_at].revents) accept_clients(srv, now);
  }
  for (i = 0; i < HTTP_MAX_CONN; i++) conn_close(srv, &srv->c[i]);
  return NULL;
}

/* ------------------------------------------------------------- addresses */

/* "host:port", "[v6]:port", ":port" (127.0.0.1); host is a numeric
 * address or "localhost". */
static int parse_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *len) {
  char host[64];
  const char *colon, *port;
  size_t hlen, i;
  unsigned long pv = 0;
  int v6 = 0;
  memset(ss, 0, sizeof *ss);
  if (addr[0] == '[') {
    const char *close_br = strchr(addr, ']');
    if (!close_br || close_br[1] != ':') return -1;
    hlen = (size_t)(close_br - addr - 1);
    if (hlen == 0 || hlen >= sizeof host) return -1;
    memcpy(host, addr + 1, hlen);
    port = close_br + 2;
    v6 = 1;
  } else {
    colon = strchr(addr, ':');
    if (!colon || strchr(colon + 1, ':')) return -1;
    hlen = (size_t)(colon - addr);
    if (hlen >= sizeof host) return -1;
    memcpy(host, addr, hlen);
    port = colon + 1;
  }
  host[hlen] = '\0';
  if (port[0] == '\0' || strlen(port) > 5) return -1;
  for (i = 0; port[i]; i++) {
    if (port[i] < '0' || port[i] > '9') return -1;
    pv = pv * 10 + (unsigned long)(port[i] - '0');
  }
  if (pv > 65535) return -1;
  if (v6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)pv);
    if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) return -1;
    *len = sizeof *a;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)pv);
    if (hlen == 0 || strcmp(host, "localhost") == 0) strcpy(host, "127.0.0.1");
    if (inet_pton(AF_INET, host, &a->sin_addr) != 1) return -1;
    *len = sizeof *a;
  }
  return 0;
}

static int listen_on(const struct sockaddr_storage *ss, socklen_t len, int *port) {
  struct sockaddr_storage bound;
  socklen_t blen = sizeof bound;
  int one = 1;
  int fd = socket(ss->ss_family, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (set_flags(fd) < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      bind(fd, (const struct sockaddr *)ss, len) < 0 || listen(fd, SOMAXCONN) < 0 ||
      getsockname(fd, (struct sockaddr *)&bound, &blen) < 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                            : ((struct sockaddr_in *)&bound)->sin_port);
  return fd;
}

/* ---------------------------------------------------------------- public */

int ttft_http_start(ttft_registry *r, const char *addr, ttft_http **out) {
  int saved_errno = errno, rc = TTFT_OK, i, pipefd[2];
  struct sockaddr_storage ss;
  socklen_t slen = 0;
  sigset_t all, old;
  ttft_allocator a;
  ttft_http *srv = NULL;

  if (out) *out = NULL;
  if (!r || !addr || !out || parse_addr(addr, &ss, &slen) < 0) return TTFT_EINVAL;
  ttft__allocator_current(&a);
  srv = ttft__alloc(&a, sizeof *srv);
  if (!srv) return TTFT_ENOMEM;
  srv->alloc = a;
  srv->r = r;
  srv->wake_r = srv->wake_w = -1;
  for (i = 0; i < HTTP_MAX_CONN; i++) srv->c[i].fd = -1;

  srv->lfd = listen_on(&ss, slen, &srv->port);
  if (srv->lfd < 0) {
    rc = TTFT_EIO;
    goto fail;
  }
  if (pipe(pipefd) < 0) {
    rc = TTFT_EIO;
    goto fail;
  }
  srv->wake_r = pipefd[0];
  srv->wake_w = pipefd[1];
  if (set_flags(srv->wake_r) < 0 || set_flags(srv->wake_w) < 0) {
    rc = TTFT_EIO;
    goto fail;
  }
  /* The thread starts with every signal blocked, so that signals meant for
   * the application are never delivered to it. */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  i = pthread_create(&srv->thread, NULL, serve, srv);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (i != 0) {
    rc = TTFT_ENOMEM;
    goto fail;
  }
  *out = srv;
  errno = saved_errno;
  return TTFT_OK;

fail:
  if (srv->lfd >= 0) close(srv->lfd);
  if (srv->wake_r >= 0) close(srv->wake_r);
  if (srv->wake_w >= 0) close(srv->wake_w);
  ttft__free(&a, srv);
  errno = saved_errno;
  return rc;
}

int ttft_http_port(const ttft_http *srv) { return srv ? srv->port : TTFT_EINVAL; }

void ttft_http_stop(ttft_http *srv) {
  int saved_errno = errno;
  ttft_allocator a;
  char one = 1;
  if (!srv) return;
  /* a full pipe is already readable: EAGAIN is as good as success */
  while (write(srv->wake_w, &one, 1) < 0 && errno == EINTR) {}
  pthread_join(srv->thread, NULL);
  close(srv->lfd);
  close(srv->wake_r);
  close(srv->wake_w);
  a = srv->alloc;
  ttft__free(&a, srv);
  errno = saved_errno;
}

#endif /* TTFT_HAVE_HTTP */
