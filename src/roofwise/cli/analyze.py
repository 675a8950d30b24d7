"""`roofwise analyze RECORDS`: a verdict for every benchmark record."""

from __future__ import annotations

import contextvars
import functools
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click
import polars as pl

from roofwise.base.overlap import BackgroundWriter
from roofwise.base.text import shown
from roofwise.cli.common import (
    MAX_SKIPPED_LINES,
    all_machines,
    console,
    load_machine_arg,
    machine_option,
    note,
    read_records_shown,
    reading_progress,
    regime_mix_options,
    report_skipped,
)
from roofwise.ledgers.ledger import Ledger
from roofwise.lint import BatchFindings, file_finding_kinds, lint_columns
from roofwise.output.analysis import Analysis, analyze
from roofwise.output.frame import Write, csv_writer, json_writer
from roofwise.output.stream import StreamTotals, judged_batches
from roofwise.records.read import (
    BATCH_ROWS,
    iter_batches,
)
from roofwise.traces.reader import is_trace, traces_in
from roofwise.verdicts.mismatch import mismatch_counts, mismatch_line


def _per_rank(paths: tuple[str, ...]) -> bool:
    """Several paths, or a folder holding profiler traces: the per-rank view. A folder of
    records shards (Parquet, JSONL, CSV) is one records dataset, as before."""
    if len(paths) > 1:
        return True
    folder = Path(paths[0])
    return folder.is_dir() and bool(traces_in(folder))


@click.command("analyze")
@click.argument("records_paths", metavar="RECORDS...", nargs=-1, required=True)
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
def analyze_command(records_paths: tuple[str, ...], machine_name: str | None, regime: str | None,
                    mix: str | None, as_json: bool, as_csv: bool, strict: bool,
                    limit: int, plot_path: str | None = None,
                    reference_paths: tuple[str, ...] = (),
                    records_out: str | None = None,
                    projection_path: str | None = None) -> None:
    """Judge benchmark records (JSONL, CSV or Parquet), or a PyTorch profiler trace (Kineto
    JSON, gzipped or not), against a machine profile.

    Without --machine, each record's `device` (a trace's deviceProperties) selects its
    profile; a record whose device matches none is blank, with that reason.

    Several traces, or a folder of them (one per rank of a distributed job), give the
    per-rank view: compute, communication (and how much of it compute hides) and idle time per
    rank, the slowest rank and why, and each op group's spread across ranks.
    """
    if _per_rank(records_paths):
        if records_out is not None or projection_path is not None or plot_path is not None:
            raise click.UsageError("--records-out, --projection and --plot take one trace; "
                                   "several traces (or a folder) give the per-rank view")
        from roofwise.cli.traces import analyze_ranks_command  # deferred: only for traces

        analyze_ranks_command(records_paths, load_machine_arg(machine_name), regime, mix,
                              as_json, None if limit == 0 else limit)
        return
    records_path = records_paths[0]
    if is_trace(records_path):  # told by content: a trace is grouped by op and shapes
        from roofwise.cli.traces import analyze_trace_command  # deferred: only for a trace

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
        from roofwise.render.chart import check_chart_path  # matplotlib only for a chart

        check_chart_path(plot_path, "--plot")  # before any row is printed
    references = _references(reference_paths)
    machine, machines = load_machine_arg(machine_name), all_machines()
    if plot_path is not None:  # the chart draws every row at once
        loaded = read_records_shown(records_path, strict=strict)
        report_skipped(records_path, loaded)
        analysis = analyze(loaded.columns, machines, machine, regime, mix)
        if as_json or as_csv:
            _note_mismatches(mismatch_counts(analysis), len(analysis))
            _prepare(analysis, as_json, True, references, records_path)[1](sys.stdout)
        else:
            _render(analysis, file_finding_kinds([BatchFindings.of(
                analysis, references, loaded.source or records_path)]), limit)
        from roofwise.cli.plot import write_chart  # matplotlib only when a chart is asked for
        write_chart([(Path(records_path).stem, analysis)], plot_path)
        return
    if strict:  # all or nothing: the whole input is checked before a row is written
        for _ in iter_batches(records_path, strict=True, keep_rows=False,
                              batch_rows=BATCH_ROWS):
            pass
    findings: list[BatchFindings] = []  # each batch's findings folded by kind
    stream = StreamTotals(records_path)
    with reading_progress(records_path) as advance, BackgroundWriter() as writer:
        for loaded, judged in judged_batches(records_path, machines, machine, regime, mix,
                                             strict, BATCH_ROWS):
            advance(loaded)
            for skipped in stream.count(loaded, MAX_SKIPPED_LINES):
                note(f"roofwise: skipped {skipped}")
            if judged is None:
                continue
            analysis = judged
            if as_json or as_csv:  # the table says mismatches in its summary
                for device, count in mismatch_counts(analysis).items():
                    stream.mismatched[device] = stream.mismatched.get(device, 0) + count
                shard = loaded.source if Path(records_path).is_dir() else ""
                stream.columns, write, left_out = _prepare(
                    analysis, as_json, stream.first, references, records_path, stream.columns,
                    shard)
                stream.left_out.update(dict.fromkeys(left_out))
                writer.submit(functools.partial(write, sys.stdout))
            else:
                stream.keep_worst(analysis, None if limit == 0 else limit)
                findings.append(BatchFindings.of(analysis, references,
                                                 loaded.source or records_path))
            stream.first = False
    said = stream.finish()
    if said:
        note(f"roofwise: {said}")
    _note_mismatches(stream.mismatched, stream.good)
    if stream.left_out:
        note(f"roofwise: {records_path}: field(s) first met after the CSV header was written, "
             f"left out of the CSV: {', '.join(shown(c) for c in stream.left_out)}; --json "
             "keeps them")
    if not (as_json or as_csv):
        kinds = file_finding_kinds(findings)
        if stream.batches == 1 and stream.last is not None:  # the whole input at once
            _render(stream.last, kinds, limit)
        else:
            _render(stream.worst(machines, machine, regime, mix), kinds, limit,
                    stream.verdicts)


def _references(paths: tuple[str, ...]) -> list[Ledger]:
    if not paths:
        return []
    from roofwise.ledgers.files import load_ledger  # YAML only for a reference

    return [load_ledger(p) for p in paths]


def _render(analysis: Analysis, findings: pl.DataFrame, limit: int,
            counts: dict[str, int] | None = None) -> None:
    """The table and the findings under it, by kind (rich loads here: --json and --csv
    never draw)."""
    from roofwise.cli.lint import render_findings_brief
    from roofwise.render.table import render_analysis

    shown = render_analysis(analysis, console(), None if limit == 0 else limit, counts=counts)
    render_findings_brief(findings, console(), shown=shown)


def _note_mismatches(counts: dict[str, int], rows: int) -> None:
    line = mismatch_line(counts, rows)
    if line:
        note(f"roofwise: {line}")


def _prepare(analysis: Analysis, as_json: bool, first: bool, references: list[Ledger],
             path: str, columns: list[str] | None = None, shard: str = ""
             ) -> tuple[list[str] | None, Write, list[str]]:
    """One batch's verdicts (--json, else --csv), built, the CSV columns (the first batch's
    header) they go under, and the fields that header lacks (left out of the CSV)."""
    if as_json:
        # the findings are made beside the verdict frame: both are mostly the engine's work,
        # which lets go of the interpreter, so a second core shortens the batch. The thread
        # runs in this one's context, so numpy's error state (no warnings) is the command's.
        with ThreadPoolExecutor(max_workers=1) as pool:
            lint = pool.submit(contextvars.copy_context().run, lint_columns, analysis,
                               references, path=path, machine_level=True, shard=shard)
            return columns, json_writer(analysis, lint.result), []
    written, write, left_out = csv_writer(analysis, header=first, columns=columns)
    return written, write, left_out
