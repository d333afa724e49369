"""shoal.OrderedMap: a map whose keys are kept sorted (see Store.ordered_map), its
snapshots (OrderedSnapshot) and write transactions (OrderedTransaction)."""

from collections.abc import Mapping as _Mapping
from collections.abc import MutableMapping as _MutableMapping

from ._errors import InvalidArgument
from ._views import ItemsView, KeysView, ValuesView

__all__ = ["OrderedMap", "OrderedSnapshot", "OrderedTransaction", "OrderedWrite"]

_KEYS, _VALUES, _ITEMS = 0, 1, 2


def _slice_args(s):
    """A key slice's bounds and direction: ``m[lo:hi]`` is lo <= key < hi in key
    order, ``m[lo:hi:-1]`` the same entries in reverse order."""
    if s.step not in (None, 1, -1):
        raise ValueError(f"an ordered map's slice step is 1 or -1 (reverse), not {s.step!r}")
    return s.start, s.stop, s.step == -1


class _Reads:
    """The reads an ordered map and its snapshots share, over a native object with
    ``get``, ``__len__``, ``count_range`` and ``range``."""

    __slots__ = ()

    def __getitem__(self, key):
        if isinstance(key, slice):
            lo, hi, rev = _slice_args(key)
            return list(self._n.range(lo, hi, True, False, rev, _ITEMS))
        v = self._n.get(key)
        if v is None:
            raise KeyError(key)
        return v

    def get(self, key, default=None):
        """The value of ``key``, or ``default``."""
        v = self._n.get(key)
        return default if v is None else v

    def __contains__(self, key):
        return self._n.get(key) is not None

    def __len__(self):
        return len(self._n)

    def __iter__(self):
        return self._n.range(None, None, True, False, False, _KEYS)

    def __reversed__(self):
        return self._n.range(None, None, True, False, True, _KEYS)

    def _iter_keys(self):
        return self._n.range(None, None, True, False, False, _KEYS)

    def _iter_values(self):
        return self._n.range(None, None, True, False, False, _VALUES)

    def _iter_items(self):
        return self._n.range(None, None, True, False, False, _ITEMS)

    def keys(self):
        """A live, set-like view of the keys, iterated in key order (each iteration
        reads one snapshot)."""
        return KeysView(self)

    def values(self):
        """A live view of the values, in key order."""
        return ValuesView(self)

    def items(self):
        """A live, set-like view of the (key, value) pairs, in key order."""
        return ItemsView(self)

    def irange(self, minimum=None, maximum=None, inclusive=(True, True), reverse=False):
        """The keys from ``minimum`` to ``maximum`` (None: unbounded), each bound
        included or not as ``inclusive`` says, in key order or ``reverse``: the shape of
        ``sortedcontainers.SortedDict.irange``."""
        lo_in, hi_in = inclusive
        return self._n.range(minimum, maximum, bool(lo_in), bool(hi_in), bool(reverse), _KEYS)

    def irange_items(self, minimum=None, maximum=None, inclusive=(True, True), reverse=False):
        """As ``irange``, yielding ``(key, value)`` pairs."""
        lo_in, hi_in = inclusive
        return self._n.range(minimum, maximum, bool(lo_in), bool(hi_in), bool(reverse), _ITEMS)

    def count_range(self, minimum=None, maximum=None, inclusive=(True, False)):
        """The exact number of keys from ``minimum`` to ``maximum`` (by default
        ``minimum <= key < maximum``), in time logarithmic in the map's size. Ranks
        follow: ``count_range(None, k)`` is ``bisect_left``'s index of ``k``."""
        lo_in, hi_in = inclusive
        return self._n.count_range(minimum, maximum, bool(lo_in), bool(hi_in))

    def _one(self, lo, hi, lo_in, hi_in, rev):
        for kv in self._n.range(lo, hi, lo_in, hi_in, rev, _ITEMS):
            return kv
        return None

    def first(self):
        """The entry with the smallest key as ``(key, value)``, or None when empty."""
        return self._one(None, None, True, False, False)

    def last(self):
        """The entry with the largest key as ``(key, value)``, or None when empty."""
        return self._one(None, None, True, False, True)

    def ceiling_item(self, key):
        """The entry with the smallest key >= ``key``, or None."""
        return self._one(key, None, True, False, False)

    def higher_item(self, key):
        """The entry with the smallest key > ``key``, or None."""
        return self._one(key, None, False, False, False)

    def floor_item(self, key):
        """The entry with the largest key <= ``key``, or None."""
        return self._one(None, key, True, True, True)

    def lower_item(self, key):
        """The entry with the largest key < ``key``, or None."""
        return self._one(None, key, True, False, True)

    def ceiling_key(self, key):
        """The smallest key >= ``key``, or None."""
        e = self.ceiling_item(key)
        return None if e is None else e[0]

    def higher_key(self, key):
        """The smallest key > ``key``, or None."""
        e = self.higher_item(key)
        return None if e is None else e[0]

    def floor_key(self, key):
        """The largest key <= ``key``, or None."""
        e = self.floor_item(key)
        return None if e is None else e[0]

    def lower_key(self, key):
        """The largest key < ``key``, or None."""
        e = self.lower_item(key)
        return None if e is None else e[0]


class OrderedMap(_Reads, _MutableMapping):
    """A named map whose keys are kept in bytewise order, shared by every process that
    opens the store: a ``collections.abc.MutableMapping`` whose iteration, ``keys()``,
    ``values()`` and ``items()`` run in key order, with key slices (``m["a":"b"]`` is the
    list of ``(key, value)`` with ``"a" <= key < "b"``; ``m["a":"b":-1]`` the same in
    reverse order), ``irange`` (sortedcontainers' shape), exact ``count_range``,
    ``first``/``last`` and the seeks ``ceiling_key``, ``floor_key``, ``higher_key``,
    ``lower_key`` (and their ``*_item`` forms).

    Every read sees the latest commit; an iteration reads one snapshot, taken when it
    starts, to its end. ``snapshot()`` keeps one view for several reads. Each single
    write is a transaction of its own; ``with m.write() as t:`` groups writes (and
    ``store.ordered_write([a, b])`` groups writes to several maps), all seen at once when
    the block ends, none if it raises.

    Created by ``Store.ordered_map(name, key=..., value=...)``. Keys take at most 984
    bytes encoded (``shoal.InvalidArgument`` beyond); values any size.
    """

    __slots__ = ("_n", "_store", "__weakref__")

    def __init__(self, native, store):
        self._n = native
        self._store = store

    @property
    def name(self) -> str:
        """The map's name."""
        return self._n.name

    @property
    def store(self):
        """The store the map belongs to."""
        return self._store

    def __setitem__(self, key, value):
        if isinstance(key, slice):
            raise TypeError("an ordered map's slices are read-only")
        self._n.put(key, value, 0)

    def __delitem__(self, key):
        if isinstance(key, slice):
            lo, hi, _ = _slice_args(key)
            with self.write() as t:
                for k in self.irange(lo, hi, (True, False)):
                    t.remove(k)
            return
        if not self._n.remove(key):
            raise KeyError(key)

    def put_if_absent(self, key, value) -> bool:
        """Sets ``key`` to ``value`` if absent; whether it did."""
        return self._n.put(key, value, 1)

    def put_if_present(self, key, value) -> bool:
        """Sets ``key`` to ``value`` if present; whether it did."""
        return self._n.put(key, value, 2)

    def setdefault(self, key, default=None):
        """The value of ``key``, first setting it to ``default`` if absent (atomic
        across processes)."""
        while True:
            v = self._n.get(key)
            if v is not None:
                return v
            if self._n.put(key, default, 1):
                return default

    def pop(self, key, *default):
        """Removes ``key`` and returns its value (``default`` if given, else KeyError,
        when absent), as one transaction."""
        if len(default) > 1:
            raise TypeError(f"pop expected at most 2 arguments, got {1 + len(default)}")
        with self.write() as t:
            v = t.get(key)
            if v is None:
                if not default:
                    raise KeyError(key)
                return default[0]
            t.remove(key)
            return v

    def clear(self):
        """Removes every entry, in one transaction."""
        with self.write() as t:
            for k in self:
                t.remove(k)

    def snapshot(self) -> "OrderedSnapshot":
        """A consistent view of the map as of its latest commit (also a context manager
        that closes it). Bound to the thread that took it."""
        return OrderedSnapshot(self._n.snapshot(), self)

    def write(self) -> "OrderedWrite":
        """A write transaction on this map: ``with m.write() as t: t[k] = v ...``
        commits at the end of the block (aborts if it raises). One writer per map at a
        time: others wait up to the store's lock timeout. Bound to its thread."""
        return OrderedWrite(self._store._ordered_txn([self._n]), self)

    def __reduce__(self):
        from . import _reopen_ordered

        return (
            _reopen_ordered,
            (self._store.path, self.name, self._n.key_codec, self._n.value_codec),
        )

    def __repr__(self):
        return f"<shoal.OrderedMap {self.name!r} of {self._store.path!r}>"


class OrderedSnapshot(_Reads, _Mapping):
    """A consistent view of an ordered map (``OrderedMap.snapshot()``): every read sees
    the map as of one commit, whatever writers do meanwhile, and never makes a writer
    wait. A read-only ``Mapping`` with the map's range reads (slices, ``irange``,
    ``count_range``, seeks). Close it (or leave its ``with`` block) when done: pages
    that later commits free are reused only after it ends. Bound to the thread that
    took it (another thread's use raises ``RuntimeError``)."""

    __slots__ = ("_n", "_map")

    def __init__(self, native, m):
        self._n = native
        self._map = m

    @property
    def map(self):
        """The map this is a snapshot of."""
        return self._map

    @property
    def sequence(self) -> int:
        """The number of the commit the snapshot shows."""
        return self._n.sequence

    def close(self):
        """Ends the snapshot (iterators already started keep their view)."""
        self._n.close()

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._n.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return f"<shoal.OrderedSnapshot of {self._map.name!r} at commit {self._n.sequence}>"


class OrderedTransaction:
    """A write transaction over one or several ordered maps of a store
    (``store.ordered_write([a, b])``): its writes are seen by no one else until
    ``commit()``, then by everyone at once; ``abort()`` (or the process dying) drops
    them all. As a context manager it commits at the end of the block and aborts if the
    block raises. Writer locks are taken in one global order, so transactions over
    overlapping sets of maps never deadlock. Bound to the thread that began it."""

    __slots__ = ("_t", "_maps", "sequence")

    def __init__(self, native, maps):
        self._t = native
        self._maps = maps
        #: The commit's sequence number, once committed.
        self.sequence = None

    def put(self, m, key, value) -> bool:
        """Sets ``key`` to ``value`` in ``m``; whether the key was new."""
        return self._t.put(m._n, key, value, 0)

    def put_if_absent(self, m, key, value) -> bool:
        """Sets ``key`` to ``value`` in ``m`` if absent; whether it did."""
        return self._t.put(m._n, key, value, 1)

    def put_if_present(self, m, key, value) -> bool:
        """Sets ``key`` to ``value`` in ``m`` if present; whether it did."""
        return self._t.put(m._n, key, value, 2)

    def remove(self, m, key) -> bool:
        """Removes ``key`` from ``m``; whether it was there."""
        return self._t.remove(m._n, key)

    def get(self, m, key, default=None):
        """The value of ``key`` in ``m`` as this transaction sees it, or ``default``."""
        v = self._t.get(m._n, key)
        return default if v is None else v

    def commit(self) -> int:
        """Commits every write at once; returns the commit's sequence number."""
        self.sequence = self._t.commit()
        return self.sequence

    def abort(self):
        """Drops every write."""
        self._t.abort()

    @property
    def active(self) -> bool:
        """Whether the transaction is still open."""
        return self._t.active

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None and self._t.active:
            self.commit()
        else:
            self.abort()
        return False


class OrderedWrite(OrderedTransaction):
    """A write transaction on one ordered map (``OrderedMap.write()``), with the
    map-less forms ``t[k] = v``, ``t[k]``, ``del t[k]``, ``k in t``, ``t.get(k)``,
    ``t.put_if_absent(k, v)``, ``t.put_if_present(k, v)``, ``t.remove(k)``; see
    ``OrderedTransaction`` for commit and abort."""

    __slots__ = ()

    def __init__(self, native, m):
        super().__init__(native, [m])

    def _m(self):
        return self._maps[0]

    def __setitem__(self, key, value):
        self._t.put(self._m()._n, key, value, 0)

    def __getitem__(self, key):
        v = self._t.get(self._m()._n, key)
        if v is None:
            raise KeyError(key)
        return v

    def __delitem__(self, key):
        if not self._t.remove(self._m()._n, key):
            raise KeyError(key)

    def __contains__(self, key):
        return self._t.get(self._m()._n, key) is not None

    def get(self, key, default=None):  # type: ignore[override]
        """The value of ``key`` as this transaction sees it, or ``default``."""
        v = self._t.get(self._m()._n, key)
        return default if v is None else v

    def put(self, key, value) -> bool:  # type: ignore[override]
        """Sets ``key`` to ``value``; whether the key was new."""
        return self._t.put(self._m()._n, key, value, 0)

    def put_if_absent(self, key, value) -> bool:  # type: ignore[override]
        """Sets ``key`` to ``value`` if absent; whether it did."""
        return self._t.put(self._m()._n, key, value, 1)

    def put_if_present(self, key, value) -> bool:  # type: ignore[override]
        """Sets ``key`` to ``value`` if present; whether it did."""
        return self._t.put(self._m()._n, key, value, 2)

    def remove(self, key) -> bool:  # type: ignore[override]
        """Removes ``key``; whether it was there."""
        return self._t.remove(self._m()._n, key)


def _natives(store, maps):
    maps = list(maps)
    for m in maps:
        if not isinstance(m, OrderedMap):
            raise TypeError(f"expected shoal.OrderedMap, got {type(m).__name__}")
        if m._store is not store and m._store.path != store.path:
            raise InvalidArgument(f"ordered map {m.name!r} belongs to another store")
    return maps, [m._n for m in maps]


def _write(store, maps):
    maps, natives = _natives(store, maps)
    return OrderedTransaction(store._ordered_txn(natives), maps)


def _snapshots(store, maps):
    maps, natives = _natives(store, maps)
    return [OrderedSnapshot(n, m) for n, m in zip(store._ordered_snapshots(natives), maps)]
