/*
 * otlp_push_e2e.c — the C half of the pusher's end-to-end proof
 * (tests/otlp/run.sh push, push_check.js): for each temporality
 * (cumulative, delta) it starts tests/otlp/receiver.js on loopback (port 0,
 * the printed port), records scripted timelines with exact times into a
 * fresh registry in five batches and pushes each with ttft_otlp_flush
 * (the last with ttft_otlp_stop) while the receiver answers as scripted:
 *
 *   batch 1  429 (Retry-After: 1), then 200       flush: TTFT_OK
 *   batch 2  503, connection closed, then 200     flush: TTFT_OK
 *   batch 3  the receiver is stopped              flush: TTFT_EIO (failed)
 *   batch 4  restarted on the same port: 503, 200 flush: TTFT_OK
 *   batch 5  200                                  ttft_otlp_stop's last push
 *
 * and writes into DIR/<cumulative|delta>/: requests.jsonl (the receiver's
 * decoded requests, both runs), final.bin (the final snapshot as a
 * cumulative OTLP request), expected.json (the final snapshot's exact
 * counts, sums and counters per class, the registry's creation window in
 * wall-clock ns, the flush outcomes). push_check.js asserts them.
 *
 *   otlp_push_e2e NODE RECEIVER_JS DIR
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ttft.h"

#define MS 1000000ull

static const char *node_bin, *receiver_js;

typedef struct receiver {
  pid_t pid;
  int port;
} receiver;

/* start receiver.js (port 0: any) appending to out; wait for its
 * "listening <port>" line (at most 20 s: npm's first require can be slow) */
static int receiver_start(receiver *rv, int port, const char *script, const char *out) {
  int fd[2];
  char portarg[16];
  if (pipe(fd) != 0) return -1;
  snprintf(portarg, sizeof portarg, "%d", port);
  rv->pid = fork();
  if (rv->pid < 0) return -1;
  if (rv->pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    close(fd[1]);
    execl(node_bin, node_bin, receiver_js, "--port", portarg, "--script", script, "--out", out,
          (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  char line[64];
  size_t n = 0;
  while (n + 1 < sizeof line) {
    struct pollfd p = {fd[0], POLLIN, 0};
    if (poll(&p, 1, 20000) <= 0) break;
    ssize_t k = read(fd[0], line + n, 1);
    if (k <= 0 || line[n] == '\n') break;
    n++;
  }
  line[n] = '\0';
  close(fd[0]);
  if (sscanf(line, "listening %d", &rv->port) != 1) {
    fprintf(stderr, "otlp_push_e2e: receiver did not start (\"%s\")\n", line);
    kill(rv->pid, SIGKILL);
    waitpid(rv->pid, NULL, 0);
    return -1;
  }
  return 0;
}

static int receiver_stop(receiver *rv) {
  int st = 0;
  kill(rv->pid, SIGTERM);
  if (waitpid(rv->pid, &st, 0) < 0) return -1;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static uint64_t unix_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* batch b: 6 + b streams over the classes, exact times from t0: first
 * token after 30 + 17 k (mod 400) ms, 2 + k % 5 more tokens 12 + k % 9 ms
 * apart, one stall of 400 ms every fourth stream, every seventh cancelled */
static int record_batch(ttft_registry *r, const int *cls, int b) {
  uint64_t t = ttft_now_ns();
  for (int i = 0; i < 6 + b; i++) {
    int k = b * 31 + i;
    ttft_request q;
    ttft_request_init(&q);
    q.class_id = cls[k % 2];
    q.prompt_tokens = 50 + (uint32_t)k;
    ttft_seq s = ttft_begin_ex(r, &q, t);
    if (!s) return -1;
    t += (30 + (uint64_t)(k * 17 % 400)) * MS;
    if (ttft_token_emitted(r, s, 1, t) != TTFT_OK) return -1;
    for (int j = 0; j < 2 + k % 5; j++) {
      t += (j == 1 && k % 4 == 0 ? 400 : 12 + (uint64_t)(k % 9)) * MS;
      if (ttft_token_emitted(r, s, 1 + (uint32_t)(j % 2), t) != TTFT_OK) return -1;
    }
    if (ttft_stream_end(r, s, k % 7 == 0 ? TTFT_CANCELLED : TTFT_COMPLETED, t + MS) != TTFT_OK)
      return -1;
  }
  return 0;
}

static int write_final(const char *dir, const ttft_snapshot *s, int flush_rc[4],
                       uint64_t created_lo, uint64_t created_hi) {
  char path[4200];
  long n = ttft_snapshot_format(s, TTFT_FORMAT_OTLP_PROTOBUF, NULL, 0);
  char *b = n > 0 ? malloc((size_t)n + 1) : NULL;
  if (!b || ttft_snapshot_format(s, TTFT_FORMAT_OTLP_PROTOBUF, b, (size_t)n + 1) != n) return -1;
  snprintf(path, sizeof path, "%s/final.bin", dir);
  FILE *f = fopen(path, "wb");
  int bad = !f || fwrite(b, 1, (size_t)n, f) != (size_t)n;
  free(b);
  if (!f || (fclose(f) != 0) | bad) return -1;

  snprintf(path, sizeof path, "%s/expected.json", dir);
  if (!(f = fopen(path, "w"))) return -1;
  fprintf(f, "{\"created_lo\": \"%" PRIu64 "\", \"created_hi\": \"%" PRIu64 "\", \"flush\": [%d, %d, %d, %d],\n",
          created_lo, created_hi, flush_rc[0], flush_rc[1], flush_rc[2], flush_rc[3]);
  fprintf(f, " \"classes\": {");
  static const ttft_metric hist[] = {TTFT_METRIC_TTFT, TTFT_METRIC_TPOT, TTFT_METRIC_E2E, TTFT_METRIC_ITL};
  for (int c = 1; c < ttft_snapshot_classes(s); c++) {
    fprintf(f, "%s\n  \"%s\": {", c > 1 ? "," : "", ttft_snapshot_class_name(s, c));
    for (size_t m = 0; m < sizeof hist / sizeof hist[0]; m++)
      fprintf(f, "\"%s\": [\"%" PRIu64 "\", \"%" PRIu64 "\"], ", ttft_metric_name(hist[m]),
              ttft_snapshot_class_count(s, c, hist[m]), ttft_snapshot_class_sum(s, c, hist[m]));
    for (int k = 0; k < TTFT_COUNTER_COUNT_; k++)
      fprintf(f, "%s\"%s\": \"%" PRIu64 "\"", k ? ", " : "", ttft_counter_name((ttft_counter)k),
              ttft_snapshot_class_counter(s, c, (ttft_counter)k));
    fprintf(f, "}");
  }
  fprintf(f, "\n }}\n");
  return fclose(f) == 0 ? 0 : -1;
}

static int run(const char *top, int temporality) {
  char dir[2048], out[2100];
  snprintf(dir, sizeof dir, "%s/%s", top, temporality == TTFT_OTLP_DELTA ? "delta" : "cumulative");
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) return -1;
  snprintf(out, sizeof out, "%s/requests.jsonl", dir);
  unlink(out);

  uint64_t created_lo = unix_ns();
  ttft_registry *r = ttft_registry_new(NULL);
  uint64_t created_hi = unix_ns();
  if (!r) return -1;
  int cls[2] = {ttft_class_add(r, "chat", NULL), ttft_class_add(r, "batch", NULL)};
  if (cls[0] < 0 || cls[1] < 0) return -1;

  receiver rv;
  if (receiver_start(&rv, 0, "429:1,200,503,close", out) != 0) return -1;
  char ep[64], msg[256];
  snprintf(ep, sizeof ep, "http://127.0.0.1:%d", rv.port);
  ttft_otlp_config c;
  ttft_otlp_config_init(&c);
  c.endpoint = ep;
  c.service_name = "e2e";
  c.resource_attributes = "";
  c.headers = "";
  c.interval_ms = 3600000; /* pushes only when asked */
  c.timeout_ms = 2500;
  c.temporality = temporality;
  ttft_otlp *o = NULL;
  if (ttft_otlp_start_msg(r, &c, &o, msg, sizeof msg) != TTFT_OK) {
    fprintf(stderr, "otlp_push_e2e: %s\n", msg);
    receiver_stop(&rv);
    return -1;
  }
  int rc[4], bad = 0;
  bad |= record_batch(r, cls, 1);
  rc[0] = ttft_otlp_flush(o); /* 429, Retry-After 1 s, 200 */
  bad |= record_batch(r, cls, 2);
  rc[1] = ttft_otlp_flush(o); /* 503, closed, 200 */
  bad |= receiver_stop(&rv);
  bad |= record_batch(r, cls, 3);
  rc[2] = ttft_otlp_flush(o); /* refused until the timeout: failed */
  int port = rv.port;
  bad |= receiver_start(&rv, port, "503", out);
  bad |= rv.port != port;
  bad |= record_batch(r, cls, 4);
  rc[3] = ttft_otlp_flush(o); /* 503, 200: carries batches 3 and 4 */
  bad |= record_batch(r, cls, 5);
  ttft_snapshot *fin = ttft_snapshot_take(r);
  ttft_otlp_stop(o); /* the last push: batch 5 */
  bad |= receiver_stop(&rv);
  bad |= !fin || write_final(dir, fin, rc, created_lo, created_hi);
  ttft_snapshot_free(fin);
  ttft_registry_free(r);
  return bad ? -1 : 0;
}

int main(int argc, char **argv) {
  if (argc != 4 || strlen(argv[3]) > 1024) {
    fprintf(stderr, "usage: otlp_push_e2e NODE RECEIVER_JS DIR\n");
    return 2;
  }
  node_bin = argv[1];
  receiver_js = argv[2];
  if (run(argv[3], TTFT_OTLP_CUMULATIVE) != 0 || run(argv[3], TTFT_OTLP_DELTA) != 0) {
    fprintf(stderr, "otlp_push_e2e: failed\n");
    return 1;
  }
  return 0;
}
