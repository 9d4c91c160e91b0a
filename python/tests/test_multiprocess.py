"""Many processes, one truth (issue 28, item 5): registries with shared_dir
in worker processes (multiprocessing fork and spawn, os.fork() of a
registry created before the fork), and ttft.gather(dir) in the parent,
whose totals must be the exact sum of what the workers recorded."""

import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import unittest

from support import MS, S, T0, ttft

N_WORKERS = 3


def expected(i):
    """Worker i's workload: (completed streams, cancelled streams, tokens per
    completed stream)."""
    return 2 + i, 1, 3 + i


def totals(workers):
    """Counters a gather of workers `workers` must show."""
    begun = completed = cancelled = tokens = 0
    for i in workers:
        c, x, k = expected(i)
        begun += c + x
        completed += c
        cancelled += x
        tokens += c * k
    return {"begun": begun, "completed": completed, "cancelled": cancelled, "tokens": tokens}


def record(reg, i):
    """Worker i's workload into reg, explicit timestamps (TTFT = 5 ms)."""
    c, x, k = expected(i)
    t = T0
    for _ in range(c):
        s = reg.begin(t_ns=t)
        for j in range(k):
            s.token(t_ns=t + (5 + j) * MS)
        s.end(t_ns=t + (6 + k) * MS)
        t += S
    for _ in range(x):
        s = reg.begin(t_ns=t)
        s.end("cancelled", t_ns=t + MS)
        t += S


def own_registry_worker(d, i):
    """A worker that makes its own registry, records and exits (the registry
    publishes its final state when closed)."""
    reg = ttft.Registry(max_inflight=16, max_classes=2, shared_dir=d,
                        process_name="worker-%d" % i)
    record(reg, i)
    reg.close()


# The pre-fork server pattern: a registry made before the workers fork.
PREFORK = {}


def prefork_mp_worker(i):
    """A multiprocessing (fork) worker recording into the registry its
    parent made before the fork, then leaving with sys.exit: no close, no
    publish; the binding publishes from multiprocessing's exit hooks."""
    record(PREFORK["reg"], i)
    sys.exit(0)


def private_dir(test):
    d = tempfile.mkdtemp(prefix="ttft-mp-")  # mode 0700: the library's rule
    test.addCleanup(shutil.rmtree, d, True)
    return d


def counters(snap):
    return {name: snap.counter(name) for name in ("begun", "completed", "cancelled", "tokens")}


class Gather(unittest.TestCase):
    def check_exact(self, d, workers, extra=None):
        want = totals(workers)
        if extra:
            for k, v in extra.items():
                want[k] += v
        snap = ttft.gather(d)
        self.assertEqual(counters(snap), want)
        self.assertEqual(snap.count("ttft"), want["completed"])
        self.assertEqual(snap.quantile("ttft", 1.0), 0.005)
        return snap

    def run_pool(self, method):
        d = private_dir(self)
        ctx = multiprocessing.get_context(method)
        procs = [ctx.Process(target=own_registry_worker, args=(d, i)) for i in range(N_WORKERS)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
            self.assertEqual(p.exitcode, 0)
        snap = self.check_exact(d, range(N_WORKERS))
        self.assertEqual(snap.gauge("processes"), 0)          # all exited
        self.assertEqual(snap.counter("processes_exited"), N_WORKERS)
        self.assertEqual(snap.counter("segments_skipped"), 0)
        # a second gather folds nothing twice
        self.check_exact(d, range(N_WORKERS))

    def test_multiprocessing_fork(self):
        self.run_pool("fork")

    def test_multiprocessing_spawn(self):
        self.run_pool("spawn")

    def test_prefork_os_fork_workers_count_once(self):
        d = private_dir(self)
        # the server's registry, made at import time before any worker forks
        reg = ttft.Registry(max_inflight=16, max_classes=2, shared_dir=d,
                            publish_interval_ms=0)
        record(reg, 10)          # what the parent recorded before the fork
        pids = []
        for i in range(N_WORKERS):
            pid = os.fork()
            if pid == 0:  # a worker: record, close (publishes), leave at once
                code = 1
                try:
                    record(reg, i)
                    reg.close()
                    code = 0
                finally:
                    os._exit(code)
            pids.append(pid)
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        reg.publish()
        # the parent's pre-fork work once (its own segment), the workers'
        # from zero: nothing the parent recorded is counted again
        self.check_exact(d, list(range(N_WORKERS)) + [10])
        reg.close()   # the parent exits too: its state stays in the archive
        snap = self.check_exact(d, list(range(N_WORKERS)) + [10])
        self.assertEqual(snap.gauge("processes"), 0)

    def test_prefork_multiprocessing_workers_exit_with_sys_exit(self):
        d = private_dir(self)
        PREFORK["reg"] = reg = ttft.Registry(max_inflight=16, max_classes=2, shared_dir=d,
                                             publish_interval_ms=0)
        self.addCleanup(PREFORK.clear)
        record(reg, 7)
        ctx = multiprocessing.get_context("fork")
        procs = [ctx.Process(target=prefork_mp_worker, args=(i,)) for i in range(N_WORKERS)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
            self.assertEqual(p.exitcode, 0)
        reg.publish()
        snap = self.check_exact(d, list(range(N_WORKERS)) + [7])
        self.assertEqual(snap.gauge("processes"), 1)          # the parent
        reg.close()

    def test_sigkilled_worker_keeps_what_it_published(self):
        d = private_dir(self)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                reg = ttft.Registry(max_inflight=16, max_classes=2, shared_dir=d,
                                    process_name="doomed", publish_interval_ms=0)
                record(reg, 0)
                reg.publish()
                record(reg, 5)       # never published: SIGKILL loses it
                os.write(w, b"k")
                while True:
                    signal.pause()
            finally:
                os._exit(1)
        os.close(w)
        self.assertEqual(os.read(r, 1), b"k")
        os.close(r)
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), -signal.SIGKILL)
        snap = self.check_exact(d, [0])
        self.assertEqual(snap.counter("processes_exited"), 1)
        self.check_exact(d, [0])   # folded once, still counted


class GatherObject(unittest.TestCase):
    def test_take_close_and_context_manager(self):
        d = private_dir(self)
        reg = ttft.Registry(max_inflight=16, max_classes=2, shared_dir=d,
                            process_name="api-0", publish_interval_ms=0)
        self.addCleanup(reg.close)
        with ttft.Gather(d) as g:
            self.assertEqual(g.take().counter("begun"), 0)
            record(reg, 1)
            reg.publish()
            snap = g.take()
            self.assertEqual(counters(snap), totals([1]))
            self.assertEqual(snap.gauge("processes"), 1)
        self.assertTrue(g.closed)
        with self.assertRaises(ttft.ClosedError):
            g.take()
        g.close()  # idempotent
        self.assertEqual(snap.counter("begun"), totals([1])["begun"])  # outlives the gather

    def test_by_process_names_the_process(self):
        d = private_dir(self)
        reg = ttft.Registry(max_inflight=16, max_classes=2, shared_dir=d,
                            process_name="dp-3", publish_interval_ms=0)
        self.addCleanup(reg.close)
        record(reg, 0)
        reg.publish()
        merged = ttft.gather(d)
        apart = ttft.gather(d, by_process=True)
        self.assertEqual(counters(apart), counters(merged))
        self.assertEqual(counters(apart), totals([0]))
        self.assertEqual(apart.quantile("ttft", 1.0), 0.005)
        self.assertTrue('process="dp-3"' in apart.to_prometheus())
        self.assertFalse('process="dp-3"' in merged.to_prometheus())
        with ttft.Gather(d, by_process=True) as g:
            self.assertTrue(g.by_process)
            self.assertIn("by_process", repr(g))

    def test_serve_http(self):
        if getattr(ttft._lib.load(), "ttft_http_start_gather", None) is None:
            with ttft.Gather(private_dir(self)) as g:
                with self.assertRaises(ttft.NotSupportedError):
                    g.serve_http()
            return
        import urllib.request
        d = private_dir(self)
        reg = ttft.Registry(max_inflight=16, max_classes=2, shared_dir=d,
                            publish_interval_ms=0)
        self.addCleanup(reg.close)
        record(reg, 2)
        reg.publish()
        with ttft.Gather(d) as g:
            srv = g.serve_http()
            with urllib.request.urlopen(srv.metrics_url, timeout=30) as resp:
                body = resp.read().decode()
            line = 'llm_requests_started{class="default"} %d' % totals([2])["begun"]
            self.assertTrue(line in body.replace("_total", ""), line)
        self.assertFalse(srv.running)


class Refusals(unittest.TestCase):
    def test_group_writable_dir_is_refused_with_the_reason(self):
        d = private_dir(self)
        os.chmod(d, 0o770)
        with self.assertRaises(ValueError) as cm:
            ttft.Registry(shared_dir=d)
        self.assertIsInstance(cm.exception, ttft.InvalidArgumentError)
        self.assertIn("group- or world-writable", str(cm.exception))
        self.assertIn(d, str(cm.exception))
        with self.assertRaises(OSError) as cm:
            ttft.gather(d)
        self.assertIn("group- or world-writable", str(cm.exception))
        self.assertEqual(cm.exception.errno, 13)  # EACCES

    def test_missing_dir(self):
        d = os.path.join(private_dir(self), "nope")
        with self.assertRaises(ValueError) as cm:
            ttft.Registry(shared_dir=d)
        self.assertIn(d, str(cm.exception))
        with self.assertRaises(OSError) as cm:
            ttft.Gather(d)
        self.assertEqual(cm.exception.errno, 2)  # ENOENT

    def test_bad_arguments(self):
        d = private_dir(self)
        with self.assertRaises(ValueError) as cm:
            ttft.Registry(shared_dir=d, process_name="has space")
        self.assertIn("process_name", str(cm.exception))
        with self.assertRaises(ValueError):
            ttft.Registry(shared_dir=d, publish_interval_ms=5)     # below 10
        with self.assertRaises(TypeError):
            ttft.Registry(shared_dir=42)
        with self.assertRaises(ValueError):
            ttft.Registry(shared_dir="")

    def test_publish_without_shared_dir(self):
        reg = ttft.Registry(max_inflight=4)
        self.addCleanup(reg.close)
        with self.assertRaises(ValueError) as cm:
            reg.publish()
        self.assertIn("shared_dir", str(cm.exception))

    def test_path_like(self):
        import pathlib
        d = pathlib.Path(private_dir(self))
        reg = ttft.Registry(max_inflight=4, shared_dir=d, publish_interval_ms=0)
        record(reg, 0)
        reg.publish()
        reg.close()
        self.assertEqual(counters(ttft.gather(d)), totals([0]))


if __name__ == "__main__":
    unittest.main()
