"""`roofwise analyze TRACE.json[.gz]` and `roofwise report TRACE`: a profiler trace's ops,
grouped by op and shapes, judged on the roofline; `--records-out` keeps the derived records."""

from __future__ import annotations

import html
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..errors import InputError
from ..machine import Machine
from ..recordio import atomic_writer, format_of, write_records
from ..report import fmt
from ..report.row_ledgers import Reference
from ..traces.analysis import Group, TraceAnalysis, analyze_trace, groups, summary_json
from ..traces.projection import LinedUp, line_up, read_projection
from .common import all_machines, console, finite, note

RECORD_OUT_FORMATS = ("jsonl", "parquet")


def check_records_out(path: str | None) -> None:
    """Fail before reading a large trace when the output could not be written."""
    if path is not None and format_of(path) not in RECORD_OUT_FORMATS:
        raise InputError(path, "expected a records file ending in .jsonl or .parquet")


@contextmanager
def _reading(path: str) -> Iterator[tuple[Any, Any]]:
    """A progress bar over the trace file's bytes, on stderr, only when it is a terminal."""
    err = console(err=True)
    with Progress(TextColumn("reading {task.description}"), BarColumn(), DownloadColumn(),
                  TimeElapsedColumn(), console=err, transient=True,
                  disable=not err.is_terminal) as progress:
        task = progress.add_task(Path(path).name, total=None)
        yield (lambda done: progress.update(task, completed=done),
               lambda size: progress.update(task, total=size))


def load_trace(path: str, machine: Machine | None, regime: str | None,
               mix: str | None) -> TraceAnalysis:
    with _reading(path) as (on_bytes, on_size):
        return analyze_trace(path, all_machines(), machine, regime, mix,
                             on_bytes=on_bytes, on_size=on_size)


def analyze_trace_command(path: str, machine: Machine | None, regime: str | None,
                          mix: str | None, as_json: bool, limit: int | None,
                          records_out: str | None, projection_path: str | None = None) -> None:
    check_records_out(records_out)
    projected = read_projection(projection_path) if projection_path is not None else None
    result = load_trace(path, machine, regime, mix)
    if records_out is not None:
        write_trace_records(result, records_out)
    if projected is not None:
        render_line_up(line_up(result, projected), as_json, console(), limit)
        return
    found = groups(result)
    if as_json:
        for group in found:
            sys.stdout.write(json.dumps(finite(group.as_json())) + "\n")
        sys.stdout.write(json.dumps(finite(summary_json(result))) + "\n")
        return
    render_groups(result, found, console(), limit)


def write_trace_records(result: TraceAnalysis, path: str) -> None:
    written = write_records(path, result.records)
    skipped = len(result.ops) - written
    note(f"roofwise: wrote {written} record(s) to {path}"
         + (f"; {skipped} unpriced op(s) are not records (their time is in the summary)"
            if skipped else ""))


def render_groups(result: TraceAnalysis, found: list[Group], out: Console,
                  limit: int | None) -> None:
    shown = found if limit is None else found[:limit]
    table = Table(box=box.SIMPLE_HEAD, title=f"{result.path}: ops by shape, most time lost first",
                  title_justify="left")
    rows = [(_cut(g.op, 36), _cut(g.shapes, 40), str(g.count), fmt.seconds(g.time_s),
             fmt.seconds(g.sol_time_s), fmt.seconds(g.time_lost_s), fmt.percent(g.share),
             fmt.percent(g.efficiency), _verdicts(g), g.reason) for g in shown]
    for k, (header, justify) in enumerate((
            ("op", "left"), ("shapes", "left"), ("n", "right"), ("time", "right"),
            ("SOL", "right"), ("lost", "right"), ("share", "right"), ("eff.", "right"),
            ("verdicts", "left"), ("note", "left"))):
        widest = max([len(header)] + [len(r[k]) for r in rows])
        # shapes and the note give way to the numbers on a narrow console
        table.add_column(header, justify=justify,  # type: ignore[arg-type]
                         no_wrap=True, overflow="ellipsis",
                         min_width=None if header in ("shapes", "note") else widest,
                         max_width=36 if header == "note" else None)
    for row in rows:
        table.add_row(*row)
    out.print(table)
    if len(shown) < len(found):
        out.print(f"{len(found) - len(shown)} more group(s); --limit 0 shows all")
    for line in summary_lines(result):
        out.print(line)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _verdicts(group: Group) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(group.verdicts.items(),
                                                         key=lambda kv: -kv[1]))


def summary_lines(result: TraceAnalysis) -> list[str]:
    s = result.summary
    kernel = s.kernel_time_s

    def part(value: float) -> str:
        return f"{fmt.seconds(value)} ({fmt.percent(value / kernel) if kernel else '-'})"

    devices = ", ".join(s.devices) or "none named (use --machine)"
    machines = ", ".join(sorted(result.analysis.machines)) if result.analysis else "-"
    return [
        f"kernel time {fmt.seconds(kernel)} in {s.kernels} kernels from {s.ops} ops "
        f"({s.priced_ops} priced); device(s): {devices}; profile(s): {machines}",
        f"  priced {part(s.priced_time_s)}, communication {part(s.communication_time_s)}, "
        f"unpriced {part(s.unpriced_time_s)} (of which launched by no traced op "
        f"{fmt.seconds(s.unattributed_time_s)})",
        f"  outside kernels: memcpy {fmt.seconds(s.memcpy_time_s)}, "
        f"memset {fmt.seconds(s.memset_time_s)}",
    ]


def groups_html(result: TraceAnalysis, limit: int = 200) -> str:
    """The grouped view as an HTML section, for `roofwise report` on a trace."""
    e = html.escape
    rows = []
    for g in groups(result)[:limit]:
        cells = (g.op, g.shapes, str(g.count), fmt.seconds(g.time_s), fmt.seconds(g.sol_time_s),
                 fmt.seconds(g.time_lost_s), fmt.percent(g.share), fmt.percent(g.efficiency),
                 _verdicts(g), g.reason)
        rows.append("<tr>" + "".join(f"<td>{e(c)}</td>" for c in cells) + "</tr>")
    headers = ("op", "shapes", "n", "time", "SOL", "lost", "share", "eff.", "verdicts", "note")
    lines = "".join(f"<p>{e(line.strip())}</p>" for line in summary_lines(result))
    return ("<h2>Trace: ops by shape, most time lost first</h2>" + lines +
            "<table><thead><tr>" + "".join(f"<th>{h}</th>" for h in headers) +
            "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def write_trace_report(path: str, machine: Machine | None, regime: str | None, mix: str | None,
                       output: str, title: str, references: Sequence[Reference]) -> None:
    """The records report of the trace's priced ops, with the grouped view and summary first."""
    from ..report.html import report_html

    result = load_trace(path, machine, regime, mix)
    if result.analysis is None:
        raise InputError(path, "no op in the trace could be priced; nothing to report "
                               f"({summary_lines(result)[0]})")
    text = report_html(result.analysis, title, path, references)
    marker = "<h2>Roofline</h2>"
    text = text.replace(marker, groups_html(result) + marker, 1)
    with atomic_writer(output, "w") as handle:
        handle.write(text)


def render_line_up(rows: list[LinedUp], as_json: bool, out: Console,
                   limit: int | None) -> None:
    """Predicted vs measured per op and shapes; rows on one side only come last."""
    if as_json:
        for row in rows:
            sys.stdout.write(json.dumps(finite(row.as_json())) + "\n")
        return
    table = Table(box=box.SIMPLE_HEAD, title="measured trace vs projection, per call",
                  title_justify="left")
    for header in ("op", "shapes", "projected n", "measured n", "predicted (SOL)",
                   "measured", "measured/predicted"):
        table.add_column(header, justify="left" if header in ("op", "shapes") else "right",
                         no_wrap=True, overflow="ellipsis")
    shown = rows if limit is None else rows[:limit]
    for r in shown:
        table.add_row(_cut(r.op, 40), _cut(r.shapes, 44), str(r.predicted_calls),
                      str(r.measured_calls), fmt.seconds(r.predicted_per_call_s),
                      fmt.seconds(r.measured_per_call_s),
                      "-" if r.ratio is None else f"{r.ratio:.2f}x")
    out.print(table)
    if len(shown) < len(rows):
        out.print(f"{len(rows) - len(shown)} more row(s); --limit 0 shows all")
