"""Speed-of-light times from a machine and the work a call must do, over numpy columns.

One code path prices one ledger or a million records: `price_columns` is vectorised, and
`price_ledger` is a one-row call of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from roofwise.base import fmt
from roofwise.base.errors import InputError
from roofwise.ledgers.ledger import Ledger
from roofwise.pricing.reasons import Reason
from roofwise.profiles.machine import REGIMES, Machine

AUTO_MIX = "auto"
# A pipe whose time is at least this share of the binding pipe's is named beside it: the call
# measures between the overlapped bound (the max) and the serial sum (issue 8, M5).
SECOND_PIPE_SHARE = 0.5
# Share of each access mix's bytes that are reads: copy reads one array and writes one, triad
# reads two and writes one, read and write only read or write. `--mix auto` picks the mix
# whose share is nearest the row's (a share, not a ratio: a row writing 4 B of a 2 GiB read
# is read-dominated, not "infinitely" far from every mix).
MIX_READ_SHARE = {"copy": 1 / 2, "triad": 2 / 3, "read": 1.0, "write": 0.0}


@dataclass(frozen=True)
class Priced:
    """Per-row prices. Times in seconds; `flags` carries blank and qualifying reasons."""

    memory_time_s: np.ndarray
    compute_time_s: np.ndarray  # slowest pipe: pipes run concurrently
    compute_serial_time_s: np.ndarray  # sum over pipes: what one-after-another issue costs
    sol_time_s: np.ndarray
    bound_memory: np.ndarray  # bool; a tie is memory
    intensity_flops_per_byte: np.ndarray
    binding_unit: np.ndarray  # object: the slowest pipe
    binding_ops: np.ndarray  # operations on the slowest pipe
    theoretical_compute_time_s: np.ndarray  # the work at theoretical peaks: faster is impossible
    unit_ops: Mapping[str, np.ndarray]
    unit_time_s: Mapping[str, np.ndarray]
    bandwidth_bytes_per_s: np.ndarray
    mix: np.ndarray  # object: the access mix whose ceiling priced the row
    envelope_sol_time_s: np.ndarray  # with the highest mix and regime: what judges anomalies
    flags: np.ndarray  # int32 Reason bits
    # max(memory, serial compute): the bound if the pipes issued one after another
    serial_sol_time_s: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.sol_time_s.shape[0])


def price_columns(
    machine: Machine,
    flops: np.ndarray,
    bytes_: np.ndarray,
    roof: np.ndarray,
    flops_by_unit: Mapping[str, np.ndarray] | None = None,
    has_unit_split: np.ndarray | None = None,
    regime: str | None = None,
    mix: str | None = None,
    read_bytes: np.ndarray | None = None,
    write_bytes: np.ndarray | None = None,
    roof_categories: tuple[np.ndarray, tuple[str, ...]] | None = None,
) -> Priced:
    """Price every row. `roof_categories` (codes, names) spares sorting a column of strings.

    A row without `flops_by_unit` does all its work on its roof, so its rates are gathered
    per roof code in one pass; only rows that split their work loop over units.
    """
    n = int(flops.shape[0])
    if regime is not None and regime not in REGIMES:
        raise InputError("--regime", f"expected one of {', '.join(REGIMES)}, got {regime!r}")
    split = np.zeros(n, dtype=bool) if has_unit_split is None else has_unit_split
    split_rows = np.flatnonzero(split)
    if roof_categories is None:
        unique, inverse = np.unique(roof.astype(str), return_inverse=True)
        roof_categories = (inverse.reshape(-1), tuple(str(k) for k in unique))
    codes, keys = roof_categories

    rates = _unit_rates(machine, keys, regime)
    flags = rates.flags_by_code[codes] if len(keys) else np.zeros(n, dtype=np.int32)
    if rates.uncalibrated_by_code.any():
        mark(flags, rates.uncalibrated_by_code[codes] & (flops > 0), Reason.UNCALIBRATED_UNIT)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        compute = flops / rates.rate_by_code[codes]
        envelope_compute = (compute if rates.envelope_is_rate
                            else flops / rates.envelope_by_code[codes])
        theoretical_compute = flops / rates.theoretical_by_code[codes]
    binding_ops = flops
    serial = compute
    binding_code = codes
    names = list(keys)

    if len(split_rows):
        compute, envelope_compute, theoretical_compute, serial, binding_ops, binding_code = (
            compute.copy(), np.array(envelope_compute), theoretical_compute.copy(),
            compute.copy(), flops.copy(), codes.astype(np.int32))
        split_flags = np.zeros(len(split_rows), dtype=np.int32)
        part = _price_split(machine, {u: v[split_rows] for u, v in (flops_by_unit or {}).items()},
                            regime, split_flags, names)
        compute[split_rows], envelope_compute[split_rows] = part[0], part[1]
        theoretical_compute[split_rows], serial[split_rows] = part[2], part[3]
        binding_ops[split_rows], binding_code[split_rows] = part[4], part[5]
        flags[split_rows] = (flags[split_rows] & ~np.int32(_UNIT_REASONS)) | split_flags

    bandwidth, mix_used, envelope_bandwidth = _bandwidth(machine, n, mix, read_bytes, write_bytes)
    if machine.dram.theoretical_bytes_per_s is None:
        flags |= np.int32(Reason.NO_BANDWIDTH)
    elif not machine.dram.calibration_by_mix:
        flags |= np.int32(Reason.UNCALIBRATED_MEMORY)
    mark(flags, bytes_ <= 0, Reason.ZERO_BYTES)

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        memory = bytes_ / bandwidth
        intensity = np.divide(flops, bytes_, out=np.full(n, np.nan), where=bytes_ > 0)
        envelope_sol = np.maximum(bytes_ / envelope_bandwidth, envelope_compute)
    sol = np.maximum(memory, compute)
    serial_sol = np.maximum(memory, serial) if len(split_rows) else sol
    if len(split_rows):
        near = _pipes_near_binding(machine, flops_by_unit or {}, split_rows, regime,
                                   compute[split_rows])
        flags[split_rows] = _second_pipe(flags[split_rows], near, serial_sol[split_rows],
                                         sol[split_rows])
    label = np.array([*names, ""], dtype=object)
    binding = uniform(names[0], n) if len(names) == 1 and not len(split_rows) else label[
        binding_code]
    unit_ops = UnitColumns(_unit_ops_builders(names, codes, flops, split, flops_by_unit))
    return Priced(
        memory_time_s=memory, compute_time_s=compute, compute_serial_time_s=serial,
        sol_time_s=sol, bound_memory=memory >= compute, intensity_flops_per_byte=intensity,
        binding_unit=binding, binding_ops=binding_ops,
        theoretical_compute_time_s=theoretical_compute,
        unit_ops=unit_ops, unit_time_s=UnitColumns(_unit_time_builders(machine, regime, unit_ops)),
        bandwidth_bytes_per_s=bandwidth, mix=mix_used, envelope_sol_time_s=envelope_sol,
        flags=flags, serial_sol_time_s=serial_sol)


def pipes_near_binding(priced: Priced, i: int) -> list[tuple[str, float]]:
    """(unit, seconds) of every pipe at >= SECOND_PIPE_SHARE of row i's binding pipe, slowest
    first; just the binding pipe unless the row carries SECOND_PIPE."""
    binding = str(priced.binding_unit[i])
    if not int(priced.flags[i]) & Reason.SECOND_PIPE:
        return [(binding, float(priced.compute_time_s[i]))] if binding else []
    limit = SECOND_PIPE_SHARE * float(priced.compute_time_s[i])
    found = [(k, float(t[i])) for k, t in priced.unit_time_s.items()
             if t[i] > 0 and t[i] >= limit]
    return sorted(found, key=lambda kt: -kt[1])


@dataclass(frozen=True)
class NearPipes:
    """`pipes_near_binding` of many rows at once, in long form: entry e is pipe
    `units[unit[e]]` of row `row[e]`, taking `time_s[e]`; a row's entries are adjacent, in
    row order, slowest first (ties in unit order), the first its binding pipe."""

    units: tuple[str, ...]
    row: np.ndarray  # int64 row index
    unit: np.ndarray  # int64 index into units
    time_s: np.ndarray


def near_pipes(priced: Priced, rows: np.ndarray) -> NearPipes:
    """The pipes at >= SECOND_PIPE_SHARE of the binding one of each of `rows` (rows that
    carry SECOND_PIPE), as `pipes_near_binding` lists them, without a loop over rows."""
    units = tuple(priced.unit_time_s)
    rows = np.asarray(rows, dtype=np.int64)
    if not units or not len(rows):
        empty = np.zeros(0, dtype=np.int64)
        return NearPipes(units, empty, empty, np.zeros(0))
    times = np.stack([np.asarray(priced.unit_time_s[k], dtype=np.float64)[rows]
                      for k in units])
    limit = SECOND_PIPE_SHARE * np.asarray(priced.compute_time_s, dtype=np.float64)[rows]
    near = (times > 0) & (times >= limit)
    # each pipe's place in its row: the near pipes slower than it, or as slow and listed first
    place = np.zeros(times.shape, dtype=np.int64)
    for j in range(len(units)):
        for k in range(len(units)):
            if j != k:
                place[k] += near[j] & ((times[j] > times[k]) | ((times[j] == times[k]) & (j < k)))
    unit, at = np.nonzero(near)
    order = np.lexsort((place[unit, at], at))
    return NearPipes(units, rows[at[order]], unit[order].astype(np.int64),
                     times[unit[order], at[order]])


def _pipes_near_binding(machine: Machine, flops_by_unit: Mapping[str, np.ndarray],
                        rows: np.ndarray, regime: str | None,
                        binding_s: np.ndarray) -> np.ndarray:
    """Per split row, how many pipes take at least SECOND_PIPE_SHARE of the binding one's time."""
    count = np.zeros(len(rows), dtype=np.int32)
    for key, ops in flops_by_unit.items():
        unit = machine.unit(key)
        rate = None if unit is None else unit.effective_ops_per_s(regime)
        if rate:
            time_s = ops[rows] / rate
            count += ((time_s > 0) & (time_s >= SECOND_PIPE_SHARE * binding_s)).astype(np.int32)
    return count


def _second_pipe(flags: np.ndarray, near: np.ndarray, serial_sol_s: np.ndarray,
                 sol_s: np.ndarray) -> np.ndarray:
    """SECOND_PIPE where two or more pipes are near the binding one and their serial sum
    would move the bound (memory does not hide it)."""
    out = flags & ~np.int32(Reason.SECOND_PIPE)
    mark(out, (near >= 2) & (serial_sol_s > sol_s * (1 + 1e-9)), Reason.SECOND_PIPE)
    return out


# A row that splits its work is priced by its split, not its roof; but an unknown roof is
# still an unknown roof (blank), so only these flags are recomputed from the split.
_UNIT_REASONS = Reason.UNIT_RATE_GAP | Reason.UNCALIBRATED_UNIT


@dataclass(frozen=True)
class _Rates:
    """Per roof code: the rates a row on that roof is priced with, and its flags."""

    rate_by_code: np.ndarray
    envelope_by_code: np.ndarray
    theoretical_by_code: np.ndarray
    flags_by_code: np.ndarray
    uncalibrated_by_code: np.ndarray
    envelope_is_rate: bool


def _unit_rates(machine: Machine, keys: tuple[str, ...], regime: str | None) -> _Rates:
    rate, envelope, theoretical, flags, uncalibrated = [], [], [], [], []
    for key in keys:
        unit = machine.unit(key)
        known = None if unit is None else unit.effective_ops_per_s(regime)
        rate.append(known or math.inf)
        envelope.append((unit.effective_ops_per_s(None) if unit else None) or math.inf)
        theoretical.append((unit.theoretical_ops_per_s if unit else None) or math.inf)
        flags.append(Reason.UNKNOWN_ROOF if unit is None else
                     Reason.UNIT_RATE_GAP if known is None else Reason.NONE)
        uncalibrated.append(unit is not None and not unit.calibrated)
    return _Rates(np.array(rate), np.array(envelope), np.array(theoretical),
                  np.array([int(f) for f in flags], dtype=np.int32),
                  np.array(uncalibrated, dtype=bool), rate == envelope)


def _price_split(machine: Machine, ops_by_unit: Mapping[str, np.ndarray], regime: str | None,
                 flags: np.ndarray, names: list[str]) -> tuple[np.ndarray, ...]:
    """Rows whose work spans several pipes: the slowest pipe binds, the sum is serial issue."""
    m = len(flags)
    compute, envelope, theoretical, serial, binding_ops = (np.zeros(m) for _ in range(5))
    binding_code = np.full(m, -1, dtype=np.int32)
    for key, ops in ops_by_unit.items():
        used = ops > 0
        unit = machine.unit(key)
        rate = None if unit is None else unit.effective_ops_per_s(regime)
        if unit is None or rate is None:
            mark(flags, used, Reason.UNKNOWN_UNIT if unit is None else Reason.UNIT_RATE_GAP)
            continue
        if not unit.calibrated:
            mark(flags, used, Reason.UNCALIBRATED_UNIT)
        if key not in names:
            names.append(key)
        time_s = ops / rate
        slower = time_s > compute
        np.copyto(compute, time_s, where=slower)
        np.copyto(binding_ops, ops, where=slower)
        np.copyto(binding_code, np.int32(names.index(key)), where=slower)
        serial += time_s
        np.maximum(envelope, ops / (unit.effective_ops_per_s(None) or rate), out=envelope)
        np.maximum(theoretical, ops / (unit.theoretical_ops_per_s or math.inf), out=theoretical)
    return compute, envelope, theoretical, serial, binding_ops, binding_code


class UnitColumns(Mapping[str, np.ndarray]):
    """Per-unit columns, each built on first use: most readers want one or two of them."""

    def __init__(self, builders: Mapping[str, Callable[[], np.ndarray]]) -> None:
        self._builders = dict(builders)
        self._built: dict[str, np.ndarray] = {}

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._built:
            self._built[key] = self._builders[key]()
        return self._built[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._builders)

    def __len__(self) -> int:
        return len(self._builders)


def _unit_ops_builders(names: list[str], codes: np.ndarray, flops: np.ndarray,
                       split: np.ndarray, flops_by_unit: Mapping[str, np.ndarray] | None
                       ) -> dict[str, Callable[[], np.ndarray]]:
    def build(key: str) -> np.ndarray:
        on_roof = codes == names.index(key) if key in names else np.zeros(len(flops), bool)
        ops = np.where(on_roof & ~split, flops, 0.0)
        if flops_by_unit and key in flops_by_unit:
            ops += np.where(split, flops_by_unit[key], 0.0)
        return ops

    keys = dict.fromkeys([*names, *(flops_by_unit or {})])
    return {k: partial(build, k) for k in keys}


def _unit_time_builders(machine: Machine, regime: str | None, unit_ops: UnitColumns
                        ) -> dict[str, Callable[[], np.ndarray]]:
    """Each unit's time: its ops (built once, shared with `unit_ops`) over its rate."""
    builders: dict[str, Callable[[], np.ndarray]] = {}
    for key in unit_ops:
        unit = machine.unit(key)
        rate = None if unit is None else unit.effective_ops_per_s(regime)
        if rate is not None:
            builders[key] = partial(_divided, partial(unit_ops.__getitem__, key), rate)
    return builders


def _divided(build: Callable[[], np.ndarray], rate: float) -> np.ndarray:
    return build() / rate


def _bandwidth(machine: Machine, n: int, mix: str | None, read_bytes: np.ndarray | None,
               write_bytes: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    level = machine.dram
    envelope = level.effective_bytes_per_s(None)
    if envelope is None:
        nan = np.full(n, np.nan)
        return nan, uniform("", n), nan
    if mix not in (None, AUTO_MIX) and mix not in level.calibration_by_mix:
        measured = ", ".join(level.calibration_by_mix) or "none"
        raise InputError("--mix", f"machine {machine.name} has no measured {mix!r} mix; "
                                  f"expected auto or one of: {measured}")
    envelope_mix = level.envelope_mix or "theoretical"
    if mix != AUTO_MIX or read_bytes is None or write_bytes is None:
        chosen = envelope_mix if mix in (None, AUTO_MIX) else mix
        rate = level.effective_bytes_per_s(None if chosen == "theoretical" else chosen)
        return constant(rate or math.nan, n), uniform(chosen, n), constant(envelope, n)
    mixes = np.array(list(level.calibration_by_mix) or ["theoretical"], dtype=object)
    picks = _mix_for_split(list(level.calibration_by_mix), read_bytes, write_bytes)
    mix_names = np.where(picks >= 0, mixes[np.maximum(picks, 0)], envelope_mix)
    rates = np.array([level.effective_bytes_per_s(str(m)) or envelope for m in mixes])
    return (np.where(picks >= 0, rates[np.maximum(picks, 0)], envelope), mix_names.astype(object),
            np.full(n, envelope))


def mark(flags: np.ndarray, rows: np.ndarray | bool, reason: Reason) -> None:
    """Set `reason` on the selected rows, in place.

    OR-ing in the mask times the bit is branch-free; numpy's `where=` is many times slower on a
    mask that flips from row to row.
    """
    flags |= np.asarray(rows, dtype=np.int32) * np.int32(reason)


def constant(value: float, n: int) -> np.ndarray:
    """A read-only float column holding one value."""
    return np.broadcast_to(np.float64(value), (n,))


def uniform(value: str, n: int) -> np.ndarray:
    """A read-only object column holding one value, without a million copies."""
    return np.broadcast_to(np.array(value, dtype=object), (n,))


def equal_to(column: np.ndarray, value: str) -> np.ndarray:
    """`column == value` as a bool mask; a column of one repeated value (`uniform`, what one
    machine or one roof gives a whole file) is compared once, not per row."""
    if column.ndim == 1 and column.strides == (0,) and len(column):
        return np.full(len(column), column[0] == value, dtype=bool)
    return np.asarray(column == value, dtype=bool)


def _mix_for_split(mixes: list[str], read_bytes: np.ndarray,
                   write_bytes: np.ndarray) -> np.ndarray:
    """Index of the measured mix whose read share is nearest the row's (the first listed on a
    tie); -1 where the row has no usable split or no mix was measured."""
    if not mixes:
        return np.full(read_bytes.shape, -1)
    targets = np.array([MIX_READ_SHARE.get(m, np.nan) for m in mixes])
    with np.errstate(divide="ignore", invalid="ignore"):
        share = read_bytes / (read_bytes + write_bytes)
    distance = np.abs(share[:, None] - targets[None, :])
    distance = np.where(np.isnan(distance), np.inf, distance)
    best = distance.argmin(axis=1)
    return np.where(np.isfinite(distance.min(axis=1)), best, -1)


@dataclass(frozen=True, repr=False)
class LedgerPrice:
    """The price of one ledger, as plain numbers."""

    ledger: Ledger
    machine: Machine
    memory_time_s: float
    compute_time_s: float
    compute_serial_time_s: float
    sol_time_s: float
    bound: str  # "memory" | "compute"
    binding_unit: str
    intensity_flops_per_byte: float
    bandwidth_bytes_per_s: float
    mix: str
    regime: str | None
    unit_time_s: Mapping[str, float]
    flags: Reason

    def __repr__(self) -> str:
        bound = (f"memory-bound on {self.machine.dram.name} {self.mix} mix"
                 if self.bound == "memory" else f"compute-bound on {self.binding_unit}")
        return (f"<LedgerPrice {self.ledger.name} on {self.machine.name}: SOL "
                f"{fmt.seconds(self.sol_time_s)}, {bound}; {fmt.nbytes(self.ledger.bytes)}, "
                f"{fmt.count(self.ledger.flops)}, "
                f"AI {fmt.intensity(self.intensity_flops_per_byte)} FLOP/B>")

    def _repr_html_(self) -> str:
        m = self.machine
        return fmt.html_pairs([
            ("op", self.ledger.name), ("machine", f"{m.name} ({m.display_name})"),
            ("bytes", fmt.nbytes(self.ledger.bytes)), ("FLOPs", fmt.count(self.ledger.flops)),
            ("AI", f"{fmt.intensity(self.intensity_flops_per_byte)} FLOP/B"),
            ("memory time", fmt.seconds(self.memory_time_s)),
            ("compute time (slowest pipe)", fmt.seconds(self.compute_time_s)),
            ("SOL", fmt.seconds(self.sol_time_s)),
            ("bound", f"{self.bound} ({m.dram.name} {self.mix} mix)" if self.bound == "memory"
             else f"{self.bound} ({self.binding_unit})"),
            ("regime", self.regime or "envelope")])


def placed(ledger: Ledger, machine: Machine) -> Ledger:
    """`ledger` with each work item on the unit that runs its class on `machine`
    (`Machine.pipe_for`): an operator's cuda_core.fp32 arithmetic runs on an Ascend's vector
    ALU, its sfu.fp32 transcendentals on the vector SFU. Unchanged where the machine has
    the declared units. The roof follows the class of most of the work on it."""
    if not machine.pipes_by_class:
        return ledger
    work = tuple(replace(w, unit=machine.pipe_for(w.unit, w.op_class)) for w in ledger.work)
    on_roof = [w for w in ledger.work if w.unit == ledger.roof]
    roof_class = (max(on_roof, key=lambda w: w.ops).op_class if on_roof else
                  ("contraction" if ledger.roof.startswith("tensor_core.") else "arithmetic"))
    return replace(ledger, work=work, roof=machine.pipe_for(ledger.roof, roof_class),
                   stages=tuple(placed(s, machine) for s in ledger.stages))


def moved_work(ledger: Ledger, machine: Machine) -> dict[str, str]:
    """Declared unit -> the unit it runs on here, for each work item `placed` moves."""
    return {w.unit: machine.pipe_for(w.unit, w.op_class) for w in ledger.work
            if machine.pipe_for(w.unit, w.op_class) != w.unit}


def price_ledger(ledger: Ledger, machine: Machine, regime: str | None = None,
                 mix: str | None = None) -> LedgerPrice:
    """The speed-of-light price of one ledger on `machine`: memory and per-pipe compute
    times in seconds, the bound, and the intensity in FLOP/byte (see `LedgerPrice`)."""
    ledger = placed(ledger, machine)
    by_unit = ledger.ops_by_unit
    priced = price_columns(
        machine, np.array([ledger.flops]), np.array([float(ledger.bytes)]),
        np.array([ledger.roof], dtype=object),
        flops_by_unit={u: np.array([v]) for u, v in by_unit.items()},
        has_unit_split=np.array([bool(by_unit)]), regime=regime, mix=mix,
        read_bytes=np.array([float(ledger.read_bytes)]),
        write_bytes=np.array([float(ledger.write_bytes)]))
    return LedgerPrice(
        ledger=ledger, machine=machine,
        memory_time_s=float(priced.memory_time_s[0]),
        compute_time_s=float(priced.compute_time_s[0]),
        compute_serial_time_s=float(priced.compute_serial_time_s[0]),
        sol_time_s=float(priced.sol_time_s[0]),
        bound="memory" if bool(priced.bound_memory[0]) else "compute",
        binding_unit=str(priced.binding_unit[0]),
        intensity_flops_per_byte=float(priced.intensity_flops_per_byte[0]),
        bandwidth_bytes_per_s=float(priced.bandwidth_bytes_per_s[0]),
        mix=str(priced.mix[0]), regime=regime,
        unit_time_s={u: float(t[0]) for u, t in priced.unit_time_s.items() if t[0] > 0},
        flags=Reason(int(priced.flags[0])))


def cycles_by_unit(ops_by_unit: Mapping[str, float], machine: Machine) -> dict[str, float]:
    """Cycles each pipe needs at its ops-per-cycle rate (for machines priced per cycle)."""
    cycles: dict[str, float] = {}
    for key, ops in ops_by_unit.items():
        unit = machine.unit(key)
        if unit is None or unit.ops_per_cycle is None:
            raise InputError(f"unit {key}", f"machine {machine.name} gives no ops/cycle for it")
        cycles[key] = ops / unit.ops_per_cycle
    return cycles


def missing_units(ledger: Ledger, machine: Machine, at: str = "") -> list[tuple[str, str]]:
    """(unit, where in the ledger) for each roof or work unit the machine does not have."""
    ledger = placed(ledger, machine)
    found = [(ledger.roof, f"{at}roof")] if machine.unit(ledger.roof) is None else []
    found += [(w.unit, f"{at}work {w.label or w.op_class!r}") for w in ledger.work
              if machine.unit(w.unit) is None and not ledger.stages]
    for i, stage in enumerate(ledger.stages):
        found += missing_units(stage, machine, f"{at}stages[{i}].")
    return list(dict.fromkeys(found))


def rate_gaps(ledger: Ledger, machine: Machine) -> list[str]:
    """What the ledger needs that the profile leaves as a gap: no time in seconds without it."""
    ledger = placed(ledger, machine)
    gaps = [f"{u} (no rate per second)" for u, ops in ledger.ops_by_unit.items()
            if ops > 0 and (unit := machine.unit(u)) is not None
            and unit.theoretical_ops_per_s is None]
    if machine.dram.theoretical_bytes_per_s is None:
        gaps.append(f"memory level {machine.dram.name} (no bandwidth)")
    return gaps


@dataclass(frozen=True)
class CyclePrice:
    """A ledger priced per pipe in cycles, for machines whose clock is a gap."""

    cycles_by_unit: Mapping[str, float]
    compute_cycles: float  # pipes overlapped: the slowest one bounds the call
    compute_serial_cycles: float  # pipes issued one after another
    binding_unit: str
    memory_cycles: float | None  # reads over the first memory level's bytes/cycle, if known
    memory_level: str


def price_ledger_cycles(ledger: Ledger, machine: Machine) -> CyclePrice:
    """Cycles per pipe at each unit's ops/cycle, for a machine whose clock is a gap."""
    ledger = placed(ledger, machine)
    cycles = cycles_by_unit({u: ops for u, ops in ledger.ops_by_unit.items() if ops > 0},
                            machine)
    level = machine.dram
    binding = max(cycles, key=lambda u: cycles[u]) if cycles else ""
    return CyclePrice(
        cycles_by_unit=cycles, compute_cycles=cycles.get(binding, 0.0),
        compute_serial_cycles=sum(cycles.values()), binding_unit=binding,
        memory_cycles=(ledger.read_bytes / level.bytes_per_cycle
                       if level.bytes_per_cycle else None), memory_level=level.name)
