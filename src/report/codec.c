/* codec.c — snapshots as bytes: a compact, versioned, checksummed binary
 * form and its one-line base64 text form. docs/encoding.md specifies the
 * layout byte by byte.
 *
 * Decoding treats its input as hostile. It runs twice over the bytes: a
 * first pass validates everything (structure, bounds, checksum) without
 * allocating, so a bad input costs no memory; a second pass fills a
 * snapshot sized from what the first pass counted. */
#include <stdatomic.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "report/format.h"

#define CODEC_MAGIC "TTFS"
#define CODEC_VERSION 5u        /* written (libttft 1.3); 1 (1.0), 2 (1.1),
                                   3 (1.2) and 4 (1.3 pre-release) are
                                   still read                              */
#define CODEC_HEADER 12u        /* magic, version, flags, reserved, length */
#define CODEC_TRAILER 4u        /* CRC-32C */
#define CODEC_FLAG_SUMMARIES 1u /* prom_summaries                           */
#define CODEC_FLAG_NATIVE 2u    /* native_histograms (version 2)            */
#define CODEC_FLAG_IDLE 4u      /* export_idle_classes (version 2)          */
#define CODEC_FLAGS_V1 CODEC_FLAG_SUMMARIES
#define CODEC_FLAGS_V2 (CODEC_FLAG_SUMMARIES | CODEC_FLAG_NATIVE | CODEC_FLAG_IDLE)
#define CODEC_FLAGS_V3 CODEC_FLAGS_V2
#define CODEC_FLAGS_V4 CODEC_FLAGS_V3
#define CODEC_FLAGS_V5 CODEC_FLAGS_V4
#define CODEC_SLO_EXTRA 3u      /* version 4: the 1.3 ttft_slo fields       */
#define CODEC_SLOW_EXTRA 5u     /* version 5: a slowest entry's 1.3 fields  */
#define CODEC_MAX_CLASSES TTFT__MAX_CLASSES
#define CODEC_MAX_LIST 64u      /* gauges, counters, metrics per list */
#define CODEC_MAX_RANKINGS 8u   /* slowest lists per class (version 3)   */
#define CODEC_MAX_STATUS 8u     /* status-view lists per class         */
#define CODEC_MAX_STEP 8u       /* engine-step histograms (version 3)  */
#define CODEC_SCHEMA_BIAS 4     /* native_schema + 4 on the wire: 0..12 */
#define CODEC_MAX_LEN UINT32_MAX
/* What a version 1 encoding (libttft 1.0) leaves out: the 1.1 defaults. */
#define CODEC_V1_NATIVE_HISTOGRAMS 1
#define CODEC_V1_NATIVE_SCHEMA 7

/* ------------------------------------------------------------- CRC-32C
 * Castagnoli polynomial, reflected (0x82F63B78), init and final xor all
 * ones: check value of "123456789" is 0xE3069283. A byte table (1 KiB):
 * one lookup per byte — ttft-report and the fuzzers checksum every
 * snapshot they read, and the table is a tenth of a snapshot's size. */
static const uint32_t crc32c_table[256] = {
  0x00000000, 0xf26b8303, 0xe13b70f7, 0x1350f3f4, 0xc79a971f, 0x35f1141c, 0x26a1e7e8, 0xd4ca64eb,
  0x8ad958cf, 0x78b2dbcc, 0x6be22838, 0x9989ab3b, 0x4d43cfd0, 0xbf284cd3, 0xac78bf27, 0x5e133c24,
  0x105ec76f, 0xe235446c, 0xf165b798, 0x030e349b, 0xd7c45070, 0x25afd373, 0x36ff2087, 0xc494a384,
  0x9a879fa0, 0x68ec1ca3, 0x7bbcef57, 0x89d76c54, 0x5d1d08bf, 0xaf768bbc, 0xbc267848, 0x4e4dfb4b,
  0x20bd8ede, 0xd2d60ddd, 0xc186fe29, 0x33ed7d2a, 0xe72719c1, 0x154c9ac2, 0x061c6936, 0xf477ea35,
  0xaa64d611, 0x580f5512, 0x4b5fa6e6, 0xb93425e5, 0x6dfe410e, 0x9f95c20d, 0x8cc531f9, 0x7eaeb2fa,
  0x30e349b1, 0xc288cab2, 0xd1d83946, 0x23b3ba45, 0xf779deae, 0x05125dad, 0x1642ae59, 0xe4292d5a,
  0xba3a117e, 0x4851927d, 0x5b016189, 0xa96ae28a, 0x7da08661, 0x8fcb0562, 0x9c9bf696, 0x6ef07595,
  0x417b1dbc, 0xb3109ebf, 0xa0406d4b, 0x522bee48, 0x86e18aa3, 0x748a09a0, 0x67dafa54, 0x95b17957,
  0xcba24573, 0x39c9c670, 0x2a993584, 0xd8f2b687, 0x0c38d26c, 0xfe53516f, 0xed03a29b, 0x1f682198,
  0x5125dad3, 0xa34e59d0, 0xb01eaa24, 0x42752927, 0x96bf4dcc, 0x64d4cecf, 0x77843d3b, 0x85efbe38,
  0xdbfc821c, 0x2997011f, 0x3ac7f2eb, 0xc8ac71e8, 0x1c661503, 0xee0d9600, 0xfd5d65f4, 0x0f36e6f7,
  0x61c69362, 0x93ad1061, 0x80fde395, 0x72966096, 0xa65c047d, 0x5437877e, 0x4767748a, 0xb50cf789,
  0xeb1fcbad, 0x197448ae, 0x0a24bb5a, 0xf84f3859, 0x2c855cb2, 0xdeeedfb1, 0xcdbe2c45, 0x3fd5af46,
  0x7198540d, 0x83f3d70e, 0x90a324fa, 0x62c8a7f9, 0xb602c312, 0x44694011, 0x5739b3e5, 0xa55230e6,
  0xfb410cc2, 0x092a8fc1, 0x1a7a7c35, 0xe811ff36, 0x3cdb9bdd, 0xceb018de, 0xdde0eb2a, 0x2f8b6829,
  0x82f63b78, 0x709db87b, 0x63cd4b8f, 0x91a6c88c, 0x456cac67, 0xb7072f64, 0xa457dc90, 0x563c5f93,
  0x082f63b7, 0xfa44e0b4, 0xe9141340, 0x1b7f9043, 0xcfb5f4a8, 0x3dde77ab, 0x2e8e845f, 0xdce5075c,
  0x92a8fc17, 0x60c37f14, 0x73938ce0, 0x81f80fe3, 0x55326b08, 0xa759e80b, 0xb4091bff, 0x466298fc,
  0x1871a4d8, 0xea1a27db, 0xf94ad42f, 0x0b21572c, 0xdfeb33c7, 0x2d80b0c4, 0x3ed04330, 0xccbbc033,
  0xa24bb5a6, 0x502036a5, 0x4370c551, 0xb11b4652, 0x65d122b9, 0x97baa1ba, 0x84ea524e, 0x7681d14d,
  0x2892ed69, 0xdaf96e6a, 0xc9a99d9e, 0x3bc21e9d, 0xef087a76, 0x1d63f975, 0x0e330a81, 0xfc588982,
  0xb21572c9, 0x407ef1ca, 0x532e023e, 0xa145813d, 0x758fe5d6, 0x87e466d5, 0x94b49521, 0x66df1622,
  0x38cc2a06, 0xcaa7a905, 0xd9f75af1, 0x2b9cd9f2, 0xff56bd19, 0x0d3d3e1a, 0x1e6dcdee, 0xec064eed,
  0xc38d26c4, 0x31e6a5c7, 0x22b65633, 0xd0ddd530, 0x0417b1db, 0xf67c32d8, 0xe52cc12c, 0x1747422f,
  0x49547e0b, 0xbb3ffd08, 0xa86f0efc, 0x5a048dff, 0x8ecee914, 0x7ca56a17, 0x6ff599e3, 0x9d9e1ae0,
  0xd3d3e1ab, 0x21b862a8, 0x32e8915c, 0xc083125f, 0x144976b4, 0xe622f5b7, 0xf5720643, 0x07198540,
  0x590ab964, 0xab613a67, 0xb831c993, 0x4a5a4a90, 0x9e902e7b, 0x6cfbad78, 0x7fab5e8c, 0x8dc0dd8f,
  0xe330a81a, 0x115b2b19, 0x020bd8ed, 0xf0605bee, 0x24aa3f05, 0xd6c1bc06, 0xc5914ff2, 0x37faccf1,
  0x69e9f0d5, 0x9b8273d6, 0x88d28022, 0x7ab90321, 0xae7367ca, 0x5c18e4c9, 0x4f48173d, 0xbd23943e,
  0xf36e6f75, 0x0105ec76, 0x12551f82, 0xe03e9c81, 0x34f4f86a, 0xc69f7b69, 0xd5cf889d, 0x27a40b9e,
  0x79b737ba, 0x8bdcb4b9, 0x988c474d, 0x6ae7c44e, 0xbe2da0a5, 0x4c4623a6, 0x5f16d052, 0xad7d5351,
};

static uint32_t crc32c_sw(uint32_t c, const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) c = (c >> 8) ^ crc32c_table[(c ^ p[i]) & 0xFFu];
  return c;
}

/* x86-64 with SSE4.2 computes the same CRC-32C 8 bytes per instruction: a
 * gatherer decodes every process's segment on each scrape (64 segments of
 * ~40 KB: the byte table alone cost ~3 ms of the 50 ms budget). Chosen
 * once at run time; the result is bit-identical (test_codec pins the
 * check value and the encodings). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t c, const unsigned char *p,
                                                            size_t n) {
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    memcpy(&w, p, 8); /* x86 is little-endian: the reflected CRC's byte order */
    c64 = __builtin_ia32_crc32di(c64, w);
  }
  c = (uint32_t)c64;
  for (; n; n--, p++) c = __builtin_ia32_crc32qi(c, *p);
  return c;
}
static uint32_t crc32c_run(uint32_t c, const unsigned char *p, size_t n) {
  /* relaxed: a cache of a fact that never changes; racing first calls
   * both compute the same answer */
  static _Atomic int have = -1;
  int h = atomic_load_explicit(&have, memory_order_relaxed);
  if (h < 0) {
    __builtin_cpu_init();
    h = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    atomic_store_explicit(&have, h, memory_order_relaxed);
  }
  return h ? crc32c_hw(c, p, n) : crc32c_sw(c, p, n);
}
#else
#define crc32c_run crc32c_sw
#endif

static uint32_t crc32c(const unsigned char *p, size_t n) {
  return crc32c_run(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
}

static void le32_put(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
  p[2] = (unsigned char)(v >> 16);
  p[3] = (unsigned char)(v >> 24);
}

static uint32_t le32_get(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ------------------------------------------------------------- writer
 * snprintf rules: counts every byte, stores those that fit. */
typedef struct wr {
  unsigned char *buf;
  size_t cap, len;
} wr;

static void put_byte(wr *w, unsigned v) {
  if (w->len < w->cap) w->buf[w->len] = (unsigned char)v;
  w->len++;
}

static void put_bytes(wr *w, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) put_byte(w, b[i]);
}

/* unsigned LEB128, shortest form */
static void put_var(wr *w, uint64_t v) {
  while (v >= 0x80) {
    put_byte(w, (unsigned)(v & 0x7F) | 0x80u);
    v >>= 7;
  }
  put_byte(w, (unsigned)v);
}

static void put_str(wr *w, const char *s, size_t field) {
  const char *nul = memchr(s, '\0', field);
  size_t n = nul ? (size_t)(nul - s) : 0; /* an unterminated field is a bug: write "" */
  put_var(w, n);
  put_bytes(w, s, n);
}

/* min/max as the decoder requires them: inside the first and last
 * populated buckets (what ttft__shist_fix guarantees for taken snapshots). */
static void hist_bounds(const ttft__shist *h, uint32_t first, uint32_t last,
                        uint64_t *min, uint64_t *max) {
  uint64_t lo = ttft__bucket_lo(first), hi = ttft__bucket_hi(first);
  *min = h->min < lo ? lo : h->min > hi ? hi : h->min;
  lo = ttft__bucket_lo(last);
  hi = ttft__bucket_hi(last);
  *max = h->max < lo ? lo : h->max > hi ? hi : h->max;
  if (*max < *min) *max = *min;
}

static void put_hist(wr *w, const ttft__shist *h) {
  uint32_t nnz = 0, first = 0, last = 0;
  uint64_t count = 0;
  uint32_t hi = ttft__shist_hi(h);
  for (uint32_t i = ttft__shist_next(h, 0); i < hi; i = ttft__shist_next(h, i + 1)) {
    uint64_t c = ttft__shist_at(h, i);
    if (!c) continue;
    if (!nnz) first = i;
    last = i;
    nnz++;
    count += c;
  }
  put_var(w, nnz);
  if (!nnz) return;
  uint32_t prev = 0;
  for (uint32_t i = first; i <= last; i = ttft__shist_next(h, i + 1)) {
    uint64_t c = ttft__shist_at(h, i);
    if (!c) continue;
    put_var(w, i - prev);
    put_var(w, c);
    prev = i;
  }
  uint64_t min, max;
  hist_bounds(h, first, last, &min, &max);
  put_var(w, count);
  put_var(w, h->sum);
  put_var(w, h->sum_hi); /* version 3: the sum's high word (128-bit sums) */
  put_var(w, min);
  put_var(w, max - min);
}

/* strictly ascending values: first, then differences (each >= 1) */
static void put_ascending(wr *w, const uint64_t *v, uint32_t n) {
  put_var(w, n);
  for (uint32_t i = 0; i < n; i++) put_var(w, i ? v[i] - v[i - 1] : v[0]);
}

/* version 3: the slowest lists of every class (docs/encoding.md) */
static void put_slowest(wr *w, const ttft_snapshot *s) {
  uint32_t k = s->slowest_k > TTFT_MAX_SLOWEST_K ? TTFT_MAX_SLOWEST_K : s->slowest_k;
  put_var(w, k);
  put_var(w, TTFT_SLOWEST_COUNT_);
  for (uint32_t c = 0; c < s->nclasses; c++)
    for (unsigned by = 0; by < TTFT_SLOWEST_COUNT_; by++) {
      uint32_t n = s->cls[c].nslow[by] < k ? s->cls[c].nslow[by] : k;
      put_var(w, n);
      for (uint32_t i = 0; i < n; i++) {
        const ttft__slow *e = &s->cls[c].slow[by][i];
        put_var(w, e->ttft);
        put_var(w, e->max_gap);
        put_var(w, e->t_begin);
        put_var(w, e->t_end >= e->t_begin ? e->t_end - e->t_begin : 0);
        put_var(w, e->tokens);
        put_var(w, e->unix_end);
        put_byte(w, e->status);
        put_byte(w, e->cause);
        put_byte(w, e->has_trace ? 1u : 0u);
        if (e->has_trace) put_bytes(w, e->trace, sizeof e->trace);
        put_str(w, e->id, sizeof e->id);
        /* version 5: token deadlines judged and missed, D, the budgets it
         * was judged against; behind a count so the list can grow */
        put_var(w, CODEC_SLOW_EXTRA);
        put_var(w, e->dl);
        put_var(w, e->dl_missed < e->dl ? e->dl_missed : e->dl);
        put_var(w, e->dl_ns);
        put_var(w, e->ttft_slo);
        put_var(w, e->tpot_slo);
      }
    }
}

static void encode_body(const ttft_snapshot *s, wr *w) {
  put_var(w, s->registry_id);
  put_var(w, s->t_start_ns);
  put_var(w, s->t_end_ns >= s->t_start_ns ? s->t_end_ns - s->t_start_ns : 0);
  put_var(w, s->stall_threshold_ns);
  put_str(w, s->start_point, sizeof s->start_point);
  put_str(w, s->token_point, sizeof s->token_point);
  put_str(w, s->model, sizeof s->model);
  put_str(w, s->ns, sizeof s->ns);
  int schema = s->native_schema;
  if (schema < -CODEC_SCHEMA_BIAS || schema > 8) schema = CODEC_V1_NATIVE_SCHEMA; /* not a schema */
  put_var(w, (uint64_t)(schema + CODEC_SCHEMA_BIAS));

  put_var(w, TTFT_GAUGE_COUNT_);
  for (unsigned g = 0; g < TTFT_GAUGE_COUNT_; g++) put_var(w, s->gauge[g]);

  uint32_t nl = s->n_const_labels > TTFT_MAX_CONST_LABELS ? TTFT_MAX_CONST_LABELS : s->n_const_labels;
  put_var(w, nl);
  for (uint32_t i = 0; i < nl; i++) {
    put_str(w, s->const_name[i], sizeof s->const_name[i]);
    put_str(w, s->const_value[i], sizeof s->const_value[i]);
  }

  uint64_t edges[TTFT_MAX_BANDS - 1];
  uint32_t ne = s->n_band_edges > TTFT_MAX_BANDS - 1 ? TTFT_MAX_BANDS - 1 : s->n_band_edges;
  for (uint32_t i = 0; i < ne; i++) edges[i] = s->band_edges[i];
  put_ascending(w, edges, ne);

  put_var(w, TTFT_METRIC_COUNT_);
  for (unsigned m = 0; m < TTFT_METRIC_COUNT_; m++) {
    uint32_t nb = s->prom_n_buckets[m] > TTFT_MAX_PROM_BUCKETS ? TTFT_MAX_PROM_BUCKETS
                                                               : s->prom_n_buckets[m];
    put_ascending(w, s->prom_buckets[m], nb);
  }

  put_var(w, s->nclasses);
  for (uint32_t c = 0; c < s->nclasses; c++) {
    const ttft__sclass *k = &s->cls[c];
    put_str(w, k->name, sizeof k->name);
    put_var(w, k->slo.ttft_ns);
    put_var(w, k->slo.tpot_ns);
    put_var(w, k->slo.e2e_ns);
    put_var(w, k->slo.stall_threshold_ns);
    /* version 4: the 1.3 SLO fields, fluid_min as its binary64 bits */
    uint64_t fbits;
    memcpy(&fbits, &k->slo.fluid_min, sizeof fbits);
    put_var(w, CODEC_SLO_EXTRA);
    put_var(w, k->slo.ttft_ns_per_prompt_token);
    put_var(w, k->slo.token_deadline_ns);
    put_var(w, fbits);
    put_var(w, TTFT_COUNTER_COUNT_);
    for (unsigned i = 0; i < TTFT_COUNTER_COUNT_; i++) put_var(w, k->ctr[i]);
    put_var(w, TTFT_METRIC_COUNT_);
    for (unsigned m = 0; m < TTFT_METRIC_COUNT_; m++) put_hist(w, k->h[m]);
    put_var(w, TTFT_STATUS_COUNT_);
    for (unsigned st = 0; st < TTFT_STATUS_COUNT_; st++) {
      put_var(w, TTFT__STATUS_VIEWS);
      for (unsigned v = 0; v < TTFT__STATUS_VIEWS; v++) put_hist(w, k->sv[st][v]);
    }
    /* version 3: stalls by cause, count and stalled ns */
    put_var(w, TTFT_STALL_CAUSE_COUNT);
    for (unsigned j = 0; j < TTFT_STALL_CAUSE_COUNT; j++) {
      put_var(w, k->stall_n[j]);
      put_var(w, k->stall_ns[j]);
    }
  }

  put_var(w, TTFT_PREFIX_BAND_COUNT_); /* miss, hit, partial (version 3) */
  for (unsigned i = 0; i < TTFT_PREFIX_BAND_COUNT_; i++) put_hist(w, s->split_cache[i]);
  put_var(w, TTFT_MAX_BANDS);
  for (unsigned i = 0; i < TTFT_MAX_BANDS; i++) put_hist(w, s->split_band[i]);
  /* version 3: PREFILL by prefix band */
  put_var(w, TTFT_PREFIX_BAND_COUNT_);
  for (unsigned i = 0; i < TTFT_PREFIX_BAND_COUNT_; i++) put_hist(w, s->split_prefill[i]);
  /* version 3: engine-step durations, without / with prefill */
  put_var(w, 2);
  for (unsigned i = 0; i < 2; i++) put_hist(w, s->step[i]);
  put_slowest(w, s);
}

long ttft_snapshot_encode(const ttft_snapshot *s, void *buf, size_t cap) {
  if (!s || (!buf && cap > 0)) return TTFT_EINVAL;
  wr w = {buf, cap, 0};
  put_bytes(&w, CODEC_MAGIC, 4);
  put_byte(&w, CODEC_VERSION);
  put_byte(&w, (s->prom_summaries ? CODEC_FLAG_SUMMARIES : 0u) |
                   (s->native_histograms ? CODEC_FLAG_NATIVE : 0u) |
                   (s->export_idle_classes ? CODEC_FLAG_IDLE : 0u));
  put_byte(&w, 0);
  put_byte(&w, 0);
  put_bytes(&w, "\0\0\0\0", 4); /* total length, patched below */
  encode_body(s, &w);
  size_t total = w.len + CODEC_TRAILER;
  if (total > CODEC_MAX_LEN || total > (size_t)LONG_MAX) return TTFT_ERANGE;
  if (total <= cap) {
    unsigned char *b = buf;
    le32_put(b + 8, (uint32_t)total);
    le32_put(b + w.len, crc32c(b, w.len));
  }
  return (long)total;
}

/* ------------------------------------------------------------- reader
 * Every read is bounds-checked; the first failure sets bad and every later
 * read returns 0, so callers check once at the end of a unit. */
typedef struct rd {
  const unsigned char *p;
  size_t pos, end;
  int bad;
  unsigned version; /* 1 .. 5: what the body holds */
  int nomem;        /* pass 2: a histogram could not be stored */
  ttft_snapshot *s; /* pass 2: the snapshot being filled, else NULL */
  ttft__hacc *acc;  /* pass 2: builds each histogram */
} rd;

static uint64_t get_var_long(rd *r);
/* most varints of a snapshot (bucket deltas and counts) are one byte:
 * that case inline, the rest (and every error) in get_var_long */
static inline uint64_t get_var(rd *r) {
  if (!r->bad && r->pos < r->end && r->p[r->pos] < 0x80u) return r->p[r->pos++];
  return get_var_long(r);
}

static uint64_t get_var_long(rd *r) {
  uint64_t v = 0;
  for (unsigned shift = 0;; shift += 7) {
    if (r->bad || r->pos >= r->end) {
      r->bad = 1;
      return 0;
    }
    unsigned c = r->p[r->pos++];
    if (shift == 63 && c > 1) break;          /* more than 64 bits */
    v |= (uint64_t)(c & 0x7Fu) << shift;
    if (!(c & 0x80u)) {
      if (c == 0 && shift > 0) break;         /* not the shortest form */
      return v;
    }
    if (shift == 63) break;
  }
  r->bad = 1;
  return 0;
}

/* a varint that must be <= max */
static uint64_t get_bounded(rd *r, uint64_t max) {
  uint64_t v = get_var(r);
  if (v > max) r->bad = 1;
  return r->bad ? 0 : v;
}

/* Well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF), no NUL. */
static int utf8_ok(const unsigned char *s, size_t n) {
  for (size_t i = 0, k; i < n; i += k)
    if (s[i] == 0 || !(k = ttft__utf8_seq(s + i, n - i, NULL, NULL))) return 0;
  return 1;
}

enum { STR_UTF8, STR_CLASS, STR_LABEL_NAME, STR_NAMESPACE, STR_REQUEST_ID };

static int char_ok(int kind, unsigned c, int first) {
  int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  int digit = c >= '0' && c <= '9';
  switch (kind) {
  case STR_CLASS: return alpha || digit || c == '.' || c == ':' || c == '-';
  case STR_LABEL_NAME: return alpha || (!first && digit);
  case STR_NAMESPACE: return alpha || c == ':' || (!first && digit);
  default: return 0;
  }
}

/* A length-prefixed string into dst (capacity field, NUL included); dst
 * NULL validates only. min_len/kind restrict it further. */
static void get_str(rd *r, char *dst, size_t field, size_t min_len, int kind) {
  uint64_t n = get_bounded(r, field - 1);
  if (r->bad) return;
  if (n < min_len || n > r->end - r->pos) {
    r->bad = 1;
    return;
  }
  const unsigned char *s = r->p + r->pos;
  if (kind == STR_UTF8 || kind == STR_REQUEST_ID) {
    if (!utf8_ok(s, (size_t)n)) r->bad = 1;
    for (size_t i = 0; kind == STR_REQUEST_ID && i < n; i++)
      if (s[i] < 0x20 || s[i] == 0x7F) r->bad = 1; /* what ttft_begin_ex stores as '?' */
  } else {
    for (size_t i = 0; i < n; i++)
      if (!char_ok(kind, s[i], i == 0)) r->bad = 1;
  }
  if (r->bad) return;
  if (dst) {
    memcpy(dst, s, (size_t)n);
    dst[n] = '\0';
  }
  r->pos += (size_t)n;
}

/* Strictly ascending list of at most max values each <= vmax. */
static uint32_t get_ascending(rd *r, uint64_t *dst, uint32_t max, uint64_t vmax) {
  uint32_t n = (uint32_t)get_bounded(r, max);
  uint64_t v = 0;
  for (uint32_t i = 0; i < n && !r->bad; i++) {
    uint64_t d = get_var(r);
    if (i > 0 && (d == 0 || d > vmax - v)) r->bad = 1;
    v = i ? v + d : d;
    if (v > vmax) r->bad = 1;
    if (dst) dst[i] = v;
  }
  return r->bad ? 0 : n;
}

/* One sparse histogram into *slot of r->s (slot NULL, or pass 1: validate
 * and drop). *total, when given, accumulates the count and fails on
 * overflow. */
static void get_hist(rd *r, ttft__shist **slot, uint64_t *total) {
  uint64_t nnz = get_bounded(r, TTFT__HIST_BUCKETS);
  if (r->bad || nnz == 0) return;
  /* each bucket takes at least two bytes: refuse counts the input can't hold */
  if (nnz > (r->end - r->pos) / 2) {
    r->bad = 1;
    return;
  }
  ttft__hacc *acc = (slot && r->s) ? r->acc : NULL;
  uint64_t idx = 0, sum_b = 0;
  uint32_t first = 0;
  for (uint64_t k = 0; k < nnz && !r->bad; k++) {
    uint64_t d = get_var(r);
    uint64_t n = get_var(r);
    if (r->bad) break;
    if ((k > 0 && d == 0) || d >= TTFT__HIST_BUCKETS - idx || n == 0 || n > UINT64_MAX - sum_b) {
      r->bad = 1;
      break;
    }
    idx += d;
    if (k == 0) first = (uint32_t)idx;
    sum_b += n;
    if (acc) ttft__hacc_add_bucket(acc, (uint32_t)idx, n);
  }
  uint64_t count = get_var(r), sum = get_var(r);
  uint64_t sum_hi = r->version >= 3 ? get_var(r) : 0; /* 1, 2: sums were 64 bits */
  uint64_t min = get_var(r), span = get_var(r);
  uint32_t last = (uint32_t)idx;
  if (!r->bad && (count != sum_b || span > UINT64_MAX - min ||
                  min < ttft__bucket_lo(first) || min > ttft__bucket_hi(first) ||
                  min + span < ttft__bucket_lo(last) || min + span > ttft__bucket_hi(last)))
    r->bad = 1;
  if (!r->bad && total) {
    if (count > UINT64_MAX - *total) r->bad = 1;
    else *total += count;
  }
  if (!acc) return;
  if (r->bad) {
    ttft__hacc_clear(acc);
    return;
  }
  ttft__hacc_add_stats(acc, sum, sum_hi, min, min + span);
  int rc = ttft__snapshot_hist(r->s, acc, slot);
  if (rc != TTFT_OK) {
    r->nomem = rc == TTFT_ENOMEM;
    r->bad = 1;
  }
}

static uint8_t get_u8(rd *r) {
  if (r->bad || r->pos >= r->end) {
    r->bad = 1;
    return 0;
  }
  return r->p[r->pos++];
}

/* Version 3: the slowest lists of nclasses classes into s (NULL:
 * validate only). Every list is at most k long (k <= TTFT_MAX_SLOWEST_K),
 * every entry's value (its TTFT, or its longest gap) is non-zero, a trace
 * id is not all zero, a request id is what ttft_begin_ex would store. */
static void get_slowest(rd *r, ttft_snapshot *s, uint32_t nclasses) {
  ttft__slow v[TTFT_MAX_SLOWEST_K];
  uint32_t k = (uint32_t)get_bounded(r, TTFT_MAX_SLOWEST_K);
  uint32_t nby = (uint32_t)get_bounded(r, CODEC_MAX_RANKINGS);
  if (s) s->slowest_k = k;
  for (uint32_t c = 0; c < nclasses && !r->bad; c++)
    for (uint32_t by = 0; by < nby && !r->bad; by++) {
      uint32_t n = (uint32_t)get_bounded(r, k);
      for (uint32_t i = 0; i < n && !r->bad; i++) {
        ttft__slow *e = &v[i];
        memset(e, 0, sizeof *e);
        e->ttft = get_var(r);
        e->max_gap = get_var(r);
        e->t_begin = get_var(r);
        uint64_t span = get_var(r);
        if (span > UINT64_MAX - e->t_begin) r->bad = 1;
        e->t_end = e->t_begin + span;
        e->tokens = get_var(r);
        e->unix_end = get_var(r);
        e->status = get_u8(r);
        e->cause = get_u8(r);
        e->has_trace = get_u8(r);
        if (e->status >= TTFT_STATUS_COUNT_ || e->has_trace > 1) r->bad = 1;
        if (e->cause >= TTFT_STALL_CAUSE_COUNT) e->cause = TTFT_STALL_UNKNOWN; /* as stalls_by_cause */
        if (e->has_trace && !r->bad) {
          if (r->end - r->pos < sizeof e->trace) r->bad = 1;
          else memcpy(e->trace, r->p + r->pos, sizeof e->trace), r->pos += sizeof e->trace;
          unsigned char any = 0;
          for (size_t j = 0; j < sizeof e->trace; j++) any |= e->trace[j];
          if (!any) r->bad = 1;
        }
        get_str(r, e->id, sizeof e->id, 0, STR_REQUEST_ID);
        e->id_len = (uint8_t)strlen(e->id);
        /* version 5: the 1.3 fields; fewer leave 0 (unknown), more are
         * validated as varints and skipped; missed <= judged */
        uint64_t x[CODEC_SLOW_EXTRA] = {0, 0, 0, 0, 0};
        uint32_t nx = r->version >= 5 ? (uint32_t)get_bounded(r, CODEC_MAX_LIST) : 0;
        for (uint32_t j = 0; j < nx && !r->bad; j++) {
          uint64_t xv = get_var(r);
          if (j < CODEC_SLOW_EXTRA) x[j] = xv;
        }
        if (x[1] > x[0]) r->bad = 1;
        e->dl = x[0];
        e->dl_missed = x[1];
        e->dl_ns = x[2];
        e->ttft_slo = x[3];
        e->tpot_slo = x[4];
        e->value = by == TTFT_SLOWEST_TTFT ? e->ttft : e->max_gap;
        if (by < TTFT_SLOWEST_COUNT_ && !e->value) r->bad = 1;
      }
      if (s && !r->bad && by < TTFT_SLOWEST_COUNT_) {
        n = ttft__slow_sort(v, n, k);
        if (ttft__slow_set(s, c, (int)by, v, n) != TTFT_OK) r->nomem = r->bad = 1;
      }
    }
}

/* The body after the header. s NULL: validate only, return nclasses. */
static uint32_t decode_body(rd *r, ttft_snapshot *s) {
  uint64_t tmp[TTFT_MAX_PROM_BUCKETS];
  uint64_t id = get_var(r), t0 = get_var(r), span = get_var(r), stall = get_var(r);
  if (span > UINT64_MAX - t0) r->bad = 1;
  if (s) {
    s->registry_id = id;
    s->t_start_ns = t0;
    s->t_end_ns = t0 + span;
    s->stall_threshold_ns = stall;
  }
  get_str(r, s ? s->start_point : NULL, TTFT_MAX_LABEL, 0, STR_UTF8);
  get_str(r, s ? s->token_point : NULL, TTFT_MAX_LABEL, 0, STR_UTF8);
  get_str(r, s ? s->model : NULL, TTFT_MAX_LABEL, 0, STR_UTF8);
  get_str(r, s ? s->ns : NULL, TTFT__NAME_MAX, 0, STR_NAMESPACE);
  if (r->version >= 2) {
    uint64_t schema = get_bounded(r, 8 + CODEC_SCHEMA_BIAS);
    if (s) s->native_schema = (int)schema - CODEC_SCHEMA_BIAS;
  } else if (s) {
    s->native_schema = CODEC_V1_NATIVE_SCHEMA;
  }

  uint32_t n = (uint32_t)get_bounded(r, CODEC_MAX_LIST);
  for (uint32_t i = 0; i < n && !r->bad; i++) {
    uint64_t v = get_var(r);
    if (s && i < TTFT_GAUGE_COUNT_) s->gauge[i] = v;
  }

  n = (uint32_t)get_bounded(r, TTFT_MAX_CONST_LABELS);
  if (s) s->n_const_labels = n;
  for (uint32_t i = 0; i < n && !r->bad; i++) {
    get_str(r, s ? s->const_name[i] : NULL, TTFT__NAME_MAX, 1, STR_LABEL_NAME);
    get_str(r, s ? s->const_value[i] : NULL, TTFT_MAX_LABEL, 0, STR_UTF8);
  }

  n = get_ascending(r, tmp, TTFT_MAX_BANDS - 1, UINT32_MAX);
  if (s) {
    s->n_band_edges = n;
    for (uint32_t i = 0; i < n; i++) s->band_edges[i] = (uint32_t)tmp[i];
  }

  uint32_t nm = (uint32_t)get_bounded(r, CODEC_MAX_LIST);
  for (uint32_t m = 0; m < nm && !r->bad; m++) {
    int keep = s && m < TTFT_METRIC_COUNT_;
    n = get_ascending(r, keep ? s->prom_buckets[m] : tmp, TTFT_MAX_PROM_BUCKETS, UINT64_MAX);
    if (keep) s->prom_n_buckets[m] = n;
  }

  uint32_t nclasses = (uint32_t)get_bounded(r, CODEC_MAX_CLASSES);
  if (nclasses == 0) r->bad = 1;
  if (s && nclasses != s->nclasses) r->bad = 1; /* pass 2 must see what pass 1 saw */
  /* what the "all classes" aggregate will add up: no sum may overflow */
  uint64_t totals[CODEC_MAX_LIST] = {0}, ctr_totals[CODEC_MAX_LIST] = {0};
  uint64_t sv_totals[TTFT_STATUS_COUNT_][TTFT__STATUS_VIEWS] = {{0}};
  uint64_t cause_totals[CODEC_MAX_LIST] = {0};
  for (uint32_t c = 0; c < nclasses && !r->bad; c++) {
    ttft__sclass *k = s ? &s->cls[c] : NULL;
    char name[TTFT__NAME_MAX];
    get_str(r, name, sizeof name, 1, STR_CLASS);
    if (!r->bad && (c == 0) != (strcmp(name, "default") == 0)) r->bad = 1;
    uint64_t slo[4];
    for (unsigned i = 0; i < 4; i++) slo[i] = get_var(r);
    /* version 4: the 1.3 fields (per-prompt-token term, token deadline,
     * fluid_min's binary64 bits); fewer leave the ttft_slo_init defaults,
     * more are validated as varints and skipped */
    uint64_t extra[CODEC_SLO_EXTRA] = {0, 0, 0};
    double fluid_min = 0.9;
    uint32_t nx = r->version >= 4 ? (uint32_t)get_bounded(r, CODEC_MAX_LIST) : 0;
    for (uint32_t i = 0; i < nx && !r->bad; i++) {
      uint64_t v = get_var(r);
      if (i < CODEC_SLO_EXTRA) extra[i] = v;
    }
    if (nx > 2) {
      memcpy(&fluid_min, &extra[2], sizeof fluid_min);
      if (!(fluid_min >= 0.0 && fluid_min <= 1.0)) r->bad = 1; /* NaN too: as ttft_class_add */
    }
    if (k) {
      memcpy(k->name, name, sizeof name);
      ttft_slo_init(&k->slo);
      k->slo.ttft_ns = slo[0];
      k->slo.tpot_ns = slo[1];
      k->slo.e2e_ns = slo[2];
      k->slo.stall_threshold_ns = slo[3];
      k->slo.ttft_ns_per_prompt_token = extra[0];
      k->slo.token_deadline_ns = extra[1];
      k->slo.fluid_min = fluid_min;
    }
    n = (uint32_t)get_bounded(r, CODEC_MAX_LIST);
    uint64_t ended = 0;
    for (uint32_t i = 0; i < n && !r->bad; i++) {
      uint64_t v = get_var(r);
      if (v > UINT64_MAX - ctr_totals[i]) r->bad = 1; /* the sum over classes */
      ctr_totals[i] += v;
      if (k && i < TTFT_COUNTER_COUNT_) k->ctr[i] = v;
      if (i == TTFT_COUNTER_COMPLETED || i == TTFT_COUNTER_CANCELLED || i == TTFT_COUNTER_ERRORS)
        ended = v > UINT64_MAX - ended ? UINT64_MAX : ended + v;
    }
    if (n <= TTFT_COUNTER_SLO_JUDGED && !r->bad) {
      /* written before 1.2 (versions 1 and 2): every ended stream was
       * judged then, so judged = ended keeps the attainment it had */
      if (ended > UINT64_MAX - ctr_totals[TTFT_COUNTER_SLO_JUDGED]) r->bad = 1;
      ctr_totals[TTFT_COUNTER_SLO_JUDGED] += ended;
      if (k) k->ctr[TTFT_COUNTER_SLO_JUDGED] = ended;
    }
    n = (uint32_t)get_bounded(r, CODEC_MAX_LIST);
    for (uint32_t m = 0; m < n && !r->bad; m++)
      get_hist(r, k && m < TTFT_METRIC_COUNT_ ? &k->h[m] : NULL, &totals[m]);
    /* before version 3 every stall's cause is unknown, its time not known */
    if (k) k->stall_n[TTFT_STALL_UNKNOWN] = k->ctr[TTFT_COUNTER_STALLS];
    if (r->version < 2) continue;
    uint32_t nst = (uint32_t)get_bounded(r, CODEC_MAX_STATUS);
    for (uint32_t st = 0; st < nst && !r->bad; st++) {
      n = (uint32_t)get_bounded(r, CODEC_MAX_LIST);
      for (uint32_t v = 0; v < n && !r->bad; v++) {
        int known = st < TTFT_STATUS_COUNT_ && v < TTFT__STATUS_VIEWS;
        get_hist(r, k && known ? &k->sv[st][v] : NULL, known ? &sv_totals[st][v] : NULL);
      }
    }
    if (r->version < 3) continue;
    if (k) k->stall_n[TTFT_STALL_UNKNOWN] = 0;
    n = (uint32_t)get_bounded(r, CODEC_MAX_LIST);
    for (uint32_t i = 0; i < n && !r->bad; i++) {
      uint64_t cnt = get_var(r), ns = get_var(r);
      if (cnt > UINT64_MAX - cause_totals[i]) r->bad = 1; /* the sum over classes */
      cause_totals[i] += cnt;
      /* causes a later version adds are counted as unknown */
      uint32_t j = i < TTFT_STALL_CAUSE_COUNT ? i : TTFT_STALL_UNKNOWN;
      if (k && !r->bad) {
        if (cnt > UINT64_MAX - k->stall_n[j]) r->bad = 1;
        else k->stall_n[j] += cnt;
        k->stall_ns[j] += ns;
      }
    }
  }

  /* prefix bands: miss and hit, and (version 3) partial */
  n = (uint32_t)get_bounded(r, r->version >= 3 ? TTFT_PREFIX_BAND_COUNT_ : 2);
  for (uint32_t i = 0; i < n && !r->bad; i++) get_hist(r, s ? &s->split_cache[i] : NULL, NULL);
  n = (uint32_t)get_bounded(r, TTFT_MAX_BANDS);
  for (uint32_t i = 0; i < n && !r->bad; i++) get_hist(r, s ? &s->split_band[i] : NULL, NULL);
  if (r->version >= 3) {
    n = (uint32_t)get_bounded(r, TTFT_PREFIX_BAND_COUNT_);
    for (uint32_t i = 0; i < n && !r->bad; i++) get_hist(r, s ? &s->split_prefill[i] : NULL, NULL);
    n = (uint32_t)get_bounded(r, CODEC_MAX_STEP);
    for (uint32_t i = 0; i < n && !r->bad; i++) get_hist(r, s && i < 2 ? &s->step[i] : NULL, NULL);
  }
  if (r->version >= 3) get_slowest(r, s, nclasses);
  return r->bad ? 0 : nclasses;
}

static int cmp_class_name(const void *a, const void *b) {
  return strcmp((*(const ttft__sclass *const *)a)->name, (*(const ttft__sclass *const *)b)->name);
}

/* TTFT_OK when the class names are unique, TTFT_ECORRUPT when not, or
 * TTFT_ENOMEM. Sorted, so that 4096 classes cost n log n, not n^2. */
static int names_unique(const ttft_snapshot *s) {
  if (s->nclasses < 2) return TTFT_OK;
  const ttft__sclass **v = ttft__alloc(&s->alloc, s->nclasses * sizeof *v);
  if (!v) return TTFT_ENOMEM;
  for (uint32_t i = 0; i < s->nclasses; i++) v[i] = &s->cls[i];
  qsort((void *)v, s->nclasses, sizeof *v, cmp_class_name);
  int rc = TTFT_OK;
  for (uint32_t i = 1; i < s->nclasses && rc == TTFT_OK; i++)
    if (strcmp(v[i - 1]->name, v[i]->name) == 0) rc = TTFT_ECORRUPT;
  ttft__free(&s->alloc, (void *)v);
  return rc;
}

static ttft_snapshot *fail(int *err, int code) {
  if (err) *err = code;
  return NULL;
}

ttft_snapshot *ttft_snapshot_decode(const void *buf, size_t len, int *err) {
  if (!buf) return fail(err, TTFT_EINVAL);
  const unsigned char *p = buf;
  if (len < CODEC_HEADER + CODEC_TRAILER || memcmp(p, CODEC_MAGIC, 4) != 0 ||
      p[4] < 1 || p[4] > CODEC_VERSION ||
      (p[5] & ~(p[4] == 1 ? CODEC_FLAGS_V1 : p[4] == 2 ? CODEC_FLAGS_V2
                : p[4] == 3 ? CODEC_FLAGS_V3 : p[4] == 4 ? CODEC_FLAGS_V4 : CODEC_FLAGS_V5)) ||
      p[6] || p[7] || le32_get(p + 8) != len ||
      crc32c(p, len - CODEC_TRAILER) != le32_get(p + len - CODEC_TRAILER))
    return fail(err, TTFT_ECORRUPT);

  rd r = {p, CODEC_HEADER, len - CODEC_TRAILER, 0, p[4], 0, NULL, NULL};
  uint32_t nclasses = decode_body(&r, NULL);
  if (r.bad || r.pos != r.end) return fail(err, TTFT_ECORRUPT);

  ttft_snapshot *s = ttft__snapshot_new(nclasses);
  if (!s) return fail(err, TTFT_ENOMEM);
  s->prom_summaries = (p[5] & CODEC_FLAG_SUMMARIES) ? 1 : 0;
  s->native_histograms = r.version >= 2 ? (p[5] & CODEC_FLAG_NATIVE) != 0 : CODEC_V1_NATIVE_HISTOGRAMS;
  s->export_idle_classes = (p[5] & CODEC_FLAG_IDLE) ? 1 : 0;
  r.acc = ttft__hacc_new(&s->alloc);
  if (!r.acc) {
    ttft_snapshot_free(s);
    return fail(err, TTFT_ENOMEM);
  }
  r.s = s;
  r.pos = CODEC_HEADER;
  decode_body(&r, s);
  int rc = (r.bad || r.pos != r.end) ? TTFT_ECORRUPT : TTFT_OK;
  if (r.nomem) rc = TTFT_ENOMEM;
  if (rc == TTFT_OK) rc = names_unique(s);
  if (rc == TTFT_OK) {
    /* pass 1 checked that no sum over classes overflows */
    int frc = ttft__snapshot_finish(s, r.acc);
    if (frc != TTFT_OK) rc = frc == TTFT_ENOMEM ? TTFT_ENOMEM : TTFT_ECORRUPT;
  }
  ttft__hacc_free(&s->alloc, r.acc);
  if (rc != TTFT_OK) {
    ttft_snapshot_free(s);
    return fail(err, rc);
  }
  if (err) *err = TTFT_OK;
  return s;
}

/* -------------------------------------------------------------- base64
 * RFC 4648 section 4, with padding, no line breaks. */
static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

long ttft_snapshot_encode_base64(const ttft_snapshot *s, char *buf, size_t cap) {
  if (!s || (!buf && cap > 0)) return TTFT_EINVAL;
  long n = ttft_snapshot_encode(s, NULL, 0);
  if (n < 0) return n;
  size_t bin = (size_t)n, text = (bin + 2) / 3 * 4;
  if (text > (size_t)LONG_MAX - 1) return TTFT_ERANGE;
  if (cap == 0) return (long)text;
  ttft_allocator a;
  ttft__allocator_current(&a);
  unsigned char *raw = ttft__alloc(&a, bin);
  if (!raw) return TTFT_ENOMEM;
  ttft_snapshot_encode(s, raw, bin);
  size_t o = 0;
  for (size_t i = 0; i < bin; i += 3) {
    uint32_t v = (uint32_t)raw[i] << 16;
    if (i + 1 < bin) v |= (uint32_t)raw[i + 1] << 8;
    if (i + 2 < bin) v |= raw[i + 2];
    char q[4] = {b64_alphabet[v >> 18 & 63], b64_alphabet[v >> 12 & 63],
                 i + 1 < bin ? b64_alphabet[v >> 6 & 63] : '=',
                 i + 2 < bin ? b64_alphabet[v & 63] : '='};
    for (int j = 0; j < 4; j++, o++)
      if (o < cap - 1) buf[o] = q[j];
  }
  buf[o < cap - 1 ? o : cap - 1] = '\0';
  ttft__free(&a, raw);
  return (long)text;
}

static int is_space(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

ttft_snapshot *ttft_snapshot_decode_base64(const char *text, size_t len, int *err) {
  if (!text) return fail(err, TTFT_EINVAL);
  const unsigned char *t = (const unsigned char *)text;
  /* a log line may carry its newline: trim ASCII white space at both ends */
  while (len > 0 && is_space(t[0])) t++, len--;
  while (len > 0 && is_space(t[len - 1])) len--;
  if (len == 0 || len % 4 != 0) return fail(err, TTFT_ECORRUPT);
  size_t pad = t[len - 1] == '=' ? (t[len - 2] == '=' ? 2 : 1) : 0;
  size_t bin = len / 4 * 3 - pad;
  ttft_allocator a;
  ttft__allocator_current(&a);
  unsigned char *raw = ttft__alloc(&a, bin ? bin : 1);
  if (!raw) return fail(err, TTFT_ENOMEM);
  size_t o = 0;
  int ok = 1;
  for (size_t i = 0; i < len && ok; i += 4) {
    int last = i + 4 == len;
    int v[4];
    for (int j = 0; j < 4; j++) {
      v[j] = b64_value(t[i + (size_t)j]);
      /* '=' only as the final one or two characters */
      if (v[j] < 0 && !(last && t[i + (size_t)j] == '=' && (size_t)j >= 4 - pad)) ok = 0;
    }
    if (!ok) break;
    uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12;
    if (last && pad == 2) {
      if (v[1] & 15) ok = 0; /* non-canonical: stray bits under the padding */
      raw[o++] = (unsigned char)(w >> 16);
      break;
    }
    w |= (uint32_t)v[2] << 6;
    if (last && pad == 1) {
      if (v[2] & 3) ok = 0;
      raw[o++] = (unsigned char)(w >> 16);
      raw[o++] = (unsigned char)(w >> 8);
      break;
    }
    w |= (uint32_t)v[3];
    raw[o++] = (unsigned char)(w >> 16);
    raw[o++] = (unsigned char)(w >> 8);
    raw[o++] = (unsigned char)w;
  }
  ttft_snapshot *s = NULL;
  if (!ok || o != bin) {
    fail(err, TTFT_ECORRUPT);
  } else {
    s = ttft_snapshot_decode(raw, bin, err);
  }
  ttft__free(&a, raw);
  return s;
}
