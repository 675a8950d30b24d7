"""`roofwise compare BASE NEW`: regressions beyond the measurement spread, first; a CI gate."""

from __future__ import annotations

import math

import click
from rich.table import Table

from ..analysis import analyze
from ..compare import DEFAULT_THRESHOLD, IMPROVEMENT, REGRESSION, Comparison, compare
from ..recordio import read_records
from ..report import fmt
from ..report.table import seconds3
from .common import all_machines, console, echo_json, load_machine_arg, machine_option

_STATUS_STYLE = {"regression": "bold red", "improvement": "green", "unchanged": "dim",
                 "only_base": "yellow", "only_new": "yellow"}


@click.command("compare")
@click.argument("base_path", metavar="BASE")
@click.argument("new_path", metavar="NEW")
@machine_option()
@click.option("--threshold", type=click.FloatRange(min=0.0), default=DEFAULT_THRESHOLD,
              show_default=True, help="Smallest relative change in time that counts (0.05 = 5%).")
@click.option("--fail-on-regression", is_flag=True,
              help="Exit 1 when any row regressed (for CI).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per matched row.")
@click.pass_context
def compare_command(ctx: click.Context, base_path: str, new_path: str,
                    machine_name: str | None, threshold: float, fail_on_regression: bool,
                    as_json: bool) -> None:
    """Compare two record files row by row (matched by op, workload and device).

    A regression is slower by more than --threshold and, where both rows carry
    time_p10_s/time_p90_s, with the new p10 above the base p90.
    """
    machine = load_machine_arg(machine_name)
    machines = all_machines()
    runs = [analyze(read_records(path).columns, machines, machine)
            for path in (base_path, new_path)]
    result = compare(runs[0], runs[1], threshold)
    if as_json:
        for change in result.changes:
            echo_json(change.to_json())
    else:
        render_comparison(result)
    if fail_on_regression and result.regressions:
        ctx.exit(1)


def render_comparison(result: Comparison) -> None:
    counts = ", ".join(f"{n} {s}" for s, n in result.counts().items() if n)
    table = Table(title=f"{len(result.changes)} rows: {counts} (threshold "
                        f"{fmt.percent(result.threshold)})", title_justify="left")
    for col in ("status", "op", "workload", "base", "new", "Δ time", "Δ eff.", "spread"):
        table.add_column(col, justify="right" if col.startswith(("base", "new", "Δ")) else
                         "left", no_wrap=True, overflow="ellipsis",
                         max_width=40 if col == "workload" else None)
    for c in result.changes:
        op, workload, _device = c.key
        table.add_row(
            f"[{_STATUS_STYLE[c.status]}]{c.status}[/]", op, workload,
            seconds3(c.base.time_s) if c.base else "—",
            seconds3(c.new.time_s) if c.new else "—",
            _signed_percent(c.time_change, c.status in (REGRESSION, IMPROVEMENT)),
            "—" if not math.isfinite(c.efficiency_change) else
            f"{c.efficiency_change * 100:+.1f} pt",
            {True: "beyond", False: "within", None: "—"}[c.beyond_spread])
    console().print(table)


def _signed_percent(value: float, loud: bool) -> str:
    if not math.isfinite(value):
        return "—"
    text = f"{value * 100:+.1f}%"
    return f"[bold]{text}[/]" if loud else text



