"""Read a measured time against its price: efficiency, a band, and the labels that keep it honest.

Order of precedence: blank (cannot price) > impossible (above a theoretical ceiling of every
level that could have served it, so an accounting error) > cache_resident (above the DRAM
ceiling, yet within what a cache, with DRAM beside it, could serve) > latency_bound (no
traction) > anomaly (above the envelope) > at_ceiling or below.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofwise.pricing.core import Priced, mark, uniform
from roofwise.pricing.reasons import BLANK_REASONS, IMPOSSIBLE_REASONS, Reason
from roofwise.profiles.machine import TIMINGS, LatencyFloors, Machine, timing_method
from roofwise.records.read import categorize

AT_CEILING_EFFICIENCY = 0.80  # TileOPs bands (scripts/nightly_report.py)
ANOMALY_EFFICIENCY = 1.05
# A row whose SOL is under its floor is latency_bound when the floor is at least this share of
# its time (read at p10 where given, so a measured floor never misses itself by noise).
FLOOR_EXPLAINS_SHARE = 0.5
# Efficiency net of the floor is shown beside efficiency from this share of the time up.
FLOOR_SIZEABLE_SHARE = 0.2
# A time within this fraction above (or its p90 at or above) its floor is read as at the floor.
FLOOR_NOISE = 0.05

VERDICTS = ("at_ceiling", "below", "anomaly", "latency_bound", "impossible", "blank",
            "cache_resident")
AT_CEILING, BELOW, ANOMALY, LATENCY_BOUND, IMPOSSIBLE, BLANK, CACHE_RESIDENT = range(7)
# Verdicts whose efficiency is not a reading (the reasons carry the numbers instead): the one
# place this rule is written; the table, the report, --json and compare read it here.
NO_EFFICIENCY = frozenset({IMPOSSIBLE, LATENCY_BOUND, BLANK})
# Severity by verdict code, lower first: the rows that need a person's eyes come first.
SEVERITY = np.array([5, 3, 1, 4, 0, 2, 4], dtype=np.int64)  # AT_CEILING .. CACHE_RESIDENT


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
    # index into `machine.caches` of the cache that served a cache_resident row, -1 elsewhere
    cache_level: np.ndarray | None = None
    # the fewest bytes DRAM moved for a row above DRAM's theoretical rate that no cache holds
    # whole (larger than every cache, or timed cold): dram_bytes_at_least beside the largest;
    # NaN elsewhere
    cache_dram_bytes: np.ndarray | None = None


def judge(machine: Machine, priced: Priced, time_s: np.ndarray, timing: np.ndarray,
          bytes_: np.ndarray, kernels: np.ndarray | None = None,
          time_p10_s: np.ndarray | None = None, time_p90_s: np.ndarray | None = None,
          working_set_bytes: np.ndarray | None = None, read_bytes: np.ndarray | None = None,
          write_bytes: np.ndarray | None = None, cold: np.ndarray | None = None) -> Judged:
    """A verdict per priced row (docs/verdicts.md): `time_s` measured seconds, `timing` its
    method (kernel, graph, events, wall; "device" is events), `bytes_` bytes per call,
    `kernels` launches per call (1 when None), `time_p10_s`/`time_p90_s` the noise it is read
    with, `working_set_bytes` the distinct bytes it touches (`bytes_` when None: what a cache
    must hold to serve the call), `read_bytes`/`write_bytes` its split (NaN or None: not
    given), `cold` the rows timed with the caches flushed first (None: none). Impossible
    above a theoretical rate; latency-bound when SOL is under the floor of the row's timing
    and kernel count and that floor is at least half the time; anomaly above 105% of the
    envelope; at_ceiling from 80% of SOL; else below. Efficiency = SOL / time."""
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
    cache = cache_reading(machine, priced, time_s, bytes_, achieved_bytes,
                          bytes_ if working_set_bytes is None else working_set_bytes,
                          read_bytes, write_bytes, cold)
    mark(flags, cache.over_all, Reason.ABOVE_CACHE_BANDWIDTH)
    # a cache served the bytes: the DRAM ceiling was never the limit, so neither its
    # theoretical rate (impossible) nor its envelope (a memory anomaly) judges the row; a
    # FLOP rate above a unit's peak still does (`in_cache` is the rows read on the cache)
    flags = np.where(cache.resident, (flags | np.int32(Reason.CACHE_RESIDENT))
                     & ~np.int32(Reason.ABOVE_THEORETICAL_BANDWIDTH), flags).astype(np.int32)
    in_cache = cache.resident & ((flags & np.int32(Reason.ABOVE_THEORETICAL_RATE)) == 0)
    anomaly &= ~in_cache | cache.compute_anomaly
    # a compute anomaly is read on its compute roof (which binds it over DRAM's), as anywhere
    on_cache_roof = in_cache & ~cache.compute_anomaly
    efficiency = np.where(on_cache_roof, cache.efficiency, efficiency)
    envelope_efficiency = np.where(on_cache_roof, cache.envelope_efficiency, envelope_efficiency)
    at_ceiling &= ~in_cache
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
        # a cache-served row is read against the cache, not the floor
        latency = (sol_under_floor & (floor_s >= FLOOR_EXPLAINS_SHARE * time_low) & ~in_band
                   & ~in_cache)
        split = sol_under_floor & ~latency & ~in_band & ~in_cache
        rest_s = time_s - floor_s
        net = priced.sol_time_s / rest_s
        # net of the floor only where the rest still covers SOL: a net above 100% says the
        # launches overlapped the kernel, and subtracting them would overstate it
        share = ((split | (floor_s >= FLOOR_SIZEABLE_SHARE * time_s)) & ~latency & ~in_cache
                 & (rest_s > 0) & (net <= 1.0))
        serial_efficiency = (priced.sol_time_s if priced.serial_sol_time_s is None
                             else priced.serial_sol_time_s) / safe_time
    mark(flags, overlapped & (latency | split | share), Reason.FLOOR_OVERLAPPED)
    mark(flags, latency, Reason.BELOW_LATENCY_FLOOR)
    mark(flags, split, Reason.FLOOR_SPLIT)
    mark(flags, share, Reason.FLOOR_SHARE)
    mark(flags, floor_assumed & (latency | split | share), Reason.FLOOR_ASSUMED)

    mark(flags, anomaly, Reason.ANOMALY)
    mark(flags, (efficiency > ANOMALY_EFFICIENCY) & ~anomaly & ~in_cache,
         Reason.ABOVE_REGIME_WITHIN_ENVELOPE)

    blank = (flags & np.int32(BLANK_REASONS)) != 0
    impossible = ~blank & ((flags & np.int32(IMPOSSIBLE_REASONS)) != 0)
    latency_bound = ~blank & ~impossible & latency
    # a compute anomaly on a cache-served row stays an anomaly: the cache explains bytes only
    resident = ~blank & ~impossible & in_cache & ~cache.compute_anomaly
    # lowest precedence first; each later label overrides (arithmetic, not `where=`: the masks
    # flip from row to row and a branch-free update is several times faster)
    verdict = np.where(at_ceiling, np.int8(AT_CEILING), np.int8(BELOW))
    for mask, label in ((anomaly, ANOMALY), (latency_bound, LATENCY_BOUND),
                        (resident, CACHE_RESIDENT), (impossible, IMPOSSIBLE), (blank, BLANK)):
        verdict += (np.int8(label) - verdict) * mask.astype(np.int8)
    efficiency = np.where(blank, np.nan, efficiency)
    return Judged(efficiency=efficiency, envelope_efficiency=np.where(blank, np.nan,
                                                                      envelope_efficiency),
                  verdict=verdict, flags=flags, achieved_bytes_per_s=achieved_bytes,
                  floor_s=floor_s, net_efficiency=np.where(share & ~blank & ~resident, net,
                                                           np.nan),
                  serial_efficiency=np.where(blank | resident, np.nan, serial_efficiency),
                  cache_level=np.where(resident, cache.level, -1).astype(np.int8),
                  cache_dram_bytes=cache.dram_bytes)


@dataclass(frozen=True)
class CacheReading:
    """Per row: whether a cache level can have served it above the DRAM ceiling, which one,
    and the efficiency against that level's roof (NaN where its bandwidth is unknown)."""

    resident: np.ndarray  # above the DRAM ceiling, bytes within a cache it does not outrun
    over_all: np.ndarray  # above DRAM and above every cache it fits in (theoretical rates)
    level: np.ndarray  # index into machine.caches of the serving level; -1 for none
    efficiency: np.ndarray  # SOL on the serving level's effective roof / time
    envelope_efficiency: np.ndarray
    compute_anomaly: np.ndarray  # the compute envelope, not bytes, is above 105%
    # the fewest bytes DRAM moved, for a row above its theoretical rate that no cache holds
    # whole (the largest beside it); NaN elsewhere
    dram_bytes: np.ndarray


def dram_bytes_at_least(working_set_bytes: np.ndarray, read_bytes: np.ndarray | None,
                        write_bytes: np.ndarray | None, capacity_bytes: float,
                        cold: np.ndarray | None = None) -> np.ndarray:
    """The fewest bytes DRAM must have moved for a call that touches `working_set_bytes`
    distinct bytes, beside a cache of `capacity_bytes`. The cache can have held up to its
    capacity of what the call reads before it started (written by the kernel before) and up to
    its capacity of what it writes after it ended (dirty lines not yet written back), so
    DRAM moved at least (distinct reads - capacity)+ + (distinct writes - capacity)+. The
    split is the one most favourable to the cache that the record allows: distinct reads at
    most `read_bytes`, distinct writes at most `write_bytes` (either unknown where NaN or
    None), together at least the working set. A `cold` row (its caches flushed before it
    ran) held none of its reads: DRAM moved all of them, and what its writes leave beyond the
    capacity. A bound that errs towards possible: roofwise must never call a possible number
    impossible."""
    w = np.asarray(working_set_bytes, dtype=np.float64)
    c = float(capacity_bytes)

    def at_most(split: np.ndarray | None) -> np.ndarray:
        if split is None:
            return w
        return np.where(np.isnan(split), w, np.minimum(split, w))

    low = np.maximum(w - at_most(write_bytes), 0.0)  # distinct reads: from low to high
    high = np.maximum(at_most(read_bytes), low)

    held = c if cold is None else np.where(cold, 0.0, c)  # of the reads, before the call

    def dram(reads: np.ndarray) -> np.ndarray:
        return np.maximum(reads - held, 0.0) + np.maximum(w - reads - c, 0.0)

    # convex and piecewise linear in the reads, with its bends at `held` and w - c: its least
    # value over [low, high] is at one of them, clipped into the range
    return np.minimum(dram(np.clip(held, low, high)), dram(np.clip(w - c, low, high)))


def cache_reading(machine: Machine, priced: Priced, time_s: np.ndarray, bytes_: np.ndarray,
                  achieved_bytes_per_s: np.ndarray, working_set_bytes: np.ndarray,
                  read_bytes: np.ndarray | None = None, write_bytes: np.ndarray | None = None,
                  cold: np.ndarray | None = None) -> CacheReading:
    """Which rows above the DRAM ceiling a cache explains (docs/verdicts.md, cache_resident).

    Above the DRAM ceiling means above its theoretical rate, or above 105% of its envelope
    (where a calibrated profile would call it an anomaly). Such a row whose working set (the
    distinct bytes it touches: a tensor read and written in place, or a table re-read,
    counts once) fits in a cache level, and whose rate is not above that level's
    theoretical bandwidth where one is known, was served by that cache: the smallest such
    level is named, and the row judged against its roof where its bandwidth is known. A
    working set larger than every cache, at a rate above DRAM's theoretical one, was served
    in part by the largest cache when the bytes DRAM must still have moved
    (dram_bytes_at_least) fit under DRAM's theoretical rate in the time, and the rate is not
    above that cache's theoretical bandwidth (every byte passes through it); it is judged
    against both roofs: max(DRAM's bytes / DRAM's roof, bytes / the cache's roof, compute) /
    time, where the cache's bandwidth is known. (Between DRAM's envelope and its theoretical
    rate such a row stays an anomaly: possible without a cache, so no cache is claimed.) A
    `cold` row (its caches flushed before the call) fits no cache: its reads came from DRAM,
    and only the largest cache's hold on its writes can explain a rate above DRAM's."""
    n = len(time_s)
    none = np.zeros(n, dtype=bool)
    nan = np.full(n, np.nan)
    dram = machine.dram
    theoretical = dram.theoretical_bytes_per_s
    envelope = dram.effective_bytes_per_s()
    if not machine.caches or theoretical is None or envelope is None:
        return CacheReading(none, none, np.full(n, -1, np.int8), nan, nan, none, nan)
    ceiling_bytes_per_s = min(theoretical, ANOMALY_EFFICIENCY * envelope)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        above = (achieved_bytes_per_s > ceiling_bytes_per_s) & (bytes_ > 0) & (time_s > 0)
        warm = ~(none if cold is None else np.asarray(cold, dtype=bool))
        level = np.full(n, -1, dtype=np.int8)
        fits_any = none.copy()
        for k, cache in enumerate(machine.caches):
            fits = above & warm & (working_set_bytes <= (cache.capacity_bytes or 0.0))
            fits_any |= fits
            ceiling = cache.theoretical_bytes_per_s
            servable = fits & (level < 0)
            if ceiling is not None:
                servable &= achieved_bytes_per_s <= ceiling
            level[servable] = k
        over_all = fits_any & (level < 0) & (achieved_bytes_per_s > theoretical)
        largest = len(machine.caches) - 1
        dram_bytes = nan.copy()
        # above DRAM's theoretical rate, so, if the time is right, a cache served a part
        larger = np.flatnonzero(above & ~fits_any & (achieved_bytes_per_s > theoretical))
        if len(larger):
            cache = machine.caches[largest]
            dram_bytes[larger] = dram_bytes_at_least(
                working_set_bytes[larger], None if read_bytes is None else read_bytes[larger],
                None if write_bytes is None else write_bytes[larger],
                cache.capacity_bytes or 0.0, ~warm[larger])
            in_part = dram_bytes / time_s <= theoretical
            if cache.theoretical_bytes_per_s is not None:
                in_part &= achieved_bytes_per_s <= cache.theoretical_bytes_per_s
            level[in_part] = largest
        resident = level >= 0
        efficiency, envelope_efficiency = nan.copy(), nan.copy()
        for k, cache in enumerate(machine.caches):
            rows = level == k
            roof = cache.effective_bytes_per_s()
            if roof is None or not rows.any():
                continue
            # the cache's roof replaces DRAM's, beside what DRAM still moved for a working set
            # larger than the cache; the compute roof still holds
            memory_s = np.fmax(bytes_[rows] / roof, dram_bytes[rows] / envelope)
            efficiency[rows] = np.maximum(memory_s, priced.compute_time_s[rows]) / time_s[rows]
            envelope_efficiency[rows] = efficiency[rows]
        # the compute envelope alone above 105%: the cache does not explain FLOPs
        memory_envelope_s = bytes_ / envelope
        compute_anomaly = resident & (priced.envelope_sol_time_s > memory_envelope_s * (
            1 + 1e-12)) & (priced.envelope_sol_time_s / time_s > ANOMALY_EFFICIENCY)
    return CacheReading(resident, over_all, level, efficiency, envelope_efficiency,
                        compute_anomaly, dram_bytes)


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
    codes, raw = categorize(np.asarray(timing))  # a dict lookup per row, not a text sort
    names = [timing_method(t) for t in raw]
    unknown = [t for t in names if t not in TIMINGS]
    if unknown:
        raise ValueError(f"unknown timing method(s) {unknown}; expected one of {TIMINGS}")
    return codes.astype(np.intp), names


def wall_timing(timing: np.ndarray) -> np.ndarray:
    """Rows timed by a host clock; a uniform column is compared once, not a million times."""
    if timing.strides == (0,) and len(timing):
        return np.broadcast_to(np.array(timing[0] == "wall"), timing.shape)
    return timing == "wall"
