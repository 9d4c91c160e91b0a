#!/usr/bin/env python3
"""check_dashboard.py DASHBOARD_JSON [RULES_YML]

Static checks of deploy/grafana/ttft-dashboard.json (the fleet test also
evaluates every expression on a real Prometheus). Standard library only.

  - valid JSON with a uid, a title, a datasource variable and the template
    variables `model` and `class` (label_values queries, "All" = ".*"), and
    `viewpoint` (the registry constant label of docs/prometheus.md's two-view
    pattern: one value at a time, so two views are never added; every
    selector that filters the model filters the view too);
  - attainment is slo_met over slo_judged;
  - every panel reads ${datasource}; every target has an expression and a
    unique refId; every expression filters model=~"$model" (and, when it
    reads a per-class family, class=~"$class");
  - the vocabulary's rules: no expression reads both TTFT and TPOT (never
    averaged into one latency), no avg() of anything, no classic _bucket
    series (the dashboard is built on native histograms);
  - TTFT and TPOT have their own panels, side by side (same row and
    height, adjacent), each with p50, p90 and p99 by class; ITL too;
  - an ITL heatmap; the per-user p95 gap (seq_itl_p95 family); stalls and
    live stalls; stalls by cause; engine-step durations by prefill; abandoned before the first token; attainment next to the
    objective; output tokens/s in a panel whose title calls it a capacity
    view and not TPOT;
  - fluidity (1.3): fluid attainment is fluid over fluid_judged, next to
    class:llm_fluid_objective:ratio; the live token fluidity is
    1 - missed / token deadlines by class; missed deadlines per second by
    class; the three in a row of their own;
  - every recording rule an expression reads (level:metric:operation) is
    recorded by RULES_YML (default: ../prometheus/ttft.rules.yml beside
    the dashboard).
"""
import json
import os
import re
import sys

TTFT = "gen_ai_server_time_to_first_token_seconds"
TPOT = "gen_ai_server_time_per_output_token_seconds"
ITL = "llm_inter_token_latency_seconds"
# families without a class label (registry-wide): a class filter would
# select nothing
NOT_PER_CLASS = ("llm_live_stalls", "llm_requests_in_flight", "llm_measurement_info",
                 "llm_time_to_first_token_by_", "class:llm_slo_objective:ratio",
                 "llm_stale_hook_calls_total", "llm_coarse_observations_total",
                 "llm_registry_memory_bytes", "llm_engine_step_seconds")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def panels_of(dash):
    out = []

    def walk(ps):
        for p in ps:
            out.append(p)
            walk(p.get("panels", []))
    walk(dash.get("panels", []))
    return out


def exprs(p):
    return [t.get("expr", "") for t in p.get("targets", [])]


def quantiles_by_class(p, fam):
    got = set()
    for e in exprs(p):
        m = re.match(r"histogram_quantile\((0\.\d+), sum by \(class\) \(rate\(%s\{" % re.escape(fam), e)
        if m:
            got.add(m.group(1))
    return got


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        return 2
    with open(sys.argv[1]) as f:
        dash = json.load(f)
    for k in ("uid", "title", "panels", "templating"):
        if not dash.get(k):
            fail("no %s" % k)
    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    if variables.get("datasource", {}).get("type") != "datasource":
        fail("no datasource variable")
    for name in ("model", "class"):
        v = variables.get(name)
        if not v:
            fail("no template variable %s" % name)
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        if v.get("type") != "query" or not (q or "").startswith("label_values(") or \
                not q.rstrip(")").endswith(name):
            fail("variable %s: not a label_values(..., %s) query: %r" % (name, name, q))
        if not v.get("includeAll") or v.get("allValue") != ".*":
            fail("variable %s: needs an All option matching every value (.*)" % name)

    v = variables.get("viewpoint")
    if not v:
        fail("no template variable viewpoint (the registry's constant label)")
    else:
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        if not (q or "").startswith("label_values(") or not q.rstrip(")").endswith("viewpoint"):
            fail("variable viewpoint: not a label_values(..., viewpoint) query: %r" % q)
        if v.get("includeAll") or v.get("multi"):
            fail("variable viewpoint: one view at a time (two views must never be added)")

    ps = panels_of(dash)
    all_exprs = []
    for p in ps:
        title = p.get("title", "?")
        if p.get("type") == "row":
            continue
        if (p.get("datasource") or {}).get("uid") != "${datasource}":
            fail("panel %r does not read ${datasource}" % title)
        refs = [t.get("refId") for t in p.get("targets", [])]
        if not refs or len(set(refs)) != len(refs):
            fail("panel %r: no targets or repeated refIds" % title)
        for e in exprs(p):
            all_exprs.append((title, e))
            if not e.strip():
                fail("panel %r: empty expression" % title)
            if TTFT in e and TPOT in e:
                fail("panel %r mixes TTFT and TPOT in one expression: %s" % (title, e))
            if re.search(r"\bavg(_over_time)?\b", e):
                fail("panel %r averages: %s" % (title, e))
            if "_bucket" in e:
                fail("panel %r reads classic buckets: %s" % (title, e))
            if not re.match(r"class:llm_(slo|fluid)_objective:ratio\{", e) and \
                    'model=~"$model"' not in e:
                fail("panel %r: no model filter: %s" % (title, e))
            # one registry view at a time (a constant label, docs/prometheus.md):
            # every selector that filters the model filters the view too
            if e.count('model=~"$model"') != e.count('viewpoint=~"$viewpoint"'):
                fail("panel %r: a selector without the view filter: %s" % (title, e))
            if "llm_requests_slo_met_total" in e and "/" in e and \
                    "llm_requests_slo_judged_total" not in e:
                fail("panel %r: attainment not over judged streams: %s" % (title, e))
            if "llm_requests_fluid_total" in e and "/" in e and \
                    "llm_requests_fluid_judged_total" not in e:
                fail("panel %r: fluid attainment not over judged streams: %s" % (title, e))
            if not any(n in e for n in NOT_PER_CLASS) and 'class=~"$class"' not in e:
                fail("panel %r: no class filter: %s" % (title, e))

    def find(pred, what):
        hit = [p for p in ps if pred(p)]
        if not hit:
            fail("no panel %s" % what)
        return hit[0] if hit else None

    ttft = find(lambda p: quantiles_by_class(p, TTFT) == {"0.5", "0.9", "0.99"} and
                not any(TPOT in e for e in exprs(p)), "with TTFT p50/p90/p99 by class")
    tpot = find(lambda p: quantiles_by_class(p, TPOT) == {"0.5", "0.9", "0.99"} and
                not any(TTFT in e for e in exprs(p)), "with TPOT p50/p90/p99 by class")
    find(lambda p: quantiles_by_class(p, ITL) == {"0.5", "0.9", "0.99"}, "with ITL p50/p90/p99 by class")
    if ttft and tpot:
        a, b = ttft["gridPos"], tpot["gridPos"]
        if ttft is tpot or a["y"] != b["y"] or a["h"] != b["h"] or a["x"] + a["w"] != b["x"]:
            fail("TTFT and TPOT are not side by side: %s / %s" % (a, b))
    find(lambda p: p.get("type") == "heatmap" and any(ITL in e for e in exprs(p)), "ITL heatmap")
    find(lambda p: any("llm_request_inter_token_latency_p95_seconds" in e for e in exprs(p)),
         "with the per-user p95 gap")
    find(lambda p: any("llm_stalls_total" in e for e in exprs(p)), "with stalls")
    find(lambda p: any("llm_live_stalls" in e for e in exprs(p)), "with live stalls")
    find(lambda p: any("llm_stall_seconds_total" in e and "by (cause)" in e for e in exprs(p)),
         "with stalls by cause")
    steps = find(lambda p: any("llm_engine_step_seconds" in e for e in exprs(p)),
                 "with engine-step durations")
    if steps and not all("by (prefill)" in e for e in exprs(steps)):
        fail("the engine-step panel must split by prefill: %s" % exprs(steps))
    find(lambda p: any("llm_requests_abandoned_before_first_token_total" in e for e in exprs(p)),
         "with abandoned before the first token")
    find(lambda p: any("llm_requests_slo_met_total" in e and "llm_requests_slo_judged_total" in e
                       for e in exprs(p)) and
         any("llm_slo_objective" in e for e in exprs(p)), "with attainment next to the objective")
    tok = find(lambda p: any("llm_output_tokens_total" in e for e in exprs(p)), "with tokens/s")
    if tok:
        t = tok.get("title", "").lower()
        if "capacity" not in t or "not tpot" not in t:
            fail("the tokens/s panel must be titled as a capacity view, not TPOT: %r" % tok.get("title"))
        if any(TPOT in e or TTFT in e for e in exprs(tok)):
            fail("the tokens/s panel shows a latency")

    # fluidity (1.3)
    fluid = find(lambda p: any(re.fullmatch(
        r"sum by \(class\) \(rate\(llm_requests_fluid_total\{[^}]*\}\[\w+\]\)\) / "
        r"sum by \(class\) \(rate\(llm_requests_fluid_judged_total\{[^}]*\}\[\w+\]\)\)", e)
        for e in exprs(p)) and any(e.startswith("class:llm_fluid_objective:ratio{") for e in exprs(p)),
        "with fluid attainment (fluid / judged) next to its objective")
    live = find(lambda p: any(re.fullmatch(
        r"1 - sum by \(class\) \(rate\(llm_token_deadlines_missed_total\{[^}]*\}\[[\w$]+\]\)\) / "
        r"sum by \(class\) \(rate\(llm_token_deadlines_total\{[^}]*\}\[[\w$]+\]\)\)", e)
        for e in exprs(p)), "with the live token fluidity (1 - missed / deadlines by class)")
    missed = find(lambda p: any(re.fullmatch(
        r"sum by \(class\) \(rate\(llm_token_deadlines_missed_total\{[^}]*\}\[[\w$]+\]\)\)", e)
        for e in exprs(p)), "with missed token deadlines per second by class")
    if fluid and live and missed:
        rows = sorted((p["gridPos"]["y"], p.get("title")) for p in ps if p.get("type") == "row")
        fy = [p["gridPos"]["y"] for p in (fluid, live, missed)]
        own = [t for y, t in rows if y < min(fy)]
        nxt = [y for y, _ in rows if y > min(fy)]
        if not own or "fluidity" not in own[-1].lower() or (nxt and max(fy) > nxt[0]):
            fail("the fluidity panels are not in a row of their own titled fluidity: rows %s, "
                 "panels at y %s" % (rows, fy))

    # recording rules read by the panels exist in the rules file
    rules_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(os.path.abspath(sys.argv[1])), "..", "prometheus", "ttft.rules.yml")
    try:
        with open(rules_path) as f:
            recorded = set(re.findall(r"^\s*- record: (\S+)", f.read(), re.M))
    except OSError as e:
        fail("rules file %s: %s" % (rules_path, e))
        recorded = set()
    read = {m for _, e in all_exprs for m in re.findall(r"\b\w+:\w+:\w+\b", e)}
    for name in sorted(read - recorded):
        fail("an expression reads %s, which %s does not record" % (name, rules_path))

    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("dashboard %r: %d panels, %d expressions, all checks passed"
          % (dash.get("title"), len(ps), len(all_exprs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
