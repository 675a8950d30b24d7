"""Batches read, judged and written at once.

The engine's readers and writers (polars) release the GIL while they parse and format, so on
a machine with two cores or more the next batches can be read, and the previous one written,
while one is judged. Reading is cut in two: one thread cuts the file into batches in order,
and a few threads parse them side by side (`in_order`); writing is one background thread, in
order. Memory stays bounded by a few batches, and output order is input order.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from queue import Empty, Queue
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")
_END = object()
READERS = 2  # batches parsed at once: with the judge and the writer, every core of two busy


def in_order(jobs: Iterator[Callable[[], T]], workers: int = READERS) -> Iterator[T]:
    """The result of each job, in the order of `jobs`: `jobs` is advanced on a background
    thread, and up to `workers` jobs run at once on others, while the caller works on the
    result before. An exception (advancing `jobs`, or in a job) is raised here, in order."""
    pool = ThreadPoolExecutor(workers, thread_name_prefix="roofwise-read")
    pending: Queue[Any] = Queue(maxsize=workers)  # futures, in job order, then _END
    stop = threading.Event()

    def feed() -> None:
        try:
            for job in jobs:
                if stop.is_set():
                    break
                pending.put(pool.submit(job))
        except BaseException as exc:  # the file itself is bad: said after the batches before
            failed: Future[Any] = Future()
            failed.set_exception(exc)
            pending.put(failed)
        pending.put(_END)

    feeder = threading.Thread(target=feed, name="roofwise-read-feed", daemon=True)
    feeder.start()
    try:
        while True:
            item = pending.get()
            if item is _END:
                return
            yield item.result()
    finally:  # the caller stopped early (or finished): let the feeder end, then the jobs
        stop.set()
        while feeder.is_alive():
            with contextlib.suppress(Empty):
                pending.get(timeout=0.05)
        pool.shutdown(wait=True, cancel_futures=True)


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
