"""`roofwise plot RECORDS... -o chart.png`: the roofline chart; several files are several runs."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np

from roofwise.base.errors import InputError
from roofwise.cli.common import (
    all_machines,
    console,
    load_machine_arg,
    machine_option,
    read_records_shown,
    regime_mix_options,
    report_skipped,
)
from roofwise.output.analysis import Analysis, analyze
from roofwise.render.chart import LOST_LABELS, check_chart_path, roofline_figure, save_figure
from roofwise.verdicts.rules import BLANK


@click.command("plot")
@click.argument("records_paths", metavar="RECORDS...", nargs=-1, required=True)
@machine_option()
@regime_mix_options
@click.option("--output", "-o", "output", required=True, metavar="PATH",
              help="Chart file; the format follows the extension (.png, .svg, .pdf).")
@click.option("--title", default=None, help="Chart title (default: runs and machines).")
@click.option("--strict", is_flag=True, help="Fail a file on its first bad record.")
@click.option("--label", "label_rows", type=click.IntRange(min=0), default=LOST_LABELS,
              show_default=True,
              help="Number and name this many rows that lose the most time (measured - SOL).")
def plot_command(records_paths: tuple[str, ...], machine_name: str | None, regime: str | None,
                 mix: str | None, output: str, title: str | None, strict: bool,
                 label_rows: int = LOST_LABELS) -> None:
    """Draw records against the machine's roofs: one point per record, coloured by verdict.

    Several RECORDS files share one chart, one marker shape per run (and per machine).
    """
    check_chart_path(output, "--output")  # before any work
    machine = load_machine_arg(machine_name)
    runs: list[tuple[str, Analysis]] = []
    for path in records_paths:
        loaded = read_records_shown(path, strict=strict)
        report_skipped(path, loaded)
        runs.append((_run_label(path, records_paths),
                     analyze(loaded.columns, all_machines(), machine, regime, mix)))
    if not any(priced_rows(analysis) for _, analysis in runs):
        raise nothing_priced(records_paths[0], runs[0][1])
    write_chart(runs, output, title, label_rows)


def priced_rows(analysis: Analysis) -> int:
    return int(np.count_nonzero(analysis.judged.verdict != BLANK))


def nothing_priced(path: str, analysis: Analysis) -> InputError:
    """The error for a file with no row the model could price: an empty chart helps nobody."""
    if not len(analysis):
        return InputError(path, "no row could be priced: no valid record (every one skipped)")
    reasons = analysis.reasons(0)
    first = reasons[0] if reasons else "blank"
    if first.startswith("no profile matches"):
        first += "; pass --machine NAME (`roofwise machines` lists them)"
    every = "the only row is" if len(analysis) == 1 else f"all {len(analysis)} rows are"
    return InputError(path, f"no row could be priced ({every} blank); the first: {first}")


def write_chart(runs: list[tuple[str, Analysis]], output: str, title: str | None = None,
                label_rows: int = LOST_LABELS) -> None:
    save_figure(roofline_figure(runs, title=title, label_rows=label_rows), output)
    console(err=True).print(f"roofwise: wrote {output}", markup=False)


def _run_label(path: str, all_paths: tuple[str, ...]) -> str:
    """The file's stem, or its path where two runs share a stem."""
    stem = Path(path).stem
    return path if sum(Path(p).stem == stem for p in all_paths) > 1 else stem
