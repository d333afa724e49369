"""shoal.ABSENT: the "no value" marker of compare_and_swap() and modify()."""

__all__ = ["ABSENT"]


class _AbsentType:
    """The type of :data:`shoal.ABSENT` (a singleton: pickling and copying keep it)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "shoal.ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "ABSENT"  # pickled by reference to shoal._absent.ABSENT


ABSENT = _AbsentType()
"""Marks "no value": as `expected` in compare_and_swap, the key must be absent; as the
new value (of compare_and_swap, or returned by a modify() function), the key is removed;
modify() passes it to its function when the key is absent."""
