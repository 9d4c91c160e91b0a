"""Exceptions: one class per C error code, all under ttft.Error.

Every error that comes from the C library carries its code (the negative
TTFT_E* value), the symbolic name (ttft_err_name) and the English text
(ttft_strerror). Classes also derive from the matching built-in exception,
so `except ValueError` catches an invalid argument the C side rejected.
"""

from . import _lib


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


class LibraryNotFoundError(Error, OSError):
    """libttft could not be loaded; the message lists every place tried."""


_BY_CODE = {
    _lib.TTFT_EINVAL: InvalidArgumentError,
    _lib.TTFT_ESTALE: StaleHandleError,
    _lib.TTFT_EFULL: FullError,
    _lib.TTFT_ENOMEM: OutOfMemoryError,
    _lib.TTFT_ERANGE: RangeError,
    _lib.TTFT_ECORRUPT: CorruptError,
    _lib.TTFT_EEXIST: ExistsError,
    _lib.TTFT_EIO: IoError,
    _lib.TTFT_ENOTSUP: NotSupportedError,
}


def from_code(code, what):
    """The exception for C return code `code` (negative) raised by `what`.

    The text comes from the loaded library's ttft_strerror/ttft_err_name."""
    lib = _lib.load()
    text = lib.ttft_strerror(code).decode("utf-8", "replace")
    name = lib.ttft_err_name(code).decode("ascii", "replace")
    cls = _BY_CODE.get(code, Error)
    return cls("%s: %s (%s)" % (what, text, name), code=code, name=name, strerror=text)
