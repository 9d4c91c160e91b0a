/*
 * hist.h — the log-linear histogram: bucket index and bounds (used by the
 * hooks to record), the nearest rank, and the sparse histogram snapshots
 * hold (ttft__shist) with its reading API, quantile and builder
 * (ttft__hacc). Layer: common (src/README.md).
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

/* --------------------------------------------------------- nearest rank
 * The rank of quantile q among n observations: ceil(q * n) computed
 * without floating-point error, with q taken as the decimal it was written
 * as (the shortest decimal that reads back to the same double, as printf
 * "%.17g" trimmed or Python's repr give it), so q = 0.07 of 100 values is
 * rank 7, never 8, although the double 0.07 is a little above 7/100.
 * Clamped to [1, n]: q <= 0 (and NaN) gives 1, q >= 1 gives n; 0 when n is
 * 0. Exact for every n (the products are done in 128 bits). Thread-safe,
 * allocation-free; a few ns, about 1 us when q * n is within a rounding
 * error of an integer (then the decimal digits of q are worked out). */
TTFT_HIDDEN uint64_t ttft__nearest_rank(double q, uint64_t n);

/* ------------------------------------------------- snapshot histograms
 * A histogram as a snapshot holds it: plain numbers, and only the buckets
 * that can be non-zero. They are kept as runs of consecutive buckets; a
 * gap of TTFT__HRUN_GAP or more empty buckets starts a new run, so the
 * memory is at most 16 bytes per populated bucket (a count and a run, or
 * a count and one empty neighbour), one array of counts for a histogram
 * whose buckets are contiguous (the usual case), plus the header. The
 * storage belongs to the snapshot and is freed with it. */
#define TTFT__HRUN_GAP 2u
typedef struct ttft__hrun {
  uint16_t start, len; /* buckets [start, start + len)                    */
  uint32_t off;        /* their counts: cnt[off .. off + len)             */
} ttft__hrun;

typedef struct ttft__shist {
  uint64_t count, sum, min, max; /* min = max = 0 when count == 0; count is
                                    the sum of the buckets               */
  uint64_t sum_hi;               /* the sum of the observations is the
                                    128-bit number sum_hi * 2^64 + sum
                                    (ttft__shist_sum_sat, _sum_double)    */
  uint32_t lo, hi;               /* buckets lo and hi - 1 are populated;
                                    lo = hi = 0 when empty                */
  uint32_t nruns;
  const ttft__hrun *runs;        /* nruns, ascending, not adjacent        */
  const uint64_t *cnt;
} ttft__shist;

/* The sum of h's observations, widened to 128 bits (sum_hi:sum), read
 * the two ways readers want it: saturated to the uint64 API (exact below
 * 2^64 ns, 584 years; UINT64_MAX above), or as a double (the exporters'
 * _sum in seconds, the means). Both accept the shared empty histogram. */
static inline uint64_t ttft__shist_sum_sat(const ttft__shist *h) {
  return h->sum_hi ? UINT64_MAX : h->sum;
}
static inline double ttft__u128_double(uint64_t hi, uint64_t lo) {
  return (double)hi * 18446744073709551616.0 + (double)lo;
}
static inline double ttft__shist_sum_double(const ttft__shist *h) {
  return ttft__u128_double(h->sum_hi, h->sum);
}

/* 128-bit helpers for the sums' readers: *hi:*lo /= d (d > 0), returning
 * the remainder; the decimal digits of hi:lo into buf (at least 40 bytes,
 * NUL-terminated), returning their number. */
TTFT_HIDDEN uint32_t ttft__u128_divmod(uint64_t *hi, uint64_t *lo, uint32_t d);
TTFT_HIDDEN size_t ttft__u128_decimal(uint64_t hi, uint64_t lo, char *buf);

/* Reading a snapshot histogram: only buckets in [ttft__shist_lo(h),
 * ttft__shist_hi(h)) can be non-zero, and ttft__shist_at(h, i) is bucket
 * i's count (0 outside that range). Readers use these and never the
 * storage. ttft__shist_next(h, i) is the first bucket >= i that may be
 * non-zero (ttft__shist_hi(h) when none), to skip the gaps:
 *   for (i = ttft__shist_next(h, 0); i < ttft__shist_hi(h); i = ttft__shist_next(h, i + 1))
 *     n = ttft__shist_at(h, i);   (n may be 0) */
static inline uint32_t ttft__shist_lo(const ttft__shist *h) { return h->lo; }
static inline uint32_t ttft__shist_hi(const ttft__shist *h) { return h->hi; }
TTFT_HIDDEN uint64_t ttft__shist_at_runs(const ttft__shist *h, uint32_t i);
static inline uint64_t ttft__shist_at(const ttft__shist *h, uint32_t i) {
  if (i < h->lo || i >= h->hi) return 0;
  if (h->nruns == 1) return h->cnt[i - h->lo];
  return ttft__shist_at_runs(h, i);
}
TTFT_HIDDEN uint32_t ttft__shist_next(const ttft__shist *h, uint32_t i);

/* Nearest-rank quantile (ttft__nearest_rank), bucket midpoint clamped to
 * [min, max]; q=0 min, q=1 max; 0 when empty. q must be in [0,1] (callers
 * check). */
TTFT_HIDDEN uint64_t ttft__shist_quantile(const ttft__shist *h, double q);
/* Observations <= v, counting whole buckets whose largest value is <= v;
 * exact when v is a bucket's upper edge (ttft__bucket_hi). */
TTFT_HIDDEN uint64_t ttft__shist_count_le(const ttft__shist *h, uint64_t v);

/* ------------------------------------------------------------- builder
 * A dense scratch histogram (48 KiB) that snapshot histograms are built
 * from: add buckets or whole histograms, then ttft__hacc_build packs what
 * was added into a snapshot-owned ttft__shist and clears the scratch for
 * the next one (in time proportional to what was added). Not shared
 * between threads. */
typedef struct ttft__hacc {
  uint64_t sum, min, max;  /* statistics, combined as observations are  */
  uint64_t sum_hi;         /* the sum is sum_hi:sum (128 bits); a carry
                              past 2^128 sets overflow                  */
  int any;                 /* 1 once min/max hold an observation        */
  int overflow;            /* a bucket count wrapped: refuse the result */
  uint32_t n;              /* buckets touched: idx[0 .. n)              */
  int sorted;              /* idx[] ascending and complete              */
  uint32_t lo, hi;         /* [lo, hi) covers every touched bucket;
                              hi = 0 until one is                       */
  uint16_t idx[TTFT__HIST_BUCKETS];
  uint64_t b[TTFT__HIST_BUCKETS];
} ttft__hacc;

/* An empty builder, allocated with a (zeroed); NULL on ENOMEM. */
TTFT_HIDDEN ttft__hacc *ttft__hacc_new(const ttft_allocator *a);
TTFT_HIDDEN void ttft__hacc_free(const ttft_allocator *a, ttft__hacc *acc);
/* Bucket i += n (i < TTFT__HIST_BUCKETS; a wrap sets acc->overflow). */
static inline void ttft__hacc_add_bucket(ttft__hacc *acc, uint32_t i, uint64_t n) {
  TTFT_ASSERT(i < TTFT__HIST_BUCKETS); /* decoders check indices before adding */
  if (!n) return;
  if (!acc->b[i]) {
    if (acc->hi == 0 || i < acc->lo) acc->lo = i;
    if (i >= acc->hi) acc->hi = i + 1;
    if (acc->n && i <= acc->idx[acc->n - 1]) acc->sorted = 0;
    if (acc->n < TTFT__HIST_BUCKETS) acc->idx[acc->n++] = (uint16_t)i;
    else acc->sorted = 0; /* list full (buckets re-added after a subtraction): rescan */
  }
  if (n > UINT64_MAX - acc->b[i]) acc->overflow = 1;
  acc->b[i] += n;
}
/* Combine observation statistics: sum_hi:sum += the 128-bit sum
 * hi:lo, min/max widened. */
TTFT_HIDDEN void ttft__hacc_add_stats(ttft__hacc *acc, uint64_t lo, uint64_t hi, uint64_t min,
                                      uint64_t max);
/* acc's sum = the 128-bit difference a - b (each hi:lo); 0 when a < b. */
TTFT_HIDDEN int ttft__hacc_set_sum_diff(ttft__hacc *acc, uint64_t a_hi, uint64_t a_lo, uint64_t b_hi,
                                        uint64_t b_lo);
/* Every bucket and the statistics of h (a count that would wrap sets
 * acc->overflow). */
TTFT_HIDDEN void ttft__hacc_add(ttft__hacc *acc, const ttft__shist *h);
/* Bucket by bucket acc -= h; 0 (acc unchanged in that bucket and after it
 * undefined) when a bucket would go below 0, else 1. Statistics are left
 * alone (the caller knows them). */
TTFT_HIDDEN int ttft__hacc_sub(ttft__hacc *acc, const ttft__shist *h);
/* Pack acc into a histogram allocated with alloc_fn(ctx, bytes) (the
 * snapshot's storage) and store it in *out; an empty acc stores empty
 * instead and allocates nothing. count is recomputed from the buckets;
 * min/max are kept when consistent with the first and last populated
 * buckets and otherwise moved to their edges (a racy copy, a delta). acc
 * is cleared either way. TTFT_OK, TTFT_ENOMEM, or TTFT_ERANGE when a count
 * overflowed. */
typedef void *(*ttft__hist_alloc_fn)(void *ctx, size_t bytes);
TTFT_HIDDEN int ttft__hacc_build(ttft__hacc *acc, ttft__hist_alloc_fn alloc_fn, void *ctx,
                                 ttft__shist *empty, ttft__shist **out);
/* Forget everything added (no histogram is built). */
TTFT_HIDDEN void ttft__hacc_clear(ttft__hacc *acc);

#endif /* TTFT_HIST_H */
