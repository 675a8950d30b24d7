"""Read a measured time against its price: efficiency, a band, and the labels that keep it honest.

Order of precedence: blank (cannot price) > impossible (above a theoretical ceiling, so an
accounting error) > latency_bound (no traction) > anomaly (above the envelope) > at_ceiling
or below.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .machine import Machine
from .pricing import Priced, mark
from .reasons import BLANK_REASONS, IMPOSSIBLE_REASONS, Reason

AT_CEILING_EFFICIENCY = 0.80  # TileOPs bands (scripts/nightly_report.py)
ANOMALY_EFFICIENCY = 1.05

VERDICTS = ("at_ceiling", "below", "anomaly", "latency_bound", "impossible", "blank")
AT_CEILING, BELOW, ANOMALY, LATENCY_BOUND, IMPOSSIBLE, BLANK = range(6)


@dataclass(frozen=True)
class Judged:
    efficiency: np.ndarray  # sol / measured, against the ceilings the row was priced with
    envelope_efficiency: np.ndarray  # against the highest mix and regime: judges anomalies
    verdict: np.ndarray  # int8 index into VERDICTS
    flags: np.ndarray  # int32 Reason bits, pricing's included
    achieved_bytes_per_s: np.ndarray


def judge(machine: Machine, priced: Priced, time_s: np.ndarray, timing: np.ndarray,
          bytes_: np.ndarray) -> Judged:
    """A verdict per priced row (docs/verdicts.md): `time_s` measured seconds, `timing` "device"
    or "wall", `bytes_` bytes per call. Impossible above a theoretical rate, latency-bound under
    the floor, anomaly above 105% of the envelope, at_ceiling from 80% of SOL, else below;
    efficiency = SOL / time."""
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

    floor = machine.latency_floor
    latency = (priced.sol_time_s < floor.sol_s) & (time_s < floor.measured_s)
    mark(flags, latency, Reason.BELOW_LATENCY_FLOOR)
    if floor.assumed:
        mark(flags, latency, Reason.FLOOR_ASSUMED)

    anomaly = envelope_efficiency > ANOMALY_EFFICIENCY
    at_ceiling = efficiency >= AT_CEILING_EFFICIENCY
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
                  verdict=verdict, flags=flags, achieved_bytes_per_s=achieved_bytes)


def wall_timing(timing: np.ndarray) -> np.ndarray:
    """Rows timed by a host clock; a uniform column is compared once, not a million times."""
    if timing.strides == (0,) and len(timing):
        return np.broadcast_to(np.array(timing[0] == "wall"), timing.shape)
    return timing == "wall"
