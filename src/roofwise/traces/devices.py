"""A device the trace does not name, told from the properties it records.

ROCm 7 leaves `deviceProperties[].name` empty (vLLM's MI300X traces), yet records the
architecture (`computeMajor`.`computeMinor`: 9.4 is gfx942), the compute units (`numSms`), the
wavefront (`warpSize` 64 on AMD) and the memory (`totalGlobalMem`). Where those single out one
part, that part is the device; anything else stays unnamed (`--machine` names it). Never a
nearest guess: every field must fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GIB = 1 << 30


@dataclass(frozen=True)
class Part:
    name: str  # as a profile's alias spells it
    warp_size: int
    compute: tuple[int, int]
    units: int
    memory_min_bytes: int
    memory_max_bytes: int
    source: str


# gfx942 (compute 9.4) is MI300X, MI300A and MI325X (ROCm's GPU hardware specifications);
# 304 CUs are MI300X and MI325X (their data sheets; MI300A has 228); memory tells them apart
# (192 GB HBM3 against 256 GB HBM3E; the driver reports what the board holds, less a little)
PARTS = (
    Part("AMD Instinct MI300X", 64, (9, 4), 304, 160 * GIB, 200 * GIB,
         "AMD Instinct MI300X data sheet: 304 CUs, 192 GB HBM3; gfx942"),
    Part("AMD Instinct MI325X", 64, (9, 4), 304, 224 * GIB, 272 * GIB,
         "AMD Instinct MI325X data sheet: 304 CUs, 256 GB HBM3E; gfx942"),
)


def part_of(properties: Mapping[str, Any]) -> str | None:
    """The part whose every recorded property fits, or None."""
    def number(key: str) -> int | None:
        value = properties.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    major, minor = number("computeMajor"), number("computeMinor")
    units, warp, memory = number("numSms"), number("warpSize"), number("totalGlobalMem")
    if None in (major, minor, units, warp, memory):
        return None
    found = [p for p in PARTS if p.compute == (major, minor) and p.units == units
             and p.warp_size == warp and p.memory_min_bytes <= (memory or 0) <= p.memory_max_bytes]
    return found[0].name if len(found) == 1 else None
