"""What one call of an operator must do: the tensors it moves and the work it does, per unit.

Convention (per call):
1. every distinct input storage is read once, every output written once, an in-out both;
2. intermediates that never leave the call cost nothing;
3. lookup tables (weights, cos/sin, scales) are reads like any input: charged once per call,
   or once per use when the design re-reads them (`Tensor.uses`);
4. work is counted per unit and class: an FMA is 2 FLOPs, a transcendental 1 op on its own
   pipe, a compare 1 op, a contraction 2*M*N*K;
5. the roof is the unit an optimal implementation would use, declared by the op, never
   inferred from a dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from roofwise.base import numbers
from roofwise.base.dtypes import bytes_per_element
from roofwise.base.errors import InputError
from roofwise.base.text import shown
from roofwise.profiles.machine import OP_CLASSES


class Role(str, Enum):
    """How a call touches a tensor: read once (input, lookup), written (output) or both."""

    INPUT = "input"
    OUTPUT = "output"
    INOUT = "inout"
    LOOKUP = "lookup"


@dataclass(frozen=True)
class Tensor:
    """A distinct storage a call touches. `uses`/`bytes_per_use` charge a lookup per use."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    role: Role
    uses: int = 0  # 0: read once per call; N: re-read N times, `bytes_per_use` each
    bytes_per_use: int = 0

    def __post_init__(self) -> None:
        bytes_per_element(self.dtype, f"tensor {self.name}.dtype")
        if any(int(d) < 0 for d in self.shape):
            raise InputError(f"tensor {self.name}.shape",
                             f"expected sizes >= 0, got {shown(self.shape)}")
        numbers.check_count(self.elements, f"tensor {self.name}.shape (elements)")

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return math.ceil(self.elements * bytes_per_element(self.dtype))

    @property
    def read_bytes(self) -> int:
        if self.role is Role.OUTPUT:
            return 0
        if self.uses:
            return self.uses * self.bytes_per_use
        return self.nbytes

    @property
    def write_bytes(self) -> int:
        return self.nbytes if self.role in (Role.OUTPUT, Role.INOUT) else 0

    def charged_per_use(self, uses: int, bytes_per_use: int) -> Tensor:
        return replace(self, uses=uses, bytes_per_use=bytes_per_use)


@dataclass(frozen=True)
class Work:
    """`ops` operations of one class on one unit, e.g. 2*M*N*K contraction on tensor_core.bf16."""

    unit: str
    op_class: str
    ops: float
    label: str = ""

    def __post_init__(self) -> None:
        if self.op_class not in OP_CLASSES:
            raise InputError(f"work {self.label or self.unit}.class",
                             f"unknown class {self.op_class!r}; expected one of "
                             f"{', '.join(OP_CLASSES)}")
        where = f"work {self.label or self.unit}.ops"
        numbers.check_count(self.ops, where)  # an int beyond float range fails here, exactly
        if not (self.ops >= 0 and math.isfinite(self.ops)):
            raise InputError(where, f"expected a non-negative number, got {shown(self.ops)}")


@dataclass(frozen=True)
class Ledger:
    """One call (or, with `calls` > 1, a sequence of calls) of an operator."""

    name: str
    roof: str
    tensors: tuple[Tensor, ...]
    work: tuple[Work, ...]
    calls: int = 1
    stages: tuple[Ledger, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def read_bytes(self) -> int:
        return sum(t.read_bytes for t in self.tensors)

    @property
    def write_bytes(self) -> int:
        return sum(t.write_bytes for t in self.tensors)

    @property
    def bytes(self) -> int:
        return self.read_bytes + self.write_bytes

    @property
    def footprint_bytes(self) -> int:
        """The distinct bytes the call touches, each once (its working set): less than
        `bytes` where a tensor is read and written (in place) or a table is re-read. What a
        cache must hold to serve the whole call."""
        return sum(min(t.nbytes, t.read_bytes + t.write_bytes) for t in self.tensors)

    @property
    def lookup_bytes(self) -> int:
        return sum(t.read_bytes for t in self.tensors if t.role is Role.LOOKUP)

    @property
    def payload_bytes(self) -> int:
        return self.bytes - self.lookup_bytes

    @property
    def flops(self) -> float:
        """Convention FLOPs: every counted operation, whatever its unit or class."""
        return float(sum(w.ops for w in self.work))

    @property
    def intensity_flops_per_byte(self) -> float:
        return self.flops / self.bytes if self.bytes else math.inf

    @property
    def ops_by_unit(self) -> dict[str, float]:
        return _sum_by(self.work, lambda w: w.unit)

    @property
    def ops_by_class(self) -> dict[str, float]:
        return _sum_by(self.work, lambda w: w.op_class)

    def tensor(self, name: str) -> Tensor:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def with_lookups_per_use(self, uses_and_bytes: Mapping[str, tuple[int, int]]) -> Ledger:
        """The same call for a design that re-reads lookups: name -> (uses, bytes per use)."""
        tensors = tuple(
            t.charged_per_use(*uses_and_bytes[t.name]) if t.name in uses_and_bytes else t
            for t in self.tensors)
        return replace(self, tensors=tensors)

    def to_record(self, time_s: float | None = None, **extra: object) -> dict[str, object]:
        """The benchmark-record fields (docs/records.md) this ledger fixes."""
        record: dict[str, object] = {
            "op": self.name, "flops": self.flops, "bytes": self.bytes, "roof": self.roof,
            "read_bytes": self.read_bytes, "write_bytes": self.write_bytes,
        }
        if self.footprint_bytes < self.bytes:  # said only where it differs
            record["footprint_bytes"] = self.footprint_bytes
        by_unit = self.ops_by_unit
        if len(by_unit) > 1 or (by_unit and next(iter(by_unit)) != self.roof):
            record["flops_by_unit"] = by_unit
        if time_s is not None:
            record["time_s"] = time_s
        record.update(extra)
        return record


def fuse(name: str, stages: Sequence[Ledger], roof: str | None = None,
         keep: Iterable[str] = ()) -> Ledger:
    """Stages run as one call: what one stage writes and a later one reads never reaches memory.

    `keep` names intermediates that are also outputs of the fused call.
    """
    kept = set(keep)
    merged: dict[str, Tensor] = {}
    written: set[str] = set()
    intermediates: set[str] = set()
    for stage in stages:
        for t in stage.tensors:
            seen = merged.get(t.name)
            if t.role in (Role.INPUT, Role.LOOKUP) and t.name in written:
                intermediates.add(t.name)  # produced inside the call
                continue
            if seen is None:
                merged[t.name] = t
            elif t.role in (Role.OUTPUT, Role.INOUT) and seen.role in (Role.INPUT, Role.LOOKUP):
                merged[t.name] = replace(seen, role=Role.INOUT)
            elif t.uses and seen.uses:
                merged[t.name] = replace(seen, uses=seen.uses + t.uses)
            if t.role in (Role.OUTPUT, Role.INOUT):
                written.add(t.name)
    tensors = tuple(t for n, t in merged.items() if n not in intermediates or n in kept)
    work = tuple(replace(w, label=f"{s.name}: {w.label}" if w.label else s.name)
                 for s in stages for w in s.work)
    return Ledger(name=name, roof=roof or _common_roof(name, stages), tensors=tensors,
                  work=work, calls=1, stages=tuple(stages))


def separate(name: str, calls: Sequence[Ledger], roof: str | None = None) -> Ledger:
    """Calls run one after another: every intermediate is written by one and read by the next."""
    tensors = tuple(replace(t, name=f"{c.name}/{t.name}") for c in calls for t in c.tensors)
    work = tuple(replace(w, label=f"{c.name}: {w.label}" if w.label else c.name)
                 for c in calls for w in c.work)
    return Ledger(name=name, roof=roof or _common_roof(name, calls), tensors=tensors, work=work,
                  calls=sum(c.calls for c in calls), stages=tuple(calls))


def _common_roof(name: str, stages: Sequence[Ledger]) -> str:
    roofs = {s.roof for s in stages}
    if len(roofs) != 1:
        raise InputError(f"ledger {name}.roof",
                         f"stages declare different roofs {sorted(roofs)}; declare the fused roof")
    return roofs.pop()


def _sum_by(work: Iterable[Work], key: Callable[[Work], str]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for w in work:
        k = key(w)
        totals[k] = totals.get(k, 0.0) + w.ops
    return totals
