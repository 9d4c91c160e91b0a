/*
 * publish.c — a registry's segment in its shared_dir (ttft_config.shared_dir,
 * ttft_publish; the files are described in common/segment.h, the reader is
 * report/gather.c). Layer: record (src/README.md). Nothing here runs on the
 * hot path: the hooks do not know a registry publishes.
 *
 * The protocol, writer's side.
 *  - One writer per segment: a segment's name carries its process's
 *    identity (pid, start ticks, random nonce), and the publishes of one
 *    registry are serialised by its publisher's mutex (the background
 *    thread, ttft_publish, the exit handler). A fork child takes a new
 *    identity before it publishes, so it never writes its parent's files.
 *  - A publish writes header + ttft_snapshot_encode bytes to <id>.tmp and
 *    rename(2)s it over <id>.seg: a reader opens either the old file or
 *    the new one, whole. A writer never waits for a reader (readers take
 *    no lock the writer takes).
 *  - Liveness: <id>.lock is created before the first segment and holds an
 *    open-file-description write lock for the publisher's life. The kernel
 *    drops it when the last descriptor of that description closes: at
 *    ttft_registry_free (after the FINAL publish) or when the process
 *    dies, however it dies. The descriptor is O_CLOEXEC, and a fork child
 *    closes its inherited copy at once (the parent's descriptor still
 *    refers to the description: the parent keeps its lock), so no other
 *    process keeps a dead publisher alive. While the lock cannot be taken
 *    (the directory is full or gone), nothing is published: a segment
 *    without a held lock would be folded by a gatherer as a dead process
 *    and then counted again.
 * What a writer's death leaves. Killed before the rename: the previous
 * .seg, whole, and a .tmp the gatherer ignores and cleans; killed after
 * it: the new .seg. Either way the lock is gone, so a gatherer folds the
 * last published state: a SIGKILL loses what was recorded since the last
 * publish, at most one interval. Disk full, read-only or removed
 * directory: the .tmp is unlinked, the failure counted
 * (TTFT_COUNTER_PUBLISH_FAILED) and said once on stderr; recording goes
 * on and the next publish tries again.
 *
 * No fsync: the directory is expected on tmpfs, where fsync is a no-op,
 * and the state only has to outlive the process, not the machine (a
 * reboot ends every publisher anyway); fsync on a disk-backed directory
 * would put a disk flush in every interval for no reader's benefit.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef TTFT_HAVE_PTHREADS
#include <pthread.h>
#endif

#include "common/segment.h"
#include "record/publish.h"

#ifndef F_OFD_SETLK
#define F_OFD_SETLK 37 /* Linux 3.15; older C libraries lack the name */
#endif

struct ttft__pub {
  ttft_registry *r;
  struct ttft__pub *next;       /* g_pubs, under g_pubs_mu                  */
  uint32_t interval_ms;         /* 0: no thread                             */
  int name_given;               /* process_name set (else "pid-<pid>")      */
  char name[TTFT__SEG_NAME_MAX];
  ttft__seg_id id;
  uint64_t seq;                 /* publishes of this identity so far        */
  int lock_fd;                  /* -1 while no lock is held                 */
  int final;                    /* a FINAL segment was written: only FINAL
                                   ones may follow                          */
  int said;                     /* the failure was said on stderr           */
  int broken;                   /* a fork child without its baseline: it
                                   cannot tell its own counts, publishes none */
  ttft_snapshot *baseline;      /* a fork child: the state it inherited     */
  unsigned char *buf;           /* header + payload, reused                 */
  size_t cap;
#ifdef TTFT_HAVE_PTHREADS
  pthread_mutex_t mu;           /* serialises publishes; guards the fields  */
  pthread_cond_t cond;          /* wakes the thread to stop                 */
  pthread_t thread;
  int running, stop;
#endif
  char dir[4096];
  char path_seg[4096 + TTFT__SEG_FILE_MAX], path_tmp[4096 + TTFT__SEG_FILE_MAX],
      path_lock[4096 + TTFT__SEG_FILE_MAX];
};

#ifdef TTFT_HAVE_PTHREADS
static pthread_mutex_t g_pubs_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;
#define PUB_LOCK(p) pthread_mutex_lock(&(p)->mu)
#define PUB_UNLOCK(p) pthread_mutex_unlock(&(p)->mu)
#define LIST_LOCK() pthread_mutex_lock(&g_pubs_mu)
#define LIST_UNLOCK() pthread_mutex_unlock(&g_pubs_mu)
#else
static int g_exit_installed;
#define PUB_LOCK(p) ((void)(p))
#define PUB_UNLOCK(p) ((void)(p))
#define LIST_LOCK() ((void)0)
#define LIST_UNLOCK() ((void)0)
#endif
static struct ttft__pub *g_pubs; /* every live publisher of this process */

/* ------------------------------------------------------------ identity */
static void identity_new(struct ttft__pub *p) {
  ttft__seg_self(&p->id);
  if (!p->name_given) snprintf(p->name, sizeof p->name, "pid-%llu", (unsigned long long)p->id.pid);
  char f[TTFT__SEG_FILE_MAX];
  ttft__seg_file(&p->id, "seg", f);
  snprintf(p->path_seg, sizeof p->path_seg, "%s/%s", p->dir, f);
  ttft__seg_file(&p->id, "tmp", f);
  snprintf(p->path_tmp, sizeof p->path_tmp, "%s/%s", p->dir, f);
  ttft__seg_file(&p->id, "lock", f);
  snprintf(p->path_lock, sizeof p->path_lock, "%s/%s", p->dir, f);
  p->seq = 0;
  p->final = 0;
}

/* Create the lock file and take its OFD write lock. 0 or an errno. */
static int lock_take(struct ttft__pub *p) {
  int fd = open(p->path_lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return errno;
  struct flock fl;
  memset(&fl, 0, sizeof fl); /* l_pid must be 0 for an OFD lock */
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  if (fcntl(fd, F_OFD_SETLK, &fl) != 0) {
    int e = errno;
    close(fd);
    return e;
  }
  p->lock_fd = fd;
  return 0;
}

/* -------------------------------------------------------------- failure */
/* registry-wide, class 0, through the shared shard: its counters take
 * atomic adds from any thread (registry.h) */
static void count_failure(ttft_registry *r) {
  ttft__shard *sh = &r->shards[r->nshards - 1];
  /* acquire: class 0's record was published at creation */
  ttft__crec *cr = atomic_load_explicit(&sh->cls[0], memory_order_acquire);
  atomic_fetch_add_explicit(&cr->ctr[TTFT_COUNTER_PUBLISH_FAILED], 1, memory_order_relaxed);
  /* relaxed: snapshots read the shard from now on (as ttft__shard_for_call) */
  if (!TTFT__LD(&sh->used)) TTFT__ST(&sh->used, 1);
}

static int publish_failed(struct ttft__pub *p, int e) {
  count_failure(p->r);
  if (!p->said) {
    p->said = 1;
    fprintf(stderr,
            "libttft: publishing to %s failed: %s; recording goes on (%spublish_failures_total "
            "counts it)\n",
            p->dir, strerror(e), p->r->meta.ns);
  }
  return TTFT_EIO;
}

/* -------------------------------------------------------------- writing */
static int write_all(int fd, const unsigned char *b, size_t n) {
  while (n) {
    ssize_t k = write(fd, b, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (k == 0) return EIO;
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

/* Write n bytes of p->buf to the .tmp file and rename it over the .seg.
 * 0 or an errno; on failure no .tmp is left. SIGXFSZ is blocked around
 * the writes, so a file-size limit (RLIMIT_FSIZE) fails one write with
 * EFBIG instead of killing the process; a SIGXFSZ that write raised is
 * taken back before the mask is restored (the publisher thread blocks
 * every signal anyway; this covers ttft_publish on a host thread). */
static int file_write(struct ttft__pub *p, size_t n) {
  sigset_t xfsz, old, pend;
  sigemptyset(&xfsz);
  sigaddset(&xfsz, SIGXFSZ);
#ifdef TTFT_HAVE_PTHREADS
  pthread_sigmask(SIG_BLOCK, &xfsz, &old);
#else
  sigprocmask(SIG_BLOCK, &xfsz, &old);
#endif
  int was_pending = sigpending(&pend) == 0 && sigismember(&pend, SIGXFSZ);
  int e = 0;
  int fd = open(p->path_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) e = errno;
  else {
    e = write_all(fd, p->buf, n);
    if (close(fd) != 0 && !e && errno != EINTR) e = errno;
    if (!e && rename(p->path_tmp, p->path_seg) != 0) e = errno;
    if (e) unlink(p->path_tmp);
  }
  if (e == EFBIG && !was_pending && sigpending(&pend) == 0 && sigismember(&pend, SIGXFSZ)) {
    const struct timespec zero = {0, 0};
    (void)sigtimedwait(&xfsz, NULL, &zero);
  }
#ifdef TTFT_HAVE_PTHREADS
  pthread_sigmask(SIG_SETMASK, &old, NULL);
#else
  sigprocmask(SIG_SETMASK, &old, NULL);
#endif
  return e;
}

/* The state to publish: the registry's, or for a fork child what it
 * recorded since the fork (its baseline subtracted). */
static ttft_snapshot *state_take(struct ttft__pub *p, int *rc) {
  ttft_snapshot *s = ttft_snapshot_take(p->r);
  *rc = s ? TTFT_OK : TTFT_ENOMEM;
  if (!s || !p->baseline) return s;
  ttft_snapshot *d = ttft_snapshot_delta(s, p->baseline, rc);
  ttft_snapshot_free(s);
  return d;
}

/* One publish; the caller holds p->mu. */
static int publish_locked(struct ttft__pub *p, int final) {
  if (p->final && !final) return TTFT_OK; /* the process said its last word */
  if (p->broken) return TTFT_ENOMEM;
  if (p->lock_fd < 0) {
    int e = lock_take(p);
    if (e) return publish_failed(p, e);
  }
  int rc;
  ttft_snapshot *s = state_take(p, &rc);
  if (!s) return rc;
  long n = -1;
  for (int tries = 0; tries < 2; tries++) {
    size_t room = p->cap > TTFT__SEG_HDR_BYTES ? p->cap - TTFT__SEG_HDR_BYTES : 0;
    n = ttft_snapshot_encode(s, room ? p->buf + TTFT__SEG_HDR_BYTES : NULL, room);
    if (n < 0 || (size_t)n <= room) break;
    /* grow with room to spare: the next publishes reuse it */
    size_t cap = TTFT__SEG_HDR_BYTES + (size_t)n + (size_t)n / 4 + 4096;
    unsigned char *b = ttft__alloc(&p->r->alloc, cap);
    if (!b) {
      n = TTFT_ENOMEM;
      break;
    }
    ttft__free(&p->r->alloc, p->buf);
    p->buf = b;
    p->cap = cap;
  }
  ttft_snapshot_free(s);
  if (n < 0) return (int)n;
  if ((size_t)n > TTFT__SEG_MAX_PAYLOAD) return publish_failed(p, EFBIG);
  ttft__seg_hdr h;
  memset(&h, 0, sizeof h);
  h.id = p->id;
  h.seq = p->seq + 1;
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
    h.unix_ns = (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
  h.uid = (uint32_t)geteuid();
  h.flags = (p->name_given ? 0u : TTFT__SEG_F_DEFAULT_NAME) | (final ? TTFT__SEG_F_FINAL : 0u);
  ttft__strlcpy(h.name, p->name, sizeof h.name);
  h.payload_len = (uint64_t)n;
  h.payload_hash = ttft__fnv64(TTFT__FNV64_INIT, p->buf + TTFT__SEG_HDR_BYTES, (size_t)n);
  ttft__seg_hdr_put(&h, p->buf);
  int e = file_write(p, TTFT__SEG_HDR_BYTES + (size_t)n);
  if (e) return publish_failed(p, e);
  p->seq = h.seq;
  if (final) p->final = 1;
  return TTFT_OK;
}

/* ------------------------------------------------------------- thread */
#ifdef TTFT_HAVE_PTHREADS
/* the thread's timed wait runs on CLOCK_MONOTONIC: a wall-clock step
 * neither stalls nor rushes the publishes */
static void cond_init(struct ttft__pub *p) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->cond, &ca);
  pthread_condattr_destroy(&ca);
}

static void *pub_main(void *arg) {
  struct ttft__pub *p = arg;
  PUB_LOCK(p);
  while (!p->stop) {
    struct timespec at;
    clock_gettime(CLOCK_MONOTONIC, &at);
    at.tv_sec += (time_t)(p->interval_ms / 1000);
    at.tv_nsec += (long)(p->interval_ms % 1000) * 1000000L;
    if (at.tv_nsec >= 1000000000L) at.tv_sec++, at.tv_nsec -= 1000000000L;
    int w = 0;
    while (!p->stop && w != ETIMEDOUT) w = pthread_cond_timedwait(&p->cond, &p->mu, &at);
    if (p->stop) break;
    (void)publish_locked(p, 0);
  }
  PUB_UNLOCK(p);
  return NULL;
}

/* Start p's thread with every signal blocked: a host's handler never runs
 * on it, and SIGXFSZ (a file-size limit) becomes EFBIG. p->mu held or p
 * not yet shared. 0 or an errno (the registry then publishes at
 * ttft_publish, free and exit only). */
static int thread_start(struct ttft__pub *p) {
  if (!p->interval_ms) return 0;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  p->stop = 0;
  pthread_attr_t attr; /* musl's default stack is 128 KiB: at least TTFT__THREAD_STACK */
  int e = ttft__thread_attr(&attr);
  if (e == 0) {
    e = pthread_create(&p->thread, &attr, pub_main, p);
    pthread_attr_destroy(&attr);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  p->running = e == 0;
  return e;
}

static void thread_stop(struct ttft__pub *p) {
  PUB_LOCK(p);
  p->stop = 1;
  if (p->running) pthread_cond_signal(&p->cond);
  PUB_UNLOCK(p);
  if (p->running) pthread_join(p->thread, NULL);
  p->running = 0;
}
#endif

/* ------------------------------------------------------------ at exit */
/* Normal exit: every live publisher's last word, flagged FINAL. The
 * threads may still run; after this they publish nothing (p->final). The
 * locks go with the process. */
static void pub_at_exit(void) {
  int saved = errno;
  LIST_LOCK();
  for (struct ttft__pub *p = g_pubs; p; p = p->next) {
    PUB_LOCK(p);
    (void)publish_locked(p, 1);
    PUB_UNLOCK(p);
  }
  LIST_UNLOCK();
  errno = saved;
}
#ifdef TTFT_HAVE_PTHREADS
static void exit_install(void) { atexit(pub_at_exit); }
#endif

/* -------------------------------------------------------- start / stop */
int ttft__pub_start(ttft_registry *r, const ttft_config *c) {
  int saved = errno;
  struct ttft__pub *p = ttft__alloc(&r->alloc, sizeof *p);
  if (!p) return TTFT_ENOMEM;
  p->r = r;
  p->lock_fd = -1;
  p->interval_ms = c->publish_interval_ms;
  ttft__strlcpy(p->dir, c->shared_dir, sizeof p->dir);
  if (c->process_name) {
    p->name_given = 1;
    ttft__strlcpy(p->name, c->process_name, sizeof p->name);
  }
  identity_new(p);
#ifdef TTFT_HAVE_PTHREADS
  pthread_mutex_init(&p->mu, NULL);
  cond_init(p);
  pthread_once(&g_exit_once, exit_install);
#else
  if (!g_exit_installed) g_exit_installed = 1, atexit(pub_at_exit);
#endif
  int e = lock_take(p);
  if (e) (void)publish_failed(p, e); /* publishes retry it */
  else (void)publish_locked(p, 0);   /* p is not shared yet */
  r->pub = p;
  LIST_LOCK();
  p->next = g_pubs;
  g_pubs = p;
#ifdef TTFT_HAVE_PTHREADS
  (void)thread_start(p); /* without it: ttft_publish, free and exit publish */
#endif
  LIST_UNLOCK();
  errno = saved;
  return TTFT_OK;
}

void ttft__pub_stop(ttft_registry *r) {
  struct ttft__pub *p = r->pub;
  if (!p) return;
  int saved = errno;
  LIST_LOCK();
  for (struct ttft__pub **q = &g_pubs; *q; q = &(*q)->next)
    if (*q == p) {
      *q = p->next;
      break;
    }
  LIST_UNLOCK();
#ifdef TTFT_HAVE_PTHREADS
  thread_stop(p);
#endif
  PUB_LOCK(p);
  (void)publish_locked(p, 1);
  if (p->lock_fd >= 0) close(p->lock_fd); /* the lock goes: gatherers fold us */
  p->lock_fd = -1;
  PUB_UNLOCK(p);
#ifdef TTFT_HAVE_PTHREADS
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cond);
#endif
  ttft_snapshot_free(p->baseline);
  ttft__free(&r->alloc, p->buf);
  ttft__free(&r->alloc, p);
  r->pub = NULL;
  errno = saved;
}

int ttft_publish(ttft_registry *r) {
  if (!r || !r->pub) return TTFT_EINVAL;
  int saved = errno;
  PUB_LOCK(r->pub);
  int rc = publish_locked(r->pub, 0);
  PUB_UNLOCK(r->pub);
  errno = saved;
  return rc;
}

/* ---------------------------------------------------------------- fork */
/* The mutexes are taken across fork(), so that no publish is half done
 * in the child's copy (the child then has no .tmp descriptor, no half
 * grown buffer). fork() waits at most for one publish in progress. */
void ttft__pub_atfork_prepare(void) {
#ifdef TTFT_HAVE_PTHREADS
  LIST_LOCK();
  for (struct ttft__pub *p = g_pubs; p; p = p->next) PUB_LOCK(p);
#endif
}

void ttft__pub_atfork_parent(void) {
#ifdef TTFT_HAVE_PTHREADS
  for (struct ttft__pub *p = g_pubs; p; p = p->next) PUB_UNLOCK(p);
  LIST_UNLOCK();
#endif
}

/* Empty r's live slowest lists: the child's lists hold its own requests
 * only (the parent's entries would otherwise keep the child's smaller
 * ones out of its top k). Only this thread exists; the fork handler runs
 * outside any hook of it. */
static void slowest_clear(ttft_registry *r) {
  const uint32_t k = r->slowest_k;
  if (!k) return;
  const uint32_t nc = TTFT__LD(&r->nclasses);
  for (uint32_t i = 0; i < r->nshards; i++)
    for (uint32_t c = 0; c < nc; c++) {
      ttft__crec *cr = TTFT__LD(&r->shards[i].cls[c]);
      if (!cr || !cr->slow) continue;
      for (size_t j = 0; j < (size_t)TTFT_SLOWEST_COUNT_ * k; j++) {
        TTFT__ST(&cr->slow_val[j], 0);
        TTFT__ST(&cr->slow[j].value, 0);
      }
      for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++) TTFT__ST(&cr->slow_floor[by], 0);
    }
}

/* In the child: each publisher becomes a new process's. Its inherited
 * lock descriptor is closed (the parent's descriptor refers to the same
 * open file description, so the parent keeps its lock), a new identity
 * takes a new lock, the live slowest lists are emptied and a baseline is
 * taken: what the child publishes is what it recorded after the fork
 * (ttft_snapshot_delta), never the parent's counts a second time.
 * Gauges are not subtracted: the child's in-flight gauge counts the
 * sequences it inherited live from the parent until the child ends them
 * (a pre-fork server forks before any request: none). */
void ttft__pub_atfork_child(void) {
#ifdef TTFT_HAVE_PTHREADS
  int saved = errno;
  for (struct ttft__pub *p = g_pubs; p; p = p->next) {
    PUB_UNLOCK(p); /* held by this thread since prepare */
    p->running = 0; /* the parent's thread does not exist here, and */
    cond_init(p);   /* its wait may have left the condvar mid-use */
    if (p->lock_fd >= 0) close(p->lock_fd);
    p->lock_fd = -1;
    p->said = 0;
    identity_new(p);
    slowest_clear(p->r);
    ttft_snapshot_free(p->baseline);
    p->baseline = ttft_snapshot_take(p->r);
    p->broken = p->baseline == NULL;
    int e = lock_take(p);
    if (e) (void)publish_failed(p, e);
    else (void)publish_locked(p, 0);
    (void)thread_start(p);
  }
  LIST_UNLOCK();
  errno = saved;
#endif
}
