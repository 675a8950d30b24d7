"""Ledgers for common operators, one module per family, and a registry to price them by name."""

from roofwise.ops.activations import add, gelu, mul, silu, swiglu
from roofwise.ops.attention import attention, attention_decode, attention_prefill, causal_pairs
from roofwise.ops.case_study import (
    qk_norm_rope_quant,
    qk_norm_rope_quant_split,
    qk_norm_rope_quant_stages,
)
from roofwise.ops.conv import conv
from roofwise.ops.gemm import batched_gemm, gemm
from roofwise.ops.moe import expert_counts, moe
from roofwise.ops.norms import layernorm, layernorm_backward, rmsnorm, softmax
from roofwise.ops.quant import quant_fp8_per_block, quant_fp8_per_tensor, quant_fp8_per_token
from roofwise.ops.registry import (
    OPS,
    Param,
    build_op,
    op_function,
    op_parameters,
    parse_op_params,
    parse_shape_args,
)
from roofwise.ops.rope import rope

__all__ = [
    "OPS", "Param", "add", "attention", "attention_decode", "attention_prefill",
    "batched_gemm", "build_op", "causal_pairs", "conv", "expert_counts", "gelu", "gemm",
    "layernorm", "layernorm_backward",
    "moe", "mul", "op_function", "op_parameters", "parse_op_params", "parse_shape_args",
    "qk_norm_rope_quant", "qk_norm_rope_quant_split", "qk_norm_rope_quant_stages",
    "quant_fp8_per_block", "quant_fp8_per_tensor", "quant_fp8_per_token", "rmsnorm", "rope",
    "silu", "softmax", "swiglu",
]
