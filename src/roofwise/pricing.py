"""Speed-of-light times from a machine and the work a call must do, over numpy columns.

One code path prices one ledger or a million records: `price_columns` is vectorised, and
`price_ledger` is a one-row call of it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .errors import InputError
from .ledger import Ledger
from .machine import Machine
from .reasons import Reason

AUTO_MIX = "auto"
# read:write ratio of each access mix (copy reads one array and writes one; triad reads two)
_MIX_READ_WRITE_RATIO = {"copy": 1.0, "triad": 2.0}


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
    binding_ops: np.ndarray  # operations on the slowest pipe (for the physics check)
    unit_ops: Mapping[str, np.ndarray]
    unit_time_s: Mapping[str, np.ndarray]
    bandwidth_bytes_per_s: np.ndarray
    mix: np.ndarray  # object: the access mix whose ceiling priced the row
    envelope_sol_time_s: np.ndarray  # with the highest mix and regime: what judges anomalies
    flags: np.ndarray  # int64 Reason bits

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
    """Price every row. `roof_categories` (codes, names) spares sorting a column of strings."""
    n = int(flops.shape[0])
    flops_by_unit = flops_by_unit or {}
    split = np.zeros(n, dtype=bool) if has_unit_split is None else has_unit_split
    flags = np.zeros(n, dtype=np.int64)
    # np.bitwise_or with `where` marks rows without gathering and scattering them

    if roof_categories is None:
        unique, inverse = np.unique(roof.astype(str), return_inverse=True)
        roof_categories = (inverse.reshape(-1), tuple(str(k) for k in unique))
    roof_index, roof_keys = roof_categories
    unit_ops: dict[str, np.ndarray] = {}
    for k, key in enumerate(roof_keys):
        unit_ops[str(key)] = np.where(~split & (roof_index == k), flops, 0.0)
    for key, ops in flops_by_unit.items():
        unit_ops[key] = unit_ops.get(key, np.zeros(n)) + np.where(split, ops, 0.0)

    for k, key in enumerate(roof_keys):
        if machine.unit(str(key)) is None:
            mark(flags, roof_index == k, Reason.UNKNOWN_ROOF)

    unit_time: dict[str, np.ndarray] = {}
    envelope_time: dict[str, np.ndarray] = {}
    for key, ops in unit_ops.items():
        unit = machine.unit(key)
        used = ops > 0
        if unit is None:
            mark(flags, used & split, Reason.UNKNOWN_UNIT)
            continue
        rate = unit.effective_ops_per_s(regime)
        envelope_rate = unit.effective_ops_per_s(None)
        if rate is None or envelope_rate is None:
            is_roof = roof_index == roof_keys.index(key) if key in roof_keys else False
            mark(flags, used | is_roof, Reason.UNIT_RATE_GAP)
            continue
        if not unit.calibrated:
            mark(flags, used, Reason.UNCALIBRATED_UNIT)
        unit_time[key] = ops / rate
        envelope_time[key] = ops / envelope_rate

    names = list(unit_time)
    if names:
        stacked = np.vstack([unit_time[k] for k in names])
        slowest = stacked.argmax(axis=0)
        compute = np.take_along_axis(stacked, slowest[None, :], axis=0)[0]
        serial = stacked.sum(axis=0)
        binding_ops = np.take_along_axis(np.vstack([unit_ops[k] for k in names]),
                                         slowest[None, :], axis=0)[0]
        binding = (uniform(names[0], n) if len(names) == 1
                   else np.array(names, dtype=object)[slowest])
        envelope_compute = np.vstack([envelope_time[k] for k in names]).max(axis=0)
    else:
        compute = serial = envelope_compute = binding_ops = np.zeros(n)
        binding = uniform("", n)

    bandwidth, mix_used, envelope_bandwidth = _bandwidth(machine, n, mix, read_bytes, write_bytes)
    if machine.dram.theoretical_bytes_per_s is None:
        flags |= np.int64(Reason.NO_BANDWIDTH)
    elif not machine.dram.calibration_by_mix:
        flags |= np.int64(Reason.UNCALIBRATED_MEMORY)
    mark(flags, bytes_ <= 0, Reason.ZERO_BYTES)

    with np.errstate(divide="ignore", invalid="ignore"):
        memory = bytes_ / bandwidth
        intensity = np.where(bytes_ > 0, flops / np.where(bytes_ > 0, bytes_, 1.0), np.nan)
        envelope_sol = np.maximum(bytes_ / envelope_bandwidth, envelope_compute)
    sol = np.maximum(memory, compute)
    return Priced(
        memory_time_s=memory, compute_time_s=compute, compute_serial_time_s=serial,
        sol_time_s=sol, bound_memory=memory >= compute, intensity_flops_per_byte=intensity,
        binding_unit=binding, binding_ops=binding_ops, unit_ops=unit_ops, unit_time_s=unit_time,
        bandwidth_bytes_per_s=bandwidth, mix=mix_used, envelope_sol_time_s=envelope_sol,
        flags=flags)


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
        return np.full(n, rate), uniform(chosen, n), np.full(n, envelope)
    mixes = np.array(list(level.calibration_by_mix) or ["theoretical"], dtype=object)
    picks = _mix_for_split(list(level.calibration_by_mix), read_bytes, write_bytes)
    mix_names = np.where(picks >= 0, mixes[np.maximum(picks, 0)], envelope_mix)
    rates = np.array([level.effective_bytes_per_s(str(m)) or envelope for m in mixes])
    return (np.where(picks >= 0, rates[np.maximum(picks, 0)], envelope), mix_names.astype(object),
            np.full(n, envelope))


def mark(flags: np.ndarray, rows: np.ndarray | bool, reason: Reason) -> None:
    """Set `reason` on the selected rows, in place."""
    np.bitwise_or(flags, np.int64(reason), out=flags, where=rows)


def uniform(value: str, n: int) -> np.ndarray:
    """A read-only object column holding one value, without a million copies."""
    return np.broadcast_to(np.array(value, dtype=object), (n,))


def _mix_for_split(mixes: list[str], read_bytes: np.ndarray,
                   write_bytes: np.ndarray) -> np.ndarray:
    """Index of the measured mix whose read:write ratio is nearest the row's; -1 for none."""
    if not mixes:
        return np.full(read_bytes.shape, -1)
    ratio = {"read": math.inf, "write": 0.0, **_MIX_READ_WRITE_RATIO}
    targets = np.array([ratio.get(m, np.nan) for m in mixes])
    with np.errstate(divide="ignore", invalid="ignore"):
        row_log = np.log2(read_bytes / write_bytes)
        target_log = np.log2(targets)
        distance = np.abs(row_log[:, None] - target_log[None, :])
    distance = np.where(np.isnan(distance), np.inf, distance)
    both_inf = np.isinf(row_log)[:, None] & np.isinf(target_log)[None, :] & (
        np.sign(row_log)[:, None] == np.sign(target_log)[None, :])
    distance = np.where(both_inf, 0.0, distance)
    best = distance.argmin(axis=1)
    valid = np.isfinite(distance.min(axis=1)) & ~np.isnan(read_bytes) & ~np.isnan(write_bytes)
    return np.where(valid, best, -1)


@dataclass(frozen=True)
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


def price_ledger(ledger: Ledger, machine: Machine, regime: str | None = None,
                 mix: str | None = None) -> LedgerPrice:
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
