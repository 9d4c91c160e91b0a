/*
 * format.h — the formatters behind ttft_snapshot_format. Each renders a
 * snapshot into a string builder and reads nothing else.
 * Layer: report (src/README.md).
 */
#ifndef TTFT_FORMAT_H
#define TTFT_FORMAT_H

#include "common/snapshot.h"

/* Formatters: each renders s into sb; return TTFT_OK or a TTFT_E* code. */
TTFT_HIDDEN int ttft__format_text(const ttft_snapshot *s, ttft__sb *sb);
TTFT_HIDDEN int ttft__format_json(const ttft_snapshot *s, ttft__sb *sb);
TTFT_HIDDEN int ttft__format_prometheus(const ttft_snapshot *s, ttft__sb *sb, int openmetrics);
/* Length-delimited io.prometheus.client.MetricFamily messages (binary; the
 * builder's NUL terminator is not part of the output). */
TTFT_HIDDEN int ttft__format_protobuf(const ttft_snapshot *s, ttft__sb *sb);

#endif /* TTFT_FORMAT_H */
