/*
 * test_exemplar_edges.c — an exemplar sits on the bucket that counts its
 * observation (issue 27.5), in every exposition that carries exemplars.
 *
 * A classic bucket's count takes whole internal buckets (format_prom.c
 * cumulative): the internal bucket that straddles a bound is counted above
 * it, so a TTFT of exactly 1.000 s is counted under le="2.5". The exemplar
 * must follow the same rule, or no bucket shows it (1.2 looked in
 * (le_prev, le] by value: 0 exemplars).
 *
 * For every classic bound B of each layout that carries exemplars (TTFT,
 * ITL and the per-sequence worst gap; the defaults and a custom layout),
 * one traced request whose only observation is at B, just below and just
 * above it, and at both edges of the internal bucket around B. Then:
 *   openmetrics  exactly one bucket line of the family has an exemplar,
 *                with the request's trace id, and it is the bucket whose
 *                cumulative count first reaches 1 (the one that counts it)
 *   protobuf     the same for the classic buckets (none carries it when
 *                the bucket is +Inf, which the message leaves implicit),
 *                with native buckets on and off; with native buckets the
 *                exemplar is also in Histogram.exemplars once, exactly
 *                when it has a timestamp
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"
#include "task.h"
#include "render.h"

#define MS UINT64_C(1000000)
#define T0 UINT64_C(1000000000000)
#define TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define MAXB (TTFT_MAX_PROM_BUCKETS + 1)

typedef enum kind { K_TTFT, K_GAP } kind;

static const char *const fam_ttft[] = {"gen_ai_server_time_to_first_token_seconds", NULL};
static const char *const fam_gap[] = {"llm_inter_token_latency_seconds",
                                      "llm_request_inter_token_latency_max_seconds", NULL};

/* One registry, one traced request whose only TTFT (K_TTFT) or only gap
 * (K_GAP) observation is v. bounds NULL: the default layout. */
static ttft_snapshot *one_request(kind k, uint64_t v, const uint64_t *bounds, uint32_t nb,
                                  int native) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 4;
  c.max_threads = 1;
  c.native_histograms = native;
  if (bounds) {
    ttft_metric m = k == K_TTFT ? TTFT_METRIC_TTFT : TTFT_METRIC_ITL;
    c.prom_buckets[m] = bounds, c.prom_n_buckets[m] = nb;
    if (k == K_GAP) c.prom_buckets[TTFT_METRIC_SEQ_ITL_MAX] = bounds, c.prom_n_buckets[TTFT_METRIC_SEQ_ITL_MAX] = nb;
  }
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  if (!r) return NULL;
  ttft_request q;
  ttft_request_init(&q);
  q.trace_id = TRACE;
  ttft_seq s = ttft_begin_ex(r, &q, T0);
  EXPECT_TRUE(s != 0);
  uint64_t t = T0;
  if (k == K_TTFT) {
    t += v;
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t));
  } else {
    t += MS;
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t));
    t += v;
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t));
  }
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, t));
  ttft_snapshot *snap = ttft_snapshot_take(r);
  EXPECT_NOT_NULL(snap);
  ttft_registry_free(r);
  return snap;
}

/* ------------------------------------------------------------ openmetrics */
typedef struct om_hist {
  unsigned n;              /* bucket lines, +Inf last          */
  double le[MAXB];         /* seconds; INFINITY for +Inf       */
  uint64_t cum[MAXB];
  int ex[MAXB];            /* the line carries an exemplar     */
  int ex_trace_ok[MAXB];   /* ... whose trace id is TRACE      */
  int ex_ts[MAXB];         /* ... with a timestamp             */
} om_hist;

/* The bucket lines of family fam in an OpenMetrics text (one class). */
static void om_parse(const char *text, const char *fam, om_hist *h) {
  char prefix[160];
  snprintf(prefix, sizeof prefix, "%s_bucket{", fam);
  size_t pl = strlen(prefix);
  memset(h, 0, sizeof *h);
  for (const char *p = text; p && *p;) {
    const char *eol = strchr(p, '\n');
    if (!eol) eol = p + strlen(p);
    if ((size_t)(eol - p) > pl && !strncmp(p, prefix, pl) && h->n < MAXB) {
      const char *le = strstr(p, "le=\"");
      const char *close = le ? strstr(le, "\"} ") : NULL;
      EXPECT_TRUE(le && close && close < eol);
      if (le && close && close < eol) {
        le += 4;
        h->le[h->n] = !strncmp(le, "+Inf", 4) ? INFINITY : strtod(le, NULL);
        h->cum[h->n] = strtoull(close + 3, NULL, 10);
        const char *ex = strstr(close, " # {trace_id=\"");
        if (ex && ex < eol) {
          h->ex[h->n] = 1;
          h->ex_trace_ok[h->n] = !strncmp(ex + 14, TRACE "\"}", 34);
          /* ` # {trace_id="..."} value timestamp`: two numbers after the labels */
          const char *after = strstr(ex, "} ");
          const char *sp = after ? memchr(after + 2, ' ', (size_t)(eol - after - 2)) : NULL;
          h->ex_ts[h->n] = sp != NULL;
        }
        h->n++;
      }
    }
    p = *eol ? eol + 1 : eol;
  }
}

/* The bucket that counts the one observation: the first whose cumulative
 * count is 1. */
static unsigned counting_bucket(const uint64_t *cum, unsigned n) {
  for (unsigned j = 0; j < n; j++)
    if (cum[j] >= 1) return j;
  return n;
}

/* ---------------------------------------------------------- protobuf */
typedef struct rd {
  const unsigned char *p, *end;
  int bad;
} rd;

static uint64_t rd_varint(rd *r) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70 && r->p < r->end; shift += 7) {
    unsigned char b = *r->p++;
    v |= (uint64_t)(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  r->bad = 1;
  return 0;
}

typedef struct fld {
  uint32_t no, wt;
  uint64_t v;
  rd sub;
} fld;

static int rd_next(rd *r, fld *f) {
  if (r->bad || r->p >= r->end) return 0;
  uint64_t tag = rd_varint(r);
  f->no = (uint32_t)(tag >> 3), f->wt = (uint32_t)(tag & 7);
  if (f->wt == 0) {
    f->v = rd_varint(r);
  } else if (f->wt == 1) {
    if (r->end - r->p < 8) return r->bad = 1, 0;
    r->p += 8;
  } else if (f->wt == 2) {
    uint64_t n = rd_varint(r);
    if (r->bad || n > (uint64_t)(r->end - r->p)) return r->bad = 1, 0;
    f->sub.p = r->p, f->sub.end = r->p + n, f->sub.bad = 0;
    r->p += n;
  } else {
    return r->bad = 1, 0;
  }
  return !r->bad;
}

static int str_is(const rd *s, const char *want) {
  size_t n = strlen(want);
  return (size_t)(s->end - s->p) == n && memcmp(s->p, want, n) == 0;
}

/* Whether an Exemplar message carries trace_id = TRACE, and a timestamp. */
static int pb_exemplar_ok(rd m, int *ts) {
  fld f;
  int trace = 0;
  *ts = 0;
  while (rd_next(&m, &f)) {
    if (f.no == 1 && f.wt == 2) {
      rd l = f.sub;
      fld g;
      int name = 0, val = 0;
      while (rd_next(&l, &g)) {
        if (g.no == 1) name = str_is(&g.sub, "trace_id");
        if (g.no == 2) val = str_is(&g.sub, TRACE);
      }
      trace |= name && val;
    }
    if (f.no == 3) *ts = 1;
  }
  return trace && !m.bad;
}

typedef struct pb_hist {
  int found;
  unsigned n;             /* classic buckets (no +Inf)          */
  uint64_t cum[MAXB];
  int ex[MAXB];
  unsigned nex_native;    /* Histogram.exemplars (field 16)     */
  unsigned bad_ex;        /* exemplars without trace id TRACE   */
} pb_hist;

/* The first Histogram of family fam in a length-delimited stream. */
static void pb_parse(const unsigned char *buf, size_t n, const char *fam, pb_hist *h) {
  memset(h, 0, sizeof *h);
  rd r = {buf, buf + n, 0};
  while (r.p < r.end && !h->found && !r.bad) {
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
      while (rd_next(&met, &g)) {
        if (g.no != 7) continue;
        h->found = 1;
        rd hist = g.sub;
        fld x;
        while (rd_next(&hist, &x)) {
          int ts;
          if (x.no == 3 && h->n < MAXB) {
            rd b = x.sub;
            fld y;
            while (rd_next(&b, &y)) {
              if (y.no == 1) h->cum[h->n] = y.v;
              if (y.no == 3) {
                h->ex[h->n] = 1;
                if (!pb_exemplar_ok(y.sub, &ts)) h->bad_ex++;
              }
            }
            h->n++;
          } else if (x.no == 16) {
            h->nex_native++;
            if (!pb_exemplar_ok(x.sub, &ts) || !ts) h->bad_ex++;
          }
        }
      }
    }
  }
  EXPECT_TRUE(h->found);
}

/* ------------------------------------------------------------- checks */
static unsigned g_cases, g_above_fine; /* cases; of them, counted above B */

/* One observation v: in every family of k, the exemplar is on the bucket
 * that counts v, in OpenMetrics and in protobuf (native on and off). */
static void check_value(kind k, uint64_t v, const uint64_t *bounds, uint32_t nb) {
  const char *const *fams = k == K_TTFT ? fam_ttft : fam_gap;
  for (int native = 0; native <= 1; native++) {
    ttft_snapshot *s = one_request(k, v, bounds, nb, native);
    if (!s) return;
    char *om = native ? NULL : render(s, TTFT_FORMAT_OPENMETRICS);
    long pn = 0;
    unsigned char *pb = (unsigned char *)render_len(s, TTFT_FORMAT_PROMETHEUS_PROTOBUF, &pn);
    for (int f = 0; fams[f]; f++) {
      om_hist oh;
      if (om) {
        om_parse(om, fams[f], &oh);
        EXPECT_TRUE(oh.n >= 2);
        unsigned want = counting_bucket(oh.cum, oh.n), nex = 0;
        EXPECT_TRUE(want < oh.n); /* +Inf counts everything */
        for (unsigned j = 0; j < oh.n; j++) nex += (unsigned)oh.ex[j];
        if (nex != 1 || want >= oh.n || !oh.ex[want] || !oh.ex_trace_ok[want])
          fprintf(stderr, "openmetrics %s, value %llu ns: counted under le=%g, %u exemplar(s)\n",
                  fams[f], (unsigned long long)v, want < oh.n ? oh.le[want] : NAN, nex);
        EXPECT_EQ_INT(1, nex);
        if (want < oh.n) {
          EXPECT_TRUE(oh.ex[want]);
          EXPECT_TRUE(oh.ex_trace_ok[want]);
          /* at or below the bound under it: the straddling case */
          if (want > 0 && (double)v <= oh.le[want - 1] * 1e9 + 0.5) g_above_fine++;
        }
      }
      if (pb) {
        pb_hist ph;
        pb_parse(pb, (size_t)pn, fams[f], &ph);
        unsigned want = counting_bucket(ph.cum, ph.n), nex = 0;
        for (unsigned j = 0; j < ph.n; j++) nex += (unsigned)ph.ex[j];
        EXPECT_EQ_INT(0, ph.bad_ex);
        if (want < ph.n) { /* a classic bucket counts it: that one carries it */
          if (nex != 1 || !ph.ex[want])
            fprintf(stderr, "protobuf %s (native %d), value %llu ns: counted in bucket %u, %u exemplar(s)\n",
                    fams[f], native, (unsigned long long)v, want, nex);
          EXPECT_EQ_INT(1, nex);
          EXPECT_TRUE(ph.ex[want]);
        } else { /* only +Inf counts it, which the message leaves implicit */
          EXPECT_EQ_INT(0, nex);
        }
        /* native: every exemplar again in Histogram.exemplars, when it has
         * a timestamp (the OpenMetrics line of the same request says) */
        if (!native) EXPECT_EQ_INT(0, ph.nex_native);
        else EXPECT_TRUE(ph.nex_native <= 1);
      }
    }
    free(om);
    free(pb);
    ttft_snapshot_free(s);
    g_cases++;
  }
}

/* The largest value of the internal bucket below the one holding v, and
 * the largest value of v's own bucket (hist.h: 128 buckets an octave). */
static uint64_t fine_below(uint64_t v) {
  if (v < 256) return v ? v - 1 : 0;
  unsigned shift = (unsigned)(63 - __builtin_clzll(v)) - 7;
  return ((v >> shift) << shift) - 1;
}
static uint64_t fine_top(uint64_t v) {
  if (v < 256) return v;
  unsigned shift = (unsigned)(63 - __builtin_clzll(v)) - 7;
  return (((v >> shift) + 1) << shift) - 1;
}

/* Every bound of the layout of k: the values around it. */
static void check_layout(kind k, const uint64_t *bounds, uint32_t nb) {
  uint64_t b[MAXB];
  uint32_t n = nb;
  if (bounds) {
    memcpy(b, bounds, nb * sizeof *b);
  } else { /* the default layout, as the exposition writes it */
    ttft_snapshot *s = one_request(k, 50 * MS, NULL, 0, 0);
    if (!s) return;
    char *om = render(s, TTFT_FORMAT_OPENMETRICS);
    om_hist oh;
    om_parse(om, (k == K_TTFT ? fam_ttft : fam_gap)[0], &oh);
    n = 0;
    for (unsigned j = 0; j + 1 < oh.n; j++) b[n++] = (uint64_t)llround(oh.le[j] * 1e9);
    EXPECT_TRUE(n >= 10);
    free(om);
    ttft_snapshot_free(s);
  }
  for (uint32_t j = 0; j < n; j++) {
    uint64_t B = b[j];
    uint64_t vals[] = {fine_below(B), B - 1, B, B + 1, fine_top(B), fine_top(B) + 1};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
      if (vals[i] > 0) check_value(k, vals[i], bounds, nb);
  }
}

TEST(ttft_default_bounds) {
  g_cases = g_above_fine = 0;
  check_layout(K_TTFT, NULL, 0);
  /* the case of the issue: exactly 1.000 s, counted (and shown) under 2.5 */
  check_value(K_TTFT, 1000 * MS, NULL, 0);
  fprintf(stderr, "%u cases, %u counted in the bucket above their bound\n", g_cases, g_above_fine);
  EXPECT_TRUE(g_cases >= 21 * 6 * 2);
  EXPECT_TRUE(g_above_fine > 0); /* the straddling case was exercised */
}

TEST(gap_default_bounds) {
  g_cases = g_above_fine = 0;
  check_layout(K_GAP, NULL, 0);
  EXPECT_TRUE(g_cases >= 60 * 6 * 2);
  EXPECT_TRUE(g_above_fine > 0);
}

/* Bounds that are no internal bucket's edge, and some that are (255, 256,
 * 2^k - 1), in ns. */
TEST(custom_bounds) {
  static const uint64_t b[] = {100,     255,       256,        1000,       4095,
                               4096,    123457,    1000000,    1048575,    999999937,
                               1000000000, UINT64_C(1) << 33, UINT64_C(30000000001)};
  g_cases = 0;
  check_layout(K_TTFT, b, sizeof b / sizeof b[0]);
  check_layout(K_GAP, b, sizeof b / sizeof b[0]);
  EXPECT_TRUE(g_cases > 0);
}

TU_MAIN()
