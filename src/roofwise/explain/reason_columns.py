"""Why each row got its verdict: the one explanation engine, for one row and for a million.

Each sentence is built per verdict and flag template over the rows that carry it, in the
order a person reads them (what decided the verdict first, caveats last). The templates are
`reason_text`'s (one per sentence); here they are fed columns of numbers formatted by `fmt`'s
column formatters, or rendered once per distinct value (a machine's constants, a floor). The
few sentences that need a row's whole unit split (a second pipe near the binding one, units a
profile lacks) are written per row by the same `reason_text` functions, for those rows only.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from roofwise.base import fmt
from roofwise.base.text import encodable
from roofwise.base.text_columns import coded, null_texts, strings
from roofwise.explain import reason_text
from roofwise.explain.facts import floor_facts
from roofwise.pricing.core import Priced, near_pipes
from roofwise.pricing.reasons import BLANK_REASONS, IMPOSSIBLE_REASONS, Reason
from roofwise.records.read import categorize
from roofwise.verdicts.mismatch import mismatch_codes
from roofwise.verdicts.rules import AT_CEILING, BELOW, BLANK, CACHE_RESIDENT

if TYPE_CHECKING:
    from roofwise.profiles.machine import Machine
    from roofwise.verdicts.analysis import Verdicts



def reason_lists(analysis: Verdicts) -> list[list[str]]:
    """Each row's sentences as a Python list (what the table, the report and a notebook show
    of the rows they took)."""
    return reasons_column(analysis).to_list()


def reasons_column(analysis: Verdicts) -> pl.Series:
    """A list of sentences per row: why each row got its verdict, with the numbers that
    decided it."""
    with np.errstate(all="ignore"):  # an overflowing rate is reported, not warned about
        return _reasons_column(analysis)


def _reasons_column(analysis: Verdicts) -> pl.Series:
    n = len(analysis)
    cols, priced, judged = analysis.columns, analysis.priced, analysis.judged
    flags = judged.flags.astype(np.int64)
    verdict = judged.verdict.astype(np.int64)
    reading = np.isin(verdict, (AT_CEILING, BELOW))
    no_machine = (flags & int(Reason.NO_MACHINE)) != 0
    second_pipe = (flags & int(Reason.SECOND_PIPE)) != 0
    templated = ~no_machine
    on_machine = {name: analysis.on_machine(name) for name in analysis.machines}
    memory = np.asarray(priced.bound_memory, dtype=bool)
    working_set = cols.working_set_bytes()
    columns: dict[str, Any] = {"templated": templated}  # a frame of n rows, even with no text
    texts: list[tuple[np.ndarray, pl.Expr]] = []  # (rows, their sentence), in saying order

    # a blank row has no bound: only why it is blank is said of it, no caveat of a bound
    blank = verdict == BLANK

    def has(flag: Reason) -> np.ndarray:
        mask = templated & ((flags & int(flag)) != 0)
        return mask if flag & BLANK_REASONS else mask & ~blank

    def rows_with(flag: Reason, name: str | None = None, extra: np.ndarray | None = None
                  ) -> np.ndarray:
        mask = has(flag) if flag else templated.copy()
        if name is not None:
            mask &= on_machine[name]
        return mask if extra is None else mask & extra

    def when(mask: np.ndarray, text: pl.Expr | Callable[[], pl.Expr]) -> None:
        """`text` for the rows in `mask`; nothing at all (nor its columns built, when `text`
        is a function) when no row carries it."""
        if mask.any():
            texts.append((np.flatnonzero(mask), text if isinstance(text, pl.Expr) else text()))

    def column(name: str, values: Any) -> pl.Expr:
        if name not in columns:
            columns[name] = values
        return pl.col(name)

    machines = list(analysis.machines.values())

    def by_machine(name: str, texts: list[str | None]) -> pl.Expr:
        """A text per machine: each row's machine's, gathered by the template over its own
        rows only (not made for every row of the batch first)."""
        return pl.lit(strings(name, texts)).gather(
            column("machine", analysis.machine_index_or_first))

    def sentences(mask: np.ndarray, values: list[str] | pl.Series) -> None:
        """One sentence per row of `mask`, already written, in row order (a column as the
        engine filled it, or texts written one at a time)."""
        if mask.any():
            when(mask, column(f"t{len(columns)}", scattered(n, np.flatnonzero(mask), (
                values if isinstance(values, pl.Series) else [encodable(v) for v in values]))))

    sentences(no_machine, [str(reason) or "no machine profile"
                           for reason in analysis.no_machine_reason[no_machine].tolist()])
    mismatch, mismatch_texts = mismatch_codes(analysis)
    when(templated & (mismatch != 0), lambda: column("mismatch", coded(
        "mismatch", mismatch, mismatch_texts)))
    def unknown_roof(m: Machine) -> pl.Expr:
        return pl.format("unknown roof {} on {}; units: {}", _repr_text(column(
            "roof", strings("roof", cols.roof))), pl.lit(m.name), pl.lit(", ".join(m.units)))

    def rate_gap(m: Machine) -> pl.Expr:
        """The units a row uses that have no rate on `m`, named (with the pipe they run on
        there)."""
        named = []
        for key, ops in priced.unit_ops.items():
            unit = m.unit(key)
            if unit is not None and unit.effective_ops_per_s(analysis.regime) is None:
                label = key if unit.key == key else f"{key} (on {unit.key} here)"
                named.append(pl.when(column(f"ops:{key}", ops > 0)).then(pl.lit(label)))
        units = pl.concat_str(named, separator=", ", ignore_nulls=True) if named else pl.lit("")
        return pl.format("{} has no known rate for {} (a gap in its sources; `roofwise "
                         "calibrate` measures it)", pl.lit(m.name),
                         pl.when(units == "").then(pl.lit("the units used")).otherwise(units))

    def above_regime(m: Machine) -> pl.Expr:
        used = (pl.lit(f"{analysis.regime} regime") if analysis.regime else pl.format(
            "{} {} mix", pl.lit(m.dram.name), column("mix", strings("mix", priced.mix))))
        return pl.format("above the ceiling of the {} it was priced with, but within the "
                         "envelope (the highest measured mix and regime)", used)

    for name, m in analysis.machines.items():
        when(rows_with(Reason.UNKNOWN_ROOF, name), functools.partial(unknown_roof, m))
        lacking = rows_with(Reason.UNKNOWN_UNIT, name)
        at = np.flatnonzero(lacking)
        missing = [u for u in cols.flops_by_unit if m.unit(u) is None]
        if len(at) and missing:  # the units each row names that the card lacks, in order
            head, tail = reason_text.unknown_units_sentence(m.name, ["\0"]).split("\0")
            said = pl.select(pl.concat_str(
                [pl.when(pl.lit(cols.flops_by_unit[u][at] > 0)).then(pl.lit(encodable(u)))
                 for u in missing], separator=", ", ignore_nulls=True)).to_series()
            sentences(lacking, head + said + tail)
        when(rows_with(Reason.UNIT_RATE_GAP, name), functools.partial(rate_gap, m))
        when(rows_with(Reason.NO_BANDWIDTH, name), pl.lit(
            f"{m.name} has no known {m.dram.name} bandwidth (a gap)"))
    when(rows_with(Reason.ZERO_BYTES), pl.lit(
        "zero bytes: the ledger moves nothing, so there is no memory roof to read"))
    bad_time = rows_with(Reason.BAD_TIME)
    sentences(bad_time, [f"non-positive time_s {t:g}" for t in cols.time_s[bad_time].tolist()])
    over = rows_with(Reason.ABOVE_THEORETICAL_BANDWIDTH)
    dram_bytes = (np.full(n, np.nan) if judged.cache_dram_bytes is None
                  else judged.cache_dram_bytes)
    cold = cols.cold_cache()
    if over.any():
        at = np.flatnonzero(over)
        achieved = column("achieved", scattered(n, at, fmt.fixed_column(
            judged.achieved_bytes_per_s[at] / 1e9, ".1f", "GB/s")))
        beyond = null_texts(n)  # each card's clause, for its own rows
        for name, m in analysis.machines.items():
            mine = np.flatnonzero(over & on_machine[name])
            if len(mine):
                beyond = beyond.scatter(mine, _beyond_caches(
                    working_set[mine], dram_bytes[mine], cols.time_s[mine], cold[mine], m))
        # one template over every card's rows: what differs by card is gathered by the row's
        when(over, pl.format(
            "bytes/time {} exceeds {} theoretical {} GB/s{}: physically impossible, so the "
            "bytes or the time are wrong", achieved,
            by_machine("dram", [m.dram.name for m in machines]),
            by_machine("theory", [f"{(m.dram.theoretical_bytes_per_s or math.nan) / 1e9:.0f}"
                                  for m in machines]),
            column("beyond", beyond)))
    resident = has(Reason.CACHE_RESIDENT) & (verdict == CACHE_RESIDENT)
    if resident.any() and judged.cache_level is not None:
        at = np.flatnonzero(resident)
        when(resident, column("cache", scattered(n, at, _cache_resident_texts(
            analysis, at, working_set[at], dram_bytes[at], cold[at]))))
    over_rate = has(Reason.ABOVE_THEORETICAL_RATE)
    if over_rate.any():
        timed = over_rate & (cols.time_s > 0) & (analysis.machine_index >= 0)
        for key, ops in priced.unit_ops.items():
            units = [m.unit(key) for m in machines]
            peaks = [u.theoretical_ops_per_s if u is not None and u.theoretical_ops_per_s
                     else None for u in units]
            if all(p is None for p in peaks):
                continue
            with np.errstate(all="ignore"):  # a card without this unit's peak: no row
                rate = ops / cols.time_s
                rows = timed & (rate > np.array([math.nan if p is None else p for p in peaks],
                                                dtype=np.float64)[analysis.machine_index_or_first])
            if rows.any():
                at = np.flatnonzero(rows)
                around = [reason_text.above_rate_sentence(
                    key, "\0", fmt.tera_rate(p, key)).split("\0") if p is not None else ["", ""]
                    for p in peaks]
                when(rows, by_machine(f"before:{key}", [b for b, _ in around]) + column(
                    f"rate:{key}", scattered(n, at, fmt.tera_rate_column(rate[at], key)))
                    + by_machine(f"after:{key}", [a for _, a in around]))
    floors = FloorTexts(analysis, has(Reason.BELOW_LATENCY_FLOOR) | has(Reason.FLOOR_SPLIT)
                         | (templated & reading & _finite(judged.net_efficiency, n)))
    sentences(has(Reason.BELOW_LATENCY_FLOOR), floors.latency_bound(
        np.flatnonzero(has(Reason.BELOW_LATENCY_FLOOR))))
    # an impossible row's anomaly is said by its impossible sentence
    anomaly = has(Reason.ANOMALY) & ((flags & int(IMPOSSIBLE_REASONS)) == 0)
    if anomaly.any():
        when(anomaly, column("anomaly", anomaly_texts(analysis, np.flatnonzero(anomaly))))
    for name, m in analysis.machines.items():
        when(rows_with(Reason.ABOVE_REGIME_WITHIN_ENVELOPE, name),
             functools.partial(above_regime, m))
    # the pipes near the binding one of every row that has a second one, written once
    second_rows = np.flatnonzero(second_pipe)
    pipes = pipes_by_row(priced, second_rows) if len(second_rows) else pl.DataFrame()
    at = np.flatnonzero(templated & reading)
    if len(at):
        # a floor that binds part of the time: the efficiency net of it, said beside the
        # efficiency (a split row says it in its own sentence instead)
        beside = at[_finite(judged.net_efficiency, n)[at] & ((flags[at] & int(Reason.FLOOR_SPLIT))
                                                          == 0)]
        net = scattered(n, beside, floors.net_beside(beside))
        percent = column("percent", percent_texts(judged.efficiency, at, n))
        beside_text = column("net", net.fill_null(""))
        # one template per reading over every machine's rows: what differs by machine (the
        # memory level's name) is a column gathered by the row's machine
        when(rows_with(Reason.NONE, None, reading & memory), lambda: pl.format(
            "{} of SOL{}; memory-bound on {} {} mix", percent, beside_text,
            by_machine("dram", [m.dram.name for m in machines]),
            column("mix", strings("mix", priced.mix))))
        when(rows_with(Reason.NONE, None, reading & ~memory & ~second_pipe), lambda: pl.format(
            "{} of SOL{}; compute-bound on {}", percent, beside_text,
            column("binding", strings("binding", priced.binding_unit))))
        # a second pipe near the binding one is named beside it
        pair = rows_with(Reason.NONE, None, reading & ~memory & second_pipe)
        at_pair = np.flatnonzero(pair)
        labels = column("pipes", scattered(n, at_pair, pipes.gather(
            np.searchsorted(second_rows, at_pair))["label"] if len(at_pair) else []))
        when(pair, pl.format("{} of SOL{}; compute-bound on {}", percent, beside_text, labels))
    split = has(Reason.FLOOR_SPLIT) if judged.net_efficiency is not None else np.zeros(n, bool)
    sentences(split, floors.floor_split(np.flatnonzero(split)))
    if priced.serial_sol_time_s is not None and judged.serial_efficiency is not None:
        band = np.flatnonzero(has(Reason.SECOND_PIPE))
        sentences(has(Reason.SECOND_PIPE), pipes_sentences(analysis, band, pipes.gather(
            np.searchsorted(second_rows, band))["named"] if len(band) else None))
    when(rows_with(Reason.UNCALIBRATED_MEMORY), lambda: by_machine("uncalibrated", [
        f"{m.dram.name} bandwidth is the datasheet figure (uncalibrated)" for m in machines]))
    # each unit named for the rows that use it, on a card where it is uncalibrated (null on
    # the others): one template over every card's rows
    labels_by_unit = {key: [None if (unit := m.unit(key)) is None or unit.calibrated
                            else key if unit.key == key else f"{key} (on {unit.key} here)"
                            for m in machines] for key in priced.unit_ops}
    raw = [pl.when(column(f"ops:{key}", priced.unit_ops[key] > 0)).then(
               by_machine(f"uncalibrated:{key}", labels))
           for key, labels in labels_by_unit.items() if any(labels)]
    if raw:
        named = np.array([any(labels[k] for labels in labels_by_unit.values())
                          for k in range(len(machines))], dtype=bool)
        when(rows_with(Reason.UNCALIBRATED_UNIT, None, named[analysis.machine_index_or_first]),
             lambda: pl.lit("uncalibrated unit(s) priced at the datasheet rate: ")
             + pl.concat_str(raw, separator=", ", ignore_nulls=True))
    when(rows_with(Reason.WALL_TIMING), pl.lit(
        "wall-clock time includes host overhead: efficiency is a lower bound"))
    return _lists(pl.DataFrame(columns, height=n), texts)


def _lists(frame: pl.DataFrame, texts: list[tuple[np.ndarray, pl.Expr]]) -> pl.Series:
    """Each row's sentences as a list, in `texts` order.

    Each template is filled for its own rows only (not evaluated over every row and masked);
    the sentences, one row of a long frame each, are put in row order (a stable sort keeps
    each row's in the order they were said) and gathered into lists by the engine, a
    grouping over sorted keys; a row that says none gets []."""
    n = frame.height
    rows: list[np.ndarray] = []
    said: list[pl.Series] = []
    for at, template in texts:
        roots = list(dict.fromkeys(template.meta.root_names())) or frame.columns[:1]
        values = frame.select(roots)[at].select(template.alias("t")).to_series()
        if len(values) != len(at):  # a literal: one value for every row
            values = values.new_from_index(0, len(at))
        rows.append(at)
        said.append(values)
    if not rows:
        return pl.Series("reasons", [[]] * n, dtype=pl.List(pl.String))
    said_at = np.concatenate(rows).astype(np.int64)
    order = np.argsort(said_at, kind="stable")
    grouped = pl.DataFrame({"i": pl.Series(said_at[order]).set_sorted(),
                            "t": pl.concat(said).gather(order)}
                           ).group_by("i", maintain_order=True).agg("t")
    if grouped.height == n:  # every row said something: the groups are the rows, in order
        return grouped["t"].alias("reasons")
    return (pl.DataFrame({"i": pl.Series(np.arange(n), dtype=pl.Int64)})
            .join(grouped, on="i", how="left", maintain_order="left")
            .select(pl.col("t").fill_null(pl.lit([], dtype=pl.List(pl.String))))
            .to_series().alias("reasons"))


def _beyond_caches(working_set_bytes: np.ndarray, dram_bytes: np.ndarray, time_s: np.ndarray,
                   cold: np.ndarray, machine: Machine) -> pl.Series:
    """`reason_text.beyond_caches_around`'s clause of each working set ("" on a machine
    without cache levels), its texts gathered around each size's; where the bytes left to
    DRAM (`dram_bytes`, NaN for a set that fits a cache) outrun its theoretical bandwidth,
    those bytes and their rate follow."""
    caches = _cache_facts(machine)
    if not caches:
        return strings("beyond", [""] * len(working_set_bytes))
    with np.errstate(invalid="ignore", divide="ignore"):
        dram_rate = dram_bytes / time_s
        dram_bound = dram_rate > (machine.dram.theoretical_bytes_per_s or math.inf)
    codes, around = reason_text.beyond_caches_around(working_set_bytes, dram_bound, cold,
                                                     caches, machine.dram.name)
    clause = (coded("before", codes, [before for before, _ in around])
              + fmt.nbytes_column(working_set_bytes)
              + coded("after", codes, [after for _, after in around]))
    at = np.flatnonzero(dram_bound)
    if not len(at):
        return clause
    left = (fmt.nbytes_column(dram_bytes[at]) + " in the time, "
            + fmt.fixed_column(dram_rate[at] / 1e9, ".1f", "GB/s"))
    return clause.scatter(at, clause.gather(at) + left)


def _cache_resident_texts(analysis: Verdicts, at: np.ndarray, working_set_bytes: np.ndarray,
                          dram_bytes: np.ndarray, cold: np.ndarray) -> pl.Series:
    """The cache_resident sentence of each row `at`: one text per card, cache and form
    (`reason_text.CacheResidentForm`), its numbers filled in as columns."""
    judged, machines = analysis.judged, list(analysis.machines.values())
    assert judged.cache_level is not None
    rate = judged.achieved_bytes_per_s[at]
    efficiency = judged.efficiency[at]
    level = judged.cache_level[at].astype(np.int64)
    card = np.asarray(analysis.machine_index_or_first, dtype=np.int64)[at]
    theoretical = np.array([m.dram.theoretical_bytes_per_s or math.nan for m in machines])[card]
    in_part = np.isfinite(dram_bytes)
    share = in_part & (np.nan_to_num(dram_bytes) > 0)
    reading = np.isfinite(efficiency)
    above = rate > theoretical
    form = ((((level * 2 + above) * 2 + in_part) * 2 + share) * 2 + reading) * 2 + cold
    code = card * (1 << 20) + form
    with np.errstate(invalid="ignore", divide="ignore"):
        dram_rate = np.where(share, dram_bytes, 0.0) / analysis.columns.time_s[at]
    values = pl.DataFrame({
        "rate": fmt.fixed_column(rate / 1e9, ".1f", "GB/s"),
        "working_set": fmt.nbytes_column(working_set_bytes),
        "dram_bytes": fmt.nbytes_column(np.where(share, dram_bytes, 0.0)),
        "dram_rate": fmt.fixed_column(dram_rate / 1e9, ".1f", "GB/s"),
        "efficiency": fmt.percent_column(np.where(reading, efficiency, 0.0))})
    templates: dict[int, str] = {}
    distinct, first = np.unique(code, return_index=True)
    for value, i in zip(distinct.tolist(), first.tolist(), strict=True):
        m = machines[int(card[i])]
        templates[value] = reason_text.cache_resident_sentence(
            reason_text.CacheResidentForm(bool(above[i]), bool(in_part[i]), bool(share[i]),
                                          bool(reading[i]), bool(cold[i])),
            m.dram.name, m.dram.theoretical_bytes_per_s or math.nan,
            m.dram.effective_bytes_per_s() or math.nan, _cache_facts(m)[int(level[i])],
            **{name: f"\0{name}\0" for name in values.columns})
    return filled(code, templates, values)


def filled(code: np.ndarray, texts: dict[int, str], values: pl.DataFrame) -> pl.Series:
    """Each row's template (`texts[code]`, a sentence with `\0name\0` where column `name` of
    `values` goes) with the row's own values put in. Many rows are filled by the engine, one
    query per template; a few by Python (a query costs more than joining a few hundred)."""
    templates = {c: text.split("\0") for c, text in texts.items()}  # text, name, ..., text
    if len(code) < fmt.ENGINE_FROM_VALUES:
        columns = {name: values[name].to_list() for name in values.columns}
        return pl.Series([
            "".join(columns[part][i] if k % 2 else part
                    for k, part in enumerate(templates[c]))
            for i, c in enumerate(code.tolist())], dtype=pl.String)
    out = null_texts(len(code))
    for value, parts in templates.items():
        rows = np.flatnonzero(code == value)
        out = out.scatter(rows, values[rows].select(pl.concat_str(
            [pl.col(part) if k % 2 else pl.lit(part) for k, part in enumerate(parts)]
        )).to_series())
    return out


def _cache_facts(machine: Machine) -> list[reason_text.CacheFacts]:
    """A machine's cache levels (smallest first, as `judge` indexes them), for sentences."""
    return [reason_text.CacheFacts(c.name, c.capacity_bytes or 0.0, c.theoretical_bytes_per_s,
                                   c.effective_bytes_per_s(),
                                   c.theoretical_bytes_per_s is None and bool(
                                       c.measured_bytes_per_s))
            for c in machine.caches]


def pipes_by_row(priced: Priced, rows: np.ndarray) -> pl.DataFrame:
    """Per row of `rows` (rows with a second pipe near the binding one): `named`, its pipes
    as `reason_text.pipes_text` lists them (time, and share of the binding one's), and
    `label`, as `reason_text.bound_label` joins them (its binding unit where only that one
    is near). Each pipe is written by the engine."""
    near = near_pipes(priced, rows)
    start = _run_start(near.row)
    first = start == np.arange(len(start))  # a row's first pipe binds
    with np.errstate(all="ignore"):
        share = near.time_s / near.time_s[start]
    code = near.unit * 2 + first
    entries = filled(code, {c: reason_text.pipe_named(
        near.units[c // 2], "\0time\0", None if c % 2 else "\0share\0")
        for c in np.unique(code).tolist()}, pl.DataFrame({
            "time": fmt.seconds_column(near.time_s), "share": fmt.percent_column(share, 0)}))
    count = np.bincount(np.searchsorted(rows, near.row), minlength=len(rows))
    label = joined_by_row(rows, near.row, coded("unit", near.unit, near.units), " + ")
    binding = strings("binding", np.asarray(priced.binding_unit, dtype=object)[rows])
    return pl.DataFrame({"named": joined_by_row(rows, near.row, entries, ", "),
                         "label": pl.select(pl.when(pl.lit(count > 1)).then(pl.lit(label))
                                            .otherwise(pl.lit(binding))).to_series()})


def joined_by_row(rows: np.ndarray, entry_rows: np.ndarray, texts: pl.Series,
                  separator: str) -> pl.Series:
    """Per row of `rows`, the texts of its entries (`entry_rows`: each entry's row, a row's
    entries adjacent, in order) joined by `separator`; null where a row has none. The entries
    are put side by side by their place in their row (a row has a handful at most)."""
    if not len(entry_rows):
        return null_texts(len(rows))
    place = np.arange(len(entry_rows)) - _run_start(entry_rows)
    at = np.searchsorted(rows, entry_rows)
    columns = [scattered(len(rows), at[place == k], texts.filter(pl.Series(place == k)))
               .alias(f"t{k}") for k in range(int(place.max()) + 1)]
    some = np.bincount(at, minlength=len(rows)) > 0
    return pl.DataFrame(columns).select(pl.when(pl.lit(some)).then(pl.concat_str(
        pl.all(), separator=separator, ignore_nulls=True))).to_series().alias("joined")


def _run_start(entry_rows: np.ndarray) -> np.ndarray:
    """Per entry (a row's entries adjacent), the index of its row's first entry."""
    index = np.arange(len(entry_rows))
    first = np.r_[True, entry_rows[1:] != entry_rows[:-1]] if len(entry_rows) else index > 0
    return np.maximum.accumulate(np.where(first, index, 0))


def pipes_sentences(analysis: Verdicts, rows: np.ndarray,
                    named: pl.Series | None = None) -> pl.Series:
    """`reason_text.pipes_text` of each of `rows` (rows with a second pipe near the binding
    one): every such pipe, the serial sum beside the overlapped bound, the band. `named`:
    the rows' pipes as `pipes_by_row` writes them, where the caller has them."""
    priced, judged = analysis.priced, analysis.judged
    assert priced.serial_sol_time_s is not None and judged.serial_efficiency is not None
    if named is None:
        named = pipes_by_row(priced, rows)["named"]
    serial_efficiency = judged.serial_efficiency[rows]
    overlapped = (serial_efficiency > 1.0).astype(np.int64)
    values = pl.DataFrame({
        "named": named.fill_null(""), "sol": fmt.seconds_column(priced.sol_time_s[rows]),
        "serial": fmt.seconds_column(priced.serial_sol_time_s[rows]),
        "efficiency": fmt.percent_column(judged.efficiency[rows]),
        "serial_efficiency": fmt.percent_column(serial_efficiency)})
    return filled(overlapped, {flag: reason_text.pipes_sentence(
        "\0named\0", "\0sol\0", "\0serial\0", "\0efficiency\0", "\0serial_efficiency\0",
        bool(flag)) for flag in np.unique(overlapped).tolist()}, values)


def _finite(values: np.ndarray | None, n: int) -> np.ndarray:
    return np.zeros(n, dtype=bool) if values is None else np.isfinite(values)


def scattered(n: int, at: np.ndarray, values: list[str] | pl.Series) -> pl.Series:
    """A text column of `n` rows: `values` at the rows `at`, null elsewhere."""
    column = null_texts(n)
    if not len(at):
        return column
    return column.scatter(at, values if isinstance(values, pl.Series) else pl.Series(
        values, dtype=pl.String))


class FloorTexts:
    """The floor sentences of the rows in `mask`, filled by the engine: each row's floor
    (`facts.floor_facts`) is one of a few per (machine, timing, kernels, overlapped launches),
    described once each, and each sentence is `reason_text`'s, written once per floor with
    its per-row numbers left as slots (`filled`)."""

    def __init__(self, analysis: Verdicts, mask: np.ndarray) -> None:
        self._analysis = analysis
        cols, flags = analysis.columns, analysis.judged.flags
        self._rows = np.flatnonzero(mask)
        rows = self._rows
        if not len(rows):
            self._group, self._facts, self._described = np.zeros(0, np.int64), [], []
            self._floor_s = np.zeros(0)
            return
        # a row's floor is set by its machine, timing, kernel count and overlapped launches:
        # one integer key of the four (each a small code)
        timing, timings = categorize(cols.timing[rows])
        kernel_values, kernels = np.unique(cols.kernel_counts()[rows].astype(np.int64),
                                           return_inverse=True)
        overlapped = (flags[rows] & int(Reason.FLOOR_OVERLAPPED)) != 0
        key = (((analysis.machine_index[rows].astype(np.int64) + 1) * max(len(timings), 1)
                + timing) * max(len(kernel_values), 1) + kernels.reshape(-1)) * 2 + overlapped
        _, first, group = np.unique(key, return_index=True, return_inverse=True)
        self._group = group.reshape(-1)
        self._facts = [floor_facts(analysis, int(i), analysis.machines[str(
            analysis.machine_name[i])]) for i in rows[first].tolist()]
        self._described = [f.describe() for f in self._facts]
        self._floor_s = np.array([f.floor_s for f in self._facts], dtype=np.float64)

    def _groups(self, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each row's floor (an index into the floors) and its floor in seconds."""
        group = self._group[np.searchsorted(self._rows, at)]
        return group, self._floor_s[group]

    def latency_bound(self, at: np.ndarray, advised: bool = True) -> pl.Series:
        """The latency_bound sentence of each row `at`, with what to do (`advised`)."""
        group, floor_s = self._groups(at)
        time_s = self._analysis.columns.time_s[at]
        with np.errstate(all="ignore"):
            spans = np.where(floor_s > 0, time_s / np.where(floor_s > 0, floor_s, 1.0),
                             np.inf)
        values = pl.DataFrame({"time": fmt.seconds_column(time_s),
                               "spans": fmt.decimals_column(spans, 2),
                               "sol": fmt.seconds_column(self._analysis.priced.sol_time_s[at])})
        templates = {}
        for g in np.unique(group).tolist():
            timing = self._facts[g].timing
            what = reason_text.latency_bound_sentence("\0time\0", "\0spans\0",
                                                      self._described[g], "\0sol\0", timing)
            templates[g] = reason_text.advised(what, timing) if advised else what
        return filled(group, templates, values)

    def advice(self, at: np.ndarray) -> pl.Series:
        """What to do about each latency-bound row `at` (its floor's timing method's)."""
        group, _ = self._groups(at)
        return coded("advice", group, [reason_text.retime_advice(f.timing)
                                       for f in self._facts])

    def floor_split(self, at: np.ndarray) -> pl.Series:
        group, floor_s = self._groups(at)
        time_s = self._analysis.columns.time_s[at]
        net = self._analysis.judged.net_efficiency
        assert net is not None
        has_net = np.isfinite(net[at])
        values = pl.DataFrame({
            "sol": fmt.seconds_column(self._analysis.priced.sol_time_s[at]),
            "time": fmt.seconds_column(time_s), "rest": fmt.seconds_column(time_s - floor_s),
            "net": fmt.percent_column(np.where(has_net, net[at], 0.0))})
        code = group * 2 + has_net
        templates = {}
        for c in np.unique(code).tolist():
            facts = self._facts[c // 2]
            templates[c] = reason_text.floor_split_sentence(
                "\0sol\0", self._described[c // 2], "\0time\0", "\0rest\0",
                "\0net\0" if c % 2 else "", facts.timing, facts.kernels)
        return filled(code, templates, values)

    def net_beside(self, at: np.ndarray) -> pl.Series:
        group, floor_s = self._groups(at)
        net = self._analysis.judged.net_efficiency
        assert net is not None
        with np.errstate(all="ignore"):
            share = floor_s / self._analysis.columns.time_s[at]
        values = pl.DataFrame({"net": fmt.percent_column(net[at]),
                               "share": fmt.percent_column(share)})
        return filled(group, {g: reason_text.net_beside_sentence(
            "\0net\0", self._described[g], "\0share\0")
            for g in np.unique(group).tolist()}, values)


def anomaly_texts(analysis: Verdicts, at: np.ndarray) -> pl.Series:
    """The anomaly sentence of the rows `at` (null elsewhere): `reason_text`'s template, each
    machine's rows at once."""
    column = null_texts(len(analysis))
    for name, machine in analysis.machines.items():
        mine = np.flatnonzero(analysis.on_machine(name)[at])
        if len(mine):
            column = column.scatter(at[mine], above_envelope_whats(analysis, machine, at[mine])
                                    + f": {reason_text.RECOUNT_ADVICE}")
    return column


def above_envelope_whats(a: Verdicts, machine: Machine, rows: np.ndarray) -> pl.Series:
    """`reason_text.above_envelope_what` of each row `rows` of `machine` (`facts.ceiling_facts`
    for its ceiling), the ceiling looked up once per bound and unit, the numbers per column:
    what the anomaly reason and lint M8 say."""
    cols, priced = a.columns, a.priced
    memory = np.asarray(priced.bound_memory[rows], dtype=bool)
    unit_codes, units = categorize(np.asarray(priced.binding_unit[rows]))
    keys, key = np.unique(unit_codes.astype(np.int64) * 2 + memory, return_inverse=True)
    ceilings = [machine.ceiling(bool(k % 2), units[k // 2]) for k in keys.tolist()]
    theoretical = np.array([np.nan if c.theoretical_per_s is None else c.theoretical_per_s
                            for c in ceilings], dtype=np.float64)[key]
    time_s = cols.time_s[rows]
    done = np.where(memory, cols.bytes[rows], priced.binding_ops[rows])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        implied = done / time_s / theoretical
    known = ~np.isnan(theoretical) & (time_s > 0) & np.isfinite(implied)
    efficiency = a.judged.envelope_efficiency[rows]
    shown = fmt.percent_column(efficiency)
    if not np.isfinite(efficiency).all():
        shown = shown.scatter(np.flatnonzero(~np.isfinite(efficiency)), reason_text.UNBOUNDED)
    around = [reason_text.implied_around(c.name, c.fraction) for c in ceilings]
    implied_texts = strings("implied", [""] * len(rows))
    at = np.flatnonzero(known)
    if len(at):
        picked = key[at]
        implied_texts = implied_texts.scatter(at, (
            strings("head", [h for h, _ in around]).gather(picked)
            + fmt.decimals_column(implied[at], 4)
            + strings("tail", [t for _, t in around]).gather(picked)))
    head, middle, tail = reason_text.above_envelope_sentence("\0", "\0").split("\0")
    return (head + shown + middle + implied_texts + tail).alias("anomaly")


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
    column = null_texts(n)
    return column.scatter(at, texts) if len(at) else column


def _repr_text(column: pl.Expr) -> pl.Expr:
    """Python's repr of a plain string (quotes chosen as repr chooses them)."""
    return (pl.when(column.str.contains("'") & ~column.str.contains('"'))
            .then(pl.lit('"') + column + pl.lit('"'))
            .otherwise(pl.lit("'") + column.str.replace_all("\\", "\\\\", literal=True)
                       .str.replace_all("'", "\\'", literal=True) + pl.lit("'")))
