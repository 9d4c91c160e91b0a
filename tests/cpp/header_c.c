/* header_c.c — ttft.h compiles warning-free as strict C99 and C11 and
 * links: every public type is used, the short hook names work, and a few
 * calls run against the library. Built by tests/cpp.cmake. */
#include <ttft.h>

#include <stdio.h>
#include <string.h>

static int failures = 0;
#define EXPECT_EQ_U64(actual, expected)                                            \
  do {                                                                             \
    unsigned long long a_ = (unsigned long long)(actual);                          \
    unsigned long long e_ = (unsigned long long)(expected);                        \
    if (a_ != e_) {                                                                \
      fprintf(stderr, "%s:%d: %s: expected %llu, actual %llu\n", __FILE__,         \
              __LINE__, #actual, e_, a_);                                          \
      failures++;                                                                  \
    }                                                                              \
  } while (0)
#define EXPECT_EQ_INT(actual, expected)                                            \
  do {                                                                             \
    long a_ = (long)(actual);                                                      \
    long e_ = (long)(expected);                                                    \
    if (a_ != e_) {                                                                \
      fprintf(stderr, "%s:%d: %s: expected %ld, actual %ld\n", __FILE__, __LINE__, \
              #actual, e_, a_);                                                    \
      failures++;                                                                  \
    }                                                                              \
  } while (0)

/* Every public type appears in a declaration. */
static size_t sizes(void) {
  ttft_config c;
  ttft_slo slo;
  ttft_request req;
  ttft_seq_info info;
  ttft_label label;
  ttft_allocator alloc;
  ttft_metric m = TTFT_METRIC_TTFT;
  ttft_status st = TTFT_COMPLETED;
  ttft_phase ph = TTFT_PHASE_SCHEDULED;
  ttft_counter k = TTFT_COUNTER_BEGUN;
  ttft_format f = TTFT_FORMAT_TEXT;
  ttft_clock ck = TTFT_CLOCK_MONOTONIC;
  ttft_gauge g = TTFT_GAUGE_INFLIGHT;
  ttft_split sp = TTFT_SPLIT_PREFIX_CACHE;
  ttft_errno e = TTFT_OK;
  ttft_seq s = 0;
  ttft_registry *r = NULL;
  ttft_snapshot *snap = NULL;
  ttft_http *h = NULL;
  (void)r;
  (void)snap;
  (void)h;
  return sizeof c + sizeof slo + sizeof req + sizeof info + sizeof label + sizeof alloc +
         (size_t)m + (size_t)st + (size_t)ph + (size_t)k + (size_t)f + (size_t)ck + (size_t)g +
         (size_t)sp + (size_t)(e == TTFT_OK) + (size_t)s;
}

int main(void) {
  ttft_registry *r;
  ttft_seq s;
  ttft_snapshot *snap;

  EXPECT_EQ_U64(sizes() > 0, 1);
  EXPECT_EQ_U64(ttft_version_number(), TTFT_VERSION_NUMBER);
  EXPECT_EQ_INT(strcmp(ttft_version_string(), TTFT_VERSION_STRING), 0);
  EXPECT_EQ_INT(strcmp(ttft_err_name(TTFT_ESTALE), "TTFT_ESTALE"), 0);

  r = ttft_registry_new(NULL);
  s = ttft_begin(r, 1000);
  EXPECT_EQ_INT(s != 0, 1);
  /* The short names are header aliases of the prefixed symbols. */
  EXPECT_EQ_INT(token_emitted(r, s, 1, 1500), TTFT_OK);
  EXPECT_EQ_INT(stream_end(r, s, TTFT_COMPLETED, 2000), TTFT_OK);
  EXPECT_EQ_INT(stream_end(r, s, TTFT_COMPLETED, 2000), TTFT_ESTALE);
  snap = ttft_snapshot_take(r);
  EXPECT_EQ_U64(ttft_snapshot_quantile(snap, TTFT_METRIC_TTFT, 0.5), 500);
  EXPECT_EQ_U64(ttft_snapshot_counter(snap, TTFT_COUNTER_COMPLETED), 1);
  ttft_snapshot_free(snap);
  ttft_registry_free(r);

  printf("header_c (C %ld): %s\n", (long)__STDC_VERSION__, failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
