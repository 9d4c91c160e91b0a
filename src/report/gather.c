/*
 * gather.c — ttft_gather_*: every process of a shared directory, merged
 * (include/ttft.h "many processes, one truth"; the directory's files are
 * described in common/segment.h). Layer: report.
 *
 * One take, under flock(ttft-fold.lock, LOCK_EX) (every gatherer, thread
 * or process, opens the lock file itself: flock locks belong to an open
 * file description, so two of them exclude each other in one process too):
 *   1. scan the directory: names ttft__seg_file_parse accepts, grouped by
 *      identity (pid, nonce); files not regular or not ours are skipped
 *      and counted (a symlink too), never opened through, never removed;
 *   2. liveness of each identity: F_OFD_GETLK on its .lock; a write lock
 *      held = alive; no lock or no lock file = dead. Checked BEFORE its
 *      segment is read: a dead process writes no more, so what is read of
 *      it is final;
 *   3. live segments are read and decoded; dead ones are folded into the
 *      archive (unless the archive's folded list already has them: a fold
 *      that crashed between the archive's rename and the unlinks); the
 *      new archive is written to ttft-archive.tmp and renamed in, THEN the
 *      dead .seg/.tmp/.lock are unlinked;
 *   4. the lock is released; the archive's entries and the live segments
 *      are merged outside it.
 * Because the scan, the reads and the fold all happen under the one lock,
 * no take sees a process both live and in the archive, or in neither: two
 * gatherers never double-count or lose a dead process. Publishers never
 * take this lock (a writer never waits for a reader).
 *
 * Leftovers without a segment (.lock and/or .tmp: a process that died
 * before its first publish, or in the middle of one) are removed when
 * dead and older than LEFTOVER_GRACE_S: a publisher creates its .lock
 * before locking it, and a just-created unlocked .lock must not be taken
 * for a dead process's.
 *
 * The archive, ttft-archive.seg (little-endian):
 *    0 magic "TTFTARC1"   8 u32 version (1)   12 u32 entries (<= 256)
 *   16 u64 exited (processes folded, ever; the sum of the entries')
 *   24 u32 folded ids (<= 65536)   28 u32 reserved (0)
 *   32 folded ids: u64 pid, u64 nonce each — identities whose fold is in
 *      the archive but whose files may still exist; pruned once gone
 *   then per entry, sorted by name, names distinct: char name[64]
 *      (NUL-padded, a process name or "exited"), u64 exited, u64 length,
 *      that many bytes of ttft_snapshot_encode: everything the exited
 *      processes of that name published, summed, with the gauges
 *      INFLIGHT, LIVE_STALLS, MEMORY (and PROCESSES) zeroed: they leave
 *      the view; counters, buckets, counts, sums and COARSE stay
 *   last 8 bytes: u64 FNV-1a-64 of every byte before them.
 * A process whose segment has TTFT__SEG_F_DEFAULT_NAME folds under
 * "exited", as does a 257th name. A corrupt archive is never overwritten:
 * it is renamed to ttft-archive.bad (replacing an older one, kept for a
 * post-mortem), counted in TTFT_COUNTER_SEGMENTS_SKIPPED, and a new
 * archive starts. An archive of a future version is left alone: nothing
 * is folded (dead segments are then read as they are, gauges zeroed, and
 * left in place) and it is counted once.
 *
 * A bad file is counted once per version: by (inode, size, mtime, ctime), in a
 * small ring of what this gatherer already counted.
 */
#include "report/gather.h"
#include "report/format.h" /* ttft__snapshot_merge_n */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(TTFT_HAVE_PTHREADS)
#include <pthread.h>
#endif

#define LEFTOVER_GRACE_S 10   /* a lock-only / tmp-only leftover this old   */
#define BAD_RING 1024u        /* bad file versions remembered               */
#define ARC_TMP "ttft-archive.tmp"
#define ARC_BAD "ttft-archive.bad"
#define MAX_PARTS 256u
#define PART_OTHER "other"    /* live names beyond MAX_PARTS                */

/* ---------------------------------------------------------------- bytes */

/* ------------------------------------------------------------- snapshots */
void ttft__snapshot_zero_live_gauges(ttft_snapshot *s) {
  s->gauge[TTFT_GAUGE_INFLIGHT] = 0;
  s->gauge[TTFT_GAUGE_LIVE_STALLS] = 0;
  s->gauge[TTFT_GAUGE_MEMORY] = 0;
  s->gauge[TTFT_GAUGE_PROCESSES] = 0;
}

/* s's data rebuilt into storage of its own: a merge with an empty
 * snapshot whose one class has s's class 0's name (so no class is added),
 * then what the merge does not keep as it was. */
static ttft_snapshot *copy_one(const ttft_snapshot *s) {
  ttft_snapshot *e = ttft__snapshot_new(1);
  if (!e) return NULL;
  memcpy(e->cls[0].name, s->cls[0].name, sizeof e->cls[0].name);
  e->t_start_ns = s->t_start_ns;
  e->t_end_ns = s->t_end_ns;
  ttft__snapshot_copy_meta(e, s);
  int err = 0;
  ttft_snapshot *c = ttft_snapshot_merge(s, e, &err);
  ttft_snapshot_free(e);
  if (!c) return NULL;
  c->registry_id = s->registry_id;
  c->t_start_ns = s->t_start_ns;
  c->t_end_ns = s->t_end_ns;
  memcpy(c->gauge, s->gauge, sizeof c->gauge);
  memcpy(c->all.ctr, s->all.ctr, sizeof c->all.ctr);
  return c;
}

ttft_snapshot *ttft__snapshot_copy(const ttft_snapshot *s) {
  if (!s) return NULL;
  ttft_snapshot *c = copy_one(s);
  if (!c || !s->nparts) return c;
  c->part = ttft__alloc(&c->alloc, s->nparts * sizeof *c->part);
  c->part_name = ttft__alloc(&c->alloc, s->nparts * sizeof *c->part_name);
  if (!c->part || !c->part_name) {
    ttft_snapshot_free(c);
    return NULL;
  }
  for (uint32_t i = 0; i < s->nparts; i++) {
    c->part[i] = copy_one(s->part[i]);
    if (!c->part[i]) {
      ttft_snapshot_free(c);
      return NULL;
    }
    c->nparts = i + 1;
    memcpy(c->part_name[i], s->part_name[i], sizeof c->part_name[i]);
  }
  return c;
}

/* ------------------------------------------------------------- segments */
int ttft__gather_read_segment(const void *buf, size_t n, const ttft__seg_id *expect, uint32_t uid,
                              ttft__seg_hdr *h, ttft_snapshot **out) {
  const unsigned char *payload = NULL;
  *out = NULL;
  int rc = ttft__seg_parse(buf, n, h, &payload);
  if (rc != TTFT_OK) return rc;
  if (expect && (h->id.pid != expect->pid || h->id.nonce != expect->nonce)) return TTFT_ECORRUPT;
  if (h->uid != uid) return TTFT_ECORRUPT;
  int err = 0;
  ttft_snapshot *s = ttft_snapshot_decode(payload, (size_t)h->payload_len, &err);
  if (!s) return err == TTFT_ENOMEM ? TTFT_ENOMEM : TTFT_ECORRUPT;
  s->gauge[TTFT_GAUGE_PROCESSES] = 0; /* ours to set */
  *out = s;
  return TTFT_OK;
}

/* -------------------------------------------------------------- archive */
void ttft__archive_init(ttft__archive *a) { memset(a, 0, sizeof *a); }

void ttft__archive_clear(ttft__archive *a) {
  for (uint32_t i = 0; i < a->n; i++) ttft_snapshot_free(a->e[i].snap);
  if (a->folded) {
    ttft_allocator al;
    ttft__allocator_current(&al);
    ttft__free(&al, a->folded);
  }
  ttft__archive_init(a);
}

static int folded_add(ttft__archive *a, uint64_t pid, uint64_t nonce) {
  if (a->nfolded == a->capfolded) {
    if (a->capfolded >= TTFT__ARC_MAX_FOLDED) return TTFT_ERANGE;
    uint32_t cap = a->capfolded ? a->capfolded * 2 : 16;
    if (cap > TTFT__ARC_MAX_FOLDED) cap = TTFT__ARC_MAX_FOLDED;
    ttft_allocator al;
    ttft__allocator_current(&al);
    ttft__arc_id *f = ttft__alloc(&al, cap * sizeof *f);
    if (!f) return TTFT_ENOMEM;
    if (a->nfolded) memcpy(f, a->folded, a->nfolded * sizeof *f);
    ttft__free(&al, a->folded);
    a->folded = f;
    a->capfolded = cap;
  }
  a->folded[a->nfolded].pid = pid;
  a->folded[a->nfolded].nonce = nonce;
  a->nfolded++;
  return TTFT_OK;
}

int ttft__archive_folded(const ttft__archive *a, uint64_t pid, uint64_t nonce) {
  for (uint32_t i = 0; i < a->nfolded; i++)
    if (a->folded[i].pid == pid && a->folded[i].nonce == nonce) return 1;
  return 0;
}

static int name_ok(const char *name) {
  return ttft__process_name_ok(name) || strcmp(name, TTFT__ARC_EXITED) == 0;
}

int ttft__archive_parse(const void *buf, size_t n, ttft__archive *a) {
  const unsigned char *p = buf;
  ttft__archive_init(a);
  if (!p || n < 40 || n > TTFT__ARC_MAX_BYTES) return TTFT_ECORRUPT;
  if (memcmp(p, TTFT__ARC_MAGIC, 8) != 0) return TTFT_ECORRUPT;
  if (ttft__fnv64(TTFT__FNV64_INIT, p, n - 8) != ttft__le64_get(p + n - 8)) return TTFT_ECORRUPT;
  uint32_t ver = ttft__le32_get(p + 8);
  if (ver > TTFT__ARC_VERSION) return TTFT_ENOTSUP;
  if (ver == 0) return TTFT_ECORRUPT;
  uint32_t nn = ttft__le32_get(p + 12), nf = ttft__le32_get(p + 24);
  uint64_t total = ttft__le64_get(p + 16);
  if (nn > TTFT__ARC_MAX_NAMES || nf > TTFT__ARC_MAX_FOLDED || ttft__le32_get(p + 28) != 0)
    return TTFT_ECORRUPT;
  size_t end = n - 8, off = 32;
  if ((size_t)nf * 16u > end - off) return TTFT_ECORRUPT;
  int rc = TTFT_OK;
  for (uint32_t i = 0; i < nf && rc == TTFT_OK; i++, off += 16) {
    uint64_t pid = ttft__le64_get(p + off), nonce = ttft__le64_get(p + off + 8);
    if (pid == 0 || pid > INT32_MAX || nonce == 0) rc = TTFT_ECORRUPT;
    else rc = folded_add(a, pid, nonce);
  }
  uint64_t sum = 0;
  for (uint32_t i = 0; i < nn && rc == TTFT_OK; i++) {
    if (end - off < TTFT__SEG_NAME_MAX + 16u) {
      rc = TTFT_ECORRUPT;
      break;
    }
    ttft__arc_entry *e = &a->e[i];
    memcpy(e->name, p + off, TTFT__SEG_NAME_MAX);
    if (e->name[TTFT__SEG_NAME_MAX - 1] != '\0' || !name_ok(e->name) ||
        (i > 0 && strcmp(a->e[i - 1].name, e->name) >= 0)) {
      rc = TTFT_ECORRUPT;
      break;
    }
    /* NUL padding only: one name has one encoding */
    size_t nl = strlen(e->name);
    for (size_t k = nl; k < TTFT__SEG_NAME_MAX; k++)
      if (p[off + k]) rc = TTFT_ECORRUPT;
    e->exited = ttft__le64_get(p + off + TTFT__SEG_NAME_MAX);
    uint64_t len = ttft__le64_get(p + off + TTFT__SEG_NAME_MAX + 8);
    off += TTFT__SEG_NAME_MAX + 16u;
    if (rc != TTFT_OK || e->exited == 0 || e->exited > UINT64_MAX - sum || len > end - off) {
      rc = TTFT_ECORRUPT;
      break;
    }
    sum += e->exited;
    int err = 0;
    e->snap = ttft_snapshot_decode(p + off, (size_t)len, &err);
    if (!e->snap) {
      rc = err == TTFT_ENOMEM ? TTFT_ENOMEM : TTFT_ECORRUPT;
      break;
    }
    ttft__snapshot_zero_live_gauges(e->snap);
    a->n = i + 1;
    off += (size_t)len;
  }
  if (rc == TTFT_OK && (off != end || sum != total)) rc = TTFT_ECORRUPT;
  if (rc != TTFT_OK) {
    ttft__archive_clear(a);
    return rc;
  }
  a->exited = total;
  return TTFT_OK;
}

long ttft__archive_encode(const ttft__archive *a, unsigned char **out) {
  *out = NULL;
  size_t len = 32 + (size_t)a->nfolded * 16u + 8;
  long el[TTFT__ARC_MAX_NAMES];
  for (uint32_t i = 0; i < a->n; i++) {
    el[i] = ttft_snapshot_encode(a->e[i].snap, NULL, 0);
    if (el[i] < 0) return el[i];
    len += TTFT__SEG_NAME_MAX + 16u + (size_t)el[i];
  }
  if (len > TTFT__ARC_MAX_BYTES || len > LONG_MAX) return TTFT_ERANGE;
  ttft_allocator al;
  ttft__allocator_current(&al);
  unsigned char *b = ttft__alloc(&al, len);
  if (!b) return TTFT_ENOMEM;
  memcpy(b, TTFT__ARC_MAGIC, 8);
  ttft__le32_put(b + 8, TTFT__ARC_VERSION);
  ttft__le32_put(b + 12, a->n);
  ttft__le64_put(b + 16, a->exited);
  ttft__le32_put(b + 24, a->nfolded);
  ttft__le32_put(b + 28, 0);
  size_t off = 32;
  for (uint32_t i = 0; i < a->nfolded; i++, off += 16) {
    ttft__le64_put(b + off, a->folded[i].pid);
    ttft__le64_put(b + off + 8, a->folded[i].nonce);
  }
  for (uint32_t i = 0; i < a->n; i++) {
    memcpy(b + off, a->e[i].name, strnlen(a->e[i].name, TTFT__SEG_NAME_MAX - 1)); /* zeroed pad */
    ttft__le64_put(b + off + TTFT__SEG_NAME_MAX, a->e[i].exited);
    ttft__le64_put(b + off + TTFT__SEG_NAME_MAX + 8, (uint64_t)el[i]);
    off += TTFT__SEG_NAME_MAX + 16u;
    if (ttft_snapshot_encode(a->e[i].snap, b + off, (size_t)el[i]) != el[i]) {
      ttft__free(&al, b);
      return TTFT_ENOMEM;
    }
    off += (size_t)el[i];
  }
  ttft__le64_put(b + off, ttft__fnv64(TTFT__FNV64_INIT, b, off));
  *out = b;
  return (long)len;
}

int ttft__archive_fold(ttft__archive *a, const char *name, const ttft_snapshot *s) {
  if (!name || !ttft__process_name_ok(name)) name = TTFT__ARC_EXITED;
  uint32_t i = 0;
  while (i < a->n && strcmp(a->e[i].name, name) < 0) i++;
  if (i == a->n || strcmp(a->e[i].name, name) != 0) {
    if (a->n == TTFT__ARC_MAX_NAMES) /* full: "exited" takes it (one slot is kept for it) */
      return ttft__archive_fold(a, NULL, s) == TTFT_OK ? TTFT_OK : TTFT_ERANGE;
    int has_exited = 0;
    for (uint32_t k = 0; k < a->n; k++) has_exited |= strcmp(a->e[k].name, TTFT__ARC_EXITED) == 0;
    if (strcmp(name, TTFT__ARC_EXITED) != 0 && a->n + (has_exited ? 0u : 1u) >= TTFT__ARC_MAX_NAMES)
      return ttft__archive_fold(a, NULL, s);
    memmove(&a->e[i + 1], &a->e[i], (a->n - i) * sizeof a->e[0]);
    memset(&a->e[i], 0, sizeof a->e[i]);
    ttft__strlcpy(a->e[i].name, name, TTFT__SEG_NAME_MAX);
    a->n++;
  }
  ttft__arc_entry *e = &a->e[i];
  int err = 0;
  ttft_snapshot *m = e->snap ? ttft_snapshot_merge(e->snap, s, &err) : ttft__snapshot_copy(s);
  if (!m) {
    if (!e->snap) { /* undo the new entry */
      memmove(&a->e[i], &a->e[i + 1], (a->n - i - 1) * sizeof a->e[0]);
      a->n--;
    }
    return e->snap ? err : TTFT_ENOMEM;
  }
  ttft__snapshot_zero_live_gauges(m);
  ttft_snapshot_free(e->snap);
  e->snap = m;
  e->exited++;
  a->exited++;
  return TTFT_OK;
}

/* --------------------------------------------------------------- gather */
typedef struct bad_key {
  uint64_t ino, size, mtime_ns, ctime_ns;
} bad_key;

struct ttft_gather {
  ttft_allocator alloc;
  char dir[PATH_MAX];
  unsigned flags;
  uint32_t uid;
  uint64_t skipped;           /* bad file versions counted, ever         */
  bad_key bad[BAD_RING];
  uint32_t nbad, badnext;
#if defined(TTFT_HAVE_PTHREADS)
  pthread_mutex_t mu;
  pthread_cond_t cv;
#endif
  int busy;                   /* a take is merging                        */
  unsigned waiters;           /* calls waiting for that merge             */
  uint64_t gen;               /* merges finished                          */
  ttft_snapshot *last;        /* the latest merge (for those who waited)  */
  int last_errno;
};

static int path_of(const ttft_gather *g, const char *name, char *out, size_t cap) {
  int n = snprintf(out, cap, "%s/%s", g->dir, name);
  return n > 0 && (size_t)n < cap;
}

/* count st's file once per version */
static void count_bad(ttft_gather *g, const struct stat *st) {
  bad_key k = {(uint64_t)st->st_ino, (uint64_t)st->st_size,
               (uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec,
               (uint64_t)st->st_ctim.tv_sec * 1000000000ull + (uint64_t)st->st_ctim.tv_nsec};
  for (uint32_t i = 0; i < g->nbad; i++)
    if (g->bad[i].ino == k.ino && g->bad[i].size == k.size && g->bad[i].mtime_ns == k.mtime_ns &&
        g->bad[i].ctime_ns == k.ctime_ns)
      return;
  g->bad[g->badnext] = k;
  g->badnext = (g->badnext + 1) % BAD_RING;
  if (g->nbad < BAD_RING) g->nbad++;
  g->skipped++;
}

/* Read the regular file name of ours whole (at most max bytes) into a
 * buffer of the current allocator. 0 and *buf and *n; -1 when it is missing
 * (ENOENT: folded or replaced away, not bad); 1 when it is bad (counted). */
static int read_file(ttft_gather *g, const char *name, size_t max, unsigned char **buf, size_t *n) {
  char path[PATH_MAX];
  *buf = NULL;
  *n = 0;
  if (!path_of(g, name, path, sizeof path)) return -1;
  struct stat st;
  if (lstat(path, &st) != 0) return -1;
  if (!S_ISREG(st.st_mode) || st.st_uid != g->uid) {
    count_bad(g, &st);
    return 1;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return errno == ENOENT ? -1 : (count_bad(g, &st), 1);
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != g->uid ||
      (uint64_t)st.st_size > (uint64_t)max) {
    close(fd);
    count_bad(g, &st);
    return 1;
  }
  size_t len = (size_t)st.st_size;
  unsigned char *b = ttft__alloc(&g->alloc, len ? len : 1);
  if (!b) {
    close(fd);
    return -2;
  }
  size_t got = 0;
  while (got < len) {
    ssize_t r = read(fd, b + got, len - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (got != len) {
    ttft__free(&g->alloc, b);
    count_bad(g, &st);
    return 1;
  }
  *buf = b;
  *n = len;
  return 0;
}

static void stat_of(ttft_gather *g, const char *name, struct stat *st) {
  char path[PATH_MAX];
  memset(st, 0, sizeof *st);
  if (path_of(g, name, path, sizeof path)) (void)lstat(path, st);
}

/* 1 when a process holds the write lock of id's lock file, else 0 */
static int alive(ttft_gather *g, const ttft__seg_id *id) {
  char name[TTFT__SEG_FILE_MAX], path[PATH_MAX];
  ttft__seg_file(id, "lock", name);
  if (!path_of(g, name, path, sizeof path)) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return 0;
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 0;
  int live = 0;
#if defined(F_OFD_GETLK)
  if (fcntl(fd, F_OFD_GETLK, &fl) == 0) live = fl.l_type != F_UNLCK;
#else
  if (fcntl(fd, F_GETLK, &fl) == 0) live = fl.l_type != F_UNLCK;
#endif
  close(fd);
  return live;
}

/* one identity found in the directory */
typedef struct proc {
  ttft__seg_id id;
  unsigned has; /* 1 seg, 2 lock, 4 tmp */
  int live;
  time_t newest; /* ctime of its newest file */
  char name[TTFT__SEG_NAME_MAX];
  ttft_snapshot *snap;
} proc;

typedef struct scan {
  proc *p;
  uint32_t n, cap;
} scan;

static proc *scan_find(ttft_gather *g, scan *sc, const ttft__seg_id *id) {
  for (uint32_t i = 0; i < sc->n; i++)
    if (sc->p[i].id.pid == id->pid && sc->p[i].id.nonce == id->nonce) return &sc->p[i];
  if (sc->n == sc->cap) {
    uint32_t cap = sc->cap ? sc->cap * 2 : 64;
    proc *np = ttft__alloc(&g->alloc, cap * sizeof *np);
    if (!np) return NULL;
    if (sc->n) memcpy(np, sc->p, sc->n * sizeof *np);
    ttft__free(&g->alloc, sc->p);
    sc->p = np;
    sc->cap = cap;
  }
  proc *p = &sc->p[sc->n++];
  memset(p, 0, sizeof *p);
  p->id = *id;
  return p;
}

static void scan_free(ttft_gather *g, scan *sc) {
  for (uint32_t i = 0; i < sc->n; i++) ttft_snapshot_free(sc->p[i].snap);
  ttft__free(&g->alloc, sc->p);
  memset(sc, 0, sizeof *sc);
}

/* List the directory's segment files by identity. Files not regular or
 * not ours are counted and left out. TTFT_OK, TTFT_ENOMEM, TTFT_EIO (the
 * directory is gone: errno kept). */
static int scan_dir(ttft_gather *g, scan *sc) {
  DIR *d = opendir(g->dir);
  if (!d) return TTFT_EIO;
  int rc = TTFT_OK;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    ttft__seg_id id;
    const char *suffix;
    if (!ttft__seg_file_parse(de->d_name, &id, &suffix)) continue;
    struct stat st;
    stat_of(g, de->d_name, &st);
    if (st.st_mode == 0) continue; /* gone meanwhile */
    if (!S_ISREG(st.st_mode) || st.st_uid != g->uid) {
      count_bad(g, &st);
      continue;
    }
    proc *p = scan_find(g, sc, &id);
    if (!p) {
      rc = TTFT_ENOMEM;
      break;
    }
    p->has |= suffix[0] == 's' ? 1u : suffix[0] == 'l' ? 2u : 4u;
    if (st.st_ctim.tv_sec > p->newest) p->newest = st.st_ctim.tv_sec;
  }
  closedir(d);
  return rc;
}

/* Read id's segment. TTFT_OK and p->snap / p->name; 1 when missing or
 * bad (counted); TTFT_ENOMEM. */
static int read_proc(ttft_gather *g, proc *p, uint32_t *flags) {
  char name[TTFT__SEG_FILE_MAX];
  ttft__seg_file(&p->id, "seg", name);
  unsigned char *b;
  size_t n;
  int r = read_file(g, name, TTFT__SEG_HDR_BYTES + TTFT__SEG_MAX_PAYLOAD, &b, &n);
  if (r == -2) return TTFT_ENOMEM;
  if (r != 0) return 1;
  ttft__seg_hdr h;
  int rc = ttft__gather_read_segment(b, n, &p->id, g->uid, &h, &p->snap);
  ttft__free(&g->alloc, b);
  if (rc == TTFT_ENOMEM) return TTFT_ENOMEM;
  if (rc != TTFT_OK) {
    struct stat st;
    stat_of(g, name, &st);
    count_bad(g, &st);
    return 1;
  }
  memcpy(p->name, h.name, sizeof p->name);
  if (flags) *flags = h.flags;
  return TTFT_OK;
}

static void unlink_proc(ttft_gather *g, const proc *p) {
  static const char *const order[3] = {"seg", "tmp", "lock"}; /* the lock last */
  for (int k = 0; k < 3; k++) {
    char name[TTFT__SEG_FILE_MAX], path[PATH_MAX];
    ttft__seg_file(&p->id, order[k], name);
    if (path_of(g, name, path, sizeof path)) (void)unlink(path);
  }
}

/* Load the archive into a. TTFT_OK (empty when there is none, or it was
 * corrupt and moved aside), TTFT_ENOTSUP (a future version: left alone),
 * TTFT_ENOMEM. */
static int archive_load(ttft_gather *g, ttft__archive *a) {
  ttft__archive_init(a);
  unsigned char *b;
  size_t n;
  int r = read_file(g, TTFT__SEG_ARCHIVE, TTFT__ARC_MAX_BYTES, &b, &n);
  if (r == -2) return TTFT_ENOMEM;
  if (r == -1) return TTFT_OK;
  int rc = r == 0 ? ttft__archive_parse(b, n, a) : TTFT_ECORRUPT;
  ttft__free(&g->alloc, b);
  if (rc == TTFT_OK || rc == TTFT_ENOMEM) return rc;
  struct stat st;
  stat_of(g, TTFT__SEG_ARCHIVE, &st);
  if (r == 0) count_bad(g, &st); /* read_file counted the other kinds */
  if (rc == TTFT_ENOTSUP) return rc;
  char from[PATH_MAX], to[PATH_MAX];
  if (path_of(g, TTFT__SEG_ARCHIVE, from, sizeof from) && path_of(g, ARC_BAD, to, sizeof to) &&
      rename(from, to) != 0)
    return TTFT_ENOTSUP; /* cannot move it aside: do not write over it */
  return TTFT_OK;
}

static int archive_store(ttft_gather *g, const ttft__archive *a) {
  unsigned char *b;
  long n = ttft__archive_encode(a, &b);
  if (n < 0) return (int)n;
  char tmp[PATH_MAX], dst[PATH_MAX];
  int rc = TTFT_EIO;
  if (path_of(g, ARC_TMP, tmp, sizeof tmp) && path_of(g, TTFT__SEG_ARCHIVE, dst, sizeof dst)) {
    (void)unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
      size_t put = 0;
      while (put < (size_t)n) {
        ssize_t w = write(fd, b + put, (size_t)n - put);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        put += (size_t)w;
      }
      int ok = put == (size_t)n && fdatasync(fd) == 0;
      ok = (close(fd) == 0) && ok;
      if (ok && rename(tmp, dst) == 0) rc = TTFT_OK;
      else (void)unlink(tmp);
    }
  }
  ttft__free(&g->alloc, b);
  return rc;
}

/* The locked part of a take: scan, liveness, live reads, the fold. On
 * TTFT_OK sc holds the live processes with their snapshots (and, when the
 * archive could not take them, dead ones read as they are) and a the
 * archive as it now is. */
static int take_locked(ttft_gather *g, scan *sc, ttft__archive *a) {
  int rc = scan_dir(g, sc);
  if (rc != TTFT_OK) return rc;
  uint32_t ndead = 0;
  for (uint32_t i = 0; i < sc->n; i++) {
    proc *p = &sc->p[i];
    p->live = alive(g, &p->id); /* before the read: a dead one's file is final */
    if (!p->live) {
      ndead++;
      continue;
    }
    if (!(p->has & 1u)) continue;
    rc = read_proc(g, p, NULL);
    if (rc == TTFT_ENOMEM) return rc;
  }
  int arc = archive_load(g, a);
  if (arc == TTFT_ENOMEM) return arc;
  int can_fold = arc == TTFT_OK;
  if (!ndead) return TTFT_OK;

  time_t now = time(NULL);
  int changed = 0;
  /* which dead identities to unlink after the archive is in: 1 */
  for (uint32_t i = 0; i < sc->n; i++) {
    proc *p = &sc->p[i];
    if (p->live) continue;
    if (ttft__archive_folded(a, p->id.pid, p->id.nonce)) {
      p->live = -1; /* folded before: only unlink */
      continue;
    }
    if (!(p->has & 1u)) { /* a leftover without a segment */
      if (can_fold && now - p->newest > LEFTOVER_GRACE_S) p->live = -1;
      continue;
    }
    uint32_t fl = 0;
    rc = read_proc(g, p, &fl);
    if (rc == TTFT_ENOMEM) return rc;
    if (rc != TTFT_OK) { /* bad (counted): nothing to fold; its files go */
      if (can_fold) p->live = -1;
      continue;
    }
    ttft__snapshot_zero_live_gauges(p->snap);
    if (!can_fold) continue; /* read as it is, left in place */
    int frc = ttft__archive_fold(a, (fl & TTFT__SEG_F_DEFAULT_NAME) ? NULL : p->name, p->snap);
    if (frc == TTFT_OK) frc = folded_add(a, p->id.pid, p->id.nonce);
    if (frc == TTFT_ENOMEM) return frc;
    if (frc != TTFT_OK) continue; /* cannot fold (a sum overflows): keep reading it */
    ttft_snapshot_free(p->snap);
    p->snap = NULL;
    p->live = -1;
    changed = 1;
  }
  if (!can_fold) return TTFT_OK;
  /* prune folded identities whose files are gone (no file of theirs seen) */
  uint32_t keep = 0;
  for (uint32_t k = 0; k < a->nfolded; k++) {
    int seen = 0;
    for (uint32_t i = 0; i < sc->n && !seen; i++)
      seen = sc->p[i].id.pid == a->folded[k].pid && sc->p[i].id.nonce == a->folded[k].nonce;
    if (seen) a->folded[keep++] = a->folded[k];
  }
  if (keep != a->nfolded) changed = 1;
  a->nfolded = keep;
  if (changed && archive_store(g, a) != TTFT_OK) {
    /* the archive could not be written: nothing may be unlinked; what was
     * folded into a is read from a this time and folded again next time */
    for (uint32_t i = 0; i < sc->n; i++)
      if (sc->p[i].live == -1 && (sc->p[i].has & 1u)) sc->p[i].live = -2;
    return TTFT_OK;
  }
  for (uint32_t i = 0; i < sc->n; i++)
    if (sc->p[i].live == -1) unlink_proc(g, &sc->p[i]);
  return TTFT_OK;
}

/* *out = the merge of v[0..n) (n >= 1), in one pass
 * (ttft__snapshot_merge_n). One snapshot is taken as it is when the
 * caller owns it (own), else copied: what a chain of two-way merges
 * starting from it gives. TTFT_OK or an error. */
static int merge_all(ttft_snapshot **out, const ttft_snapshot *const *v, size_t n, int own) {
  int err = TTFT_OK;
  if (n == 1) *out = own ? (ttft_snapshot *)v[0] : ttft__snapshot_copy(v[0]);
  else *out = ttft__snapshot_merge_n(v, n, &err);
  return *out ? TTFT_OK : (err != TTFT_OK ? err : TTFT_ENOMEM);
}

typedef struct item {
  const char *name;
  uint64_t pid, nonce; /* 0 for an archive entry: first of its name */
  ttft_snapshot *snap;
  int own;
  uint64_t exited;
  uint32_t live;
} item;

static int item_cmp(const void *x, const void *y) {
  const item *a = x, *b = y;
  int c = strcmp(a->name, b->name);
  if (c) return c;
  if (a->pid != b->pid) return a->pid < b->pid ? -1 : 1;
  return a->nonce < b->nonce ? -1 : a->nonce > b->nonce;
}

static void set_gather_numbers(ttft_snapshot *s, uint64_t live, uint64_t skipped, uint64_t exited) {
  s->gauge[TTFT_GAUGE_PROCESSES] = live;
  static const ttft_counter ks[2] = {TTFT_COUNTER_SEGMENTS_SKIPPED, TTFT_COUNTER_PROCESSES_EXITED};
  const uint64_t v[2] = {skipped, exited};
  for (int k = 0; k < 2; k++) {
    for (uint32_t c = 0; c < s->nclasses; c++) s->cls[c].ctr[ks[k]] = 0;
    s->cls[0].ctr[ks[k]] = v[k];
    s->all.ctr[ks[k]] = v[k];
  }
}

static ttft_snapshot *empty_view(void) {
  ttft_registry *r = ttft_registry_new(NULL);
  if (!r) return NULL;
  ttft_snapshot *s = ttft_snapshot_take(r);
  ttft_registry_free(r);
  if (!s) return NULL;
  s->registry_id = 0;
  memset(s->gauge, 0, sizeof s->gauge);
  return s;
}

/* The merged view (and its parts) of what take_locked found. */
static ttft_snapshot *build_view(ttft_gather *g, scan *sc, ttft__archive *a, int *err) {
  uint32_t n = a->n;
  uint64_t live = 0;
  for (uint32_t i = 0; i < sc->n; i++)
    if (sc->p[i].snap) n++;
  item *it = n ? ttft__alloc(&g->alloc, n * sizeof *it) : NULL;
  if (n && !it) {
    *err = TTFT_ENOMEM;
    return NULL;
  }
  uint32_t k = 0;
  for (uint32_t i = 0; i < a->n; i++)
    it[k++] = (item){a->e[i].name, 0, 0, a->e[i].snap, 0, a->e[i].exited, 0};
  for (uint32_t i = 0; i < sc->n; i++) {
    proc *p = &sc->p[i];
    if (!p->snap) continue;
    int is_live = p->live == 1;
    live += (uint64_t)is_live;
    /* a dead one read as it is (not folded) stands under "exited" unless named */
    it[k++] = (item){p->name, p->id.pid, p->id.nonce, p->snap, 1, 0, (uint32_t)is_live};
    p->snap = NULL; /* the item owns it */
  }
  if (n) qsort(it, n, sizeof *it, item_cmp);
  int rc = TTFT_OK;
  ttft_snapshot *view = NULL;
  ttft_snapshot *parts[MAX_PARTS];
  char (*pname)[TTFT__NAME_MAX] = NULL;
  uint32_t np = 0;
  uint64_t pexited[MAX_PARTS], plive[MAX_PARTS];
  /* the sources of one merge, in the order the items are sorted */
  const ttft_snapshot **src = n ? ttft__alloc(&g->alloc, n * sizeof *src) : NULL;
  if (n && !src) rc = TTFT_ENOMEM;
  if ((g->flags & TTFT_GATHER_BY_PROCESS) && rc == TTFT_OK) {
    pname = ttft__alloc(&g->alloc, MAX_PARTS * sizeof *pname);
    uint32_t *pof = ttft__alloc(&g->alloc, (n ? n : 1) * sizeof *pof); /* part of item i */
    if (!pname || !pof) rc = TTFT_ENOMEM;
    for (uint32_t i = 0; i < n && rc == TTFT_OK; i++) {
      const char *nm = it[i].name;
      uint32_t j = np;
      if (np && strcmp(pname[np - 1], nm) == 0) j = np - 1;
      else if (np == MAX_PARTS) { /* names beyond: one part "other" */
        j = np - 1;
        ttft__strlcpy(pname[j], PART_OTHER, TTFT__NAME_MAX);
      } else {
        parts[np] = NULL;
        pexited[np] = plive[np] = 0;
        ttft__strlcpy(pname[np++], nm, TTFT__NAME_MAX);
      }
      pexited[j] += it[i].exited;
      plive[j] += it[i].live;
      pof[i] = j;
    }
    /* each part: its items merged at once (those of "other" are not all
     * adjacent, the others are) */
    for (uint32_t j = 0; j < np && rc == TTFT_OK; j++) {
      uint32_t m = 0, last = 0;
      for (uint32_t i = 0; i < n; i++)
        if (pof[i] == j) {
          src[m++] = it[i].snap;
          last = i;
        }
      rc = merge_all(&parts[j], src, m, m == 1 && it[last].own);
      if (rc == TTFT_OK && m == 1) it[last].own = 0; /* the part took it */
    }
    for (uint32_t j = 0; j < np && rc == TTFT_OK; j++) set_gather_numbers(parts[j], plive[j], 0, pexited[j]);
    if (rc == TTFT_OK && np) rc = merge_all(&view, (const ttft_snapshot *const *)parts, np, 0);
    ttft__free(&g->alloc, pof);
  } else if (rc == TTFT_OK && n) {
    for (uint32_t i = 0; i < n; i++) src[i] = it[i].snap;
    rc = merge_all(&view, src, n, it[0].own && n == 1);
    if (rc == TTFT_OK && n == 1) it[0].own = 0;
  }
  ttft__free(&g->alloc, (void *)src);
  for (uint32_t i = 0; i < n; i++)
    if (it[i].own) ttft_snapshot_free(it[i].snap);
  ttft__free(&g->alloc, it);
  if (rc == TTFT_OK && !view) {
    view = empty_view();
    if (!view) rc = TTFT_ENOMEM;
  }
  if (rc == TTFT_OK && np) {
    view->part = ttft__alloc(&view->alloc, np * sizeof *view->part);
    view->part_name = ttft__alloc(&view->alloc, np * sizeof *view->part_name);
    if (!view->part || !view->part_name) rc = TTFT_ENOMEM;
  }
  if (rc != TTFT_OK) {
    for (uint32_t j = 0; j < np; j++) ttft_snapshot_free(parts[j]);
    ttft__free(&g->alloc, pname);
    ttft_snapshot_free(view);
    *err = rc;
    return NULL;
  }
  for (uint32_t j = 0; j < np; j++) {
    view->part[j] = parts[j];
    memcpy(view->part_name[j], pname[j], TTFT__NAME_MAX);
  }
  view->nparts = np;
  ttft__free(&g->alloc, pname);
  view->registry_id = 0;
  set_gather_numbers(view, live, g->skipped, a->exited);
  return view;
}

static int errno_of(int rc) { return rc == TTFT_ENOMEM ? ENOMEM : rc == TTFT_EIO ? ENOENT : EIO; }

/* one merge: the lock, the locked part, the view */
static ttft_snapshot *take_once(ttft_gather *g, int *eno) {
  char path[PATH_MAX];
  if (!path_of(g, TTFT__SEG_FOLD_LOCK, path, sizeof path)) {
    *eno = ENAMETOOLONG;
    return NULL;
  }
  int lfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lfd < 0) {
    *eno = errno == EROFS || errno == EACCES ? errno : ENOENT;
    return NULL;
  }
  while (flock(lfd, LOCK_EX) != 0 && errno == EINTR) {
  }
  scan sc = {0};
  ttft__archive a;
  ttft__archive_init(&a);
  int rc = take_locked(g, &sc, &a);
  (void)flock(lfd, LOCK_UN);
  close(lfd);
  ttft_snapshot *s = NULL;
  if (rc == TTFT_OK) s = build_view(g, &sc, &a, &rc);
  scan_free(g, &sc);
  ttft__archive_clear(&a);
  if (!s) *eno = errno_of(rc);
  return s;
}

ttft_gather *ttft_gather_open_msg(const char *dir, unsigned flags, char *msg, size_t cap) {
  if (msg && cap) msg[0] = '\0';
  if (flags & ~(unsigned)TTFT_GATHER_BY_PROCESS) {
    if (msg && cap) snprintf(msg, cap, "ttft_gather_open: unknown flags 0x%x", flags);
    errno = EINVAL;
    return NULL;
  }
  int e = ttft__shared_dir_check(dir, msg, cap);
  if (e) {
    errno = e;
    return NULL;
  }
  ttft_allocator al;
  ttft__allocator_current(&al);
  ttft_gather *g = ttft__alloc(&al, sizeof *g);
  if (!g) {
    if (msg && cap) snprintf(msg, cap, "ttft_gather_open: out of memory");
    errno = ENOMEM;
    return NULL;
  }
  g->alloc = al;
  ttft__strlcpy(g->dir, dir, sizeof g->dir);
  g->flags = flags;
  g->uid = (uint32_t)geteuid();
#if defined(TTFT_HAVE_PTHREADS)
  if (pthread_mutex_init(&g->mu, NULL) != 0) {
    ttft__free(&al, g);
    errno = ENOMEM;
    return NULL;
  }
  if (pthread_cond_init(&g->cv, NULL) != 0) {
    pthread_mutex_destroy(&g->mu);
    ttft__free(&al, g);
    errno = ENOMEM;
    return NULL;
  }
#endif
  return g;
}

ttft_gather *ttft_gather_open(const char *dir, unsigned flags) {
  return ttft_gather_open_msg(dir, flags, NULL, 0);
}

#if defined(TTFT_HAVE_PTHREADS)
#define G_LOCK(g) pthread_mutex_lock(&(g)->mu)
#define G_UNLOCK(g) pthread_mutex_unlock(&(g)->mu)
#else
#define G_LOCK(g) ((void)0)
#define G_UNLOCK(g) ((void)0)
#endif

/* Concurrent calls share one merge: the first merges (g->busy) while the
 * others wait for its generation to end and take a copy of its result. */
ttft_snapshot *ttft_gather_take(ttft_gather *g) {
  if (!g) {
    errno = EINVAL;
    return NULL;
  }
  G_LOCK(g);
#if defined(TTFT_HAVE_PTHREADS)
  if (g->busy) {
    uint64_t gen = g->gen;
    g->waiters++;
    while (g->gen == gen) pthread_cond_wait(&g->cv, &g->mu);
    g->waiters--;
    ttft_snapshot *c = g->last ? ttft__snapshot_copy(g->last) : NULL;
    int eno = g->last ? ENOMEM : g->last_errno;
    G_UNLOCK(g);
    if (!c) errno = eno;
    return c;
  }
#endif
  g->busy = 1;
  G_UNLOCK(g);
  int eno = 0;
  ttft_snapshot *s = take_once(g, &eno); /* g->skipped, the bad ring: only the busy one */
  G_LOCK(g);
  ttft_snapshot_free(g->last);
  g->last = NULL;
  ttft_snapshot *r = s;
#if defined(TTFT_HAVE_PTHREADS)
  /* the merger keeps its result; a copy is kept for those who waited (a
   * waiter that finds no copy reports ENOMEM, or the merge's errno) */
  if (g->waiters) g->last = s ? ttft__snapshot_copy(s) : NULL;
  g->last_errno = s ? ENOMEM : eno;
  g->gen++;
  pthread_cond_broadcast(&g->cv);
#endif
  g->busy = 0;
  G_UNLOCK(g);
  if (!r) errno = eno;
  return r;
}

void ttft_gather_close(ttft_gather *g) {
  if (!g) return;
  ttft_snapshot_free(g->last);
#if defined(TTFT_HAVE_PTHREADS)
  pthread_cond_destroy(&g->cv);
  pthread_mutex_destroy(&g->mu);
#endif
  ttft_allocator al = g->alloc;
  ttft__free(&al, g);
}
