"""Ledgers for common operators, one module per family."""

from .case_study import (
    qk_norm_rope_quant,
    qk_norm_rope_quant_split,
    qk_norm_rope_quant_stages,
)

__all__ = ["qk_norm_rope_quant", "qk_norm_rope_quant_split", "qk_norm_rope_quant_stages"]
