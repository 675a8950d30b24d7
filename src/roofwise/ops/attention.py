"""Scaled dot-product attention: prefill and decode; MHA, GQA, MQA; causal; paged and fp8 KV.

Convention:
- q (batch, q_len, q_heads, d) is in the compute dtype, and so is the output except with fp8
  compute, where it defaults to bf16 (the common fp8 attention kernels, FlashAttention-3 and
  FlashInfer, take fp8 q/k/v and write bf16); K and V
  (kv_heads each: MHA q_heads == kv_heads, GQA fewer, MQA one) are read once per call in the
  KV dtype, however many query heads share them;
- causal masking is bottom-right aligned (as FlashAttention for q_len != kv_len): the queries
  are the last q_len positions, so query row i (0-based) sees min(i + 1 + offset, kv_len)
  keys with offset = kv_len - q_len (clamped at 0 keys). Only those unmasked (query, key)
  pairs are counted; a masked pair costs nothing, as in a kernel that skips masked tiles;
- QK^T and PV are 2*d flops per counted pair per query head, on the tensor cores of the
  *compute* dtype (fp8 KV is converted on load; its per-tensor k/v scales fold into the
  softmax scale and the output, so they add lookups but no work). With fp8 compute, q, k and
  v each carry a per-tensor fp32 descale (lookups, as gemm's fp8 scales), folded the same way;
- online softmax on cuda_core.fp32: per score a scale multiply, a running-max compare, the
  subtraction of the max and the sum accumulate (3 arithmetic + 1 compare), one exp on
  sfu.fp32; per query row one reciprocal of the sum (sfu.fp32) and d output multiplies;
- paged KV: K and V live in pages of `page_size` tokens; the call must read the kv_len tokens
  each sequence attends to (not the unused tail of its last page: a kernel that loads whole
  pages moves more than the ledger requires, and the ledger must not excuse it), plus the page
  table (batch, ceil(kv_len/page_size)) and the sequence lengths (batch,), int32 lookups;
- backward (`attention_backward`), as FlashAttention's backward runs it: S = QK^T is
  recomputed, then dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q: five contractions, 2*d
  per counted pair each (2.5x the forward's two, FlashAttention's own benchmark convention);
  per score P = exp(scale*S - lse) and dS = scale * P * (dP - D) (5 arithmetic, 1 exp), per
  query row D = rowsum(dO * O) (d FMAs). It reads q, k, v, out, dout and the fp32 logsumexp
  (batch, q_heads, q_len) once and writes dq, dk, dv (k and v's kv_heads: a GQA kernel that
  writes per query head and reduces moves more than the ledger requires).
"""

from __future__ import annotations

from roofwise.base.errors import InputError
from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work
from roofwise.ops import _common as c


def causal_pairs(q_len: int, kv_len: int) -> int:
    """Unmasked (query, key) pairs of one head under bottom-right-aligned causal masking.

    Query row i sees min(i + 1 + offset, kv_len) keys, offset = kv_len - q_len, clamped at 0;
    the last row sees all kv_len. The rows that see any keys see offset+1, offset+2, ...,
    kv_len of them (1, 2, ..., kv_len when q_len > kv_len), so the sum is a difference of two
    triangular numbers: closed form, exact at any length, no array over the sequence.
    """
    seen_by_first = max(kv_len - q_len, 0)
    return (kv_len * (kv_len + 1) - seen_by_first * (seen_by_first + 1)) // 2


def causal_pairs_top_left(q_len: int, kv_len: int) -> int:
    """Unmasked pairs of one head under top-left-aligned causal masking (PyTorch's
    `is_causal` for SDPA's own kernels): query row i sees min(i + 1, kv_len) keys."""
    if q_len <= kv_len:
        return q_len * (q_len + 1) // 2
    return kv_len * (kv_len + 1) // 2 + (q_len - kv_len) * kv_len


def attention(batch: int = 1, q_len: int = 4096, kv_len: int = 4096, q_heads: int = 32,
              kv_heads: int = 8, head_dim: int = 128, causal: bool = True,
              dtype: str = "bf16", kv_dtype: str = "auto", out_dtype: str = "auto",
              page_size: int = 0) -> Ledger:
    """Attention of q_len queries over kv_len keys; page_size 0 means a contiguous KV cache."""
    return _attention("attention", batch, q_len, kv_len, q_heads, kv_heads, head_dim, causal,
                      dtype, kv_dtype, out_dtype, page_size)


def attention_pairs(where: str, batch: int, q_len: int, kv_len: int, q_heads: int,
                    kv_heads: int, head_dim: int, pairs: int, mask: str, dtype: str,
                    kv_dtype: str = "auto", v_head_dim: int = 0) -> Ledger:
    """The forward over an explicit count of unmasked (query, key) pairs per query head,
    summed over the batch: what a trace's kernel computed (top-left or bottom-right causal,
    variable-length batches), `mask` saying how the count was made."""
    return _attention(where, batch, q_len, kv_len, q_heads, kv_heads, head_dim, False, dtype,
                      kv_dtype, "auto", 0, pairs, mask, v_head_dim)


def attention_backward(where: str, batch: int, q_len: int, kv_len: int, q_heads: int,
                       kv_heads: int, head_dim: int, pairs: int, mask: str, dtype: str,
                       v_head_dim: int = 0) -> Ledger:
    """The backward of `attention_pairs` (see the module docstring for the count)."""
    _check_heads(where, batch, q_len, kv_len, q_heads, kv_heads, head_dim)
    c.non_negative(pairs, f"{where}.pairs")
    compute = c.dtype(dtype, f"{where}.dtype")
    unit = c.contraction_unit(compute, f"{where}.dtype")
    dv = v_head_dim or head_dim
    scores = q_heads * pairs
    rows = batch * q_heads * q_len
    q_shape, kv_shape = (batch, q_len, q_heads, head_dim), (batch, kv_len, kv_heads, head_dim)
    v_shape, o_shape = (batch, kv_len, kv_heads, dv), (batch, q_len, q_heads, dv)
    tensors = (
        Tensor("q", q_shape, compute, Role.INPUT), Tensor("k", kv_shape, compute, Role.INPUT),
        Tensor("v", v_shape, compute, Role.INPUT), Tensor("out", o_shape, compute, Role.INPUT),
        Tensor("grad_out", o_shape, compute, Role.INPUT),
        Tensor("logsumexp", (batch, q_heads, q_len), "fp32", Role.INPUT),
        Tensor("grad_q", q_shape, compute, Role.OUTPUT),
        Tensor("grad_k", kv_shape, compute, Role.OUTPUT),
        Tensor("grad_v", v_shape, compute, Role.OUTPUT),
    )
    work = (
        Work(unit, "contraction", 2 * head_dim * scores, "S = QK^T recomputed, 2*d per pair"),
        Work(unit, "contraction", 2 * dv * scores, "dP = dO V^T, 2*d per pair"),
        Work(unit, "contraction", 2 * dv * scores, "dV = P^T dO, 2*d per pair"),
        Work(unit, "contraction", 2 * head_dim * scores, "dQ = dS K, 2*d per pair"),
        Work(unit, "contraction", 2 * head_dim * scores, "dK = dS^T Q, 2*d per pair"),
        Work(c.CUDA, "arithmetic", 5 * scores,
             "P = exp(scale*S - lse), dS = scale*P*(dP - D); 5/score"),
        Work(c.SFU, "transcendental", scores, "exp of the recomputed scores, 1/score"),
        Work(c.CUDA, "arithmetic", 2 * dv * rows, "D = rowsum(dO * O), d FMAs/query row"),
    )
    return Ledger(name=where, roof=unit, tensors=tensors, work=work,
                  notes=(mask, f"backward, compute {compute}"))


def _attention(where: str, batch: int, q_len: int, kv_len: int, q_heads: int, kv_heads: int,
               head_dim: int, causal: bool, dtype: str, kv_dtype: str, out_dtype: str,
               page_size: int, pairs: int | None = None, mask: str = "",
               v_head_dim: int = 0) -> Ledger:
    """The ledger, named `where`: the operator the caller called, so that its parameter
    errors say `attention_decode.page_size`, not the shared body's name. `pairs`, when given,
    is the count of unmasked pairs per query head over the whole batch (`causal` unused)."""
    _check_heads(where, batch, q_len, kv_len, q_heads, kv_heads, head_dim)
    c.non_negative(page_size, f"{where}.page_size")
    compute = c.dtype(dtype, f"{where}.dtype")
    unit = c.contraction_unit(compute, f"{where}.dtype")
    kv = compute if kv_dtype == "auto" else c.dtype(kv_dtype, f"{where}.kv_dtype")
    fp8_compute = c.is_fp8(compute)
    default_out = "bf16" if fp8_compute else compute
    out = default_out if out_dtype == "auto" else c.dtype(out_dtype, f"{where}.out_dtype")

    pairs_per_head = causal_pairs(q_len, kv_len) if causal else q_len * kv_len
    scores = batch * q_heads * pairs_per_head if pairs is None else q_heads * pairs
    rows = batch * q_heads * q_len
    dv = v_head_dim or head_dim
    tensors = [Tensor("q", (batch, q_len, q_heads, head_dim), compute, Role.INPUT)]
    if page_size:
        pages_per_seq = -(-kv_len // page_size)
        # the kv_len tokens each sequence attends to, wherever its pages put them
        tensors += [Tensor("k_cache", (batch, kv_len, kv_heads, head_dim), kv, Role.INPUT),
                    Tensor("v_cache", (batch, kv_len, kv_heads, head_dim), kv, Role.INPUT),
                    Tensor("page_table", (batch, pages_per_seq), "int32", Role.LOOKUP),
                    Tensor("seq_lens", (batch,), "int32", Role.LOOKUP)]
    else:
        tensors += [Tensor("k", (batch, kv_len, kv_heads, head_dim), kv, Role.INPUT),
                    Tensor("v", (batch, kv_len, kv_heads, dv), kv, Role.INPUT)]
    if fp8_compute:
        tensors.append(Tensor("q_scale", (1,), "fp32", Role.LOOKUP))
    if fp8_compute or c.is_fp8(kv):
        tensors += [Tensor("k_scale", (1,), "fp32", Role.LOOKUP),
                    Tensor("v_scale", (1,), "fp32", Role.LOOKUP)]
    tensors.append(Tensor("out", (batch, q_len, q_heads, dv), out, Role.OUTPUT))
    work = (
        Work(unit, "contraction", 2 * head_dim * scores, "QK^T, 2*d per unmasked pair"),
        Work(unit, "contraction", 2 * dv * scores, "PV, 2*d per unmasked pair"),
        Work(c.CUDA, "arithmetic", 3 * scores, "softmax: scale, subtract max, sum; 3/score"),
        Work(c.CUDA, "compare", scores, "softmax: running max, 1/score"),
        Work(c.SFU, "transcendental", scores, "softmax: exp, 1/score"),
        Work(c.SFU, "transcendental", rows, "1/row sum, 1/query row"),
        Work(c.CUDA, "arithmetic", rows * dv, "output normalisation, d/query row"),
    )
    if not mask:
        mask = (f"causal: {pairs_per_head} of {q_len * kv_len} pairs per head" if causal
                else "no mask")
    return Ledger(name=where, roof=unit, tensors=tuple(tensors), work=work,
                  notes=(mask, f"compute {compute}, KV {kv}, "
                               f"{'paged ' + str(page_size) if page_size else 'contiguous'}"))


def attention_prefill(batch: int = 1, seq_len: int = 4096, q_heads: int = 32,
                      kv_heads: int = 8, head_dim: int = 128, causal: bool = True,
                      dtype: str = "bf16", kv_dtype: str = "auto",
                      out_dtype: str = "auto") -> Ledger:
    """Prefill: every position of seq_len attends to the sequence (q_len = kv_len)."""
    c.positive(seq_len, "attention_prefill.seq_len")  # its own name, not q_len or kv_len
    return _attention("attention_prefill", batch, seq_len, seq_len, q_heads, kv_heads,
                      head_dim, causal, dtype, kv_dtype, out_dtype, 0)


def attention_decode(batch: int = 64, kv_len: int = 4096, q_heads: int = 32,
                     kv_heads: int = 8, head_dim: int = 128, q_len: int = 1,
                     dtype: str = "bf16", kv_dtype: str = "auto", out_dtype: str = "auto",
                     page_size: int = 16) -> Ledger:
    """Decode: q_len new tokens (1, or a few when speculating) over a cached kv_len context."""
    return _attention("attention_decode", batch, q_len, kv_len, q_heads, kv_heads, head_dim,
                      True, dtype, kv_dtype, out_dtype, page_size)


def _check_heads(where: str, batch: int, q_len: int, kv_len: int, q_heads: int, kv_heads: int,
                 head_dim: int) -> None:
    """The sizes every attention ledger needs: positive, and query heads a multiple of KV
    heads (GQA)."""
    for name, size in (("batch", batch), ("q_len", q_len), ("kv_len", kv_len),
                       ("q_heads", q_heads), ("kv_heads", kv_heads), ("head_dim", head_dim)):
        c.positive(size, f"{where}.{name}")
    if q_heads % kv_heads:
        raise InputError(f"{where}.kv_heads", f"q_heads ({q_heads}) must be a multiple of "
                                              f"kv_heads ({kv_heads})")
