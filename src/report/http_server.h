/*
 * http_server.h — what the endpoint's server files share (http.c: the
 * thread, its loop, routing and responses, start/stop/fork;
 * http_conn.c: the connection table; http_body.c: the body cache). Not
 * an interface: one server, split by seams, sees one struct ttft_http.
 *
 * Locking, for every function declared here: the caller holds srv->mu
 * (the server thread always does, except in poll() and while it takes a
 * snapshot or formats a body already listed in srv->bodies, where
 * ttft__http_body_get releases it itself). Nothing here is called from
 * the hooks or from any thread other than the server's (ttft_http_stop
 * and ttft__http_get_stats take mu first).
 */
#ifndef TTFT_HTTP_SERVER_H
#define TTFT_HTTP_SERVER_H

#include "report/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <string.h>

#define HTTP_MAX_CONN TTFT__HTTP_MAX_CONN /* <= 64: victim() keeps a bit per connection */
#define HTTP_ACCEPT_BATCH 16                 /* accepts per turn of the loop: a
                                                newcomer's request is read within
                                                a few turns, before 63 others
                                                could have pushed it out        */
#define HTTP_MS UINT64_C(1000000)
#define HTTP_HEAD_TIMEOUT (5000 * HTTP_MS)   /* whole request head       */
#define HTTP_SEND_TIMEOUT (10000 * HTTP_MS)  /* whole response           */
#define HTTP_LINGER_TIMEOUT (2000 * HTTP_MS) /* wait for the client's FIN */
#define HTTP_LINGER_BYTES (256 * 1024)       /* input discarded at most   */
#define HTTP_EVICT_GRACE (100 * HTTP_MS)     /* readers younger than this, and
                                                writers that moved within it,
                                                are the last to be dropped   */
#define HTTP_MIN_AGE (2 * HTTP_MS)           /* a reader younger than this is
                                                never dropped for room: its
                                                client may just not have been
                                                scheduled to send yet        */
#define HTTP_ACCEPT_BACKOFF (100 * HTTP_MS)  /* after EMFILE and the like  */
#define HTTP_HEAD_CAP 1024                   /* response head (+ small body) */
#define HTTP_E_CAP (-1000)                   /* internal: no room under the cap */

enum { C_FREE = 0, C_READ, C_WRITE, C_LINGER };

/* The bodies the server renders: the formats of ttft_snapshot_format, and
 * /snapshot (ttft_snapshot_encode), which is cached and shared like them. */
#define HTTP_FMT_SNAPSHOT TTFT_FORMAT_COUNT_
#define HTTP_NFMT (TTFT_FORMAT_COUNT_ + 1)
_Static_assert(HTTP_MAX_CONN <= 64, "victim() keeps one bit per connection in a uint64_t");

/* A rendered response body, shared by every connection that sends it and
 * by the cache (srv->cache[format]) while it is fresh. */
typedef struct http_body {
  struct http_body *prev, *next; /* srv->bodies, oldest first */
  size_t refs;     /* connections sending it, + 1 as a cache entry (or, while
                      it is being rendered, + 1 for the renderer) */
  size_t len;      /* bytes of data[] in use */
  size_t cap;      /* bytes data[] holds */
  size_t size;     /* bytes allocated (what counts against the cap) */
  uint64_t t_done; /* when it was rendered */
  char data[];
} http_body;

typedef struct http_conn {
  int fd;
  int state;
  uint64_t t_accept;   /* when accepted */
  uint64_t t_write;    /* WRITE: when the response started */
  uint64_t t_progress; /* WRITE: when it last took a byte */
  uint64_t t_blocked;  /* WRITE: since when its socket has been full (0: the
                          last send went through) */
  uint64_t deadline;
  char *in;            /* a request head arriving in pieces; NULL otherwise
                          (a head that comes whole is parsed in srv->scratch) */
  size_t in_len;
  http_body *body;     /* the shared body being sent, or NULL */
  size_t body_send;    /* bytes of it to send (0 for HEAD) */
  size_t head_len;     /* head[0, head_len) goes first */
  size_t off;          /* bytes of head + body sent */
  size_t drained;      /* LINGER: input discarded */
  char head[HTTP_HEAD_CAP];
} http_conn;

/* The snapshot one request renders from, shared by the formats it may try
 * (protobuf, then text): srv->snap, not owned by the request. */
typedef struct http_snap {
  const ttft_snapshot *s;
} http_snap;

struct ttft_http {
  ttft_allocator alloc;
  ttft_registry *r;     /* the source: a registry (ttft_snapshot_take) ... */
  ttft_gather *g;       /* ... or a gather (ttft_gather_take); one is NULL */
  /* The last snapshot taken, shared by every body rendered while it is
   * fresh (ttft__http_snap_window): concurrent scrapes of any paths cost
   * one take per window, which matters for a gather (a merge of every
   * process). Only the server thread touches it. */
  ttft_snapshot *snap;
  uint64_t snap_t;      /* when its take finished */
  uint64_t snap_ns;     /* what the take cost */
  int lfd, wake_r, wake_w;
  int port;
  pid_t pid;            /* the process that started the thread */
  pthread_t thread;
  /* Held by the thread whenever it changes anything below, i.e. always but
   * in poll() and while it takes a snapshot or formats into a body already
   * listed in bodies. A fork waits for it (fork_prepare), so a child's copy
   * is always consistent and ttft_http_stop can free it. */
  pthread_mutex_t mu;
  ttft_http *fork_next; /* g_servers */
  size_t cap;           /* of st.held_bytes */
  uint64_t render_interval;
  unsigned render_factor;
  uint64_t accept_pause_until;
  uint64_t pb_retry_at; /* protobuf failed: text until then */
  int cap_fixed;        /* 1: cap never follows the registry (tests) */
  size_t max_len[HTTP_NFMT];   /* the largest body of each format */
  uint64_t fail_until[HTTP_NFMT]; /* a render failed: no new
                                              attempt before this */
  int fail_err[HTTP_NFMT];     /* ... and what it failed with */
  http_body *bodies, *bodies_tail;
  http_body *cache[HTTP_NFMT];
  uint64_t render_ns[HTTP_NFMT]; /* what the last render cost */
  size_t last_len[HTTP_NFMT];
  ttft__http_stats st;
  http_conn c[HTTP_MAX_CONN];
  struct pollfd pfd[HTTP_MAX_CONN + 2];
  int pconn[HTTP_MAX_CONN + 2]; /* index into c[] of pfd[i], -1 for others */
  char scratch[TTFT__HTTP_MAX_REQUEST + 1];
};

#if defined(MSG_NOSIGNAL)
#  define HTTP_SEND_FLAGS MSG_NOSIGNAL
#else
#  define HTTP_SEND_FLAGS 0 /* SO_NOSIGPIPE is set on the socket instead */
#endif

/* ------------------------------------------------------ http.c */

/* O_NONBLOCK and FD_CLOEXEC on fd; -1 when fcntl fails. */
TTFT_HIDDEN int ttft__http_set_flags(int fd);
/* Take srv->mu, letting a waiting fork go first (see http.c, fork). */
TTFT_HIDDEN void ttft__http_server_lock(ttft_http *srv);
/* Answer the complete request q on c (which is in C_READ). */
TTFT_HIDDEN void ttft__http_route(ttft_http *srv, http_conn *c, const ttft__http_req *q,
                                  uint64_t now);
/* An error response (status 4xx/5xx), or a bare 503 when even that cannot
 * be built; both start c writing. */
TTFT_HIDDEN void ttft__http_respond_error(ttft_http *srv, http_conn *c, int status, int head_only,
                                          uint64_t now);
TTFT_HIDDEN void ttft__http_respond_oom(ttft_http *srv, http_conn *c, uint64_t now);

/* ------------------------------------------------- http_conn.c */

/* A writer whose client has not taken a byte for HTTP_EVICT_GRACE. */
TTFT_HIDDEN int ttft__http_writer_stalled(const http_conn *c, uint64_t now);
/* Free c's request-head buffer, if it has one. */
TTFT_HIDDEN void ttft__http_in_free(ttft_http *srv, http_conn *c);
/* Close c and drop what it holds (its body reference); c becomes C_FREE. */
TTFT_HIDDEN void ttft__http_conn_close(ttft_http *srv, http_conn *c);
/* Send what the socket takes; LINGER when all is sent, closed on error. */
TTFT_HIDDEN void ttft__http_conn_send(ttft_http *srv, http_conn *c, uint64_t now);
/* c's socket is ready: read, send or drain, as its state says. */
TTFT_HIDDEN void ttft__http_conn_step(ttft_http *srv, http_conn *c, uint64_t now);
/* c's deadline has passed: 408 for a reader, closed otherwise. */
TTFT_HIDDEN void ttft__http_conn_expire(ttft_http *srv, http_conn *c, uint64_t now);
/* Index of a free slot of srv->c, -1 when the table is full. */
TTFT_HIDDEN int ttft__http_free_slot(const ttft_http *srv);
/* The connection to drop first for room, -1 when none may be (*ready, if
 * not NULL, then gets the time one will be). */
TTFT_HIDDEN int ttft__http_pick_victim(const ttft_http *srv, uint64_t now, uint64_t *ready);
/* Take waiting connections from srv->lfd (up to HTTP_ACCEPT_BATCH). */
TTFT_HIDDEN void ttft__http_accept_clients(ttft_http *srv);

/* ------------------------------------------------- http_body.c */

/* Drop one reference to b; the last one unlists and frees it. */
TTFT_HIDDEN void ttft__http_body_unref(ttft_http *srv, http_body *b);
/* How long a body of format f stays fresh (and a failure is remembered). */
TTFT_HIDDEN uint64_t ttft__http_render_window(const ttft_http *srv, int f);
/* Let go of the cache entry of format f. */
TTFT_HIDDEN void ttft__http_cache_drop(ttft_http *srv, int f);
/* How long a taken snapshot stays fresh (shared by every format). */
TTFT_HIDDEN uint64_t ttft__http_snap_window(const ttft_http *srv);
/* Let go of stale cache entries nobody sends, and of a stale snapshot;
 * *wake gets the next expiry. */
TTFT_HIDDEN void ttft__http_cache_expire(ttft_http *srv, uint64_t now, uint64_t *wake);
/* The body of format f (a ttft_format or HTTP_FMT_SNAPSHOT) for one
 * response, with a reference for the caller (see http_body.c); NULL with
 * *err when there is none. */
TTFT_HIDDEN http_body *ttft__http_body_get(ttft_http *srv, int f, http_snap *snap, int *err);

#endif
