"""Plain PyTorch references of operators roofwise has ledgers for, to trace and to check.

They are written the way a user writes a reference (readable, unfused), so that tracing them
shows what the library's hand-counted ledger claims: the same bytes when fused.
"""

from __future__ import annotations

import torch

FP8_E4M3_MAX = 448.0  # largest finite float8_e4m3fn value


def qk_norm_rope_quant_reference(
    q: torch.Tensor, k: torch.Tensor, q_norm_weight: torch.Tensor, k_norm_weight: torch.Tensor,
    cos: torch.Tensor, sin: torch.Tensor, eps: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """QK-Norm + RoPE + fp8 quantisation, the case study.

    q (tokens, q_heads, d) and k (tokens, kv_heads, d) in bf16; norm weights (d,) bf16;
    cos/sin (tokens, d) fp32 (rotate-half RoPE). Returns (q_fp8, q_scale, k_fp8, k_scale):
    float8_e4m3fn rows with one fp32 scale per row (amax / 448).
    """
    q_fp8, q_scale = _norm_rope_quant(q, q_norm_weight, cos, sin, eps)
    k_fp8, k_scale = _norm_rope_quant(k, k_norm_weight, cos, sin, eps)
    return q_fp8, q_scale, k_fp8, k_scale


def _norm_rope_quant(x: torch.Tensor, weight: torch.Tensor, cos: torch.Tensor,
                     sin: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.float()
    normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
              * weight.float()).to(x.dtype)
    nf = normed.float()
    half = nf.shape[-1] // 2
    rotated = torch.cat((-nf[..., half:], nf[..., :half]), dim=-1)
    roped = (nf * cos[:, None, :] + rotated * sin[:, None, :]).to(x.dtype)
    amax = roped.abs().amax(dim=-1).float()
    scale = torch.clamp(amax / FP8_E4M3_MAX, min=torch.finfo(torch.float32).tiny)
    scaled = roped.float() / scale[..., None]
    quantised = scaled.clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(torch.float8_e4m3fn)
    return quantised, scale
