"""Write records and other outputs atomically (temp file + rename): JSONL, CSV, Parquet.

Reading records is `records.py`'s job; this module only writes.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import polars as pl

from roofwise.base import paths
from roofwise.base.errors import InputError
from roofwise.records.read import Unreadable, format_of, iter_raw_records


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
        # Every key of every row, each column typed from all of its values.
        frame = pl.DataFrame({c: pl.Series(c, [row.get(c) for row in flat], strict=False)
                              for c in columns})
        with atomic_writer(target, "wb") as handle:
            frame.write_parquet(handle)
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


def _not_a_directory(path: Path) -> None:
    if path.is_dir():
        raise InputError(str(path), "is a directory; expected a record file")
