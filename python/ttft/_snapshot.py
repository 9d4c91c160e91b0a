"""Snapshot: an immutable copy of a registry's observations.

Durations come back in seconds (float); output_tokens in tokens (int).
Every query takes an optional cls: a ttft.Class, a class name or a class id
of this snapshot (classes are matched by name, so a Class from the registry
also works on merged or decoded snapshots). None means every class.
"""

import collections
import ctypes
import json
import math

from . import _common, _lib
from ._errors import ClosedError
from ._lib import from_code

_COUNTER_INDEX = {name: i for i, name in enumerate(_lib.COUNTERS)}
_GAUGE_INDEX = {name: i for i, name in enumerate(_lib.GAUGES)}
_SPLIT_INDEX = {name: i for i, name in enumerate(_lib.SPLITS)}
_PREFIX_INDEX = {name: i for i, name in enumerate(_lib.PREFIX_BANDS)}
_CAUSE_INDEX = {name: i for i, name in enumerate(_lib.STALL_CAUSES)}
_FORMAT_INDEX = {name: i for i, name in enumerate(_lib.FORMATS)}
_TOKENS = _lib.METRICS.index("output_tokens")
_BINARY_FORMATS = frozenset(("prometheus_protobuf", "otlp_protobuf"))
_SLOWEST_INDEX = {name: i for i, name in enumerate(_lib.SLOWEST)}

SlowRequest = collections.namedtuple("SlowRequest", (
    "request_id", "trace_id", "cls", "value_ns", "ttft_ns", "max_gap_ns", "t_begin_ns",
    "t_end_ns", "t_end_unix_ns", "tokens", "status", "cause",
    # since 1.3
    "fluidity", "deadlines", "deadlines_missed", "token_deadline_ns", "ttft_slo_ns",
    "tpot_slo_ns"))
SlowRequest.__doc__ = "One of a snapshot's slowest requests (Snapshot.slowest)."


def _lookup(table, value, what):
    if not isinstance(value, str):
        raise TypeError("%s must be a str, not %s" % (what, type(value).__name__))
    try:
        return table[value]
    except KeyError:
        raise ValueError("unknown %s %r; one of: %s"
                         % (what, value, ", ".join(table))) from None


def _q_arg(q):
    if isinstance(q, bool) or not isinstance(q, (int, float)):
        raise TypeError("q must be a number in [0, 1], not %s" % type(q).__name__)
    if not (0.0 <= q <= 1.0):  # also rejects NaN
        raise ValueError("q must be in [0, 1], got %r" % (q,))
    return float(q)


def _status_view(metric, status):
    """(metric index, status index) of a per-status view; ValueError for a
    metric that has none (the C call would answer 0, which reads like an
    empty view)."""
    m = _common._metric_index(metric)
    st = _common._status_arg(status)
    if metric not in _lib.STATUS_VIEW_METRICS:
        raise ValueError("status views exist for %s only, not %r"
                         % (", ".join(_lib.STATUS_VIEW_METRICS), metric))
    return m, st


def _value(m, ns):
    """A C value of metric m in Python units."""
    return ns if m == _TOKENS else ns / 1e9


def _split_args(split, index):
    s = _lookup(_SPLIT_INDEX, split, "split")
    if isinstance(index, str):
        if _lib.SPLITS[s] == "prompt_band":
            raise TypeError("a prompt_band index is an int")
        return s, _lookup(_PREFIX_INDEX, index, "prefix band")
    return s, _common._int_arg(index, "index", 0, _lib.U32_MAX)


class Snapshot:
    """Read with quantile/count/mean/sum/counter/gauge/attainment; render with
    report/to_json/to_prometheus/to_openmetrics; combine with ttft.merge(a, b)
    and `newer - older`; serialise with encode()/Snapshot.decode(). Frees its
    C memory on close(), at the end of a `with` block, or when collected."""

    __slots__ = ("_o", "_names", "__weakref__")

    def __init__(self):
        raise TypeError("snapshots come from Registry.snapshot(), Snapshot.decode() or ttft.merge()")

    @classmethod
    def _wrap(cls, raw):
        self = object.__new__(cls)
        lib = _lib.load()
        self._o = _common._Owner(raw, lib.ttft_snapshot_free)
        self._names = None
        return self

    # --- lifetime
    def close(self):
        """Free the C snapshot (later queries raise ClosedError). Idempotent."""
        o, self._o = self._o, None
        if o is not None:
            o.retire()

    @property
    def closed(self):
        return self._o is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _p(self):
        """The owner of the C snapshot. Callers keep it in a local while
        they call C, so a concurrent close() cannot free the memory under a
        running query (the owner frees it only when collected)."""
        o = self._o
        if o is None or o.ptr is None:
            raise ClosedError("snapshot is closed")
        return o

    def __repr__(self):
        if self.closed:
            return "<ttft.Snapshot closed>"
        return "<ttft.Snapshot begun=%d ended=%d>" % (
            self.counter("begun"),
            self.counter("completed") + self.counter("cancelled") + self.counter("errors"))

    # --- classes
    @property
    def classes(self):
        """Class names in id order ("default" first)."""
        if self._names is None:
            own = self._p()
            p = own.ptr
            n = _lib.load().ttft_snapshot_classes(p)
            self._names = tuple(_lib.load().ttft_snapshot_class_name(p, i).decode("utf-8")
                                for i in range(n))
        return list(self._names)

    def _cid(self, cls):
        if cls is None:
            return _lib.TTFT_CLASS_ALL
        if isinstance(cls, _common.Class):
            name = cls.name
        elif isinstance(cls, str):
            name = cls
        elif isinstance(cls, int) and not isinstance(cls, bool):
            if 0 <= cls < len(self.classes):
                return cls
            raise ValueError("no class id %d in this snapshot" % cls)
        else:
            raise TypeError("cls must be a ttft.Class, a class name, an id or None, not %s"
                            % type(cls).__name__)
        names = self.classes
        if name not in names:
            raise ValueError("no class %r in this snapshot (classes: %s)"
                             % (name, ", ".join(names)))
        return names.index(name)

    def class_slo(self, cls):
        """SLO budgets of a class as a dict of seconds (None = no budget);
        stall_threshold is the effective one (the registry default when the
        class sets none)."""
        cid = self._cid(cls)
        if cid == _lib.TTFT_CLASS_ALL:
            raise ValueError("class_slo needs one class")
        slo = _lib.Slo()
        slo.struct_size = ctypes.sizeof(_lib.Slo)
        own = self._p()
        rc = _lib.load().ttft_snapshot_class_slo(own.ptr, cid, ctypes.byref(slo))
        if rc:
            raise from_code(rc, "Snapshot.class_slo")
        return {k: (getattr(slo, k + "_ns") / 1e9 or None)
                for k in ("ttft", "tpot", "e2e", "stall_threshold")}

    # --- queries
    def quantile(self, metric, q, cls=None, status=None):
        """Quantile q in [0, 1] of metric, in seconds (tokens for
        output_tokens); 0 when the metric is empty.

        status ("completed", "cancelled" or "error") reads the view of the
        streams that ended with that status, recorded at stream end; it
        exists for ttft, tpot, e2e and output_tokens. status="completed" is
        what client benchmarks report (they count completed requests only);
        without status, ttft counts every stream that saw a first token,
        including those cancelled later."""
        return _value(_common._metric_index(metric), self.quantile_ns(metric, q, cls, status))

    def quantile_ns(self, metric, q, cls=None, status=None):
        """Like quantile() but the raw C value: int ns (tokens)."""
        qq = _q_arg(q)
        if status is None:
            m = _common._metric_index(metric)
            own = self._p()
            return _lib.load().ttft_snapshot_class_quantile(own.ptr, self._cid(cls), m, qq)
        m, st = _status_view(metric, status)
        own = self._p()
        return _lib.load().ttft_snapshot_status_quantile(own.ptr, self._cid(cls), st, m, qq)

    def count(self, metric, cls=None, status=None):
        """Number of observations of metric (of the streams that ended with
        status, when given: see quantile())."""
        if status is None:
            m = _common._metric_index(metric)
            own = self._p()
            return _lib.load().ttft_snapshot_class_count(own.ptr, self._cid(cls), m)
        m, st = _status_view(metric, status)
        own = self._p()
        return _lib.load().ttft_snapshot_status_count(own.ptr, self._cid(cls), st, m)

    def sum(self, metric, cls=None, status=None):
        """Exact sum of metric: seconds (tokens for output_tokens). The
        library keeps sums 128 bits wide (they never wrap); the nanoseconds
        are summed as a Python int before the division. With status (see
        quantile()), the sum of that status view (sum_ns() says when it is
        past 2**64 - 1 ns)."""
        m = _common._metric_index(metric)
        if status is not None:
            return _value(m, self.sum_ns(metric, cls, status))
        own = self._p()
        hi, lo = ctypes.c_uint64(0), ctypes.c_uint64(0)
        _lib.load().ttft_snapshot_class_sum_wide(own.ptr, self._cid(cls), m,
                                              ctypes.byref(hi), ctypes.byref(lo))
        return _value(m, (hi.value << 64) | lo.value)

    def sum_ns(self, metric, cls=None, status=None):
        """Like sum() but the raw C value: int ns (tokens), saturated at
        2**64 - 1 (ttft_snapshot_class_sum / ttft_snapshot_status_sum)."""
        if status is None:
            m = _common._metric_index(metric)
            own = self._p()
            return _lib.load().ttft_snapshot_class_sum(own.ptr, self._cid(cls), m)
        m, st = _status_view(metric, status)
        own = self._p()
        return _lib.load().ttft_snapshot_status_sum(own.ptr, self._cid(cls), st, m)

    def mean(self, metric, cls=None, status=None):
        """Exact mean of metric: seconds (tokens for output_tokens); 0.0
        when empty. With status, the mean of that view:
        mean("ttft", status="completed") is the "mean TTFT" client
        benchmarks print (completed requests only). Report percentiles,
        not means, for latency."""
        if status is None:
            m = _common._metric_index(metric)
            own = self._p()
            v = _lib.load().ttft_snapshot_class_mean(own.ptr, self._cid(cls), m)
        else:
            m, st = _status_view(metric, status)
            own = self._p()
            v = _lib.load().ttft_snapshot_status_mean(own.ptr, self._cid(cls), st, m)
        return v if m == _TOKENS else v / 1e9

    def counter(self, name, cls=None):
        """Counter name ("begun", "stalls", ...)."""
        c = _lookup(_COUNTER_INDEX, name, "counter")
        own = self._p()
        return _lib.load().ttft_snapshot_class_counter(own.ptr, self._cid(cls), c)

    def counters(self, cls=None):
        """Every counter as a dict."""
        return {name: self.counter(name, cls) for name in _lib.COUNTERS}

    def gauge(self, name):
        """Gauge at snapshot time: "inflight", "live_stalls", "memory" (bytes
        the registry holds) or "coarse" (observations binned by power of two
        only because the chunk pool was empty: memory_limit reached, or a burst
        beyond the pool's reserve; 0 normally) or, since 1.3, "processes"
        (in a gathered snapshot: live processes; 0 otherwise)."""
        g = _lookup(_GAUGE_INDEX, name, "gauge")
        own = self._p()
        return _lib.load().ttft_snapshot_gauge(own.ptr, g)

    def attainment(self, cls=None):
        """SLO attainment good/judged in [0, 1] (counters slo_met / slo_judged:
        streams cancelled before they missed a budget are not judged); None
        when nothing was judged."""
        own = self._p()
        v = _lib.load().ttft_snapshot_attainment(own.ptr, self._cid(cls))
        return None if v < 0 or math.isnan(v) else v

    def split_count(self, split, index):
        """TTFT observations under a split: ("prefix_cache", band) with
        band "miss", "partial", "hit" (or 0 miss / 1 hit / 2 partial), or
        ("prompt_band", band index); PREFILL observations under
        ("prefill_by_prefix", band)."""
        s, i = _split_args(split, index)
        own = self._p()
        return _lib.load().ttft_snapshot_split_count(own.ptr, s, i)

    def split_quantile(self, split, index, q):
        """TTFT (PREFILL for "prefill_by_prefix") quantile in seconds under
        a split; see split_count."""
        s, i = _split_args(split, index)
        qq = _q_arg(q)
        own = self._p()
        return _lib.load().ttft_snapshot_split_quantile(own.ptr, s, i, qq) / 1e9

    # --- stall causes and engine steps (1.2)
    def stalls_by_cause(self, cause, cls=None):
        """Stalls attributed to cause ("unknown", "prefill", "preempted",
        "not_scheduled", "engine_idle", "slow_step"); over the causes they add up to
        counter("stalls")."""
        c = _lookup(_CAUSE_INDEX, cause, "stall cause")
        own = self._p()
        return _lib.load().ttft_snapshot_stalls_by_cause(own.ptr, self._cid(cls), c)

    def stall_seconds_by_cause(self, cause, cls=None):
        """The summed gaps (seconds) of the stalls attributed to cause."""
        c = _lookup(_CAUSE_INDEX, cause, "stall cause")
        own = self._p()
        return _lib.load().ttft_snapshot_stall_seconds_by_cause(own.ptr, self._cid(cls), c) / 1e9

    def stall_causes(self, cls=None):
        """{cause: (stalls, stalled seconds)} for every cause."""
        return {c: (self.stalls_by_cause(c, cls), self.stall_seconds_by_cause(c, cls))
                for c in _lib.STALL_CAUSES}

    def engine_step_count(self, prefill):
        """Engine steps (registry-wide) that carried prefill (True) or not."""
        own = self._p()
        return _lib.load().ttft_snapshot_engine_step_count(own.ptr, 1 if prefill else 0)

    def engine_step_quantile(self, prefill, q):
        """Quantile q (seconds) of the engine-step durations with or
        without prefill."""
        qq = _q_arg(q)
        own = self._p()
        lib = _lib.load()
        return lib.ttft_snapshot_engine_step_quantile(own.ptr, 1 if prefill else 0, qq) / 1e9

    def engine_step_sum(self, prefill):
        """Summed engine-step durations (seconds) with or without prefill."""
        own = self._p()
        return _lib.load().ttft_snapshot_engine_step_sum(own.ptr, 1 if prefill else 0) / 1e9

    def bands(self):
        """Prompt-length bands as [(lo, hi), ...]: lo <= prompt_tokens < hi
        (hi 2**32-1 for the last band)."""
        own = self._p()
        p = own.ptr
        out = []
        lo, hi = ctypes.c_uint32(), ctypes.c_uint32()
        for i in range(_lib.load().ttft_snapshot_bands(p)):
            rc = _lib.load().ttft_snapshot_band(p, i, ctypes.byref(lo), ctypes.byref(hi))
            if rc:
                raise from_code(rc, "Snapshot.bands")
            out.append((lo.value, hi.value))
        return out

    def slowest(self, by="ttft", cls=None):
        """The slowest requests recorded at stream end (ttft_snapshot_slowest),
        slowest first: by "ttft" (requests that got a first token) or "gap"
        (their longest inter-token gap), in class cls (None = every class).
        Each is a SlowRequest: request_id and trace_id (None when not given),
        cls (the class name), value_ns (what it is ranked by), ttft_ns,
        max_gap_ns, t_begin_ns, t_end_ns (monotonic), t_end_unix_ns (wall
        clock, None when unknown), tokens, status, cause (of its longest
        gap when that was a stall: "unknown", "prefill", ...); since 1.3 how
        it flowed and what it was judged against: fluidity (1 - missed /
        deadlines, 1.0 with none), deadlines and deadlines_missed (its token
        deadlines), token_deadline_ns (its D; None: no token deadlines),
        ttft_slo_ns and tpot_slo_ns (the first-token deadline and TPOT
        budget it was judged against, its own or its class's; None: none).
        A snapshot written before 1.3 has 0 deadlines and None budgets."""
        b = _lookup(_SLOWEST_INDEX, by, "ranking")
        cid = self._cid(cls)
        own = self._p()
        p = own.ptr
        L = _lib.load()
        n = L.ttft_snapshot_slowest_count(p, cid, b)
        names = self.classes
        out = []
        for i in range(n):
            r = _lib.SlowRequest()
            r.struct_size = ctypes.sizeof(r)
            rc = L.ttft_snapshot_slowest(p, cid, b, i, ctypes.byref(r))
            if rc != 0:
                raise from_code(rc, "Snapshot.slowest")
            out.append(SlowRequest(
                r.request_id.decode("utf-8", "replace") or None,
                r.trace_id.decode("ascii") or None,
                names[r.class_id] if 0 <= r.class_id < len(names) else None,
                r.value_ns, r.ttft_ns, r.max_gap_ns, r.t_begin_ns, r.t_end_ns,
                r.t_end_unix_ns or None, r.tokens,
                _lib.STATUSES[r.status] if 0 <= r.status < len(_lib.STATUSES) else None,
                _lib.STALL_CAUSES[r.cause] if 0 <= r.cause < len(_lib.STALL_CAUSES) else "unknown",
                r.fluidity, r.deadlines, r.deadlines_missed, r.token_deadline_ns or None,
                r.ttft_slo_ns or None, r.tpot_slo_ns or None))
        return out

    @property
    def interval_ns(self):
        """(start_ns, end_ns) the snapshot covers, on the monotonic clock."""
        a, b = ctypes.c_uint64(), ctypes.c_uint64()
        own = self._p()
        rc = _lib.load().ttft_snapshot_interval(own.ptr, ctypes.byref(a), ctypes.byref(b))
        if rc:
            raise from_code(rc, "Snapshot.interval_ns")
        return a.value, b.value

    @property
    def duration(self):
        """Seconds the snapshot covers."""
        a, b = self.interval_ns
        return (b - a) / 1e9

    def label(self, key):
        """"start_point", "token_point", "model" or "namespace"; None otherwise."""
        kb = _common._str_arg(key, "key")
        own = self._p()
        v = _lib.load().ttft_snapshot_label(own.ptr, kb)
        return None if v is None else v.decode("utf-8", "replace")

    # --- rendering
    def format(self, fmt="text"):
        """Render as "text", "json", "prometheus" or "openmetrics" (str), or
        "prometheus_protobuf" (bytes: length-delimited
        io.prometheus.client.MetricFamily messages with native histograms)."""
        f = _lookup(_FORMAT_INDEX, fmt, "format")
        own = self._p()
        p = own.ptr
        fn = _lib.load().ttft_snapshot_format
        n = fn(p, f, None, 0)
        if n < 0:
            raise from_code(n, "Snapshot.format(%r)" % fmt)
        buf = ctypes.create_string_buffer(n + 1)
        m = fn(p, f, buf, n + 1)
        if m < 0:
            raise from_code(m, "Snapshot.format(%r)" % fmt)
        if m > n:  # a snapshot is immutable: the output cannot grow
            raise from_code(_lib.TTFT_ERANGE, "Snapshot.format(%r)" % fmt)
        if fmt in _BINARY_FORMATS:
            return buf.raw[:m]
        return buf.raw[:m].decode("utf-8", "replace")

    def report(self):
        """The text table for a terminal."""
        return self.format("text")

    def to_json(self):
        """JSON text (schema in docs/json.md)."""
        return self.format("json")

    def as_dict(self):
        """to_json() parsed."""
        return json.loads(self.to_json())

    def to_prometheus(self):
        """Prometheus text exposition format 0.0.4."""
        return self.format("prometheus")

    def to_openmetrics(self):
        """OpenMetrics 1.0 text."""
        return self.format("openmetrics")

    def to_prometheus_protobuf(self):
        """Prometheus protobuf exposition (bytes): what /metrics sends when
        the scraper's Accept asks for application/vnd.google.protobuf."""
        return self.format("prometheus_protobuf")

    def __str__(self):
        return self.report()

    # --- serialisation
    def encode(self):
        """Compact, versioned, checksummed bytes (Snapshot.decode reads them)."""
        own = self._p()
        p = own.ptr
        fn = _lib.load().ttft_snapshot_encode
        n = fn(p, None, 0)
        if n < 0:
            raise from_code(n, "Snapshot.encode")
        buf = ctypes.create_string_buffer(max(n, 1))
        m = fn(p, buf, n)
        if m < 0:
            raise from_code(m, "Snapshot.encode")
        return buf.raw[:n]

    def encode_base64(self):
        """encode() as one line of base64 text."""
        own = self._p()
        p = own.ptr
        fn = _lib.load().ttft_snapshot_encode_base64
        n = fn(p, None, 0)
        if n < 0:
            raise from_code(n, "Snapshot.encode_base64")
        buf = ctypes.create_string_buffer(n + 1)
        m = fn(p, buf, n + 1)
        if m < 0:
            raise from_code(m, "Snapshot.encode_base64")
        return buf.raw[:n].decode("ascii")

    @classmethod
    def decode(cls, data):
        """A Snapshot from encode()'s bytes. CorruptError for anything malformed."""
        if isinstance(data, str) or not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("decode() needs bytes, not %s (use decode_base64 for text)"
                            % type(data).__name__)
        b = bytes(data)
        lib = _lib.load()
        err = ctypes.c_int(0)
        raw = lib.ttft_snapshot_decode(b, len(b), ctypes.byref(err))
        if not raw:
            raise from_code(err.value or _lib.TTFT_ECORRUPT, "Snapshot.decode")
        return cls._wrap(raw)

    @classmethod
    def decode_base64(cls, text):
        """A Snapshot from encode_base64()'s text."""
        if isinstance(text, str):
            text = text.encode("ascii", "replace")
        if not isinstance(text, (bytes, bytearray)):
            raise TypeError("decode_base64() needs str or bytes, not %s" % type(text).__name__)
        b = bytes(text)
        lib = _lib.load()
        err = ctypes.c_int(0)
        raw = lib.ttft_snapshot_decode_base64(b, len(b), ctypes.byref(err))
        if not raw:
            raise from_code(err.value or _lib.TTFT_ECORRUPT, "Snapshot.decode_base64")
        return cls._wrap(raw)

    # --- combining
    def merge(self, other):
        """ttft.merge(self, other)."""
        return merge(self, other)

    def __sub__(self, older):
        """The delta newer - older of two snapshots of one registry."""
        if not isinstance(older, Snapshot):
            return NotImplemented
        a, b = self._p(), older._p()  # locals keep both alive during the call
        err = ctypes.c_int(0)
        raw = _lib.load().ttft_snapshot_delta(a.ptr, b.ptr, ctypes.byref(err))
        del a, b
        if not raw:
            raise from_code(err.value or _lib.TTFT_EINVAL, "Snapshot delta (newer - older)")
        return Snapshot._wrap(raw)


def merge(a, b):
    """A new Snapshot with the observations of a and b (classes matched by
    name); fleet percentiles come from merged counts."""
    if not isinstance(a, Snapshot) or not isinstance(b, Snapshot):
        raise TypeError("merge() needs two ttft.Snapshot objects")
    oa, ob = a._p(), b._p()  # locals keep both alive during the call
    err = ctypes.c_int(0)
    raw = _lib.load().ttft_snapshot_merge(oa.ptr, ob.ptr, ctypes.byref(err))
    del oa, ob
    if not raw:
        raise from_code(err.value or _lib.TTFT_ENOMEM, "ttft.merge")
    return Snapshot._wrap(raw)
