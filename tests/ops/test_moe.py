"""MoE: priced from the routing it carries, never an average."""

import numpy as np
import pytest

from roofwise.errors import InputError
from roofwise.ops import expert_counts, moe

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
    # router GEMM 2*5*16*4 = 640; softmax 20 logits x (3 + 1 + 1 exp) = 100;
    # top-2 selection 2*20 = 40; experts by their own counts (4, 0, 3, 3):
    #   gate/up 2*n*16*64 = 2048n, down 2*n*32*16 = 1024n, SwiGLU 5*32n = 160n -> 3232n;
    #   n = 4 + 3 + 3 = 10 -> 32,320; combine (2*2-1)*5*16 = 240
    ledger = moe((4, 0, 3, 3), top_k=2, hidden=H, intermediate=INTER)
    assert ledger.flops == 640 + 100 + 40 + 32_320 + 240
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
        moe(routing=[[1, 1]], hidden=H, intermediate=INTER)
