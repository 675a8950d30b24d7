"""The terminal table of verdicts: worst rows first, verdicts coloured, numbers with units."""

from __future__ import annotations

import json
import math

import numpy as np
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..analysis import Analysis
from ..verdict import ANOMALY, AT_CEILING, BELOW, BLANK, IMPOSSIBLE, LATENCY_BOUND
from . import fmt

VERDICT_STYLE = {
    "impossible": "bold white on red", "anomaly": "bold magenta", "blank": "dim",
    "below": "yellow", "latency_bound": "cyan", "at_ceiling": "bold green",
}
# Verdicts whose efficiency is not a reading: the reasons carry the numbers instead.
NO_EFFICIENCY = frozenset({IMPOSSIBLE, LATENCY_BOUND, BLANK})
# Lower sorts first: the rows that need a person's eyes come first.
_SEVERITY = {IMPOSSIBLE: 0, ANOMALY: 1, BLANK: 2, BELOW: 3, LATENCY_BOUND: 4, AT_CEILING: 5}


def worst_first(analysis: Analysis) -> np.ndarray:
    severity = np.vectorize(_SEVERITY.get, otypes=[np.int64])(analysis.judged.verdict)
    efficiency = np.nan_to_num(analysis.judged.efficiency, nan=np.inf)
    return np.lexsort((efficiency, severity))


# (header, justify, lowest console width that still shows it): low-value columns drop first
_COLUMNS = (("op", "left", 0), ("workload", "left", 120), ("machine", "left", 100),
            ("verdict", "left", 0), ("eff.", "right", 0), ("time", "right", 0),
            ("SOL", "right", 0), ("bound", "left", 100), ("AI", "right", 90),
            ("why", "left", 0))
WHY_WIDTH = 72  # characters of the first reason; --json carries them all


def render_analysis(analysis: Analysis, console: Console, limit: int | None = 50) -> None:
    """Print the verdict table; columns of least value drop out on narrow consoles."""
    order = worst_first(analysis)
    shown = order if limit is None else order[:limit]
    width = console.width
    several = len({str(m) for m in analysis.machine_name if m}) > 1
    keep = [c for c in _COLUMNS if width >= c[2] and (c[0] != "machine" or several)]
    rows = [_cells(analysis, int(i)) for i in shown]
    fixed = {c[0]: max([len(c[0])] + [len(Text.from_markup(r[c[0]]).plain) for r in rows])
             for c in keep if c[0] != "why"}
    if "workload" in fixed:
        fixed["workload"] = min(fixed["workload"], 28)
    # every column keeps its content's width; only `why` gives way, cut with "…"
    why_width = max(12, min(WHY_WIDTH, width - sum(w + 3 for w in fixed.values()) - 2))
    table = Table(title=_title(analysis), title_justify="left", show_lines=False,
                  pad_edge=False, box=box.SIMPLE_HEAD)
    for col, justify, _ in keep:
        size = fixed.get(col, why_width)
        table.add_column(col, justify=justify,  # type: ignore[arg-type]
                         no_wrap=True, overflow="ellipsis", min_width=size, max_width=size)
    for cells in rows:
        table.add_row(*(cells[c[0]] for c in keep))
    console.print(table)
    if limit is not None and len(order) > limit:
        console.print(f"[dim]… {len(order) - limit} more rows (use --limit 0 for all, "
                      "--json or --csv for machines)[/]")


def _cells(analysis: Analysis, i: int) -> dict[str, str]:
    cols, priced, judged = analysis.columns, analysis.priced, analysis.judged
    verdict = analysis.verdict_name(i)
    code = judged.verdict[i]
    reasons = analysis.reasons(i)
    bound = "" if code == BLANK else (
        "memory" if priced.bound_memory[i] else str(priced.binding_unit[i]))
    why = reasons[0] if reasons else ""
    return {
        "op": str(cols.op[i]), "workload": _workload(analysis, i),
        "machine": str(analysis.machine_name[i] or "—"),
        "verdict": f"[{VERDICT_STYLE[verdict]}]{verdict}[/]",
        "eff.": "—" if code in NO_EFFICIENCY else fmt.percent(judged.efficiency[i]),
        "time": fmt.seconds(float(cols.time_s[i]), significant=3),
        "SOL": fmt.seconds(float(priced.sol_time_s[i]), significant=3), "bound": bound,
        "AI": intensity(float(priced.intensity_flops_per_byte[i])),
        "why": escape(why if len(why) <= WHY_WIDTH else why[:WHY_WIDTH - 1] + "…"),
    }


def intensity(value: float) -> str:
    """FLOP/byte with sensible precision: 0.25, 2.98, 12.7, 5461."""
    if not math.isfinite(value):
        return "—"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _title(analysis: Analysis) -> str:
    counts = ", ".join(f"{n} {name}" for name, n in analysis.counts().items() if n)
    return f"{len(analysis)} records: {counts}"


def _workload(analysis: Analysis, i: int) -> str:
    rows = analysis.columns.rows
    if rows is None or "workload" not in rows[i]:
        return ""
    workload = rows[i]["workload"]
    text = workload if isinstance(workload, str) else json.dumps(workload, separators=(",", ":"))
    return text if len(text) <= 40 else text[:39] + "…"
