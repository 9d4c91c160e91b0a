/*
 * test_clock.c — the registry's clock sources (clock.c).
 *
 *   sources            a MONOTONIC registry reads MONOTONIC; a TSC one
 *                      the CPU counter or, without one, MONOTONIC; every
 *                      FASTEST registry of the process the same one of the
 *                      two (measured once); NULL reads MONOTONIC
 *   monotonic_and_near each source read back to back never goes back and
 *                      stays within a second of CLOCK_MONOTONIC (same
 *                      epoch and rate: a second is a bound on a torn or
 *                      uncalibrated reading, not on speed)
 *
 * The seqlock under concurrent re-anchors: tests/test_litmus.c.
 */
#include <stdio.h>
#include <string.h>

#include "ttft.h"
#include "task.h"

static ttft_registry *with_clock(ttft_clock c) {
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.max_inflight = 4;
  cfg.clock = c;
  return ttft_registry_new(&cfg);
}

TEST(sources) {
  ttft_registry *m = with_clock(TTFT_CLOCK_MONOTONIC), *t = with_clock(TTFT_CLOCK_TSC);
  ttft_registry *f1 = with_clock(TTFT_CLOCK_FASTEST), *f2 = with_clock(TTFT_CLOCK_FASTEST);
  EXPECT_NOT_NULL(m);
  EXPECT_NOT_NULL(t);
  EXPECT_NOT_NULL(f1);
  EXPECT_NOT_NULL(f2);
  EXPECT_EQ_INT(TTFT_CLOCK_MONOTONIC, ttft_registry_clock(m));
  EXPECT_EQ_INT(TTFT_CLOCK_MONOTONIC, ttft_registry_clock(NULL));
  ttft_clock ct = ttft_registry_clock(t), cf = ttft_registry_clock(f1);
  EXPECT_TRUE(ct == TTFT_CLOCK_MONOTONIC || ct == TTFT_CLOCK_TSC);
  EXPECT_TRUE(cf == TTFT_CLOCK_MONOTONIC || cf == TTFT_CLOCK_TSC);
  EXPECT_EQ_INT(cf, ttft_registry_clock(f2));
  /* FASTEST picks the counter only when a TSC registry could have it */
  if (cf == TTFT_CLOCK_TSC) EXPECT_EQ_INT(TTFT_CLOCK_TSC, ct);
  fprintf(stderr, "TSC registry reads %s; FASTEST chose %s\n", ct == TTFT_CLOCK_TSC ? "the CPU counter" : "CLOCK_MONOTONIC",
          cf == TTFT_CLOCK_TSC ? "the CPU counter" : "CLOCK_MONOTONIC");
  ttft_registry_free(m);
  ttft_registry_free(t);
  ttft_registry_free(f1);
  ttft_registry_free(f2);
}

TEST(monotonic_and_near) {
  const ttft_clock cs[] = {TTFT_CLOCK_MONOTONIC, TTFT_CLOCK_TSC, TTFT_CLOCK_FASTEST};
  for (int i = 0; i < 3; i++) {
    ttft_registry *r = with_clock(cs[i]);
    EXPECT_NOT_NULL(r);
    if (!r) continue;
    uint64_t prev = 0, back = 0, far = 0;
    for (int k = 0; k < 200000; k++) {
      uint64_t t = ttft_registry_now_ns(r);
      back += t < prev;
      prev = t;
      if (k % 4096 == 0) {
        uint64_t m = ttft_now_ns();
        far += (t > m ? t - m : m - t) > UINT64_C(1000000000);
      }
    }
    EXPECT_EQ_U64(0, back);
    EXPECT_EQ_U64(0, far);
    ttft_registry_free(r);
  }
}

TU_MAIN()
