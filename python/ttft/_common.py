"""What the Registry side (_core) and the Snapshot side (_snapshot) both
use: the owner of a C pointer, the Class handle, and the checks of the
arguments they share. Imports nothing of the package but _lib (the
constants) and _errors, so that _core -> _snapshot -> _common is one way.
"""

from . import _lib

_STATUS_INDEX = {name: i for i, name in enumerate(_lib.STATUSES)}


class _Owner:
    """Owns one C pointer; frees it when the last reference goes."""

    __slots__ = ("ptr", "_raw", "_free")

    def __init__(self, raw, free):
        self.ptr = raw      # what calls use; None once retired
        self._raw = raw     # what __del__ frees
        self._free = free

    def retire(self):
        self.ptr = None

    def __del__(self):
        raw, self._raw = self._raw, None
        if raw:
            try:
                self._free(raw)
            except Exception:  # interpreter shutdown: never raise from __del__
                pass


# ----------------------------------------------------------------- class
class Class:
    """A request class with its SLO budgets (from Registry.add_class)."""

    __slots__ = ("id", "name", "_key")

    def __init__(self, class_id, name, key):
        self.id = class_id
        self.name = name
        self._key = key

    def __repr__(self):
        return "<ttft.Class %r id=%d>" % (self.name, self.id)

    def __eq__(self, other):
        return (isinstance(other, Class) and other._key is self._key
                and other.id == self.id)

    def __hash__(self):
        return hash((id(self._key), self.id))


def _int_arg(value, what, lo, hi):
    """value as a Python int in [lo, hi]; TypeError/ValueError otherwise."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError("%s must be an int, not %s" % (what, type(value).__name__))
    v = value.__index__()
    if v < lo or v > hi:
        raise ValueError("%s must be in [%d, %d], got %d" % (what, lo, hi, v))
    return v


def _str_arg(value, what, max_bytes=None):
    if not isinstance(value, str):
        raise TypeError("%s must be a str, not %s" % (what, type(value).__name__))
    b = value.encode("utf-8")
    if b"\0" in b:
        raise ValueError("%s must not contain NUL" % what)
    if max_bytes is not None and len(b) > max_bytes:
        raise ValueError("%s is longer than %d bytes" % (what, max_bytes))
    return b


def _status_arg(status):
    if not isinstance(status, str):
        raise TypeError("status must be one of %s, not %s"
                        % ("/".join(_lib.STATUSES), type(status).__name__))
    try:
        return _STATUS_INDEX[status]
    except KeyError:
        raise ValueError("status must be one of %s, got %r"
                         % (", ".join(_lib.STATUSES), status)) from None


_METRIC_INDEX = {name: i for i, name in enumerate(_lib.METRICS)}


def _metric_index(metric):
    if not isinstance(metric, str):
        raise TypeError("metric must be a str, not %s" % type(metric).__name__)
    try:
        return _METRIC_INDEX[metric]
    except KeyError:
        raise ValueError("unknown metric %r; one of: %s"
                         % (metric, ", ".join(_lib.METRICS))) from None
