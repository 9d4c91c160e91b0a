/* snapshot.c — every read-only query on snapshots, and
 * ttft_snapshot_format. Layer: report (src/README.md). */
#include <limits.h>
#include <locale.h>
#include <stdatomic.h>
#include <string.h>

#include "report/format.h"

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
  return (h && h->count) ? ttft__shist_sum_double(h) / (double)h->count : 0.0;
}
uint64_t ttft_snapshot_class_sum(const ttft_snapshot *s, int class_id, ttft_metric m) {
  const ttft__shist *h = hist_of(s, class_id, m);
  return h ? ttft__shist_sum_sat(h) : 0;
}
int ttft_snapshot_class_sum_wide(const ttft_snapshot *s, int class_id, ttft_metric m, uint64_t *hi,
                                 uint64_t *lo) {
  const ttft__shist *h = hist_of(s, class_id, m);
  if (!h) return TTFT_EINVAL;
  if (hi) *hi = h->sum_hi;
  if (lo) *lo = h->sum;
  return TTFT_OK;
}
uint64_t ttft_snapshot_class_counter(const ttft_snapshot *s, int class_id, ttft_counter c) {
  const ttft__sclass *k = ttft__snapshot_class(s, class_id);
  return (k && (unsigned)c < TTFT_COUNTER_COUNT_) ? k->ctr[c] : 0;
}

static const ttft__shist *status_hist_of(const ttft_snapshot *s, int class_id, ttft_status st,
                                         ttft_metric m) {
  if ((unsigned)st >= TTFT_STATUS_COUNT_ || (unsigned)m >= TTFT_METRIC_COUNT_) return NULL;
  int v = ttft__status_view(m);
  const ttft__sclass *c = ttft__snapshot_class(s, class_id);
  return (c && v >= 0) ? c->sv[st][v] : NULL;
}
uint64_t ttft_snapshot_status_count(const ttft_snapshot *s, int class_id, ttft_status st,
                                    ttft_metric m) {
  const ttft__shist *h = status_hist_of(s, class_id, st, m);
  return h ? h->count : 0;
}
uint64_t ttft_snapshot_status_quantile(const ttft_snapshot *s, int class_id, ttft_status st,
                                       ttft_metric m, double q) {
  const ttft__shist *h = status_hist_of(s, class_id, st, m);
  return (h && q_valid(q)) ? ttft__shist_quantile(h, q) : 0;
}

uint64_t ttft_snapshot_status_sum(const ttft_snapshot *s, int class_id, ttft_status st,
                                  ttft_metric m) {
  const ttft__shist *h = status_hist_of(s, class_id, st, m);
  return h ? ttft__shist_sum_sat(h) : 0;
}
double ttft_snapshot_status_mean(const ttft_snapshot *s, int class_id, ttft_status st,
                                 ttft_metric m) {
  const ttft__shist *h = status_hist_of(s, class_id, st, m);
  return (h && h->count) ? ttft__shist_sum_double(h) / (double)h->count : 0.0;
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
  return c ? ttft__attainment(c, NULL, NULL) : -1.0;
}

static const ttft__shist *split_of(const ttft_snapshot *s, ttft_split split, unsigned index) {
  if (!s) return NULL;
  if (split == TTFT_SPLIT_PREFIX_CACHE) return index < TTFT_PREFIX_BAND_COUNT_ ? s->split_cache[index] : NULL;
  if (split == TTFT_SPLIT_PREFILL_BY_PREFIX)
    return index < TTFT_PREFIX_BAND_COUNT_ ? s->split_prefill[index] : NULL;
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

static const ttft__sclass *cause_class(const ttft_snapshot *s, int class_id, ttft_stall_cause c) {
  return (unsigned)c < TTFT_STALL_CAUSE_COUNT ? ttft__snapshot_class(s, class_id) : NULL;
}
uint64_t ttft_snapshot_stalls_by_cause(const ttft_snapshot *s, int class_id, ttft_stall_cause c) {
  const ttft__sclass *k = cause_class(s, class_id, c);
  return k ? k->stall_n[c] : 0;
}
uint64_t ttft_snapshot_stall_seconds_by_cause(const ttft_snapshot *s, int class_id,
                                              ttft_stall_cause c) {
  const ttft__sclass *k = cause_class(s, class_id, c);
  return k ? k->stall_ns[c] : 0;
}

static const ttft__shist *step_of(const ttft_snapshot *s, int prefill) {
  return s ? s->step[prefill ? 1 : 0] : NULL;
}
uint64_t ttft_snapshot_engine_step_count(const ttft_snapshot *s, int prefill) {
  const ttft__shist *h = step_of(s, prefill);
  return h ? h->count : 0;
}
uint64_t ttft_snapshot_engine_step_quantile(const ttft_snapshot *s, int prefill, double q) {
  const ttft__shist *h = step_of(s, prefill);
  return (h && q_valid(q)) ? ttft__shist_quantile(h, q) : 0;
}
uint64_t ttft_snapshot_engine_step_sum(const ttft_snapshot *s, int prefill) {
  const ttft__shist *h = step_of(s, prefill);
  return h ? h->sum : 0;
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

#ifdef LC_ALL_MASK
/* The C locale, made once. The formats print with it whatever the host
 * set with setlocale: under a locale with a decimal comma (de_DE, fr_FR,
 * ...) "%.17g" writes "0,5", which is no JSON number, and the text
 * report's figures would change with the host's locale. */
static locale_t c_locale(void) {
  static _Atomic(locale_t) made;
  /* acquire: pairs with the release of the CAS below, so the locale
   * object another thread made is complete when we use it */
  locale_t l = atomic_load_explicit(&made, memory_order_acquire);
  if (l) return l;
  l = newlocale(LC_ALL_MASK, "C", (locale_t)0);
  if (!l) return l; /* out of memory: the thread's own locale is used */
  locale_t none = (locale_t)0;
  /* release on success: publishes the object we made; acquire on
   * failure: the one another thread published is complete */
  if (!atomic_compare_exchange_strong_explicit(&made, &none, l, memory_order_acq_rel,
                                               memory_order_acquire)) {
    freelocale(l);
    l = none;
  }
  return l;
}
#endif

long ttft_snapshot_format(const ttft_snapshot *s, ttft_format f, char *buf, size_t cap) {
  if (!s || (!buf && cap) || (unsigned)f >= TTFT_FORMAT_COUNT_) return TTFT_EINVAL;
  ttft__sb sb;
  ttft__sb_init(&sb, buf, cap);
#ifdef LC_ALL_MASK
  /* this thread only, for this call: the host's locale is left alone */
  locale_t c = c_locale(), prev = c ? uselocale(c) : (locale_t)0;
#endif
  int rc;
  switch (f) {
  case TTFT_FORMAT_TEXT: rc = ttft__format_text(s, &sb); break;
  case TTFT_FORMAT_JSON: rc = ttft__format_json(s, &sb); break;
  case TTFT_FORMAT_PROMETHEUS: rc = ttft__format_prometheus(s, &sb, 0); break;
  case TTFT_FORMAT_OPENMETRICS: rc = ttft__format_prometheus(s, &sb, 1); break;
  case TTFT_FORMAT_PROMETHEUS_PROTOBUF: rc = ttft__format_protobuf(s, &sb); break;
  case TTFT_FORMAT_OTLP_PROTOBUF: rc = ttft__format_otlp(s, NULL, &sb); break;
  default: rc = TTFT_EINVAL; break;
  }
#ifdef LC_ALL_MASK
  if (prev) uselocale(prev);
#endif
  if (rc != TTFT_OK) return rc;
  if (sb.len > (size_t)LONG_MAX) return TTFT_ERANGE;
  return (long)sb.len;
}

/* -------------------------------------------------------- slowest requests */
static const ttft__slow *slow_list(const ttft_snapshot *s, int class_id, ttft_slowest_by by,
                                   uint32_t *n) {
  const ttft__sclass *k = ttft__snapshot_class(s, class_id);
  if (!k || (unsigned)by >= TTFT_SLOWEST_COUNT_) return NULL;
  *n = k->nslow[by];
  return k->slow[by];
}

unsigned ttft_snapshot_slowest_count(const ttft_snapshot *s, int class_id, ttft_slowest_by by) {
  uint32_t n = 0;
  return slow_list(s, class_id, by, &n) ? n : 0;
}

int ttft_snapshot_slowest(const ttft_snapshot *s, int class_id, ttft_slowest_by by, unsigned index,
                          ttft_slow_request *out) {
  if (!out || out->struct_size < sizeof(size_t) || out->struct_size > sizeof(ttft_slow_request))
    return TTFT_EINVAL;
  uint32_t n = 0;
  if (!s || (class_id != TTFT_CLASS_ALL && class_id < 0) ||
      (class_id >= 0 && (uint32_t)class_id >= s->nclasses) || (unsigned)by >= TTFT_SLOWEST_COUNT_)
    return TTFT_EINVAL;
  const ttft__slow *v = slow_list(s, class_id, by, &n);
  if (index >= n) return TTFT_ERANGE;
  const ttft__slow *e = &v[index];
  ttft_slow_request r;
  memset(&r, 0, sizeof r);
  r.struct_size = out->struct_size;
  r.value_ns = e->value;
  r.ttft_ns = e->ttft;
  r.max_gap_ns = e->max_gap;
  r.t_begin_ns = e->t_begin;
  r.t_end_ns = e->t_end;
  r.t_end_unix_ns = e->unix_end;
  r.tokens = e->tokens;
  r.class_id = (int)e->cls;
  r.status = (ttft_status)e->status;
  r.cause = (ttft_stall_cause)e->cause;
  memcpy(r.request_id, e->id, sizeof r.request_id);
  ttft__slow_trace_hex(e, r.trace_id);
  r.deadlines = e->dl;
  r.deadlines_missed = e->dl_missed;
  r.fluidity = ttft__slow_fluidity(e);
  r.token_deadline_ns = e->dl_ns;
  r.ttft_slo_ns = e->ttft_slo;
  r.tpot_slo_ns = e->tpot_slo;
  memcpy(out, &r, out->struct_size);
  return TTFT_OK;
}
