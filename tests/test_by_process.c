/*
 * test_by_process.c — the per-process view (TTFT_GATHER_BY_PROCESS) in
 * every exposition and report. A gathered snapshot with nparts > 0 is built
 * here by hand, as the gatherer builds it: three registries with different
 * workloads and class sets are snapshotted, merged with
 * ttft_snapshot_merge for the top level, and the three snapshots attached
 * as its parts (p1, p2, p3).
 *
 *   unchanged      with nparts == 0 every format is byte-identical to a
 *                  render of the same snapshot before the parts were attached
 *   text           Prometheus 0.0.4 and OpenMetrics: one # TYPE per family;
 *                  every sample of a counter, histogram or summary family
 *                  carries process="pN" right after class (the gatherer's
 *                  own families excepted); values per process are the
 *                  part's (requests_started_total{class,process}); the sum
 *                  over processes of every such sample (bucket, count, sum,
 *                  total) equals the merged render's; exemplars come from
 *                  each part's own slowest lists; promtool accepts the 0.0.4
 *                  text, the Python OpenMetrics parser the OpenMetrics text
 *   protobuf       decodes; one MetricFamily per name; each Metric has the
 *                  process label; per-process sums equal the merged view
 *                  (counters, histogram counts, sums, classic buckets)
 *   json, text     "processes" with one object per part (python3 json); the
 *                  text report ends with the per-process table
 *   reserved       a constant label named "process" is refused
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ttft.h"
#include "task.h"
#include "prom_series.h"
/* the parts of a snapshot (nparts, part, part_name), set here by hand */
#include "common/snapshot.h"

#define MS 1000000ull
#define T0 (1000ull * 1000 * MS)

/* ------------------------------------------------------------ workloads */

static void stream(ttft_registry *r, int cls, uint64_t t, int ntok, uint64_t ttft, uint64_t gap,
                   const char *trace, ttft_status st) {
  ttft_request q;
  ttft_request_init(&q);
  q.class_id = cls;
  q.prompt_tokens = (uint32_t)(100 + ntok * 300);
  q.prefix_hit = ntok % 3 == 0 ? -1 : ntok % 2;
  q.trace_id = trace;
  ttft_seq s = ttft_begin_ex(r, &q, t);
  EXPECT_TRUE(s != 0);
  t += ttft;
  for (int k = 0; k < ntok; k++, t += gap) EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, st, t));
}

/* Registry `which` (0..2): its own classes and workload. */
static ttft_registry *workload(int which) {
  ttft_label cl = {"region", "eu"};
  ttft_config c;
  ttft_config_init(&c);
  c.metric_namespace = "llm_";
  c.model = "m1";
  c.const_labels = &cl;
  c.n_const_labels = 1;
  c.prom_summaries = 1;
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  if (!r) exit(1);
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.ttft_ns = 200 * MS;
  char trace[33];
  if (which == 0) { /* chat only, fast */
    int chat = ttft_class_add(r, "chat", &slo);
    for (int i = 0; i < 40; i++) {
      snprintf(trace, sizeof trace, "%032x", 0x100 + i);
      stream(r, chat, T0 + (uint64_t)i * 10 * MS, 2 + i % 5, (20 + (uint64_t)i) * MS, 15 * MS,
             trace, TTFT_COMPLETED);
    }
  } else if (which == 1) { /* chat and batch, slower, some errors and a stall */
    int batch = ttft_class_add(r, "batch", NULL);
    int chat = ttft_class_add(r, "chat", &slo);
    for (int i = 0; i < 30; i++) {
      snprintf(trace, sizeof trace, "%032x", 0x200 + i);
      stream(r, i % 2 ? batch : chat, T0 + (uint64_t)i * 10 * MS, 1 + i % 4,
             (300 + 20 * (uint64_t)i) * MS, (i == 7 ? 9000 : 40) * MS, trace,
             i % 9 == 0 ? TTFT_ERROR : TTFT_COMPLETED);
    }
    (void)ttft_begin(r, T0); /* one in flight */
  } else { /* the default class and "embed" */
    int embed = ttft_class_add(r, "embed", NULL);
    for (int i = 0; i < 25; i++)
      stream(r, i % 3 ? 0 : embed, T0 + (uint64_t)i * 10 * MS, 1 + i % 3, (5 + (uint64_t)i) * MS,
             5 * MS, NULL, i % 4 == 0 ? TTFT_CANCELLED : TTFT_COMPLETED);
  }
  return r;
}

/* ------------------------------------------------------------ the view */

static const char *const NAMES[3] = {"p1", "p2", "p3"};

/* Attach parts[0..n) to top with top's allocator (freed with it). */
static void attach_parts(ttft_snapshot *top, ttft_snapshot **parts, uint32_t n) {
  top->part = top->alloc.alloc(top->alloc.ctx, n * sizeof *top->part);
  top->part_name = top->alloc.alloc(top->alloc.ctx, n * sizeof *top->part_name);
  if (!top->part || !top->part_name) abort();
  for (uint32_t i = 0; i < n; i++) {
    top->part[i] = parts[i];
    memset(top->part_name[i], 0, sizeof top->part_name[i]);
    snprintf(top->part_name[i], sizeof top->part_name[i], "%s", NAMES[i]);
  }
  top->nparts = n;
}

typedef struct view {
  ttft_registry *r[3];
  ttft_snapshot *part[3]; /* owned by top once attached; also kept here */
  ttft_snapshot *top;     /* merged, then with parts */
  ttft_snapshot *merged;  /* the same merge, never given parts */
} view;

static void view_build(view *v, int attach) {
  int err = 0;
  for (int i = 0; i < 3; i++) {
    v->r[i] = workload(i);
    v->part[i] = ttft_snapshot_take(v->r[i]);
    EXPECT_NOT_NULL(v->part[i]);
  }
  ttft_snapshot *m01 = ttft_snapshot_merge(v->part[0], v->part[1], &err);
  EXPECT_NOT_NULL(m01);
  v->top = ttft_snapshot_merge(m01, v->part[2], &err);
  v->merged = ttft_snapshot_merge(m01, v->part[2], &err);
  EXPECT_NOT_NULL(v->top);
  EXPECT_NOT_NULL(v->merged);
  ttft_snapshot_free(m01);
  if (!v->top || !v->merged) exit(1);
  if (attach) attach_parts(v->top, v->part, 3);
}

static void view_free(view *v) {
  if (v->top && !v->top->nparts)
    for (int i = 0; i < 3; i++) ttft_snapshot_free(v->part[i]);
  ttft_snapshot_free(v->top); /* and the parts */
  ttft_snapshot_free(v->merged);
  for (int i = 0; i < 3; i++) ttft_registry_free(v->r[i]);
}

/* the whole output of format f, malloc'd and NUL-terminated; *len its length */
static char *render(const ttft_snapshot *s, ttft_format f, long *len) {
  long n = ttft_snapshot_format(s, f, NULL, 0);
  EXPECT_TRUE(n > 0);
  char *buf = malloc((size_t)(n > 0 ? n : 0) + 1);
  if (!buf) abort();
  long m = ttft_snapshot_format(s, f, buf, (size_t)(n > 0 ? n : 0) + 1);
  EXPECT_EQ_INT(n, m);
  *len = n > 0 ? n : 0;
  buf[*len] = 0;
  return buf;
}

static int write_file(const char *path, const char *buf, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  int ok = fwrite(buf, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

/* ------------------------------------------------------------ tests */

TEST(no_parts_is_unchanged) {
  view v;
  memset(&v, 0, sizeof v);
  view_build(&v, 0);
  for (int f = 0; f < TTFT_FORMAT_COUNT_; f++) {
    long a, b;
    char *before = render(v.top, (ttft_format)f, &a);
    /* parts attached, then taken away again: nparts == 0 is the old output */
    attach_parts(v.top, v.part, 3);
    v.top->nparts = 0;
    char *after = render(v.top, (ttft_format)f, &b);
    EXPECT_EQ_INT(a, b);
    EXPECT_TRUE(a == b && memcmp(before, after, (size_t)a) == 0);
    /* and the per-process render differs (it has the parts) */
    v.top->nparts = 3;
    long c;
    char *per = render(v.top, (ttft_format)f, &c);
    EXPECT_TRUE(c > a);
    v.top->nparts = 0;
    v.top->alloc.free(v.top->alloc.ctx, v.top->part);
    v.top->alloc.free(v.top->alloc.ctx, v.top->part_name);
    v.top->part = NULL;
    v.top->part_name = NULL;
    free(before), free(after), free(per);
  }
  view_free(&v);
}

/* Every # TYPE name once. */
static void types_once(const char *t, const char *what) {
  char seen[256][128];
  size_t n = 0;
  for (const char *p = strstr(t, "# TYPE "); p; p = strstr(p + 1, "\n# TYPE ")) {
    if (*p == '\n') p++;
    const char *nm = p + 7, *sp = strchr(nm, ' ');
    if (!sp || (size_t)(sp - nm) >= sizeof seen[0] || n == 256) break;
    char name[128];
    memcpy(name, nm, (size_t)(sp - nm));
    name[sp - nm] = 0;
    for (size_t i = 0; i < n; i++)
      if (!strcmp(seen[i], name)) {
        fprintf(stderr, "%s: # TYPE %s twice\n", what, name);
        EXPECT_TRUE(0);
      }
    strcpy(seen[n++], name);
  }
  EXPECT_GE_U64(n, 40);
}

/* key without its process label: `,process="pN"` or `process="pN",`
 * (text) / `process=pN,` (protobuf keys of prom_series.h); *which gets
 * N - 1, or -1 when the key has no process label. */
static void strip_process(const char *key, char *out, size_t cap, int *which, int text) {
  const char *p = strstr(key, text ? "process=\"p" : "process=p");
  *which = -1;
  snprintf(out, cap, "%s", key);
  if (!p) return;
  size_t off = (size_t)(p - key), len = text ? 12 : 11; /* process="pN" | process=pN, */
  *which = p[text ? 10 : 9] - '1';
  if (text) {
    if (p[-1] == ',') off--, len++;
    else if (p[len] == ',') len++;
  }
  snprintf(out, cap, "%.*s%s", (int)off, key, key + off + len);
}

/* The sum over processes of every sample of per equals the value of the
 * same sample (without process) in merged; every sample of per has a
 * process label unless it is one of the gatherer's own. */
static void sums_match(const ts_scrape *per, const ts_scrape *merged, int text, const char *what) {
  ts_scrape acc;
  memset(&acc, 0, sizeof acc);
  unsigned unlabelled = 0;
  for (size_t i = 0; i < per->n; i++) {
    char key[512];
    int which;
    strip_process(per->v[i].key, key, sizeof key, &which, text);
    if (which < 0) {
      unlabelled++;
      int own = strstr(key, "gather_segments_skipped") || strstr(key, "gather_processes_exited");
      if (!own) fprintf(stderr, "%s: %s has no process label\n", what, per->v[i].key);
      EXPECT_TRUE(own);
    }
    EXPECT_TRUE(which < 3);
    ts_series *hit = NULL;
    for (size_t j = 0; j < acc.n; j++)
      if (!strcmp(acc.v[j].key, key)) hit = &acc.v[j];
    if (!hit) {
      ts_series se;
      memset(&se, 0, sizeof se);
      snprintf(se.key, sizeof se.key, "%s", key);
      se.kind = per->v[i].kind;
      se.nclassic = per->v[i].nclassic;
      memcpy(se.le, per->v[i].le, sizeof se.le);
      ts_push(&acc, &se);
      hit = &acc.v[acc.n - 1];
    }
    hit->value += per->v[i].value;
    hit->sum += per->v[i].sum;
    hit->count += per->v[i].count;
    for (size_t k = 0; k < per->v[i].nclassic && k < TTFT_MAX_PROM_BUCKETS + 1; k++)
      hit->cum[k] += per->v[i].cum[k];
  }
  EXPECT_EQ_U64(text ? 2 : 2, unlabelled);
  /* the same keys as the merged render, with the same values */
  EXPECT_EQ_U64(merged->n, acc.n);
  unsigned bad = 0;
  for (size_t j = 0; j < acc.n; j++) {
    const ts_series *m = ts_find(merged, acc.v[j].key);
    if (!m) {
      if (bad++ < 5) fprintf(stderr, "%s: %s not in the merged view\n", what, acc.v[j].key);
      continue;
    }
    double tol = 1e-9 * (m->value > 1 ? m->value : 1), tols = 1e-9 * (m->sum > 1 ? m->sum : 1);
    int ok = fabs(m->value - acc.v[j].value) <= tol && fabs(m->sum - acc.v[j].sum) <= tols &&
             m->count == acc.v[j].count;
    for (size_t k = 0; k < m->nclassic; k++) ok &= m->cum[k] == acc.v[j].cum[k];
    if (!ok && bad++ < 5)
      fprintf(stderr, "%s: %s merged %.9g (count %llu) vs sum over processes %.9g (count %llu)\n",
              what, acc.v[j].key, m->value + m->sum, (unsigned long long)m->count,
              acc.v[j].value + acc.v[j].sum, (unsigned long long)acc.v[j].count);
  }
  EXPECT_EQ_U64(0, bad);
  EXPECT_GE_U64(acc.n, text ? 300 : 200);
  ts_free(&acc);
}

static int class_id_of(const ttft_snapshot *s, const char *name) {
  for (int i = 0; i < ttft_snapshot_classes(s); i++)
    if (!strcmp(ttft_snapshot_class_name(s, i), name)) return i;
  return -1;
}

/* The value of the text sample `key` (name and labels as written). */
static double sample(const char *t, const char *key) {
  size_t k = strlen(key);
  for (const char *p = t; (p = strstr(p, key)) != NULL; p++)
    if ((p == t || p[-1] == '\n') && p[k] == ' ') return strtod(p + k + 1, NULL);
  fprintf(stderr, "no sample %s\n", key);
  return -1;
}

static void check_text(view *v, int om) {
  ttft_format f = om ? TTFT_FORMAT_OPENMETRICS : TTFT_FORMAT_PROMETHEUS;
  const char *what = om ? "openmetrics" : "prometheus";
  long n, nm;
  char *t = render(v->top, f, &n);
  char *m = render(v->merged, f, &nm);
  types_once(t, what);
  /* the number of # TYPE lines is the merged render's */
  size_t ta = 0, tb = 0;
  for (const char *p = t; (p = strstr(p, "# TYPE ")) != NULL; p++) ta++;
  for (const char *p = m; (p = strstr(p, "# TYPE ")) != NULL; p++) tb++;
  EXPECT_EQ_U64(tb, ta);

  /* per process values, the label right after class */
  const char *sfx = om ? "_total" : "_total"; /* samples keep _total in both */
  char key[256];
  uint64_t begun[3][2];
  for (int p = 0; p < 3; p++) {
    int id = class_id_of(v->part[p], "chat");
    begun[p][0] = id >= 0 ? ttft_snapshot_class_counter(v->part[p], id, TTFT_COUNTER_BEGUN) : 0;
    snprintf(key, sizeof key, "llm_requests_started%s{class=\"chat\",process=\"%s\",model=\"m1\",region=\"eu\"}",
             sfx, NAMES[p]);
    if (id >= 0) EXPECT_EQ_DBL((double)begun[p][0], sample(t, key));
    else EXPECT_TRUE(strstr(t, key) == NULL); /* p3 has no chat class */
    snprintf(key, sizeof key, "llm_requests_in_flight{process=\"%s\",model=\"m1\",region=\"eu\"}",
             NAMES[p]);
    EXPECT_EQ_DBL((double)ttft_snapshot_gauge(v->part[p], TTFT_GAUGE_INFLIGHT), sample(t, key));
  }
  EXPECT_EQ_U64(40, begun[0][0]);
  EXPECT_EQ_U64(15, begun[1][0]);
  /* classes by name within each part: embed only in p3, batch only in p2 */
  EXPECT_CONTAINS(t, "llm_requests_started_total{class=\"embed\",process=\"p3\",");
  EXPECT_TRUE(strstr(t, "{class=\"embed\",process=\"p1\"") == NULL);
  EXPECT_CONTAINS(t, "llm_requests_started_total{class=\"batch\",process=\"p2\",");
  /* info and a registry-wide counter per process; the gatherer's own once */
  EXPECT_CONTAINS(t, "token_point=\"detokenized_flush\",version=\"");
  snprintf(key, sizeof key, "llm_measurement_info{start_point=");
  size_t ninfo = 0;
  for (const char *p = t; (p = strstr(p, key)) != NULL; p++) ninfo++;
  EXPECT_EQ_U64(3, ninfo);
  EXPECT_CONTAINS(t, "llm_stale_hook_calls_total{process=\"p2\",model=\"m1\",region=\"eu\"} 0\n");
  EXPECT_CONTAINS(t, "\nllm_gather_segments_skipped_total{model=\"m1\",region=\"eu\"} 0\n");
  EXPECT_CONTAINS(t, "\nllm_gather_processes{model=\"m1\",region=\"eu\"} 0\n");
  EXPECT_CONTAINS(t, "llm_stalls_total{class=\"batch\",process=\"p2\",model=\"m1\",region=\"eu\",cause=\"unknown\"} 3\n");
  EXPECT_CONTAINS(t, "llm_engine_step_seconds_count{process=\"p1\",model=\"m1\",region=\"eu\",prefill=\"false\"} 0\n");
  EXPECT_CONTAINS(t, "llm_stall_budget_seconds{class=\"embed\",process=\"p3\",");
  EXPECT_CONTAINS(t, "llm_slo_budget_seconds{class=\"chat\",process=\"p1\",model=\"m1\",region=\"eu\",slo=\"ttft\"} 0.2\n");
  EXPECT_CONTAINS(t, "llm_time_to_first_token_by_status_seconds_count{class=\"chat\",process=\"p2\",model=\"m1\",region=\"eu\",status=\"error\"}");
  EXPECT_CONTAINS(t, "llm_time_to_first_token_by_prefix_cache_seconds_count{process=\"p3\",");
  EXPECT_CONTAINS(t, "llm_time_to_first_token_by_prompt_length_seconds_count{process=\"p1\",");
  EXPECT_CONTAINS(t, "llm_time_to_first_token_quantiles_seconds{class=\"chat\",process=\"p1\",model=\"m1\",region=\"eu\",quantile=\"0.5\"}");
  if (om) {
    /* exemplars from each part's own slowest lists: p1's trace ids on p1's
     * buckets, p2's on p2's, none on p3 (no trace ids) */
    unsigned ex[3] = {0, 0, 0};
    for (const char *p = t; (p = strstr(p, "gen_ai_server_time_to_first_token_seconds_bucket{")) != NULL; p++) {
      const char *eol = strchr(p, '\n'), *h = strstr(p, " # {trace_id=\"");
      if (!h || h > eol) continue;
      const char *pr = strstr(p, "process=\"p");
      int w = pr && pr < eol ? pr[10] - '1' : -1;
      EXPECT_TRUE(w >= 0 && w < 2);
      if (w < 0 || w > 2) continue;
      ex[w]++;
      /* 0x1xx for p1, 0x2xx for p2 */
      EXPECT_EQ_INT(w + 1, h[14 + 29] - '0');
    }
    EXPECT_GT_U64(ex[0], 0);
    EXPECT_GT_U64(ex[1], 0);
    EXPECT_EQ_U64(0, ex[2]);
  }

  /* every counter/histogram/summary sample summed over processes */
  ts_scrape sp, sm;
  memset(&sp, 0, sizeof sp);
  memset(&sm, 0, sizeof sm);
  ts_collect_text(t, &sp);
  ts_collect_text(m, &sm);
  EXPECT_FALSE(sp.bad);
  EXPECT_FALSE(sm.bad);
  sums_match(&sp, &sm, 1, what);
  ts_free(&sp);
  ts_free(&sm);

  /* external validators */
  char dir[] = "/tmp/ttft_by_process_XXXXXX";
  EXPECT_NOT_NULL(mkdtemp(dir));
  char path[256], cmd[1024];
  snprintf(path, sizeof path, "%s/x.%s", dir, om ? "om" : "prom");
  EXPECT_TRUE(write_file(path, t, (size_t)n));
  int ci = getenv("CI") && *getenv("CI");
  if (!om) {
    int have = system("command -v promtool >/dev/null 2>&1") == 0;
    if (!have && ci) {
      fprintf(stderr, "promtool not found (Debian package prometheus); CI requires it\n");
      EXPECT_TRUE(have);
    } else if (!have) {
      fprintf(stderr, "note: promtool not found, not checked here (CI checks it)\n");
    } else {
      /* exit 0 and no output at all: no parse error, no lint */
      snprintf(cmd, sizeof cmd, "out=$(promtool check metrics < %s 2>&1); rc=$?; "
                                "[ $rc -eq 0 ] && [ -z \"$out\" ] || { echo \"$out\" | head -5 >&2; exit 1; }",
               path);
      EXPECT_EQ_INT(0, system(cmd));
    }
  } else {
    /* the reference client's OpenMetrics parser (python3-prometheus-client) */
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import prometheus_client' 2>/dev/null || python3 -c 'import prometheus_client' 2>/dev/null");
    int have = system(cmd) == 0;
    if (!have && ci) {
      fprintf(stderr, "python3 prometheus_client not found; CI requires it\n");
      EXPECT_TRUE(have);
    } else if (!have) {
      fprintf(stderr, "note: prometheus_client not found, OpenMetrics not parsed here (CI does)\n");
    } else {
      snprintf(cmd, sizeof cmd,
               "for py in /usr/bin/python3 python3; do $py -c 'import prometheus_client' 2>/dev/null && break; done; "
               "$py -c 'import sys\n"
               "from prometheus_client.openmetrics.parser import text_string_to_metric_families as p\n"
               "fams = list(p(open(sys.argv[1]).read()))\n"
               "names = [f.name for f in fams]\n"
               "assert len(names) == len(set(names)), \"a family twice\"\n"
               "n = sum(1 for f in fams for s in f.samples if \"process\" in s.labels)\n"
               "assert n > 300, n\n' %s",
               path);
      EXPECT_EQ_INT(0, system(cmd));
    }
  }
  unlink(path);
  rmdir(dir);
  free(t);
  free(m);
}

TEST(prometheus_text) {
  view v;
  memset(&v, 0, sizeof v);
  view_build(&v, 1);
  check_text(&v, 0);
  view_free(&v);
}

TEST(openmetrics) {
  view v;
  memset(&v, 0, sizeof v);
  view_build(&v, 1);
  check_text(&v, 1);
  view_free(&v);
}

/* Every family's name once; every Metric labelled process (but the
 * gatherer's own); sums over processes equal the merged view. */
TEST(protobuf) {
  view v;
  memset(&v, 0, sizeof v);
  view_build(&v, 1);
  long n, nm;
  unsigned char *b = (unsigned char *)render(v.top, TTFT_FORMAT_PROMETHEUS_PROTOBUF, &n);
  unsigned char *mb = (unsigned char *)render(v.merged, TTFT_FORMAT_PROMETHEUS_PROTOBUF, &nm);
  rd r = {b, b + n, 0};
  char names[128][128];
  size_t nf = 0, unlabelled = 0, metrics = 0;
  while (r.p < r.end && nf < 128) {
    uint64_t len = rd_varint(&r);
    if (r.bad || len > (uint64_t)(r.end - r.p)) break;
    rd m = {r.p, r.p + len, 0};
    r.p += len;
    fld f;
    char fam[128] = "";
    while (rd_next(&m, &f)) {
      if (f.no == 1) {
        size_t l = (size_t)(f.sub.end - f.sub.p);
        if (l >= sizeof fam) l = sizeof fam - 1;
        memcpy(fam, f.sub.p, l);
        fam[l] = 0;
        for (size_t i = 0; i < nf; i++)
          if (!strcmp(names[i], fam)) {
            fprintf(stderr, "family %s twice\n", fam);
            EXPECT_TRUE(0);
          }
        strcpy(names[nf++], fam);
      }
      if (f.no != 4) continue;
      metrics++;
      rd met = f.sub;
      fld g;
      int has = 0, after_class = 0, prev_class = 0;
      while (rd_next(&met, &g)) {
        if (g.no != 1) continue;
        rd lp = g.sub;
        fld x;
        int is_proc = 0, is_class = 0;
        while (rd_next(&lp, &x))
          if (x.no == 1) is_proc = str_is(&x.sub, "process"), is_class = str_is(&x.sub, "class");
        if (is_proc) has = 1, after_class = prev_class;
        prev_class = is_class;
      }
      (void)after_class;
      if (!has) {
        unlabelled++;
        int own = strstr(fam, "gather_segments_skipped") || strstr(fam, "gather_processes_exited") ||
                  !strcmp(fam, "llm_gather_processes");
        if (!own) fprintf(stderr, "protobuf: a metric of %s has no process label\n", fam);
        EXPECT_TRUE(own);
      }
    }
    EXPECT_FALSE(m.bad);
  }
  EXPECT_FALSE(r.bad);
  EXPECT_TRUE(r.p == r.end);
  EXPECT_EQ_U64(3, unlabelled);
  EXPECT_GE_U64(metrics, 300);
  /* the merged stream has the same families */
  unsigned nfam_m = 0;
  rd rm = {mb, mb + nm, 0};
  while (rm.p < rm.end) {
    uint64_t len = rd_varint(&rm);
    if (rm.bad || len > (uint64_t)(rm.end - rm.p)) break;
    rm.p += len;
    nfam_m++;
  }
  EXPECT_EQ_U64(nfam_m, nf);

  ts_scrape sp, sm;
  memset(&sp, 0, sizeof sp);
  memset(&sm, 0, sizeof sm);
  ts_collect(b, (size_t)n, &sp);
  ts_collect(mb, (size_t)nm, &sm);
  EXPECT_FALSE(sp.bad);
  EXPECT_FALSE(sm.bad);
  sums_match(&sp, &sm, 0, "protobuf");
  ts_free(&sp);
  ts_free(&sm);
  free(b);
  free(mb);
  view_free(&v);
}

TEST(json_and_text) {
  view v;
  memset(&v, 0, sizeof v);
  view_build(&v, 1);
  long n;
  char *j = render(v.top, TTFT_FORMAT_JSON, &n);
  char dir[] = "/tmp/ttft_by_process_XXXXXX";
  EXPECT_NOT_NULL(mkdtemp(dir));
  char path[256], cmd[2048];
  snprintf(path, sizeof path, "%s/x.json", dir);
  EXPECT_TRUE(write_file(path, j, (size_t)n));
  /* parses; top level as before plus "processes"; each part's counters are
   * its own and add up to the merged ones */
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json, sys\n"
           "d = json.load(open(sys.argv[1]))\n"
           "assert d[\"schema\"] == \"ttft.snapshot/1\"\n"
           "ps = d[\"processes\"]\n"
           "assert [p[\"process\"] for p in ps] == [\"p1\", \"p2\", \"p3\"], ps\n"
           "assert all(\"processes\" not in p for p in ps)\n"
           "assert [p[\"counters\"][\"begun\"] for p in ps] == [40, 31, 25], [p[\"counters\"][\"begun\"] for p in ps]\n"
           "for k, v in d[\"counters\"].items():\n"
           "    assert v == sum(p[\"counters\"][k] for p in ps), k\n"
           "assert sorted(c[\"name\"] for c in ps[1][\"classes\"]) == [\"batch\", \"chat\", \"default\"]\n"
           "assert ps[1][\"gauges\"][\"inflight\"] == 1\n"
           "assert d[\"metrics\"][\"ttft\"][\"count\"] == sum(p[\"metrics\"][\"ttft\"][\"count\"] for p in ps)\n"
           "' %s",
           path);
  EXPECT_EQ_INT(0, system(cmd));
  unlink(path);
  rmdir(dir);
  free(j);

  char *t = render(v.top, TTFT_FORMAT_TEXT, &n);
  const char *tab = strstr(t, "per process");
  EXPECT_NOT_NULL(tab);
  if (tab) {
    EXPECT_CONTAINS(tab, "\np1                          40");
    EXPECT_CONTAINS(tab, "\np2                          31");
    EXPECT_CONTAINS(tab, "\np3                          25");
    /* lines within 100 columns */
    for (const char *p = tab; p && *p;) {
      const char *nl = strchr(p, '\n');
      size_t len = nl ? (size_t)(nl - p) : strlen(p);
      EXPECT_LE_U64(len, 100);
      p = nl ? nl + 1 : NULL;
    }
  }
  free(t);
  view_free(&v);
}

TEST(process_is_reserved) {
  ttft_label l = {"process", "x"};
  ttft_config c;
  ttft_config_init(&c);
  c.const_labels = &l;
  c.n_const_labels = 1;
  char why[256];
  EXPECT_ERR(TTFT_EINVAL, ttft_config_check(&c, why, sizeof why));
  EXPECT_CONTAINS(why, "\"process\" is reserved");
  EXPECT_NULL(ttft_registry_new(&c));
}

TU_MAIN()
