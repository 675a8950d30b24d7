"""The `roofwise` command. Each subcommand lives in its own module; this one wires them up and
turns bad input into one line on stderr and exit code 2."""

from __future__ import annotations

import importlib
import sys

import click
import numpy as np

from ..errors import InputError
from ..text import one_line

# In the order of the data flow: profiles, ledgers, verdicts, pictures, measurement. Each
# command's module is imported only when that command runs (matplotlib, torch and polars load
# only where they are used); `--help` lists them from this table, which a test keeps equal to
# each command's own docstring.
COMMANDS: dict[str, tuple[str, str]] = {
    "machines": ("machines:machines_command", "List the built-in machine profiles."),
    "machine": ("machines:machine_command",
                "Show one profile: every ceiling, regime, mix, balance point and source."),
    "ops": ("ops:ops_command",
            "List the library operators `roofwise price OP --shape key=value` can price."),
    "price": ("price:price_command",
              "Price a ledger file or a library operator: bytes by tensor, work by unit and "
              "class, times, bound, per stage."),
    "trace": ("trace:trace_command",
              "Trace a PyTorch function on meta tensors into a ledger (fused by default)."),
    "analyze": ("analyze:analyze_command",
                "Judge benchmark records (JSONL, CSV or Parquet), or a PyTorch profiler trace "
                "(Kineto JSON, gzipped or not), against a machine profile."),
    "lint": ("lint:lint_command", "Flag the eight roofline misuses (and units a profile lacks) "
                                  "in ledgers, profiles, records."),
    "misuse": ("misuse:misuse_command",
               "Eight ways to read a roofline wrong, each priced on the case study (QK-Norm + "
               "RoPE + fp8 quant, 4,096 tokens on the h200)."),
    "plot": ("plot:plot_command", "Draw records against the machine's roofs: one point per "
                                  "record, coloured by verdict."),
    "report": ("report:report_command",
               "Write an HTML report: the chart, a sortable and filterable verdict table, lint "
               "findings, the profile with its sources, and each row's ledger and price on "
               "demand."),
    "compare": ("compare:compare_command", "Compare two record files row by row (matched by "
                                           "op, workload and device)."),
    "bench": ("bench:bench_command",
              "Time a torch reference of OP (gemm, rmsnorm, softmax, qk_norm_rope_quant)."),
    "calibrate": ("calibrate:calibrate_command", "Measure HBM per mix, GEMM per dtype (burst, "
                                                 "sustained), FMA, SFU, L2, the latency floor."),
    "audit": ("audit:audit_command",
              "Compare a ledger's read bytes with Nsight Compute's DRAM read counter."),
}


class _LazyGroup(click.Group):
    """Commands listed in data-flow order, each imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*COMMANDS, *(c for c in self.commands if c not in COMMANDS)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, _, attr = COMMANDS[cmd_name][0].partition(":")
            command = getattr(importlib.import_module(f".{module}", __name__), attr)
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [(name, click.Command(name, help=text).get_short_help_str(limit))
                for name, (_, text) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]},
             invoke_without_command=True)
@click.version_option(package_name="roofwise")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """How far is a kernel from the speed of light? Honest rooflines, calibrated ceilings."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


def main(argv: list[str] | None = None) -> int:
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


def _error(message: str) -> None:
    """Every error is one line under 300 characters: control characters escaped, the middle
    of an overlong message (a 4,000-character value echoed back) elided."""
    click.echo(one_line(f"roofwise: error: {message}"), err=True)


def run() -> None:
    sys.exit(main())
