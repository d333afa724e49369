"""Live views returned by Map.keys(), Map.values() and Map.items(). They are the
collections.abc views, iterating with the map's native batched iterators."""

from collections.abc import ItemsView as _ItemsView
from collections.abc import KeysView as _KeysView
from collections.abc import ValuesView as _ValuesView

__all__ = ["KeysView", "ValuesView", "ItemsView"]


class KeysView(_KeysView):
    """A live, set-like view of a shoal Map's keys."""

    __slots__ = ()

    def __iter__(self):
        return self._mapping._iter_keys()

    def __repr__(self):
        return f"shoal.KeysView({self._mapping!r})"


class ValuesView(_ValuesView):
    """A live view of a shoal Map's values."""

    __slots__ = ()

    def __iter__(self):
        return self._mapping._iter_values()

    def __contains__(self, value):
        for v in self._mapping._iter_values():
            if v is value or v == value:
                return True
        return False

    def __repr__(self):
        return f"shoal.ValuesView({self._mapping!r})"


class ItemsView(_ItemsView):
    """A live, set-like view of a shoal Map's (key, value) pairs."""

    __slots__ = ()

    def __iter__(self):
        return self._mapping._iter_items()

    def __repr__(self):
        return f"shoal.ItemsView({self._mapping!r})"
