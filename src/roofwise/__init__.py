"""roofwise: how far a kernel is from the speed of light, never told wrongly.

The small top level, for notebooks and scripts (each documented, with units):

- `machine(name)`: a profile (`builtin_machines()` lists them);
- `op(name, **params)`, `Ledger`/`Tensor`/`Work`, `fuse`, `separate`, `load_ledger`: ledgers;
- `price(op_or_ledger, machine, **params)`: the speed-of-light price of one call;
- `analyze_file(path, machine=None)`: a verdict per benchmark record;
- `plot(analysis)`, `report(analysis, path)`: the chart (matplotlib) and the HTML report.
"""

from typing import Any

from .analysis import Analysis, analyze
from .api import analyze_file, machine, op, plot, price, report
from .errors import InputError
from .ledger import Ledger, Role, Tensor, Work, fuse, separate
from .ledgerio import load_ledger
from .machine import ComputeUnit, LatencyFloors, Machine, MemoryLevel, TimingFloor
from .pricing import LedgerPrice, cycles_by_unit, price_columns, price_ledger
from .profiles import builtin_machines, load_machine, match_device, resolve_machine
from .verdict import VERDICTS, judge

__version__ = "0.1.0"


def bench(*args: Any, **kwargs: Any) -> Any:
    """`roofwise.measure.bench.bench`, imported on first use so torch stays optional."""
    from .measure.bench import bench as _bench

    return _bench(*args, **kwargs)


__all__ = [
    "VERDICTS", "Analysis", "ComputeUnit", "InputError", "LatencyFloors", "Ledger",
    "LedgerPrice", "Machine", "MemoryLevel", "Role", "Tensor", "TimingFloor", "Work", "analyze",
    "analyze_file", "bench", "builtin_machines", "cycles_by_unit", "fuse", "judge",
    "load_ledger", "load_machine", "machine", "match_device", "op", "plot", "price",
    "price_columns", "price_ledger", "report", "resolve_machine", "separate",
]
