"""The misuse checks over an analysis of benchmark records (M1-M8, R1), row by row.

A reference ledger, matched to records by op name, lets M2, M3, M4 and M6 judge records
that carry only totals; M4 and M3 use the same rules as the ledger checks (judgments.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..analysis import Analysis, ceiling_facts, floor_facts
from ..ledger import Ledger
from ..machine import Machine
from ..pricing import pipes_near_binding
from ..reason_text import above_envelope_what, latency_bound_what, pipes_text, retime_advice
from ..reasons import Reason
from ..report import fmt
from ..verdict import ANOMALY, BLANK, IMPOSSIBLE, LATENCY_BOUND
from .findings import (
    ERROR,
    MATRIX_PREFIXES,
    UNIT_NOT_ON_MACHINE_FIX,
    WARNING,
    Finding,
    intensity_text,
    is_matrix_unit,
    is_sfu_unit,
    nbytes_text,
    ops_text,
)
from .judgments import (
    RoofCall,
    busiest_vector_unit,
    decompositions,
    expected_roof,
    misreadings,
)
from .machine_checks import (
    DATASHEET_MARGIN,
    SPARSE_FIX,
    sparse_reason,
    uncalibrated_memory_fix,
    uncalibrated_unit_fix,
    units_missing_reason,
)
from .stale_checks import ANALYSIS_CHECKS, stale_profile_groups


@dataclass(frozen=True)
class RowCase:
    """What the row checks read: the analysis, reference ledgers by op name, where each row is."""

    analysis: Analysis
    references: Mapping[str, Ledger]
    where: RowWhere

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


RowFindings = list[tuple[int, Finding]]


def _priced_rows(case: RowCase) -> list[tuple[Machine, np.ndarray]]:
    a = case.analysis
    out = []
    for name, machine in a.machines.items():
        rows = np.flatnonzero((a.machine_name == name) & (a.judged.verdict != BLANK))
        if len(rows):
            out.append((machine, rows))
    return out


def check_rows_m1(case: RowCase) -> RowFindings:
    a = case.analysis
    priced = a.priced
    out: RowFindings = []
    for machine, rows in _priced_rows(case):
        sol = priced.sol_time_s
        for key, ops in priced.unit_ops.items():
            unit = machine.unit(key)
            if unit is None:
                continue
            used = rows[ops[rows] > 0]
            sparse = sparse_reason(unit)
            if sparse is not None:
                out += [(int(i), Finding("M1", ERROR, case.where[i], sparse, SPARSE_FIX))
                        for i in used]
                continue
            times = priced.unit_time_s.get(key)
            if unit.calibrated or unit.theoretical_ops_per_s is None or times is None:
                continue
            for i in used[times[used] >= DATASHEET_MARGIN * sol[used]]:
                out.append((int(i), Finding(
                    "M1", WARNING, case.where[i],
                    f"{key} on {machine.name} is the datasheet rate "
                    f"{fmt.tera_rate(unit.theoretical_ops_per_s, unit.key)} (uncalibrated); "
                    "its time "
                    f"{fmt.seconds(times[i])} is {times[i] / sol[i]:.0%} of SOL",
                    uncalibrated_unit_fix(key))))
        level = machine.dram
        if level.theoretical_bytes_per_s is not None and not level.calibration_by_mix:
            memory = priced.memory_time_s
            for i in rows[memory[rows] >= DATASHEET_MARGIN * sol[rows]]:
                out.append((int(i), Finding(
                    "M1", WARNING, case.where[i],
                    f"{machine.name} {level.name} {level.theoretical_bytes_per_s / 1e9:.0f} GB/s "
                    f"is the datasheet figure (no measured mix); memory time "
                    f"{fmt.seconds(memory[i])} is {memory[i] / sol[i]:.0%} of SOL",
                    uncalibrated_memory_fix(level.name))))
    return out


def _matrixops_text(case: RowCase) -> np.ndarray:
    cols = case.analysis.columns
    total = np.zeros(len(cols))
    for key, ops in cols.flops_by_unit.items():
        if is_matrix_unit(key):
            total = total + ops
    return total


def check_rows_m2(case: RowCase) -> RowFindings:
    cols = case.analysis.columns
    roof = cols.roof.astype(str)
    on_matrix = np.char.startswith(roof, MATRIX_PREFIXES[0]) | np.char.startswith(
        roof, MATRIX_PREFIXES[1])
    out: RowFindings = []
    for i in np.flatnonzero(on_matrix & cols.has_unit_split & (_matrixops_text(case) <= 0)):
        units = {k: float(v[i]) for k, v in cols.flops_by_unit.items() if v[i] > 0}
        listed = ", ".join(f"{k} {ops_text(v)}" for k, v in units.items())
        right = max(units, key=lambda k: units[k]) if units else "cuda_core.fp32"
        out.append((int(i), Finding(
            "M2", ERROR, case.where[i],
            f"roof {roof[i]} but flops_by_unit has no matrix-unit work ({listed})",
            f"declare the roof the unit that does the work: {right}")))
    for ledger, rows in case.matched():
        if any(w.op_class == "contraction" and w.ops > 0 for w in ledger.work):
            continue
        right = busiest_vector_unit(ledger)
        for i in rows[on_matrix[rows] & ~cols.has_unit_split[rows]]:
            out.append((int(i), Finding(
                "M2", ERROR, case.where[i],
                f"roof {roof[i]} but reference ledger {ledger.name} has no contraction in its "
                f"{ops_text(ledger.flops)} ops",
                f"declare the roof the unit that does the work: {right}")))
    return out


def _counted_matrix_units(case: RowCase, i: int | np.integer) -> list[str]:
    cols = case.analysis.columns
    if not cols.has_unit_split[i]:
        return []
    return [k for k, v in cols.flops_by_unit.items() if is_matrix_unit(k) and v[i] > 0]


def _m3(case: RowCase, i: int | np.integer, reason: str, call: RoofCall) -> tuple[int, Finding]:
    return int(i), Finding(
        "M3", ERROR, case.where[i], f"{reason} ({ops_text(call.ops)} ops) runs on {call.runs_on}",
        f"declare the roof (and count the {call.what}) on the unit the algorithm uses: "
        f"{call.runs_on}")


def check_rows_m3(case: RowCase) -> RowFindings:
    """A roof its own matrix work does not run on, or one the reference's algorithm does not."""
    cols = case.analysis.columns
    roof = cols.roof.astype(str)
    found: dict[int, tuple[int, Finding]] = {}
    matrix_ops = _matrixops_text(case)
    for i in np.flatnonzero(cols.has_unit_split & (matrix_ops > 0)):
        key = roof[i]
        if not is_matrix_unit(key):
            continue
        on_roof = cols.flops_by_unit.get(key)
        if on_roof is not None and on_roof[i] > 0:
            continue
        runs = {k: float(v[i]) for k, v in cols.flops_by_unit.items()
                if is_matrix_unit(k) and v[i] > 0}
        runs_on = max(runs, key=lambda k: runs[k])
        found[int(i)] = _m3(case, i, f"roof {key} but its matrix work",
                            RoofCall(runs_on, runs[runs_on], "contraction"))
    for ledger, rows in case.matched():
        totals_only = rows[~cols.has_unit_split[rows]]
        for key in np.unique(roof[totals_only]):
            call = expected_roof(str(key), [], ledger)
            if call is not None:
                for i in totals_only[roof[totals_only] == key]:
                    found.setdefault(int(i), _m3(
                        case, i, f"roof {key} but reference {ledger.name}'s {call.what}", call))
        for i in rows[cols.has_unit_split[rows]]:
            counted = _counted_matrix_units(case, i)
            call = expected_roof(roof[i], counted, ledger)
            if call is not None and int(i) not in found:
                on = f" (matrix work counted on {', '.join(counted)})" if counted else ""
                found[int(i)] = _m3(case, i, f"roof {roof[i]}{on} but reference "
                                             f"{ledger.name}'s {call.what}", call)
    return [found[i] for i in sorted(found)]


def _same(values: np.ndarray, target: float) -> np.ndarray:
    return np.isclose(values, target, rtol=1e-12, atol=0.5)


def check_rows_m4(case: RowCase) -> RowFindings:
    """Records of a composed op whose bytes AND FLOPs are a stage's, a partial fusion's, or a
    split's (the split with the whole op's FLOPs): the rule of the ledger check."""
    cols = case.analysis.columns
    found: dict[int, Finding] = {}
    for ledger, rows in case.matched():
        fused, readings = decompositions(ledger)
        if fused is None:
            continue
        for r in misreadings(fused, readings, ledger.bytes):
            hit = _same(cols.bytes[rows], r.bytes) & _same(cols.flops[rows], r.flops)
            for i in rows[hit]:
                found.setdefault(int(i), Finding(
                    "M4", ERROR, case.where[i],
                    f"bytes {nbytes_text(cols.bytes[i])} and FLOPs {ops_text(cols.flops[i])} "
                    f"are {r.label} for {ledger.name}; the one call moves "
                    f"{nbytes_text(ledger.bytes)} (AI {ledger.intensity_flops_per_byte:.2f}, "
                    f"not {intensity_text(cols.flops[i], cols.bytes[i])})",
                    f"price one call of {ledger.name} at {ledger.bytes:,} B; a timed split "
                    "or stage is another op: name it so"))
    return sorted(found.items(), key=lambda item: item[0])


def check_rows_m6(case: RowCase) -> RowFindings:
    """Records of a reference's call (same op, same FLOPs) that move fewer bytes than it."""
    cols = case.analysis.columns
    out: RowFindings = []
    for ledger, rows in case.matched():
        low = _same(cols.flops[rows], ledger.flops) & (
            (cols.bytes[rows] < ledger.bytes - 0.5)
            | (cols.read_bytes[rows] < ledger.read_bytes - 0.5))  # NaN compares False
        for i in rows[low]:
            short = ledger.bytes - cols.bytes[i]
            if short > 0.5:
                exactly = (" (exactly its lookups)"
                           if abs(short - ledger.lookup_bytes) < 0.5 else "")
                why = (f"bytes {nbytes_text(cols.bytes[i])} are {nbytes_text(short)} below "
                       f"reference {ledger.name}'s {nbytes_text(ledger.bytes)}{exactly}")
            else:
                why = (f"read_bytes {nbytes_text(cols.read_bytes[i])} are below reference "
                       f"{ledger.name}'s {nbytes_text(ledger.read_bytes)}")
            out.append((int(i), Finding(
                "M6", ERROR, case.where[i], why,
                "count every tensor the operator reads, lookups included "
                "(Ledger.to_record gives the fields)")))
    return out


def check_rows_m5(case: RowCase) -> RowFindings:
    """The special-function pipe binds, or takes >= half the binding pipe's time: name every
    such pipe, the serial sum beside the overlapped bound."""
    a = case.analysis
    priced = a.priced
    out: RowFindings = []
    binding = priced.binding_unit.astype(str)
    # Only rows an SFU binds, or that carry a second pipe with SFU work, can be findings:
    # screened over columns, so that a million rows without one cost no Python loop.
    sfu_keys = [k for k in {*priced.unit_ops, *np.unique(binding).tolist()} if is_sfu_unit(k)]
    second = (priced.flags.astype(np.int64) & int(Reason.SECOND_PIPE)) != 0
    sfu_work = np.zeros(len(binding), dtype=bool)
    for k in sfu_keys:
        if k in priced.unit_ops:
            sfu_work |= priced.unit_ops[k] > 0
    candidate = np.isin(binding, sfu_keys) | (second & sfu_work)
    for _, rows in _priced_rows(case):
        for i in rows[candidate[rows]]:
            key = binding[i]
            if not key:
                continue
            pipes = pipes_near_binding(priced, int(i))
            sfus = [k for k, _ in pipes if is_sfu_unit(k)]
            if not is_sfu_unit(key) and not sfus:
                continue
            if len(pipes) > 1 and priced.serial_sol_time_s is not None and (
                    a.judged.serial_efficiency is not None):
                why = pipes_text(pipes, float(priced.sol_time_s[i]),
                                 float(priced.serial_sol_time_s[i]),
                                 float(a.judged.efficiency[i]),
                                 float(a.judged.serial_efficiency[i]))
                fix = (f"calibrate {', '.join(sfus or [key])} on the card (`roofwise "
                       "calibrate`) and read this op by its band, never by one pipe")
            else:
                others = {k: float(t[i]) for k, t in priced.unit_time_s.items()
                          if k != key and t[i] > 0}
                versus = (f" against {fmt.seconds(max(others.values()))} on "
                          f"{max(others, key=lambda k: others[k])}" if others else "")
                why = (f"{key} binds: {ops_text(priced.unit_ops[key][i])} transcendentals "
                       f"take {fmt.seconds(priced.unit_time_s[key][i])}{versus}")
                fix = f"judge this op against {key}, per pipe; calibrate {key} before trusting it"
            out.append((int(i), Finding("M5", WARNING, case.where[i], why, fix)))
    return out


def check_rows_m7(case: RowCase) -> RowFindings:
    """Rows whose time the floor of their timing method explains: efficiency is no reading."""
    a = case.analysis
    out: RowFindings = []
    for i in np.flatnonzero(a.judged.verdict == LATENCY_BOUND):
        machine = a.machines[a.machine_name[i]]
        facts = floor_facts(a, int(i), machine)
        out.append((int(i), Finding(
            "M7", WARNING, case.where[i],
            latency_bound_what(float(a.priced.sol_time_s[i]), float(a.columns.time_s[i]),
                               facts),
            retime_advice(facts.timing))))
    return out


def check_rows_m8(case: RowCase) -> RowFindings:
    """Above a theoretical ceiling (impossible: an error) or above the envelope only (a
    warning with two readings: the accounting, or a profile calibrated below this card)."""
    a = case.analysis
    cols, judged, priced = a.columns, a.judged, a.priced
    out: RowFindings = []
    fix = ("recount bytes and FLOPs (lookups, scales, intermediates that reach DRAM) and check "
           "the timer; never read it as a fast kernel")
    stale_fix = ("recount bytes and FLOPs and check the timer; if they hold, run `roofwise "
                 "calibrate` on this card and read the rows with the profile it writes")
    for i in np.flatnonzero((judged.verdict == IMPOSSIBLE) | (judged.verdict == ANOMALY)):
        machine = a.machines[a.machine_name[i]]
        reasons: list[str] = []
        theory = machine.dram.theoretical_bytes_per_s
        achieved = judged.achieved_bytes_per_s[i]
        if theory is not None and achieved > theory:
            reasons.append(f"{nbytes_text(cols.bytes[i])} in {fmt.seconds(cols.time_s[i])} is "
                           f"{fmt.fixed(achieved / 1e9, '.1f', 'GB/s')}, above "
                           f"{machine.dram.name} theoretical "
                           f"{theory / 1e9:.0f} GB/s")
        for key, ops in priced.unit_ops.items():
            unit = machine.unit(key)
            if unit is None or unit.theoretical_ops_per_s is None or cols.time_s[i] <= 0:
                continue
            rate = ops[i] / cols.time_s[i]
            if rate > unit.theoretical_ops_per_s:
                reasons.append(f"{key} at {fmt.tera_rate(rate, key)}, above its "
                               "theoretical "
                               f"{fmt.tera_rate(unit.theoretical_ops_per_s, key)}")
        if judged.verdict[i] == ANOMALY:
            reasons.append(above_envelope_what(float(judged.envelope_efficiency[i]),
                                               ceiling_facts(a, int(i), machine)))
            out.append((int(i), Finding("M8", WARNING, case.where[i], "; ".join(reasons),
                                        stale_fix)))
            continue
        if not reasons:
            reasons.append(f"efficiency {fmt.percent(judged.envelope_efficiency[i])} of the "
                           f"envelope ceiling is above 105% (SOL "
                           f"{fmt.seconds(priced.envelope_sol_time_s[i])}, measured "
                           f"{fmt.seconds(cols.time_s[i])})")
        out.append((int(i), Finding("M8", ERROR, case.where[i], "; ".join(reasons), fix)))
    return out


def check_rows_r1(case: RowCase) -> RowFindings:
    """Rows whose roof or flops_by_unit names a unit their machine profile does not have."""
    a = case.analysis
    cols = a.columns
    roof = cols.roof.astype(str)
    missing: dict[int, list[str]] = {}
    for name, machine in a.machines.items():
        rows = np.flatnonzero(a.machine_name == name)
        if not len(rows):
            continue
        for key in np.unique(roof[rows]):
            if machine.unit(str(key)) is None:
                for i in rows[roof[rows] == key]:
                    missing.setdefault(int(i), []).append(str(key))
        for key, ops in cols.flops_by_unit.items():
            if machine.unit(key) is None:
                for i in rows[ops[rows] > 0]:
                    if key not in missing.setdefault(int(i), []):
                        missing[int(i)].append(key)
    return [(i, Finding("R1", ERROR, case.where[i],
                        units_missing_reason(a.machines[a.machine_name[i]], keys),
                        UNIT_NOT_ON_MACHINE_FIX))
            for i, keys in sorted(missing.items())]


RowCheck = Callable[[RowCase], RowFindings]
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
        return f"{self._path}:{line} ({op})" if self._path else f"{op} (record {line})"


def row_where(analysis: Analysis, path: str = "") -> RowWhere:
    return RowWhere(analysis, path)


def lint_rows(analysis: Analysis, ledgers: Iterable[Ledger] | Mapping[str, Ledger] | None = None,
              path: str = "") -> list[list[Finding]]:
    """Findings per row, in code order; `ledgers` are references matched to rows by op name."""
    per_row: list[list[Finding]] = [[] for _ in range(len(analysis))]
    for i, found in lint_findings(analysis, ledgers, path).items():
        per_row[i] = found
    return per_row


def lint_findings(analysis: Analysis,
                  ledgers: Iterable[Ledger] | Mapping[str, Ledger] | None = None,
                  path: str = "", machine_level: bool = False) -> dict[int, list[Finding]]:
    """Findings by row, for the rows that have any (most have none), in code order.
    `machine_level`: also each R2 finding, in every row bound by the ceiling it names, after
    the row's own (so that `analyze --json`, one object per row, carries it)."""
    case = RowCase(analysis, _references(ledgers), row_where(analysis, path))
    found: dict[int, list[Finding]] = {}
    for check in ROW_CHECKS.values():
        for i, finding in check(case):
            found.setdefault(i, []).append(finding)
    if machine_level:
        for finding, rows in stale_profile_groups(analysis):
            for i in rows.tolist():
                found.setdefault(i, []).append(finding)
    return found


def lint_analysis(analysis: Analysis,
                  ledgers: Iterable[Ledger] | Mapping[str, Ledger] | None = None,
                  path: str = "") -> list[Finding]:
    """Every row check over an analysis, row by row (`where` is path:line, or op), then the
    machine-level findings the rows make together (R2)."""
    return [*(f for row in lint_rows(analysis, ledgers, path) for f in row),
            *(f for check in ANALYSIS_CHECKS.values() for f in check(analysis))]

