/*
 * workload.c — a process that records a known workload and serves it on
 * /metrics (ttft_http_start), driven by scrape_test.py over stdin/stdout.
 *
 * The workload is a fixed batch (tests/tools/workload.h, seed 7, 300
 * sequences over the classes default/chat/batch) replayed with caller
 * timestamps: every batch records exactly the same durations, so the
 * cumulative bucket counts are always a whole multiple of one batch and a
 * rate() over any two whole-batch samples has the batch's distribution.
 * Three more sequences stay in flight on the real clock, two of them
 * stalled (last token 10 s ago), so the gauges are known too.
 *
 * protocol (one command per line on stdin, answers on stdout):
 *   at start       records INITIAL batches, serves, prints "port <n>"
 *   batch <k>      records k more batches, prints "ok <total batches>"
 *   expect         prints what Prometheus must report, then "end":
 *                    sum <series selector> <value>     exact
 *                    gauge <series selector> <value>   exact
 *                    quantile <family> <q> <class|*> <seconds>
 *                      the library's own quantile (ttft_snapshot_quantile)
 *   quit, or EOF   stops the server and exits 0
 * The process also exits by itself after 120 s (SIGALRM), so a killed
 * driver can never leave it behind.
 *
 * usage: ttft-prom-workload [INITIAL_BATCHES]      (default 4)
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/workload.h"
#include "ttft.h"

static ttft_registry *g_r;
static wl_params g_p;
static uint64_t g_t;
static unsigned g_batches;

static void play(unsigned k) {
  for (unsigned i = 0; i < k; i++) {
    g_p.t0 = g_t;
    g_t = wl_play(g_r, &g_p) + 1000000000u;
    g_batches++;
  }
}

static void print_seconds(uint64_t ns) {
  printf("%llu.%09llu", (unsigned long long)(ns / 1000000000u), (unsigned long long)(ns % 1000000000u));
}

static void expect(void) {
  ttft_snapshot *s = ttft_snapshot_take(g_r);
  if (!s) {
    printf("error snapshot\nend\n");
    return;
  }
  static const struct {
    const char *sel;
    ttft_counter c;
  } ctr[] = {
      {"llm_requests_started_total", TTFT_COUNTER_BEGUN},
      {"llm_requests_ended_total{status=\"completed\"}", TTFT_COUNTER_COMPLETED},
      {"llm_requests_ended_total{status=\"cancelled\"}", TTFT_COUNTER_CANCELLED},
      {"llm_requests_ended_total{status=\"error\"}", TTFT_COUNTER_ERRORS},
      {"llm_output_tokens_total", TTFT_COUNTER_TOKENS},
      {"llm_stalls_total", TTFT_COUNTER_STALLS},
      {"llm_stalled_requests_total", TTFT_COUNTER_STALLED_SEQS},
      {"llm_requests_abandoned_before_first_token_total", TTFT_COUNTER_ABANDONED},
      {"llm_requests_slo_met_total", TTFT_COUNTER_SLO_MET},
      {"llm_requests_dropped_total", TTFT_COUNTER_DROPPED},
  };
  for (size_t i = 0; i < sizeof ctr / sizeof ctr[0]; i++)
    printf("sum %s %llu\n", ctr[i].sel, (unsigned long long)ttft_snapshot_counter(s, ctr[i].c));
  printf("sum gen_ai_server_time_to_first_token_seconds_count %llu\n",
         (unsigned long long)ttft_snapshot_count(s, TTFT_METRIC_TTFT));
  printf("sum llm_inter_token_latency_seconds_count %llu\n",
         (unsigned long long)ttft_snapshot_count(s, TTFT_METRIC_ITL));
  printf("sum gen_ai_server_time_to_first_token_seconds_count{class=\"chat\"} %llu\n",
         (unsigned long long)ttft_snapshot_class_count(s, ttft_class_find(g_r, "chat"),
                                                       TTFT_METRIC_TTFT));
  /* gauges are read at scrape time; these sequences never change */
  printf("gauge llm_requests_in_flight %llu\n",
         (unsigned long long)ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT));
  printf("gauge llm_live_stalls %llu\n",
         (unsigned long long)ttft_snapshot_gauge(s, TTFT_GAUGE_LIVE_STALLS));

  static const struct {
    const char *fam;
    ttft_metric m;
    double q;
  } qs[] = {
      {"gen_ai_server_time_to_first_token_seconds", TTFT_METRIC_TTFT, 0.99},
      {"gen_ai_server_time_to_first_token_seconds", TTFT_METRIC_TTFT, 0.5},
      {"gen_ai_server_time_per_output_token_seconds", TTFT_METRIC_TPOT, 0.95},
      {"gen_ai_server_request_duration_seconds", TTFT_METRIC_E2E, 0.99},
      {"llm_inter_token_latency_seconds", TTFT_METRIC_ITL, 0.99},
      {"llm_request_inter_token_latency_max_seconds", TTFT_METRIC_SEQ_ITL_MAX, 0.9},
  };
  for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
    printf("quantile %s %g * ", qs[i].fam, qs[i].q);
    print_seconds(ttft_snapshot_quantile(s, qs[i].m, qs[i].q));
    printf("\n");
  }
  int chat = ttft_class_find(g_r, "chat");
  printf("quantile gen_ai_server_time_to_first_token_seconds 0.99 chat ");
  print_seconds(ttft_snapshot_class_quantile(s, chat, TTFT_METRIC_TTFT, 0.99));
  printf("\n");
  printf("end\n");
  ttft_snapshot_free(s);
}

int main(int argc, char **argv) {
  unsigned initial = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 4;
  alarm(120);
  ttft_config c;
  ttft_config_init(&c);
  c.model = "test-model";
  ttft_label lbl = {"replica", "r1"};
  c.const_labels = &lbl;
  c.n_const_labels = 1;
  g_r = ttft_registry_new(&c);
  if (!g_r) {
    fprintf(stderr, "registry_new failed\n");
    return 1;
  }
  wl_params_init(&g_p, 7, 300);
  g_p.classes[0] = "default";
  g_p.classes[1] = "chat";
  g_p.classes[2] = "batch";
  wl_add_classes(g_r, &g_p);
  g_t = g_p.t0;
  play(initial);

  /* in flight on the real clock: two stalled after one token, one waiting
   * for its first token (not a stall: that wait is TTFT) */
  uint64_t now = ttft_now_ns();
  for (int i = 0; i < 2; i++) {
    ttft_seq q = ttft_begin(g_r, now - UINT64_C(20000000000));
    ttft_token_emitted(g_r, q, 1, now - UINT64_C(10000000000));
  }
  (void)ttft_begin(g_r, now);

  ttft_http *srv = NULL;
  int rc = ttft_http_start(g_r, "127.0.0.1:0", &srv);
  if (rc != TTFT_OK) {
    fprintf(stderr, "ttft_http_start: %s\n", ttft_strerror(rc));
    return 1;
  }
  printf("port %d\n", ttft_http_port(srv));
  fflush(stdout);

  char line[256];
  while (fgets(line, sizeof line, stdin)) {
    if (strncmp(line, "batch ", 6) == 0) {
      play((unsigned)strtoul(line + 6, NULL, 10));
      printf("ok %u\n", g_batches);
    } else if (strncmp(line, "expect", 6) == 0) {
      expect();
    } else if (strncmp(line, "quit", 4) == 0) {
      break;
    } else {
      printf("error unknown command\n");
    }
    fflush(stdout);
  }
  ttft_http_stop(srv);
  ttft_registry_free(g_r);
  return 0;
}
