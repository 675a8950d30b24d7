"""roofwise: how far a kernel is from the speed of light, never told wrongly.

Names load on first use (PEP 562), so that `import roofwise` (and `roofwise --help`) costs no
numpy, polars, matplotlib or torch until a name that needs them is touched.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> the module that defines it
_EXPORTS = {
    "Analysis": "analysis", "analyze": "analysis", "analyze_file": "analysis",
    "InputError": "errors",
    "Ledger": "ledger", "Role": "ledger", "Tensor": "ledger", "Work": "ledger",
    "fuse": "ledger", "separate": "ledger",
    "ComputeUnit": "machine", "LatencyFloor": "machine", "Machine": "machine",
    "MemoryLevel": "machine",
    "LedgerPrice": "pricing", "cycles_by_unit": "pricing", "price_columns": "pricing",
    "price_ledger": "pricing",
    "builtin_machines": "profiles", "load_machine": "profiles", "match_device": "profiles",
    "resolve_machine": "profiles",
    "VERDICTS": "verdict", "judge": "verdict",
}

if TYPE_CHECKING:
    from .analysis import Analysis, analyze, analyze_file
    from .errors import InputError
    from .ledger import Ledger, Role, Tensor, Work, fuse, separate
    from .machine import ComputeUnit, LatencyFloor, Machine, MemoryLevel
    from .pricing import LedgerPrice, cycles_by_unit, price_columns, price_ledger
    from .profiles import builtin_machines, load_machine, match_device, resolve_machine
    from .verdict import VERDICTS, judge


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'roofwise' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


def bench(*args: Any, **kwargs: Any) -> Any:
    """`roofwise.measure.bench.bench`, imported on first use so torch stays optional."""
    from .measure.bench import bench as _bench

    return _bench(*args, **kwargs)


__all__ = [
    "VERDICTS", "Analysis", "ComputeUnit", "InputError", "LatencyFloor", "Ledger",
    "LedgerPrice", "Machine", "MemoryLevel", "Role", "Tensor", "Work", "analyze",
    "analyze_file", "bench", "builtin_machines", "cycles_by_unit", "fuse", "judge",
    "load_machine", "match_device", "price_columns", "price_ledger", "resolve_machine",
    "separate",
]
