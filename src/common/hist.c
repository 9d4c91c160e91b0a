/* hist.c — the log-linear histogram as snapshots hold it: bucket bounds,
 * nearest-rank quantiles, merge, and repair after a racy copy. */
#include <string.h>

#include "common/hist.h"

uint64_t ttft__bucket_lo(uint32_t i) {
  if (i < 2 * TTFT__HIST_HALF) return i;
  unsigned shift = i / TTFT__HIST_HALF - 1;
  uint64_t mant = TTFT__HIST_HALF + i % TTFT__HIST_HALF; /* in [128, 256) */
  return mant << shift;
}

uint64_t ttft__bucket_hi(uint32_t i) {
  if (i < 2 * TTFT__HIST_HALF) return i;
  if (i + 1 >= TTFT__HIST_BUCKETS) return UINT64_MAX; /* the last bucket also holds the overflow */
  return ttft__bucket_lo(i + 1) - 1;
}

/* The value reported for an observation in bucket i: its midpoint, which
 * is within half a bucket (<= 1/256 of the lower edge) of any member. */
static uint64_t bucket_mid(uint32_t i) {
  uint64_t lo = ttft__bucket_lo(i);
  uint64_t hi = (i + 1 >= TTFT__HIST_BUCKETS) ? TTFT__HIST_MAX : ttft__bucket_lo(i + 1) - 1;
  return lo + (hi - lo) / 2;
}

uint64_t ttft__shist_quantile(const ttft__shist *h, double q) {
  if (h->count == 0) return 0;
  if (q <= 0.0) return h->min;
  if (q >= 1.0) return h->max;
  /* nearest rank: the smallest value with at least ceil(q*N) at or below it */
  double want = q * (double)h->count;
  uint64_t rank = (uint64_t)want;
  if ((double)rank < want) rank++;
  if (rank == 0) rank = 1;
  if (rank == 1) return h->min;
  if (rank >= h->count) return h->max;
  uint64_t seen = 0;
  uint32_t i = 0;
  for (; i < TTFT__HIST_BUCKETS; i++) {
    seen += h->b[i];
    if (seen >= rank) break;
  }
  if (i == TTFT__HIST_BUCKETS) return h->max;
  uint64_t v = bucket_mid(i);
  if (v < h->min) v = h->min;
  if (v > h->max) v = h->max;
  return v;
}

void ttft__shist_add(ttft__shist *dst, const ttft__shist *src) {
  if (src->count == 0) return;
  for (uint32_t i = 0; i < TTFT__HIST_BUCKETS; i++) dst->b[i] += src->b[i];
  if (dst->count == 0 || src->min < dst->min) dst->min = src->min;
  if (dst->count == 0 || src->max > dst->max) dst->max = src->max;
  dst->count += src->count;
  dst->sum += src->sum;
}

void ttft__shist_fix(ttft__shist *h) {
  uint64_t n = 0;
  uint32_t first = TTFT__HIST_BUCKETS, last = 0;
  for (uint32_t i = 0; i < TTFT__HIST_BUCKETS; i++) {
    if (!h->b[i]) continue;
    n += h->b[i];
    if (first == TTFT__HIST_BUCKETS) first = i;
    last = i;
  }
  h->count = n;
  if (n == 0) {
    h->min = h->max = 0;
    h->sum = 0;
    return;
  }
  /* min/max were copied racily (or subtracted away): keep them when they
   * are consistent with the populated buckets, else take the bucket edge. */
  uint64_t lo = ttft__bucket_lo(first), hi = ttft__bucket_hi(last);
  if (h->min < lo || h->min > ttft__bucket_hi(first)) h->min = lo;
  if (h->max > hi) h->max = hi;
  if (h->max < ttft__bucket_lo(last)) h->max = ttft__bucket_lo(last);
  if (h->max < h->min) h->max = h->min;
}

uint64_t ttft__shist_count_le(const ttft__shist *h, uint64_t v) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < TTFT__HIST_BUCKETS; i++) {
    if (ttft__bucket_hi(i) > v) break;
    n += h->b[i];
  }
  return n;
}

void ttft__shist_record(ttft__shist *h, uint64_t v, uint64_t n) {
  if (n == 0) return;
  if (h->count == 0 || v < h->min) h->min = v;
  if (h->count == 0 || v > h->max) h->max = v;
  h->b[ttft__hist_index(v)] += n;
  h->count += n;
  h->sum += v * n;
}
