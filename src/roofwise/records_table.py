"""Records from a whole pyarrow Table: a vectorised screen, `validate_record` for the rows it
flags only, so that a million clean rows never pass through Python one by one and a bad row
is reported exactly as the per-row path reports it."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InputError
from .records import (
    NUMBER_FIELDS,
    REQUIRED_FIELDS,
    TIMINGS,
    LazyRows,
    Loaded,
    RecordColumns,
    Skipped,
    unit_split,
    validate_record,
)

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
    kernels = numbers["kernels"]
    bad |= present["kernels"] & ~((kernels >= 1) & (kernels == np.floor(kernels)))
    both = present["read_bytes"] & present["write_bytes"]
    bad |= both & ~_isclose(numbers["read_bytes"] + numbers["write_bytes"], numbers["bytes"])
    p10 = np.where(present["time_p10_s"], numbers["time_p10_s"], -np.inf)
    bad |= p10 > np.where(present["time_p90_s"], numbers["time_p90_s"], np.inf)
    splits: dict[int, dict[str, float]] = {}
    _, has_split, _ = _screen_numbers(table, "flops_by_unit", n, nested=True)
    with_split = np.flatnonzero(has_split & ~bad)
    for p, raw in zip(with_split.tolist(), source.raw_rows(with_split), strict=True):
        try:
            split = unit_split(raw["flops_by_unit"], "")
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
        device_codes=picked["device"][0], device_names=picked["device"][1],
        kernels=np.where(np.isnan(numbers["kernels"][good]), 1.0, numbers["kernels"][good]))


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
