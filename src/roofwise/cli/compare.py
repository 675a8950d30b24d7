"""`roofwise compare BASE NEW`: regressions beyond the measurement spread, first; a CI gate."""

from __future__ import annotations

import math

import click
from rich.markup import escape
from rich.table import Table

from ..analysis import analyze
from ..compare import (
    DEFAULT_THRESHOLD,
    IMPROVEMENT,
    INCOMPARABLE,
    ONLY_BASE,
    REGRESSION,
    Comparison,
    compare,
)
from ..records import read_records
from ..report import fmt
from .common import (
    all_machines,
    console,
    echo_json,
    load_machine_arg,
    machine_option,
    note,
    report_skipped,
)

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
@click.pass_context
def compare_command(ctx: click.Context, base_path: str, new_path: str,
                    machine_name: str | None, threshold: float, fail_on_regression: bool,
                    strict: bool, as_json: bool) -> None:
    """Compare two record files row by row, matched by op, workload and device.

    \b
    A row regressed when it is slower by more than --threshold and, where both
    rows carry time_p10_s/time_p90_s, its new p10 is above the base p90.

    \b
    --fail-on-regression exits 1 on any of:
      - a regression;
      - an incomparable pair (a base or new time that is not positive);
      - a BASE row with no match in NEW (a vanished benchmark cannot be
        shown not to regress);
      - a malformed record (skipped, one line on stderr each);
      - a key repeated within one file (one line on stderr each; the rows
        are paired in file order).
    """
    machine = load_machine_arg(machine_name)
    machines = all_machines()
    loaded = {path: read_records(path, strict=strict) for path in (base_path, new_path)}
    skipped = sum(report_skipped(path, loaded[path]) for path in dict.fromkeys(loaded))
    base, new = (analyze(loaded[p].columns, machines, machine) for p in (base_path, new_path))
    result = compare(base, new, threshold)
    paths = {"base": base_path, "new": new_path}
    said = dict.fromkeys(f"roofwise: {paths[d.side]}: duplicate key: {d.describe()}"
                         for d in result.duplicates)  # BASE and NEW may be one file
    for line in said:
        note(line)
    if as_json:
        for change in result.changes:
            echo_json(change.to_json())
    else:
        render_comparison(result)
    if fail_on_regression:
        failures = gate_failures(result, skipped)
        if failures:
            click.echo(f"roofwise: compare failed: {'; '.join(failures)}", err=True)
            ctx.exit(1)


def gate_failures(result: Comparison, skipped: int) -> list[str]:
    """Why the CI gate fails, one phrase each; empty when it passes."""
    out = []
    if result.regressions:
        out.append(f"{len(result.regressions)} regression(s)")
    incomparable = len(result.by_status(INCOMPARABLE))
    if incomparable:
        out.append(f"{incomparable} incomparable row(s) (a time that is not positive cannot "
                   "be shown not to regress)")
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


def render_comparison(result: Comparison) -> None:
    counts = ", ".join(f"{n} {s}" for s, n in result.counts().items() if n)
    table = Table(title=f"{len(result.changes)} rows: {counts} (threshold "
                        f"{fmt.percent(result.threshold)})", title_justify="left")
    columns = ["status", "op", "workload", "base", "new", "Δ time", "Δ eff.", "spread"]
    why = any(c.reason for c in result.changes)
    for col in columns + (["why"] if why else []):
        table.add_column(col, justify="right" if col.startswith(("base", "new", "Δ")) else
                         "left", no_wrap=col != "why", overflow="ellipsis" if col != "why"
                         else "fold", max_width=40 if col == "workload" else None,
                         min_width=30 if col == "why" else None)
    for c in result.changes:
        op, workload, _device = c.key
        table.add_row(
            f"[{_STATUS_STYLE[c.status]}]{c.status}[/]", escape(op), escape(workload),
            fmt.seconds(c.base.time_s, significant=3) if c.base else "—",
            fmt.seconds(c.new.time_s, significant=3) if c.new else "—",
            _signed_percent(c.time_change, c.status in (REGRESSION, IMPROVEMENT)),
            "—" if not math.isfinite(c.efficiency_change) else
            f"{c.efficiency_change * 100:+.1f} pt",
            {True: "beyond", False: "within", None: "—"}[c.beyond_spread],
            *([escape(c.reason)] if why else []))
    console().print(table)


def _signed_percent(value: float, loud: bool) -> str:
    if not math.isfinite(value):
        return "—"
    text = ("+" if value >= 0 else "") + fmt.percent(value)
    return f"[bold]{text}[/]" if loud else text

