"""Verdicts as a polars frame, and the JSON lines and CSV writers built on it.

One row per record, in input order: the record's own fields (as validated: numbers as floats,
the roof stripped; fields outside the contract passed through), then the judgement (machine,
times, bound, efficiency, verdict, reasons). A reading that is not one is null. The writers
format whole columns at once; only the sentences of the reasons are Python, per row written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
import polars as pl

from .machine import timing_method
from .pricing import pipes_near_binding
from .reasons import Reason
from .text import encodable
from .verdict import BLANK, IMPOSSIBLE, LATENCY_BOUND, VERDICTS

if TYPE_CHECKING:
    from .analysis import Analysis

# The judgement's fields, in the order every writer shows them (DESIGN.md's verdict contract).
VERDICT_FIELDS = ("machine", "memory_time_s", "compute_time_s", "compute_serial_time_s",
                  "sol_time_s", "bound", "binding_unit", "intensity_flops_per_byte", "mix",
                  "regime", "efficiency", "timing_method", "kernels", "floor_s",
                  "efficiency_net_of_floor", "pipes", "serial_sol_time_s", "efficiency_band",
                  "verdict", "reasons")
_OPTIONAL_INPUTS = ("device", "timing", "read_bytes", "write_bytes", "time_p10_s", "time_p90_s")


_BRIEF = pl.List(pl.Struct({"code": pl.String, "reason": pl.String, "fix": pl.String}))


def verdict_frame(analysis: Analysis, lint: Sequence[Sequence[Mapping[str, str]]] | None = None
                  ) -> pl.DataFrame:
    """The verdict rows as columns: inputs, judgement, and `lint` (brief findings) if given."""
    inputs, _ = _input_columns(analysis)
    frame = pl.concat([inputs, _judgement(analysis)], how="horizontal")
    if lint is not None:
        frame = frame.with_columns(nested("lint", [list(x) for x in lint], _BRIEF))
    return frame


def _input_columns(analysis: Analysis) -> tuple[pl.DataFrame, set[str]]:
    """The records' own fields, and which of them hold JSON text (passed through as is)."""
    cols = analysis.columns
    n = len(cols)
    data: dict[str, pl.Series] = {
        "op": strings("op", cols.op),
        "flops": pl.Series("flops", cols.flops, dtype=pl.Float64),
        "bytes": pl.Series("bytes", cols.bytes, dtype=pl.Float64),
        "roof": strings("roof", cols.roof),
        "time_s": pl.Series("time_s", cols.time_s, dtype=pl.Float64),
    }
    for name in _OPTIONAL_INPUTS:
        values = np.asarray(getattr(cols, name))
        if values.dtype == object:
            series = strings(name, values)
            series = series.replace("", None)
        else:
            series = pl.Series(name, values, dtype=pl.Float64, nan_to_null=True)
        if series.null_count() < n:
            data[name] = series
    json_text: set[str] = set()
    extras = cols.extras
    if extras is None and cols.rows is not None:  # rows read one by one (or built in code)
        extras, json_text = _extras_of_rows(cols.rows)
    elif extras is not None:
        for name in extras.columns:
            if name in data:
                continue
            data[name] = extras[name]
            if name in cols.extras_json:
                json_text.add(name)
                data[name] = _valid_json_text(extras[name])
    if cols.extras is None and extras is not None:
        data.update({name: extras[name] for name in extras.columns if name not in data})
    order = [*(f for f in cols.fields if f in data), *(f for f in data if f not in cols.fields)]
    return pl.DataFrame({name: data[name] for name in order}, height=n), json_text


def _valid_json_text(texts: pl.Series) -> pl.Series:
    """A column of JSON text, each value valid JSON: the reader gives a field that is an object
    in one row and a string in another as one text column, the string without its quotes
    (`gemm`); such a value is written back as the JSON string it was. Checked once per
    distinct value."""
    if texts.dtype != pl.String:
        return texts
    bad = [v for v in texts.drop_nulls().unique().to_list() if v and not _is_json(v)]
    if not bad:
        return texts
    return texts.replace(bad, [json.dumps(v) for v in bad])


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _extras_of_rows(rows: Sequence[Any]) -> tuple[pl.DataFrame | None, set[str]]:
    """Fields outside the contract (and the unit split) of records held as dicts, as JSON."""
    contract = {"op", "flops", "bytes", "roof", "time_s", "kernels", *_OPTIONAL_INPUTS}
    names: dict[str, None] = {}
    texts: list[dict[str, str]] = []
    for row in rows:
        texts.append({k: json.dumps(v) for k, v in row.items() if k not in contract})
        names.update(dict.fromkeys(texts[-1]))
    if not names:
        return None, set()
    return (pl.DataFrame({k: pl.Series(k, [t.get(k) for t in texts], dtype=pl.String)
                          for k in names}), set(names))


def strings(name: str, values: np.ndarray) -> pl.Series:
    """A text column; a lone surrogate (a JSON escape polars cannot hold) written as \\udc80."""
    texts = np.asarray(values).astype(str)
    try:
        return pl.Series(name, texts, dtype=pl.String)
    except UnicodeEncodeError:
        return pl.Series(name, [encodable(t) for t in texts.tolist()], dtype=pl.String)


def nested(name: str, values: list[Any], dtype: pl.DataType) -> pl.Series:
    """A list (or struct) column of text; lone surrogates written as \\udc80."""
    try:
        return pl.Series(name, values, dtype=dtype)
    except UnicodeEncodeError:
        return pl.Series(name, _encodable_all(values), dtype=dtype)


def _encodable_all(value: Any) -> Any:
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, list):
        return [_encodable_all(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _encodable_all(v) for k, v in value.items()}
    return value


def _judgement(analysis: Analysis) -> pl.DataFrame:
    priced, judged = analysis.priced, analysis.judged
    verdict = judged.verdict.astype(np.int64)
    blank = verdict == BLANK
    no_efficiency = np.isin(verdict, (BLANK, IMPOSSIBLE, LATENCY_BOUND))
    n = len(analysis)

    def number(values: np.ndarray, hide: np.ndarray | None = None) -> pl.Series:
        out = np.asarray(values, dtype=np.float64).copy()
        if hide is not None:
            out[hide] = np.nan
        out[~np.isfinite(out)] = np.nan
        return pl.Series(out, dtype=pl.Float64, nan_to_null=True)

    def text(values: np.ndarray, hide: np.ndarray | None = None) -> pl.Series:
        series = strings("", values).replace("", None)
        if hide is not None:
            series = pl.select(pl.when(pl.Series(hide)).then(None).otherwise(series)).to_series()
        return series

    bound = np.where(priced.bound_memory, "memory", "compute")
    return pl.DataFrame({
        "machine": text(analysis.machine_name),
        "memory_time_s": number(priced.memory_time_s, blank),
        "compute_time_s": number(priced.compute_time_s, blank),
        "compute_serial_time_s": number(priced.compute_serial_time_s, blank),
        "sol_time_s": number(priced.sol_time_s, blank),
        "bound": text(bound, blank),
        "binding_unit": text(priced.binding_unit, blank),
        "intensity_flops_per_byte": number(priced.intensity_flops_per_byte),
        "mix": text(priced.mix),
        "regime": pl.Series([analysis.regime or "envelope"] * n, dtype=pl.String),
        "efficiency": number(judged.efficiency, no_efficiency),
        **_floor_and_pipes(analysis, blank, no_efficiency, number),
        "verdict": pl.Series(np.array(VERDICTS, dtype=object)[verdict].astype(str),
                             dtype=pl.String),
        "reasons": nested("reasons", [analysis.reasons(i) for i in range(n)],
                          pl.List(pl.String)),
    }, height=n)


def _floor_and_pipes(analysis: Analysis, blank: np.ndarray, no_reading: np.ndarray,
                     number: Any) -> dict[str, pl.Series]:
    """The timing method and floor each row was read with, efficiency net of the floor, and
    where a second pipe is near the binding one, the pipes and the overlapped-serial band
    (`Analysis.row` says the same for one row)."""
    cols, priced, judged = analysis.columns, analysis.priced, analysis.judged
    n = len(analysis)
    timing = strings("timing", np.asarray(cols.timing))
    methods = {t: timing_method(t) for t in timing.unique().to_list()}
    second = (priced.flags.astype(np.int64) & int(Reason.SECOND_PIPE)) != 0
    nothing = np.ones(n, dtype=bool)
    pipes: list[Any] = [None] * n
    for i in np.flatnonzero(second).tolist():
        pipes[i] = [{"unit": k, "time_s": t} for k, t in pipes_near_binding(priced, i)]
    band_low = number(judged.efficiency, no_reading | ~second)
    band_high = (number(judged.serial_efficiency, no_reading | ~second)
                 if judged.serial_efficiency is not None else number(np.full(n, np.nan)))
    return {
        "timing_method": timing.replace_strict(methods, return_dtype=pl.String),
        "kernels": pl.Series(cols.kernel_counts().astype(np.int64)),
        "floor_s": (number(judged.floor_s, blank) if judged.floor_s is not None
                    else number(np.full(n, np.nan))),
        "efficiency_net_of_floor": (number(judged.net_efficiency, no_reading)
                                    if judged.net_efficiency is not None
                                    else number(np.full(n, np.nan))),
        "pipes": nested("pipes", pipes, pl.List(pl.Struct({"unit": pl.String,
                                                             "time_s": pl.Float64}))),
        "serial_sol_time_s": (number(priced.serial_sol_time_s, blank | ~second)
                              if priced.serial_sol_time_s is not None
                              else number(np.full(n, np.nan), nothing)),
        "efficiency_band": pl.select(
            pl.when(pl.Series(second)).then(pl.concat_list(band_low, band_high))
            .otherwise(None)).to_series(),
    }


def _json_fragment(name: str, json_text: bool, omit_null: bool) -> pl.Expr:
    """`"name":value` for one column; null (so left out of the line) where the record has no
    such field."""
    key = json.dumps(name) + ":"
    column = pl.col(name)
    if json_text:
        value = column
    else:
        value = (pl.struct(column.alias("v")).struct.json_encode()
                 .str.slice(5).str.strip_suffix("}"))
    fragment = pl.lit(key) + value
    # empty JSON text is no value: "" in an optional field means absent, and `"k":` is not JSON
    missing = column.is_null() | (column == "") if json_text else column.is_null()
    if omit_null:
        return pl.when(missing).then(None).otherwise(fragment)
    return pl.when(missing).then(pl.lit(key + "null")).otherwise(fragment)


def json_lines(analysis: Analysis, lint: Sequence[Sequence[Mapping[str, str]]] | None = None
               ) -> pl.Series:
    """One JSON object per record, as text: the --json contract."""
    frame = verdict_frame(analysis, lint)
    _, json_text = _input_columns(analysis)
    judged = [c for c in frame.columns if c in VERDICT_FIELDS or c == "lint"]
    inputs = [c for c in frame.columns if c not in judged]
    fragments = [_json_fragment(c, c in json_text, True) for c in inputs]
    tail = pl.struct(judged).struct.json_encode().str.slice(1)  # '"machine":...}'
    return frame.select(
        (pl.lit("{") + pl.concat_str([*fragments, tail], separator=",", ignore_nulls=True))
        .alias("line")).to_series()


def write_json_lines(analysis: Analysis, out: TextIO,
                     lint: Sequence[Sequence[Mapping[str, str]]] | None = None) -> None:
    for line in _chunks(json_lines(analysis, lint)):
        out.write(line)


def csv_frame(analysis: Analysis) -> pl.DataFrame:
    """The verdicts as CSV cells: reasons joined by "; ", nested values as JSON text."""
    frame = verdict_frame(analysis)
    cells: list[pl.Expr] = []
    for name, kind in frame.schema.items():
        column = pl.col(name)
        if name == "reasons":
            cells.append(column.list.join("; "))
        elif isinstance(kind, (pl.Struct, pl.List)):
            cells.append(pl.struct(column.alias("v")).struct.json_encode().str.slice(5)
                         .str.strip_suffix("}").alias(name))
        else:
            cells.append(column)
    return frame.select(cells)


def write_csv(analysis: Analysis, out: TextIO, header: bool = True) -> None:
    out.write(csv_frame(analysis).write_csv(include_header=header, line_terminator="\n"))


def _chunks(lines: pl.Series, size: int = 100_000) -> Any:
    """The lines joined with newlines, a chunk at a time (bounded memory for big batches)."""
    for start in range(0, len(lines), size):
        yield "\n".join(lines.slice(start, size).to_list()) + "\n"
