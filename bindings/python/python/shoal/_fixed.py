"""shoal.FixedMap: a fixed-size map of bytes (see Store.fixed_map)."""

import warnings as _warnings
from collections.abc import Mapping as _Mapping
from collections.abc import MutableMapping as _MutableMapping

from ._absent import ABSENT
from ._views import ItemsView, KeysView, ValuesView

__all__ = ["FixedMap"]

_KEYS, _VALUES, _ITEMS = 0, 1, 2


class FixedMap(_MutableMapping):
    """A named fixed-size map in a shoal store: every key is a bytes object of exactly
    ``key_size`` bytes and every value one of exactly ``value_size`` bytes, stored as
    cells in the index itself (no records; values updated in place; ``add`` on a present
    key takes no lock). A ``collections.abc.MutableMapping[bytes, bytes]`` with dict
    semantics, shared by every process that opens the store.

    Created by ``Store.fixed_map(name, key_size, value_size)``. A key or value of another
    length raises ``shoal.InvalidArgument`` (a ``ValueError``), also for ``in`` and
    ``get``; a key that is not ``bytes`` raises ``TypeError``. Iteration is weakly
    consistent, as for ``Map``.

    Single-key calls keep the GIL unless they find the segment lock or a bucket busy
    beyond a short spin (held by another thread or process): then they release it while
    they wait, up to the store's lock timeout. ``get_many``, ``clear`` and iteration
    release it.
    """

    __slots__ = ("_m", "_store", "__weakref__")

    def __init__(self, native, store):
        self._m = native
        self._store = store

    @property
    def name(self) -> str:
        """The map's name."""
        return self._m.name

    @property
    def key_size(self) -> int:
        """Bytes per key."""
        return self._m.key_size

    @property
    def value_size(self) -> int:
        """Bytes per value."""
        return self._m.value_size

    @property
    def key_type(self):
        """The key type the map recorded when created ("u64", ...), or None."""
        return self._m.key_type

    @property
    def value_type(self):
        """The value type the map recorded when created, or None."""
        return self._m.value_type

    @property
    def store(self):
        """The Store this map was opened from."""
        return self._store

    def __getitem__(self, key):
        v = self._m.get(key)
        if v is None:
            raise KeyError(key)
        return v

    def __setitem__(self, key, value):
        self._m.put(key, value)

    def __delitem__(self, key):
        if not self._m.remove(key):
            raise KeyError(key)

    def __contains__(self, key):
        return self._m.contains(key)

    def __len__(self):
        return self._m.len()

    def __iter__(self):
        return self._m.iter(_KEYS)

    def _iter_keys(self):
        return self._m.iter(_KEYS)

    def _iter_values(self):
        return self._m.iter(_VALUES)

    def _iter_items(self):
        return self._m.iter(_ITEMS)

    def keys(self):
        """A live, set-like view of the keys."""
        return KeysView(self)

    def values(self):
        """A live view of the values."""
        return ValuesView(self)

    def items(self):
        """A live, set-like view of the (key, value) pairs."""
        return ItemsView(self)

    def get(self, key, default=None):
        """The value of ``key``, or ``default``."""
        v = self._m.get(key)
        return default if v is None else v

    def pop(self, key, *default):
        """Removes ``key`` and returns its value (atomically, one locked step), or
        returns ``default`` if given and the key is absent; else raises KeyError."""
        if len(default) > 1:
            raise TypeError(f"pop expected at most 2 arguments, got {1 + len(default)}")
        v = self._m.take(key)
        if v is None:
            if default:
                return default[0]
            raise KeyError(key)
        return v

    def popitem(self):
        """Removes and returns some (key, value) pair; KeyError if the map is empty."""
        for k in self._m.iter(_KEYS):
            v = self._m.take(k)
            if v is not None:
                return (k, v)
            # removed meanwhile by another process: try the next key
        raise KeyError("popitem(): shoal.FixedMap is empty")

    def setdefault(self, key, default):
        """The value of ``key``; if absent, inserts ``default`` first and returns it
        (atomically: of racing callers exactly one inserts). ``default`` is required (no
        ``None`` values)."""
        return self._m.get_or_insert(key, default)

    def swap(self, key, value):
        """Inserts or replaces, returning the previous value (``None`` if the key was
        absent), atomically."""
        return self._m.swap(key, value)

    def put_many(self, items) -> None:
        """Sets many pairs (a mapping, or an iterable of ``(key, value)`` pairs) with the
        GIL released once. Each put is atomic on its own, the batch is not: a pair of the
        wrong size raises ``shoal.InvalidArgument`` naming the item, after the pairs
        before it were put."""
        if isinstance(items, _Mapping):
            items = items.items()
        self._m.put_many([(k, v) for k, v in items])

    def remove_many(self, keys) -> int:
        """Removes many keys with the GIL released once (each removal atomic on its own);
        returns how many were present. Absent keys are not an error."""
        if isinstance(keys, (bytes, bytearray, str)):
            raise TypeError("expected an iterable of keys, not a single key")
        return self._m.remove_many(list(keys))

    def put(self, key, value) -> bool:
        """Inserts or replaces; returns True if the key was present (replaced)."""
        return self._m.put(key, value)

    def put_if_absent(self, key, value) -> bool:
        """Inserts only if ``key`` is absent; returns whether it did."""
        return self._m.put_if_absent(key, value)

    def put_if_present(self, key, value) -> bool:
        """Replaces only if ``key`` is present; returns whether it did."""
        return self._m.put_if_present(key, value)

    def insert(self, key, value) -> bool:
        """The former name of ``put_if_absent`` (a DeprecationWarning)."""
        _warnings.warn("FixedMap.insert is renamed put_if_absent", DeprecationWarning, stacklevel=2)
        return self._m.put_if_absent(key, value)

    def replace(self, key, value) -> bool:
        """The former name of ``put_if_present`` (a DeprecationWarning)."""
        _warnings.warn(
            "FixedMap.replace is renamed put_if_present", DeprecationWarning, stacklevel=2
        )
        return self._m.put_if_present(key, value)

    def remove(self, key) -> bool:
        """Removes ``key``; returns whether it was present."""
        return self._m.remove(key)

    def compare_and_swap(self, key, expected, new) -> bool:
        """Atomically: if the value of ``key`` is ``expected`` (``shoal.ABSENT``: the key
        is absent), sets it to ``new`` (``shoal.ABSENT``: removes the key) and returns
        True; otherwise changes nothing and returns False."""
        return self._m.compare_and_swap(
            key,
            None if expected is ABSENT else expected,
            None if new is ABSENT else new,
        )

    def add(self, key, delta=1) -> int:
        """Atomically adds ``delta`` (wrapping) to the 8-byte little-endian signed value of
        ``key`` (an absent key counts as 0 and is created) and returns the new value.
        Raises ``shoal.InvalidArgument`` unless the map's values are 8 bytes."""
        return self._m.add(key, delta)

    def get_many(self, keys, default=None) -> list:
        """The values of many keys in one call, in key order (``default`` for an absent
        key). Faster per key than ``m[k]`` in a loop on large maps: the GIL is released
        once and the batch's memory misses overlap."""
        if isinstance(keys, (bytes, bytearray, str)):
            raise TypeError("expected an iterable of keys, not a single key")
        return [default if v is None else v for v in self._m.get_many(list(keys))]

    def modify(self, key, func, /):
        """Atomic read-modify-write: stores ``func(current)`` and returns it, with no
        other write to ``key`` in between (``current`` is ``shoal.ABSENT`` if the key is
        absent; returning ``shoal.ABSENT`` removes it). If another write comes in
        between, ``func`` is called again on the new value, so it may run several times
        and should have no side effects. It runs without any lock held; an exception from
        it propagates and changes nothing. Raises ``shoal.Timeout`` if the key keeps
        changing for longer than the store's lock timeout. (Not named ``update``:
        ``MutableMapping.update`` merges another mapping in.)"""
        return self._m.modify(key, func)

    def clear(self):
        """Removes every entry."""
        self._m.clear()

    def stats(self) -> dict:
        """Figures about the map: entries, key_size, value_size, cell_bytes, bucket_bytes,
        cells_per_bucket, segments, segment_bytes, capacity, splits, directory_depth,
        file_size."""
        return self._m.stats()

    def to_dict(self) -> dict:
        """A copy of the whole map as a plain dict."""
        return dict(self._m.iter(_ITEMS))

    def __eq__(self, other):
        if not isinstance(other, _Mapping):
            return NotImplemented
        return self.to_dict() == dict(other.items())

    def __reduce__(self):
        if self._m.closed:
            raise ValueError("cannot pickle a closed shoal.FixedMap")
        from . import _reopen_fixed

        return (
            _reopen_fixed,
            (self._store.path, self.name, self.key_size, self.value_size, self._store.lock_timeout),
        )

    def __repr__(self):
        return (
            f"<shoal.FixedMap {self.name!r} in {self._store.path!r} "
            f"key_size={self.key_size} value_size={self.value_size}"
            f"{' (closed)' if self._m.closed else ''}>"
        )
