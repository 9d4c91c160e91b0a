/* top_model.c — ttft-top's figures. Windows are exact deltas of two
 * cumulative snapshots of one source (ttft_snapshot_delta). A gather's
 * snapshots (a --dir source, or an endpoint that serves a gather) carry
 * no registry identity, and the library's delta refuses them; the model
 * gives its own copies one identity for the source (model.stamp), so
 * ttft_snapshot_delta applies all of its other checks: no counter,
 * bucket, count or sum may fall and no class may vanish. When the delta
 * is refused — another registry answered (a restarted server) or a
 * gather's counters went down (its directory was emptied) — the source
 * restarted: the ring starts over, the windows are "since the restart",
 * and a rate is never computed across it, so none is ever negative. */
#include "top_model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/snapshot.h" /* registry_id: the stamp above */

#define TOP_STAMP UINT64_C(0x7474667420746f70) /* "ttft top" */

int top_model_init(top_model *m, double refresh_s, double long_s) {
  memset(m, 0, sizeof *m);
  m->refresh_s = refresh_s;
  m->long_s = long_s;
  double slots = ceil(long_s / refresh_s) + 2;
  m->cap = slots > 4096 ? 4096 : (unsigned)slots;
  m->ring = calloc(m->cap, sizeof *m->ring);
  m->ring_ms = calloc(m->cap, sizeof *m->ring_ms);
  m->stamp = TOP_STAMP;
  snprintf(m->status, sizeof m->status, "waiting for the first snapshot");
  return m->ring && m->ring_ms ? 0 : -1;
}

static void ring_clear(top_model *m) {
  for (unsigned i = 0; i < m->n; i++) ttft_snapshot_free(m->ring[(m->head + i) % m->cap]);
  m->n = 0;
  m->head = 0;
}

void top_model_free(top_model *m) {
  ring_clear(m);
  for (int w = 0; w < TOP_WINS; w++) ttft_snapshot_free(m->win[w]);
  free(m->ring);
  free(m->ring_ms);
  free(m->spark);
  memset(m, 0, sizeof *m);
}

static ttft_snapshot *ring_at(const top_model *m, unsigned i) {
  return m->ring[(m->head + i) % m->cap];
}

static void ring_add(top_model *m, ttft_snapshot *s, uint64_t now_ms) {
  if (m->n == m->cap) {
    ttft_snapshot_free(m->ring[m->head]);
    m->head = (m->head + 1) % m->cap;
    m->n--;
  }
  unsigned at = (m->head + m->n) % m->cap;
  m->ring[at] = s;
  m->ring_ms[at] = now_ms;
  m->n++;
}

static top_spark *spark_of(top_model *m, const char *name) {
  for (unsigned i = 0; i < m->nspark; i++)
    if (strcmp(m->spark[i].name, name) == 0) return &m->spark[i];
  top_spark *ns = realloc(m->spark, (m->nspark + 1) * sizeof *ns);
  if (!ns) return NULL;
  m->spark = ns;
  top_spark *p = &m->spark[m->nspark++];
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", name);
  return p;
}

static void spark_push(top_model *m, const ttft_snapshot *w) {
  for (int c = 0; c < ttft_snapshot_classes(w); c++) {
    top_spark *p = spark_of(m, ttft_snapshot_class_name(w, c));
    if (!p) return;
    uint64_t v = ttft_snapshot_class_quantile(w, c, TTFT_METRIC_TTFT, 0.99);
    if (p->n == TOP_SPARK) {
      memmove(p->v, p->v + 1, (TOP_SPARK - 1) * sizeof p->v[0]);
      p->n--;
    }
    p->v[p->n++] = v;
  }
}

void top_model_push(top_model *m, ttft_snapshot *s, const char *msg, uint64_t now_ms,
                    uint64_t now_unix) {
  m->frames++;
  m->restart_now = 0;
  if (!s) {
    if (m->live || !m->fail_since_ms) m->fail_since_ms = now_ms;
    m->live = 0;
    snprintf(m->status, sizeof m->status, "%s", msg && *msg ? msg : "no snapshot");
    return;
  }
  if (s->registry_id == 0) s->registry_id = m->stamp; /* a gather: see the top */
  ttft_snapshot *win[TOP_WINS] = {NULL, NULL};
  int err = 0;
  if (m->n) {
    win[TOP_WIN_REFRESH] = ttft_snapshot_delta(s, ring_at(m, m->n - 1), &err);
    if (!win[TOP_WIN_REFRESH] && err == TTFT_EINVAL) { /* a restart */
      time_t t = (time_t)now_unix;
      struct tm tm;
      char hms[16];
      localtime_r(&t, &tm);
      strftime(hms, sizeof hms, "%H:%M:%S", &tm);
      m->restarts++;
      m->restart_now = 1;
      snprintf(m->restart_line, sizeof m->restart_line,
               "RESTART at %s: the source's counters started over (restart #%u); windows count "
               "from it",
               hms, m->restarts);
      ring_clear(m);
    } else if (!win[TOP_WIN_REFRESH]) {
      snprintf(m->status, sizeof m->status, "delta: %s", ttft_strerror(err));
      ttft_snapshot_free(s);
      m->live = 0;
      return;
    }
  }
  ring_add(m, s, now_ms);
  /* the long window: from the oldest snapshot it still reaches (the ring
   * holds long_s / refresh_s of them, one spare) */
  unsigned from = m->n; /* none */
  double slack_ms = m->refresh_s * 500.0;
  for (unsigned i = 0; i + 1 < m->n; i++)
    if ((double)(now_ms - m->ring_ms[(m->head + i) % m->cap]) <= m->long_s * 1000.0 + slack_ms) {
      from = i;
      break;
    }
  /* a source younger than the long window: all it holds is the window */
  uint64_t t0 = 0, t1 = 0;
  int young = ttft_snapshot_interval(s, &t0, &t1) == TTFT_OK && t1 >= t0 &&
              (double)(t1 - t0) / 1e6 <= m->long_s * 1000.0 + slack_ms;
  if (from < m->n && !young) win[TOP_WIN_LONG] = ttft_snapshot_delta(s, ring_at(m, from), &err);
  /* no older snapshot (the first take, or the first after a restart):
   * the window is everything since the source started, which is the
   * cumulative snapshot itself (top_model_window) */
  for (int w = 0; w < TOP_WINS; w++) {
    m->since_start[w] = win[w] == NULL;
    ttft_snapshot_free(m->win[w]);
    m->win[w] = win[w];
  }
  m->live = 1;
  m->fail_since_ms = 0;
  m->last_ok_ms = now_ms;
  m->last_ok_unix = now_unix;
  snprintf(m->status, sizeof m->status, "ok");
  spark_push(m, top_model_window(m, TOP_WIN_REFRESH));
}

const ttft_snapshot *top_model_window(const top_model *m, int w) {
  if (!m->n) return NULL;
  return m->win[w] ? m->win[w] : ring_at(m, m->n - 1);
}

/* ------------------------------------------------------------ figures */

void top_fmt_ns(char *buf, size_t cap, uint64_t ns, int have) {
  if (!have) {
    snprintf(buf, cap, "-");
    return;
  }
  double v = (double)ns;
  if (ns < 1000) snprintf(buf, cap, "%uns", (unsigned)ns);
  else if (v < 1e6) snprintf(buf, cap, v < 1e4 ? "%.2fus" : v < 1e5 ? "%.1fus" : "%.0fus", v / 1e3);
  else if (v < 1e9) snprintf(buf, cap, v < 1e7 ? "%.2fms" : v < 1e8 ? "%.1fms" : "%.0fms", v / 1e6);
  else if (v < 1e12) snprintf(buf, cap, v < 1e10 ? "%.2fs" : v < 1e11 ? "%.1fs" : "%.0fs", v / 1e9);
  else snprintf(buf, cap, "%.0fm", v / 6e10);
}

static double window_secs(const ttft_snapshot *w) {
  uint64_t a = 0, b = 0;
  if (ttft_snapshot_interval(w, &a, &b) != TTFT_OK || b <= a) return 0.0;
  return (double)(b - a) / 1e9;
}

static double per_s(uint64_t n, double secs) { return secs > 0 ? (double)n / secs : 0.0; }

/* Sequences of class c begun and not ended, from the newest cumulative
 * snapshot (the gauge is registry-wide). */
static uint64_t class_inflight(const top_model *m, const char *name) {
  if (!m->n) return 0;
  const ttft_snapshot *s = ring_at(m, m->n - 1);
  for (int c = 0; c < ttft_snapshot_classes(s); c++) {
    if (strcmp(ttft_snapshot_class_name(s, c), name) != 0) continue;
    uint64_t b = ttft_snapshot_class_counter(s, c, TTFT_COUNTER_BEGUN);
    uint64_t e = ttft_snapshot_class_counter(s, c, TTFT_COUNTER_COMPLETED) +
                 ttft_snapshot_class_counter(s, c, TTFT_COUNTER_CANCELLED) +
                 ttft_snapshot_class_counter(s, c, TTFT_COUNTER_ERRORS);
    return b > e ? b - e : 0;
  }
  return 0;
}

/* Whether class c is worth a row: every class added by the server is, the
 * default class once it saw a begin. */
static int class_shown(const ttft_snapshot *cum, const ttft_snapshot *w, int c) {
  if (c > 0) return 1;
  return ttft_snapshot_class_counter(cum, 0, TTFT_COUNTER_BEGUN) ||
         ttft_snapshot_class_counter(w, 0, TTFT_COUNTER_BEGUN) || ttft_snapshot_classes(w) == 1;
}

static int top_cause(const ttft_snapshot *w, int c, uint64_t *n) {
  int best = -1;
  *n = 0;
  for (int k = 0; k < TTFT_STALL_CAUSE_COUNT; k++) {
    uint64_t v = ttft_snapshot_stalls_by_cause(w, c, (ttft_stall_cause)k);
    if (v > *n) {
      *n = v;
      best = k;
    }
  }
  return best;
}

typedef struct sort_ctx {
  const ttft_snapshot *w;
  int sort;
} sort_ctx;
static sort_ctx g_sort; /* qsort has no context argument in C11 */

static int cmp_class(const void *pa, const void *pb) {
  int a = *(const int *)pa, b = *(const int *)pb;
  const ttft_snapshot *w = g_sort.w;
  uint64_t va = 0, vb = 0;
  switch (g_sort.sort) {
  case TOP_SORT_RATE:
    va = ttft_snapshot_class_counter(w, a, TTFT_COUNTER_BEGUN);
    vb = ttft_snapshot_class_counter(w, b, TTFT_COUNTER_BEGUN);
    break;
  case TOP_SORT_TTFT:
    va = ttft_snapshot_class_quantile(w, a, TTFT_METRIC_TTFT, 0.99);
    vb = ttft_snapshot_class_quantile(w, b, TTFT_METRIC_TTFT, 0.99);
    break;
  case TOP_SORT_STALLS:
    va = ttft_snapshot_class_counter(w, a, TTFT_COUNTER_STALLS);
    vb = ttft_snapshot_class_counter(w, b, TTFT_COUNTER_STALLS);
    break;
  default:
    break;
  }
  if (va != vb) return va > vb ? -1 : 1; /* the largest first */
  return strcmp(ttft_snapshot_class_name(w, a), ttft_snapshot_class_name(w, b));
}

int top_model_order(const top_model *m, const top_view *v, int *out, int cap) {
  const ttft_snapshot *w = top_model_window(m, v->window);
  if (!w) return 0;
  const ttft_snapshot *cum = ring_at(m, m->n - 1);
  int n = 0;
  for (int c = 0; c < ttft_snapshot_classes(w) && n < cap; c++)
    if (class_shown(cum, w, c)) out[n++] = c;
  g_sort.w = w;
  g_sort.sort = v->sort;
  qsort(out, (size_t)n, sizeof *out, cmp_class);
  return n;
}

static int class_by_name(const ttft_snapshot *w, const char *name) {
  for (int c = 0; c < ttft_snapshot_classes(w); c++)
    if (strcmp(ttft_snapshot_class_name(w, c), name) == 0) return c;
  return -1;
}

/* ------------------------------------------------------------ lines */

typedef struct liner {
  top_emit emit;
  void *ctx;
  int width;
  char buf[1024];
} liner;

static void line(liner *l, int style, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(l->buf, sizeof l->buf, fmt, ap);
  va_end(ap);
  size_t w = (size_t)l->width < sizeof l->buf ? (size_t)l->width : sizeof l->buf - 1;
  if (strlen(l->buf) > w) l->buf[w] = 0; /* ASCII only: a byte is a column */
  l->emit(l->ctx, style, l->buf);
}

/* the class table's columns, in the order shown; prio: which stay first
 * when the terminal narrows (0 always) */
enum { C_CLASS, C_RATE, C_INFL, C_T50, C_T90, C_T99, C_P50, C_P99, C_I50, C_I99, C_E99, C_SLO,
       C_STL, C_CAUSE, C_N };
static const struct {
  const char *head;
  int width, prio;
} COLS[C_N] = {
    {"CLASS", 12, 0}, {"REQ/S", 7, 0},  {"INFL", 5, 0},   {"TTFT50", 7, 1}, {"TTFT90", 7, 3},
    {"TTFT99", 7, 0}, {"TPOT50", 7, 4}, {"TPOT99", 7, 1}, {"ITL50", 7, 4},  {"ITL99", 7, 1},
    {"E2E99", 7, 2},  {"SLO%", 6, 0},   {"STL/S", 6, 0},  {"CAUSE", 14, 2},
};

static void pick_cols(int width, int on[C_N], int *class_w) {
  *class_w = width >= 100 ? 16 : 10;
  int used = *class_w;
  memset(on, 0, C_N * sizeof on[0]);
  on[C_CLASS] = 1;
  for (int p = 0; p <= 4; p++)
    for (int c = 1; c < C_N; c++)
      if (COLS[c].prio == p && used + 1 + COLS[c].width <= width - 1) {
        on[c] = 1;
        used += 1 + COLS[c].width;
      }
}

static void cell(char *row, size_t cap, int width, const char *text, int left) {
  size_t n = strlen(row);
  if (n >= cap) return;
  snprintf(row + n, cap - n, left ? "%-*.*s " : "%*.*s ", width, width, text);
}

static void q_cell(char *row, size_t cap, int width, const ttft_snapshot *w, int c, ttft_metric mt,
                   double q) {
  char b[32];
  int have = ttft_snapshot_class_count(w, c, mt) != 0;
  top_fmt_ns(b, sizeof b, ttft_snapshot_class_quantile(w, c, mt, q), have);
  cell(row, cap, width, b, 0);
}

static void class_row(const top_model *m, const ttft_snapshot *w, int c, const int on[C_N],
                      int class_w, char *row, size_t cap) {
  double secs = window_secs(w);
  char b[64];
  row[0] = 0;
  for (int k = 0; k < C_N; k++) {
    if (!on[k]) continue;
    int wd = k == C_CLASS ? class_w : COLS[k].width;
    switch (k) {
    case C_CLASS: cell(row, cap, wd, ttft_snapshot_class_name(w, c), 1); break;
    case C_RATE:
      snprintf(b, sizeof b, "%.1f", per_s(ttft_snapshot_class_counter(w, c, TTFT_COUNTER_BEGUN), secs));
      cell(row, cap, wd, b, 0);
      break;
    case C_INFL:
      snprintf(b, sizeof b, "%llu",
               (unsigned long long)class_inflight(m, ttft_snapshot_class_name(w, c)));
      cell(row, cap, wd, b, 0);
      break;
    case C_T50: q_cell(row, cap, wd, w, c, TTFT_METRIC_TTFT, 0.5); break;
    case C_T90: q_cell(row, cap, wd, w, c, TTFT_METRIC_TTFT, 0.9); break;
    case C_T99: q_cell(row, cap, wd, w, c, TTFT_METRIC_TTFT, 0.99); break;
    case C_P50: q_cell(row, cap, wd, w, c, TTFT_METRIC_TPOT, 0.5); break;
    case C_P99: q_cell(row, cap, wd, w, c, TTFT_METRIC_TPOT, 0.99); break;
    case C_I50: q_cell(row, cap, wd, w, c, TTFT_METRIC_ITL, 0.5); break;
    case C_I99: q_cell(row, cap, wd, w, c, TTFT_METRIC_ITL, 0.99); break;
    case C_E99: q_cell(row, cap, wd, w, c, TTFT_METRIC_E2E, 0.99); break;
    case C_SLO: {
      double a = ttft_snapshot_attainment(w, c);
      if (a < 0) snprintf(b, sizeof b, "-");
      else snprintf(b, sizeof b, "%.1f", a * 100.0);
      cell(row, cap, wd, b, 0);
      break;
    }
    case C_STL:
      snprintf(b, sizeof b, "%.2f", per_s(ttft_snapshot_class_counter(w, c, TTFT_COUNTER_STALLS), secs));
      cell(row, cap, wd, b, 0);
      break;
    case C_CAUSE: {
      uint64_t n = 0;
      int k2 = top_cause(w, c, &n);
      cell(row, cap, wd, k2 < 0 ? "-" : ttft_stall_cause_name((ttft_stall_cause)k2), 1);
      break;
    }
    }
  }
}

static const char *window_name(const top_model *m, int w, char *buf, size_t cap) {
  const ttft_snapshot *s = top_model_window(m, w);
  double secs = s ? window_secs(s) : 0.0;
  if (m->since_start[w])
    snprintf(buf, cap, "%s window: since the source started (%.1f s)",
             w == TOP_WIN_REFRESH ? "refresh" : "long", secs);
  else snprintf(buf, cap, "%s window: last %.1f s", w == TOP_WIN_REFRESH ? "refresh" : "long", secs);
  return buf;
}

static void class_table(const top_model *m, const top_view *v, liner *l, int win) {
  const ttft_snapshot *w = top_model_window(m, win);
  int on[C_N], class_w;
  pick_cols(l->width, on, &class_w);
  char row[1024] = "";
  for (int k = 0; k < C_N; k++)
    if (on[k]) cell(row, sizeof row, k == C_CLASS ? class_w : COLS[k].width, COLS[k].head, k == C_CLASS || k == C_CAUSE);
  char wn[128];
  line(l, TOP_ST_DIM, "%s", window_name(m, win, wn, sizeof wn));
  line(l, TOP_ST_HEAD, "%s", row);
  int ids[4096];
  top_view vv = *v;
  vv.window = win;
  int n = top_model_order(m, &vv, ids, 4096);
  for (int i = 0; i < n; i++) {
    class_row(m, w, ids[i], on, class_w, row, sizeof row);
    int sel = v->pick[0] && strcmp(v->pick, ttft_snapshot_class_name(w, ids[i])) == 0;
    line(l, sel ? TOP_ST_SEL : TOP_ST_ROW, "%s", row);
  }
  if (n == 0) line(l, TOP_ST_DIM, "(no classes)");
}

static void stalls_line(const top_model *m, const top_view *v, liner *l) {
  const ttft_snapshot *w = top_model_window(m, v->window);
  int c = v->pick[0] ? class_by_name(w, v->pick) : TTFT_CLASS_ALL;
  if (c < 0 && v->pick[0]) c = TTFT_CLASS_ALL;
  double secs = window_secs(w);
  char buf[1024];
  int o = snprintf(buf, sizeof buf, "stalls/s by cause (%s):", c == TTFT_CLASS_ALL ? "all classes" : v->pick);
  int any = 0;
  for (int k = 0; k < TTFT_STALL_CAUSE_COUNT && o < (int)sizeof buf; k++) {
    uint64_t n = ttft_snapshot_stalls_by_cause(w, c, (ttft_stall_cause)k);
    if (!n) continue;
    any = 1;
    o += snprintf(buf + o, sizeof buf - (size_t)o, " %s %.2f (%llu)",
                  ttft_stall_cause_name((ttft_stall_cause)k), per_s(n, secs), (unsigned long long)n);
  }
  if (!any && o < (int)sizeof buf) o += snprintf(buf + o, sizeof buf - (size_t)o, " none");
  if (o < (int)sizeof buf)
    snprintf(buf + o, sizeof buf - (size_t)o, "   live stalls now: %llu",
             (unsigned long long)ttft_snapshot_gauge(w, TTFT_GAUGE_LIVE_STALLS));
  line(l, any ? TOP_ST_WARN : TOP_ST_ROW, "%s", buf);
}

static void slowest_lines(const top_model *m, const top_view *v, liner *l) {
  const ttft_snapshot *w = top_model_window(m, v->window);
  int c = v->pick[0] ? class_by_name(w, v->pick) : TTFT_CLASS_ALL;
  if (c < 0) c = TTFT_CLASS_ALL;
  int idw = l->width >= 100 ? 36 : 22;
  for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++) {
    unsigned n = ttft_snapshot_slowest_count(w, c, (ttft_slowest_by)by);
    line(l, TOP_ST_HEAD, "%-*s %-10s %7s %7s %-14s %s", idw,
         by == TTFT_SLOWEST_TTFT ? "SLOWEST BY TTFT (id)" : "SLOWEST BY GAP (id)", "CLASS", "TTFT",
         "MAXGAP", "GAP CAUSE", "ENDED");
    if (!n) line(l, TOP_ST_DIM, "(none ended in this window)");
    for (unsigned i = 0; i < n && (int)i < v->slow_rows; i++) {
      ttft_slow_request r;
      memset(&r, 0, sizeof r);
      r.struct_size = sizeof r;
      if (ttft_snapshot_slowest(w, c, (ttft_slowest_by)by, i, &r) != TTFT_OK) break;
      char t[32], g[32];
      top_fmt_ns(t, sizeof t, r.ttft_ns, r.ttft_ns != 0);
      top_fmt_ns(g, sizeof g, r.max_gap_ns, r.max_gap_ns != 0);
      int stalled = r.max_gap_ns && r.cause != TTFT_STALL_UNKNOWN;
      line(l, TOP_ST_ROW, "%-*.*s %-10.10s %7s %7s %-14s %s", idw, idw,
           r.request_id[0] ? r.request_id : "(no id)", ttft_snapshot_class_name(w, r.class_id), t, g,
           stalled ? ttft_stall_cause_name(r.cause) : "-", ttft_status_name(r.status));
    }
  }
}

static void engine_line(const top_model *m, const top_view *v, liner *l) {
  const ttft_snapshot *w = top_model_window(m, v->window);
  double secs = window_secs(w);
  char buf[512];
  int o = snprintf(buf, sizeof buf, "engine steps");
  for (int p = 1; p >= 0; p--) {
    uint64_t n = ttft_snapshot_engine_step_count(w, p);
    char a[32], b[32];
    top_fmt_ns(a, sizeof a, ttft_snapshot_engine_step_quantile(w, p, 0.5), n != 0);
    top_fmt_ns(b, sizeof b, ttft_snapshot_engine_step_quantile(w, p, 0.99), n != 0);
    o += snprintf(buf + o, sizeof buf - (size_t)o, "   %s %.1f/s p50 %s p99 %s",
                  p ? "prefill" : "decode", per_s(n, secs), a, b);
  }
  line(l, TOP_ST_ROW, "%s", buf);
}

static void spark_lines(const top_model *m, const top_view *v, liner *l) {
  const ttft_snapshot *w = top_model_window(m, v->window);
  static const char *const blocks[8] = {"\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83",
                                        "\xe2\x96\x84", "\xe2\x96\x85", "\xe2\x96\x86",
                                        "\xe2\x96\x87", "\xe2\x96\x88"};
  static const char ascii[8] = {'_', '.', ',', '-', '=', '+', '*', '#'};
  int ids[4096];
  int n = top_model_order(m, v, ids, 4096);
  int cols = l->width - 12 - 22;
  if (cols > TOP_SPARK) cols = TOP_SPARK;
  if (cols < 8) return;
  line(l, TOP_ST_HEAD, "TTFT p99 per refresh (oldest left, each line scaled to its max)");
  for (int i = 0; i < n; i++) {
    const char *name = ttft_snapshot_class_name(w, ids[i]);
    const top_spark *p = NULL;
    for (unsigned k = 0; k < m->nspark; k++)
      if (strcmp(m->spark[k].name, name) == 0) p = &m->spark[k];
    if (!p) continue;
    uint64_t mx = 0;
    unsigned from = p->n > (unsigned)cols ? p->n - (unsigned)cols : 0;
    for (unsigned k = from; k < p->n; k++)
      if (p->v[k] > mx) mx = p->v[k];
    char buf[1024];
    int o = snprintf(buf, sizeof buf, "%-10.10s  ", name);
    for (unsigned k = from; k < p->n && o < (int)sizeof buf - 8; k++) {
      int lv = mx ? (int)((p->v[k] * 7 + mx / 2) / mx) : 0;
      if (lv > 7) lv = 7;
      if (!p->v[k]) o += snprintf(buf + o, sizeof buf - (size_t)o, " ");
      else if (v->utf8) o += snprintf(buf + o, sizeof buf - (size_t)o, "%s", blocks[lv]);
      else o += snprintf(buf + o, sizeof buf - (size_t)o, "%c", ascii[lv]);
    }
    char a[32], b[32];
    top_fmt_ns(a, sizeof a, p->n ? p->v[p->n - 1] : 0, p->n && p->v[p->n - 1]);
    top_fmt_ns(b, sizeof b, mx, mx != 0);
    for (unsigned k = p->n - from; k < (unsigned)cols && o < (int)sizeof buf - 2; k++) buf[o++] = ' ';
    snprintf(buf + o, sizeof buf - (size_t)o, " now %-7s max %s", a, b);
    l->emit(l->ctx, TOP_ST_ROW, buf); /* multi-byte: not cut by bytes */
  }
}

static void hms(uint64_t unix_s, char *buf, size_t cap) {
  time_t t = (time_t)unix_s;
  struct tm tm;
  localtime_r(&t, &tm);
  strftime(buf, cap, "%H:%M:%S", &tm);
}

void top_render(const top_model *m, const top_view *v, top_emit emit, void *ctx) {
  liner l = {emit, ctx, v->width < 40 ? 40 : v->width, {0}};
  char t[16] = "--:--:--";
  if (m->last_ok_unix) hms(m->last_ok_unix, t, sizeof t);
  const ttft_snapshot *w = top_model_window(m, v->window);
  char procs[48] = "";
  if (w && ttft_snapshot_gauge(w, TTFT_GAUGE_PROCESSES))
    snprintf(procs, sizeof procs, "  processes %llu",
             (unsigned long long)ttft_snapshot_gauge(w, TTFT_GAUGE_PROCESSES));
  line(&l, TOP_ST_TITLE, "ttft-top  %s  at %s%s%s", v->source, t, procs, v->paused ? "  [PAUSED]" : "");
  if (m->live) {
    line(&l, TOP_ST_OK, "status: live (frame %llu)", (unsigned long long)m->frames);
  } else if (m->last_ok_unix) {
    line(&l, TOP_ST_BAD, "status: %s", m->status);
    line(&l, TOP_ST_BAD, "NOT LIVE: the figures below are the last good ones, from %s", t);
  } else {
    line(&l, TOP_ST_BAD, "status: %s", m->status);
  }
  if (m->restarts) line(&l, TOP_ST_WARN, "%s", m->restart_line);
  if (!w) return;
  double secs = window_secs(w);
  double a = ttft_snapshot_attainment(w, TTFT_CLASS_ALL);
  char slo[16] = "-";
  if (a >= 0) snprintf(slo, sizeof slo, "%.1f%%", a * 100.0);
  line(&l, TOP_ST_ROW, "in flight %llu   live stalls %llu   req/s %.1f   tokens/s %.1f   SLO %s",
       (unsigned long long)ttft_snapshot_gauge(w, TTFT_GAUGE_INFLIGHT),
       (unsigned long long)ttft_snapshot_gauge(w, TTFT_GAUGE_LIVE_STALLS),
       per_s(ttft_snapshot_counter(w, TTFT_COUNTER_BEGUN), secs),
       per_s(ttft_snapshot_counter(w, TTFT_COUNTER_TOKENS), secs), slo);
  if (v->both) {
    class_table(m, v, &l, TOP_WIN_REFRESH);
    class_table(m, v, &l, TOP_WIN_LONG);
  } else {
    class_table(m, v, &l, v->window);
  }
  stalls_line(m, v, &l);
  engine_line(m, v, &l);
  slowest_lines(m, v, &l);
  spark_lines(m, v, &l);
}

/* ------------------------------------------------------------ JSON */

typedef struct jbuf {
  char *p;
  size_t n, cap;
  int oom;
} jbuf;

static void jf(jbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (k < 0) {
      b->oom = 1;
      return;
    }
    if ((size_t)k < b->cap - b->n) {
      b->n += (size_t)k;
      return;
    }
    size_t nc = (b->cap + (size_t)k + 1) * 2;
    char *np = realloc(b->p, nc);
    if (!np) {
      b->oom = 1;
      return;
    }
    b->p = np;
    b->cap = nc;
  }
}

/* a JSON string: names and ids are the library's (no control bytes), but
 * quotes and backslashes may be in them */
static void jstr(jbuf *b, const char *s) {
  jf(b, "\"");
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') jf(b, "\\%c", ch);
    else if (ch < 0x20) jf(b, "\\u%04x", ch);
    else jf(b, "%c", ch);
  }
  jf(b, "\"");
}

static void jquant(jbuf *b, const char *key, const ttft_snapshot *w, int c, ttft_metric mt) {
  static const double qs[3] = {0.5, 0.9, 0.99};
  static const char *const qn[3] = {"p50", "p90", "p99"};
  uint64_t n = ttft_snapshot_class_count(w, c, mt);
  jf(b, ",\"%s\":{\"count\":%llu", key, (unsigned long long)n);
  for (int i = 0; i < 3; i++) {
    if (n) jf(b, ",\"%s_ns\":%llu", qn[i], (unsigned long long)ttft_snapshot_class_quantile(w, c, mt, qs[i]));
    else jf(b, ",\"%s_ns\":null", qn[i]);
  }
  jf(b, "}");
}

static void json_window(jbuf *b, const top_model *m, const top_view *v, int win) {
  const ttft_snapshot *w = top_model_window(m, win);
  double secs = window_secs(w);
  jf(b, "{\"name\":\"%s\",\"seconds\":%.9f,\"since_start\":%s", win ? "long" : "refresh", secs,
     m->since_start[win] ? "true" : "false");
  jf(b, ",\"in_flight\":%llu,\"live_stalls\":%llu",
     (unsigned long long)ttft_snapshot_gauge(w, TTFT_GAUGE_INFLIGHT),
     (unsigned long long)ttft_snapshot_gauge(w, TTFT_GAUGE_LIVE_STALLS));
  jf(b, ",\"engine_step\":{");
  for (int p = 1; p >= 0; p--) {
    uint64_t n = ttft_snapshot_engine_step_count(w, p);
    jf(b, "%s\"%s\":{\"count\":%llu,\"per_s\":%.6f", p ? "" : ",", p ? "prefill" : "decode",
       (unsigned long long)n, per_s(n, secs));
    if (n)
      jf(b, ",\"p50_ns\":%llu,\"p99_ns\":%llu}",
         (unsigned long long)ttft_snapshot_engine_step_quantile(w, p, 0.5),
         (unsigned long long)ttft_snapshot_engine_step_quantile(w, p, 0.99));
    else jf(b, ",\"p50_ns\":null,\"p99_ns\":null}");
  }
  jf(b, "},\"classes\":[");
  int ids[4096];
  top_view vv = *v;
  vv.window = win;
  int n = top_model_order(m, &vv, ids, 4096);
  for (int i = 0; i < n; i++) {
    int c = ids[i];
    const char *name = ttft_snapshot_class_name(w, c);
    uint64_t begun = ttft_snapshot_class_counter(w, c, TTFT_COUNTER_BEGUN);
    uint64_t stalls = ttft_snapshot_class_counter(w, c, TTFT_COUNTER_STALLS);
    jf(b, "%s{\"name\":", i ? "," : "");
    jstr(b, name);
    jf(b, ",\"begun\":%llu,\"completed\":%llu,\"cancelled\":%llu,\"errors\":%llu,\"tokens\":%llu",
       (unsigned long long)begun,
       (unsigned long long)ttft_snapshot_class_counter(w, c, TTFT_COUNTER_COMPLETED),
       (unsigned long long)ttft_snapshot_class_counter(w, c, TTFT_COUNTER_CANCELLED),
       (unsigned long long)ttft_snapshot_class_counter(w, c, TTFT_COUNTER_ERRORS),
       (unsigned long long)ttft_snapshot_class_counter(w, c, TTFT_COUNTER_TOKENS));
    jf(b, ",\"req_per_s\":%.6f,\"in_flight\":%llu", per_s(begun, secs),
       (unsigned long long)class_inflight(m, name));
    jquant(b, "ttft", w, c, TTFT_METRIC_TTFT);
    jquant(b, "tpot", w, c, TTFT_METRIC_TPOT);
    jquant(b, "itl", w, c, TTFT_METRIC_ITL);
    jquant(b, "e2e", w, c, TTFT_METRIC_E2E);
    double a = ttft_snapshot_attainment(w, c);
    if (a >= 0) jf(b, ",\"slo_attainment\":%.6f", a);
    else jf(b, ",\"slo_attainment\":null");
    jf(b, ",\"stalls\":%llu,\"stalls_per_s\":%.6f,\"stalls_by_cause\":{", (unsigned long long)stalls,
       per_s(stalls, secs));
    for (int k = 0; k < TTFT_STALL_CAUSE_COUNT; k++)
      jf(b, "%s\"%s\":%llu", k ? "," : "", ttft_stall_cause_name((ttft_stall_cause)k),
         (unsigned long long)ttft_snapshot_stalls_by_cause(w, c, (ttft_stall_cause)k));
    jf(b, "}}");
  }
  jf(b, "],\"slowest\":[");
  int first = 1;
  for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++) {
    unsigned k = ttft_snapshot_slowest_count(w, TTFT_CLASS_ALL, (ttft_slowest_by)by);
    for (unsigned i = 0; i < k; i++) {
      ttft_slow_request r;
      memset(&r, 0, sizeof r);
      r.struct_size = sizeof r;
      if (ttft_snapshot_slowest(w, TTFT_CLASS_ALL, (ttft_slowest_by)by, i, &r) != TTFT_OK) break;
      jf(b, "%s{\"by\":\"%s\",\"id\":", first ? "" : ",", by ? "gap" : "ttft");
      first = 0;
      jstr(b, r.request_id);
      jf(b, ",\"class\":");
      jstr(b, ttft_snapshot_class_name(w, r.class_id));
      jf(b, ",\"ttft_ns\":%llu,\"max_gap_ns\":%llu,\"cause\":\"%s\",\"status\":\"%s\"}",
         (unsigned long long)r.ttft_ns, (unsigned long long)r.max_gap_ns,
         ttft_stall_cause_name(r.cause), ttft_status_name(r.status));
    }
  }
  jf(b, "]}");
}

char *top_render_json(const top_model *m, const top_view *v) {
  jbuf b = {malloc(4096), 0, 4096, 0};
  if (!b.p) return NULL;
  jf(&b, "{\"frame\":%llu,\"source\":", (unsigned long long)m->frames);
  jstr(&b, v->source);
  jf(&b, ",\"live\":%s,\"status\":", m->live ? "true" : "false");
  jstr(&b, m->status);
  jf(&b, ",\"restart\":%s,\"restarts\":%u", m->restart_now ? "true" : "false", m->restarts);
  if (m->live) {
    jf(&b, ",\"windows\":[");
    json_window(&b, m, v, TOP_WIN_REFRESH);
    jf(&b, ",");
    json_window(&b, m, v, TOP_WIN_LONG);
    jf(&b, "]");
  } else {
    jf(&b, ",\"windows\":null"); /* never stale figures as if live */
  }
  jf(&b, "}");
  if (b.oom) {
    free(b.p);
    return NULL;
  }
  return b.p;
}
