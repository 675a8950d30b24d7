"""The arithmetic of calibration, kept apart from the GPU so that it is tested on any machine.

A calibration is a set of measurements (bytes or operations over a median time, with the clocks
seen at the start and the end of the window) turned into fractions of theoretical rates. A
measurement that cannot be a calibration is refused with its reason, never clipped: a
fraction above 1.0 means the theoretical rate or the byte count is wrong, clocks that moved
mean the window measured a transition, and a wide spread means the median means little.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from ..machine import Machine
from ..profiles import match_device, resolve_machine

# Bytes each access mix moves per byte of one array (STREAM convention): copy reads one array
# and writes another; triad reads two and writes one.
MIX_BYTES_PER_ARRAY_BYTE: dict[str, int] = {"copy": 2, "triad": 3, "read": 1, "write": 1}

MIN_FRACTION = 0.30  # below this, the theoretical rate is probably for another card
CLOCK_TOLERANCE_MHZ = 15.0  # "a few MHz": more than this between start and end is a transition
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
    for label, start, end in (("SM", m.clocks_start.sm_mhz, m.clocks_end.sm_mhz),
                              ("memory", m.clocks_start.mem_mhz, m.clocks_end.mem_mhz)):
        if start is not None and end is not None and abs(end - start) > clock_tolerance_mhz:
            raise RefusedMeasurement(
                f"{name}: {label} clock moved {start:g} -> {end:g} MHz during the measurement "
                f"(more than {clock_tolerance_mhz:g} MHz); it measured a transition")
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
                       max_spread: float = MAX_SPREAD) -> Judged:
    accepted: list[tuple[Measurement, float | None]] = []
    refused: list[tuple[Measurement, str]] = []
    for m in measurements:
        try:
            frac = check_plausible(m, theoretical_for(m, theoretical), clock_tolerance_mhz,
                                   max_spread)
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
            "per_call_s": f.per_call_s, "per_kernel_s": f.per_kernel_s,
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
    judged = judge_measurements(measurements, theoretical)
    stamp = f"roofwise calibrate on {card_name}, {provenance.get('date', 'undated')}"
    notes: list[str] = []
    memory: dict[str, dict[str, Any]] = {}
    for level in theoretical.memory.values():
        memory[level.name] = {"theoretical_bytes_per_s": level.theoretical_bytes_per_s,
                              "calibration_by_mix": {}, "source": level.source}
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
        if frac is None or m.key not in where:
            notes.append(f"measured {m.key} {m.variant}: {m.rate_per_s:.6g}/s "
                         f"({m.method or 'method unrecorded'}); no theoretical rate to divide by")
            continue
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
    floors = floors_section(latency_floors, stamp)
    if floors:
        profile["latency_floor"] = floors
    profile["provenance"] = dict(provenance)
    profile["notes"] = notes
    return profile


def _slug(card_name: str) -> str:
    slug = "".join(c if c.isalnum() else "-" for c in card_name.lower()).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    return f"{slug or 'card'}-calibrated"
