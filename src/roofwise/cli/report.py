"""`roofwise report RECORDS -o report.html`: one self-contained HTML file to share."""

from __future__ import annotations

from pathlib import Path

import click

from roofwise.base.errors import InputError
from roofwise.cli.common import (
    all_machines,
    load_machine_arg,
    machine_option,
    note,
    read_records_shown,
    regime_mix_options,
    report_skipped,
)
from roofwise.cli.plot import nothing_priced, priced_rows
from roofwise.ledgers.files import load_ledger
from roofwise.output.analysis import analyze
from roofwise.render.html import DEFAULT_ROWS, check_report_path, write_report
from roofwise.render.row_ledgers import Reference
from roofwise.traces.reader import is_trace, traces_in


@click.command("report")
@click.argument("records_path", metavar="RECORDS")
@machine_option()
@regime_mix_options
@click.option("--output", "-o", "output", required=True, metavar="PATH",
              help="The HTML file to write (.html or .htm).")
@click.option("--title", default="roofwise report", show_default=True)
@click.option("--strict", is_flag=True, help="Fail the file on its first bad record.")
@click.option("--rows", "table_rows", type=click.IntRange(min=0), default=DEFAULT_ROWS,
              show_default=True,
              help="Rows in the verdict table, worst first (0 for all); the summary, the "
                   "filter counts and the chart cover every row.")
@click.option("--reference", "reference_paths", multiple=True, metavar="LEDGER.yaml",
              help="A ledger of an op as it should be counted; rows whose op it names show it, "
                   "and lint judges them against it (repeatable).")
def report_command(records_path: str, machine_name: str | None, regime: str | None,
                   mix: str | None, output: str, title: str, strict: bool,
                   reference_paths: tuple[str, ...] = (), table_rows: int = DEFAULT_ROWS) -> None:
    """Write an HTML report: the chart, a sortable and filterable verdict table, lint findings,
    the profile with its sources, and each row's ledger and price on demand. Opens offline."""
    check_report_path(output)  # before any work: a wrong name fails at once
    references = load_references(reference_paths)
    if is_trace(records_path):  # told by content: the grouped view leads the report
        from roofwise.cli.traces import write_trace_report  # deferred: only for a trace

        write_trace_report(records_path, load_machine_arg(machine_name), regime, mix, output,
                           title, references)
        note(f"roofwise: wrote {output}")
        return
    if Path(records_path).is_dir():  # one trace per rank is `analyze`'s per-rank view
        traces = traces_in(Path(records_path))
        if traces:
            raise InputError(records_path, f"a folder of {len(traces)} profiler trace(s); "
                                           "expected one trace (its report) or record shards; "
                                           f"`roofwise analyze {records_path}` reads every "
                                           "rank")
    loaded = read_records_shown(records_path, strict=strict)
    report_skipped(records_path, loaded)
    analysis = analyze(loaded.columns, all_machines(), load_machine_arg(machine_name),
                       regime, mix)
    if not priced_rows(analysis):
        raise nothing_priced(records_path, analysis)
    write_report(analysis, output, title=title, source=records_path, references=references,
                 rows=table_rows)
    note(f"roofwise: wrote {output}")


def load_references(paths: tuple[str, ...]) -> list[Reference]:
    """Each --reference ledger; two of one op name would leave a row's ledger to chance."""
    references: list[Reference] = []
    seen: dict[str, str] = {}
    for path in paths:
        ledger = load_ledger(path)
        name = ledger.name.lower()
        if name in seen:
            raise InputError(path, f"ledger {ledger.name!r} is also given by {seen[name]}; "
                                   "expected one --reference per op name")
        seen[name] = path
        references.append(Reference(ledger, path))
    return references

