/*
 * fluidity_workload.c — a scripted stream player serving /metrics, for
 * fluidity_test.py (token deadlines through a real Prometheus).
 *
 * Classes, made at start (so every counter is exported at zero before the
 * first scrape and rate() counts every stream):
 *   chat   TTFT 500 ms, TPOT 50 ms: token deadline D = 50 ms (the TPOT
 *          budget), fluid_min 0.9 (the default)
 *   code   TTFT 1 s, TPOT 40 ms, token_deadline_ns 20 ms (a request's own
 *          tpot_slo_ns does not move it), fluid_min 0.8
 *   rt     TTFT 300 ms, TPOT 50 ms: per-request targets beside the class's
 *   calm   TTFT 500 ms, TPOT 50 ms: a healthy class whose clients cancel
 *   batch  TTFT 5 s, no TPOT: no token deadline
 *
 * stdin, one command a line:
 *   S <class> <ttft_slo_ms> <tpot_slo_ms> <end> <end_after_ms> <ttft_ms> [<gap_ms>[x<n>] ...]
 *       play one stream: begin (with the request's own budgets; 0 = the
 *       class's), its first token <ttft_ms> after begin (no first token
 *       when <ttft_ms> is -1), then one emission after each gap (of n
 *       tokens with xN), then the end <end> (c completed, x cancelled,
 *       e error) <end_after_ms> after the last token (after begin when
 *       there was none). Timestamps are the caller's: each stream starts
 *       20 s before now, so its whole timeline is in the past.
 *   R  print "ok" (the streams before it are recorded)
 *   F  print, per class, "C <class> <deadlines> <missed> <fluid>
 *       <fluid_judged> <slo_met> <slo_judged>" from ttft_snapshot_take,
 *       then "ok"
 *   Q  or EOF: stop
 * stdout: "port <n>" first. Exits after 120 s whatever (SIGALRM).
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ttft.h"

#define MS UINT64_C(1000000)

static const char *const NAMES[] = {"chat", "code", "rt", "calm", "batch"};
#define NCLASS (int)(sizeof NAMES / sizeof NAMES[0])
static int g_cls[NCLASS];

static int class_of(const char *name) {
  for (int i = 0; i < NCLASS; i++)
    if (!strcmp(name, NAMES[i])) return g_cls[i];
  return -1;
}

static int play(ttft_registry *r, char *line) {
  char *save = NULL;
  strtok_r(line, " \n", &save); /* "S" */
  const char *cname = strtok_r(NULL, " \n", &save);
  const char *f_ttft_slo = strtok_r(NULL, " \n", &save);
  const char *f_tpot_slo = strtok_r(NULL, " \n", &save);
  const char *f_end = strtok_r(NULL, " \n", &save);
  const char *f_after = strtok_r(NULL, " \n", &save);
  const char *f_ttft = strtok_r(NULL, " \n", &save);
  if (!f_ttft) return -1;
  int cls = class_of(cname);
  if (cls < 0) return -1;
  ttft_status st = f_end[0] == 'c' ? TTFT_COMPLETED : f_end[0] == 'x' ? TTFT_CANCELLED : TTFT_ERROR;
  ttft_request q;
  ttft_request_init(&q);
  q.class_id = cls;
  q.ttft_slo_ns = strtoull(f_ttft_slo, NULL, 10) * MS;
  q.tpot_slo_ns = strtoull(f_tpot_slo, NULL, 10) * MS;
  uint64_t t = ttft_registry_now_ns(r) - 20000 * MS;
  ttft_seq s = ttft_begin_ex(r, &q, t);
  if (!s) return -1;
  long first = strtol(f_ttft, NULL, 10);
  if (first >= 0) {
    t += (uint64_t)first * MS;
    if (ttft_token_emitted(r, s, 1, t) != TTFT_OK) return -1;
    for (const char *g; (g = strtok_r(NULL, " \n", &save));) {
      char *x = NULL;
      t += strtoull(g, &x, 10) * MS;
      uint32_t n = x && *x == 'x' ? (uint32_t)strtoul(x + 1, NULL, 10) : 1;
      if (ttft_token_emitted(r, s, n, t) != TTFT_OK) return -1;
    }
  }
  t += strtoull(f_after, NULL, 10) * MS;
  return ttft_stream_end(r, s, st, t) == TTFT_OK ? 0 : -1;
}

int main(void) {
  alarm(120);
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.model = "fluidity-test";
  ttft_registry *r = ttft_registry_new(&cfg);
  if (!r) return 1;
  for (int i = 0; i < NCLASS; i++) {
    ttft_slo slo;
    ttft_slo_init(&slo);
    static const uint64_t ttft_ms[] = {500, 1000, 300, 500, 5000}, tpot_ms[] = {50, 40, 50, 50, 0};
    slo.ttft_ns = ttft_ms[i] * MS;
    slo.tpot_ns = tpot_ms[i] * MS;
    if (i == 1) {
      slo.token_deadline_ns = 20 * MS;
      slo.fluid_min = 0.8;
    }
    g_cls[i] = ttft_class_add(r, NAMES[i], &slo);
    if (g_cls[i] < 0) return 1;
  }
  ttft_http *srv = NULL;
  if (ttft_http_start(r, "127.0.0.1:0", &srv) != TTFT_OK) return 1;
  printf("port %d\n", ttft_http_port(srv));
  fflush(stdout);
  char line[4096];
  int rc = 0;
  while (fgets(line, sizeof line, stdin)) {
    if (line[0] == 'S') {
      if (play(r, line)) {
        fprintf(stderr, "fluidity_workload: refused: %s", line);
        rc = 1;
        break;
      }
    } else if (line[0] == 'R' || line[0] == 'F') {
      if (line[0] == 'F') {
        ttft_snapshot *s = ttft_snapshot_take(r);
        if (!s) return 1;
        for (int c = 0; c < ttft_snapshot_classes(s); c++) {
          static const ttft_counter k[] = {TTFT_COUNTER_TOKEN_DEADLINES, TTFT_COUNTER_TOKEN_DEADLINES_MISSED,
                                           TTFT_COUNTER_FLUID, TTFT_COUNTER_FLUID_JUDGED,
                                           TTFT_COUNTER_SLO_MET, TTFT_COUNTER_SLO_JUDGED};
          printf("C %s", ttft_snapshot_class_name(s, c));
          for (size_t j = 0; j < sizeof k / sizeof k[0]; j++)
            printf(" %llu", (unsigned long long)ttft_snapshot_class_counter(s, c, k[j]));
          printf("\n");
        }
        ttft_snapshot_free(s);
      }
      printf("ok\n");
      fflush(stdout);
    } else {
      break;
    }
  }
  ttft_http_stop(srv);
  ttft_registry_free(r);
  return rc;
}
