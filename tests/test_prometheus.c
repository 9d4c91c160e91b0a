/*
 * test_prometheus.c — the Prometheus 0.0.4 and OpenMetrics 1.0 expositions,
 * through the public API only (ttft_snapshot_format).
 *
 * Checks: family structure of both formats, exact cumulative counts for
 * observations on fine-bucket edges, the documented misplacement bound
 * elsewhere, +Inf == _count and monotone buckets for every series, label
 * escaping (quotes, backslashes, newlines, UTF-8, invalid UTF-8), the
 * namespace, summaries, counters and snprintf rules. promtool and the
 * Python client parsers check the same outputs in tests/prometheus.cmake.
 */
#include <stdlib.h>
#include <string.h>

#include "ttft.h"
/* after ttft.h: EXPECT_ERR needs it */
#include "task.h"

#define T0 UINT64_C(1000000000000) /* caller timestamps start here (nonzero) */

static char *render(const ttft_snapshot *s, ttft_format f) {
  long n = ttft_snapshot_format(s, f, NULL, 0);
  EXPECT_GE_U64((uint64_t)(n < 0 ? 0 : n), 1);
  if (n < 0) return NULL;
  char *b = malloc((size_t)n + 1);
  if (!b) return NULL;
  long m = ttft_snapshot_format(s, f, b, (size_t)n + 1);
  EXPECT_EQ_INT(n, m);
  EXPECT_EQ_U64((uint64_t)n, strlen(b));
  return b;
}

/* The value of the sample whose line starts with exactly `series` + ' '. */
static int sample(const char *text, const char *series, char *val, size_t cap) {
  size_t n = strlen(series);
  for (const char *p = text; p && *p;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len > n && strncmp(p, series, n) == 0 && p[n] == ' ') {
      size_t v = len - n - 1;
      if (v >= cap) v = cap - 1;
      memcpy(val, p + n + 1, v);
      val[v] = '\0';
      return 1;
    }
    p = e ? e + 1 : NULL;
  }
  fprintf(stderr, "   no sample line for: %s\n", series);
  return 0;
}

static uint64_t sample_u64(const char *text, const char *series) {
  char v[64];
  if (!sample(text, series, v, sizeof v)) return UINT64_MAX;
  return strtoull(v, NULL, 10);
}

static void expect_sample(const char *text, const char *series, const char *want) {
  char v[64] = "";
  if (sample(text, series, v, sizeof v)) EXPECT_STREQ(want, v);
  else EXPECT_TRUE(0);
}

static size_t count_lines_with(const char *text, const char *needle) {
  size_t n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p++) n++;
  return n;
}

/* The integer after the last space of the line [p, e). */
static uint64_t line_value(const char *p, const char *e) {
  const char *sp = p;
  for (const char *r = p; r < e; r++)
    if (*r == ' ') sp = r;
  return strtoull(sp + 1, NULL, 10);
}

/* Walk every sample line: for each histogram series (same name stem and
 * labels apart from le) the buckets never decrease and +Inf equals
 * _count. Works on our own output: a label value may contain escaped
 * quotes, so labels are scanned with the escape rules. */
static void check_histograms(const char *text) {
  char key[4096], prev_key[4096] = "";
  uint64_t prev = 0, inf = 0;
  int have_inf = 0;
  size_t series = 0;
  for (const char *p = text; *p;) {
    const char *e = strchr(p, '\n');
    if (!e) break;
    if (*p != '#') {
      const char *b = strstr(p, "_bucket{");
      if (b && b < e) {
        /* key = name stem + labels without le */
        size_t k = 0;
        for (const char *q = p; q < b && k < sizeof key - 1; q++) key[k++] = *q;
        const char *q = b + 8;
        const char *le = NULL;
        int inq = 0;
        for (; q < e && k < sizeof key - 1; q++) {
          if (inq && *q == '\\') {
            key[k++] = *q++;
            key[k++] = *q;
            continue;
          }
          if (*q == '"') inq = !inq;
          if (!inq && strncmp(q, "le=\"", 4) == 0 && (q[-1] == '{' || q[-1] == ',')) {
            le = q + 4;
            break;
          }
          if (!inq && *q == '}') break;
          key[k++] = *q;
        }
        key[k] = '\0';
        uint64_t v = line_value(p, e);
        if (strcmp(key, prev_key) != 0) {
          series++;
          memcpy(prev_key, key, k + 1);
          prev = 0;
        }
        if (v < prev) {
          fprintf(stderr, "   bucket decreases in %s\n", key);
          EXPECT_LE_U64(prev, v);
        }
        prev = v;
        if (le && strncmp(le, "+Inf\"", 5) == 0) {
          inf = v;
          have_inf = 1;
        }
      } else if (have_inf) {
        const char *c = strstr(p, "_count");
        if (c && c < e) {
          EXPECT_EQ_U64(inf, line_value(p, e));
          have_inf = 0;
        }
      }
    }
    p = e + 1;
  }
  EXPECT_GE_U64(series, 11); /* at least one series per histogram family */
}

/* Observations on fine-bucket upper edges land exactly. The fine histogram
 * splits [2^k, 2^(k+1)) into 128 buckets starting at multiples of
 * 2^(k-7); (m << s) - 1 is therefore the last value of a bucket. */
TEST(exact_counts_on_bucket_edges) {
  const uint64_t B1 = 255, B2 = (UINT64_C(200) << 20) - 1, B3 = (UINT64_C(130) << 30) - 1;
  const uint64_t bounds[] = {B1, B2, B3};
  ttft_config c;
  ttft_config_init(&c);
  c.prom_buckets[TTFT_METRIC_TTFT] = bounds;
  c.prom_n_buckets[TTFT_METRIC_TTFT] = 3;
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  if (!r) return;
  struct {
    uint64_t v;
    unsigned n;
  } obs[] = {{100, 3}, {B1, 2}, {B1 + 1, 1}, {B2, 4}, {B2 + 1, 5}, {B3, 6}, {B3 + 1, 7}};
  uint64_t t = T0, sum = 0;
  unsigned total = 0;
  for (size_t i = 0; i < sizeof obs / sizeof obs[0]; i++)
    for (unsigned k = 0; k < obs[i].n; k++) {
      ttft_seq s = ttft_begin(r, t);
      EXPECT_EQ_INT(TTFT_OK, ttft_token_emitted(r, s, 1, t + obs[i].v));
      EXPECT_EQ_INT(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, t + obs[i].v));
      t += UINT64_C(200) << 30;
      sum += obs[i].v;
      total++;
    }
  ttft_snapshot *s = ttft_snapshot_take(r);
  for (int om = 0; om < 2; om++) {
    char *txt = render(s, om ? TTFT_FORMAT_OPENMETRICS : TTFT_FORMAT_PROMETHEUS);
    if (!txt) continue;
#define TB "gen_ai_server_time_to_first_token_seconds_bucket{class=\"default\",le=\""
    EXPECT_EQ_U64(5, sample_u64(txt, TB "0.000000255\"}"));
    EXPECT_EQ_U64(10, sample_u64(txt, TB "0.209715199\"}"));
    EXPECT_EQ_U64(21, sample_u64(txt, TB "139.586437119\"}"));
    EXPECT_EQ_U64(total, sample_u64(txt, TB "+Inf\"}"));
#undef TB
    EXPECT_EQ_U64(total, sample_u64(txt, "gen_ai_server_time_to_first_token_seconds_count{class=\"default\"}"));
    /* the sum is printed as exact decimal seconds */
    char want[64];
    snprintf(want, sizeof want, "%llu.%09llu", (unsigned long long)(sum / 1000000000u),
             (unsigned long long)(sum % 1000000000u));
    size_t L = strlen(want);
    while (want[L - 1] == '0' && want[L - 2] != '.') want[--L] = '\0';
    expect_sample(txt, "gen_ai_server_time_to_first_token_seconds_sum{class=\"default\"}", want);
    /* only three finite bounds were configured */
    EXPECT_EQ_U64(4, count_lines_with(txt, "gen_ai_server_time_to_first_token_seconds_bucket{"));
    check_histograms(txt);
    free(txt);
  }
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* Off an edge, only observations within 1/128 below a bound can move to
 * the next bucket (never to an earlier one). Default OTel TTFT bounds. */
TEST(misplacement_bound_off_edges) {
  ttft_registry *r = ttft_registry_new(NULL);
  EXPECT_NOT_NULL(r);
  if (!r) return;
  /* around le = 0.04 s: 1 % below (must count), 1 % above (must not), and
   * values up to 0.5 % below (allowed either way: count nothing about them) */
  const uint64_t below = 39600000, above = 40400000;
  uint64_t t = T0;
  for (int i = 0; i < 10; i++) {
    ttft_seq s = ttft_begin(r, t);
    ttft_token_emitted(r, s, 1, t + (i < 7 ? below : above));
    ttft_stream_end(r, s, TTFT_COMPLETED, t + UINT64_C(1000000000));
    t += UINT64_C(2000000000);
  }
  ttft_snapshot *s = ttft_snapshot_take(r);
  char *txt = render(s, TTFT_FORMAT_PROMETHEUS);
  if (txt) {
    const char *base = "gen_ai_server_time_to_first_token_seconds_bucket{class=\"default\",le=\"";
    char series[256];
    snprintf(series, sizeof series, "%s0.02\"}", base);
    EXPECT_EQ_U64(0, sample_u64(txt, series));
    snprintf(series, sizeof series, "%s0.04\"}", base);
    EXPECT_EQ_U64(7, sample_u64(txt, series));
    snprintf(series, sizeof series, "%s0.06\"}", base);
    EXPECT_EQ_U64(10, sample_u64(txt, series));
    /* max <= le: exact whatever the edge */
    snprintf(series, sizeof series, "%s10.0\"}", base);
    EXPECT_EQ_U64(10, sample_u64(txt, series));
    free(txt);
  }
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* ------------------------------------------ family structure, both formats
 * One registry: a completed stream (3 tokens at 50 ms, 1 more at 90 ms,
 * ended at 100 ms), one cancelled before its first token (2 s) and then
 * ended again (a stale call), one still in flight; both expositions of it. */
typedef struct expo {
  ttft_registry *r;
  ttft_snapshot *s;
  char *p, *o; /* Prometheus 0.0.4, OpenMetrics 1.0 */
} expo;

static int expo_open(expo *w) {
  memset(w, 0, sizeof *w);
  ttft_registry *r = w->r = ttft_registry_new(NULL);
  EXPECT_NOT_NULL(r);
  if (!r) return 0;
  ttft_seq q = ttft_begin(r, T0);
  ttft_token_emitted(r, q, 3, T0 + 50000000);
  ttft_token_emitted(r, q, 1, T0 + 90000000);
  ttft_stream_end(r, q, TTFT_COMPLETED, T0 + 100000000);
  q = ttft_begin(r, T0);
  ttft_stream_end(r, q, TTFT_CANCELLED, T0 + 2000000000);
  EXPECT_ERR(TTFT_ESTALE, ttft_stream_end(r, q, TTFT_ERROR, T0 + 3000000000)); /* a stale call */
  q = ttft_begin(r, T0); /* stays in flight */
  w->s = ttft_snapshot_take(r);
  w->p = render(w->s, TTFT_FORMAT_PROMETHEUS);
  w->o = render(w->s, TTFT_FORMAT_OPENMETRICS);
  return w->p && w->o;
}

static void expo_close(expo *w) {
  free(w->p);
  free(w->o);
  ttft_snapshot_free(w->s);
  ttft_registry_free(w->r);
}

/* 0.0.4: HELP+TYPE, counters keep _total in the family, no UNIT, no EOF */
TEST(prometheus_families) {
  expo w;
  if (expo_open(&w)) {
    const char *p = w.p;
    EXPECT_CONTAINS(p, "# TYPE gen_ai_server_time_to_first_token_seconds histogram\n");
    EXPECT_CONTAINS(p, "# TYPE gen_ai_server_time_per_output_token_seconds histogram\n");
    EXPECT_CONTAINS(p, "# TYPE gen_ai_server_request_duration_seconds histogram\n");
    EXPECT_CONTAINS(p, "# TYPE llm_inter_token_latency_seconds histogram\n");
    EXPECT_CONTAINS(p, "# TYPE llm_request_output_tokens histogram\n");
    EXPECT_CONTAINS(p, "# TYPE llm_stalls_total counter\n");
    EXPECT_CONTAINS(p, "# HELP llm_stalls_total ");
    EXPECT_CONTAINS(p, "# TYPE llm_measurement_info gauge\n");
    EXPECT_CONTAINS(p, "# TYPE llm_requests_in_flight gauge\n");
    EXPECT_FALSE(strstr(p, "# EOF") != NULL);
    EXPECT_FALSE(strstr(p, "# UNIT") != NULL);
    EXPECT_FALSE(strstr(p, "_quantiles") != NULL); /* summaries are off by default */
  }
  expo_close(&w);
}

/* OpenMetrics: counters without _total in the family, UNIT, info, EOF last */
TEST(openmetrics_families) {
  expo w;
  if (expo_open(&w)) {
    const char *o = w.o;
    EXPECT_CONTAINS(o, "# TYPE llm_stalls counter\n");
    EXPECT_CONTAINS(o, "# HELP llm_stalls ");
    EXPECT_CONTAINS(o, "\nllm_stalls_total{class=\"default\",cause=\"unknown\"} 0\n");
    EXPECT_CONTAINS(o, "# TYPE llm_stall_seconds counter\n# UNIT llm_stall_seconds seconds\n");
    EXPECT_CONTAINS(o, "# UNIT gen_ai_server_time_to_first_token_seconds seconds\n");
    EXPECT_CONTAINS(o, "# TYPE llm_measurement info\n");
    EXPECT_CONTAINS(o, "\nllm_measurement_info{start_point=\"server_arrival\",token_point=\"detokenized_flush\",version=\"");
    EXPECT_FALSE(strstr(o, "_created") != NULL);
    size_t ol = strlen(o);
    EXPECT_TRUE(ol > 6 && strcmp(o + ol - 6, "# EOF\n") == 0);
    EXPECT_EQ_U64(1, count_lines_with(o, "# EOF"));
  }
  expo_close(&w);
}

/* the same samples in both */
TEST(samples_in_both_formats) {
  expo w;
  if (expo_open(&w)) {
    const char *p = w.p, *o = w.o;
    expect_sample(p, "llm_requests_ended_total{class=\"default\",status=\"completed\"}", "1");
    expect_sample(o, "llm_requests_ended_total{class=\"default\",status=\"cancelled\"}", "1");
    expect_sample(p, "llm_requests_ended_total{class=\"default\",status=\"error\"}", "0");
    expect_sample(p, "llm_requests_started_total{class=\"default\"}", "3");
    expect_sample(o, "llm_output_tokens_total{class=\"default\"}", "4");
    expect_sample(p, "llm_requests_abandoned_before_first_token_total{class=\"default\"}", "1");
    expect_sample(p, "llm_requests_in_flight", "1");
    expect_sample(o, "llm_live_stalls", "0");
    expect_sample(p, "llm_stall_budget_seconds{class=\"default\"}", "0.5");
    expect_sample(p, "gen_ai_server_time_to_first_token_seconds_sum{class=\"default\"}", "0.05");
    expect_sample(p, "llm_abandoned_wait_seconds_sum{class=\"default\"}", "2.0");
    expect_sample(p, "llm_request_output_tokens_sum{class=\"default\"}", "4");
  }
  expo_close(&w);
}

/* token-weighted ITL: the one gap (40 ms, before a 1-token emission) */
TEST(itl_per_token_family) {
  expo w;
  if (expo_open(&w)) {
    EXPECT_CONTAINS(w.p, "# TYPE llm_inter_token_latency_per_token_seconds histogram\n");
    expect_sample(w.p, "llm_inter_token_latency_per_token_seconds_count{class=\"default\"}", "1");
    expect_sample(w.o, "llm_inter_token_latency_per_token_seconds_sum{class=\"default\"}", "0.04");
  }
  expo_close(&w);
}

/* views by terminal status: series for the statuses that occurred */
TEST(status_view_families) {
  expo w;
  if (expo_open(&w)) {
    const char *p = w.p, *o = w.o;
    EXPECT_CONTAINS(p, "# TYPE llm_time_to_first_token_by_status_seconds histogram\n");
    EXPECT_CONTAINS(o, "# UNIT llm_request_duration_by_status_seconds seconds\n");
    expect_sample(p, "llm_time_to_first_token_by_status_seconds_count{class=\"default\",status=\"completed\"}", "1");
    expect_sample(o, "llm_time_to_first_token_by_status_seconds_sum{class=\"default\",status=\"completed\"}", "0.05");
    expect_sample(p, "llm_time_to_first_token_by_status_seconds_count{class=\"default\",status=\"cancelled\"}", "0");
    expect_sample(p, "llm_request_duration_by_status_seconds_sum{class=\"default\",status=\"cancelled\"}", "2.0");
    expect_sample(o, "llm_time_per_output_token_by_status_seconds_count{class=\"default\",status=\"completed\"}", "1");
    expect_sample(p, "llm_request_output_tokens_by_status_sum{class=\"default\",status=\"completed\"}", "4");
    EXPECT_FALSE(strstr(p, "status=\"error\",le=") != NULL); /* no stream ended in error */
    EXPECT_FALSE(strstr(o, "_by_status_seconds_count{class=\"default\",status=\"error\"}") != NULL);
  }
  expo_close(&w);
}

/* stale hook calls: the registry's, no class label */
TEST(stale_hook_calls_family) {
  expo w;
  if (expo_open(&w)) {
    EXPECT_CONTAINS(w.p, "# TYPE llm_stale_hook_calls_total counter\n");
    EXPECT_CONTAINS(w.o, "# TYPE llm_stale_hook_calls counter\n");
    EXPECT_CONTAINS(w.p, "\nllm_stale_hook_calls_total 1\n");
    EXPECT_CONTAINS(w.o, "\nllm_stale_hook_calls_total 1\n");
  }
  expo_close(&w);
}

/* default bounds: OTel for TTFT (16 + Inf), R10 fine grid elsewhere (62 + Inf) */
TEST(default_bucket_bounds) {
  expo w;
  if (expo_open(&w)) {
    const char *p = w.p;
    EXPECT_EQ_U64(22, count_lines_with(p, "gen_ai_server_time_to_first_token_seconds_bucket{class=\"default\","));
    EXPECT_EQ_U64(14, count_lines_with(p, "gen_ai_server_time_per_output_token_seconds_bucket{class=\"default\","));
    EXPECT_EQ_U64(16, count_lines_with(p, "gen_ai_server_request_duration_seconds_bucket{class=\"default\","));
    /* the tail: TTFT and E2E reach past 120 s (issue 17) */
    EXPECT_CONTAINS(p, "gen_ai_server_time_to_first_token_seconds_bucket{class=\"default\",le=\"120.0\"} 1\n");
    EXPECT_CONTAINS(p, "gen_ai_server_request_duration_seconds_bucket{class=\"default\",le=\"163.84\"} 2\n");
    EXPECT_EQ_U64(63, count_lines_with(p, "llm_inter_token_latency_seconds_bucket{class=\"default\","));
    EXPECT_CONTAINS(p, "gen_ai_server_time_to_first_token_seconds_bucket{class=\"default\",le=\"0.001\"} 0\n");
    EXPECT_CONTAINS(p, "gen_ai_server_time_to_first_token_seconds_bucket{class=\"default\",le=\"7.5\"} 1\n");
    EXPECT_CONTAINS(p, "gen_ai_server_request_duration_seconds_bucket{class=\"default\",le=\"81.92\"} 2\n");
    EXPECT_CONTAINS(p, "llm_inter_token_latency_seconds_bucket{class=\"default\",le=\"0.0315\"} 0\n");
    /* the 40 ms gap: its fine bucket straddles 0.04 (not a fine-bucket
     * edge), so it counts from the next bound on, min and max or not
     * (a rule that looked at max made counts fall later: issue 17) */
    EXPECT_CONTAINS(p, "llm_inter_token_latency_seconds_bucket{class=\"default\",le=\"0.04\"} 0\n");
    EXPECT_CONTAINS(p, "llm_inter_token_latency_seconds_bucket{class=\"default\",le=\"0.05\"} 1\n");
    EXPECT_CONTAINS(p, "llm_inter_token_latency_seconds_bucket{class=\"default\",le=\"630.0\"} 1\n");
    EXPECT_CONTAINS(p, "llm_request_output_tokens_bucket{class=\"default\",le=\"0.0\"} 1\n");
    EXPECT_CONTAINS(p, "llm_request_output_tokens_bucket{class=\"default\",le=\"4.0\"} 2\n");
  }
  expo_close(&w);
}

/* buckets monotone, +Inf == _count; every line of either format ends with a
 * newline and no family repeats */
TEST(histograms_and_lines_well_formed) {
  expo w;
  if (expo_open(&w)) {
    check_histograms(w.p);
    check_histograms(w.o);
    EXPECT_TRUE(w.p[strlen(w.p) - 1] == '\n');
    EXPECT_EQ_U64(1, count_lines_with(w.p, "# TYPE llm_inter_token_latency_seconds "));
    EXPECT_EQ_U64(1, count_lines_with(w.o, "# TYPE llm_requests_ended "));
  }
  expo_close(&w);
}

TEST(label_escaping_and_utf8) {
  ttft_config c;
  ttft_config_init(&c);
  ttft_label l[3] = {{"replica", "a\"b\\c\nd \xC3\xBC\xF0\x9F\x98\x80"},
                     {"region", "}{,=\"\\n"},
                     {"bad_utf8", "x\xFF\xC3(y"}};
  c.const_labels = l;
  c.n_const_labels = 3;
  c.model = "m\"o\\del\n";
  c.start_point = "client \"send\"";
  ttft_registry *r = ttft_registry_new(&c);
  if (!r) {
    /* the registry may refuse invalid UTF-8; then try without that label */
    fprintf(stderr, "   registry refused invalid UTF-8 in a label value; testing without it\n");
    c.n_const_labels = 2;
    r = ttft_registry_new(&c);
  }
  EXPECT_NOT_NULL(r);
  if (!r) return;
  int cls = ttft_class_add(r, "chat.v2:x-1", NULL);
  EXPECT_GE_U64((uint64_t)(cls < 0 ? 0 : cls), 1);
  ttft_request rq; /* a class is exported once it saw a begin */
  ttft_request_init(&rq);
  rq.class_id = cls;
  EXPECT_TRUE(ttft_begin_ex(r, &rq, T0) != 0);
  ttft_snapshot *s = ttft_snapshot_take(r);
  for (int om = 0; om < 2; om++) {
    char *t = render(s, om ? TTFT_FORMAT_OPENMETRICS : TTFT_FORMAT_PROMETHEUS);
    if (!t) continue;
    const char *lbl = "{class=\"chat.v2:x-1\",model=\"m\\\"o\\\\del\\n\","
                      "replica=\"a\\\"b\\\\c\\nd \xC3\xBC\xF0\x9F\x98\x80\","
                      "region=\"}{,=\\\"\\\\n\"";
    EXPECT_CONTAINS(t, lbl);
    EXPECT_CONTAINS(t, "start_point=\"client \\\"send\\\"\"");
    if (c.n_const_labels == 3)
      EXPECT_CONTAINS(t, ",bad_utf8=\"x\xEF\xBF\xBD\xEF\xBF\xBD(y\"");
    /* no raw newline inside any sample line: every line starts with a
     * letter or '#' */
    for (const char *p = t; *p; p = strchr(p, '\n') + 1) {
      EXPECT_TRUE((*p >= 'a' && *p <= 'z') || *p == '#');
      if (!strchr(p, '\n')) break;
    }
    check_histograms(t);
    free(t);
  }
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TEST(namespace_and_summaries) {
  ttft_config c;
  ttft_config_init(&c);
  c.metric_namespace = "myapp_";
  c.prom_summaries = 1;
  c.export_idle_classes = 1; /* "default" stays empty: its summary is NaN */
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  if (!r) return;
  int chat = ttft_class_add(r, "chat", NULL);
  ttft_request rq;
  ttft_request_init(&rq);
  rq.class_id = chat;
  uint64_t t = T0;
  for (int i = 1; i <= 1000; i++) {
    ttft_seq q = ttft_begin_ex(r, &rq, t);
    ttft_token_emitted(r, q, 1, t + (uint64_t)i * 1000000);
    ttft_stream_end(r, q, TTFT_COMPLETED, t + (uint64_t)i * 1000000 + 5);
    t += UINT64_C(2000000000);
  }
  ttft_snapshot *s = ttft_snapshot_take(r);
  for (int om = 0; om < 2; om++) {
    char *txt = render(s, om ? TTFT_FORMAT_OPENMETRICS : TTFT_FORMAT_PROMETHEUS);
    if (!txt) continue;
    EXPECT_CONTAINS(txt, "\nmyapp_inter_token_latency_seconds_bucket{");
    EXPECT_CONTAINS(txt, "\ngen_ai_server_time_to_first_token_seconds_bucket{");
    EXPECT_FALSE(strstr(txt, "llm_") != NULL);
    EXPECT_CONTAINS(txt, "# TYPE myapp_time_to_first_token_quantiles_seconds summary\n");
    /* the quantile the exposition prints is the library's own */
    uint64_t q99 = ttft_snapshot_class_quantile(s, chat, TTFT_METRIC_TTFT, 0.99);
    char want[64];
    snprintf(want, sizeof want, "%llu.%09llu", (unsigned long long)(q99 / 1000000000u),
             (unsigned long long)(q99 % 1000000000u));
    size_t L = strlen(want);
    while (want[L - 1] == '0' && want[L - 2] != '.') want[--L] = '\0';
    expect_sample(txt, "myapp_time_to_first_token_quantiles_seconds{class=\"chat\",quantile=\"0.99\"}", want);
    EXPECT_NEAR_REL(0.990, strtod(want, NULL), 0.005);
    expect_sample(txt, "myapp_time_to_first_token_quantiles_seconds_count{class=\"chat\"}", "1000");
    /* an empty class has no quantiles: NaN */
    expect_sample(txt, "myapp_time_to_first_token_quantiles_seconds{class=\"default\",quantile=\"0.5\"}", "NaN");
    expect_sample(txt, "myapp_request_output_tokens_quantiles{class=\"chat\",quantile=\"0.999\"}", "1");
    EXPECT_CONTAINS(txt, "# TYPE myapp_inter_token_latency_per_token_quantiles_seconds summary\n");
    free(txt);
  }
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TEST(snprintf_rules) {
  ttft_registry *r = ttft_registry_new(NULL);
  EXPECT_NOT_NULL(r);
  if (!r) return;
  ttft_snapshot *s = ttft_snapshot_take(r);
  for (int f = TTFT_FORMAT_PROMETHEUS; f <= TTFT_FORMAT_OPENMETRICS; f++) {
    long n = ttft_snapshot_format(s, (ttft_format)f, NULL, 0);
    EXPECT_GE_U64((uint64_t)(n < 0 ? 0 : n), 1000);
    char *full = malloc((size_t)n + 1), *part = malloc((size_t)n + 1);
    if (!full || !part) {
      free(full);
      free(part);
      continue;
    }
    EXPECT_EQ_INT(n, ttft_snapshot_format(s, (ttft_format)f, full, (size_t)n + 1));
    memset(part, 'x', (size_t)n + 1);
    size_t cap = (size_t)n / 2;
    EXPECT_EQ_INT(n, ttft_snapshot_format(s, (ttft_format)f, part, cap));
    EXPECT_EQ_INT('\0', part[cap - 1]);
    EXPECT_TRUE(memcmp(part, full, cap - 1) == 0);
    EXPECT_EQ_INT('x', part[cap]); /* nothing written past cap */
    memset(part, 'x', 4);
    EXPECT_EQ_INT(n, ttft_snapshot_format(s, (ttft_format)f, part, 1));
    EXPECT_EQ_INT('\0', part[0]);
    EXPECT_EQ_INT('x', part[1]);
    /* exactly n bytes: truncated by one (the NUL needs room) */
    EXPECT_EQ_INT(n, ttft_snapshot_format(s, (ttft_format)f, part, (size_t)n));
    EXPECT_EQ_INT('\0', part[n - 1]);
    EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_format(s, (ttft_format)f, NULL, 10));
    EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_format(NULL, (ttft_format)f, full, (size_t)n + 1));
    free(full);
    free(part);
  }
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TU_MAIN()
