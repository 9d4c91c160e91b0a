/*
 * ttft-report — read encoded libttft snapshots, merge them, and print them,
 * compare two of them, or draw them. docs/ttft-report.md is the manual.
 *
 *   ttft-report [--format text|json|prometheus|openmetrics|prometheus_protobuf] [--svg OUT] FILE...
 *   ttft-report --diff OLD NEW [--threshold PCT] [--fail-on-regression] [--svg OUT]
 *   ttft-report --delta OLDER NEWER [--format ...] [--svg OUT]
 *
 * FILE is a path or '-' (stdin) holding binary encodings (one or several
 * back to back) or text with base64 encodings (one per line, anywhere in
 * the line: a log file works). Exit: 0 ok, 1 usage, 2 bad input or I/O,
 * 3 regressions found under --fail-on-regression.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "svg.h"
#include "ttft.h"

#define EXIT_USAGE 1
#define EXIT_INPUT 2
#define EXIT_REGRESSION 3

static const char *g_prog = "ttft-report";

static void usage(FILE *f) {
  fprintf(f,
          "usage: %s [options] FILE...            merge snapshots and print them\n"
          "       %s --diff OLD NEW [options]     compare two snapshots metric by metric\n"
          "       %s --delta OLDER NEWER [options] what one process did between two snapshots\n"
          "\n"
          "FILE is a snapshot written by ttft_snapshot_encode (binary, several may be\n"
          "concatenated) or text holding ttft_snapshot_encode_base64 lines; '-' is stdin.\n"
          "Several FILEs (or snapshots in one FILE) are merged: fleet percentiles come\n"
          "from merged histogram counts, never from averaged percentiles.\n"
          "\n"
          "options:\n"
          "  --format F             text (default), json, prometheus, openmetrics, or\n"
          "                         prometheus_protobuf (binary: redirect it to a file)\n"
          "  --svg OUT              also draw latency CDFs (TTFT, TPOT, ITL) into OUT\n"
          "                         ('-' = stdout, replacing the printed report)\n"
          "  --threshold PCT        --diff: flag changes worse than PCT percent (default 5)\n"
          "  --fail-on-regression   --diff: exit 3 when anything was flagged\n"
          "  -h, --help             this text\n"
          "\n"
          "exit status: 0 ok, 1 usage, 2 unreadable or corrupt input, 3 regression (see above)\n",
          g_prog, g_prog, g_prog);
}

static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", g_prog);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry '%s --help'.\n", g_prog);
  return EXIT_USAGE;
}

/* ------------------------------------------------------------- input */
static unsigned char *read_all(const char *path, size_t *len) {
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap);
  while (buf) {
    if (n == cap) {
      unsigned char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) {
        free(buf);
        buf = NULL;
      }
      break;
    }
  }
  if (f != stdin) fclose(f);
  *len = n;
  return buf;
}

static int is_b64(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '/' || c == '=';
}

/* Fold b into *acc (merging when *acc already holds one). */
static int accumulate(ttft_snapshot **acc, ttft_snapshot *b) {
  if (!*acc) {
    *acc = b;
    return TTFT_OK;
  }
  int err = TTFT_OK;
  ttft_snapshot *m = ttft_snapshot_merge(*acc, b, &err);
  ttft_snapshot_free(b);
  if (!m) return err;
  ttft_snapshot_free(*acc);
  *acc = m;
  return TTFT_OK;
}

/* Every snapshot in buf, merged into *out. Returns TTFT_OK or an error
 * code; *what says what went wrong in words when it wasn't the codec. */
static int parse_input(const unsigned char *buf, size_t len, ttft_snapshot **out, const char **what) {
  ttft_snapshot *acc = NULL;
  int err = TTFT_OK;
  *what = NULL;
  if (len >= 4 && memcmp(buf, "TTFS", 4) == 0) {
    /* binary, self-delimiting: the length field at offset 8 */
    size_t o = 0;
    while (o < len && err == TTFT_OK) {
      size_t rest = len - o, n = rest;
      if (rest >= 12 && memcmp(buf + o, "TTFS", 4) == 0) {
        size_t field = (size_t)buf[o + 8] | (size_t)buf[o + 9] << 8 | (size_t)buf[o + 10] << 16 |
                       (size_t)buf[o + 11] << 24;
        if (field >= 16 && field <= rest) n = field;
      }
      ttft_snapshot *s = ttft_snapshot_decode(buf + o, n, &err);
      if (s) err = accumulate(&acc, s);
      o += n;
    }
  } else {
    /* text: one base64 encoding per line, wherever it starts */
    size_t i = 0;
    while (i < len && err == TTFT_OK) {
      size_t eol = i;
      while (eol < len && buf[eol] != '\n') eol++;
      const unsigned char *hit = NULL;
      for (size_t k = i; k + 5 <= eol; k++)
        if (memcmp(buf + k, "VFRGU", 5) == 0) {
          hit = buf + k;
          break;
        }
      if (hit) {
        size_t n = 0;
        while (hit + n < buf + eol && is_b64(hit[n])) n++;
        ttft_snapshot *s = ttft_snapshot_decode_base64((const char *)hit, n, &err);
        if (s) err = accumulate(&acc, s);
      }
      i = eol + 1;
    }
    if (err == TTFT_OK && !acc) {
      *what = "no snapshot found (neither binary \"TTFS\" nor a base64 \"VFRGU...\" line)";
      err = TTFT_ECORRUPT;
    }
  }
  if (err != TTFT_OK) {
    ttft_snapshot_free(acc);
    acc = NULL;
  }
  *out = acc;
  return err;
}

static int g_stdin_used;

/* Load one FILE; on failure print why (naming the file) and return NULL. */
static ttft_snapshot *load(const char *path) {
  const char *name = strcmp(path, "-") == 0 ? "<stdin>" : path;
  if (strcmp(path, "-") == 0) {
    if (g_stdin_used) {
      fprintf(stderr, "%s: %s: standard input can be read only once\n", g_prog, name);
      return NULL;
    }
    g_stdin_used = 1;
  }
  size_t len = 0;
  errno = 0;
  unsigned char *buf = read_all(path, &len);
  if (!buf) {
    fprintf(stderr, "%s: %s: %s\n", g_prog, name, errno ? strerror(errno) : "read failed");
    return NULL;
  }
  ttft_snapshot *s = NULL;
  const char *what = NULL;
  int err = parse_input(buf, len, &s, &what);
  free(buf);
  if (!s) {
    if (what) fprintf(stderr, "%s: %s: %s\n", g_prog, name, what);
    else fprintf(stderr, "%s: %s: %s (%s)\n", g_prog, name, ttft_strerror(err), ttft_err_name(err));
  }
  return s;
}

/* ----------------------------------------------------------- printing */
static int print_format(const ttft_snapshot *s, ttft_format f) {
  if (f == TTFT_FORMAT_PROMETHEUS_PROTOBUF && isatty(fileno(stdout))) {
    fprintf(stderr, "%s: prometheus_protobuf is binary; redirect standard output to a file\n", g_prog);
    return EXIT_USAGE;
  }
  long n = ttft_snapshot_format(s, f, NULL, 0);
  if (n < 0) {
    fprintf(stderr, "%s: formatting failed: %s\n", g_prog, ttft_strerror((int)n));
    return EXIT_INPUT;
  }
  char *buf = malloc((size_t)n + 1);
  if (!buf) {
    fprintf(stderr, "%s: out of memory\n", g_prog);
    return EXIT_INPUT;
  }
  long m = ttft_snapshot_format(s, f, buf, (size_t)n + 1);
  if (m >= 0) fwrite(buf, 1, (size_t)(m < n ? m : n), stdout);
  free(buf);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "%s: writing the report failed\n", g_prog);
    return EXIT_INPUT;
  }
  return 0;
}

static int write_svg(const char *out, const ttft_snapshot *s, const char *s_name,
                     const ttft_snapshot *old, const char *old_name) {
  int to_stdout = strcmp(out, "-") == 0;
  FILE *f = to_stdout ? stdout : fopen(out, "w");
  if (!f) {
    fprintf(stderr, "%s: %s: %s\n", g_prog, out, strerror(errno));
    return EXIT_INPUT;
  }
  int rc = report_svg(f, s, s_name, old, old_name);
  if (to_stdout) rc |= fflush(f) != 0 ? -1 : 0;
  else rc |= fclose(f) != 0 ? -1 : 0;
  if (rc) {
    fprintf(stderr, "%s: %s: writing the SVG failed\n", g_prog, out);
    return EXIT_INPUT;
  }
  return 0;
}

/* --------------------------------------------------------------- diff */
/* d in ns as "850 ns", "12.3 us", "120 ms", "1.23 s" */
static void fmt_dur(char *out, size_t cap, double ns) {
  double a = fabs(ns);
  const char *unit = "ns";
  double v = ns;
  if (a >= 1e9) unit = "s", v = ns / 1e9;
  else if (a >= 1e6) unit = "ms", v = ns / 1e6;
  else if (a >= 1e3) unit = "us", v = ns / 1e3;
  double av = fabs(v);
  if (a < 1e3) snprintf(out, cap, "%.0f %s", v, unit);
  else snprintf(out, cap, av < 10 ? "%.2f %s" : av < 100 ? "%.1f %s" : "%.0f %s", v, unit);
}

static void fmt_val(char *out, size_t cap, double v, int is_time) {
  if (is_time) fmt_dur(out, cap, v);
  else if (v == floor(v) && fabs(v) < 1e15) snprintf(out, cap, "%.0f", v);
  else snprintf(out, cap, "%.2f", v);
}

typedef struct diff_ctx {
  double threshold; /* fraction, 0.05 = 5 % */
  int regressions;
  char flagged[2048];
} diff_ctx;

static void flag(diff_ctx *d, const char *what) {
  d->regressions++;
  size_t n = strlen(d->flagged);
  snprintf(d->flagged + n, sizeof d->flagged - n, "%s%s", n ? ", " : "", what);
}

/* One row: old, new, change, relative change, marker.
 * worse_if: +1 higher is worse, -1 lower is worse, 0 no direction. */
static void diff_row(diff_ctx *d, const char *metric, const char *stat, double o, double n,
                     int is_time, int worse_if, int have_old, int have_new) {
  char so[32] = "-", sn[32] = "-", sc[48] = "", sr[32] = "";
  if (have_old) fmt_val(so, sizeof so, o, is_time);
  if (have_new) fmt_val(sn, sizeof sn, n, is_time);
  const char *mark = "";
  if (have_old && have_new) {
    double ch = n - o;
    char tmp[32];
    fmt_val(tmp, sizeof tmp, ch, is_time);
    snprintf(sc, sizeof sc, "%s%s", ch > 0 ? "+" : "", tmp);
    if (o != 0) {
      double rel = ch / fabs(o);
      snprintf(sr, sizeof sr, "%+.1f %%", 100.0 * rel);
      if (worse_if != 0 && rel * worse_if > d->threshold) {
        mark = "  << REGRESSION";
        char what[128];
        snprintf(what, sizeof what, "%s %s", metric, stat);
        flag(d, what);
      } else if (worse_if != 0 && -rel * worse_if > d->threshold) {
        mark = "  (better)";
      }
    } else {
      snprintf(sr, sizeof sr, "%s", n == 0 ? "0.0 %" : "new");
    }
  }
  printf("  %-16s %-13s %12s %12s %12s %9s%s\n", metric, stat, so, sn, sc, sr, mark);
}

/* A rate that is bad when it rises (errors, stalls, SLO misses): flagged
 * when it rises by more than the threshold relative AND by at least 0.1
 * percentage point, so 0 -> 1 in 10^6 is not a regression. */
static void diff_rate(diff_ctx *d, const char *scope, const char *name, double o, double n,
                      int have_old, int have_new, int invert) {
  char so[32] = "-", sn[32] = "-", sc[32] = "";
  if (have_old) snprintf(so, sizeof so, "%.2f %%", 100.0 * o);
  if (have_new) snprintf(sn, sizeof sn, "%.2f %%", 100.0 * n);
  const char *mark = "";
  if (have_old && have_new) {
    snprintf(sc, sizeof sc, "%+.2f pp", 100.0 * (n - o));
    double bo = invert ? 1.0 - o : o, bn = invert ? 1.0 - n : n; /* the bad share */
    if (bn - bo >= 0.001 && bn - bo > bo * d->threshold) {
      mark = "  << REGRESSION";
      char what[128];
      snprintf(what, sizeof what, "%s %s", scope, name);
      flag(d, what);
    } else if (bo - bn >= 0.001 && bo - bn > bo * d->threshold) {
      mark = "  (better)";
    }
  }
  printf("  %-16s %-13s %12s %12s %12s%s\n", scope, name, so, sn, sc, mark);
}

static double ratio(uint64_t a, uint64_t b) { return b ? (double)a / (double)b : 0.0; }

static uint64_t ended(const ttft_snapshot *s, int c) {
  return ttft_snapshot_class_counter(s, c, TTFT_COUNTER_COMPLETED) +
         ttft_snapshot_class_counter(s, c, TTFT_COUNTER_CANCELLED) +
         ttft_snapshot_class_counter(s, c, TTFT_COUNTER_ERRORS);
}

static void diff_rates(diff_ctx *d, const ttft_snapshot *o, int oc, const ttft_snapshot *n, int nc,
                       const char *scope) {
  int ho = o && oc != -2, hn = n && nc != -2;
  uint64_t eo = ho ? ended(o, oc) : 0, en = hn ? ended(n, nc) : 0;
  double ao = ho ? ttft_snapshot_attainment(o, oc) : -1, an = hn ? ttft_snapshot_attainment(n, nc) : -1;
  diff_rate(d, scope, "attainment", ao, an, ao >= 0, an >= 0, 1);
#define RATE(name, ctr, den_o, den_n)                                                        \
  diff_rate(d, scope, name, ho ? ratio(ttft_snapshot_class_counter(o, oc, ctr), den_o) : 0,  \
            hn ? ratio(ttft_snapshot_class_counter(n, nc, ctr), den_n) : 0, ho && (den_o) > 0, \
            hn && (den_n) > 0, 0)
  RATE("error_rate", TTFT_COUNTER_ERRORS, eo, en);
  RATE("abandon_rate", TTFT_COUNTER_ABANDONED, eo, en);
  RATE("stalled_share", TTFT_COUNTER_STALLED_SEQS, eo, en);
  uint64_t go = ho ? ttft_snapshot_class_count(o, oc, TTFT_METRIC_ITL) : 0;
  uint64_t gn = hn ? ttft_snapshot_class_count(n, nc, TTFT_METRIC_ITL) : 0;
  RATE("stalls/gap", TTFT_COUNTER_STALLS, go, gn);
#undef RATE
}

static int class_by_name(const ttft_snapshot *s, const char *name) {
  for (int i = 0; i < ttft_snapshot_classes(s); i++)
    if (strcmp(ttft_snapshot_class_name(s, i), name) == 0) return i;
  return -2; /* not TTFT_CLASS_ALL (-1) */
}

static const char *lbl(const ttft_snapshot *s, const char *key) {
  const char *v = ttft_snapshot_label(s, key);
  return v ? v : "";
}

static void describe(const char *tag, const char *path, const ttft_snapshot *s) {
  uint64_t t0 = 0, t1 = 0;
  ttft_snapshot_interval(s, &t0, &t1);
  const char *model = ttft_snapshot_label(s, "model");
  printf("%s %s: %llu streams ended over %.1f s, model \"%s\", start_point=%s, token_point=%s\n",
         tag, path, (unsigned long long)ended(s, TTFT_CLASS_ALL), (double)(t1 - t0) / 1e9,
         model ? model : "", lbl(s, "start_point"), lbl(s, "token_point"));
}

static int run_diff(const ttft_snapshot *o, const char *opath, const ttft_snapshot *n,
                    const char *npath, double threshold) {
  diff_ctx d;
  memset(&d, 0, sizeof d);
  d.threshold = threshold;
  printf("ttft-report diff (flagged: worse by more than %.1f %%)\n", 100.0 * threshold);
  describe("  old", opath, o);
  describe("  new", npath, n);
  static const char *keys[] = {"start_point", "token_point"};
  for (int i = 0; i < 2; i++)
    if (strcmp(lbl(o, keys[i]), lbl(n, keys[i])) != 0)
      printf("  WARNING: %s differs (%s vs %s): the clocks measure different things and "
             "the latencies below are not comparable\n",
             keys[i], lbl(o, keys[i]), lbl(n, keys[i]));

  printf("\n  %-16s %-13s %12s %12s %12s %9s\n", "metric", "stat", "old", "new", "change", "rel");
  static const struct {
    const char *name;
    double q;
  } stats[] = {{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}, {"p99.9", 0.999}};
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
    uint64_t co = ttft_snapshot_count(o, (ttft_metric)m), cn = ttft_snapshot_count(n, (ttft_metric)m);
    if (!co && !cn) continue;
    const char *name = ttft_metric_name((ttft_metric)m);
    int is_time = m != TTFT_METRIC_OUTPUT_TOKENS;
    /* longer is worse for every duration except how long abandoning
     * users waited (no direction), and output length has none either */
    int worse = is_time && m != TTFT_METRIC_ABANDONED_WAIT ? 1 : 0;
    diff_row(&d, name, "count", (double)co, (double)cn, 0, 0, 1, 1);
    for (size_t k = 0; k < sizeof stats / sizeof stats[0]; k++)
      diff_row(&d, name, stats[k].name, (double)ttft_snapshot_quantile(o, (ttft_metric)m, stats[k].q),
               (double)ttft_snapshot_quantile(n, (ttft_metric)m, stats[k].q), is_time, worse, co > 0,
               cn > 0);
    diff_row(&d, name, "mean", ttft_snapshot_mean(o, (ttft_metric)m),
             ttft_snapshot_mean(n, (ttft_metric)m), is_time, worse, co > 0, cn > 0);
  }

  printf("\n  %-16s %-13s %12s %12s %12s\n", "rates", "", "old", "new", "change");
  diff_rates(&d, o, TTFT_CLASS_ALL, n, TTFT_CLASS_ALL, "all");

  /* per class, matched by name: the union, old's order first */
  printf("\n  %-16s %-13s %12s %12s %12s %9s\n", "class", "counter", "old", "new", "change", "rel");
  int total = ttft_snapshot_classes(o) + ttft_snapshot_classes(n);
  for (int k = 0; k < total; k++) {
    const char *cname = k < ttft_snapshot_classes(o) ? ttft_snapshot_class_name(o, k)
                                                    : ttft_snapshot_class_name(n, k - ttft_snapshot_classes(o));
    if (k >= ttft_snapshot_classes(o) && class_by_name(o, cname) != -2) continue;
    int oc = class_by_name(o, cname), nc = class_by_name(n, cname);
    int ho = oc != -2, hn = nc != -2;
    if ((!ho || !ttft_snapshot_class_counter(o, oc, TTFT_COUNTER_BEGUN)) &&
        (!hn || !ttft_snapshot_class_counter(n, nc, TTFT_COUNTER_BEGUN)))
      continue; /* a class nobody used */
    printf("\n");
    for (int c = 0; c < TTFT_COUNTER_COUNT_; c++) {
      uint64_t vo = ho ? ttft_snapshot_class_counter(o, oc, (ttft_counter)c) : 0;
      uint64_t vn = hn ? ttft_snapshot_class_counter(n, nc, (ttft_counter)c) : 0;
      if (!vo && !vn) continue;
      diff_row(&d, cname, ttft_counter_name((ttft_counter)c), (double)vo, (double)vn, 0, 0, ho, hn);
    }
    for (int m = TTFT_METRIC_TTFT; m <= TTFT_METRIC_TPOT; m++) {
      uint64_t co = ho ? ttft_snapshot_class_count(o, oc, (ttft_metric)m) : 0;
      uint64_t cn = hn ? ttft_snapshot_class_count(n, nc, (ttft_metric)m) : 0;
      char stat[32];
      snprintf(stat, sizeof stat, "%s_p99", ttft_metric_name((ttft_metric)m));
      char scope[96];
      snprintf(scope, sizeof scope, "%s", cname);
      if (co || cn)
        diff_row(&d, scope, stat, (double)(co ? ttft_snapshot_class_quantile(o, oc, (ttft_metric)m, 0.99) : 0),
                 (double)(cn ? ttft_snapshot_class_quantile(n, nc, (ttft_metric)m, 0.99) : 0), 1, 1,
                 co > 0, cn > 0);
    }
    diff_rates(&d, o, oc, n, nc, cname);
  }

  if (d.regressions)
    printf("\n%d regression%s worse than %.1f %%: %s\n", d.regressions, d.regressions == 1 ? "" : "s",
           100.0 * threshold, d.flagged);
  else printf("\nno regressions worse than %.1f %%\n", 100.0 * threshold);
  fflush(stdout);
  return d.regressions;
}

/* --------------------------------------------------------------- main */
static int parse_format(const char *s, ttft_format *out) {
  for (int f = 0; f < TTFT_FORMAT_COUNT_; f++)
    if (ttft_format_name((ttft_format)f) && strcmp(s, ttft_format_name((ttft_format)f)) == 0) {
      *out = (ttft_format)f;
      return 1;
    }
  static const char *names[] = {"text", "json", "prometheus", "openmetrics"};
  for (int f = 0; f < 4; f++)
    if (strcmp(s, names[f]) == 0) {
      *out = (ttft_format)f;
      return 1;
    }
  return 0;
}

static int run(int argc, char **argv, const char **files);

int main(int argc, char **argv) {
  const char **files = calloc((size_t)argc + 1, sizeof *files);
  if (!files) return EXIT_INPUT;
  int rc = run(argc, argv, files); /* run() returns from many places; files is freed here */
  free(files);
  return rc;
}

static int run(int argc, char **argv, const char **files) {
  ttft_format format = TTFT_FORMAT_TEXT;
  const char *svg = NULL, *diff_old = NULL, *diff_new = NULL, *delta_old = NULL, *delta_new = NULL;
  double threshold = 0.05;
  int fail_on_regression = 0, format_given = 0;
  int nfiles = 0, only_files = 0;

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (only_files || a[0] != '-' || strcmp(a, "-") == 0) {
      files[nfiles++] = a;
    } else if (!strcmp(a, "--")) {
      only_files = 1;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--format") || !strcmp(a, "-f")) {
      if (++i >= argc) return usage_error("%s needs an argument", a);
      if (!parse_format(argv[i], &format)) return usage_error("unknown format '%s'", argv[i]);
      format_given = 1;
    } else if (!strcmp(a, "--svg")) {
      if (++i >= argc) return usage_error("--svg needs a file name");
      svg = argv[i];
    } else if (!strcmp(a, "--threshold")) {
      if (++i >= argc) return usage_error("--threshold needs a percentage");
      char *end = NULL;
      double t = strtod(argv[i], &end);
      if (end && *end == '%') end++;
      if (!end || end == argv[i] || *end || !(t >= 0 && t < 1e6))
        return usage_error("bad --threshold '%s' (a percentage such as 5 or 2.5)", argv[i]);
      threshold = t / 100.0;
    } else if (!strcmp(a, "--fail-on-regression")) {
      fail_on_regression = 1;
    } else if (!strcmp(a, "--diff") || !strcmp(a, "--delta")) {
      if (i + 2 >= argc) return usage_error("%s needs two snapshot files", a);
      if (diff_old || delta_old) return usage_error("only one of --diff / --delta, once");
      if (!strcmp(a, "--diff")) diff_old = argv[i + 1], diff_new = argv[i + 2];
      else delta_old = argv[i + 1], delta_new = argv[i + 2];
      i += 2;
    } else {
      return usage_error("unknown option '%s'", a);
    }
  }
  if ((diff_old || delta_old) && nfiles)
    return usage_error("--diff and --delta take exactly two files and no others");
  if (!diff_old && !delta_old && nfiles == 0) return usage_error("no snapshot files given");
  if (diff_old && format_given) return usage_error("--diff prints its own table; --format does not apply");

  int rc = 0;
  ttft_snapshot *s = NULL, *old = NULL;
  if (diff_old) {
    old = load(diff_old);
    s = old ? load(diff_new) : NULL;
    if (!s) rc = EXIT_INPUT;
    else {
      int regressions = (svg && !strcmp(svg, "-")) ? 0 : run_diff(old, diff_old, s, diff_new, threshold);
      if (svg) rc = write_svg(svg, s, diff_new, old, diff_old);
      if (!rc && fail_on_regression && regressions) rc = EXIT_REGRESSION;
    }
  } else if (delta_old) {
    ttft_snapshot *a = load(delta_old), *b = a ? load(delta_new) : NULL;
    if (b) {
      int err = TTFT_OK;
      s = ttft_snapshot_delta(b, a, &err);
      if (!s)
        fprintf(stderr, "%s: %s, %s: %s (two snapshots of one process, older first)\n", g_prog,
                delta_old, delta_new, ttft_strerror(err));
    }
    ttft_snapshot_free(a);
    ttft_snapshot_free(b);
    if (!s) rc = EXIT_INPUT;
  } else {
    for (int i = 0; i < nfiles && rc == 0; i++) {
      ttft_snapshot *one = load(files[i]);
      if (!one) rc = EXIT_INPUT;
      else if (accumulate(&s, one) != TTFT_OK) {
        fprintf(stderr, "%s: %s: merge failed\n", g_prog, files[i]);
        rc = EXIT_INPUT;
      }
    }
  }
  if (!rc && !diff_old) {
    if (!svg || strcmp(svg, "-") != 0) rc = print_format(s, format);
    if (!rc && svg) rc = write_svg(svg, s, nfiles == 1 ? files[0] : "merged", NULL, NULL);
  }
  ttft_snapshot_free(s);
  ttft_snapshot_free(old);
  return rc;
}
