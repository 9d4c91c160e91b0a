/*
 * ttft-report — read encoded libttft snapshots, merge them, and print them,
 * compare two of them, or draw them. docs/ttft-report.md is the manual.
 *
 *   ttft-report [--format text|json|prometheus|openmetrics|prometheus_protobuf] [--svg OUT] FILE...
 *   ttft-report --diff OLD NEW [--threshold PCT] [--confidence PCT] [--fail-on-regression] [--svg OUT]
 *   ttft-report --delta OLDER NEWER [--format ...] [--svg OUT]
 *
 * FILE is a path or '-' (stdin) holding binary encodings (one or several
 * back to back) or text with base64 encodings (one per line, anywhere in
 * the line: a log file works). Exit: 0 ok, 1 usage, 2 bad input or I/O,
 * 3 regressions found under --fail-on-regression. A regression is a change
 * beyond the threshold whose confidence intervals do not overlap.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/snapshot.h"
#include "report_model.h"
#include "svg.h"
#include "ttft.h"

#define EXIT_USAGE 1
#define EXIT_INPUT 2
#define EXIT_REGRESSION 3

static const char *g_prog = "ttft-report";
static int g_tail_axis = 1; /* --cdf-axis: tail (1, default) or linear */

static void usage(FILE *f) {
  fprintf(f,
          "usage: %s [options] FILE...            merge snapshots and print them\n"
          "       %s --diff OLD NEW [options]     compare two snapshots metric by metric\n"
          "       %s --delta OLDER NEWER [options] what one process did between two snapshots\n"
          "       %s --capacity RUN... [--class NAME] [--fluid-target PCT]\n"
          "                                        capacity from a sweep of runs at rising load\n"
          "\n"
          "FILE is a snapshot written by ttft_snapshot_encode (binary, several may be\n"
          "concatenated) or text holding ttft_snapshot_encode_base64 lines; '-' is stdin.\n"
          "Several FILEs (or snapshots in one FILE) are merged: fleet percentiles come\n"
          "from merged histogram counts, never from averaged percentiles. The same\n"
          "snapshot given twice is merged once (with a warning); rates are per second\n"
          "of the time the snapshots cover.\n"
          "\n"
          "options:\n"
          "  --format F             text (default), json, prometheus, openmetrics, or\n"
          "                         prometheus_protobuf (binary: redirect it to a file)\n"
          "  --svg OUT              also draw latency CDFs (TTFT, TPOT, ITL, E2E) into OUT\n"
          "                         ('-' = stdout, replacing the printed report)\n"
          "  --cdf-axis tail|linear the SVG's vertical axis: tail (default) spreads\n"
          "                         50/90/99/99.9 %% evenly; linear is plain 0..100 %%\n"
          "  --threshold PCT        --diff: flag changes worse than PCT percent (default 5)\n"
          "  --confidence PCT       --diff: confidence of the intervals (default 99); a\n"
          "                         change is flagged only when the intervals are apart\n"
          "  --fail-on-regression   --diff: exit 3 when anything was flagged\n"
          "  --capacity             each FILE is one run at one load: print token rate,\n"
          "                         TPOT p90 and fluid fraction per run, the fluid token\n"
          "                         generation rate and the TPOT p90 capacity\n"
          "  --class NAME           --capacity: the class judged (default: the one class\n"
          "                         that judged fluidity)\n"
          "  --fluid-target PCT     --capacity: the share of judged requests that must\n"
          "                         stay fluid (default 99)\n"
          "  -h, --help             this text\n"
          "  --version              the version of ttft-report (and of the libttft it holds)\n"
          "\n"
          "exit status: 0 ok, 1 usage, 2 unreadable or corrupt input or unwritable output,\n"
          "3 regression (see above)\n",
          g_prog, g_prog, g_prog, g_prog);
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

/* Everything read for one merge (all FILEs, or one side of --diff): the
 * merge so far, and what is needed to spot a snapshot given twice and to
 * know how much time the inputs cover. */
typedef struct seen {
  uint64_t registry_id, t0, t1; /* registry 0: a merge or a delta */
  uint64_t hash, len;           /* of the encoded bytes (binary or base64 text) */
  const char *file;
  unsigned index;               /* 1-based position in its file */
} seen;

typedef struct input {
  ttft_snapshot *acc; /* the merge of every snapshot kept */
  seen *seen;
  size_t nseen, cap;
  unsigned skipped;   /* duplicates left out */
} input;

static uint64_t fnv1a(const unsigned char *p, size_t n) {
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * UINT64_C(0x100000001b3);
  return h;
}

static const char *display_name(const char *path) { return strcmp(path, "-") == 0 ? "<stdin>" : path; }

/* Fold b into in->acc (merging when it already holds one). */
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

/* One decoded snapshot (raw: the bytes it was decoded from). The same
 * snapshot twice — the same registry and interval, or the very same
 * bytes — is reported and left out: merging it would count every
 * observation twice. Two snapshots of one registry whose intervals overlap
 * otherwise (cumulative snapshots taken at different times) are merged
 * with a warning, because the overlap is counted twice. */
static int add_snapshot(input *in, ttft_snapshot *s, const unsigned char *raw, size_t rawlen,
                        const char *file, unsigned index) {
  seen me = {s->registry_id, s->t_start_ns, s->t_end_ns, fnv1a(raw, rawlen), rawlen, file, index};
  for (size_t i = 0; i < in->nseen; i++) {
    const seen *o = &in->seen[i];
    int same_bytes = o->hash == me.hash && o->len == me.len;
    int same_registry = me.registry_id != 0 && o->registry_id == me.registry_id;
    if (same_bytes || (same_registry && o->t0 == me.t0 && o->t1 == me.t1)) {
      fprintf(stderr,
              "%s: warning: %s (snapshot %u) is the same snapshot as %s (snapshot %u): same "
              "registry and interval; skipped, merging it would count everything twice\n",
              g_prog, display_name(file), index, display_name(o->file), o->index);
      in->skipped++;
      ttft_snapshot_free(s);
      return TTFT_OK;
    }
    if (same_registry && me.t0 < o->t1 && o->t0 < me.t1) {
      fprintf(stderr,
              "%s: warning: %s (snapshot %u) and %s (snapshot %u) are snapshots of one registry "
              "whose intervals overlap (cumulative snapshots?): the overlap is counted twice; "
              "--delta OLDER NEWER gives what happened between them\n",
              g_prog, display_name(o->file), o->index, display_name(file), index);
    }
  }
  if (in->nseen == in->cap) {
    size_t cap = in->cap ? in->cap * 2 : 16;
    seen *ns = realloc(in->seen, cap * sizeof *ns);
    if (!ns) {
      ttft_snapshot_free(s);
      return TTFT_ENOMEM;
    }
    in->seen = ns;
    in->cap = cap;
  }
  in->seen[in->nseen++] = me;
  return accumulate(&in->acc, s);
}

/* Every snapshot in buf, added to in. Returns TTFT_OK or an error code;
 * *what says what went wrong in words when it wasn't the codec. */
static int parse_input(input *in, const unsigned char *buf, size_t len, const char *file,
                       const char **what) {
  int err = TTFT_OK;
  unsigned found = 0;
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
      if (s) err = add_snapshot(in, s, buf + o, n, file, ++found);
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
        if (s) err = add_snapshot(in, s, hit, n, file, ++found);
      }
      i = eol + 1;
    }
    if (err == TTFT_OK && !found) {
      *what = "no snapshot found (neither binary \"TTFS\" nor a base64 \"VFRGU...\" line)";
      err = TTFT_ECORRUPT;
    }
  }
  return err;
}

static int g_stdin_used;

/* Read one FILE into in; on failure print why (naming the file) and
 * return nonzero. */
static int load(input *in, const char *path) {
  const char *name = display_name(path);
  if (strcmp(path, "-") == 0) {
    if (g_stdin_used) {
      fprintf(stderr, "%s: %s: standard input can be read only once\n", g_prog, name);
      return -1;
    }
    g_stdin_used = 1;
  }
  size_t len = 0;
  errno = 0;
  unsigned char *buf = read_all(path, &len);
  if (!buf) {
    fprintf(stderr, "%s: %s: %s\n", g_prog, name, errno ? strerror(errno) : "read failed");
    return -1;
  }
  const char *what = NULL;
  int err = parse_input(in, buf, len, path, &what);
  free(buf);
  if (err != TTFT_OK) {
    if (what) fprintf(stderr, "%s: %s: %s\n", g_prog, name, what);
    else if (err == TTFT_ERANGE || err == TTFT_ENOMEM)
      fprintf(stderr, "%s: %s: merge failed: %s (%s)\n", g_prog, name, ttft_strerror(err), ttft_err_name(err));
    else fprintf(stderr, "%s: %s: %s (%s)\n", g_prog, name, ttft_strerror(err), ttft_err_name(err));
    return -1;
  }
  return 0;
}

static int cmp_seen_t0(const void *a, const void *b) {
  const seen *x = a, *y = b;
  return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/* The time the kept snapshots cover: the length of the union of their
 * intervals. Windows that do not overlap add up (two one-minute deltas an
 * hour apart cover two minutes, not 61); snapshots of the same window
 * (replicas on one host) count it once. The merge's interval is set to
 * end at the latest end and last that long, so every rate (tokens/s,
 * goodput) is per second covered, not per second of the span between the
 * windows. Returns the covered and spanned nanoseconds. */
static void fix_interval(input *in, uint64_t *covered, uint64_t *span) {
  *covered = *span = 0;
  if (!in->acc || in->nseen == 0) return;
  qsort(in->seen, in->nseen, sizeof *in->seen, cmp_seen_t0);
  uint64_t total = 0, cur0 = in->seen[0].t0, cur1 = in->seen[0].t1;
  for (size_t i = 1; i < in->nseen; i++) {
    const seen *x = &in->seen[i];
    if (x->t0 > cur1) {
      total += cur1 - cur0;
      cur0 = x->t0;
      cur1 = x->t1;
    } else if (x->t1 > cur1) {
      cur1 = x->t1;
    }
  }
  total += cur1 - cur0;
  ttft_snapshot *s = in->acc;
  *span = s->t_end_ns - s->t_start_ns;
  *covered = total < *span ? total : *span;
  /* the tool's own merged snapshot: its start moves so the interval lasts
   * as long as the time covered (the end, the latest moment, stays) */
  s->t_start_ns = s->t_end_ns - *covered;
}

static void input_free(input *in) {
  ttft_snapshot_free(in->acc);
  free(in->seen);
  memset(in, 0, sizeof *in);
}

/* Load FILEs into in and fix its interval; prints a note when the inputs
 * cover less time than they span. 0, or nonzero after printing why. */
static int load_all(input *in, const char *const *files, int nfiles) {
  for (int i = 0; i < nfiles; i++)
    if (load(in, files[i])) return -1;
  uint64_t covered = 0, span = 0;
  fix_interval(in, &covered, &span);
  if (covered < span)
    fprintf(stderr,
            "%s: note: the %zu snapshots cover %.3f s of a %.3f s span (windows that do not "
            "overlap): rates are per second covered\n",
            g_prog, in->nseen, (double)covered / 1e9, (double)span / 1e9);
  return 0;
}

/* ----------------------------------------------------------- printing */
static int print_format(const ttft_snapshot *s, ttft_format f) {
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

/* Does path hold a snapshot already (binary or a base64 line)? Then --svg
 * was probably handed an input by mistake: refuse to overwrite it. */
static int looks_like_snapshot(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  char head[4096];
  size_t n = fread(head, 1, sizeof head, f);
  fclose(f);
  if (n >= 4 && memcmp(head, "TTFS", 4) == 0) return 1;
  for (size_t k = 0; k + 5 <= n; k++)
    if (memcmp(head + k, "VFRGU", 5) == 0) return 1;
  return 0;
}

/* Open the SVG output before anything is printed, so that a path that
 * cannot be written fails the run up front. */
static FILE *open_svg(const char *out) {
  if (strcmp(out, "-") == 0) return stdout;
  if (looks_like_snapshot(out)) {
    fprintf(stderr,
            "%s: --svg %s: that file holds a snapshot; --svg takes the picture to write, e.g. "
            "'%s --svg cdf.svg %s' (not overwritten)\n",
            g_prog, out, g_prog, out);
    return NULL;
  }
  FILE *f = fopen(out, "w");
  if (!f) fprintf(stderr, "%s: --svg %s: cannot write: %s\n", g_prog, out, strerror(errno));
  return f;
}

static int write_svg(FILE *f, const char *out, const ttft_snapshot *s, const char *s_name,
                     const ttft_snapshot *old, const char *old_name) {
  int to_stdout = f == stdout;
  int rc = report_svg(f, s, s_name, old, old_name, g_tail_axis);
  if (to_stdout) rc |= fflush(f) != 0 ? -1 : 0;
  else rc |= fclose(f) != 0 ? -1 : 0;
  if (rc) {
    fprintf(stderr, "%s: %s: writing the SVG failed\n", g_prog, out);
    return EXIT_INPUT;
  }
  return 0;
}

/* --------------------------------------------------------------- diff */
/* d in ns as the text report writes it: "850 ns", "12.3 µs", "120 ms",
 * "1.23 s", "1.50 min" (the unit chosen after rounding to three
 * significant digits, so 999.6 µs is "1.00 ms"); *div and *unit receive
 * the scale used, so that an interval prints in the same unit. */
static void dur_unit(double ns, double *div, const char **unit) {
  double a = fabs(ns);
  *div = 1, *unit = "ns";
  if (a >= 59.95e9) *div = 60e9, *unit = "min";
  else if (a >= 999.5e6) *div = 1e9, *unit = "s";
  else if (a >= 999.5e3) *div = 1e6, *unit = "ms";
  else if (a >= 999.5) *div = 1e3, *unit = "\xC2\xB5s"; /* µs */
}

/* three significant digits, as the text report */
static const char *num_fmt(double v, double ns_scale_div) {
  double av = fabs(v);
  if (ns_scale_div == 1) return "%.0f";
  return av < 9.995 ? "%.2f" : av < 99.95 ? "%.1f" : "%.0f";
}

static void fmt_dur(char *out, size_t cap, double ns) {
  double div;
  const char *unit;
  dur_unit(ns, &div, &unit);
  char f[16];
  snprintf(f, sizeof f, "%s %%s", num_fmt(ns / div, div));
  snprintf(out, cap, f, ns / div, unit);
}

static void fmt_val(char *out, size_t cap, double v, int is_time) {
  if (is_time) fmt_dur(out, cap, v);
  else if (v == floor(v) && fabs(v) < 1e15) snprintf(out, cap, "%.0f", v);
  else snprintf(out, cap, "%.2f", v);
}

/* An estimate and its confidence interval. */
typedef struct est {
  int have;         /* this side has data                         */
  int enough;       /* enough observations to judge a change      */
  double v, lo, hi; /* point estimate, confidence interval [lo, hi] */
} est;

/* "18.7 ms [15.6, 20.5]" (the interval in the point's unit) or "18.7 ms" */
static void fmt_est(char *out, size_t cap, const est *e, int is_time, int with_ci) {
  if (!e->have) {
    snprintf(out, cap, "-");
    return;
  }
  if (!is_time) {
    char a[32];
    fmt_val(a, sizeof a, e->v, 0);
    if (with_ci) {
      char l[32], h[32];
      fmt_val(l, sizeof l, e->lo, 0);
      fmt_val(h, sizeof h, e->hi, 0);
      snprintf(out, cap, "%s [%s, %s]", a, l, h);
    } else {
      snprintf(out, cap, "%s", a);
    }
    return;
  }
  double div;
  const char *unit;
  dur_unit(e->v, &div, &unit);
  char f[64];
  const char *nf = num_fmt(e->v / div, div);
  if (with_ci) {
    snprintf(f, sizeof f, "%s %%s [%s, %s]", nf, nf, nf);
    snprintf(out, cap, f, e->v / div, unit, e->lo / div, e->hi / div);
  } else {
    snprintf(f, sizeof f, "%s %%s", nf);
    snprintf(out, cap, f, e->v / div, unit);
  }
}

/* ---- statistics: how sure is a difference? ----------------------------
 * Quantiles: a distribution-free confidence interval from order statistics.
 * Among n independent observations, the number B below the true quantile
 * q is Binomial(n, q); the interval [x(l), x(u)] covers it with
 * probability P(l <= B <= u - 1), so l and u are read off the binomial
 * distribution (exactly, no normal approximation: small n is where it
 * matters). x(r) is read from the histogram at bucket resolution.
 * Means: mean +- z * sd / sqrt(n), the variance from the buckets.
 * Rates: the Wilson score interval.
 * A change is flagged only when it is larger than the threshold AND the
 * two intervals do not overlap; a quantile needs at least MIN_TAIL
 * observations on each side of it (else "not enough data").
 * Gaps are not independent observations: every sequence in a decode step
 * sees the same gap, and a sequence in a wide batch sees long gaps from
 * start to end. So for the per-gap metrics (itl, itl_per_token, and the
 * stalls/gap rate) the independent units are the sequences: the intervals
 * and the minimum counts use their number, n_eff, and read the quantiles
 * of the gap histogram at the matching fractions. Treating 4000 gaps of
 * 37 streams as 4000 independent draws would flag every run-to-run wobble.
 * Their mean is a sequence's mean gap averaged over sequences, so its
 * interval takes its relative width from the spread of TPOT (each
 * sequence's own mean gap per token) over the sequences. */
#define MIN_TAIL REPORT_MIN_TAIL /* report_model.h */
#define MIN_MEAN_N 30
#define MIN_RATE_N 30

/* --confidence. A diff judges about fifty rows at once: with 95 %
 * intervals two samples of one workload had a row flagged in about one
 * diff in ten (14 flags in 151 pairs of 300-request workloads), with 99 %
 * in none of them; so 99 % by default. */
static double g_conf = 0.99;
static double g_z = 2.5758293035489004;

/* z with P(|Z| <= z) = conf, by bisection on erfc (monotone) */
static double z_for(double conf) {
  double lo = 0, hi = 10, alpha = 1 - conf;
  for (int i = 0; i < 200; i++) {
    double mid = (lo + hi) / 2;
    if (erfc(mid / sqrt(2.0)) > alpha) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/* Ranks [*l, *u] (1-based) of the order-statistic interval for quantile q
 * of n observations at confidence g_conf: l the largest rank with
 * P(B <= l - 1) <= alpha/2, u the smallest with P(B <= u - 1) >= 1 -
 * alpha/2, B ~ Binomial(n, q). The sum runs over the binomial's bulk
 * (mean +- 10 sd + 30: what lies outside is below 1e-20). */
static void order_stat_ranks(uint64_t n, double q, uint64_t *l, uint64_t *u) {
  double alpha = 1 - g_conf, dn = (double)n;
  double mean = dn * q, sd = sqrt(dn * q * (1 - q)), w = 10 * sd + 30;
  uint64_t k0 = mean - w > 0 ? (uint64_t)(mean - w) : 0;
  uint64_t k1 = mean + w < dn ? (uint64_t)(mean + w) + 1 : n;
  double lq = log(q), l1q = log1p(-q);
  double lp = lgamma(dn + 1) - lgamma((double)k0 + 1) - lgamma(dn - (double)k0 + 1) +
              (double)k0 * lq + (dn - (double)k0) * l1q;
  double cdf = 0;
  *l = k0 > 1 ? k0 : 1;
  *u = n;
  int found_u = 0;
  for (uint64_t k = k0; k <= k1; k++) {
    cdf += exp(lp); /* cdf = P(B <= k): rank k + 1's bound */
    if (cdf <= alpha / 2 && k + 1 <= n) *l = k + 1;
    if (!found_u && cdf >= 1 - alpha / 2) {
      *u = k + 1 <= n ? k + 1 : n;
      found_u = 1;
    }
    if (k < n) lp += log((dn - (double)k) / ((double)k + 1)) + lq - l1q;
  }
}

/* x(r): the value of rank r (1-based) at bucket resolution, as the
 * library reports quantiles (bucket midpoint, clamped to [min, max]). */
static double value_at_rank(const ttft__shist *h, uint64_t r) {
  if (r <= 1) return (double)h->min;
  if (r >= h->count) return (double)h->max;
  uint64_t seen_n = 0;
  uint32_t end = ttft__shist_hi(h);
  for (uint32_t i = ttft__shist_next(h, 0); i < end; i = ttft__shist_next(h, i + 1)) {
    seen_n += ttft__shist_at(h, i);
    if (seen_n >= r) {
      uint64_t lo = ttft__bucket_lo(i), hi = ttft__bucket_hi(i);
      if (hi > TTFT__HIST_MAX) hi = TTFT__HIST_MAX;
      uint64_t mid = lo + (hi - lo) / 2;
      if (mid < h->min) mid = h->min;
      if (mid > h->max) mid = h->max;
      return (double)mid;
    }
  }
  return (double)h->max;
}

/* x at sample fraction r / n_eff of h (h holds n >= n_eff observations):
 * rank r of n_eff independent units, read from the full histogram */
static double value_at_unit_rank(const ttft__shist *h, uint64_t r, uint64_t n_eff) {
  if (n_eff >= h->count) return value_at_rank(h, r);
  double full = ceil((double)r * (double)h->count / (double)n_eff);
  return value_at_rank(h, full < 1 ? 1 : (uint64_t)full);
}

/* quantile q of h; units = the number of independent units behind h's
 * observations (0: every observation is one) */
static est quantile_est(const ttft__shist *h, double q, uint64_t units) {
  est e = {0, 0, 0, 0, 0};
  if (!h || !h->count) return e;
  e.have = 1;
  e.v = (double)ttft__shist_quantile(h, q);
  uint64_t n = units && units < h->count ? units : h->count, r = ttft__nearest_rank(q, n);
  e.enough = n - r >= MIN_TAIL && r >= MIN_TAIL;
  uint64_t l, u;
  order_stat_ranks(n, q, &l, &u);
  e.lo = value_at_unit_rank(h, l, n);
  e.hi = value_at_unit_rank(h, u, n);
  if (e.lo > e.v) e.lo = e.v; /* bucket midpoints vs the clamped point */
  if (e.hi < e.v) e.hi = e.v;
  return e;
}

static double hist_var(const ttft__shist *h, double mean);

/* the mean of h; units as in quantile_est, and for units != 0 the
 * per-unit histogram (TPOT: each sequence's mean gap) whose relative
 * spread sets the interval's width */
static est mean_est(const ttft__shist *h, uint64_t units, const ttft__shist *per_unit) {
  est e = {0, 0, 0, 0, 0};
  if (!h || !h->count) return e;
  e.have = 1;
  uint64_t n_eff = units && units < h->count ? units : h->count;
  double n = (double)h->count, mean = ttft__shist_sum_double(h) / n;
  e.v = mean;
  e.enough = n_eff >= MIN_MEAN_N;
  if (units && per_unit && per_unit->count > 1 && (per_unit->sum || per_unit->sum_hi)) {
    double pm = ttft__shist_sum_double(per_unit) / (double)per_unit->count;
    double rel = g_z * sqrt(hist_var(per_unit, pm) / (double)per_unit->count) / pm;
    e.lo = mean * (1 - rel) > 0 ? mean * (1 - rel) : 0;
    e.hi = mean * (1 + rel);
    return e;
  }
  double half = h->count > 1 && n_eff > 0 ? g_z * sqrt(hist_var(h, mean) / (double)n_eff) : 0;
  e.lo = mean - half > 0 ? mean - half : 0;
  e.hi = mean + half;
  return e;
}

/* sample variance of h's observations about mean, at bucket resolution */
static double hist_var(const ttft__shist *h, double mean) {
  double ss = 0, n = (double)h->count;
  if (h->count < 2) return 0;
  uint32_t end = ttft__shist_hi(h);
  for (uint32_t i = ttft__shist_next(h, 0); i < end; i = ttft__shist_next(h, i + 1)) {
    uint64_t c = ttft__shist_at(h, i);
    if (!c) continue;
    uint64_t lo = ttft__bucket_lo(i), hi = ttft__bucket_hi(i);
    if (hi > h->max) hi = h->max;
    if (lo < h->min) lo = h->min;
    double mid = ((double)lo + (double)hi) / 2, d = mid - mean;
    ss += (double)c * d * d;
  }
  return ss / (n - 1);
}

/* share x of n with its Wilson score interval; units: the independent
 * units behind the n events (0: each event is one), which the interval's
 * width and the minimum count go by */
static est rate_est(uint64_t x, uint64_t n, int have, uint64_t units) {
  est e = {0, 0, 0, 0, 0};
  if (!have || n == 0) return e;
  if (x > n) x = n;
  uint64_t n_eff = units && units < n ? units : n;
  double p = (double)x / (double)n, dn = (double)n_eff, z2 = g_z * g_z;
  double c = (p + z2 / (2 * dn)) / (1 + z2 / dn);
  double h = g_z / (1 + z2 / dn) * sqrt(p * (1 - p) / dn + z2 / (4 * dn * dn));
  e.have = 1;
  e.v = p;
  e.lo = c - h < 0 ? 0 : c - h;
  e.hi = c + h > 1 ? 1 : c + h;
  e.enough = n_eff >= MIN_RATE_N;
  return e;
}

typedef struct diff_ctx {
  double threshold; /* fraction, 0.05 = 5 % */
  int regressions, unjudged, noise;
  char flagged[4096];
} diff_ctx;

static void flag(diff_ctx *d, const char *what) {
  d->regressions++;
  size_t n = strlen(d->flagged);
  if (n + strlen(what) + 8 < sizeof d->flagged)
    snprintf(d->flagged + n, sizeof d->flagged - n, "%s%s", n ? ", " : "", what);
  else if (!strstr(d->flagged, ", ..."))
    snprintf(d->flagged + n, sizeof d->flagged - n, ", ...");
}

/* columns a UTF-8 string takes (µs: two bytes, one column) */
static int cols_of(const char *s) {
  int n = 0;
  for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
  return n;
}

/* s in a field of w columns: left-aligned (w > 0) or right-aligned (w < 0),
 * as printf's %-*s / %*s would align ASCII */
static void put_field(const char *s, int w) {
  int pad = abs(w) - cols_of(s);
  if (pad < 0) pad = 0;
  if (w < 0) printf("%*s%s", pad, "", s);
  else printf("%s%*s", s, pad, "");
}

/* one row of the diff: scope, stat, old, new, change, rel, and a note */
static void print_row(const char *scope, const char *stat, const char *so, const char *sn,
                      const char *sc, const char *sr, const char *note) {
  printf("  %-16s %-13s ", scope, stat);
  put_field(so, 26);
  printf(" ");
  put_field(sn, 26);
  printf(" ");
  put_field(sc, -11);
  printf(" ");
  put_field(sr, -9);
  printf("%s\n", note);
}

/* A count or counter: old, new, change; no direction, never flagged. */
static void diff_count(const char *scope, const char *stat, double o, double n, int have_old,
                       int have_new) {
  char so[32] = "-", sn[32] = "-", sc[48] = "", sr[32] = "";
  if (have_old) fmt_val(so, sizeof so, o, 0);
  if (have_new) fmt_val(sn, sizeof sn, n, 0);
  if (have_old && have_new) {
    char tmp[32];
    fmt_val(tmp, sizeof tmp, n - o, 0);
    snprintf(sc, sizeof sc, "%s%s", n - o > 0 ? "+" : "", tmp);
    if (o != 0) snprintf(sr, sizeof sr, "%+.1f %%", 100.0 * (n - o) / fabs(o));
    else snprintf(sr, sizeof sr, "%s", n == 0 ? "0.0 %" : "new");
  }
  print_row(scope, stat, so, sn, sc, sr, "");
}

/* A quantile or mean. worse_if: +1 higher is worse, 0 no direction.
 * need: what "not enough data" asks for. */
static void diff_est(diff_ctx *d, const char *scope, const char *stat, const est *o, const est *n,
                     int is_time, int worse_if, const char *need) {
  int judge = o->have && n->have && o->enough && n->enough;
  char so[128], sn[128], sc[48] = "", sr[32] = "";
  fmt_est(so, sizeof so, o, is_time, judge);
  fmt_est(sn, sizeof sn, n, is_time, judge);
  const char *mark = "";
  char note[96] = "";
  if (o->have && n->have) {
    double ch = n->v - o->v;
    char tmp[32];
    fmt_val(tmp, sizeof tmp, ch, is_time);
    snprintf(sc, sizeof sc, "%s%s", ch > 0 ? "+" : "", tmp);
    double rel = o->v != 0 ? ch / fabs(o->v) : (n->v != 0 ? INFINITY : 0);
    if (o->v != 0) snprintf(sr, sizeof sr, "%+.1f %%", 100.0 * rel);
    else snprintf(sr, sizeof sr, "%s", n->v == 0 ? "0.0 %" : "new");
    if (worse_if != 0 && !judge) {
      snprintf(note, sizeof note, "  not enough data (%s)", need);
      mark = note;
      d->unjudged++;
    } else if (worse_if != 0) {
      int apart_worse = worse_if > 0 ? n->lo > o->hi : n->hi < o->lo;
      int apart_better = worse_if > 0 ? n->hi < o->lo : n->lo > o->hi;
      if (rel * worse_if > d->threshold && apart_worse) {
        mark = "  << REGRESSION";
        char what[160];
        snprintf(what, sizeof what, "%s %s", scope, stat);
        flag(d, what);
      } else if (-rel * worse_if > d->threshold && apart_better) {
        mark = "  (better)";
      } else if (fabs(rel) > d->threshold) {
        mark = "  (within noise)";
        d->noise++;
      }
    }
  }
  print_row(scope, stat, so, sn, sc, sr, mark);
}

/* A share that is bad when it rises (errors, stalls, SLO misses), given as
 * bad events x of n. invert: show the good share (attainment) but judge
 * the bad one. Flagged when the bad share rises by more than the threshold
 * relative AND by at least 0.1 percentage point AND the Wilson intervals
 * of the two bad shares do not overlap, so 0 -> 1 in 10^6 is not a
 * regression, nor 1 of 40 -> 3 of 40. */
static void diff_share(diff_ctx *d, const char *scope, const char *name, uint64_t xo, uint64_t no,
                       uint64_t xn, uint64_t nn, int have_old, int have_new, int invert, uint64_t uo,
                       uint64_t un) {
  est bo = rate_est(xo, no, have_old, uo), bn = rate_est(xn, nn, have_new, un); /* the bad share */
  est so_ = bo, sn_ = bn;                                                 /* what is shown */
  if (invert) {
    so_.v = 1 - bo.v, so_.lo = 1 - bo.hi, so_.hi = 1 - bo.lo;
    sn_.v = 1 - bn.v, sn_.lo = 1 - bn.hi, sn_.hi = 1 - bn.lo;
  }
  int judge = bo.have && bn.have && bo.enough && bn.enough;
  char so[128] = "-", sn[128] = "-", sc[32] = "";
  if (so_.have) {
    if (judge) snprintf(so, sizeof so, "%.2f %% [%.2f, %.2f]", 100 * so_.v, 100 * so_.lo, 100 * so_.hi);
    else snprintf(so, sizeof so, "%.2f %%", 100 * so_.v);
  }
  if (sn_.have) {
    if (judge) snprintf(sn, sizeof sn, "%.2f %% [%.2f, %.2f]", 100 * sn_.v, 100 * sn_.lo, 100 * sn_.hi);
    else snprintf(sn, sizeof sn, "%.2f %%", 100 * sn_.v);
  }
  const char *mark = "";
  char note[96] = "";
  if (bo.have && bn.have) {
    snprintf(sc, sizeof sc, "%+.2f pp", 100.0 * (sn_.v - so_.v));
    double rise = bn.v - bo.v;
    int big_worse = rise >= 0.001 && rise > bo.v * d->threshold;
    int big_better = -rise >= 0.001 && -rise > bo.v * d->threshold;
    if (!judge) {
      if (big_worse || big_better) {
        snprintf(note, sizeof note, "  not enough data (>= %d %s per side)", MIN_RATE_N,
                 uo || un ? "sequences" : "events");
        mark = note;
        d->unjudged++;
      }
    } else if (big_worse && bn.lo > bo.hi) {
      mark = "  << REGRESSION";
      char what[160];
      snprintf(what, sizeof what, "%s %s", scope, name);
      flag(d, what);
    } else if (big_better && bn.hi < bo.lo) {
      mark = "  (better)";
    } else if (big_worse || big_better) {
      mark = "  (within noise)";
      d->noise++;
    }
  }
  print_row(scope, name, so, sn, sc, "", mark);
}

static uint64_t ended(const ttft_snapshot *s, int c) {
  return ttft_snapshot_class_counter(s, c, TTFT_COUNTER_COMPLETED) +
         ttft_snapshot_class_counter(s, c, TTFT_COUNTER_CANCELLED) +
         ttft_snapshot_class_counter(s, c, TTFT_COUNTER_ERRORS);
}

static int per_gap(int m) { return m == TTFT_METRIC_ITL || m == TTFT_METRIC_ITL_PER_TOKEN; }

static void diff_rates(diff_ctx *d, const ttft_snapshot *o, int oc, const ttft_snapshot *n, int nc,
                       const char *scope) {
  int ho = o && oc != -2, hn = n && nc != -2;
  uint64_t eo = ho ? ended(o, oc) : 0, en = hn ? ended(n, nc) : 0;
  const ttft__sclass *co = ho ? ttft__snapshot_class(o, oc) : NULL;
  const ttft__sclass *cn = hn ? ttft__snapshot_class(n, nc) : NULL;
  uint64_t mo = 0, mn = 0, endo = 0, endn = 0;
  if (co) ttft__attainment(co, &mo, &endo);
  if (cn) ttft__attainment(cn, &mn, &endn);
  diff_share(d, scope, "attainment", endo - mo, endo, endn - mn, endn, co && endo, cn && endn, 1, 0, 0);
#define SHARE(name, ctr, den_o, den_n, units_o, units_n)                                         \
  diff_share(d, scope, name, ho ? ttft_snapshot_class_counter(o, oc, ctr) : 0, den_o,            \
             hn ? ttft_snapshot_class_counter(n, nc, ctr) : 0, den_n, ho && (den_o) > 0,         \
             hn && (den_n) > 0, 0, units_o, units_n)
  SHARE("error_rate", TTFT_COUNTER_ERRORS, eo, en, 0, 0);
  SHARE("abandon_rate", TTFT_COUNTER_ABANDONED, eo, en, 0, 0);
  SHARE("stalled_share", TTFT_COUNTER_STALLED_SEQS, eo, en, 0, 0);
  uint64_t go = ho ? ttft_snapshot_class_count(o, oc, TTFT_METRIC_ITL) : 0;
  uint64_t gn = hn ? ttft_snapshot_class_count(n, nc, TTFT_METRIC_ITL) : 0;
  /* gaps cluster by sequence: the sequences are the units */
  SHARE("stalls/gap", TTFT_COUNTER_STALLS, go, gn, ho ? report_gap_units(o, oc) : 0, hn ? report_gap_units(n, nc) : 0);
  /* (1.3) fluidity, when either side judged token deadlines: the fluid
   * attainment (fluid / judged, judged on the non-fluid share) and the
   * share of token deadlines missed (they cluster by stream: the judged
   * streams are the units) */
  uint64_t jo = ho ? ttft_snapshot_class_counter(o, oc, TTFT_COUNTER_FLUID_JUDGED) : 0;
  uint64_t jn = hn ? ttft_snapshot_class_counter(n, nc, TTFT_COUNTER_FLUID_JUDGED) : 0;
  uint64_t dlo = ho ? ttft_snapshot_class_counter(o, oc, TTFT_COUNTER_TOKEN_DEADLINES) : 0;
  uint64_t dln = hn ? ttft_snapshot_class_counter(n, nc, TTFT_COUNTER_TOKEN_DEADLINES) : 0;
  if (jo || jn || dlo || dln) {
    uint64_t fo = ho ? ttft_snapshot_class_counter(o, oc, TTFT_COUNTER_FLUID) : 0;
    uint64_t fn = hn ? ttft_snapshot_class_counter(n, nc, TTFT_COUNTER_FLUID) : 0;
    fo = fo < jo ? fo : jo;
    fn = fn < jn ? fn : jn;
    diff_share(d, scope, "fluid_share", jo - fo, jo, jn - fn, jn, jo > 0, jn > 0, 1, 0, 0);
    SHARE("deadline_miss", TTFT_COUNTER_TOKEN_DEADLINES_MISSED, dlo, dln, jo, jn);
  }
#undef SHARE
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
         tag, display_name(path), (unsigned long long)ended(s, TTFT_CLASS_ALL), (double)(t1 - t0) / 1e9,
         model ? model : "", lbl(s, "start_point"), lbl(s, "token_point"));
}

static const ttft__shist *hist_of(const ttft_snapshot *s, int c, ttft_metric m) {
  const ttft__sclass *k = ttft__snapshot_class(s, c);
  return k ? k->h[m] : NULL;
}

static int run_diff(const ttft_snapshot *o, const char *opath, const ttft_snapshot *n,
                    const char *npath, double threshold) {
  diff_ctx d;
  memset(&d, 0, sizeof d);
  d.threshold = threshold;
  printf("ttft-report diff: flagged when worse by more than %.1f %% and outside the %g %% "
         "confidence intervals [in brackets]\n",
         100.0 * threshold, 100.0 * g_conf);
  describe("  old", opath, o);
  describe("  new", npath, n);
  static const char *keys[] = {"start_point", "token_point"};
  for (int i = 0; i < 2; i++)
    if (strcmp(lbl(o, keys[i]), lbl(n, keys[i])) != 0)
      printf("  WARNING: %s differs (%s vs %s): the clocks measure different things and "
             "the latencies below are not comparable\n",
             keys[i], lbl(o, keys[i]), lbl(n, keys[i]));

  printf("\n  %-16s %-13s %-26s %-26s %11s %9s\n", "metric", "stat", "old", "new", "change", "rel");
  static const struct {
    const char *name;
    double q;
  } stats[] = {{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}, {"p99.9", 0.999}};
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
    const ttft__shist *ho = hist_of(o, TTFT_CLASS_ALL, (ttft_metric)m);
    const ttft__shist *hn = hist_of(n, TTFT_CLASS_ALL, (ttft_metric)m);
    uint64_t co = ho ? ho->count : 0, cn = hn ? hn->count : 0;
    if (!co && !cn) continue;
    const char *name = ttft_metric_name((ttft_metric)m);
    int is_time = m != TTFT_METRIC_OUTPUT_TOKENS;
    /* longer is worse for every duration except how long abandoning
     * users waited (no direction), and output length has none either */
    int worse = is_time && m != TTFT_METRIC_ABANDONED_WAIT ? 1 : 0;
    diff_count(name, "count", (double)co, (double)cn, 1, 1);
    uint64_t uo = per_gap(m) ? report_gap_units(o, TTFT_CLASS_ALL) : 0;
    uint64_t un = per_gap(m) ? report_gap_units(n, TTFT_CLASS_ALL) : 0;
    const char *unit = per_gap(m) ? " sequences" : "";
    for (size_t k = 0; k < sizeof stats / sizeof stats[0]; k++) {
      est eo = quantile_est(ho, stats[k].q, uo), en = quantile_est(hn, stats[k].q, un);
      char need[64];
      snprintf(need, sizeof need, "n >= %llu%s per side", (unsigned long long)report_min_n_for(stats[k].q), unit);
      diff_est(&d, name, stats[k].name, &eo, &en, is_time, worse, need);
    }
    const ttft__shist *to = per_gap(m) ? hist_of(o, TTFT_CLASS_ALL, TTFT_METRIC_TPOT) : NULL;
    const ttft__shist *tn = per_gap(m) ? hist_of(n, TTFT_CLASS_ALL, TTFT_METRIC_TPOT) : NULL;
    est eo = mean_est(ho, uo, to), en = mean_est(hn, un, tn);
    char need[64];
    snprintf(need, sizeof need, "n >= %d%s per side", MIN_MEAN_N, unit);
    diff_est(&d, name, "mean", &eo, &en, is_time, worse, need);
  }

  printf("\n  %-16s %-13s %-26s %-26s %11s\n", "rates", "", "old", "new", "change");
  diff_rates(&d, o, TTFT_CLASS_ALL, n, TTFT_CLASS_ALL, "all");

  /* per class, matched by name: the union, old's order first */
  printf("\n  %-16s %-13s %-26s %-26s %11s %9s\n", "class", "counter", "old", "new", "change", "rel");
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
      diff_count(cname, ttft_counter_name((ttft_counter)c), (double)vo, (double)vn, ho, hn);
    }
    for (int m = TTFT_METRIC_TTFT; m <= TTFT_METRIC_TPOT; m++) {
      const ttft__shist *hho = ho ? hist_of(o, oc, (ttft_metric)m) : NULL;
      const ttft__shist *hhn = hn ? hist_of(n, nc, (ttft_metric)m) : NULL;
      if ((!hho || !hho->count) && (!hhn || !hhn->count)) continue;
      char stat[32], need[64];
      snprintf(stat, sizeof stat, "%s_p99", ttft_metric_name((ttft_metric)m));
      snprintf(need, sizeof need, "n >= %llu per side", (unsigned long long)report_min_n_for(0.99));
      est eo = quantile_est(hho, 0.99, 0), en = quantile_est(hhn, 0.99, 0);
      diff_est(&d, cname, stat, &eo, &en, 1, 1, need);
    }
    diff_rates(&d, o, oc, n, nc, cname);
  }

  printf("\n");
  if (d.regressions)
    printf("%d regression%s worse than %.1f %% and significant: %s\n", d.regressions,
           d.regressions == 1 ? "" : "s", 100.0 * threshold, d.flagged);
  else printf("no regressions worse than %.1f %%\n", 100.0 * threshold);
  if (d.noise)
    printf("%d change%s larger than %.1f %% but within the noise (confidence intervals overlap)\n", d.noise,
           d.noise == 1 ? "" : "s", 100.0 * threshold);
  if (d.unjudged)
    printf("%d row%s with not enough data to judge (a tail quantile needs >= %d observations beyond it)\n",
           d.unjudged, d.unjudged == 1 ? "" : "s", MIN_TAIL);
  fflush(stdout);
  return d.regressions;
}

/* ----------------------------------------------------------- capacity */
/* The id of class `name` in s, or -1. */
static int class_id_of(const ttft_snapshot *s, const char *name) {
  for (int c = 0; c < ttft_snapshot_classes(s); c++) {
    const char *n = ttft_snapshot_class_name(s, c);
    if (n && !strcmp(n, name)) return c;
  }
  return -1;
}

/* The class --capacity judges when none is named: the one class that
 * judged fluidity in some run; else the one class with a TPOT budget.
 * NULL (after saying why) when there is none or more than one. */
static const char *capacity_class(ttft_snapshot *const *snaps, int n) {
  for (int pass = 0; pass < 2; pass++) {
    const char *pick = NULL;
    int many = 0;
    char list[512] = "";
    size_t len = 0;
    for (int i = 0; i < n; i++)
      for (int c = 0; c < ttft_snapshot_classes(snaps[i]); c++) {
        ttft_slo slo;
        ttft_slo_init(&slo);
        ttft_snapshot_class_slo(snaps[i], c, &slo);
        int fits = pass == 0 ? ttft_snapshot_class_counter(snaps[i], c, TTFT_COUNTER_FLUID_JUDGED) != 0
                             : slo.tpot_ns != 0;
        const char *name = ttft_snapshot_class_name(snaps[i], c);
        if (!fits || !name || (pick && !strcmp(pick, name))) continue;
        if (pick && strstr(list, name)) continue;
        if (pick) many = 1;
        else pick = name;
        if (len < sizeof list)
          len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", name);
      }
    if (many) {
      fprintf(stderr, "%s: --capacity: several classes %s (%s): name one with --class NAME\n", g_prog,
              pass == 0 ? "judged fluidity" : "have a TPOT budget", list);
      return NULL;
    }
    if (pick) return pick;
  }
  fprintf(stderr, "%s: --capacity: no class judged fluidity or has a TPOT budget; name one with --class NAME\n",
          g_prog);
  return NULL;
}

/* ttft-report --capacity: each file one run of a sweep (docs/ttft-report.md
 * "Capacity"). */
static int run_capacity(const char **files, int n, const char *cls, double target) {
  ttft_snapshot **snaps = calloc((size_t)n, sizeof *snaps);
  report_run *runs = calloc((size_t)n, sizeof *runs);
  int rc = !snaps || !runs ? EXIT_INPUT : 0;
  for (int i = 0; i < n && !rc; i++) {
    input in = {0};
    if (load_all(&in, &files[i], 1)) rc = EXIT_INPUT;
    snaps[i] = in.acc;
    in.acc = NULL;
    input_free(&in);
  }
  if (!rc && !cls && !(cls = capacity_class(snaps, n))) rc = EXIT_USAGE;
  for (int i = 0; i < n && !rc; i++) {
    int c = class_id_of(snaps[i], cls);
    if (c < 0) {
      fprintf(stderr, "%s: %s: no class '%s' in this run\n", g_prog, display_name(files[i]), cls);
      rc = EXIT_INPUT;
    } else if (report_run_of(snaps[i], c, target, display_name(files[i]), &runs[i]) != 0) {
      fprintf(stderr, "%s: %s: the snapshot covers no time: no token rate\n", g_prog, display_name(files[i]));
      rc = EXIT_INPUT;
    }
  }
  if (!rc) {
    int fcap, tcap;
    report_capacity(runs, n, &fcap, &tcap);
    char d[32];
    printf("capacity of class \"%s\" over %d run%s (fluid: fluidity >= fluid_min; target %.4g %% of the\n"
           "judged requests fluid; TPOT: p90 within the class's TPOT budget)\n\n",
           cls, n, n == 1 ? "" : "s", 100.0 * target);
    printf("%-24s %12s %10s %10s %7s %14s %8s %6s\n", "run", "tokens/s", "TPOT p90", "budget", "TPOT",
           "fluid/judged", "fluid %", "fluid");
    for (int i = 0; i < n; i++) {
      const report_run *r = &runs[i];
      char p90[32], bud[32], fj[48], fp[16];
      if (r->tpot_n) fmt_dur(p90, sizeof p90, (double)r->tpot_p90_ns);
      else strcpy(p90, "-");
      if (r->tpot_budget_ns) fmt_dur(bud, sizeof bud, (double)r->tpot_budget_ns);
      else strcpy(bud, "-");
      snprintf(fj, sizeof fj, "%llu/%llu", (unsigned long long)r->fluid, (unsigned long long)r->judged);
      if (r->judged) snprintf(fp, sizeof fp, "%.1f%%", 100.0 * report_run_fluid_fraction(r));
      else strcpy(fp, "-");
      static const char *const verdict[3] = {"-", "over", "ok"};
      static const char *const fverdict[3] = {"-", "no", "yes"};
      printf("%-24s %12.1f %10s %10s %7s %14s %8s %6s\n", r->name, r->tokens_per_s, p90, bud,
             verdict[r->tpot_ok + 1], fj, fp, fverdict[r->fluid_ok + 1]);
    }
    printf("\n");
    if (fcap >= 0)
      printf("fluid token generation rate: %.1f tokens/s (%s; fluid_min %.2f)\n", runs[fcap].tokens_per_s,
             runs[fcap].name, runs[fcap].fluid_min);
    else
      printf("fluid token generation rate: - (not reached at the slowest run)\n");
    if (tcap >= 0) {
      fmt_dur(d, sizeof d, (double)runs[tcap].tpot_budget_ns);
      printf("TPOT p90 capacity:           %.1f tokens/s (%s; budget %s)\n", runs[tcap].tokens_per_s,
             runs[tcap].name, d);
    } else {
      printf("TPOT p90 capacity:           - (not reached at the slowest run, or no TPOT budget)\n");
    }
    /* the picture the two draw apart: TPOT p90 within budget where the
     * streams were not fluid (stalls that a per-token mean hides) */
    for (int i = 0; i < n; i++)
      if (runs[i].tpot_ok == 1 && runs[i].fluid_ok == 0)
        printf("  %s: TPOT p90 within budget at %.1f tokens/s, but only %.1f %% of the judged requests\n"
               "    stayed fluid: stalls a per-token mean spreads thin\n",
               runs[i].name, runs[i].tokens_per_s, 100.0 * report_run_fluid_fraction(&runs[i]));
    if (fflush(stdout) != 0 || ferror(stdout)) rc = EXIT_INPUT;
  }
  for (int i = 0; snaps && i < n; i++) ttft_snapshot_free(snaps[i]);
  free(snaps);
  free(runs);
  return rc;
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
  int fail_on_regression = 0, format_given = 0, capacity = 0;
  const char *cap_class = NULL;
  double fluid_target = 0.99;
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
    } else if (!strcmp(a, "--version")) {
      /* linked statically: the library's version is the tool's */
      printf("ttft-report (libttft) %s\n", ttft_version_string());
      return 0;
    } else if (!strcmp(a, "--format") || !strcmp(a, "-f")) {
      if (++i >= argc) return usage_error("%s needs an argument", a);
      if (!parse_format(argv[i], &format)) return usage_error("unknown format '%s'", argv[i]);
      format_given = 1;
    } else if (!strcmp(a, "--svg")) {
      if (++i >= argc) return usage_error("--svg needs the file to write the picture to (then the snapshot FILEs)");
      svg = argv[i];
    } else if (!strcmp(a, "--cdf-axis")) {
      if (++i >= argc) return usage_error("--cdf-axis needs 'tail' or 'linear'");
      if (!strcmp(argv[i], "tail")) g_tail_axis = 1;
      else if (!strcmp(argv[i], "linear")) g_tail_axis = 0;
      else return usage_error("bad --cdf-axis '%s' (tail or linear)", argv[i]);
    } else if (!strcmp(a, "--threshold")) {
      if (++i >= argc) return usage_error("--threshold needs a percentage");
      char *end = NULL;
      double t = strtod(argv[i], &end);
      if (end && *end == '%') end++;
      if (!end || end == argv[i] || *end || !(t >= 0 && t < 1e6))
        return usage_error("bad --threshold '%s' (a percentage such as 5 or 2.5)", argv[i]);
      threshold = t / 100.0;
    } else if (!strcmp(a, "--confidence")) {
      if (++i >= argc) return usage_error("--confidence needs a percentage");
      char *end = NULL;
      double c = strtod(argv[i], &end);
      if (end && *end == '%') end++;
      if (!end || end == argv[i] || *end || !(c >= 50 && c <= 99.9999))
        return usage_error("bad --confidence '%s' (a percentage from 50 to 99.9999, e.g. 95)", argv[i]);
      g_conf = c / 100.0;
      g_z = z_for(g_conf);
    } else if (!strcmp(a, "--fail-on-regression")) {
      fail_on_regression = 1;
    } else if (!strcmp(a, "--capacity")) {
      capacity = 1;
    } else if (!strcmp(a, "--class")) {
      if (++i >= argc) return usage_error("--class needs a class name");
      cap_class = argv[i];
    } else if (!strcmp(a, "--fluid-target")) {
      if (++i >= argc) return usage_error("--fluid-target needs a percentage");
      char *end = NULL;
      double t = strtod(argv[i], &end);
      if (end && *end == '%') end++;
      if (!end || end == argv[i] || *end || !(t > 0 && t <= 100))
        return usage_error("bad --fluid-target '%s' (a percentage above 0, at most 100, e.g. 99)", argv[i]);
      fluid_target = t / 100.0;
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
  if (capacity) {
    if (diff_old || delta_old || svg || format_given)
      return usage_error("--capacity prints its own table; --diff, --delta, --svg and --format do not apply");
    if (nfiles == 0) return usage_error("--capacity needs the run files (one snapshot file per load)");
    return run_capacity(files, nfiles, cap_class, fluid_target);
  }
  if (cap_class) return usage_error("--class applies to --capacity only");
  if ((diff_old || delta_old) && nfiles)
    return usage_error("--diff and --delta take exactly two files and no others");
  if (!diff_old && !delta_old && nfiles == 0) {
    if (svg)
      return usage_error("--svg %s: no snapshot to draw; name the snapshot FILE(s) too: "
                         "%s --svg %s FILE...",
                         svg, g_prog, looks_like_snapshot(svg) ? "cdf.svg" : svg);
    return usage_error("no snapshot files given");
  }
  if (diff_old && format_given) return usage_error("--diff prints its own table; --format does not apply");
  if (format == TTFT_FORMAT_PROMETHEUS_PROTOBUF && isatty(fileno(stdout)) &&
      !(svg && !strcmp(svg, "-"))) {
    fprintf(stderr, "%s: prometheus_protobuf is binary; redirect standard output to a file\n", g_prog);
    return EXIT_USAGE;
  }

  /* read everything first: nothing is written before the inputs are good */
  int rc = 0;
  input in = {0}, old_in = {0};
  ttft_snapshot *s = NULL;
  if (diff_old) {
    if (load_all(&old_in, &diff_old, 1) || load_all(&in, &diff_new, 1)) rc = EXIT_INPUT;
    else s = in.acc;
  } else if (delta_old) {
    input a = {0}, b = {0};
    if (!load_all(&a, &delta_old, 1) && !load_all(&b, &delta_new, 1)) {
      int err = TTFT_OK;
      s = ttft_snapshot_delta(b.acc, a.acc, &err);
      if (!s)
        fprintf(stderr, "%s: %s, %s: %s (two snapshots of one process, older first)\n", g_prog,
                display_name(delta_old), display_name(delta_new), ttft_strerror(err));
    }
    input_free(&a);
    input_free(&b);
    if (!s) rc = EXIT_INPUT;
    in.acc = s;
  } else {
    if (load_all(&in, files, nfiles)) rc = EXIT_INPUT;
    else s = in.acc;
  }

  /* then the SVG's file, so a path that cannot be written fails before
   * the report is printed */
  FILE *svg_f = NULL;
  if (!rc && svg && !(svg_f = open_svg(svg))) rc = EXIT_INPUT;

  if (!rc) {
    int to_stdout = svg && !strcmp(svg, "-");
    const char *name = diff_old ? diff_new : delta_old ? "delta" : nfiles == 1 ? display_name(files[0]) : "merged";
    if (diff_old) {
      int regressions = to_stdout ? 0 : run_diff(old_in.acc, diff_old, s, diff_new, threshold);
      if (svg) rc = write_svg(svg_f, svg, s, display_name(diff_new), old_in.acc, display_name(diff_old));
      if (!rc && fail_on_regression && regressions) rc = EXIT_REGRESSION;
    } else {
      if (!to_stdout) rc = print_format(s, format);
      if (svg && !rc) rc = write_svg(svg_f, svg, s, name, NULL, NULL);
      else if (svg_f && svg_f != stdout) fclose(svg_f);
    }
  } else if (svg_f && svg_f != stdout) {
    fclose(svg_f);
  }
  input_free(&in);
  input_free(&old_in);
  return rc;
}
