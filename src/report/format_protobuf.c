/*
 * format_protobuf.c — the Prometheus protobuf exposition: a stream of
 * length-delimited io.prometheus.client.MetricFamily messages (the body
 * Prometheus asks for with "application/vnd.google.protobuf;
 * proto=io.prometheus.client.MetricFamily; encoding=delimited"), with every
 * histogram carrying native (exponential) buckets beside the classic ones.
 * Layer: report (src/README.md). Reads a snapshot only.
 *
 * Same families, label sets, counters, gauges and classic buckets as the
 * text exposition (format_prom.c is the reference; tests/test_protobuf.c
 * and tests/prom/pb_roundtrip.py parse both and assert that they agree).
 * What differs is the framing, and that each histogram also carries:
 *
 *   schema         ttft_config.native_schema (-4 .. 8, default 7)
 *   zero_threshold 2^-128, client_golang's default, so our histograms and
 *                  theirs merge without widening a zero bucket. Our
 *                  smallest non-zero value is 1 ns = 1e-9 s (1 token), so
 *                  only observations of exactly 0 land in the zero bucket.
 *   zero_count     observations of 0
 *   positive spans / deltas   the populated native buckets, integer counts,
 *                  delta-encoded; a gap of up to 2 empty buckets is written
 *                  as zeros inside a span, a longer one starts a new span.
 *                  An empty histogram carries one no-op span (offset 0,
 *                  length 0), the marker newer Prometheus servers look for.
 * With ttft_snapshot.native_histograms == 0 none of these is written and
 * the histograms are classic only.
 *
 * ---- Mapping the log-linear histogram to exponential buckets, and the
 * error bound.
 * Native bucket k of schema s holds (B^(k-1), B^k], B = 2^(2^-s). Our
 * internal bucket I = [lo, hi] (integers: ns, or tokens) cannot be split,
 * so all of it goes to the one native bucket that holds its representative
 * r: the midpoint lo + (hi - lo)/2 (in seconds for times) — the value the
 * library itself reports for a rank in I (ttft__shist_quantile) unless I
 * holds min or max. r depends on I and the schema only, never on min, max
 * or anything else that changes over time: an earlier version clamped r
 * into [min, max], so a new minimum or maximum moved the buckets of the old
 * ones to a neighbouring native bucket, a bucket count fell, and
 * Prometheus read a counter reset (rate() and increase() then counted the
 * whole bucket again; issue 17). Now every native bucket count, the zero
 * count, the count and the sum only grow between two scrapes of a live
 * registry (tests/test_protobuf.c native_buckets_are_counters). The map is
 * monotone, so the order of observations is kept: the ceil(qN)-th smallest mapped value is r(I*), where I* is the
 * internal bucket of the exact order statistic x* = x(ceil(qN)). PromQL's
 * histogram_quantile finds the native bucket where the cumulative count
 * first reaches qN, which is the bucket holding that mapped value, and
 * returns a point e inside it, [L, U] with L < r <= U = L*B. With
 * w = (hi - lo)/lo < 1/128 (each octave above 256 is cut into 128 equal
 * buckets; below 256 a bucket is one value, w = 0):
 *
 *     e / x* <= U / lo < B * r / lo <= B * (1 + w/2)
 *     e / x* >= L / hi > r / (B * hi) >= (1 + w/2) / (B * (1 + w))
 *
 * so  |e - x*| / x*  <  B * (1 + 1/256) - 1  — PromQL p99 (any quantile)
 * within 0.94 % of exact at the default schema 7:
 *
 *     schema   8        7        6       5       4      3     0
 *     bound    0.66 %   0.94 %   1.5 %   2.6 %   4.8 %  9.5 % 101 %
 *
 * for every quantile, over cumulative histograms, rate()s and sums across
 * any number of replicas (a sum of native histograms of one schema adds
 * bucket by bucket, and rate() scales every bucket by the same factor).
 * Valid for values from 1 ns (1 token) up to 2^44 ns (4.9 h), above which
 * the internal histogram itself keeps only min/max/sum/count exact; the
 * zero bucket answers 0 (absolute error <= 2^-128). tests/test_protobuf.c
 * checks the bound on every internal bucket for every schema, and the
 * fleet test (tests/prom/fleet_test.py) through a real Prometheus.
 *
 * ---- The encoder.
 * Protobuf prefixes each message with its length, so every message is
 * produced by a body function that runs in two modes: counting (o->sb is
 * NULL: only o->n grows) and writing. A submessage is counted once, then
 * its tag, length and body are written; counting a message counts each of
 * its submessages once. A family is counted, then written; each histogram's
 * classic and native buckets are worked out in one walk per pass
 * (hist_prepare: ttft__shist_at along a run, ttft__shist_next over a gap)
 * and its message size with them, so its buckets are walked twice in all.
 * One scratch block per call (~97 KB: the native index of every internal
 * bucket's midpoint, for seconds and for counts, and one histogram's native
 * buckets) comes from the library's allocator; without it the call fails
 * with TTFT_ENOMEM, never with a short output. Output goes into the string
 * builder with snprintf rules: binary, NUL bytes included; the caller gets
 * the full length. About 2 to 2.6x the time of the text exposition (4
 * classes, 20 000 streams; medians on a busy 2-core machine).
 */
#include <math.h>
#include <string.h>

#include "report/format.h"
#include "report/pb.h"

/* ------------------------------------------------------ wire encoding */

enum { MT_COUNTER = 0, MT_GAUGE = 1, MT_SUMMARY = 2, MT_HISTOGRAM = 4 };

/* ------------------------------------------------ names and label values */

typedef struct label_arg {
  const char *name;
  const char *value;
  size_t cap;
} label_arg;

static void label_body(pb_out *o, const void *arg) {
  const label_arg *l = arg;
  pb_str(o, 1, l->name);
  pb_clean_str(o, 2, l->value, l->cap); /* as the text exposition shows it once unescaped */
}

/* ----------------------------------------------------------- families
 * The histogram and counter families are format_prom.c's tables
 * (report/format.h: ttft__prom_hists, ttft__prom_views, ttft__prom_ctrs,
 * ttft__prom_registry_ctrs), so the two expositions cannot drift apart;
 * the families written inline there (info, requests_ended, splits, gauges)
 * are written here in the same order with the same texts, and the tests
 * compare both outputs family by family. */
typedef ttft__prom_hist_def pb_hist_def;

static const struct {
  ttft_counter c;
  const char *status;
} status_defs[] = {{TTFT_COUNTER_COMPLETED, "completed"},
                   {TTFT_COUNTER_CANCELLED, "cancelled"},
                   {TTFT_COUNTER_ERRORS, "error"}};

/* ------------------------------------------------------------- context */

#define ZERO_THRESHOLD 0x1p-128 /* see the top of the file */
#define MAX_GAP_IN_SPAN 2       /* empty buckets written as zeros in a span */

typedef struct pbx {
  const ttft_snapshot *s;
  char ns[TTFT__NAME_MAX];
  uint32_t nconst;
  uint32_t const_idx[TTFT_MAX_CONST_LABELS];
  int native;                /* write native buckets             */
  int schema;                /* -4 .. 8                          */
  int32_t *map[2];           /* [seconds] native index of each internal
                                bucket's midpoint                    */
  int32_t *nkey;             /* scratch: one histogram's native buckets */
  uint64_t *ncnt;
  ttft_allocator alloc;
} pbx;

#define class_shown pb_class_shown

/* ------------------------------------------------------------- series */

typedef struct series {
  const pbx *x;
  const ttft_snapshot *ds;         /* whose data: x->s, or a part     */
  const char *proc;                /* process label (a part's name), or NULL */
  const char *cls;                 /* class label, or NULL            */
  const char *xname, *xval;        /* one more label (split key, status,
                                      slo, quantile owner), or NULL    */
  size_t xcap;
  int info;                        /* the info metric's label set     */
  /* value */
  double value;                    /* counter / gauge                 */
  const ttft__shist *h;            /* histogram / summary             */
  const pb_hist_def *d;
  const struct hist_data *hd;      /* histogram: prepared buckets     */
  const ttft__sclass *exk;         /* histogram: exemplars from this
                                      class's slowest requests, or NULL */
} series;

static void put_label(pb_out *o, const char *name, const char *v, size_t cap) {
  label_arg l = {name, v, cap};
  pb_message(o, 1, label_body, &l);
}

/* The labels of a series, in the order of the text exposition: class (when
 * given), process (per-process view), model (when set), the usable
 * constant labels, then the extra. Model and constant labels are the top
 * snapshot's (x->s); the info's points are its data snapshot's. */
static void put_labels(pb_out *o, const series *se) {
  const ttft_snapshot *s = se->x->s;
  if (se->info) {
    put_label(o, "start_point", se->ds->start_point, sizeof se->ds->start_point);
    put_label(o, "token_point", se->ds->token_point, sizeof se->ds->token_point);
    put_label(o, "version", ttft_version_string(), 16);
  }
  if (se->cls) put_label(o, "class", se->cls, TTFT__NAME_MAX);
  if (se->proc) put_label(o, "process", se->proc, TTFT__NAME_MAX);
  if (s->model[0]) put_label(o, "model", s->model, sizeof s->model);
  for (uint32_t i = 0; i < se->x->nconst; i++) {
    uint32_t k = se->x->const_idx[i];
    put_label(o, s->const_name[k], s->const_value[k], sizeof s->const_value[k]);
  }
  if (se->xname) put_label(o, se->xname, se->xval, se->xcap);
}

static double as_seconds(uint64_t ns) { return (double)ns / 1e9; }

static void value_body(pb_out *o, const void *arg) {
  pb_double(o, 1, ((const series *)arg)->value);
}

static void counter_metric(pb_out *o, const void *arg) {
  put_labels(o, arg);
  pb_message(o, 3, value_body, arg);
}

static void gauge_metric(pb_out *o, const void *arg) {
  put_labels(o, arg);
  pb_message(o, 2, value_body, arg);
}

/* ------------------------------------------------------ classic buckets */

/* The bounds of metric m (the snapshot's, else the defaults), strictly
 * ascending ones only, as format_prom.c keeps them. Returns how many. */
static uint32_t classic_bounds(const ttft_snapshot *s, ttft_metric m, uint64_t *out) {
  uint32_t n = s->prom_n_buckets[m], k = 0;
  const uint64_t *b;
  if (n == 0) b = ttft__default_prom_buckets(m, &n);
  else {
    if (n > TTFT_MAX_PROM_BUCKETS) n = TTFT_MAX_PROM_BUCKETS;
    b = s->prom_buckets[m];
  }
  for (uint32_t j = 0; j < n; j++)
    if (k == 0 || b[j] > out[k - 1]) out[k++] = b[j];
  return k;
}

/* Classic cumulative counts: cum[j] = observations in internal buckets
 * whose largest value is <= b[j] (format_prom.c's rule: fixed per bucket,
 * so a cumulative count never falls between scrapes), built during the
 * walk by classic_step, then classic_finish: capped at count (only a
 * corrupt snapshot has more). */
static void classic_step(uint32_t i, uint64_t c, const uint64_t *b, uint32_t n, uint32_t *j,
                         uint64_t *run, uint64_t *cum) {
  uint64_t top = ttft__bucket_hi(i);
  while (*j < n && b[*j] < top) cum[(*j)++] = *run;
  *run += c;
}

static void classic_finish(const ttft__shist *h, const uint64_t *b, uint32_t n, uint32_t j,
                           uint64_t run, uint64_t *cum) {
  while (j < n) cum[j++] = run;
  for (j = 0; j < n; j++) {
    if (!h) cum[j] = 0;
    else if (cum[j] > h->count) cum[j] = h->count;
  }
}

/* ------------------------------------------------------------ exemplars */
typedef struct exemplar_arg {
  const ttft__slow *e;
  int seconds;
} exemplar_arg;

static void timestamp_body(pb_out *o, const void *arg) {
  uint64_t ns = *(const uint64_t *)arg;
  pb_uint(o, 1, ns / 1000000000u);                    /* int64 seconds */
  if (ns % 1000000000u) pb_uint(o, 2, ns % 1000000000u); /* int32 nanos */
}

/* io.prometheus.client.Exemplar: label trace_id, value, timestamp (left
 * out when the wall-clock time is unknown) */
static void exemplar_body(pb_out *o, const void *arg) {
  const exemplar_arg *x = arg;
  char trace[33];
  ttft__slow_trace_hex(x->e, trace);
  label_arg l = {"trace_id", trace, sizeof trace};
  pb_message(o, 1, label_body, &l);
  pb_double(o, 2, x->seconds ? as_seconds(x->e->value) : (double)x->e->value);
  if (x->e->unix_end) pb_message(o, 3, timestamp_body, &x->e->unix_end);
}

typedef struct bucket_arg {
  uint64_t cum;
  double le;
  const ttft__slow *ex; /* the bucket's exemplar, or NULL */
  int seconds;
} bucket_arg;

static void bucket_body(pb_out *o, const void *arg) {
  const bucket_arg *b = arg;
  pb_uint(o, 1, b->cum);
  pb_double(o, 2, b->le);
  if (b->ex) {
    exemplar_arg x = {b->ex, b->seconds};
    pb_message(o, 3, exemplar_body, &x);
  }
}

/* ------------------------------------------------------- native buckets */

typedef struct span_arg {
  int32_t offset;
  uint32_t length;
} span_arg;

static void span_body(pb_out *o, const void *arg) {
  const span_arg *sp = arg;
  pb_sint(o, 1, sp->offset);
  pb_uint(o, 2, sp->length);
}

/* Whether native bucket j continues the span of bucket j - 1 (a gap of at
 * most MAX_GAP_IN_SPAN empty buckets, written as zeros). */
static int same_span(const pb_native_list *nl, uint32_t j) {
  return (int64_t)nl->key[j] - nl->key[j - 1] - 1 <= MAX_GAP_IN_SPAN;
}

/* positive_span (12): one per run of buckets; a no-op span when there is
 * no populated bucket. */
static void put_spans(pb_out *o, const pb_native_list *nl) {
  span_arg cur = {0, 0};
  for (uint32_t j = 0; j < nl->n; j++) {
    if (j == 0) {
      cur.offset = nl->key[0], cur.length = 1;
    } else if (same_span(nl, j)) {
      cur.length += (uint32_t)(nl->key[j] - nl->key[j - 1]);
    } else {
      pb_message(o, 12, span_body, &cur);
      cur.offset = (int32_t)((int64_t)nl->key[j] - nl->key[j - 1] - 1), cur.length = 1;
    }
  }
  pb_message(o, 12, span_body, &cur); /* the last span, or the no-op span */
}

/* positive_delta (13, packed sint64): each bucket's count minus the one
 * before it in the spans (zeros filled in), the first against 0. */
static void put_delta_values(pb_out *o, const pb_native_list *nl) {
  uint64_t last = 0;
  for (uint32_t j = 0; j < nl->n; j++) {
    if (j && same_span(nl, j))
      for (int32_t z = nl->key[j - 1] + 1; z < nl->key[j]; z++) {
        pb_varint(o, zigzag((int64_t)(0 - last)));
        last = 0;
      }
    pb_varint(o, zigzag((int64_t)(nl->cnt[j] - last)));
    last = nl->cnt[j];
  }
}

static size_t delta_size(const pb_native_list *nl) {
  pb_out sz = {NULL, 0};
  put_delta_values(&sz, nl);
  return sz.n;
}

static void put_deltas(pb_out *o, const pb_native_list *nl, size_t size) {
  if (!nl->n) return; /* an empty histogram has no deltas */
  pb_tag(o, 13, WT_LEN);
  pb_varint(o, size);
  if (o->sb) put_delta_values(o, nl);
  else o->n += size;
}

/* ------------------------------------------------ histogram / summary */

/* Everything a histogram message needs, computed once per series. */
typedef struct hist_data {
  uint32_t nb;
  uint64_t b[TTFT_MAX_PROM_BUCKETS], cum[TTFT_MAX_PROM_BUCKETS];
  pb_native_list nl;
  const ttft__slow *ex[TTFT_MAX_PROM_BUCKETS + 1]; /* per classic bucket, then
                                      above the last bound (native only) */
  uint32_t ex_classic; /* with native buckets: the one classic bucket that
                          carries its exemplar (nb: none), see below */
  size_t delta_size; /* bytes of the packed deltas            */
  size_t size;       /* bytes of the whole Histogram message  */
} hist_data;

static void histogram_body(pb_out *o, const void *arg);

static void histogram_body(pb_out *o, const void *arg) {
  const series *se = arg;
  const ttft__shist *h = se->h;
  const hist_data *hd = se->hd;
  uint64_t count = h ? h->count : 0;
  pb_uint(o, 1, count);
  pb_double(o, 2, pb_sum_value(h, se->d->seconds));
  for (uint32_t j = 0; j < hd->nb; j++) { /* +Inf is implied by sample_count */
    const ttft__slow *ex = (!se->x->native || j == hd->ex_classic) ? hd->ex[j] : NULL;
    bucket_arg ba = {hd->cum[j], pb_unit_value(hd->b[j], se->d->seconds), ex, se->d->seconds};
    pb_message(o, 3, bucket_body, &ba);
  }
  if (!se->x->native) return;
  pb_sint(o, 5, se->x->schema);
  pb_double(o, 6, ZERO_THRESHOLD);
  pb_uint(o, 7, hd->nl.zero);
  put_spans(o, &hd->nl);
  put_deltas(o, &hd->nl, hd->delta_size);
  /* native histograms: every exemplar again in `exemplars` (field 16),
   * which must carry a timestamp */
  for (uint32_t j = 0; j <= hd->nb; j++)
    if (hd->ex[j] && hd->ex[j]->unix_end) {
      exemplar_arg x = {hd->ex[j], se->d->seconds};
      pb_message(o, 16, exemplar_body, &x);
    }
}

/* The buckets of a histogram series and the size of its message, in one
 * walk over its populated buckets. */
static void hist_prepare(series *se, hist_data *hd) {
  const ttft__shist *h = se->h;
  uint32_t first = 0, last = 0, j = 0;
  uint64_t run = 0, c = 0;
  if (h && h->count) first = ttft__shist_lo(h), last = ttft__shist_hi(h);
  hd->nb = classic_bounds(se->x->s, se->d->m, hd->b);
  pb_native_walk w;
  pb_native_begin(&w, se->x->map[se->d->seconds], se->x->nkey, se->x->ncnt);
  for (uint32_t i = pb_next_populated(h, first, last, &c); i < last;
       i = pb_next_populated(h, i + 1, last, &c)) {
    if (j < hd->nb) classic_step(i, c, hd->b, hd->nb, &j, &run, hd->cum);
    else run += c;
    if (se->x->native) pb_native_step(&w, i, c);
  }
  classic_finish(h, hd->b, hd->nb, j, run, hd->cum);
  /* each bucket's exemplar: the slowest traced request inside it, when
   * the bucket has observations of its own */
  for (uint32_t k = 0; k <= hd->nb; k++) {
    uint64_t below = k ? hd->cum[k - 1] : 0, upto = k < hd->nb ? hd->cum[k] : (h ? h->count : 0);
    hd->ex[k] = upto > below ? ttft__exemplar(se->exk, se->d->m, k ? hd->b[k - 1] : 0,
                                              k < hd->nb ? hd->b[k] : UINT64_MAX)
                             : NULL;
  }
  /* With native buckets, every exemplar goes to Histogram.exemplars, and
   * the classic buckets carry only the slowest one that has a classic
   * bucket: a scraper that ingests the histogram as native but reads
   * exemplars from the classic buckets (Prometheus before 2.50) takes the
   * first bucket exemplar it finds and nothing else, so that one is the
   * slowest request's. */
  hd->ex_classic = hd->nb;
  for (uint32_t k = hd->nb; k-- > 0;)
    if (hd->ex[k]) {
      hd->ex_classic = k;
      break;
    }
  hd->nl = w.nl;
  hd->delta_size = se->x->native ? delta_size(&hd->nl) : 0;
  se->hd = hd;
  pb_out sz = {NULL, 0};
  histogram_body(&sz, se);
  hd->size = sz.n;
}

static void histogram_metric(pb_out *o, const void *arg) {
  const series *se = arg;
  put_labels(o, se);
  pb_message_sized(o, 7, histogram_body, se, se->hd->size);
}

/* One histogram Metric: its buckets prepared and sized once, then counted
 * and written. */
static void put_hist_metric(pb_out *o, series *se) {
  hist_data hd;
  hist_prepare(se, &hd);
  pb_message(o, 4, histogram_metric, se);
  se->hd = NULL;
}

typedef struct quantile_arg {
  double q, v;
} quantile_arg;

static void quantile_body(pb_out *o, const void *arg) {
  const quantile_arg *qa = arg;
  pb_double(o, 1, qa->q);
  pb_double(o, 2, qa->v);
}

static void summary_body(pb_out *o, const void *arg) {
  static const double qs[] = {0.5, 0.9, 0.95, 0.99, 0.999};
  const series *se = arg;
  const ttft__shist *h = se->h;
  uint64_t count = h ? h->count : 0;
  pb_uint(o, 1, count);
  pb_double(o, 2, pb_sum_value(h, se->d->seconds));
  for (size_t q = 0; q < sizeof qs / sizeof qs[0]; q++) {
    quantile_arg qa = {qs[q], NAN};
    if (count) qa.v = pb_unit_value(ttft__shist_quantile(h, qs[q]), se->d->seconds);
    pb_message(o, 3, quantile_body, &qa);
  }
}

static void summary_metric(pb_out *o, const void *arg) {
  put_labels(o, arg);
  pb_message(o, 4, summary_body, arg);
}

/* ------------------------------------------------------------- families */

typedef enum fam_kind {
  FK_INFO,
  FK_HIST,     /* per class, ttft__prom_hists[idx]        */
  FK_SUMMARY,  /* per class, ttft__prom_hists[idx]        */
  FK_SPLIT_CACHE,
  FK_SPLIT_BAND,
  FK_SPLIT_PREFILL,
  FK_VIEW,     /* per class and status, ttft__prom_views[idx] */
  FK_ENDED,    /* requests_ended_total{status}            */
  FK_COUNTER,  /* per class, ttft__prom_ctrs[idx]         */
  FK_REGISTRY_COUNTER, /* no class, ttft__prom_registry_ctrs[idx] */
  FK_GAUGE_COUNTER,    /* no class, a running-total gauge as a counter: idx = gauge */
  FK_GAUGE1,   /* one gauge, base labels: idx = gauge      */
  FK_STALL_BUDGET,
  FK_SLO_BUDGET,
  FK_STALL_CAUSE,     /* stalls_total{cause}, per class (1.2)        */
  FK_STALL_SECONDS,   /* stall_seconds_total{cause}, per class (1.2) */
  FK_ENGINE_STEP      /* engine_step_seconds{prefill}, no class (1.2) */
} fam_kind;

typedef struct family {
  const pbx *x;
  fam_kind kind;
  size_t idx;
  int absolute;        /* name without the namespace */
  const char *name, *suffix, *help, *unit;
  int type;
} family;

static void family_name(pb_out *o, const family *f) {
  size_t a = f->absolute ? 0 : strlen(f->x->ns), b = strlen(f->name);
  size_t c = f->suffix ? strlen(f->suffix) : 0;
  pb_tag(o, 1, WT_LEN);
  pb_varint(o, a + b + c);
  pb_raw(o, f->x->ns, a);
  pb_raw(o, f->name, b);
  if (c) pb_raw(o, f->suffix, c);
}

static const pb_hist_def split_def = {TTFT_METRIC_TTFT, 0, NULL, NULL, 1, NULL};
static const pb_hist_def split_prefill_def = {TTFT_METRIC_PREFILL, 0, NULL, NULL, 1, NULL};
/* engine steps use ITL's bucket bounds (a decode step is an inter-token gap) */
static const pb_hist_def step_def = {TTFT_METRIC_ITL, 0, NULL, NULL, 1, NULL};

/* The Metrics of family f from data snapshot s (x->s, or a part of a
 * per-process view, then labelled process="proc"). */
static void family_samples(pb_out *o, const family *f, const ttft_snapshot *s, const char *proc) {
  const pbx *x = f->x;
  series se;
  memset(&se, 0, sizeof se);
  se.x = x;
  se.ds = s;
  se.proc = proc;
  switch (f->kind) {
  case FK_INFO:
    se.info = 1;
    se.value = 1;
    pb_message(o, 4, gauge_metric, &se);
    break;
  case FK_HIST:
  case FK_SUMMARY:
    se.d = &ttft__prom_hists[f->idx];
    for (uint32_t i = 0; i < s->nclasses; i++) {
      if (!class_shown(s, i)) continue;
      se.cls = s->cls[i].name;
      se.h = s->cls[i].h[se.d->m];
      se.exk = &s->cls[i];
      if (f->kind == FK_HIST) put_hist_metric(o, &se);
      else pb_message(o, 4, summary_metric, &se);
    }
    break;
  case FK_SPLIT_CACHE:
  case FK_SPLIT_PREFILL: {
    static const int band[3] = {TTFT_PREFIX_MISS, TTFT_PREFIX_PARTIAL, TTFT_PREFIX_HIT};
    static const char *const cache[3] = {"miss", "partial", "hit"};
    se.d = f->kind == FK_SPLIT_CACHE ? &split_def : &split_prefill_def;
    se.xname = "prefix_cache";
    se.xcap = 8;
    for (int i = 0; i < 3; i++) {
      se.xval = cache[i];
      se.h = f->kind == FK_SPLIT_CACHE ? s->split_cache[band[i]] : s->split_prefill[band[i]];
      put_hist_metric(o, &se);
    }
    break;
  }
  case FK_SPLIT_BAND: {
    uint32_t nb = pb_nbands(s);
    se.d = &split_def;
    se.xname = "prompt_tokens";
    for (uint32_t i = 0; i < nb; i++) {
      char band[48];
      if (!pb_band_label(s, i, nb, band, sizeof band)) continue;
      se.xval = band;
      se.xcap = sizeof band;
      se.h = s->split_band[i];
      put_hist_metric(o, &se);
    }
    break;
  }
  case FK_VIEW:
    se.d = &ttft__prom_views[f->idx];
    se.xname = "status";
    se.xcap = 16;
    for (uint32_t i = 0; i < s->nclasses; i++) {
      if (!class_shown(s, i)) continue;
      se.cls = s->cls[i].name;
      for (int st = 0; st < TTFT_STATUS_COUNT_; st++) {
        if (!ttft__prom_view_shown(s, i, st)) continue;
        se.xval = ttft_status_name((ttft_status)st);
        se.h = s->cls[i].sv[st][f->idx];
        put_hist_metric(o, &se);
      }
    }
    break;
  case FK_ENDED:
    se.xname = "status";
    se.xcap = 16;
    for (uint32_t i = 0; i < s->nclasses; i++) {
      if (!class_shown(s, i)) continue;
      se.cls = s->cls[i].name;
      for (size_t k = 0; k < 3; k++) {
        se.xval = status_defs[k].status;
        se.value = (double)s->cls[i].ctr[status_defs[k].c];
        pb_message(o, 4, counter_metric, &se);
      }
    }
    break;
  case FK_COUNTER:
    for (uint32_t i = 0; i < s->nclasses; i++) {
      if (!class_shown(s, i)) continue;
      se.cls = s->cls[i].name;
      se.value = (double)s->cls[i].ctr[ttft__prom_ctrs[f->idx].c];
      pb_message(o, 4, counter_metric, &se);
    }
    break;
  case FK_STALL_CAUSE:
  case FK_STALL_SECONDS:
    se.xname = "cause";
    se.xcap = 16;
    for (uint32_t i = 0; i < s->nclasses; i++) {
      if (!class_shown(s, i)) continue;
      se.cls = s->cls[i].name;
      for (int k = 0; k < TTFT_STALL_CAUSE_COUNT; k++) {
        se.xval = ttft_stall_cause_name((ttft_stall_cause)k);
        se.value = f->kind == FK_STALL_CAUSE ? (double)s->cls[i].stall_n[k]
                                             : as_seconds(s->cls[i].stall_ns[k]);
        pb_message(o, 4, counter_metric, &se);
      }
    }
    break;
  case FK_ENGINE_STEP: {
    static const char *const pf[2] = {"false", "true"};
    se.d = &step_def;
    se.xname = "prefill";
    se.xcap = 8;
    for (int i = 0; i < 2; i++) {
      se.xval = pf[i];
      se.h = s->step[i];
      put_hist_metric(o, &se);
    }
    break;
  }
  case FK_REGISTRY_COUNTER:
    se.value = (double)s->all.ctr[ttft__prom_registry_ctrs[f->idx].c];
    pb_message(o, 4, counter_metric, &se);
    break;
  case FK_GAUGE_COUNTER:
    se.value = (double)s->gauge[f->idx];
    pb_message(o, 4, counter_metric, &se);
    break;
  case FK_GAUGE1:
    se.value = (double)s->gauge[f->idx];
    pb_message(o, 4, gauge_metric, &se);
    break;
  case FK_STALL_BUDGET:
    for (uint32_t i = 0; i < s->nclasses; i++) {
      if (!class_shown(s, i)) continue;
      se.cls = s->cls[i].name;
      se.value = as_seconds(s->cls[i].slo.stall_threshold_ns);
      pb_message(o, 4, gauge_metric, &se);
    }
    break;
  case FK_SLO_BUDGET:
    se.xname = "slo";
    se.xcap = 8;
    for (uint32_t i = 0; i < s->nclasses; i++) {
      if (!class_shown(s, i)) continue;
      const ttft_slo *sl = &s->cls[i].slo;
      const struct {
        const char *k;
        uint64_t v;
      } b[3] = {{"ttft", sl->ttft_ns}, {"tpot", sl->tpot_ns}, {"e2e", sl->e2e_ns}};
      se.cls = s->cls[i].name;
      for (int k = 0; k < 3; k++) {
        if (!b[k].v) continue;
        se.xval = b[k].k;
        se.value = as_seconds(b[k].v);
        pb_message(o, 4, gauge_metric, &se);
      }
    }
    break;
  }
}

static void family_body(pb_out *o, const void *arg) {
  const family *f = arg;
  const ttft_snapshot *s = f->x->s;
  family_name(o, f);
  pb_str(o, 2, f->help);
  pb_uint(o, 3, (uint64_t)f->type);
  /* per-process view: one set of Metrics per part, but the gatherer's own
   * families keep the top's one (report/format.h ttft__prom_gatherer_own) */
  int own = (f->kind == FK_REGISTRY_COUNTER &&
             ttft__prom_gatherer_own(0, ttft__prom_registry_ctrs[f->idx].c)) ||
            (f->kind == FK_GAUGE1 && ttft__prom_gatherer_own(1, (unsigned)f->idx));
  if (!s->nparts || own) {
    family_samples(o, f, s, NULL);
  } else {
    for (uint32_t p = 0; p < s->nparts; p++)
      if (s->part[p]) family_samples(o, f, s->part[p], s->part_name[p]);
  }
  if (f->unit) pb_str(o, 5, f->unit); /* MetricFamily.unit (newer servers) */
}

/* One MetricFamily, length-delimited. */
static void put_family(ttft__sb *sb, const family *f) {
  pb_out o = {sb, 0};
  pb_out c = {NULL, 0};
  family_body(&c, f);
  pb_varint(&o, c.n);
  family_body(&o, f);
}

static void put_all(pbx *x, ttft__sb *sb) {
  const ttft_snapshot *s = x->s;
  family f;
  memset(&f, 0, sizeof f);
  f.x = x;

  f.kind = FK_INFO, f.name = "measurement_info", f.type = MT_GAUGE;
  f.help = "Where this process starts the clock (start_point) and what it counts as an "
           "emitted token (token_point).";
  put_family(sb, &f);

  for (size_t d = 0; d < ttft__prom_nhists; d++) {
    const pb_hist_def *def = &ttft__prom_hists[d];
    f.kind = FK_HIST, f.idx = d, f.absolute = def->otel, f.name = def->name;
    f.help = def->help, f.type = MT_HISTOGRAM, f.unit = def->seconds ? "seconds" : NULL;
    put_family(sb, &f);
  }
  f.absolute = 0;

  if (s->prom_summaries) {
    for (size_t d = 0; d < ttft__prom_nhists; d++) {
      const pb_hist_def *def = &ttft__prom_hists[d];
      f.kind = FK_SUMMARY, f.idx = d, f.name = def->qname, f.type = MT_SUMMARY;
      f.unit = def->seconds ? "seconds" : NULL;
      f.help = "Quantiles p50..p99.9 of the metric of the same stem, from the library's "
               "high-resolution histogram (<= 0.5 % relative error), since start.";
      put_family(sb, &f);
    }
  }

  f.kind = FK_SPLIT_CACHE, f.name = "time_to_first_token_by_prefix_cache_seconds";
  f.type = MT_HISTOGRAM, f.unit = "seconds";
  f.help = "Time to first token split by prefix-cache outcome (requests that "
           "reported one), all classes.";
  put_family(sb, &f);
  f.kind = FK_SPLIT_PREFILL, f.name = "request_prefill_time_by_prefix_cache_seconds";
  f.help = "Prefill time (first token - scheduled) split by prefix-cache outcome "
           "(requests that reported one and were marked scheduled), all classes.";
  put_family(sb, &f);
  f.kind = FK_SPLIT_BAND, f.name = "time_to_first_token_by_prompt_length_seconds";
  f.help = "Time to first token split by prompt-length band (prompt_tokens = lo-hi, "
           "inclusive; requests that reported a prompt length), all classes.";
  put_family(sb, &f);

  f.kind = FK_ENGINE_STEP, f.name = "engine_step_seconds", f.help = TTFT__PROM_STEP_HELP;
  put_family(sb, &f);

  for (size_t v = 0; v < TTFT__STATUS_VIEWS; v++) {
    const pb_hist_def *def = &ttft__prom_views[v];
    f.kind = FK_VIEW, f.idx = v, f.name = def->name, f.help = def->help;
    f.type = MT_HISTOGRAM, f.unit = def->seconds ? "seconds" : NULL;
    put_family(sb, &f);
  }

  f.unit = NULL, f.type = MT_COUNTER, f.suffix = "_total";
  f.kind = FK_ENDED, f.name = "requests_ended";
  f.help = "Streams ended, by status (completed, cancelled, error).";
  put_family(sb, &f);
  for (size_t d = 0; d < ttft__prom_nctrs; d++) {
    f.kind = FK_COUNTER, f.idx = d, f.name = ttft__prom_ctrs[d].name, f.help = ttft__prom_ctrs[d].help;
    if (ttft__prom_ctrs[d].c == TTFT_COUNTER_STALLS) f.kind = FK_STALL_CAUSE;
    put_family(sb, &f);
    if (f.kind != FK_STALL_CAUSE) continue;
    f.kind = FK_STALL_SECONDS, f.name = "stall_seconds", f.unit = "seconds";
    f.help = TTFT__PROM_STALL_SECONDS_HELP;
    put_family(sb, &f);
    f.unit = NULL;
  }
  for (size_t d = 0; d < ttft__prom_nregistry_ctrs; d++) {
    f.kind = FK_REGISTRY_COUNTER, f.idx = d, f.name = ttft__prom_registry_ctrs[d].name;
    f.help = ttft__prom_registry_ctrs[d].help;
    put_family(sb, &f);
  }
  f.kind = FK_GAUGE_COUNTER, f.idx = TTFT_GAUGE_COARSE, f.name = TTFT__PROM_COARSE_TOTAL_NAME;
  f.help = TTFT__PROM_COARSE_TOTAL_HELP;
  put_family(sb, &f);

  f.type = MT_GAUGE, f.suffix = NULL;
  for (unsigned g = 0; g < TTFT_GAUGE_COUNT_; g++) {
    f.kind = FK_GAUGE1, f.idx = g, f.name = ttft__prom_gauges[g].name, f.help = ttft__prom_gauges[g].help;
    put_family(sb, &f);
  }

  f.kind = FK_STALL_BUDGET, f.name = "stall_budget_seconds", f.unit = "seconds";
  f.help = "Stall budget of each class: an inter-token gap above it is a stall.";
  put_family(sb, &f);
  if (ttft__any_slo_budget(s)) {
    f.kind = FK_SLO_BUDGET, f.name = "slo_budget_seconds";
    f.help = "SLO budgets of each class that sets them (slo = ttft, tpot, e2e).";
    put_family(sb, &f);
  }
}

int ttft__format_protobuf(const ttft_snapshot *s, ttft__sb *sb) {
  if (!s || !sb) return TTFT_EINVAL;
  void *scratch = NULL;
  pbx x;
  memset(&x, 0, sizeof x);
  x.s = s;
  x.native = s->native_histograms != 0;
  x.schema = pb_schema(s);
  ttft__allocator_current(&x.alloc);
  ttft__prom_sanitize_ns(x.ns, s->ns, sizeof s->ns);
  uint32_t nconst = s->n_const_labels;
  if (nconst > TTFT_MAX_CONST_LABELS) nconst = TTFT_MAX_CONST_LABELS;
  for (uint32_t k = 0; k < nconst; k++)
    if (ttft__prom_const_usable(s, k)) x.const_idx[x.nconst++] = k;
  if (x.native) { /* the tables the native buckets are read through, and
                     room for one histogram's native buckets */
    scratch = ttft__alloc(&x.alloc, TTFT__HIST_BUCKETS * (3 * sizeof(int32_t) + sizeof(uint64_t)));
    if (!scratch) return TTFT_ENOMEM;
    x.ncnt = scratch; /* uint64_t first: aligned */
    x.map[1] = (int32_t *)(x.ncnt + TTFT__HIST_BUCKETS);
    x.map[0] = x.map[1] + TTFT__HIST_BUCKETS;
    x.nkey = x.map[0] + TTFT__HIST_BUCKETS;
    pb_native_map(x.map[1], x.schema, 1);
    pb_native_map(x.map[0], x.schema, 0);
  }
  put_all(&x, sb);
  ttft__free(&x.alloc, scratch);
  return TTFT_OK;
}
