"""Element sizes of the dtypes kernels move, in bytes."""

from __future__ import annotations

from roofwise.base.errors import InputError

BYTES_PER_ELEMENT: dict[str, float] = {
    "fp64": 8, "float64": 8,
    "fp32": 4, "float32": 4, "tf32": 4,
    "fp16": 2, "float16": 2, "half": 2,
    "bf16": 2, "bfloat16": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1,
    "fp4": 0.5, "fp4_e2m1": 0.5,
    "int4": 0.5, "uint4": 0.5, "nf4": 0.5,  # packed two to a byte (AWQ, GPTQ, bitsandbytes)
    "complex128": 16, "complex64": 8,  # rotary embeddings in complex form (DeepSeek)
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
}


def bytes_per_element(dtype: str, where: str = "dtype") -> float:
    try:
        return BYTES_PER_ELEMENT[dtype.lower()]
    except KeyError:
        known = ", ".join(sorted(BYTES_PER_ELEMENT))
        raise InputError(where, f"unknown dtype {dtype!r}; expected one of {known}") from None
