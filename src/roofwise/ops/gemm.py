"""GEMM and batched GEMM: C = A @ B (+ bias), optionally with fp8 inputs and their scales.

Convention:
- A (batch, m, k) and B (batch, k, n) are read once, C (batch, m, n) written once; the batch
  dimension is dropped when batch is 1. B is the weight-like operand.
- the contraction is 2*batch*m*n*k on the tensor cores of the input dtype (fp8 -> fp8; fp32 on
  tf32 only with `allow_tf32`, else on the CUDA cores);
- fp8 scales: `scale="tensor"` one fp32 scale for A and one for B (lookups); `scale="row"`
  one per row of A (an input: it comes with the activations) and one per column of B (a
  lookup). The epilogue multiplies each output by the combined scale: 1 multiply per output
  for per-tensor (plus the one product a_scale*b_scale), 2 for per-row;
- bias (n,) in the output dtype is a lookup, 1 add per output;
- epilogue work runs on cuda_core.fp32; conversion to the output dtype is free.
"""

from __future__ import annotations

from roofwise.base.errors import InputError
from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work
from roofwise.ops import _common as c

SCALES = ("auto", "none", "tensor", "row")


def batched_gemm(batch: int = 8, m: int = 4096, n: int = 4096, k: int = 4096,
                 dtype: str = "bf16", out_dtype: str = "auto", scale: str = "auto",
                 bias: bool = False, allow_tf32: bool = False) -> Ledger:
    """Batched GEMM: `batch` independent (m x k) @ (k x n) products, each with its own B."""
    where = "batched_gemm" if batch != 1 else "gemm"
    c.positive(batch, f"{where}.batch")
    for name, size in (("m", m), ("n", n), ("k", k)):
        c.positive(size, f"{where}.{name}")
    in_dtype = c.dtype(dtype, f"{where}.dtype")
    fp8 = c.is_fp8(in_dtype)
    c.choice(scale, SCALES, f"{where}.scale")
    scale_kind = ("tensor" if fp8 else "none") if scale == "auto" else scale
    if scale_kind != "none" and not fp8:
        raise InputError(f"{where}.scale",
                         f"scales apply to fp8 inputs; dtype {in_dtype} takes scale=none")
    out = ({"tf32": "fp32"}.get(in_dtype, "bf16" if fp8 else in_dtype)
           if out_dtype == "auto" else c.dtype(out_dtype, f"{where}.out_dtype"))
    unit = c.contraction_unit(in_dtype, f"{where}.dtype", allow_tf32)

    lead = (batch,) if batch != 1 else ()
    tensors = [Tensor("a", (*lead, m, k), in_dtype, Role.INPUT),
               Tensor("b", (*lead, k, n), in_dtype, Role.INPUT),
               Tensor("c", (*lead, m, n), out, Role.OUTPUT)]
    outputs = batch * m * n
    work = [Work(unit, "contraction", 2 * batch * m * n * k, "A @ B, 2*batch*m*n*k")]
    if scale_kind == "tensor":
        tensors += [Tensor("a_scale", (1,), "fp32", Role.LOOKUP),
                    Tensor("b_scale", (1,), "fp32", Role.LOOKUP)]
        work.append(Work(c.CUDA, "arithmetic", outputs + 1,
                         "acc * (a_scale*b_scale), 1/output + 1"))
    elif scale_kind == "row":
        tensors += [Tensor("a_scale", (*lead, m), "fp32", Role.INPUT),
                    Tensor("b_scale", (*lead, n), "fp32", Role.LOOKUP)]
        work.append(Work(c.CUDA, "arithmetic", 2 * outputs, "acc * a_scale[i] * b_scale[j], "
                                                            "2/output"))
    if bias:
        tensors.append(Tensor("bias", (n,), out, Role.LOOKUP))
        work.append(Work(c.CUDA, "arithmetic", outputs, "bias add, 1/output"))
    return Ledger(name=where, roof=unit, tensors=tuple(tensors), work=tuple(work),
                  notes=(f"{in_dtype} inputs, {out} output, scale={scale_kind}",))


def gemm(m: int = 4096, n: int = 4096, k: int = 4096, dtype: str = "bf16",
         out_dtype: str = "auto", scale: str = "auto", bias: bool = False,
         allow_tf32: bool = False) -> Ledger:
    """GEMM: (m x k) @ (k x n) -> (m x n), on the tensor cores of the input dtype."""
    return batched_gemm(1, m, n, k, dtype, out_dtype, scale, bias, allow_tf32)

