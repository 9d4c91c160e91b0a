/*
 * segment.c — the shared directory's file names, the segment header, the
 * directory check and a process's identity (segment.h). Layer: common.
 */
#include "common/segment.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if TTFT_HAVE_GETRANDOM
#include <sys/random.h>
#endif
#if defined(__linux__)
#include <sys/vfs.h>
#endif

/* FNV-1a's step over 64-bit little-endian words (8x fewer dependent
 * multiplies than bytewise: a gatherer hashes every segment it reads on
 * every scrape), then over the tail bytes. Not cryptographic: it catches
 * torn and corrupted files; hostile ones are caught by the parsers. */
uint64_t ttft__fnv64(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  for (; n >= 8; n -= 8, b += 8) {
    uint64_t w = 0;
    for (int i = 7; i >= 0; i--) w = (w << 8) | b[i];
    h ^= w;
    h *= 0x100000001b3ull;
  }
  for (; n; n--, b++) {
    h ^= *b;
    h *= 0x100000001b3ull;
  }
  return h;
}


void ttft__seg_hdr_put(const ttft__seg_hdr *h, unsigned char *out) {
  memset(out, 0, TTFT__SEG_HDR_BYTES);
  memcpy(out, TTFT__SEG_MAGIC, 8);
  ttft__le32_put(out + 8, TTFT__SEG_VERSION);
  ttft__le32_put(out + 12, TTFT__SEG_HDR_BYTES);
  ttft__le64_put(out + 16, h->id.pid);
  ttft__le64_put(out + 24, h->id.start_ticks);
  ttft__le64_put(out + 32, h->id.nonce);
  ttft__le64_put(out + 40, h->seq);
  ttft__le64_put(out + 48, h->unix_ns);
  ttft__le32_put(out + 56, h->uid);
  ttft__le32_put(out + 60, h->flags);
  size_t nl = strnlen(h->name, TTFT__SEG_NAME_MAX - 1);
  memcpy(out + 64, h->name, nl);
  ttft__le64_put(out + 128, h->payload_len);
  ttft__le64_put(out + 136, h->payload_hash);
  ttft__le64_put(out + 152, ttft__fnv64(TTFT__FNV64_INIT, out, 152));
}

int ttft__seg_parse(const void *buf, size_t n, ttft__seg_hdr *h, const unsigned char **payload) {
  const unsigned char *p = (const unsigned char *)buf;
  if (!p || !h || n < TTFT__SEG_HDR_BYTES) return TTFT_ECORRUPT;
  if (memcmp(p, TTFT__SEG_MAGIC, 8) != 0) return TTFT_ECORRUPT;
  if (ttft__fnv64(TTFT__FNV64_INIT, p, 152) != ttft__le64_get(p + 152)) return TTFT_ECORRUPT;
  uint32_t ver = ttft__le32_get(p + 8), hb = ttft__le32_get(p + 12);
  if (ver > TTFT__SEG_VERSION) return TTFT_ENOTSUP;
  if (ver == 0 || hb != TTFT__SEG_HDR_BYTES) return TTFT_ECORRUPT;
  memset(h, 0, sizeof *h);
  h->id.pid = ttft__le64_get(p + 16);
  h->id.start_ticks = ttft__le64_get(p + 24);
  h->id.nonce = ttft__le64_get(p + 32);
  h->seq = ttft__le64_get(p + 40);
  h->unix_ns = ttft__le64_get(p + 48);
  h->uid = ttft__le32_get(p + 56);
  h->flags = ttft__le32_get(p + 60);
  memcpy(h->name, p + 64, TTFT__SEG_NAME_MAX - 1);
  h->name[TTFT__SEG_NAME_MAX - 1] = '\0';
  if (p[64 + TTFT__SEG_NAME_MAX - 1] != 0 || !ttft__process_name_ok(h->name)) return TTFT_ECORRUPT;
  h->payload_len = ttft__le64_get(p + 128);
  h->payload_hash = ttft__le64_get(p + 136);
  if (h->id.nonce == 0 || h->id.pid == 0 || h->id.pid > INT32_MAX) return TTFT_ECORRUPT;
  if (h->payload_len > TTFT__SEG_MAX_PAYLOAD || h->payload_len != n - TTFT__SEG_HDR_BYTES)
    return TTFT_ECORRUPT;
  if (ttft__fnv64(TTFT__FNV64_INIT, p + TTFT__SEG_HDR_BYTES, (size_t)h->payload_len) !=
      h->payload_hash)
    return TTFT_ECORRUPT;
  if (payload) *payload = p + TTFT__SEG_HDR_BYTES;
  return TTFT_OK;
}

void ttft__seg_file(const ttft__seg_id *id, const char *suffix, char *out) {
  snprintf(out, TTFT__SEG_FILE_MAX, TTFT__SEG_PREFIX "%llu-%016llx.%s", (unsigned long long)id->pid,
           (unsigned long long)id->nonce, suffix);
}

int ttft__seg_file_parse(const char *name, ttft__seg_id *id, const char **suffix) {
  size_t pl = sizeof TTFT__SEG_PREFIX - 1;
  if (strncmp(name, TTFT__SEG_PREFIX, pl) != 0) return 0;
  const char *p = name + pl;
  uint64_t pid = 0;
  int nd = 0;
  while (*p >= '0' && *p <= '9') {
    if (++nd > 10) return 0;
    pid = pid * 10 + (uint64_t)(*p++ - '0');
  }
  if (nd == 0 || pid == 0 || pid > INT32_MAX || *p++ != '-') return 0;
  uint64_t nonce = 0;
  for (int i = 0; i < 16; i++, p++) {
    int d;
    if (*p >= '0' && *p <= '9') d = *p - '0';
    else if (*p >= 'a' && *p <= 'f') d = *p - 'a' + 10;
    else return 0;
    nonce = (nonce << 4) | (uint64_t)d;
  }
  if (*p++ != '.' || nonce == 0) return 0;
  if (strcmp(p, "seg") != 0 && strcmp(p, "lock") != 0 && strcmp(p, "tmp") != 0) return 0;
  if (id) {
    id->pid = pid;
    id->nonce = nonce;
    id->start_ticks = 0;
  }
  if (suffix) *suffix = p;
  return 1;
}

/* field 22 of /proc/self/stat: the process's start time in clock ticks
 * since boot; the command (field 2) may hold spaces and parentheses, so
 * count from the last ')' */
static uint64_t start_ticks_self(void) {
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char b[1024];
  ssize_t n = read(fd, b, sizeof b - 1);
  close(fd);
  if (n <= 0) return 0;
  b[n] = '\0';
  char *p = strrchr(b, ')');
  if (!p) return 0;
  int field = 2;
  for (; *p && field < 22; p++)
    if (*p == ' ') field++;
  uint64_t v = 0;
  while (*p >= '0' && *p <= '9') v = v * 10 + (uint64_t)(*p++ - '0');
  return v;
}

void ttft__seg_self(ttft__seg_id *id) {
  id->pid = (uint64_t)getpid();
  id->start_ticks = start_ticks_self();
  uint64_t r = 0;
#if TTFT_HAVE_GETRANDOM
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) r = 0;
#endif
  if (r == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    x ^= (uint64_t)(uintptr_t)&r ^ (id->pid << 40) ^ id->start_ticks;
    r = ttft__fnv64(TTFT__FNV64_INIT, &x, sizeof x);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r = ttft__fnv64(r, &ts, sizeof ts);
  }
  id->nonce = r ? r : 1;
}

/* file systems whose data other machines share: a tmpfs of each host is
 * the only place a segment belongs (statfs(2) f_type values) */
static const char *network_fs(long t) {
  switch ((unsigned long)t & 0xFFFFFFFFul) {
  case 0x6969ul: return "nfs";
  case 0xFF534D42ul: return "cifs";
  case 0xFE534D42ul: return "smb2";
  case 0x517Bul: return "smb";
  case 0x5346414Ful: return "afs";
  case 0x6B414653ul: return "afs";
  case 0x00C36400ul: return "ceph";
  case 0x0BD00BD0ul: return "lustre";
  case 0x01161970ul: return "gfs2";
  case 0x7461636Ful: return "ocfs2";
  case 0x01021997ul: return "9p";
  case 0x65735546ul: return "fuse";
  case 0x564C0000ul: return "ncp";
  default: return NULL;
  }
}

static int why_fail(char *why, size_t n, int err, const char *fmt, const char *dir, const char *x) {
  if (why && n) snprintf(why, n, fmt, dir, x ? x : "");
  return err;
}

int ttft__shared_dir_check(const char *dir, char *why, size_t n) {
  if (why && n) why[0] = '\0';
  if (!dir || !dir[0]) return why_fail(why, n, EINVAL, "shared_dir \"%s\" is empty%s", "", NULL);
  if (strlen(dir) > PATH_MAX - 80)
    return why_fail(why, n, EINVAL, "shared_dir %.60s... is longer than PATH_MAX - 80%s", dir, NULL);
  struct stat st;
  if (stat(dir, &st) != 0) {
    int e = errno;
    return why_fail(why, n, e == ENOTDIR ? ENOTDIR : (e == EACCES ? EACCES : ENOENT),
                    "shared_dir %s: %s (create it: mkdir -m 700)", dir, strerror(e));
  }
  if (!S_ISDIR(st.st_mode))
    return why_fail(why, n, ENOTDIR, "shared_dir %s is not a directory%s", dir, NULL);
  if (st.st_uid != geteuid()) {
    char u[64];
    snprintf(u, sizeof u, " (owner uid %u, this process runs as uid %u)", (unsigned)st.st_uid,
             (unsigned)geteuid());
    return why_fail(why, n, EACCES, "shared_dir %s belongs to another user%s", dir, u);
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return why_fail(why, n, EACCES,
                    "shared_dir %s is group- or world-writable (chmod go-w; other users could "
                    "forge or remove segments)%s",
                    dir, NULL);
#if defined(__linux__)
  struct statfs sf;
  if (statfs(dir, &sf) == 0) {
    const char *fs = network_fs((long)sf.f_type);
    if (fs)
      return why_fail(why, n, EREMOTE,
                      "shared_dir %s is on a network file system (%s): segments need a local "
                      "file system, e.g. tmpfs under /dev/shm",
                      dir, fs);
  }
#endif
  return 0;
}

int ttft__process_name_ok(const char *name) {
  if (!name) return 0;
  size_t i = 0;
  for (; name[i]; i++) {
    unsigned char c = (unsigned char)name[i];
    if (i >= TTFT__SEG_NAME_MAX - 1) return 0;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == ':' || c == '-'))
      return 0;
  }
  return i > 0;
}
