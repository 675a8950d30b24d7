"""`roofwise fleet DATASET`: `roofwise analyze` of a dataset of shards, on a Dask cluster."""

from __future__ import annotations

import functools
import sys

import click

from roofwise.cli.analyze import _note_mismatches, _references, _render
from roofwise.cli.common import load_machine_arg, machine_option, note, regime_mix_options


@click.command("fleet")
@click.argument("dataset", metavar="DATASET")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="A running Dask scheduler to judge on (tcp://HOST:8786).")
@click.option("--local", "local", default=None, type=click.IntRange(min=1), metavar="N",
              help="Start a local cluster of N worker processes for this run (the default, "
                   "one per core, when no --scheduler is given).")
@machine_option()
@regime_mix_options
@click.option("--json", "as_json", is_flag=True,
              help="One JSON verdict object per record, as `roofwise analyze --json`.")
@click.option("--out", "out", default=None, metavar="FOLDER|URL",
              help="Also write the judged rows as Parquet under this new folder (or URL).")
@click.option("--strict", is_flag=True, help="Fail on the first bad record of any shard.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=0),
              help="Rows in the table, worst first (0 for all).")
@click.option("--reference", "reference_paths", multiple=True, metavar="LEDGER.yaml",
              help="A ledger of an op as it should be counted; lint matches records to it by "
                   "op name (repeatable).")
def fleet_command(dataset: str, scheduler: str | None, local: int | None,
                  machine_name: str | None, regime: str | None, mix: str | None,
                  as_json: bool, out: str | None, strict: bool, limit: int,
                  reference_paths: tuple[str, ...]) -> None:
    """Judge a dataset of records on a Dask cluster: a folder of shards or a glob (Parquet,
    JSONL, CSV), local or an fsspec URL (s3://bucket/history/). Prints what `roofwise
    analyze` prints for the same files.

    Each shard is one task; the workers judge it as analyze does and the verdict counts, the
    worst rows and the --json lines come back in dataset order. Needs the fleet extra.
    """
    if scheduler is not None and local is not None:
        raise click.UsageError("--scheduler and --local are exclusive; choose one")
    from roofwise.fleet import judge_dataset  # deferred: polars and Dask
    from roofwise.lint import BatchFindings, file_finding_kinds, lint_columns

    references = _references(reference_paths)
    machine = load_machine_arg(machine_name)
    result = judge_dataset(
        dataset, machine, scheduler=scheduler, workers=local, regime=regime, mix=mix,
        strict=strict, limit=None if limit == 0 else limit, out=out,
        on_json=_write_bytes if as_json else None,
        row_lint=functools.partial(lint_columns, ledgers=references, path=dataset,
                                   machine_level=True),
        findings=functools.partial(BatchFindings.of, ledgers=references))
    for skipped in result.skipped:
        note(f"roofwise: skipped {skipped}")
    if result.skipped_line:
        note(f"roofwise: {result.skipped_line}")
    if as_json:
        _note_mismatches(result.mismatched, result.records)
    if out is not None:
        note(f"roofwise: wrote {result.records:,} judged rows to {out} "
             f"({len(result.parts)} Parquet files, {result.shards} shards)")
    if result.worst is not None and not as_json:
        whole = len(result.worst) == result.records  # the table holds every row
        _render(result.worst, file_finding_kinds(result.findings), limit,
                None if whole else result.counts)


def _write_bytes(lines: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(lines)
    sys.stdout.buffer.flush()
