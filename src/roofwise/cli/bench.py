"""`roofwise bench OP --shape k=v --sweep k=v1,v2 -o RECORDS`: time an operator, write records.

A sweep is the product of every `--sweep` list; `--shard i/n` keeps every n-th point from i,
so n jobs on n cards write n record files that together hold the sweep exactly once.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .. import paths
from ..errors import InputError
from ..install import install_hint
from ..ops import parse_shape_args
from ..profiles import builtin_machines, match_device
from ..recordio import write_records
from ..records import format_of, iter_raw_records
from .common import console, load_machine_arg, machine_option


def parse_assignments(values: Sequence[str], option: str) -> dict[str, str]:
    """KEY=VALUE texts of one option; the same key twice is an error, never a silent override."""
    out: dict[str, str] = {}
    for text in values:
        key, sep, value = text.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise InputError(option, f"expected KEY=VALUE, got {text!r}")
        if key.strip() in out:
            raise InputError(f"{option} {key.strip()}", "given twice; give each parameter once")
        out[key.strip()] = value.strip()
    return out


def refuse_fixed_and_swept(shape: Mapping[str, str], sweeps: Mapping[str, str]) -> None:
    """A parameter is fixed (--shape) or swept (--sweep), never both."""
    both = sorted(set(shape) & set(sweeps))
    if both:
        raise InputError(f"--sweep {both[0]}", f"also given with --shape {both[0]}; a "
                                               "parameter is either fixed or swept")


def sweep_points(shape: Mapping[str, str], sweeps: Mapping[str, str]) -> list[dict[str, str]]:
    """Every combination of the swept values (in the order given), over the fixed shape."""
    keys = list(sweeps)
    lists = []
    for key in keys:
        values = [v.strip() for v in sweeps[key].split(",") if v.strip()]
        if not values:
            raise InputError(f"--sweep {key}", "expected a comma-separated list of values")
        lists.append(values)
    return [{**shape, **dict(zip(keys, combo, strict=True))} for combo in itertools.product(*lists)]


def parse_shard(text: str | None) -> tuple[int, int]:
    if text is None:
        return 0, 1
    left, sep, right = text.partition("/")
    try:
        index, count = int(left), int(right)
    except ValueError:
        raise InputError("--shard", f"expected I/N such as 0/4, got {text!r}") from None
    if not sep or count < 1 or not 0 <= index < count:
        raise InputError("--shard", f"expected I/N with 0 <= I < N, got {text!r}")
    return index, count


def shard(points: Sequence[Any], index: int, count: int) -> list[Any]:
    """Every `count`-th point starting at `index`: shards 0..count-1 partition the sweep."""
    return list(points[index::count])


def shard_or_refuse(points: Sequence[Any], index: int, count: int) -> list[Any]:
    """The shard's points; InputError when it has none (nothing to run, nothing to write)."""
    mine = shard(points, index, count)
    if not mine:
        raise InputError("--shard", f"shard {index}/{count} of a {len(points)}-point sweep "
                                    "has no points")
    return mine


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


def point_text(op: str, params: Mapping[str, Any]) -> str:
    """`rmsnorm rows=8, hidden=16`: the point an error is about, as the user would type it."""
    return f"{op} " + ", ".join(f"{k}={v}" for k, v in params.items())


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
    from ..measure.bench import bench
    from ..measure.memory import available_bytes, require_fits
    from ..measure.torch_ops import build_case, build_ledger, resolve_params

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
