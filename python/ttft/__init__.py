"""libttft for Python: what a streaming LLM user feels, as honest percentiles.

    import ttft
    reg = ttft.Registry(max_inflight=4096, stall_threshold=0.5)   # seconds
    chat = reg.add_class("chat", ttft_slo=0.5, tpot_slo=0.05)
    with reg.stream(cls=chat) as s:      # begin on enter
        for chunk in generate():
            send(chunk)
            s.token()                     # after the chunk is visible
    reg.step_emitted(batch_streams)       # or: one call per decode step
    snap = reg.snapshot()
    snap.quantile("ttft", 0.99)           # seconds
    snap.quantile("e2e", 0.99, status="completed")

Pure standard library (ctypes) over the C library libttft (include/ttft.h is
the reference). Timestamps t_ns are keyword-only nanoseconds (> 0) on
time.monotonic_ns()'s clock (CLOCK_MONOTONIC, the library's clock); None is
the only "now" (an explicit 0 is refused). Budgets and query results are
seconds. docs/python.md has the guide.

The shared library is looked up in this order: $TTFT_LIBRARY; _libttft.so
built into this package by `pip install ./python`; libttft.so* next to this
package; the path recorded by `make install`; the build tree of a source
checkout (../build*/); the system loader (find_library, then libttft.so.1).
It is loaded on first use; ttft.library_path() tells which.
"""

from . import _lib
from ._core import (MAX_TOKENS_PER_EMISSION, Class, Gather, HttpServer, OtlpPusher, Registry, SeqStats,
                    Stream, gather, now_ns)
from ._errors import (ClockError, ClosedError, CorruptError, Error, ExistsError, FullError,
                      InvalidArgumentError, IoError, LibraryNotFoundError,
                      NotSupportedError, OutOfMemoryError, RangeError,
                      StaleHandleError)
from ._snapshot import SlowRequest, Snapshot, merge

__version__ = "1.3.0"

METRICS = _lib.METRICS
COUNTERS = _lib.COUNTERS
GAUGES = _lib.GAUGES
STATUSES = _lib.STATUSES
FORMATS = _lib.FORMATS
STATUS_VIEW_METRICS = _lib.STATUS_VIEW_METRICS
RESERVED_LABELS = _lib.RESERVED_LABELS
STALL_CAUSES = _lib.STALL_CAUSES


def library_path():
    """Path of the libttft shared library in use (loads it if needed)."""
    return _lib.loaded_path()


def library_version():
    """The loaded C library's version string, e.g. "1.3.0"."""
    return _lib.load().ttft_version_string().decode("ascii")


__all__ = [
    "Registry", "Class", "Stream", "SeqStats", "Snapshot", "SlowRequest", "HttpServer", "OtlpPusher",
    "Gather", "gather", "merge", "now_ns", "library_path", "library_version",
    "Error", "InvalidArgumentError", "StaleHandleError", "FullError",
    "OutOfMemoryError", "RangeError", "CorruptError", "ExistsError", "IoError",
    "NotSupportedError", "ClosedError", "LibraryNotFoundError", "ClockError",
    "METRICS", "COUNTERS", "GAUGES", "STATUSES", "FORMATS", "STATUS_VIEW_METRICS",
    "RESERVED_LABELS", "STALL_CAUSES", "MAX_TOKENS_PER_EMISSION",
]
