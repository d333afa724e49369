"""shoal: a shared dict for every process.

Named hash maps in one memory-mapped file (by default in /dev/shm) that any number of
processes open at once and read and write directly, with no server::

    import shoal

    with shoal.open("demo") as store:          # /dev/shm/demo.shoal, created if absent
        users = store.map("users", key="str", value="json")
        users["alice"] = {"role": "admin"}
        users.setdefault("bob", {"role": "guest"})   # atomic across processes
        for name, info in users.items():
            ...

A Map is a collections.abc.MutableMapping with dict semantics. Keys and values go
through codecs: "bytes" (default), "str", "int", "float", "json", and "pickle"
(opt-in; unsafe when untrusted processes can write the store). Stores and maps pickle to
(path, name, codecs), so they can be passed to multiprocessing children under fork,
spawn and forkserver.
"""

import collections.abc as _abc

from ._errors import (
    AlreadyExists,
    Closed,
    Corrupt,
    DecodeError,
    Error,
    InvalidArgument,
    IOError,
    NoSpace,
    NotAStore,
    NotFound,
    PermissionDenied,
    QueueFull,
    ReadOnly,
    StaleUidError,
    StoreFull,
    Timeout,
    TooManyUsers,
    VersionMismatch,
)
from ._absent import ABSENT
from ._shoal import (
    CODECS,
    FORMAT_VERSION,
    MAX_KEY_LEN,
    MAX_VALUE_LEN,
    Batch,
    CheckReport,
    Element,
    Log,
    LogFollow,
    LogReader,
    LogRecord,
    Map,
    MapIterator,
    QueueIter,
    QueueSet,
    Store,
    backup_idle,
    open,
    remove,
    repair,
    resolve_path,
)
from ._views import ItemsView, KeysView, ValuesView
from ._fixed import FixedMap
from ._txn import Transaction, Watch
from ._ordered import (
    OrderedCursor,
    OrderedMap,
    OrderedNestedTransaction,
    OrderedNestedWrite,
    OrderedSnapshot,
    OrderedTransaction,
    OrderedWrite,
    OrderedWriteView,
)
from ._log import LogHandler, LogLevel

__version__ = "0.1.0"

_abc.MutableMapping.register(Map)

__all__ = [
    "backup_idle",
    "open",
    "remove",
    "repair",
    "resolve_path",
    "Store",
    "Map",
    "MapIterator",
    "FixedMap",
    "OrderedCursor",
    "OrderedMap",
    "OrderedNestedTransaction",
    "OrderedNestedWrite",
    "OrderedSnapshot",
    "OrderedTransaction",
    "OrderedWrite",
    "OrderedWriteView",
    "Transaction",
    "Watch",
    "QueueSet",
    "QueueIter",
    "Element",
    "Log",
    "LogReader",
    "LogRecord",
    "LogFollow",
    "LogHandler",
    "LogLevel",
    "CheckReport",
    "Batch",
    "KeysView",
    "ValuesView",
    "ItemsView",
    "ABSENT",
    "CODECS",
    "FORMAT_VERSION",
    "MAX_KEY_LEN",
    "MAX_VALUE_LEN",
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
    "QueueFull",
]


def _reopen_store(path, lock_timeout=5.0):
    """Unpickling helper: opens an existing store again (in any process)."""
    return open(path, create=False, lock_timeout=lock_timeout)


def _reopen_map(path, name, key, value, lock_timeout=5.0):
    """Unpickling helper: opens an existing store's map again (in any process)."""
    return _reopen_store(path, lock_timeout).map(name, key=key, value=value)


def _reopen_fixed(path, name, key_size, value_size, lock_timeout=5.0):
    """Unpickling helper: opens an existing store's fixed-size map again."""
    return _reopen_store(path, lock_timeout).fixed_map(name, key_size, value_size, create=False)


def _reopen_ordered(path, name, key, value, u64_keys=False, duplicates=False, lock_timeout=5.0):
    """Unpickling helper: opens an existing store's ordered map again."""
    return _reopen_store(path, lock_timeout).ordered_map(
        name, key=key, value=value, u64_keys=u64_keys, duplicates=duplicates, create=False
    )


def _reopen_log(path, name, lock_timeout=5.0):
    """Unpickling helper: opens an existing store's log again (in any process)."""
    return _reopen_store(path, lock_timeout).log(name)
