/*
 * test_protobuf.c — TTFT_FORMAT_PROMETHEUS_PROTOBUF: the framing, the
 * native buckets and their error bound, read back by a strict decoder
 * written here from metrics.proto's field numbers (tests/prom/pbdecode.py
 * is a second, independent one that also compares every sample with the
 * text exposition).
 *
 *   framing     snprintf rules, binary output (NUL bytes), identical calls
 *               give identical bytes, truncated output is a prefix, the
 *               stream is a sequence of valid length-delimited messages
 *   families    the same names, types and help texts, in the same order, as
 *               the text exposition (read from its # HELP / # TYPE lines,
 *               so this follows whatever format_prom.c writes)
 *   bound       every internal bucket of the log-linear histogram, for every
 *               schema -4..8: the native bucket it lands in keeps any
 *               PromQL estimate within B (1 + 1/256) - 1 of any value of
 *               the bucket (the bound documented in format_protobuf.c)
 *   quantiles   random workloads, every schema, PromQL's interpolation over
 *               the decoded buckets vs the exact nearest-rank quantile; the
 *               library's own quantile lies in PromQL's bucket; native
 *               histograms of three registries summed bucket by bucket vs
 *               the exact quantile of the union
 *   options     native_histograms = 0 (classic only), the no-op span of an
 *               empty histogram, the zero bucket, the schema field
 *   hostile     a corrupt snapshot (schema out of range, min > max, names
 *               without NUL, invalid UTF-8, huge counts, too many bounds and
 *               bands) formats into a stream that still decodes
 *   memory      a failing allocator gives TTFT_ENOMEM, never a short output
 *
 * The reader and the counters-over-time comparison are in prom_series.h.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"
#include "task.h"
#include "prom_series.h"
/* Only for the hostile-snapshot test: the fields the formatter reads. */
#include "common/snapshot.h"

#define TTFT_FAMILY "gen_ai_server_time_to_first_token_seconds"

/* Walk a whole stream: every family a valid message of known fields. */
static int stream_ok(const unsigned char *buf, size_t n, unsigned *nfam) {
  rd r = {buf, buf + n, 0};
  *nfam = 0;
  while (r.p < r.end) {
    uint64_t len = rd_varint(&r);
    if (r.bad || len > (uint64_t)(r.end - r.p)) return 0;
    rd m = {r.p, r.p + len, 0};
    fld f;
    int name = 0, type = 0;
    while (rd_next(&m, &f)) {
      if (f.no == 1 && f.wt == 2) name = 1;
      else if (f.no == 3 && f.wt == 0) type = 1;
      else if (!((f.no == 2 || f.no == 4 || f.no == 5) && f.wt == 2)) return 0;
    }
    if (m.bad || !name || !type) return 0;
    r.p += len;
    (*nfam)++;
  }
  return !r.bad;
}

/* The histogram of family fam whose label lname has value lval (lname NULL:
 * the first metric), from a whole stream. */
static nhist *get_hist(const unsigned char *buf, size_t n, const char *fam, const char *lname,
                       const char *lval) {
  nhist *h = nh_new();
  rd r = {buf, buf + n, 0};
  while (r.p < r.end && !h->found) {
    uint64_t len = rd_varint(&r);
    if (r.bad || len > (uint64_t)(r.end - r.p)) break;
    rd m = {r.p, r.p + len, 0};
    r.p += len;
    fld f;
    int match = 0;
    while (rd_next(&m, &f) && !h->found) {
      if (f.no == 1) match = str_is(&f.sub, fam);
      if (f.no != 4 || !match) continue;
      rd met = f.sub;
      fld g;
      int lab_ok = lname == NULL;
      rd hist = {NULL, NULL, 0};
      while (rd_next(&met, &g)) {
        if (g.no == 1 && lname) {
          rd lp = g.sub;
          fld x;
          int nm = 0, vl = 0;
          while (rd_next(&lp, &x)) {
            if (x.no == 1) nm = str_is(&x.sub, lname);
            if (x.no == 2) vl = str_is(&x.sub, lval);
          }
          if (nm && vl) lab_ok = 1;
        }
        if (g.no == 7) hist = g.sub;
      }
      if (lab_ok && hist.p) {
        h->found = 1;
        parse_hist(hist, h);
      }
    }
  }
  return h;
}

static double bucket_upper(int32_t schema, int32_t idx) { return exp2(ldexp((double)idx, -schema)); }

/* PromQL-style: the first bucket (zero bucket first) whose cumulative count
 * reaches rank; linear interpolation inside it. *lo, *hi: its bounds. */
static double promql_quantile(const nhist *h, double rank, double *lo, double *hi) {
  double cum = (double)h->zc;
  if (h->zc && cum >= rank) {
    *lo = 0, *hi = h->zt;
    return h->zt * rank / cum;
  }
  for (size_t i = 0; i < h->nb; i++) {
    if (!h->cnt[i]) continue;
    double before = cum;
    cum += (double)h->cnt[i];
    if (cum >= rank) {
      *lo = bucket_upper(h->schema, h->idx[i] - 1);
      *hi = bucket_upper(h->schema, h->idx[i]);
      return *lo + (*hi - *lo) * (rank - before) / (double)h->cnt[i];
    }
  }
  *lo = *hi = NAN;
  return NAN;
}

static double native_bound(int schema) { return exp2(ldexp(1.0, -schema)) * (1 + 1 / 256.0) - 1; }

/* ------------------------------------------------------------ helpers */
static unsigned char *format_pb(const ttft_snapshot *s, long *n) {
  *n = ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS_PROTOBUF, NULL, 0);
  if (*n < 0) return NULL;
  unsigned char *b = malloc((size_t)*n + 1);
  if (b && ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS_PROTOBUF, (char *)b, (size_t)*n + 1) != *n) {
    free(b);
    return NULL;
  }
  return b;
}

static char *format_text(const ttft_snapshot *s) {
  long n = ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS, NULL, 0);
  char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (b) ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS, b, (size_t)n + 1);
  return b;
}

static uint64_t g_rng;
/* every test draws the same values alone or after the others */
static void rng_reset(void) { g_rng = 12345; }
TU_SETUP(rng_reset)
static uint64_t rnd(void) {
  uint64_t z = (g_rng += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}
static double unit(void) { return ((double)(rnd() >> 11) + 0.5) * 0x1.0p-53; }

/* Record TTFT = v for each value (one stream each, caller timestamps). */
static void record_ttft(ttft_registry *r, const uint64_t *v, size_t n) {
  uint64_t t = UINT64_C(1000000000000);
  for (size_t i = 0; i < n; i++) {
    ttft_seq s = ttft_begin(r, t);
    ttft_token_emitted(r, s, 1, t + v[i]);
    ttft_stream_end(r, s, TTFT_COMPLETED, t + v[i]);
    t += v[i] + 1;
  }
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The internal log-linear layout, re-derived here (docs/design.md):
 * values below 256 have a bucket each; above, 128 equal buckets an octave. */
static void internal_bucket(uint32_t i, uint64_t *lo, uint64_t *hi) {
  if (i < 256) {
    *lo = *hi = i;
    return;
  }
  unsigned shift = i / 128 - 1;
  *lo = (uint64_t)(128 + i % 128) << shift;
  *hi = *lo + (UINT64_C(1) << shift) - 1;
}
#define INTERNAL_BUCKETS 4864 /* 2^44 ns: the last bucket */

/* --------------------------------------------------------------- tests */
/* framing: snprintf rules, binary, deterministic, prefixes */
TEST(framing) {
  ttft_registry *r = ttft_registry_new(NULL);
  uint64_t v[200];
  for (int i = 0; i < 200; i++) v[i] = 1000000 + (uint64_t)i * 7919 * 1000;
  record_ttft(r, v, 200);
  ttft_snapshot *s = ttft_snapshot_take(r);
  long n = ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS_PROTOBUF, NULL, 0);
  EXPECT_TRUE(n > 1000);
  unsigned char *a = malloc((size_t)n + 1), *b = malloc((size_t)n + 1);
  EXPECT_EQ_INT(n, ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS_PROTOBUF, (char *)a, (size_t)n + 1));
  EXPECT_EQ_INT(n, ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS_PROTOBUF, (char *)b, (size_t)n + 1));
  EXPECT_TRUE(memcmp(a, b, (size_t)n) == 0);
  EXPECT_EQ_INT(0, a[n]);
  EXPECT_TRUE(memchr(a, 0, (size_t)n) != NULL); /* binary: NULs inside */
  unsigned nfam = 0;
  EXPECT_TRUE(stream_ok(a, (size_t)n, &nfam));
  EXPECT_TRUE(nfam >= 20);
  static const size_t caps[] = {1, 2, 7, 100, 1000};
  for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++) {
    memset(b, 0xAA, (size_t)n + 1);
    EXPECT_EQ_INT(n, ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS_PROTOBUF, (char *)b, caps[k]));
    EXPECT_TRUE(memcmp(a, b, caps[k] - 1) == 0);
    EXPECT_EQ_INT(0, b[caps[k] - 1]);
    EXPECT_EQ_INT(0xAA, b[caps[k]]); /* nothing past cap */
  }
  memset(b, 0xAA, (size_t)n + 1);
  EXPECT_EQ_INT(n, ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS_PROTOBUF, (char *)b, (size_t)n));
  EXPECT_TRUE(memcmp(a, b, (size_t)n - 1) == 0);
  EXPECT_EQ_INT(0, b[n - 1]);
  EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_format(NULL, TTFT_FORMAT_PROMETHEUS_PROTOBUF, NULL, 0));
  EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS_PROTOBUF, NULL, 5));
  EXPECT_STREQ("prometheus_protobuf", ttft_format_name(TTFT_FORMAT_PROMETHEUS_PROTOBUF));
  /* a truncated stream is not mistaken for a whole one */
  EXPECT_FALSE(stream_ok(a, (size_t)n - 1, &nfam));
  free(a);
  free(b);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* Family names, types and help texts: the text exposition's # HELP and
 * # TYPE lines, in order. */
static void compare_families(const ttft_snapshot *s, const char *what) {
  long n;
  unsigned char *pb = format_pb(s, &n);
  char *text = format_text(s);
  EXPECT_NOT_NULL(pb);
  EXPECT_NOT_NULL(text);
  if (!pb || !text) {
    free(pb);
    free(text);
    return;
  }
  static const char *const types[] = {"counter", "gauge", "summary", "untyped", "histogram"};
  rd r = {pb, pb + n, 0};
  const char *t = text;
  unsigned nfam = 0, mismatches = 0;
  while (r.p < r.end) {
    uint64_t len = rd_varint(&r);
    if (r.bad || len > (uint64_t)(r.end - r.p)) break;
    rd m = {r.p, r.p + len, 0};
    r.p += len;
    fld f;
    char name[256] = "", help[1024] = "";
    uint64_t type = 99;
    while (rd_next(&m, &f)) {
      size_t l = (size_t)(f.sub.end - f.sub.p);
      if (f.no == 1 && l < sizeof name) memcpy(name, f.sub.p, l), name[l] = 0;
      if (f.no == 2 && l < sizeof help) memcpy(help, f.sub.p, l), help[l] = 0;
      if (f.no == 3) type = f.v;
    }
    /* the next # HELP / # TYPE pair of the text */
    const char *h = strstr(t, "# HELP "), *ty = h ? strstr(h, "# TYPE ") : NULL;
    if (!h || !ty) {
      fprintf(stderr, "%s: protobuf family %s has no text counterpart\n", what, name);
      mismatches++;
      break;
    }
    char want_line[1400];
    snprintf(want_line, sizeof want_line, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
             type < 5 ? types[type] : "?");
    const char *eol = strchr(ty, '\n');
    size_t got_len = eol ? (size_t)(eol + 1 - h) : strlen(h);
    if (strlen(want_line) != got_len || memcmp(want_line, h, got_len) != 0) {
      fprintf(stderr, "%s: family %u differs:\n  protobuf: %s  text:     %.*s", what, nfam,
              want_line, (int)got_len, h);
      mismatches++;
    }
    t = eol ? eol + 1 : h + strlen(h);
    nfam++;
  }
  EXPECT_FALSE(r.bad);
  EXPECT_TRUE(strstr(t, "# HELP ") == NULL); /* no text family left over */
  EXPECT_EQ_INT(0, mismatches);
  EXPECT_TRUE(nfam >= 20);
  free(pb);
  free(text);
}

/* families: names, types, help as the text exposition, for one
 * configuration variant (0 the defaults, 1 summaries and a model label,
 * 2 a namespace and a constant label, 3 classic histograms only and idle
 * classes exported) */
static void families(int variant) {
  ttft_config c;
  ttft_config_init(&c);
  static const ttft_label lbl[] = {{"replica", "r\xFF\"1"}, {"le", "bad"}};
  if (variant == 1) c.prom_summaries = 1, c.model = "m";
  if (variant == 2) c.metric_namespace = "inference_", c.const_labels = lbl, c.n_const_labels = 1;
  if (variant == 3) c.native_histograms = 0, c.export_idle_classes = 1;
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  if (!r) return;
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.ttft_ns = 200000000;
  int chat = ttft_class_add(r, "chat", &slo);
  ttft_request req;
  ttft_request_init(&req);
  req.class_id = chat;
  req.prefix_hit = 1;
  req.prompt_tokens = 700;
  uint64_t t = UINT64_C(1000000000000);
  for (int i = 0; i < 50; i++) {
    ttft_seq q = ttft_begin_ex(r, &req, t);
    ttft_token_emitted(r, q, 1, t + 1000000 * (uint64_t)(i + 1));
    ttft_token_emitted(r, q, 2, t + 3000000 * (uint64_t)(i + 1));
    ttft_stream_end(r, q, i % 5 ? TTFT_COMPLETED : TTFT_CANCELLED, t + 4000000 * (uint64_t)(i + 1));
    t += UINT64_C(1000000000);
  }
  ttft_snapshot *s = ttft_snapshot_take(r);
  char what[32];
  snprintf(what, sizeof what, "variant %d", variant);
  compare_families(s, what);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}
TEST(families_default) { families(0); }
TEST(families_summaries_model) { families(1); }
TEST(families_namespace_labels) { families(2); }
TEST(families_classic_only) { families(3); }

/* Every internal bucket, every schema: record its lowest and highest value;
 * the decoded native buckets, read in order, say where each went. */
/* bound: every internal bucket, every schema */
TEST(bound_all_buckets) {
  size_t nv = 2 * INTERNAL_BUCKETS;
  uint64_t *v = malloc(nv * sizeof *v);
  for (uint32_t i = 0; i < INTERNAL_BUCKETS; i++) {
    uint64_t lo, hi;
    internal_bucket(i, &lo, &hi);
    v[2 * i] = lo;
    v[2 * i + 1] = hi;
  }
  for (int schema = -4; schema <= 8; schema++) {
    ttft_config c;
    ttft_config_init(&c);
    c.native_schema = schema;
    ttft_registry *r = ttft_registry_new(&c);
    record_ttft(r, v, nv);
    ttft_snapshot *s = ttft_snapshot_take(r);
    long n;
    unsigned char *pb = format_pb(s, &n);
    nhist *h = get_hist(pb, (size_t)n, TTFT_FAMILY, "class", "default");
    EXPECT_TRUE(h->found && h->native && !h->bad);
    EXPECT_EQ_INT(schema, h->schema);
    EXPECT_EQ_DBL(0x1p-128, h->zt);
    EXPECT_EQ_U64(2, h->zc); /* the two observations of 0 */
    EXPECT_EQ_U64(nv, h->count);
    double bound = native_bound(schema), worst = 0, worst_small = 0;
    uint64_t seen = h->zc;
    uint32_t i = 1; /* internal bucket 0 is the zero bucket */
    int order_ok = 1;
    for (size_t k = 0; k < h->nb; k++) {
      if (h->cnt[k] % 2) order_ok = 0; /* whole internal buckets only */
      double L = bucket_upper(schema, h->idx[k] - 1), U = bucket_upper(schema, h->idx[k]);
      for (uint64_t j = 0; j < h->cnt[k] / 2; j++, i++) {
        uint64_t lo, hi;
        internal_bucket(i, &lo, &hi);
        double los = (double)lo / 1e9, his = (double)hi / 1e9;
        double e = fmax(U / los - 1, 1 - L / his); /* worst estimate vs worst value */
        if (lo < 256) worst_small = fmax(worst_small, e);
        else worst = fmax(worst, e);
        /* the bucket's midpoint (the library's own quantile) is in it */
        double mid = (double)(lo + (hi - lo) / 2) / 1e9;
        if (!(mid > L * (1 - 1e-12) && mid <= U * (1 + 1e-12))) order_ok = 0;
      }
      seen += h->cnt[k];
    }
    EXPECT_EQ_U64(nv, seen);
    EXPECT_EQ_U64(INTERNAL_BUCKETS, i);
    EXPECT_TRUE(order_ok);
    EXPECT_TRUE(worst < bound);
    EXPECT_TRUE(worst_small < exp2(ldexp(1.0, -schema)) - 1 + 1e-12);
    fprintf(stderr, "   schema %2d: worst over all buckets %.4f %% (>= 256 ns), %.4f %% (< 256 ns); "
                    "bound %.4f %%; %zu native buckets\n",
            schema, 100 * worst, 100 * worst_small, 100 * bound, h->nb);
    nh_free(h);
    free(pb);
    ttft_snapshot_free(s);
    ttft_registry_free(r);
  }
  free(v);
}

/* Draw n values from one of several shapes. */
static void draw(uint64_t *v, size_t n, int shape) {
  for (size_t i = 0; i < n; i++) {
    double u = unit();
    switch (shape) {
    case 0: v[i] = (uint64_t)(2.5e8 * exp(0.6 * sqrt(-2 * log(unit())) * cos(6.2831853 * u))); break;
    case 1: v[i] = u < 0.6 ? 40000000 + rnd() % 5000000 : 900000000 + rnd() % 900000000; break;
    case 2: v[i] = (uint64_t)(1e8 / pow(u, 1 / 1.3)); break;          /* Pareto */
    case 3: v[i] = 1 + rnd() % 400; break;                            /* tiny, exact region */
    case 4: v[i] = (uint64_t)(1e3 * pow(1e9, u)); break;              /* 1 us .. 1000 s */
    default: v[i] = (rnd() % 4) * 33333333; break;                    /* point masses, zeros */
    }
  }
}

/* The native bucket (lower, upper] where the cumulative count first
 * reaches the integer rank k (zero bucket first). */
static int bucket_of_rank(const nhist *h, uint64_t k, double *lo, double *hi) {
  uint64_t cum = h->zc;
  if (h->zc && cum >= k) {
    *lo = 0, *hi = h->zt;
    return 1;
  }
  for (size_t i = 0; i < h->nb; i++) {
    cum += h->cnt[i];
    if (h->cnt[i] && cum >= k) {
      *lo = bucket_upper(h->schema, h->idx[i] - 1);
      *hi = bucket_upper(h->schema, h->idx[i]);
      return 1;
    }
  }
  return 0;
}

/* quantiles: PromQL over the native buckets vs exact, every schema */
TEST(promql_quantiles) {
  /* q in parts per 10000, so the nearest rank ceil(q N) is exact */
  static const uint64_t qs[] = {10, 100, 1000, 2500, 5000, 7500, 9000, 9500, 9900, 9990, 9999};
  enum { N = 20000 };
  uint64_t *v = malloc(N * sizeof *v), *sorted = malloc(N * sizeof *sorted);
  unsigned checks = 0, in_bucket = 0, lib_checks = 0;
  for (int schema = -4; schema <= 8; schema++) {
    double worst = 0;
    for (int shape = 0; shape < 6; shape++) {
      size_t n = shape == 5 ? 997 : N;
      draw(v, n, shape);
      ttft_config c;
      ttft_config_init(&c);
      c.native_schema = schema;
      ttft_registry *r = ttft_registry_new(&c);
      record_ttft(r, v, n);
      ttft_snapshot *s = ttft_snapshot_take(r);
      long len;
      unsigned char *pb = format_pb(s, &len);
      nhist *h = get_hist(pb, (size_t)len, TTFT_FAMILY, "class", "default");
      EXPECT_TRUE(h->found && !h->bad);
      memcpy(sorted, v, n * sizeof *v);
      qsort(sorted, n, sizeof *sorted, cmp_u64);
      double bound = native_bound(schema);
      for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
        double q = (double)qs[k] / 10000;
        /* PromQL: rank q*N in doubles; it aims at x(ceil(q*N)) */
        double rank = q * (double)n;
        size_t want = (size_t)ceil(rank);
        if (want < 1) want = 1;
        double exact = (double)sorted[want - 1] / 1e9, lo, hi;
        double e = promql_quantile(h, rank, &lo, &hi);
        checks++;
        if (exact == 0) { /* the zero bucket: absolute error <= threshold */
          EXPECT_TRUE(e >= 0 && e <= 0x1p-128);
          continue;
        }
        double err = fabs(e / exact - 1);
        worst = fmax(worst, err);
        if (err >= bound) {
          fprintf(stderr, "   schema %d shape %d q %g: exact %.9g promql %.9g (%.4f %%)\n", schema,
                  shape, q, exact, e, 100 * err);
          EXPECT_TRUE(err < bound);
        }
        /* the library's own quantile (nearest rank, exact) lies in the
         * native bucket that holds that rank, except where it answers the
         * exact min or max (ranks 1 and N, and ranks in min's or max's
         * internal bucket, whose midpoint it clamps into [min, max] while
         * the native map does not) */
        uint64_t rk = (qs[k] * n + 9999) / 10000;
        double lib = (double)ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, q) / 1e9;
        if (rk > 1 && rk < n && lib != (double)sorted[0] / 1e9 && lib != (double)sorted[n - 1] / 1e9) {
          double b0 = NAN, b1 = NAN;
          lib_checks++;
          if (bucket_of_rank(h, rk, &b0, &b1) && lib > b0 * (1 - 1e-12) && lib <= b1 * (1 + 1e-12))
            in_bucket++;
          else
            fprintf(stderr, "   schema %d q %g: library %.9g outside (%.9g, %.9g]\n", schema, q,
                    lib, b0, b1);
        }
      }
      nh_free(h);
      free(pb);
      ttft_snapshot_free(s);
      ttft_registry_free(r);
    }
    fprintf(stderr, "   schema %2d: worst PromQL error %.4f %% (bound %.4f %%)\n", schema,
            100 * worst, 100 * native_bound(schema));
  }
  EXPECT_EQ_U64(lib_checks, in_bucket);
  EXPECT_TRUE(checks > 500);
  free(v);
  free(sorted);
}

/* Three registries with different traffic, native histograms summed index
 * by index (what sum() does in PromQL), vs the union's exact quantile. */
/* sum of three replicas' native histograms vs the exact union */
TEST(fleet_sum) {
  enum { N = 15000 };
  uint64_t *all = malloc(3 * N * sizeof *all);
  nhist *hs[3];
  for (int k = 0; k < 3; k++) {
    draw(all + k * N, N, k);
    ttft_registry *r = ttft_registry_new(NULL);
    record_ttft(r, all + k * N, N);
    ttft_snapshot *s = ttft_snapshot_take(r);
    long len;
    unsigned char *pb = format_pb(s, &len);
    hs[k] = get_hist(pb, (size_t)len, TTFT_FAMILY, "class", "default");
    EXPECT_TRUE(hs[k]->found && !hs[k]->bad && hs[k]->schema == 7);
    free(pb);
    ttft_snapshot_free(s);
    ttft_registry_free(r);
  }
  /* merged: indices span the union of the three */
  int32_t lo = INT32_MAX, hi = INT32_MIN;
  for (int k = 0; k < 3; k++)
    for (size_t i = 0; i < hs[k]->nb; i++) {
      if (hs[k]->idx[i] < lo) lo = hs[k]->idx[i];
      if (hs[k]->idx[i] > hi) hi = hs[k]->idx[i];
    }
  nhist *m = nh_new();
  m->schema = 7;
  m->zt = 0x1p-128;
  m->nb = (size_t)(hi - lo + 1);
  m->idx = malloc(m->nb * sizeof *m->idx);
  m->cnt = calloc(m->nb, sizeof *m->cnt);
  for (size_t i = 0; i < m->nb; i++) m->idx[i] = lo + (int32_t)i;
  for (int k = 0; k < 3; k++) {
    m->zc += hs[k]->zc;
    m->count += hs[k]->count;
    for (size_t i = 0; i < hs[k]->nb; i++) m->cnt[hs[k]->idx[i] - lo] += hs[k]->cnt[i];
  }
  qsort(all, 3 * N, sizeof *all, cmp_u64);
  EXPECT_EQ_U64(3 * N, m->count);
  static const double qs[] = {0.5, 0.9, 0.99, 0.999};
  for (size_t k = 0; k < 4; k++) {
    double rank = qs[k] * 3 * N, b0, b1;
    double exact = (double)all[(size_t)ceil(rank) - 1] / 1e9;
    double e = promql_quantile(m, rank, &b0, &b1);
    EXPECT_NEAR_REL(exact, e, native_bound(7));
    fprintf(stderr, "   p%g of the union: exact %.6f s, summed native %.6f s (%+.4f %%)\n",
            qs[k] * 100, exact, e, 100 * (e / exact - 1));
  }
  for (int k = 0; k < 3; k++) nh_free(hs[k]);
  nh_free(m);
  free(all);
}

/* native_histograms = 0: classic buckets only, no spans or deltas */
TEST(classic_only) {
  ttft_config c;
  ttft_config_init(&c);
  c.native_histograms = 0;
  ttft_registry *r = ttft_registry_new(&c);
  uint64_t v[] = {0, 5, 3000000, 45000000, 800000000};
  record_ttft(r, v, 5);
  ttft_snapshot *s = ttft_snapshot_take(r);
  long n;
  unsigned char *pb = format_pb(s, &n);
  nhist *h = get_hist(pb, (size_t)n, TTFT_FAMILY, "class", "default");
  EXPECT_TRUE(h->found && !h->bad);
  EXPECT_FALSE(h->native);
  EXPECT_EQ_U64(0, h->nspan);
  EXPECT_EQ_U64(0, h->ndelta);
  EXPECT_EQ_U64(5, h->count);
  EXPECT_EQ_U64(21, h->nclassic); /* the OTel TTFT bounds to 120 s; +Inf is implied */
  EXPECT_EQ_DBL(0.001, h->le[0]);
  EXPECT_EQ_U64(2, h->cum[0]);    /* 0 and 5 ns are <= 1 ms */
  EXPECT_EQ_DBL(0.848000005, h->sum);
  nh_free(h);
  free(pb);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* an empty histogram: native, with the no-op span and nothing else; the
 * zero bucket's threshold */
TEST(empty_native_histogram) {
  ttft_config c;
  ttft_config_init(&c);
  c.export_idle_classes = 1;
  ttft_registry *r = ttft_registry_new(&c);
  ttft_snapshot *s = ttft_snapshot_take(r);
  long n;
  unsigned char *pb = format_pb(s, &n);
  nhist *h = get_hist(pb, (size_t)n, TTFT_FAMILY, "class", "default");
  EXPECT_TRUE(h->found && h->native && !h->bad);
  EXPECT_EQ_INT(7, h->schema);
  EXPECT_EQ_U64(1, h->nspan);
  EXPECT_EQ_INT(0, h->span_off[0]);
  EXPECT_EQ_U64(0, h->span_len[0]);
  EXPECT_EQ_U64(0, h->ndelta);
  EXPECT_EQ_U64(0, h->count);
  EXPECT_EQ_U64(0, h->zc);
  EXPECT_EQ_DBL(0x1p-128, h->zt);
  nh_free(h);
  free(pb);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* spans: a gap of up to 2 empty buckets stays in the span as zeros, a
 * longer one starts a new span */
TEST(span_gaps) {
  ttft_config c;
  ttft_config_init(&c);
  c.native_schema = 0; /* buckets (2^(k-1), 2^k] seconds */
  ttft_registry *r = ttft_registry_new(&c);
  uint64_t w[] = {750000000, 3000000000u, 24000000000u, UINT64_C(3000000000000)};
  record_ttft(r, w, 4); /* indices 0, 2, 5, 12: well inside their buckets */
  ttft_snapshot *s = ttft_snapshot_take(r);
  long n;
  unsigned char *pb = format_pb(s, &n);
  nhist *h = get_hist(pb, (size_t)n, TTFT_FAMILY, "class", "default");
  EXPECT_TRUE(h->found && !h->bad);
  EXPECT_EQ_U64(2, h->nspan);
  EXPECT_EQ_INT(0, h->span_off[0]);
  EXPECT_EQ_U64(6, h->span_len[0]); /* 0 1 2 3 4 5 */
  EXPECT_EQ_INT(6, h->span_off[1]); /* 6 .. 11 empty */
  EXPECT_EQ_U64(1, h->span_len[1]);
  static const int64_t want_d[] = {1, -1, 1, -1, 0, 1, 0};
  EXPECT_EQ_U64(7, h->ndelta);
  for (size_t i = 0; i < 7 && i < h->ndelta; i++) EXPECT_EQ_INT(want_d[i], h->delta[i]);
  nh_free(h);
  free(pb);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* A duration drawn log-uniformly in [base 2^-(p+1), base 2^(p+1)]: every
 * phase p reaches below and above every earlier one. */
static uint64_t phase_draw(double base, int p, int edge) {
  double lo = base * exp2(-(p + 1)), hi = base * exp2(p + 1);
  double v = edge < 0 ? lo : edge > 0 ? hi : lo * pow(hi / lo, unit());
  return v < 1 ? 1 : (uint64_t)v;
}

/* One stream of class cls in phase p; edge -1 / +1 draws every duration at
 * the phase's low / high end. Returns the time after it. */
static uint64_t phase_stream(ttft_registry *r, int cls, int p, int edge, uint64_t t) {
  ttft_request req;
  ttft_request_init(&req);
  req.class_id = cls;
  req.prompt_tokens = (uint32_t)(1 + rnd() % 5000);
  req.prefix_hit = (int)(rnd() % 3) - 1;
  ttft_seq s = ttft_begin_ex(r, &req, t);
  uint64_t now = t + phase_draw(2e6, p, edge); /* queue */
  ttft_mark(r, s, TTFT_PHASE_SCHEDULED, now);
  uint32_t u = (uint32_t)(rnd() % 16);
  int status = u == 0 ? TTFT_ERROR : u < 4 ? TTFT_CANCELLED : TTFT_COMPLETED;
  unsigned ntok = edge > 0 ? 4u + 6u * (unsigned)p : edge < 0 ? 0u : (unsigned)(rnd() % (3 + 6 * (unsigned)p));
  if (status == TTFT_CANCELLED && rnd() % 3 == 0) ntok = 0; /* abandoned before the first token */
  now += phase_draw(60e6, p, edge); /* prefill: TTFT = queue + prefill */
  for (unsigned k = 0; k < ntok; k++) {
    if (k) now += phase_draw(20e6, p, edge); /* a gap */
    ttft_token_emitted(r, s, 1 + (uint32_t)(rnd() % 3), now);
  }
  now += phase_draw(1e6, p, edge);
  ttft_stream_end(r, s, (ttft_status)status, now);
  return now + 1000;
}

/* phased workloads: new minima and maxima of every metric in every phase,
 * four classes (with and without SLO budgets), schemas 7, 3 and 0, a
 * protobuf scrape after every batch: nothing ever falls */
TEST(native_buckets_are_counters) {
  static const int schemas[] = {7, 3, 0};
  unsigned checked = 0, scrapes = 0, fell = 0;
  size_t nseries = 0;
  for (size_t si = 0; si < sizeof schemas / sizeof schemas[0]; si++) {
    ttft_config c;
    ttft_config_init(&c);
    c.native_schema = schemas[si];
    c.prom_summaries = 1;
    ttft_registry *r = ttft_registry_new(&c);
    EXPECT_NOT_NULL(r);
    if (!r) return;
    ttft_slo slo;
    ttft_slo_init(&slo);
    slo.ttft_ns = 80000000, slo.tpot_ns = 30000000, slo.e2e_ns = 2000000000;
    int cls[4] = {0, ttft_class_add(r, "chat", &slo), ttft_class_add(r, "batch", NULL), 0};
    slo.ttft_ns = 5000000, slo.tpot_ns = 0, slo.e2e_ns = 0;
    cls[3] = ttft_class_add(r, "tight", &slo);
    ts_scrape prev = {0};
    uint64_t t = UINT64_C(1000000000000);
    for (int p = 0; p < 6; p++) {
      for (int batch = 0; batch < 4; batch++) {
        for (int k = 0; k < 4; k++) {
          /* each class sees the new extremes, in a different batch */
          int edge = batch == 1 + k % 3 ? (k % 2 ? 1 : -1) : 0;
          t = phase_stream(r, cls[k], p, edge, t);
          t = phase_stream(r, cls[k], p, -edge, t);
          for (int j = 0; j < 20; j++) t = phase_stream(r, cls[rnd() % 4], p, 0, t);
        }
        ttft_snapshot *s = ttft_snapshot_take(r);
        long n;
        unsigned char *pb = format_pb(s, &n);
        EXPECT_NOT_NULL(pb);
        ts_scrape cur = {0};
        if (pb) ts_collect(pb, (size_t)n, &cur);
        EXPECT_FALSE(cur.bad);
        scrapes++;
        if (prev.v) fell += ts_compare(&prev, &cur, &checked);
        nseries = cur.n;
        ts_free(&prev);
        prev = cur;
        free(pb);
        ttft_snapshot_free(s);
      }
    }
    ts_free(&prev);
    ttft_registry_free(r);
  }
  fprintf(stderr, "   %u scrapes, %zu counter/histogram/summary series each, %u values compared, "
                  "%u fell\n", scrapes, nseries, checked, fell);
  EXPECT_EQ_INT(0, fell);
  EXPECT_TRUE(checked > 100000);
}

static int g_fail_alloc;
static void *fail_alloc(void *ctx, size_t n) {
  (void)ctx;
  return g_fail_alloc ? NULL : calloc(1, n);
}
static void fail_free(void *ctx, void *p) {
  (void)ctx;
  free(p);
}

/* memory: a failing allocator gives TTFT_ENOMEM */
TEST(enomem) {
  ttft_allocator a = {fail_alloc, fail_free, NULL};
  EXPECT_ERR(TTFT_OK, ttft_set_allocator(&a));
  ttft_config c;
  ttft_config_init(&c);
  ttft_registry *r = ttft_registry_new(&c);
  uint64_t v[] = {1000, 2000000};
  record_ttft(r, v, 2);
  ttft_snapshot *s = ttft_snapshot_take(r);
  g_fail_alloc = 1;
  char buf[64];
  EXPECT_ERR(TTFT_ENOMEM, ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS_PROTOBUF, NULL, 0));
  EXPECT_ERR(TTFT_ENOMEM, ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS_PROTOBUF, buf, sizeof buf));
  g_fail_alloc = 0;
  EXPECT_TRUE(ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS_PROTOBUF, NULL, 0) > 0);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
  ttft_set_allocator(NULL);
}

/* UTF-8 check of every string of the stream (label values included). */
static int strings_utf8(const unsigned char *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = p[i];
    size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!k || i + k > n) return 0;
    for (size_t j = 1; j < k; j++)
      if ((p[i + j] & 0xC0) != 0x80) return 0;
    i += k;
  }
  return 1;
}

/* Every LabelPair of every metric of the stream: valid UTF-8. */
static int labels_utf8(const unsigned char *buf, size_t n, unsigned *nlabels) {
  rd r = {buf, buf + n, 0};
  *nlabels = 0;
  while (r.p < r.end) {
    uint64_t len = rd_varint(&r);
    if (r.bad || len > (uint64_t)(r.end - r.p)) return 0;
    rd m = {r.p, r.p + len, 0};
    r.p += len;
    fld f;
    while (rd_next(&m, &f)) {
      if (f.no != 4) continue;
      rd met = f.sub;
      fld g;
      while (rd_next(&met, &g)) {
        if (g.no != 1) continue;
        rd lp = g.sub;
        fld x;
        while (rd_next(&lp, &x)) {
          if (!strings_utf8(x.sub.p, (size_t)(x.sub.end - x.sub.p))) return 0;
          (*nlabels)++;
        }
      }
    }
  }
  return !r.bad;
}

/* The corruptions of the hostile tests, one per round. */
static void corrupt(ttft_snapshot *s, int round) {
  switch (round) {
  case 0: s->native_schema = 99, s->native_histograms = -3; break;
  case 1:
    s->native_schema = -1000;
    for (uint32_t k = 0; k < s->nclasses; k++) { /* min > max, and beyond every bucket */
      s->cls[k].h[TTFT_METRIC_TTFT]->min = UINT64_MAX;
      s->cls[k].h[TTFT_METRIC_TTFT]->max = 3;
    }
    break;
  case 2:
    memset(s->cls[0].name, 'x', sizeof s->cls[0].name);     /* no NUL */
    memset(s->model, 0xFF, sizeof s->model);                /* no NUL, invalid UTF-8 */
    memcpy(s->cls[1].name, "\xC3(\xED\xA0\x80", 6);          /* invalid UTF-8 */
    memcpy(s->ns, "9x-\xFF.", 6);                           /* sanitised in names */
    break;
  case 3:
    for (uint32_t k = 0; k < s->nclasses; k++) {
      s->cls[k].h[TTFT_METRIC_TTFT]->count = UINT64_MAX - 1;
      s->cls[k].h[TTFT_METRIC_TTFT]->sum = UINT64_MAX;
      s->cls[k].ctr[TTFT_COUNTER_BEGUN] = UINT64_MAX;
    }
    break;
  case 4:
    s->prom_n_buckets[TTFT_METRIC_TTFT] = 1000; /* more than the array: clamped */
    for (int j = 0; j < TTFT_MAX_PROM_BUCKETS; j++)
      s->prom_buckets[TTFT_METRIC_TTFT][j] = (uint64_t)(j % 7) * 1000000; /* not ascending */
    s->n_band_edges = 1000;
    break;
  default:
    s->n_const_labels = 1000; /* clamped; names are empty: skipped */
    s->nclasses = 1;
    break;
  }
}

/* hostile: a snapshot corrupted in one way (corrupt(), above) still formats
 * into a stream that decodes, with valid UTF-8 labels and the families of
 * the text exposition */
static void hostile(int round) {
  ttft_config c;
  ttft_config_init(&c);
  c.model = "model";
  ttft_registry *r = ttft_registry_new(&c);
  int chat = ttft_class_add(r, "chat", NULL);
  uint64_t v[64];
  for (int i = 0; i < 64; i++) v[i] = (uint64_t)1 << (i % 44);
  record_ttft(r, v, 64);
  ttft_request req;
  ttft_request_init(&req);
  req.class_id = chat;
  ttft_seq q = ttft_begin_ex(r, &req, 5);
  ttft_token_emitted(r, q, 3, 900000);
  ttft_stream_end(r, q, TTFT_COMPLETED, 900001);
  ttft_snapshot *s = ttft_snapshot_take(r);
  corrupt(s, round);
  long n = ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS_PROTOBUF, NULL, 0);
  EXPECT_TRUE(n > 0);
  unsigned char *pb = n > 0 ? malloc((size_t)n + 1) : NULL;
  if (pb) {
    EXPECT_EQ_INT(n, ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS_PROTOBUF, (char *)pb, (size_t)n + 1));
    unsigned nfam = 0, nlab = 0;
    EXPECT_TRUE(stream_ok(pb, (size_t)n, &nfam));
    EXPECT_TRUE(labels_utf8(pb, (size_t)n, &nlab));
    EXPECT_TRUE(nlab > 10);
    nhist *h = get_hist(pb, (size_t)n, TTFT_FAMILY, NULL, NULL);
    EXPECT_TRUE(h->found && !h->bad);
    char what[32];
    snprintf(what, sizeof what, "hostile round %d", round);
    compare_families(s, what);
    if (round == 0) EXPECT_EQ_INT(8, h->schema);
    if (round == 1) EXPECT_EQ_INT(-4, h->schema);
    if (round == 1 || round == 3) { /* spans ascend; the buckets' counts are there */
      uint64_t tot = h->zc;
      for (size_t i = 0; i < h->nb; i++) tot += h->cnt[i];
      EXPECT_TRUE(tot > 0);
    }
    nh_free(h);
  }
  free(pb);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}
TEST(hostile_schema_out_of_range) { hostile(0); }
TEST(hostile_min_above_max) { hostile(1); }
TEST(hostile_names_without_nul) { hostile(2); }
TEST(hostile_huge_counts) { hostile(3); }
TEST(hostile_too_many_bounds) { hostile(4); }
TEST(hostile_const_labels_clamped) { hostile(5); }

TU_MAIN()
