// peer_promcpp.cpp — prometheus-cpp's Histogram::Observe as a peer.
#include "peer.h"

#include <prometheus/client_metric.h>
#include <prometheus/histogram.h>

#include <new>

namespace {
// Latency buckets in seconds, the shape a server exports for ITL/TTFT.
const prometheus::Histogram::BucketBoundaries kBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
    0.075, 0.1,    0.15,  0.2,  0.3,   0.5,  0.75,  1.0,  2.5,  5.0};
}  // namespace

extern "C" void *peer_hist_new(void) {
  try {
    return new prometheus::Histogram(kBuckets);
  } catch (...) {
    return nullptr;
  }
}

extern "C" void peer_hist_free(void *h) {
  delete static_cast<prometheus::Histogram *>(h);
}

extern "C" void peer_observe_loop(void *h, const uint64_t *gaps, uint64_t mask, uint64_t n) {
  auto *hist = static_cast<prometheus::Histogram *>(h);
  for (uint64_t i = 0; i < n; i++) hist->Observe(static_cast<double>(gaps[i & mask]) * 1e-9);
}

extern "C" uint64_t peer_hist_count(void *h) {
  return static_cast<prometheus::Histogram *>(h)->Collect().histogram.sample_count;
}

extern "C" const char *peer_name(void) { return "prometheus-cpp Histogram::Observe"; }
