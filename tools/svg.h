/* svg.h — the picture ttft-report draws: latency CDFs of TTFT, TPOT and
 * ITL and E2E on a log time axis, one panel each. */
#ifndef TTFT_REPORT_SVG_H
#define TTFT_REPORT_SVG_H

#include <stdio.h>

#include "ttft.h"

/* Write a self-contained SVG document for snapshot s to f: four panels
 * (TTFT, TPOT, ITL, E2E), each a CDF on a log time axis.
 * old == NULL: one curve per class that has data (one "all" curve when
 * only one class has any), p50/p99 markers on each, every class's SLO
 * budget (TTFT, TPOT, E2E) or stall budget (ITL) as a labelled vertical
 * line. old != NULL (--diff): two curves per panel, old (grey, dashed) and
 * new, over every class, with the budgets of both; the header describes
 * both snapshots. s_name / old_name label them (a long name is elided in
 * the middle so that each header line fits the picture's width). A panel
 * whose curve has too few observations (sequences, for ITL) to judge its
 * p50 or p99 says so under its title, with the n it would need, as the
 * text diff does. tail_axis: 1 = vertical
 * axis in -log10(1 - F) (50/90/99/99.9 % evenly spaced), 0 = linear.
 * Returns 0, or -1 when writing failed. */
int report_svg(FILE *f, const ttft_snapshot *s, const char *s_name, const ttft_snapshot *old,
               const char *old_name, int tail_axis);

#endif
