/* report_model.c — the report tools' shared rules (report_model.h). */
#include "report_model.h"

#include <stdlib.h>
#include <string.h>

#include "common/hist.h"

uint64_t report_min_n_for(double q) {
  uint64_t n = (uint64_t)(REPORT_MIN_TAIL / (1 - q));
  n = n > 3 ? n - 3 : 1;
  while (n - ttft__nearest_rank(q, n) < REPORT_MIN_TAIL ||
         ttft__nearest_rank(q, n) < REPORT_MIN_TAIL)
    n++;
  return n;
}

uint64_t report_gap_units(const ttft_snapshot *s, int c) {
  uint64_t u = ttft_snapshot_class_count(s, c, TTFT_METRIC_SEQ_ITL_MAX);
  if (!u) u = ttft_snapshot_class_counter(s, c, TTFT_COUNTER_BEGUN);
  return u ? u : 1;
}

/* ------------------------------------------------------------ capacity */
int report_run_of(const ttft_snapshot *s, int c, double target, const char *name, report_run *out) {
  memset(out, 0, sizeof *out);
  out->name = name;
  uint64_t t0 = 0, t1 = 0;
  if (ttft_snapshot_interval(s, &t0, &t1) != TTFT_OK || t1 <= t0) return -1;
  out->seconds = (double)(t1 - t0) / 1e9;
  out->tokens_per_s = (double)ttft_snapshot_counter(s, TTFT_COUNTER_TOKENS) / out->seconds;
  ttft_slo slo;
  ttft_slo_init(&slo);
  ttft_snapshot_class_slo(s, c, &slo);
  out->tpot_budget_ns = slo.tpot_ns;
  out->fluid_min = slo.fluid_min;
  out->tpot_n = ttft_snapshot_class_count(s, c, TTFT_METRIC_TPOT);
  out->tpot_p90_ns = out->tpot_n ? ttft_snapshot_class_quantile(s, c, TTFT_METRIC_TPOT, 0.9) : 0;
  out->fluid = ttft_snapshot_class_counter(s, c, TTFT_COUNTER_FLUID);
  out->judged = ttft_snapshot_class_counter(s, c, TTFT_COUNTER_FLUID_JUDGED);
  if (out->fluid > out->judged) out->fluid = out->judged; /* a decoded snapshot may say so */
  out->tpot_ok = !out->tpot_budget_ns || !out->tpot_n ? -1 : out->tpot_p90_ns <= out->tpot_budget_ns;
  out->fluid_ok = out->judged ? report_run_fluid_fraction(out) >= target : -1;
  return 0;
}

double report_run_fluid_fraction(const report_run *r) {
  return r->judged ? (double)r->fluid / (double)r->judged : -1.0;
}

static int by_rate(const void *pa, const void *pb) {
  const report_run *a = pa, *b = pb;
  if (a->tokens_per_s != b->tokens_per_s) return a->tokens_per_s < b->tokens_per_s ? -1 : 1;
  return strcmp(a->name, b->name);
}

static int capacity_of(const report_run *runs, int n, int fluid) {
  int cap = -1;
  for (int i = 0; i < n; i++) {
    int ok = fluid ? runs[i].fluid_ok : runs[i].tpot_ok;
    if (ok < 0) continue;
    if (!ok) break;
    cap = i;
  }
  return cap;
}

void report_capacity(report_run *runs, int n, int *fluid_cap, int *tpot_cap) {
  if (n > 1) qsort(runs, (size_t)n, sizeof *runs, by_rate);
  *fluid_cap = capacity_of(runs, n, 1);
  *tpot_cap = capacity_of(runs, n, 0);
}
