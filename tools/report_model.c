/* report_model.c — the report tools' shared rules (report_model.h). */
#include "report_model.h"

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
