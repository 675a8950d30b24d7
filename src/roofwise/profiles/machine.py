"""What a machine can do: memory levels, compute units, the latency floor, and their sources.

Only theoretical rates and measured fractions are stored; an effective rate is always
derived (`theoretical x calibration`), so the two can never drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from html import escape
from types import MappingProxyType

from roofwise.base import fmt

# Compute regimes a calibration can name: `burst` right after an idle pause, `sustained` once
# clocks settle under load, `unspecified` where the source does not say which.
REGIMES = ("sustained", "burst", "unspecified")

# How a time was taken, cheapest floor first: `kernel` (summed kernel durations from a
# profiler), `graph` (CUDA-graph replay), `events` (CUDA events around an eager call), `wall`
# (host clock, a synchronisation included). `device`, the older name, means `events`.
TIMINGS = ("kernel", "graph", "events", "wall")
TIMING_ALIASES = {"device": "events"}
DEFAULT_TIMING = "events"  # a record that does not say how it was timed


def timing_method(name: str | None) -> str:
    """The timing method a record's `timing` names; absent reads as `events`."""
    if not name:
        return DEFAULT_TIMING
    return TIMING_ALIASES.get(name, name)


# The classes of work a ledger declares: a card with other pipes places work on them by class.
OP_CLASSES = ("arithmetic", "transcendental", "compare", "contraction")
# the class of work an NVIDIA unit family runs: what a roof named by family alone implies
FAMILY_CLASS = {"cuda_core": "arithmetic", "sfu": "transcendental", "tensor_core": "contraction"}

@dataclass(frozen=True)
class MemoryLevel:
    """One level of the memory hierarchy (hbm, l2, an Ascend GM path).

    A cache level (l2, AMD's Infinity Cache) states its `capacity_bytes`: a call whose bytes
    fit in it may have been served from it, above the DRAM ceiling. Its bandwidth is known
    only where a source gives a theoretical rate or `roofwise calibrate` measured one
    (`measured_bytes_per_s`, a rate with no theoretical to divide by).
    """

    name: str
    theoretical_bytes_per_s: float | None  # None: a gap in the sources
    # measured fraction of theoretical per access mix: copy, triad, read, write
    calibration_by_mix: Mapping[str, float] = field(default_factory=dict)
    bytes_per_cycle: float | None = None
    source: str = ""
    choice: str = ""  # which vendor figure was taken where two exist, and why
    capacity_bytes: float | None = None  # what the level holds: DRAM's size, a cache's size
    capacity_source: str = ""  # where the capacity was taken from (else the level's source)
    measured_bytes_per_s: float | None = None  # measured where no theoretical rate exists

    def __post_init__(self) -> None:
        _freeze(self, "calibration_by_mix")

    @property
    def envelope_mix(self) -> str | None:
        """The access mix with the highest measured fraction; ties keep the first listed."""
        if not self.calibration_by_mix:
            return None
        return max(self.calibration_by_mix, key=lambda mix: self.calibration_by_mix[mix])

    def calibration(self, mix: str | None = None) -> float | None:
        """Measured fraction for `mix` (the envelope when None); None when uncalibrated."""
        chosen = mix if mix is not None else self.envelope_mix
        if chosen is None:
            return None
        return self.calibration_by_mix.get(chosen)

    def effective_bytes_per_s(self, mix: str | None = None) -> float | None:
        """Calibrated bandwidth; the theoretical one when no mix was measured; the measured
        one where there is no theoretical rate (calibrate's L2 re-read)."""
        if self.theoretical_bytes_per_s is None:
            return self.measured_bytes_per_s
        fraction = self.calibration(mix)
        return self.theoretical_bytes_per_s * (1.0 if fraction is None else fraction)


@dataclass(frozen=True)
class ComputeUnit:
    """A pipe that does work: `cuda_core.fp32`, `tensor_core.bf16`, `sfu.fp32`, an Ascend pipe.

    Rates are operations per second; for FLOP-counted units an FMA is two operations.
    """

    key: str
    theoretical_ops_per_s: float | None  # None: a gap (e.g. clock or core count unknown)
    calibration_by_regime: Mapping[str, float] = field(default_factory=dict)  # sustained, burst
    ops_per_cycle: float | None = None  # per SM / per core, as the source states it
    source: str = ""
    choice: str = ""  # which vendor figure was taken where two exist (sparse, accumulate), why

    def __post_init__(self) -> None:
        _freeze(self, "calibration_by_regime")

    @property
    def envelope_regime(self) -> str | None:
        if not self.calibration_by_regime:
            return None
        return max(self.calibration_by_regime, key=lambda r: self.calibration_by_regime[r])

    def calibration(self, regime: str | None = None) -> float | None:
        chosen = regime if regime is not None else self.envelope_regime
        if chosen is None:
            return None
        return self.calibration_by_regime.get(chosen)

    def effective_ops_per_s(self, regime: str | None = None) -> float | None:
        """Calibrated rate in `regime` (envelope when None); theoretical when uncalibrated."""
        if self.theoretical_ops_per_s is None:
            return None
        if regime is not None and self.calibration_by_regime and (
            regime not in self.calibration_by_regime
        ):
            regime = None  # a unit measured in one regime only is read in that one
        fraction = self.calibration(regime)
        return self.theoretical_ops_per_s * (1.0 if fraction is None else fraction)

    @property
    def calibrated(self) -> bool:
        return bool(self.calibration_by_regime)


@dataclass(frozen=True)
class TimingFloor:
    """The least time one timed call can read under one timing method.

    A call of `kernels` launches costs `per_call_s + (kernels - 1) * per_kernel_s` before any
    of its work: host dispatch and launches under events, graph launch and the gaps between
    kernels under replay, a tiny kernel's own duration under a profiler.
    """

    per_call_s: float
    per_kernel_s: float  # each kernel after the first
    assumed: bool  # True: not measured on this card
    source: str

    def floor_s(self, kernels: float = 1.0) -> float:
        return self.per_call_s + (max(kernels, 1.0) - 1.0) * self.per_kernel_s


# Assumed floors, used where a profile states none. No roofwise measurement stands behind
# them; `roofwise calibrate` measures each on the card. Every reading that uses one says so.
ASSUMED_FLOORS: Mapping[str, TimingFloor] = MappingProxyType({
    "kernel": TimingFloor(
        3e-6, 2e-6, True,
        "assumed: TileOPs' SOL < 3 us rule (scripts/nightly_report.py) read as the shortest "
        "kernel a profiler resolves; 2 us per further tiny kernel is roofwise's estimate"),
    "graph": TimingFloor(
        5e-6, 2e-6, True,
        "assumed: roofwise's estimate, a graph launch and one tiny kernel (5 us), about "
        "1 us of gap plus a tiny kernel's duration per further kernel (2 us)"),
    "events": TimingFloor(
        20e-6, 5e-6, True,
        "assumed: TileOPs' measured < 20 us rule for one eager call; 5 us per further launch "
        "(4-6 us through driver and runtime, susun-blog.com 'pegainfer (3)', CUDA 13)"),
    "wall": TimingFloor(
        30e-6, 5e-6, True,
        "assumed: the events floor plus about 10 us for the host synchronisation "
        "(roofwise's estimate)"),
})


@dataclass(frozen=True)
class Interconnect:
    """The link between devices that tensor-parallel collectives use (NVLink on HGX parts).

    `bytes_per_s` is the datasheet's per-GPU figure, both directions together (NVIDIA's
    "900 GB/s" for H100/H200 SXM NVLink); a ring all-reduce moves its bytes one way, at half
    of it. `hop_latency_s` is the fixed cost of one ring step, assumed until measured.
    """

    name: str
    bytes_per_s: float
    hop_latency_s: float
    hop_latency_assumed: bool
    source: str
    hop_latency_source: str

    @property
    def one_way_bytes_per_s(self) -> float:
        return self.bytes_per_s / 2


@dataclass(frozen=True)
class LatencyFloors:
    """A floor per timing method: below its floor the roofline has no traction."""

    by_timing: Mapping[str, TimingFloor] = field(default_factory=lambda: dict(ASSUMED_FLOORS))

    def __post_init__(self) -> None:
        _freeze(self, "by_timing")

    def floor(self, timing: str | None) -> TimingFloor:
        return self.by_timing[timing_method(timing)]

    def floor_s(self, timing: str | None, kernels: float = 1.0) -> float:
        return self.floor(timing).floor_s(kernels)

    @property
    def assumed(self) -> bool:
        """Any method's floor assumed rather than measured on the card."""
        return any(f.assumed for f in self.by_timing.values())

    @classmethod
    def assumed_default(cls) -> LatencyFloors:
        return cls(dict(ASSUMED_FLOORS))


@dataclass(frozen=True)
class Ceiling:
    """One ceiling by name, its theoretical rate (None: a gap) and measured fraction."""

    name: str  # "hbm read mix", "tensor_core.bf16 burst"
    theoretical_per_s: float | None
    fraction: float | None  # None: uncalibrated


@dataclass(frozen=True, repr=False)
class Machine:
    name: str
    display_name: str
    memory: Mapping[str, MemoryLevel]  # the first level is the one kernels are priced against
    units: Mapping[str, ComputeUnit]
    latency_floors: LatencyFloors
    aliases: tuple[str, ...] = ()
    clock_hz: float | None = None
    source: str = ""
    notes: tuple[str, ...] = ()
    path: str = ""  # where it was loaded from, for messages
    # work class -> the unit (or unit family, keeping the op's variant) that runs that class
    # here, for work declared on a unit this machine does not have (NVIDIA names on Ascend)
    pipes_by_class: Mapping[str, str] = field(default_factory=dict)
    interconnect: Interconnect | None = None  # None: no multi-device link in the profile

    def __post_init__(self) -> None:
        _freeze(self, "memory")
        _freeze(self, "units")
        _freeze(self, "pipes_by_class")

    def __repr__(self) -> str:
        calibrated = sum(u.calibrated for u in self.units.values())
        return (f"<Machine {self.name}: {self.display_name}, {self.dram.name} "
                f"{fmt.rate(self.dram.theoretical_bytes_per_s, 'B/s')}, {len(self.units)} units "
                f"({calibrated} calibrated)>")

    def _repr_html_(self) -> str:
        rows = [(f"{level.name} (memory)",
                 f"{fmt.rate(level.theoretical_bytes_per_s, 'B/s')} theoretical, "
                 f"{fmt.rate(level.effective_bytes_per_s(), 'B/s')} effective")
                for level in self.memory.values()]
        rows += [(unit.key, f"{fmt.unit_rate(unit.theoretical_ops_per_s, unit.key)} theoretical, "
                            f"{fmt.unit_rate(unit.effective_ops_per_s(), unit.key)} effective"
                            f"{'' if unit.calibrated else ' (uncalibrated)'}")
                 for unit in self.units.values()]
        return (f"<b>{escape(self.display_name)}</b> ({escape(self.name)})"
                + fmt.html_pairs(rows))

    def pipe_for(self, unit_key: str, op_class: str) -> str:
        """The unit that runs `op_class` work declared on `unit_key`: the unit itself when the
        machine has it, else the one `pipes_by_class` names (a family keeps the variant:
        tensor_core.bf16 -> ascend_cube.bf16), else `unit_key` unchanged (R1 then says so)."""
        if unit_key in self.units:
            return unit_key
        target = self.pipes_by_class.get(op_class)
        if target is None:
            return unit_key
        if target in self.units:
            return target
        variant = unit_key.partition(".")[2]
        return f"{target}.{variant}"

    @property
    def dram(self) -> MemoryLevel:
        return next(iter(self.memory.values()))

    @property
    def caches(self) -> tuple[MemoryLevel, ...]:
        """The cache levels after DRAM that state a capacity (L2; the Infinity Cache on
        CDNA 3), smallest first: the levels that may serve a call whose bytes fit in them."""
        levels = [level for level in list(self.memory.values())[1:]
                  if level.capacity_bytes is not None]
        return tuple(sorted(levels, key=lambda level: level.capacity_bytes or 0.0))

    def unit(self, key: str) -> ComputeUnit | None:
        """The unit `key` names; a unit this machine lacks that names an NVIDIA family
        (records and ops declare tensor_core.bf16, cuda_core.fp32, sfu.fp32) is the pipe
        `pipes_by_class` gives that family's class: tensor_core.bf16 is matrix_core.bf16 on
        an MI300X, cuda_core.fp32 its vector.fp32. None where neither exists."""
        found = self.units.get(key)
        if found is not None:
            return found
        op_class = FAMILY_CLASS.get(key.partition(".")[0])
        return None if op_class is None else self.units.get(self.pipe_for(key, op_class))

    def balance_flops_per_byte(
        self, key: str, regime: str | None = None, mix: str | None = None
    ) -> float | None:
        """Arithmetic intensity at which `key` and DRAM take equally long (the ridge point)."""
        unit = self.units.get(key)
        bandwidth = self.dram.effective_bytes_per_s(mix)
        if unit is None or bandwidth is None:
            return None
        rate = unit.effective_ops_per_s(regime)
        return None if rate is None else rate / bandwidth

    def ceiling(self, memory: bool, unit_key: str, mix: str | None = None,
                regime: str | None = None) -> Ceiling:
        """The ceiling a row bound by memory or by `unit_key` is read against (the envelope
        when `mix`/`regime` are None), with its theoretical rate and calibrated fraction."""
        if memory:
            level = self.dram
            chosen = mix if mix in level.calibration_by_mix else level.envelope_mix
            return Ceiling(f"{level.name} {chosen} mix" if chosen else level.name,
                           level.theoretical_bytes_per_s, level.calibration(chosen))
        unit = self.units.get(unit_key)
        if unit is None:
            return Ceiling(unit_key, None, None)
        picked = regime if regime in unit.calibration_by_regime else unit.envelope_regime
        return Ceiling(f"{unit_key} {picked}" if picked else unit_key,
                       unit.theoretical_ops_per_s, unit.calibration(picked))

    def matches(self, device: str) -> bool:
        """Exact, case-insensitive match on the name, the display name or an alias."""
        wanted = _normalise(device)
        names = (self.name, self.display_name, *self.aliases)
        return any(_normalise(n) == wanted for n in names)


def _freeze(value: object, name: str) -> None:
    """A frozen dataclass's mapping field, made read-only too (frozen only stops rebinding)."""
    object.__setattr__(value, name, MappingProxyType(dict(getattr(value, name))))


def _normalise(name: str) -> str:
    return " ".join(name.replace("_", " ").replace("-", " ").lower().split())
