/*
 * http.c — the optional /metrics endpoint: one thread, poll(), plain
 * POSIX sockets, HTTP/1.1 with one request per connection.
 *
 * The thread owns everything below the public functions: the listening
 * socket, up to HTTP_MAX_CONN client connections, and the rendered bodies.
 * The hooks never see the server; it only calls ttft_snapshot_take, which
 * runs beside them. A client can cost the others at most one short turn of
 * the loop: sockets are non-blocking, every connection has a deadline, and
 * a full table makes room by dropping the connection least worth keeping
 * (evict_rank: done, then idle, then not reading), so a newcomer always
 * gets in.
 *
 * Life of a connection: READ (until a whole request head is in, within
 * HTTP_HEAD_TIMEOUT) -> WRITE (the response, within HTTP_SEND_TIMEOUT) ->
 * LINGER (write side shut, unread input discarded until the client closes,
 * so that closing does not reset the response away) -> closed.
 *
 * Memory for responses: a body is rendered once and shared (reference
 * counted) by every connection that sends it, and reused while it is fresh
 * (TTFT__HTTP_RENDER_INTERVAL_NS, or longer when rendering is slow). All
 * bodies alive together never exceed srv->cap bytes: to render a new one
 * the server first drops unused cache entries, then closes writers that
 * stopped reading, and otherwise serves the older body it still holds.
 * The cap follows the registry (cap_follow): it is at least twice the
 * largest body of every format the registry has rendered, so whatever the
 * configuration lets a registry hold is served; memory is bounded by what
 * the registry renders, never by what clients do.
 *
 * One render attempt per format per freshness window, success or failure:
 * a render that fails is remembered (fail_until / fail_err) and the
 * requests of that window get the older body, or the same error, without
 * a new attempt, so a registry that cannot be rendered costs the server
 * thread one attempt per window, not one per request.
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
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define HTTP_MAX_CONN TTFT__HTTP_MAX_CONN /* <= 64: victim() keeps a bit per connection */
#define HTTP_ACCEPT_BATCH 16                 /* accepts per turn of the loop: a
                                                newcomer's request is read within
                                                a few turns, before 63 others
                                                could have pushed it out        */
#define HTTP_MS UINT64_C(1000000)
#define HTTP_HEAD_TIMEOUT (5000 * HTTP_MS)   /* whole request head       */
#define HTTP_SEND_TIMEOUT (10000 * HTTP_MS)  /* whole response           */
#define HTTP_LINGER_TIMEOUT (2000 * HTTP_MS) /* wait for the client's FIN */
#define HTTP_LINGER_BYTES (256 * 1024)       /* input discarded at most   */
#define HTTP_EVICT_GRACE (100 * HTTP_MS)     /* readers younger than this, and
                                                writers that moved within it,
                                                are the last to be dropped   */
#define HTTP_MIN_AGE (2 * HTTP_MS)           /* a reader younger than this is
                                                never dropped for room: its
                                                client may just not have been
                                                scheduled to send yet        */
#define HTTP_ACCEPT_BACKOFF (100 * HTTP_MS)  /* after EMFILE and the like  */
#define HTTP_HEAD_CAP 1024                   /* response head (+ small body) */
#define HTTP_E_CAP (-1000)                   /* internal: no room under the cap */

static const char http_pb_ctype[] =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";
static const char http_om_ctype[] = "application/openmetrics-text; version=1.0.0; charset=utf-8";
static const char http_text_ctype[] = "text/plain; version=0.0.4; charset=utf-8";

enum { C_FREE = 0, C_READ, C_WRITE, C_LINGER };
_Static_assert(HTTP_MAX_CONN <= 64, "victim() keeps one bit per connection in a uint64_t");

/* A rendered response body, shared by every connection that sends it and
 * by the cache (srv->cache[format]) while it is fresh. */
typedef struct http_body {
  struct http_body *prev, *next; /* srv->bodies, oldest first */
  size_t refs;     /* connections sending it, + 1 as a cache entry (or, while
                      it is being rendered, + 1 for the renderer) */
  size_t len;      /* bytes of data[] in use */
  size_t cap;      /* bytes data[] holds */
  size_t size;     /* bytes allocated (what counts against the cap) */
  uint64_t t_done; /* when it was rendered */
  char data[];
} http_body;

typedef struct http_conn {
  int fd;
  int state;
  uint64_t t_accept;   /* when accepted */
  uint64_t t_write;    /* WRITE: when the response started */
  uint64_t t_progress; /* WRITE: when it last took a byte */
  uint64_t t_blocked;  /* WRITE: since when its socket has been full (0: the
                          last send went through) */
  uint64_t deadline;
  char *in;            /* a request head arriving in pieces; NULL otherwise
                          (a head that comes whole is parsed in srv->scratch) */
  size_t in_len;
  http_body *body;     /* the shared body being sent, or NULL */
  size_t body_send;    /* bytes of it to send (0 for HEAD) */
  size_t head_len;     /* head[0, head_len) goes first */
  size_t off;          /* bytes of head + body sent */
  size_t drained;      /* LINGER: input discarded */
  char head[HTTP_HEAD_CAP];
} http_conn;

/* A snapshot taken for one request, shared by the formats it may try. */
typedef struct http_snap {
  ttft_snapshot *s;
  uint64_t ns; /* what taking it cost */
} http_snap;

struct ttft_http {
  ttft_allocator alloc;
  ttft_registry *r;
  int lfd, wake_r, wake_w;
  int port;
  pid_t pid;            /* the process that started the thread */
  pthread_t thread;
  /* Held by the thread whenever it changes anything below, i.e. always but
   * in poll() and while it takes a snapshot or formats into a body already
   * listed in bodies. A fork waits for it (fork_prepare), so a child's copy
   * is always consistent and ttft_http_stop can free it. */
  pthread_mutex_t mu;
  ttft_http *fork_next; /* g_servers */
  size_t cap;           /* of st.held_bytes */
  uint64_t render_interval;
  unsigned render_factor;
  uint64_t accept_pause_until;
  uint64_t pb_retry_at; /* protobuf failed: text until then */
  int cap_fixed;        /* 1: cap never follows the registry (tests) */
  size_t max_len[TTFT_FORMAT_COUNT_];   /* the largest body of each format */
  uint64_t fail_until[TTFT_FORMAT_COUNT_]; /* a render failed: no new
                                              attempt before this */
  int fail_err[TTFT_FORMAT_COUNT_];     /* ... and what it failed with */
  http_body *bodies, *bodies_tail;
  http_body *cache[TTFT_FORMAT_COUNT_];
  uint64_t render_ns[TTFT_FORMAT_COUNT_]; /* what the last render cost */
  size_t last_len[TTFT_FORMAT_COUNT_];
  ttft__http_stats st;
  http_conn c[HTTP_MAX_CONN];
  struct pollfd pfd[HTTP_MAX_CONN + 2];
  int pconn[HTTP_MAX_CONN + 2]; /* index into c[] of pfd[i], -1 for others */
  char scratch[TTFT__HTTP_MAX_REQUEST + 1];
};

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

/* ------------------------------------------------------------------ fork
 * Every running server is on g_servers. Before a fork, fork_prepare takes
 * each one's mu, so no server thread is half-way through a change of its
 * state; after it both sides release them. In the child the thread does not
 * exist: ttft_http_stop sees another pid and only frees the copy.
 *
 * A busy server thread drops mu only for a moment (poll() returns at once)
 * and takes it straight back: a mutex does not queue, so a forking thread
 * could wait on it for a long time. g_fork_pending tells the server thread
 * to step aside: it lets go of mu and waits on g_fork_mu, which the forking
 * thread holds from fork_prepare until the fork is done. */
static pthread_mutex_t g_fork_mu = PTHREAD_MUTEX_INITIALIZER; /* g_servers, g_atfork; held across a fork */
static ttft_http *g_servers;
static int g_atfork;               /* the handlers are registered */
static atomic_int g_fork_pending;  /* a fork waits for the servers' mu */

static void fork_prepare(void) {
  ttft_http *s;
  pthread_mutex_lock(&g_fork_mu);
  /* relaxed: a hint; mu and g_fork_mu do the synchronising */
  atomic_store_explicit(&g_fork_pending, 1, memory_order_relaxed);
  for (s = g_servers; s; s = s->fork_next) pthread_mutex_lock(&s->mu);
}

static void fork_release(void) {
  ttft_http *s;
  for (s = g_servers; s; s = s->fork_next) pthread_mutex_unlock(&s->mu);
  atomic_store_explicit(&g_fork_pending, 0, memory_order_relaxed); /* a hint, as above */
  pthread_mutex_unlock(&g_fork_mu);
}

/* The server thread takes its mu, after any fork that is waiting for it. */
static void server_lock(ttft_http *srv) {
  pthread_mutex_lock(&srv->mu);
  while (atomic_load_explicit(&g_fork_pending, memory_order_relaxed)) { /* a hint, as above */
    pthread_mutex_unlock(&srv->mu);
    pthread_mutex_lock(&g_fork_mu); /* held by the forking thread until the fork is done */
    pthread_mutex_unlock(&g_fork_mu);
    pthread_mutex_lock(&srv->mu);
  }
}

/* Put srv on g_servers (registering the handlers the first time). */
static int fork_link(ttft_http *srv) {
  int rc = TTFT_OK;
  pthread_mutex_lock(&g_fork_mu);
  if (!g_atfork && pthread_atfork(fork_prepare, fork_release, fork_release) != 0) {
    rc = TTFT_ENOMEM;
  } else {
    g_atfork = 1;
    srv->fork_next = g_servers;
    g_servers = srv;
  }
  pthread_mutex_unlock(&g_fork_mu);
  return rc;
}

static void fork_unlink(ttft_http *srv) {
  ttft_http **p;
  pthread_mutex_lock(&g_fork_mu);
  for (p = &g_servers; *p; p = &(*p)->fork_next)
    if (*p == srv) {
      *p = srv->fork_next;
      break;
    }
  pthread_mutex_unlock(&g_fork_mu);
}

/* ---------------------------------------------------------------- bodies */

static void body_unref(ttft_http *srv, http_body *b) {
  if (--b->refs > 0) return;
  if (b->prev) b->prev->next = b->next;
  else srv->bodies = b->next;
  if (b->next) b->next->prev = b->prev;
  else srv->bodies_tail = b->prev;
  srv->st.held_bytes -= b->size;
  srv->st.bodies--;
  ttft__free(&srv->alloc, b);
}

static uint64_t render_window(const ttft_http *srv, int f) {
  uint64_t grown = srv->render_ns[f] * srv->render_factor;
  return grown > srv->render_interval ? grown : srv->render_interval;
}

/* b, rendered at t_done, may still be sent as "now" (no subtraction: now
 * may be read before a render that finished later). */
static int body_fresh(const ttft_http *srv, int f, const http_body *b, uint64_t now) {
  return now < b->t_done + render_window(srv, f);
}

static void cache_drop(ttft_http *srv, int f) {
  http_body *b = srv->cache[f];
  srv->cache[f] = NULL;
  if (b) body_unref(srv, b);
}

/* Let go of cache entries nobody else sends once they are stale; *wake
 * gets the time the next one will be. */
static void cache_expire(ttft_http *srv, uint64_t now, uint64_t *wake) {
  int f;
  for (f = 0; f < TTFT_FORMAT_COUNT_; f++) {
    http_body *b = srv->cache[f];
    uint64_t until;
    if (!b || b->refs > 1) continue; /* senders' deadlines wake the loop */
    until = b->t_done + render_window(srv, f);
    if (now >= until) cache_drop(srv, f);
    else if (until < *wake) *wake = until;
  }
}

static void conn_close(ttft_http *srv, http_conn *c);
static void conn_evict(ttft_http *srv, http_conn *c);

/* A writer whose client has not taken a byte for the grace period (as
 * far as the server knows: probe it with conn_send before acting on it -
 * the server itself may have been busy rendering meanwhile). */
static int writer_stalled(const http_conn *c, uint64_t now) {
  return c->state == C_WRITE && c->t_blocked && c->t_blocked + HTTP_EVICT_GRACE <= now;
}

static void conn_send(ttft_http *srv, http_conn *c, uint64_t now);

/* Free memory until size more bytes fit under the cap: first cache entries
 * that no connection sends, then - oldest body first - bodies whose every
 * sender is a stalled writer (those writers are closed). 1 when it fits. */
static int make_room(ttft_http *srv, size_t size, uint64_t now) {
  http_body *b, *next;
  int f, i;
  if (size > srv->cap) return 0;
  if (srv->st.held_bytes + size <= srv->cap) return 1;
  for (f = 0; f < TTFT_FORMAT_COUNT_; f++)
    if (srv->cache[f] && srv->cache[f]->refs == 1) cache_drop(srv, f);
  for (b = srv->bodies; b && srv->st.held_bytes + size > srv->cap; b = next) {
    size_t senders = 0, cached = 0;
    int all_stalled = 1;
    b->refs++; /* pinned while its senders are probed: one may finish */
    for (i = 0; i < HTTP_MAX_CONN; i++) {
      http_conn *c = &srv->c[i];
      if (c->state == C_WRITE && c->body == b && writer_stalled(c, now)) conn_send(srv, c, now);
    }
    for (f = 0; f < TTFT_FORMAT_COUNT_; f++) cached += srv->cache[f] == b;
    for (i = 0; i < HTTP_MAX_CONN; i++) {
      const http_conn *c = &srv->c[i];
      if (c->state != C_WRITE || c->body != b) continue;
      senders++;
      if (!writer_stalled(c, now)) all_stalled = 0;
    }
    /* every other reference is a stalled sender or the cache (a body being
     * rendered has one that is neither) */
    if (all_stalled && senders > 0 && senders + cached + 1 == b->refs) {
      for (f = 0; f < TTFT_FORMAT_COUNT_; f++)
        if (srv->cache[f] == b) {
          srv->cache[f] = NULL;
          b->refs--;
        }
      for (i = 0; i < HTTP_MAX_CONN; i++) {
        http_conn *c = &srv->c[i];
        if (c->state == C_WRITE && c->body == b) {
          srv->st.evicted_for_memory++;
          conn_close(srv, c);
        }
      }
    }
    next = b->next;
    body_unref(srv, b); /* the pin: frees b when its senders were closed */
  }
  return srv->st.held_bytes + size <= srv->cap;
}

/* A new body with room for cap bytes (refs 1: the caller's), listed in
 * srv->bodies. NULL with *err = HTTP_E_CAP or TTFT_ENOMEM. */
static http_body *body_new(ttft_http *srv, size_t cap, uint64_t now, int *err) {
  size_t size = sizeof(http_body) + cap;
  http_body *b;
  if (cap > srv->cap || !make_room(srv, size, now)) {
    *err = HTTP_E_CAP;
    return NULL;
  }
  b = ttft__alloc(&srv->alloc, size);
  if (!b) {
    *err = TTFT_ENOMEM;
    return NULL;
  }
  b->refs = 1;
  b->cap = cap;
  b->size = size;
  b->prev = srv->bodies_tail;
  if (srv->bodies_tail) srv->bodies_tail->next = b;
  else srv->bodies = b;
  srv->bodies_tail = b;
  srv->st.held_bytes += size;
  srv->st.bodies++;
  if (srv->st.held_bytes > srv->st.held_peak) srv->st.held_peak = srv->st.held_bytes;
  return b;
}

/* A body of format f needs need bytes: the cap becomes at least twice the
 * largest body of every format (an older one still being sent beside a new
 * one), so any body the registry renders fits. Unless the cap is fixed. */
static void cap_follow(ttft_http *srv, ttft_format f, size_t need) {
  size_t want = 0;
  int g;
  if (need > srv->max_len[f]) srv->max_len[f] = need;
  if (srv->cap_fixed) return;
  for (g = 0; g < TTFT_FORMAT_COUNT_; g++) {
    size_t one = srv->max_len[g] ? srv->max_len[g] + sizeof(http_body) : 0;
    if (one > (SIZE_MAX - want) / 2) return; /* cannot be: bodies are allocated */
    want += 2 * one;
  }
  if (want > srv->cap) {
    srv->cap = want;
    srv->st.held_cap = want;
    srv->st.cap_raises++;
  }
}

/* Format s into a new body (refs 1). mu is released while formatting: the
 * body is already listed, so a forked child frees it. NULL with *err. */
static http_body *render(ttft_http *srv, const ttft_snapshot *s, ttft_format f, int *err) {
  size_t last = srv->last_len[f];
  http_body *b = NULL;
  long n;
  /* the last length of this format, with room to grow: one pass */
  if (last) b = body_new(srv, last + last / 8 + 4096, ttft_now_ns(), err);
  if (!b) { /* unknown, or the estimate does not fit: measure first */
    pthread_mutex_unlock(&srv->mu);
    n = ttft_snapshot_format(s, f, NULL, 0);
    server_lock(srv);
    if (n < 0 || (unsigned long)n >= (unsigned long)(SIZE_MAX / 2)) {
      *err = n < 0 ? (int)n : TTFT_ERANGE;
      return NULL;
    }
    cap_follow(srv, f, (size_t)n + 1);
    b = body_new(srv, (size_t)n + 1, ttft_now_ns(), err);
    if (!b) return NULL;
  }
  for (;;) {
    pthread_mutex_unlock(&srv->mu);
    n = ttft_snapshot_format(s, f, b->data, b->cap);
    server_lock(srv);
    if (n >= 0 && (size_t)n < b->cap) break; /* snprintf rules: it fits */
    body_unref(srv, b);
    if (n < 0 || (unsigned long)n >= (unsigned long)(SIZE_MAX / 2)) {
      *err = n < 0 ? (int)n : TTFT_ERANGE;
      return NULL;
    }
    cap_follow(srv, f, (size_t)n + 1);
    b = body_new(srv, (size_t)n + 1, ttft_now_ns(), err); /* the estimate was short */
    if (!b) return NULL;
  }
  b->len = (size_t)n;
  srv->last_len[f] = (size_t)n;
  cap_follow(srv, f, (size_t)n + 1);
  return b;
}

/* The older body when a new one cannot be had for memory (it is held by
 * senders anyway), else NULL with *err = err. */
static http_body *body_older(ttft_http *srv, ttft_format f, int err, int *out_err) {
  http_body *b = srv->cache[f];
  *out_err = err;
  if (b && (err == HTTP_E_CAP || err == TTFT_ENOMEM)) {
    b->refs++;
    srv->st.stale_reuses++;
    return b;
  }
  if (err == HTTP_E_CAP) srv->st.refused_memory++;
  return NULL;
}

/* The body of format f for one response, with a reference for the caller:
 * the cached one while it is fresh, else a new render from *snap (taken
 * here if it is not yet), which becomes the cache entry. When a new one
 * cannot be had for memory, the cached one however old (it is held by
 * senders anyway). NULL with *err when there is none. A failed render is
 * not tried again within its window: the requests meanwhile get what it
 * gave (the older body, or the error). */
static http_body *body_get(ttft_http *srv, ttft_format f, http_snap *snap, int *err) {
  http_body *b = srv->cache[f];
  uint64_t t0 = ttft_now_ns();
  if (b && body_fresh(srv, f, b, t0)) {
    b->refs++;
    srv->st.reuses++;
    return b;
  }
  if (t0 < srv->fail_until[f]) {
    srv->st.render_failures_reused++;
    return body_older(srv, f, srv->fail_err[f], err);
  }
  if (!snap->s) {
    t0 = ttft_now_ns();
    pthread_mutex_unlock(&srv->mu);
    snap->s = ttft_snapshot_take(srv->r);
    server_lock(srv);
    snap->ns = ttft_now_ns() - t0;
  }
  t0 = ttft_now_ns();
  b = snap->s ? render(srv, snap->s, f, err) : NULL;
  if (!snap->s) *err = TTFT_ENOMEM;
  uint64_t t1 = ttft_now_ns();
  srv->render_ns[f] = t1 - t0 + snap->ns;
  if (b) {
    b->t_done = t1;
    srv->fail_until[f] = 0;
    cache_drop(srv, f);
    srv->cache[f] = b; /* the render's reference becomes the cache's */
    b->refs++;
    srv->st.renders++;
    return b;
  }
  /* remembered for one window (at least the floor, longer when even the
   * failed attempt was slow), as a body would be */
  srv->st.render_failures++;
  srv->fail_err[f] = *err;
  srv->fail_until[f] = t1 + render_window(srv, f);
  return body_older(srv, f, *err, err);
}

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

/* The response head into hdr; 0 when it does not fit in cap. */
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

static void in_free(ttft_http *srv, http_conn *c) {
  if (!c->in) return;
  ttft__free(&srv->alloc, c->in);
  c->in = NULL;
  c->in_len = 0;
  srv->st.in_bytes -= TTFT__HTTP_MAX_REQUEST + 1;
}

/* c->head (head_len bytes) and then body_send bytes of c->body are the
 * response: start sending it. */
static void start_write(ttft_http *srv, http_conn *c, uint64_t now) {
  in_free(srv, c);
  c->off = 0;
  c->state = C_WRITE;
  c->t_write = now;
  c->t_progress = now;
  c->t_blocked = 0;
  c->deadline = now + HTTP_SEND_TIMEOUT;
  conn_send(srv, c, now);
}

static void respond_oom(ttft_http *srv, http_conn *c, uint64_t now) {
  static const char oom[] =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  memcpy(c->head, oom, sizeof oom - 1);
  c->head_len = sizeof oom - 1;
  start_write(srv, c, now);
}

/* A response whose body (a short string) travels in c->head. */
static void respond_small(ttft_http *srv, http_conn *c, int status, const char *ctype, const char *body,
                          int head_only, const char *extra, uint64_t now) {
  size_t blen = strlen(body);
  size_t hlen = response_head(c->head, sizeof c->head, status, ctype, blen, extra);
  if (!hlen || hlen + blen > sizeof c->head) {
    respond_oom(srv, c, now);
    return;
  }
  if (!head_only) memcpy(c->head + hlen, body, blen);
  c->head_len = hlen + (head_only ? 0 : blen);
  start_write(srv, c, now);
}

static void respond_error(ttft_http *srv, http_conn *c, int status, int head_only, uint64_t now) {
  char body[64];
  snprintf(body, sizeof body, "%d %s\n", status, reason(status));
  respond_small(srv, c, status, "text/plain; charset=utf-8", body, head_only,
                status == 405 ? "Allow: GET, HEAD\r\n" : NULL, now);
}

/* A 200 with body b (the caller's reference passes to c). */
static void respond_body(ttft_http *srv, http_conn *c, const char *ctype, http_body *b, int head_only,
                         const char *extra, uint64_t now) {
  size_t hlen = response_head(c->head, sizeof c->head, 200, ctype, b->len, extra);
  if (!hlen) {
    body_unref(srv, b);
    respond_oom(srv, c, now);
    return;
  }
  c->head_len = hlen;
  c->body = b;
  c->body_send = head_only ? 0 : b->len;
  start_write(srv, c, now);
}

static int failure_status(int err) { return err == TTFT_ENOMEM || err == HTTP_E_CAP ? 503 : 500; }

/* /report and /report.json: format f, or 500 when it fails (503 for memory). */
static void respond_format(ttft_http *srv, http_conn *c, ttft_format f, const char *ctype, int head_only,
                           uint64_t now) {
  http_snap snap = {NULL, 0};
  int err = TTFT_EIO;
  http_body *b = body_get(srv, f, &snap, &err);
  ttft_snapshot_free(snap.s);
  if (b) respond_body(srv, c, ctype, b, head_only, NULL, now);
  else respond_error(srv, c, failure_status(err), head_only, now);
}

/* /metrics in the representation Accept chose. Protobuf falls back to the
 * text format (from the same snapshot) whenever it fails - the build
 * cannot write it (TTFT_ENOTSUP), memory, anything - so that a scrape
 * never fails for it; a failure is remembered for one render window. */
static void respond_metrics(ttft_http *srv, http_conn *c, ttft__http_accept accept, int head_only,
                            uint64_t now) {
  http_snap snap = {NULL, 0};
  int err = TTFT_EIO;
  http_body *b = NULL;
  const char *ctype = http_text_ctype;
  if (accept == TTFT__HTTP_ACCEPT_PROTOBUF) {
    if (now >= srv->pb_retry_at) {
      b = body_get(srv, TTFT_FORMAT_PROMETHEUS_PROTOBUF, &snap, &err);
      if (!b) srv->pb_retry_at = ttft_now_ns() + render_window(srv, TTFT_FORMAT_PROMETHEUS_PROTOBUF);
    }
    if (b) ctype = http_pb_ctype;
    else srv->st.protobuf_fallbacks++;
  } else if (accept == TTFT__HTTP_ACCEPT_OPENMETRICS) {
    b = body_get(srv, TTFT_FORMAT_OPENMETRICS, &snap, &err);
    ctype = http_om_ctype;
    if (!b) {
      ttft_snapshot_free(snap.s);
      respond_error(srv, c, failure_status(err), head_only, now);
      return;
    }
  }
  if (!b) {
    err = TTFT_EIO;
    b = body_get(srv, TTFT_FORMAT_PROMETHEUS, &snap, &err);
    ctype = http_text_ctype;
  }
  ttft_snapshot_free(snap.s);
  if (b) respond_body(srv, c, ctype, b, head_only, "Vary: Accept\r\n", now);
  else respond_error(srv, c, failure_status(err), head_only, now);
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
    respond_metrics(srv, c, q->accept, head_only, now);
  } else if (path_is(q, "/report")) {
    respond_format(srv, c, TTFT_FORMAT_TEXT, "text/plain; charset=utf-8", head_only, now);
  } else if (path_is(q, "/report.json")) {
    respond_format(srv, c, TTFT_FORMAT_JSON, "application/json", head_only, now);
  } else {
    respond_small(srv, c, 200, "text/plain; charset=utf-8", index_body, head_only, NULL, now);
  }
}

/* ---------------------------------------------------------- connections */

static void conn_close(ttft_http *srv, http_conn *c) {
  if (c->state == C_FREE) return;
  close(c->fd);
  in_free(srv, c);
  if (c->body) body_unref(srv, c->body);
  c->body = NULL;
  c->fd = -1;
  c->state = C_FREE;
}

static void conn_send(ttft_http *srv, http_conn *c, uint64_t now) {
  size_t total = c->head_len + c->body_send;
  while (c->off < total) {
    struct iovec iov[2];
    struct msghdr m;
    ssize_t n;
    memset(&m, 0, sizeof m);
    m.msg_iov = iov;
    if (c->off < c->head_len) {
      iov[0].iov_base = c->head + c->off;
      iov[0].iov_len = c->head_len - c->off;
      iov[1].iov_base = c->body ? c->body->data : NULL;
      iov[1].iov_len = c->body_send;
      m.msg_iovlen = c->body_send ? 2 : 1;
    } else {
      iov[0].iov_base = c->body->data + (c->off - c->head_len);
      iov[0].iov_len = total - c->off;
      m.msg_iovlen = 1;
    }
    n = sendmsg(c->fd, &m, HTTP_SEND_FLAGS);
    if (n > 0) {
      c->off += (size_t)n;
      c->t_progress = now;
      c->t_blocked = 0;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!c->t_blocked) c->t_blocked = now;
      return; /* poll for POLLOUT */
    } else {
      conn_close(srv, c); /* EPIPE, ECONNRESET: the client left */
      return;
    }
  }
  if (c->body) body_unref(srv, c->body);
  c->body = NULL;
  c->body_send = 0;
  shutdown(c->fd, SHUT_WR);
  c->state = C_LINGER;
  c->drained = 0;
  c->deadline = now + HTTP_LINGER_TIMEOUT;
}

/* Discard what the client still sends; 1 when it is done (EOF, error, or
 * too much), 0 when more may come. */
static int conn_drain(http_conn *c) {
  char scratch[4096];
  for (;;) {
    ssize_t n = recv(c->fd, scratch, sizeof scratch, 0);
    if (n > 0) {
      c->drained += (size_t)n;
      if (c->drained > HTTP_LINGER_BYTES) return 1;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return 0;
    } else {
      return 1; /* EOF or error */
    }
  }
}

static void conn_read(ttft_http *srv, http_conn *c, uint64_t now) {
  ttft__http_req q;
  char *buf = c->in ? c->in : srv->scratch;
  size_t have = c->in_len;
  ssize_t n;
  int rc;
  if (have >= TTFT__HTTP_MAX_REQUEST) { /* the parser refuses a full buffer first */
    respond_error(srv, c, 431, 0, now);
    return;
  }
  do n = recv(c->fd, buf + have, TTFT__HTTP_MAX_REQUEST - have, 0);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n <= 0) {
    conn_close(srv, c); /* gone before sending a whole request */
    return;
  }
  have += (size_t)n;
  /* Parse again only when a line may have ended (or on the first bytes, to
   * refuse garbage at once): a byte-at-a-time client costs one scan per
   * line, not one per byte. */
  if (c->in && !memchr(buf + have - (size_t)n, '\n', (size_t)n) && have < TTFT__HTTP_MAX_REQUEST) {
    c->in_len = have;
    return;
  }
  rc = ttft__http_parse(buf, have, &q);
  if (rc == TTFT__HTTP_NEED_MORE) {
    if (!c->in) { /* the head comes in pieces: it needs a buffer of its own */
      c->in = ttft__alloc(&srv->alloc, TTFT__HTTP_MAX_REQUEST + 1);
      if (!c->in) {
        respond_oom(srv, c, now);
        return;
      }
      srv->st.in_bytes += TTFT__HTTP_MAX_REQUEST + 1;
      memcpy(c->in, srv->scratch, have);
    }
    c->in_len = have;
    return;
  }
  if (rc == TTFT__HTTP_COMPLETE) route(srv, c, &q, now);
  else respond_error(srv, c, -rc, 0, now);
}

static void conn_step(ttft_http *srv, http_conn *c, uint64_t now) {
  switch (c->state) {
  case C_READ: conn_read(srv, c, now); break;
  case C_WRITE: conn_send(srv, c, now); break;
  case C_LINGER:
    if (conn_drain(c)) conn_close(srv, c);
    break;
  default: break;
  }
}

static void conn_expire(ttft_http *srv, http_conn *c, uint64_t now) {
  if (c->state == C_FREE || now < c->deadline) return;
  if (c->state == C_READ) respond_error(srv, c, 408, 0, now);
  else conn_close(srv, c);
}

/* How much a connection is worth keeping when the table is full: rank
 * (lower goes first), then key (smaller goes first).
 *   0 LINGER: its response is with the kernel already (oldest first)
 *   1 READ for the grace period or longer: idle, or a slow request
 *     (oldest first)
 *   2 WRITE whose socket has been full for the grace period: a client that
 *     does not read (stuck longest first)
 *   3 READ younger than that: its request may be on the way (oldest first)
 *   4 WRITE that is moving (longest in WRITE first: a trickle reader
 *     before a fast one)
 *  -1 READ younger than HTTP_MIN_AGE: never */
static int evict_rank(const http_conn *c, uint64_t now, uint64_t *key) {
  switch (c->state) {
  case C_LINGER: *key = c->t_accept; return 0;
  case C_READ:
    *key = c->t_accept;
    if (c->t_accept + HTTP_EVICT_GRACE <= now) return 1;
    return c->t_accept + HTTP_MIN_AGE <= now ? 3 : -1;
  default:
    if (writer_stalled(c, now)) {
      *key = c->t_blocked;
      return 2;
    }
    *key = c->t_write;
    return 4;
  }
}

/* The connection ranked first for dropping, -1 when none may be (then
 * *ready, if not NULL, gets the time one will be: a reader coming of age). */
static int pick_victim(const ttft_http *srv, uint64_t now, uint64_t *ready) {
  int best = -1, best_rank = 5, i;
  uint64_t best_key = UINT64_MAX;
  for (i = 0; i < HTTP_MAX_CONN; i++) {
    uint64_t key;
    int rank;
    if (srv->c[i].state == C_FREE) continue;
    rank = evict_rank(&srv->c[i], now, &key);
    if (rank < 0) {
      if (ready && key + HTTP_MIN_AGE < *ready) *ready = key + HTTP_MIN_AGE;
      continue;
    }
    if (rank < best_rank || (rank == best_rank && key < best_key)) {
      best = i;
      best_rank = rank;
      best_key = key;
    }
  }
  return best;
}

/* The connection to drop for a newcomer (possibly one that is free by
 * now); -1 when none may be dropped now. The one picked is probed first, once:
 * a reader whose request has come in meanwhile is served instead (it was
 * the server that had not got to it yet), and so is a writer that looked
 * stalled but takes bytes (the server had been busy rendering); then the
 * choice is made again. A connection probed and found idle or stuck is
 * the one. */
static int victim(ttft_http *srv, uint64_t now) {
  uint64_t probed = 0; /* bit i: c[i] was probed in this call */
  for (;;) {
    int v = pick_victim(srv, now, NULL);
    http_conn *c;
    size_t before;
    if (v < 0 || (probed >> v & 1)) return v;
    probed |= UINT64_C(1) << v;
    c = &srv->c[v];
    if (c->state == C_READ) {
      before = c->in_len;
      conn_read(srv, c, now);
      if (c->state == C_READ && c->in_len == before) return v; /* idle indeed */
    } else if (writer_stalled(c, now)) {
      before = c->off;
      conn_send(srv, c, now);
      if (c->state == C_WRITE && c->off == before) return v; /* stuck indeed */
    } else {
      return v;
    }
    if (c->state == C_FREE) return v; /* it left: its slot is free */
  }
}

static void conn_evict(ttft_http *srv, http_conn *c) {
  if (c->state == C_FREE) return; /* it finished while it was probed */
  if (c->state == C_LINGER) {
    srv->st.evicted_linger++;
    conn_drain(c); /* nothing left unread: the close is a FIN, not a reset */
  } else if (c->state == C_READ) {
    srv->st.evicted_reader++;
  } else {
    srv->st.evicted_writer++;
  }
  conn_close(srv, c);
}

static int free_slot(const ttft_http *srv) {
  int i;
  for (i = 0; i < HTTP_MAX_CONN; i++)
    if (srv->c[i].state == C_FREE) return i;
  return -1;
}

/* Take waiting connections, up to HTTP_ACCEPT_BATCH; a full table drops
 * its victim for each, and when none may be dropped (every reader in it
 * younger than HTTP_MIN_AGE) the rest wait in the listen queue. */
static void accept_clients(ttft_http *srv) {
  int k, retried = 0;
  for (k = 0; k < HTTP_ACCEPT_BATCH; k++) {
    uint64_t now = ttft_now_ns();
    int slot = free_slot(srv), fd;
    http_conn *c;
    if (slot < 0 && (slot = victim(srv, now)) < 0) return;
    fd = accept_fd(srv->lfd);
    if (fd < 0) {
      if (errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      /* EMFILE, ENFILE, ENOBUFS: one of ours makes room once, then pause */
      if (!retried && (errno == EMFILE || errno == ENFILE)) {
        int v = srv->c[slot].state != C_FREE ? slot : victim(srv, now);
        if (v >= 0) {
          conn_evict(srv, &srv->c[v]);
          retried = 1;
          continue;
        }
      }
      srv->accept_pause_until = now + HTTP_ACCEPT_BACKOFF;
      return;
    }
    c = &srv->c[slot];
    conn_evict(srv, c); /* nothing when it is free */
    memset(c, 0, offsetof(http_conn, head));
    c->fd = fd;
    c->state = C_READ;
    c->t_accept = now;
    c->deadline = now + HTTP_HEAD_TIMEOUT;
    srv->st.accepted++;
    conn_read(srv, c, now); /* the request is usually there already */
  }
}

static void *serve(void *arg) {
  ttft_http *srv = arg;
  int i;
#if defined(__GLIBC__)
  pthread_setname_np(pthread_self(), "ttft-http");
#endif
  server_lock(srv);
  for (;;) {
    uint64_t now = ttft_now_ns(), wake = now + 3600 * 1000 * HTTP_MS;
    int np = 0, listen_at = -1, timeout, rc;
    for (i = 0; i < HTTP_MAX_CONN; i++) conn_expire(srv, &srv->c[i], now);
    cache_expire(srv, now, &wake);

    srv->pfd[np].fd = srv->wake_r;
    srv->pfd[np].events = POLLIN;
    srv->pconn[np++] = -1;
    if (now < srv->accept_pause_until) {
      if (srv->accept_pause_until < wake) wake = srv->accept_pause_until;
    } else if (free_slot(srv) >= 0 || pick_victim(srv, now, &wake) >= 0) {
      /* (else every reader is too young to drop: wake when one is not) */
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

    pthread_mutex_unlock(&srv->mu);
    rc = poll(srv->pfd, (nfds_t)np, timeout);
    if (rc < 0 && errno != EINTR) poll(NULL, 0, 10); /* ENOMEM: let it pass */
    server_lock(srv);
    if (rc < 0) continue;
    if (srv->pfd[0].revents) break; /* ttft_http_stop */
    for (i = 0; i < np; i++)
      if (srv->pconn[i] >= 0 && srv->pfd[i].revents)
        conn_step(srv, &srv->c[srv->pconn[i]], ttft_now_ns());
    if (listen_at >= 0 && srv->pfd[listen_at].revents) accept_clients(srv);
  }
  for (i = 0; i < HTTP_MAX_CONN; i++) conn_close(srv, &srv->c[i]);
  for (i = 0; i < TTFT_FORMAT_COUNT_; i++) cache_drop(srv, i);
  pthread_mutex_unlock(&srv->mu);
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

int ttft__http_start_opts(ttft_registry *r, const char *addr, const ttft__http_opts *o, ttft_http **out) {
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
  srv->pid = getpid();
  srv->wake_r = srv->wake_w = -1;
  srv->cap = o && o->response_cap ? o->response_cap : TTFT__HTTP_RESPONSE_CAP;
  srv->cap_fixed = o && o->response_cap_fixed;
  srv->render_interval = o && !o->render_defaults ? o->render_interval_ns : TTFT__HTTP_RENDER_INTERVAL_NS;
  srv->render_factor = o && !o->render_defaults ? o->render_cost_factor : TTFT__HTTP_RENDER_COST_FACTOR;
  srv->st.held_cap = srv->cap;
  for (i = 0; i < HTTP_MAX_CONN; i++) srv->c[i].fd = -1;
  if (pthread_mutex_init(&srv->mu, NULL) != 0) {
    ttft__free(&a, srv);
    return TTFT_ENOMEM;
  }

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
  /* on g_servers before the thread runs: a fork from now on finds it */
  rc = fork_link(srv);
  if (rc != TTFT_OK) goto fail;
  /* The thread starts with every signal blocked, so that signals meant for
   * the application are never delivered to it. */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  i = pthread_create(&srv->thread, NULL, serve, srv);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (i != 0) {
    fork_unlink(srv);
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
  pthread_mutex_destroy(&srv->mu);
  ttft__free(&a, srv);
  errno = saved_errno;
  return rc;
}

int ttft_http_start(ttft_registry *r, const char *addr, ttft_http **out) {
  return ttft__http_start_opts(r, addr, NULL, out);
}

int ttft_http_port(const ttft_http *srv) { return srv ? srv->port : TTFT_EINVAL; }

/* Close srv's descriptors and free its memory, without its thread: after
 * the thread has ended, or in a forked child, where it never existed and
 * every descriptor is a copy (close only: shutdown would end the parent's
 * connections too, and the wake pipe is the parent's). */
static void release(ttft_http *srv) {
  ttft_allocator a = srv->alloc;
  int i;
  for (i = 0; i < HTTP_MAX_CONN; i++) {
    http_conn *c = &srv->c[i];
    if (c->state == C_FREE) continue;
    close(c->fd);
    if (c->in) ttft__free(&a, c->in);
  }
  while (srv->bodies) {
    http_body *b = srv->bodies;
    srv->bodies = b->next;
    ttft__free(&a, b);
  }
  close(srv->lfd);
  close(srv->wake_r);
  close(srv->wake_w);
  pthread_mutex_destroy(&srv->mu);
  ttft__free(&a, srv);
}

void ttft_http_stop(ttft_http *srv) {
  int saved_errno = errno;
  char one = 1;
  if (!srv) return;
  fork_unlink(srv);
  if (srv->pid == getpid()) {
    /* a full pipe is already readable: EAGAIN is as good as success */
    while (write(srv->wake_w, &one, 1) < 0 && errno == EINTR) {}
    pthread_join(srv->thread, NULL);
  }
  release(srv);
  errno = saved_errno;
}

void ttft__http_get_stats(ttft_http *srv, ttft__http_stats *out) {
  int i;
  pthread_mutex_lock(&srv->mu);
  *out = srv->st;
  out->conns = out->reading = out->writing = out->lingering = 0;
  for (i = 0; i < HTTP_MAX_CONN; i++) {
    int st = srv->c[i].state;
    if (st == C_FREE) continue;
    out->conns++;
    out->reading += st == C_READ;
    out->writing += st == C_WRITE;
    out->lingering += st == C_LINGER;
  }
  pthread_mutex_unlock(&srv->mu);
}

#endif /* TTFT_HAVE_HTTP */
