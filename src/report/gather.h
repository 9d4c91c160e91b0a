/*
 * gather.h — the gatherer's readers, for report/gather.c, its tests and
 * the fuzzer (tests/fuzz/fuzz_segment.c): a segment file's bytes to a
 * snapshot, and the directory's archive (format: top of gather.c) to and
 * from bytes. Every reader treats its input as hostile: never reads past
 * n, refuses with TTFT_ECORRUPT / TTFT_ENOTSUP / TTFT_ENOMEM.
 * Layer: report (src/README.md).
 */
#ifndef TTFT_GATHER_H
#define TTFT_GATHER_H

#include <stddef.h>
#include <stdint.h>

#include "common/segment.h"
#include "common/snapshot.h"

#define TTFT__ARC_MAGIC "TTFTARC1"
#define TTFT__ARC_VERSION 1u
#define TTFT__ARC_MAX_NAMES 256u      /* entries; a name beyond: "exited"    */
#define TTFT__ARC_MAX_FOLDED 65536u   /* identities folded, files not gone   */
#define TTFT__ARC_MAX_BYTES TTFT__SEG_MAX_PAYLOAD
#define TTFT__ARC_EXITED "exited"     /* processes without a stable name     */

/* One segment file's bytes: header (ttft__seg_parse) and snapshot. When
 * expect is not NULL the header's pid and nonce must be its; the header's
 * uid must be uid. On TTFT_OK *h and *out (owned by the caller) are set. */
TTFT_HIDDEN int ttft__gather_read_segment(const void *buf, size_t n, const ttft__seg_id *expect,
                                          uint32_t uid, ttft__seg_hdr *h, ttft_snapshot **out);

typedef struct ttft__arc_entry {
  char name[TTFT__SEG_NAME_MAX];
  uint64_t exited;    /* processes folded under this name                  */
  ttft_snapshot *snap;/* what they published, gauges but COARSE zeroed     */
} ttft__arc_entry;

typedef struct ttft__arc_id {
  uint64_t pid, nonce;
} ttft__arc_id;

typedef struct ttft__archive {
  uint64_t exited;            /* processes folded, ever (sum of entries') */
  uint32_t n;                 /* entries, sorted by name                  */
  ttft__arc_entry e[TTFT__ARC_MAX_NAMES];
  uint32_t nfolded, capfolded;
  ttft__arc_id *folded;       /* folded, files perhaps still there        */
} ttft__archive;

/* An empty archive (zeroed, no allocation). */
TTFT_HIDDEN void ttft__archive_init(ttft__archive *a);
/* Free what a holds and leave it empty. */
TTFT_HIDDEN void ttft__archive_clear(ttft__archive *a);
/* Parse n bytes into a (which must be empty). TTFT_OK, TTFT_ECORRUPT,
 * TTFT_ENOTSUP (a future version), TTFT_ENOMEM; a is left empty on error. */
TTFT_HIDDEN int ttft__archive_parse(const void *buf, size_t n, ttft__archive *a);
/* Encode a into *out (allocated with the current allocator, freed with
 * ttft__free by the caller); returns the length or a negative TTFT_E*. */
TTFT_HIDDEN long ttft__archive_encode(const ttft__archive *a, unsigned char **out);
/* Fold snapshot s (a dead process's last state; not consumed) into the
 * entry of name (name NULL: TTFT__ARC_EXITED; a name beyond the
 * entries' bound also goes there), counting one more exited process.
 * TTFT_OK, TTFT_ENOMEM, TTFT_ERANGE. */
TTFT_HIDDEN int ttft__archive_fold(ttft__archive *a, const char *name, const ttft_snapshot *s);
/* Whether identity (pid, nonce) is in a's folded list. */
TTFT_HIDDEN int ttft__archive_folded(const ttft__archive *a, uint64_t pid, uint64_t nonce);

/* A deep copy of s, parts included; NULL on ENOMEM. */
TTFT_HIDDEN ttft_snapshot *ttft__snapshot_copy(const ttft_snapshot *s);
/* Zero the gauges an exited process leaves behind (all but COARSE). */
TTFT_HIDDEN void ttft__snapshot_zero_live_gauges(ttft_snapshot *s);

#endif /* TTFT_GATHER_H */
