"""promtest.py — what the real-Prometheus tests (scrape_test, exemplar_test,
fleet_test) share: the failure list, the Prometheus binary they need, a free
port, HTTP GET and the HTTP API's instant queries. Standard library only."""
import json
import os
import shutil
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request

failures = []


def fail(msg):
    """Record a failure and print it at once; the test goes on."""
    failures.append(msg)
    print("FAIL: " + msg, flush=True)


def prometheus_binary(path):
    """The Prometheus server to run: path, else the one on PATH. Missing,
    the test fails in CI (the environment variable CI is set) and exits 77
    (ctest's skip) elsewhere, saying which Debian package provides it."""
    prometheus = path or shutil.which("prometheus")
    if prometheus and os.access(prometheus, os.X_OK):
        return prometheus
    if os.environ.get("CI"):
        print("FAIL: prometheus server not found (Debian package 'prometheus'); CI requires it")
        sys.exit(1)
    print("SKIP: prometheus server not found (apt-get install prometheus)")
    sys.exit(77)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5, headers=None):
    """(status, Content-Type, body bytes); HTTP errors raise."""
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read()


def http_text(url, timeout=5, headers=None):
    """(status, body as UTF-8 text)"""
    st, _, body = http_get(url, timeout, headers)
    return st, body.decode("utf-8")


def api(prom, path, args=None):
    """The "data" of a Prometheus HTTP API answer; RuntimeError with
    Prometheus's own error text when the status is not success."""
    url = "http://%s%s" % (prom, path)
    if args:
        url += "?" + urllib.parse.urlencode(args)
    try:
        _, _, body = http_get(url, timeout=10)
    except urllib.error.HTTPError as e:  # 400/422 carry a JSON error
        body = e.read()
    try:
        doc = json.loads(body.decode("utf-8"))
    except ValueError:
        # a starting Prometheus answers 503 "Service Unavailable" in plain
        # text: not ready yet, which the callers' readiness loops retry
        raise RuntimeError("%s %s: not a JSON answer: %r" % (path, args, body[:80]))
    if doc.get("status") != "success":
        raise RuntimeError("%s %s: %s" % (path, args, doc.get("error", doc)))
    return doc["data"]


def query(prom, expr, at=None):
    """An instant query at time at (None: now): the API's data."""
    args = {"query": expr}
    if at is not None:
        args["time"] = "%.3f" % at
    return api(prom, "/api/v1/query", args)


def scalar(prom, expr, at=None):
    """The value of a one-element instant vector, None otherwise."""
    res = query(prom, expr, at)["result"]
    if len(res) != 1 or "value" not in res[0]:
        return None
    return float(res[0]["value"][1])
