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

`tests/test_stream.py` runs `judge_batches` above over pyarrow record batches on one machine,
as a Spark worker would, and checks it against `roofwise analyze`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from roofwise.output.analysis import Analysis, analyze
from roofwise.output.frame import verdict_frame
from roofwise.profiles.load import builtin_machines, resolve_machine
from roofwise.profiles.machine import Machine
from roofwise.records.read import Batch, Loaded, frame_rows, load_batch

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
