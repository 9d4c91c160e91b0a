/*
 * test_stress.c — many threads, one registry: decode threads emitting
 * tokens, a canceller ending their streams from another thread (the client
 * cancel racing the decode loop), a class-adder growing the class table,
 * and a reader taking snapshots throughout. Two rounds of fresh threads
 * (with max_threads smaller than the thread count) so private shards are
 * handed over and the shared overflow shard is used.
 *
 * What it proves:
 *  - every counter and histogram count that a hook records when it returns
 *    TTFT_OK equals what the callers saw accepted: BEGUN, DROPPED, TOKENS,
 *    COMPLETED / CANCELLED / ERRORS (whichever stream_end returned OK),
 *    TTFT count, ITL count and ITL sum, STALLS, PREEMPTIONS, QUEUE;
 *  - every begun stream ended exactly once, nothing is left in flight;
 *  - what stream_end records from the slot (OUTPUT_TOKENS, TPOT/NO_TPOT,
 *    DECODE, ABANDONED) is consistent and within the bounds the race allows;
 *  - successive snapshots never see a count go down; quantiles are
 *    monotone in q and within [min, max].
 *
 * Size: TTFT_STRESS_THREADS (default 4) decode threads per round,
 * TTFT_STRESS_SEQS (default 3000) sequences per thread per round.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"

static _Atomic int g_failures;
#define FAIL(...)                                            \
  do {                                                       \
    fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);          \
    fprintf(stderr, __VA_ARGS__);                            \
    fputc('\n', stderr);                                     \
    atomic_fetch_add_explicit(&g_failures, 1, memory_order_relaxed); \
  } while (0)
#define CHECK_EQ_U(what, actual, expected)                                                    \
  do {                                                                                        \
    unsigned long long a_ = (unsigned long long)(actual), e_ = (unsigned long long)(expected); \
    if (a_ != e_) FAIL("%s: expected %llu, got %llu", what, e_, a_);                          \
  } while (0)
#define CHECK_LE_U(what, small, big)                                                          \
  do {                                                                                        \
    unsigned long long s_ = (unsigned long long)(small), b_ = (unsigned long long)(big);      \
    if (s_ > b_) FAIL("%s: expected %llu <= %llu", what, s_, b_);                             \
  } while (0)

#define MAX_THREADS_SHARDS 2        /* fewer than the threads: the shared shard is used */
#define STALL_NS 40000ull           /* 40 us of synthetic time                         */
#define CANCEL_T (UINT64_C(1) << 40) /* later than every synthetic time: no clamping  */
#define MAX_T 16
#define NCLASS_NAMES 12

static ttft_registry *R;
static int T = 4, S = 3000;
static _Atomic uint64_t g_current[MAX_T]; /* each decode thread's live handle, 0 if none */
/* every 16th sequence a decoder asks to be cancelled and keeps emitting
 * until the cancel lands: the race happens even where threads are
 * serialised (valgrind) or the scheduler keeps the canceller away */
static _Atomic int g_please[MAX_T];
#define FORCED_MAX_EMISSIONS 100000
static _Atomic int g_decoders_running;
static _Atomic int g_stop_reader;
static pthread_barrier_t g_start; /* decoders and canceller start together */

static uint64_t rnd(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

/* what one thread saw accepted */
typedef struct tally {
  uint64_t begun, dropped, tokens, emissions_first, itl_count, itl_sum, stalls, preempt, queue;
  uint64_t completed, cancelled, errors;
  uint64_t seqs_cut;       /* sequences that found their handle ended by the canceller */
  uint64_t late_tokens;    /* tokens of the last accepted emission of a cut sequence   */
  uint64_t late_emissions; /* 1 per cut sequence that had an accepted emission         */
} tally;

typedef struct decoder_arg {
  int id;
  uint64_t seed;
  tally t;
} decoder_arg;

static int find_class(uint64_t *rs) {
  char name[16];
  snprintf(name, sizeof name, "c%u", (unsigned)(rnd(rs) % NCLASS_NAMES));
  int id = ttft_class_find(R, name);
  return id >= 0 ? id : 0;
}

static void *decoder(void *p) {
  decoder_arg *a = p;
  tally *t = &a->t;
  uint64_t rs = a->seed;
  uint64_t now = (uint64_t)(a->id + 1) * 1000000000ull + (rs % 1000);
  pthread_barrier_wait(&g_start);
  for (int i = 0; i < S; i++) {
    ttft_seq s;
    if (rnd(&rs) % 2) {
      ttft_request req;
      ttft_request_init(&req);
      req.class_id = find_class(&rs);
      req.prompt_tokens = (uint32_t)(rnd(&rs) % 70000);
      req.prefix_hit = (int)(rnd(&rs) % 3) - 1;
      s = ttft_begin_ex(R, &req, now);
    } else {
      s = ttft_begin(R, now);
    }
    if (!s) {
      t->dropped++;
      continue;
    }
    t->begun++;
    atomic_store_explicit(&g_current[a->id], s, memory_order_relaxed);
    int cut = 0;
    if (rnd(&rs) % 2) {
      now += rnd(&rs) % 5000;
      int rc = ttft_mark(R, s, TTFT_PHASE_SCHEDULED, now);
      if (rc == TTFT_OK) t->queue++;
      else if (rc == TTFT_ESTALE) cut = 1;
      else FAIL("mark: %d", rc);
    }
    int forced = i % 16 == 5;
    int ntok = forced ? FORCED_MAX_EMISSIONS : (int)(rnd(&rs) % 40);
    uint32_t accepted = 0, last_n = 0;
    if (forced) atomic_store_explicit(&g_please[a->id], 1, memory_order_relaxed);
    for (int k = 0; k < ntok && !cut; k++) {
      if (forced) sched_yield();
      uint64_t r = rnd(&rs);
      uint64_t gap = (r % 8 == 0) ? STALL_NS + r % 30000 : r % 20000;
      now += gap;
      if (r % 97 == 0) {
        int rc = ttft_mark(R, s, TTFT_PHASE_PREEMPTED, now);
        if (rc == TTFT_OK) t->preempt++;
        else if (rc == TTFT_ESTALE) { cut = 1; break; }
        else FAIL("mark preempted: %d", rc);
      }
      uint32_t n = 1 + (uint32_t)((r >> 8) % 4);
      int rc = ttft_token_emitted(R, s, n, now);
      if (rc == TTFT_OK) {
        t->tokens += n;
        if (accepted == 0) {
          t->emissions_first++;
        } else {
          t->itl_count++;
          t->itl_sum += gap;
          if (gap > STALL_NS) t->stalls++;
        }
        accepted++;
        last_n = n;
      } else if (rc == TTFT_ESTALE) {
        cut = 1;
      } else {
        FAIL("token_emitted: %d", rc);
      }
    }
    atomic_store_explicit(&g_please[a->id], 0, memory_order_relaxed);
    atomic_store_explicit(&g_current[a->id], 0, memory_order_relaxed);
    if (!cut) {
      ttft_status st = (i % 7 == 3) ? TTFT_ERROR : TTFT_COMPLETED;
      now += 1000;
      int rc = ttft_stream_end(R, s, st, now);
      if (rc == TTFT_OK) {
        if (st == TTFT_ERROR) t->errors++;
        else t->completed++;
      } else if (rc == TTFT_ESTALE) {
        cut = 1;
      } else {
        FAIL("stream_end: %d", rc);
      }
    }
    if (cut) {
      t->seqs_cut++;
      if (accepted) {
        t->late_tokens += last_n;
        t->late_emissions++;
      }
      /* a second end of a dead stream is refused */
      if (ttft_stream_end(R, s, TTFT_COMPLETED, now) != TTFT_ESTALE) FAIL("double end accepted");
    }
  }
  if (a->id % 2) ttft_thread_release(R);
  return NULL;
}

typedef struct canceller_arg {
  uint64_t seed;
  uint64_t cancelled, attempts;
} canceller_arg;

static void *canceller(void *p) {
  canceller_arg *a = p;
  uint64_t rs = a->seed;
  pthread_barrier_wait(&g_start);
  while (atomic_load_explicit(&g_decoders_running, memory_order_relaxed)) {
    int i = (int)(rnd(&rs) % (uint64_t)T);
    uint64_t s = atomic_load_explicit(&g_current[i], memory_order_relaxed);
    if (!s) {
      sched_yield();
      continue;
    }
    if (!atomic_load_explicit(&g_please[i], memory_order_relaxed) && rnd(&rs) % 4) continue;
    a->attempts++;
    int rc = ttft_stream_end(R, s, TTFT_CANCELLED, CANCEL_T);
    if (rc == TTFT_OK) {
      a->cancelled++;
      atomic_store_explicit(&g_please[i], 0, memory_order_relaxed);
    } else if (rc != TTFT_ESTALE) FAIL("cancel: %d", rc);
  }
  return NULL;
}

static void *class_adder(void *p) {
  (void)p;
  for (int i = 0; i < NCLASS_NAMES; i++) {
    char name[16];
    snprintf(name, sizeof name, "c%d", i);
    ttft_slo slo;
    ttft_slo_init(&slo);
    slo.stall_threshold_ns = STALL_NS; /* same budget as the default: stalls stay predictable */
    slo.ttft_ns = 50000;
    int rc = ttft_class_add(R, name, &slo);
    if (rc < 1 && rc != TTFT_EEXIST && rc != TTFT_EFULL) FAIL("class_add: %d", rc);
  }
  return NULL;
}

/* ------------------------------------------------------------ the reader */
static uint64_t g_snapshots;

static void check_quantiles(const ttft_snapshot *s, int cls, ttft_metric m) {
  static const double qs[] = {0.0, 0.001, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0};
  uint64_t n = ttft_snapshot_class_count(s, cls, m);
  if (!n) return;
  uint64_t mn = ttft_snapshot_class_quantile(s, cls, m, 0.0);
  uint64_t mx = ttft_snapshot_class_quantile(s, cls, m, 1.0);
  uint64_t prev = 0;
  for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
    uint64_t v = ttft_snapshot_class_quantile(s, cls, m, qs[i]);
    if (v < mn || v > mx) FAIL("class %d %s q%.3f = %llu outside [%llu, %llu]", cls, ttft_metric_name(m),
                               qs[i], (unsigned long long)v, (unsigned long long)mn, (unsigned long long)mx);
    if (v < prev) FAIL("class %d %s q%.3f = %llu < previous %llu", cls, ttft_metric_name(m), qs[i],
                       (unsigned long long)v, (unsigned long long)prev);
    prev = v;
  }
}

static void *reader(void *p) {
  (void)p;
  ttft_snapshot *prev = NULL;
  uint64_t rs = 99;
  char *buf = malloc(1 << 20);
  if (!buf) {
    FAIL("malloc");
    return NULL;
  }
  while (!atomic_load_explicit(&g_stop_reader, memory_order_relaxed)) {
    ttft_snapshot *s = ttft_snapshot_take(R);
    if (!s) {
      FAIL("snapshot_take returned NULL");
      break;
    }
    g_snapshots++;
    if (prev) {
      for (int c = 0; c < TTFT_COUNTER_COUNT_; c++) {
        uint64_t a = ttft_snapshot_counter(prev, (ttft_counter)c), b = ttft_snapshot_counter(s, (ttft_counter)c);
        if (b < a) FAIL("counter %s went down: %llu -> %llu", ttft_counter_name((ttft_counter)c),
                        (unsigned long long)a, (unsigned long long)b);
      }
      for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
        uint64_t a = ttft_snapshot_count(prev, (ttft_metric)m), b = ttft_snapshot_count(s, (ttft_metric)m);
        if (b < a) FAIL("count of %s went down: %llu -> %llu", ttft_metric_name((ttft_metric)m),
                        (unsigned long long)a, (unsigned long long)b);
      }
      int err = 0;
      ttft_snapshot *d = ttft_snapshot_delta(s, prev, &err);
      if (!d) {
        FAIL("delta of successive snapshots: %d", err);
      } else {
        for (int c = 0; c < TTFT_COUNTER_COUNT_; c++)
          CHECK_EQ_U("delta counter", ttft_snapshot_counter(d, (ttft_counter)c),
                     ttft_snapshot_counter(s, (ttft_counter)c) - ttft_snapshot_counter(prev, (ttft_counter)c));
        ttft_snapshot_free(d);
      }
    }
    for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
      check_quantiles(s, TTFT_CLASS_ALL, (ttft_metric)m);
      check_quantiles(s, 0, (ttft_metric)m);
    }
    ttft_format f = (ttft_format)(rnd(&rs) % TTFT_FORMAT_COUNT_);
    long n = ttft_snapshot_format(s, f, buf, 1 << 20);
    /* the protobuf exposition is binary: NULs inside, no strlen */
    if (n < 0 || n >= (1 << 20) ||
        (f != TTFT_FORMAT_PROMETHEUS_PROTOBUF && strlen(buf) != (size_t)n))
      FAIL("format %d: %ld", (int)f, n);
    long inflight = ttft_inflight(R);
    if (inflight < 0 || inflight > 1024) FAIL("inflight %ld", inflight);
    long st = ttft_stalled_now(R, TTFT_NOW);
    if (st < 0 || st > 1024) FAIL("stalled_now %ld", st);
    uint64_t h = atomic_load_explicit(&g_current[rnd(&rs) % (uint64_t)T], memory_order_relaxed);
    if (h) {
      ttft_seq_info info;
      memset(&info, 0, sizeof info);
      info.struct_size = sizeof info;
      int rc = ttft_seq_stats(R, h, &info);
      if (rc == TTFT_OK) {
        if (info.tokens < info.emissions) FAIL("seq_stats: %llu tokens < %u emissions",
                                               (unsigned long long)info.tokens, info.emissions);
        if (info.emissions >= 2 && info.itl_p50_ns > info.itl_max_ns) FAIL("seq_stats p50 > max");
      } else if (rc != TTFT_ESTALE) {
        FAIL("seq_stats: %d", rc);
      }
    }
    ttft_snapshot_free(prev);
    prev = s;
  }
  ttft_snapshot_free(prev);
  free(buf);
  return NULL;
}

static int env_int(const char *name, int def, int lo, int hi) {
  const char *v = getenv(name);
  if (!v || !*v) return def;
  int x = atoi(v);
  return x < lo ? lo : x > hi ? hi : x;
}

int main(void) {
  T = env_int("TTFT_STRESS_THREADS", 4, 1, MAX_T);
  S = env_int("TTFT_STRESS_SEQS", 3000, 1, 10000000);
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.max_inflight = 256;
  cfg.max_threads = MAX_THREADS_SHARDS;
  cfg.max_classes = 8; /* fewer than the adder tries: EFULL is exercised */
  cfg.stall_threshold_ns = STALL_NS;
  R = ttft_registry_new(&cfg);
  if (!R) {
    fprintf(stderr, "registry_new failed\n");
    return 1;
  }

  tally total;
  memset(&total, 0, sizeof total);
  uint64_t cancelled = 0, attempts = 0;
  pthread_t rd;
  pthread_create(&rd, NULL, reader, NULL);
  const int rounds = 2;
  for (int round = 0; round < rounds; round++) {
    decoder_arg args[MAX_T];
    pthread_t th[MAX_T], cn, ca;
    canceller_arg cargs = {.seed = 0x9E3779B97F4A7C15ull + (uint64_t)round};
    atomic_store_explicit(&g_decoders_running, 1, memory_order_relaxed);
    pthread_barrier_init(&g_start, NULL, (unsigned)T + 1);
    for (int i = 0; i < T; i++) {
      memset(&args[i], 0, sizeof args[i]);
      args[i].id = i;
      args[i].seed = 0x1234567ull * (uint64_t)(i + 1) + (uint64_t)round * 77;
    }
    pthread_create(&cn, NULL, canceller, &cargs);
    if (round == 0) pthread_create(&ca, NULL, class_adder, NULL);
    for (int i = 0; i < T; i++) pthread_create(&th[i], NULL, decoder, &args[i]);
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    atomic_store_explicit(&g_decoders_running, 0, memory_order_relaxed);
    pthread_join(cn, NULL);
    if (round == 0) pthread_join(ca, NULL);
    pthread_barrier_destroy(&g_start);
    for (int i = 0; i < T; i++) {
      tally *t = &args[i].t;
      total.begun += t->begun;
      total.dropped += t->dropped;
      total.tokens += t->tokens;
      total.emissions_first += t->emissions_first;
      total.itl_count += t->itl_count;
      total.itl_sum += t->itl_sum;
      total.stalls += t->stalls;
      total.preempt += t->preempt;
      total.queue += t->queue;
      total.completed += t->completed;
      total.errors += t->errors;
      total.seqs_cut += t->seqs_cut;
      total.late_tokens += t->late_tokens;
      total.late_emissions += t->late_emissions;
    }
    cancelled += cargs.cancelled;
    attempts += cargs.attempts;
  }
  atomic_store_explicit(&g_stop_reader, 1, memory_order_relaxed);
  pthread_join(rd, NULL);

  ttft_snapshot *s = ttft_snapshot_take(R);
  if (!s) {
    fprintf(stderr, "final snapshot failed\n");
    return 1;
  }
#define CTR(c) ttft_snapshot_counter(s, TTFT_COUNTER_##c)
#define CNT(m) ttft_snapshot_count(s, TTFT_METRIC_##m)
  /* what the OK-returning call itself recorded: exact */
  CHECK_EQ_U("BEGUN", CTR(BEGUN), total.begun);
  CHECK_EQ_U("DROPPED", CTR(DROPPED), total.dropped);
  CHECK_EQ_U("TOKENS", CTR(TOKENS), total.tokens);
  CHECK_EQ_U("COMPLETED", CTR(COMPLETED), total.completed);
  CHECK_EQ_U("ERRORS", CTR(ERRORS), total.errors);
  CHECK_EQ_U("CANCELLED", CTR(CANCELLED), cancelled);
  CHECK_EQ_U("sequences cut = cancels won", total.seqs_cut, cancelled);
  if (cancelled == 0) FAIL("no cancel won a race: the test did not test the race (%llu tries)",
                           (unsigned long long)attempts);
  CHECK_EQ_U("every begun stream ended once", CTR(COMPLETED) + CTR(CANCELLED) + CTR(ERRORS), total.begun);
  CHECK_EQ_U("STALLS", CTR(STALLS), total.stalls);
  CHECK_EQ_U("PREEMPTIONS", CTR(PREEMPTIONS), total.preempt);
  CHECK_EQ_U("CLOCK_CLAMPED", CTR(CLOCK_CLAMPED), 0);
  CHECK_EQ_U("TTFT count", CNT(TTFT), total.emissions_first);
  CHECK_EQ_U("ITL count", CNT(ITL), total.itl_count);
  CHECK_EQ_U("ITL sum", ttft_snapshot_sum(s, TTFT_METRIC_ITL), total.itl_sum);
  CHECK_EQ_U("QUEUE count", CNT(QUEUE), total.queue);
  CHECK_EQ_U("E2E count", CNT(E2E), total.begun);
  CHECK_EQ_U("OUTPUT_TOKENS count", CNT(OUTPUT_TOKENS), total.begun);
  CHECK_EQ_U("inflight gauge", ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT), 0);
  CHECK_EQ_U("ttft_inflight", (uint64_t)ttft_inflight(R), 0);
  /* what stream_end read from the slot: consistent, and within what a
   * racing emission (accepted while the end was being recorded) allows */
  CHECK_EQ_U("TPOT + NO_TPOT = ended", CNT(TPOT) + CTR(NO_TPOT), total.begun);
  CHECK_EQ_U("ABANDONED = ABANDONED_WAIT count", CTR(ABANDONED), CNT(ABANDONED_WAIT));
  CHECK_EQ_U("SEQ_ITL_P95 count = SEQ_ITL_MAX count", CNT(SEQ_ITL_P95), CNT(SEQ_ITL_MAX));
  CHECK_LE_U("ABANDONED <= CANCELLED", CTR(ABANDONED), CTR(CANCELLED));
  CHECK_LE_U("STALLED_SEQS <= STALLS", CTR(STALLED_SEQS), CTR(STALLS));
  CHECK_LE_U("SLO_MET <= COMPLETED", CTR(SLO_MET), CTR(COMPLETED));
  uint64_t out_sum = ttft_snapshot_sum(s, TTFT_METRIC_OUTPUT_TOKENS);
  CHECK_LE_U("OUTPUT_TOKENS sum <= TOKENS", out_sum, total.tokens);
  CHECK_LE_U("TOKENS - OUTPUT_TOKENS sum <= late tokens", total.tokens - out_sum, total.late_tokens);
  CHECK_LE_U("DECODE count <= TTFT count", CNT(DECODE), CNT(TTFT));
  CHECK_LE_U("TTFT count - DECODE count <= late emissions", CNT(TTFT) - CNT(DECODE), total.late_emissions);
  CHECK_LE_U("SEQ_ITL_MAX count <= sequences with 2 emissions", CNT(SEQ_ITL_MAX), CNT(TTFT));
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) check_quantiles(s, TTFT_CLASS_ALL, (ttft_metric)m);
  int ncls = ttft_snapshot_classes(s);
  uint64_t per_class_tokens = 0;
  for (int c = 0; c < ncls; c++) per_class_tokens += ttft_snapshot_class_counter(s, c, TTFT_COUNTER_TOKENS);
  CHECK_EQ_U("sum over classes of TOKENS", per_class_tokens, total.tokens);
  CHECK_EQ_U("classes", (uint64_t)ncls, 8);

  printf("test_stress: %d threads x %d seqs x 2 rounds (+canceller, class adder, reader): "
         "%llu begun, %llu tokens, %llu emissions after first, %llu cancels won of %llu tries, "
         "%llu snapshots; stream_end missed %llu late tokens (%llu emissions) of racing calls\n",
         T, S, (unsigned long long)total.begun, (unsigned long long)total.tokens,
         (unsigned long long)total.itl_count, (unsigned long long)cancelled, (unsigned long long)attempts,
         (unsigned long long)g_snapshots, (unsigned long long)(total.tokens - out_sum),
         (unsigned long long)(CNT(TTFT) - CNT(DECODE)));
  ttft_snapshot_free(s);
  ttft_registry_free(R);
  int f = atomic_load_explicit(&g_failures, memory_order_relaxed);
  if (f) {
    fprintf(stderr, "test_stress: %d failure(s)\n", f);
    return 1;
  }
  printf("test_stress: ok\n");
  return 0;
}
