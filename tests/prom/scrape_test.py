#!/usr/bin/env python3
"""scrape_test.py WORKLOAD_BIN [PROMETHEUS_BIN]

End to end against a real Prometheus server, loopback only, < 60 s:

 1. start the workload (tests/prom/workload.c): it records 4 identical
    batches, serves /metrics on 127.0.0.1:<free port>;
 2. start `prometheus` with a temporary data dir, a 1 s scrape interval and
    the workload as its only target, on 127.0.0.1:<free port>;
 3. wait until Prometheus has scraped the workload (target up, series in);
 4. tell the workload to record 6 more batches, wait for two more scrapes;
 5. ask Prometheus's HTTP API (/api/v1/query) and compare:
    - every counter and gauge: sum(...) equals the library's own value;
    - histogram_quantile(q, sum by (le) (X_bucket)) over the raw cumulative
      buckets equals the Prometheus algorithm applied to the library's own
      exposition (to 1e-9), and the library's high-resolution quantile lies
      inside the Prometheus bucket that estimate falls in (the bucket
      resolution; widened by the documented 1/128 fine-bucket bound);
    - histogram_quantile(q, sum by (le) (rate(X_bucket[W]))) with W covering
      the whole run equals the algorithm applied to (final - initial)
      buckets of the exposition (to 1e-6): the buckets only grow by whole
      identical batches, so rate()'s extrapolation scales every bucket by
      the same factor and the quantile does not move.
Cleans up both processes and the data dir whatever happens.

Missing prometheus: FAIL under CI (CI set), otherwise exit 77 (ctest SKIP).
"""
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from promtest import api, fail, failures, free_port, http_text, prometheus_binary, scalar  # noqa: E402

DEADLINE = time.monotonic() + 55
PROM_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
               "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


def left():
    return DEADLINE - time.monotonic()


# ------------------------------------------------- the Prometheus algorithm
def histogram_quantile(q, buckets):
    """Prometheus's classic histogram_quantile (promql/quantile.go) over
    [(le, cumulative count)], le ascending, last +Inf."""
    if not buckets or buckets[-1][0] != math.inf or len(buckets) < 2:
        return math.nan
    total = buckets[-1][1]
    if total == 0:
        return math.nan
    rank = q * total
    b = next(i for i, (_, c) in enumerate(buckets) if c >= rank)
    if b == len(buckets) - 1:
        return buckets[-2][0]
    if b == 0 and buckets[0][0] <= 0:
        return buckets[0][0]
    start, end, count = 0.0, buckets[b][0], buckets[b][1]
    if b > 0:
        start = buckets[b - 1][0]
        count -= buckets[b - 1][1]
        rank -= buckets[b - 1][1]
    return start + (end - start) * (rank / count)


LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def exposition_buckets(text, family, cls):
    """{le: count} summed over the classes (or one class) of our own
    /metrics text (plain labels only in this workload)."""
    out = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if not m or m.group(1) != family + "_bucket":
            continue
        labels = dict(LABEL.findall(m.group(3) or ""))
        if cls != "*" and labels.get("class") != cls:
            continue
        le = float(labels["le"])
        out[le] = out.get(le, 0) + float(m.group(4))
    return sorted(out.items())


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    workload = sys.argv[1]
    prometheus = prometheus_binary(sys.argv[2] if len(sys.argv) > 2 else "")

    tmp = tempfile.mkdtemp(prefix="ttft-prom-")
    wl = prom_proc = None
    try:
        wl = subprocess.Popen([workload, "4"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, bufsize=1)
        first = wl.stdout.readline().split()
        if len(first) != 2 or first[0] != "port":
            fail("workload did not report a port: %r" % first)
            return 1
        target = "127.0.0.1:%s" % first[1]

        def wl_cmd(cmd, until=None):
            wl.stdin.write(cmd + "\n")
            wl.stdin.flush()
            lines = []
            while True:
                line = wl.stdout.readline()
                if not line:
                    raise RuntimeError("workload exited during %r" % cmd)
                lines.append(line.rstrip("\n"))
                if until is None or line.startswith(until):
                    return lines

        # the endpoint answers, in both formats, before Prometheus comes in:
        # plain text for a plain client, OpenMetrics for the Accept header
        # Prometheus 2.x sends (so the server below scrapes OpenMetrics)
        st, text = http_text("http://%s/metrics" % target)
        if st != 200 or "gen_ai_server_time_to_first_token_seconds_bucket" not in text \
                or "# EOF" in text:
            fail("GET /metrics (text): status %s" % st)
        st, om = http_text("http://%s/metrics" % target, headers={"Accept": PROM_ACCEPT})
        if st != 200 or not om.endswith("# EOF\n") or "# TYPE llm_measurement info" not in om:
            fail("GET /metrics (Accept: OpenMetrics): status %s, no OpenMetrics body" % st)

        prom = "127.0.0.1:%d" % free_port()
        cfg = os.path.join(tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: ttft\n    scrape_interval: 1s\n"
                "    scrape_timeout: 900ms\n    static_configs:\n"
                "      - targets: ['%s']\n" % target)
        log = open(os.path.join(tmp, "prometheus.log"), "w")
        t_start = time.time()
        prom_proc = subprocess.Popen(
            [prometheus, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(tmp, "data"),
             "--web.listen-address=" + prom, "--log.level=warn"],
            stdout=log, stderr=subprocess.STDOUT)

        # 3. ready, target up, a sample of the initial 4 batches stored
        n4 = None
        while left() > 30:
            if prom_proc.poll() is not None:
                fail("prometheus exited with %s" % prom_proc.returncode)
                return 1
            try:
                if scalar(prom, 'up{job="ttft"}') == 1:
                    n4 = scalar(prom, "sum(gen_ai_server_time_to_first_token_seconds_count)")
                    if n4:
                        break
            except (OSError, RuntimeError):
                pass
            time.sleep(0.25)
        if not n4:
            fail("Prometheus never scraped the workload (see %s)" % log.name)
            return 1
        print("ok   scraped: %d TTFT observations after 4 batches (%.1f s)" % (n4, time.time() - t_start),
              flush=True)

        # 4. six more identical batches, then two more scrapes
        wl_cmd("batch 6", "ok")
        expect = wl_cmd("expect", "end")
        want_n = next(float(l.split()[2]) for l in expect
                      if l.startswith("sum gen_ai_server_time_to_first_token_seconds_count "))
        time.sleep(2.5)
        total = None
        while left() > 10:
            total = scalar(prom, "sum(gen_ai_server_time_to_first_token_seconds_count)")
            if total == want_n:
                break
            time.sleep(0.25)
        if total != want_n:
            fail("the final state never reached Prometheus: %s != %s" % (total, want_n))
            return 1
        st, final_text = http_text("http://%s/metrics" % target)
        at = time.time()
        window = int(at - t_start) + 10

        targets = api(prom, "/api/v1/targets")
        for t in targets["activeTargets"]:
            if t.get("lastError"):
                fail("scrape error: %s" % t["lastError"])

        # 5. compare
        nchk = 0
        for line in expect:
            parts = line.split(" ")
            if parts[0] in ("sum", "gauge"):
                sel, want = parts[1], float(parts[2])
                got = scalar(prom, "sum(%s)" % sel, at)
                nchk += 1
                if got != want:
                    fail("%s: Prometheus %s, library %s" % (sel, got, want))
                else:
                    print("ok   %-70s %g" % (sel, got))
            elif parts[0] == "quantile":
                fam, q, cls, lib = parts[1], float(parts[2]), parts[3], float(parts[4])
                sel = "" if cls == "*" else '{class="%s"}' % cls
                cum = scalar(prom, "histogram_quantile(%g, sum by (le) (%s_bucket%s))" % (q, fam, sel), at)
                rate = scalar(prom, "histogram_quantile(%g, sum by (le) (rate(%s_bucket%s[%ds])))"
                              % (q, fam, sel, window), at)
                buckets = exposition_buckets(final_text, fam, cls)
                mine = histogram_quantile(q, buckets)
                # what rate() sees: the increase from the first sample (the
                # state before "batch 6") to the last, bucket by bucket
                before = dict(exposition_buckets(text, fam, cls))
                mine_rate = histogram_quantile(q, [(le, c - before.get(le, 0)) for le, c in buckets])
                nchk += 1
                what = "p%g %s%s" % (q * 100, fam, sel)
                if cum is None or not math.isclose(cum, mine, rel_tol=1e-9):
                    fail("%s: Prometheus over cumulative buckets %s, expected %s" % (what, cum, mine))
                    continue
                if rate is None or not math.isclose(rate, mine_rate, rel_tol=1e-6):
                    fail("%s: Prometheus over rate()[%ds] %s, expected %s" % (what, window, rate, mine_rate))
                    continue
                # the Prometheus bucket the estimate is in, and the library's
                # own quantile against it
                les = [le for le, _ in buckets]
                hi = next((le for le in les if le >= cum), math.inf)
                lo = max([0.0] + [le for le in les if le < cum])
                if not (lo * (1 - 1 / 128.0) <= lib <= hi * (1 + 1 / 128.0)):
                    fail("%s: library %.6f s outside the Prometheus bucket (%g, %g] of %.6f"
                         % (what, lib, lo, hi, cum))
                    continue
                print("ok   %-70s prom %.6f (rate %.6f) lib %.6f in (%g, %g]"
                      % (what, cum, rate, lib, lo, hi))
        if nchk < 15:
            fail("only %d checks ran" % nchk)
    finally:
        if wl and wl.poll() is None:
            try:
                wl.stdin.write("quit\n")
                wl.stdin.flush()
                wl.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                wl.kill()
                wl.wait()
        if prom_proc and prom_proc.poll() is None:
            prom_proc.send_signal(signal.SIGTERM)
            try:
                prom_proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                prom_proc.kill()
                prom_proc.wait()
        if failures and os.path.exists(os.path.join(tmp, "prometheus.log")):
            with open(os.path.join(tmp, "prometheus.log")) as f:
                print("--- prometheus.log (tail)\n" + "".join(f.readlines()[-20:]))
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("Prometheus agrees with the library (%.1f s)" % (55 - left()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
