/*
 * gather_bench.c — what one scrape of a many-process server costs: gather
 * + render of a shared directory (docs/multiprocess.md; SPEC section 11:
 * gather 64 processes x 8 classes and render protobuf <= 50 ms).
 *
 *   ttft-gather-bench [--quick] [--reps N] [--restarts K] [--dir PARENT] [--json FILE]
 *
 * For P = 1, 8 and 64 processes: P children are forked one after another
 * (so that their publishes do not compete), and each makes a real
 * registry with shared_dir (process_name "w-<i>", publish_interval_ms 0:
 * the child publishes with ttft_publish, so its state holds still), adds
 * 7 classes to the default one (8 classes), records a known workload in
 * every class (streams with tokens, request and trace ids, a few left in
 * flight), times its publishes (median of 5: the publish cost per
 * interval), says so to the parent and waits, alive: the directory then
 * holds P live segments. The parent opens a gather on the directory and
 * times, median of N repetitions (after a warm-up take):
 *   take              ttft_gather_take + ttft_snapshot_free
 *   take + protobuf   ... + ttft_snapshot_format(PROMETHEUS_PROTOBUF)
 *   take + text       ... + ttft_snapshot_format(PROMETHEUS), 0.0.4 text
 *   by process        the same two with TTFT_GATHER_BY_PROCESS
 * and checks each gathered view against the exact union of the
 * workloads, and that the processes' exemplars reach the gathered
 * OpenMetrics text (exit 1 when not: that is a bug, not a timing). The
 * segment bytes per class are the .seg files' sizes / P / 8. The figures
 * are milliseconds on whatever machine runs it, wall clock and (for the
 * merged take + render) the gathering process's CPU time, which a busy
 * machine disturbs less; the program
 * never fails because of one, it prints the target and "met"/"MISSED".
 *
 * Then, at 64 processes: K clean restarts (default 100, 20 with --quick;
 * each a new pid under the slot's name, with a take every 10 as a
 * scraper would), one SIGKILL and every exit, each view checked exact
 * (counts kept, in flight and live processes down, exits counted), with
 * the directory's file count after each step and the take + protobuf
 * time after the restarts.
 *
 * The directory is made under --dir (default /dev/shm, the expected
 * place; /tmp when there is none) and removed at the end. Linux (fork,
 * OFD locks); exits 77 where the library says shared_dir is not
 * supported.
 */
#include <ttft.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CLASSES 8      /* the default class and 7 added            */
#define LEFT 2         /* streams each class leaves in flight       */
#define MAX_REPS 101
#define TARGET_MS 50.0 /* SPEC section 11, at 64 processes          */

static unsigned g_streams = 200; /* completed streams per class per process */
static int g_reps = 15;

static double clock_ms(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
static double now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }
/* this process's CPU time: what a scrape costs, whatever else the
 * machine runs (the children are idle while the parent gathers) */
static double cpu_ms(void) { return clock_ms(CLOCK_PROCESS_CPUTIME_ID); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void die(const char *what) {
  fprintf(stderr, "ttft-gather-bench: %s\n", what);
  exit(1);
}

/* ------------------------------------------------------------ a child */

/* Record the workload of process `index`: in every class, g_streams
 * completed streams of 1 + (k % 16) token emissions, TTFT spread over 5 ..
 * 500 ms and gaps over 10 .. 60 ms, and LEFT streams left in flight. */
static int record_workload(ttft_registry *r, const int *cls, int index) {
  uint64_t t = 1000000000ull;
  char rid[40], tid[33];
  for (int c = 0; c < CLASSES; c++) {
    for (unsigned k = 0; k < g_streams + LEFT; k++) {
      ttft_request q;
      ttft_request_init(&q);
      q.class_id = cls[c];
      q.prompt_tokens = 64u + (k * 97u) % 4000u;
      snprintf(rid, sizeof rid, "req-%d-%d-%u", index, c, k);
      snprintf(tid, sizeof tid, "%016x%016x", (unsigned)index + 1u, (unsigned)(c * 100000 + (int)k + 1));
      q.request_id = rid;
      q.trace_id = tid;
      ttft_seq s = ttft_begin_ex(r, &q, t);
      if (!s) return -1;
      if (k >= g_streams) continue; /* in flight */
      uint64_t e = t + 5000000ull + (uint64_t)((k * 7919u) % 495u) * 1000000ull;
      int bad = ttft_token_emitted(r, s, 1, e);
      for (unsigned j = 0; j < k % 16; j++) {
        e += 10000000ull + (uint64_t)((k + j) * 31u % 50u) * 1000000ull;
        bad |= ttft_token_emitted(r, s, 1, e);
      }
      bad |= ttft_stream_end(r, s, TTFT_COMPLETED, e + 1000);
      if (bad) return -1;
      t += 1000000ull;
    }
  }
  return 0;
}

/* The child's life: returns only by _exit. Writes to `ready` one double,
 * its median publish time in microseconds (negative: it failed), then
 * waits for `go` to close. */
static void child(const char *dir, int index, int ready, int go) {
  char name[32];
  snprintf(name, sizeof name, "w-%d", index);
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.shared_dir = dir;
  cfg.process_name = name;
  cfg.publish_interval_ms = 0;
  cfg.max_inflight = 4096;
  double us = -1;
  ttft_registry *r = ttft_registry_new(&cfg);
  int cls[CLASSES] = {0};
  if (r) {
    int ok = 1;
    for (int c = 1; c < CLASSES && ok; c++) {
      char cn[16];
      snprintf(cn, sizeof cn, "class-%d", c);
      cls[c] = ttft_class_add(r, cn, NULL);
      ok = cls[c] > 0;
    }
    if (ok && record_workload(r, cls, index) == 0) {
      double v[5];
      int n = 0;
      for (; n < 5; n++) {
        double t0 = now_ms();
        if (ttft_publish(r) != TTFT_OK) break;
        v[n] = (now_ms() - t0) * 1e3;
      }
      if (n == 5) us = median(v, 5);
    }
  }
  if (write(ready, &us, sizeof us) != (ssize_t)sizeof us) _exit(1);
  char b;
  while (read(go, &b, 1) < 0 && errno == EINTR) {
  }
  ttft_registry_free(r); /* the FINAL publish */
  _exit(0);
}

/* -------------------------------------------------------- the parent */

typedef struct result {
  int procs;
  double take, take_pb, take_text, byproc_pb, byproc_text, publish_us, seg_bytes_per_class;
  double cpu_take_pb, cpu_take_text; /* CPU ms of the same */
  long pb_bytes, text_bytes, byproc_text_bytes;
  long exemplars; /* exemplar lines in the gathered OpenMetrics text */
} result;

static long render(const ttft_snapshot *s, ttft_format f, char **buf, size_t *cap) {
  for (;;) {
    long n = ttft_snapshot_format(s, f, *buf, *cap);
    if (n < 0) return n;
    if ((size_t)n < *cap) return n;
    *cap = (size_t)n + 1 + (size_t)n / 2;
    char *nb = realloc(*buf, *cap);
    if (!nb) return -1;
    *buf = nb;
  }
}

/* What the gathered view must show: the union of `done` workloads (every
 * process that ever published, live or exited), the in-flight streams of
 * the `live` ones only, and `exited` folded processes. */
typedef struct expect {
  int done, live, exited;
} expect;

static void check_view(const ttft_snapshot *s, expect e, const char *what) {
  uint64_t want = (uint64_t)e.done * CLASSES * g_streams;
  uint64_t want_in = (uint64_t)e.live * CLASSES * LEFT;
  uint64_t got = ttft_snapshot_count(s, TTFT_METRIC_TTFT);
  uint64_t live = ttft_snapshot_gauge(s, TTFT_GAUGE_PROCESSES);
  uint64_t inflight = ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT);
  uint64_t exited = ttft_snapshot_counter(s, TTFT_COUNTER_PROCESSES_EXITED);
  if (got != want || live != (uint64_t)e.live || inflight != want_in ||
      exited != (uint64_t)e.exited || ttft_snapshot_classes(s) != CLASSES) {
    fprintf(stderr,
            "ttft-gather-bench: %s: TTFT count %llu (want %llu), processes %llu (want %d), "
            "in flight %llu (want %llu), exited %llu (want %d), classes %d (want %d)\n",
            what, (unsigned long long)got, (unsigned long long)want, (unsigned long long)live,
            e.live, (unsigned long long)inflight, (unsigned long long)want_in,
            (unsigned long long)exited, e.exited, ttft_snapshot_classes(s), CLASSES);
    exit(1);
  }
}

/* Median wall-clock ms of take (+ render f when f >= 0), over g_reps;
 * *cpu (when not NULL) the median CPU ms. */
static double time_takes(ttft_gather *g, int f, expect e, const char *what, char **buf, size_t *cap,
                         long *bytes, double *cpu) {
  double v[MAX_REPS], c[MAX_REPS];
  for (int i = -1; i < g_reps; i++) { /* i = -1: the warm-up */
    double t0 = now_ms(), c0 = cpu_ms();
    ttft_snapshot *s = ttft_gather_take(g);
    if (!s) die("ttft_gather_take failed");
    long n = f >= 0 ? render(s, (ttft_format)f, buf, cap) : 0;
    double t1 = now_ms(), c1 = cpu_ms();
    if (n < 0) die("ttft_snapshot_format failed");
    if (i < 0) check_view(s, e, what);
    ttft_snapshot_free(s);
    if (i >= 0) v[i] = t1 - t0, c[i] = c1 - c0;
    if (bytes) *bytes = n;
  }
  if (cpu) *cpu = median(c, g_reps);
  return median(v, g_reps);
}

static void rm_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)))
      if (e->d_name[0] != '.') unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
  }
  rmdir(dir);
}

static double seg_bytes(const char *dir) {
  DIR *d = opendir(dir);
  double total = 0;
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n < 4 || strcmp(e->d_name + n - 4, ".seg") || !strncmp(e->d_name, "ttft-archive", 12)) continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, 0) == 0) total += (double)st.st_size;
  }
  closedir(d);
  return total;
}

typedef struct kid {
  pid_t pid;
  int go; /* closing it makes the child free its registry and exit */
} kid;

/* Fork child `index` and wait until it has recorded and published. */
static void spawn(const char *dir, int index, kid *k, double *publish_us) {
  int ready[2], go[2];
  if (pipe(ready) || pipe(go)) die("pipe failed");
  pid_t pid = fork();
  if (pid < 0) die("fork failed");
  if (pid == 0) {
    /* keep only its own two pipe ends: an inherited write end of a
     * sibling's go pipe would keep that sibling from ever seeing EOF */
    long maxfd = sysconf(_SC_OPEN_MAX);
    for (int fd = 3; fd < (maxfd > 0 && maxfd < 65536 ? maxfd : 1024); fd++)
      if (fd != ready[1] && fd != go[0]) close(fd);
    child(dir, index, ready[1], go[0]);
  }
  close(ready[1]);
  close(go[0]);
  k->pid = pid;
  k->go = go[1];
  double us;
  if (read(ready[0], &us, sizeof us) != (ssize_t)sizeof us || us < 0)
    die("a child could not record or publish");
  close(ready[0]);
  if (publish_us) *publish_us = us;
}

static void reap(kid *k, int how) { /* how: 0 a clean exit, SIGKILL */
  if (how) kill(k->pid, how);
  close(k->go);
  int st;
  while (waitpid(k->pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!how && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) die("a child failed on its way out");
}

static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return -1;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* Restarts and a SIGKILL, at `procs` live processes (after run's
 * measurements, with the same children). */
typedef struct churn {
  int restarts;
  int files_before, files_after_restarts, files_after_kill, files_after_all;
  double take_pb, cpu_take_pb; /* after the restarts */
} churn;

static void restart_phase(const char *dir, kid *kids, int procs, int restarts, churn *c, char **buf,
                          size_t *cap) {
  char msg[256];
  ttft_gather *g = ttft_gather_open_msg(dir, 0, msg, sizeof msg);
  if (!g) die(msg);
  c->restarts = restarts;
  c->files_before = count_files(dir);
  for (int k = 0; k < restarts; k++) { /* a clean exit, a new process in its place */
    reap(&kids[k % procs], 0);
    spawn(dir, k % procs, &kids[k % procs], NULL); /* under the same name */
    if (k % 10 == 9) { /* a scrape now and then, as Prometheus would */
      ttft_snapshot *s = ttft_gather_take(g);
      if (!s) die("ttft_gather_take failed");
      ttft_snapshot_free(s);
    }
  }
  expect e = {procs + restarts, procs, restarts};
  c->take_pb = time_takes(g, TTFT_FORMAT_PROMETHEUS_PROTOBUF, e, "after the restarts", buf, cap, NULL,
                          &c->cpu_take_pb);
  c->files_after_restarts = count_files(dir);
  /* a SIGKILL: everything it published stays; its in-flight streams leave */
  reap(&kids[0], SIGKILL);
  ttft_snapshot *s = ttft_gather_take(g);
  if (!s) die("ttft_gather_take failed");
  check_view(s, (expect){procs + restarts, procs - 1, restarts + 1}, "after a SIGKILL");
  ttft_snapshot_free(s);
  c->files_after_kill = count_files(dir);
  for (int i = 1; i < procs; i++) reap(&kids[i], 0);
  s = ttft_gather_take(g);
  if (!s) die("ttft_gather_take failed");
  check_view(s, (expect){procs + restarts, 0, procs + restarts}, "after every exit");
  ttft_snapshot_free(s);
  c->files_after_all = count_files(dir);
  ttft_gather_close(g);
}

static int run(const char *parent, int procs, result *out, int restarts, churn *c) {
  char dir[4096];
  if ((size_t)snprintf(dir, sizeof dir, "%s/ttft-gather-bench-XXXXXX", parent) >= sizeof dir)
    die("--dir: too long");
  if (!mkdtemp(dir)) die("mkdtemp failed");
  chmod(dir, 0700);
  {
    ttft_config cfg;
    ttft_config_init(&cfg);
    cfg.shared_dir = dir;
    char why[256];
    if (ttft_config_check(&cfg, why, sizeof why) != TTFT_OK) {
      fprintf(stderr, "ttft-gather-bench: %s\n", why);
      rm_dir(dir);
      return 77;
    }
  }
  kid *kids = calloc((size_t)procs, sizeof *kids);
  double *pub = calloc((size_t)procs, sizeof *pub);
  if (!kids || !pub) die("out of memory");
  for (int i = 0; i < procs; i++) spawn(dir, i, &kids[i], &pub[i]);

  memset(out, 0, sizeof *out);
  out->procs = procs;
  out->publish_us = median(pub, procs);
  out->seg_bytes_per_class = seg_bytes(dir) / procs / CLASSES;
  char *buf = NULL;
  size_t cap = 0;
  char msg[256];
  expect e = {procs, procs, 0};
  ttft_gather *g = ttft_gather_open_msg(dir, 0, msg, sizeof msg);
  if (!g) die(msg);
  out->take = time_takes(g, -1, e, "take", &buf, &cap, NULL, NULL);
  out->take_pb = time_takes(g, TTFT_FORMAT_PROMETHEUS_PROTOBUF, e, "take+protobuf", &buf, &cap,
                            &out->pb_bytes, &out->cpu_take_pb);
  out->take_text = time_takes(g, TTFT_FORMAT_PROMETHEUS, e, "take+text", &buf, &cap,
                              &out->text_bytes, &out->cpu_take_text);
  { /* the exemplars (trace ids) of every process reach the gathered view */
    ttft_snapshot *s = ttft_gather_take(g);
    long n = s ? render(s, TTFT_FORMAT_OPENMETRICS, &buf, &cap) : -1;
    ttft_snapshot_free(s);
    if (n < 0) die("OpenMetrics render of the gathered view failed");
    for (const char *q = buf; (q = strstr(q, " # {trace_id=\"")); q++) out->exemplars++;
    if (out->exemplars == 0) die("no exemplar in the gathered OpenMetrics text");
  }
  ttft_gather_close(g);
  g = ttft_gather_open_msg(dir, TTFT_GATHER_BY_PROCESS, msg, sizeof msg);
  if (!g) die(msg);
  out->byproc_pb = time_takes(g, TTFT_FORMAT_PROMETHEUS_PROTOBUF, e, "by-process take+protobuf",
                              &buf, &cap, NULL, NULL);
  out->byproc_text = time_takes(g, TTFT_FORMAT_PROMETHEUS, e, "by-process take+text", &buf,
                                &cap, &out->byproc_text_bytes, NULL);
  ttft_gather_close(g);

  if (c) {
    restart_phase(dir, kids, procs, restarts, c, &buf, &cap);
  } else {
    for (int i = 0; i < procs; i++) reap(&kids[i], 0);
  }
  free(buf);
  free(kids);
  free(pub);
  rm_dir(dir);
  return 0;
}

int main(int argc, char **argv) {
  const char *parent = NULL, *json = NULL;
  int quick = 0, restarts = -1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) {
      quick = 1;
    } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      g_reps = atoi(argv[++i]);
      if (g_reps < 1 || g_reps > MAX_REPS) die("--reps: 1 .. 101");
    } else if (!strcmp(argv[i], "--restarts") && i + 1 < argc) {
      restarts = atoi(argv[++i]);
      if (restarts < 0 || restarts > 100000) die("--restarts: 0 .. 100000");
    } else if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
      parent = argv[++i];
    } else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
      json = argv[++i];
    } else {
      fprintf(stderr, "usage: ttft-gather-bench [--quick] [--reps N] [--restarts K] [--dir PARENT] "
                      "[--json FILE]\n");
      return 2;
    }
  }
  struct stat st;
  if (!parent) parent = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
  if (quick) {
    g_streams = 40;
    if (g_reps > 5) g_reps = 5;
  }
  signal(SIGPIPE, SIG_IGN);
  const int sizes[] = {1, 8, 64};
  result res[3];
  churn ch;
  if (restarts < 0) restarts = quick ? 20 : 100;
  printf("ttft-gather-bench: libttft %s; %d classes x %u streams (+%d in flight) per process; "
         "directory under %s; median of %d, wall-clock ms\n",
         ttft_version_string(), CLASSES, g_streams, LEFT, parent, g_reps);
  printf("%-9s %9s %12s %12s %12s %14s %12s %12s %13s %10s %10s %9s\n", "processes", "take",
         "take+protobuf", "take+text", "by-process pb", "by-process text", "CPU take+pb",
         "CPU take+txt", "publish (us)", "seg B/class", "protobuf B", "exemplars");
  for (int k = 0; k < 3; k++) {
    int rc = run(parent, sizes[k], &res[k], restarts, k == 2 ? &ch : NULL);
    if (rc) return rc;
    const result *r = &res[k];
    printf("%-9d %9.2f %12.2f %12.2f %12.2f %14.2f %12.2f %12.2f %13.1f %10.0f %10ld %9ld\n",
           r->procs, r->take, r->take_pb, r->take_text, r->byproc_pb, r->byproc_text,
           r->cpu_take_pb, r->cpu_take_text, r->publish_us, r->seg_bytes_per_class, r->pb_bytes,
           r->exemplars);
    fflush(stdout);
  }
  printf("churn at %d processes: %d clean restarts (a scrape every 10), then one SIGKILL, then every "
         "exit; each view checked exact\n", sizes[2], ch.restarts);
  printf("  files: %d live -> %d after the restarts -> %d after the SIGKILL -> %d after every exit\n",
         ch.files_before, ch.files_after_restarts, ch.files_after_kill, ch.files_after_all);
  printf("  take+protobuf after the restarts: %.2f ms wall (%.2f ms CPU)\n", ch.take_pb,
         ch.cpu_take_pb);
  int met = res[2].take_pb <= TARGET_MS;
  printf("target: gather 64 processes x %d classes + render protobuf <= %.0f ms: %.2f ms wall "
         "(%.2f ms CPU), %s\n",
         CLASSES, TARGET_MS, res[2].take_pb, res[2].cpu_take_pb, met ? "met" : "MISSED");
  if (json) {
    FILE *f = fopen(json, "w");
    if (!f) die("cannot write --json");
    fprintf(f, "{\"schema\": \"ttft-gather-bench/1\", \"version\": \"%s\", \"classes\": %d, "
               "\"streams\": %u, \"reps\": %d, \"rows\": [",
            ttft_version_string(), CLASSES, g_streams, g_reps);
    for (int k = 0; k < 3; k++) {
      const result *r = &res[k];
      fprintf(f,
              "%s{\"processes\": %d, \"take_ms\": %.4f, \"take_protobuf_ms\": %.4f, "
              "\"take_text_ms\": %.4f, \"by_process_protobuf_ms\": %.4f, "
              "\"by_process_text_ms\": %.4f, \"cpu_take_protobuf_ms\": %.4f, "
              "\"cpu_take_text_ms\": %.4f, \"publish_us\": %.2f, \"segment_bytes_per_class\": %.1f, "
              "\"protobuf_bytes\": %ld, \"text_bytes\": %ld, \"exemplars\": %ld}",
              k ? ", " : "", r->procs, r->take, r->take_pb, r->take_text, r->byproc_pb,
              r->byproc_text, r->cpu_take_pb, r->cpu_take_text, r->publish_us, r->seg_bytes_per_class, r->pb_bytes, r->text_bytes,
              r->exemplars);
    }
    fprintf(f,
            "], \"churn\": {\"processes\": %d, \"restarts\": %d, \"files_live\": %d, "
            "\"files_after_restarts\": %d, \"files_after_sigkill\": %d, \"files_after_all_exit\": %d, "
            "\"take_protobuf_ms\": %.4f, \"cpu_take_protobuf_ms\": %.4f}",
            sizes[2], ch.restarts, ch.files_before, ch.files_after_restarts, ch.files_after_kill,
            ch.files_after_all, ch.take_pb, ch.cpu_take_pb);
    fprintf(f, ", \"target_ms\": %.1f, \"met\": %s}\n", TARGET_MS, met ? "true" : "false");
    fclose(f);
  }
  return 0;
}
