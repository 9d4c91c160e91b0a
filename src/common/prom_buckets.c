/* prom_buckets.c — the default classic (Prometheus/OpenMetrics) bucket
 * bounds per metric. A registry copies them into its export configuration
 * at creation (record/registry.c); the exporters read them from snapshots.
 * Layer: common (src/README.md). */
#include "common/snapshot.h"

#define MS(x) ((uint64_t)((x)*1000000.0 + 0.5)) /* milliseconds -> ns */

/* OTel GenAI semconv advised boundaries (seconds, here in ns), extended
 * past their 10 s (TTFT) and 81.92 s (duration) tops to 120 s and beyond:
 * a real run had TTFT p99 = 42.8 s, which the 10 s top bucket read as 10 s
 * (-77 %). Above the last bound only +Inf is left, so the tail must stay
 * inside the bounds. */
static const uint64_t otel_ttft[] = {
    MS(1),    MS(5),    MS(10),   MS(20),    MS(40),    MS(60),   MS(80),
    MS(100),  MS(250),  MS(500),  MS(750),   MS(1000),  MS(2500), MS(5000),
    MS(7500), MS(10000), MS(15000), MS(20000), MS(30000), MS(60000), MS(120000)};
static const uint64_t otel_tpot[] = {MS(10),  MS(25),  MS(50),  MS(75),  MS(100),
                                     MS(150), MS(200), MS(300), MS(400), MS(500),
                                     MS(750), MS(1000), MS(2500)};
static const uint64_t otel_duration[] = {
    MS(10),   MS(20),   MS(40),    MS(80),    MS(160),   MS(320),   MS(640),
    MS(1280), MS(2560), MS(5120), MS(10240), MS(20480), MS(40960), MS(81920),
    MS(163840)};

/* Everything else that is a time: the Renard R10 preferred numbers
 * (10 steps a decade, 10^(1/10) = 1.259 apart) from 0.5 ms to 630 s, so a
 * quantile interpolated inside one bucket is off by at most one step
 * anywhere from 1 ms to 10 min. 62 bounds, under TTFT_MAX_PROM_BUCKETS. */
#define R10(d)                                                              \
  MS(1.00 * (d)), MS(1.25 * (d)), MS(1.60 * (d)), MS(2.00 * (d)), MS(2.50 * (d)), \
      MS(3.15 * (d)), MS(4.00 * (d)), MS(5.00 * (d)), MS(6.30 * (d)), MS(8.00 * (d))
static const uint64_t fine_time[] = {
    MS(0.5), MS(0.63), MS(0.8), R10(1), R10(10), R10(100), R10(1000), R10(10000),
    MS(100000), MS(125000), MS(160000), MS(200000), MS(250000), MS(315000),
    MS(400000), MS(500000), MS(630000)};

/* Output tokens per sequence: 0 (streams that emitted nothing), then steps
 * of at most 2x (1.5x and 1.33x alternating above 32) up to 256 Ki. */
static const uint64_t tokens_default[] = {
    0,    1,     2,     4,     8,     16,    32,    48,    64,     96,    128,
    192,  256,   384,   512,   768,   1024,  1536,  2048,  3072,   4096,  6144,
    8192, 12288, 16384, 24576, 32768, 49152, 65536, 98304, 131072, 262144};

#define NELEM(a) (uint32_t)(sizeof(a) / sizeof((a)[0]))

const uint64_t *ttft__default_prom_buckets(ttft_metric m, uint32_t *n) {
  const uint64_t *b;
  uint32_t k;
  switch (m) {
  case TTFT_METRIC_TTFT: b = otel_ttft, k = NELEM(otel_ttft); break;
  case TTFT_METRIC_TPOT: b = otel_tpot, k = NELEM(otel_tpot); break;
  case TTFT_METRIC_E2E: b = otel_duration, k = NELEM(otel_duration); break;
  case TTFT_METRIC_OUTPUT_TOKENS: b = tokens_default, k = NELEM(tokens_default); break;
  default: b = fine_time, k = NELEM(fine_time); break;
  }
  if (n) *n = k;
  return b;
}

