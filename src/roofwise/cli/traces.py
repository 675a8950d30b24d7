"""`roofwise analyze TRACE.json[.gz]` and `roofwise report TRACE`: a profiler trace's ops,
grouped by op and shapes, judged on the roofline; `--records-out` keeps the derived records."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from roofwise.base import fmt
from roofwise.base.errors import InputError
from roofwise.cli.common import all_machines, console, finite, note, print_hanging
from roofwise.cli.machines import print_fitted
from roofwise.profiles.machine import Machine
from roofwise.records.write import atomic_writer, format_of, write_records
from roofwise.render.layout import Column, fit_table
from roofwise.render.row_ledgers import Reference
from roofwise.traces.analysis import (
    Group,
    TraceAnalysis,
    analyze_trace,
    groups,
    skipped_text,
    summary_json,
    summary_lines,
    verdicts_text,
)
from roofwise.traces.projection import LinedUp, line_up, read_projection
from roofwise.traces.ranks import RankSet, read_ranks, trace_paths

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
        result = analyze_trace(path, all_machines(), machine, regime, mix,
                               on_bytes=on_bytes, on_size=on_size)
    if result.summary.skipped:
        note(f"roofwise: note: {path}: {result.summary.skipped_events:,} malformed event(s) "
             f"skipped, not priced nor counted ({skipped_text(result.summary)})")
    return result


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


# designed for 80 columns: op, time lost and efficiency always; shapes (which tell the groups
# of one op apart) and verdicts wrap; the time and SOL behind "lost" drop first, then the note,
# which is then printed beneath, once per distinct note
GROUP_COLUMNS = (Column("op"), Column("shapes", drop=1),
                 Column("n", "right", drop=4), Column("time", "right", drop=6),
                 Column("SOL", "right", drop=7), Column("lost", "right"),
                 Column("share", "right", drop=3), Column("eff.", "right"),
                 Column("verdicts", wrap=True, min_width=14, drop=2),
                 Column("note", wrap=True, min_width=24, drop=5))
_IN_BRACKETS = re.compile(r",\s+(?=[^\[\]]*\])")


def compact_shapes(shapes: str, one_line: int = 24) -> str:
    """`[4, 4096] fp32, [1] fp64` as `[4,4096] fp32, [1] fp64`, and beyond `one_line`
    characters one tensor a line: a shape is never split inside its brackets or from its
    dtype."""
    text = _IN_BRACKETS.sub(",", shapes)
    return text if len(text) <= one_line else text.replace(", ", ",\n")


def render_groups(result: TraceAnalysis, found: list[Group], out: Console,
                  limit: int | None) -> None:
    shown = found if limit is None else found[:limit]
    rows: list[list[str | Text]] = [
        [g.op, compact_shapes(g.shapes), str(g.count), fmt.seconds(g.time_s),
         fmt.seconds(g.sol_time_s),
         fmt.seconds(g.time_lost_s), fmt.percent(g.share), fmt.percent(g.efficiency),
         verdicts_text(g), g.reason] for g in shown]
    print_hanging(out, f"{result.path}: ops by shape, most time lost first")
    fitted = fit_table(GROUP_COLUMNS, rows, out.width)
    print_fitted(out, fitted, quiet={"note"})
    if "note" in fitted.dropped:
        notes: dict[str, list[str]] = {}
        for g in shown:
            if g.reason:
                notes.setdefault(g.reason, []).append(g.op)
        for reason, ops in notes.items():
            names = ", ".join(dict.fromkeys(ops))
            many = f" ({len(ops)} groups)" if len(ops) > 1 else ""
            print_hanging(out, f"note, {names}{many}: {reason}")
    if len(shown) < len(found):
        out.print(f"{len(found) - len(shown)} more group(s); --limit 0 shows all")
    for line in summary_lines(result):
        print_hanging(out, line.strip(), indent="  ")


def write_trace_report(path: str, machine: Machine | None, regime: str | None, mix: str | None,
                       output: str, title: str, references: Sequence[Reference]) -> None:
    """The records report of the trace's priced ops, with the grouped view and summary first."""
    from roofwise.render.html import trace_report_html  # deferred: matplotlib

    result = load_trace(path, machine, regime, mix)
    text = trace_report_html(result, title, path, references)
    with atomic_writer(output, "w") as handle:
        handle.write(text)


LINE_UP_COLUMNS = (Column("op"), Column("shapes"),
                   Column("projected\nn", "right", drop=2), Column("measured\nn", "right", drop=1),
                   Column("predicted\n(SOL)", "right"), Column("\nmeasured", "right"),
                   Column("measured/\npredicted", "right"))


def render_line_up(rows: list[LinedUp], as_json: bool, out: Console,
                   limit: int | None) -> None:
    """Predicted vs measured per op and shapes; rows on one side only come last."""
    if as_json:
        for row in rows:
            sys.stdout.write(json.dumps(finite(row.as_json())) + "\n")
        return
    shown = rows if limit is None else rows[:limit]
    cells: list[list[str | Text]] = [
        [r.op, compact_shapes(r.shapes), str(r.predicted_calls), str(r.measured_calls),
         fmt.seconds(r.predicted_per_call_s), fmt.seconds(r.measured_per_call_s),
         "-" if r.ratio is None else f"{r.ratio:.2f}x"] for r in shown]
    print_fitted(out, fit_table(LINE_UP_COLUMNS, cells, out.width,
                                "measured trace vs projection, per call"))
    if len(shown) < len(rows):
        out.print(f"{len(rows) - len(shown)} more row(s); --limit 0 shows all")


def analyze_ranks_command(paths: Sequence[str], machine: Machine | None, regime: str | None,
                          mix: str | None, as_json: bool, limit: int | None) -> None:
    """Several traces (or folders of them), one per rank: the per-rank view."""
    found = read_ranks(trace_paths(paths), lambda p: load_trace(p, machine, regime, mix))
    if as_json:
        for rank in found.ranks:
            sys.stdout.write(json.dumps(finite(rank.as_json())) + "\n")
        for spread in found.spreads:
            sys.stdout.write(json.dumps(finite(spread.as_json())) + "\n")
        sys.stdout.write(json.dumps(finite(found.as_json())) + "\n")
        return
    render_ranks(found, console(), limit)


RANK_COLUMNS = (Column("rank", "right"), Column("trace", drop=1), Column("compute", "right"),
                Column("comm.", "right"), Column("hidden", "right"),
                Column("exposed\ncomm.", "right", drop=3), Column("idle", "right"),
                Column("span", "right", drop=2))
SPREAD_COLUMNS = (Column("op"), Column("shapes", drop=1), Column("ranks", "right", drop=3),
                  Column("min", "right"), Column("median", "right", drop=2),
                  Column("max", "right"), Column("max on\nrank", "right"))


def render_ranks(found: RankSet, out: Console, limit: int | None) -> None:
    rows: list[list[str | Text]] = []
    for r in found.ranks:
        t = r.timeline
        rows.append([str(r.rank), Path(r.path).name, fmt.seconds(t.compute_s),
                     fmt.seconds(t.communication_s), fmt.percent(t.hidden_share),
                     fmt.seconds(t.exposed_communication_s), fmt.seconds(t.idle_s),
                     fmt.seconds(t.span_s)])
    print_fitted(out, fit_table(RANK_COLUMNS, rows, out.width,
                                f"{len(found.ranks)} rank(s): time on the clock (overlaps "
                                "counted once); hidden: the share of communication under "
                                "compute"))
    if found.mixed_devices:
        print_hanging(out, found.mixed_devices)
    if found.slowest is not None:
        by_rank = {r.rank: r for r in found.ranks}
        print_hanging(out, found.slowest.text(by_rank))
    spreads = found.spreads if limit is None else found.spreads[:limit]
    cells: list[list[str | Text]] = [
        [s.op, compact_shapes(s.shapes), str(len(s.time_by_rank)), fmt.seconds(s.min_s),
         fmt.seconds(s.median_s), fmt.seconds(s.max_s), str(s.max_rank)] for s in spreads]
    print_fitted(out, fit_table(SPREAD_COLUMNS, cells, out.width,
                                "op groups across ranks, widest spread (max - min) first"))
    if len(spreads) < len(found.spreads):
        out.print(f"{len(found.spreads) - len(spreads)} more group(s); --limit 0 shows all")


COMPARE_COLUMNS = (Column("status"), Column("op"), Column("shapes", drop=2),
                   Column("n", "right", drop=4), Column("base\n/call", "right"),
                   Column("new\n/call", "right"), Column("Δ /call", "right"),
                   Column("noise", drop=3), Column("verdicts", wrap=True, min_width=10, drop=1))
_STATUS_STYLE = {"regression": "bold red", "improvement": "green", "unchanged": "dim",
                 "only_base": "yellow", "only_new": "yellow"}


def compare_traces_command(base_path: str, new_path: str, machine: Machine | None,
                           threshold: float, as_json: bool, limit: int | None) -> list[str]:
    """Two traces' groups lined up; returns why a CI gate fails (empty: it passes)."""
    from roofwise.compare.runs import ONLY_BASE, REGRESSION
    from roofwise.compare.traces import compare_groups

    base, new = (load_trace(p, machine, None, None) for p in (base_path, new_path))
    tick_s = max(base.summary.duration_tick_s, new.summary.duration_tick_s)
    changes = compare_groups(groups(base), groups(new), threshold, tick_s)
    if as_json:
        for change in changes:
            sys.stdout.write(json.dumps(finite(change.as_json())) + "\n")
    else:
        _render_trace_changes(base, new, changes, threshold, tick_s, console(), limit)
    regressions = sum(c.status == REGRESSION for c in changes)
    vanished = sum(c.status == ONLY_BASE for c in changes)
    return ([f"{regressions} op group(s) slower per call"] if regressions else []) + (
        [f"{vanished} op group(s) of BASE missing from NEW (a vanished group cannot be shown "
         "not to regress)"] if vanished else [])


def _render_trace_changes(base: TraceAnalysis, new: TraceAnalysis, changes: list[Any],
                          threshold: float, tick_s: float, out: Console,
                          limit: int | None) -> None:
    shown = changes if limit is None else changes[:limit]
    rows: list[list[str | Text]] = []
    for c in shown:
        b, n = c.verdicts
        counts = (f"{c.base.count if c.base else '-'} → {c.new.count if c.new else '-'}"
                  if not (c.base and c.new and c.base.count == c.new.count) else str(c.new.count))
        rows.append([Text(c.status, style=_STATUS_STYLE[c.status]), c.op,
                     compact_shapes(c.shapes), counts, fmt.seconds(c.base_per_call_s),
                     fmt.seconds(c.new_per_call_s),
                     f"{c.change * 100:+.1f}%" if math.isfinite(c.change) else "-",
                     {True: "beyond", False: "within", None: "-"}[c.beyond_noise],
                     b if b == n else f"{b} → {n}"])
    title = (f"kernel time {fmt.seconds(base.summary.kernel_time_s)} → "
             f"{fmt.seconds(new.summary.kernel_time_s)}; per op group, per call (threshold "
             f"{fmt.percent(threshold)}, noise: twice the standard error of the calls, at "
             f"least the clock's {fmt.seconds(tick_s)} per kernel)")
    devices = (", ".join(base.summary.devices), ", ".join(new.summary.devices))
    if devices[0] and devices[1] and devices[0] != devices[1]:
        print_hanging(out, f"the traces ran on different devices ({devices[0]} → "
                           f"{devices[1]}): a change is the card's as much as the code's")
    print_fitted(out, fit_table(COMPARE_COLUMNS, rows, out.width, title))
    if len(shown) < len(changes):
        out.print(f"{len(changes) - len(shown)} more group(s); --limit 0 shows all")
