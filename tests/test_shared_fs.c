/*
 * test_shared_fs.c — a shared_dir on a real file system that fills up or
 * turns read-only (issue 28.4): a small tmpfs mounted for the test
 * (a read-only bind mount over it for the second case;
 * mount(2) needs CAP_SYS_ADMIN: CI runs as root; elsewhere the test says
 * what it lacks and, under CI=true, fails). What must hold: recording goes
 * on, each failed publish is counted (TTFT_COUNTER_PUBLISH_FAILED), the
 * failure is said once on stderr, a gatherer keeps the last published
 * state, and publishing resumes when space (or write access) comes back.
 * Each case runs in a child process with its stderr captured.
 */
#include "task.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ttft.h>

static char g_dir[128];

static int mount_small(const char *opts) {
  return mount("tmpfs", g_dir, "tmpfs", MS_NOSUID | MS_NODEV, opts);
}

/* a mounted tmpfs of size bytes at g_dir, mode 0700; 0 on success */
static int setup_fs(const char *size_opt) {
  snprintf(g_dir, sizeof g_dir, "/tmp/ttft-shared-fs-XXXXXX");
  if (!mkdtemp(g_dir)) return -1;
  char opts[64];
  snprintf(opts, sizeof opts, "%s,mode=0700", size_opt);
  if (mount_small(opts) != 0) {
    int e = errno;
    rmdir(g_dir);
    errno = e;
    return -1;
  }
  return 0;
}

static void teardown_fs(void) {
  umount2(g_dir, MNT_DETACH);
  rmdir(g_dir);
}

/* can this process mount? if not: fail under CI, say so elsewhere */
static int have_mount(void) {
  if (setup_fs("size=64k") != 0) {
    int e = errno;
    const char *ci = getenv("CI");
    fprintf(stderr, "test_shared_fs: cannot mount a tmpfs (%s): needs CAP_SYS_ADMIN (CI runs as root)\n",
            strerror(e));
    if (ci && strcmp(ci, "true") == 0) EXPECT_TRUE(!"mount(2) of a tmpfs works in CI");
    return 0;
  }
  teardown_fs();
  return 1;
}

static uint64_t counter(ttft_registry *r, ttft_counter c) {
  ttft_snapshot *s = ttft_snapshot_take(r);
  uint64_t v = s ? ttft_snapshot_counter(s, c) : 0;
  ttft_snapshot_free(s);
  return v;
}

static uint64_t gathered_begun(void) {
  ttft_gather *g = ttft_gather_open(g_dir, 0);
  if (!g) return UINT64_MAX;
  ttft_snapshot *s = ttft_gather_take(g);
  uint64_t v = s ? ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN) : UINT64_MAX;
  ttft_snapshot_free(s);
  ttft_gather_close(g);
  return v;
}

static int g_cls[8];
static void classes(ttft_registry *r) {
  static const char *const name[] = {"chat", "code", "batch", "rag", "agent", "embed", "long", "vision"};
  for (int i = 0; i < 8; i++) g_cls[i] = ttft_class_add(r, name[i], NULL);
}

static void record(ttft_registry *r, int n) {
  for (int i = 0; i < n; i++) {
    ttft_request q;
    ttft_request_init(&q);
    q.class_id = g_cls[i % 8];
    uint64_t t = 1000000000ull + (uint64_t)i * 7919u;
    ttft_seq s = ttft_begin_ex(r, &q, t);
    for (int k = 1; k <= 4; k++) ttft_token_emitted(r, s, 1, t + (uint64_t)(k * 1000003 + i * 37));
    ttft_stream_end(r, s, TTFT_COMPLETED, t + 9000000u);
  }
}

static ttft_registry *reg_new(void) {
  ttft_config c;
  ttft_config_init(&c);
  c.shared_dir = g_dir;
  c.process_name = "fs-test";
  c.publish_interval_ms = 0; /* the test drives ttft_publish */
  ttft_registry *r = ttft_registry_new(&c);
  if (r) classes(r);
  return r;
}

static int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}

/* run fn in a child with stderr into err; the child's exit status */
static int in_child(int (*fn)(void), char *err, size_t cap) {
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
  while ((k = read(p[0], err + n, cap - 1 - n)) > 0) n += (size_t)k;
  err[n] = '\0';
  close(p[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  fputs(err, stderr);
  return st;
}

/* fill the file system: the segment of 8 classes with data does not fit
 * in 16 KiB beside what is there; grow it and publishing resumes */
static int full_child(void) {
  ttft_registry *r = reg_new();
  if (!r) return 10;
  record(r, 16);
  if (ttft_publish(r) != TTFT_OK) return 11; /* a small segment fits */
  uint64_t before = gathered_begun();
  if (before != 16) return 12;
  /* a filler file takes what is left */
  char path[256];
  snprintf(path, sizeof path, "%s/filler", g_dir);
  int ff = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (ff < 0) return 13;
  static char blk[4096];
  while (write(ff, blk, sizeof blk) > 0) {
  }
  close(ff);
  record(r, 4000);
  int fails = 0;
  for (int i = 0; i < 5; i++) fails += ttft_publish(r) == TTFT_EIO;
  if (fails != 5) return 14;
  if (counter(r, TTFT_COUNTER_PUBLISH_FAILED) != 5) return 15;
  /* the hooks still record while publishing fails */
  if (counter(r, TTFT_COUNTER_BEGUN) != 4016) return 16;
  /* the gatherer still sees the last published state, never less */
  if (gathered_begun() != 16) return 17;
  /* room again: the next publish goes through */
  unlink(path);
  if (ttft_publish(r) != TTFT_OK) return 18;
  if (gathered_begun() != 4016) return 19;
  ttft_registry_free(r);
  if (gathered_begun() != 4016) return 20;
  return 0;
}

TEST(full_file_system) {
  if (!have_mount()) return;
  EXPECT_EQ_INT(0, setup_fs("size=64k"));
  char err[8192];
  int st = in_child(full_child, err, sizeof err);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ_INT(0, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  EXPECT_EQ_INT(1, count_of(err, "libttft: publishing to "));
  EXPECT_CONTAINS(err, "No space left on device");
  teardown_fs();
}

/* the file system turns read-only under a running publisher, then back */
static int readonly_child(void) {
  ttft_registry *r = reg_new();
  if (!r) return 10;
  record(r, 8);
  if (ttft_publish(r) != TTFT_OK) return 11;
  /* the publisher's lock file is open for writing, which keeps the file
   * system itself from turning read-only (EBUSY): a read-only bind mount
   * over the directory makes every new write through its path fail */
  if (mount(g_dir, g_dir, NULL, MS_BIND, NULL) != 0) return 12;
  if (mount(NULL, g_dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) != 0) return 21;
  record(r, 8);
  int fails = 0;
  for (int i = 0; i < 3; i++) fails += ttft_publish(r) == TTFT_EIO;
  if (fails != 3) return 13;
  if (counter(r, TTFT_COUNTER_PUBLISH_FAILED) != 3) return 14;
  if (counter(r, TTFT_COUNTER_BEGUN) != 16) return 15;
  if (umount2(g_dir, 0) != 0) return 16; /* writable again */
  if (ttft_publish(r) != TTFT_OK) return 17;
  if (gathered_begun() != 16) return 18;
  ttft_registry_free(r);
  return 0;
}

TEST(read_only_file_system) {
  if (!have_mount()) return;
  EXPECT_EQ_INT(0, setup_fs("size=1m"));
  char err[8192];
  int st = in_child(readonly_child, err, sizeof err);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ_INT(0, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  EXPECT_EQ_INT(1, count_of(err, "libttft: publishing to "));
  EXPECT_CONTAINS(err, "Read-only file system");
  teardown_fs();
}

TU_MAIN()
