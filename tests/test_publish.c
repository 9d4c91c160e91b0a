/*
 * test_publish.c — a registry's segment in its shared_dir (record/publish.c,
 * common/segment.h): the writing side of issue 28.
 *
 *  - the segment appears at ttft_registry_new, parses (the header read
 *    here from the documented layout, and by ttft__seg_parse in the static
 *    build) and decodes to what ttft_snapshot_take says; ttft_publish and
 *    the background thread republish (seq grows);
 *  - ttft_registry_free writes a FINAL segment and releases the lock
 *    (F_OFD_GETLK from another descriptor: locked before, unlocked after);
 *    a child that exits without free leaves a FINAL segment too;
 *  - a child SIGKILLed while it publishes every 10 ms leaves a whole
 *    segment, every time;
 *  - fork: the child publishes as a new process, only what it recorded
 *    after the fork; the parent's segment and lock are untouched;
 *  - ttft_config_check's reasons; a full disk (RLIMIT_FSIZE) and a removed
 *    directory: TTFT_EIO, counted, said once, recording goes on.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ttft.h"
#include "task.h"
#ifdef TTFT_TEST_STATIC
#include "common/segment.h"
#endif

/* ------------------------------------------------------------- helpers */
static char g_dir[256];

static void dir_make(void) {
  const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(g_dir, sizeof g_dir, "%s/ttft-test-publish-XXXXXX", base);
  if (!mkdtemp(g_dir)) {
    perror("mkdtemp");
    exit(2);
  }
  chmod(g_dir, 0700);
}

static void dir_remove(void) {
  DIR *d = opendir(g_dir);
  if (d) {
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)))
      if (e->d_name[0] != '.') {
        snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
        unlink(p);
      }
    closedir(d);
  }
  rmdir(g_dir);
}
TU_SETUP(dir_make)
TU_TEARDOWN(dir_remove)

static uint64_t rd64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
static uint32_t rd32(const unsigned char *p) { return (uint32_t)rd64(p) & 0xFFFFFFFFu; }

/* segment.h's hash, from its definition: FNV-1a's step over
 * little-endian 64-bit words, then over the tail bytes */
static uint64_t fnv(const unsigned char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) h = (h ^ rd64(p + i)) * 0x100000001b3ull;
  for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* A segment as read back: the header fields and the decoded payload. */
typedef struct seg {
  uint64_t pid, nonce, seq;
  uint32_t uid, flags;
  char name[64];
  ttft_snapshot *s;
} seg;

/* The path of pid's file with suffix in g_dir ("" when there is none). */
static int file_of(pid_t pid, const char *suffix, char *out, size_t cap) {
  char pre[64];
  snprintf(pre, sizeof pre, "ttft-%ld-", (long)pid);
  DIR *d = opendir(g_dir);
  int found = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    size_t n = strlen(e->d_name), k = strlen(suffix);
    if (strncmp(e->d_name, pre, strlen(pre)) == 0 && n > k + 1 && e->d_name[n - k - 1] == '.' &&
        strcmp(e->d_name + n - k, suffix) == 0) {
      snprintf(out, cap, "%s/%s", g_dir, e->d_name);
      found++;
    }
  }
  if (d) closedir(d);
  return found;
}

/* Read and check pid's segment by the layout of common/segment.h. 1 when
 * it is there and whole (header hash, payload hash, length, decode). */
static int seg_read(pid_t pid, seg *g) {
  memset(g, 0, sizeof *g);
  char path[512];
  if (file_of(pid, "seg", path, sizeof path) != 1) return 0;
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  static unsigned char buf[1 << 22];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  if (n < 160 || memcmp(buf, "TTFTSEG1", 8) != 0 || rd32(buf + 8) != 1 || rd32(buf + 12) != 160)
    return 0;
  if (rd64(buf + 152) != fnv(buf, 152)) return 0;
  uint64_t plen = rd64(buf + 128);
  if (n != 160 + plen || rd64(buf + 136) != fnv(buf + 160, plen)) return 0;
#ifdef TTFT_TEST_STATIC
  ttft__seg_hdr h;
  const unsigned char *payload = NULL;
  if (ttft__seg_parse(buf, n, &h, &payload) != TTFT_OK || payload != buf + 160 ||
      h.seq != rd64(buf + 40))
    return 0;
#endif
  g->pid = rd64(buf + 16);
  g->nonce = rd64(buf + 32);
  g->seq = rd64(buf + 40);
  g->uid = rd32(buf + 56);
  g->flags = rd32(buf + 60);
  memcpy(g->name, buf + 64, 63);
  int err = 0;
  g->s = ttft_snapshot_decode(buf + 160, plen, &err);
  return g->s != NULL;
}

/* 1 when another descriptor sees pid's lock file write-locked */
static int lock_held(pid_t pid) {
  char path[512];
  if (file_of(pid, "lock", path, sizeof path) != 1) return 0;
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return 0;
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  int rc = fcntl(fd, F_OFD_GETLK, &fl);
  close(fd);
  return rc == 0 && fl.l_type != F_UNLCK;
}

static ttft_registry *reg_new(uint32_t interval_ms, const char *name) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 64;
  c.shared_dir = g_dir;
  c.process_name = name;
  c.publish_interval_ms = interval_ms;
  return ttft_registry_new(&c);
}

/* n streams with TTFT ttft_ns each, on a synthetic timeline */
static void record(ttft_registry *r, int n, uint64_t ttft_ns) {
  static uint64_t t = UINT64_C(1000000000);
  for (int i = 0; i < n; i++) {
    t += UINT64_C(1000000);
    ttft_seq s = ttft_begin(r, t);
    ttft_token_emitted(r, s, 1, t + ttft_ns);
    ttft_token_emitted(r, s, 1, t + ttft_ns + 1000);
    ttft_stream_end(r, s, TTFT_COMPLETED, t + ttft_ns + 2000);
  }
}

static uint64_t ttft_count(const ttft_snapshot *s) { return ttft_snapshot_count(s, TTFT_METRIC_TTFT); }

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* --------------------------------------------------------------- tests */
TEST(appears_at_new_and_parses) {
  ttft_registry *r = reg_new(0, NULL);
  EXPECT_NOT_NULL(r);
  if (!r) return;
  seg g;
  EXPECT_TRUE(seg_read(getpid(), &g));
  EXPECT_EQ_U64(1, g.seq);
  EXPECT_EQ_U64((uint64_t)getpid(), g.pid);
  EXPECT_TRUE(g.nonce != 0);
  EXPECT_EQ_U64(geteuid(), g.uid);
  EXPECT_EQ_U64(2, g.flags); /* TTFT__SEG_F_DEFAULT_NAME, not FINAL */
  char want[32];
  snprintf(want, sizeof want, "pid-%ld", (long)getpid());
  EXPECT_STREQ(want, g.name);
  EXPECT_EQ_U64(0, g.s ? ttft_count(g.s) : 1);
  ttft_snapshot_free(g.s);

  record(r, 3, 5000000);
  EXPECT_ERR(TTFT_OK, ttft_publish(r));
  ttft_snapshot *now = ttft_snapshot_take(r);
  EXPECT_TRUE(seg_read(getpid(), &g));
  EXPECT_EQ_U64(2, g.seq);
  if (g.s && now) {
    EXPECT_EQ_U64(3, ttft_count(g.s));
    for (int m = 0; m < TTFT_METRIC_COUNT_; m++)
      EXPECT_EQ_U64(ttft_snapshot_count(now, (ttft_metric)m), ttft_snapshot_count(g.s, (ttft_metric)m));
    for (int c = 0; c < TTFT_COUNTER_COUNT_; c++)
      EXPECT_EQ_U64(ttft_snapshot_counter(now, (ttft_counter)c), ttft_snapshot_counter(g.s, (ttft_counter)c));
    EXPECT_EQ_DBL(ttft_snapshot_quantile(now, TTFT_METRIC_TTFT, 0.5),
                  ttft_snapshot_quantile(g.s, TTFT_METRIC_TTFT, 0.5));
    EXPECT_EQ_U64(ttft_snapshot_slowest_count(now, 0, TTFT_SLOWEST_TTFT),
                  ttft_snapshot_slowest_count(g.s, 0, TTFT_SLOWEST_TTFT));
  }
  ttft_snapshot_free(g.s);
  ttft_snapshot_free(now);
  char tmp[512];
  EXPECT_EQ_INT(0, file_of(getpid(), "tmp", tmp, sizeof tmp)); /* renamed away */
  ttft_registry_free(r);
}

/* A segment is an encoded snapshot: the class SLO's 1.3 fields (the
 * length-aware first-token deadline, token deadline, fluid_min) survive
 * publishing and a gather, so the gathered view judges as the process did */
TEST(class_slo_13_fields_gathered) {
  ttft_registry *r = reg_new(0, "api-slo");
  EXPECT_NOT_NULL(r);
  if (!r) return;
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.ttft_ns = 100000000;
  slo.ttft_ns_per_prompt_token = 1000000;
  slo.token_deadline_ns = 20000000;
  slo.fluid_min = 0.75;
  EXPECT_EQ_INT(1, ttft_class_add(r, "long", &slo));
  EXPECT_ERR(TTFT_OK, ttft_publish(r));
  ttft_gather *g = ttft_gather_open(g_dir, 0);
  EXPECT_NOT_NULL(g);
  ttft_snapshot *s = g ? ttft_gather_take(g) : NULL;
  EXPECT_NOT_NULL(s);
  if (s) {
    EXPECT_STREQ("long", ttft_snapshot_class_name(s, 1));
    ttft_slo got;
    memset(&got, 0, sizeof got);
    got.struct_size = sizeof got;
    EXPECT_ERR(TTFT_OK, ttft_snapshot_class_slo(s, 1, &got));
    EXPECT_EQ_U64(100000000, got.ttft_ns);
    EXPECT_EQ_U64(1000000, got.ttft_ns_per_prompt_token);
    EXPECT_EQ_U64(20000000, got.token_deadline_ns);
    EXPECT_EQ_DBL(0.75, got.fluid_min);
    EXPECT_ERR(TTFT_OK, ttft_snapshot_class_slo(s, 0, &got));
    EXPECT_EQ_DBL(0.9, got.fluid_min); /* the default class: the default */
  }
  ttft_snapshot_free(s);
  ttft_gather_close(g);
  ttft_registry_free(r);
}

/* The slowest lists' 1.3 fields (a stream's token deadlines, misses, D
 * and the budgets it was judged against) survive publishing and a
 * gather: D 50 ms, a 120 ms stall as the first gap then ten 10 ms gaps:
 * 12 deadlines, 2 missed; first-token deadline 100 ms + 1 ms x 200 */
TEST(slowest_13_fields_gathered) {
  ttft_registry *r = reg_new(0, "api-slow");
  EXPECT_NOT_NULL(r);
  if (!r) return;
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.ttft_ns = 100000000;
  slo.ttft_ns_per_prompt_token = 1000000;
  slo.tpot_ns = 50000000;
  EXPECT_EQ_INT(1, ttft_class_add(r, "chat", &slo));
  ttft_request q;
  ttft_request_init(&q);
  q.class_id = 1;
  q.prompt_tokens = 200;
  const uint64_t t0 = 1000000000, ms = 1000000;
  ttft_seq h = ttft_begin_ex(r, &q, t0);
  uint64_t t = t0 + 400 * ms;
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, h, 1, t));
  for (int i = 0; i < 11; i++) EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, h, 1, t += (i ? 10 : 120) * ms));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, h, TTFT_COMPLETED, t));
  EXPECT_ERR(TTFT_OK, ttft_publish(r));
  ttft_gather *g = ttft_gather_open(g_dir, 0);
  EXPECT_NOT_NULL(g);
  ttft_snapshot *s = g ? ttft_gather_take(g) : NULL;
  EXPECT_NOT_NULL(s);
  ttft_slow_request o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  EXPECT_ERR(TTFT_OK, s ? ttft_snapshot_slowest(s, 1, TTFT_SLOWEST_TTFT, 0, &o) : TTFT_EINVAL);
  EXPECT_EQ_U64(12, o.deadlines);
  EXPECT_EQ_U64(2, o.deadlines_missed);
  EXPECT_EQ_DBL(1.0 - 2.0 / 12.0, o.fluidity);
  EXPECT_EQ_U64(50 * ms, o.token_deadline_ns);
  EXPECT_EQ_U64(300 * ms, o.ttft_slo_ns);
  EXPECT_EQ_U64(50 * ms, o.tpot_slo_ns);
  ttft_snapshot_free(s);
  ttft_gather_close(g);
  ttft_registry_free(r);
}

TEST(named_process) {
  ttft_registry *r = reg_new(0, "api-0");
  seg g;
  EXPECT_TRUE(seg_read(getpid(), &g));
  EXPECT_STREQ("api-0", g.name);
  EXPECT_EQ_U64(0, g.flags);
  ttft_snapshot_free(g.s);
  ttft_registry_free(r);
}

TEST(thread_republishes) {
  ttft_registry *r = reg_new(10, NULL);
  EXPECT_NOT_NULL(r);
  uint64_t seq = 0;
  /* no timing assertion: wait up to 5 s for two more publishes */
  for (int i = 0; i < 500 && seq < 3; i++) {
    seg g;
    if (seg_read(getpid(), &g)) seq = g.seq;
    ttft_snapshot_free(g.s);
    if (seq < 3) sleep_ms(10);
  }
  EXPECT_GE_U64(seq, 3);
  record(r, 2, 1000000);
  uint64_t n = 0;
  for (int i = 0; i < 500 && n != 2; i++) {
    seg g;
    if (seg_read(getpid(), &g)) n = ttft_count(g.s);
    ttft_snapshot_free(g.s);
    if (n != 2) sleep_ms(10);
  }
  EXPECT_EQ_U64(2, n);
  ttft_registry_free(r);
}

TEST(publish_einval) {
  EXPECT_ERR(TTFT_EINVAL, ttft_publish(NULL));
  ttft_registry *r = ttft_registry_new(NULL);
  EXPECT_ERR(TTFT_EINVAL, ttft_publish(r));
  ttft_registry_free(r);
  ttft_config c;
  ttft_config_init(&c);
  EXPECT_EQ_U64(100, c.publish_interval_ms);
  EXPECT_NULL(c.shared_dir);
  EXPECT_NULL(c.process_name);
}

TEST(final_and_lock_released) {
  ttft_registry *r = reg_new(100, NULL);
  record(r, 4, 2000000);
  EXPECT_TRUE(lock_held(getpid()));
  ttft_registry_free(r);
  EXPECT_FALSE(lock_held(getpid()));
  seg g;
  EXPECT_TRUE(seg_read(getpid(), &g));
  EXPECT_TRUE((g.flags & 1u) != 0); /* FINAL */
  EXPECT_EQ_U64(4, g.s ? ttft_count(g.s) : 0);
  ttft_snapshot_free(g.s);
}

TEST(child_exit_without_free_is_final) {
  pid_t pid = fork();
  if (pid == 0) {
    ttft_registry *r = reg_new(50, NULL);
    record(r, 5, 3000000);
    exit(r ? 0 : 3); /* the exit handler publishes; r is never freed */
  }
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  seg g;
  EXPECT_TRUE(seg_read(pid, &g));
  EXPECT_TRUE((g.flags & 1u) != 0);
  EXPECT_EQ_U64(5, g.s ? ttft_count(g.s) : 0);
  EXPECT_EQ_U64((uint64_t)pid, g.pid);
  ttft_snapshot_free(g.s);
  EXPECT_FALSE(lock_held(pid));
}

TEST(sigkill_never_torn) {
  int rounds = getenv("TTFT_KILL_ROUNDS") ? atoi(getenv("TTFT_KILL_ROUNDS")) : 40;
  int whole = 0, seen = 0;
  for (int i = 0; i < rounds; i++) {
    int ready[2];
    if (pipe(ready) != 0) break;
    pid_t pid = fork();
    if (pid == 0) {
      ttft_registry *r = reg_new(10, NULL);
      /* its first segment is written: the kill lands among publishes */
      if (write(ready[1], "1", 1) != 1) _exit(3);
      for (;;) {
        record(r, 20, 1000000);
        ttft_publish(r); /* and the thread every 10 ms */
      }
    }
    char one;
    close(ready[1]);
    if (read(ready[0], &one, 1) != 1) one = 0;
    close(ready[0]);
    EXPECT_EQ_INT('1', one);
    sleep_ms(1 + (i * 7) % 40);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    char path[512];
    if (file_of(pid, "seg", path, sizeof path) == 1) {
      seen++;
      seg g;
      whole += seg_read(pid, &g);
      ttft_snapshot_free(g.s);
    }
    EXPECT_FALSE(lock_held(pid));
  }
  EXPECT_EQ_INT(rounds, seen);
  EXPECT_EQ_INT(seen, whole);
}

/* the child's exit status says which of its checks failed (bit i) */
TEST(fork_child_publishes_own) {
  ttft_registry *r = reg_new(0, NULL);
  record(r, 4, 90000000); /* slow: 90 ms */
  EXPECT_ERR(TTFT_OK, ttft_publish(r));
  seg before;
  EXPECT_TRUE(seg_read(getpid(), &before));
  pid_t pid = fork();
  if (pid == 0) {
    int bad = 0;
    record(r, 2, 1000000); /* fast: 1 ms, below every inherited entry */
    if (ttft_publish(r) != TTFT_OK) bad |= 1;
    ttft_snapshot *own = ttft_snapshot_take(r);
    if (!own || ttft_count(own) != 6) bad |= 2; /* the live registry keeps it all */
    ttft_snapshot_free(own);
    _exit(bad); /* no exit handler: the last publish stays non-final */
  }
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ_INT(0, WEXITSTATUS(st));
  seg c, p;
  EXPECT_TRUE(seg_read(pid, &c));
  EXPECT_EQ_U64((uint64_t)pid, c.pid);
  EXPECT_TRUE(c.nonce != before.nonce);
  EXPECT_EQ_U64(2, c.seq); /* the fork's publish, then ttft_publish */
  if (c.s) {
    EXPECT_EQ_U64(2, ttft_count(c.s));
    EXPECT_EQ_U64(2, ttft_snapshot_counter(c.s, TTFT_COUNTER_COMPLETED));
    /* its slowest list: its own two, none of the parent's */
    EXPECT_EQ_U64(2, ttft_snapshot_slowest_count(c.s, 0, TTFT_SLOWEST_TTFT));
    EXPECT_TRUE(ttft_snapshot_quantile(c.s, TTFT_METRIC_TTFT, 1.0) <= 2000000.0);
  }
  char want[32];
  snprintf(want, sizeof want, "pid-%ld", (long)pid);
  EXPECT_STREQ(want, c.name);
  EXPECT_FALSE(lock_held(pid));   /* the child is gone */
  EXPECT_TRUE(lock_held(getpid())); /* its copy closed; ours still held */
  EXPECT_TRUE(seg_read(getpid(), &p));
  EXPECT_EQ_U64(before.seq, p.seq);
  EXPECT_EQ_U64(4, p.s ? ttft_count(p.s) : 0);
  ttft_snapshot_free(p.s);
  record(r, 1, 1000000);
  EXPECT_ERR(TTFT_OK, ttft_publish(r));
  EXPECT_TRUE(seg_read(getpid(), &p));
  EXPECT_EQ_U64(5, p.s ? ttft_count(p.s) : 0);
  EXPECT_EQ_U64(5, ttft_snapshot_slowest_count(p.s, 0, TTFT_SLOWEST_TTFT));
  ttft_snapshot_free(p.s);
  ttft_snapshot_free(c.s);
  ttft_snapshot_free(before.s);
  ttft_registry_free(r);
}

/* OFD locks belong to the open file description: a fork child's copy of
 * the descriptor is the same description, and closing it in the child
 * leaves the parent's lock (the premise of ttft__pub_atfork_child). */
TEST(ofd_lock_survives_child_close) {
  char path[512];
  snprintf(path, sizeof path, "%s/premise.lock", g_dir);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  EXPECT_EQ_INT(0, fcntl(fd, F_OFD_SETLK, &fl));
  pid_t pid = fork();
  if (pid == 0) {
    close(fd);
    _exit(0);
  }
  waitpid(pid, NULL, 0);
  int fd2 = open(path, O_RDWR | O_CLOEXEC);
  memset(&fl, 0, sizeof fl);
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  EXPECT_EQ_INT(0, fcntl(fd2, F_OFD_GETLK, &fl));
  EXPECT_EQ_INT(F_WRLCK, fl.l_type);
  close(fd);
  memset(&fl, 0, sizeof fl);
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  EXPECT_EQ_INT(0, fcntl(fd2, F_OFD_GETLK, &fl));
  EXPECT_EQ_INT(F_UNLCK, fl.l_type);
  close(fd2);
}

static int check_refused(ttft_config *c, const char *needle) {
  char why[512];
  int rc = ttft_config_check(c, why, sizeof why);
  EXPECT_ERR(TTFT_EINVAL, rc);
  EXPECT_CONTAINS(why, needle);
  EXPECT_NULL(strchr(why, '\n'));
  ttft_registry *r = ttft_registry_new(c);
  EXPECT_NULL(r);
  ttft_registry_free(r);
  return rc;
}

TEST(config_check_reasons) {
  ttft_config c;
  ttft_config_init(&c);
  c.shared_dir = g_dir;
  char why[512];
  EXPECT_ERR(TTFT_OK, ttft_config_check(&c, why, sizeof why));
  chmod(g_dir, 0770);
  check_refused(&c, "group- or world-writable");
  chmod(g_dir, 0700);
  char other[300];
  snprintf(other, sizeof other, "%s/other", g_dir);
  mkdir(other, 0700);
  if (geteuid() == 0) {
    EXPECT_EQ_INT(0, chown(other, 65534, 65534));
    c.shared_dir = other;
  } else {
    c.shared_dir = "/"; /* root's: another user's for us */
  }
  check_refused(&c, "belongs to another user");
  rmdir(other);
  c.shared_dir = other; /* gone now */
  check_refused(&c, "No such file or directory");
  c.shared_dir = g_dir;
  c.process_name = "api 0";
  check_refused(&c, "process_name \"api 0\"");
  c.process_name = "";
  check_refused(&c, "process_name");
  c.process_name = "dp-3";
  c.publish_interval_ms = 5;
  check_refused(&c, "publish_interval_ms 5");
  c.publish_interval_ms = 3600001;
  check_refused(&c, "publish_interval_ms 3600001");
  c.publish_interval_ms = 0;
  EXPECT_ERR(TTFT_OK, ttft_config_check(&c, why, sizeof why));
  c.publish_interval_ms = 10;
  EXPECT_ERR(TTFT_OK, ttft_config_check(&c, why, sizeof why));
  /* an older, smaller struct (1.2's) never reads the 1.3 fields */
  ttft_config old;
  memset(&old, 0x5a, sizeof old);
  ttft_config_init_sized(&old, offsetof(ttft_config, shared_dir));
  EXPECT_ERR(TTFT_OK, ttft_config_check(&old, why, sizeof why));
  ttft_registry *r = ttft_registry_new(&old);
  EXPECT_NOT_NULL(r);
  EXPECT_ERR(TTFT_EINVAL, ttft_publish(r)); /* no shared_dir */
  ttft_registry_free(r);
}

/* Run fn in a child with stderr on a pipe; returns the child's status and
 * its stderr text in out. */
static int in_child(int (*fn)(void), char *out, size_t cap) {
  int p[2];
  if (pipe(p) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    dup2(p[1], 2);
    _exit(fn());
  }
  close(p[1]);
  size_t n = 0;
  ssize_t k;
  while (n + 1 < cap && (k = read(p[0], out + n, cap - 1 - n)) != 0)
    if (k > 0) n += (size_t)k;
    else if (errno != EINTR) break;
  out[n] = '\0';
  close(p[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  return st;
}

static int count_of(const char *hay, const char *needle) {
  int k = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p++) k++;
  return k;
}

/* bits of the status: what went wrong in the child */
static int failing_publishes(ttft_registry *r) {
  int bad = 0;
  record(r, 3, 1000000);
  if (ttft_publish(r) != TTFT_EIO) bad |= 1;
  if (ttft_publish(r) != TTFT_EIO) bad |= 2;
  record(r, 2, 1000000); /* recording goes on */
  ttft_snapshot *s = ttft_snapshot_take(r);
  if (!s || ttft_count(s) != 5) bad |= 4;
  if (!s || ttft_snapshot_counter(s, TTFT_COUNTER_PUBLISH_FAILED) < 2) bad |= 8;
  ttft_snapshot_free(s);
  char tmp[512];
  if (file_of(getpid(), "tmp", tmp, sizeof tmp) != 0) bad |= 16;
  return bad;
}

static int disk_full_child(void) {
  ttft_registry *r = reg_new(0, NULL);
  if (!r) return 64;
  struct rlimit rl = {100, 100}; /* smaller than a segment's header */
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0) return 65;
  int bad = failing_publishes(r);
  ttft_registry_free(r); /* its FINAL publish fails too: said no more */
  return bad;
}

TEST(disk_full_counted_said_once) {
  char err[8192];
  int st = in_child(disk_full_child, err, sizeof err);
  EXPECT_TRUE(WIFEXITED(st)); /* SIGXFSZ did not kill it */
  EXPECT_EQ_INT(0, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  EXPECT_EQ_INT(1, count_of(err, "libttft: publishing to "));
  EXPECT_CONTAINS(err, "File too large; recording goes on (llm_publish_failures_total counts it)");
  EXPECT_CONTAINS(err, g_dir);
}

static int thread_disk_full_child(void) {
  ttft_registry *r = reg_new(10, NULL);
  if (!r) return 64;
  struct rlimit rl = {100, 100};
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0) return 65;
  uint64_t failed = 0;
  for (int i = 0; i < 500 && failed < 3; i++) {
    sleep_ms(10);
    ttft_snapshot *s = ttft_snapshot_take(r);
    failed = s ? ttft_snapshot_counter(s, TTFT_COUNTER_PUBLISH_FAILED) : 0;
    ttft_snapshot_free(s);
  }
  ttft_registry_free(r);
  return failed >= 3 ? 0 : 1;
}

TEST(disk_full_publisher_thread) {
  char err[8192];
  int st = in_child(thread_disk_full_child, err, sizeof err);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ_INT(0, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  EXPECT_EQ_INT(1, count_of(err, "libttft: publishing to "));
}

static int removed_dir_child(void) {
  ttft_registry *r = reg_new(0, NULL);
  if (!r) return 64;
  dir_remove(); /* every file, then the directory */
  return failing_publishes(r);
}

TEST(removed_directory) {
  char err[8192];
  int st = in_child(removed_dir_child, err, sizeof err);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ_INT(0, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  EXPECT_EQ_INT(1, count_of(err, "libttft: publishing to "));
  EXPECT_CONTAINS(err, "No such file or directory");
}

TU_MAIN()
