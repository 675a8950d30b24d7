"""`roofwise report RECORDS -o report.html`: one self-contained HTML file to share."""

from __future__ import annotations

import click

from ..analysis import analyze
from ..recordio import read_records
from ..report.html import check_report_path, write_report
from .common import all_machines, load_machine_arg, machine_option, regime_mix_options
from .plot import nothing_priced, priced_rows

MAX_SKIPPED_LINES = 20  # the count that follows covers the rest


@click.command("report")
@click.argument("records_path", metavar="RECORDS")
@machine_option()
@regime_mix_options
@click.option("--output", "-o", "output", required=True, metavar="PATH",
              help="The HTML file to write (.html or .htm).")
@click.option("--title", default="roofwise report", show_default=True)
@click.option("--strict", is_flag=True, help="Fail the file on its first bad record.")
def report_command(records_path: str, machine_name: str | None, regime: str | None,
                   mix: str | None, output: str, title: str, strict: bool) -> None:
    """Write an HTML report: the chart, a sortable and filterable verdict table, lint findings,
    the profile with its sources, and each row's ledger and price on demand. Opens offline."""
    check_report_path(output)  # before any work: a wrong name fails at once
    loaded = read_records(records_path, strict=strict)
    for skipped in loaded.skipped[:MAX_SKIPPED_LINES]:
        _note(f"roofwise: skipped {skipped}")
    if loaded.skipped:
        _note(f"roofwise: skipped {len(loaded.skipped)} malformed record(s) of "
              f"{len(loaded.skipped) + len(loaded.columns)}; --strict fails the file instead")
    analysis = analyze(loaded.columns, all_machines(), load_machine_arg(machine_name),
                       regime, mix)
    if not priced_rows(analysis):
        raise nothing_priced(records_path, analysis)
    write_report(analysis, output, title=title, source=records_path)
    _note(f"roofwise: wrote {output}")


def _note(line: str) -> None:
    """One line on stderr, never wrapped: CI logs and grep read it whole."""
    click.echo(line, err=True)
