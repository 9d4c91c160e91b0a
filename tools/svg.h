/* svg.h — the picture ttft-report draws: latency CDFs of TTFT, TPOT and
 * ITL on a log time axis, one panel each. */
#ifndef TTFT_REPORT_SVG_H
#define TTFT_REPORT_SVG_H

#include <stdio.h>

#include "ttft.h"

/* Write a self-contained SVG document for snapshot s to f.
 * old == NULL: one curve per class that has data (one "all" curve when
 * only one class has any), p50/p99 markers on each, every class's SLO
 * budget (TTFT, TPOT) or stall budget (ITL) as a labelled vertical line.
 * old != NULL (--diff): two curves per panel, old (grey, dashed) and new,
 * over every class, with new's budgets. s_name / old_name label them.
 * Returns 0, or -1 when writing failed. */
int report_svg(FILE *f, const ttft_snapshot *s, const char *s_name, const ttft_snapshot *old,
               const char *old_name);

#endif
