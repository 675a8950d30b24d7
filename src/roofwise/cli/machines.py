"""`roofwise machines` and `roofwise machine NAME`: what a profile says, and where it came from."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from roofwise.base import fmt
from roofwise.cli.common import all_machines, console, echo_json, machine_arg, print_hanging
from roofwise.explain.reason_text import floor_line
from roofwise.profiles.machine import Machine
from roofwise.render.layout import Column, Fitted, fit_table


@click.command("machines")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per machine.")
def machines_command(as_json: bool) -> None:
    """List the built-in machine profiles."""
    machines = all_machines()
    if as_json:
        for m in machines.values():
            echo_json(machine_summary(m))
        return
    out = console()
    rows = [[m.name, m.display_name, fmt.rate(m.dram.effective_bytes_per_s(), "B/s"),
             str(len(m.units)),
             f"{sum(u.calibrated for u in m.units.values())}/{len(m.units)}",
             "assumed" if m.latency_floors.assumed else
             fmt.seconds(m.latency_floors.floor_s("events"), significant=3) + " events",
             m.source] for m in machines.values()]
    print_fitted(out, fit_table(MACHINES_COLUMNS, rows, out.width, "Built-in machine profiles"))


MACHINES_COLUMNS = (Column("name"), Column("device", wrap=True, min_width=14),
                    Column("DRAM", "right"), Column("units", "right", drop=2),
                    Column("calibrated", "right"), Column("latency floor", drop=1),
                    Column("source", wrap=True, min_width=20))
MEMORY_COLUMNS = (Column("level"), Column("theoretical", "right"), Column("mix"),
                  Column("fraction", "right", drop=2), Column("effective", "right"),
                  Column("source", wrap=True, drop=3, min_width=24))
UNIT_COLUMNS = (Column("unit"), Column("theoretical", "right"), Column("regime"),
                Column("fraction", "right", drop=2), Column("effective", "right"),
                Column("balance", "right", drop=1), Column("source", wrap=True, drop=3,
                                                          min_width=24))
ENVELOPE_MARK = "*"
LEGEND = ("* the envelope: the highest measured mix or regime, the default for pricing; "
          "— uncalibrated: the datasheet rate is used")


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
    out.print(f"[bold]{escape(m.display_name)}[/] ({escape(m.name)})")
    print_hanging(out, f"source: {m.source or '—'}")
    sources: list[tuple[str, str]] = []
    mem_rows = []
    for level in m.memory.values():
        theory = level.theoretical_bytes_per_s
        mixes: dict[str, float | None] = dict(level.calibration_by_mix) or {"—": None}
        for i, (mix, frac) in enumerate(mixes.items()):
            mark = ENVELOPE_MARK if mix == level.envelope_mix else ""
            size = (f" ({fmt.nbytes(level.capacity_bytes)})"
                    if level.capacity_bytes is not None else "")
            measured = level.measured_bytes_per_s
            mem_rows.append([
                level.name + size if i == 0 else "",
                fmt.rate(theory, "B/s") if theory else
                (f"gap ({level.bytes_per_cycle:g} B/cycle)" if level.bytes_per_cycle else "gap"),
                mix + mark, "—" if frac is None else f"{frac:.4f}",
                fmt.rate(theory * (frac or 1.0), "B/s") if theory else (
                    f"{fmt.rate(measured, 'B/s')} measured" if measured else "—"),
                _sourced(level.source, level.choice) if i == 0 else ""])
        sources.append((level.name, _sourced(level.source, level.choice)))
    unit_rows = []
    for unit in m.units.values():
        theory_ops = unit.theoretical_ops_per_s
        regimes: dict[str, float | None] = dict(unit.calibration_by_regime) or {"—": None}
        for i, (regime, fraction) in enumerate(regimes.items()):
            balance = m.balance_flops_per_byte(unit.key, regime if unit.calibrated else None)
            mark = ENVELOPE_MARK if regime == unit.envelope_regime else ""
            unit_rows.append([
                unit.key if i == 0 else "",
                fmt.unit_rate(theory_ops, unit.key) if theory_ops else
                (f"gap ({unit.ops_per_cycle:g} {fmt.op_name(unit.key)}/cycle)"
                 if unit.ops_per_cycle else "gap"),
                regime + mark, "—" if fraction is None else f"{fraction:.4f}",
                fmt.unit_rate(theory_ops * (fraction or 1.0), unit.key) if theory_ops else "—",
                f"{balance:.2f} {fmt.op_name(unit.key)}/B" if balance else "—",
                _sourced(unit.source, unit.choice) if i == 0 else ""])
        sources.append((unit.key, _sourced(unit.source, unit.choice)))
    units = fit_table(UNIT_COLUMNS, unit_rows, out.width, "Compute units")
    memory = fit_table(MEMORY_COLUMNS, mem_rows, out.width, "Memory")
    if "source" in units.dropped and "source" not in memory.dropped:
        # one place for every source: listed beneath, not some in a column and all again below
        memory = fit_table(MEMORY_COLUMNS[:-1], [r[:-1] for r in mem_rows], out.width, "Memory")
        memory = Fitted(memory.table, (*memory.dropped, "source"))
    dropped = print_fitted(out, memory, quiet={"source"})
    dropped |= print_fitted(out, units, quiet={"source"})
    out.print(f"[dim]{LEGEND}[/]")
    if "source" in dropped:
        out.print("[bold]Sources[/]")
        listed = sources if "source" in units.dropped else sources[:len(m.memory)]
        for key, text in listed:
            print_hanging(out, f"  {key}: {text}", indent="    ")
    out.print("Latency floors per timing method (a call of k kernels pays per call + (k - 1) "
              "x per kernel):")
    for timing, floor in m.latency_floors.by_timing.items():
        out.print("  " + escape(floor_line(timing, floor.per_call_s, floor.per_kernel_s,
                                           floor.assumed, floor.source)))
    link = m.interconnect
    if link is not None:
        out.print(escape(f"Interconnect {link.name}: {fmt.rate(link.bytes_per_s, 'B/s')} per "
                         f"GPU, both directions ({link.source})"))
        out.print(escape(f"  hop latency {fmt.seconds(link.hop_latency_s)}"
                         + (" assumed" if link.hop_latency_assumed else "")
                         + f" ({link.hop_latency_source})"))
    if m.pipes_by_class:
        out.print(escape("Work by class runs on: " + ", ".join(
            f"{cls} -> {unit}" for cls, unit in m.pipes_by_class.items())))
    for note_text in m.notes:
        out.print(f"note: {escape(note_text)}")


def _sourced(source: str, choice: str) -> str:
    return f"{source}; figure taken: {choice}" if choice else source


def print_fitted(out: Console, fitted: Fitted, quiet: set[str] | frozenset[str] = frozenset()
                 ) -> set[str]:
    """Print a fitted table and, unless every dropped column is `quiet` (shown elsewhere),
    the line naming what was left out. Returns the dropped headers."""
    out.print(fitted.table)
    if set(fitted.dropped) - set(quiet) and fitted.note():
        out.print(f"[dim]{escape(fitted.note() or '')}[/]")
    return set(fitted.dropped)


def machine_summary(m: Machine) -> dict[str, Any]:
    return {
        "name": m.name, "display_name": m.display_name, "aliases": list(m.aliases),
        "source": m.source, "path": m.path,
        "memory": {level.name: {
            "theoretical_bytes_per_s": level.theoretical_bytes_per_s,
            "calibration_by_mix": dict(level.calibration_by_mix),
            "envelope_mix": level.envelope_mix,
            "effective_bytes_per_s": level.effective_bytes_per_s(),
            "bytes_per_cycle": level.bytes_per_cycle, "capacity_bytes": level.capacity_bytes,
            "measured_bytes_per_s": level.measured_bytes_per_s, "source": level.source}
            for level in m.memory.values()},
        "units": {u.key: {
            "theoretical_ops_per_s": u.theoretical_ops_per_s,
            "calibration_by_regime": dict(u.calibration_by_regime),
            "envelope_regime": u.envelope_regime,
            "effective_ops_per_s": u.effective_ops_per_s(),
            "balance_flops_per_byte": m.balance_flops_per_byte(u.key),
            "ops_per_cycle": u.ops_per_cycle, "source": u.source}
            for u in m.units.values()},
        "latency_floor": {timing: {"per_call_s": f.per_call_s, "per_kernel_s": f.per_kernel_s,
                                   "assumed": f.assumed, "source": f.source}
                          for timing, f in m.latency_floors.by_timing.items()},
        "interconnect": None if m.interconnect is None else {
            "name": m.interconnect.name, "bytes_per_s": m.interconnect.bytes_per_s,
            "source": m.interconnect.source, "hop_latency_s": m.interconnect.hop_latency_s,
            "hop_latency_assumed": m.interconnect.hop_latency_assumed,
            "hop_latency_source": m.interconnect.hop_latency_source},
        "notes": list(m.notes),
    }
