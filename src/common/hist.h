/*
 * hist.h — the log-linear histogram: bucket index and bounds (used by the
 * hooks to record) and the plain histogram snapshots hold (ttft__shist)
 * with its quantile, merge and repair. Layer: common (src/README.md).
 */
#ifndef TTFT_HIST_H
#define TTFT_HIST_H

#include "common/internal.h"

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

/* Reading a snapshot histogram: only buckets in [ttft__shist_lo(h),
 * ttft__shist_hi(h)) can be non-zero, and ttft__shist_at(h, i) is bucket
 * i's count (0 outside that range). Readers use these three and never the
 * storage, which is free to be sparse. */
static inline uint32_t ttft__shist_lo(const ttft__shist *h) { (void)h; return 0; }
static inline uint32_t ttft__shist_hi(const ttft__shist *h) { (void)h; return TTFT__HIST_BUCKETS; }
static inline uint64_t ttft__shist_at(const ttft__shist *h, uint32_t i) {
  return i < TTFT__HIST_BUCKETS ? h->b[i] : 0;
}

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

#endif /* TTFT_HIST_H */
