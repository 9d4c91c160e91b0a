/*
 * mkcap — write one run of a synthetic capacity sweep, for the
 * ttft-report --capacity test (tests/tools/test_capacity.sh).
 *
 *   mkcap OUT SPAN_MS SMOOTH STALLED GAP_MS
 *
 * Class "chat": TPOT budget 50 ms, token deadline D = 50 ms, fluid_min
 * 0.9. SMOOTH streams emit 11 tokens GAP_MS apart (TPOT = GAP_MS; fluid
 * while GAP_MS <= 50). STALLED streams stall 150 ms before their second
 * token, then emit 9 more 20 ms apart: TPOT (150 + 9 x 20) / 10 = 33 ms,
 * within budget, but the early stall misses floor((150 - 50) / 50) + 1 =
 * 3 of 12 token deadlines: fluidity 0.75, not fluid. Every stream
 * completes. The snapshot's interval is rewritten to SPAN_MS (the
 * encoding's start and span fields, then its length and CRC-32C), so the
 * run's token rate, 11 x (SMOOTH + STALLED) / SPAN, is exact.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"

#define MS UINT64_C(1000000)

static uint32_t crc32c(const unsigned char *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

static size_t get_var(const unsigned char *p, size_t at, uint64_t *v) {
  *v = 0;
  for (int sh = 0;; sh += 7) {
    *v |= (uint64_t)(p[at] & 0x7F) << sh;
    if (!(p[at++] & 0x80)) return at;
  }
}

static size_t put_var(unsigned char *p, size_t at, uint64_t v) {
  while (v >= 0x80) {
    p[at++] = (unsigned char)(v & 0x7F) | 0x80u;
    v >>= 7;
  }
  p[at++] = (unsigned char)v;
  return at;
}

static void le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void stream(ttft_registry *r, int c, uint64_t t0, uint64_t first_gap, uint64_t gap) {
  ttft_request q;
  ttft_request_init(&q);
  q.class_id = c;
  ttft_seq s = ttft_begin_ex(r, &q, t0);
  uint64_t t = t0 + 30 * MS;
  ttft_token_emitted(r, s, 1, t);
  for (int i = 0; i < 10; i++) {
    t += i == 0 ? first_gap : gap;
    ttft_token_emitted(r, s, 1, t);
  }
  ttft_stream_end(r, s, TTFT_COMPLETED, t);
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: mkcap OUT SPAN_MS SMOOTH STALLED GAP_MS\n");
    return 1;
  }
  uint64_t span = strtoull(argv[2], NULL, 10) * MS, gap = strtoull(argv[5], NULL, 10) * MS;
  unsigned smooth = (unsigned)strtoul(argv[3], NULL, 10), stalled = (unsigned)strtoul(argv[4], NULL, 10);
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.max_inflight = 16;
  ttft_registry *r = ttft_registry_new(&cfg);
  if (!r) return 1;
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.tpot_ns = 50 * MS;
  int c = ttft_class_add(r, "chat", &slo);
  uint64_t t0 = UINT64_C(1000000000);
  for (unsigned i = 0; i < smooth; i++) stream(r, c, t0 + i * MS, gap, gap);
  for (unsigned i = 0; i < stalled; i++) stream(r, c, t0 + i * MS, 150 * MS, 20 * MS);
  ttft_snapshot *s = ttft_snapshot_take(r);
  long n = s ? ttft_snapshot_encode(s, NULL, 0) : -1;
  unsigned char *in = n > 0 ? malloc((size_t)n) : NULL, *out = n > 0 ? malloc((size_t)n + 32) : NULL;
  if (!in || !out || ttft_snapshot_encode(s, in, (size_t)n) != n) return 1;
  /* header (12 bytes), then registry id, start, span (docs/encoding.md) */
  uint64_t id, start, old_span;
  size_t at = get_var(in, 12, &id);
  size_t at_start = at;
  at = get_var(in, at, &start);
  at = get_var(in, at, &old_span);
  memcpy(out, in, at_start);
  size_t o = put_var(out, at_start, UINT64_C(1000000000));
  o = put_var(out, o, span);
  size_t rest = (size_t)n - 4 - at; /* the body after the span, without the CRC */
  memcpy(out + o, in + at, rest);
  o += rest;
  le32(out + 8, (uint32_t)(o + 4));
  le32(out + o, crc32c(out, o));
  o += 4;
  FILE *f = fopen(argv[1], "wb");
  int rc = !f || fwrite(out, 1, o, f) != o;
  if (f) rc |= fclose(f) != 0;
  free(in);
  free(out);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
  return rc;
}
