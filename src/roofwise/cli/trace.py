"""`roofwise trace MODULE:FUNCTION --shape NAME=DIMS:DTYPE ...`: a ledger from a PyTorch reference.

The function runs on meta tensors (no GPU, no memory), so any shape is cheap to trace.
"""

from __future__ import annotations

import importlib
import inspect
import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click
import yaml
from rich.table import Table

from .. import paths
from ..dtypes import bytes_per_element
from ..errors import InputError
from ..install import install_hint
from ..ledger import Ledger
from ..ledgerio import ledger_to_yaml_data
from ..recordio import atomic_writer
from ..report import fmt
from ..text import for_rich
from .common import console, machine_arg, machine_option

MAX_TENSOR_BYTES = 2**63 - 1  # torch sizes and storage byte counts are int64
NEEDS_TORCH = "trace needs torch: " + install_hint("gpu")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# roofwise dtype names (roofwise.dtypes) whose torch spelling differs; the others are torch's
_TORCH_SPELLING = {
    "bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32",
    "fp64": "float64", "fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
}


@dataclass(frozen=True)
class ShapeSpec:
    """One --shape: the argument's name, its dimensions and its dtype (a roofwise name)."""

    name: str
    dims: tuple[int, ...]
    dtype: str


def parse_shape_spec(text: str) -> ShapeSpec:
    """`q=4096x32x128:bf16` -> ShapeSpec; errors name the argument and the part at fault."""
    name, sep, rest = text.strip().partition("=")
    name = name.strip()
    if not sep or not _NAME.match(name):
        raise InputError(f"--shape {text}", "expected NAME=DIMS[:DTYPE], e.g. "
                                            "q=4096x32x128:bf16")
    dims_text, _, dtype = rest.partition(":")
    where = f"--shape {name}"
    parts = dims_text.strip().split("x")
    if not all(p.strip().isdigit() for p in parts):
        raise InputError(where, f"expected DIMS like 4096x32x128 (positive integers joined by "
                                f"x), got {dims_text!r}")
    dims = tuple(int(p) for p in parts)
    if any(d <= 0 for d in dims):
        raise InputError(where, f"every dimension must be positive, got {dims_text!r}")
    dtype = (dtype.strip() or "fp32").lower()
    nbytes = math.prod(dims) * bytes_per_element(dtype, f"{where} dtype")
    if max(dims) > MAX_TENSOR_BYTES or nbytes > MAX_TENSOR_BYTES:
        raise InputError(where, f"{dims_text.strip()} of {dtype} is {nbytes:.3g} bytes, more "
                                "than a torch tensor can address (2**63 - 1 bytes)")
    return ShapeSpec(name, dims, dtype)


def torch_dtype(dtype: str, where: str, torch: Any) -> Any:
    """The torch dtype of a roofwise dtype name (the `fp8` alias is float8_e4m3fn)."""
    found = getattr(torch, _TORCH_SPELLING.get(dtype, dtype), None)
    if not isinstance(found, torch.dtype):
        raise InputError(where, f"dtype {dtype!r} has no torch tensor dtype to trace with")
    return found


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

        from ..measure.trace import trace
    except ImportError:
        raise InputError("trace", NEEDS_TORCH) from None
    if out_path:
        paths.check_output(out_path, "--out")  # before any tracing
    fn = _load_function(target)
    args, kwargs = _example_inputs(fn, target, shapes, torch)
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
        from .price import render_price

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


def _load_function(target: str) -> Callable[..., Any]:
    module_name, _, func_name = target.partition(":")
    if not module_name or not func_name:
        raise InputError("trace MODULE:FUNCTION", f"expected module.path:function, got {target!r}")
    try:
        module = import_from_cwd(module_name)
    except ImportError as exc:
        raise InputError(f"trace {target}", f"cannot import module {module_name!r}: {exc}") \
            from None
    except Exception as exc:
        raise InputError(f"trace {target}", f"importing {module_name!r} raised "
                                            f"{type(exc).__name__}: {exc}") from None
    if not hasattr(module, func_name):
        raise InputError(f"trace {target}", f"module {module_name!r} has no function "
                                            f"{func_name!r}")
    fn = getattr(module, func_name)
    if not callable(fn):
        raise InputError(f"trace {target}", f"{func_name!r} in {module_name} is not callable; "
                                            "expected a function")
    return fn


def import_from_cwd(module_name: str) -> Any:
    """Import with the current directory first on sys.path, as `python -m` does, so that a
    module beside the user needs no PYTHONPATH; sys.path is restored afterwards."""
    cwd = os.getcwd()
    sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_name)
    finally:
        sys.path.remove(cwd)  # removes the first occurrence: the one inserted above


def _example_inputs(fn: Callable[..., Any], target: str, specs: tuple[str, ...],
                    torch: Any) -> tuple[list[Any], dict[str, Any]]:
    """Meta tensors in signature order: positional while contiguous, then by keyword."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        raise InputError(f"trace {target}", "has no Python signature to bind --shape to (a "
                                            "builtin); wrap it in a Python function") from None
    given: dict[str, Any] = {}
    for text in specs:
        spec = parse_shape_spec(text)
        if spec.name in given:
            raise InputError(f"--shape {spec.name}", "given twice")
        dtype = torch_dtype(spec.dtype, f"--shape {spec.name} dtype", torch)
        try:
            given[spec.name] = torch.empty(spec.dims, device="meta", dtype=dtype)
        except (RuntimeError, TypeError, ValueError) as exc:  # torch's own size limits
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"--shape {spec.name}", f"torch cannot make this tensor: "
                                                     f"{first}") from None
    params = [p for p in signature.parameters.values()
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    known = [p.name for p in params]
    extra = [name for name in given if name not in known]
    if extra:
        raise InputError(f"--shape {extra[0]}", f"{target} has no parameter {extra[0]!r}; "
                                                f"parameters: {', '.join(known)}")
    missing = [p.name for p in params if p.default is p.empty and p.name not in given]
    if missing:
        raise InputError("--shape", f"{target} needs a --shape for {', '.join(missing)}")
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in params:
        if p.name not in given:
            continue
        if not kwargs and len(args) == params.index(p) and p.kind != p.KEYWORD_ONLY:
            args.append(given[p.name])
        else:
            kwargs[p.name] = given[p.name]
    return args, kwargs


def _summary(ledger: Ledger, uncounted: tuple[str, ...]) -> None:
    out = console()
    out.print(f"[bold]{for_rich(ledger.name)}[/]: {ledger.calls} call(s), roof "
              f"{for_rich(ledger.roof)}")
    if ledger.calls == 1:
        tensors = Table(title="Bytes by tensor", title_justify="left")
        for col in ("tensor", "role", "shape", "dtype", "read", "write"):
            tensors.add_column(col, justify="right" if col in ("read", "write") else "left")
        for t in ledger.tensors:
            tensors.add_row(for_rich(t.name), t.role.value, "x".join(map(str, t.shape)),
                            for_rich(t.dtype),
                            fmt.nbytes(t.read_bytes), fmt.nbytes(t.write_bytes))
        out.print(tensors)
    work = Table(title="Work by unit and class", title_justify="left")
    for col in ("unit", "class", "ops"):
        work.add_column(col, justify="right" if col == "ops" else "left")
    totals: dict[tuple[str, str], float] = {}
    for w in ledger.work:
        totals[(w.unit, w.op_class)] = totals.get((w.unit, w.op_class), 0.0) + w.ops
    for (unit, op_class), ops in totals.items():
        work.add_row(for_rich(unit), op_class, fmt.count(ops, "op"))
    out.print(work)
    out.print(f"bytes {ledger.bytes:,} (read {ledger.read_bytes:,}, write "
              f"{ledger.write_bytes:,}, lookups {ledger.lookup_bytes:,}); FLOPs "
              f"{ledger.flops:,.0f}; AI {ledger.intensity_flops_per_byte:.2f} FLOP/B")
    if uncounted:
        out.print(f"[yellow]uncounted aten ops (no FLOPs counted):[/] "
                  f"{for_rich(', '.join(uncounted))}")
