/* snapshot.c — building snapshots: a zeroed snapshot, its metadata, the
 * "all classes" sum. Used by ttft_snapshot_take (record/) and by the codec,
 * merge and delta (report/). Layer: common (src/README.md). */
#include <stddef.h>
#include <string.h>

#include "common/snapshot.h"

/* --------------------------------------------------------------- storage
 * Histograms live in chunks owned by the snapshot: small ones share a
 * chunk (4 KiB growing to 256 KiB as the snapshot grows, so the slack is at
 * most about half of what is used), a large one gets a chunk of its own.
 * All of it is freed with the snapshot. */
struct ttft__sblock {
  ttft__sblock *next;
  size_t cap, used;
  uint64_t pad_; /* keeps data 16-aligned after three words */
  unsigned char data[];
};

#define CHUNK_MIN 4096u
#define CHUNK_MAX (64u * 1024u) /* below malloc's mmap threshold */

/* Not zeroed: the builder writes every byte of what it takes but padding. */
static ttft__sblock *chunk_new(ttft_snapshot *s, size_t cap) {
  if (cap > SIZE_MAX - sizeof(ttft__sblock)) return NULL;
  ttft__sblock *c = s->alloc.alloc(s->alloc.ctx, sizeof *c + cap);
  if (!c) return NULL;
  c->next = NULL;
  c->cap = cap;
  c->used = 0;
  s->store_bytes += sizeof *c + cap;
  return c;
}

void *ttft__snapshot_alloc(ttft_snapshot *s, size_t bytes) {
  size_t n = (bytes + 15) & ~(size_t)15;
  if (n < bytes) return NULL;
  ttft__sblock *c = s->store;
  if (c && c->cap - c->used >= n) {
    void *p = c->data + c->used;
    c->used += n;
    return p;
  }
  size_t cap = s->store_bytes < CHUNK_MIN ? CHUNK_MIN : s->store_bytes;
  if (cap > CHUNK_MAX) cap = CHUNK_MAX;
  if (n > cap / 4) { /* large: a chunk of its own, behind the current one */
    ttft__sblock *big = chunk_new(s, n);
    if (!big) return NULL;
    big->used = n;
    if (c) {
      big->next = c->next;
      c->next = big;
    } else {
      s->store = big;
    }
    return big->data;
  }
  c = chunk_new(s, cap);
  if (!c) return NULL;
  c->next = s->store;
  s->store = c;
  c->used = n;
  return c->data;
}

static void *snapshot_alloc_fn(void *ctx, size_t bytes) { return ttft__snapshot_alloc(ctx, bytes); }

int ttft__snapshot_hist(ttft_snapshot *s, ttft__hacc *acc, ttft__shist **slot) {
  return ttft__hacc_build(acc, snapshot_alloc_fn, s, &s->empty, slot);
}

/* ---------------------------------------------------------------- layout */
static void class_empty(ttft_snapshot *s, ttft__sclass *k) {
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) k->h[m] = &s->empty;
  for (int st = 0; st < TTFT_STATUS_COUNT_; st++)
    for (int v = 0; v < TTFT__STATUS_VIEWS; v++) k->sv[st][v] = &s->empty;
}

ttft_snapshot *ttft__snapshot_new(uint32_t nclasses) {
  if (nclasses == 0 || nclasses > TTFT__MAX_CLASSES) return NULL;
  ttft_allocator a;
  ttft__allocator_current(&a);
  ttft_snapshot *s = ttft__alloc(&a, sizeof *s);
  if (!s) return NULL;
  s->alloc = a;
  s->nclasses = nclasses;
  s->cls = ttft__alloc(&a, (size_t)nclasses * sizeof *s->cls);
  if (!s->cls) {
    ttft_snapshot_free(s);
    return NULL;
  }
  for (uint32_t c = 0; c < nclasses; c++) class_empty(s, &s->cls[c]);
  class_empty(s, &s->all);
  for (int k = 0; k < TTFT_PREFIX_BAND_COUNT_; k++) s->split_cache[k] = s->split_prefill[k] = &s->empty;
  for (int b = 0; b < TTFT_MAX_BANDS; b++) s->split_band[b] = &s->empty;
  s->step[0] = s->step[1] = &s->empty;
  ttft__strlcpy(s->all.name, "all", TTFT__NAME_MAX);
  return s;
}

void ttft_snapshot_free(ttft_snapshot *s) {
  if (!s) return;
  ttft_allocator a = s->alloc;
  if (s->part) {
    for (uint32_t i = 0; i < s->nparts; i++) ttft_snapshot_free(s->part[i]);
    ttft__free(&a, s->part);
  }
  ttft__free(&a, s->part_name);
  for (ttft__sblock *c = s->store, *next; c; c = next) {
    next = c->next;
    ttft__free(&a, c);
  }
  ttft__free(&a, s->cls);
  ttft__free(&a, s);
}

void ttft__snapshot_copy_meta(ttft_snapshot *dst, const ttft_snapshot *src) {
  dst->registry_id = src->registry_id;
  dst->stall_threshold_ns = src->stall_threshold_ns;
  memcpy(dst->start_point, src->start_point, sizeof dst->start_point);
  memcpy(dst->token_point, src->token_point, sizeof dst->token_point);
  memcpy(dst->model, src->model, sizeof dst->model);
  memcpy(dst->ns, src->ns, sizeof dst->ns);
  dst->n_const_labels = src->n_const_labels;
  memcpy(dst->const_name, src->const_name, sizeof dst->const_name);
  memcpy(dst->const_value, src->const_value, sizeof dst->const_value);
  dst->n_band_edges = src->n_band_edges;
  memcpy(dst->band_edges, src->band_edges, sizeof dst->band_edges);
  memcpy(dst->prom_n_buckets, src->prom_n_buckets, sizeof dst->prom_n_buckets);
  memcpy(dst->prom_buckets, src->prom_buckets, sizeof dst->prom_buckets);
  dst->prom_summaries = src->prom_summaries;
  dst->native_histograms = src->native_histograms;
  dst->native_schema = src->native_schema;
  dst->export_idle_classes = src->export_idle_classes;
  dst->slowest_k = src->slowest_k;
}

/* s->all's histogram at offset off of a class: the sum over the classes.
 * When one class holds all of it, the histogram is shared (they are
 * immutable and freed with the snapshot, not one by one). */
static int sum_classes(ttft_snapshot *s, ttft__hacc *acc, size_t off, ttft__shist **slot) {
  ttft__shist *only = &s->empty;
  uint32_t nonempty = 0;
  for (uint32_t c = 0; c < s->nclasses; c++) {
    ttft__shist *h = *(ttft__shist **)((char *)&s->cls[c] + off);
    if (h->count) {
      only = h;
      nonempty++;
    }
  }
  if (nonempty <= 1) {
    *slot = only;
    return TTFT_OK;
  }
  for (uint32_t c = 0; c < s->nclasses; c++) ttft__hacc_add(acc, *(ttft__shist **)((char *)&s->cls[c] + off));
  return ttft__snapshot_hist(s, acc, slot);
}

int ttft__snapshot_finish(ttft_snapshot *s, ttft__hacc *acc) {
  memset(s->all.ctr, 0, sizeof s->all.ctr);
  for (uint32_t c = 0; c < s->nclasses; c++)
    for (int k = 0; k < TTFT_COUNTER_COUNT_; k++) {
      if (s->cls[c].ctr[k] > UINT64_MAX - s->all.ctr[k]) return TTFT_ERANGE;
      s->all.ctr[k] += s->cls[c].ctr[k];
    }
  memset(s->all.stall_n, 0, sizeof s->all.stall_n);
  memset(s->all.stall_ns, 0, sizeof s->all.stall_ns);
  for (uint32_t c = 0; c < s->nclasses; c++)
    for (int k = 0; k < TTFT_STALL_CAUSE_COUNT; k++) {
      if (s->cls[c].stall_n[k] > UINT64_MAX - s->all.stall_n[k]) return TTFT_ERANGE;
      s->all.stall_n[k] += s->cls[c].stall_n[k];
      s->all.stall_ns[k] += s->cls[c].stall_ns[k]; /* modulo 2^64 */
    }
  int rc = TTFT_OK;
  for (int m = 0; m < TTFT_METRIC_COUNT_ && rc == TTFT_OK; m++)
    rc = sum_classes(s, acc, offsetof(ttft__sclass, h[m]), &s->all.h[m]);
  for (int st = 0; st < TTFT_STATUS_COUNT_; st++)
    for (int v = 0; v < TTFT__STATUS_VIEWS && rc == TTFT_OK; v++)
      rc = sum_classes(s, acc, offsetof(ttft__sclass, sv[st][v]), &s->all.sv[st][v]);
  ttft_slo_init(&s->all.slo);
  if (rc == TTFT_OK) rc = ttft__slow_finish(s);
  return rc;
}

double ttft__attainment(const ttft__sclass *c, uint64_t *met_out, uint64_t *judged_out) {
  uint64_t ended = 0;
  static const ttft_counter ends[3] = {TTFT_COUNTER_COMPLETED, TTFT_COUNTER_CANCELLED,
                                       TTFT_COUNTER_ERRORS};
  for (int i = 0; i < 3; i++) {
    uint64_t v = c->ctr[ends[i]];
    ended = v > UINT64_MAX - ended ? UINT64_MAX : ended + v;
  }
  uint64_t judged = c->ctr[TTFT_COUNTER_SLO_JUDGED];
  if (judged > ended) judged = ended;
  uint64_t met = c->ctr[TTFT_COUNTER_SLO_MET];
  if (met > judged) met = judged;
  if (met_out) *met_out = met;
  if (judged_out) *judged_out = judged;
  return judged ? (double)met / (double)judged : -1.0;
}

const ttft__sclass *ttft__snapshot_class(const ttft_snapshot *s, int class_id) {
  if (!s) return NULL;
  if (class_id == TTFT_CLASS_ALL) return &s->all;
  if (class_id < 0 || (uint32_t)class_id >= s->nclasses) return NULL;
  return &s->cls[class_id];
}

