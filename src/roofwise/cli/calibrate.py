"""`roofwise calibrate --out PROFILE.yaml`: measure this card and write a profile the core loads."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import yaml
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from .. import paths
from ..errors import InputError
from ..install import install_hint
from ..measure.calibration_math import choose_theoretical, resolve_theoretical
from ..profiles import builtin_machines, parse_machine
from ..recordio import atomic_writer
from .common import console

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

    from ..measure.calibrate import run_calibration

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
    for line in log.lines:
        click.echo(line, err=True)
    for note in profile.get("notes", []):
        click.echo(f"note: {note}", err=True)
    click.echo(f"wrote {out}")
