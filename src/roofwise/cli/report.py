"""`roofwise report RECORDS -o report.html`: one self-contained HTML file to share."""

from __future__ import annotations

import click

from ..analysis import analyze
from ..recordio import read_records
from ..report.html import write_report
from .common import all_machines, console, load_machine_arg, machine_option, regime_mix_options


@click.command("report")
@click.argument("records_path", metavar="RECORDS")
@machine_option()
@regime_mix_options
@click.option("--output", "-o", "output", required=True, metavar="PATH",
              help="The HTML file to write.")
@click.option("--title", default="roofwise report", show_default=True)
@click.option("--strict", is_flag=True, help="Fail the file on its first bad record.")
def report_command(records_path: str, machine_name: str | None, regime: str | None,
                   mix: str | None, output: str, title: str, strict: bool) -> None:
    """Write an HTML report: the chart, a sortable and filterable verdict table, lint findings,
    the profile with its sources, and each row's full verdict on demand. Opens offline."""
    loaded = read_records(records_path, strict=strict)
    if loaded.skipped:
        console(err=True).print(f"roofwise: skipped {len(loaded.skipped)} malformed record(s)",
                                markup=False)
    analysis = analyze(loaded.columns, all_machines(), load_machine_arg(machine_name),
                       regime, mix)
    write_report(analysis, output, title=title, source=records_path)
    console(err=True).print(f"roofwise: wrote {output}", markup=False)
