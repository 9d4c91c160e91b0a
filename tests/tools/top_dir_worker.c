/* top_dir_worker.c — one process of the shared directory that
 * tests/tools/test_top_dir.sh watches with `ttft-top --dir`: a registry
 * with shared_dir, a known workload, published, then idle until told to go.
 *
 *   top_dir_worker DIR NAME WORKLOAD READY
 *
 * records WORKLOAD (a, b, c or d below) with caller timestamps in the
 * past, publishes (ttft_publish), writes "ready" into the file READY and
 * waits; SIGTERM/SIGINT: ttft_registry_free (a last publish), exit 0.
 * The background thread publishes every 50 ms meanwhile (nothing changes).
 * Classes are added in a different order in every process, so the gather
 * must merge them by name. Chat's TTFT SLO is 200 ms everywhere.
 *
 *   a (api-0): chat 4 completed (TTFT 80..110 ms, 6 tokens);
 *              batch 2 completed (4 tokens)
 *   b (api-1): chat 2 completed (6 tokens) + "req-slow-7" completed
 *              (TTFT 2.5 s, 8 tokens, a 900 ms gap while PREEMPTED: one
 *              stall, cause preempted: 45 engine steps without prefill
 *              run meanwhile) + 1 left in flight (1 token);
 *              embed 2 completed (3 tokens) — a class only b has
 *   c (dp-0):  batch 5 completed (4 tokens) + 1 cancelled after a token
 *   d (dp-1):  rerank 3 completed (2 tokens) — a class only d has;
 *              chat 2 completed (6 tokens)
 *
 * Union of a, b, c: chat begun 8, completed 7, in flight 1, tokens 45,
 * stalls 1 (preempted), SLO 6/7; batch begun 8, completed 7, cancelled 1,
 * tokens 29; embed begun 2, completed 2. d adds chat 2 and rerank 3. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ttft.h"

#define MS UINT64_C(1000000)

static volatile sig_atomic_t g_stop;
static void on_stop(int s) {
  (void)s;
  g_stop = 1;
}

/* One request: TTFT ttft, then tokens-1 more every gap; at token stall_at
 * (if >= 1) a 900 ms gap while preempted instead. end < 0: left open. */
static void request(ttft_registry *r, int cls, const char *id, uint64_t *tp, uint64_t ttft,
                    int tokens, uint64_t gap, int stall_at, int end) {
  uint64_t t = *tp;
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
  if (end >= 0) ttft_stream_end(r, s, (ttft_status)end, t + MS);
  *tp = t + 100 * MS;
}

static int add(ttft_registry *r, const char *name, uint64_t ttft_slo_ns) {
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.ttft_ns = ttft_slo_ns;
  int id = ttft_class_add(r, name, &slo);
  if (id < 0) {
    fprintf(stderr, "top_dir_worker: class %s: %s\n", name, ttft_strerror(id));
    exit(1);
  }
  return id;
}

static int record(ttft_registry *r, char w) {
  uint64_t t = ttft_registry_now_ns(r) - 30000 * MS;
  char id[32];
  int chat, batch, other;
  switch (w) {
  case 'a':
    chat = add(r, "chat", 200 * MS);
    batch = add(r, "batch", 0);
    for (int i = 0; i < 4; i++) {
      snprintf(id, sizeof id, "a-chat-%d", i);
      request(r, chat, id, &t, (80 + (uint64_t)i * 10) * MS, 6, 20 * MS, 0, TTFT_COMPLETED);
    }
    for (int i = 0; i < 2; i++) {
      snprintf(id, sizeof id, "a-batch-%d", i);
      request(r, batch, id, &t, 300 * MS, 4, 30 * MS, 0, TTFT_COMPLETED);
    }
    return 0;
  case 'b':
    other = add(r, "embed", 0);
    chat = add(r, "chat", 200 * MS);
    for (int i = 0; i < 2; i++) {
      snprintf(id, sizeof id, "b-chat-%d", i);
      request(r, chat, id, &t, 120 * MS, 6, 20 * MS, 0, TTFT_COMPLETED);
    }
    request(r, chat, "req-slow-7", &t, 2500 * MS, 8, 20 * MS, 3, TTFT_COMPLETED);
    for (int i = 0; i < 2; i++) {
      snprintf(id, sizeof id, "b-embed-%d", i);
      request(r, other, id, &t, 40 * MS, 3, 5 * MS, 0, TTFT_COMPLETED);
    }
    request(r, chat, "b-chat-live", &t, 60 * MS, 1, 0, 0, -1);
    return 0;
  case 'c':
    batch = add(r, "batch", 0);
    for (int i = 0; i < 5; i++) {
      snprintf(id, sizeof id, "c-batch-%d", i);
      request(r, batch, id, &t, 250 * MS, 4, 30 * MS, 0, TTFT_COMPLETED);
    }
    request(r, batch, "c-batch-cancel", &t, 250 * MS, 1, 0, 0, TTFT_CANCELLED);
    return 0;
  case 'd':
    other = add(r, "rerank", 0);
    chat = add(r, "chat", 200 * MS);
    for (int i = 0; i < 3; i++) {
      snprintf(id, sizeof id, "d-rerank-%d", i);
      request(r, other, id, &t, 30 * MS, 2, 5 * MS, 0, TTFT_COMPLETED);
    }
    for (int i = 0; i < 2; i++) {
      snprintf(id, sizeof id, "d-chat-%d", i);
      request(r, chat, id, &t, 90 * MS, 6, 20 * MS, 0, TTFT_COMPLETED);
    }
    return 0;
  default:
    return -1;
  }
}

int main(int argc, char **argv) {
  if (argc != 5 || strlen(argv[3]) != 1) {
    fprintf(stderr, "usage: top_dir_worker DIR NAME a|b|c|d READY\n");
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);

  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.stall_threshold_ns = 500 * MS;
  cfg.shared_dir = argv[1];
  cfg.process_name = argv[2];
  cfg.publish_interval_ms = 50;
  char why[256];
  if (ttft_config_check(&cfg, why, sizeof why) != TTFT_OK) {
    fprintf(stderr, "top_dir_worker: %s\n", why);
    return 1;
  }
  ttft_registry *r = ttft_registry_new(&cfg);
  if (!r) {
    fprintf(stderr, "top_dir_worker: cannot create the registry\n");
    return 1;
  }
  if (record(r, argv[3][0]) != 0) {
    fprintf(stderr, "top_dir_worker: unknown workload %s\n", argv[3]);
    return 2;
  }
  int rc = ttft_publish(r);
  if (rc != TTFT_OK) {
    fprintf(stderr, "top_dir_worker: publish: %s\n", ttft_strerror(rc));
    return 1;
  }
  FILE *f = fopen(argv[4], "w");
  if (!f || fputs("ready\n", f) < 0 || fclose(f) != 0) {
    perror("top_dir_worker: ready file");
    return 1;
  }
  while (!g_stop) usleep(20000);
  ttft_registry_free(r);
  return 0;
}
