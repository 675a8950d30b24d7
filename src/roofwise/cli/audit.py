"""`roofwise audit`: does the kernel read from DRAM the bytes its ledger says it must?"""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from ..errors import InputError
from ..ledger import Ledger
from ..ledgerio import load_ledger
from ..measure.audit import FAIL_BELOW, WARN_ABOVE, audit, parse_ncu_csv, run_ncu
from ..report import fmt
from .bench import parse_assignments
from .common import console, echo_json

STYLE = {"PASS": "green", "FAIL": "red", "WARN": "yellow", "UNJUDGED": "dim"}


def _ledger(ledger_path: str | None, op: str | None, shape: tuple[str, ...]) -> Ledger:
    if (ledger_path is None) == (op is None):
        raise InputError("--ledger/--op", "give exactly one: a ledger YAML or an operator name")
    if ledger_path is not None:
        return load_ledger(ledger_path)
    from ..measure.torch_ops import build_ledger, resolve_params

    assert op is not None
    return build_ledger(op, resolve_params(op, parse_assignments(shape, "--shape")))[0]


@click.command("audit")
@click.option("--ncu-csv", "csv_path", default=None, metavar="REPORT.csv",
              help="An `ncu --csv` report (long format) holding dram__bytes_read.sum.")
@click.option("--run", "run_cmd", default=None, metavar="'COMMAND ...'",
              help="Profile this command under ncu instead (ncu must be on PATH).")
@click.option("--ledger", "ledger_path", default=None, metavar="LEDGER.yaml")
@click.option("--op", default=None, help="Or a bench operator (gemm, rmsnorm, ...).")
@click.option("--shape", multiple=True, metavar="KEY=VALUE", help="Parameters of --op.")
@click.option("--kernel", "kernel_pattern", default=None, metavar="REGEX",
              help="Judge only kernels whose name matches.")
@click.option("--sum", "sum_kernels", is_flag=True,
              help="One call launches several kernels: judge their summed reads.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per row.")
def audit_command(csv_path: str | None, run_cmd: str | None, ledger_path: str | None,
                  op: str | None, shape: tuple[str, ...], kernel_pattern: str | None,
                  sum_kernels: bool, as_json: bool) -> None:
    """Compare a ledger's read bytes with Nsight Compute's DRAM read counter.

    PASS within [0.95x, 1.5x]; FAIL below 0.95x; WARN above 1.5x. Writes are reported, not
    judged: writes still in L2 when a kernel ends escape the counter.
    """
    ledger = _ledger(ledger_path, op, shape)
    if (csv_path is None) == (run_cmd is None):
        raise InputError("--ncu-csv/--run", "give exactly one: a report or a command to profile")
    if csv_path is not None:
        try:
            text = Path(csv_path).read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(csv_path, f"cannot read file ({exc.strerror})") from None
        origin = csv_path
    else:
        assert run_cmd is not None
        text, origin = run_ncu(run_cmd.split(), kernel_pattern), "ncu"
    rows = audit(parse_ncu_csv(text, origin), ledger.read_bytes, ledger.write_bytes,
                 kernel_pattern, sum_kernels)
    if as_json:
        for row in rows:
            echo_json({"op": ledger.name, **row.to_dict()})
        return
    table = Table(title=f"Bytes audit: {ledger.name} (FAIL < {FAIL_BELOW}x, WARN > "
                        f"{WARN_ABOVE}x of the ledger's reads)", title_justify="left")
    for col in ("kernel", "ledger read", "DRAM read", "ratio", "verdict", "ledger write",
                "DRAM write (not judged)", "why"):
        table.add_column(col)
    for row in rows:
        table.add_row(row.kernel, fmt.nbytes(row.ledger_read_bytes),
                      "-" if row.dram_read_bytes is None else fmt.nbytes(row.dram_read_bytes),
                      "-" if row.read_ratio is None else f"{row.read_ratio:.3f}",
                      f"[{STYLE[row.verdict]}]{row.verdict}[/]",
                      "-" if row.ledger_write_bytes is None else fmt.nbytes(row.ledger_write_bytes),
                      "-" if row.dram_write_bytes is None else fmt.nbytes(row.dram_write_bytes),
                      row.reason)
    console().print(table)
