"""The terminal table of verdicts: worst rows first, verdicts coloured, numbers with units."""

from __future__ import annotations

import json

import numpy as np
from rich.console import Console
from rich.table import Table

from ..analysis import Analysis
from ..verdict import ANOMALY, AT_CEILING, BELOW, BLANK, IMPOSSIBLE, LATENCY_BOUND
from . import fmt

VERDICT_STYLE = {
    "impossible": "bold white on red", "anomaly": "bold magenta", "blank": "dim",
    "below": "yellow", "latency_bound": "cyan", "at_ceiling": "bold green",
}
# Lower sorts first: the rows that need a person's eyes come first.
_SEVERITY = {IMPOSSIBLE: 0, ANOMALY: 1, BLANK: 2, BELOW: 3, LATENCY_BOUND: 4, AT_CEILING: 5}


def worst_first(analysis: Analysis) -> np.ndarray:
    severity = np.vectorize(_SEVERITY.get, otypes=[np.int64])(analysis.judged.verdict)
    efficiency = np.nan_to_num(analysis.judged.efficiency, nan=np.inf)
    return np.lexsort((efficiency, severity))


def render_analysis(analysis: Analysis, console: Console, limit: int | None = 50) -> None:
    order = worst_first(analysis)
    shown = order if limit is None else order[:limit]
    table = Table(title=_title(analysis), title_justify="left", show_lines=False)
    for col, justify in (("op", "left"), ("workload", "left"), ("machine", "left"),
                         ("verdict", "left"), ("eff.", "right"), ("time", "right"),
                         ("SOL", "right"), ("bound", "left"), ("AI", "right"),
                         ("why", "left")):
        table.add_column(col, justify=justify,  # type: ignore[arg-type]
                         overflow="fold", max_width=60 if col == "why" else None)
    cols, priced, judged = analysis.columns, analysis.priced, analysis.judged
    for i in shown:
        verdict = analysis.verdict_name(int(i))
        blank_or_latency = judged.verdict[i] in (BLANK, LATENCY_BOUND)
        reasons = analysis.reasons(int(i))
        bound = "" if judged.verdict[i] == BLANK else (
            "memory" if priced.bound_memory[i] else f"compute ({priced.binding_unit[i]})")
        table.add_row(
            str(cols.op[i]), _workload(analysis, int(i)), str(analysis.machine_name[i] or "—"),
            f"[{VERDICT_STYLE[verdict]}]{verdict}[/]",
            "—" if blank_or_latency else fmt.percent(judged.efficiency[i]),
            fmt.seconds(cols.time_s[i]), fmt.seconds(priced.sol_time_s[i]), bound,
            f"{priced.intensity_flops_per_byte[i]:.2f}", reasons[0] if reasons else "")
    console.print(table)
    if limit is not None and len(order) > limit:
        console.print(f"[dim]… {len(order) - limit} more rows (use --limit 0 for all, "
                      "--json or --csv for machines)[/]")


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
