"""Sentences for the floor, the ceilings and the pipes: one small pure function per flag.

Each takes plain numbers (never an analysis), so that a row's reason can be rendered from its
columns alone; `analysis.explain` gathers the numbers and calls these for the flags a row
carries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .report import fmt

_RETIME_ADVICE = {
    "events": "re-time with graph replay or kernel durations, or fuse or graph-capture the call",
    "wall": "re-time with events, graph replay or kernel durations, or fuse the kernels",
    "graph": "re-time with kernel durations, or fuse the kernels",
    "kernel": "give each launch more work (batch, fuse)",
}


@dataclass(frozen=True)
class FloorFacts:
    """The floor one row was read against: its timing method, kernel count and parts."""

    timing: str
    kernels: int
    per_call_s: float
    per_kernel_s: float
    floor_s: float
    assumed: bool
    source: str
    # the method the record named, when its time sat clearly under that method's floor and
    # the row was read against the kernel floor instead; "" otherwise
    overlapped_from: str = ""

    def describe(self) -> str:
        """`the events floor 215 us for 40 kernels (20 us + 39 x 5 us, assumed)`."""
        kind = "assumed" if self.assumed else "measured"
        parts = (kind if self.kernels <= 1 else
                 f"{fmt.seconds(self.per_call_s)} + {self.kernels - 1} x "
                 f"{fmt.seconds(self.per_kernel_s)}, {kind}")
        launches = "" if self.kernels <= 1 else f" for {self.kernels} kernels"
        why = (f"; time under the {self.overlapped_from} floor: launches overlapped"
               if self.overlapped_from else "")
        return f"the {self.timing} floor {fmt.seconds(self.floor_s)}{launches} ({parts}{why})"


def latency_bound_text(sol_s: float, time_s: float, floor: FloorFacts,
                       efficiency: float) -> str:
    """SOL under the floor and the floor most of the time: no traction on the roofline."""
    spans = time_s / floor.floor_s if floor.floor_s > 0 else math.inf
    return (f"SOL {fmt.seconds(sol_s)} is below {floor.describe()}; the "
            f"{fmt.seconds(time_s)} measured spans {spans:.2f} floors: launches set it, "
            f"efficiency {fmt.percent(efficiency)} is not the metric; "
            f"{_RETIME_ADVICE.get(floor.timing, _RETIME_ADVICE['events'])}")


def floor_split_text(sol_s: float, time_s: float, floor: FloorFacts,
                     net_efficiency: float) -> str:
    """SOL under the floor but the time far above it: the rest is the kernels' own."""
    rest_s = time_s - floor.floor_s
    return (f"SOL {fmt.seconds(sol_s)} is below {floor.describe()}, but the time is far "
            f"above it: {fmt.seconds(time_s)} = {fmt.seconds(floor.floor_s)} floor + "
            f"{fmt.seconds(rest_s)} rest; net of the floor, {fmt.percent(net_efficiency)} of "
            "SOL: the rest is the kernels' own traffic and work (fuse them)")


def floor_share_text(time_s: float, floor: FloorFacts, net_efficiency: float) -> str:
    """A floor that binds part of the time: efficiency net of it, beside efficiency."""
    return (f"{floor.describe()} is {fmt.percent(floor.floor_s / time_s)} of the measured "
            f"{fmt.seconds(time_s)}: net of it, {fmt.percent(net_efficiency)} of SOL")


def net_beside_text(net_efficiency: float, floor: FloorFacts) -> str:
    """` (84.2% net of the 20 us events floor)`, to follow an efficiency."""
    return (f" ({fmt.percent(net_efficiency)} net of the {fmt.seconds(floor.floor_s)} "
            f"{floor.timing} floor)")


@dataclass(frozen=True)
class CeilingFacts:
    """The ceiling that bound a row, and the fraction of its theoretical the row implies."""

    name: str  # "hbm read mix" or "tensor_core.bf16"
    implied_fraction: float  # achieved rate over theoretical; NaN where theoretical is a gap
    profile_fraction: float | None  # the profile's calibration of that ceiling


def above_envelope_text(envelope_efficiency: float, ceiling: CeilingFacts | None) -> str:
    """Above the envelope but below every theoretical ceiling: two readings, both said."""
    shown = fmt.percent(envelope_efficiency) if math.isfinite(envelope_efficiency) else (
        "unbounded")
    implied = ""
    if ceiling is not None and math.isfinite(ceiling.implied_fraction):
        profile = ("uncalibrated" if ceiling.profile_fraction is None
                   else f"{ceiling.profile_fraction:.4f}")
        implied = (f" (implies {ceiling.implied_fraction:.4f} of {ceiling.name} theoretical, "
                   f"profile {profile})")
    return (f"{shown} of the envelope ceiling: above 105% yet below theoretical, so bytes, "
            "FLOPs or timer are wrong, or the profile is calibrated below this card"
            f"{implied}: recount or run `roofwise calibrate`")


def impossible_anomaly_text(envelope_efficiency: float) -> str:
    shown = fmt.percent(envelope_efficiency) if math.isfinite(envelope_efficiency) else (
        "unbounded")
    return (f"efficiency {shown} of the envelope ceiling is above 105%: an accounting or "
            "timer error, not a great kernel")


def pipes_text(pipes: Sequence[tuple[str, float]], overlapped_s: float, serial_s: float,
               efficiency: float, serial_efficiency: float) -> str:
    """Every pipe near the binding one, the serial sum beside the overlapped bound, the band."""
    binding_s = pipes[0][1]
    named = ", ".join(f"{key} {fmt.seconds(t)}" + (" (binding)" if k == 0 else
                                                  f" ({fmt.percent(t / binding_s, 0)})")
                      for k, (key, t) in enumerate(pipes))
    return (f"pipes at >= 50% of the binding one: {named}; the call measures between the "
            f"overlapped bound {fmt.seconds(overlapped_s)} and the serial sum "
            f"{fmt.seconds(serial_s)}: efficiency {fmt.percent(efficiency)} overlapped, "
            f"{fmt.percent(serial_efficiency)} serial")


def bound_label(bound_memory: bool, pipes: Sequence[tuple[str, float]], binding_unit: str,
                memory_name: str = "memory") -> str:
    """What bound the row, naming a second pipe when it matters: `tensor_core.bf16 + sfu.fp32`
    (`memory_name`, e.g. `hbm`, for a memory-bound row)."""
    named = " + ".join(k for k, _ in pipes)
    if bound_memory:
        return f"{memory_name} (pipes {named})" if len(pipes) > 1 else memory_name
    return named if len(pipes) > 1 else binding_unit


def efficiency_band_text(efficiency: float, serial_efficiency: float) -> str:
    """`58.9%-84.2%`: against the overlapped bound, then against the serial sum."""
    return f"{fmt.percent(efficiency)}-{fmt.percent(serial_efficiency)}"


def floor_line(timing: str, per_call_s: float, per_kernel_s: float, assumed: bool,
               source: str) -> str:
    """One timing method's floor for a profile listing: `events: 20 us + 5 us per further
    kernel (assumed: ...)`."""
    kind = source if assumed or source.startswith("measured") else f"measured: {source}"
    return (f"{timing}: {fmt.seconds(per_call_s, significant=3)} + "
            f"{fmt.seconds(per_kernel_s, significant=3)} per further kernel ({kind})")
