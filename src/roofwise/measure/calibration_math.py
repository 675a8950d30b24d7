"""The arithmetic of calibration, kept apart from the GPU so that it is tested on any machine.

A calibration is a set of measurements (bytes or operations over a median time, with the clocks
read inside the window) turned into fractions of theoretical rates. A measurement that cannot
be a calibration is refused with its reason, never clipped: a fraction above 1.0 means the
theoretical rate or the byte count is wrong, a wide spread means the median means little.

Clocks label, and only rarely refuse: GEMMs under the power cap move the SM clock by hundreds
of MHz between burst and sustained, which is what those regimes are, so a moving SM clock is
refused only inside a burst window (a burst is one clock), and any window the card throttled
for temperature, or whose memory clock moved, is refused. A burst window whose clocks show
the power cap is labelled sustained.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from roofwise.base.errors import InputError
from roofwise.profiles.load import match_device, resolve_machine
from roofwise.profiles.machine import Machine

# Bytes each access mix moves per byte of one array (STREAM convention): copy reads one array
# and writes another; triad reads two and writes one.
MIX_BYTES_PER_ARRAY_BYTE: dict[str, int] = {"copy": 2, "triad": 3, "read": 1, "write": 1}

MIN_FRACTION = 0.30  # below this, the theoretical rate is probably for another card
CLOCK_TOLERANCE_MHZ = 15.0  # "a few MHz": more than this inside a burst is a transition
# NVML clock-event reasons that make a window unusable (temperature), and the one that marks
# the sustained regime (the board at its power limit).
THERMAL_REASONS = ("sw_thermal", "hw_thermal", "hw_slowdown")
POWER_CAP_REASON = "power_cap"
BURST_CALLS = 5  # a burst is the first few calls after an idle pause (the median of these)
BURST_WAKE_CALLS = 1  # calls that wake the clocks from idle first, left out of the burst
# An L2 figure from a call this few launch floors long measures the launch, not L2.
L2_MIN_FLOORS = 10.0
MAX_SPREAD = 0.10  # (p90 - p10) / median above this: the median of that window means little


class RefusedMeasurement(ValueError):
    """A measurement that is not a calibration; the message says why."""


@dataclass(frozen=True)
class Clocks:
    """What the card reported at one instant (nvidia-smi or NVML)."""

    sm_mhz: float | None = None
    mem_mhz: float | None = None
    power_limit_w: float | None = None
    driver: str | None = None
    # active NVML clock-event (throttle) reasons: power_cap, sw_thermal, hw_thermal,
    # hw_slowdown, ...; empty where none is active or NVML is not there to say
    throttle: tuple[str, ...] = ()


@dataclass(frozen=True)
class Measurement:
    """One calibrated quantity: `kind` "memory" (key = level, variant = mix) or "unit"
    (key = unit key, variant = regime); `amount` bytes or ops moved per timed call."""

    kind: str
    key: str
    variant: str
    amount: float
    times_s: tuple[float, ...]
    clocks_start: Clocks = field(default_factory=Clocks)
    clocks_end: Clocks = field(default_factory=Clocks)
    method: str = ""
    clock_samples: tuple[Clocks, ...] = ()  # every read inside the window, in order

    @property
    def clocks(self) -> tuple[Clocks, ...]:
        """The clock reads of the window: its samples, else its start and end."""
        return self.clock_samples or (self.clocks_start, self.clocks_end)

    @property
    def time_s(self) -> float:
        return float(np.median(np.asarray(self.times_s, dtype=np.float64)))

    @property
    def rate_per_s(self) -> float:
        return rate_per_s(self.amount, self.time_s)

    @property
    def spread(self) -> float:
        return spread(self.times_s)


def bytes_moved(mix: str, array_bytes: float) -> float:
    """Bytes a STREAM-style kernel moves over arrays of `array_bytes` each."""
    try:
        return MIX_BYTES_PER_ARRAY_BYTE[mix] * float(array_bytes)
    except KeyError:
        raise ValueError(f"unknown access mix {mix!r}; expected one of "
                         f"{', '.join(MIX_BYTES_PER_ARRAY_BYTE)}") from None


def rate_per_s(amount: float, time_s: float) -> float:
    """Bytes (or ops) per second; a non-positive time is not a rate."""
    if not time_s > 0:
        raise ValueError(f"time must be positive, got {time_s!r}")
    return float(amount) / float(time_s)


def bandwidth_bytes_per_s(bytes_: float, times_s: Sequence[float]) -> float:
    """Bandwidth over the median of repeated times."""
    return rate_per_s(bytes_, float(np.median(np.asarray(times_s, dtype=np.float64))))


def gemm_flops(m: int, n: int, k: int) -> float:
    """A GEMM does M*N*K multiply-adds, 2 FLOPs each."""
    return 2.0 * m * n * k


def fraction(measured: float, theoretical: float) -> float:
    if not theoretical > 0:
        raise ValueError(f"theoretical rate must be positive, got {theoretical!r}")
    return float(measured) / float(theoretical)


def spread(times_s: Sequence[float]) -> float:
    """(p90 - p10) / median of the samples."""
    arr = np.asarray(times_s, dtype=np.float64)
    p10, p50, p90 = np.percentile(arr, [10, 50, 90])
    return float((p90 - p10) / p50) if p50 > 0 else math.inf


def envelope(fractions: Mapping[str, float]) -> tuple[str, float]:
    """The mix (or regime) with the highest fraction: the ceiling a kernel can reach."""
    if not fractions:
        raise ValueError("no fractions to take an envelope over")
    best = max(fractions, key=lambda k: fractions[k])
    return best, fractions[best]


def check_plausible(m: Measurement, theoretical_per_s: float | None,
                    clock_tolerance_mhz: float = CLOCK_TOLERANCE_MHZ,
                    max_spread: float = MAX_SPREAD,
                    min_fraction: float = MIN_FRACTION) -> float | None:
    """The measurement's fraction of `theoretical_per_s` (None when there is no theoretical
    rate), or RefusedMeasurement saying why it is no calibration."""
    name = f"{m.key} {m.variant}"
    if not m.times_s or any(not (t > 0 and math.isfinite(t)) for t in m.times_s):
        raise RefusedMeasurement(f"{name}: times must be positive and finite")
    width = m.spread
    if width > max_spread:
        raise RefusedMeasurement(f"{name}: spread (p90-p10)/median {width:.3f} above "
                                 f"{max_spread:.3f}; the median of this window means little")
    check_clocks(m, clock_tolerance_mhz)
    if theoretical_per_s is None:
        return None
    frac = fraction(m.rate_per_s, theoretical_per_s)
    if frac > 1.0:
        raise RefusedMeasurement(
            f"{name}: measured {m.rate_per_s:.4g}/s is {frac:.3f}x the theoretical "
            f"{theoretical_per_s:.4g}/s; above 1.0 the theoretical rate or the count is wrong")
    if frac < min_fraction:
        raise RefusedMeasurement(
            f"{name}: measured {m.rate_per_s:.4g}/s is {frac:.3f}x the theoretical "
            f"{theoretical_per_s:.4g}/s; below {min_fraction:g} the theoretical rate is "
            "probably for another card (or the kernel is not a ceiling)")
    return frac


def _moved(values: Sequence[float | None]) -> tuple[float, float] | None:
    known = [v for v in values if v is not None]
    return (known[0], known[-1]) if len(known) >= 2 else None


def check_clocks(m: Measurement, tolerance_mhz: float = CLOCK_TOLERANCE_MHZ) -> None:
    """RefusedMeasurement for a window the clocks make unusable: throttled for temperature,
    a memory clock that moved, or an SM clock that moved inside a burst window. A sustained
    window whose SM clock falls under the power cap is the sustained regime, not a fault."""
    name = f"{m.key} {m.variant}"
    hot = sorted({r for c in m.clocks for r in c.throttle if r in THERMAL_REASONS})
    if hot:
        raise RefusedMeasurement(f"{name}: the card throttled for temperature ({', '.join(hot)})"
                                 " during the window; cool it and measure again")
    memory = [c.mem_mhz for c in m.clocks]
    sm = [c.sm_mhz for c in m.clocks]
    for label, values, applies in (("memory", memory, True),
                                   ("SM", sm, m.kind == "unit" and m.variant == "burst")):
        known = [v for v in values if v is not None]
        if applies and len(known) >= 2 and max(known) - min(known) > tolerance_mhz:
            ends = _moved(values) or (min(known), max(known))
            raise RefusedMeasurement(
                f"{name}: {label} clock moved {ends[0]:g} -> {ends[1]:g} MHz (range "
                f"{min(known):g}-{max(known):g}) inside the window, more than "
                f"{tolerance_mhz:g} MHz; it measured a transition")


def regime_from_clocks(m: Measurement, tolerance_mhz: float = CLOCK_TOLERANCE_MHZ) -> str:
    """The regime a unit window's clocks show: `sustained` where the power cap was active or
    the SM clock fell during it, else the regime it was measured as."""
    if m.kind != "unit":
        return m.variant
    capped = any(POWER_CAP_REASON in c.throttle for c in m.clocks)
    ends = _moved([c.sm_mhz for c in m.clocks])
    fell = ends is not None and ends[0] - ends[1] > tolerance_mhz
    return "sustained" if capped or fell else m.variant


def burst_times(times_after_idle_s: Sequence[float], calls: int = BURST_CALLS,
                wake: int = BURST_WAKE_CALLS) -> tuple[float, ...]:
    """The calls that make a burst: the first `calls` after an idle pause, after the `wake`
    call(s) that raise the clocks from idle. Taking the median of a longer back-to-back
    window would mix in the clocks falling toward sustained."""
    if len(times_after_idle_s) < wake + calls:
        raise ValueError(f"need at least {wake + calls} timed calls after the idle pause, got "
                         f"{len(times_after_idle_s)}")
    return tuple(float(t) for t in times_after_idle_s[wake:wake + calls])


def check_l2(m: Measurement, hbm_bytes_per_s: float | None, launch_floor_s: float) -> None:
    """RefusedMeasurement for an L2 figure that cannot be L2 bandwidth: a call within
    L2_MIN_FLOORS launch floors (it timed the launch), or a rate no higher than HBM's (a
    read served from L2 is faster than DRAM, or it was not served from L2)."""
    name = f"{m.key} {m.variant}"
    if m.time_s < L2_MIN_FLOORS * launch_floor_s:
        raise RefusedMeasurement(
            f"{name}: {m.time_s * 1e6:.1f} us per call is within {L2_MIN_FLOORS:g} launch "
            f"floors ({launch_floor_s * 1e6:.1f} us each): it timed the launch, not L2; read "
            "an L2-resident buffer many times in one kernel")
    if hbm_bytes_per_s is not None and m.rate_per_s <= hbm_bytes_per_s:
        raise RefusedMeasurement(
            f"{name}: {m.rate_per_s:.4g} B/s is no faster than HBM ({hbm_bytes_per_s:.4g} "
            "B/s): implausible for L2")


def resolve_theoretical(requested: str, machines: Mapping[str, Machine]) -> Machine:
    """The profile `--theoretical-from` names (a built-in name or alias, or a YAML file).

    Needs no GPU, so the command checks it before looking for one. A bad file's error keeps
    its file and line; an unknown name is blamed on --theoretical-from.
    """
    try:
        return resolve_machine(requested, machines)
    except InputError as exc:
        if exc.where == "--machine":
            raise InputError("--theoretical-from", exc.problem) from None
        raise


def choose_theoretical(device: str, requested: str | Machine | None, force: bool,
                       machines: Mapping[str, Machine]) -> Machine:
    """The profile whose theoretical rates a calibration of `device` divides by.

    None requested: the profile matching the device, or InputError asking for
    `--theoretical-from`. A profile requested (name, file, or one already resolved) that does
    not match the device: InputError unless `force`, since its rates would be another card's.
    """
    detected = match_device(device, machines.values()).machine
    if requested is None:
        if detected is None:
            raise InputError("--theoretical-from", f"no built-in profile matches this card "
                                                   f"{device!r}; give --theoretical-from "
                                                   "NAME|FILE with its datasheet rates")
        return detected
    given = requested if isinstance(requested, Machine) else resolve_theoretical(requested,
                                                                                  machines)
    if force or match_device(device, [given]).machine is not None:
        return given
    hint = f" (built-in {detected.name} does)" if detected is not None else ""
    raise InputError("--theoretical-from", f"profile {given.name} does not match this card "
                                           f"{device!r}{hint}; pass --force to divide by its "
                                           "rates anyway")


def theoretical_for(m: Measurement, theoretical: Machine) -> float | None:
    if m.kind == "memory":
        level = theoretical.memory.get(m.key)
        return None if level is None else level.theoretical_bytes_per_s
    unit = theoretical.units.get(m.key)
    return None if unit is None else unit.theoretical_ops_per_s


@dataclass(frozen=True)
class Judged:
    accepted: tuple[tuple[Measurement, float | None], ...]
    refused: tuple[tuple[Measurement, str], ...]


def judge_measurements(measurements: Iterable[Measurement], theoretical: Machine,
                       clock_tolerance_mhz: float = CLOCK_TOLERANCE_MHZ,
                       max_spread: float = MAX_SPREAD,
                       launch_floor_s: float | None = None) -> Judged:
    """Each measurement accepted with its fraction (unit windows relabelled by their clocks:
    see `regime_from_clocks`) or refused with its reason; L2 figures are checked against the
    best accepted HBM rate and `launch_floor_s` (the events floor) when given."""
    accepted: list[tuple[Measurement, float | None]] = []
    refused: list[tuple[Measurement, str]] = []
    pending_l2: list[Measurement] = []
    for m in measurements:
        if m.kind == "memory" and m.key == "l2":
            pending_l2.append(m)
            continue
        try:
            frac = check_plausible(m, theoretical_for(m, theoretical), clock_tolerance_mhz,
                                   max_spread)
        except RefusedMeasurement as exc:
            refused.append((m, str(exc)))
            continue
        label = regime_from_clocks(m, clock_tolerance_mhz)
        accepted.append((m if label == m.variant else replace(m, variant=label), frac))
    hbm = [m.rate_per_s for m, _ in accepted if m.kind == "memory" and m.key != "l2"]
    for m in pending_l2:
        try:
            frac = check_plausible(m, theoretical_for(m, theoretical), clock_tolerance_mhz,
                                   max_spread)
            check_l2(m, max(hbm) if hbm else None,
                     launch_floor_s if launch_floor_s is not None else 0.0)
        except RefusedMeasurement as exc:
            refused.append((m, str(exc)))
            continue
        accepted.append((m, frac))
    return Judged(tuple(accepted), tuple(refused))


@dataclass(frozen=True)
class FloorMeasurement:
    """A tiny kernel timed under one method, as one launch and as a call of `kernels`
    launches: the floor's per-call cost and what each further kernel adds."""

    timing: str  # kernel | graph | events | wall
    one_kernel_times_s: tuple[float, ...]
    kernels: int
    many_kernel_times_s: tuple[float, ...]
    method: str = ""

    @property
    def per_call_s(self) -> float:
        return float(np.median(self.one_kernel_times_s))

    @property
    def per_kernel_s(self) -> float:
        """(median time of the many-kernel call - one kernel's) / further kernels; never
        negative (a faster many-kernel call means the kernels overlapped)."""
        if self.kernels <= 1:
            return self.per_call_s
        many = float(np.median(self.many_kernel_times_s))
        return max(many - self.per_call_s, 0.0) / (self.kernels - 1)


def floors_section(floors: Iterable[FloorMeasurement], stamp: str) -> dict[str, Any]:
    """The `latency_floor` mapping of a profile, one entry per measured timing method."""
    out: dict[str, Any] = {}
    for f in floors:
        out[f.timing] = {
            "per_call_s": f.per_call_s, "per_kernel_s": f.per_kernel_s, "assumed": False,
            "source": f"{stamp}: {f.method or 'tiny kernel'}; median of "
                      f"{len(f.one_kernel_times_s)} one-kernel and "
                      f"{len(f.many_kernel_times_s)} {f.kernels}-kernel calls"}
    return out


def build_profile(card_name: str, measurements: Iterable[Measurement], theoretical: Machine,
                  provenance: Mapping[str, Any],
                  latency_floors: Iterable[FloorMeasurement] = (),
                  name: str | None = None) -> dict[str, Any]:
    """A profile mapping that `profiles.parse_machine` loads.

    Theoretical rates come from `theoretical` (a datasheet profile); each accepted measurement
    becomes a fraction of them. A measurement with no theoretical rate to divide by (the L2
    bandwidth, say) and every refused one are written as notes, never as fractions.
    `latency_floors` are the tiny-kernel timings per method; a method left out keeps the
    assumed floor when the profile is loaded.
    """
    floors = list(latency_floors)
    events = next((f for f in floors if f.timing == "events"), None)
    judged = judge_measurements(measurements, theoretical,
                                launch_floor_s=None if events is None else events.per_call_s)
    stamp = f"roofwise calibrate on {card_name}, {provenance.get('date', 'undated')}"
    notes: list[str] = []
    memory: dict[str, dict[str, Any]] = {}
    for level in theoretical.memory.values():
        memory[level.name] = {"theoretical_bytes_per_s": level.theoretical_bytes_per_s,
                              "calibration_by_mix": {}, "source": level.source}
        if level.capacity_bytes is not None:  # a cache keeps its size: verdicts read it
            memory[level.name]["capacity_bytes"] = level.capacity_bytes
    units: dict[str, dict[str, Any]] = {}
    for unit in theoretical.units.values():
        body: dict[str, Any] = {"theoretical_ops_per_s": unit.theoretical_ops_per_s,
                                "calibration_by_regime": {}, "source": unit.source}
        if unit.ops_per_cycle is not None:
            body["ops_per_cycle"] = unit.ops_per_cycle
        units[unit.key] = body
    for m, frac in judged.accepted:
        where = memory if m.kind == "memory" else units
        table = "calibration_by_mix" if m.kind == "memory" else "calibration_by_regime"
        if frac is None and m.kind == "memory" and m.key in memory:
            # a cache's rate with no theoretical to divide by (the L2 re-read): kept as the
            # measured roof that cache_resident rows are read against, marked as measured
            held_rate = memory[m.key].get("measured_bytes_per_s") or 0.0
            memory[m.key]["measured_bytes_per_s"] = max(held_rate, m.rate_per_s)
            memory[m.key]["source"] = (f"{stamp} ({m.method or 'method unrecorded'}): "
                                       "measured, no theoretical rate published")
            continue
        if frac is None or m.key not in where:
            notes.append(f"measured {m.key} {m.variant}: {m.rate_per_s:.6g}/s "
                         f"({m.method or 'method unrecorded'}); no theoretical rate to divide by")
            continue
        held = where[m.key][table].get(m.variant)
        # two windows of one regime (a burst the clocks showed capped): sustained keeps the
        # settled, lower one; any other regime its best
        if held is not None:
            frac = min(held, frac) if m.variant == "sustained" else max(held, frac)
        where[m.key][table][m.variant] = frac
        where[m.key]["source"] = f"{stamp} ({m.method})" if m.method else stamp
    for _m, reason in judged.refused:
        notes.append(f"refused: {reason}")
    for body in (*memory.values(), *units.values()):
        for table in ("calibration_by_mix", "calibration_by_regime"):
            if table in body and not body[table]:
                del body[table]
    profile: dict[str, Any] = {
        "name": name or _slug(card_name),
        "display_name": card_name,
        "aliases": [card_name],
        "source": f"{stamp}; theoretical rates from profile {theoretical.name}",
        "memory": memory,
        "units": units,
    }
    if theoretical.clock_hz is not None:
        profile["clock_hz"] = theoretical.clock_hz
    floor_section = floors_section(floors, stamp)
    if floor_section:
        profile["latency_floor"] = floor_section
    profile["provenance"] = dict(provenance)
    profile["notes"] = notes
    return profile


def _slug(card_name: str) -> str:
    slug = "".join(c if c.isalnum() else "-" for c in card_name.lower()).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    return f"{slug or 'card'}-calibrated"
