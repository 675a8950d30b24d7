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
from .records import REQUIRED_FIELDS, Loaded, from_records

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
    """Validated columns; malformed rows are skipped (and listed) unless `strict`.

    A file with no valid record at all is bad input, whatever `strict` says.
    """
    loaded = from_records(iter_raw_records(path), strict=strict, keep_rows=keep_rows)
    if not len(loaded.columns):
        if loaded.skipped:
            first = loaded.skipped[0]
            raise InputError(first.where, f"{first.problem} (and no valid record in the file: "
                                          f"{len(loaded.skipped)} malformed)")
        raise InputError(str(path), "no records; expected one record per line (or row)")
    return loaded


def iter_raw_records(path: str | Path) -> Iterator[tuple[str, Any]]:
    """(where, record) pairs; a line that is not JSON yields its error text as the record."""
    path = Path(path)
    kind = format_of(path)
    if path.is_dir():
        raise InputError(str(path), "is a directory; expected a record file")
    if not path.is_file():
        raise InputError(str(path), "no such file")
    try:
        if kind == "jsonl":
            yield from _jsonl(path)
        elif kind == "csv":
            yield from _csv(path)
        else:
            yield from _parquet(path)
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"not UTF-8 text (byte {exc.start}); expected UTF-8 records"
                         ) from None


def _jsonl(path: Path) -> Iterator[tuple[str, Any]]:
    with path.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield f"{path}:{number}", json.loads(line)
            except json.JSONDecodeError as exc:
                yield f"{path}:{number}", Unreadable(
                    f"not valid JSON ({exc.msg}); expected one JSON object per line")
            except RecursionError:
                yield f"{path}:{number}", Unreadable("JSON nested too deeply")


class Unreadable(str):
    """Stands in for a record that did not parse, saying why; validation reports it."""


def _csv(path: Path) -> Iterator[tuple[str, Any]]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [name for name in REQUIRED_FIELDS if name not in header]
        if missing:
            raise InputError(f"{path}:1", f"header lacks {', '.join(missing)}; expected a header "
                                          f"naming at least {', '.join(REQUIRED_FIELDS)}")
        repeated = sorted({name for name in header if header.count(name) > 1})
        if repeated:
            raise InputError(f"{path}:1", f"header repeats {', '.join(repeated)}")
        for row in reader:
            where = f"{path}:{reader.line_num}"
            if None in row:
                yield where, Unreadable(f"{len(row[None]) + len(header)} cells under a header "
                                        f"of {len(header)}; expected one cell per column")
                continue
            yield where, {k: v for k, v in row.items() if v not in (None, "")}


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
    """Write to a temporary file beside `path`, rename over it only when the write completes.

    A path that cannot be written (a directory, a missing or read-only folder) is bad input.
    """
    target = Path(path)
    if target.is_dir():
        raise InputError(str(target), "is a directory; expected a file path to write")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError as exc:
        raise InputError(str(target), f"cannot write here ({exc.strerror})") from None
    # mkstemp makes the file private (0600); outputs are meant to be shared like any other file.
    os.chmod(tmp, target.stat().st_mode & 0o777 if target.exists() else 0o644)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as handle:
            yield handle
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_appendable(path: str | Path) -> None:
    """Fail before any work when appending to `path` could not succeed."""
    target = Path(path)
    format_of(target)
    if target.is_dir():
        raise InputError(str(target), "is a directory; expected a record file")
    if target.exists() and format_of(target) != "jsonl":
        for where, record in iter_raw_records(target):
            if isinstance(record, Unreadable):
                raise InputError(where, f"{record}; fix the file before appending to it")


def write_records(path: str | Path, records: Iterable[Mapping[str, Any]],
                  append: bool = False) -> int:
    """Write (or append to) a record file atomically; returns the number of rows written.

    Appending to JSONL keeps the existing lines byte for byte, malformed ones included, so a
    later `analyze` still reports them where they are. Shards of a sweep should write files of
    their own and be merged afterwards: two writers appending to one file race.
    """
    rows = [dict(r) for r in records]
    kind = format_of(path)
    target = Path(path)
    if kind == "jsonl":
        kept = _existing_text(target) if append else ""
        with atomic_writer(target) as handle:
            handle.write(kept)
            for row in rows:
                handle.write(json.dumps(row, sort_keys=False) + "\n")
        return len(rows)
    if append and target.exists():
        check_appendable(target)
        rows = [dict(r) for _, r in iter_raw_records(target)] + rows
    flat = [{k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in row.items()}
            for row in rows]
    if kind == "csv":
        columns = list(dict.fromkeys(k for row in flat for k in row))
        with atomic_writer(target) as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows(flat)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        with atomic_writer(target, "wb") as handle:
            pq.write_table(pa.Table.from_pylist(flat), handle)
    return len(rows)


def _existing_text(target: Path) -> str:
    if not target.exists():
        return ""
    if target.is_dir():
        raise InputError(str(target), "is a directory; expected a record file")
    try:
        text = target.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(str(target), "not UTF-8 text; expected JSONL records") from None
    return text if not text or text.endswith("\n") else text + "\n"
