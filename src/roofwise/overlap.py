"""Batches read, judged and written at once.

The engine's readers and writers (polars) release the GIL while they parse and format, so on
a machine with two cores or more the next batch can be read, and the previous one written,
while one is judged. Each side is one background thread, in order, holding at most one batch:
memory stays bounded by three batches, and output order is input order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import TypeVar

T = TypeVar("T")
_END = object()


def prefetched(items: Iterator[T]) -> Iterator[T]:
    """`items`, each produced on a background thread while the caller works on the one
    before. An exception raised producing an item is raised here, in order."""
    with ThreadPoolExecutor(1, thread_name_prefix="roofwise-read") as pool:
        pending: Future[object] = pool.submit(next, items, _END)
        while True:
            item = pending.result()
            if item is _END:
                return
            pending = pool.submit(next, items, _END)
            yield item  # type: ignore[misc]


class BackgroundWriter:
    """Writes run one after another on a background thread, in the order submitted.

    A failed write (a closed pipe, a full disk) is raised by the next `submit`, or on leaving
    the `with` block; the writes after it are not run.
    """

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="roofwise-write")
        self._pending: Future[None] | None = None

    def submit(self, write: Callable[[], None]) -> None:
        """Run `write` once every earlier write is done (at most one waits)."""
        self.wait()
        self._pending = self._pool.submit(write)

    def wait(self) -> None:
        """Every submitted write done; the first failure raised."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def __enter__(self) -> BackgroundWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        try:
            if kind is None:
                self.wait()
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)
