/*
 * otlp.h — the OTLP pusher's pieces shared by otlp.c (configuration, the
 * thread, temporality, retries) and otlp_http.c (the URL, the headers and
 * one HTTP/1.1 POST with a deadline). Hidden; not part of the ABI.
 */
#ifndef TTFT_REPORT_OTLP_H
#define TTFT_REPORT_OTLP_H

#include "common/internal.h"

#include <stddef.h>
#include <stdint.h>

/* Where a push goes: parsed from an http:// URL at start, immutable after. */
typedef struct ttft__otlp_url {
  char host[256]; /* a name, an IPv4 literal or an IPv6 literal (no brackets) */
  char port[8];   /* decimal, "80" when the URL has none                  */
  char path[512]; /* starts with '/'                                      */
  char authority[272]; /* the Host header: host[:port] as written (v6 in [])  */
} ttft__otlp_url;

/* Parse url ("http://host[:port][/path]"). base = 1: url is a base
 * endpoint (OTEL_EXPORTER_OTLP_ENDPOINT): "v1/metrics" is appended to its
 * path as a relative reference (one '/' between). Returns 0, or -1 with a
 * reason in *why (a static string): https, another scheme, no host, a bad
 * port, a part too long, a space or control character. */
TTFT_HIDDEN int ttft__otlp_url_parse(const char *url, int base, ttft__otlp_url *out, const char **why);

/* Parse "k1=v1,k2=v2" (OTEL_EXPORTER_OTLP_HEADERS: spaces around keys and
 * values trimmed, values percent-decoded, empty entries skipped) into
 * "k1: v1\r\nk2: v2\r\n" in sb. Returns 0, or -1 with the reason in
 * why[cap]: an entry without '=', a key that is not an HTTP token, a
 * value that decodes to a control character (CR, LF, NUL: header
 * injection), a bad %XX, or a header the pusher writes itself (Host,
 * Content-Type, Content-Length, Connection, Transfer-Encoding). */
TTFT_HIDDEN int ttft__otlp_headers_parse(const char *s, ttft__sb *sb, char *why, size_t cap);

/* The outcome of one POST. */
typedef struct ttft__otlp_answer {
  int status;              /* HTTP status; 0 when none came (connection
                              failed, closed or timed out before a whole
                              status line and head)                      */
  int retry_after;         /* 1: a Retry-After header was understood      */
  uint64_t retry_after_ns; /* how long it asks to wait (0 = now)          */
  int err;                 /* errno-like reason when status is 0          */
  const char *step;        /* what failed when status is 0: "resolve",
                              "connect", "send", "receive", "timeout"... */
} ttft__otlp_answer;

/* POST body (len bytes, application/x-protobuf) to u with the extra
 * header lines hdrs ("k: v\r\n"..., may be ""), on a new connection that
 * is closed after the answer. Every step waits at most until deadline_ns
 * (CLOCK_MONOTONIC, ttft_now_ns). Fills *ans; never blocks past the
 * deadline except inside getaddrinfo for a host name (a literal never
 * waits). Thread-safe (touches only its own socket). */
TTFT_HIDDEN void ttft__otlp_post(const ttft__otlp_url *u, const char *hdrs, const void *body, size_t len,
                                 uint64_t deadline_ns, ttft__otlp_answer *ans);

/* Retry-After's value: delta-seconds or an IMF-fixdate HTTP-date (RFC
 * 9110 §10.2.3; a date compares with now_unix_s). Returns 0 with the wait
 * in *ns (a date in the past waits 0), or -1 when v is neither. */
TTFT_HIDDEN int ttft__otlp_retry_after(const char *v, size_t n, int64_t now_unix_s, uint64_t *ns);

/* 1 for the statuses the OTLP/HTTP spec retries: 429, 502, 503, 504. */
TTFT_HIDDEN int ttft__otlp_retryable(int status);

#endif /* TTFT_REPORT_OTLP_H */
