"""A trace in, verdicts out: read, link, price each op, judge the priced ones, group them.

The records go through the same `analysis.analyze` as any records file, so a trace's verdicts
are the verdicts `roofwise analyze` gives the records `--records-out` writes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from roofwise.base import fmt
from roofwise.base.errors import InputError
from roofwise.output.analysis import Analysis, analyze
from roofwise.profiles.load import match_device
from roofwise.profiles.machine import Machine
from roofwise.records.read import LazyRows, RecordColumns, columns_from_valid
from roofwise.traces.aten import TRACE_DTYPES
from roofwise.traces.build import (
    OpTable,
    TraceOp,
    TraceOps,
    TraceSummary,
    build_ops,
    call_record,
)
from roofwise.traces.collectives import CollectiveJudged, judge_collective
from roofwise.traces.reader import read_trace
from roofwise.verdicts.rules import BLANK, VERDICTS

JUDGED_AT_ONCE = 32768  # records judged per slice: what judging a trace holds at a time


@dataclass(frozen=True)
class CallVerdicts:
    """What a trace's groups read of its judged records, one entry per record: its bound and
    its verdict. Judged a slice of records at a time, so that a million calls never hold a
    million rows of prices and readings at once."""

    sol_time_s: np.ndarray  # float64
    verdict: np.ndarray  # int8 codes into VERDICTS
    machines: tuple[str, ...]  # the profiles the records were judged on, sorted


@dataclass(frozen=True)
class Judging:
    """How a trace's records are judged (`analysis.analyze`'s arguments)."""

    machines: Mapping[str, Machine]
    machine: Machine | None = None  # overrides the devices the trace names
    regime: str | None = None
    mix: str | None = None

    def of(self, columns: RecordColumns) -> Analysis:
        return analyze(columns, self.machines, self.machine, self.regime, self.mix)


@dataclass(frozen=True)
class TraceAnalysis:
    path: str
    ops: Sequence[TraceOp]  # made from the table when read
    table: OpTable  # the ops as columns
    summary: TraceSummary
    priced: TraceRecords  # one record per priced op, in op order
    record_of_op: np.ndarray  # per op, its index into the records (-1: unpriced)
    verdicts: CallVerdicts | None  # None when no op could be priced
    judging: Judging
    # per communication op (by index into ops), its bound on the interconnect and verdict
    collectives: Mapping[int, CollectiveJudged] = field(default_factory=dict)

    @property
    def records(self) -> Sequence[Mapping[str, Any]]:
        """The records, each built when read (`--records-out`)."""
        return self.priced.rows()

    def analysis(self) -> Analysis | None:
        """Every record judged at once, as `roofwise analyze` judges the records file (the
        report's rows); None when no op could be priced."""
        return self.judging.of(self.priced.columns()) if len(self.priced) else None

    @property
    def bounded_time_s(self) -> float:
        """The kernel time of the ops judged against a bound: priced (a ledger) and given a
        speed-of-light time on a profile. A priced op with no profile, or on a profile that
        lacks a rate it needs, has none, and is not counted here."""
        if self.verdicts is None:
            return 0.0
        record = self.record_of_op
        at = np.maximum(record, 0)
        sol = self.verdicts.sol_time_s[at]
        bounded = ((record >= 0) & (self.verdicts.verdict[at] != BLANK) & np.isfinite(sol)
                   & (sol > 0))
        # left to right, in op order (as the priced time is summed)
        return float(np.cumsum(self.table.time_s[bounded])[-1]) if bounded.any() else 0.0

    def reasons(self, record: int) -> list[str]:
        """Why record `record` got its verdict (judged on its own: a row's verdict is its
        own, whatever rows are judged beside it)."""
        return self.judging.of(self.priced.columns(np.array([record]))).reasons(0)


def analyze_trace(path: str | Path, machines: Mapping[str, Machine],
                  machine: Machine | None = None, regime: str | None = None,
                  mix: str | None = None, allow_tf32: bool = False,
                  on_bytes: Callable[[int], None] | None = None,
                  on_size: Callable[[int], None] | None = None) -> TraceAnalysis:
    """Read and judge a trace; `machine` overrides the devices the trace names."""
    built = build_ops(read_trace(path, progress=on_bytes, total=on_size),
                      allow_tf32=allow_tf32)  # the raw events are freed before judging
    if built.summary.kernels == 0:
        skipped = built.summary.skipped_events
        raise InputError(str(path), "no kernel events (cat: kernel, with ts and dur) in the "
                                    "trace" + (f" ({skipped:,} malformed event(s) skipped: "
                                               f"{skipped_text(built.summary)})"
                                               if skipped else "")
                         + "; expected a profile of GPU activity")
    return judge_ops(str(path), built, Judging(machines, machine, regime, mix))


def skipped_text(summary: TraceSummary) -> str:
    """The reader's skipped events, most common reason first: `3 x an event whose ...`."""
    return "; ".join(f"{n:,} x {why}" for why, n in summary.skipped)


def judge_ops(path: str, built: TraceOps, judging: Judging) -> TraceAnalysis:
    table = built.table
    priced_at = np.flatnonzero(table.priced)  # the ops that are records, in op order
    record_of_op = np.full(len(table), -1, dtype=np.int64)
    record_of_op[priced_at] = np.arange(len(priced_at))
    records = trace_records(built, priced_at)
    return TraceAnalysis(path, built.ops, table, built.summary, records, record_of_op,
                         call_verdicts(records, judging) if len(priced_at) else None, judging,
                         judge_collectives(built.ops, table, judging.machines,
                                           judging.machine))


def call_verdicts(records: TraceRecords, judging: Judging) -> CallVerdicts:
    """Each record's bound and verdict, judged JUDGED_AT_ONCE records at a time."""
    n = len(records)
    sol = np.empty(n, dtype=np.float64)
    verdict = np.empty(n, dtype=np.int8)
    machines: set[str] = set()
    for start in range(0, n, JUDGED_AT_ONCE):
        at = np.arange(start, min(n, start + JUDGED_AT_ONCE))
        judged = judging.of(records.columns(at))
        sol[at] = judged.priced.sol_time_s
        verdict[at] = judged.judged.verdict
        machines.update(judged.machines)
    return CallVerdicts(sol, verdict, tuple(sorted(machines)))


@dataclass(frozen=True)
class TraceRecords:
    """The priced ops' records as their prices' fields (one dict per distinct price, not per
    call) and each call's own time, launches and device: a million calls' records without a
    million dicts, built as dicts only where one is asked for (`--records-out`)."""

    templates: tuple[dict[str, Any], ...]  # per distinct price, in first-call order
    template: np.ndarray  # int64, per record: its price's template
    time_s: np.ndarray  # float64, per record
    kernels: np.ndarray  # int64, per record
    device: np.ndarray  # int64, per record: index into device_names
    device_names: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.template.shape[0])

    def fetch(self, positions: np.ndarray) -> list[dict[str, Any]]:
        """The records at `positions`, as `TraceOp.record` makes them."""
        return [call_record(self.templates[t], time_s, kernels, self.device_names[d])
                for t, time_s, kernels, d in zip(self.template[positions].tolist(),
                                                  self.time_s[positions].tolist(),
                                                  self.kernels[positions].tolist(),
                                                  self.device[positions].tolist(),
                                                  strict=True)]

    def rows(self) -> LazyRows:
        return LazyRows(self.fetch, np.arange(len(self)))

    @cached_property
    def _template_columns(self) -> RecordColumns:
        """The templates as columns: made once, however many slices are judged."""
        own = {"time_s": 0.0, "kernels": 1}  # contract fields every call sets for itself
        return columns_from_valid([{**t, **own} for t in self.templates], keep_rows=False)

    @cached_property
    def _fields(self) -> tuple[str, ...]:
        """The records' fields, in the order the first thousand name them."""
        head = self.fetch(np.arange(min(len(self), 1000)))
        return tuple(dict.fromkeys(k for r in head for k in r))

    def columns(self, at: np.ndarray | None = None) -> RecordColumns:
        """What `columns_from_valid` makes of the records (those `at`, else all), from the
        templates' columns."""
        at = np.arange(len(self)) if at is None else at
        n = len(at)
        base = self._template_columns
        template, device_of = self.template[at], self.device[at]
        device = np.array(self.device_names, dtype=object)[device_of]
        device_codes, first = _first_seen(device_of)
        device_codes = device_codes.astype(np.int32)  # as `categorize` codes them
        device_names = tuple(self.device_names[int(d)] for d in device_of[first].tolist())
        timing = base.timing[template]
        if n and timing.size and (timing == timing[0]).all():
            timing = np.broadcast_to(timing[:1], (n,))  # as `columns_from_valid` holds it
        return replace(base.take(template), time_s=self.time_s[at].astype(np.float64),
                       kernels=self.kernels[at].astype(np.float64), device=device,
                       device_codes=device_codes, device_names=device_names, timing=timing,
                       line=at.astype(np.int64) + 1, rows=LazyRows(self.fetch, at),
                       fields=self._fields)


def trace_records(built: TraceOps, priced_at: np.ndarray) -> TraceRecords:
    """The records of the ops at `priced_at`: one template per distinct signature (a priced
    op's price is its signature's), made from its first call."""
    table = built.table
    template, first = _first_seen(table.signature[priced_at])  # in first-call order
    templates = []
    for k in first.tolist():
        common = built.ops[int(priced_at[k])].common_fields()
        assert common is not None  # a priced op has a ledger
        templates.append(common)
    return TraceRecords(tuple(templates), template,
                        table.time_s[priced_at], table.kernels[priced_at],
                        table.device[priced_at], table.device_names)


def _first_seen(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each value as a code numbering the distinct values in first-seen order, and the
    position of each code's first value (what `categorize` gives, by numpy)."""
    _, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[inverse.reshape(-1)].astype(np.int64), first[order]


def judge_collectives(ops: Sequence[TraceOp], table: OpTable,
                      machines: Mapping[str, Machine],
                      machine: Machine | None = None) -> dict[int, CollectiveJudged]:
    """Each communication op against its device's interconnect (`machine` overrides)."""
    found: dict[int, CollectiveJudged] = {}
    chosen: dict[str, tuple[Machine | None, str]] = {}
    for i in np.flatnonzero(table.communication).tolist():
        op = ops[i]
        if op.device not in chosen:
            match = match_device(op.device or None, machines.values())
            chosen[op.device] = ((machine, "") if machine is not None
                                 else (match.machine, match.reason))
        on, why = chosen[op.device]
        found[i] = judge_collective(op.message, op.time_s, op.kernels, on, why)
    return found


@dataclass(frozen=True)
class Group:
    """Ops of one name and one set of input shapes and dtypes."""

    op: str
    shapes: str
    count: int
    time_s: float
    sol_time_s: float | None  # None when no op of the group could be priced on a machine
    share: float  # of the trace's summed device time
    verdicts: Mapping[str, int]
    priced_by: str
    reason: str  # why unpriced, or the ledger's caveat
    unpriced: int = 0  # calls with no ledger (counted among the blanks)
    communication: bool = False  # a collective, priced on the interconnect
    call_std_s: float = 0.0  # the spread of its calls' times (population standard deviation)
    kernels: int = 0  # the kernels its calls launched

    @property
    def time_lost_s(self) -> float | None:
        return None if self.sol_time_s is None else self.time_s - self.sol_time_s

    @property
    def efficiency(self) -> float | None:
        return None if self.sol_time_s is None or self.time_s <= 0 else (
            self.sol_time_s / self.time_s)

    def as_json(self) -> dict[str, Any]:
        return {"op": self.op, "shapes": self.shapes, "count": self.count,
                "time_s": self.time_s, "sol_time_s": self.sol_time_s,
                "time_lost_s": self.time_lost_s, "efficiency": self.efficiency,
                "share_of_gpu_time": self.share, "verdicts": dict(self.verdicts),
                "unpriced": self.unpriced,
                "priced_by": self.priced_by or None, "reason": self.reason or None}


def shapes_text(op: TraceOp) -> str:
    """`[2048, 320] fp32, [320, 125] fp32`: tensor inputs only, in argument order."""
    try:
        return _shapes_text(op.shapes, op.dtypes)
    except TypeError:  # an unhashable record: uncached
        return _shapes_text.__wrapped__(op.shapes, op.dtypes)


@lru_cache(maxsize=65536)
def _shapes_text(shapes: tuple[Any, ...], dtypes: tuple[str, ...]) -> str:
    if not dtypes:  # shapes without dtypes (PyTorch 1.8): every non-empty size list
        sizes = [f"{list(d)}" for d in shapes if isinstance(d, (list, tuple)) and d]
        return ", ".join(sizes) if sizes else "-"
    parts = [f"{list(d)} {TRACE_DTYPES[t]}" for d, t in zip(shapes, dtypes, strict=False)
             if t in TRACE_DTYPES and isinstance(d, (list, tuple))]
    return ", ".join(parts) if parts else "-"


def _group_shapes(op: TraceOp) -> str:
    """The shapes; for a collective that recorded none, its message as its kernel recorded it
    (so that all-reduces of different sizes are not one group)."""
    text = shapes_text(op)
    message = op.message
    if text == "-" and message is not None and message.label:
        return message.label
    return text


def groups(result: TraceAnalysis) -> list[Group]:
    """Grouped by op and shapes, sorted by time lost (unpriced groups last, by time). The
    calls of a group are gathered by numpy; its sums are taken in call order (a running sum,
    as a person adding them up would), so a total never depends on how calls were grouped."""
    judged = result.verdicts
    sol = judged.sol_time_s if judged is not None else np.zeros(0)
    verdict = judged.verdict.astype(np.int64) if judged is not None else np.zeros(0, np.int64)
    gpu_time = result.summary.gpu_time_s
    keys, group_of_op = _group_keys(result.ops, result.table)
    time_of_op = result.table.time_s
    members = np.split(np.argsort(group_of_op, kind="stable"),
                       np.cumsum(np.bincount(group_of_op, minlength=len(keys)))[:-1]
                       ) if keys else []
    found: list[Group] = []
    for (name, shapes, _), index in zip(keys, members, strict=True):
        times = time_of_op[index]
        record = result.record_of_op[index]
        rows = record[record >= 0]
        # a blank call has no reading (a rate gap leaves its SOL without that unit's work):
        # its SOL counts as missing, so the group shows neither SOL nor efficiency, but why
        row_sol = np.where(verdict[rows] == BLANK, np.nan, sol[rows])
        sols = row_sol[np.isfinite(row_sol)]
        unpriced = len(index) - len(rows)
        first = result.ops[int(index[0])]
        total = _running_sum(times)
        reason = first.price.reason
        spread = float(np.std(times)) if len(times) > 1 else 0.0
        if first.communication:  # priced on the interconnect, not as records
            found.append(_collective_group(result, name, shapes, index.tolist(), total,
                                           gpu_time, spread))
            continue
        verdicts = _verdict_counts(verdict[rows], unpriced)
        if len(rows) and not reason and len(sols) < len(rows):
            blank = rows[~np.isfinite(row_sol)]  # why it is blank: its first blank call's
            reason = "; ".join(result.reasons(int(blank[0])))
        found.append(Group(name, shapes, len(index), total,
                           _running_sum(sols) if len(sols) and len(sols) == len(index)
                           else None,
                           total / gpu_time if gpu_time > 0 else 0.0, verdicts,
                           first.price.source, reason, unpriced, call_std_s=spread,
                           kernels=int(result.table.kernels[index].sum())))
    return sorted(found, key=lambda g: (g.time_lost_s is None,
                                        -(g.time_lost_s if g.time_lost_s is not None
                                          else g.time_s)))


def _group_keys(ops: Sequence[TraceOp], table: OpTable
                ) -> tuple[dict[tuple[str, str, bool], int], np.ndarray]:
    """Each op's group (op, shapes, whether it communicates) as a code into the keys, in
    first-call order. An op that is no collective is keyed by its signature alone, so the keys
    are made once per distinct signature (and once per collective call: its message may differ
    call by call). A call that launched a collective kernel is never grouped with calls of the
    same op and shapes that did not: they are priced on different roofs."""
    n_signatures = int(table.signature.max()) + 1 if len(table) else 0
    comm_at = np.flatnonzero(table.communication)
    proto = table.signature.copy()  # calls that surely share a key share a proto
    proto[comm_at] = n_signatures + np.arange(len(comm_at))
    proto_of_op, first = _first_seen(proto)  # protos in first-call order
    keys: dict[tuple[str, str, bool], int] = {}
    key_of_proto = np.array([keys.setdefault((ops[i].op, _group_shapes(ops[i]),
                                              bool(table.communication[i])), len(keys))
                             for i in first.tolist()], dtype=np.int64)
    return keys, key_of_proto[proto_of_op]


def _running_sum(values: np.ndarray) -> float:
    """The sum left to right (`sum()` of the floats; numpy's own sum pairs them up)."""
    return float(np.cumsum(values)[-1]) if len(values) else 0.0


def _verdict_counts(codes: np.ndarray, unpriced: int) -> dict[str, int]:
    """Calls per verdict, in the order the verdicts first appear, then the unpriced calls
    as blanks (no ledger: blank, as any row that cannot be priced, with its reason)."""
    code, first = _first_seen(codes)
    verdicts = {VERDICTS[int(v)]: int(n) for v, n in zip(
        codes[first].tolist(), np.bincount(code, minlength=len(first)).tolist(), strict=True)}
    if unpriced:
        verdicts["blank"] = verdicts.get("blank", 0) + unpriced
    return verdicts


def _collective_group(result: TraceAnalysis, name: str, shapes: str, index: list[int],
                      total: float, gpu_time: float, spread: float) -> Group:
    judged = [result.collectives[i] for i in index]
    sols = [j.sol_time_s for j in judged if j.sol_time_s is not None]
    return Group(name, shapes, len(index), total,
                 float(sum(sols)) if len(sols) == len(index) else None,
                 total / gpu_time if gpu_time > 0 else 0.0,
                 dict(Counter(j.verdict for j in judged)),
                 "interconnect" if sols else "", judged[0].reason,
                 sum(1 for j in judged if j.sol_time_s is None), True, spread,
                 int(result.table.kernels[index].sum()))


def summary_json(result: TraceAnalysis) -> dict[str, Any]:
    fields = summary_fields(result.path, result.summary)
    kernel, bounded = result.summary.kernel_time_s, result.bounded_time_s
    at = list(fields).index("priced_share_of_kernel_time") + 1
    items = list(fields.items())
    items[at:at] = [("bounded_time_s", bounded),
                    ("bounded_share_of_kernel_time", bounded / kernel if kernel else None)]
    return dict(items)


def summary_fields(path: str, s: TraceSummary) -> dict[str, Any]:
    return {"op": "summary", "trace": path, "kernels": s.kernels, "ops": s.ops,
            "priced_ops": s.priced_ops, "gpu_time_s": s.gpu_time_s,
            "kernel_time_s": s.kernel_time_s, "priced_time_s": s.priced_time_s,
            "priced_share_of_kernel_time": (s.priced_time_s / s.kernel_time_s
                                            if s.kernel_time_s else None),
            "communication_time_s": s.communication_time_s,
            "memcpy_time_s": s.memcpy_time_s, "memset_time_s": s.memset_time_s,
            "unpriced_time_s": s.unpriced_time_s,
            "unattributed_time_s": s.unattributed_time_s, "devices": list(s.devices),
            "devices_from_properties": list(s.devices_from_properties),
            "skipped_events": s.skipped_events}


def verdicts_text(group: Group) -> str:
    """`below 12, at_ceiling 3`: a group's verdicts, most common first."""
    return ", ".join(f"{name} {n}" for name, n in sorted(group.verdicts.items(),
                                                         key=lambda kv: -kv[1]))


def _profiles_of(devices: Sequence[str], machines: Mapping[str, Machine]) -> list[str]:
    """The profiles the trace's devices select, sorted: with no op priced there are no
    verdicts to name them, yet a known card is not an unknown one (`-`)."""
    found = (match_device(d, machines.values()).machine for d in devices)
    return sorted({m.name for m in found if m is not None})


def summary_lines(result: TraceAnalysis) -> list[str]:
    """Where the kernel time went, in three lines: priced, communication, unpriced, outside."""
    s = result.summary
    kernel = s.kernel_time_s

    def part(value: float) -> str:
        return f"{fmt.seconds(value)} ({fmt.percent(value / kernel) if kernel else '-'})"

    devices = ", ".join(f"{d} (told from deviceProperties: the trace names none)"
                        if d in s.devices_from_properties else d
                        for d in s.devices) or "none named (use --machine)"
    machine = result.judging.machine
    machines = (", ".join(result.verdicts.machines) if result.verdicts
                else machine.name if machine is not None
                else ", ".join(_profiles_of(s.devices, result.judging.machines)) or "-")
    return [
        f"kernel time {fmt.seconds(kernel)} in {s.kernels} kernels from {s.ops} ops "
        f"({s.priced_ops} priced); device(s): {devices}; profile(s): {machines}",
        f"  priced {part(s.priced_time_s)}, of which judged against a bound "
        f"{part(result.bounded_time_s)}; communication {part(s.communication_time_s)}, "
        f"unpriced {part(s.unpriced_time_s)} (of which launched by no traced op "
        f"{fmt.seconds(s.unattributed_time_s)})",
        f"  outside kernels: memcpy {fmt.seconds(s.memcpy_time_s)}, "
        f"memset {fmt.seconds(s.memset_time_s)}",
    ]
