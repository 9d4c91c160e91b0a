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
#include "task.h"

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

static ttft_seq begin_one(uint64_t *rs, uint64_t now) {
  if (!(rnd(rs) % 2)) return ttft_begin(R, now);
  ttft_request req;
  ttft_request_init(&req);
  req.class_id = find_class(rs);
  req.prompt_tokens = (uint32_t)(rnd(rs) % 70000);
  req.prefix_hit = (int)(rnd(rs) % 3) - 1;
  return ttft_begin_ex(R, &req, now);
}

/* One sequence's emissions as its decoder saw them. A hook that returns
 * anything but TTFT_OK must return TTFT_ESTALE: only the canceller ends a
 * stream its decoder still holds. */
typedef struct emissions {
  uint32_t accepted, last_n; /* accepted emissions; tokens of the last one */
  int cut;                   /* the canceller ended the stream first */
} emissions;

/* Up to 40 emissions (forced: until the canceller cuts the stream, which
 * it is asked to do), a preemption now and then. */
static void emit(decoder_arg *a, ttft_seq s, int forced, uint64_t *rs, uint64_t *now, emissions *e) {
  tally *t = &a->t;
  int ntok = forced ? FORCED_MAX_EMISSIONS : (int)(rnd(rs) % 40);
  if (forced) atomic_store_explicit(&g_please[a->id], 1, memory_order_relaxed);
  for (int k = 0; k < ntok && !e->cut; k++) {
    if (forced) sched_yield();
    uint64_t r = rnd(rs);
    uint64_t gap = (r % 8 == 0) ? STALL_NS + r % 30000 : r % 20000;
    *now += gap;
    if (r % 97 == 0) {
      int rc = ttft_mark(R, s, TTFT_PHASE_PREEMPTED, *now);
      if (rc == TTFT_OK) {
        t->preempt++;
      } else {
        EXPECT_ERR(TTFT_ESTALE, rc);
        e->cut = 1;
        break;
      }
    }
    uint32_t n = 1 + (uint32_t)((r >> 8) % 4);
    int rc = ttft_token_emitted(R, s, n, *now);
    if (rc != TTFT_OK) {
      EXPECT_ERR(TTFT_ESTALE, rc);
      e->cut = 1;
      break;
    }
    t->tokens += n;
    if (e->accepted == 0) {
      t->emissions_first++;
    } else {
      t->itl_count++;
      t->itl_sum += gap;
      if (gap > STALL_NS) t->stalls++;
    }
    e->accepted++;
    e->last_n = n;
  }
  atomic_store_explicit(&g_please[a->id], 0, memory_order_relaxed);
}

static void *decoder(void *p) {
  decoder_arg *a = p;
  tally *t = &a->t;
  uint64_t rs = a->seed;
  uint64_t now = (uint64_t)(a->id + 1) * 1000000000ull + (rs % 1000);
  pthread_barrier_wait(&g_start);
  for (int i = 0; i < S; i++) {
    ttft_seq s = begin_one(&rs, now);
    if (!s) {
      t->dropped++;
      continue;
    }
    t->begun++;
    atomic_store_explicit(&g_current[a->id], s, memory_order_relaxed);
    emissions e = {0, 0, 0};
    if (rnd(&rs) % 2) {
      now += rnd(&rs) % 5000;
      int rc = ttft_mark(R, s, TTFT_PHASE_SCHEDULED, now);
      if (rc == TTFT_OK) {
        t->queue++;
      } else {
        EXPECT_ERR(TTFT_ESTALE, rc);
        e.cut = 1;
      }
    }
    emit(a, s, i % 16 == 5, &rs, &now, &e);
    atomic_store_explicit(&g_current[a->id], 0, memory_order_relaxed);
    if (!e.cut) {
      ttft_status st = (i % 7 == 3) ? TTFT_ERROR : TTFT_COMPLETED;
      now += 1000;
      int rc = ttft_stream_end(R, s, st, now);
      if (rc == TTFT_OK) {
        if (st == TTFT_ERROR) t->errors++;
        else t->completed++;
      } else {
        EXPECT_ERR(TTFT_ESTALE, rc);
        e.cut = 1;
      }
    }
    if (e.cut) {
      t->seqs_cut++;
      if (e.accepted) {
        t->late_tokens += e.last_n;
        t->late_emissions++;
      }
      /* a second end of a dead stream is refused */
      EXPECT_ERR(TTFT_ESTALE, ttft_stream_end(R, s, TTFT_COMPLETED, now));
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
    } else if (rc != TTFT_ESTALE) {
      /* it lost the race (the stream ended first): millions of times a
       * run, so only a failure is counted */
      EXPECT_ERR(TTFT_ESTALE, rc);
    }
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
    if (rc < 1 && rc != TTFT_EEXIST) EXPECT_ERR(TTFT_EFULL, rc);
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
    if (v < mn || v > mx || v < prev)
      fprintf(stderr, "  (class %d %s q%.3f)\n", cls, ttft_metric_name(m), qs[i]);
    EXPECT_GE_U64(v, mn);
    EXPECT_LE_U64(v, mx);
    EXPECT_GE_U64(v, prev); /* monotone in q */
    prev = v;
  }
}

/* successive snapshots: no counter or count goes down; their delta is the
 * difference of the counters */
static void expect_successive(const ttft_snapshot *prev, const ttft_snapshot *s) {
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++) {
    uint64_t a = ttft_snapshot_counter(prev, (ttft_counter)c), b = ttft_snapshot_counter(s, (ttft_counter)c);
    if (b < a) fprintf(stderr, "  (counter %s went down)\n", ttft_counter_name((ttft_counter)c));
    EXPECT_GE_U64(b, a);
  }
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
    uint64_t a = ttft_snapshot_count(prev, (ttft_metric)m), b = ttft_snapshot_count(s, (ttft_metric)m);
    if (b < a) fprintf(stderr, "  (count of %s went down)\n", ttft_metric_name((ttft_metric)m));
    EXPECT_GE_U64(b, a);
  }
  int err = 1;
  ttft_snapshot *d = ttft_snapshot_delta(s, prev, &err);
  EXPECT_ERR(TTFT_OK, err);
  EXPECT_NOT_NULL(d);
  if (!d) return;
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++)
    EXPECT_EQ_U64(ttft_snapshot_counter(s, (ttft_counter)c) - ttft_snapshot_counter(prev, (ttft_counter)c),
                  ttft_snapshot_counter(d, (ttft_counter)c));
  ttft_snapshot_free(d);
}

static void *reader(void *p) {
  (void)p;
  ttft_snapshot *prev = NULL;
  uint64_t rs = 99;
  char *buf = malloc(1 << 20);
  EXPECT_NOT_NULL(buf);
  if (!buf) return NULL;
  while (!atomic_load_explicit(&g_stop_reader, memory_order_relaxed)) {
    ttft_snapshot *s = ttft_snapshot_take(R);
    EXPECT_NOT_NULL(s);
    if (!s) break;
    g_snapshots++;
    if (prev) expect_successive(prev, s);
    for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
      check_quantiles(s, TTFT_CLASS_ALL, (ttft_metric)m);
      check_quantiles(s, 0, (ttft_metric)m);
    }
    ttft_format f = (ttft_format)(rnd(&rs) % TTFT_FORMAT_COUNT_);
    long n = ttft_snapshot_format(s, f, buf, 1 << 20);
    EXPECT_GE_INT(n, 0);
    EXPECT_LT_INT(n, 1 << 20);
    /* the protobuf formats are binary: NULs inside, no strlen */
    if (n >= 0 && n < (1 << 20) && f != TTFT_FORMAT_PROMETHEUS_PROTOBUF &&
        f != TTFT_FORMAT_OTLP_PROTOBUF)
      EXPECT_EQ_U64(n, strlen(buf));
    long inflight = ttft_inflight(R);
    EXPECT_GE_INT(inflight, 0);
    EXPECT_LE_INT(inflight, 1024);
    long st = ttft_stalled_now(R, TTFT_NOW);
    EXPECT_GE_INT(st, 0);
    EXPECT_LE_INT(st, 1024);
    uint64_t h = atomic_load_explicit(&g_current[rnd(&rs) % (uint64_t)T], memory_order_relaxed);
    if (h) {
      ttft_seq_info info;
      memset(&info, 0, sizeof info);
      info.struct_size = sizeof info;
      int rc = ttft_seq_stats(R, h, &info);
      if (rc == TTFT_OK) {
        EXPECT_GE_U64(info.tokens, info.emissions);
        if (info.emissions >= 2) EXPECT_LE_U64(info.itl_p50_ns, info.itl_max_ns);
      } else {
        EXPECT_ERR(TTFT_ESTALE, rc); /* it ended meanwhile */
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

static void tally_add(tally *total, const tally *t) {
  total->begun += t->begun;
  total->dropped += t->dropped;
  total->tokens += t->tokens;
  total->emissions_first += t->emissions_first;
  total->itl_count += t->itl_count;
  total->itl_sum += t->itl_sum;
  total->stalls += t->stalls;
  total->preempt += t->preempt;
  total->queue += t->queue;
  total->completed += t->completed;
  total->errors += t->errors;
  total->seqs_cut += t->seqs_cut;
  total->late_tokens += t->late_tokens;
  total->late_emissions += t->late_emissions;
}

/* One round: T fresh decoders and a canceller start together (round 0
 * also adds classes meanwhile); what they saw accepted goes into *total. */
static void run_round(int round, tally *total, canceller_arg *cargs) {
  decoder_arg args[MAX_T];
  pthread_t th[MAX_T], cn, ca;
  memset(cargs, 0, sizeof *cargs);
  cargs->seed = 0x9E3779B97F4A7C15ull + (uint64_t)round;
  atomic_store_explicit(&g_decoders_running, 1, memory_order_relaxed);
  pthread_barrier_init(&g_start, NULL, (unsigned)T + 1);
  for (int i = 0; i < T; i++) {
    memset(&args[i], 0, sizeof args[i]);
    args[i].id = i;
    args[i].seed = 0x1234567ull * (uint64_t)(i + 1) + (uint64_t)round * 77;
  }
  EXPECT_EQ_INT(0, pthread_create(&cn, NULL, canceller, cargs));
  if (round == 0) EXPECT_EQ_INT(0, pthread_create(&ca, NULL, class_adder, NULL));
  for (int i = 0; i < T; i++) EXPECT_EQ_INT(0, pthread_create(&th[i], NULL, decoder, &args[i]));
  for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
  atomic_store_explicit(&g_decoders_running, 0, memory_order_relaxed);
  pthread_join(cn, NULL);
  if (round == 0) pthread_join(ca, NULL);
  pthread_barrier_destroy(&g_start);
  for (int i = 0; i < T; i++) tally_add(total, &args[i].t);
}

#define CTR(c) ttft_snapshot_counter(s, TTFT_COUNTER_##c)
#define CNT(m) ttft_snapshot_count(s, TTFT_METRIC_##m)

/* what the OK-returning call itself recorded: exact */
static void expect_exact(const ttft_snapshot *s, const tally *total, uint64_t cancelled, uint64_t attempts) {
  EXPECT_EQ_U64(total->begun, CTR(BEGUN));
  EXPECT_EQ_U64(total->dropped, CTR(DROPPED));
  EXPECT_EQ_U64(total->tokens, CTR(TOKENS));
  EXPECT_EQ_U64(total->completed, CTR(COMPLETED));
  EXPECT_EQ_U64(total->errors, CTR(ERRORS));
  EXPECT_EQ_U64(cancelled, CTR(CANCELLED));
  EXPECT_EQ_U64(cancelled, total->seqs_cut); /* sequences cut = cancels won */
  if (cancelled == 0)
    fprintf(stderr, "  no cancel won a race: the test did not test the race (%llu tries)\n",
            (unsigned long long)attempts);
  EXPECT_GT_U64(cancelled, 0);
  EXPECT_EQ_U64(total->begun, CTR(COMPLETED) + CTR(CANCELLED) + CTR(ERRORS)); /* each ended once */
  EXPECT_EQ_U64(total->stalls, CTR(STALLS));
  EXPECT_EQ_U64(total->preempt, CTR(PREEMPTIONS));
  EXPECT_EQ_U64(0, CTR(CLOCK_CLAMPED));
  EXPECT_EQ_U64(total->emissions_first, CNT(TTFT));
  EXPECT_EQ_U64(total->itl_count, CNT(ITL));
  EXPECT_EQ_U64(total->itl_sum, ttft_snapshot_sum(s, TTFT_METRIC_ITL));
  EXPECT_EQ_U64(total->queue, CNT(QUEUE));
  EXPECT_EQ_U64(total->begun, CNT(E2E));
  EXPECT_EQ_U64(total->begun, CNT(OUTPUT_TOKENS));
  EXPECT_EQ_U64(0, ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT));
  EXPECT_EQ_INT(0, ttft_inflight(R));
}

/* what stream_end read from the slot: consistent, and within what a racing
 * emission (accepted while the end was being recorded) allows */
static void expect_consistent(const ttft_snapshot *s, const tally *total) {
  EXPECT_EQ_U64(total->begun, CNT(TPOT) + CTR(NO_TPOT)); /* TPOT + NO_TPOT = ended */
  EXPECT_EQ_U64(CTR(ABANDONED), CNT(ABANDONED_WAIT));
  EXPECT_EQ_U64(CNT(SEQ_ITL_P95), CNT(SEQ_ITL_MAX));
  EXPECT_LE_U64(CTR(ABANDONED), CTR(CANCELLED));
  EXPECT_LE_U64(CTR(STALLED_SEQS), CTR(STALLS));
  EXPECT_LE_U64(CTR(SLO_MET), CTR(COMPLETED));
  uint64_t out_sum = ttft_snapshot_sum(s, TTFT_METRIC_OUTPUT_TOKENS);
  EXPECT_LE_U64(out_sum, total->tokens);
  EXPECT_LE_U64(total->tokens - out_sum, total->late_tokens);
  EXPECT_LE_U64(CNT(DECODE), CNT(TTFT));
  EXPECT_LE_U64(CNT(TTFT) - CNT(DECODE), total->late_emissions);
  EXPECT_LE_U64(CNT(SEQ_ITL_MAX), CNT(TTFT)); /* at most the sequences with 2 emissions */
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) check_quantiles(s, TTFT_CLASS_ALL, (ttft_metric)m);
  int ncls = ttft_snapshot_classes(s);
  uint64_t per_class_tokens = 0;
  for (int c = 0; c < ncls; c++) per_class_tokens += ttft_snapshot_class_counter(s, c, TTFT_COUNTER_TOKENS);
  EXPECT_EQ_U64(total->tokens, per_class_tokens); /* the sum over classes of TOKENS */
  EXPECT_EQ_INT(8, ncls);
}

/* One test: every check is about the same run of racing threads (the
 * reader checks each snapshot while it runs; the end checks compare the
 * registry with what the threads saw accepted), and a run per check would
 * multiply its cost, under TSan and valgrind too. */
TEST(counts_under_races) {
  T = env_int("TTFT_STRESS_THREADS", 4, 1, MAX_T);
  S = env_int("TTFT_STRESS_SEQS", 3000, 1, 10000000);
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.max_inflight = 256;
  cfg.max_threads = MAX_THREADS_SHARDS;
  cfg.max_classes = 8; /* fewer than the adder tries: EFULL is exercised */
  cfg.stall_threshold_ns = STALL_NS;
  R = ttft_registry_new(&cfg);
  EXPECT_NOT_NULL(R);
  if (!R) return;

  tally total;
  memset(&total, 0, sizeof total);
  uint64_t cancelled = 0, attempts = 0;
  pthread_t rd;
  g_snapshots = 0;
  atomic_store_explicit(&g_stop_reader, 0, memory_order_relaxed);
  EXPECT_EQ_INT(0, pthread_create(&rd, NULL, reader, NULL));
  for (int round = 0; round < 2; round++) {
    canceller_arg cargs;
    run_round(round, &total, &cargs);
    cancelled += cargs.cancelled;
    attempts += cargs.attempts;
  }
  atomic_store_explicit(&g_stop_reader, 1, memory_order_relaxed);
  pthread_join(rd, NULL);

  ttft_snapshot *s = ttft_snapshot_take(R);
  EXPECT_NOT_NULL(s);
  if (s) {
    expect_exact(s, &total, cancelled, attempts);
    expect_consistent(s, &total);
    printf("test_stress: %d threads x %d seqs x 2 rounds (+canceller, class adder, reader): "
           "%llu begun, %llu tokens, %llu emissions after first, %llu cancels won of %llu tries, "
           "%llu snapshots; stream_end missed %llu late tokens (%llu emissions) of racing calls\n",
           T, S, (unsigned long long)total.begun, (unsigned long long)total.tokens,
           (unsigned long long)total.itl_count, (unsigned long long)cancelled, (unsigned long long)attempts,
           (unsigned long long)g_snapshots,
           (unsigned long long)(total.tokens - ttft_snapshot_sum(s, TTFT_METRIC_OUTPUT_TOKENS)),
           (unsigned long long)(CNT(TTFT) - CNT(DECODE)));
  }
  ttft_snapshot_free(s);
  ttft_registry_free(R);
  R = NULL;
}

TU_MAIN()
