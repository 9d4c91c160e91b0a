/*
 * ttft-top — watch a libttft server's latency live, in a terminal
 * (docs/ttft-top.md, SPEC §10.4).
 *
 *   ttft-top [URL | --dir D] [-b] [-n FRAMES] [-d SECONDS] [-w SECONDS] [--json]
 *
 * Every -d seconds it takes one snapshot of the source (GET URL/snapshot,
 * or a gather of the shared directory D), keeps a ring of them, and shows
 * per class the last refresh and a longer window (-w, default 60 s), both
 * exact deltas of two snapshots (top_model.c). Interactive on a terminal
 * (ncurses: resize, SIGTSTP and colour as ncurses does them; SIGINT and
 * SIGTERM end it as q does, with the terminal restored); -b prints plain
 * text frames, --json one JSON object per line.
 *
 * Exit: 0 (q, SIGINT, SIGTERM, or -b whose last frame was live), 1 usage,
 * 2 the source cannot be opened (bad URL, a directory that cannot be
 * gathered), 3 -b whose last frame had no snapshot (the status line and,
 * with --json, "live":false say why).
 */
#include <curses.h>
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "top_model.h"
#include "top_source.h"
#include "ttft.h"

static volatile sig_atomic_t g_stop;
static void on_stop(int sig) {
  (void)sig;
  g_stop = 1;
}

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(uint64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (!g_stop && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: ttft-top [URL | --dir DIR] [-b] [-n FRAMES] [-d SECONDS] [-w SECONDS] [--json]\n"
          "Watch a libttft endpoint (URL, e.g. http://127.0.0.1:9464: it reads /snapshot)\n"
          "or a shared directory (--dir) live: per class over the last refresh and a\n"
          "longer window, requests/s, in flight, TTFT/TPOT/ITL/E2E quantiles, SLO\n"
          "attainment, stalls by cause, the slowest requests, engine steps.\n"
          "\n"
          "  --dir DIR        gather every process publishing into DIR\n"
          "  -d SECONDS       refresh interval (default 1; 0.1 .. 3600)\n"
          "  -w SECONDS       the longer window (default 60; at least -d)\n"
          "  -b               batch mode: plain text frames on stdout\n"
          "  -n FRAMES        batch mode: stop after FRAMES frames (default: until SIGINT)\n"
          "  --json           batch mode: one JSON object per frame and line (implies -b)\n"
          "  --timeout MS     bound on one fetch (default: the refresh interval, 200 .. 5000)\n"
          "  --bench-refresh  measure the CPU of one refresh for 64 classes, then exit\n"
          "  -h, --help       this text      --version   the versions\n"
          "\n"
          "keys: q quit, s sort, c/C or arrows pick a class (a: every class), w switch\n"
          "window, p pause, h help. NO_COLOR set: no colour.\n"
          "exit status: 0 ok, 1 usage, 2 the source cannot be opened, 3 (-b) the last\n"
          "frame had no snapshot from the source.\n");
}

/* ------------------------------------------------------------ batch */

static void emit_stdout(void *ctx, int style, const char *text) {
  (void)ctx;
  (void)style;
  fputs(text, stdout);
  fputc('\n', stdout);
}

static int run_batch(top_source *src, top_model *m, top_view *v, long frames, int json,
                     double refresh_s) {
  uint64_t next = mono_ms();
  for (long i = 0; !g_stop && (frames <= 0 || i < frames); i++) {
    char msg[320];
    ttft_snapshot *s = top_source_take(src, msg, sizeof msg);
    top_model_push(m, s, msg, mono_ms(), (uint64_t)time(NULL));
    if (json) {
      char *j = top_render_json(m, v);
      if (j) puts(j);
      else puts("{\"live\":false,\"status\":\"out of memory\"}");
      free(j);
    } else {
      if (i) fputc('\n', stdout);
      top_render(m, v, emit_stdout, NULL);
    }
    fflush(stdout);
    if (frames > 0 && i + 1 >= frames) break;
    next += (uint64_t)(refresh_s * 1000.0);
    uint64_t now = mono_ms();
    if (next > now) sleep_ms(next - now);
    else next = now;
  }
  return m->live ? 0 : 3;
}

/* ------------------------------------------------------------ terminal */

enum { PAIR_TITLE = 1, PAIR_OK, PAIR_BAD, PAIR_HEAD, PAIR_SEL, PAIR_WARN };

typedef struct screen {
  int row, rows, color;
} screen;

static void emit_curses(void *ctx, int style, const char *text) {
  screen *sc = ctx;
  if (sc->row >= sc->rows - 1) return; /* the last row is the key line */
  attr_t a = A_NORMAL;
  short pair = 0;
  switch (style) {
  case TOP_ST_TITLE: a = A_BOLD; pair = PAIR_TITLE; break;
  case TOP_ST_OK: pair = PAIR_OK; break;
  case TOP_ST_BAD: a = A_BOLD | (sc->color ? 0 : A_REVERSE); pair = PAIR_BAD; break;
  case TOP_ST_HEAD: a = A_BOLD | A_UNDERLINE; pair = PAIR_HEAD; break;
  case TOP_ST_SEL: a = A_REVERSE; break;
  case TOP_ST_WARN: a = sc->color ? A_NORMAL : A_BOLD; pair = PAIR_WARN; break;
  case TOP_ST_DIM: a = A_DIM; break;
  default: break;
  }
  if (!sc->color) pair = 0;
  attr_set(a, pair, NULL);
  mvaddstr(sc->row, 0, text);
  attr_set(A_NORMAL, 0, NULL);
  sc->row++;
}

static const char *const SORT_NAMES[TOP_SORTS] = {"name", "req/s", "ttft99", "stalls"};

static void draw(const top_model *m, top_view *v, screen *sc) {
  erase();
  sc->rows = LINES;
  sc->row = 0;
  v->width = COLS;
  if (v->help) {
    static const char *const help[] = {
        "ttft-top keys",
        "  q          quit (the terminal is restored; SIGINT and SIGTERM do the same)",
        "  s          sort the classes: name, req/s, TTFT p99, stalls/s",
        "  c / C      pick the next / previous class (down / up arrows too);",
        "             the stalls, slowest and spark lines follow it",
        "  a          every class again",
        "  w          switch window: the last refresh / the longer window (-w)",
        "  p / space  pause: freeze the figures (no snapshot is taken)",
        "  h / ?      this help; any key goes back",
        "",
        "Windows are exact deltas of two snapshots. A restart of the source (its",
        "counters started over) is said on a RESTART line; no rate spans it.",
        "A source that fails is said on the status line; the figures are then",
        "marked NOT LIVE.",
    };
    for (size_t i = 0; i < sizeof help / sizeof help[0]; i++) emit_curses(sc, TOP_ST_ROW, help[i]);
  } else {
    top_render(m, v, emit_curses, sc);
  }
  char keys[256];
  snprintf(keys, sizeof keys, "q quit  s sort:%s  c/C class:%s  w window:%s  p %s  h help",
           SORT_NAMES[v->sort], v->pick[0] ? v->pick : "all",
           v->window == TOP_WIN_REFRESH ? "refresh" : "long", v->paused ? "resume" : "pause");
  attr_set(A_REVERSE, 0, NULL);
  mvaddnstr(LINES - 1, 0, keys, COLS > 1 ? COLS - 1 : 1);
  attr_set(A_NORMAL, 0, NULL);
  refresh();
}

static void pick_step(const top_model *m, top_view *v, int dir) {
  int ids[4096];
  int n = top_model_order(m, v, ids, 4096);
  const ttft_snapshot *w = top_model_window(m, v->window);
  if (!n || !w) return;
  int at = -1;
  for (int i = 0; i < n; i++)
    if (v->pick[0] && strcmp(v->pick, ttft_snapshot_class_name(w, ids[i])) == 0) at = i;
  at = at < 0 ? (dir > 0 ? 0 : n - 1) : at + dir;
  if (at < 0 || at >= n) v->pick[0] = 0; /* past either end: every class */
  else snprintf(v->pick, sizeof v->pick, "%s", ttft_snapshot_class_name(w, ids[at]));
}

static int run_terminal(top_source *src, top_model *m, top_view *v, double refresh_s) {
  if (!initscr()) {
    fprintf(stderr, "ttft-top: cannot drive this terminal (TERM=%s); use -b\n",
            getenv("TERM") ? getenv("TERM") : "");
    return 1;
  }
  cbreak();
  noecho();
  nonl();
  keypad(stdscr, TRUE);
  curs_set(0);
  screen sc = {0, LINES, 0};
  const char *nc = getenv("NO_COLOR");
  if (has_colors() && !(nc && *nc)) {
    start_color();
    use_default_colors();
    init_pair(PAIR_TITLE, COLOR_CYAN, -1);
    init_pair(PAIR_OK, COLOR_GREEN, -1);
    init_pair(PAIR_BAD, COLOR_WHITE, COLOR_RED);
    init_pair(PAIR_HEAD, COLOR_YELLOW, -1);
    init_pair(PAIR_SEL, COLOR_BLACK, COLOR_CYAN);
    init_pair(PAIR_WARN, COLOR_MAGENTA, -1);
    sc.color = 1;
  }
  uint64_t next = mono_ms();
  while (!g_stop) {
    uint64_t now = mono_ms();
    if (!v->paused && now >= next) {
      char msg[320];
      ttft_snapshot *s = top_source_take(src, msg, sizeof msg);
      top_model_push(m, s, msg, mono_ms(), (uint64_t)time(NULL));
      next += (uint64_t)(refresh_s * 1000.0);
      now = mono_ms();
      if (next <= now) next = now + (uint64_t)(refresh_s * 1000.0);
    }
    draw(m, v, &sc);
    uint64_t wait = v->paused ? 250 : next > now ? next - now : 0;
    timeout((int)(wait > 250 ? 250 : wait));
    int ch = getch();
    if (ch == ERR || ch == KEY_RESIZE) continue;
    if (v->help) {
      v->help = 0;
      if (ch != 'q') continue;
    }
    switch (ch) {
    case 'q': case 'Q': g_stop = 1; break;
    case 's': v->sort = (v->sort + 1) % TOP_SORTS; break;
    case 'c': case KEY_DOWN: case '\t': pick_step(m, v, 1); break;
    case 'C': case KEY_UP: case KEY_BTAB: pick_step(m, v, -1); break;
    case 'a': v->pick[0] = 0; break;
    case 'w': v->window = v->window == TOP_WIN_REFRESH ? TOP_WIN_LONG : TOP_WIN_REFRESH; break;
    case 'p': case ' ':
      v->paused = !v->paused;
      if (!v->paused) next = mono_ms();
      break;
    case 'h': case '?': v->help = 1; break;
    default: break;
    }
  }
  endwin();
  return 0;
}

/* ------------------------------------------------------------ bench */

static void emit_null(void *ctx, int style, const char *text) {
  (void)style;
  *(size_t *)ctx += strlen(text);
}

static double cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* A registry of 64 classes with a workload in every one (tokens, engine
 * steps, stalls, ids); two encoded snapshots of it a workload apart. One
 * refresh = what the tool does per frame: decode the fetched bytes, cut
 * both windows (two deltas), render the text frame and the JSON object. */
static void bench_record(ttft_registry *r, int classes, uint64_t *t, unsigned round) {
  for (int c = 0; c < classes; c++)
    for (int k = 0; k < 40; k++) {
      ttft_request q;
      ttft_request_init(&q);
      char id[32];
      snprintf(id, sizeof id, "req-%u-%d-%d", round, c, k);
      q.class_id = c + 1;
      q.request_id = id;
      q.prompt_tokens = 100u + (unsigned)k * 10u;
      ttft_seq s = ttft_begin_ex(r, &q, *t);
      ttft_step_info si;
      ttft_step_info_init(&si);
      si.prefill_tokens = k % 3 == 0 ? 100u : 0u;
      si.decode_seqs = 1;
      uint64_t t0 = *t;
      *t += 2000000 + (uint64_t)k * 10000;
      ttft_engine_step(r, &si, t0, *t);
      for (int i = 0; i < 16; i++) {
        /* every 8th request has a gap long enough to stall */
        *t += (k % 8 == 0 && i == 5 ? 900000000 : 20000000) + (uint64_t)((k * 7 + i * 13) % 50) * 100000;
        ttft_token_emitted(r, s, 1, *t);
      }
      ttft_stream_end(r, s, k % 9 == 0 ? TTFT_CANCELLED : TTFT_COMPLETED, *t);
    }
}

static int run_bench(void) {
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.max_classes = 65;
  ttft_registry *r = ttft_registry_new(&cfg);
  if (!r) {
    fprintf(stderr, "ttft-top: cannot create the bench registry\n");
    return 1;
  }
  for (int c = 0; c < 64; c++) {
    char name[32];
    snprintf(name, sizeof name, "class-%02d", c);
    ttft_slo slo;
    ttft_slo_init(&slo);
    slo.ttft_ns = 500000000;
    slo.tpot_ns = 50000000;
    if (ttft_class_add(r, name, &slo) < 0) {
      fprintf(stderr, "ttft-top: cannot add the bench classes\n");
      return 1;
    }
  }
  uint64_t t = ttft_registry_now_ns(r);
  bench_record(r, 64, &t, 0);
  ttft_snapshot *a = ttft_snapshot_take(r);
  bench_record(r, 64, &t, 1);
  ttft_snapshot *b = ttft_snapshot_take(r);
  long na = ttft_snapshot_encode(a, NULL, 0), nb = ttft_snapshot_encode(b, NULL, 0);
  unsigned char *ea = malloc((size_t)na), *eb = malloc((size_t)nb);
  if (!a || !b || !ea || !eb) return 1;
  ttft_snapshot_encode(a, ea, (size_t)na);
  ttft_snapshot_encode(b, eb, (size_t)nb);
  enum { RUNS = 41 };
  double ms[RUNS];
  size_t sink = 0;
  for (int i = 0; i < RUNS; i++) {
    top_model m;
    top_view v = {120, TOP_WIN_REFRESH, TOP_SORT_TTFT, "", 0, 0, 1, 1, 5, "bench"};
    if (top_model_init(&m, 1.0, 60.0) != 0) return 1;
    int err;
    top_model_push(&m, ttft_snapshot_decode(ea, (size_t)na, &err), "", 1000, 1);
    double c0 = cpu_ms();
    top_model_push(&m, ttft_snapshot_decode(eb, (size_t)nb, &err), "", 2000, 2);
    top_render(&m, &v, emit_null, &sink);
    char *j = top_render_json(&m, &v);
    sink += j ? strlen(j) : 0;
    free(j);
    ms[i] = cpu_ms() - c0;
    top_model_free(&m);
  }
  qsort(ms, RUNS, sizeof ms[0], cmp_double);
  printf("{\"bench\":\"ttft-top refresh\",\"classes\":64,\"snapshot_bytes\":%ld,\"runs\":%d,"
         "\"cpu_ms_median\":%.3f,\"cpu_ms_min\":%.3f,\"cpu_ms_max\":%.3f,\"target_ms\":20,"
         "\"rendered_bytes\":%zu}\n",
         nb, RUNS, ms[RUNS / 2], ms[0], ms[RUNS - 1], sink / RUNS);
  free(ea);
  free(eb);
  ttft_snapshot_free(a);
  ttft_snapshot_free(b);
  ttft_registry_free(r);
  return 0;
}

/* ------------------------------------------------------------ main */

static int num_arg(const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi)) return -1;
  *out = v;
  return 0;
}

int main(int argc, char **argv) {
  const char *url = NULL, *dir = NULL;
  int batch = 0, json = 0;
  long frames = 0;
  double refresh_s = 1.0, long_s = 60.0, timeout_ms = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    double x;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--version")) {
      printf("ttft-top (libttft %s)\n", ttft_version_string());
      return 0;
    } else if (!strcmp(a, "--bench-refresh")) {
      return run_bench();
    } else if (!strcmp(a, "-b")) {
      batch = 1;
    } else if (!strcmp(a, "--json")) {
      json = batch = 1;
    } else if (!strcmp(a, "--dir") && more) {
      dir = argv[++i];
    } else if (!strcmp(a, "-n") && more && num_arg(argv[i + 1], 1, 1e12, &x) == 0 && x == floor(x)) {
      frames = (long)x;
      i++;
    } else if (!strcmp(a, "-d") && more && num_arg(argv[i + 1], 0.1, 3600, &x) == 0) {
      refresh_s = x;
      i++;
    } else if (!strcmp(a, "-w") && more && num_arg(argv[i + 1], 0.1, 86400, &x) == 0) {
      long_s = x;
      i++;
    } else if (!strcmp(a, "--timeout") && more && num_arg(argv[i + 1], 10, 600000, &x) == 0) {
      timeout_ms = x;
      i++;
    } else if (a[0] != '-' && !url) {
      url = a;
    } else {
      fprintf(stderr, "ttft-top: bad argument '%s'\n", a);
      usage(stderr);
      return 1;
    }
  }
  if (!url == !dir) {
    fprintf(stderr, "ttft-top: give one source: a URL or --dir DIR\n");
    usage(stderr);
    return 1;
  }
  if (long_s < refresh_s) long_s = refresh_s;
  if (timeout_ms <= 0) timeout_ms = fmin(5000, fmax(200, refresh_s * 1000.0));

  /* numbers in the frames are the C locale's ("0.5"); only the character
   * set comes from the environment (spark lines in UTF-8 or ASCII) */
  setlocale(LC_CTYPE, "");
  const char *cs = nl_langinfo(CODESET);
  int utf8 = cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));

  char msg[320];
  top_source *src = top_source_open(url, dir, (int)timeout_ms, msg, sizeof msg);
  if (!src) {
    fprintf(stderr, "ttft-top: %s\n", msg);
    return 2;
  }
  top_model m;
  if (top_model_init(&m, refresh_s, long_s) != 0) {
    fprintf(stderr, "ttft-top: out of memory\n");
    top_source_close(src);
    return 1;
  }
  if (!batch && !isatty(STDOUT_FILENO)) batch = 1; /* as top does: a pipe gets frames */
  top_view v = {120, TOP_WIN_REFRESH, TOP_SORT_NAME, "", 0, 0, utf8 && !batch, batch, batch ? 10 : 5,
                top_source_name(src)};
  const char *cols = getenv("COLUMNS");
  if (batch && cols && atoi(cols) >= 40) v.width = atoi(cols);

  /* SIGINT/SIGTERM end the loop (the terminal is restored by endwin);
   * installed before initscr, so ncurses keeps them and handles SIGTSTP
   * and SIGWINCH itself */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  int rc = batch ? run_batch(src, &m, &v, frames, json, refresh_s)
                 : run_terminal(src, &m, &v, refresh_s);
  top_model_free(&m);
  top_source_close(src);
  return rc;
}
