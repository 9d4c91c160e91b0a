/* floor.c — see floor.h. A separate file so that nothing inlines it. */
#include "floor.h"

#include <stdatomic.h>
#include <string.h>

void floor_init(floor_hist *h) {
  memset(h, 0, sizeof *h);
  h->min = INT64_MAX;
}

int floor_record(floor_hist *h, int64_t v) {
  if (v < 0) return 0;
  uint64_t u = (uint64_t)v;
  /* the octave: values below 2^SUB_BITS share octave 0, linear */
  unsigned msb = 63u - (unsigned)__builtin_clzll(u | ((UINT64_C(1) << FLOOR_SUB_BITS) - 1));
  unsigned octave = msb - (FLOOR_SUB_BITS - 1);
  /* top SUB_BITS bits of the value: in [1024, 2048) for octave >= 1 */
  uint64_t sub = u >> octave;
  uint64_t idx = ((uint64_t)octave << FLOOR_HALF_BITS) + sub;
  if (idx >= FLOOR_COUNTS) return 0;
  h->counts[idx]++;
  h->total++;
  if (v < h->min && v != 0) h->min = v;
  if (v > h->max) h->max = v;
  return 1;
}

int floor_record_bucket(floor_hist *h, int64_t v) {
  if (v < 0) return 0;
  uint64_t u = (uint64_t)v;
  unsigned msb = 63u - (unsigned)__builtin_clzll(u | ((UINT64_C(1) << FLOOR_SUB_BITS) - 1));
  unsigned octave = msb - (FLOOR_SUB_BITS - 1);
  uint64_t idx = ((uint64_t)octave << FLOOR_HALF_BITS) + (u >> octave);
  if (idx >= FLOOR_COUNTS) return 0;
  h->counts[idx]++;
  return 1;
}

void floor_atomic_add(_Atomic uint64_t *p, uint64_t v) {
  atomic_fetch_add_explicit(p, v, memory_order_relaxed);
}
