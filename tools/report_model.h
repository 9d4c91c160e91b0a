/* report_model.h — what the report tools agree on about a snapshot, so that
 * every view (ttft-report's text and --diff, its SVG picture, and the
 * ttft-top / ttft-exporter views to come) says "not enough data" and
 * counts gap units by the same rules. A tools/ library (ttft_report_model):
 * it depends on the library's snapshot queries only, never on a tool, so
 * no tool includes another. */
#ifndef TTFT_TOOLS_REPORT_MODEL_H
#define TTFT_TOOLS_REPORT_MODEL_H

#include <stdint.h>

#include "ttft.h"

/* A quantile is judged only with at least this many observations on each
 * side of it (fewer: "not enough data"). */
#define REPORT_MIN_TAIL 10

/* The smallest n with at least REPORT_MIN_TAIL observations on each side
 * of quantile q (0 < q < 1). */
uint64_t report_min_n_for(double q);

/* The independent units behind class c's gaps (c = TTFT_CLASS_ALL for
 * every class): the sequences that had at least one (ended ones carry a
 * SEQ_ITL_MAX observation; while none has ended, every begun sequence
 * counts). Never 0. Gaps cluster by sequence, so the sequences, not the
 * gaps, are what a gap quantile's confidence rests on. */
uint64_t report_gap_units(const ttft_snapshot *s, int c);

#endif
