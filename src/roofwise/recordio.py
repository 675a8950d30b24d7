"""Read and write benchmark records: JSONL, CSV, Parquet. Writes are atomic (temp file + rename)."""

from __future__ import annotations

import csv
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from .errors import InputError
from .records import Loaded, from_records

FORMATS = ("jsonl", "csv", "parquet")


def format_of(path: str | Path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    raise InputError(str(path), "unknown record format; expected .jsonl, .csv or .parquet")


def read_records(path: str | Path, strict: bool = False, keep_rows: bool = True) -> Loaded:
    """Validated columns; malformed rows are skipped (and listed) unless `strict`."""
    return from_records(iter_raw_records(path), strict=strict, keep_rows=keep_rows)


def iter_raw_records(path: str | Path) -> Iterator[tuple[str, Any]]:
    """(where, record) pairs; a line that is not JSON yields its error text as the record."""
    path = Path(path)
    kind = format_of(path)
    if not path.is_file():
        raise InputError(str(path), "no such file")
    if kind == "jsonl":
        yield from _jsonl(path)
    elif kind == "csv":
        yield from _csv(path)
    else:
        yield from _parquet(path)


def _jsonl(path: Path) -> Iterator[tuple[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield f"{path}:{number}", json.loads(line)
            except json.JSONDecodeError as exc:
                yield f"{path}:{number}", _NotJson(exc.msg)


class _NotJson(str):
    """Stands in for a record that did not parse; validation reports it."""


def _csv(path: Path) -> Iterator[tuple[str, Any]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        for number, row in enumerate(reader, 2):
            yield f"{path}:{number}", {k: v for k, v in row.items() if v not in (None, "")}


def _parquet(path: Path) -> Iterator[tuple[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(str(path), "reading Parquet needs pyarrow: pip install 'roofwise[parquet]'"
                         ) from None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises many types for a bad file
        raise InputError(str(path), f"not a readable Parquet file ({exc})") from None
    for number, row in enumerate(table.to_pylist(), 1):
        yield f"{path}:row {number}", {k: v for k, v in row.items() if v is not None}


@contextmanager
def atomic_writer(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Write to a temporary file beside `path`, rename over it only when the write completes."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    # mkstemp makes the file private (0600); outputs are meant to be shared like any other file.
    os.chmod(tmp, target.stat().st_mode & 0o777 if target.exists() else 0o644)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as handle:
            yield handle
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_records(path: str | Path, records: Iterable[Mapping[str, Any]],
                  append: bool = False) -> int:
    """Write (or append to) a record file atomically; returns the number of rows written."""
    rows = [dict(r) for r in records]
    kind = format_of(path)
    target = Path(path)
    if append and target.exists():
        rows = [dict(r) for _, r in iter_raw_records(target)] + rows
    if kind == "jsonl":
        with atomic_writer(target) as handle:
            for row in rows:
                handle.write(json.dumps(row, sort_keys=False) + "\n")
    elif kind == "csv":
        columns = list(dict.fromkeys(k for row in rows for k in row))
        with atomic_writer(target) as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            for row in rows:
                writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v
                                 for k, v in row.items()})
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        flat = [{k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in row.items()}
                for row in rows]
        with atomic_writer(target, "wb") as handle:
            pq.write_table(pa.Table.from_pylist(flat), handle)
    return len(rows)
