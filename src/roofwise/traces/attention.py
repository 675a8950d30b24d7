"""Attention kernels as a PyTorch 2.x trace records them, counted as the kernel runs them.

`scaled_dot_product_attention` dispatches to `_scaled_dot_product_flash_attention`, which
calls `_flash_attention_forward`, and the kernel is launched under the innermost op; the
memory-efficient route (`_scaled_dot_product_efficient_attention` ->
`_efficient_attention_forward`), cuDNN (`_scaled_dot_product_cudnn_attention`), their
backward ops and the `flash_attn` package's custom ops (`flashattn::_flash_attn_forward`,
`..._varlen_forward`, `..._backward`) are read the same way. Every one of them is priced
from its own arguments; where one encloses another that also launched kernels, the count
goes to the inner one only (`nested_attention`), so no FLOP is counted twice.

The count (docs/attention.md): 4*d per unmasked (query, key) pair and query head forward,
10*d backward (2.5x, FlashAttention's own convention); a causal kernel skips the masked
pairs: top-left aligned for PyTorch's own `is_causal` on SDPA, the efficient kernel's
custom_mask_type 1 and cuDNN; bottom-right for the flash kernels (equal for sq == sk);
sliding windows (`window_size_left/right`) bound the keys each row sees.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work
from roofwise.ops import _common as c
from roofwise.ops.attention import (
    attention_backward,
    attention_pairs,
    causal_pairs,
    causal_pairs_top_left,
)
from roofwise.traces.schemas import UNKNOWN, Bound, TensorArg, canonical_name


@dataclass(frozen=True)
class _Form:
    """How one attention op keeps its arguments."""

    layout: str  # "bhsd" (SDPA level) or "bshd" (the flash / efficient kernels' own)
    backward: bool
    causal_arg: str  # "is_causal", "causal" or "custom_mask_type"
    aligned: str  # "top_left" or "bottom_right": how the kernel aligns a causal mask
    bias_arg: str = ""  # attn_mask / attn_bias / bias: a tensor read per score
    cu_q: str = ""  # the cumulative sequence lengths of a variable-length batch
    cu_k: str = ""
    max_q: str = ""
    max_k: str = ""
    window: bool = False  # window_size_left / window_size_right
    grad: str = ""  # the backward's incoming gradient


_TL, _BR = "top_left", "bottom_right"
_FLASH_FWD = _Form("bshd", False, "is_causal", _BR, cu_q="cum_seq_q", cu_k="cum_seq_k",
                   max_q="max_q", max_k="max_k", window=True)
_FLASH_BWD = _Form("bshd", True, "is_causal", _BR, cu_q="cum_seq_q", cu_k="cum_seq_k",
                   max_q="max_q", max_k="max_k", window=True, grad="grad_out")
_EFF_FWD = _Form("bshd", False, "custom_mask_type", _TL, bias_arg="bias", cu_q="cu_seqlens_q",
                 cu_k="cu_seqlens_k", max_q="max_seqlen_q", max_k="max_seqlen_k")
_EFF_BWD = _Form("bshd", True, "custom_mask_type", _TL, bias_arg="bias", cu_q="cu_seqlens_q",
                 cu_k="cu_seqlens_k", max_q="max_seqlen_q", max_k="max_seqlen_k",
                 grad="grad_out_")
_FA_FWD = _Form("bshd", False, "causal", _BR, window=True)
_FA_VARLEN_FWD = _Form("bshd", False, "causal", _BR, cu_q="cu_seqlens_q", cu_k="cu_seqlens_k",
                       max_q="max_seqlen_q", max_k="max_seqlen_k", window=True)
_FA_BWD = _Form("bshd", True, "causal", _BR, window=True, grad="dout")
_FA_VARLEN_BWD = _Form("bshd", True, "causal", _BR, cu_q="cu_seqlens_q", cu_k="cu_seqlens_k",
                       max_q="max_seqlen_q", max_k="max_seqlen_k", window=True, grad="dout")

FORMS: dict[str, _Form] = {
    "aten::scaled_dot_product_attention": _Form("bhsd", False, "is_causal", _TL, "attn_mask"),
    "aten::_scaled_dot_product_flash_attention": _Form("bhsd", False, "is_causal", _BR),
    "aten::_scaled_dot_product_flash_attention_for_cpu": _Form("bhsd", False, "is_causal",
                                                                _TL, "attn_mask"),
    "aten::_scaled_dot_product_efficient_attention": _Form("bhsd", False, "is_causal", _TL,
                                                            "attn_bias"),
    "aten::_scaled_dot_product_cudnn_attention": _Form("bhsd", False, "is_causal", _TL,
                                                        "attn_bias"),
    "aten::_scaled_dot_product_fused_attention_overrideable": _Form(
        "bhsd", False, "is_causal", _TL, "attn_bias"),
    "aten::_cudnn_attention_forward": _Form("bhsd", False, "is_causal", _TL, "attn_bias",
                                            "cum_seq_q", "cum_seq_k", "max_q", "max_k"),
    "aten::_flash_attention_forward": _FLASH_FWD,
    "aten::_efficient_attention_forward": _EFF_FWD,
    "aten::_scaled_dot_product_flash_attention_backward": _Form(
        "bhsd", True, "is_causal", _BR, grad="grad_out"),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": _Form(
        "bhsd", True, "is_causal", _TL, "attn_mask", grad="grad_out"),
    "aten::_scaled_dot_product_efficient_attention_backward": _Form(
        "bhsd", True, "is_causal", _TL, "attn_bias", grad="grad_out_"),
    "aten::_scaled_dot_product_cudnn_attention_backward": _Form(
        "bhsd", True, "is_causal", _TL, "attn_bias", "cum_seq_q", "cum_seq_k", "max_q",
        "max_k", grad="grad_out"),
    "aten::_cudnn_attention_backward": _Form(
        "bhsd", True, "is_causal", _TL, "attn_bias", "cum_seq_q", "cum_seq_k", "max_q",
        "max_k", grad="grad_out"),
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": _Form(
        "bhsd", True, "is_causal", _TL, "attn_bias", "cum_seq_q", "cum_seq_k", "max_q",
        "max_k", grad="grad_out"),
    "aten::_flash_attention_backward": _FLASH_BWD,
    "aten::_efficient_attention_backward": _EFF_BWD,
    "flashattn::_flash_attn_forward": _FA_FWD,
    "flashattn::_flash_attn_varlen_forward": _FA_VARLEN_FWD,
    "flashattn::_flash_attn_backward": _FA_BWD,
    "flashattn::_flash_attn_varlen_backward": _FA_VARLEN_BWD,
}
# efficient attention's custom_mask_type (aten/src/ATen/native/transformers/cuda/mem_eff_attention)
_MASK_TYPES = {0: None, 1: _TL, 2: _BR}


def is_attention(name: str) -> bool:
    return canonical_name(name) in FORMS


def window_pairs(q_len: int, kv_len: int, aligned: str | None, left: int | None = None,
                 right: int | None = None) -> int:
    """Unmasked (query, key) pairs of one head: query row i (of q_len) sees the keys j with
    i + offset - left <= j <= i + offset + right, offset = kv_len - q_len bottom-right
    aligned (FlashAttention's windows too), 0 top-left; a causal mask is right = 0; None is
    unbounded on that side. Closed form (sums of clipped arithmetic series): exact at any
    length, no array over the sequence."""
    if q_len <= 0 or kv_len <= 0:
        return 0
    if aligned is not None:
        right = 0 if right is None else min(right, 0)
    if left is None and right is None:
        return q_len * kv_len
    if left is None and right == 0 and aligned != _TL:
        return causal_pairs(q_len, kv_len)
    if left is None and right == 0:
        return causal_pairs_top_left(q_len, kv_len)
    offset = 0 if aligned == _TL else kv_len - q_len
    last = kv_len - 1
    a = last if right is None else offset + right  # row i sees keys up to min(last, i + a)
    b = -q_len if left is None else offset - left  # and from max(0, i + b)
    first_row, last_row = max(0, -a), min(q_len - 1, last - b)
    if first_row > last_row or a < b:
        return 0
    return (_sum_min(last, a, first_row, last_row) - _sum_max0(b, first_row, last_row)
            + (last_row - first_row + 1))


def _series(lo: int, hi: int) -> int:
    """lo + (lo+1) + ... + hi (0 when empty)."""
    return (lo + hi) * (hi - lo + 1) // 2 if hi >= lo else 0


def _sum_min(cap: int, a: int, i0: int, i1: int) -> int:
    """The sum over i in [i0, i1] of min(cap, i + a)."""
    split = min(i1, cap - a)  # rows up to here are below the cap
    below = _series(i0 + a, split + a) if split >= i0 else 0
    return below + cap * (i1 - max(split, i0 - 1))


def _sum_max0(b: int, i0: int, i1: int) -> int:
    """The sum over i in [i0, i1] of max(0, i + b)."""
    start = max(i0, -b)
    return _series(start + b, i1 + b) if start <= i1 else 0


def _split_lengths(total: int, count: int, longest: int | None) -> list[tuple[int, int]]:
    """Sequence lengths summing to total with the fewest pairs, as (length, how many): the
    lengths as equal as the recorded longest allows (a convex count is smallest at the most
    even split)."""
    if longest is not None and count > 1 and longest * count >= total >= longest:
        rest = _even(total - longest, count - 1)
        if all(n <= longest for n, _ in rest):
            return [(longest, 1), *rest]
    return _even(total, count)


def _even(total: int, count: int) -> list[tuple[int, int]]:
    base, extra = divmod(total, count)
    return [(n, k) for n, k in ((base + 1, extra), (base, count - extra)) if k]


@dataclass(frozen=True)
class _Shapes:
    batch: int
    q_len: int
    kv_len: int
    q_heads: int
    kv_heads: int
    head_dim: int
    v_head_dim: int


def _shapes(form: _Form, q: TensorArg, k: TensorArg, v: TensorArg, packed: bool
            ) -> _Shapes | str:
    qs, ks, vs = q.shape, k.shape, v.shape
    if packed:  # (total, heads, d), or (1, total, heads, d) for the efficient kernel
        qs, ks, vs = (s[1:] if len(s) == 4 and s[0] == 1 else s for s in (qs, ks, vs))
        if not len(qs) == len(ks) == len(vs) == 3:
            return (f"variable-length shapes {list(q.shape)}, {list(k.shape)}, "
                    f"{list(v.shape)} are not (total, heads, head_dim)")
        (tq, hq, d), (tk, hk, dk), (_, _, dv) = qs, ks, vs
        return _Shapes(1, tq, tk, hq, hk, d, dv) if d == dk else (
            f"query head_dim {d} is not the key's {dk}")
    if not len(qs) == len(ks) == len(vs) == 4:
        order = ("batch, heads, seq, head_dim" if form.layout == "bhsd"
                 else "batch, seq, heads, head_dim")
        return f"shapes {list(qs)}, {list(ks)}, {list(vs)} are not 4-D ({order})"
    if form.layout == "bhsd":
        (b, hq, sq, d), (bk, hk, sk, dk), (_, _, _, dv) = qs, ks, vs
    else:
        (b, sq, hq, d), (bk, sk, hk, dk), (_, _, _, dv) = qs, ks, vs
    if b != bk or d != dk or vs[:-1] != ks[:-1]:
        return (f"query {list(qs)}, key {list(ks)} and value {list(vs)} do not share the "
                f"batch, the head_dim and (key and value) the sequence")
    return _Shapes(b, sq, sk, hq, hk, d, dv)


def _mask(form: _Form, bound: Bound) -> tuple[str | None, str]:
    """How the kernel masks: None (no mask), top_left or bottom_right, and a caveat."""
    value = bound.value(form.causal_arg)
    if form.causal_arg == "custom_mask_type":
        if value is UNKNOWN:
            return _TL, "custom_mask_type not recorded: counted causal (the smaller count)"
        if value not in _MASK_TYPES:
            return "?", f"custom_mask_type {value!r} is none of 0, 1, 2"
        return _MASK_TYPES[value], ""
    if value is UNKNOWN:
        return form.aligned, (f"{form.causal_arg} not recorded: counted causal (the smaller "
                              "count, so SOL stays a bound)")
    return (form.aligned if value else None), ""


def _window(form: _Form, bound: Bound) -> tuple[int | None, int | None]:
    if not form.window:
        return None, None
    left, right = bound.value("window_size_left", None), bound.value("window_size_right", None)
    return (left if isinstance(left, int) and left >= 0 else None,
            right if isinstance(right, int) and right >= 0 else None)


def price_attention(name: str, bound: Bound) -> tuple[Ledger, str] | str:
    """The ledger of one recorded attention op and its caveat, or why it has none."""
    form = FORMS[canonical_name(name)]
    q, k, v = (bound.tensor(n) for n in ("query", "key", "value"))
    if q is None:
        q, k, v = (bound.tensor(n) for n in ("q", "k", "v"))
    if q is None or k is None or v is None:
        return "query, key and value were not all recorded as tensors"
    for t in (q, k):
        if t.dtype is None:
            return f"tensor dtype {t.type_text} is not one roofwise prices"
    cu_q = bound.tensor(form.cu_q) if form.cu_q else None
    packed = cu_q is not None
    if bound.value("block_table", None) is not None:
        return ("a paged KV cache (block_table): the keys each sequence reads are in pages "
                "the trace does not describe")
    if bound.value("seqused_k", None) is not None:
        return ("seqused_k given: each sequence uses fewer keys than its cu_seqlens span, by "
                "counts the trace does not keep")
    if bound.value("window_size", None) is not None:
        return ("a sliding window on the memory-efficient kernel: the trace does not say how "
                "it aligns, so the keys each row sees are not known")
    shapes = _shapes(form, q, k, v, packed)
    if isinstance(shapes, str):
        return shapes
    s = shapes
    if min(s.batch, s.q_len, s.kv_len, s.q_heads, s.kv_heads, s.head_dim, s.v_head_dim) <= 0:
        return f"an empty attention (shapes {list(q.shape)}, {list(k.shape)}): no pair to count"
    if s.q_heads % s.kv_heads:
        return f"{s.q_heads} query heads are not a multiple of {s.kv_heads} key heads"
    aligned, note = _mask(form, bound)
    if aligned == "?":
        return note
    left, right = _window(form, bound)
    bias = bound.tensor(form.bias_arg) if form.bias_arg else None
    if bias is not None and aligned is not None and form.causal_arg != "custom_mask_type":
        return "an attention mask together with is_causal: PyTorch refuses that combination"
    notes = [note] if note else []
    if cu_q is not None:
        counted = _varlen_pairs(bound, form, s, cu_q, aligned, left, right)
        if isinstance(counted, str):
            return counted
        pairs, how = counted
        notes.append(how)
    else:
        pairs = s.batch * window_pairs(s.q_len, s.kv_len, aligned, left, right)
    mask = _mask_text(aligned, left, right, pairs, s, packed)
    base = name.split("::", 1)[-1]
    dtype, kv_dtype = q.dtype, k.dtype
    assert dtype is not None and kv_dtype is not None
    if form.backward:
        ledger = attention_backward(base, s.batch, s.q_len, s.kv_len, s.q_heads, s.kv_heads,
                                    s.head_dim, pairs, mask, dtype, s.v_head_dim)
    else:
        ledger = attention_pairs(base, s.batch, s.q_len, s.kv_len, s.q_heads, s.kv_heads,
                                 s.head_dim, pairs, mask, dtype, kv_dtype, s.v_head_dim)
    if bias is not None and bias.dtype is not None:
        ledger = _with_bias(ledger, bias, s.q_heads * pairs)
    softcap = bound.value("softcap", 0.0)
    if isinstance(softcap, (int, float)) and softcap > 0:
        notes.append("softcap's tanh per score not counted")
    if bound.tensor("alibi_slopes") is not None:
        notes.append("ALiBi biases not counted")
    dropout = bound.value("dropout_p", 0.0)
    if isinstance(dropout, (int, float)) and dropout > 0:
        notes.append(f"dropout {dropout:g}: its random numbers are not counted")
    return ledger, "; ".join(notes)


def _with_bias(ledger: Ledger, bias: TensorArg, scores: int) -> Ledger:
    """An additive mask or bias: read once (as recorded, broadcast in the kernel), one add
    per counted score."""
    assert bias.dtype is not None
    return replace(ledger, tensors=(*ledger.tensors,
                                    Tensor("attn_bias", bias.shape, bias.dtype, Role.INPUT)),
                   work=(*ledger.work,
                         Work(c.CUDA, "arithmetic", scores, "mask/bias add, 1/score")))


def _mask_text(aligned: str | None, left: int | None, right: int | None, pairs: int,
               s: _Shapes, packed: bool) -> str:
    full = s.q_len * s.kv_len * (1 if packed else s.batch)
    what = "no mask" if aligned is None else f"causal ({aligned.replace('_', '-')} aligned)"
    if left is not None or (right is not None and aligned is None):
        what += f", window ({left if left is not None else 'inf'}, "
        what += f"{right if right is not None else 'inf'})"
    return f"{what}: {pairs:,} of {full:,} pairs per query head"


def _varlen_pairs(bound: Bound, form: _Form, s: _Shapes, cu_q: TensorArg,
                  aligned: str | None, left: int | None, right: int | None
                  ) -> tuple[int, str] | str:
    """The pairs of a variable-length batch. cu_seqlens is a tensor whose values the trace
    does not keep, so the per-sequence lengths are not known: one query per sequence
    (decode) sees all its keys, exactly; equal query and key totals are read as
    self-attention, counted at the fewest pairs the totals and the recorded longest allow (a
    lower bound: the rate shown is at most the true one); anything else is not counted."""
    sequences = math.prod(cu_q.shape) - 1
    if sequences <= 0:
        return f"cumulative sequence lengths of shape {list(cu_q.shape)} hold no sequence"
    if s.q_len == sequences and aligned != _TL and left is None:
        return s.kv_len, "variable-length decode: one query per sequence, each sees its keys"
    if s.q_len != s.kv_len:
        return (f"a variable-length batch of {sequences} sequences with {s.q_len:,} query and "
                f"{s.kv_len:,} key tokens: the per-sequence lengths (cu_seqlens values) are "
                "not in the trace, and the count depends on how they pair")
    longest = bound.value(form.max_q, None)
    longest = longest if isinstance(longest, int) and longest > 0 else None
    pairs = sum(k * window_pairs(n, n, aligned, left, right)
                for n, k in _split_lengths(s.q_len, sequences, longest))
    return pairs, (f"variable-length batch of {sequences} sequences, lengths not recorded: "
                   "counted at the fewest pairs its totals allow (a lower bound)")


def nested_attention(names: Sequence[str], threads: Sequence[Any], ts_us: Sequence[float],
                     end_us: Sequence[float]) -> dict[int, str]:
    """Ops that launched kernels, one position per op across the four sequences (name, thread,
    start and end): for each attention op among them that encloses another on its thread,
    why its count goes to the inner one."""
    found = [i for i, name in enumerate(names) if is_attention(name)]
    carried: dict[int, str] = {}
    by_thread: dict[Any, list[int]] = {}
    for i in found:
        by_thread.setdefault(threads[i], []).append(i)
    for indices in by_thread.values():
        indices.sort(key=lambda i: (ts_us[i], -end_us[i]))
        for n, outer in enumerate(indices):
            for inner in indices[n + 1:]:
                if ts_us[inner] > end_us[outer]:
                    break
                if end_us[inner] <= end_us[outer]:
                    carried[outer] = (f"its attention kernel is launched by the nested "
                                      f"{names[inner]}, which carries the count")
                    break
    return carried
