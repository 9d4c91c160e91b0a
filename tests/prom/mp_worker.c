/*
 * mp_worker.c — one C worker process of the many-process Prometheus test
 * (multiproc_test.py; mp_worker.py is its Python twin, same workload, same
 * ledger). It records a deterministic workload with caller timestamps into
 * a registry that publishes into a shared directory, in small batches, and
 * keeps a ledger of exactly what it recorded:
 *
 *   for each batch:
 *     1. plan the batch (seeded splitmix64) and append one line per stream
 *        to the ledger, written whole with one write(2):
 *          S <class> <status> <ttft_ns> <gap_ns> <gap_ns> ...
 *        (class chat|code|batch; status completed|cancelled|error; the
 *        stream emits one token at ttft and one after each gap, then ends
 *        END_NS after its last token);
 *     2. record the batch through the hooks: its streams begin together,
 *        the first one plays to its end, a pause of 40 ms (so that most
 *        SIGKILLs land inside a batch, with the second stream in flight
 *        and the first one perhaps published by the background thread),
 *        then the others;
 *     3. ttft_publish;
 *     4. append "C\n" to the ledger.
 * So for a worker that was SIGKILLed, every stream before the last "C" was
 * published (a lower bound of what the gather holds), and the stream lines
 * after it were perhaps recorded and perhaps published by the background
 * thread (the upper bound): the test knows the loss window exactly.
 *
 * Workload (the same in mp_worker.py): classes chat (TTFT budget 500 ms,
 * TPOT 60 ms), code (1 s, 40 ms), batch (5 s, no TPOT budget); the
 * registry's stall budget (500 ms) for all. A stream: class 50 % chat,
 * 30 % code, 20 % batch; TTFT lognormal around the worker's median
 * (MEDIAN_MS[id], sigma 0.6); 1..40 tokens; 92 % completed, 5 % cancelled
 * and 3 % error after a random number of them; gaps lognormal (30 ms,
 * sigma 0.5) capped at 450 ms, 1 % of them stalls of 600..1500 ms.
 *
 * usage: ttft-prom-mp-worker ID NAME SHARED_DIR LEDGER GATE SEED
 *   prints "ready" once its registry, its classes and its first segment
 *   exist; records once the file GATE exists; SIGTERM: finishes the batch,
 *   frees the registry (its final publish) and exits 0. Exits by itself
 *   after 600 s (SIGALRM) so a killed driver leaves nothing behind.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ttft.h"

#define BATCH 2                       /* streams per batch: the loss window */
#define PAUSE_NS 40000000L            /* after a batch's first stream ends */
#define END_NS UINT64_C(1000000)      /* stream end after its last token */
#define STALL_CAP UINT64_C(450000000) /* ordinary gaps stay below the budget */

static const double MEDIAN_MS[8] = {150, 250, 400, 800, 300, 200, 600, 1200};
static const char *const CLASS_NAMES[3] = {"chat", "code", "batch"};
static const char *const STATUS_NAMES[3] = {"completed", "cancelled", "error"};

static uint64_t g_rng;
static uint64_t rnd(void) { /* splitmix64 */
  uint64_t z = (g_rng += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}
static double unit(void) { return ((double)(rnd() >> 11) + 0.5) * 0x1.0p-53; } /* (0,1) */
static uint64_t lognormal_ns(double median_s, double sigma) {
  double z = sqrt(-2.0 * log(unit())) * cos(6.283185307179586 * unit());
  return (uint64_t)(median_s * exp(sigma * z) * 1e9) + 1;
}

static volatile sig_atomic_t g_stop;
static void on_term(int sig) {
  (void)sig;
  g_stop = 1;
}

typedef struct plan {
  int cls, status;
  uint64_t ttft;
  unsigned ngaps;
  uint64_t gaps[40];
} plan;

static void make_plan(plan *p, int id) {
  double u = unit();
  p->cls = u < 0.5 ? 0 : u < 0.8 ? 1 : 2;
  p->ttft = lognormal_ns(MEDIAN_MS[id % 8] / 1000.0, 0.6);
  unsigned tokens = 1 + (unsigned)(rnd() % 40);
  u = unit();
  p->status = u < 0.92 ? 0 : u < 0.97 ? 1 : 2;
  if (p->status) tokens = 1 + (unsigned)(rnd() % tokens); /* stopped early */
  p->ngaps = tokens - 1;
  for (unsigned i = 0; i < p->ngaps; i++) {
    if (unit() < 0.01) {
      p->gaps[i] = 600000000 + rnd() % 900000001; /* a stall */
    } else {
      uint64_t g = lognormal_ns(0.030, 0.5);
      p->gaps[i] = g > STALL_CAP ? STALL_CAP : g;
    }
  }
}

static int write_all(int fd, const char *buf, size_t len) {
  while (len) {
    ssize_t n = write(fd, buf, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    buf += n, len -= (size_t)n;
  }
  return 0;
}

static void die(const char *name, const char *what) {
  fprintf(stderr, "mp_worker %s: %s\n", name, what);
  exit(1);
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: %s ID NAME SHARED_DIR LEDGER GATE SEED\n", argv[0]);
    return 1;
  }
  const int id = atoi(argv[1]);
  const char *name = argv[2], *dir = argv[3], *gate = argv[5];
  g_rng = strtoull(argv[6], NULL, 10);
  alarm(600);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL); /* no SA_RESTART: a pause ends at once */

  int fd = open(argv[4], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) die(name, "cannot open the ledger");

  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.max_inflight = 64;
  cfg.model = "mp-test";
  cfg.shared_dir = dir;
  cfg.process_name = name;
  cfg.publish_interval_ms = 100;
  char why[512];
  if (ttft_config_check(&cfg, why, sizeof why) != TTFT_OK) die(name, why);
  ttft_registry *r = ttft_registry_new(&cfg);
  if (!r) die(name, "ttft_registry_new failed");
  int cls[3];
  for (int c = 0; c < 3; c++) {
    ttft_slo slo;
    ttft_slo_init(&slo);
    slo.ttft_ns = c == 0 ? 500000000 : c == 1 ? 1000000000 : 5000000000u;
    slo.tpot_ns = c == 0 ? 60000000 : c == 1 ? 40000000 : 0;
    cls[c] = ttft_class_add(r, CLASS_NAMES[c], &slo);
    if (cls[c] < 0) die(name, "ttft_class_add failed");
  }
  if (ttft_publish(r) != TTFT_OK) die(name, "first ttft_publish failed");
  printf("ready\n");
  fflush(stdout);

  struct stat st;
  while (!g_stop && stat(gate, &st) != 0) {
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }

  static char line[BATCH * 1024];
  uint64_t t = UINT64_C(1000000000000); /* caller clock, ns */
  while (!g_stop) {
    plan p[BATCH];
    size_t len = 0;
    for (int i = 0; i < BATCH; i++) {
      make_plan(&p[i], id);
      len += (size_t)snprintf(line + len, sizeof line - len, "S %s %s %llu", CLASS_NAMES[p[i].cls],
                              STATUS_NAMES[p[i].status], (unsigned long long)p[i].ttft);
      for (unsigned k = 0; k < p[i].ngaps; k++)
        len += (size_t)snprintf(line + len, sizeof line - len, " %llu",
                                (unsigned long long)p[i].gaps[k]);
      line[len++] = '\n';
    }
    if (write_all(fd, line, len)) die(name, "ledger write failed");
    ttft_seq seqs[BATCH];
    uint64_t t0[BATCH], end = t;
    for (int i = 0; i < BATCH; i++) { /* begun together, as a busy server would */
      ttft_request req;
      ttft_request_init(&req);
      req.class_id = cls[p[i].cls];
      t0[i] = t + (uint64_t)i * 1000;
      seqs[i] = ttft_begin_ex(r, &req, t0[i]);
      if (!seqs[i]) die(name, "begin refused");
    }
    for (int i = 0; i < BATCH; i++) {
      uint64_t at = t0[i] + p[i].ttft;
      ttft_token_emitted(r, seqs[i], 1, at);
      for (unsigned k = 0; k < p[i].ngaps; k++) {
        at += p[i].gaps[k];
        ttft_token_emitted(r, seqs[i], 1, at);
      }
      ttft_stream_end(r, seqs[i], (ttft_status)p[i].status, at + END_NS);
      if (at + END_NS > end) end = at + END_NS;
      if (i == 0) { /* the pause inside the batch: a SIGKILL lands mid-batch */
        struct timespec ts = {0, PAUSE_NS};
        nanosleep(&ts, NULL);
      }
    }
    t = end + 1000;
    if (ttft_publish(r) != TTFT_OK) die(name, "ttft_publish failed");
    if (write_all(fd, "C\n", 2)) die(name, "ledger write failed");
  }
  ttft_registry_free(r); /* the final publish */
  close(fd);
  return 0;
}
