/*
 * test_config.c — configuration errors that say what is wrong (issue 20,
 * item 3): ttft_config_check.
 *
 *  - every rule ttft_registry_new applies has a row below: a default
 *    config broken in exactly one way, and the words its one-line reason
 *    must contain (the field and the rule). config_check refuses it with
 *    TTFT_EINVAL and that reason; registry_new refuses it too;
 *  - every reserved label name (TTFT_RESERVED_LABELS) and every "__" name
 *    is refused with a reason that names it;
 *  - registry_new refuses exactly what config_check refuses: 3000 random
 *    configurations near every boundary (small sizes, so each accepted one
 *    is built for real);
 *  - the reason is one line (hostile bytes in a label are not echoed),
 *    NUL-terminated and truncated to the buffer, and why NULL with n 0 is
 *    fine.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"
#include "task.h"

static ttft_config base(void) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 4;
  c.max_threads = 1;
  c.max_classes = 2;
  return c;
}

static int one_line(const char *s) { return strchr(s, '\n') == NULL && strchr(s, '\r') == NULL; }

/* c is refused, by both, with a reason containing every word of want */
static void refused(const ttft_config *c, const char *row, const char *want1, const char *want2) {
  char why[512];
  memset(why, 'x', sizeof why);
  int rc = ttft_config_check(c, why, sizeof why);
  if (rc != TTFT_EINVAL) fprintf(stderr, "   row \"%s\": accepted\n", row);
  EXPECT_ERR(TTFT_EINVAL, rc);
  EXPECT_TRUE(memchr(why, '\0', sizeof why) != NULL);
  EXPECT_TRUE(one_line(why));
  EXPECT_CONTAINS(why, want1);
  if (want2) EXPECT_CONTAINS(why, want2);
  ttft_registry *r = ttft_registry_new(c);
  if (r) fprintf(stderr, "   row \"%s\": registry_new accepted what config_check refused\n", row);
  EXPECT_NULL(r);
  ttft_registry_free(r);
}

static const uint64_t BUCKETS_OK[3] = {10, 20, 30};
static const uint64_t BUCKETS_DESC[3] = {10, 30, 20};

TEST(every_rule_has_a_reason) {
  ttft_config c;
  ttft_label l[TTFT_MAX_CONST_LABELS + 1];
  for (int i = 0; i <= TTFT_MAX_CONST_LABELS; i++) {
    static char names[TTFT_MAX_CONST_LABELS + 1][8];
    snprintf(names[i], sizeof names[i], "l%d", i);
    l[i].name = names[i];
    l[i].value = "v";
  }

  c = base(); c.struct_size = 0;                       refused(&c, "size 0", "struct_size 0", "ttft_config_init");
  c = base(); c.struct_size = sizeof c + 8;            refused(&c, "size big", "struct_size", "ttft_config_init");
  c = base(); c.max_inflight = 0;                      refused(&c, "inflight 0", "max_inflight 0", "1..");
  c = base(); c.max_inflight = TTFT_MAX_INFLIGHT + 1;  refused(&c, "inflight big", "max_inflight 1048577", NULL);
  c = base(); c.max_threads = 257;                     refused(&c, "threads", "max_threads 257", "256");
  c = base(); c.max_classes = 0;                       refused(&c, "classes 0", "max_classes 0", "1..1024");
  c = base(); c.max_classes = 1025;                    refused(&c, "classes big", "max_classes 1025", NULL);
  c = base(); c.stall_threshold_ns = 0;                refused(&c, "stall", "stall_threshold_ns is 0", NULL);
  c = base(); c.clock = (ttft_clock)3;                 refused(&c, "clock", "clock 3", "ttft_clock");
  c = base(); c.clock = (ttft_clock)-1;                refused(&c, "clock -1", "clock -1", NULL);
  c = base(); c.metric_namespace = "1abc";             refused(&c, "ns digit", "metric_namespace \"1abc\"", NULL);
  c = base(); c.metric_namespace = "a-b";              refused(&c, "ns dash", "metric_namespace \"a-b\"", NULL);
  c = base(); c.metric_namespace = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  refused(&c, "ns long", "metric_namespace", "63 bytes");
  c = base(); c.const_labels = l; c.n_const_labels = TTFT_MAX_CONST_LABELS + 1;
  refused(&c, "labels many", "n_const_labels 9", "TTFT_MAX_CONST_LABELS");
  c = base(); c.n_const_labels = 1;                    refused(&c, "labels NULL", "const_labels is NULL", NULL);
  {
    ttft_label bad[2] = {{"zone", "a"}, {NULL, "b"}};
    c = base(); c.const_labels = bad; c.n_const_labels = 2;
    refused(&c, "name NULL", "const_labels[1].name is NULL", NULL);
    bad[1].name = "0bad";  refused(&c, "name digit", "const_labels[1].name \"0bad\"", "[a-zA-Z_]");
    bad[1].name = "";      refused(&c, "name empty", "const_labels[1].name \"\"", "1..63 bytes");
    bad[1].name = "a.b";   refused(&c, "name dot", "const_labels[1].name \"a.b\"", NULL);
    bad[1].name = "__meta"; refused(&c, "name __", "\"__meta\" starts with \"__\"", NULL);
    bad[1].name = "view";  refused(&c, "view", "const_labels[1].name \"view\" is reserved", "TTFT_RESERVED_LABELS");
    bad[1].name = "zone";  refused(&c, "dup", "const_labels[1].name \"zone\" repeats const_labels[0]", NULL);
    bad[1].name = "rack";  bad[1].value = NULL;
    refused(&c, "value NULL", "const_labels[1].value (of \"rack\") is NULL", NULL);
  }
  c = base(); c.native_histograms = 2;                 refused(&c, "native", "native_histograms is 2", "0 or 1");
  c = base(); c.native_schema = -5;                    refused(&c, "schema lo", "native_schema -5", "-4..8");
  c = base(); c.native_schema = 9;                     refused(&c, "schema hi", "native_schema 9", NULL);
  c = base(); c.export_idle_classes = -1;              refused(&c, "idle", "export_idle_classes is -1", NULL);
  c = base(); c.memory_limit = TTFT_MIN_MEMORY_LIMIT - 1;
  refused(&c, "memory", "memory_limit 1048575", "TTFT_MIN_MEMORY_LIMIT");
  c = base(); c.n_prompt_bands = TTFT_MAX_BANDS;       refused(&c, "bands many", "n_prompt_bands 8", NULL);
  c = base(); c.n_prompt_bands = 2; c.prompt_band_edges[0] = 0; c.prompt_band_edges[1] = 5;
  refused(&c, "edge 0", "prompt_band_edges[0] is 0", NULL);
  c = base(); c.n_prompt_bands = 3; c.prompt_band_edges[0] = 5; c.prompt_band_edges[1] = 9; c.prompt_band_edges[2] = 9;
  refused(&c, "edges flat", "prompt_band_edges[2] = 9 is not above prompt_band_edges[1] = 9", NULL);
  c = base(); c.prom_buckets[TTFT_METRIC_TPOT] = BUCKETS_OK; c.prom_n_buckets[TTFT_METRIC_TPOT] = 0;
  refused(&c, "buckets 0", "prom_n_buckets[1] (tpot) is 0", NULL);
  c = base(); c.prom_buckets[TTFT_METRIC_E2E] = BUCKETS_OK; c.prom_n_buckets[TTFT_METRIC_E2E] = TTFT_MAX_PROM_BUCKETS + 1;
  refused(&c, "buckets many", "prom_n_buckets[3] (e2e) is 65", "1..64");
  c = base(); c.prom_buckets[TTFT_METRIC_ITL] = BUCKETS_DESC; c.prom_n_buckets[TTFT_METRIC_ITL] = 3;
  refused(&c, "buckets desc", "prom_buckets[2] (itl): bound 2 (20) is not above bound 1 (30)", NULL);

  /* and the defaults, and NULL (= the defaults), are accepted with an empty reason */
  char why[64] = "junk";
  c = base();
  EXPECT_ERR(TTFT_OK, ttft_config_check(&c, why, sizeof why));
  EXPECT_STREQ("", why);
  EXPECT_ERR(TTFT_OK, ttft_config_check(NULL, why, sizeof why));
  EXPECT_ERR(TTFT_OK, ttft_config_check(NULL, NULL, 0));
  c.prom_buckets[TTFT_METRIC_ITL] = BUCKETS_OK;
  c.prom_n_buckets[TTFT_METRIC_ITL] = 3;
  EXPECT_ERR(TTFT_OK, ttft_config_check(&c, NULL, 0));
}

TEST(reserved_labels_are_refused_by_name) {
  static const char *const reserved[] = {TTFT_RESERVED_LABELS};
  size_t n = sizeof reserved / sizeof reserved[0];
  EXPECT_GE_U64(n, 14);
  for (size_t i = 0; i < n; i++) {
    ttft_label l = {reserved[i], "x"};
    ttft_config c = base();
    c.const_labels = &l;
    c.n_const_labels = 1;
    char want[96];
    snprintf(want, sizeof want, "const_labels[0].name \"%s\" is reserved", reserved[i]);
    refused(&c, reserved[i], want, NULL);
  }
  /* a name merely containing a reserved one is fine, and so is one "_" */
  ttft_label ok[2] = {{"view_kind", "x"}, {"_private", "y"}};
  ttft_config c = base();
  c.const_labels = ok;
  c.n_const_labels = 2;
  EXPECT_ERR(TTFT_OK, ttft_config_check(&c, NULL, 0));
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  ttft_registry_free(r);
}

TEST(reason_is_one_bounded_line) {
  ttft_label l = {"bad\nname\r\x01\xff", "x"};
  ttft_config c = base();
  c.const_labels = &l;
  c.n_const_labels = 1;
  char why[256];
  EXPECT_ERR(TTFT_EINVAL, ttft_config_check(&c, why, sizeof why));
  EXPECT_TRUE(one_line(why));
  EXPECT_CONTAINS(why, "\"bad?name???\"");
  /* a long hostile name is cut, not copied whole */
  char longname[400];
  memset(longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  l.name = longname;
  EXPECT_ERR(TTFT_EINVAL, ttft_config_check(&c, why, sizeof why));
  EXPECT_LT_U64(strlen(why), 200);
  EXPECT_CONTAINS(why, "...\"");
  /* truncated to the buffer, always terminated; nothing written past n */
  char small[9];
  memset(small, 'z', sizeof small);
  c = base();
  c.max_threads = 300;
  EXPECT_ERR(TTFT_EINVAL, ttft_config_check(&c, small, 8));
  EXPECT_STREQ("max_thr", small);
  EXPECT_EQ_INT('z', small[8]);
  EXPECT_ERR(TTFT_EINVAL, ttft_config_check(&c, NULL, 0));
  small[0] = 'q';
  EXPECT_ERR(TTFT_EINVAL, ttft_config_check(&c, small, 0));
  EXPECT_EQ_INT('q', small[0]);
}

/* An older, smaller ttft_config keeps the defaults of the fields it lacks
 * (as ttft_registry_new does): a 1.0-sized struct is accepted. */
TEST(older_struct_sizes) {
  ttft_config c;
  size_t v10 = offsetof(ttft_config, native_histograms);
  ttft_config_init_sized(&c, v10);
  EXPECT_ERR(TTFT_OK, ttft_config_check(&c, NULL, 0));
  c.max_inflight = 0;
  char why[128];
  EXPECT_ERR(TTFT_EINVAL, ttft_config_check(&c, why, sizeof why));
  EXPECT_CONTAINS(why, "max_inflight 0");
}

/* registry_new refuses exactly what config_check refuses */
static uint64_t g_rng = 88172645463325252u;
static uint64_t rnd(uint64_t n) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng % n;
}

TEST(registry_new_refuses_exactly_what_check_refuses) {
  static const char *const names[] = {"zone", "rack", "view", "__x", "0a", "", "class", "a_b", "zone", "le"};
  static const char *const spaces[] = {"llm_", "", "x:y_", "1x", "a-b", "ns"};
  static const uint32_t edges[] = {0, 1, 5, 5, 100, 4000000000u};
  static const uint64_t b_ok[] = {1, 2, 3}, b_bad[] = {3, 2, 1};
  unsigned accepted = 0, refused_n = 0;
  for (int it = 0; it < 3000; it++) {
    ttft_config c = base();
    ttft_label l[TTFT_MAX_CONST_LABELS + 2];
    /* older struct sizes end at a field (1.0's before native_histograms) */
    if (rnd(8) == 0)
      c.struct_size = (size_t[]){0, sizeof(size_t) - 1, sizeof(size_t), offsetof(ttft_config, native_histograms),
                                 offsetof(ttft_config, memory_limit), sizeof c + 1 + rnd(16)}[rnd(6)];
    c.max_inflight = (uint32_t[]){0, 1, 2, 8}[rnd(4)];
    if (rnd(50) == 0) c.max_inflight = TTFT_MAX_INFLIGHT + 1;
    c.max_threads = (uint32_t[]){0, 1, 3, 257}[rnd(4)];
    c.max_classes = (uint32_t[]){0, 1, 2, 1025}[rnd(4)];
    c.stall_threshold_ns = rnd(6) ? 1 + rnd(1000000000) : 0;
    c.clock = (ttft_clock)(rnd(8) ? 0 : (int)rnd(5) - 1);
    c.metric_namespace = rnd(3) ? "llm_" : spaces[rnd(6)];
    c.n_const_labels = rnd(3) ? 0 : (uint32_t)rnd(TTFT_MAX_CONST_LABELS + 2);
    for (uint32_t i = 0; i < TTFT_MAX_CONST_LABELS + 2; i++) {
      l[i].name = rnd(4) ? (const char *[]){"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}[i] : names[rnd(10)];
      l[i].value = rnd(20) ? "v" : NULL;
    }
    c.const_labels = rnd(20) ? l : NULL;
    c.native_histograms = rnd(8) ? 1 : (int)rnd(4) - 1;
    c.native_schema = (int)rnd(16) - 6;
    c.export_idle_classes = rnd(8) ? 0 : (int)rnd(4) - 1;
    c.memory_limit = rnd(8) ? TTFT_MIN_MEMORY_LIMIT + rnd(4 << 20) : rnd(TTFT_MIN_MEMORY_LIMIT + 2);
    c.n_prompt_bands = (uint32_t)rnd(TTFT_MAX_BANDS + 1);
    for (uint32_t i = 0; i < TTFT_MAX_BANDS - 1; i++)
      c.prompt_band_edges[i] = rnd(3) ? (i + 1) * 100 : edges[rnd(6)];
    if (rnd(4) == 0) {
      int m = (int)rnd(TTFT_PROM_CONFIG_METRICS);
      c.prom_buckets[m] = rnd(2) ? b_ok : b_bad;
      c.prom_n_buckets[m] = (uint32_t)rnd(4) + (rnd(10) ? 0 : TTFT_MAX_PROM_BUCKETS);
    }
    char why[512] = "";
    int rc = ttft_config_check(&c, why, sizeof why);
    ttft_registry *r = ttft_registry_new(&c);
    if ((rc == TTFT_OK) != (r != NULL))
      fprintf(stderr, "   iteration %d: check %d (%s), registry_new %p\n", it, rc, why, (void *)r);
    EXPECT_EQ_INT(rc == TTFT_OK, r != NULL);
    if (rc == TTFT_OK) {
      EXPECT_STREQ("", why);
      accepted++;
    } else {
      EXPECT_ERR(TTFT_EINVAL, rc);
      EXPECT_GT_U64(strlen(why), 10);
      EXPECT_TRUE(one_line(why));
      refused_n++;
    }
    ttft_registry_free(r);
  }
  printf("%u accepted, %u refused\n", accepted, refused_n);
  EXPECT_GT_U64(accepted, 100);
  EXPECT_GT_U64(refused_n, 1000);
}

TU_MAIN()
