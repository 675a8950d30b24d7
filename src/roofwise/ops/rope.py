"""Rotary position embedding over the heads of a token batch.

Convention: x (tokens, heads, head_dim) is read once and written once (out of place); the
first `rotary_dim` channels of each head rotate, the rest pass through (bytes, no work).
cos and sin tables (tokens, rotary_dim), as the seed's case study lays them out, are lookups
read once per call. Work: x*cos + rot(x)*sin, a multiply and an FMA: 3 FLOPs per rotated
element, on cuda_core.fp32.
"""

from __future__ import annotations

from roofwise.base.errors import InputError
from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work
from roofwise.ops import _common as c


def rope(tokens: int = 4096, heads: int = 32, head_dim: int = 128, rotary_dim: int = 0,
         dtype: str = "bf16", table_dtype: str = "fp32", out_dtype: str = "auto") -> Ledger:
    """RoPE on `rotary_dim` channels per head (0: all of head_dim)."""
    where = "rope"
    for name, size in (("tokens", tokens), ("heads", heads), ("head_dim", head_dim)):
        c.positive(size, f"{where}.{name}")
    c.non_negative(rotary_dim, f"{where}.rotary_dim")
    rot = rotary_dim or head_dim
    if rot > head_dim or rot % 2:
        raise InputError(f"{where}.rotary_dim", f"expected an even number <= head_dim "
                                                f"({head_dim}), got {rotary_dim}")
    in_dtype = c.dtype(dtype, f"{where}.dtype")
    table = c.dtype(table_dtype, f"{where}.table_dtype")
    out = in_dtype if out_dtype == "auto" else c.dtype(out_dtype, f"{where}.out_dtype")
    return Ledger(name=where, roof=c.CUDA, tensors=(
        Tensor("x", (tokens, heads, head_dim), in_dtype, Role.INPUT),
        Tensor("cos", (tokens, rot), table, Role.LOOKUP),
        Tensor("sin", (tokens, rot), table, Role.LOOKUP),
        Tensor("y", (tokens, heads, head_dim), out, Role.OUTPUT),
    ), work=(Work(c.CUDA, "arithmetic", 3 * tokens * heads * rot,
                  "x*cos + rot(x)*sin, 3/rotated elem"),))
