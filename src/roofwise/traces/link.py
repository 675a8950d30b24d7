"""Which host op launched each piece of device activity.

Two hops, each with the conventions real traces use (see tests/fixtures/traces/README.md):
1. device event -> launch call: the event's `correlation` equals its launch's; where an event
   carries none, the `ac2g` flow arrow that ends at it leads back to the call it starts at.
2. launch call -> op: newer traces give the call the op's `External id`; it is taken when an
   op with that id runs on the call's thread and encloses it in time (older traces reuse the
   field for the correlation, which must not be mistaken for an op). Otherwise the op is the
   innermost `cpu_op` on the call's thread whose span contains the call.

Both hops work on the reader's columns: where ids are integers (every trace seen so far) the
lookups are sorted-array searches; other ids (strings, floats) go through dictionaries, with
Python's equality, as the file gives them.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from roofwise.traces.reader import (
    NONE_ID,
    CallColumns,
    FlowColumns,
    GpuColumns,
    OpColumns,
    TraceEvents,
)

NO_OP = -1


def launching_ops(events: TraceEvents) -> np.ndarray:
    """For each device event (`events.gpu`, in order), the index of its op, or NO_OP."""
    gpu, calls, ops = events.gpu_columns, events.call_columns, events.op_columns
    assert gpu is not None and calls is not None and ops is not None
    call_of_event = _calls_of_events(gpu, calls, events.flow_start_columns,
                                     events.flow_end_columns)
    call_of_event = _within_processes(call_of_event, gpu, calls, events.threads)
    op_of_call = np.append(_ops_of_calls(ops, calls), NO_OP)  # index -1 (no call): NO_OP
    return op_of_call[call_of_event] if len(call_of_event) else np.zeros(0, dtype=np.int64)


def _first_index(keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Per entry of `wanted`, the first index in `keys` holding the same id; -1 where none
    (or where `wanted` gives no id)."""
    if keys.dtype != object and wanted.dtype != object:
        given = keys != NONE_ID
        unique, first = np.unique(keys[given], return_index=True)
        first = np.flatnonzero(given)[first]
        if not len(unique):
            return np.full(len(wanted), -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(unique, wanted), len(unique) - 1)
        hit = (unique[at] == wanted) & (wanted != NONE_ID)
        return np.where(hit, first[at], -1).astype(np.int64)
    table: dict[Any, int] = {}
    for i, key in enumerate(_values(keys)):
        if key is not None:
            table.setdefault(key, i)
    return np.array([-1 if w is None else table.get(w, -1) for w in _values(wanted)],
                    dtype=np.int64)


def _values(column: np.ndarray) -> list[Any]:
    """An id column as Python values, None where no id was given."""
    if column.dtype == object:
        return list(column)
    return [None if v == NONE_ID else v for v in column.tolist()]


def _calls_of_events(gpu: GpuColumns, calls: CallColumns, starts: FlowColumns | None,
                     ends: FlowColumns | None) -> np.ndarray:
    """Index into the calls per device event; -1 where no call is found."""
    found = _first_index(calls.correlation, gpu.correlation)
    missing = np.flatnonzero(found < 0)
    if not len(missing) or starts is None or ends is None or not len(ends.ts_us):
        return found
    # by flow arrow: the arrow ending where the event is, back to the call where it starts
    start_at = dict(zip(_values(starts.id), zip(starts.thread.tolist(), starts.ts_us.tolist(),
                                                 strict=True), strict=True))
    end_id = dict(zip(zip(ends.thread.tolist(), ends.ts_us.tolist(), strict=True),
                      _values(ends.id), strict=True))
    by_place = {place: i for i, place in enumerate(zip(calls.thread.tolist(),
                                                       calls.ts_us.tolist(), strict=True))}
    for k in missing.tolist():
        arrow = end_id.get((int(gpu.thread[k]), float(gpu.ts_us[k])))
        start = start_at.get(arrow) if arrow is not None else None
        hit = None if start is None else by_place.get(start)
        if hit is not None:
            found[k] = hit
    return found


def _within_processes(found: np.ndarray, gpu: GpuColumns, calls: CallColumns,
                      threads: list[tuple[Any, Any]]) -> np.ndarray:
    """`found` where each correlation id names one process's launch. Where the launches of
    several processes share ids (the traces of several ranks merged into one file: each
    process counts its own from the same start), an id alone would hand one rank's kernels to
    another's ops. Then each device is matched with the process that launched its
    unambiguous events (most of them), and an ambiguous event takes that process's launch;
    one whose device has no such process is left unlinked rather than guessed."""
    if calls.correlation.dtype == object or gpu.correlation.dtype == object or not len(found):
        return found
    pid_codes: dict[Any, int] = {}
    pid_of_thread = np.array([pid_codes.setdefault(str(pid), len(pid_codes))
                              for pid, _ in threads] or [0], dtype=np.int64)
    call_pid = pid_of_thread[calls.thread]
    given = calls.correlation != NONE_ID
    corr = calls.correlation[given]
    n_pids = len(pid_codes)
    if not len(corr) or corr.min() < 0 or corr.max() >= np.iinfo(np.int64).max // (n_pids + 1):
        return found  # ids a composite key cannot hold: left as found
    ids, per_id = np.unique(corr, return_counts=True)
    if len(ids) == len(corr) or len(np.unique(corr * n_pids + call_pid[given])) == len(ids):
        return found  # no id is named by two processes
    shared_ids = ids[per_id > 1]
    ambiguous = np.isin(gpu.correlation, shared_ids) & (found >= 0)
    device = pid_of_thread[gpu.thread]
    sure = np.flatnonzero((found >= 0) & ~ambiguous)
    host_of_device = np.full(n_pids, -1, dtype=np.int64)
    if len(sure):  # each device: the process that launched most of its unambiguous events
        pairs, counts = np.unique(device[sure] * n_pids + call_pid[found[sure]],
                                  return_counts=True)
        order = np.lexsort((-counts, pairs // n_pids))  # by device, the most common first
        devices, first = np.unique((pairs // n_pids)[order], return_index=True)
        host_of_device[devices] = (pairs % n_pids)[order][first]
    at = np.flatnonzero(ambiguous)
    host = host_of_device[device[at]]
    keys = np.where(given, calls.correlation * n_pids + call_pid, NONE_ID)
    wanted = np.where(host >= 0, gpu.correlation[at] * n_pids + host, NONE_ID)
    result = found.copy()
    result[at] = _first_index(keys, wanted)
    return result


def _ops_of_calls(ops: OpColumns, calls: CallColumns) -> np.ndarray:
    """Index into ops per call: the op its External id names (when that op encloses it on
    its thread), else the innermost enclosing op on its thread; NO_OP when none does."""
    named = _first_index(ops.external_id, calls.external_id)
    at = np.maximum(named, 0)
    encloses = ((named >= 0) & (ops.thread[at] == calls.thread) if len(ops.thread) else
                np.zeros(len(named), dtype=bool))
    if len(ops.thread):
        encloses &= (ops.ts_us[at] <= calls.ts_us) & (calls.ts_us <= ops.end_us[at])
    result = np.where(encloses, named, NO_OP).astype(np.int64)
    rest = np.flatnonzero(~encloses)
    if len(rest):
        result[rest] = _innermost(ops, calls, rest)
    return result


def _innermost(ops: OpColumns, calls: CallColumns, wanted: np.ndarray) -> np.ndarray:
    """For the calls `wanted`, one sweep per thread over ops and calls in time order, with a
    stack of open ops."""
    result = np.full(len(wanted), NO_OP, dtype=np.int64)
    calls_by_thread: dict[int, list[int]] = defaultdict(list)
    for k, i in enumerate(wanted.tolist()):
        calls_by_thread[int(calls.thread[i])].append(k)
    call_ts = calls.ts_us[wanted].tolist()
    # Two ops with the same span (a wrapper and the op it calls, within the clock's
    # microsecond) are told apart by their External ids, which the profiler hands out as ops
    # start: the caller's is the lower, so the callee is the inner one, whatever the file's
    # order. Ids that are not integers leave such ties in file order.
    ids = (ops.external_id if ops.external_id.dtype != object
           else np.zeros(len(ops.external_id), dtype=np.int64))
    for thread, ks in calls_by_thread.items():
        mine = np.flatnonzero(ops.thread == thread)
        order = mine[np.lexsort((ids[mine], -(ops.end_us[mine] - ops.ts_us[mine]),
                                 ops.ts_us[mine]))]
        starts, ends = ops.ts_us[order].tolist(), ops.end_us[order].tolist()
        numbers = order.tolist()
        ks.sort(key=lambda k: call_ts[k])
        stack: list[int] = []  # positions in `order`
        j = 0
        for k in ks:
            t = call_ts[k]
            while j < len(numbers) and starts[j] <= t:  # ops opened by now
                while stack and ends[stack[-1]] < starts[j]:
                    stack.pop()
                stack.append(j)
                j += 1
            while stack and ends[stack[-1]] < t:
                stack.pop()
            if stack:
                result[k] = numbers[stack[-1]]
    return result
