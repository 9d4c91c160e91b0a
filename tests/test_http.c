/*
 * test_http.c — the /metrics endpoint over real loopback sockets.
 *
 * Every request is written by hand on a plain socket, so the test controls
 * the bytes exactly (oversized heads, garbage, slow clients, clients that
 * leave mid-response). Time appears only as generous liveness bounds (a
 * normal request finishes within seconds while a hostile client is
 * connected); nothing asserts a latency.
 *
 * tests/http.cmake defines TTFT_TEST_HTTP_BUILT=0 when the library is built
 * without the endpoint; then the test checks the TTFT_ENOTSUP entry points.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ttft.h"
#include "task.h"

#ifndef TTFT_TEST_HTTP_BUILT
#  define TTFT_TEST_HTTP_BUILT 1
#endif

#define RESP_CAP (8u << 20)
#define LIVENESS_MS 10000 /* any single exchange must end within this */

/* ------------------------------------------------------------- helpers */

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int connect_to(const char *ip, int port) {
  int v6 = strchr(ip, ':') != NULL;
  int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
  int rc;
  if (fd < 0) return -1;
  if (v6) {
    struct sockaddr_in6 a;
    memset(&a, 0, sizeof a);
    a.sin6_family = AF_INET6;
    a.sin6_port = htons((uint16_t)port);
    inet_pton(AF_INET6, ip, &a.sin6_addr);
    rc = connect(fd, (struct sockaddr *)&a, sizeof a);
  } else {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    rc = connect(fd, (struct sockaddr *)&a, sizeof a);
  }
  if (rc < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int send_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* Read until EOF, error or timeout_ms. Returns the bytes read (NUL-
 * terminated); *eof = 1 on orderly EOF, -1 on a reset, 0 on timeout. */
static size_t read_all(int fd, char *buf, size_t cap, int timeout_ms, int *eof) {
  size_t len = 0;
  uint64_t end = now_ms() + (uint64_t)timeout_ms;
  int dummy;
  if (!eof) eof = &dummy;
  *eof = 0;
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    uint64_t t = now_ms();
    ssize_t k;
    if (t >= end) break;
    if (poll(&p, 1, (int)(end - t)) <= 0) continue;
    if (len + 1 >= cap) break;
    k = recv(fd, buf + len, cap - 1 - len, 0);
    if (k > 0) {
      len += (size_t)k;
    } else if (k == 0) {
      *eof = 1;
      break;
    } else if (errno != EINTR) {
      *eof = -1;
      break;
    }
  }
  buf[len] = '\0';
  return len;
}

typedef struct resp {
  char *buf;
  size_t len;
  int status; /* -1 when no status line came back */
  const char *body;
  size_t body_len;
} resp;

static void resp_parse(resp *r) {
  const char *e;
  r->status = -1;
  r->body = NULL;
  r->body_len = 0;
  if (r->len >= 12 && strncmp(r->buf, "HTTP/1.1 ", 9) == 0) r->status = atoi(r->buf + 9);
  e = strstr(r->buf, "\r\n\r\n");
  if (e) {
    r->body = e + 4;
    r->body_len = r->len - (size_t)(r->body - r->buf);
  }
}

/* Send raw on a new connection to 127.0.0.1:port and read the response. */
static int request(int port, const char *raw, size_t raw_len, resp *r) {
  int fd = connect_to("127.0.0.1", port);
  r->len = 0;
  r->buf[0] = '\0';
  if (fd < 0) {
    r->status = -1;
    return -1;
  }
  send_all(fd, raw, raw_len);
  r->len = read_all(fd, r->buf, RESP_CAP, LIVENESS_MS, NULL);
  close(fd);
  resp_parse(r);
  return r->status;
}

static int get(int port, const char *raw, resp *r) { return request(port, raw, strlen(raw), r); }

/* The value of header name in r's head (case-insensitive name), copied
 * into out; "" when absent. */
static const char *header(const resp *r, const char *name, char *out, size_t cap) {
  const char *p = strstr(r->buf, "\r\n");
  size_t n = strlen(name);
  out[0] = '\0';
  while (p && p + 2 < r->buf + r->len && !(p[2] == '\r' && p[3] == '\n')) {
    const char *line = p + 2, *eol = strstr(line, "\r\n");
    if (!eol) break;
    if ((size_t)(eol - line) > n && strncasecmp(line, name, n) == 0 && line[n] == ':') {
      const char *v = line + n + 1;
      size_t k;
      while (*v == ' ') v++;
      k = (size_t)(eol - v) < cap - 1 ? (size_t)(eol - v) : cap - 1;
      memcpy(out, v, k);
      out[k] = '\0';
      return out;
    }
    p = eol;
  }
  return out;
}

static long content_length(const resp *r) {
  char v[64];
  header(r, "Content-Length", v, sizeof v);
  return v[0] ? atol(v) : -1;
}

static ttft_registry *make_registry(void) {
  ttft_registry *reg = ttft_registry_new(NULL);
  uint64_t t = 1000000000ull;
  int i;
  if (!reg) return NULL;
  for (i = 0; i < 20; i++) {
    ttft_seq s = ttft_begin(reg, t);
    ttft_token_emitted(reg, s, 1, t + 50000000ull + (uint64_t)i * 1000000ull);
    ttft_token_emitted(reg, s, 1, t + 70000000ull + (uint64_t)i * 1000000ull);
    ttft_token_emitted(reg, s, 2, t + 95000000ull + (uint64_t)i * 1000000ull);
    ttft_stream_end(reg, s, TTFT_COMPLETED, t + 100000000ull + (uint64_t)i * 1000000ull);
    t += 200000000ull;
  }
  return reg;
}

/* ---------------------------------------------------------- the fixture */

/* What a test uses: F.reg, a registry with 20 streams; F.r, a response
 * buffer; with serve, F.srv on an ephemeral loopback port F.port. A build
 * without the endpoint checks its TTFT_ENOTSUP entry points here instead
 * (every test, then nothing else): fixture() returns 0. The teardown
 * checks that the server still answers after what the test did to it. */
static struct {
  ttft_registry *reg;
  ttft_http *srv;
  int port;
  resp r;
} F;

static int fixture(int serve) {
  signal(SIGPIPE, SIG_IGN);
  F.reg = make_registry();
  F.r.buf = malloc(RESP_CAP);
  EXPECT_NOT_NULL(F.reg);
  EXPECT_NOT_NULL(F.r.buf);
  if (!F.reg || !F.r.buf) return 0;
#if !TTFT_TEST_HTTP_BUILT
  {
    ttft_http *srv = (ttft_http *)&srv;
    fprintf(stderr, "   built without the endpoint: TTFT_ENOTSUP\n");
    EXPECT_ERR(TTFT_ENOTSUP, ttft_http_start(F.reg, "127.0.0.1:0", &srv));
    EXPECT_NULL(srv);
    EXPECT_ERR(TTFT_ENOTSUP, ttft_http_port(NULL));
    ttft_http_stop(NULL);
    return 0;
  }
#endif
  if (!serve) return 1;
  EXPECT_ERR(TTFT_OK, ttft_http_start(F.reg, "127.0.0.1:0", &F.srv));
  if (!F.srv) return 0;
  F.port = ttft_http_port(F.srv);
  return 1;
}

static void fixture_free(void) {
  if (F.srv) {
    EXPECT_EQ_INT(200, get(F.port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &F.r));
    ttft_http_stop(F.srv);
  }
  ttft_registry_free(F.reg);
  free(F.r.buf);
  memset(&F, 0, sizeof F);
}
TU_TEARDOWN(fixture_free)

/* ---------------------------------------------------------- the tests */

/* bad arguments and addresses: TTFT_EINVAL, *out set to NULL */
TEST(addresses) {
  static const char *const bad[] = {
      "",          "9464",           "127.0.0.1",      "127.0.0.1:",       "127.0.0.1:65536",
      "127.0.0.1:-1", "127.0.0.1:12a", "127.0.0.1:123456", "[::1]",          "[::1]9464",
      "::1:9464",  "256.0.0.1:80",   "example.invalid:80", "[127.0.0.1]:80", "[]:80",
      "127.0.0.1: 80", " 127.0.0.1:80", "[::1:80"};
  ttft_http *srv = (ttft_http *)&srv;
  size_t i;
  if (!fixture(0)) return;
  EXPECT_ERR(TTFT_EINVAL, ttft_http_start(NULL, ":0", &srv));
  EXPECT_NULL(srv);
  EXPECT_ERR(TTFT_EINVAL, ttft_http_start(F.reg, NULL, &srv));
  EXPECT_ERR(TTFT_EINVAL, ttft_http_start(F.reg, ":0", NULL));
  EXPECT_ERR(TTFT_EINVAL, ttft_http_port(NULL));
  ttft_http_stop(NULL);
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc;
    srv = (ttft_http *)&srv;
    rc = ttft_http_start(F.reg, bad[i], &srv);
    if (rc != TTFT_EINVAL) fprintf(stderr, "address \"%s\"\n", bad[i]);
    EXPECT_ERR(TTFT_EINVAL, rc);
    EXPECT_NULL(srv);
  }
}

/* ttft_http_start_msg: why a start failed, as text naming the address and
 * the reason (issue 32.7): a busy port says "address already in use", not
 * only TTFT_EIO; a bad address says so; success leaves "". */
TEST(start_messages) {
  ttft_http *a = NULL, *b = NULL;
  char addr[64], msg[256], want[96], tiny[8];
  int port;
  if (!fixture(0)) return;
  memset(msg, 'x', sizeof msg);
  EXPECT_ERR(TTFT_OK, ttft_http_start_msg(F.reg, "127.0.0.1:0", &a, msg, sizeof msg));
  EXPECT_STREQ("", msg);
  port = ttft_http_port(a);
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  b = (ttft_http *)&b;
  EXPECT_ERR(TTFT_EIO, ttft_http_start_msg(F.reg, addr, &b, msg, sizeof msg));
  EXPECT_NULL(b);
  snprintf(want, sizeof want, "%s: bind: ", addr);
  EXPECT_CONTAINS(msg, want);
  /* the C library's words (glibc "Address already in use", musl "Address in use") */
  EXPECT_CONTAINS(msg, strerror(EADDRINUSE));
  /* truncated, NUL-terminated, and the same code */
  memset(tiny, 'x', sizeof tiny);
  EXPECT_ERR(TTFT_EIO, ttft_http_start_msg(F.reg, addr, &b, tiny, sizeof tiny));
  EXPECT_EQ_INT(sizeof tiny - 1, strlen(tiny));
  EXPECT_ERR(TTFT_EIO, ttft_http_start_msg(F.reg, addr, &b, NULL, 0));
  ttft_http_stop(a);

  EXPECT_ERR(TTFT_EINVAL, ttft_http_start_msg(F.reg, "127.0.0.1:99999", &b, msg, sizeof msg));
  EXPECT_CONTAINS(msg, "127.0.0.1:99999: not an address");
  EXPECT_ERR(TTFT_EINVAL, ttft_http_start_msg(NULL, ":0", &b, msg, sizeof msg));
  EXPECT_CONTAINS(msg, "no registry");
  EXPECT_ERR(TTFT_EINVAL, ttft_http_start_msg(F.reg, NULL, &b, msg, sizeof msg));
  EXPECT_CONTAINS(msg, "(null): not an address");
}

/* port 0, ":port", a taken port, IPv6 */
TEST(ports) {
  ttft_http *a = NULL, *b = NULL;
  char addr[64];
  int port, fd, v6;
  struct sockaddr_in6 six;
  ttft_registry *reg;
  if (!fixture(0)) return;
  reg = F.reg;
  EXPECT_ERR(TTFT_OK, ttft_http_start(reg, ":0", &a));
  port = ttft_http_port(a);
  EXPECT_TRUE(port > 0 && port < 65536);
  fd = connect_to("127.0.0.1", port); /* ":port" is loopback */
  EXPECT_TRUE(fd >= 0);
  if (fd >= 0) close(fd);
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  b = (ttft_http *)&b;
  EXPECT_ERR(TTFT_EIO, ttft_http_start(reg, addr, &b));
  EXPECT_NULL(b);
  ttft_http_stop(a);

  EXPECT_ERR(TTFT_OK, ttft_http_start(reg, "localhost:0", &a));
  EXPECT_TRUE(ttft_http_port(a) > 0);
  ttft_http_stop(a);

  /* IPv6 loopback: served when the machine has it, TTFT_EIO when not */
  fd = socket(AF_INET6, SOCK_STREAM, 0);
  memset(&six, 0, sizeof six);
  six.sin6_family = AF_INET6;
  six.sin6_addr = in6addr_loopback;
  v6 = fd >= 0 && bind(fd, (struct sockaddr *)&six, sizeof six) == 0;
  if (fd >= 0) close(fd);
  a = NULL;
  if (v6) {
    resp r;
    static char buf[4096];
    EXPECT_ERR(TTFT_OK, ttft_http_start(reg, "[::1]:0", &a));
    port = ttft_http_port(a);
    fd = connect_to("::1", port);
    EXPECT_TRUE(fd >= 0);
    r.buf = buf;
    if (fd >= 0) {
      send_all(fd, "GET / HTTP/1.0\r\n\r\n", 18);
      r.len = read_all(fd, buf, sizeof buf, LIVENESS_MS, NULL);
      resp_parse(&r);
      EXPECT_EQ_INT(200, r.status);
      close(fd);
    }
    ttft_http_stop(a);
  } else {
    EXPECT_ERR(TTFT_EIO, ttft_http_start(reg, "[::1]:0", &a));
    EXPECT_NULL(a);
  }
}

#define PB_CTYPE "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
#define OM_CTYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define TEXT_CTYPE "text/plain; version=0.0.4; charset=utf-8"

/* What Prometheus 2.42 sends (captured from prometheus 2.42.0 scraping a
 * socket): by default, and with --enable-feature=native-histograms. */
#define PROM242_ACCEPT                                                                              \
  "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75," \
  "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
#define PROM242_NATIVE_ACCEPT                                                                       \
  "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,"    \
  "application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;"   \
  "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"

/* GET /metrics without Accept: the text format, the whole body, then close */
TEST(metrics_text) {
  char v[256];
  resp *r = &F.r;
  if (!fixture(1)) return;
  EXPECT_EQ_INT(200, get(F.port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_STREQ(TEXT_CTYPE, header(r, "Content-Type", v, sizeof v));
  EXPECT_STREQ("close", header(r, "Connection", v, sizeof v));
  EXPECT_CONTAINS(r->body, "gen_ai_server_time_to_first_token");
  EXPECT_EQ_INT((long long)r->body_len, content_length(r));
}

/* Accept selects OpenMetrics or text: what Prometheus 2.x sends, case and
 * spaces, q-values, versions, two Accept fields */
TEST(metrics_openmetrics_accept) {
  char v[256];
  int port;
  resp *r = &F.r;
  if (!fixture(1)) return;
  port = F.port;
  EXPECT_EQ_INT(200, get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: " PROM242_ACCEPT "\r\n\r\n", r));
  EXPECT_STREQ(OM_CTYPE, header(r, "Content-Type", v, sizeof v));
  EXPECT_CONTAINS(r->body, "gen_ai_server_time_to_first_token");
  EXPECT_TRUE(r->body_len >= 6 && memcmp(r->body + r->body_len - 6, "# EOF\n", 6) == 0);
  EXPECT_EQ_INT((long long)r->body_len, content_length(r));

  EXPECT_EQ_INT(200, get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n"
                               "accept:  Application/OpenMetrics-Text \r\n\r\n", r));
  EXPECT_STREQ(OM_CTYPE, header(r, "Content-Type", v, sizeof v));
  EXPECT_EQ_INT(200, get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: "
                               "application/openmetrics-text;q=0.2, text/plain;q=0.9\r\n\r\n", r));
  EXPECT_STREQ(TEXT_CTYPE, header(r, "Content-Type", v, sizeof v));
  EXPECT_EQ_INT(200, get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: "
                               "application/openmetrics-text;version=0.0.1\r\n\r\n", r));
  EXPECT_STREQ(TEXT_CTYPE, header(r, "Content-Type", v, sizeof v));
  EXPECT_EQ_INT(200, get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/html\r\n"
                               "Accept: application/openmetrics-text; q=0\r\n\r\n", r));
  EXPECT_STREQ(TEXT_CTYPE, header(r, "Content-Type", v, sizeof v));
  EXPECT_EQ_INT(200, get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n"
                               "Accept: application/openmetrics-text\r\n\r\n", r));
  EXPECT_STREQ(OM_CTYPE, header(r, "Content-Type", v, sizeof v));
}

/* query strings, absolute-form, HTTP/1.0 without Host, other 1.x minor
 * versions, empty lines first and bare LF line ends */
TEST(request_forms) {
  int port;
  resp *r = &F.r;
  if (!fixture(1)) return;
  port = F.port;
  EXPECT_EQ_INT(200, get(port, "GET /metrics?name[]=x HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_EQ_INT(200, get(port, "GET http://127.0.0.1/metrics HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_CONTAINS(r->body, "gen_ai_server_time_to_first_token");
  EXPECT_EQ_INT(200, get(port, "GET http://127.0.0.1?x HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_CONTAINS(r->body, "/report.json"); /* the index */
  EXPECT_EQ_INT(200, get(port, "GET /metrics HTTP/1.0\r\n\r\n", r));
  EXPECT_EQ_INT(200, get(port, "GET /metrics HTTP/1.7\r\nHost: x\r\n\r\n", r));
  EXPECT_EQ_INT(200, get(port, "\r\nGET /metrics HTTP/1.1\nHost: x\n\n", r));
}

/* /report (text), /report.json, / (the index) */
TEST(report_routes) {
  char v[256];
  int port;
  resp *r = &F.r;
  if (!fixture(1)) return;
  port = F.port;
  EXPECT_EQ_INT(200, get(port, "GET /report HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_STREQ("text/plain; charset=utf-8", header(r, "Content-Type", v, sizeof v));
  EXPECT_TRUE(r->body_len > 0);
  EXPECT_EQ_INT((long long)r->body_len, content_length(r));

  EXPECT_EQ_INT(200, get(port, "GET /report.json HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_STREQ("application/json", header(r, "Content-Type", v, sizeof v));
  EXPECT_TRUE(r->body_len > 0 && r->body[0] == '{');
  EXPECT_EQ_INT((long long)r->body_len, content_length(r));

  EXPECT_EQ_INT(200, get(port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_CONTAINS(r->body, "/metrics");
}

/* HEAD: the GET's Content-Type and Content-Length, no body */
TEST(head_requests) {
  char v[256];
  int port;
  resp *r = &F.r;
  if (!fixture(1)) return;
  port = F.port;
  EXPECT_EQ_INT(200, get(port, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_STREQ(TEXT_CTYPE, header(r, "Content-Type", v, sizeof v));
  EXPECT_TRUE(content_length(r) > 0);
  EXPECT_EQ_U64(0, r->body_len);
  EXPECT_EQ_INT(200, get(port, "HEAD /report.json HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_STREQ("application/json", header(r, "Content-Type", v, sizeof v));
  EXPECT_TRUE(content_length(r) > 0);
  EXPECT_EQ_U64(0, r->body_len);
}

/* ------------------------------------------------ content negotiation */

/* A base-128 varint at p[0, n): its value and length, 0 when malformed or
 * truncated. */
static size_t varint(const unsigned char *p, size_t n, uint64_t *v) {
  size_t i;
  *v = 0;
  for (i = 0; i < n && i < 10; i++) {
    *v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
    if (!(p[i] & 0x80)) return i + 1;
  }
  return 0;
}

/* body is a sequence of length-delimited messages, each a non-empty
 * MetricFamily starting with a valid field key: the count, -1 if not. */
static long delimited_messages(const unsigned char *body, size_t len) {
  size_t off = 0;
  long count = 0;
  while (off < len) {
    uint64_t mlen, key;
    size_t k = varint(body + off, len - off, &mlen);
    if (k == 0 || mlen == 0 || mlen > len - off - k) return -1;
    /* the first field key: field number >= 1, wire type 0, 1, 2 or 5 */
    if (varint(body + off + k, (size_t)mlen, &key) == 0 || (key >> 3) == 0 ||
        ((key & 7) != 0 && (key & 7) != 1 && (key & 7) != 2 && (key & 7) != 5))
      return -1;
    off += k + (size_t)mlen;
    count++;
  }
  return count;
}

/* The size of reg's protobuf exposition, or a negative error when the
 * library cannot write it (then every protobuf answer falls back to text). */
static long protobuf_len(ttft_registry *reg) {
  ttft_snapshot *snap = ttft_snapshot_take(reg);
  long n = snap ? ttft_snapshot_format(snap, TTFT_FORMAT_PROMETHEUS_PROTOBUF, NULL, 0) : TTFT_ENOMEM;
  ttft_snapshot_free(snap);
  fprintf(stderr, "   protobuf format: %s\n", n >= 0 ? "available" : ttft_strerror((int)n));
  return n;
}

typedef struct nego_case {
  const char *accept; /* the Accept field lines ("" = none), CRLF-separated */
  char want;          /* 'p' protobuf, 'o' OpenMetrics, 't' text */
} nego_case;

static const nego_case NEGO_CASES[] = {
    {"", 't'},
    {"Accept: " PROM242_ACCEPT "\r\n", 'o'},
    {"Accept: " PROM242_NATIVE_ACCEPT "\r\n", 'p'},
    /* q-values decide, whatever the order */
    {"Accept: application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
     "encoding=delimited;q=0.5,application/openmetrics-text;q=0.7\r\n", 'o'},
    {"Accept: application/openmetrics-text;q=0.5,application/vnd.google.protobuf;"
     "proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7\r\n", 'p'},
    {"Accept: text/plain;q=0.9,application/vnd.google.protobuf;"
     "proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.8\r\n", 't'},
    /* q=0 refuses */
    {"Accept: application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
     "encoding=delimited;q=0," PROM242_ACCEPT "\r\n", 'o'},
    {"Accept: application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
     "encoding=delimited;q=0\r\n", 't'},
    /* equal q: protobuf, then OpenMetrics, then text */
    {"Accept: text/plain, application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
     "encoding=delimited\r\n", 'p'},
    {"Accept: application/openmetrics-text;q=0.6, application/vnd.google.protobuf;q=0.6\r\n", 'p'},
    /* other protobuf representations are not ours */
    {"Accept: application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
     "encoding=text\r\n", 't'},
    {"Accept: application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
     "encoding=compact-text\r\n", 't'},
    {"Accept: application/vnd.google.protobuf;proto=other.Message;encoding=delimited\r\n", 't'},
    /* the bare type, quoted values, case-insensitive names, spaces */
    {"Accept: application/vnd.google.protobuf\r\n", 'p'},
    {"Accept: Application/Vnd.Google.Protobuf ; Proto=\"io.prometheus.client.MetricFamily\" ; "
     "ENCODING=\"delimited\" ; Q=1.0\r\n", 'p'},
    /* parameter values are case-sensitive */
    {"Accept: application/vnd.google.protobuf;proto=IO.PROMETHEUS.CLIENT.METRICFAMILY\r\n", 't'},
    /* wildcards never select protobuf or OpenMetrics */
    {"Accept: */*\r\n", 't'},
    {"Accept: application/*\r\n", 't'},
    /* the most specific range sets the q-value */
    {"Accept: application/openmetrics-text;version=1.0.0;q=0.3, application/openmetrics-text;q=0.9,"
     " text/plain;q=0.5\r\n", 't'},
    {"Accept: application/vnd.google.protobuf;q=0.9, application/vnd.google.protobuf;"
     "proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.1, text/plain;q=0.5\r\n", 't'},
    /* a text version we do not write: OpenMetrics is what is left */
    {"Accept: text/plain;version=1.0.0, application/openmetrics-text;q=0.5\r\n", 'o'},
    /* a malformed q is ignored (not an error), and so is the element */
    {"Accept: application/vnd.google.protobuf;q=2, text/plain;q=0.5\r\n", 't'},
    {"Accept: application/vnd.google.protobuf;q=0.x\r\n", 't'},
    /* parameters after q are accept-extensions */
    {"Accept: application/vnd.google.protobuf;q=0.9;encoding=text, text/plain;q=0.5\r\n", 'p'},
    /* two Accept fields are one list */
    {"Accept: text/plain;q=0.4\r\nAccept: application/vnd.google.protobuf;q=0.6\r\n", 'p'},
};

/* Accept negotiation: protobuf, OpenMetrics, text, q-values, the fallback
 * to text when protobuf cannot be written; each answer's body is of the
 * type it says */
TEST(accept_negotiation) {
  char raw[1024], v[256];
  size_t i;
  int pb;
  resp *r = &F.r;
  if (!fixture(1)) return;
  pb = protobuf_len(F.reg) >= 0;
  for (i = 0; i < sizeof NEGO_CASES / sizeof NEGO_CASES[0]; i++) {
    char want = NEGO_CASES[i].want == 'p' && !pb ? 't' : NEGO_CASES[i].want;
    const char *ctype = want == 'p' ? PB_CTYPE : want == 'o' ? OM_CTYPE : TEXT_CTYPE;
    snprintf(raw, sizeof raw, "GET /metrics HTTP/1.1\r\nHost: x\r\n%s\r\n", NEGO_CASES[i].accept);
    EXPECT_EQ_INT(200, get(F.port, raw, r));
    header(r, "Content-Type", v, sizeof v);
    if (strcmp(ctype, v) != 0) fprintf(stderr, "Accept case %zu:\n%s", i, NEGO_CASES[i].accept);
    EXPECT_STREQ(ctype, v);
    EXPECT_STREQ("Accept", header(r, "Vary", v, sizeof v));
    EXPECT_EQ_INT((long long)r->body_len, content_length(r));
    if (want == 'p') {
      long n = delimited_messages((const unsigned char *)r->body, r->body_len);
      EXPECT_TRUE(r->body_len > 0);
      EXPECT_TRUE(n > 0);
    } else if (want == 'o') {
      EXPECT_TRUE(r->body_len >= 6 && memcmp(r->body + r->body_len - 6, "# EOF\n", 6) == 0);
    } else {
      EXPECT_CONTAINS(r->body, "gen_ai_server_time_to_first_token");
      EXPECT_TRUE(strstr(r->body, "# EOF") == NULL);
    }
  }
}

/* HEAD with protobuf: the same Content-Type and length as the GET, no body */
TEST(head_protobuf) {
  char raw[1024], v[256];
  long len_get;
  int pb;
  resp *r = &F.r;
  if (!fixture(1)) return;
  pb = protobuf_len(F.reg) >= 0;
  snprintf(raw, sizeof raw, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: %s\r\n\r\n", PROM242_NATIVE_ACCEPT);
  EXPECT_EQ_INT(200, get(F.port, raw, r));
  len_get = content_length(r);
  snprintf(raw, sizeof raw, "HEAD /metrics HTTP/1.1\r\nHost: x\r\nAccept: %s\r\n\r\n", PROM242_NATIVE_ACCEPT);
  EXPECT_EQ_INT(200, get(F.port, raw, r));
  EXPECT_STREQ(pb ? PB_CTYPE : TEXT_CTYPE, header(r, "Content-Type", v, sizeof v));
  EXPECT_EQ_INT(len_get, content_length(r)); /* a static registry: the same body */
  EXPECT_EQ_U64(0, r->body_len);
}

/* the protobuf body holds as many messages as the formatter writes for
 * this (static) registry: NUL bytes inside did not cut it short */
TEST(protobuf_body_whole) {
  char raw[1024];
  long pb_len;
  resp *r = &F.r;
  if (!fixture(1)) return;
  pb_len = protobuf_len(F.reg);
  EXPECT_GT_INT(pb_len, 0); /* the formatter writes this registry */
  if (pb_len <= 0) return;
  {
    ttft_snapshot *s2 = ttft_snapshot_take(F.reg);
    char *mine = s2 ? malloc((size_t)pb_len + 1) : NULL;
    long n2 = mine ? ttft_snapshot_format(s2, TTFT_FORMAT_PROMETHEUS_PROTOBUF, mine, (size_t)pb_len + 1) : -1;
    snprintf(raw, sizeof raw, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: %s\r\n\r\n", PROM242_NATIVE_ACCEPT);
    EXPECT_EQ_INT(200, get(F.port, raw, r));
    EXPECT_TRUE(n2 > 0);
    if (n2 > 0)
      EXPECT_EQ_INT(delimited_messages((const unsigned char *)mine, (size_t)n2),
                    delimited_messages((const unsigned char *)r->body, r->body_len));
    free(mine);
    ttft_snapshot_free(s2);
  }
}

/* ------------------------------------------------------------ errors */

/* 404 for unknown paths (GET, HEAD, POST), 405 + Allow for other methods */
TEST(not_found_and_method) {
  char v[256];
  int port;
  resp *r = &F.r;
  if (!fixture(1)) return;
  port = F.port;
  EXPECT_EQ_INT(404, get(port, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_EQ_INT(404, get(port, "GET /metricsx HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_EQ_INT(404, get(port, "GET /metrics/ HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_EQ_INT(404, get(port, "HEAD /nope HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_TRUE(content_length(r) > 0);
  EXPECT_EQ_U64(0, r->body_len); /* a HEAD answer has no body, errors too */
  EXPECT_EQ_INT(404, get(port, "POST /nope HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_EQ_INT((long long)r->body_len, content_length(r));

  EXPECT_EQ_INT(405, get(port, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", r));
  EXPECT_STREQ("GET, HEAD", header(r, "Allow", v, sizeof v));
  EXPECT_EQ_INT(405, get(port, "DELETE /report HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_STREQ("GET, HEAD", header(r, "Allow", v, sizeof v));
  EXPECT_EQ_INT(405, get(port, "get /metrics HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_EQ_INT(405, get(port, "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_STREQ("GET, HEAD", header(r, "Allow", v, sizeof v));
}

/* malformed requests: 400; HTTP/2.0: 505; chunked bodies: 501; a body
 * announced too large: 413 */
TEST(bad_requests) {
  int port;
  resp *r = &F.r;
  if (!fixture(1)) return;
  port = F.port;
  EXPECT_EQ_INT(400, request(port, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11, r));
  EXPECT_EQ_INT(400, get(port, "GET /metrics\r\n\r\n", r));
  EXPECT_EQ_INT(400, get(port, "GET /metrics HTTP/1.1\r\n\r\n", r)); /* no Host */
  EXPECT_EQ_INT(400, get(port, "GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", r));
  EXPECT_EQ_INT(400, get(port, "GET  /metrics HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_EQ_INT(400, get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n", r));
  EXPECT_EQ_INT(400, get(port, "GET /metrics HTTP/1.1\r\nHost: x\rX: 1\r\n\r\n", r));
  EXPECT_EQ_INT(400, get(port, "GET /metrics HTTP/1.1\r\nHost : x\r\n\r\n", r));
  EXPECT_EQ_INT(400, get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", r));
  EXPECT_EQ_INT(400, get(port, "GET metrics HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_EQ_INT(400, request(port, "GET /metrics HTTP/1.1\r\nHost: x\0\r\n\r\n", 33, r));
  EXPECT_EQ_INT(505, get(port, "GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n", r));
  EXPECT_EQ_INT(501, get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", r));
  EXPECT_EQ_INT(413, get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", r));
}

/* heads past the 8 KiB limit: a long request line (414), a large field,
 * many small fields, a 60 KB head in one piece (431, not a hang) */
TEST(oversized_heads) {
  char *big;
  size_t i, n;
  int port;
  resp *r = &F.r;
  if (!fixture(1)) return;
  port = F.port;
  big = malloc(64 * 1024);
  EXPECT_NOT_NULL(big);
  if (!big) return;
  n = (size_t)sprintf(big, "GET /");
  for (i = 0; i < 10000; i++) big[n++] = 'a';
  n += (size_t)sprintf(big + n, " HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ_INT(414, request(port, big, n, r));
  n = (size_t)sprintf(big, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ");
  for (i = 0; i < 10000; i++) big[n++] = 'b';
  n += (size_t)sprintf(big + n, "\r\n\r\n");
  EXPECT_EQ_INT(431, request(port, big, n, r));
  n = (size_t)sprintf(big, "GET /metrics HTTP/1.1\r\nHost: x\r\n");
  for (i = 0; i < 200; i++) n += (size_t)sprintf(big + n, "X-%zu: 1\r\n", i);
  n += (size_t)sprintf(big + n, "\r\n");
  EXPECT_EQ_INT(431, request(port, big, n, r));
  n = (size_t)sprintf(big, "GET /metrics HTTP/1.1\r\nHost: x\r\n");
  while (n < 60000) n += (size_t)sprintf(big + n, "X-Pad: 0123456789abcdef\r\n");
  n += (size_t)sprintf(big + n, "\r\n");
  EXPECT_EQ_INT(431, request(port, big, n, r));
  free(big);
}

/* -------------------------------------------------------- slow clients */

typedef struct slow_client {
  int port;
  int status;        /* what the server finally answered, -1 none */
  uint64_t cut_ms;   /* how long until the server ended it */
  int cut;           /* the server ended the connection */
} slow_client;

/* A slowloris: a valid start, then one header byte per 100 ms, forever. */
static void *slowloris(void *arg) {
  slow_client *sc = arg;
  static const char start[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  char buf[4096];
  uint64_t t0 = now_ms();
  int fd = connect_to("127.0.0.1", sc->port);
  sc->status = -1;
  sc->cut = 0;
  if (fd < 0) return NULL;
  send_all(fd, start, sizeof start - 1);
  while (now_ms() - t0 < 30000) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      resp r;
      r.buf = buf;
      r.len = read_all(fd, buf, sizeof buf, 2000, NULL);
      resp_parse(&r);
      sc->status = r.status;
      sc->cut = 1;
      break;
    }
    if (send(fd, "a", 1, MSG_NOSIGNAL) != 1) {
      sc->cut = 1;
      break;
    }
  }
  sc->cut_ms = now_ms() - t0;
  close(fd);
  return NULL;
}

/* slowloris clients do not delay a normal client, and are cut (408) */
TEST(slowloris) {
  pthread_t th[3];
  slow_client sc[3];
  uint64_t t0, dt;
  int i, started[3], port;
  resp *r = &F.r;
  if (!fixture(1)) return;
  port = F.port;
  for (i = 0; i < 3; i++) {
    sc[i].port = port;
    started[i] = pthread_create(&th[i], NULL, slowloris, &sc[i]) == 0;
    EXPECT_TRUE(started[i]);
  }
  usleep(500 * 1000); /* let them connect and dribble */
  t0 = now_ms();
  EXPECT_EQ_INT(200, get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", r));
  dt = now_ms() - t0;
  EXPECT_LE_U64(dt, 3000); /* liveness: served while they dribble */
  for (i = 0; i < 3; i++) {
    if (!started[i]) continue;
    pthread_join(th[i], NULL);
    EXPECT_TRUE(sc[i].cut);
    EXPECT_EQ_INT(408, sc[i].status);
    EXPECT_LE_U64(sc[i].cut_ms, 20000); /* liveness: the head deadline is 5 s */
  }
}

/* ----------------------------------------------------- many connections */

/* many concurrent connections: 150 clients at once are all served */
TEST(many_clients) {
  enum { N = 150 };
  int fds[N], ok = 0, i, port;
  static char buf[1 << 20];
  static const char req[] = "GET /report.json HTTP/1.1\r\nHost: x\r\n\r\n";
  if (!fixture(1)) return;
  port = F.port;
  /* N clients connect and send at once, then read: all are served */
  for (i = 0; i < N; i++) {
    fds[i] = connect_to("127.0.0.1", port);
    if (fds[i] >= 0) send_all(fds[i], req, sizeof req - 1);
  }
  for (i = 0; i < N; i++) {
    resp x;
    if (fds[i] < 0) continue;
    x.buf = buf;
    x.len = read_all(fds[i], buf, sizeof buf, LIVENESS_MS, NULL);
    resp_parse(&x);
    ok += x.status == 200;
    close(fds[i]);
  }
  EXPECT_EQ_INT(N, ok);
}

/* more idle connections than the server keeps: a newcomer still gets in
 * (the oldest idle ones make room) */
TEST(idle_make_room) {
  enum { IDLE = 90 };
  int fds[IDLE], i, port;
  uint64_t t0;
  resp *r = &F.r;
  if (!fixture(1)) return;
  port = F.port;
  for (i = 0; i < IDLE; i++) fds[i] = connect_to("127.0.0.1", port);
  usleep(400 * 1000);
  t0 = now_ms();
  EXPECT_EQ_INT(200, get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", r));
  EXPECT_LE_U64(now_ms() - t0, 5000); /* liveness */
  {
    int dropped = 0;
    for (i = 0; i < IDLE; i++) {
      struct pollfd p = {fds[i], POLLIN, 0};
      if (fds[i] >= 0 && poll(&p, 1, 0) > 0) dropped++;
    }
    EXPECT_TRUE(dropped > 0); /* some idle ones were closed for room */
  }
  for (i = 0; i < IDLE; i++)
    if (fds[i] >= 0) close(fds[i]);
}

/* --------------------------------------------- clients that walk away */

/* clients closing mid-request and mid-response: the server goes on */
TEST(walkaway) {
  int i, port;
  resp *r = &F.r;
  if (!fixture(1)) return;
  port = F.port;
  for (i = 0; i < 30; i++) {
    int fd = connect_to("127.0.0.1", port);
    struct linger lg = {1, 0};
    int small = 1024;
    char b[16];
    if (fd < 0) continue;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    switch (i % 3) {
    case 0: /* half a request, then a reset */
      send_all(fd, "GET /metr", 9);
      break;
    case 1: /* a whole request, a few bytes of the answer, then a reset */
      send_all(fd, "GET /report.json HTTP/1.1\r\nHost: x\r\n\r\n", 38);
      read_all(fd, b, sizeof b, 2000, NULL);
      break;
    default: /* a whole request, then gone without reading */
      send_all(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34);
      break;
    }
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
  }
  EXPECT_EQ_INT(200, get(port, "GET /report HTTP/1.1\r\nHost: x\r\n\r\n", r));
}

/* ------------------------------------------------- stop with clients */

/* stop while clients are connected: it does not wait for them, each sees
 * its connection end, nobody listens afterwards */
TEST(stop_busy) {
  ttft_http *srv = NULL;
  int port, fds[3], i;
  uint64_t t0;
  resp *r = &F.r;
  if (!fixture(0)) return;
  EXPECT_ERR(TTFT_OK, ttft_http_start(F.reg, "127.0.0.1:0", &srv));
  if (!srv) return;
  port = ttft_http_port(srv);
  fds[0] = connect_to("127.0.0.1", port); /* idle */
  fds[1] = connect_to("127.0.0.1", port); /* half a head */
  fds[2] = connect_to("127.0.0.1", port); /* a request it does not read */
  if (fds[1] >= 0) send_all(fds[1], "GET /metrics HTTP/1.1\r\nHo", 25);
  if (fds[2] >= 0) send_all(fds[2], "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34);
  usleep(200 * 1000);
  t0 = now_ms();
  ttft_http_stop(srv);
  EXPECT_LE_U64(now_ms() - t0, 5000); /* liveness: stop does not wait for clients */
  for (i = 0; i < 3; i++) {
    int eof;
    if (fds[i] < 0) continue;
    read_all(fds[i], r->buf, RESP_CAP, LIVENESS_MS, &eof);
    EXPECT_TRUE(eof != 0); /* every client sees the connection end */
    close(fds[i]);
  }
  EXPECT_TRUE(connect_to("127.0.0.1", port) < 0); /* nobody listens */
}

/* start / request / stop, repeatedly */
TEST(start_stop_loop) {
  int i, ok = 0;
  if (!fixture(0)) return;
  for (i = 0; i < 20; i++) {
    ttft_http *srv = NULL;
    if (ttft_http_start(F.reg, "127.0.0.1:0", &srv) != TTFT_OK) continue;
    if (i % 2 == 0) ok += get(ttft_http_port(srv), "GET /report HTTP/1.1\r\nHost: x\r\n\r\n", &F.r) == 200;
    else ok++;
    ttft_http_stop(srv);
  }
  EXPECT_EQ_INT(20, ok);
}

/* --------------------------------------------------- the allocator */

static atomic_long g_live; /* relaxed: a tally read after the threads joined */
static atomic_long g_allocs;

static void *count_alloc(void *ctx, size_t n) {
  void *p = malloc(n);
  (void)ctx;
  if (p) {
    atomic_fetch_add_explicit(&g_live, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
  }
  return p;
}
static void count_free(void *ctx, void *p) {
  (void)ctx;
  if (p) atomic_fetch_sub_explicit(&g_live, 1, memory_order_relaxed);
  free(p);
}

/* every allocation goes through the allocator and is returned (a registry
 * and a server of their own, made under the counting allocator) */
TEST(allocator) {
  ttft_allocator a = {count_alloc, count_free, NULL};
  ttft_registry *reg;
  ttft_http *srv = NULL;
  long before;
  resp *r = &F.r;
  if (!fixture(0)) return;
  EXPECT_ERR(TTFT_OK, ttft_set_allocator(&a));
  reg = make_registry();
  EXPECT_NOT_NULL(reg);
  if (reg) {
    EXPECT_ERR(TTFT_OK, ttft_http_start(reg, "127.0.0.1:0", &srv));
    before = atomic_load_explicit(&g_allocs, memory_order_relaxed);
    if (srv) {
      int port = ttft_http_port(srv);
      EXPECT_EQ_INT(200, get(port, "GET /report.json HTTP/1.1\r\nHost: x\r\n\r\n", r));
      EXPECT_EQ_INT(404, get(port, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n", r));
      EXPECT_TRUE(atomic_load_explicit(&g_allocs, memory_order_relaxed) > before);
      ttft_http_stop(srv);
    }
    ttft_registry_free(reg);
  }
  EXPECT_EQ_INT(0, atomic_load_explicit(&g_live, memory_order_relaxed));
  ttft_set_allocator(NULL);
}

TU_MAIN()
