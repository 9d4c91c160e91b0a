#!/usr/bin/env node
// receiver.js — an OTLP/HTTP metrics receiver for the pusher's end-to-end
// tests (issue 31, item 4): answers POST /v1/metrics (or any path) as
// scripted, decodes every body with the OpenTelemetry JS generated protobuf
// definitions (@opentelemetry/otlp-transformer 0.57.x,
// build/src/generated/root.js: an independent decoder), and writes one
// JSON line per request.
//
//   node receiver.js [--port N] [--script S1,S2,...] [--out FILE]
//
// --port    0 (default) picks a free port; the first line on stdout is
//           "listening <port>" once the socket listens.
// --script  what the first requests get, in order, then 200: a status
//           ("503", "400"), "429:N" (429 with Retry-After: N seconds),
//           "close" (the connection is destroyed before any answer).
// --out     where the JSON lines go (default stdout); each line:
//           {"n", "t_ms", "path", "content_type", "headers", "bytes",
//            "sha256" (of the body), "answer", "decoded" (ExportMetricsServiceRequest as an object,
//            64-bit integers as decimal strings, bytes as hex), "error"}.
// SIGTERM or SIGINT: close and exit 0.
'use strict';

const fs = require('fs');
const http = require('http');
const crypto = require('crypto');
const {Req} = require('./otlp_points.js');

function args(argv) {
  const o = { port: 0, script: [], out: null };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--port') o.port = Number(argv[++i]);
    else if (a === '--script') o.script = argv[++i].split(',').filter((s) => s.length);
    else if (a === '--out') o.out = argv[++i];
    else {
      process.stderr.write(`receiver.js: unknown argument ${a}\n`);
      process.exit(2);
    }
  }
  return o;
}

const opt = args(process.argv);
const out = opt.out ? fs.createWriteStream(opt.out, { flags: 'a' }) : process.stdout;
const t0 = Date.now();
let n = 0;

function decode(buf) {
  const msg = Req.decode(buf);
  return Req.toObject(msg, { longs: String, enums: Number, bytes: (b) => Buffer.from(b).toString('hex'), defaults: false, arrays: true });
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const step = n < opt.script.length ? opt.script[n] : '200';
    const rec = {
      n: n++,
      t_ms: Date.now() - t0,
      path: req.url,
      content_type: req.headers['content-type'] || null,
      headers: req.headers,
      bytes: body.length,
      sha256: crypto.createHash('sha256').update(body).digest('hex'),
      answer: step,
      decoded: null,
      error: null,
    };
    try {
      rec.decoded = decode(body);
    } catch (e) {
      rec.error = String(e && e.message ? e.message : e);
    }
    out.write(JSON.stringify(rec) + '\n');
    if (step === 'close') {
      req.socket.destroy();
      return;
    }
    const [status, retryAfter] = step.split(':');
    const h = { 'Content-Type': 'application/x-protobuf', 'Content-Length': '0' };
    if (retryAfter !== undefined) h['Retry-After'] = retryAfter;
    res.writeHead(Number(status), h);
    res.end();
  });
});

server.listen(opt.port, '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});

function stop() {
  server.close(() => {
    if (out !== process.stdout) out.end(() => process.exit(0));
    else process.exit(0);
  });
  server.closeAllConnections && server.closeAllConnections();
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
