"""MoE: priced from the routing it carries, never an average."""

from collections.abc import Iterable

import numpy as np
import pytest

from roofwise.base.errors import InputError
from roofwise.ledgers.ledger import Work
from roofwise.ops import expert_counts, moe, softmax, swiglu

H, INTER = 16, 32  # hidden, intermediate


def test_moe_bytes_recount_from_bound_arrays() -> None:
    # 4 experts, top-2, 5 tokens; counts (4, 0, 3, 3): experts 0, 2 and 3 touched
    t, k, touched, e = 5, 2, 3, 4
    bf16 = np.float16
    reads_once: list[np.ndarray] = [np.empty((t, H), bf16),                 # x
                  np.empty((e, H), bf16),                 # router weight
                  np.empty((touched, 2 * INTER, H), bf16),    # gate/up weights, touched only
                  np.empty((touched, H, INTER), bf16)]        # down weights, touched only
    both: list[np.ndarray] = [
        np.empty((t, k), np.int32), np.empty((t, k), np.float32),  # routing ids, weights
        np.empty((t * k, H), bf16), np.empty((t * k, INTER), bf16),  # permuted x, h
        np.empty((t * k, H), bf16)]  # expert outputs
    out = np.empty((t, H), bf16)
    ledger = moe((4, 0, 3, 3), top_k=2, hidden=H, intermediate=INTER)
    assert ledger.read_bytes == sum(a.nbytes for a in reads_once + both)
    assert ledger.write_bytes == sum(a.nbytes for a in both) + out.nbytes


def test_moe_flops_hand_count() -> None:
    # router GEMM 2*5*16*4 = 640; softmax 20 logits x (3 + 1 + 1 exp) = 100 and one
    # reciprocal of the sum per token = 5; top-2 selection 2*20 = 40;
    # experts by their own counts (4, 0, 3, 3):
    #   gate/up 2*n*16*64 = 2048n, down 2*n*32*16 = 1024n, SwiGLU 5*32n = 160n -> 3232n;
    #   n = 4 + 3 + 3 = 10 -> 32,320; combine (2*2-1)*5*16 = 240
    ledger = moe((4, 0, 3, 3), top_k=2, hidden=H, intermediate=INTER)
    assert ledger.flops == 640 + 100 + 5 + 40 + 32_320 + 240
    assert ledger.ops_by_class["contraction"] == 640 + 30_720


def test_untouched_expert_weights_cost_nothing() -> None:
    weights_per_expert = (2 * INTER * H + H * INTER) * 2  # bf16 gate/up and down
    touched_all = moe((3, 1, 3, 3), top_k=2, hidden=H, intermediate=INTER)
    expert_1_idle = moe((4, 0, 3, 3), top_k=2, hidden=H, intermediate=INTER)
    assert touched_all.lookup_bytes - expert_1_idle.lookup_bytes == weights_per_expert
    assert expert_1_idle.tensor("w_down").shape == (3, H, INTER)
    assert touched_all.flops == expert_1_idle.flops  # same routed tokens, same GEMM work


def test_same_average_load_different_spread_prices_differently() -> None:
    # 8 tokens, top-1, 4 experts: both average 2 tokens per expert
    spread = moe((2, 2, 2, 2), top_k=1, hidden=H, intermediate=INTER)
    skewed = moe((4, 4, 0, 0), top_k=1, hidden=H, intermediate=INTER)
    assert spread.bytes - skewed.bytes == 2 * (2 * INTER * H + H * INTER) * 2
    assert spread.bytes != skewed.bytes


def test_routing_array_equals_its_counts() -> None:
    routing = np.array([[0, 2], [2, 3], [0, 3], [0, 2], [3, 0]])
    counts, tokens, top_k = expert_counts(routing, num_experts=4)
    assert counts.tolist() == [4, 0, 3, 3] and (tokens, top_k) == (5, 2)
    from_routing = moe(routing=routing, num_experts=4, hidden=H, intermediate=INTER)
    from_counts = moe((4, 0, 3, 3), top_k=2, hidden=H, intermediate=INTER)
    assert (from_routing.bytes, from_routing.flops) == (from_counts.bytes, from_counts.flops)


def test_inconsistent_counts_rejected() -> None:
    with pytest.raises(InputError, match="top_k"):
        moe((3, 2), top_k=2, hidden=H, intermediate=INTER)  # 5 routed slots, not a multiple of 2
    with pytest.raises(InputError, match="twice"):
        moe(routing=[[1, 1]], num_experts=2, hidden=H, intermediate=INTER)


def test_router_priced_over_all_experts_when_the_last_get_no_tokens() -> None:
    # 3 tokens, top-2, 5 experts; ids only 0..2, so experts 3 and 4 idle (max id + 1 = 3)
    routing = np.array([[0, 1], [1, 2], [0, 2]])
    ledger = moe(routing=routing, num_experts=5, hidden=H, intermediate=INTER)
    assert ledger.tensor("router_weight").shape == (5, H)
    assert ledger.tensor("w_down").shape == (3, H, INTER)  # only touched experts' weights
    # router GEMM 2*3*16*5 = 480; softmax 15 logits x 5 + 3 reciprocals = 78;
    # top-2 selection 2*15 = 30; experts (2, 2, 2, 0, 0): 3232 * 6 = 19,392;
    # combine (2*2-1)*3*16 = 144
    assert ledger.flops == 480 + 78 + 30 + 19_392 + 144
    assert ledger == moe((2, 2, 2, 0, 0), top_k=2, hidden=H, intermediate=INTER)


def test_routing_needs_num_experts_and_ids_inside_it() -> None:
    routing = [[0, 1], [1, 2]]
    with pytest.raises(InputError, match="num_experts"):
        moe(routing=routing, hidden=H, intermediate=INTER)
    with pytest.raises(InputError, match=r"\[0, 2\)"):
        moe(routing=routing, num_experts=2, hidden=H, intermediate=INTER)
    with pytest.raises(InputError, match="num_experts"):
        expert_counts(routing, 0)


def test_router_softmax_and_activation_are_the_library_ops() -> None:
    # the router's softmax is norms.softmax over (tokens, experts); each expert's SwiGLU
    # is activations.swiglu over (n_e, intermediate): the same work, entry for entry
    ledger = moe((4, 0, 3, 3), top_k=2, hidden=H, intermediate=INTER)

    def counts(work: Iterable[Work]) -> list[tuple[str, str, float]]:
        return [(w.unit, w.op_class, w.ops) for w in work]

    router = [w for w in ledger.work if w.label.startswith("router softmax")]
    assert counts(router) == counts(softmax(rows=5, cols=4).work)
    expert_2 = [w for w in ledger.work if w.label.startswith("expert 2 SwiGLU")]
    assert counts(expert_2) == counts(swiglu((3, INTER)).work)
