"""Judging records a batch at a time: a pure function batch -> batch, for files of any size and
for distributed engines that map a function over the batches of a table.

`judge_frame` takes records as columns (a polars DataFrame, or a pyarrow Table/RecordBatch)
and returns their verdicts as columns: the same screen, pricing and judgement as `roofwise
analyze`, with no state between calls, so it runs wherever a fleet's history lives:

Spark (`DataFrame.mapInArrow`, one Python worker per partition)::

    import polars as pl
    from roofwise.output.stream import VERDICT_SCHEMA_COLUMNS, judge_frame

    def judge_batches(batches):          # Iterator[pyarrow.RecordBatch] -> Iterator[...]
        for batch in batches:
            verdicts = judge_frame(pl.from_arrow(batch), machine="h200")
            yield from verdicts.select(VERDICT_SCHEMA_COLUMNS).to_arrow().to_batches()

    verdicts = records_df.mapInArrow(judge_batches, schema=spark_schema_of_the_columns)

Ray Data (`Dataset.map_batches` with `batch_format="pyarrow"`)::

    verdicts = ray.data.read_parquet("s3://history/").map_batches(
        lambda table: judge_frame(pl.from_arrow(table), machine="h200")
        .select(VERDICT_SCHEMA_COLUMNS).to_arrow(), batch_format="pyarrow")

`tests/output/test_stream.py` runs `judge_batches` above over pyarrow record batches on one machine,
as a Spark worker would, and checks it against `roofwise analyze`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl

from roofwise.base.overlap import in_order
from roofwise.output.analysis import Analysis, analyze
from roofwise.output.frame import verdict_frame
from roofwise.profiles.load import builtin_machines, resolve_machine
from roofwise.profiles.machine import Machine
from roofwise.records.read import (
    BATCH_ROWS,
    Batch,
    Loaded,
    Skipped,
    batch_jobs,
    check_not_empty,
    columns_from_valid,
    concat_loaded,
    frame_rows,
    load_batch,
)

# The columns every verdict frame has, whatever the batch held: a fixed schema for engines
# that need one declared up front (Spark's mapInArrow).
VERDICT_SCHEMA_COLUMNS = (
    "row", "op", "flops", "bytes", "roof", "time_s", "machine", "memory_time_s",
    "compute_time_s", "sol_time_s", "bound", "binding_unit", "intensity_flops_per_byte",
    "mix", "regime", "efficiency", "verdict", "reasons")


def judge_loaded(loaded: Loaded, machine: str | Machine | None = None,
                 regime: str | None = None, mix: str | None = None,
                 machines: dict[str, Machine] | None = None) -> Analysis:
    """The analysis of one validated batch."""
    known = builtin_machines() if machines is None else machines
    chosen = resolve_machine(machine, known) if isinstance(machine, str) else machine
    return analyze(loaded.columns, known, chosen, regime, mix)


def judge_frame(records: Any, machine: str | Machine | None = None, regime: str | None = None,
                mix: str | None = None) -> pl.DataFrame:
    """Verdicts of a batch of records (columns as in a records file), one row per valid
    record, in order; `row` is the record's 1-based position in the batch. Malformed records
    are left out (their positions are missing from `row`)."""
    frame = records if isinstance(records, pl.DataFrame) else pl.DataFrame(pl.from_arrow(records))
    lines = np.arange(1, frame.height + 1)
    loaded = load_batch(Batch(frame, lines, "batch:row ", frame_rows(frame, (None, ""))),
                        strict=False, keep_rows=True)
    analysis = judge_loaded(loaded, machine, regime, mix)
    return verdict_frame(analysis).with_columns(
        pl.Series("row", loaded.columns.line, dtype=pl.Int64)).select(
        "row", pl.exclude("row"))


def judged_batches(path: str, machines: dict[str, Machine], machine: Machine | None,
                   regime: str | None, mix: str | None, strict: bool = False,
                   batch_rows: int = BATCH_ROWS) -> Iterator[tuple[Loaded, Analysis | None]]:
    """Each batch of a records file (or folder of shards) with its analysis (None for a batch
    with no good record), in file order; the next batches are read while one is judged
    (`base.overlap`), so memory holds a few batches, never the file."""
    for loaded in in_order(batch_jobs(path, strict=strict, batch_rows=batch_rows)):
        yield loaded, (analyze(loaded.columns, machines, machine, regime, mix)
                       if len(loaded.columns) else None)


class StreamTotals:
    """What a streamed `analyze` keeps across batches: counts, the first skipped rows, and for
    the table the worst rows (the worst N of all are among each batch's worst N). An
    accumulator, not a value: the caller feeds it each batch in order."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.first = True
        self.good = 0
        self.skipped: list[Skipped] = []
        self.skipped_count = 0
        self.verdicts: dict[str, int] = {}
        self.kept: list[Loaded] = []
        self.columns: list[str] | None = None  # the CSV header, once the first batch wrote it
        self.mismatched: dict[str, int] = {}  # rows judged on another card's profile, by device
        self.left_out: dict[str, None] = {}  # CSV: fields first met after the header
        self.batches = 0
        self.last: Analysis | None = None

    def count(self, loaded: Loaded, say_at_most: int) -> list[Skipped]:
        """Count a batch; the skipped records to say, the first `say_at_most` of the file."""
        self.good += len(loaded.columns)
        said = list(loaded.skipped[:max(0, say_at_most - self.skipped_count)])
        self.skipped_count += len(loaded.skipped)
        if not self.skipped and loaded.skipped:
            self.skipped.append(loaded.skipped[0])
        return said

    def keep_worst(self, analysis: Analysis, limit: int | None) -> None:
        self.batches += 1
        self.last = analysis
        for name, n in analysis.counts().items():
            self.verdicts[name] = self.verdicts.get(name, 0) + n

        order = analysis.worst_first()
        worst = analysis.columns.take(order if limit is None else order[:limit])
        # the table reads the kept rows' columns (and extras), never their records: no
        # record is rebuilt, and the batch they came from is let go
        self.kept.append(Loaded(dataclasses.replace(worst, rows=None), ()))

    def worst(self, machines: dict[str, Machine], machine: Machine | None,
              regime: str | None, mix: str | None) -> Analysis:
        """The kept rows, judged again (a row's verdict depends on that row alone)."""
        kept = concat_loaded(self.kept) if self.kept else Loaded(columns_from_valid([]), ())
        return analyze(kept.columns, machines, machine, regime, mix)

    def finish(self) -> str | None:
        """The line on records skipped, if any; InputError when no record was good."""
        if not self.good:
            check_not_empty(self.path, Loaded(columns_from_valid([]), tuple(self.skipped)))
        if self.skipped_count:
            return (f"{self.path}: skipped {self.skipped_count} malformed record(s) of "
                    f"{self.skipped_count + self.good}; --strict fails the file instead")
        return None
