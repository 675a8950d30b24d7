"""Softmax, RMSNorm, LayerNorm: bytes from the bound arrays, FLOPs by hand."""

import numpy as np

from roofwise.ops import layernorm, rmsnorm, softmax


def test_softmax_bytes_recount() -> None:
    x = np.empty((6, 10), np.float16)  # bf16 in
    y = np.empty((6, 10), np.float32)  # fp32 out
    ledger = softmax(6, 10, dtype="bf16", out_dtype="fp32")
    assert (ledger.read_bytes, ledger.write_bytes) == (x.nbytes, y.nbytes)


def test_softmax_flops_hand_count() -> None:
    # 6 rows x 10: 60 max compares, 180 arithmetic, 60 exps + 6 reciprocals
    ledger = softmax(6, 10)
    assert ledger.ops_by_unit == {"cuda_core.fp32": 240.0, "sfu.fp32": 66.0}
    assert ledger.ops_by_class == {"compare": 60.0, "arithmetic": 180.0,
                                   "transcendental": 66.0}


def test_rmsnorm_bytes_recount() -> None:
    arrays = [np.empty((5, 8), np.float16), np.empty((8,), np.float16)]  # x, weight
    ledger = rmsnorm(5, 8)
    assert ledger.read_bytes == sum(a.nbytes for a in arrays)
    assert ledger.write_bytes == np.empty((5, 8), np.float16).nbytes
    assert ledger.lookup_bytes == 16


def test_rmsnorm_flops_hand_count() -> None:
    # 40 elems x (FMA 2 + rstd 1 + weight 1) = 160; per row 2 arith -> 10; 5 rsqrt
    assert rmsnorm(5, 8).ops_by_unit == {"cuda_core.fp32": 170.0, "sfu.fp32": 5.0}
    assert rmsnorm(5, 8, weight=False).ops_by_unit["cuda_core.fp32"] == 40 * 3 + 10


def test_layernorm_bytes_recount() -> None:
    arrays = [np.empty((4, 16), np.float32), np.empty((16,), np.float32),
              np.empty((16,), np.float32)]
    ledger = layernorm(4, 16, dtype="fp32")
    assert ledger.read_bytes == sum(a.nbytes for a in arrays)
    assert ledger.write_bytes == np.empty((4, 16), np.float32).nbytes


def test_layernorm_flops_hand_count() -> None:
    # 64 elems x (sum 1 + centre 1 + FMA 2 + rstd 1 + weight 1 + bias 1 = 7) = 448;
    # per row 3 -> 12; 4 rsqrt
    assert layernorm(4, 16).ops_by_unit == {"cuda_core.fp32": 460.0, "sfu.fp32": 4.0}
