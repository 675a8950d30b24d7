"""Numbers with units and sensible precision, for people. NaN, inf and None read "—"."""

from __future__ import annotations

import math

_TIME_STEPS = ((1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"))
_SI_STEPS = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def _step(value: float, steps: tuple[tuple[float, str], ...]) -> tuple[float, str]:
    """The largest unit prefix not above `value`; the smallest one for tiny values."""
    return next(((s, p) for s, p in steps if abs(value) >= s), steps[-1])


def _scaled(value: float | None, unit: str, steps: tuple[tuple[float, str], ...],
            digits: int) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    scale, prefix = _step(value, steps)
    return f"{value / scale:.{digits}f} {prefix}{unit}"


def seconds(value: float | None, digits: int = 3, significant: int | None = None) -> str:
    """Seconds with a unit prefix: `digits` decimals (1.750 us), or, with `significant`,
    that many significant figures (13.0 us, 1.35 ms, 112 us, 3.79 ns)."""
    if significant is None or value is None or not math.isfinite(value):
        return _scaled(value, "s", _TIME_STEPS, digits)
    if value == 0:
        return "0 s"
    rounded = float(f"{value:.{significant}g}")  # 999.6 us rounds to 1.00 ms, not "1000 us"
    scale, _ = _step(rounded, _TIME_STEPS)
    magnitude = math.floor(math.log10(abs(rounded) / scale))
    return _scaled(rounded, "s", _TIME_STEPS, max(0, significant - 1 - magnitude))


def nbytes(value: float | None, digits: int = 2) -> str:
    return _scaled(value, "B", _SI_STEPS, digits)


def rate(value: float | None, unit: str = "FLOP/s", digits: int = 1) -> str:
    return _scaled(value, unit, _SI_STEPS, digits)


def count(value: float | None, unit: str = "FLOP", digits: int = 1) -> str:
    return rate(value, unit, digits)


def percent(value: float | None, digits: int = 1) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value * 100:.{digits}f}%"


def op_name(unit_key: str) -> str:
    """What a unit's work is counted in: FLOP, or op for special-function and vector pipes."""
    return "op" if unit_key.startswith(("sfu", "ascend_vector")) else "FLOP"


def exact(value: float | None) -> str:
    """An integer count in full, with thousands separators: 402,653,184."""
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:,.0f}"
