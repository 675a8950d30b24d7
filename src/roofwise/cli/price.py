"""`roofwise price LEDGER.yaml|OP --machine NAME`: what one call must cost, stage by stage.

The target is a ledger file when it ends in .yaml/.yml or names an existing file; otherwise
it is a library operator (`roofwise ops` lists them) priced at the `--shape key=value`s given.
"""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from roofwise.base import fmt, paths
from roofwise.base.errors import InputError
from roofwise.cli.common import (
    console,
    echo_json,
    machine_arg,
    machine_option,
    note,
    regime_mix_options,
)
from roofwise.ledgers.files import load_ledger
from roofwise.ledgers.ledger import Ledger
from roofwise.ops import build_op, parse_shape_args
from roofwise.pricing.core import (
    LedgerPrice,
    missing_units,
    moved_work,
    placed,
    price_ledger,
    price_ledger_cycles,
    rate_gaps,
)
from roofwise.profiles.machine import Machine
from roofwise.render.layout import Column, Fitted, fit_table


@click.command("price")
@click.argument("target", metavar="LEDGER.yaml|OP")
@machine_option(required=True)
@click.option("--shape", "shapes", multiple=True, metavar="KEY=VALUE[,KEY=VALUE...]",
              help="An operator parameter (repeatable; see `roofwise ops`), "
                   "e.g. --shape m=4096,n=4096,k=4096 --shape dtype=bf16.")
@regime_mix_options
@click.option("--json", "as_json", is_flag=True, help="The price as one JSON object.")
def price_command(target: str, machine_name: str, shapes: tuple[str, ...], regime: str | None,
                  mix: str | None, as_json: bool) -> None:
    """Price a ledger file or a library operator: bytes by tensor, work by unit and class,
    times, bound, per stage."""
    machine = machine_arg(machine_name)
    ledger = target_ledger(target, shapes)
    render_price(ledger, machine, regime, mix, as_json, "" if ledger_is_op(target) else target)


def ledger_is_op(target: str) -> bool:
    return not (target.lower().endswith((".yaml", ".yml")) or paths.is_file(target))


def target_ledger(target: str, shapes: tuple[str, ...] = ()) -> Ledger:
    """A ledger file (.yaml/.yml or an existing path) or an operator priced at `shapes`."""
    if not ledger_is_op(target):
        if shapes:
            raise InputError("--shape", f"applies to operators, not to the ledger file {target}")
        return load_ledger(target)
    return build_op(target, parse_shape_args(shapes))


def render_price(ledger: Ledger, machine: Machine, regime: str | None, mix: str | None,
                 as_json: bool, origin: str = "") -> None:
    """`origin` names the ledger file, so that a unit the machine lacks is blamed on the line
    of the ledger that names it rather than on --machine."""
    missing = missing_units(ledger, machine)
    if missing:
        unit, where = missing[0]
        raise InputError(f"{origin or ledger.name}: {where}",
                         f"unit {unit} is not on machine {machine.name} (it has "
                         f"{', '.join(machine.units)}); declare a unit the profile has, or "
                         "use a profile that has it")
    moved = moved_work(ledger, machine)
    ledger = placed(ledger, machine)
    for declared, here in moved.items():
        note(f"roofwise: work declared on {declared} runs on {here} on {machine.name} "
             "(the profile's pipes_by_class)")
    gaps = rate_gaps(ledger, machine)
    if gaps:
        render_cycles(ledger, machine, as_json, gaps)
        return
    total = price_ledger(ledger, machine, regime, mix)
    stages = [price_ledger(s, machine, regime, mix) for s in ledger.stages]
    if as_json:
        echo_json({**price_summary(total), "stages": [price_summary(s) for s in stages]})
        return
    out = console()
    width = out.width
    out.print(f"[bold]{escape(ledger.name)}[/] on {escape(machine.display_name)}: "
              f"{ledger.calls} call(s), roof {escape(ledger.roof)}")
    tensor_rows = [[t.name, t.role.value + (f" ({t.uses} uses)" if t.uses else ""),
                    "x".join(map(str, t.shape)), t.dtype, fmt.nbytes(t.read_bytes),
                    fmt.nbytes(t.write_bytes)] for t in ledger.tensors]
    tensor_rows.append(["total", "", "", "", fmt.nbytes(ledger.read_bytes),
                        fmt.nbytes(ledger.write_bytes)])
    _print_fitted(out, fit_table(TENSOR_COLUMNS, tensor_rows, width, "Bytes by tensor"))
    work_rows = [[w.unit, w.op_class, fmt.count(w.ops, fmt.op_name(w.unit)), w.label]
                 for w in ledger.work]
    _print_fitted(out, fit_table(WORK_COLUMNS, work_rows, width, "Work by unit and class"))
    price_rows = [[p.ledger.name if p is not total else "total", fmt.nbytes(p.ledger.bytes),
                   fmt.count(p.ledger.flops), fmt.intensity(p.intensity_flops_per_byte),
                   fmt.seconds(p.memory_time_s), fmt.seconds(p.compute_time_s),
                   fmt.seconds(p.compute_serial_time_s), fmt.seconds(p.sol_time_s),
                   _bound_on(p)]
                  for p in [*stages, total]]
    _print_fitted(out, fit_table(PRICE_COLUMNS, price_rows, width, "Price"))
    for line in price_basis(total, machine):
        out.print(escape(line))


# Columns of `price`, designed for 80 characters: numbers and names never wrap, labels do.
TENSOR_COLUMNS = (Column("tensor"), Column("role"), Column("shape"), Column("dtype"),
                  Column("read", "right"), Column("write", "right"))
WORK_COLUMNS = (Column("unit"), Column("class"), Column("ops", "right"),
                Column("label", wrap=True))
PRICE_COLUMNS = (Column("call"), Column("bytes", "right"), Column("FLOPs", "right", drop=3),
                 Column("AI", "right", drop=2), Column("memory", "right"),
                 Column("compute", "right"), Column("serial", "right", drop=4),
                 Column("SOL", "right"), Column("bound by"))


def _print_fitted(out: Console, fitted: Fitted) -> None:
    out.print(fitted.table)
    if fitted.note():
        out.print(f"[dim]{escape(fitted.note() or '')}[/]")


def price_basis(total: LedgerPrice, machine: Machine) -> list[str]:
    """What the price was read at, in words: the memory rate and mix, and the compute regime
    and rate of the pipe that binds; the columns' meanings."""
    regime = total.regime or "envelope"
    unit = machine.units.get(total.binding_unit)
    if unit is not None and unit.calibrated:
        chosen = (unit.envelope_regime if total.regime is None
                  or total.regime not in unit.calibration_by_regime else total.regime)
        regime_text = f"{regime} regime ({chosen}, {unit.calibration(chosen):.4f} of theoretical)"
    else:
        regime_text = f"{regime} regime (uncalibrated: the datasheet rate)"
    rate = unit.effective_ops_per_s(total.regime) if unit is not None else None
    return [f"memory: {fmt.rate(total.bandwidth_bytes_per_s, 'B/s', 2)} "
            f"({machine.dram.name}, {total.mix} mix)",
            f"compute: {total.binding_unit or 'no work'} at "
            f"{fmt.unit_rate(rate, total.binding_unit)}, {regime_text}",
            "compute = the slowest pipe (pipes overlap); serial = pipes one after another; "
            "AI in FLOP/byte"]


def render_cycles(ledger: Ledger, machine: Machine, as_json: bool, gaps: list[str]) -> None:
    """A profile whose rates are gaps (no clock) prices per pipe in cycles; seconds would be a
    guess. Without ops/cycle either, there is nothing honest to print."""
    if any(machine.units[u].ops_per_cycle is None for u, ops in ledger.ops_by_unit.items()
           if ops > 0):
        raise InputError(f"--machine {machine.name}",
                         f"cannot price {ledger.name}: the profile has gaps for "
                         f"{', '.join(gaps)} and no ops/cycle to price per pipe instead")
    price = price_ledger_cycles(ledger, machine)
    if as_json:
        echo_json({"op": ledger.name, "machine": machine.name, "priced_in": "cycles",
                   "bytes": ledger.bytes, "read_bytes": ledger.read_bytes,
                   "write_bytes": ledger.write_bytes, "ops_by_unit": ledger.ops_by_unit,
                   "cycles_by_unit": dict(price.cycles_by_unit),
                   "compute_cycles": price.compute_cycles,
                   "compute_serial_cycles": price.compute_serial_cycles,
                   "binding_unit": price.binding_unit, "memory_cycles": price.memory_cycles,
                   "memory_level": price.memory_level, "gaps": gaps})
        return
    out = console()
    out.print(f"[bold]{escape(ledger.name)}[/] on {escape(machine.display_name)}: priced in "
              "cycles per pipe; no time in seconds, because the profile leaves gaps for "
              f"{escape(', '.join(gaps))}")
    table = Table(title="Cycles by pipe", title_justify="left")
    for col in ("unit", "ops", "ops/cycle", "cycles"):
        table.add_column(col, justify="left" if col == "unit" else "right")
    for unit, cycles in price.cycles_by_unit.items():
        table.add_row(escape(unit), fmt.count(ledger.ops_by_unit[unit], fmt.op_name(unit)),
                      f"{machine.units[unit].ops_per_cycle:g}", f"{cycles:,.1f}")
    out.print(table)
    out.print(f"pipes overlapped: {price.compute_cycles:,.1f} cycles ({price.binding_unit} "
              f"binds); issued one after another: {price.compute_serial_cycles:,.1f} cycles",
              markup=False)
    if price.memory_cycles is not None:
        out.print(f"reads: {price.memory_cycles:,.1f} cycles at {machine.dram.bytes_per_cycle:g} "
                  f"B/cycle ({price.memory_level})", markup=False)


def _bound_on(p: LedgerPrice) -> str:
    return f"{p.machine.dram.name} {p.mix}" if p.bound == "memory" else p.binding_unit


def price_summary(p: LedgerPrice) -> dict[str, Any]:
    ledger = p.ledger
    return {
        "op": ledger.name, "machine": p.machine.name, "calls": ledger.calls, "roof": ledger.roof,
        "bytes": ledger.bytes, "read_bytes": ledger.read_bytes,
        "write_bytes": ledger.write_bytes, "lookup_bytes": ledger.lookup_bytes,
        "bytes_by_tensor": {t.name: {"read": t.read_bytes, "write": t.write_bytes}
                            for t in ledger.tensors},
        "flops": ledger.flops, "ops_by_unit": ledger.ops_by_unit,
        "ops_by_class": ledger.ops_by_class,
        "intensity_flops_per_byte": p.intensity_flops_per_byte,
        "memory_time_s": p.memory_time_s, "compute_time_s": p.compute_time_s,
        "compute_serial_time_s": p.compute_serial_time_s, "unit_time_s": dict(p.unit_time_s),
        "sol_time_s": p.sol_time_s, "bound": p.bound, "binding_unit": p.binding_unit,
        "bandwidth_bytes_per_s": p.bandwidth_bytes_per_s, "mix": p.mix,
        "regime": p.regime or "envelope",
    }
