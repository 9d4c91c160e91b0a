/*
 * prom_series.h — expositions read back as time series, for tests that
 * check what Prometheus checks: any decrease of a counter, or of a
 * histogram's count, sum, zero count, classic bucket or native bucket,
 * is a counter reset (rate() and increase() then count the whole value
 * again), so successive scrapes of a live registry must never see one.
 *
 *   a strict protobuf reader      rd, fld, rd_varint, rd_next, as_double,
 *                                 unzigzag, str_is (metrics.proto's wire
 *                                 format; malformed input sets .bad)
 *   nhist, parse_hist             one Histogram message: classic buckets,
 *                                 spans and deltas expanded to counts
 *   ts_collect(buf, n, &sc)       every counter, histogram and summary
 *                                 series of a protobuf body
 *   ts_collect_text(text, &sc)    every sample of a counter, histogram or
 *                                 summary family of a Prometheus 0.0.4 or
 *                                 OpenMetrics text body (buckets, counts,
 *                                 sums, totals; not quantiles or _created)
 *   ts_compare(&old, &new, &n)    the values of old that fell (or whose
 *                                 series disappeared) in new; n counts the
 *                                 values compared
 *   ts_free(&sc)
 */
#ifndef TTFT_TEST_PROM_SERIES_H
#define TTFT_TEST_PROM_SERIES_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"

/* ------------------------------------------------------- strict reader */
typedef struct rd {
  const unsigned char *p, *end;
  int bad;
} rd;

static inline uint64_t rd_varint(rd *r) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (r->p >= r->end) break;
    unsigned char b = *r->p++;
    v |= (uint64_t)(b & 0x7F) << shift;
    if (!(b & 0x80)) {
      if (shift && b == 0) r->bad = 1; /* not minimal */
      return v;
    }
  }
  r->bad = 1;
  return 0;
}

typedef struct fld {
  uint32_t no, wt;
  uint64_t v; /* varint, or the 8 bytes of a fixed64 */
  rd sub;     /* wire type 2 */
} fld;

/* Next field of r: 1, or 0 at the end (r->bad set on malformed input). */
static inline int rd_next(rd *r, fld *f) {
  memset(f, 0, sizeof *f);
  if (r->bad || r->p >= r->end) return 0;
  uint64_t tag = rd_varint(r);
  f->no = (uint32_t)(tag >> 3);
  f->wt = (uint32_t)(tag & 7);
  if (f->no == 0) r->bad = 1;
  switch (f->wt) {
  case 0: f->v = rd_varint(r); break;
  case 1:
    if (r->end - r->p < 8) {
      r->bad = 1;
      return 0;
    }
    f->v = 0;
    for (int i = 0; i < 8; i++) f->v |= (uint64_t)r->p[i] << (8 * i);
    r->p += 8;
    break;
  case 2: {
    uint64_t n = rd_varint(r);
    if (r->bad || n > (uint64_t)(r->end - r->p)) {
      r->bad = 1;
      return 0;
    }
    f->sub.p = r->p;
    f->sub.end = r->p + n;
    f->sub.bad = 0;
    r->p += n;
    break;
  }
  default: r->bad = 1; return 0;
  }
  return !r->bad;
}

static inline double as_double(uint64_t bits) {
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

static inline int64_t unzigzag(uint64_t u) { return (int64_t)(u >> 1) ^ -(int64_t)(u & 1); }

static inline int str_is(const rd *s, const char *want) {
  size_t n = strlen(want);
  return (size_t)(s->end - s->p) == n && memcmp(s->p, want, n) == 0;
}

/* ----------------------------------------------------------- histograms */
typedef struct nhist {
  int found, native;
  int32_t schema;
  double zt, sum;
  uint64_t zc, count;
  size_t nclassic;
  double le[TTFT_MAX_PROM_BUCKETS + 1];
  uint64_t cum[TTFT_MAX_PROM_BUCKETS + 1];
  size_t nspan, ndelta, cap;
  int32_t span_off[16384];
  uint32_t span_len[16384];
  int64_t *delta;
  /* expanded: one entry per index the spans cover */
  size_t nb;
  int32_t *idx;
  uint64_t *cnt;
  int bad;
} nhist;

static inline nhist *nh_new(void) { return calloc(1, sizeof(nhist)); }
static inline void nh_free(nhist *h) {
  if (!h) return;
  free(h->delta);
  free(h->idx);
  free(h->cnt);
  free(h);
}

static inline void nh_push_delta(nhist *h, int64_t d) {
  if (h->ndelta == h->cap) {
    h->cap = h->cap ? 2 * h->cap : 256;
    h->delta = realloc(h->delta, h->cap * sizeof *h->delta);
  }
  h->delta[h->ndelta++] = d;
}

static inline void parse_hist(rd m, nhist *h) {
  fld f;
  while (rd_next(&m, &f)) {
    switch (f.no) {
    case 1: h->count = f.v; break;
    case 2: h->sum = as_double(f.v); break;
    case 3: {
      rd b = f.sub;
      fld g;
      if (h->nclassic > TTFT_MAX_PROM_BUCKETS) {
        h->bad = 1;
        break;
      }
      while (rd_next(&b, &g)) {
        if (g.no == 1) h->cum[h->nclassic] = g.v;
        else if (g.no == 2) h->le[h->nclassic] = as_double(g.v);
        else if (g.no == 3 && g.wt == 2) continue; /* the bucket's exemplar */
        else h->bad = 1;
      }
      h->nclassic++;
      break;
    }
    case 5: h->native = 1, h->schema = (int32_t)unzigzag(f.v); break;
    case 6: h->zt = as_double(f.v); break;
    case 7: h->zc = f.v; break;
    case 12: {
      rd s = f.sub;
      fld g;
      int32_t off = 0;
      uint32_t len = 0;
      while (rd_next(&s, &g)) {
        if (g.no == 1) off = (int32_t)unzigzag(g.v);
        else if (g.no == 2) len = (uint32_t)g.v;
        else h->bad = 1;
      }
      if (h->nspan < 16384) h->span_off[h->nspan] = off, h->span_len[h->nspan++] = len;
      else h->bad = 1;
      break;
    }
    case 13:
      if (f.wt == 2) {
        rd s = f.sub;
        while (s.p < s.end && !s.bad) nh_push_delta(h, unzigzag(rd_varint(&s)));
        if (s.bad) h->bad = 1;
      } else {
        nh_push_delta(h, unzigzag(f.v));
      }
      break;
    case 16: if (f.wt != 2) h->bad = 1; break; /* exemplars (native histograms) */
    default: h->bad = 1; /* nothing else is ever written */
    }
  }
  if (m.bad) h->bad = 1;
  /* expand spans + deltas */
  size_t total = 0;
  for (size_t i = 0; i < h->nspan; i++) total += h->span_len[i];
  if (total != h->ndelta) h->bad = 1;
  h->idx = malloc((total + 1) * sizeof *h->idx);
  h->cnt = malloc((total + 1) * sizeof *h->cnt);
  int64_t idx = 0, c = 0;
  size_t k = 0;
  for (size_t i = 0; i < h->nspan && !h->bad; i++) {
    idx = i == 0 ? h->span_off[0] : idx + h->span_off[i];
    if (i > 0 && h->span_off[i] < 0) h->bad = 1;
    for (uint32_t j = 0; j < h->span_len[i] && k < total; j++, k++) {
      c += h->delta[k];
      if (c < 0) h->bad = 1;
      h->idx[k] = (int32_t)idx++;
      h->cnt[k] = (uint64_t)c;
    }
  }
  h->nb = k;
}

/* ---------------------------------------------- counters over time
 * Prometheus reads any decrease of a counter, a histogram's count, sum,
 * zero count, classic bucket or native bucket as a reset: rate() and
 * increase() then count the whole value again. So successive scrapes of a
 * live registry must never see one fall, whatever min and max do. */
typedef struct ts_series {
  char key[512];     /* family name + labels */
  int kind;          /* 0 counter, 1 histogram, 2 summary */
  double value, sum; /* counter value; histogram / summary sum */
  uint64_t count, zc;
  size_t nclassic;
  double le[TTFT_MAX_PROM_BUCKETS + 1];
  uint64_t cum[TTFT_MAX_PROM_BUCKETS + 1];
  size_t nb;
  int32_t *idx;
  uint64_t *cnt;
} ts_series;

typedef struct ts_scrape {
  ts_series *v;
  size_t n, cap;
  int bad;
} ts_scrape;

static inline void ts_free(ts_scrape *sc) {
  for (size_t i = 0; i < sc->n; i++) free(sc->v[i].idx), free(sc->v[i].cnt);
  free(sc->v);
  memset(sc, 0, sizeof *sc);
}

static inline void ts_append(char *key, size_t cap, const rd *s) {
  size_t l = strlen(key), n = (size_t)(s->end - s->p);
  if (l + n + 1 < cap) memcpy(key + l, s->p, n), key[l + n] = 0;
}

/* Append se to sc (which owns its arrays from now on). */
static inline void ts_push(ts_scrape *sc, const ts_series *se) {
  if (sc->n == sc->cap) {
    sc->cap = sc->cap ? 2 * sc->cap : 256;
    sc->v = realloc(sc->v, sc->cap * sizeof *sc->v);
  }
  sc->v[sc->n++] = *se;
}

static inline int ts_cmp_key(const void *a, const void *b) {
  return strcmp(((const ts_series *)a)->key, ((const ts_series *)b)->key);
}

/* The series of sc named key (sc sorted by ts_collect*), or NULL. */
static inline const ts_series *ts_find(const ts_scrape *sc, const char *key) {
  size_t a = 0, b = sc->n;
  while (a < b) {
    size_t m = a + (b - a) / 2;
    int c = strcmp(sc->v[m].key, key);
    if (!c) return &sc->v[m];
    if (c < 0) a = m + 1;
    else b = m;
  }
  return NULL;
}

/* Every counter, histogram and summary series of a protobuf body. */
static inline void ts_collect(const unsigned char *buf, size_t n, ts_scrape *sc) {
  rd r = {buf, buf + n, 0};
  while (r.p < r.end) {
    uint64_t len = rd_varint(&r);
    if (r.bad || len > (uint64_t)(r.end - r.p)) {
      sc->bad = 1;
      return;
    }
    rd m = {r.p, r.p + len, 0};
    r.p += len;
    fld f;
    char fam[256] = "";
    while (rd_next(&m, &f)) {
      if (f.no == 1) ts_append(fam, sizeof fam, &f.sub);
      if (f.no != 4) continue;
      ts_series se;
      memset(&se, 0, sizeof se);
      se.kind = -1;
      snprintf(se.key, sizeof se.key, "%s{", fam);
      rd met = f.sub;
      fld g;
      while (rd_next(&met, &g)) {
        if (g.no == 1) {
          rd lp = g.sub;
          fld x;
          while (rd_next(&lp, &x)) {
            ts_append(se.key, sizeof se.key, &x.sub);
            strncat(se.key, x.no == 1 ? "=" : ",", sizeof se.key - strlen(se.key) - 1);
          }
        } else if (g.no == 3) { /* Counter */
          rd c = g.sub;
          fld x;
          se.kind = 0;
          while (rd_next(&c, &x))
            if (x.no == 1) se.value = as_double(x.v);
        } else if (g.no == 4) { /* Summary */
          rd c = g.sub;
          fld x;
          se.kind = 2;
          while (rd_next(&c, &x)) {
            if (x.no == 1) se.count = x.v;
            if (x.no == 2) se.sum = as_double(x.v);
          }
        } else if (g.no == 7) {
          nhist *h = nh_new();
          parse_hist(g.sub, h);
          if (h->bad) sc->bad = 1;
          se.kind = 1;
          se.count = h->count, se.sum = h->sum, se.zc = h->zc, se.nclassic = h->nclassic;
          memcpy(se.le, h->le, sizeof se.le);
          memcpy(se.cum, h->cum, sizeof se.cum);
          se.nb = h->nb;
          se.idx = h->idx, se.cnt = h->cnt;
          h->idx = NULL, h->cnt = NULL;
          nh_free(h);
        }
      }
      if (met.bad) sc->bad = 1;
      if (se.kind < 0) continue; /* a gauge: free to go down */
      ts_push(sc, &se);
    }
    if (m.bad) sc->bad = 1;
  }
  if (r.bad) sc->bad = 1;
  qsort(sc->v, sc->n, sizeof *sc->v, ts_cmp_key);
}

/* Every sample of a counter, histogram or summary family of a text body
 * (Prometheus 0.0.4 or OpenMetrics): one kind-0 series per sample, keyed
 * by its name and labels as written. A sample belongs to the family of
 * the # TYPE line before it; quantile samples and _created are left out
 * (the first is not a counter, the second a constant). */
static inline void ts_collect_text(const char *t, ts_scrape *sc) {
  int counting = 0;
  for (const char *p = t; p && *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    if (len > 7 && !memcmp(p, "# TYPE ", 7)) {
      const char *ty = memchr(p + 7, ' ', len - 7);
      size_t tl = ty ? len - (size_t)(ty + 1 - p) : 0;
      counting = ty && ((tl == 7 && !memcmp(ty + 1, "counter", 7)) ||
                        (tl == 9 && !memcmp(ty + 1, "histogram", 9)) ||
                        (tl == 7 && !memcmp(ty + 1, "summary", 7)));
    } else if (len && *p != '#' && counting) {
      /* the key: the name, and the labels up to the '}' outside quotes */
      size_t k = 0;
      int inq = 0, inb = 0;
      for (; k < len; k++) {
        char ch = p[k];
        if (inq) {
          if (ch == '\\') k++;
          else if (ch == '"') inq = 0;
        } else if (ch == '"') {
          inq = 1;
        } else if (ch == '{') {
          inb = 1;
        } else if (ch == '}') {
          inb = 0;
        } else if (ch == ' ' && !inb) {
          break;
        }
      }
      ts_series se;
      memset(&se, 0, sizeof se);
      if (k >= len || k >= sizeof se.key) {
        sc->bad = 1;
      } else {
        memcpy(se.key, p, k);
        se.key[k] = 0;
        char *end;
        se.value = strtod(p + k + 1, &end);
        const char *brace = memchr(se.key, '{', k);
        size_t nl_ = brace ? (size_t)(brace - se.key) : k;
        int created = nl_ >= 8 && !memcmp(se.key + nl_ - 8, "_created", 8);
        if (end == p + k + 1) sc->bad = 1;
        else if (!created && !strstr(se.key, "quantile=\"")) ts_push(sc, &se);
      }
    }
    p = nl ? nl + 1 : NULL;
  }
  qsort(sc->v, sc->n, sizeof *sc->v, ts_cmp_key);
}

/* The count of native bucket idx in se (0 when absent); idx[] ascends. */
static inline uint64_t ts_native_at(const ts_series *se, int32_t idx) {
  size_t a = 0, b = se->nb;
  while (a < b) {
    size_t m = a + (b - a) / 2;
    if (se->idx[m] < idx) a = m + 1;
    else b = m;
  }
  return a < se->nb && se->idx[a] == idx ? se->cnt[a] : 0;
}

/* Every value of a present in b, and none smaller there; returns the
 * number of values that fell (each printed, the first few). */
static inline unsigned ts_compare(const ts_scrape *a, const ts_scrape *b, unsigned *checked) {
  unsigned fell = 0;
  for (size_t i = 0; i < a->n; i++) {
    const ts_series *x = &a->v[i], *y = ts_find(b, x->key);
    if (!y || y->kind != x->kind) {
      if (fell++ < 10) fprintf(stderr, "   series %s disappeared\n", x->key);
      continue;
    }
#define TS_FALL(cond, ...)                                          \
  do {                                                              \
    (*checked)++;                                                   \
    if (cond) {                                                     \
      if (fell++ < 10) fprintf(stderr, "   %s: ", x->key), fprintf(stderr, __VA_ARGS__); \
    }                                                               \
  } while (0)
    TS_FALL(y->value < x->value, "counter %.17g -> %.17g\n", x->value, y->value);
    TS_FALL(y->count < x->count, "count %" PRIu64 " -> %" PRIu64 "\n", x->count, y->count);
    TS_FALL(y->sum < x->sum, "sum %.17g -> %.17g\n", x->sum, y->sum);
    TS_FALL(y->zc < x->zc, "zero count %" PRIu64 " -> %" PRIu64 "\n", x->zc, y->zc);
    TS_FALL(y->nclassic != x->nclassic, "classic bounds %zu -> %zu\n", x->nclassic, y->nclassic);
    for (size_t k = 0; k < x->nclassic && k < y->nclassic; k++)
      TS_FALL(y->cum[k] < x->cum[k], "classic le=%g %" PRIu64 " -> %" PRIu64 "\n", x->le[k],
              x->cum[k], y->cum[k]);
    for (size_t k = 0; k < x->nb; k++) {
      uint64_t now = ts_native_at(y, x->idx[k]);
      TS_FALL(now < x->cnt[k], "native bucket %d: %" PRIu64 " -> %" PRIu64 "\n", (int)x->idx[k],
              x->cnt[k], now);
    }
#undef TS_FALL
  }
  return fell;
}

#endif
