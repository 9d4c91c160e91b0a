#!/usr/bin/env python3
"""Drive sse_server.py with N concurrent streams, some of which disconnect
early, then print the server's report.

  python3 sse_client.py --url http://127.0.0.1:8000 --streams 32 --disconnect 8
  python3 sse_client.py --spawn-server --check      # what ctest runs

--check verifies the server's counters against what the client did:
begun = N, completed = N - K, cancelled = K, errors = 0, one TTFT per stream,
and the token count between the two bounds the client can know.
Standard library only.
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


async def one_stream(host, port, tokens, stop_after):
    """Read one SSE response; close the socket after stop_after events
    (None = read to the end). Returns the number of data events seen."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(("GET /generate?tokens=%d&prompt=812 HTTP/1.1\r\nHost: %s\r\n"
                  "Accept: text/event-stream\r\n\r\n" % (tokens, host)).encode())
    await writer.drain()
    status = await reader.readline()
    if b" 200 " not in status:
        raise RuntimeError("server said %r" % status)
    while (await reader.readline()) not in (b"\r\n", b""):
        pass
    events = 0
    try:
        while True:
            line = await reader.readline()
            if not line:
                break
            if line.startswith(b"data: [DONE]"):
                break
            if line.startswith(b"data: "):
                events += 1
                if stop_after is not None and events >= stop_after:
                    break  # the user closed the tab
    finally:
        writer.close()
        await writer.wait_closed()
    return events


def fetch(base, path):
    with urllib.request.urlopen(base + path, timeout=10) as resp:
        return resp.read().decode()


async def run(args, base):
    u = urllib.parse.urlsplit(base)
    plan = [args.stop_after if i < args.disconnect else None for i in range(args.streams)]
    t0 = time.monotonic()
    seen = await asyncio.gather(*(one_stream(u.hostname, u.port, args.tokens, stop) for stop in plan))
    print("client: %d streams (%d disconnected after %d events) in %.2fs, %d events read"
          % (args.streams, args.disconnect, args.stop_after, time.monotonic() - t0, sum(seen)))
    # the server finishes noticing disconnects on its own schedule
    deadline = time.monotonic() + 30
    while True:
        counters = json.loads(await asyncio.to_thread(fetch, base, "/counters"))
        if counters["inflight"] == 0 and counters["begun"] >= args.streams:
            break
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    return seen, counters


def check(args, seen, counters, metrics):
    n, k, t = args.streams, args.disconnect, args.tokens
    expect = {"begun": n, "completed": n - k, "cancelled": k, "errors": 0, "dropped": 0,
              "inflight": 0, "abandoned": 0}
    bad = ["%s: expected %s, got %s" % (key, want, counters.get(key))
           for key, want in expect.items() if counters.get(key) != want]
    lo = (n - k) * t + k * args.stop_after   # every event a client read was flushed
    hi = n * t
    if not lo <= counters["tokens"] <= hi:
        bad.append("tokens: expected %d..%d, got %d" % (lo, hi, counters["tokens"]))
    if sum(seen) != (n - k) * t + k * args.stop_after:
        bad.append("client read %d events, expected %d" % (sum(seen), (n - k) * t + k * args.stop_after))
    if "# TYPE " not in metrics or "_bucket{" not in metrics:
        bad.append("/metrics is not Prometheus text with histograms")
    return bad


def spawn_server(args):
    cmd = [sys.executable, os.path.join(HERE, "sse_server.py"), "--port", "0",
           "--tokens", str(args.tokens), "--interval", "0.002", "--prefill", "0.005"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        proc.kill()
        raise SystemExit("server did not start: %r" % line)
    return proc, line.split()[-1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--streams", type=int, default=32)
    p.add_argument("--disconnect", type=int, default=8, help="streams that hang up early")
    p.add_argument("--stop-after", type=int, default=3, help="events before hanging up")
    p.add_argument("--tokens", type=int, default=24, help="tokens per response")
    p.add_argument("--spawn-server", action="store_true", help="start sse_server.py on a free port")
    p.add_argument("--check", action="store_true", help="verify the server's counters; exit 1 on mismatch")
    args = p.parse_args()
    if not 0 <= args.disconnect <= args.streams or not 0 < args.stop_after < args.tokens:
        p.error("need 0 <= --disconnect <= --streams and 0 < --stop-after < --tokens")

    proc = None
    base = args.url
    if args.spawn_server:
        proc, base = spawn_server(args)
    try:
        seen, counters = asyncio.run(run(args, base))
        metrics = fetch(base, "/metrics")
        print(fetch(base, "/report"))
        print("counters:", json.dumps(counters, sort_keys=True))
        if args.check:
            bad = check(args, seen, counters, metrics)
            for b in bad:
                print("CHECK FAILED:", b)
            if bad:
                sys.exit(1)
            print("check passed")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
