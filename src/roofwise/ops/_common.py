"""Unit keys, the dtype -> tensor-core map and parameter checks every operator family shares.

This module is the single home of the unit-key constants (`CUDA`, `SFU`, `TF32`) and of the
dtype -> tensor-core unit map (`TENSOR_CORE_UNITS`); the ops, the case study and the
measurement side (trace, torch_ops) import them from here instead of restating them.

Counting conventions common to the families (each module states its own on top):
- an FMA is 2 FLOPs, a multiply or add 1, a compare (max, clamp, select) 1;
- exp, tanh, erf, rsqrt and reciprocals are 1 transcendental each on the special-function
  pipe (`sfu.fp32`); the log2(e) pre-scale of an exp2-based exp is part of the exp;
- dtype conversions are free (they ride on loads and stores);
- contractions are 2*M*N*K on the tensor cores of the compute dtype.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from roofwise.base import numbers
from roofwise.base.dtypes import bytes_per_element
from roofwise.base.errors import InputError
from roofwise.base.text import shown

CUDA = "cuda_core.fp32"  # fp32 arithmetic and compares on the CUDA cores
SFU = "sfu.fp32"  # transcendentals (exp, rsqrt, reciprocal, tanh) on the special-function pipe
TF32 = "tensor_core.tf32"  # fp32 contractions when the caller allows TF32

_TENSOR_CORE_DTYPES = {
    "bf16": "bf16", "bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16",
    "tf32": "tf32",
    "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8", "float8_e5m2fnuz": "fp8",
}
# dtype name (ledger and torch spellings) -> the tensor-core unit a contraction in it runs on
TENSOR_CORE_UNITS: Mapping[str, str] = MappingProxyType(
    {name: f"tensor_core.{kind}" for name, kind in _TENSOR_CORE_DTYPES.items()})
FP32_DTYPES = ("fp32", "float32")


def dtype(value: str, where: str) -> str:
    """A known storage dtype, lower-cased; InputError naming `where` otherwise."""
    bytes_per_element(value, where)
    return value.lower()


def is_fp8(value: str) -> bool:
    return TENSOR_CORE_UNITS.get(value.lower()) == "tensor_core.fp8"


def contraction_unit(compute_dtype: str, where: str, allow_tf32: bool = False) -> str:
    """The unit an optimal contraction in `compute_dtype` runs on.

    fp32 inputs run on the TF32 tensor cores only when the caller allows it (as PyTorch's
    `allow_tf32`); otherwise they are true fp32 FMAs on the CUDA cores.
    """
    key = compute_dtype.lower()
    if key in FP32_DTYPES:
        return TF32 if allow_tf32 else CUDA
    if key not in TENSOR_CORE_UNITS:
        known = ", ".join([*TENSOR_CORE_UNITS, *FP32_DTYPES])
        raise InputError(where, f"no contraction unit for dtype {compute_dtype!r}; expected "
                                f"one of {known}")
    return TENSOR_CORE_UNITS[key]


def positive(value: int, where: str) -> int:
    """A size: an int above zero and at most numbers.COUNT_CEILING (products stay exact)."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(where, f"expected a positive integer, got {shown(value)}")
    numbers.check_count(value, where)
    return value


def non_negative(value: int, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(where, f"expected an integer >= 0, got {shown(value)}")
    numbers.check_count(value, where)
    return value


def choice(value: str, options: Sequence[str], where: str) -> str:
    if value not in options:
        raise InputError(where, f"expected one of {', '.join(options)}, got {value!r}")
    return value


def shape(value: Sequence[int], where: str) -> tuple[int, ...]:
    """Positive sizes whose product (in Python ints, exact) is at most numbers.COUNT_CEILING."""
    dims = tuple(value)
    if not dims or any(isinstance(d, bool) or not isinstance(d, int) or d <= 0 for d in dims):
        raise InputError(where, "expected a non-empty shape of positive integers, got "
                                f"{shown(value)}")
    numbers.check_count(elements(dims), f"{where} (elements)")
    return dims


def elements(dims: Sequence[int]) -> int:
    """The element count of a shape, exact: Python ints never wrap as an int64 product does."""
    return math.prod(int(d) for d in dims)
