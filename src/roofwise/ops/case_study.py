"""The case study: QK-Norm + RoPE + fp8 quantisation of a prefill chunk.

q (tokens, q_heads, d) and k (tokens, kv_heads, d) in bf16 are RMS-normalised with one weight
vector each, rotated with fp32 cos/sin tables (tokens, d), and quantised to fp8 with one fp32
scale per row. FLOPs per row of d=128: norm 3/elem + 1 rsqrt (385), RoPE 3/elem (384),
quant 3/elem + 2/row (386): 1155 in all.

The norm stage keeps the seed's count, which differs from `norms.rmsnorm` (4/elem + 2/row):
the seed counts the sum of squares as one FMA (2) and a single multiply by rstd*weight (1),
and no per-row mean scale or + eps. Its totals (67,764,736 bytes and 189,235,200 FLOPs at the
default shape) are the seed's facts, so the stage is not rebuilt from `rmsnorm`. The quant
stage is `quant.quant_work` with one group per row: the two conventions are the same.
"""

from __future__ import annotations

from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work, fuse, separate
from roofwise.ops import _common as c
from roofwise.ops._common import CUDA, SFU
from roofwise.ops.quant import quant_work

LOOKUPS = ("per_call", "per_row")


def qk_norm_rope_quant_stages(
    tokens: int = 4096, q_heads: int = 32, kv_heads: int = 8, head_dim: int = 128,
    in_dtype: str = "bf16", out_dtype: str = "fp8_e4m3", table_dtype: str = "fp32",
) -> tuple[Ledger, Ledger, Ledger]:
    """The three stages, each a ledger of its own; `fuse` or `separate` them to compose."""
    where = "qk_norm_rope_quant"
    for name, size in (("tokens", tokens), ("q_heads", q_heads), ("kv_heads", kv_heads),
                       ("head_dim", head_dim)):
        c.positive(size, f"{where}.{name}")
    in_dtype = c.dtype(in_dtype, f"{where}.in_dtype")
    out_dtype = c.dtype(out_dtype, f"{where}.out_dtype")
    table_dtype = c.dtype(table_dtype, f"{where}.table_dtype")
    rows = tokens * (q_heads + kv_heads)
    elems = rows * head_dim

    def qk(prefix: str, role: Role, dtype: str) -> tuple[Tensor, Tensor]:
        return (Tensor(f"q{prefix}", (tokens, q_heads, head_dim), dtype, role),
                Tensor(f"k{prefix}", (tokens, kv_heads, head_dim), dtype, role))

    norm = Ledger(
        name="qk_norm", roof=CUDA,
        tensors=(*qk("", Role.INPUT, in_dtype),
                 Tensor("q_norm_weight", (head_dim,), in_dtype, Role.LOOKUP),
                 Tensor("k_norm_weight", (head_dim,), in_dtype, Role.LOOKUP),
                 *qk("_normed", Role.OUTPUT, in_dtype)),
        work=(Work(CUDA, "arithmetic", 3 * elems, "sum of squares (FMA) and scale, 3/elem"),
              Work(SFU, "transcendental", rows, "rsqrt, 1/row")))
    rope = Ledger(
        name="rope", roof=CUDA,
        tensors=(*qk("_normed", Role.INPUT, in_dtype),
                 Tensor("cos", (tokens, head_dim), table_dtype, Role.LOOKUP),
                 Tensor("sin", (tokens, head_dim), table_dtype, Role.LOOKUP),
                 *qk("_roped", Role.OUTPUT, in_dtype)),
        work=(Work(CUDA, "arithmetic", 3 * elems, "x*cos + rot(x)*sin, 3/elem"),))
    quant = Ledger(
        name="fp8_quant", roof=CUDA,
        tensors=(*qk("_roped", Role.INPUT, in_dtype),
                 *qk("_fp8", Role.OUTPUT, out_dtype),
                 Tensor("q_scale", (tokens, q_heads), "fp32", Role.OUTPUT),
                 Tensor("k_scale", (tokens, kv_heads), "fp32", Role.OUTPUT)),
        work=quant_work(elems, rows, "row"))
    return norm, rope, quant


def qk_norm_rope_quant(tokens: int = 4096, q_heads: int = 32, kv_heads: int = 8,
                       head_dim: int = 128, lookups: str = "per_call", in_dtype: str = "bf16",
                       out_dtype: str = "fp8_e4m3", table_dtype: str = "fp32") -> Ledger:
    """The fused kernel: one call, intermediates never leave the chip.

    `lookups="per_row"` prices a design that re-reads both norm weights and its token's cos
    and sin rows for every row instead of once per call.
    """
    c.choice(lookups, LOOKUPS, "qk_norm_rope_quant.lookups")
    stages = qk_norm_rope_quant_stages(tokens, q_heads, kv_heads, head_dim, in_dtype,
                                       out_dtype, table_dtype)
    fused = fuse("qk_norm_rope_quant", stages)
    if lookups == "per_call":
        return fused
    rows = tokens * (q_heads + kv_heads)
    per_row = {t.name: (rows, t.nbytes // (tokens if t.name in ("cos", "sin") else 1))
               for t in fused.tensors if t.role is Role.LOOKUP}
    return fused.with_lookups_per_use(per_row)


def qk_norm_rope_quant_split(tokens: int = 4096, q_heads: int = 32, kv_heads: int = 8,
                             head_dim: int = 128, in_dtype: str = "bf16",
                             out_dtype: str = "fp8_e4m3", table_dtype: str = "fp32") -> Ledger:
    """The natural two-kernel split: norm+RoPE writes a bf16 intermediate that quant reads."""
    norm, rope, quant = qk_norm_rope_quant_stages(tokens, q_heads, kv_heads, head_dim,
                                                  in_dtype, out_dtype, table_dtype)
    return separate("qk_norm_rope_quant (2 calls)", [fuse("qk_norm_rope", [norm, rope]), quant])
