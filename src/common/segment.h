/*
 * segment.h — the files of a shared directory (1.3, docs/multiprocess.md):
 * what a publishing registry (record/publish.c) writes and a gatherer
 * (report/gather.c) reads. Both sides know only this header and the
 * public snapshot codec.
 *
 * A directory holds, per live process P (pid, start time, nonce):
 *   ttft-<pid>-<nonce>.lock  created first; P holds an open-file-description
 *                            write lock (F_OFD_SETLK) on it while it lives.
 *                            The kernel drops the lock when P dies, however
 *                            it dies: a gatherer that can take the lock (or
 *                            sees F_OFD_GETLK report none) knows P is dead.
 *   ttft-<pid>-<nonce>.seg   the last published state: a header (below)
 *                            and the ttft_snapshot_encode bytes. Replaced
 *                            whole: written to .tmp, then rename(2)d over.
 *   ttft-<pid>-<nonce>.tmp   a publish in progress (or one P died in).
 * and, for the whole directory:
 *   ttft-archive.seg         what exited processes last published, folded
 *                            (report/gather.c owns its format)
 *   ttft-fold.lock           gatherers hold it (flock) while they fold
 * Anything else in the directory is ignored. <pid> is decimal, <nonce> 16
 * lowercase hex digits.
 *
 * Layer: common (src/README.md).
 */
#ifndef TTFT_SEGMENT_H
#define TTFT_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "common/internal.h"

#define TTFT__SEG_MAGIC "TTFTSEG1"    /* 8 bytes, no NUL                      */
#define TTFT__SEG_VERSION 1u          /* a reader skips a larger version      */
#define TTFT__SEG_HDR_BYTES 160u      /* the header's size on disk            */
#define TTFT__SEG_NAME_MAX 64u        /* process name incl. NUL               */
#define TTFT__SEG_MAX_PAYLOAD (256u << 20) /* larger is refused as hostile    */
#define TTFT__SEG_PREFIX "ttft-"
#define TTFT__SEG_ARCHIVE "ttft-archive.seg"
#define TTFT__SEG_FOLD_LOCK "ttft-fold.lock"
#define TTFT__SEG_FILE_MAX 64u        /* longest file name we make, incl. NUL */

#define TTFT__SEG_F_FINAL 1u          /* published by ttft_registry_free or at
                                         exit: the process publishes no more */
#define TTFT__SEG_F_DEFAULT_NAME 2u   /* name is the default "pid-<pid>"      */

/* Who published a segment. pid + start_ticks + nonce tell two processes
 * apart even when the pid is reused (start_ticks: field 22 of
 * /proc/self/stat, 0 when unknown; nonce: 64 random bits per process and
 * registry, never 0). */
typedef struct ttft__seg_id {
  uint64_t pid, start_ticks, nonce;
} ttft__seg_id;

/* The header, as read or to be written. On disk (little-endian):
 *   0 magic[8]  8 u32 version  12 u32 header bytes (160)
 *  16 u64 pid  24 u64 start_ticks  32 u64 nonce
 *  40 u64 seq (publishes by this process, from 1)
 *  48 u64 unix_ns (wall clock of the publish)
 *  56 u32 uid  60 u32 flags (TTFT__SEG_F_*)
 *  64 char name[64] (NUL-padded)
 * 128 u64 payload bytes  136 u64 payload FNV-1a-64
 * 144 u64 reserved (0)    152 u64 header FNV-1a-64 over bytes 0..151 */
typedef struct ttft__seg_hdr {
  ttft__seg_id id;
  uint64_t seq, unix_ns;
  uint32_t uid, flags;
  char name[TTFT__SEG_NAME_MAX];
  uint64_t payload_len, payload_hash;
} ttft__seg_hdr;

/* Little-endian fields of the segment and archive formats. */
static inline void ttft__le64_put(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void ttft__le32_put(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint64_t ttft__le64_get(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
static inline uint32_t ttft__le32_get(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* FNV-1a's 64-bit step over n bytes taken as little-endian 64-bit words,
 * then the remaining bytes one by one, continuing from h (start with
 * TTFT__FNV64_INIT). The header hash and payload hash below use it. */
#define TTFT__FNV64_INIT 0xcbf29ce484222325ull
TTFT_HIDDEN uint64_t ttft__fnv64(uint64_t h, const void *p, size_t n);

/* Write h into out[TTFT__SEG_HDR_BYTES] (computes the header hash; the
 * caller sets payload_len and payload_hash). */
TTFT_HIDDEN void ttft__seg_hdr_put(const ttft__seg_hdr *h, unsigned char *out);

/* Parse n bytes of a segment file. TTFT_OK and *h filled when the header
 * is sound, of a version this library reads, and n covers exactly the
 * header and its payload (whose hash matches): *payload then points at
 * the payload inside buf. TTFT_ECORRUPT for anything else, TTFT_ENOTSUP
 * for a future version. Never reads past n. */
TTFT_HIDDEN int ttft__seg_parse(const void *buf, size_t n, ttft__seg_hdr *h,
                                const unsigned char **payload);

/* The file name of id's segment with suffix ("seg", "lock", "tmp"):
 * "ttft-<pid>-<nonce>.<suffix>" into out[TTFT__SEG_FILE_MAX]. */
TTFT_HIDDEN void ttft__seg_file(const ttft__seg_id *id, const char *suffix, char *out);

/* Parse a directory entry's name made by ttft__seg_file. Returns 1 and
 * fills *id and *suffix (a pointer into name) when it is one, else 0. */
TTFT_HIDDEN int ttft__seg_file_parse(const char *name, ttft__seg_id *id, const char **suffix);

/* This process's identity: pid, start ticks (/proc/self/stat, 0 when
 * unreadable) and a fresh non-zero random nonce (getrandom, else the
 * clock and the address space). Not for the hooks. */
TTFT_HIDDEN void ttft__seg_self(ttft__seg_id *id);

/* Whether dir may hold segments: it exists and is a directory, belongs to
 * this process's effective user, is not group- or world-writable, and is
 * not on a network file system (NFS, SMB/CIFS, AFS, Ceph, Lustre, GFS2,
 * OCFS2, 9p, FUSE). Returns 0, else an errno value (ENOENT, ENOTDIR,
 * EACCES, EREMOTE, EINVAL for NULL or "" or a path longer than PATH_MAX -
 * 80) and a one-line reason naming the directory in why (snprintf rules;
 * why may be NULL when n is 0). */
TTFT_HIDDEN int ttft__shared_dir_check(const char *dir, char *why, size_t n);

/* Whether name is a usable process name: 1..63 bytes of [A-Za-z0-9_.:-]. */
TTFT_HIDDEN int ttft__process_name_ok(const char *name);

#endif /* TTFT_SEGMENT_H */
