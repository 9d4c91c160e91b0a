/* util.c — errors, names, version, allocation, the string builder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/internal.h"

#if TTFT_HAVE_PTHREADS
int ttft__thread_attr(pthread_attr_t *attr) {
  int e = pthread_attr_init(attr);
  if (e) return e;
  size_t now = 0;
  if (pthread_attr_getstacksize(attr, &now) != 0 || now < TTFT__THREAD_STACK) {
    e = pthread_attr_setstacksize(attr, TTFT__THREAD_STACK);
    if (e) pthread_attr_destroy(attr);
  }
  return e;
}
#endif

/* ---------------------------------------------------------------- version */
unsigned ttft_version_number(void) { return TTFT_VERSION_NUMBER; }
const char *ttft_version_string(void) { return TTFT_VERSION_STRING; }

/* ----------------------------------------------------------------- errors */
const char *ttft_strerror(int err) {
  switch (err) {
  case TTFT_OK: return "success";
#define TTFT__ERR_MSG(name, val, msg) \
  case TTFT_##name: return msg;
    TTFT_ERRNO_MAP(TTFT__ERR_MSG)
#undef TTFT__ERR_MSG
  default: return "unknown error";
  }
}

const char *ttft_err_name(int err) {
  switch (err) {
  case TTFT_OK: return "TTFT_OK";
#define TTFT__ERR_NAME(name, val, msg) \
  case TTFT_##name: return "TTFT_" #name;
    TTFT_ERRNO_MAP(TTFT__ERR_NAME)
#undef TTFT__ERR_NAME
  default: return "TTFT_UNKNOWN";
  }
}

/* ------------------------------------------------------------------ debug */
#if TTFT_DEBUG_ON
void ttft__assert_fail(const char *cond, const char *file, int line) {
  /* debug builds only (debug.h): the one place the library may print */
  fprintf(stderr, "libttft: assertion failed: %s (%s:%d)\n", cond, file, line);
  abort();
}
#endif

/* ------------------------------------------------------------------ names */
static const char *const metric_names[] = {
    "ttft", "tpot", "itl", "e2e", "queue", "prefill", "decode", "output_tokens",
    "seq_itl_p95", "seq_itl_max", "abandoned_wait", "itl_per_token"};
static const char *const counter_names[] = {
    "begun", "completed", "cancelled", "errors", "dropped", "tokens", "stalls",
    "stalled_seqs", "abandoned", "slo_met", "clock_clamped", "preemptions", "no_tpot", "stale", "slo_judged",
    "trace_id_invalid", "barrier_fallbacks", "clock_refused", "publish_failed", "segments_skipped",
    "processes_exited", "token_deadlines", "token_deadlines_missed", "fluid", "fluid_judged"};
static const char *const status_names[] = {"completed", "cancelled", "error"};
static const char *const format_names[] = {"text", "json", "prometheus",
                                                             "openmetrics", "prometheus_protobuf",
                                                             "otlp_protobuf"};

/* one name per enum value: a new metric, counter, status or format
 * without a name does not compile */
#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))
TTFT_STATIC_ASSERT(NELEMS(metric_names) == TTFT_METRIC_COUNT_, "a name per metric");
TTFT_STATIC_ASSERT(NELEMS(counter_names) == TTFT_COUNTER_COUNT_, "a name per counter");
TTFT_STATIC_ASSERT(NELEMS(status_names) == TTFT_STATUS_COUNT_, "a name per status");
TTFT_STATIC_ASSERT(NELEMS(format_names) == TTFT_FORMAT_COUNT_, "a name per format");

const char *ttft_metric_name(ttft_metric m) {
  return ((unsigned)m < TTFT_METRIC_COUNT_) ? metric_names[m] : NULL;
}
const char *ttft_counter_name(ttft_counter c) {
  return ((unsigned)c < TTFT_COUNTER_COUNT_) ? counter_names[c] : NULL;
}
const char *ttft_status_name(ttft_status st) {
  return ((unsigned)st < TTFT_STATUS_COUNT_) ? status_names[st] : NULL;
}
const char *ttft_format_name(ttft_format f) {
  return ((unsigned)f < TTFT_FORMAT_COUNT_) ? format_names[f] : NULL;
}
static const char *const stall_cause_names[TTFT_STALL_CAUSE_COUNT] = {
    "unknown", "prefill", "preempted", "not_scheduled", "engine_idle", "slow_step"};
const char *ttft_stall_cause_name(ttft_stall_cause c) {
  return ((unsigned)c < TTFT_STALL_CAUSE_COUNT) ? stall_cause_names[c] : NULL;
}

/* ------------------------------------------------------------- allocation */
static void *default_alloc(void *ctx, size_t n) {
  (void)ctx;
  return malloc(n);
}
static void default_free(void *ctx, void *p) {
  (void)ctx;
  free(p);
}

/* Set at start-up by ttft_set_allocator (documented as not thread-safe
 * against allocating calls), read when an object is created. */
static ttft_allocator g_alloc = {default_alloc, default_free, NULL};

int ttft_set_allocator(const ttft_allocator *a) {
  if (!a) {
    g_alloc.alloc = default_alloc;
    g_alloc.free = default_free;
    g_alloc.ctx = NULL;
    return TTFT_OK;
  }
  if (!a->alloc || !a->free) return TTFT_EINVAL;
  g_alloc = *a;
  return TTFT_OK;
}

void ttft__allocator_current(ttft_allocator *out) { *out = g_alloc; }

void *ttft__alloc(const ttft_allocator *a, size_t n) {
  if (n == 0) n = 1;
  /* calloc leaves large blocks as untouched zero pages: creating a registry
   * does not fault in megabytes that only fill as traffic arrives */
  if (a->alloc == default_alloc) return calloc(1, n);
  void *p = a->alloc(a->ctx, n);
  if (p) memset(p, 0, n);
  return p;
}

void ttft__free(const ttft_allocator *a, void *p) {
  if (p) a->free(a->ctx, p);
}

/* --------------------------------------------------------- string builder */
void ttft__sb_init(ttft__sb *sb, char *buf, size_t cap) {
  sb->buf = buf;
  sb->cap = buf ? cap : 0;
  sb->len = 0;
  if (sb->cap) sb->buf[0] = '\0';
}

void ttft__sb_put(ttft__sb *sb, const char *s, size_t n) {
  if (sb->len + 1 < sb->cap) {
    size_t room = sb->cap - 1 - sb->len;
    size_t k = n < room ? n : room;
    memcpy(sb->buf + sb->len, s, k);
    sb->buf[sb->len + k] = '\0';
  }
  sb->len += n;
}

void ttft__sb_puts(ttft__sb *sb, const char *s) { ttft__sb_put(sb, s, strlen(s)); }

void ttft__sb_printf(ttft__sb *sb, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) {
    ttft__sb_put(sb, tmp, (size_t)n);
    return;
  }
  /* longer than the scratch: print straight into the caller's buffer */
  size_t room = (sb->len < sb->cap) ? sb->cap - sb->len : 0;
  va_start(ap, fmt);
  if (room) vsnprintf(sb->buf + sb->len, room, fmt, ap);
  va_end(ap);
  sb->len += (size_t)n;
}

size_t ttft__utf8_seq(const unsigned char *p, size_t n, unsigned *cp, size_t *bad) {
  unsigned c = p[0], v;
  size_t k;
  unsigned lo2 = 0x80, hi2 = 0xBF; /* allowed range of the second byte */
  if (bad) *bad = 1;
  if (c < 0x80) {
    if (cp) *cp = c;
    return 1;
  }
  if (c >= 0xC2 && c <= 0xDF) {
    k = 2, v = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    k = 3, v = c & 0x0F;
    if (c == 0xE0) lo2 = 0xA0; /* no overlong forms    */
    if (c == 0xED) hi2 = 0x9F; /* no UTF-16 surrogates */
  } else if (c >= 0xF0 && c <= 0xF4) {
    k = 4, v = c & 0x07;
    if (c == 0xF0) lo2 = 0x90; /* no overlong forms      */
    if (c == 0xF4) hi2 = 0x8F; /* nothing past U+10FFFF  */
  } else {
    return 0;
  }
  for (size_t i = 1; i < k; i++) {
    unsigned lo = i == 1 ? lo2 : 0x80, hi = i == 1 ? hi2 : 0xBF;
    if (i >= n || p[i] < lo || p[i] > hi) {
      if (bad) *bad = i;
      return 0;
    }
    v = (v << 6) | (p[i] & 0x3Fu);
  }
  if (cp) *cp = v;
  return k;
}

void ttft__strlcpy(char *dst, const char *src, size_t cap) {
  if (!cap) return;
  if (!src) src = "";
  size_t n = strlen(src);
  if (n >= cap) {
    n = cap - 1;
    /* do not cut a UTF-8 sequence in half: back up over continuation bytes */
    while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80) n--;
  }
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* ------------------------------------------------------------ labels */
/* Every label name an exporter writes beside the constant labels: the
 * public list (ttft.h), so the header is the one place that says it. */
static const char *const reserved_labels[] = {TTFT_RESERVED_LABELS};

int ttft__label_reserved(const char *name) {
  if (!name) return 1;
  if (name[0] == '_' && name[1] == '_') return 1;
  for (size_t i = 0; i < sizeof reserved_labels / sizeof reserved_labels[0]; i++)
    if (!strcmp(name, reserved_labels[i])) return 1;
  return 0;
}
