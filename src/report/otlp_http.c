/*
 * otlp_http.c — the OTLP pusher's HTTP/1.1 client: the endpoint URL, the
 * configured headers, and one POST over a non-blocking socket.
 *
 * Invariants: every wait is a poll() bounded by the caller's deadline
 * (CLOCK_MONOTONIC), so a collector that accepts and never answers costs
 * one timeout, not a thread; one connection per POST, closed after the
 * answer (a push every interval does not need keep-alive, and a
 * collector restarted between pushes is met with a fresh connection);
 * the answer's head is read into a fixed buffer (8 KiB) and only the
 * status line and Retry-After are used; nothing is written to stderr and
 * errno is the caller's to restore.
 */
#include "report/otlp.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define OTLP_HEAD_MAX 8192

/* ------------------------------------------------------------------ URL */

static int url_char_ok(unsigned char c) { return c > 0x20 && c < 0x7f; }

int ttft__otlp_url_parse(const char *url, int base, ttft__otlp_url *out, const char **why) {
  const char *p, *host, *host_end, *port = NULL, *port_end = NULL, *path;
  size_t n, i;
  memset(out, 0, sizeof *out);
  if (!url) {
    *why = "no URL";
    return -1;
  }
  for (i = 0; url[i]; i++)
    if (!url_char_ok((unsigned char)url[i])) {
      *why = "a space or control character in the URL";
      return -1;
    }
  if (strncasecmp(url, "https://", 8) == 0) {
    *why = "https is not supported: libttft has no TLS (libc only); push over http:// to a "
           "local OpenTelemetry Collector (agent or sidecar) that forwards over TLS";
    return -1;
  }
  if (strncasecmp(url, "http://", 7) != 0) {
    *why = "not an http:// URL";
    return -1;
  }
  p = url + 7;
  if (*p == '[') { /* an IPv6 literal */
    host = p + 1;
    host_end = strchr(host, ']');
    if (!host_end) {
      *why = "an IPv6 address without its closing ']'";
      return -1;
    }
    p = host_end + 1;
  } else {
    host = p;
    while (*p && *p != ':' && *p != '/' && *p != '?' && *p != '#') p++;
    host_end = p;
    if (memchr(host, '@', (size_t)(host_end - host))) {
      *why = "user information in the URL is not supported";
      return -1;
    }
  }
  if (host_end == host) {
    *why = "no host";
    return -1;
  }
  if (*p == ':') {
    port = ++p;
    while (*p >= '0' && *p <= '9') p++;
    port_end = p;
  }
  if (*p && *p != '/' && *p != '?' && *p != '#') {
    *why = "a bad port";
    return -1;
  }
  n = (size_t)(host_end - host);
  if (n >= sizeof out->host) {
    *why = "a host name too long";
    return -1;
  }
  memcpy(out->host, host, n);
  if (port) {
    unsigned long v = 0;
    if (port_end == port || port_end - port > 5) {
      *why = "a bad port";
      return -1;
    }
    for (i = 0; port + i < port_end; i++) v = v * 10 + (unsigned long)(port[i] - '0');
    if (v == 0 || v > 65535) {
      *why = "a bad port";
      return -1;
    }
    snprintf(out->port, sizeof out->port, "%lu", v);
  } else {
    memcpy(out->port, "80", 3);
  }
  /* the Host header: as written, without the scheme and the path */
  n = (size_t)(p - (url + 7));
  if (n >= sizeof out->authority) {
    *why = "a host name too long";
    return -1;
  }
  memcpy(out->authority, url + 7, n);
  path = p;
  n = strcspn(path, "#"); /* a fragment is never sent */
  if (n + sizeof "/v1/metrics" > sizeof out->path) {
    *why = "a path too long";
    return -1;
  }
  if (n == 0 || path[0] != '/') out->path[0] = '/';
  memcpy(out->path + strlen(out->path), path, n);
  if (base) {
    /* a base endpoint: v1/metrics relative to its path (the spec's rule
     * for OTEL_EXPORTER_OTLP_ENDPOINT); a query stays on the base */
    size_t len = strlen(out->path);
    if (strchr(out->path, '?')) {
      *why = "a base endpoint with a query (use the metrics endpoint, taken as is)";
      return -1;
    }
    if (out->path[len - 1] != '/') out->path[len++] = '/';
    memcpy(out->path + len, "v1/metrics", sizeof "v1/metrics");
  }
  return 0;
}

/* -------------------------------------------------------------- headers */

static int is_tchar(unsigned char c) {
  return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static const char *const own_headers[] = {"host", "content-type", "content-length", "connection",
                                          "transfer-encoding"};

int ttft__otlp_headers_parse(const char *s, ttft__sb *sb, char *why, size_t cap) {
  const char *p = s ? s : "";
  while (*p) {
    const char *e = p + strcspn(p, ","), *eq, *k0, *k1, *v0, *v1, *q;
    size_t i;
    k0 = p;
    while (k0 < e && (*k0 == ' ' || *k0 == '\t')) k0++;
    if (k0 == e) { /* an empty entry ("a=b,,c=d", a trailing comma) */
      p = *e ? e + 1 : e;
      continue;
    }
    eq = memchr(k0, '=', (size_t)(e - k0));
    if (!eq) {
      snprintf(why, cap, "headers: \"%.*s\" has no '='", (int)(e - k0 > 64 ? 64 : e - k0), k0);
      return -1;
    }
    k1 = eq;
    while (k1 > k0 && (k1[-1] == ' ' || k1[-1] == '\t')) k1--;
    if (k1 == k0) {
      snprintf(why, cap, "headers: an entry without a key");
      return -1;
    }
    for (q = k0; q < k1; q++)
      if (!is_tchar((unsigned char)*q)) {
        snprintf(why, cap, "headers: \"%.*s\" is not a header name", (int)(k1 - k0 > 64 ? 64 : k1 - k0), k0);
        return -1;
      }
    for (i = 0; i < sizeof own_headers / sizeof own_headers[0]; i++)
      if (strlen(own_headers[i]) == (size_t)(k1 - k0) && strncasecmp(own_headers[i], k0, (size_t)(k1 - k0)) == 0) {
        snprintf(why, cap, "headers: %.*s is written by the pusher itself", (int)(k1 - k0), k0);
        return -1;
      }
    v0 = eq + 1;
    v1 = e;
    while (v0 < v1 && (*v0 == ' ' || *v0 == '\t')) v0++;
    while (v1 > v0 && (v1[-1] == ' ' || v1[-1] == '\t')) v1--;
    ttft__sb_put(sb, k0, (size_t)(k1 - k0));
    ttft__sb_put(sb, ": ", 2);
    for (q = v0; q < v1; q++) {
      unsigned char c = (unsigned char)*q;
      if (c == '%') {
        if (v1 - q < 3 || hexval(q[1]) < 0 || hexval(q[2]) < 0) {
          snprintf(why, cap, "headers: a bad %%-escape in the value of %.*s", (int)(k1 - k0), k0);
          return -1;
        }
        c = (unsigned char)(hexval(q[1]) * 16 + hexval(q[2]));
        q += 2;
      }
      if ((c < 0x20 && c != '\t') || c == 0x7f) {
        snprintf(why, cap, "headers: the value of %.*s holds a control character", (int)(k1 - k0), k0);
        return -1;
      }
      ttft__sb_put(sb, (const char *)&c, 1);
    }
    ttft__sb_put(sb, "\r\n", 2);
    p = *e ? e + 1 : e;
  }
  return 0;
}

/* ---------------------------------------------------------- Retry-After */

static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* days from 1970-01-01 to y-m-d (proleptic Gregorian; m 1..12) */
static int64_t days_from_civil(int64_t y, int m, int d) {
  int64_t era, yoe, doy, doe;
  y -= m <= 2;
  era = (y >= 0 ? y : y - 399) / 400;
  yoe = y - era * 400;
  doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

static int digits(const char *s, int n, int *out) {
  int i, v = 0;
  for (i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return 0;
}

int ttft__otlp_retry_after(const char *v, size_t n, int64_t now_unix_s, uint64_t *ns) {
  size_t i;
  while (n && (*v == ' ' || *v == '\t')) v++, n--;
  while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
  if (n == 0) return -1;
  if (v[0] >= '0' && v[0] <= '9') { /* delta-seconds */
    uint64_t s = 0;
    for (i = 0; i < n; i++) {
      if (v[i] < '0' || v[i] > '9') return -1;
      if (s < UINT64_C(1000000000)) s = s * 10 + (uint64_t)(v[i] - '0');
    }
    *ns = s * UINT64_C(1000000000);
    return 0;
  }
  /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" (29 bytes) */
  if (n == 29 && v[3] == ',' && v[4] == ' ' && v[7] == ' ' && v[11] == ' ' && v[16] == ' ' &&
      v[19] == ':' && v[22] == ':' && v[25] == ' ' && memcmp(v + 26, "GMT", 3) == 0) {
    int d, y, hh, mm, ss, m = -1;
    int64_t t;
    for (i = 0; i < 12; i++)
      if (memcmp(v + 8, months[i], 3) == 0) m = (int)i + 1;
    if (m < 0 || digits(v + 5, 2, &d) || digits(v + 12, 4, &y) || digits(v + 17, 2, &hh) ||
        digits(v + 20, 2, &mm) || digits(v + 23, 2, &ss) || d < 1 || d > 31 || hh > 23 || mm > 59 ||
        ss > 60)
      return -1;
    t = days_from_civil(y, m, d) * 86400 + hh * 3600 + mm * 60 + ss;
    *ns = t > now_unix_s ? (uint64_t)(t - now_unix_s) * UINT64_C(1000000000) : 0;
    return 0;
  }
  return -1;
}

int ttft__otlp_retryable(int status) {
  return status == 429 || status == 502 || status == 503 || status == 504;
}

/* ----------------------------------------------------------------- POST */

/* Wait until fd is ready for ev or the deadline passes: 1 ready, 0
 * timed out, -1 error (errno). */
static int wait_fd(int fd, short ev, uint64_t deadline_ns) {
  for (;;) {
    struct pollfd pfd;
    uint64_t now = ttft_now_ns();
    int ms, rc;
    if (now >= deadline_ns) return 0;
    ms = (deadline_ns - now) / 1000000u > 60000u ? 60000 : (int)((deadline_ns - now + 999999u) / 1000000u);
    pfd.fd = fd;
    pfd.events = ev;
    pfd.revents = 0;
    rc = poll(&pfd, 1, ms);
    if (rc > 0) return 1;
    if (rc < 0 && errno != EINTR) return -1;
  }
}

static void fail(ttft__otlp_answer *a, const char *step, int err) {
  a->status = 0;
  a->step = step;
  a->err = err;
}

/* Connect to one address: the socket, or -1 (a->step/err say why). */
static int connect_one(const struct addrinfo *ai, uint64_t deadline_ns, ttft__otlp_answer *a) {
  int fd, rc, soerr = 0;
  socklen_t sl = sizeof soerr;
#if defined(SOCK_NONBLOCK) && defined(SOCK_CLOEXEC)
  fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
#else
  fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
  if (fd >= 0) {
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
#endif
  if (fd < 0) {
    fail(a, "socket", errno);
    return -1;
  }
#if defined(SO_NOSIGPIPE)
  {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
  }
#endif
  do rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
  while (rc < 0 && errno == EINTR);
  if (rc < 0 && errno != EINPROGRESS) {
    fail(a, "connect", errno);
    close(fd);
    return -1;
  }
  if (rc < 0) {
    rc = wait_fd(fd, POLLOUT, deadline_ns);
    if (rc <= 0) {
      fail(a, rc == 0 ? "connect: timed out" : "connect", rc == 0 ? ETIMEDOUT : errno);
      close(fd);
      return -1;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0) soerr = errno;
    if (soerr) {
      fail(a, "connect", soerr);
      close(fd);
      return -1;
    }
  }
  return fd;
}

#if defined(MSG_NOSIGNAL)
#  define OTLP_SEND_FLAGS MSG_NOSIGNAL
#else
#  define OTLP_SEND_FLAGS 0
#endif

/* Send the iovecs whole (one sendmsg where the socket takes it all: the
 * head and the body leave together, no Nagle wait between them). */
static int send_all(int fd, struct iovec *iov, int cnt, uint64_t deadline_ns, ttft__otlp_answer *a) {
  while (cnt) {
    struct msghdr m;
    ssize_t w;
    memset(&m, 0, sizeof m);
    m.msg_iov = iov;
    m.msg_iovlen = (size_t)cnt;
    w = sendmsg(fd, &m, OTLP_SEND_FLAGS);
    if (w >= 0) {
      size_t left = (size_t)w;
      while (cnt && left >= iov->iov_len) {
        left -= iov->iov_len;
        iov++;
        cnt--;
      }
      if (cnt) {
        iov->iov_base = (char *)iov->iov_base + left;
        iov->iov_len -= left;
      }
      while (cnt && iov->iov_len == 0) iov++, cnt--;
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int rc = wait_fd(fd, POLLOUT, deadline_ns);
      if (rc > 0) continue;
      fail(a, rc == 0 ? "send: timed out" : "send", rc == 0 ? ETIMEDOUT : errno);
      return -1;
    }
    fail(a, "send", errno);
    return -1;
  }
  return 0;
}

/* The head's header value of name (case-insensitive), or NULL. */
static const char *head_value(const char *head, size_t n, const char *name, size_t *vlen) {
  const char *p = memchr(head, '\n', n), *end = head + n;
  size_t nl = strlen(name);
  while (p && p + 1 < end) {
    const char *line = p + 1, *eol = memchr(line, '\n', (size_t)(end - line));
    if (!eol) break;
    if ((size_t)(eol - line) > nl && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
      const char *v = line + nl + 1, *ve = eol;
      if (ve > v && ve[-1] == '\r') ve--;
      *vlen = (size_t)(ve - v);
      return v;
    }
    p = eol;
  }
  return NULL;
}

static void parse_head(const char *head, size_t n, ttft__otlp_answer *a) {
  const char *v;
  size_t vl = 0;
  int st;
  /* "HTTP/1.x SSS ..." */
  if (n < 12 || memcmp(head, "HTTP/1.", 7) != 0 || head[8] != ' ' || digits(head + 9, 3, &st) ||
      st < 100 || (n > 12 && head[12] != ' ' && head[12] != '\r' && head[12] != '\n')) {
    fail(a, "receive: not an HTTP/1.x answer", EPROTO);
    return;
  }
  a->status = st;
  v = head_value(head, n, "retry-after", &vl);
  if (v) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    a->retry_after = ttft__otlp_retry_after(v, vl, (int64_t)ts.tv_sec, &a->retry_after_ns) == 0;
  }
}

/* Read until the head is whole (a blank line); a 1xx interim answer is
 * skipped. */
static void read_answer(int fd, uint64_t deadline_ns, ttft__otlp_answer *a) {
  char buf[OTLP_HEAD_MAX + 1];
  size_t n = 0;
  for (;;) {
    ssize_t r = recv(fd, buf + n, sizeof buf - 1 - n, 0);
    if (r > 0) {
      char *end;
      n += (size_t)r;
      buf[n] = '\0';
      end = strstr(buf, "\r\n\r\n");
      if (!end) end = strstr(buf, "\n\n");
      if (end) {
        size_t hl = (size_t)(end - buf) + (end[0] == '\r' ? 4 : 2);
        parse_head(buf, hl, a);
        if (a->status >= 100 && a->status < 200) { /* interim: the final answer follows */
          memmove(buf, buf + hl, n - hl);
          n -= hl;
          a->status = 0;
          a->retry_after = 0;
          continue;
        }
        return;
      }
      if (n == sizeof buf - 1) {
        fail(a, "receive: an answer head over 8 KiB", EMSGSIZE);
        return;
      }
      continue;
    }
    if (r == 0) {
      fail(a, "receive: the connection closed before a whole answer", ECONNRESET);
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int rc = wait_fd(fd, POLLIN, deadline_ns);
      if (rc > 0) continue;
      fail(a, rc == 0 ? "receive: timed out" : "receive", rc == 0 ? ETIMEDOUT : errno);
      return;
    }
    fail(a, "receive", errno);
    return;
  }
}

void ttft__otlp_post(const ttft__otlp_url *u, const char *hdrs, const void *body, size_t len,
                     uint64_t deadline_ns, ttft__otlp_answer *ans) {
  struct addrinfo hints, *res = NULL, *ai;
  char head[4096];
  struct iovec iov[2];
  ttft__sb sb;
  int fd = -1, rc;
  memset(ans, 0, sizeof *ans);
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  rc = getaddrinfo(u->host, u->port, &hints, &res);
  if (rc != 0) {
    fail(ans, "resolve", rc == EAI_SYSTEM ? errno : EHOSTUNREACH);
    return;
  }
  for (ai = res; ai && fd < 0; ai = ai->ai_next) fd = connect_one(ai, deadline_ns, ans);
  freeaddrinfo(res);
  if (fd < 0) return;
  ttft__sb_init(&sb, head, sizeof head);
  ttft__sb_printf(&sb,
                  "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: libttft/%s\r\n"
                  "Content-Type: application/x-protobuf\r\nContent-Length: %zu\r\n"
                  "Connection: close\r\n",
                  u->path, u->authority, ttft_version_string(), len);
  ttft__sb_puts(&sb, hdrs);
  ttft__sb_put(&sb, "\r\n", 2);
  if (sb.len >= sizeof head) {
    fail(ans, "request head over 4 KiB (headers too long)", EMSGSIZE);
    close(fd);
    return;
  }
  iov[0].iov_base = head;
  iov[0].iov_len = sb.len;
  iov[1].iov_base = (void *)(uintptr_t)body;
  iov[1].iov_len = len;
  if (send_all(fd, iov, len ? 2 : 1, deadline_ns, ans) == 0) read_answer(fd, deadline_ns, ans);
  close(fd);
}
