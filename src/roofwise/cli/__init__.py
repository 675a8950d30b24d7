"""The `roofwise` command. Each subcommand lives in its own module; this one wires them up and
turns bad input into one line on stderr and exit code 2."""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import inspect
import io
import os
import re
import sys
from pathlib import Path

import click

from roofwise.base.errors import InputError
from roofwise.base.text import one_line
from roofwise.cli import notes

# In the order of the data flow: profiles, ledgers, verdicts, pictures, measurement. Each
# command's module is imported only when that command runs (matplotlib, torch and polars load
# only where they are used); `--help` reads each command's docstring from its source instead.
COMMANDS: dict[str, str] = {
    "machines": "machines:machines_command", "machine": "machines:machine_command",
    "ops": "ops:ops_command", "price": "price:price_command", "trace": "trace:trace_command",
    "analyze": "analyze:analyze_command", "lint": "lint:lint_command",
    "misuse": "misuse:misuse_command", "plot": "plot:plot_command",
    "report": "report:report_command", "compare": "compare:compare_command",
    "fleet": "fleet:fleet_command",
    "bench": "bench:bench_command", "calibrate": "calibrate:calibrate_command",
    "audit": "audit:audit_command", "model": "model:model_command",
}


def docstring(name: str) -> str:
    """A command's docstring, read from its module's source without importing the module."""
    module, _, attr = COMMANDS[name].partition(":")
    source = (Path(__file__).parent / f"{module}.py").read_text(encoding="utf-8")
    found = re.search(rf"^def {attr}\(.*?\).*?:\n\s*(?:r?\"\"\"(.*?)\"\"\")?", source,
                      re.S | re.M)
    return inspect.cleandoc(found.group(1)) if found and found.group(1) else ""


class _LazyGroup(click.Group):
    """Commands listed in data-flow order, each imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*COMMANDS, *(c for c in self.commands if c not in COMMANDS)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, _, attr = COMMANDS[cmd_name].partition(":")
            command = getattr(importlib.import_module(f".{module}", __name__), attr)
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [(name, click.Command(name, help=docstring(name)).get_short_help_str(limit))
                for name in COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]},
             invoke_without_command=True)
@click.version_option(package_name="roofwise")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """How far is a kernel from the speed of light? Honest rooflines, calibrated ceilings."""
    import numpy as np  # here, not at the top: `roofwise --help` never reaches this

    # Overflow and division by zero are handled where they matter (blank, impossible, null in
    # JSON, a dash for people); numpy's warnings about them are noise on stderr.
    ctx.with_resource(np.errstate(all="ignore"))
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


def main(argv: list[str] | None = None) -> int:
    """The command; its exit code. Bad input (exit 2) prints one line and nothing else on
    stderr: the notes written before the fault was found are dropped (`notes`)."""
    _writable_streams()
    code = 2
    notes.hold()
    try:
        code = _main(argv)
    finally:
        notes.release(show=code != 2)
    return code


def _main(argv: list[str] | None) -> int:
    try:
        result = cli.main(args=argv, prog_name="roofwise", standalone_mode=False)
    except InputError as exc:
        _error(str(exc))
        return 2
    except OSError as exc:  # a file the checks could not foresee: unreadable, a name too long
        _error(f"{exc.filename or 'a file'}: {exc.strerror or exc}")
        return 2
    except click.UsageError as exc:
        path = exc.ctx.command_path if exc.ctx is not None else "roofwise"
        _error(f"{exc.format_message()} (see {path} --help)")
        return 2
    except click.ClickException as exc:
        _error(exc.format_message())
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.Abort:
        click.echo("roofwise: aborted", err=True)
        return 1
    except BrokenPipeError:
        return 0
    return int(result) if isinstance(result, int) else 0


def _writable_streams() -> None:
    """A name with a lone surrogate (a JSON escape) prints as \udc80 instead of failing the
    write to a strict UTF-8 terminal or pipe."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


def _error(message: str) -> None:
    """Every error is one line under 300 characters: control characters escaped, the middle
    of an overlong message (a 4,000-character value echoed back) elided."""
    click.echo(one_line(f"roofwise: error: {message}"), err=True)


def run() -> None:
    """The console script. The command's imports make objects that live as long as the
    process (polars', numpy's); frozen (`gc.freeze`), they are not walked again by each
    collection while a million rows are judged (a tenth of `analyze`'s time on 200,000)."""
    if sys.argv[1:2] and sys.argv[1] in COMMANDS:
        # a failed import is raised again, and reported, where `main` imports the command
        with contextlib.suppress(Exception):
            importlib.import_module(f".{COMMANDS[sys.argv[1]].partition(':')[0]}", __name__)
    gc.freeze()
    if sys.argv[1:2] == ["model"]:
        _young_collections_only()
    code = main()
    if "torch" in sys.modules:
        _exit_without_teardown(code)
    sys.exit(code)


def _young_collections_only() -> None:
    """For the rest of a `roofwise model` process, Python's cycle collector keeps to young
    objects. Its full passes walk every object torch and transformers make at import (all
    alive until the process ends): seven of them took 0.6 s of a 3.1 s projection. Passes over
    the youngest objects, every 20,000 allocations, still free the short-lived cycles torch
    makes on every op (its pytree helpers), so a sweep's memory stays where it was. Set here,
    for the process, not around the command: putting the thresholds back sets off the full
    pass they held back."""
    gc.set_threshold(20_000, 1_000, 1_000_000)


def _exit_without_teardown(code: int) -> None:
    """End a process that imported torch without the interpreter's teardown: freeing torch's
    modules and operator registrations one object at a time takes half a second, a sixth of
    a `roofwise model` run, and frees nothing the system would not. The exit hooks (open
    files, temporary folders, engines' shutdowns) still run first, and the streams are
    flushed."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing to flush to
            stream.flush()
    os._exit(code)
