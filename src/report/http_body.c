/*
 * http_body.c — the endpoint's body cache: rendered responses, shared and
 * reused.
 *
 * Invariants (srv->mu held for every change):
 *  - a body is rendered once and shared, reference counted, by every
 *    connection that sends it and by srv->cache[format] while it is fresh
 *    (ttft__http_render_window: TTFT__HTTP_RENDER_INTERVAL_NS, or longer
 *    when rendering is slow); refs counts exactly those holders (+ 1 for a
 *    renderer or a pin while it works), and the last unref unlists and
 *    frees it;
 *  - every body alive is on srv->bodies (listed before it is formatted
 *    into, so a forked child frees it), and the bytes of all of them,
 *    st.held_bytes, never exceed srv->cap: to make room the cache first
 *    drops entries nobody sends, then closes writers that stopped reading,
 *    and otherwise the older body is served;
 *  - the cap follows the registry (cap_follow): at least twice the largest
 *    body of every format rendered, so whatever the configuration lets a
 *    registry hold is served; memory is bounded by what the registry
 *    renders, never by what clients do;
 *  - one render attempt per format per freshness window, success or
 *    failure: a failure is remembered (fail_until / fail_err) and the
 *    requests of that window get the older body, or the same error;
 *  - one take per snapshot window: every format rendered while srv->snap
 *    is fresh (ttft__http_snap_window) renders from it, so scrapes of
 *    every path together take one snapshot (one merge, for a gather) per
 *    window; a stale one is freed by the loop (cache_expire) or replaced
 *    by the next take. Only the server thread touches it.
 */
#include "report/http_server.h"

void ttft__http_body_unref(ttft_http *srv, http_body *b) {
  if (--b->refs > 0) return;
  if (b->prev) b->prev->next = b->next;
  else srv->bodies = b->next;
  if (b->next) b->next->prev = b->prev;
  else srv->bodies_tail = b->prev;
  srv->st.held_bytes -= b->size;
  srv->st.bodies--;
  ttft__free(&srv->alloc, b);
}

uint64_t ttft__http_render_window(const ttft_http *srv, int f) {
  uint64_t grown = srv->render_ns[f] * srv->render_factor;
  return grown > srv->render_interval ? grown : srv->render_interval;
}

uint64_t ttft__http_snap_window(const ttft_http *srv) {
  uint64_t grown = srv->snap_ns * srv->render_factor;
  return grown > srv->render_interval ? grown : srv->render_interval;
}

/* b, rendered at t_done, may still be sent as "now" (no subtraction: now
 * may be read before a render that finished later). */
static int body_fresh(const ttft_http *srv, int f, const http_body *b, uint64_t now) {
  return now < b->t_done + ttft__http_render_window(srv, f);
}

void ttft__http_cache_drop(ttft_http *srv, int f) {
  http_body *b = srv->cache[f];
  srv->cache[f] = NULL;
  if (b) ttft__http_body_unref(srv, b);
}

/* Let go of cache entries nobody else sends once they are stale; *wake
 * gets the time the next one will be. */
void ttft__http_cache_expire(ttft_http *srv, uint64_t now, uint64_t *wake) {
  int f;
  if (srv->snap) {
    uint64_t until = srv->snap_t + ttft__http_snap_window(srv);
    if (now >= until) {
      ttft_snapshot_free(srv->snap);
      srv->snap = NULL;
    } else if (until < *wake) {
      *wake = until;
    }
  }
  for (f = 0; f < HTTP_NFMT; f++) {
    http_body *b = srv->cache[f];
    uint64_t until;
    if (!b || b->refs > 1) continue; /* senders' deadlines wake the loop */
    until = b->t_done + ttft__http_render_window(srv, f);
    if (now >= until) ttft__http_cache_drop(srv, f);
    else if (until < *wake) *wake = until;
  }
}


/* Free memory until size more bytes fit under the cap: first cache entries
 * that no connection sends, then - oldest body first - bodies whose every
 * sender is a stalled writer (those writers are closed). 1 when it fits. */
static int make_room(ttft_http *srv, size_t size, uint64_t now) {
  http_body *b, *next;
  int f, i;
  if (size > srv->cap) return 0;
  if (srv->st.held_bytes + size <= srv->cap) return 1;
  for (f = 0; f < HTTP_NFMT; f++)
    if (srv->cache[f] && srv->cache[f]->refs == 1) ttft__http_cache_drop(srv, f);
  for (b = srv->bodies; b && srv->st.held_bytes + size > srv->cap; b = next) {
    size_t senders = 0, cached = 0;
    int all_stalled = 1;
    b->refs++; /* pinned while its senders are probed: one may finish */
    for (i = 0; i < HTTP_MAX_CONN; i++) {
      http_conn *c = &srv->c[i];
      if (c->state == C_WRITE && c->body == b && ttft__http_writer_stalled(c, now))
        ttft__http_conn_send(srv, c, now);
    }
    for (f = 0; f < HTTP_NFMT; f++) cached += srv->cache[f] == b;
    for (i = 0; i < HTTP_MAX_CONN; i++) {
      const http_conn *c = &srv->c[i];
      if (c->state != C_WRITE || c->body != b) continue;
      senders++;
      if (!ttft__http_writer_stalled(c, now)) all_stalled = 0;
    }
    /* every other reference is a stalled sender or the cache (a body being
     * rendered has one that is neither) */
    if (all_stalled && senders > 0 && senders + cached + 1 == b->refs) {
      for (f = 0; f < HTTP_NFMT; f++)
        if (srv->cache[f] == b) {
          srv->cache[f] = NULL;
          b->refs--;
        }
      for (i = 0; i < HTTP_MAX_CONN; i++) {
        http_conn *c = &srv->c[i];
        if (c->state == C_WRITE && c->body == b) {
          srv->st.evicted_for_memory++;
          ttft__http_conn_close(srv, c);
        }
      }
    }
    next = b->next;
    ttft__http_body_unref(srv, b); /* the pin: frees b when its senders were closed */
  }
  return srv->st.held_bytes + size <= srv->cap;
}

/* A new body with room for cap bytes (refs 1: the caller's), listed in
 * srv->bodies. NULL with *err = HTTP_E_CAP or TTFT_ENOMEM. */
static http_body *body_new(ttft_http *srv, size_t cap, uint64_t now, int *err) {
  size_t size = sizeof(http_body) + cap;
  http_body *b;
  if (cap > srv->cap || !make_room(srv, size, now)) {
    *err = HTTP_E_CAP;
    return NULL;
  }
  b = ttft__alloc(&srv->alloc, size);
  if (!b) {
    *err = TTFT_ENOMEM;
    return NULL;
  }
  b->refs = 1;
  b->cap = cap;
  b->size = size;
  b->prev = srv->bodies_tail;
  if (srv->bodies_tail) srv->bodies_tail->next = b;
  else srv->bodies = b;
  srv->bodies_tail = b;
  srv->st.held_bytes += size;
  srv->st.bodies++;
  if (srv->st.held_bytes > srv->st.held_peak) srv->st.held_peak = srv->st.held_bytes;
  return b;
}

/* A body of format f needs need bytes: the cap becomes at least twice the
 * largest body of every format (an older one still being sent beside a new
 * one), so any body the registry renders fits. Unless the cap is fixed. */
static void cap_follow(ttft_http *srv, int f, size_t need) {
  size_t want = 0;
  int g;
  if (need > srv->max_len[f]) srv->max_len[f] = need;
  if (srv->cap_fixed) return;
  for (g = 0; g < HTTP_NFMT; g++) {
    size_t one = srv->max_len[g] ? srv->max_len[g] + sizeof(http_body) : 0;
    if (one > (SIZE_MAX - want) / 2) return; /* cannot be: bodies are allocated */
    want += 2 * one;
  }
  if (want > srv->cap) {
    srv->cap = want;
    srv->st.held_cap = want;
    srv->st.cap_raises++;
  }
}

/* Body f of s, ttft_snapshot_format rules (snprintf; the encoding needs
 * no NUL but is given the same room). */
static long format_into(const ttft_snapshot *s, int f, char *buf, size_t cap) {
  if (f == HTTP_FMT_SNAPSHOT) return ttft_snapshot_encode(s, buf, cap);
  return ttft_snapshot_format(s, (ttft_format)f, buf, cap);
}

/* Format s into a new body (refs 1). mu is released while formatting: the
 * body is already listed, so a forked child frees it. NULL with *err. */
static http_body *render(ttft_http *srv, const ttft_snapshot *s, int f, int *err) {
  size_t last = srv->last_len[f];
  http_body *b = NULL;
  long n;
  /* the last length of this format, with room to grow: one pass */
  if (last) b = body_new(srv, last + last / 8 + 4096, ttft_now_ns(), err);
  if (!b) { /* unknown, or the estimate does not fit: measure first */
    pthread_mutex_unlock(&srv->mu);
    n = format_into(s, f, NULL, 0);
    ttft__http_server_lock(srv);
    if (n < 0 || (unsigned long)n >= (unsigned long)(SIZE_MAX / 2)) {
      *err = n < 0 ? (int)n : TTFT_ERANGE;
      return NULL;
    }
    cap_follow(srv, f, (size_t)n + 1);
    b = body_new(srv, (size_t)n + 1, ttft_now_ns(), err);
    if (!b) return NULL;
  }
  for (;;) {
    pthread_mutex_unlock(&srv->mu);
    n = format_into(s, f, b->data, b->cap);
    ttft__http_server_lock(srv);
    if (n >= 0 && (size_t)n < b->cap) break; /* snprintf rules: it fits */
    ttft__http_body_unref(srv, b);
    if (n < 0 || (unsigned long)n >= (unsigned long)(SIZE_MAX / 2)) {
      *err = n < 0 ? (int)n : TTFT_ERANGE;
      return NULL;
    }
    cap_follow(srv, f, (size_t)n + 1);
    b = body_new(srv, (size_t)n + 1, ttft_now_ns(), err); /* the estimate was short */
    if (!b) return NULL;
  }
  b->len = (size_t)n;
  srv->last_len[f] = (size_t)n;
  cap_follow(srv, f, (size_t)n + 1);
  return b;
}

/* The older body when a new one cannot be had for memory (it is held by
 * senders anyway), else NULL with *err = err. */
static http_body *body_older(ttft_http *srv, int f, int err, int *out_err) {
  http_body *b = srv->cache[f];
  *out_err = err;
  if (b && (err == HTTP_E_CAP || err == TTFT_ENOMEM)) {
    b->refs++;
    srv->st.stale_reuses++;
    return b;
  }
  if (err == HTTP_E_CAP) srv->st.refused_memory++;
  return NULL;
}

/* The snapshot to render from: srv->snap while it is fresh, else a new
 * take from the source (mu released meanwhile), which replaces it. NULL
 * with *err when the take failed. */
static const ttft_snapshot *snap_get(ttft_http *srv, int *err) {
  uint64_t t0 = ttft_now_ns();
  ttft_snapshot *s;
  if (srv->snap && t0 < srv->snap_t + ttft__http_snap_window(srv)) return srv->snap;
  ttft_snapshot_free(srv->snap); /* stale: no request renders from it now */
  srv->snap = NULL;
  pthread_mutex_unlock(&srv->mu);
  errno = 0;
  s = srv->g ? ttft_gather_take(srv->g) : ttft_snapshot_take(srv->r);
  *err = !s && srv->g && errno != ENOMEM ? TTFT_EIO : TTFT_ENOMEM; /* a gather's dir gone */
  ttft__http_server_lock(srv);
  srv->st.takes++;
  srv->snap = s;
  srv->snap_t = ttft_now_ns();
  srv->snap_ns = srv->snap_t - t0;
  return s;
}

/* The body of format f for one response, with a reference for the caller:
 * the cached one while it is fresh, else a new render from snap->s (got
 * here from snap_get if the request has none yet), which becomes the
 * cache entry. When a new one cannot be had for memory, the cached one
 * however old (it is held by senders anyway). NULL with *err when there
 * is none. A failed render is not tried again within its window: the
 * requests meanwhile get what it gave (the older body, or the error). */
http_body *ttft__http_body_get(ttft_http *srv, int f, http_snap *snap, int *err) {
  http_body *b = srv->cache[f];
  uint64_t t0 = ttft_now_ns(), take_ns = 0, t1;
  if (b && body_fresh(srv, f, b, t0)) {
    b->refs++;
    srv->st.reuses++;
    return b;
  }
  if (t0 < srv->fail_until[f]) {
    srv->st.render_failures_reused++;
    return body_older(srv, f, srv->fail_err[f], err);
  }
  if (!snap->s) {
    uint64_t takes = srv->st.takes;
    snap->s = snap_get(srv, err);
    if (srv->st.takes != takes) take_ns = srv->snap_ns; /* this render paid for it */
  }
  t0 = ttft_now_ns();
  b = snap->s ? render(srv, snap->s, f, err) : NULL;
  t1 = ttft_now_ns();
  srv->render_ns[f] = t1 - t0 + take_ns;
  if (b) {
    /* fresh for a window from its snapshot's take, not from this render:
     * a body rendered late from a shared snapshot is no older for it */
    b->t_done = srv->snap_t < t1 ? srv->snap_t : t1;
    srv->fail_until[f] = 0;
    ttft__http_cache_drop(srv, f);
    srv->cache[f] = b; /* the render's reference becomes the cache's */
    b->refs++;
    srv->st.renders++;
    return b;
  }
  /* remembered for one window (at least the floor, longer when even the
   * failed attempt was slow), as a body would be */
  srv->st.render_failures++;
  srv->fail_err[f] = *err;
  srv->fail_until[f] = t1 + ttft__http_render_window(srv, f);
  return body_older(srv, f, *err, err);
}
