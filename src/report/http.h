/*
 * http.h — internals of the optional /metrics endpoint (http.c): the
 * request parser, and the server's statistics and test options.
 *
 * The parser is a pure function over bytes: no I/O, no allocation, no
 * global state, never reads past len and needs no NUL terminator. The
 * server calls it again with the whole buffer each time more bytes of a
 * request arrive; tests/fuzz/fuzz_http.c feeds it arbitrary input.
 *
 * Everything here is hidden: only programs linked against the static
 * library (tests, fuzz targets) can reach it.
 */
#ifndef TTFT_HTTP_H
#define TTFT_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "common/snapshot.h"

/* Largest request head (request line + header fields + the blank line)
 * the server reads. Anything longer is refused with 414 or 431. */
#define TTFT__HTTP_MAX_REQUEST 8192
/* Most header fields in one request (431 beyond). */
#define TTFT__HTTP_MAX_FIELDS 100

/* Return values of ttft__http_parse besides the negated HTTP status codes
 * of a refused request (-400, -413, -414, -431, -501, -505). */
#define TTFT__HTTP_NEED_MORE 0
#define TTFT__HTTP_COMPLETE 1

typedef enum ttft__http_method {
  TTFT__HTTP_GET = 0,
  TTFT__HTTP_HEAD = 1,
  TTFT__HTTP_OTHER = 2 /* a syntactically valid method we do not serve */
} ttft__http_method;

/* The /metrics representation the Accept header(s) select (docs/http.md):
 * the highest q-value above zero among the representations the client
 * names explicitly (text also through text/ * and * / *), the most specific
 * media range deciding each one's q-value; ties go to protobuf, then
 * OpenMetrics, then text. Text when nothing acceptable is named. */
typedef enum ttft__http_accept {
  TTFT__HTTP_ACCEPT_TEXT = 0,        /* text/plain; version=0.0.4        */
  TTFT__HTTP_ACCEPT_OPENMETRICS = 1, /* application/openmetrics-text 1.x */
  TTFT__HTTP_ACCEPT_PROTOBUF = 2     /* application/vnd.google.protobuf;
                                        proto=io.prometheus.client.MetricFamily;
                                        encoding=delimited              */
} ttft__http_accept;

typedef struct ttft__http_req {
  ttft__http_method method;
  const char *path;        /* into buf: the path without query or fragment;
                              path_len 0 (meaning "/") for an absolute-form
                              target without one ("GET http://host HTTP/1.1") */
  size_t path_len;
  int minor_version;       /* HTTP/1.x: 0 or 1 (a later 1.x counts as 1) */
  ttft__http_accept accept; /* what /metrics should answer with */
  unsigned long long content_length; /* 0 when absent */
  size_t head_len;         /* bytes of buf the request head used */
} ttft__http_req;

/* Parse the request head at buf[0, len).
 * Returns TTFT__HTTP_COMPLETE and fills *out when a whole head is there
 * (bytes after it are left alone); TTFT__HTTP_NEED_MORE when what is there
 * is a valid prefix of a request shorter than TTFT__HTTP_MAX_REQUEST;
 * otherwise the negated status code to answer with:
 *   -400 malformed (bad request line, bad field, bare CR, obs-fold, a
 *        missing or repeated Host in HTTP/1.1, bad Content-Length);
 *   -413 Content-Length above TTFT__HTTP_MAX_REQUEST;
 *   -414 the request line alone does not fit in TTFT__HTTP_MAX_REQUEST;
 *   -431 the head does not fit, or has more than TTFT__HTTP_MAX_FIELDS fields;
 *   -501 a Transfer-Encoding (request bodies are not read);
 *   -505 an HTTP version other than 1.0 / 1.1.
 * A malformed Accept element is ignored, never an error.
 * *out is written only on TTFT__HTTP_COMPLETE. buf may be NULL when len
 * is 0; out must not be NULL. Thread-safe. */
TTFT_HIDDEN int ttft__http_parse(const char *buf, size_t len, ttft__http_req *out);

/* ---------------------------------------------------------------- server */

/* Defaults of the server's limits (docs/http.md, "Hostile clients"). */
#define TTFT__HTTP_MAX_CONN 64                      /* connections kept */
#define TTFT__HTTP_RESPONSE_CAP ((size_t)64 << 20)  /* bytes of rendered
                                                       bodies held at once, at
                                                       least (it follows the
                                                       registry's bodies) */
#define TTFT__HTTP_RENDER_INTERVAL_NS UINT64_C(250000000) /* a body is reused
                                                       for at least this long */
#define TTFT__HTTP_RENDER_COST_FACTOR 4             /* ... and for this many
                                                       times its render time */

/* Options of ttft__http_start_opts; zero fields take the defaults above,
 * except the two render fields, whose zero is meaningful (set
 * render_defaults = 1 to take theirs). For tests. */
typedef struct ttft__http_opts {
  size_t response_cap;            /* 0 = TTFT__HTTP_RESPONSE_CAP */
  int response_cap_fixed;         /* 1: the cap stays response_cap even when
                                     a body does not fit (the 1.1 rule) */
  int render_defaults;            /* 1: the two fields below are ignored */
  uint64_t render_interval_ns;    /* reuse window floor; 0 = no floor */
  unsigned render_cost_factor;    /* 0 = the window does not grow with
                                     the render time */
} ttft__http_opts;

/* ttft_http_start with options (o NULL = the defaults). */
TTFT_HIDDEN int ttft__http_start_opts(ttft_registry *r, const char *addr, const ttft__http_opts *o,
                                      ttft_http **out);

/* ttft_http_start_gather with options (o NULL = the defaults). */
TTFT_HIDDEN int ttft__http_start_gather_opts(ttft_gather *g, const char *addr, const ttft__http_opts *o,
                                             ttft_http **out);

/* What the server holds and has done since it started. */
typedef struct ttft__http_stats {
  unsigned conns;         /* connections in the table */
  unsigned reading;       /* ... waiting for (the rest of) a request head */
  unsigned writing;       /* ... sending a response */
  unsigned lingering;     /* ... response sent, waiting for the close */
  size_t held_bytes;      /* rendered bodies alive now (shared, counted once,
                             with their bookkeeping) */
  size_t held_peak;       /* the most held_bytes has been */
  size_t held_cap;        /* the cap held_bytes never exceeds */
  size_t in_bytes;        /* request-head buffers alive now */
  unsigned bodies;        /* rendered bodies alive now */
  uint64_t accepted;      /* connections accepted */
  uint64_t takes;         /* snapshots taken (ttft_snapshot_take, or
                             ttft_gather_take for a gather): at most one
                             per snapshot window, whatever the paths */
  uint64_t renders;       /* bodies rendered (a snapshot formatted) */
  uint64_t reuses;        /* responses that shared a fresh body */
  uint64_t stale_reuses;  /* responses that shared an older body because a
                             new one would not fit under the cap */
  uint64_t evicted_linger, evicted_reader, evicted_writer; /* for room */
  uint64_t evicted_for_memory; /* stalled writers closed to free a body */
  uint64_t refused_memory;     /* 503: no body fitted under the cap */
  uint64_t cap_raises;         /* times the cap grew to follow the bodies */
  uint64_t render_failures;    /* render attempts that failed */
  uint64_t render_failures_reused; /* responses answered from a failure
                                      remembered in its window (no attempt) */
  uint64_t protobuf_fallbacks; /* protobuf asked for, text sent */
} ttft__http_stats;

/* Copy srv's statistics into *out (waits for the server thread to finish
 * its current step). Thread-safe. */
TTFT_HIDDEN void ttft__http_get_stats(ttft_http *srv, ttft__http_stats *out);

#endif
