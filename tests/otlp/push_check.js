'use strict';
// push_check.js DIR — asserts the pusher's end-to-end run (otlp_push_e2e.c)
// for DIR/cumulative and DIR/delta: the requests receiver.js decoded with
// the OpenTelemetry JS definitions (requests.jsonl) against the final
// snapshot (final.bin, expected.json):
//   - every request: POST /v1/metrics, application/x-protobuf, decoded;
//   - the scripted answers came in order, each retry resent the same body,
//     the retry after the 429 came >= 1 s (Retry-After: 1) after it;
//   - flush outcomes: OK, OK, EIO (receiver down), OK;
//   - accepted pushes (2xx only): cumulative, the last one's points equal
//     the final snapshot's; delta, the accepted pushes' points sum to it:
//     counts, zero counts, every bucket and integer counter exactly, sums
//     within 1e-12 (doubles); per class, counts and sums against the
//     registry's accessors (expected.json);
//   - start times: cumulative, every point of every push starts at the
//     registry's creation; delta, the first push starts there and each
//     next one where the last accepted one ended.
const fs = require('fs');
const path = require('path');
const {Req, attrs, dataOf, pointKey, dense, metricsOf, HIST} = require('./otlp_points.js');

let passed = 0, failed = 0;
function check(cond, what) {
  if (cond) passed++;
  else {
    failed++;
    console.error('FAIL: ' + what);
  }
}
const eq = (a, b, what) => check(a === b, `${what}: expected ${JSON.stringify(b)}, got ${JSON.stringify(a)}`);
const near = (a, b, what) => check(Math.abs(a - b) <= 1e-12 * Math.max(Math.abs(b), 1), `${what}: expected ${b}, got ${a}`);

// every point of a request: key "metric|attributes" -> point
function points(r) {
  const o = new Map();
  for (const [name, m] of Object.entries(metricsOf(r))) {
    if (m.gauge) continue;
    for (const p of dataOf(m).dataPoints) o.set(name + '|' + pointKey(p), p);
  }
  return o;
}
// a + b, point by point (a delta's missing point is zero)
function add(a, b) {
  const o = new Map(a);
  for (const [k, p] of b) {
    const q = o.get(k);
    if (!q) { o.set(k, p); continue; }
    const s = {count: String(BigInt(q.count || 0) + BigInt(p.count || 0)),
               zeroCount: String(BigInt(q.zeroCount || 0) + BigInt(p.zeroCount || 0)),
               sum: (q.sum || 0) + (p.sum || 0), asDouble: (q.asDouble || 0) + (p.asDouble || 0),
               bk: new Map(q.bk || dense(q))};
    if (q.asInt !== undefined || p.asInt !== undefined) s.asInt = String(BigInt(q.asInt || 0) + BigInt(p.asInt || 0));
    for (const [i, c] of (p.bk || dense(p))) s.bk.set(i, (s.bk.get(i) || 0n) + c);
    o.set(k, s);
  }
  return o;
}
function same(got, want, what) {
  let n = 0;
  for (const [k, w] of want) {
    const g = got.get(k);
    const isZero = (w.count === undefined || w.count === '0') && (w.asInt === undefined || w.asInt === '0') && !w.asDouble;
    if (!g) { check(isZero, `${what} ${k}: missing`); continue; }
    n++;
    if (w.asInt !== undefined) eq(g.asInt, w.asInt, `${what} ${k}`);
    else if (w.count !== undefined || g.count !== undefined) {
      eq(String(g.count || 0), String(w.count || 0), `${what} ${k} count`);
      eq(String(g.zeroCount || 0), String(w.zeroCount || 0), `${what} ${k} zero count`);
      near(g.sum || 0, w.sum || 0, `${what} ${k} sum`);
      const gb = g.bk || dense(g), wb = dense(w);
      let ok = true;
      for (const i of new Set([...gb.keys(), ...wb.keys()])) ok = ok && (gb.get(i) || 0n) === (wb.get(i) || 0n);
      check(ok, `${what} ${k}: every bucket`);
    } else near(g.asDouble || 0, w.asDouble || 0, `${what} ${k}`);
  }
  for (const k of got.keys()) check(want.has(k), `${what} ${k}: not in the final snapshot`);
  return n;
}

function one(kind, dir) {
  const exp = JSON.parse(fs.readFileSync(path.join(dir, 'expected.json'), 'utf8'));
  const fin = Req.toObject(Req.decode(fs.readFileSync(path.join(dir, 'final.bin'))),
                           {longs: String, enums: Number, defaults: false, arrays: true});
  const reqs = fs.readFileSync(path.join(dir, 'requests.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const answers = reqs.map((r) => r.answer).join(',');
  // first run: 429:1, 200 | 503, close, 200 | (stopped) ; second run: 503, 200 | 200
  eq(answers, '429:1,200,503,close,200,503,200,200', `${kind}: the scripted answers in order`);
  for (const r of reqs) {
    eq(r.path, '/v1/metrics', `${kind} request ${r.n}: path`);
    eq(r.content_type, 'application/x-protobuf', `${kind} request ${r.n}: content type`);
    check(r.decoded && !r.error, `${kind} request ${r.n}: decoded (${r.error})`);
  }
  if (failed) return;
  // retries resend the same body; the one after the 429 waits Retry-After
  for (const [a, b] of [[0, 1], [2, 3], [3, 4], [5, 6]]) eq(reqs[b].sha256, reqs[a].sha256, `${kind}: request ${b} retries ${a}'s body`);
  check(reqs[1].t_ms - reqs[0].t_ms >= 1000, `${kind}: the retry came ${reqs[1].t_ms - reqs[0].t_ms} ms >= 1000 ms after the 429`);
  check(reqs[4].sha256 !== reqs[6].sha256 && reqs[6].sha256 !== reqs[7].sha256, `${kind}: new pushes carry new bodies`);
  check(exp.flush[0] === 0 && exp.flush[1] === 0 && exp.flush[3] === 0, `${kind}: flushes 1, 2 and 4 returned TTFT_OK (${exp.flush})`);
  check(exp.flush[2] < 0, `${kind}: the flush while the receiver was down failed (${exp.flush[2]})`);

  const acc = reqs.filter((r) => /^2/.test(r.answer)).map((r) => r.decoded);
  eq(acc.length, 4, `${kind}: accepted pushes`);
  const temporality = kind === 'delta' ? 1 : 2;
  for (const [i, r] of acc.entries())
    for (const m of Object.values(metricsOf(r)))
      if (!m.gauge) eq(dataOf(m).aggregationTemporality, temporality, `${kind} push ${i} ${m.name} temporality`);

  const want = points(fin);
  let got;
  if (kind === 'delta') got = acc.map(points).reduce(add, new Map());
  else got = points(acc[acc.length - 1]);
  const compared = same(got, want, `${kind}: ${kind === 'delta' ? 'sum of the deltas' : 'the last push'} = final`);
  check(compared > 30, `${kind}: compared ${compared} points`);

  // per class against the registry's accessors
  const last = metricsOf(acc[acc.length - 1]);
  for (const [cls, e] of Object.entries(exp.classes)) {
    for (const mname of ['ttft', 'tpot', 'e2e', 'itl']) {
      const [oname, , scale] = HIST[mname];
      const ps = kind === 'delta' ? acc.map((r) => metricsOf(r)[oname]) : [last[oname]];
      let n = 0n, s = 0;
      for (const m of ps)
        for (const p of m ? dataOf(m).dataPoints : [])
          if (attrs(p.attributes)['libttft.class'] === cls) { n += BigInt(p.count || 0); s += p.sum || 0; }
      eq(String(n), e[mname][0], `${kind} ${oname}{${cls}} count = the registry's`);
      check(Math.abs(s - Number(e[mname][1]) * scale) <= 1e-9 * Math.max(s, 1), `${kind} ${oname}{${cls}} sum ${s} = the registry's ${e[mname][1]} ns`);
    }
    const ps = kind === 'delta' ? acc.map((r) => metricsOf(r)['libttft.requests_started']) : [last['libttft.requests_started']];
    let begun = 0n;
    for (const m of ps) for (const p of m ? dataOf(m).dataPoints : []) if (attrs(p.attributes)['libttft.class'] === cls) begun += BigInt(p.asInt || 0);
    eq(String(begun), e.begun, `${kind} requests_started{${cls}} = the registry's`);
  }

  // start and end times
  const lo = BigInt(exp.created_lo) - 2000000n, hi = BigInt(exp.created_hi) + 2000000n;
  let prevEnd = null;
  for (const [i, r] of acc.entries()) {
    const starts = new Set(), times = new Set();
    for (const m of Object.values(metricsOf(r)))
      for (const p of dataOf(m).dataPoints) {
        if (!m.gauge) starts.add(p.startTimeUnixNano);
        times.add(p.timeUnixNano);
      }
    eq(starts.size, 1, `${kind} push ${i}: one start time`);
    eq(times.size, 1, `${kind} push ${i}: one time`);
    const st = [...starts][0];
    if (kind === 'delta' && i > 0) eq(st, prevEnd, `${kind} push ${i} starts where push ${i - 1} (accepted) ended`);
    else check(BigInt(st) >= lo && BigInt(st) <= hi, `${kind} push ${i} starts at the registry's creation (${st} in [${lo}, ${hi}])`);
    prevEnd = [...times][0];
    check(BigInt(prevEnd) > BigInt(st), `${kind} push ${i}: time after start`);
  }
}

for (const kind of ['cumulative', 'delta']) one(kind, path.join(process.argv[2], kind));
console.log(`otlp push e2e: ${passed} passed, ${failed} failed`);
process.exit(failed || !passed ? 1 : 0);
