/*
 * render.h — a snapshot's whole output in one format, malloc'd, for tests
 * that read what ttft_snapshot_format writes.
 *
 *   char *t = render(s, f);          NULL (after a failed expectation) when
 *                                    the format wrote nothing; free() it
 *   char *t = render_len(s, f, &n);  the same, and its length in *n (0 when
 *                                    NULL is returned)
 *
 * Each call expects a length > 0 and the second call to return the length
 * the first one asked for (snprintf's rules).
 */
#ifndef TTFT_TEST_RENDER_H
#define TTFT_TEST_RENDER_H

#include <stdlib.h>

#include "ttft.h"
#include "task.h"

static inline char *render_len(const ttft_snapshot *s, ttft_format f, long *len) {
  long n = ttft_snapshot_format(s, f, NULL, 0);
  *len = 0;
  EXPECT_TRUE(n > 0);
  if (n <= 0) return NULL;
  char *t = malloc((size_t)n + 1);
  if (t) {
    EXPECT_EQ_INT(n, ttft_snapshot_format(s, f, t, (size_t)n + 1));
    *len = n;
  }
  return t;
}

static inline char *render(const ttft_snapshot *s, ttft_format f) {
  long n;
  return render_len(s, f, &n);
}

#endif
