"""One step as a serving stack runs it (capture, price, memory fit), and the serving figures of a
request shape: TTFT, TPOT, throughput per batch, where decode turns compute-bound, and the
launch overhead of each step.

Every figure is a speed-of-light bound: kernels priced at the calibrated roofs, one after
another with nothing overlapped and no scheduler, sampler or host time. A measured serving
run is slower; how much slower is what `roofwise analyze` reads.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from roofwise.models.config import ModelConfig
from roofwise.models.memory import check_positions, memory_fit
from roofwise.models.project import Projection
from roofwise.profiles.machine import Machine


@dataclass(frozen=True)
class StepOptions:
    """How a step is built and priced, beside its shape."""

    dtype: str = "bf16"
    kv_dtype: str | None = None
    fused: bool = True
    tp: int = 1
    regime: str | None = None
    allow_long_context: bool = False


def project_step(config: ModelConfig, machine: Machine, phase: str, batch: int, seq: int,
                 context: int, options: StepOptions) -> Projection:
    """Capture one step of the (sharded) config, price it, and fit it in the card's memory."""
    from roofwise.models.capture import capture_step  # deferred: torch
    from roofwise.models.project import project

    check_positions(config, context + seq, options.allow_long_context)
    capture = capture_step(config, phase, batch, seq, context, options.dtype, options.kv_dtype,
                           options.fused)
    projection = project(capture, machine, phase, batch, seq, context, options.tp,
                         options.regime)
    return with_memory(projection, config)


def with_memory(projection: Projection, config: ModelConfig,
                weight_bytes: float | None = None) -> Projection:
    """The projection with its shard's memory fit (weights as captured unless given)."""
    cap = projection.capture
    level = projection.machine.dram
    fit = memory_fit(config, cap.kv_layers,
                     cap.weight_bytes if weight_bytes is None else weight_bytes,
                     level.capacity_bytes, level.capacity_source, projection.batch,
                     projection.seq, projection.context, cap.dtype, cap.kv_dtype)
    notes = [*projection.notes]
    if fit.capacity_bytes is None:
        notes.append(f"memory: profile {projection.machine.name} states no capacity; "
                     "fits unknown")
    else:
        notes.append("memory per device: weights + KV cache + activation peak estimate "
                     "against the datasheet capacity (runtime and allocator reserve not "
                     "subtracted)")
    return replace(projection, memory=fit, notes=tuple(notes))


def memory_lines(projection: Projection, nbytes: Any) -> list[str]:
    """The memory fit in words (`nbytes` formats a byte count)."""
    fit = projection.memory
    if fit is None:
        return []
    per = " per device" if projection.tp > 1 else ""
    head = (f"memory{per}: weights {nbytes(fit.weight_bytes)} + KV cache "
            f"{nbytes(fit.kv_cache_bytes)} + activation peak ~{nbytes(fit.activation_peak_bytes)}"
            f" = {nbytes(fit.resident_bytes)}")
    if fit.capacity_bytes is None:
        return [head + "; capacity unknown (the profile states none)"]
    verdict = "fits" if fit.fits else "DOES NOT FIT"
    head += (f" of {nbytes(fit.capacity_bytes)}: {verdict}, headroom "
             f"{nbytes(fit.headroom_bytes)}")
    batch = ("no batch fits at this context" if not fit.max_batch
             else f"largest batch at this context {fit.max_batch:,}")
    return [head, f"{batch}; {_context_words(fit.max_context, fit.max_context_limited_by)}"]


def _context_words(most: int | None, limited_by: str) -> str:
    if limited_by == "memory":
        return f"longest context at this batch {most:,} (memory)"
    if limited_by == "max_position_embeddings":
        return f"longest context at this batch {most:,} (the model's position limit)"
    if limited_by == "no bound":
        return "no context bound at this batch (every cache layer windowed)"
    return "no context fits at this batch"
