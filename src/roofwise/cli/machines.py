"""`roofwise machines` and `roofwise machine NAME`: what a profile says, and where it came from."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from ..machine import Machine
from ..report import fmt
from .common import all_machines, console, echo_json, machine_arg


@click.command("machines")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per machine.")
def machines_command(as_json: bool) -> None:
    """List the built-in machine profiles."""
    machines = all_machines()
    if as_json:
        for m in machines.values():
            echo_json(machine_summary(m))
        return
    table = Table(title="Built-in machine profiles", title_justify="left")
    for col in ("name", "device", "DRAM effective", "units", "calibrated", "latency floor"):
        table.add_column(col)
    for m in machines.values():
        calibrated = [u.key for u in m.units.values() if u.calibrated]
        table.add_row(
            m.name, m.display_name, fmt.rate(m.dram.effective_bytes_per_s() or float("nan"),
                                             "B/s"),
            str(len(m.units)), f"{len(calibrated)}/{len(m.units)}",
            "assumed" if m.latency_floor.assumed else fmt.seconds(m.latency_floor.sol_s))
    console().print(table)


@click.command("machine")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="The profile as one JSON object.")
def machine_command(name: str, as_json: bool) -> None:
    """Show one profile: every ceiling, regime, mix, balance point and source."""
    m = machine_arg(name)
    if as_json:
        echo_json(machine_summary(m))
        return
    out = console()
    out.print(f"[bold]{m.display_name}[/] ({m.name})  source: {m.source or '—'}")
    mem = Table(title="Memory", title_justify="left")
    for col in ("level", "theoretical", "mix", "calibration", "effective", "source"):
        mem.add_column(col)
    for level in m.memory.values():
        theory = level.theoretical_bytes_per_s
        mixes: dict[str, float | None] = dict(level.calibration_by_mix) or {
            "(uncalibrated)" if theory else "—": None}
        for i, (mix, frac) in enumerate(mixes.items()):
            envelope = " (envelope)" if mix == level.envelope_mix else ""
            mem.add_row(level.name if i == 0 else "",
                        fmt.rate(theory, "B/s") if theory else
                        (f"gap ({level.bytes_per_cycle:g} B/cycle)" if level.bytes_per_cycle
                         else "gap"),
                        mix + envelope, "—" if frac is None else f"{frac:.4f}",
                        fmt.rate(theory * (frac or 1.0), "B/s") if theory else "—",
                        level.source if i == 0 else "")
    out.print(mem)
    units = Table(title="Compute units", title_justify="left")
    for col in ("unit", "theoretical", "regime", "calibration", "effective", "balance",
                "source"):
        units.add_column(col)
    for unit in m.units.values():
        theory_ops = unit.theoretical_ops_per_s
        regimes: dict[str, float | None] = dict(unit.calibration_by_regime) or {
            "(uncalibrated)" if theory_ops else "—": None}
        for i, (regime, fraction) in enumerate(regimes.items()):
            balance = m.balance_flops_per_byte(unit.key, regime if unit.calibrated else None)
            envelope = " (envelope)" if regime == unit.envelope_regime else ""
            units.add_row(
                unit.key if i == 0 else "",
                fmt.rate(theory_ops, "op/s") if theory_ops else
                (f"gap ({unit.ops_per_cycle:g} op/cycle)" if unit.ops_per_cycle else "gap"),
                regime + envelope, "—" if fraction is None else f"{fraction:.4f}",
                fmt.rate(theory_ops * (fraction or 1.0), "op/s") if theory_ops else "—",
                f"{balance:.2f} FLOP/B" if balance else "—",
                unit.source if i == 0 else "")
    out.print(units)
    floor = m.latency_floor
    out.print(f"Latency floor: SOL < {fmt.seconds(floor.sol_s)}, measured < "
              f"{fmt.seconds(floor.measured_s)}  ({floor.source})")
    for note in m.notes:
        out.print(f"note: {note}")


def machine_summary(m: Machine) -> dict[str, Any]:
    return {
        "name": m.name, "display_name": m.display_name, "aliases": list(m.aliases),
        "source": m.source, "path": m.path,
        "memory": {level.name: {
            "theoretical_bytes_per_s": level.theoretical_bytes_per_s,
            "calibration_by_mix": dict(level.calibration_by_mix),
            "envelope_mix": level.envelope_mix,
            "effective_bytes_per_s": level.effective_bytes_per_s(),
            "bytes_per_cycle": level.bytes_per_cycle, "source": level.source}
            for level in m.memory.values()},
        "units": {u.key: {
            "theoretical_ops_per_s": u.theoretical_ops_per_s,
            "calibration_by_regime": dict(u.calibration_by_regime),
            "envelope_regime": u.envelope_regime,
            "effective_ops_per_s": u.effective_ops_per_s(),
            "balance_flops_per_byte": m.balance_flops_per_byte(u.key),
            "ops_per_cycle": u.ops_per_cycle, "source": u.source}
            for u in m.units.values()},
        "latency_floor": {"sol_s": m.latency_floor.sol_s,
                          "measured_s": m.latency_floor.measured_s,
                          "assumed": m.latency_floor.assumed,
                          "source": m.latency_floor.source},
        "notes": list(m.notes),
    }
