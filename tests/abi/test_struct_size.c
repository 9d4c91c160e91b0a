/*
 * test_struct_size.c — every struct crossing the ABI carries its size, and
 * the library honours it (the versioning rule of docs/ffi.md):
 *   - struct_size is the first member (offset 0) of ttft_config, ttft_slo,
 *     ttft_request and ttft_seq_info;
 *   - the *_init functions set it to sizeof and write nothing past sizeof;
 *   - a struct_size the library cannot know (0, smaller than the size field
 *     itself, or larger than the library's struct: a newer header on an
 *     older library) is rejected where the header says so: NULL from
 *     ttft_registry_new, TTFT_EINVAL from ttft_class_add / ttft_seq_stats /
 *     ttft_snapshot_class_slo, 0 (not counted as DROPPED) from ttft_begin_ex;
 *   - a smaller struct (an older header) is accepted: the fields it lacks
 *     take their defaults, and an output struct is filled only up to its size.
 * Built against the shared and the static library by tests/abi.cmake, which
 * registers each TEST as abi_struct_size.<test>.<shared|static>.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ttft.h"
#include "task.h"

#define SENTINEL 0xA5

/* Bytes p[from..to) all equal SENTINEL. */
static int untouched(const unsigned char *p, size_t from, size_t to) {
  for (size_t i = from; i < to; i++)
    if (p[i] != SENTINEL) return 0;
  return 1;
}

TEST(struct_size_is_first_member) {
  EXPECT_EQ_U64(0, offsetof(ttft_config, struct_size));
  EXPECT_EQ_U64(0, offsetof(ttft_slo, struct_size));
  EXPECT_EQ_U64(0, offsetof(ttft_request, struct_size));
  EXPECT_EQ_U64(0, offsetof(ttft_seq_info, struct_size));
  EXPECT_EQ_U64(sizeof(size_t), sizeof(((ttft_config *)0)->struct_size));
  EXPECT_EQ_U64(sizeof(size_t), sizeof(((ttft_slo *)0)->struct_size));
  EXPECT_EQ_U64(sizeof(size_t), sizeof(((ttft_request *)0)->struct_size));
  EXPECT_EQ_U64(sizeof(size_t), sizeof(((ttft_seq_info *)0)->struct_size));
}

/* init functions set struct_size and stay inside sizeof */
TEST(init_sets_struct_size) {
  union {
    ttft_config c;
    ttft_slo s;
    ttft_request r;
    unsigned char bytes[sizeof(ttft_config) + 64];
  } u;
  memset(&u, SENTINEL, sizeof u);
  ttft_config_init(&u.c);
  EXPECT_EQ_U64(sizeof(ttft_config), u.c.struct_size);
  EXPECT_EQ_U64(4096, u.c.max_inflight);
  EXPECT_TRUE(untouched(u.bytes, sizeof(ttft_config), sizeof u));

  memset(&u, SENTINEL, sizeof u);
  ttft_slo_init(&u.s);
  EXPECT_EQ_U64(sizeof(ttft_slo), u.s.struct_size);
  EXPECT_EQ_U64(0, u.s.ttft_ns);
  EXPECT_TRUE(untouched(u.bytes, sizeof(ttft_slo), sizeof u));

  memset(&u, SENTINEL, sizeof u);
  ttft_request_init(&u.r);
  EXPECT_EQ_U64(sizeof(ttft_request), u.r.struct_size);
  EXPECT_EQ_INT(-1, u.r.prefix_hit);
  EXPECT_TRUE(untouched(u.bytes, sizeof(ttft_request), sizeof u));

  /* NULL is a no-op. */
  ttft_config_init(NULL);
  ttft_slo_init(NULL);
  ttft_request_init(NULL);
}

static const size_t bad_sizes[] = {0, 1, sizeof(size_t) - 1, SIZE_MAX};

TEST(registry_new_rejects_bad_size) {
  ttft_config c;
  for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
    ttft_config_init(&c);
    c.struct_size = bad_sizes[i];
    EXPECT_NULL(ttft_registry_new(&c));
  }
  ttft_config_init(&c);
  c.struct_size = sizeof c + 8; /* a newer header than this library */
  EXPECT_NULL(ttft_registry_new(&c));
}

/* an older, smaller ttft_config: missing fields take defaults */
TEST(registry_new_older_config) {
  ttft_config c;
  /* A struct that ends after max_inflight; garbage past it must be ignored. */
  memset(&c, 0xFF, sizeof c);
  c.struct_size = offsetof(ttft_config, max_inflight) + sizeof c.max_inflight;
  c.max_inflight = 3;
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  if (r) {
    ttft_seq s[4];
    for (int i = 0; i < 4; i++) s[i] = ttft_begin(r, 1000);
    EXPECT_TRUE(s[2] != 0);
    EXPECT_EQ_U64(0, s[3]); /* max_inflight 3 was read */
    ttft_snapshot *snap = ttft_snapshot_take(r);
    EXPECT_STREQ("server_arrival", ttft_snapshot_label(snap, "start_point")); /* default */
    EXPECT_EQ_U64(7, ttft_snapshot_bands(snap)); /* default: 6 edges */
    ttft_snapshot_free(snap);
    ttft_registry_free(r);
  }
  ttft_config_init(&c);
  r = ttft_registry_new(&c); /* the exact size works */
  EXPECT_NOT_NULL(r);
  ttft_registry_free(r);
}

/* An older ttft_slo with only ttft_ns: the other budgets are 0 (none). The
 * class it adds to r is "old", id 1 (the first after "default"). */
static int add_old_class(ttft_registry *r) {
  ttft_slo slo;
  memset(&slo, 0xFF, sizeof slo);
  slo.struct_size = offsetof(ttft_slo, ttft_ns) + sizeof slo.ttft_ns;
  slo.ttft_ns = 12345;
  int cls = ttft_class_add(r, "old", &slo);
  EXPECT_EQ_INT(1, cls);
  return cls;
}

/* An older ttft_request with only class_id: prompt and prefix unknown. */
static ttft_seq begin_old_request(ttft_registry *r, int cls) {
  ttft_request req;
  memset(&req, 0xFF, sizeof req);
  req.struct_size = offsetof(ttft_request, class_id) + sizeof req.class_id;
  req.class_id = cls;
  ttft_seq s = ttft_begin_ex(r, &req, 1000);
  EXPECT_TRUE(s != 0);
  return s;
}

static ttft_registry *new_registry(void) {
  ttft_registry *r = ttft_registry_new(NULL);
  EXPECT_NOT_NULL(r);
  return r;
}

/* ttft_class_add rejects a bad ttft_slo struct_size (no class id used up)
 * and takes an older, smaller one */
TEST(class_add_slo_size) {
  ttft_registry *r = new_registry();
  if (!r) return;
  ttft_slo slo;
  for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
    ttft_slo_init(&slo);
    slo.struct_size = bad_sizes[i];
    EXPECT_ERR(TTFT_EINVAL, ttft_class_add(r, "c", &slo));
  }
  ttft_slo_init(&slo);
  slo.struct_size = sizeof slo + 8;
  EXPECT_ERR(TTFT_EINVAL, ttft_class_add(r, "c", &slo));
  add_old_class(r);
  ttft_registry_free(r);
}

/* ttft_begin_ex rejects a bad ttft_request struct_size, uncounted, and takes
 * an older, smaller one (whose unknown prefix puts its TTFT in neither
 * prefix-cache split) */
TEST(begin_ex_request_size) {
  ttft_registry *r = new_registry();
  if (!r) return;
  int cls = add_old_class(r);
  ttft_request req;
  for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
    ttft_request_init(&req);
    req.struct_size = bad_sizes[i];
    EXPECT_EQ_U64(0, ttft_begin_ex(r, &req, 1000));
  }
  ttft_request_init(&req);
  req.struct_size = sizeof req + 8;
  EXPECT_EQ_U64(0, ttft_begin_ex(r, &req, 1000));
  ttft_seq s = begin_old_request(r, cls);
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 2, 1500));
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, 2000));
  ttft_snapshot *snap = ttft_snapshot_take(r);
  EXPECT_EQ_U64(1, ttft_snapshot_counter(snap, TTFT_COUNTER_BEGUN));
  EXPECT_EQ_U64(0, ttft_snapshot_counter(snap, TTFT_COUNTER_DROPPED));
  EXPECT_EQ_U64(0, ttft_snapshot_split_count(snap, TTFT_SPLIT_PREFIX_CACHE, 0));
  EXPECT_EQ_U64(0, ttft_snapshot_split_count(snap, TTFT_SPLIT_PREFIX_CACHE, 1));
  ttft_snapshot_free(snap);
  ttft_registry_free(r);
}

/* ttft_seq_stats: bad sizes rejected, a smaller struct filled up to its size */
TEST(seq_stats_info_size) {
  ttft_registry *r = new_registry();
  if (!r) return;
  int cls = add_old_class(r);
  ttft_seq s = begin_old_request(r, cls);
  ttft_seq_info info;
  for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
    memset(&info, 0, sizeof info);
    info.struct_size = bad_sizes[i];
    EXPECT_ERR(TTFT_EINVAL, ttft_seq_stats(r, s, &info));
  }
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info + 8;
  EXPECT_ERR(TTFT_EINVAL, ttft_seq_stats(r, s, &info));
  EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 2, 1500));
  memset(&info, SENTINEL, sizeof info);
  info.struct_size = offsetof(ttft_seq_info, class_id) + sizeof info.class_id;
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(r, s, &info));
  EXPECT_EQ_INT(cls, info.class_id);
  EXPECT_EQ_U64(offsetof(ttft_seq_info, class_id) + sizeof info.class_id, info.struct_size);
  EXPECT_TRUE(untouched((const unsigned char *)&info, info.struct_size, sizeof info));
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_ERR(TTFT_OK, ttft_seq_stats(r, s, &info));
  EXPECT_EQ_U64(2, info.tokens);
  EXPECT_EQ_U64(500, info.ttft_ns);
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_COMPLETED, 2000));
  ttft_registry_free(r);
}

/* ttft_snapshot_class_slo: bad sizes rejected, a smaller struct filled up to
 * its size; the older slo's missing budgets read back as 0 */
TEST(snapshot_class_slo_size) {
  ttft_registry *r = new_registry();
  if (!r) return;
  int cls = add_old_class(r);
  ttft_snapshot *snap = ttft_snapshot_take(r);
  ttft_slo slo;
  for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
    memset(&slo, 0, sizeof slo);
    slo.struct_size = bad_sizes[i];
    EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_class_slo(snap, cls, &slo));
  }
  memset(&slo, 0, sizeof slo);
  slo.struct_size = sizeof slo;
  EXPECT_ERR(TTFT_OK, ttft_snapshot_class_slo(snap, cls, &slo));
  EXPECT_EQ_U64(12345, slo.ttft_ns);
  EXPECT_EQ_U64(0, slo.tpot_ns);
  EXPECT_EQ_U64(0, slo.e2e_ns);
  memset(&slo, SENTINEL, sizeof slo);
  slo.struct_size = offsetof(ttft_slo, ttft_ns) + sizeof slo.ttft_ns;
  EXPECT_ERR(TTFT_OK, ttft_snapshot_class_slo(snap, cls, &slo));
  EXPECT_EQ_U64(12345, slo.ttft_ns);
  EXPECT_TRUE(untouched((const unsigned char *)&slo, slo.struct_size, sizeof slo));
  ttft_snapshot_free(snap);
  ttft_registry_free(r);
}

TU_MAIN()
