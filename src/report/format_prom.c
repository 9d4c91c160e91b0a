/*
 * format_prom.c — Prometheus text format 0.0.4 and OpenMetrics 1.0.
 *
 * Reads a snapshot only. docs/prometheus.md lists every family this file
 * writes, its unit and labels, and the bucket error bound; keep the two in
 * step.
 *
 * Shape of the output:
 *  - one family at a time (HELP, TYPE, [UNIT], then every sample of it),
 *    classes looped inside, so no family is split;
 *  - histograms: cumulative buckets at the configured `le` bounds, derived
 *    from the snapshot's high-resolution histogram, then `+Inf` (= count),
 *    `_sum` in exact decimal seconds, `_count`;
 *  - names from a table: the three OTel GenAI server metrics under their
 *    semconv Prometheus names, everything else under the snapshot's
 *    namespace (s->ns, sanitised);
 *  - every label value is escaped (backslash, double quote, newline) and
 *    invalid UTF-8 is replaced by U+FFFD, because a snapshot may have been
 *    decoded from untrusted bytes and Prometheus rejects bad UTF-8.
 */
#include <string.h>

#include "report/format.h"

/* -------------------------------------------------------- the families */

typedef ttft__prom_hist_def prom_hist_def;
typedef ttft__prom_ctr_def prom_ctr_def;

const ttft__prom_hist_def ttft__prom_hists[] = {
    {TTFT_METRIC_TTFT, 1, "gen_ai_server_time_to_first_token_seconds",
     "time_to_first_token_quantiles_seconds", 1,
     "Time to first token: from the sequence start (start_point) to its first visible token (token_point)."},
    {TTFT_METRIC_TPOT, 1, "gen_ai_server_time_per_output_token_seconds",
     "time_per_output_token_quantiles_seconds", 1,
     "Time per output token after the first, (t_last - t_first) / (N - 1), one per sequence with N >= 2."},
    {TTFT_METRIC_E2E, 1, "gen_ai_server_request_duration_seconds",
     "request_duration_quantiles_seconds", 1,
     "End-to-end time of a sequence, from its start (start_point) to stream end, every ended stream."},
    {TTFT_METRIC_ITL, 0, "inter_token_latency_seconds", "inter_token_latency_quantiles_seconds", 1,
     "Gap between consecutive emissions of a sequence, one observation per emission after the first."},
    {TTFT_METRIC_ITL_PER_TOKEN, 0, "inter_token_latency_per_token_seconds",
     "inter_token_latency_per_token_quantiles_seconds", 1,
     "Token-weighted inter-token latency: an emission of n tokens after a gap d counts n observations "
     "of d/n (not inter_token_latency_seconds, which counts one per emission)."},
    {TTFT_METRIC_QUEUE, 0, "request_queue_time_seconds", "request_queue_time_quantiles_seconds", 1,
     "Time from sequence start to first admission by the scheduler."},
    {TTFT_METRIC_PREFILL, 0, "request_prefill_time_seconds",
     "request_prefill_time_quantiles_seconds", 1,
     "Time from first admission by the scheduler to the first visible token."},
    {TTFT_METRIC_DECODE, 0, "request_decode_time_seconds", "request_decode_time_quantiles_seconds",
     1, "Time from the first to the last visible token of a sequence."},
    {TTFT_METRIC_OUTPUT_TOKENS, 0, "request_output_tokens", "request_output_tokens_quantiles", 0,
     "Output tokens per ended stream (0 for a stream that emitted nothing)."},
    {TTFT_METRIC_SEQ_ITL_P95, 0, "request_inter_token_latency_p95_seconds",
     "request_inter_token_latency_p95_quantiles_seconds", 1,
     "Each ended sequence's own p95 inter-token gap: how many users had a bad typing experience."},
    {TTFT_METRIC_SEQ_ITL_MAX, 0, "request_inter_token_latency_max_seconds",
     "request_inter_token_latency_max_quantiles_seconds", 1,
     "Each ended sequence's worst inter-token gap (exact)."},
    {TTFT_METRIC_ABANDONED_WAIT, 0, "abandoned_wait_seconds", "abandoned_wait_quantiles_seconds",
     1, "How long streams cancelled before their first token had waited (t_end - t_begin)."},
};
const size_t ttft__prom_nhists = sizeof ttft__prom_hists / sizeof ttft__prom_hists[0];

const ttft__prom_hist_def ttft__prom_views[TTFT__STATUS_VIEWS] = {
    {TTFT_METRIC_TTFT, 0, "time_to_first_token_by_status_seconds", NULL, 1,
     "Time to first token of the streams that ended with status (recorded at stream end; "
     "status=\"completed\" is what client benchmarks report)."},
    {TTFT_METRIC_TPOT, 0, "time_per_output_token_by_status_seconds", NULL, 1,
     "Time per output token of the streams with N >= 2 that ended with status."},
    {TTFT_METRIC_E2E, 0, "request_duration_by_status_seconds", NULL, 1,
     "End-to-end time of the streams that ended with status."},
    {TTFT_METRIC_OUTPUT_TOKENS, 0, "request_output_tokens_by_status", NULL, 0,
     "Output tokens of the streams that ended with status."},
};

const ttft__prom_ctr_def ttft__prom_ctrs[] = {
    {TTFT_COUNTER_BEGUN, "requests_started", "Sequences begun (accepted ttft_begin)."},
    {TTFT_COUNTER_DROPPED, "requests_dropped",
     "Sequences refused at begin because no slot was free; never measured."},
    {TTFT_COUNTER_TOKENS, "output_tokens", "Output tokens emitted (capacity view; not TPOT)."},
    {TTFT_COUNTER_STALLS, "stalls",
     "Inter-token gaps above the class's stall budget, by cause (unknown, prefill, preempted, "
     "not_scheduled, engine_idle, slow_step; docs/metrics.md)."},
    {TTFT_COUNTER_STALLED_SEQS, "stalled_requests", "Sequences with at least one stall gap."},
    {TTFT_COUNTER_ABANDONED, "requests_abandoned_before_first_token",
     "Streams cancelled before their first token (their waits are in abandoned_wait_seconds)."},
    {TTFT_COUNTER_SLO_MET, "requests_slo_met",
     "Ended streams that completed within every SLO budget of their class (good)."},
    {TTFT_COUNTER_SLO_JUDGED, "requests_slo_judged",
     "Ended streams the SLO judges: completed and errors, and cancelled ones that had already "
     "missed a budget (not those a client cancelled in time). Attainment = slo_met / slo_judged."},
    {TTFT_COUNTER_TOKEN_DEADLINES, "token_deadlines",
     "Token deadlines judged by the fluidity rule (Etalon's fluidity-index; docs/metrics.md): one "
     "per token after the first of streams with a token deadline, counted as they happen. Live "
     "fluidity = 1 - token_deadlines_missed / token_deadlines."},
    {TTFT_COUNTER_TOKEN_DEADLINES_MISSED, "token_deadlines_missed",
     "Token deadlines missed: tokens later than their deadline with the slack their stream had "
     "built up by running ahead (a gap of several deadlines misses several)."},
    {TTFT_COUNTER_FLUID, "requests_fluid",
     "Ended streams that completed with fluidity >= the class's fluid_min (default 0.9)."},
    {TTFT_COUNTER_FLUID_JUDGED, "requests_fluid_judged",
     "Ended streams judged for fluidity: those with a token deadline that completed or failed, "
     "and cancelled ones that had already missed a deadline. Fluid attainment = requests_fluid / "
     "requests_fluid_judged."},
    {TTFT_COUNTER_NO_TPOT, "requests_without_tpot",
     "Ended streams with fewer than two tokens, which have no TPOT."},
    {TTFT_COUNTER_PREEMPTIONS, "preemptions", "Times a sequence was preempted by the scheduler."},
    {TTFT_COUNTER_CLOCK_CLAMPED, "clock_clamped",
     "Timestamps earlier than the sequence's previous event, or more than a day ahead of the "
     "monotonic clock (a wall-clock time), clamped to that event."},
    {TTFT_COUNTER_CLOCK_REFUSED, "clock_refused",
     "Begins refused because their timestamp was more than a day ahead of the monotonic clock: "
     "a wall-clock time (time.time_ns(), system_clock) passed for a monotonic one."},
};
const size_t ttft__prom_nctrs = sizeof ttft__prom_ctrs / sizeof ttft__prom_ctrs[0];

const ttft__prom_ctr_def ttft__prom_registry_ctrs[] = {
    {TTFT_COUNTER_STALE, "stale_hook_calls",
     "Hook calls (token, step, mark, end, annotate) refused because their handle had ended or was "
     "unknown: an integration that keeps using ended handles."},
    {TTFT_COUNTER_BARRIER_FALLBACKS, "reclaim_barrier_fallbacks",
     "Slot-reclaim rounds whose memory barrier was made without membarrier(2) (fences the "
     "recording threads acknowledge, /proc, a TLB-shootdown barrier), because it failed at run "
     "time (e.g. a seccomp filter installed later). Reclamation goes on; non-zero means the "
     "process lost membarrier."},
    {TTFT_COUNTER_PUBLISH_FAILED, "publish_failures",
     "Publishes of this registry into its shared_dir segment that failed (disk full, read-only "
     "or removed directory); recording goes on, gatherers see the last published state."},
    {TTFT_COUNTER_SEGMENTS_SKIPPED, "gather_segments_skipped",
     "Segments a gatherer skipped: truncated, corrupt, hostile, of a future version or of "
     "another user (0 outside a gathered view)."},
    {TTFT_COUNTER_PROCESSES_EXITED, "gather_processes_exited",
     "Processes whose last published state a gatherer folded into the directory's archive "
     "(exits, kills, crashes; 0 outside a gathered view)."},
};
const size_t ttft__prom_nregistry_ctrs = sizeof ttft__prom_registry_ctrs / sizeof ttft__prom_registry_ctrs[0];

const ttft__prom_gauge_def ttft__prom_gauges[TTFT_GAUGE_COUNT_] = {
    [TTFT_GAUGE_INFLIGHT] = {"requests_in_flight", "Sequences begun and not yet ended."},
    [TTFT_GAUGE_LIVE_STALLS] = {"live_stalls",
                                "In-flight sequences whose last token is older than their stall budget "
                                "right now."},
    [TTFT_GAUGE_MEMORY] = {"registry_memory_bytes",
                           "Bytes the measuring registry has allocated (ttft_registry_memory): the "
                           "fixed part sized at creation and class_add (slots, per-thread shards, "
                           "class records), which memory_limit does not cover, plus the histogram "
                           "buckets, which memory_limit caps."},
    [TTFT_GAUGE_COARSE] = {"coarse_observations",
                           "DEPRECATED, removed in the next release: the value of the counter "
                           "coarse_observations_total, typed gauge; read that one (rate, increase)."},
    [TTFT_GAUGE_PROCESSES] = {"gather_processes",
                              "Live processes whose segments this gathered view merged (0 outside a "
                              "gathered view)."},
};

#define hist_defs ttft__prom_hists
#define N_HIST_DEFS ttft__prom_nhists
#define ctr_defs ttft__prom_ctrs
#define N_CTR_DEFS ttft__prom_nctrs

static const struct {
  ttft_counter c;
  const char *status;
} status_defs[] = {{TTFT_COUNTER_COMPLETED, "completed"},
                   {TTFT_COUNTER_CANCELLED, "cancelled"},
                   {TTFT_COUNTER_ERRORS, "error"}};

/* ------------------------------------------------------------- writers */

typedef struct prom_ctx {
  const ttft_snapshot *top;  /* what is written: labels, bounds, settings */
  const ttft_snapshot *s;    /* whose data: top, or the part being written */
  const char *process;       /* that part's name, or NULL (no label)      */
  ttft__sb *sb;
  int om;
  char ns[TTFT__NAME_MAX];
  uint32_t nconst;
  uint32_t const_idx[TTFT_MAX_CONST_LABELS]; /* usable constant labels */
} prom_ctx;

static int is_alpha_(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }


/* A label value: at most cap bytes of v (a fixed field that may lack its
 * NUL when the snapshot is corrupt), escaped, invalid UTF-8 -> U+FFFD. */
static void put_value(ttft__sb *sb, const char *v, size_t cap) {
  const unsigned char *p = (const unsigned char *)v;
  size_t n = 0;
  while (n < cap && p[n]) n++;
  size_t run = 0; /* start of the pending run of plain bytes */
  size_t i = 0;
  while (i < n) {
    unsigned char c = p[i];
    const char *esc = NULL;
    size_t adv = 1;
    if (c == '\\') esc = "\\\\";
    else if (c == '"') esc = "\\\"";
    else if (c == '\n') esc = "\\n";
    else if (c >= 0x80) {
      size_t bad;
      adv = ttft__utf8_seq(p + i, n - i, NULL, &bad);
      if (adv == 0) esc = "\xEF\xBF\xBD", adv = bad;
    }
    if (esc) {
      ttft__sb_put(sb, (const char *)p + run, i - run);
      ttft__sb_puts(sb, esc);
      run = i + adv;
    }
    i += adv;
  }
  ttft__sb_put(sb, (const char *)p + run, n - run);
}

static void put_label(ttft__sb *sb, int *first, const char *name, const char *v, size_t cap) {
  ttft__sb_puts(sb, *first ? "{" : ",");
  *first = 0;
  ttft__sb_puts(sb, name);
  ttft__sb_puts(sb, "=\"");
  put_value(sb, v, cap);
  ttft__sb_puts(sb, "\"");
}

/* The labels every series carries: class (when given), process (in a
 * per-process view), model (when set), then the usable constant labels
 * (model and constant labels are the exposition's: c->top's). Leaves the
 * set open. */
static void put_base_labels(const prom_ctx *c, int *first, const char *cls) {
  const ttft_snapshot *s = c->top;
  if (cls) put_label(c->sb, first, "class", cls, TTFT__NAME_MAX);
  if (c->process) put_label(c->sb, first, "process", c->process, TTFT__NAME_MAX);
  if (s->model[0]) put_label(c->sb, first, "model", s->model, sizeof s->model);
  for (uint32_t i = 0; i < c->nconst; i++) {
    uint32_t k = c->const_idx[i];
    put_label(c->sb, first, s->const_name[k], s->const_value[k], sizeof s->const_value[k]);
  }
}

static void close_labels(ttft__sb *sb, int first) {
  if (!first) ttft__sb_puts(sb, "}");
}

static void put_u64(ttft__sb *sb, uint64_t v) {
  char tmp[24];
  size_t i = sizeof tmp;
  do {
    tmp[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  ttft__sb_put(sb, tmp + i, sizeof tmp - i);
}

/* ns as exact decimal seconds: 1500000 -> "0.0015", 2e9 -> "2.0". */
static void put_seconds(ttft__sb *sb, uint64_t ns) {
  uint64_t whole = ns / 1000000000u, frac = ns % 1000000000u;
  put_u64(sb, whole);
  if (!frac) {
    ttft__sb_puts(sb, ".0");
    return;
  }
  char d[10];
  int len = 9;
  for (int i = 8; i >= 0; i--) {
    d[i] = (char)('0' + frac % 10);
    frac /= 10;
  }
  while (len > 1 && d[len - 1] == '0') len--;
  ttft__sb_puts(sb, ".");
  ttft__sb_put(sb, d, (size_t)len);
}

/* A bound as a label value (same canonical form as the Python client and
 * Prometheus 3: always a decimal point). */
static void put_bound(ttft__sb *sb, uint64_t v, int seconds) {
  if (seconds) {
    put_seconds(sb, v);
  } else {
    put_u64(sb, v);
    ttft__sb_puts(sb, ".0");
  }
}

/* A histogram's sum (128 bits wide, common/hist.h): exact decimal
 * seconds or a plain count, as put_seconds and put_u64 write them. */
static void put_sum(ttft__sb *sb, const ttft__shist *h, int seconds) {
  uint64_t hi = h ? h->sum_hi : 0, lo = h ? h->sum : 0;
  if (!hi) {
    if (seconds) put_seconds(sb, lo);
    else put_u64(sb, lo);
    return;
  }
  char d[40];
  uint32_t frac = seconds ? ttft__u128_divmod(&hi, &lo, 1000000000u) : 0;
  ttft__sb_put(sb, d, ttft__u128_decimal(hi, lo, d));
  if (!seconds) return;
  d[0] = '.';
  for (int i = 9; i >= 1; i--, frac /= 10) d[i] = (char)('0' + frac % 10);
  size_t len = 10;
  while (len > 2 && d[len - 1] == '0') len--;
  ttft__sb_put(sb, d, len);
}

static void put_name(const prom_ctx *c, int absolute, const char *name, const char *suffix) {
  if (!absolute) ttft__sb_puts(c->sb, c->ns);
  ttft__sb_puts(c->sb, name);
  if (suffix) ttft__sb_puts(c->sb, suffix);
}

/* HELP / TYPE / UNIT for a family. name is the family name as the 0.0.4
 * format writes it (counters with _total); OpenMetrics drops a counter's
 * _total and an info's _info from the family name. */
static void put_header(const prom_ctx *c, int absolute, const char *name, const char *type,
                       const char *unit, const char *help) {
  static const char *const kinds[] = {"HELP", "TYPE", "UNIT"};
  int is_ctr = strcmp(type, "counter") == 0;
  int is_info = strcmp(type, "info") == 0;
  for (int k = 0; k < 3; k++) {
    if (k == 2 && (!c->om || !unit)) break;
    ttft__sb_puts(c->sb, "# ");
    ttft__sb_puts(c->sb, kinds[k]);
    ttft__sb_puts(c->sb, " ");
    put_name(c, absolute, name, NULL);
    if (is_ctr && !c->om) ttft__sb_puts(c->sb, "_total");
    if (is_info && !c->om) ttft__sb_puts(c->sb, "_info");
    ttft__sb_puts(c->sb, " ");
    if (k == 0) ttft__sb_puts(c->sb, help); /* fixed texts: nothing to escape */
    else if (k == 1) ttft__sb_puts(c->sb, (is_info && !c->om) ? "gauge" : type);
    else ttft__sb_puts(c->sb, unit);
    ttft__sb_puts(c->sb, "\n");
  }
}

static const ttft__shist *class_hist(const ttft__sclass *k, ttft_metric m) {
  return k->h[m];
}

static const char *class_name(const ttft_snapshot *s, uint32_t i) {
  return s->cls[i].name;
}

/* Whether class i has series: it is exported (ttft__class_exported: it
 * saw a begin, or idle classes are exported too), and no earlier class
 * used its name (only a corrupt or hand-made snapshot has one; it would
 * duplicate series). */
static int class_shown(const ttft_snapshot *s, uint32_t i) {
  if (!ttft__class_exported(s, i)) return 0;
  for (uint32_t j = 0; j < i; j++)
    if (strncmp(s->cls[j].name, s->cls[i].name, TTFT__NAME_MAX) == 0) return 0;
  return 1;
}

/* The Prometheus bounds of metric m: the snapshot's, or the defaults when
 * it has none. Bounds that do not ascend strictly are skipped later. */
static const uint64_t *bounds_of(const ttft_snapshot *s, ttft_metric m, uint32_t *n) {
  uint32_t k = s->prom_n_buckets[m];
  if (k == 0) return ttft__default_prom_buckets(m, n);
  if (k > TTFT_MAX_PROM_BUCKETS) k = TTFT_MAX_PROM_BUCKETS;
  *n = k;
  return s->prom_buckets[m];
}

/* Cumulative counts at each bound, in one pass over the fine buckets.
 * cum[j] = observations in fine buckets whose largest value is <= b[j],
 * which is what ttft__shist_count_le returns; exact when b[j] is a bucket's
 * upper edge, else it leaves out the one fine bucket that straddles b[j]
 * (< 0.8 % wide). The rule depends on nothing but the bucket, never on
 * min or max, so a bucket's count never falls between two scrapes (a fall
 * is a counter reset to Prometheus). Bounds must ascend. */
static void cumulative(const ttft__shist *h, const uint64_t *b, uint32_t n, uint64_t *cum) {
  uint64_t run = 0;
  uint32_t j = 0, end = ttft__shist_hi(h);
  uint32_t i = ttft__shist_next(h, 0);
  for (; j < n; j++) {
    while (i < end && ttft__bucket_hi(i) <= b[j]) {
      run += ttft__shist_at(h, i);
      i = ttft__shist_next(h, i + 1);
    }
    cum[j] = run > h->count ? h->count : run;
  }
}

static void put_sample_end(ttft__sb *sb, uint64_t v) {
  ttft__sb_puts(sb, " ");
  put_u64(sb, v);
  ttft__sb_puts(sb, "\n");
}

/* OpenMetrics: the exemplar of a bucket line, before its newline:
 * ` # {trace_id="..."} value timestamp` (value in the metric's unit,
 * timestamp in seconds since 1970 with millisecond precision, left out
 * when unknown). */
static void put_exemplar(ttft__sb *sb, const ttft__slow *e, int seconds) {
  char trace[33];
  ttft__slow_trace_hex(e, trace);
  ttft__sb_puts(sb, " # {trace_id=\"");
  ttft__sb_puts(sb, trace);
  ttft__sb_puts(sb, "\"} ");
  if (seconds) put_seconds(sb, e->value);
  else put_u64(sb, e->value);
  if (e->unix_end) {
    ttft__sb_puts(sb, " ");
    put_u64(sb, e->unix_end / 1000000000u);
    ttft__sb_printf(sb, ".%03u", (unsigned)(e->unix_end / 1000000u % 1000u));
  }
}

/* One histogram series set (buckets, +Inf, sum, count) for one label set.
 * cls / xname+xval: the class and one extra label (split key), either may
 * be NULL. exk: the class whose slowest requests give OpenMetrics
 * exemplars to the buckets (NULL: none). */
static void put_hist_series_ex(const prom_ctx *c, const prom_hist_def *d, const ttft__shist *h,
                               const char *cls, const char *xname, const char *xval,
                               const ttft__sclass *exk);
static void put_hist_series(const prom_ctx *c, const prom_hist_def *d, const ttft__shist *h,
                            const char *cls, const char *xname, const char *xval) {
  put_hist_series_ex(c, d, h, cls, xname, xval, NULL);
}

static void put_hist_series_ex(const prom_ctx *c, const prom_hist_def *d, const ttft__shist *h,
                               const char *cls, const char *xname, const char *xval,
                               const ttft__sclass *exk) {
  uint32_t n;
  const uint64_t *b = bounds_of(c->top, d->m, &n);
  uint64_t cum[TTFT_MAX_PROM_BUCKETS];
  uint64_t bb[TTFT_MAX_PROM_BUCKETS];
  uint32_t k = 0;
  for (uint32_t j = 0; j < n; j++) /* keep strictly ascending bounds only */
    if (k == 0 || b[j] > bb[k - 1]) bb[k++] = b[j];
  cumulative(h, bb, k, cum);
  uint64_t count = h ? h->count : 0;
  for (uint32_t j = 0; j <= k; j++) {
    int first = 1;
    put_name(c, d->otel, d->name, "_bucket");
    put_base_labels(c, &first, cls);
    if (xname) put_label(c->sb, &first, xname, xval, TTFT_MAX_LABEL);
    ttft__sb_puts(c->sb, first ? "{le=\"" : ",le=\"");
    if (j < k) put_bound(c->sb, bb[j], d->seconds);
    else ttft__sb_puts(c->sb, "+Inf");
    ttft__sb_puts(c->sb, "\"}");
    const ttft__slow *ex = c->om ? ttft__exemplar(exk, d->m, j ? bb[j - 1] : 0, j < k ? bb[j] : UINT64_MAX)
                                 : NULL;
    if (ex && (j < k ? cum[j] : count) > (j ? cum[j - 1] : 0)) {
      ttft__sb_puts(c->sb, " ");
      put_u64(c->sb, j < k ? cum[j] : count);
      put_exemplar(c->sb, ex, d->seconds);
      ttft__sb_puts(c->sb, "\n");
    } else {
      put_sample_end(c->sb, j < k ? cum[j] : count);
    }
  }
  int first = 1;
  put_name(c, d->otel, d->name, "_sum");
  put_base_labels(c, &first, cls);
  if (xname) put_label(c->sb, &first, xname, xval, TTFT_MAX_LABEL);
  close_labels(c->sb, first);
  ttft__sb_puts(c->sb, " ");
  put_sum(c->sb, h, d->seconds);
  ttft__sb_puts(c->sb, "\n");
  first = 1;
  put_name(c, d->otel, d->name, "_count");
  put_base_labels(c, &first, cls);
  if (xname) put_label(c->sb, &first, xname, xval, TTFT_MAX_LABEL);
  close_labels(c->sb, first);
  put_sample_end(c->sb, count);
}

/* The sets of samples a family holds: one, of c->top itself, or one per
 * part of a per-process view (ttft_snapshot.nparts). VIEWS(c) loops over
 * them with c->s (the data) and c->process (the label) set; every family's
 * header is written once, before it. */
static uint32_t view_count(const prom_ctx *c) { return c->top->nparts ? c->top->nparts : 1; }
static int view_set(prom_ctx *c, uint32_t v) {
  if (!c->top->nparts) {
    c->s = c->top, c->process = NULL;
    return 1;
  }
  c->s = c->top->part[v];
  c->process = c->top->part_name[v];
  return c->s != NULL;
}
#define VIEWS(c) for (uint32_t v_ = 0; v_ < view_count(c); v_++) if (view_set((c), v_))

static void put_histograms(prom_ctx *c) {
  for (size_t d = 0; d < N_HIST_DEFS; d++) {
    const prom_hist_def *def = &hist_defs[d];
    put_header(c, def->otel, def->name, "histogram", def->seconds ? "seconds" : NULL, def->help);
    VIEWS(c) {
      const ttft_snapshot *s = c->s;
      for (uint32_t i = 0; i < s->nclasses; i++) {
        if (!class_shown(s, i)) continue;
        put_hist_series_ex(c, def, class_hist(&s->cls[i], def->m), class_name(s, i), NULL, NULL,
                           &s->cls[i]);
      }
    }
  }
}

static void put_band_series(const prom_ctx *c, const prom_hist_def *dp);

/* TTFT again, split by prefix-cache outcome and by prompt-length band
 * (all classes together, as the snapshot keeps them). Same bounds as TTFT. */
static void put_splits(prom_ctx *c) {
  prom_hist_def d = {TTFT_METRIC_TTFT, 0, "time_to_first_token_by_prefix_cache_seconds", NULL, 1,
                     "Time to first token split by prefix-cache outcome (requests that "
                     "reported one), all classes."};
  put_header(c, 0, d.name, "histogram", "seconds", d.help);
  static const int pband[3] = {TTFT_PREFIX_MISS, TTFT_PREFIX_PARTIAL, TTFT_PREFIX_HIT};
  static const char *const cache[3] = {"miss", "partial", "hit"};
  VIEWS(c) {
    for (int i = 0; i < 3; i++)
      put_hist_series(c, &d, c->s->split_cache[pband[i]], NULL, "prefix_cache", cache[i]);
  }

  /* PREFILL by the same bands: a hit prefills faster (and may queue longer) */
  prom_hist_def dp = {TTFT_METRIC_PREFILL, 0, "request_prefill_time_by_prefix_cache_seconds", NULL, 1,
                      "Prefill time (first token - scheduled) split by prefix-cache outcome "
                      "(requests that reported one and were marked scheduled), all classes."};
  put_header(c, 0, dp.name, "histogram", "seconds", dp.help);
  VIEWS(c) {
    for (int i = 0; i < 3; i++)
      put_hist_series(c, &dp, c->s->split_prefill[pband[i]], NULL, "prefix_cache", cache[i]);
  }

  d.name = "time_to_first_token_by_prompt_length_seconds";
  d.help = "Time to first token split by prompt-length band (prompt_tokens = lo-hi, "
           "inclusive; requests that reported a prompt length), all classes.";
  put_header(c, 0, d.name, "histogram", "seconds", d.help);
  VIEWS(c) put_band_series(c, &d);
}

/* The prompt-length bands of c->s (its own edges: its data is split by them). */
static void put_band_series(const prom_ctx *c, const prom_hist_def *dp) {
  const ttft_snapshot *s = c->s;
  prom_hist_def d = *dp;
  uint32_t nb = s->n_band_edges + 1;
  if (nb > TTFT_MAX_BANDS) nb = TTFT_MAX_BANDS;
  for (uint32_t i = 0; i < nb; i++) {
    char band[48], *p = band;
    uint64_t lo = i ? s->band_edges[i - 1] : 0;
    uint64_t hi = i + 1 < nb ? s->band_edges[i] : 0;
    if (i + 1 < nb && hi <= lo) continue; /* not ascending: corrupt, skip */
    ttft__sb bs;
    ttft__sb_init(&bs, p, sizeof band);
    put_u64(&bs, lo);
    if (i + 1 < nb) {
      ttft__sb_puts(&bs, "-");
      put_u64(&bs, hi - 1);
    } else {
      ttft__sb_puts(&bs, "+");
    }
    put_hist_series(c, &d, s->split_band[i], NULL, "prompt_tokens", band);
  }
}

/* The per-status views: label status after the base labels; a class has
 * series for a status once a stream of it ended so. */
static void put_views(prom_ctx *c) {
  for (int v = 0; v < TTFT__STATUS_VIEWS; v++) {
    const prom_hist_def *def = &ttft__prom_views[v];
    put_header(c, 0, def->name, "histogram", def->seconds ? "seconds" : NULL, def->help);
    VIEWS(c) {
      const ttft_snapshot *s = c->s;
      for (uint32_t i = 0; i < s->nclasses; i++) {
        if (!class_shown(s, i)) continue;
        for (int st = 0; st < TTFT_STATUS_COUNT_; st++) {
          if (!ttft__prom_view_shown(s, i, st)) continue;
          put_hist_series(c, def, s->cls[i].sv[st][v], class_name(s, i), "status",
                          ttft_status_name((ttft_status)st));
        }
      }
    }
  }
}

/* The exact tails from the high-resolution histogram, as summaries. */
static void put_summary_series(const prom_ctx *c, const prom_hist_def *def, const double *qs,
                               const char *const *qn, size_t nq);
static void put_summaries(prom_ctx *c) {
  static const double qs[] = {0.5, 0.9, 0.95, 0.99, 0.999};
  static const char *const qn[] = {"0.5", "0.9", "0.95", "0.99", "0.999"};
  for (size_t d = 0; d < N_HIST_DEFS; d++) {
    const prom_hist_def *def = &hist_defs[d];
    put_header(c, 0, def->qname, "summary", def->seconds ? "seconds" : NULL,
               "Quantiles p50..p99.9 of the metric of the same stem, from the library's "
               "high-resolution histogram (<= 0.5 % relative error), since start.");
    VIEWS(c) put_summary_series(c, def, qs, qn, sizeof qs / sizeof qs[0]);
  }
}

static void put_summary_series(const prom_ctx *c, const prom_hist_def *def, const double *qs,
                               const char *const *qn, size_t nq) {
  const ttft_snapshot *s = c->s;
  for (uint32_t i = 0; i < s->nclasses; i++) {
    if (!class_shown(s, i)) continue;
    const ttft__shist *h = class_hist(&s->cls[i], def->m);
    uint64_t count = h ? h->count : 0;
    for (size_t q = 0; q < nq; q++) {
      int first = 1;
      put_name(c, 0, def->qname, NULL);
      put_base_labels(c, &first, class_name(s, i));
      put_label(c->sb, &first, "quantile", qn[q], 8);
      close_labels(c->sb, first);
      ttft__sb_puts(c->sb, " ");
      if (!count) ttft__sb_puts(c->sb, "NaN");
      else if (def->seconds) put_seconds(c->sb, ttft__shist_quantile(h, qs[q]));
      else put_u64(c->sb, ttft__shist_quantile(h, qs[q]));
      ttft__sb_puts(c->sb, "\n");
    }
    int first = 1;
    put_name(c, 0, def->qname, "_sum");
    put_base_labels(c, &first, class_name(s, i));
    close_labels(c->sb, first);
    ttft__sb_puts(c->sb, " ");
    put_sum(c->sb, h, def->seconds);
    ttft__sb_puts(c->sb, "\n");
    first = 1;
    put_name(c, 0, def->qname, "_count");
    put_base_labels(c, &first, class_name(s, i));
    close_labels(c->sb, first);
    put_sample_end(c->sb, count);
  }
}

/* stalls_total by cause (its header is written by the caller), then
 * stall_seconds_total by cause: every cause of every shown class, so a
 * sum over cause is the class's stalls. */
static void put_stall_causes(prom_ctx *c) {
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1)
      put_header(c, 0, "stall_seconds", "counter", "seconds", TTFT__PROM_STALL_SECONDS_HELP);
    VIEWS(c) {
      const ttft_snapshot *s = c->s;
      for (uint32_t i = 0; i < s->nclasses; i++) {
        if (!class_shown(s, i)) continue;
        for (int k = 0; k < TTFT_STALL_CAUSE_COUNT; k++) {
          int first = 1;
          put_name(c, 0, pass ? "stall_seconds" : "stalls", "_total");
          put_base_labels(c, &first, class_name(s, i));
          put_label(c->sb, &first, "cause", ttft_stall_cause_name((ttft_stall_cause)k), 16);
          close_labels(c->sb, first);
          if (!pass) {
            put_sample_end(c->sb, s->cls[i].stall_n[k]);
          } else {
            ttft__sb_puts(c->sb, " ");
            put_seconds(c->sb, s->cls[i].stall_ns[k]);
            ttft__sb_puts(c->sb, "\n");
          }
        }
      }
    }
  }
}

/* Engine-step durations, registry-wide (no class label), by prefill;
 * ITL's bucket bounds (a decode step is an inter-token gap). */
static void put_engine_steps(prom_ctx *c) {
  prom_hist_def d = {TTFT_METRIC_ITL, 0, "engine_step_seconds", NULL, 1, TTFT__PROM_STEP_HELP};
  put_header(c, 0, d.name, "histogram", "seconds", d.help);
  static const char *const pf[2] = {"false", "true"};
  VIEWS(c) {
    for (int i = 0; i < 2; i++) put_hist_series(c, &d, c->s->step[i], NULL, "prefill", pf[i]);
  }
}

static void put_counters(prom_ctx *c) {
  put_header(c, 0, "requests_ended", "counter", NULL,
             "Streams ended, by status (completed, cancelled, error).");
  VIEWS(c) {
    const ttft_snapshot *s = c->s;
    for (uint32_t i = 0; i < s->nclasses; i++) {
      if (!class_shown(s, i)) continue;
      for (size_t k = 0; k < 3; k++) {
        int first = 1;
        put_name(c, 0, "requests_ended", "_total");
        put_base_labels(c, &first, class_name(s, i));
        put_label(c->sb, &first, "status", status_defs[k].status, 16);
        close_labels(c->sb, first);
        put_sample_end(c->sb, s->cls[i].ctr[status_defs[k].c]);
      }
    }
  }
  for (size_t d = 0; d < N_CTR_DEFS; d++) {
    put_header(c, 0, ctr_defs[d].name, "counter", NULL, ctr_defs[d].help);
    if (ctr_defs[d].c == TTFT_COUNTER_STALLS) {
      put_stall_causes(c);
      continue;
    }
    VIEWS(c) {
      const ttft_snapshot *s = c->s;
      for (uint32_t i = 0; i < s->nclasses; i++) {
        if (!class_shown(s, i)) continue;
        int first = 1;
        put_name(c, 0, ctr_defs[d].name, "_total");
        put_base_labels(c, &first, class_name(s, i));
        close_labels(c->sb, first);
        put_sample_end(c->sb, s->cls[i].ctr[ctr_defs[d].c]);
      }
    }
  }
}

/* One sample with the base labels and no class: each view's value of a
 * registry-wide counter or gauge. A family of the gatherer itself
 * (ttft__prom_gatherer_own) has one sample, the top snapshot's, without a
 * process label, in a per-process view too. */
static void put_plain1(const prom_ctx *c, const char *name, const char *suffix, int is_gauge,
                      unsigned idx) {
  int first = 1;
  put_name(c, 0, name, suffix);
  put_base_labels(c, &first, NULL);
  close_labels(c->sb, first);
  put_sample_end(c->sb, is_gauge ? c->s->gauge[idx] : c->s->all.ctr[idx]);
}
static void put_plain(prom_ctx *c, const char *name, const char *suffix, int gatherer_own,
                      int is_gauge, unsigned idx) {
  if (gatherer_own && c->top->nparts) {
    c->s = c->top, c->process = NULL;
    put_plain1(c, name, suffix, is_gauge, idx);
    return;
  }
  VIEWS(c) put_plain1(c, name, suffix, is_gauge, idx);
}

/* registry-level counters: one sample per view, no class label */
static void put_registry_counters(prom_ctx *c) {
  for (size_t d = 0; d < ttft__prom_nregistry_ctrs; d++) {
    const prom_ctr_def *def = &ttft__prom_registry_ctrs[d];
    put_header(c, 0, def->name, "counter", NULL, def->help);
    put_plain(c, def->name, "_total", ttft__prom_gatherer_own(0, def->c), 0, (unsigned)def->c);
  }
  put_header(c, 0, TTFT__PROM_COARSE_TOTAL_NAME, "counter", NULL, TTFT__PROM_COARSE_TOTAL_HELP);
  put_plain(c, TTFT__PROM_COARSE_TOTAL_NAME, "_total", 0, 1, TTFT_GAUGE_COARSE);
}

static void put_gauges(prom_ctx *c) {
  for (unsigned g = 0; g < TTFT_GAUGE_COUNT_; g++) {
    /* OpenMetrics names a counter's family without _total: the deprecated
     * gauge coarse_observations would clash with the counter
     * coarse_observations_total there, so only the counter is written */
    if (c->om && g == TTFT_GAUGE_COARSE) continue;
    put_header(c, 0, ttft__prom_gauges[g].name, "gauge", NULL, ttft__prom_gauges[g].help);
    put_plain(c, ttft__prom_gauges[g].name, NULL, ttft__prom_gatherer_own(1, g), 1, g);
  }

  /* budgets, so dashboards can draw them next to the percentiles */
  put_header(c, 0, "stall_budget_seconds", "gauge", "seconds",
             "Stall budget of each class: an inter-token gap above it is a stall.");
  VIEWS(c) {
    const ttft_snapshot *s = c->s;
    for (uint32_t i = 0; i < s->nclasses; i++) {
      if (!class_shown(s, i)) continue;
      int first = 1;
      put_name(c, 0, "stall_budget_seconds", NULL);
      put_base_labels(c, &first, class_name(s, i));
      close_labels(c->sb, first);
      ttft__sb_puts(c->sb, " ");
      put_seconds(c->sb, s->cls[i].slo.stall_threshold_ns);
      ttft__sb_puts(c->sb, "\n");
    }
  }
  if (!ttft__any_slo_budget(c->top)) return;
  put_header(c, 0, "slo_budget_seconds", "gauge", "seconds",
             "SLO budgets of each class that sets them (slo = ttft, tpot, e2e).");
  VIEWS(c) {
    const ttft_snapshot *s = c->s;
    for (uint32_t i = 0; i < s->nclasses; i++) {
      if (!class_shown(s, i)) continue;
      const ttft_slo *o = &s->cls[i].slo;
      const struct {
        const char *k;
        uint64_t v;
      } b[3] = {{"ttft", o->ttft_ns}, {"tpot", o->tpot_ns}, {"e2e", o->e2e_ns}};
      for (int k = 0; k < 3; k++) {
        if (!b[k].v) continue;
        int first = 1;
        put_name(c, 0, "slo_budget_seconds", NULL);
        put_base_labels(c, &first, class_name(s, i));
        put_label(c->sb, &first, "slo", b[k].k, 8);
        close_labels(c->sb, first);
        ttft__sb_puts(c->sb, " ");
        put_seconds(c->sb, b[k].v);
        ttft__sb_puts(c->sb, "\n");
      }
    }
  }
}

static void put_info(prom_ctx *c) {
  put_header(c, 0, "measurement", "info", NULL,
             "Where this process starts the clock (start_point) and what it counts as an "
             "emitted token (token_point).");
  VIEWS(c) {
    const ttft_snapshot *s = c->s;
    int first = 1;
    put_name(c, 0, "measurement", "_info");
    put_label(c->sb, &first, "start_point", s->start_point, sizeof s->start_point);
    put_label(c->sb, &first, "token_point", s->token_point, sizeof s->token_point);
    put_label(c->sb, &first, "version", ttft_version_string(), 16);
    put_base_labels(c, &first, NULL);
    close_labels(c->sb, first);
    ttft__sb_puts(c->sb, " 1\n");
  }
}

/* Namespace: [a-zA-Z0-9_] only (':' is for recording rules), not starting
 * with a digit. A corrupt or odd one is repaired rather than refused. The
 * protobuf writer uses it too (report/format.h). */
void ttft__prom_sanitize_ns(char *dst, const char *src, size_t cap) {
  size_t n = 0, o = 0;
  while (n < cap && src[n]) n++;
  for (size_t i = 0; i < n && o + 2 < TTFT__NAME_MAX; i++) {
    unsigned char ch = (unsigned char)src[i];
    if (o == 0 && is_digit(ch)) dst[o++] = '_';
    dst[o++] = (is_alpha_(ch) || is_digit(ch)) ? (char)ch : '_';
  }
  dst[o] = '\0';
}

/* A constant label is usable when its name is a valid label name that the
 * exporters do not write themselves (TTFT_RESERVED_LABELS, "__*":
 * ttft__label_reserved, the list ttft_registry_new checks) and that no
 * earlier constant label used. A decoded snapshot may carry any name. */
int ttft__prom_const_usable(const ttft_snapshot *s, uint32_t k) {
  const char *nm = s->const_name[k];
  size_t n = 0;
  while (n < TTFT__NAME_MAX && nm[n]) n++;
  if (n == 0 || n == TTFT__NAME_MAX) return 0;
  if (!is_alpha_((unsigned char)nm[0])) return 0;
  for (size_t i = 1; i < n; i++)
    if (!is_alpha_((unsigned char)nm[i]) && !is_digit((unsigned char)nm[i])) return 0;
  if (ttft__label_reserved(nm)) return 0;
  for (uint32_t j = 0; j < k; j++)
    if (strncmp(s->const_name[j], nm, TTFT__NAME_MAX) == 0) return 0;
  return 1;
}

int ttft__format_prometheus(const ttft_snapshot *s, ttft__sb *sb, int openmetrics) {
  if (!s || !sb) return TTFT_EINVAL;
  prom_ctx c;
  memset(&c, 0, sizeof c);
  c.top = c.s = s;
  c.sb = sb;
  c.om = openmetrics != 0;
  ttft__prom_sanitize_ns(c.ns, s->ns, sizeof s->ns);
  uint32_t nconst = s->n_const_labels;
  if (nconst > TTFT_MAX_CONST_LABELS) nconst = TTFT_MAX_CONST_LABELS;
  for (uint32_t k = 0; k < nconst; k++)
    if (ttft__prom_const_usable(s, k)) c.const_idx[c.nconst++] = k;

  put_info(&c);
  put_histograms(&c);
  if (s->prom_summaries) put_summaries(&c);
  put_splits(&c);
  put_engine_steps(&c);
  put_views(&c);
  put_counters(&c);
  put_registry_counters(&c);
  put_gauges(&c);
  if (c.om) ttft__sb_puts(sb, "# EOF\n");
  return TTFT_OK;
}
