/*
 * test_badinput.c — every public function of include/ttft.h fed NULL, 0,
 * invented handles, out-of-range enums (negative and huge), q outside [0,1]
 * and NaN, wrong struct sizes and NULL buffers with a capacity.
 *
 * Each row states the documented result. After every row the test checks
 * that a live "witness" sequence and the registry's counters are exactly as
 * they were (bad input never corrupts another sequence and never counts,
 * except DROPPED / CLOCK_CLAMPED where the header says so).
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"

/* ------------------------------------------------------------ asserts */
static int g_failures;
static const char *g_row = "";

#define CHECK_EQ_I(expr, want)                                                         \
  do {                                                                                 \
    long long a_ = (long long)(expr), w_ = (long long)(want);                          \
    if (a_ != w_) {                                                                    \
      fprintf(stderr, "%s:%d [%s] %s: expected %lld, got %lld\n", __FILE__, __LINE__, \
              g_row, #expr, w_, a_);                                                   \
      g_failures++;                                                                    \
    }                                                                                  \
  } while (0)
#define CHECK_EQ_U(expr, want)                                                         \
  do {                                                                                 \
    unsigned long long a_ = (unsigned long long)(expr), w_ = (unsigned long long)(want); \
    if (a_ != w_) {                                                                    \
      fprintf(stderr, "%s:%d [%s] %s: expected %llu, got %llu\n", __FILE__, __LINE__, \
              g_row, #expr, w_, a_);                                                   \
      g_failures++;                                                                    \
    }                                                                                  \
  } while (0)
#define CHECK_EQ_D(expr, want)                                                         \
  do {                                                                                 \
    double a_ = (double)(expr), w_ = (double)(want);                                   \
    if (!(a_ == w_)) {                                                                 \
      fprintf(stderr, "%s:%d [%s] %s: expected %g, got %g\n", __FILE__, __LINE__,     \
              g_row, #expr, w_, a_);                                                   \
      g_failures++;                                                                    \
    }                                                                                  \
  } while (0)
#define CHECK_NULL(expr)                                                               \
  do {                                                                                 \
    const void *p_ = (const void *)(expr);                                             \
    if (p_ != NULL) {                                                                  \
      fprintf(stderr, "%s:%d [%s] %s: expected NULL, got %p\n", __FILE__, __LINE__,   \
              g_row, #expr, p_);                                                       \
      g_failures++;                                                                    \
    }                                                                                  \
  } while (0)
#define CHECK_TRUE(cond)                                                               \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "%s:%d [%s] expected true: %s\n", __FILE__, __LINE__, g_row,     \
              #cond);                                                                  \
      g_failures++;                                                                    \
    }                                                                                  \
  } while (0)
#define REQUIRE(cond)                                                                  \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "%s:%d FATAL: %s\n", __FILE__, __LINE__, #cond);                 \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

/* Out-of-range values for every enum parameter: negative, one past, huge. */
static const int bad_metric[] = {-1, TTFT_METRIC_COUNT_, TTFT_METRIC_COUNT_ + 1, 1000, INT_MAX, INT_MIN};
static const int bad_counter[] = {-1, TTFT_COUNTER_COUNT_, 77, INT_MAX, INT_MIN};
static const int bad_gauge[] = {-1, TTFT_GAUGE_COUNT_, INT_MAX, INT_MIN};
static const int bad_status[] = {-1, TTFT_STATUS_COUNT_, 4, INT_MAX, INT_MIN};
static const int bad_phase[] = {-1, TTFT_PHASE_COUNT_, 3, INT_MAX, INT_MIN};
static const int bad_format[] = {-1, TTFT_FORMAT_COUNT_, TTFT_FORMAT_COUNT_ + 1, INT_MAX, INT_MIN};
static const int bad_split[] = {-1, TTFT_SPLIT_COUNT_, INT_MAX, INT_MIN};
static const int bad_clock[] = {-1, TTFT_CLOCK_COUNT_, INT_MAX, INT_MIN};
static const double bad_q[] = {-0.0001, -1.0, 1.0000001, 2.0, 1e300, -1e300};
#define N_(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------ witness
 * A registry with one live sequence W (3 emissions) and a few ended ones.
 * intact() compares W's stats and every counter with the baseline. */
static ttft_registry *R;
static ttft_seq W;        /* live witness                        */
static ttft_seq ENDED;    /* a handle whose stream ended         */
static ttft_seq_info W_info;
static uint64_t base_ctr[TTFT_COUNTER_COUNT_];
static uint64_t base_cnt[TTFT_METRIC_COUNT_];
static int g_chat;
#define MAX_INFLIGHT 8

static void read_state(uint64_t ctr[TTFT_COUNTER_COUNT_], uint64_t cnt[TTFT_METRIC_COUNT_]) {
  ttft_snapshot *s = ttft_snapshot_take(R);
  REQUIRE(s != NULL);
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++) ctr[c] = ttft_snapshot_counter(s, (ttft_counter)c);
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) cnt[m] = ttft_snapshot_count(s, (ttft_metric)m);
  ttft_snapshot_free(s);
}

static void rebaseline(void) {
  memset(&W_info, 0, sizeof W_info);
  W_info.struct_size = sizeof W_info;
  REQUIRE(ttft_seq_stats(R, W, &W_info) == TTFT_OK);
  read_state(base_ctr, base_cnt);
}

/* allow: bit set per counter allowed to change (DROPPED, CLOCK_CLAMPED). */
static void intact_(unsigned allow, int line) {
  ttft_seq_info now;
  memset(&now, 0, sizeof now);
  now.struct_size = sizeof now;
  int rc = ttft_seq_stats(R, W, &now);
  if (rc != TTFT_OK || memcmp(&now, &W_info, sizeof now) != 0) {
    fprintf(stderr, "%s:%d [%s] witness sequence changed (rc %d, emissions %u -> %u, tokens %llu -> %llu)\n",
            __FILE__, line, g_row, rc, W_info.emissions, now.emissions,
            (unsigned long long)W_info.tokens, (unsigned long long)now.tokens);
    g_failures++;
  }
  uint64_t ctr[TTFT_COUNTER_COUNT_], cnt[TTFT_METRIC_COUNT_];
  read_state(ctr, cnt);
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++) {
    if (ctr[c] != base_ctr[c] && !(allow & (1u << c))) {
      fprintf(stderr, "%s:%d [%s] counter %s changed: %llu -> %llu\n", __FILE__, line, g_row,
              ttft_counter_name((ttft_counter)c), (unsigned long long)base_ctr[c],
              (unsigned long long)ctr[c]);
      g_failures++;
    }
  }
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
    if (cnt[m] != base_cnt[m]) {
      fprintf(stderr, "%s:%d [%s] metric %s count changed: %llu -> %llu\n", __FILE__, line, g_row,
              ttft_metric_name((ttft_metric)m), (unsigned long long)base_cnt[m],
              (unsigned long long)cnt[m]);
      g_failures++;
    }
  }
  memcpy(base_ctr, ctr, sizeof ctr); /* allowed changes become the new baseline */
}
#define INTACT() intact_(0, __LINE__)
#define INTACT_ALLOW(mask) intact_((mask), __LINE__)
#define ROW(name) g_row = (name)

static void setup(void) {
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.max_inflight = MAX_INFLIGHT;
  cfg.max_classes = 3;
  R = ttft_registry_new(&cfg);
  REQUIRE(R != NULL);
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.ttft_ns = 1000000;
  g_chat = ttft_class_add(R, "chat", &slo);
  REQUIRE(g_chat >= 1);
  uint64_t t = 1000000000;
  ENDED = ttft_begin(R, t);
  REQUIRE(ENDED != 0);
  REQUIRE(ttft_token_emitted(R, ENDED, 2, t + 100) == TTFT_OK);
  REQUIRE(ttft_stream_end(R, ENDED, TTFT_COMPLETED, t + 200) == TTFT_OK);
  W = ttft_begin(R, t + 1000);
  REQUIRE(W != 0);
  REQUIRE(ttft_mark(R, W, TTFT_PHASE_SCHEDULED, t + 2000) == TTFT_OK);
  for (int i = 0; i < 3; i++) REQUIRE(ttft_token_emitted(R, W, 1, t + 10000 + (uint64_t)i * 5000) == TTFT_OK);
  rebaseline();
}

/* Handles that were never issued by R. */
static void invented_handles(ttft_seq out[], size_t *n) {
  uint32_t w_idx = (uint32_t)(W & 0xffffffffu), w_gen = (uint32_t)(W >> 32);
  size_t k = 0;
  out[k++] = 0;
  out[k++] = 1;                                            /* slot 0, generation 0 */
  out[k++] = UINT64_MAX;
  out[k++] = (uint64_t)w_gen << 32;                        /* index field 0 (slot -1) */
  out[k++] = ((uint64_t)w_gen << 32) | (MAX_INFLIGHT + 1); /* one slot past the table */
  out[k++] = ((uint64_t)w_gen << 32) | 0xffffffffu;
  out[k++] = ((uint64_t)(w_gen + 1) << 32) | w_idx;        /* W's slot, wrong generation */
  out[k++] = ((uint64_t)(w_gen - 1) << 32) | w_idx;
  out[k++] = ((uint64_t)(w_gen ^ 0x80000000u) << 32) | w_idx;
  out[k++] = w_idx;                                        /* generation 0 */
  out[k++] = ENDED;                                        /* ended */
  *n = k;
}

/* ---------------------------------------------------------------- misc */
static void test_misc(void) {
  ROW("version");
  CHECK_EQ_U(ttft_version_number(), TTFT_VERSION_NUMBER);
  CHECK_TRUE(strcmp(ttft_version_string(), TTFT_VERSION_STRING) == 0);

  ROW("strerror/err_name");
  const int codes[] = {0, TTFT_EINVAL, TTFT_ESTALE, TTFT_EFULL, TTFT_ENOMEM, TTFT_ERANGE,
                       TTFT_ECORRUPT, TTFT_EEXIST, TTFT_EIO, TTFT_ENOTSUP, TTFT_ECLOCK};
  for (size_t i = 0; i < N_(codes); i++) {
    CHECK_TRUE(ttft_strerror(codes[i]) != NULL && strcmp(ttft_strerror(codes[i]), "unknown error") != 0);
    CHECK_TRUE(ttft_err_name(codes[i]) != NULL && strcmp(ttft_err_name(codes[i]), "TTFT_UNKNOWN") != 0);
  }
  const int junk[] = {1, TTFT_E__LAST, -12, 100, -1000, INT_MAX, INT_MIN};
  for (size_t i = 0; i < N_(junk); i++) {
    CHECK_TRUE(strcmp(ttft_strerror(junk[i]), "unknown error") == 0);
    CHECK_TRUE(strcmp(ttft_err_name(junk[i]), "TTFT_UNKNOWN") == 0);
  }

  ROW("names out of range");
  for (size_t i = 0; i < N_(bad_metric); i++) CHECK_NULL(ttft_metric_name((ttft_metric)bad_metric[i]));
  for (size_t i = 0; i < N_(bad_counter); i++) CHECK_NULL(ttft_counter_name((ttft_counter)bad_counter[i]));
  for (size_t i = 0; i < N_(bad_status); i++) CHECK_NULL(ttft_status_name((ttft_status)bad_status[i]));
  for (size_t i = 0; i < N_(bad_format); i++) CHECK_NULL(ttft_format_name((ttft_format)bad_format[i]));
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) CHECK_TRUE(ttft_metric_name((ttft_metric)m) != NULL);
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++) CHECK_TRUE(ttft_counter_name((ttft_counter)c) != NULL);

  ROW("NULL no-ops");
  ttft_config_init(NULL);
  ttft_slo_init(NULL);
  ttft_request_init(NULL);
  ttft_registry_free(NULL);
  ttft_snapshot_free(NULL);
  ttft_http_stop(NULL);
  CHECK_EQ_U(ttft_registry_memory(NULL), 0);
  CHECK_EQ_I(ttft_thread_release(NULL), TTFT_EINVAL);
  CHECK_TRUE(ttft_registry_now_ns(NULL) > 0);
  CHECK_TRUE(ttft_now_ns() > 0);

  ROW("set_allocator");
  ttft_allocator a = {NULL, NULL, NULL};
  CHECK_EQ_I(ttft_set_allocator(&a), TTFT_EINVAL);
  CHECK_EQ_I(ttft_set_allocator(NULL), TTFT_OK);
}

/* --------------------------------------------------------------- config */
static void expect_bad_config(const char *what, const ttft_config *cfg) {
  ROW(what);
  ttft_registry *r = ttft_registry_new(cfg);
  if (r != NULL) {
    fprintf(stderr, "[%s] ttft_registry_new accepted an invalid config\n", what);
    g_failures++;
    ttft_registry_free(r);
  }
}

static void test_config(void) {
  ttft_config c;
  ttft_config_init(&c);
  ROW("defaults");
  ttft_registry *r = ttft_registry_new(NULL);
  CHECK_TRUE(r != NULL);
  ttft_registry_free(r);
  r = ttft_registry_new(&c);
  CHECK_TRUE(r != NULL);
  ttft_registry_free(r);

  ttft_config_init(&c); c.struct_size = 0; expect_bad_config("struct_size 0", &c);
  ttft_config_init(&c); c.struct_size = 1; expect_bad_config("struct_size 1", &c);
  ttft_config_init(&c); c.struct_size = SIZE_MAX; expect_bad_config("struct_size SIZE_MAX", &c);
  ttft_config_init(&c); c.max_inflight = 0; expect_bad_config("max_inflight 0", &c);
  ttft_config_init(&c); c.max_inflight = (1u << 24) + 1; expect_bad_config("max_inflight 2^24+1", &c);
  ttft_config_init(&c); c.max_inflight = UINT32_MAX; expect_bad_config("max_inflight UINT32_MAX", &c);
  ttft_config_init(&c); c.max_threads = 257; expect_bad_config("max_threads 257", &c);
  ttft_config_init(&c); c.max_threads = UINT32_MAX; expect_bad_config("max_threads UINT32_MAX", &c);
  ttft_config_init(&c); c.max_classes = 0; expect_bad_config("max_classes 0", &c);
  for (size_t i = 0; i < N_(bad_clock); i++) {
    ttft_config_init(&c); c.clock = (ttft_clock)bad_clock[i]; expect_bad_config("bad clock", &c);
  }
  ttft_config_init(&c); c.n_const_labels = TTFT_MAX_CONST_LABELS + 1; expect_bad_config("n_const_labels 9", &c);
  ttft_config_init(&c); c.n_const_labels = 1; c.const_labels = NULL; expect_bad_config("const_labels NULL", &c);
  const char *bad_names[] = {"", "1abc", "a-b", "a b", "\xc3\xa9", "a{b}", "x=y"};
  for (size_t i = 0; i < N_(bad_names); i++) {
    ttft_label l = {bad_names[i], "v"};
    ttft_config_init(&c); c.const_labels = &l; c.n_const_labels = 1;
    expect_bad_config("bad const label name", &c);
  }
  {
    ttft_label l = {NULL, "v"};
    ttft_config_init(&c); c.const_labels = &l; c.n_const_labels = 1;
    expect_bad_config("NULL const label name", &c);
  }
  ttft_config_init(&c); c.n_prompt_bands = TTFT_MAX_BANDS; expect_bad_config("n_prompt_bands 8", &c);
  ttft_config_init(&c); c.n_prompt_bands = UINT32_MAX; expect_bad_config("n_prompt_bands huge", &c);
  ttft_config_init(&c); c.n_prompt_bands = 3; c.prompt_band_edges[0] = 10; c.prompt_band_edges[1] = 10;
  c.prompt_band_edges[2] = 20; expect_bad_config("band edges equal", &c);
  ttft_config_init(&c); c.n_prompt_bands = 2; c.prompt_band_edges[0] = 100; c.prompt_band_edges[1] = 50;
  expect_bad_config("band edges descending", &c);
  {
    static const uint64_t desc[] = {1000, 500, 2000};
    ttft_config_init(&c); c.prom_buckets[TTFT_METRIC_TTFT] = desc; c.prom_n_buckets[TTFT_METRIC_TTFT] = 3;
    expect_bad_config("prom buckets descending", &c);
    static uint64_t many[TTFT_MAX_PROM_BUCKETS + 1];
    for (size_t i = 0; i < N_(many); i++) many[i] = (i + 1) * 1000;
    ttft_config_init(&c); c.prom_buckets[TTFT_METRIC_ITL] = many;
    c.prom_n_buckets[TTFT_METRIC_ITL] = TTFT_MAX_PROM_BUCKETS + 1;
    expect_bad_config("prom buckets > 64", &c);
  }

  ROW("long label values are accepted (truncated)");
  {
    char longv[4 * TTFT_MAX_LABEL];
    memset(longv, 'x', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    ttft_label l = {"zone", longv};
    ttft_config_init(&c);
    c.model = longv;
    c.const_labels = &l;
    c.n_const_labels = 1;
    r = ttft_registry_new(&c);
    CHECK_TRUE(r != NULL);
    if (r) {
      ttft_snapshot *s = ttft_snapshot_take(r);
      CHECK_TRUE(s != NULL);
      const char *model = ttft_snapshot_label(s, "model");
      CHECK_TRUE(model != NULL && strlen(model) < TTFT_MAX_LABEL);
      ttft_snapshot_free(s);
      ttft_registry_free(r);
    }
  }
}

/* -------------------------------------------------------------- classes */
static void test_classes(void) {
  ROW("class_add NULL");
  CHECK_EQ_I(ttft_class_add(NULL, "x", NULL), TTFT_EINVAL);
  CHECK_EQ_I(ttft_class_add(R, NULL, NULL), TTFT_EINVAL);
  INTACT();
  ROW("class_add bad names");
  char n64[65];
  memset(n64, 'a', 64);
  n64[64] = '\0';
  const char *bad[] = {"", n64, "a b", "a/b", "caf\xc3\xa9", "tab\t", "q\"", "x{y}", "new\nline"};
  for (size_t i = 0; i < N_(bad); i++) CHECK_EQ_I(ttft_class_add(R, bad[i], NULL), TTFT_EINVAL);
  INTACT();
  ROW("class_add exists");
  CHECK_EQ_I(ttft_class_add(R, "default", NULL), TTFT_EEXIST);
  CHECK_EQ_I(ttft_class_add(R, "chat", NULL), TTFT_EEXIST);
  ROW("class_add bad slo struct_size");
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.struct_size = 0;
  CHECK_EQ_I(ttft_class_add(R, "zero_size", &slo), TTFT_EINVAL);
  slo.struct_size = SIZE_MAX;
  CHECK_EQ_I(ttft_class_add(R, "huge_size", &slo), TTFT_EINVAL);
  INTACT();
  ROW("class_find");
  CHECK_EQ_I(ttft_class_find(NULL, "chat"), TTFT_EINVAL);
  CHECK_EQ_I(ttft_class_find(R, NULL), TTFT_EINVAL);
  CHECK_EQ_I(ttft_class_find(R, "nope"), TTFT_ESTALE);
  CHECK_EQ_I(ttft_class_find(R, ""), TTFT_ESTALE);
  CHECK_EQ_I(ttft_class_find(R, "default"), 0);
  CHECK_EQ_I(ttft_class_find(R, "chat"), g_chat);
  ROW("class_add full");
  char name63[64];
  memset(name63, 'z', 63);
  name63[63] = '\0';
  int id = ttft_class_add(R, name63, NULL); /* the third and last class; a 63-byte name is legal */
  CHECK_TRUE(id >= 1 && id != g_chat);
  CHECK_EQ_I(ttft_class_add(R, "one_too_many", NULL), TTFT_EFULL);
  CHECK_EQ_I(ttft_class_find(R, name63), id);
  rebaseline();
}

/* ---------------------------------------------------------------- hooks */
static void test_hooks(void) {
  ttft_seq inv[16];
  size_t ninv;
  invented_handles(inv, &ninv);
  const uint64_t times[] = {TTFT_NOW, 1, 2000000000, UINT64_MAX};

  ROW("begin NULL registry");
  CHECK_EQ_U(ttft_begin(NULL, 5), 0);
  CHECK_EQ_U(ttft_begin_ex(NULL, NULL, 5), 0);
  INTACT();

  ROW("begin_ex invalid request (no DROPPED)");
  ttft_request req;
  ttft_request_init(&req);
  req.struct_size = 0;
  CHECK_EQ_U(ttft_begin_ex(R, &req, 5), 0);
  req.struct_size = SIZE_MAX;
  CHECK_EQ_U(ttft_begin_ex(R, &req, 5), 0);
  const int bad_class[] = {-1, TTFT_CLASS_ALL - 1, 3, 4, 16, 1000, INT_MAX, INT_MIN};
  for (size_t i = 0; i < N_(bad_class); i++) {
    ttft_request_init(&req);
    req.class_id = bad_class[i];
    CHECK_EQ_U(ttft_begin_ex(R, &req, 5), 0);
  }
  INTACT();

  for (size_t h = 0; h < ninv; h++) {
    for (size_t t = 0; t < N_(times); t++) {
      ROW("hooks on invented/ended handles");
      CHECK_EQ_I(ttft_mark(R, inv[h], TTFT_PHASE_SCHEDULED, times[t]), TTFT_ESTALE);
      CHECK_EQ_I(ttft_mark(R, inv[h], TTFT_PHASE_PREEMPTED, times[t]), TTFT_ESTALE);
      CHECK_EQ_I(ttft_token_emitted(R, inv[h], 1, times[t]), TTFT_ESTALE);
      CHECK_EQ_I(ttft_token_emitted(R, inv[h], UINT32_MAX, times[t]), TTFT_ESTALE);
      for (int st = 0; st < TTFT_STATUS_COUNT_; st++)
        CHECK_EQ_I(ttft_stream_end(R, inv[h], (ttft_status)st, times[t]), TTFT_ESTALE);
      ttft_seq_info info;
      memset(&info, 0, sizeof info);
      info.struct_size = sizeof info;
      CHECK_EQ_I(ttft_seq_stats(R, inv[h], &info), TTFT_ESTALE);
      CHECK_EQ_I(ttft_annotate(R, inv[h], 100, 1), TTFT_ESTALE);
      CHECK_EQ_I(ttft_step_emitted(R, &inv[h], NULL, 1, times[t]), 0);
    }
  }
  {
    /* every rejected hook call above is counted as STALE, nothing else:
     * 2 marks, 2 tokens, 3 ends, 1 annotate, 1 step entry per row */
    uint64_t ctr[TTFT_COUNTER_COUNT_], cnt[TTFT_METRIC_COUNT_];
    read_state(ctr, cnt);
    CHECK_EQ_U(ctr[TTFT_COUNTER_STALE], base_ctr[TTFT_COUNTER_STALE] + 9 * ninv * N_(times));
  }
  INTACT_ALLOW(1u << TTFT_COUNTER_STALE);

  ROW("hooks NULL registry");
  CHECK_EQ_I(ttft_mark(NULL, W, TTFT_PHASE_SCHEDULED, 5), TTFT_EINVAL);
  CHECK_EQ_I(ttft_token_emitted(NULL, W, 1, 5), TTFT_EINVAL);
  CHECK_EQ_I(ttft_stream_end(NULL, W, TTFT_COMPLETED, 5), TTFT_EINVAL);
  INTACT();

  ROW("hooks bad enum / n_tokens 0 on a live handle");
  for (size_t i = 0; i < N_(bad_phase); i++)
    CHECK_EQ_I(ttft_mark(R, W, (ttft_phase)bad_phase[i], 2000000000), TTFT_EINVAL);
  CHECK_EQ_I(ttft_token_emitted(R, W, 0, 2000000000), TTFT_EINVAL);
  CHECK_EQ_I(ttft_token_emitted(R, W, 0, TTFT_NOW), TTFT_EINVAL);
  for (size_t i = 0; i < N_(bad_status); i++)
    CHECK_EQ_I(ttft_stream_end(R, W, (ttft_status)bad_status[i], 2000000000), TTFT_EINVAL);
  INTACT();

  ROW("seq_stats bad args");
  ttft_seq_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK_EQ_I(ttft_seq_stats(NULL, W, &info), TTFT_EINVAL);
  CHECK_EQ_I(ttft_seq_stats(R, W, NULL), TTFT_EINVAL);
  info.struct_size = 0;
  CHECK_EQ_I(ttft_seq_stats(R, W, &info), TTFT_EINVAL);
  info.struct_size = SIZE_MAX;
  CHECK_EQ_I(ttft_seq_stats(R, W, &info), TTFT_EINVAL);
  ROW("seq_stats older, smaller struct is filled only up to its size");
  {
    unsigned char raw[sizeof(ttft_seq_info) + 16];
    memset(raw, 0xA5, sizeof raw);
    size_t small = offsetof(ttft_seq_info, tokens); /* struct_size, class_id, emissions */
    ((ttft_seq_info *)(void *)raw)->struct_size = small;
    CHECK_EQ_I(ttft_seq_stats(R, W, (ttft_seq_info *)(void *)raw), TTFT_OK);
    CHECK_EQ_U(((ttft_seq_info *)(void *)raw)->emissions, W_info.emissions);
    size_t untouched = 0;
    for (size_t i = small; i < sizeof raw; i++) untouched += raw[i] == 0xA5;
    CHECK_EQ_U(untouched, sizeof raw - small);
  }
  INTACT();

  ROW("stalled_now / inflight NULL");
  CHECK_EQ_I(ttft_stalled_now(NULL, 5), TTFT_EINVAL);
  CHECK_EQ_I(ttft_stalled_now(NULL, TTFT_NOW), TTFT_EINVAL);
  CHECK_EQ_I(ttft_inflight(NULL), TTFT_EINVAL);
  CHECK_EQ_I(ttft_inflight(R), 1);
  long st = ttft_stalled_now(R, UINT64_MAX);
  CHECK_TRUE(st >= 0 && st <= 1);
  INTACT();

  ROW("time going backwards is clamped and counted, the witness keeps its stats");
  {
    ttft_seq s = ttft_begin(R, 5000000000ull);
    CHECK_TRUE(s != 0);
    CHECK_EQ_I(ttft_token_emitted(R, s, 1, 4000000000ull), TTFT_OK);
    CHECK_EQ_I(ttft_mark(R, s, TTFT_PHASE_SCHEDULED, 1), TTFT_OK);
    ttft_seq_info si;
    memset(&si, 0, sizeof si);
    si.struct_size = sizeof si;
    CHECK_EQ_I(ttft_seq_stats(R, s, &si), TTFT_OK);
    CHECK_EQ_U(si.emissions, 1);
    CHECK_EQ_U(si.ttft_ns, 0); /* the emission was clamped to t_begin */
    CHECK_EQ_I(ttft_stream_end(R, s, TTFT_COMPLETED, 2), TTFT_OK);
    CHECK_EQ_I(ttft_stream_end(R, s, TTFT_COMPLETED, 2), TTFT_ESTALE);
    uint64_t ctr[TTFT_COUNTER_COUNT_], cnt[TTFT_METRIC_COUNT_];
    read_state(ctr, cnt);
    CHECK_EQ_U(ctr[TTFT_COUNTER_CLOCK_CLAMPED], base_ctr[TTFT_COUNTER_CLOCK_CLAMPED] + 3);
    CHECK_EQ_U(ctr[TTFT_COUNTER_COMPLETED], base_ctr[TTFT_COUNTER_COMPLETED] + 1);
    rebaseline();
  }

  ROW("capacity exhausted: begin returns 0 and counts DROPPED only");
  {
    ttft_seq held[MAX_INFLIGHT];
    size_t nh = 0;
    for (;;) {
      ttft_seq s = ttft_begin(R, 6000000000ull);
      if (!s) break;
      REQUIRE(nh < MAX_INFLIGHT);
      held[nh++] = s;
    }
    CHECK_EQ_U(nh, MAX_INFLIGHT - 1); /* W holds one slot */
    rebaseline();
    CHECK_EQ_U(ttft_begin(R, 6000000001ull), 0);
    ttft_request_init(&req);
    req.class_id = g_chat;
    CHECK_EQ_U(ttft_begin_ex(R, &req, 6000000001ull), 0);
    uint64_t ctr[TTFT_COUNTER_COUNT_], cnt[TTFT_METRIC_COUNT_];
    read_state(ctr, cnt);
    CHECK_EQ_U(ctr[TTFT_COUNTER_DROPPED], base_ctr[TTFT_COUNTER_DROPPED] + 2);
    INTACT_ALLOW(1u << TTFT_COUNTER_DROPPED);
    for (size_t i = 0; i < nh; i++) CHECK_EQ_I(ttft_stream_end(R, held[i], TTFT_ERROR, 6000000002ull), TTFT_OK);
    /* old handles stay dead after their slots serve new sequences */
    ttft_seq fresh[MAX_INFLIGHT];
    for (size_t i = 0; i < nh; i++) {
      fresh[i] = ttft_begin(R, 6000000003ull);
      CHECK_TRUE(fresh[i] != 0);
    }
    for (size_t i = 0; i < nh; i++) {
      CHECK_EQ_I(ttft_token_emitted(R, held[i], 1, 6000000004ull), TTFT_ESTALE);
      CHECK_EQ_I(ttft_stream_end(R, held[i], TTFT_COMPLETED, 6000000004ull), TTFT_ESTALE);
    }
    for (size_t i = 0; i < nh; i++) CHECK_EQ_I(ttft_stream_end(R, fresh[i], TTFT_CANCELLED, 6000000005ull), TTFT_OK);
    rebaseline();
  }
}

/* ------------------------------------------------------------ snapshots */
static void test_snapshot_queries(ttft_snapshot *s) {
  ROW("snapshot queries with NULL");
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
    CHECK_EQ_U(ttft_snapshot_count(NULL, (ttft_metric)m), 0);
    CHECK_EQ_U(ttft_snapshot_quantile(NULL, (ttft_metric)m, 0.5), 0);
    CHECK_EQ_D(ttft_snapshot_mean(NULL, (ttft_metric)m), 0.0);
    CHECK_EQ_U(ttft_snapshot_sum(NULL, (ttft_metric)m), 0);
    CHECK_EQ_U(ttft_snapshot_class_count(NULL, 0, (ttft_metric)m), 0);
    CHECK_EQ_U(ttft_snapshot_class_quantile(NULL, 0, (ttft_metric)m, 0.5), 0);
    CHECK_EQ_D(ttft_snapshot_class_mean(NULL, 0, (ttft_metric)m), 0.0);
    CHECK_EQ_U(ttft_snapshot_class_sum(NULL, 0, (ttft_metric)m), 0);
  }
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++) {
    CHECK_EQ_U(ttft_snapshot_counter(NULL, (ttft_counter)c), 0);
    CHECK_EQ_U(ttft_snapshot_class_counter(NULL, TTFT_CLASS_ALL, (ttft_counter)c), 0);
  }
  for (int g = 0; g < TTFT_GAUGE_COUNT_; g++) CHECK_EQ_U(ttft_snapshot_gauge(NULL, (ttft_gauge)g), 0);
  CHECK_EQ_I(ttft_snapshot_classes(NULL), 0);
  CHECK_NULL(ttft_snapshot_class_name(NULL, 0));
  CHECK_EQ_D(ttft_snapshot_attainment(NULL, TTFT_CLASS_ALL), -1.0);
  CHECK_EQ_U(ttft_snapshot_split_count(NULL, TTFT_SPLIT_PREFIX_CACHE, 0), 0);
  CHECK_EQ_U(ttft_snapshot_split_quantile(NULL, TTFT_SPLIT_PREFIX_CACHE, 0, 0.5), 0);
  CHECK_EQ_U(ttft_snapshot_bands(NULL), 0);
  uint32_t lo = 7, hi = 7;
  CHECK_EQ_I(ttft_snapshot_band(NULL, 0, &lo, &hi), TTFT_EINVAL);
  uint64_t t0 = 7, t1 = 7;
  CHECK_EQ_I(ttft_snapshot_interval(NULL, &t0, &t1), TTFT_EINVAL);
  CHECK_NULL(ttft_snapshot_label(NULL, "model"));
  ttft_slo slo;
  ttft_slo_init(&slo);
  CHECK_EQ_I(ttft_snapshot_class_slo(NULL, 0, &slo), TTFT_EINVAL);

  ROW("snapshot queries with bad metric/counter/gauge");
  int ncls = ttft_snapshot_classes(s);
  CHECK_EQ_I(ncls, 3);
  for (size_t i = 0; i < N_(bad_metric); i++) {
    ttft_metric m = (ttft_metric)bad_metric[i];
    CHECK_EQ_U(ttft_snapshot_count(s, m), 0);
    CHECK_EQ_U(ttft_snapshot_quantile(s, m, 0.5), 0);
    CHECK_EQ_D(ttft_snapshot_mean(s, m), 0.0);
    CHECK_EQ_U(ttft_snapshot_sum(s, m), 0);
    CHECK_EQ_U(ttft_snapshot_class_count(s, TTFT_CLASS_ALL, m), 0);
    CHECK_EQ_U(ttft_snapshot_class_quantile(s, 0, m, 0.5), 0);
    CHECK_EQ_D(ttft_snapshot_class_mean(s, 0, m), 0.0);
    CHECK_EQ_U(ttft_snapshot_class_sum(s, 0, m), 0);
  }
  for (size_t i = 0; i < N_(bad_counter); i++) {
    CHECK_EQ_U(ttft_snapshot_counter(s, (ttft_counter)bad_counter[i]), 0);
    CHECK_EQ_U(ttft_snapshot_class_counter(s, 0, (ttft_counter)bad_counter[i]), 0);
  }
  for (size_t i = 0; i < N_(bad_gauge); i++) CHECK_EQ_U(ttft_snapshot_gauge(s, (ttft_gauge)bad_gauge[i]), 0);

  ROW("snapshot queries with bad q");
  CHECK_TRUE(ttft_snapshot_count(s, TTFT_METRIC_ITL) > 0); /* so a 0 below is the refusal */
  for (size_t i = 0; i < N_(bad_q); i++) {
    CHECK_EQ_U(ttft_snapshot_quantile(s, TTFT_METRIC_ITL, bad_q[i]), 0);
    CHECK_EQ_U(ttft_snapshot_class_quantile(s, TTFT_CLASS_ALL, TTFT_METRIC_ITL, bad_q[i]), 0);
    CHECK_EQ_U(ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, 1, bad_q[i]), 0);
  }
  const double specials[] = {NAN, -NAN, INFINITY, -INFINITY};
  for (size_t i = 0; i < N_(specials); i++) {
    CHECK_EQ_U(ttft_snapshot_quantile(s, TTFT_METRIC_ITL, specials[i]), 0);
    CHECK_EQ_U(ttft_snapshot_class_quantile(s, 0, TTFT_METRIC_ITL, specials[i]), 0);
    CHECK_EQ_U(ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, 1, specials[i]), 0);
  }
  ROW("q = 0 and 1 are min and max");
  CHECK_TRUE(ttft_snapshot_quantile(s, TTFT_METRIC_ITL, 0.0) <= ttft_snapshot_quantile(s, TTFT_METRIC_ITL, 1.0));
  CHECK_TRUE(ttft_snapshot_quantile(s, TTFT_METRIC_ITL, 0.0) > 0);

  ROW("snapshot per-class queries with bad class ids");
  const int bad_cls[] = {-2, ncls, ncls + 1, 1000, INT_MAX, INT_MIN};
  for (size_t i = 0; i < N_(bad_cls); i++) {
    int c = bad_cls[i];
    CHECK_NULL(ttft_snapshot_class_name(s, c));
    CHECK_EQ_I(ttft_snapshot_class_slo(s, c, &slo), TTFT_EINVAL);
    for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
      CHECK_EQ_U(ttft_snapshot_class_count(s, c, (ttft_metric)m), 0);
      CHECK_EQ_U(ttft_snapshot_class_quantile(s, c, (ttft_metric)m, 0.5), 0);
      CHECK_EQ_D(ttft_snapshot_class_mean(s, c, (ttft_metric)m), 0.0);
      CHECK_EQ_U(ttft_snapshot_class_sum(s, c, (ttft_metric)m), 0);
    }
    for (int k = 0; k < TTFT_COUNTER_COUNT_; k++) CHECK_EQ_U(ttft_snapshot_class_counter(s, c, (ttft_counter)k), 0);
    CHECK_EQ_D(ttft_snapshot_attainment(s, c), -1.0);
  }
  CHECK_TRUE(ttft_snapshot_class_name(s, 0) != NULL && strcmp(ttft_snapshot_class_name(s, 0), "default") == 0);

  ROW("class_slo bad args");
  CHECK_EQ_I(ttft_snapshot_class_slo(s, 0, NULL), TTFT_EINVAL);
  slo.struct_size = 0;
  CHECK_EQ_I(ttft_snapshot_class_slo(s, 0, &slo), TTFT_EINVAL);
  slo.struct_size = SIZE_MAX;
  CHECK_EQ_I(ttft_snapshot_class_slo(s, 0, &slo), TTFT_EINVAL);
  ttft_slo_init(&slo);
  CHECK_EQ_I(ttft_snapshot_class_slo(s, g_chat, &slo), TTFT_OK);
  CHECK_EQ_U(slo.ttft_ns, 1000000);

  ROW("splits and bands out of range");
  unsigned bands = ttft_snapshot_bands(s);
  CHECK_EQ_U(bands, 7); /* 6 default edges */
  for (size_t i = 0; i < N_(bad_split); i++) {
    CHECK_EQ_U(ttft_snapshot_split_count(s, (ttft_split)bad_split[i], 0), 0);
    CHECK_EQ_U(ttft_snapshot_split_quantile(s, (ttft_split)bad_split[i], 0, 0.5), 0);
  }
  const unsigned bad_idx_cache[] = {2, 3, 1000, UINT32_MAX};
  for (size_t i = 0; i < N_(bad_idx_cache); i++) {
    CHECK_EQ_U(ttft_snapshot_split_count(s, TTFT_SPLIT_PREFIX_CACHE, bad_idx_cache[i]), 0);
    CHECK_EQ_U(ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, bad_idx_cache[i], 0.5), 0);
  }
  const unsigned bad_idx_band[] = {bands, bands + 1, TTFT_MAX_BANDS, UINT32_MAX};
  for (size_t i = 0; i < N_(bad_idx_band); i++) {
    CHECK_EQ_U(ttft_snapshot_split_count(s, TTFT_SPLIT_PROMPT_BAND, bad_idx_band[i]), 0);
    CHECK_EQ_U(ttft_snapshot_split_quantile(s, TTFT_SPLIT_PROMPT_BAND, bad_idx_band[i], 0.5), 0);
    CHECK_EQ_I(ttft_snapshot_band(s, bad_idx_band[i], &lo, &hi), TTFT_EINVAL);
  }
  CHECK_EQ_I(ttft_snapshot_band(s, 0, NULL, &hi), TTFT_EINVAL);
  CHECK_EQ_I(ttft_snapshot_band(s, 0, &lo, NULL), TTFT_EINVAL);
  CHECK_EQ_I(ttft_snapshot_band(s, bands - 1, &lo, &hi), TTFT_OK);
  CHECK_EQ_U(hi, UINT32_MAX);
  CHECK_EQ_I(ttft_snapshot_interval(s, NULL, &t1), TTFT_EINVAL);
  CHECK_EQ_I(ttft_snapshot_interval(s, &t0, NULL), TTFT_EINVAL);
  CHECK_EQ_I(ttft_snapshot_interval(s, &t0, &t1), TTFT_OK);
  CHECK_TRUE(t0 <= t1);
  CHECK_NULL(ttft_snapshot_label(s, NULL));
  CHECK_NULL(ttft_snapshot_label(s, ""));
  CHECK_NULL(ttft_snapshot_label(s, "nope"));
  CHECK_NULL(ttft_snapshot_label(s, "MODEL"));
  CHECK_TRUE(ttft_snapshot_label(s, "start_point") != NULL);
}

static void test_format(ttft_snapshot *s) {
  ROW("format bad args");
  char buf[64];
  CHECK_EQ_I(ttft_snapshot_format(NULL, TTFT_FORMAT_TEXT, buf, sizeof buf), TTFT_EINVAL);
  CHECK_EQ_I(ttft_snapshot_format(NULL, TTFT_FORMAT_TEXT, NULL, 0), TTFT_EINVAL);
  for (size_t i = 0; i < N_(bad_format); i++) {
    CHECK_EQ_I(ttft_snapshot_format(s, (ttft_format)bad_format[i], buf, sizeof buf), TTFT_EINVAL);
    CHECK_EQ_I(ttft_snapshot_format(s, (ttft_format)bad_format[i], NULL, 0), TTFT_EINVAL);
  }
  for (int f = 0; f < TTFT_FORMAT_COUNT_; f++) {
    ROW("format buf NULL with cap > 0");
    CHECK_EQ_I(ttft_snapshot_format(s, (ttft_format)f, NULL, 1), TTFT_EINVAL);
    CHECK_EQ_I(ttft_snapshot_format(s, (ttft_format)f, NULL, SIZE_MAX), TTFT_EINVAL);
    ROW("format snprintf rules");
    long need = ttft_snapshot_format(s, (ttft_format)f, NULL, 0);
    CHECK_TRUE(need > 0);
    if (need <= 0) continue;
    char *full = malloc((size_t)need + 1 + 16);
    REQUIRE(full != NULL);
    memset(full, 0x5A, (size_t)need + 1 + 16);
    CHECK_EQ_I(ttft_snapshot_format(s, (ttft_format)f, full, (size_t)need + 1), need);
    CHECK_EQ_I(full[need], '\0');
    if (f != TTFT_FORMAT_PROMETHEUS_PROTOBUF && f != TTFT_FORMAT_OTLP_PROTOBUF) /* binary: NULs */
      CHECK_EQ_U(strlen(full), (size_t)need);
    for (int k = 1; k <= 16; k++) CHECK_EQ_I((unsigned char)full[need + k], 0x5A);
    /* every smaller capacity: same return, NUL at cap-1, a prefix, nothing past cap */
    const size_t caps[] = {1, 2, 3, 17, (size_t)need / 2, (size_t)need - 1, (size_t)need};
    for (size_t c = 0; c < N_(caps); c++) {
      size_t cap = caps[c];
      if (cap == 0 || cap > (size_t)need) continue;
      char *part = malloc(cap + 16);
      REQUIRE(part != NULL);
      memset(part, 0x5A, cap + 16);
      CHECK_EQ_I(ttft_snapshot_format(s, (ttft_format)f, part, cap), need);
      CHECK_EQ_I(part[cap - 1], '\0');
      CHECK_TRUE(memcmp(part, full, cap - 1) == 0);
      for (int k = 0; k < 16; k++) CHECK_EQ_I((unsigned char)part[cap + k], 0x5A);
      free(part);
    }
    free(full);
  }
}

static void test_codec(ttft_registry *other) {
  ROW("encode bad args");
  ttft_snapshot *s = ttft_snapshot_take(R);
  REQUIRE(s != NULL);
  unsigned char small[8];
  CHECK_EQ_I(ttft_snapshot_encode(NULL, small, sizeof small), TTFT_EINVAL);
  CHECK_EQ_I(ttft_snapshot_encode(NULL, NULL, 0), TTFT_EINVAL);
  CHECK_EQ_I(ttft_snapshot_encode(s, NULL, 1), TTFT_EINVAL);
  CHECK_EQ_I(ttft_snapshot_encode_base64(NULL, (char *)small, sizeof small), TTFT_EINVAL);
  CHECK_EQ_I(ttft_snapshot_encode_base64(s, NULL, 1), TTFT_EINVAL);
  long need = ttft_snapshot_encode(s, NULL, 0);
  CHECK_TRUE(need > 0);
  REQUIRE(need > 0);
  ROW("encode writes nothing past cap");
  unsigned char *enc = malloc((size_t)need + 16);
  REQUIRE(enc != NULL);
  memset(enc, 0x5A, (size_t)need + 16);
  CHECK_EQ_I(ttft_snapshot_encode(s, enc, (size_t)need / 2), need);
  for (size_t k = (size_t)need / 2; k < (size_t)need + 16; k++) {
    if (enc[k] != 0x5A) {
      fprintf(stderr, "[%s] byte %zu written past cap %zu\n", g_row, k, (size_t)need / 2);
      g_failures++;
      break;
    }
  }
  CHECK_EQ_I(ttft_snapshot_encode(s, enc, (size_t)need), need);
  for (int k = 0; k < 16; k++) CHECK_EQ_I(enc[need + k], 0x5A);

  ROW("decode bad args");
  int err = 12345;
  CHECK_NULL(ttft_snapshot_decode(NULL, 10, &err));
  CHECK_EQ_I(err, TTFT_EINVAL);
  CHECK_NULL(ttft_snapshot_decode(NULL, 0, NULL));
  err = 12345;
  CHECK_NULL(ttft_snapshot_decode(enc, 0, &err));
  CHECK_EQ_I(err, TTFT_ECORRUPT);
  CHECK_NULL(ttft_snapshot_decode_base64(NULL, 10, &err));
  CHECK_EQ_I(err, TTFT_EINVAL);
  ROW("decode every truncation");
  for (size_t len = 0; len < (size_t)need; len++) {
    err = 0;
    ttft_snapshot *d = ttft_snapshot_decode(enc, len, &err);
    if (d != NULL || err != TTFT_ECORRUPT) {
      fprintf(stderr, "[%s] truncation to %zu of %ld bytes: %s, err %d\n", g_row, len, need,
              d ? "decoded" : "refused", err);
      g_failures++;
      ttft_snapshot_free(d);
      break;
    }
  }
  ROW("decode every single-bit flip (checksummed)");
  for (size_t i = 0; i < (size_t)need; i++) {
    for (int bit = 0; bit < 8; bit += 3) {
      enc[i] ^= (unsigned char)(1u << bit);
      err = 0;
      ttft_snapshot *d = ttft_snapshot_decode(enc, (size_t)need, &err);
      enc[i] ^= (unsigned char)(1u << bit);
      if (d != NULL || err != TTFT_ECORRUPT) {
        fprintf(stderr, "[%s] flip of bit %d in byte %zu of %ld: %s, err %d\n", g_row, bit, i, need,
                d ? "decoded" : "refused", err);
        g_failures++;
        ttft_snapshot_free(d);
        i = (size_t)need;
        break;
      }
    }
  }
  ROW("decode trailing garbage");
  {
    unsigned char *longer = malloc((size_t)need + 1);
    REQUIRE(longer != NULL);
    memcpy(longer, enc, (size_t)need);
    longer[need] = 0;
    err = 0;
    ttft_snapshot *d = ttft_snapshot_decode(longer, (size_t)need + 1, &err);
    CHECK_NULL(d);
    CHECK_EQ_I(err, TTFT_ECORRUPT);
    ttft_snapshot_free(d);
    free(longer);
  }
  ROW("decode the intact encoding");
  ttft_snapshot *d = ttft_snapshot_decode(enc, (size_t)need, &err);
  CHECK_TRUE(d != NULL);
  if (d) {
    for (int c = 0; c < TTFT_COUNTER_COUNT_; c++)
      CHECK_EQ_U(ttft_snapshot_counter(d, (ttft_counter)c), ttft_snapshot_counter(s, (ttft_counter)c));
    ttft_snapshot_free(d);
  }

  ROW("decode_base64 garbage");
  const char *junk[] = {"", "A", "AB", "ABC", "!!!!", "====", "AAAA====", "QUJD\n", "\xff\xfe\xfd\xfc"};
  for (size_t i = 0; i < N_(junk); i++) {
    err = 0;
    d = ttft_snapshot_decode_base64(junk[i], strlen(junk[i]), &err);
    CHECK_NULL(d);
    CHECK_EQ_I(err, TTFT_ECORRUPT);
    ttft_snapshot_free(d);
  }
  ROW("decode_base64 truncations and bad characters");
  long b64 = ttft_snapshot_encode_base64(s, NULL, 0);
  CHECK_TRUE(b64 > 0);
  char *text = malloc((size_t)b64 + 1);
  REQUIRE(text != NULL);
  CHECK_EQ_I(ttft_snapshot_encode_base64(s, text, (size_t)b64 + 1), b64);
  CHECK_EQ_U(strlen(text), (size_t)b64);
  for (size_t len = 0; len < (size_t)b64; len += 1 + len / 7) {
    d = ttft_snapshot_decode_base64(text, len, &err);
    CHECK_NULL(d);
    ttft_snapshot_free(d);
  }
  for (size_t i = 0; i < (size_t)b64; i += 1 + (size_t)b64 / 50) {
    char save = text[i];
    text[i] = '*';
    d = ttft_snapshot_decode_base64(text, (size_t)b64, &err);
    CHECK_NULL(d);
    CHECK_EQ_I(err, TTFT_ECORRUPT);
    ttft_snapshot_free(d);
    text[i] = save;
  }
  d = ttft_snapshot_decode_base64(text, (size_t)b64, &err);
  CHECK_TRUE(d != NULL);
  ttft_snapshot_free(d);
  free(text);

  ROW("merge/delta bad args");
  err = 0;
  CHECK_NULL(ttft_snapshot_merge(NULL, s, &err));
  CHECK_EQ_I(err, TTFT_EINVAL);
  err = 0;
  CHECK_NULL(ttft_snapshot_merge(s, NULL, &err));
  CHECK_EQ_I(err, TTFT_EINVAL);
  CHECK_NULL(ttft_snapshot_merge(NULL, NULL, NULL));
  err = 0;
  CHECK_NULL(ttft_snapshot_delta(NULL, s, &err));
  CHECK_EQ_I(err, TTFT_EINVAL);
  err = 0;
  CHECK_NULL(ttft_snapshot_delta(s, NULL, &err));
  CHECK_EQ_I(err, TTFT_EINVAL);
  CHECK_NULL(ttft_snapshot_delta(NULL, NULL, NULL));
  ROW("delta of two registries");
  ttft_snapshot *o = ttft_snapshot_take(other);
  REQUIRE(o != NULL);
  err = 0;
  d = ttft_snapshot_delta(o, s, &err);
  CHECK_NULL(d);
  CHECK_EQ_I(err, TTFT_EINVAL);
  ttft_snapshot_free(d);
  ROW("delta of a merged snapshot");
  ttft_snapshot *m = ttft_snapshot_merge(s, o, &err);
  CHECK_TRUE(m != NULL);
  if (m) {
    err = 0;
    d = ttft_snapshot_delta(m, s, &err);
    CHECK_NULL(d);
    CHECK_EQ_I(err, TTFT_EINVAL);
    ttft_snapshot_free(d);
    ttft_snapshot_free(m);
  }
  ttft_snapshot_free(o);
  free(enc);
  ttft_snapshot_free(s);
  INTACT();
}

static void test_http(void) {
  ROW("http bad args");
  ttft_http *srv = (ttft_http *)(uintptr_t)1;
  CHECK_EQ_I(ttft_http_port(NULL), TTFT_EINVAL);
  int rc = ttft_http_start(NULL, "127.0.0.1:0", &srv);
  CHECK_TRUE(rc == TTFT_EINVAL || rc == TTFT_ENOTSUP);
  rc = ttft_http_start(R, NULL, &srv);
  CHECK_TRUE(rc == TTFT_EINVAL || rc == TTFT_ENOTSUP);
  rc = ttft_http_start(R, "127.0.0.1:0", NULL);
  CHECK_TRUE(rc == TTFT_EINVAL || rc == TTFT_ENOTSUP);
  const char *bad_addr[] = {"", "nonsense", "127.0.0.1", "127.0.0.1:", "127.0.0.1:99999",
                            "127.0.0.1:-1", "[::1", "[::1]", "300.1.1.1:80", "127.0.0.1:80x",
                            ":", "host name:80"};
  for (size_t i = 0; i < N_(bad_addr); i++) {
    srv = NULL;
    rc = ttft_http_start(R, bad_addr[i], &srv);
    if (rc == TTFT_OK) {
      fprintf(stderr, "[%s] ttft_http_start accepted \"%s\"\n", g_row, bad_addr[i]);
      g_failures++;
      ttft_http_stop(srv);
    } else {
      CHECK_TRUE(rc == TTFT_EINVAL || rc == TTFT_ENOTSUP || rc == TTFT_EIO);
    }
  }
  INTACT();
}

int main(void) {
  test_misc();
  test_config();
  setup();
  test_classes();
  test_hooks();
  {
    /* data on the other classes and the splits so "0" below is a refusal */
    ttft_request req;
    ttft_request_init(&req);
    req.class_id = g_chat;
    req.prefix_hit = 1;
    req.prompt_tokens = 100;
    ttft_seq s = ttft_begin_ex(R, &req, 7000000000ull);
    REQUIRE(s != 0);
    REQUIRE(ttft_token_emitted(R, s, 1, 7000100000ull) == TTFT_OK);
    REQUIRE(ttft_token_emitted(R, s, 1, 7000200000ull) == TTFT_OK);
    REQUIRE(ttft_stream_end(R, s, TTFT_COMPLETED, 7000300000ull) == TTFT_OK);
    rebaseline();
  }
  ttft_snapshot *s = ttft_snapshot_take(R);
  REQUIRE(s != NULL);
  CHECK_EQ_U(ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT), 1);
  test_snapshot_queries(s);
  test_format(s);
  ttft_snapshot_free(s);
  ttft_registry *other = ttft_registry_new(NULL);
  REQUIRE(other != NULL);
  test_codec(other);
  ttft_registry_free(other);
  test_http();
  ROW("the witness still works");
  CHECK_EQ_I(ttft_token_emitted(R, W, 2, 8000000000ull), TTFT_OK);
  CHECK_EQ_I(ttft_stream_end(R, W, TTFT_COMPLETED, 8000000001ull), TTFT_OK);
  CHECK_EQ_I(ttft_inflight(R), 0);
  ttft_registry_free(R);
  if (g_failures) {
    fprintf(stderr, "test_badinput: %d failure(s)\n", g_failures);
    return 1;
  }
  printf("test_badinput: ok\n");
  return 0;
}
