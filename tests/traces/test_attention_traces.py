"""Attention kernels of PyTorch 2.x traces, priced from their recorded arguments.

Each call is written as the profiler records it (Input Dims / Input type / Concrete Inputs,
in schema order, the layout of the real H100 trace in tests/fixtures/traces); each count is
checked against one made independently here: the (query, key) pairs by building the mask
as a matrix, the FLOPs as 4*d per pair and query head forward (QK^T and PV, 2*d each) and
10*d backward (FlashAttention's benchmark convention: bwd = 2.5 x fwd), plus the softmax.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from roofwise.traces.aten import make_call
from roofwise.traces.build import build_ops
from roofwise.traces.prices import price_call
from roofwise.traces.reader import read_trace

BF16, FP16 = "c10::BFloat16", "c10::Half"
FIXTURE = (Path(__file__).parent.parent / "fixtures" / "traces"
           / "tracelens_qwen1.5_0.5b_h100.json.gz")


def mask_pairs(sq: int, sk: int, causal: str | None, left: int | None = None,
               right: int | None = None) -> int:
    """Unmasked pairs of one head, from the mask itself: causal "tl" (j <= i), "br"
    (j <= i + sk - sq, FlashAttention's), sliding window as flash-attn defines it."""
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    offset = sk - sq if causal != "tl" else 0
    keep = np.ones((sq, sk), dtype=bool)
    if causal:
        keep &= j <= i + offset
    if right is not None:
        keep &= j <= i + offset + right
    if left is not None:
        keep &= j >= i + offset - left
    return int(keep.sum())


def forward_flops(b: int, hq: int, sq: int, d: int, pairs: int, dv: int | None = None) -> dict:
    dv = dv or d
    scores = b * hq * pairs
    rows = b * hq * sq
    return {"contraction": 2 * d * scores + 2 * dv * scores,
            "total": 2 * d * scores + 2 * dv * scores + 5 * scores + rows * (1 + dv)}


def backward_flops(b: int, hq: int, sq: int, d: int, pairs: int) -> dict:
    scores = b * hq * pairs
    return {"contraction": 10 * d * scores,
            "total": 10 * d * scores + 6 * scores + 2 * d * b * hq * sq}


def nbytes(*shapes: tuple[int, ...], size: int = 2) -> int:
    return sum(int(np.prod(s)) * size for s in shapes)


def flash_forward(q, k, v, causal="True", max_q="", max_k="", cum=False, window=("", "")):
    """aten::_flash_attention_forward as PyTorch 2.6 records it (15 arguments)."""
    cu = [[], []]
    types = [BF16, BF16, BF16, "", "", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar",
             "Scalar", "Scalar" if window[0] else "", "Scalar" if window[1] else "", "", ""]
    dims = [q, k, v, *cu, [], [], [], [], [], [], [], [], [], []]
    if cum:
        types[3] = types[4] = "int"
        dims[3] = dims[4] = [cum]
    concrete = ["", "", "", "", "", max_q, max_k, "0.", causal, "False", "0.125", window[0],
                window[1], "", ""]
    return make_call("aten::_flash_attention_forward", dims, types, concrete)


def test_flash_forward_of_the_real_bert_call_is_4_d_per_pair() -> None:
    # as recorded in TraceLens' bert-small H100 trace: (1, 141, 8, 64), not causal
    q = [1, 141, 8, 64]
    price = price_call(flash_forward(q, q, q, causal="False", max_q="141", max_k="141"))
    ledger = price.ledger
    assert ledger is not None and price.source == "library" and price.reason == ""
    want = forward_flops(1, 8, 141, 64, 141 * 141)
    assert ledger.ops_by_class["contraction"] == want["contraction"] == 4 * 8 * 141 * 141 * 64
    assert ledger.flops == want["total"]
    assert ledger.read_bytes == nbytes((1, 141, 8, 64), (1, 141, 8, 64), (1, 141, 8, 64))
    assert ledger.write_bytes == nbytes((1, 141, 8, 64))


def test_flash_forward_causal_counts_the_unmasked_half() -> None:
    q = [16, 559, 16, 64]  # the Qwen call of the shipped fixture
    ledger = price_call(flash_forward(q, q, q, causal="True", max_q="559", max_k="559")).ledger
    pairs = mask_pairs(559, 559, "br")
    assert pairs == 559 * 560 // 2
    assert ledger is not None
    assert ledger.ops_by_class["contraction"] == forward_flops(16, 16, 559, 64, pairs)[
        "contraction"]
    # about half the full 4*b*h*s^2*d (FlashAttention's benchmark divides by 2 exactly)
    assert ledger.ops_by_class["contraction"] / (4 * 16 * 16 * 559 ** 2 * 64) == pytest.approx(
        0.5, rel=2e-3)


def test_flash_causal_with_fewer_queries_is_bottom_right_aligned() -> None:
    q, k = [2, 7, 4, 32], [2, 19, 4, 32]
    ledger = price_call(flash_forward(q, k, k, causal="True", max_q="7", max_k="19")).ledger
    pairs = mask_pairs(7, 19, "br")
    assert ledger is not None
    assert ledger.flops == forward_flops(2, 4, 7, 32, pairs)["total"]


def test_flash_sliding_window_bounds_the_keys_each_row_sees() -> None:
    q = [1, 50, 2, 16]
    call = flash_forward(q, q, q, causal="True", max_q="50", max_k="50", window=("8", "0"))
    ledger = price_call(call).ledger
    pairs = mask_pairs(50, 50, "br", left=8, right=0)
    assert pairs == 9 * 50 - 36  # 9 keys per row, fewer in the first 8 rows
    assert ledger is not None and ledger.flops == forward_flops(1, 2, 50, 16, pairs)["total"]


def test_gqa_counts_query_heads_and_reads_kv_heads_once() -> None:
    q, k = [2, 64, 32, 128], [2, 64, 8, 128]
    ledger = price_call(flash_forward(q, k, k, causal="False", max_q="64", max_k="64")).ledger
    assert ledger is not None
    assert ledger.ops_by_class["contraction"] == 4 * 2 * 32 * 64 * 64 * 128
    assert ledger.read_bytes == nbytes(tuple(q), tuple(k), tuple(k))


def test_varlen_decode_is_exact_and_varlen_prefill_a_lower_bound() -> None:
    # decode: 8 sequences, one query each, 5000 keys in all: every query sees all its keys
    q, k = [8, 4, 64], [5000, 4, 64]
    decode = price_call(flash_forward(q, k, k, causal="True", max_q="1", max_k="900", cum=9))
    assert decode.ledger is not None and "decode" in decode.reason
    assert decode.ledger.ops_by_class["contraction"] == 4 * 4 * 5000 * 64
    # prefill: 3 sequences, 1000 tokens, the longest 600: the fewest pairs are 600, 200, 200
    q = [1000, 4, 64]
    prefill = price_call(flash_forward(q, q, q, causal="True", max_q="600", max_k="600",
                                       cum=4))
    pairs = sum(mask_pairs(n, n, "br") for n in (600, 200, 200))
    assert prefill.ledger is not None and "lower bound" in prefill.reason
    assert prefill.ledger.ops_by_class["contraction"] == 4 * 4 * pairs * 64
    # any other split of 1000 tokens with a longest of 600 has more pairs
    assert pairs < sum(mask_pairs(n, n, "br") for n in (600, 300, 100))
    # query and key totals that differ: the pairing is unknown, so no count
    q, k = [40, 4, 64], [1000, 4, 64]
    mixed = price_call(flash_forward(q, k, k, causal="True", max_q="20", max_k="600", cum=4))
    assert mixed.ledger is None and "cu_seqlens" in mixed.reason and mixed.reason.endswith("pair")


def test_is_causal_not_recorded_is_counted_causal_and_said() -> None:
    q = [1, 128, 4, 64]
    call = make_call("aten::_flash_attention_forward", [q, q, q] + [[]] * 12,
                     [BF16] * 3 + ["", "", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar",
                                   "Scalar", "", "", "", ""])
    price = price_call(call, replay=False)
    assert price.ledger is not None and "is_causal not recorded" in price.reason
    assert price.ledger.ops_by_class["contraction"] == 4 * 4 * mask_pairs(128, 128, "br") * 64


@pytest.mark.parametrize("mask_type, aligned", [(0, None), (1, "tl"), (2, "br")])
def test_efficient_forward_reads_custom_mask_type(mask_type, aligned) -> None:
    # _efficient_attention_forward(query, key, value, bias, cu_seqlens_q, cu_seqlens_k,
    # max_seqlen_q, max_seqlen_k, dropout_p, custom_mask_type, compute_log_sumexp, *, scale,
    # seqlen_k, window_size): (b, s, h, d)
    q, k = [2, 24, 4, 64], [2, 40, 4, 64]
    call = make_call("aten::_efficient_attention_forward",
                     [q, k, k] + [[]] * 11,
                     [FP16] * 3 + ["", "", "", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar",
                                   "Scalar", "", ""],
                     ["", "", "", "", "", "", "24", "40", "0.", str(mask_type), "True", "0.125",
                      "", ""])
    ledger = price_call(call).ledger
    pairs = mask_pairs(24, 40, aligned)
    assert ledger is not None and ledger.flops == forward_flops(2, 4, 24, 64, pairs)["total"]


def test_sdpa_efficient_with_a_bias_reads_it_and_adds_it_per_score() -> None:
    # _scaled_dot_product_efficient_attention(query, key, value, attn_bias, compute_log_sumexp,
    # dropout_p, is_causal, *, scale): (b, h, s, d)
    q, bias = [2, 8, 128, 64], [2, 8, 128, 128]
    call = make_call("aten::_scaled_dot_product_efficient_attention", [q, q, q, bias, [], [], [],
                                                                        []],
                     [BF16] * 4 + ["Scalar", "Scalar", "Scalar", ""],
                     ["", "", "", "", "False", "0.", "False", ""])
    ledger = price_call(call).ledger
    want = forward_flops(2, 8, 128, 64, 128 * 128)
    assert ledger is not None
    assert ledger.flops == want["total"] + 2 * 8 * 128 * 128  # one add per score
    assert ledger.read_bytes == nbytes(*(tuple(q),) * 3, tuple(bias))


def test_cudnn_sdpa_causal_is_top_left_aligned() -> None:
    # _scaled_dot_product_cudnn_attention(query, key, value, attn_bias, compute_log_sumexp,
    # dropout_p, is_causal, return_debug_mask, *, scale): more queries than keys
    q, k = [1, 4, 30, 64], [1, 4, 12, 64]
    call = make_call("aten::_scaled_dot_product_cudnn_attention", [q, k, k] + [[]] * 6,
                     [BF16] * 3 + ["", "Scalar", "Scalar", "Scalar", "Scalar", ""],
                     ["", "", "", "", "True", "0.", "True", "False", ""])
    ledger = price_call(call).ledger
    pairs = mask_pairs(30, 12, "tl")
    assert pairs == 12 * 13 // 2 + 18 * 12
    assert ledger is not None and ledger.flops == forward_flops(1, 4, 30, 64, pairs)["total"]


def flash_backward(q, causal="True"):
    """aten::_flash_attention_backward as PyTorch 2.6 records it: (b, s, h, d), lse fp32."""
    b, s, h, _ = q
    dims = [q, q, q, q, q, [b, h, s], [], [], [], [], [], [], [2], [], [], [], []]
    types = [BF16] * 5 + ["float", "", "", "Scalar", "Scalar", "Scalar", "Scalar", "long", "",
                          "Scalar", "", ""]
    concrete = ["", "", "", "", "", "", "", "", str(s), str(s), "0.", causal, "", "", "0.125",
                "", ""]
    return make_call("aten::_flash_attention_backward", dims, types, concrete)


def test_flash_backward_is_two_and_a_half_forwards() -> None:
    q = [4, 256, 8, 64]
    bwd = price_call(flash_backward(q)).ledger
    fwd = price_call(flash_forward(q, q, q, causal="True", max_q="256", max_k="256")).ledger
    pairs = mask_pairs(256, 256, "br")
    assert bwd is not None and fwd is not None
    assert bwd.ops_by_class["contraction"] == backward_flops(4, 8, 256, 64, pairs)[
        "contraction"] == 2.5 * fwd.ops_by_class["contraction"]
    assert bwd.flops == backward_flops(4, 8, 256, 64, pairs)["total"]
    # reads q, k, v, out, grad_out and the fp32 logsumexp; writes grad q, k, v
    assert bwd.read_bytes == nbytes(*(tuple(q),) * 5) + 4 * 8 * 256 * 4
    assert bwd.write_bytes == nbytes(*(tuple(q),) * 3)


@pytest.mark.parametrize("name, dims, types, concrete", [
    # _scaled_dot_product_efficient_attention_backward(grad_out_, query, key, value, attn_bias,
    # out, logsumexp, philox_seed, philox_offset, dropout_p, grad_input_mask, is_causal, *,
    # scale): (b, h, s, d)
    ("aten::_scaled_dot_product_efficient_attention_backward",
     [[2, 4, 96, 64]] * 4 + [[], [2, 4, 96, 64], [2, 4, 96], [], [], [], [], [], []],
     [BF16] * 4 + ["", BF16, "float", "long", "long", "Scalar", "ScalarList", "Scalar", ""],
     [""] * 9 + ["0.", "[True, True, True, False]", "True", ""]),
    # _scaled_dot_product_cudnn_attention_backward(grad_out, query, key, value, out,
    # logsumexp, philox_seed, philox_offset, attn_bias, cum_seq_q, cum_seq_k, max_q, max_k,
    # dropout_p, is_causal, *, scale)
    ("aten::_scaled_dot_product_cudnn_attention_backward",
     [[2, 4, 96, 64]] * 5 + [[2, 4, 96, 1]] + [[]] * 10,
     [BF16] * 5 + ["float", "long", "long", "", "", "", "Scalar", "Scalar", "Scalar", "Scalar",
                   ""],
     [""] * 11 + ["96", "96", "0.", "True", ""]),
    # _scaled_dot_product_flash_attention_backward(grad_out, query, key, value, out, logsumexp,
    # cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, *,
    # scale)
    ("aten::_scaled_dot_product_flash_attention_backward",
     [[2, 4, 96, 64]] * 5 + [[2, 4, 96]] + [[]] * 9,
     [BF16] * 5 + ["float", "", "", "Scalar", "Scalar", "Scalar", "Scalar", "long", "long",
                   "Scalar"],
     [""] * 8 + ["96", "96", "0.", "True", "", "", "0.125"]),
])
def test_the_other_backward_ops_count_as_flash_does(name, dims, types, concrete) -> None:
    ledger = price_call(make_call(name, dims, types, concrete)).ledger
    pairs = mask_pairs(96, 96, "tl")
    assert ledger is not None
    assert ledger.flops == backward_flops(2, 4, 96, 64, pairs)["total"]


@pytest.mark.parametrize("namespace", ["flashattn", "flash_attn"])
def test_flash_attn_package_forward_and_backward(namespace) -> None:
    # flash_attn_interface._flash_attn_forward(q, k, v, dropout_p, softmax_scale, causal,
    # window_size_left, window_size_right, softcap, alibi_slopes, return_softmax): (b, s, h, d)
    q, k = [2, 33, 8, 128], [2, 33, 2, 128]
    fwd = make_call(f"{namespace}::_flash_attn_forward", [q, k, k] + [[]] * 8,
                    [FP16] * 3 + ["Scalar"] * 6 + ["", "Scalar"],
                    ["", "", "", "0.", "0.0883", "True", "-1", "0", "0.", "", "False"])
    ledger = price_call(fwd).ledger
    pairs = mask_pairs(33, 33, "br")
    assert ledger is not None and ledger.flops == forward_flops(2, 8, 33, 128, pairs)["total"]
    # _flash_attn_backward(dout, q, k, v, out, softmax_lse, dq, dk, dv, dropout_p,
    # softmax_scale, causal, window_size_left, window_size_right, softcap, alibi_slopes,
    # deterministic, rng_state)
    bwd = make_call(f"{namespace}::_flash_attn_backward",
                    [q, q, k, k, q, [2, 8, 33], q, k, k] + [[]] * 8 + [[2]],
                    [FP16] * 5 + ["float"] + [FP16] * 3 + ["Scalar"] * 6 + ["", "Scalar",
                                                                             "long"],
                    [""] * 9 + ["0.", "0.0883", "True", "-1", "0", "0.", "", "False", ""])
    ledger = price_call(bwd).ledger
    assert ledger is not None and ledger.flops == backward_flops(2, 8, 33, 128, pairs)["total"]


def test_flash_attn_varlen_forward_and_backward() -> None:
    # _flash_attn_varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
    # max_seqlen_k, dropout_p, softmax_scale, causal, window_size_left, window_size_right,
    # softcap, alibi_slopes, return_softmax, block_table, leftpad_k, seqused_k): (total, h, d)
    q = [300, 4, 64]
    fwd = make_call("flashattn::_flash_attn_varlen_forward",
                    [q, q, q, [5], [5]] + [[]] * 13,
                    [BF16] * 3 + ["int", "int"] + ["Scalar"] * 8 + ["", "Scalar", "", "", ""],
                    ["", "", "", "", "", "100", "100", "0.", "0.125", "False", "-1", "-1", "0.",
                     "", "False", "", "", ""])
    price = price_call(fwd)
    pairs = sum(n * n for n in (100, 67, 67, 66))  # 4 sequences, the longest 100
    assert price.ledger is not None and "lower bound" in price.reason
    assert price.ledger.ops_by_class["contraction"] == 4 * 4 * pairs * 64
    bwd = make_call("flashattn::_flash_attn_varlen_backward",
                    [q, q, q, q, q, [4, 300], q, q, q, [5], [5]] + [[]] * 11,
                    [BF16] * 5 + ["float"] + [BF16] * 3 + ["int", "int"] + ["Scalar"] * 8
                    + ["", "Scalar", ""],
                    [""] * 11 + ["100", "100", "0.", "0.125", "False", "-1", "-1", "0.", "",
                                 "False", ""])
    ledger = price_call(bwd).ledger
    assert ledger is not None and ledger.ops_by_class["contraction"] == 10 * 4 * pairs * 64


def _op(name, ts, dur, ext, dims, types, concrete):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": {"External id": ext, "Input Dims": dims, "Input type": types,
                     "Concrete Inputs": concrete}}


def _launch(ts, corr, ext):
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
            "ts": ts, "dur": 2, "args": {"correlation": corr, "External id": ext}}


def _kernel(ts, dur, corr, name):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "correlation": corr}}


def test_the_count_lands_once_on_the_op_that_launched_the_kernel(tmp_path) -> None:
    """SDPA -> efficient SDPA (which also launches a small kernel of its own) -> the efficient
    kernel launched under _efficient_attention_forward: the inner op carries the FLOPs, the
    outer's own kernel time is unpriced with the reason, nothing is counted twice."""
    bhsd, bshd = [1, 8, 256, 64], [1, 256, 8, 64]
    events = [
        _op("aten::scaled_dot_product_attention", 0, 100, 1, [bhsd] * 3 + [[]] * 5,
            [BF16] * 3 + ["", "Scalar", "Scalar", "", "Scalar"],
            ["", "", "", "", "0.", "True", "", "False"]),
        _op("aten::_scaled_dot_product_efficient_attention", 5, 90, 2, [bhsd] * 3 + [[]] * 5,
            [BF16] * 3 + ["", "Scalar", "Scalar", "Scalar", ""],
            ["", "", "", "", "True", "0.", "True", ""]),
        _launch(8, 900, 2), _kernel(200, 3, 900, "fill_kernel"),
        _op("aten::_efficient_attention_forward", 20, 60, 3, [bshd] * 3 + [[]] * 11,
            [BF16] * 3 + ["", "", "", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar",
                          "Scalar", "", ""],
            ["", "", "", "", "", "", "256", "256", "0.", "1", "True", "0.125", "", ""]),
        _launch(30, 901, 3), _kernel(210, 40, 901, "fmha_cutlassF_bf16_aligned_64x64_rf_sm80"),
    ]
    path = tmp_path / "sdpa.json"
    path.write_text(json.dumps({"traceEvents": events}))
    built = build_ops(read_trace(path))
    by_op = {o.op: o for o in built.ops}
    assert set(by_op) == {"aten::_scaled_dot_product_efficient_attention",
                          "aten::_efficient_attention_forward"}
    inner, outer = by_op["aten::_efficient_attention_forward"], by_op[
        "aten::_scaled_dot_product_efficient_attention"]
    pairs = mask_pairs(256, 256, "tl")
    assert inner.price.ledger is not None
    assert inner.price.ledger.flops == forward_flops(1, 8, 256, 64, pairs)["total"]
    assert outer.price.ledger is None and "_efficient_attention_forward" in outer.price.reason
    assert built.summary.priced_time_s == pytest.approx(40e-6)
    counted = sum(o.price.ledger.flops for o in built.ops if o.price.ledger)
    assert counted == inner.price.ledger.flops


def test_the_real_qwen_trace_prices_every_flash_kernel() -> None:
    """TraceLens' Qwen1.5-0.5B H100 trace (PyTorch 2.6): all 24 flash kernels are launched
    under aten::_flash_attention_forward, now priced; the outer ops launch nothing."""
    built = build_ops(read_trace(FIXTURE), replay=False)
    flash = [o for o in built.ops if o.op == "aten::_flash_attention_forward"]
    assert len(flash) == 24 and all(o.price.priced and o.price.reason == "" for o in flash)
    assert not [o for o in built.ops if "scaled_dot_product" in o.op]
    # independently, from the raw events: the flash kernels whose launch call lies inside a
    # _flash_attention_forward op on its thread
    with gzip.open(FIXTURE) as handle:
        events = json.load(handle)["traceEvents"]
    spans = [(e["tid"], e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("cat") == "cpu_op" and e["name"] == "aten::_flash_attention_forward"]
    launches = {e["args"]["correlation"]: (e["tid"], e["ts"]) for e in events
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    under_flash = [e["dur"] for e in events if e.get("cat") == "kernel"
                   and "flash_fwd_kernel" in e["name"] and any(
                       tid == launches.get(e["args"].get("correlation"), (None, 0))[0]
                       and start <= launches[e["args"]["correlation"]][1] <= end
                       for tid, start, end in spans)]
    assert sum(o.kernels for o in flash) == len(under_flash) == 24
    assert sum(o.time_s for o in flash) == pytest.approx(sum(under_flash) * 1e-6)
    pairs = 559 * 560 // 2  # causal, 559 tokens
    per_call = forward_flops(16, 16, 559, 64, pairs)
    assert sum(o.price.ledger.ops_by_class["contraction"] for o in flash) == 24 * per_call[
        "contraction"]
    assert sum(o.price.ledger.flops for o in flash) == pytest.approx(2.512e11, rel=1e-3)
    assert sum(o.time_s for o in flash) == pytest.approx(2.72e-3, rel=1e-2)


def test_a_training_step_prices_the_backward_on_its_inner_op(tmp_path) -> None:
    """_scaled_dot_product_flash_attention_backward -> _flash_attention_backward, which
    launches the backward's three kernels: one row, 2.5x the forward's contraction FLOPs,
    the time of all three kernels."""
    bhsd, bshd = [2, 8, 512, 64], [2, 512, 8, 64]
    outer = _op("aten::_scaled_dot_product_flash_attention_backward", 0, 200, 1,
                [bhsd] * 5 + [[2, 8, 512]] + [[]] * 9,
                [BF16] * 5 + ["float", "", "", "Scalar", "Scalar", "Scalar", "Scalar", "long",
                              "long", "Scalar"],
                [""] * 8 + ["512", "512", "0.", "True", "", "", "0.125"])
    inner = _op("aten::_flash_attention_backward", 10, 180, 2,
                [bshd] * 5 + [[2, 8, 512]] + [[]] * 8 + [[]] * 3,
                [BF16] * 5 + ["float", "", "", "Scalar", "Scalar", "Scalar", "Scalar", "long",
                              "long", "Scalar", "", ""],
                [""] * 8 + ["512", "512", "0.", "True", "", "", "0.125", "", ""])
    events = [outer, inner]
    for n, (name, dur) in enumerate([("flash_bwd_dot_do_o_kernel", 5),
                                     ("flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel", 90),
                                     ("flash_bwd_convert_dq_kernel", 4)]):
        events += [_launch(20 + 10 * n, 700 + n, 2), _kernel(300 + 100 * n, dur, 700 + n, name)]
    path = tmp_path / "bwd.json"
    path.write_text(json.dumps({"traceEvents": events}))
    built = build_ops(read_trace(path))
    assert [(o.op, o.kernels) for o in built.ops] == [("aten::_flash_attention_backward", 3)]
    row = built.ops[0]
    assert row.time_s == pytest.approx(99e-6) and row.price.ledger is not None
    pairs = mask_pairs(512, 512, "br")
    assert row.price.ledger.flops == backward_flops(2, 8, 512, 64, pairs)["total"]
