"""Sequences whose items are built only when looked at: a million rows cost their columns,
not a million objects."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar, overload

T = TypeVar("T")


class Built(Sequence[T]):
    """A sequence of `len(self)` items, item `k` made by `_at(k)` when it is read."""

    def _at(self, k: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, k: int) -> T: ...

    @overload
    def __getitem__(self, k: slice) -> list[T]: ...

    def __getitem__(self, k: int | slice) -> T | list[T]:
        if isinstance(k, slice):
            return [self._at(j) for j in range(*k.indices(len(self)))]
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError(k)
        return self._at(k)

    def __iter__(self) -> Iterator[T]:
        for k in range(len(self)):
            yield self._at(k)


class BuiltRows(Built[T]):
    """`n` items, item `k` being `at(k)`."""

    def __init__(self, n: int, at: Callable[[int], T]) -> None:
        self._n, self._make = n, at

    def __len__(self) -> int:
        return self._n

    def _at(self, k: int) -> T:
        return self._make(k)
