/*
 * floor.h — the baselines ttft-bench compares the library against.
 *
 * The floor is the SPEC's (section 5): a plain (non-atomic) log-linear
 * bucket increment behind a call the compiler may not inline — find the
 * bucket with a count-leading-zeros and bump its counter, nothing else
 * (floor_record_bucket). floor_record is HdrHistogram_c's hdr_record_value
 * work: the same, plus the total, min and max (the "HDR floor", reported
 * beside it; ratios against it look ~1.5x better). Our own small versions,
 * with HdrHistogram's bucket layout at 3 significant digits (2048
 * sub-buckets per power of two, values 1 ns .. 1 h).
 */
#ifndef TTFT_BENCH_FLOOR_H
#define TTFT_BENCH_FLOOR_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define FLOOR_SUB_BITS 11                     /* 2048 sub-buckets: 3 digits */
#define FLOOR_HALF_BITS (FLOOR_SUB_BITS - 1)  /* 1024                       */
#define FLOOR_MAX_BITS 42                     /* 2^42 ns = 73 min > 1 h     */
#define FLOOR_COUNTS ((FLOOR_MAX_BITS - FLOOR_SUB_BITS + 2) << FLOOR_HALF_BITS)

typedef struct floor_hist {
  int64_t total, min, max;
  int64_t counts[FLOOR_COUNTS];
} floor_hist;

void floor_init(floor_hist *h);
/* Record one value; returns 0 when it is out of range (like hdr's false).
 * floor_record also keeps total, min and max (hdr_record_value);
 * floor_record_bucket only bumps the bucket (the SPEC's floor). */
int floor_record(floor_hist *h, int64_t v) __attribute__((noinline));
int floor_record_bucket(floor_hist *h, int64_t v) __attribute__((noinline));

/* Relaxed atomic add on *p, also behind a call. */
void floor_atomic_add(_Atomic uint64_t *p, uint64_t v) __attribute__((noinline));

#endif
