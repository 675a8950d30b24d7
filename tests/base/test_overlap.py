"""Batches read and written on background threads: order kept, failures raised in order."""

from __future__ import annotations

import threading
import time

import pytest

from roofwise.base.overlap import BackgroundWriter, in_order


def test_jobs_run_side_by_side_and_results_keep_their_order():
    started = threading.Barrier(2, timeout=10)  # two jobs must run at once to pass it
    threads = []

    def job(k):
        def run():
            threads.append(threading.current_thread().name)
            if k < 2:
                started.wait()
            time.sleep(0.01 * (5 - k))  # later jobs finish first
            return k
        return run

    def jobs():
        for k in range(5):
            threads.append(threading.current_thread().name)  # cut on the feeding thread
            yield job(k)

    assert list(in_order(jobs(), workers=2)) == [0, 1, 2, 3, 4]
    assert all(name.startswith("roofwise-read") for name in threads)


def test_a_failure_is_raised_after_the_results_before_it():
    def jobs():
        yield lambda: 1
        yield lambda: 2
        raise ValueError("bad batch 3")

    seen = []
    with pytest.raises(ValueError, match="bad batch 3"):
        for item in in_order(jobs()):
            seen.append(item)
    assert seen == [1, 2]

    def failing():
        raise ValueError("bad job")

    seen = []
    with pytest.raises(ValueError, match="bad job"):
        for item in in_order(iter([lambda: 1, failing, lambda: 3])):
            seen.append(item)
    assert seen == [1]


def test_a_caller_that_stops_early_ends_the_threads():
    cut = []

    def jobs():
        for k in range(1000):
            cut.append(k)
            yield lambda k=k: k

    before = threading.active_count()
    for item in in_order(jobs(), workers=2):
        if item == 3:
            break
    assert threading.active_count() == before
    assert len(cut) < 20  # the file was not read on after the caller stopped


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
