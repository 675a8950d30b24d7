"""Judging a records file a batch at a time: `judged_batches` reads, screens and judges each
batch in file order (memory holds a few batches, never the file), and `StreamTotals` adds up
what `roofwise analyze` says of the whole stream. `roofwise fleet` (the `fleet` stage) runs the
same on the shards of a dataset on a Dask cluster and adds its workers' answers up the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from roofwise.base.overlap import in_order
from roofwise.output.analysis import Analysis, analyze
from roofwise.profiles.machine import Machine
from roofwise.records.read import (
    BATCH_ROWS,
    Loaded,
    Skipped,
    batch_jobs,
    check_not_empty,
    columns_from_valid,
    concat_loaded,
)


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
