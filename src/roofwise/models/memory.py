"""Does the model fit: what one tensor-parallel shard holds against the card's capacity.

Per shard (the sharded config's capture): the resident weights (as stored: quantized bytes,
scales and zero points where a scheme applies), the KV cache of this batch at this many
positions (each cache layer's elements per position; a sliding-window layer keeps at most its
window), and an activation peak estimate. The estimate is what a fused serving step holds at
its widest point: the residual stream and its normed copy, the widest intermediate (the MLP's
gate and up outputs and their product, the routed experts' for top-k tokens each, or the
attention projections' q, k, v and output), and the last token's fp32 logits; a flash kernel
keeps no score matrix, so attention adds no (tokens x keys) term.

All three grow linearly with the batch, so the largest batch that fits at this context is a
division; the KV cache is piecewise linear in positions (windows saturate), so the longest
context at this batch is a bisection. Capacity is the profile's datasheet figure: what the
runtime, the CUDA context and a serving stack's memory reserve take is not subtracted, so
`fits` is necessary, not sufficient.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from roofwise.base.dtypes import bytes_per_element
from roofwise.base.errors import InputError
from roofwise.models.config import ModelConfig

LOGIT_BYTES = 4  # fp32 logits, as the sampler reads them
_MAX_POSITIONS = 1 << 40


def position_limit(config: ModelConfig) -> int | None:
    """The config's `max_position_embeddings` (GPT-2's `n_positions`), None if absent."""
    value = config.sizes.max_position_embeddings
    return value if value is not None and value > 0 else None


def check_positions(config: ModelConfig, positions: int, allow_long: bool,
                    what: str = "--context + --seq") -> None:
    """Refuse a step past the model's position limit unless asked for."""
    limit = position_limit(config)
    if limit is not None and positions > limit and not allow_long:
        raise InputError(f"{config.path}: max_position_embeddings",
                         f"{what} is {positions:,} positions, beyond the model's limit of "
                         f"{limit:,}; expected at most {limit:,} (or --allow-long-context)")


def kv_cache_bytes(kv_layers: tuple[tuple[int, int | None], ...], batch: int,
                   positions: int, kv_dtype: str) -> float:
    """The KV cache of `batch` sequences of `positions` positions each."""
    elements = sum(per * (positions if window is None else min(positions, window))
                   for per, window in kv_layers)
    return batch * elements * bytes_per_element(kv_dtype)


def activation_peak_bytes(config: ModelConfig, batch: int, seq: int, dtype: str) -> float:
    """The estimate the module docstring describes, for batch x seq new tokens."""
    sizes = config.sizes
    tokens = batch * seq
    size = bytes_per_element(dtype)
    hidden = sizes.hidden_size
    heads = int(sizes.num_attention_heads or 0)
    kv_heads = sizes.num_key_value_heads or heads
    head_dim = sizes.head_dim or (hidden // heads if heads else 0)
    q_width = heads * ((sizes.qk_nope_head_dim + sizes.qk_rope_head_dim) or head_dim)
    attention = q_width + 2 * kv_heads * head_dim + heads * (sizes.v_head_dim or head_dim)
    # a per-layer list of MLP widths (Gemma-3n): the widest layer sets the peak
    inter = sizes.intermediate_size
    widest_mlp = (max(inter) if inter else 0) if isinstance(inter, tuple) else inter
    dense = 3 * (widest_mlp or 4 * hidden)
    routed = 0
    if sizes.moe_intermediate_size and sizes.num_experts_per_tok:
        routed = 3 * sizes.moe_intermediate_size * (sizes.num_experts_per_tok
                                                    + sizes.n_shared_experts)
    widest = max(attention, dense, routed)
    return tokens * (2 * hidden + widest) * size + batch * sizes.vocab_size * LOGIT_BYTES


@dataclass(frozen=True)
class MemoryFit:
    """One shard's bytes against its card; sizes in bytes, None where unknown."""

    weight_bytes: float
    kv_cache_bytes: float
    activation_peak_bytes: float
    capacity_bytes: float | None
    capacity_source: str
    max_batch: int | None  # at this context; None: capacity unknown
    # at this batch: the most tokens cached before the step; None with the reason below
    max_context: int | None
    # "memory", "max_position_embeddings", "no bound" (every cache layer windowed), "nothing
    # fits" (weights and activations alone exceed the card), "unknown" (no capacity)
    max_context_limited_by: str

    @property
    def resident_bytes(self) -> float:
        return self.weight_bytes + self.kv_cache_bytes + self.activation_peak_bytes

    @property
    def fits(self) -> bool | None:
        return None if self.capacity_bytes is None else self.resident_bytes <= self.capacity_bytes

    @property
    def headroom_bytes(self) -> float | None:
        return None if self.capacity_bytes is None else self.capacity_bytes - self.resident_bytes

    def as_json(self) -> dict[str, Any]:
        return {"weight_bytes": self.weight_bytes, "kv_cache_bytes": self.kv_cache_bytes,
                "activation_peak_bytes": self.activation_peak_bytes,
                "resident_bytes": self.resident_bytes, "capacity_bytes": self.capacity_bytes,
                "capacity_source": self.capacity_source or None, "fits": self.fits,
                "headroom_bytes": self.headroom_bytes, "max_batch_at_context": self.max_batch,
                "max_context_at_batch": self.max_context,
                "max_context_limited_by": self.max_context_limited_by}


def memory_fit(config: ModelConfig, kv_layers: tuple[tuple[int, int | None], ...],
               weight_bytes: float, capacity_bytes: float | None, capacity_source: str,
               batch: int, seq: int, context: int, dtype: str, kv_dtype: str) -> MemoryFit:
    """The shard's fit at this batch and context, and how far either can grow."""
    positions = context + seq
    kv = kv_cache_bytes(kv_layers, batch, positions, kv_dtype)
    activations = activation_peak_bytes(config, batch, seq, dtype)
    limit = position_limit(config)
    if capacity_bytes is None:
        return MemoryFit(weight_bytes, kv, activations, None, "", None, None, "unknown")
    free = capacity_bytes - weight_bytes
    per_sequence = (kv_cache_bytes(kv_layers, 1, positions, kv_dtype)
                    + activation_peak_bytes(config, 1, seq, dtype))
    max_batch = max(0, int(free // per_sequence)) if per_sequence > 0 else None
    budget = (free - activations) / batch  # cache bytes one sequence may take
    most = _most_positions(kv_layers, kv_dtype, budget)
    max_context: int | None
    if most is not None and most < seq:
        max_context, limited_by = None, "nothing fits"
    else:
        max_context, limited_by = (None, "no bound") if most is None else (most - seq, "memory")
        if limit is not None and (max_context is None or limit - seq < max_context):
            max_context, limited_by = max(limit - seq, 0), "max_position_embeddings"
    return MemoryFit(weight_bytes, kv, activations, capacity_bytes, capacity_source, max_batch,
                     max_context, limited_by)


def _most_positions(kv_layers: tuple[tuple[int, int | None], ...], kv_dtype: str,
                    budget: float) -> int | None:
    """The most positions one sequence's cache holds within `budget` bytes (-1: the budget is
    negative); None: no bound (every layer windowed, or no cache)."""
    if budget < 0:
        return -1
    if kv_cache_bytes(kv_layers, 1, _MAX_POSITIONS, kv_dtype) <= budget:
        return None
    low, high = 0, _MAX_POSITIONS
    while low < high:
        middle = (low + high + 1) // 2
        if kv_cache_bytes(kv_layers, 1, middle, kv_dtype) <= budget:
            low = middle
        else:
            high = middle - 1
    return low
