"""Sentences for the floor, the ceilings and the pipes: one small pure function per flag.

Each takes plain numbers (never an analysis), so that a row's reason can be rendered from its
columns alone; `analysis.explain` gathers the numbers and calls these for the flags a row
carries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from roofwise.base import fmt

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
        """`the events floor 215.000 us for 40 kernels (20.000 us + 39 x 5.000 us, assumed)`."""
        kind = "assumed" if self.assumed else "measured"
        parts = (kind if self.kernels <= 1 else
                 f"{fmt.seconds(self.per_call_s)} + {self.kernels - 1} x "
                 f"{fmt.seconds(self.per_kernel_s)}, {kind}")
        launches = "" if self.kernels <= 1 else f" for {self.kernels} kernels"
        why = (f"; the time is under the {self.overlapped_from} floor, so launches overlapped"
               if self.overlapped_from else "")
        return f"the {self.timing} floor {fmt.seconds(self.floor_s)}{launches} ({parts}{why})"


def retime_advice(timing: str) -> str:
    """What to do about a row its timing method's floor explains."""
    return _RETIME_ADVICE.get(timing, _RETIME_ADVICE["events"])


def latency_bound_what(sol_s: float, time_s: float, floor: FloorFacts) -> str:
    """SOL under the floor and the floor most of the time: what the time is made of."""
    spans = time_s / floor.floor_s if floor.floor_s > 0 else math.inf
    return latency_bound_sentence(fmt.seconds(time_s), f"{spans:.2f}", floor.describe(),
                                  fmt.seconds(sol_s), floor.timing)


def latency_bound_sentence(time_text: str, spans_text: str, floor_text: str, sol_text: str,
                           timing: str) -> str:
    """`latency_bound_what` from its numbers already formatted (what a column of rows uses;
    `spans_text` is the time over the floor to two decimals)."""
    cause = ("a kernel's fixed cost, not its work, sets the time" if timing == "kernel"
             else "launches, not the kernel, set the time")
    return (f"the {time_text} measured is {spans_text} x {floor_text} and "
            f"SOL is {sol_text}: {cause}, so efficiency is no reading")


def latency_bound_text(sol_s: float, time_s: float, floor: FloorFacts) -> str:
    """The latency_bound reason: what the time is made of, then what to do."""
    return advised(latency_bound_what(sol_s, time_s, floor), floor.timing)


def advised(what: str, timing: str) -> str:
    """A latency-bound finding, then what to do about it."""
    return f"{what}; {retime_advice(timing)}"


def floor_split_text(sol_s: float, time_s: float, floor: FloorFacts,
                     net_efficiency: float) -> str:
    """SOL under the floor but the time far above it: the floor, the rest, and what tells
    the rest apart (kernel time under a profiler; under other methods it may be host
    overhead above an assumed floor as well)."""
    return floor_split_sentence(
        fmt.seconds(sol_s), floor.describe(), fmt.seconds(time_s),
        fmt.seconds(time_s - floor.floor_s),
        fmt.percent(net_efficiency) if math.isfinite(net_efficiency) else "", floor.timing,
        floor.kernels)


def floor_split_sentence(sol_text: str, floor_text: str, time_text: str, rest_text: str,
                         net_text: str, timing: str, kernels: int) -> str:
    """`floor_split_text` from its numbers already formatted ("" for no net efficiency)."""
    net = f", {net_text} of SOL net of the floor" if net_text else ""
    if timing == "kernel":
        action = ("the rest is the kernels' own time: fuse them" if kernels > 1 else
                  "the rest is the kernel's own time: profile it")
    else:
        action = (("fuse the kernels, or " if kernels > 1 else "")
                  + "re-time with kernel durations to tell the "
                  + ("kernels'" if kernels > 1 else "kernel's")
                  + " own time from overhead above the floor")
    return (f"SOL {sol_text} is under {floor_text}, yet the {time_text} measured is that "
            f"floor plus {rest_text} more{net}; {action}")


def net_beside_text(net_efficiency: float, time_s: float, floor: FloorFacts) -> str:
    """`, 84.2% net of the events floor 20.000 us (assumed), 33.3% of the time`, to follow
    an efficiency where the floor is a sizeable share of the time."""
    return net_beside_sentence(fmt.percent(net_efficiency), floor.describe(),
                               fmt.percent(floor.floor_s / time_s))


def net_beside_sentence(net_text: str, floor_text: str, share_text: str) -> str:
    """`net_beside_text` from its numbers already formatted."""
    return f", {net_text} net of {floor_text}, {share_text} of the time"


def unknown_units_sentence(machine_name: str, missing: list[str]) -> str:
    """Units a record's flops_by_unit names that its machine profile lacks."""
    return f"flops_by_unit names units {machine_name} lacks: {', '.join(missing)}"


def above_rate_sentence(unit_key: str, rate_text: str, peak_text: str) -> str:
    """A unit's work over the time above the unit's theoretical rate (rates formatted by
    `fmt.tera_rate`)."""
    return f"{unit_key} at {rate_text} exceeds its theoretical {peak_text}: physically impossible"


@dataclass(frozen=True)
class CeilingFacts:
    """The ceiling that bound a row, and the fraction of its theoretical the row implies."""

    name: str  # "hbm read mix" or "tensor_core.bf16"
    implied_fraction: float  # achieved rate over theoretical; NaN where theoretical is a gap
    profile_fraction: float | None  # the profile's calibration of that ceiling


UNBOUNDED = "unbounded"  # an envelope efficiency that is no finite number (a zero time)


def above_envelope_what(envelope_efficiency: float, ceiling: CeilingFacts | None) -> str:
    """Above the envelope but below every theoretical ceiling: both readings, with numbers."""
    shown = fmt.percent(envelope_efficiency) if math.isfinite(envelope_efficiency) else (
        UNBOUNDED)
    implied = "" if ceiling is None else implied_text(
        ceiling.implied_fraction, ceiling.name, ceiling.profile_fraction)
    return above_envelope_sentence(shown, implied)


def implied_text(implied_fraction: float, ceiling_name: str,
                 profile_fraction: float | None) -> str:
    """` (implies 0.9942 of hbm read mix theoretical, profile 0.9380)`: the fraction of its
    theoretical rate a row implies for its ceiling; "" where that is no number."""
    if not math.isfinite(implied_fraction):
        return ""
    head, tail = implied_around(ceiling_name, profile_fraction)
    return f"{head}{implied_fraction:.4f}{tail}"


def implied_around(ceiling_name: str, profile_fraction: float | None) -> tuple[str, str]:
    """`implied_text` around its number (4 decimals), for a column of rows to fill in."""
    profile = "uncalibrated" if profile_fraction is None else f"{profile_fraction:.4f}"
    return " (implies ", f" of {ceiling_name} theoretical, profile {profile})"


def above_envelope_sentence(shown: str, implied: str) -> str:
    """`above_envelope_what` from its parts already written (what a column of rows uses)."""
    return (f"{shown} of the envelope ceiling: above 105% yet below theoretical, so bytes, "
            "FLOPs or timer are wrong, or the profile is calibrated below this card"
            f"{implied}")


RECOUNT_ADVICE = "recount, or run `roofwise calibrate`"  # what to do about an anomaly


def above_envelope_text(envelope_efficiency: float, ceiling: CeilingFacts | None) -> str:
    """The anomaly reason: both readings, then what to do."""
    return f"{above_envelope_what(envelope_efficiency, ceiling)}: {RECOUNT_ADVICE}"


def pipes_text(pipes: Sequence[tuple[str, float]], overlapped_s: float, serial_s: float,
               efficiency: float, serial_efficiency: float) -> str:
    """Every pipe near the binding one, the serial sum beside the overlapped bound, the band."""
    binding_s = pipes[0][1]
    named = ", ".join(pipe_named(key, fmt.seconds(t), None if k == 0 else
                                 fmt.percent(t / binding_s, 0))
                      for k, (key, t) in enumerate(pipes))
    return pipes_sentence(named, fmt.seconds(overlapped_s), fmt.seconds(serial_s),
                          fmt.percent(efficiency), fmt.percent(serial_efficiency),
                          serial_efficiency > 1.0)


def pipe_named(key: str, time_text: str, share_text: str | None) -> str:
    """One pipe of `pipes_text`: its time and its share of the binding pipe's (None: the
    binding pipe itself)."""
    return f"{key} {time_text}" + (" (binding)" if share_text is None else f" ({share_text})")


def pipes_sentence(named: str, overlapped_text: str, serial_text: str, efficiency_text: str,
                   serial_efficiency_text: str, overlapped: bool) -> str:
    """`pipes_text` from its parts already written (what a column of rows uses)."""
    # faster than the pipes one after another: they overlapped, which is no sign of a fast
    # kernel (the overlapped bound is the reading)
    overlap = " (over 100%: the pipes overlapped)" if overlapped else ""
    return (f"pipes at >= 50% of the binding one: {named}; the call measures between the "
            f"overlapped bound {overlapped_text} and the serial sum {serial_text}: efficiency "
            f"{efficiency_text} overlapped, {serial_efficiency_text} serial{overlap}")


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


@dataclass(frozen=True)
class CacheFacts:
    """One cache level of a machine, as the cache sentences need it."""

    name: str  # "l2", "infinity_cache"
    capacity_bytes: float
    theoretical_bytes_per_s: float | None  # None: a gap in the sources
    effective_bytes_per_s: float | None  # theoretical x calibration, or calibrate's measurement
    measured: bool  # the roof is `roofwise calibrate`'s measurement, no theoretical rate


CALIBRATE_CACHE_ADVICE = "`roofwise calibrate` measures it"


def beyond_caches_around(working_set_bytes: np.ndarray, dram_bound: np.ndarray,
                         cold: np.ndarray, caches: Sequence[CacheFacts], dram_name: str
                         ) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """Why no cache saved each above-DRAM row (`caches` not empty): faster than the
    theoretical bandwidth of each cache it fits in; or larger than every cache, and either the
    bytes left to DRAM (`dram_bound` True: rules.dram_bytes_at_least over the time is above
    its ceiling; the caller adds those bytes and their rate after the text) or the largest
    cache's theoretical bandwidth outrun; a `cold` row (its caches flushed before it ran)
    fits none. Rows share a few texts around their size, one per set of caches they fit in:
    each row's code into the (before, after) texts that go around `fmt.nbytes` of its size."""
    sizes = np.asarray(working_set_bytes, dtype=np.float64)
    flushed = np.asarray(cold, dtype=bool)
    fits = (sizes[:, None] <= np.array([c.capacity_bytes for c in caches])[None, :]) & ~(
        flushed[:, None])
    codes = ((fits @ (1 << np.arange(len(caches)))) * 2
             + np.asarray(dram_bound, dtype=np.int64)) * 2 + flushed
    distinct, index = np.unique(codes, return_inverse=True)
    around: list[tuple[str, str]] = []
    largest = caches[-1]
    capacity = fmt.nbytes(largest.capacity_bytes)
    was_flushed = ", and its caches were flushed before it ran (cache_state cold), so "
    for code in distinct.tolist():
        fitting = [c for k, c in enumerate(caches) if code >> (k + 2) & 1]
        if code & 1 and code & 2:
            around.append((f"{was_flushed}of its working set of ", (
                f" it read every byte it reads from {dram_name}, and the {capacity} "
                f"{largest.name} can hold up to {capacity} of what it writes after: that still "
                f"leaves {dram_name} at least ")))
        elif code & 1:
            around.append((f"{was_flushed}its working set of ", (
                f" passed through the {capacity} {largest.name} above its theoretical "
                f"{(largest.theoretical_bytes_per_s or 0.0) / 1e9:.0f} GB/s")))
        elif fitting:
            named = ", ".join(f"{c.name} theoretical "
                              f"{(c.theoretical_bytes_per_s or 0.0) / 1e9:.0f} GB/s"
                              for c in fitting)
            around.append((f", and {named}, where its ", " would fit"))
        elif code & 2:
            around.append((", and its working set of ", (
                f" is larger than the {capacity} {largest.name}: holding up to {capacity} of "
                f"what it reads before it runs and of what it writes after, that cache still "
                f"leaves {dram_name} at least ")))
        else:
            around.append((", and its working set of ", (
                f" is larger than the {capacity} {largest.name}, whose theoretical "
                f"{(largest.theoretical_bytes_per_s or 0.0) / 1e9:.0f} GB/s it exceeds "
                "too")))
    return index.reshape(-1), around


@dataclass(frozen=True)
class CacheResidentForm:
    """What sets the words of one cache_resident sentence apart from another's."""

    above_theoretical: bool  # above DRAM's theoretical rate (else above 105% of its envelope)
    in_part: bool  # the working set is larger than the cache: DRAM served a share
    dram_share: bool  # in part, that share is more than nothing
    reading: bool  # the cache's bandwidth is known and the row has an efficiency on it
    cold: bool = False  # timed with its caches flushed first: only its writes stayed there


def cache_resident_sentence(form: CacheResidentForm, dram_name: str,
                            dram_theoretical_bytes_per_s: float,
                            dram_envelope_bytes_per_s: float, cache: CacheFacts, rate: str,
                            working_set: str, dram_bytes: str = "", dram_rate: str = "",
                            efficiency: str = "") -> str:
    """Above the DRAM ceiling, yet the working set (the distinct bytes read or written) fits
    in `cache`: the data came from the cache. Or, in part, the working set is larger than
    `cache`, but what the cache can hold of the reads before the call and of the writes after
    leaves DRAM `dram_bytes` (at `dram_rate`), within its theoretical rate: the cache served
    the rest. Read against the cache's roof where its bandwidth is known; no reading where it
    is not. The per-row numbers come written (`rate` "4890.0 GB/s", `working_set` "63.57 MB",
    `efficiency` "72.1%"), so that a column of rows fills one text per form."""
    if form.above_theoretical:
        ceiling = f"{dram_name} theoretical {dram_theoretical_bytes_per_s / 1e9:.0f} GB/s"
    else:
        ceiling = (f"105% of the {dram_name} envelope "
                   f"{dram_envelope_bytes_per_s / 1e9:.0f} GB/s")
    capacity = fmt.nbytes(cache.capacity_bytes)
    left = (f"which leaves at least {dram_bytes} to {dram_name}, {dram_rate}, within its "
            "theoretical rate" if form.dram_share else "which can be all of it")
    if form.cold:
        head = (f"bytes/time {rate} is above {ceiling}; its caches were flushed before it ran "
                f"(cache_state cold), so of its working set of {working_set} it read every "
                f"byte it reads from {dram_name}, but the {capacity} {cache.name} can hold up "
                f"to {capacity} of what it writes after, {left}: cache-resident in part, so "
                f"the {dram_name} roof alone is no reading (else the bytes or the time are "
                "wrong)")
    elif form.in_part:
        head = (f"bytes/time {rate} is above {ceiling}, and its working set of {working_set} "
                f"is larger than the {capacity} {cache.name}, but that cache can hold up to "
                f"{capacity} of what it reads before it runs and as much of what it writes "
                f"after, {left}: cache-resident in part, so the {dram_name} roof alone is no "
                f"reading (else the bytes or the time are wrong: time it with the {cache.name} "
                "flushed to tell)")
    else:
        head = (f"bytes/time {rate} is above {ceiling}, but its working set of {working_set} "
                f"fits in the {capacity} {cache.name}: cache-resident, the data came from the "
                f"cache, so the {dram_name} roof is no reading")
    if not form.reading or cache.effective_bytes_per_s is None:
        return f"{head}; the {cache.name} bandwidth is a gap ({CALIBRATE_CACHE_ADVICE})"
    kind = ("measured by roofwise calibrate" if cache.measured else "theoretical"
            if cache.effective_bytes_per_s == cache.theoretical_bytes_per_s else "calibrated")
    roof = f"the {cache.name} roof {cache.effective_bytes_per_s / 1e9:.0f} GB/s ({kind})"
    if form.in_part and form.dram_share:
        return (f"{head}; {efficiency} of SOL with those {dram_bytes} on the {dram_name} roof "
                f"and every byte on {roof}")
    return f"{head}; {efficiency} of SOL on {roof}"
