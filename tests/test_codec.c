/*
 * test_codec.c — ttft_snapshot_encode/_decode and their base64 forms.
 *
 *  - a recorded workload round trips: encode -> decode -> encode is
 *    bit-exact and every query answers the same on the decoded snapshot;
 *  - snprintf rules: nothing written past cap, the full size returned;
 *  - every truncation and every single-byte corruption is rejected;
 *  - bytes mutated with the checksum repaired (what an attacker sends)
 *    decode to an error or to a snapshot that is itself consistent;
 *  - an encoding built by hand from docs/encoding.md decodes to the values
 *    it spells, re-encodes to the same bytes, and each way of breaking one
 *    field of it is rejected;
 *  - base64: round trip, white space around a log line, malformed text;
 *  - decode under a failing allocator returns TTFT_ENOMEM.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"
#include "task.h"
#include "tools/workload.h"
#include "fixtures/fixture_v1.h"

static const double QS[] = {0.0, 0.001, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0};
#define NQ (sizeof QS / sizeof QS[0])

/* CRC-32C from its definition (bit by bit, reflected 0x82F63B78), written
 * independently of the library's half-byte table; a byte table built from
 * it keeps the mutation loops fast. */
static uint32_t crc_table[256];

static void crc_table_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    crc_table[i] = c;
  }
}
/* every test starts with the table built */
TU_SETUP(crc_table_init)

static uint32_t crc32c_ref(const unsigned char *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) c = (c >> 8) ^ crc_table[(c ^ p[i]) & 0xFFu];
  return ~c;
}

static void put_le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void fix_crc(unsigned char *b, size_t n) { put_le32(b + n - 4, crc32c_ref(b, n - 4)); }

static unsigned char *encode_alloc(const ttft_snapshot *s, size_t *n) {
  long need = ttft_snapshot_encode(s, NULL, 0);
  if (need <= 0) return NULL;
  unsigned char *b = malloc((size_t)need);
  if (!b) return NULL;
  long got = ttft_snapshot_encode(s, b, (size_t)need);
  EXPECT_EQ_INT(need, got);
  *n = (size_t)need;
  return b;
}

static ttft_registry *recorded(uint64_t seed, unsigned requests) {
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.model = "llama-\xc3\xa9\"quoted\"";
  ttft_label labels[2] = {{"region", "eu-west-1"}, {"replica", "r\\7\n"}};
  cfg.const_labels = labels;
  cfg.n_const_labels = 2;
  cfg.prom_summaries = 1;
  ttft_registry *r = ttft_registry_new(&cfg);
  if (!r) return NULL;
  wl_params p;
  wl_params_init(&p, seed, requests);
  p.classes[0] = "chat";
  p.classes[1] = "batch";
  p.classes[2] = "default";
  p.left_open = 3;
  wl_add_classes(r, &p);
  wl_play(r, &p);
  return r;
}

/* every public query of a and b answers the same */
static void expect_same(const ttft_snapshot *a, const ttft_snapshot *b) {
  EXPECT_EQ_INT(ttft_snapshot_classes(a), ttft_snapshot_classes(b));
  int nc = ttft_snapshot_classes(a);
  for (int c = TTFT_CLASS_ALL; c < nc; c++) {
    if (c >= 0) {
      EXPECT_STREQ(ttft_snapshot_class_name(a, c), ttft_snapshot_class_name(b, c));
      ttft_slo sa, sb;
      sa.struct_size = sb.struct_size = sizeof sa;
      EXPECT_ERR(TTFT_OK, ttft_snapshot_class_slo(a, c, &sa));
      EXPECT_ERR(TTFT_OK, ttft_snapshot_class_slo(b, c, &sb));
      EXPECT_EQ_U64(sa.ttft_ns, sb.ttft_ns);
      EXPECT_EQ_U64(sa.tpot_ns, sb.tpot_ns);
      EXPECT_EQ_U64(sa.e2e_ns, sb.e2e_ns);
      EXPECT_EQ_U64(sa.stall_threshold_ns, sb.stall_threshold_ns);
    }
    for (int k = 0; k < TTFT_COUNTER_COUNT_; k++)
      EXPECT_EQ_U64(ttft_snapshot_class_counter(a, c, (ttft_counter)k),
                    ttft_snapshot_class_counter(b, c, (ttft_counter)k));
    for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
      EXPECT_EQ_U64(ttft_snapshot_class_count(a, c, (ttft_metric)m),
                    ttft_snapshot_class_count(b, c, (ttft_metric)m));
      EXPECT_EQ_U64(ttft_snapshot_class_sum(a, c, (ttft_metric)m),
                    ttft_snapshot_class_sum(b, c, (ttft_metric)m));
      for (size_t q = 0; q < NQ; q++)
        EXPECT_EQ_U64(ttft_snapshot_class_quantile(a, c, (ttft_metric)m, QS[q]),
                      ttft_snapshot_class_quantile(b, c, (ttft_metric)m, QS[q]));
    }
    EXPECT_EQ_DBL(ttft_snapshot_attainment(a, c), ttft_snapshot_attainment(b, c));
  }
  for (unsigned i = 0; i < 2; i++) {
    EXPECT_EQ_U64(ttft_snapshot_split_count(a, TTFT_SPLIT_PREFIX_CACHE, i),
                  ttft_snapshot_split_count(b, TTFT_SPLIT_PREFIX_CACHE, i));
    EXPECT_EQ_U64(ttft_snapshot_split_quantile(a, TTFT_SPLIT_PREFIX_CACHE, i, 0.9),
                  ttft_snapshot_split_quantile(b, TTFT_SPLIT_PREFIX_CACHE, i, 0.9));
  }
  EXPECT_EQ_U64(ttft_snapshot_bands(a), ttft_snapshot_bands(b));
  for (unsigned i = 0; i < ttft_snapshot_bands(a); i++) {
    uint32_t alo = 0, ahi = 0, blo = 1, bhi = 1;
    EXPECT_ERR(TTFT_OK, ttft_snapshot_band(a, i, &alo, &ahi));
    EXPECT_ERR(TTFT_OK, ttft_snapshot_band(b, i, &blo, &bhi));
    EXPECT_EQ_U64(alo, blo);
    EXPECT_EQ_U64(ahi, bhi);
    EXPECT_EQ_U64(ttft_snapshot_split_count(a, TTFT_SPLIT_PROMPT_BAND, i),
                  ttft_snapshot_split_count(b, TTFT_SPLIT_PROMPT_BAND, i));
    EXPECT_EQ_U64(ttft_snapshot_split_quantile(a, TTFT_SPLIT_PROMPT_BAND, i, 0.5),
                  ttft_snapshot_split_quantile(b, TTFT_SPLIT_PROMPT_BAND, i, 0.5));
  }
  for (int g = 0; g < TTFT_GAUGE_COUNT_; g++)
    EXPECT_EQ_U64(ttft_snapshot_gauge(a, (ttft_gauge)g), ttft_snapshot_gauge(b, (ttft_gauge)g));
  uint64_t a0 = 0, a1 = 0, b0 = 1, b1 = 1;
  EXPECT_ERR(TTFT_OK, ttft_snapshot_interval(a, &a0, &a1));
  EXPECT_ERR(TTFT_OK, ttft_snapshot_interval(b, &b0, &b1));
  EXPECT_EQ_U64(a0, b0);
  EXPECT_EQ_U64(a1, b1);
  static const char *keys[] = {"start_point", "token_point", "model", "namespace"};
  for (int i = 0; i < 4; i++)
    EXPECT_STREQ(ttft_snapshot_label(a, keys[i]), ttft_snapshot_label(b, keys[i]));
}

/* ------------------------------------------------------------- fixture
 * A recorded registry (tools/workload.h), its snapshot and the snapshot's
 * encoding. */
typedef struct coded {
  ttft_registry *r;
  ttft_snapshot *s;
  unsigned char *b;
  size_t n;
} coded;

static int coded_open(coded *w, uint64_t seed, unsigned requests) {
  memset(w, 0, sizeof *w);
  w->r = recorded(seed, requests);
  EXPECT_NOT_NULL(w->r);
  if (!w->r) return 0;
  w->s = ttft_snapshot_take(w->r);
  EXPECT_NOT_NULL(w->s);
  if (!w->s) return 0;
  w->b = encode_alloc(w->s, &w->n);
  EXPECT_NOT_NULL(w->b);
  return w->b != NULL;
}

static void coded_close(coded *w) {
  free(w->b);
  ttft_snapshot_free(w->s);
  ttft_registry_free(w->r);
}

/* the CRC-32C written here gives the standard check value */
TEST(crc32c_check_value) {
  EXPECT_EQ_U64(0xE3069283u, crc32c_ref((const unsigned char *)"123456789", 9));
}

/* ---------------------------------------------------------- round trip */
/* encode -> decode -> encode is bit-exact and every query answers the same */
TEST(round_trip_bit_exact) {
  coded w;
  if (coded_open(&w, 11, 1500)) {
    ttft_snapshot *s = w.s;
    const unsigned char *b = w.b;
    size_t n = w.n;
    printf("encoded %zu bytes for %llu TTFT / %llu ITL observations in %d classes\n", n,
           (unsigned long long)ttft_snapshot_count(s, TTFT_METRIC_TTFT),
           (unsigned long long)ttft_snapshot_count(s, TTFT_METRIC_ITL), ttft_snapshot_classes(s));
    EXPECT_TRUE(n < 64 * 1024); /* sparse: far below one dense histogram (38 KiB) */
    EXPECT_TRUE(memcmp(b, "TTFS", 4) == 0);
    EXPECT_EQ_U64(crc32c_ref(b, n - 4),
                  (uint32_t)b[n - 4] | (uint32_t)b[n - 3] << 8 | (uint32_t)b[n - 2] << 16 |
                      (uint32_t)b[n - 1] << 24);

    int err = 1;
    ttft_snapshot *d = ttft_snapshot_decode(b, n, &err);
    EXPECT_ERR(TTFT_OK, err);
    EXPECT_NOT_NULL(d);
    if (d) {
      expect_same(s, d);
      size_t n2 = 0;
      unsigned char *b2 = encode_alloc(d, &n2);
      EXPECT_EQ_U64(n, n2);
      EXPECT_TRUE(b2 && n == n2 && memcmp(b, b2, n) == 0);
      free(b2);
    }
    ttft_snapshot_free(d);
  }
  coded_close(&w);
}

/* the outputs built from a decoded snapshot are the same too */
TEST(round_trip_formats_same) {
  coded w;
  if (coded_open(&w, 11, 1500)) {
    int err = 1;
    ttft_snapshot *d = ttft_snapshot_decode(w.b, w.n, &err);
    EXPECT_ERR(TTFT_OK, err);
    EXPECT_NOT_NULL(d);
    if (d) {
      static char t1[1 << 16], t2[1 << 16];
      for (int f = 0; f < TTFT_FORMAT_COUNT_; f++) {
        long l1 = ttft_snapshot_format(w.s, (ttft_format)f, t1, sizeof t1);
        long l2 = ttft_snapshot_format(d, (ttft_format)f, t2, sizeof t2);
        EXPECT_EQ_INT(l1, l2);
        if (l1 > 0 && (size_t)l1 < sizeof t1) EXPECT_TRUE(strcmp(t1, t2) == 0);
      }
    }
    ttft_snapshot_free(d);
  }
  coded_close(&w);
}

/* snprintf rules: nothing written past cap, the full size returned; NULL
 * arguments refused */
TEST(encode_snprintf_rules) {
  coded w;
  if (coded_open(&w, 11, 1500)) {
    ttft_snapshot *s = w.s;
    size_t n = w.n;
    unsigned char *small = malloc(n + 16);
    for (size_t cap = 0; small && cap < n; cap += 1 + cap / 3) {
      memset(small, 0xA5, n + 16);
      EXPECT_EQ_INT((long)n, ttft_snapshot_encode(s, cap ? small : NULL, cap));
      size_t past = 0;
      for (size_t i = cap; i < n + 16; i++) past += small[i] != 0xA5;
      EXPECT_EQ_U64(0, past);
    }
    free(small);
    EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_encode(NULL, NULL, 0));
    EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_encode(s, NULL, 10));
    int err = 0;
    EXPECT_NULL(ttft_snapshot_decode(NULL, 10, &err));
    EXPECT_ERR(TTFT_EINVAL, err);
  }
  coded_close(&w);
}

TEST(empty_registry) {
  ttft_registry *r = ttft_registry_new(NULL);
  ttft_snapshot *s = ttft_snapshot_take(r);
  size_t n = 0;
  unsigned char *b = encode_alloc(s, &n);
  int err = 1;
  ttft_snapshot *d = b ? ttft_snapshot_decode(b, n, &err) : NULL;
  EXPECT_ERR(TTFT_OK, err);
  EXPECT_NOT_NULL(d);
  if (d) {
    expect_same(s, d);
    EXPECT_EQ_INT(1, ttft_snapshot_classes(d));
    EXPECT_STREQ("default", ttft_snapshot_class_name(d, 0));
  }
  printf("empty snapshot: %zu bytes\n", n);
  EXPECT_TRUE(n < 4096); /* mostly the Prometheus bucket bounds */
  ttft_snapshot_free(d);
  free(b);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* -------------------------------------------------------------- damage
 * The encoding of a small recorded workload, and a scratch buffer one byte
 * longer to damage copies of it in. */
typedef struct damage {
  coded w;
  unsigned char *c;
} damage;

static int damage_open(damage *x) {
  x->c = NULL;
  if (!coded_open(&x->w, 5, 120)) return 0;
  x->c = malloc(x->w.n + 1);
  EXPECT_NOT_NULL(x->c);
  if (x->c) printf("damage tests on a %zu-byte encoding\n", x->w.n);
  return x->c != NULL;
}

static void damage_close(damage *x) {
  free(x->c);
  coded_close(&x->w);
}

TEST(damage_every_truncation) {
  damage x;
  if (damage_open(&x)) {
    unsigned char *c = x.c;
    unsigned long accepted = 0, wrong_code = 0;
    for (size_t len = 0; len < x.w.n; len++) {
      int err = 0;
      memcpy(c, x.w.b, len);
      ttft_snapshot *d = ttft_snapshot_decode(c, len, &err);
      if (d) accepted++;
      if (err != TTFT_ECORRUPT) wrong_code++;
      ttft_snapshot_free(d);
    }
    EXPECT_EQ_U64(0, accepted);
    EXPECT_EQ_U64(0, wrong_code);
  }
  damage_close(&x);
}

TEST(damage_trailing_byte) {
  damage x;
  if (damage_open(&x)) {
    size_t n = x.w.n;
    memcpy(x.c, x.w.b, n);
    x.c[n] = 0;
    int err = 0;
    EXPECT_NULL(ttft_snapshot_decode(x.c, n + 1, &err));
    EXPECT_ERR(TTFT_ECORRUPT, err);
  }
  damage_close(&x);
}

TEST(damage_every_single_byte) {
  damage x;
  if (damage_open(&x)) {
    unsigned char *c = x.c;
    size_t n = x.w.n;
    static const unsigned char flips[] = {0x01, 0x80, 0xFF};
    unsigned long accepted = 0, wrong_code = 0;
    for (size_t i = 0; i < n; i++) {
      for (size_t f = 0; f < sizeof flips; f++) {
        memcpy(c, x.w.b, n);
        c[i] ^= flips[f];
        int err = 0;
        ttft_snapshot *d = ttft_snapshot_decode(c, n, &err);
        if (d) accepted++;
        if (err != TTFT_ECORRUPT) wrong_code++;
        ttft_snapshot_free(d);
      }
    }
    EXPECT_EQ_U64(0, accepted);
    EXPECT_EQ_U64(0, wrong_code);
  }
  damage_close(&x);
}

/* The structure checks alone: either ECORRUPT, or a snapshot that
 * re-encodes and decodes again (never a crash, never garbage). */
TEST(damage_repaired_checksum) {
  damage x;
  if (damage_open(&x)) {
    unsigned char *c = x.c;
    size_t n = x.w.n;
    static const unsigned char vals[] = {0x00, 0x80, 0xFF};
    unsigned long rejected = 0, survived = 0, inconsistent = 0, wrong_code = 0;
    for (size_t i = 12; i + 4 < n; i++) {
      for (size_t v = 0; v < sizeof vals; v++) {
        memcpy(c, x.w.b, n);
        if (c[i] == vals[v]) continue;
        c[i] = vals[v];
        fix_crc(c, n);
        int err = 0;
        ttft_snapshot *d = ttft_snapshot_decode(c, n, &err);
        if (!d) {
          rejected++;
          if (err != TTFT_ECORRUPT) wrong_code++;
          continue;
        }
        /* every 8th survivor goes round the codec again (each costs a
         * few MiB of dense histograms) */
        if (survived++ % 8) {
          for (int m = 0; m < TTFT_METRIC_COUNT_; m++)
            if (ttft_snapshot_quantile(d, (ttft_metric)m, 0.5) > ttft_snapshot_quantile(d, (ttft_metric)m, 1.0))
              inconsistent++;
          ttft_snapshot_free(d);
          continue;
        }
        size_t n2 = 0;
        unsigned char *b2 = encode_alloc(d, &n2);
        ttft_snapshot *d2 = b2 ? ttft_snapshot_decode(b2, n2, &err) : NULL;
        if (!d2) inconsistent++;
        for (int m = 0; d2 && m < TTFT_METRIC_COUNT_; m++) {
          uint64_t cnt = ttft_snapshot_count(d2, (ttft_metric)m);
          uint64_t lo = ttft_snapshot_quantile(d2, (ttft_metric)m, 0.0);
          uint64_t hi = ttft_snapshot_quantile(d2, (ttft_metric)m, 1.0);
          uint64_t mid = ttft_snapshot_quantile(d2, (ttft_metric)m, 0.5);
          if (cnt != ttft_snapshot_count(d, (ttft_metric)m) || lo > mid || mid > hi) inconsistent++;
        }
        ttft_snapshot_free(d2);
        free(b2);
        ttft_snapshot_free(d);
      }
    }
    printf("repaired-checksum mutations: %lu rejected, %lu decoded\n", rejected, survived);
    EXPECT_TRUE(rejected > 0);
    EXPECT_EQ_U64(0, wrong_code);
    EXPECT_EQ_U64(0, inconsistent);
  }
  damage_close(&x);
}

/* header fields broken one at a time, the checksum repaired */
TEST(damage_header_fields) {
  damage x;
  if (damage_open(&x)) {
    unsigned char *c = x.c;
    size_t n = x.w.n;
    struct {
      size_t at;
      unsigned char v;
    } hdr[] = {{0, 'X'}, {3, 's'}, {4, 0}, {4, 6}, {5, 0x08}, {5, 0x80}, {6, 1}, {7, 1}, {8, 0}, {11, 1}};
    for (size_t k = 0; k < sizeof hdr / sizeof hdr[0]; k++) {
      memcpy(c, x.w.b, n);
      c[hdr[k].at] = hdr[k].v;
      fix_crc(c, n);
      int err = 0;
      ttft_snapshot *d = ttft_snapshot_decode(c, n, &err);
      EXPECT_NULL(d);
      EXPECT_ERR(TTFT_ECORRUPT, err);
      ttft_snapshot_free(d);
    }
  }
  damage_close(&x);
}

/* --------------------------------------------------- hand-built encodings
 * Spelled out from docs/encoding.md. variant 0 is valid; each other
 * variant breaks one rule the decoder must enforce. */
typedef struct hb {
  unsigned char b[8192];
  size_t n;
} hb;

static void hb_byte(hb *h, unsigned v) {
  if (h->n < sizeof h->b) h->b[h->n++] = (unsigned char)v;
}
static void hb_var(hb *h, uint64_t v) {
  while (v >= 0x80) {
    hb_byte(h, (unsigned)(v & 0x7F) | 0x80);
    v >>= 7;
  }
  hb_byte(h, (unsigned)v);
}
static void hb_mem(hb *h, const void *p, size_t n) {
  for (size_t i = 0; i < n; i++) hb_byte(h, ((const unsigned char *)p)[i]);
}
static void hb_str(hb *h, const char *s) {
  hb_var(h, strlen(s));
  hb_mem(h, s, strlen(s));
}

enum {
  V_OK, V_VERSION, V_FLAG, V_RESERVED, V_UTF8, V_NUL, V_LONG_LABEL, V_NAMESPACE, V_LABEL_NAME,
  V_BANDS, V_CLASS0, V_DUP_CLASS, V_NO_CLASS, V_MANY_CLASSES, V_IDX_REPEAT, V_IDX_RANGE,
  V_ZERO_COUNT, V_COUNT_MISMATCH, V_MIN, V_MAX, V_OVERLONG, V_VAR_65BITS, V_TRAILING,
  V_PROM_LONG, V_LABELS_MANY, V_NNZ_HUGE, V_CLASS_CHAR, V_GAUGES_MANY, V_TIME_OVERFLOW,
  V_COUNT_OVERFLOW, V_PROM_ORDER, V_TRUNC_HIST, V_CTR_OVERFLOW,
  /* version 2 only */
  V_SCHEMA, V_STATUS_MANY, V_VIEW_BAD, V_VIEW_OVERFLOW,
  /* version 3 only */
  V_PREFIX_MANY, V_PREFILL_MANY, V_CAUSES_MANY, V_CAUSE_OVERFLOW, V_STEPS_MANY, V_STEP_BAD,
  /* version 4 only */
  V_SLO_EXTRA_MANY, V_FLUID_MIN_HIGH, V_FLUID_MIN_NAN, V_FLUID_MIN_NEG,
  /* version 5 only */
  V_SLOW_EXTRA_MANY, V_SLOW_MISSED_ABOVE,
  V_COUNT
};
#define V_FIRST_V2_ONLY V_SCHEMA
#define V_FIRST_V3_ONLY V_PREFIX_MANY
#define V_FIRST_V4_ONLY V_SLO_EXTRA_MANY
#define V_FIRST_V5_ONLY V_SLOW_EXTRA_MANY

static int g_hb_version; /* the version hb_build is writing */

/* a one-value split histogram (version 3: the splits that are new) */
static void hb_one(hb *h, uint64_t value) {
  hb_var(h, 1);
  hb_var(h, value); /* bucket = value (exact below 256) */
  hb_var(h, 1);
  hb_var(h, 1);     /* count */
  hb_var(h, value); /* sum   */
  hb_var(h, 0);     /* sum, high word */
  hb_var(h, value); /* min   */
  hb_var(h, 0);     /* max - min */
}

/* the TTFT histogram of class 0 (values 10, 10, 345: bucket 10 (exact)
 * twice, bucket 300 = [344, 345] once), broken as variant v asks */
static void hb_hist_ttft(hb *h, int v, int cls) {
  if (v == V_NNZ_HUGE) {
    hb_var(h, 4864);
    return;
  }
  if (v == V_COUNT_OVERFLOW) {
    hb_var(h, 1);
    hb_var(h, 10);
    hb_var(h, UINT64_C(1) << 63);
    hb_var(h, UINT64_C(1) << 63);
    hb_var(h, 0);
    hb_var(h, 10);
    hb_var(h, 0);
    return;
  }
  if (cls == 1) {
    hb_var(h, 0);
    return;
  }
  hb_var(h, 2);
  hb_var(h, 10);
  hb_var(h, v == V_ZERO_COUNT ? 0 : 2);
  hb_var(h, v == V_IDX_REPEAT ? 0 : v == V_IDX_RANGE ? 4864 - 10 : 290);
  hb_var(h, 1);
  if (v == V_TRUNC_HIST) return;
  hb_var(h, v == V_COUNT_MISMATCH ? 4 : 3); /* count */
  hb_var(h, 365);                            /* sum   */
  if (g_hb_version >= 3) hb_var(h, 0);       /* sum, high word */
  hb_var(h, v == V_MIN ? 11 : 10);           /* min   */
  hb_var(h, v == V_MAX ? 336 : 335);         /* max - min */
}

/* a status view: completed E2E of class 1 holds 7 and 2^62 (bucket 7 and
 * the last bucket, which also holds everything above 2^44 - 1) */
static void hb_view(hb *h, int v, int cls, int st, int view) {
  if (cls != 1 || st != 0 || view != 2) {
    hb_var(h, 0);
    return;
  }
  uint64_t big = UINT64_C(1) << 62;
  hb_var(h, 2);
  hb_var(h, 7);
  hb_var(h, v == V_VIEW_OVERFLOW ? UINT64_MAX : 1);
  hb_var(h, 4863 - 7);
  hb_var(h, 1);
  if (v == V_VIEW_OVERFLOW) return; /* refused at the bucket already */
  hb_var(h, 2);
  hb_var(h, big + 7);
  /* version 3: sums are 128 bits; this one is 2^65 + 2^62 + 7 (a true
   * sum the values could never reach, which the decoder does not judge) */
  if (g_hb_version >= 3) hb_var(h, 2);
  hb_var(h, v == V_VIEW_BAD ? 8 : 7);
  hb_var(h, big);
}

/* An encoding of the given version (1: libttft 1.0; 2: libttft 1.1; 3:
 * current: 128-bit sums, the 1.2 counters such as slo_judged), spelled out
 * from docs/encoding.md; variant v breaks one rule. */
/* the stall causes a version 3 body lists: what this library writes
 * (1.3: 6), or 5 as 1.2 wrote them */
static int hb_causes = TTFT_STALL_CAUSE_COUNT;
/* version 4: class "chat" sets the 1.3 SLO fields (1 ms per prompt token,
 * a 40 ms token deadline, fluid_min 0.8); 0: every class at the
 * ttft_slo_init defaults, what a version 3 body decodes to */
static int hb_slo_set = 1;
/* version 5: the "chat" gap entry of the slowest lists carries its 1.3
 * fields (12 token deadlines, 3 missed, D 40 ms, judged against 307 ms /
 * 50 ms); 0: every entry's are 0, what a version 3 or 4 body decodes to */
static int hb_slow_set = 1;

static uint64_t f64_bits(double f) {
  uint64_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}

static size_t hb_build(hb *h, int v, int version) {
  h->n = 0;
  g_hb_version = version;
  hb_mem(h, "TTFS", 4);
  hb_byte(h, v == V_VERSION ? 6 : (unsigned)version);
  /* v1 knows bit 0 only; v2 bits 0-2 (summaries, native, idle classes) */
  hb_byte(h, v == V_FLAG ? (version == 1 ? 0x03 : 0x09) : version == 1 ? 0x01 : 0x03);
  hb_byte(h, v == V_RESERVED ? 1 : 0);
  hb_byte(h, 0);
  hb_mem(h, "\0\0\0\0", 4);
  if (v == V_OVERLONG) {
    hb_byte(h, 0x87); /* 7, as two bytes */
    hb_byte(h, 0x00);
  } else if (v == V_VAR_65BITS) {
    for (int i = 0; i < 9; i++) hb_byte(h, 0xFF);
    hb_byte(h, 0x02);
  } else {
    hb_var(h, 7); /* registry id */
  }
  hb_var(h, v == V_TIME_OVERFLOW ? UINT64_MAX : 1000); /* t_start */
  hb_var(h, 500);                                      /* t_end - t_start */
  hb_var(h, 500000000);                                /* stall threshold */
  hb_str(h, "client_send");
  hb_str(h, "detokenized_flush");
  if (v == V_UTF8) hb_str(h, "bad\xc0\x80");
  else if (v == V_NUL) {
    hb_var(h, 3);
    hb_mem(h, "a\0b", 3);
  } else if (v == V_LONG_LABEL) {
    char big[129];
    memset(big, 'x', 128);
    big[128] = 0;
    hb_str(h, big);
  } else hb_str(h, "m\xc3\xa9");
  hb_str(h, v == V_NAMESPACE ? "9bad" : "llm_");
  if (version >= 2) hb_var(h, v == V_SCHEMA ? 13 : 3 + 4); /* native schema 3, biased by 4 */
  if (v == V_GAUGES_MANY) {
    hb_var(h, 65);
    for (int i = 0; i < 65; i++) hb_var(h, 0);
  } else { /* in-flight 3, live stalls 1; version 2 also memory and coarse observations */
    hb_var(h, version == 1 ? 2 : version == 2 ? 4 : TTFT_GAUGE_COUNT_);
    hb_var(h, 3);
    hb_var(h, 1);
    if (version >= 2) {
      hb_var(h, 123456);
      hb_var(h, 0);
    }
    for (int g = 4; version >= 3 && g < TTFT_GAUGE_COUNT_; g++) hb_var(h, 0);
  }
  if (v == V_LABELS_MANY) {
    hb_var(h, 9);
    for (int i = 0; i < 9; i++) {
      hb_str(h, "k");
      hb_str(h, "v");
    }
  } else {
    hb_var(h, 1);
    hb_str(h, v == V_LABEL_NAME ? "bad-name" : "region");
    hb_str(h, "eu \"west\"");
  }
  hb_var(h, 2); /* band edges 100, 500 */
  hb_var(h, 100);
  hb_var(h, v == V_BANDS ? 0 : 400);
  /* version 3 (1.2): what this build writes, so that it re-encodes bit-exact */
  int nmet = version == 1 ? 11 : version == 2 ? 12 : TTFT_METRIC_COUNT_;
  int nctr = version == 1 ? 13 : version == 2 ? 14 : TTFT_COUNTER_COUNT_;
  hb_var(h, (uint64_t)nmet); /* prom lists */
  for (int m = 0; m < nmet; m++) {
    if (m == 0 && v == V_PROM_LONG) {
      hb_var(h, 65);
      for (int i = 0; i < 65; i++) hb_var(h, 1);
      continue;
    }
    hb_var(h, 2);
    hb_var(h, 1000);
    hb_var(h, m == 0 && v == V_PROM_ORDER ? 0 : 9000);
  }
  uint64_t ncls = v == V_NO_CLASS ? 0 : v == V_MANY_CLASSES ? 5000 : 2;
  hb_var(h, ncls);
  for (uint64_t c = 0; c < ncls && c < 2; c++) {
    const char *name = c == 0 ? (v == V_CLASS0 ? "chat" : "default")
                              : (v == V_DUP_CLASS ? "default" : v == V_CLASS_CHAR ? "a b" : "chat");
    hb_str(h, name);
    hb_var(h, c ? 300000000 : 0); /* slo ttft */
    hb_var(h, c ? 50000000 : 0);  /* slo tpot */
    hb_var(h, 0);                 /* slo e2e */
    hb_var(h, c ? 250000000 : 500000000);
    if (version >= 4) { /* the 1.3 SLO fields */
      int set = c && hb_slo_set;
      hb_var(h, v == V_SLO_EXTRA_MANY ? 65 : 3);
      hb_var(h, set ? 1000000 : 0);  /* ttft_ns_per_prompt_token */
      hb_var(h, set ? 40000000 : 0); /* token_deadline_ns */
      double f = set ? 0.8 : 0.9;
      if (c && v == V_FLUID_MIN_HIGH) f = 1.5;
      if (c && v == V_FLUID_MIN_NEG) f = -0.25;
      hb_var(h, c && v == V_FLUID_MIN_NAN ? UINT64_C(0x7FF8000000000001) : f64_bits(f));
      for (int i = 3; v == V_SLO_EXTRA_MANY && i < 65; i++) hb_var(h, 0);
    }
    hb_var(h, (uint64_t)nctr);
    for (int k = 0; k < nctr; k++)
      hb_var(h, v == V_CTR_OVERFLOW && k == 5 ? UINT64_MAX - c : c * 100 + (uint64_t)k);
    hb_var(h, (uint64_t)nmet);
    for (int m = 0; m < nmet; m++) {
      if (m == 0) hb_hist_ttft(h, v, (int)c);
      else hb_var(h, 0);
    }
    if (version < 2) continue;
    hb_var(h, v == V_STATUS_MANY ? 9 : 3);
    for (int st = 0; st < 3; st++) {
      hb_var(h, 4);
      for (int view = 0; view < 4; view++) hb_view(h, v, (int)c, st, view);
    }
    if (version < 3) continue;
    /* stalls by cause: class c has c*100+6 stalls (counter 6), c of them
     * by prefill (ns 7000 each), the rest unknown (ns 0) */
    const int ncauses = v == V_CAUSES_MANY ? 65 : hb_causes;
    hb_var(h, (uint64_t)ncauses);
    for (int k = 0; k < ncauses; k++) {
      uint64_t n = k == 0 ? c * 100 + 6 - c : k == 1 ? c : 0;
      hb_var(h, v == V_CAUSE_OVERFLOW && k == 2 ? UINT64_MAX - c : n);
      hb_var(h, k == 1 ? c * 7000 : 0);
    }
  }
  if (version >= 3) { /* prefix bands miss, hit, partial: the partial one holds 40 */
    hb_var(h, v == V_PREFIX_MANY ? 4 : 3);
    hb_var(h, 0);
    hb_var(h, 0);
    hb_one(h, 40);
    if (v == V_PREFIX_MANY) hb_var(h, 0);
  } else {
    hb_var(h, 2);
    hb_var(h, 0);
    hb_var(h, 0);
  }
  hb_var(h, 8);
  for (int i = 0; i < 8; i++) hb_var(h, 0);
  if (version >= 3) { /* PREFILL by prefix band: the hit one holds 20 */
    hb_var(h, v == V_PREFILL_MANY ? 4 : 3);
    hb_var(h, 0);
    hb_one(h, 20);
    hb_var(h, 0);
    if (v == V_PREFILL_MANY) hb_var(h, 0);
  }
  if (version >= 3) { /* engine steps: none without prefill; 7 (exact) with */
    hb_var(h, v == V_STEPS_MANY ? 9 : 2);
    hb_var(h, 0);
    hb_var(h, 1);
    hb_var(h, 7);
    hb_var(h, 1);
    hb_var(h, 1);
    hb_var(h, 7);
    hb_var(h, 0); /* sum_hi */
    hb_var(h, v == V_STEP_BAD ? 8 : 7);
    hb_var(h, 0);
    for (int i = 2; i < (v == V_STEPS_MANY ? 9 : 2); i++) hb_var(h, 0);
  }
  if (version >= 3) { /* the slowest lists (docs/encoding.md, version 3) */
    hb_var(h, 2); /* slowest_k */
    hb_var(h, 2); /* rankings: ttft, gap */
    for (uint64_t c = 0; c < 2; c++)
      for (int by = 0; by < 2; by++) {
        int one = (c == 0 && by == 0) || (c == 1 && by == 1);
        hb_var(h, (uint64_t)one);
        if (!one) continue;
        hb_var(h, by ? 4 : 20);    /* ttft_ns */
        hb_var(h, by ? 90 : 0);    /* max_gap_ns (none: one emission) */
        hb_var(h, 1000);           /* t_begin_ns */
        hb_var(h, 150);            /* span */
        hb_var(h, by ? 3 : 1);     /* tokens */
        hb_var(h, by ? UINT64_C(1764770000123000000) : 0); /* t_end_unix_ns */
        hb_byte(h, by ? 1 : 0);    /* status: cancelled / completed */
        hb_byte(h, by ? 4 : 0);    /* cause: engine_idle / unknown */
        hb_byte(h, by);            /* has_trace */
        if (by)
          for (unsigned b = 0; b < 16; b++) hb_byte(h, 0xA0u + b);
        hb_var(h, by ? 5 : 0);
        if (by) hb_mem(h, "req-7", 5);
        if (version >= 5) { /* the 1.3 fields: deadlines, missed, D, budgets */
          int set = by && hb_slow_set;
          hb_var(h, v == V_SLOW_EXTRA_MANY ? 65 : 5);
          hb_var(h, set ? 12 : 0);
          hb_var(h, set ? (v == V_SLOW_MISSED_ABOVE ? 13 : 3) : 0);
          hb_var(h, set ? 40000000 : 0);
          hb_var(h, set ? 307000000 : 0);
          hb_var(h, set ? 50000000 : 0);
          for (int i = 5; v == V_SLOW_EXTRA_MANY && i < 65; i++) hb_var(h, 0);
        }
      }
  }
  if (v == V_TRAILING) hb_byte(h, 0);
  hb_mem(h, "\0\0\0\0", 4);
  put_le32(h->b + 8, (uint32_t)h->n);
  fix_crc(h->b, h->n);
  return h->n;
}

/* what both versions of the valid hand-built encoding hold */
static void expect_hand_built(const ttft_snapshot *s) {
  EXPECT_EQ_U64(3, ttft_snapshot_count(s, TTFT_METRIC_TTFT));
  EXPECT_EQ_U64(365, ttft_snapshot_sum(s, TTFT_METRIC_TTFT));
  EXPECT_EQ_U64(10, ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, 0.0));
  EXPECT_EQ_U64(10, ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, 0.5));
  EXPECT_EQ_U64(345, ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, 1.0));
  EXPECT_EQ_U64(0, ttft_snapshot_count(s, TTFT_METRIC_ITL));
  EXPECT_EQ_INT(2, ttft_snapshot_classes(s));
  EXPECT_STREQ("chat", ttft_snapshot_class_name(s, 1));
  EXPECT_EQ_U64(105, ttft_snapshot_class_counter(s, 1, (ttft_counter)5));
  EXPECT_EQ_U64(5 + 105, ttft_snapshot_counter(s, (ttft_counter)5));
  ttft_slo slo;
  slo.struct_size = sizeof slo;
  EXPECT_ERR(TTFT_OK, ttft_snapshot_class_slo(s, 1, &slo));
  EXPECT_EQ_U64(300000000, slo.ttft_ns);
  EXPECT_EQ_U64(250000000, slo.stall_threshold_ns);
  EXPECT_EQ_U64(3, ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT));
  EXPECT_EQ_U64(1, ttft_snapshot_gauge(s, TTFT_GAUGE_LIVE_STALLS));
  EXPECT_EQ_U64(3, ttft_snapshot_bands(s));
  uint32_t lo = 0, hi = 0;
  EXPECT_ERR(TTFT_OK, ttft_snapshot_band(s, 1, &lo, &hi));
  EXPECT_EQ_U64(100, lo);
  EXPECT_EQ_U64(500, hi);
  uint64_t t0 = 0, t1 = 0;
  ttft_snapshot_interval(s, &t0, &t1);
  EXPECT_EQ_U64(1000, t0);
  EXPECT_EQ_U64(1500, t1);
  EXPECT_STREQ("client_send", ttft_snapshot_label(s, "start_point"));
  EXPECT_STREQ("m\xc3\xa9", ttft_snapshot_label(s, "model"));
  EXPECT_STREQ("llm_", ttft_snapshot_label(s, "namespace"));
  long tl = ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS, NULL, 0);
  EXPECT_TRUE(tl > 0);
  char *text = tl > 0 ? malloc((size_t)tl + 1) : NULL;
  if (text) {
    EXPECT_EQ_INT(tl, ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS, text, (size_t)tl + 1));
    EXPECT_CONTAINS(text, "region=\"eu \\\"west\\\"\"");
  }
  free(text);
}

/* version 2 (libttft 1.1): the same data, status views included; it has
 * no slo_judged, and every ended stream was judged then, so judged = ended
 * (completed + cancelled + errors: 101 + 102 + 103 for chat) and attainment
 * keeps its 1.1 value; no partial band and no prefill split; re-encodes
 * as version 3, which decodes to the same */
TEST(hand_built_v2) {
  static hb h;
  static unsigned char re[8192];
  size_t n = hb_build(&h, V_OK, 2);
  int err = 1;
  ttft_snapshot *s = ttft_snapshot_decode(h.b, n, &err);
  EXPECT_ERR(TTFT_OK, err);
  EXPECT_NOT_NULL(s);
  if (s) {
    expect_hand_built(s);
    /* version 2: the status views */
    EXPECT_EQ_U64(2, ttft_snapshot_status_count(s, 1, TTFT_COMPLETED, TTFT_METRIC_E2E));
    EXPECT_EQ_U64(2, ttft_snapshot_status_count(s, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_E2E));
    EXPECT_EQ_U64(0, ttft_snapshot_status_count(s, 0, TTFT_COMPLETED, TTFT_METRIC_E2E));
    EXPECT_EQ_U64(0, ttft_snapshot_status_count(s, 1, TTFT_CANCELLED, TTFT_METRIC_E2E));
    EXPECT_EQ_U64(7, ttft_snapshot_status_quantile(s, 1, TTFT_COMPLETED, TTFT_METRIC_E2E, 0.5));
    EXPECT_EQ_U64((UINT64_C(1) << 62) + 7,
                  ttft_snapshot_status_quantile(s, 1, TTFT_COMPLETED, TTFT_METRIC_E2E, 1.0));
    /* 1.1 had no partial band and no prefill split */
    EXPECT_EQ_U64(0, ttft_snapshot_split_count(s, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_PARTIAL));
    EXPECT_EQ_U64(0, ttft_snapshot_split_count(s, TTFT_SPLIT_PREFILL_BY_PREFIX, TTFT_PREFIX_HIT));
    /* 64-bit sums read as they were written */
    uint64_t hi = 9, lo = 0;
    EXPECT_ERR(TTFT_OK, ttft_snapshot_class_sum_wide(s, 0, TTFT_METRIC_TTFT, &hi, &lo));
    EXPECT_EQ_U64(0, hi);
    EXPECT_EQ_U64(365, lo);
    EXPECT_EQ_U64(306, ttft_snapshot_class_counter(s, 1, TTFT_COUNTER_SLO_JUDGED));
    EXPECT_EQ_U64(6, ttft_snapshot_class_counter(s, 0, TTFT_COUNTER_SLO_JUDGED));
    EXPECT_EQ_U64(312, ttft_snapshot_counter(s, TTFT_COUNTER_SLO_JUDGED));
    EXPECT_NEAR_REL(109.0 / 306.0, ttft_snapshot_attainment(s, 1), 1e-12);
    /* re-encoded as version 3, which decodes to the same */
    /* before version 3 every stall's cause is unknown, its time 0 */
    EXPECT_EQ_U64(106, ttft_snapshot_stalls_by_cause(s, 1, TTFT_STALL_UNKNOWN));
    EXPECT_EQ_U64(112, ttft_snapshot_stalls_by_cause(s, TTFT_CLASS_ALL, TTFT_STALL_UNKNOWN));
    EXPECT_EQ_U64(0, ttft_snapshot_stalls_by_cause(s, 1, TTFT_STALL_PREFILL));
    EXPECT_EQ_U64(0, ttft_snapshot_stall_seconds_by_cause(s, 1, TTFT_STALL_UNKNOWN));
    EXPECT_EQ_U64(0, ttft_snapshot_engine_step_count(s, 1));
    long n2 = ttft_snapshot_encode(s, re, sizeof re);
    EXPECT_TRUE(n2 > 16 && re[4] == 5); /* re-encoded as version 5 */
    ttft_snapshot *s3 = n2 > 0 ? ttft_snapshot_decode(re, (size_t)n2, &err) : NULL;
    EXPECT_NOT_NULL(s3);
    if (s3) {
      expect_hand_built(s3);
      EXPECT_EQ_U64(2, ttft_snapshot_status_count(s3, 1, TTFT_COMPLETED, TTFT_METRIC_E2E));
      EXPECT_EQ_U64(306, ttft_snapshot_class_counter(s3, 1, TTFT_COUNTER_SLO_JUDGED));
      EXPECT_EQ_U64(106, ttft_snapshot_stalls_by_cause(s3, 1, TTFT_STALL_UNKNOWN));
    }
    ttft_snapshot_free(s3);
  }
  ttft_snapshot_free(s);
}

/* The 1.3 SLO fields of the hand-built classes: "chat" as version 4
 * spells them when set, else (and "default" always) ttft_slo_init's. */
static void expect_slo_13(const ttft_snapshot *s, int set) {
  for (int c = 0; c < 2; c++) {
    ttft_slo slo;
    memset(&slo, 0xAB, sizeof slo);
    slo.struct_size = sizeof slo;
    EXPECT_ERR(TTFT_OK, ttft_snapshot_class_slo(s, c, &slo));
    int on = set && c == 1;
    EXPECT_EQ_U64(on ? 1000000 : 0, slo.ttft_ns_per_prompt_token);
    EXPECT_EQ_U64(on ? 40000000 : 0, slo.token_deadline_ns);
    EXPECT_TRUE(slo.fluid_min == (on ? 0.8 : 0.9));
    EXPECT_EQ_U64(c ? 300000000 : 0, slo.ttft_ns);
  }
}

/* version 3 (1.2): 128-bit sums, stalls by cause and engine steps;
 * decodes to the values it spells, the 1.3 SLO fields at their defaults,
 * and re-encodes as version 5 (slowest entries' 1.3 fields 0) */
TEST(hand_built_v3) {
  static hb h, h4;
  static unsigned char re[8192];
  size_t n = hb_build(&h, V_OK, 3);
  int err = 1;
  ttft_snapshot *s = ttft_snapshot_decode(h.b, n, &err);
  EXPECT_ERR(TTFT_OK, err);
  EXPECT_NOT_NULL(s);
  if (s) {
    expect_hand_built(s);
    EXPECT_EQ_U64(2, ttft_snapshot_status_count(s, 1, TTFT_COMPLETED, TTFT_METRIC_E2E));
    /* the view's wide sum, exact in the exposition: 2^65 + 2^62 + 7 ns */
    static char text[65536];
    long tl = ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS, text, sizeof text);
    EXPECT_TRUE(tl > 0 && (size_t)tl < sizeof text);
    EXPECT_CONTAINS(text, "llm_request_duration_by_status_seconds_sum{class=\"chat\",model=\"m\xc3\xa9\","
                          "region=\"eu \\\"west\\\"\",status=\"completed\"} 41505174165.846491143\n");
    /* slo_judged as written (class c: c * 100 + 14), so attainment is
     * slo_met / slo_judged: (100 + 9) / (100 + 14) for chat */
    EXPECT_EQ_U64(114, ttft_snapshot_class_counter(s, 1, TTFT_COUNTER_SLO_JUDGED));
    EXPECT_NEAR_REL(109.0 / 114.0, ttft_snapshot_attainment(s, 1), 1e-12);
    /* 1.2's prefix bands: the partial band, PREFILL by band */
    EXPECT_EQ_U64(1, ttft_snapshot_split_count(s, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_PARTIAL));
    EXPECT_EQ_U64(40, ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_PARTIAL, 0.5));
    EXPECT_EQ_U64(0, ttft_snapshot_split_count(s, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_HIT));
    EXPECT_EQ_U64(1, ttft_snapshot_split_count(s, TTFT_SPLIT_PREFILL_BY_PREFIX, TTFT_PREFIX_HIT));
    EXPECT_EQ_U64(20, ttft_snapshot_split_quantile(s, TTFT_SPLIT_PREFILL_BY_PREFIX, TTFT_PREFIX_HIT, 1.0));
    EXPECT_EQ_U64(0, ttft_snapshot_split_count(s, TTFT_SPLIT_PREFILL_BY_PREFIX, TTFT_PREFIX_MISS));
    EXPECT_EQ_U64(105, ttft_snapshot_stalls_by_cause(s, 1, TTFT_STALL_UNKNOWN));
    EXPECT_EQ_U64(1, ttft_snapshot_stalls_by_cause(s, 1, TTFT_STALL_PREFILL));
    EXPECT_EQ_U64(7000, ttft_snapshot_stall_seconds_by_cause(s, 1, TTFT_STALL_PREFILL));
    EXPECT_EQ_U64(6, ttft_snapshot_stalls_by_cause(s, 0, TTFT_STALL_UNKNOWN));
    EXPECT_EQ_U64(111, ttft_snapshot_stalls_by_cause(s, TTFT_CLASS_ALL, TTFT_STALL_UNKNOWN));
    EXPECT_EQ_U64(0, ttft_snapshot_engine_step_count(s, 0));
    EXPECT_EQ_U64(1, ttft_snapshot_engine_step_count(s, 1));
    EXPECT_EQ_U64(7, ttft_snapshot_engine_step_sum(s, 1));
    /* the slowest lists it spells */
    EXPECT_EQ_U64(1, ttft_snapshot_slowest_count(s, 0, TTFT_SLOWEST_TTFT));
    EXPECT_EQ_U64(0, ttft_snapshot_slowest_count(s, 0, TTFT_SLOWEST_GAP));
    EXPECT_EQ_U64(1, ttft_snapshot_slowest_count(s, TTFT_CLASS_ALL, TTFT_SLOWEST_GAP));
    ttft_slow_request o;
    o.struct_size = sizeof o;
    EXPECT_ERR(TTFT_OK, ttft_snapshot_slowest(s, 1, TTFT_SLOWEST_GAP, 0, &o));
    EXPECT_EQ_U64(90, o.value_ns);
    EXPECT_EQ_U64(4, o.ttft_ns);
    EXPECT_EQ_U64(1150, o.t_end_ns);
    EXPECT_EQ_U64(UINT64_C(1764770000123000000), o.t_end_unix_ns);
    EXPECT_EQ_INT(TTFT_CANCELLED, o.status);
    EXPECT_EQ_INT(TTFT_STALL_ENGINE_IDLE, o.cause);
    EXPECT_STREQ("req-7", o.request_id);
    EXPECT_STREQ("a0a1a2a3a4a5a6a7a8a9aaabacadaeaf", o.trace_id);
    EXPECT_EQ_INT(1, o.class_id);
    EXPECT_ERR(TTFT_OK, ttft_snapshot_slowest(s, 0, TTFT_SLOWEST_TTFT, 0, &o));
    EXPECT_STREQ("", o.request_id);
    EXPECT_STREQ("", o.trace_id);
    /* written before 1.3: the 1.3 SLO fields at the ttft_slo_init
     * defaults, and it re-encodes as version 4 with exactly those */
    expect_slo_13(s, 0);
    long n2 = ttft_snapshot_encode(s, re, sizeof re);
    hb_slo_set = hb_slow_set = 0;
    size_t n4 = hb_build(&h4, V_OK, 5);
    hb_slo_set = hb_slow_set = 1;
    EXPECT_EQ_INT((long)n4, n2);
    EXPECT_TRUE(n2 == (long)n4 && memcmp(re, h4.b, n4) == 0);
  }
  ttft_snapshot_free(s);
  /* as 1.2 wrote it, with 5 causes (no slow_step): the same values; this
   * library re-encodes it with slow_step's two zeros in each class */
  hb_causes = 5;
  n = hb_build(&h, V_OK, 3);
  hb_causes = TTFT_STALL_CAUSE_COUNT;
  s = ttft_snapshot_decode(h.b, n, &err);
  EXPECT_ERR(TTFT_OK, err);
  EXPECT_NOT_NULL(s);
  if (s) {
    expect_hand_built(s);
    EXPECT_EQ_U64(0, ttft_snapshot_stalls_by_cause(s, TTFT_CLASS_ALL, TTFT_STALL_SLOW_STEP));
    hb_slo_set = hb_slow_set = 0;
    size_t n4 = hb_build(&h4, V_OK, 5);
    hb_slo_set = hb_slow_set = 1;
    long n2 = ttft_snapshot_encode(s, re, sizeof re);
    EXPECT_TRUE(n2 == (long)n4 && memcmp(re, h4.b, n4) == 0);
  }
  ttft_snapshot_free(s);
}

/* A slowest entry's 1.3 fields as read back: the "chat" gap entry as
 * version 5 spells it when set, else (and always before version 5) 0,
 * with fluidity 1. */
static void expect_slow_13(const ttft_snapshot *s, int set) {
  ttft_slow_request o;
  memset(&o, 0xAB, sizeof o);
  o.struct_size = sizeof o;
  EXPECT_ERR(TTFT_OK, ttft_snapshot_slowest(s, 1, TTFT_SLOWEST_GAP, 0, &o));
  EXPECT_EQ_U64(set ? 12 : 0, o.deadlines);
  EXPECT_EQ_U64(set ? 3 : 0, o.deadlines_missed);
  EXPECT_TRUE(o.fluidity == (set ? 0.75 : 1.0));
  EXPECT_EQ_U64(set ? 40000000 : 0, o.token_deadline_ns);
  EXPECT_EQ_U64(set ? 307000000 : 0, o.ttft_slo_ns);
  EXPECT_EQ_U64(set ? 50000000 : 0, o.tpot_slo_ns);
  EXPECT_STREQ("req-7", o.request_id);
  memset(&o, 0xAB, sizeof o);
  o.struct_size = sizeof o;
  EXPECT_ERR(TTFT_OK, ttft_snapshot_slowest(s, TTFT_CLASS_ALL, TTFT_SLOWEST_TTFT, 0, &o));
  EXPECT_EQ_U64(0, o.deadlines);
  EXPECT_TRUE(o.fluidity == 1.0);
  EXPECT_EQ_U64(0, o.ttft_slo_ns);
}

/* version 4 (1.3 pre-release): the class SLO's ttft_ns_per_prompt_token,
 * token_deadline_ns and fluid_min; decodes to the values it spells (the
 * class query and the exposition), its slowest entries without the 1.3
 * fields (0, fluidity 1), and re-encodes as version 5 with those zeros */
TEST(hand_built_v4) {
  static hb h, h5;
  static unsigned char re[8192];
  size_t n = hb_build(&h, V_OK, 4);
  int err = 1;
  ttft_snapshot *s = ttft_snapshot_decode(h.b, n, &err);
  EXPECT_ERR(TTFT_OK, err);
  EXPECT_NOT_NULL(s);
  if (s) {
    expect_hand_built(s);
    expect_slo_13(s, 1);
    expect_slow_13(s, 0);
    EXPECT_EQ_U64(1, ttft_snapshot_slowest_count(s, 0, TTFT_SLOWEST_TTFT));
    long n2 = ttft_snapshot_encode(s, re, sizeof re);
    hb_slow_set = 0;
    size_t n5 = hb_build(&h5, V_OK, 5);
    hb_slow_set = 1;
    EXPECT_EQ_INT((long)n5, n2);
    EXPECT_TRUE(n2 == (long)n5 && memcmp(re, h5.b, n5) == 0);
    /* a merge keeps a class's SLO (the gatherer merges decoded segments) */
    ttft_snapshot *m = ttft_snapshot_merge(s, s, &err);
    EXPECT_NOT_NULL(m);
    if (m) expect_slo_13(m, 1);
    ttft_snapshot_free(m);
  }
  ttft_snapshot_free(s);
}

/* version 5 (1.3): each slowest entry's token deadlines, misses, D and the
 * budgets it was judged against; a bit-exact round trip; merges keep
 * them; JSON and the text report show them */
TEST(hand_built_v5) {
  static hb h;
  static unsigned char re[8192];
  size_t n = hb_build(&h, V_OK, 5);
  int err = 1;
  ttft_snapshot *s = ttft_snapshot_decode(h.b, n, &err);
  EXPECT_ERR(TTFT_OK, err);
  EXPECT_NOT_NULL(s);
  if (!s) return;
  expect_hand_built(s);
  expect_slo_13(s, 1);
  expect_slow_13(s, 1);
  long n2 = ttft_snapshot_encode(s, re, sizeof re);
  EXPECT_EQ_INT((long)n, n2);
  EXPECT_TRUE(n2 == (long)n && memcmp(re, h.b, n) == 0);
  ttft_snapshot *m = ttft_snapshot_merge(s, s, &err);
  EXPECT_NOT_NULL(m);
  if (m) expect_slow_13(m, 1);
  ttft_snapshot *m3 = m ? ttft_snapshot_merge(m, s, &err) : NULL;
  EXPECT_NOT_NULL(m3);
  if (m3) expect_slow_13(m3, 1);
  static char text[65536];
  long tl = ttft_snapshot_format(s, TTFT_FORMAT_JSON, text, sizeof text);
  EXPECT_TRUE(tl > 0 && (size_t)tl < sizeof text);
  EXPECT_CONTAINS(text, "\"deadlines\":12,\"deadlines_missed\":3,\"fluidity\":0.75,"
                        "\"token_deadline_ns\":40000000,\"ttft_slo_ns\":307000000,"
                        "\"tpot_slo_ns\":50000000}");
  tl = ttft_snapshot_format(s, TTFT_FORMAT_TEXT, text, sizeof text);
  EXPECT_TRUE(tl > 0 && (size_t)tl < sizeof text);
  EXPECT_CONTAINS(text, "3/12 75.0%");
  ttft_snapshot_free(m3);
  ttft_snapshot_free(m);
  ttft_snapshot_free(s);
}

/* version 1 decodes to the same data (no views), with the 1.1 defaults for
 * what it lacks, and re-encodes as version 3 */
TEST(hand_built_v1) {
  static hb h1;
  static unsigned char re[8192];
  size_t n1 = hb_build(&h1, V_OK, 1);
  int err = 1;
  ttft_snapshot *s1 = ttft_snapshot_decode(h1.b, n1, &err);
  EXPECT_ERR(TTFT_OK, err);
  EXPECT_NOT_NULL(s1);
  if (s1) {
    expect_hand_built(s1);
    EXPECT_EQ_U64(0, ttft_snapshot_status_count(s1, TTFT_CLASS_ALL, TTFT_COMPLETED, TTFT_METRIC_E2E));
    long n2 = ttft_snapshot_encode(s1, re, sizeof re);
    EXPECT_TRUE(n2 > 16 && re[4] == 5);
    EXPECT_EQ_U64(0x03, re[5]); /* summaries as written; native histograms: the default */
    ttft_snapshot *s2 = n2 > 0 ? ttft_snapshot_decode(re, (size_t)n2, &err) : NULL;
    EXPECT_NOT_NULL(s2);
    if (s2) expect_hand_built(s2);
    ttft_snapshot_free(s2);
  }
  ttft_snapshot_free(s1);
}

static const char *const variant_names[V_COUNT] = {
  "ok", "version", "flag", "reserved", "utf8", "nul", "long label", "namespace",
  "label name", "bands", "class0", "dup class", "no class", "many classes", "idx repeat",
  "idx range", "zero count", "count mismatch", "min", "max", "overlong", "65 bits",
  "trailing", "prom long", "labels many", "nnz huge", "class char", "gauges many",
  "time overflow", "count overflow", "prom order", "truncated hist", "counter overflow",
  "schema", "status lists", "view max", "view count overflow", "prefix bands many",
  "prefill bands many", "cause lists", "cause count overflow", "step lists", "step max",
  "slo extra lists", "fluid_min above 1", "fluid_min NaN", "fluid_min negative",
  "slowest extra lists", "slowest missed above deadlines"};

/* each way of breaking one field of the version's encoding is rejected */
static void expect_variants_rejected(int version) {
  static hb h;
  for (int v = 1; v < V_COUNT; v++) {
    if (version == 1 && v >= V_FIRST_V2_ONLY) continue;
    if (version < 3 && v >= V_FIRST_V3_ONLY) continue;
    if (version < 4 && v >= V_FIRST_V4_ONLY) continue;
    if (version < 5 && v >= V_FIRST_V5_ONLY) continue;
    size_t n = hb_build(&h, v, version);
    int err = 0;
    ttft_snapshot *s = ttft_snapshot_decode(h.b, n, &err);
    if (s || err != TTFT_ECORRUPT)
      fprintf(stderr, "version %d variant \"%s\" was not rejected\n", version, variant_names[v]);
    EXPECT_NULL(s);
    EXPECT_ERR(TTFT_ECORRUPT, err);
    ttft_snapshot_free(s);
  }
}

TEST(hand_built_v1_broken_rejected) { expect_variants_rejected(1); }
TEST(hand_built_v2_broken_rejected) { expect_variants_rejected(2); }
TEST(hand_built_v3_broken_rejected) { expect_variants_rejected(3); }
TEST(hand_built_v4_broken_rejected) { expect_variants_rejected(4); }
TEST(hand_built_v5_broken_rejected) { expect_variants_rejected(5); }

/* -------------------------------------------------------------- base64
 * A small recorded workload and its base64 text (need characters). */
typedef struct b64 {
  coded w;
  long need;
  char *t;
} b64;

static int b64_open(b64 *x) {
  x->t = NULL;
  x->need = 0;
  if (!coded_open(&x->w, 3, 200)) return 0;
  x->need = ttft_snapshot_encode_base64(x->w.s, NULL, 0);
  EXPECT_GT_INT(x->need, 0);
  if (x->need <= 0) return 0;
  x->t = malloc((size_t)x->need + 3);
  EXPECT_NOT_NULL(x->t);
  if (!x->t) return 0;
  EXPECT_EQ_INT(x->need, ttft_snapshot_encode_base64(x->w.s, x->t, (size_t)x->need + 1));
  return 1;
}

static void b64_close(b64 *x) {
  free(x->t);
  coded_close(&x->w);
}

/* base64 of the encoding, in the base64 alphabet, decodes to the same
 * snapshot, with or without the newline of a log line */
TEST(base64_round_trip) {
  b64 x;
  if (b64_open(&x)) {
    ttft_snapshot *s = x.w.s;
    long need = x.need;
    char *t = x.t;
    long bin = ttft_snapshot_encode(s, NULL, 0);
    EXPECT_EQ_INT((bin + 2) / 3 * 4, need);
    EXPECT_EQ_U64((uint64_t)need, strlen(t));
    EXPECT_TRUE(strncmp(t, "VFRGU", 5) == 0); /* "TTFS" */
    size_t bad = strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=");
    EXPECT_EQ_U64((uint64_t)need, bad);
    int err = 1;
    ttft_snapshot *d = ttft_snapshot_decode_base64(t, (size_t)need, &err);
    EXPECT_ERR(TTFT_OK, err);
    EXPECT_NOT_NULL(d);
    if (d) expect_same(s, d);
    ttft_snapshot_free(d);

    /* a log line with its newline */
    t[need] = '\n';
    t[need + 1] = 0;
    d = ttft_snapshot_decode_base64(t, (size_t)need + 1, &err);
    EXPECT_NOT_NULL(d);
    ttft_snapshot_free(d);
    t[need] = 0;
  }
  b64_close(&x);
}

/* truncation: snprintf rules, NUL-terminated */
TEST(base64_truncation) {
  b64 x;
  if (b64_open(&x)) {
    char small[17];
    memset(small, 'Z', sizeof small);
    EXPECT_EQ_INT(x.need, ttft_snapshot_encode_base64(x.w.s, small, 9));
    EXPECT_EQ_U64(8, strlen(small));
    EXPECT_TRUE(strncmp(small, x.t, 8) == 0);
    EXPECT_TRUE(small[9] == 'Z');
  }
  b64_close(&x);
}

/* malformed text and bad arguments are refused */
TEST(base64_malformed) {
  b64 x;
  if (b64_open(&x)) {
    ttft_snapshot *s = x.w.s;
    long need = x.need;
    const char *t = x.t;
    int err;
    ttft_snapshot *d;
    char *m = malloc((size_t)need + 1);
    struct {
      size_t at;
      char c;
    } edits[] = {{0, '*'}, {10, '='}, {20, ' '}, {30, '\n'}, {(size_t)need / 2, '-'}};
    for (size_t k = 0; m && k < sizeof edits / sizeof edits[0]; k++) {
      memcpy(m, t, (size_t)need + 1);
      m[edits[k].at] = edits[k].c;
      err = 0;
      d = ttft_snapshot_decode_base64(m, (size_t)need, &err);
      EXPECT_NULL(d);
      EXPECT_ERR(TTFT_ECORRUPT, err);
      ttft_snapshot_free(d);
    }
    free(m);
    err = 0;
    EXPECT_NULL(ttft_snapshot_decode_base64(t, (size_t)need - 1, &err)); /* not a multiple of 4 */
    EXPECT_ERR(TTFT_ECORRUPT, err);
    EXPECT_NULL(ttft_snapshot_decode_base64(t, (size_t)need - 4, &err)); /* whole quantum gone */
    EXPECT_ERR(TTFT_ECORRUPT, err);
    EXPECT_NULL(ttft_snapshot_decode_base64("", 0, &err));
    EXPECT_ERR(TTFT_ECORRUPT, err);
    EXPECT_NULL(ttft_snapshot_decode_base64(NULL, 4, &err));
    EXPECT_ERR(TTFT_EINVAL, err);
    EXPECT_NULL(ttft_snapshot_decode_base64("QUI=", 4, &err)); /* "AB": valid base64, not a snapshot */
    EXPECT_ERR(TTFT_ECORRUPT, err);
    EXPECT_NULL(ttft_snapshot_decode_base64("QUJ=", 4, &err)); /* stray bits under the padding */
    EXPECT_ERR(TTFT_ECORRUPT, err);
    EXPECT_NULL(ttft_snapshot_decode_base64("Q===", 4, &err));
    EXPECT_ERR(TTFT_ECORRUPT, err);
    EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_encode_base64(NULL, NULL, 0));
    EXPECT_ERR(TTFT_EINVAL, ttft_snapshot_encode_base64(s, NULL, 5));
  }
  b64_close(&x);
}

/* ------------------------------------------------- a 1.0-era encoding
 * tests/fixtures/snapshot-1.0.ttfs was written by libttft 1.0.0 (encoding
 * version 1, 11 metrics, 13 counters; see fixtures/fixture_v1.h). It must
 * decode, and answer every query 1.0 could answer exactly as a snapshot of
 * the same workload recorded by this library does. */
static unsigned char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  unsigned char *b = NULL;
  size_t cap = 0, len = 0;
  for (;;) {
    if (len == cap) {
      unsigned char *nb = realloc(b, cap ? 2 * cap : 65536);
      if (!nb) break;
      b = nb;
      cap = cap ? 2 * cap : 65536;
    }
    size_t k = fread(b + len, 1, cap - len, f);
    len += k;
    if (k == 0) break;
  }
  fclose(f);
  *n = len;
  return b;
}

static void fixture_path(char *out, size_t cap, const char *name) {
  /* __FILE__ is this file's path as the build gave it (absolute with CMake) */
  const char *slash = strrchr(__FILE__, '/');
  int dir = slash ? (int)(slash - __FILE__) : 0;
  snprintf(out, cap, "%.*s%sfixtures/%s", dir, __FILE__, slash ? "/" : "", name);
}

/* d: the fixture decoded; s: a snapshot of the same workload recorded now */
typedef struct v1 {
  unsigned char *b;
  size_t n;
  ttft_snapshot *d, *s;
  ttft_registry *r;
} v1;

static int v1_open(v1 *x) {
  memset(x, 0, sizeof *x);
  char path[4096];
  fixture_path(path, sizeof path, "snapshot-1.0.ttfs");
  x->b = read_file(path, &x->n);
  if (!x->b) fprintf(stderr, "cannot read %s\n", path);
  EXPECT_NOT_NULL(x->b);
  if (!x->b) return 0;
  EXPECT_TRUE(x->n > 16 && x->b[4] == 1); /* encoding version 1 */
  int err = 1;
  x->d = ttft_snapshot_decode(x->b, x->n, &err);
  EXPECT_ERR(TTFT_OK, err);
  EXPECT_NOT_NULL(x->d);
  x->r = fixture_v1_registry();
  EXPECT_NOT_NULL(x->r);
  if (!x->d || !x->r) return 0;
  fixture_v1_record(x->r);
  x->s = ttft_snapshot_take(x->r);
  EXPECT_NOT_NULL(x->s);
  return x->s != NULL;
}

static void v1_close(v1 *x) {
  ttft_snapshot_free(x->s);
  ttft_snapshot_free(x->d);
  ttft_registry_free(x->r);
  free(x->b);
}

/* per class: name, budgets, the 13 counters and 11 metrics of 1.0, attainment */
TEST(fixture_v1_classes) {
  v1 x;
  if (v1_open(&x)) {
    ttft_snapshot *s = x.s, *d = x.d;
    EXPECT_EQ_INT(3, ttft_snapshot_classes(d));
    EXPECT_EQ_INT(ttft_snapshot_classes(s), ttft_snapshot_classes(d));
    EXPECT_TRUE(ttft_snapshot_count(d, TTFT_METRIC_ITL) > 30000); /* there is data in it */
    for (int c = TTFT_CLASS_ALL; c < ttft_snapshot_classes(d); c++) {
      if (c >= 0) {
        EXPECT_STREQ(ttft_snapshot_class_name(s, c), ttft_snapshot_class_name(d, c));
        ttft_slo a, y;
        a.struct_size = y.struct_size = sizeof a;
        EXPECT_ERR(TTFT_OK, ttft_snapshot_class_slo(s, c, &a));
        EXPECT_ERR(TTFT_OK, ttft_snapshot_class_slo(d, c, &y));
        EXPECT_EQ_U64(a.ttft_ns, y.ttft_ns);
        EXPECT_EQ_U64(a.tpot_ns, y.tpot_ns);
        EXPECT_EQ_U64(a.e2e_ns, y.e2e_ns);
        EXPECT_EQ_U64(a.stall_threshold_ns, y.stall_threshold_ns);
      }
      for (int k = 0; k <= TTFT_COUNTER_NO_TPOT; k++) /* the 13 counters of 1.0 */
        EXPECT_EQ_U64(ttft_snapshot_class_counter(s, c, (ttft_counter)k),
                      ttft_snapshot_class_counter(d, c, (ttft_counter)k));
      /* 1.0 knew no causes: every stall of the fixture decodes as unknown */
      EXPECT_EQ_U64(ttft_snapshot_class_counter(d, c, TTFT_COUNTER_STALLS),
                    ttft_snapshot_stalls_by_cause(d, c, TTFT_STALL_UNKNOWN));
      for (int k = 1; k < TTFT_STALL_CAUSE_COUNT; k++)
        EXPECT_EQ_U64(0, ttft_snapshot_stalls_by_cause(d, c, (ttft_stall_cause)k));
      EXPECT_EQ_U64(0, ttft_snapshot_stall_seconds_by_cause(d, c, TTFT_STALL_UNKNOWN));
      for (int m = 0; m <= TTFT_METRIC_ABANDONED_WAIT; m++) { /* the 11 metrics of 1.0 */
        EXPECT_EQ_U64(ttft_snapshot_class_count(s, c, (ttft_metric)m),
                      ttft_snapshot_class_count(d, c, (ttft_metric)m));
        EXPECT_EQ_U64(ttft_snapshot_class_sum(s, c, (ttft_metric)m),
                      ttft_snapshot_class_sum(d, c, (ttft_metric)m));
        for (size_t q = 0; q < NQ; q++)
          EXPECT_EQ_U64(ttft_snapshot_class_quantile(s, c, (ttft_metric)m, QS[q]),
                        ttft_snapshot_class_quantile(d, c, (ttft_metric)m, QS[q]));
      }
      /* 1.0 judged every ended stream: judged = ended, and the attainment
       * that 1.0 reported (1.2 does not judge streams cancelled in time) */
      uint64_t ended = ttft_snapshot_class_counter(s, c, TTFT_COUNTER_COMPLETED) +
                       ttft_snapshot_class_counter(s, c, TTFT_COUNTER_CANCELLED) +
                       ttft_snapshot_class_counter(s, c, TTFT_COUNTER_ERRORS);
      EXPECT_EQ_U64(ended, ttft_snapshot_class_counter(d, c, TTFT_COUNTER_SLO_JUDGED));
      if (ended)
        EXPECT_EQ_DBL((double)ttft_snapshot_class_counter(s, c, TTFT_COUNTER_SLO_MET) / (double)ended,
                      ttft_snapshot_attainment(d, c));
    }
  }
  v1_close(&x);
}

/* splits, band edges, gauges and labels */
TEST(fixture_v1_splits_and_labels) {
  v1 x;
  if (v1_open(&x)) {
    ttft_snapshot *s = x.s, *d = x.d;
    for (unsigned i = 0; i < 2; i++)
      EXPECT_EQ_U64(ttft_snapshot_split_count(s, TTFT_SPLIT_PREFIX_CACHE, i),
                    ttft_snapshot_split_count(d, TTFT_SPLIT_PREFIX_CACHE, i));
    /* 1.0 knew hit and miss only: they decode, the 1.2 bands stay empty */
    EXPECT_GT_U64(ttft_snapshot_split_count(d, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_HIT) +
                      ttft_snapshot_split_count(d, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_MISS), 0);
    EXPECT_EQ_U64(0, ttft_snapshot_split_count(d, TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_PARTIAL));
    for (unsigned i = 0; i < TTFT_PREFIX_BAND_COUNT_; i++)
      EXPECT_EQ_U64(0, ttft_snapshot_split_count(d, TTFT_SPLIT_PREFILL_BY_PREFIX, i));
    EXPECT_EQ_U64(4, ttft_snapshot_bands(d));
    for (unsigned i = 0; i < 4; i++) {
      uint32_t lo = 0, hi = 0;
      EXPECT_ERR(TTFT_OK, ttft_snapshot_band(d, i, &lo, &hi));
      EXPECT_EQ_U64(i ? (i == 1 ? 256 : i == 2 ? 4096 : 32768) : 0, lo);
      EXPECT_EQ_U64(ttft_snapshot_split_count(s, TTFT_SPLIT_PROMPT_BAND, i),
                    ttft_snapshot_split_count(d, TTFT_SPLIT_PROMPT_BAND, i));
      EXPECT_EQ_U64(ttft_snapshot_split_quantile(s, TTFT_SPLIT_PROMPT_BAND, i, 0.9),
                    ttft_snapshot_split_quantile(d, TTFT_SPLIT_PROMPT_BAND, i, 0.9));
    }
    EXPECT_EQ_U64(3, ttft_snapshot_gauge(d, TTFT_GAUGE_INFLIGHT));
    static const char *keys[] = {"start_point", "token_point", "model", "namespace"};
    for (int i = 0; i < 4; i++)
      EXPECT_STREQ(ttft_snapshot_label(s, keys[i]), ttft_snapshot_label(d, keys[i]));
    EXPECT_STREQ("client_send", ttft_snapshot_label(d, "start_point"));
  }
  v1_close(&x);
}

/* configuration that only the expositions show */
TEST(fixture_v1_exposition) {
  v1 x;
  if (v1_open(&x)) {
    static char text[1 << 20];
    long tl = ttft_snapshot_format(x.d, TTFT_FORMAT_PROMETHEUS, text, sizeof text);
    EXPECT_TRUE(tl > 0 && (size_t)tl < sizeof text);
    EXPECT_CONTAINS(text, "gen_ai_server_time_to_first_token_seconds_bucket{class=\"chat\",model=\"llama-\xc3\xa9-8b\","
                          "region=\"eu-west-1\",replica=\"r\\\\7 \\\"q\\\"\",le=\"0.05\"}");
    EXPECT_CONTAINS(text, "svc_stalls_total{");
    EXPECT_CONTAINS(text, "svc_time_to_first_token_quantiles_seconds{"); /* prom_summaries */
    EXPECT_CONTAINS(text, "svc_stall_budget_seconds{class=\"default\"");
  }
  v1_close(&x);
}

/* ------------------------------------------------------ failing allocator */
static long g_alloc_budget;
static void *budget_alloc(void *ctx, size_t n) {
  (void)ctx;
  if (g_alloc_budget-- <= 0) return NULL;
  return malloc(n);
}
static void budget_free(void *ctx, void *p) {
  (void)ctx;
  free(p);
}

/* decode under a failing allocator returns TTFT_ENOMEM, until it succeeds */
TEST(decode_enomem) {
  coded w;
  if (!coded_open(&w, 9, 50)) {
    coded_close(&w);
    return;
  }
  ttft_snapshot *s = w.s;
  const unsigned char *b = w.b;
  size_t n = w.n;
  long text_len = ttft_snapshot_encode_base64(s, NULL, 0);
  char *text = malloc((size_t)text_len + 1);
  ttft_snapshot_encode_base64(s, text, (size_t)text_len + 1);
  ttft_allocator a = {budget_alloc, budget_free, NULL};
  int saw_enomem = 0, saw_ok = 0;
  /* until the decode succeeds: every allocation of it fails once */
  for (long budget = 0; budget < 256 && !saw_ok; budget++) {
    g_alloc_budget = budget;
    ttft_set_allocator(&a);
    int err = 0;
    ttft_snapshot *d = ttft_snapshot_decode(b, n, &err);
    g_alloc_budget = budget;
    int err64 = 0;
    ttft_snapshot *d64 = ttft_snapshot_decode_base64(text, (size_t)text_len, &err64);
    ttft_set_allocator(NULL);
    if (!d) {
      saw_enomem += err == TTFT_ENOMEM;
      EXPECT_ERR(TTFT_ENOMEM, err);
    } else {
      saw_ok++;
      expect_same(s, d);
    }
    if (!d64) EXPECT_ERR(TTFT_ENOMEM, err64);
    ttft_snapshot_free(d);
    ttft_snapshot_free(d64);
  }
  EXPECT_TRUE(saw_enomem > 0);
  EXPECT_TRUE(saw_ok > 0);
  free(text);
  coded_close(&w);
}

TU_MAIN()
