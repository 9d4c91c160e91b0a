/* format_protobuf.c — Prometheus protobuf exposition (length-delimited
 * io.prometheus.client.MetricFamily) with native histograms.
 * Layer: report (src/README.md). Being written (issue 10). */
#include "report/format.h"

int ttft__format_protobuf(const ttft_snapshot *s, ttft__sb *sb) {
  (void)s;
  (void)sb;
  return TTFT_ENOTSUP;
}
