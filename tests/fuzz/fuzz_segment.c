/*
 * fuzz_segment.c — the gatherer's readers of a shared directory's files
 * (src/report/gather.h): a segment file's bytes (header, identity, uid,
 * snapshot) and the archive's bytes. Never read past the input, refuse
 * with TTFT_ECORRUPT / TTFT_ENOTSUP / TTFT_ENOMEM only; what is accepted
 * is sound: an accepted archive re-encodes to the same bytes, folds a
 * snapshot into one more exited process, and its snapshots format.
 *
 * Both files end in FNV-1a hashes that random mutation almost never gets
 * right, so each input is also read with its hashes made consistent (the
 * segment header's and payload's, the archive's trailer), which lets the
 * fuzzer reach the parsers behind them. The first byte picks the reader.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "report/gather.h"
#include "ttft.h"

static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void segment_one(const uint8_t *d, size_t n) {
  ttft__seg_hdr h;
  ttft_snapshot *s = NULL;
  int rc = ttft__gather_read_segment(d, n, NULL, (uint32_t)geteuid(), &h, &s);
  FUZZ_CHECK(rc == TTFT_OK || rc == TTFT_ECORRUPT || rc == TTFT_ENOTSUP || rc == TTFT_ENOMEM,
             "segment read refused with %d", rc);
  FUZZ_CHECK((rc == TTFT_OK) == (s != NULL), "segment read %d with snapshot %p", rc, (void *)s);
  if (!s) return;
  FUZZ_CHECK(h.payload_len + TTFT__SEG_HDR_BYTES == n, "payload %llu of %zu bytes",
             (unsigned long long)h.payload_len, n);
  FUZZ_CHECK(ttft_snapshot_format(s, TTFT_FORMAT_PROMETHEUS, NULL, 0) > 0, "format");
  ttft__archive a;
  ttft__archive_init(&a);
  int frc = ttft__archive_fold(&a, (h.flags & TTFT__SEG_F_DEFAULT_NAME) ? NULL : h.name, s);
  FUZZ_CHECK(frc == TTFT_OK || frc == TTFT_ENOMEM || frc == TTFT_ERANGE, "fold %d", frc);
  if (frc == TTFT_OK) FUZZ_CHECK(a.exited == 1 && a.n == 1, "fold counted %llu", (unsigned long long)a.exited);
  ttft__archive_clear(&a);
  ttft_snapshot_free(s);
}

static void archive_one(const uint8_t *d, size_t n) {
  ttft__archive a;
  int rc = ttft__archive_parse(d, n, &a);
  FUZZ_CHECK(rc == TTFT_OK || rc == TTFT_ECORRUPT || rc == TTFT_ENOTSUP || rc == TTFT_ENOMEM,
             "archive parse refused with %d", rc);
  if (rc != TTFT_OK) {
    FUZZ_CHECK(a.n == 0 && a.nfolded == 0 && a.exited == 0, "a refused archive left entries");
    return;
  }
  uint64_t sum = 0;
  for (uint32_t i = 0; i < a.n; i++) {
    sum += a.e[i].exited;
    FUZZ_CHECK(ttft_snapshot_gauge(a.e[i].snap, TTFT_GAUGE_INFLIGHT) == 0, "archived gauge");
  }
  FUZZ_CHECK(sum == a.exited, "entries %llu, total %llu", (unsigned long long)sum,
             (unsigned long long)a.exited);
  unsigned char *e = NULL;
  long len = ttft__archive_encode(&a, &e);
  FUZZ_CHECK(len > 0 || len == TTFT_ENOMEM, "re-encode %ld", len);
  if (len > 0) {
    ttft__archive b;
    FUZZ_CHECK(ttft__archive_parse(e, (size_t)len, &b) == TTFT_OK, "our own archive refused");
    FUZZ_CHECK(b.exited == a.exited && b.n == a.n && b.nfolded == a.nfolded, "round trip");
    if (a.n) {
      uint64_t before = a.exited;
      int frc = ttft__archive_fold(&b, a.e[0].name, a.e[0].snap);
      FUZZ_CHECK(frc != TTFT_OK || b.exited == before + 1, "fold");
    }
    ttft__archive_clear(&b);
    ttft_allocator al;
    ttft__allocator_current(&al);
    ttft__free(&al, e);
  }
  ttft__archive_clear(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int which = data[0] & 1;
  data++;
  size--;
  if (which == 0) segment_one(data, size);
  else archive_one(data, size);
  uint8_t *f = malloc(size ? size : 1);
  FUZZ_CHECK(f != NULL, "malloc");
  memcpy(f, data, size);
  if (which == 0 && size >= TTFT__SEG_HDR_BYTES) {
    memcpy(f, TTFT__SEG_MAGIC, 8);
    put64(f + 128, size - TTFT__SEG_HDR_BYTES);
    put64(f + 136, ttft__fnv64(TTFT__FNV64_INIT, f + TTFT__SEG_HDR_BYTES, size - TTFT__SEG_HDR_BYTES));
    put64(f + 152, ttft__fnv64(TTFT__FNV64_INIT, f, 152));
    segment_one(f, size);
  } else if (which == 1 && size >= 40) {
    memcpy(f, TTFT__ARC_MAGIC, 8);
    put64(f + size - 8, ttft__fnv64(TTFT__FNV64_INIT, f, size - 8));
    archive_one(f, size);
  }
  free(f);
  return 0;
}
