"""Exceptions: one class per C error code, all under ttft.Error.

Every error that comes from the C library carries its code (the negative
TTFT_E* value), the symbolic name (ttft_err_name) and the English text
(ttft_strerror). Classes also derive from the matching built-in exception,
so `except ValueError` catches an invalid argument the C side rejected.

A leaf: it imports nothing of the package, so any module may raise these
(_lib raises LibraryNotFoundError while loading; _lib.from_code builds the
exception of a C return code with for_code below).
"""


class Error(Exception):
    """Base class of every libttft error.

    Attributes: code (negative TTFT_E* value, or None for errors that do not
    come from the C library), name ("TTFT_ESTALE") and strerror (the C text).
    """

    code = None
    name = None
    strerror = None

    def __init__(self, message, code=None, name=None, strerror=None):
        super().__init__(message)
        if code is not None:
            self.code = code
        if name is not None:
            self.name = name
        if strerror is not None:
            self.strerror = strerror


class InvalidArgumentError(Error, ValueError):
    """TTFT_EINVAL"""


class StaleHandleError(Error):
    """TTFT_ESTALE: the stream already ended (or the handle is unknown)."""


class FullError(Error):
    """TTFT_EFULL: no free sequence slot or class slot."""


class OutOfMemoryError(Error, MemoryError):
    """TTFT_ENOMEM"""


class RangeError(Error, ValueError):
    """TTFT_ERANGE"""


class CorruptError(Error, ValueError):
    """TTFT_ECORRUPT: malformed, truncated or corrupted encoding."""


class ExistsError(Error, ValueError):
    """TTFT_EEXIST: a class with that name already exists."""


class IoError(Error, OSError):
    """TTFT_EIO: socket or I/O error (HTTP endpoint)."""


class NotSupportedError(Error, NotImplementedError):
    """TTFT_ENOTSUP: the library was built without this feature."""


class ClosedError(Error):
    """The Registry or Snapshot was closed; its C object is gone."""


class ClockError(Error, ValueError):
    """TTFT_ECLOCK: a begin's t_ns is a wall-clock time (time.time_ns())
    where time.monotonic_ns()'s clock is expected."""


class LibraryNotFoundError(Error, OSError):
    """libttft could not be loaded; the message lists every place tried."""


_BY_NAME = {  # ttft_err_name -> class
    "TTFT_EINVAL": InvalidArgumentError,
    "TTFT_ESTALE": StaleHandleError,
    "TTFT_EFULL": FullError,
    "TTFT_ENOMEM": OutOfMemoryError,
    "TTFT_ERANGE": RangeError,
    "TTFT_ECORRUPT": CorruptError,
    "TTFT_EEXIST": ExistsError,
    "TTFT_EIO": IoError,
    "TTFT_ENOTSUP": NotSupportedError,
    "TTFT_ECLOCK": ClockError,
}


def for_code(code, what, name, text, detail=None, kind=None):
    """The exception for C return code `code` (negative) raised by `what`,
    of the class of `kind` (a TTFT_E* name; default name, the library's
    ttft_err_name); text is the C library's strerror;
    detail, when given, is said after it (what the library said about this
    failure, e.g. "127.0.0.1:9464: bind: Address already in use")."""
    cls = _BY_NAME.get(kind or name, Error)
    msg = "%s: %s (%s)" % (what, text, name)
    if detail:
        msg += ": " + detail
    return cls(msg, code=code, name=name, strerror=text)
