/*
 * otlp_none.c — the OTLP pusher's entry points in a build without HTTP
 * (TTFT_WITH_HTTP off, or no pthreads): otlp.c is left out of such a build
 * and these report TTFT_ENOTSUP, so that the ABI stays the same.
 */
#include "common/internal.h"

#include <stdio.h>
#include <string.h>

#if !defined(TTFT_HAVE_HTTP)

void ttft_otlp_config_init(ttft_otlp_config *c) {
  if (!c) return;
  memset(c, 0, sizeof *c);
  c->struct_size = sizeof *c;
  c->interval_ms = 60000;
  c->timeout_ms = 10000;
}

int ttft_otlp_start_msg(ttft_registry *r, const ttft_otlp_config *c, ttft_otlp **out, char *msg,
                        size_t cap) {
  (void)r;
  (void)c;
  if (out) *out = NULL;
  if (msg && cap) snprintf(msg, cap, "otlp: this libttft was built without HTTP (TTFT_WITH_HTTP off)");
  return TTFT_ENOTSUP;
}

ttft_otlp *ttft_otlp_start(ttft_registry *r, const ttft_otlp_config *c) {
  (void)r;
  (void)c;
  return NULL;
}

int ttft_otlp_flush(ttft_otlp *o) {
  (void)o;
  return TTFT_ENOTSUP;
}

void ttft_otlp_stop(ttft_otlp *o) { (void)o; }

int ttft_otlp_stats(const ttft_otlp *o, ttft_otlp_info *out) {
  (void)o;
  (void)out;
  return TTFT_EINVAL; /* no pusher exists in such a build */
}

#else
typedef int ttft__otlp_none_unused; /* ISO C: a translation unit is not empty */
#endif
