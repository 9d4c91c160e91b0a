/* top_server.c — the endpoint tests/tools/test_top.sh watches with
 * ttft-top: a registry with a known workload, served with ttft_http_start.
 *
 *   top_server --port N [--ack FILE]      serve; prints "port P" and flushes
 *   top_server --garbage MODE --port N    a fake endpoint: MODE text (an
 *                                         HTTP 200 with 5 bytes that are no
 *                                         snapshot), newer (a snapshot whose
 *                                         version byte says 9), silent
 *                                         (accepts, never answers)
 *
 * Workload A, recorded at start (caller timestamps in the past):
 *   class chat (TTFT SLO 200 ms): 10 completed requests of 8 tokens, one
 *     of them "req-slow-42" with a 3 s TTFT and a 900 ms gap while it was
 *     PREEMPTED (a stall, cause preempted); plus 1 request left in flight
 *     (begun, one token): chat begun 11, completed 10, stalls 1, in flight 1
 *   class batch: 5 completed requests of 4 tokens
 * Workload B, recorded on SIGUSR1 (then FILE gets "B"):
 *   chat: 6 completed; batch: 3 completed and 1 cancelled after a token.
 * Engine steps in A: 2 with prefill, 3 + 45 without (the 45 run while
 * req-slow-42 is preempted). SIGTERM/SIGINT: exit 0. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ttft.h"

#define MS UINT64_C(1000000)

static volatile sig_atomic_t g_stop, g_b;
static void on_stop(int s) {
  (void)s;
  g_stop = 1;
}
static void on_usr1(int s) {
  (void)s;
  g_b = 1;
}

static void request(ttft_registry *r, int cls, const char *id, uint64_t t, uint64_t ttft,
                    int tokens, uint64_t gap, int stall_at, ttft_status end) {
  ttft_request q;
  ttft_request_init(&q);
  q.class_id = cls;
  q.request_id = id;
  ttft_seq s = ttft_begin_ex(r, &q, t);
  t += ttft;
  ttft_token_emitted(r, s, 1, t);
  for (int i = 1; i < tokens; i++) {
    if (i == stall_at) { /* the engine keeps stepping without it: 45 steps of 20 ms */
      ttft_mark(r, s, TTFT_PHASE_PREEMPTED, t + 10 * MS);
      for (int k = 0; k < 45; k++)
        ttft_engine_step(r, NULL, t + (uint64_t)k * 20 * MS, t + (uint64_t)(k + 1) * 20 * MS);
      ttft_mark(r, s, TTFT_PHASE_RESUMED, t + 880 * MS);
      t += 900 * MS;
    } else {
      t += gap;
    }
    ttft_token_emitted(r, s, 1, t);
  }
  ttft_stream_end(r, s, end, t + MS);
}

static void workload_a(ttft_registry *r, int chat, int batch, uint64_t t) {
  ttft_step_info si;
  ttft_step_info_init(&si);
  for (int k = 0; k < 5; k++) {
    si.prefill_tokens = k < 2 ? 512u : 0u;
    si.decode_seqs = 4;
    ttft_engine_step(r, &si, t + (uint64_t)k * 100 * MS, t + (uint64_t)k * 100 * MS + (k < 2 ? 40 : 15) * MS);
  }
  t += MS * 1000;
  char id[32];
  for (int i = 0; i < 10; i++) {
    snprintf(id, sizeof id, "chat-%d", i);
    if (i == 4)
      request(r, chat, "req-slow-42", t, 3000 * MS, 8, 20 * MS, 3, TTFT_COMPLETED);
    else request(r, chat, id, t, (50 + (uint64_t)i * 10) * MS, 8, 20 * MS, -1, TTFT_COMPLETED);
    t += 500 * MS;
  }
  for (int i = 0; i < 5; i++) {
    snprintf(id, sizeof id, "batch-%d", i);
    request(r, batch, id, t, 100 * MS, 4, 30 * MS, -1, TTFT_COMPLETED);
    t += 500 * MS;
  }
  ttft_request q;
  ttft_request_init(&q);
  q.class_id = chat;
  q.request_id = "chat-live";
  ttft_seq s = ttft_begin_ex(r, &q, t);
  ttft_token_emitted(r, s, 1, t + 60 * MS);
}

static void workload_b(ttft_registry *r, int chat, int batch) {
  uint64_t t = ttft_registry_now_ns(r) - 20000 * MS;
  char id[32];
  for (int i = 0; i < 6; i++) {
    snprintf(id, sizeof id, "chat-b%d", i);
    request(r, chat, id, t, 70 * MS, 6, 20 * MS, -1, TTFT_COMPLETED);
    t += 300 * MS;
  }
  for (int i = 0; i < 4; i++) {
    snprintf(id, sizeof id, "batch-b%d", i);
    request(r, batch, id, t, 90 * MS, 3, 25 * MS, -1, i == 3 ? TTFT_CANCELLED : TTFT_COMPLETED);
    t += 300 * MS;
  }
}

static int fake(const char *mode, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0) {
    perror("top_server: bind");
    return 1;
  }
  socklen_t al = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &al);
  printf("port %d\n", ntohs(a.sin_port));
  fflush(stdout);
  int held[64], nheld = 0;
  while (!g_stop) {
    int c = accept(fd, NULL, NULL);
    if (c < 0) continue;
    char req[4096];
    if (recv(c, req, sizeof req, 0) < 0) {
      close(c);
      continue;
    }
    if (!strcmp(mode, "silent")) {
      if (nheld < 64) held[nheld++] = c;
      else close(c);
      continue;
    }
    const char *resp = !strcmp(mode, "newer")
                           ? "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                             "Content-Length: 16\r\nConnection: close\r\n\r\nTTFS\x09\0\0\0\0\0\0\0\0\0\0\0"
                           : "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
    size_t n = !strcmp(mode, "newer") ? strlen(resp) + 11 : strlen(resp);
    if (send(c, resp, n, MSG_NOSIGNAL) < 0) perror("top_server: send");
    close(c);
  }
  for (int i = 0; i < nheld; i++) close(held[i]);
  close(fd);
  return 0;
}

int main(int argc, char **argv) {
  int port = 0;
  const char *ack = NULL, *garbage = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--ack")) ack = argv[i + 1];
    else if (!strcmp(argv[i], "--garbage")) garbage = argv[i + 1];
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);
  if (garbage) return fake(garbage, port);

  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.stall_threshold_ns = 500 * MS;
  ttft_registry *r = ttft_registry_new(&cfg);
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.ttft_ns = 200 * MS;
  int chat = ttft_class_add(r, "chat", &slo);
  ttft_slo_init(&slo);
  slo.ttft_ns = 1000 * MS;
  int batch = ttft_class_add(r, "batch", &slo);
  if (!r || chat < 0 || batch < 0) return 1;
  workload_a(r, chat, batch, ttft_registry_now_ns(r) - 60000 * MS);
  ttft_http *srv = NULL;
  char addr[64], msg[200];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  if (ttft_http_start_msg(r, addr, &srv, msg, sizeof msg) != TTFT_OK) {
    fprintf(stderr, "top_server: %s\n", msg);
    return 1;
  }
  printf("port %d\n", ttft_http_port(srv));
  fflush(stdout);
  while (!g_stop) {
    if (g_b) {
      g_b = 0;
      workload_b(r, chat, batch);
      if (ack) {
        FILE *f = fopen(ack, "w");
        if (f) {
          fputs("B\n", f);
          fclose(f);
        }
      }
    }
    usleep(20000);
  }
  ttft_http_stop(srv);
  ttft_registry_free(r);
  return 0;
}
