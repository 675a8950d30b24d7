"""Verdicts as a polars frame, and the JSON lines and CSV writers built on it.

One row per record, in input order: the record's own fields (as validated: numbers as floats,
the roof stripped; fields outside the contract passed through), then the judgement (machine,
times, bound, efficiency, verdict, reasons). A reading that is not one is null. The writers
format whole columns at once; only the sentences of the reasons are Python, per row written.
"""

from __future__ import annotations

import errno
import io
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
import polars as pl

from roofwise.base.text_columns import coded, nested, strings
from roofwise.explain.reason_columns import reasons_column
from roofwise.pricing.core import near_pipes
from roofwise.pricing.reasons import Reason
from roofwise.profiles.machine import timing_method
from roofwise.verdicts.rules import BLANK, NO_EFFICIENCY, VERDICTS

if TYPE_CHECKING:
    from roofwise.verdicts.analysis import Verdicts as Analysis

# The judgement's fields, in the order every writer shows them (the verdict contract of
# docs/records.md).
VERDICT_FIELDS = ("machine", "memory_time_s", "compute_time_s", "compute_serial_time_s",
                  "sol_time_s", "bound", "binding_unit", "intensity_flops_per_byte", "mix",
                  "regime", "efficiency", "timing_method", "kernels", "floor_s",
                  "efficiency_net_of_floor", "pipes", "serial_sol_time_s", "efficiency_band",
                  "verdict", "reasons")
_OPTIONAL_INPUTS = ("device", "timing", "read_bytes", "write_bytes", "time_p10_s", "time_p90_s",
                    "footprint_bytes", "cache_state")


# Lint findings per row (a list per row), by row for the rows that have any, or as columns
# (`lint_columns`: a frame with one finding per row: row, code, severity, reason, fix).
Lint = Sequence[Sequence[Any]] | Mapping[int, Sequence[Any]] | pl.DataFrame
_BRIEF = pl.List(pl.Struct({"code": pl.String, "reason": pl.String, "fix": pl.String}))


def verdict_frame(analysis: Analysis, lint: Sequence[Sequence[Any]] | None = None
                  ) -> pl.DataFrame:
    """The verdict rows as columns: inputs, judgement, and `lint` (brief findings) if given."""
    inputs, _ = _input_columns(analysis)
    frame = pl.concat([inputs, _judgement(analysis)], how="horizontal")
    if lint is not None:
        frame = frame.with_columns(nested("lint", [list(x) for x in lint], _BRIEF))
    return frame


def _input_columns(analysis: Analysis, checked: bool = True) -> tuple[pl.DataFrame, set[str]]:
    """The records' own fields, and which of them hold JSON text (passed through as is; made
    valid JSON here unless not `checked`, when `_lines_of` does it as it writes)."""
    cols = analysis.columns
    n = len(cols)
    data: dict[str, pl.Series] = {
        "op": strings("op", cols.op),
        "flops": pl.Series("flops", cols.flops, dtype=pl.Float64),
        "bytes": pl.Series("bytes", cols.bytes, dtype=pl.Float64),
        "roof": (strings("roof", cols.roof) if cols.roof_codes is None
                 else coded("roof", cols.roof_codes, cols.roof_names)),
        "time_s": pl.Series("time_s", cols.time_s, dtype=pl.Float64),
    }
    for name in _OPTIONAL_INPUTS:
        if getattr(cols, name) is None:  # a column no record of the batch has
            continue
        values = np.asarray(getattr(cols, name))
        if values.dtype == object:
            series = (coded(name, cols.device_codes, cols.device_names)
                      if name == "device" and cols.device_codes is not None
                      else strings(name, values))
            series = series.replace("", None)
        else:
            series = pl.Series(name, values, dtype=pl.Float64, nan_to_null=True)
        if series.null_count() < n:
            data[name] = series
    json_text: set[str] = set()
    extras = cols.extras if cols.extras is not None else pl.DataFrame()
    for name in extras.columns:  # every reader gives them as columns: no row is walked here
        if name in data:
            continue
        data[name] = extras[name]
        if name in cols.extras_json:
            json_text.add(name)
            data[name] = _valid_json_text(extras[name]) if checked else extras[name]
    order = [*(f for f in cols.fields if f in data), *(f for f in data if f not in cols.fields)]
    return pl.DataFrame({name: data[name] for name in order}, height=n), json_text


def _valid_json_text(texts: pl.Series) -> pl.Series:
    """A column of JSON text, each value valid JSON: the reader gives a field that is an object
    in one row and a string in another as one text column, the string without its quotes
    (`gemm`); such a value is written back as the JSON string it was. Each distinct value is
    checked by the engine's JSON parser (stricter than Python's: `NaN` is quoted)."""
    if texts.dtype != pl.String:
        return texts
    values = texts.drop_nulls().unique()
    parsed = values.str.json_path_match("$")  # null where not JSON (and for `null` itself)
    bad = values.filter(parsed.is_null() & (values != "null") & (values != "")).to_list()
    if not bad:
        return texts
    return texts.replace(bad, [json.dumps(v) for v in bad])


def _judgement(analysis: Analysis) -> pl.DataFrame:
    """The judgement's columns (`VERDICT_FIELDS`): the numbers and labels as they are, then one
    engine pass that hides what is no reading (null), so that a million rows cost a few
    column operations."""
    cols, priced, judged = analysis.columns, analysis.priced, analysis.judged
    n = len(analysis)
    verdict = judged.verdict.astype(np.int64)
    second = (priced.flags.astype(np.int64) & int(Reason.SECOND_PIPE)) != 0
    nan = np.full(n, np.nan)
    timing = strings("timing", np.asarray(cols.timing))
    raw = pl.DataFrame({
        "machine": strings("machine", analysis.machine_name),
        "memory_time_s": priced.memory_time_s, "compute_time_s": priced.compute_time_s,
        "compute_serial_time_s": priced.compute_serial_time_s,
        "sol_time_s": priced.sol_time_s, "bound_memory": np.asarray(priced.bound_memory, bool),
        "binding_unit": strings("binding_unit", priced.binding_unit),
        "intensity_flops_per_byte": priced.intensity_flops_per_byte,
        "mix": strings("mix", priced.mix), "efficiency": judged.efficiency,
        "timing": timing, "kernels": cols.kernel_counts().astype(np.int64),
        "floor_s": nan if judged.floor_s is None else judged.floor_s,
        "efficiency_net_of_floor": (nan if judged.net_efficiency is None
                                    else judged.net_efficiency),
        "serial_sol_time_s": (nan if priced.serial_sol_time_s is None
                              else priced.serial_sol_time_s),
        "serial_efficiency": (nan if judged.serial_efficiency is None
                              else judged.serial_efficiency),
        "verdict": verdict, "second": second,
    }, height=n)
    blank = pl.col("verdict") == BLANK
    no_reading = pl.col("verdict").is_in(sorted(NO_EFFICIENCY))
    one_pipe = ~pl.col("second")

    def number(name: str, hide: pl.Expr | None = None) -> pl.Expr:
        column = pl.col(name)
        gone = ~column.is_finite() if hide is None else hide | ~column.is_finite()
        return pl.when(gone).then(None).otherwise(column).alias(name)

    def text(name: str, hide: pl.Expr | None = None) -> pl.Expr:
        column = pl.col(name)
        gone = column == "" if hide is None else hide | (column == "")
        return pl.when(gone).then(None).otherwise(column).alias(name)

    methods = {t: timing_method(t) for t in timing.unique().to_list()}
    frame = raw.select(
        text("machine"),
        number("memory_time_s", blank), number("compute_time_s", blank),
        number("compute_serial_time_s", blank), number("sol_time_s", blank),
        pl.when(blank).then(None).when(pl.col("bound_memory")).then(pl.lit("memory"))
        .otherwise(pl.lit("compute")).alias("bound"),
        text("binding_unit", blank), number("intensity_flops_per_byte"), text("mix"),
        pl.lit(analysis.regime or "envelope").alias("regime"),
        number("efficiency", no_reading),
        pl.col("timing").replace_strict(methods, return_dtype=pl.String)
        .alias("timing_method"),
        pl.col("kernels"), number("floor_s", blank),
        number("efficiency_net_of_floor", no_reading),
        pl.lit(None, dtype=_PIPES).alias("pipes"),
        number("serial_sol_time_s", blank | one_pipe),
        pl.when(one_pipe).then(None).otherwise(pl.concat_list(
            number("efficiency", no_reading), number("serial_efficiency", no_reading)))
        .alias("efficiency_band"),
        pl.lit(pl.Series(VERDICTS, dtype=pl.String)).gather(pl.col("verdict"))
        .alias("verdict"))
    if second.any():  # the pipes near the binding one, listed per row (null elsewhere)
        near = near_pipes(priced, np.flatnonzero(second))
        listed = pl.DataFrame({"row": near.row, "unit": coded("unit", near.unit, near.units),
                               "time_s": near.time_s}).group_by("row", maintain_order=True).agg(
            pl.struct("unit", "time_s").alias("pipes"))
        frame = frame.with_columns(pl.DataFrame({"row": np.arange(n, dtype=np.int64)}).join(
            listed, on="row", how="left", maintain_order="left")["pipes"].cast(_PIPES))
    return frame.with_columns(reasons_column(analysis))


_PIPES = pl.List(pl.Struct({"unit": pl.String, "time_s": pl.Float64}))


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


def json_lines(analysis: Analysis, lint: Lint | None = None) -> pl.Series:
    """One JSON object per record, as text: the --json contract (`lint`: brief findings per
    row, added as a `lint` list)."""
    return _lines_of(*_verdicts_once(analysis), len(analysis), lint)


def _verdicts_once(analysis: Analysis) -> tuple[pl.DataFrame, list[str], set[str]]:
    """The verdict frame, its input columns and which of them hold JSON text, built once for
    both the engine's writer and `json_lines` (judging and explaining a batch twice cost as
    much again)."""
    inputs_frame, json_text = _input_columns(analysis, checked=False)  # `_lines_of` checks
    frame = pl.concat([inputs_frame, _judgement(analysis)], how="horizontal")
    return frame, [c for c in inputs_frame.columns if c not in VERDICT_FIELDS], json_text


def _lines_of(frame: pl.DataFrame, inputs: list[str], json_text: set[str], n: int,
              lint: Lint | None) -> pl.Series:
    """`json_lines` of a verdict frame already built: a field a row lacks is left out."""
    frame, fragments, _ = _fragments(frame, inputs, json_text, n, lint)
    return _separators_escaped(_joined(frame, fragments).to_frame()).to_series()


def _fragments(frame: pl.DataFrame, inputs: list[str], json_text: set[str], n: int,
               lint: Lint | None) -> tuple[pl.DataFrame, list[pl.Expr], bool]:
    """The pieces of each JSON line, in order, which joined by commas and after a `{` make the
    line (the last ends with `}`); a piece is null where the row lacks that field.
    Also whether every row has every piece. Neighbouring fields that every row has, and the
    judgement's fields, are encoded together by the engine."""
    if json_text:
        frame = frame.with_columns(_valid_json_text(frame[name]) for name in json_text)
    if lint is not None:
        frame = frame.with_columns(_lint_column(n, lint))
    fragments: list[pl.Expr] = []
    run: list[str] = []  # neighbouring fields every row has: encoded together
    complete = True
    for name in inputs:
        if name not in json_text and frame[name].null_count() == 0:
            run.append(name)
            continue
        if run:
            fragments.append(_encoded(run))
            run = []
        fragments.append(_json_fragment(name, name in json_text, True))
        column = frame[name]
        complete &= column.null_count() == 0 and not (name in json_text and (column == "").any())
    fragments.append(pl.struct([*run, *(c for c in frame.columns if c in VERDICT_FIELDS),
                                *(["lint"] if lint is not None else [])]
                               ).struct.json_encode().str.slice(1))  # '"...":...}'
    return frame, fragments, complete


# the line breaks of `str.splitlines` (and of older JavaScript) that JSON leaves raw inside
# strings; the others (CR, LF, VT, FF, FS, GS, RS) are below U+0020, which JSON escapes
_LINE_BREAKS_JSON_KEEPS = ("\x85", "\u2028", "\u2029")


def _separators_escaped(pieces: pl.DataFrame) -> pl.DataFrame:
    """JSON text with U+0085, U+2028 and U+2029 (raw only inside strings) written `\\u2028`,
    as json.dumps writes them: a line break inside a line would break a reader that splits on
    it. Only a column with a character beyond ASCII can hold one (told apart by byte and
    character counts, a tenth of the cost of the replacements), and only those are edited."""
    wide = pieces.select((pl.col(c).str.len_bytes() != pl.col(c).str.len_chars()).any()
                         for c in pieces.columns).row(0)
    edited = []
    for name, beyond_ascii in zip(pieces.columns, wide, strict=True):
        if beyond_ascii:
            piece = pl.col(name)
            for sep in _LINE_BREAKS_JSON_KEEPS:
                piece = piece.str.replace_all(sep, f"\\u{ord(sep):04x}", literal=True)
            edited.append(piece)
    return pieces.with_columns(edited) if edited else pieces


def _has_separators(frame: pl.DataFrame) -> bool:
    """Whether a text column holds U+0085, U+2028 or U+2029: searched for only in the columns
    with any character beyond ASCII (told apart by byte and character counts, several times
    faster than the search)."""
    texts = [c for c in frame.columns if frame.schema[c] == pl.String]
    if not texts:
        return False
    wide = frame.select((pl.col(c).str.len_bytes() != pl.col(c).str.len_chars()).any()
                        for c in texts).row(0)
    texts = [c for c, beyond_ascii in zip(texts, wide, strict=True) if beyond_ascii]
    return bool(texts) and bool(frame.select(pl.any_horizontal(
        pl.col(c).str.contains(sep, literal=True).any() for c in texts
        for sep in _LINE_BREAKS_JSON_KEEPS)).item())


def _joined(frame: pl.DataFrame, fragments: list[pl.Expr]) -> pl.Series:
    """The lines of `_fragments`' pieces; a piece that is null (a field the row lacks) is left
    out. The streaming engine builds them a morsel at a time on every core, in row order."""
    line = pl.lit("{") + pl.concat_str(fragments, separator=",", ignore_nulls=True)
    return frame.lazy().select(line.alias("line")).collect(engine="streaming").to_series()


def _encoded(names: list[str]) -> pl.Expr:
    """The fields `names` as `"name":value,...`, JSON by the engine."""
    return pl.struct(names).struct.json_encode().str.slice(1).str.strip_suffix("}")


def _lint_column(n: int, lint: Lint) -> pl.Series:
    """Each row's findings as a list of {code, reason, fix}: an empty list for most rows, the
    findings of the rest gathered by the engine (one flat column per key, grouped by row)."""
    flat = (lint.select(pl.col("row").cast(pl.Int64).alias("i"), "code", "reason", "fix")
            if isinstance(lint, pl.DataFrame) else _flat_briefs(lint))
    grouped = flat.group_by("i", maintain_order=True).agg(
        pl.struct("code", "reason", "fix").alias("lint"))
    return (pl.DataFrame({"i": np.arange(n)})
            .join(grouped, on="i", how="left", maintain_order="left")
            .select(pl.col("lint").fill_null(pl.lit([], dtype=_BRIEF))).to_series())


def _flat_briefs(lint: Sequence[Sequence[Any]] | Mapping[int, Sequence[Any]]) -> pl.DataFrame:
    """Findings held as objects (or brief dicts), one row per finding: i, code, reason, fix."""
    found = lint.items() if isinstance(lint, Mapping) else enumerate(lint)
    rows: list[int] = []
    briefs: list[Any] = []
    for i, findings in found:
        for finding in findings:
            rows.append(i)
            briefs.append(_brief(finding))
    return pl.DataFrame({"i": pl.Series(rows, dtype=pl.Int64),
                         **{k: nested(k, [b[k] for b in briefs], pl.String())
                            for k in ("code", "reason", "fix")}})


def _brief(finding: Any) -> Any:
    """A lint finding as --json shows it (a `Finding`, or its brief dict already)."""
    return finding.brief() if hasattr(finding, "brief") else dict(finding)


# A batch's output, built and ready: called with the stream, it writes (by the engine, which
# releases the GIL, so that a background thread may write while the next batch is judged).
Write = Callable[[TextIO], None]


def write_json_lines(analysis: Analysis, out: TextIO,
                     lint: Lint | None = None) -> None:
    """The --json lines of `analysis` (`json_writer`), written to `out`."""
    json_writer(analysis, lint)(out)


def json_writer(analysis: Analysis, lint: Lint | Callable[[], Lint] | None = None) -> Write:
    """The --json lines, built. Where every record has every field and none is JSON text
    (CSV, Parquet), the engine's NDJSON writer writes the frame itself; otherwise each line is
    built from its fields (`json_lines`) so that a field a record lacks is left out. `lint`
    may be a function giving the findings (a `Future.result`): it is asked for once the
    verdict frame is built, so that the findings can be made meanwhile on another thread."""
    frame, inputs, json_text = _verdicts_once(analysis)
    lint = lint() if callable(lint) else lint
    if json_text or any(frame[c].null_count() for c in inputs) or _has_separators(frame):
        # the lines are encoded by the engine when written (on the writer's thread, so that
        # the next batch is judged meanwhile)
        n = len(analysis)
        return lambda out: _write_pieces(*_fragments(frame, inputs, json_text, n, lint), out)
    if lint is not None:
        frame = frame.with_columns(_lint_column(len(analysis), lint))
    return ndjson_writer(frame)


def _csv_cells(frame: pl.DataFrame) -> list[pl.Expr]:
    """The verdicts as CSV cells: reasons joined by "; ", nested values as JSON text."""
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
    return cells


def write_csv(analysis: Analysis, out: TextIO, header: bool = True,
              columns: Sequence[str] | None = None) -> list[str]:
    """The verdicts as CSV (`csv_writer`), written to `out`; returns the columns written."""
    written, write, _ = csv_writer(analysis, header, columns)
    write(out)
    return written


def csv_writer(analysis: Analysis, header: bool = True, columns: Sequence[str] | None = None
               ) -> tuple[list[str], Write, list[str]]:
    """The verdicts as CSV, built, the columns they go under, and the fields left out. A
    later batch of a stream passes the first batch's `columns` (and no header): its cells go
    under them, empty where the batch lacks a field; a field the header lacks cannot be added
    and is left out (the caller says so)."""
    frame = verdict_frame(analysis)
    cells = _csv_cells(frame)  # made into text as written (on the writer's thread)
    left_out: list[str] = []
    if columns is not None:
        left_out = [c for c in frame.columns if c not in columns]
        named = dict(zip(frame.columns, cells, strict=True))
        cells = [named.get(c, pl.lit(None).alias(c)) for c in columns]
    return [c.meta.output_name() for c in cells], lambda out: _write_target(
        out, lambda target: frame.select(cells).write_csv(
            target, include_header=header, line_terminator="\n")), left_out


def _write_pieces(frame: pl.DataFrame, fragments: list[pl.Expr], complete: bool,
                  out: TextIO) -> None:
    """The JSON lines whose pieces are `fragments` (`_fragments`), written unquoted by the
    engine's CSV writer. Where every row has every piece, the writer joins them itself (its
    separator is the comma between fields), which spares a copy of every line; else they are
    joined first (`_joined`), leaving out the missing ones."""
    if complete:
        pieces = frame.lazy().select((pl.lit("{") + fragments[0]).alias("p0"),
                                     *(piece.alias(f"p{k}")
                                       for k, piece in enumerate(fragments[1:], 1))
                                     ).collect(engine="streaming")
    else:
        pieces = _joined(frame, fragments).to_frame()
    pieces = _separators_escaped(pieces)
    _write_target(out, lambda target: pieces.write_csv(
        target, include_header=False, quote_style="never", line_terminator="\n"))


def json_rows_writer(frame: pl.DataFrame, raw: Collection[str] = ()) -> Write:
    """Each row of `frame` as a JSON object with every field (null where absent), in column
    order; the columns in `raw` hold JSON text (a workload), written as that text. Built by
    the engine and written unquoted by its CSV writer, as the --json lines are."""
    pieces: list[pl.Expr] = []
    run: list[str] = []
    for name in frame.columns:
        if name not in raw:
            run.append(name)
            continue
        if run:
            pieces.append(_encoded(run))
            run = []
        pieces.append(pl.lit(json.dumps(name) + ":") + pl.col(name).fill_null("null"))
    if run:
        pieces.append(_encoded(run))
    pieces[-1] = pieces[-1] + pl.lit("}")  # `_write_pieces` opens each line with "{"

    def write(out: TextIO) -> None:
        for part in frame.iter_slices(_ROWS_AT_ONCE):  # the text of a slice at a time
            _write_pieces(part, pieces, True, out)
    return write


_ROWS_AT_ONCE = 16_384  # rows of JSON text built before they are written


def ndjson_writer(frame: pl.DataFrame) -> Write:
    """A frame's rows as JSON lines, written by the engine."""
    return lambda out: _write_target(out, frame.write_ndjson)


def _write_target(out: TextIO, write: Any) -> None:
    """`write(file)` by the engine into the bytes under `out` (or into text, then `out`)."""
    target = getattr(out, "buffer", None)
    if target is None:
        buffer = io.BytesIO()
        write(buffer)
        out.write(buffer.getvalue().decode("utf-8"))
        return
    out.flush()
    try:
        write(target)
        target.flush()
    except OSError as exc:  # the engine says a closed pipe in words: `| head` is not an error
        if isinstance(exc, BrokenPipeError) or "Broken pipe" in str(exc):
            raise BrokenPipeError(errno.EPIPE, "Broken pipe") from None
        raise
