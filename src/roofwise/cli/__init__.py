"""The `roofwise` command. Each subcommand lives in its own module; this one wires them up and
turns bad input into one line on stderr and exit code 2."""

from __future__ import annotations

import sys

import click

from ..errors import InputError
from .analyze import analyze_command
from .audit import audit_command
from .bench import bench_command
from .calibrate import calibrate_command
from .compare import compare_command
from .lint import lint_command
from .machines import machine_command, machines_command
from .misuse import misuse_command
from .ops import ops_command
from .plot import plot_command
from .price import price_command
from .report import report_command
from .trace import trace_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="roofwise")
def cli() -> None:
    """How far is a kernel from the speed of light? Honest rooflines, calibrated ceilings."""


for command in (machines_command, machine_command, price_command, analyze_command,
                misuse_command, plot_command, compare_command,
                report_command):
    cli.add_command(command)
cli.add_command(bench_command)
cli.add_command(audit_command)
cli.add_command(calibrate_command)
cli.add_command(ops_command)
cli.add_command(trace_command)
cli.add_command(lint_command)


def main(argv: list[str] | None = None) -> int:
    try:
        result = cli.main(args=argv, prog_name="roofwise", standalone_mode=False)
    except InputError as exc:
        click.echo(f"roofwise: error: {exc}", err=True)
        return 2
    except click.UsageError as exc:
        hint = f" (see roofwise {exc.ctx.command_path.split(' ', 1)[-1]} --help)" if (
            exc.ctx is not None and " " in exc.ctx.command_path) else " (see roofwise --help)"
        click.echo(f"roofwise: error: {exc.format_message()}{hint}", err=True)
        return 2
    except click.ClickException as exc:
        click.echo(f"roofwise: error: {exc.format_message()}", err=True)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.Abort:
        click.echo("roofwise: aborted", err=True)
        return 1
    except BrokenPipeError:
        return 0
    return int(result) if isinstance(result, int) else 0


def run() -> None:
    sys.exit(main())
