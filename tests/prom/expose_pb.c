/*
 * expose_pb.c — writes snapshots of known registries in three formats, for
 * the independent protobuf decoder (pb_roundtrip.py):
 *
 *   <dir>/<variant>.pb     TTFT_FORMAT_PROMETHEUS_PROTOBUF (binary)
 *   <dir>/<variant>.prom   TTFT_FORMAT_PROMETHEUS (the reference)
 *   <dir>/<variant>.json   TTFT_FORMAT_JSON (the library's own quantiles)
 *   <dir>/<variant>.meta   "native <0|1>\nschema <s>\n"
 *
 * variants: empty, default (a workload, one class), classes (four classes
 * with SLOs, in-flight streams), hostile (label values with every escape,
 * UTF-8 and invalid UTF-8), custom (own namespace and classic bounds),
 * summaries, classic (native_histograms = 0), schema_<s> for s = -4 .. 8,
 * extremes (0, 1 ns, bucket edges, powers of two, 1 s, 1 h, beyond the
 * histogram's range; 0 and huge token counts), idle and idle_all (a class
 * that never saw a begin, export_idle_classes 0 and 1).
 *
 * usage: ttft-prom-expose-pb DIR      exit 0 on success
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/workload.h"
#include "ttft.h"

static int write_file(const char *dir, const char *name, const char *ext, const void *p, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    return 1;
  }
  int bad = fwrite(p, 1, n, f) != n;
  bad |= fclose(f) != 0;
  if (bad) fprintf(stderr, "%s: write failed\n", path);
  return bad;
}

static int emit_snapshot(const char *dir, const char *name, const ttft_snapshot *s,
                         const ttft_config *c) {
  static const struct {
    ttft_format f;
    const char *ext;
  } fm[3] = {{TTFT_FORMAT_PROMETHEUS_PROTOBUF, "pb"},
             {TTFT_FORMAT_PROMETHEUS, "prom"},
             {TTFT_FORMAT_JSON, "json"}};
  int bad = 0;
  for (int k = 0; k < 3; k++) {
    long n = ttft_snapshot_format(s, fm[k].f, NULL, 0);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!buf || ttft_snapshot_format(s, fm[k].f, buf, (size_t)n + 1) != n) {
      fprintf(stderr, "%s.%s: format failed (%ld: %s)\n", name, fm[k].ext, n,
              n < 0 ? ttft_strerror((int)n) : "short");
      free(buf);
      bad = 1;
      continue;
    }
    bad |= write_file(dir, name, fm[k].ext, buf, (size_t)n);
    free(buf);
  }
  char meta[64];
  int m = snprintf(meta, sizeof meta, "native %d\nschema %d\n", c->native_histograms, c->native_schema);
  bad |= write_file(dir, name, "meta", meta, (size_t)m);
  return bad;
}

static int emit(const char *dir, const char *name, ttft_registry *r, const ttft_config *c) {
  if (!r) {
    fprintf(stderr, "%s: registry creation failed\n", name);
    return 1;
  }
  ttft_snapshot *s = ttft_snapshot_take(r);
  int bad = 1;
  if (!s) fprintf(stderr, "%s: snapshot failed\n", name);
  else bad = emit_snapshot(dir, name, s, c);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
  return bad;
}

static ttft_registry *played(ttft_config *c, const char *const *classes, unsigned n, unsigned open,
                             uint64_t seed) {
  ttft_registry *r = ttft_registry_new(c);
  if (!r) return NULL;
  wl_params p;
  wl_params_init(&p, seed, n);
  p.left_open = open;
  for (int i = 0; i < 4; i++) p.classes[i] = classes ? classes[i] : (i ? NULL : "default");
  wl_add_classes(r, &p);
  wl_play(r, &p);
  return r;
}

/* One stream per value: TTFT = v, ITL = v (two emissions v apart), E2E,
 * and output tokens 2; plus streams with 0 tokens (abandoned). */
static ttft_registry *extremes(ttft_config *c) {
  static const uint64_t vals[] = {0,
                                  1,
                                  2,
                                  255,
                                  256,
                                  257,
                                  511,
                                  512,
                                  1000,
                                  1023,
                                  1024,
                                  123456,
                                  1000000,
                                  UINT64_C(1) << 20,
                                  (UINT64_C(1) << 20) + 1,
                                  62500000, /* 2^-4 s: a boundary of every schema */
                                  125000000,
                                  250000000,
                                  500000000,
                                  1000000000, /* 1 s */
                                  2000000000,
                                  UINT64_C(3600000000000), /* 1 h */
                                  (UINT64_C(1) << 44) - 1,
                                  UINT64_C(18000000000000)}; /* 5 h: beyond the last bucket */
  ttft_registry *r = ttft_registry_new(c);
  if (!r) return NULL;
  uint64_t t = UINT64_C(1000000000000);
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
    for (int rep = 0; rep < (int)(1 + i % 3); rep++) {
      ttft_seq s = ttft_begin(r, t);
      ttft_token_emitted(r, s, 1, t + vals[i]);
      ttft_token_emitted(r, s, 1, t + 2 * vals[i]);
      ttft_stream_end(r, s, TTFT_COMPLETED, t + 2 * vals[i]);
      t += 2 * vals[i] + 1;
    }
  }
  for (int i = 0; i < 3; i++) { /* output tokens 0 and many */
    ttft_seq s = ttft_begin(r, t);
    if (i) ttft_token_emitted(r, s, i == 1 ? 4000000000u : 70000u, t + 5);
    ttft_stream_end(r, s, i ? TTFT_COMPLETED : TTFT_CANCELLED, t + 10);
    t += 11;
  }
  return r;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const char *dir = argv[1];
  int bad = 0;
  ttft_config c;

  ttft_config_init(&c);
  bad |= emit(dir, "empty", ttft_registry_new(&c), &c);

  ttft_config_init(&c);
  bad |= emit(dir, "default", played(&c, NULL, 2000, 0, 42), &c);

  static const char *const four[4] = {"default", "chat", "batch", "tool.call:v2-x"};
  ttft_config_init(&c);
  c.model = "llama-3.1-8b-instruct";
  bad |= emit(dir, "classes", played(&c, four, 3000, 5, 43), &c);

  static const ttft_label hostile[] = {
      {"replica", "a\"b\\c\nd"},
      {"region", "}{,=\" le=\"0.1\"} 7\n# EOF\n"},
      {"team", "\xC3\xBC\xC3\xB1\xC3\xAF \xF0\x9F\x98\x80 \xE2\x82\xAC"},
      {"raw", "x\xFF\xC3(y\xE2\x82"},
      {"empty", ""},
  };
  ttft_config_init(&c);
  c.model = "m\\\"o\"del\\n";
  c.start_point = "client\nsend";
  c.token_point = "sse \"flush\"";
  c.const_labels = hostile;
  c.n_const_labels = sizeof hostile / sizeof hostile[0];
  bad |= emit(dir, "hostile", played(&c, four, 500, 2, 44), &c);

  static const uint64_t tb[] = {100000000, 200000000, 300000000, 1000000000};
  static const uint64_t gb[] = {5000000, 10000000, 20000000, 50000000, 100000000, 1000000000};
  static const uint64_t kb[] = {1, 10, 100, 1000};
  ttft_config_init(&c);
  c.metric_namespace = "inference_";
  for (int m = 0; m < TTFT_PROM_CONFIG_METRICS; m++) {
    c.prom_buckets[m] = m == TTFT_METRIC_OUTPUT_TOKENS ? kb : m == TTFT_METRIC_TTFT ? tb : gb;
    c.prom_n_buckets[m] = m == TTFT_METRIC_OUTPUT_TOKENS ? 4 : m == TTFT_METRIC_TTFT ? 4 : 6;
  }
  bad |= emit(dir, "custom", played(&c, four, 1000, 0, 45), &c);

  ttft_config_init(&c);
  c.prom_summaries = 1;
  c.model = "qwen";
  bad |= emit(dir, "summaries", played(&c, four, 2000, 3, 46), &c);

  ttft_config_init(&c);
  c.native_histograms = 0;
  bad |= emit(dir, "classic", played(&c, four, 1000, 0, 47), &c);

  for (int sch = -4; sch <= 8; sch++) {
    char name[32];
    snprintf(name, sizeof name, "schema_%d", sch);
    ttft_config_init(&c);
    c.native_schema = sch;
    bad |= emit(dir, name, played(&c, four, 1500, 0, 48), &c);
  }

  for (int sch = 0; sch <= 8; sch += 8) {
    char name[32];
    snprintf(name, sizeof name, "extremes_%d", sch);
    ttft_config_init(&c);
    c.native_schema = sch;
    bad |= emit(dir, name, extremes(&c), &c);
  }

  /* a class that never saw a begin: left out by default, shown on request */
  static const char *const two[4] = {"default", "chat", NULL, NULL};
  for (int all = 0; all < 2; all++) {
    ttft_config_init(&c);
    c.export_idle_classes = all;
    ttft_registry *r = played(&c, two, 400, 0, 49);
    ttft_slo slo;
    ttft_slo_init(&slo);
    slo.ttft_ns = 100000000;
    if (r && ttft_class_add(r, "idle", &slo) < 0) {
      fprintf(stderr, "class_add idle failed\n");
      bad = 1;
    }
    bad |= emit(dir, all ? "idle_all" : "idle", r, &c);
  }
  return bad;
}
