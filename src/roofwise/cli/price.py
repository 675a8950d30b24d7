"""`roofwise price LEDGER.yaml|OP --machine NAME`: what one call must cost, stage by stage.

The target is a ledger file when it ends in .yaml/.yml or names an existing file; otherwise
it is a library operator (`roofwise ops` lists them) priced at the `--shape key=value`s given.
"""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from .. import paths
from ..errors import InputError
from ..ledger import Ledger
from ..ledgerio import load_ledger
from ..machine import Machine
from ..ops import build_op, parse_shape_args
from ..pricing import (
    LedgerPrice,
    missing_units,
    moved_work,
    placed,
    price_ledger,
    price_ledger_cycles,
    rate_gaps,
)
from ..report import fmt
from .common import console, echo_json, machine_arg, machine_option, note, regime_mix_options


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
    out.print(f"[bold]{ledger.name}[/] on {machine.display_name}: {ledger.calls} call(s), "
              f"roof {ledger.roof}")
    tensors = Table(title="Bytes by tensor", title_justify="left")
    for col in ("tensor", "role", "shape", "dtype", "read", "write"):
        tensors.add_column(col, justify="right" if col in ("read", "write") else "left")
    for t in ledger.tensors:
        per_use = f" ({t.uses} uses)" if t.uses else ""
        tensors.add_row(t.name, t.role.value + per_use, "x".join(map(str, t.shape)), t.dtype,
                        fmt.nbytes(t.read_bytes), fmt.nbytes(t.write_bytes))
    tensors.add_row("[bold]total", "", "", "", fmt.nbytes(ledger.read_bytes),
                    fmt.nbytes(ledger.write_bytes))
    out.print(tensors)
    work = Table(title="Work by unit and class", title_justify="left")
    for col in ("unit", "class", "ops", "label"):
        work.add_column(col)
    for w in ledger.work:
        work.add_row(w.unit, w.op_class, fmt.count(w.ops, "op"), w.label)
    out.print(work)
    times = Table(title="Price", title_justify="left")
    for col in ("call", "bytes", "FLOPs", "AI (FLOP/B)", "memory", "compute (max pipe)",
                "serial pipes", "SOL", "bound"):
        times.add_column(col, justify="left" if col == "call" else "right")
    for p in [*stages, total]:
        name = p.ledger.name if p is not total else f"[bold]{p.ledger.name} (total)"
        times.add_row(name, fmt.nbytes(p.ledger.bytes), fmt.count(p.ledger.flops),
                      fmt.intensity(p.intensity_flops_per_byte), fmt.seconds(p.memory_time_s),
                      fmt.seconds(p.compute_time_s), fmt.seconds(p.compute_serial_time_s),
                      fmt.seconds(p.sol_time_s), f"{p.bound} ({_bound_on(p)})")
    out.print(times)
    out.print(f"memory priced at {fmt.rate(total.bandwidth_bytes_per_s, 'B/s')} "
              f"({machine.dram.name}, {total.mix} mix); compute at the "
              f"{regime or 'envelope'} regime")


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
    out.print(f"[bold]{ledger.name}[/] on {machine.display_name}: priced in cycles per pipe; "
              f"no time in seconds, because the profile leaves gaps for {', '.join(gaps)}",
              markup=True)
    table = Table(title="Cycles by pipe", title_justify="left")
    for col in ("unit", "ops", "ops/cycle", "cycles"):
        table.add_column(col, justify="left" if col == "unit" else "right")
    for unit, cycles in price.cycles_by_unit.items():
        table.add_row(unit, fmt.count(ledger.ops_by_unit[unit], "op"),
                      f"{machine.units[unit].ops_per_cycle:g}", f"{cycles:,.1f}")
    out.print(table)
    out.print(f"pipes overlapped: {price.compute_cycles:,.1f} cycles ({price.binding_unit} "
              f"binds); issued one after another: {price.compute_serial_cycles:,.1f} cycles")
    if price.memory_cycles is not None:
        out.print(f"reads: {price.memory_cycles:,.1f} cycles at {machine.dram.bytes_per_cycle:g} "
                  f"B/cycle ({price.memory_level})")


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
