/*
 * http_conn.c — the endpoint's connection table: srv->c[HTTP_MAX_CONN],
 * what each connection does when its socket is ready, and who leaves
 * when the table is full.
 *
 * Invariants (srv->mu held for every change):
 *  - a slot is C_FREE with fd -1, or owns one open, non-blocking socket;
 *    a connection moves only forward: READ (until a whole request head is
 *    in, within HTTP_HEAD_TIMEOUT) -> WRITE (the response, within
 *    HTTP_SEND_TIMEOUT) -> LINGER (write side shut, unread input discarded
 *    until the client closes, at most HTTP_LINGER_BYTES, so that closing
 *    does not reset the response away) -> closed, and every state has a
 *    deadline;
 *  - a client costs the others at most one short turn of the loop: no
 *    call here blocks, and a reader's head is parsed again only when a
 *    line may have ended;
 *  - a newcomer always gets in: a full table drops the connection least
 *    worth keeping (evict_rank: done, then idle, then not reading), after
 *    probing it once, and never a reader younger than HTTP_MIN_AGE;
 *  - a connection holds at most one body reference (c->body) and one
 *    head buffer (c->in, counted in st.in_bytes); closing drops both.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#  define _GNU_SOURCE /* accept4 */
#endif
#include "report/http_server.h"

static int accept_fd(int lfd) {
  int fd;
#if defined(__linux__)
  do fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  return fd;
#else
  do fd = accept(lfd, NULL, NULL);
  while (fd < 0 && errno == EINTR);
  if (fd >= 0 && ttft__http_set_flags(fd) < 0) {
    close(fd);
    return -1;
  }
#  if defined(SO_NOSIGPIPE)
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
  }
#  endif
  return fd;
#endif
}


/* A writer whose client has not taken a byte for the grace period (as
 * far as the server knows: probe it with conn_send before acting on it -
 * the server itself may have been busy rendering meanwhile). */
int ttft__http_writer_stalled(const http_conn *c, uint64_t now) {
  return c->state == C_WRITE && c->t_blocked && c->t_blocked + HTTP_EVICT_GRACE <= now;
}

void ttft__http_in_free(ttft_http *srv, http_conn *c) {
  if (!c->in) return;
  ttft__free(&srv->alloc, c->in);
  c->in = NULL;
  c->in_len = 0;
  srv->st.in_bytes -= TTFT__HTTP_MAX_REQUEST + 1;
}

void ttft__http_conn_close(ttft_http *srv, http_conn *c) {
  if (c->state == C_FREE) return;
  close(c->fd);
  ttft__http_in_free(srv, c);
  if (c->body) ttft__http_body_unref(srv, c->body);
  c->body = NULL;
  c->fd = -1;
  c->state = C_FREE;
}

void ttft__http_conn_send(ttft_http *srv, http_conn *c, uint64_t now) {
  size_t total = c->head_len + c->body_send;
  while (c->off < total) {
    struct iovec iov[2];
    struct msghdr m;
    ssize_t n;
    memset(&m, 0, sizeof m);
    m.msg_iov = iov;
    if (c->off < c->head_len) {
      iov[0].iov_base = c->head + c->off;
      iov[0].iov_len = c->head_len - c->off;
      iov[1].iov_base = c->body ? c->body->data : NULL;
      iov[1].iov_len = c->body_send;
      m.msg_iovlen = c->body_send ? 2 : 1;
    } else {
      iov[0].iov_base = c->body->data + (c->off - c->head_len);
      iov[0].iov_len = total - c->off;
      m.msg_iovlen = 1;
    }
    n = sendmsg(c->fd, &m, HTTP_SEND_FLAGS);
    if (n > 0) {
      c->off += (size_t)n;
      c->t_progress = now;
      c->t_blocked = 0;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!c->t_blocked) c->t_blocked = now;
      return; /* poll for POLLOUT */
    } else {
      ttft__http_conn_close(srv, c); /* EPIPE, ECONNRESET: the client left */
      return;
    }
  }
  if (c->body) ttft__http_body_unref(srv, c->body);
  c->body = NULL;
  c->body_send = 0;
  shutdown(c->fd, SHUT_WR);
  c->state = C_LINGER;
  c->drained = 0;
  c->deadline = now + HTTP_LINGER_TIMEOUT;
}

/* Discard what the client still sends; 1 when it is done (EOF, error, or
 * too much), 0 when more may come. */
static int conn_drain(http_conn *c) {
  char scratch[4096];
  for (;;) {
    ssize_t n = recv(c->fd, scratch, sizeof scratch, 0);
    if (n > 0) {
      c->drained += (size_t)n;
      if (c->drained > HTTP_LINGER_BYTES) return 1;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return 0;
    } else {
      return 1; /* EOF or error */
    }
  }
}

static void conn_read(ttft_http *srv, http_conn *c, uint64_t now) {
  ttft__http_req q;
  char *buf = c->in ? c->in : srv->scratch;
  size_t have = c->in_len;
  ssize_t n;
  int rc;
  if (have >= TTFT__HTTP_MAX_REQUEST) { /* the parser refuses a full buffer first */
    ttft__http_respond_error(srv, c, 431, 0, now);
    return;
  }
  do n = recv(c->fd, buf + have, TTFT__HTTP_MAX_REQUEST - have, 0);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n <= 0) {
    ttft__http_conn_close(srv, c); /* gone before sending a whole request */
    return;
  }
  have += (size_t)n;
  /* Parse again only when a line may have ended (or on the first bytes, to
   * refuse garbage at once): a byte-at-a-time client costs one scan per
   * line, not one per byte. */
  if (c->in && !memchr(buf + have - (size_t)n, '\n', (size_t)n) && have < TTFT__HTTP_MAX_REQUEST) {
    c->in_len = have;
    return;
  }
  rc = ttft__http_parse(buf, have, &q);
  if (rc == TTFT__HTTP_NEED_MORE) {
    if (!c->in) { /* the head comes in pieces: it needs a buffer of its own */
      c->in = ttft__alloc(&srv->alloc, TTFT__HTTP_MAX_REQUEST + 1);
      if (!c->in) {
        ttft__http_respond_oom(srv, c, now);
        return;
      }
      srv->st.in_bytes += TTFT__HTTP_MAX_REQUEST + 1;
      memcpy(c->in, srv->scratch, have);
    }
    c->in_len = have;
    return;
  }
  if (rc == TTFT__HTTP_COMPLETE) ttft__http_route(srv, c, &q, now);
  else ttft__http_respond_error(srv, c, -rc, 0, now);
}

void ttft__http_conn_step(ttft_http *srv, http_conn *c, uint64_t now) {
  switch (c->state) {
  case C_READ: conn_read(srv, c, now); break;
  case C_WRITE: ttft__http_conn_send(srv, c, now); break;
  case C_LINGER:
    if (conn_drain(c)) ttft__http_conn_close(srv, c);
    break;
  default: break;
  }
}

void ttft__http_conn_expire(ttft_http *srv, http_conn *c, uint64_t now) {
  if (c->state == C_FREE || now < c->deadline) return;
  if (c->state == C_READ) ttft__http_respond_error(srv, c, 408, 0, now);
  else ttft__http_conn_close(srv, c);
}

/* How much a connection is worth keeping when the table is full: rank
 * (lower goes first), then key (smaller goes first).
 *   0 LINGER: its response is with the kernel already (oldest first)
 *   1 READ for the grace period or longer: idle, or a slow request
 *     (oldest first)
 *   2 WRITE whose socket has been full for the grace period: a client that
 *     does not read (stuck longest first)
 *   3 READ younger than that: its request may be on the way (oldest first)
 *   4 WRITE that is moving (longest in WRITE first: a trickle reader
 *     before a fast one)
 *  -1 READ younger than HTTP_MIN_AGE: never */
static int evict_rank(const http_conn *c, uint64_t now, uint64_t *key) {
  switch (c->state) {
  case C_LINGER: *key = c->t_accept; return 0;
  case C_READ:
    *key = c->t_accept;
    if (c->t_accept + HTTP_EVICT_GRACE <= now) return 1;
    return c->t_accept + HTTP_MIN_AGE <= now ? 3 : -1;
  default:
    if (ttft__http_writer_stalled(c, now)) {
      *key = c->t_blocked;
      return 2;
    }
    *key = c->t_write;
    return 4;
  }
}

/* The connection ranked first for dropping, -1 when none may be (then
 * *ready, if not NULL, gets the time one will be: a reader coming of age). */
int ttft__http_pick_victim(const ttft_http *srv, uint64_t now, uint64_t *ready) {
  int best = -1, best_rank = 5, i;
  uint64_t best_key = UINT64_MAX;
  for (i = 0; i < HTTP_MAX_CONN; i++) {
    uint64_t key;
    int rank;
    if (srv->c[i].state == C_FREE) continue;
    rank = evict_rank(&srv->c[i], now, &key);
    if (rank < 0) {
      if (ready && key + HTTP_MIN_AGE < *ready) *ready = key + HTTP_MIN_AGE;
      continue;
    }
    if (rank < best_rank || (rank == best_rank && key < best_key)) {
      best = i;
      best_rank = rank;
      best_key = key;
    }
  }
  return best;
}

/* The connection to drop for a newcomer (possibly one that is free by
 * now); -1 when none may be dropped now. The one picked is probed first, once:
 * a reader whose request has come in meanwhile is served instead (it was
 * the server that had not got to it yet), and so is a writer that looked
 * stalled but takes bytes (the server had been busy rendering); then the
 * choice is made again. A connection probed and found idle or stuck is
 * the one. */
static int victim(ttft_http *srv, uint64_t now) {
  uint64_t probed = 0; /* bit i: c[i] was probed in this call */
  for (;;) {
    int v = ttft__http_pick_victim(srv, now, NULL);
    http_conn *c;
    size_t before;
    if (v < 0 || (probed >> v & 1)) return v;
    probed |= UINT64_C(1) << v;
    c = &srv->c[v];
    if (c->state == C_READ) {
      before = c->in_len;
      conn_read(srv, c, now);
      if (c->state == C_READ && c->in_len == before) return v; /* idle indeed */
    } else if (ttft__http_writer_stalled(c, now)) {
      before = c->off;
      ttft__http_conn_send(srv, c, now);
      if (c->state == C_WRITE && c->off == before) return v; /* stuck indeed */
    } else {
      return v;
    }
    if (c->state == C_FREE) return v; /* it left: its slot is free */
  }
}

static void conn_evict(ttft_http *srv, http_conn *c) {
  if (c->state == C_FREE) return; /* it finished while it was probed */
  if (c->state == C_LINGER) {
    srv->st.evicted_linger++;
    conn_drain(c); /* nothing left unread: the close is a FIN, not a reset */
  } else if (c->state == C_READ) {
    srv->st.evicted_reader++;
  } else {
    srv->st.evicted_writer++;
  }
  ttft__http_conn_close(srv, c);
}

int ttft__http_free_slot(const ttft_http *srv) {
  int i;
  for (i = 0; i < HTTP_MAX_CONN; i++)
    if (srv->c[i].state == C_FREE) return i;
  return -1;
}

/* Take waiting connections, up to HTTP_ACCEPT_BATCH; a full table drops
 * its victim for each, and when none may be dropped (every reader in it
 * younger than HTTP_MIN_AGE) the rest wait in the listen queue. */
void ttft__http_accept_clients(ttft_http *srv) {
  int k, retried = 0;
  for (k = 0; k < HTTP_ACCEPT_BATCH; k++) {
    uint64_t now = ttft_now_ns();
    int slot = ttft__http_free_slot(srv), fd;
    http_conn *c;
    if (slot < 0 && (slot = victim(srv, now)) < 0) return;
    fd = accept_fd(srv->lfd);
    if (fd < 0) {
      if (errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      /* EMFILE, ENFILE, ENOBUFS: one of ours makes room once, then pause */
      if (!retried && (errno == EMFILE || errno == ENFILE)) {
        int v = srv->c[slot].state != C_FREE ? slot : victim(srv, now);
        if (v >= 0) {
          conn_evict(srv, &srv->c[v]);
          retried = 1;
          continue;
        }
      }
      srv->accept_pause_until = now + HTTP_ACCEPT_BACKOFF;
      return;
    }
    c = &srv->c[slot];
    conn_evict(srv, c); /* nothing when it is free */
    memset(c, 0, offsetof(http_conn, head));
    c->fd = fd;
    c->state = C_READ;
    c->t_accept = now;
    c->deadline = now + HTTP_HEAD_TIMEOUT;
    srv->st.accepted++;
    conn_read(srv, c, now); /* the request is usually there already */
  }
}
