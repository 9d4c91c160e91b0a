/*
 * workload.h — a deterministic, seeded streaming workload recorded through
 * the public hooks with caller timestamps, shared by test_codec, test_merge
 * and the snapshot writer of the CLI tests (tests/tools/mksnap.c).
 *
 * The same seed always produces the same events, so replaying a workload
 * into two registries gives two identical recordings — what the merge and
 * delta tests compare against.
 */
#ifndef TTFT_TEST_WORKLOAD_H
#define TTFT_TEST_WORKLOAD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ttft.h"

typedef struct wl_rng {
  uint64_t s;
} wl_rng;

static inline uint64_t wl_next(wl_rng *r) { /* splitmix64 */
  uint64_t z = (r->s += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

static inline double wl_unit(wl_rng *r) { return (double)(wl_next(r) >> 11) * 0x1.0p-53; }

/* log-uniform in [lo, hi] ns */
static inline uint64_t wl_logu(wl_rng *r, double lo, double hi) {
  return (uint64_t)(lo * pow(hi / lo, wl_unit(r)));
}

typedef struct wl_params {
  uint64_t seed;
  unsigned requests;     /* sequences begun and ended                        */
  unsigned left_open;    /* extra sequences begun and left in flight         */
  double scale;          /* multiplies every duration (a "slower deploy")    */
  const char *classes[4];/* class names to spread requests over; NULL ends   */
  uint64_t t0;           /* first timestamp, ns (nonzero)                    */
} wl_params;

static inline void wl_params_init(wl_params *p, uint64_t seed, unsigned requests) {
  p->seed = seed;
  p->requests = requests;
  p->left_open = 0;
  p->scale = 1.0;
  p->classes[0] = "default";
  p->classes[1] = p->classes[2] = p->classes[3] = NULL;
  p->t0 = UINT64_C(1000000000000);
}

/* Add the classes a workload uses (SLO: chat 300 ms TTFT / 50 ms TPOT,
 * batch 5 s TTFT, others none); EEXIST is fine. */
static inline void wl_add_classes(ttft_registry *r, const wl_params *p) {
  for (int i = 0; i < 4 && p->classes[i]; i++) {
    ttft_slo slo;
    ttft_slo_init(&slo);
    if (!strcmp(p->classes[i], "chat")) {
      slo.ttft_ns = 300000000;
      slo.tpot_ns = 50000000;
      slo.stall_threshold_ns = 250000000;
    } else if (!strcmp(p->classes[i], "batch")) {
      slo.ttft_ns = 5000000000ull;
      slo.e2e_ns = 60000000000ull;
    }
    if (strcmp(p->classes[i], "default") != 0) (void)ttft_class_add(r, p->classes[i], &slo);
  }
}

/* Record the workload into r; returns the timestamp after the last event
 * (sequences run one after another, so each window is self-contained). */
static inline uint64_t wl_play(ttft_registry *r, const wl_params *p) {
  wl_rng g = {p->seed};
  int ncls = 0;
  while (ncls < 4 && p->classes[ncls]) ncls++;
  uint64_t t = p->t0;
  for (unsigned i = 0; i < p->requests + p->left_open; i++) {
    ttft_request req;
    ttft_request_init(&req);
    const char *cname = p->classes[wl_next(&g) % (uint64_t)ncls];
    int cid = ttft_class_find(r, cname);
    req.class_id = cid > 0 ? cid : 0;
    req.prompt_tokens = (uint32_t)wl_logu(&g, 16, 60000);
    req.prefix_hit = (int)(wl_next(&g) % 3) - 1;
    ttft_seq s = ttft_begin_ex(r, &req, t);
    uint64_t queue = (uint64_t)(p->scale * (double)wl_logu(&g, 100000, 50000000));
    uint64_t prefill = (uint64_t)(p->scale * (double)wl_logu(&g, 2000000, 900000000));
    t += 1 + queue;
    ttft_mark(r, s, TTFT_PHASE_SCHEDULED, t);
    double u = wl_unit(&g);
    unsigned emissions = u < 0.04 ? 0 : u < 0.08 ? 1 : (unsigned)(2 + wl_next(&g) % 120);
    if (i >= p->requests) emissions = emissions ? 1 : 0;
    if (emissions) {
      t += prefill;
      ttft_token_emitted(r, s, 1, t);
    }
    for (unsigned k = 1; k < emissions; k++) {
      uint64_t gap = wl_unit(&g) < 0.01 ? wl_logu(&g, 300000000, 2000000000)
                                         : wl_logu(&g, 8000000, 60000000);
      t += 1 + (uint64_t)(p->scale * (double)gap);
      ttft_token_emitted(r, s, wl_unit(&g) < 0.1 ? 3 : 1, t);
    }
    if (i >= p->requests) continue; /* left in flight */
    t += 1000;
    double v = wl_unit(&g);
    ttft_status st = v < 0.90 ? TTFT_COMPLETED : v < 0.96 ? TTFT_CANCELLED : TTFT_ERROR;
    if (!emissions && v < 0.90) st = TTFT_CANCELLED; /* abandoned before the first token */
    ttft_stream_end(r, s, st, t);
  }
  return t;
}

#endif
