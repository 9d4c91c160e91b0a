/*
 * otlp.c — the OpenTelemetry pusher: ttft_otlp_config_init (defaults and
 * the OTEL_* environment), ttft_otlp_start / flush / stop, and the one
 * background thread that takes a snapshot every interval, encodes it
 * (ttft__format_otlp) and POSTs it (otlp_http.c) with the OTLP retry rule.
 *
 * What a hook pays: nothing. The thread only calls ttft_snapshot_take, as
 * a scrape does; it never holds a lock a hook takes.
 *
 * Temporality and loss (the invariant):
 *  - cumulative: each push sends a fresh snapshot. A push that fails loses
 *    nothing: the next one carries the same totals and more.
 *  - delta / lowmemory: the thread keeps `last`, the snapshot whose push
 *    the collector accepted (2xx), and its wall time. Each push sends
 *    ttft_snapshot_delta(now, last) with start = last's time, so a push
 *    that fails leaves `last` in place and its observations go out in the
 *    next push's delta: nothing lost, nothing sent twice. The first push
 *    sends the whole snapshot, from the registry's creation. Memory: `last`
 *    plus the push in flight — two snapshots, whatever the outage.
 *  - a batch the collector refuses for good (a status outside 2xx and the
 *    retryable set 429/502/503/504, e.g. 400) is dropped: in delta mode
 *    `last` moves on to it (sending it again would be refused again), and
 *    it is counted in the drop count said on stderr.
 *
 * Retries (the OTLP/HTTP rule): 429, 502, 503, 504 and connection
 * failures are retried with exponential backoff (250 ms doubling, at most
 * 5 s, each wait drawn in [half, whole] of it) or after Retry-After when
 * the answer has one; never past the push's deadline (timeout_ms from the
 * push's start). A stop during a wait ends the wait: the last push starts.
 *
 * What is said: the first failed push and the first dropped batch, once
 * each per pusher, one line on stderr (the library's only output, as the
 * publisher's). Every outcome is counted in the pusher's stats (under mu,
 * updated once per POST: ttft_otlp_stats reads them), and ttft_otlp_flush
 * returns each push's outcome.
 *
 * Fork: a child forked while a pusher runs has a copy without the thread.
 * ttft_otlp_stop there frees the copy's memory (never joins, never
 * pushes); ttft_otlp_flush returns TTFT_EINVAL. The thread hands its
 * snapshots over with single pointer stores (the new one stored before the
 * old one is freed), so a child's copy frees a valid `last` or leaks one.
 */
#include "report/otlp.h"
#include "report/format.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define OTLP_DEFAULT_ENDPOINT "http://localhost:4318"
#define OTLP_DEFAULT_INTERVAL_MS 60000u
#define OTLP_DEFAULT_TIMEOUT_MS 10000u
#define OTLP_BACKOFF_FIRST_NS UINT64_C(250000000)
#define OTLP_BACKOFF_MAX_NS UINT64_C(5000000000)
#define OTLP_HDRS_MAX 3072 /* configured header lines; the request head is 4 KiB */

struct ttft_otlp {
  ttft_allocator alloc;
  ttft_registry *r;
  pid_t pid; /* the process whose thread this is */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC */

  /* immutable after start */
  ttft__otlp_url url;
  char hdrs[OTLP_HDRS_MAX];
  char *service_name, *resource_attributes;
  uint64_t interval_ns, timeout_ns;
  int delta;

  /* under mu */
  int stopping;
  ttft_otlp_info st; /* struct_size unused */
  uint64_t flush_asked, flush_done; /* generations */
  int flush_rc;

  /* the thread's (see the fork note above) */
  _Atomic(ttft_snapshot *) last; /* delta: the last accepted snapshot */
  uint64_t last_unix_ns;
  char *body;
  size_t body_cap;
  uint64_t rng;
  int said_failed, said_dropped;
};

/* ---------------------------------------------------------- environment */

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* a positive number of milliseconds that fits uint32_t, else 0 */
static uint32_t env_ms(const char *name) {
  const char *v = env(name), *p;
  uint64_t n = 0;
  if (!v) return 0;
  while (*v == ' ' || *v == '\t') v++;
  for (p = v; *p >= '0' && *p <= '9'; p++) {
    n = n * 10 + (uint64_t)(*p - '0');
    if (n > UINT32_MAX) return 0;
  }
  while (*p == ' ' || *p == '\t') p++;
  if (p == v || *p) return 0;
  return (uint32_t)n;
}

static int word_is(const char *v, const char *w) {
  size_t n;
  while (*v == ' ' || *v == '\t') v++;
  n = strlen(w);
  if (strncasecmp(v, w, n) != 0) return 0;
  for (v += n; *v; v++)
    if (*v != ' ' && *v != '\t') return 0;
  return 1;
}

static int env_temporality(void) {
  const char *v = env("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE");
  if (!v) return TTFT_OTLP_CUMULATIVE;
  if (word_is(v, "delta")) return TTFT_OTLP_DELTA;
  if (word_is(v, "lowmemory")) return TTFT_OTLP_LOWMEMORY;
  return TTFT_OTLP_CUMULATIVE; /* "cumulative", or a word the spec lacks */
}

static uint32_t interval_from_env(void) {
  uint32_t v = env_ms("OTEL_METRIC_EXPORT_INTERVAL");
  return v ? v : OTLP_DEFAULT_INTERVAL_MS;
}

static uint32_t timeout_from_env(void) {
  uint32_t v = env_ms("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT");
  if (!v) v = env_ms("OTEL_EXPORTER_OTLP_TIMEOUT");
  return v ? v : OTLP_DEFAULT_TIMEOUT_MS;
}

void ttft_otlp_config_init(ttft_otlp_config *c) {
  if (!c) return;
  memset(c, 0, sizeof *c);
  c->struct_size = sizeof *c;
  c->interval_ms = interval_from_env();
  c->timeout_ms = timeout_from_env();
  c->temporality = env_temporality();
}

/* ----------------------------------------------------------------- time */

static uint64_t unix_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

static struct timespec mono_ts(uint64_t ns) {
  struct timespec ts;
  ts.tv_sec = (time_t)(ns / UINT64_C(1000000000));
  ts.tv_nsec = (long)(ns % UINT64_C(1000000000));
  return ts;
}

/* Sleep on the condvar until deadline_ns (CLOCK_MONOTONIC) or until
 * stop(o) says so. mu held. Returns 1 when stop(o) became true. */
static int wait_until(ttft_otlp *o, uint64_t deadline_ns, int (*stop)(const ttft_otlp *)) {
  while (!stop(o)) {
    struct timespec ts;
    if (ttft_now_ns() >= deadline_ns) return 0;
    ts = mono_ts(deadline_ns);
    pthread_cond_timedwait(&o->cv, &o->mu, &ts);
  }
  return 1;
}

static int is_stopping(const ttft_otlp *o) { return o->stopping; }
static int wakes_push(const ttft_otlp *o) { return o->stopping || o->flush_asked != o->flush_done; }

/* -------------------------------------------------------------- one push */

/* errno e as text, thread-safe (strerror is not) */
static const char *err_text(int e, char *buf, size_t cap) {
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
  return strerror_r(e, buf, cap); /* GNU: may return a static string */
#else
  if (strerror_r(e, buf, cap) != 0) snprintf(buf, cap, "errno %d", e);
  return buf;
#endif
}

/* what answer a says, one line: "HTTP 503" or "connect: Connection refused" */
static void answer_text(const ttft__otlp_answer *a, char *buf, size_t cap) {
  char eb[96];
  if (a->status) snprintf(buf, cap, "HTTP %d", a->status);
  else snprintf(buf, cap, "%s: %s", a->step ? a->step : "error", err_text(a->err, eb, sizeof eb));
}

static void say_once(ttft_otlp *o, int *said, const char *what, const ttft__otlp_answer *a) {
  char t[160];
  if (*said) return;
  *said = 1;
  answer_text(a, t, sizeof t);
  fprintf(stderr, "libttft: OTLP push to http://%s%s %s: %s (said once; later ones are counted)\n",
          o->url.authority, o->url.path, what, t);
}

/* count one POST's answer (a retry when it is not the push's first) */
static void count_post(ttft_otlp *o, const ttft__otlp_answer *a, size_t len, int retry) {
  pthread_mutex_lock(&o->mu);
  o->st.retries += (uint64_t)(retry != 0);
  /* a body went out unless the connection never came up */
  if (a->status || (a->step && strcmp(a->step, "connect") != 0 && strcmp(a->step, "socket") != 0 &&
                    strcmp(a->step, "resolve") != 0))
    o->st.bytes_sent += len;
  o->st.last_status = a->status;
  if (a->status < 200 || a->status >= 300)
    answer_text(a, o->st.last_error, sizeof o->st.last_error);
  pthread_mutex_unlock(&o->mu);
}

/* xorshift64*: the backoff's jitter only */
static uint64_t next_rand(ttft_otlp *o) {
  uint64_t x = o->rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  o->rng = x;
  return x * UINT64_C(2685821657736338717);
}

/* Encode s into o->body; its length, or a negative TTFT_E*. */
static long encode(ttft_otlp *o, const ttft_snapshot *s, const ttft__otlp_opts *opts) {
  for (;;) {
    ttft__sb sb;
    int rc;
    ttft__sb_init(&sb, o->body, o->body_cap);
    rc = ttft__format_otlp(s, opts, &sb);
    if (rc < 0) return rc;
    if (sb.len < o->body_cap) return (long)sb.len;
    {
      size_t cap = sb.len + sb.len / 4 + 1024;
      char *nb = ttft__alloc(&o->alloc, cap);
      if (!nb) return TTFT_ENOMEM;
      ttft__free(&o->alloc, o->body);
      o->body = nb;
      o->body_cap = cap;
    }
  }
}

/* POST the body until it is accepted, refused for good, or out of time.
 * Returns 1 accepted, 0 dropped (refused for good), -1 failed. */
static int send_with_retries(ttft_otlp *o, size_t len, uint64_t deadline_ns, ttft__otlp_answer *a) {
  uint64_t backoff = OTLP_BACKOFF_FIRST_NS;
  for (int attempt = 0;; attempt++) {
    uint64_t wait, now;
    int stopped;
    ttft__otlp_post(&o->url, o->hdrs, o->body, len, deadline_ns, a);
    count_post(o, a, len, attempt);
    if (a->status >= 200 && a->status < 300) return 1;
    if (a->status && !ttft__otlp_retryable(a->status)) return 0;
    if (a->retry_after) {
      wait = a->retry_after_ns;
    } else {
      wait = backoff / 2 + next_rand(o) % (backoff / 2 + 1);
      backoff = backoff * 2 > OTLP_BACKOFF_MAX_NS ? OTLP_BACKOFF_MAX_NS : backoff * 2;
    }
    now = ttft_now_ns();
    if (now >= deadline_ns || wait >= deadline_ns - now) return -1; /* no time for another */
    pthread_mutex_lock(&o->mu);
    stopped = wait_until(o, now + wait, is_stopping);
    pthread_mutex_unlock(&o->mu);
    if (stopped) return -1; /* the last push follows at once */
  }
}

/* One push: TTFT_OK (accepted), TTFT_EIO (failed or dropped), TTFT_ENOMEM. */
static int push(ttft_otlp *o) {
  uint64_t deadline = ttft_now_ns() + o->timeout_ns, t_unix;
  ttft_snapshot *now, *d = NULL, *last = atomic_load_explicit(&o->last, memory_order_relaxed);
  const ttft_snapshot *send;
  ttft__otlp_opts opts;
  ttft__otlp_answer a;
  long len;
  int rc, err = 0;

  now = ttft_snapshot_take(o->r);
  t_unix = unix_now_ns();
  if (!now) return TTFT_ENOMEM;
  memset(&opts, 0, sizeof opts);
  opts.service_name = o->service_name;
  opts.resource_attributes = o->resource_attributes;
  opts.delta = o->delta;
  opts.time_unix_ns = t_unix;
  send = now;
  if (o->delta && last) {
    d = ttft_snapshot_delta(now, last, &err);
    if (!d) {
      ttft_snapshot_free(now);
      return err ? err : TTFT_ENOMEM;
    }
    send = d;
    opts.start_unix_ns = o->last_unix_ns;
  }
  len = encode(o, send, &opts);
  ttft_snapshot_free(d);
  if (len < 0) {
    ttft_snapshot_free(now);
    return (int)len;
  }
  rc = send_with_retries(o, (size_t)len, deadline, &a);
  pthread_mutex_lock(&o->mu);
  o->st.pushes++;
  if (rc > 0) o->st.accepted++;
  else if (rc < 0) o->st.failed++;
  else o->st.dropped++;
  pthread_mutex_unlock(&o->mu);
  if (rc < 0) say_once(o, &o->said_failed, "failed (the next push carries its data)", &a);
  else if (rc == 0) say_once(o, &o->said_dropped, "was refused; the batch is dropped", &a);
  if (o->delta && rc >= 0) {
    /* accepted, or dropped for good: the next delta starts here. The new
     * one is stored before the old one is freed (the fork note above). */
    o->last_unix_ns = t_unix;
    atomic_store_explicit(&o->last, now, memory_order_relaxed);
    ttft_snapshot_free(last);
  } else {
    ttft_snapshot_free(now);
  }
  return rc > 0 ? TTFT_OK : TTFT_EIO;
}

/* --------------------------------------------------------------- thread */

static void *run(void *arg) {
  ttft_otlp *o = arg;
  uint64_t next = ttft_now_ns() + o->interval_ns;
  int rc;
#if defined(__linux__) && defined(__GLIBC__)
  pthread_setname_np(pthread_self(), "ttft-otlp");
#endif
  pthread_mutex_lock(&o->mu);
  for (;;) {
    uint64_t gen;
    wait_until(o, next, wakes_push);
    if (o->stopping) break;
    gen = o->flush_asked;
    pthread_mutex_unlock(&o->mu);
    rc = push(o);
    pthread_mutex_lock(&o->mu);
    o->flush_done = gen;
    o->flush_rc = rc;
    pthread_cond_broadcast(&o->cv);
    next = ttft_now_ns() + o->interval_ns;
  }
  pthread_mutex_unlock(&o->mu);
  rc = push(o); /* the last word, bounded by the timeout */
  pthread_mutex_lock(&o->mu);
  o->flush_done = o->flush_asked; /* a flush that met the stop has its answer */
  o->flush_rc = rc;
  pthread_cond_broadcast(&o->cv);
  pthread_mutex_unlock(&o->mu);
  return NULL;
}

/* ---------------------------------------------------------------- public */

static void say(char *msg, size_t cap, const char *what, const char *url, const char *why) {
  if (!msg || !cap) return;
  if (url) snprintf(msg, cap, "%s %s: %s", what, url, why);
  else snprintf(msg, cap, "%s: %s", what, why);
}

static char *dup_str(const ttft_allocator *a, const char *s) {
  size_t n = strlen(s) + 1;
  char *d = ttft__alloc(a, n);
  if (d) memcpy(d, s, n);
  return d;
}

static void release(ttft_otlp *o) {
  ttft_allocator a = o->alloc;
  ttft_snapshot_free(atomic_load_explicit(&o->last, memory_order_relaxed));
  ttft__free(&a, o->body);
  ttft__free(&a, o->service_name);
  ttft__free(&a, o->resource_attributes);
  ttft__free(&a, o);
}

int ttft_otlp_start_msg(ttft_registry *r, const ttft_otlp_config *cfg, ttft_otlp **out, char *msg,
                        size_t cap) {
  int saved_errno = errno, rc;
  ttft_otlp_config c;
  const char *url, *why = NULL, *hdrs, *sn, *ra;
  int base;
  ttft__sb sb;
  ttft_allocator a;
  ttft_otlp *o;
  pthread_condattr_t ca;
  sigset_t all, old;

  if (msg && cap) msg[0] = '\0';
  if (out) *out = NULL;
  if (!r || !out) {
    say(msg, cap, "otlp", NULL, r ? "no place for the pusher (out is NULL)" : "no registry (NULL)");
    return TTFT_EINVAL;
  }
  ttft_otlp_config_init(&c);
  if (cfg) {
    if (cfg->struct_size < offsetof(ttft_otlp_config, temporality) + sizeof cfg->temporality) {
      say(msg, cap, "otlp", NULL, "config.struct_size is not sizeof(ttft_otlp_config) (call ttft_otlp_config_init)");
      return TTFT_EINVAL;
    }
    memcpy(&c, cfg, sizeof c < cfg->struct_size ? sizeof c : cfg->struct_size);
    if (!c.interval_ms) c.interval_ms = interval_from_env();
    if (!c.timeout_ms) c.timeout_ms = timeout_from_env();
  }
  if (c.temporality < TTFT_OTLP_CUMULATIVE || c.temporality > TTFT_OTLP_LOWMEMORY) {
    say(msg, cap, "otlp", NULL, "temporality is not a ttft_otlp_temporality");
    return TTFT_EINVAL;
  }
  /* the URL: metrics_endpoint as is, else endpoint + /v1/metrics */
  if (c.metrics_endpoint) url = c.metrics_endpoint, base = 0;
  else if (c.endpoint) url = c.endpoint, base = 1;
  else if ((url = env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")) != NULL) base = 0;
  else if ((url = env("OTEL_EXPORTER_OTLP_ENDPOINT")) != NULL) base = 1;
  else url = OTLP_DEFAULT_ENDPOINT, base = 1;

  ttft__allocator_current(&a);
  o = ttft__alloc(&a, sizeof *o);
  if (!o) {
    say(msg, cap, "otlp", NULL, "out of memory");
    return TTFT_ENOMEM;
  }
  o->alloc = a;
  o->r = r;
  o->pid = getpid();
  if (ttft__otlp_url_parse(url, base, &o->url, &why) < 0) {
    say(msg, cap, "otlp: endpoint", url, why);
    ttft__free(&a, o);
    return TTFT_EINVAL;
  }
  hdrs = c.headers;
  if (!hdrs) hdrs = env("OTEL_EXPORTER_OTLP_METRICS_HEADERS");
  if (!hdrs) hdrs = env("OTEL_EXPORTER_OTLP_HEADERS");
  ttft__sb_init(&sb, o->hdrs, sizeof o->hdrs);
  {
    char why_buf[160];
    if (ttft__otlp_headers_parse(hdrs, &sb, why_buf, sizeof why_buf) < 0) {
      say(msg, cap, "otlp", NULL, why_buf);
      ttft__free(&a, o);
      return TTFT_EINVAL;
    }
  }
  if (sb.len >= sizeof o->hdrs) {
    say(msg, cap, "otlp", NULL, "headers: more than 3 KiB");
    ttft__free(&a, o);
    return TTFT_EINVAL;
  }
  /* the resource, resolved now: the thread never reads the environment */
  sn = c.service_name ? c.service_name : env("OTEL_SERVICE_NAME");
  ra = c.resource_attributes ? c.resource_attributes : env("OTEL_RESOURCE_ATTRIBUTES");
  o->service_name = dup_str(&a, sn ? sn : "unknown_service");
  o->resource_attributes = dup_str(&a, ra ? ra : "");
  o->interval_ns = (uint64_t)c.interval_ms * UINT64_C(1000000);
  o->timeout_ns = (uint64_t)c.timeout_ms * UINT64_C(1000000);
  o->delta = c.temporality != TTFT_OTLP_CUMULATIVE;
  o->rng = (ttft_now_ns() ^ (uint64_t)(uintptr_t)o ^ ((uint64_t)o->pid << 32)) | 1;
  atomic_init(&o->last, NULL);
  if (!o->service_name || !o->resource_attributes) {
    say(msg, cap, "otlp", NULL, "out of memory");
    release(o);
    return TTFT_ENOMEM;
  }

  if (pthread_mutex_init(&o->mu, NULL) != 0) {
    say(msg, cap, "otlp", NULL, "out of memory (pthread_mutex_init)");
    release(o);
    return TTFT_ENOMEM;
  }
  if (pthread_condattr_init(&ca) != 0 || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
      pthread_cond_init(&o->cv, &ca) != 0) {
    pthread_mutex_destroy(&o->mu);
    say(msg, cap, "otlp", NULL, "out of memory (pthread_cond_init)");
    release(o);
    return TTFT_ENOMEM;
  }
  pthread_condattr_destroy(&ca);
  /* The thread starts with every signal blocked, so that signals meant for
   * the application are never delivered to it (and a closed collector
   * connection cannot raise SIGPIPE there). */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  rc = pthread_create(&o->thread, NULL, run, o);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    pthread_cond_destroy(&o->cv);
    pthread_mutex_destroy(&o->mu);
    say(msg, cap, "otlp", NULL, "cannot start the pusher thread (pthread_create)");
    release(o);
    errno = saved_errno;
    return TTFT_ENOMEM;
  }
  *out = o;
  errno = saved_errno;
  return TTFT_OK;
}

ttft_otlp *ttft_otlp_start(ttft_registry *r, const ttft_otlp_config *c) {
  ttft_otlp *o = NULL;
  ttft_otlp_start_msg(r, c, &o, NULL, 0);
  return o;
}

int ttft_otlp_flush(ttft_otlp *o) {
  uint64_t mine;
  int rc;
  if (!o || o->pid != getpid()) return TTFT_EINVAL;
  pthread_mutex_lock(&o->mu);
  if (o->stopping) {
    pthread_mutex_unlock(&o->mu);
    return TTFT_EINVAL;
  }
  mine = ++o->flush_asked;
  pthread_cond_broadcast(&o->cv);
  while (o->flush_done < mine) pthread_cond_wait(&o->cv, &o->mu);
  rc = o->flush_rc;
  pthread_mutex_unlock(&o->mu);
  return rc;
}

void ttft_otlp_stop(ttft_otlp *o) {
  int saved_errno = errno;
  if (!o) return;
  if (o->pid == getpid()) {
    pthread_mutex_lock(&o->mu);
    o->stopping = 1;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    pthread_join(o->thread, NULL);
    pthread_cond_destroy(&o->cv);
    pthread_mutex_destroy(&o->mu);
  }
  /* in a forked child: the copy's memory only (its mutex may be held by
   * the parent's thread at the fork; it is left alone) */
  release(o);
  errno = saved_errno;
}

int ttft_otlp_stats(const ttft_otlp *o, ttft_otlp_info *out) {
  ttft_otlp_info st;
  size_t n;
  if (!o || !out || out->struct_size < offsetof(ttft_otlp_info, last_status) + sizeof out->last_status ||
      o->pid != getpid())
    return TTFT_EINVAL;
  pthread_mutex_lock((pthread_mutex_t *)&o->mu);
  st = o->st;
  pthread_mutex_unlock((pthread_mutex_t *)&o->mu);
  n = out->struct_size < sizeof st ? out->struct_size : sizeof st;
  st.struct_size = out->struct_size;
  memcpy(out, &st, n);
  if (n < sizeof st && n > offsetof(ttft_otlp_info, last_error)) ((char *)out)[n - 1] = '\0';
  return TTFT_OK;
}
