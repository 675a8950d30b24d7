"""Numbers with units and sensible precision, for people."""

from __future__ import annotations

import math


def _scaled(value: float, unit: str, steps: tuple[tuple[float, str], ...], digits: int) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    for scale, prefix in steps:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}f} {prefix}{unit}"
    scale, prefix = steps[-1]
    return f"{value / scale:.{digits}f} {prefix}{unit}"


def seconds(value: float, digits: int = 3) -> str:
    return _scaled(value, "s", ((1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n")), digits)


def nbytes(value: float, digits: int = 2) -> str:
    return _scaled(value, "B", ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")),
                   digits)


def rate(value: float, unit: str = "FLOP/s", digits: int = 1) -> str:
    return _scaled(value, unit, ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")),
                   digits)


def count(value: float, unit: str = "FLOP", digits: int = 1) -> str:
    return rate(value, unit, digits)


def percent(value: float, digits: int = 1) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value * 100:.{digits}f}%"
