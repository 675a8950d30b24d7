"""fp8 quantisation of a (rows, cols) activation: per token, per tensor, per block.

Convention (the seed's quant stage, generalised to any group): per element a running
|x| max (1 compare), the multiply by 1/scale (1 arithmetic) and the saturation to the fp8
range (1 compare); per group scale = amax / fp8_max and its reciprocal (2 arithmetic). The
scales (one fp32 per group) are outputs. Groups:
- per token: one per row;
- per block: `block_rows` x `block_size` tiles (1 x 128 for activations, 128 x 128 for
  weights), ceil-divided at the edges;
- per tensor: one group. A dynamic per-tensor scale needs the global amax before any element
  can be written, so x is read twice (an amax pass, then the quantise pass); with
  `dynamic=False` the scale is a given lookup and x is read once. Per-token and per-block
  groups fit on chip, so x is read once.
"""

from __future__ import annotations

from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work
from roofwise.ops import _common as c


def quant_work(elems: int, groups: int, group: str = "group") -> tuple[Work, ...]:
    """Dynamic fp8 quantisation of `elems` elements in `groups` scale groups (the convention
    above: 2 compares + 1 multiply per element, 2 arithmetic per group). The case study's
    fp8-quant stage is this with one group per row."""
    return (Work(c.CUDA, "compare", elems, "running amax of |x|, 1/elem"),
            Work(c.CUDA, "arithmetic", elems, "multiply by 1/scale, 1/elem"),
            Work(c.CUDA, "compare", elems, "saturate to the fp8 range, 1/elem"),
            Work(c.CUDA, "arithmetic", 2 * groups,
                 f"scale = amax/fp8_max and its reciprocal, 2/{group}"))


def _quant(name: str, rows: int, cols: int, groups: tuple[int, ...], dtype: str,
           out_dtype: str, reads_of_x: int = 1, scale_role: Role = Role.OUTPUT) -> Ledger:
    c.positive(rows, f"{name}.rows")
    c.positive(cols, f"{name}.cols")
    in_dtype = c.dtype(dtype, f"{name}.dtype")
    out = c.dtype(out_dtype, f"{name}.out_dtype")
    x = Tensor("x", (rows, cols), in_dtype, Role.INPUT)
    if reads_of_x > 1:
        x = x.charged_per_use(reads_of_x, x.nbytes)
    elems = rows * cols
    n_groups = 1
    for g in groups:
        n_groups *= g
    work = list(quant_work(elems, n_groups))
    if scale_role is Role.LOOKUP:  # a static scale: no amax, only the scale's reciprocal
        work = [work[1], work[2], Work(c.CUDA, "arithmetic", 1, "reciprocal of the scale")]
    return Ledger(name=name, roof=c.CUDA, tensors=(
        x, Tensor("x_fp8", (rows, cols), out, Role.OUTPUT),
        Tensor("scale", groups, "fp32", scale_role)), work=tuple(work))


def quant_fp8_per_token(rows: int = 4096, cols: int = 4096, dtype: str = "bf16",
                        out_dtype: str = "fp8_e4m3") -> Ledger:
    """fp8 quantisation with one scale per row (token)."""
    return _quant("quant_fp8_per_token", rows, cols, (rows,), dtype, out_dtype)


def quant_fp8_per_block(rows: int = 4096, cols: int = 4096, block_size: int = 128,
                        block_rows: int = 1, dtype: str = "bf16",
                        out_dtype: str = "fp8_e4m3") -> Ledger:
    """fp8 quantisation with one scale per block_rows x block_size tile."""
    c.positive(block_size, "quant_fp8_per_block.block_size")
    c.positive(block_rows, "quant_fp8_per_block.block_rows")
    groups = (-(-rows // block_rows), -(-cols // block_size))
    return _quant("quant_fp8_per_block", rows, cols, groups, dtype, out_dtype)


def quant_fp8_per_tensor(rows: int = 4096, cols: int = 4096, dynamic: bool = True,
                         dtype: str = "bf16", out_dtype: str = "fp8_e4m3") -> Ledger:
    """fp8 quantisation with one scale for the tensor: computed (dynamic) or given (static)."""
    if dynamic:
        return _quant("quant_fp8_per_tensor", rows, cols, (1,), dtype, out_dtype, reads_of_x=2)
    return _quant("quant_fp8_per_tensor", rows, cols, (1,), dtype, out_dtype,
                  scale_role=Role.LOOKUP)
