/* top_source.h — where ttft-top's snapshots come from: a libttft endpoint
 * (GET /snapshot over a plain HTTP/1.1 socket, decoded with
 * ttft_snapshot_decode) or a shared directory (ttft_gather_take). Every
 * failure becomes one line of text for the status line; nothing here
 * prints or exits. */
#ifndef TTFT_TOOLS_TOP_SOURCE_H
#define TTFT_TOOLS_TOP_SOURCE_H

#include <stddef.h>

#include "ttft.h"

typedef struct top_source top_source;

/* url "http://HOST[:PORT][/]" (HOST a name, an IPv4 address or [IPv6];
 * default port 80; a path other than "/" or "/snapshot" is refused), or
 * dir non-NULL for a gather. NULL with why in msg. timeout_ms bounds one
 * whole fetch (connect, send, receive). */
top_source *top_source_open(const char *url, const char *dir, int timeout_ms, char *msg,
                            size_t cap);

/* One snapshot (cumulative, as the source holds it) or NULL with why in
 * msg: "connect: Connection refused", "timed out after 2.0 s",
 * "HTTP 404", "not a snapshot (garbage)", "snapshot version 9 is newer
 * than this ttft-top reads (1..3)", ... */
ttft_snapshot *top_source_take(top_source *src, char *msg, size_t cap);

/* What the source is, for the header line: the URL or "dir D". */
const char *top_source_name(const top_source *src);

/* NULL is a no-op. */
void top_source_close(top_source *src);

/* Why the bytes of a /snapshot answer do not decode, as one line: a
 * newer or older encoding than this build reads, or garbage. */
void top_source_explain(const unsigned char *p, size_t n, int err, char *msg, size_t cap);

#endif
