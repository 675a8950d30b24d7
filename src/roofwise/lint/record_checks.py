"""The misuse checks over an analysis of benchmark records (M1-M8, R1), as columns.

Each check returns its findings as columns (`Found`: the rows, and a severity, sentence and
fix per row): numpy masks pick the rows, and each sentence is one template filled over
numbers formatted a column at a time (`fmt`'s `_each` formatters), so that a million rows and
their thousands of findings cost no Python object per row. Checks whose rows are rare and whose
sentences need a row's whole unit split or a reference ledger (M2, M3, M4, M6, a second pipe
in M5, R1) still write those rows one by one, and cost nothing where no row qualifies.

`lint_columns` gives every finding as a polars frame (what `analyze --json` writes);
`lint_findings`, `lint_rows` and `lint_analysis` give `Finding` objects built from the same
columns. A reference ledger, matched to records by op name, lets M2, M3, M4 and M6 judge
records that carry only totals; M4 and M3 use the same rules as the ledger checks
(judgments.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import polars as pl

from roofwise.base import fmt
from roofwise.base.text_columns import coded, null_texts, strings
from roofwise.explain.reason_columns import (
    FloorTexts,
    above_envelope_whats,
    joined_by_row,
    pipes_sentences,
)
from roofwise.ledgers.ledger import Ledger
from roofwise.lint.findings import (
    ERROR,
    UNIT_NOT_ON_MACHINE_FIX,
    WARNING,
    Finding,
    intensity_text,
    is_matrix_unit,
    is_sfu_unit,
    nbytes_text,
    nbytes_text_column,
    ops_text,
)
from roofwise.lint.judgments import (
    RoofCall,
    busiest_vector_unit,
    decompositions,
    expected_roof,
    misreadings,
)
from roofwise.lint.machine_checks import (
    DATASHEET_MARGIN,
    SPARSE_FIX,
    sparse_reason,
    uncalibrated_memory_fix,
    uncalibrated_unit_fix,
    units_missing_reason,
)
from roofwise.lint.stale_checks import (
    ANALYSIS_CHECKS,
    StaleGroups,
    merged_stale_groups,
    stale_findings,
    stale_groups,
    stale_profile_groups,
    stale_rows,
)
from roofwise.output.analysis import Analysis
from roofwise.pricing.core import Priced, equal_to, near_pipes
from roofwise.pricing.reasons import Reason
from roofwise.profiles.machine import Machine
from roofwise.verdicts.rules import ANOMALY, BLANK, CACHE_RESIDENT, IMPOSSIBLE, LATENCY_BOUND


@dataclass(frozen=True)
class Found:
    """One check's findings as columns, in the check's own order: the analysis row each one
    names, and its severity, sentence and fix: each a text column (what a check over a
    million rows writes, by the engine) or a list of the texts written one at a time (kept
    as written: a lone surrogate stays one until a column escapes it). `where` is set for a
    machine-level finding (R2, `h200 hbm read mix`), carried by every row it reads; a row's
    own findings are where the row is (`RowWhere`)."""

    rows: np.ndarray  # int64 indices into the analysis
    severity: Texts
    reason: Texts
    fix: Texts
    where: str | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def items(self) -> Iterator[tuple[int, str, str, str]]:
        """(row, severity, reason, fix) of each finding, for the few read one at a time."""
        return zip(self.rows.tolist(), *(_listed(t) for t in (self.severity, self.reason,
                                                                 self.fix)), strict=True)


Texts = list[str] | pl.Series  # one text per finding


def _listed(texts: Texts) -> list[str]:
    return texts.to_list() if isinstance(texts, pl.Series) else texts


def _column(name: str, parts: Sequence[Texts]) -> pl.Series:
    """Texts of several checks as one column."""
    columns = [t if isinstance(t, pl.Series) else strings(name, t) for t in parts]
    return pl.concat([c.alias(name) for c in columns]) if columns else strings(name, [])


def _joined_texts(name: str, parts: Sequence[Texts]) -> Texts:
    """Texts of several parts, one after another: a list where every part is one."""
    if all(isinstance(t, list) for t in parts):
        return [text for t in parts for text in _listed(t)]
    return _column(name, parts)


def found(rows: np.ndarray | Sequence[int], severity: str | Texts, reason: str | Texts,
          fix: str | Texts) -> Found:
    """Findings of `rows`, one sentence each; a severity, reason or fix given as one text is
    every row's."""
    n = len(rows)

    def each(text: str | Texts) -> Texts:
        if not isinstance(text, str):
            return text
        return strings("", [text]).new_from_index(0, n) if n else []

    return Found(np.asarray(rows, dtype=np.int64), each(severity), each(reason),
                 each(fix))


def nothing() -> Found:
    """No findings: what a check returns when no row qualifies."""
    return found([], ERROR, [], "")


def listed(items: Iterable[tuple[int, str, str, str] | None]) -> Found:
    """Findings written one row at a time, as (row, severity, reason, fix); None is none."""
    kept = [item for item in items if item is not None]
    return found([i for i, _, _, _ in kept], [s for _, s, _, _ in kept],
                 [r for _, _, r, _ in kept], [f for _, _, _, f in kept])


def joined(parts: Iterable[Found]) -> Found:
    """One check's findings from its parts, one part after another (rows not re-sorted)."""
    kept = [part for part in parts if len(part)]
    if len(kept) == 1:
        return kept[0]
    if not kept:
        return nothing()
    return found(np.concatenate([p.rows for p in kept]),
                 *(_joined_texts(k, [getattr(p, k) for p in kept]) for k in (
                     "severity", "reason", "fix")))


@dataclass(frozen=True)
class RowCase:
    """What the row checks read: the analysis and reference ledgers by op name, with the row
    sets several checks share, each worked out once, on first use."""

    analysis: Analysis
    references: Mapping[str, Ledger]

    @cached_property
    def machine_rows(self) -> list[tuple[Machine, np.ndarray]]:
        """(machine, mask of the rows it judges) for each machine with rows."""
        a = self.analysis
        out = []
        for name, machine in a.machines.items():
            mine = a.on_machine(name)
            if mine.any():
                out.append((machine, mine))
        return out

    @cached_property
    def priced_rows(self) -> list[tuple[Machine, np.ndarray]]:
        """(machine, mask of its rows that have a price: every verdict but blank)."""
        priced = self.analysis.judged.verdict != BLANK
        out = []
        for machine, mine in self.machine_rows:
            rows = mine & priced
            if rows.any():
                out.append((machine, rows))
        return out

    @cached_property
    def roofs(self) -> tuple[np.ndarray, tuple[str, ...]]:
        """Each row's roof as a code into the distinct roof names: no string per row."""
        return self.analysis.columns.roof_categories()

    def roof(self, i: int) -> str:
        codes, names = self.roofs
        return names[codes[i]]

    @cached_property
    def on_matrix_roof(self) -> np.ndarray:
        """Rows whose roof is a matrix unit (tensor cores)."""
        codes, names = self.roofs
        return np.array([is_matrix_unit(k) for k in names], dtype=bool)[codes]

    @cached_property
    def matrix_ops(self) -> np.ndarray:
        """Operations the unit split of each row counts on matrix units."""
        cols = self.analysis.columns
        total = np.zeros(len(cols))
        for key, ops in cols.flops_by_unit.items():
            if is_matrix_unit(key):
                total = total + ops
        return total

    @cached_property
    def matched(self) -> list[tuple[Ledger, np.ndarray]]:
        """(reference, row indices whose op names it) for each reference ledger."""
        if not self.references:
            return []
        ops = np.array([str(o).lower() for o in self.analysis.columns.op], dtype=object)
        out = []
        for name, ledger in self.references.items():
            rows = np.flatnonzero(ops == name)
            if len(rows):
                out.append((ledger, rows))
        return out


# ---------------------------------------------------------------------------- M1


def check_rows_m1(case: RowCase) -> Found:
    """A SOL that rests on a datasheet ceiling: an uncalibrated unit, or memory without a
    measured mix, taking at least DATASHEET_MARGIN of it (a warning); any work on a unit
    whose theoretical rate is a sparse peak (an error). One part per unit (and one for
    memory) over every machine's rows, each sentence's machine-given head gathered by the
    row's machine: a file of many cards costs what a file of one does."""
    a = case.analysis
    priced = a.priced
    sol = priced.sol_time_s
    machines = list(a.machines.values())
    row_machine = a.machine_index_or_first
    judged = a.judged.verdict != BLANK
    parts: list[Found] = []
    for key in priced.unit_ops:
        working = judged & (priced.unit_ops[key] > 0)
        units = [m.unit(key) for m in machines]
        sparse = [None if u is None else sparse_reason(u) for u in units]
        if any(sparse):
            rows = np.flatnonzero(working & _by_machine(row_machine, [bool(t) for t in sparse]))
            parts.append(found(rows, ERROR, coded("reason", row_machine[rows],
                                                  [t or "" for t in sparse]), SPARSE_FIX))
        times = priced.unit_time_s.get(key)
        heads = ["" if u is None or t or u.calibrated or u.theoretical_ops_per_s is None
                 else (f"{key} on {m.name} is the datasheet rate "
                       f"{fmt.tera_rate(u.theoretical_ops_per_s, u.key)} (uncalibrated); its "
                       "time ") for m, u, t in zip(machines, units, sparse, strict=True)]
        if times is not None and any(heads):
            rows = np.flatnonzero(working & _by_machine(row_machine, [bool(h) for h in heads])
                                  & (times >= DATASHEET_MARGIN * sol))
            parts.append(found(rows, WARNING, coded("reason", row_machine[rows], heads)
                               + _share_of_sol(times, sol, rows), uncalibrated_unit_fix(key)))
    heads = ["" if m.dram.theoretical_bytes_per_s is None or m.dram.calibration_by_mix
             else (f"{m.name} {m.dram.name} {m.dram.theoretical_bytes_per_s / 1e9:.0f} GB/s "
                   "is the datasheet figure (no measured mix); memory time ") for m in machines]
    if any(heads):
        memory = priced.memory_time_s
        rows = np.flatnonzero(judged & _by_machine(row_machine, [bool(h) for h in heads])
                              & (memory >= DATASHEET_MARGIN * sol))
        fixes = [uncalibrated_memory_fix(m.dram.name) for m in machines]
        parts.append(found(rows, WARNING, coded("reason", row_machine[rows], heads)
                           + _share_of_sol(memory, sol, rows),
                           coded("fix", row_machine[rows], fixes)))
    return joined(parts)


def _by_machine(machine_index: np.ndarray, of_machine: list[bool]) -> np.ndarray:
    """Per row, its machine's flag."""
    return np.array(of_machine, dtype=bool)[machine_index]


def _share_of_sol(time_s: np.ndarray, sol_s: np.ndarray, rows: np.ndarray) -> pl.Series:
    """`2.000 us is 95% of SOL` of each row `rows`: a part's time and its share of the SOL."""
    with np.errstate(divide="ignore", invalid="ignore"):
        share = time_s[rows] / sol_s[rows] * 100  # as format's `%` takes it: x100, then `f`
    return (fmt.seconds_column(time_s[rows]) + " is "
            + fmt.decimals_column(share, 0, ("%",)) + " of SOL")


# ---------------------------------------------------------------------------- M2


def check_rows_m2(case: RowCase) -> Found:
    """A matrix-unit roof on an op with no matrix work: none in the row's own unit split, or
    (a row with totals only) no contraction in its reference ledger. Rare: row by row."""
    cols = case.analysis.columns
    on_matrix = case.on_matrix_roof
    out: list[tuple[int, str, str, str]] = []
    split = on_matrix & cols.has_unit_split
    if split.any():
        for i in np.flatnonzero(split & (case.matrix_ops <= 0)).tolist():
            units = {k: float(v[i]) for k, v in cols.flops_by_unit.items() if v[i] > 0}
            listed_units = ", ".join(f"{k} {ops_text(v)}" for k, v in units.items())
            right = max(units, key=lambda k: units[k]) if units else "cuda_core.fp32"
            out.append((i, ERROR,
                        f"roof {case.roof(i)} but flops_by_unit has no matrix-unit work "
                        f"({listed_units})",
                        f"declare the roof the unit that does the work: {right}"))
    for ledger, rows in case.matched:
        if any(w.op_class == "contraction" and w.ops > 0 for w in ledger.work):
            continue
        right = busiest_vector_unit(ledger)
        for i in rows[on_matrix[rows] & ~cols.has_unit_split[rows]].tolist():
            out.append((i, ERROR,
                        f"roof {case.roof(i)} but reference ledger {ledger.name} has no "
                        f"contraction in its {ops_text(ledger.flops)} ops",
                        f"declare the roof the unit that does the work: {right}"))
    return listed(out)


# ---------------------------------------------------------------------------- M3


def _counted_matrix_units(case: RowCase, i: int) -> list[str]:
    cols = case.analysis.columns
    if not cols.has_unit_split[i]:
        return []
    return [k for k, v in cols.flops_by_unit.items() if is_matrix_unit(k) and v[i] > 0]


def _m3(reason: str, call: RoofCall) -> tuple[str, str]:
    return (f"{reason} ({ops_text(call.ops)} ops) runs on {call.runs_on}",
            f"declare the roof (and count the {call.what}) on the unit the algorithm uses: "
            f"{call.runs_on}")


def check_rows_m3(case: RowCase) -> Found:
    """A roof its own matrix work does not run on, or one the reference's algorithm does not.
    Rare: row by row."""
    cols = case.analysis.columns
    codes, names = case.roofs
    said: dict[int, tuple[str, str]] = {}
    if cols.has_unit_split.any():
        for i in np.flatnonzero(cols.has_unit_split & (case.matrix_ops > 0)).tolist():
            key = names[codes[i]]
            if not is_matrix_unit(key):
                continue
            on_roof = cols.flops_by_unit.get(key)
            if on_roof is not None and on_roof[i] > 0:
                continue
            runs = {k: float(v[i]) for k, v in cols.flops_by_unit.items()
                    if is_matrix_unit(k) and v[i] > 0}
            runs_on = max(runs, key=lambda k: runs[k])
            said[i] = _m3(f"roof {key} but its matrix work",
                          RoofCall(runs_on, runs[runs_on], "contraction"))
    for ledger, rows in case.matched:
        totals_only = rows[~cols.has_unit_split[rows]]
        for code in np.unique(codes[totals_only]).tolist():
            key = names[code]
            call = expected_roof(key, [], ledger)
            if call is not None:
                for i in totals_only[codes[totals_only] == code].tolist():
                    said.setdefault(i, _m3(
                        f"roof {key} but reference {ledger.name}'s {call.what}", call))
        for i in rows[cols.has_unit_split[rows]].tolist():
            counted = _counted_matrix_units(case, i)
            call = expected_roof(case.roof(i), counted, ledger)
            if call is not None and i not in said:
                on = f" (matrix work counted on {', '.join(counted)})" if counted else ""
                said[i] = _m3(f"roof {case.roof(i)}{on} but reference "
                              f"{ledger.name}'s {call.what}", call)
    return listed((i, ERROR, *said[i]) for i in sorted(said))


# ---------------------------------------------------------------------------- M4


def _same(values: np.ndarray, target: float) -> np.ndarray:
    return np.isclose(values, target, rtol=1e-12, atol=0.5)


def check_rows_m4(case: RowCase) -> Found:
    """Records of a composed op whose bytes AND FLOPs are a stage's, a partial fusion's, or a
    split's (the split with the whole op's FLOPs): the rule of the ledger check. Only rows
    with a reference ledger: row by row."""
    cols = case.analysis.columns
    said: dict[int, tuple[str, str]] = {}  # the first reading that fits a row
    for ledger, rows in case.matched:
        fused, readings = decompositions(ledger)
        if fused is None:
            continue
        for r in misreadings(fused, readings, ledger.bytes):
            hit = _same(cols.bytes[rows], r.bytes) & _same(cols.flops[rows], r.flops)
            for i in rows[hit].tolist():
                said.setdefault(i, (
                    f"bytes {nbytes_text(cols.bytes[i])} and FLOPs {ops_text(cols.flops[i])} "
                    f"are {r.label} for {ledger.name}; the one call moves "
                    f"{nbytes_text(ledger.bytes)} (AI {ledger.intensity_flops_per_byte:.2f}, "
                    f"not {intensity_text(cols.flops[i], cols.bytes[i])})",
                    f"price one call of {ledger.name} at {ledger.bytes:,} B; a timed split "
                    "or stage is another op: name it so"))
    return listed((i, ERROR, *said[i]) for i in sorted(said))


# ---------------------------------------------------------------------------- M5


def check_rows_m5(case: RowCase) -> Found:
    """The special-function pipe binds, or takes >= half the binding pipe's time: name every
    such pipe, the serial sum beside the overlapped bound. A row the SFU binds alone is
    written per column; a row with a second pipe near the binding one (only rows that split
    their work) row by row."""
    priced = case.analysis.priced
    # the binding pipe is one of the priced units (pricing labels it from them)
    sfu_keys = [k for k in priced.unit_ops if is_sfu_unit(k)]
    if not sfu_keys:
        return nothing()
    second = (priced.flags & np.int32(Reason.SECOND_PIPE)) != 0
    binds_alone = {key: ~second & equal_to(priced.binding_unit, key) for key in sfu_keys}
    parts: list[Found] = []
    for _, mine in case.priced_rows:
        for key, alone in binds_alone.items():
            rows = np.flatnonzero(mine & alone)
            if len(rows):
                parts.append(_sfu_binds(priced, key, rows))
        parts.append(_pipes_near(case, np.flatnonzero(mine & second), sfu_keys))
    return joined(parts)


def _sfu_binds(priced: Priced, key: str, rows: np.ndarray) -> Found:
    """M5 where the special-function pipe `key` binds alone: its transcendentals and their
    time, against the slowest other pipe the row uses."""
    others = [k for k in priced.unit_time_s if k != key]
    versus = [""] * len(rows)
    if others and len(rows):
        times = np.stack([priced.unit_time_s[k][rows] for k in others])
        used = times > 0
        slowest = np.argmax(np.where(used, times, -np.inf), axis=0)  # the first on a tie
        at = np.flatnonzero(used.any(axis=0))
        for j, text in zip(at.tolist(), fmt.seconds_each(times[slowest[at], at]), strict=True):
            versus[j] = _against(text, others[slowest[j]])
    return found(rows, WARNING, [
        _sfu_binds_what(key, ops, time, against)
        for ops, time, against in zip(fmt.exact_each(priced.unit_ops[key][rows]),
                                      fmt.seconds_each(priced.unit_time_s[key][rows]), versus,
                                      strict=True)],
        f"judge this op against {key}, per pipe; calibrate {key} before trusting it")


def _sfu_binds_what(key: str, ops_text: str, time_text: str, against: str) -> str:
    return f"{key} binds: {ops_text} transcendentals take {time_text}{against}"


def _against(time_text: str, key: str) -> str:
    return f" against {time_text} on {key}"


def _pipes_near(case: RowCase, rows: np.ndarray, sfu_keys: list[str]) -> Found:
    """M5 of the rows with a second pipe near the binding one: every such pipe with the band,
    where an SFU binds or is among them; the SFUs named in the fix."""
    a = case.analysis
    priced = a.priced
    if not len(rows):
        return nothing()
    near = near_pipes(priced, rows)
    sfu = np.array([is_sfu_unit(k) for k in near.units], dtype=bool)[near.unit] if len(
        near.units) else np.zeros(0, dtype=bool)
    at = np.searchsorted(rows, near.row)
    pipes = np.bincount(at, minlength=len(rows))
    binding = np.asarray(priced.binding_unit, dtype=object)[rows]
    keep = (binding != "") & (np.bincount(at, weights=sfu, minlength=len(rows)) > 0)
    for key in sfu_keys:  # an SFU binds
        keep |= equal_to(binding, key)
    banded = keep & (pipes > 1) & (priced.serial_sol_time_s is not None) & (
        a.judged.serial_efficiency is not None)
    parts = []
    if banded.any():
        # the SFUs among each row's pipes, in pipe order (its binding unit where none is)
        named = joined_by_row(rows[banded], near.row[sfu], coded(
            "unit", near.unit[sfu], near.units), ", ").fill_null(strings(
                "binding", binding[banded]))
        parts.append(found(rows[banded], WARNING, pipes_sentences(a, rows[banded]),
                           "calibrate " + named + " on the card (`roofwise calibrate`) and read "
                           "this op by its band, never by one pipe"))
    for i in rows[keep & ~banded].tolist():  # one pipe left near: the SFU binds alone
        parts.append(_sfu_binds(priced, str(priced.binding_unit[i]), np.array([i])))
    return joined(parts)


# ---------------------------------------------------------------------------- M6


def check_rows_m6(case: RowCase) -> Found:
    """Records of a reference's call (same op, same FLOPs) that move fewer bytes than it.
    Only rows with a reference ledger: row by row."""
    cols = case.analysis.columns
    out: list[tuple[int, str, str, str]] = []
    for ledger, rows in case.matched:
        low = _same(cols.flops[rows], ledger.flops) & (
            (cols.bytes[rows] < ledger.bytes - 0.5)
            | (cols.read_bytes[rows] < ledger.read_bytes - 0.5))  # NaN compares False
        for i in rows[low].tolist():
            short = ledger.bytes - cols.bytes[i]
            if short > 0.5:
                exactly = (" (exactly its lookups)"
                           if abs(short - ledger.lookup_bytes) < 0.5 else "")
                why = (f"bytes {nbytes_text(cols.bytes[i])} are {nbytes_text(short)} below "
                       f"reference {ledger.name}'s {nbytes_text(ledger.bytes)}{exactly}")
            else:
                why = (f"read_bytes {nbytes_text(cols.read_bytes[i])} are below reference "
                       f"{ledger.name}'s {nbytes_text(ledger.read_bytes)}")
            out.append((i, ERROR, why, "count every tensor the operator reads, lookups "
                                       "included (Ledger.to_record gives the fields)"))
    return listed(out)


# ---------------------------------------------------------------------------- M7


def check_rows_m7(case: RowCase) -> Found:
    """Rows whose time the floor of their timing method explains: efficiency is no reading."""
    a = case.analysis
    latency = a.judged.verdict == LATENCY_BOUND
    rows = np.flatnonzero(latency)
    if not len(rows):
        return nothing()
    floors = FloorTexts(a, latency)
    return found(rows, WARNING, floors.latency_bound(rows, advised=False), floors.advice(rows))


# ---------------------------------------------------------------------------- M8

_M8_FIX = ("recount bytes and FLOPs (lookups, scales, intermediates that reach DRAM) and check "
           "the timer; never read it as a fast kernel")
_M8_STALE_FIX = ("recount bytes and FLOPs and check the timer; if they hold, run `roofwise "
                 "calibrate` on this card and read the rows with the profile it writes")
_M8_COLD_FIX = ("recount bytes and check the timer: the cache was flushed, so only its hold on "
                "the writes explains the rate")
_M8_CACHE_FIX = ("time it with the cache flushed before each call (`roofwise bench` does, and "
                 "says `cache_state: cold`); if it still reads above theoretical, recount bytes "
                 "and check the timer")


def check_rows_m8(case: RowCase) -> Found:
    """Above a theoretical ceiling (impossible: an error), above the envelope only (a
    warning with two readings: the accounting, or a profile calibrated below this card), or
    above DRAM's theoretical rate with a working set larger than every cache (a warning:
    possible only if the cache held nearly all it can before and after the call)."""
    verdict = case.analysis.judged.verdict
    in_part = _cache_in_part(case.analysis)
    above = (verdict == IMPOSSIBLE) | (verdict == ANOMALY) | in_part
    if not above.any():
        return nothing()
    return joined(_above_ceilings(case, machine, np.flatnonzero(mine & above), in_part)
                  for machine, mine in case.machine_rows)


def _above_ceilings(case: RowCase, machine: Machine, rows: np.ndarray,
                    cache_in_part: np.ndarray) -> Found:
    """M8 on one machine's rows: each theoretical ceiling a row's rates exceed, then (an
    anomaly) both readings of the envelope; an impossible row above no theoretical ceiling
    says its envelope efficiency. Each part is a text column over `rows` (null where a row
    does not say it), the parts joined by the engine."""
    a = case.analysis
    cols, judged, priced = a.columns, a.judged, a.priced
    n = len(rows)
    time_s = cols.time_s[rows]
    parts: list[pl.Series] = []
    said = np.zeros(n, dtype=bool)

    def say(at: np.ndarray, texts: pl.Series) -> None:
        part = null_texts(n).scatter(at, texts) if len(at) else null_texts(n)
        parts.append(part.alias(f"p{len(parts)}"))
        said[at] = True

    theory = machine.dram.theoretical_bytes_per_s
    if theory is not None:
        achieved = judged.achieved_bytes_per_s[rows]
        at = np.flatnonzero(achieved > theory)
        say(at, _above_bandwidth_whats(
            nbytes_text_column(cols.bytes[rows[at]]),
            fmt.seconds_column(time_s[at]),
            fmt.fixed_column(achieved[at] / 1e9, ".1f", "GB/s"),
            machine.dram.name, theory))
    for key in priced.unit_ops:
        unit = machine.unit(key)
        if unit is None or unit.theoretical_ops_per_s is None:
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = priced.unit_ops[key][rows] / time_s
        at = np.flatnonzero((time_s > 0) & (rate > unit.theoretical_ops_per_s))
        peak = fmt.tera_rate(unit.theoretical_ops_per_s, key)
        say(at, f"{key} at " + fmt.tera_rate_column(rate[at], key)
            + f", above its theoretical {peak}")
    anomaly = judged.verdict[rows] == ANOMALY
    at = np.flatnonzero(anomaly)
    say(at, above_envelope_whats(a, machine, rows[at]))
    in_part = cache_in_part[rows]
    cold = in_part & a.columns.cold_cache()[rows]
    caches = machine.caches
    if in_part.any() and caches:
        largest = caches[-1]
        capacity = f"{fmt.nbytes(largest.capacity_bytes)} {largest.name}"
        at = np.flatnonzero(in_part & ~cold)
        say(at, "with a working set of " + fmt.nbytes_column(
            a.columns.working_set_bytes()[rows[at]]) + f" larger than the {capacity}: "
            "possible only if that cache held nearly all it can of what the call reads before "
            "it and of what it writes after")
        at = np.flatnonzero(cold)
        say(at, pl.Series([f"with its caches flushed before it ran (cache_state cold): "
                           f"possible only if the {capacity} held nearly all it can of what "
                           "the call writes after"] * len(at), dtype=pl.String))
    bare = np.flatnonzero(~anomaly & ~said)
    say(bare, "efficiency " + fmt.percent_column(
        judged.envelope_efficiency[rows[bare]]) + " of the envelope ceiling is above 105% "
        "(SOL " + fmt.seconds_column(priced.envelope_sol_time_s[rows[bare]])
        + ", measured " + fmt.seconds_column(time_s[bare]) + ")")
    reason = pl.DataFrame(parts).select(pl.concat_str(pl.all(), separator="; ",
                                                      ignore_nulls=True)).to_series()
    warned = anomaly.astype(np.int64) + 2 * in_part.astype(np.int64) + cold.astype(np.int64)
    return found(rows, strings("severity", [ERROR, WARNING, WARNING, WARNING]).gather(warned),
                 reason, strings("fix", [_M8_FIX, _M8_STALE_FIX, _M8_CACHE_FIX,
                                         _M8_COLD_FIX]).gather(warned))


def _cache_in_part(analysis: Analysis) -> np.ndarray:
    """Rows read as cache_resident with a working set larger than every cache: above DRAM's
    theoretical rate, so a cache served a part, or the accounting is wrong."""
    judged = analysis.judged
    if judged.cache_dram_bytes is None:
        return np.zeros(len(judged.verdict), dtype=bool)
    return (judged.verdict == CACHE_RESIDENT) & np.isfinite(judged.cache_dram_bytes)


def _above_bandwidth_whats(nbytes_texts: pl.Series, time_texts: pl.Series,
                           rate_texts: pl.Series, level_name: str,
                           theoretical_bytes_per_s: float) -> pl.Series:
    """`800 B in 1.000 ns is 800.0 GB/s, above hbm theoretical 4800 GB/s` of each row, from
    its texts."""
    return (nbytes_texts + " in " + time_texts + " is " + rate_texts
            + f", above {level_name} theoretical {theoretical_bytes_per_s / 1e9:.0f} GB/s")


# ---------------------------------------------------------------------------- R1


def check_rows_r1(case: RowCase) -> Found:
    """Rows whose roof or flops_by_unit names a unit their machine profile does not have."""
    cols = case.analysis.columns
    codes, names = case.roofs
    missing: dict[int, tuple[Machine, list[str]]] = {}
    for machine, mine in case.machine_rows:
        lacks = np.array([machine.unit(k) is None for k in names], dtype=bool)
        roof_lacking = mine & lacks[codes] if lacks.any() else np.zeros(len(cols), dtype=bool)
        units = {k: mine & (ops > 0) for k, ops in cols.flops_by_unit.items()
                 if machine.unit(k) is None}
        flagged = roof_lacking.copy()
        for rows in units.values():
            flagged |= rows
        for i in np.flatnonzero(flagged).tolist():
            keys = [names[codes[i]]] if roof_lacking[i] else []
            keys += [k for k, rows in units.items() if rows[i] and k not in keys]
            missing[i] = (machine, keys)
    said: dict[tuple[str, tuple[str, ...]], str] = {}  # a sentence per machine and units
    out = []
    for i in sorted(missing):
        machine, keys = missing[i]
        key = (machine.name, tuple(keys))
        if key not in said:
            said[key] = units_missing_reason(machine, keys)
        out.append((i, ERROR, said[key], UNIT_NOT_ON_MACHINE_FIX))
    return listed(out)


RowCheck = Callable[[RowCase], Found]
ROW_CHECKS: Mapping[str, RowCheck] = {
    "M1": check_rows_m1, "M2": check_rows_m2, "M3": check_rows_m3, "M4": check_rows_m4,
    "M5": check_rows_m5, "M6": check_rows_m6, "M7": check_rows_m7, "M8": check_rows_m8,
    "R1": check_rows_r1,
}


def _references(ledgers: Iterable[Ledger] | Mapping[str, Ledger] | None) -> dict[str, Ledger]:
    if ledgers is None:
        return {}
    values = ledgers.values() if isinstance(ledgers, Mapping) else ledgers
    return {ledger.name.lower(): ledger for ledger in values}


class RowWhere:
    """Where each row is (`path:line (op)`), made only for the rows a finding names."""

    def __init__(self, analysis: Analysis, path: str) -> None:
        self._cols, self._path = analysis.columns, path

    def __len__(self) -> int:
        return len(self._cols)

    def __getitem__(self, i: Any) -> str:
        op, line = self._cols.op[i], int(self._cols.line[i])
        codes = self._cols.file_codes  # rows of several files: each its own file's line
        path = self._path if codes is None else self._cols.files[int(codes[i])]
        return f"{path}:{line} ({op})" if path else f"{op} (record {line})"


def row_where(analysis: Analysis, path: str = "") -> RowWhere:
    return RowWhere(analysis, path)


def checked(analysis: Analysis,
            ledgers: Iterable[Ledger] | Mapping[str, Ledger] | None = None,
            machine_level: bool = False, shard: str = "") -> list[tuple[str, Found]]:
    """(code, findings) of every row check, in code order; with `machine_level`, then each R2
    finding, carried by every row bound by the ceiling it names (`shard`: the file of a
    folder the rows are in, which its sentence names)."""
    case = RowCase(analysis, _references(ledgers))
    out = [(code, check(case)) for code, check in ROW_CHECKS.items()]
    if machine_level:
        for finding, rows in stale_profile_groups(analysis, shard):
            machine_wide = found(rows, finding.severity, finding.reason, finding.fix)
            out.append((finding.code, dataclasses.replace(machine_wide, where=finding.where)))
    return out


def lint_columns(analysis: Analysis,
                 ledgers: Iterable[Ledger] | Mapping[str, Ledger] | None = None,
                 path: str = "", machine_level: bool = False, shard: str = ""
                 ) -> pl.DataFrame:
    """Every finding as a row of a frame (`row`: the analysis row it names, `code`,
    `severity`, `reason`, `fix`), by row and within a row in code order (R2 last): what
    `lint_findings` gives, without a `Finding` per row, for `analyze --json` of a million
    rows. The frame has no `where`, so `path` changes nothing; it is taken so that both are
    called alike. `shard`: the file of a folder the rows are in, named by R2's sentence."""
    del path  # the frame says rows by index, not by file and line
    parts = [(code, part) for code, part in checked(analysis, ledgers, machine_level, shard)
             if len(part)]
    rows = np.concatenate([p.rows for _, p in parts]) if parts else np.zeros(0, np.int64)
    return pl.DataFrame({
        "row": pl.Series(rows, dtype=pl.Int64),
        "code": strings("code", [code for code, _ in parts]).gather(
            np.repeat(np.arange(len(parts)), [len(p) for _, p in parts])),
        **{k: _column(k, [getattr(p, k) for _, p in parts])
           for k in ("severity", "reason", "fix")},
    }).sort("row", maintain_order=True)


def lint_rows(analysis: Analysis, ledgers: Iterable[Ledger] | Mapping[str, Ledger] | None = None,
              path: str = "") -> list[list[Finding]]:
    """Findings per row, in code order; `ledgers` are references matched to rows by op name."""
    per_row: list[list[Finding]] = [[] for _ in range(len(analysis))]
    for i, found_here in lint_findings(analysis, ledgers, path).items():
        per_row[i] = found_here
    return per_row


def lint_findings(analysis: Analysis,
                  ledgers: Iterable[Ledger] | Mapping[str, Ledger] | None = None,
                  path: str = "", machine_level: bool = False) -> dict[int, list[Finding]]:
    """Findings by row, for the rows that have any (most have none), in row order and within
    a row in code order: `lint_columns` as `Finding`s, `where` the row's `path:line (op)`.
    `machine_level`: also each R2 finding, in every row bound by the ceiling it names, after
    the row's own (so that `analyze --json`, one object per row, carries it)."""
    where = row_where(analysis, path)
    by_row: dict[int, list[Finding]] = {}
    for code, part in checked(analysis, ledgers, machine_level):
        if part.where is not None:  # one machine-level finding, in each row it reads
            for i, severity, reason, fix in part.items():
                by_row.setdefault(i, []).append(Finding(code, severity, part.where, reason,
                                                        fix))
            continue
        for i, severity, reason, fix in part.items():
            by_row.setdefault(i, []).append(Finding(code, severity, where[i], reason, fix))
    return dict(sorted(by_row.items()))


def lint_analysis(analysis: Analysis,
                  ledgers: Iterable[Ledger] | Mapping[str, Ledger] | None = None,
                  path: str = "") -> list[Finding]:
    """Every row check over an analysis, row by row (`where` is path:line, or op), then the
    machine-level findings the rows make together (R2): `findings_frame` as `Finding`s."""
    return [Finding(*row) for row in findings_frame(analysis, ledgers, path).iter_rows()]


FINDING_FIELDS = ("code", "severity", "where", "reason", "fix")  # a Finding's, in order


def findings_frame(analysis: Analysis,
                   ledgers: Iterable[Ledger] | Mapping[str, Ledger] | None = None,
                   path: str = "", machine_level: Sequence[Finding] | None = None
                   ) -> pl.DataFrame:
    """Every finding as a frame row (code, severity, where, reason, fix): the rows' own in
    row order (code order within a row), `where` being `path:line (op)` (`op (record n)`
    without a path), then the machine-level ones (R2; `machine_level` instead of this
    analysis' own: a file read in batches judges R2 over all of them). What `roofwise lint`
    and analyze's summary read over a million rows, with no Python object per finding."""
    frame = lint_columns(analysis, ledgers)
    rows = frame["row"].to_numpy()
    cols = analysis.columns
    line = pl.Series("line", cols.line[rows], dtype=pl.Int64).cast(pl.Utf8)
    op = strings("op", cols.op[rows])
    if cols.file_codes is not None:  # rows of several files: each its own file's line
        where = coded("file", cols.file_codes[rows], cols.files) + ":" + line + " (" + op + ")"
    elif path:
        where = path + ":" + line + " (" + op + ")"
    else:
        where = op + " (record " + line + ")"
    own = frame.select("code", "severity", where.alias("where"), "reason", "fix")
    if machine_level is None:
        machine_level = [f for check in ANALYSIS_CHECKS.values() for f in check(analysis)]
    found = finding_frame(machine_level)
    return pl.concat([own, found.cast(own.schema)]) if len(found) else own


def finding_frame(findings: Sequence[Finding]) -> pl.DataFrame:
    """A few `Finding`s (a ledger's, a profile's, R2's) as `findings_frame`'s columns."""
    return pl.DataFrame([strings(k, [getattr(f, k) for f in findings]) for k in FINDING_FIELDS])


def finding_kinds(frame: pl.DataFrame) -> pl.DataFrame:
    """Findings folded by kind, in first-seen order: a kind is a code and its fix (and, for a
    machine-level finding, where: one R2 per ceiling), kept with its first finding and the
    `count` of findings folded in. Folds fold again (counts add), so a file read in batches
    folds each batch and then the folds, holding kinds, never every finding."""
    if "count" not in frame.columns:
        frame = frame.with_columns(pl.lit(1, pl.Int64).alias("count"))
    machine_level = pl.col("code").is_in(list(ANALYSIS_CHECKS))
    return (frame.with_columns(pl.when(machine_level).then(pl.col("where")).otherwise(pl.lit(""))
                               .alias("kind"))
            .group_by("code", "fix", "kind", maintain_order=True)
            .agg(pl.col("severity", "where", "reason").first(), pl.col("count").sum())
            .select(*FINDING_FIELDS, "count"))


@dataclass(frozen=True)
class BatchFindings:
    """What the summary of a file read in batches keeps of one batch: its row findings folded
    by kind, and what R2 reads of its rows by ceiling (judged over the whole file at the
    end): a few dozen kinds and eight bytes a row above a ceiling, never a finding a row."""

    kinds: pl.DataFrame
    stale: StaleGroups
    machines: Mapping[str, Machine]

    @classmethod
    def of(cls, analysis: Analysis,
           ledgers: Iterable[Ledger] | Mapping[str, Ledger] | None = None,
           path: str = "") -> BatchFindings:
        return cls(finding_kinds(findings_frame(analysis, ledgers, path, machine_level=[])),
                   stale_groups(stale_rows(analysis)), analysis.machines)


def file_finding_kinds(batches: Sequence[BatchFindings]) -> pl.DataFrame:
    """The findings of a whole file by kind: R2 over all its rows first (a few lines that
    explain many rows), then the row findings' kinds in first-seen order."""
    machine_level = file_stale_findings([b.stale for b in batches],
                                        {n: m for b in batches for n, m in b.machines.items()})
    folds = [finding_kinds(finding_frame(machine_level)), *(b.kinds for b in batches)]
    return finding_kinds(pl.concat(folds))


def file_stale_findings(parts: Sequence[StaleGroups], machines: Mapping[str, Machine]
                        ) -> list[Finding]:
    """R2 over a whole file from its batches' (or files') `stale_groups`."""
    return [finding for finding, _ in stale_findings(merged_stale_groups(parts), machines)]
