/* test_startup_burst.c — a server's first seconds, scraped as Prometheus
 * scrapes it (issue 27.1, docs/reliability.md 1.3).
 *
 * Writer threads — eight with a private shard, three more on the shared
 * one — record four classes of realistic streams at once (TTFT 20 ms–5 s,
 * ITL 5–300 ms, 8–256 tokens, 1–4 tokens an emission, some cancelled or
 * failed) into a registry with the default configuration, the burst a
 * 2000 streams/s server sees before its first scrape.
 *
 *   burst_before_first_scrape   no snapshot until the burst is over (no
 *                               top-up of the chunk pool): every
 *                               observation is in its fine bucket, none
 *                               coarse; nothing is lost
 *   scrapes_during_burst        a scraper snapshots throughout and renders
 *                               every snapshot as Prometheus text,
 *                               OpenMetrics and protobuf: no counter,
 *                               count, sum, classic or native bucket of any
 *                               of them ever falls from one scrape to the
 *                               next; none coarse
 *   coarse_counts_never_fall    the same at the smallest memory_limit,
 *                               where the pool does run dry: coarse
 *                               observations are exported, and they too
 *                               stay in their bucket as min and max widen
 *
 * TTFT_BURST_STREAMS sets the streams of a burst (default 10000; fewer
 * under TSan). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "ttft.h"
#include "task.h"
#include "prom_series.h"
#include "begin_retry.h"

#define MS UINT64_C(1000000)
#define WRITERS 11 /* the default max_threads (8) private, 3 on the shared shard */
#define CLASSES 4
#define PHASES 16  /* writers wait for a scrape between phases */

static unsigned burst_streams(void) {
  const char *e = getenv("TTFT_BURST_STREAMS");
  long n = e ? strtol(e, NULL, 10) : 10000;
  return n >= WRITERS * PHASES ? (unsigned)n : WRITERS * PHASES;
}

static uint64_t rng(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}
/* log-uniform in [lo, hi] */
static uint64_t logu(uint64_t *s, double lo, double hi) {
  double u = (double)(rng(s) >> 11) * 0x1.0p-53;
  return (uint64_t)(lo * pow(hi / lo, u));
}

typedef struct burst {
  ttft_registry *r;
  int cls[CLASSES];
  unsigned per_writer;     /* streams each writer records              */
  _Atomic unsigned scrapes; /* compared scrapes so far                 */
  _Atomic int writers_left;
  int scraping;            /* a scraper runs: writers pace on it       */
  size_t mem_burst;        /* ttft_registry_memory after the burst     */
} burst;

typedef struct writer {
  burst *b;
  uint64_t seed;
  unsigned tokens, emissions;
} writer;

/* One stream of realistic values from t; returns its end. */
static uint64_t stream(writer *w, uint64_t *rs, uint64_t t) {
  burst *b = w->b;
  ttft_request q;
  ttft_request_init(&q);
  q.class_id = b->cls[rng(rs) % CLASSES];
  q.prompt_tokens = (uint32_t)logu(rs, 16, 8000);
  q.prefix_hit = (int)(rng(rs) % 3) - 1;
  /* this test is about buckets, not capacity: a begin refused while
   * ended slots wait for their grace period is retried (begin_retry.h) */
  ttft_seq s = begin_retry(b->r, &q, t, 1000000, NULL);
  EXPECT_TRUE(s != 0);
  uint64_t queue = logu(rs, 1 * MS, 50 * MS);
  EXPECT_ERR(TTFT_OK, ttft_mark(b->r, s, TTFT_PHASE_SCHEDULED, t + queue));
  uint64_t ttft = logu(rs, 20 * MS, 5000 * MS);
  uint64_t now = t + (ttft > queue ? ttft : queue + MS);
  unsigned left = (unsigned)logu(rs, 8, 256.99);
  for (int first = 1; left; first = 0) {
    if (!first) now += logu(rs, 5 * MS, 300 * MS);
    unsigned n = rng(rs) % 8 ? 1 : 2 + (unsigned)(rng(rs) % 3);
    if (n > left) n = left;
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(b->r, s, n, now));
    left -= n;
    w->tokens += n;
    w->emissions++;
  }
  unsigned u = (unsigned)(rng(rs) % 20);
  ttft_status st = u == 0 ? TTFT_ERROR : u < 3 ? TTFT_CANCELLED : TTFT_COMPLETED;
  EXPECT_ERR(TTFT_OK, ttft_stream_end(b->r, s, st, now + logu(rs, 0.1 * MS, 2 * MS)));
  return now;
}

static void *writer_main(void *p) {
  writer *w = p;
  burst *b = w->b;
  uint64_t rs = w->seed * 0x9E3779B97F4A7C15u | 1, t = 1000000 * MS;
  for (unsigned ph = 0; ph < PHASES; ph++) {
    /* a scrape between phases, whatever the scheduler does (no timing) */
    while (b->scraping && atomic_load(&b->scrapes) < ph) sched_yield();
    for (unsigned i = ph * b->per_writer / PHASES; i < (ph + 1) * b->per_writer / PHASES; i++)
      t = stream(w, &rs, t) + MS;
  }
  atomic_fetch_sub(&b->writers_left, 1);
  return NULL;
}

/* --------------------------------------------------------------- scraper */
static const ttft_format g_fmt[3] = {TTFT_FORMAT_PROMETHEUS, TTFT_FORMAT_OPENMETRICS,
                                     TTFT_FORMAT_PROMETHEUS_PROTOBUF};
static const char *const g_fmt_name[3] = {"prometheus", "openmetrics", "protobuf"};

typedef struct scraper {
  burst *b;
  ts_scrape prev[3];
  unsigned fell[3], checked[3], scrapes;
  size_t series[3];
  uint64_t coarse_max;
} scraper;

/* One snapshot, rendered in every format, compared with the one before. */
static void scrape_once(scraper *sc) {
  ttft_snapshot *s = ttft_snapshot_take(sc->b->r);
  EXPECT_NOT_NULL(s);
  if (!s) return;
  uint64_t coarse = ttft_snapshot_gauge(s, TTFT_GAUGE_COARSE);
  if (coarse > sc->coarse_max) sc->coarse_max = coarse;
  for (int f = 0; f < 3; f++) {
    long n = ttft_snapshot_format(s, g_fmt[f], NULL, 0);
    EXPECT_GT_INT(n, 0);
    char *buf = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (!buf) continue;
    EXPECT_EQ_INT(n, ttft_snapshot_format(s, g_fmt[f], buf, (size_t)n + 1));
    ts_scrape cur = {0};
    if (g_fmt[f] == TTFT_FORMAT_PROMETHEUS_PROTOBUF) ts_collect((const unsigned char *)buf, (size_t)n, &cur);
    else ts_collect_text(buf, &cur);
    EXPECT_FALSE(cur.bad);
    unsigned fell = sc->prev[f].n ? ts_compare(&sc->prev[f], &cur, &sc->checked[f]) : 0;
    if (fell) fprintf(stderr, "   ^ %s, scrape %u\n", g_fmt_name[f], sc->scrapes);
    sc->fell[f] += fell;
    sc->series[f] = cur.n;
    ts_free(&sc->prev[f]);
    sc->prev[f] = cur;
    free(buf);
  }
  ttft_snapshot_free(s);
  sc->scrapes++;
}

static void *scraper_main(void *p) {
  scraper *sc = p;
  while (atomic_load(&sc->b->writers_left) > 0) {
    scrape_once(sc);
    atomic_fetch_add(&sc->b->scrapes, 1);
  }
  scrape_once(sc); /* and one after the burst */
  return NULL;
}

/* ------------------------------------------------------------ the burst */
static ttft_registry *registry(uint64_t memory_limit, burst *b) {
  ttft_config c;
  ttft_config_init(&c);
  if (memory_limit) c.memory_limit = memory_limit;
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  if (!r) return NULL;
  memset(b, 0, sizeof *b);
  b->r = r;
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.ttft_ns = 500 * MS, slo.tpot_ns = 100 * MS;
  b->cls[0] = 0;
  b->cls[1] = ttft_class_add(r, "chat", &slo);
  b->cls[2] = ttft_class_add(r, "batch", NULL);
  b->cls[3] = ttft_class_add(r, "agent", &slo);
  for (int k = 1; k < CLASSES; k++) EXPECT_EQ_INT(k, b->cls[k]);
  return r;
}

/* Runs the burst (with a scraper when sc is not NULL); returns the final
 * snapshot. */
static ttft_snapshot *run_burst(burst *b, scraper *sc, unsigned *tokens) {
  unsigned total = burst_streams();
  b->per_writer = total / WRITERS;
  b->scraping = sc != NULL;
  atomic_store(&b->writers_left, WRITERS);
  writer w[WRITERS];
  pthread_t th[WRITERS], st;
  if (sc) {
    memset(sc, 0, sizeof *sc);
    sc->b = b;
    EXPECT_EQ_INT(0, pthread_create(&st, NULL, scraper_main, sc));
  }
  for (int i = 0; i < WRITERS; i++) {
    w[i] = (writer){b, (uint64_t)i + 1, 0, 0};
    EXPECT_EQ_INT(0, pthread_create(&th[i], NULL, writer_main, &w[i]));
  }
  *tokens = 0;
  for (int i = 0; i < WRITERS; i++) {
    pthread_join(th[i], NULL);
    *tokens += w[i].tokens;
  }
  if (sc) pthread_join(st, NULL);
  b->mem_burst = ttft_registry_memory(b->r); /* before the snapshot's top-up */
  ttft_snapshot *s = ttft_snapshot_take(b->r);
  EXPECT_NOT_NULL(s);
  if (!s) return NULL;
  /* nothing lost: every stream and token is counted */
  uint64_t streams = (uint64_t)b->per_writer * WRITERS;
  EXPECT_EQ_U64(streams, ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN));
  EXPECT_EQ_U64(streams, ttft_snapshot_count(s, TTFT_METRIC_E2E));
  EXPECT_EQ_U64(streams, ttft_snapshot_count(s, TTFT_METRIC_TTFT));
  EXPECT_EQ_U64(*tokens, ttft_snapshot_counter(s, TTFT_COUNTER_TOKENS));
  return s;
}

static void scraper_report(const char *what, scraper *sc, uint64_t coarse, size_t mem) {
  unsigned fell = 0;
  fprintf(stderr, "   %s: %u scrapes, coarse observations %llu at the end (at most %llu "
                  "scraped), registry %.1f MiB after the burst\n",
          what, sc->scrapes, (unsigned long long)coarse, (unsigned long long)sc->coarse_max,
          mem / 1048576.0);
  for (int f = 0; f < 3; f++) {
    fprintf(stderr, "   %-11s %zu series, %u values compared, %u fell\n", g_fmt_name[f],
            sc->series[f], sc->checked[f], sc->fell[f]);
    fell += sc->fell[f];
    ts_free(&sc->prev[f]);
  }
  EXPECT_EQ_INT(0, fell);
  EXPECT_GE_INT(sc->scrapes, PHASES);
  for (int f = 0; f < 3; f++) EXPECT_GT_INT(sc->checked[f], 10000);
}

TEST(burst_before_first_scrape) {
  burst b;
  ttft_registry *r = registry(0, &b);
  if (!r) return;
  size_t created = ttft_registry_memory(r);
  unsigned tokens;
  ttft_snapshot *s = run_burst(&b, NULL, &tokens);
  if (s) {
    uint64_t coarse = ttft_snapshot_gauge(s, TTFT_GAUGE_COARSE);
    fprintf(stderr, "   %u writers x %d classes, %u streams, %u tokens, no scrape: coarse "
                    "observations %llu; registry %.1f MiB with its classes, %.1f MiB after the "
                    "burst\n",
            WRITERS, CLASSES, b.per_writer * WRITERS, tokens, (unsigned long long)coarse,
            created / 1048576.0, b.mem_burst / 1048576.0);
    EXPECT_EQ_U64(0, coarse);
    ttft_snapshot_free(s);
  }
  ttft_registry_free(r);
}

TEST(scrapes_during_burst) {
  burst b;
  ttft_registry *r = registry(0, &b);
  if (!r) return;
  scraper sc;
  unsigned tokens;
  ttft_snapshot *s = run_burst(&b, &sc, &tokens);
  uint64_t coarse = s ? ttft_snapshot_gauge(s, TTFT_GAUGE_COARSE) : 0;
  scraper_report("default memory_limit", &sc, coarse, b.mem_burst);
  EXPECT_EQ_U64(0, coarse);
  EXPECT_EQ_U64(0, sc.coarse_max);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TEST(coarse_counts_never_fall) {
  burst b;
  ttft_registry *r = registry(TTFT_MIN_MEMORY_LIMIT, &b);
  if (!r) return;
  scraper sc;
  unsigned tokens;
  ttft_snapshot *s = run_burst(&b, &sc, &tokens);
  uint64_t coarse = s ? ttft_snapshot_gauge(s, TTFT_GAUGE_COARSE) : 0;
  scraper_report("1 MiB memory_limit", &sc, coarse, b.mem_burst);
  EXPECT_GT_U64(coarse, 0); /* the pool ran dry: the coarse path was exercised */
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TU_MAIN()
