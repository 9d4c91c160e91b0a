'use strict';
// otlp_points.js — helpers shared by decode_check.js and push_check.js:
// reading decoded OTLP metrics (Req.toObject output) point by point.
const path = require('path');

const root = require(path.join(__dirname, 'node_modules/@opentelemetry/otlp-transformer/build/src/generated/root.js'));
const Req = root.opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest;

// attributes as {key: stringValue}; dup(key) is called for a repeated key
function attrs(kvs, dup) {
  const o = {};
  for (const kv of kvs || []) {
    if (kv.key in o && dup) dup(kv.key);
    o[kv.key] = kv.value.stringValue;
  }
  return o;
}
const dataOf = (m) => m.exponentialHistogram || m.sum || m.gauge;
const pointKey = (p) => JSON.stringify(Object.entries(attrs(p.attributes)).sort());
// the positive buckets as Map(index -> BigInt count)
function dense(p) {
  const o = new Map();
  if (p && p.positive) (p.positive.bucketCounts || []).forEach((c, i) => o.set((p.positive.offset || 0) + i, BigInt(c)));
  return o;
}
// name -> metric of a request's only scope
function metricsOf(r, dup) {
  const m = {};
  for (const x of r.resourceMetrics[0].scopeMetrics[0].metrics) {
    if (x.name in m && dup) dup(x.name);
    m[x.name] = x;
  }
  return m;
}
// libttft's metric -> [OTLP name, unit, scale from the library's unit]
const HIST = {
  ttft: ['gen_ai.server.time_to_first_token', 's', 1e-9],
  tpot: ['gen_ai.server.time_per_output_token', 's', 1e-9],
  e2e: ['gen_ai.server.request.duration', 's', 1e-9],
  itl: ['libttft.inter_token_latency', 's', 1e-9],
  output_tokens: ['libttft.request_output_tokens', '{token}', 1],
  seq_itl_max: ['libttft.request_inter_token_latency_max', 's', 1e-9],
};

module.exports = {Req, attrs, dataOf, pointKey, dense, metricsOf, HIST};
