"""Two runs of the same benchmarks, row by row: what got slower beyond the noise, what got faster.

Pure: takes two analyses, returns a comparison. Rows are matched by (op, workload as canonical
JSON, device); repeated keys within one file are paired in file order.

A regression is a slowdown beyond the measurement spread: with spreads on both rows
(`time_p10_s`, `time_p90_s`), the new p10 must lie above the base p90 *and* the relative change
must exceed the threshold; without spreads, the threshold alone decides. Improvements mirror it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .analysis import Analysis
from .errors import InputError
from .verdict import BLANK, IMPOSSIBLE, LATENCY_BOUND

REGRESSION, IMPROVEMENT, UNCHANGED, ONLY_BASE, ONLY_NEW = (
    "regression", "improvement", "unchanged", "only_base", "only_new")
STATUS_ORDER = (REGRESSION, IMPROVEMENT, UNCHANGED, ONLY_BASE, ONLY_NEW)
DEFAULT_THRESHOLD = 0.05

Key = tuple[str, str, str]
# verdicts whose efficiency is not a reading (the table shows "—"), so no change in it either
_NO_EFFICIENCY = (BLANK, LATENCY_BOUND, IMPOSSIBLE)


@dataclass(frozen=True)
class Side:
    """One row of one run, as the comparison needs it."""

    index: int
    time_s: float
    time_p10_s: float  # NaN when the record has no spread
    time_p90_s: float
    efficiency: float  # NaN when blank, latency-bound or impossible: not a reading there
    verdict: str

    @property
    def has_spread(self) -> bool:
        return math.isfinite(self.time_p10_s) and math.isfinite(self.time_p90_s)


@dataclass(frozen=True)
class Change:
    key: Key
    status: str
    base: Side | None
    new: Side | None
    time_change: float  # new/base - 1; NaN when unmatched
    efficiency_change: float  # new - base, in efficiency units (0.05 = 5 points); NaN if unknown
    beyond_spread: bool | None  # None when either side has no spread

    def to_json(self) -> dict[str, Any]:
        op, workload, device = self.key
        return {
            "op": op, "workload": json.loads(workload) if workload else None,
            "device": device or None, "status": self.status,
            "base_time_s": _opt(self.base.time_s if self.base else None),
            "new_time_s": _opt(self.new.time_s if self.new else None),
            "time_change": _opt(self.time_change),
            "base_efficiency": _opt(self.base.efficiency if self.base else None),
            "new_efficiency": _opt(self.new.efficiency if self.new else None),
            "efficiency_change": _opt(self.efficiency_change),
            "base_verdict": self.base.verdict if self.base else None,
            "new_verdict": self.new.verdict if self.new else None,
            "beyond_spread": self.beyond_spread,
        }


@dataclass(frozen=True)
class Comparison:
    changes: tuple[Change, ...]  # regressions first, then improvements, unchanged, unmatched
    threshold: float

    def by_status(self, status: str) -> list[Change]:
        return [c for c in self.changes if c.status == status]

    @property
    def regressions(self) -> list[Change]:
        return self.by_status(REGRESSION)

    def counts(self) -> dict[str, int]:
        return {s: len(self.by_status(s)) for s in STATUS_ORDER}


def row_key(analysis: Analysis, i: int) -> Key:
    """(op, canonical JSON of the workload, device): what makes two rows the same benchmark."""
    rows = analysis.columns.rows
    workload = rows[i].get("workload") if rows is not None else None
    text = "" if workload is None else json.dumps(workload, sort_keys=True,
                                                  separators=(",", ":"))
    return (str(analysis.columns.op[i]), text, str(analysis.columns.device[i] or ""))


def compare(base: Analysis, new: Analysis, threshold: float = DEFAULT_THRESHOLD) -> Comparison:
    """Match rows, classify each pair, and order them: regressions, improvements, the rest."""
    if not (threshold >= 0 and math.isfinite(threshold)):
        raise InputError("--threshold", f"expected a non-negative fraction, got {threshold!r}")
    base_rows = dict(_keyed(base))
    new_rows = dict(_keyed(new))
    changes = [_classify(key[:3], base_rows[key], new_rows[key], threshold)
               for key in base_rows if key in new_rows]
    changes += [Change(key[:3], ONLY_BASE, side, None, math.nan, math.nan, None)
                for key, side in base_rows.items() if key not in new_rows]
    changes += [Change(key[:3], ONLY_NEW, None, side, math.nan, math.nan, None)
                for key, side in new_rows.items() if key not in base_rows]
    rank = {s: k for k, s in enumerate(STATUS_ORDER)}
    # within a status, the largest slowdown (regressions) or speed-up (improvements) first
    changes.sort(key=lambda c: (rank[c.status],
                                -abs(c.time_change) if math.isfinite(c.time_change) else 0.0))
    return Comparison(tuple(changes), threshold)


def _keyed(analysis: Analysis) -> Iterator[tuple[tuple[str, str, str, int], Side]]:
    seen: dict[Key, int] = {}
    cols, judged = analysis.columns, analysis.judged
    with np.errstate(invalid="ignore"):
        efficiency = np.where(np.isin(judged.verdict, _NO_EFFICIENCY), np.nan,
                              judged.efficiency.astype(float))
    for i in range(len(analysis)):
        key = row_key(analysis, i)
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        yield (*key, occurrence), Side(
            index=i, time_s=float(cols.time_s[i]), time_p10_s=float(cols.time_p10_s[i]),
            time_p90_s=float(cols.time_p90_s[i]), efficiency=float(efficiency[i]),
            verdict=analysis.verdict_name(i))


def _classify(key: tuple[str, ...], base: Side, new: Side, threshold: float) -> Change:
    time_change = (new.time_s / base.time_s - 1.0) if base.time_s > 0 else math.nan
    efficiency_change = new.efficiency - base.efficiency
    spread = base.has_spread and new.has_spread
    slower_beyond = new.time_p10_s > base.time_p90_s if spread else None
    faster_beyond = new.time_p90_s < base.time_p10_s if spread else None
    status = UNCHANGED
    if math.isfinite(time_change):
        if time_change > threshold and slower_beyond is not False:
            status = REGRESSION
        elif time_change < -threshold and faster_beyond is not False:
            status = IMPROVEMENT
    beyond = None if not spread else bool(slower_beyond or faster_beyond)
    op, workload, device = key
    return Change((op, workload, device), status, base, new, time_change, efficiency_change,
                  beyond)


def _opt(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value
