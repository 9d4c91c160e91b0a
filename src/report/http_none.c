/*
 * http_none.c — the endpoint's entry points in a build without it
 * (TTFT_WITH_HTTP off, or no pthreads): http.c is left out of such a
 * build, and these report TTFT_ENOTSUP so that the ABI stays the same.
 * With TTFT_HAVE_HTTP defined this file compiles to nothing.
 */
#include "common/snapshot.h"

#include <stdio.h>

#if !defined(TTFT_HAVE_HTTP)

int ttft_http_start(ttft_registry *r, const char *addr, ttft_http **out) {
  (void)r;
  (void)addr;
  if (out) *out = NULL;
  return TTFT_ENOTSUP;
}

int ttft_http_start_msg(ttft_registry *r, const char *addr, ttft_http **out, char *msg, size_t cap) {
  (void)r;
  if (out) *out = NULL;
  if (msg && cap) snprintf(msg, cap, "%s: this libttft was built without HTTP (TTFT_WITH_HTTP off)",
                           addr ? addr : "(null)");
  return TTFT_ENOTSUP;
}

int ttft_http_start_gather(ttft_gather *g, const char *addr, ttft_http **out, char *msg, size_t cap) {
  (void)g;
  if (out) *out = NULL;
  if (msg && cap) snprintf(msg, cap, "%s: this libttft was built without HTTP (TTFT_WITH_HTTP off)",
                           addr ? addr : "(null)");
  return TTFT_ENOTSUP;
}

int ttft_http_port(const ttft_http *srv) {
  (void)srv;
  return TTFT_ENOTSUP;
}

void ttft_http_stop(ttft_http *srv) { (void)srv; }

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int ttft__http_none_unused;
#endif
