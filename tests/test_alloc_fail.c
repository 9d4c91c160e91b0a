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

#include "ttft.h"

static int g_failures;
#define FAIL(...)                                     \
  do {                                                \
    fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);   \
    fprintf(stderr, __VA_ARGS__);                     \
    fputc('\n', stderr);                              \
    g_failures++;                                     \
  } while (0)
#define CHECK_EQ_I(what, actual, expected)                                       \
  do {                                                                           \
    long long a_ = (long long)(actual), e_ = (long long)(expected);              \
    if (a_ != e_) FAIL("%s: expected %lld, got %lld", what, e_, a_);             \
  } while (0)

/* ------------------------------------------------------- the allocator */
typedef struct fail_alloc {
  uint64_t calls;      /* allocation calls since arming          */
  uint64_t fail_at;    /* 0 = never fail                         */
  uint64_t failed;     /* failures injected since arming         */
  size_t failed_size;  /* size of the last injected failure      */
  long live_blocks;
  long long live_bytes;
  uint64_t total_calls;
} fail_alloc;

static fail_alloc A;
#define HDR 16 /* keeps 16-byte alignment; holds the size */

static void *fa_alloc(void *ctx, size_t n) {
  fail_alloc *fa = ctx;
  fa->total_calls++;
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
static ttft_registry *R;
static int g_chat;
static uint64_t T0 = 1000000000ull;

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
    if (!s) {
      FAIL("begin refused");
      return;
    }
    if (ttft_mark(r, s, TTFT_PHASE_SCHEDULED, t + 1000) != TTFT_OK) FAIL("mark");
    for (int k = 0; k < i % 5; k++)
      if (ttft_token_emitted(r, s, 1 + (uint32_t)k, t + 100000 + (uint64_t)k * 30000) != TTFT_OK) FAIL("emit");
    if (ttft_stream_end(r, s, (ttft_status)(i % 3), t + 1000000) != TTFT_OK) FAIL("end");
  }
}

static void counters_of(ttft_registry *r, uint64_t out[TTFT_COUNTER_COUNT_]) {
  ttft_snapshot *s = ttft_snapshot_take(r);
  if (!s) {
    FAIL("snapshot after a failed operation");
    memset(out, 0, sizeof(uint64_t) * TTFT_COUNTER_COUNT_);
    return;
  }
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++) out[c] = ttft_snapshot_counter(s, (ttft_counter)c);
  ttft_snapshot_free(s);
}

/* After a failure: nothing leaked, counters unchanged, hooks work. */
static void after_failure(const char *op, uint64_t k, long blocks0, long long bytes0) {
  if (A.live_blocks != blocks0 || A.live_bytes != bytes0)
    FAIL("%s, allocation %llu failed: leaked %ld blocks / %lld bytes", op, (unsigned long long)k,
         A.live_blocks - blocks0, A.live_bytes - bytes0);
  if (!R) return;
  uint64_t before[TTFT_COUNTER_COUNT_], after[TTFT_COUNTER_COUNT_];
  counters_of(R, before);
  ttft_seq s = ttft_begin(R, T0);
  if (!s) FAIL("%s k=%llu: begin refused afterwards", op, (unsigned long long)k);
  if (ttft_token_emitted(R, s, 2, T0 + 10) != TTFT_OK) FAIL("%s: emit refused afterwards", op);
  if (ttft_stream_end(R, s, TTFT_COMPLETED, T0 + 20) != TTFT_OK) FAIL("%s: end refused afterwards", op);
  T0 += 100;
  counters_of(R, after);
  CHECK_EQ_I("BEGUN after recovery", after[TTFT_COUNTER_BEGUN], before[TTFT_COUNTER_BEGUN] + 1);
  CHECK_EQ_I("TOKENS after recovery", after[TTFT_COUNTER_TOKENS], before[TTFT_COUNTER_TOKENS] + 2);
}

#define MAX_K 100000
static uint64_t g_points;
static int g_topup_may_fail; /* set around ttft_snapshot_take */

/* Run attempt() (returns 1 on success; on failure it checks its own error
 * code) with the k-th allocation failing, for every k until it succeeds;
 * then cleanup() frees what the successful attempt made. */
static void each_failure(const char *op, int (*attempt)(void), void (*cleanup)(void)) {
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
        FAIL("%s succeeded although allocation %llu failed", op, (unsigned long long)k);
      /* with a cleanup the operation's result is freed: back to b0. Without
       * one (class_add) the registry keeps what it made until it is freed;
       * the final check after ttft_registry_free covers it. */
      if (cleanup) {
        cleanup();
        if (A.live_blocks != b0 || A.live_bytes != y0)
          FAIL("%s: success path leaked %ld blocks", op, A.live_blocks - b0);
      }
      break;
    }
    if (!A.failed) {
      FAIL("%s failed with no allocation failure (k=%llu)", op, (unsigned long long)k);
      break;
    }
    after_failure(op, k, b0, y0);
  }
  if (k >= MAX_K) FAIL("%s never succeeded", op);
  printf("  %-36s %3llu allocation point(s) failed and recovered\n", op, (unsigned long long)(k - 1));
  g_points += k - 1;
}

/* ------------------------------------------------------ the operations */
static ttft_config g_cfg;
static ttft_registry *g_r;
static int g_id;
static ttft_snapshot *g_ref, *g_newer, *g_out;
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

static int op_class_add(void) {
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.ttft_ns = 50000000;
  slo.tpot_ns = 20000;
  g_id = ttft_class_add(R, "chat", &slo);
  if (g_id >= 1) return 1;
  CHECK_EQ_I("class_add error", g_id, TTFT_ENOMEM);
  CHECK_EQ_I("class_find after a failed add", ttft_class_find(R, "chat"), TTFT_ESTALE);
  return 0;
}

static int op_snapshot_take(void) { return (g_out = ttft_snapshot_take(R)) != NULL; }
/* the snapshot that finally succeeded holds what the registry holds */
static void check_take(void) {
  ttft_snapshot *now = ttft_snapshot_take(R);
  if (!now) {
    FAIL("snapshot_take");
    ttft_snapshot_free(g_out);
    return;
  }
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++)
    CHECK_EQ_I("counter of the snapshot that finally succeeded", ttft_snapshot_counter(g_out, (ttft_counter)c),
               ttft_snapshot_counter(now, (ttft_counter)c));
  for (int m = 0; m < TTFT_METRIC_COUNT_; m++)
    CHECK_EQ_I("count of the snapshot that finally succeeded", ttft_snapshot_count(g_out, (ttft_metric)m),
               ttft_snapshot_count(now, (ttft_metric)m));
  ttft_snapshot_free(now);
  ttft_snapshot_free(g_out);
}
static void check_free_snapshot(void) {
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++)
    CHECK_EQ_I("counter of the decoded snapshot", ttft_snapshot_counter(g_out, (ttft_counter)c),
               ttft_snapshot_counter(g_ref, (ttft_counter)c));
  ttft_snapshot_free(g_out);
}

static int op_format(void) {
  g_n = ttft_snapshot_format(g_ref, (ttft_format)g_fmt, g_buf, (size_t)g_want + 1);
  if (g_n >= 0) return 1;
  CHECK_EQ_I("format error", g_n, TTFT_ENOMEM);
  return 0;
}
static void check_format(void) { CHECK_EQ_I("format length", g_n, g_want); }

static int op_encode(void) {
  g_n = ttft_snapshot_encode(g_ref, g_enc, (size_t)g_enc_len);
  if (g_n >= 0) return 1;
  CHECK_EQ_I("encode error", g_n, TTFT_ENOMEM);
  return 0;
}
static void check_encode(void) { CHECK_EQ_I("encode length", g_n, g_enc_len); }
static int op_encode_base64(void) {
  g_n = ttft_snapshot_encode_base64(g_ref, g_b64, (size_t)g_b64_len + 1);
  if (g_n >= 0) return 1;
  CHECK_EQ_I("encode_base64 error", g_n, TTFT_ENOMEM);
  return 0;
}
static void check_encode_base64(void) { CHECK_EQ_I("encode_base64 length", g_n, g_b64_len); }

static int finish_decode(const char *what) {
  if (g_out) return 1;
  CHECK_EQ_I(what, g_err, TTFT_ENOMEM);
  return 0;
}
static int op_decode(void) {
  g_err = 0;
  g_out = ttft_snapshot_decode(g_enc, (size_t)g_enc_len, &g_err);
  return finish_decode("decode error");
}
static int op_decode_base64(void) {
  g_err = 0;
  g_out = ttft_snapshot_decode_base64(g_b64, (size_t)g_b64_len, &g_err);
  return finish_decode("decode_base64 error");
}
static int op_merge(void) {
  g_err = 0;
  g_out = ttft_snapshot_merge(g_ref, g_newer, &g_err);
  return finish_decode("merge error");
}
static void check_merge(void) {
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++)
    CHECK_EQ_I("merged counter", ttft_snapshot_counter(g_out, (ttft_counter)c),
               ttft_snapshot_counter(g_ref, (ttft_counter)c) + ttft_snapshot_counter(g_newer, (ttft_counter)c));
  ttft_snapshot_free(g_out);
}
static int op_delta(void) {
  g_err = 0;
  g_out = ttft_snapshot_delta(g_newer, g_ref, &g_err);
  return finish_decode("delta error");
}
static void check_delta(void) {
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++)
    CHECK_EQ_I("delta counter", ttft_snapshot_counter(g_out, (ttft_counter)c),
               ttft_snapshot_counter(g_newer, (ttft_counter)c) - ttft_snapshot_counter(g_ref, (ttft_counter)c));
  ttft_snapshot_free(g_out);
}
static int op_http_start(void) {
  g_srv = NULL;
  int rc = ttft_http_start(R, "127.0.0.1:0", &g_srv);
  if (rc == TTFT_OK) return 1;
  CHECK_EQ_I("http_start error", rc, TTFT_ENOMEM);
  return 0;
}
static void stop_http(void) { ttft_http_stop(g_srv); }

int main(void) {
  ttft_allocator fa = {fa_alloc, fa_free, &A};
  if (ttft_set_allocator(&fa) != TTFT_OK) {
    fprintf(stderr, "set_allocator failed\n");
    return 1;
  }
  printf("test_alloc_fail:\n");
  g_cfg = make_config();
  each_failure("ttft_registry_new", op_registry_new, free_registry);
  R = ttft_registry_new(&g_cfg);
  if (!R) {
    fprintf(stderr, "registry_new failed without injection\n");
    return 1;
  }
  each_failure("ttft_class_add", op_class_add, NULL);
  g_chat = g_id;
  CHECK_EQ_I("class_find", ttft_class_find(R, "chat"), g_chat);
  feed(R, 0, 7);
  feed(R, g_chat, 9);

  g_ref = ttft_snapshot_take(R);
  if (!g_ref) {
    fprintf(stderr, "snapshot failed without injection\n");
    return 1;
  }
  g_topup_may_fail = 1;
  each_failure("ttft_snapshot_take", op_snapshot_take, check_take);
  g_topup_may_fail = 0;

  for (g_fmt = 0; g_fmt < TTFT_FORMAT_COUNT_; g_fmt++) {
    g_want = ttft_snapshot_format(g_ref, (ttft_format)g_fmt, NULL, 0);
    if (g_want <= 0) {
      FAIL("format %d: %ld", g_fmt, g_want);
      continue;
    }
    g_buf = malloc((size_t)g_want + 1);
    char name[64];
    snprintf(name, sizeof name, "ttft_snapshot_format(%s)", ttft_format_name((ttft_format)g_fmt));
    each_failure(name, op_format, check_format);
    free(g_buf);
  }

  g_enc_len = ttft_snapshot_encode(g_ref, NULL, 0);
  g_b64_len = ttft_snapshot_encode_base64(g_ref, NULL, 0);
  if (g_enc_len <= 0 || g_b64_len <= 0) {
    FAIL("encode: %ld / %ld", g_enc_len, g_b64_len);
    return 1;
  }
  g_enc = malloc((size_t)g_enc_len);
  g_b64 = malloc((size_t)g_b64_len + 1);
  each_failure("ttft_snapshot_encode", op_encode, check_encode);
  each_failure("ttft_snapshot_encode_base64", op_encode_base64, check_encode_base64);
  each_failure("ttft_snapshot_decode", op_decode, check_free_snapshot);
  each_failure("ttft_snapshot_decode_base64", op_decode_base64, check_free_snapshot);
  free(g_enc);
  free(g_b64);

  feed(R, g_chat, 3);
  g_newer = ttft_snapshot_take(R);
  if (!g_newer) return 1;
  each_failure("ttft_snapshot_merge", op_merge, check_merge);
  each_failure("ttft_snapshot_delta", op_delta, check_delta);
  ttft_snapshot_free(g_newer);
  ttft_snapshot_free(g_ref);

  {
    ttft_http *srv = NULL;
    int rc = ttft_http_start(R, "127.0.0.1:0", &srv);
    if (rc == TTFT_OK) {
      ttft_http_stop(srv);
      each_failure("ttft_http_start", op_http_start, stop_http);
    } else if (rc != TTFT_ENOTSUP) {
      FAIL("http_start: %d", rc);
    }
  }

  ttft_registry_free(R);
  R = NULL;
  if (A.live_blocks != 0 || A.live_bytes != 0)
    FAIL("after freeing everything: %ld blocks / %lld bytes still live", A.live_blocks, A.live_bytes);
  ttft_set_allocator(NULL);
  printf("test_alloc_fail: %llu injected failures, %llu allocations in all\n",
         (unsigned long long)g_points, (unsigned long long)A.total_calls);
  if (g_failures) {
    fprintf(stderr, "test_alloc_fail: %d failure(s)\n", g_failures);
    return 1;
  }
  printf("test_alloc_fail: ok\n");
  return 0;
}
