"""`roofwise trace MODULE:FUNCTION --shape NAME=DIMS:DTYPE ...`: a ledger from a PyTorch reference.

The function runs on meta tensors (no GPU, no memory), so any shape is cheap to trace. Loading
the function and building its inputs is `measure.inputs`'; this module parses and prints.
"""

from __future__ import annotations

from typing import Any

import click
import yaml

from roofwise.base import fmt, paths
from roofwise.base.errors import InputError
from roofwise.base.install import install_hint
from roofwise.capture.inputs import example_inputs, load_function
from roofwise.cli.common import console, machine_arg, machine_option
from roofwise.cli.price import TENSOR_COLUMNS, render_price
from roofwise.ledgers.files import ledger_to_yaml_data
from roofwise.ledgers.ledger import Ledger
from roofwise.records.write import atomic_writer
from roofwise.render.layout import Column, fit_table, for_rich

NEEDS_TORCH = "trace needs torch: " + install_hint("gpu")


@click.command("trace")
@click.argument("target", metavar="MODULE:FUNCTION")
@click.option("--shape", "shapes", multiple=True, metavar="NAME=DIMS[:DTYPE]",
              help="One per tensor argument, e.g. q=4096x32x128:bf16 (dtype: any roofwise dtype "
                   "name, fp8 = fp8_e4m3; default fp32).")
@click.option("--lookup", "lookups", multiple=True, metavar="NAME",
              help="An argument that is a lookup table (weights, cos/sin); repeatable.")
@click.option("--output", "output_names", multiple=True, metavar="NAME",
              help="Names for the returned tensors, in order; repeatable.")
@click.option("--roof", default=None, metavar="UNIT",
              help="The unit an optimal implementation would use (default: the unit with the "
                   "most contraction work, else cuda_core.fp32).")
@click.option("--tf32", is_flag=True, help="Count fp32 contractions on tensor_core.tf32.")
@click.option("--unfused", is_flag=True,
              help="The unfused ledger: one call per aten op, every intermediate paid for.")
@click.option("-o", "--out", "out_path", default=None, metavar="LEDGER.yaml",
              help="Write the ledger as YAML (readable by `roofwise price`).")
@machine_option()
def trace_command(target: str, shapes: tuple[str, ...], lookups: tuple[str, ...],
                  output_names: tuple[str, ...], roof: str | None, tf32: bool, unfused: bool,
                  out_path: str | None, machine_name: str | None) -> None:
    """Trace a PyTorch function on meta tensors into a ledger (fused by default)."""
    try:
        import torch

        from roofwise.capture.tracer import trace  # deferred: torch
    except ImportError:
        raise InputError("trace", NEEDS_TORCH) from None
    if out_path:
        paths.check_output(out_path, "--out")  # before any tracing
    fn = load_function(target)
    args, kwargs = example_inputs(fn, target, shapes, torch)
    try:
        traced = trace(fn, *args, example_kwargs=kwargs, lookups=lookups,
                       output_names=output_names or None, roof=roof, tf32=tf32,
                       name=target.split(":", 1)[1])
    except InputError:
        raise
    except Exception as exc:  # the user's function failed on meta tensors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise InputError(f"trace {target}", f"the function raised {type(exc).__name__}: "
                                            f"{first} (it runs on meta tensors)") from None
    ledger = traced.unfused if unfused else traced.fused
    if out_path:
        with atomic_writer(out_path) as handle:
            yaml.safe_dump(ledger_yaml(ledger), handle, sort_keys=False)
        click.echo(f"wrote {out_path}", err=True)
    if machine_name:

        render_price(ledger, machine_arg(machine_name), None, None, as_json=False)
    elif not out_path:
        _summary(ledger, traced.uncounted)


def ledger_yaml(ledger: Ledger) -> dict[str, Any]:
    """Fused: one call. Unfused: its calls as stages composed `separate`, so `calls` survives."""
    notes = {"notes": list(ledger.notes)} if ledger.notes else {}
    if ledger.calls == 1 or not ledger.stages:
        return {**ledger_to_yaml_data(ledger), **notes}
    return {"name": ledger.name, "roof": ledger.roof, "compose": "separate", **notes,
            "stages": [ledger_to_yaml_data(s) for s in ledger.stages]}


def _summary(ledger: Ledger, uncounted: tuple[str, ...]) -> None:
    out = console()
    out.print(f"[bold]{for_rich(ledger.name)}[/]: {ledger.calls} call(s), roof "
              f"{for_rich(ledger.roof)}")
    if ledger.calls == 1:
        rows = [[t.name, t.role.value, "x".join(map(str, t.shape)), t.dtype,
                 fmt.nbytes(t.read_bytes), fmt.nbytes(t.write_bytes)] for t in ledger.tensors]
        out.print(fit_table(TENSOR_COLUMNS, rows, out.width, "Bytes by tensor").table)
    totals: dict[tuple[str, str], float] = {}
    for w in ledger.work:
        totals[(w.unit, w.op_class)] = totals.get((w.unit, w.op_class), 0.0) + w.ops
    work = [[unit, op_class, fmt.count(ops, fmt.op_name(unit))]
            for (unit, op_class), ops in totals.items()]
    out.print(fit_table((Column("unit"), Column("class"), Column("ops", "right")), work,
                        out.width, "Work by unit and class").table)
    out.print(f"bytes {ledger.bytes:,} (read {ledger.read_bytes:,}, write "
              f"{ledger.write_bytes:,}, lookups {ledger.lookup_bytes:,}); FLOPs "
              f"{ledger.flops:,.0f}; AI {ledger.intensity_flops_per_byte:.2f} FLOP/B")
    if uncounted:
        out.print(f"[yellow]uncounted aten ops (no FLOPs counted):[/] "
                  f"{for_rich(', '.join(uncounted))}")
