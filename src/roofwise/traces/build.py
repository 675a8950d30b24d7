"""From linked trace events to benchmark records: one per host op that launched kernels.

A record's time is the sum of its kernels' durations (`timing: kernel`, `kernels`: how many),
its device the name `deviceProperties` gives its first kernel's device, its work and bytes the
ledger `aten.py` finds for the op's recorded shapes. Device activity that is not a kernel
(memcpy, memset), communication kernels (`collectives.py` says which) and kernels no op
launched are not records: they are accounted for in the summary, so that every microsecond of
the trace is either priced or said to be unpriced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from roofwise.traces.aten import OpPrice, make_call, unpriced
from roofwise.traces.attention import nested_attention
from roofwise.traces.collectives import (
    Message,
    is_collective_kernel,
    is_collective_op,
    message_of,
)
from roofwise.traces.link import NO_OP, launching_ops
from roofwise.traces.prices import price_call
from roofwise.traces.reader import CpuOp, TraceEvents
from roofwise.traces.timeline import Timeline, timeline

US = 1e-6  # trace timestamps and durations are in microseconds
is_communication = is_collective_kernel  # by kernel name; its op's name counts too (below)


@dataclass(frozen=True, slots=True)  # slots: a trace can hold a million of these
class TraceOp:
    """One host op that launched kernels, with its price (or why it has none)."""

    op: str
    shapes: tuple[Any, ...]
    dtypes: tuple[str, ...]
    device: str
    time_s: float  # summed kernel durations
    kernels: int
    price: OpPrice
    communication: bool
    message: Message | None = None  # a collective's message, when it is one

    @property
    def workload(self) -> dict[str, Any]:
        return {"shapes": [list(s) if isinstance(s, (list, tuple)) else s for s in self.shapes],
                "dtypes": list(self.dtypes)}

    def record(self, shared: dict[int, dict[str, Any]] | None = None) -> dict[str, Any] | None:
        """The benchmark record, or None when the op could not be priced.

        `shared` keeps, per price (one per distinct op and shapes), the fields all its calls
        have in common, so a trace of a million calls builds each ledger's record once."""
        ledger = self.price.ledger
        if ledger is None:
            return None
        cache = shared if shared is not None else {}
        common = cache.get(id(self.price))
        if common is None:
            common = ledger.to_record()
            common.update(op=self.op, workload=self.workload, timing="kernel",
                          priced_by=self.price.source)
            if self.price.reason:
                common["note"] = self.price.reason
            cache[id(self.price)] = common
        record = {**common, "time_s": self.time_s, "kernels": self.kernels}
        if self.device:
            record["device"] = self.device
        return record


@dataclass(frozen=True)
class TraceSummary:
    """Where the trace's device time went (summed durations, in seconds)."""

    kernel_time_s: float
    priced_time_s: float
    communication_time_s: float
    memcpy_time_s: float
    memset_time_s: float
    unattributed_time_s: float  # non-communication kernels no traced host op launched
    kernels: int
    ops: int
    priced_ops: int
    devices: tuple[str, ...] = field(default=())
    skipped: tuple[tuple[str, int], ...] = field(default=())  # (why, events) the reader skipped
    timeline: Timeline | None = None  # the same time on the clock (overlaps counted once)
    rank: int | None = None  # distributedInfo's rank

    @property
    def skipped_events(self) -> int:
        return sum(n for _, n in self.skipped)

    @property
    def gpu_time_s(self) -> float:
        return self.kernel_time_s + self.memcpy_time_s + self.memset_time_s

    @property
    def unpriced_time_s(self) -> float:
        """Kernel time not priced, communication excluded (it has a line of its own)."""
        return self.kernel_time_s - self.priced_time_s - self.communication_time_s


@dataclass(frozen=True)
class TraceOps:
    ops: tuple[TraceOp, ...]
    summary: TraceSummary


def build_ops(events: TraceEvents, allow_tf32: bool = False, replay: bool = True,
              progress: Callable[[int, int], None] | None = None) -> TraceOps:
    """One TraceOp per host op that launched kernels, and the summary of device time."""
    op_of = launching_ops(events)
    kinds = np.array([g.kind for g in events.gpu], dtype=object)
    dur_s = np.array([g.dur_us for g in events.gpu], dtype=np.float64) * US
    kernel = kinds == "kernel"
    collective_op = np.array([is_collective_op(o.name) for o in events.ops] + [False],
                             dtype=bool)  # the last entry: NO_OP
    comm = np.array([g.kind == "kernel" and is_communication(g.name) for g in events.gpu],
                    dtype=bool) | (kernel & collective_op[op_of])
    launched = kernel & (op_of != NO_OP)
    ops_with_kernels = np.unique(op_of[launched])
    time_by_op = np.bincount(op_of[launched], weights=dur_s[launched],
                             minlength=len(events.ops))
    count_by_op = np.bincount(op_of[launched], minlength=len(events.ops))
    comm_by_op = np.bincount(op_of[launched & comm], minlength=len(events.ops))
    first_device = {}
    recorded: dict[int, tuple[object, ...]] = {}  # op -> its first kernel's collective fields
    comm_kernel: dict[int, str] = {}  # op -> its first communication kernel's name
    for k in np.flatnonzero(launched)[::-1]:
        first_device[int(op_of[k])] = events.gpu[int(k)].device
        if comm[k]:
            comm_kernel[int(op_of[k])] = events.gpu[int(k)].name
            if events.gpu[int(k)].comms is not None:
                recorded[int(op_of[k])] = events.gpu[int(k)].comms
    result: list[TraceOp] = []
    # an attention op enclosing another that launched kernels: the inner one carries the count
    carried = nested_attention(events.ops, ops_with_kernels.tolist())
    for n, index in enumerate(ops_with_kernels.tolist()):
        op = events.ops[index]
        communication = bool(comm_by_op[index])
        price = (unpriced("communication: priced on the interconnect, not the roofline")
                 if communication else unpriced(carried[index]) if index in carried
                 else _price(op, allow_tf32, replay))
        device = events.device_names.get(first_device.get(index), "")
        result.append(TraceOp(op.name, op.dims, op.types, device, float(time_by_op[index]),
                              int(count_by_op[index]), price, communication,
                              message_of(op.name, op.dims, op.types, recorded.get(index),
                                         comm_kernel.get(index, ""))
                              if communication else None))
        if progress is not None and n % 256 == 0:
            progress(n, len(ops_with_kernels))
    priced_time = sum(o.time_s for o in result if o.price.priced)
    summary = TraceSummary(
        kernel_time_s=float(dur_s[kernel].sum()),
        priced_time_s=float(priced_time),
        communication_time_s=float(dur_s[comm].sum()),
        memcpy_time_s=float(dur_s[kinds == "memcpy"].sum()),
        memset_time_s=float(dur_s[kinds == "memset"].sum()),
        unattributed_time_s=float(dur_s[kernel & ~comm & (op_of == NO_OP)].sum()),
        kernels=int(kernel.sum()), ops=len(result),
        priced_ops=sum(1 for o in result if o.price.priced),
        devices=tuple(sorted(set(events.device_names.values()))),
        skipped=tuple(sorted(events.skipped.items(), key=lambda kv: -kv[1])),
        timeline=_timeline(events, dur_s, kernel, comm), rank=events.rank)
    return TraceOps(tuple(result), summary)


def _timeline(events: TraceEvents, dur_s: np.ndarray, kernel: np.ndarray,
              comm: np.ndarray) -> Timeline:
    start_us = np.array([g.ts_us for g in events.gpu], dtype=np.float64)
    # from the first event: epoch microseconds in seconds would lose a tenth of a microsecond
    start_s = (start_us - start_us.min()) * US if len(start_us) else start_us
    return timeline(start_s, dur_s, kernel, comm)


def _price(op: CpuOp, allow_tf32: bool, replay: bool) -> OpPrice:
    return price_call(make_call(op.name, op.dims, op.types, op.concrete), allow_tf32, replay)
