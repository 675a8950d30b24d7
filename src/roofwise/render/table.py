"""The terminal table of verdicts: worst rows first, verdicts coloured, numbers with units."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from roofwise.base import fmt
from roofwise.base.text import for_terminal
from roofwise.explain.reason_text import bound_label, efficiency_band_text
from roofwise.output.analysis import Analysis
from roofwise.pricing.core import pipes_near_binding
from roofwise.pricing.reasons import Reason
from roofwise.render.layout import GAP, Column, fit_widths, for_rich
from roofwise.verdicts.mismatch import mismatch_summary
from roofwise.verdicts.rules import BLANK, NO_EFFICIENCY

VERDICT_STYLE = {
    "impossible": "bold white on red", "anomaly": "bold magenta", "blank": "dim",
    "below": "yellow", "latency_bound": "cyan", "at_ceiling": "bold green",
    "cache_resident": "blue",
}


# The main line of each row: numbers and names, never cut; low-value columns drop first.
def _columns(several_machines: bool) -> list[Column]:
    cols = [Column("verdict"), Column("op"), Column("eff.", "right"), Column("time", "right"),
            Column("SOL", "right"), Column("bound", drop=2), Column("AI", "right", drop=1)]
    if several_machines:
        cols.insert(2, Column("machine", drop=3))
    return cols


INDENT = "   "  # the workload and reasons sit under their row, the full width of the console
LEGEND = ("eff. = SOL / time; SOL = the speed-of-light time on the profile; AI in FLOP/byte; "
          "under each row its workload and why")


def render_analysis(analysis: Analysis, console: Console, limit: int | None = 50,
                    counts: Mapping[str, int] | None = None) -> frozenset[str]:
    """Print the verdicts, worst first, designed for 80 columns: one line of numbers per row
    (never cut; the least useful columns drop on narrow consoles), then the row's workload
    (key=value, with its input line where two rows would read alike) and every reason,
    wrapped at word boundaries across the whole width. Returns the reasons printed, so that
    what follows (lint findings) need not print them again."""
    order = analysis.worst_first()
    shown = order if limit is None else order[:limit]
    width = console.width
    several = len({str(m) for m in analysis.machine_name[shown] if m}) > 1
    columns = _columns(several)
    # every cell, label and reason holds text from the file: escaped before widths are fitted
    rows = [{header: for_terminal(cell) for header, cell in _cells(analysis, int(i)).items()}
            for i in shown]
    labels = [for_terminal(label) for label in _workload_labels(analysis, shown)]
    keep, sizes = fit_widths(columns, [[r[c.header] for c in columns] for r in rows], width)
    console.print(for_rich(_title(analysis, counts)), style="bold")
    if counts is not None and sum(counts.values()) > len(analysis):
        console.print(f"(read in batches: every record counted, the worst {len(shown):,} "
                      "shown)", style="dim")
    summary = mismatch_summary(analysis)
    if summary:
        console.print(for_rich(summary), style="yellow")
    kept = [columns[k] for k in keep]
    console.print(_line([c.header for c in kept], kept, [sizes[k] for k in keep]), style="bold")
    console.print("─" * min(width, sum(sizes[k] for k in keep) + GAP * (len(keep) - 1)))
    body = max(20, width - len(INDENT))
    printed: set[str] = set()
    for cells, label, i in zip(rows, labels, shown, strict=True):
        line = _line([cells[c.header] for c in kept], kept, [sizes[k] for k in keep])
        console.print(_styled(line, cells["verdict"]))
        if label:
            for part in textwrap.wrap(label, body, break_long_words=True,
                                      break_on_hyphens=False):
                console.print(INDENT + escape(part), style="dim", highlight=False)
        for reason in analysis.reasons(int(i)):
            printed.add(reason)
            for part in textwrap.wrap(for_terminal(reason), body, break_long_words=True,
                                      break_on_hyphens=False):
                console.print(INDENT + escape(part), highlight=False)
    left_out = [c.header for k, c in enumerate(columns) if k not in keep]
    if left_out:
        console.print(f"[dim](left out at this width: {', '.join(left_out)}; --json has every "
                      "field)[/]")
    console.print(f"[dim]{escape(LEGEND)}[/]")
    if limit is not None and len(order) > limit:
        console.print(f"[dim]{len(order) - limit} more rows (use --limit 0 for all, "
                      "--json or --csv for machines)[/]")
    return frozenset(printed)


def _line(cells: list[str], columns: list[Column], sizes: list[int]) -> str:
    parts = [c.rjust(n) if col.justify == "right" else c.ljust(n)
             for c, col, n in zip(cells, columns, sizes, strict=True)]
    return (" " * GAP).join(parts).rstrip()


def _styled(line: str, verdict: str) -> Text:
    text = Text(line)
    start = line.find(verdict)
    if start >= 0:
        text.stylize(VERDICT_STYLE[verdict], start, start + len(verdict))
    return text


def _workload_labels(analysis: Analysis, shown: np.ndarray) -> list[str]:
    """Each shown row's workload as key=value; where two rows would still read alike (same
    op, workload and verdict), the input line tells them apart."""
    labels = [fmt.workload(_workload(analysis, int(i))) for i in shown]
    keys = [(str(analysis.columns.op[int(i)]), label) for i, label in zip(shown, labels,
                                                                          strict=True)]
    seen: dict[tuple[str, str], int] = {}
    for key in keys:
        seen[key] = seen.get(key, 0) + 1
    line = analysis.columns.line
    out = []
    for i, key, label in zip(shown, keys, labels, strict=True):
        if seen[key] > 1 and len(line) > int(i):
            label = f"{label}  (line {int(line[int(i)])})" if label else f"line {int(line[int(i)])}"
        out.append(label)
    return out


def _cells(analysis: Analysis, i: int) -> dict[str, str]:
    cols, priced, judged = analysis.columns, analysis.priced, analysis.judged
    verdict = analysis.verdict_name(i)
    code = judged.verdict[i]
    bound = "" if code == BLANK else bound_label(
        bool(priced.bound_memory[i]), pipes_near_binding(priced, i),
        str(priced.binding_unit[i]), analysis.machines[analysis.machine_name[i]].dram.name)
    efficiency = "—" if code in NO_EFFICIENCY else fmt.percent(judged.efficiency[i])
    if code not in NO_EFFICIENCY and judged.serial_efficiency is not None and (
            int(priced.flags[i]) & Reason.SECOND_PIPE):
        efficiency = efficiency_band_text(judged.efficiency[i], judged.serial_efficiency[i])
    return {
        "op": str(cols.op[i]), "machine": str(analysis.machine_name[i] or "—"),
        "verdict": verdict,
        "eff.": efficiency,
        "time": fmt.seconds(float(cols.time_s[i]), significant=3),
        "SOL": fmt.seconds(float(priced.sol_time_s[i]), significant=3), "bound": bound,
        "AI": fmt.intensity(float(priced.intensity_flops_per_byte[i])),
    }


def _title(analysis: Analysis, counts: Mapping[str, int] | None = None) -> str:
    """`N records: n verdict, ...`; `counts` are every row's when the table holds a part."""
    found = analysis.counts() if counts is None else counts
    listed = ", ".join(f"{n} {name}" for name, n in found.items() if n)
    return f"{sum(found.values())} records: {listed}"


def _workload(analysis: Analysis, i: int) -> object:
    return analysis.columns.field_values("workload", np.array([i]))[0]
