"""Benchmark records (the DESIGN.md contract) as numpy columns.

Two ways in, with the same result: `from_records` (here) validates mappings one by one;
`records_table.from_table` screens a pyarrow Table with vectorised checks and hands only the
rows the screen flags to `validate_record`, so both report a bad row with the same one-line
message. Reading files lives in `recordio.py`; pricing and judging then run over a million rows
without a loop.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

from . import numbers
from .errors import InputError

REQUIRED_FIELDS = ("op", "flops", "bytes", "roof", "time_s")
OPTIONAL_FIELDS = ("workload", "device", "timing", "read_bytes", "write_bytes", "flops_by_unit",
                   "time_p10_s", "time_p90_s", "profile", "kernels", "wall_time_s")
# kernel | graph | events | wall (machine.TIMINGS); `device` is the older name for `events`
TIMINGS = ("kernel", "graph", "events", "wall", "device")
NUMBER_FIELDS = ("flops", "bytes", "time_s", "read_bytes", "write_bytes", "time_p10_s",
                 "time_p90_s", "kernels")


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
    kernels: np.ndarray | None = None  # launches per timed call; None: one each

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
            kernels=None if self.kernels is None else self.kernels[index])

    def kernel_counts(self) -> np.ndarray:
        """Launches per timed call, 1 where the record does not say."""
        return np.ones(len(self)) if self.kernels is None else self.kernels


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


def categorize(values: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    """Integer codes and the distinct names they index, in first-seen order."""
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(str(v), len(index)) for v in values), np.int32,
                        len(values))
    return codes, tuple(index)


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


def validate_record(record: Any, where: str) -> dict[str, Any]:
    """One record, checked field by field; InputError names the field and what was expected."""
    if isinstance(record, str):  # the reader could not parse it; the text says why
        raise InputError(where, record)
    if not isinstance(record, Mapping):
        raise InputError(where, f"expected a JSON object (a record), got {type(record).__name__}")
    for name in REQUIRED_FIELDS:
        if name not in record or record[name] is None or record[name] == "":
            raise InputError(f"{where}: {name}", "missing required field")
    clean: dict[str, Any] = dict(record)
    clean["op"] = str(record["op"])
    clean["roof"] = _text(record["roof"], f"{where}: roof")
    for name in ("flops", "bytes", "time_s"):
        clean[name] = _number(record[name], f"{where}: {name}")
    for name in ("read_bytes", "write_bytes", "time_p10_s", "time_p90_s"):
        if record.get(name) not in (None, ""):
            clean[name] = _number(record[name], f"{where}: {name}")
    if record.get("kernels") not in (None, ""):
        clean["kernels"] = _kernel_count(record["kernels"], f"{where}: kernels")
    timing = record.get("timing")
    if timing not in (None, "") and timing not in TIMINGS:
        raise InputError(f"{where}: timing",
                         f"expected one of {', '.join(TIMINGS)}, got {timing!r}")
    by_unit = record.get("flops_by_unit")
    if by_unit not in (None, ""):
        clean["flops_by_unit"] = unit_split(by_unit, where)
    _check_consistent(clean, where)
    return clean


def unit_split(by_unit: Any, where: str) -> dict[str, float]:
    """`flops_by_unit` as a mapping (a JSON string in CSV and Parquet) of unit -> flops."""
    if isinstance(by_unit, str):
        try:
            by_unit = numbers.parse_json(by_unit)
        except ValueError:
            raise InputError(f"{where}: flops_by_unit",
                             "expected a JSON object of unit -> flops") from None
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
    n = len(good)
    nan = math.nan
    units = sorted({u for r in good for u in (r.get("flops_by_unit") or {})})
    by_unit = {u: np.array([(r.get("flops_by_unit") or {}).get(u, 0.0) for r in good],
                           dtype=np.float64) for u in units}
    roof = np.array([r["roof"] for r in good], dtype=object)
    device = np.array([str(r.get("device") or "") for r in good], dtype=object)
    roof_codes, roof_names = categorize(roof)
    device_codes, device_names = categorize(device)
    return RecordColumns(
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
        kernels=np.fromiter((r.get("kernels", 1) for r in good), np.float64, n),
    )


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
        raise InputError(where, f"expected a unit key such as cuda_core.fp32, got {value!r}")
    return value.strip()


def _line_number(where: str) -> int:
    """The line (JSONL, CSV) or row (Parquet, written `:row N`) a record came from."""
    tail = where.rsplit(":", 1)[-1].removeprefix("row ").strip()
    return int(tail) if tail.isdigit() else 0


# The columnar path. pyarrow is an optional extra, imported only here.
