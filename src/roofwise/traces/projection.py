"""A measured trace lined up against a projection (`roofwise model --records-out`), op by op.

Rows match on op name and input shapes (both sides write shapes as `[m, k] bf16, ...`); the
fused kernels a projection prices as one (attention, RMSNorm, MoE experts) match every traced
op of that kind whatever its aten name (flash, efficient, cuDNN attention...). A trace may hold
several steps, so rows compare time per call: measured mean over predicted SOL.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofwise.base.errors import InputError
from roofwise.traces.analysis import TraceAnalysis, shapes_text

# projection op -> words that mark the traced ops of the same fused kind
FUSED_KINDS = {"attention (fused)": ("attention",), "rmsnorm (fused)": ("rms_norm", "rmsnorm"),
               "moe experts (fused)": ("grouped_mm", "moe", "expert")}


@dataclass(frozen=True)
class LinedUp:
    op: str
    shapes: str
    predicted_calls: int
    predicted_per_call_s: float | None
    measured_calls: int
    measured_time_s: float

    @property
    def measured_per_call_s(self) -> float | None:
        return self.measured_time_s / self.measured_calls if self.measured_calls else None

    @property
    def ratio(self) -> float | None:
        """Measured over predicted, per call: 1.0 is the speed of light."""
        if not self.predicted_per_call_s or self.measured_per_call_s is None:
            return None
        return self.measured_per_call_s / self.predicted_per_call_s

    def as_json(self) -> dict[str, Any]:
        return {"op": self.op, "shapes": self.shapes, "predicted_calls": self.predicted_calls,
                "predicted_per_call_s": self.predicted_per_call_s,
                "measured_calls": self.measured_calls,
                "measured_per_call_s": self.measured_per_call_s,
                "measured_over_predicted": self.ratio}


def read_projection(path: str | Path) -> list[dict[str, Any]]:
    """The records `roofwise model --records-out` wrote (JSONL)."""
    target = Path(path)
    if not target.is_file():
        raise InputError(str(target), "no such file; expected a projection written by "
                                      "`roofwise model --records-out`")
    raw = target.read_bytes()
    if raw.startswith(b"PAR1"):
        raise InputError(str(target), "a Parquet file; expected the JSONL projection "
                                      "(`roofwise model --records-out PROJECTION.jsonl`)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(str(target), f"not UTF-8 text (byte {exc.start:,}); expected the "
                                      "JSONL `roofwise model --records-out` writes") from None
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(_projected(json.loads(line)))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, RecursionError,
                OverflowError):
            raise InputError(f"{target}:{number}", "expected a projected op (op, workload "
                                                   "with shapes and a count of 1 to "
                                                   f"{MAX_COUNT:,}, predicted_time_s a finite "
                                                   "number >= 0 or null)") from None
    if not rows:
        raise InputError(str(target), "no projected ops")
    return rows


MAX_COUNT = 1 << 40  # calls of one op per step: more than any model runs (a bound on the sums)


def _projected(row: Any) -> dict[str, Any]:
    """One projected op, its fields checked (TypeError / ValueError when one is wrong)."""
    workload = row["workload"]
    count = workload["count"]
    if type(count) is not int or not 1 <= count <= MAX_COUNT:
        raise ValueError("count")
    time = row.get("predicted_time_s")
    if time is not None and (isinstance(time, bool) or not isinstance(time, (int, float))
                             or not math.isfinite(time) or time < 0):
        raise ValueError("predicted_time_s")
    if not isinstance(row["op"], str) or not isinstance(workload["shapes"], str):
        raise TypeError("op")
    return {"op": row["op"], "shapes": workload["shapes"], "count": count,
            "predicted_time_s": None if time is None else float(time)}


def line_up(result: TraceAnalysis, projected: list[dict[str, Any]]) -> list[LinedUp]:
    """Predicted vs measured per (op, shapes); fused kinds as one row each."""
    predicted: dict[tuple[str, str], list[float]] = {}  # key -> [calls, summed SOL]
    for row in projected:
        fused = row["op"] in FUSED_KINDS
        key = (row["op"], "(any shapes)" if fused else row["shapes"])
        entry = predicted.setdefault(key, [0, 0.0])
        entry[0] += row["count"]
        entry[1] += row["count"] * (row["predicted_time_s"] or 0.0)
    measured: dict[tuple[str, str], list[float]] = {}
    for op in result.ops:
        kind = next((name for name, words in FUSED_KINDS.items()
                     if any(w in op.op.lower() for w in words)), None)
        key = (kind, "(any shapes)") if kind else (op.op, shapes_text(op))
        entry = measured.setdefault(key, [0, 0.0])
        entry[0] += 1
        entry[1] += op.time_s
    found = []
    for key in [*predicted, *(k for k in measured if k not in predicted)]:
        calls, sol = predicted.get(key, [0, 0.0])
        m_calls, m_time = measured.get(key, [0, 0.0])
        found.append(LinedUp(key[0], key[1], int(calls), sol / calls if calls else None,
                             int(m_calls), m_time))
    return sorted(found, key=lambda r: (r.measured_calls == 0 or r.predicted_calls == 0,
                                        -r.measured_time_s))
