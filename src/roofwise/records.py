"""Benchmark records (the DESIGN.md contract) as numpy columns.

Two ways in, with the same result: `from_records` validates mappings one by one;
`from_table` screens a pyarrow Table with vectorised checks and hands only the rows the screen
flags to `validate_record`, so both report a bad row with the same one-line message. Reading
files lives in `recordio.py`; pricing and judging then run over a million rows without a loop.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

from .errors import InputError

REQUIRED_FIELDS = ("op", "flops", "bytes", "roof", "time_s")
OPTIONAL_FIELDS = ("workload", "device", "timing", "read_bytes", "write_bytes", "flops_by_unit",
                   "time_p10_s", "time_p90_s", "profile", "kernels", "wall_time_s")
TIMINGS = ("device", "wall")
NUMBER_FIELDS = ("flops", "bytes", "time_s", "read_bytes", "write_bytes", "time_p10_s",
                 "time_p90_s")


@dataclass(frozen=True)
class RecordColumns:
    op: np.ndarray  # object (str)
    flops: np.ndarray
    bytes: np.ndarray
    roof: np.ndarray  # object (str)
    time_s: np.ndarray
    timing: np.ndarray  # object: "device", "wall" or ""
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
            device_names=self.device_names)


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
    timing = record.get("timing")
    if timing not in (None, "") and timing not in TIMINGS:
        raise InputError(f"{where}: timing",
                         f"expected one of {', '.join(TIMINGS)}, got {timing!r}")
    by_unit = record.get("flops_by_unit")
    if by_unit not in (None, ""):
        clean["flops_by_unit"] = _unit_split(by_unit, where)
    _check_consistent(clean, where)
    return clean


def _unit_split(by_unit: Any, where: str) -> dict[str, float]:
    """`flops_by_unit` as a mapping (a JSON string in CSV and Parquet) of unit -> flops."""
    if isinstance(by_unit, str):
        try:
            by_unit = json.loads(by_unit)
        except json.JSONDecodeError:
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
    )


def _column_of_strings(values: list[str]) -> np.ndarray:
    """An object column; a read-only broadcast when every row holds the same value."""
    if values and values.count(values[0]) == len(values):
        return np.broadcast_to(np.array(values[0], dtype=object), (len(values),))
    return np.array(values, dtype=object)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise InputError(where, f"expected a non-negative number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        shown = f"{str(value)[:20]}..." if len(str(value)) > 24 else repr(value)
        raise InputError(where, f"expected a non-negative finite number, got {shown}") from None
    if not math.isfinite(number) or number < 0:
        raise InputError(where, f"expected a non-negative finite number, got {value!r}")
    return number


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(where, f"expected a unit key such as cuda_core.fp32, got {value!r}")
    return value.strip()


def _line_number(where: str) -> int:
    """The line (JSONL, CSV) or row (Parquet, written `:row N`) a record came from."""
    tail = where.rsplit(":", 1)[-1].removeprefix("row ").strip()
    return int(tail) if tail.isdigit() else 0


# The columnar path. pyarrow is an optional extra, imported only here.

_PLAIN_NUMBER = r"^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"  # what float() and arrow agree on


class NotColumnar(Exception):
    """The table holds something the screen does not handle; read the file row by row."""


@dataclass(frozen=True)
class TableSource:
    """A record file read whole: its table and how to get back each row as the per-row reader
    yields it, so that flagged rows and shown rows go through `validate_record` unchanged."""
    table: Any  # pyarrow.Table, one row per record
    line: np.ndarray  # each row's line in the file (Parquet: its 1-based row)
    where_prefix: str  # "path:" or "path:row "
    raw_rows: Callable[[np.ndarray], list[Any]]  # the rows at these positions, as read

    def where(self, position: int) -> str:
        return f"{self.where_prefix}{int(self.line[position])}"

    def clean_rows(self, positions: np.ndarray) -> list[dict[str, Any]]:
        """Validated records (rows the screen passed); what `from_records` keeps as rows."""
        return [validate_record(raw, self.where(p))
                for p, raw in zip(positions.tolist(), self.raw_rows(positions),
                                      strict=True)]


def from_table(source: TableSource, strict: bool = False, keep_rows: bool = True) -> Loaded:
    """Columns from a whole table: vectorised screen, `validate_record` for flagged rows only."""
    table = source.table
    n = int(table.num_rows)
    bad = np.zeros(n, dtype=bool)
    numbers: dict[str, np.ndarray] = {}
    present: dict[str, np.ndarray] = {}
    for name in NUMBER_FIELDS:
        numbers[name], present[name], ok = _screen_numbers(table, name, n)
        bad |= ~ok if name in REQUIRED_FIELDS else present[name] & ~ok
    categories = {name: _screen_categories(table, name, n, clean) for name, clean in
                  (("op", _clean_op), ("roof", _clean_roof), ("timing", _clean_timing),
                   ("device", _clean_device))}
    for codes, _ in categories.values():
        bad |= codes < 0
    both = present["read_bytes"] & present["write_bytes"]
    bad |= both & ~_isclose(numbers["read_bytes"] + numbers["write_bytes"], numbers["bytes"])
    p10 = np.where(present["time_p10_s"], numbers["time_p10_s"], -np.inf)
    bad |= p10 > np.where(present["time_p90_s"], numbers["time_p90_s"], np.inf)
    splits: dict[int, dict[str, float]] = {}
    _, has_split, _ = _screen_numbers(table, "flops_by_unit", n, nested=True)
    with_split = np.flatnonzero(has_split & ~bad)
    for p, raw in zip(with_split.tolist(), source.raw_rows(with_split), strict=True):
        try:
            split = _unit_split(raw["flops_by_unit"], "")
        except InputError:
            split = {}
        if split and _isclose(np.float64(sum(split.values())), numbers["flops"][p]):
            splits[p] = split
        else:
            bad[p] = True
    skipped: list[Skipped] = []
    flagged = np.flatnonzero(bad)
    for start in range(0, len(flagged), LazyRows.BLOCK):
        block = flagged[start:start + LazyRows.BLOCK]
        for p, raw in zip(block.tolist(), source.raw_rows(block), strict=True):
            try:
                clean = validate_record(raw, source.where(p))
            except InputError as exc:
                if strict:
                    raise
                skipped.append(Skipped(exc.where, exc.problem))
                continue
            # A number written in a form the screen does not read ("1_000", " 2"): take
            # validate_record's value. Categories and consistency were screened exactly.
            bad[p] = False
            for name in NUMBER_FIELDS:
                numbers[name][p] = clean.get(name, math.nan)
            if "flops_by_unit" in clean:
                splits[p] = clean["flops_by_unit"]
    good = np.flatnonzero(~bad)
    return Loaded(_columns_at(good, numbers, categories, splits, source, keep_rows),
                  tuple(skipped))


def _columns_at(good: np.ndarray, numbers: Mapping[str, np.ndarray],
                categories: Mapping[str, tuple[np.ndarray, tuple[str, ...]]],
                splits: Mapping[int, Mapping[str, float]], source: TableSource,
                keep_rows: bool) -> RecordColumns:
    """RecordColumns of the rows at `good`, in file order."""
    picked = {name: _first_seen(codes[good], names) for name, (codes, names) in
              categories.items()}
    as_text = {name: np.array(names, dtype=object)[codes] if names else
               np.zeros(0, dtype=object) for name, (codes, names) in picked.items()}
    timing_names = picked["timing"][1]
    timing = (np.broadcast_to(np.array(timing_names[0], dtype=object), (len(good),))
              if len(timing_names) == 1 else as_text["timing"])
    position = {p: k for k, p in enumerate(good.tolist())} if splits else {}
    units = sorted({u for split in splits.values() for u in split})
    by_unit = {u: np.zeros(len(good)) for u in units}
    has_unit_split = np.zeros(len(good), dtype=bool)
    for p, split in splits.items():
        k = position[p]
        has_unit_split[k] = True
        for u, flops in split.items():
            by_unit[u][k] = flops
    return RecordColumns(
        op=as_text["op"], flops=numbers["flops"][good], bytes=numbers["bytes"][good],
        roof=as_text["roof"], time_s=numbers["time_s"][good], timing=timing,
        device=as_text["device"], read_bytes=numbers["read_bytes"][good],
        write_bytes=numbers["write_bytes"][good], time_p10_s=numbers["time_p10_s"][good],
        time_p90_s=numbers["time_p90_s"][good], flops_by_unit=by_unit,
        has_unit_split=has_unit_split, line=np.asarray(source.line[good], dtype=np.int64),
        rows=LazyRows(source.clean_rows, good) if keep_rows else None,
        roof_codes=picked["roof"][0], roof_names=picked["roof"][1],
        device_codes=picked["device"][0], device_names=picked["device"][1])


def _first_seen(codes: np.ndarray, names: tuple[str, ...]) -> tuple[np.ndarray, tuple[str, ...]]:
    """Codes renumbered in order of first appearance, as `categorize` numbers them."""
    used, first = np.unique(codes, return_index=True)
    order = used[np.argsort(first, kind="stable")]
    remap = np.zeros(len(names), dtype=np.int32)
    remap[order] = np.arange(len(order), dtype=np.int32)
    return remap[codes], tuple(names[int(c)] for c in order)


def _isclose(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`math.isclose(a, b, rel_tol=1e-6, abs_tol=1.0)` elementwise, as `_check_consistent`."""
    with np.errstate(invalid="ignore"):
        diff = np.abs(b - a)
        return (diff <= np.abs(1e-6 * b)) | (diff <= np.abs(1e-6 * a)) | (diff <= 1.0)


def _screen_numbers(table: Any, name: str, n: int, nested: bool = False,
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value, present, ok) per row: ok when the cell is a finite number >= 0 read as
    `float()` would; a cell present but not ok is left to `validate_record`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = np.full(n, math.nan)
    if name not in table.column_names or pa.types.is_null(table.column(name).type):
        return values, np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    column = table.column(name)
    kind = column.type
    text = pa.types.is_string(kind) or pa.types.is_large_string(kind)
    has = pc.is_valid(column)
    if text:  # "" is absent, as in validate_record
        has = pc.and_(has, pc.fill_null(pc.not_equal(column, ""), False))
    present = np.asarray(has.to_numpy(zero_copy_only=False), dtype=bool)
    if nested:
        return values, present, present
    try:
        if text:
            plain = pc.fill_null(pc.match_substring_regex(column, _PLAIN_NUMBER), False)
            parsed = pc.cast(pc.if_else(plain, column, None), pa.float64(), safe=False)
        elif pa.types.is_integer(kind) or pa.types.is_floating(kind):
            # unsafe: an integer above 2**53 rounds to the nearest double, as float() does
            parsed = pc.cast(column, pa.float64(), safe=False)
        else:  # bool, decimal, nested: rare; validate_record says what is wrong
            return values, present, np.zeros(n, dtype=bool)
    except pa.ArrowInvalid:  # a form the screen cannot read: validate_record reads each row
        return values, present, np.zeros(n, dtype=bool)
    values = np.asarray(pc.fill_null(parsed, math.nan).to_numpy(zero_copy_only=False),
                        dtype=np.float64).copy()
    with np.errstate(invalid="ignore"):
        ok = present & np.isfinite(values) & (values >= 0)
    return values, present, ok


def _screen_categories(table: Any, name: str, n: int, clean: Callable[[Any], str | None],
                       ) -> tuple[np.ndarray, tuple[str, ...]]:
    """Codes into clean names per row (-1 where `clean` rejects the value), from the column's
    distinct values: a million rows cost a dictionary encode and a few Python calls."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if name not in table.column_names or pa.types.is_null(table.column(name).type):
        codes, values = np.zeros(n, dtype=np.int64), [None]
    else:
        column = table.column(name).combine_chunks()
        try:
            encoded = (column if pa.types.is_dictionary(column.type)
                       else pc.dictionary_encode(column))
        except pa.ArrowNotImplementedError:
            raise NotColumnar(name) from None
        values = [*encoded.dictionary.to_pylist(), None]
        codes = np.asarray(pc.fill_null(encoded.indices, len(values) - 1)
                           .to_numpy(zero_copy_only=False), dtype=np.int64)
    index: dict[str, int] = {}
    lookup = np.full(len(values), -1, dtype=np.int32)
    for k, value in enumerate(values):
        cleaned = clean(value)
        if cleaned is not None:
            lookup[k] = index.setdefault(cleaned, len(index))
    return lookup[codes], tuple(index)


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
