/*
 * fuzz_decode.c — ttft_snapshot_decode and ttft_snapshot_decode_base64 of
 * arbitrary bytes. Decoding must never read past the input (the replay
 * driver and libFuzzer hand over exact-size buffers; ASan watches), must
 * refuse with TTFT_ECORRUPT / TTFT_ENOMEM and nothing else, and whatever
 * it accepts must be a sound snapshot: it re-encodes, and that encoding
 * decodes and re-encodes bit-exactly; quantiles are within [min, max] and
 * monotone; every format renders with snprintf rules and well-formed
 * JSON / exposition text; merge and delta with itself work.
 *
 * The encoding ends in a CRC-32C (docs/encoding.md), which random mutation
 * almost never gets right. So each input is also decoded a second time
 * with its length field and checksum made consistent, which lets the
 * fuzzer reach the structure parser behind the checksum.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "ttft.h"

static void check_snapshot(const ttft_snapshot *s) {
  static const double qs[] = {0.0, 0.1, 0.5, 0.9, 0.99, 1.0};
  int ncls = ttft_snapshot_classes(s);
  FUZZ_CHECK(ncls >= 1, "decoded snapshot with %d classes", ncls);
  for (int c = -1; c < ncls; c++) {
    FUZZ_CHECK(c < 0 || ttft_snapshot_class_name(s, c) != NULL, "class %d has no name", c);
    for (int m = 0; m < TTFT_METRIC_COUNT_; m++) {
      uint64_t n = ttft_snapshot_class_count(s, c, (ttft_metric)m);
      uint64_t lo = ttft_snapshot_class_quantile(s, c, (ttft_metric)m, 0.0);
      uint64_t hi = ttft_snapshot_class_quantile(s, c, (ttft_metric)m, 1.0);
      uint64_t prev = lo;
      FUZZ_CHECK(n || (lo == 0 && hi == 0), "empty metric with min %llu max %llu", (unsigned long long)lo,
                 (unsigned long long)hi);
      for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        uint64_t v = ttft_snapshot_class_quantile(s, c, (ttft_metric)m, qs[i]);
        FUZZ_CHECK(v >= prev && v <= hi, "class %d metric %d q%g = %llu outside [%llu, %llu]", c, m, qs[i],
                   (unsigned long long)v, (unsigned long long)prev, (unsigned long long)hi);
        prev = v;
      }
      (void)ttft_snapshot_class_mean(s, c, (ttft_metric)m);
    }
    double a = ttft_snapshot_attainment(s, c);
    FUZZ_CHECK(a == -1.0 || (a >= 0.0 && a <= 1.0), "attainment %g", a);
  }
  for (unsigned i = 0; i < ttft_snapshot_bands(s) + 1; i++) {
    uint32_t lo = 0, hi = 0;
    int rc = ttft_snapshot_band(s, i, &lo, &hi);
    FUZZ_CHECK(i < ttft_snapshot_bands(s) ? (rc == TTFT_OK && lo <= hi) : rc == TTFT_EINVAL, "band %u: %d", i, rc);
    (void)ttft_snapshot_split_quantile(s, TTFT_SPLIT_PROMPT_BAND, i, 0.5);
  }
  /* (1.3) every slowest entry: missed <= judged token deadlines, its
   * fluidity 1 - missed / judged in [0, 1] */
  for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++)
    for (unsigned j = 0; j < ttft_snapshot_slowest_count(s, TTFT_CLASS_ALL, (ttft_slowest_by)by); j++) {
      ttft_slow_request o;
      memset(&o, 0, sizeof o);
      o.struct_size = sizeof o;
      FUZZ_CHECK(ttft_snapshot_slowest(s, TTFT_CLASS_ALL, (ttft_slowest_by)by, j, &o) == TTFT_OK, "slowest %d %u", by, j);
      FUZZ_CHECK(o.deadlines_missed <= o.deadlines && o.fluidity >= 0.0 && o.fluidity <= 1.0,
                 "slowest entry: %llu of %llu missed, fluidity %g", (unsigned long long)o.deadlines_missed,
                 (unsigned long long)o.deadlines, o.fluidity);
    }
  uint64_t t0, t1;
  FUZZ_CHECK(ttft_snapshot_interval(s, &t0, &t1) == TTFT_OK, "interval");
  for (int f = 0; f < TTFT_FORMAT_COUNT_; f++) {
    long n = ttft_snapshot_format(s, (ttft_format)f, NULL, 0);
    FUZZ_CHECK(n > 0 || n == TTFT_ENOMEM, "format %d: %ld", f, n);
    if (n <= 0) continue;
    char *buf = malloc((size_t)n + 1);
    FUZZ_CHECK(buf != NULL, "malloc");
    FUZZ_CHECK(ttft_snapshot_format(s, (ttft_format)f, buf, (size_t)n + 1) == n && buf[n] == '\0', "format %d length", f);
    if (f == TTFT_FORMAT_PROMETHEUS_PROTOBUF)
      FUZZ_CHECK(fz_protobuf_delimited_ok((const uint8_t *)buf, (size_t)n), "protobuf framing of a decoded snapshot");
    else if (f == TTFT_FORMAT_OTLP_PROTOBUF)
      FUZZ_CHECK(fz_pb_message_ok((const uint8_t *)buf, (const uint8_t *)buf + n), "OTLP request of a decoded snapshot");
    else
      FUZZ_CHECK(strlen(buf) == (size_t)n, "format %d has a NUL inside", f);
    if (f == TTFT_FORMAT_JSON) FUZZ_CHECK(fz_json_valid(buf, (size_t)n), "JSON of a decoded snapshot:\n%s", buf);
    if (f == TTFT_FORMAT_PROMETHEUS || f == TTFT_FORMAT_OPENMETRICS) {
      int bad = fz_exposition_bad_line(buf, (size_t)n, f == TTFT_FORMAT_OPENMETRICS);
      FUZZ_CHECK(bad == 0, "%s of a decoded snapshot, line %d:\n%s", ttft_format_name((ttft_format)f), bad, buf);
    }
    free(buf);
  }
}

static void round_trip(const ttft_snapshot *s) {
  long n = ttft_snapshot_encode(s, NULL, 0);
  FUZZ_CHECK(n > 0, "encode of a decoded snapshot: %ld", n);
  unsigned char *e1 = malloc((size_t)n), *e2 = malloc((size_t)n);
  FUZZ_CHECK(e1 && e2, "malloc");
  FUZZ_CHECK(ttft_snapshot_encode(s, e1, (size_t)n) == n, "encode");
  int err = 0;
  ttft_snapshot *d = ttft_snapshot_decode(e1, (size_t)n, &err);
  FUZZ_CHECK(d != NULL, "re-decode of our own encoding: %d", err);
  FUZZ_CHECK(ttft_snapshot_encode(d, e2, (size_t)n) == n && memcmp(e1, e2, (size_t)n) == 0,
             "encode(decode(encode(x))) differs from encode(x)");
  for (int c = 0; c < TTFT_COUNTER_COUNT_; c++)
    FUZZ_CHECK(ttft_snapshot_counter(d, (ttft_counter)c) == ttft_snapshot_counter(s, (ttft_counter)c),
               "counter %d changed in the round trip", c);
  ttft_snapshot_free(d);
  free(e1);
  free(e2);

  ttft_snapshot *m = ttft_snapshot_merge(s, s, &err);
  FUZZ_CHECK(m != NULL || err == TTFT_ENOMEM, "merge of a decoded snapshot: %d", err);
  if (m) {
    for (int c = 0; c < TTFT_COUNTER_COUNT_; c++)
      FUZZ_CHECK(ttft_snapshot_counter(m, (ttft_counter)c) == 2 * ttft_snapshot_counter(s, (ttft_counter)c),
                 "merge(s, s) counter %d", c);
    ttft_snapshot_free(m);
  }
  ttft_snapshot *dl = ttft_snapshot_delta(s, s, &err);
  if (dl) {
    for (int c = 0; c < TTFT_COUNTER_COUNT_; c++)
      FUZZ_CHECK(ttft_snapshot_counter(dl, (ttft_counter)c) == 0, "delta(s, s) counter %d", c);
    ttft_snapshot_free(dl);
  }
}

/* CRC-32C (Castagnoli, reflected 0x82F63B78, init and final xor ~0),
 * bit by bit: our own, independent of the library's table version. */
static uint32_t crc32c_bitwise(const uint8_t *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}

static void decode_one(const uint8_t *data, size_t size) {
  int err = 0;
  ttft_snapshot *s = ttft_snapshot_decode(data, size, &err);
  if (s) {
    check_snapshot(s);
    round_trip(s);
    ttft_snapshot_free(s);
  } else {
    FUZZ_CHECK(err == TTFT_ECORRUPT || err == TTFT_ENOMEM || (size == 0 && err == TTFT_EINVAL),
               "decode refused with %d", err);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  decode_one(data, size);
  if (size >= 16 && size <= UINT32_MAX) {
    /* header: "TTFS", version, flags, reserved[2], length (LE32); CRC-32C (LE32) last */
    uint8_t *fixed = malloc(size);
    FUZZ_CHECK(fixed != NULL, "malloc");
    memcpy(fixed, data, size);
    memcpy(fixed, "TTFS", 4);
    for (int i = 0; i < 4; i++) fixed[8 + i] = (uint8_t)(size >> (8 * i));
    uint32_t crc = crc32c_bitwise(fixed, size - 4);
    for (int i = 0; i < 4; i++) fixed[size - 4 + i] = (uint8_t)(crc >> (8 * i));
    decode_one(fixed, size);
    free(fixed);
  }
  int err = 0;
  ttft_snapshot *s = ttft_snapshot_decode_base64((const char *)data, size, &err);
  if (s) {
    check_snapshot(s);
    round_trip(s);
    ttft_snapshot_free(s);
  } else {
    FUZZ_CHECK(err == TTFT_ECORRUPT || err == TTFT_ENOMEM || (size == 0 && err == TTFT_EINVAL),
               "decode_base64 refused with %d", err);
  }
  return 0;
}
