/*
 * otlp_dump.c — the C half of the OTLP decoder proof (tests/otlp/run.sh,
 * decode_check.js): records a scripted timeline with exact times into a
 * registry (classes, statuses, stalls, traced slowest requests, constant
 * labels, a model), in two phases, and writes into DIR:
 *   cum.bin   ttft_snapshot_format(TTFT_FORMAT_OTLP_PROTOBUF) of the
 *             snapshot after both phases (cumulative, NULL options)
 *   d1.bin    the first phase as a delta (since creation)
 *   d2.bin    ttft_snapshot_delta(after, after phase 1), delta
 *   expected.json  what the snapshots' accessors say: per snapshot
 *             (cum, d1, d2), per class and metric, count, sum (ns), min,
 *             max, quantiles; counters; stalls by cause; the traced
 *             slowest requests; the resource and the start/end times.
 * Linked with the static library: it calls ttft__format_otlp with options,
 * as the pusher does.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"
#include "report/format.h"

#define MS 1000000ull

static const char *const CLASSES[] = {"chat", "batch", "long-ctx:v2"};
enum { NCLS = 3 };

static uint64_t base;

/* one scripted stream: begin at t0 (ms after base), first token after
 * ttft ms, then n more emissions gap ms apart (stall_at: that emission
 * comes after stall ms instead), end with status */
typedef struct script {
  int cls;
  uint64_t t0, ttft, gap, stall;
  int n, stall_at;
  ttft_status st;
  const char *trace;
  const char *id;
} script;

static int run(ttft_registry *r, const int *cls_id, const script *sc) {
  ttft_request q;
  ttft_request_init(&q);
  q.class_id = cls_id[sc->cls];
  q.trace_id = sc->trace;
  q.request_id = sc->id;
  q.prompt_tokens = 100 + (uint32_t)sc->t0 % 900;
  uint64_t t = base + sc->t0 * MS;
  ttft_seq s = ttft_begin_ex(r, &q, t);
  if (!s) return 1;
  t += sc->ttft * MS;
  if (sc->ttft && ttft_token_emitted(r, s, 1, t) != TTFT_OK) return 1;
  for (int i = 0; sc->ttft && i < sc->n; i++) {
    t += (i == sc->stall_at ? sc->stall : sc->gap) * MS;
    if (ttft_token_emitted(r, s, 1 + (uint32_t)(i % 3), t) != TTFT_OK) return 1;
  }
  return ttft_stream_end(r, s, sc->st, t + MS) != TTFT_OK;
}

static const ttft_metric METRICS[] = {TTFT_METRIC_TTFT, TTFT_METRIC_TPOT, TTFT_METRIC_E2E,
                                      TTFT_METRIC_ITL, TTFT_METRIC_OUTPUT_TOKENS,
                                      TTFT_METRIC_SEQ_ITL_MAX};
static const double QS[] = {0.5, 0.9, 0.99};

static void dump_snapshot(FILE *f, const char *key, const ttft_snapshot *s, int last) {
  uint64_t t0 = 0, t1 = 0;
  ttft_snapshot_interval(s, &t0, &t1);
  fprintf(f, "  \"%s\": {\"t_start_ns\": \"%" PRIu64 "\", \"t_end_ns\": \"%" PRIu64 "\", \"classes\": {\n",
          key, t0, t1);
  int nc = ttft_snapshot_classes(s);
  int first = 1;
  for (int c = 0; c < nc; c++) {
    const char *name = ttft_snapshot_class_name(s, c);
    if (c == 0 && ttft_snapshot_class_counter(s, 0, TTFT_COUNTER_BEGUN) == 0) continue;
    fprintf(f, "%s    \"%s\": {\"metrics\": {", first ? "" : ",\n", name);
    first = 0;
    for (size_t m = 0; m < sizeof METRICS / sizeof METRICS[0]; m++) {
      ttft_metric mm = METRICS[m];
      uint64_t n = ttft_snapshot_class_count(s, c, mm);
      fprintf(f, "%s\"%s\": {\"count\": \"%" PRIu64 "\", \"sum\": \"%" PRIu64 "\", \"q\": [", m ? ", " : "",
              ttft_metric_name(mm), n, ttft_snapshot_class_sum(s, c, mm));
      for (size_t q = 0; q < sizeof QS / sizeof QS[0]; q++)
        fprintf(f, "%s[%g, \"%" PRIu64 "\"]", q ? ", " : "", QS[q],
                n ? ttft_snapshot_class_quantile(s, c, mm, QS[q]) : 0);
      fprintf(f, "], \"min\": \"%" PRIu64 "\", \"max\": \"%" PRIu64 "\"}",
              n ? ttft_snapshot_class_quantile(s, c, mm, 0.0) : 0,
              n ? ttft_snapshot_class_quantile(s, c, mm, 1.0) : 0);
    }
    fprintf(f, "}, \"counters\": {");
    for (int k = 0; k < TTFT_COUNTER_COUNT_; k++)
      fprintf(f, "%s\"%s\": \"%" PRIu64 "\"", k ? ", " : "", ttft_counter_name((ttft_counter)k),
              ttft_snapshot_class_counter(s, c, (ttft_counter)k));
    fprintf(f, "}, \"stalls\": {");
    for (int k = 0; k < TTFT_STALL_CAUSE_COUNT; k++)
      fprintf(f, "%s\"%s\": [\"%" PRIu64 "\", \"%" PRIu64 "\"]", k ? ", " : "",
              ttft_stall_cause_name((ttft_stall_cause)k),
              ttft_snapshot_stalls_by_cause(s, c, (ttft_stall_cause)k),
              ttft_snapshot_stall_seconds_by_cause(s, c, (ttft_stall_cause)k));
    fprintf(f, "}, \"slowest\": {");
    for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++) {
      fprintf(f, "%s\"%s\": [", by ? ", " : "", by == TTFT_SLOWEST_TTFT ? "ttft" : "gap");
      unsigned k = ttft_snapshot_slowest_count(s, c, (ttft_slowest_by)by), w = 0;
      for (unsigned i = 0; i < k; i++) {
        ttft_slow_request rq;
        rq.struct_size = sizeof rq;
        if (ttft_snapshot_slowest(s, c, (ttft_slowest_by)by, i, &rq) != TTFT_OK || !rq.trace_id[0])
          continue;
        fprintf(f, "%s{\"trace\": \"%s\", \"value\": \"%" PRIu64 "\", \"id\": \"%s\", \"unix_end\": \"%" PRIu64 "\"}",
                w++ ? ", " : "", rq.trace_id, rq.value_ns, rq.request_id, rq.t_end_unix_ns);
      }
      fprintf(f, "]");
    }
    fprintf(f, "}}");
  }
  fprintf(f, "\n  }}%s\n", last ? "" : ",");
}

static int write_file(const char *dir, const char *name, const void *p, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) return 1;
  int bad = fwrite(p, 1, n, f) != n;
  return fclose(f) != 0 || bad;
}

static int render(const ttft_snapshot *s, const ttft__otlp_opts *o, const char *dir,
                  const char *name) {
  ttft__sb sb;
  ttft__sb_init(&sb, NULL, 0);
  if (ttft__format_otlp(s, o, &sb) != TTFT_OK) return 1;
  size_t n = sb.len;
  char *b = malloc(n + 1);
  if (!b) return 1;
  ttft__sb_init(&sb, b, n + 1);
  int rc = ttft__format_otlp(s, o, &sb) != TTFT_OK || sb.len != n;
  rc |= write_file(dir, name, b, n);
  free(b);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: otlp_dump DIR\n");
    return 2;
  }
  const char *dir = argv[1];
  /* the resource as the environment gives it (decode_check.js knows it) */
  setenv("OTEL_SERVICE_NAME", "llm-gateway", 1);
  setenv("OTEL_RESOURCE_ATTRIBUTES",
         "deployment.environment=prod%2Ceu , host.name=node-7,bad%zz=x,noequals,=empty,"
         "team=ml%20serving,service.name=ignored",
         1);
  ttft_label labels[2] = {{"region", "eu-west-1"}, {"cluster", "gpu-a"}};
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.model = "llama-3-70b";
  cfg.const_labels = labels;
  cfg.n_const_labels = 2;
  cfg.slowest_k = 8;
  ttft_registry *r = ttft_registry_new(&cfg);
  if (!r) return 1;
  int cls_id[NCLS];
  cls_id[0] = 0;
  for (int c = 0; c < NCLS; c++) {
    ttft_slo slo;
    ttft_slo_init(&slo);
    slo.ttft_ns = (c + 1) * 200 * MS;
    slo.stall_threshold_ns = 300 * MS;
    cls_id[c] = ttft_class_add(r, CLASSES[c], &slo);
    if (cls_id[c] < 0) return 1;
  }
  base = ttft_now_ns() + 1000 * MS;
  static const char *const traces[] = {"4bf92f3577b34da6a3ce929d0e0e4736",
                                       "0af7651916cd43dd8448eb211c80319c",
                                       "00f067aa0ba902b7a3ce929d0e0e4736", NULL};
  /* phase 1 */
  for (int i = 0; i < 40; i++) {
    script sc = {i % NCLS, (uint64_t)i * 50, 20 + (uint64_t)(i * 37) % 400, 10 + (uint64_t)(i % 7) * 9,
                 350 + (uint64_t)i * 10, 5 + i % 11, i % 5 == 0 ? 2 : -1,
                 i % 9 == 0 ? TTFT_CANCELLED : i % 13 == 0 ? TTFT_ERROR : TTFT_COMPLETED,
                 traces[i % 4], NULL};
    char id[32];
    snprintf(id, sizeof id, "req-%d", i);
    sc.id = id;
    if (run(r, cls_id, &sc)) return 1;
  }
  ttft_snapshot *s1 = ttft_snapshot_take(r);
  /* phase 2: slower, one zero-token stream */
  static const char *const traces2[] = {"11111111111111111111111111111111",
                                        "abcdefabcdefabcdefabcdefabcdef01", NULL};
  for (int i = 0; i < 30; i++) {
    script sc = {i % NCLS, 5000 + (uint64_t)i * 70, i == 7 ? 0 : 100 + (uint64_t)(i * 53) % 900,
                 15 + (uint64_t)(i % 5) * 11, 700 + (uint64_t)i * 20, 3 + i % 17, i % 4 == 1 ? 1 : -1,
                 i == 7 ? TTFT_CANCELLED : TTFT_COMPLETED, traces2[i % 3], NULL};
    char id[32];
    snprintf(id, sizeof id, "p2-%d", i);
    sc.id = id;
    if (run(r, cls_id, &sc)) return 1;
  }
  ttft_snapshot *s2 = ttft_snapshot_take(r);
  int err = 0;
  ttft_snapshot *d2 = ttft_snapshot_delta(s2, s1, &err);
  if (!s1 || !s2 || !d2) return 1;

  /* the pusher's times: start of the first delta = registry creation, of
   * the second = the first's end; fixed here so the checker knows them */
  uint64_t t_create = 1700000000000000000ull, t_first = t_create + 60000000000ull,
           t_second = t_first + 60000000000ull;
  ttft__otlp_opts o1 = {NULL, NULL, 1, t_create, t_first};
  ttft__otlp_opts o2 = {NULL, NULL, 1, t_first, t_second};
  int rc = 0;
  long n = ttft_snapshot_format(s2, TTFT_FORMAT_OTLP_PROTOBUF, NULL, 0);
  char *b = n > 0 ? malloc((size_t)n + 1) : NULL;
  rc |= !b || ttft_snapshot_format(s2, TTFT_FORMAT_OTLP_PROTOBUF, b, (size_t)n + 1) != n;
  rc |= b ? write_file(dir, "cum.bin", b, (size_t)n) : 1;
  free(b);
  rc |= render(s1, &o1, dir, "d1.bin");
  rc |= render(d2, &o2, dir, "d2.bin");

  char path[4096];
  snprintf(path, sizeof path, "%s/expected.json", dir);
  FILE *f = fopen(path, "w");
  if (!f) return 1;
  fprintf(f, "{\n  \"version\": \"%s\", \"model\": \"llama-3-70b\", \"schema\": %d,\n", ttft_version_string(), 7);
  fprintf(f, "  \"times\": {\"t_create\": \"%" PRIu64 "\", \"t_first\": \"%" PRIu64 "\", \"t_second\": \"%" PRIu64 "\"},\n",
          t_create, t_first, t_second);
  dump_snapshot(f, "cum", s2, 0);
  dump_snapshot(f, "d1", s1, 0);
  dump_snapshot(f, "d2", d2, 1);
  fprintf(f, "}\n");
  rc |= fclose(f) != 0;
  ttft_snapshot_free(s1);
  ttft_snapshot_free(s2);
  ttft_snapshot_free(d2);
  ttft_registry_free(r);
  return rc;
}
