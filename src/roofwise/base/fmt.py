"""Numbers with units and sensible precision, for people. NaN, inf and None read "—".

A value beyond a million of the largest unit prefix (1e6 s, 1e18 B) reads in scientific form
("2.2e+295 s"), as does a non-zero value below a millionth of the smallest: never a wall of
digits or zeros.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from html import escape
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # polars loads when a whole column is formatted, not for one number
    import polars as pl

_TIME_STEPS = ((1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"))
_SI_STEPS = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
_SCIENTIFIC_ABOVE = 1e6  # times the largest prefix
_SCIENTIFIC_BELOW = 1e-6  # times the smallest prefix
PERCENT_SCIENTIFIC_ABOVE = 1e4  # a fraction: 1,000,000%
DASH = "—"


def _step(value: float, steps: tuple[tuple[float, str], ...]) -> tuple[float, str]:
    """The largest unit prefix not above `value`; the smallest one for tiny values."""
    return next(((s, p) for s, p in steps if abs(value) >= s), steps[-1])


def _scientific(value: float, steps: tuple[tuple[float, str], ...], figures: int,
                tiny: bool = False) -> str | None:
    """`value` in scientific form where prefixes would make a wall of digits, else None.

    With `tiny`, a non-zero value far below the smallest prefix too (1e-300 s, not 0.000 ns).
    """
    size = abs(value)
    if size >= steps[0][0] * _SCIENTIFIC_ABOVE or (
            tiny and 0 < size < steps[-1][0] * _SCIENTIFIC_BELOW):
        return f"{value:.{max(1, figures)}g}"
    return None


def _scaled(value: float | None, unit: str, steps: tuple[tuple[float, str], ...],
            digits: int, tiny: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return DASH
    wide = _scientific(value, steps, digits + 1, tiny)
    if wide is not None:
        return f"{wide} {unit}"
    scale, prefix = _step(value, steps)
    return f"{value / scale:.{digits}f} {prefix}{unit}"


def seconds(value: float | None, digits: int = 3, significant: int | None = None) -> str:
    """Seconds with a unit prefix: `digits` decimals (1.750 us), or, with `significant`,
    that many significant figures (13.0 us, 1.35 ms, 112 us, 3.79 ns)."""
    if significant is None or value is None or not math.isfinite(value):
        return _scaled(value, "s", _TIME_STEPS, digits, tiny=True)
    if value == 0:
        return "0 s"
    wide = _scientific(value, _TIME_STEPS, significant, tiny=True)
    if wide is not None:
        return f"{wide} s"
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
        return DASH
    if abs(value) >= PERCENT_SCIENTIFIC_ABOVE:  # 1e+06%, not a wall of digits
        return f"{value * 100:.{digits + 1}g}%"
    smallest = 10.0 ** -digits
    if 0 < abs(value * 100) < smallest / 2:  # not "0.0%" for a reading that is not zero
        return f"<{smallest:.{digits}f}%"
    return f"{value * 100:.{digits}f}%"


def op_name(unit_key: str) -> str:
    """What a unit's work is counted in: FLOP, or op for special-function and vector pipes
    (an exp or a compare is an operation, not a floating-point multiply-add)."""
    return ("op" if unit_key.startswith(("sfu", "ascend_vector")) or
            unit_key.endswith(".transcendental") else "FLOP")


def unit_rate(value: float | None, unit_key: str, digits: int = 1) -> str:
    """A unit's rate with a prefix: 989.5 TFLOP/s for FLOPs, 4.2 Top/s for other operations.
    The one formatter for compute rates (B/s for bytes is `rate(value, "B/s")`)."""
    return rate(value, op_name(unit_key) + "/s", digits)


def tera_rate(value: float, unit_key: str, spec: str = ".2f") -> str:
    """A unit's rate in sentences, fixed in tera: 1099.51 TFLOP/s, 4.18 Top/s."""
    return fixed(value / 1e12, spec, f"T{op_name(unit_key)}/s")


EXACT_UP_TO = 1e18  # beyond, float64 holds no exact integer worth printing in full


def exact(value: float | None) -> str:
    """An integer count in full, with thousands separators: 402,653,184."""
    if value is None or not math.isfinite(value):
        return DASH
    if abs(value) >= EXACT_UP_TO:
        return f"{value:.4g}"
    return f"{value:,.0f}"


def fixed(value: float, spec: str, unit: str) -> str:
    """A rate in a fixed unit (GB/s, T/s) for sentences: fixed point in the range kernels live
    in, scientific beyond it, never a wall of digits, and words for an infinite value."""
    if not math.isfinite(value):
        return "an infinite rate"
    return f"{value:{spec if abs(value) < 1e6 else '.3g'}} {unit}"


INTENSITY_SCIENTIFIC_ABOVE = 1e6  # FLOP/byte; beyond, scientific form, never a wall of digits


def intensity(value: float) -> str:
    """FLOP/byte with sensible precision: 0.25, 2.98, 12.7, 5,461, 2.2e+295."""
    if not math.isfinite(value):
        return "—"
    if abs(value) >= INTENSITY_SCIENTIFIC_ABOVE or 0 < abs(value) < 1 / INTENSITY_SCIENTIFIC_ABOVE:
        return f"{value:.3g}"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def workload(value: object) -> str:
    """A record's workload, compact: `m=512 n=512 k=512 dtype=bf16`; a text value with spaces
    is quoted (note="two-kernel split"), a nested value is compact JSON, a plain string stays."""
    if value is None:
        return ""
    if not isinstance(value, dict):
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    parts = []
    for key, item in value.items():
        if isinstance(item, str):
            text = json.dumps(item) if (not item or any(c.isspace() for c in item)
                                        or "=" in item) else item
        elif isinstance(item, (dict, list)):
            text = json.dumps(item, separators=(",", ":"))
        else:
            text = str(item).lower() if isinstance(item, bool) else str(item)
        parts.append(f"{key}={text}")
    return " ".join(parts)


# Whole columns: the same text as the functions above, one string per value. The common case
# (finite, in range) is decided by numpy and written by the engine; the rest go through the
# scalar function, so every text is exactly what it writes. Each `*_column` gives an engine
# column (what the sentence builders join), each `*_each` the same texts as a list.


ENGINE_FROM_VALUES = 4096  # below, a format per value costs less than starting a query


def decimals_column(values: object, digits: int, suffixes: Sequence[str] = ("",),
                    which: np.ndarray | None = None) -> pl.Series:
    """`f"{v:.{digits}f}{suffixes[which]}"` of every value (`which`: each value's suffix, the
    first if None). Many values are written by the engine, in one query, from each value
    rounded to an integer count of its last place: several times faster than a format per
    value. Python's format rounds the exact binary value, so a value within a hair of a tie,
    or too large (or not finite) for the count to be exact, is formatted by Python itself."""
    import polars as pl  # deferred: a sentence or two never needs the engine

    v = np.asarray(values, dtype=np.float64)
    picks = np.zeros(len(v), np.int64) if which is None else np.asarray(which, np.int64)
    if len(v) < ENGINE_FROM_VALUES:
        return pl.Series(_decimals_listed(v, digits, suffixes, picks), dtype=pl.String)
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = np.abs(v) * 10.0 ** digits
        python = ~(scaled < 1e9) | (np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6)
    whole = np.round(np.where(python, 0.0, scaled)).astype(np.int64)
    place = 10 ** digits
    text = pl.lit(pl.Series(whole // place)).cast(pl.String)
    if digits:
        text = text + pl.lit(".") + pl.lit(pl.Series(whole % place)).cast(pl.String).str.zfill(
            digits)
    sign = pl.lit(pl.Series(["", "-"]).gather(np.signbit(v).astype(np.int64)))
    ends = pl.lit(pl.Series(list(suffixes)).gather(picks))
    out = pl.select(sign + text + ends).to_series()
    at = np.flatnonzero(python)
    return out.scatter(at, _decimals_listed(v[at], digits, suffixes, picks[at])) if len(
        at) else out


def _decimals_listed(v: np.ndarray, digits: int, suffixes: Sequence[str],
                     picks: np.ndarray) -> list[str]:
    return [f"{a:.{digits}f}{suffixes[k]}" for a, k in zip(v.tolist(), picks.tolist(),
                                                           strict=True)]


def decimals_each(values: object, digits: int, suffixes: Sequence[str] = ("",),
                  which: np.ndarray | None = None) -> list[str]:
    """`decimals_column`'s texts as a list."""
    return decimals_column(values, digits, suffixes, which).to_list()


def _each(values: object, common: np.ndarray, fast: Callable[[np.ndarray], pl.Series],
          scalar: Callable[[float], str]) -> pl.Series:
    x = np.asarray(values, dtype=np.float64)
    out = fast(np.where(common, x, 0.0))
    rest = np.flatnonzero(~common)
    return out.scatter(rest, [scalar(float(x[k])) for k in rest.tolist()]) if len(
        rest) else out


def _scaled_column(values: object, unit: str, steps: tuple[tuple[float, str], ...],
                   digits: int, scalar: Callable[[float], str], tiny: bool = False
                   ) -> pl.Series:
    """`_scaled(v, unit, steps, digits, tiny)` of every value (`scalar` writes the rest)."""
    x = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        size = np.abs(x)
        common = np.isfinite(x) & (size < steps[0][0] * _SCIENTIFIC_ABOVE)
        if tiny:
            common &= ~((size > 0) & (size < steps[-1][0] * _SCIENTIFIC_BELOW))

    def fast(v: np.ndarray) -> pl.Series:
        size = np.abs(v)
        step = np.select([size >= s for s, _ in steps[:-1]], np.arange(len(steps) - 1),
                         len(steps) - 1)
        scales = np.array([s for s, _ in steps])[step]
        return decimals_column(v / scales, digits, [f" {p}{unit}" for _, p in steps],
                               step.astype(np.int64))

    return _each(x, common, fast, scalar)


def seconds_column(values: object) -> pl.Series:
    """`seconds(v)` (3 decimals) of every value."""
    return _scaled_column(values, "s", _TIME_STEPS, 3, seconds, tiny=True)


def seconds_each(values: object) -> list[str]:
    return seconds_column(values).to_list()


def nbytes_column(values: object) -> pl.Series:
    """`nbytes(v)` (2 decimals) of every value."""
    return _scaled_column(values, "B", _SI_STEPS, 2, nbytes)


def nbytes_each(values: object) -> list[str]:
    return nbytes_column(values).to_list()


def exact_column(values: object) -> pl.Series:
    """`exact(v)` of every value: the integer's digits in groups of three by the engine
    (rounded by numpy, half to even on the binary value, as Python's format rounds)."""
    x = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        common = np.isfinite(x) & (np.abs(x) < EXACT_UP_TO)
    return _each(x, common, _grouped_integers, exact)


def _grouped_integers(v: np.ndarray) -> pl.Series:
    import polars as pl  # deferred, as in decimals_column

    if len(v) < ENGINE_FROM_VALUES:
        return pl.Series([f"{a:,.0f}" for a in v.tolist()], dtype=pl.String)
    whole = pl.lit(pl.Series(np.abs(np.round(v)).astype(np.int64)))
    groups = []
    for power in range(6, -1, -1):  # below 1e18: at most seven groups of three digits
        above = whole // 1000 ** power
        digits = (above % 1000).cast(pl.String)
        group = pl.when(above >= 1000).then(digits.str.zfill(3)).otherwise(digits)
        groups.append(pl.when(above > 0).then(group) if power else group)  # null: left out
    sign = pl.lit(pl.Series(["", "-"]).gather(np.signbit(v).astype(np.int64)))
    return pl.select(sign + pl.concat_str(groups, separator=",", ignore_nulls=True)
                     ).to_series()


def exact_each(values: object) -> list[str]:
    """`exact(v)` of every value."""
    return exact_column(values).to_list()


def percent_column(values: object, digits: int = 1) -> pl.Series:
    """`percent(v, digits)` of every value."""
    x = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        hundred = np.abs(x * 100)
        common = np.isfinite(x) & (np.abs(x) < PERCENT_SCIENTIFIC_ABOVE) & ~(
            (hundred > 0) & (hundred < 10.0 ** -digits / 2))
    return _each(x, common, lambda v: decimals_column(v * 100, digits, ("%",)),
                 lambda v: percent(v, digits))


def percent_each(values: object, digits: int = 1) -> list[str]:
    return percent_column(values, digits).to_list()


def fixed_column(values: object, spec: str, unit: str) -> pl.Series:
    """`fixed(v, spec, unit)` of every value."""
    import polars as pl  # deferred, as in decimals_column

    x = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        common = np.isfinite(x) & (np.abs(x) < 1e6)
    digits = _FIXED_SPEC.fullmatch(spec)
    fast = ((lambda v: decimals_column(v, int(digits[1]), (f" {unit}",))) if digits else
            (lambda v: pl.Series([f"{a:{spec}} {unit}" for a in v.tolist()], dtype=pl.String)))
    return _each(x, common, fast, lambda v: fixed(v, spec, unit))


def fixed_each(values: object, spec: str, unit: str) -> list[str]:
    return fixed_column(values, spec, unit).to_list()


_FIXED_SPEC = re.compile(r"\.(\d)f")  # `.2f`: what `decimals_column` writes


def tera_rate_column(values: object, unit_key: str, spec: str = ".2f") -> pl.Series:
    """`tera_rate(v, unit_key, spec)` of every value."""
    return fixed_column(np.asarray(values, dtype=np.float64) / 1e12, spec,
                        f"T{op_name(unit_key)}/s")


def tera_rate_each(values: object, unit_key: str, spec: str = ".2f") -> list[str]:
    return tera_rate_column(values, unit_key, spec).to_list()


def html_pairs(rows: list[tuple[str, str]]) -> str:
    """A small two-column HTML table of (name, value) text, both escaped: a notebook view."""
    return "<table>" + "".join(f"<tr><th style='text-align:left'>{escape(k)}</th>"
                               f"<td>{escape(v)}</td></tr>" for k, v in rows) + "</table>"
