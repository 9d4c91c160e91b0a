/*
 * http.c — the optional /metrics endpoint: one thread, poll(), plain
 * POSIX sockets, HTTP/1.1 with one request per connection. This file has
 * the thread and its loop, routing and responses, start/stop and fork;
 * the request parser is http_parse.c, the connection table http_conn.c,
 * the body cache http_body.c (report/http_server.h is what they share).
 *
 * Invariants: the thread owns everything below the public functions: the
 * listening socket, the connection table and the rendered bodies, all
 * changed only under srv->mu. The hooks never see the server; it only
 * calls ttft_snapshot_take (or, serving a gather, ttft_gather_take), which
 * runs beside them, at most once per snapshot window (http_body.c). Every response is a
 * whole head (and a shared body) handed to a connection in one step
 * (start_write); a request is answered once. A fork waits for every
 * server's mu (fork_prepare), so a child's copy is consistent and
 * ttft_http_stop can free it without the thread.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#  define _GNU_SOURCE
#endif
#include "report/http_server.h"

static const char http_pb_ctype[] =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";
static const char http_om_ctype[] = "application/openmetrics-text; version=1.0.0; charset=utf-8";
static const char http_text_ctype[] = "text/plain; version=0.0.4; charset=utf-8";

int ttft__http_set_flags(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
  fl = fcntl(fd, F_GETFD);
  if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0) return -1;
  return 0;
}

/* ------------------------------------------------------------------ fork
 * Every running server is on g_servers. Before a fork, fork_prepare takes
 * each one's mu, so no server thread is half-way through a change of its
 * state; after it both sides release them. In the child the thread does not
 * exist: ttft_http_stop sees another pid and only frees the copy.
 *
 * A busy server thread drops mu only for a moment (poll() returns at once)
 * and takes it straight back: a mutex does not queue, so a forking thread
 * could wait on it for a long time. g_fork_pending tells the server thread
 * to step aside: it lets go of mu and waits on g_fork_mu, which the forking
 * thread holds from fork_prepare until the fork is done. */
static pthread_mutex_t g_fork_mu = PTHREAD_MUTEX_INITIALIZER; /* g_servers, g_atfork; held across a fork */
static ttft_http *g_servers;
static int g_atfork;               /* the handlers are registered */
static atomic_int g_fork_pending;  /* a fork waits for the servers' mu */

static void fork_prepare(void) {
  ttft_http *s;
  pthread_mutex_lock(&g_fork_mu);
  /* relaxed: a hint; mu and g_fork_mu do the synchronising */
  atomic_store_explicit(&g_fork_pending, 1, memory_order_relaxed);
  for (s = g_servers; s; s = s->fork_next) pthread_mutex_lock(&s->mu);
}

static void fork_release(void) {
  ttft_http *s;
  for (s = g_servers; s; s = s->fork_next) pthread_mutex_unlock(&s->mu);
  atomic_store_explicit(&g_fork_pending, 0, memory_order_relaxed); /* a hint, as above */
  pthread_mutex_unlock(&g_fork_mu);
}

/* The server thread takes its mu, after any fork that is waiting for it. */
void ttft__http_server_lock(ttft_http *srv) {
  pthread_mutex_lock(&srv->mu);
  while (atomic_load_explicit(&g_fork_pending, memory_order_relaxed)) { /* a hint, as above */
    pthread_mutex_unlock(&srv->mu);
    pthread_mutex_lock(&g_fork_mu); /* held by the forking thread until the fork is done */
    pthread_mutex_unlock(&g_fork_mu);
    pthread_mutex_lock(&srv->mu);
  }
}

/* Put srv on g_servers (registering the handlers the first time). */
static int fork_link(ttft_http *srv) {
  int rc = TTFT_OK;
  pthread_mutex_lock(&g_fork_mu);
  if (!g_atfork && pthread_atfork(fork_prepare, fork_release, fork_release) != 0) {
    rc = TTFT_ENOMEM;
  } else {
    g_atfork = 1;
    srv->fork_next = g_servers;
    g_servers = srv;
  }
  pthread_mutex_unlock(&g_fork_mu);
  return rc;
}

static void fork_unlink(ttft_http *srv) {
  ttft_http **p;
  pthread_mutex_lock(&g_fork_mu);
  for (p = &g_servers; *p; p = &(*p)->fork_next)
    if (*p == srv) {
      *p = srv->fork_next;
      break;
    }
  pthread_mutex_unlock(&g_fork_mu);
}

/* ------------------------------------------------------------ responses */

static const char *reason(int status) {
  switch (status) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 413: return "Content Too Large";
  case 414: return "URI Too Long";
  case 431: return "Request Header Fields Too Large";
  case 501: return "Not Implemented";
  case 503: return "Service Unavailable";
  case 505: return "HTTP Version Not Supported";
  default: return "Internal Server Error";
  }
}

/* The response head into hdr; 0 when it does not fit in cap. */
static size_t response_head(char *hdr, size_t cap, int status, const char *ctype, size_t body_len,
                            const char *extra) {
  static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  char date[40] = "";
  time_t now = time(NULL);
  struct tm tm;
  int n;
  if (gmtime_r(&now, &tm) && tm.tm_wday >= 0 && tm.tm_wday < 7 && tm.tm_mon >= 0 && tm.tm_mon < 12)
    snprintf(date, sizeof date, "Date: %s, %02d %s %04d %02d:%02d:%02d GMT\r\n", days[tm.tm_wday],
             tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  n = snprintf(hdr, cap,
               "HTTP/1.1 %d %s\r\n%sServer: libttft/" TTFT_VERSION_STRING "\r\n"
               "Content-Type: %s\r\nContent-Length: %zu\r\n%s"
               "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
               "Connection: close\r\n\r\n",
               status, reason(status), date, ctype, body_len, extra ? extra : "");
  return (n < 0 || (size_t)n >= cap) ? 0 : (size_t)n;
}

/* c->head (head_len bytes) and then body_send bytes of c->body are the
 * response: start sending it. */
static void start_write(ttft_http *srv, http_conn *c, uint64_t now) {
  ttft__http_in_free(srv, c);
  c->off = 0;
  c->state = C_WRITE;
  c->t_write = now;
  c->t_progress = now;
  c->t_blocked = 0;
  c->deadline = now + HTTP_SEND_TIMEOUT;
  ttft__http_conn_send(srv, c, now);
}

void ttft__http_respond_oom(ttft_http *srv, http_conn *c, uint64_t now) {
  static const char oom[] =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  memcpy(c->head, oom, sizeof oom - 1);
  c->head_len = sizeof oom - 1;
  start_write(srv, c, now);
}

/* A response whose body (a short string) travels in c->head. */
static void respond_small(ttft_http *srv, http_conn *c, int status, const char *ctype, const char *body,
                          int head_only, const char *extra, uint64_t now) {
  size_t blen = strlen(body);
  size_t hlen = response_head(c->head, sizeof c->head, status, ctype, blen, extra);
  if (!hlen || hlen + blen > sizeof c->head) {
    ttft__http_respond_oom(srv, c, now);
    return;
  }
  if (!head_only) memcpy(c->head + hlen, body, blen);
  c->head_len = hlen + (head_only ? 0 : blen);
  start_write(srv, c, now);
}

void ttft__http_respond_error(ttft_http *srv, http_conn *c, int status, int head_only, uint64_t now) {
  char body[64];
  snprintf(body, sizeof body, "%d %s\n", status, reason(status));
  respond_small(srv, c, status, "text/plain; charset=utf-8", body, head_only,
                status == 405 ? "Allow: GET, HEAD\r\n" : NULL, now);
}

/* A 200 with body b (the caller's reference passes to c). */
static void respond_body(ttft_http *srv, http_conn *c, const char *ctype, http_body *b, int head_only,
                         const char *extra, uint64_t now) {
  size_t hlen = response_head(c->head, sizeof c->head, 200, ctype, b->len, extra);
  if (!hlen) {
    ttft__http_body_unref(srv, b);
    ttft__http_respond_oom(srv, c, now);
    return;
  }
  c->head_len = hlen;
  c->body = b;
  c->body_send = head_only ? 0 : b->len;
  start_write(srv, c, now);
}

static int failure_status(int err) { return err == TTFT_ENOMEM || err == HTTP_E_CAP ? 503 : 500; }

/* /report, /report.json and /snapshot: format f, or 500 when it fails (503 for memory). */
static void respond_format(ttft_http *srv, http_conn *c, int f, const char *ctype, int head_only,
                           uint64_t now) {
  http_snap snap = {NULL};
  int err = TTFT_EIO;
  http_body *b = ttft__http_body_get(srv, f, &snap, &err);
  if (b) respond_body(srv, c, ctype, b, head_only, NULL, now);
  else ttft__http_respond_error(srv, c, failure_status(err), head_only, now);
}

/* /metrics in the representation Accept chose. Protobuf falls back to the
 * text format (from the same snapshot) whenever it fails - the build
 * cannot write it (TTFT_ENOTSUP), memory, anything - so that a scrape
 * never fails for it; a failure is remembered for one render window. */
static void respond_metrics(ttft_http *srv, http_conn *c, ttft__http_accept accept, int head_only,
                            uint64_t now) {
  http_snap snap = {NULL};
  int err = TTFT_EIO;
  http_body *b = NULL;
  const char *ctype = http_text_ctype;
  if (accept == TTFT__HTTP_ACCEPT_PROTOBUF) {
    if (now >= srv->pb_retry_at) {
      b = ttft__http_body_get(srv, TTFT_FORMAT_PROMETHEUS_PROTOBUF, &snap, &err);
      if (!b)
        srv->pb_retry_at =
            ttft_now_ns() + ttft__http_render_window(srv, TTFT_FORMAT_PROMETHEUS_PROTOBUF);
    }
    if (b) ctype = http_pb_ctype;
    else srv->st.protobuf_fallbacks++;
  } else if (accept == TTFT__HTTP_ACCEPT_OPENMETRICS) {
    b = ttft__http_body_get(srv, TTFT_FORMAT_OPENMETRICS, &snap, &err);
    ctype = http_om_ctype;
    if (!b) {
      ttft__http_respond_error(srv, c, failure_status(err), head_only, now);
      return;
    }
  }
  if (!b) {
    err = TTFT_EIO;
    b = ttft__http_body_get(srv, TTFT_FORMAT_PROMETHEUS, &snap, &err);
    ctype = http_text_ctype;
  }
  if (b) respond_body(srv, c, ctype, b, head_only, "Vary: Accept\r\n", now);
  else ttft__http_respond_error(srv, c, failure_status(err), head_only, now);
}

static int path_is(const ttft__http_req *q, const char *p) {
  size_t n = strlen(p);
  if (q->path_len == 0) return strcmp(p, "/") == 0; /* "GET http://host HTTP/1.1" */
  return q->path_len == n && memcmp(q->path, p, n) == 0;
}

void ttft__http_route(ttft_http *srv, http_conn *c, const ttft__http_req *q, uint64_t now) {
  static const char index_body[] =
      "libttft " TTFT_VERSION_STRING "\n"
      "/metrics      Prometheus text format (OpenMetrics or protobuf when Accept asks for it)\n"
      "/report       the text report\n"
      "/report.json  the JSON report\n"
      "/snapshot     the snapshot, encoded (ttft_snapshot_decode reads it)\n";
  int head_only = q->method == TTFT__HTTP_HEAD;
  int known = path_is(q, "/metrics") || path_is(q, "/report") || path_is(q, "/report.json") ||
              path_is(q, "/snapshot") || path_is(q, "/") || path_is(q, "*");
  if (!known) {
    ttft__http_respond_error(srv, c, 404, head_only, now);
  } else if (q->method == TTFT__HTTP_OTHER || path_is(q, "*")) {
    ttft__http_respond_error(srv, c, 405, 0, now);
  } else if (path_is(q, "/metrics")) {
    respond_metrics(srv, c, q->accept, head_only, now);
  } else if (path_is(q, "/report")) {
    respond_format(srv, c, TTFT_FORMAT_TEXT, "text/plain; charset=utf-8", head_only, now);
  } else if (path_is(q, "/report.json")) {
    respond_format(srv, c, TTFT_FORMAT_JSON, "application/json", head_only, now);
  } else if (path_is(q, "/snapshot")) {
    respond_format(srv, c, HTTP_FMT_SNAPSHOT, "application/octet-stream", head_only, now);
  } else {
    respond_small(srv, c, 200, "text/plain; charset=utf-8", index_body, head_only, NULL, now);
  }
}

static void *serve(void *arg) {
  ttft_http *srv = arg;
  int i;
#if TTFT_HAVE_PTHREAD_SETNAME_NP
  pthread_setname_np(pthread_self(), "ttft-http");
#endif
  ttft__http_server_lock(srv);
  for (;;) {
    uint64_t now = ttft_now_ns(), wake = now + 3600 * 1000 * HTTP_MS;
    int np = 0, listen_at = -1, timeout, rc;
    for (i = 0; i < HTTP_MAX_CONN; i++) ttft__http_conn_expire(srv, &srv->c[i], now);
    ttft__http_cache_expire(srv, now, &wake);

    srv->pfd[np].fd = srv->wake_r;
    srv->pfd[np].events = POLLIN;
    srv->pconn[np++] = -1;
    if (now < srv->accept_pause_until) {
      if (srv->accept_pause_until < wake) wake = srv->accept_pause_until;
    } else if (ttft__http_free_slot(srv) >= 0 || ttft__http_pick_victim(srv, now, &wake) >= 0) {
      /* (else every reader is too young to drop: wake when one is not) */
      listen_at = np;
      srv->pfd[np].fd = srv->lfd;
      srv->pfd[np].events = POLLIN;
      srv->pconn[np++] = -1;
    }
    for (i = 0; i < HTTP_MAX_CONN; i++) {
      http_conn *c = &srv->c[i];
      if (c->state == C_FREE) continue;
      srv->pfd[np].fd = c->fd;
      srv->pfd[np].events = c->state == C_WRITE ? POLLOUT : POLLIN;
      srv->pconn[np++] = i;
      if (c->deadline < wake) wake = c->deadline;
    }
    for (i = 0; i < np; i++) srv->pfd[i].revents = 0;
    timeout = wake <= now ? 0 : (int)((wake - now + HTTP_MS - 1) / HTTP_MS);

    pthread_mutex_unlock(&srv->mu);
    rc = poll(srv->pfd, (nfds_t)np, timeout);
    if (rc < 0 && errno != EINTR) poll(NULL, 0, 10); /* ENOMEM: let it pass */
    ttft__http_server_lock(srv);
    if (rc < 0) continue;
    if (srv->pfd[0].revents) break; /* ttft_http_stop */
    for (i = 0; i < np; i++)
      if (srv->pconn[i] >= 0 && srv->pfd[i].revents)
        ttft__http_conn_step(srv, &srv->c[srv->pconn[i]], ttft_now_ns());
    if (listen_at >= 0 && srv->pfd[listen_at].revents) ttft__http_accept_clients(srv);
  }
  for (i = 0; i < HTTP_MAX_CONN; i++) ttft__http_conn_close(srv, &srv->c[i]);
  for (i = 0; i < HTTP_NFMT; i++) ttft__http_cache_drop(srv, i);
  ttft_snapshot_free(srv->snap);
  srv->snap = NULL;
  pthread_mutex_unlock(&srv->mu);
  return NULL;
}

/* ------------------------------------------------------------- addresses */

/* "host:port", "[v6]:port", ":port" (127.0.0.1); host is a numeric
 * address or "localhost". */
static int parse_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *len) {
  char host[64];
  const char *colon, *port;
  size_t hlen, i;
  unsigned long pv = 0;
  int v6 = 0;
  memset(ss, 0, sizeof *ss);
  if (addr[0] == '[') {
    const char *close_br = strchr(addr, ']');
    if (!close_br || close_br[1] != ':') return -1;
    hlen = (size_t)(close_br - addr - 1);
    if (hlen == 0 || hlen >= sizeof host) return -1;
    memcpy(host, addr + 1, hlen);
    port = close_br + 2;
    v6 = 1;
  } else {
    colon = strchr(addr, ':');
    if (!colon || strchr(colon + 1, ':')) return -1;
    hlen = (size_t)(colon - addr);
    if (hlen >= sizeof host) return -1;
    memcpy(host, addr, hlen);
    port = colon + 1;
  }
  host[hlen] = '\0';
  if (port[0] == '\0' || strlen(port) > 5) return -1;
  for (i = 0; port[i]; i++) {
    if (port[i] < '0' || port[i] > '9') return -1;
    pv = pv * 10 + (unsigned long)(port[i] - '0');
  }
  if (pv > 65535) return -1;
  if (v6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)pv);
    if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) return -1;
    *len = sizeof *a;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)pv);
    if (hlen == 0 || strcmp(host, "localhost") == 0) strcpy(host, "127.0.0.1");
    if (inet_pton(AF_INET, host, &a->sin_addr) != 1) return -1;
    *len = sizeof *a;
  }
  return 0;
}

/* A listening socket bound to ss, or -1 with errno set and *step naming
 * the call that failed. */
static int listen_on(const struct sockaddr_storage *ss, socklen_t len, int *port, const char **step) {
  struct sockaddr_storage bound;
  socklen_t blen = sizeof bound;
  int one = 1, e;
  int fd = socket(ss->ss_family, SOCK_STREAM, 0);
  *step = "socket";
  if (fd < 0) return -1;
  if (ttft__http_set_flags(fd) < 0) *step = "fcntl";
  else if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0) *step = "setsockopt";
  else if (bind(fd, (const struct sockaddr *)ss, len) < 0) *step = "bind";
  else if (listen(fd, SOMAXCONN) < 0) *step = "listen";
  else if (getsockname(fd, (struct sockaddr *)&bound, &blen) < 0) *step = "getsockname";
  else *step = NULL;
  if (*step) {
    e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  *port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                            : ((struct sockaddr_in *)&bound)->sin_port);
  return fd;
}

/* errno e as text, thread-safe (strerror is not). */
static const char *err_text(int e, char *buf, size_t cap) {
#if TTFT_STRERROR_R_CHAR_P
  return strerror_r(e, buf, cap); /* GNU: may return a static string */
#else /* XSI (musl): 0 or an error number */
  if (strerror_r(e, buf, cap) != 0) snprintf(buf, cap, "errno %d", e);
  return buf;
#endif
}

/* Why a start failed, into msg (snprintf rules; nothing when cap is 0). */
static void say(char *msg, size_t cap, const char *addr, const char *what, int e) {
  char eb[128];
  if (!msg || cap == 0) return;
  if (e) snprintf(msg, cap, "%s: %s: %s", addr ? addr : "(null)", what, err_text(e, eb, sizeof eb));
  else snprintf(msg, cap, "%s: %s", addr ? addr : "(null)", what);
}

/* ---------------------------------------------------------------- public */

/* Serve r or g (exactly one is not NULL, else TTFT_EINVAL). */
static int start(ttft_registry *r, ttft_gather *g, const char *addr, const ttft__http_opts *o,
                 ttft_http **out, char *msg, size_t msg_cap) {
  int saved_errno = errno, rc = TTFT_OK, i, pipefd[2];
  struct sockaddr_storage ss;
  socklen_t slen = 0;
  sigset_t all, old;
  ttft_allocator a;
  ttft_http *srv = NULL;
  const char *step = NULL;

  if (msg && msg_cap) msg[0] = '\0';
  if (out) *out = NULL;
  if ((!r && !g) || !out) {
    say(msg, msg_cap, addr, out ? "no registry (NULL)" : "no place for the server (out is NULL)", 0);
    return TTFT_EINVAL;
  }
  if (!addr || parse_addr(addr, &ss, &slen) < 0) {
    say(msg, msg_cap, addr, "not an address (host:port, [v6]:port or :port; host numeric or localhost)",
        0);
    return TTFT_EINVAL;
  }
  ttft__allocator_current(&a);
  srv = ttft__alloc(&a, sizeof *srv);
  if (!srv) {
    say(msg, msg_cap, addr, "out of memory", 0);
    return TTFT_ENOMEM;
  }
  srv->alloc = a;
  srv->r = r;
  srv->g = r ? NULL : g;
  srv->pid = getpid();
  srv->wake_r = srv->wake_w = -1;
  srv->cap = o && o->response_cap ? o->response_cap : TTFT__HTTP_RESPONSE_CAP;
  srv->cap_fixed = o && o->response_cap_fixed;
  srv->render_interval = o && !o->render_defaults ? o->render_interval_ns : TTFT__HTTP_RENDER_INTERVAL_NS;
  srv->render_factor = o && !o->render_defaults ? o->render_cost_factor : TTFT__HTTP_RENDER_COST_FACTOR;
  srv->st.held_cap = srv->cap;
  for (i = 0; i < HTTP_MAX_CONN; i++) srv->c[i].fd = -1;
  if (pthread_mutex_init(&srv->mu, NULL) != 0) {
    ttft__free(&a, srv);
    say(msg, msg_cap, addr, "out of memory (pthread_mutex_init)", 0);
    return TTFT_ENOMEM;
  }

  srv->lfd = listen_on(&ss, slen, &srv->port, &step);
  if (srv->lfd < 0) {
    say(msg, msg_cap, addr, step, errno); /* "127.0.0.1:9464: bind: Address already in use" */
    rc = TTFT_EIO;
    goto fail;
  }
  if (pipe(pipefd) < 0) {
    say(msg, msg_cap, addr, "pipe", errno);
    rc = TTFT_EIO;
    goto fail;
  }
  srv->wake_r = pipefd[0];
  srv->wake_w = pipefd[1];
  if (ttft__http_set_flags(srv->wake_r) < 0 || ttft__http_set_flags(srv->wake_w) < 0) {
    say(msg, msg_cap, addr, "fcntl", errno);
    rc = TTFT_EIO;
    goto fail;
  }
  /* on g_servers before the thread runs: a fork from now on finds it */
  rc = fork_link(srv);
  if (rc != TTFT_OK) {
    say(msg, msg_cap, addr, "out of memory (pthread_atfork)", 0);
    goto fail;
  }
  /* The thread starts with every signal blocked, so that signals meant for
   * the application are never delivered to it. */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  {
    pthread_attr_t attr; /* musl's default stack is 128 KiB: at least TTFT__THREAD_STACK */
    i = ttft__thread_attr(&attr);
    if (i == 0) {
      i = pthread_create(&srv->thread, &attr, serve, srv);
      pthread_attr_destroy(&attr);
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (i != 0) {
    fork_unlink(srv);
    say(msg, msg_cap, addr, "cannot start the server thread (pthread_create)", i);
    rc = TTFT_ENOMEM;
    goto fail;
  }
  *out = srv;
  errno = saved_errno;
  return TTFT_OK;

fail:
  if (srv->lfd >= 0) close(srv->lfd);
  if (srv->wake_r >= 0) close(srv->wake_r);
  if (srv->wake_w >= 0) close(srv->wake_w);
  pthread_mutex_destroy(&srv->mu);
  ttft__free(&a, srv);
  errno = saved_errno;
  return rc;
}

int ttft__http_start_opts(ttft_registry *r, const char *addr, const ttft__http_opts *o, ttft_http **out) {
  return start(r, NULL, addr, o, out, NULL, 0);
}

int ttft__http_start_gather_opts(ttft_gather *g, const char *addr, const ttft__http_opts *o,
                                 ttft_http **out) {
  return start(NULL, g, addr, o, out, NULL, 0);
}

int ttft_http_start(ttft_registry *r, const char *addr, ttft_http **out) {
  return start(r, NULL, addr, NULL, out, NULL, 0);
}

int ttft_http_start_msg(ttft_registry *r, const char *addr, ttft_http **out, char *msg, size_t cap) {
  return start(r, NULL, addr, NULL, out, msg, cap);
}

int ttft_http_start_gather(ttft_gather *g, const char *addr, ttft_http **out, char *msg, size_t cap) {
  if (!g) {
    if (out) *out = NULL;
    say(msg, cap, addr, "no gather (NULL)", 0);
    return TTFT_EINVAL;
  }
  return start(NULL, g, addr, NULL, out, msg, cap);
}

int ttft_http_port(const ttft_http *srv) { return srv ? srv->port : TTFT_EINVAL; }

/* Close srv's descriptors and free its memory, without its thread: after
 * the thread has ended, or in a forked child, where it never existed and
 * every descriptor is a copy (close only: shutdown would end the parent's
 * connections too, and the wake pipe is the parent's). */
static void release(ttft_http *srv) {
  ttft_allocator a = srv->alloc;
  int i;
  for (i = 0; i < HTTP_MAX_CONN; i++) {
    http_conn *c = &srv->c[i];
    if (c->state == C_FREE) continue;
    close(c->fd);
    if (c->in) ttft__free(&a, c->in);
  }
  while (srv->bodies) {
    http_body *b = srv->bodies;
    srv->bodies = b->next;
    ttft__free(&a, b);
  }
  ttft_snapshot_free(srv->snap); /* a child's copy: its own memory */
  close(srv->lfd);
  close(srv->wake_r);
  close(srv->wake_w);
  pthread_mutex_destroy(&srv->mu);
  ttft__free(&a, srv);
}

void ttft_http_stop(ttft_http *srv) {
  int saved_errno = errno;
  char one = 1;
  if (!srv) return;
  fork_unlink(srv);
  if (srv->pid == getpid()) {
    /* a full pipe is already readable: EAGAIN is as good as success */
    while (write(srv->wake_w, &one, 1) < 0 && errno == EINTR) {}
    pthread_join(srv->thread, NULL);
  }
  release(srv);
  errno = saved_errno;
}

void ttft__http_get_stats(ttft_http *srv, ttft__http_stats *out) {
  int i;
  pthread_mutex_lock(&srv->mu);
  *out = srv->st;
  out->conns = out->reading = out->writing = out->lingering = 0;
  for (i = 0; i < HTTP_MAX_CONN; i++) {
    int st = srv->c[i].state;
    if (st == C_FREE) continue;
    out->conns++;
    out->reading += st == C_READ;
    out->writing += st == C_WRITE;
    out->lingering += st == C_LINGER;
  }
  pthread_mutex_unlock(&srv->mu);
}
