"""The terminal table of verdicts: worst rows first, verdicts coloured, numbers with units."""

from __future__ import annotations

import json
import textwrap

import numpy as np
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..analysis import Analysis
from ..pricing import pipes_near_binding
from ..reason_text import bound_label, efficiency_band_text
from ..reasons import Reason
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
# The reason is the most useful column: these give way to it, in this order, until it has
# WHY_MIN_WIDTH characters (or all of its text).
_GIVE_WAY = ("workload", "machine", "bound", "AI")
WORKLOAD_WIDTH = 20  # characters of the workload; --json carries it whole
WHY_MIN_WIDTH = 48
WRAP_FROM_WIDTH = 100  # on consoles this wide a reason wraps instead of being cut
WHY_MAX_LINES = 4  # lines a wrapped reason may take; beyond, it is cut with "…"
WHY_WIDTH = 72  # characters of a reason on one line below WRAP_FROM_WIDTH


def render_analysis(analysis: Analysis, console: Console, limit: int | None = 50) -> None:
    """Print the verdict table; the reason keeps its room, low-value columns give way first."""
    order = worst_first(analysis)
    shown = order if limit is None else order[:limit]
    width = console.width
    several = len({str(m) for m in analysis.machine_name if m}) > 1
    keep = [c for c in _COLUMNS if width >= c[2] and (c[0] != "machine" or several)]
    rows = [_cells(analysis, int(i)) for i in shown]
    fixed = {c[0]: max([len(c[0])] + [_plain_len(c[0], r[c[0]]) for r in rows])
             for c in keep if c[0] != "why"}
    if "workload" in fixed:
        fixed["workload"] = min(fixed["workload"], WORKLOAD_WIDTH)
    needed = max([len("why")] + [len(r["why"]) for r in rows])
    for name in _GIVE_WAY:
        if _why_room(width, fixed) >= min(needed, WHY_MIN_WIDTH):
            break
        fixed.pop(name, None)
    keep = [c for c in keep if c[0] == "why" or c[0] in fixed]
    wrap = width >= WRAP_FROM_WIDTH
    room = _why_room(width, fixed)
    why_width = max(12, min(needed, room, room if wrap else WHY_WIDTH))
    wrapped = []
    for cells in rows:
        lines = reason_lines(cells["why"], why_width, WHY_MAX_LINES if wrap else 1)
        wrapped.append(len(lines) > 1)
        cells["why"] = "\n".join(lines)
        cells["workload"] = _cut(cells["workload"], WORKLOAD_WIDTH)
    table = Table(title=_title(analysis), title_justify="left", show_lines=False,
                  pad_edge=False, box=box.SIMPLE_HEAD)
    for col, justify, _ in keep:
        size = fixed.get(col, why_width)
        table.add_column(col, justify=justify,  # type: ignore[arg-type]
                         no_wrap=True, overflow="ellipsis", min_width=size, max_width=size)
    for k, cells in enumerate(rows):  # every cell but the verdict is plain text: escaped
        # a blank line sets a wrapped row apart from its neighbours; one-line rows stay packed
        apart = wrapped[k] or (k + 1 < len(rows) and wrapped[k + 1])
        table.add_row(*(cells[c] if c == "verdict" else escape(cells[c]) for c, _, _ in keep),
                      end_section=apart)
    console.print(table)
    if limit is not None and len(order) > limit:
        console.print(f"[dim]… {len(order) - limit} more rows (use --limit 0 for all, "
                      "--json or --csv for machines)[/]")


def _plain_len(column: str, cell: str) -> int:
    return len(Text.from_markup(cell).plain) if column == "verdict" else len(cell)


def _why_room(width: int, fixed: dict[str, int]) -> int:
    """Characters left for `why` once the other columns (and their gaps) are laid out."""
    return width - sum(w + 3 for w in fixed.values()) - 2


def reason_lines(text: str, width: int, max_lines: int) -> list[str]:
    """`text` wrapped at word boundaries into at most `max_lines` lines of `width`; what does
    not fit is cut with "…" (a word longer than a line is cut too, never spilled)."""
    lines = textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]
    if len(lines) <= max_lines:
        return lines
    last = " ".join([lines[max_lines - 1], *lines[max_lines:]])
    return [*lines[:max_lines - 1], _cut(last, width)]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _cells(analysis: Analysis, i: int) -> dict[str, str]:
    cols, priced, judged = analysis.columns, analysis.priced, analysis.judged
    verdict = analysis.verdict_name(i)
    code = judged.verdict[i]
    reasons = analysis.reasons(i)
    bound = "" if code == BLANK else bound_label(
        bool(priced.bound_memory[i]), pipes_near_binding(priced, i), str(priced.binding_unit[i]))
    efficiency = "—" if code in NO_EFFICIENCY else fmt.percent(judged.efficiency[i])
    if code not in NO_EFFICIENCY and judged.serial_efficiency is not None and (
            int(priced.flags[i]) & Reason.SECOND_PIPE):
        efficiency = efficiency_band_text(judged.efficiency[i], judged.serial_efficiency[i])
    why = reasons[0] if reasons else ""
    return {
        "op": str(cols.op[i]), "workload": _workload(analysis, i),
        "machine": str(analysis.machine_name[i] or "—"),
        "verdict": f"[{VERDICT_STYLE[verdict]}]{verdict}[/]",
        "eff.": efficiency,
        "time": fmt.seconds(float(cols.time_s[i]), significant=3),
        "SOL": fmt.seconds(float(priced.sol_time_s[i]), significant=3), "bound": bound,
        "AI": fmt.intensity(float(priced.intensity_flops_per_byte[i])),
        "why": why,  # wrapped or cut once the width is known
    }


def _title(analysis: Analysis) -> str:
    counts = ", ".join(f"{n} {name}" for name, n in analysis.counts().items() if n)
    return f"{len(analysis)} records: {counts}"


def _workload(analysis: Analysis, i: int) -> str:
    rows = analysis.columns.rows
    if rows is None or "workload" not in rows[i]:
        return ""
    workload = rows[i]["workload"]
    text = workload if isinstance(workload, str) else json.dumps(workload, separators=(",", ":"))
    return text
