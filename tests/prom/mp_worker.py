#!/usr/bin/env python3
"""mp_worker.py ID NAME SHARED_DIR LEDGER GATE SEED

The Python twin of mp_worker.c for multiproc_test.py: the same workload
(the same splitmix64 draws in the same order), the same ledger, through
the Python binding: ttft.Registry(shared_dir=..., process_name=...,
publish_interval_ms=100), Registry.publish() after each batch, then "C"
in the ledger. Prints "ready" once the registry, its classes and its
first segment exist; records once GATE exists; SIGTERM finishes the
batch, closes the registry (its final publish) and exits 0. See
mp_worker.c for the ledger's format and the workload.
"""
import math
import os
import signal
import sys
import time

import ttft

BATCH = 2
PAUSE_S = 0.040
END_NS = 1_000_000
STALL_CAP = 450_000_000
MEDIAN_MS = [150, 250, 400, 800, 300, 200, 600, 1200]
CLASS_NAMES = ["chat", "code", "batch"]
STATUS_NAMES = ["completed", "cancelled", "error"]
M64 = (1 << 64) - 1


class Rng:
    def __init__(self, seed):
        self.s = seed & M64

    def next(self):  # splitmix64
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def unit(self):
        return ((self.next() >> 11) + 0.5) * 2.0 ** -53

    def lognormal_ns(self, median_s, sigma):
        z = math.sqrt(-2.0 * math.log(self.unit())) * math.cos(6.283185307179586 * self.unit())
        return int(median_s * math.exp(sigma * z) * 1e9) + 1


def make_plan(rng, wid):
    u = rng.unit()
    cls = 0 if u < 0.5 else 1 if u < 0.8 else 2
    ttft = rng.lognormal_ns(MEDIAN_MS[wid % 8] / 1000.0, 0.6)
    tokens = 1 + rng.next() % 40
    u = rng.unit()
    status = 0 if u < 0.92 else 1 if u < 0.97 else 2
    if status:
        tokens = 1 + rng.next() % tokens
    gaps = []
    for _ in range(tokens - 1):
        if rng.unit() < 0.01:
            gaps.append(600_000_000 + rng.next() % 900_000_001)
        else:
            gaps.append(min(rng.lognormal_ns(0.030, 0.5), STALL_CAP))
    return cls, status, ttft, gaps


def main():
    if len(sys.argv) != 7:
        sys.exit("usage: mp_worker.py ID NAME SHARED_DIR LEDGER GATE SEED")
    wid, name, shared, ledger, gate, seed = (int(sys.argv[1]), sys.argv[2], sys.argv[3],
                                             sys.argv[4], sys.argv[5], int(sys.argv[6]))
    signal.alarm(600)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    fd = os.open(ledger, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    reg = ttft.Registry(max_inflight=64, model="mp-test", shared_dir=shared, process_name=name,
                        publish_interval_ms=100)
    classes = [reg.add_class("chat", ttft_slo_ms=500, tpot_slo_ms=60),
               reg.add_class("code", ttft_slo_ms=1000, tpot_slo_ms=40),
               reg.add_class("batch", ttft_slo_ms=5000)]
    reg.publish()
    print("ready", flush=True)
    while not stop and not os.path.exists(gate):
        time.sleep(0.01)
    rng = Rng(seed)
    t = 10 ** 12  # caller clock, ns
    while not stop:
        plans = [make_plan(rng, wid) for _ in range(BATCH)]
        text = "".join("S %s %s %d%s\n" % (CLASS_NAMES[c], STATUS_NAMES[s], first,
                                             "".join(" %d" % g for g in gaps))
                       for c, s, first, gaps in plans)
        data = text.encode()
        while data:
            data = data[os.write(fd, data):]
        streams = []
        for i, (c, _, _, _) in enumerate(plans):  # begun together, as in mp_worker.c
            t0 = t + i * 1000
            streams.append((reg.begin(t_ns=t0, cls=classes[c]), t0))
        end = t
        for (s, t0), (_, status, first, gaps) in zip(streams, plans):
            at = t0 + first
            s.token(t_ns=at)
            for g in gaps:
                at += g
                s.token(t_ns=at)
            s.end(STATUS_NAMES[status], t_ns=at + END_NS)
            end = max(end, at + END_NS)
            if s is streams[0][0]:
                time.sleep(PAUSE_S)  # inside the batch, as mp_worker.c
        t = end + 1000
        reg.publish()
        os.write(fd, b"C\n")
    reg.close()  # the final publish
    os.close(fd)


if __name__ == "__main__":
    main()
