"""A mixture-of-experts FFN layer, priced from the routing the call actually carries.

The routing comes in as per-expert token counts (`expert_tokens`, one count per expert) or as
the routing itself (`routing`: the top-k expert ids of every token, a (tokens, top_k) array,
with `num_experts` required: the router scores every expert, including those no token picks,
so the expert count cannot be read off the ids).
Never an average: each expert's GEMMs are counted from its own tokens, and only the experts
the routing touches have their weights read; an expert with no tokens costs nothing.

Convention (the layer as production grouped-GEMM MoE runs it):
- x (tokens, hidden) read once, out (tokens, hidden) written once;
- router: logits = x @ router_weight^T (num_experts, hidden, a lookup) on the tensor cores;
  softmax over the experts (`norms.softmax_work`: 3 arithmetic + 1 compare + 1 exp per logit
  and one reciprocal per token) and top-k selection (top_k compares per logit); the chosen
  ids (int32) and weights (fp32), (tokens, top_k), are written by the router and read by the
  permutation and the combine;
- permutation traffic: the token rows gathered into expert order (tokens*top_k, hidden),
  the activated hidden states between the two GEMMs (tokens*top_k, intermediate) and the
  expert outputs before the weighted combine (tokens*top_k, hidden) are each written once
  and read once (charged as in-out buffers);
- expert e with n_e tokens: up/gate GEMM 2*n_e*hidden*(2*intermediate if gated, else
  intermediate), down GEMM 2*n_e*intermediate*hidden; SwiGLU (`activations.swiglu_work`:
  3 arithmetic + 2 transcendental per element) or SiLU (`activations.silu_work`: 2 + 2) on
  its n_e*intermediate outputs;
- the weights of each touched expert (gate/up and down, in `dtype`) are read once;
- combine: per output element top_k multiplies and top_k - 1 adds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from roofwise.base.errors import InputError
from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work
from roofwise.ops import _common as c
from roofwise.ops.activations import silu_work, swiglu_work
from roofwise.ops.norms import softmax_work


def expert_counts(routing: Sequence[Sequence[int]] | np.ndarray,
                  num_experts: int) -> tuple[np.ndarray, int, int]:
    """Per-expert token counts (num_experts of them, idle experts 0), tokens and top_k from a
    (tokens, top_k) array of expert ids in [0, num_experts)."""
    c.positive(num_experts, "moe.num_experts")
    ids = np.asarray(routing)
    if ids.ndim != 2 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
        raise InputError("moe.routing", f"expected a non-empty (tokens, top_k) integer array "
                                        f"of expert ids, got shape {ids.shape} {ids.dtype}")
    if ids.min() < 0 or ids.max() >= num_experts:
        raise InputError("moe.routing", f"expert ids must lie in [0, {num_experts}) for "
                                        f"num_experts={num_experts}, got "
                                        f"{ids.min()}..{ids.max()}")
    if any(len(set(row)) != len(row) for row in ids.tolist()):
        raise InputError("moe.routing", "a token is routed to the same expert twice")
    return np.bincount(ids.ravel(), minlength=num_experts), ids.shape[0], ids.shape[1]


def moe(expert_tokens: tuple[int, ...] = (), top_k: int = 0, hidden: int = 4096,
        intermediate: int = 14336, num_experts: int = 0, dtype: str = "bf16",
        gated: bool = True,
        routing: Sequence[Sequence[int]] | np.ndarray | None = None) -> Ledger:
    """MoE FFN from per-expert token counts (with top_k) or a (tokens, top_k) routing array.

    With `expert_tokens`, num_experts 0 means one expert per count (a non-zero value must
    equal the number of counts); with `routing`, num_experts is required.
    """
    where = "moe"
    c.positive(hidden, f"{where}.hidden")
    c.positive(intermediate, f"{where}.intermediate")
    c.non_negative(num_experts, f"{where}.num_experts")
    if routing is not None:
        if expert_tokens:
            raise InputError(where, "give expert_tokens or routing, not both")
        if not num_experts:
            raise InputError(f"{where}.num_experts", "required with a routing array: the "
                                                     "router scores every expert, including "
                                                     "those no token is routed to")
        counts, tokens, width = expert_counts(routing, num_experts)
        if top_k and top_k != width:
            raise InputError(f"{where}.top_k", f"{top_k} disagrees with the routing's {width} "
                                               f"experts per token")
        top_k = width
    else:
        if not expert_tokens:
            raise InputError(f"{where}.expert_tokens", "give the token count of every expert "
                                                       "(or, from Python, a routing array)")
        # Python ints (an object array): a count near the ceiling must not wrap as int64 would
        counts = np.asarray([c.non_negative(n, f"{where}.expert_tokens")
                             for n in expert_tokens], dtype=object)
        if num_experts and num_experts != counts.size:
            raise InputError(f"{where}.num_experts", f"{num_experts} experts but "
                                                     f"{counts.size} token counts")
        c.positive(top_k, f"{where}.top_k")
        total = int(counts.sum())
        if total % top_k or total == 0:
            raise InputError(f"{where}.expert_tokens", f"counts sum to {total}, which is not "
                                                       f"a positive multiple of top_k={top_k}")
        tokens = total // top_k
        if int(counts.max()) > tokens:
            raise InputError(f"{where}.expert_tokens", f"an expert has {int(counts.max())} "
                                                       f"tokens of {tokens}")
    experts = int(counts.size)
    if top_k > experts:
        raise InputError(f"{where}.top_k", f"top_k={top_k} exceeds {experts} experts")
    compute = c.dtype(dtype, f"{where}.dtype")
    unit = c.contraction_unit(compute, f"{where}.dtype")
    touched = int(np.count_nonzero(counts))
    routed = tokens * top_k  # == counts.sum()
    up = (2 if gated else 1) * intermediate

    tensors = (
        Tensor("x", (tokens, hidden), compute, Role.INPUT),
        Tensor("router_weight", (experts, hidden), compute, Role.LOOKUP),
        Tensor("topk_ids", (tokens, top_k), "int32", Role.INOUT),
        Tensor("topk_weights", (tokens, top_k), "fp32", Role.INOUT),
        Tensor("x_permuted", (routed, hidden), compute, Role.INOUT),
        Tensor("w_gate_up", (touched, up, hidden), compute, Role.LOOKUP),
        Tensor("h", (routed, intermediate), compute, Role.INOUT),
        Tensor("w_down", (touched, hidden, intermediate), compute, Role.LOOKUP),
        Tensor("y_experts", (routed, hidden), compute, Role.INOUT),
        Tensor("out", (tokens, hidden), compute, Role.OUTPUT),
    )
    logits = tokens * experts
    activation, act_name = (swiglu_work, "SwiGLU") if gated else (silu_work, "SiLU")
    experts_work = []
    for e in np.flatnonzero(counts):
        n_e = int(counts[e])
        experts_work += [
            Work(unit, "contraction", 2 * n_e * hidden * up,
                 f"expert {e} gate/up GEMM, 2*{n_e}*hidden*{up}"),
            *activation(n_e * intermediate, f"expert {e} {act_name}: "),
            Work(unit, "contraction", 2 * n_e * intermediate * hidden,
                 f"expert {e} down GEMM, 2*{n_e}*intermediate*hidden")]
    work = (
        Work(unit, "contraction", 2 * tokens * hidden * experts, "router GEMM"),
        *softmax_work(tokens, experts, "router softmax: "),
        Work(c.CUDA, "compare", top_k * logits, "top-k selection, top_k/logit"),
        *experts_work,
        Work(c.CUDA, "arithmetic", (2 * top_k - 1) * tokens * hidden,
             "weighted combine, 2*top_k-1/output elem"),
    )
    per_expert = ", ".join(str(int(n)) for n in counts)
    return Ledger(name=where, roof=unit, tensors=tensors, work=work, notes=(
        f"{tokens} tokens, top_{top_k} of {experts} experts; {touched} touched",
        f"tokens per expert: {per_expert}"))
