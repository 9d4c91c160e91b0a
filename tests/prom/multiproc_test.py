#!/usr/bin/env python3
"""multiproc_test.py WORKER_BIN EXPORTER_BIN [PROMETHEUS_BIN] --python-worker F
                     [--dashboard F] [--rules F] [--duration S]

Many processes, one truth (issue 28, item 6), through a real Prometheus,
loopback only, about three minutes:

 1. one shared directory (a fresh mkdtemp, mode 0700, under /dev/shm when
    it exists); 8 worker processes w0..w7, 5 C (mp_worker.c) and 3 Python
    (mp_worker.py, the Python binding's Registry(shared_dir=...,
    process_name=...)), each publishing every 100 ms and after each batch
    of 2 streams, each keeping a ledger of exactly what it recorded and
    what it had published (mp_worker.c's header comment);
 2. two tools/ttft-exporter processes over the directory: the merged view
    (scraped) and --by-process (read at the end); a Prometheus 2.x server
    (Debian's), native histograms enabled (protobuf scrapes), 1 s scrape
    and rule evaluation, the recording and alerting rules loaded, the
    merged exporter as its only target;
 3. the workers start, publish their classes at zero and wait at a gate
    until Prometheus has scraped the classes twice (so each series' first
    sample holds no observation and rate() over the run counts all);
    then for --duration seconds (default 125) a driver restarts a random
    worker every 0.5..1.5 s under the same process_name, half with SIGTERM
    (the worker frees its registry: its final publish) and half with
    SIGKILL (a publish in flight, or a batch recorded but not published);
    then all stop with SIGTERM;
 4. asserts:
      - resets() = 0 over the whole run for every counter series of the
        endpoint and every native histogram series (resets() over native
        histograms where this Prometheus supports it; and in any case
        histogram_count and histogram_sum of each histogram series never
        fall, from query_range at the scrape interval);
      - the final counters (requests started, ended by status, output
        tokens, stalls, stalled requests, stalled seconds, SLO met and
        judged) and histogram counts and sums per class equal the ledgers:
        at least what was published, at most that plus the SIGKILLed
        workers' unpublished last batches (the only loss the docs allow);
        a SIGTERMed worker loses nothing;
      - every recording rule (p50/p90/p99 of TTFT, TPOT, ITL per class, the
        SLO rates, ratios and objectives, the stall-cause shares) and every
        dashboard expression (tests/prom/fleet_test.py's dashboard reader;
        variables at "all", 5m windows) within 1 % of the exact value from
        the ledgers: quantiles as nearest ranks of the union of every
        process's values (anywhere in the range the unpublished SIGKILL
        batches and a rank tie allow: check()'s quant), ratios between
        their extremes over that window, rates as the exact increase times PromQL's extrapolation
        (fleet_test.counter_factor) over the window; per-stream p95 gaps
        within the resolution the library keeps them to;
      - the --by-process endpoint's series summed over process equal the
        merged endpoint's (every counter, histogram count and bucket), and
        each process's started requests match its own ledgers.
    Prints a summary (restarts, kills, scrapes, max errors).
Cleans up every process and directory whatever happens.

Missing prometheus: FAIL under CI (CI set), otherwise exit 77 (ctest SKIP).
"""
import argparse
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet_test import (Prometheus, counter_factor, dashboard_exprs,  # noqa: E402
                        extrapolation_factor, native_bound, substitute)
from promtest import api, fail, failures, http_text, prometheus_binary, query, scalar  # noqa: E402

NAMES = ["w%d" % i for i in range(8)]
PYTHON_WORKERS = {5, 6, 7}  # the rest are C
CLASSES = ["chat", "code", "batch"]
STATUSES = ["completed", "cancelled", "error"]
TTFT_BUDGET = {"chat": 500_000_000, "code": 1_000_000_000, "batch": 5_000_000_000}
TPOT_BUDGET = {"chat": 60_000_000, "code": 40_000_000, "batch": 0}
OBJECTIVES = {"batch": 0.95}  # the rules' objective; 0.99 for every other class
STALL_BUDGET = 500_000_000  # the registry's default; no class sets its own
END_NS = 1_000_000
FLUID_MIN = 0.9  # ttft_slo.fluid_min's default; no class sets its own
SCHEMA = 7  # native_schema: the library's default
QS = ["0.5", "0.9", "0.99"]
HISTS = {"TTFT": "gen_ai_server_time_to_first_token_seconds",
         "TPOT": "gen_ai_server_time_per_output_token_seconds",
         "ITL": "llm_inter_token_latency_seconds",
         "E2E": "gen_ai_server_request_duration_seconds",
         "P95G": "llm_request_inter_token_latency_p95_seconds"}
SEQ_P95_RES = 1 / 32.0  # fleet_test: a stream's own p95 gap is kept to its 16-per-octave bucket
MODEL = "mp-test"


# ------------------------------------------------------------- ledgers
class Tally:
    """What a set of streams adds: counters by (family, class[, status])
    and value lists by (metric, class)."""

    def __init__(self):
        self.ctr = {}
        self.vals = {(m, c): [] for m in HISTS for c in CLASSES}
        self.sums = {(m, c): 0 for m in HISTS for c in CLASSES}

    def add_ctr(self, key, v=1):
        self.ctr[key] = self.ctr.get(key, 0) + v

    def stream(self, cls, status, ttft, gaps):
        self.add_ctr(("llm_requests_started_total", cls))
        self.add_ctr(("llm_requests_ended_total", cls, status))
        self.add_ctr(("llm_output_tokens_total", cls), 1 + len(gaps))
        stalls = [g for g in gaps if g > STALL_BUDGET]
        self.add_ctr(("llm_stalls_total", cls), len(stalls))
        self.add_ctr(("llm_stalled_requests_total", cls), 1 if stalls else 0)
        self.add_ctr(("llm_stall_seconds_total", cls), sum(stalls))  # ns
        tpot = sum(gaps) // len(gaps) if gaps else None
        within = ttft <= TTFT_BUDGET[cls] and (not TPOT_BUDGET[cls] or tpot is None or
                                               tpot <= TPOT_BUDGET[cls])
        self.add_ctr(("llm_requests_slo_judged_total", cls),
                     1 if status != "cancelled" or not within else 0)
        self.add_ctr(("llm_requests_slo_met_total", cls),
                     1 if status == "completed" and within else 0)
        # token deadlines (SPEC 10.2): D = the class's TPOT budget, one
        # token an emission; a cancel counts the deadlines that passed
        # since the last token (none here: it comes END_NS after it)
        d = TPOT_BUDGET[cls]
        if d:
            slack = total = missed = 0
            for g in gaps:
                if g <= d + slack:
                    slack, total = d + slack - g, total + 1
                else:
                    m = (g - slack - d) // d + 1
                    missed, total, slack = missed + m, total + m, 0
            if status == "cancelled" and END_NS > d + slack:
                m = (END_NS - slack - d) // d + 1
                missed, total = missed + m, total + m
            self.add_ctr(("llm_token_deadlines_total", cls), total)
            self.add_ctr(("llm_token_deadlines_missed_total", cls), missed)
            fluidity = 1.0 - missed / total if total else 1.0
            self.add_ctr(("llm_requests_fluid_judged_total", cls),
                         1 if status != "cancelled" or missed else 0)
            self.add_ctr(("llm_requests_fluid_total", cls),
                         1 if status == "completed" and fluidity >= FLUID_MIN else 0)
        e2e = ttft + sum(gaps) + END_NS
        self._val("TTFT", cls, ttft)
        self._val("E2E", cls, e2e)
        if gaps:
            self._val("TPOT", cls, tpot)
            for g in gaps:
                self._val("ITL", cls, g)
            s = sorted(gaps)
            self._val("P95G", cls, s[math.ceil(Fraction(95, 100) * len(s)) - 1])

    def _val(self, m, cls, v):
        self.vals[(m, cls)].append(v)
        self.sums[(m, cls)] += v

    def merge(self, other):
        for k, v in other.ctr.items():
            self.add_ctr(k, v)
        for k in self.vals:
            self.vals[k].extend(other.vals[k])
            self.sums[k] += other.sums[k]


def read_ledger(path, committed, pending):
    """Adds a ledger's published streams to committed and its unpublished
    last batch (stream lines after the last C) to pending. Returns
    (published batches, streams in the unpublished batch)."""
    with open(path) as f:
        text = f.read()
    lines = text.split("\n")
    if not text.endswith("\n"):
        lines = lines[:-1]  # a line cut by SIGKILL: planned, never recorded
    batch, nbatch = [], 0
    for ln in lines:
        if not ln:
            continue
        if ln == "C":
            for s in batch:
                committed.stream(*s)
            batch, nbatch = [], nbatch + 1
            continue
        p = ln.split()
        if p[0] != "S" or p[1] not in CLASSES or p[2] not in STATUSES:
            raise RuntimeError("%s: bad ledger line %r" % (path, ln))
        batch.append((p[1], p[2], int(p[3]), [int(x) for x in p[4:]]))
    for s in batch:
        pending.stream(*s)
    return nbatch, len(batch)


def ratio_range(a, b):
    """the range of x / y for x in a = (lo, hi) and y in b = (lo, hi);
    [] when y may be 0"""
    return [a[0] / b[1], a[1] / b[0]] if b[0] else []


def range_error(got, candidates):
    """0 when got lies between the smallest and the largest candidate,
    else its relative distance to the nearer end"""
    lo, hi = min(candidates), max(candidates)
    if lo <= got <= hi:
        return 0.0
    return (lo - got) / lo if got < lo else (got - hi) / hi


# ------------------------------------------------------------- processes
class Worker:
    def __init__(self, wid, gen, args, shared, state, gate):
        self.wid, self.gen = wid, gen
        self.name = NAMES[wid]
        self.ledger = os.path.join(state, "%s.g%03d.ledger" % (self.name, gen))
        seed = str(1_000_003 * (wid + 1) + 7919 * gen)
        tail = [str(wid), self.name, shared, self.ledger, gate, seed]
        if wid in PYTHON_WORKERS:
            cmd = [sys.executable, args.python_worker] + tail
        else:
            cmd = [args.worker] + tail
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        self.how = None  # "term" or "kill" once stopped

    def wait_ready(self):
        line = self.p.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError("worker %s (gen %d) did not start: %r, exit %s"
                               % (self.name, self.gen, line, self.p.poll()))

    def stop(self, how, timeout=20):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL if how == "kill" else signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise RuntimeError("worker %s did not exit within %d s of SIGTERM"
                               % (self.name, timeout))
        if self.how is None:
            self.how = how
            if how == "term" and rc != 0:
                fail("worker %s (gen %d) exited %s after SIGTERM" % (self.name, self.gen, rc))


class Exporter:
    def __init__(self, binary, shared, by_process):
        cmd = [binary, "--dir", shared, "--listen", "127.0.0.1:0"]
        if by_process:
            cmd.append("--by-process")
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        m = re.search(r"http://([0-9.]+:\d+)/metrics", line)
        if not m:
            raise RuntimeError("ttft-exporter did not report its address: %r" % line)
        self.target = m.group(1)

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                rc = self.p.wait(timeout=10)
                if rc != 0:
                    fail("ttft-exporter exited %s after SIGTERM" % rc)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                fail("ttft-exporter did not stop on SIGTERM")


def shared_parent():
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


# ---------------------------------------------------------- exposition
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_text(body, drop=None):
    """{(name, sorted labels without label drop): summed value} of a text
    exposition"""
    out = {}
    for ln in body.splitlines():
        if not ln or ln.startswith("#"):
            continue
        m = SAMPLE.match(ln)
        if not m:
            raise RuntimeError("exposition line not understood: %r" % ln)
        labels = tuple(sorted((k, v) for k, v in LABEL.findall(m.group(2) or "") if k != drop))
        key = (m.group(1), labels)
        out[key] = out.get(key, 0.0) + float(m.group(3))
    return out


# ---------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("worker")
    ap.add_argument("exporter")
    ap.add_argument("prometheus", nargs="?", default="")
    ap.add_argument("--python-worker", required=True)
    ap.add_argument("--dashboard")
    ap.add_argument("--rules")
    ap.add_argument("--duration", type=float, default=125.0)
    ap.add_argument("--seed", type=int, default=28)
    args = ap.parse_args()
    prometheus = prometheus_binary(args.prometheus)
    t_begin = time.monotonic()
    rng = random.Random(args.seed)
    tmp = tempfile.mkdtemp(prefix="ttft-mp-")
    shared = tempfile.mkdtemp(prefix="ttft-mp-", dir=shared_parent())
    os.chmod(shared, 0o700)
    state = os.path.join(tmp, "ledgers")
    os.makedirs(state)
    gate = os.path.join(tmp, "go")
    workers, stopped, exporters, prom = {}, [], [], None
    try:
        merged = Exporter(args.exporter, shared, False)
        exporters.append(merged)
        byproc = Exporter(args.exporter, shared, True)
        exporters.append(byproc)
        for wid in range(8):
            workers[wid] = Worker(wid, 0, args, shared, state, gate)
        for w in workers.values():
            w.wait_ready()
        prom = Prometheus(prometheus, tmp, "native", [merged.target], True,
                          os.path.abspath(args.rules) if args.rules else None, 1)
        print("shared dir %s; exporters %s (merged), %s (--by-process); prometheus %s"
              % (shared, merged.target, byproc.target, prom.addr), flush=True)
        # the gate: every class scraped at zero twice
        until = time.monotonic() + 30
        while time.monotonic() < until:
            r = query(prom.addr, 'count_over_time(llm_requests_started_total{job="llm"}[1m])')
            if len(r["result"]) == len(CLASSES) and \
                    all(float(x["value"][1]) >= 2 for x in r["result"]):
                break
            time.sleep(0.25)
        else:
            raise RuntimeError("Prometheus did not scrape the three classes twice within 30 s")
        with open(gate, "w"):
            pass
        t_go = time.time()
        print("gate open: %d workers recording (%d C, %d Python)"
              % (len(workers), 8 - len(PYTHON_WORKERS), len(PYTHON_WORKERS)), flush=True)

        # the driver: a random worker restarts every 0.5..1.5 s
        restarts = {"term": 0, "kill": 0}
        end = time.monotonic() + args.duration
        gens = {wid: 0 for wid in workers}
        while time.monotonic() < end:
            time.sleep(rng.uniform(0.5, 1.5))
            wid = rng.randrange(8)
            how = "kill" if rng.random() < 0.5 else "term"
            w = workers[wid]
            w.stop(how)
            stopped.append(w)
            restarts[how] += 1
            gens[wid] += 1
            workers[wid] = Worker(wid, gens[wid], args, shared, state, gate)
            workers[wid].wait_ready()
        for w in list(workers.values()):
            w.stop("term")
            stopped.append(w)
        workers = {}
        t_stop = time.time()
        print("driver: %.0f s, %d restarts (%d SIGTERM, %d SIGKILL); all stopped"
              % (t_stop - t_go, restarts["term"] + restarts["kill"], restarts["term"],
                 restarts["kill"]), flush=True)
        # three more scrapes and rule evaluations of the final state (the
        # exporter's takes fold the exited processes into the archive)
        time.sleep(3.5)
        n_files = sorted(os.listdir(shared))
        at = time.time()
        check(args, prom, merged, byproc, stopped, restarts, t_go, at, n_files, t_begin)
    finally:
        for w in list(workers.values()) + stopped:
            if w.p.poll() is None:
                w.p.kill()
                w.p.wait()
        for e in exporters:
            e.stop()
        if prom:
            prom.stop()
            if failures:
                print("--- prometheus log (tail)\n%s" % prom.tail())
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(shared, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("multiprocess test passed (%.1f s)" % (time.monotonic() - t_begin))
    return 0


def check(args, prom, merged, byproc, stopped, restarts, t_go, at, n_files, t_begin):
    addr = prom.addr
    run_s = math.ceil(at - t_go) + 60  # a range covering the whole run
    # ------------------------------------------------------ the ledgers
    committed, pending = Tally(), Tally()
    per_name = {n: (Tally(), Tally()) for n in NAMES}
    nbatches, kills_mid_batch = 0, 0
    for w in stopped:
        c, p = Tally(), Tally()
        nb, npend = read_ledger(w.ledger, c, p)
        nbatches += nb
        kills_mid_batch += 1 if npend else 0
        if w.how == "term" and npend:
            fail("worker %s gen %d stopped by SIGTERM left %d unpublished streams in its ledger"
                 % (w.name, w.gen, npend))
        committed.merge(c)
        pending.merge(p)
        per_name[w.name][0].merge(c)
        per_name[w.name][1].merge(p)
    upper = Tally()
    upper.merge(committed)
    upper.merge(pending)
    n_streams = sum(v for k, v in committed.ctr.items() if k[0] == "llm_requests_started_total")
    n_pend = sum(v for k, v in pending.ctr.items() if k[0] == "llm_requests_started_total")
    print("ledgers: %d processes, %d published batches, %d streams published, %d in the SIGKILL "
          "window (%.3f %%) from %d SIGKILLs inside a batch"
          % (len(stopped), nbatches, n_streams, n_pend, 100.0 * n_pend / max(n_streams, 1),
             kills_mid_batch), flush=True)
    if restarts["kill"] >= 20 and kills_mid_batch < restarts["kill"] // 4:
        fail("only %d of %d SIGKILLs landed inside a batch: the loss window is not exercised"
             % (kills_mid_batch, restarts["kill"]))
    if n_streams < 100 * args.duration:
        fail("only %d streams recorded: the workload is too small to mean anything" % n_streams)
    for t in (committed, upper):
        for k in t.vals:
            t.vals[k].sort()

    # ------------------------------------------------------ scrapes
    ups = query(addr, 'up{job="llm"}[%ds]' % run_s, at)["result"]
    scrapes = len(ups[0]["values"]) if ups else 0
    down = sum(1 for v in ups[0]["values"] if v[1] != "1") if ups else 0
    print("scrapes: %d of the merged endpoint, %d failed" % (scrapes, down))
    if down:
        fail("%d scrapes of the gathered endpoint failed" % down)
    # every process has exited: what is left is the archive (and the
    # gatherers' fold lock), whatever the number of restarts
    if len([f for f in n_files if not f.endswith(".lock")]) > 1:
        fail("the shared directory holds %s after %d processes exited" % (n_files, len(stopped)))
    print("shared directory after %d processes: %s" % (len(stopped), " ".join(n_files)))

    # ------------------------------------------------------ resets
    inst = query(addr, '{job="llm"}', at)["result"]
    n_counter = 0
    for fam in sorted({x["metric"]["__name__"] for x in inst
                       if x["metric"]["__name__"].endswith("_total")}):
        res = query(addr, 'resets(%s{job="llm"}[%ds])' % (fam, run_s), at)["result"]
        n_counter += len(res)
        for x in res:
            if float(x["value"][1]) != 0:
                fail("resets() = %s for counter %s %s" % (x["value"][1], fam, x["metric"]))
    if n_counter < 30:
        fail("resets(): only %d counter series" % n_counter)
    hfams = sorted({x["metric"]["__name__"] for x in inst if "histogram" in x})
    if len(hfams) < 10:
        fail("only %d native histogram families scraped: %s" % (len(hfams), hfams))
    n_hist, hist_resets_supported, falls = 0, True, 0
    for fam in hfams:
        r = query(addr, 'resets(%s{job="llm"}[%ds])' % (fam, run_s), at)["result"]
        if not r:
            hist_resets_supported = False
        for x in r:
            if float(x["value"][1]) != 0:
                fail("resets() = %s for native histogram %s" % (x["value"][1], x["metric"]))
        # and in any case: count and sum of every series never fall
        for fn in ("histogram_count", "histogram_sum"):
            rr = api(addr, "/api/v1/query_range",
                     {"query": '%s(%s{job="llm"})' % (fn, fam), "start": "%.3f" % (at - run_s),
                      "end": "%.3f" % at, "step": "1"})["result"]
            for x in rr:
                if fn == "histogram_count":
                    n_hist += 1
                prev = None
                for t, v in x["values"]:
                    v = float(v)
                    if prev is not None and v < prev:
                        falls += 1
                        fail("%s(%s) fell from %s to %s at %s" % (fn, x["metric"], prev, v, t))
                    prev = v
    print("ok   resets() = 0 for %d counter series; %d native histogram series (%d families): "
          "resets() over native histograms %s; histogram_count and histogram_sum never fall "
          "(query_range, step 1 s)" % (n_counter, n_hist, len(hfams),
                                       "= 0" if hist_resets_supported else
                                       "NOT SUPPORTED by this Prometheus (empty answer)"),
          flush=True)

    # ------------------------------------------------------ final counters
    def final(expr):
        return {x["metric"].get("class", "") + "|" + x["metric"].get("status", ""):
                float(x["value"][1]) for x in query(addr, expr, at)["result"]}
    ncmp = 0
    for fam in ("llm_requests_started_total", "llm_requests_ended_total", "llm_output_tokens_total",
                "llm_stalls_total", "llm_stalled_requests_total", "llm_stall_seconds_total",
                "llm_requests_slo_met_total", "llm_requests_slo_judged_total"):
        by = "class, status" if fam == "llm_requests_ended_total" else "class"
        got = final('sum by (%s) (%s{job="llm"})' % (by, fam))
        for cls in CLASSES:
            for st in (STATUSES if fam == "llm_requests_ended_total" else [None]):
                key = (fam, cls, st) if st else (fam, cls)
                lo, hi = committed.ctr.get(key, 0), upper.ctr.get(key, 0)
                scale = 1e9 if fam == "llm_stall_seconds_total" else 1
                g = got.get(cls + "|" + (st or ""))
                ncmp += 1
                if g is None or not (lo / scale * (1 - 1e-12) <= g <= hi / scale * (1 + 1e-12)):
                    fail("final %s{class=%s%s}: %s, the ledgers say %s .. %s"
                         % (fam, cls, ",status=" + st if st else "", g, lo / scale, hi / scale))
    for m in ("TTFT", "TPOT", "ITL", "E2E"):
        for fn, tol in (("histogram_count", 0), ("histogram_sum", 1e-9)):
            got = final('%s(sum by (class) (%s{job="llm"}))' % (fn, HISTS[m]))
            for cls in CLASSES:
                if fn == "histogram_count":
                    lo, hi = len(committed.vals[(m, cls)]), len(upper.vals[(m, cls)])
                else:
                    lo, hi = committed.sums[(m, cls)] / 1e9, upper.sums[(m, cls)] / 1e9
                    if m == "TPOT":
                        tol = 1e-6  # each value rounded to the ns
                g = got.get(cls + "|")
                ncmp += 1
                if g is None or not (lo * (1 - tol) - 1e-9 <= g <= hi * (1 + tol) + 1e-9):
                    fail("final %s(%s{class=%s}): %s, the ledgers say %s .. %s"
                         % (fn, HISTS[m], cls, g, lo, hi))
    print("ok   final counters and histogram counts/sums: %d series within the ledgers' "
          "bounds (published .. published + unpublished SIGKILL batches)" % ncmp, flush=True)

    # ------------------------------------------------------ exact values
    # every series of the run was created by the first scrape with data at
    # zero: rate() over the run is the increase times this factor / window
    raw = query(addr, 'llm_requests_started_total{job="llm"}[%ds]' % run_s, at)["result"]
    first_vals = [float(x["values"][0][1]) for x in raw]
    if any(v != 0 for v in first_vals):
        fail("the first sample of llm_requests_started_total is %s, not 0: rate() misses the "
             "first requests" % first_vals)
    factor = {}
    for w in ("5m", "30m", "1h", "6h"):
        ws = {"5m": 300, "30m": 1800, "1h": 3600, "6h": 21600}[w]
        x = raw[0]
        factor[w] = counter_factor([float(v[0]) for v in x["values"]],
                                   [float(v[1]) for v in x["values"]], at - ws, at) / ws
    # a native histogram's rate() in this Prometheus extrapolates towards
    # the window's start without the float counters' stop at zero
    hfactor = {w: extrapolation_factor([float(v[0]) for v in raw[0]["values"]], at - ws, at) / ws
               for w, ws in (("5m", 300),)}

    def factor_at(t_end, ws):
        """factor["5m"] for a window that ends at t_end (a rule's
        evaluation) instead of at"""
        pts = [(float(t), float(v)) for t, v in raw[0]["values"] if t_end - ws < float(t) <= t_end]
        return counter_factor([p[0] for p in pts], [p[1] for p in pts], t_end - ws, t_end) / ws
    worst = {"quantile": 0.0, "rate": 0.0, "ratio": 0.0, "p95": 0.0}
    worst_what, raw_err = {}, {}

    def quant(m, cls, q):
        """the range the exact quantile lies in (none for a class with no
        observation): the union holds the N published values C and some
        k <= n of the n values of the unpublished SIGKILL batches, so its
        nearest rank r = ceil(q (N + k)) lies between ceil(q N) and
        ceil(q (N + n)), and its r-th value between C's (r - k)-th and
        r-th; plus the next value for a rank tie (q N an integer: PromQL's
        extrapolated rank may reach it)"""
        if cls and cls not in CLASSES:
            return []
        cs = [cls] if cls else CLASSES
        c = sorted(v for x in cs for v in committed.vals[(m, x)]) if not cls \
            else committed.vals[(m, cls)]
        n = sum(len(pending.vals[(m, x)]) for x in cs)
        if not c:
            return []
        lo = max(math.ceil(Fraction(q) * len(c)) - n, 1)
        hi = min(math.ceil(Fraction(q) * (len(c) + n)) + 1, len(c))
        # last: the published values' own nearest rank (the point the
        # summary's raw error is measured against)
        return [c[lo - 1] / 1e9, c[hi - 1] / 1e9,
                c[max(math.ceil(Fraction(q) * len(c)), 1) - 1] / 1e9]
    quant.tallies = (committed, upper)
    quant.hfactor = hfactor

    def ctr_range(fam, cls=None, status=None):
        def one(t):
            return sum(v for k, v in t.ctr.items() if k[0] == fam and (cls is None or k[1] == cls)
                       and (status is None or k[2] == status))
        scale = 1e9 if fam == "llm_stall_seconds_total" else 1
        return one(committed) / scale, one(upper) / scale

    def cmp(what, got, cands, kind, bound=0.01):
        cands = [c for c in cands if c is not None]
        if not cands:
            if got is not None and not math.isnan(got):
                fail("%s: %s where no observation exists" % (what, got))
            return
        if got is None or math.isnan(got):
            fail("%s: no value, exact %s" % (what, cands))
            return
        if all(c == 0 for c in cands):
            e = abs(got)
        else:
            e = range_error(got, cands)
        if e >= worst[kind]:
            worst[kind], worst_what[kind] = e, what
        if kind in ("quantile", "p95") and cands[-1]:
            raw_err[kind] = max(raw_err.get(kind, 0.0), abs(got / cands[-1] - 1))
        if e >= bound:
            fail("%s: %s, exact %s (%+.3f %%)" % (what, got, cands, 100 * e))

    # -- recording rules
    if args.rules:
        nrule = 0
        groups = api(addr, "/api/v1/rules")["groups"]
        print("rules: %d groups, %d rules" % (len(groups), sum(len(g["rules"]) for g in groups)))
        for g in groups:
            for r in g["rules"]:
                if r.get("health") != "ok":
                    fail("rule %s: health %s %s" % (r["name"], r.get("health"),
                                                    r.get("lastError", "")))
                if r["type"] != "recording":
                    continue
                res = query(addr, r["name"], at)["result"]
                name = r["name"]
                for x in res:
                    cls = x["metric"].get("class")
                    got = float(x["value"][1])
                    what = "rule %s{class=%s}" % (name, cls)
                    nrule += 1
                    lm = re.match(r"class_model:(\w+):p(\d+)_rate5m$", name)
                    if lm:
                        m = [k for k, v in HISTS.items() if v == lm.group(1)][0]
                        cmp(what, got, quant(m, cls, "0." + lm.group(2)), "quantile")
                    elif name in ("class:llm_slo_objective:ratio", "class:llm_fluid_objective:ratio"):
                        cmp(what, got, [OBJECTIVES.get(cls, 0.99)], "ratio", 1e-12)
                    elif name in ("class_model:llm_requests_ended:rate5m",
                                  "class_model:llm_requests_slo_judged:rate5m",
                                  "class_model:llm_goodput:rate5m"):
                        fam = {"ended": "llm_requests_ended_total",
                               "judged": "llm_requests_slo_judged_total",
                               "goodput": "llm_requests_slo_met_total"}[
                            name.split(":")[1].split("_")[-1]]
                        # the rule's window ends at its evaluation
                        t_eval = scalar(addr, 'timestamp(%s{class="%s"})' % (name, cls), at)
                        cmp(what, got, [v * factor_at(t_eval, 300) for v in ctr_range(fam, cls)],
                            "rate")
                    elif "slo_attainment" in name or "slo_errors" in name:
                        a = ctr_range("llm_requests_slo_met_total", cls)
                        b = ctr_range("llm_requests_slo_judged_total", cls)
                        ratios = ratio_range(a, b)
                        if "slo_errors" in name:
                            ratios = [1 - v for v in ratios]
                        cmp(what, got, ratios, "ratio")
                    elif re.match(r"class_model:llm_(token_fluidity|fluid_attainment|fluid_errors):", name):
                        # token deadlines (1.3): the ledgers' fluidity
                        if "token_fluidity" in name:
                            a = ctr_range("llm_token_deadlines_missed_total", cls)
                            b = ctr_range("llm_token_deadlines_total", cls)
                        else:
                            a = ctr_range("llm_requests_fluid_total", cls)
                            b = ctr_range("llm_requests_fluid_judged_total", cls)
                        ratios = ratio_range(a, b)
                        if "fluid_attainment" not in name:
                            ratios = [1 - v for v in ratios]
                        cmp(what, got, ratios, "ratio")
                    elif re.match(r"class_model:llm_stall_seconds_\w+:ratio_rate5m$", name):
                        cmp(what, got, [0.0], "ratio")  # every stall's cause: unknown
                    else:
                        fail("rule %s: no exact value known for it" % name)
                if not res and re.match(r"class_model:\w+:p\d+_rate5m$", name):
                    fail("rule %s: no series" % name)
        if nrule < 9 * 3 + 3:
            fail("recording rules: only %d series compared" % nrule)
        print("ok   recording rules: %d series vs the ledgers; worst quantile %.3f %%, rate "
              "%.3f %%, ratio %.3f %%" % (nrule, 100 * worst["quantile"], 100 * worst["rate"],
                                         100 * worst["ratio"]), flush=True)

    # -- dashboard expressions
    if args.dashboard:
        dashboard(args, addr, at, merged, quant, ctr_range, cmp, factor, worst)

    # -- the per-process view
    _, body_m = http_text("http://%s/metrics" % merged.target, timeout=10)
    _, body_p = http_text("http://%s/metrics" % byproc.target, timeout=10)
    mv, pv = parse_text(body_m), parse_text(body_p, drop="process")
    per_proc = {}
    for key, v in parse_text(body_p).items():
        d = dict(key[1])
        if key[0] == "llm_requests_started_total" and "process" in d:
            per_proc[d["process"]] = per_proc.get(d["process"], 0) + v
    nsum = 0
    for key, v in mv.items():
        name = key[0]
        if not (name.endswith("_total") or name.endswith("_count") or name.endswith("_bucket")
                or name.endswith("_sum")):
            continue
        w = pv.get(key)
        nsum += 1
        # float sums (seconds) may differ in the last bits by the order of
        # the additions; counts, buckets and integer counters are exact
        tol = 1e-9 * abs(v) if name.endswith("_sum") or "seconds" in name else 0
        if w is None or abs(w - v) > tol:
            fail("per-process view: sum over process of %s%s = %s, merged %s"
                 % (name, dict(key[1]), w, v))
    if nsum < 100:
        fail("per-process view: only %d series compared" % nsum)
    for n in NAMES:
        c, p = per_name[n]
        lo = sum(v for k, v in c.ctr.items() if k[0] == "llm_requests_started_total")
        hi = lo + sum(v for k, v in p.ctr.items() if k[0] == "llm_requests_started_total")
        g = per_proc.get(n)
        if g is None or not lo <= g <= hi:
            fail("per-process view: llm_requests_started_total{process=%s} = %s, its ledgers "
                 "say %d .. %d" % (n, g, lo, hi))
    print("ok   per-process view: %d counter/count/bucket/sum series summed over process equal "
          "the merged view; each of %d processes' started requests match its ledgers"
          % (nsum, len(NAMES)), flush=True)

    for k, v in sorted(worst_what.items()):
        print("     worst %s: %.3f %% outside the exact range, at %s" % (k, 100 * worst[k], v))
    for k, v in sorted(raw_err.items()):
        print("     worst %s against the published values' nearest rank: %.3f %%" % (k, 100 * v))
    print("SUMMARY restarts=%d (SIGTERM %d, SIGKILL %d) processes=%d streams=%d "
          "sigkill_window=%d (%.3f %%) scrapes=%d counter_series=%d native_hist_series=%d "
          "max_err quantile=%.3f%% rate=%.3f%% ratio=%.3f%% p95=%.3f%% runtime=%.0fs"
          % (restarts["term"] + restarts["kill"], restarts["term"], restarts["kill"],
             len(stopped), n_streams, n_pend, 100.0 * n_pend / max(n_streams, 1), scrapes,
             n_counter, n_hist, 100 * worst["quantile"], 100 * worst["rate"],
             100 * worst["ratio"], 100 * worst["p95"], time.monotonic() - t_begin), flush=True)


def dashboard(args, addr, at, merged, quant, ctr_range, cmp, factor, worst):
    """Every expression of the Grafana dashboard, variables at "all" and
    5m windows, against the ledgers (exact values as in check())."""
    _, exprs, _ = dashboard_exprs(args.dashboard)
    vals = {"model": ".*", "class": ".*", "viewpoint": ".*", "__rate_interval": "5m",
            "__interval": "15s", "__range": "5m"}
    rate_re = r"rate\((\w+)\{[^}]*\}\[(\w+)\]\)"
    p95_bound = (1 + SEQ_P95_RES) * (1 + native_bound(SCHEMA)) - 1
    n, unmatched = 0, []

    def series(e):
        return [(x["metric"], x) for x in query(addr, e, at)["result"]]

    def value(x):
        return float(x["value"][1]) if "value" in x else None

    def group_range(fam, lab):
        return ctr_range(fam, lab.get("class"), lab.get("status"))

    for title, expr in exprs:
        e = substitute(expr, vals)
        got = series(e)
        if not got:
            fail("dashboard %r: no series for %s" % (title, e))
            continue
        m = re.fullmatch(r"histogram_quantile\(([\d.]+), sum by \((\w+)\) \(" + rate_re + r"\)\)",
                         e)
        if m:
            q, by, fam = m.group(1), m.group(2), m.group(3)
            ms = [k for k, v in HISTS.items() if v == fam]
            for lab, x in got:
                n += 1
                if ms and by == "class":
                    cands = quant(ms[0], lab.get("class"), q)
                    cmp("dashboard %r %s" % (title, lab), value(x), cands or [None],
                        "p95" if ms[0] == "P95G" else "quantile",
                        p95_bound if ms[0] == "P95G" else 0.01)
                else:  # abandoned waits, prefix cache, engine steps: none recorded
                    cmp("dashboard %r %s" % (title, lab), value(x), [None], "quantile")
            continue
        m = re.fullmatch(r"1 - histogram_fraction\(0, ([\d.]+), sum by \(class\) \(" + rate_re +
                         r"\)\)", e)
        if m and m.group(2) == HISTS["P95G"]:
            edge = float(m.group(1))
            for lab, x in got:
                cls = lab.get("class")

                def above(x_s):
                    return sum(1 for v in quant.tallies[0].vals[("P95G", cls)] if v > x_s * 1e9)
                # published N, of which A above; up to n unpublished, all
                # above or none
                nc = len(quant.tallies[0].vals[("P95G", cls)])
                npend = len(quant.tallies[1].vals[("P95G", cls)]) - nc
                from_ = [above(edge * (1 + p95_bound)) / (nc + npend),
                         (above(edge / (1 + p95_bound)) + npend) / nc]
                v = value(x)
                n += 1
                if v is None or not min(from_) - 1e-9 <= v <= max(from_) + 1e-9:
                    fail("dashboard %r %s: %s, the resolution allows %s .. %s"
                         % (title, lab, v, min(from_), max(from_)))
            continue
        m = re.fullmatch(r"(1 - )?sum by \(([\w, ]+)\) \(" + rate_re + r"\)( / sum by \(([\w, ]+)\) \("
                         + rate_re + r"\))?", e)
        if m and (m.group(5) or not m.group(1)):
            fam, w = m.group(3), m.group(4)
            for lab, x in got:
                n += 1
                if m.group(5):
                    a, b = group_range(fam, lab), group_range(m.group(7), lab)
                    cands = ratio_range(a, b) or [None]
                    if m.group(1):  # 1 - missed / deadlines: the live token fluidity
                        cands = [1 - v if v is not None else None for v in cands]
                    cmp("dashboard %r %s" % (title, lab), value(x), cands, "ratio")
                elif lab.get("cause") not in (None, "unknown"):
                    cmp("dashboard %r %s" % (title, lab), value(x), [0.0], "rate")
                else:
                    r = group_range(fam, lab)
                    cmp("dashboard %r %s" % (title, lab), value(x),
                        [v * factor[w] for v in r], "rate")
            continue
        m = re.fullmatch(r"sum\(" + rate_re + r"\)", e)
        if m and m.group(1) == HISTS["ITL"]:  # the heatmap: every gap, once
            x = got[0][1]
            cnt = float(x["histogram"][1]["count"]) if "histogram" in x else None
            n += 1
            cmp("dashboard %r histogram count" % title, cnt,
                [sum(len(t.vals[("ITL", c)]) for c in CLASSES) * quant.hfactor[m.group(2)]
                 for t in quant.tallies], "rate")
            continue
        m = re.fullmatch(r"max by \(class\) \(llm_slo_budget_seconds\{[^}]*slo=\"(\w+)\"\}\)", e)
        if m:
            budgets = TTFT_BUDGET if m.group(1) == "ttft" else TPOT_BUDGET
            for lab, x in got:
                n += 1
                cmp("dashboard %r %s" % (title, lab), value(x),
                    [budgets.get(lab.get("class"), 0) / 1e9], "ratio", 1e-12)
            continue
        if e.startswith(("class:llm_slo_objective:ratio", "class:llm_fluid_objective:ratio")):
            for lab, x in got:
                n += 1
                cmp("dashboard %r %s" % (title, lab), value(x),
                    [OBJECTIVES.get(lab.get("class"), 0.99)], "ratio", 1e-12)
            continue
        if e.startswith("count by (model, start_point, token_point, version) "
                        "(llm_measurement_info"):
            n += 1
            if len(got) != 1 or value(got[0][1]) != 1 or got[0][0].get("model") != MODEL:
                fail("dashboard %r: %s" % (title, got))
            continue
        m = re.fullmatch(r"sum by \(instance\) \((llm_live_stalls|llm_requests_in_flight)"
                         r"\{[^}]*\}\)", e)
        if m:  # every process has exited: its gauges left the view
            for lab, x in got:
                n += 1
                cmp("dashboard %r %s" % (title, lab), value(x), [0.0], "rate")
            continue
        unmatched.append(e)
    print("ok   dashboard: %d expressions, %d series vs the ledgers; worst quantile %.3f %%, "
          "rate %.3f %%, ratio %.3f %%, per-stream p95 %.3f %% (bound %.2f %%)"
          % (len(exprs), n, 100 * worst["quantile"], 100 * worst["rate"], 100 * worst["ratio"],
             100 * worst["p95"], 100 * p95_bound), flush=True)
    for e in unmatched:
        print("     not compared (no exact value from the ledgers; evaluated non-empty): %s" % e)


if __name__ == "__main__":
    sys.exit(main())
