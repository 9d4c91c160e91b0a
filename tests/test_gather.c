/*
 * test_gather.c — ttft_gather_open / _take / _close over a shared
 * directory (include/ttft.h "many processes, one truth", src/common/
 * segment.h, the archive format at the top of src/report/gather.c).
 *
 * The segments are written by a small writer of this file standing in for
 * the publisher: the segment.h header written from its documented layout
 * (independently of the library's ttft__seg_hdr_put), then the
 * ttft_snapshot_encode bytes of a real registry's snapshot with a known
 * workload, to .tmp then renamed; a process holds an OFD write lock on its
 * .lock. A "process" is either a forked child (deaths: exit, SIGKILL,
 * abort, a death in the middle of a publish) or a lock held by this
 * process on its own open file description (OFD locks of two descriptions
 * conflict within one process too: closing it is a death).
 *
 *  - merged = exact union; PROCESSES = live processes;
 *  - deaths keep the last published state, gauges leave, no counter,
 *    histogram count, sum or bucket count falls between takes;
 *  - 1000 restarts under one name: directory bounded, totals exact,
 *    PROCESSES_EXITED = 1000;
 *  - gatherers in parallel (threads with their own gather, processes, one
 *    gather shared by threads) during folds: no double count, no loss;
 *  - pid reuse: the lock decides, not the pid;
 *  - hostile segments skipped and counted once;
 *  - TTFT_GATHER_BY_PROCESS parts sum to the merged view.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ttft.h"
#include "task.h"
#include "common/snapshot.h"

/* ------------------------------------------------------------- directory */
static char g_dir[256];

static void dir_new(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/ttft-gather-test-XXXXXX");
  if (!mkdtemp(g_dir)) abort();
  chmod(g_dir, 0700);
}
static void dir_rm(void) {
  DIR *d = opendir(g_dir);
  if (!d) return;
  struct dirent *de;
  char p[512];
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    snprintf(p, sizeof p, "%s/%s", g_dir, de->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(g_dir);
}
static int dir_files(void) {
  DIR *d = opendir(g_dir);
  int n = 0;
  struct dirent *de;
  while (d && (de = readdir(d)) != NULL)
    if (de->d_name[0] != '.') n++;
  if (d) closedir(d);
  return n;
}

/* ------------------------------------------------------- the test writer */
/* segment.h's hash, from its definition: FNV-1a's step over
 * little-endian 64-bit words, then over the tail bytes */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = 0;
    for (int k = 0; k < 8; k++) w |= (uint64_t)b[i + k] << (8 * k);
    h = (h ^ w) * 0x100000001b3ull;
  }
  for (; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}
#define FNV0 0xcbf29ce484222325ull
static void le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

typedef struct fake {
  uint64_t pid, nonce;
  int lockfd;
  char name[64];
  uint32_t flags, version;
  uint64_t seq;
} fake;

static void fake_file(const fake *f, const char *suffix, char *out, size_t cap) {
  snprintf(out, cap, "%s/ttft-%llu-%016llx.%s", g_dir, (unsigned long long)f->pid,
           (unsigned long long)f->nonce, suffix);
}

static uint64_t g_nonce = 0x1000;

/* a "process": its lock file, locked with an OFD write lock */
static void fake_start(fake *f, uint64_t pid, const char *name) {
  memset(f, 0, sizeof *f);
  f->pid = pid;
  f->nonce = ++g_nonce * 0x9E3779B97F4A7C15ull | 1u;
  f->version = 1;
  snprintf(f->name, sizeof f->name, "%s", name);
  char p[512];
  fake_file(f, "lock", p, sizeof p);
  f->lockfd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  if (f->lockfd < 0 || fcntl(f->lockfd, F_OFD_SETLK, &fl) != 0) abort();
}
static void fake_die(fake *f) {
  close(f->lockfd);
  f->lockfd = -1;
}

/* segment bytes of s as f publishes them; *n their length (malloc'd) */
static unsigned char *seg_bytes(fake *f, const ttft_snapshot *s, size_t *n) {
  long len = ttft_snapshot_encode(s, NULL, 0);
  if (len <= 0) abort();
  unsigned char *b = calloc(1, 160 + (size_t)len);
  if (!b || ttft_snapshot_encode(s, b + 160, (size_t)len) != len) abort();
  memcpy(b, "TTFTSEG1", 8);
  le32(b + 8, f->version);
  le32(b + 12, 160);
  le64(b + 16, f->pid);
  le64(b + 24, 0);
  le64(b + 32, f->nonce);
  le64(b + 40, ++f->seq);
  le64(b + 48, 1);
  le32(b + 56, (uint32_t)geteuid());
  le32(b + 60, f->flags);
  memcpy(b + 64, f->name, strlen(f->name));
  le64(b + 128, (uint64_t)len);
  le64(b + 136, fnv(FNV0, b + 160, (size_t)len));
  le64(b + 152, fnv(FNV0, b, 152));
  *n = 160 + (size_t)len;
  return b;
}
static void write_file(const char *path, const void *b, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || write(fd, b, n) != (ssize_t)n) abort();
  close(fd);
}
static void fake_publish_bytes(fake *f, const void *b, size_t n) {
  char tmp[512], seg[512];
  fake_file(f, "tmp", tmp, sizeof tmp);
  fake_file(f, "seg", seg, sizeof seg);
  write_file(tmp, b, n);
  if (rename(tmp, seg) != 0) abort();
}
static void fake_publish(fake *f, const ttft_snapshot *s) {
  size_t n;
  unsigned char *b = seg_bytes(f, s, &n);
  fake_publish_bytes(f, b, n);
  free(b);
}

/* ------------------------------------------------------------- workloads */
/* k requests in class cls (NULL = default): TTFT of request i is
 * base + i ns, one token then the end 1000 ns later; left requests begun
 * and left in flight (the INFLIGHT gauge). */
typedef struct wl {
  uint64_t begun, ttft_sum;
} wl;

static ttft_snapshot *workload(ttft_registry *r, const char *cls, unsigned k, uint64_t base, unsigned left,
                               wl *acc) {
  int c = 0;
  if (cls) {
    c = ttft_class_find(r, cls);
    if (c < 0) c = ttft_class_add(r, cls, NULL);
  }
  ttft_request rq;
  ttft_request_init(&rq);
  rq.class_id = c;
  uint64_t t = 1000000;
  for (unsigned i = 0; i < k + left; i++, t += 1000000) {
    ttft_seq s = ttft_begin_ex(r, &rq, t);
    if (!s) abort();
    if (i >= k) continue;
    ttft_token_emitted(r, s, 1, t + base + i);
    ttft_stream_end(r, s, TTFT_COMPLETED, t + base + i + 1000);
    if (acc) acc->ttft_sum += base + i;
  }
  if (acc) acc->begun += k + left;
  return ttft_snapshot_take(r);
}

static ttft_snapshot *one_workload(const char *cls, unsigned k, uint64_t base, unsigned left, wl *acc) {
  ttft_registry *r = ttft_registry_new(NULL);
  if (!r) abort();
  ttft_snapshot *s = workload(r, cls, k, base, left, acc);
  ttft_registry_free(r);
  return s;
}

/* ------------------------------------------------------------ monotonicity */
/* Every counter, histogram count and sum (and, white-box, every bucket)
 * of every class of prev is <= cur's. */
static void expect_no_fall(const ttft_snapshot *prev, const ttft_snapshot *cur) {
  if (!prev || !cur) return;
  int np = ttft_snapshot_classes(prev), nc = ttft_snapshot_classes(cur);
  for (int c = -1; c < np; c++) {
    int d = -1;
    if (c >= 0) {
      const char *nm = ttft_snapshot_class_name(prev, c);
      d = -2;
      for (int j = 0; j < nc; j++)
        if (strcmp(nm, ttft_snapshot_class_name(cur, j)) == 0) d = j;
      EXPECT_TRUE(d != -2);
      if (d == -2) continue;
    }
    for (int k = 0; k < TTFT_COUNTER_COUNT_; k++)
      EXPECT_LE_U64(ttft_snapshot_class_counter(prev, c, (ttft_counter)k),
                    ttft_snapshot_class_counter(cur, d, (ttft_counter)k));
    for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
      EXPECT_LE_U64(ttft_snapshot_class_count(prev, c, (ttft_metric)m),
                    ttft_snapshot_class_count(cur, d, (ttft_metric)m));
      EXPECT_LE_U64(ttft_snapshot_class_sum(prev, c, (ttft_metric)m),
                    ttft_snapshot_class_sum(cur, d, (ttft_metric)m));
      for (int st = 0; st < TTFT_STATUS_COUNT_; st++)
        EXPECT_LE_U64(ttft_snapshot_status_count(prev, c, (ttft_status)st, (ttft_metric)m),
                      ttft_snapshot_status_count(cur, d, (ttft_status)st, (ttft_metric)m));
    }
#if defined(TTFT_TEST_STATIC)
    {
      const ttft__sclass *a = ttft__snapshot_class(prev, c), *b = ttft__snapshot_class(cur, d);
      for (int m = 0; m < TTFT_METRIC_COUNT_; m++)
        for (uint32_t i = ttft__shist_lo(a->h[m]); i < ttft__shist_hi(a->h[m]); i++)
          if (ttft__shist_at(a->h[m], i) > ttft__shist_at(b->h[m], i))
            EXPECT_LE_U64(ttft__shist_at(a->h[m], i), ttft__shist_at(b->h[m], i));
    }
#endif
  }
  EXPECT_LE_U64(ttft_snapshot_counter(prev, TTFT_COUNTER_PROCESSES_EXITED),
                ttft_snapshot_counter(cur, TTFT_COUNTER_PROCESSES_EXITED));
}

static ttft_gather *open_dir(unsigned flags) {
  char msg[256];
  ttft_gather *g = ttft_gather_open_msg(g_dir, flags, msg, sizeof msg);
  if (!g) fprintf(stderr, "ttft_gather_open_msg: %s\n", msg);
  EXPECT_NOT_NULL(g);
  return g;
}

/* ------------------------------------------------------------------ tests */
TEST(open_checks) {
  dir_new();
  errno = 0;
  EXPECT_NULL(ttft_gather_open(g_dir, 2u));
  EXPECT_EQ_INT(EINVAL, errno);
  EXPECT_NULL(ttft_gather_open(NULL, 0));
  EXPECT_EQ_INT(EINVAL, errno);
  chmod(g_dir, 0777);
  char msg[256];
  EXPECT_NULL(ttft_gather_open_msg(g_dir, 0, msg, sizeof msg));
  EXPECT_EQ_INT(EACCES, errno);
  EXPECT_CONTAINS(msg, "writable");
  chmod(g_dir, 0700);
  ttft_gather *g = ttft_gather_open_msg(g_dir, 0, msg, sizeof msg);
  EXPECT_NOT_NULL(g);
  EXPECT_STREQ("", msg);
  /* an empty directory: a sound empty view */
  ttft_snapshot *s = ttft_gather_take(g);
  EXPECT_NOT_NULL(s);
  if (s) {
    EXPECT_EQ_U64(0, ttft_snapshot_gauge(s, TTFT_GAUGE_PROCESSES));
    EXPECT_EQ_U64(0, ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN));
    EXPECT_GT_INT(ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS, NULL, 0), 0);
  }
  ttft_snapshot_free(s);
  ttft_gather_close(g);
  ttft_gather_close(NULL);
  dir_rm();
}

TEST(merged_is_exact_union) {
  dir_new();
  wl w = {0};
  fake f[3];
  const char *cls[3] = {"chat", NULL, "batch"};
  for (int i = 0; i < 3; i++) {
    char nm[16];
    snprintf(nm, sizeof nm, "api-%d", i);
    fake_start(&f[i], 1000 + (uint64_t)i, nm);
    ttft_snapshot *s = one_workload(cls[i], 10 + (unsigned)i, 5000 * (uint64_t)(i + 1), 2, &w);
    fake_publish(&f[i], s);
    ttft_snapshot_free(s);
  }
  ttft_gather *g = open_dir(0);
  ttft_snapshot *s = ttft_gather_take(g);
  EXPECT_NOT_NULL(s);
  if (s) {
    EXPECT_EQ_U64(w.begun, ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN));
    EXPECT_EQ_U64(33, ttft_snapshot_count(s, TTFT_METRIC_TTFT));
    EXPECT_EQ_U64(w.ttft_sum, ttft_snapshot_sum(s, TTFT_METRIC_TTFT));
    EXPECT_EQ_U64(3, ttft_snapshot_gauge(s, TTFT_GAUGE_PROCESSES));
    EXPECT_EQ_U64(6, ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT));
    EXPECT_EQ_U64(0, ttft_snapshot_counter(s, TTFT_COUNTER_SEGMENTS_SKIPPED));
    EXPECT_EQ_U64(0, ttft_snapshot_counter(s, TTFT_COUNTER_PROCESSES_EXITED));
    EXPECT_EQ_INT(3, ttft_snapshot_classes(s));
  }
  /* one dies: its counters stay, its gauges leave, it is folded */
  fake_die(&f[1]);
  ttft_snapshot *s2 = ttft_gather_take(g);
  EXPECT_NOT_NULL(s2);
  if (s2) {
    expect_no_fall(s, s2);
    EXPECT_EQ_U64(w.begun, ttft_snapshot_counter(s2, TTFT_COUNTER_BEGUN));
    EXPECT_EQ_U64(w.ttft_sum, ttft_snapshot_sum(s2, TTFT_METRIC_TTFT));
    EXPECT_EQ_U64(2, ttft_snapshot_gauge(s2, TTFT_GAUGE_PROCESSES));
    EXPECT_EQ_U64(4, ttft_snapshot_gauge(s2, TTFT_GAUGE_INFLIGHT));
    EXPECT_EQ_U64(1, ttft_snapshot_counter(s2, TTFT_COUNTER_PROCESSES_EXITED));
  }
  EXPECT_EQ_INT(2 * 2 + 2, dir_files()); /* 2 live (seg + lock), archive, fold lock */
  ttft_snapshot_free(s);
  ttft_snapshot_free(s2);
  ttft_gather_close(g);
  fake_die(&f[0]);
  fake_die(&f[2]);
  dir_rm();
}

/* ------------------------------------------------ deaths of real children */
enum { DIE_EXIT, DIE_KILL, DIE_ABORT, DIE_MIDWRITE };

/* A child that publishes `rounds` growing states of one workload, telling
 * the parent after each, then dies as asked. */
static pid_t child_run(const char *name, int how, int *rd) {
  int p[2];
  if (pipe(p) != 0) abort();
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    fake f;
    fake_start(&f, (uint64_t)getpid(), name);
    ttft_registry *r = ttft_registry_new(NULL);
    for (int round = 0; round < 3; round++) {
      ttft_snapshot *s = workload(r, "chat", 5, 7000, round == 2 ? 1 : 0, NULL);
      fake_publish(&f, s);
      ttft_snapshot_free(s);
      char c = 'p';
      if (write(p[1], &c, 1) != 1) _exit(3);
      usleep(2000);
    }
    if (how == DIE_MIDWRITE) {
      char tmp[512];
      fake_file(&f, "tmp", tmp, sizeof tmp);
      write_file(tmp, "TTFTSEG1 half", 13);
    }
    char c = 'd';
    if (write(p[1], &c, 1) != 1) _exit(3);
    if (how == DIE_ABORT || how == DIE_MIDWRITE) {
      signal(SIGABRT, SIG_DFL);
      abort();
    }
    if (how == DIE_KILL) pause(); /* the parent kills it */
    _exit(0);
  }
  close(p[1]);
  *rd = p[0];
  return pid;
}

TEST(deaths_keep_last_state) {
  dir_new();
  ttft_gather *g = open_dir(0);
  ttft_snapshot *prev = NULL;
  static const char *const names[4] = {"w-exit", "w-kill", "w-abort", "w-midwrite"};
  pid_t pid[4];
  int rd[4];
  for (int i = 0; i < 4; i++) pid[i] = child_run(names[i], i, &rd[i]);
  /* take while they publish and die: nothing ever falls */
  int done = 0;
  while (done < 4) {
    done = 0;
    for (int i = 0; i < 4; i++) {
      char c;
      if (rd[i] < 0) {
        done++;
        continue;
      }
      ssize_t n = read(rd[i], &c, 1);
      if (n == 1 && c == 'd') {
        if (i == DIE_KILL) kill(pid[i], SIGKILL);
        int st;
        waitpid(pid[i], &st, 0);
        close(rd[i]);
        rd[i] = -1;
      }
    }
    ttft_snapshot *s = ttft_gather_take(g);
    EXPECT_NOT_NULL(s);
    expect_no_fall(prev, s);
    ttft_snapshot_free(prev);
    prev = s;
  }
  ttft_snapshot *s = ttft_gather_take(g);
  EXPECT_NOT_NULL(s);
  if (s) {
    expect_no_fall(prev, s);
    /* each published 3 rounds: 15 completed and 1 left in flight */
    EXPECT_EQ_U64(4 * 16, ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN));
    EXPECT_EQ_U64(4 * 15, ttft_snapshot_count(s, TTFT_METRIC_TTFT));
    EXPECT_EQ_U64(0, ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT));
    EXPECT_EQ_U64(0, ttft_snapshot_gauge(s, TTFT_GAUGE_PROCESSES));
    EXPECT_EQ_U64(4, ttft_snapshot_counter(s, TTFT_COUNTER_PROCESSES_EXITED));
    EXPECT_EQ_U64(0, ttft_snapshot_counter(s, TTFT_COUNTER_SEGMENTS_SKIPPED));
  }
  EXPECT_EQ_INT(2, dir_files()); /* the archive and the fold lock */
  /* a new gatherer reads the same from the archive */
  ttft_gather *g2 = open_dir(0);
  ttft_snapshot *s2 = ttft_gather_take(g2);
  if (s && s2) {
    EXPECT_EQ_U64(ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN), ttft_snapshot_counter(s2, TTFT_COUNTER_BEGUN));
    EXPECT_EQ_U64(ttft_snapshot_sum(s, TTFT_METRIC_TTFT), ttft_snapshot_sum(s2, TTFT_METRIC_TTFT));
  }
  ttft_snapshot_free(s2);
  ttft_gather_close(g2);
  ttft_snapshot_free(prev);
  ttft_snapshot_free(s);
  ttft_gather_close(g);
  dir_rm();
}

TEST(restart_1000_bounded) {
  dir_new();
  ttft_gather *g = open_dir(TTFT_GATHER_BY_PROCESS);
  ttft_snapshot *one = one_workload("chat", 3, 9000, 1, NULL);
  ttft_snapshot *prev = NULL;
  int max_files = 0;
  for (int i = 0; i < 1000; i++) {
    fake f;
    fake_start(&f, 4242, "api-0"); /* the same pid each time: only the nonce differs */
    fake_publish(&f, one);
    if (i % 50 == 0) { /* live: its segment and the archive both count */
      ttft_snapshot *s = ttft_gather_take(g);
      EXPECT_NOT_NULL(s);
      if (s) {
        EXPECT_EQ_U64(4 * (uint64_t)(i + 1), ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN));
        EXPECT_EQ_U64(1, ttft_snapshot_gauge(s, TTFT_GAUGE_PROCESSES));
        EXPECT_EQ_U64(1, ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT));
        EXPECT_EQ_INT(1, (long long)s->nparts);
      }
      expect_no_fall(prev, s);
      ttft_snapshot_free(prev);
      prev = s;
    }
    fake_die(&f);
    if (i % 10 == 9) {
      ttft_snapshot *s = ttft_gather_take(g);
      expect_no_fall(prev, s);
      ttft_snapshot_free(prev);
      prev = s;
      int n = dir_files();
      if (n > max_files) max_files = n;
    }
  }
  ttft_snapshot *s = ttft_gather_take(g);
  EXPECT_NOT_NULL(s);
  if (s) {
    EXPECT_EQ_U64(4000, ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN));
    EXPECT_EQ_U64(1000 * 3, ttft_snapshot_count(s, TTFT_METRIC_TTFT));
    EXPECT_EQ_U64(1000 * (3 * 9000 + 3), ttft_snapshot_sum(s, TTFT_METRIC_TTFT));
    EXPECT_EQ_U64(1000, ttft_snapshot_counter(s, TTFT_COUNTER_PROCESSES_EXITED));
    EXPECT_EQ_U64(0, ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT));
    EXPECT_EQ_INT(1, (long long)s->nparts);
  }
  EXPECT_EQ_INT(2, dir_files());
  EXPECT_LE_INT(max_files, 2);
  ttft_snapshot_free(s);
  ttft_snapshot_free(prev);
  ttft_snapshot_free(one);
  ttft_gather_close(g);
  dir_rm();
}

TEST(pid_reuse_lock_decides) {
  dir_new();
  fake f;
  fake_start(&f, (uint64_t)getpid(), "api-0"); /* its pid is a live process: ours */
  ttft_snapshot *one = one_workload(NULL, 4, 1000, 0, NULL);
  fake_publish(&f, one);
  fake_die(&f);
  ttft_gather *g = open_dir(0);
  ttft_snapshot *s = ttft_gather_take(g);
  if (s) {
    EXPECT_EQ_U64(1, ttft_snapshot_counter(s, TTFT_COUNTER_PROCESSES_EXITED));
    EXPECT_EQ_U64(0, ttft_snapshot_gauge(s, TTFT_GAUGE_PROCESSES));
    EXPECT_EQ_U64(4, ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN));
  }
  EXPECT_EQ_INT(2, dir_files());
  ttft_snapshot_free(s);
  ttft_snapshot_free(one);
  ttft_gather_close(g);
  dir_rm();
}

/* --------------------------------------------------- gatherers in parallel */
#define PAR_PROCS 200
typedef struct par {
  int own_gather; /* 1: a gather of its own; 0: the shared one */
  ttft_gather *shared;
  _Atomic int *stop;
  unsigned long takes, bad;
  uint64_t last;
} par;

/* Every process publishes its state before anyone may see it die and never
 * publishes again, so every take sees exactly what was published so far:
 * between the count published before the take began and the count after. */
static _Atomic uint64_t g_published;
static _Atomic uint64_t g_publishing; /* publishes begun */

static void *par_main(void *arg) {
  par *p = arg;
  ttft_gather *g = p->own_gather ? ttft_gather_open(g_dir, 0) : p->shared;
  if (!g) {
    p->bad++;
    return NULL;
  }
  while (!atomic_load(p->stop)) {
    /* lo: publishes complete before the take; hi: publishes begun by its
     * end (a publish is visible before the writer counts it done) */
    uint64_t lo = atomic_load(&g_published);
    ttft_snapshot *s = ttft_gather_take(g);
    uint64_t hi = atomic_load(&g_publishing);
    if (!s) {
      p->bad++;
      continue;
    }
    uint64_t b = ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN);
    /* a call on the shared gather may get the merge another call began
     * before it: only its own gather's result starts after lo */
    if ((p->own_gather && b < lo * 2) || b < p->last || b > hi * 2 || b % 2) p->bad++;
    p->last = b;
    p->takes++;
    ttft_snapshot_free(s);
  }
  if (p->own_gather) ttft_gather_close(g);
  return NULL;
}

static void run_parallel(int nthreads, int nforked) {
  dir_new();
  atomic_store(&g_published, 0);
  atomic_store(&g_publishing, 0);
  _Atomic int stop = 0;
  ttft_gather *shared = ttft_gather_open(g_dir, 0);
  /* processes gathering too (forked before any thread starts): they check
   * the union is even and never falls */
  pid_t kids[4];
  for (int k = 0; k < nforked; k++) {
    kids[k] = fork();
    if (kids[k] == 0) {
      ttft_gather *g = ttft_gather_open(g_dir, 0);
      uint64_t last = 0;
      int bad = !g;
      for (int i = 0; g && i < 200; i++) {
        ttft_snapshot *s = ttft_gather_take(g);
        if (!s) {
          bad = 1;
          break;
        }
        uint64_t b = ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN);
        if (b < last || b % 2) bad = 1;
        last = b;
        ttft_snapshot_free(s);
      }
      ttft_gather_close(g);
      _exit(bad);
    }
  }
  par ps[8];
  pthread_t th[8];
  for (int i = 0; i < nthreads; i++) {
    ps[i] = (par){.own_gather = i % 2 == 0, .shared = shared, .stop = &stop};
    pthread_create(&th[i], NULL, par_main, &ps[i]);
  }
  ttft_snapshot *one = one_workload(NULL, 2, 100, 0, NULL);
  for (int i = 0; i < PAR_PROCS; i++) {
    fake f;
    fake_start(&f, 7000 + (uint64_t)(i % 5), "w");
    atomic_fetch_add(&g_publishing, 1);
    fake_publish(&f, one);
    atomic_fetch_add(&g_published, 1);
    if (i % 3) usleep(200);
    fake_die(&f);
  }
  for (int k = 0; k < nforked; k++) {
    int st = 0;
    waitpid(kids[k], &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < nthreads; i++) {
    pthread_join(th[i], NULL);
    EXPECT_EQ_U64(0, ps[i].bad);
    EXPECT_GT_U64(ps[i].takes, 0);
  }
  ttft_snapshot *s = ttft_gather_take(shared);
  if (s) {
    EXPECT_EQ_U64(2 * PAR_PROCS, ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN));
    EXPECT_EQ_U64(PAR_PROCS, ttft_snapshot_counter(s, TTFT_COUNTER_PROCESSES_EXITED));
  }
  EXPECT_EQ_INT(2, dir_files());
  ttft_snapshot_free(s);
  ttft_snapshot_free(one);
  ttft_gather_close(shared);
  dir_rm();
}

TEST(parallel_threads) { run_parallel(6, 0); }
TEST(parallel_processes) { run_parallel(2, 3); }

/* ---------------------------------------------------------------- hostile */
static uint64_t skipped_now(ttft_gather *g, uint64_t *begun) {
  ttft_snapshot *s = ttft_gather_take(g);
  EXPECT_NOT_NULL(s);
  if (!s) return 0;
  uint64_t k = ttft_snapshot_counter(s, TTFT_COUNTER_SEGMENTS_SKIPPED);
  if (begun) *begun = ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN);
  ttft_snapshot_free(s);
  return k;
}

TEST(hostile_segments) {
  dir_new();
  ttft_gather *g = open_dir(0);
  ttft_snapshot *one = one_workload(NULL, 1, 100, 0, NULL);
  /* a good live process beside, whose numbers must stay exact */
  fake good;
  fake_start(&good, 10, "good");
  fake_publish(&good, one);
  fake h;
  fake_start(&h, 11, "bad");
  size_t n;
  unsigned char *b = seg_bytes(&h, one, &n);
  uint64_t begun = 0, k0 = skipped_now(g, &begun), k;
  EXPECT_EQ_U64(0, k0);
  fake_publish_bytes(&h, b, n); /* sound */
  EXPECT_EQ_U64(0, skipped_now(g, &begun));
  EXPECT_EQ_U64(2, begun);
  /* truncations */
  size_t cuts[] = {0, 1, 8, 159, 160, 161, n / 2, n - 1};
  uint64_t want = 0;
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    fake_publish_bytes(&h, b, cuts[i]);
    usleep(1000); /* a new mtime: another version of the file */
    k = skipped_now(g, &begun);
    EXPECT_EQ_U64(++want, k);
    EXPECT_EQ_U64(1, begun);
    EXPECT_EQ_U64(want, skipped_now(g, NULL)); /* counted once, not per take */
  }
  /* every single-bit flip of the segment */
  unsigned char *x = malloc(n);
  for (size_t bit = 0; bit < n * 8; bit++) {
    memcpy(x, b, n);
    x[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    fake_publish_bytes(&h, x, n);
    k = skipped_now(g, &begun);
    if (k != want + 1 || begun != 1) {
      EXPECT_EQ_U64(want + 1, k);
      EXPECT_EQ_U64(1, begun);
      fprintf(stderr, "bit %zu\n", bit);
      break;
    }
    want = k;
  }
  free(x);
  /* a future version; a name whose identity is not its header's */
  h.version = 2;
  unsigned char *fv = seg_bytes(&h, one, &n);
  fake_publish_bytes(&h, fv, n);
  EXPECT_EQ_U64(++want, skipped_now(g, &begun));
  free(fv);
  h.version = 1;
  fake other = h;
  other.nonce ^= 2;
  unsigned char *ob = seg_bytes(&other, one, &n);
  fake_publish_bytes(&h, ob, n);
  EXPECT_EQ_U64(++want, skipped_now(g, &begun));
  free(ob);
  /* a huge claimed length */
  unsigned char *hb = seg_bytes(&h, one, &n);
  le64(hb + 128, (uint64_t)1 << 40);
  le64(hb + 152, fnv(FNV0, hb, 152));
  fake_publish_bytes(&h, hb, n);
  EXPECT_EQ_U64(++want, skipped_now(g, &begun));
  free(hb);
  /* another user's file (we are root in CI; elsewhere chown fails) */
  fake_publish_bytes(&h, b, n);
  char seg[512];
  fake_file(&h, "seg", seg, sizeof seg);
  if (geteuid() == 0) {
    EXPECT_EQ_INT(0, chown(seg, 65534, 65534));
    EXPECT_EQ_U64(++want, skipped_now(g, &begun));
    EXPECT_EQ_U64(1, begun);
  }
  /* a symlink to a sound segment */
  unlink(seg);
  char target[512];
  snprintf(target, sizeof target, "%s/elsewhere", g_dir);
  write_file(target, b, n);
  EXPECT_EQ_INT(0, symlink(target, seg));
  EXPECT_EQ_U64(++want, skipped_now(g, &begun));
  EXPECT_EQ_U64(1, begun);
  unlink(seg);
  /* a dead process's bad segment: counted, then removed */
  fake_publish_bytes(&h, b, 100);
  fake_die(&h);
  EXPECT_EQ_U64(++want, skipped_now(g, &begun));
  EXPECT_EQ_U64(want, skipped_now(g, &begun));
  EXPECT_EQ_U64(1, begun);
  /* a corrupt archive: moved aside, counted, the view goes on */
  fake d;
  fake_start(&d, 12, "dead");
  fake_publish(&d, one);
  fake_die(&d);
  EXPECT_EQ_U64(want, skipped_now(g, &begun));
  EXPECT_EQ_U64(2, begun);
  char arc[512];
  snprintf(arc, sizeof arc, "%s/ttft-archive.seg", g_dir);
  write_file(arc, "TTFTARC1 garbage", 16);
  EXPECT_EQ_U64(++want, skipped_now(g, &begun));
  snprintf(arc, sizeof arc, "%s/ttft-archive.bad", g_dir);
  struct stat st;
  EXPECT_EQ_INT(0, stat(arc, &st));
  free(b);
  ttft_snapshot_free(one);
  fake_die(&good);
  ttft_gather_close(g);
  dir_rm();
}

TEST(by_process_parts_sum) {
  dir_new();
  fake f[4];
  const char *names[4] = {"api-0", "api-1", "api-0", "dp-3"};
  for (int i = 0; i < 4; i++) {
    fake_start(&f[i], 100 + (uint64_t)i, names[i]);
    if (i == 3) f[i].flags = 2; /* a default name: folds under "exited" */
    ttft_snapshot *s = one_workload(i % 2 ? "chat" : NULL, 3 + (unsigned)i, 500, 1, NULL);
    fake_publish(&f[i], s);
    ttft_snapshot_free(s);
  }
  fake_die(&f[2]); /* api-0: one live, one in the archive: one part */
  fake_die(&f[3]);
  ttft_gather *g = open_dir(TTFT_GATHER_BY_PROCESS);
  ttft_snapshot *s = ttft_gather_take(g);
  EXPECT_NOT_NULL(s);
  if (s) {
    EXPECT_EQ_INT(3, (long long)s->nparts); /* api-0, api-1, exited */
    for (uint32_t i = 0; i < s->nparts && i < 3; i++)
      EXPECT_STREQ(i == 0 ? "api-0" : i == 1 ? "api-1" : "exited", s->part_name[i]);
    for (int k = 0; k < TTFT_COUNTER_COUNT_; k++) {
      if (k == TTFT_COUNTER_SEGMENTS_SKIPPED) continue; /* belongs to no process */
      uint64_t sum = 0;
      for (uint32_t i = 0; i < s->nparts; i++) sum += ttft_snapshot_counter(s->part[i], (ttft_counter)k);
      EXPECT_EQ_U64(ttft_snapshot_counter(s, (ttft_counter)k), sum);
    }
    for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
      uint64_t c = 0, su = 0;
      for (uint32_t i = 0; i < s->nparts; i++) {
        c += ttft_snapshot_count(s->part[i], (ttft_metric)m);
        su += ttft_snapshot_sum(s->part[i], (ttft_metric)m);
      }
      EXPECT_EQ_U64(ttft_snapshot_count(s, (ttft_metric)m), c);
      EXPECT_EQ_U64(ttft_snapshot_sum(s, (ttft_metric)m), su);
    }
    for (int q = 0; q < TTFT_GAUGE_COUNT_; q++) {
      uint64_t sum = 0;
      for (uint32_t i = 0; i < s->nparts; i++) sum += ttft_snapshot_gauge(s->part[i], (ttft_gauge)q);
      EXPECT_EQ_U64(ttft_snapshot_gauge(s, (ttft_gauge)q), sum);
    }
    EXPECT_EQ_U64(2, ttft_snapshot_gauge(s, TTFT_GAUGE_PROCESSES));
    EXPECT_EQ_U64(2, ttft_snapshot_counter(s, TTFT_COUNTER_PROCESSES_EXITED));
    EXPECT_EQ_U64(3 + 4 + 5 + 6 + 4, ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN));
    /* a deep copy of a parted view is the same view */
    long n1 = ttft_snapshot_format(s, TTFT_FORMAT_JSON, NULL, 0);
    EXPECT_GT_INT(n1, 0);
  }
  ttft_snapshot_free(s);
  ttft_gather_close(g);
  fake_die(&f[0]);
  fake_die(&f[1]);
  dir_rm();
}

/* one gather, many threads: they share merges and each gets its own copy */
typedef struct shared_arg {
  ttft_gather *g;
  uint64_t want;
  int bad;
} shared_arg;
static void *shared_main(void *arg) {
  shared_arg *a = arg;
  for (int i = 0; i < 50; i++) {
    ttft_snapshot *s = ttft_gather_take(a->g);
    if (!s || ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN) != a->want || s->nparts != 2) a->bad++;
    ttft_snapshot_free(s);
  }
  return NULL;
}
TEST(one_gather_many_threads) {
  dir_new();
  fake f[2];
  wl w = {0};
  for (int i = 0; i < 2; i++) {
    fake_start(&f[i], 300 + (uint64_t)i, i ? "b" : "a");
    ttft_snapshot *s = one_workload("chat", 5, 100, 0, &w);
    fake_publish(&f[i], s);
    ttft_snapshot_free(s);
  }
  ttft_gather *g = open_dir(TTFT_GATHER_BY_PROCESS);
  shared_arg a[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    a[i] = (shared_arg){g, w.begun, 0};
    pthread_create(&th[i], NULL, shared_main, &a[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    EXPECT_EQ_INT(0, a[i].bad);
  }
  ttft_gather_close(g);
  fake_die(&f[0]);
  fake_die(&f[1]);
  dir_rm();
}

TU_MAIN()
