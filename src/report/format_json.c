/* format_json.c — a snapshot as one JSON document, schema "ttft.snapshot/1".
 *
 * docs/json.md documents every field. Rules the schema promises:
 *  - integers (counts, ns, tokens) are JSON integers, never floats;
 *  - doubles are printed with 17 significant digits (they read back to the
 *    same double), and a value that is not finite is null;
 *  - an empty metric has count 0, sum 0 and null for min/max/mean/pNN;
 *  - strings are valid UTF-8: '"' and '\' are escaped, control characters
 *    (and DEL) become \u00XX, valid multi-byte UTF-8 passes through, and a
 *    byte that is not valid UTF-8 becomes \ufffd.
 * Reads the snapshot only; allocates nothing. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/format.h"

#define SCHEMA "ttft.snapshot/1"

/* ------------------------------------------------------------- scalars */

static void json_str(ttft__sb *sb, const char *str) {
  const unsigned char *p = (const unsigned char *)(str ? str : "");
  ttft__sb_puts(sb, "\"");
  while (*p) {
    /* copy the longest run that needs no escaping in one go */
    const unsigned char *run = p;
    while (*p >= 0x20 && *p < 0x7F && *p != '"' && *p != '\\') p++;
    if (p > run) ttft__sb_put(sb, (const char *)run, (size_t)(p - run));
    if (!*p) break;
    if (*p == '"' || *p == '\\') {
      char esc[2] = {'\\', (char)*p};
      ttft__sb_put(sb, esc, 2);
      p++;
    } else if (*p < 0x20 || *p == 0x7F) {
      ttft__sb_printf(sb, "\\u%04x", (unsigned)*p);
      p++;
    } else {
      size_t n = ttft__utf8_seq(p, SIZE_MAX, NULL, NULL);
      if (n) {
        ttft__sb_put(sb, (const char *)p, n);
        p += n;
      } else {
        ttft__sb_puts(sb, "\\ufffd");
        p++;
      }
    }
  }
  ttft__sb_puts(sb, "\"");
}

static void json_u64(ttft__sb *sb, uint64_t v) { ttft__sb_printf(sb, "%llu", (unsigned long long)v); }

static void json_dbl(ttft__sb *sb, double v) {
  if (!isfinite(v)) {
    ttft__sb_puts(sb, "null");
    return;
  }
  if (v == 0.0) v = 0.0; /* no "-0" */
  ttft__sb_printf(sb, "%.17g", v);
}

/* ,"key": — or "key": for the first member (first is cleared). */
static void json_key(ttft__sb *sb, const char *key, int *first) {
  if (first && *first) *first = 0;
  else ttft__sb_puts(sb, ",");
  json_str(sb, key);
  ttft__sb_puts(sb, ":");
}

/* ------------------------------------------------------------- objects */

static const struct {
  const char *key;
  double q;
} quantiles[] = {{"p50", 0.5}, {"p90", 0.9}, {"p95", 0.95}, {"p99", 0.99}, {"p999", 0.999}};

/* {"unit":..,"count":..,"sum":..,"mean":..,"min":..,"max":..,"p50":..,...} */
static void json_hist(ttft__sb *sb, const ttft__shist *h, const char *unit) {
  uint64_t n = h ? h->count : 0;
  int first = 1;
  ttft__sb_puts(sb, "{");
  json_key(sb, "unit", &first);
  json_str(sb, unit);
  json_key(sb, "count", &first);
  json_u64(sb, n);
  json_key(sb, "sum", &first);
  if (n && h->sum_hi) { /* exact, past 2^64 (common/hist.h) */
    char d[40];
    ttft__sb_put(sb, d, ttft__u128_decimal(h->sum_hi, h->sum, d));
  } else {
    json_u64(sb, n ? h->sum : 0);
  }
  json_key(sb, "mean", &first);
  if (n) json_dbl(sb, ttft__shist_sum_double(h) / (double)n);
  else ttft__sb_puts(sb, "null");
  json_key(sb, "min", &first);
  if (n) json_u64(sb, h->min);
  else ttft__sb_puts(sb, "null");
  json_key(sb, "max", &first);
  if (n) json_u64(sb, h->max);
  else ttft__sb_puts(sb, "null");
  for (size_t i = 0; i < sizeof quantiles / sizeof quantiles[0]; i++) {
    json_key(sb, quantiles[i].key, &first);
    if (n) json_u64(sb, ttft__shist_quantile(h, quantiles[i].q));
    else ttft__sb_puts(sb, "null");
  }
  ttft__sb_puts(sb, "}");
}

static void json_metrics(ttft__sb *sb, const ttft__sclass *c) {
  int first = 1;
  ttft__sb_puts(sb, "{");
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
    json_key(sb, ttft_metric_name((ttft_metric)m), &first);
    json_hist(sb, c->h[m], m == TTFT_METRIC_OUTPUT_TOKENS ? "tokens" : "ns");
  }
  ttft__sb_puts(sb, "}");
}

/* {"completed": {"ttft": {..}, "tpot": .., "e2e": .., "output_tokens": ..},
 *  "cancelled": {..}, "error": {..}}: the metrics of the streams that ended
 * with each status, recorded at stream end */
static void json_by_status(ttft__sb *sb, const ttft__sclass *c) {
  static const ttft_metric views[TTFT__STATUS_VIEWS] = {TTFT_METRIC_TTFT, TTFT_METRIC_TPOT,
                                                        TTFT_METRIC_E2E, TTFT_METRIC_OUTPUT_TOKENS};
  int first = 1;
  ttft__sb_puts(sb, "{");
  for (int st = 0; st < TTFT_STATUS_COUNT_; st++) {
    json_key(sb, ttft_status_name((ttft_status)st), &first);
    int f2 = 1;
    ttft__sb_puts(sb, "{");
    /* views[] is in view order, ttft__status_view(views[v]) == v: indexed
     * by v, as aarch64 gcc 12 cannot see that the lookup is never -1
     * (-Warray-bounds) */
    for (int v = 0; v < TTFT__STATUS_VIEWS; v++) {
      TTFT_ASSERT(ttft__status_view(views[v]) == v);
      json_key(sb, ttft_metric_name(views[v]), &f2);
      json_hist(sb, c->sv[st][v],
                views[v] == TTFT_METRIC_OUTPUT_TOKENS ? "tokens" : "ns");
    }
    ttft__sb_puts(sb, "}");
  }
  ttft__sb_puts(sb, "}");
}

static void json_counters(ttft__sb *sb, const uint64_t *ctr) {
  int first = 1;
  ttft__sb_puts(sb, "{");
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++) {
    json_key(sb, ttft_counter_name((ttft_counter)c), &first);
    json_u64(sb, ctr[c]);
  }
  ttft__sb_puts(sb, "}");
}

/* A budget of 0 means "no budget": null. */
static void json_budget(ttft__sb *sb, const char *key, uint64_t ns, int *first) {
  json_key(sb, key, first);
  if (ns) json_u64(sb, ns);
  else ttft__sb_puts(sb, "null");
}

static void json_attainment(ttft__sb *sb, const ttft__sclass *c) {
  double a = ttft__attainment(c, NULL, NULL); /* as ttft_snapshot_attainment */
  if (a < 0.0) ttft__sb_puts(sb, "null");
  else json_dbl(sb, a);
}

/* stalls by cause: {"unknown":{"count":n,"ns":t},...} (1.2) */
static void json_causes(ttft__sb *sb, const ttft__sclass *c) {
  ttft__sb_puts(sb, "{");
  for (int k = 0; k < TTFT_STALL_CAUSE_COUNT; k++) {
    int f = 1;
    if (k) ttft__sb_puts(sb, ",");
    json_str(sb, ttft_stall_cause_name((ttft_stall_cause)k));
    ttft__sb_puts(sb, ":{");
    json_key(sb, "count", &f);
    json_u64(sb, c->stall_n[k]);
    json_key(sb, "ns", &f);
    json_u64(sb, c->stall_ns[k]);
    ttft__sb_puts(sb, "}");
  }
  ttft__sb_puts(sb, "}");
}

/* {"ttft": [..], "gap": [..]}: the slowest requests (ttft_snapshot_slowest),
 * slowest first */
static void json_slowest(ttft__sb *sb, const ttft_snapshot *s, const ttft__sclass *c) {
  static const char *const by_name[TTFT_SLOWEST_COUNT_] = {"ttft", "gap"};
  int first = 1;
  ttft__sb_puts(sb, "{");
  for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++) {
    json_key(sb, by_name[by], &first);
    ttft__sb_puts(sb, "[");
    for (uint32_t i = 0; i < c->nslow[by]; i++) {
      const ttft__slow *e = &c->slow[by][i];
      char trace[33];
      int f = 1;
      ttft__sb_puts(sb, i ? ",{" : "{");
      json_key(sb, "request_id", &f);
      if (e->id[0]) json_str(sb, e->id);
      else ttft__sb_puts(sb, "null");
      json_key(sb, "trace_id", &f);
      ttft__slow_trace_hex(e, trace);
      if (trace[0]) json_str(sb, trace);
      else ttft__sb_puts(sb, "null");
      json_key(sb, "class", &f);
      json_str(sb, e->cls < s->nclasses ? s->cls[e->cls].name : "");
      json_key(sb, "value_ns", &f);
      json_u64(sb, e->value);
      json_key(sb, "ttft_ns", &f);
      json_u64(sb, e->ttft);
      json_key(sb, "max_gap_ns", &f);
      json_u64(sb, e->max_gap);
      json_key(sb, "t_begin_ns", &f);
      json_u64(sb, e->t_begin);
      json_key(sb, "t_end_ns", &f);
      json_u64(sb, e->t_end);
      json_key(sb, "t_end_unix_ns", &f);
      if (e->unix_end) json_u64(sb, e->unix_end);
      else ttft__sb_puts(sb, "null");
      json_key(sb, "tokens", &f);
      json_u64(sb, e->tokens);
      json_key(sb, "status", &f);
      json_str(sb, ttft_status_name((ttft_status)e->status));
      json_key(sb, "stall_cause", &f);
      json_str(sb, ttft_stall_cause_name((ttft_stall_cause)e->cause));
      /* 1.3: how it flowed and what it was judged against */
      json_key(sb, "deadlines", &f);
      json_u64(sb, e->dl);
      json_key(sb, "deadlines_missed", &f);
      json_u64(sb, e->dl_missed);
      json_key(sb, "fluidity", &f);
      json_dbl(sb, ttft__slow_fluidity(e));
      json_budget(sb, "token_deadline_ns", e->dl_ns, &f);
      json_budget(sb, "ttft_slo_ns", e->ttft_slo, &f);
      json_budget(sb, "tpot_slo_ns", e->tpot_slo, &f);
      ttft__sb_puts(sb, "}");
    }
    ttft__sb_puts(sb, "]");
  }
  ttft__sb_puts(sb, "}");
}

/* {"deadlines":..,"deadlines_missed":..,"fluidity":..,"judged":..,
 * "fluid":..,"attainment":..}: the fluidity counters with the live ratio
 * (1 - missed / deadlines) and the fluid attainment (fluid / judged);
 * null where there is nothing to divide (docs/metrics.md "Fluidity") */
static void json_fluidity(ttft__sb *sb, const ttft__sclass *c) {
  uint64_t dl = c->ctr[TTFT_COUNTER_TOKEN_DEADLINES], miss = c->ctr[TTFT_COUNTER_TOKEN_DEADLINES_MISSED];
  uint64_t fl = c->ctr[TTFT_COUNTER_FLUID], fj = c->ctr[TTFT_COUNTER_FLUID_JUDGED];
  int f = 1;
  ttft__sb_puts(sb, "{");
  json_key(sb, "deadlines", &f);
  json_u64(sb, dl);
  json_key(sb, "deadlines_missed", &f);
  json_u64(sb, miss);
  json_key(sb, "fluidity", &f);
  json_dbl(sb, dl && miss <= dl ? 1.0 - (double)miss / (double)dl : NAN);
  json_key(sb, "judged", &f);
  json_u64(sb, fj);
  json_key(sb, "fluid", &f);
  json_u64(sb, fl);
  json_key(sb, "attainment", &f);
  json_dbl(sb, fj && fl <= fj ? (double)fl / (double)fj : NAN);
  ttft__sb_puts(sb, "}");
}

static void json_class(ttft__sb *sb, const ttft_snapshot *s, const ttft__sclass *c, int id) {
  int first = 1, f2 = 1;
  ttft__sb_puts(sb, "{");
  json_key(sb, "id", &first);
  ttft__sb_printf(sb, "%d", id);
  json_key(sb, "name", &first);
  json_str(sb, c->name);
  json_key(sb, "slo", &first);
  ttft__sb_puts(sb, "{");
  json_budget(sb, "ttft_ns", c->slo.ttft_ns, &f2);
  json_budget(sb, "tpot_ns", c->slo.tpot_ns, &f2);
  json_budget(sb, "e2e_ns", c->slo.e2e_ns, &f2);
  json_key(sb, "stall_ns", &f2);
  json_u64(sb, c->slo.stall_threshold_ns);
  /* 1.3 */
  json_key(sb, "ttft_ns_per_prompt_token", &f2);
  json_u64(sb, c->slo.ttft_ns_per_prompt_token);
  json_key(sb, "token_deadline_ns", &f2); /* 0: the request's TPOT budget */
  json_u64(sb, c->slo.token_deadline_ns);
  json_key(sb, "fluid_min", &f2);
  json_dbl(sb, c->slo.fluid_min);
  ttft__sb_puts(sb, "}");
  json_key(sb, "attainment", &first);
  json_attainment(sb, c);
  json_key(sb, "fluidity", &first);
  json_fluidity(sb, c);
  json_key(sb, "counters", &first);
  json_counters(sb, c->ctr);
  json_key(sb, "stall_causes", &first);
  json_causes(sb, c);
  json_key(sb, "metrics", &first);
  json_metrics(sb, c);
  json_key(sb, "by_status", &first);
  json_by_status(sb, c);
  json_key(sb, "slowest", &first);
  json_slowest(sb, s, c);
  ttft__sb_puts(sb, "}");
}

/* ------------------------------------------------------------ sections */

static void json_header(ttft__sb *sb, const ttft_snapshot *s, int *first) {
  uint64_t t0 = s->t_start_ns, t1 = s->t_end_ns;
  int f = 1;
  json_key(sb, "schema", first);
  json_str(sb, SCHEMA);
  json_key(sb, "version", first);
  json_str(sb, ttft_version_string());

  json_key(sb, "interval", first);
  ttft__sb_puts(sb, "{");
  json_key(sb, "start_ns", &f);
  json_u64(sb, t0);
  json_key(sb, "end_ns", &f);
  json_u64(sb, t1);
  json_key(sb, "seconds", &f);
  json_dbl(sb, t1 > t0 ? (double)(t1 - t0) / 1e9 : 0.0);
  ttft__sb_puts(sb, "}");

  json_key(sb, "labels", first);
  f = 1;
  ttft__sb_puts(sb, "{");
  json_key(sb, "start_point", &f);
  json_str(sb, s->start_point);
  json_key(sb, "token_point", &f);
  json_str(sb, s->token_point);
  json_key(sb, "model", &f);
  json_str(sb, s->model);
  json_key(sb, "namespace", &f);
  json_str(sb, s->ns);
  ttft__sb_puts(sb, "}");

  /* const_labels as an array: names are unique by construction, but an
   * array keeps their order and cannot produce duplicate keys */
  json_key(sb, "const_labels", first);
  ttft__sb_puts(sb, "[");
  for (uint32_t i = 0; i < s->n_const_labels && i < TTFT_MAX_CONST_LABELS; i++) {
    f = 1;
    ttft__sb_puts(sb, i ? ",{" : "{");
    json_key(sb, "name", &f);
    json_str(sb, s->const_name[i]);
    json_key(sb, "value", &f);
    json_str(sb, s->const_value[i]);
    ttft__sb_puts(sb, "}");
  }
  ttft__sb_puts(sb, "]");

  json_key(sb, "config", first);
  f = 1;
  ttft__sb_puts(sb, "{");
  json_key(sb, "stall_ns", &f);
  json_u64(sb, s->stall_threshold_ns);
  json_key(sb, "prompt_band_edges", &f);
  ttft__sb_puts(sb, "[");
  for (uint32_t i = 0; i < s->n_band_edges && i < TTFT_MAX_BANDS - 1; i++) {
    if (i) ttft__sb_puts(sb, ",");
    json_u64(sb, s->band_edges[i]);
  }
  ttft__sb_puts(sb, "]");
  json_key(sb, "export_idle_classes", &f);
  ttft__sb_puts(sb, s->export_idle_classes ? "true" : "false");
  ttft__sb_puts(sb, "}");

  json_key(sb, "gauges", first);
  f = 1;
  ttft__sb_puts(sb, "{");
  json_key(sb, "inflight", &f);
  json_u64(sb, s->gauge[TTFT_GAUGE_INFLIGHT]);
  json_key(sb, "live_stalls", &f);
  json_u64(sb, s->gauge[TTFT_GAUGE_LIVE_STALLS]);
  json_key(sb, "memory_bytes", &f);
  json_u64(sb, s->gauge[TTFT_GAUGE_MEMORY]);
  json_key(sb, "coarse_observations", &f);
  json_u64(sb, s->gauge[TTFT_GAUGE_COARSE]);
  ttft__sb_puts(sb, "}");
}

/* {"miss":{..},"partial":{..},"hit":{..}}: one histogram per prefix band */
static void json_prefix_bands(ttft__sb *sb, ttft__shist *const h[TTFT_PREFIX_BAND_COUNT_]) {
  static const char *const key[TTFT_PREFIX_BAND_COUNT_] = {
      [TTFT_PREFIX_MISS] = "{\"miss\":", [TTFT_PREFIX_PARTIAL] = ",\"partial\":",
      [TTFT_PREFIX_HIT] = ",\"hit\":"};
  for (int b = 0; b < TTFT_PREFIX_BAND_COUNT_; b++) {
    ttft__sb_puts(sb, key[b]);
    json_hist(sb, h[b], "ns");
  }
  ttft__sb_puts(sb, "}");
}

static void json_splits(ttft__sb *sb, const ttft_snapshot *s, int *first) {
  int f = 1;
  json_key(sb, "splits", first);
  ttft__sb_puts(sb, "{");
  json_key(sb, "prefix_cache", &f);
  json_prefix_bands(sb, s->split_cache);
  json_key(sb, "prefill_by_prefix_cache", &f);
  json_prefix_bands(sb, s->split_prefill);
  json_key(sb, "prompt_bands", &f);
  ttft__sb_puts(sb, "[");
  uint32_t nb = s->n_band_edges + 1;
  if (nb > TTFT_MAX_BANDS) nb = TTFT_MAX_BANDS;
  for (uint32_t i = 0; i < nb; i++) {
    ttft__sb_puts(sb, i ? ",{\"lo\":" : "{\"lo\":");
    json_u64(sb, i ? s->band_edges[i - 1] : 0);
    ttft__sb_puts(sb, ",\"hi\":");
    if (i + 1 < nb) json_u64(sb, s->band_edges[i]);
    else ttft__sb_puts(sb, "null");
    ttft__sb_puts(sb, ",\"ttft\":");
    json_hist(sb, s->split_band[i], "ns");
    ttft__sb_puts(sb, "}");
  }
  ttft__sb_puts(sb, "]}");
}

static void json_throughput(ttft__sb *sb, const ttft_snapshot *s, int *first) {
  int f = 1;
  double sec = s->t_end_ns > s->t_start_ns ? (double)(s->t_end_ns - s->t_start_ns) / 1e9 : 0.0;
  json_key(sb, "throughput", first);
  ttft__sb_puts(sb, "{");
  json_key(sb, "kind", &f);
  json_str(sb, "capacity");
  json_key(sb, "note", &f);
  json_str(sb, "tokens per second is a capacity view, not TPOT");
  json_key(sb, "tokens_per_second", &f);
  json_dbl(sb, sec > 0.0 ? (double)s->all.ctr[TTFT_COUNTER_TOKENS] / sec : NAN);
  json_key(sb, "goodput_per_second", &f);
  json_dbl(sb, sec > 0.0 ? (double)s->all.ctr[TTFT_COUNTER_SLO_MET] / sec : NAN);
  ttft__sb_puts(sb, "}");
}

/* The members of s's object, after those already written (*first). */
static void json_members(ttft__sb *sb, const ttft_snapshot *s, int *first) {
  json_header(sb, s, first);

  json_key(sb, "counters", first);
  json_counters(sb, s->all.ctr);
  json_key(sb, "stall_causes", first);
  json_causes(sb, &s->all);
  json_key(sb, "attainment", first);
  json_attainment(sb, &s->all);
  json_key(sb, "fluidity", first);
  json_fluidity(sb, &s->all);
  json_key(sb, "metrics", first);
  json_metrics(sb, &s->all);
  json_key(sb, "by_status", first);
  json_by_status(sb, &s->all);
  json_key(sb, "slowest", first);
  json_slowest(sb, s, &s->all);

  /* the exported classes (ttft__class_exported), each with its id */
  json_key(sb, "classes", first);
  ttft__sb_puts(sb, "[");
  int fc = 1;
  for (uint32_t i = 0; i < s->nclasses; i++) {
    if (!ttft__class_exported(s, i)) continue;
    if (!fc) ttft__sb_puts(sb, ",");
    fc = 0;
    json_class(sb, s, &s->cls[i], (int)i);
  }
  ttft__sb_puts(sb, "]");

  json_splits(sb, s, first);
  /* engine-step durations, registry-wide (1.2) */
  json_key(sb, "engine_steps", first);
  ttft__sb_puts(sb, "{\"no_prefill\":");
  json_hist(sb, s->step[0], "ns");
  ttft__sb_puts(sb, ",\"prefill\":");
  json_hist(sb, s->step[1], "ns");
  ttft__sb_puts(sb, "}");
  json_throughput(sb, s, first);
}

int ttft__format_json(const ttft_snapshot *s, ttft__sb *sb) {
  if (!s || !sb) return TTFT_EINVAL;
  int first = 1;
  ttft__sb_puts(sb, "{");
  json_members(sb, s, &first);
  /* a per-process view (1.3): the merged object above, then each part's
   * own, led by its name (docs/json.md "processes") */
  if (s->nparts) {
    json_key(sb, "processes", &first);
    ttft__sb_puts(sb, "[");
    int fp = 1;
    for (uint32_t p = 0; p < s->nparts; p++) {
      if (!s->part[p]) continue;
      char name[TTFT__NAME_MAX];
      memcpy(name, s->part_name[p], sizeof name);
      name[sizeof name - 1] = '\0';
      ttft__sb_puts(sb, fp ? "{" : ",{");
      fp = 0;
      int f = 1;
      json_key(sb, "process", &f);
      json_str(sb, name);
      json_members(sb, s->part[p], &f);
      ttft__sb_puts(sb, "}");
    }
    ttft__sb_puts(sb, "]");
  }
  ttft__sb_puts(sb, "}\n");
  return TTFT_OK;
}
