"""A record judged on a profile its own `device` does not name: said per row and in total.

`analyze -m h200` on a record measured on an RTX 4090, or on host wall-clock records from a
CPU, prices it against the wrong card; the verdict still prints, so the mismatch must be said.
Rows are grouped by device name (categorical), so a million rows cost one look-up per device.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from roofwise.pricing.core import equal_to, uniform
from roofwise.profiles.load import builtin_machines, match_device
from roofwise.profiles.machine import Machine
from roofwise.verdicts.analysis import Verdicts as Analysis


@lru_cache(maxsize=1)
def _builtins() -> tuple[Machine, ...]:
    return tuple(builtin_machines().values())


def device_mismatch(device: str, machine: Machine) -> str:
    """Why `device` (as a record names it) is not `machine`; "" when it is, or is unnamed."""
    if not device.strip() or machine.matches(device):
        return ""
    other = match_device(device, _builtins()).machine
    if other is not None and other.name == machine.name:
        return ""
    named = f"the {other.name} profile" if other is not None else "no built-in profile"
    return (f"device mismatch: the record was measured on {device!r} ({named}) but is "
            f"judged on {machine.name}")


def mismatches(analysis: Analysis) -> np.ndarray:
    """Per row, the mismatch sentence or "" (object array): one look-up per (device, profile)
    pair present, then vectorised assignment."""
    codes, names = analysis.columns.device_categories()
    out: np.ndarray | None = None
    for profile, machine in analysis.machines.items():
        on_profile = equal_to(analysis.machine_name, profile)
        for code in np.flatnonzero(np.bincount(codes[on_profile], minlength=len(names))):
            text = device_mismatch(str(names[int(code)] or ""), machine)
            if text:
                if out is None:
                    out = np.full(len(analysis), "", dtype=object)
                out[on_profile & (codes == code)] = text
    return uniform("", len(analysis)) if out is None else out


def mismatch_row(analysis: Analysis, i: int) -> str:
    """The mismatch sentence of row `i`, or ""."""
    device = str(analysis.columns.device[i] or "")
    name = analysis.machine_name[i]
    return device_mismatch(device, analysis.machines[name]) if name and device else ""


def mismatch_summary(analysis: Analysis) -> str | None:
    """One line: how many rows were judged on a profile their device does not name, by device."""
    return mismatch_line(mismatch_counts(analysis), len(analysis))


def mismatch_counts(analysis: Analysis) -> dict[str, int]:
    """Rows judged on a profile their device does not name, by device (a batch's share of a
    stream's total)."""
    hit = mismatches(analysis) != ""
    if not hit.any():
        return {}
    devices, counts = np.unique(analysis.columns.device[hit].astype(str), return_counts=True)
    return {str(d): int(c) for d, c in zip(devices, counts, strict=True)}


def mismatch_line(counts: dict[str, int], rows: int) -> str | None:
    """`mismatch_summary`'s line for `counts` out of `rows` (None when there are none)."""
    if not counts:
        return None
    listed = ", ".join(f"{d!r} ({c})" for d, c in sorted(counts.items()))
    return (f"warning: {sum(counts.values())} of {rows} record(s) were judged on a profile "
            f"their device does not name: {listed}; pass the matching --machine, or none to "
            "let each record's device choose")
