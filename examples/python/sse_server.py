#!/usr/bin/env python3
"""A token-streaming HTTP server (server-sent events) instrumented with ttft.

Standard library only (asyncio.start_server). A fake model streams words;
the point is where the hooks go in a real streaming handler:

  begin      when the request has arrived (its request line is read): the
             clock start, written down as start_point="server_arrival";
  scheduled  when the fake batch scheduler admits the request;
  token      after each event is written AND drained to the socket: the
             first *visible* token, token_point="sse_flush". Counting at
             generation time instead would hide buffering in this process;
  end        completed after the last event, cancelled when the client
             disconnects (EOF on the socket, or a reset while writing),
             error when the handler fails. `async with reg.stream(...)`
             does all three from how the block exits.

Routes: GET /generate?tokens=N&prompt=P  (SSE), GET /metrics (Prometheus
text), GET /report (text table), GET /counters (JSON counters and gauges).

  python3 sse_server.py --port 8000
  curl -N 'http://127.0.0.1:8000/generate?tokens=20'
  curl http://127.0.0.1:8000/metrics
"""

import argparse
import asyncio
import json
import os
import random
import sys
import time
import urllib.parse

try:
    import ttft
except ImportError:  # running from a source checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import ttft

WORDS = ("the quick brown fox jumps over the lazy dog while a careful engineer "
         "measures time to first token and time per output token").split()


class App:
    def __init__(self, args):
        self.args = args
        self.reg = ttft.Registry(max_inflight=4096, stall_threshold=args.stall,
                                 start_point="server_arrival", token_point="sse_flush",
                                 model="fake-words")
        self.chat = self.reg.add_class("chat", ttft_slo=0.5, tpot_slo=0.05)
        self.batch = asyncio.Semaphore(args.batch)  # the fake scheduler's batch slots

    # ---------------------------------------------------------- the model
    async def fake_model(self, n_tokens, prompt_tokens):
        """Prefill proportional to the prompt, then one word per decode step."""
        await asyncio.sleep(self.args.prefill + prompt_tokens * 1e-6)
        for i in range(n_tokens):
            if i:
                await asyncio.sleep(self.args.interval * random.uniform(0.5, 1.5))
            yield WORDS[i % len(WORDS)]

    # ------------------------------------------------------- the handlers
    async def generate(self, writer, t_arrival, query):
        n_tokens = int(query.get("tokens", [self.args.tokens])[0])
        prompt = int(query.get("prompt", [512])[0])
        async with self.reg.stream(t_ns=t_arrival, cls=self.chat, prompt_tokens=prompt) as s:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Cache-Control: no-cache\r\nConnection: close\r\n\r\n")
            await writer.drain()
            async with self.batch:            # admitted: prefill starts
                s.mark_scheduled()
                i = 0
                async for word in self.fake_model(n_tokens, prompt):
                    writer.write(b"data: " + json.dumps({"i": i, "text": word}).encode() + b"\n\n")
                    await writer.drain()      # raises ConnectionResetError if the client left
                    s.token()                 # now it is visible to the client
                    i += 1
            writer.write(b"event: done\ndata: [DONE]\n\n")
            await writer.drain()

    def metrics_body(self, path):
        with self.reg.snapshot() as snap:
            if path == "/metrics":
                return "text/plain; version=0.0.4; charset=utf-8", snap.to_prometheus()
            if path == "/report":
                return "text/plain; charset=utf-8", snap.report()
            doc = snap.counters()
            doc.update({g: snap.gauge(g) for g in ttft.GAUGES})
            doc["ttft_p50_s"] = snap.quantile("ttft", 0.5)
            doc["ttft_p99_s"] = snap.quantile("ttft", 0.99)
            doc["tpot_p99_s"] = snap.quantile("tpot", 0.99)
            return "application/json", json.dumps(doc)

    async def handle(self, reader, writer):
        try:
            line = await reader.readline()
            t_arrival = time.monotonic_ns()   # the request has arrived
            while True:                        # headers (ignored)
                h = await reader.readline()
                if h in (b"\r\n", b"\n", b""):
                    break
            parts = line.decode("latin-1").split()
            if len(parts) < 2 or parts[0] != "GET":
                await self.respond(writer, 405, "text/plain", "GET only\n")
                return
            url = urllib.parse.urlsplit(parts[1])
            if url.path == "/generate":
                await self.stream_until_disconnect(reader, writer, t_arrival,
                                                   urllib.parse.parse_qs(url.query))
            elif url.path in ("/metrics", "/report", "/counters"):
                ctype, body = self.metrics_body(url.path)
                await self.respond(writer, 200, ctype, body)
            else:
                await self.respond(writer, 404, "text/plain", "not found\n")
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def stream_until_disconnect(self, reader, writer, t_arrival, query):
        """Run generate() until it finishes or the client goes away. A client
        that closes its socket shows up as EOF on the reader even while we
        are waiting for the model, so the stream ends as cancelled at once."""
        gen = asyncio.create_task(self.generate(writer, t_arrival, query))
        eof = asyncio.create_task(reader.read(1))
        done, _ = await asyncio.wait({gen, eof}, return_when=asyncio.FIRST_COMPLETED)
        if gen not in done:
            gen.cancel()                       # -> CancelledError -> "cancelled"
        else:
            eof.cancel()
        await asyncio.gather(gen, eof, return_exceptions=True)

    @staticmethod
    async def respond(writer, code, ctype, body):
        data = body.encode()
        reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed"}[code]
        writer.write(("HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
                      "Connection: close\r\n\r\n" % (code, reason, ctype, len(data))).encode() + data)
        await writer.drain()


async def main(args):
    app = App(args)
    server = await asyncio.start_server(app.handle, args.host, args.port)
    host, port = server.sockets[0].getsockname()[:2]
    print("listening on http://%s:%d" % (host, port), flush=True)
    async with server:
        await server.serve_forever()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    p.add_argument("--tokens", type=int, default=32, help="tokens per response by default")
    p.add_argument("--interval", type=float, default=0.005, help="mean seconds between tokens")
    p.add_argument("--prefill", type=float, default=0.020, help="base prefill seconds")
    p.add_argument("--batch", type=int, default=8, help="concurrent sequences the fake scheduler runs")
    p.add_argument("--stall", type=float, default=0.25, help="stall budget, seconds")
    return p.parse_args(argv)


if __name__ == "__main__":
    try:
        asyncio.run(main(parse_args()))
    except KeyboardInterrupt:
        pass
