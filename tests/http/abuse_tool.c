/*
 * abuse_tool.c — the two C halves of tests/http/abuse.py (public API and
 * POSIX only, so the same file builds against any libttft, to compare
 * versions):
 *
 *   http_abuse_tool serve [CLASSES]
 *       a registry with CLASSES classes (default 64) that all saw traffic,
 *       so that /metrics is large, served by ttft_http_start on
 *       127.0.0.1:<free port>; prints "port <p> pid <pid>", then serves
 *       until stdin says "quit" or closes.
 *   http_abuse_tool get PORT N GAP_MS TIMEOUT_MS
 *       N times: a new connection, GET /metrics, read to the end; prints
 *       "<microseconds> <status> <body bytes> <complete 0|1>" per GET
 *       (status -1: nothing within TIMEOUT_MS), GAP_MS apart.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ttft.h"

static int serve(int classes) {
  int k, i, rc;
  char line[64];
  ttft_config cfg;
  ttft_registry *reg;
  ttft_http *srv = NULL;
  uint64_t t = 1000000000ull;

  ttft_config_init(&cfg);
  cfg.max_classes = (uint32_t)classes + 1;
  reg = ttft_registry_new(&cfg);
  if (!reg) {
    fprintf(stderr, "abuse_tool: ttft_registry_new failed\n");
    return 1;
  }
  for (k = 0; k <= classes; k++) {
    ttft_request q;
    char name[32];
    int id = 0;
    if (k > 0) {
      snprintf(name, sizeof name, "class_%03d", k - 1);
      id = ttft_class_add(reg, name, NULL);
      if (id < 0) break;
    }
    ttft_request_init(&q);
    q.class_id = id;
    q.prompt_tokens = 100u + (uint32_t)k * 500u;
    for (i = 0; i < 50; i++) {
      ttft_seq s = ttft_begin_ex(reg, &q, t);
      ttft_token_emitted(reg, s, 1, t + 1000000ull * (uint64_t)(1 + (i * 7919) % 900));
      ttft_token_emitted(reg, s, 3, t + 950000000ull + (uint64_t)i * 10000ull);
      ttft_stream_end(reg, s, i % 7 ? TTFT_COMPLETED : TTFT_CANCELLED, t + 990000000ull);
      t += 1000000ull;
    }
  }
  rc = ttft_http_start(reg, "127.0.0.1:0", &srv);
  if (rc != TTFT_OK) {
    fprintf(stderr, "abuse_tool: ttft_http_start: %s\n", ttft_strerror(rc));
    return 1;
  }
  printf("port %d pid %ld\n", ttft_http_port(srv), (long)getpid());
  fflush(stdout);
  while (fgets(line, sizeof line, stdin) && strncmp(line, "quit", 4) != 0) {}
  ttft_http_stop(srv);
  ttft_registry_free(reg);
  return 0;
}

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* One GET; prints its line. */
static void get_one(int port, int timeout_ms, char *buf, size_t cap) {
  static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  struct sockaddr_in a;
  uint64_t t0 = now_us(), end = t0 + (uint64_t)timeout_ms * 1000u;
  size_t len = 0;
  int fd = socket(AF_INET, SOCK_STREAM, 0), status = -1, eof = 0;
  long body = -1, clen = -1;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof req - 1)) {
    for (;;) {
      struct pollfd p = {fd, POLLIN, 0};
      uint64_t t = now_us();
      ssize_t k;
      if (t >= end || len + 1 >= cap) break;
      if (poll(&p, 1, (int)((end - t) / 1000u) + 1) <= 0) continue;
      k = recv(fd, buf + len, cap - 1 - len, 0);
      if (k > 0) {
        len += (size_t)k;
      } else {
        eof = k == 0;
        if (k == 0 || errno != EINTR) break;
      }
    }
  }
  t0 = now_us() - t0;
  if (fd >= 0) close(fd);
  buf[len] = '\0';
  if (len >= 12 && strncmp(buf, "HTTP/1.1 ", 9) == 0) {
    const char *e = strstr(buf, "\r\n\r\n"), *cl = strcasestr(buf, "\r\nContent-Length:");
    status = atoi(buf + 9);
    if (e) body = (long)(len - (size_t)(e + 4 - buf));
    if (cl && e && cl < e) clen = atol(cl + 17);
  }
  printf("%llu %d %ld %d\n", (unsigned long long)t0, status, body, eof && body >= 0 && body == clen);
  fflush(stdout);
}

static int get(int port, int n, int gap_ms, int timeout_ms) {
  size_t cap = (size_t)256 << 20;
  char *buf = malloc(cap);
  int i;
  if (!buf) return 1;
  for (i = 0; i < n; i++) {
    get_one(port, timeout_ms, buf, cap);
    if (gap_ms > 0) usleep((useconds_t)gap_ms * 1000u);
  }
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "serve") == 0) {
    int classes = argc > 2 ? atoi(argv[2]) : 64;
    if (classes >= 0 && classes <= 1023) return serve(classes);
  } else if (argc == 6 && strcmp(argv[1], "get") == 0) {
    return get(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
  }
  fprintf(stderr, "usage: http_abuse_tool serve [CLASSES 0..1023]\n"
                  "       http_abuse_tool get PORT N GAP_MS TIMEOUT_MS\n");
  return 2;
}
