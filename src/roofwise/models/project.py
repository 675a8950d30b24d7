"""Price a captured step on a machine: per op, per layer type, and the step's totals.

Ops of one layer type (module path with layer indices as *), one name and one set of shapes
are one row: identical layers share it, with their count. Each row is priced once
(`pricing.price_ledger`) and multiplied by its count. Tensor parallelism adds, per layer, the
two all-reduces of the hidden states (after attention's output projection and after the MLP)
priced on the profile's interconnect: a ring moves 2(N-1)/N of the message one way over the
link, plus 2(N-1) hops of fixed latency.

Totals: time per step is the sum of the rows' SOL (kernels one after another, none
overlapped), and beside it the same sum with every kernel held to the latency floor where its
SOL is below it; tokens/s is new tokens over the step's time; weights and KV cache are the
bytes one device holds; activation traffic is the bytes the step's ops write, cache writes
excepted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from roofwise.base.dtypes import bytes_per_element
from roofwise.ledgers.ledger import Ledger
from roofwise.models.capture import Capture, CapturedOp
from roofwise.pricing.core import LedgerPrice, missing_units, price_ledger
from roofwise.profiles.machine import Machine


@dataclass(frozen=True)
class Row:
    """One op of one layer type, `count` times per step."""

    layer: str
    op: str
    shapes: str
    count: int
    ledger: Ledger | None
    price: LedgerPrice | None
    reason: str = ""
    collective_time_s: float | None = None  # set for interconnect rows
    cache_write: bool = False

    @property
    def flops(self) -> float:
        return self.count * (self.ledger.flops if self.ledger else 0.0)

    @property
    def bytes(self) -> float:
        return self.count * (self.ledger.bytes if self.ledger else 0.0)

    @property
    def flops_by_unit(self) -> dict[str, float]:
        return {u: self.count * v for u, v in (self.ledger.ops_by_unit if self.ledger
                                               else {}).items()}

    @property
    def sol_time_s(self) -> float | None:
        if self.collective_time_s is not None:
            return self.count * self.collective_time_s
        if self.price is None or not math.isfinite(self.price.sol_time_s):
            return None
        return self.count * self.price.sol_time_s

    @property
    def bound(self) -> str:
        if self.collective_time_s is not None:
            return "interconnect"
        return self.price.bound if self.price else "-"

    @property
    def binding_pipe(self) -> str:
        if self.price is None:
            return "interconnect" if self.collective_time_s is not None else "-"
        return "hbm" if self.price.bound == "memory" else self.price.binding_unit

    def as_json(self, floor_s: float) -> dict[str, Any]:
        one = None if self.sol_time_s is None else self.sol_time_s / self.count
        return {"op": self.op, "layer": self.layer, "shapes": self.shapes, "count": self.count,
                "flops": self.flops, "flops_by_unit": self.flops_by_unit, "bytes": self.bytes,
                "read_bytes": self.count * (self.ledger.read_bytes if self.ledger else 0),
                "write_bytes": self.count * (self.ledger.write_bytes if self.ledger else 0),
                "sol_time_s": self.sol_time_s, "sol_time_per_call_s": one,
                "bound": self.bound, "binding_pipe": self.binding_pipe,
                "below_latency_floor": one is not None and one < floor_s,
                "roof": self.ledger.roof if self.ledger else None,
                "reason": self.reason or None}


@dataclass(frozen=True)
class Projection:
    rows: tuple[Row, ...]
    machine: Machine
    phase: str
    batch: int
    seq: int
    context: int
    tp: int
    capture: Capture
    regime: str | None = None
    notes: tuple[str, ...] = field(default=())
    memory: Any = None  # models.memory.MemoryFit of this shard, when it was worked out
    weights: str | None = None  # the quantized weight scheme; None: weights in the dtype

    @property
    def floor(self) -> Any:
        """The shortest kernel a profiler resolves (the `kernel` timing floor of the profile):
        a projected kernel cannot be read below it."""
        return self.machine.latency_floors.floor("kernel")

    @property
    def floor_s(self) -> float:
        return float(self.floor.per_call_s)

    @property
    def step_time_s(self) -> float:
        return sum(r.sol_time_s or 0.0 for r in self.rows)

    @property
    def step_time_with_floor_s(self) -> float:
        total = 0.0
        for r in self.rows:
            if r.sol_time_s is not None:
                total += r.count * max(r.sol_time_s / r.count, self.floor_s)
        return total

    @property
    def tokens_per_s(self) -> float:
        return self.capture.tokens / self.step_time_s if self.step_time_s > 0 else math.nan

    @property
    def activation_bytes(self) -> float:
        return sum(r.count * r.ledger.write_bytes for r in self.rows
                   if r.ledger is not None and not r.cache_write)

    def flops_by_unit(self) -> dict[str, float]:
        total: dict[str, float] = {}
        for r in self.rows:
            for unit, v in r.flops_by_unit.items():
                total[unit] = total.get(unit, 0.0) + v
        return total

    def total_json(self) -> dict[str, Any]:
        unpriced = [r for r in self.rows if r.sol_time_s is None]
        return {"op": "total", "machine": self.machine.name, "phase": self.phase,
                "batch": self.batch, "seq": self.seq, "context": self.context, "tp": self.tp,
                "regime": self.regime or "envelope",
                "flops": sum(r.flops for r in self.rows),
                "flops_by_unit": self.flops_by_unit(),
                "bytes": sum(r.bytes for r in self.rows),
                "sol_time_s": self.step_time_s,
                "time_with_latency_floor_s": self.step_time_with_floor_s,
                "latency_floor_s": self.floor_s,
                "latency_floor_assumed": self.floor.assumed,
                "tokens": self.capture.tokens, "tokens_per_s": self.tokens_per_s,
                "weight_bytes": self.capture.weight_bytes,
                "kv_cache_bytes": self.capture.kv_cache_bytes,
                "activation_bytes": self.activation_bytes,
                "collective_bytes": sum(r.bytes for r in self.rows if is_collective(r)),
                "unpriced_ops": sum(r.count for r in unpriced),
                "mla": self.capture.mla, "weights": self.weights or self.capture.dtype,
                **(self.memory.as_json() if self.memory is not None else {}),
                "notes": list(self.notes)}


def project(capture: Capture, machine: Machine, phase: str, batch: int, seq: int,
            context: int, tp: int = 1, regime: str | None = None) -> Projection:
    rows = [_row(key, ops, machine, regime) for key, ops in _grouped(capture.ops).items()]
    notes = [*capture.notes, "LM head on the last token of each sequence only"]
    if phase == "decode" and context == 0:  # the default: say what it leaves out
        notes.append("decode over an empty KV cache (--context 0): attention reads no cached "
                     "tokens; pass --context N for a step later in a generation")
    if tp > 1:
        rows.append(_all_reduce(capture, machine, tp))
        notes.append(f"tensor parallel over {tp} devices: figures are per device")
    return Projection(tuple(rows), machine, phase, batch, seq, context, tp, capture, regime,
                      tuple(notes))


def _grouped(ops: tuple[CapturedOp, ...]) -> dict[tuple[str, str, str], list[CapturedOp]]:
    """The ops by (layer, op, shapes): layers in the order the step first ran them, and one
    layer's rows by op and shapes. Not the order the ops ran within a layer: transformers
    builds a model's masks for `set(config.layer_types)`, whose order changes with Python's
    hash seed, so that order would change from one run to the next."""
    groups: dict[tuple[str, str, str], list[CapturedOp]] = {}
    for op in ops:
        groups.setdefault((op.layer, op.op, op.shapes), []).append(op)
    layers = {layer: k for k, layer in enumerate(dict.fromkeys(op.layer for op in ops))}
    return {key: groups[key] for key in sorted(groups, key=lambda k: (layers[k[0]], k[1], k[2]))}


def _row(key: tuple[str, str, str], ops: list[CapturedOp], machine: Machine,
         regime: str | None) -> Row:
    first = ops[0]
    price = None
    reason = first.reason
    if first.ledger is not None:
        try:
            price = price_ledger(first.ledger, machine, regime)
        except Exception as exc:  # a unit the machine lacks: the row stays unpriced, says why
            reason = f"cannot price on {machine.name}: {exc}"
        lacking = missing_units(first.ledger, machine)
        if price is not None and lacking:  # its work there would be dropped: blank, not low
            price = None
            reason = (f"cannot price on {machine.name}: it has no "
                      f"{', '.join(dict.fromkeys(unit for unit, _ in lacking))}")
    return Row(*key, count=len(ops), ledger=first.ledger, price=price, reason=reason,
               cache_write=first.cache_write)


def _all_reduce(capture: Capture, machine: Machine, tp: int) -> Row:
    message = capture.tokens * capture.hidden * bytes_per_element(capture.dtype)
    count = 2 * capture.layers
    link = machine.interconnect
    ledger = Ledger("all_reduce", "interconnect", (), ())
    shapes = f"{capture.tokens}x{capture.hidden} {capture.dtype}, ring of {tp}"
    wire = 2 * (tp - 1) / tp * message
    if link is None:
        return _CollectiveRow("model.layers.*", "tp all-reduce", shapes, count, ledger, None,
                              f"profile {machine.name} has no interconnect; collectives "
                              "unpriced", None, wire_bytes=wire)
    time_s = wire / link.one_way_bytes_per_s + 2 * (tp - 1) * link.hop_latency_s
    reason = (f"ring: {wire:.0f} B one way at {link.one_way_bytes_per_s / 1e9:.0f} GB/s "
              f"({link.name}) + {2 * (tp - 1)} hops x {link.hop_latency_s * 1e6:g} us"
              + (" (hop latency assumed)" if link.hop_latency_assumed else ""))
    return _CollectiveRow("model.layers.*", "tp all-reduce", shapes, count, ledger, None,
                          reason, time_s, wire_bytes=wire)


@dataclass(frozen=True)
class _CollectiveRow(Row):
    """A collective: its bytes are what crosses the link (ring, one way), its time the link's."""

    wire_bytes: float = 0.0

    @property
    def bytes(self) -> float:
        return self.count * self.wire_bytes

    @property
    def bound(self) -> str:
        return "interconnect"

    @property
    def binding_pipe(self) -> str:
        return "interconnect" if self.collective_time_s is not None else "-"


def is_collective(row: Row) -> bool:
    return isinstance(row, _CollectiveRow)


def projection_records(projection: Projection) -> list[dict[str, Any]]:
    """One record per op row: the ledger's fields, its predicted time, time_s empty."""
    records = []
    for row in projection.rows:
        if row.ledger is None or is_collective(row):
            continue
        one = row.ledger.to_record()
        sol = row.sol_time_s
        records.append({**one, "op": row.op, "time_s": None,
                        "workload": {"layer": row.layer, "shapes": row.shapes,
                                     "count": row.count},
                        "predicted_time_s": None if sol is None else sol / row.count,
                        "machine": projection.machine.name, "phase": projection.phase})
    return records
