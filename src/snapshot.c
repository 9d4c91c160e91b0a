/* snapshot.c — copying the live registry into an immutable snapshot, and
 * every read-only query on snapshots. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "registry.h"

/* ---------------------------------------------------------------- layout */
#define HISTS_PER_CLASS TTFT_METRIC_COUNT_

ttft_snapshot *ttft__snapshot_new(uint32_t nclasses) {
  if (nclasses == 0 || nclasses > 65536) return NULL;
  ttft_allocator a;
  ttft__allocator_current(&a);
  ttft_snapshot *s = ttft__alloc(&a, sizeof *s);
  if (!s) return NULL;
  s->alloc = a;
  s->nclasses = nclasses;
  s->nhists = (size_t)(nclasses + 1) * HISTS_PER_CLASS + 2 + TTFT_MAX_BANDS;
  s->cls = ttft__alloc(&a, (size_t)nclasses * sizeof *s->cls);
  s->hists = ttft__alloc(&a, s->nhists * sizeof *s->hists);
  if (!s->cls || !s->hists) {
    ttft_snapshot_free(s);
    return NULL;
  }
  ttft__shist *h = s->hists;
  for (uint32_t c = 0; c < nclasses; c++)
    for (int m = 0; m < HISTS_PER_CLASS; m++) s->cls[c].h[m] = h++;
  for (int m = 0; m < HISTS_PER_CLASS; m++) s->all.h[m] = h++;
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
}

void ttft__snapshot_finish(ttft_snapshot *s) {
  for (size_t i = 0; i < s->nhists; i++) ttft__shist_fix(&s->hists[i]);
  memset(s->all.ctr, 0, sizeof s->all.ctr);
  for (int m = 0; m < HISTS_PER_CLASS; m++) memset(s->all.h[m], 0, sizeof(ttft__shist));
  for (uint32_t c = 0; c < s->nclasses; c++) {
    for (int k = 0; k < TTFT_COUNTER_COUNT_; k++) s->all.ctr[k] += s->cls[c].ctr[k];
    for (int m = 0; m < HISTS_PER_CLASS; m++) ttft__shist_add(s->all.h[m], s->cls[c].h[m]);
  }
  ttft_slo_init(&s->all.slo);
}

const ttft__sclass *ttft__snapshot_class(const ttft_snapshot *s, int class_id) {
  if (!s) return NULL;
  if (class_id == TTFT_CLASS_ALL) return &s->all;
  if (class_id < 0 || (uint32_t)class_id >= s->nclasses) return NULL;
  return &s->cls[class_id];
}

/* ------------------------------------------------------------------ take */
static void hist_copy_add(ttft__shist *dst, const ttft__hist *src) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < TTFT__HIST_BUCKETS; i++) {
    uint64_t c = LD(&src->b[i]);
    dst->b[i] += c;
    n += c;
  }
  if (!n) return;
  uint64_t mn = ~LD(&src->min), mx = LD(&src->max);
  if (dst->count == 0 || mn < dst->min) dst->min = mn;
  if (dst->count == 0 || mx > dst->max) dst->max = mx;
  dst->count += n;
  dst->sum += LD(&src->sum);
}

ttft_snapshot *ttft_snapshot_take(ttft_registry *r) {
  if (!r) return NULL;
  if (r->clock == TTFT_CLOCK_TSC) (void)ttft__tsc_usable(); /* refines the calibration */
  /* acquire: class entries and records published by class_add */
  uint32_t nc = atomic_load_explicit(&r->nclasses, memory_order_acquire);
  ttft_snapshot *s = ttft__snapshot_new(nc);
  if (!s) return NULL;
  ttft__snapshot_copy_meta(s, &r->meta);
  for (uint32_t c = 0; c < nc; c++) {
    memcpy(s->cls[c].name, r->classes[c].name, TTFT__NAME_MAX);
    s->cls[c].slo = r->classes[c].slo;
  }
  for (uint32_t i = 0; i < r->nshards; i++) {
    const ttft__shard *sh = &r->shards[i];
    if (!LD(&sh->used)) continue;
    for (uint32_t c = 0; c < nc; c++) {
      /* acquire: see class_add */
      const ttft__crec *cr = atomic_load_explicit(&sh->cls[c], memory_order_acquire);
      if (!cr) continue;
      for (int k = 0; k < TTFT_COUNTER_COUNT_; k++) s->cls[c].ctr[k] += LD(&cr->ctr[k]);
      for (int m = 0; m < HISTS_PER_CLASS; m++) hist_copy_add(s->cls[c].h[m], &cr->h[m]);
    }
    for (int k = 0; k < 2; k++) hist_copy_add(s->split_cache[k], &sh->split_cache[k]);
    for (int b = 0; b < TTFT_MAX_BANDS; b++) hist_copy_add(s->split_band[b], &sh->split_band[b]);
  }
  uint64_t now = ttft__now(r);
  ttft__scan_slots(r, now, &s->gauge[TTFT_GAUGE_INFLIGHT], &s->gauge[TTFT_GAUGE_LIVE_STALLS]);
  s->t_start_ns = r->t_created;
  s->t_end_ns = ttft_now_ns();
  ttft__snapshot_finish(s);
  return s;
}

/* --------------------------------------------------------------- queries */
static const ttft__shist *hist_of(const ttft_snapshot *s, int class_id, ttft_metric m) {
  if ((unsigned)m >= TTFT_METRIC_COUNT_) return NULL;
  const ttft__sclass *c = ttft__snapshot_class(s, class_id);
  return c ? c->h[m] : NULL;
}

static int q_valid(double q) { return q >= 0.0 && q <= 1.0; } /* false for NaN */

uint64_t ttft_snapshot_class_count(const ttft_snapshot *s, int class_id, ttft_metric m) {
  const ttft__shist *h = hist_of(s, class_id, m);
  return h ? h->count : 0;
}
uint64_t ttft_snapshot_class_quantile(const ttft_snapshot *s, int class_id, ttft_metric m,
                                      double q) {
  const ttft__shist *h = hist_of(s, class_id, m);
  return (h && q_valid(q)) ? ttft__shist_quantile(h, q) : 0;
}
double ttft_snapshot_class_mean(const ttft_snapshot *s, int class_id, ttft_metric m) {
  const ttft__shist *h = hist_of(s, class_id, m);
  return (h && h->count) ? (double)h->sum / (double)h->count : 0.0;
}
uint64_t ttft_snapshot_class_sum(const ttft_snapshot *s, int class_id, ttft_metric m) {
  const ttft__shist *h = hist_of(s, class_id, m);
  return h ? h->sum : 0;
}
uint64_t ttft_snapshot_class_counter(const ttft_snapshot *s, int class_id, ttft_counter c) {
  const ttft__sclass *k = ttft__snapshot_class(s, class_id);
  return (k && (unsigned)c < TTFT_COUNTER_COUNT_) ? k->ctr[c] : 0;
}

uint64_t ttft_snapshot_count(const ttft_snapshot *s, ttft_metric m) {
  return ttft_snapshot_class_count(s, TTFT_CLASS_ALL, m);
}
uint64_t ttft_snapshot_quantile(const ttft_snapshot *s, ttft_metric m, double q) {
  return ttft_snapshot_class_quantile(s, TTFT_CLASS_ALL, m, q);
}
double ttft_snapshot_mean(const ttft_snapshot *s, ttft_metric m) {
  return ttft_snapshot_class_mean(s, TTFT_CLASS_ALL, m);
}
uint64_t ttft_snapshot_sum(const ttft_snapshot *s, ttft_metric m) {
  return ttft_snapshot_class_sum(s, TTFT_CLASS_ALL, m);
}
uint64_t ttft_snapshot_counter(const ttft_snapshot *s, ttft_counter c) {
  return ttft_snapshot_class_counter(s, TTFT_CLASS_ALL, c);
}

uint64_t ttft_snapshot_gauge(const ttft_snapshot *s, ttft_gauge g) {
  return (s && (unsigned)g < TTFT_GAUGE_COUNT_) ? s->gauge[g] : 0;
}

int ttft_snapshot_classes(const ttft_snapshot *s) { return s ? (int)s->nclasses : 0; }

const char *ttft_snapshot_class_name(const ttft_snapshot *s, int class_id) {
  if (!s || class_id < 0 || (uint32_t)class_id >= s->nclasses) return NULL;
  return s->cls[class_id].name;
}

int ttft_snapshot_class_slo(const ttft_snapshot *s, int class_id, ttft_slo *out) {
  if (!s || !out || class_id < 0 || (uint32_t)class_id >= s->nclasses) return TTFT_EINVAL;
  if (out->struct_size < sizeof(size_t) || out->struct_size > sizeof(ttft_slo)) return TTFT_EINVAL;
  size_t n = out->struct_size;
  ttft_slo v = s->cls[class_id].slo;
  v.struct_size = n;
  memcpy(out, &v, n);
  return TTFT_OK;
}

double ttft_snapshot_attainment(const ttft_snapshot *s, int class_id) {
  const ttft__sclass *c = ttft__snapshot_class(s, class_id);
  if (!c) return -1.0;
  uint64_t ended = c->ctr[TTFT_COUNTER_COMPLETED] + c->ctr[TTFT_COUNTER_CANCELLED] +
                   c->ctr[TTFT_COUNTER_ERRORS];
  if (!ended) return -1.0;
  /* a recorded snapshot always has met <= ended; a decoded or subtracted
   * one is held to the documented range anyway */
  uint64_t met = c->ctr[TTFT_COUNTER_SLO_MET];
  return (double)(met < ended ? met : ended) / (double)ended;
}

static const ttft__shist *split_of(const ttft_snapshot *s, ttft_split split, unsigned index) {
  if (!s) return NULL;
  if (split == TTFT_SPLIT_PREFIX_CACHE) return index < 2 ? s->split_cache[index] : NULL;
  if (split == TTFT_SPLIT_PROMPT_BAND) return index <= s->n_band_edges ? s->split_band[index] : NULL;
  return NULL;
}

uint64_t ttft_snapshot_split_count(const ttft_snapshot *s, ttft_split split, unsigned index) {
  const ttft__shist *h = split_of(s, split, index);
  return h ? h->count : 0;
}

uint64_t ttft_snapshot_split_quantile(const ttft_snapshot *s, ttft_split split, unsigned index,
                                      double q) {
  const ttft__shist *h = split_of(s, split, index);
  return (h && q_valid(q)) ? ttft__shist_quantile(h, q) : 0;
}

unsigned ttft_snapshot_bands(const ttft_snapshot *s) { return s ? s->n_band_edges + 1 : 0; }

int ttft_snapshot_band(const ttft_snapshot *s, unsigned index, uint32_t *lo, uint32_t *hi) {
  if (!s || !lo || !hi || index > s->n_band_edges) return TTFT_EINVAL;
  *lo = index ? s->band_edges[index - 1] : 0;
  *hi = index < s->n_band_edges ? s->band_edges[index] : UINT32_MAX;
  return TTFT_OK;
}

int ttft_snapshot_interval(const ttft_snapshot *s, uint64_t *start_ns, uint64_t *end_ns) {
  if (!s || !start_ns || !end_ns) return TTFT_EINVAL;
  *start_ns = s->t_start_ns;
  *end_ns = s->t_end_ns;
  return TTFT_OK;
}

const char *ttft_snapshot_label(const ttft_snapshot *s, const char *key) {
  if (!s || !key) return NULL;
  if (!strcmp(key, "start_point")) return s->start_point;
  if (!strcmp(key, "token_point")) return s->token_point;
  if (!strcmp(key, "model")) return s->model;
  if (!strcmp(key, "namespace")) return s->ns;
  return NULL;
}

long ttft_snapshot_format(const ttft_snapshot *s, ttft_format f, char *buf, size_t cap) {
  if (!s || (!buf && cap) || (unsigned)f >= TTFT_FORMAT_COUNT_) return TTFT_EINVAL;
  ttft__sb sb;
  ttft__sb_init(&sb, buf, cap);
  int rc;
  switch (f) {
  case TTFT_FORMAT_TEXT: rc = ttft__format_text(s, &sb); break;
  case TTFT_FORMAT_JSON: rc = ttft__format_json(s, &sb); break;
  case TTFT_FORMAT_PROMETHEUS: rc = ttft__format_prometheus(s, &sb, 0); break;
  case TTFT_FORMAT_OPENMETRICS: rc = ttft__format_prometheus(s, &sb, 1); break;
  default: rc = TTFT_EINVAL; break;
  }
  if (rc != TTFT_OK) return rc;
  if (sb.len > (size_t)LONG_MAX) return TTFT_ERANGE;
  return (long)sb.len;
}
