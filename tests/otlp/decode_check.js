'use strict';
// decode_check.js DIR — decodes libttft's OTLP requests (DIR/cum.bin,
// d1.bin, d2.bin, written by otlp_dump.c) with the OpenTelemetry JS
// generated protobuf definitions (@opentelemetry/otlp-transformer 0.57.2,
// build/src/generated/root.js: an implementation independent of ours) and
// asserts them against DIR/expected.json, the snapshots' exact values:
//   - resource (service.name, OTEL_RESOURCE_ATTRIBUTES percent-decoded,
//     bad entries skipped, constant labels, telemetry.sdk.*), scope;
//   - per class: the GenAI histograms and libttft's own, count, sum, min
//     and max (cumulative only), scale, zero + bucket counts = count, the
//     exponential buckets' quantiles against ttft_snapshot_class_quantile
//     within the bucket width; exemplars = the traced slowest requests;
//     counters, stalls by cause; temporality, start and end times;
//   - delta 1 + delta 2 = cumulative, point by point and bucket by bucket.
// Prints "N passed, M failed"; exits 1 on any failure.
const fs = require('fs');
const path = require('path');
const {Req, attrs: attrsOf, dataOf, pointKey, dense, metricsOf, HIST} = require('./otlp_points.js');

const dir = process.argv[2];
const exp = JSON.parse(fs.readFileSync(path.join(dir, 'expected.json'), 'utf8'));
let passed = 0, failed = 0;
function check(cond, what) {
  if (cond) passed++;
  else {
    failed++;
    console.error('FAIL: ' + what);
  }
}
function eq(a, b, what) { check(a === b, `${what}: expected ${JSON.stringify(b)}, got ${JSON.stringify(a)}`); }
function near(a, b, rel, what) {
  check(Math.abs(a - b) <= rel * Math.max(Math.abs(b), 1e-300), `${what}: expected ${b}, got ${a}`);
}

function decode(name) {
  const buf = fs.readFileSync(path.join(dir, name));
  const msg = Req.decode(buf); // throws on malformed input
  return Req.toObject(msg, {longs: String, enums: Number, bytes: Array, defaults: false, arrays: true});
}
const attrs = (kvs) => attrsOf(kvs, (k) => check(false, `attribute ${k} repeated`));
const hex = (b) => Buffer.from(b).toString('hex');

const req = {cum: decode('cum.bin'), d1: decode('d1.bin'), d2: decode('d2.bin')};

// ---- resource and scope
for (const [k, r] of Object.entries(req)) {
  eq(r.resourceMetrics.length, 1, `${k}: one ResourceMetrics`);
  const res = attrs(r.resourceMetrics[0].resource.attributes);
  eq(res['service.name'], 'llm-gateway', `${k}: service.name from OTEL_SERVICE_NAME`);
  eq(res['deployment.environment'], 'prod,eu', `${k}: percent-decoded value, trimmed`);
  eq(res['host.name'], 'node-7', `${k}: host.name`);
  eq(res['team'], 'ml serving', `${k}: %20`);
  check(!('bad%zz' in res) && !('bad' in res) && !('noequals' in res) && !('' in res), `${k}: bad entries skipped`);
  eq(res['region'], 'eu-west-1', `${k}: constant label region`);
  eq(res['cluster'], 'gpu-a', `${k}: constant label cluster`);
  eq(res['telemetry.sdk.name'], 'libttft', `${k}: telemetry.sdk.name`);
  eq(res['telemetry.sdk.language'], 'c', `${k}: telemetry.sdk.language`);
  eq(res['telemetry.sdk.version'], exp.version, `${k}: telemetry.sdk.version`);
  const sm = r.resourceMetrics[0].scopeMetrics;
  eq(sm.length, 1, `${k}: one ScopeMetrics`);
  eq(sm[0].scope.name, 'libttft', `${k}: scope name`);
  eq(sm[0].scope.version, exp.version, `${k}: scope version`);
}

const metrics = (r) => metricsOf(r, (n) => check(false, `metric ${n} once`));
const M = {cum: metrics(req.cum), d1: metrics(req.d1), d2: metrics(req.d2)};

function pointsByClass(m) {
  const o = {};
  for (const p of dataOf(m).dataPoints) {
    const a = attrs(p.attributes);
    const key = a['libttft.class'] + (a['libttft.status'] ? '/' + a['libttft.status'] : '') +
                (a['libttft.cause'] ? '/' + a['libttft.cause'] : '');
    o[key] = p;
    eq(a['gen_ai.request.model'], exp.model, `${m.name}: gen_ai.request.model`);
  }
  return o;
}

// the value at rank ceil(q * count) of an exponential histogram: the
// bucket holding it, [lower, upper]
function bucketOfRank(p, q) {
  const count = Number(p.count);
  let rank = Math.max(1, Math.ceil(q * count));
  const zero = Number(p.zeroCount || 0);
  if (rank <= zero) return [0, 0];
  rank -= zero;
  const base = Math.pow(2, Math.pow(2, -p.scale));
  const off = p.positive.offset || 0;
  const counts = p.positive.bucketCounts.map(Number);
  for (let i = 0; i < counts.length; i++) {
    if (rank <= counts[i]) return [Math.pow(base, off + i), Math.pow(base, off + i + 1)];
    rank -= counts[i];
  }
  return [NaN, NaN];
}

const t = exp.times;
for (const key of ['cum', 'd1', 'd2']) {
  const snap = exp[key];
  const delta = key !== 'cum';
  for (const [mname, [oname, unit, scale]] of Object.entries(HIST)) {
    const m = M[key][oname];
    check(m && m.exponentialHistogram, `${key}: ${oname} is an exponential histogram`);
    if (!m || !m.exponentialHistogram) continue;
    eq(m.unit, unit, `${oname} unit`);
    eq(m.exponentialHistogram.aggregationTemporality, delta ? 1 : 2, `${key} ${oname} temporality`);
    const pts = pointsByClass(m);
    for (const [cls, c] of Object.entries(snap.classes)) {
      const p = pts[cls];
      const e = c.metrics[mname];
      const what = `${key} ${oname}{${cls}}`;
      check(p !== undefined, `${what}: point present`);
      if (!p) continue;
      eq(p.count, e.count, `${what} count`);
      near(p.sum || 0, Number(e.sum) * scale, 1e-12, `${what} sum`);
      eq(p.scale, exp.schema, `${what} scale`);
      const inBuckets = Number(p.zeroCount || 0) +
                        (p.positive ? p.positive.bucketCounts.reduce((a, b) => a + Number(b), 0) : 0);
      eq(String(inBuckets), e.count, `${what} zero + buckets = count`);
      if (delta) {
        check(p.min === undefined && p.max === undefined, `${what}: no min/max in a delta`);
        eq(p.startTimeUnixNano, key === 'd1' ? t.t_create : t.t_first, `${what} start`);
        eq(p.timeUnixNano, key === 'd1' ? t.t_first : t.t_second, `${what} time`);
      } else if (Number(e.count) > 0) {
        near(p.min, Number(e.min) * scale, 1e-15, `${what} min`);
        near(p.max, Number(e.max) * scale, 1e-15, `${what} max`);
        // cumulative: start = registry creation, time = snapshot, both
        // mapped to the wall clock with one offset: their difference is the
        // snapshot's interval
        const span = BigInt(p.timeUnixNano) - BigInt(p.startTimeUnixNano);
        const want = BigInt(snap.t_end_ns) - BigInt(snap.t_start_ns);
        check(span === want, `${what}: time - start = the snapshot's interval (${span} vs ${want})`);
        check(BigInt(p.startTimeUnixNano) > 1600000000000000000n, `${what}: start is wall clock`);
      }
      if (Number(e.count) > 0) {
        const w = 1 / 128; // the internal bucket's relative width
        for (const [q, lib] of e.q) {
          const [lo, hi] = bucketOfRank(p, q);
          const v = Number(lib) * scale;
          check(v >= lo / (1 + w) && v <= hi * (1 + w),
                `${what} q${q}: library ${v} in the bucket [${lo}, ${hi}]`);
        }
      }
      // exemplars: the traced slowest requests of this metric's list
      const list = mname === 'ttft' ? c.slowest.ttft : (mname === 'itl' || mname === 'seq_itl_max') ? c.slowest.gap : [];
      const got = (p.exemplars || []).map((x) => [hex(x.traceId), x.asDouble, attrs(x.filteredAttributes)['libttft.request_id']]);
      eq(got.length, list.length, `${what} exemplars`);
      for (let i = 0; i < Math.min(got.length, list.length); i++) {
        eq(got[i][0], list[i].trace, `${what} exemplar ${i} trace_id`);
        near(got[i][1], Number(list[i].value) * 1e-9, 1e-15, `${what} exemplar ${i} value`);
        eq(got[i][2], list[i].id, `${what} exemplar ${i} request id`);
        const ex = p.exemplars[i];
        if (list[i].unix_end !== '0') eq(ex.timeUnixNano, list[i].unix_end, `${what} exemplar ${i} time`);
        check(!ex.spanId || ex.spanId.length === 0, `${what} exemplar ${i}: no span id`);
      }
    }
  }
  // counters
  const ctrs = {begun: 'libttft.requests_started', tokens: 'libttft.output_tokens',
                stalls: null, slo_met: 'libttft.requests_slo_met', slo_judged: 'libttft.requests_slo_judged'};
  for (const [cname, oname] of Object.entries(ctrs)) {
    if (!oname) continue;
    const m = M[key][oname];
    check(m && m.sum && m.sum.isMonotonic, `${key}: ${oname} is a monotonic sum`);
    if (!m || !m.sum) continue;
    eq(m.sum.aggregationTemporality, delta ? 1 : 2, `${key} ${oname} temporality`);
    const pts = pointsByClass(m);
    for (const [cls, c] of Object.entries(snap.classes)) {
      eq(pts[cls] && pts[cls].asInt, c.counters[cname], `${key} ${oname}{${cls}}`);
    }
  }
  const ended = pointsByClass(M[key]['libttft.requests_ended']);
  const stallN = pointsByClass(M[key]['libttft.stalls']);
  const stallS = pointsByClass(M[key]['libttft.stall_time']);
  for (const [cls, c] of Object.entries(snap.classes)) {
    for (const [st, cn] of [['completed', 'completed'], ['cancelled', 'cancelled'], ['error', 'errors']])
      eq(ended[cls + '/' + st] && ended[cls + '/' + st].asInt, c.counters[cn], `${key} requests_ended{${cls},${st}}`);
    for (const [cause, [n, ns]] of Object.entries(c.stalls)) {
      eq(stallN[cls + '/' + cause] && stallN[cls + '/' + cause].asInt, n, `${key} stalls{${cls},${cause}}`);
      near(stallS[cls + '/' + cause] ? stallS[cls + '/' + cause].asDouble || 0 : -1, Number(ns) * 1e-9, 1e-12,
           `${key} stall_time{${cls},${cause}}`);
    }
  }
  const g = M[key]['libttft.requests_in_flight'];
  check(g && g.gauge && g.gauge.dataPoints.length === 1, `${key}: requests_in_flight is a gauge`);
}

// ---- delta 1 + delta 2 = cumulative, for every point of every sum and
// exponential histogram, bucket by bucket
let compared = 0;
for (const [name, mc] of Object.entries(M.cum)) {
  if (mc.gauge) continue;
  const m1 = M.d1[name], m2 = M.d2[name];
  check(m1 && m2, `${name} in both deltas`);
  if (!m1 || !m2) continue;
  const idx = (m) => Object.fromEntries(dataOf(m).dataPoints.map((p) => [pointKey(p), p]));
  const p1 = idx(m1), p2 = idx(m2);
  for (const pc of dataOf(mc).dataPoints) {
    const k = pointKey(pc);
    let a = p1[k], b = p2[k];
    const what = `${name}${k}`;
    // a per-status point is written when its status has streams in the
    // snapshot: a delta leaves out one without streams in its interval
    check(a !== undefined || b !== undefined, `${what}: in a delta`);
    if (!a && !b) continue;
    const zero = {count: '0', zeroCount: '0', sum: 0, asInt: '0', asDouble: 0};
    if (!a) a = zero;
    if (!b) b = zero;
    compared++;
    if (mc.sum) {
      if (pc.asInt !== undefined) eq(String(BigInt(a ? a.asInt || 0 : 0) + BigInt(b.asInt || 0)), pc.asInt, `${what} d1 + d2`);
      else near((a ? a.asDouble || 0 : 0) + (b.asDouble || 0), pc.asDouble || 0, 1e-12, `${what} d1 + d2`);
      continue;
    }
    eq(String(BigInt(a ? a.count || 0 : 0) + BigInt(b.count || 0)), pc.count || undefined, `${what} count d1 + d2`);
    eq(Number(a ? a.zeroCount || 0 : 0) + Number(b.zeroCount || 0), Number(pc.zeroCount || 0), `${what} zero d1 + d2`);
    near((a ? a.sum || 0 : 0) + (b.sum || 0), pc.sum || 0, 1e-12, `${what} sum d1 + d2`);
    const da = dense(a), db = dense(b), dc = dense(pc);
    const keys = new Set([...da.keys(), ...db.keys(), ...dc.keys()]);
    let ok = true;
    for (const i of keys) ok = ok && ((da.get(i) || 0n) + (db.get(i) || 0n) === (dc.get(i) || 0n));
    check(ok, `${what}: buckets d1 + d2 = cumulative`);
  }
}
check(compared > 100, `compared ${compared} points across the deltas`);

console.log(`otlp decode: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
