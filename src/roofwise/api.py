"""The Python API in a few calls, for notebooks and scripts; the CLI is a thin shell over it.

    >>> import roofwise
    >>> h200 = roofwise.machine("h200")
    >>> p = roofwise.price("gemm", h200, m=4096, n=4096, k=4096, dtype="bf16")
    >>> a = roofwise.analyze_file("examples/records.jsonl")
    >>> fig = roofwise.plot(a)                          # a matplotlib Figure
    >>> roofwise.report(a, "report.html")               # one self-contained HTML file

Units: times in seconds, sizes in bytes, rates in operations (FLOP) or bytes per second.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofwise.base.errors import InputError
from roofwise.ledgers.files import load_ledger
from roofwise.ledgers.ledger import Ledger
from roofwise.ops import OPS, op_function
from roofwise.output.analysis import Analysis, analyze
from roofwise.pricing.core import LedgerPrice, price_ledger
from roofwise.profiles.load import builtin_machines, resolve_machine
from roofwise.profiles.machine import Machine
from roofwise.records.read import read_records

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def machine(name: str | Machine) -> Machine:
    """A machine profile: a built-in by name, alias or unambiguous short name (`"h100"` is
    h100-sxm), or a profile YAML by path. `roofwise.builtin_machines()` lists the built-ins."""
    return name if isinstance(name, Machine) else resolve_machine(name)


_profile = machine  # `machine` is also analyze_file's parameter


def op(name: str, **params: Any) -> Ledger:
    """The ledger of a library operator (`roofwise ops` lists them), e.g.
    `op("gemm", m=4096, n=4096, k=4096, dtype="bf16")`: bytes each call must move and its
    work (FLOP per unit and class). Parameters are Python values, as in `roofwise.ops`."""
    return op_function(name)(**params)


def price(target: str | Path | Ledger, on: str | Machine, *, regime: str | None = None,
          mix: str | None = None, **params: Any) -> LedgerPrice:
    """The speed-of-light price of one call on machine `on`: memory and compute times (s), the
    bound, intensity (FLOP/byte). `target` is a Ledger, a ledger YAML path, or an operator name
    whose parameters are the keyword arguments. `regime`/`mix` default to the envelope (the
    highest measured). On a profile with no clock (ascend-a5-vector) use
    `roofwise.pricing.core.price_ledger_cycles` instead: seconds would be a guess."""
    return price_ledger(_ledger(target, params), machine(on), regime, mix)


def analyze_file(path: str | Path, machine: str | Machine | None = None, *,
                 regime: str | None = None, mix: str | None = None,
                 strict: bool = False) -> Analysis:
    """Judge a record file (JSONL, CSV, Parquet) or a folder of shards: a verdict per record,
    worst first in its renderings. `machine` is a profile, a built-in name or a profile YAML;
    without it each record's `device` picks its profile. Malformed records are left out and
    listed in `Analysis.skipped` with their file:line (`strict=True` raises InputError on the
    first) as `roofwise analyze` does. `.to_polars()` / `.to_pandas()` give the verdicts as a
    frame."""
    loaded = read_records(str(path), strict=strict)
    chosen = None if machine is None else _profile(machine)
    result = analyze(loaded.columns, builtin_machines(), chosen, regime, mix)
    return dataclasses.replace(result, skipped=loaded.skipped)


def plot(runs: Analysis | str | Path | list[tuple[str, Analysis]], path: str | Path | None = None,
         *, machine: str | Machine | None = None, title: str | None = None) -> Figure:
    """The roofline chart of one analysis (or a record file, or labelled runs) as a matplotlib
    Figure; also written to `path` (.png, .svg, .pdf) when given."""
    from roofwise.render.chart import roofline_figure, save_figure  # deferred: matplotlib

    if isinstance(runs, (str, Path)):
        runs = [(Path(runs).stem, analyze_file(runs, machine))]
    elif isinstance(runs, Analysis):
        runs = [("records", runs)]
    fig = roofline_figure(runs, title=title)
    if path is not None:
        save_figure(fig, path)
    return fig


def report(analysis: Analysis | str | Path, path: str | Path, *,
           machine: str | Machine | None = None, title: str = "roofwise report",
           rows: int = 2000) -> Path:
    """Write the self-contained HTML report (chart, verdict table, lint, profile) to `path`
    (.html) and return it. The table holds the `rows` worst rows (0: all); the summary and the
    chart count every row."""
    from roofwise.render.html import check_report_path, write_report  # deferred: matplotlib

    check_report_path(path)
    source = ""
    if not isinstance(analysis, Analysis):
        source = str(analysis)
        analysis = analyze_file(analysis, machine)
    write_report(analysis, path, title=title, source=source, rows=rows)
    return Path(path)


def _ledger(target: str | Path | Ledger, params: dict[str, Any]) -> Ledger:
    if isinstance(target, Ledger):
        if params:
            raise InputError("price", "parameters apply to operator names, not to a Ledger")
        return target
    text = str(target)
    if text in OPS:
        return op(text, **params)
    if params:
        raise InputError("price", f"parameters apply to operator names; {text!r} is not one")
    return load_ledger(text)
