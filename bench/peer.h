/*
 * peer.h — the peer library, behind a C interface (peer_promcpp.cpp).
 * Built only when prometheus-cpp is found (TTFT_BENCH_HAVE_PROMCPP).
 */
#ifndef TTFT_BENCH_PEER_H
#define TTFT_BENCH_PEER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A prometheus::Histogram with latency buckets in seconds; NULL on failure. */
void *peer_hist_new(void);
void peer_hist_free(void *h);
/* n calls of h->Observe(), values gaps[i & mask] ns converted to seconds
 * (the conversion a Prometheus user does is part of the loop). */
void peer_observe_loop(void *h, const uint64_t *gaps, uint64_t mask, uint64_t n);
/* Observations recorded so far (to check nothing was optimised away). */
uint64_t peer_hist_count(void *h);
/* prometheus-cpp's version string, as CMake found it. */
const char *peer_name(void);

#ifdef __cplusplus
}
#endif

#endif
