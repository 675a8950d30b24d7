"""`roofwise audit`: does the kernel read from DRAM the bytes its ledger says it must?"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

import click
from rich.text import Text

from roofwise.base import fmt
from roofwise.base.errors import InputError
from roofwise.base.text import short_kernels
from roofwise.cli.common import console, echo_json, print_hanging
from roofwise.ledgers.files import load_ledger
from roofwise.ledgers.ledger import Ledger, Role
from roofwise.measure.audit import (
    FAIL,
    FAIL_BELOW,
    WARN_ABOVE,
    AuditRow,
    audit,
    parse_ncu_csv,
    run_ncu,
)
from roofwise.ops import build_op, parse_shape_args
from roofwise.render.layout import Column, fit_table

STYLE = {"PASS": "green", "FAIL": "red", "WARN": "yellow", "UNJUDGED": "dim"}


def _ledger(ledger_path: str | None, op: str | None, shape: tuple[str, ...]) -> Ledger:
    if (ledger_path is None) == (op is None):
        raise InputError("--ledger/--op", "give exactly one: a ledger YAML or an operator name")
    if ledger_path is not None:
        if shape:
            raise InputError("--shape", f"applies to --op, not to the ledger file {ledger_path}")
        return load_ledger(ledger_path)
    assert op is not None
    return build_op(op, parse_shape_args(shape))


def read_report(csv_path: str) -> str:
    """The report's text; one-line errors for an unreadable or non-UTF-8 file."""
    try:
        return Path(csv_path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(csv_path, f"not UTF-8 text (byte {exc.start}); expected the text "
                                   "that `ncu --csv` prints") from None
    except OSError as exc:
        raise InputError(csv_path, f"cannot read file ({exc.strerror})") from None


def command_argv(run_cmd: str) -> list[str]:
    """The command to profile, split as a shell would (quotes kept together)."""
    try:
        argv = shlex.split(run_cmd)
    except ValueError as exc:
        raise InputError("--run", f"cannot split the command ({exc})") from None
    if not argv:
        raise InputError("--run", "expected a command to profile, got an empty string")
    return argv


def exit_code(rows: Sequence[AuditRow]) -> int:
    """1 when any row FAILs (the ledger claims bytes the kernel does not read), else 0."""
    return 1 if any(row.verdict == FAIL for row in rows) else 0


# designed for 80 columns: kernel names are shortened by rule (`text.short_kernels`), never
# folded; the unjudged write columns drop first, then the reasons, which are then printed
# beneath the table, one wrapped paragraph per row
AUDIT_COLUMNS = (Column("kernel"), Column("ledger read", "right"),
                 Column("DRAM read", "right"), Column("ratio", "right"), Column("verdict"),
                 Column("ledger write", "right", drop=3),
                 Column("DRAM write (not judged)", "right", drop=2),
                 Column("why", wrap=True, drop=1, min_width=24))
KERNEL_ROOM = 48  # columns the numbers and verdict of an audit table take (why printed beneath)


@click.command("audit")
@click.option("--ncu-csv", "csv_path", default=None, metavar="REPORT.csv",
              help="An `ncu --csv` report (long format) holding dram__bytes_read.sum.")
@click.option("--run", "run_cmd", default=None, metavar="'COMMAND ...'",
              help="Profile this command under ncu instead (ncu must be on PATH).")
@click.option("--ledger", "ledger_path", default=None, metavar="LEDGER.yaml")
@click.option("--op", default=None,
              help="Or an operator of the registry (see `roofwise ops`): its ledger.")
@click.option("--shape", multiple=True, metavar="KEY=VALUE[,KEY=VALUE...]",
              help="Parameters of --op (repeatable, as for `price`).")
@click.option("--kernel", "kernel_pattern", default=None, metavar="REGEX",
              help="Judge only kernels whose name matches.")
@click.option("--per-kernel", "per_kernel", is_flag=True,
              help="Judge each launch alone against the whole ledger (by default the "
                   "kernels of one call are summed: by NVTX range, else by launch order).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per row.")
def audit_command(csv_path: str | None, run_cmd: str | None, ledger_path: str | None,
                  op: str | None, shape: tuple[str, ...], kernel_pattern: str | None,
                  per_kernel: bool, as_json: bool) -> None:
    """Compare a ledger's read bytes with Nsight Compute's DRAM read counter.

    PASS within [0.95x, 1.5x]; FAIL below 0.95x; WARN above 1.5x. Writes are reported, not
    judged: writes still in L2 when a kernel ends escape the counter. The kernels of one call
    are summed (a call: one NVTX range; without one, the launches in order, split where their
    names repeat exactly) and shown beneath it; a read excess is matched in size against the
    ledger's tensors.

    Exit status: 0 when no row FAILs (WARN and UNJUDGED rows alone exit 0), 1 when any row
    FAILs, 2 on bad input (an unreadable report, a malformed line, a bad argument, a --kernel
    that matches no kernel).
    """
    ledger = _ledger(ledger_path, op, shape)
    if (csv_path is None) == (run_cmd is None):
        raise InputError("--ncu-csv/--run", "give exactly one: a report or a command to profile")
    if csv_path is not None:
        text, origin = read_report(csv_path), csv_path
    else:
        assert run_cmd is not None
        text, origin = run_ncu(command_argv(run_cmd), kernel_pattern), "ncu"
    rows = audit(parse_ncu_csv(text, origin), ledger.read_bytes, ledger.write_bytes,
                 kernel_pattern, per_kernel, origin,
                 [(t.name, float(t.read_bytes), t.role is Role.LOOKUP) for t in ledger.tensors
                  if t.read_bytes > 0])
    if as_json:
        for row in rows:
            echo_json({"op": ledger.name, **row.to_dict()})
        click.get_current_context().exit(exit_code(rows))
    out = console()
    labels = short_kernels([row.kernel for row in rows if not row.parts]
                           + [part.kernel for row in rows for part in row.parts],
                           max(32, out.width - KERNEL_ROOM))
    cells: list[list[str | Text]] = []
    reasons: list[tuple[str, str]] = []
    for row in rows:
        label = (f"call of {len(row.parts)} kernels" if row.parts else labels[row.kernel])
        cells.append([label, fmt.nbytes(row.ledger_read_bytes),
                      "—" if row.dram_read_bytes is None else fmt.nbytes(row.dram_read_bytes),
                      "—" if row.read_ratio is None else f"{row.read_ratio:.3f}",
                      Text(row.verdict, style=STYLE[row.verdict]),
                      "—" if row.ledger_write_bytes is None else fmt.nbytes(row.ledger_write_bytes),
                      "—" if row.dram_write_bytes is None else fmt.nbytes(row.dram_write_bytes),
                      row.reason])
        reasons.append((label, row.reason))
        for part in row.parts:  # its reason is the call's: the └ says whose part it is
            cells.append([f" └ #{part.launch_id} {labels[part.kernel]}", "",
                          "—" if part.dram_read_bytes is None else fmt.nbytes(part.dram_read_bytes),
                          "", "", "",
                          "—" if part.dram_write_bytes is None
                          else fmt.nbytes(part.dram_write_bytes), ""])
    fitted = fit_table(AUDIT_COLUMNS, cells, out.width)
    print_hanging(out, f"Bytes audit: {ledger.name} (FAIL < {FAIL_BELOW}x, WARN > "
                       f"{WARN_ABOVE}x of the ledger's reads"
                       + ("; └ #N: launch N of the call above)" if any(r.parts for r in rows)
                          else ")"))
    out.print(fitted.table)
    for name, label in labels.items():  # names told apart only by a number, in full
        if label.endswith("]"):
            print_hanging(out, f"{label[label.rindex('['):]} {name}")
    if "why" in fitted.dropped:
        for label, reason in reasons:
            print_hanging(out, f"{label}: {reason}")
    quiet = fitted.dropped != ("why",) and fitted.note()
    if quiet:
        out.print(f"(left out at this width: "
                  f"{', '.join(d for d in fitted.dropped if d != 'why')}; "
                  "a wider terminal or --json shows them)", style="dim", markup=False)
    click.get_current_context().exit(exit_code(rows))
