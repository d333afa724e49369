"""Type stubs of shoal: a shared dict for every process (see the module docstring)."""

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from collections.abc import ItemsView as _ItemsView
from collections.abc import KeysView as _KeysView
from collections.abc import ValuesView as _ValuesView
from typing import Any, Final, Generic, Literal, TypeVar, final, overload

from typing_extensions import Self, deprecated

import enum
import logging

__version__: str
__all__ = [
    "open",
    "backup_idle",
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

_K = TypeVar("_K")
_V = TypeVar("_V")
_T = TypeVar("_T")

_Codec = Literal["bytes", "str", "int", "float", "json", "pickle", "uint"]

#: The codec names: "bytes", "str", "int", "float", "json", "pickle", "uint".
CODECS: Final[list[str]]
#: The file format version this library writes.
FORMAT_VERSION: Final[int]
#: The largest key, in bytes (after encoding).
MAX_KEY_LEN: Final[int]
#: The largest value, in bytes (after encoding).
MAX_VALUE_LEN: Final[int]

from ._absent import ABSENT as ABSENT
from ._absent import _AbsentType as _AbsentType

#: "No value": compare_and_swap's `expected` (key must be absent) and `new` (remove the
#: key); what modify() passes for an absent key, and what its function returns to remove.


# ---- errors -------------------------------------------------------------------------

class Error(Exception):
    """Base class of every error raised by the shoal engine."""

class NotFound(Error, FileNotFoundError):
    """The store file or the named map does not exist (or the map was dropped)."""

class AlreadyExists(Error, FileExistsError):
    """The store file already exists (open(..., exclusive=True))."""

class StoreFull(Error):
    """The store reached its max_size, or holds its maximum number of maps."""

class NoSpace(Error, OSError):
    """The filesystem has no room left (errno ENOSPC)."""

class Corrupt(Error):
    """The file is not a consistent shoal store."""

class NotAStore(Error):
    """The file is not a shoal store at all."""

class VersionMismatch(Error):
    """The file was written by a newer format version, or has an older one that is
    upgraded only when no other process has it open."""

class PermissionDenied(Error, PermissionError):
    """The operating system refused access to the store file."""

class InvalidArgument(Error, ValueError):
    """A key, value or map name is too large, or an option is out of range."""

class Timeout(Error, TimeoutError):
    """A lock wait outlasted lock_timeout (the holder is alive but stuck)."""

class TooManyUsers(Error):
    """More processes or threads use the store than it has slots for."""

class IOError(Error, OSError):
    """Any other I/O error on the store file."""

class DecodeError(Error, ValueError):
    """Stored bytes are not valid for the map's codec."""

class Closed(Error, ValueError):
    """The store (or this map's store) was closed."""

class StaleUidError(Error, KeyError):
    """A by-UID call on a UID whose key was removed."""

class ReadOnly(Error, PermissionError):
    """A write (or a recovery) through a store opened with read_only=True."""

class QueueFull(Error):
    """A push would take a queue past its depth limit (the elements stay held)."""

# ---- module functions ---------------------------------------------------------------

def open(
    path: str | os.PathLike[str],
    *,
    create: bool = True,
    exclusive: bool = False,
    max_size: int | None = None,
    initial_size: int | None = None,
    lock_timeout: float | None = None,
    max_processes: int | None = None,
    max_threads: int | None = None,
    max_maps: int | None = None,
    chunk_size: int | None = None,
    mode: int | None = None,
    checksums: bool | None = None,
    sync_writes: bool = False,
    pretouch: bool = True,
    read_only: bool = False,
) -> Store:
    """Opens (by default creating) the store at `path`; a bare name means
    /dev/shm/NAME.shoal. create=False: a missing store raises NotFound; exclusive=True:
    an existing one raises AlreadyExists. Size and table options apply at creation only;
    checksums (CRC32C per record; default: on for disk files, off on tmpfs) is fixed at
    creation; lock_timeout (seconds, default 5) and sync_writes (flush after every write)
    apply to this process. pretouch (default True; tmpfs only): a background thread of
    this process faults in the pages of space the store takes before the writers reach
    them; False keeps the process free of that thread. read_only=True opens an existing
    store for reading only (no write access to the file needed); writes raise ReadOnly."""

def backup_idle(path: str | os.PathLike[str], file: str | os.PathLike[str]) -> int:
    """Copies a store that no process has open into the new file `file` (a consistent
    copy that passes check(); restore by copying it back); returns the bytes copied.
    Raises TooManyUsers while the store is open anywhere (then use Store.backup, the hot
    backup), AlreadyExists if `file` exists."""

def remove(path: str | os.PathLike[str], *, missing_ok: bool = False) -> None:
    """Deletes the store file; processes that have it open keep their mapping."""

def repair(path: str | os.PathLike[str]) -> tuple[Store, dict[str, list[Any]]]:
    """Opens and repairs a store that open() refused after an OS crash, or whose reads
    report corruption (every record's checksum is verified; a truncated file is salvaged
    into a new store, the original kept as PATH.truncated); returns the store and a
    report: {"found": [...], "dropped": [(map, slot and why), ...], "rebuilt": [...]}.
    Raises TooManyUsers while the store is open elsewhere (this process too)."""

def resolve_path(path: str | os.PathLike[str]) -> str:
    """The file a path or bare name refers to (bare name: /dev/shm/NAME.shoal)."""

# ---- Store --------------------------------------------------------------------------

@final
class Batch:
    """A batch of writes to one store (Store.batch()); enter it once, on one thread."""

    def __enter__(self) -> Self: ...
    def __exit__(self, *args: object) -> Literal[False]: ...

@final
class CheckReport:
    """What Store.check() found."""

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
    @property
    def problems(self) -> list[str]:
        """Every violation found, each saying what and where."""
    @property
    def maps(self) -> int:
        """Maps checked."""
    @property
    def entries(self) -> int:
        """Entries checked, over all maps."""
    @property
    def segments(self) -> int:
        """Index segments checked."""
    @property
    def chunks(self) -> int:
        """Chunks walked."""

@final
class Store:
    """An open shoal store: one file holding named maps shared by every process that
    opens it. A context manager; pickles to its path."""

    @property
    def path(self) -> str:
        """The store file's path."""
    @property
    def closed(self) -> bool:
        """Whether close() was called."""
    @property
    def lock_timeout(self) -> float:
        """Seconds a call waits for a lock held by a live process."""
    @overload
    def map(
        self, name: str, *, key: Literal["bytes"], value: Literal["bytes"], create: bool = True, uids: bool = False
    ) -> Map[bytes, bytes]: ...
    @overload
    def map(
        self, name: str, *, key: Literal["bytes"], value: Literal["str"], create: bool = True, uids: bool = False
    ) -> Map[bytes, str]: ...
    @overload
    def map(
        self, name: str, *, key: Literal["bytes"], value: Literal["int"], create: bool = True, uids: bool = False
    ) -> Map[bytes, int]: ...
    @overload
    def map(
        self, name: str, *, key: Literal["bytes"], value: Literal["float"], create: bool = True, uids: bool = False
    ) -> Map[bytes, float]: ...
    @overload
    def map(
        self, name: str, *, key: Literal["str"], value: Literal["bytes"], create: bool = True, uids: bool = False
    ) -> Map[str, bytes]: ...
    @overload
    def map(self, name: str, *, key: Literal["str"], value: Literal["str"], create: bool = True, uids: bool = False) -> Map[str, str]: ...
    @overload
    def map(self, name: str, *, key: Literal["str"], value: Literal["int"], create: bool = True, uids: bool = False) -> Map[str, int]: ...
    @overload
    def map(
        self, name: str, *, key: Literal["str"], value: Literal["float"], create: bool = True, uids: bool = False
    ) -> Map[str, float]: ...
    @overload
    def map(
        self, name: str, *, key: Literal["int"], value: Literal["bytes"], create: bool = True, uids: bool = False
    ) -> Map[int, bytes]: ...
    @overload
    def map(self, name: str, *, key: Literal["int"], value: Literal["str"], create: bool = True, uids: bool = False) -> Map[int, str]: ...
    @overload
    def map(self, name: str, *, key: Literal["int"], value: Literal["int"], create: bool = True, uids: bool = False) -> Map[int, int]: ...
    @overload
    def map(
        self, name: str, *, key: Literal["int"], value: Literal["float"], create: bool = True, uids: bool = False
    ) -> Map[int, float]: ...
    @overload
    def map(
        self, name: str, *, key: _Codec | None = None, value: _Codec | None = None, create: bool = True, uids: bool = False
    ) -> Map[Any, Any]: ...
    def queues(
        self,
        name: str,
        element_size: int | None = None,
        elements: int | None = None,
        *,
        queues: Iterable[str] = ...,
        limits: Mapping[str, int] | None = None,
        initial: str = "free",
        redeliver: bool = False,
    ) -> QueueSet:
        """Opens the queue set `name`, creating it when element_size and elements are
        given (queues besides `free`, their depth limits, the initial queue, and whether a
        dead holder's elements go back to the queue they came from)."""
    def log(
        self,
        name: str,
        slots: int | None = None,
        max_record: int | None = None,
        *,
        policy: Literal["overwrite", "wait", "drop"] = "overwrite",
        readers: int = 8,
    ) -> Log:
        """Opens the shared log `name`, creating it when slots and max_record are given:
        a ring of `slots` records of up to `max_record` bytes, its full policy, room for
        `readers` named readers. Without sizes it opens an existing log (NotFound)."""
    def logs(self) -> list[str]:
        """Names of the logs in the store."""
    def transaction(self) -> Transaction:
        """A new multi-key transaction on this store's hash maps (FixedMap and Map)."""
    def snapshot_get(self, items: Iterable[tuple[FixedMap | Map, Any]]) -> list[Any]:
        """The values of (map, key) items, all as of one instant (None: absent)."""
    def watch(self, func: Callable[[Watch], _T]) -> _T:
        """The optimistic transaction: func's reads are recorded, its writes committed
        only if nothing it read changed; retried until the lock timeout."""
    def _txn_commit(
        self, conds: list[Any], then_ops: list[Any], else_ops: list[Any]
    ) -> tuple[bool, list[tuple[bool, Any]]]: ...
    def _txn_read(self, map: FixedMap | Map, key: Any) -> tuple[bytes | None, Any]: ...
    def fixed_map(
        self,
        name: str,
        key_size: int,
        value_size: int,
        create: bool = True,
        *,
        key_type: str | None = None,
        value_type: str | None = None,
    ) -> FixedMap:
        """Opens (or creates) a fixed-size map of bytes keys and values of exactly
        key_size and value_size bytes; other sizes raise InvalidArgument (a ValueError).
        key_type and value_type name the types a new map records for other languages."""
    def map_kind(self, name: str) -> tuple[str, int | None, int | None] | None:
        """("variable", None, None), ("uids", None, None), ("fixed", key_size,
        value_size), ("ordered", None, None), or None if there is no such map."""
    @overload
    def ordered_map(
        self,
        name: str,
        *,
        key: Literal["bytes"] | None = None,
        value: Literal["bytes"] = "bytes",
        u64_keys: Literal[False] = False,
        duplicates: bool = False,
        create: bool = True,
    ) -> OrderedMap[bytes, bytes]: ...
    @overload
    def ordered_map(
        self,
        name: str,
        *,
        key: Literal["str"],
        value: Literal["bytes"] = "bytes",
        u64_keys: Literal[False] = False,
        duplicates: bool = False,
        create: bool = True,
    ) -> OrderedMap[str, bytes]: ...
    @overload
    def ordered_map(
        self,
        name: str,
        *,
        key: Literal["str"],
        value: Literal["str"],
        u64_keys: Literal[False] = False,
        duplicates: bool = False,
        create: bool = True,
    ) -> OrderedMap[str, str]: ...
    @overload
    def ordered_map(
        self,
        name: str,
        *,
        key: Literal["str"],
        value: Literal["int", "uint"],
        u64_keys: Literal[False] = False,
        duplicates: bool = False,
        create: bool = True,
    ) -> OrderedMap[str, int]: ...
    @overload
    def ordered_map(
        self,
        name: str,
        *,
        key: Literal["uint"] | None = None,
        value: Literal["bytes"] = "bytes",
        u64_keys: Literal[True],
        duplicates: bool = False,
        create: bool = True,
    ) -> OrderedMap[int, bytes]: ...
    @overload
    def ordered_map(
        self,
        name: str,
        *,
        key: str | None = None,
        value: str = "bytes",
        u64_keys: bool = False,
        duplicates: bool = False,
        create: bool = True,
    ) -> OrderedMap[Any, Any]:
        """Opens the ordered map `name`, creating it unless create=False. Keys sorted
        bytewise (key: "bytes" or "str"), or as unsigned 64-bit integers with
        u64_keys=True (key: "uint"); duplicates=True makes a multimap. An existing map
        must be opened with the options it was created with. value: any codec. Ordered
        maps record no codecs: open a map with the codecs it was written with."""
    def ordered_marker(self, i: int) -> int:
        """The store's marker i (0 to 13), set by an ordered transaction's commit."""
    def ordered_maps(self) -> list[str]:
        """Names of the ordered maps in the store (maps() lists the hash maps)."""
    def ordered_write(self, maps: Iterable[OrderedMap[Any, Any]]) -> OrderedTransaction:
        """A write transaction over several ordered maps of this store, committed at the
        end of a with block (aborted if it raises)."""
    def ordered_snapshot(self, maps: Iterable[OrderedMap[Any, Any]]) -> list[OrderedSnapshot[Any, Any]]:
        """Snapshots of several ordered maps, all as of one commit."""
    def maps(self) -> list[str]:
        """Names of the maps in the store."""
    def drop_map(self, name: str) -> bool:
        """Drops the map and its contents in every process; returns whether it existed."""
    def check(self) -> CheckReport:
        """Verifies every invariant of the store file (run it while no write is in flight)."""
    def flush(self) -> None:
        """Writes everything through to stable storage (msync + fsync)."""
    def batch(self) -> Batch:
        """A context manager: with sync_writes, this thread's writes to the store inside
        the block are flushed once, at its end, instead of once each."""
    def backup(self, file: str | os.PathLike[str]) -> int:
        """Writes a copy of the whole store as of one instant into the new file `file`
        while readers and writers in every process keep going (a hot backup); returns the
        bytes the copy spans. The copy passes check(); restore by copying it back.
        Raises AlreadyExists if `file` exists, Timeout if the backup could not start."""
    def compact(self) -> int:
        """Reclaims dead record space now, then returns the pages of free chunks to the
        filesystem (the memory of a store in /dev/shm); returns the number of chunks freed."""
    def stats(self) -> dict[str, int]:
        """Figures about the whole store."""
    def close(self) -> None:
        """Closes this handle and its maps (the file stays; see shoal.remove)."""
    def __enter__(self) -> Self: ...
    def __exit__(self, *args: object) -> Literal[False]: ...

# ---- Map ----------------------------------------------------------------------------

class KeysView(_KeysView[_K], Generic[_K]):
    """A live, set-like view of a Map's keys."""

class ValuesView(_ValuesView[_V], Generic[_V]):
    """A live view of a Map's values."""

class ItemsView(_ItemsView[_K, _V], Generic[_K, _V]):
    """A live, set-like view of a Map's (key, value) pairs."""

@final
class MapIterator(Iterator[_T], Generic[_T]):
    """An iterator over a Map (keys, values or items), fetched in batches."""

    def __iter__(self) -> Self: ...
    def __next__(self) -> _T: ...

@final
class Map(MutableMapping[_K, _V], Generic[_K, _V]):
    """A named map of a shoal store with dict semantics, shared by every process.
    (At run time Map is registered as a collections.abc.MutableMapping.)
    Single-key operations, setdefault, pop, popitem, add, compare_and_swap and modify
    are atomic across processes; iteration is weakly consistent. Pickles to
    (path, name, codecs). Single-key calls keep the GIL unless they find a lock or a
    bucket busy beyond a short spin (held by another thread or process), or write more
    than 4 KiB; batch calls and iteration release it."""

    @property
    def name(self) -> str:
        """The map's name."""
    @property
    def key_codec(self) -> str:
        """The key codec's name."""
    @property
    def value_codec(self) -> str:
        """The value codec's name."""
    @property
    def key_type(self) -> str | None:
        """The key type the map recorded when created ("utf8", "i64", ...), or None."""
    @property
    def value_type(self) -> str | None:
        """The value type the map recorded when created, or None."""
    @property
    def store(self) -> Store:
        """The Store this map was opened from."""
    def __getitem__(self, key: _K, /) -> _V: ...
    def __setitem__(self, key: _K, value: _V, /) -> None: ...
    def __delitem__(self, key: _K, /) -> None: ...
    def __contains__(self, key: object, /) -> bool: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> MapIterator[_K]: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def keys(self) -> KeysView[_K]:
        """A live, set-like view of the keys."""
    def values(self) -> ValuesView[_V]:
        """A live view of the values."""
    def items(self) -> ItemsView[_K, _V]:
        """A live, set-like view of the (key, value) pairs."""
    @overload
    def get(self, key: _K, default: None = None) -> _V | None: ...
    @overload
    def get(self, key: _K, default: _V | _T) -> _V | _T: ...
    @overload
    def pop(self, key: _K) -> _V: ...
    @overload
    def pop(self, key: _K, default: _V | _T) -> _V | _T: ...
    def popitem(self) -> tuple[_K, _V]:
        """Removes and returns some item, atomically; KeyError if empty."""
    def setdefault(self, key: _K, default: _V = ...) -> _V:  # type: ignore[override]
        """The value of key, inserting default first if absent (atomically)."""
    # update(): inherited from MutableMapping (dict's signature).
    def clear(self) -> None:
        """Removes every entry."""
    def put_if_absent(self, key: _K, value: _V) -> bool:
        """Sets key only if absent; returns whether it did."""
    def put_if_present(self, key: _K, value: _V) -> bool:
        """Sets key only if present; returns whether it did."""
    @deprecated("renamed put_if_absent")
    def insert(self, key: _K, value: _V) -> bool:
        """The former name of put_if_absent."""
    @deprecated("renamed put_if_present")
    def replace(self, key: _K, value: _V) -> bool:
        """The former name of put_if_present."""
    def swap(self, key: _K, value: _V) -> _V | None:
        """Sets key and returns its previous value (None if absent), atomically."""
    def add(self, key: _K, delta: int = 1) -> int:
        """Atomically adds delta to an "int"-codec value (absent = 0); returns the new
        value. Wraps around at 64 bits."""
    @deprecated("renamed add")
    def incr(self, key: _K, delta: int = 1) -> int:
        """The former name of add."""
    def compare_and_swap(self, key: _K, expected: _V | _AbsentType, new: _V | _AbsentType) -> bool:
        """If the value equals expected (ABSENT: key absent), sets it to new (ABSENT:
        remove); returns whether it did. Atomic."""
    def modify(self, key: _K, func: Callable[[_V | _AbsentType], _V | _AbsentType], /) -> _V | _AbsentType:
        """Atomic read-modify-write: stores func(current) (current is ABSENT if the key is
        absent; returning ABSENT removes it) and returns it. func may run several times."""
    @property
    def uids(self) -> bool:
        """Whether the map keeps a stable UID per key (Store.map(..., uids=True))."""
    def uid(self, key: _K) -> int | None:
        """The stable 64-bit UID of key, or None if absent (InvalidArgument without UIDs)."""
    def version(self, key: _K) -> int | None:
        """The version of key's UID entry (every change moves it), or None if absent."""
    def put_uid(self, key: _K, value: _V) -> int:
        """m[key] = value, returning the key's UID."""
    def get_by_uid(self, uid: int) -> _V:
        """The value of the key uid names; StaleUidError if the key was removed."""
    def key_by_uid(self, uid: int) -> _K:
        """The key uid names; StaleUidError if it was removed."""
    def put_by_uid(self, uid: int, value: _V) -> None:
        """Replaces the value of the key uid names (the UID stays)."""
    def remove_by_uid(self, uid: int) -> _V:
        """Removes the key uid names and returns its value; the UID becomes stale."""
    def add_by_uid(self, uid: int, delta: int = 1) -> int:
        """add on the key uid names ("int" value codec); returns the new value."""
    def update_by_uid(self, uid: int, func: Callable[[_V], _V | _AbsentType], /) -> _V | _AbsentType:
        """modify on the key uid names: stores func(current) (ABSENT removes the key) and
        returns it. func may run several times."""
    @overload
    def get_many(self, keys: Iterable[_K]) -> list[_V | None]: ...
    @overload
    def get_many(self, keys: Iterable[_K], default: _T) -> list[_V | _T]: ...
    def put_many(self, items: Mapping[_K, _V] | Iterable[tuple[_K, _V]]) -> None:
        """Sets many pairs with one GIL release; each put is atomic, the batch is not."""
    def remove_many(self, keys: Iterable[_K]) -> int:
        """Removes many keys; returns how many were present."""
    def to_dict(self) -> dict[_K, _V]:
        """A copy of the whole map as a plain dict."""
    def copy(self) -> dict[_K, _V]:
        """Same as to_dict()."""
    def stats(self) -> dict[str, int]:
        """Figures about this map and its store."""

# ---- FixedMap -----------------------------------------------------------------------

class FixedMap(MutableMapping[bytes, bytes]):
    """A fixed-size map of a shoal store (Store.fixed_map): bytes keys of exactly
    key_size bytes, bytes values of exactly value_size bytes; other lengths raise
    InvalidArgument (a ValueError). Dict semantics, shared by every process.
    Single-key calls keep the GIL unless they find the segment lock or a bucket busy
    beyond a short spin (held by another thread or process); get_many, clear and
    iteration release it."""

    def __init__(self, native: Any, store: Store) -> None: ...
    @property
    def name(self) -> str:
        """The map's name."""
    @property
    def key_size(self) -> int:
        """Bytes per key."""
    @property
    def value_size(self) -> int:
        """Bytes per value."""
    @property
    def key_type(self) -> str | None:
        """The key type the map recorded when created, or None."""
    @property
    def value_type(self) -> str | None:
        """The value type the map recorded when created, or None."""
    @property
    def store(self) -> Store:
        """The Store this map was opened from."""
    def __getitem__(self, key: bytes) -> bytes: ...
    def __setitem__(self, key: bytes, value: bytes) -> None: ...
    def __delitem__(self, key: bytes) -> None: ...
    def __contains__(self, key: object) -> bool: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[bytes]: ...
    def __eq__(self, other: object) -> bool: ...
    def keys(self) -> KeysView[bytes]:
        """A live, set-like view of the keys."""
    def values(self) -> ValuesView[bytes]:
        """A live view of the values."""
    def items(self) -> ItemsView[bytes, bytes]:
        """A live, set-like view of the (key, value) pairs."""
    @overload
    def get(self, key: bytes, default: None = None) -> bytes | None: ...
    @overload
    def get(self, key: bytes, default: bytes | _T) -> bytes | _T: ...
    @overload
    def pop(self, key: bytes) -> bytes: ...
    @overload
    def pop(self, key: bytes, default: bytes | _T) -> bytes | _T: ...
    def popitem(self) -> tuple[bytes, bytes]:
        """Removes and returns some (key, value) pair."""
    def setdefault(self, key: bytes, default: bytes) -> bytes:  # type: ignore[override]
        """Atomic insert-if-absent; returns the value now in the map."""
    def put(self, key: bytes, value: bytes) -> bool:
        """Inserts or replaces; True if the key was present."""
    def put_if_absent(self, key: bytes, value: bytes) -> bool:
        """Inserts only if absent; returns whether it did."""
    def put_if_present(self, key: bytes, value: bytes) -> bool:
        """Replaces only if present; returns whether it did."""
    @deprecated("renamed put_if_absent")
    def insert(self, key: bytes, value: bytes) -> bool:
        """The former name of put_if_absent."""
    @deprecated("renamed put_if_present")
    def replace(self, key: bytes, value: bytes) -> bool:
        """The former name of put_if_present."""
    def remove(self, key: bytes) -> bool:
        """Removes the key; returns whether it was present."""
    def swap(self, key: bytes, value: bytes) -> bytes | None:
        """Inserts or replaces, returning the previous value (None if absent)."""
    def put_many(
        self, items: Mapping[bytes, bytes] | Iterable[tuple[bytes, bytes]]
    ) -> None:
        """Sets many pairs, the GIL released once; each put atomic on its own."""
    def remove_many(self, keys: Iterable[bytes]) -> int:
        """Removes many keys; returns how many were present."""
    def compare_and_swap(
        self, key: bytes, expected: bytes | _AbsentType, new: bytes | _AbsentType
    ) -> bool:
        """Atomic compare-and-swap; ABSENT means "absent" / "remove"."""
    def add(self, key: bytes, delta: int = 1) -> int:
        """Atomically adds delta to the 8-byte little-endian signed value; returns it."""
    @overload
    def get_many(self, keys: Iterable[bytes]) -> list[bytes | None]: ...
    @overload
    def get_many(self, keys: Iterable[bytes], default: _T) -> list[bytes | _T]: ...
    def modify(
        self, key: bytes, func: Callable[[bytes | _AbsentType], bytes | _AbsentType], /
    ) -> bytes | _AbsentType:
        """Atomic read-modify-write: stores func(current) (current is ABSENT if the key is
        absent; returning ABSENT removes it) and returns it. func may run several times."""
    def clear(self) -> None:
        """Removes every entry."""
    def stats(self) -> dict[str, int]:
        """Figures about the map."""
    def to_dict(self) -> dict[bytes, bytes]:
        """A copy of the whole map as a plain dict."""

@final
class Element:
    """An element of a queue set held by this process; `data` is a writable memoryview
    of its bytes in place, and the element is a buffer itself. `with` gives it back where
    it came from (or to `push_to`'s queue) at the end of the block. A push raises
    BufferError while a slice of its bytes or an object made over them is alive."""
    @property
    def index(self) -> int: ...
    @property
    def from_queue(self) -> int: ...
    @property
    def redelivered(self) -> bool: ...
    @property
    def data(self) -> memoryview: ...
    def __len__(self) -> int: ...
    def push_to(self, queue: int) -> None: ...
    def release(self) -> None: ...
    def keep(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *args: object) -> bool: ...

@final
class QueueIter(Iterator[Element]):
    """Elements pulled from one queue, waiting for each (QueueSet.iter)."""
    def __iter__(self) -> Self: ...
    def __next__(self) -> Element: ...

@final
class QueueSet:
    """Named queues passing fixed-size elements between processes by reference
    (Store.queues)."""
    @property
    def name(self) -> str: ...
    @property
    def element_size(self) -> int: ...
    @property
    def elements(self) -> int: ...
    @property
    def queue_names(self) -> list[str]: ...
    def queue(self, name: str) -> int: ...
    def pull(self, queue: int) -> Element | None: ...
    def pull_wait(self, queue: int, timeout: float | None = None) -> Element | None: ...
    def pull_any(self, queues: list[int], timeout: float | None = None) -> Element | None: ...
    def pull_many(self, queue: int, n: int) -> list[Element]: ...
    def push(self, queue: int, element: Element) -> None: ...
    def push_many(self, queue: int, elements: list[Element]) -> None: ...
    def move(self, frm: int, to: int, n: int) -> int: ...
    def len(self, queue: int) -> int: ...
    def stats(self, queue: int) -> dict[str, Any]: ...
    def held(self) -> list[tuple[int, int]]: ...
    def reclaim(self) -> int: ...
    def iter(self, queue: int, timeout: float | None = None) -> QueueIter: ...

_Bytes = str | bytes

@final
class Log:
    """A shared log (Store.log): a ring of records every thread of every process may
    append to without a lock, drained in order by named readers. Pickles to (path, name)."""
    @property
    def name(self) -> str: ...
    @property
    def slots(self) -> int: ...
    @property
    def max_record(self) -> int: ...
    @property
    def policy(self) -> Literal["overwrite", "wait", "drop"]: ...
    def append(
        self,
        message: _Bytes,
        level: int = 6,
        fields: Mapping[_Bytes, _Bytes] | Iterable[tuple[_Bytes, _Bytes]] | None = None,
        timeout: float | None = None,
    ) -> int | None:
        """Appends a record; its sequence number, or None if the drop policy dropped it.
        A record larger than max_record raises InvalidArgument; the wait policy waits up
        to `timeout` seconds for room (GIL released), then raises Timeout."""
    def reader(self, name: str) -> LogReader:
        """The named reader (created if absent), whose cursor is kept in the store file."""
    def remove_reader(self, name: str) -> bool:
        """Forgets the named reader and its cursor; whether it existed."""
    def stats(self) -> dict[str, Any]:
        """appended, dropped, holes, and readers (name, position, missed, skipped)."""

@final
class LogRecord:
    """One record of a log, as a reader read it."""
    @property
    def seq(self) -> int: ...
    @property
    def time_ns(self) -> int: ...
    @property
    def time(self) -> float: ...
    @property
    def pid(self) -> int: ...
    @property
    def tid(self) -> int: ...
    @property
    def level(self) -> int: ...
    @property
    def message(self) -> bytes: ...
    @property
    def text(self) -> str: ...
    @property
    def fields(self) -> list[tuple[bytes, bytes]]: ...
    def field(self, key: _Bytes, default: Any = None) -> Any:
        """The value of the first field named `key`, or `default`."""

@final
class LogReader(Iterator[LogRecord]):
    """A named reader of a log: records in sequence order, each once, from a cursor kept
    in the store file. Iteration yields the records published so far; follow() waits."""
    @property
    def name(self) -> str: ...
    @property
    def position(self) -> int: ...
    @property
    def missed(self) -> int: ...
    @property
    def skipped(self) -> int: ...
    def read(self) -> LogRecord | None: ...
    def read_wait(self, timeout: float | None = None) -> LogRecord | None:
        """The next record, waiting up to `timeout` seconds (None: for ever), GIL released."""
    def read_many(self, max: int = 256) -> list[LogRecord]: ...
    def follow(self, timeout: float | None = None) -> LogFollow: ...
    def __iter__(self) -> Self: ...
    def __next__(self) -> LogRecord: ...

@final
class LogFollow(Iterator[LogRecord]):
    """Records of a reader as they come, waiting for each (LogReader.follow)."""
    def __iter__(self) -> Self: ...
    def __next__(self) -> LogRecord: ...

class LogLevel(enum.IntEnum):
    """The level numbers Shoal's bindings write: syslog severities, and TRACE."""

    EMERGENCY = 0
    ALERT = 1
    CRITICAL = 2
    ERROR = 3
    WARNING = 4
    NOTICE = 5
    INFO = 6
    DEBUG = 7
    TRACE = 8

class LogHandler(logging.Handler):
    """A logging.Handler appending each record to a shared log: level mapped by
    level_of, fields `target` (the logger's name) and the `extra` attributes, exceptions in the message."""

    log: Log
    timeout: float | None
    def __init__(self, log: Log, level: int | str = 0, *, timeout: float | None = None) -> None: ...
    @staticmethod
    def level_of(levelno: int) -> LogLevel: ...
    def fields_of(self, record: logging.LogRecord) -> list[tuple[bytes, bytes]]: ...
    def emit(self, record: logging.LogRecord) -> None: ...

class _TxnList:
    def get(self, m: FixedMap | Map, key: Any) -> Self: ...
    def put(self, m: FixedMap | Map, key: Any, value: Any) -> Self: ...
    def put_if_absent(self, m: FixedMap | Map, key: Any, value: Any) -> Self: ...
    def put_if_present(self, m: FixedMap | Map, key: Any, value: Any) -> Self: ...
    def remove(self, m: FixedMap | Map, key: Any) -> Self: ...
    def add(self, m: FixedMap | Map, key: Any, delta: int) -> Self: ...

class Transaction(_TxnList):
    """A multi-key transaction on a store's hash maps, FixedMap and Map mixed (Store.transaction())."""

    otherwise: _TxnList
    succeeded: bool | None
    results: list[tuple[bool, Any]] | None
    def __init__(self, store: Store) -> None: ...
    def when_present(self, m: FixedMap | Map, key: Any) -> Self: ...
    def when_absent(self, m: FixedMap | Map, key: Any) -> Self: ...
    def when_equals(self, m: FixedMap | Map, key: Any, value: Any) -> Self: ...
    def when_int(
        self, m: FixedMap | Map, key: Any, op: Literal["==", "!=", "<", "<=", ">", ">="], operand: int
    ) -> Self: ...
    def when_version(self, m: Map, key: Any, version: int) -> Self: ...
    def commit(self) -> tuple[bool, list[tuple[bool, Any]]]: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, exc_type: object, exc: object, tb: object) -> Literal[False]: ...

class Watch:
    """What Store.watch's function reads and writes through."""

    def __init__(self, store: Store | None = None) -> None: ...
    def get(self, m: FixedMap | Map, key: Any) -> Any: ...
    def get_int(self, m: FixedMap | Map, key: Any) -> int: ...
    def put(self, m: FixedMap | Map, key: Any, value: Any) -> None: ...
    def put_int(self, m: FixedMap | Map, key: Any, value: int) -> None: ...
    def put_if_absent(self, m: FixedMap | Map, key: Any, value: Any) -> None: ...
    def put_if_present(self, m: FixedMap | Map, key: Any, value: Any) -> None: ...
    def remove(self, m: FixedMap | Map, key: Any) -> None: ...
    def add(self, m: FixedMap | Map, key: Any, delta: int) -> None: ...

class _OrderedReads(Generic[_K, _V]):
    @overload
    def __getitem__(self, key: _K) -> _V: ...
    @overload
    def __getitem__(self, key: slice) -> list[tuple[_K, _V]]: ...
    @overload
    def get(self, key: _K, default: None = None) -> _V | None: ...
    @overload
    def get(self, key: _K, default: _V | _T) -> _V | _T: ...
    def __contains__(self, key: object) -> bool: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[_K]: ...
    def __reversed__(self) -> Iterator[_K]: ...
    def keys(self) -> KeysView[_K]:
        """A live, set-like view of the keys, in key order."""
    def values(self) -> ValuesView[_V]:
        """A live view of the values, in key order."""
    def items(self) -> ItemsView[_K, _V]:
        """A live, set-like view of the (key, value) pairs, in key order."""
    def irange(
        self,
        minimum: _K | None = None,
        maximum: _K | None = None,
        inclusive: tuple[bool, bool] = (True, True),
        reverse: bool = False,
    ) -> Iterator[_K]:
        """The keys from minimum to maximum (sortedcontainers' irange)."""
    def irange_items(
        self,
        minimum: _K | None = None,
        maximum: _K | None = None,
        inclusive: tuple[bool, bool] = (True, True),
        reverse: bool = False,
    ) -> Iterator[tuple[_K, _V]]:
        """As irange, yielding (key, value) pairs."""
    def count_range(
        self, minimum: _K | None = None, maximum: _K | None = None, inclusive: tuple[bool, bool] = (True, False)
    ) -> int:
        """The exact number of keys in the range, in logarithmic time."""
    def first(self) -> tuple[_K, _V] | None:
        """The entry with the smallest key, or None."""
    def last(self) -> tuple[_K, _V] | None:
        """The entry with the largest key, or None."""
    def ceiling_item(self, key: _K) -> tuple[_K, _V] | None:
        """The entry with the smallest key >= key, or None."""
    def higher_item(self, key: _K) -> tuple[_K, _V] | None:
        """The entry with the smallest key > key, or None."""
    def floor_item(self, key: _K) -> tuple[_K, _V] | None:
        """The entry with the largest key <= key, or None."""
    def lower_item(self, key: _K) -> tuple[_K, _V] | None:
        """The entry with the largest key < key, or None."""
    def ceiling_key(self, key: _K) -> _K | None:
        """The smallest key >= key, or None."""
    def higher_key(self, key: _K) -> _K | None:
        """The smallest key > key, or None."""
    def floor_key(self, key: _K) -> _K | None:
        """The largest key <= key, or None."""
    def lower_key(self, key: _K) -> _K | None:
        """The largest key < key, or None."""
    def estimate_range(
        self, minimum: _K | None = None, maximum: _K | None = None, inclusive: tuple[bool, bool] = (True, False)
    ) -> int:
        """libmdbx's estimate_range: here exact, as count_range."""
    def get_all(self, key: _K) -> list[_V]:
        """Every value of key, sorted (a multimap's; at most one otherwise)."""
    def count_values(self, key: _K) -> int:
        """The number of values of key."""
    def cursor(self) -> OrderedCursor[_K, _V]:
        """A cursor over a snapshot: seeks, moves both ways, positions."""

class OrderedMap(_OrderedReads[_K, _V], MutableMapping[_K, _V], Generic[_K, _V]):
    """A map whose keys are kept sorted bytewise (Store.ordered_map): a MutableMapping
    iterated in key order, with key slices (m[lo:hi], m[lo:hi:-1] reversed), irange,
    count_range, first/last and ceiling/floor/higher/lower seeks."""

    def __init__(self, native: Any, store: Store) -> None: ...
    @property
    def name(self) -> str:
        """The map's name."""
    @property
    def store(self) -> Store:
        """The store the map belongs to."""
    @overload  # type: ignore[override]
    def __getitem__(self, key: _K) -> _V: ...
    @overload
    def __getitem__(self, key: slice) -> list[tuple[_K, _V]]: ...
    def __setitem__(self, key: _K, value: _V) -> None: ...
    def __delitem__(self, key: _K | slice) -> None: ...
    def put_if_absent(self, key: _K, value: _V) -> bool:
        """Sets key to value if absent; whether it did."""
    def put_if_present(self, key: _K, value: _V) -> bool:
        """Sets key to value if present; whether it did."""
    @overload
    def pop(self, key: _K) -> _V: ...
    @overload
    def pop(self, key: _K, default: _V | _T) -> _V | _T: ...
    def setdefault(self, key: _K, default: _V = ...) -> _V:  # type: ignore[override]
        """The value of key, inserting default first if absent (atomically)."""
    def clear(self) -> None:
        """Removes every entry, in one transaction."""
    def snapshot(self) -> OrderedSnapshot[_K, _V]:
        """A consistent view as of the latest commit."""
    def write(self) -> OrderedWrite[_K, _V]:
        """A write transaction on this map."""
    @property
    def u64_keys(self) -> bool:
        """Whether the keys are unsigned 64-bit integers."""
    @property
    def duplicates(self) -> bool:
        """Whether the map is a multimap."""
    @property
    def sequence(self) -> int:
        """The map's persistent counter as of the latest commit."""
    def next_sequence(self, n: int = 1) -> int:
        """Adds n to the map's sequence (one transaction); returns its value before."""
    def add(self, key: _K, value: _V) -> bool:
        """Multimap: adds the pair; whether it was new."""
    def remove_value(self, key: _K, value: _V) -> bool:
        """Removes the pair (key, value); whether it was there."""
    def compare_and_swap(self, key: _K, expected: _V | _AbsentType, new: _V | _AbsentType) -> bool:
        """If the value is expected (ABSENT: absent), sets it to new (ABSENT: removes)."""
    def remove_range(
        self, minimum: _K | None = None, maximum: _K | None = None, inclusive: tuple[bool, bool] = (True, False)
    ) -> int:
        """Removes the entries in the range (one transaction); returns how many."""
    def append(self, key: _K, value: _V) -> None:
        """Adds key -> value past the largest key (one transaction)."""
    def extend_sorted(self, items: Iterable[tuple[_K, _V]]) -> int:
        """Sorted bulk load in one transaction; returns how many."""

class OrderedSnapshot(_OrderedReads[_K, _V], Mapping[_K, _V], Generic[_K, _V]):
    """A consistent view of an ordered map as of one commit. Bound to its thread."""

    def __init__(self, native: Any, m: OrderedMap[_K, _V]) -> None: ...
    @overload  # type: ignore[override]
    def __getitem__(self, key: _K) -> _V: ...
    @overload
    def __getitem__(self, key: slice) -> list[tuple[_K, _V]]: ...
    @property
    def map(self) -> OrderedMap[_K, _V]:
        """The map this is a snapshot of."""
    @property
    def sequence(self) -> int:
        """The number of the commit the snapshot shows."""
    @property
    def map_sequence(self) -> int:
        """The map's persistent counter in this snapshot."""
    def close(self) -> None:
        """Ends the snapshot."""
    @property
    def closed(self) -> bool:
        """Whether close() was called."""
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> Literal[False]: ...

class OrderedTransaction:
    """A write transaction over ordered maps of one store: commit() or the end of a with
    block commits all at once; abort() or an exception drops everything; nested() opens
    a savepoint."""

    sequence: int | None
    def __init__(self, native: Any, maps: list[OrderedMap[Any, Any]]) -> None: ...
    def put(self, m: OrderedMap[Any, Any], key: Any, value: Any) -> bool: ...
    def put_if_absent(self, m: OrderedMap[Any, Any], key: Any, value: Any) -> bool: ...
    def put_if_present(self, m: OrderedMap[Any, Any], key: Any, value: Any) -> bool: ...
    def remove(self, m: OrderedMap[Any, Any], key: Any) -> bool: ...
    def remove_value(self, m: OrderedMap[Any, Any], key: Any, value: Any) -> bool: ...
    def get(self, m: OrderedMap[Any, Any], key: Any, default: Any = None) -> Any: ...
    def compare_and_swap(self, m: OrderedMap[Any, Any], key: Any, expected: Any, new: Any) -> bool: ...
    def remove_range(
        self, m: OrderedMap[Any, Any], minimum: Any = None, maximum: Any = None, inclusive: tuple[bool, bool] = (True, False)
    ) -> int: ...
    def append(self, m: OrderedMap[Any, Any], key: Any, value: Any) -> None: ...
    def extend_sorted(self, m: OrderedMap[Any, Any], items: Iterable[tuple[Any, Any]]) -> int: ...
    def next_sequence(self, m: OrderedMap[Any, Any], n: int = 1) -> int: ...
    def set_marker(self, i: int, value: int) -> None: ...
    def view(self, m: OrderedMap[_K, _V]) -> OrderedWriteView[_K, _V]:
        """m as this transaction has it, its own writes included."""
    def cursor(self, m: OrderedMap[_K, _V]) -> OrderedCursor[_K, _V]:
        """A cursor over m as this transaction has it; it also writes at itself."""
    def nested(self) -> OrderedNestedTransaction: ...
    def commit(self) -> int: ...
    def abort(self) -> None: ...
    @property
    def active(self) -> bool: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, exc_type: object, exc: object, tb: object) -> Literal[False]: ...

class OrderedWriteView(_OrderedReads[_K, _V], Mapping[_K, _V], Generic[_K, _V]):
    """One map as a write transaction has it (OrderedTransaction.view): its reads."""

    def __init__(self, txn: OrderedTransaction, m: OrderedMap[_K, _V]) -> None: ...
    @overload  # type: ignore[override]
    def __getitem__(self, key: _K) -> _V: ...
    @overload
    def __getitem__(self, key: slice) -> list[tuple[_K, _V]]: ...
    @property
    def map(self) -> OrderedMap[_K, _V]:
        """The map this is a view of."""

class OrderedWrite(_OrderedReads[_K, _V], OrderedTransaction, Generic[_K, _V]):  # type: ignore[misc]
    """A write transaction on one ordered map (OrderedMap.write()), with the map's reads
    as the transaction has it (slices, iteration, irange, count_range, cursor)."""

    def __init__(self, native: Any, m: OrderedMap[_K, _V]) -> None: ...
    def __setitem__(self, key: _K, value: _V) -> None: ...
    def __delitem__(self, key: _K) -> None: ...
    def __bool__(self) -> bool: ...
    def cursor(self) -> OrderedCursor[_K, _V]: ...  # type: ignore[override]
    def put(self, key: _K, value: _V) -> bool: ...  # type: ignore[override]
    def add(self, key: _K, value: _V) -> bool: ...
    def put_if_absent(self, key: _K, value: _V) -> bool: ...  # type: ignore[override]
    def put_if_present(self, key: _K, value: _V) -> bool: ...  # type: ignore[override]
    def remove(self, key: _K) -> bool: ...  # type: ignore[override]
    def remove_value(self, key: _K, value: _V) -> bool: ...  # type: ignore[override]
    def compare_and_swap(self, key: _K, expected: _V | _AbsentType, new: _V | _AbsentType) -> bool: ...  # type: ignore[override]
    def remove_range(  # type: ignore[override]
        self, minimum: _K | None = None, maximum: _K | None = None, inclusive: tuple[bool, bool] = (True, False)
    ) -> int: ...
    def append(self, key: _K, value: _V) -> None: ...  # type: ignore[override]
    def extend_sorted(self, items: Iterable[tuple[_K, _V]]) -> int: ...  # type: ignore[override]
    def next_sequence(self, n: int = 1) -> int: ...  # type: ignore[override]
    def nested(self) -> OrderedNestedWrite[_K, _V]: ...  # type: ignore[override]

class _NestedLevel:
    def commit(self) -> None: ...
    def abort(self) -> None: ...
    @property
    def active(self) -> bool: ...
    def __exit__(self, exc_type: object, exc: object, tb: object) -> Literal[False]: ...

class OrderedNestedTransaction(_NestedLevel, OrderedTransaction):  # type: ignore[misc]
    """A transaction nested in an OrderedTransaction: commit() keeps its writes in the
    parent, abort() or an exception out of its with block undoes them."""

class OrderedNestedWrite(_NestedLevel, OrderedWrite[_K, _V]):  # type: ignore[misc]
    """A transaction nested in an OrderedWrite, with its map-less forms."""

class OrderedCursor(Generic[_K, _V]):
    """A position in a snapshot of an ordered map: every move returns whether it stands
    on an entry; iteration yields (key, value) from there on. Bound to its thread."""

    def __init__(self, native: Any) -> None: ...
    def first(self) -> bool: ...
    def last(self) -> bool: ...
    def next(self) -> bool: ...
    def prev(self) -> bool: ...
    def seek(self, key: _K) -> bool: ...
    def seek_ge(self, key: _K) -> bool: ...
    def seek_le(self, key: _K) -> bool: ...
    def next_key(self) -> bool: ...
    def prev_key(self) -> bool: ...
    def next_value(self) -> bool: ...
    def prev_value(self) -> bool: ...
    def seek_value(self, key: _K, value: _V) -> bool: ...
    def seek_value_ge(self, key: _K, value: _V) -> bool: ...
    @property
    def key(self) -> _K | None: ...
    @property
    def value(self) -> _V | None: ...
    @property
    def item(self) -> tuple[_K, _V] | None: ...
    @property
    def position(self) -> int | None: ...
    def count_values(self) -> int: ...
    def put_current(self, value: _V) -> bool:
        """Write transaction's cursor: sets the value of the entry it stands on."""
    def remove_current(self) -> bool:
        """Write transaction's cursor: removes the entry it stands on."""
    def __iter__(self) -> Iterator[tuple[_K, _V]]: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> Literal[False]: ...
