/*
 * internal.h — what the library's files share and nothing exports.
 *
 * Data flows one way: hooks (hooks.c) write into slots and per-thread
 * shards (registry.h); ttft_snapshot_take (snapshot.c) copies them into a
 * struct ttft_snapshot (below); formatters, codec and merge/delta read or
 * build snapshots only.
 */
#ifndef TTFT_INTERNAL_H
#define TTFT_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "ttft.h"

#if defined(__GNUC__)
#  define TTFT_LIKELY(x) __builtin_expect(!!(x), 1)
#  define TTFT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#  define TTFT_HIDDEN __attribute__((visibility("hidden")))
#  define TTFT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#  define TTFT_LIKELY(x) (x)
#  define TTFT_UNLIKELY(x) (x)
#  define TTFT_HIDDEN
#  define TTFT_PRINTF(a, b)
#endif

/* ------------------------------------------------------------ histogram
 * Log-linear buckets over uint64 values (ns or tokens). Values below 256
 * have a bucket each (exact). Above, each power-of-two range [2^m, 2^(m+1))
 * is split into 128 equal buckets, so a bucket is at most 1/128 of its lower
 * edge wide and its midpoint is within 0.39 % of any value in it. Values
 * above TTFT__HIST_MAX (2^44 - 1 ns, 4.9 h) share the last bucket; min, max,
 * sum and count stay exact. */
#define TTFT__HIST_SUB_BITS 7                                  /* 128 per octave */
#define TTFT__HIST_HALF (1u << TTFT__HIST_SUB_BITS)            /* 128 */
#define TTFT__HIST_MAX_BITS 44
#define TTFT__HIST_MAX ((UINT64_C(1) << TTFT__HIST_MAX_BITS) - 1)
#define TTFT__HIST_BUCKETS ((TTFT__HIST_MAX_BITS - TTFT__HIST_SUB_BITS + 1) * TTFT__HIST_HALF) /* 4864 */

static inline uint32_t ttft__hist_index(uint64_t v) {
  if (v > TTFT__HIST_MAX) v = TTFT__HIST_MAX;
  if (v < 2 * TTFT__HIST_HALF) return (uint32_t)v;
  /* msb >= 8: shift keeps the top 8 bits; v >> shift is in [128, 256) */
  unsigned shift = (unsigned)(63 - __builtin_clzll(v)) - TTFT__HIST_SUB_BITS;
  return (uint32_t)(shift * TTFT__HIST_HALF + (v >> shift));
}
/* Smallest and largest value of bucket i (inclusive). */
TTFT_HIDDEN uint64_t ttft__bucket_lo(uint32_t i);
TTFT_HIDDEN uint64_t ttft__bucket_hi(uint32_t i);

/* A histogram as a snapshot holds it: plain numbers. count is the sum of b[]. */
typedef struct ttft__shist {
  uint64_t count, sum, min, max; /* min = max = 0 when count == 0 */
  uint64_t b[TTFT__HIST_BUCKETS];
} ttft__shist;

/* Nearest-rank quantile, bucket midpoint clamped to [min, max]; q=0 min,
 * q=1 max; 0 when empty. q must be in [0,1] (callers check). */
TTFT_HIDDEN uint64_t ttft__shist_quantile(const ttft__shist *h, double q);
/* dst += src (counts, sum; min/max combined). */
TTFT_HIDDEN void ttft__shist_add(ttft__shist *dst, const ttft__shist *src);
/* Recompute count from the buckets and make min/max consistent with them
 * (used after a racy copy, a decode or a delta). */
TTFT_HIDDEN void ttft__shist_fix(ttft__shist *h);
/* Observations <= v, counting whole buckets whose largest value is <= v;
 * exact when v is a bucket's upper edge (ttft__bucket_hi). */
TTFT_HIDDEN uint64_t ttft__shist_count_le(const ttft__shist *h, uint64_t v);
/* Record one value into a plain histogram (decode, tests, tools). */
TTFT_HIDDEN void ttft__shist_record(ttft__shist *h, uint64_t v, uint64_t n);

/* ------------------------------------------------------------- snapshot */
#define TTFT__NAME_MAX 64 /* class and label names, including the NUL */

typedef struct ttft__sclass {
  char name[TTFT__NAME_MAX];
  ttft_slo slo;                               /* stall_threshold_ns resolved  */
  uint64_t ctr[TTFT_COUNTER_COUNT_];
  ttft__shist *h[TTFT_METRIC_COUNT_];         /* point into the snapshot block */
} ttft__sclass;

struct ttft_snapshot {
  ttft_allocator alloc;       /* what allocated it, frees it                */
  uint64_t registry_id;       /* process-unique id of the source registry;
                                 0 for merged snapshots (no delta)          */
  uint64_t t_start_ns, t_end_ns;
  uint64_t gauge[TTFT_GAUGE_COUNT_];
  uint64_t stall_threshold_ns;/* registry default                          */
  char start_point[TTFT_MAX_LABEL], token_point[TTFT_MAX_LABEL];
  char model[TTFT_MAX_LABEL], ns[TTFT__NAME_MAX];
  uint32_t n_const_labels;
  char const_name[TTFT_MAX_CONST_LABELS][TTFT__NAME_MAX];
  char const_value[TTFT_MAX_CONST_LABELS][TTFT_MAX_LABEL];
  uint32_t n_band_edges;      /* bands = n_band_edges + 1                   */
  uint32_t band_edges[TTFT_MAX_BANDS - 1];
  uint32_t prom_n_buckets[TTFT_METRIC_COUNT_];
  uint64_t prom_buckets[TTFT_METRIC_COUNT_][TTFT_MAX_PROM_BUCKETS];
  int prom_summaries;
  uint32_t nclasses;          /* >= 1; class 0 is "default"                 */
  ttft__sclass *cls;          /* nclasses entries                           */
  ttft__sclass all;           /* sum over classes (ttft__snapshot_finish)   */
  ttft__shist *split_cache[2];             /* TTFT by prefix miss / hit      */
  ttft__shist *split_band[TTFT_MAX_BANDS]; /* TTFT by prompt band           */
  ttft__shist *hists;         /* one block: every histogram above           */
  size_t nhists;
};

/* A zeroed snapshot with nclasses classes (names empty), allocated with the
 * current allocator. NULL on ENOMEM or nclasses == 0. */
TTFT_HIDDEN ttft_snapshot *ttft__snapshot_new(uint32_t nclasses);
/* Copy the label/config part (not the data, not the classes) of src. */
TTFT_HIDDEN void ttft__snapshot_copy_meta(ttft_snapshot *dst, const ttft_snapshot *src);
/* Fix every histogram and recompute s->all from the classes. */
TTFT_HIDDEN void ttft__snapshot_finish(ttft_snapshot *s);
/* Class by id, TTFT_CLASS_ALL -> &s->all, NULL when out of range. */
TTFT_HIDDEN const ttft__sclass *ttft__snapshot_class(const ttft_snapshot *s, int class_id);

/* The default Prometheus bucket bounds for metric m (ns; tokens for
 * OUTPUT_TOKENS); *n receives their number. */
TTFT_HIDDEN const uint64_t *ttft__default_prom_buckets(ttft_metric m, uint32_t *n);

/* ------------------------------------------------------------ allocation */
TTFT_HIDDEN void ttft__allocator_current(ttft_allocator *out);
TTFT_HIDDEN void *ttft__alloc(const ttft_allocator *a, size_t n);  /* zeroed */
TTFT_HIDDEN void ttft__free(const ttft_allocator *a, void *p);

/* ------------------------------------------------------- string builder
 * Writes into a caller buffer with snprintf rules: never past cap, always
 * NUL-terminated when cap > 0, len counts what the full output needs. */
typedef struct ttft__sb {
  char *buf;
  size_t cap, len;
} ttft__sb;
TTFT_HIDDEN void ttft__sb_init(ttft__sb *sb, char *buf, size_t cap);
TTFT_HIDDEN void ttft__sb_put(ttft__sb *sb, const char *s, size_t n);
TTFT_HIDDEN void ttft__sb_puts(ttft__sb *sb, const char *s);
TTFT_HIDDEN void ttft__sb_printf(ttft__sb *sb, const char *fmt, ...) TTFT_PRINTF(2, 3);

/* Formatters: each renders s into sb; return TTFT_OK or a TTFT_E* code. */
TTFT_HIDDEN int ttft__format_text(const ttft_snapshot *s, ttft__sb *sb);
TTFT_HIDDEN int ttft__format_json(const ttft_snapshot *s, ttft__sb *sb);
TTFT_HIDDEN int ttft__format_prometheus(const ttft_snapshot *s, ttft__sb *sb, int openmetrics);

/* UTF-8 at p, n bytes available (n >= 1; SIZE_MAX for a NUL-terminated
 * string — a NUL is never a continuation byte): the length of the
 * well-formed sequence that starts there (1 for ASCII), its code point in
 * *cp when cp is not NULL; or 0 when none starts there (bad lead,
 * truncated, overlong, surrogate, above U+10FFFF), and then *bad (when not
 * NULL) is the length of the maximal invalid subpart, which one U+FFFD
 * replaces as the Unicode standard recommends. */
TTFT_HIDDEN size_t ttft__utf8_seq(const unsigned char *p, size_t n, unsigned *cp, size_t *bad);

/* Copy a C string into a fixed field, truncated at a UTF-8 boundary. */
TTFT_HIDDEN void ttft__strlcpy(char *dst, const char *src, size_t cap);

#endif
