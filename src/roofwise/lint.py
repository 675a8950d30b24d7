"""The eight misuses (M1-M8) as checks over ledgers, machines and analyses: pure, no I/O.

Each check is a small function registered by its code. A finding says which code fired, the
numbers that decided it, and the one-line fix. Errors mean the reading is wrong; warnings mean
it needs a qualifier before a person acts on it.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from .analysis import Analysis
from .errors import InputError
from .ledger import Ledger, Role, Work, fuse
from .machine import ComputeUnit, Machine
from .pricing import LedgerPrice, cycles_by_unit, price_ledger
from .report import fmt
from .verdict import ANOMALY, BLANK, IMPOSSIBLE, LATENCY_BOUND

ERROR = "error"
WARNING = "warning"

CODES = {
    "M1": "a ceiling taken from a datasheet (no calibration) or a sparse peak",
    "M2": "an operator with no contraction priced on a matrix-unit (tensor-core) roof",
    "M3": "a roof that follows the input dtype where the algorithm says otherwise",
    "M4": "a fused call judged with a stage's intensity, or bytes that match a stage's",
    "M5": "transcendentals that bind the special-function pipe, or charged like a multiply",
    "M6": "a ledger or record that leaves out tensors the operator reads",
    "M7": "a number read from a row below the latency floor",
    "M8": "efficiency above 105%, or a rate above a theoretical ceiling",
}

MATRIX_PREFIXES = ("tensor_core.", "ascend_cube.")
# Calibrations on record run 0.63-0.94 of the datasheet, so a datasheet ceiling whose time is
# within 2x of the speed of light could decide the reading once measured.
DATASHEET_MARGIN = 0.5
_SPARSE_TOLERANCE = 1e-3  # relative
# Dense datasheet peaks (ops/s) by unit key, from shared/REFERENCES.md; sparse peaks are 2x.
KNOWN_DENSE_PEAKS: Mapping[str, tuple[tuple[str, float], ...]] = {
    "tensor_core.fp16": (("H100/H200 SXM", 989.5e12), ("A100 SXM", 312e12), ("H20", 148e12)),
    "tensor_core.bf16": (("H100/H200 SXM", 989.5e12), ("A100 SXM", 312e12), ("H20", 148e12)),
    "tensor_core.tf32": (("H100/H200 SXM", 494.7e12), ("A100 SXM", 156e12), ("H20", 74e12)),
    "tensor_core.fp8": (("H100/H200 SXM", 1979e12), ("H20", 296e12)),
}
_SPARSE_WORDS = re.compile(r"\bsparse\b|\bsparsity\b|\b2:4\b", re.IGNORECASE)
_DENSE_WORDS = re.compile(r"\bdense\b|\bno (structured )?sparsity\b", re.IGNORECASE)
_DTYPE_FAMILY = (("fp8", ("fp8", "float8")), ("bf16", ("bf16", "bfloat16")),
                 ("fp16", ("fp16", "float16", "half")), ("tf32", ("tf32",)),
                 ("fp32", ("fp32", "float32", "float")))


@dataclass(frozen=True)
class Finding:
    code: str  # M1..M8
    severity: str  # "error" | "warning"
    where: str
    reason: str  # one line, with the numbers that decided it
    fix: str  # one line

    def brief(self) -> dict[str, str]:
        return {"code": self.code, "reason": self.reason, "fix": self.fix}

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "severity": self.severity, "where": self.where,
                "reason": self.reason, "fix": self.fix}


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(f.severity == ERROR for f in findings)


# ---------------------------------------------------------------------------- small helpers


def is_matrix_unit(key: str) -> bool:
    return key.startswith(MATRIX_PREFIXES)


def is_sfu_unit(key: str) -> bool:
    family, _, kind = key.partition(".")
    return family == "sfu" or kind == "sfu"


def _b(value: float) -> str:
    return f"{round(value):,} B"


def _ops(value: float) -> str:
    return f"{round(value):,}"


def _dtype_family(dtype: str) -> str:
    low = dtype.lower()
    for family, prefixes in _DTYPE_FAMILY:
        if low.startswith(prefixes):
            return family
    return low


def _base(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def sparse_reason(unit: ComputeUnit) -> str | None:
    """Why `unit`'s theoretical rate looks like a sparse (2:4) peak; None when it does not."""
    rate = unit.theoretical_ops_per_s
    if rate is not None:
        known = KNOWN_DENSE_PEAKS.get(unit.key, ())
        if not any(math.isclose(rate, dense, rel_tol=_SPARSE_TOLERANCE) for _, dense in known):
            for part, dense in known:
                if math.isclose(rate, 2 * dense, rel_tol=_SPARSE_TOLERANCE):
                    return (f"{unit.key} theoretical {rate / 1e12:.1f} T/s is 2x the dense "
                            f"{part} datasheet figure {dense / 1e12:.1f} T/s (a sparse peak)")
    if _SPARSE_WORDS.search(unit.source) and not _DENSE_WORDS.search(unit.source):
        return f"{unit.key} source says sparse: {unit.source!r}"
    return None


_SPARSE_FIX = "use the dense datasheet figure (half the sparse one) and calibrate it"


def _uncalibrated_unit_fix(key: str) -> str:
    return f"measure {key} on the card (roofwise calibrate) and read verdicts with that rate"


def _uncalibrated_memory_fix(level: str) -> str:
    return f"measure {level} access mixes on the card (roofwise calibrate) before trusting SOL"


# ------------------------------------------------------------------------------- machines


def check_machine_m1(machine: Machine) -> list[Finding]:
    out: list[Finding] = []
    for level in machine.memory.values():
        if level.theoretical_bytes_per_s is not None and not level.calibration_by_mix:
            out.append(Finding(
                "M1", WARNING, f"{machine.name} {level.name}",
                f"{level.name} {level.theoretical_bytes_per_s / 1e9:.0f} GB/s is the datasheet "
                "figure: no access mix was measured", _uncalibrated_memory_fix(level.name)))
    for unit in machine.units.values():
        sparse = sparse_reason(unit)
        if sparse is not None:
            out.append(Finding("M1", ERROR, f"{machine.name} {unit.key}", sparse, _SPARSE_FIX))
        elif unit.theoretical_ops_per_s is not None and not unit.calibrated:
            out.append(Finding(
                "M1", WARNING, f"{machine.name} {unit.key}",
                f"{unit.key} {unit.theoretical_ops_per_s / 1e12:.2f} T/s is the datasheet "
                "rate: no regime was measured", _uncalibrated_unit_fix(unit.key)))
    return out


MACHINE_CHECKS: Mapping[str, Callable[[Machine], list[Finding]]] = {"M1": check_machine_m1}


def lint_machine(machine: Machine) -> list[Finding]:
    """M1 on a profile: every datasheet ceiling and every sparse peak it holds."""
    return [f for check in MACHINE_CHECKS.values() for f in check(machine)]


# -------------------------------------------------------------------------------- ledgers


@dataclass(frozen=True)
class LedgerCase:
    """What the ledger checks read: the ledger, its price (when a machine is given), a reference."""

    ledger: Ledger
    machine: Machine | None
    price: LedgerPrice | None
    reference: Ledger | None
    where: str


def check_ledger_m1(case: LedgerCase) -> list[Finding]:
    machine, price, ledger = case.machine, case.price, case.ledger
    if machine is None or price is None:
        return []
    out: list[Finding] = []
    used = [k for k, ops in ledger.ops_by_unit.items() if ops > 0] or [ledger.roof]
    for key in used:
        unit = machine.unit(key)
        if unit is None:
            continue
        sparse = sparse_reason(unit)
        if sparse is not None:
            out.append(Finding("M1", ERROR, case.where, f"priced on {machine.name}: {sparse}",
                               _SPARSE_FIX))
            continue
        time_s = price.unit_time_s.get(key, 0.0)
        if (not unit.calibrated and unit.theoretical_ops_per_s is not None and time_s > 0
                and time_s >= DATASHEET_MARGIN * price.sol_time_s):
            out.append(Finding(
                "M1", WARNING, case.where,
                f"{key} on {machine.name} is the datasheet rate "
                f"{unit.theoretical_ops_per_s / 1e12:.2f} T/s (uncalibrated); its time "
                f"{fmt.seconds(time_s)} is {time_s / price.sol_time_s:.0%} of SOL "
                f"{fmt.seconds(price.sol_time_s)}", _uncalibrated_unit_fix(key)))
    level = machine.dram
    if (level.theoretical_bytes_per_s is not None and not level.calibration_by_mix
            and price.memory_time_s >= DATASHEET_MARGIN * price.sol_time_s):
        out.append(Finding(
            "M1", WARNING, case.where,
            f"{machine.name} {level.name} {level.theoretical_bytes_per_s / 1e9:.0f} GB/s is the "
            f"datasheet figure (no measured mix); memory time {fmt.seconds(price.memory_time_s)}"
            f" is {price.memory_time_s / price.sol_time_s:.0%} of SOL",
            _uncalibrated_memory_fix(level.name)))
    return out


def _busiest_vector_unit(ledger: Ledger) -> str:
    candidates = {k: v for k, v in ledger.ops_by_unit.items()
                  if not is_matrix_unit(k) and not is_sfu_unit(k)}
    return max(candidates, key=lambda k: candidates[k]) if candidates else "cuda_core.fp32"


def _balance_note(machine: Machine | None, wrong: str, right: str) -> str:
    if machine is None:
        return ""
    wrong_balance = machine.balance_flops_per_byte(wrong)
    right_balance = machine.balance_flops_per_byte(right)
    if wrong_balance is None or right_balance is None:
        return ""
    return (f"; balance {wrong_balance:.2f} vs {right_balance:.2f} FLOP/B on {right} "
            f"({machine.name})")


def check_ledger_m2(case: LedgerCase) -> list[Finding]:
    ledger = case.ledger
    if not is_matrix_unit(ledger.roof):
        return []
    if any(w.op_class == "contraction" and w.ops > 0 for w in ledger.work):
        return []
    right = _busiest_vector_unit(ledger)
    return [Finding(
        "M2", ERROR, case.where,
        f"roof {ledger.roof} but none of its {_ops(ledger.flops)} ops is a contraction"
        f"{_balance_note(case.machine, ledger.roof, right)}",
        f"declare the roof the unit that does the work: {right}")]


def _contraction_units(ledger: Ledger) -> dict[str, float]:
    units: dict[str, float] = {}
    for w in ledger.work:
        if w.op_class == "contraction" and w.ops > 0:
            units[w.unit] = units.get(w.unit, 0.0) + w.ops
    return units


def _dtype_followers(ledger: Ledger, roof: str) -> list[str]:
    """Names of input tensors whose dtype family is the roof's (e.g. fp8 inputs, fp8 roof)."""
    roof_family = _dtype_family(roof.partition(".")[2])
    return [f"{t.name} ({t.dtype})" for t in ledger.tensors
            if t.role in (Role.INPUT, Role.INOUT, Role.LOOKUP)
            and _dtype_family(t.dtype) == roof_family]


def check_ledger_m3(case: LedgerCase) -> list[Finding]:
    ledger = case.ledger
    contraction = _contraction_units(ledger)
    if not is_matrix_unit(ledger.roof) or not contraction or ledger.roof in contraction:
        return []
    runs_on = max(contraction, key=lambda k: contraction[k])
    followers = _dtype_followers(ledger, ledger.roof)
    follows = f" follows input(s) {', '.join(followers)}" if followers else ""
    return [Finding(
        "M3", ERROR, case.where,
        f"roof {ledger.roof}{follows}, but the contraction ({_ops(contraction[runs_on])} ops) "
        f"runs on {runs_on}{_balance_note(case.machine, ledger.roof, runs_on)}",
        f"declare the roof the unit the algorithm's contraction uses: {runs_on}")]


MAX_STAGES_SPLIT = 8  # 2**(n-1) ways to cut n stages into consecutive calls


@dataclass(frozen=True)
class Reading:
    """One way to misprice a composed call: part of its stages, or its stages cut into calls."""

    label: str
    bytes: int
    flops: float
    calls: int


def decompositions(ledger: Ledger) -> tuple[Ledger | None, list[Reading]]:
    """The stages fused into one call, and every partial group or multi-call split of them.

    Groups and calls are runs of consecutive stages, each run fused; the empty list when the
    ledger has fewer than two stages (or too many to enumerate).
    """
    stages = ledger.stages
    n = len(stages)
    if n < 2 or n > MAX_STAGES_SPLIT:
        return None, []
    groups: dict[tuple[int, int], Ledger] = {}
    try:
        for i in range(n):
            for j in range(i + 1, n + 1):
                groups[i, j] = (stages[i] if j - i == 1 else
                                fuse("+".join(s.name for s in stages[i:j]), stages[i:j],
                                     roof=ledger.roof))
    except InputError:
        return None, []
    out = [Reading(f"stage {g.name}'s" if j - i == 1 else f"stages {g.name} fused", g.bytes,
                   g.flops, 1) for (i, j), g in groups.items() if (i, j) != (0, n)]
    total_flops = sum(s.flops for s in stages)
    splits: dict[tuple[int, int], list[str]] = {}  # (calls, bytes) -> the cuts that give it
    for mask in range(1, 2 ** (n - 1)):
        bounds = [0, *[k for k in range(1, n) if mask >> (k - 1) & 1], n]
        calls = [groups[a, b] for a, b in itertools.pairwise(bounds)]
        splits.setdefault((len(calls), sum(c.bytes for c in calls)), []).append(
            " | ".join(c.name for c in calls))
    out += [Reading(f"the {calls}-call total ({' or '.join(cuts)})", nbytes, total_flops, calls)
            for (calls, nbytes), cuts in splits.items()]
    return groups[0, n], out


def _intensity(flops: float, nbytes: float) -> str:
    return f"{flops / nbytes:.2f}" if nbytes else "inf"


def check_ledger_m4(case: LedgerCase) -> list[Finding]:
    ledger = case.ledger
    fused, readings = decompositions(ledger)
    if fused is None:
        return []
    fused_ai = f"fused AI {_intensity(fused.flops, fused.bytes)}"
    splits = [r for r in readings if r.calls > 1 and r.bytes != fused.bytes]
    if ledger.calls == 1:
        for r in splits:
            if ledger.bytes == r.bytes:
                return [Finding(
                    "M4", ERROR, case.where,
                    f"one call priced with {r.label} {_b(r.bytes)} (AI "
                    f"{ledger.intensity_flops_per_byte:.2f}); fused its stages move "
                    f"{_b(fused.bytes)} ({fused_ai})",
                    "fuse the stages (roofwise.ledger.fuse): intermediates of one call cost "
                    "nothing")]
    elif ledger.bytes == fused.bytes and splits:
        return [Finding(
            "M4", ERROR, case.where,
            f"{ledger.calls} calls priced with the fused one-call bytes {_b(ledger.bytes)}; "
            f"run as calls they move more (e.g. {splits[-1].label} {_b(splits[-1].bytes)})",
            "compose separate calls with roofwise.ledger.separate: each pays its intermediates")]
    names = {t.name for t in ledger.tensors}
    fused_names = {t.name for t in fused.tensors}
    for stage in ledger.stages:
        # A stage's tensors, or a stage's intensity (its bytes and FLOPs): equal bytes alone
        # can be a coincidence (the case study's payload equals its quant stage's bytes).
        same_tensors = names == {t.name for t in stage.tensors} != fused_names
        same_intensity = (ledger.bytes == stage.bytes != fused.bytes
                          and ledger.flops == stage.flops)
        if same_tensors or same_intensity:
            what = "tensors" if same_tensors else "bytes and FLOPs"
            return [Finding(
                "M4", ERROR, case.where,
                f"{what} are stage {stage.name}'s ({_b(ledger.bytes)}, AI "
                f"{ledger.intensity_flops_per_byte:.2f}); the composed call moves "
                f"{_b(fused.bytes)} for {_ops(fused.flops)} FLOPs ({fused_ai})",
                "price the composed call from all its stages (fuse or separate), not one")]
    return []


def _transcendentals_off_pipe(ledger: Ledger, machine: Machine) -> list[tuple[Work, str]]:
    sfus = [k for k in machine.units if is_sfu_unit(k)]
    if not sfus:
        return []
    moved: list[tuple[Work, str]] = []
    for w in ledger.work:
        if w.op_class != "transcendental" or w.ops <= 0 or is_sfu_unit(w.unit):
            continue
        family = w.unit.partition(".")[0]
        same_family = [k for k in sfus if k.startswith(family + ".")]
        moved.append((w, (same_family or sfus)[0]))
    return moved


def _pipe_costs(ops_by_unit: Mapping[str, float], machine: Machine
                ) -> tuple[dict[str, float], str] | None:
    """Cost per pipe in seconds when every rate is known, else in cycles; None when neither."""
    units = [machine.unit(k) for k in ops_by_unit]
    if any(u is None for u in units):
        return None
    rates = {k: machine.units[k].effective_ops_per_s() for k in ops_by_unit}
    if all(r for r in rates.values()):
        return {k: ops / (rates[k] or math.nan) for k, ops in ops_by_unit.items()}, "s"
    try:
        return cycles_by_unit(ops_by_unit, machine), "cycles"
    except InputError:
        return None


def _cost(value: float, unit: str) -> str:
    return fmt.seconds(value) if unit == "s" else f"{value:,.1f} cycles"


def check_ledger_m5(case: LedgerCase) -> list[Finding]:
    ledger, machine = case.ledger, case.machine
    if machine is None:
        return []
    out: list[Finding] = []
    moved = _transcendentals_off_pipe(ledger, machine)
    if moved:
        by_unit = dict(ledger.ops_by_unit)
        for w, sfu in moved:
            by_unit[w.unit] -= w.ops
            by_unit[sfu] = by_unit.get(sfu, 0.0) + w.ops
        before = _pipe_costs({k: v for k, v in ledger.ops_by_unit.items() if v > 0}, machine)
        after = _pipe_costs({k: v for k, v in by_unit.items() if v > 0}, machine)
        ops = sum(w.ops for w, _ in moved)
        units = sorted({w.unit for w, _ in moved})
        sfu = moved[0][1]
        slower = ""
        if before is not None and after is not None and before[1] == after[1]:
            slow_before, slow_after = max(before[0].values()), max(after[0].values())
            slower = (f"; on {sfu} the slowest pipe takes {_cost(slow_after, after[1])}, not "
                     f"{_cost(slow_before, before[1])} ({slow_after / slow_before:.2f}x)")
        out.append(Finding(
            "M5", ERROR, case.where,
            f"{_ops(ops)} transcendental ops on {', '.join(units)} are charged like a multiply "
            f"though {machine.name} has {sfu}{slower}",
            f"count transcendentals on {sfu} (Work unit={sfu!r}, class='transcendental')"))
        return out
    positive = {k: v for k, v in ledger.ops_by_unit.items() if v > 0}
    costs = _pipe_costs(positive, machine)
    if costs is None or len(costs[0]) < 2:
        return out
    per_pipe, unit = costs
    binding = max(per_pipe, key=lambda k: per_pipe[k])
    if not is_sfu_unit(binding):
        return out
    others = {k: v for k, v in per_pipe.items() if k != binding}
    runner = max(others, key=lambda k: others[k])
    serial = sum(per_pipe.values())
    out.append(Finding(
        "M5", WARNING, case.where,
        f"{binding} binds: {_ops(positive[binding])} transcendentals take "
        f"{_cost(per_pipe[binding], unit)} against {_cost(others[runner], unit)} on {runner} "
        f"(serial issue {_cost(serial, unit)})",
        f"judge this op against {binding}, per pipe; cut or approximate the transcendentals"))
    return out


def check_ledger_m6(case: LedgerCase) -> list[Finding]:
    ledger, ref = case.ledger, case.reference
    if ref is None:
        return []
    problems: list[str] = []
    if ledger.bytes < ref.bytes:
        short = ref.bytes - ledger.bytes
        exactly = " (exactly its lookups)" if short == ref.lookup_bytes else ""
        problems.append(f"{_b(ledger.bytes)} is {_b(short)} below the reference "
                        f"{ref.name}'s {_b(ref.bytes)}{exactly}")
    names = {_base(t.name) for t in ledger.tensors}
    missing = [t.name for t in ref.tensors if t.read_bytes > 0 and _base(t.name) not in names]
    if missing:
        problems.append(f"missing read tensor(s) {', '.join(missing)}")
    ref_lookups = [t for t in ref.tensors if t.role is Role.LOOKUP]
    if ref_lookups and not any(t.role is Role.LOOKUP for t in ledger.tensors):
        problems.append(f"no lookups where the reference reads {len(ref_lookups)} "
                        f"({_b(ref.lookup_bytes)})")
    if not problems:
        return []
    return [Finding("M6", ERROR, case.where, "; ".join(problems),
                    "count every tensor the operator reads, lookups (weights, tables, scales) "
                    "included")]


def check_ledger_m7(case: LedgerCase) -> list[Finding]:
    machine, price = case.machine, case.price
    if machine is None or price is None or not math.isfinite(price.sol_time_s):
        return []
    floor = machine.latency_floor
    if price.sol_time_s >= floor.sol_s:
        return []
    assumed = ", assumed" if floor.assumed else ""
    return [Finding(
        "M7", WARNING, case.where,
        f"SOL {fmt.seconds(price.sol_time_s)} is below the latency floor "
        f"{fmt.seconds(floor.sol_s)} on {machine.name}{assumed}: a time under "
        f"{fmt.seconds(floor.measured_s)} will read latency_bound, and its efficiency means "
        "nothing", "judge launches and grid fill at this shape (batch, fuse, graphs), "
                   "not efficiency")]


LedgerCheck = Callable[[LedgerCase], list[Finding]]
LEDGER_CHECKS: Mapping[str, LedgerCheck] = {
    "M1": check_ledger_m1, "M2": check_ledger_m2, "M3": check_ledger_m3,
    "M4": check_ledger_m4, "M5": check_ledger_m5, "M6": check_ledger_m6,
    "M7": check_ledger_m7,
}


def lint_ledger(ledger: Ledger, machine: Machine | None, reference: Ledger | None = None,
                where: str | None = None) -> list[Finding]:
    """Every ledger check; those that need prices are skipped when `machine` is None."""
    price = price_ledger(ledger, machine) if machine is not None else None
    case = LedgerCase(ledger, machine, price, reference, where or f"ledger {ledger.name}")
    return [f for check in LEDGER_CHECKS.values() for f in check(case)]


# ------------------------------------------------------------------------------ analyses


@dataclass(frozen=True)
class RowCase:
    """What the row checks read: the analysis, reference ledgers by op name, where each row is."""

    analysis: Analysis
    references: Mapping[str, Ledger]
    where: tuple[str, ...]

    def matched(self) -> list[tuple[Ledger, np.ndarray]]:
        """(reference, row indices whose op names it) for each reference ledger."""
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
                out += [(int(i), Finding("M1", ERROR, case.where[i], sparse, _SPARSE_FIX))
                        for i in used]
                continue
            times = priced.unit_time_s.get(key)
            if unit.calibrated or unit.theoretical_ops_per_s is None or times is None:
                continue
            for i in used[times[used] >= DATASHEET_MARGIN * sol[used]]:
                out.append((int(i), Finding(
                    "M1", WARNING, case.where[i],
                    f"{key} on {machine.name} is the datasheet rate "
                    f"{unit.theoretical_ops_per_s / 1e12:.2f} T/s (uncalibrated); its time "
                    f"{fmt.seconds(times[i])} is {times[i] / sol[i]:.0%} of SOL",
                    _uncalibrated_unit_fix(key))))
        level = machine.dram
        if level.theoretical_bytes_per_s is not None and not level.calibration_by_mix:
            memory = priced.memory_time_s
            for i in rows[memory[rows] >= DATASHEET_MARGIN * sol[rows]]:
                out.append((int(i), Finding(
                    "M1", WARNING, case.where[i],
                    f"{machine.name} {level.name} {level.theoretical_bytes_per_s / 1e9:.0f} GB/s "
                    f"is the datasheet figure (no measured mix); memory time "
                    f"{fmt.seconds(memory[i])} is {memory[i] / sol[i]:.0%} of SOL",
                    _uncalibrated_memory_fix(level.name))))
    return out


def _matrix_ops(case: RowCase) -> np.ndarray:
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
    for i in np.flatnonzero(on_matrix & cols.has_unit_split & (_matrix_ops(case) <= 0)):
        units = {k: float(v[i]) for k, v in cols.flops_by_unit.items() if v[i] > 0}
        listed = ", ".join(f"{k} {_ops(v)}" for k, v in units.items())
        right = max(units, key=lambda k: units[k]) if units else "cuda_core.fp32"
        out.append((int(i), Finding(
            "M2", ERROR, case.where[i],
            f"roof {roof[i]} but flops_by_unit has no matrix-unit work ({listed})",
            f"declare the roof the unit that does the work: {right}")))
    for ledger, rows in case.matched():
        if any(w.op_class == "contraction" and w.ops > 0 for w in ledger.work):
            continue
        right = _busiest_vector_unit(ledger)
        for i in rows[on_matrix[rows] & ~cols.has_unit_split[rows]]:
            out.append((int(i), Finding(
                "M2", ERROR, case.where[i],
                f"roof {roof[i]} but reference ledger {ledger.name} has no contraction in its "
                f"{_ops(ledger.flops)} ops",
                f"declare the roof the unit that does the work: {right}")))
    return out


def check_rows_m3(case: RowCase) -> RowFindings:
    cols = case.analysis.columns
    roof = cols.roof.astype(str)
    out: RowFindings = []
    matrix_ops = _matrix_ops(case)
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
        out.append((int(i), Finding(
            "M3", ERROR, case.where[i],
            f"roof {key} but its matrix work ({_ops(runs[runs_on])} FLOPs) runs on {runs_on}",
            f"declare the roof the unit the algorithm's contraction uses: {runs_on}")))
    for ledger, rows in case.matched():
        contraction = _contraction_units(ledger)
        if not contraction:
            continue
        runs_on = max(contraction, key=lambda k: contraction[k])
        for i in rows[~cols.has_unit_split[rows]]:
            if not is_matrix_unit(roof[i]) or roof[i] in contraction:
                continue
            out.append((int(i), Finding(
                "M3", ERROR, case.where[i],
                f"roof {roof[i]} but reference {ledger.name}'s contraction "
                f"({_ops(contraction[runs_on])} ops) runs on {runs_on}",
                f"declare the roof the unit the algorithm's contraction uses: {runs_on}")))
    return out


def _same(values: np.ndarray, target: float) -> np.ndarray:
    return np.abs(values - target) < 0.5


def check_rows_m4(case: RowCase) -> RowFindings:
    """Records of a composed op whose bytes are a stage's, a partial fusion's or a split's."""
    cols = case.analysis.columns
    found: dict[int, Finding] = {}
    for ledger, rows in case.matched():
        _, readings = decompositions(ledger)
        for r in readings:
            if r.bytes == ledger.bytes:
                continue
            # a split carries the whole op's FLOPs; a stage's reading may carry either
            flops_ok = _same(cols.flops[rows], ledger.flops) | (
                _same(cols.flops[rows], r.flops) if r.calls == 1 else False)
            for i in rows[_same(cols.bytes[rows], r.bytes) & flops_ok]:
                found.setdefault(int(i), Finding(
                    "M4", ERROR, case.where[i],
                    f"bytes {_b(cols.bytes[i])} are {r.label} for {ledger.name}; the one call "
                    f"moves {_b(ledger.bytes)} (AI {ledger.intensity_flops_per_byte:.2f}, "
                    f"not {_intensity(cols.flops[i], cols.bytes[i])})",
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
                why = (f"bytes {_b(cols.bytes[i])} are {_b(short)} below reference "
                       f"{ledger.name}'s {_b(ledger.bytes)}{exactly}")
            else:
                why = (f"read_bytes {_b(cols.read_bytes[i])} are below reference "
                       f"{ledger.name}'s {_b(ledger.read_bytes)}")
            out.append((int(i), Finding(
                "M6", ERROR, case.where[i], why,
                "count every tensor the operator reads, lookups included "
                "(Ledger.to_record gives the fields)")))
    return out


def check_rows_m5(case: RowCase) -> RowFindings:
    a = case.analysis
    priced = a.priced
    out: RowFindings = []
    binding = priced.binding_unit.astype(str)
    for _, rows in _priced_rows(case):
        for i in rows:
            key = binding[i]
            if not key or not is_sfu_unit(key):
                continue
            others = {k: float(t[i]) for k, t in priced.unit_time_s.items()
                      if k != key and t[i] > 0}
            versus = (f" against {fmt.seconds(max(others.values()))} on "
                      f"{max(others, key=lambda k: others[k])}" if others else "")
            out.append((int(i), Finding(
                "M5", WARNING, case.where[i],
                f"{key} binds: {_ops(priced.unit_ops[key][i])} transcendentals take "
                f"{fmt.seconds(priced.unit_time_s[key][i])}{versus}",
                f"judge this op against {key}, per pipe; calibrate {key} before trusting it")))
    return out


def check_rows_m7(case: RowCase) -> RowFindings:
    a = case.analysis
    out: RowFindings = []
    for i in np.flatnonzero(a.judged.verdict == LATENCY_BOUND):
        machine = a.machines[a.machine_name[i]]
        floor = machine.latency_floor
        assumed = ", assumed" if floor.assumed else ""
        out.append((int(i), Finding(
            "M7", WARNING, case.where[i],
            f"SOL {fmt.seconds(a.priced.sol_time_s[i])} and measured "
            f"{fmt.seconds(a.columns.time_s[i])} are below the latency floor (SOL < "
            f"{fmt.seconds(floor.sol_s)}, measured < {fmt.seconds(floor.measured_s)}{assumed}): "
            f"efficiency {fmt.percent(a.judged.efficiency[i])} is not the metric",
            "judge launches and grid fill (batch, fuse, CUDA graphs), never efficiency here")))
    return out


def check_rows_m8(case: RowCase) -> RowFindings:
    a = case.analysis
    cols, judged, priced = a.columns, a.judged, a.priced
    out: RowFindings = []
    fix = ("recount bytes and FLOPs (lookups, scales, intermediates that reach DRAM) and check "
           "the timer; never read it as a fast kernel")
    for i in np.flatnonzero((judged.verdict == IMPOSSIBLE) | (judged.verdict == ANOMALY)):
        machine = a.machines[a.machine_name[i]]
        reasons: list[str] = []
        theory = machine.dram.theoretical_bytes_per_s
        achieved = judged.achieved_bytes_per_s[i]
        if theory is not None and achieved > theory:
            reasons.append(f"{_b(cols.bytes[i])} in {fmt.seconds(cols.time_s[i])} is "
                           f"{achieved / 1e9:.1f} GB/s, above {machine.dram.name} theoretical "
                           f"{theory / 1e9:.0f} GB/s")
        for key, ops in priced.unit_ops.items():
            unit = machine.unit(key)
            if unit is None or unit.theoretical_ops_per_s is None or cols.time_s[i] <= 0:
                continue
            rate = ops[i] / cols.time_s[i]
            if rate > unit.theoretical_ops_per_s:
                reasons.append(f"{key} at {rate / 1e12:.2f} T/s, above its theoretical "
                               f"{unit.theoretical_ops_per_s / 1e12:.2f} T/s")
        if judged.verdict[i] == ANOMALY or not reasons:
            reasons.append(f"efficiency {fmt.percent(judged.envelope_efficiency[i])} of the "
                           f"envelope ceiling is above 105% (SOL "
                           f"{fmt.seconds(priced.envelope_sol_time_s[i])}, measured "
                           f"{fmt.seconds(cols.time_s[i])})")
        out.append((int(i), Finding("M8", ERROR, case.where[i], "; ".join(reasons), fix)))
    return out


RowCheck = Callable[[RowCase], RowFindings]
ROW_CHECKS: Mapping[str, RowCheck] = {
    "M1": check_rows_m1, "M2": check_rows_m2, "M3": check_rows_m3, "M4": check_rows_m4,
    "M5": check_rows_m5, "M6": check_rows_m6, "M7": check_rows_m7, "M8": check_rows_m8,
}


def _references(ledgers: Iterable[Ledger] | Mapping[str, Ledger] | None) -> dict[str, Ledger]:
    if ledgers is None:
        return {}
    values = ledgers.values() if isinstance(ledgers, Mapping) else ledgers
    return {ledger.name.lower(): ledger for ledger in values}


def row_where(analysis: Analysis, path: str = "") -> tuple[str, ...]:
    cols = analysis.columns
    return tuple(f"{path}:{int(line)} ({op})" if path else f"{op} (record {int(line)})"
                 for op, line in zip(cols.op, cols.line, strict=True))


def lint_rows(analysis: Analysis, ledgers: Iterable[Ledger] | Mapping[str, Ledger] | None = None,
              path: str = "") -> list[list[Finding]]:
    """Findings per row, in code order; `ledgers` are references matched to rows by op name."""
    case = RowCase(analysis, _references(ledgers), row_where(analysis, path))
    per_row: list[list[Finding]] = [[] for _ in range(len(analysis))]
    for check in ROW_CHECKS.values():
        for i, finding in check(case):
            per_row[i].append(finding)
    return per_row


def lint_analysis(analysis: Analysis,
                  ledgers: Iterable[Ledger] | Mapping[str, Ledger] | None = None,
                  path: str = "") -> list[Finding]:
    """Every row check over an analysis, row by row; `where` is path:line (or op)."""
    return [f for row in lint_rows(analysis, ledgers, path) for f in row]

