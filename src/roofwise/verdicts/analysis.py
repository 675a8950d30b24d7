"""Records in, verdicts out: match each row to a profile, price it, judge it.

`Verdicts` is the judged columns as plain data; `output.analysis.Analysis` is the same value
with its readings (reasons, the verdict frame, rows, notebook views), built on the stages
above this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from roofwise.pricing.core import Priced, price_columns, uniform
from roofwise.pricing.reasons import Reason
from roofwise.profiles.load import match_device
from roofwise.profiles.machine import Machine
from roofwise.verdicts.rules import BLANK, SEVERITY, VERDICTS, Judged, judge

if TYPE_CHECKING:  # polars loads when records are read, not when roofwise is imported

    from roofwise.records.read import RecordColumns, Skipped


V = TypeVar("V", bound="Verdicts")  # `take` keeps the class it is called on


@dataclass(frozen=True, repr=False)
class Verdicts:
    columns: RecordColumns
    machine_name: np.ndarray  # object: profile per row, "" where none matched
    machine_index: np.ndarray  # int32: the row's profile as a position in `machines`, -1 none
    machines: Mapping[str, Machine]
    priced: Priced
    judged: Judged
    no_machine_reason: np.ndarray  # object: why a row has no profile
    regime: str | None
    mix: str | None
    skipped: tuple[Skipped, ...] = ()  # malformed records left out, with file:line and why

    def __len__(self) -> int:
        return len(self.columns)

    def take(self: V, index: np.ndarray) -> V:
        """Rows `index` (in that order) as an analysis of their own: what a report shows of a
        million rows, linted and rendered without touching the rest."""
        index = np.asarray(index, dtype=np.int64)
        return replace(self, columns=self.columns.take(index),
                       machine_name=self.machine_name[index],
                       machine_index=self.machine_index[index], priced=_taken(self.priced, index),
                       judged=_taken(self.judged, index),
                       no_machine_reason=self.no_machine_reason[index])

    def __repr__(self) -> str:
        counts = ", ".join(f"{n} {name}" for name, n in self.counts().items() if n)
        machines = ", ".join(self.machines) or "no profile"
        return f"<{type(self).__name__} {len(self)} records on {machines}: {counts}>"

    def on_machine(self, name: str) -> np.ndarray:
        """The rows judged on profile `name`, as a bool mask: an integer compare per row, not
        a string compare."""
        position = list(self.machines).index(name) if name in self.machines else -2
        return self.machine_index == position

    @property
    def machine_index_or_first(self) -> np.ndarray:
        """`machine_index` with a row of no profile at 0: what a table of one value per
        machine is gathered by (such a row is blank, and says nothing it reads)."""
        return np.maximum(self.machine_index, 0)

    def verdict_name(self, i: int) -> str:
        return VERDICTS[int(self.judged.verdict[i])]

    def counts(self) -> dict[str, int]:
        found = np.bincount(self.judged.verdict.astype(np.int64), minlength=len(VERDICTS))
        return {name: int(found[k]) for k, name in enumerate(VERDICTS)}

    def worst_first(self) -> np.ndarray:
        """Row indices, the rows that need a person's eyes first (by verdict severity, then
        lowest efficiency)."""
        severity = SEVERITY[self.judged.verdict.astype(np.int64)]
        efficiency = np.nan_to_num(self.judged.efficiency, nan=np.inf)
        return np.lexsort((efficiency, severity))


def _taken(table: Any, index: np.ndarray) -> Any:
    """A dataclass of per-row columns (Priced, Judged) at rows `index`."""
    picked: dict[str, Any] = {}
    for f in fields(table):
        value = getattr(table, f.name)
        if isinstance(value, np.ndarray):
            value = value[index]
        elif isinstance(value, Mapping):
            value = {k: np.asarray(v)[index] for k, v in value.items()}
        picked[f.name] = value
    return replace(table, **picked)


def analyze(columns: RecordColumns, machines: Mapping[str, Machine],
            machine: Machine | None = None, regime: str | None = None,
            mix: str | None = None) -> Verdicts:
    """Judge every record; with `machine` all rows use it, else each row's `device` picks one."""
    n = len(columns)
    if machine is not None:
        row_machine = np.zeros(n, dtype=np.int32)
        why = uniform("", n)
        used = [machine]
    else:
        row_machine, why, used = _match_rows(columns, machines)

    parts: list[tuple[np.ndarray, Priced, Judged]] = []
    for k, chosen in enumerate(used):
        whole = len(used) == 1 and not (row_machine < 0).any()
        index = np.arange(n) if whole else np.flatnonzero(row_machine == k)
        sub = columns.priced_at(index) if len(index) != n else columns
        priced = price_columns(chosen, sub.flops, sub.bytes, sub.roof, sub.flops_by_unit,
                               sub.has_unit_split, regime, mix, sub.read_bytes, sub.write_bytes,
                               sub.roof_categories())
        parts.append((index, priced, judge(chosen, priced, sub.time_s, sub.timing, sub.bytes,
                                           sub.kernel_counts(), sub.time_p10_s, sub.time_p90_s,
                                           sub.working_set_bytes(), sub.read_bytes,
                                           sub.write_bytes, sub.cold_cache())))
    unmatched = np.flatnonzero(row_machine < 0)
    if len(unmatched):
        parts.append((unmatched, *_blank_rows(len(unmatched))))
    if not parts:  # no rows at all
        parts.append((np.arange(0), *_blank_rows(0)))
    priced_all, judged_all = _scatter(n, parts)
    labels = np.array([m.name for m in used] + [""], dtype=object)
    names = uniform(used[0].name, n) if len(used) == 1 and not len(unmatched) else labels[
        row_machine]
    return Verdicts(columns, names, row_machine, {m.name: m for m in used}, priced_all,
                    judged_all, why, regime, mix)


def _match_rows(columns: RecordColumns, machines: Mapping[str, Machine]
                ) -> tuple[np.ndarray, np.ndarray, list[Machine]]:
    """Per row, an index into the machines used (-1: none matched), and why none matched."""
    codes, devices = columns.device_categories()
    used: list[Machine] = []
    machine_of_device = np.full(len(devices) + 1, -1, dtype=np.int32)
    reasons = np.full(len(devices) + 1, "", dtype=object)
    for k, dev in enumerate(devices):
        match = match_device(dev, machines.values())
        if match.machine is None:
            reasons[k] = match.reason
            continue
        if match.machine not in used:
            used.append(match.machine)
        machine_of_device[k] = used.index(match.machine)
    row_machine = machine_of_device[codes] if len(codes) else np.zeros(0, dtype=np.int32)
    why = reasons[codes] if (machine_of_device < 0).any() and len(codes) else uniform(
        "", len(codes))
    return row_machine, why, used


def _blank_rows(n: int) -> tuple[Priced, Judged]:
    nan = np.full(n, np.nan)
    empty = np.full(n, "", dtype=object)
    flags = np.full(n, int(Reason.NO_MACHINE), dtype=np.int32)
    priced = Priced(nan, nan, nan, nan, np.zeros(n, bool), nan, empty, nan, nan, {}, {}, nan,
                    empty, nan, flags, nan)
    judged = Judged(nan, nan, np.full(n, BLANK, dtype=np.int8), flags, nan, nan, nan, nan,
                    np.full(n, -1, dtype=np.int8))
    return priced, judged


def _scatter(n: int, parts: list[tuple[np.ndarray, Priced, Judged]]) -> tuple[Priced, Judged]:
    """The parts' columns as whole columns, each row where its part's index puts it (the
    parts' indexes partition the rows)."""
    if len(parts) == 1 and len(parts[0][0]) == n:
        return parts[0][1], parts[0][2]
    # each field is its parts' values one after another, gathered into row order at once
    order = np.empty(n, dtype=np.intp)
    order[np.concatenate([p[0] for p in parts])] = np.arange(n)

    def merge(kind: type, pick: int) -> Any:
        values: dict[str, Any] = {}
        for f in fields(kind):
            sample = getattr(parts[0][pick], f.name)
            if isinstance(sample, Mapping):
                keys = dict.fromkeys(k for part in parts for k in getattr(part[pick], f.name))
                values[f.name] = {k: _fill(order, [(p[0], getattr(p[pick], f.name).get(k))
                                                   for p in parts]) for k in keys}
            else:
                values[f.name] = _fill(order, [(p[0], getattr(p[pick], f.name)) for p in parts])
        return kind(**values)

    return merge(Priced, 1), merge(Judged, 2)


def _fill(order: np.ndarray, pieces: list[tuple[np.ndarray, np.ndarray | None]]) -> np.ndarray:
    """One column from its parts (`order`: each row's position among the parts' rows laid end
    to end). A part without the field gives 0.0 in a float column (a unit it does not use
    does no work), "" in a text one, else False or 0."""
    dtype = next((p.dtype for _, p in pieces if p is not None), np.dtype(np.float64))
    empty = "" if dtype == np.dtype(object) else 0
    laid = np.concatenate([np.full(len(index), empty, dtype=dtype) if values is None
                           else np.asarray(values).astype(dtype, copy=False)
                           for index, values in pieces])
    return laid[order]
