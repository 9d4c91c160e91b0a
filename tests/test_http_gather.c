/*
 * test_http_gather.c — the endpoint serving a gather (ttft_http_start_gather)
 * and GET /snapshot, over real loopback sockets.
 *
 * Two registries of this process publish into a private directory
 * (publish_interval_ms 0: only ttft_publish writes, so what is published
 * stays put while the test scrapes); a gather of it is served. Checks:
 * /metrics (every format) is byte for byte the gather's own rendering;
 * /snapshot decodes to the counters and counts of what it serves, for a
 * registry server and for a gather server; 8 concurrent scrapers get one
 * body and cost one take per window (the static build reads the server's
 * take count; the shared one checks the bodies only). Time appears only
 * as liveness bounds and in the window arithmetic of the take bound.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
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

#if defined(TTFT_TEST_STATIC) && TTFT_TEST_HTTP_BUILT
#  include "report/http.h"
#endif

#ifndef TTFT_TEST_HTTP_BUILT
#  define TTFT_TEST_HTTP_BUILT 1
#endif

#define RESP_CAP (8u << 20)
#define LIVENESS_MS 10000
#define SCRAPERS 8

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

typedef struct resp {
  char *buf;
  size_t len;
  int status;
  const char *body;
  size_t body_len;
} resp;

/* One request on a new connection to 127.0.0.1:port; the response in r. */
static int get(int port, const char *raw, resp *r) {
  struct sockaddr_in a;
  uint64_t end = now_ms() + LIVENESS_MS;
  size_t n = strlen(raw), off = 0;
  const char *e;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  r->len = 0;
  r->status = -1;
  r->body = NULL;
  r->body_len = 0;
  if (fd < 0) return -1;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
    close(fd);
    return -1;
  }
  while (off < n) {
    ssize_t k = send(fd, raw + off, n - off, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    off += (size_t)k;
  }
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    uint64_t t = now_ms();
    ssize_t k;
    if (t >= end || r->len + 1 >= RESP_CAP) break;
    if (poll(&p, 1, (int)(end - t)) <= 0) continue;
    k = recv(fd, r->buf + r->len, RESP_CAP - 1 - r->len, 0);
    if (k > 0) r->len += (size_t)k;
    else if (k == 0 || errno != EINTR) break;
  }
  close(fd);
  r->buf[r->len] = '\0';
  if (r->len >= 12 && strncmp(r->buf, "HTTP/1.1 ", 9) == 0) r->status = atoi(r->buf + 9);
  e = strstr(r->buf, "\r\n\r\n");
  if (e) {
    r->body = e + 4;
    r->body_len = r->len - (size_t)(r->body - r->buf);
  }
  return r->status;
}

/* r's Content-Type contains want (case-sensitive value, any position). */
static int ctype_is(const resp *r, const char *want) {
  const char *h = strcasestr(r->buf, "\r\nContent-Type: ");
  const char *eol = h ? strstr(h + 2, "\r\n") : NULL;
  size_t n = strlen(want);
  return h && eol && (size_t)(eol - (h + 16)) == n && memcmp(h + 16, want, n) == 0;
}

/* 20 streams on reg, shifted by skew so that two registries differ. */
static void record(ttft_registry *reg, uint64_t skew) {
  uint64_t t = 1000000000ull;
  int i;
  for (i = 0; i < 20; i++) {
    ttft_seq s = ttft_begin(reg, t);
    ttft_token_emitted(reg, s, 1, t + 50000000ull + skew + (uint64_t)i * 1000000ull);
    ttft_token_emitted(reg, s, 2, t + 95000000ull + skew + (uint64_t)i * 1000000ull);
    ttft_stream_end(reg, s, i % 5 ? TTFT_COMPLETED : TTFT_CANCELLED,
                    t + 100000000ull + skew + (uint64_t)i * 1000000ull);
    t += 200000000ull;
  }
}

/* ---------------------------------------------------------- the fixture */

static struct {
  char dir[64];
  ttft_registry *pub[2]; /* publishers into dir */
  ttft_registry *plain;  /* no shared_dir */
  ttft_gather *g;
  ttft_http *srv;
  int port;
  resp r;
} F;

/* The directory, two publishing registries (api-0, api-1: one ttft_publish
 * each), a plain registry, and a gather of the directory (flags). */
static int fixture(unsigned flags) {
  char msg[256] = "";
  int i;
  signal(SIGPIPE, SIG_IGN);
  F.r.buf = malloc(RESP_CAP);
  snprintf(F.dir, sizeof F.dir, "/tmp/ttft-http-gather.XXXXXX");
  EXPECT_NOT_NULL(F.r.buf);
  EXPECT_NOT_NULL(mkdtemp(F.dir)); /* 0700: what the directory check wants */
  for (i = 0; i < 2; i++) {
    ttft_config c;
    char name[16];
    ttft_config_init(&c);
    snprintf(name, sizeof name, "api-%d", i);
    c.shared_dir = F.dir;
    c.process_name = name;
    c.publish_interval_ms = 0;
    F.pub[i] = ttft_registry_new(&c);
    EXPECT_NOT_NULL(F.pub[i]);
    if (!F.pub[i]) return 0;
    record(F.pub[i], (uint64_t)i * 30000000ull);
    EXPECT_ERR(TTFT_OK, ttft_publish(F.pub[i]));
  }
  F.plain = ttft_registry_new(NULL);
  EXPECT_NOT_NULL(F.plain);
  if (F.plain) record(F.plain, 0);
  F.g = ttft_gather_open_msg(F.dir, flags, msg, sizeof msg);
  if (!F.g) fprintf(stderr, "   gather_open: %s\n", msg);
  EXPECT_NOT_NULL(F.g);
#if !TTFT_TEST_HTTP_BUILT
  {
    ttft_http *srv = (ttft_http *)&srv;
    fprintf(stderr, "   built without the endpoint: TTFT_ENOTSUP\n");
    EXPECT_ERR(TTFT_ENOTSUP, ttft_http_start_gather(F.g, "127.0.0.1:0", &srv, msg, sizeof msg));
    EXPECT_NULL(srv);
    EXPECT_CONTAINS(msg, "without HTTP");
    return 0;
  }
#endif
  return F.r.buf && F.plain && F.g;
}

static void fixture_free(void) {
  char path[256];
  int i;
  ttft_http_stop(F.srv);
  ttft_gather_close(F.g);
  for (i = 0; i < 2; i++) ttft_registry_free(F.pub[i]);
  ttft_registry_free(F.plain);
  free(F.r.buf);
  if (F.dir[0]) { /* whatever the publishers and the gatherer left */
    snprintf(path, sizeof path, "rm -rf '%s'", F.dir);
    if (system(path) != 0) fprintf(stderr, "   could not remove %s\n", F.dir);
  }
  memset(&F, 0, sizeof F);
}
TU_TEARDOWN(fixture_free)

/* s formatted as f, malloc'd (NUL-terminated); *len its length. */
static char *render(const ttft_snapshot *s, ttft_format f, size_t *len) {
  long n = ttft_snapshot_format(s, f, NULL, 0);
  char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (!buf) return NULL;
  ttft_snapshot_format(s, f, buf, (size_t)n + 1);
  *len = (size_t)n;
  return buf;
}

/* body == the rendering of s as f, byte for byte */
static void expect_body_is(const resp *r, const ttft_snapshot *s, ttft_format f) {
  size_t n = 0;
  char *want = render(s, f, &n);
  EXPECT_NOT_NULL(want);
  EXPECT_EQ_U64(n, r->body_len);
  EXPECT_TRUE(want && r->body && n == r->body_len && memcmp(want, r->body, n) == 0);
  free(want);
}

/* The /snapshot body decodes to what want holds: every counter, gauge
 * and the count of every metric. */
static void expect_snapshot_body(const resp *r, const ttft_snapshot *want) {
  int err = 0, i;
  ttft_snapshot *got;
  EXPECT_EQ_INT(200, r->status);
  EXPECT_TRUE(ctype_is(r, "application/octet-stream"));
  got = r->body ? ttft_snapshot_decode(r->body, r->body_len, &err) : NULL;
  EXPECT_NOT_NULL(got);
  EXPECT_ERR(TTFT_OK, err);
  if (!got) return;
  for (i = 0; i < TTFT_COUNTER_COUNT_; i++)
    EXPECT_EQ_U64(ttft_snapshot_counter(want, (ttft_counter)i), ttft_snapshot_counter(got, (ttft_counter)i));
  for (i = 0; i < TTFT_GAUGE_COUNT_; i++)
    if (i != TTFT_GAUGE_MEMORY) /* the registry's bytes change as it is read */
      EXPECT_EQ_U64(ttft_snapshot_gauge(want, (ttft_gauge)i), ttft_snapshot_gauge(got, (ttft_gauge)i));
  for (i = 0; i < TTFT_METRIC_COUNT_; i++)
    EXPECT_EQ_U64(ttft_snapshot_count(want, (ttft_metric)i), ttft_snapshot_count(got, (ttft_metric)i));
  ttft_snapshot_free(got);
}

/* ---------------------------------------------------------- the tests */

/* a registry server answers /snapshot with its encoding; HEAD with the
 * same length; the index lists /snapshot */
TEST(snapshot_registry) {
  ttft_snapshot *want;
  long len;
  char cl[64];
  if (!fixture(0)) return;
  EXPECT_ERR(TTFT_OK, ttft_http_start(F.plain, "127.0.0.1:0", &F.srv));
  if (!F.srv) return;
  F.port = ttft_http_port(F.srv);
  EXPECT_EQ_INT(200, get(F.port, "GET /snapshot HTTP/1.1\r\nHost: x\r\n\r\n", &F.r));
  want = ttft_snapshot_take(F.plain);
  expect_snapshot_body(&F.r, want);
  EXPECT_EQ_U64(20, ttft_snapshot_count(want, TTFT_METRIC_TTFT)); /* not an empty pair */
  ttft_snapshot_free(want);
  len = (long)F.r.body_len;
  EXPECT_EQ_INT(200, get(F.port, "HEAD /snapshot HTTP/1.1\r\nHost: x\r\n\r\n", &F.r));
  snprintf(cl, sizeof cl, "Content-Length: %ld\r\n", len);
  EXPECT_CONTAINS(F.r.buf, cl);
  EXPECT_EQ_U64(0, F.r.body_len);
  EXPECT_EQ_INT(200, get(F.port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", &F.r));
  EXPECT_CONTAINS(F.r.body, "/snapshot");
  EXPECT_EQ_INT(405, get(F.port, "POST /snapshot HTTP/1.1\r\nHost: x\r\n\r\n", &F.r));
}

/* a gather server: /snapshot decodes to the gather's own take, which is
 * both publishers merged */
TEST(snapshot_gather) {
  ttft_snapshot *want;
  if (!fixture(0)) return;
  EXPECT_ERR(TTFT_OK, ttft_http_start_gather(F.g, "127.0.0.1:0", &F.srv, NULL, 0));
  if (!F.srv) return;
  F.port = ttft_http_port(F.srv);
  EXPECT_EQ_INT(200, get(F.port, "GET /snapshot HTTP/1.1\r\nHost: x\r\n\r\n", &F.r));
  want = ttft_gather_take(F.g);
  EXPECT_NOT_NULL(want);
  if (!want) return;
  expect_snapshot_body(&F.r, want);
  EXPECT_EQ_U64(40, ttft_snapshot_count(want, TTFT_METRIC_TTFT));
  EXPECT_EQ_U64(2, ttft_snapshot_gauge(want, TTFT_GAUGE_PROCESSES));
  ttft_snapshot_free(want);
}

/* /metrics (text, OpenMetrics, protobuf), /report and /report.json of a
 * gather server are the gather's own renderings, byte for byte */
static void metrics_equal(unsigned flags) {
  static const struct {
    const char *req;
    ttft_format f;
  } cases[] = {
      {"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", TTFT_FORMAT_PROMETHEUS},
      {"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n",
       TTFT_FORMAT_OPENMETRICS},
      {"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/vnd.google.protobuf; "
       "proto=io.prometheus.client.MetricFamily; encoding=delimited\r\n\r\n",
       TTFT_FORMAT_PROMETHEUS_PROTOBUF},
      {"GET /report HTTP/1.1\r\nHost: x\r\n\r\n", TTFT_FORMAT_TEXT},
      {"GET /report.json HTTP/1.1\r\nHost: x\r\n\r\n", TTFT_FORMAT_JSON},
  };
  ttft_snapshot *want;
  size_t i;
  if (!fixture(flags)) return;
  EXPECT_ERR(TTFT_OK, ttft_http_start_gather(F.g, "127.0.0.1:0", &F.srv, NULL, 0));
  if (!F.srv) return;
  F.port = ttft_http_port(F.srv);
  want = ttft_gather_take(F.g);
  EXPECT_NOT_NULL(want);
  if (!want) return;
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    long n = ttft_snapshot_format(want, cases[i].f, NULL, 0);
    EXPECT_EQ_INT(200, get(F.port, cases[i].req, &F.r));
    if (n == TTFT_ENOTSUP) continue; /* protobuf left out of this build: text (test_http) */
    expect_body_is(&F.r, want, cases[i].f);
  }
  /* (the process label itself is the formatters' to write: test_format) */
  EXPECT_EQ_U64(40, ttft_snapshot_count(want, TTFT_METRIC_TTFT));
  ttft_snapshot_free(want);
}

TEST(metrics_is_the_gathers_rendering) { metrics_equal(0); }
TEST(metrics_by_process) { metrics_equal(TTFT_GATHER_BY_PROCESS); }

/* ---------------------------------------------- concurrent scrapers */

typedef struct scraper {
  int port;
  const char *req;
  resp r;
  int status;
} scraper;

static pthread_barrier_t g_start;

static void *scrape(void *arg) {
  scraper *s = arg;
  pthread_barrier_wait(&g_start);
  s->status = get(s->port, s->req, &s->r);
  return NULL;
}

/* 8 scrapers at once: every /metrics body is the same, and the server
 * took one snapshot (one merge of the directory) for them all and for a
 * /snapshot, /report and /report.json besides, per snapshot window */
TEST(concurrent_scrapers_share_one_take) {
  scraper sc[SCRAPERS];
  pthread_t th[SCRAPERS];
  uint64_t t0, t1, window_ns;
  int i;
  if (!fixture(0)) return;
#if defined(TTFT_TEST_STATIC) && TTFT_TEST_HTTP_BUILT
  {
    /* a window far longer than the test, so that one take is the answer
     * whatever the machine's speed; the bound below still allows one more
     * per window elapsed */
    ttft__http_opts o = {0, 0, 0, UINT64_C(60000000000), 0};
    window_ns = o.render_interval_ns;
    EXPECT_ERR(TTFT_OK, ttft__http_start_gather_opts(F.g, "127.0.0.1:0", &o, &F.srv));
  }
#else
  window_ns = 0;
  EXPECT_ERR(TTFT_OK, ttft_http_start_gather(F.g, "127.0.0.1:0", &F.srv, NULL, 0));
#endif
  if (!F.srv) return;
  F.port = ttft_http_port(F.srv);
  pthread_barrier_init(&g_start, NULL, SCRAPERS);
  t0 = now_ms();
  for (i = 0; i < SCRAPERS; i++) {
    sc[i].port = F.port;
    sc[i].req = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    sc[i].r.buf = malloc(RESP_CAP);
    EXPECT_NOT_NULL(sc[i].r.buf);
    if (!sc[i].r.buf) abort();
    EXPECT_EQ_INT(0, pthread_create(&th[i], NULL, scrape, &sc[i]));
  }
  for (i = 0; i < SCRAPERS; i++) pthread_join(th[i], NULL);
  EXPECT_EQ_INT(200, get(F.port, "GET /snapshot HTTP/1.1\r\nHost: x\r\n\r\n", &F.r));
  EXPECT_EQ_INT(200, get(F.port, "GET /report.json HTTP/1.1\r\nHost: x\r\n\r\n", &F.r));
  EXPECT_EQ_INT(200, get(F.port, "GET /report HTTP/1.1\r\nHost: x\r\n\r\n", &F.r));
  t1 = now_ms();
  for (i = 0; i < SCRAPERS; i++) {
    EXPECT_EQ_INT(200, sc[i].status);
    EXPECT_EQ_U64(sc[0].r.body_len, sc[i].r.body_len);
    EXPECT_TRUE(sc[i].r.body && sc[0].r.body && sc[0].r.body_len == sc[i].r.body_len &&
                memcmp(sc[0].r.body, sc[i].r.body, sc[i].r.body_len) == 0);
  }
  EXPECT_CONTAINS(sc[0].r.body, "ttft_");
#if defined(TTFT_TEST_STATIC) && TTFT_TEST_HTTP_BUILT
  {
    ttft__http_stats st;
    uint64_t windows = ((t1 - t0) * UINT64_C(1000000)) / window_ns;
    ttft__http_get_stats(F.srv, &st);
    fprintf(stderr, "   %u scrapers + 3 paths: %llu take(s), %llu render(s), %llu reuse(s)\n",
            SCRAPERS, (unsigned long long)st.takes, (unsigned long long)st.renders,
            (unsigned long long)st.reuses);
    EXPECT_GE_U64(st.takes, 1);
    EXPECT_LE_U64(st.takes, 1 + windows);
    EXPECT_GE_U64(st.reuses + st.renders, SCRAPERS + 3);
  }
#else
  (void)t0;
  (void)t1;
  (void)window_ns;
  fprintf(stderr, "   shared build: bodies checked; the take count is the static build's\n");
#endif
  pthread_barrier_destroy(&g_start);
  for (i = 0; i < SCRAPERS; i++) free(sc[i].r.buf);
}

/* NULL gather and a busy port: TTFT_EINVAL / TTFT_EIO with a message */
TEST(start_gather_errors) {
  ttft_http *srv = (ttft_http *)&srv, *busy = NULL;
  char msg[256], addr[64];
  if (!fixture(0)) return;
  EXPECT_ERR(TTFT_EINVAL, ttft_http_start_gather(NULL, "127.0.0.1:0", &srv, msg, sizeof msg));
  EXPECT_NULL(srv);
  EXPECT_CONTAINS(msg, "no gather");
  EXPECT_ERR(TTFT_OK, ttft_http_start_gather(F.g, "127.0.0.1:0", &busy, msg, sizeof msg));
  EXPECT_STREQ("", msg);
  if (!busy) return;
  snprintf(addr, sizeof addr, "127.0.0.1:%d", ttft_http_port(busy));
  EXPECT_ERR(TTFT_EIO, ttft_http_start_gather(F.g, addr, &srv, msg, sizeof msg));
  EXPECT_NULL(srv);
  EXPECT_CONTAINS(msg, addr);
  EXPECT_CONTAINS(msg, "bind");
  ttft_http_stop(busy);
}

TU_MAIN()
