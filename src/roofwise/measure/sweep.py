"""Sweeps and shards of operator parameters: the points `roofwise bench` times.

A sweep is the product of every swept list over the fixed parameters; shard i/n keeps every
n-th point from i, so n jobs on n cards together hold the sweep exactly once. Values stay text
here; `measure.torch_ops.resolve_params` types them per operator.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from roofwise.base.errors import InputError


def parse_assignments(values: Sequence[str], option: str) -> dict[str, str]:
    """KEY=VALUE texts of one option; the same key twice is an error, never a silent override."""
    out: dict[str, str] = {}
    for text in values:
        key, sep, value = text.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise InputError(option, f"expected KEY=VALUE, got {text!r}")
        if key.strip() in out:
            raise InputError(f"{option} {key.strip()}", "given twice; give each parameter once")
        out[key.strip()] = value.strip()
    return out


def refuse_fixed_and_swept(shape: Mapping[str, str], sweeps: Mapping[str, str]) -> None:
    """A parameter is fixed (--shape) or swept (--sweep), never both."""
    both = sorted(set(shape) & set(sweeps))
    if both:
        raise InputError(f"--sweep {both[0]}", f"also given with --shape {both[0]}; a "
                                               "parameter is either fixed or swept")


def sweep_points(shape: Mapping[str, str], sweeps: Mapping[str, str]) -> list[dict[str, str]]:
    """Every combination of the swept values (in the order given), over the fixed shape."""
    keys = list(sweeps)
    lists = []
    for key in keys:
        values = [v.strip() for v in sweeps[key].split(",") if v.strip()]
        if not values:
            raise InputError(f"--sweep {key}", "expected a comma-separated list of values")
        lists.append(values)
    return [{**shape, **dict(zip(keys, combo, strict=True))} for combo in itertools.product(*lists)]


def parse_shard(text: str | None) -> tuple[int, int]:
    if text is None:
        return 0, 1
    left, sep, right = text.partition("/")
    try:
        index, count = int(left), int(right)
    except ValueError:
        raise InputError("--shard", f"expected I/N such as 0/4, got {text!r}") from None
    if not sep or count < 1 or not 0 <= index < count:
        raise InputError("--shard", f"expected I/N with 0 <= I < N, got {text!r}")
    return index, count


def shard(points: Sequence[Any], index: int, count: int) -> list[Any]:
    """Every `count`-th point starting at `index`: shards 0..count-1 partition the sweep."""
    return list(points[index::count])


def shard_or_refuse(points: Sequence[Any], index: int, count: int) -> list[Any]:
    """The shard's points; InputError when it has none (nothing to run, nothing to write)."""
    mine = shard(points, index, count)
    if not mine:
        raise InputError("--shard", f"shard {index}/{count} of a {len(points)}-point sweep "
                                    "has no points")
    return mine


def point_text(op: str, params: Mapping[str, Any]) -> str:
    """`rmsnorm rows=8, hidden=16`: the point an error is about, as the user would type it."""
    return f"{op} " + ", ".join(f"{k}={v}" for k, v in params.items())
