"""Batches read and written on background threads: order kept, failures raised in order."""

from __future__ import annotations

import threading

import pytest

from roofwise.overlap import BackgroundWriter, prefetched


def test_prefetched_keeps_order_and_reads_ahead_on_another_thread():
    threads = []

    def items():
        for k in range(5):
            threads.append(threading.current_thread().name)
            yield k

    assert list(prefetched(items())) == [0, 1, 2, 3, 4]
    assert all(name.startswith("roofwise-read") for name in threads)


def test_prefetched_raises_a_failure_after_the_items_before_it():
    def items():
        yield 1
        yield 2
        raise ValueError("bad batch 3")

    seen = []
    with pytest.raises(ValueError, match="bad batch 3"):
        for item in prefetched(items()):
            seen.append(item)
    assert seen == [1, 2]


def test_writes_run_in_order_on_one_background_thread():
    done: list[tuple[int, str]] = []
    with BackgroundWriter() as writer:
        for k in range(6):
            writer.submit(lambda k=k: done.append((k, threading.current_thread().name)))
    assert [k for k, _ in done] == list(range(6))
    assert {name.split("_")[0] for _, name in done} == {"roofwise-write"}


def test_a_failed_write_is_raised_and_later_writes_do_not_run():
    done = []

    def fail():
        raise BrokenPipeError("closed")

    writer = BackgroundWriter()
    writer.submit(lambda: done.append(1))
    writer.submit(fail)
    with pytest.raises(BrokenPipeError):
        writer.submit(lambda: done.append(3))
    assert done == [1]
    with pytest.raises(BrokenPipeError), BackgroundWriter() as other:
        other.submit(fail)
