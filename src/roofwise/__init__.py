"""roofwise: how far a kernel is from the speed of light, never told wrongly.

The small top level, for notebooks and scripts (each documented, with units):

- `machine(name)`: a profile (`builtin_machines()` lists them);
- `op(name, **params)`, `Ledger`/`Tensor`/`Work`, `fuse`, `separate`, `load_ledger`: ledgers;
- `price(op_or_ledger, machine, **params)`: the speed-of-light price of one call;
- `analyze_file(path, machine=None)`: a verdict per benchmark record;
- `plot(analysis)`, `report(analysis, path)`: the chart (matplotlib) and the HTML report;
- `judge_dataset(path_or_url, scheduler=...)`: a dataset of shards judged on a Dask cluster
  (the `fleet` extra; docs/fleet.md).

Names load on first use (PEP 562), so that `import roofwise` (and `roofwise --help`) costs no
numpy, polars, matplotlib or torch until a name that needs them is touched.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> the module that defines it
_EXPORTS = {
    "Analysis": "output.analysis", "analyze": "output.analysis",
    "analyze_file": "api", "op": "api", "plot": "api", "price": "api",
    "judge_dataset": "fleet.engine",
    "InputError": "base.errors",
    "Ledger": "ledgers.ledger", "Role": "ledgers.ledger", "Tensor": "ledgers.ledger",
    "Work": "ledgers.ledger", "fuse": "ledgers.ledger", "separate": "ledgers.ledger",
    "load_ledger": "ledgers.files",
    "ComputeUnit": "profiles.machine", "LatencyFloors": "profiles.machine",
    "Machine": "profiles.machine", "MemoryLevel": "profiles.machine",
    "TimingFloor": "profiles.machine",
    "LedgerPrice": "pricing.core", "cycles_by_unit": "pricing.core",
    "price_columns": "pricing.core", "price_ledger": "pricing.core",
    "builtin_machines": "profiles.load", "load_machine": "profiles.load",
    "match_device": "profiles.load", "resolve_machine": "profiles.load",
    "VERDICTS": "verdicts.rules", "judge": "verdicts.rules",
}

if TYPE_CHECKING:
    from roofwise.api import analyze_file, op, plot, price
    from roofwise.base.errors import InputError
    from roofwise.fleet.engine import judge_dataset
    from roofwise.ledgers.files import load_ledger
    from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work, fuse, separate
    from roofwise.output.analysis import Analysis, analyze
    from roofwise.pricing.core import LedgerPrice, cycles_by_unit, price_columns, price_ledger
    from roofwise.profiles.load import builtin_machines, load_machine, match_device, resolve_machine
    from roofwise.profiles.machine import (
        ComputeUnit,
        LatencyFloors,
        Machine,
        MemoryLevel,
        TimingFloor,
    )
    from roofwise.verdicts.rules import VERDICTS, judge


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'roofwise' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


def machine(name: Any) -> Any:
    """A machine profile by name, alias, short name or YAML path (`roofwise.api.machine`)."""
    from roofwise.api import machine as _machine  # deferred: `import roofwise` stays light

    return _machine(name)


def report(*args: Any, **kwargs: Any) -> Any:
    """Write the self-contained HTML report to a path and return it (`roofwise.api.report`)."""
    from roofwise.api import report as _report  # deferred: matplotlib on first use

    return _report(*args, **kwargs)


def bench(*args: Any, **kwargs: Any) -> Any:
    """`roofwise.measure.bench.bench`, imported on first use so torch stays optional."""
    from roofwise.measure.bench import bench as _bench  # deferred: torch on first use

    return _bench(*args, **kwargs)


__all__ = [
    "VERDICTS", "Analysis", "ComputeUnit", "InputError", "LatencyFloors", "Ledger",
    "LedgerPrice", "Machine", "MemoryLevel", "Role", "Tensor", "TimingFloor", "Work", "analyze",
    "analyze_file", "bench", "builtin_machines", "cycles_by_unit", "fuse", "judge",
    "judge_dataset",
    "load_ledger", "load_machine", "machine", "match_device", "op", "plot", "price",
    "price_columns", "price_ledger", "report", "resolve_machine", "separate",
]
