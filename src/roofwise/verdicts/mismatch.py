"""A record judged on a profile its own `device` does not name: said per row and in total.

`analyze -m h200` on a record measured on an RTX 4090, or on host wall-clock records from a
CPU, prices it against the wrong card; the verdict still prints, so the mismatch must be said.
Rows are grouped by device name (categorical), so a million rows cost one look-up per device.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

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


def mismatch_codes(analysis: Analysis) -> tuple[np.ndarray, list[str]]:
    """Per row, an index into the sentences (0: "", no mismatch), and the sentences: one
    look-up per (device, profile) pair present, integer work per row."""
    codes, names = analysis.columns.device_categories()
    pair = analysis.machine_index.astype(np.int64) * (len(names) + 1) + codes
    present, inverse = np.unique(pair, return_inverse=True)
    profiles = list(analysis.machines.values())
    texts = [""]
    of_pair = np.zeros(len(present), dtype=np.int64)
    for k, value in enumerate(present.tolist()):
        at, code = divmod(value, len(names) + 1)
        if at < 0:  # no profile matched the row
            continue
        text = device_mismatch(str(names[code] or ""), profiles[at])
        if text:
            of_pair[k] = len(texts)
            texts.append(text)
    return of_pair[inverse.reshape(-1)], texts


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
    hit = mismatch_codes(analysis)[0] != 0
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
