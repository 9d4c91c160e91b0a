/* test_memory.c — memory that follows what is used (issue 11.6,
 * src/record/pool.c): ttft_registry_memory is exactly what the registry
 * allocated (checked against a counting allocator), 64 classes in use fit
 * in 64 MiB at the default max_threads, the hooks never allocate, and at
 * the memory limit values are still counted exactly (binned by power of
 * two, TTFT_GAUGE_COARSE). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "ttft.h"
#include "task.h"
#include "begin_retry.h"

/* -------------------------------------------------- counting allocator */
#define HDR 16
static _Atomic long long g_live_bytes;
static _Atomic long g_calls;

static void *count_alloc(void *ctx, size_t n) {
  (void)ctx;
  atomic_fetch_add(&g_calls, 1);
  unsigned char *p = malloc(n + HDR);
  if (!p) return NULL;
  memcpy(p, &n, sizeof n);
  atomic_fetch_add(&g_live_bytes, (long long)n);
  return p + HDR;
}
static void count_free(void *ctx, void *q) {
  (void)ctx;
  if (!q) return;
  unsigned char *p = (unsigned char *)q - HDR;
  size_t n;
  memcpy(&n, p, sizeof n);
  atomic_fetch_sub(&g_live_bytes, (long long)n);
  free(p);
}
static const ttft_allocator counting = {count_alloc, count_free, NULL};

#define MS UINT64_C(1000000)

static uint64_t rng(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

/* n streams in class cls, values spread over several octaves per metric */
static void traffic(ttft_registry *r, int cls, unsigned n, uint64_t seed, uint64_t *t) {
  uint64_t rs = seed | 1;
  for (unsigned i = 0; i < n; i++) {
    ttft_request q;
    ttft_request_init(&q);
    q.class_id = cls;
    q.prompt_tokens = 1 + (uint32_t)(rng(&rs) % 20000);
    q.prefix_hit = (int)(rng(&rs) % 2);
    /* 4 x 64 x 20 streams pass through 4096 slots; this test is about
     * memory, not capacity: wait for a reclaimed slot (begin_retry.h) */
    ttft_seq s = begin_retry(r, &q, *t, 200000, NULL);
    EXPECT_TRUE(s != 0);
    (void)ttft_mark(r, s, TTFT_PHASE_SCHEDULED, *t + (1 + rng(&rs) % 50) * MS);
    uint64_t u = *t + (20 + rng(&rs) % 2000) * MS;
    unsigned k = 1 + (unsigned)(rng(&rs) % 200);
    for (unsigned j = 0; j < k; j++, u += (5 + rng(&rs) % 100) * MS)
      EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1 + (uint32_t)(rng(&rs) % 3), u));
    EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, rng(&rs) % 8 ? TTFT_COMPLETED : TTFT_CANCELLED, u));
    *t += MS;
  }
}

typedef struct tr_arg {
  ttft_registry *r;
  int ncls;
  unsigned seed;
  long allocs_during; /* allocator calls while this thread ran hooks only */
} tr_arg;

static void *tr_main(void *p) {
  tr_arg *a = p;
  uint64_t t = 1000 * MS * (a->seed + 1);
  for (int c = 0; c < a->ncls; c++) traffic(a->r, c, 20, a->seed * 977 + (uint64_t)c, &t);
  ttft_thread_release(a->r);
  return NULL;
}

TEST(memory_exact_and_64_classes_fit) {
  EXPECT_ERR(TTFT_OK, ttft_set_allocator(&counting));
  long long before = atomic_load(&g_live_bytes);
  ttft_config c;
  ttft_config_init(&c);
  c.max_classes = 64;
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  if (!r) return;
  EXPECT_EQ_U64((uint64_t)(atomic_load(&g_live_bytes) - before), ttft_registry_memory(r));
  size_t empty = ttft_registry_memory(r);
  char name[16];
  for (int i = 1; i < 64; i++) {
    snprintf(name, sizeof name, "lora%02d", i);
    EXPECT_EQ_INT(i, ttft_class_add(r, name, NULL));
  }
  EXPECT_EQ_U64((uint64_t)(atomic_load(&g_live_bytes) - before), ttft_registry_memory(r));
  size_t classes = ttft_registry_memory(r);

  /* four threads record in all 64 classes; the hooks allocate nothing */
  long calls0 = atomic_load(&g_calls);
  pthread_t th[4];
  tr_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i].r = r;
    args[i].ncls = 64;
    args[i].seed = (unsigned)i + 1;
    EXPECT_EQ_INT(0, pthread_create(&th[i], NULL, tr_main, &args[i]));
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  EXPECT_EQ_INT(calls0, atomic_load(&g_calls)); /* no allocation in 4 x 64 x 20 streams */
  EXPECT_EQ_U64((uint64_t)(atomic_load(&g_live_bytes) - before), ttft_registry_memory(r));

  /* snapshots top the pool up; the registry's memory stays exact */
  long long snap_before = atomic_load(&g_live_bytes);
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_NOT_NULL(s);
  size_t after = ttft_registry_memory(r);
  uint64_t coarse = ttft_snapshot_gauge(s, TTFT_GAUGE_COARSE);
  EXPECT_EQ_U64(after, ttft_snapshot_gauge(s, TTFT_GAUGE_MEMORY));
  ttft_snapshot_free(s);
  EXPECT_EQ_U64((uint64_t)(atomic_load(&g_live_bytes) - before), ttft_registry_memory(r));
  (void)snap_before;
  /* a second round after the top-up: full resolution */
  for (int i = 0; i < 4; i++) {
    args[i].seed = (unsigned)i + 11;
    EXPECT_EQ_INT(0, pthread_create(&th[i], NULL, tr_main, &args[i]));
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  s = ttft_snapshot_take(r);
  uint64_t coarse2 = ttft_snapshot_gauge(s, TTFT_GAUGE_COARSE);
  EXPECT_EQ_U64(2 * 4 * 64 * 20, ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN));
  ttft_snapshot_free(s);
  size_t final = ttft_registry_memory(r);
  fprintf(stderr,
          "64 classes, default max_threads (%u shards): created %.1f MiB, with 64 classes "
          "%.1f MiB, after 4 threads x 64 classes x 20 streams %.1f MiB (coarse %llu), after a "
          "second round %.1f MiB (coarse %llu)\n",
          c.max_threads + 1, empty / 1048576.0, classes / 1048576.0, after / 1048576.0,
          (unsigned long long)coarse, final / 1048576.0, (unsigned long long)coarse2);
  EXPECT_LE_U64(final, UINT64_C(64) << 20);
  /* after the snapshot's top-up nothing new was binned coarsely */
  EXPECT_EQ_U64(coarse, coarse2);
  ttft_registry_free(r);
  EXPECT_EQ_INT(before, atomic_load(&g_live_bytes));
  EXPECT_ERR(TTFT_OK, ttft_set_allocator(NULL));
}

/* An SRE sees the limit on the dashboard: both gauges are in every
 * exposition, with the snapshot's values. */
static void expect_gauges_exported(const ttft_snapshot *s) {
  char want[96];
  uint64_t mem = ttft_snapshot_gauge(s, TTFT_GAUGE_MEMORY);
  uint64_t coarse = ttft_snapshot_gauge(s, TTFT_GAUGE_COARSE);
  EXPECT_GT_U64(mem, 0);
  const ttft_format fmts[2] = {TTFT_FORMAT_PROMETHEUS, TTFT_FORMAT_JSON};
  const char *pat[2][2] = {{"\nllm_registry_memory_bytes %llu\n", "\nllm_coarse_observations %llu\n"},
                           {"\"memory_bytes\":%llu", "\"coarse_observations\":%llu"}};
  for (int f = 0; f < 2; f++) {
    long n = ttft_snapshot_format(s, fmts[f], NULL, 0);
    EXPECT_GT_INT(n, 0);
    char *buf = malloc((size_t)n + 1);
    EXPECT_NOT_NULL(buf);
    if (!buf) return;
    EXPECT_EQ_INT(n, ttft_snapshot_format(s, fmts[f], buf, (size_t)n + 1));
    snprintf(want, sizeof want, pat[f][0], (unsigned long long)mem);
    EXPECT_CONTAINS(buf, want);
    snprintf(want, sizeof want, pat[f][1], (unsigned long long)coarse);
    EXPECT_CONTAINS(buf, want);
    free(buf);
  }
  /* a running total is a counter, for rate() and increase() (issue 32.8),
   * in every Prometheus exposition; the 1.2 gauge stays one release in the
   * text format, where it does not clash with the counter's family */
  const ttft_format prom[2] = {TTFT_FORMAT_PROMETHEUS, TTFT_FORMAT_OPENMETRICS};
  const char *type[2] = {"# TYPE llm_coarse_observations_total counter\n",
                         "# TYPE llm_coarse_observations counter\n"};
  for (int f = 0; f < 2; f++) {
    long n = ttft_snapshot_format(s, prom[f], NULL, 0);
    EXPECT_GT_INT(n, 0);
    char *buf = malloc((size_t)n + 1);
    EXPECT_NOT_NULL(buf);
    if (!buf) return;
    EXPECT_EQ_INT(n, ttft_snapshot_format(s, prom[f], buf, (size_t)n + 1));
    EXPECT_CONTAINS(buf, type[f]);
    snprintf(want, sizeof want, "\nllm_coarse_observations_total %llu\n", (unsigned long long)coarse);
    EXPECT_CONTAINS(buf, want);
    EXPECT_TRUE((strstr(buf, "# TYPE llm_coarse_observations gauge\n") != NULL) == (f == 0));
    free(buf);
  }
}

TEST(at_the_limit_values_still_count) {
  ttft_config c;
  ttft_config_init(&c);
  c.memory_limit = TTFT_MIN_MEMORY_LIMIT; /* 1 MiB: a few slabs */
  c.max_classes = 64;
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  if (!r) return;
  size_t cap = ttft_registry_memory(r);
  char name[16];
  for (int i = 1; i < 64; i++) {
    snprintf(name, sizeof name, "c%02d", i);
    /* class headers are the fixed part; the pool is full: a class add may
     * still succeed (its reserve is best effort at the limit) */
    (void)ttft_class_add(r, name, NULL);
  }
  size_t fixed = ttft_registry_memory(r); /* slots, shards, 64 classes' headers, the full pool */
  uint64_t t = 1000 * MS, sum_itl = 0, n_itl = 0;
  for (int cl = 0; cl < ttft_class_find(r, "c63") + 1; cl++) traffic(r, cl, 30, 7 + (uint64_t)cl, &t);
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_NOT_NULL(s);
  uint64_t coarse = ttft_snapshot_gauge(s, TTFT_GAUGE_COARSE);
  fprintf(stderr, "1 MiB limit, 64 classes x 30 streams: %llu observations binned by power of "
                  "two; registry %.1f MiB (%.1f MiB at creation, %.1f MiB with 64 classes)\n",
          (unsigned long long)coarse, ttft_registry_memory(r) / 1048576.0, cap / 1048576.0,
          fixed / 1048576.0);
  EXPECT_GT_U64(coarse, 0);
  /* every stream and token is counted: nothing is lost at the limit */
  EXPECT_EQ_U64(64 * 30, ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN));
  EXPECT_EQ_U64(64 * 30, ttft_snapshot_count(s, TTFT_METRIC_E2E));
  EXPECT_EQ_U64(64 * 30, ttft_snapshot_count(s, TTFT_METRIC_TTFT));
  n_itl = ttft_snapshot_count(s, TTFT_METRIC_ITL);
  sum_itl = ttft_snapshot_sum(s, TTFT_METRIC_ITL);
  EXPECT_GT_U64(n_itl, 64 * 30);
  EXPECT_GT_U64(sum_itl, 0);
  /* quantiles stay ordered and within [min, max] */
  uint64_t prev = 0;
  for (int k = 0; k <= 100; k++) {
    uint64_t q = ttft_snapshot_quantile(s, TTFT_METRIC_ITL, k / 100.0);
    EXPECT_GE_U64(q, prev);
    prev = q;
  }
  /* nothing grew after the pool reached the limit: snapshots cannot add */
  EXPECT_EQ_U64(fixed, ttft_registry_memory(r));
  expect_gauges_exported(s);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

TU_MAIN()
