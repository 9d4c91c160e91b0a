/*
 * fuzz_http.c — the /metrics endpoint's request parser (ttft__http_parse,
 * src/http.h) over arbitrary bytes. It is a pure function, so the checks
 * are about its contract: only the documented return values; on
 * TTFT__HTTP_COMPLETE the head length is within the input and the path
 * points inside the head; a complete head is still complete (and the same)
 * when more bytes follow it; every shorter prefix of a complete head is
 * "need more" (the server parses again as bytes arrive);
 * the same input always gives the same answer; protobuf or OpenMetrics is
 * chosen only when the head names it (a wildcard never selects them); and
 * it never reads past len (exact-size buffers, ASan).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "report/http.h"

/* lit (lower case) occurs in b[0, n), ignoring ASCII case */
static int contains_icase(const char *b, size_t n, const char *lit) {
  size_t k = strlen(lit), i, j;
  for (i = 0; i + k <= n; i++) {
    for (j = 0; j < k; j++) {
      char c = b[i + j];
      if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
      if (c != lit[j]) break;
    }
    if (j == k) return 1;
  }
  return 0;
}

static int allowed(int rc) {
  switch (rc) {
  case TTFT__HTTP_NEED_MORE:
  case TTFT__HTTP_COMPLETE:
  case -400: case -413: case -414: case -431: case -501: case -505:
    return 1;
  default:
    return 0;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *buf = (const char *)data;
  ttft__http_req req, again;
  memset(&req, 0x5A, sizeof req);
  int rc = ttft__http_parse(size ? buf : NULL, size, &req);
  FUZZ_CHECK(allowed(rc), "ttft__http_parse returned %d", rc);
  memset(&again, 0x5A, sizeof again);
  int rc2 = ttft__http_parse(size ? buf : NULL, size, &again);
  FUZZ_CHECK(rc2 == rc, "not deterministic: %d then %d", rc, rc2);
  if (rc == TTFT__HTTP_NEED_MORE)
    FUZZ_CHECK(size < TTFT__HTTP_MAX_REQUEST, "NEED_MORE for %zu bytes (limit %d)", size, TTFT__HTTP_MAX_REQUEST);
  if (rc != TTFT__HTTP_COMPLETE) return 0;

  FUZZ_CHECK(req.head_len > 0 && req.head_len <= size && req.head_len <= TTFT__HTTP_MAX_REQUEST,
             "head_len %zu of %zu", req.head_len, size);
  FUZZ_CHECK(req.method == TTFT__HTTP_GET || req.method == TTFT__HTTP_HEAD || req.method == TTFT__HTTP_OTHER,
             "method %d", (int)req.method);
  FUZZ_CHECK(req.minor_version == 0 || req.minor_version == 1, "HTTP/1.%d", req.minor_version);
  FUZZ_CHECK(req.path != NULL && req.path >= buf && req.path + req.path_len <= buf + req.head_len,
             "path outside the head");
  FUZZ_CHECK(req.accept == TTFT__HTTP_ACCEPT_TEXT || req.accept == TTFT__HTTP_ACCEPT_OPENMETRICS ||
                 req.accept == TTFT__HTTP_ACCEPT_PROTOBUF,
             "accept %d", (int)req.accept);
  if (req.accept == TTFT__HTTP_ACCEPT_PROTOBUF)
    FUZZ_CHECK(contains_icase(buf, req.head_len, "application/vnd.google.protobuf"),
               "protobuf chosen without being named");
  if (req.accept == TTFT__HTTP_ACCEPT_OPENMETRICS)
    FUZZ_CHECK(contains_icase(buf, req.head_len, "application/openmetrics-text"),
               "OpenMetrics chosen without being named");
  FUZZ_CHECK(req.content_length <= TTFT__HTTP_MAX_REQUEST, "content_length %llu accepted", req.content_length);
  FUZZ_CHECK(again.head_len == req.head_len && again.path == req.path && again.path_len == req.path_len &&
                 again.method == req.method,
             "second parse differs");
  FUZZ_CHECK(memchr(req.path, '?', req.path_len) == NULL && memchr(req.path, '#', req.path_len) == NULL,
             "path keeps its query or fragment");

  /* the head alone, in an exact-size buffer: same answer */
  char *head = malloc(req.head_len);
  FUZZ_CHECK(head != NULL, "malloc");
  memcpy(head, buf, req.head_len);
  ttft__http_req h2;
  rc2 = ttft__http_parse(head, req.head_len, &h2);
  FUZZ_CHECK(rc2 == TTFT__HTTP_COMPLETE && h2.head_len == req.head_len && h2.path_len == req.path_len &&
                 h2.method == req.method && h2.minor_version == req.minor_version &&
                 h2.accept == req.accept && h2.content_length == req.content_length,
             "the head without what follows parses differently: %d", rc2);
  /* shorter prefixes are never complete */
  size_t cuts[] = {0, 1, req.head_len / 2, req.head_len - 2, req.head_len - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    size_t k = cuts[i];
    if (k >= req.head_len) continue;
    char *pre = malloc(k ? k : 1);
    FUZZ_CHECK(pre != NULL, "malloc");
    memcpy(pre, buf, k);
    int rp = ttft__http_parse(k ? pre : NULL, k, &h2);
    /* the server parses again as bytes arrive: a prefix of a good head
     * must ask for more, not be refused or taken as complete */
    FUZZ_CHECK(rp == TTFT__HTTP_NEED_MORE, "prefix of %zu bytes of a %zu-byte head: %d", k, req.head_len, rp);
    free(pre);
  }
  free(head);
  return 0;
}
