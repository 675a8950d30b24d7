"""What `trace` needs before tracing: the function named `MODULE:FUNCTION`, and example
inputs built from `NAME=DIMS:DTYPE` specs as meta tensors bound to its signature.

Library code, so the Python API traces exactly as `roofwise trace` does; torch is passed in by
the caller (imported only when tracing is asked for).
"""

from __future__ import annotations

import importlib
import inspect
import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from roofwise.base.dtypes import bytes_per_element
from roofwise.base.errors import InputError

MAX_TENSOR_BYTES = 2**63 - 1  # torch sizes and storage byte counts are int64
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# roofwise dtype names (roofwise.base.dtypes) whose torch spelling differs; the others are torch's
_TORCH_SPELLING = {
    "bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32",
    "fp64": "float64", "fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
}


@dataclass(frozen=True)
class ShapeSpec:
    """One --shape: the argument's name, its dimensions and its dtype (a roofwise name)."""

    name: str
    dims: tuple[int, ...]
    dtype: str


def parse_shape_spec(text: str) -> ShapeSpec:
    """`q=4096x32x128:bf16` -> ShapeSpec; errors name the argument and the part at fault."""
    name, sep, rest = text.strip().partition("=")
    name = name.strip()
    if not sep or not _NAME.match(name):
        raise InputError(f"--shape {text}", "expected NAME=DIMS[:DTYPE], e.g. "
                                            "q=4096x32x128:bf16")
    dims_text, _, dtype = rest.partition(":")
    where = f"--shape {name}"
    parts = dims_text.strip().split("x")
    if not all(p.strip().isdigit() for p in parts):
        raise InputError(where, f"expected DIMS like 4096x32x128 (positive integers joined by "
                                f"x), got {dims_text!r}")
    dims = tuple(int(p) for p in parts)
    if any(d <= 0 for d in dims):
        raise InputError(where, f"every dimension must be positive, got {dims_text!r}")
    dtype = (dtype.strip() or "fp32").lower()
    nbytes = math.prod(dims) * bytes_per_element(dtype, f"{where} dtype")
    if max(dims) > MAX_TENSOR_BYTES or nbytes > MAX_TENSOR_BYTES:
        raise InputError(where, f"{dims_text.strip()} of {dtype} is {nbytes:.3g} bytes, more "
                                "than a torch tensor can address (2**63 - 1 bytes)")
    return ShapeSpec(name, dims, dtype)


def torch_dtype(dtype: str, where: str, torch: Any) -> Any:
    """The torch dtype of a roofwise dtype name (the `fp8` alias is float8_e4m3fn)."""
    found = getattr(torch, _TORCH_SPELLING.get(dtype, dtype), None)
    if not isinstance(found, torch.dtype):
        raise InputError(where, f"dtype {dtype!r} has no torch tensor dtype to trace with")
    return found


def load_function(target: str) -> Callable[..., Any]:
    module_name, _, func_name = target.partition(":")
    if not module_name or not func_name:
        raise InputError("trace MODULE:FUNCTION", f"expected module.path:function, got {target!r}")
    try:
        module = import_from_cwd(module_name)
    except ImportError as exc:
        raise InputError(f"trace {target}", f"cannot import module {module_name!r}: {exc}") \
            from None
    except Exception as exc:
        raise InputError(f"trace {target}", f"importing {module_name!r} raised "
                                            f"{type(exc).__name__}: {exc}") from None
    if not hasattr(module, func_name):
        raise InputError(f"trace {target}", f"module {module_name!r} has no function "
                                            f"{func_name!r}")
    fn = getattr(module, func_name)
    if not callable(fn):
        raise InputError(f"trace {target}", f"{func_name!r} in {module_name} is not callable; "
                                            "expected a function")
    return fn


def import_from_cwd(module_name: str) -> Any:
    """Import with the current directory first on sys.path, as `python -m` does, so that a
    module beside the user needs no PYTHONPATH; sys.path is restored afterwards."""
    cwd = os.getcwd()
    sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_name)
    finally:
        sys.path.remove(cwd)  # removes the first occurrence: the one inserted above


def example_inputs(fn: Callable[..., Any], target: str, specs: tuple[str, ...],
                    torch: Any) -> tuple[list[Any], dict[str, Any]]:
    """Meta tensors in signature order: positional while contiguous, then by keyword."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        raise InputError(f"trace {target}", "has no Python signature to bind --shape to (a "
                                            "builtin); wrap it in a Python function") from None
    given: dict[str, Any] = {}
    for text in specs:
        spec = parse_shape_spec(text)
        if spec.name in given:
            raise InputError(f"--shape {spec.name}", "given twice")
        dtype = torch_dtype(spec.dtype, f"--shape {spec.name} dtype", torch)
        try:
            given[spec.name] = torch.empty(spec.dims, device="meta", dtype=dtype)
        except (RuntimeError, TypeError, ValueError) as exc:  # torch's own size limits
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"--shape {spec.name}", f"torch cannot make this tensor: "
                                                     f"{first}") from None
    params = [p for p in signature.parameters.values()
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    known = [p.name for p in params]
    extra = [name for name in given if name not in known]
    if extra:
        raise InputError(f"--shape {extra[0]}", f"{target} has no parameter {extra[0]!r}; "
                                                f"parameters: {', '.join(known)}")
    missing = [p.name for p in params if p.default is p.empty and p.name not in given]
    if missing:
        raise InputError("--shape", f"{target} needs a --shape for {', '.join(missing)}")
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in params:
        if p.name not in given:
            continue
        if not kwargs and len(args) == params.index(p) and p.kind != p.KEYWORD_ONLY:
            args.append(given[p.name])
        else:
            kwargs[p.name] = given[p.name]
    return args, kwargs
