"""Registry, Class, Stream and the wrappers around them.

Lifetime model. Each C object (registry, snapshot) is owned by one small
_Owner object whose __del__ frees it. Everything that calls into C with the
pointer (Registry, Stream, HttpServer; Snapshot) holds a reference to that
owner, so the C object cannot be freed while a call on it is running in
another thread. Registry.close() only *retires* the owner: new calls see a
NULL pointer and raise ClosedError, and the memory is released as soon as
the last Stream or server holding the owner is gone (immediately when there
is none). That is what makes "close() while another thread is mid-call"
safe, which the C API alone does not promise.
"""

import asyncio
import concurrent.futures
import ctypes
import datetime
import errno
import math
import numbers
import os
import re
import threading
import warnings
from array import array

from . import _lib
from ._common import (_STATUS_INDEX, Class, _int_arg, _metric_index,  # noqa: F401
                      _Owner, _status_arg, _str_arg)
from ._errors import (ClosedError, Error, InvalidArgumentError, IoError, NotSupportedError,
                      OutOfMemoryError, StaleHandleError)
from ._lib import from_code
from ._snapshot import Snapshot

# Hot-path C functions, bound by _bind() when the library is first loaded.
# Module globals are the cheapest lookup from a method body.
_begin = _begin_ex = _mark = _token_emitted = _stream_end = None
_annotate = _step_emitted = _engine_step = _begin_checked = None
_StepInfo = _lib.StepInfo
_STEP_INFO_SIZE = ctypes.sizeof(_lib.StepInfo)
_L = None  # the CDLL


def _bind():
    """Load libttft (once) and bind the hot functions to module globals."""
    global _L, _begin, _begin_ex, _mark, _token_emitted, _stream_end
    global _annotate, _step_emitted, _engine_step, _begin_checked
    if _L is None:
        lib = _lib.load()
        _begin, _begin_ex = lib.ttft_begin, lib.ttft_begin_ex
        _begin_checked = getattr(lib, "ttft_begin_checked", None)  # 1.3
        _mark, _token_emitted = lib.ttft_mark, lib.ttft_token_emitted
        _stream_end = lib.ttft_stream_end
        _annotate, _step_emitted = lib.ttft_annotate, lib.ttft_step_emitted
        _engine_step = lib.ttft_engine_step
        _L = lib
    return _L


_U32 = _lib.U32_MAX
_U64 = _lib.U64_MAX

# The most tokens one emission may carry unless the caller says allow_large=True.
# No model flushes a million tokens at once, but a nanosecond timestamp passed
# where n belongs (s.token(150_000_000)) is a number like that: refuse it.
MAX_TOKENS_PER_EMISSION = 1 << 20


def _typecode(size):
    """An array.array type code for unsigned integers of `size` bytes."""
    for code in ("B", "H", "I", "L", "Q"):
        if array(code).itemsize == size:
            return code
    raise ImportError("no array type code for %d-byte unsigned integers" % size)


# Handles (ttft_seq, uint64_t) and token counts (uint32_t) for step_emitted.
# 'L' converts ints about 3x faster than 'Q' where both are 8 bytes (LP64),
# and _typecode picks it first for that reason.
_SEQ_CODE = _typecode(8)
_N_CODE = _typecode(4)
_CANCEL_TYPES = (asyncio.CancelledError, concurrent.futures.CancelledError,
                 GeneratorExit, ConnectionError)


# ------------------------------------------------------------ validation
# What of an id the library can read (TTFT_ID_READ): ttft_begin_ex keeps
# at most MAX_REQUEST_ID bytes of a request id and each kept byte consumes
# at most 4 of the caller's (a valid character is copied whole, a malformed
# sequence of at most 3 bytes becomes one '?'), and it reads at most 33
# bytes of a trace id; every str character encodes to at least one byte.
# Cutting an id here changes nothing the library keeps or counts, and a
# 1 MB id costs no more than a short one.
_ID_READ = 4 * (_lib.TTFT_MAX_REQUEST_ID + 1)


def _id_arg(value, what):
    """request_id / trace_id: None, or the bytes the C struct points to.

    Whatever a client sent is accepted (issue 27.2): a str is encoded as
    UTF-8, with a surrogateescape'd byte (U+DC80..U+DCFF, as os.fsdecode
    makes) restored and any other lone surrogate (what json.loads makes of
    "\\ud83d") sent as '?'; bytes pass as they are; a NUL becomes '?'
    (a C string would end there: a trace id would be cut to one that may
    look valid). The library turns malformed UTF-8 and control characters
    of a request id into '?' and ignores and counts a bad trace id. Only a
    value that is neither str nor bytes raises (TypeError): that is the
    caller's bug, not the client's input."""
    if value is None:
        return None
    if isinstance(value, str):
        value = value[:_ID_READ]
        try:
            b = value.encode("utf-8")
        except UnicodeEncodeError:
            b = _id_surrogates(value)
    elif isinstance(value, (bytes, bytearray)):
        b = bytes(value[:_ID_READ])
    else:
        raise TypeError("%s must be a str or None, not %s" % (what, type(value).__name__))
    if b"\0" in b:
        b = b.replace(b"\0", b"?")
    return b


_HEX = frozenset(b"0123456789abcdef")


def _traceparent_trace_id(value):
    """The trace id of a W3C traceparent header value (Trace Context,
    section 3.2: version "-" trace-id "-" parent-id "-" trace-flags, each
    lowercase hex: 2, 32, 16 and 2 digits; version ff and all-zero ids
    invalid; version 00 exactly 55 characters, a later version may carry
    more after a "-"), as the bytes ttft_request.trace_id takes. A value
    that is not one comes back as bytes the library refuses, so it is
    ignored and counted as "trace_id_invalid", as a bad trace_id is.
    Surrounding spaces and tabs (what an HTTP field value may carry) are
    ignored; only a type other than str/bytes/None raises."""
    b = _id_arg(value, "traceparent")
    if b is None:
        return None
    b = b.strip(b" \t")
    ok = (len(b) >= 55 and b[2:3] == b"-" and b[35:36] == b"-" and b[52:53] == b"-"
          and all(ch in _HEX for ch in b[0:2] + b[3:35] + b[36:52] + b[53:55])
          and b[0:2] != b"ff" and b[3:35] != b"0" * 32 and b[36:52] != b"0" * 16
          and (len(b) == 55 if b[0:2] == b"00" else (len(b) == 55 or b[55:56] == b"-")))
    if ok:
        return b[3:35]
    return b"traceparent:" + b[:_ID_READ]  # never 32 hex digits: refused, counted


def _id_surrogates(value):
    """value (a str holding surrogates) as UTF-8: U+DC80..U+DCFF as the
    byte surrogateescape stands for, any other surrogate as '?'."""
    out = bytearray()
    for ch in value:
        c = ord(ch)
        if 0xD800 <= c <= 0xDFFF:
            out.append(c - 0xDC00 if 0xDC80 <= c <= 0xDCFF else 0x3F)
        else:
            out += ch.encode("utf-8")
    return bytes(out)


_ZERO_TIME = (
    "%s=0 is not a timestamp: the C library reads 0 as 'now' (TTFT_NOW), so a "
    "replayed trace whose times start at 0 would silently mix the live clock "
    "with its own times. Pass None for 'now', or shift the trace by a base "
    "time (e.g. add 1_000_000_000) so that every timestamp is > 0")


def _t_arg(t_ns, what="t_ns"):
    """A timestamp argument: None (read the clock now) or ns (> 0) on
    time.monotonic_ns()'s clock. None is the only "now": an explicit 0 is
    refused (see _ZERO_TIME)."""
    if t_ns is None:
        return 0
    t = _int_arg(t_ns, what, 0, _U64)
    if t == 0:
        raise ValueError(_ZERO_TIME % what)
    return t


_TIMESTAMP_HINT = ("was a timestamp passed as the token count? Timestamps go in "
                   "t_ns=... (keyword-only, int nanoseconds on time.monotonic_ns()'s clock)")


def _n_arg(n, allow_large=False, what="n", lo=1):
    """A token count of one emission: an int in [lo, 2**32-1], and at most
    MAX_TOKENS_PER_EMISSION unless allow_large. Every value that cannot be
    a count and looks like a time — a float (time.monotonic(),
    time.time()), an int above the bound or above 2**32-1 (any
    time.monotonic_ns() after the first 4.3 s of uptime, time.time_ns()) —
    gets the "was a timestamp passed?" hint."""
    if isinstance(n, numbers.Real) and not hasattr(type(n), "__index__"):
        raise TypeError("%s=%r is not a token count (an int): %s"
                        % (what, n, _TIMESTAMP_HINT))
    if isinstance(n, bool) or not hasattr(type(n), "__index__"):
        raise TypeError("%s must be an int, not %s" % (what, type(n).__name__))
    v = n.__index__()
    if v < lo:
        raise ValueError("%s must be in [%d, %d], got %d" % (what, lo, _U32, v))
    if v > _U32:
        raise ValueError(
            "%s=%d cannot be a token count: the library counts the tokens of one "
            "emission in 32 bits (at most %d), and a number this large is what "
            "time.monotonic_ns() returns: %s" % (what, v, _U32, _TIMESTAMP_HINT))
    if v > MAX_TOKENS_PER_EMISSION and not allow_large:
        raise ValueError(
            "%s=%d tokens in one emission is above the sanity bound of %d "
            "(ttft.MAX_TOKENS_PER_EMISSION): %s; pass allow_large=True if the count "
            "is real" % (what, v, MAX_TOKENS_PER_EMISSION, _TIMESTAMP_HINT))
    return v


def _seconds_arg(value, what, allow_zero=True):
    """Seconds (int or float) to integer nanoseconds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("%s must be a number of seconds, not %s"
                        % (what, type(value).__name__))
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("%s must be finite, got %r" % (what, value))
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError("%s must be %s seconds, got %r"
                         % (what, ">= 0" if allow_zero else "> 0", value))
    ns = int(round(value * 1e9))
    if ns > _U64:
        raise ValueError("%s is too large: %r seconds" % (what, value))
    if ns == 0 and value > 0:
        ns = 1  # a positive budget never becomes "no budget"
    return ns


# A plain number of seconds at or above this is refused: it was meant in ms.
_SECONDS_PLAUSIBLE = {"ttft_slo": 60, "tpot_slo": 60, "stall_threshold": 60, "e2e_slo": 600}


def _budget_arg(value, ms, what):
    """An SLO budget in ns from add_class's arguments: value (seconds as a
    number, or a datetime.timedelta) or ms (the *_ms keyword); None when
    neither is given."""
    if value is not None and ms is not None:
        raise TypeError("give %s or %s_ms, not both" % (what, what))
    if ms is not None:
        if isinstance(ms, datetime.timedelta):
            raise TypeError("%s_ms takes a number of milliseconds; pass a timedelta as %s"
                            % (what, what))
        if isinstance(ms, bool) or not isinstance(ms, numbers.Real):
            raise TypeError("%s_ms must be a number of milliseconds, not %s"
                            % (what, type(ms).__name__))
        return _seconds_arg(ms / 1000, what, allow_zero=False)
    if value is None:
        return None
    if isinstance(value, datetime.timedelta):
        return _seconds_arg(value.total_seconds(), what, allow_zero=False)
    if (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and value >= _SECONDS_PLAUSIBLE[what]):
        raise ValueError(
            "%s=%r is in seconds (%s): a budget in milliseconds goes in %s_ms=%r or "
            "%s=timedelta(milliseconds=%r); for a budget this long pass "
            "%s=timedelta(seconds=%r)"
            % (what, value, _human_seconds(value), what, value, what, value, what, value))
    return _seconds_arg(value, what, allow_zero=False)


def _human_seconds(s):
    try:
        s = float(s)
    except (TypeError, ValueError, OverflowError):
        return "?"
    if s >= 3600:
        return "%.3g hours" % (s / 3600)
    return "%.3g minutes" % (s / 60)


def _bool_arg(value, what):
    if not isinstance(value, bool):
        raise TypeError("%s must be True or False, not %s" % (what, type(value).__name__))
    return 1 if value else 0


# A task's CancelledError: the client went away (an ASGI server cancels the
# handler on disconnect), or the server's own timeout (asyncio.wait_for,
# asyncio.timeout) cancelled it. on_cancel= decides which it was.
_TASK_CANCEL = (asyncio.CancelledError, concurrent.futures.CancelledError)
_ON_CANCEL = ("cancelled", "error")


def _on_cancel_arg(on_cancel):
    """on_cancel of Registry.stream / instrument: "cancelled", "error" or a
    callable exception -> one of those."""
    if callable(on_cancel):
        return on_cancel
    if isinstance(on_cancel, str) and on_cancel in _ON_CANCEL:
        return on_cancel
    raise ValueError("on_cancel must be 'cancelled', 'error' or a callable "
                     "(exception -> 'cancelled' | 'error'), got %r" % (on_cancel,))


def _cancel_status(on_cancel, exc):
    """How a CancelledError ends the stream. A callable that raises or
    returns anything else ends it as error, with a RuntimeWarning: the
    CancelledError itself must keep propagating, so it is not replaced."""
    if not callable(on_cancel):
        return on_cancel
    try:
        status = on_cancel(exc)
    except Exception as e:  # noqa: BLE001 (reported, the cancel goes on)
        warnings.warn("ttft: on_cancel raised %r; the stream ends as 'error'" % (e,),
                      RuntimeWarning, stacklevel=3)
        return "error"
    if not (isinstance(status, str) and status in _ON_CANCEL):
        warnings.warn("ttft: on_cancel returned %r, not 'cancelled' or 'error'; the stream "
                      "ends as 'error'" % (status,), RuntimeWarning, stacklevel=3)
        return "error"
    return status


def _status_for(exc_type, exc=None, on_cancel="cancelled"):
    """The end status of a stream left by exception type exc_type.

    None -> completed; a task's CancelledError -> what on_cancel says
    (default cancelled: the client went away); the client going away in
    other ways (generator closed, connection reset/broken pipe) ->
    cancelled; anything else -> error."""
    if exc_type is None:
        return "completed"
    if issubclass(exc_type, _TASK_CANCEL):
        return _cancel_status(on_cancel, exc)
    if issubclass(exc_type, _CANCEL_TYPES):
        return "cancelled"
    return "error"


_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_CLASS_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,63}\Z")


# ---------------------------------------------------------------- owners
def _registry_ptr(o):
    p = o.ptr if o is not None else None
    if p is None:
        raise ClosedError("registry is closed")
    return p


# ------------------------------------------------------------------ stream
class SeqStats:
    """Live statistics of one stream (ttft_seq_stats). Times in ns fields;
    the properties without _ns are seconds (None while not yet known)."""

    __slots__ = ("class_id", "emissions", "tokens", "t_begin_ns", "t_last_ns",
                 "ttft_ns", "itl_p50_ns", "itl_p95_ns", "itl_max_ns", "stalls",
                 "preemptions", "last_stall_cause", "fluidity", "deadlines",
                 "deadlines_missed", "ttft_slo_ns", "tpot_slo_ns")

    def __init__(self, info):
        for name in self.__slots__:
            setattr(self, name, getattr(info, name))
        # the cause's name ("prefill", ...), None before the first stall
        c = self.last_stall_cause
        self.last_stall_cause = _lib.STALL_CAUSES[c] if 0 <= c < len(_lib.STALL_CAUSES) else None

    def _sec(self, ns, known):
        return ns / 1e9 if known else None

    @property
    def ttft(self):
        return self._sec(self.ttft_ns, self.emissions > 0)

    @property
    def itl_p50(self):
        return self._sec(self.itl_p50_ns, self.emissions > 1)

    @property
    def itl_p95(self):
        return self._sec(self.itl_p95_ns, self.emissions > 1)

    @property
    def itl_max(self):
        return self._sec(self.itl_max_ns, self.emissions > 1)

    def __repr__(self):
        return "<ttft.SeqStats %s>" % " ".join(
            "%s=%s" % (n, getattr(self, n)) for n in self.__slots__)


class Stream:
    """One streamed response (a C sequence handle). Made by Registry.begin.

    Hooks raise StaleHandleError once the stream has ended. A stream that
    could not begin because every slot was busy (counted as "dropped") is
    `dropped`: its hooks do nothing, so instrumentation never fails the
    request it measures."""

    __slots__ = ("_o", "_seq", "_k", "cls", "status", "dropped", "__weakref__")

    def __init__(self, owner, seq, cls, key=None):
        self._o = owner if seq else None
        self._seq = seq
        self._k = key          # the registry's identity, kept after end()
        self.cls = cls
        self.status = None     # "completed" / "cancelled" / "error" once ended
        self.dropped = not seq

    @property
    def handle(self):
        """The raw ttft_seq handle (an int; 0 for a dropped stream)."""
        return self._seq

    @property
    def ended(self):
        return self.status is not None

    def __repr__(self):
        state = ("dropped" if self.dropped else
                 "ended %s" % self.status if self.status else "live")
        return "<ttft.Stream 0x%x %s>" % (self._seq, state)

    # --- errors, off the fast path
    def _dead(self, what):
        if self.dropped:
            return
        e = from_code(_lib.TTFT_ESTALE, what)
        raise e

    def _fail(self, rc, what, o):
        if rc == _lib.TTFT_EINVAL and o.ptr is None:
            raise ClosedError("%s: registry is closed" % what)
        raise from_code(rc, what)

    # --- hooks
    # Timestamps are keyword-only (t_ns=...): s.token(150_000_000) is 150 M
    # tokens, never a time, and is refused by the sanity bound on n.
    def token(self, n=1, *, t_ns=None, allow_large=False):
        """n tokens became visible to the client at t_ns (None = now; ns on
        time.monotonic_ns()'s clock, > 0). n above MAX_TOKENS_PER_EMISSION
        raises ValueError unless allow_large=True."""
        if t_ns is None:
            t = 0
        elif type(t_ns) is int and 0 < t_ns <= _U64:
            t = t_ns
        else:
            t = _t_arg(t_ns)
        if type(n) is not int or n < 1 or n > MAX_TOKENS_PER_EMISSION:
            n = _n_arg(n, allow_large)
        o = self._o
        if o is None:
            return self._dead("Stream.token")
        rc = _token_emitted(o.ptr, self._seq, n, t)
        if rc:
            self._fail(rc, "Stream.token", o)

    def _mark(self, phase, t_ns, what):
        t = _t_arg(t_ns)
        o = self._o
        if o is None:
            return self._dead(what)
        rc = _mark(o.ptr, self._seq, phase, t)
        if rc:
            self._fail(rc, what, o)

    def mark_scheduled(self, *, t_ns=None):
        """First admission by the scheduler (prefill starts). Later calls
        are accepted and ignored by the library."""
        self._mark(_lib.TTFT_PHASE_SCHEDULED, t_ns, "Stream.mark_scheduled")

    def mark_preempted(self, *, t_ns=None):
        """Evicted from the batch (counted as a preemption; a stall whose
        gap holds this mark is attributed to the cause "preempted")."""
        self._mark(_lib.TTFT_PHASE_PREEMPTED, t_ns, "Stream.mark_preempted")

    def mark_resumed(self, *, t_ns=None):
        """Back in the batch after mark_preempted (not counted)."""
        self._mark(_lib.TTFT_PHASE_RESUMED, t_ns, "Stream.mark_resumed")

    def annotate(self, prompt_tokens=None, prefix_hit=None):
        """Details learned after begin (typically when a slot picks the
        request up): prompt length and prefix-cache hit. None leaves a field
        as it is (prompt_tokens=0 too, as in begin()); prefix_hit is True,
        False or None. The clock keeps its start.

        Returns True when recorded, False when it came too late: after the
        first token (TTFT's prefix and prompt-band splits were recorded then,
        so nothing changes) or on a dropped stream. Raises StaleHandleError
        on an ended stream, like the other hooks."""
        pt = 0 if prompt_tokens is None else _int_arg(prompt_tokens, "prompt_tokens", 0, _U32)
        if prefix_hit is None:
            ph = -1
        elif isinstance(prefix_hit, bool):
            ph = 1 if prefix_hit else 0
        else:
            raise TypeError("prefix_hit must be True, False or None, not %s"
                            % type(prefix_hit).__name__)
        o = self._o
        if o is None:
            if self.dropped:
                return False
            return self._dead("Stream.annotate")
        rc = _annotate(o.ptr, self._seq, pt, ph)
        if rc == 0:
            return True
        if rc == _lib.TTFT_ERANGE:
            return False
        self._fail(rc, "Stream.annotate", o)

    def annotate_cached(self, prompt_tokens, cached_tokens):
        """The prompt length and how many of its tokens the prefix cache
        served, where the server computes that reuse (when the prompt
        starts, not at slot launch). Sets the prompt band and the prefix
        band: "miss" below the registry's prefix_hit_min_tokens (default
        16), "partial" below half the prompt, "hit" otherwise; the TTFT and
        PREFILL splits ("prefix_cache", "prefill_by_prefix") use it.

        Returns True when recorded, False after the first token (nothing
        changes) or on a dropped stream; raises StaleHandleError on an
        ended stream and ValueError for prompt_tokens < 1 or
        cached_tokens > prompt_tokens."""
        pt = _int_arg(prompt_tokens, "prompt_tokens", 1, _U32)
        ct = _int_arg(cached_tokens, "cached_tokens", 0, _U32)
        if ct > pt:
            raise ValueError("cached_tokens (%d) exceeds prompt_tokens (%d)" % (ct, pt))
        o = self._o
        if o is None:
            if self.dropped:
                return False
            return self._dead("Stream.annotate_cached")
        rc = _L.ttft_annotate_cached(o.ptr, self._seq, pt, ct)
        if rc == 0:
            return True
        if rc == _lib.TTFT_ERANGE:
            return False
        self._fail(rc, "Stream.annotate_cached", o)

    def end(self, status="completed", *, t_ns=None):
        """Close the stream: "completed", "cancelled" (the client went
        away) or "error" (the server failed it)."""
        st = _status_arg(status)
        t = _t_arg(t_ns)
        o = self._o
        if o is None:
            if self.dropped:
                if self.status is None:
                    self.status = status
                return
            return self._dead("Stream.end")
        rc = _stream_end(o.ptr, self._seq, st, t)
        if rc:
            self._fail(rc, "Stream.end", o)
        self.status = status
        self._o = None   # no further C calls; lets a closed registry go

    def stats(self):
        """Live statistics (SeqStats) of this stream; raises
        StaleHandleError once it ended."""
        o = self._o
        if o is None:
            if self.dropped:
                raise StaleHandleError("Stream.stats: stream was dropped (no free slot)",
                                       code=_lib.TTFT_ESTALE)
            return self._dead("Stream.stats")
        info = _lib.SeqInfo()
        info.struct_size = ctypes.sizeof(_lib.SeqInfo)
        rc = _L.ttft_seq_stats(o.ptr, self._seq, ctypes.byref(info))
        if rc:
            self._fail(rc, "Stream.stats", o)
        return SeqStats(info)


def _end_quietly(stream, status):
    """End stream on an exception path: never mask the original exception."""
    if stream is None or stream.status is not None:
        return
    try:
        stream.end(status)
    except Error:
        pass


class _StreamScope:
    """`with reg.stream(...) as s` / `async with`: begin on enter; on exit
    end as completed, cancelled or error (see _status_for) unless the body
    already ended the stream. Exceptions are never swallowed."""

    __slots__ = ("_reg", "_t", "_req", "_cls", "_on_cancel", "stream")

    def __init__(self, reg, t, req, cls, on_cancel="cancelled"):
        self._reg, self._t, self._req, self._cls = reg, t, req, cls
        self._on_cancel = on_cancel
        self.stream = None

    def __enter__(self):
        if self.stream is not None:
            raise RuntimeError("a reg.stream(...) scope can be entered only once")
        self.stream = self._reg._begin_prepared(self._t, self._req, self._cls)
        return self.stream

    def __exit__(self, exc_type, exc, tb):
        s = self.stream
        if s is not None and s.status is None:
            if exc_type is None:
                try:
                    s.end("completed")
                except StaleHandleError:
                    pass  # another thread ended it first: its outcome won
            else:
                _end_quietly(s, _status_for(exc_type, exc, self._on_cancel))
        return False

    async def __aenter__(self):
        return self.__enter__()

    async def __aexit__(self, exc_type, exc, tb):
        return self.__exit__(exc_type, exc, tb)


def _step_counts(n_tokens, count, allow_large):
    """n_tokens of step_emitted as an array of uint32 (None: all 1)."""
    if isinstance(n_tokens, bool):
        raise TypeError("n_tokens must be None, an int or a sequence of ints, not bool")
    if isinstance(n_tokens, numbers.Real):   # an int, or a time passed as one
        n = _n_arg(n_tokens, allow_large, "n_tokens", lo=0)
        return None if n == 1 else array(_N_CODE, [n]) * count
    if isinstance(n_tokens, (str, bytes, bytearray, memoryview)):
        # array() would read bytes as raw machine integers
        raise TypeError("n_tokens must be None, an int or a sequence of ints, not %s"
                        % type(n_tokens).__name__)
    try:
        ns = array(_N_CODE, n_tokens)
    except (TypeError, OverflowError) as e:
        # name the count at fault, with the timestamp hint where it fits
        # (a sequence can be read twice; an iterator was consumed)
        if isinstance(n_tokens, (list, tuple)):
            for i, v in enumerate(n_tokens):
                _n_arg(v, True, "n_tokens[%d]" % i, lo=0)
        if isinstance(e, OverflowError):
            raise ValueError("n_tokens: every count must be in [0, %d]" % _U32) from None
        raise TypeError("n_tokens must be None, an int or a sequence of ints") from None
    if len(ns) != count:
        raise ValueError("n_tokens has %d counts for %d streams" % (len(ns), count))
    if count and not allow_large:
        big = max(ns)
        if big > MAX_TOKENS_PER_EMISSION:
            _n_arg(big, False, "n_tokens[%d]" % list(ns).index(big))
    return ns


def _token_count(count, item):
    if count is None:
        return 1
    n = count(item)
    if n == 0:
        return 0
    return _n_arg(n)


def _instrument_sync(reg, iterable, t, req, cls, count, on_cancel):
    it = iter(iterable)
    s = None
    try:
        s = reg._begin_prepared(t, req, cls)
        for item in it:
            n = _token_count(count, item)
            if n:
                s.token(n)
            yield item
    except BaseException as e:
        _end_quietly(s, _status_for(type(e), e, on_cancel))
        raise
    else:
        s.end("completed")
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()


async def _instrument_async(reg, aiterable, t, req, cls, count, on_cancel):
    ait = aiterable.__aiter__()
    s = None
    try:
        s = reg._begin_prepared(t, req, cls)
        while True:
            try:
                item = await ait.__anext__()
            except StopAsyncIteration:
                break
            n = _token_count(count, item)
            if n:
                s.token(n)
            yield item
    except BaseException as e:
        _end_quietly(s, _status_for(type(e), e, on_cancel))
        raise
    else:
        s.end("completed")
    finally:
        aclose = getattr(ait, "aclose", None)
        if aclose is not None:
            await aclose()


# ---------------------------------------------------------------- registry
class Registry:
    """A libttft registry: the slot table and histograms of one process or
    engine. Times are seconds in Python arguments (stall_threshold, SLO
    budgets) and nanoseconds for timestamps (t_ns, time.monotonic_ns()).

    Arguments beyond the first two are keyword-only and map to ttft_config
    fields (None = the library default):
      max_threads, max_classes, clock ("monotonic" | "tsc"),
      start_point, token_point, model, namespace (metric prefix),
      labels ({name: value} constant labels), prompt_bands (ascending
      prompt-token edges), prom_buckets ({metric: [upper bounds in seconds,
      tokens for output_tokens]}), prom_summaries (bool);
    since 1.1:
      native_histograms (bool; default True: the protobuf exposition carries
      native histograms beside the classic buckets), native_schema (int,
      -4 .. 8; default 7), export_idle_classes (bool; default False: the default
      class is left out of reports and expositions until a begin uses it;
      added classes are exported at zero from add_class on),
      memory_limit (bytes of histogram buckets, at least 1 MiB; default
      256 MiB; beyond it values are binned by power of two only, gauge
      "coarse");
    since 1.2:
      prefix_hit_min_tokens (int >= 1, default 16: Stream.annotate_cached
      calls fewer cached tokens a prefix-cache miss);
      slowest_k (requests kept per class in each slowest list,
      Snapshot.slowest; default 8, 0 .. 64, 0 = none);
    since 1.3 (many processes, one truth; docs/multiprocess.md):
      shared_dir (str or os.PathLike: publish this registry's whole state
      into a segment of its own in that directory, which ttft.gather(dir)
      reads; a tmpfs such as /dev/shm/NAME; it must exist, belong to this
      user and not be group- or world-writable, else InvalidArgumentError
      naming the reason), process_name (this process in per-process views,
      1..63 bytes of [A-Za-z0-9_.:-]; default "pid-<pid>"; a stable name
      such as "api-0" keeps a series across restarts), publish_interval_ms
      (a background thread publishes at least this often; default 100,
      10 .. 3600000; 0 = no thread: call publish()). A registry created
      before os.fork() and used in the child publishes the child as a new
      process, from zero: what the parent recorded stays the parent's.
    """

    def __init__(self, max_inflight=4096, stall_threshold=0.5, *,
                 max_threads=None, max_classes=None, clock=None,
                 start_point=None, token_point=None, model=None,
                 namespace=None, labels=None, prompt_bands=None,
                 prom_buckets=None, prom_summaries=False,
                 native_histograms=None, native_schema=None,
                 export_idle_classes=None, memory_limit=None,
                 prefix_hit_min_tokens=None, slowest_k=None,
                 shared_dir=None, process_name=None, publish_interval_ms=None):
        self._o = None
        self._servers = []
        self._pushers = []
        self._lock = threading.Lock()
        self._key = object()
        lib = _bind()
        cfg = _lib.Config()
        lib.ttft_config_init_sized(ctypes.byref(cfg), ctypes.sizeof(cfg))
        keep = []  # buffers that must live until ttft_registry_new returns
        cfg.max_inflight = _int_arg(max_inflight, "max_inflight", 1, _lib.TTFT_MAX_INFLIGHT)
        cfg.stall_threshold_ns = _seconds_arg(stall_threshold, "stall_threshold",
                                              allow_zero=False)
        if max_threads is not None:
            cfg.max_threads = _int_arg(max_threads, "max_threads", 0, 256)
        if max_classes is not None:
            cfg.max_classes = _int_arg(max_classes, "max_classes", 1, 1 << 16)
        if clock is not None:
            if clock not in _lib.CLOCKS:
                raise ValueError("clock must be one of %s, got %r"
                                 % (", ".join(_lib.CLOCKS), clock))
            cfg.clock = _lib.CLOCKS.index(clock)
        for field, value in (("start_point", start_point), ("token_point", token_point),
                             ("model", model), ("metric_namespace", namespace)):
            if value is not None:
                b = _str_arg(value, field if field != "metric_namespace" else "namespace",
                             _lib.TTFT_MAX_LABEL)
                keep.append(b)
                setattr(cfg, field, b)
        if labels:
            if not isinstance(labels, dict):
                raise TypeError("labels must be a dict of name -> value")
            if len(labels) > _lib.TTFT_MAX_CONST_LABELS:
                raise ValueError("at most %d constant labels" % _lib.TTFT_MAX_CONST_LABELS)
            arr = (_lib.Label * len(labels))()
            for i, (k, v) in enumerate(labels.items()):
                kb = _str_arg(k, "label name")
                if not _LABEL_NAME.match(k):
                    raise ValueError("label name %r is not [a-zA-Z_][a-zA-Z0-9_]*" % k)
                vb = _str_arg(v, "label %r value" % k, _lib.TTFT_MAX_LABEL)
                keep += [kb, vb]
                arr[i].name, arr[i].value = kb, vb
            keep.append(arr)
            cfg.const_labels = ctypes.cast(arr, ctypes.POINTER(_lib.Label))
            cfg.n_const_labels = len(labels)
        if prompt_bands is not None:
            edges = [_int_arg(e, "prompt_bands edge", 1, _U32) for e in prompt_bands]
            if len(edges) > _lib.TTFT_MAX_BANDS - 1:
                raise ValueError("at most %d prompt band edges" % (_lib.TTFT_MAX_BANDS - 1))
            if any(b <= a for a, b in zip(edges, edges[1:])):
                raise ValueError("prompt_bands edges must be strictly ascending")
            cfg.n_prompt_bands = len(edges)
            for i, e in enumerate(edges):
                cfg.prompt_band_edges[i] = e
        if prom_buckets:
            if not isinstance(prom_buckets, dict):
                raise TypeError("prom_buckets must be a dict of metric -> bounds")
            for metric, bounds in prom_buckets.items():
                m = _metric_index(metric)
                if m >= _lib.TTFT_PROM_CONFIG_METRICS:
                    raise ValueError("%s uses the classic buckets of itl; configure those" % metric)
                if metric == "output_tokens":
                    vals = [_int_arg(b, "output_tokens bucket", 1, _U64) for b in bounds]
                else:
                    vals = [_seconds_arg(b, "%s bucket" % metric, allow_zero=False)
                            for b in bounds]
                if not vals or len(vals) > _lib.TTFT_MAX_PROM_BUCKETS:
                    raise ValueError("%s: 1 to %d buckets" % (metric, _lib.TTFT_MAX_PROM_BUCKETS))
                if any(b <= a for a, b in zip(vals, vals[1:])):
                    raise ValueError("%s buckets must be strictly ascending" % metric)
                arr = (ctypes.c_uint64 * len(vals))(*vals)
                keep.append(arr)
                cfg.prom_buckets[m] = ctypes.cast(arr, ctypes.POINTER(ctypes.c_uint64))
                cfg.prom_n_buckets[m] = len(vals)
        cfg.prom_summaries = 1 if prom_summaries else 0
        if native_histograms is not None:
            cfg.native_histograms = _bool_arg(native_histograms, "native_histograms")
        if native_schema is not None:
            cfg.native_schema = _int_arg(native_schema, "native_schema",
                                         _lib.NATIVE_SCHEMA_MIN, _lib.NATIVE_SCHEMA_MAX)
        if export_idle_classes is not None:
            cfg.export_idle_classes = _bool_arg(export_idle_classes, "export_idle_classes")
        if memory_limit is not None:
            cfg.memory_limit = _int_arg(memory_limit, "memory_limit",
                                        _lib.TTFT_MIN_MEMORY_LIMIT, _U64)
        if prefix_hit_min_tokens is not None:
            cfg.prefix_hit_min_tokens = _int_arg(prefix_hit_min_tokens,
                                                 "prefix_hit_min_tokens", 1, _U32)
        if slowest_k is not None:
            cfg.slowest_k = _int_arg(slowest_k, "slowest_k", 0, _lib.TTFT_MAX_SLOWEST_K)
        if shared_dir is not None:
            b = _path_arg(shared_dir, "shared_dir")
            keep.append(b)
            cfg.shared_dir = b
        if process_name is not None:
            b = _str_arg(process_name, "process_name")
            keep.append(b)
            cfg.process_name = b
        if publish_interval_ms is not None:
            cfg.publish_interval_ms = _int_arg(publish_interval_ms, "publish_interval_ms", 0, _U32)
        why = ctypes.create_string_buffer(512)
        if lib.ttft_config_check(ctypes.byref(cfg), why, ctypes.sizeof(why)) != _lib.TTFT_OK:
            raise InvalidArgumentError(
                "invalid configuration: " + why.value.decode("utf-8", "replace"),
                code=_lib.TTFT_EINVAL)
        raw = lib.ttft_registry_new(ctypes.byref(cfg))
        del keep
        if not raw:
            raise from_code(_lib.TTFT_ENOMEM, "ttft_registry_new (the configuration is valid)")
        self._o = _Owner(raw, lib.ttft_registry_free)
        self.default_class = Class(0, "default", self._key)
        if shared_dir is not None:
            _publish_in_multiprocessing_children(self)

    # --- lifetime
    def close(self):
        """Stop this registry's HTTP servers and release the registry.
        Later calls (also on its Streams) raise ClosedError. Safe while other
        threads are inside hooks: the C memory goes once nothing uses it.
        Snapshots already taken stay valid. Idempotent."""
        with self._lock:
            servers, self._servers = self._servers, []
            pushers, self._pushers = self._pushers, []
            o, self._o = self._o, None
        for pusher in pushers:
            pusher.stop()
        for srv in servers:
            srv.stop()
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

    def __repr__(self):
        return "<ttft.Registry %s>" % ("closed" if self.closed else "open")

    @property
    def address(self):
        """The ttft_registry * as an int, for C extensions that record into
        the same registry (valid until close())."""
        o = self._o  # a local keeps the registry alive during the call
        return _registry_ptr(o)

    # --- classes
    def add_class(self, name, ttft_slo=None, tpot_slo=None, e2e_slo=None,
                  stall_threshold=None, *, ttft_slo_ms=None, tpot_slo_ms=None,
                  e2e_slo_ms=None, stall_threshold_ms=None, ttft_ns_per_prompt_token=0,
                  token_deadline_ms=None, fluid_min=0.9):
        """Add a request class with SLO budgets (None = no budget;
        stall_threshold None = the registry's). Returns a Class.

        Say the unit: a datetime.timedelta (ttft_slo=timedelta(
        milliseconds=500)), or the *_ms keywords (ttft_slo_ms=500). A plain
        number in ttft_slo/tpot_slo/e2e_slo/stall_threshold is seconds, as
        in 1.0-1.2 (ttft_slo=0.5 still means 500 ms), but one that only
        makes sense as milliseconds is refused (ValueError): 60 or more
        for ttft_slo, tpot_slo and stall_threshold, 600 or more for
        e2e_slo (ttft_slo=500 would be a budget of 8 minutes). Pass a
        timedelta for a budget that long.

        1.3: ttft_ns_per_prompt_token (int ns) makes the first-token
        deadline length-aware (ttft_slo + it x prompt tokens);
        token_deadline_ms is the fluidity rule's D (None = the TPOT
        budget); fluid_min (0..1) the fluidity a completed stream needs to
        count as fluid."""
        nb = _str_arg(name, "class name")
        if not _CLASS_NAME.match(name):
            raise ValueError("class name must be 1..63 characters of [A-Za-z0-9_.:-], got %r"
                             % name)
        slo = _lib.Slo()
        _L.ttft_slo_init_sized(ctypes.byref(slo), ctypes.sizeof(slo))
        for field, value, ms in (("ttft_ns", ttft_slo, ttft_slo_ms),
                                 ("tpot_ns", tpot_slo, tpot_slo_ms),
                                 ("e2e_ns", e2e_slo, e2e_slo_ms),
                                 ("stall_threshold_ns", stall_threshold, stall_threshold_ms)):
            what = "stall_threshold" if field == "stall_threshold_ns" else field[:-3] + "_slo"
            ns = _budget_arg(value, ms, what)
            if ns is not None:
                setattr(slo, field, ns)
        slo.ttft_ns_per_prompt_token = _int_arg(ttft_ns_per_prompt_token,
                                                "ttft_ns_per_prompt_token", 0, _U64)
        dl = _budget_arg(None, token_deadline_ms, "token_deadline")
        if dl is not None:
            slo.token_deadline_ns = dl
        if not isinstance(fluid_min, (int, float)) or not 0.0 <= fluid_min <= 1.0:
            raise ValueError("fluid_min must be a number in 0..1, got %r" % (fluid_min,))
        slo.fluid_min = float(fluid_min)
        o = self._o
        rc = _L.ttft_class_add(_registry_ptr(o), nb, ctypes.byref(slo))
        if rc < 0:
            raise from_code(rc, "Registry.add_class(%r)" % name)
        return Class(rc, name, self._key)

    def find_class(self, name):
        """The Class called name; KeyError when there is none."""
        nb = _str_arg(name, "class name")
        o = self._o
        rc = _L.ttft_class_find(_registry_ptr(o), nb)
        if rc < 0:
            raise KeyError(name)
        return Class(rc, name, self._key)

    def _class_id(self, cls):
        if cls is None:
            return 0
        if isinstance(cls, Class):
            if cls._key is not self._key:
                raise ValueError("%r belongs to another registry" % (cls,))
            return cls.id
        if isinstance(cls, str):
            return self.find_class(cls).id
        raise TypeError("cls must be a ttft.Class, a class name or None, not %s"
                        % type(cls).__name__)

    # --- hooks
    def _prepare(self, cls, prompt_tokens, prefix_hit, request_id=None, trace_id=None,
                 traceparent=None, ttft_slo_ns=None, tpot_slo_ns=None):
        """A ttft_request for these arguments, or None for the defaults."""
        cid = self._class_id(cls)
        own_ttft = _int_arg(ttft_slo_ns, "ttft_slo_ns", 0, _U64) if ttft_slo_ns is not None else 0
        own_tpot = _int_arg(tpot_slo_ns, "tpot_slo_ns", 0, _U64) if tpot_slo_ns is not None else 0
        if prompt_tokens is not None:
            prompt_tokens = _int_arg(prompt_tokens, "prompt_tokens", 0, _U32)
        if prefix_hit is not None and not isinstance(prefix_hit, bool):
            raise TypeError("prefix_hit must be True, False or None")
        if trace_id is not None and traceparent is not None:
            raise TypeError("give trace_id or traceparent, not both")
        rid = _id_arg(request_id, "request_id")
        if traceparent is not None:
            tid = _traceparent_trace_id(traceparent)
        else:
            tid = _id_arg(trace_id, "trace_id")
        if (cid == 0 and not prompt_tokens and prefix_hit is None and rid is None and tid is None
                and not own_ttft and not own_tpot):
            return None
        req = _lib.Request()
        _L.ttft_request_init_sized(ctypes.byref(req), ctypes.sizeof(req))
        req.class_id = cid
        req.prompt_tokens = prompt_tokens or 0
        req.prefix_hit = -1 if prefix_hit is None else int(prefix_hit)
        req.request_id = rid  # the struct keeps the bytes alive (ctypes _objects)
        req.trace_id = tid
        req.ttft_slo_ns = own_ttft
        req.tpot_slo_ns = own_tpot
        return req

    def _resolve_cls(self, cls):
        if isinstance(cls, str):
            return self.find_class(cls)
        return cls if cls is not None else self.default_class

    def _begin_prepared(self, t, req, cls):
        o = self._o
        p = _registry_ptr(o)
        if t and _begin_checked is not None:
            # an explicit time: the library says whether it was refused as
            # a wall-clock time (TTFT_ECLOCK, counted "clock_refused")
            out = ctypes.c_uint64()
            rc = _begin_checked(p, None if req is None else ctypes.byref(req), t,
                                ctypes.byref(out))
            if rc == _lib.ECLOCK:
                raise _lib.from_code(
                    rc, "begin",
                    "t_ns=%d is a wall-clock time (time.time_ns(), CLOCK_REALTIME); pass "
                    "time.monotonic_ns() or t_ns=None" % t)
            return Stream(o, out.value, cls, self._key)
        if req is None:
            seq = _begin(p, t)
        else:
            seq = _begin_ex(p, ctypes.byref(req), t)
        return Stream(o, seq, cls, self._key)

    def begin(self, t_ns=None, cls=None, prompt_tokens=None, prefix_hit=None, *,
              request_id=None, trace_id=None, traceparent=None, ttft_slo_ns=None,
              tpot_slo_ns=None):
        """Start a stream at t_ns (None = now): the clock start of TTFT and
        E2E. cls: a Class from add_class, its name, or None (default).
        prompt_tokens: prompt length (band split); prefix_hit: True/False/None
        (cache split). request_id: the server's id of the request (str or
        bytes, copied; at most 63 bytes of UTF-8 are kept, cut at a whole
        character; control characters, NUL, lone surrogates and malformed
        UTF-8 become '?'); trace_id: a W3C trace-id, 32 lowercase hex digits
        (anything else is ignored and counted as counter "trace_id_invalid");
        traceparent: instead of trace_id, the W3C traceparent header as a
        client sent it ("00-<trace-id>-<parent-id>-<flags>"): its trace id is
        used, and a malformed one is ignored and counted as a bad trace_id.
        No value of either raises (TypeError for a type other than str,
        bytes, bytearray or None): they are what a client sent. Both are shown
        with the slowest requests (Snapshot.slowest) and trace_id as the
        exemplar of its bucket. ttft_slo_ns / tpot_slo_ns (1.3): this
        request's own TTFT / TPOT budgets in ns (a router's
        x-llm-d-slo-ttft-ms x 1e6), judged instead of its class's; None or
        0 = the class's. Returns a Stream (`dropped` when no slot was
        free)."""
        t = _t_arg(t_ns)
        req = self._prepare(cls, prompt_tokens, prefix_hit, request_id, trace_id,
                            traceparent, ttft_slo_ns, tpot_slo_ns)
        return self._begin_prepared(t, req, self._resolve_cls(cls))

    def attach(self, handle):
        """A Stream for a raw ttft_seq handle begun elsewhere on this
        registry (e.g. by C code given Registry.address)."""
        h = _int_arg(handle, "handle", 1, _U64)
        o = self._o
        _registry_ptr(o)
        return Stream(o, h, None, self._key)

    def step_emitted(self, streams, n_tokens=None, *, t_ns=None, allow_large=False):
        """One decode step of a continuous-batching engine, in one C call
        (ttft_step_emitted): streams[i] emitted n_tokens[i] tokens at t_ns
        (None = now, one clock read for the whole step). Records exactly
        what one streams[i].token(n_tokens[i], t_ns=t_ns) per stream would.

        streams: a list (or tuple, or iterable) of this registry's Streams.
        n_tokens: None (1 each), one int for all, or a sequence of ints of
        the same length; 0 means "no emission this step" (skipped), and
        counts above MAX_TOKENS_PER_EMISSION raise unless allow_large=True.

        Returns the number of emissions accepted. Never raises for the
        streams' own state: a dropped stream is skipped (as its token() does
        nothing), and an ended one (say, cancelled by its client while the
        engine still had it in the batch) is skipped by the library and
        counted in the "stale" counter. Raises TypeError / ValueError for a
        non-Stream item, a Stream of another registry, or bad n_tokens;
        ClosedError after close()."""
        if t_ns is None:
            t = 0
        elif type(t_ns) is int and 0 < t_ns <= _U64:
            t = t_ns
        else:
            t = _t_arg(t_ns)
        if type(streams) is not list and type(streams) is not tuple:
            if isinstance(streams, (str, bytes, bytearray, Stream)):
                raise TypeError("step_emitted() needs a list of ttft.Stream objects, not %s"
                                % type(streams).__name__)
            streams = list(streams)
        count = len(streams)
        ns = None if n_tokens is None else _step_counts(n_tokens, count, allow_large)
        o = self._o  # a local keeps the registry alive during the call
        p = o.ptr if o is not None else None
        if p is None:
            raise ClosedError("registry is closed")
        if not count:
            return 0
        # The fast path: every item a live Stream of this registry. An
        # ended or dropped stream (whose _o is None), another registry's, or
        # a non-Stream falls out of the filter and takes the slow path.
        try:
            handles = [s._seq for s in streams if s._o is o]
        except AttributeError:
            handles = None
        if handles is None or len(handles) != count:
            handles, ns = self._step_filter(streams, ns)
            if not handles:
                return 0
        h = array(_SEQ_CODE, handles)
        if ns is None:
            rc = _step_emitted(p, h.buffer_info()[0], None, len(h), t)
        else:
            rc = _step_emitted(p, h.buffer_info()[0], ns.buffer_info()[0], len(h), t)
        if rc < 0:
            raise from_code(rc, "Registry.step_emitted")
        return rc

    def _step_filter(self, streams, ns):
        """The handles (and counts) step_emitted passes when not every item
        is a live Stream of this registry: TypeError for a non-Stream,
        ValueError for another registry's Stream, dropped streams left out,
        ended streams kept (the library skips them and counts them STALE)."""
        key = self._key
        handles, keep = [], []
        for i, s in enumerate(streams):
            if not isinstance(s, Stream):
                raise TypeError("step_emitted(): item %d is %s, not a ttft.Stream"
                                % (i, type(s).__name__))
            if s._k is not key:
                raise ValueError("step_emitted(): item %d (%r) belongs to another registry"
                                 % (i, s))
            if s.dropped:
                continue
            handles.append(s._seq)
            keep.append(i)
        if ns is not None:
            ns = array(_N_CODE, [ns[i] for i in keep])
        return handles, ns

    def stream(self, t_ns=None, cls=None, prompt_tokens=None, prefix_hit=None, *,
               on_cancel="cancelled", request_id=None, trace_id=None, traceparent=None):
        """A context manager (sync and async) that begins a stream on enter
        and ends it on exit: completed; cancelled for GeneratorExit and
        ConnectionError (the client went away); error for any other
        exception; and for a task's CancelledError, what on_cancel says:

          "cancelled" (default) — the client went away: ASGI/aiohttp
              servers cancel the handler's task when the client disconnects;
          "error" — every cancel of this handler is the server's own doing
              (its timeout: asyncio.wait_for, asyncio.timeout), a failure to
              serve, not the client leaving;
          a callable, exception -> "cancelled" | "error" — decide per
              cancel, e.g. lambda e: "error" if deadline.expired() else
              "cancelled" with the asyncio.timeout() context around the
              handler (a callable that raises or returns anything else
              ends the stream as error, with a RuntimeWarning).
        The exception always propagates."""
        t = _t_arg(t_ns)
        on_cancel = _on_cancel_arg(on_cancel)
        o = self._o
        _registry_ptr(o)
        req = self._prepare(cls, prompt_tokens, prefix_hit, request_id, trace_id,
                            traceparent)
        return _StreamScope(self, t, req, self._resolve_cls(cls), on_cancel)

    def instrument(self, iterable, cls=None, t_ns=None, prompt_tokens=None,
                   prefix_hit=None, count=None, *, on_cancel="cancelled",
                   request_id=None, trace_id=None, traceparent=None):
        """Wrap a token iterable (sync or async): the stream begins when
        iteration starts (or at t_ns, e.g. the request's arrival), each item
        yielded is one emission of count(item) tokens (default 1; items with
        0 are not emissions), and it ends completed when the iterable is
        exhausted, cancelled when the consumer closes it early or is
        cancelled, error when the iterable raises. on_cancel decides what a task's CancelledError
        records, as in stream()."""
        t = _t_arg(t_ns)
        on_cancel = _on_cancel_arg(on_cancel)
        req = self._prepare(cls, prompt_tokens, prefix_hit, request_id, trace_id,
                            traceparent)
        c = self._resolve_cls(cls)
        if count is not None and not callable(count):
            raise TypeError("count must be a callable item -> tokens")
        o = self._o  # a local keeps the registry alive during the call
        _registry_ptr(o)
        if hasattr(iterable, "__aiter__"):
            return _instrument_async(self, iterable, t, req, c, count, on_cancel)
        if hasattr(iterable, "__iter__"):
            return _instrument_sync(self, iterable, t, req, c, count, on_cancel)
        raise TypeError("instrument() needs an iterable or async iterable, not %s"
                        % type(iterable).__name__)

    # --- engine steps (1.2)
    def engine_step(self, prefill_tokens=0, decode_seqs=0, preempted_seqs=0, kind=0, *,
                    t_start_ns=None, t_end_ns=None):
        """One engine iteration (ttft_engine_step): call it when the
        iteration ends, before the tokens it produced are recorded.
        prefill_tokens: prompt tokens processed in it (any request);
        t_start_ns / t_end_ns: ns on time.monotonic_ns()'s clock (None =
        now). The library uses the last steps to give every stall its
        cause (Snapshot.stall_causes) and records the step's duration
        (Snapshot.engine_step_quantile)."""
        # once per engine iteration: the checks of plain ints are inline
        # (as in Stream.token); anything else takes the full checks, with
        # their messages. A struct per call: the call releases the GIL, so
        # one shared struct could be rewritten by another thread during it.
        if not (type(prefill_tokens) is int and 0 <= prefill_tokens <= _U32):
            prefill_tokens = _int_arg(prefill_tokens, "prefill_tokens", 0, _U32)
        if not (type(decode_seqs) is int and 0 <= decode_seqs <= _U32):
            decode_seqs = _int_arg(decode_seqs, "decode_seqs", 0, _U32)
        if not (type(preempted_seqs) is int and 0 <= preempted_seqs <= _U32):
            preempted_seqs = _int_arg(preempted_seqs, "preempted_seqs", 0, _U32)
        if not (type(kind) is int and 0 <= kind <= _U32):
            kind = _int_arg(kind, "kind", 0, _U32)
        t0 = 0 if t_start_ns is None else _t_arg(t_start_ns, "t_start_ns")
        t1 = 0 if t_end_ns is None else _t_arg(t_end_ns, "t_end_ns")
        info = _StepInfo(_STEP_INFO_SIZE, prefill_tokens, decode_seqs, preempted_seqs, kind)
        o = self._o  # a local keeps the registry alive during the call
        rc = _engine_step(_registry_ptr(o), info, t0, t1)
        if rc:
            raise from_code(rc, "Registry.engine_step")

    # --- live state
    def stalled_now(self, now_ns=None):
        """In-flight streams whose last token is older than their stall
        budget at now_ns (None = now)."""
        t = _t_arg(now_ns, "now_ns")
        o = self._o  # a local keeps the registry alive during the call
        rc = _L.ttft_stalled_now(_registry_ptr(o), t)
        if rc < 0:
            raise from_code(rc, "Registry.stalled_now")
        return rc

    def inflight(self):
        """Streams begun and not yet ended."""
        o = self._o  # a local keeps the registry alive during the call
        rc = _L.ttft_inflight(_registry_ptr(o))
        if rc < 0:
            raise from_code(rc, "Registry.inflight")
        return rc

    def memory(self):
        """Bytes the C registry holds."""
        o = self._o  # a local keeps the registry alive during the call
        return _L.ttft_registry_memory(_registry_ptr(o))

    def now_ns(self):
        """The registry's clock (what t_ns=None means), in ns."""
        o = self._o  # a local keeps the registry alive during the call
        return _L.ttft_registry_now_ns(_registry_ptr(o))

    def thread_release(self):
        """Hand the calling thread's recording shard back (call before a
        long-lived thread stops recording; exiting threads do it anyway)."""
        o = self._o  # a local keeps the registry alive during the call
        rc = _L.ttft_thread_release(_registry_ptr(o))
        if rc:
            raise from_code(rc, "Registry.thread_release")

    # --- many processes
    def publish(self):
        """Publish this registry's state into its segment of shared_dir now
        (ttft_publish): what a gatherer sees then includes everything
        recorded so far, even if this process is SIGKILLed next. The
        background thread does this every publish_interval_ms; call it
        yourself with publish_interval_ms=0, or before a risky moment.
        InvalidArgumentError without shared_dir; IoError when writing the
        segment failed (counted in counter "publish_failed"; recording goes
        on)."""
        o = self._o  # a local keeps the registry alive during the call
        fn = _optional("ttft_publish", "Registry.publish")
        rc = fn(_registry_ptr(o))
        if rc:
            raise from_code(rc, "Registry.publish",
                            "this registry has no shared_dir" if rc == _lib.TTFT_EINVAL else None)

    # --- reading
    def snapshot(self):
        """An immutable Snapshot of everything recorded so far."""
        o = self._o  # a local keeps the registry alive during the call
        raw = _L.ttft_snapshot_take(_registry_ptr(o))
        if not raw:
            raise from_code(_lib.TTFT_ENOMEM, "Registry.snapshot")
        return Snapshot._wrap(raw)

    def serve_http(self, addr="127.0.0.1:0"):
        """Serve /metrics, /report and /report.json on addr in a background
        C thread. Returns an HttpServer (.port, .url, .metrics_url, .stop()).
        A failure raises with the library's reason, naming the address:
        a busy port is IoError "... 127.0.0.1:9464: bind: Address already
        in use"."""
        ab = _str_arg(addr, "addr")
        with self._lock:
            o = self._o
            p = _registry_ptr(o)
            out = ctypes.c_void_p()
            start_msg = getattr(_L, "ttft_http_start_msg", None)
            why = ctypes.create_string_buffer(256)
            if start_msg is not None:
                rc = start_msg(p, ab, ctypes.byref(out), why, ctypes.sizeof(why))
            else:  # a libttft older than 1.3: the code alone
                rc = _L.ttft_http_start(p, ab, ctypes.byref(out))
            if rc:
                raise from_code(rc, "Registry.serve_http(%r)" % addr,
                                why.value.decode("utf-8", "replace") or None)
            srv = HttpServer(o, out.value, addr)
            self._servers.append(srv)
        return srv

    def otlp_start(self, endpoint=None, *, metrics_endpoint=None, headers=None,
                   service_name=None, resource_attributes=None, interval_ms=0,
                   timeout_ms=0, temporality=None):
        """Push this registry to an OpenTelemetry Collector over OTLP/HTTP
        (protobuf, plain http:// only) from a background C thread, every
        interval_ms. Every argument left out comes from the OTEL_*
        environment as the OpenTelemetry SDKs read it (endpoint: a base
        URL, /v1/metrics appended; metrics_endpoint: the whole URL;
        headers: a dict or "k=v,k2=v2"; temporality: "cumulative",
        "delta" or "lowmemory"). Returns an OtlpPusher (.flush(), .stop(),
        a context manager); it stops (with a last push) when the Registry
        closes. An https:// or bad URL raises InvalidArgumentError with
        the library's reason."""
        start_msg = _optional("ttft_otlp_start_msg", "Registry.otlp_start")
        cfg = _lib.OtlpConfig()
        _L.ttft_otlp_config_init(ctypes.byref(cfg))
        keep = []

        def s(v, what):
            if v is None:
                return None
            b = _str_arg(v, what)
            keep.append(b)
            return b
        if isinstance(headers, dict):
            from urllib.parse import quote
            headers = ",".join("%s=%s" % (k, quote(str(v), safe="")) for k, v in headers.items())
        cfg.endpoint = s(endpoint, "endpoint")
        cfg.metrics_endpoint = s(metrics_endpoint, "metrics_endpoint")
        cfg.headers = s(headers, "headers")
        cfg.service_name = s(service_name, "service_name")
        cfg.resource_attributes = s(resource_attributes, "resource_attributes")
        if interval_ms:
            cfg.interval_ms = int(interval_ms)
        if timeout_ms:
            cfg.timeout_ms = int(timeout_ms)
        if temporality is not None:
            words = {"cumulative": 0, "delta": 1, "lowmemory": 2}
            if isinstance(temporality, str):
                if temporality.lower() not in words:
                    raise from_code(_lib.TTFT_EINVAL, "Registry.otlp_start",
                                    "temporality must be cumulative, delta or lowmemory, not %r"
                                    % (temporality,))
                temporality = words[temporality.lower()]
            cfg.temporality = int(temporality)
        with self._lock:
            o = self._o
            p = _registry_ptr(o)
            out = ctypes.c_void_p()
            why = ctypes.create_string_buffer(512)
            rc = start_msg(p, ctypes.byref(cfg), ctypes.byref(out), why, ctypes.sizeof(why))
            if rc:
                raise from_code(rc, "Registry.otlp_start",
                                why.value.decode("utf-8", "replace") or None)
            pusher = OtlpPusher(o, out.value)
            self._pushers.append(pusher)
        return pusher


def _publish_quietly(owner):
    p = owner.ptr
    if p and _L is not None and getattr(_L, "ttft_publish", None) is not None:
        _L.ttft_publish(p)  # a failure is counted and said by the library


def _after_multiprocessing_fork(reg):
    import multiprocessing.util as mu
    o = reg._o
    if o is not None:
        mu.Finalize(reg, _publish_quietly, args=(o,), exitpriority=0)


def _publish_in_multiprocessing_children(reg):
    """A multiprocessing worker forked from a process that holds reg (the
    pre-fork server pattern) ends with os._exit, which skips the C
    library's publish at exit: publish reg's last state from
    multiprocessing's own exit hooks in such a child (its Finalize, run by
    the worker's bootstrap after the target returns or raises SystemExit).
    A plain os.fork() child must close() or publish() before os._exit."""
    try:
        import multiprocessing.util as mu
    except ImportError:  # a Python without multiprocessing
        return
    mu.register_after_fork(reg, _after_multiprocessing_fork)


def _optional(name, what):
    """The C function name of a 1.3+ library, or NotSupportedError."""
    fn = getattr(_bind(), name, None)
    if fn is None:
        raise NotSupportedError("%s needs libttft 1.3 or newer (%s is missing from %s)"
                                % (what, name, _lib.loaded_path()))
    return fn


def _path_arg(value, what):
    """A directory argument (str, bytes or os.PathLike) as bytes."""
    try:
        v = os.fspath(value)
    except TypeError:
        raise TypeError("%s must be a str or os.PathLike, not %s"
                        % (what, type(value).__name__)) from None
    b = os.fsencode(v)
    if not b or b"\0" in b:
        raise ValueError("%s must be a non-empty path without NUL" % what)
    return b


class Gather:
    """Every process that published into directory dir (Registry(shared_dir=
    dir) in each), merged: ttft_gather_open/take/close.

        with ttft.Gather("/dev/shm/myserver") as g:
            snap = g.take()            # one Snapshot of every process
            srv = g.serve_http(":9464")  # or serve it, one endpoint

    by_process=True keeps processes apart in the expositions (a process
    label on every series; the Snapshot's own accessors read the merged
    view). Processes that exited or were killed keep counting through the
    directory's archive; their gauges leave the view. Opening checks dir as
    the publishers do: a missing directory, one open to others (group- or
    world-writable) or of another user, or a network file system raises
    IoError (an OSError, errno set) with the library's reason. Thread-safe;
    close() waits for nothing but must not race take() (this class holds a
    lock across both)."""

    def __init__(self, dir, by_process=False):
        self._raw = None
        self._servers = []
        self._lock = threading.Lock()
        self.dir = os.fsdecode(_path_arg(dir, "dir"))
        self.by_process = bool(_bool_arg(by_process, "by_process"))
        _optional("ttft_gather_open_msg", "ttft.Gather")
        open_msg = _lib.load_errno().ttft_gather_open_msg
        db = _path_arg(dir, "dir")
        why = ctypes.create_string_buffer(512)
        flags = _lib.TTFT_GATHER_BY_PROCESS if self.by_process else 0
        ctypes.set_errno(0)
        raw = open_msg(db, flags, why, ctypes.sizeof(why))
        if not raw:
            err = ctypes.get_errno()
            text = why.value.decode("utf-8", "replace") or os.strerror(err or errno.EIO)
            cls = OutOfMemoryError if err == errno.ENOMEM else IoError
            e = cls("ttft.Gather(%r): %s" % (self.dir, text))
            e.errno = err or None
            raise e
        self._raw = raw
        self._close = _L.ttft_gather_close

    def take(self):
        """One Snapshot of every process of the directory (live processes'
        latest segments and the archive of those that exited), usable with
        every Snapshot method and format."""
        with self._lock:
            if self._raw is None:
                raise ClosedError("gather is closed")
            ctypes.set_errno(0)
            raw = _lib.load_errno().ttft_gather_take(self._raw)
            if not raw:
                err = ctypes.get_errno()
                if err == errno.ENOMEM:
                    raise from_code(_lib.TTFT_ENOMEM, "Gather.take")
                e = IoError("Gather.take(%r): %s" % (self.dir, os.strerror(err or errno.EIO)))
                e.errno = err or None
                raise e
        return Snapshot._wrap(raw)

    def serve_http(self, addr="127.0.0.1:0"):
        """Serve this gather (every process of the directory, one endpoint)
        as Registry.serve_http serves a registry: /metrics, /report,
        /report.json, /snapshot. Returns an HttpServer; close() stops it."""
        ab = _str_arg(addr, "addr")
        start = _optional("ttft_http_start_gather", "Gather.serve_http")
        with self._lock:
            if self._raw is None:
                raise ClosedError("gather is closed")
            out = ctypes.c_void_p()
            why = ctypes.create_string_buffer(256)
            rc = start(self._raw, ab, ctypes.byref(out), why, ctypes.sizeof(why))
            if rc:
                raise from_code(rc, "Gather.serve_http(%r)" % addr,
                                why.value.decode("utf-8", "replace") or None)
            srv = HttpServer(self, out.value, addr)
            self._servers.append(srv)
        return srv

    def close(self):
        """Stop this gather's HTTP servers and close it. Snapshots taken
        stay valid. Idempotent."""
        with self._lock:
            servers, self._servers = self._servers, []
        for srv in servers:
            srv.stop()
        with self._lock:
            raw, self._raw = self._raw, None
        if raw:
            self._close(raw)

    @property
    def closed(self):
        return self._raw is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return "<ttft.Gather %r%s %s>" % (self.dir, " by_process" if self.by_process else "",
                                          "closed" if self.closed else "open")


def gather(dir, by_process=False):
    """One Snapshot of every process that published into dir (each with
    Registry(shared_dir=dir)): Gather(dir, by_process).take(), closed after.
    Keep a Gather open instead to take repeatedly or to serve it."""
    with Gather(dir, by_process) as g:
        return g.take()


class _Handle:
    """What a running background object (the OTLP pusher, the HTTP
    endpoint) shares: stop() once, under a lock, also from the context
    manager and the collector; the subclass sets _raw, _lock, _stop and
    _o (its owner, kept alive until the stop)."""

    def stop(self):
        with self._lock:
            raw, self._raw = self._raw, None
        if raw:
            self._stop(raw)  # in a forked child: frees the copy only
        self._o = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def __del__(self):
        try:
            self.stop()
        except Exception:
            pass


class OtlpPusher(_Handle):
    """A running OTLP pusher (Registry.otlp_start). flush() pushes now and
    waits for the collector's answer; stop() (or leaving the context
    manager, or closing the Registry) makes a last push and stops."""

    def __init__(self, owner, raw):
        self._o = owner      # the registry must outlive the pusher
        self._raw = raw
        self._lock = threading.Lock()
        self._stop = _L.ttft_otlp_stop
        self._pid = os.getpid()

    @property
    def running(self):
        return self._raw is not None

    def flush(self):
        """Push now and wait for the answer (at most about the timeout,
        retries included). Raises IoError when the push failed (retries ran
        out, or the collector refused the batch: it is dropped)."""
        raw = self._raw
        if raw is None:
            raise ClosedError("OtlpPusher.flush: the pusher is stopped")
        rc = _L.ttft_otlp_flush(raw)
        if rc:
            raise from_code(rc, "OtlpPusher.flush")

    def stats(self):
        """What the pusher has done so far (ttft_otlp_stats), a dict:
        pushes, accepted, failed (retries ran out; the next push carries
        the data), dropped (refused for good), retries, bytes_sent,
        last_status (0: none yet or no answer), last_error ("" when no
        POST has failed). Raises ClosedError once stopped."""
        fn = _optional("ttft_otlp_stats", "OtlpPusher.stats")
        info = _lib.OtlpInfo()
        info.struct_size = ctypes.sizeof(info)
        with self._lock:  # not beside stop (the C rule)
            if self._raw is None:
                raise ClosedError("OtlpPusher.stats: the pusher is stopped")
            rc = fn(self._raw, ctypes.byref(info))
        if rc:
            raise from_code(rc, "OtlpPusher.stats")
        out = {k: getattr(info, k) for k, _ in _lib.OtlpInfo._fields_[1:-1]}
        out["last_error"] = info.last_error.decode("utf-8", "replace")
        return out

    def __repr__(self):
        return "<ttft.OtlpPusher %s>" % ("running" if self.running else "stopped")


class HttpServer(_Handle):
    """A running ttft_http endpoint. stop() (or the context manager) stops
    it; it also stops when the Registry closes or the object is collected."""

    def __init__(self, owner, raw, addr):
        self._o = owner      # the registry must outlive the server
        self._raw = raw
        self._lock = threading.Lock()
        self.addr = addr
        self.port = _L.ttft_http_port(raw)
        self._stop = _L.ttft_http_stop

    @property
    def running(self):
        return self._raw is not None

    @property
    def url(self):
        """The server's root, "http://127.0.0.1:9464" (an index of paths)."""
        host = self.addr.rsplit(":", 1)[0] or "127.0.0.1"
        return "http://%s:%d" % (host, self.port)

    @property
    def metrics_url(self):
        """What Prometheus scrapes: "http://127.0.0.1:9464/metrics"."""
        return self.url + "/metrics"

    def __repr__(self):
        return "<ttft.HttpServer %s %s>" % (self.url, "running" if self.running else "stopped")


def now_ns():
    """ttft_now_ns(): CLOCK_MONOTONIC in ns, the clock of time.monotonic_ns()."""
    return _bind().ttft_now_ns()
