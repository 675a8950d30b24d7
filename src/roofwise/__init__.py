"""roofwise: how far a kernel is from the speed of light, never told wrongly."""

from typing import Any

from .analysis import Analysis, analyze, analyze_file
from .errors import InputError
from .ledger import Ledger, Role, Tensor, Work, fuse, separate
from .machine import ComputeUnit, LatencyFloor, Machine, MemoryLevel
from .pricing import LedgerPrice, cycles_by_unit, price_columns, price_ledger
from .profiles import builtin_machines, load_machine, match_device, resolve_machine
from .verdict import VERDICTS, judge

__version__ = "0.1.0"


def bench(*args: Any, **kwargs: Any) -> Any:
    """`roofwise.measure.bench.bench`, imported on first use so torch stays optional."""
    from .measure.bench import bench as _bench

    return _bench(*args, **kwargs)


__all__ = [
    "VERDICTS", "Analysis", "ComputeUnit", "InputError", "LatencyFloor", "Ledger",
    "LedgerPrice", "Machine", "MemoryLevel", "Role", "Tensor", "Work", "analyze", "analyze_file",
    "bench", "builtin_machines", "cycles_by_unit", "fuse", "judge", "load_machine",
    "match_device",
    "price_columns", "price_ledger", "resolve_machine", "separate",
]
