/* slowest.c — the lists of slowest requests a snapshot holds
 * (ttft_snapshot_slowest): ordering, storage, the all-classes list.
 * Shared by snapshot_take (record/) and the codec, merge and delta
 * (report/). Layer: common (src/README.md). */
#include <stdlib.h>
#include <string.h>

#include "common/snapshot.h"

/* value descending; ties: earlier end first (a live list keeps the entry
 * that came first), then id, then trace id, so that every producer orders
 * equal values the same way */
static int slow_cmp(const void *pa, const void *pb) {
  const ttft__slow *a = pa, *b = pb;
  if (a->value != b->value) return a->value > b->value ? -1 : 1;
  if (a->t_end != b->t_end) return a->t_end < b->t_end ? -1 : 1;
  int c = strcmp(a->id, b->id);
  if (c) return c;
  if (a->has_trace != b->has_trace) return a->has_trace ? -1 : 1;
  return memcmp(a->trace, b->trace, sizeof a->trace);
}

uint32_t ttft__slow_sort(ttft__slow *v, uint32_t n, uint32_t k) {
  if (n > 1) qsort(v, n, sizeof *v, slow_cmp);
  return n < k ? n : k;
}

int ttft__slow_set(ttft_snapshot *s, uint32_t c, int by, const ttft__slow *v, uint32_t n) {
  ttft__sclass *k = &s->cls[c];
  k->slow[by] = NULL;
  k->nslow[by] = 0;
  if (!n) return TTFT_OK;
  ttft__slow *d = ttft__snapshot_alloc(s, (size_t)n * sizeof *d);
  if (!d) return TTFT_ENOMEM;
  memcpy(d, v, (size_t)n * sizeof *d);
  for (uint32_t i = 0; i < n; i++) d[i].cls = c;
  k->slow[by] = d;
  k->nslow[by] = n;
  return TTFT_OK;
}

int ttft__slow_finish(ttft_snapshot *s) {
  for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++) {
    s->all.slow[by] = NULL;
    s->all.nslow[by] = 0;
    uint64_t n = 0;
    for (uint32_t c = 0; c < s->nclasses; c++) n += s->cls[c].nslow[by];
    if (!n) continue;
    ttft__slow *v = ttft__snapshot_alloc(s, (size_t)n * sizeof *v);
    if (!v) return TTFT_ENOMEM;
    uint32_t i = 0;
    for (uint32_t c = 0; c < s->nclasses; c++) {
      const ttft__sclass *k = &s->cls[c];
      if (k->nslow[by]) memcpy(v + i, k->slow[by], k->nslow[by] * sizeof *v);
      i += k->nslow[by];
    }
    uint32_t keep = s->slowest_k ? s->slowest_k : (uint32_t)n;
    s->all.slow[by] = v; /* the tail past keep stays unused in the storage */
    s->all.nslow[by] = ttft__slow_sort(v, (uint32_t)n, keep);
  }
  return TTFT_OK;
}

void ttft__slow_trace_hex(const ttft__slow *e, char *dst) {
  static const char hex[] = "0123456789abcdef";
  if (!e->has_trace) {
    dst[0] = '\0';
    return;
  }
  for (int i = 0; i < 16; i++) {
    dst[2 * i] = hex[e->trace[i] >> 4];
    dst[2 * i + 1] = hex[e->trace[i] & 15];
  }
  dst[32] = '\0';
}
