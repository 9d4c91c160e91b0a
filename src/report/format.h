/*
 * format.h — the formatters behind ttft_snapshot_format. Each renders a
 * snapshot into a string builder and reads nothing else.
 * Layer: report (src/README.md).
 */
#ifndef TTFT_FORMAT_H
#define TTFT_FORMAT_H

#include "common/snapshot.h"

/* ------------------------------------------- the exposition's families
 * The Prometheus/OpenMetrics families (docs/prometheus.md), defined once in
 * format_prom.c for every exposition of the same data. */
typedef struct ttft__prom_hist_def {
  ttft_metric m;
  int otel;             /* name is absolute (no namespace)              */
  const char *name;     /* family name                                  */
  const char *qname;    /* summary family (always under the namespace)  */
  int seconds;          /* 1: ns shown as seconds; 0: unitless count    */
  const char *help;
} ttft__prom_hist_def;

typedef struct ttft__prom_ctr_def {
  ttft_counter c;
  const char *name; /* without _total */
  const char *help;
} ttft__prom_ctr_def;

/* One histogram family per metric, label class (qname: the summaries). */
TTFT_HIDDEN extern const ttft__prom_hist_def ttft__prom_hists[];
TTFT_HIDDEN extern const size_t ttft__prom_nhists;
/* The per-status views: one family per view (index as ttft__status_view),
 * labels class and status; qname unused. */
TTFT_HIDDEN extern const ttft__prom_hist_def ttft__prom_views[TTFT__STATUS_VIEWS];
/* Whether class c of s has series in the view families for status st:
 * once a stream of c ended with st (a labelled series appears with its
 * first observation, as a client library's do). */
static inline int ttft__prom_view_shown(const ttft_snapshot *s, uint32_t c, int st) {
  return s->cls[c].sv[st][ttft__status_view(TTFT_METRIC_E2E)]->count != 0;
}
/* Whether any class of s (or of any of its parts) sets an SLO budget:
 * the slo_budget family is written only then, in every exposition. */
static inline int ttft__any_slo_budget(const ttft_snapshot *s) {
  for (uint32_t p = 0; p < (s->nparts ? s->nparts : 1); p++) {
    const ttft_snapshot *d = s->nparts ? s->part[p] : s;
    for (uint32_t i = 0; d && i < d->nclasses; i++)
      if (d->cls[i].slo.ttft_ns || d->cls[i].slo.tpot_ns || d->cls[i].slo.e2e_ns) return 1;
  }
  return 0;
}
/* Counters with a class label (requests_ended, by status, is separate). */
/* 1.2 families both exposition writers share (docs/prometheus.md) */
#define TTFT__PROM_STALL_SECONDS_HELP                                                       \
  "Summed gaps of the stalls (inter-token gaps above the class's stall budget), by cause: " \
  "how long streams sat silent, and why."
#define TTFT__PROM_STEP_HELP                                                                \
  "Engine-step (iteration) durations, registry-wide, by whether the step carried prefill: " \
  "what prefill costs the decodes batched with it."
TTFT_HIDDEN extern const ttft__prom_ctr_def ttft__prom_ctrs[];
TTFT_HIDDEN extern const size_t ttft__prom_nctrs;
/* Counters of the whole registry: no class label, the sum over classes. */
TTFT_HIDDEN extern const ttft__prom_ctr_def ttft__prom_registry_ctrs[];
TTFT_HIDDEN extern const size_t ttft__prom_nregistry_ctrs;

/* A per-process view (ttft_snapshot.nparts > 0) writes every family once
 * with one set of samples per part, each labelled process="<part name>"
 * right after class (before model and the constant labels), in all three
 * expositions; the model, constant labels, namespace, bucket bounds and
 * settings are the top snapshot's. The exception: the families that count
 * what the gatherer itself saw (segments skipped, processes exited,
 * processes merged) describe no one process, so they keep one sample, the
 * top snapshot's, without a process label. gauge: 1 for ttft_gauge g, 0
 * for ttft_counter g. */
static inline int ttft__prom_gatherer_own(int gauge, unsigned g) {
  if (gauge) return g == TTFT_GAUGE_PROCESSES;
  return g == TTFT_COUNTER_SEGMENTS_SKIPPED || g == TTFT_COUNTER_PROCESSES_EXITED;
}

/* The gauges, one family each with the base labels only; in
 * ttft_gauge order (index = the gauge). */
typedef struct ttft__prom_gauge_def {
  const char *name;
  const char *help;
} ttft__prom_gauge_def;
TTFT_HIDDEN extern const ttft__prom_gauge_def ttft__prom_gauges[TTFT_GAUGE_COUNT_];

/* coarse_observations is a running total, so it is the counter
 * coarse_observations_total, which rate() and increase() may read (issue
 * 32.8); the gauge of the same value, which 1.2 exported alone, stays for
 * one release, deprecated, in the Prometheus text format and protobuf
 * (OpenMetrics cannot hold a gauge and a counter of one family name).
 * Both writers write the counter after the registry counters. */
#define TTFT__PROM_COARSE_TOTAL_NAME "coarse_observations"
#define TTFT__PROM_COARSE_TOTAL_HELP                                                        \
  "Observations recorded at power-of-two resolution only, because memory_limit was "        \
  "reached (0 normally; raise memory_limit if it grows)."

/* The namespace as both Prometheus writers write it ([A-Za-z0-9_], not
 * starting with a digit), from src (at most cap bytes) into dst
 * (TTFT__NAME_MAX bytes). */
TTFT_HIDDEN void ttft__prom_sanitize_ns(char *dst, const char *src, size_t cap);
/* 1 when constant label k of s is written by both Prometheus writers: a
 * valid name, not reserved (ttft__label_reserved), not a repeat. */
TTFT_HIDDEN int ttft__prom_const_usable(const ttft_snapshot *s, uint32_t k);

/* Formatters: each renders s into sb; return TTFT_OK or a TTFT_E* code. */
TTFT_HIDDEN int ttft__format_text(const ttft_snapshot *s, ttft__sb *sb);
TTFT_HIDDEN int ttft__format_json(const ttft_snapshot *s, ttft__sb *sb);
TTFT_HIDDEN int ttft__format_prometheus(const ttft_snapshot *s, ttft__sb *sb, int openmetrics);

/* OTLP (docs/opentelemetry.md): s as an ExportMetricsServiceRequest.
 * The pusher (otlp.c) passes its options; ttft_snapshot_format passes
 * NULL: cumulative, resource from the environment, times from s. */
typedef struct ttft__otlp_opts {
  const char *service_name;        /* NULL: OTEL_SERVICE_NAME, else "unknown_service" */
  const char *resource_attributes; /* "k=v,..."; NULL: OTEL_RESOURCE_ATTRIBUTES     */
  int delta;             /* 1: s is a ttft_snapshot_delta, written with
                            AGGREGATION_TEMPORALITY_DELTA; 0: cumulative      */
  uint64_t start_unix_ns; /* every point's start_time_unix_nano; 0: the
                            registry's creation (cumulative) as wall clock  */
  uint64_t time_unix_ns;  /* every point's time_unix_nano; 0: s's time      */
} ttft__otlp_opts;
TTFT_HIDDEN int ttft__format_otlp(const ttft_snapshot *s, const ttft__otlp_opts *o, ttft__sb *sb);

/* Where a classic bucket counts value v: the largest value of v's
 * internal bucket. The classic bucket with bounds (lo, hi] counts v when
 * lo < ttft__classic_key(v) <= hi — the rule of the cumulative counts
 * (format_prom.c cumulative, format_protobuf.c classic_step), which count
 * whole internal buckets, so the one that straddles a bound is counted
 * above it. Non-decreasing in v. */
static inline uint64_t ttft__classic_key(uint64_t v) { return ttft__bucket_hi(ttft__hist_index(v)); }

/* Exemplars (OpenMetrics and protobuf): the slowest request with a trace
 * id whose value of metric m is counted by the classic bucket (lo, hi]
 * (hi UINT64_MAX: +Inf) of class k — by the counts' own rule
 * (ttft__classic_key), so an exemplar sits on the bucket that counts it,
 * also for a value in the internal bucket straddling a bound (a TTFT of
 * exactly 1.000 s is counted, and shown, under le="2.5"). From the slowest
 * lists — TTFT from the TTFT list; ITL and SEQ_ITL_MAX from the
 * longest-gap list (a request's longest gap is one of its ITL observations
 * and its SEQ_ITL_MAX observation). NULL when none, and for every other
 * metric. */
static inline const ttft__slow *ttft__exemplar(const ttft__sclass *k, ttft_metric m, uint64_t lo,
                                               uint64_t hi) {
  int by = m == TTFT_METRIC_TTFT ? TTFT_SLOWEST_TTFT
           : (m == TTFT_METRIC_ITL || m == TTFT_METRIC_SEQ_ITL_MAX) ? TTFT_SLOWEST_GAP : -1;
  if (!k || by < 0) return NULL;
  for (uint32_t i = 0; i < k->nslow[by]; i++) { /* slowest first: keys descend too */
    const ttft__slow *e = &k->slow[by][i];
    uint64_t key = ttft__classic_key(e->value);
    if (key <= lo) break;
    if (key <= hi && e->has_trace) return e;
  }
  return NULL;
}
/* Length-delimited io.prometheus.client.MetricFamily messages (binary; the
 * builder's NUL terminator is not part of the output). */
TTFT_HIDDEN int ttft__format_protobuf(const ttft_snapshot *s, ttft__sb *sb);

/* snapshot_ops.c: ttft_snapshot_merge of n >= 1 snapshots at once (what
 * ttft_snapshot_merge(a, b) is for n = 2): classes matched by name, in the
 * order their names are first seen (v[0]'s keep their ids); counters,
 * stall causes and every histogram summed, each histogram built once; gauges
 * summed, saturating; slowest lists the k slowest of all sources (k the
 * largest slowest_k); labels and band edges from v[0] (band data only from
 * sources with the same edges); intervals joined; registry_id 0. Equal to
 * the chain merge(merge(v[0], v[1]), v[2])... of two-way merges, except
 * that with differing slowest_k the chain may drop entries a larger k of
 * a later source would keep. NULL with *err (when err is not NULL):
 * TTFT_EINVAL for NULL v, n == 0 or a NULL v[k]; TTFT_ERANGE when the
 * union passes 4096 classes or a count would pass 2^64 - 1; TTFT_ENOMEM.
 * Thread-safe. */
TTFT_HIDDEN ttft_snapshot *ttft__snapshot_merge_n(const ttft_snapshot *const *v, size_t n, int *err);

#endif /* TTFT_FORMAT_H */
