"""The exceptions of shoal. Each derives from :class:`shoal.Error` and, where one fits,
from the matching built-in exception, so ``except FileNotFoundError`` or
``except TimeoutError`` work as expected."""

__all__ = [
    "Error",
    "NotFound",
    "AlreadyExists",
    "StoreFull",
    "NoSpace",
    "Corrupt",
    "NotAStore",
    "VersionMismatch",
    "PermissionDenied",
    "InvalidArgument",
    "Timeout",
    "TooManyUsers",
    "IOError",
    "DecodeError",
    "Closed",
    "StaleUidError",
    "ReadOnly",
]


class Error(Exception):
    """Base class of every error raised by the shoal engine."""


class NotFound(Error, FileNotFoundError):
    """The store file or the named map does not exist (or the map was dropped)."""


class AlreadyExists(Error, FileExistsError):
    """The store file already exists (``open(..., exclusive=True)``)."""


class StoreFull(Error):
    """The store reached its ``max_size``, or holds its maximum number of maps."""


class NoSpace(Error, OSError):
    """The filesystem has no room left (for example a full /dev/shm); errno ENOSPC."""


class Corrupt(Error):
    """The file is not a consistent shoal store; the message says what and where."""


class NotAStore(Error):
    """The file is not a shoal store at all (wrong magic)."""


class VersionMismatch(Error):
    """The file was written by a newer (or unknown) format version."""


class PermissionDenied(Error, PermissionError):
    """The operating system refused access to the store file."""


class InvalidArgument(Error, ValueError):
    """A key, value or map name is too large, or an option is out of range."""


class Timeout(Error, TimeoutError):
    """A lock wait did not end before ``lock_timeout``: the lock's holder is alive but
    stuck (for example stopped with SIGSTOP). Locks of dead processes never time out:
    they are recovered within milliseconds."""


class TooManyUsers(Error):
    """More processes or threads use the store at once than it has slots for."""


class IOError(Error, OSError):  # noqa: A001 - shoal.IOError, not the builtin alias
    """Any other I/O error on the store file; ``errno`` is set."""


class DecodeError(Error, ValueError):
    """Stored bytes are not valid for the map's codec (for example 5 bytes read with the
    "int" codec, or invalid UTF-8 with "str"): the map was written with other codecs."""


class Closed(Error, ValueError):
    """The store (or the store of this map) was closed."""


class StaleUidError(Error, KeyError):
    """A by-UID call (``Map.get_by_uid``, ...) on a UID whose key was removed: the UID
    names nothing any more, even once its table entry is reused by a later key."""


class QueueFull(Error):
    """A push would take a queue past its depth limit (the elements stay held)."""


class ReadOnly(Error, PermissionError):
    """The store was opened with ``read_only=True`` and the call needs to write (or to
    recover what a writer that died left half done, which only a process with write
    access can do); errno EROFS."""


# Shown (and pickled) as shoal.X, where they are re-exported.
for _cls in (
    Error,
    NotFound,
    AlreadyExists,
    StoreFull,
    NoSpace,
    Corrupt,
    NotAStore,
    VersionMismatch,
    PermissionDenied,
    InvalidArgument,
    Timeout,
    TooManyUsers,
    IOError,
    DecodeError,
    Closed,
    StaleUidError,
    ReadOnly,
):
    _cls.__module__ = "shoal"
del _cls
