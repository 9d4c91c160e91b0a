#!/usr/bin/env python3
"""exemplar_test.py WORKLOAD_BIN [PROMETHEUS_BIN]

Exemplars end to end, against a real Prometheus (loopback only, < 60 s):

 1. start tests/prom/exemplar_workload.c: 300 streams with W3C trace ids on
    the real clock, served on /metrics; it prints the library's own slowest
    lists (ttft_snapshot_slowest);
 2. its OpenMetrics exposition carries exemplars: on each TTFT / ITL /
    worst-gap bucket, the slowest traced request of the bucket (checked
    against the printed lists); the Prometheus text format carries none;
 3. start two Prometheus servers scraping it every second, one with
    --enable-feature=exemplar-storage (OpenMetrics, classic buckets) and one
    with --enable-feature=exemplar-storage,native-histograms (the protobuf
    exposition, native histograms: exemplars from the classic buckets and
    the Histogram.exemplars field);
 4. /api/v1/query_exemplars on each returns, per class, the trace id of the
    slowest request by TTFT and by longest gap, and only trace ids of the
    library's slowest lists; the OpenMetrics server returns exactly the
    exposition's TTFT exemplars (trace id, value, timestamp).
Cleans up every process and the data dirs whatever happens.

Missing prometheus: FAIL under CI (CI set), otherwise exit 77 (ctest SKIP).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from promtest import api, fail, failures, free_port, http_text, prometheus_binary  # noqa: E402

DEADLINE = time.monotonic() + 55
OM_ACCEPT = "application/openmetrics-text;version=1.0.0"
TTFT = "gen_ai_server_time_to_first_token_seconds"
ITL = "llm_inter_token_latency_seconds"
GAPMAX = "llm_request_inter_token_latency_max_seconds"


EX_RE = re.compile(r'^(\w+)_bucket\{(.*)\} (\d+) # \{trace_id="([0-9a-f]{32})"\} (\S+) (\S+)$')


def om_exemplars(text):
    """[(family, labels text, trace id, value, timestamp)] of every exemplar"""
    out = []
    for line in text.splitlines():
        if "#" not in line or line.startswith("#"):
            continue
        m = EX_RE.match(line)
        if not m:
            fail("exemplar line not understood: %r" % line)
            continue
        out.append((m.group(1), m.group(2), m.group(4), float(m.group(5)), float(m.group(6))))
    return out


def query_exemplars(prom, expr, start, end):
    args = {"query": expr, "start": "%.3f" % start, "end": "%.3f" % end}
    got = []
    for series in api(prom, "/api/v1/query_exemplars", args):
        for e in series.get("exemplars", []):
            got.append((series["seriesLabels"].get("class"), e["labels"].get("trace_id"),
                        float(e["value"]), float(e["timestamp"])))
    return got


def start_prometheus(prometheus, tmp, name, target, features):
    port = free_port()
    cfg = os.path.join(tmp, name + ".yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: ttft\n"
                "    scrape_interval: 1s\n    scrape_timeout: 900ms\n    static_configs:\n"
                "      - targets: ['%s']\n" % target)
    log = open(os.path.join(tmp, name + ".log"), "w")
    proc = subprocess.Popen(
        [prometheus, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(tmp, name),
         "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn",
         "--enable-feature=" + features],
        stdout=log, stderr=subprocess.STDOUT)
    return proc, "127.0.0.1:%d" % port, log.name


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    workload = sys.argv[1]
    prometheus = prometheus_binary(sys.argv[2] if len(sys.argv) > 2 else "")
    tmp = tempfile.mkdtemp(prefix="ttft-exemplar-")
    procs = []
    try:
        wl = subprocess.Popen([workload], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, bufsize=1)
        procs.append(wl)
        first = wl.stdout.readline().split()
        if len(first) != 2 or first[0] != "port":
            fail("workload did not report a port: %r" % first)
            return 1
        target = "127.0.0.1:%s" % first[1]
        slowest = {}  # (class, ranking) -> [(trace id, value ns)], slowest first
        for line in wl.stdout:
            if line.startswith("ready"):
                break
            _, cls, by, rank, tid, value = line.split()
            slowest.setdefault((cls, by), []).append((tid, int(value)))
        for cls in ("default", "chat"):
            for by in ("ttft", "gap"):
                if len(slowest.get((cls, by), [])) != 8:
                    fail("the library's %s list of %s has %d entries, not 8"
                         % (by, cls, len(slowest.get((cls, by), []))))
        listed = {tid for v in slowest.values() for tid, _ in v}

        # 2. the exposition
        _, om = http_text("http://%s/metrics" % target, headers={"Accept": OM_ACCEPT})
        _, text = http_text("http://%s/metrics" % target)
        if "trace_id" in text:
            fail("the Prometheus 0.0.4 text exposition carries exemplars")
        ex = om_exemplars(om)
        fams = {e[0] for e in ex}
        if fams != {TTFT, ITL, GAPMAX}:
            fail("exemplars on families %s, expected %s" % (sorted(fams), sorted({TTFT, ITL, GAPMAX})))
        for fam, labels, tid, value, ts in ex:
            cls = re.search(r'class="([^"]*)"', labels).group(1)
            by = "ttft" if fam == TTFT else "gap"
            vals = dict(slowest.get((cls, by), []))
            if tid not in vals:
                fail("exemplar %s on %s{%s} is not in the library's %s list" % (tid, fam, labels, by))
            elif abs(vals[tid] / 1e9 - value) > 1e-9:
                fail("exemplar %s value %s != %s" % (tid, value, vals[tid] / 1e9))
            if abs(ts - time.time()) > 120:
                fail("exemplar timestamp %s is not recent" % ts)
        for cls in ("default", "chat"):
            for fam, by in ((TTFT, "ttft"), (ITL, "gap"), (GAPMAX, "gap")):
                top = slowest[(cls, by)][0][0]
                if not any(e[0] == fam and e[2] == top and 'class="%s"' % cls in e[1] for e in ex):
                    fail("the slowest %s request of %s (%s) is no exemplar of %s" % (by, cls, top, fam))
        om_ttft = sorted((re.search(r'class="([^"]*)"', e[1]).group(1), e[2], e[3])
                         for e in ex if e[0] == TTFT)
        # the workload puts each class's 8 slowest TTFTs in 8 buckets of their own
        if len(om_ttft) != 16:
            fail("%d TTFT exemplars, expected 8 a class" % len(om_ttft))
        print("ok   exposition: %d exemplars (%d on TTFT), all from the slowest lists"
              % (len(ex), len(om_ttft)), flush=True)

        # 3. two servers
        classic, classic_addr, classic_log = start_prometheus(prometheus, tmp, "classic", target,
                                                              "exemplar-storage")
        procs.append(classic)
        native, native_addr, native_log = start_prometheus(
            prometheus, tmp, "native", target, "exemplar-storage,native-histograms")
        procs.append(native)

        # 4. query until both have the exemplars (a few scrapes)
        t_lo, t_hi = time.time() - 600, time.time() + 600
        want = {(c, slowest[(c, "ttft")][0][0]) for c in ("default", "chat")}
        want_gap = {(c, slowest[(c, "gap")][0][0]) for c in ("default", "chat")}
        got_c = got_n = got_ng = got_cg = []
        while time.monotonic() < DEADLINE - 5:
            for p, name in ((classic, classic_log), (native, native_log)):
                if p.poll() is not None:
                    fail("prometheus exited with %s (see %s)" % (p.returncode, name))
                    return 1
            try:
                got_c = query_exemplars(classic_addr, TTFT + "_bucket", t_lo, t_hi)
                got_cg = query_exemplars(classic_addr, GAPMAX + "_bucket", t_lo, t_hi)
                got_n = query_exemplars(native_addr, TTFT, t_lo, t_hi)
                got_ng = query_exemplars(native_addr, GAPMAX, t_lo, t_hi)
            except (OSError, RuntimeError):
                pass
            if (want <= {(c, t) for c, t, _, _ in got_c} and want <= {(c, t) for c, t, _, _ in got_n}
                    and want_gap <= {(c, t) for c, t, _, _ in got_cg}
                    and want_gap <= {(c, t) for c, t, _, _ in got_ng}
                    and len(got_c) >= len(om_ttft)):
                break
            time.sleep(0.5)
        for name, got, w in (("exemplar-storage (OpenMetrics), TTFT", got_c, want),
                             ("exemplar-storage (OpenMetrics), worst gap", got_cg, want_gap),
                             ("exemplar-storage,native-histograms (protobuf), TTFT", got_n, want),
                             ("exemplar-storage,native-histograms (protobuf), worst gap", got_ng, want_gap)):
            have = {(c, t) for c, t, _, _ in got}
            if not w <= have:
                fail("%s: query_exemplars lacks the slowest requests' trace ids %s (got %s)"
                     % (name, sorted(w - have), sorted(have)))
            stray = {t for _, t, _, _ in got} - listed
            if stray:
                fail("%s: trace ids not in the library's slowest lists: %s" % (name, sorted(stray)))
            print("ok   %s: %d exemplars, the slowest of each class among them: %s"
                  % (name, len(got), sorted(set(t[-6:] for _, t, _, _ in got))), flush=True)
        got_set = sorted(set((c, t, round(v, 9)) for c, t, v, _ in got_c))
        want_set = sorted((c, t, round(v, 9)) for c, t, v in om_ttft)
        if got_set != want_set:
            fail("the OpenMetrics server's TTFT exemplars differ from the exposition's:\n  %s\n  %s"
                 % (got_set, want_set))
        else:
            print("ok   OpenMetrics server: exactly the exposition's %d TTFT exemplars" % len(got_set))
    finally:
        for p in procs:
            if p.poll() is None:
                if p is procs[0] and p.stdin:
                    try:
                        p.stdin.close()
                    except OSError:
                        pass
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (1 if not failures else 0, 1 if failures else 0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
