"""The misuse checks over one ledger (M1-M7, R1), against a machine and a reference when given.

M8 needs a measured time and lives with the record checks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from roofwise.base import fmt
from roofwise.base.errors import InputError
from roofwise.ledgers.ledger import Ledger, Role, Work
from roofwise.lint.findings import (
    ERROR,
    UNIT_NOT_ON_MACHINE_FIX,
    WARNING,
    Finding,
    intensity_text,
    is_matrix_unit,
    is_sfu_unit,
    nbytes_text,
    ops_text,
)
from roofwise.lint.judgments import (
    busiest_vector_unit,
    contraction_units,
    decompositions,
    dtype_followers,
    expected_roof,
    misread,
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
from roofwise.pricing.core import (
    SECOND_PIPE_SHARE,
    LedgerPrice,
    cycles_by_unit,
    missing_units,
    price_ledger,
)
from roofwise.profiles.machine import Machine


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
    if machine is None or price is None or not price.sol_time_s > 0:
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
                               SPARSE_FIX))
            continue
        time_s = price.unit_time_s.get(key, 0.0)
        if (not unit.calibrated and unit.theoretical_ops_per_s is not None and time_s > 0
                and time_s >= DATASHEET_MARGIN * price.sol_time_s):
            out.append(Finding(
                "M1", WARNING, case.where,
                f"{key} on {machine.name} is the datasheet rate "
                f"{fmt.tera_rate(unit.theoretical_ops_per_s, unit.key)} (uncalibrated); its time "
                f"{fmt.seconds(time_s)} is {time_s / price.sol_time_s:.0%} of SOL "
                f"{fmt.seconds(price.sol_time_s)}", uncalibrated_unit_fix(key)))
    level = machine.dram
    if (level.theoretical_bytes_per_s is not None and not level.calibration_by_mix
            and price.memory_time_s >= DATASHEET_MARGIN * price.sol_time_s):
        out.append(Finding(
            "M1", WARNING, case.where,
            f"{machine.name} {level.name} {level.theoretical_bytes_per_s / 1e9:.0f} GB/s is the "
            f"datasheet figure (no measured mix); memory time {fmt.seconds(price.memory_time_s)}"
            f" is {price.memory_time_s / price.sol_time_s:.0%} of SOL",
            uncalibrated_memory_fix(level.name)))
    return out


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
    """A matrix roof on an op that contracts nothing (by its own work, or by the reference)."""
    ledger, ref = case.ledger, case.reference
    if not is_matrix_unit(ledger.roof):
        return []
    if ref is not None and ref.flops > 0 and not contraction_units(ref):
        right = busiest_vector_unit(ref)
        why = f"reference {ref.name} has no contraction in its {ops_text(ref.flops)} ops"
    elif not contraction_units(ledger):
        right = busiest_vector_unit(ledger)
        why = f"none of its {ops_text(ledger.flops)} ops is a contraction"
    else:
        return []
    return [Finding(
        "M2", ERROR, case.where,
        f"roof {ledger.roof} but {why}{_balance_note(case.machine, ledger.roof, right)}",
        f"declare the roof the unit that does the work: {right}")]


def check_ledger_m3(case: LedgerCase) -> list[Finding]:
    """A roof (or contraction) that follows an input dtype where the algorithm runs elsewhere.

    The reference, when given, says where the algorithm runs; without one the ledger's own
    work does (so a ledger whose work was rewritten along with its roof needs a reference).
    """
    ledger, ref = case.ledger, case.reference
    own = contraction_units(ledger)
    call, source = None, "its"
    if ref is not None:
        call, source = expected_roof(ledger.roof, own, ref), f"reference {ref.name}'s"
    if call is None:
        call, source = expected_roof(ledger.roof, own, ledger), "its"
    if call is None:
        return []
    followers = dtype_followers(ledger, ledger.roof)
    follows = f" follows input(s) {', '.join(followers)}" if followers else ""
    counted = (f" (contraction counted on {', '.join(own)})"
               if source != "its" and own and set(own) != {call.runs_on} else "")
    return [Finding(
        "M3", ERROR, case.where,
        f"roof {ledger.roof}{follows}{counted}, but {source} {call.what} "
        f"({ops_text(call.ops)} ops) runs on {call.runs_on}"
        f"{_balance_note(case.machine, ledger.roof, call.runs_on)}",
        f"declare the roof (and count the {call.what}) on the unit the algorithm uses: "
        f"{call.runs_on}")]


def check_ledger_m4(case: LedgerCase) -> list[Finding]:
    """A composed ledger priced with part of its stages, or with the wrong number of calls."""
    ledger = case.ledger
    fused, readings = decompositions(ledger)
    if fused is None:
        return []
    fused_ai = f"fused AI {intensity_text(fused.flops, fused.bytes)}"
    if ledger.calls == 1:
        r = misread(ledger.bytes, ledger.flops, misreadings(fused, readings, fused.bytes))
        if r is not None and r.calls > 1:
            return [Finding(
                "M4", ERROR, case.where,
                f"one call priced with {r.label} {nbytes_text(r.bytes)} (AI "
                f"{ledger.intensity_flops_per_byte:.2f}); fused its stages move "
                f"{nbytes_text(fused.bytes)} ({fused_ai})",
                "fuse the stages (roofwise.ledgers.ledger.fuse): intermediates of one call cost "
                "nothing")]
        if r is not None:
            return [_stage_finding(case, fused, f"bytes and FLOPs are {r.label}", fused_ai)]
    else:
        splits = [r for r in readings if r.calls > 1 and r.bytes != fused.bytes]
        if ledger.bytes == fused.bytes and splits:
            return [Finding(
                "M4", ERROR, case.where,
                f"{ledger.calls} calls priced with the fused one-call bytes "
                f"{nbytes_text(ledger.bytes)}; run as calls they move more (e.g. "
                f"{splits[-1].label} {nbytes_text(splits[-1].bytes)})",
                "compose separate calls with roofwise.ledgers.ledger.separate: each pays its "
                "intermediates")]
    names = {t.name for t in ledger.tensors}
    fused_names = {t.name for t in fused.tensors}
    for stage in ledger.stages:
        if names == {t.name for t in stage.tensors} != fused_names:
            return [_stage_finding(case, fused, f"tensors are stage {stage.name}'s", fused_ai)]
    return []


def _stage_finding(case: LedgerCase, fused: Ledger, what: str, fused_ai: str) -> Finding:
    ledger = case.ledger
    return Finding(
        "M4", ERROR, case.where,
        f"{what} ({nbytes_text(ledger.bytes)}, AI {ledger.intensity_flops_per_byte:.2f}); the "
        f"composed call moves {nbytes_text(fused.bytes)} for {ops_text(fused.flops)} FLOPs "
        f"({fused_ai})", "price the composed call from all its stages (fuse or separate), "
                         "not part of them")


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
    units = {k: machine.unit(k) for k in ops_by_unit}  # a declared unit, placed by class
    if any(u is None for u in units.values()):
        return None
    rates = {k: u.effective_ops_per_s() for k, u in units.items() if u is not None}
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
            f"{ops_text(ops)} transcendental ops on {', '.join(units)} are charged like a "
            f"multiply though {machine.name} has {sfu}{slower}",
            f"count transcendentals on {sfu} (Work unit={sfu!r}, class='transcendental')"))
        return out
    positive = {k: v for k, v in ledger.ops_by_unit.items() if v > 0}
    costs = _pipe_costs(positive, machine)
    if costs is None or len(costs[0]) < 2:
        return out
    per_pipe, unit = costs
    binding = max(per_pipe, key=lambda k: per_pipe[k])
    near = sorted((k for k, v in per_pipe.items() if v >= SECOND_PIPE_SHARE * per_pipe[binding]),
                  key=lambda k: -per_pipe[k])
    sfus = [k for k in near if is_sfu_unit(k)]
    if not sfus:
        return out
    serial = sum(per_pipe.values())
    if is_sfu_unit(binding):
        others = {k: v for k, v in per_pipe.items() if k != binding}
        runner = max(others, key=lambda k: others[k])
        reason = (f"{binding} binds: {ops_text(positive[binding])} transcendentals take "
                  f"{_cost(per_pipe[binding], unit)} against {_cost(others[runner], unit)} on "
                  f"{runner} (serial issue {_cost(serial, unit)})")
        fix = f"judge this op against {binding}, per pipe; cut or approximate the transcendentals"
    else:
        named = ", ".join(f"{k} {_cost(per_pipe[k], unit)}"
                          + (" (binding)" if k == binding
                             else f" ({per_pipe[k] / per_pipe[binding]:.0%})") for k in near)
        reason = (f"{', '.join(sfus)} takes >= 50% of the binding pipe's time: {named}; the "
                  f"call runs between the overlapped bound {_cost(per_pipe[binding], unit)} "
                  f"and the serial sum {_cost(serial, unit)}")
        fix = ("judge this op per pipe, against the band between the overlapped bound and the "
               "serial sum; cut or approximate the transcendentals")
    out.append(Finding("M5", WARNING, case.where, reason, fix))
    return out


def _base(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def _unmatched_reads(ledger: Ledger, ref: Ledger) -> list[str]:
    """The reference's read tensors the ledger has neither by name nor by size (a hint)."""
    names = {_base(t.name) for t in ledger.tensors}
    ref_names = {_base(t.name) for t in ref.tensors}
    renamed = [t.read_bytes for t in ledger.tensors
               if t.read_bytes > 0 and _base(t.name) not in ref_names]
    out = []
    for t in ref.tensors:
        if t.read_bytes <= 0 or _base(t.name) in names:
            continue
        if t.read_bytes in renamed:
            renamed.remove(t.read_bytes)
        else:
            out.append(t.name)
    return out


def check_ledger_m6(case: LedgerCase) -> list[Finding]:
    """Fewer read bytes, or fewer lookup bytes, than the reference: a tensor left out.

    Decided on bytes, not names: a ledger may name its tensors as it likes. Names of the
    reference's read tensors it does not carry are only a hint in the reason.
    """
    ledger, ref = case.ledger, case.reference
    if ref is None:
        return []
    problems: list[str] = []
    if ledger.read_bytes < ref.read_bytes:
        short = ref.read_bytes - ledger.read_bytes
        exactly = " (exactly its lookups)" if short == ref.lookup_bytes else ""
        problems.append(f"reads {nbytes_text(ledger.read_bytes)} (of {nbytes_text(ledger.bytes)})"
                        f", {nbytes_text(short)} below the reference {ref.name}'s "
                        f"{nbytes_text(ref.read_bytes)}{exactly}")
    if ledger.lookup_bytes < ref.lookup_bytes:
        lookups = sum(t.role is Role.LOOKUP for t in ref.tensors)
        problems.append(f"lookups {nbytes_text(ledger.lookup_bytes)} where the reference reads "
                        f"{nbytes_text(ref.lookup_bytes)} in {lookups} lookup tensor(s)")
    if not problems:
        return []
    unmatched = _unmatched_reads(ledger, ref)
    hint = f"; not found here by name or size: {', '.join(unmatched)}" if unmatched else ""
    return [Finding("M6", ERROR, case.where, "; ".join(problems) + hint,
                    "count every tensor the operator reads, lookups (weights, tables, scales) "
                    "included")]


def check_ledger_m7(case: LedgerCase) -> list[Finding]:
    """A ledger whose SOL is below even the cheapest floor (a profiler's kernel time): no
    timing method can read it on the roofline. Names every method's floor it sits under."""
    machine, price = case.machine, case.price
    if machine is None or price is None or not math.isfinite(price.sol_time_s):
        return []
    floors = machine.latency_floors.by_timing
    under = [t for t, f in floors.items() if price.sol_time_s < f.per_call_s]
    if "kernel" not in under:
        return []
    assumed = ", assumed" if machine.latency_floors.assumed else ""
    shown = ", ".join(f"{t} {fmt.seconds(floors[t].per_call_s)}" for t in under)
    return [Finding(
        "M7", WARNING, case.where,
        f"SOL {fmt.seconds(price.sol_time_s)} is below the one-kernel latency floor of every "
        f"timing method on {machine.name} ({shown}{assumed}): a time up to twice its "
        "method's floor reads latency_bound, a longer one is that floor plus the rest, "
        "and efficiency says nothing about the kernel",
        "judge launches and grid fill at this shape (batch, fuse, graphs), not efficiency")]


def check_ledger_r1(case: LedgerCase) -> list[Finding]:
    """A roof or work unit the machine does not have (a stage's included): a typo, or the
    wrong profile. Each is reported where the ledger names it."""
    ledger, machine = case.ledger, case.machine
    if machine is None:
        return []
    found = missing_units(ledger, machine)
    if not found:
        return []
    units = list(dict.fromkeys(unit for unit, _ in found))
    in_stage = next((where for _, where in found if where.startswith("stages[")), None)
    where = case.where if in_stage is None else f"{case.where}: {in_stage}"
    return [Finding("R1", ERROR, where, units_missing_reason(machine, units),
                    UNIT_NOT_ON_MACHINE_FIX)]


LedgerCheck = Callable[[LedgerCase], list[Finding]]
LEDGER_CHECKS: Mapping[str, LedgerCheck] = {
    "M1": check_ledger_m1, "M2": check_ledger_m2, "M3": check_ledger_m3,
    "M4": check_ledger_m4, "M5": check_ledger_m5, "M6": check_ledger_m6,
    "M7": check_ledger_m7, "R1": check_ledger_r1,
}


def lint_ledger(ledger: Ledger, machine: Machine | None, reference: Ledger | None = None,
                where: str | None = None) -> list[Finding]:
    """Every ledger check; those that need prices are skipped when `machine` is None."""
    price = price_ledger(ledger, machine) if machine is not None else None
    case = LedgerCase(ledger, machine, price, reference, where or f"ledger {ledger.name}")
    return [f for check in LEDGER_CHECKS.values() for f in check(case)]
