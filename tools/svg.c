/* svg.c — latency CDFs as a self-contained SVG: no scripts, no external
 * fonts or images, readable without a legend (every curve, marker and
 * budget line carries its own label). The curves come straight from the
 * snapshot's high-resolution buckets (internal.h: the tool links the static
 * library). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/snapshot.h"
#include "svg.h"

#define SVG_W 960.0
#define PLOT_L 84.0
#define PLOT_R (SVG_W - 150.0)
#define HEADER_H 70.0
#define PANEL_TITLE 40.0
#define PLOT_H 220.0
#define PANEL_FOOT 46.0
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
#define MAX_BOXES 128

typedef struct panel {
  ttft_metric m;
  const char *title, *what;
  series ser[MAX_SERIES];
  int nser;
  budget bud[MAX_BUDGETS];
  int nbud;
  double top;          /* plot area top */
  double lx0, lx1;     /* log10 of the axis ends, ns */
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

static double text_w(const char *s, double size) { return (double)utf8_len(s) * size * 0.6; }

static double px_x(const panel *p, double ns) {
  double l = log10(ns < 1 ? 1 : ns);
  return PLOT_L + (l - p->lx0) / (p->lx1 - p->lx0) * (PLOT_R - PLOT_L);
}

static double px_y(const panel *p, double frac) { return p->top + (1.0 - frac) * PLOT_H; }

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

/* Pick the first candidate (dx, dy from (x, y); dx < 0 means "end the text
 * there") whose box is inside the plot, clear of other labels and, on the
 * first pass, clear of every curve. Returns the text origin. */
static void place(panel *p, double x, double y, double w, const double (*cand)[2], int n,
                  double *tx, double *ty) {
  for (int pass = 0; pass < 3; pass++) {
    for (int i = 0; i < n; i++) {
      double ox = cand[i][0] < 0 ? x + cand[i][0] - w : x + cand[i][0];
      double oy = y + cand[i][1];
      box b = {ox - 2, oy - 11, ox + w + 2, oy + 3};
      int inside = b.x0 >= PLOT_L && b.x1 <= SVG_W - 6 && b.y0 >= p->top - 2 && b.y1 <= p->top + PLOT_H;
      if (!inside || (pass < 2 && overlaps(p, b)) || (pass == 0 && hits_curve(p, b))) continue;
      *tx = ox;
      *ty = oy;
      reserve(p, b);
      return;
    }
  }
  *tx = x + 6; /* nowhere free: next to the point */
  *ty = y - 4;
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
  static const double ys[] = {0, 0.25, 0.5, 0.75, 0.9, 1.0};
  for (size_t i = 0; i < sizeof ys / sizeof ys[0]; i++) {
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
  for (size_t i = 0; i < sizeof ys / sizeof ys[0]; i++)
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%.0f%%</text>\n", PLOT_L - 6, px_y(p, ys[i]) + 4, 100 * ys[i]);
  fputs("</g>\n", f);
  fprintf(f,
          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#555555\" text-anchor=\"middle\" "
          "transform=\"rotate(-90 %.1f %.1f)\">%s &#8804; x</text>\n",
          24.0, top + PLOT_H / 2, 24.0, top + PLOT_H / 2, p->what);
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

static void draw_markers(FILE *f, panel *p, const series *s, int named) {
  static const struct {
    double q;
    const char *name;
  } qs[] = {{0.5, "p50"}, {0.99, "p99"}};
  /* near the marker first, then further out along the free side */
  static const double c50[][2] = {{-9, -6}, {9, 16}, {-9, 8}, {9, 2}, {-9, -20}, {9, 30},
                                  {-9, 22}, {-9, -34}, {9, 44}, {-9, 36}, {9, -12}, {-9, -48},
                                  {9, 58}, {-9, 50}, {9, 72}, {-9, -62}};
  static const double c99[][2] = {{9, 17}, {-9, 17}, {9, 31}, {-9, 31}, {9, 45}, {-9, 45},
                                  {9, 59}, {-9, 59}, {9, 73}, {-9, 73}, {9, 87}, {-9, 87},
                                  {9, 101}, {-9, 101}, {9, 115}, {-9, 115}};
  for (int k = 0; k < 2; k++) {
    uint64_t v = ttft__shist_quantile(s->h, qs[k].q);
    double x = px_x(p, (double)v), y = px_y(p, qs[k].q);
    char val[32], text[160];
    fmt_ns(val, sizeof val, (double)v);
    if (named) snprintf(text, sizeof text, "%s %s %s", s->name, qs[k].name, val);
    else snprintf(text, sizeof text, "%s %s", qs[k].name, val);
    double tx, ty, w = text_w(text, 12);
    place(p, x, y, w, k == 0 ? c50 : c99, 16, &tx, &ty);
    /* a label that had to move away keeps a thin line to its point */
    double ax = tx > x ? tx - 2 : tx + w + 2, ay = ty - 4;
    if (fabs(ax - x) > 14 || fabs(ay - y) > 14)
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"0.8\"/>\n",
              x, y, ax, ay, s->color);
    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" stroke=\"#ffffff\" stroke-width=\"1.5\"/>\n",
            x, y, s->color);
    label(f, tx, ty, s->color, "normal", text);
  }
}

static void draw_budgets(FILE *f, panel *p) {
  for (int i = 0; i < p->nbud; i++) {
    const budget *b = &p->bud[i];
    double x = px_x(p, (double)b->ns);
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.6\" "
            "stroke-dasharray=\"2 3\"/>\n",
            x, p->top, x, p->top + PLOT_H, b->color);
  }
  /* labels after all lines, top rows first, beside their line */
  static const double cand[][2] = {{5, 14}, {-5, 14}, {5, 30}, {-5, 30}, {5, 46}, {-5, 46},
                                   {5, 62}, {-5, 62}, {5, 78}, {-5, 78}};
  for (int i = 0; i < p->nbud; i++) {
    const budget *b = &p->bud[i];
    double x = px_x(p, (double)b->ns), tx, ty;
    place(p, x, p->top, text_w(b->label, 12), cand, 10, &tx, &ty);
    label(f, tx, ty, b->color, "bold", b->label);
  }
}

/* -------------------------------------------------------------- panels */
static void add_budget(panel *p, uint64_t ns, const char *cls, const char *kind, const char *color) {
  if (!ns) return;
  budget *b = NULL;
  for (int i = 0; i < p->nbud && !b; i++)
    if (p->bud[i].ns == ns) b = &p->bud[i];
  if (b) { /* one line per value: "chat, code SLO 300 ms" */
    size_t n = strlen(b->names);
    snprintf(b->names + n, sizeof b->names - n, ", %s", cls);
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
  case TTFT_METRIC_ITL: return slo->stall_threshold_ns;
  default: return 0;
  }
}

static void build_panel(panel *p, const ttft_snapshot *s, const char *s_name, const ttft_snapshot *old,
                        const char *old_name) {
  const char *kind = p->m == TTFT_METRIC_ITL ? "stall" : "SLO";
  if (old) {
    series *o = &p->ser[p->nser++];
    snprintf(o->name, sizeof o->name, "old");
    o->h = old->all.h[p->m];
    o->color = OLD_COLOR;
    o->dashed = 1;
    series *n = &p->ser[p->nser++];
    snprintf(n->name, sizeof n->name, "new");
    n->h = s->all.h[p->m];
    n->color = palette[0];
    (void)s_name;
    (void)old_name;
  } else {
    int with_data = 0;
    for (uint32_t c = 0; c < s->nclasses; c++) with_data += s->cls[c].h[p->m]->count > 0;
    for (uint32_t c = 0; c < s->nclasses && p->nser < MAX_SERIES; c++) {
      if (!s->cls[c].h[p->m]->count) continue;
      series *x = &p->ser[p->nser++];
      snprintf(x->name, sizeof x->name, "%s", with_data > 1 ? s->cls[c].name : "all");
      x->h = s->cls[c].h[p->m];
      x->color = palette[c % NPALETTE];
    }
  }
  /* budgets of classes that were used (the only class: always) */
  for (uint32_t c = 0; c < s->nclasses; c++) {
    const ttft__sclass *k = &s->cls[c];
    if (s->nclasses > 1 && !k->ctr[TTFT_COUNTER_BEGUN] && !k->h[p->m]->count) continue;
    if (p->m == TTFT_METRIC_ITL && !k->h[p->m]->count && s->nclasses > 1) continue;
    add_budget(p, budget_of(&k->slo, p->m), k->name, kind, old ? SLO_MIXED : palette[c % NPALETTE]);
  }
}

static void draw_panel(FILE *f, panel *p, double y0, const ttft_snapshot *s, const ttft_snapshot *old) {
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"16\" font-weight=\"bold\" fill=\"#222222\">%s</text>\n",
          PLOT_L, y0 + 22, p->title);
  const ttft__shist *hn = s->all.h[p->m];
  char sub[256] = "", a[32], b[32];
  if (old) {
    const ttft__shist *ho = old->all.h[p->m];
    if (ho->count && hn->count) {
      uint64_t vo = ttft__shist_quantile(ho, 0.99), vn = ttft__shist_quantile(hn, 0.99);
      fmt_ns(a, sizeof a, (double)vo);
      fmt_ns(b, sizeof b, (double)vn);
      snprintf(sub, sizeof sub, "p99 %s \xe2\x86\x92 %s (%+.1f %%)", a, b,
               vo ? 100.0 * ((double)vn - (double)vo) / (double)vo : 0.0);
    }
  } else if (hn->count) {
    fmt_ns(a, sizeof a, (double)hn->sum / (double)hn->count);
    snprintf(sub, sizeof sub, "n = %llu \xc2\xb7 mean %s", (unsigned long long)hn->count, a);
  }
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" fill=\"#555555\" text-anchor=\"end\">", PLOT_R, y0 + 22);
  xml_text(f, sub);
  fputs("</text>\n", f);

  p->top = y0 + PANEL_TITLE;
  axis_range(p);
  draw_axes(f, p);
  int any = 0;
  for (int i = 0; i < p->nser; i++) any |= p->ser[i].h->count > 0;
  if (!any) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" fill=\"#888888\" text-anchor=\"middle\">no data</text>\n",
            (PLOT_L + PLOT_R) / 2, p->top + PLOT_H / 2);
  }
  /* markers are obstacles for every label */
  for (int i = 0; i < p->nser; i++) {
    if (!p->ser[i].h->count) continue;
    for (int k = 0; k < 2; k++) {
      double q = k ? 0.99 : 0.5;
      double x = px_x(p, (double)ttft__shist_quantile(p->ser[i].h, q)), y = px_y(p, q);
      reserve(p, (box){x - 5, y - 5, x + 5, y + 5});
    }
  }
  draw_budgets(f, p);
  for (int i = 0; i < p->nser; i++)
    if (p->ser[i].h->count) draw_curve(f, p, &p->ser[i]);
  int named = p->nser > 1;
  for (int i = 0; i < p->nser; i++)
    if (p->ser[i].h->count) draw_markers(f, p, &p->ser[i], named);
}

int report_svg(FILE *f, const ttft_snapshot *s, const char *s_name, const ttft_snapshot *old,
               const char *old_name) {
  static panel panels[3];
  static const struct {
    ttft_metric m;
    const char *title, *what;
  } defs[3] = {
    {TTFT_METRIC_TTFT, "TTFT \xc2\xb7 time to first token", "requests"},
    {TTFT_METRIC_TPOT, "TPOT \xc2\xb7 time per output token", "requests"},
    {TTFT_METRIC_ITL, "ITL \xc2\xb7 inter-token gaps", "gaps"},
  };
  double height = HEADER_H + 3 * PANEL_H + 10;
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" font-family=\"%s\">\n",
          SVG_W, height, SVG_W, height, FONT);
  fprintf(f, "<title>libttft latency CDFs</title>\n");
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
  fprintf(f, "<text x=\"%.1f\" y=\"30\" font-size=\"20\" font-weight=\"bold\" fill=\"#111111\">", PLOT_L);
  if (old) {
    fputs("Latency CDFs: ", f);
    xml_text(f, old_name ? old_name : "old");
    fputs(" (old, dashed) vs ", f);
    xml_text(f, s_name ? s_name : "new");
    fputs(" (new)", f);
  } else {
    fputs("Latency CDFs", f);
    if (s_name) {
      fputs(": ", f);
      xml_text(f, s_name);
    }
  }
  fputs("</text>\n", f);
  uint64_t t0 = 0, t1 = 0;
  ttft_snapshot_interval(s, &t0, &t1);
  uint64_t ended = s->all.ctr[TTFT_COUNTER_COMPLETED] + s->all.ctr[TTFT_COUNTER_CANCELLED] +
                   s->all.ctr[TTFT_COUNTER_ERRORS];
  char info[768];
  snprintf(info, sizeof info,
           "model \"%s\" \xc2\xb7 clock starts at %s \xc2\xb7 token = %s \xc2\xb7 %llu streams ended over %.1f s",
           s->model, s->start_point, s->token_point, (unsigned long long)ended, (double)(t1 - t0) / 1e9);
  fprintf(f, "<text x=\"%.1f\" y=\"52\" font-size=\"13\" fill=\"#555555\">", PLOT_L);
  xml_text(f, info);
  fputs("</text>\n", f);

  for (int i = 0; i < 3; i++) {
    panel *p = &panels[i];
    memset(p, 0, sizeof *p);
    p->m = defs[i].m;
    p->title = defs[i].title;
    p->what = defs[i].what;
    build_panel(p, s, s_name, old, old_name);
    fprintf(f, "<g font-size=\"12\">\n");
    draw_panel(f, p, HEADER_H + i * PANEL_H, s, old);
    fputs("</g>\n", f);
  }
  fputs("</svg>\n", f);
  return ferror(f) ? -1 : 0;
}
