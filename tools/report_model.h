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

/* ---- capacity from a sweep of runs (ttft-report --capacity) ----------
 * Each run is one snapshot taken at one offered load. Its token rate is
 * the tokens it emitted (every class: the replica's output) over the time
 * the snapshot covers (ttft_snapshot_interval). For the chosen class: its
 * TPOT p90 against its TPOT budget, and its fluid fraction (FLUID /
 * FLUID_JUDGED: the requests judged for fluidity that kept fluidity >=
 * fluid_min) against the target (Etalon's 99 %). */
typedef struct report_run {
  const char *name;         /* the file it came from                      */
  double seconds;           /* the interval it covers                     */
  double tokens_per_s;      /* every class's tokens over seconds          */
  uint64_t tpot_n;          /* the class's TPOT observations              */
  uint64_t tpot_p90_ns;     /* 0 when tpot_n is 0                         */
  uint64_t tpot_budget_ns;  /* the class's tpot_ns; 0 = none              */
  uint64_t fluid, judged;   /* the class's FLUID, FLUID_JUDGED            */
  double fluid_min;         /* the class's                                */
  int tpot_ok;              /* 1 within budget, 0 over, -1 unknown (no
                               budget, or no TPOT observation)            */
  int fluid_ok;             /* 1 fluid fraction >= target, 0 below, -1
                               nothing judged                             */
} report_run;

/* The figures of run s for class c (an id of s). Returns 0, or -1 when s
 * covers no time (its token rate is unknown). */
int report_run_of(const ttft_snapshot *s, int c, double target, const char *name, report_run *out);

/* The fluid fraction of a run, or -1.0 when nothing was judged. */
double report_run_fluid_fraction(const report_run *r);

/* Sort runs by token rate (ascending), then find the capacity for each
 * criterion: the highest token rate at which it holds at this rate and at
 * every slower run of the sweep (a run where it is unknown is passed
 * over). *fluid_cap / *tpot_cap receive the index of that run, or -1 when
 * it fails at the slowest run already (or is never known). */
void report_capacity(report_run *runs, int n, int *fluid_cap, int *tpot_cap);

#endif
