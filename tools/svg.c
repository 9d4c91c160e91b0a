/* svg.c — latency CDFs as a self-contained SVG: no scripts, no external
 * fonts or images, readable without a legend (every curve, marker and
 * budget line carries its own label). The curves come straight from the
 * snapshot's high-resolution buckets (internal.h: the tool links the static
 * library).
 *
 * The vertical axis is a tail scale by default: height grows with
 * -log10(1 - F), so 50, 90, 99 and 99.9 % are evenly spaced and the slow
 * end of a distribution — the stalls, the p99 — gets as much room as the
 * median (a linear axis gives p90..p100 a tenth of the height). Labels
 * never overlap: each is placed beside its point where that is free, else
 * in the right margin with a leader line, else (no room left) dropped. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/snapshot.h"
#include "report_model.h"
#include "svg.h"

#define SVG_W 980.0
#define PLOT_L 84.0
#define PLOT_R (SVG_W - 170.0)
#define MARGIN_X (PLOT_R + 12.0) /* the label column right of the plot */
#define HEADER_H(diff) ((diff) ? 138.0 : 102.0) /* title, one or two snapshots' lines, the axis note */
#define PANEL_TITLE 58.0 /* title and subtitle, then the line for a "not enough data" note */
#define PLOT_H 240.0
#define PANEL_FOOT 46.0
#define LINE_H 14.0 /* a 12 px label's box height */
#define NPANELS 4
#define PANEL_H (PANEL_TITLE + PLOT_H + PANEL_FOOT)
#define FONT "DejaVu Sans, Helvetica, Arial, sans-serif"

static const char *const palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"};
#define NPALETTE (sizeof palette / sizeof palette[0])
#define OLD_COLOR "#8A8A8A"
#define SLO_MIXED "#444444"

typedef struct series {
  char name[96];
  const ttft__shist *h;
  const char *color;
  int dashed;
  const ttft_snapshot *snap; /* whose curve: for the gap units of ITL */
  int cls;                   /* its class, or TTFT_CLASS_ALL */
} series;

typedef struct budget {
  uint64_t ns;
  char names[128]; /* classes sharing this budget, ", "-separated */
  char label[192];
  const char *color;
} budget;

typedef struct box {
  double x0, y0, x1, y1;
} box;

#define MAX_SERIES 16
#define MAX_BUDGETS 16
#define MAX_BOXES 256

typedef struct panel {
  ttft_metric m;
  const char *title, *what;
  series ser[MAX_SERIES];
  int nser;
  budget bud[MAX_BUDGETS];
  int nbud;
  double top;          /* plot area top */
  double lx0, lx1;     /* log10 of the axis ends, ns */
  int tail;            /* vertical axis: 1 tail scale, 0 linear */
  int nines;           /* tail scale: the top is 1 - 10^-nines */
  box boxes[MAX_BOXES];/* placed labels and markers */
  int nboxes;
} panel;

/* ------------------------------------------------------------ helpers */
static void xml_text(FILE *f, const char *s) {
  for (; *s; s++) {
    switch (*s) {
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '&': fputs("&amp;", f); break;
    case '"': fputs("&quot;", f); break;
    default:
      if ((unsigned char)*s >= 0x20 || *s == '\t') fputc(*s, f);
    }
  }
}

/* "850 ns", "12.3 µs", "120 ms", "1.23 s", "2.5 min" */
static void fmt_ns(char *out, size_t cap, double ns) {
  const char *u = "ns";
  double v = ns;
  if (ns >= 600e9) u = "min", v = ns / 60e9;
  else if (ns >= 1e9) u = "s", v = ns / 1e9;
  else if (ns >= 1e6) u = "ms", v = ns / 1e6;
  else if (ns >= 1e3) u = "\xc2\xb5s", v = ns / 1e3;
  if (ns < 1e3) snprintf(out, cap, "%.0f %s", v, u);
  else snprintf(out, cap, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, u);
}

static size_t utf8_len(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
  return n;
}

/* a generous estimate of the rendered width (DejaVu Sans digits and
 * lower case average about 0.6 em) */
static double text_w(const char *s, double size) { return (double)utf8_len(s) * size * 0.62; }

/* the byte offset of character k of s (UTF-8), or strlen(s) */
static size_t utf8_offset(const char *s, size_t k) {
  size_t i = 0, n = 0;
  for (; s[i]; i++) {
    if (((unsigned char)s[i] & 0xC0) != 0x80) {
      if (n == k) return i;
      n++;
    }
  }
  return i;
}

/* s in at most max characters: when longer, its middle becomes "…"
 * (a path keeps its start and its file name: "/home/…/runs/new.ttfs") */
static void elide_middle(char *out, size_t cap, const char *s, size_t max) {
  size_t n = utf8_len(s);
  if (n <= max || max < 3) {
    snprintf(out, cap, "%s", s);
    return;
  }
  size_t keep = max - 1, head = keep / 3, tail = keep - head;
  size_t hb = utf8_offset(s, head), tb = utf8_offset(s, n - tail);
  snprintf(out, cap, "%.*s\xe2\x80\xa6%s", (int)hb, s, s + tb);
}

static double px_x(const panel *p, double ns) {
  double l = log10(ns < 1 ? 1 : ns);
  return PLOT_L + (l - p->lx0) / (p->lx1 - p->lx0) * (PLOT_R - PLOT_L);
}

/* height of cumulative fraction F, 0 (bottom) .. 1 (top) */
static double y_of(const panel *p, double frac) {
  if (!p->tail) return frac < 0 ? 0 : frac > 1 ? 1 : frac;
  if (frac <= 0) return 0;
  double t = frac >= 1 ? p->nines : -log10(1.0 - frac);
  return t > p->nines ? 1.0 : t / p->nines;
}

static double px_y(const panel *p, double frac) { return p->top + (1.0 - y_of(p, frac)) * PLOT_H; }

static int overlaps(const panel *p, box b) {
  for (int i = 0; i < p->nboxes; i++) {
    const box *o = &p->boxes[i];
    if (b.x0 < o->x1 && o->x0 < b.x1 && b.y0 < o->y1 && o->y0 < b.y1) return 1;
  }
  return 0;
}

static void reserve(panel *p, box b) {
  if (p->nboxes < MAX_BOXES) p->boxes[p->nboxes++] = b;
}

/* Fraction of h's observations <= v, spread evenly inside each bucket
 * between its edges clamped to [min, max]: the curve draw_curve draws. */
static double frac_le(const ttft__shist *h, double v) {
  if (!h->count || v < (double)h->min) return 0.0;
  if (v >= (double)h->max) return 1.0;
  uint64_t cum = 0;
  uint32_t end = ttft__shist_hi(h);
  for (uint32_t i = ttft__shist_next(h, 0); i < end; i = ttft__shist_next(h, i + 1)) {
    uint64_t c = ttft__shist_at(h, i);
    if (!c) continue;
    double lo = (double)ttft__bucket_lo(i), hi = (double)ttft__bucket_hi(i) + 1;
    if (lo < (double)h->min) lo = (double)h->min;
    if (hi > (double)h->max) hi = (double)h->max;
    if (v < lo) break;
    if (v < hi) return ((double)cum + (double)c * (v - lo) / (hi - lo)) / (double)h->count;
    cum += c;
  }
  return (double)cum / (double)h->count;
}

static double ns_at(const panel *p, double x) {
  return pow(10, p->lx0 + (x - PLOT_L) / (PLOT_R - PLOT_L) * (p->lx1 - p->lx0));
}

/* Does a curve pass through box b? The curve rises left to right, so over
 * [x0, x1] it covers the heights between its values at the two ends. */
static int hits_curve(const panel *p, box b) {
  for (int i = 0; i < p->nser; i++) {
    const ttft__shist *h = p->ser[i].h;
    if (!h->count) continue;
    double ylo = px_y(p, frac_le(h, ns_at(p, b.x0))); /* lower on screen */
    double yhi = px_y(p, frac_le(h, ns_at(p, b.x1)));
    if (yhi <= b.y1 && ylo >= b.y0) return 1;
  }
  return 0;
}

static box text_box(double ox, double oy, double w) { return (box){ox - 2, oy - 11, ox + w + 2, oy + 3}; }

/* Pick the first candidate (dx, dy from (x, y); dx < 0 means "end the text
 * there") whose box is inside the plot and clear of every other label and
 * marker, preferring (first pass) one clear of every curve too. Else a
 * free line in the label column right of the plot, nearest to y. Returns
 * 1 with the text origin, or 0 when there is no free place at all (the
 * caller leaves the label out rather than overlap another). */
static int place(panel *p, double x, double y, double w, const double (*cand)[2], int n,
                 double *tx, double *ty) {
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < n; i++) {
      double ox = cand[i][0] < 0 ? x + cand[i][0] - w : x + cand[i][0];
      double oy = y + cand[i][1];
      box b = text_box(ox, oy, w);
      int inside = b.x0 >= PLOT_L + 1 && b.x1 <= PLOT_R - 1 && b.y0 >= p->top + 1 && b.y1 <= p->top + PLOT_H - 1;
      if (!inside || overlaps(p, b) || (pass == 0 && hits_curve(p, b))) continue;
      *tx = ox;
      *ty = oy;
      reserve(p, b);
      return 1;
    }
  }
  /* the label column: lines from the plot's top to its bottom */
  if (MARGIN_X + w + 2 <= SVG_W - 4) {
    int lines = (int)(PLOT_H / LINE_H);
    int best = -1;
    double best_d = INFINITY;
    for (int j = 0; j < lines; j++) {
      double oy = p->top + 11 + j * LINE_H;
      box b = text_box(MARGIN_X, oy, w);
      if (overlaps(p, b)) continue;
      double d = fabs(oy - 4 - y);
      if (d < best_d) best_d = d, best = j;
    }
    if (best >= 0) {
      *tx = MARGIN_X;
      *ty = p->top + 11 + best * LINE_H;
      reserve(p, text_box(*tx, *ty, w));
      return 1;
    }
  }
  return 0;
}

static void label(FILE *f, double x, double y, const char *color, const char *weight, const char *s) {
  fprintf(f,
          "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\" font-weight=\"%s\" stroke=\"#ffffff\" "
          "stroke-width=\"3\" stroke-linejoin=\"round\" paint-order=\"stroke\">",
          x, y, color, weight);
  xml_text(f, s);
  fputs("</text>\n", f);
}

/* --------------------------------------------------------------- axes */
static const struct {
  double ns;
  const char *text;
} ticks[] = {
  {1, "1 ns"}, {10, "10 ns"}, {100, "100 ns"}, {1e3, "1 \xc2\xb5s"}, {1e4, "10 \xc2\xb5s"},
  {1e5, "100 \xc2\xb5s"}, {1e6, "1 ms"}, {1e7, "10 ms"}, {1e8, "100 ms"}, {1e9, "1 s"},
  {1e10, "10 s"}, {60e9, "1 min"}, {600e9, "10 min"}, {3600e9, "1 h"}, {36000e9, "10 h"},
};

static void axis_range(panel *p) {
  double lo = INFINITY, hi = 0;
  for (int i = 0; i < p->nser; i++) {
    const ttft__shist *h = p->ser[i].h;
    if (!h->count) continue;
    double mn = (double)(h->min ? h->min : 1), mx = (double)(h->max ? h->max : 1);
    if (mn < lo) lo = mn;
    if (mx > hi) hi = mx;
  }
  for (int i = 0; i < p->nbud; i++) {
    double v = (double)p->bud[i].ns;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (!(hi > 0)) lo = 1e6, hi = 1e9; /* nothing: 1 ms .. 1 s */
  p->lx0 = floor(log10(lo));
  p->lx1 = ceil(log10(hi * 1.0001));
  if (p->lx1 - p->lx0 < 2) p->lx1 = p->lx0 + 2;
}

/* The vertical ticks: fractions and their labels. */
static int y_ticks(const panel *p, double *fr, const char **txt) {
  static const double lin[] = {0, 0.25, 0.5, 0.75, 0.9, 1.0};
  static const char *lin_t[] = {"0%", "25%", "50%", "75%", "90%", "100%"};
  static const double tail[] = {0, 0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999};
  static const char *tail_t[] = {"0%", "50%", "90%", "99%", "99.9%", "99.99%", "99.999%"};
  int n = 0;
  if (!p->tail) {
    for (; n < 6; n++) fr[n] = lin[n], txt[n] = lin_t[n];
    return n;
  }
  for (; n < 7 && n <= p->nines + 1; n++) fr[n] = tail[n], txt[n] = tail_t[n];
  return n;
}

static void draw_axes(FILE *f, panel *p) {
  double top = p->top, bottom = top + PLOT_H;
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fbfbfb\" stroke=\"none\"/>\n",
          PLOT_L, top, PLOT_R - PLOT_L, PLOT_H);
  /* minor grid: 2..9 in every decade */
  fputs("<g stroke=\"#ececec\" stroke-width=\"1\">\n", f);
  for (double d = p->lx0; d < p->lx1; d += 1)
    for (int k = 2; k <= 9; k++) {
      double x = px_x(p, pow(10, d) * k);
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, top, x, bottom);
    }
  fputs("</g>\n<g stroke=\"#d4d4d4\" stroke-width=\"1\">\n", f);
  double ys[8];
  const char *yt[8];
  int nys = y_ticks(p, ys, yt);
  for (int i = 0; i < nys; i++) {
    double y = px_y(p, ys[i]);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", PLOT_L, y, PLOT_R, y);
  }
  for (size_t i = 0; i < sizeof ticks / sizeof ticks[0]; i++) {
    double l = log10(ticks[i].ns);
    if (l < p->lx0 - 1e-9 || l > p->lx1 + 1e-9) continue;
    double x = px_x(p, ticks[i].ns);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, top, x, bottom);
  }
  fputs("</g>\n", f);
  fprintf(f, "<g font-size=\"12\" fill=\"#555555\" text-anchor=\"middle\">\n");
  for (size_t i = 0; i < sizeof ticks / sizeof ticks[0]; i++) {
    double l = log10(ticks[i].ns);
    if (l < p->lx0 - 1e-9 || l > p->lx1 + 1e-9) continue;
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", px_x(p, ticks[i].ns), bottom + 17, ticks[i].text);
  }
  fputs("</g>\n<g font-size=\"12\" fill=\"#555555\" text-anchor=\"end\">\n", f);
  for (int i = 0; i < nys; i++)
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", PLOT_L - 6, px_y(p, ys[i]) + 4, yt[i]);
  fputs("</g>\n", f);
  fprintf(f,
          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#555555\" text-anchor=\"middle\" "
          "transform=\"rotate(-90 %.1f %.1f)\">%s &#8804; x%s</text>\n",
          20.0, top + PLOT_H / 2, 20.0, top + PLOT_H / 2, p->what, p->tail ? " (tail scale)" : "");
  fprintf(f,
          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#555555\" text-anchor=\"middle\">"
          "%s (log scale)</text>\n",
          (PLOT_L + PLOT_R) / 2, bottom + 35, ttft_metric_name(p->m));
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#999999\"/>\n",
          PLOT_L, top, PLOT_R - PLOT_L, PLOT_H);
}

/* ------------------------------------------------------------- curves */
/* The empirical CDF at bucket resolution: within a bucket the
 * observations are spread evenly between its edges (clamped to min/max). */
static void draw_curve(FILE *f, const panel *p, const series *s) {
  const ttft__shist *h = s->h;
  fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.2\" stroke-linejoin=\"round\"%s points=\"",
          s->color, s->dashed ? " stroke-dasharray=\"7 4\"" : "");
  double lastx = -1e9, lasty = -1e9, px = 0, py = 0;
  uint64_t cum = 0;
  int pending = 0;
  uint32_t end = ttft__shist_hi(h);
  for (uint32_t i = ttft__shist_next(h, 0); i < end; i = ttft__shist_next(h, i + 1)) {
    uint64_t c = ttft__shist_at(h, i);
    if (!c) continue;
    double lo = (double)ttft__bucket_lo(i), hi = (double)ttft__bucket_hi(i) + 1;
    if (lo < (double)h->min) lo = (double)h->min;
    if (hi > (double)h->max) hi = (double)h->max;
    if (hi < lo) hi = lo;
    double pts[2][2] = {{px_x(p, lo), px_y(p, (double)cum / (double)h->count)},
                        {px_x(p, hi), px_y(p, (double)(cum + c) / (double)h->count)}};
    cum += c;
    for (int k = 0; k < 2; k++) {
      px = pts[k][0];
      py = pts[k][1];
      if (fabs(px - lastx) < 0.6 && fabs(py - lasty) < 0.6 && cum < h->count) {
        pending = 1;
        continue;
      }
      fprintf(f, "%.1f,%.1f ", px, py);
      lastx = px;
      lasty = py;
      pending = 0;
    }
  }
  if (pending) fprintf(f, "%.1f,%.1f", px, py);
  fputs("\"/>\n", f);
}

static void leader(FILE *f, double x, double y, double tx, double ty, double w, const char *color) {
  /* a label that had to move away keeps a thin line to its point */
  double ax = tx > x ? tx - 2 : tx + w + 2, ay = ty - 4;
  if (fabs(ax - x) > 14 || fabs(ay - y) > 14)
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"0.8\"/>\n",
            x, y, ax, ay, color);
}

static const struct {
  double q;
  const char *name;
} marker_q[] = {{0.5, "p50"}, {0.99, "p99"}};
#define NMARKERS 2

/* The independent units behind a curve: its observations, or for ITL the
 * sequences that had a gap (gaps of one sequence are not independent;
 * ttft-report --diff counts them the same way). */
static uint64_t series_units(const panel *p, const series *x) {
  if (p->m != TTFT_METRIC_ITL) return x->h->count;
  uint64_t u = report_gap_units(x->snap, x->cls);
  return u < x->h->count ? u : x->h->count;
}

/* Is marker k of x drawn? Only where its curve has enough data to judge
 * it (the text diff's rule), so that a panel's "not enough data" note
 * stands where nothing is drawn: in a diff, where either side is short
 * (the note says "per side"), else where this curve is. */
static int marker_judged(const panel *p, const series *x, int k, int diff) {
  uint64_t need = report_min_n_for(marker_q[k].q);
  if (!diff) return series_units(p, x) >= need;
  for (int i = 0; i < p->nser; i++)
    if (p->ser[i].h->count && series_units(p, &p->ser[i]) < need) return 0;
  return 1;
}

static void draw_markers(FILE *f, panel *p, const series *s, int named, int diff) {
  /* near the marker first, then further out along the free side */
  static const double c50[][2] = {{-9, -6}, {9, 16}, {-9, 8}, {9, 2}, {-9, -20}, {9, 30},
                                  {-9, 22}, {-9, -34}, {9, 44}, {-9, 36}, {9, -12}, {-9, -48},
                                  {9, 58}, {-9, 50}, {9, 72}, {-9, -62}};
  static const double c99[][2] = {{9, 17}, {-9, 17}, {9, -6}, {-9, -6}, {9, 31}, {-9, 31},
                                  {9, 45}, {-9, 45}, {9, -20}, {-9, -20}, {9, 59}, {-9, 59},
                                  {9, 73}, {-9, 73}, {9, 87}, {-9, 87}};
  for (int k = 0; k < NMARKERS; k++) {
    if (!marker_judged(p, s, k, diff)) continue;
    uint64_t v = ttft__shist_quantile(s->h, marker_q[k].q);
    double x = px_x(p, (double)v), y = px_y(p, marker_q[k].q);
    char val[32], text[160];
    fmt_ns(val, sizeof val, (double)v);
    if (named) snprintf(text, sizeof text, "%s %s %s", s->name, marker_q[k].name, val);
    else snprintf(text, sizeof text, "%s %s", marker_q[k].name, val);
    double tx, ty, w = text_w(text, 12);
    int placed = place(p, x, y, w, k == 0 ? c50 : c99, 16, &tx, &ty);
    if (placed) leader(f, x, y, tx, ty, w, s->color);
    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" stroke=\"#ffffff\" stroke-width=\"1.5\"/>\n",
            x, y, s->color);
    if (placed) label(f, tx, ty, s->color, "normal", text);
  }
}

static void draw_budget_lines(FILE *f, panel *p) {
  for (int i = 0; i < p->nbud; i++) {
    const budget *b = &p->bud[i];
    double x = px_x(p, (double)b->ns);
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.6\" "
            "stroke-dasharray=\"2 3\"/>\n",
            x, p->top, x, p->top + PLOT_H, b->color);
  }
}

/* budget labels: near the bottom of their line first (the curves rise to
 * the right, so the bottom right of a tail plot is usually empty) */
static void draw_budget_labels(FILE *f, panel *p) {
  static const double cand[][2] = {{5, PLOT_H - 8}, {-5, PLOT_H - 8}, {5, PLOT_H - 24}, {-5, PLOT_H - 24},
                                   {5, PLOT_H - 40}, {-5, PLOT_H - 40}, {5, 14}, {-5, 14},
                                   {5, 30}, {-5, 30}, {5, PLOT_H - 56}, {-5, PLOT_H - 56},
                                   {5, 46}, {-5, 46}, {5, PLOT_H / 2}, {-5, PLOT_H / 2}};
  for (int i = 0; i < p->nbud; i++) {
    const budget *b = &p->bud[i];
    double x = px_x(p, (double)b->ns), tx, ty, w = text_w(b->label, 12);
    if (!place(p, x, p->top, w, cand, 16, &tx, &ty)) continue;
    if (tx >= MARGIN_X) /* in the label column: a leader from the line */
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"0.8\" "
              "stroke-dasharray=\"2 2\"/>\n", x, ty - 4, tx - 2, ty - 4, b->color);
    label(f, tx, ty, b->color, "bold", b->label);
  }
}

/* -------------------------------------------------------------- panels */
/* is cls one of the ", "-separated names in list? */
static int has_name(const char *list, const char *cls) {
  size_t cl = strlen(cls);
  for (const char *q = list; *q;) {
    const char *e = strstr(q, ", ");
    size_t len = e ? (size_t)(e - q) : strlen(q);
    if (len == cl && memcmp(q, cls, cl) == 0) return 1;
    if (!e) break;
    q = e + 2;
  }
  return 0;
}

static void add_budget(panel *p, uint64_t ns, const char *cls, const char *kind, const char *color) {
  if (!ns) return;
  budget *b = NULL;
  for (int i = 0; i < p->nbud && !b; i++)
    if (p->bud[i].ns == ns) b = &p->bud[i];
  if (b) { /* one line per value: "chat, code SLO 300 ms" */
    if (!has_name(b->names, cls)) { /* old and new of a diff name a class once */
      size_t n = strlen(b->names);
      snprintf(b->names + n, sizeof b->names - n, ", %s", cls);
    }
    if (strcmp(b->color, color) != 0) b->color = SLO_MIXED;
  } else {
    if (p->nbud >= MAX_BUDGETS) return;
    b = &p->bud[p->nbud++];
    b->ns = ns;
    b->color = color;
    snprintf(b->names, sizeof b->names, "%s", cls);
  }
  char val[32];
  fmt_ns(val, sizeof val, (double)ns);
  snprintf(b->label, sizeof b->label, "%s %s %s", b->names, kind, val);
}

static uint64_t budget_of(const ttft_slo *slo, ttft_metric m) {
  switch (m) {
  case TTFT_METRIC_TTFT: return slo->ttft_ns;
  case TTFT_METRIC_TPOT: return slo->tpot_ns;
  case TTFT_METRIC_E2E: return slo->e2e_ns;
  case TTFT_METRIC_ITL: return slo->stall_threshold_ns;
  default: return 0;
  }
}

/* every budget of every class the snapshot reports (ttft__class_exported):
 * TTFT, TPOT and E2E SLOs, and on the ITL panel the stall budget */
static void add_budgets_of(panel *p, const ttft_snapshot *s, int diff) {
  const char *kind = p->m == TTFT_METRIC_ITL ? "stall" : "SLO";
  for (uint32_t c = 0; c < s->nclasses; c++) {
    const ttft__sclass *k = &s->cls[c];
    if (s->nclasses > 1 && !ttft__class_exported(s, c) && !k->h[p->m]->count) continue;
    add_budget(p, budget_of(&k->slo, p->m), k->name, kind, diff ? SLO_MIXED : palette[c % NPALETTE]);
  }
}

static void build_panel(panel *p, const ttft_snapshot *s, const ttft_snapshot *old) {
  if (old) {
    series *o = &p->ser[p->nser++];
    snprintf(o->name, sizeof o->name, "old");
    o->h = old->all.h[p->m];
    o->color = OLD_COLOR;
    o->dashed = 1;
    o->snap = old;
    o->cls = TTFT_CLASS_ALL;
    series *n = &p->ser[p->nser++];
    snprintf(n->name, sizeof n->name, "new");
    n->h = s->all.h[p->m];
    n->color = palette[0];
    n->snap = s;
    n->cls = TTFT_CLASS_ALL;
  } else {
    int with_data = 0;
    for (uint32_t c = 0; c < s->nclasses; c++) with_data += s->cls[c].h[p->m]->count > 0;
    for (uint32_t c = 0; c < s->nclasses && p->nser < MAX_SERIES; c++) {
      if (!s->cls[c].h[p->m]->count) continue;
      series *x = &p->ser[p->nser++];
      snprintf(x->name, sizeof x->name, "%s", with_data > 1 ? s->cls[c].name : "all");
      x->h = s->cls[c].h[p->m];
      x->color = palette[c % NPALETTE];
      x->snap = s;
      x->cls = (int)c;
    }
  }
  add_budgets_of(p, s, old != NULL);
  if (old) add_budgets_of(p, old, 1);
  /* the tail scale reaches one nine past what the largest curve resolves */
  uint64_t nmax = 0;
  for (int i = 0; i < p->nser; i++)
    if (p->ser[i].h->count > nmax) nmax = p->ser[i].h->count;
  int nines = nmax > 1 ? (int)ceil(log10((double)nmax)) : 2;
  p->nines = nines < 2 ? 2 : nines > 5 ? 5 : nines;
}

static void panel_subtitle(char *sub, size_t cap, const panel *p, const ttft_snapshot *s,
                           const ttft_snapshot *old) {
  const ttft__shist *hn = s->all.h[p->m];
  char a[32], b[32];
  sub[0] = 0;
  if (old) {
    const ttft__shist *ho = old->all.h[p->m];
    if (ho->count && hn->count) {
      uint64_t vo = ttft__shist_quantile(ho, 0.99), vn = ttft__shist_quantile(hn, 0.99);
      fmt_ns(a, sizeof a, (double)vo);
      fmt_ns(b, sizeof b, (double)vn);
      snprintf(sub, cap, "n %llu \xe2\x86\x92 %llu \xc2\xb7 p99 %s \xe2\x86\x92 %s (%+.1f %%)",
               (unsigned long long)ho->count, (unsigned long long)hn->count, a, b,
               vo ? 100.0 * ((double)vn - (double)vo) / (double)vo : 0.0);
    } else {
      snprintf(sub, cap, "n %llu \xe2\x86\x92 %llu", (unsigned long long)ho->count,
               (unsigned long long)hn->count);
    }
  } else if (hn->count) {
    fmt_ns(a, sizeof a, ttft__shist_sum_double(hn) / (double)hn->count);
    snprintf(sub, cap, "n = %llu \xc2\xb7 mean %s", (unsigned long long)hn->count, a);
  }
}

/* "p99: not enough data (n >= 1000 per side)" for each marked quantile
 * that some curve of the panel has too few observations to judge, by the
 * text diff's rule (and that curve's marker is not drawn); "" when every
 * marker stands on enough data. */
static void panel_note(char *out, size_t cap, const panel *p, int diff) {
  size_t len = 0;
  out[0] = 0;
  for (int k = 0; k < NMARKERS; k++) {
    uint64_t need = report_min_n_for(marker_q[k].q);
    char who[128] = "";
    int with = 0, shortn = 0;
    for (int i = 0; i < p->nser; i++) {
      const series *x = &p->ser[i];
      if (!x->h->count) continue;
      with++;
      if (series_units(p, x) >= need) continue;
      size_t w = strlen(who);
      if (shortn < 3) snprintf(who + w, sizeof who - w, "%s%s", shortn ? ", " : "", x->name);
      shortn++;
    }
    if (!shortn) continue;
    const char *unit = p->m == TTFT_METRIC_ITL ? " sequences" : "";
    char part[224];
    if (diff)
      snprintf(part, sizeof part, "%s: not enough data (n >= %llu%s per side)", marker_q[k].name,
               (unsigned long long)need, unit);
    else if (with > 1 && shortn < with)
      snprintf(part, sizeof part, "%s of %s%s: not enough data (n >= %llu%s)", marker_q[k].name,
               shortn > 3 ? "" : who, shortn > 3 ? "most classes" : "", (unsigned long long)need, unit);
    else
      snprintf(part, sizeof part, "%s: not enough data (n >= %llu%s)", marker_q[k].name,
               (unsigned long long)need, unit);
    int w = snprintf(out + len, cap - len, "%s%s", len ? " \xc2\xb7 " : "", part);
    if (w < 0 || (size_t)w >= cap - len) break;
    len += (size_t)w;
  }
}

static void draw_panel(FILE *f, panel *p, double y0, const ttft_snapshot *s, const ttft_snapshot *old) {
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"16\" font-weight=\"bold\" fill=\"#222222\">%s</text>\n",
          PLOT_L, y0 + 22, p->title);
  char sub[256];
  panel_subtitle(sub, sizeof sub, p, s, old);
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" fill=\"#555555\" text-anchor=\"end\">", PLOT_R, y0 + 22);
  xml_text(f, sub);
  fputs("</text>\n", f);
  char note[480];
  panel_note(note, sizeof note, p, old != NULL);
  if (note[0]) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#A04000\" class=\"note\">", PLOT_L,
            y0 + 42);
    xml_text(f, note);
    fputs("</text>\n", f);
    reserve(p, text_box(PLOT_L, y0 + 42, text_w(note, 12)));
  }

  p->top = y0 + PANEL_TITLE;
  axis_range(p);
  draw_axes(f, p);
  int any = 0;
  for (int i = 0; i < p->nser; i++) any |= p->ser[i].h->count > 0;
  if (!any) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" fill=\"#888888\" text-anchor=\"middle\">no data</text>\n",
            (PLOT_L + PLOT_R) / 2, p->top + PLOT_H / 2);
    reserve(p, (box){(PLOT_L + PLOT_R) / 2 - 30, p->top + PLOT_H / 2 - 12, (PLOT_L + PLOT_R) / 2 + 30,
                     p->top + PLOT_H / 2 + 4});
  }
  /* markers are obstacles for every label */
  for (int i = 0; i < p->nser; i++) {
    if (!p->ser[i].h->count) continue;
    for (int k = 0; k < NMARKERS; k++) {
      if (!marker_judged(p, &p->ser[i], k, old != NULL)) continue;
      double q = marker_q[k].q;
      double x = px_x(p, (double)ttft__shist_quantile(p->ser[i].h, q)), y = px_y(p, q);
      reserve(p, (box){x - 5, y - 5, x + 5, y + 5});
    }
  }
  draw_budget_lines(f, p);
  /* and so are the budget lines: a label never sits across one */
  for (int i = 0; i < p->nbud; i++) {
    double x = px_x(p, (double)p->bud[i].ns);
    reserve(p, (box){x - 1.5, p->top, x + 1.5, p->top + PLOT_H});
  }
  for (int i = 0; i < p->nser; i++)
    if (p->ser[i].h->count) draw_curve(f, p, &p->ser[i]);
  /* curve labels first: they belong next to their points; the budget
   * labels take what is left */
  int named = p->nser > 1;
  for (int i = 0; i < p->nser; i++)
    if (p->ser[i].h->count) draw_markers(f, p, &p->ser[i], named, old != NULL);
  draw_budget_labels(f, p);
}

/* "d1.ttfs · model "demo-7b" · clock starts at server_arrival · token =
 * detokenized_flush · 38 streams ended over 5.6 s" */
/* A snapshot's two header lines, from y: its name ("old: runs/a.ttfs"; a
 * long path is elided in its middle so the line fits the picture), then
 * what it measured ("model "demo-7b" · clock starts at server_arrival ·
 * token = detokenized_flush · 38 streams ended over 5.6 s", elided the same
 * way if a model name is absurdly long). Returns the y of the next line. */
static double snapshot_header(FILE *f, double y, const char *label, const char *color, const char *name,
                              const ttft_snapshot *s) {
  char text[1024], line[1200];
  if (name || label) {
    snprintf(line, sizeof line, "%s%s%s", label ? label : "", label && name ? ": " : "", name ? name : "");
    elide_middle(text, sizeof text, line, (size_t)((SVG_W - PLOT_L - 8) / (13 * 0.62)));
    fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" font-size=\"13\" fill=\"%s\">", PLOT_L, y, color);
    xml_text(f, text);
    fputs("</text>\n", f);
    y += 16;
  }
  uint64_t t0 = 0, t1 = 0;
  ttft_snapshot_interval(s, &t0, &t1);
  uint64_t ended = s->all.ctr[TTFT_COUNTER_COMPLETED] + s->all.ctr[TTFT_COUNTER_CANCELLED] +
                   s->all.ctr[TTFT_COUNTER_ERRORS];
  char iv[32];
  fmt_ns(iv, sizeof iv, (double)(t1 - t0));
  snprintf(line, sizeof line,
           "model \"%s\" \xc2\xb7 clock starts at %s \xc2\xb7 token = %s \xc2\xb7 %llu streams ended over %s",
           s->model, s->start_point, s->token_point, (unsigned long long)ended, iv);
  elide_middle(text, sizeof text, line, (size_t)((SVG_W - PLOT_L - 8) / (12 * 0.62)));
  fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" font-size=\"12\" fill=\"%s\">", PLOT_L, y, color);
  xml_text(f, text);
  fputs("</text>\n", f);
  return y + 20;
}

int report_svg(FILE *f, const ttft_snapshot *s, const char *s_name, const ttft_snapshot *old,
               const char *old_name, int tail_axis) {
  static panel panels[NPANELS];
  static const struct {
    ttft_metric m;
    const char *title, *what;
  } defs[NPANELS] = {
    {TTFT_METRIC_TTFT, "TTFT \xc2\xb7 time to first token", "requests"},
    {TTFT_METRIC_TPOT, "TPOT \xc2\xb7 time per output token", "requests"},
    {TTFT_METRIC_ITL, "ITL \xc2\xb7 inter-token gaps", "gaps"},
    {TTFT_METRIC_E2E, "E2E \xc2\xb7 end to end", "requests"},
  };
  double height = HEADER_H(old != NULL) + NPANELS * PANEL_H + 10;
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" font-family=\"%s\">\n",
          SVG_W, height, SVG_W, height, FONT);
  fprintf(f, "<title>libttft latency CDFs</title>\n");
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
  fprintf(f, "<text x=\"%.1f\" y=\"30\" font-size=\"20\" font-weight=\"bold\" fill=\"#111111\">", PLOT_L);
  if (old) fputs("Latency CDFs: old (grey, dashed) vs new (blue)", f);
  else fputs("Latency CDFs", f);
  fputs("</text>\n", f);
  double y = 52;
  if (old) {
    y = snapshot_header(f, y, "old", OLD_COLOR, old_name, old);
    y = snapshot_header(f, y, "new", palette[0], s_name, s);
  } else {
    y = snapshot_header(f, y, NULL, "#555555", s_name, s);
  }
  fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" font-size=\"12\" fill=\"#777777\">", PLOT_L, y - 2);
  if (tail_axis)
    fputs("vertical axis: tail scale, 50 / 90 / 99 / 99.9 % evenly spaced \xc2\xb7 dotted lines: "
          "SLO and stall budgets",
          f);
  else
    fputs("vertical axis: linear \xc2\xb7 dotted lines: SLO and stall budgets", f);
  fputs("</text>\n", f);

  for (int i = 0; i < NPANELS; i++) {
    panel *p = &panels[i];
    memset(p, 0, sizeof *p);
    p->m = defs[i].m;
    p->title = defs[i].title;
    p->what = defs[i].what;
    p->tail = tail_axis;
    build_panel(p, s, old);
    fprintf(f, "<g font-size=\"12\">\n");
    draw_panel(f, p, HEADER_H(old != NULL) + i * PANEL_H, s, old);
    fputs("</g>\n", f);
  }
  fputs("</svg>\n", f);
  return ferror(f) ? -1 : 0;
}
