"""Benchmark records in: a file (or a folder of shards) read into validated numpy columns.

Read this module top to bottom:

1. the contract (docs/records.md): which fields a record has;
2. `RecordColumns`: the validated rows as numpy columns, what pricing and judging consume;
3. `read_records` / `iter_batches`: every format (JSONL, CSV, Parquet) is read by polars into a
   frame of raw values, a batch at a time, so memory stays bounded on any file size;
4. the screen: column expressions over that frame flag the rows that break the contract (a
   missing field, a negative or non-finite number, an unknown timing, read + write != bytes, a
   unit split that does not sum to flops, p10 > p90) and turn the others into columns;
5. `validate_record`: the same contract checked on one record, which names a flagged row's
   field and what was expected. It runs only for the rows the screen flags (and for the lines
   the engine refuses to parse at all), never for the clean rows.

Bad rows are skipped with their file:line (Parquet: `:row N`) and reason, or fail the file with
`strict`. Null or "" in an optional field means absent.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import functools
import io
import json
import math
import operator
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, overload

import numpy as np
import polars as pl

from roofwise.base import numbers
from roofwise.base.errors import InputError
from roofwise.base.text import shown

# 1. The contract ---------------------------------------------------------------------------

REQUIRED_FIELDS = ("op", "flops", "bytes", "roof", "time_s")
OPTIONAL_FIELDS = ("workload", "device", "timing", "read_bytes", "write_bytes", "flops_by_unit",
                   "time_p10_s", "time_p90_s", "profile", "kernels", "wall_time_s",
                   "footprint_bytes", "cache_state")
# kernel | graph | events | wall (machine.TIMINGS); `device` is the older name for `events`
TIMINGS = ("kernel", "graph", "events", "wall", "device")
# cold: every timed call started with nothing of its inputs in the caches (flushed, as
# `roofwise bench` does); warm: they may hold what earlier calls left
CACHE_STATES = ("cold", "warm")
NUMBER_FIELDS = ("flops", "bytes", "time_s", "read_bytes", "write_bytes", "time_p10_s",
                 "time_p90_s", "kernels", "footprint_bytes")
TEXT_FIELDS = ("op", "roof", "timing", "device", "cache_state")
FORMATS = ("jsonl", "csv", "parquet")
BATCH_ROWS = 200_000  # at most this many rows per batch (and 16 MiB of text, CHUNK_BYTES)


def format_of(path: str | Path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix == ".gz":  # read only where a trace was looked for first: say it is none
        raise InputError(str(path), "a gzipped file that is not a PyTorch profiler trace (a "
                                    "JSON object with traceEvents); records are read from "
                                    ".jsonl, .csv or .parquet, not gzipped")
    raise InputError(str(path), "unknown record format; expected .jsonl, .csv or .parquet")


# 2. The columns ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordColumns:
    op: np.ndarray  # object (str)
    flops: np.ndarray
    bytes: np.ndarray
    roof: np.ndarray  # object (str)
    time_s: np.ndarray
    timing: np.ndarray  # object: a TIMINGS name or ""
    device: np.ndarray  # object: str or ""
    read_bytes: np.ndarray  # NaN where the record has no split
    write_bytes: np.ndarray
    time_p10_s: np.ndarray
    time_p90_s: np.ndarray
    flops_by_unit: Mapping[str, np.ndarray] = field(default_factory=dict)  # 0 where absent
    has_unit_split: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    line: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    rows: Sequence[Mapping[str, Any]] | None = None  # originals, for pass-through in reports
    # Categorical forms of `roof` and `device` (codes into names), so that grouping a million
    # rows never sorts strings; derived from the object columns when not given.
    roof_codes: np.ndarray | None = None
    roof_names: tuple[str, ...] = ()
    device_codes: np.ndarray | None = None
    device_names: tuple[str, ...] = ()
    # The fields outside the contract (workload, profile, ...) and flops_by_unit as read, for
    # writers that pass them through; `extras_json` names the columns holding JSON text.
    # None where no record has such a field. Every reader fills them (`extras_of_records`
    # for records held as dicts), so that no writer walks the rows.
    extras: pl.DataFrame | None = None
    extras_json: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()  # the records' fields in the order the file first names them
    kernels: np.ndarray | None = None  # launches per timed call; NaN (or None): not said
    # distinct bytes the call touches (its working set), where fewer than `bytes`; NaN or
    # None: not said (then `bytes` is the working set)
    footprint_bytes: np.ndarray | None = None
    # object: a CACHE_STATES name, or "" where the record does not say; None: none says
    cache_state: np.ndarray | None = None
    # the file each row comes from, where the rows come from several (a folder's shards,
    # whose lines restart in each): codes into `files`; None: one file (or not known)
    file_codes: np.ndarray | None = None
    files: tuple[str, ...] = ()

    def __len__(self) -> int:
        return int(self.flops.shape[0])

    def roof_categories(self) -> tuple[np.ndarray, tuple[str, ...]]:
        if self.roof_codes is not None:
            return self.roof_codes, self.roof_names
        return categorize(self.roof)

    def device_categories(self) -> tuple[np.ndarray, tuple[str, ...]]:
        if self.device_codes is not None:
            return self.device_codes, self.device_names
        return categorize(self.device)

    def priced_at(self, index: np.ndarray) -> RecordColumns:
        """Rows `index` of what pricing and judging read (the numbers, roof, timing, unit
        split, kernels): one card's share of a file of several, without copying the text
        columns, the extras and the rows that only the writers read (blank here)."""
        blank = np.broadcast_to(np.array("", dtype=object), (len(index),))
        return RecordColumns(
            op=blank, flops=self.flops[index], bytes=self.bytes[index], roof=self.roof[index],
            time_s=self.time_s[index], timing=self.timing[index], device=blank,
            read_bytes=self.read_bytes[index], write_bytes=self.write_bytes[index],
            time_p10_s=self.time_p10_s[index], time_p90_s=self.time_p90_s[index],
            flops_by_unit={u: v[index] for u, v in self.flops_by_unit.items()},
            has_unit_split=self.has_unit_split[index], line=self.line[index],
            roof_codes=None if self.roof_codes is None else self.roof_codes[index],
            roof_names=self.roof_names,
            kernels=None if self.kernels is None else self.kernels[index],
            footprint_bytes=None if self.footprint_bytes is None
            else self.footprint_bytes[index],
            cache_state=None if self.cache_state is None else self.cache_state[index])

    def take(self, index: np.ndarray) -> RecordColumns:
        picked = np.arange(len(self))[index]
        if isinstance(self.rows, LazyRows):
            rows: Sequence[Mapping[str, Any]] | None = self.rows.take(picked)
        else:
            rows = None if self.rows is None else [self.rows[int(i)] for i in picked]
        return RecordColumns(
            op=self.op[index], flops=self.flops[index], bytes=self.bytes[index],
            roof=self.roof[index], time_s=self.time_s[index], timing=self.timing[index],
            device=self.device[index], read_bytes=self.read_bytes[index],
            write_bytes=self.write_bytes[index], time_p10_s=self.time_p10_s[index],
            time_p90_s=self.time_p90_s[index],
            flops_by_unit={u: v[index] for u, v in self.flops_by_unit.items()},
            has_unit_split=self.has_unit_split[index], line=self.line[index], rows=rows,
            roof_codes=None if self.roof_codes is None else self.roof_codes[index],
            roof_names=self.roof_names,
            device_codes=None if self.device_codes is None else self.device_codes[index],
            device_names=self.device_names,
            extras=None if self.extras is None else self.extras[picked],
            extras_json=self.extras_json, fields=self.fields,
            kernels=None if self.kernels is None else self.kernels[index],
            footprint_bytes=None if self.footprint_bytes is None
            else self.footprint_bytes[index],
            cache_state=None if self.cache_state is None else self.cache_state[index],
            file_codes=None if self.file_codes is None else self.file_codes[index],
            files=self.files)

    def field_values(self, name: str, index: np.ndarray) -> list[Any]:
        """A field outside the contract (a workload) at rows `index`, as read: JSON text
        decoded, None where a row lacks it. Read from `extras`, never by rebuilding records."""
        index = np.asarray(index, dtype=np.int64)
        if self.extras is None or name not in self.extras.columns:
            return [None] * len(index)
        values = self.extras[name].gather(index).to_list()
        if name not in self.extras_json:
            return values
        return [None if v is None or v == "" else _json_or_text(v) for v in values]

    def kernel_count(self, i: int) -> int:
        """Launches per timed call of row `i`, 1 where the record does not say."""
        value = np.nan if self.kernels is None else float(self.kernels[i])
        return 1 if np.isnan(value) else int(value)

    def kernel_counts(self) -> np.ndarray:
        """Launches per timed call, 1 where the record does not say."""
        if self.kernels is None:
            return np.ones(len(self))
        return np.where(np.isnan(self.kernels), 1.0, self.kernels)

    def cold_cache(self) -> np.ndarray:
        """Rows timed with their caches flushed first (`cache_state: cold`)."""
        if self.cache_state is None:
            return np.zeros(len(self), dtype=bool)
        return np.asarray(self.cache_state) == "cold"

    def working_set_bytes(self) -> np.ndarray:
        """Each call's working set: its footprint where the record says one, else its bytes
        (read and written: each tensor touched once, as most calls do)."""
        if self.footprint_bytes is None:
            return self.bytes
        return np.where(np.isnan(self.footprint_bytes), self.bytes, self.footprint_bytes)


class LazyRows(Sequence[Mapping[str, Any]]):
    """Read-only records, built from their file only when one is shown.

    Building a million dicts costs more than reading the file, and reports show a few rows.
    `fetch(positions)` returns the validated records at those positions of the file's table;
    `index` maps this sequence onto the table, so `take` only composes index arrays. The last
    block fetched is kept, so walking the rows in order converts a block at a time.
    """

    BLOCK = 256

    def __init__(self, fetch: Callable[[np.ndarray], list[dict[str, Any]]],
                 index: np.ndarray) -> None:
        self._fetch = fetch
        self._index = np.asarray(index, dtype=np.int64)
        self._block: tuple[int, list[dict[str, Any]]] = (-1, [])

    def __len__(self) -> int:
        return int(self._index.shape[0])

    @overload
    def __getitem__(self, key: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, key: slice) -> LazyRows: ...

    def __getitem__(self, key: int | slice) -> Mapping[str, Any] | LazyRows:
        if isinstance(key, slice):
            return LazyRows(self._fetch, self._index[key])
        k = operator.index(key)
        k = k + len(self) if k < 0 else k
        if not 0 <= k < len(self):
            raise IndexError(f"row {key} of {len(self)}")
        start = k - k % self.BLOCK
        if self._block[0] != start:
            self._block = (start, self._fetch(self._index[start:start + self.BLOCK]))
        return self._block[1][k - start]

    def take(self, index: np.ndarray) -> LazyRows:
        return LazyRows(self._fetch, self._index[index])


def _json_or_text(text: str) -> Any:
    """JSON text decoded; text that is not JSON (a string read without its quotes) as is."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def categorize(values: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    """Integer codes and the distinct names they index, in first-seen order. Text (what the
    columns hold) is looked up in C, a dict built from the distinct values; anything else
    goes through `str` one value at a time."""
    listed = values.tolist() if isinstance(values, np.ndarray) else list(values)
    distinct = dict.fromkeys(listed)
    if all(type(v) is str for v in distinct):
        index = {v: k for k, v in enumerate(distinct)}
        return (np.fromiter(map(index.__getitem__, listed), np.int32, len(listed)),
                tuple(index))
    named: dict[str, int] = {}
    codes = np.fromiter((named.setdefault(str(v), len(named)) for v in listed), np.int32,
                        len(listed))
    return codes, tuple(named)


@dataclass(frozen=True)
class Skipped:
    where: str
    problem: str

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}"


@dataclass(frozen=True)
class Loaded:
    columns: RecordColumns
    skipped: tuple[Skipped, ...]
    file_bytes: int = 0  # the share of its file this batch covers: what a progress bar counts
    source: str = ""  # the file these rows come from, as messages name it ("": several files)


def concat_loaded(parts: Sequence[Loaded]) -> Loaded:
    """Batches (or shards) as one: columns end to end, skipped rows in order."""
    if len(parts) == 1:
        return parts[0]
    columns = [p.columns for p in parts]
    units = sorted({u for c in columns for u in c.flops_by_unit})

    def cat(name: str) -> np.ndarray:
        return np.concatenate([np.asarray(getattr(c, name)) for c in columns])

    rows = (None if any(c.rows is None for c in columns)
            else _chained_rows([c.rows for c in columns if c.rows is not None]))
    named = next((c.extras.columns[0] for c in columns if c.extras is not None), None)
    extras = None if named is None else pl.concat(
        [c.extras if c.extras is not None else pl.DataFrame({named: [None] * len(c)})
         for c in columns], how="diagonal_relaxed")
    roof_codes, roof_names = categorize(cat("roof"))
    device_codes, device_names = categorize(cat("device"))
    file_codes, files = _files_of(parts)
    return Loaded(RecordColumns(
        op=cat("op"), flops=cat("flops"), bytes=cat("bytes"), roof=cat("roof"),
        time_s=cat("time_s"), timing=cat("timing"), device=cat("device"),
        read_bytes=cat("read_bytes"), write_bytes=cat("write_bytes"),
        time_p10_s=cat("time_p10_s"), time_p90_s=cat("time_p90_s"),
        flops_by_unit={u: np.concatenate([c.flops_by_unit.get(u, np.zeros(len(c)))
                                          for c in columns]) for u in units},
        has_unit_split=cat("has_unit_split"), line=cat("line"), rows=rows,
        roof_codes=roof_codes, roof_names=roof_names, device_codes=device_codes,
        device_names=device_names, extras=extras,
        extras_json=tuple(sorted({n for c in columns for n in c.extras_json})),
        fields=tuple(dict.fromkeys(f for c in columns for f in c.fields)),
        kernels=np.concatenate([np.full(len(c), np.nan) if c.kernels is None else c.kernels
                                for c in columns]),
        footprint_bytes=None if all(c.footprint_bytes is None for c in columns) else
        np.concatenate([np.full(len(c), np.nan) if c.footprint_bytes is None
                        else c.footprint_bytes for c in columns]),
        cache_state=None if all(c.cache_state is None for c in columns) else
        np.concatenate([np.full(len(c), "", dtype=object) if c.cache_state is None
                        else np.asarray(c.cache_state, dtype=object) for c in columns]),
        file_codes=file_codes, files=files),
        tuple(s for p in parts for s in p.skipped), sum(p.file_bytes for p in parts),
        parts[0].source if len({p.source for p in parts}) == 1 else "")


def _files_of(parts: Sequence[Loaded]) -> tuple[np.ndarray | None, tuple[str, ...]]:
    """Each row's file (`RecordColumns.file_codes`, `files`) for parts end to end: None where
    they are one file, or where a part knows not its own."""
    per_part = [(p.columns.files, p.columns.file_codes) if p.columns.file_codes is not None
                else ((p.source,), np.zeros(len(p.columns), dtype=np.int32)) for p in parts]
    names = tuple(dict.fromkeys(n for files, _ in per_part for n in files))
    if len(names) < 2 or "" in names:
        return None, ()
    at = {n: k for k, n in enumerate(names)}
    return np.concatenate([np.array([at[n] for n in files], dtype=np.int32)[codes]
                           for files, codes in per_part]), names


def _chained_rows(parts: list[Sequence[Mapping[str, Any]]]) -> LazyRows:
    starts = np.cumsum([0, *(len(p) for p in parts)])

    def fetch(at: np.ndarray) -> list[dict[str, Any]]:
        which = np.searchsorted(starts, at, side="right") - 1
        return [dict(parts[k][int(a - starts[k])]) for k, a in zip(which.tolist(), at.tolist(),
                                                                   strict=True)]

    return LazyRows(fetch, np.arange(int(starts[-1])))


# 3. Reading ---------------------------------------------------------------------------------


def read_records(path: str | Path, strict: bool = False, keep_rows: bool = True,
                 columnar: bool = True,
                 progress: Callable[[Loaded], None] | None = None) -> Loaded:
    """Validated columns of a file or a folder of shards; malformed rows are skipped (and
    listed) unless `strict`. `progress` is called with each file (or shard) as it is read.

    A file with no valid record at all is bad input, whatever `strict` says. `columnar=False`
    reads row by row through `validate_record` (the reference the screen is tested against).
    """
    parts = []
    for part in iter_batches(path, strict, keep_rows, columnar, batch_rows=None):
        parts.append(part)
        if progress is not None:
            progress(part)
    loaded = concat_loaded(parts) if parts else Loaded(columns_from_valid([]), ())
    check_not_empty(path, loaded)
    return loaded


def check_not_empty(path: str | Path, loaded: Loaded) -> None:
    """No valid record at all is bad input: say why, from the first skipped row."""
    if len(loaded.columns):
        return
    if loaded.skipped:
        first = loaded.skipped[0]
        raise InputError(first.where, f"{first.problem} (and no valid record in the file: "
                                      f"{len(loaded.skipped)} malformed)")
    raise InputError(str(path), "no records; expected one record per line (or row)")


def record_files(path: str | Path) -> list[Path]:
    """The file itself, or a folder's shards (*.jsonl, *.ndjson, *.csv, *.parquet) by name."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    shards = sorted(p for p in path.iterdir() if p.is_file() and _is_record_file(p))
    if not shards:
        raise InputError(str(path), "is a directory with no record files and no profiler "
                                    "trace; expected *.jsonl, *.csv or *.parquet shards, or one "
                                    "Kineto trace per rank (.json or .json.gz)")
    return shards


def _is_record_file(path: Path) -> bool:
    try:
        format_of(path)
    except InputError:
        return False
    return not path.name.startswith(".")


def iter_batches(path: str | Path, strict: bool = False, keep_rows: bool = True,
                 columnar: bool = True, batch_rows: int | None = BATCH_ROWS
                 ) -> Iterator[Loaded]:
    """Validated batches of about `batch_rows` rows (None: a file at a time), in file order.

    A folder is read shard by shard, in name order. Memory holds one batch at a time.
    """
    for job in batch_jobs(path, strict, keep_rows, columnar, batch_rows):
        yield job()


def batch_jobs(path: str | Path, strict: bool = False, keep_rows: bool = True,
               columnar: bool = True, batch_rows: int | None = BATCH_ROWS
               ) -> Iterator[Callable[[], Loaded]]:
    """`iter_batches` in two steps: advancing this cuts the next batch out of its file (in
    file order, one at a time); calling what it gives parses, screens and validates that
    batch, which several threads may do at once (`overlap.in_order`)."""
    for file in record_files(path):
        kind = _check_file(file)
        if not columnar:
            jobs: Iterable[Callable[[], Loaded]] = [functools.partial(
                from_records, iter_raw_records(file), strict=strict, keep_rows=keep_rows)]
        elif kind == "parquet":
            jobs = _parquet_jobs(file, strict, keep_rows, batch_rows)
        else:
            jobs = _text_jobs(file, kind, strict, keep_rows, batch_rows)
        for job in jobs:  # each batch says its file: a folder's lines restart in each shard
            yield functools.partial(_from_file, job, str(file))


def _from_file(job: Callable[[], Loaded], source: str) -> Loaded:
    return dataclasses.replace(job(), source=source)


def _check_file(path: Path) -> str:
    if path.is_dir():
        raise InputError(str(path), "is a directory; expected a record file")
    kind = format_of(path)
    if not path.is_file():
        raise InputError(str(path), "no such file")
    return kind


@dataclass(frozen=True)
class Batch:
    """Raw values of a batch as read, before the screen.

    `frame` has one row per record the engine parsed; `line` is each row's line in the file
    (Parquet: its 1-based row); `raw_rows(positions)` gives those rows back as the per-row
    reader yields them, for `validate_record`; `refused` are (line, raw) pairs the engine could
    not parse at all (a line that is not a JSON object, invalid UTF-8), already known bad.
    """
    frame: pl.DataFrame
    line: np.ndarray
    where_prefix: str
    raw_rows: Callable[[np.ndarray], list[Any]]
    refused: tuple[tuple[int, Any], ...] = ()
    json_columns: frozenset[str] = frozenset()  # text columns holding JSON (JSONL's objects)

    def where(self, line: int) -> str:
        return f"{self.where_prefix}{line}"


def _parquet_jobs(path: Path, strict: bool, keep_rows: bool, batch_rows: int | None
                  ) -> Iterator[Callable[[], Loaded]]:
    try:
        frame = pl.scan_parquet(path)
        total = int(frame.select(pl.len()).collect().item())
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise _unreadable_parquet(path, exc) from None
    step = total if batch_rows is None else max(1, batch_rows)
    for start in range(0, max(total, 1), max(step, 1)):
        yield functools.partial(_parquet_batch, path, frame, start, step, total, strict,
                                keep_rows)


def _parquet_batch(path: Path, frame: pl.LazyFrame, start: int, step: int, total: int,
                   strict: bool, keep_rows: bool) -> Loaded:
    try:
        part = frame.slice(start, step).collect()
        loaded = load_batch(Batch(part, np.arange(start + 1, start + part.height + 1),
                                  f"{path}:row ", frame_rows(part, (None,))), strict, keep_rows)
        # a Parquet file's bytes are its rows' share of it
        return dataclasses.replace(loaded, file_bytes=path.stat().st_size * part.height
                                   // max(total, 1))
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise _unreadable_parquet(path, exc) from None


def _unreadable_parquet(path: Path, exc: BaseException) -> InputError:
    return InputError(str(path), f"not a readable Parquet file ({_one_line(exc)})")


def frame_rows(frame: pl.DataFrame, absent: tuple[Any, ...]
                ) -> Callable[[np.ndarray], list[Any]]:
    def rows(at: np.ndarray) -> list[Any]:
        picked = frame[at.tolist()].to_dicts() if len(at) else []
        return [{k: v for k, v in row.items() if v not in absent} for row in picked]
    return rows


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else f"{text[:120]} ... {text[-60:]}"


CHUNK_BYTES = 1 << 24  # when streaming, read text files 16 MiB at a time (memory stays bounded)


def _text_jobs(path: Path, kind: str, strict: bool, keep_rows: bool,
               batch_rows: int | None) -> Iterator[Callable[[], Loaded]]:
    """JSONL or CSV, a batch of whole lines at a time; lines are numbered across batches."""
    with path.open("rb") as handle:
        if handle.read(3) != b"\xef\xbb\xbf":
            handle.seek(0)
        header = b""
        if kind == "csv":
            header = _first_line(handle) + b"\n"
            _check_header(path, _csv_header(path, header))
        first_line = 2 if kind == "csv" else 1
        for data, newline in _line_batches(handle, batch_rows, csv_quotes=kind == "csv"):
            yield functools.partial(_text_batch, path, kind, header, data, newline, first_line,
                                    strict, keep_rows)
            # a CR kept inside a quoted cell still ends a line for the csv module's count
            first_line += len(newline) + (0 if data.endswith(b"\n") else 1) + (
                data.count(b"\r") - data.count(b"\r\n") if b"\r" in data else 0)


def _text_batch(path: Path, kind: str, header: bytes, data: bytes, newline: np.ndarray,
                first_line: int, strict: bool, keep_rows: bool) -> Loaded:
    if kind == "jsonl":
        batch = _jsonl_batch(path, data, newline, first_line)
    else:
        batch = _csv_batch(path, header, data, newline, first_line)
    loaded = (load_batch(batch, strict, keep_rows) if batch is not None else
              _per_row(path, kind, header, data, first_line, strict, keep_rows))
    return dataclasses.replace(loaded, file_bytes=len(data))


def _first_line(handle: IO[bytes]) -> bytes:
    """The first line of the rest of `handle` without its end (LF, CRLF or a bare CR), the
    handle left just after that end."""
    start = handle.tell()
    line = b""
    while True:
        block = handle.read(1 << 16)
        found = _LINE_END.search(block)
        if found is not None:
            line += block[:found.start()]
            end = len(line) + (2 if block[found.start():found.start() + 2] == b"\r\n" else 1)
            if found.group() == b"\r" and found.end() == len(block) and handle.read(1) == b"\n":
                end += 1  # a CRLF cut between two blocks
            handle.seek(start + end)
            return line
        line += block
        if not block:
            return line


_LINE_END = re.compile(rb"\r\n?|\n")


def bare_cr_as_lf(data: bytes, csv_quotes: bool = False, inside: bool = False) -> bytes:
    """`data` with each bare CR (one not followed by LF) as LF: a bare CR ends a line (old Mac
    files, "CSV (Macintosh)"), and one byte for one keeps every offset. A CR that is the last
    byte stays: the caller decides whether an LF follows it.

    With `csv_quotes`, a bare CR inside a quoted CSV cell is the cell's text and stays: it is
    inside where the quotes before it are odd in number (`inside`: `data` starts in a cell)."""
    if b"\r" not in data:
        return data
    buffer = np.frombuffer(data, dtype=np.uint8)
    cr = np.flatnonzero(buffer[:-1] == 13)
    bare = cr[buffer[cr + 1] != 10]
    if csv_quotes and len(bare) and (inside or b'"' in data):
        before = np.searchsorted(np.flatnonzero(buffer == 34), bare)
        bare = bare[(before + inside) % 2 == 0]
    if not len(bare):
        return data
    edited = buffer.copy()
    edited[bare] = 10
    return edited.tobytes()


def _line_batches(handle: IO[bytes], batch_rows: int | None, csv_quotes: bool = False
                  ) -> Iterator[tuple[bytes, np.ndarray]]:
    """The rest of the file in pieces of at most `batch_rows` whole lines (None: one piece),
    each with the offsets of its newlines (found once: numbering and slicing lines use them).
    A bare CR is a line end: it is read as LF (`bare_cr_as_lf`). With `csv_quotes`, a piece
    ends only where a record does: never inside a quoted cell (which may hold LFs and CRs)."""
    pending = b""  # the start of a record cut off by the last chunk's end
    size = CHUNK_BYTES >> 1  # a smaller first chunk: judging starts sooner (4 MiB paid for
    # one more batch than it saved in waiting: 5-9% slower on 200,000-row files)
    while True:
        chunk = handle.read() if batch_rows is None else handle.read(size)
        size = min(2 * size, CHUNK_BYTES)
        if chunk.endswith(b"\r"):  # is it CRLF? the next byte says
            chunk += handle.read(1)
        if chunk.endswith(b"\r"):  # the file's last byte: a line end
            chunk = chunk[:-1] + b"\n"
        # every piece starts outside quotes, so `pending`'s quotes say where the chunk starts
        inside = csv_quotes and pending.count(b'"') % 2 == 1
        chunk = bare_cr_as_lf(chunk, csv_quotes, inside)
        if chunk and batch_rows is not None:  # keep a partial last record for the next chunk
            ends = _record_ends(chunk, csv_quotes, inside)
            cut = int(ends[-1]) + 1 if len(ends) else 0  # (one copy of the chunk, not three)
            if not cut:
                data, pending = b"", pending + chunk
            elif cut == len(chunk):
                data, pending = pending + chunk, b""
            else:
                data, pending = pending + memoryview(chunk)[:cut], chunk[cut:]
        else:
            data, pending = pending + chunk, b""
        newline = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
        ends = _record_ends(data, csv_quotes, False, newline)
        start, first = 0, 0
        for k in range(batch_rows or len(ends) + 1, len(ends) + 1, batch_rows or 1):
            end = int(ends[k - 1])
            last = int(np.searchsorted(newline, end, side="right"))
            yield data[start:end + 1], newline[first:last] - start
            start, first = end + 1, last
        if start < len(data):
            yield data[start:], newline[first:] - start
        if not chunk or batch_rows is None:
            return


def _record_ends(data: bytes, csv_quotes: bool, inside: bool,
                 newline: np.ndarray | None = None) -> np.ndarray:
    """The offsets of the LFs of `data` that end a record: every LF, or with `csv_quotes` those
    outside quotes (after an even number of `"`, counting from `inside`)."""
    buffer = np.frombuffer(data, dtype=np.uint8)
    if newline is None:
        newline = np.flatnonzero(buffer == 10)
    if not csv_quotes or not (inside or b'"' in data):
        return newline
    quotes = np.searchsorted(np.flatnonzero(buffer == 34), newline)
    return newline[(quotes + inside) % 2 == 0]


def _per_row(path: Path, kind: str, header: bytes, data: bytes, first_line: int, strict: bool,
             keep_rows: bool) -> Loaded:
    """The lines the engine cannot number (a lone CR, a quoted cell over several lines) or that
    hold something the screen does not handle, read by Python's own readers."""
    return from_records(_per_row_pairs(path, kind, header, data, first_line), strict=strict,
                        keep_rows=keep_rows)


def _per_row_pairs(path: Path, kind: str, header: bytes, data: bytes, first_line: int
                   ) -> list[tuple[str, Any]]:
    if kind == "jsonl":
        text, bad = _utf8_lines(path, data, first_line)
        pairs = list(_jsonl_lines(path, text, first_line))
    else:  # a quoted cell may span lines: a bad byte costs its record, however many lines
        bad = []
        text = data.decode("utf-8", errors="surrogateescape")
        pairs = [(where, _utf8_record(record)) for where, record in
                 _csv_rows(path, header.decode("utf-8", "replace") + text, first_line - 1)]
    pairs += [(f"{path}:{line}", Unreadable(problem)) for line, problem in bad]
    pairs.sort(key=lambda pair: _line_number(pair[0]))
    return pairs


def _utf8_lines(path: Path, data: bytes, first_line: int) -> tuple[str, list[tuple[int, str]]]:
    """The text with every line that is not UTF-8 blanked, and those lines' numbers and
    problems: one bad byte costs its line, not the file."""
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError:
        pass
    lines = data.decode("utf-8", errors="surrogateescape").split("\n")
    bad: list[tuple[int, str]] = []
    for k, line in enumerate(lines):
        found = _NOT_UTF8.search(line)
        if found:
            bad.append((first_line + k, f"not UTF-8 text (at character {found.start() + 1}); "
                                        "expected UTF-8 records"))
            lines[k] = ""
    return "\n".join(lines), bad


_NOT_UTF8 = re.compile("[\udc80-\udcff]")


def _is_utf8(data: bytes) -> bool:
    if data.isascii():  # most records: a check a word at a time, no decoded copy
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _utf8_record(record: Any) -> Any:
    """A CSV record whose cells hold a byte that is not UTF-8 (decoded as a surrogate escape)
    is unreadable as a whole."""
    if isinstance(record, dict):
        for value in record.values():
            found = _NOT_UTF8.search(value) if isinstance(value, str) else None
            if found:
                return Unreadable(f"not UTF-8 text (at character {found.start() + 1}); "
                                  "expected UTF-8 records")
    return record


_WHITE = np.frombuffer(b" \t\r\n\x0b\x0c", dtype=np.uint8)


def _lines(data: bytes, newline: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (before the newline) offsets of each physical line of `data`, whose
    newlines are at `newline`."""
    starts = np.concatenate(([0], newline + 1))
    ends = np.concatenate((newline, [len(data)]))
    if starts[-1] == len(data):  # the text ends with a newline
        starts, ends = starts[:-1], ends[:-1]
    return starts, ends


def _jsonl_batch(path: Path, data: bytes, newline: np.ndarray, first_line: int
                 ) -> Batch | None:
    """Whole lines of JSONL through polars' NDJSON reader.

    Lines that cannot be records (not UTF-8, not starting with `{`) are set aside first and
    blanked, so that the engine only ever sees candidate objects; if it still refuses the
    batch (one line of broken JSON, a NaN), the batch is halved until the culprit lines stand
    alone, and only those are parsed by Python to name what is wrong with them.
    """
    if not _is_utf8(data):
        return None  # bad bytes cost their record, which may span lines: the csv reader knows
    refused: list[tuple[int, Any]] = []
    if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
        return None  # a lone CR ends a line for Python, not for the engine
    starts, ends = _lines(data, newline)
    buffer = np.frombuffer(data, dtype=np.uint8)
    first = buffer[np.minimum(starts, max(len(data) - 1, 0))] if len(data) else buffer[:0]
    empty = ends == starts
    candidate = ~empty & (first == ord("{"))
    # the engine reads a lone surrogate escape as some other character: Python says which
    escaped = np.zeros(len(starts), dtype=bool)
    at = [m.start() for m in _SURROGATE_ESCAPE.finditer(data)] if b"\\u" in data else []
    if at:
        escaped[np.searchsorted(starts, np.array(at), side="right") - 1] = True
    blank = np.zeros(len(starts), dtype=bool)
    edited = bytearray(data) if (~candidate & ~empty | escaped).any() else None
    for k in np.flatnonzero(~candidate & ~empty | escaped).tolist():
        text = data[starts[k]:ends[k]].decode("utf-8")
        if not text.strip():
            blank[k] = True
        else:
            record = _json_line(text)
            if isinstance(record, Mapping) and not_text(record) is None:
                candidate[k] = True
                continue
            candidate[k] = False
            refused.append((first_line + k, record))
        assert edited is not None
        edited[starts[k]:ends[k]] = b" " * int(ends[k] - starts[k])
    if edited is not None:
        data = bytes(edited)
    rows = np.flatnonzero(candidate)
    frames: list[pl.DataFrame] = []
    kept: list[np.ndarray] = []
    json_columns: set[str] = set()
    _parse_jsonl(data, starts, ends, rows, frames, kept, refused, first_line, json_columns)
    frame = (pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else
             frames[0] if frames else pl.DataFrame())
    index = np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64)
    if frame.height != len(index):  # never pair a row with another line's number
        return None
    suspect = np.flatnonzero(_suspects(data, frame, index, json_columns))
    if len(suspect):  # Python reads these lines: a duplicate key, a text field that is not
        keep = np.ones(frame.height, dtype=bool)  # text, is refused with its line
        for p in suspect.tolist():
            k = int(index[p])
            record = _json_line(data[starts[k]:ends[k]].decode("utf-8"))
            if not isinstance(record, Mapping) or not_text(record) is not None:
                keep[p] = False
                refused.append((first_line + k, record))
        if not keep.all():
            frame, index = frame.filter(pl.Series(keep)), index[keep]

    def raw_rows(at: np.ndarray) -> list[Any]:
        return [_json_line(data[starts[p]:ends[p]].decode("utf-8"))
                for p in index[at].tolist()]

    return Batch(frame, index + first_line, f"{path}:", raw_rows,
                 tuple(sorted(refused, key=lambda r: r[0])), frozenset(json_columns))


# What polars makes of a JSON value that is not a string in a text column: `5`, `-2`, `1500`
# (1.5e3), `true`, `false`, `[1, 2]`, `{"x": 1}` (a string reading so sends its line to Python).
_NOT_STRING = r"^(?:[-0-9]|true$|false$|[\[{])"
_KEY = r'"(?:[^"\\]|\\.)*"\s*:'  # a key token: a JSON string and its colon
_TIGHT_KEY = r'"[^"]*":'  # the same in text with no escape, the colon right after the key


def _suspects(data: bytes, frame: pl.DataFrame, index: np.ndarray, json_columns: set[str]
              ) -> np.ndarray:
    """The frame's rows that Python must read to tell whether they are records: a key named
    twice in one object (polars keeps the first value, Python the last: ambiguous), a text
    field that holds a number, a bool, an object or an array (polars writes it as text).

    Cheap where nothing is wrong: outside strings, each `:` of the batch's lines follows one
    key, whose value the frame holds; so when the colons of the lines are as many as the
    frame's values and the colons inside the text it holds, no top-level key is named twice,
    and only the objects kept as JSON text are checked, per row. When the counts disagree (a
    null, a key the schema does not name, a `\\u003a`), the keys of every line are."""
    n = frame.height
    suspect = np.zeros(n, dtype=bool)
    if not n:
        return suspect
    strings = [c for c in frame.columns if frame.schema[c] == pl.String]
    text = [c for c in TEXT_FIELDS if c in strings]
    for c in text:  # few distinct values: the rows are looked at only where one reads so
        if frame[c].unique().str.contains(_NOT_STRING).any():
            suspect |= frame[c].str.contains(_NOT_STRING).fill_null(False).to_numpy()
    values = n * frame.width - sum(frame.null_count().row(0))
    inside = frame.select(pl.sum_horizontal(
        pl.col(c).str.count_matches(":", literal=True).sum() for c in strings)).item() \
        if strings else 0
    escaped = b"\\" in data
    if data.count(b":") == values + (inside or 0) and not (escaped and b"\\u003" in data):
        for c in strings:
            if c in json_columns or c == "flops_by_unit":
                suspect |= _repeated_keys_by_value(frame[c], escaped)
        return suspect
    lines = pl.Series([data.decode("utf-8")]).str.split("\n").explode().gather(index)
    return suspect | _repeated_keys(lines, True)


def _repeated_keys_by_value(texts: pl.Series, escaped: bool) -> np.ndarray:
    """`_repeated_keys` of each text, looked at once per distinct text where they repeat (a
    sweep's workloads, timed again on every commit and card)."""
    sample = texts.head(4096)  # most texts distinct in the first rows: no pass for distinct
    if 2 * sample.n_unique() > len(sample):
        return _repeated_keys(texts, escaped)
    distinct = texts.unique()
    flagged = distinct.filter(pl.Series(_repeated_keys(distinct, escaped)))
    return texts.is_in(flagged.implode()).fill_null(False).to_numpy().astype(bool)


def _repeated_keys(texts: pl.Series, escaped: bool) -> np.ndarray:
    """Per text of JSON: whether a key repeats in it (at any depth: a false alarm where two
    objects name the same key, which Python then clears). Without `escaped` (no backslash in
    the texts) a key is a tight `"...":`, and a text with another colon is suspect too."""
    if not escaped:
        keys = texts.str.extract_all(_TIGHT_KEY)
        return ((keys.list.len() != keys.list.n_unique())
                | (keys.list.len() != texts.str.count_matches(":", literal=True))
                ).fill_null(False).to_numpy()
    keys = texts.str.extract_all(_KEY).list.eval(pl.element().str.strip_chars_end(" \t\r:"))
    return ((keys.list.len() != keys.list.n_unique())
            | keys.list.eval(pl.element().str.contains("\\", literal=True)).list.any()
            ).fill_null(False).to_numpy()


_JSON_TEXT = {name: pl.String for name in (*TEXT_FIELDS, *NUMBER_FIELDS, "flops_by_unit")}
_ALONE = 32  # a refused run of at most this many lines is parsed line by line


def _read_ndjson(piece: bytes, json_columns: set[str], sample: bytes | None = None
                 ) -> pl.DataFrame | None:
    """Lines of JSON objects as a frame, or None where the engine refuses them.

    The schema is inferred from `sample` (some of the lines; all of `piece` when None), then
    the whole piece is read against it, which costs half of inferring over every line. Every
    contract field is in the schema, so that a field first met after the sample is read all
    the same: the number fields as numbers where every value is a JSON number (the engine
    then parses them as float() would), else as text, like the other fields, so that a field
    that is a number in one row and a string in another does not refuse the batch (the
    screen parses them). Objects and lists
    outside the contract (a workload) are kept as their JSON text; a key outside the contract
    that the sample never shows is not passed through to the verdicts (`rows` still has it).
    """
    try:  # the schema alone: half the cost of reading the sample into a frame
        inferred = pl.scan_ndjson(io.BytesIO(piece if sample is None else sample),
                                  infer_schema_length=None).collect_schema()
    except pl.exceptions.PolarsError:
        return None
    schema: dict[str, pl.DataType] = {}
    for name, kind in inferred.items():
        if name in _JSON_TEXT:
            schema[name] = pl.String()
        elif kind.is_nested():
            schema[name] = pl.String()
            json_columns.add(name)
        else:
            schema[name] = kind if kind != pl.Null else pl.String()
    for name in _JSON_TEXT:
        schema.setdefault(name, pl.String())
    typed = {**schema, **{name: pl.Float64() for name in NUMBER_FIELDS}}
    for attempt in (typed, schema):
        try:
            frame = pl.read_ndjson(piece, schema=attempt)
            break
        except pl.exceptions.PolarsError:
            continue
    else:
        return None
    # a contract field no row names is no column (as if read without a schema)
    empty = [c for c in _JSON_TEXT if c not in inferred and frame[c].null_count() == frame.height]
    if len(empty) == frame.width:  # keep one column: a frame of no columns loses its rows in
        empty = empty[1:]          # a concat, and every later row would shift onto a wrong line
    return frame.drop(empty) if empty else frame


_SAMPLE_LINES = 2000  # lines a batch's schema is inferred from: the first and a spread


def _parse_jsonl(data: bytes, starts: np.ndarray, ends: np.ndarray, rows: np.ndarray,
                 frames: list[pl.DataFrame], kept: list[np.ndarray],
                 refused: list[tuple[int, Any]], first_line: int, json_columns: set[str]
                 ) -> None:
    """Parse the lines `rows` (line indexes, in order) into frames; halve on refusal."""
    if not len(rows):
        return
    piece = data[starts[rows[0]]:ends[rows[-1]]]
    sample = None
    if len(rows) > 2 * _SAMPLE_LINES:
        # the first lines as one slice, then a spread over the rest
        head = data[starts[rows[0]]:ends[rows[_SAMPLE_LINES - 1]]]
        spread = rows[np.linspace(_SAMPLE_LINES, len(rows) - 1, _SAMPLE_LINES).astype(np.int64)]
        sample = b"\n".join([head, *(data[starts[k]:ends[k]] for k in spread.tolist())])
    frame = _read_ndjson(piece, json_columns, sample)
    if frame is not None and frame.height == len(rows):
        frames.append(frame)
        kept.append(rows)
        return
    if len(rows) <= _ALONE:
        for k in rows.tolist():
            record = _json_line(data[starts[k]:ends[k]].decode("utf-8"))
            if isinstance(record, Mapping):
                # one object the engine refused within a run: keep it if it reads alone
                single = _read_ndjson(data[starts[k]:ends[k]], json_columns)
                if single is not None and single.height == 1:
                    frames.append(single)
                    kept.append(np.array([k]))
                    continue
            refused.append((first_line + k, record if not isinstance(record, Mapping)
                            else _Unscreened(record)))
        return
    half = len(rows) // 2
    for part in (rows[:half], rows[half:]):
        _parse_jsonl(data, starts, ends, part, frames, kept, refused, first_line, json_columns)


class _Unscreened(dict[str, Any]):
    """A JSON object the engine would not read (NaN, a number beyond its range): it goes
    through `validate_record` alone, which may still accept it."""


def _csv_header(path: Path, line: bytes) -> list[str]:
    text = line.decode("utf-8", errors="replace").rstrip("\r\n")
    try:
        with _any_cell_size():
            return next(csv.reader([text]), [])
    except csv.Error as exc:  # an open quote, a line end inside a cell
        raise InputError(f"{path}:1", f"unreadable CSV header ({_one_line(exc)})") from None


def _csv_batch(path: Path, header: bytes, data: bytes, newline: np.ndarray, first_line: int
               ) -> Batch | None:
    """Whole lines of CSV through polars (`_read_csv`), so that one bad cell flags its row
    instead of failing the file. A row the screen flags is given to `validate_record` as the
    csv module reads its line: the cells as text, as the file wrote them. The engine refuses
    a byte that is not UTF-8; the csv reader then says which record it costs (a quoted cell
    may span lines)."""
    if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
        return None
    if data.startswith(b"\xef\xbb\xbf"):  # the engine drops it: a cell's, not the file's
        return None
    names = _csv_header(path, header)
    frame = _read_csv(data, names)
    if frame is None:
        return None  # a row with the wrong number of cells: the csv reader says where
    starts, ends = _lines(data, newline)
    if frame.columns != names or len(starts) != frame.height:
        return None  # a quoted cell over several lines: the csv reader numbers those
    length = ends - starts
    carriage = np.frombuffer(data, dtype=np.uint8)[np.maximum(ends - 1, 0)] == 13 if len(
        data) else np.zeros(0, dtype=bool)
    keep = (length > 1) | ((length == 1) & ~carriage)
    index = np.flatnonzero(keep)
    frame = frame[index.tolist()] if len(index) != frame.height else frame

    def raw_rows(at: np.ndarray) -> list[Any]:
        lines = [data[starts[k]:ends[k]].decode("utf-8") for k in index[at].tolist()]
        with _any_cell_size():
            return [{k: v for k, v in zip(names, cells, strict=False) if v != ""}
                    for cells in csv.reader(lines)]

    return Batch(frame, index + first_line, f"{path}:", raw_rows)


def _read_csv(data: bytes, names: list[str]) -> pl.DataFrame | None:
    """CSV lines (no header) as cells of text under `names`, the number fields parsed by the
    engine where every cell of them parses (what it reads, float() reads the same; what it
    refuses, such as `1_0` or `12 `, sends the batch to the all-text read, whose screen leaves
    those cells to Python). The lines are read as they lie, with no header copied in front."""
    for numbers_typed in (True, False):
        schema = {n: pl.Float64 for n in names if n in NUMBER_FIELDS} if numbers_typed else {}
        try:
            return pl.read_csv(data, has_header=False, new_columns=names, infer_schema=False,
                               schema_overrides=schema, truncate_ragged_lines=False,
                               raise_if_empty=False)
        except pl.exceptions.PolarsError:
            continue
    return None


# 4. The screen -------------------------------------------------------------------------------

_PLAIN_NUMBER = r"^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"  # what float() reads too


class NotColumnar(Exception):
    """A batch holds something the screen does not handle; it is read row by row."""


def load_batch(batch: Batch, strict: bool, keep_rows: bool) -> Loaded:
    try:
        return _screen(batch, strict, keep_rows)
    except NotColumnar:
        where = [(batch.where(int(line)), raw) for line, raw in (
            *batch.refused, *zip(batch.line.tolist(),
                                 batch.raw_rows(np.arange(len(batch.line))), strict=True))]
        where.sort(key=lambda pair: _line_number(pair[0]))
        return from_records(where, strict=strict, keep_rows=keep_rows)


def _screen(batch: Batch, strict: bool, keep_rows: bool) -> Loaded:
    """Column expressions flag the rows that break the contract; `validate_record` names
    the flagged rows' problem (and keeps a row whose number only Python reads, like ' 12 ')."""
    frame = batch.frame
    n = frame.height
    numbers, present, ok = _screen_numbers(frame)
    bad = np.zeros(n, dtype=bool)
    for name in NUMBER_FIELDS:
        bad |= ~ok[name] if name in REQUIRED_FIELDS else present[name] & ~ok[name]
    categories = _screen_categories(frame)
    for codes, _ in categories.values():
        bad |= codes < 0
    kernels = numbers["kernels"]
    with np.errstate(invalid="ignore"):
        bad |= present["kernels"] & ~((kernels >= 1) & (kernels == np.floor(kernels)))
    both = present["read_bytes"] & present["write_bytes"]
    bad |= both & ~_isclose(numbers["read_bytes"] + numbers["write_bytes"], numbers["bytes"])
    bad |= present["footprint_bytes"] & (numbers["footprint_bytes"] > numbers["bytes"]) & ~_isclose(
        numbers["footprint_bytes"], numbers["bytes"])
    p10 = np.where(present["time_p10_s"], numbers["time_p10_s"], -np.inf)
    bad |= p10 > np.where(present["time_p90_s"], numbers["time_p90_s"], np.inf)
    by_unit, has_split, split_ok = _screen_units(frame)
    bad |= has_split & ~split_ok
    with_split = has_split & split_ok
    total = sum((v for v, _ in by_unit.values()), np.zeros(n))
    bad |= with_split & ~_isclose(total, numbers["flops"])

    # Name the flagged rows (and the lines the engine refused), in file order.
    skipped: list[Skipped] = []
    flagged = np.flatnonzero(bad)
    named = [(int(batch.line[p]), p) for p in flagged.tolist()]
    named += [(line, -1 - k) for k, (line, _) in enumerate(batch.refused)]
    named.sort()
    rescued: list[tuple[int, dict[str, Any]]] = []
    for start in range(0, len(named), LazyRows.BLOCK):
        block = named[start:start + LazyRows.BLOCK]
        positions = np.array([p for _, p in block if p >= 0], dtype=np.int64)
        raws = iter(batch.raw_rows(positions))
        for line, p in block:
            raw = next(raws) if p >= 0 else batch.refused[-1 - p][1]
            try:
                clean = validate_record(raw, batch.where(line))
            except InputError as exc:
                if strict:
                    raise
                skipped.append(Skipped(exc.where, exc.problem))
                continue
            if p >= 0:  # a number written as only Python reads it (' 12 ', '1_0'): keep it
                bad[p] = False
                rescued.append((p, clean))
            else:
                raise NotColumnar("an object the engine refused is a valid record")
    for p, clean in rescued:
        for name in NUMBER_FIELDS:
            numbers[name][p] = clean.get(name, math.nan)
        split = clean.get("flops_by_unit") or {}
        has_split[p] = bool(split)
        for unit in {*by_unit, *split}:
            flops, names = by_unit.setdefault(unit, (np.zeros(n), np.zeros(n, dtype=bool)))
            flops[p], names[p] = split.get(unit, 0.0), unit in split
    good = np.flatnonzero(~bad)
    return Loaded(_columns_at(good, numbers, categories, by_unit, has_split, batch, keep_rows),
                  tuple(skipped))


def _screen_numbers(frame: pl.DataFrame) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray],
                                                   dict[str, np.ndarray]]:
    """Per number field: its value (NaN where absent), present, and ok (a finite number >= 0
    read as `float()` would). A present cell that is not ok is left to `validate_record`."""
    n = frame.height
    exprs: list[pl.Expr] = []
    for name in NUMBER_FIELDS:
        kind = frame.schema.get(name)
        if kind is None or kind == pl.Null:
            continue
        column = pl.col(name)
        if kind == pl.String:
            has = column.is_not_null() & (column != "")
            parsed = (pl.when(column.str.contains(_PLAIN_NUMBER)).then(column)
                      .cast(pl.Float64, strict=False))
        elif kind.is_numeric():
            has = column.is_not_null()
            parsed = column.cast(pl.Float64, strict=False)
        else:  # bool, nested: validate_record says what is wrong
            has = column.is_not_null()
            parsed = pl.lit(None, dtype=pl.Float64)
        exprs += [has.alias(f"{name}.present"), parsed.fill_null(math.nan).alias(name)]
    screened = frame.select(exprs) if exprs else pl.DataFrame()
    numbers, present, ok = {}, {}, {}
    for name in NUMBER_FIELDS:
        if name in screened.columns:
            numbers[name] = screened[name].to_numpy().astype(np.float64, copy=True)
            present[name] = screened[f"{name}.present"].to_numpy().astype(bool)
        else:
            numbers[name] = np.full(n, math.nan)
            present[name] = np.zeros(n, dtype=bool)
        with np.errstate(invalid="ignore"):
            ok[name] = present[name] & np.isfinite(numbers[name]) & (numbers[name] >= 0)
        numbers[name][~present[name]] = math.nan
    return numbers, present, ok


_MANY_NAMES = 4096  # distinct ops in a batch beyond which each row is coded by its position


def _screen_categories(frame: pl.DataFrame) -> dict[str, tuple[np.ndarray, tuple[str, ...]]]:
    """Per text field of the contract (TEXT_FIELDS): codes into its clean names per
    row (-1 where the field's cleaner refuses the value), from the distinct values. The engine
    hashes every column in one pass each, side by side; Python sees each distinct value once."""
    n = frame.height
    cleaners = {"op": _clean_op, "roof": _clean_roof, "timing": _clean_timing,
                "device": _clean_device, "cache_state": _clean_cache_state}
    out: dict[str, tuple[np.ndarray, tuple[str, ...]]] = {}
    present = []
    for name, clean in cleaners.items():
        kind = frame.schema.get(name)
        if kind is None or kind == pl.Null:
            absent = clean(None)
            out[name] = (np.full(n, 0 if absent is not None else -1, dtype=np.int32),
                         () if absent is None else (absent,))
        elif not (kind == pl.String or isinstance(kind, (pl.Categorical, pl.Enum))):
            # a typed column (Parquet's numbers, bools, structs): text it is not; every value
            # in it is refused (`validate_record` names it), a null is absent
            absent = clean(None)
            nulls = frame[name].is_null().to_numpy()
            out[name] = (np.where(nulls, 0 if absent is not None else -1, -1).astype(np.int32),
                         () if absent is None else (absent,))
        else:
            present.append(name)
    if not present:
        return out
    distinct = frame.select(pl.col(name).cast(pl.String).unique(maintain_order=True).implode()
                            for name in present).row(0)
    mappings = []
    for name, values in zip(present, distinct, strict=True):
        index: dict[str, int] = {}  # clean name -> code, in first-seen order
        lookup: dict[str, int] = {}  # raw value -> code
        null_code = -1
        if name == "op" and len(values) > _MANY_NAMES:
            # tens of thousands of names: each row its own code (an op is its own clean
            # name, and no code of it is kept), so no table of names is looked up per row
            column = frame["op"].cast(pl.String)
            ok = (column.is_not_null() & (column != "")).to_numpy()
            out["op"] = (np.where(ok, np.arange(n), -1).astype(np.int32),
                         tuple(column.to_list()))
            continue
        if name == "op":  # an op is its own clean name: no cleaner called per name
            named = [v for v in values if v]  # (distinct already: no name is met twice)
            index = dict(zip(named, range(len(named)), strict=True))
            lookup = {**index, "": -1} if "" in values else index
            mappings.append((name, index, lookup, -1))
            continue
        for value in values:
            cleaned = cleaners[name](value)
            code = -1 if cleaned is None else index.setdefault(cleaned, len(index))
            if value is None:
                null_code = code
            else:
                lookup[value] = code
        mappings.append((name, index, lookup, null_code))
    codes = frame.select(  # (replace_strict gives a null its default, so nulls go first)
        pl.when(pl.col(name).is_null()).then(pl.lit(null_code, dtype=pl.Int32))
        .otherwise(pl.col(name).cast(pl.String).replace_strict(
            list(lookup), list(lookup.values()), default=-1, return_dtype=pl.Int32))
        .alias(name) for name, _, lookup, null_code in mappings)
    for (name, index, _, _), column in zip(mappings, codes.iter_columns(), strict=True):
        out[name] = (column.to_numpy().astype(np.int32), tuple(index))
    return {name: out[name] for name in cleaners}


def _screen_units(frame: pl.DataFrame
                  ) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], np.ndarray, np.ndarray]:
    """`flops_by_unit` (a struct in Parquet, JSON text elsewhere) as one column per unit:
    {unit: (flops, named)}, zero where a row does not name the unit (null means not named),
    and per row (present, ok)."""
    n = frame.height
    kind = frame.schema.get("flops_by_unit")
    if kind is None or kind == pl.Null:
        return {}, np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    column = frame["flops_by_unit"]
    if kind == pl.String:
        present = (column.is_not_null() & (column != "")).to_numpy().astype(bool)
        try:
            column = column.str.json_decode(infer_schema_length=None)
        except pl.exceptions.PolarsError:
            return {}, present, np.zeros(n, dtype=bool)  # validate_record says which row
    else:
        present = column.is_not_null().to_numpy().astype(bool)
    if not isinstance(column.dtype, pl.Struct):
        return {}, present, np.zeros(n, dtype=bool)
    ok = present.copy()
    by_unit: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    some = np.zeros(n, dtype=bool)  # a split must name at least one unit
    for unit in column.struct.fields:
        values = column.struct.field(unit)
        named = values.is_not_null().to_numpy().astype(bool) & present
        if values.dtype == pl.String:
            values = values.cast(pl.Float64, strict=False)
        elif not values.dtype.is_numeric():
            ok &= ~named
            continue
        number = values.cast(pl.Float64, strict=False).fill_null(math.nan).to_numpy()
        with np.errstate(invalid="ignore"):
            fine = np.isfinite(number) & (number >= 0)
        ok &= ~named | fine
        some |= named
        by_unit[str(unit)] = (np.where(named & fine, number, 0.0).astype(np.float64), named)
    return by_unit, present, ok & some


def _columns_at(good: np.ndarray, numbers: Mapping[str, np.ndarray],
                categories: Mapping[str, tuple[np.ndarray, tuple[str, ...]]],
                by_unit: Mapping[str, tuple[np.ndarray, np.ndarray]], has_split: np.ndarray,
                batch: Batch,
                keep_rows: bool) -> RecordColumns:
    """RecordColumns of the rows at `good`, in file order."""
    picked = {name: _first_seen(codes[good], names) for name, (codes, names) in
              categories.items()}
    as_text = {name: np.array(names, dtype=object)[codes] if names else
               np.zeros(len(good), dtype=object) for name, (codes, names) in picked.items()}
    timing_names = picked["timing"][1]
    timing = (np.broadcast_to(np.array(timing_names[0], dtype=object), (len(good),))
              if len(timing_names) == 1 else as_text["timing"])
    split = has_split[good]
    units = {u: flops[good] for u, (flops, named) in sorted(by_unit.items())
             if (split & named[good]).any()}
    extras = [c for c in batch.frame.columns if c not in (*TEXT_FIELDS, *NUMBER_FIELDS)]
    json_text = tuple(c for c in extras if batch.frame.schema[c] == pl.String and (
        c == "flops_by_unit" or c in batch.json_columns))
    good_list = good.tolist()
    return RecordColumns(
        op=as_text["op"], flops=numbers["flops"][good], bytes=numbers["bytes"][good],
        roof=as_text["roof"], time_s=numbers["time_s"][good], timing=timing,
        device=as_text["device"], read_bytes=numbers["read_bytes"][good],
        write_bytes=numbers["write_bytes"][good], time_p10_s=numbers["time_p10_s"][good],
        time_p90_s=numbers["time_p90_s"][good], flops_by_unit=units,
        has_unit_split=split, line=np.asarray(batch.line[good], dtype=np.int64),
        rows=LazyRows(_clean_rows(batch), good) if keep_rows else None,
        roof_codes=picked["roof"][0], roof_names=picked["roof"][1],
        device_codes=picked["device"][0], device_names=picked["device"][1],
        extras=None if not extras else batch.frame.select(extras)[good_list]
        if len(good) != batch.frame.height else batch.frame.select(extras),
        extras_json=json_text, fields=tuple(batch.frame.columns),
        kernels=numbers["kernels"][good],
        footprint_bytes=None if np.isnan(numbers["footprint_bytes"][good]).all()
        else numbers["footprint_bytes"][good],
        cache_state=None if picked["cache_state"][1] in ((), ("",))
        else as_text["cache_state"])


def _clean_rows(batch: Batch) -> Callable[[np.ndarray], list[dict[str, Any]]]:
    """Validated records at these positions of the batch: what reports show and pass on."""
    def fetch(at: np.ndarray) -> list[dict[str, Any]]:
        return [validate_record(raw, batch.where(int(batch.line[p])))
                for p, raw in zip(at.tolist(), batch.raw_rows(at), strict=True)]
    return fetch


def _first_seen(codes: np.ndarray, names: tuple[str, ...]) -> tuple[np.ndarray, tuple[str, ...]]:
    """Codes renumbered in order of first appearance, as `categorize` numbers them."""
    first = np.full(len(names) + 1, len(codes))  # a spare last slot: a code of -1 lands there
    np.minimum.at(first, codes, np.arange(len(codes)))
    order = np.argsort(first[:len(names)], kind="stable")[:np.count_nonzero(
        first[:len(names)] < len(codes))]
    remap = np.zeros(max(len(names), 1), dtype=np.int32)
    remap[order] = np.arange(len(order), dtype=np.int32)
    return remap[codes], tuple(np.asarray(names, dtype=object)[order].tolist())


def _isclose(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`math.isclose(a, b, rel_tol=1e-6, abs_tol=1.0)` elementwise, as `_check_consistent`."""
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(b - a)
        return (diff <= np.abs(1e-6 * b)) | (diff <= np.abs(1e-6 * a)) | (diff <= 1.0)


def _clean_op(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _clean_roof(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _clean_timing(value: Any) -> str | None:
    if value is None or value == "":
        return ""
    return value if value in TIMINGS else None


def _clean_device(value: Any) -> str | None:
    return str(value or "")


def _clean_cache_state(value: Any) -> str | None:
    if value is None or value == "":
        return ""
    return value if value in CACHE_STATES else None


# 5. One record at a time ----------------------------------------------------------------------


def validate_record(record: Any, where: str) -> dict[str, Any]:
    """One record, checked field by field; InputError names the field and what was expected.

    Null or "" in an optional field means the field is absent.
    """
    if isinstance(record, Unreadable):  # the reader could not parse it; the text says why
        raise InputError(where, record)
    if not isinstance(record, Mapping):
        raise InputError(where, f"expected a JSON object (a record), got {_type_name(record)}")
    for name in REQUIRED_FIELDS:
        if name not in record or record[name] is None or record[name] == "":
            raise InputError(f"{where}: {name}", "missing required field")
    wrong = not_text(record)
    if wrong is not None:
        raise InputError(f"{where}: {wrong}",
                         f"expected text (a string), got {_json_kind(record[wrong])}")
    clean: dict[str, Any] = {k: v for k, v in record.items()
                             if k in REQUIRED_FIELDS or v not in (None, "")}
    clean["roof"] = _text(record["roof"], f"{where}: roof")
    for name in NUMBER_FIELDS:
        if name in clean:
            check = _kernel_count if name == "kernels" else _number
            clean[name] = check(clean[name], f"{where}: {name}")
    for name, allowed in (("timing", TIMINGS), ("cache_state", CACHE_STATES)):
        value = clean.get(name)
        if value is not None and value not in allowed:
            raise InputError(f"{where}: {name}",
                             f"expected one of {', '.join(allowed)}, got {shown(value)}")
    if "flops_by_unit" in clean:
        clean["flops_by_unit"] = unit_split(clean["flops_by_unit"], where)
    _check_consistent(clean, where)
    return clean


def not_text(record: Mapping[str, Any]) -> str | None:
    """The first text field of the contract (TEXT_FIELDS) that `record` holds as something
    other than a string (an object, an array, a number, a bool); None if there is none."""
    for name in TEXT_FIELDS:
        value = record.get(name)
        if value is not None and not isinstance(value, str):
            return name
    return None


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, (int, float)):
        return f"the number {shown(value)}"
    return type(value).__name__


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def unit_split(by_unit: Any, where: str) -> dict[str, float]:
    """`flops_by_unit` as a mapping (a JSON string in CSV and Parquet) of unit -> flops; a
    unit whose value is null does no work (Parquet structs name every unit in every row)."""
    if isinstance(by_unit, str):
        try:
            by_unit = numbers.parse_json(by_unit)
        except (ValueError, RecursionError):
            raise InputError(f"{where}: flops_by_unit",
                             "expected a JSON object of unit -> flops") from None
    if isinstance(by_unit, Mapping):
        by_unit = {u: v for u, v in by_unit.items() if v is not None}
    if not isinstance(by_unit, Mapping) or not by_unit:
        raise InputError(f"{where}: flops_by_unit", "expected a mapping of unit -> flops")
    return {str(u): _number(v, f"{where}: flops_by_unit.{u}") for u, v in by_unit.items()}


def _check_consistent(record: Mapping[str, Any], where: str) -> None:
    """Fields that restate each other must agree; a mismatch is an accounting error upstream."""
    if "read_bytes" in record and "write_bytes" in record:
        split = record["read_bytes"] + record["write_bytes"]
        if not math.isclose(split, record["bytes"], rel_tol=1e-6, abs_tol=1.0):
            raise InputError(f"{where}: read_bytes", f"read_bytes + write_bytes = {split:.6g}, "
                                                     f"expected bytes = {record['bytes']:.6g}")
    if "footprint_bytes" in record and record["footprint_bytes"] > record["bytes"] and not (
            math.isclose(record["footprint_bytes"], record["bytes"], rel_tol=1e-6, abs_tol=1.0)):
        raise InputError(f"{where}: footprint_bytes",
                         f"{record['footprint_bytes']:.6g} distinct bytes, expected at most "
                         f"bytes = {record['bytes']:.6g} (a byte touched is read or written)")
    if "flops_by_unit" in record:
        total = sum(record["flops_by_unit"].values())
        if not math.isclose(total, record["flops"], rel_tol=1e-6, abs_tol=1.0):
            raise InputError(f"{where}: flops_by_unit", f"sums to {total:.6g}, expected flops = "
                                                        f"{record['flops']:.6g}")
    if record.get("time_p10_s", -math.inf) > record.get("time_p90_s", math.inf):
        raise InputError(f"{where}: time_p10_s",
                         f"{record['time_p10_s']:.6g} is above time_p90_s "
                         f"{record['time_p90_s']:.6g}; expected p10 <= p90")


def from_records(records: Iterable[tuple[str, Any]], strict: bool = False,
                 keep_rows: bool = True) -> Loaded:
    """Columns from (where, record) pairs. Bad records are skipped, or raise with `strict`."""
    good: list[dict[str, Any]] = []
    lines: list[int] = []
    skipped: list[Skipped] = []
    for where, record in records:
        try:
            good.append(validate_record(record, where))
        except InputError as exc:
            if strict:
                raise
            skipped.append(Skipped(exc.where, exc.problem))
            continue
        lines.append(_line_number(where))
    return Loaded(columns_from_valid(good, lines, keep_rows), tuple(skipped))


def columns_from_valid(good: Sequence[Mapping[str, Any]], lines: Sequence[int] | None = None,
                       keep_rows: bool = True) -> RecordColumns:
    """Columns of records already validated (or built in code, as tests and `bench` do)."""
    n = len(good)
    nan = math.nan
    units = sorted({u for r in good for u in (r.get("flops_by_unit") or {})})
    by_unit = {u: np.array([(r.get("flops_by_unit") or {}).get(u, 0.0) for r in good],
                           dtype=np.float64) for u in units}
    roof = np.array([r["roof"] for r in good], dtype=object)
    device = np.array([str(r.get("device") or "") for r in good], dtype=object)
    roof_codes, roof_names = categorize(roof)
    device_codes, device_names = categorize(device)
    extras, extras_json = extras_of_records(good)
    return RecordColumns(
        extras=extras, extras_json=extras_json,
        fields=tuple(dict.fromkeys(k for r in good[:1000] for k in r)),
        op=np.array([r["op"] for r in good], dtype=object),
        flops=np.fromiter((r["flops"] for r in good), np.float64, n),
        bytes=np.fromiter((r["bytes"] for r in good), np.float64, n),
        roof=roof,
        time_s=np.fromiter((r["time_s"] for r in good), np.float64, n),
        timing=_column_of_strings([r.get("timing") or "" for r in good]),
        device=device,
        read_bytes=np.fromiter((r.get("read_bytes", nan) for r in good), np.float64, n),
        write_bytes=np.fromiter((r.get("write_bytes", nan) for r in good), np.float64, n),
        time_p10_s=np.fromiter((r.get("time_p10_s", nan) for r in good), np.float64, n),
        time_p90_s=np.fromiter((r.get("time_p90_s", nan) for r in good), np.float64, n),
        flops_by_unit=by_unit,
        has_unit_split=np.fromiter((bool(r.get("flops_by_unit")) for r in good), bool, n),
        line=np.asarray(lines if lines is not None else np.arange(1, n + 1), dtype=np.int64),
        rows=list(good) if keep_rows else None,
        roof_codes=roof_codes, roof_names=roof_names,
        device_codes=device_codes, device_names=device_names,
        kernels=np.fromiter((r.get("kernels", nan) for r in good), np.float64, n),
        footprint_bytes=np.fromiter((r.get("footprint_bytes", nan) for r in good), np.float64,
                                    n) if any("footprint_bytes" in r for r in good) else None,
        cache_state=np.array([r.get("cache_state") or "" for r in good], dtype=object)
        if any(r.get("cache_state") for r in good) else None,
    )


# The fields `RecordColumns` holds as columns of its own; every other field is an extra.
CONTRACT_COLUMNS = frozenset((*TEXT_FIELDS, *NUMBER_FIELDS))


def extras_of_records(records: Sequence[Mapping[str, Any]]
                      ) -> tuple[pl.DataFrame | None, tuple[str, ...]]:
    """The fields outside the contract of records held as dicts, as columns typed as the
    columnar reader types them (text, numbers, bools), a field holding objects, lists or mixed
    kinds as JSON text (named in the tuple); None when no record has such a field. The one
    pass over dicts, in the readers that hold dicts already, so no writer ever walks rows."""
    values: dict[str, list[Any]] = {}
    n = len(records)
    for k, record in enumerate(records):
        for name, value in record.items():
            if name not in CONTRACT_COLUMNS:
                column = values.get(name)
                if column is None:  # a column is made once (never a default per value)
                    column = values[name] = [None] * n
                column[k] = value
    if not values:
        return None, ()
    columns: list[pl.Series] = []
    as_json: list[str] = []
    for name, column in values.items():
        kinds = {type(v) for v in column if v is not None}
        if kinds <= {str} or kinds <= {bool} or (kinds <= {int, float} and all(
                math.isfinite(v) for v in column if v is not None)):
            try:
                columns.append(pl.Series(name, column))
                continue
            except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
                pass  # an integer beyond 64 bits: written back as the JSON it was
        columns.append(pl.Series(name, [None if v is None else json.dumps(v) for v in column],
                                 dtype=pl.String))
        as_json.append(name)
    return pl.DataFrame(columns), tuple(as_json)


def _column_of_strings(values: list[str]) -> np.ndarray:
    """An object column; a read-only broadcast when every row holds the same value."""
    if values and values.count(values[0]) == len(values):
        return np.broadcast_to(np.array(values[0], dtype=object), (len(values),))
    return np.array(values, dtype=object)


def _number(value: Any, where: str) -> float:
    return numbers.non_negative(value, where)


def _kernel_count(value: Any, where: str) -> int:
    number = _number(value, where)
    if number < 1 or number != int(number):
        raise InputError(where, f"expected a whole number of launches >= 1, got {value!r}")
    return int(number)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(where, f"expected a unit key such as cuda_core.fp32, got "
                                f"{shown(value)}")
    return value.strip()


def _line_number(where: str) -> int:
    """The line (JSONL, CSV) or row (Parquet, written `:row N`) a record came from."""
    tail = where.rsplit(":", 1)[-1].removeprefix("row ").strip()
    return int(tail) if tail.isdigit() else 0


# The per-row readers: the reference the screen is tested against, and the reader of what the
# engine cannot number (a lone CR, a quoted CSV cell over several lines).


def iter_raw_records(path: str | Path) -> Iterator[tuple[str, Any]]:
    """(where, record) pairs; a line that is not JSON (or not UTF-8) yields its error text."""
    path = Path(path)
    kind = _check_file(path)
    if kind == "parquet":
        frame = _read_parquet(path)
        for number, row in enumerate(frame.to_dicts(), 1):
            yield f"{path}:row {number}", {k: v for k, v in row.items() if v is not None}
        return
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    data = bare_cr_as_lf(data[:-1] + b"\n" if data.endswith(b"\r") else data,
                         csv_quotes=kind == "csv")
    header = b""
    if kind == "csv":
        header, _, data = data.partition(b"\n")
        header = header.removesuffix(b"\r") + b"\n"
        _check_header(path, _csv_header(path, header))
    yield from _per_row_pairs(path, kind, header, data, 2 if kind == "csv" else 1)


def _read_parquet(path: Path) -> pl.DataFrame:
    try:
        return pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputError(str(path), f"not a readable Parquet file ({_one_line(exc)})"
                         ) from None


def _jsonl_lines(path: Path, text: str, first_line: int) -> Iterator[tuple[str, Any]]:
    for number, line in enumerate(text.split("\n"), first_line):  # bare CRs are LFs by now
        if line.strip():
            yield f"{path}:{number}", _json_line(line)


def _json_line(line: str) -> Any:
    try:
        record = numbers.parse_json(line, unique_keys=True)
    except json.JSONDecodeError as exc:
        return Unreadable(f"not valid JSON ({exc.msg}); expected one JSON object per line")
    except numbers.DuplicateKey as exc:  # which of the two values is meant is ambiguous
        return Unreadable(f"duplicate key {shown(exc.key)}; expected each key once per "
                          "object")
    except ValueError as exc:  # an integer beyond numbers.MAX_INT_DIGITS
        return Unreadable(f"not readable JSON ({exc})")
    except RecursionError:
        return Unreadable("JSON nested too deeply")
    if "\\u" in line and _SURROGATE_ESCAPE.search(line.encode("utf-8", "surrogateescape")) \
            and _has_lone_surrogate(record):
        # like a byte that is not UTF-8: text no writer can encode costs its line
        return Unreadable("a string holds a lone surrogate escape (\\ud800-\\udfff), which "
                          "is not text; expected UTF-8 strings")
    return record


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, Mapping):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    return False


class Unreadable(str):
    """Stands in for a record that did not parse, saying why; validation reports it."""


def _csv_rows(path: Path, text: str, header_line: int) -> Iterator[tuple[str, Any]]:
    """Rows of CSV text (its header first) by Python's csv module, numbered from the header's
    line."""
    with _any_cell_size():
        yield from _csv_dict_rows(path, text, header_line)


@contextlib.contextmanager
def _any_cell_size() -> Iterator[None]:
    """The csv module's 131,072-character cell limit lifted while reading: a long cell (a long
    op name) is a good row, read whole like the columnar reader reads it."""
    limit = csv.field_size_limit(2**31 - 1)
    try:
        yield
    finally:
        csv.field_size_limit(limit)


def _csv_dict_rows(path: Path, text: str, header_line: int) -> Iterator[tuple[str, Any]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = list(reader.fieldnames or [])
        _check_header(path, header)
        for row in reader:
            where = f"{path}:{reader.line_num + header_line - 1}"
            if None in row:
                yield where, Unreadable(f"{len(row[None]) + len(header)} cells under a header "
                                        f"of {len(header)}; expected one cell per column")
                continue
            yield where, {k: v for k, v in row.items() if v not in (None, "")}
    except csv.Error as exc:
        line = reader.line_num + header_line  # the row being read when it failed
        raise InputError(f"{path}:{line}", f"unreadable CSV ({_one_line(exc)})") from None


def _check_header(path: Path, header: list[str]) -> None:
    missing = [name for name in REQUIRED_FIELDS if name not in header]
    if missing:
        raise InputError(f"{path}:1", f"header lacks {', '.join(missing)}{_header_hint(header)}"
                                      f"; expected a header naming at least "
                                      f"{', '.join(REQUIRED_FIELDS)}")
    unnamed = [str(k + 1) for k, name in enumerate(header) if not name.strip()]
    if unnamed:  # a spreadsheet's trailing empty columns
        raise InputError(f"{path}:1", f"header names no field for column{'s' * (len(unnamed) > 1)}"
                                      f" {', '.join(unnamed)}; expected a name for every column "
                                      "(delete the empty columns)")
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise InputError(f"{path}:1", f"header repeats {', '.join(repeated)}; expected each "
                                      "field once")


def _header_hint(header: list[str]) -> str:
    """What a header that lacks the contract's fields looks like instead, where it is one of
    the usual slips: another separator, UTF-16 text, names in another case."""
    text = ",".join(header)
    if "\x00" in text:
        return " (its text holds NUL bytes: UTF-16, as some spreadsheets save; save it as UTF-8)"
    for separator, called in ((";", "semicolons"), ("\t", "tabs")):
        if set(REQUIRED_FIELDS) <= {name.strip() for name in text.split(separator)}:
            return f" (its fields are separated by {called}; expected commas)"
    folded = {name.strip().lower(): name for name in header}
    near = [f"{folded[name]!r} for {name}" for name in REQUIRED_FIELDS
            if name not in header and name in folded]
    return f" (names are case- and space-sensitive: {', '.join(near)})" if near else ""

