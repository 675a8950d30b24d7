"""Which host op launched each piece of device activity.

Two hops, each with the conventions real traces use (see tests/fixtures/traces/README.md):
1. device event -> launch call: the event's `correlation` equals its launch's; where an event
   carries none, the `ac2g` flow arrow that ends at it leads back to the call it starts at.
2. launch call -> op: newer traces give the call the op's `External id`; it is taken when an
   op with that id runs on the call's thread and encloses it in time (older traces reuse the
   field for the correlation, which must not be mistaken for an op). Otherwise the op is the
   innermost `cpu_op` on the call's thread whose span contains the call.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from roofwise.traces.reader import CpuOp, Flow, GpuEvent, RuntimeCall, TraceEvents

NO_OP = -1


def launching_ops(events: TraceEvents) -> np.ndarray:
    """For each device event (`events.gpu`, in order), the index of its op, or NO_OP."""
    call_of_event = _calls_of_events(events)
    op_of_call = _ops_of_calls(events.ops, events.calls)
    op_of_call = np.append(op_of_call, NO_OP)  # index -1 (no call) maps to NO_OP
    return op_of_call[call_of_event] if len(call_of_event) else np.zeros(0, dtype=np.int64)


def _calls_of_events(events: TraceEvents) -> np.ndarray:
    """Index into events.calls per device event; -1 where no call is found."""
    by_correlation: dict[Any, int] = {}
    for i, call in enumerate(events.calls):
        by_correlation.setdefault(call.correlation, i)
    by_place = {(c.pid, c.tid, c.ts_us): i for i, c in enumerate(events.calls)}
    flow_start = {f.id: f for f in events.flow_starts}
    flow_end = {(f.pid, f.tid, f.ts_us): f.id for f in events.flow_ends}
    found = np.full(len(events.gpu), -1, dtype=np.int64)
    for k, event in enumerate(events.gpu):
        hit = by_correlation.get(event.correlation) if event.correlation is not None else None
        if hit is None:
            hit = _by_flow(event, flow_end, flow_start, by_place)
        if hit is not None:
            found[k] = hit
    return found


def _by_flow(event: GpuEvent, flow_end: dict[tuple[Any, Any, float], Any],
             flow_start: dict[Any, Flow], by_place: dict[tuple[Any, Any, float], int]
             ) -> int | None:
    arrow = flow_end.get((event.pid, event.tid, event.ts_us))
    start = flow_start.get(arrow) if arrow is not None else None
    return None if start is None else by_place.get((start.pid, start.tid, start.ts_us))


def _ops_of_calls(ops: Sequence[CpuOp], calls: Sequence[RuntimeCall]) -> np.ndarray:
    """Index into ops per call: the op its External id names (when that op encloses it on
    its thread), else the innermost enclosing op on its thread; NO_OP when none does."""
    inner = _innermost(ops, calls)
    by_external: dict[Any, int] = {}
    for op in ops:
        if op.external_id is not None:
            by_external.setdefault(op.external_id, op.number)
    for i, call in enumerate(calls):
        named = by_external.get(call.external_id) if call.external_id is not None else None
        if named is not None and _encloses(ops[named], call):
            inner[i] = named
    return inner


def _encloses(op: CpuOp, call: RuntimeCall) -> bool:
    return (op.pid, op.tid) == (call.pid, call.tid) and op.ts_us <= call.ts_us <= op.end_us


def _innermost(ops: Sequence[CpuOp], calls: Sequence[RuntimeCall]) -> np.ndarray:
    """One sweep per thread over ops and calls in time order, with a stack of open ops."""
    result = np.full(len(calls), NO_OP, dtype=np.int64)
    ops_by_thread: dict[tuple[Any, Any], list[CpuOp]] = defaultdict(list)
    calls_by_thread: dict[tuple[Any, Any], list[int]] = defaultdict(list)
    for op in ops:
        ops_by_thread[(op.pid, op.tid)].append(op)
    for i, call in enumerate(calls):
        calls_by_thread[(call.pid, call.tid)].append(i)
    for thread, call_ids in calls_by_thread.items():
        thread_ops = sorted(ops_by_thread.get(thread, ()),
                            key=lambda o: (o.ts_us, -(o.end_us - o.ts_us)))
        call_ids.sort(key=lambda i: calls[i].ts_us)
        stack: list[CpuOp] = []
        k = 0
        for i in call_ids:
            t = calls[i].ts_us
            while k < len(thread_ops) and thread_ops[k].ts_us <= t:  # ops opened by now
                opened = thread_ops[k]
                while stack and stack[-1].end_us < opened.ts_us:
                    stack.pop()
                stack.append(opened)
                k += 1
            while stack and stack[-1].end_us < t:
                stack.pop()
            if stack:
                result[i] = stack[-1].number
    return result
