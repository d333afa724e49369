"""shoal.OrderedMap: a map whose keys are kept sorted (see Store.ordered_map), its
snapshots (OrderedSnapshot), cursors (OrderedCursor), write transactions
(OrderedTransaction) and their nested transactions."""

from collections.abc import Mapping as _Mapping
from typing import Any
from collections.abc import MutableMapping as _MutableMapping

from ._errors import InvalidArgument
from ._views import ItemsView, KeysView, ValuesView

__all__ = [
    "OrderedCursor",
    "OrderedMap",
    "OrderedNestedTransaction",
    "OrderedNestedWrite",
    "OrderedSnapshot",
    "OrderedTransaction",
    "OrderedWrite",
    "OrderedWriteView",
]

_KEYS, _VALUES, _ITEMS = 0, 1, 2
# OrderedCursor's moves, as the native cursor numbers them.
_FIRST, _LAST, _NEXT, _PREV, _NEXT_KEY, _PREV_KEY, _NEXT_VALUE, _PREV_VALUE = range(8)
_EXACT, _GE, _LE = 0, 1, 2


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

    def estimate_range(self, minimum=None, maximum=None, inclusive=(True, False)):
        """libmdbx's ``estimate_range``: here exact, as ``count_range`` (the tree's
        branches keep counts, so the exact figure costs two descents)."""
        return self.count_range(minimum, maximum, inclusive)

    def get_all(self, key):
        """Every value of ``key``, sorted by their encoded bytes (a multimap's; at most
        one in a map without duplicates; ``[]`` when absent)."""
        return self._n.get_all(key)

    def count_values(self, key):
        """The number of values of ``key`` (0 or 1 in a map without duplicates), exact,
        in time logarithmic in the map's size."""
        return self._n.count_values(key)

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

    ``cursor()`` walks a snapshot both ways (seeks, moves, positions); ``compare_and_swap``,
    ``remove_range``, ``append``/``extend_sorted`` (sorted bulk load) and
    ``next_sequence`` (a persistent counter) are each one transaction.

    Created by ``Store.ordered_map(name, key=..., value=..., u64_keys=..., duplicates=...)``.
    With ``u64_keys=True`` keys are ints in [0, 2**64) sorted as numbers. With
    ``duplicates=True`` the map is a multimap: each key has one or more values, sorted
    by their encoded bytes; iteration, ``items()``, ``len()`` and ranges count every
    (key, value) pair, so a key repeats once per value; ``m[k]`` is the key's first value,
    ``m[k] = v`` makes ``v`` its only value, ``add(k, v)`` adds one, ``remove_value(k, v)``
    removes one and ``del m[k]`` all. Keys take at most 16 KiB (16384 bytes) encoded
    (``shoal.InvalidArgument`` beyond); values any size (a multimap's at most 16 KiB).
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

    @property
    def u64_keys(self) -> bool:
        """Whether the keys are unsigned 64-bit integers, sorted as numbers."""
        return self._n.u64_keys

    @property
    def duplicates(self) -> bool:
        """Whether the map is a multimap (several sorted values per key)."""
        return self._n.duplicates

    @property
    def sequence(self) -> int:
        """The map's sequence (a persistent counter, 0 in a new map) as of the latest
        commit."""
        return self._n.sequence

    def next_sequence(self, n=1) -> int:
        """Adds ``n`` to the map's sequence, in a transaction of its own; returns its
        value before, so that concurrent callers (any process) each get their own
        ``n`` numbers."""
        return self._n.next_sequence(n)

    def __setitem__(self, key, value):
        if isinstance(key, slice):
            raise TypeError("an ordered map's slices are read-only")
        if self._n.duplicates:
            with self.write() as t:
                t[key] = value
            return
        self._n.put(key, value, 0)

    def __delitem__(self, key):
        if isinstance(key, slice):
            lo, hi, _ = _slice_args(key)
            self._n.remove_range(lo, hi, True, False)
            return
        if not self._n.remove(key):
            raise KeyError(key)

    def add(self, key, value) -> bool:
        """Multimap: adds the pair (``key``, ``value``) beside the key's other values;
        whether it was new (a pair is there at most once). ``shoal.InvalidArgument`` in
        a map without duplicates (use ``m[k] = v``)."""
        _need_dups(self)
        with self.write() as t:
            return t.add(key, value)

    def remove_value(self, key, value) -> bool:
        """Removes the pair (``key``, ``value``) (in a map without duplicates: ``key``,
        if its value is ``value``); whether it was there."""
        return self._n.remove_value(key, value)

    def compare_and_swap(self, key, expected, new) -> bool:
        """Atomically (one transaction): if the value of ``key`` is ``expected``
        (``shoal.ABSENT``: the key is absent), sets it to ``new`` (``shoal.ABSENT``:
        removes the key) and returns True; otherwise changes nothing and returns False.
        Values compare by their encoded bytes. Not in a multimap
        (``shoal.InvalidArgument``)."""
        return self._n.compare_and_swap(key, expected, new)

    def remove_range(self, minimum=None, maximum=None, inclusive=(True, False)) -> int:
        """Removes every entry with a key from ``minimum`` to ``maximum`` (by default
        ``minimum <= key < maximum``; None: unbounded), in one transaction; returns how
        many (pairs, in a multimap)."""
        lo_in, hi_in = inclusive
        return self._n.remove_range(minimum, maximum, bool(lo_in), bool(hi_in))

    def append(self, key, value):
        """Adds ``key`` -> ``value`` past the map's largest key (in a multimap, past its
        largest pair), in a transaction of its own; ``shoal.InvalidArgument`` if it is
        not above. See ``extend_sorted`` for many."""
        with self.write() as t:
            t.append(key, value)

    def extend_sorted(self, items) -> int:
        """Loads ``(key, value)`` pairs given in increasing order, each above the map's
        largest key, in one transaction: the sorted bulk load, which fills pages instead
        of splitting them. A pair out of order raises ``shoal.InvalidArgument`` and
        loads nothing. Returns how many were loaded."""
        with self.write() as t:
            return t.extend_sorted(items)

    def cursor(self) -> "OrderedCursor":
        """A cursor over a snapshot of the map taken now (it keeps that view until
        closed): seeks, moves both ways, positions. Bound to the thread that made it."""
        return OrderedCursor(self._n.cursor())

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
        self._n.remove_range(None, None, True, False)

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
            (
                self._store.path,
                self.name,
                self._n.key_codec,
                self._n.value_codec,
                self._n.u64_keys,
                self._n.duplicates,
            ),
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

    @property
    def map_sequence(self) -> int:
        """The map's sequence (its persistent counter) in this snapshot."""
        return self._n.map_sequence

    def cursor(self) -> "OrderedCursor":
        """A cursor over this snapshot (it keeps the view even after ``close()``)."""
        return OrderedCursor(self._n.cursor())

    def close(self):
        """Ends the snapshot (iterators and cursors already made keep their view)."""
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


class _TxnReads:
    """The native reads ``_Reads`` takes (``get``, ``__len__``, ``count_range``, ``range``,
    ``get_all``, ``count_values``), of one map as a write transaction has it."""

    __slots__ = ("_t", "_m")

    def __init__(self, t, m):
        self._t = t
        self._m = m

    def get(self, key):
        return self._t.get(self._m, key)

    def __len__(self):
        return self._t.len(self._m)

    def count_range(self, lo, hi, lo_in, hi_in):
        return self._t.count_range(self._m, lo, hi, lo_in, hi_in)

    def range(self, lo, hi, lo_in, hi_in, rev, what):
        return iter(self._t.range(self._m, lo, hi, lo_in, hi_in, rev, what))

    def get_all(self, key):
        return self._t.get_all(self._m, key)

    def count_values(self, key):
        return self._t.count_values(self._m, key)


class OrderedWriteView(_Reads, _Mapping):
    """One map as a write transaction has it, its own writes included
    (``OrderedTransaction.view(m)``): a read-only ``Mapping`` with the map's range reads
    (slices, ``irange``, ``count_range``, seeks) and ``cursor()``. Range reads return
    what the transaction has when they are called (a slice is a list; an ``irange`` the
    entries as of its call)."""

    __slots__ = ("_n", "_map", "_txn")

    def __init__(self, txn, m):
        self._txn = txn
        self._map = m
        self._n = _TxnReads(txn._t, m._n)

    @property
    def map(self):
        """The map this is a view of."""
        return self._map

    def cursor(self) -> "OrderedCursor":
        """A cursor over the map as the transaction has it (see ``OrderedCursor``)."""
        return self._txn.cursor(self._map)

    def __repr__(self):
        return f"<shoal.OrderedWriteView of {self._map.name!r}>"


def _need_dups(m):
    if not m.duplicates:
        raise InvalidArgument(
            f"ordered map {m.name!r} has no duplicates: add() is for multimaps (use m[k] = v)"
        )


class OrderedTransaction:
    """A write transaction over one or several ordered maps of a store
    (``store.ordered_write([a, b])``): its writes are seen by no one else until
    ``commit()``, then by everyone at once; ``abort()`` (or the process dying) drops
    them all. As a context manager it commits at the end of the block and aborts if the
    block raises. Writer locks are taken in one global order, so transactions over
    overlapping sets of maps never deadlock. ``nested()`` opens a nested transaction (a
    savepoint). Bound to the thread that began it."""

    __slots__ = ("_t", "_maps", "sequence")

    def __init__(self, native, maps):
        self._t = native
        self._maps = maps
        #: The commit's sequence number, once committed.
        self.sequence = None

    def put(self, m, key, value) -> bool:
        """Sets ``key`` to ``value`` in ``m``; whether the key was new. In a multimap,
        adds the pair; whether the pair was new."""
        return self._t.put(m._n, key, value, 0)

    def put_if_absent(self, m, key, value) -> bool:
        """Sets ``key`` to ``value`` in ``m`` if absent; whether it did."""
        return self._t.put(m._n, key, value, 1)

    def put_if_present(self, m, key, value) -> bool:
        """Sets ``key`` to ``value`` in ``m`` if present (in a multimap, as its only
        value); whether it did."""
        return self._t.put(m._n, key, value, 2)

    def remove(self, m, key) -> bool:
        """Removes ``key`` (every value of it, in a multimap) from ``m``; whether it was
        there."""
        return self._t.remove(m._n, key)

    def remove_value(self, m, key, value) -> bool:
        """Removes the pair (``key``, ``value``) from ``m``; whether it was there."""
        return self._t.remove_value(m._n, key, value)

    def get(self, m, key, default=None):
        """The value of ``key`` in ``m`` (a multimap's first) as this transaction sees
        it, or ``default``."""
        v = self._t.get(m._n, key)
        return default if v is None else v

    def compare_and_swap(self, m, key, expected, new) -> bool:
        """If the value of ``key`` in ``m`` is ``expected`` (``shoal.ABSENT``: absent) as
        this transaction sees it, sets it to ``new`` (``shoal.ABSENT``: removes it);
        whether it did. Not in a multimap."""
        return self._t.compare_and_swap(m._n, key, expected, new)

    def remove_range(self, m, minimum=None, maximum=None, inclusive=(True, False)) -> int:
        """Removes every entry of ``m`` with a key from ``minimum`` to ``maximum`` (by
        default ``minimum <= key < maximum``); returns how many."""
        lo_in, hi_in = inclusive
        return self._t.remove_range(m._n, minimum, maximum, bool(lo_in), bool(hi_in))

    def append(self, m, key, value):
        """Adds ``key`` -> ``value`` to ``m`` past its largest key (pair, in a multimap):
        a sorted bulk load. ``shoal.InvalidArgument`` if not above (the transaction
        stays usable)."""
        self._t.append(m._n, key, value)

    def extend_sorted(self, m, items) -> int:
        """``append`` of each ``(key, value)`` of ``items``, in order; returns how many."""
        n = 0
        for k, v in items:
            self._t.append(m._n, k, v)
            n += 1
        return n

    def next_sequence(self, m, n=1) -> int:
        """``m``'s sequence as this transaction has it, then adds ``n`` to it (kept by
        the commit, dropped by an abort)."""
        return self._t.next_sequence(m._n, n)

    def set_marker(self, i, value):
        """Sets the store's marker ``i`` (0 to 13) to ``value`` at the commit
        (``Store.ordered_marker(i)`` reads it)."""
        self._t.set_marker(i, value)

    def view(self, m) -> "OrderedWriteView":
        """``m`` as this transaction has it, its own writes (and its nested
        transactions') included: slices, iteration, ``irange``, ``count_range``,
        ``first``/``last``, seeks and ``cursor()`` (see ``OrderedWriteView``)."""
        return OrderedWriteView(self, m)

    def cursor(self, m) -> "OrderedCursor":
        """A cursor over ``m`` as this transaction has it, its own writes included. It
        writes at where it stands (``put_current``, ``remove_current``) and stays usable
        across the transaction's writes: it then stands on its entry as they left it or,
        if they removed it, in the gap it left (``next()`` goes to the entry after it,
        ``prev()`` to the one before). Once the transaction is over its calls raise."""
        return OrderedCursor(self._t.cursor(m._n))

    def nested(self):
        """A nested transaction (a savepoint): ``with t.nested() as n:`` -- writes made
        through ``n`` (or ``t``) in the block stay in ``t`` if the block ends normally,
        and are undone, as if never made, if it raises (the exception propagates).
        ``n.commit()`` and ``n.abort()`` end it early. Nested transactions nest again;
        only the innermost open one may end, and ``t`` commits only when none is
        open."""
        n = object.__new__(type(self)._nested_type)
        n._t = self._t
        n._maps = self._maps
        n.sequence = None
        n._id = self._t.nest()
        return n

    def commit(self) -> int:
        """Commits every write at once; returns the commit's sequence number."""
        self.sequence = self._t.commit()
        return self.sequence

    def abort(self):
        """Drops every write (nested transactions' included)."""
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


class OrderedWrite(_Reads, OrderedTransaction):  # type: ignore[misc]
    """A write transaction on one ordered map (``OrderedMap.write()``), with the
    map-less forms ``t[k] = v``, ``t[k]``, ``del t[k]``, ``k in t``, ``t.get(k)``,
    ``t.put_if_absent(k, v)``, ``t.put_if_present(k, v)``, ``t.remove(k)``,
    ``t.add(k, v)``, ``t.remove_value(k, v)``, ``t.compare_and_swap(k, e, n)``,
    ``t.remove_range(lo, hi)``, ``t.append(k, v)``, ``t.extend_sorted(items)``,
    ``t.next_sequence(n)``, and the map's reads as the transaction has it (its own
    writes included): slices ``t[lo:hi]``, iteration, ``len(t)``, ``irange``,
    ``count_range``, ``first``/``last``, seeks, ``get_all``, ``count_values`` and
    ``cursor()``; see ``OrderedTransaction`` for commit, abort and nested
    transactions."""

    __slots__ = ()

    def __init__(self, native, m):
        super().__init__(native, [m])

    def _m(self):
        return self._maps[0]

    @property
    def _n(self):
        return _TxnReads(self._t, self._maps[0]._n)

    def __bool__(self):
        # A transaction is an object to use, not a container to test: true even when its
        # map is empty (``len`` says that).
        return True

    def cursor(self) -> "OrderedCursor":  # type: ignore[override]
        """A cursor over the map as this transaction has it: see
        ``OrderedTransaction.cursor``."""
        return OrderedTransaction.cursor(self, self._maps[0])

    def __setitem__(self, key, value):
        n = self._m()._n
        if n.duplicates:
            # The key's only value: its others go first.
            self._t.remove(n, key)
        self._t.put(n, key, value, 0)

    def __delitem__(self, key):
        if not self._t.remove(self._m()._n, key):
            raise KeyError(key)

    def put(self, key, value) -> bool:  # type: ignore[override]
        """Sets ``key`` to ``value``; whether the key was new (in a multimap: adds the
        pair; whether it was new)."""
        return self._t.put(self._m()._n, key, value, 0)

    def add(self, key, value) -> bool:
        """Multimap: adds the pair (``key``, ``value``); whether it was new."""
        _need_dups(self._m())
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

    def remove_value(self, key, value) -> bool:  # type: ignore[override]
        """Removes the pair (``key``, ``value``); whether it was there."""
        return self._t.remove_value(self._m()._n, key, value)

    def compare_and_swap(self, key, expected, new) -> bool:  # type: ignore[override]
        """Compare-and-swap of ``key`` as this transaction sees it (see
        ``OrderedMap.compare_and_swap``)."""
        return self._t.compare_and_swap(self._m()._n, key, expected, new)

    def remove_range(self, minimum=None, maximum=None, inclusive=(True, False)) -> int:  # type: ignore[override]
        """Removes the entries from ``minimum`` to ``maximum``; returns how many."""
        lo_in, hi_in = inclusive
        return self._t.remove_range(self._m()._n, minimum, maximum, bool(lo_in), bool(hi_in))

    def append(self, key, value):  # type: ignore[override]
        """Adds ``key`` -> ``value`` past the map's largest key (sorted bulk load)."""
        self._t.append(self._m()._n, key, value)

    def extend_sorted(self, items) -> int:  # type: ignore[override]
        """``append`` of each ``(key, value)`` of ``items``; returns how many."""
        return OrderedTransaction.extend_sorted(self, self._m(), items)

    def next_sequence(self, n=1) -> int:  # type: ignore[override]
        """The map's sequence as this transaction has it, then adds ``n``."""
        return self._t.next_sequence(self._m()._n, n)


class _NestedLevel:
    """What a nested transaction changes of its parent's class: commit and abort end
    this level only, keeping its writes in the parent or undoing them."""

    __slots__ = ()
    _t: Any
    _id: int

    def commit(self):
        """Keeps this nested transaction's writes in its parent (which commits them, or
        not, later)."""
        self._t.unnest(self._id, True)

    def abort(self):
        """Undoes this nested transaction's writes; the parent goes on."""
        self._t.unnest(self._id, False)

    @property
    def active(self) -> bool:
        """Whether this nested transaction is still open."""
        return self._t.nested_active(self._id)

    def __exit__(self, exc_type, exc, tb):
        if self._t.nested_active(self._id):
            if exc_type is None:
                self.commit()
            else:
                self.abort()
        return False


class OrderedNestedTransaction(_NestedLevel, OrderedTransaction):
    """A transaction nested in an ``OrderedTransaction`` (``t.nested()``): the same
    writes and reads, over the same maps; ``commit()`` keeps its writes in the parent,
    ``abort()`` (or an exception out of its ``with`` block) undoes them."""

    __slots__ = ("_id",)


class OrderedNestedWrite(_NestedLevel, OrderedWrite):  # type: ignore[misc]
    """A transaction nested in an ``OrderedWrite`` (``t.nested()``), with its map-less
    forms; see ``OrderedNestedTransaction``."""

    __slots__ = ("_id",)


OrderedTransaction._nested_type = OrderedNestedTransaction  # type: ignore[attr-defined]
OrderedWrite._nested_type = OrderedNestedWrite  # type: ignore[attr-defined]


class OrderedCursor:
    """A position in a snapshot of an ordered map (``OrderedMap.cursor()``,
    ``OrderedSnapshot.cursor()``), or in a map as a write transaction has it
    (``OrderedTransaction.cursor(m)``, ``OrderedWrite.cursor()``), which also writes at
    where it stands (``put_current``, ``remove_current``). Every move returns whether the
    cursor stands on an entry; ``key``, ``value`` and ``item`` are that entry's (None on
    no entry), and ``position`` its rank. Iterating a cursor yields ``(key, value)`` from
    where it stands onwards (from the first entry if it has not moved yet), moving it.

    In a multimap each (key, value) pair is an entry, in key order then value order;
    ``next_key``/``prev_key`` move between keys, ``next_value``/``prev_value`` among
    one key's values, ``seek_value``/``seek_value_ge`` to a pair. Close it (or leave
    its ``with`` block) when done: it keeps its snapshot until then. Bound to the thread
    that made it."""

    __slots__ = ("_c", "_moved")

    def __init__(self, native):
        self._c = native
        self._moved = False

    def _go(self, how) -> bool:
        self._moved = True
        return self._c.step(how)

    def first(self) -> bool:
        """Moves to the first entry."""
        return self._go(_FIRST)

    def last(self) -> bool:
        """Moves to the last entry."""
        return self._go(_LAST)

    def next(self) -> bool:
        """Moves to the next entry."""
        return self._go(_NEXT)

    def prev(self) -> bool:
        """Moves to the previous entry."""
        return self._go(_PREV)

    def seek(self, key) -> bool:
        """Moves to ``key`` (a multimap's first value of it); on no entry if absent."""
        self._moved = True
        return self._c.seek(key, _EXACT)

    def seek_ge(self, key) -> bool:
        """Moves to the first entry whose key is at least ``key`` (the ceiling)."""
        self._moved = True
        return self._c.seek(key, _GE)

    def seek_le(self, key) -> bool:
        """Moves to the last entry whose key is at most ``key`` (the floor; a multimap's
        last value of it)."""
        self._moved = True
        return self._c.seek(key, _LE)

    def next_key(self) -> bool:
        """Multimap: moves to the first value of the next key."""
        return self._go(_NEXT_KEY)

    def prev_key(self) -> bool:
        """Multimap: moves to the last value of the previous key."""
        return self._go(_PREV_KEY)

    def next_value(self) -> bool:
        """Multimap: moves to the next value of the same key; at its last, stays and
        returns False."""
        return self._go(_NEXT_VALUE)

    def prev_value(self) -> bool:
        """Multimap: moves to the previous value of the same key; at its first, stays
        and returns False."""
        return self._go(_PREV_VALUE)

    def seek_value(self, key, value) -> bool:
        """Multimap: moves to the pair (``key``, ``value``); on no entry if absent."""
        self._moved = True
        return self._c.seek_value(key, value, False)

    def seek_value_ge(self, key, value) -> bool:
        """Multimap: moves to the first value of ``key`` at least ``value``; on no
        entry if none."""
        self._moved = True
        return self._c.seek_value(key, value, True)

    @property
    def key(self):
        """The key of the entry the cursor stands on, or None."""
        return self._c.entry(_KEYS)

    @property
    def value(self):
        """The value of the entry the cursor stands on, or None."""
        return self._c.entry(_VALUES)

    @property
    def item(self):
        """``(key, value)`` of the entry the cursor stands on, or None."""
        return self._c.entry(_ITEMS)

    @property
    def position(self):
        """The number of entries before the cursor's (0 for the first), in time
        logarithmic in the map's size; None on no entry."""
        return self._c.position()

    def count_values(self) -> int:
        """The number of values of the key the cursor stands on (0 on no entry)."""
        return self._c.count_values()

    def _writer(self):
        if not hasattr(self._c, "put_current"):
            raise InvalidArgument(
                "a snapshot's cursor does not write: take one from a write transaction"
            )
        return self._c

    def put_current(self, value) -> bool:
        """Write transaction's cursor: sets the value of the entry it stands on (in a
        multimap the pair with the old value gives way to the new pair, and the cursor
        follows it); False, writing nothing, on no entry."""
        return self._writer().put_current(value)

    def remove_current(self) -> bool:
        """Write transaction's cursor: removes the entry it stands on, leaving the cursor
        in the gap (``next()`` goes to the entry after it, ``prev()`` to the one before);
        False on no entry."""
        return self._writer().remove_current()

    def __iter__(self):
        if not self._moved:
            self.first()
        while True:
            e = self._c.entry(_ITEMS)
            if e is None:
                return
            yield e
            self._go(_NEXT)

    def close(self):
        """Ends the cursor and its hold on the snapshot."""
        self._c.close()

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._c.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


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
