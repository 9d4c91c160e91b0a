/*
 * test_alloc_fail.c — out-of-memory at every allocation, SQLite style.
 *
 * An allocator installed with ttft_set_allocator fails the k-th allocation
 * after it is armed. For k = 1, 2, ... until the operation succeeds, each
 * allocating operation (ttft_registry_new, ttft_class_add,
 * ttft_snapshot_take, ttft_snapshot_format in every format, encode/decode
 * in both forms, merge, delta, the HTTP endpoint) must:
 *   - return its documented error (NULL with *err = TTFT_ENOMEM, or
 *     TTFT_ENOMEM),
 *   - leak nothing (the allocator counts live blocks and bytes),
 *   - leave the registry usable: counters unchanged, hooks still accepted,
 *     a later snapshot succeeds and sees the same data.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TTFT_TEST_HTTP_BUILT
#  define TTFT_TEST_HTTP_BUILT 1 /* tests/http.cmake says whether the library has the endpoint */
#endif

#include "ttft.h"
#include "task.h"

/* ------------------------------------------------------- the allocator */
typedef struct fail_alloc {
  uint64_t calls;      /* allocation calls since arming          */
  uint64_t fail_at;    /* 0 = never fail                         */
  uint64_t failed;     /* failures injected since arming         */
  size_t failed_size;  /* size of the last injected failure      */
  long live_blocks;
  long long live_bytes;
} fail_alloc;

static fail_alloc A;
#define HDR 16 /* keeps 16-byte alignment; holds the size */

static void *fa_alloc(void *ctx, size_t n) {
  fail_alloc *fa = ctx;
  fa->calls++;
  if (fa->fail_at && fa->calls == fa->fail_at) {
    fa->failed++;
    fa->failed_size = n;
    return NULL;
  }
  unsigned char *p = malloc(n + HDR);
  if (!p) return NULL;
  memcpy(p, &n, sizeof n);
  fa->live_blocks++;
  fa->live_bytes += (long long)n;
  return p + HDR;
}

static void fa_free(void *ctx, void *q) {
  fail_alloc *fa = ctx;
  if (!q) return;
  unsigned char *p = (unsigned char *)q - HDR;
  size_t n;
  memcpy(&n, p, sizeof n);
  fa->live_blocks--;
  fa->live_bytes -= (long long)n;
  free(p);
}

static void arm(uint64_t k) {
  A.calls = 0;
  A.failed = 0;
  A.fail_at = k;
}
static void disarm(void) { A.fail_at = 0; }

/* ---------------------------------------------------------- the world */
/* Every test starts from the same world (TU_SETUP): the failing allocator
 * installed, a registry R with a class "chat" and data in every metric on
 * both classes, g_ref a snapshot of it, g_newer one after 3 more streams.
 * TU_TEARDOWN frees it all and checks that nothing is left live. */
static ttft_registry *R;
static int g_chat;
static uint64_t T0 = 1000000000ull;
static ttft_snapshot *g_ref, *g_newer;
static ttft_config g_cfg;

static ttft_config make_config(void) {
  static const ttft_label labels[] = {{"zone", "eu-1"}, {"pool", "a\"b\\c\n"}};
  static const uint64_t ttft_buckets[] = {1000000, 10000000, 100000000, 1000000000};
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 64;
  c.max_threads = 4;
  c.max_classes = 64;
  c.model = "llama-test";
  c.const_labels = labels;
  c.n_const_labels = 2;
  c.prom_buckets[TTFT_METRIC_TTFT] = ttft_buckets;
  c.prom_n_buckets[TTFT_METRIC_TTFT] = 4;
  c.prom_summaries = 1;
  return c;
}

static ttft_slo chat_slo(void) {
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.ttft_ns = 50000000;
  slo.tpot_ns = 20000;
  return slo;
}

/* some data in every metric, on two classes and both splits */
static void feed(ttft_registry *r, int cls, int nseq) {
  for (int i = 0; i < nseq; i++) {
    ttft_request req;
    ttft_request_init(&req);
    req.class_id = cls;
    req.prompt_tokens = (uint32_t)(100 * (i + 1));
    req.prefix_hit = i % 2;
    uint64_t t = T0;
    T0 += 100000000ull;
    ttft_seq s = ttft_begin_ex(r, &req, t);
    EXPECT_TRUE(s != 0);
    if (!s) return;
    EXPECT_ERR(TTFT_OK, ttft_mark(r, s, TTFT_PHASE_SCHEDULED, t + 1000));
    for (int k = 0; k < i % 5; k++)
      EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1 + (uint32_t)k, t + 100000 + (uint64_t)k * 30000));
    EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, (ttft_status)(i % 3), t + 1000000));
  }
}

static ttft_allocator g_fa = {fa_alloc, fa_free, &A};

static void world_setup(void) {
  EXPECT_ERR(TTFT_OK, ttft_set_allocator(&g_fa));
  g_cfg = make_config();
  R = ttft_registry_new(&g_cfg);
  EXPECT_NOT_NULL(R);
  if (!R) return;
  ttft_slo slo = chat_slo();
  g_chat = ttft_class_add(R, "chat", &slo);
  EXPECT_EQ_INT(1, g_chat);
  feed(R, 0, 7);
  feed(R, g_chat, 9);
  g_ref = ttft_snapshot_take(R);
  EXPECT_NOT_NULL(g_ref);
  feed(R, g_chat, 3);
  g_newer = ttft_snapshot_take(R);
  EXPECT_NOT_NULL(g_newer);
}

static void world_teardown(void) {
  ttft_snapshot_free(g_ref);
  ttft_snapshot_free(g_newer);
  ttft_registry_free(R);
  g_ref = g_newer = NULL;
  R = NULL;
  /* after freeing everything: no block, no byte still live */
  EXPECT_EQ_INT(0, A.live_blocks);
  EXPECT_EQ_INT(0, A.live_bytes);
  EXPECT_ERR(TTFT_OK, ttft_set_allocator(NULL));
}
TU_SETUP(world_setup)
TU_TEARDOWN(world_teardown)

static void counters_of(ttft_registry *r, uint64_t out[TTFT_COUNTER_COUNT_]) {
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_NOT_NULL(s); /* a snapshot after a failed operation */
  if (!s) {
    memset(out, 0, sizeof(uint64_t) * TTFT_COUNTER_COUNT_);
    return;
  }
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++) out[c] = ttft_snapshot_counter(s, (ttft_counter)c);
  ttft_snapshot_free(s);
}

/* After a failure: nothing leaked, counters unchanged, hooks work. */
static void after_failure(const char *op, uint64_t k, long blocks0, long long bytes0) {
  unsigned long failed0 = tu_failures();
  EXPECT_EQ_INT(blocks0, A.live_blocks); /* nothing leaked */
  EXPECT_EQ_INT(bytes0, A.live_bytes);
  if (R) {
    uint64_t before[TTFT_COUNTER_COUNT_], after[TTFT_COUNTER_COUNT_];
    counters_of(R, before);
    ttft_seq s = ttft_begin(R, T0);
    EXPECT_TRUE(s != 0);
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(R, s, 2, T0 + 10));
    EXPECT_ERR(TTFT_OK, ttft_stream_end(R, s, TTFT_COMPLETED, T0 + 20));
    T0 += 100;
    counters_of(R, after);
    EXPECT_EQ_U64(before[TTFT_COUNTER_BEGUN] + 1, after[TTFT_COUNTER_BEGUN]);
    EXPECT_EQ_U64(before[TTFT_COUNTER_TOKENS] + 2, after[TTFT_COUNTER_TOKENS]);
  }
  if (tu_failures() != failed0)
    fprintf(stderr, "  (after %s failed at allocation %llu)\n", op, (unsigned long long)k);
}

#define MAX_K 100000
static int g_topup_may_fail; /* set around ttft_snapshot_take */

/* Run attempt() (returns 1 on success; on failure it checks its own error
 * code) with the k-th allocation failing, for every k until it succeeds;
 * then cleanup() frees what the successful attempt made. Returns how many
 * allocation points failed and recovered. */
static uint64_t each_failure(const char *op, int (*attempt)(void), void (*cleanup)(void)) {
  uint64_t k;
  for (k = 1; k < MAX_K; k++) {
    long b0 = A.live_blocks;
    long long y0 = A.live_bytes;
    arm(k);
    int ok = attempt();
    disarm();
    if (ok) {
      /* One allocation may fail without failing the call: the snapshot-time
       * top-up of the registry's histogram pool (src/record/pool.c), a slab
       * of 256 chunks of 1 KiB plus two cache lines. The snapshot is still
       * whole; the pool stays as it was. */
      int pool_topup = g_topup_may_fail && A.failed == 1 && A.failed_size == 256 * 1024 + 128;
      if (A.failed && !pool_topup)
        fprintf(stderr, "  (%s succeeded although allocation %llu failed)\n", op, (unsigned long long)k);
      EXPECT_TRUE(A.failed == 0 || pool_topup);
      /* with a cleanup the operation's result is freed: back to b0. Without
       * one (class_add) the registry keeps what it made until it is freed;
       * the teardown's check after ttft_registry_free covers it. */
      if (cleanup) {
        cleanup();
        EXPECT_EQ_INT(b0, A.live_blocks); /* the success path leaks nothing */
        EXPECT_EQ_INT(y0, A.live_bytes);
      }
      break;
    }
    if (!A.failed) fprintf(stderr, "  (%s failed with no allocation failure, k=%llu)\n", op, (unsigned long long)k);
    EXPECT_GT_U64(A.failed, 0);
    if (!A.failed) break;
    after_failure(op, k, b0, y0);
  }
  EXPECT_LT_U64(k, MAX_K); /* it succeeded in the end */
  printf("  %-36s %3llu allocation point(s) failed and recovered\n", op, (unsigned long long)(k - 1));
  return k - 1;
}

/* ------------------------------------------------------ the operations */
static ttft_registry *g_r;
static int g_id;
static ttft_snapshot *g_out;
static int g_err;
static int g_fmt;
static long g_want, g_n;
static char *g_buf;
static unsigned char *g_enc;
static long g_enc_len, g_b64_len;
static char *g_b64;
static ttft_http *g_srv;

static int op_registry_new(void) { return (g_r = ttft_registry_new(&g_cfg)) != NULL; }
static void free_registry(void) { ttft_registry_free(g_r); }

/* R has "chat" already: the class added under injection is "tool" */
static int op_class_add(void) {
  ttft_slo slo = chat_slo();
  g_id = ttft_class_add(R, "tool", &slo);
  if (g_id >= 1) return 1;
  EXPECT_ERR(TTFT_ENOMEM, g_id);
  EXPECT_ERR(TTFT_ESTALE, ttft_class_find(R, "tool")); /* a failed add leaves no class */
  return 0;
}

static int op_snapshot_take(void) { return (g_out = ttft_snapshot_take(R)) != NULL; }
/* the snapshot that finally succeeded holds what the registry holds */
static void check_take(void) {
  ttft_snapshot *now = ttft_snapshot_take(R);
  EXPECT_NOT_NULL(now);
  if (!now) {
    ttft_snapshot_free(g_out);
    return;
  }
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++)
    EXPECT_EQ_U64(ttft_snapshot_counter(now, (ttft_counter)c), ttft_snapshot_counter(g_out, (ttft_counter)c));
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++)
    EXPECT_EQ_U64(ttft_snapshot_count(now, (ttft_metric)m), ttft_snapshot_count(g_out, (ttft_metric)m));
  ttft_snapshot_free(now);
  ttft_snapshot_free(g_out);
}
/* a decoded snapshot has the counters of the one encoded */
static void check_free_snapshot(void) {
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++)
    EXPECT_EQ_U64(ttft_snapshot_counter(g_ref, (ttft_counter)c), ttft_snapshot_counter(g_out, (ttft_counter)c));
  ttft_snapshot_free(g_out);
}

static int op_format(void) {
  g_n = ttft_snapshot_format(g_ref, (ttft_format)g_fmt, g_buf, (size_t)g_want + 1);
  if (g_n >= 0) return 1;
  EXPECT_ERR(TTFT_ENOMEM, g_n);
  return 0;
}
static void check_format(void) { EXPECT_EQ_INT(g_want, g_n); }

static int op_encode(void) {
  g_n = ttft_snapshot_encode(g_ref, g_enc, (size_t)g_enc_len);
  if (g_n >= 0) return 1;
  EXPECT_ERR(TTFT_ENOMEM, g_n);
  return 0;
}
static void check_encode(void) { EXPECT_EQ_INT(g_enc_len, g_n); }
static int op_encode_base64(void) {
  g_n = ttft_snapshot_encode_base64(g_ref, g_b64, (size_t)g_b64_len + 1);
  if (g_n >= 0) return 1;
  EXPECT_ERR(TTFT_ENOMEM, g_n);
  return 0;
}
static void check_encode_base64(void) { EXPECT_EQ_INT(g_b64_len, g_n); }

static int finish_decode(void) {
  if (g_out) return 1;
  EXPECT_ERR(TTFT_ENOMEM, g_err);
  return 0;
}
static int op_decode(void) {
  g_err = 0;
  g_out = ttft_snapshot_decode(g_enc, (size_t)g_enc_len, &g_err);
  return finish_decode();
}
static int op_decode_base64(void) {
  g_err = 0;
  g_out = ttft_snapshot_decode_base64(g_b64, (size_t)g_b64_len, &g_err);
  return finish_decode();
}
static int op_merge(void) {
  g_err = 0;
  g_out = ttft_snapshot_merge(g_ref, g_newer, &g_err);
  return finish_decode();
}
static void check_merge(void) {
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++)
    EXPECT_EQ_U64(ttft_snapshot_counter(g_ref, (ttft_counter)c) + ttft_snapshot_counter(g_newer, (ttft_counter)c),
                  ttft_snapshot_counter(g_out, (ttft_counter)c));
  ttft_snapshot_free(g_out);
}
static int op_delta(void) {
  g_err = 0;
  g_out = ttft_snapshot_delta(g_newer, g_ref, &g_err);
  return finish_decode();
}
static void check_delta(void) {
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++)
    EXPECT_EQ_U64(ttft_snapshot_counter(g_newer, (ttft_counter)c) - ttft_snapshot_counter(g_ref, (ttft_counter)c),
                  ttft_snapshot_counter(g_out, (ttft_counter)c));
  ttft_snapshot_free(g_out);
}
static int op_http_start(void) {
  g_srv = NULL;
  int rc = ttft_http_start(R, "127.0.0.1:0", &g_srv);
  if (rc == TTFT_OK) return 1;
  EXPECT_ERR(TTFT_ENOMEM, rc);
  return 0;
}
static void stop_http(void) { ttft_http_stop(g_srv); }

/* g_enc and g_b64: g_ref encoded in both forms (malloc, not the allocator) */
static int encode_ref(void) {
  g_enc_len = ttft_snapshot_encode(g_ref, NULL, 0);
  g_b64_len = ttft_snapshot_encode_base64(g_ref, NULL, 0);
  EXPECT_GT_INT(g_enc_len, 0);
  EXPECT_GT_INT(g_b64_len, 0);
  if (g_enc_len <= 0 || g_b64_len <= 0) return 0;
  g_enc = malloc((size_t)g_enc_len);
  g_b64 = malloc((size_t)g_b64_len + 1);
  EXPECT_EQ_INT(g_enc_len, ttft_snapshot_encode(g_ref, g_enc, (size_t)g_enc_len));
  EXPECT_EQ_INT(g_b64_len, ttft_snapshot_encode_base64(g_ref, g_b64, (size_t)g_b64_len + 1));
  return 1;
}
static void free_encoded(void) {
  free(g_enc);
  free(g_b64);
  g_enc = NULL;
  g_b64 = NULL;
}

/* --------------------------------------------------------------- tests */
TEST(registry_new) { each_failure("ttft_registry_new", op_registry_new, free_registry); }

TEST(class_add) {
  each_failure("ttft_class_add", op_class_add, NULL);
  EXPECT_EQ_INT(g_id, ttft_class_find(R, "tool"));
}

TEST(snapshot_take) {
  g_topup_may_fail = 1;
  each_failure("ttft_snapshot_take", op_snapshot_take, check_take);
  g_topup_may_fail = 0;
}

/* every format, in the size its dry run gave */
TEST(format) {
  for (g_fmt = 0; g_fmt < TTFT_FORMAT_COUNT_; g_fmt++) {
    g_want = ttft_snapshot_format(g_ref, (ttft_format)g_fmt, NULL, 0);
    EXPECT_GT_INT(g_want, 0);
    if (g_want <= 0) continue;
    g_buf = malloc((size_t)g_want + 1);
    char name[64];
    snprintf(name, sizeof name, "ttft_snapshot_format(%s)", ttft_format_name((ttft_format)g_fmt));
    each_failure(name, op_format, check_format);
    free(g_buf);
  }
}

TEST(encode) {
  if (encode_ref()) {
    each_failure("ttft_snapshot_encode", op_encode, check_encode);
    each_failure("ttft_snapshot_encode_base64", op_encode_base64, check_encode_base64);
  }
  free_encoded();
}

TEST(decode) {
  if (encode_ref()) {
    each_failure("ttft_snapshot_decode", op_decode, check_free_snapshot);
    each_failure("ttft_snapshot_decode_base64", op_decode_base64, check_free_snapshot);
  }
  free_encoded();
}

TEST(merge) { each_failure("ttft_snapshot_merge", op_merge, check_merge); }
TEST(delta) { each_failure("ttft_snapshot_delta", op_delta, check_delta); }

/* the endpoint (a build without it answers TTFT_ENOTSUP, and allocates nothing) */
TEST(http_start) {
  ttft_http *srv = NULL;
  int rc = ttft_http_start(R, "127.0.0.1:0", &srv);
  if (!TTFT_TEST_HTTP_BUILT) {
    EXPECT_ERR(TTFT_ENOTSUP, rc);
    EXPECT_NULL(srv);
    return;
  }
  EXPECT_ERR(TTFT_OK, rc);
  ttft_http_stop(srv);
  if (rc == TTFT_OK) each_failure("ttft_http_start", op_http_start, stop_http);
}

TU_MAIN()
