/* hist.c — the log-linear histogram as snapshots hold it: bucket bounds,
 * the exact nearest rank, reading and quantiles of the sparse snapshot
 * histogram, and the builder that packs one. Layer: common. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hist.h"

uint64_t ttft__bucket_lo(uint32_t i) {
  TTFT_ASSERT(i <= TTFT__HIST_BUCKETS); /* i == BUCKETS: the end of the last bucket */
  if (i < 2 * TTFT__HIST_HALF) return i;
  unsigned shift = i / TTFT__HIST_HALF - 1;
  uint64_t mant = TTFT__HIST_HALF + i % TTFT__HIST_HALF; /* in [128, 256) */
  return mant << shift;
}

uint64_t ttft__bucket_hi(uint32_t i) {
  TTFT_ASSERT(i < TTFT__HIST_BUCKETS);
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

/* ------------------------------------------------------- nearest rank
 * ceil(q * n) for the decimal q stands for. Two steps:
 *
 * 1. Exactly in binary. q = M * 2^-s with M < 2^53 (s >= 53 for q < 1),
 *    so q * n = P * 2^-s with P = M * n < 2^117: floor(q * n) = P >> s and
 *    the fraction is P mod 2^s. The decimal D the user wrote rounds to q,
 *    so |D - q| <= ulp(q) / 2 = 2^-(s+1), and |D*n - q*n| <= n/2 units of
 *    2^-s. When the fraction is farther than that from 0 and from 1, D*n
 *    and q*n lie strictly between the same two integers: the rank is
 *    floor + 1. That is the common case, a few ns.
 *
 * 2. Otherwise q*n is within a rounding error of an integer (q = 0.07,
 *    n = 100): the decimal digits of q decide. D = m * 10^-x, the shortest
 *    decimal that reads back as q (printf's correctly rounded 15, 16 or 17
 *    digits, checked with strtod; the same definition as Python's repr),
 *    and ceil(m * n / 10^x) is computed exactly in 128 bits. The digits of
 *    the last few q are cached per thread: formatters ask for the same
 *    five quantiles of every histogram. */

typedef struct u128 {
  uint64_t hi, lo;
} u128;

static u128 mul64(uint64_t a, uint64_t b) {
  uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
  uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  uint64_t mid = (p00 >> 32) + (uint32_t)p01 + (uint32_t)p10;
  u128 r;
  r.lo = (mid << 32) | (uint32_t)p00;
  r.hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
  return r;
}

/* *v /= 10; returns the remainder */
static unsigned div10(u128 *v) {
  uint64_t r = v->hi % 10;
  v->hi /= 10;
  uint64_t t = (r << 32) | (v->lo >> 32);
  uint64_t q1 = t / 10;
  r = t % 10;
  t = (r << 32) | (v->lo & 0xFFFFFFFFu);
  uint64_t q0 = t / 10;
  r = t % 10;
  v->lo = (q1 << 32) | q0;
  return (unsigned)r;
}

/* q = m * 10^-x, m without trailing zeros, for q in (0, 1) */
typedef struct dec_entry {
  uint64_t qbits; /* 0: unused (q = +0.0 never gets here) */
  uint64_t m;
  int x;
} dec_entry;

static void decimal_digits(double q, uint64_t *m_out, int *x_out) {
  static _Thread_local dec_entry cache[4];
  static _Thread_local unsigned next;
  uint64_t bits;
  memcpy(&bits, &q, sizeof bits);
  for (unsigned i = 0; i < 4; i++)
    if (cache[i].qbits == bits) {
      *m_out = cache[i].m;
      *x_out = cache[i].x;
      return;
    }
  /* The shortest of 15, 16, 17 correctly rounded significant digits that
   * reads back as q. At 15 digits or fewer the shortest decimal is the
   * 15-digit rounding with its trailing zeros dropped: a 15-digit step is
   * more than twice the largest |D - q|. */
  char buf[48];
  int p = 15;
  for (; p < 17; p++) {
    snprintf(buf, sizeof buf, "%.*e", p - 1, q);
    if (strtod(buf, NULL) == q) break;
  }
  if (p == 17) snprintf(buf, sizeof buf, "%.*e", p - 1, q);
  /* "d.ddd...e-XX", whatever the locale's decimal point */
  uint64_t m = 0;
  const char *c = buf;
  for (; *c && *c != 'e' && *c != 'E'; c++)
    if (*c >= '0' && *c <= '9') m = m * 10 + (uint64_t)(*c - '0');
  int e = *c ? atoi(c + 1) : 0;
  int x = (p - 1) - e;
  while (m && m % 10 == 0) {
    m /= 10;
    x--;
  }
  dec_entry *slot = &cache[next++ & 3];
  slot->qbits = bits;
  slot->m = m;
  slot->x = x;
  *m_out = m;
  *x_out = x;
}

static uint64_t rank_decimal(double q, uint64_t n) {
  uint64_t m;
  int x;
  decimal_digits(q, &m, &x);
  if (x <= 0) return n; /* q >= 1: not reached for q in (0, 1) */
  if (x > 38) return 1; /* 10^x > 2^126 > m * n: ceil is 1 */
  u128 v = mul64(m, n);
  unsigned any = 0;
  for (int i = 0; i < x; i++) any |= div10(&v);
  uint64_t r = v.lo + (any != 0); /* v < 2^64: m * n / 10^x <= n */
  return r;
}

uint64_t ttft__nearest_rank(double q, uint64_t n) {
  if (n == 0) return 0;
  if (!(q > 0.0)) return 1; /* also NaN */
  if (q >= 1.0) return n;
  uint64_t bits;
  memcpy(&bits, &q, sizeof bits);
  unsigned bexp = (unsigned)(bits >> 52) & 0x7FFu;
  uint64_t M = bits & ((UINT64_C(1) << 52) - 1);
  int s;
  if (bexp) { /* normal: q = (2^52 + frac) * 2^(bexp - 1075) */
    M |= UINT64_C(1) << 52;
    s = 1075 - (int)bexp;
  } else { /* subnormal: q = frac * 2^-1074 */
    s = 1074;
  }
  if (s >= 128) return 1; /* q * n < 2^117 / 2^128 */
  u128 P = mul64(M, n);
  /* floor(q * n), the fraction F = P mod 2^s and G = 2^s - F */
  uint64_t fl;
  u128 F, T = {0, 0};
  if (s >= 64) {
    fl = P.hi >> (s - 64);
    F.hi = s == 64 ? 0 : P.hi & ((UINT64_C(1) << (s - 64)) - 1);
    F.lo = P.lo;
    if (s == 64) T.hi = 1;                  /* 2^64 */
    else T.hi = UINT64_C(1) << (s - 64);
  } else {
    fl = (P.hi << (64 - s)) | (P.lo >> s);  /* P < 2^117, s >= 54: no bit lost */
    F.hi = 0;
    F.lo = P.lo & ((UINT64_C(1) << s) - 1);
    T.lo = UINT64_C(1) << s;
  }
  u128 G;
  G.lo = T.lo - F.lo;
  G.hi = T.hi - F.hi - (T.lo < F.lo);
  uint64_t h = n / 2 + 1; /* the most D * n can differ from q * n, in units of 2^-s */
  int near0 = F.hi == 0 && F.lo <= h;
  int near1 = G.hi == 0 && G.lo <= h;
  uint64_t r = (near0 || near1) ? rank_decimal(q, n) : fl + 1;
  if (r < 1) r = 1;
  if (r > n) r = n;
  return r;
}

/* ------------------------------------------------------------ reading */
uint64_t ttft__shist_at_runs(const ttft__shist *h, uint32_t i) {
  uint32_t a = 0, b = h->nruns; /* the last run starting at or before i */
  while (b - a > 1) {
    uint32_t mid = a + (b - a) / 2;
    if (h->runs[mid].start <= i) a = mid;
    else b = mid;
  }
  if (b == 0) return 0;
  const ttft__hrun *r = &h->runs[a];
  if (i < r->start || i >= (uint32_t)r->start + r->len) return 0;
  return h->cnt[r->off + (i - r->start)];
}

uint32_t ttft__shist_next(const ttft__shist *h, uint32_t i) {
  if (i >= h->hi) return h->hi;
  if (i < h->lo) return h->lo;
  for (uint32_t k = 0; k < h->nruns; k++) {
    const ttft__hrun *r = &h->runs[k];
    if (i < r->start) return r->start;
    if (i < (uint32_t)r->start + r->len) return i;
  }
  return h->hi;
}

uint64_t ttft__shist_quantile(const ttft__shist *h, double q) {
  /* callers are trusted: the public queries refuse NaN and q outside
   * [0,1] (snapshot.c, q_valid); formatters pass constants */
  TTFT_ASSERT(q >= 0.0 && q <= 1.0);
  if (h->count == 0) return 0;
  if (q <= 0.0) return h->min;
  if (q >= 1.0) return h->max;
  uint64_t rank = ttft__nearest_rank(q, h->count);
  if (rank <= 1) return h->min;
  if (rank >= h->count) return h->max;
  uint64_t seen = 0;
  for (uint32_t k = 0; k < h->nruns; k++) {
    const ttft__hrun *r = &h->runs[k];
    const uint64_t *c = h->cnt + r->off;
    for (uint32_t j = 0; j < r->len; j++) {
      seen += c[j];
      if (seen >= rank) {
        uint64_t v = bucket_mid(r->start + j);
        if (v < h->min) v = h->min;
        if (v > h->max) v = h->max;
        return v;
      }
    }
  }
  return h->max;
}

uint64_t ttft__shist_count_le(const ttft__shist *h, uint64_t v) {
  uint64_t n = 0;
  for (uint32_t k = 0; k < h->nruns; k++) {
    const ttft__hrun *r = &h->runs[k];
    for (uint32_t j = 0; j < r->len; j++) {
      if (ttft__bucket_hi(r->start + j) > v) return n;
      n += h->cnt[r->off + j];
    }
  }
  return n;
}

/* ------------------------------------------------------------ builder */
ttft__hacc *ttft__hacc_new(const ttft_allocator *a) {
  ttft__hacc *acc = ttft__alloc(a, sizeof *acc);
  if (acc) acc->sorted = 1;
  return acc;
}

void ttft__hacc_free(const ttft_allocator *a, ttft__hacc *acc) { ttft__free(a, acc); }

void ttft__hacc_clear(ttft__hacc *acc) {
  if (acc->n * 4 < acc->hi - acc->lo) {
    for (uint32_t k = 0; k < acc->n; k++) acc->b[acc->idx[k]] = 0;
  } else if (acc->n) {
    memset(acc->b + acc->lo, 0, (acc->hi - acc->lo) * sizeof acc->b[0]);
  }
  acc->n = 0;
  acc->lo = acc->hi = 0;
  acc->sorted = 1;
  acc->sum = acc->sum_hi = acc->min = acc->max = 0;
  acc->any = 0;
  acc->overflow = 0;
}

void ttft__hacc_add_stats(ttft__hacc *acc, uint64_t lo, uint64_t hi, uint64_t min, uint64_t max) {
  /* 128-bit add: the carry out of the low word goes to the high word; a
   * carry out of that (2^128 ns, never recorded) refuses the result */
  uint64_t s = acc->sum + lo;
  uint64_t h = acc->sum_hi + hi;
  if (h < hi) acc->overflow = 1;
  if (s < lo && ++h == 0) acc->overflow = 1;
  acc->sum = s;
  acc->sum_hi = h;
  if (!acc->any || min < acc->min) acc->min = min;
  if (!acc->any || max > acc->max) acc->max = max;
  acc->any = 1;
}

void ttft__hacc_add(ttft__hacc *acc, const ttft__shist *h) {
  if (!h || h->count == 0) return;
  for (uint32_t k = 0; k < h->nruns; k++) {
    const ttft__hrun *r = &h->runs[k];
    for (uint32_t j = 0; j < r->len; j++) ttft__hacc_add_bucket(acc, r->start + j, h->cnt[r->off + j]);
  }
  ttft__hacc_add_stats(acc, h->sum, h->sum_hi, h->min, h->max);
}

uint32_t ttft__u128_divmod(uint64_t *hi, uint64_t *lo, uint32_t d) {
  TTFT_ASSERT(d > 0);
  /* long division by 32-bit limbs: each step divides a value below d * 2^32 */
  uint32_t w[4] = {(uint32_t)(*hi >> 32), (uint32_t)*hi, (uint32_t)(*lo >> 32), (uint32_t)*lo};
  uint64_t r = 0;
  for (int i = 0; i < 4; i++) {
    uint64_t cur = (r << 32) | w[i];
    w[i] = (uint32_t)(cur / d);
    r = cur % d;
  }
  *hi = (uint64_t)w[0] << 32 | w[1];
  *lo = (uint64_t)w[2] << 32 | w[3];
  return (uint32_t)r;
}

size_t ttft__u128_decimal(uint64_t hi, uint64_t lo, char *buf) {
  char tmp[40];
  size_t n = 0;
  for (;;) {
    uint32_t r = ttft__u128_divmod(&hi, &lo, 1000000000u);
    if (hi || lo) { /* more groups follow: nine digits, leading zeros kept */
      for (int k = 0; k < 9; k++, r /= 10) tmp[n++] = (char)('0' + r % 10);
      continue;
    }
    do {
      tmp[n++] = (char)('0' + r % 10);
      r /= 10;
    } while (r);
    break;
  }
  for (size_t i = 0; i < n; i++) buf[i] = tmp[n - 1 - i];
  buf[n] = '\0';
  return n;
}

int ttft__hacc_set_sum_diff(ttft__hacc *acc, uint64_t a_hi, uint64_t a_lo, uint64_t b_hi,
                            uint64_t b_lo) {
  if (a_hi < b_hi || (a_hi == b_hi && a_lo < b_lo)) return 0;
  acc->sum = a_lo - b_lo;
  acc->sum_hi = a_hi - b_hi - (a_lo < b_lo);
  return 1;
}

int ttft__hacc_sub(ttft__hacc *acc, const ttft__shist *h) {
  if (!h) return 1;
  for (uint32_t k = 0; k < h->nruns; k++) {
    const ttft__hrun *r = &h->runs[k];
    for (uint32_t j = 0; j < r->len; j++) {
      uint64_t c = h->cnt[r->off + j];
      uint32_t i = r->start + j;
      if (acc->b[i] < c) return 0;
      acc->b[i] -= c;
    }
  }
  return 1;
}

static int cmp_u16(const void *a, const void *b) {
  return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

int ttft__hacc_build(ttft__hacc *acc, ttft__hist_alloc_fn alloc_fn, void *ctx, ttft__shist *empty,
                     ttft__shist **out) {
  *out = empty;
  if (acc->overflow) {
    ttft__hacc_clear(acc);
    return TTFT_ERANGE;
  }
  if (!acc->n) {
    ttft__hacc_clear(acc);
    return TTFT_OK;
  }
  /* the touched buckets in ascending order: sort a short list, or read a
   * dense range back */
  if (!acc->sorted) {
    if ((uint64_t)acc->n * 16 < acc->hi - acc->lo) {
      qsort(acc->idx, acc->n, sizeof acc->idx[0], cmp_u16);
      uint32_t o = 0; /* a bucket subtracted to 0 and added again is listed twice */
      for (uint32_t k = 0; k < acc->n; k++)
        if (!o || acc->idx[k] != acc->idx[o - 1]) acc->idx[o++] = acc->idx[k];
      acc->n = o;
    } else {
      acc->n = 0;
      for (uint32_t i = acc->lo; i < acc->hi; i++)
        if (acc->b[i]) acc->idx[acc->n++] = (uint16_t)i;
    }
    acc->sorted = 1;
  }
  /* pass 1: runs and words; a gap of TTFT__HRUN_GAP empty buckets splits */
  uint32_t nruns = 0, words = 0, prev = 0, first = 0, last = 0;
  uint64_t count = 0;
  int wrapped = 0;
  for (uint32_t k = 0; k < acc->n; k++) {
    uint32_t i = acc->idx[k];
    uint64_t c = acc->b[i];
    if (!c) continue;
    if (nruns && i - prev - 1 < TTFT__HRUN_GAP) {
      words += i - prev;
    } else {
      nruns++;
      words++;
      if (nruns == 1) first = i;
    }
    if (c > UINT64_MAX - count) wrapped = 1;
    count += c;
    prev = last = i;
  }
  if (wrapped) {
    ttft__hacc_clear(acc);
    return TTFT_ERANGE;
  }
  if (!nruns) { /* everything subtracted away */
    ttft__hacc_clear(acc);
    return TTFT_OK;
  }
  size_t bytes = sizeof(ttft__shist) + nruns * sizeof(ttft__hrun) + (size_t)words * sizeof(uint64_t);
  ttft__shist *h = alloc_fn(ctx, bytes);
  if (!h) {
    ttft__hacc_clear(acc);
    return TTFT_ENOMEM;
  }
  ttft__hrun *runs = (ttft__hrun *)(h + 1);
  uint64_t *cnt = (uint64_t *)(runs + nruns);
  memset(cnt, 0, (size_t)words * sizeof *cnt);
  /* pass 2: fill */
  uint32_t r = 0, w = 0;
  for (uint32_t k = 0; k < acc->n; k++) {
    uint32_t i = acc->idx[k];
    uint64_t c = acc->b[i];
    if (!c) continue;
    if (w && i - prev - 1 < TTFT__HRUN_GAP) {
      w += i - prev - 1;
      runs[r - 1].len = (uint16_t)(i + 1 - runs[r - 1].start);
    } else {
      runs[r].start = (uint16_t)i;
      runs[r].len = 1;
      runs[r].off = w;
      r++;
    }
    cnt[w++] = c;
    prev = i;
  }
  h->count = count;
  h->sum = acc->sum;
  h->sum_hi = acc->sum_hi;
  h->lo = first;
  h->hi = last + 1;
  h->nruns = nruns;
  h->runs = runs;
  h->cnt = cnt;
  /* min/max: kept when consistent with the populated buckets (they were
   * copied racily, or subtracted away), else the bucket edge */
  uint64_t mn = acc->any ? acc->min : ttft__bucket_lo(first);
  uint64_t mx = acc->any ? acc->max : ttft__bucket_hi(last);
  if (mn < ttft__bucket_lo(first) || mn > ttft__bucket_hi(first)) mn = ttft__bucket_lo(first);
  if (mx > ttft__bucket_hi(last)) mx = ttft__bucket_hi(last);
  if (mx < ttft__bucket_lo(last)) mx = ttft__bucket_lo(last);
  if (mx < mn) mx = mn;
  h->min = mn;
  h->max = mx;
  ttft__hacc_clear(acc);
  *out = h;
  return TTFT_OK;
}
