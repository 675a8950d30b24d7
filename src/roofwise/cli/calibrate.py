"""`roofwise calibrate --out PROFILE.yaml`: measure this card and write a profile the core loads."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import yaml
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from roofwise.base import fmt, paths
from roofwise.base.errors import InputError
from roofwise.base.install import install_hint
from roofwise.cli.common import console, print_hanging
from roofwise.measure.calibration_math import choose_theoretical, resolve_theoretical
from roofwise.profiles.load import builtin_machines, parse_machine
from roofwise.records.write import atomic_writer
from roofwise.render.layout import Column, fit_table

# designed for 80 columns: what was measured, its rate and its spread always; the clocks and
# the method (in the --log file and the profile's windows) drop first
WINDOW_COLUMNS = (Column("measured"), Column("variant"), Column("method", wrap=True, drop=3),
                  Column("rate", "right"), Column("median", "right", drop=1),
                  Column("spread", "right"), Column("SM MHz", wrap=True, drop=4),
                  Column("mem MHz", drop=5), Column("throttle", wrap=True, drop=2))


def window_rate(window: dict[str, Any]) -> str:
    """A window's rate from the one formatter: B/s for memory, FLOP/s or op/s for a unit."""
    if window.get("kind") == "memory":
        return fmt.rate(window["rate_per_s"], "B/s", 2)
    return fmt.unit_rate(window["rate_per_s"], window["key"])


def render_windows(out: Console, windows: list[dict[str, Any]]) -> None:
    """The measured windows as one table fitted to the console (the --log file and the
    profile keep every figure)."""
    if not windows:
        return
    rows: list[list[str | Text]] = []
    for w in windows:
        clocks = w.get("clocks") or [{}]
        sm = " -> ".join("?" if c.get("sm_mhz") is None else f"{c['sm_mhz']:g}"
                         for c in clocks)
        mem = " -> ".join(str(c.get("mem_mhz", "?")) for c in (clocks[0], clocks[-1]))
        throttle = ", ".join(sorted({t for c in clocks for t in c.get("throttle", [])}))
        rows.append([w["key"], w["variant"], w["method"], window_rate(w),
                     fmt.seconds(w["time_s"]), f"{w['spread']:.3f}", sm, mem, throttle or "none"])
    fitted = fit_table(WINDOW_COLUMNS, rows, out.width, "Measured windows")
    out.print(fitted.table)
    if fitted.dropped:
        print_hanging(out, f"(left out at this width: {', '.join(fitted.dropped)}; a wider "
                           "terminal or the --log file shows them)")

PROFILE_SUFFIXES = (".yaml", ".yml")
LOG_SUFFIXES = (".txt", ".log")


def check_writable(path: str, option: str, suffixes: tuple[str, ...]) -> None:
    """Refuse, before any measuring, a path `recordio.atomic_writer` could not write."""
    if not path.lower().endswith(suffixes):
        raise InputError(option, f"expected a {' or '.join(suffixes)} path, got {path!r}")
    paths.check_output(path, option)


def require_gpu() -> None:
    try:
        import torch
    except ImportError:
        raise InputError("calibrate", "needs torch with CUDA: " + install_hint("gpu")
                         ) from None
    if not torch.cuda.is_available():
        raise InputError("calibrate", "no CUDA GPU is visible on this machine "
                                      "(torch.cuda.is_available() is False); run it on the card "
                                      "you want to calibrate")


@click.command("calibrate")
@click.option("--out", "out", required=True, metavar="PROFILE.yaml",
              help="Where to write the calibrated profile (atomically).")
@click.option("--quick", is_flag=True, help="Shorter windows and one GEMM dtype: under a minute.")
@click.option("--theoretical-from", "theoretical_from", default=None, metavar="NAME|FILE",
              help="Profile whose theoretical (datasheet) rates the measurements are divided "
                   "by; default: the built-in profile matching the card (required when none "
                   "matches).")
@click.option("--force", is_flag=True,
              help="Use --theoretical-from even when it is not a profile of this card.")
@click.option("--log", "log_path", default=None, metavar="LOG.txt|LOG.log",
              help="Also write every measured window (clocks, spread) to this file.")
def calibrate_command(out: str, quick: bool, theoretical_from: str | None, force: bool,
                      log_path: str | None) -> None:
    """Measure HBM per mix, GEMM per dtype (burst: the first calls after an idle pause;
    sustained: after the clocks settle), FMA, SFU, L2 (one kernel re-reading an L2-resident
    buffer) and the latency floor of each timing method (kernel, graph, events, wall).

    Refuses measurements above the theoretical rate or below 0.30 of it (the theoretical rate
    is then probably another card's), throttled for temperature, whose memory clock moved or
    whose clock moved inside a burst, whose spread is too wide, or an L2 figure that timed its
    launch; they are listed in the profile's notes instead of becoming calibrations. Clocks
    at the power cap label a window sustained.
    """
    # every option is checked before the GPU is looked for, so a typo fails on any machine
    check_writable(out, "--out", PROFILE_SUFFIXES)
    if log_path is not None:
        check_writable(log_path, "--log", LOG_SUFFIXES)
        if Path(log_path).resolve() == Path(out).resolve():
            raise InputError("--log", f"is the same file as --out ({out}); give another path")
    machines = builtin_machines()
    requested = (None if theoretical_from is None
                 else resolve_theoretical(theoretical_from, machines))
    require_gpu()
    import torch

    from roofwise.measure.calibrate import run_calibration  # deferred: torch

    theoretical = choose_theoretical(torch.cuda.get_device_name(0), requested, force, machines)

    command = "roofwise " + " ".join(sys.argv[1:]) if sys.argv[1:] else "roofwise calibrate"
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console(err=True), transient=True) as progress:
        task = progress.add_task("calibrating", total=None)
        profile, log = run_calibration(
            theoretical, quick, command,
            progress=lambda label: progress.update(task, description=f"calibrating: {label}"))
    parse_machine(profile, out)  # never write a profile the core would refuse to load
    text = yaml.safe_dump(profile, sort_keys=False, width=100)
    with atomic_writer(out) as handle:
        handle.write(text)
    if log_path is not None:
        with atomic_writer(log_path) as handle:
            handle.write("\n".join(log.lines) + "\n")
    err = console(err=True)
    render_windows(err, log.windows)
    for line in log.events:
        print_hanging(err, line)
    for note in profile.get("notes", []):
        print_hanging(err, f"note: {note}")
    click.echo(f"wrote {out}")
