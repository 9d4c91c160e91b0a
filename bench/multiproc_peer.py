#!/usr/bin/python3
"""bench/multiproc_peer.py: prometheus_client's multiprocess mode, measured.

The peer of docs/multiprocess.md's comparison table: what vLLM (and any
gunicorn/uvicorn server) gets from prometheus_client when it runs several
processes. Set up as vLLM sets it up: PROMETHEUS_MULTIPROC_DIR set before
prometheus_client is imported, metrics created in the parent before the
workers fork, a scrape that builds a fresh CollectorRegistry with a
MultiProcessCollector and calls generate_latest. The metrics are vLLM's
TTFT histogram (its bucket list, labels model_name and engine), a counter
(requests), and the in-flight gauge in two multiprocess modes: 'all' (the
default) and 'livesum'.

Each worker records a known workload: W requests, each one TTFT
observation of a known value and one counter increment, the in-flight
gauge up at begin and down at the end; a worker then keeps LEFT requests
in flight until it exits. A clean exit drains (in flight back to 0) and,
as prometheus_client's gunicorn recipe says, the parent then calls
mark_process_dead(pid). A SIGKILL does neither.

Measured, for N = 1, 8, 64 live workers and after K = 100 restarts (and
1000 at N = 64; a restart: a worker exits cleanly, a new one with a new
pid takes its place): files in the
directory, scrape time (wall and this process's CPU, medians of several
generate_latest calls), the
series and values of the in-flight gauge, whether the histogram's count
is exact; then whether exemplars and native histograms exist on this
path, and what a SIGKILL leaves. Prints one Markdown table per part.

Needs Debian's python3-prometheus-client (.ci/packages.d/prometheus.txt):
run it with /usr/bin/python3. Linux only (fork, /dev/shm). Not a test: it
asserts nothing about the peer; it says what the peer does.

  /usr/bin/python3 bench/multiproc_peer.py [--quick] [--metrics vllm|minimal] [--dir /dev/shm]
"""

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--quick", action="store_true", help="fewer workers and restarts (CI smoke)")
ap.add_argument("--metrics", choices=["vllm", "minimal"], default="vllm",
                help="vllm (default): also vLLM's other request histograms and counters, "
                     "recorded per request as vLLM does; minimal: TTFT, requests, in flight")
ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                help="where the multiprocess directory is made (default /dev/shm, tmpfs)")
args = ap.parse_args()

ROOT = tempfile.mkdtemp(prefix="ttft-peer-", dir=args.dir)
MPDIR = os.path.join(ROOT, "mp")
os.mkdir(MPDIR)
# before the first import, as vLLM does (prometheus_client picks its value
# class at import time)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = MPDIR

try:
    import prometheus_client
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, multiprocess
    from prometheus_client import generate_latest
    from prometheus_client.openmetrics import exposition as om_exposition
except ImportError:
    sys.stderr.write("multiproc_peer: prometheus_client is not importable by %s "
                     "(apt-get install python3-prometheus-client; run /usr/bin/python3)\n"
                     % sys.executable)
    shutil.rmtree(ROOT, ignore_errors=True)
    sys.exit(77)

# vLLM's vllm:time_to_first_token_seconds buckets (vllm/v1/metrics/loggers.py)
VLLM_TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                     1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
LABELS = ["model_name", "engine"]

TTFT = Histogram("peer:time_to_first_token_seconds", "TTFT", LABELS, buckets=VLLM_TTFT_BUCKETS)
REQS = Counter("peer:requests", "requests begun", LABELS)
INFLIGHT_ALL = Gauge("peer:in_flight_all", "in flight (multiprocess_mode all)", LABELS)
INFLIGHT_LIVESUM = Gauge("peer:in_flight_livesum", "in flight (livesum)", LABELS,
                         multiprocess_mode="livesum")

# vLLM's other per-request histograms and counters (vllm/v1/metrics/
# loggers.py), for a directory and a scrape of a realistic size: each
# request observes every one once. 1-2-5 buckets up to max_model_len 8192.
LAT = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
       120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
TOK = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]
VLLM_HISTS = [] if args.metrics == "minimal" else [
    Histogram("peer:time_per_output_token_seconds", "TPOT", LABELS,
              buckets=[0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
                       2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]),
    Histogram("peer:time_per_prefill_token_request_seconds", "prefill per token", LABELS,
              buckets=[0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]),
    Histogram("peer:e2e_request_latency_seconds", "e2e", LABELS, buckets=LAT),
    Histogram("peer:request_queue_time_seconds", "queue", LABELS, buckets=LAT),
    Histogram("peer:request_inference_time_seconds", "inference", LABELS, buckets=LAT),
    Histogram("peer:request_prefill_time_seconds", "prefill", LABELS, buckets=LAT),
    Histogram("peer:request_decode_time_seconds", "decode", LABELS, buckets=LAT),
    Histogram("peer:request_prompt_tokens", "prompt tokens", LABELS, buckets=TOK),
    Histogram("peer:request_generation_tokens", "generation tokens", LABELS, buckets=TOK),
    Histogram("peer:request_params_max_tokens", "max_tokens", LABELS, buckets=TOK),
    Histogram("peer:request_params_n", "n", LABELS, buckets=[1, 2, 5, 10, 20]),
]
VLLM_COUNTERS = [] if args.metrics == "minimal" else [
    Counter("peer:prompt_tokens", "prompt tokens", LABELS),
    Counter("peer:generation_tokens", "generation tokens", LABELS),
    Counter("peer:num_preemptions", "preemptions", LABELS),
    Counter("peer:prefix_cache_queries", "prefix cache queries", LABELS),
    Counter("peer:prefix_cache_hits", "prefix cache hits", LABELS),
]

W = 200 if args.quick else 1000    # requests per worker
LEFT = 2                           # requests each live worker keeps in flight
SCRAPES = 5 if args.quick else 9


def ttft_value(i):
    """The i-th request's TTFT in seconds: spread over vLLM's buckets."""
    return 0.002 * (1 + (i * 37) % 997)


def worker_body(rank, rfd, wfd):
    """In a forked child: record the workload, say ready, wait for the
    parent's word: 'x' = clean exit (drain), nothing (EOF/kill) = die."""
    lv = ("m", "0")  # every API-server process records the same series
    h, c = TTFT.labels(*lv), REQS.labels(*lv)
    ga, gl = INFLIGHT_ALL.labels(*lv), INFLIGHT_LIVESUM.labels(*lv)
    hs = [m.labels(*lv) for m in VLLM_HISTS]
    cs = [m.labels(*lv) for m in VLLM_COUNTERS]
    for i in range(W):
        for m in hs:
            m.observe(ttft_value(i) * 3)
        for m in cs:
            m.inc(1 + i % 7)
        c.inc()
        ga.inc()
        gl.inc()
        h.observe(ttft_value(i), exemplar={"trace_id": "%032x" % (rank * W + i + 1)})
        if i < W - LEFT:
            ga.dec()
            gl.dec()
    os.write(wfd, b"r")
    cmd = os.read(rfd, 1)
    if cmd == b"x":  # a clean exit drains what is in flight
        ga.dec(LEFT)
        gl.dec(LEFT)
    os._exit(0)


class Worker:
    def __init__(self, rank):
        r1, w1 = os.pipe()  # parent -> child
        r2, w2 = os.pipe()  # child -> parent
        pid = os.fork()
        if pid == 0:
            os.close(w1)
            os.close(r2)
            try:
                worker_body(rank, r1, w2)
            finally:
                os._exit(1)
        os.close(r1)
        os.close(w2)
        self.pid, self.cmd, self.ack = pid, w1, r2
        if os.read(r2, 1) != b"r":
            raise SystemExit("worker %d did not start" % pid)

    def exit_clean(self):
        os.write(self.cmd, b"x")
        os.waitpid(self.pid, 0)
        multiprocess.mark_process_dead(self.pid)  # the documented child_exit hook
        self._close()

    def kill(self):
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        self._close()

    def _close(self):
        os.close(self.cmd)
        os.close(self.ack)


def scrape(openmetrics=False):
    reg = CollectorRegistry()
    multiprocess.MultiProcessCollector(reg)
    return (om_exposition.generate_latest(reg) if openmetrics else generate_latest(reg)).decode()


def scrape_median_ms():
    """(wall ms, CPU ms of this process): medians over SCRAPES scrapes."""
    wall, cpu = [], []
    for _ in range(SCRAPES):
        t0, c0 = time.perf_counter(), time.process_time()
        scrape()
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return statistics.median(wall), statistics.median(cpu)


def samples(text, name):
    out = []
    for line in text.splitlines():
        if line.startswith(name):
            key, _, val = line.rpartition(" ")
            out.append((key, float(val)))
    return out


def file_stats():
    names = os.listdir(MPDIR)
    size = sum(os.stat(os.path.join(MPDIR, n)).st_blocks * 512 for n in names)
    return len(names), size


def observed(text):
    return sum(v for k, v in samples(text, "peer:time_to_first_token_seconds_count"))


def row(*cells):
    print("| " + " | ".join(str(c) for c in cells) + " |")


def fresh_dir():
    for n in os.listdir(MPDIR):
        os.unlink(os.path.join(MPDIR, n))


try:
    from importlib.metadata import version as _version
    PEER_VERSION = _version("prometheus_client")
except Exception:  # an unpackaged copy
    PEER_VERSION = "?"

print("# prometheus_client %s multiprocess mode, measured (%s, Python %s, %s)"
      % (PEER_VERSION, sys.executable,
         sys.version.split()[0], "tmpfs " + ROOT if ROOT.startswith("/dev/shm") else ROOT))
print("# workload: %d requests per worker (each observes every histogram and increments every counter once; in-flight gauge up/down); "
      "%d left in flight per live worker; scrape = CollectorRegistry + MultiProcessCollector + "
      "generate_latest, median of %d; metric set %s (%d histograms, %d counters, 2 gauges)"
      % (W, LEFT, SCRAPES, args.metrics, 1 + len(VLLM_HISTS), 1 + len(VLLM_COUNTERS)))
print()

# --- part 1: N live workers, then K clean restarts -------------------------
ns = [1, 8] if args.quick else [1, 8, 64]


def restarts(n):
    """Restart counts measured at n live workers: 1000 only at the largest n."""
    return [0, 100] if args.quick or n < 64 else [0, 100, 1000]


print("## live workers and restarts")
print()
row("live workers", "restarts", "files", "bytes on disk", "scrape ms (median)", "scrape CPU ms",
    "TTFT count (exact?)", "in-flight 'all': series / sum / non-zero", "in-flight 'livesum'",
    "real in flight")
row(*["---"] * 10)
for n in ns:
    fresh_dir()
    workers = [Worker(r) for r in range(n)]
    done = 0
    for k in restarts(n):
        while done < k:  # a clean restart: the slot's worker exits, a new pid takes over
            slot = done % n
            workers[slot].exit_clean()
            workers[slot] = Worker(n + done)
            done += 1
        text = scrape()
        ms, cpu = scrape_median_ms()
        nfiles, nbytes = file_stats()
        count = observed(text)
        want = (n + k) * W
        ga = samples(text, "peer:in_flight_all{")
        gl = samples(text, "peer:in_flight_livesum{")
        row(n, k, nfiles, nbytes, "%.2f" % ms, "%.2f" % cpu,
            "%d (%s)" % (count, "yes" if count == want else "want %d" % want),
            "%d / %g / %d" % (len(ga), sum(v for _, v in ga), sum(1 for _, v in ga if v)),
            "%d series, %g" % (len(gl), sum(v for _, v in gl)),
            n * LEFT)
    for w in workers:
        w.exit_clean()
print()

# --- part 2: exemplars and native histograms --------------------------------
fresh_dir()
w = Worker(0)
om = scrape(openmetrics=True)
w.exit_clean()
ex_lines = [l for l in om.splitlines() if " # {" in l]
# the control: the same observe with an exemplar, in a process without
# PROMETHEUS_MULTIPROC_DIR (prometheus_client's ordinary mode)
import subprocess
CONTROL = (
    "from prometheus_client import CollectorRegistry, Histogram\n"
    "from prometheus_client.openmetrics.exposition import generate_latest\n"
    "r = CollectorRegistry()\n"
    "h = Histogram('c', 'c', buckets=[0.1, 1.0], registry=r)\n"
    "h.observe(0.05, exemplar={'trace_id': 'abc'})\n"
    "print(sum(' # {' in l for l in generate_latest(r).decode().splitlines()))\n")
env = dict(os.environ)
env.pop("PROMETHEUS_MULTIPROC_DIR")
control = subprocess.run([sys.executable, "-c", CONTROL], env=env, capture_output=True,
                         text=True, check=True).stdout.strip()
native_api = any("native" in p for p in Histogram.__init__.__code__.co_varnames)
proto = [n for n in dir(prometheus_client.exposition) if "proto" in n.lower()]
print("## exemplars and native histograms")
print()
row("question", "answer", "how verified")
row("---", "---", "---")
row("exemplars in the OpenMetrics scrape", "%d exemplar lines" % len(ex_lines),
    "every observe() passed exemplar={'trace_id': ...}; openmetrics generate_latest "
    "(control, one process without PROMETHEUS_MULTIPROC_DIR: %s exemplar line)" % control)
row("native histograms (Histogram arguments)", "yes" if native_api else "none",
    "Histogram.__init__ parameters: %s" % ", ".join(
        Histogram.__init__.__code__.co_varnames[1:Histogram.__init__.__code__.co_argcount]))
row("protobuf exposition (the only format that carries native histograms)",
    "yes" if proto else "none", "names in prometheus_client.exposition: %s" % (proto or "no *proto*"))
row("process metrics (process_cpu_seconds_total...)",
    "present" if "process_cpu_seconds_total" in om else "absent",
    "the multiprocess scrape registry holds only the MultiProcessCollector")
print()

# --- part 3: SIGKILL ----------------------------------------------------------
fresh_dir()
print("## a SIGKILLed worker (8 live workers, one killed)")
print()
workers = [Worker(r) for r in range(8)]
before, files_before = scrape(), file_stats()[0]
workers[3].kill()
killed = workers.pop(3)
after, files_after = scrape(), file_stats()[0]
multiprocess.mark_process_dead(killed.pid)  # what a master's child_exit hook would do
after_mark, files_mark = scrape(), file_stats()[0]
row("moment", "TTFT count", "requests_total", "in-flight 'all' (series / sum)",
    "in-flight 'livesum'", "real in flight", "files")
row(*["---"] * 7)
for label, t, real, nf in (("before the kill", before, 8 * LEFT, files_before),
                           ("after SIGKILL", after, 7 * LEFT, files_after),
                           ("after mark_process_dead(pid)", after_mark, 7 * LEFT, files_mark)):
    ga = samples(t, "peer:in_flight_all{")
    gl = samples(t, "peer:in_flight_livesum{")
    row(label, "%d" % observed(t),
        "%d" % sum(v for _, v in samples(t, "peer:requests_total")),
        "%d / %g" % (len(ga), sum(v for _, v in ga)), "%g" % sum(v for _, v in gl), real, nf)
for w in workers:
    w.exit_clean()
print()
print("# the killed worker's counts are kept (its mmap'd file stays); its 'all' gauge series")
print("# stays with its last value for ever; 'livesum' keeps it until someone calls")
print("# mark_process_dead(pid), which a SIGKILLed process cannot do itself.")

shutil.rmtree(ROOT, ignore_errors=True)
