"""Read and write benchmark records: JSONL, CSV, Parquet. Writes are atomic (temp file + rename).

With pyarrow installed a file is read whole into a table and screened column by column
(`records.from_table`); without it, or when the file does not parse as a whole (a JSONL line
that is not an object, a CSV row with the wrong number of cells), it is read row by row. Both
paths report a bad row with the same file:line and message.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np

from . import numbers, paths
from .errors import InputError
from .install import install_hint
from .records import REQUIRED_FIELDS, Loaded, from_records
from .records_table import NotColumnar, TableSource, from_table

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


def read_records(path: str | Path, strict: bool = False, keep_rows: bool = True,
                 columnar: bool = True) -> Loaded:
    """Validated columns; malformed rows are skipped (and listed) unless `strict`.

    A file with no valid record at all is bad input, whatever `strict` says. `columnar=False`
    forces the row-by-row reader (the fallback), for comparison.
    """
    source = _table_source(Path(path)) if columnar else None
    try:
        loaded = None if source is None else from_table(source, strict, keep_rows)
    except NotColumnar:
        loaded = None
    if loaded is None:
        loaded = from_records(iter_raw_records(path), strict=strict, keep_rows=keep_rows)
    if not len(loaded.columns):
        if loaded.skipped:
            first = loaded.skipped[0]
            raise InputError(first.where, f"{first.problem} (and no valid record in the file: "
                                          f"{len(loaded.skipped)} malformed)")
        raise InputError(str(path), "no records; expected one record per line (or row)")
    return loaded


def _check_file(path: Path) -> str:
    _not_a_directory(path)
    kind = format_of(path)
    if not path.is_file():
        raise InputError(str(path), "no such file")
    return kind


def _not_a_directory(path: Path) -> None:
    if path.is_dir():
        raise InputError(str(path), "is a directory; expected a record file")


def iter_raw_records(path: str | Path) -> Iterator[tuple[str, Any]]:
    """(where, record) pairs; a line that is not JSON yields its error text as the record."""
    path = Path(path)
    kind = _check_file(path)
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
            if line.strip():
                yield f"{path}:{number}", _json_line(line)


def _json_line(line: str) -> Any:
    try:
        return numbers.parse_json(line)
    except json.JSONDecodeError as exc:
        return Unreadable(f"not valid JSON ({exc.msg}); expected one JSON object per line")
    except ValueError as exc:  # an integer beyond numbers.MAX_INT_DIGITS
        return Unreadable(f"not readable JSON ({exc})")
    except RecursionError:
        return Unreadable("JSON nested too deeply")


class Unreadable(str):
    """Stands in for a record that did not parse, saying why; validation reports it."""


def _csv(path: Path) -> Iterator[tuple[str, Any]]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        header = list(reader.fieldnames or [])
        _check_header(path, header)
        for row in reader:
            where = f"{path}:{reader.line_num}"
            if None in row:
                yield where, Unreadable(f"{len(row[None]) + len(header)} cells under a header "
                                        f"of {len(header)}; expected one cell per column")
                continue
            yield where, {k: v for k, v in row.items() if v not in (None, "")}


def _check_header(path: Path, header: list[str]) -> None:
    missing = [name for name in REQUIRED_FIELDS if name not in header]
    if missing:
        raise InputError(f"{path}:1", f"header lacks {', '.join(missing)}; expected a header "
                                      f"naming at least {', '.join(REQUIRED_FIELDS)}")
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise InputError(f"{path}:1", f"header repeats {', '.join(repeated)}")


def _parquet_table(path: Path) -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(str(path), "reading Parquet needs pyarrow: " + install_hint("parquet")
                         ) from None
    try:
        return pq.read_table(path)
    except Exception as exc:  # pyarrow raises many types for a bad file
        raise InputError(str(path), f"not a readable Parquet file ({exc})") from None


def _parquet(path: Path) -> Iterator[tuple[str, Any]]:
    for number, row in enumerate(_parquet_table(path).to_pylist(), 1):
        yield f"{path}:row {number}", {k: v for k, v in row.items() if v is not None}


def _table_source(path: Path) -> TableSource | None:
    """The file read whole, when pyarrow is installed and the file parses as a whole."""
    kind = _check_file(path)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return None
    if kind == "parquet":
        table = _parquet_table(path)
        return TableSource(table, np.arange(1, table.num_rows + 1), f"{path}:row ",
                           lambda at: _table_rows(table, at, (None,)))
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None  # the row-by-row reader says where
    if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
        return None  # a lone CR ends a line for Python, not for arrow
    return _csv_source(path, data) if kind == "csv" else _jsonl_source(path, data)


_WHITE = np.frombuffer(b" \t\r\n\x0b\x0c", dtype=np.uint8)


def _lines(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (before the newline) offsets of each physical line."""
    newline = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    starts = np.concatenate(([0], newline + 1))
    ends = np.concatenate((newline, [len(data)]))
    if starts[-1] == len(data):  # the text ends with a newline
        starts, ends = starts[:-1], ends[:-1]
    return starts, ends


def _jsonl_source(path: Path, data: bytes) -> TableSource | None:
    """JSONL through pyarrow.json; rows shown or flagged are re-parsed from their own line."""
    import pyarrow as pa
    import pyarrow.json as pj

    try:
        table = pj.read_json(io.BytesIO(data))
    except (pa.ArrowException, ValueError):
        return None
    starts, ends = _lines(data)
    # Blank lines (skipped by both readers) start with white space or are empty; few do.
    first = np.frombuffer(data, dtype=np.uint8)[np.minimum(starts, max(len(data) - 1, 0))]
    maybe = np.flatnonzero((ends == starts) | np.isin(first, _WHITE))
    keep = np.ones(len(starts), dtype=bool)
    keep[maybe] = [bool(data[starts[k]:ends[k]].strip()) for k in maybe.tolist()]
    starts, ends, line = starts[keep], ends[keep], np.flatnonzero(keep) + 1
    if len(line) != table.num_rows:
        return None  # two objects on a line, or one over several: the per-line reader says so

    def rows(at: np.ndarray) -> list[Any]:
        return [_json_line(data[starts[p]:ends[p]].decode("utf-8")) for p in at.tolist()]

    return TableSource(table, line, f"{path}:", rows)


def _csv_source(path: Path, data: bytes) -> TableSource | None:
    """CSV through pyarrow.csv, every cell as text (as the csv module reads it), so that one
    bad cell flags its row instead of failing the file."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline="")
    header = next(csv.reader(text), [])
    _check_header(path, header)
    try:
        table = pcsv.read_csv(
            io.BytesIO(data), parse_options=pcsv.ParseOptions(newlines_in_values=True),
            convert_options=pcsv.ConvertOptions(column_types={h: pa.string() for h in header}))
    except (pa.ArrowException, ValueError):
        return None  # a row with the wrong number of cells: the csv reader says where
    starts, ends = _lines(data)
    length = ends - starts
    carriage = np.frombuffer(data, dtype=np.uint8)[np.maximum(ends - 1, 0)] == 13
    keep = (length > 1) | ((length == 1) & ~carriage)
    line = np.flatnonzero(keep)[1:] + 1
    if table.column_names != header or len(line) != table.num_rows:
        return None  # a quoted cell over several lines: the csv reader numbers those
    return TableSource(table, line, f"{path}:", lambda at: _table_rows(table, at, (None, "")))


def _table_rows(table: Any, at: np.ndarray, absent: tuple[Any, ...]) -> list[dict[str, Any]]:
    """Rows as the per-row readers yield them: absent cells dropped."""
    return [{k: v for k, v in row.items() if v not in absent}
            for row in table.take(at).to_pylist()]


@contextmanager
def atomic_writer(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Write to a temporary file beside `path`, rename over it only when the write completes.

    A path that cannot or should not be written (`paths.check_output`: a directory, a missing
    or read-only folder, a symbolic link, a read-only file) is bad input.
    """
    target = Path(path)
    paths.check_output(target)
    try:
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
    _not_a_directory(target)
    if format_of(target) != "jsonl" and target.exists():
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
    target = Path(path)
    _not_a_directory(target)
    kind = format_of(target)
    rows = [dict(r) for r in records]
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
    columns = list(dict.fromkeys(k for row in flat for k in row))
    if kind == "csv":
        with atomic_writer(target) as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows(flat)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        with atomic_writer(target, "wb") as handle:
            # Every key of every row (from_pylist would keep only the first row's keys).
            table = pa.Table.from_pydict({c: [row.get(c) for row in flat] for c in columns})
            pq.write_table(table, handle)
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
