/* top_model.h — what ttft-top shows, apart from how: a ring of the
 * source's cumulative snapshots, the two windows cut from it as exact
 * deltas (the last refresh, and the longer window), restarts, the TTFT p99
 * history per class, and a frame rendered as lines (batch text, the
 * terminal) or as one JSON object. No terminal code here. */
#ifndef TTFT_TOOLS_TOP_MODEL_H
#define TTFT_TOOLS_TOP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "ttft.h"

#define TOP_SPARK 64 /* refreshes of TTFT p99 history kept per class */

enum { TOP_WIN_REFRESH = 0, TOP_WIN_LONG = 1, TOP_WINS = 2 };
enum { TOP_SORT_NAME, TOP_SORT_RATE, TOP_SORT_TTFT, TOP_SORT_STALLS, TOP_SORTS };

/* Line styles, for the terminal's attributes (batch output ignores them). */
enum { TOP_ST_TITLE, TOP_ST_OK, TOP_ST_BAD, TOP_ST_HEAD, TOP_ST_ROW, TOP_ST_SEL, TOP_ST_WARN,
       TOP_ST_DIM, TOP_ST_HELP };

typedef struct top_spark {
  char name[64];
  uint64_t v[TOP_SPARK]; /* TTFT p99 of each refresh window, ns; 0 = none */
  unsigned n;            /* how many are filled (the newest last)        */
} top_spark;

typedef struct top_model {
  double refresh_s, long_s;
  /* the ring of cumulative snapshots, with when they were taken (ms on
   * this machine's monotonic clock) */
  ttft_snapshot **ring;
  uint64_t *ring_ms;
  unsigned cap, head, n;
  ttft_snapshot *win[TOP_WINS]; /* the two windows of the last good take   */
  int since_start[TOP_WINS];    /* the window is everything since the
                                   source started (no older snapshot)      */
  uint64_t stamp;               /* identity given to snapshots without one */
  /* status: the last take's outcome */
  int live;                     /* 1: the windows are of the last take      */
  char status[320];
  uint64_t last_ok_ms, fail_since_ms;
  uint64_t last_ok_unix;        /* wall-clock seconds of the last good take */
  unsigned restarts;
  int restart_now;              /* this take found a restart                */
  char restart_line[200];
  uint64_t frames;
  top_spark *spark;
  unsigned nspark;
} top_model;

/* What the view shows; the keys change it. */
typedef struct top_view {
  int width;        /* columns (>= 40)                          */
  int window;       /* TOP_WIN_REFRESH or TOP_WIN_LONG          */
  int sort;         /* TOP_SORT_*                               */
  char pick[64];    /* the picked class by name; "" = every one */
  int paused;
  int help;         /* the long help instead of the key line   */
  int utf8;         /* spark lines in block characters          */
  int both;         /* batch: both windows' class tables        */
  int slow_rows;    /* how many slowest requests to list        */
  const char *source;
} top_view;

int top_model_init(top_model *m, double refresh_s, double long_s);
void top_model_free(top_model *m);

/* One take's outcome: s (owned by the model from here on) or NULL with
 * why (msg). now_ms: this machine's monotonic ms; now_unix: wall s. */
void top_model_push(top_model *m, ttft_snapshot *s, const char *msg, uint64_t now_ms,
                    uint64_t now_unix);

/* Window w of the last good take (the newest cumulative snapshot when
 * the window reaches the source's start); NULL before any. */
const ttft_snapshot *top_model_window(const top_model *m, int w);

/* The classes of the shown window in the view's order: ids into out
 * (capacity cap); returns how many. */
int top_model_order(const top_model *m, const top_view *v, int *out, int cap);

/* Render the frame as lines: emit(ctx, style, text) per line. */
typedef void (*top_emit)(void *ctx, int style, const char *text);
void top_render(const top_model *m, const top_view *v, top_emit emit, void *ctx);

/* The frame as one JSON object (no newline) into a malloc'd string. */
char *top_render_json(const top_model *m, const top_view *v);

/* "19.1ms", "1.12s", "850us", "-" for 0 (no data): at most 7 bytes. */
void top_fmt_ns(char *buf, size_t cap, uint64_t ns, int have);

#endif
