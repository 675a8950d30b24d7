"""Records in, verdicts out: match each row to a profile, price it, judge it, explain it."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from roofwise.base import fmt
from roofwise.explain import reason_text
from roofwise.pricing.core import Priced, pipes_near_binding, price_columns, uniform
from roofwise.pricing.reasons import IMPOSSIBLE_REASONS, Reason
from roofwise.profiles.load import match_device
from roofwise.profiles.machine import Machine, timing_method
from roofwise.verdicts.rules import (
    AT_CEILING,
    BELOW,
    BLANK,
    IMPOSSIBLE,
    LATENCY_BOUND,
    VERDICTS,
    Judged,
    judge,
)

if TYPE_CHECKING:  # polars loads when records are read, not when roofwise is imported
    import polars as pl

    from roofwise.records.read import RecordColumns, Skipped


@dataclass(frozen=True, repr=False)
class Analysis:
    columns: RecordColumns
    machine_name: np.ndarray  # object: profile per row, "" where none matched
    machines: Mapping[str, Machine]
    priced: Priced
    judged: Judged
    no_machine_reason: np.ndarray  # object: why a row has no profile
    regime: str | None
    mix: str | None
    skipped: tuple[Skipped, ...] = ()  # malformed records left out, with file:line and why

    def __len__(self) -> int:
        return len(self.columns)

    def take(self, index: np.ndarray) -> Analysis:
        """Rows `index` (in that order) as an analysis of their own: what a report shows of a
        million rows, linted and rendered without touching the rest."""
        index = np.asarray(index, dtype=np.int64)
        return replace(self, columns=self.columns.take(index),
                       machine_name=self.machine_name[index], priced=_taken(self.priced, index),
                       judged=_taken(self.judged, index),
                       no_machine_reason=self.no_machine_reason[index])

    def to_polars(self) -> pl.DataFrame:
        """The verdicts as a polars frame: one row per record, the `--json` fields as columns
        (reasons a list of sentences; null where a reading is not one)."""
        from roofwise.output.frame import verdict_frame

        return verdict_frame(self)

    def to_pandas(self) -> Any:
        """The verdicts as a pandas DataFrame (needs pandas installed)."""
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise ImportError("Analysis.to_pandas needs pandas: pip install pandas") from None
        return self.to_polars().to_pandas()

    def __repr__(self) -> str:
        from roofwise.render.notebook import analysis_repr  # renderings live in report/

        return analysis_repr(self)

    def _repr_html_(self) -> str:
        from roofwise.render.notebook import analysis_html

        return analysis_html(self)

    def verdict_name(self, i: int) -> str:
        return VERDICTS[int(self.judged.verdict[i])]

    def counts(self) -> dict[str, int]:
        found = np.bincount(self.judged.verdict.astype(np.int64), minlength=len(VERDICTS))
        return {name: int(found[k]) for k, name in enumerate(VERDICTS)}

    def reasons(self, i: int) -> list[str]:
        return explain(self, i)

    def row(self, i: int) -> dict[str, Any]:
        """The verdict contract of DESIGN.md: input fields plus the judgement."""
        original = dict(self.columns.rows[i]) if self.columns.rows is not None else {
            "op": self.columns.op[i], "flops": float(self.columns.flops[i]),
            "bytes": float(self.columns.bytes[i]), "roof": self.columns.roof[i],
            "time_s": float(self.columns.time_s[i])}
        blank = int(self.judged.verdict[i]) == BLANK
        priced = self.priced
        out = {**original,
               "machine": self.machine_name[i] or None,
               "memory_time_s": _num(priced.memory_time_s[i], blank),
               "compute_time_s": _num(priced.compute_time_s[i], blank),
               "compute_serial_time_s": _num(priced.compute_serial_time_s[i], blank),
               "sol_time_s": _num(priced.sol_time_s[i], blank),
               "bound": None if blank else ("memory" if priced.bound_memory[i] else "compute"),
               "binding_unit": None if blank else (priced.binding_unit[i] or None),
               "intensity_flops_per_byte": _num(priced.intensity_flops_per_byte[i], False),
               "mix": priced.mix[i] or None,
               "regime": self.regime or "envelope",
               # never a reading where the model says efficiency is not the metric
               "efficiency": _num(self.judged.efficiency[i], int(self.judged.verdict[i]) in (
                   BLANK, IMPOSSIBLE, LATENCY_BOUND)),
               **self._floor_and_pipes(i, blank),
               "verdict": self.verdict_name(i),
               "reasons": self.reasons(i)}
        return out

    def _floor_and_pipes(self, i: int, blank: bool) -> dict[str, Any]:
        """The timing method and floor a row was read with, efficiency net of the floor where
        it is a sizeable share, and the band between overlapped and serial pipes."""
        judged, priced = self.judged, self.priced
        no_reading = int(judged.verdict[i]) in (BLANK, IMPOSSIBLE, LATENCY_BOUND)
        pipes = [] if blank else pipes_near_binding(priced, i)
        second = bool(int(priced.flags[i]) & Reason.SECOND_PIPE)
        return {
            "timing_method": timing_method(str(self.columns.timing[i])),
            "kernels": self.columns.kernel_count(i),
            "floor_s": _num(judged.floor_s[i], blank) if judged.floor_s is not None else None,
            "efficiency_net_of_floor": (None if judged.net_efficiency is None else
                                        _num(judged.net_efficiency[i], no_reading)),
            "pipes": [{"unit": k, "time_s": t} for k, t in pipes] if second else None,
            "serial_sol_time_s": (_num(priced.serial_sol_time_s[i], blank)
                                  if second and priced.serial_sol_time_s is not None else None),
            "efficiency_band": ([_num(judged.efficiency[i], no_reading),
                                 _num(judged.serial_efficiency[i], no_reading)]
                                if second and judged.serial_efficiency is not None else None),
        }

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        for i in range(len(self)):
            yield self.row(i)


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
            mix: str | None = None) -> Analysis:
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
        sub = columns.take(index) if len(index) != n else columns
        priced = price_columns(chosen, sub.flops, sub.bytes, sub.roof, sub.flops_by_unit,
                               sub.has_unit_split, regime, mix, sub.read_bytes, sub.write_bytes,
                               sub.roof_categories())
        parts.append((index, priced, judge(chosen, priced, sub.time_s, sub.timing, sub.bytes,
                                           sub.kernel_counts(), sub.time_p10_s, sub.time_p90_s)))
    unmatched = np.flatnonzero(row_machine < 0)
    if len(unmatched):
        parts.append((unmatched, *_blank_rows(len(unmatched))))
    if not parts:  # no rows at all
        parts.append((np.arange(0), *_blank_rows(0)))
    priced_all, judged_all = _scatter(n, parts)
    labels = np.array([m.name for m in used] + [""], dtype=object)
    names = uniform(used[0].name, n) if len(used) == 1 and not len(unmatched) else labels[
        row_machine]
    return Analysis(columns, names, {m.name: m for m in used}, priced_all, judged_all, why,
                    regime, mix)


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
    judged = Judged(nan, nan, np.full(n, BLANK, dtype=np.int8), flags, nan, nan, nan, nan)
    return priced, judged


def _scatter(n: int, parts: list[tuple[np.ndarray, Priced, Judged]]) -> tuple[Priced, Judged]:
    if len(parts) == 1 and len(parts[0][0]) == n:
        return parts[0][1], parts[0][2]

    def merge(kind: type, pick: int) -> Any:
        values: dict[str, Any] = {}
        for f in fields(kind):
            sample = getattr(parts[0][pick], f.name)
            if isinstance(sample, Mapping):
                keys = dict.fromkeys(k for part in parts for k in getattr(part[pick], f.name))
                values[f.name] = {k: _fill(n, [(p[0], getattr(p[pick], f.name).get(k))
                                               for p in parts]) for k in keys}
            else:
                values[f.name] = _fill(n, [(p[0], getattr(p[pick], f.name)) for p in parts])
        return kind(**values)

    return merge(Priced, 1), merge(Judged, 2)


def _fill(n: int, pieces: list[tuple[np.ndarray, np.ndarray | None]]) -> np.ndarray:
    dtype = next((p.dtype for _, p in pieces if p is not None), np.dtype(np.float64))
    if dtype == np.dtype(object):
        out = np.full(n, "", dtype=object)
    elif dtype == np.dtype(bool):
        out = np.zeros(n, dtype=bool)
    elif np.issubdtype(dtype, np.floating):
        out = np.full(n, np.nan)
    else:
        out = np.zeros(n, dtype=dtype)
    for index, values in pieces:
        if values is not None:
            out[index] = values
        elif np.issubdtype(out.dtype, np.floating):
            out[index] = 0.0
    return out


def explain(analysis: Analysis, i: int) -> list[str]:
    """Short sentences saying why row `i` got its verdict, with the numbers that decided it."""
    with np.errstate(all="ignore"):  # an overflowing rate is reported, not warned about
        return _explain(analysis, i)


def _explain(analysis: Analysis, i: int) -> list[str]:
    flags = Reason(int(analysis.judged.flags[i]))
    name = analysis.machine_name[i]
    cols, priced, judged = analysis.columns, analysis.priced, analysis.judged
    if Reason.NO_MACHINE in flags:
        return [str(analysis.no_machine_reason[i]) or "no machine profile"]
    machine = analysis.machines[name]
    from roofwise.verdicts.mismatch import (
        device_mismatch,  # it reads Analysis; imported here to avoid a cycle
    )

    mismatch = device_mismatch(str(cols.device[i] or ""), machine)
    out: list[str] = [mismatch] if mismatch else []
    roof = str(cols.roof[i])
    if Reason.UNKNOWN_ROOF in flags:
        out.append(f"unknown roof {roof!r} on {machine.name}; units: {', '.join(machine.units)}")
    if Reason.UNKNOWN_UNIT in flags:
        missing = [u for u in cols.flops_by_unit if machine.unit(u) is None
                   and cols.flops_by_unit[u][i] > 0]
        out.append(f"flops_by_unit names units {machine.name} lacks: {', '.join(missing)}")
    if Reason.UNIT_RATE_GAP in flags:
        out.append(f"{machine.name} has no known rate for the units used (a gap in its sources)")
    if Reason.NO_BANDWIDTH in flags:
        out.append(f"{machine.name} has no known {machine.dram.name} bandwidth (a gap)")
    if Reason.ZERO_BYTES in flags:
        out.append("zero bytes: the ledger moves nothing, so there is no memory roof to read")
    if Reason.BAD_TIME in flags:
        out.append(f"non-positive time_s {float(cols.time_s[i]):g}")
    if Reason.ABOVE_THEORETICAL_BANDWIDTH in flags:
        theory = machine.dram.theoretical_bytes_per_s or math.nan
        achieved = fmt.fixed(judged.achieved_bytes_per_s[i] / 1e9, ".1f", "GB/s")
        out.append(f"bytes/time {achieved} exceeds "
                   f"{machine.dram.name} theoretical {theory / 1e9:.0f} GB/s: physically "
                   "impossible, so the bytes or the time are wrong")
    if Reason.ABOVE_THEORETICAL_RATE in flags:
        over = [u for u, ops in priced.unit_ops.items()
                if (unit := machine.unit(u)) is not None and unit.theoretical_ops_per_s
                and cols.time_s[i] > 0 and ops[i] / cols.time_s[i] > unit.theoretical_ops_per_s]
        for u in over:
            rate = priced.unit_ops[u][i] / cols.time_s[i]
            peak = machine.units[u].theoretical_ops_per_s or math.nan
            out.append(reason_text.above_rate_sentence(u, fmt.tera_rate(rate, u),
                                                       fmt.tera_rate(peak, u)))
    if Reason.BELOW_LATENCY_FLOOR in flags:
        out += _floor_sentences(analysis, i, machine, flags)
    if Reason.ANOMALY in flags and not flags & IMPOSSIBLE_REASONS:  # impossible said it
        out.append(reason_text.above_envelope_text(
            float(analysis.judged.envelope_efficiency[i]), ceiling_facts(analysis, i, machine)))
    if Reason.ABOVE_REGIME_WITHIN_ENVELOPE in flags:
        used = (f"{analysis.regime} regime" if analysis.regime else
                f"{machine.dram.name} {priced.mix[i]} mix")
        out.append(f"above the ceiling of the {used} it was priced with, but within the "
                   "envelope (the highest measured mix and regime)")
    pipes = pipes_near_binding(priced, i)
    if int(analysis.judged.verdict[i]) in (AT_CEILING, BELOW):
        bound = "memory" if priced.bound_memory[i] else "compute"
        roof_used = (f"{machine.dram.name} {priced.mix[i]} mix" if priced.bound_memory[i]
                     else reason_text.bound_label(False, pipes, str(priced.binding_unit[i])))
        # a floor that binds part of the time: the efficiency net of it, said here once (a
        # split row says it in its own sentence instead)
        net = "" if (judged.net_efficiency is None or Reason.FLOOR_SPLIT in flags
                     or not math.isfinite(judged.net_efficiency[i])) else (
            reason_text.net_beside_text(float(judged.net_efficiency[i]),
                                        float(cols.time_s[i]),
                                        floor_facts(analysis, i, machine)))
        out.append(f"{fmt.percent(judged.efficiency[i])} of SOL{net}; {bound}-bound on "
                   f"{roof_used}")
    if Reason.FLOOR_SPLIT in flags:
        out += _floor_sentences(analysis, i, machine, flags)
    if Reason.SECOND_PIPE in flags and priced.serial_sol_time_s is not None and (
            judged.serial_efficiency is not None):
        out.append(reason_text.pipes_text(pipes, float(priced.sol_time_s[i]),
                                          float(priced.serial_sol_time_s[i]),
                                          float(judged.efficiency[i]),
                                          float(judged.serial_efficiency[i])))
    if Reason.UNCALIBRATED_MEMORY in flags:
        out.append(f"{machine.dram.name} bandwidth is the datasheet figure (uncalibrated)")
    if Reason.UNCALIBRATED_UNIT in flags:
        raw = [u for u, ops in priced.unit_ops.items() if ops[i] > 0
               and (unit := machine.unit(u)) is not None and not unit.calibrated]
        out.append(f"uncalibrated unit(s) priced at the datasheet rate: {', '.join(raw)}")
    if Reason.WALL_TIMING in flags:
        out.append("wall-clock time includes host overhead: efficiency is a lower bound")
    return out





def floor_facts(analysis: Analysis, i: int, machine: Machine) -> reason_text.FloorFacts:
    """The floor row `i` was read against, in parts."""
    stated = timing_method(str(analysis.columns.timing[i]))
    overlapped = bool(int(analysis.judged.flags[i]) & Reason.FLOOR_OVERLAPPED)
    timing = "kernel" if overlapped else stated
    kernels = analysis.columns.kernel_count(i)
    floor = machine.latency_floors.floor(timing)
    return reason_text.FloorFacts(timing, kernels, floor.per_call_s, floor.per_kernel_s,
                                  floor.floor_s(kernels), floor.assumed, floor.source,
                                  stated if overlapped else "")


def _floor_sentences(analysis: Analysis, i: int, machine: Machine, flags: Reason) -> list[str]:
    """The latency_bound reason, or the split of a `below` row's time into floor and rest (a
    floor that is only a share of the time is said beside the efficiency instead)."""
    cols, priced, judged = analysis.columns, analysis.priced, analysis.judged
    facts = floor_facts(analysis, i, machine)
    sol_s, time_s = float(priced.sol_time_s[i]), float(cols.time_s[i])
    if Reason.BELOW_LATENCY_FLOOR in flags:
        return [reason_text.latency_bound_text(sol_s, time_s, facts)]
    if Reason.FLOOR_SPLIT in flags and judged.net_efficiency is not None:
        return [reason_text.floor_split_text(sol_s, time_s, facts,
                                             float(judged.net_efficiency[i]))]
    return []


def ceiling_facts(analysis: Analysis, i: int, machine: Machine, envelope: bool = True
                  ) -> reason_text.CeilingFacts | None:
    """The ceiling that bound row `i` (the envelope's, or the one it was priced with), with
    the fraction of its theoretical rate the row implies."""
    cols, priced = analysis.columns, analysis.priced
    memory = bool(priced.bound_memory[i])
    ceiling = machine.ceiling(memory, str(priced.binding_unit[i]),
                              None if envelope else str(priced.mix[i]),
                              None if envelope else analysis.regime)
    time_s = float(cols.time_s[i])
    if ceiling.theoretical_per_s is None or time_s <= 0:
        return None
    done = float(cols.bytes[i]) if memory else float(priced.binding_ops[i])
    return reason_text.CeilingFacts(ceiling.name, done / time_s / ceiling.theoretical_per_s,
                                    ceiling.fraction)


def _num(value: float, blank: bool) -> float | None:
    if blank or value is None or not math.isfinite(float(value)):
        return None
    return float(value)
