"""The `roofwise` command. Each subcommand lives in its own module; this one wires them up and
turns bad input into one line on stderr and exit code 2."""

from __future__ import annotations

import io
import sys

import click
import numpy as np

from ..errors import InputError
from ..text import one_line
from .analyze import analyze_command
from .audit import audit_command
from .bench import bench_command
from .calibrate import calibrate_command
from .compare import compare_command
from .lint import lint_command
from .machines import machine_command, machines_command
from .misuse import misuse_command
from .model import model_command
from .ops import ops_command
from .plot import plot_command
from .price import price_command
from .report import report_command
from .trace import trace_command


class _DataFlowOrder(click.Group):
    """`roofwise --help` lists commands in the order they were added, not alphabetically."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@click.group(cls=_DataFlowOrder, context_settings={"help_option_names": ["-h", "--help"]},
             invoke_without_command=True)
@click.version_option(package_name="roofwise")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """How far is a kernel from the speed of light? Honest rooflines, calibrated ceilings."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


# In the order of the data flow: profiles, ledgers, verdicts, pictures, measurement.
for command in (machines_command, machine_command, ops_command, price_command, trace_command,
                analyze_command, lint_command, misuse_command, plot_command, report_command,
                compare_command, bench_command, calibrate_command, audit_command, model_command):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> int:
    _writable_streams()
    try:
        # Overflow and division by zero are handled where they matter (blank, impossible,
        # null in JSON, a dash for people); numpy's warnings about them are noise on stderr.
        with np.errstate(all="ignore"):
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
    sys.exit(main())
