/*
 * format_otlp.c — a snapshot as an OTLP
 * opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest
 * (binary protobuf, the body of a POST to /v1/metrics). Field numbers are
 * those of opentelemetry-proto's metrics/v1/metrics.proto,
 * common/v1/common.proto, resource/v1/resource.proto and
 * collector/metrics/v1/metrics_service.proto.
 * Layer: report (src/README.md). Reads a snapshot (and the environment:
 * OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) only.
 *
 * One ResourceMetrics, one ScopeMetrics (scope "libttft", the library's
 * version), one Metric per family: the mapping, the attributes, the
 * temporality and the clock mapping are in docs/opentelemetry.md.
 *   histograms  ExponentialHistogram, scale = native_schema (clamped to
 *               -4 .. 8), the internal log-linear buckets mapped as the
 *               Prometheus native buckets are (report/pb.h; error bound in
 *               format_protobuf.c): OTLP index = native index - 1; the
 *               zero bucket counts the observations of exactly 0
 *               (zero_threshold 0); min and max only when exact
 *               (cumulative; a delta's are rebuilt from buckets).
 *   counters    Sum, is_monotonic, as_int (as_double above 2^63 - 1, and
 *               for the summed stall seconds).
 *   gauges      Gauge, as_int (as_double for seconds).
 *
 * ---- The encoder. Protobuf puts each submessage's length before it, and
 * OTLP nests eight deep (request, resource metrics, scope metrics, metric,
 * histogram, point, key-value, any-value), so counting each submessage
 * before writing it (format_protobuf.c's pb_message) would walk the
 * leaves 2^8 times. Here the whole request is walked twice: a counting
 * pass records every submessage's size in pre-order, the writing pass
 * reads them back in the same order. Both passes run the same code on the
 * same snapshot, so the orders agree. Scratch: the bucket maps and one
 * histogram's buckets (~97 KB) and the size list (8 bytes a submessage),
 * from the library's allocator; TTFT_ENOMEM without them.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report/format.h"
#include "report/pb.h"

#define OTLP_DELTA 1
#define OTLP_CUMULATIVE 2
#define MAX_DEPTH 12
#define MAX_RES_ATTRS 64

/* ---------------------------------------------------- the sized writer */

typedef struct ow {
  pb_out o;                 /* o.sb NULL: the counting pass */
  size_t *size;             /* submessage sizes, pre-order   */
  size_t nsize, cap, next;
  size_t start[MAX_DEPTH], slot[MAX_DEPTH];
  int depth, oom;
  const ttft_allocator *alloc;
} ow;

static size_t varint_len(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) v >>= 7, n++;
  return n;
}

static void m_begin(ow *w, unsigned field) {
  if (w->o.sb) { /* writing: the size the counting pass found */
    size_t n = w->next < w->nsize ? w->size[w->next] : 0;
    w->next++;
    pb_tag(&w->o, field, WT_LEN);
    pb_varint(&w->o, n);
    return;
  }
  if (w->nsize == w->cap && !w->oom) {
    size_t cap = w->cap ? w->cap * 2 : 1024;
    size_t *v = ttft__alloc(w->alloc, cap * sizeof *v);
    if (!v) w->oom = 1;
    else {
      if (w->nsize) memcpy(v, w->size, w->nsize * sizeof *v);
      ttft__free(w->alloc, w->size);
      w->size = v, w->cap = cap;
    }
  }
  TTFT_ASSERT(w->depth < MAX_DEPTH);
  w->slot[w->depth] = w->nsize < w->cap ? w->nsize : SIZE_MAX;
  w->start[w->depth++] = w->o.n;
  w->nsize++;
}

static void m_end(ow *w, unsigned field) {
  if (w->o.sb) return;
  size_t n = w->o.n - w->start[--w->depth];
  if (w->slot[w->depth] != SIZE_MAX) w->size[w->slot[w->depth]] = n;
  w->o.n += varint_len((uint64_t)field << 3 | WT_LEN) + varint_len(n);
}

/* ------------------------------------------------------------ context */

typedef struct rattr {
  char *key, *val; /* decoded, NUL-terminated (in ox.env_buf) */
} rattr;

typedef struct ox {
  const ttft_snapshot *s; /* the top snapshot: labels, settings */
  int delta;
  uint64_t t_start, t_now; /* every point's start and time, unix ns */
  int64_t offset;          /* realtime - library clock, at render   */
  int schema;
  int32_t *map[2]; /* [seconds] native index of each internal bucket */
  int32_t *key;
  uint64_t *cnt;
  const char *service;
  char *env_buf;
  uint32_t nres;
  rattr res[MAX_RES_ATTRS];
  uint32_t nconst;
  uint32_t const_idx[TTFT_MAX_CONST_LABELS];
} ox;

static uint64_t to_unix(const ox *x, uint64_t mono) { return mono + (uint64_t)x->offset; }

/* ------------------------------------------------ attributes (KeyValue) */

static void any_str(ow *w, const char *v, size_t cap) {
  m_begin(w, 2); /* KeyValue.value: AnyValue */
  pb_clean_str(&w->o, 1, v, cap); /* string_value */
  m_end(w, 2);
}

static void kv_str(ow *w, unsigned field, const char *k, const char *v, size_t cap) {
  m_begin(w, field);
  pb_clean_str(&w->o, 1, k, SIZE_MAX);
  any_str(w, v, cap);
  m_end(w, field);
}

/* ------------------------------------------------------------ resource */

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Percent-decode p[0..n) in place into dst (dst <= p); trims spaces and
 * tabs around. Returns the decoded length, or -1 for a bad escape. */
static long pct_decode(char *dst, const char *p, size_t n) {
  while (n && (*p == ' ' || *p == '\t')) p++, n--;
  while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (p[i] != '%') {
      dst[o++] = p[i];
      continue;
    }
    if (i + 2 >= n) return -1; /* '%' needs two hex digits */
    int a = hexval((unsigned char)p[i + 1]), b = hexval((unsigned char)p[i + 2]);
    if (a < 0 || b < 0) return -1;
    dst[o++] = (char)(a * 16 + b);
    i += 2;
  }
  return (long)o;
}

static int res_has(const ox *x, const char *k) {
  if (strcmp(k, "service.name") == 0) return 1; /* written first, from x->service */
  for (uint32_t i = 0; i < x->nres; i++)
    if (strcmp(x->res[i].key, k) == 0) return 1;
  return 0;
}

/* OTEL_RESOURCE_ATTRIBUTES (or the option): "k1=v1,k2=v2", keys and
 * values percent-decoded (the W3C Baggage form the OTel spec names); an
 * entry without '=', with an empty key or a bad escape is skipped, as is
 * a key seen before; at most MAX_RES_ATTRS entries. A service.name entry
 * is the service when neither the option nor OTEL_SERVICE_NAME names
 * one. Returns TTFT_ENOMEM or TTFT_OK. */
static int parse_resource(ox *x, const ttft_allocator *a, const char *spec, const char **svc_attr) {
  if (!spec || !*spec) return TTFT_OK;
  size_t len = strlen(spec);
  x->env_buf = ttft__alloc(a, len + 1);
  if (!x->env_buf) return TTFT_ENOMEM;
  memcpy(x->env_buf, spec, len + 1);
  char *p = x->env_buf, *end = p + len;
  while (p < end) {
    char *comma = memchr(p, ',', (size_t)(end - p));
    if (!comma) comma = end;
    char *eq = memchr(p, '=', (size_t)(comma - p));
    if (eq && x->nres < MAX_RES_ATTRS) {
      long kl = pct_decode(p, p, (size_t)(eq - p));
      long vl = kl > 0 ? pct_decode(eq + 1, eq + 1, (size_t)(comma - eq - 1)) : -1;
      if (kl > 0 && vl >= 0) {
        p[kl] = '\0';
        eq[1 + vl] = '\0';
        if (strcmp(p, "service.name") == 0) {
          if (!*svc_attr) *svc_attr = eq + 1;
        } else if (!res_has(x, p)) {
          x->res[x->nres].key = p, x->res[x->nres].val = eq + 1;
          x->nres++;
        }
      }
    }
    p = comma + 1;
  }
  return TTFT_OK;
}

static void put_resource(ow *w, const ox *x) {
  const ttft_snapshot *s = x->s;
  m_begin(w, 1); /* ResourceMetrics.resource */
  kv_str(w, 1, "service.name", x->service, SIZE_MAX);
  for (uint32_t i = 0; i < x->nres; i++) kv_str(w, 1, x->res[i].key, x->res[i].val, SIZE_MAX);
  for (uint32_t i = 0; i < x->nconst; i++) {
    uint32_t k = x->const_idx[i];
    if (res_has(x, s->const_name[k])) continue; /* the environment's wins */
    kv_str(w, 1, s->const_name[k], s->const_value[k], sizeof s->const_value[k]);
  }
  static const char *const sdk[3][2] = {{"telemetry.sdk.name", "libttft"},
                                        {"telemetry.sdk.language", "c"},
                                        {"telemetry.sdk.version", NULL}};
  for (int i = 0; i < 3; i++)
    if (!res_has(x, sdk[i][0]))
      kv_str(w, 1, sdk[i][0], sdk[i][1] ? sdk[i][1] : ttft_version_string(), SIZE_MAX);
  kv_str(w, 1, "libttft.start_point", s->start_point, sizeof s->start_point);
  kv_str(w, 1, "libttft.token_point", s->token_point, sizeof s->token_point);
  m_end(w, 1);
}

/* ---------------------------------------------------------- data points */

/* What one data point carries besides its value. */
typedef struct point {
  const char *cls;   /* libttft.class, or NULL */
  const char *proc;  /* libttft.process, or NULL */
  const char *xname, *xval; /* one more attribute, or NULL */
  size_t xcap;
} point;

static void point_attrs(ow *w, const ox *x, const point *p, unsigned field) {
  if (p->cls) kv_str(w, field, "libttft.class", p->cls, TTFT__NAME_MAX);
  if (p->proc) kv_str(w, field, "libttft.process", p->proc, TTFT__NAME_MAX);
  if (x->s->model[0]) kv_str(w, field, "gen_ai.request.model", x->s->model, sizeof x->s->model);
  if (p->xname) kv_str(w, field, p->xname, p->xval, p->xcap);
}

static void put_times(ow *w, const ox *x, int with_start) {
  if (with_start) pb_fixed64(&w->o, 2, x->t_start);
  pb_fixed64(&w->o, 3, x->t_now);
}

/* NumberDataPoint of a counter or gauge: an integer, or seconds */
typedef struct num {
  uint64_t v;
  int seconds;
} num;

static void number_point(ow *w, const ox *x, const point *p, num v, int with_start) {
  m_begin(w, 1); /* Sum/Gauge.data_points */
  point_attrs(w, x, p, 7);
  put_times(w, x, with_start);
  if (v.seconds) pb_double(&w->o, 4, (double)v.v / 1e9);
  else if (v.v > (uint64_t)INT64_MAX) pb_double(&w->o, 4, (double)v.v);
  else pb_fixed64(&w->o, 6, v.v); /* as_int, sfixed64 */
  m_end(w, 1);
}

/* ----------------------------------------------------- histogram points */

typedef struct hdef {
  ttft_metric m; /* for the exemplars (TTFT, ITL, SEQ_ITL_MAX)  */
  int seconds;
} hdef;

/* Exemplars: the class's slowest requests with a trace id whose value
 * belongs to this metric (TTFT: the TTFT list; ITL, SEQ_ITL_MAX: the
 * longest-gap list), slowest first. In a delta the lists hold the
 * requests that entered them during the interval (ttft_snapshot_delta). */
static void put_exemplars(ow *w, const ox *x, const ttft__sclass *k, const hdef *d) {
  int by = d->m == TTFT_METRIC_TTFT ? TTFT_SLOWEST_TTFT
           : (d->m == TTFT_METRIC_ITL || d->m == TTFT_METRIC_SEQ_ITL_MAX) ? TTFT_SLOWEST_GAP
                                                                          : -1;
  if (!k || by < 0) return;
  for (uint32_t i = 0; i < k->nslow[by]; i++) {
    const ttft__slow *e = &k->slow[by][i];
    if (!e->has_trace) continue;
    m_begin(w, 11); /* ExponentialHistogramDataPoint.exemplars */
    pb_fixed64(&w->o, 2, e->unix_end ? e->unix_end : to_unix(x, e->t_end));
    pb_double(&w->o, 3, pb_unit_value(e->value, d->seconds));
    pb_bytes(&w->o, 5, (const char *)e->trace, 16); /* trace_id */
    if (e->id_len) kv_str(w, 7, "libttft.request_id", e->id, e->id_len);
    m_end(w, 11);
  }
}

static void hist_point(ow *w, const ox *x, const point *p, const hdef *d, const ttft__shist *h,
                       const ttft__sclass *exk) {
  uint64_t count = h ? h->count : 0;
  m_begin(w, 1); /* ExponentialHistogram.data_points */
  point_attrs(w, x, p, 1);
  put_times(w, x, 1);
  pb_fixed64(&w->o, 4, count);
  pb_double(&w->o, 5, pb_sum_value(h, d->seconds));
  pb_sint(&w->o, 6, x->schema);
  pb_native_walk nw;
  pb_native_begin(&nw, x->map[d->seconds], x->key, x->cnt);
  if (count) {
    uint64_t c = 0;
    uint32_t last = ttft__shist_hi(h);
    for (uint32_t i = pb_next_populated(h, ttft__shist_lo(h), last, &c); i < last;
         i = pb_next_populated(h, i + 1, last, &c))
      pb_native_step(&nw, i, c);
  }
  const pb_native_list *nl = &nw.nl;
  if (nl->zero) pb_fixed64(&w->o, 7, nl->zero);
  if (nl->n) {
    m_begin(w, 8); /* positive Buckets */
    pb_sint(&w->o, 1, (int64_t)nl->key[0] - 1); /* OTLP index = native - 1 */
    m_begin(w, 2); /* bucket_counts, packed */
    for (uint32_t j = 0; j < nl->n; j++) {
      if (j)
        for (int32_t z = nl->key[j - 1] + 1; z < nl->key[j]; z++) pb_varint(&w->o, 0);
      pb_varint(&w->o, nl->cnt[j]);
    }
    m_end(w, 2);
    m_end(w, 8);
  }
  put_exemplars(w, x, exk, d);
  if (count && !x->delta) { /* exact in a cumulative snapshot only */
    pb_double(&w->o, 12, pb_unit_value(h->min, d->seconds));
    pb_double(&w->o, 13, pb_unit_value(h->max, d->seconds));
  }
  m_end(w, 1);
}

/* ------------------------------------------------------------- metrics */

typedef enum kind {
  K_HIST,        /* per class: metric idx                    */
  K_VIEW,        /* per class and status: view idx           */
  K_SPLIT_CACHE,
  K_SPLIT_PREFILL,
  K_SPLIT_BAND,
  K_STEP,
  K_ENDED,       /* per class and status                     */
  K_CTR,         /* per class: ttft__prom_ctrs[idx]          */
  K_STALL_N,     /* per class and cause                      */
  K_STALL_NS,
  K_REG_CTR,     /* ttft__prom_registry_ctrs[idx]            */
  K_COARSE,      /* the coarse-observations running total    */
  K_GAUGE,       /* gauge idx                                */
  K_STALL_BUDGET,
  K_SLO_BUDGET
} kind;

typedef struct mdef {
  kind k;
  size_t idx;
  const char *name, *unit, *help;
} mdef;

#define class_shown pb_class_shown

static int own_of_gatherer(const mdef *f) {
  return (f->k == K_REG_CTR && ttft__prom_gatherer_own(0, ttft__prom_registry_ctrs[f->idx].c)) ||
         (f->k == K_GAUGE && ttft__prom_gatherer_own(1, (unsigned)f->idx));
}

/* The points of metric f from data snapshot s (the top, or a part). */
static void metric_points(ow *w, const ox *x, const mdef *f, const ttft_snapshot *s,
                          const char *proc) {
  point p;
  memset(&p, 0, sizeof p);
  p.proc = proc;
  int gauge = f->k == K_GAUGE || f->k == K_STALL_BUDGET || f->k == K_SLO_BUDGET;
  static const char *const status_name[3] = {"completed", "cancelled", "error"};
  static const ttft_counter status_ctr[3] = {TTFT_COUNTER_COMPLETED, TTFT_COUNTER_CANCELLED,
                                             TTFT_COUNTER_ERRORS};
  switch (f->k) {
  case K_HIST: {
    const ttft__prom_hist_def *hd = &ttft__prom_hists[f->idx];
    hdef d = {hd->m, hd->seconds};
    for (uint32_t i = 0; i < s->nclasses; i++) {
      if (!class_shown(s, i)) continue;
      p.cls = s->cls[i].name;
      hist_point(w, x, &p, &d, s->cls[i].h[hd->m], &s->cls[i]);
    }
    break;
  }
  case K_VIEW: {
    hdef d = {TTFT_METRIC_COUNT_, ttft__prom_views[f->idx].seconds};
    p.xname = "libttft.status", p.xcap = 16;
    for (uint32_t i = 0; i < s->nclasses; i++) {
      if (!class_shown(s, i)) continue;
      p.cls = s->cls[i].name;
      for (int st = 0; st < TTFT_STATUS_COUNT_; st++) {
        if (!ttft__prom_view_shown(s, i, st)) continue;
        p.xval = ttft_status_name((ttft_status)st);
        hist_point(w, x, &p, &d, s->cls[i].sv[st][f->idx], NULL);
      }
    }
    break;
  }
  case K_SPLIT_CACHE:
  case K_SPLIT_PREFILL: {
    static const int band[3] = {TTFT_PREFIX_MISS, TTFT_PREFIX_PARTIAL, TTFT_PREFIX_HIT};
    static const char *const cache[3] = {"miss", "partial", "hit"};
    hdef d = {TTFT_METRIC_COUNT_, 1};
    p.xname = "libttft.prefix_cache", p.xcap = 8;
    for (int i = 0; i < 3; i++) {
      p.xval = cache[i];
      hist_point(w, x, &p, &d,
                 f->k == K_SPLIT_CACHE ? s->split_cache[band[i]] : s->split_prefill[band[i]], NULL);
    }
    break;
  }
  case K_SPLIT_BAND: {
    uint32_t nb = pb_nbands(s);
    hdef d = {TTFT_METRIC_COUNT_, 1};
    p.xname = "libttft.prompt_tokens";
    for (uint32_t i = 0; i < nb; i++) {
      char band[48];
      if (!pb_band_label(s, i, nb, band, sizeof band)) continue;
      p.xval = band, p.xcap = sizeof band;
      hist_point(w, x, &p, &d, s->split_band[i], NULL);
    }
    break;
  }
  case K_STEP: {
    static const char *const pf[2] = {"false", "true"};
    hdef d = {TTFT_METRIC_COUNT_, 1};
    p.xname = "libttft.prefill", p.xcap = 8;
    for (int i = 0; i < 2; i++) {
      p.xval = pf[i];
      hist_point(w, x, &p, &d, s->step[i], NULL);
    }
    break;
  }
  case K_ENDED:
    p.xname = "libttft.status", p.xcap = 16;
    for (uint32_t i = 0; i < s->nclasses; i++) {
      if (!class_shown(s, i)) continue;
      p.cls = s->cls[i].name;
      for (int k = 0; k < 3; k++) {
        p.xval = status_name[k];
        number_point(w, x, &p, (num){s->cls[i].ctr[status_ctr[k]], 0}, 1);
      }
    }
    break;
  case K_CTR:
    for (uint32_t i = 0; i < s->nclasses; i++) {
      if (!class_shown(s, i)) continue;
      p.cls = s->cls[i].name;
      number_point(w, x, &p, (num){s->cls[i].ctr[ttft__prom_ctrs[f->idx].c], 0}, 1);
    }
    break;
  case K_STALL_N:
  case K_STALL_NS:
    p.xname = "libttft.cause", p.xcap = 16;
    for (uint32_t i = 0; i < s->nclasses; i++) {
      if (!class_shown(s, i)) continue;
      p.cls = s->cls[i].name;
      for (int k = 0; k < TTFT_STALL_CAUSE_COUNT; k++) {
        p.xval = ttft_stall_cause_name((ttft_stall_cause)k);
        num v = {f->k == K_STALL_N ? s->cls[i].stall_n[k] : s->cls[i].stall_ns[k],
                 f->k == K_STALL_NS};
        number_point(w, x, &p, v, 1);
      }
    }
    break;
  case K_REG_CTR:
    number_point(w, x, &p, (num){s->all.ctr[ttft__prom_registry_ctrs[f->idx].c], 0}, 1);
    break;
  case K_COARSE:
    number_point(w, x, &p, (num){s->gauge[TTFT_GAUGE_COARSE], 0}, 1);
    break;
  case K_GAUGE:
    number_point(w, x, &p, (num){s->gauge[f->idx], 0}, !gauge);
    break;
  case K_STALL_BUDGET:
    for (uint32_t i = 0; i < s->nclasses; i++) {
      if (!class_shown(s, i)) continue;
      p.cls = s->cls[i].name;
      number_point(w, x, &p, (num){s->cls[i].slo.stall_threshold_ns, 1}, 0);
    }
    break;
  case K_SLO_BUDGET:
    p.xname = "libttft.slo", p.xcap = 8;
    for (uint32_t i = 0; i < s->nclasses; i++) {
      if (!class_shown(s, i)) continue;
      const ttft_slo *sl = &s->cls[i].slo;
      const uint64_t b[3] = {sl->ttft_ns, sl->tpot_ns, sl->e2e_ns};
      static const char *const bn[3] = {"ttft", "tpot", "e2e"};
      p.cls = s->cls[i].name;
      for (int k = 0; k < 3; k++) {
        if (!b[k]) continue;
        p.xval = bn[k];
        number_point(w, x, &p, (num){b[k], 1}, 0);
      }
    }
    break;
  }
}

static int is_hist(kind k) { return k <= K_STEP; }
static int is_gauge(kind k) { return k == K_GAUGE || k == K_STALL_BUDGET || k == K_SLO_BUDGET; }

static void put_metric(ow *w, const ox *x, const mdef *f) {
  const ttft_snapshot *s = x->s;
  unsigned data = is_hist(f->k) ? 10 : is_gauge(f->k) ? 5 : 7;
  m_begin(w, 2); /* ScopeMetrics.metrics */
  pb_str(&w->o, 1, f->name);
  if (f->help) pb_str(&w->o, 2, f->help);
  pb_str(&w->o, 3, f->unit);
  m_begin(w, data);
  if (!s->nparts || own_of_gatherer(f)) {
    metric_points(w, x, f, s, NULL);
  } else {
    for (uint32_t p = 0; p < s->nparts; p++)
      if (s->part[p]) metric_points(w, x, f, s->part[p], s->part_name[p]);
  }
  if (!is_gauge(f->k)) pb_uint(&w->o, 2, x->delta ? OTLP_DELTA : OTLP_CUMULATIVE);
  if (data == 7) pb_uint(&w->o, 3, 1); /* is_monotonic */
  m_end(w, data);
  m_end(w, 2);
}

/* OTLP names of the metrics the GenAI semantic conventions define; every
 * other family is libttft.<Prometheus stem> (docs/opentelemetry.md). */
static const char *semconv_name(ttft_metric m) {
  switch (m) {
  case TTFT_METRIC_TTFT: return "gen_ai.server.time_to_first_token";
  case TTFT_METRIC_TPOT: return "gen_ai.server.time_per_output_token";
  case TTFT_METRIC_E2E: return "gen_ai.server.request.duration";
  default: return NULL;
  }
}

/* "libttft." + stem, the Prometheus family name without a _seconds
 * suffix (the unit says it), into buf */
static const char *own_name(char *buf, size_t cap, const char *prom) {
  size_t n = strlen(prom);
  if (n > 8 && strcmp(prom + n - 8, "_seconds") == 0) n -= 8;
  ttft__sb sb;
  ttft__sb_init(&sb, buf, cap);
  ttft__sb_puts(&sb, "libttft.");
  ttft__sb_put(&sb, prom, n);
  return buf;
}

static void put_metrics(ow *w, const ox *x) {
  const ttft_snapshot *s = x->s;
  char nb[96];
  mdef f;
  for (size_t d = 0; d < ttft__prom_nhists; d++) {
    const ttft__prom_hist_def *hd = &ttft__prom_hists[d];
    const char *sc = semconv_name(hd->m);
    f = (mdef){K_HIST, d, sc ? sc : own_name(nb, sizeof nb, hd->name),
               hd->seconds ? "s" : "{token}", hd->help};
    put_metric(w, x, &f);
  }
  for (size_t v = 0; v < TTFT__STATUS_VIEWS; v++) {
    const ttft__prom_hist_def *hd = &ttft__prom_views[v];
    f = (mdef){K_VIEW, v, own_name(nb, sizeof nb, hd->name), hd->seconds ? "s" : "{token}",
               hd->help};
    put_metric(w, x, &f);
  }
  f = (mdef){K_SPLIT_CACHE, 0, "libttft.time_to_first_token_by_prefix_cache", "s",
             "Time to first token split by prefix-cache outcome (requests that reported one), "
             "all classes."};
  put_metric(w, x, &f);
  f = (mdef){K_SPLIT_PREFILL, 0, "libttft.request_prefill_time_by_prefix_cache", "s",
             "Prefill time (first token - scheduled) split by prefix-cache outcome, all classes."};
  put_metric(w, x, &f);
  f = (mdef){K_SPLIT_BAND, 0, "libttft.time_to_first_token_by_prompt_length", "s",
             "Time to first token split by prompt-length band (lo-hi tokens, inclusive), all "
             "classes."};
  put_metric(w, x, &f);
  f = (mdef){K_STEP, 0, "libttft.engine_step", "s", TTFT__PROM_STEP_HELP};
  put_metric(w, x, &f);
  f = (mdef){K_ENDED, 0, "libttft.requests_ended", "{request}",
             "Streams ended, by status (completed, cancelled, error)."};
  put_metric(w, x, &f);
  for (size_t d = 0; d < ttft__prom_nctrs; d++) {
    const ttft__prom_ctr_def *c = &ttft__prom_ctrs[d];
    int stalls = c->c == TTFT_COUNTER_STALLS;
    f = (mdef){stalls ? K_STALL_N : K_CTR, d, own_name(nb, sizeof nb, c->name), "1", c->help};
    put_metric(w, x, &f);
    if (!stalls) continue;
    f = (mdef){K_STALL_NS, 0, "libttft.stall_time", "s", TTFT__PROM_STALL_SECONDS_HELP};
    put_metric(w, x, &f);
  }
  for (size_t d = 0; d < ttft__prom_nregistry_ctrs; d++) {
    const ttft__prom_ctr_def *c = &ttft__prom_registry_ctrs[d];
    f = (mdef){K_REG_CTR, d, own_name(nb, sizeof nb, c->name), "1", c->help};
    put_metric(w, x, &f);
  }
  f = (mdef){K_COARSE, 0, "libttft." TTFT__PROM_COARSE_TOTAL_NAME, "1",
             TTFT__PROM_COARSE_TOTAL_HELP};
  put_metric(w, x, &f);
  for (unsigned g = 0; g < TTFT_GAUGE_COUNT_; g++) {
    if (g == TTFT_GAUGE_COARSE) continue; /* the counter above carries it */
    f = (mdef){K_GAUGE, g, own_name(nb, sizeof nb, ttft__prom_gauges[g].name),
               g == TTFT_GAUGE_MEMORY ? "By" : "1", ttft__prom_gauges[g].help};
    put_metric(w, x, &f);
  }
  f = (mdef){K_STALL_BUDGET, 0, "libttft.stall_budget", "s",
             "Stall budget of each class: an inter-token gap above it is a stall."};
  put_metric(w, x, &f);
  if (ttft__any_slo_budget(s)) {
    f = (mdef){K_SLO_BUDGET, 0, "libttft.slo_budget", "s",
               "SLO budgets of each class that sets them (slo = ttft, tpot, e2e)."};
    put_metric(w, x, &f);
  }
}

static void put_request(ow *w, const ox *x) {
  m_begin(w, 1); /* ExportMetricsServiceRequest.resource_metrics */
  put_resource(w, x);
  m_begin(w, 2); /* ResourceMetrics.scope_metrics */
  m_begin(w, 1); /* ScopeMetrics.scope */
  pb_str(&w->o, 1, "libttft");
  pb_str(&w->o, 2, ttft_version_string());
  m_end(w, 1);
  put_metrics(w, x);
  m_end(w, 2);
  m_end(w, 1);
}

/* realtime - library clock: what a library-clock time maps to. Measured
 * at every render, but the value kept from an earlier render is used
 * while the two agree within a millisecond (two clock reads differ by
 * some ns every time), so renders of one snapshot are byte-identical and
 * a step of the wall clock (settimeofday, an NTP step) is followed. */
#define OFFSET_SLACK_NS 1000000
static int64_t clock_offset(void) {
  static _Atomic int64_t kept;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t real = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  int64_t now = (int64_t)(real - ttft_now_ns());
  /* relaxed: the value stands alone; a race keeps either measurement */
  int64_t k = atomic_load_explicit(&kept, memory_order_relaxed);
  if (k && now - k <= OFFSET_SLACK_NS && k - now <= OFFSET_SLACK_NS) return k;
  atomic_store_explicit(&kept, now, memory_order_relaxed);
  return now;
}

static const char *nonempty(const char *v) { return v && *v ? v : NULL; }

int ttft__format_otlp(const ttft_snapshot *s, const ttft__otlp_opts *o, ttft__sb *sb) {
  if (!s || !sb) return TTFT_EINVAL;
  ttft_allocator a;
  ttft__allocator_current(&a);
  ox x;
  memset(&x, 0, sizeof x);
  x.s = s;
  x.delta = o && o->delta;
  x.schema = pb_schema(s);
  x.offset = clock_offset();
  x.t_start = o && o->start_unix_ns ? o->start_unix_ns : to_unix(&x, s->t_start_ns);
  x.t_now = o && o->time_unix_ns ? o->time_unix_ns : to_unix(&x, s->t_end_ns);
  uint32_t nconst = s->n_const_labels;
  if (nconst > TTFT_MAX_CONST_LABELS) nconst = TTFT_MAX_CONST_LABELS;
  for (uint32_t k = 0; k < nconst; k++)
    if (ttft__prom_const_usable(s, k)) x.const_idx[x.nconst++] = k;
  const char *svc_attr = NULL;
  const char *spec = o && o->resource_attributes ? o->resource_attributes
                                                  : getenv("OTEL_RESOURCE_ATTRIBUTES");
  int rc = parse_resource(&x, &a, spec, &svc_attr);
  if (rc != TTFT_OK) return rc;
  x.service = nonempty(o ? o->service_name : NULL);
  if (!x.service) x.service = nonempty(getenv("OTEL_SERVICE_NAME"));
  if (!x.service) x.service = nonempty(svc_attr);
  if (!x.service) x.service = "unknown_service";

  void *scratch = ttft__alloc(&a, TTFT__HIST_BUCKETS * (3 * sizeof(int32_t) + sizeof(uint64_t)));
  if (!scratch) {
    ttft__free(&a, x.env_buf);
    return TTFT_ENOMEM;
  }
  x.cnt = scratch; /* uint64_t first: aligned */
  x.map[1] = (int32_t *)(x.cnt + TTFT__HIST_BUCKETS);
  x.map[0] = x.map[1] + TTFT__HIST_BUCKETS;
  x.key = x.map[0] + TTFT__HIST_BUCKETS;
  pb_native_map(x.map[1], x.schema, 1);
  pb_native_map(x.map[0], x.schema, 0);

  ow w;
  memset(&w, 0, sizeof w);
  w.alloc = &a;
  put_request(&w, &x); /* count: every submessage's size */
  rc = w.oom ? TTFT_ENOMEM : TTFT_OK;
  if (rc == TTFT_OK) {
    w.o.sb = sb, w.o.n = 0;
    put_request(&w, &x); /* write */
    TTFT_ASSERT(w.next == w.nsize);
  }
  ttft__free(&a, w.size);
  ttft__free(&a, scratch);
  ttft__free(&a, x.env_buf);
  return rc;
}
