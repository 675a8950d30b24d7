"""Two runs of the same benchmarks, row by row: what got slower beyond the noise, what got faster.

Pure: takes two analyses, returns a comparison. Rows are matched by (op, workload as canonical
JSON, device); repeated keys within one file are paired in file order, and listed in
`Comparison.duplicates` so that a caller can say so (a CI gate fails on them).

A pair whose base or new time is not a positive number is *incomparable*: no ratio of times
says anything about it, so it is neither unchanged nor a regression, and carries its reason.

A regression is a slowdown beyond the measurement spread: with spreads on both rows
(`time_p10_s`, `time_p90_s`), the new p10 must lie above the base p90 *and* the relative change
must exceed the threshold; without spreads, the threshold alone decides. Improvements mirror it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .analysis import Analysis
from .errors import InputError
from .report import fmt
from .verdict import BLANK, IMPOSSIBLE, LATENCY_BOUND

REGRESSION, INCOMPARABLE, IMPROVEMENT, UNCHANGED, ONLY_BASE, ONLY_NEW = (
    "regression", "incomparable", "improvement", "unchanged", "only_base", "only_new")
STATUS_ORDER = (REGRESSION, INCOMPARABLE, IMPROVEMENT, UNCHANGED, ONLY_BASE, ONLY_NEW)
DEFAULT_THRESHOLD = 0.05

Key = tuple[str, str, str]
# verdicts whose efficiency is not a reading (the table shows "—"), so no change in it either
_NO_EFFICIENCY = (BLANK, LATENCY_BOUND, IMPOSSIBLE)


@dataclass(frozen=True)
class Side:
    """One row of one run, as the comparison needs it."""

    index: int
    line: int  # where the record sits in its file (1-based), for messages
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
    reason: str = ""  # why the pair is incomparable; empty otherwise

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
            "reason": self.reason or None,
        }


@dataclass(frozen=True)
class Duplicate:
    """A key seen again in one file: its rows are paired with the other file's in file order."""

    side: str  # "base" or "new"
    key: Key
    line: int  # the repeated record
    first_line: int  # the first record with the same key

    def describe(self) -> str:
        op, workload, device = self.key
        return (f"line {self.line} repeats line {self.first_line} (op {op!r}, workload "
                f"{workload or 'none'}, device {device or 'none'!r}); paired in file order")


@dataclass(frozen=True)
class Comparison:
    changes: tuple[Change, ...]  # in STATUS_ORDER: regressions first, unmatched last
    threshold: float
    duplicates: tuple[Duplicate, ...] = ()

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
    base_rows, base_dups = _keyed(base, "base")
    new_rows, new_dups = _keyed(new, "new")
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
    return Comparison(tuple(changes), threshold, (*base_dups, *new_dups))


def _keyed(analysis: Analysis, side: str
           ) -> tuple[dict[tuple[str, str, str, int], Side], list[Duplicate]]:
    """Each row under (key, occurrence), and every repeat of a key already seen."""
    first: dict[Key, int] = {}
    seen: dict[Key, int] = {}
    out: dict[tuple[str, str, str, int], Side] = {}
    duplicates: list[Duplicate] = []
    cols, judged = analysis.columns, analysis.judged
    lines = cols.line if len(cols.line) == len(cols) else np.arange(1, len(cols) + 1)
    with np.errstate(invalid="ignore"):
        efficiency = np.where(np.isin(judged.verdict, _NO_EFFICIENCY), np.nan,
                              judged.efficiency.astype(float))
    for i in range(len(analysis)):
        key = row_key(analysis, i)
        line = int(lines[i])
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        if occurrence:
            duplicates.append(Duplicate(side, key, line, first[key]))
        else:
            first[key] = line
        op, workload, device = key
        out[op, workload, device, occurrence] = Side(
            index=i, line=line, time_s=float(cols.time_s[i]),
            time_p10_s=float(cols.time_p10_s[i]), time_p90_s=float(cols.time_p90_s[i]),
            efficiency=float(efficiency[i]), verdict=analysis.verdict_name(i))
    return out, duplicates


def incomparable_reason(base: Side, new: Side) -> str:
    """Why no ratio of the two times means anything; empty when both are positive numbers."""
    bad = [_bad_time(name, side.time_s) for name, side in (("base", base), ("new", new))
           if not (side.time_s > 0 and math.isfinite(side.time_s))]
    return "; ".join(bad) + ": no change in time can be measured" if bad else ""


def _bad_time(name: str, time_s: float) -> str:
    if not math.isfinite(time_s):
        return f"{name} time is not a finite number"
    return f"{name} time {fmt.seconds(time_s, significant=3)} is not positive"


def _classify(key: tuple[str, ...], base: Side, new: Side, threshold: float) -> Change:
    op, workload, device = key
    reason = incomparable_reason(base, new)
    if reason:
        return Change((op, workload, device), INCOMPARABLE, base, new, math.nan, math.nan,
                      None, reason)
    time_change = new.time_s / base.time_s - 1.0
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
    return Change((op, workload, device), status, base, new, time_change, efficiency_change,
                  beyond)


def _opt(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value
