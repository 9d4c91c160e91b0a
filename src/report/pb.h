/*
 * pb.h — the protobuf wire writer and the native (exponential) bucket map
 * shared by the two protobuf expositions: format_protobuf.c (Prometheus
 * MetricFamily) and format_otlp.c (OTLP ExportMetricsServiceRequest).
 * Layer: report (src/README.md). Internal: static inline only.
 *
 * The writer runs in two modes: counting (o->sb NULL: only o->n grows)
 * and writing. Protobuf prefixes a submessage with its length, so
 * pb_message counts a body, then writes tag, length and body.
 *
 * The bucket map: native (Prometheus) bucket k of schema s holds
 * (B^(k-1), B^k], B = 2^(2^-s); an internal log-linear bucket goes whole
 * to the native bucket of its midpoint (format_protobuf.c explains the
 * choice and proves the error bound). OTLP's exponential bucket at index
 * i of scale s holds (B^i, B^(i+1)]: the same bucket, index k - 1.
 */
#ifndef TTFT_PB_H
#define TTFT_PB_H

#include <math.h>
#include <string.h>

#include "common/snapshot.h"

/* ------------------------------------------------------ wire encoding */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };

typedef struct pb_out {
  ttft__sb *sb; /* NULL: count only */
  size_t n;     /* bytes produced (or counted) through this handle */
} pb_out;

static inline void pb_raw(pb_out *o, const void *p, size_t n) {
  if (o->sb) ttft__sb_put(o->sb, (const char *)p, n);
  o->n += n;
}

static inline void pb_varint(pb_out *o, uint64_t v) {
  unsigned char b[10];
  size_t k = 0;
  while (v >= 0x80) {
    b[k++] = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  b[k++] = (unsigned char)v;
  pb_raw(o, b, k);
}

static inline uint64_t zigzag(int64_t v) {
  return ((uint64_t)v << 1) ^ (uint64_t)(v < 0 ? -1 : 0);
}

static inline void pb_tag(pb_out *o, unsigned field, unsigned wt) {
  pb_varint(o, (uint64_t)field << 3 | wt);
}

static inline void pb_uint(pb_out *o, unsigned field, uint64_t v) {
  pb_tag(o, field, WT_VARINT);
  pb_varint(o, v);
}

static inline void pb_sint(pb_out *o, unsigned field, int64_t v) {
  pb_tag(o, field, WT_VARINT);
  pb_varint(o, zigzag(v));
}

/* 8 bytes little-endian, the payload of fixed64, sfixed64 and double */
static inline void pb_le64(pb_out *o, uint64_t u) {
  unsigned char b[8];
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(u >> (8 * i));
  pb_raw(o, b, 8);
}

static inline void pb_fixed64(pb_out *o, unsigned field, uint64_t v) {
  pb_tag(o, field, WT_I64);
  pb_le64(o, v);
}

static inline void pb_double(pb_out *o, unsigned field, double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  pb_fixed64(o, field, u);
}

static inline void pb_bytes(pb_out *o, unsigned field, const char *p, size_t n) {
  pb_tag(o, field, WT_LEN);
  pb_varint(o, n);
  pb_raw(o, p, n);
}

static inline void pb_str(pb_out *o, unsigned field, const char *s) { pb_bytes(o, field, s, strlen(s)); }

typedef void (*pb_body)(pb_out *o, const void *arg);

/* A length-delimited submessage: counted once, then written. */
static inline void pb_message(pb_out *o, unsigned field, pb_body body, const void *arg) {
  pb_out c = {NULL, 0};
  body(&c, arg);
  pb_tag(o, field, WT_LEN);
  pb_varint(o, c.n);
  if (o->sb) body(o, arg);
  else o->n += c.n;
}

/* A submessage whose size the caller already knows (counted once before). */
static inline void pb_message_sized(pb_out *o, unsigned field, pb_body body, const void *arg,
                                    size_t size) {
  pb_tag(o, field, WT_LEN);
  pb_varint(o, size);
  if (o->sb) body(o, arg);
  else o->n += size;
}

/* A string as protobuf wants it (valid UTF-8): at most cap bytes of v (a
 * fixed field that may lack its NUL when the snapshot is corrupt), every
 * maximal invalid UTF-8 subsequence replaced by U+FFFD. Writes when o is
 * given, returns the length either way. */
static inline size_t pb_clean_utf8(pb_out *o, const char *v, size_t cap) {
  static const char fffd[3] = {'\xEF', '\xBF', '\xBD'};
  const unsigned char *p = (const unsigned char *)v;
  size_t n = 0, len = 0, run = 0, i = 0;
  while (n < cap && p[n]) n++;
  while (i < n) {
    size_t adv = 1, bad;
    if (p[i] >= 0x80 && (adv = ttft__utf8_seq(p + i, n - i, NULL, &bad)) == 0) {
      if (o) {
        pb_raw(o, p + run, i - run);
        pb_raw(o, fffd, 3);
      }
      len += (i - run) + 3;
      i += bad;
      run = i;
      continue;
    }
    i += adv;
  }
  if (o) pb_raw(o, p + run, n - run);
  return len + (n - run);
}

/* field as a string, cleaned by pb_clean_utf8 */
static inline void pb_clean_str(pb_out *o, unsigned field, const char *v, size_t cap) {
  pb_tag(o, field, WT_LEN);
  pb_varint(o, pb_clean_utf8(NULL, v, cap));
  pb_clean_utf8(o, v, cap);
}

/* ------------------------------------------------------- native buckets */

/* Native bucket index of v > 0 at schema s: the k with
 * 2^((k-1) 2^-s) < v <= 2^(k 2^-s). log2 is exact at powers of two, so a
 * value on a boundary goes to the bucket it closes. */
static inline int32_t pb_native_index(double v, int schema) {
  double l = log2(v);
  double k = schema >= 0 ? ceil(l * (double)(1u << schema)) : ceil(l / (double)(1u << -schema));
  return (int32_t)k;
}

static inline uint64_t pb_bucket_mid(uint32_t i) {
  uint64_t lo = ttft__bucket_lo(i);
  uint64_t hi = (i + 1 >= TTFT__HIST_BUCKETS) ? TTFT__HIST_MAX : ttft__bucket_lo(i + 1) - 1;
  return lo + (hi - lo) / 2;
}

static inline double pb_unit_value(uint64_t v, int seconds) {
  return seconds ? (double)v / 1e9 : (double)v;
}

/* Fill m (TTFT__HIST_BUCKETS entries) with the native index at schema of
 * every internal bucket's midpoint, in seconds (seconds = 1) or plain
 * counts (0). */
static inline void pb_native_map(int32_t *m, int schema, int seconds) {
  m[0] = 0; /* bucket 0 holds the value 0: the zero bucket, never looked up */
  for (uint32_t i = 1; i < TTFT__HIST_BUCKETS; i++)
    m[i] = pb_native_index(pb_unit_value(pb_bucket_mid(i), seconds), schema);
}

/* One histogram's native buckets: populated indices ascending (key, cnt:
 * caller's scratch of TTFT__HIST_BUCKETS entries each), and the zero
 * bucket. */
typedef struct pb_native_list {
  const int32_t *key;
  const uint64_t *cnt;
  uint32_t n;
  uint64_t zero;
} pb_native_list;

/* Native buckets, built during a walk over the populated internal
 * buckets by pb_native_step: each goes to the native bucket of its
 * midpoint (the map), a map fixed for the schema, so a native bucket only
 * ever gains counts. The map is monotone; a key smaller than the one
 * before (only a corrupt table could give one) joins the bucket before.
 * Internal bucket 0 (the value 0) is the zero bucket. */
typedef struct pb_native_walk {
  const int32_t *map;
  int32_t *key;
  uint64_t *cnt;
  int32_t prev;
  pb_native_list nl;
} pb_native_walk;

static inline void pb_native_begin(pb_native_walk *w, const int32_t *map, int32_t *key,
                                   uint64_t *cnt) {
  w->map = map, w->key = key, w->cnt = cnt;
  w->prev = INT32_MIN;
  w->nl.key = key, w->nl.cnt = cnt, w->nl.n = 0, w->nl.zero = 0;
}

static inline void pb_native_step(pb_native_walk *w, uint32_t i, uint64_t c) {
  if (i == 0) {
    w->nl.zero += c;
    return;
  }
  int32_t k = w->map[i];
  if (k < w->prev) k = w->prev;
  if (w->nl.n && k == w->prev) {
    w->cnt[w->nl.n - 1] += c;
  } else {
    w->key[w->nl.n] = k;
    w->cnt[w->nl.n++] = c;
  }
  w->prev = k;
}

/* The first populated bucket of h at or after i and before last (its count
 * in *c), or last. Steps through a run with ttft__shist_at and jumps a gap
 * with ttft__shist_next, so a walk costs one lookup per bucket. */
static inline uint32_t pb_next_populated(const ttft__shist *h, uint32_t i, uint32_t last,
                                         uint64_t *c) {
  while (i < last) {
    uint64_t n = ttft__shist_at(h, i);
    if (n) {
      *c = n;
      return i;
    }
    i = ttft__shist_next(h, i + 1);
  }
  return last;
}

/* a histogram's sum (128 bits wide, common/hist.h) in its unit */
static inline double pb_sum_value(const ttft__shist *h, int seconds) {
  if (!h) return 0.0;
  if (!h->sum_hi) return pb_unit_value(h->sum, seconds);
  double v = ttft__shist_sum_double(h);
  return seconds ? v / 1e9 : v;
}

/* The schema a snapshot asks for, clamped to what both formats carry */
static inline int pb_schema(const ttft_snapshot *s) {
  return s->native_schema < -4 ? -4 : s->native_schema > 8 ? 8 : s->native_schema;
}

/* ------------------------------------------------ what both write */

/* Classes that appear: exported (ttft__class_exported) and not a repeat of
 * an earlier class's name (only a corrupt snapshot has one). */
static inline int pb_class_shown(const ttft_snapshot *s, uint32_t i) {
  if (!ttft__class_exported(s, i)) return 0;
  for (uint32_t j = 0; j < i; j++)
    if (strncmp(s->cls[j].name, s->cls[i].name, TTFT__NAME_MAX) == 0) return 0;
  return 1;
}

/* The prompt-length bands of s: how many (at most TTFT_MAX_BANDS) */
static inline uint32_t pb_nbands(const ttft_snapshot *s) {
  uint32_t nb = s->n_band_edges + 1;
  return nb > TTFT_MAX_BANDS ? TTFT_MAX_BANDS : nb;
}

/* Band i of nb as its label ("lo-hi" inclusive, the last "lo+") into
 * band[cap]; 0 when its edges are not ascending (a corrupt snapshot: the
 * band is skipped). */
static inline int pb_band_label(const ttft_snapshot *s, uint32_t i, uint32_t nb, char *band,
                                size_t cap) {
  uint64_t lo = i ? s->band_edges[i - 1] : 0;
  uint64_t hi = i + 1 < nb ? s->band_edges[i] : 0;
  if (i + 1 < nb && hi <= lo) return 0;
  ttft__sb bs;
  ttft__sb_init(&bs, band, cap);
  ttft__sb_printf(&bs, "%llu", (unsigned long long)lo);
  if (i + 1 < nb) ttft__sb_printf(&bs, "-%llu", (unsigned long long)(hi - 1));
  else ttft__sb_puts(&bs, "+");
  return 1;
}

#endif /* TTFT_PB_H */
