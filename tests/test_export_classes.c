/*
 * test_export_classes.c — issue 11, item 5: export only what is used.
 *
 * With ttft_config.export_idle_classes = 0 (the default) an idle class is
 * left out of the text report, the JSON document, Prometheus and
 * OpenMetrics; with 1 every class is there. Idle = never added (issue 32,
 * item 2): the default class until a begin uses it. A class added with
 * ttft_class_add is exported at zero from the call on, so that a series'
 * first sample holds no observation and rate() counts the first requests
 * (1.2 left it out until its first begin).
 * The queries still answer for every class (ids do not move), the setting
 * travels through the encoding, and merge/delta keep the first snapshot's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"
#include "task.h"
#include "render.h"

#define T0 UINT64_C(1000000000)

/* classes: default (idle), chat (one stream), batch (idle), full (only a
 * begin refused for want of a slot: dropped counts as used) */
static ttft_registry *registry(int idle) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 1;
  c.max_threads = 1;
  c.export_idle_classes = idle;
  ttft_registry *r = ttft_registry_new(&c);
  if (!r) return NULL;
  ttft_request rq;
  ttft_request_init(&rq);
  rq.class_id = ttft_class_add(r, "chat", NULL);
  EXPECT_EQ_INT(2, ttft_class_add(r, "batch", NULL));
  int full = ttft_class_add(r, "full", NULL);
  ttft_seq s = ttft_begin_ex(r, &rq, T0);
  EXPECT_TRUE(s != 0);
  rq.class_id = full;
  EXPECT_TRUE(ttft_begin_ex(r, &rq, T0) == 0); /* the one slot is taken: dropped */
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 2, T0 + 1000000));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, T0 + 2000000));
  return r;
}

/* whether class name appears as a class in format f (len bytes of text) */
static int shows(const char *text, long len, ttft_format f, const char *name) {
  char needle[96];
  size_t k = strlen(name);
  switch (f) {
  case TTFT_FORMAT_OTLP_PROTOBUF: /* KeyValue{key, AnyValue{string_value}} */
    snprintf(needle, sizeof needle, "libttft.class\x12%c\x0a%c%s", (char)(k + 2), (char)k, name);
    return memmem(text, (size_t)len, needle, 13 + 4 + k) != NULL;
  case TTFT_FORMAT_JSON: snprintf(needle, sizeof needle, "\"name\":\"%s\"", name); break;
  case TTFT_FORMAT_TEXT: snprintf(needle, sizeof needle, "\n%s ", name); break;
  default: snprintf(needle, sizeof needle, "{class=\"%s\"", name); break;
  }
  return strstr(text, needle) != NULL;
}

static void check_formats(const ttft_snapshot *s, int idle, const char *what) {
  static const char *const names[4] = {"default", "chat", "batch", "full"};
  const int used[4] = {0, 1, 1, 1}; /* batch: added, never used, shown */
  for (int f = 0; f < TTFT_FORMAT_COUNT_; f++) {
    if (f == TTFT_FORMAT_PROMETHEUS_PROTOBUF) continue; /* binary: tests/test_protobuf.c */
    long len = 0;
    char *t = render_len(s, (ttft_format)f, &len);
    if (!t) continue;
    for (int c = 0; c < 4; c++) {
      int want = idle || used[c];
      if (shows(t, len, (ttft_format)f, names[c]) != want)
        fprintf(stderr, "   %s, %s: class %s %s\n", what, ttft_format_name((ttft_format)f), names[c],
                want ? "missing" : "exported although idle");
      EXPECT_EQ_INT(want, shows(t, len, (ttft_format)f, names[c]));
    }
    /* the JSON keeps each class's id, so gaps in the array are visible */
    if (f == TTFT_FORMAT_JSON) {
      EXPECT_CONTAINS(t, "\"id\":1,\"name\":\"chat\"");
      EXPECT_CONTAINS(t, "\"id\":3,\"name\":\"full\"");
      EXPECT_CONTAINS(t, idle ? "\"export_idle_classes\":true" : "\"export_idle_classes\":false");
    }
    /* the registry-wide numbers do not depend on it */
    if (f == TTFT_FORMAT_PROMETHEUS) {
      EXPECT_CONTAINS(t, "\nllm_requests_in_flight 0\n");
      EXPECT_CONTAINS(t, "\nllm_stale_hook_calls_total 0\n");
      EXPECT_CONTAINS(t, "\nllm_requests_dropped_total{class=\"full\"} 1\n");
    }
    free(t);
  }
  /* the queries answer for every class either way */
  EXPECT_EQ_INT(4, ttft_snapshot_classes(s));
  EXPECT_STREQ("batch", ttft_snapshot_class_name(s, 2));
  EXPECT_EQ_U64(1, ttft_snapshot_class_count(s, 1, TTFT_METRIC_TTFT));
  EXPECT_EQ_U64(1, ttft_snapshot_counter(s, TTFT_COUNTER_DROPPED));
}

/* One setting of export_idle_classes: the formats of a taken snapshot, of
 * its decoded encoding, of a merge and of a delta. */
static void setting(int idle) {
  ttft_registry *r = registry(idle);
  EXPECT_NOT_NULL(r);
  if (!r) return;
  ttft_snapshot *s = ttft_snapshot_take(r);
  check_formats(s, idle, "taken");

  /* the setting travels through the encoding */
  long n = ttft_snapshot_encode(s, NULL, 0);
  unsigned char *b = n > 0 ? malloc((size_t)n) : NULL;
  if (b) {
    EXPECT_EQ_INT(n, ttft_snapshot_encode(s, b, (size_t)n));
    int err = 1;
    ttft_snapshot *d = ttft_snapshot_decode(b, (size_t)n, &err);
    EXPECT_ERR(TTFT_OK, err);
    if (d) check_formats(d, idle, "decoded");
    ttft_snapshot_free(d);
  }
  free(b);

  /* merge and delta take the first snapshot's setting */
  int err = 1;
  ttft_snapshot *m = ttft_snapshot_merge(s, s, &err);
  EXPECT_ERR(TTFT_OK, err);
  if (m) {
    char *t = render(m, TTFT_FORMAT_OPENMETRICS);
    if (t) {
      EXPECT_EQ_INT(1, shows(t, (long)strlen(t), TTFT_FORMAT_OPENMETRICS, "batch"));
      EXPECT_EQ_INT(idle, shows(t, (long)strlen(t), TTFT_FORMAT_OPENMETRICS, "default"));
    }
    free(t);
  }
  ttft_snapshot_free(m);

  /* a class used only after the first snapshot appears in the delta */
  ttft_request rq;
  ttft_request_init(&rq);
  rq.class_id = 2;
  ttft_seq q = ttft_begin_ex(r, &rq, T0 + 5000000);
  EXPECT_TRUE(q != 0);
  ttft_snapshot *s2 = ttft_snapshot_take(r);
  ttft_snapshot *dl = ttft_snapshot_delta(s2, s, &err);
  EXPECT_ERR(TTFT_OK, err);
  if (dl) {
    char *t = render(dl, TTFT_FORMAT_JSON);
    /* chat's begin was before the window: still shown (added), at zero */
    if (t) {
      EXPECT_EQ_INT(1, shows(t, (long)strlen(t), TTFT_FORMAT_JSON, "batch"));
      EXPECT_EQ_INT(1, shows(t, (long)strlen(t), TTFT_FORMAT_JSON, "chat"));
      EXPECT_EQ_INT(idle, shows(t, (long)strlen(t), TTFT_FORMAT_JSON, "default"));
    }
    free(t);
  }
  ttft_snapshot_free(dl);
  ttft_snapshot_free(s2);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TEST(idle_classes_hidden) { setting(0); }   /* the default */
TEST(idle_classes_exported) { setting(1); }

/* a fresh registry exports no class (and expositions stay well-formed) */
TEST(fresh_registry_exports_no_class) {
  ttft_registry *r = ttft_registry_new(NULL);
  ttft_snapshot *s = ttft_snapshot_take(r);
  char *p = render(s, TTFT_FORMAT_PROMETHEUS);
  if (p) {
    EXPECT_FALSE(strstr(p, "class=\"") != NULL);
    EXPECT_CONTAINS(p, "# TYPE gen_ai_server_time_to_first_token_seconds histogram\n");
    EXPECT_CONTAINS(p, "\nllm_requests_in_flight 0\n");
  }
  free(p);
  char *t = render(s, TTFT_FORMAT_TEXT);
  if (t) EXPECT_FALSE(strstr(t, "\ndefault ") != NULL);
  free(t);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* A class is exported at zero from ttft_class_add on, before its first
 * request: the scrape before the first requests then holds their series
 * at zero, and rate()/increase() count those requests (a series' first
 * sample is never counted). The default class, never added, stays out
 * until used (or with export_idle_classes 1, from the start). */
TEST(added_class_exported_at_zero) {
  for (int idle = 0; idle < 2; idle++) {
    ttft_config c;
    ttft_config_init(&c);
    c.export_idle_classes = idle;
    ttft_registry *r = ttft_registry_new(&c);
    EXPECT_NOT_NULL(r);
    if (!r) return;
    ttft_snapshot *s = ttft_snapshot_take(r);
    char *p = render(s, TTFT_FORMAT_PROMETHEUS);
    if (p) EXPECT_EQ_INT(idle, strstr(p, "gen_ai_server_time_to_first_token_seconds_count{class=\"default\"} 0\n") != NULL);
    free(p);
    ttft_snapshot_free(s);
    EXPECT_EQ_INT(1, ttft_class_add(r, "chat", NULL));
    s = ttft_snapshot_take(r);
    for (int f = 0; f < 2; f++) {
      p = render(s, f ? TTFT_FORMAT_OPENMETRICS : TTFT_FORMAT_PROMETHEUS);
      if (!p) continue;
      EXPECT_CONTAINS(p, "gen_ai_server_time_to_first_token_seconds_count{class=\"chat\"} 0\n");
      EXPECT_CONTAINS(p, "gen_ai_server_time_to_first_token_seconds_bucket{class=\"chat\",le=\"+Inf\"} 0\n");
      EXPECT_CONTAINS(p, "llm_requests_started_total{class=\"chat\"} 0\n");
      EXPECT_EQ_INT(idle, strstr(p, "{class=\"default\"") != NULL);
      free(p);
    }
    ttft_snapshot_free(s);
    ttft_registry_free(r);
  }
}

TU_MAIN()
