/*
 * expose.c — writes every exposition variant the library produces into a
 * directory, for promtool (check_promtool.sh) and the Python client
 * parsers (parse_client.py):
 *
 *   <dir>/<variant>.prom   TTFT_FORMAT_PROMETHEUS (text 0.0.4)
 *   <dir>/<variant>.om     TTFT_FORMAT_OPENMETRICS
 *   <dir>/labels.expect    "<label name> <hex of the raw value>" per line:
 *                          what the hostile variant's labels must parse back to
 *
 * variants: empty (fresh registry), default (a workload, one class),
 * exemplars (streams with trace ids: OpenMetrics exemplars),
 * classes (four classes with SLOs, gauges non-zero), hostile (label values
 * with quotes, backslashes, newlines, braces, UTF-8, invalid UTF-8),
 * custom (own namespace and bucket bounds for every metric), summaries
 * (prom_summaries on), idle / idle_all (two added classes that never saw
 * a begin, exported at zero either way; the unused default class left
 * out / exported with export_idle_classes). The classes
 * variant also makes 3 stale hook calls (llm_stale_hook_calls_total).
 *
 * usage: ttft-prom-expose DIR      exit 0 on success
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/workload.h"
#include "ttft.h"

static int write_file(const char *dir, const char *name, const char *ext, const char *text) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    return 1;
  }
  size_t n = strlen(text);
  int bad = fwrite(text, 1, n, f) != n;
  bad |= fclose(f) != 0;
  if (bad) fprintf(stderr, "%s: write failed\n", path);
  return bad;
}

static int emit(const char *dir, const char *name, ttft_registry *r) {
  if (!r) {
    fprintf(stderr, "%s: registry creation failed\n", name);
    return 1;
  }
  ttft_snapshot *s = ttft_snapshot_take(r);
  if (!s) {
    fprintf(stderr, "%s: snapshot failed\n", name);
    return 1;
  }
  static const struct {
    ttft_format f;
    const char *ext;
  } fm[2] = {{TTFT_FORMAT_PROMETHEUS, "prom"}, {TTFT_FORMAT_OPENMETRICS, "om"}};
  int bad = 0;
  for (int k = 0; k < 2; k++) {
    long n = ttft_snapshot_format(s, fm[k].f, NULL, 0);
    char *buf = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (!buf || ttft_snapshot_format(s, fm[k].f, buf, (size_t)n + 1) != n) {
      fprintf(stderr, "%s.%s: format failed (%ld)\n", name, fm[k].ext, n);
      free(buf);
      bad = 1;
      continue;
    }
    bad |= write_file(dir, name, fm[k].ext, buf);
    free(buf);
  }
  ttft_snapshot_free(s);
  ttft_registry_free(r);
  return bad;
}

static ttft_registry *played(ttft_config *c, const char *const *classes, unsigned n, unsigned open) {
  ttft_registry *r = ttft_registry_new(c);
  if (!r) return NULL;
  wl_params p;
  wl_params_init(&p, 42, n);
  p.left_open = open;
  for (int i = 0; i < 4; i++) p.classes[i] = classes ? classes[i] : (i ? NULL : "default");
  wl_add_classes(r, &p);
  wl_play(r, &p);
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
  bad |= emit(dir, "empty", ttft_registry_new(&c));

  ttft_config_init(&c);
  bad |= emit(dir, "default", played(&c, NULL, 2000, 0));

  static const char *const four[4] = {"default", "chat", "batch", "tool.call:v2-x"};
  ttft_config_init(&c);
  c.model = "llama-3.1-8b-instruct";
  ttft_registry *cr = played(&c, four, 3000, 5);
  if (cr) { /* three stale calls: an ended handle, one never issued, 0 */
    ttft_seq q = ttft_begin(cr, 1);
    ttft_stream_end(cr, q, TTFT_COMPLETED, 2);
    ttft_token_emitted(cr, q, 1, 3);
    ttft_mark(cr, (ttft_seq)UINT64_C(0xFFFF00000001), TTFT_PHASE_SCHEDULED, 3);
    ttft_stream_end(cr, 0, TTFT_ERROR, 4);
  }
  bad |= emit(dir, "classes", cr);

  /* hostile: every escape, braces and separators, UTF-8 (2- and 4-byte),
   * invalid UTF-8 (must come out as U+FFFD) */
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
  ttft_registry *hr = played(&c, four, 500, 2);
  if (!hr) fprintf(stderr, "hostile: registry refused the labels\n");
  bad |= emit(dir, "hostile", hr);
  {
    char path[4096];
    snprintf(path, sizeof path, "%s/labels.expect", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
      perror(path);
      return 1;
    }
    const struct {
      const char *k, *v;
    } want[] = {{"model", c.model}, {"start_point", c.start_point}, {"token_point", c.token_point}};
    for (size_t i = 0; i < 3 + c.n_const_labels; i++) {
      const char *k = i < 3 ? want[i].k : hostile[i - 3].name;
      const char *v = i < 3 ? want[i].v : hostile[i - 3].value;
      fprintf(f, "%s ", k);
      for (const unsigned char *p = (const unsigned char *)v; *p; p++) fprintf(f, "%02x", *p);
      fprintf(f, "%s\n", *v ? "" : "-");
    }
    bad |= fclose(f) != 0;
  }

  /* custom: namespace and bounds for every metric */
  static const uint64_t tb[] = {100000000, 200000000, 300000000, 1000000000};
  static const uint64_t gb[] = {5000000, 10000000, 20000000, 50000000, 100000000, 1000000000};
  static const uint64_t kb[] = {1, 10, 100, 1000};
  ttft_config_init(&c);
  c.metric_namespace = "inference_";
  for (int m = 0; m < TTFT_PROM_CONFIG_METRICS; m++) {
    c.prom_buckets[m] = m == TTFT_METRIC_OUTPUT_TOKENS ? kb : m == TTFT_METRIC_TTFT ? tb : gb;
    c.prom_n_buckets[m] = m == TTFT_METRIC_OUTPUT_TOKENS ? 4 : m == TTFT_METRIC_TTFT ? 4 : 6;
  }
  bad |= emit(dir, "custom", played(&c, four, 1000, 0));

  ttft_config_init(&c);
  c.prom_summaries = 1;
  c.model = "qwen";
  bad |= emit(dir, "summaries", played(&c, four, 2000, 3));

  /* exemplars: 40 streams with W3C trace ids (and request ids) over two
   * classes, TTFT 50 ms .. 2 s and worst gaps 7 .. 280 ms, so that the
   * OpenMetrics TTFT, ITL and worst-gap buckets carry exemplars */
  {
    ttft_config_init(&c);
    ttft_registry *er = ttft_registry_new(&c);
    int chat = er ? ttft_class_add(er, "chat", NULL) : -1;
    for (unsigned i = 0; er && chat > 0 && i < 40; i++) {
      char tid[33], rid[16];
      snprintf(tid, sizeof tid, "%016x%016x", 0xabcu, i + 1);
      snprintf(rid, sizeof rid, "r%u", i);
      ttft_request q;
      ttft_request_init(&q);
      q.class_id = i % 2 ? chat : 0;
      q.trace_id = tid;
      q.request_id = rid;
      uint64_t t = UINT64_C(1000000000000) + (uint64_t)i * UINT64_C(3000000000);
      ttft_seq s = ttft_begin_ex(er, &q, t);
      t += (uint64_t)(i + 1) * 50000000u;
      ttft_token_emitted(er, s, 1, t);
      t += (uint64_t)(i + 1) * 7000000u;
      ttft_token_emitted(er, s, 1, t);
      ttft_stream_end(er, s, TTFT_COMPLETED, t);
    }
    bad |= emit(dir, "exemplars", er);
  }

  /* idle classes: "batch" and "tool" never see a begin, nor does "default" */
  static const char *const chat_only[4] = {"chat", NULL, NULL, NULL};
  for (int all = 0; all < 2; all++) {
    ttft_config_init(&c);
    c.export_idle_classes = all;
    ttft_registry *pr = played(&c, chat_only, 300, 0);
    if (pr) {
      (void)ttft_class_add(pr, "batch", NULL);
      (void)ttft_class_add(pr, "tool", NULL);
    }
    bad |= emit(dir, all ? "idle_all" : "idle", pr);
  }

  return bad;
}
