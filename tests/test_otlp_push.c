/*
 * test_otlp_push.c — the OTLP pusher (ttft_otlp_*) against a receiver on
 * loopback that answers as scripted: 200, 429 with Retry-After, 502, 503,
 * 504, 400, 500, a connection closed mid-answer, an answer that never
 * comes. It records every request (path, head, body, arrival time).
 *
 * What is asserted: only 429/502/503/504 and connection failures are
 * retried; Retry-After is waited for (an attempt never comes sooner);
 * retries stop at the timeout; ttft_otlp_flush's code; stop's last push;
 * https:// and bad URLs refused with a reason; the environment (headers
 * percent-decoded, temporality words, bad values ignored, endpoint
 * precedence); delta: the bodies the receiver accepted sum to the
 * cumulative count, each starting where the last accepted one ended,
 * across 503s and a receiver restarted on the same port; a forked child
 * frees its copy without touching the parent's pusher.
 *
 * Bodies are read with a minimal protobuf walker over the OTLP schema
 * (ExportMetricsServiceRequest → ResourceMetrics(1) → ScopeMetrics(2) →
 * Metric(2): name(1), exponential_histogram(10) → data_points(1):
 * start(2), time(3), count(4)) for gen_ai.server.time_to_first_token.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ttft.h"
#include "task.h"

#if defined(TTFT_TEST_STATIC)
#  include "report/otlp.h" /* white-box: the parsers and the counts */
#endif

/* ------------------------------------------------------------- receiver */

enum act { A_200, A_429_RA1, A_429_RA60, A_502, A_503, A_504, A_400, A_500, A_CLOSE, A_SLOW, A_429_DATE };

#define MAXREQ 64
typedef struct req {
  uint64_t t_ns;
  enum act act;
  char head[2048];
  unsigned char *body;
  size_t len;
} req;

typedef struct rcv {
  int lfd, port;
  pthread_t th;
  atomic_int stop;
  pthread_mutex_t mu;
  enum act script[32];
  int nscript, next;
  req reqs[MAXREQ];
  int n;
  int slow_fd[8], nslow;
} rcv;

static uint64_t mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int listen_port(int port) {
  struct sockaddr_in a;
  socklen_t sl = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((uint16_t)port);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 16) < 0) {
    close(fd);
    return -1;
  }
  getsockname(fd, (struct sockaddr *)&a, &sl);
  return fd;
}

static int port_of(int fd) {
  struct sockaddr_in a;
  socklen_t sl = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &sl);
  return ntohs(a.sin_port);
}

static void send_str(int fd, const char *s) {
  size_t n = strlen(s);
  while (n) {
    ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static void serve_one(rcv *r, int fd) {
  char buf[1 << 16];
  size_t n = 0, hl = 0, cl = 0;
  char *e;
  req *q;
  enum act act;
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    ssize_t k;
    if (poll(&p, 1, 5000) <= 0) break;
    k = recv(fd, buf + n, sizeof buf - 1 - n, 0);
    if (k <= 0) break;
    n += (size_t)k;
    buf[n] = 0;
    if (!hl && (e = strstr(buf, "\r\n\r\n")) != NULL) {
      char *c = strcasestr(buf, "\r\ncontent-length:");
      hl = (size_t)(e - buf) + 4;
      cl = c ? strtoul(c + 17, NULL, 10) : 0;
    }
    if (hl && n >= hl + cl) break;
  }
  pthread_mutex_lock(&r->mu);
  act = r->next < r->nscript ? r->script[r->next++] : A_200;
  if (r->n < MAXREQ && hl) {
    q = &r->reqs[r->n++];
    q->t_ns = mono();
    q->act = act;
    snprintf(q->head, sizeof q->head, "%.*s", (int)hl, buf);
    q->len = n - hl;
    q->body = malloc(q->len + 1);
    memcpy(q->body, buf + hl, q->len);
  }
  pthread_mutex_unlock(&r->mu);
  switch (act) {
  case A_200: send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n"); break;
  case A_429_RA1: send_str(fd, "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n"); break;
  case A_429_RA60: send_str(fd, "HTTP/1.1 429 Too Many Requests\r\nretry-after: 60\r\nContent-Length: 0\r\n\r\n"); break;
  case A_429_DATE: {
    char d[64], line[256];
    time_t t = time(NULL) + 2;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(d, sizeof d, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    snprintf(line, sizeof line, "HTTP/1.1 429 Too Many Requests\r\nRetry-After: %s\r\nContent-Length: 0\r\n\r\n", d);
    send_str(fd, line);
    break;
  }
  case A_502: send_str(fd, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n"); break;
  case A_503: send_str(fd, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"); break;
  case A_504: send_str(fd, "HTTP/1.1 504 Gateway Timeout\r\nContent-Length: 0\r\n\r\n"); break;
  case A_400: send_str(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"); break;
  case A_500: send_str(fd, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"); break;
  case A_CLOSE: send_str(fd, "HTTP/1.1 20"); break;
  case A_SLOW:
    pthread_mutex_lock(&r->mu);
    if (r->nslow < 8) {
      r->slow_fd[r->nslow++] = fd;
      fd = -1;
    }
    pthread_mutex_unlock(&r->mu);
    break;
  }
  if (fd >= 0) close(fd);
}

static void *rcv_run(void *arg) {
  rcv *r = arg;
  while (!atomic_load(&r->stop)) {
    struct pollfd p = {r->lfd, POLLIN, 0};
    int fd;
    if (poll(&p, 1, 20) <= 0) continue;
    fd = accept(r->lfd, NULL, NULL);
    if (fd >= 0) serve_one(r, fd);
  }
  return NULL;
}

static void rcv_listen(rcv *r, int port) {
  r->lfd = listen_port(port);
  r->port = port_of(r->lfd);
  atomic_store(&r->stop, 0);
  pthread_create(&r->th, NULL, rcv_run, r);
}

static void rcv_close_listener(rcv *r) {
  atomic_store(&r->stop, 1);
  pthread_join(r->th, NULL);
  close(r->lfd);
}

static rcv *rcv_start(const enum act *script, int n) {
  rcv *r = calloc(1, sizeof *r);
  pthread_mutex_init(&r->mu, NULL);
  if (n) memcpy(r->script, script, sizeof *script * (size_t)n);
  r->nscript = n;
  rcv_listen(r, 0);
  return r;
}

static void rcv_script(rcv *r, const enum act *script, int n) {
  pthread_mutex_lock(&r->mu);
  if (n) memcpy(r->script, script, sizeof *script * (size_t)n);
  r->nscript = n;
  r->next = 0;
  pthread_mutex_unlock(&r->mu);
}

static int rcv_count(rcv *r) {
  int n;
  pthread_mutex_lock(&r->mu);
  n = r->n;
  pthread_mutex_unlock(&r->mu);
  return n;
}

static void rcv_free(rcv *r) {
  int i;
  rcv_close_listener(r);
  for (i = 0; i < r->nslow; i++) close(r->slow_fd[i]);
  for (i = 0; i < r->n; i++) free(r->reqs[i].body);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

/* ------------------------------------------------------------ the walker */

typedef struct pb {
  const unsigned char *p, *end;
} pb;

static int pb_varint(pb *b, uint64_t *v) {
  int sh = 0;
  *v = 0;
  while (b->p < b->end && sh < 64) {
    unsigned char c = *b->p++;
    *v |= (uint64_t)(c & 0x7f) << sh;
    if (!(c & 0x80)) return 0;
    sh += 7;
  }
  return -1;
}

/* next field: its number, wire type, and for LEN its sub-buffer, for
 * VARINT / I64 its value */
static int pb_next(pb *b, unsigned *field, unsigned *wt, pb *sub, uint64_t *val) {
  uint64_t key, n;
  if (b->p >= b->end || pb_varint(b, &key)) return -1;
  *field = (unsigned)(key >> 3);
  *wt = (unsigned)(key & 7);
  switch (*wt) {
  case 0: return pb_varint(b, val);
  case 1:
    if (b->end - b->p < 8) return -1;
    memcpy(val, b->p, 8); /* little-endian host */
    b->p += 8;
    return 0;
  case 2:
    if (pb_varint(b, &n) || (uint64_t)(b->end - b->p) < n) return -1;
    sub->p = b->p;
    sub->end = b->p + n;
    b->p += n;
    return 0;
  case 5:
    if (b->end - b->p < 4) return -1;
    *val = 0;
    memcpy(val, b->p, 4);
    b->p += 4;
    return 0;
  default: return -1;
  }
}

typedef struct ttft_points {
  uint64_t count;    /* summed over data points */
  uint64_t start, time; /* of the last data point */
  int points, temporality, ok;
} ttft_points;

static void walk_metric(pb m, ttft_points *out) {
  unsigned f, wt;
  pb sub, eh = {0, 0};
  uint64_t v;
  int named = 0;
  while (pb_next(&m, &f, &wt, &sub, &v) == 0) {
    if (f == 1 && wt == 2) named = (size_t)(sub.end - sub.p) == strlen("gen_ai.server.time_to_first_token") &&
                                   memcmp(sub.p, "gen_ai.server.time_to_first_token", (size_t)(sub.end - sub.p)) == 0;
    if (f == 10 && wt == 2) eh = sub;
  }
  if (!named || !eh.p) return;
  while (pb_next(&eh, &f, &wt, &sub, &v) == 0) {
    if (f == 2 && wt == 0) out->temporality = (int)v;
    if (f == 1 && wt == 2) {
      pb dp = sub;
      unsigned f2, wt2;
      pb s2;
      uint64_t v2;
      out->points++;
      while (pb_next(&dp, &f2, &wt2, &s2, &v2) == 0) {
        if (f2 == 2 && wt2 == 1) out->start = v2;
        if (f2 == 3 && wt2 == 1) out->time = v2;
        if (f2 == 4 && wt2 == 1) out->count += v2;
      }
    }
  }
}

static ttft_points decode_ttft(const req *q) {
  ttft_points out;
  pb b = {q->body, q->body + q->len}, rm, sm, m;
  unsigned f, wt;
  uint64_t v;
  memset(&out, 0, sizeof out);
  while (pb_next(&b, &f, &wt, &rm, &v) == 0) {
    if (f != 1 || wt != 2) continue;
    while (pb_next(&rm, &f, &wt, &sm, &v) == 0) {
      if (f != 2 || wt != 2) continue;
      while (pb_next(&sm, &f, &wt, &m, &v) == 0)
        if (f == 2 && wt == 2) walk_metric(m, &out);
    }
  }
  out.ok = b.p == b.end;
  return out;
}

/* -------------------------------------------------------------- helpers */

static void record(ttft_registry *r, int n) {
  int i;
  for (i = 0; i < n; i++) {
    ttft_seq s = ttft_begin(r, TTFT_NOW);
    ttft_token_emitted(r, s, 1, TTFT_NOW);
    ttft_stream_end(r, s, TTFT_COMPLETED, TTFT_NOW);
  }
}

static ttft_otlp *start_at(ttft_registry *reg, rcv *r, uint32_t timeout_ms, int temporality) {
  char url[64], msg[256];
  ttft_otlp_config c;
  ttft_otlp *o = NULL;
  int rc;
  ttft_otlp_config_init(&c);
  snprintf(url, sizeof url, "http://127.0.0.1:%d", r->port);
  c.endpoint = url;
  c.interval_ms = 3600000; /* pushes come from flush and stop only */
  c.timeout_ms = timeout_ms;
  c.temporality = temporality;
  rc = ttft_otlp_start_msg(reg, &c, &o, msg, sizeof msg);
  EXPECT_ERR(TTFT_OK, rc);
  EXPECT_STREQ("", msg);
  return o;
}

static void counts(ttft_otlp *o, uint64_t failed, uint64_t dropped) {
  ttft_otlp_info st;
  memset(&st, 0xa5, sizeof st);
  st.struct_size = sizeof st;
  EXPECT_ERR(TTFT_OK, ttft_otlp_stats(o, &st));
  EXPECT_EQ_U64(sizeof st, st.struct_size);
  EXPECT_EQ_U64(failed, st.failed);
  EXPECT_EQ_U64(dropped, st.dropped);
  EXPECT_EQ_U64(st.pushes, st.accepted + st.failed + st.dropped);
  EXPECT_LT_U64(strlen(st.last_error), sizeof st.last_error);
}

/* ------------------------------------------------------------------ tests */

TEST(retries_only_retryable) {
  enum act s1[] = {A_503, A_502, A_504, A_CLOSE, A_200};
  rcv *r = rcv_start(s1, 5);
  ttft_registry *reg = ttft_registry_new(NULL);
  ttft_otlp *o = start_at(reg, r, 30000, TTFT_OTLP_CUMULATIVE);
  int i;
  record(reg, 3);
  EXPECT_ERR(TTFT_OK, ttft_otlp_flush(o));
  EXPECT_EQ_INT(5, rcv_count(r));
  for (i = 0; i < 5; i++) {
    EXPECT_CONTAINS(r->reqs[i].head, "POST /v1/metrics HTTP/1.1\r\n");
    EXPECT_CONTAINS(r->reqs[i].head, "\r\nContent-Type: application/x-protobuf\r\n");
    EXPECT_GT_U64(r->reqs[i].len, 0);
    EXPECT_EQ_U64(3, decode_ttft(&r->reqs[i]).count);
  }
  counts(o, 0, 0);

  /* 400 and 500: refused for good, one attempt each, dropped */
  {
    enum act s2[] = {A_400, A_500};
    rcv_script(r, s2, 2);
  }
  EXPECT_ERR(TTFT_EIO, ttft_otlp_flush(o));
  EXPECT_EQ_INT(6, rcv_count(r));
  EXPECT_ERR(TTFT_EIO, ttft_otlp_flush(o));
  EXPECT_EQ_INT(7, rcv_count(r));
  counts(o, 0, 2);
  EXPECT_ERR(TTFT_OK, ttft_otlp_flush(o));
  EXPECT_EQ_INT(8, rcv_count(r));
  ttft_otlp_stop(o); /* the last push */
  EXPECT_EQ_INT(9, rcv_count(r));
  rcv_free(r);
  ttft_registry_free(reg);
}

/* ttft_otlp_stats: every POST, retry, byte and outcome counted; an older
 * (smaller) struct filled up to its size; bad arguments refused */
TEST(stats_count_everything) {
  enum act s1[] = {A_503, A_CLOSE, A_200, A_400};
  rcv *r = rcv_start(s1, 4);
  ttft_registry *reg = ttft_registry_new(NULL);
  ttft_otlp *o = start_at(reg, r, 2000, TTFT_OTLP_DELTA);
  ttft_otlp_info st;
  uint64_t bytes = 0;
  int i;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  EXPECT_ERR(TTFT_OK, ttft_otlp_stats(o, &st));
  EXPECT_EQ_U64(0, st.pushes);
  EXPECT_EQ_INT(0, st.last_status);
  EXPECT_STREQ("", st.last_error);
  record(reg, 2);
  EXPECT_ERR(TTFT_OK, ttft_otlp_flush(o)); /* 503, closed, 200 */
  record(reg, 1);
  EXPECT_ERR(TTFT_EIO, ttft_otlp_flush(o)); /* 400: dropped */
  EXPECT_EQ_INT(4, rcv_count(r));
  for (i = 0; i < 4; i++) bytes += r->reqs[i].len;
  EXPECT_ERR(TTFT_OK, ttft_otlp_stats(o, &st));
  EXPECT_EQ_U64(2, st.pushes);
  EXPECT_EQ_U64(1, st.accepted);
  EXPECT_EQ_U64(0, st.failed);
  EXPECT_EQ_U64(1, st.dropped);
  EXPECT_EQ_U64(2, st.retries);
  EXPECT_EQ_U64(bytes, st.bytes_sent);
  EXPECT_EQ_INT(400, st.last_status);
  EXPECT_STREQ("HTTP 400", st.last_error);
  /* an older struct: up to last_status, nothing written past it */
  {
    unsigned char buf[sizeof(ttft_otlp_info) + 8];
    size_t old = offsetof(ttft_otlp_info, last_error);
    ttft_otlp_info *p = (ttft_otlp_info *)(void *)buf;
    memset(buf, 0x5a, sizeof buf);
    p->struct_size = old;
    EXPECT_ERR(TTFT_OK, ttft_otlp_stats(o, p));
    EXPECT_EQ_U64(2, p->pushes);
    EXPECT_EQ_INT(400, p->last_status);
    for (i = (int)old; i < (int)sizeof buf; i++) EXPECT_EQ_INT(0x5a, buf[i]);
    p->struct_size = offsetof(ttft_otlp_info, last_status);
    EXPECT_ERR(TTFT_EINVAL, ttft_otlp_stats(o, p));
  }
  EXPECT_ERR(TTFT_EINVAL, ttft_otlp_stats(NULL, &st));
  EXPECT_ERR(TTFT_EINVAL, ttft_otlp_stats(o, NULL));
  /* the receiver gone: connection failures, no bytes, said in last_error */
  rcv_free(r);
  record(reg, 1);
  EXPECT_ERR(TTFT_EIO, ttft_otlp_flush(o));
  EXPECT_ERR(TTFT_OK, ttft_otlp_stats(o, &st));
  EXPECT_EQ_U64(3, st.pushes);
  EXPECT_EQ_U64(1, st.failed);
  EXPECT_EQ_U64(bytes, st.bytes_sent);
  EXPECT_EQ_INT(0, st.last_status);
  EXPECT_CONTAINS(st.last_error, "connect: ");
  EXPECT_FALSE(strstr(st.last_error, "unknown error") != NULL);
  ttft_otlp_stop(o);
  ttft_registry_free(reg);
}

TEST(retry_after_honoured) {
  enum act s[] = {A_429_RA1, A_429_DATE, A_200};
  rcv *r = rcv_start(s, 3);
  ttft_registry *reg = ttft_registry_new(NULL);
  ttft_otlp *o = start_at(reg, r, 30000, TTFT_OTLP_CUMULATIVE);
  EXPECT_ERR(TTFT_OK, ttft_otlp_flush(o));
  EXPECT_EQ_INT(3, rcv_count(r));
  /* an attempt never comes before Retry-After (1 s; the date: at least
   * 1 s, its second boundary having been crossed since it was written) */
  EXPECT_GE_U64(r->reqs[1].t_ns - r->reqs[0].t_ns, UINT64_C(1000000000));
  EXPECT_GE_U64(r->reqs[2].t_ns - r->reqs[1].t_ns, UINT64_C(1000000000));
  ttft_otlp_stop(o);
  rcv_free(r);
  ttft_registry_free(reg);
}

TEST(timeout_bounds_retries) {
  enum act s[32];
  rcv *r;
  ttft_registry *reg = ttft_registry_new(NULL);
  ttft_otlp *o;
  uint64_t t0;
  int i, n;
  for (i = 0; i < 32; i++) s[i] = A_503;
  r = rcv_start(s, 32);
  o = start_at(reg, r, 1500, TTFT_OTLP_CUMULATIVE);
  t0 = mono();
  EXPECT_ERR(TTFT_EIO, ttft_otlp_flush(o));
  n = rcv_count(r);
  EXPECT_GE_INT(n, 2); /* 250 ms backoff, then more, within 1.5 s */
  /* no attempt starts after the push's deadline */
  EXPECT_LE_U64(r->reqs[n - 1].t_ns - t0, UINT64_C(1500000000));
  counts(o, 1, 0);

  /* a Retry-After beyond the deadline: no waiting for it */
  {
    enum act s2[] = {A_429_RA60};
    rcv_script(r, s2, 1);
  }
  EXPECT_ERR(TTFT_EIO, ttft_otlp_flush(o));
  EXPECT_EQ_INT(n + 1, rcv_count(r));

  /* an answer that never comes: one attempt, failed at the timeout */
  {
    enum act s3[] = {A_SLOW, A_SLOW, A_SLOW};
    rcv_script(r, s3, 3);
  }
  EXPECT_ERR(TTFT_EIO, ttft_otlp_flush(o));
  EXPECT_EQ_INT(n + 2, rcv_count(r));
  counts(o, 3, 0);
  {
    enum act s4[] = {A_200};
    rcv_script(r, s4, 1);
  }
  ttft_otlp_stop(o);
  rcv_free(r);
  ttft_registry_free(reg);
}

TEST(refusals) {
  ttft_registry *reg = ttft_registry_new(NULL);
  ttft_otlp_config c;
  ttft_otlp *o = (ttft_otlp *)&c;
  char msg[512];
  static const char *const bad[] = {"ftp://x:1", "http://", "http://h:99999", "http://h:0", "http://[::1",
                                    "http://a b:1", "http://u@h:1", "localhost:4318"};
  size_t i;
  ttft_otlp_config_init(&c);
  c.endpoint = "https://collector.example:4318";
  EXPECT_ERR(TTFT_EINVAL, ttft_otlp_start_msg(reg, &c, &o, msg, sizeof msg));
  EXPECT_NULL(o);
  EXPECT_CONTAINS(msg, "https://collector.example:4318");
  EXPECT_CONTAINS(msg, "https is not supported");
  EXPECT_CONTAINS(msg, "local OpenTelemetry Collector");
  EXPECT_NULL(ttft_otlp_start(reg, &c));
  c.endpoint = NULL;
  c.metrics_endpoint = "HTTPS://collector.example/v1/metrics";
  EXPECT_ERR(TTFT_EINVAL, ttft_otlp_start_msg(reg, &c, &o, msg, sizeof msg));
  EXPECT_CONTAINS(msg, "https is not supported");
  c.metrics_endpoint = NULL;
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    c.endpoint = bad[i];
    EXPECT_ERR(TTFT_EINVAL, ttft_otlp_start_msg(reg, &c, &o, msg, sizeof msg));
    EXPECT_CONTAINS(msg, bad[i]);
  }
  c.endpoint = "http://127.0.0.1:1";
  c.headers = "a=b\r\nx";
  EXPECT_ERR(TTFT_EINVAL, ttft_otlp_start_msg(reg, &c, &o, msg, sizeof msg));
  c.headers = "a=b%0D%0AEvil: 1";
  EXPECT_ERR(TTFT_EINVAL, ttft_otlp_start_msg(reg, &c, &o, msg, sizeof msg));
  EXPECT_CONTAINS(msg, "control character");
  c.headers = "Content-Type=text/plain";
  EXPECT_ERR(TTFT_EINVAL, ttft_otlp_start_msg(reg, &c, &o, msg, sizeof msg));
  c.headers = "noequals";
  EXPECT_ERR(TTFT_EINVAL, ttft_otlp_start_msg(reg, &c, &o, msg, sizeof msg));
  c.headers = "k=%zz";
  EXPECT_ERR(TTFT_EINVAL, ttft_otlp_start_msg(reg, &c, &o, msg, sizeof msg));
  c.headers = NULL;
  c.temporality = 7;
  EXPECT_ERR(TTFT_EINVAL, ttft_otlp_start_msg(reg, &c, &o, msg, sizeof msg));
  c.temporality = 0;
  c.struct_size = 8;
  EXPECT_ERR(TTFT_EINVAL, ttft_otlp_start_msg(reg, &c, &o, msg, sizeof msg));
  EXPECT_ERR(TTFT_EINVAL, ttft_otlp_start_msg(NULL, NULL, &o, msg, sizeof msg));
  EXPECT_ERR(TTFT_EINVAL, ttft_otlp_start_msg(reg, NULL, NULL, msg, sizeof msg));
  EXPECT_ERR(TTFT_EINVAL, ttft_otlp_flush(NULL));
  ttft_otlp_stop(NULL);
  ttft_otlp_config_init(NULL);
  ttft_registry_free(reg);
}

static void clear_env(void) {
  static const char *const v[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                                  "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
                                  "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
                                  "OTEL_METRIC_EXPORT_INTERVAL",
                                  "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"};
  size_t i;
  for (i = 0; i < sizeof v / sizeof v[0]; i++) unsetenv(v[i]);
}

TEST(environment) {
  ttft_otlp_config c;
  rcv *r = rcv_start(NULL, 0);
  ttft_registry *reg = ttft_registry_new(NULL);
  ttft_otlp *o;
  char url[96];
  clear_env();
  ttft_otlp_config_init(&c);
  EXPECT_EQ_U64(sizeof c, c.struct_size);
  EXPECT_EQ_U64(60000, c.interval_ms);
  EXPECT_EQ_U64(10000, c.timeout_ms);
  EXPECT_EQ_INT(TTFT_OTLP_CUMULATIVE, c.temporality);
  EXPECT_NULL(c.endpoint);
  EXPECT_NULL(c.headers);

  setenv("OTEL_METRIC_EXPORT_INTERVAL", "1234", 1);
  setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "777", 1);
  setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "DELTA", 1);
  ttft_otlp_config_init(&c);
  EXPECT_EQ_U64(1234, c.interval_ms);
  EXPECT_EQ_U64(777, c.timeout_ms);
  EXPECT_EQ_INT(TTFT_OTLP_DELTA, c.temporality);
  setenv("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "555", 1); /* the signal's own wins */
  setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", " LowMemory ", 1);
  ttft_otlp_config_init(&c);
  EXPECT_EQ_U64(555, c.timeout_ms);
  EXPECT_EQ_INT(TTFT_OTLP_LOWMEMORY, c.temporality);
  setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "Cumulative", 1);
  ttft_otlp_config_init(&c);
  EXPECT_EQ_INT(TTFT_OTLP_CUMULATIVE, c.temporality);
  /* bad values: the default stands */
  setenv("OTEL_METRIC_EXPORT_INTERVAL", "abc", 1);
  setenv("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "-5", 1);
  setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "99999999999", 1);
  setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "deltas", 1);
  ttft_otlp_config_init(&c);
  EXPECT_EQ_U64(60000, c.interval_ms);
  EXPECT_EQ_U64(10000, c.timeout_ms);
  EXPECT_EQ_INT(TTFT_OTLP_CUMULATIVE, c.temporality);
  clear_env();

  /* the base endpoint gets v1/metrics; headers percent-decoded, trimmed */
  snprintf(url, sizeof url, "http://127.0.0.1:%d/base", r->port);
  setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url, 1);
  setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key = a%20b%2Cc , x-t=1,,", 1);
  o = ttft_otlp_start(reg, NULL);
  EXPECT_NOT_NULL(o);
  EXPECT_ERR(TTFT_OK, ttft_otlp_flush(o));
  ttft_otlp_stop(o);
  EXPECT_EQ_INT(2, rcv_count(r));
  EXPECT_CONTAINS(r->reqs[0].head, "POST /base/v1/metrics HTTP/1.1\r\n");
  EXPECT_CONTAINS(r->reqs[0].head, "\r\napi-key: a b,c\r\n");
  EXPECT_CONTAINS(r->reqs[0].head, "\r\nx-t: 1\r\n");
  /* the metrics endpoint is taken as is; the metrics headers win */
  snprintf(url, sizeof url, "http://127.0.0.1:%d/custom/path", r->port);
  setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", url, 1);
  setenv("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "only=this", 1);
  o = ttft_otlp_start(reg, NULL);
  EXPECT_NOT_NULL(o);
  EXPECT_ERR(TTFT_OK, ttft_otlp_flush(o));
  ttft_otlp_stop(o);
  EXPECT_EQ_INT(4, rcv_count(r));
  EXPECT_CONTAINS(r->reqs[2].head, "POST /custom/path HTTP/1.1\r\n");
  EXPECT_CONTAINS(r->reqs[2].head, "\r\nonly: this\r\n");
  EXPECT_TRUE(strstr(r->reqs[2].head, "api-key") == NULL);
  /* a base ending in '/' gets no second one */
  unsetenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
  snprintf(url, sizeof url, "http://127.0.0.1:%d/", r->port);
  setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url, 1);
  o = ttft_otlp_start(reg, NULL);
  EXPECT_NOT_NULL(o);
  ttft_otlp_stop(o);
  EXPECT_EQ_INT(5, rcv_count(r));
  EXPECT_CONTAINS(r->reqs[4].head, "POST /v1/metrics HTTP/1.1\r\n");
  clear_env();
  rcv_free(r);
  ttft_registry_free(reg);
}

/* Delta: accepted bodies sum to the cumulative count; each starts where
 * the last accepted one ended; refused (503) and unreachable pushes lose
 * nothing and send nothing twice. */
TEST(delta_sums_to_cumulative) {
  enum act s[] = {A_200};
  rcv *r = rcv_start(s, 1);
  ttft_registry *reg = ttft_registry_new(NULL);
  ttft_otlp *o = start_at(reg, r, 1000, TTFT_OTLP_DELTA);
  uint64_t sum = 0, last_time = 0;
  int i, accepted = 0, port = r->port;
  enum act fail4[] = {A_503, A_503, A_503, A_503, A_503, A_503, A_503, A_503};

  record(reg, 3);
  EXPECT_ERR(TTFT_OK, ttft_otlp_flush(o));
  record(reg, 2);
  rcv_script(r, fail4, 8); /* every attempt within the 1 s timeout refused */
  EXPECT_ERR(TTFT_EIO, ttft_otlp_flush(o));
  record(reg, 4);
  rcv_script(r, s, 1);
  EXPECT_ERR(TTFT_OK, ttft_otlp_flush(o));
  /* the receiver goes away and comes back on the same port */
  rcv_close_listener(r);
  record(reg, 5);
  EXPECT_ERR(TTFT_EIO, ttft_otlp_flush(o)); /* connection refused, retried to the timeout */
  rcv_listen(r, port);
  EXPECT_EQ_INT(port, r->port);
  record(reg, 6);
  EXPECT_ERR(TTFT_OK, ttft_otlp_flush(o));
  record(reg, 1);
  ttft_otlp_stop(o);

  for (i = 0; i < r->n; i++) {
    ttft_points p = decode_ttft(&r->reqs[i]);
    EXPECT_TRUE(p.ok);
    EXPECT_EQ_INT(1, p.temporality); /* AGGREGATION_TEMPORALITY_DELTA */
    if (r->reqs[i].act != A_200) continue;
    if (accepted++ > 0) EXPECT_EQ_U64(last_time, p.start); /* contiguous */
    last_time = p.time;
    sum += p.count;
  }
  EXPECT_EQ_INT(4, accepted); /* 3 | 2+4 | 5+6 | 1 */
  EXPECT_EQ_U64(3 + 2 + 4 + 5 + 6 + 1, sum);
  {
    ttft_snapshot *snap = ttft_snapshot_take(reg);
    EXPECT_EQ_U64(ttft_snapshot_count(snap, TTFT_METRIC_TTFT), sum);
    ttft_snapshot_free(snap);
  }
  rcv_free(r);
  ttft_registry_free(reg);
}

/* Cumulative: a failed push loses nothing, the next carries the totals. */
TEST(cumulative_after_failure) {
  enum act s[] = {A_200, A_400, A_200};
  rcv *r = rcv_start(s, 3);
  ttft_registry *reg = ttft_registry_new(NULL);
  ttft_otlp *o = start_at(reg, r, 1000, TTFT_OTLP_CUMULATIVE);
  record(reg, 2);
  EXPECT_ERR(TTFT_OK, ttft_otlp_flush(o));
  record(reg, 3);
  EXPECT_ERR(TTFT_EIO, ttft_otlp_flush(o));
  record(reg, 4);
  EXPECT_ERR(TTFT_OK, ttft_otlp_flush(o));
  ttft_otlp_stop(o);
  EXPECT_EQ_INT(4, rcv_count(r));
  EXPECT_EQ_U64(2, decode_ttft(&r->reqs[0]).count);
  EXPECT_EQ_U64(5, decode_ttft(&r->reqs[1]).count);
  EXPECT_EQ_U64(9, decode_ttft(&r->reqs[2]).count);
  EXPECT_EQ_INT(2, decode_ttft(&r->reqs[2]).temporality); /* CUMULATIVE */
  rcv_free(r);
  ttft_registry_free(reg);
}

/* A child forked while the pusher runs frees its copy: no push, no join,
 * the parent's pusher goes on. */
TEST(fork_child_stops_its_copy) {
  rcv *r = rcv_start(NULL, 0);
  ttft_registry *reg = ttft_registry_new(NULL);
  ttft_otlp *o = start_at(reg, r, 5000, TTFT_OTLP_DELTA);
  int i;
  record(reg, 1);
  EXPECT_ERR(TTFT_OK, ttft_otlp_flush(o)); /* the child inherits a `last` */
  for (i = 0; i < 4; i++) {
    int st = -1;
    pid_t pid = fork();
    if (pid == 0) {
      int bad = ttft_otlp_flush(o) != TTFT_EINVAL;
      ttft_otlp_stop(o);
      _exit(bad);
    }
    EXPECT_GT_INT(pid, 0);
    waitpid(pid, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  EXPECT_EQ_INT(1, rcv_count(r)); /* the children pushed nothing */
  record(reg, 2);
  EXPECT_ERR(TTFT_OK, ttft_otlp_flush(o));
  EXPECT_EQ_U64(2, decode_ttft(&r->reqs[1]).count);
  ttft_otlp_stop(o);
  EXPECT_EQ_INT(3, rcv_count(r));
  rcv_free(r);
  ttft_registry_free(reg);
}

/* A stop during a retry wait (Retry-After: 60, timeout 120 s) ends the
 * wait: the last push follows at once. Were the wait sat out, the retry
 * would be a third request before the last push. */
TEST(stop_ends_a_retry_wait) {
  enum act s[] = {A_429_RA60};
  rcv *r = rcv_start(s, 1);
  ttft_registry *reg = ttft_registry_new(NULL);
  ttft_otlp_config c;
  ttft_otlp *o;
  char url[64];
  ttft_otlp_config_init(&c);
  snprintf(url, sizeof url, "http://127.0.0.1:%d", r->port);
  c.endpoint = url;
  c.interval_ms = 20; /* the first periodic push meets the 429 */
  c.timeout_ms = 120000;
  o = ttft_otlp_start(reg, &c);
  EXPECT_NOT_NULL(o);
  while (rcv_count(r) < 1) usleep(1000);
  ttft_otlp_stop(o);
  EXPECT_EQ_INT(2, rcv_count(r));
  EXPECT_EQ_INT(A_429_RA60, r->reqs[0].act);
  EXPECT_EQ_INT(A_200, r->reqs[1].act);
  rcv_free(r);
  ttft_registry_free(reg);
}

/* The parsers alone (white-box, static library): Retry-After's two forms,
 * URLs (base and whole, v6, default port), header lines. */
TEST(parsers) {
#if defined(TTFT_TEST_STATIC)
  uint64_t ns = 7;
  ttft__otlp_url u;
  const char *why = NULL;
  char hb[256], whyb[160];
  ttft__sb sb;
  const int64_t now = 784111777; /* Sun, 06 Nov 1994 08:49:37 GMT */
  EXPECT_EQ_INT(0, ttft__otlp_retry_after(" 3 ", 3, now, &ns));
  EXPECT_EQ_U64(UINT64_C(3000000000), ns);
  EXPECT_EQ_INT(0, ttft__otlp_retry_after("Sun, 06 Nov 1994 08:49:39 GMT", 29, now, &ns));
  EXPECT_EQ_U64(UINT64_C(2000000000), ns);
  EXPECT_EQ_INT(0, ttft__otlp_retry_after("Sun, 06 Nov 1994 08:49:30 GMT", 29, now, &ns));
  EXPECT_EQ_U64(0, ns); /* in the past: now */
  EXPECT_EQ_INT(0, ttft__otlp_retry_after("Thu, 01 Jan 1970 00:00:10 GMT", 29, 0, &ns));
  EXPECT_EQ_U64(UINT64_C(10000000000), ns);
  EXPECT_EQ_INT(0, ttft__otlp_retry_after("Tue, 29 Feb 2028 12:00:00 GMT", 29, 1835438400 - 5, &ns));
  EXPECT_EQ_U64(UINT64_C(5000000000), ns);
  EXPECT_EQ_INT(-1, ttft__otlp_retry_after("soon", 4, now, &ns));
  EXPECT_EQ_INT(-1, ttft__otlp_retry_after("-1", 2, now, &ns));
  EXPECT_EQ_INT(-1, ttft__otlp_retry_after("1.5", 3, now, &ns));
  EXPECT_EQ_INT(-1, ttft__otlp_retry_after("Sun, 06 Foo 1994 08:49:39 GMT", 29, now, &ns));
  EXPECT_EQ_INT(-1, ttft__otlp_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", 30, now, &ns));
  EXPECT_EQ_INT(-1, ttft__otlp_retry_after("", 0, now, &ns));

  EXPECT_EQ_INT(0, ttft__otlp_url_parse("http://collector", 1, &u, &why));
  EXPECT_STREQ("collector", u.host);
  EXPECT_STREQ("80", u.port);
  EXPECT_STREQ("/v1/metrics", u.path);
  EXPECT_STREQ("collector", u.authority);
  EXPECT_EQ_INT(0, ttft__otlp_url_parse("http://[::1]:4318/otlp", 1, &u, &why));
  EXPECT_STREQ("::1", u.host);
  EXPECT_STREQ("4318", u.port);
  EXPECT_STREQ("/otlp/v1/metrics", u.path);
  EXPECT_STREQ("[::1]:4318", u.authority);
  EXPECT_EQ_INT(0, ttft__otlp_url_parse("http://10.0.0.1:4318/x/y?tenant=a#frag", 0, &u, &why));
  EXPECT_STREQ("/x/y?tenant=a", u.path);
  EXPECT_EQ_INT(-1, ttft__otlp_url_parse("http://h:4318/b?q=1", 1, &u, &why));
  EXPECT_EQ_INT(-1, ttft__otlp_url_parse("http://h:65536", 1, &u, &why));
  EXPECT_EQ_INT(-1, ttft__otlp_url_parse("http://h:12x", 1, &u, &why));

  ttft__sb_init(&sb, hb, sizeof hb);
  EXPECT_EQ_INT(0, ttft__otlp_headers_parse(" a = 1 ,, b=%41%2c%7e ,c= ", &sb, whyb, sizeof whyb));
  EXPECT_STREQ("a: 1\r\nb: A,~\r\nc: \r\n", hb);
  ttft__sb_init(&sb, hb, sizeof hb);
  EXPECT_EQ_INT(-1, ttft__otlp_headers_parse("a b=1", &sb, whyb, sizeof whyb));
  EXPECT_EQ_INT(-1, ttft__otlp_headers_parse("=1", &sb, whyb, sizeof whyb));
  EXPECT_EQ_INT(-1, ttft__otlp_headers_parse("a=%0a", &sb, whyb, sizeof whyb));
  EXPECT_EQ_INT(-1, ttft__otlp_headers_parse("a=%4", &sb, whyb, sizeof whyb));
  EXPECT_EQ_INT(-1, ttft__otlp_headers_parse("HOST=x", &sb, whyb, sizeof whyb));

  EXPECT_TRUE(ttft__otlp_retryable(429) && ttft__otlp_retryable(502) && ttft__otlp_retryable(503) &&
              ttft__otlp_retryable(504));
  EXPECT_FALSE(ttft__otlp_retryable(500) || ttft__otlp_retryable(400) || ttft__otlp_retryable(408) ||
               ttft__otlp_retryable(501) || ttft__otlp_retryable(200));
#else
  /* the parsers are hidden: the static build tests them; the shared
   * library must not export them */
  EXPECT_NULL(dlsym(RTLD_DEFAULT, "ttft__otlp_retry_after"));
  EXPECT_NULL(dlsym(RTLD_DEFAULT, "ttft__otlp_post"));
  EXPECT_NOT_NULL(dlsym(RTLD_DEFAULT, "ttft_otlp_start"));
#endif
}

TU_MAIN()
