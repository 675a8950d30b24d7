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
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
import polars as pl

from .machine import timing_method
from .pricing import pipes_near_binding
from .reasons import IMPOSSIBLE_REASONS, Reason
from .report import fmt
from .text import encodable
from .verdict import AT_CEILING, BELOW, BLANK, IMPOSSIBLE, LATENCY_BOUND, VERDICTS

if TYPE_CHECKING:
    from .analysis import Analysis

# The judgement's fields, in the order every writer shows them (DESIGN.md's verdict contract).
VERDICT_FIELDS = ("machine", "memory_time_s", "compute_time_s", "compute_serial_time_s",
                  "sol_time_s", "bound", "binding_unit", "intensity_flops_per_byte", "mix",
                  "regime", "efficiency", "timing_method", "kernels", "floor_s",
                  "efficiency_net_of_floor", "pipes", "serial_sol_time_s", "efficiency_band",
                  "verdict", "reasons")
_OPTIONAL_INPUTS = ("device", "timing", "read_bytes", "write_bytes", "time_p10_s", "time_p90_s")


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
    texts = np.asarray(values).tolist()
    try:
        return pl.Series(name, texts, dtype=pl.String)
    except (UnicodeEncodeError, TypeError):  # a surrogate, or a value that is not text
        return pl.Series(name, [encodable(str(t)) for t in texts], dtype=pl.String)


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
        "reasons": reasons_column(analysis),
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


# Flags whose sentences need more than a row's own columns (a list of pipes, a floor in
# parts, the units over their rates): those rows are explained one by one
# (`analysis.explain`); every other row's sentences are built per template over columns.
_ONE_BY_ONE = (Reason.UNKNOWN_UNIT | Reason.BAD_TIME | Reason.ABOVE_THEORETICAL_RATE
               | Reason.BELOW_LATENCY_FLOOR | Reason.FLOOR_SPLIT | Reason.FLOOR_SHARE
               | Reason.SECOND_PIPE)


def reasons_column(analysis: Analysis) -> pl.Series:
    """Why each row got its verdict, as a list of sentences per row: the sentences
    `Analysis.reasons(i)` gives, built per verdict and flag template over whole columns (a
    constant per machine, or numbers formatted for the rows that carry the flag only)."""
    from .analysis import explain
    from .mismatch import mismatches

    n = len(analysis)
    cols, priced, judged = analysis.columns, analysis.priced, analysis.judged
    flags = judged.flags.astype(np.int64)
    verdict = judged.verdict.astype(np.int64)
    net = (np.zeros(n, dtype=bool) if judged.net_efficiency is None
           else np.isfinite(judged.net_efficiency))
    reading = np.isin(verdict, (AT_CEILING, BELOW))
    no_machine = (flags & int(Reason.NO_MACHINE)) != 0
    alone = (((flags & int(_ONE_BY_ONE)) != 0) | (reading & net)) & ~no_machine
    templated = ~alone & ~no_machine
    machine_name = np.asarray(analysis.machine_name).astype(object)
    memory = np.asarray(priced.bound_memory, dtype=bool)
    columns: dict[str, Any] = {"templated": templated}  # a frame of n rows, even with no text
    texts: list[pl.Expr] = []

    def rows_with(flag: Reason, name: str | None = None, extra: np.ndarray | None = None
                  ) -> np.ndarray:
        mask = templated & ((flags & int(flag)) != 0) if flag else templated.copy()
        if name is not None:
            mask &= machine_name == name
        return mask if extra is None else mask & extra

    def when(mask: np.ndarray, text: pl.Expr) -> None:
        """`text` for the rows in `mask`; nothing at all when no row carries it."""
        if mask.any():
            key = f"m{len(columns)}"
            columns[key] = mask
            texts.append(pl.when(pl.col(key)).then(text))

    def column(name: str, values: Any) -> pl.Expr:
        if name not in columns:
            columns[name] = values
        return pl.col(name)

    def formatted(name: str, rows: np.ndarray, values: list[str]) -> pl.Expr:
        """Text for the rows at `rows` (indexes), null elsewhere."""
        series = pl.Series([None] * n, dtype=pl.String)
        if len(rows):
            series = series.scatter(rows, pl.Series(values, dtype=pl.String))
        return column(name, series)

    mismatch = mismatches(analysis)
    when(templated & (mismatch != ""), column("mismatch", strings("mismatch", mismatch)))
    for name, m in analysis.machines.items():
        when(rows_with(Reason.UNKNOWN_ROOF, name), pl.format(
            "unknown roof {} on {}; units: {}", _repr_text(column("roof", strings(
                "roof", cols.roof))), pl.lit(m.name), pl.lit(", ".join(m.units))))
        when(rows_with(Reason.UNIT_RATE_GAP, name), pl.lit(
            f"{m.name} has no known rate for the units used (a gap in its sources)"))
        when(rows_with(Reason.NO_BANDWIDTH, name), pl.lit(
            f"{m.name} has no known {m.dram.name} bandwidth (a gap)"))
    when(rows_with(Reason.ZERO_BYTES), pl.lit(
        "zero bytes: the ledger moves nothing, so there is no memory roof to read"))
    over = rows_with(Reason.ABOVE_THEORETICAL_BANDWIDTH)
    if over.any():
        at = np.flatnonzero(over)
        achieved = formatted("achieved", at, [fmt.fixed(v / 1e9, ".1f", "GB/s") for v in
                                              judged.achieved_bytes_per_s[at].tolist()])
        for name, m in analysis.machines.items():
            theory = m.dram.theoretical_bytes_per_s or math.nan
            when(over & (machine_name == name), pl.format(
                "bytes/time {} exceeds {} theoretical {} GB/s: physically impossible, so the "
                "bytes or the time are wrong", achieved, pl.lit(m.dram.name),
                pl.lit(f"{theory / 1e9:.0f}")))
    # an impossible row's anomaly is said by its impossible sentence
    anomaly = rows_with(Reason.ANOMALY) & ((flags & int(IMPOSSIBLE_REASONS)) == 0)
    if anomaly.any():
        when(anomaly, column("anomaly", anomaly_texts(analysis, np.flatnonzero(anomaly))))
    for name, m in analysis.machines.items():
        used = (pl.lit(f"{analysis.regime} regime") if analysis.regime else pl.format(
            "{} {} mix", pl.lit(m.dram.name), column("mix", strings("mix", priced.mix))))
        when(rows_with(Reason.ABOVE_REGIME_WITHIN_ENVELOPE, name), pl.format(
            "above the ceiling of the {} it was priced with, but within the envelope (the "
            "highest measured mix and regime)", used))
    at = np.flatnonzero(templated & reading)
    if len(at):
        percent = column("percent", percent_texts(judged.efficiency, at, n))
        for name, m in analysis.machines.items():
            when(rows_with(Reason.NONE, name, reading & memory), pl.format(
                "{} of SOL; memory-bound on {} {} mix", percent, pl.lit(m.dram.name),
                column("mix", strings("mix", priced.mix))))
            when(rows_with(Reason.NONE, name, reading & ~memory), pl.format(
                "{} of SOL; compute-bound on {}", percent,
                column("binding", strings("binding", priced.binding_unit))))
    for name, m in analysis.machines.items():
        when(rows_with(Reason.UNCALIBRATED_MEMORY, name), pl.lit(
            f"{m.dram.name} bandwidth is the datasheet figure (uncalibrated)"))
        raw = [pl.when(column(f"ops:{key}", ops > 0)).then(pl.lit(key))
               for key, ops in priced.unit_ops.items()
               if (unit := m.unit(key)) is not None and not unit.calibrated]
        if raw:
            when(rows_with(Reason.UNCALIBRATED_UNIT, name),
                 pl.lit("uncalibrated unit(s) priced at the datasheet rate: ")
                 + pl.concat_str(raw, separator=", ", ignore_nulls=True))
    when(rows_with(Reason.WALL_TIMING), pl.lit(
        "wall-clock time includes host overhead: efficiency is a lower bound"))
    frame = pl.DataFrame(columns, height=n)
    # Sentences joined on a separator no sentence holds, then split: an engine-side list
    # build several times faster than concatenating lists.
    if texts:
        joined = pl.concat_str(texts, separator=_UNIT_SEPARATOR, ignore_nulls=True)
        out = frame.select(pl.when(joined == "").then(pl.lit([], dtype=pl.List(pl.String)))
                           .otherwise(joined.str.split(_UNIT_SEPARATOR)).alias("reasons")
                           ).to_series()
    else:
        out = pl.Series("reasons", [[]] * n, dtype=pl.List(pl.String))
    special = np.flatnonzero(alone | no_machine)
    if len(special):
        lists = [explain(analysis, i) for i in special.tolist()]
        flat = [encodable(text) for found in lists for text in found]
        owner = np.repeat(special, [len(found) for found in lists])
        alone_rows = (pl.DataFrame({"i": owner, "alone": pl.Series(flat, dtype=pl.String)})
                      .group_by("i", maintain_order=True).agg("alone"))
        alone_rows = pl.concat([alone_rows, pl.DataFrame(  # rows explained by no sentence
            {"i": np.setdiff1d(special, owner), "alone": [[]] * len(np.setdiff1d(
                special, owner))}, schema={"i": pl.Int64, "alone": pl.List(pl.String)})])
        out = (pl.DataFrame({"i": np.arange(n), "reasons": out})
               .join(alone_rows, on="i", how="left", maintain_order="left")
               .select(pl.coalesce("alone", "reasons")).to_series())
    return out.alias("reasons")


def anomaly_texts(analysis: Analysis, at: np.ndarray) -> pl.Series:
    """The anomaly sentence of the rows `at` (null elsewhere): `reason_text`'s template, the
    ceiling looked up once per (machine, bound, unit), numbers formatted per row."""
    from .reason_text import CeilingFacts, above_envelope_text

    n = len(analysis)
    cols, priced, judged = analysis.columns, analysis.priced, analysis.judged
    ratio = judged.envelope_efficiency.astype(np.float64)
    memory = np.asarray(priced.bound_memory, dtype=bool)
    binding = np.asarray(priced.binding_unit).astype(object)
    texts: list[str] = []
    ceilings: dict[tuple[str, bool, str], Any] = {}
    for i in at.tolist():
        name = str(analysis.machine_name[i])
        key = (name, bool(memory[i]), str(binding[i]))
        if key not in ceilings:
            ceilings[key] = analysis.machines[name].ceiling(key[1], key[2])
        ceiling = ceilings[key]
        time_s = float(cols.time_s[i])
        facts = None
        if ceiling.theoretical_per_s is not None and time_s > 0:
            done = float(cols.bytes[i]) if key[1] else float(priced.binding_ops[i])
            facts = CeilingFacts(ceiling.name, done / time_s / ceiling.theoretical_per_s,
                                 ceiling.fraction)
        texts.append(above_envelope_text(float(ratio[i]), facts))
    column = pl.Series([None] * n, dtype=pl.String)
    return column.scatter(at, pl.Series(texts, dtype=pl.String)) if len(at) else column


_UNIT_SEPARATOR = "\x1f"  # ASCII unit separator: in no sentence (names are sanitised)


def percent_texts(values: np.ndarray, at: np.ndarray, n: int) -> pl.Series:
    """`fmt.percent` of `values` at the rows `at` (null elsewhere), formatted by the engine.

    Rounding to 0.1% by the engine and by Python's format agree except within a hair of a
    tie (x.x5); those rows, and the rare forms (<0.1%, scientific), are formatted by
    `fmt.percent` itself, so every text is exactly what `fmt.percent` writes.
    """
    x = np.asarray(values, dtype=np.float64)[at] * 100
    with np.errstate(invalid="ignore"):
        scaled = x * 10
        tie = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6
        plain = np.isfinite(x) & (np.abs(x) >= 0.05) & (np.abs(x) < 1e6) & ~tie
    texts = pl.select(pl.lit(pl.Series(x)).round(1).cast(pl.String) + "%").to_series()
    python = np.flatnonzero(~plain)
    if len(python):
        texts = texts.scatter(python, pl.Series([fmt.percent(v / 100) for v in
                                                 x[python].tolist()], dtype=pl.String))
    column = pl.Series([None] * n, dtype=pl.String)
    return column.scatter(at, texts) if len(at) else column


def _repr_text(column: pl.Expr) -> pl.Expr:
    """Python's repr of a plain string (quotes chosen as repr chooses them)."""
    return (pl.when(column.str.contains("'") & ~column.str.contains('"'))
            .then(pl.lit('"') + column + pl.lit('"'))
            .otherwise(pl.lit("'") + column.str.replace_all("\\", "\\\\", literal=True)
                       .str.replace_all("'", "\\'", literal=True) + pl.lit("'")))


def strings_or_null(values: np.ndarray) -> pl.Series:
    """A text column from an object array of str or None."""
    try:
        return pl.Series(values.tolist(), dtype=pl.String)
    except UnicodeEncodeError:
        return pl.Series([None if v is None else encodable(v) for v in values.tolist()],
                         dtype=pl.String)


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
    inputs_frame, json_text = _input_columns(analysis)  # verdict_frame's own part
    frame = pl.concat([inputs_frame, _judgement(analysis)], how="horizontal")
    return frame, [c for c in inputs_frame.columns if c not in VERDICT_FIELDS], json_text


def _lines_of(frame: pl.DataFrame, inputs: list[str], json_text: set[str], n: int,
              lint: Lint | None) -> pl.Series:
    """`json_lines` of a verdict frame already built: a field a row lacks is left out."""
    fragments: list[pl.Expr] = []
    run: list[str] = []  # neighbouring fields every row has: encoded together
    for name in [*inputs, ""]:
        if name and name not in json_text and frame[name].null_count() == 0:
            run.append(name)
            continue
        if run:
            fragments.append(pl.struct(run).struct.json_encode().str.slice(1)
                             .str.strip_suffix("}"))
            run = []
        if name:
            fragments.append(_json_fragment(name, name in json_text, True))
    judged = pl.struct([c for c in frame.columns if c in VERDICT_FIELDS]).struct.json_encode()
    if lint is None:
        tail = judged.str.slice(1)  # '"machine":...}'
    else:
        frame = frame.with_columns(_lint_column(n, lint))
        tail = pl.struct([*(c for c in frame.columns if c in VERDICT_FIELDS), "lint"]
                         ).struct.json_encode().str.slice(1)
    return frame.select(
        (pl.lit("{") + pl.concat_str([*fragments, tail], separator=",", ignore_nulls=True))
        .alias("line")).to_series()


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


def write_json_lines(analysis: Analysis, out: TextIO,
                     lint: Lint | None = None) -> None:
    """The --json lines. Where every record has every field and none is JSON text (CSV,
    Parquet), the engine's NDJSON writer writes the frame itself; otherwise each line is built
    from its fields (`json_lines`) so that a field a record lacks is left out."""
    frame, inputs, json_text = _verdicts_once(analysis)
    if json_text or any(frame[c].null_count() for c in inputs):
        _write_lines(_lines_of(frame, inputs, json_text, len(analysis), lint), out)
        return
    if lint is not None:
        frame = frame.with_columns(_lint_column(len(analysis), lint))
    _write_target(out, frame.write_ndjson)


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


def write_csv(analysis: Analysis, out: TextIO, header: bool = True,
              columns: Sequence[str] | None = None) -> list[str]:
    """The verdicts as CSV; returns the columns written. A later batch of a stream passes
    the first batch's `columns` (and no header): its cells go under them, empty where the
    batch lacks a field; a field the header lacks cannot be added and is left out."""
    frame = csv_frame(analysis)
    if columns is not None:
        frame = frame.select([pl.col(c) if c in frame.columns else pl.lit(None).alias(c)
                              for c in columns])
    out.write(frame.write_csv(include_header=header, line_terminator="\n"))
    return frame.columns


def _write_lines(lines: pl.Series, out: TextIO) -> None:
    """Each text on its own line, written by the engine (to the bytes under `out` when it has
    them)."""
    frame = lines.to_frame("line")
    _write_target(out, lambda target: frame.write_csv(target, include_header=False,
                                                      quote_style="never"))


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
