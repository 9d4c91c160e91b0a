/* format_text.c — a snapshot as a table a person reads in a terminal.
 *
 * Reads the snapshot only. Every duration is printed as a number, a space
 * and a unit chosen per value (ns, µs, ms, s, min) with three significant
 * digits ("19.1 ms", "1.12 s"), the style of ttft-report's diff and SVG
 * and of the demo; an empty metric prints "-". Each table is followed by
 * a short legend (two-space indent) for the rows whose name does not say
 * what they are; the definitions are docs/metrics.md's. Lines stay within
 * 100 columns (a long label value excepted: it is printed whole). Label
 * values come from the integrator and may hold anything: control
 * characters and invalid UTF-8 are written as \xNN (and a backslash as
 * \\) so that a label can neither break the table nor send escape
 * sequences to the terminal. Classes that saw no begin are left out
 * (ttft__class_exported), unless the registry exports idle classes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/format.h"

#define NAME_W 20 /* first column                       */
#define CELL_W 9  /* every numeric column, incl. a space */

/* ------------------------------------------------------------ primitives */

/* Columns a UTF-8 string occupies: one per code point (every character we
 * emit ourselves is narrow; label values are not padded). */
static size_t display_width(const char *s) {
  size_t w = 0;
  for (; *s; s++)
    if (((unsigned char)*s & 0xC0) != 0x80) w++;
  return w;
}

static void put_spaces(ttft__sb *sb, size_t n) {
  static const char spaces[] = "                                ";
  while (n > 0) {
    size_t k = n < sizeof spaces - 1 ? n : sizeof spaces - 1;
    ttft__sb_put(sb, spaces, k);
    n -= k;
  }
}

/* s right-aligned in a field of width w (at least one leading space). */
static void put_right(ttft__sb *sb, const char *s, size_t w) {
  size_t dw = display_width(s);
  put_spaces(sb, dw < w ? w - dw : 1);
  ttft__sb_puts(sb, s);
}

/* s left-aligned in a field of width w; longer names are cut with '~'. */
static void put_left(ttft__sb *sb, const char *s, size_t w) {
  size_t n = strlen(s);
  if (n > w) {
    ttft__sb_put(sb, s, w - 1);
    ttft__sb_puts(sb, "~");
    return;
  }
  ttft__sb_puts(sb, s);
  put_spaces(sb, w - n);
}

/* A label value made safe for a terminal. */
static void put_clean(ttft__sb *sb, const char *str) {
  const unsigned char *p = (const unsigned char *)str;
  while (*p) {
    unsigned cp;
    size_t n = ttft__utf8_seq(p, SIZE_MAX, &cp, NULL);
    if (n == 0 || cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) {
      /* escape the first byte only; the rest is looked at afresh */
      ttft__sb_printf(sb, "\\x%02X", (unsigned)p[0]);
      p++;
      continue;
    }
    if (cp == '\\') ttft__sb_puts(sb, "\\\\");
    else ttft__sb_put(sb, (const char *)p, n);
    p += n;
  }
}

/* ------------------------------------------------------------------ units */

/* x with three significant digits, a space and the unit (x >= 0,
 * x < 999.5): "1.50 s", "19.1 ms", "250 ms". */
static void sig3(char *out, size_t cap, double x, const char *unit) {
  if (x < 9.995) snprintf(out, cap, "%.2f %s", x, unit);
  else if (x < 99.95) snprintf(out, cap, "%.1f %s", x, unit);
  else snprintf(out, cap, "%.0f %s", x, unit);
}

/* A duration in ns, in the unit that fits it (at most 8 columns below
 * 10^4 min, so it fits a cell with a space before it). */
static void fmt_ns(char *out, size_t cap, double v) {
  if (v < 999.5) snprintf(out, cap, "%.0f ns", v);
  else if (v < 999.5e3) sig3(out, cap, v / 1e3, "\xC2\xB5s"); /* µs */
  else if (v < 999.5e6) sig3(out, cap, v / 1e6, "ms");
  else if (v < 59.95e9) sig3(out, cap, v / 1e9, "s");
  else if (v < 999.5 * 60e9) sig3(out, cap, v / 60e9, "min");
  else snprintf(out, cap, "%.0f min", v / 60e9);
}

/* A count of tokens, or a duration in ns, that is an exact integer. */
static void fmt_int(char *out, size_t cap, uint64_t v, int tokens) {
  if (tokens) snprintf(out, cap, "%llu", (unsigned long long)v);
  else fmt_ns(out, cap, (double)v);
}

/* A mean: tokens with one decimal unless it is a whole number. Compared
 * as doubles, never converted back to an integer (a mean near 2^64 does
 * not fit one). */
static void fmt_mean(char *out, size_t cap, double v, int tokens) {
  if (!tokens) fmt_ns(out, cap, v);
  else if (v == floor(v)) snprintf(out, cap, "%.0f", v);
  else snprintf(out, cap, "%.1f", v);
}

static double seconds_of(const ttft_snapshot *s) {
  return s->t_end_ns > s->t_start_ns ? (double)(s->t_end_ns - s->t_start_ns) / 1e9 : 0.0;
}

/* ------------------------------------------------------------------ rows */

static const double row_q[] = {0.5, 0.9, 0.95, 0.99, 0.999};

static void metric_header(ttft__sb *sb, const char *title) {
  static const char *const cols[] = {"p50", "p90", "p95", "p99", "p99.9", "max", "mean"};
  put_left(sb, title, NAME_W);
  put_right(sb, "count", CELL_W);
  for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) put_right(sb, cols[i], CELL_W);
  ttft__sb_puts(sb, "\n");
}

/* name, count, p50 p90 p95 p99 p99.9 max mean — or "-" when empty. */
static void metric_row(ttft__sb *sb, const char *name, const ttft__shist *h, int tokens) {
  char cell[32];
  uint64_t n = h ? h->count : 0;
  put_left(sb, name, NAME_W);
  snprintf(cell, sizeof cell, "%llu", (unsigned long long)n);
  put_right(sb, cell, CELL_W);
  for (size_t i = 0; i < sizeof row_q / sizeof row_q[0] + 2; i++) {
    if (n == 0) {
      put_right(sb, "-", CELL_W);
      continue;
    }
    if (i < sizeof row_q / sizeof row_q[0]) fmt_int(cell, sizeof cell, ttft__shist_quantile(h, row_q[i]), tokens);
    else if (i == sizeof row_q / sizeof row_q[0]) fmt_int(cell, sizeof cell, h->max, tokens);
    else fmt_mean(cell, sizeof cell, ttft__shist_sum_double(h) / (double)n, tokens);
    put_right(sb, cell, CELL_W);
  }
  ttft__sb_puts(sb, "\n");
}

static void quantile_cell(ttft__sb *sb, const ttft__shist *h, double q, size_t w) {
  char cell[32];
  if (!h || h->count == 0) {
    put_right(sb, "-", w);
    return;
  }
  fmt_ns(cell, sizeof cell, (double)ttft__shist_quantile(h, q));
  put_right(sb, cell, w);
}

static void budget_cell(ttft__sb *sb, uint64_t ns, size_t w) {
  char cell[32];
  if (ns == 0) {
    put_right(sb, "-", w);
    return;
  }
  fmt_ns(cell, sizeof cell, (double)ns);
  put_right(sb, cell, w);
}

/* A legend line under a table: two spaces, then the text. */
static void legend(ttft__sb *sb, const char *text) {
  ttft__sb_puts(sb, "  ");
  ttft__sb_puts(sb, text);
  ttft__sb_puts(sb, "\n");
}

/* ------------------------------------------------------------- sections */
static void section_causes(ttft__sb *sb, const ttft_snapshot *s);

/* The interval, said plainly: a snapshot of a registry covers its whole
 * life so far (ttft_snapshot_interval); a delta or a merge (registry id 0)
 * covers the window of the snapshots it came from. */
static void section_header(ttft__sb *sb, const ttft_snapshot *s) {
  char iv[32];
  fmt_ns(iv, sizeof iv, (double)(s->t_end_ns > s->t_start_ns ? s->t_end_ns - s->t_start_ns : 0));
  if (s->registry_id)
    ttft__sb_printf(sb, "libttft %s report over %s, the registry's age: from its creation to this snapshot\n",
                    ttft_version_string(), iv);
  else
    ttft__sb_printf(sb, "libttft %s report over %s: the time covered by the snapshots of this delta or merge\n",
                    ttft_version_string(), iv);
  ttft__sb_puts(sb, "clock starts at: ");
  put_clean(sb, s->start_point);
  ttft__sb_puts(sb, "; token counted at: ");
  put_clean(sb, s->token_point);
  ttft__sb_puts(sb, "\nmodel: ");
  if (s->model[0]) put_clean(sb, s->model);
  else ttft__sb_puts(sb, "-");
  for (uint32_t i = 0; i < s->n_const_labels && i < TTFT_MAX_CONST_LABELS; i++) {
    ttft__sb_puts(sb, i == 0 ? "; labels: " : ", ");
    put_clean(sb, s->const_name[i]);
    ttft__sb_puts(sb, "=");
    put_clean(sb, s->const_value[i]);
  }
  ttft__sb_puts(sb, "\n\n");
}

static void section_metrics(ttft__sb *sb, const ttft_snapshot *s) {
  metric_header(sb, "metric");
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
    int tokens = (m == TTFT_METRIC_OUTPUT_TOKENS);
    char name[40];
    snprintf(name, sizeof name, "%s%s", ttft_metric_name((ttft_metric)m), tokens ? " tok" : "");
    metric_row(sb, name, s->all.h[m], tokens);
  }
  /* "start" is the clock start of the header's second line; N a stream's
   * output tokens (docs/metrics.md, "Latency metrics") */
  legend(sb, "ttft = start -> first token; e2e = start -> stream end; itl = gap between two emissions");
  legend(sb, "tpot = (last token - first token) / (N - 1), for streams of N >= 2 output tokens");
  legend(sb, "queue = start -> scheduled; prefill = scheduled -> first token; decode = first -> last token");
  legend(sb, "seq_itl_p95, seq_itl_max = each stream's own p95 gap, its worst gap (recorded at its end);");
  legend(sb, "  the columns are percentiles across streams: how many users saw slow typing");
  legend(sb, "abandoned_wait = how long streams cancelled before their first token waited (not in ttft)");
  legend(sb, "itl_per_token = itl by token: an emission of n tokens after a gap d counts n times, as d/n");
  ttft__sb_puts(sb, "\n");
}

/* The stall budget every shown class uses, or 0 when they differ. With
 * no class shown, the registry's default. */
static uint64_t common_stall_budget(const ttft_snapshot *s) {
  uint64_t b = 0;
  for (uint32_t i = 0; i < s->nclasses; i++) {
    if (!ttft__class_exported(s, i)) continue;
    if (b && s->cls[i].slo.stall_threshold_ns != b) return 0;
    b = s->cls[i].slo.stall_threshold_ns;
  }
  return b ? b : s->stall_threshold_ns;
}

static void section_counts(ttft__sb *sb, const ttft_snapshot *s) {
  const uint64_t *c = s->all.ctr;
  char a[32], b[32], th[48];
  ttft__sb_printf(sb,
                  "requests: begun %llu, completed %llu, cancelled %llu, errors %llu, "
                  "dropped %llu, in flight now %llu\n",
                  (unsigned long long)c[TTFT_COUNTER_BEGUN],
                  (unsigned long long)c[TTFT_COUNTER_COMPLETED],
                  (unsigned long long)c[TTFT_COUNTER_CANCELLED],
                  (unsigned long long)c[TTFT_COUNTER_ERRORS],
                  (unsigned long long)c[TTFT_COUNTER_DROPPED],
                  (unsigned long long)s->gauge[TTFT_GAUGE_INFLIGHT]);
  uint64_t budget = common_stall_budget(s);
  if (budget) fmt_ns(th, sizeof th, (double)budget);
  else snprintf(th, sizeof th, "its class's budget, below");
  ttft__sb_printf(sb, "stalls (gap > %s): gaps %llu, stalled sequences %llu, stalled now %llu\n",
                  th, (unsigned long long)c[TTFT_COUNTER_STALLS],
                  (unsigned long long)c[TTFT_COUNTER_STALLED_SEQS],
                  (unsigned long long)s->gauge[TTFT_GAUGE_LIVE_STALLS]);
  const ttft__shist *w = s->all.h[TTFT_METRIC_ABANDONED_WAIT];
  if (w && w->count) {
    fmt_ns(a, sizeof a, (double)ttft__shist_quantile(w, 0.5));
    fmt_ns(b, sizeof b, (double)ttft__shist_quantile(w, 0.99));
  } else {
    strcpy(a, "-");
    strcpy(b, "-");
  }
  ttft__sb_printf(sb, "abandoned before first token: %llu, waited p50 %s, p99 %s\n",
                  (unsigned long long)c[TTFT_COUNTER_ABANDONED], a, b);
  ttft__sb_printf(sb, "clock clamps: %llu, preemptions: %llu, ended without TPOT (N < 2): %llu\n",
                  (unsigned long long)c[TTFT_COUNTER_CLOCK_CLAMPED],
                  (unsigned long long)c[TTFT_COUNTER_PREEMPTIONS],
                  (unsigned long long)c[TTFT_COUNTER_NO_TPOT]);
  ttft__sb_printf(sb, "stale hook calls (handle ended or unknown): %llu\n",
                  (unsigned long long)c[TTFT_COUNTER_STALE]);
  if (c[TTFT_COUNTER_CLOCK_REFUSED])
    ttft__sb_printf(sb, "begins refused, wall-clock time passed for a monotonic one "
                        "(TTFT_ECLOCK): %llu\n",
                    (unsigned long long)c[TTFT_COUNTER_CLOCK_REFUSED]);
  if (c[TTFT_COUNTER_BARRIER_FALLBACKS])
    ttft__sb_printf(sb, "reclaim barrier fallbacks (membarrier failed, signals used): %llu\n",
                    (unsigned long long)c[TTFT_COUNTER_BARRIER_FALLBACKS]);
  legend(sb, "dropped = begins refused for want of a slot: those streams are not measured at all");
  legend(sb, "stalls are counted and reported, not part of the SLO; stalled now = in flight, silent for");
  legend(sb, "  longer than the stall budget right now (a stream stuck forever never closes its gap)");
  legend(sb, "clock clamps = timestamps earlier than the stream's previous event, or a wall-clock time");
  legend(sb, "  (more than a day ahead of the monotonic clock), clamped to that event (gap 0)");
  legend(sb, "ended without TPOT = streams of fewer than 2 output tokens: counted here, not as a TPOT of 0");
  ttft__sb_puts(sb, "\n");
}

/* TTFT, TPOT, E2E and output tokens of the streams that ended with each
 * status (recorded at stream end), for the statuses that occurred:
 * "completed" is what client benchmarks count. */
static void section_status(ttft__sb *sb, const ttft_snapshot *s) {
  static const ttft_metric views[TTFT__STATUS_VIEWS] = {TTFT_METRIC_TTFT, TTFT_METRIC_TPOT,
                                                        TTFT_METRIC_E2E, TTFT_METRIC_OUTPUT_TOKENS};
  int any = 0;
  for (int st = 0; st < TTFT_STATUS_COUNT_; st++)
    any |= s->all.sv[st][ttft__status_view(TTFT_METRIC_E2E)]->count != 0;
  if (!any) return;
  metric_header(sb, "by terminal status");
  for (int st = 0; st < TTFT_STATUS_COUNT_; st++) {
    if (!s->all.sv[st][ttft__status_view(TTFT_METRIC_E2E)]->count) continue;
    for (int v = 0; v < TTFT__STATUS_VIEWS; v++) {
      int tokens = views[v] == TTFT_METRIC_OUTPUT_TOKENS;
      char name[40];
      snprintf(name, sizeof name, "%s %s", ttft_status_name((ttft_status)st),
               tokens ? "tok" : ttft_metric_name(views[v]));
      metric_row(sb, name, s->all.sv[st][ttft__status_view(views[v])], tokens);
    }
  }
  legend(sb, "the same metrics again, by how each stream ended (recorded at its end; tok = output");
  legend(sb, "  tokens): client benchmarks usually count only the completed ones");
  ttft__sb_puts(sb, "\n");
}

/* good/judged and the percentage, by the rule every reader uses
 * (ttft__attainment: good clamped to judged, never above 100 %) */
static void attainment_cells(ttft__sb *sb, const ttft__sclass *c) {
  char cell[48];
  uint64_t good, judged;
  double a = ttft__attainment(c, &good, &judged);
  snprintf(cell, sizeof cell, "%llu/%llu", (unsigned long long)good, (unsigned long long)judged);
  put_right(sb, cell, 15);
  if (a >= 0.0) snprintf(cell, sizeof cell, "%.1f%%", 100.0 * a);
  else strcpy(cell, "-");
  put_right(sb, cell, CELL_W);
  ttft__sb_puts(sb, "\n");
}

/* One class's fluidity row: deadlines missed/judged with the token
 * fluidity, fluid/judged streams with their attainment, and the class's
 * fluid_min (none for the all-classes row: fluid_min < 0). */
static void fluidity_cells(ttft__sb *sb, const ttft__sclass *c, double fluid_min) {
  char cell[48];
  uint64_t dl = c->ctr[TTFT_COUNTER_TOKEN_DEADLINES], miss = c->ctr[TTFT_COUNTER_TOKEN_DEADLINES_MISSED];
  uint64_t fl = c->ctr[TTFT_COUNTER_FLUID], fj = c->ctr[TTFT_COUNTER_FLUID_JUDGED];
  snprintf(cell, sizeof cell, "%llu/%llu", (unsigned long long)miss, (unsigned long long)dl);
  put_right(sb, cell, 17);
  if (dl && miss <= dl) snprintf(cell, sizeof cell, "%.1f%%", 100.0 * (1.0 - (double)miss / (double)dl));
  else strcpy(cell, "-");
  put_right(sb, cell, CELL_W);
  snprintf(cell, sizeof cell, "%llu/%llu", (unsigned long long)fl, (unsigned long long)fj);
  put_right(sb, cell, 15);
  if (fj && fl <= fj) snprintf(cell, sizeof cell, "%.1f%%", 100.0 * (double)fl / (double)fj);
  else strcpy(cell, "-");
  put_right(sb, cell, CELL_W);
  if (fluid_min >= 0.0) {
    snprintf(cell, sizeof cell, "%.2f", fluid_min);
    put_right(sb, cell, CELL_W);
  }
  ttft__sb_puts(sb, "\n");
}

/* Fluidity (docs/metrics.md "Fluidity"): shown when some class judged a
 * token deadline or a stream for it. */
static void section_fluidity(ttft__sb *sb, const ttft_snapshot *s) {
  if (!s->all.ctr[TTFT_COUNTER_TOKEN_DEADLINES] && !s->all.ctr[TTFT_COUNTER_FLUID_JUDGED]) return;
  put_left(sb, "fluidity", NAME_W);
  put_right(sb, "D", CELL_W);
  put_right(sb, "missed/deadlines", 17);
  put_right(sb, "fluidity", CELL_W);
  put_right(sb, "fluid/judged", 15);
  put_right(sb, "%", CELL_W);
  put_right(sb, "fluid_min", CELL_W);
  ttft__sb_puts(sb, "\n");
  uint32_t shown = 0;
  for (uint32_t i = 0; i < s->nclasses; i++) {
    const ttft__sclass *c = &s->cls[i];
    if (!ttft__class_exported(s, i) ||
        (!c->ctr[TTFT_COUNTER_TOKEN_DEADLINES] && !c->ctr[TTFT_COUNTER_FLUID_JUDGED]))
      continue;
    put_left(sb, c->name, NAME_W);
    budget_cell(sb, c->slo.token_deadline_ns ? c->slo.token_deadline_ns : c->slo.tpot_ns, CELL_W);
    fluidity_cells(sb, c, c->slo.fluid_min);
    shown++;
  }
  if (shown != 1) {
    put_left(sb, "all classes", NAME_W + CELL_W);
    fluidity_cells(sb, &s->all, -1.0);
  }
  legend(sb, "each token after the first is due D after the one before, plus the slack its stream built");
  legend(sb, "  up by running ahead (D = the class's token deadline, else the request's TPOT budget; - =");
  legend(sb, "  per request); fluidity = 1 - missed/deadlines; fluid = completed with fluidity >= fluid_min;");
  legend(sb, "  % = fluid/judged (the fluid attainment)");
  legend(sb, "  judged = completed + errors + streams cancelled after a missed deadline");
  ttft__sb_puts(sb, "\n");
}

static uint32_t classes_shown(const ttft_snapshot *s) {
  uint32_t shown = 0;
  for (uint32_t i = 0; i < s->nclasses; i++) shown += ttft__class_exported(s, i) != 0;
  return shown;
}

/* The SLO verdict and its budgets. A stream is good when it ended
 * COMPLETED within every budget its class sets (hooks.c, stream end);
 * stalls play no part in it, so their budget is in its own table. */
static void section_slo(ttft__sb *sb, const ttft_snapshot *s) {
  static const char *const cols[] = {"ttft <=", "tpot <=", "e2e <="};
  put_left(sb, "SLO attainment", NAME_W);
  for (size_t i = 0; i < 3; i++) put_right(sb, cols[i], CELL_W);
  put_right(sb, "good/judged", 15);
  put_right(sb, "%", CELL_W);
  ttft__sb_puts(sb, "\n");
  uint32_t shown = classes_shown(s);
  for (uint32_t i = 0; i < s->nclasses; i++) {
    if (!ttft__class_exported(s, i)) continue;
    const ttft__sclass *c = &s->cls[i];
    put_left(sb, c->name, NAME_W);
    budget_cell(sb, c->slo.ttft_ns, CELL_W);
    budget_cell(sb, c->slo.tpot_ns, CELL_W);
    budget_cell(sb, c->slo.e2e_ns, CELL_W);
    attainment_cells(sb, c);
  }
  if (shown != 1) { /* "all" alone when no class is shown: the registry saw nothing */
    put_left(sb, "all classes", NAME_W + 3 * CELL_W);
    attainment_cells(sb, &s->all);
  }
  legend(sb, "good = ended completed and within every budget its class sets (- = none; a stream without");
  legend(sb, "  a TPOT meets the TPOT budget); judged = completed + errors + streams cancelled after they");
  legend(sb, "  had missed a budget (a client that left in time does not judge the server); % = good / judged.");
  legend(sb, "  Stalls play no part in it: they are counted and reported apart");
  ttft__sb_puts(sb, "\n");
  if (shown <= 1) return;

  static const char *const pc[] = {"ttft n", "ttft p50", "ttft p99", "tpot n", "tpot p50", "tpot p99"};
  put_left(sb, "per class", NAME_W);
  for (size_t i = 0; i < sizeof pc / sizeof pc[0]; i++) put_right(sb, pc[i], CELL_W + 1);
  ttft__sb_puts(sb, "\n");
  for (uint32_t i = 0; i < s->nclasses; i++) {
    if (!ttft__class_exported(s, i)) continue;
    const ttft__sclass *c = &s->cls[i];
    const ttft__shist *t = c->h[TTFT_METRIC_TTFT], *p = c->h[TTFT_METRIC_TPOT];
    char cell[32];
    put_left(sb, c->name, NAME_W);
    snprintf(cell, sizeof cell, "%llu", (unsigned long long)(t ? t->count : 0));
    put_right(sb, cell, CELL_W + 1);
    quantile_cell(sb, t, 0.5, CELL_W + 1);
    quantile_cell(sb, t, 0.99, CELL_W + 1);
    snprintf(cell, sizeof cell, "%llu", (unsigned long long)(p ? p->count : 0));
    put_right(sb, cell, CELL_W + 1);
    quantile_cell(sb, p, 0.5, CELL_W + 1);
    quantile_cell(sb, p, 0.99, CELL_W + 1);
    ttft__sb_puts(sb, "\n");
  }
  ttft__sb_puts(sb, "\n");

  /* each class's stall budget and what it counted */
  put_left(sb, "stalls by class", NAME_W);
  put_right(sb, "gap >", CELL_W + 1);
  put_right(sb, "gaps", CELL_W + 1);
  put_right(sb, "stalled seqs", 14);
  ttft__sb_puts(sb, "\n");
  for (uint32_t i = 0; i < s->nclasses; i++) {
    if (!ttft__class_exported(s, i)) continue;
    const ttft__sclass *c = &s->cls[i];
    char cell[32];
    put_left(sb, c->name, NAME_W);
    budget_cell(sb, c->slo.stall_threshold_ns, CELL_W + 1);
    snprintf(cell, sizeof cell, "%llu", (unsigned long long)c->ctr[TTFT_COUNTER_STALLS]);
    put_right(sb, cell, CELL_W + 1);
    snprintf(cell, sizeof cell, "%llu", (unsigned long long)c->ctr[TTFT_COUNTER_STALLED_SEQS]);
    put_right(sb, cell, 14);
    ttft__sb_puts(sb, "\n");
  }
  legend(sb, "a gap longer than its class's stall budget is a stall: counted and reported, not part");
  legend(sb, "  of the SLO verdict above");
  ttft__sb_puts(sb, "\n");
  section_causes(sb, s);
}

/* Each class's stalls by cause: the count, and under it the stalled time
 * (the stalls' summed gaps). Only when some class stalled. */
static void section_causes(ttft__sb *sb, const ttft_snapshot *s) {
  static const char *const head[TTFT_STALL_CAUSE_COUNT] = {"unknown", "prefill", "preempted",
                                                           "not sched", "eng. idle",
                                                           "slow step"};
  uint64_t any = 0;
  for (int k = 0; k < TTFT_STALL_CAUSE_COUNT; k++) any |= s->all.stall_n[k];
  if (!any) return;
  put_left(sb, "stalls by cause", NAME_W);
  for (int k = 0; k < TTFT_STALL_CAUSE_COUNT; k++) put_right(sb, head[k], CELL_W + 2);
  ttft__sb_puts(sb, "\n");
  for (uint32_t i = 0; i < s->nclasses; i++) {
    if (!ttft__class_exported(s, i)) continue;
    const ttft__sclass *c = &s->cls[i];
    char cell[32];
    put_left(sb, c->name, NAME_W);
    for (int k = 0; k < TTFT_STALL_CAUSE_COUNT; k++) {
      snprintf(cell, sizeof cell, "%llu", (unsigned long long)c->stall_n[k]);
      put_right(sb, cell, CELL_W + 2);
    }
    ttft__sb_puts(sb, "\n");
    put_left(sb, "  stalled for", NAME_W);
    for (int k = 0; k < TTFT_STALL_CAUSE_COUNT; k++) {
      if (c->stall_n[k]) fmt_ns(cell, sizeof cell, (double)c->stall_ns[k]);
      else snprintf(cell, sizeof cell, "-");
      put_right(sb, cell, CELL_W + 2);
    }
    ttft__sb_puts(sb, "\n");
  }
  legend(sb, "why each stall happened (docs/metrics.md): prefill = a long step carrying another");
  legend(sb, "  request's prompt; preempted = evicted in the gap; not sched = steps ran without it;");
  legend(sb, "  eng. idle = no engine step ran for most of the gap (host stall, GC, frozen process);");
  legend(sb, "  unknown = the server reports no engine steps (ttft_engine_step)");
  ttft__sb_puts(sb, "\n");
}

/* Engine-step durations by prefill (registry-wide), when steps were recorded. */
static void section_steps(ttft__sb *sb, const ttft_snapshot *s) {
  if (!s->step[0]->count && !s->step[1]->count) return;
  metric_header(sb, "engine steps");
  metric_row(sb, "without prefill", s->step[0], 0);
  metric_row(sb, "with prefill", s->step[1], 0);
  legend(sb, "engine iterations (ttft_engine_step), all classes: what prefill costs the decodes");
  legend(sb, "  batched with it");
  ttft__sb_puts(sb, "\n");
}

static void section_splits(ttft__sb *sb, const ttft_snapshot *s) {
  metric_header(sb, "ttft split by");
  metric_row(sb, "prefix miss", s->split_cache[TTFT_PREFIX_MISS], 0);
  metric_row(sb, "prefix partial", s->split_cache[TTFT_PREFIX_PARTIAL], 0);
  metric_row(sb, "prefix hit", s->split_cache[TTFT_PREFIX_HIT], 0);
  /* PREFILL by the same bands, when streams marked SCHEDULED had one */
  static const struct { int k; const char *name; } pf[] = {
      {TTFT_PREFIX_MISS, "prefill miss"}, {TTFT_PREFIX_PARTIAL, "prefill partial"},
      {TTFT_PREFIX_HIT, "prefill hit"}};
  for (int i = 0; i < 3; i++)
    if (s->split_prefill[pf[i].k] && s->split_prefill[pf[i].k]->count)
      metric_row(sb, pf[i].name, s->split_prefill[pf[i].k], 0);
  uint32_t nb = s->n_band_edges + 1;
  if (nb > TTFT_MAX_BANDS) nb = TTFT_MAX_BANDS;
  for (uint32_t i = 0; i < nb; i++) {
    const ttft__shist *h = s->split_band[i];
    if (!h || h->count == 0) continue; /* bands with data only */
    char name[40];
    if (nb == 1) snprintf(name, sizeof name, "prompt any");
    else if (i == 0) snprintf(name, sizeof name, "prompt <%u", (unsigned)s->band_edges[0]);
    else if (i + 1 == nb) snprintf(name, sizeof name, "prompt >=%u", (unsigned)s->band_edges[i - 1]);
    else
      snprintf(name, sizeof name, "prompt %u-%u", (unsigned)s->band_edges[i - 1],
               (unsigned)(s->band_edges[i] - 1));
    metric_row(sb, name, h, 0);
  }
  legend(sb, "ttft again, by prefix-cache hit or miss and by prompt length in tokens (only the");
  legend(sb, "  streams that said; bands without data are left out)");
  ttft__sb_puts(sb, "\n");
}

/* The slowest requests over every class (ttft_snapshot_slowest with
 * TTFT_CLASS_ALL), one table per ranking; nothing when no list holds one.
 * The request id is the integrator's: written as label values are. */
static void section_slowest(ttft__sb *sb, const ttft_snapshot *s) {
  static const char *const title[TTFT_SLOWEST_COUNT_] = {"slowest by ttft", "slowest by gap"};
  if (!s->all.nslow[TTFT_SLOWEST_TTFT] && !s->all.nslow[TTFT_SLOWEST_GAP]) return;
  for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++) {
    const ttft__slow *v = s->all.slow[by];
    uint32_t n = s->all.nslow[by];
    if (!n) continue;
    put_left(sb, title[by], NAME_W);
    put_right(sb, "ttft", CELL_W);
    put_right(sb, "max gap", CELL_W);
    put_right(sb, "fluidity", 13);
    ttft__sb_puts(sb, "  ");
    put_left(sb, "class", 12);
    put_left(sb, "status", 10);
    put_left(sb, "gap cause", 14);
    ttft__sb_puts(sb, "request id\n");
    for (uint32_t i = 0; i < n; i++) {
      const ttft__slow *e = &v[i];
      char cell[32], trace[33];
      snprintf(cell, sizeof cell, "%u", (unsigned)(i + 1));
      put_right(sb, cell, 4);
      put_spaces(sb, NAME_W - 4);
      fmt_int(cell, sizeof cell, e->ttft, 0);
      put_right(sb, cell, CELL_W);
      if (e->max_gap) fmt_int(cell, sizeof cell, e->max_gap, 0);
      else snprintf(cell, sizeof cell, "-");
      put_right(sb, cell, CELL_W);
      /* its token deadlines missed/judged and fluidity; "-" with none */
      if (e->dl) {
        char fl[48];
        snprintf(fl, sizeof fl, "%llu/%llu %.1f%%", (unsigned long long)e->dl_missed,
                 (unsigned long long)e->dl, 100.0 * ttft__slow_fluidity(e));
        put_right(sb, fl, 13);
      } else {
        put_right(sb, "-", 13);
      }
      ttft__sb_puts(sb, "  ");
      put_left(sb, e->cls < s->nclasses ? s->cls[e->cls].name : "?", 12);
      put_left(sb, ttft_status_name((ttft_status)e->status), 10);
      /* a cause only for a gap that was a stall: a shorter one has none
       * to name (the record holds "unknown" for it) */
      uint64_t budget = e->cls < s->nclasses && s->cls[e->cls].slo.stall_threshold_ns
                            ? s->cls[e->cls].slo.stall_threshold_ns
                            : s->stall_threshold_ns;
      put_left(sb, e->max_gap > budget ? ttft_stall_cause_name((ttft_stall_cause)e->cause) : "-", 14);
      if (e->id[0]) put_clean(sb, e->id);
      else ttft__sb_puts(sb, "-");
      ttft__sb_puts(sb, "\n");
      ttft__slow_trace_hex(e, trace);
      if (trace[0]) {
        put_spaces(sb, NAME_W + 2);
        ttft__sb_printf(sb, "trace %s\n", trace);
      }
      /* what it was judged against (1.3): its own budgets, else its
       * class's (the first-token deadline with its prompt's term) */
      if (e->ttft_slo || e->tpot_slo || e->dl_ns) {
        char b[3][32];
        fmt_int(b[0], sizeof b[0], e->ttft_slo, 0);
        fmt_int(b[1], sizeof b[1], e->tpot_slo, 0);
        fmt_int(b[2], sizeof b[2], e->dl_ns, 0);
        put_spaces(sb, NAME_W + 2);
        ttft__sb_printf(sb, "judged against ttft %s, tpot %s, token deadline %s\n",
                        e->ttft_slo ? b[0] : "-", e->tpot_slo ? b[1] : "-", e->dl_ns ? b[2] : "-");
      }
    }
  }
  legend(sb, "the requests with the longest TTFT and the longest inter-token gap, over every class,");
  legend(sb, "  recorded when they ended (in-flight streams are not listed); gap cause: why the");
  legend(sb, "  longest gap happened when it was a stall (docs/metrics.md \"Which requests\");");
  legend(sb, "  fluidity: its token deadlines missed/judged, and 1 - missed/judged; judged against:");
  legend(sb, "  the first-token deadline, TPOT budget and token deadline D it was judged by");
  ttft__sb_puts(sb, "\n");
}

static void section_throughput(ttft__sb *sb, const ttft_snapshot *s) {
  double sec = seconds_of(s);
  char iv[32];
  fmt_ns(iv, sizeof iv, sec * 1e9);
  ttft__sb_printf(sb, "throughput (capacity view, not TPOT) over %s:\n", iv);
  if (sec > 0.0)
    ttft__sb_printf(sb, "  %.1f tokens/s, goodput %.2f good streams/s\n",
                    (double)s->all.ctr[TTFT_COUNTER_TOKENS] / sec,
                    (double)s->all.ctr[TTFT_COUNTER_SLO_MET] / sec);
  else
    ttft__sb_puts(sb, "  - tokens/s, goodput - good streams/s (empty interval)\n");
}

/* A per-process view (1.3): after the merged report, one line per
 * process (its name made safe as a label value and cut to the column):
 * requests begun, TTFT and TPOT p50/p99, in flight now, stalls. */
static void section_processes(ttft__sb *sb, const ttft_snapshot *s) {
  static const char *const pc[] = {"requests", "ttft p50", "ttft p99", "tpot p50",
                                   "tpot p99", "in flight", "stalls"};
  ttft__sb_puts(sb, "\n");
  put_left(sb, "per process", NAME_W);
  for (size_t i = 0; i < sizeof pc / sizeof pc[0]; i++) put_right(sb, pc[i], CELL_W + 1);
  ttft__sb_puts(sb, "\n");
  for (uint32_t p = 0; p < s->nparts; p++) {
    const ttft_snapshot *ps = s->part[p];
    if (!ps) continue;
    char raw[TTFT__NAME_MAX], name[4 * TTFT__NAME_MAX + 1], cell[32];
    memcpy(raw, s->part_name[p], sizeof raw);
    raw[sizeof raw - 1] = '\0';
    ttft__sb nb;
    ttft__sb_init(&nb, name, sizeof name);
    put_clean(&nb, raw);
    put_left(sb, name, NAME_W);
    const ttft__sclass *c = &ps->all;
    snprintf(cell, sizeof cell, "%llu", (unsigned long long)c->ctr[TTFT_COUNTER_BEGUN]);
    put_right(sb, cell, CELL_W + 1);
    quantile_cell(sb, c->h[TTFT_METRIC_TTFT], 0.5, CELL_W + 1);
    quantile_cell(sb, c->h[TTFT_METRIC_TTFT], 0.99, CELL_W + 1);
    quantile_cell(sb, c->h[TTFT_METRIC_TPOT], 0.5, CELL_W + 1);
    quantile_cell(sb, c->h[TTFT_METRIC_TPOT], 0.99, CELL_W + 1);
    snprintf(cell, sizeof cell, "%llu", (unsigned long long)ps->gauge[TTFT_GAUGE_INFLIGHT]);
    put_right(sb, cell, CELL_W + 1);
    snprintf(cell, sizeof cell, "%llu", (unsigned long long)c->ctr[TTFT_COUNTER_STALLS]);
    put_right(sb, cell, CELL_W + 1);
    ttft__sb_puts(sb, "\n");
  }
  legend(sb, "each process alone (TTFT_GATHER_BY_PROCESS); the report above is all of them merged:");
  legend(sb, "  read percentiles there, never average these");
}

int ttft__format_text(const ttft_snapshot *s, ttft__sb *sb) {
  if (!s || !sb) return TTFT_EINVAL;
  section_header(sb, s);
  section_metrics(sb, s);
  section_status(sb, s);
  section_counts(sb, s);
  section_slo(sb, s);
  section_fluidity(sb, s);
  section_splits(sb, s);
  section_steps(sb, s);
  section_slowest(sb, s);
  section_throughput(sb, s);
  if (s->nparts) section_processes(sb, s);
  return TTFT_OK;
}
