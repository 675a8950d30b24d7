"""Row-wise normalisations: softmax, RMSNorm, LayerNorm over the last dimension.

Convention (per element of a row of `hidden`, softmax's `cols`; the row is held on chip, so
x is read once):
- softmax: max (1 compare), x - max (1), exp (1 on sfu.fp32), sum (1), times 1/sum (1):
  3 arithmetic + 1 compare + 1 exp; per row one reciprocal on sfu.fp32;
- RMSNorm: sum of squares as an FMA (2), times rstd (1), times weight (1, if any); per row
  mean-of-squares scale and + eps (2 arithmetic) and one rsqrt on sfu.fp32;
- LayerNorm (two passes over the row in registers): sum (1), x - mean (1), square-accumulate
  FMA (2), times rstd (1), times weight (1, if any), plus bias (1, if any); per row the two
  1/hidden scales and + eps (3 arithmetic) and one rsqrt on sfu.fp32;
- weight and bias (hidden,) are lookups in the input dtype.
- LayerNorm backward, from the saved per-row mean and rstd (fp32 inputs, read once): per
  element x_hat = (x - mean) * rstd (2), g * weight (1, if any), grad_weight += g * x_hat
  (FMA 2, if weight), grad_bias += g (1, if bias), the two row sums of g*w and g*w*x_hat
  (1 + FMA 2), dx = rstd * (g*w - x_hat*mean(g*w*x_hat) - mean(g*w)) (FMA 2, 1, 1): 13/elem
  with weight and bias; per row the two 1/hidden scales (2). No transcendental: rstd is
  given. grad_input (rows, hidden) and grad_weight / grad_bias (hidden,) are written once
  each (the cross-row partial sums a kernel keeps on chip or in a small workspace are not
  counted). The bias itself is never read.

The case study's norm stage (`case_study.py`) keeps the seed's RMSNorm count instead, 3/elem
and no per-row arithmetic (one FMA and one multiply by rstd*weight); its totals are the
seed's facts. Both counts stand; this module's is the finer one. The MoE router's softmax is
`softmax_work`, the same count as `softmax`.
"""

from __future__ import annotations

from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work
from roofwise.ops import _common as c


def _io(where: str, rows: int, hidden: int, dtype: str, out_dtype: str,
        width: str = "hidden") -> tuple[str, list[Tensor]]:
    c.positive(rows, f"{where}.rows")
    c.positive(hidden, f"{where}.{width}")
    in_dtype = c.dtype(dtype, f"{where}.dtype")
    out = in_dtype if out_dtype == "auto" else c.dtype(out_dtype, f"{where}.out_dtype")
    return in_dtype, [Tensor("x", (rows, hidden), in_dtype, Role.INPUT),
                      Tensor("y", (rows, hidden), out, Role.OUTPUT)]


def softmax(rows: int = 4096, cols: int = 8192, dtype: str = "bf16",
            out_dtype: str = "auto") -> Ledger:
    """Softmax over rows of `cols` scores."""
    _, tensors = _io("softmax", rows, cols, dtype, out_dtype, "cols")
    return Ledger(name="softmax", roof=c.CUDA, tensors=tuple(tensors),
                  work=softmax_work(rows, cols))


def softmax_work(rows: int, cols: int, label: str = "") -> tuple[Work, ...]:
    """The work of a softmax over `rows` rows of `cols` (the convention above); `label`
    prefixes each entry's label, for an op that embeds a softmax (the MoE router)."""
    elems = rows * cols
    return (Work(c.CUDA, "compare", elems, f"{label}row max, 1/elem"),
            Work(c.CUDA, "arithmetic", 3 * elems, f"{label}subtract max, sum, times 1/sum; "
                                                  f"3/elem"),
            Work(c.SFU, "transcendental", elems, f"{label}exp, 1/elem"),
            Work(c.SFU, "transcendental", rows, f"{label}1/sum, 1/row"))


def rmsnorm(rows: int = 4096, hidden: int = 4096, dtype: str = "bf16", weight: bool = True,
            out_dtype: str = "auto") -> Ledger:
    """RMSNorm: x * rsqrt(mean(x^2) + eps) (* weight).

    Counts 3/elem (+1 with a weight) and 2/row plus one rsqrt; the case study's seed norm
    counts 3/elem with the weight and nothing per row (see the module docstring).
    """
    in_dtype, tensors = _io("rmsnorm", rows, hidden, dtype, out_dtype)
    if weight:
        tensors.append(Tensor("weight", (hidden,), in_dtype, Role.LOOKUP))
    elems = rows * hidden
    per_elem = 3 + int(weight)
    return Ledger(name="rmsnorm", roof=c.CUDA, tensors=tuple(tensors), work=(
        Work(c.CUDA, "arithmetic", per_elem * elems,
             f"sum of squares (FMA), times rstd{', times weight' if weight else ''}; "
             f"{per_elem}/elem"),
        Work(c.CUDA, "arithmetic", 2 * rows, "mean scale and + eps, 2/row"),
        Work(c.SFU, "transcendental", rows, "rsqrt, 1/row")))


def layernorm(rows: int = 4096, hidden: int = 4096, dtype: str = "bf16", weight: bool = True,
              bias: bool = True, out_dtype: str = "auto") -> Ledger:
    """LayerNorm: (x - mean) * rsqrt(var + eps) (* weight) (+ bias)."""
    in_dtype, tensors = _io("layernorm", rows, hidden, dtype, out_dtype)
    if weight:
        tensors.append(Tensor("weight", (hidden,), in_dtype, Role.LOOKUP))
    if bias:
        tensors.append(Tensor("bias", (hidden,), in_dtype, Role.LOOKUP))
    elems = rows * hidden
    per_elem = 5 + int(weight) + int(bias)
    return Ledger(name="layernorm", roof=c.CUDA, tensors=tuple(tensors), work=(
        Work(c.CUDA, "arithmetic", per_elem * elems,
             f"sum, centre, square (FMA), times rstd, affine; {per_elem}/elem"),
        Work(c.CUDA, "arithmetic", 3 * rows, "two 1/hidden scales and + eps, 3/row"),
        Work(c.SFU, "transcendental", rows, "rsqrt, 1/row")))


def layernorm_backward(rows: int = 4096, hidden: int = 4096, dtype: str = "bf16",
                       weight: bool = True, bias: bool = True, stats_dtype: str = "fp32"
                       ) -> Ledger:
    """LayerNorm backward: grad_input, and grad_weight / grad_bias when the norm has them."""
    where = "layernorm_backward"
    in_dtype, _ = _io(where, rows, hidden, dtype, "auto")
    stats = c.dtype(stats_dtype, f"{where}.stats_dtype")
    tensors = [Tensor("grad_out", (rows, hidden), in_dtype, Role.INPUT),
               Tensor("x", (rows, hidden), in_dtype, Role.INPUT),
               Tensor("mean", (rows,), stats, Role.INPUT),
               Tensor("rstd", (rows,), stats, Role.INPUT),
               Tensor("grad_x", (rows, hidden), in_dtype, Role.OUTPUT)]
    if weight:
        tensors += [Tensor("weight", (hidden,), in_dtype, Role.LOOKUP),
                    Tensor("grad_weight", (hidden,), in_dtype, Role.OUTPUT)]
    if bias:
        tensors.append(Tensor("grad_bias", (hidden,), in_dtype, Role.OUTPUT))
    per_elem = 9 + 3 * int(weight) + int(bias)
    return Ledger(name=where, roof=c.CUDA, tensors=tuple(tensors), work=(
        Work(c.CUDA, "arithmetic", per_elem * rows * hidden,
             f"x_hat, row sums, dx{', weight grad' if weight else ''}"
             f"{', bias grad' if bias else ''}; {per_elem}/elem"),
        Work(c.CUDA, "arithmetic", 2 * rows, "two 1/hidden scales, 2/row")))
