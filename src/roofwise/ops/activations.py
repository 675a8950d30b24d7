"""Elementwise activations (SiLU, GELU, SwiGLU) and binary arithmetic with broadcasting.

Convention: inputs read once, output written once, work per output element on
cuda_core.fp32 with transcendentals on sfu.fp32:
- SiLU x / (1 + exp(-x)): exp and reciprocal (2 transcendental), add and multiply (2);
- GELU tanh 0.5*x*(1 + tanh(c*x*(1 + a*x^2))): x*x, FMA (2), *x, *c, 1 + t, 0.5*x*(..) (2):
  8 arithmetic and one tanh;
- GELU erf 0.5*x*(1 + erf(x/sqrt(2))): x/sqrt(2), 1 + e, 0.5*x*(..) (2): 4 arithmetic and one
  erf, counted as one special function (as Ascend's erf; on NVIDIA it is a short polynomial);
- SwiGLU silu(gate) * up from one (..., 2*hidden) input: SiLU plus one multiply;
- add, mul: one arithmetic op per output element; a broadcast operand is read once (its own
  storage), never once per output.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..ledger import Ledger, Role, Tensor, Work
from . import _common as c

GELU_APPROXIMATIONS = ("tanh", "erf")


def _unary(name: str, shape: tuple[int, ...], dtype: str, out_dtype: str,
           work_per_elem: tuple[tuple[str, str, int, str], ...],
           in_shape: tuple[int, ...] | None = None) -> Ledger:
    dims = c.shape(shape, f"{name}.shape")
    in_dtype = c.dtype(dtype, f"{name}.dtype")
    out = in_dtype if out_dtype == "auto" else c.dtype(out_dtype, f"{name}.out_dtype")
    elems = int(np.prod(dims, dtype=np.int64))
    return Ledger(name=name, roof=c.CUDA, tensors=(
        Tensor("x", in_shape or dims, in_dtype, Role.INPUT),
        Tensor("y", dims, out, Role.OUTPUT),
    ), work=tuple(Work(unit, cls, n * elems, label) for unit, cls, n, label in work_per_elem))


def silu(shape: tuple[int, ...] = (4096, 14336), dtype: str = "bf16",
         out_dtype: str = "auto") -> Ledger:
    """SiLU (swish): x * sigmoid(x)."""
    return _unary("silu", shape, dtype, out_dtype, (
        (c.CUDA, "arithmetic", 2, "1 + e, x * r; 2/elem"),
        (c.SFU, "transcendental", 2, "exp and reciprocal, 2/elem")))


def gelu(shape: tuple[int, ...] = (4096, 14336), approximate: str = "tanh",
         dtype: str = "bf16", out_dtype: str = "auto") -> Ledger:
    """GELU, tanh approximation or exact (erf)."""
    c.choice(approximate, GELU_APPROXIMATIONS, "gelu.approximate")
    arith = 8 if approximate == "tanh" else 4
    return _unary("gelu", shape, dtype, out_dtype, (
        (c.CUDA, "arithmetic", arith, f"polynomial and scaling, {arith}/elem"),
        (c.SFU, "transcendental", 1, f"{approximate}, 1/elem")))


def swiglu(shape: tuple[int, ...] = (4096, 14336), dtype: str = "bf16",
           out_dtype: str = "auto") -> Ledger:
    """SwiGLU: silu(gate) * up, gate and up the two halves of one (..., 2*hidden) input."""
    dims = c.shape(shape, "swiglu.shape")
    return _unary("swiglu", dims, dtype, out_dtype, (
        (c.CUDA, "arithmetic", 3, "SiLU (2) and times up (1), 3/elem"),
        (c.SFU, "transcendental", 2, "exp and reciprocal, 2/elem")),
        in_shape=(*dims[:-1], 2 * dims[-1]))


def _binary(name: str, a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: str,
            out_dtype: str) -> Ledger:
    a = c.shape(a_shape, f"{name}.a_shape")
    b = c.shape(b_shape, f"{name}.b_shape")
    try:
        out_shape = tuple(int(d) for d in np.broadcast_shapes(a, b))
    except ValueError:
        raise InputError(f"{name}.b_shape", f"shapes {a} and {b} do not broadcast") from None
    in_dtype = c.dtype(dtype, f"{name}.dtype")
    out = in_dtype if out_dtype == "auto" else c.dtype(out_dtype, f"{name}.out_dtype")
    elems = int(np.prod(out_shape, dtype=np.int64))
    return Ledger(name=name, roof=c.CUDA, tensors=(
        Tensor("a", a, in_dtype, Role.INPUT), Tensor("b", b, in_dtype, Role.INPUT),
        Tensor("out", out_shape, out, Role.OUTPUT),
    ), work=(Work(c.CUDA, "arithmetic", elems, f"{name}, 1/output elem"),))


def add(a_shape: tuple[int, ...] = (4096, 4096), b_shape: tuple[int, ...] = (4096, 4096),
        dtype: str = "bf16", out_dtype: str = "auto") -> Ledger:
    """Elementwise a + b, numpy broadcasting."""
    return _binary("add", a_shape, b_shape, dtype, out_dtype)


def mul(a_shape: tuple[int, ...] = (4096, 4096), b_shape: tuple[int, ...] = (4096, 4096),
        dtype: str = "bf16", out_dtype: str = "auto") -> Ledger:
    """Elementwise a * b, numpy broadcasting."""
    return _binary("mul", a_shape, b_shape, dtype, out_dtype)
