"""`roofwise bench OP --shape k=v --sweep k=v1,v2 -o RECORDS`: time an operator, write records.

The sweep and its shards are `roofwise.measure.sweep`'s; this module parses the options, checks the
output and the device before any timing, and reports.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from roofwise.base import paths
from roofwise.base.errors import InputError
from roofwise.base.install import install_hint
from roofwise.cli.common import console, load_machine_arg, machine_option
from roofwise.measure.sweep import (
    parse_assignments,
    parse_shard,
    point_text,
    refuse_fixed_and_swept,
    shard_or_refuse,
    sweep_points,
)
from roofwise.ops import parse_shape_args
from roofwise.profiles.load import builtin_machines, match_device
from roofwise.records.read import format_of, iter_raw_records
from roofwise.records.write import write_records


def check_appendable(out: str) -> bool:
    """Refuse, before any timing, an output that could not be appended to afterwards.

    Appendable: a path that does not exist yet (in an existing directory), an empty file, or a
    record file that parses. Returns whether existing rows must be kept (append).
    """
    path = Path(out)
    paths.check_output(path)
    if not path.exists():
        return False
    if path.stat().st_size == 0:
        return False
    try:
        for where, record in iter_raw_records(path):
            if not isinstance(record, Mapping):  # a line that did not parse, or a non-object
                why = str(record) if isinstance(record, str) and str(record) else (
                    "not a JSON object")
                raise InputError(where, f"the existing file is not a record file ({why}); "
                                        "not appending to it")
    except InputError as exc:
        if exc.problem.endswith("not appending to it"):
            raise
        raise InputError(exc.where, f"{exc.problem}; not appending to it") from None
    except Exception as exc:  # undecodable text, or pyarrow's own errors for bad Parquet
        raise InputError(out, f"the existing file cannot be read as records "
                              f"({type(exc).__name__}); not appending to it") from None
    return True


# torch's messages for allocations it refuses (OutOfMemoryError's among them)
ALLOCATION_FAILURES = ("out of memory", "can't allocate memory", "Storage size calculation "
                       "overflowed", "Overflow when unpacking")


def require_device(device: str) -> None:
    """One clear line (exit 2) when the asked-for device is not there."""
    try:
        import torch
    except ImportError:
        raise InputError("--device", "timing needs torch: " + install_hint("gpu")) from None
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda", "no CUDA GPU is visible on this machine "
                                          "(torch.cuda.is_available() is False); "
                                          "use --device cpu to time on the host")


@contextmanager
def refused_allocation(where: str) -> Iterator[None]:
    """An allocation torch refuses (out of memory, a size past int64) as one line naming the
    point `where`, not torch's multi-line C++ message; other errors pass through untouched."""
    try:
        yield
    except RuntimeError as exc:
        text = str(exc)
        if not any(needle in text for needle in ALLOCATION_FAILURES):
            raise
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        raise InputError(where, f"torch could not allocate the inputs ({first[:160]})"
                         ) from None


@click.command("bench")
@click.argument("op")
@click.option("--shape", "shape", multiple=True, metavar="KEY=VALUE[,KEY=VALUE...]",
              help="Fixed parameters of the op (repeatable, as for `price`), e.g. "
                   "--shape m=4096,n=4096 --shape k=4096.")
@click.option("--sweep", "sweep", multiple=True, metavar="KEY=V1,V2,...",
              help="Sweep a parameter (repeatable; the sweep is the product).")
@machine_option()
@click.option("-o", "--out", "out", required=True, metavar="RECORDS.jsonl|.parquet",
              help="Record file to append to (atomically).")
@click.option("--shard", "shard_text", default=None, metavar="I/N",
              help="Run every N-th point of the sweep, starting at I.")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True)
@click.option("--reps", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--warmup", type=click.IntRange(min=0), default=10, show_default=True)
@click.option("--compile", "compile_fn", is_flag=True,
              help="Time the op through torch.compile.")
@click.option("--no-flush", is_flag=True, help="Do not flush the cache between calls.")
def bench_command(op: str, shape: tuple[str, ...], sweep: tuple[str, ...],
                  machine_name: str | None, out: str, shard_text: str | None, device: str,
                  reps: int, warmup: int, compile_fn: bool, no_flush: bool) -> None:
    """Time a torch reference of OP (gemm, rmsnorm, softmax, qk_norm_rope_quant)."""
    from roofwise.measure.bench import bench  # deferred: torch
    from roofwise.measure.memory import available_bytes, require_fits  # deferred: torch
    from roofwise.measure.torch_ops import (  # deferred: torch
        build_case,
        build_ledger,
        resolve_params,
    )

    format_of(out)  # a bad suffix fails before any timing
    index, count = parse_shard(shard_text)
    fixed = parse_shape_args(shape)
    swept = parse_assignments(sweep, "--sweep")
    refuse_fixed_and_swept(fixed, swept)
    resolve_params(op, fixed, "--shape")
    all_points = sweep_points(fixed, swept)
    for key in swept:  # each swept value is checked, and blamed on --sweep
        for point in all_points:
            resolve_params(op, {key: point[key]}, "--sweep")
    points = shard_or_refuse(all_points, index, count)
    resolved = [resolve_params(op, point) for point in points]
    ledgers = [build_ledger(op, params) for params in resolved]  # all price before any is timed
    append = check_appendable(out)
    machine = load_machine_arg(machine_name)
    require_device(device)
    available = available_bytes(device)
    for params, ledger in zip(resolved, ledgers, strict=True):  # before anything is allocated
        require_fits(ledger, point_text(op, params), device, available)
    records: list[dict[str, Any]] = []
    err = console(err=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True,
                  disable=not err.is_terminal) as progress:
        task = progress.add_task(f"bench {op}", total=len(points))
        for point in points:
            with refused_allocation(point_text(op, point)):
                case = build_case(op, point, device, compile_fn=compile_fn)
                result = bench(case.fn, *case.args, ledger=case.ledger, warmup=warmup,
                               reps=reps, flush_l2=not no_flush, device=device)
            profile = machine.name if machine is not None else (
                match_device(result.device, builtin_machines().values()).machine)
            name = profile if isinstance(profile, str) else (
                profile.name if profile is not None else None)
            record = result.to_record(case.ledger, name, op=op,
                                      workload={**case.params, "compiled": compile_fn})
            record["ledger_source"] = case.ledger_source
            records.append(record)
            progress.advance(task)
    written = write_records(out, records, append=append)
    click.echo(f"wrote {len(records)} record(s) to {out} ({written} in the file; "
               f"shard {index}/{count} of the sweep)", err=True)
