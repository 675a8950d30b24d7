"""`roofwise analyze RECORDS`: a verdict for every benchmark record."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..analysis import Analysis, analyze
from ..ledgerio import load_ledger
from ..lint import Finding, lint_analysis, lint_rows
from ..mismatch import mismatch_summary
from ..output import write_csv as write_verdicts_csv
from ..output import write_json_lines
from ..records import read_records
from ..report.table import render_analysis
from ..traces.reader import is_trace
from .common import (
    all_machines,
    console,
    load_machine_arg,
    machine_option,
    note,
    regime_mix_options,
    report_skipped,
)
from .lint import render_findings_brief


@click.command("analyze")
@click.argument("records_path", metavar="RECORDS")
@machine_option()
@regime_mix_options
@click.option("--json", "as_json", is_flag=True, help="One JSON verdict object per record.")
@click.option("--csv", "as_csv", is_flag=True, help="Verdicts as CSV.")
@click.option("--strict", is_flag=True, help="Fail the whole file on the first bad record.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=0),
              help="Rows in the table, worst first (0 for all).")
@click.option("--plot", "plot_path", default=None, metavar="PATH",
              help="Also draw the roofline chart to PATH (.png, .svg or .pdf).")
@click.option("--reference", "reference_paths", multiple=True, metavar="LEDGER.yaml",
              help="A ledger of an op as it should be counted; lint matches records to it by "
                   "op name (repeatable).")
@click.option("--records-out", "records_out", default=None, metavar="PATH",
              help="For a profiler trace: also write its ops as records (.jsonl or .parquet).")
@click.option("--projection", "projection_path", default=None, metavar="PROJ.jsonl",
              help="For a profiler trace: line it up op by op against a projection written "
                   "by `roofwise model --records-out` (predicted vs measured).")
def analyze_command(records_path: str, machine_name: str | None, regime: str | None,
                    mix: str | None, as_json: bool, as_csv: bool, strict: bool,
                    limit: int, plot_path: str | None = None,
                    reference_paths: tuple[str, ...] = (),
                    records_out: str | None = None,
                    projection_path: str | None = None) -> None:
    """Judge benchmark records (JSONL, CSV or Parquet), or a PyTorch profiler trace (Kineto
    JSON, gzipped or not), against a machine profile.

    Without --machine, each record's `device` (a trace's deviceProperties) selects its
    profile; a record whose device matches none is blank, with that reason.
    """
    if is_trace(records_path):  # told by content: a trace is grouped by op and shapes
        from .traces import analyze_trace_command

        analyze_trace_command(records_path, load_machine_arg(machine_name), regime, mix,
                              as_json, None if limit == 0 else limit, records_out,
                              projection_path)
        return
    if records_out is not None or projection_path is not None:
        raise click.UsageError("--records-out and --projection apply to a profiler trace; "
                               "RECORDS is not one")
    if as_json and as_csv:
        raise click.UsageError("--json and --csv are exclusive; choose one")
    if plot_path is not None:
        from ..report.chart import check_chart_path  # matplotlib only for a chart

        check_chart_path(plot_path, "--plot")  # before any row is printed
    references = [load_ledger(p) for p in reference_paths]
    loaded = read_records(records_path, strict=strict)
    report_skipped(records_path, loaded)
    analysis = analyze(loaded.columns, all_machines(), load_machine_arg(machine_name),
                       regime, mix)
    summary = mismatch_summary(analysis)
    if summary and (as_json or as_csv):  # the table says it in its summary
        note(f"roofwise: {summary}")
    if as_json:
        write_json(analysis, lint_rows(analysis, references, path=records_path))
    elif as_csv:
        write_csv(analysis)
    else:
        render_analysis(analysis, console(), None if limit == 0 else limit)
        render_findings_brief(lint_analysis(analysis, references, path=records_path), console())
    if plot_path is not None:
        from .plot import write_chart  # matplotlib only when a chart is asked for
        write_chart([(Path(records_path).stem, analysis)], plot_path)


def write_json(analysis: Analysis, lint: list[list[Finding]] | None = None) -> None:
    """One JSON object per record, in input order (`output.json_lines`)."""
    briefs = None if lint is None else [[f.brief() for f in row] for row in lint]
    write_json_lines(analysis, sys.stdout, briefs)


def write_csv(analysis: Analysis) -> None:
    """In input order, like --json: machines sort for themselves."""
    write_verdicts_csv(analysis, sys.stdout)
