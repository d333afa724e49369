"""shoal.Transaction and shoal.Watch: multi-key transactions over a store's hash maps,
``FixedMap`` (bytes keys and values) and ``Map`` (keys and values through its codecs)
mixed freely (see Store.transaction, Store.watch and Store.snapshot_get)."""

import time as _time

from ._errors import Timeout
from ._fixed import FixedMap

__all__ = ["Transaction", "Watch", "watch"]

_INT_OPS = ("==", "!=", "<", "<=", ">", ">=")


def _i64(x: int) -> bytes:
    return int(x).to_bytes(8, "little", signed=True)


class _List:
    """The operations of one list of a transaction (``t`` itself for the then-list,
    ``t.otherwise`` for the else-list)."""

    __slots__ = ("_ops",)

    def __init__(self):
        self._ops = []

    def get(self, m, key):
        """Reads ``key`` of map ``m`` (its value is the operation's result)."""
        self._ops.append((m, key, "get", None, 0))
        return self

    def put(self, m, key, value):
        """Inserts ``key`` or replaces its value."""
        self._ops.append((m, key, "put", value, 0))
        return self

    def put_if_absent(self, m, key, value):
        """Inserts ``key`` if it is absent."""
        self._ops.append((m, key, "put_if_absent", value, 0))
        return self

    def put_if_present(self, m, key, value):
        """Replaces ``key``'s value if it is present."""
        self._ops.append((m, key, "put_if_present", value, 0))
        return self

    def remove(self, m, key):
        """Removes ``key`` if it is present."""
        self._ops.append((m, key, "remove", None, 0))
        return self

    def add(self, m, key, delta):
        """Adds ``delta`` to ``key``'s 8-byte little-endian signed value (absent: 0)."""
        self._ops.append((m, key, "add", None, int(delta)))
        return self


class Transaction(_List):
    """A multi-key transaction on a store's hash maps (``Store.transaction()``), each a
    ``FixedMap`` or a ``Map`` (whose keys, values and old values go through its codecs):
    conditions (``when_*``), a then-list (the operations called on the transaction) and
    an else-list (on ``t.otherwise``), committed as one atomic step that no reader,
    writer or crash sees in part. ``commit()`` returns ``(succeeded, results)``:
    whether every condition held, and one ``(applied, old_value)`` per operation of the
    list that ran. As a context manager, it commits at the end of the block (unless the
    block raised) and ``t.succeeded`` / ``t.results`` hold the outcome::

        with store.transaction() as t:
            t.when_int(acct, a, ">=", 10)
            t.add(acct, a, -10).add(acct, b, 10)
        assert t.succeeded

    Limits: the keys may lie in at most 8 index segments and the writes must fit one
    redo list of 20 words (a 2-key transfer of 8-byte values takes 4); past either,
    ``shoal.InvalidArgument`` ("transaction too large") and nothing changes.
    """

    __slots__ = ("_store", "_conds", "otherwise", "succeeded", "results")

    def __init__(self, store):
        super().__init__()
        self._store = store
        self._conds = []
        self.otherwise = _List()
        self.succeeded = None
        self.results = None

    def when_present(self, m, key):
        """Condition: ``key`` is present in ``m``."""
        self._conds.append((m, key, "present", None, 0))
        return self

    def when_absent(self, m, key):
        """Condition: ``key`` is absent from ``m``."""
        self._conds.append((m, key, "absent", None, 0))
        return self

    def when_equals(self, m, key, value):
        """Condition: ``key`` is present with exactly ``value``."""
        self._conds.append((m, key, "equals", value, 0))
        return self

    def when_int(self, m, key, op, operand):
        """Condition: ``key``'s 8-byte little-endian signed value ``op`` ``operand``,
        ``op`` one of "==", "!=", "<", "<=", ">", ">=" (an absent key fails it)."""
        if op not in _INT_OPS:
            raise ValueError(f"op must be one of {_INT_OPS}, not {op!r}")
        self._conds.append((m, key, op, None, int(operand)))
        return self

    def when_version(self, m, key, version):
        """Condition: ``key`` of ``m`` (a ``Map`` with UIDs) is present and its UID
        entry's version is ``version`` (``m.version(key)`` reads it; every change to the
        key moves it)."""
        self._conds.append((m, key, "version", None, int(version)))
        return self

    def commit(self):
        """Evaluates the conditions and applies the list they choose, atomically.
        Returns ``(succeeded, [(applied, old_value_or_None), ...])``."""
        ok, results = self._store._txn_commit(self._conds, self._ops, self.otherwise._ops)
        self.succeeded, self.results = ok, results
        return ok, results

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
        return False


class Watch:
    """What ``Store.watch``'s function reads and writes through: reads are recorded
    (the commit happens only if each key still holds the bytes that were read), writes
    buffered. Maps are ``FixedMap`` or ``Map`` (through its codecs)."""

    __slots__ = ("_store", "_reads", "_writes")

    def __init__(self, store=None):
        self._store = store
        self._reads = {}
        self._writes = _List()

    def get(self, m, key):
        """The value of ``key`` in map ``m`` (None if absent), recorded. A key read again
        returns the value recorded first."""
        k = (id(m), key)
        try:
            hash(k)
        except TypeError:  # a json or pickle key such as a list: compare its text
            k = (id(m), repr(key))
        if k not in self._reads:
            if self._store is None:
                raw = value = m.get(key)
            else:
                # The stored bytes, not the decoded value, make the commit's condition:
                # a codec need not encode a decoded value back to the same bytes.
                raw, value = self._store._txn_read(m, key)
            self._reads[k] = (m, key, raw, value)
        return self._reads[k][3]

    def get_int(self, m, key):
        """``get`` as an integer (0 if absent): a ``FixedMap``'s 8-byte little-endian
        signed value, or a ``Map``'s decoded one (codec "int")."""
        v = self.get(m, key)
        if v is None:
            return 0
        return v if isinstance(v, int) else int.from_bytes(v, "little", signed=True)

    def put(self, m, key, value):
        """Buffers a put."""
        self._writes.put(m, key, value)

    def put_int(self, m, key, value):
        """Buffers a put of an integer: 8 bytes little-endian signed in a ``FixedMap``,
        through the codec in a ``Map``."""
        self._writes.put(m, key, _i64(value) if isinstance(m, FixedMap) else int(value))

    def put_if_absent(self, m, key, value):
        """Buffers a put applied if the key is absent."""
        self._writes.put_if_absent(m, key, value)

    def put_if_present(self, m, key, value):
        """Buffers a put applied if the key is present."""
        self._writes.put_if_present(m, key, value)

    def remove(self, m, key):
        """Buffers a remove."""
        self._writes.remove(m, key)

    def add(self, m, key, delta):
        """Buffers an add."""
        self._writes.add(m, key, delta)


def watch(store, func):
    """``Store.watch``: runs ``func(Watch())`` and commits its writes if nothing it read
    changed meanwhile; otherwise runs it again, until the store's lock timeout."""
    deadline = _time.monotonic() + store.lock_timeout
    tries = 0
    while True:
        w = Watch(store)
        out = func(w)
        t = Transaction(store)
        for m, key, raw, _ in w._reads.values():
            if raw is None:
                t.when_absent(m, key)
            else:
                t._conds.append((m, key, "equals_raw", raw, 0))
        t._ops = w._writes._ops
        ok, _ = t.commit()
        if ok:
            return out
        tries += 1
        if _time.monotonic() > deadline:
            raise Timeout(f"watch: the keys read kept changing for {store.lock_timeout} s")
        _time.sleep(min(0.001 * tries, 0.02) if tries > 4 else 0)
