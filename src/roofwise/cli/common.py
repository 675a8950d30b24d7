"""Options and loaders shared by several subcommands."""

from __future__ import annotations

import json
import math
import os
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click
import numpy as np

from roofwise.base.errors import InputError
from roofwise.base.text import for_terminal
from roofwise.cli import notes
from roofwise.profiles.load import builtin_machines, choose_machine
from roofwise.profiles.machine import Machine

if TYPE_CHECKING:
    from rich.console import Console

    from roofwise.records.read import Loaded

F = TypeVar("F", bound=Callable[..., Any])


def console(err: bool = False) -> Console:
    """Rich console; a pipe or a file gets a generous width instead of rich's 80 columns.
    rich loads here, not with the command: `--json` and `--csv` never draw."""
    from rich.console import Console

    stream = sys.stderr if err else sys.stdout
    width = None if stream.isatty() or os.environ.get("COLUMNS") else 160
    return Console(stderr=err, highlight=False, soft_wrap=False, width=width)


def machine_option(required: bool = False) -> Callable[[F], F]:
    return click.option(
        "--machine", "-m", "machine_name", required=required, metavar="NAME|FILE",
        help="Built-in profile name or alias (see `roofwise machines`), or a profile YAML.")


def regime_mix_options(func: F) -> F:
    func = click.option("--regime", default=None, metavar="NAME",
                        help="Compute regime to price with (sustained, burst); "
                             "default: the envelope (highest measured).")(func)
    func = click.option("--mix", default=None, metavar="NAME",
                        help="Memory access mix (copy, triad, read, write, or auto from each "
                             "row's read/write split); default: the envelope.")(func)
    return func


def load_machine_arg(name: str | None) -> Machine | None:
    """The profile --machine names; a short name or alias says on stderr which it chose."""
    return None if name is None else machine_arg(name)


def machine_arg(name: str) -> Machine:
    """The profile `name` selects; a short name or alias says on stderr which it chose."""
    machine, chose = choose_machine(name)
    if chose:
        note(f"roofwise: {chose}")
    return machine


def all_machines() -> dict[str, Machine]:
    return builtin_machines()


def echo_json(data: Any) -> None:
    """One JSON object; NaN and infinities (not JSON) become null."""
    click.echo(json.dumps(finite(data), default=_jsonable, allow_nan=False))


def finite(data: Any) -> Any:
    if isinstance(data, (float, np.floating)):
        return float(data) if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(v) for v in data]
    return data


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "value"):
        return value.value
    return str(value)


MAX_SKIPPED_LINES = 20  # per file; the count that follows covers the rest


def note(line: str) -> None:
    """One line on stderr, never wrapped (held until the command ends: `notes`)."""
    notes.note(line)


def report_skipped(path: str, loaded: Loaded) -> int:
    """One stderr line per skipped record (the first few) and a count; returns the count."""
    for skipped in loaded.skipped[:MAX_SKIPPED_LINES]:
        note(f"roofwise: skipped {skipped}")
    if loaded.skipped:
        note(f"roofwise: {path}: skipped {len(loaded.skipped)} malformed record(s) of "
             f"{len(loaded.skipped) + len(loaded.columns)}; --strict fails the file instead")
    return len(loaded.skipped)


@contextmanager
def reading_progress(path: str, verb: str = "judging"
                     ) -> Iterator[Callable[[Loaded], None]]:
    """A progress bar on stderr over the bytes of the records at `path` while they are read
    (and judged), only when stderr is a terminal (a pipe or a log gets nothing); yields
    `advance(batch)`."""
    if not sys.stderr.isatty():
        yield lambda batch: None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    from roofwise.records.read import record_files  # deferred: polars; --help stays fast

    try:
        total: int | None = sum(f.stat().st_size for f in record_files(path))
    except (OSError, InputError):
        total = None  # the reader says what is wrong with the path
    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                  TimeElapsedColumn(), console=console(err=True), transient=True) as progress:
        task = progress.add_task(f"{verb} {path}", total=total)
        done = [0]

        def advance(batch: Loaded) -> None:
            done[0] += len(batch.columns) + len(batch.skipped)
            progress.update(task, advance=batch.file_bytes,
                            description=f"{verb} {path}: {done[0]:,} records")

        yield advance


def read_records_shown(path: str, strict: bool = False) -> Loaded:
    """`records.read_records`, with the progress bar of `reading_progress` on a terminal."""
    from roofwise.records.read import read_records  # deferred: polars; --help stays fast

    with reading_progress(path, "reading") as advance:
        return read_records(path, strict=strict, progress=advance)


def print_hanging(out: Console, text: str, indent: str = "  ") -> None:
    """One sentence wrapped at word boundaries to the console, later lines indented."""
    for part in textwrap.wrap(for_terminal(text), max(20, out.width - 1),
                              subsequent_indent=indent,
                              break_on_hyphens=False, break_long_words=False):
        out.print(part, markup=False, highlight=False)
