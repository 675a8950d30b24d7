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

`silu_work`, `swiglu_work` and `gelu_work` are these counts as work entries, so that an op
embedding an activation (the MoE experts) reuses them rather than restating them.
"""

from __future__ import annotations

from collections.abc import Callable

from roofwise.base.errors import InputError
from roofwise.base.text import shown
from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work
from roofwise.ops import _common as c

GELU_APPROXIMATIONS = ("tanh", "erf")


def silu_work(elems: int, label: str = "") -> tuple[Work, ...]:
    """SiLU's work on `elems` elements; `label` prefixes each entry (an op embedding it)."""
    return (Work(c.CUDA, "arithmetic", 2 * elems, f"{label}1 + e, x * r; 2/elem"),
            Work(c.SFU, "transcendental", 2 * elems, f"{label}exp and reciprocal, 2/elem"))


def swiglu_work(elems: int, label: str = "") -> tuple[Work, ...]:
    """SwiGLU's work on `elems` output elements: SiLU of the gate plus the multiply by up."""
    return (Work(c.CUDA, "arithmetic", 3 * elems, f"{label}SiLU (2) and times up (1), 3/elem"),
            Work(c.SFU, "transcendental", 2 * elems, f"{label}exp and reciprocal, 2/elem"))


def gelu_work(elems: int, approximate: str = "tanh", label: str = "") -> tuple[Work, ...]:
    """GELU's work on `elems` elements, tanh approximation or exact (erf)."""
    c.choice(approximate, GELU_APPROXIMATIONS, "gelu.approximate")
    arith = 8 if approximate == "tanh" else 4
    return (Work(c.CUDA, "arithmetic", arith * elems,
                 f"{label}polynomial and scaling, {arith}/elem"),
            Work(c.SFU, "transcendental", elems, f"{label}{approximate}, 1/elem"))


def _unary(name: str, shape: tuple[int, ...], dtype: str, out_dtype: str,
           work: Callable[[int], tuple[Work, ...]],
           in_shape: tuple[int, ...] | None = None) -> Ledger:
    dims = c.shape(shape, f"{name}.shape")
    in_dtype = c.dtype(dtype, f"{name}.dtype")
    out = in_dtype if out_dtype == "auto" else c.dtype(out_dtype, f"{name}.out_dtype")
    elems = c.elements(dims)
    return Ledger(name=name, roof=c.CUDA, tensors=(
        Tensor("x", in_shape or dims, in_dtype, Role.INPUT),
        Tensor("y", dims, out, Role.OUTPUT),
    ), work=work(elems))


def silu(shape: tuple[int, ...] = (4096, 14336), dtype: str = "bf16",
         out_dtype: str = "auto") -> Ledger:
    """SiLU (swish): x * sigmoid(x)."""
    return _unary("silu", shape, dtype, out_dtype, silu_work)


def gelu(shape: tuple[int, ...] = (4096, 14336), approximate: str = "tanh",
         dtype: str = "bf16", out_dtype: str = "auto") -> Ledger:
    """GELU, tanh approximation or exact (erf)."""
    c.choice(approximate, GELU_APPROXIMATIONS, "gelu.approximate")
    return _unary("gelu", shape, dtype, out_dtype, lambda n: gelu_work(n, approximate))


def swiglu(shape: tuple[int, ...] = (4096, 14336), dtype: str = "bf16",
           out_dtype: str = "auto") -> Ledger:
    """SwiGLU: silu(gate) * up, gate and up the two halves of one (..., 2*hidden) input."""
    dims = c.shape(shape, "swiglu.shape")
    return _unary("swiglu", dims, dtype, out_dtype, swiglu_work,
                  in_shape=(*dims[:-1], 2 * dims[-1]))


def _broadcast(a: tuple[int, ...], b: tuple[int, ...], where: str) -> tuple[int, ...]:
    """numpy's broadcasting rule on exact Python ints (numpy's own would stop at int64)."""
    width = max(len(a), len(b))
    out = []
    for x, y in zip((1,) * (width - len(a)) + a, (1,) * (width - len(b)) + b, strict=True):
        if x != y and 1 not in (x, y):
            raise InputError(where, f"shapes {shown(a)} and {shown(b)} "
                                    "do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def _binary(name: str, a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: str,
            out_dtype: str) -> Ledger:
    a = c.shape(a_shape, f"{name}.a_shape")
    b = c.shape(b_shape, f"{name}.b_shape")
    out_shape = c.shape(_broadcast(a, b, f"{name}.b_shape"), f"{name} output shape")
    in_dtype = c.dtype(dtype, f"{name}.dtype")
    out = in_dtype if out_dtype == "auto" else c.dtype(out_dtype, f"{name}.out_dtype")
    elems = c.elements(out_shape)
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
