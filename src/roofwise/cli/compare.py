"""`roofwise compare BASE NEW`: regressions beyond the measurement spread, first; a CI gate."""

from __future__ import annotations

import json
import math
import sys

import click
from rich.text import Text

from roofwise.base import fmt
from roofwise.base.errors import InputError
from roofwise.cli.common import (
    MAX_SKIPPED_LINES,
    all_machines,
    console,
    load_machine_arg,
    machine_option,
    note,
    read_records_shown,
    report_skipped,
)
from roofwise.compare.runs import (
    DEFAULT_THRESHOLD,
    IMPROVEMENT,
    INCOMPARABLE,
    ONLY_BASE,
    REGRESSION,
    Change,
    Comparison,
    compare,
)
from roofwise.output.analysis import analyze
from roofwise.output.frame import json_rows_writer
from roofwise.render.layout import Column, fit_table
from roofwise.traces.reader import is_trace

_STATUS_STYLE = {"regression": "bold red", "incomparable": "bold yellow",
                 "improvement": "green", "unchanged": "dim",
                 "only_base": "yellow", "only_new": "yellow"}


@click.command("compare")
@click.argument("base_path", metavar="BASE")
@click.argument("new_path", metavar="NEW")
@machine_option()
@click.option("--threshold", type=click.FloatRange(min=0.0), default=DEFAULT_THRESHOLD,
              show_default=True, help="Smallest relative change in time that counts (0.05 = 5%).")
@click.option("--fail-on-regression", is_flag=True,
              help="Exit 1 on any of the gate failures listed above (for CI).")
@click.option("--strict", is_flag=True, help="Fail a file on its first bad record (exit 2).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per matched row.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=0),
              help="Rows in the table, regressions first (0 for all).")
@click.pass_context
def compare_command(ctx: click.Context, base_path: str, new_path: str,
                    machine_name: str | None, threshold: float, fail_on_regression: bool,
                    strict: bool, as_json: bool, limit: int = 50) -> None:
    """Compare two record files row by row, matched by op, workload and device; or two
    profiler traces op group by op group (op and shapes).

    \b
    A row regressed when it is slower by more than --threshold and, where both
    rows carry time_p10_s/time_p90_s, its new p10 is above the base p90.

    \b
    --fail-on-regression exits 1 on any of:
      - a regression;
      - an incomparable pair: a base or new time that is not positive, or
        a row that is impossible, blank or latency-bound (its verdict is
        shown beside the change, which is never called an improvement or a
        regression);
      - a BASE row with no match in NEW (a vanished benchmark cannot be
        shown not to regress);
      - a malformed record (skipped, one line on stderr each);
      - a key repeated within one file (one line on stderr each; the rows
        are paired in file order).

    \b
    For two traces, each group's mean time per call is compared: a change
    counts beyond the threshold and beyond the noise (twice the standard
    error from the calls' own spread; unknown with one call a side). The
    gate fails on a regression or a group of BASE missing from NEW.
    """
    machine = load_machine_arg(machine_name)
    sides = [is_trace(p) for p in (base_path, new_path)]
    if any(sides):  # told by content: two traces are compared op group by op group
        if not all(sides):
            odd = new_path if sides[0] else base_path
            raise InputError(odd, "not a profiler trace, while the other file is one; expected "
                                  "two traces or two record files")
        from roofwise.cli.traces import compare_traces_command  # deferred: only for traces

        failures = compare_traces_command(base_path, new_path, machine, threshold, as_json,
                                          None if limit == 0 else limit)
        if fail_on_regression and failures:
            note(f"roofwise: compare failed: {'; '.join(failures)}")
            ctx.exit(1)
        return
    machines = all_machines()
    loaded = {path: read_records_shown(path, strict=strict) for path in (base_path, new_path)}
    skipped = sum(report_skipped(path, loaded[path]) for path in dict.fromkeys(loaded))
    base, new = (analyze(loaded[p].columns, machines, machine) for p in (base_path, new_path))
    result = compare(base, new, threshold)
    paths = {"base": base_path, "new": new_path}
    # BASE and NEW may be one file: its repeated keys are said once
    repeated = (result.duplicates.of_side("base") if base_path == new_path
                else result.duplicates)
    for d in repeated[:MAX_SKIPPED_LINES]:
        note(f"roofwise: {paths[d.side]}: duplicate key: {d.describe()}")
    if len(repeated) > MAX_SKIPPED_LINES:
        note(f"roofwise: {len(repeated) - MAX_SKIPPED_LINES} more duplicate key(s) not listed")
    if as_json:
        json_rows_writer(result.changes.json_frame(), raw={"workload"})(sys.stdout)
    else:
        render_comparison(result, None if limit == 0 else limit)
    if fail_on_regression:
        failures = gate_failures(result, skipped)
        if failures:
            note(f"roofwise: compare failed: {'; '.join(failures)}")
            ctx.exit(1)


def gate_failures(result: Comparison, skipped: int) -> list[str]:
    """Why the CI gate fails, one phrase each; empty when it passes."""
    out = []
    if result.regressions:
        out.append(f"{len(result.regressions)} regression(s)")
    incomparable = len(result.by_status(INCOMPARABLE))
    if incomparable:
        out.append(f"{incomparable} incomparable row(s) (a time that is not positive, or an "
                   "impossible, blank or latency-bound row, cannot be shown not to regress)")
    if result.duplicates:
        out.append(f"{len(result.duplicates)} duplicate key(s) (rows repeated within a file "
                   "cannot be matched with certainty)")
    if skipped:
        out.append(f"{skipped} malformed record(s) skipped (a skipped row cannot be compared)")
    vanished = len(result.by_status(ONLY_BASE))
    if vanished:
        out.append(f"{vanished} row(s) of BASE missing from NEW (a vanished benchmark cannot "
                   "be shown not to regress)")
    return out


def render_comparison(result: Comparison, limit: int | None = None) -> None:
    """The pairs worst first, each with both verdicts beside its change; `limit` rows."""
    changes = result.changes
    counts = ", ".join(f"{n} {s}" for s, n in result.counts().items() if n)
    shown = changes[:limit] if limit is not None else changes[:]
    why = any(c.reason for c in shown)
    columns = [Column("status"), Column("op"), Column("workload", wrap=True, min_width=14),
               Column("base", "right"), Column("new", "right"), Column("Δ time", "right"),
               Column("verdicts", wrap=True, drop=2, min_width=10),
               Column("Δ eff.", "right", drop=3), Column("spread", drop=4)]
    if why:
        columns.append(Column("why", wrap=True, drop=1, min_width=20))
    rows: list[list[str | Text]] = []
    for c in shown:
        op, workload, _device = c.key
        rows.append([
            Text(c.status, style=_STATUS_STYLE[c.status]), op, _key_value(workload),
            fmt.seconds(c.base.time_s, significant=3) if c.base else "—",
            fmt.seconds(c.new.time_s, significant=3) if c.new else "—",
            _signed_percent(c.time_change, c.status in (REGRESSION, IMPROVEMENT)),
            _verdicts(c),
            "—" if not math.isfinite(c.efficiency_change) else
            f"{c.efficiency_change * 100:+.1f} pt",
            {True: "beyond", False: "within", None: "—"}[c.beyond_spread],
            *([c.reason] if why else [])])
    out = console()
    fitted = fit_table(columns, rows, out.width, f"{len(changes)} rows: {counts} (threshold "
                                                  f"{fmt.percent(result.threshold)})")
    out.print(fitted.table)
    if fitted.note():
        out.print(fitted.note() or "", style="dim", markup=False)
    if len(shown) < len(changes):
        out.print(f"… {len(changes) - len(shown)} more rows (use --limit 0 for all, --json for "
                  "machines)", style="dim", markup=False)


def _verdicts(c: Change) -> str:
    """Base and new verdicts, one word when they agree: the change is read beside them."""
    base = c.base.verdict if c.base else "—"
    new = c.new.verdict if c.new else "—"
    return base if base == new else f"{base} → {new}"


def _signed_percent(value: float, loud: bool) -> str:
    if not math.isfinite(value):
        return "—"
    text = ("+" if value >= 0 else "") + fmt.percent(value)
    return f"[bold]{text}[/]" if loud else text


def _key_value(workload_key: str) -> str:
    """The matching key's workload (canonical JSON) as a person reads it: `m=512 k=512`."""
    try:
        value = json.loads(workload_key)
    except ValueError:
        return workload_key
    return fmt.workload(value)
