"""What a lint check returns (a Finding) and the vocabulary every check shares.

A finding says which code fired, the numbers that decided it, and the one-line fix. Errors
mean the reading is wrong; warnings mean it needs a qualifier before a person acts on it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from roofwise.base import fmt

if TYPE_CHECKING:
    import polars as pl

ERROR = "error"
WARNING = "warning"

CODES = {
    "M1": "a ceiling taken from a datasheet (no calibration) or a sparse peak",
    "M2": "an operator with no contraction priced on a matrix-unit (tensor-core) roof",
    "M3": "a roof that follows the input dtype where the algorithm says otherwise",
    "M4": "a fused call judged with a stage's intensity, or bytes that match a stage's",
    "M5": "transcendentals that bind the special-function pipe, or charged like a multiply",
    "M6": "a ledger or record that leaves out tensors the operator reads",
    "M7": "a number read from a row below the latency floor",
    "M8": "efficiency above 105%, or a rate above a theoretical ceiling",
    "R1": "a unit the machine profile does not have (a typo, or the wrong profile)",
    "R2": "a profile calibrated below this card: many rows of one ceiling sit above it",
}

MATRIX_PREFIXES = ("tensor_core.", "ascend_cube.")
_DTYPE_FAMILY = (("fp8", ("fp8", "float8")), ("bf16", ("bf16", "bfloat16")),
                 ("fp16", ("fp16", "float16", "half")), ("tf32", ("tf32",)),
                 ("fp32", ("fp32", "float32", "float")))


@dataclass(frozen=True)
class Finding:
    code: str  # a key of CODES
    severity: str  # "error" | "warning"
    where: str
    reason: str  # one line, with the numbers that decided it
    fix: str  # one line

    def brief(self) -> dict[str, str]:
        return {"code": self.code, "reason": self.reason, "fix": self.fix}

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "severity": self.severity, "where": self.where,
                "reason": self.reason, "fix": self.fix}


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(f.severity == ERROR for f in findings)


def is_matrix_unit(key: str) -> bool:
    return key.startswith(MATRIX_PREFIXES)


def is_sfu_unit(key: str) -> bool:
    family, _, kind = key.partition(".")
    return family == "sfu" or kind == "sfu"


def busiest(ops_by_unit: Mapping[str, float]) -> str:
    """The unit with the most ops (the first on a tie)."""
    return max(ops_by_unit, key=lambda k: ops_by_unit[k])


def nbytes_text(value: float) -> str:
    return f"{fmt.exact(value)} B"


def nbytes_text_column(values: object) -> pl.Series:
    """`nbytes_text(v)` of every value."""
    return fmt.exact_column(values) + " B"


def ops_text(value: float) -> str:
    return fmt.exact(value)


def intensity_text(flops: float, nbytes: float) -> str:
    return f"{flops / nbytes:.2f}" if nbytes else "inf"


def same_count(a: float, b: float) -> bool:
    """Equal byte or op counts, allowing float round-off of integers read from a file."""
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.5)


def dtype_family(dtype: str) -> str:
    low = dtype.lower()
    for family, prefixes in _DTYPE_FAMILY:
        if low.startswith(prefixes):
            return family
    return low


UNIT_NOT_ON_MACHINE_FIX = "declare a unit the profile has, or use a profile that has it"
