/* text_lines.h — reading rendered text reports line by line in tests. */
#ifndef TTFT_TESTS_TEXT_LINES_H
#define TTFT_TESTS_TEXT_LINES_H

#include <string.h>

/* The first line of text that starts with prefix, copied into out (cap
 * bytes, NUL-terminated, cut to fit): returns 1; 0 (out empty) when no
 * line starts with prefix. */
static inline int line_starting(const char *text, const char *prefix, char *out, size_t cap) {
  size_t pl = strlen(prefix);
  for (const char *p = text; p && *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    if (len >= pl && !memcmp(p, prefix, pl)) {
      if (len >= cap) len = cap - 1;
      memcpy(out, p, len);
      out[len] = '\0';
      return 1;
    }
    p = nl ? nl + 1 : NULL;
  }
  out[0] = '\0';
  return 0;
}

/* The widest line of text, in columns (UTF-8 code points). */
static inline size_t max_line_columns(const char *t) {
  size_t worst = 0, cur = 0;
  for (; *t; t++) {
    if (*t == '\n') {
      if (cur > worst) worst = cur;
      cur = 0;
    } else if (((unsigned char)*t & 0xC0) != 0x80) {
      cur++;
    }
  }
  return cur > worst ? cur : worst;
}

#endif
