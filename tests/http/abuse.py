#!/usr/bin/env python3
"""abuse.py TOOL_BIN [options] -- measure the /metrics endpoint under abuse.

TOOL_BIN is tests/http/abuse_tool.c (built as http_abuse_tool). For each
scenario it starts "TOOL_BIN serve" (a registry with --classes classes,
served on 127.0.0.1:<free port>), attacks it from a separate process, and
meanwhile times GET /metrics with "TOOL_BIN get" (a new connection each,
read to the end; --gets of them, --gap apart):

  alone        no attack
  idle         --idle connections opened and held, nothing sent
  reconnect    the same, each reconnecting as soon as the server closes it
  nonread      --nonreaders clients with a 1 KiB receive buffer request
               /metrics and never read
  both         nonread + reconnect

For each: GET latency (median, p90, max; failures = no complete 200 within
--timeout), the connections the server holds (its socket descriptors but
the listener), and its RSS (VmRSS) before the attack, after the GETs, and
its peak (VmHWM). Prints one table; --json prints the numbers as JSON.
These are figures for docs/http.md, not a test: nothing is asserted.
"""
import argparse
import json
import os
import resource
import selectors
import socket
import statistics
import subprocess
import sys
import time

REQ = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


# ------------------------------------------------------------- attackers

def connect(port, rcvbuf=0, blocking=True):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    if blocking:
        s.connect(("127.0.0.1", port))
    else:
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
    return s


def attack(kind, n, port, nonreaders):
    """Runs in the attacker process: prints 'ready' once set up, then holds
    (and reconnects, for 'reconnect') until stdin closes."""
    raise_nofile()
    held = []
    if kind in ("nonread", "both"):
        for _ in range(nonreaders):
            s = connect(port, rcvbuf=1024)
            s.sendall(REQ)
            held.append(s)
        # wait until each has the start of its response (peeked, not read)
        deadline = time.monotonic() + 60
        for s in held:
            s.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                s.recv(1, socket.MSG_PEEK)
            except OSError:
                pass
    sel = selectors.DefaultSelector()
    idle = []
    if kind in ("idle", "reconnect", "both"):
        for _ in range(n):
            s = connect(port)
            idle.append(s)
            sel.register(s, selectors.EVENT_READ)
    print("ready", flush=True)
    sel.register(sys.stdin, selectors.EVENT_READ)
    reconnect = kind in ("reconnect", "both")
    reconnects = 0
    while True:
        for key, _ in sel.select(timeout=1.0):
            if key.fileobj is sys.stdin:
                if not sys.stdin.readline():
                    print("reconnects %d" % reconnects, flush=True)
                    return
                continue
            s = key.fileobj
            try:
                data = s.recv(4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if data:
                continue  # an answer (408 after 5 s): keep reading to EOF
            sel.unregister(s)
            s.close()
            if reconnect:
                s2 = connect(port, blocking=False)
                sel.register(s2, selectors.EVENT_READ)
                reconnects += 1


# -------------------------------------------------------------- measuring

def timed_gets(args, port, n, gap):
    """n GETs from the C client: a list of (seconds, body bytes) or None
    for each that did not complete with a 200."""
    out = subprocess.run([args.tool, "get", str(port), str(n), str(int(gap * 1000)), str(int(args.timeout * 1000))],
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    rows = []
    for line in out.split("\n"):
        if not line:
            continue
        us, status, body, complete = line.split()
        rows.append((int(us) / 1e6, int(body)) if status == "200" and complete == "1" else None)
    return rows


def proc_status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) // 1024  # MiB
    return out


def sockets_held(pid):
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:"):
                n += 1
        except OSError:
            pass
    return n - 1  # the listener


def scenario(args, kind):
    srv = subprocess.Popen([args.tool, "serve", str(args.classes)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True)
    port, pid = None, None
    try:
        words = srv.stdout.readline().split()
        port, pid = int(words[1]), int(words[3])
        first = timed_gets(args, port, 1, 0)[0]  # the first render
        time.sleep(0.3)
        before = proc_status(pid)
        atk = None
        if kind != "alone":
            atk = subprocess.Popen([sys.executable, __file__, "--attack", kind, "--port", str(port),
                                    "--idle", str(args.idle), "--nonreaders", str(args.nonreaders)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            if atk.stdout.readline().strip() != "ready":
                raise RuntimeError("attacker failed")
            time.sleep(0.2)
        times, fails, body = [], 0, 0
        for r in timed_gets(args, port, args.gets, args.gap):
            if r is None:
                fails += 1
            else:
                times.append(r[0])
                body = r[1]
        held = sockets_held(pid)
        after = proc_status(pid)
        reconnects = 0
        if atk:
            atk.stdin.close()
            line = atk.stdout.readline()
            if line.startswith("reconnects"):
                reconnects = int(line.split()[1])
            atk.wait(timeout=30)
        times.sort()
        ms = [t * 1000 for t in times]
        return {
            "scenario": kind, "classes": args.classes, "body_bytes": body,
            "first_get_ms": round(first[0] * 1000, 2) if first else None,
            "gets": args.gets, "failures": fails,
            "median_ms": round(statistics.median(ms), 2) if ms else None,
            "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 2) if ms else None,
            "max_ms": round(ms[-1], 2) if ms else None,
            "server_sockets": held, "reconnects": reconnects,
            "rss_before_mib": before.get("VmRSS"), "rss_after_mib": after.get("VmRSS"),
            "rss_peak_mib": after.get("VmHWM"),
        }
    finally:
        try:
            srv.stdin.write("quit\n")
            srv.stdin.flush()
            srv.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            srv.kill()
            srv.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("tool", nargs="?")
    p.add_argument("--classes", type=int, default=64)
    p.add_argument("--idle", type=int, default=2000)
    p.add_argument("--nonreaders", type=int, default=64)
    p.add_argument("--gets", type=int, default=30)
    p.add_argument("--gap", type=float, default=0.1, help="seconds between GETs")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds a GET may take")
    p.add_argument("--scenarios", default="alone,idle,reconnect,nonread,both")
    p.add_argument("--json", action="store_true")
    p.add_argument("--attack", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.attack:
        attack(args.attack, args.idle, args.port, args.nonreaders)
        return
    if not args.tool:
        p.error("TOOL_BIN is needed")
    raise_nofile()
    rows = [scenario(args, k) for k in args.scenarios.split(",")]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("%-10s %8s %6s %9s %9s %9s %5s %8s %10s %10s %8s" % (
        "scenario", "body", "fails", "median", "p90", "max", "held", "reconn", "RSS before", "RSS after",
        "RSS peak"))
    for r in rows:
        print("%-10s %8d %6d %7s ms %7s ms %7s ms %5d %8d %7s MiB %7s MiB %5s MiB" % (
            r["scenario"], r["body_bytes"], r["failures"], r["median_ms"], r["p90_ms"], r["max_ms"],
            r["server_sockets"], r["reconnects"], r["rss_before_mib"], r["rss_after_mib"], r["rss_peak_mib"]))


if __name__ == "__main__":
    main()
