/* snapshot.c — building snapshots: a zeroed snapshot, its metadata, the
 * "all classes" sum. Used by ttft_snapshot_take (record/) and by the codec,
 * merge and delta (report/). Layer: common (src/README.md). */
#include <string.h>

#include "common/snapshot.h"

/* ---------------------------------------------------------------- layout */


ttft_snapshot *ttft__snapshot_new(uint32_t nclasses) {
  if (nclasses == 0 || nclasses > 65536) return NULL;
  ttft_allocator a;
  ttft__allocator_current(&a);
  ttft_snapshot *s = ttft__alloc(&a, sizeof *s);
  if (!s) return NULL;
  s->alloc = a;
  s->nclasses = nclasses;
  s->nhists = (size_t)(nclasses + 1) * TTFT__HISTS_PER_CLASS + 2 + TTFT_MAX_BANDS;
  s->cls = ttft__alloc(&a, (size_t)nclasses * sizeof *s->cls);
  s->hists = ttft__alloc(&a, s->nhists * sizeof *s->hists);
  if (!s->cls || !s->hists) {
    ttft_snapshot_free(s);
    return NULL;
  }
  ttft__shist *h = s->hists;
  for (uint32_t c = 0; c <= nclasses; c++) {
    ttft__sclass *k = c < nclasses ? &s->cls[c] : &s->all;
    for (int m = 0; m < TTFT_METRIC_COUNT_; m++) k->h[m] = h++;
    for (int st = 0; st < TTFT_STATUS_COUNT_; st++)
      for (int v = 0; v < TTFT__STATUS_VIEWS; v++) k->sv[st][v] = h++;
  }
  s->split_cache[0] = h++;
  s->split_cache[1] = h++;
  for (int b = 0; b < TTFT_MAX_BANDS; b++) s->split_band[b] = h++;
  ttft__strlcpy(s->all.name, "all", TTFT__NAME_MAX);
  return s;
}

void ttft_snapshot_free(ttft_snapshot *s) {
  if (!s) return;
  ttft_allocator a = s->alloc;
  ttft__free(&a, s->hists);
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
}

void ttft__snapshot_finish(ttft_snapshot *s) {
  for (size_t i = 0; i < s->nhists; i++) ttft__shist_fix(&s->hists[i]);
  memset(s->all.ctr, 0, sizeof s->all.ctr);
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) memset(s->all.h[m], 0, sizeof(ttft__shist));
  for (int st = 0; st < TTFT_STATUS_COUNT_; st++)
    for (int v = 0; v < TTFT__STATUS_VIEWS; v++) memset(s->all.sv[st][v], 0, sizeof(ttft__shist));
  for (uint32_t c = 0; c < s->nclasses; c++) {
    for (int k = 0; k < TTFT_COUNTER_COUNT_; k++) s->all.ctr[k] += s->cls[c].ctr[k];
    for (int m = 0; m < TTFT_METRIC_COUNT_; m++) ttft__shist_add(s->all.h[m], s->cls[c].h[m]);
    for (int st = 0; st < TTFT_STATUS_COUNT_; st++)
      for (int v = 0; v < TTFT__STATUS_VIEWS; v++)
        ttft__shist_add(s->all.sv[st][v], s->cls[c].sv[st][v]);
  }
  ttft_slo_init(&s->all.slo);
}

const ttft__sclass *ttft__snapshot_class(const ttft_snapshot *s, int class_id) {
  if (!s) return NULL;
  if (class_id == TTFT_CLASS_ALL) return &s->all;
  if (class_id < 0 || (uint32_t)class_id >= s->nclasses) return NULL;
  return &s->cls[class_id];
}

