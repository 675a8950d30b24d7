"""Read a measured time against its price: efficiency, a band, and the labels that keep it honest.

Order of precedence: blank (cannot price) > impossible (above a theoretical ceiling, so an
accounting error) > latency_bound (no traction) > anomaly (above the envelope) > at_ceiling
or below.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofwise.pricing.core import Priced, mark, uniform
from roofwise.pricing.reasons import BLANK_REASONS, IMPOSSIBLE_REASONS, Reason
from roofwise.profiles.machine import TIMINGS, LatencyFloors, Machine, timing_method

AT_CEILING_EFFICIENCY = 0.80  # TileOPs bands (scripts/nightly_report.py)
ANOMALY_EFFICIENCY = 1.05
# A row whose SOL is under its floor is latency_bound when the floor is at least this share of
# its time (read at p10 where given, so a measured floor never misses itself by noise).
FLOOR_EXPLAINS_SHARE = 0.5
# Efficiency net of the floor is shown beside efficiency from this share of the time up.
FLOOR_SIZEABLE_SHARE = 0.2
# A time within this fraction above (or its p90 at or above) its floor is read as at the floor.
FLOOR_NOISE = 0.05

VERDICTS = ("at_ceiling", "below", "anomaly", "latency_bound", "impossible", "blank")
AT_CEILING, BELOW, ANOMALY, LATENCY_BOUND, IMPOSSIBLE, BLANK = range(6)
# Verdicts whose efficiency is not a reading (the reasons carry the numbers instead): the one
# place this rule is written; the table, the report, --json and compare read it here.
NO_EFFICIENCY = frozenset({IMPOSSIBLE, LATENCY_BOUND, BLANK})
# Severity by verdict code, lower first: the rows that need a person's eyes come first.
SEVERITY = np.array([5, 3, 1, 4, 0, 2], dtype=np.int64)  # AT_CEILING .. BLANK


@dataclass(frozen=True)
class Judged:
    efficiency: np.ndarray  # sol / measured, against the ceilings the row was priced with
    envelope_efficiency: np.ndarray  # against the highest mix and regime: judges anomalies
    verdict: np.ndarray  # int8 index into VERDICTS
    flags: np.ndarray  # int32 Reason bits, pricing's included
    achieved_bytes_per_s: np.ndarray
    floor_s: np.ndarray | None = None  # the latency floor of the row's timing and kernel count
    net_efficiency: np.ndarray | None = None  # sol / (time - floor); NaN where not shown
    serial_efficiency: np.ndarray | None = None  # against max(memory, serial pipe sum)


def judge(machine: Machine, priced: Priced, time_s: np.ndarray, timing: np.ndarray,
          bytes_: np.ndarray, kernels: np.ndarray | None = None,
          time_p10_s: np.ndarray | None = None, time_p90_s: np.ndarray | None = None
          ) -> Judged:
    """A verdict per priced row (docs/verdicts.md): `time_s` measured seconds, `timing` its
    method (kernel, graph, events, wall; "device" is events), `bytes_` bytes per call,
    `kernels` launches per call (1 when None), `time_p10_s`/`time_p90_s` the noise it is read
    with. Impossible above a theoretical rate; latency-bound when SOL is under the floor of
    the row's timing and kernel count and that floor is at least half the time; anomaly above
    105% of the envelope; at_ceiling from 80% of SOL; else below. Efficiency = SOL / time."""
    flags = priced.flags.copy()
    mark(flags, ~(time_s > 0), Reason.BAD_TIME)
    mark(flags, wall_timing(timing), Reason.WALL_TIMING)

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        safe_time = np.where(time_s > 0, time_s, np.nan)
        efficiency = priced.sol_time_s / safe_time
        envelope_efficiency = priced.envelope_sol_time_s / safe_time
        achieved_bytes = bytes_ / safe_time

    theoretical_bw = machine.dram.theoretical_bytes_per_s
    if theoretical_bw is not None:
        mark(flags, achieved_bytes > theoretical_bw, Reason.ABOVE_THEORETICAL_BANDWIDTH)
    mark(flags, time_s < priced.theoretical_compute_time_s, Reason.ABOVE_THEORETICAL_RATE)

    at_ceiling = efficiency >= AT_CEILING_EFFICIENCY
    anomaly = envelope_efficiency > ANOMALY_EFFICIENCY
    floor_s, floor_assumed = row_floors(machine.latency_floors, timing, kernels, len(time_s))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        time_low = time_s if time_p10_s is None else np.fmin(time_s, time_p10_s)
        time_high = time_s * (1 + FLOOR_NOISE)
        if time_p90_s is not None:
            time_high = np.fmax(time_high, time_p90_s)
        # a time clearly under its method's floor shows the launches overlapped (back-to-back
        # calls): only the kernels' own floor, a profiler's, still holds for it
        kernel_floor_s, kernel_assumed = row_floors(
            machine.latency_floors, uniform("kernel", len(time_s)), kernels, len(time_s))
        # (a profiler's kernel durations have no launches to overlap: under their floor,
        # the assumed floor is only above this kernel's fixed cost)
        overlapped = (time_high < floor_s) & ~kernel_timing(timing, len(time_s))
        floor_s = np.where(overlapped, kernel_floor_s, floor_s)
        floor_assumed = np.where(overlapped, kernel_assumed, floor_assumed)
        sol_under_floor = priced.sol_time_s < floor_s
        # a reading in the at-ceiling band is a lower bound on the kernel that no floor can
        # spoil: the time could not be that short if the floor held for this row
        in_band = at_ceiling & ~anomaly
        latency = sol_under_floor & (floor_s >= FLOOR_EXPLAINS_SHARE * time_low) & ~in_band
        split = sol_under_floor & ~latency & ~in_band
        rest_s = time_s - floor_s
        net = priced.sol_time_s / rest_s
        # net of the floor only where the rest still covers SOL: a net above 100% says the
        # launches overlapped the kernel, and subtracting them would overstate it
        share = ((split | (floor_s >= FLOOR_SIZEABLE_SHARE * time_s)) & ~latency
                 & (rest_s > 0) & (net <= 1.0))
        serial_efficiency = (priced.sol_time_s if priced.serial_sol_time_s is None
                             else priced.serial_sol_time_s) / safe_time
    mark(flags, overlapped & (latency | split | share), Reason.FLOOR_OVERLAPPED)
    mark(flags, latency, Reason.BELOW_LATENCY_FLOOR)
    mark(flags, split, Reason.FLOOR_SPLIT)
    mark(flags, share, Reason.FLOOR_SHARE)
    mark(flags, floor_assumed & (latency | split | share), Reason.FLOOR_ASSUMED)

    mark(flags, anomaly, Reason.ANOMALY)
    mark(flags, (efficiency > ANOMALY_EFFICIENCY) & ~anomaly,
         Reason.ABOVE_REGIME_WITHIN_ENVELOPE)

    blank = (flags & np.int32(BLANK_REASONS)) != 0
    impossible = ~blank & ((flags & np.int32(IMPOSSIBLE_REASONS)) != 0)
    latency_bound = ~blank & ~impossible & latency
    # lowest precedence first; each later label overrides (arithmetic, not `where=`: the masks
    # flip from row to row and a branch-free update is several times faster)
    verdict = np.where(at_ceiling, np.int8(AT_CEILING), np.int8(BELOW))
    for mask, label in ((anomaly, ANOMALY), (latency_bound, LATENCY_BOUND),
                        (impossible, IMPOSSIBLE), (blank, BLANK)):
        verdict += (np.int8(label) - verdict) * mask.astype(np.int8)
    efficiency = np.where(blank, np.nan, efficiency)
    return Judged(efficiency=efficiency, envelope_efficiency=np.where(blank, np.nan,
                                                                      envelope_efficiency),
                  verdict=verdict, flags=flags, achieved_bytes_per_s=achieved_bytes,
                  floor_s=floor_s, net_efficiency=np.where(share & ~blank, net, np.nan),
                  serial_efficiency=np.where(blank, np.nan, serial_efficiency))


def row_floors(floors: LatencyFloors, timing: np.ndarray, kernels: np.ndarray | None,
               n: int) -> tuple[np.ndarray, np.ndarray]:
    """(floor seconds, floor assumed) per row, from its timing method and kernel count."""
    codes, names = _timing_codes(timing, n)
    chosen = [floors.floor(name) for name in names]
    per_call = np.array([f.per_call_s for f in chosen])[codes]
    per_kernel = np.array([f.per_kernel_s for f in chosen])[codes]
    assumed = np.array([f.assumed for f in chosen])[codes]
    extra = 0.0 if kernels is None else np.maximum(kernels, 1.0) - 1.0
    return per_call + extra * per_kernel, assumed


def kernel_timing(timing: np.ndarray, n: int) -> np.ndarray:
    """Rows timed as a profiler's kernel durations (no host launch in the time)."""
    codes, names = _timing_codes(timing, n)
    return np.array([name == "kernel" for name in names], dtype=bool)[codes]


def _timing_codes(timing: np.ndarray, n: int) -> tuple[np.ndarray, list[str]]:
    """Timing methods as codes into names (`device` read as `events`, "" as the default)."""
    if n and timing.strides == (0,):
        return np.zeros(n, dtype=np.intp), [timing_method(str(timing[0]))]
    raw, inverse = np.unique(np.asarray(timing).astype(str), return_inverse=True)
    names = [timing_method(str(t)) for t in raw]
    unknown = [t for t in names if t not in TIMINGS]
    if unknown:
        raise ValueError(f"unknown timing method(s) {unknown}; expected one of {TIMINGS}")
    return inverse.reshape(-1), names


def wall_timing(timing: np.ndarray) -> np.ndarray:
    """Rows timed by a host clock; a uniform column is compared once, not a million times."""
    if timing.strides == (0,) and len(timing):
        return np.broadcast_to(np.array(timing[0] == "wall"), timing.shape)
    return timing == "wall"
