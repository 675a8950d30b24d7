"""Attention ledgers: causal pairs by brute force, bytes from the bound arrays, FLOPs by hand."""

import numpy as np
import pytest

from roofwise.base.errors import InputError
from roofwise.ops import attention, attention_decode, attention_prefill, causal_pairs


@pytest.mark.parametrize(("q_len", "kv_len"), [(5, 5), (3, 7), (1, 6), (7, 3), (4, 1)])
def test_causal_pairs_match_a_brute_force_mask(q_len: int, kv_len: int) -> None:
    # bottom-right aligned: query i sits at position kv_len - q_len + i
    full = np.tril(np.ones((kv_len, kv_len), dtype=bool)) if kv_len >= q_len else None
    if full is not None:
        mask = full[kv_len - q_len:]
    else:  # more queries than keys: the first q_len - kv_len rows see nothing
        mask = np.tril(np.ones((q_len, kv_len), dtype=bool), k=kv_len - q_len)
    assert causal_pairs(q_len, kv_len) == int(mask.sum())


def test_causal_halves_the_score_work_exactly() -> None:
    # 4 positions, 2 heads of 8: causal pairs 1+2+3+4 = 10 per head, vs 16 unmasked
    causal = attention(batch=1, q_len=4, kv_len=4, q_heads=2, kv_heads=2, head_dim=8)
    full = attention(batch=1, q_len=4, kv_len=4, q_heads=2, kv_heads=2, head_dim=8,
                     causal=False)
    assert causal.ops_by_unit["sfu.fp32"] == 2 * 10 + 2 * 4  # exps + 1/row-sum reciprocals
    assert full.ops_by_unit["sfu.fp32"] == 2 * 16 + 2 * 4


def test_prefill_gqa_bytes_recount() -> None:
    b, s, hq, hkv, d = 2, 16, 8, 2, 32
    arrays = [np.empty((b, s, hq, d), np.float16),  # q, bf16
              np.empty((b, s, hkv, d), np.float16), np.empty((b, s, hkv, d), np.float16)]
    ledger = attention_prefill(batch=b, seq_len=s, q_heads=hq, kv_heads=hkv, head_dim=d)
    assert ledger.read_bytes == sum(a.nbytes for a in arrays)
    assert ledger.write_bytes == np.empty((b, s, hq, d), np.float16).nbytes


def test_prefill_flops_hand_count() -> None:
    # batch 1, 4 positions causal -> 10 pairs per head; 2 query heads, d = 8
    # QK^T 2*8*10*2 = 320, PV 320; softmax 3*20 arith + 20 max + 20 exp;
    # per row (8 rows) 1 reciprocal and 8 normalising multiplies = 8 + 64
    ledger = attention_prefill(batch=1, seq_len=4, q_heads=2, kv_heads=1, head_dim=8)
    assert ledger.ops_by_unit == {"tensor_core.bf16": 640.0, "cuda_core.fp32": 60 + 20 + 64,
                                  "sfu.fp32": 20 + 8}
    assert ledger.ops_by_class["contraction"] == 640
    assert ledger.roof == "tensor_core.bf16"


def test_decode_paged_fp8_kv_bytes_recount() -> None:
    b, kv_len, hq, hkv, d, page = 3, 40, 8, 1, 64, 16  # MQA; 3 pages per sequence
    # the 40 tokens each sequence attends to, not the 48 slots of its 3 pages
    arrays: list[np.ndarray] = [np.empty((b, 1, hq, d), np.float16),  # q, bf16
              np.empty((b, kv_len, hkv, d), np.uint8),              # k tokens, fp8
              np.empty((b, kv_len, hkv, d), np.uint8),              # v tokens, fp8
              np.empty((b, 3), np.int32), np.empty((b,), np.int32),  # page table, lengths
              np.empty((1,), np.float32), np.empty((1,), np.float32)]  # k and v scales
    ledger = attention_decode(batch=b, kv_len=kv_len, q_heads=hq, kv_heads=hkv, head_dim=d,
                              kv_dtype="fp8_e4m3", page_size=page)
    assert ledger.read_bytes == sum(a.nbytes for a in arrays)
    assert ledger.write_bytes == np.empty((b, 1, hq, d), np.float16).nbytes
    assert ledger.roof == "tensor_core.bf16"  # compute dtype, not the KV dtype


def test_decode_flops_hand_count() -> None:
    # one query over 40 keys: 40 pairs per head; 3 sequences x 8 heads = 24 rows, 960 scores
    # QK^T + PV = 2 * 2*64*960 = 245,760; softmax 4*960 = 3,840 on CUDA + 24*64 normalising;
    # SFU 960 exps + 24 reciprocals
    ledger = attention_decode(batch=3, kv_len=40, q_heads=8, kv_heads=1, head_dim=64,
                              page_size=16)
    assert ledger.ops_by_unit == {"tensor_core.bf16": 245_760.0,
                                  "cuda_core.fp32": 3_840.0 + 1_536.0, "sfu.fp32": 984.0}


def test_general_attention_bytes_and_flops() -> None:
    # non-causal MHA, q_len 2 over kv_len 6, fp16: pairs 12 per head, 4 heads, d 16
    ledger = attention(batch=1, q_len=2, kv_len=6, q_heads=4, kv_heads=4, head_dim=16,
                       causal=False, dtype="fp16")
    assert ledger.bytes == 2 * (2 * 4 * 16) * 2 + 2 * (6 * 4 * 16) * 2
    assert ledger.ops_by_class["contraction"] == 2 * (2 * 16 * 12 * 4)


def test_gqa_requires_divisible_heads() -> None:
    with pytest.raises(InputError, match="kv_heads"):
        attention(q_heads=6, kv_heads=4)


def test_fp8_attention_reads_its_descales_and_writes_bf16() -> None:
    b, s, hq, hkv, d = 2, 8, 4, 2, 16
    arrays: list[np.ndarray] = [np.empty((b, s, hq, d), np.uint8),   # q, fp8
              np.empty((b, s, hkv, d), np.uint8), np.empty((b, s, hkv, d), np.uint8),  # k, v
              np.empty((1,), np.float32), np.empty((1,), np.float32),  # q and k descales
              np.empty((1,), np.float32)]                               # v descale
    ledger = attention_prefill(batch=b, seq_len=s, q_heads=hq, kv_heads=hkv, head_dim=d,
                               dtype="fp8_e4m3")
    assert ledger.read_bytes == sum(a.nbytes for a in arrays)
    assert ledger.lookup_bytes == 3 * 4
    assert ledger.write_bytes == np.empty((b, s, hq, d), np.float16).nbytes  # bf16 out
    assert ledger.tensor("out").dtype == "bf16"
    assert ledger.roof == "tensor_core.fp8"


def test_fp8_attention_output_dtype_can_still_be_set() -> None:
    ledger = attention(batch=1, q_len=4, kv_len=4, q_heads=2, kv_heads=2, head_dim=8,
                       dtype="fp8_e4m3", out_dtype="fp8_e4m3")
    assert ledger.write_bytes == 4 * 2 * 8  # one byte per output element
    bf16 = attention(batch=1, q_len=4, kv_len=4, q_heads=2, kv_heads=2, head_dim=8)
    assert "q_scale" not in {t.name for t in bf16.tensors}  # no descales without fp8


@pytest.mark.parametrize(("build", "kwargs", "where"), [
    (attention_decode, {"page_size": -1}, "attention_decode.page_size"),
    (attention_decode, {"kv_heads": 5}, "attention_decode.kv_heads"),
    (attention_decode, {"kv_dtype": "bf17"}, "attention_decode.kv_dtype"),
    (attention_prefill, {"seq_len": 0}, "attention_prefill.seq_len"),
    (attention_prefill, {"head_dim": 0}, "attention_prefill.head_dim"),
    (attention, {"page_size": -1}, "attention.page_size"),
])
def test_errors_name_the_operator_called(build, kwargs, where) -> None:
    with pytest.raises(InputError) as caught:
        build(**kwargs)
    assert caught.value.where == where


def test_each_operator_keeps_its_own_ledger_name() -> None:
    assert (attention().name, attention_prefill().name, attention_decode().name) == (
        "attention", "attention_prefill", "attention_decode")
