/*
 * fuzz_common.h — what the fuzz targets share: the invariant check (a trap
 * under libFuzzer, a message and exit status 1 in the replay driver), a
 * byte reader over the fuzz input, and validators for the text formats.
 */
#ifndef TTFT_FUZZ_COMMON_H
#define TTFT_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#if defined(TTFT_FUZZ_LIBFUZZER)
/* libFuzzer prints the input and saves it as a crash artifact itself */
#define ttft_fuzz_current_input ((const char *)0)
#define FUZZ_DIE() __builtin_trap()
#else
/* The replay driver names the input being run, for the failure message. */
extern const char *ttft_fuzz_current_input;
#define FUZZ_DIE() exit(1)
#endif

#define FUZZ_CHECK(cond, ...)                                                            \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      fprintf(stderr, "%s:%d: invariant failed: %s\n  ", __FILE__, __LINE__, #cond);     \
      fprintf(stderr, __VA_ARGS__);                                                      \
      fprintf(stderr, "\n  input: %s\n",                                                 \
              ttft_fuzz_current_input ? ttft_fuzz_current_input : "(libFuzzer)");       \
      FUZZ_DIE();                                                                        \
    }                                                                                    \
  } while (0)

/* ------------------------------------------------------------ byte reader */
typedef struct fz_in {
  const uint8_t *p;
  size_t n;
} fz_in;

static inline int fz_left(const fz_in *in) { return in->n > 0; }
static inline uint8_t fz_u8(fz_in *in) {
  if (!in->n) return 0;
  in->n--;
  return *in->p++;
}
static inline uint32_t fz_u32(fz_in *in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v = (v << 8) | fz_u8(in);
  return v;
}
static inline uint64_t fz_u64(fz_in *in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = (v << 8) | fz_u8(in);
  return v;
}

/* ----------------------------------------------- protobuf wire validator
 * The Prometheus protobuf exposition: a sequence of messages, each
 * preceded by its length as a varint. Each message must be a well-formed
 * sequence of fields (field number >= 1; wire types 0 varint, 1 fixed64,
 * 2 length-delimited, 5 fixed32), nested messages are not descended into. */
static inline int fz_pb_varint(const uint8_t **p, const uint8_t *e, uint64_t *v) {
  *v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (*p >= e) return 0;
    uint8_t c = *(*p)++;
    *v |= (uint64_t)(c & 0x7F) << shift;
    if (!(c & 0x80)) return 1;
  }
  return 0;
}
static inline int fz_pb_message_ok(const uint8_t *p, const uint8_t *e) {
  while (p < e) {
    uint64_t key, v;
    if (!fz_pb_varint(&p, e, &key) || (key >> 3) == 0) return 0;
    switch (key & 7) {
    case 0: if (!fz_pb_varint(&p, e, &v)) return 0; break;
    case 1: if (e - p < 8) return 0; p += 8; break;
    case 2: if (!fz_pb_varint(&p, e, &v) || v > (uint64_t)(e - p)) return 0; p += v; break;
    case 5: if (e - p < 4) return 0; p += 4; break;
    default: return 0;
    }
  }
  return 1;
}
static inline int fz_protobuf_delimited_ok(const uint8_t *p, size_t n) {
  const uint8_t *e = p + n;
  while (p < e) {
    uint64_t len;
    if (!fz_pb_varint(&p, e, &len) || len > (uint64_t)(e - p) || !fz_pb_message_ok(p, p + len)) return 0;
    p += len;
  }
  return 1;
}

/* --------------------------------------------------------- JSON validator
 * RFC 8259 grammar, recursion bounded. Returns 1 when [s, s+n) is exactly
 * one JSON value surrounded by optional whitespace. */
typedef struct fz_json {
  const char *p, *e;
  int depth;
} fz_json;

static inline void fzj_ws(fz_json *j) {
  while (j->p < j->e && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}
static inline int fzj_lit(fz_json *j, const char *w) {
  size_t k = strlen(w);
  if ((size_t)(j->e - j->p) < k || memcmp(j->p, w, k) != 0) return 0;
  j->p += k;
  return 1;
}
static inline int fzj_string(fz_json *j) {
  if (j->p >= j->e || *j->p != '"') return 0;
  j->p++;
  while (j->p < j->e) {
    unsigned char c = (unsigned char)*j->p++;
    if (c == '"') return 1;
    if (c < 0x20) return 0;
    if (c == '\\') {
      if (j->p >= j->e) return 0;
      char x = *j->p++;
      if (x == 'u') {
        for (int i = 0; i < 4; i++) {
          if (j->p >= j->e) return 0;
          char h = *j->p++;
          if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) return 0;
        }
      } else if (!strchr("\"\\/bfnrt", x) || x == '\0') {
        return 0;
      }
    }
  }
  return 0;
}
static inline int fzj_digits(fz_json *j) {
  const char *s = j->p;
  while (j->p < j->e && *j->p >= '0' && *j->p <= '9') j->p++;
  return j->p > s;
}
static inline int fzj_number(fz_json *j) {
  if (j->p < j->e && *j->p == '-') j->p++;
  if (j->p < j->e && *j->p == '0') {
    j->p++;
  } else if (!fzj_digits(j)) {
    return 0;
  }
  if (j->p < j->e && *j->p == '.') {
    j->p++;
    if (!fzj_digits(j)) return 0;
  }
  if (j->p < j->e && (*j->p == 'e' || *j->p == 'E')) {
    j->p++;
    if (j->p < j->e && (*j->p == '+' || *j->p == '-')) j->p++;
    if (!fzj_digits(j)) return 0;
  }
  return 1;
}
static int fzj_value(fz_json *j);
static inline int fzj_container(fz_json *j, char open, char close, int object) {
  if (++j->depth > 64) return 0;
  j->p++; /* open */
  (void)open;
  fzj_ws(j);
  if (j->p < j->e && *j->p == close) {
    j->p++;
    j->depth--;
    return 1;
  }
  for (;;) {
    fzj_ws(j);
    if (object) {
      if (!fzj_string(j)) return 0;
      fzj_ws(j);
      if (j->p >= j->e || *j->p != ':') return 0;
      j->p++;
    }
    if (!fzj_value(j)) return 0;
    fzj_ws(j);
    if (j->p >= j->e) return 0;
    if (*j->p == ',') {
      j->p++;
      continue;
    }
    if (*j->p == close) {
      j->p++;
      j->depth--;
      return 1;
    }
    return 0;
  }
}
static int fzj_value(fz_json *j) {
  fzj_ws(j);
  if (j->p >= j->e) return 0;
  switch (*j->p) {
  case '{': return fzj_container(j, '{', '}', 1);
  case '[': return fzj_container(j, '[', ']', 0);
  case '"': return fzj_string(j);
  case 't': return fzj_lit(j, "true");
  case 'f': return fzj_lit(j, "false");
  case 'n': return fzj_lit(j, "null");
  default: return fzj_number(j);
  }
}
static inline int fz_json_valid(const char *s, size_t n) {
  fz_json j = {s, s + n, 0};
  if (!fzj_value(&j)) return 0;
  fzj_ws(&j);
  return j.p == j.e;
}

/* ------------------------------------------------ exposition validator
 * Prometheus text 0.0.4 / OpenMetrics 1.0 line syntax: comments
 * (# HELP / # TYPE / # UNIT / # EOF) and samples
 *   name[{label="value",...}] value [timestamp]
 * with [a-zA-Z_:][a-zA-Z0-9_:]* names, escaped label values and a float
 * value. OpenMetrics must end with "# EOF\n" and have nothing after it.
 * Returns 0 when fine, else the 1-based number of the first bad line. */
static inline int fz_name_char(char c, int first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}
static inline int fz_prom_value(const char *s, const char *e) {
  size_t n = (size_t)(e - s);
  if (!n) return 0;
  if ((n == 4 && !memcmp(s, "+Inf", 4)) || (n == 4 && !memcmp(s, "-Inf", 4)) ||
      (n == 3 && !memcmp(s, "NaN", 3)))
    return 1;
  char tmp[64];
  if (n >= sizeof tmp) return 0;
  memcpy(tmp, s, n);
  tmp[n] = '\0';
  char *end = NULL;
  (void)strtod(tmp, &end);
  return end == tmp + n;
}
static inline int fz_prom_sample(const char *s, const char *e) {
  const char *p = s;
  if (p >= e || !fz_name_char(*p, 1)) return 0;
  while (p < e && fz_name_char(*p, 0)) p++;
  if (p < e && *p == '{') {
    p++;
    while (p < e && *p != '}') {
      if (!fz_name_char(*p, 1)) return 0;
      while (p < e && fz_name_char(*p, 0)) p++;
      if (p + 1 >= e || p[0] != '=' || p[1] != '"') return 0;
      p += 2;
      while (p < e && *p != '"') {
        if (*p == '\n') return 0;
        if (*p == '\\') {
          if (p + 1 >= e || !strchr("\\\"n", p[1]) || p[1] == '\0') return 0;
          p++;
        }
        p++;
      }
      if (p >= e) return 0;
      p++; /* closing quote */
      if (p < e && *p == ',') p++;
    }
    if (p >= e) return 0;
    p++; /* } */
  }
  if (p >= e || *p != ' ') return 0;
  p++;
  const char *v = p;
  while (p < e && *p != ' ') p++;
  if (!fz_prom_value(v, p)) return 0;
  if (p < e) { /* timestamp */
    p++;
    if (!fz_prom_value(p, e)) return 0;
  }
  return 1;
}
static inline int fz_exposition_bad_line(const char *s, size_t n, int openmetrics) {
  const char *p = s, *end = s + n;
  int line = 0, saw_eof = 0;
  if (n == 0 || s[n - 1] != '\n') return 1;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) return line + 1;
    line++;
    if (saw_eof) return line; /* nothing after # EOF */
    if (*p == '#') {
      if ((size_t)(nl - p) == 5 && !memcmp(p, "# EOF", 5)) {
        if (!openmetrics) return line;
        saw_eof = 1;
      } else if (!((nl - p > 7 && !memcmp(p, "# HELP ", 7)) || (nl - p > 7 && !memcmp(p, "# TYPE ", 7)) ||
                   (openmetrics && nl - p > 7 && !memcmp(p, "# UNIT ", 7)))) {
        return line;
      }
    } else if (nl == p) {
      if (openmetrics) return line; /* OpenMetrics has no blank lines */
    } else if (!fz_prom_sample(p, nl)) {
      return line;
    }
    p = nl + 1;
  }
  if (openmetrics && !saw_eof) return line + 1;
  return 0;
}

#endif
