"""GEMM ledgers: bytes recounted from the arrays a call binds, FLOPs by hand."""

import numpy as np
import pytest

from roofwise.base.errors import InputError
from roofwise.ops import batched_gemm, gemm

F8 = np.uint8  # one byte per element, as fp8


def test_gemm_bytes_recount_bf16_with_bias() -> None:
    m, n, k = 256, 512, 128
    a = np.empty((m, k), np.float16)  # bf16: 2 bytes/elem, same size as fp16
    b = np.empty((k, n), np.float16)
    c = np.empty((m, n), np.float16)
    bias = np.empty((n,), np.float16)
    ledger = gemm(m, n, k, dtype="bf16", bias=True)
    assert ledger.read_bytes == a.nbytes + b.nbytes + bias.nbytes
    assert ledger.write_bytes == c.nbytes
    assert ledger.roof == "tensor_core.bf16"


def test_gemm_flops_hand_count_bf16_with_bias() -> None:
    # 2*m*n*k contraction = 2*256*512*128 = 33,554,432; bias 1 add per output = 131,072
    ledger = gemm(256, 512, 128, dtype="bf16", bias=True)
    assert ledger.ops_by_unit == {"tensor_core.bf16": 33_554_432.0, "cuda_core.fp32": 131_072.0}
    assert ledger.flops == 33_685_504


def test_fp8_per_row_scales_bytes_and_flops() -> None:
    m, n, k = 64, 96, 32
    expected_read = (np.empty((m, k), F8).nbytes + np.empty((k, n), F8).nbytes
                     + np.empty((m,), np.float32).nbytes + np.empty((n,), np.float32).nbytes)
    ledger = gemm(m, n, k, dtype="fp8_e4m3", scale="row", out_dtype="bf16")
    assert ledger.read_bytes == expected_read == 2048 + 3072 + 256 + 384
    assert ledger.write_bytes == np.empty((m, n), np.float16).nbytes
    assert ledger.roof == "tensor_core.fp8"
    # 2*64*96*32 = 393,216 on fp8; epilogue 2 multiplies per output: 2*64*96 = 12,288
    assert ledger.ops_by_unit == {"tensor_core.fp8": 393_216.0, "cuda_core.fp32": 12_288.0}


def test_fp8_per_tensor_scales_default_and_bf16_output() -> None:
    ledger = gemm(64, 96, 32, dtype="fp8_e4m3")
    assert ledger.tensor("a_scale").shape == (1,)
    assert ledger.tensor("c").dtype == "bf16"
    # epilogue: one multiply per output plus the one a_scale*b_scale product
    assert ledger.ops_by_unit["cuda_core.fp32"] == 64 * 96 + 1
    assert ledger.read_bytes == 64 * 32 + 32 * 96 + 4 + 4


def test_fp32_runs_on_cuda_cores_unless_tf32_allowed() -> None:
    assert gemm(64, 64, 64, dtype="fp32").roof == "cuda_core.fp32"
    assert gemm(64, 64, 64, dtype="fp32", allow_tf32=True).roof == "tensor_core.tf32"
    assert gemm(64, 64, 64, dtype="tf32").tensor("c").dtype == "fp32"


def test_batched_gemm_bytes_recount() -> None:
    batch, m, n, k = 3, 64, 32, 16
    arrays = [np.empty((batch, m, k), np.float16), np.empty((batch, k, n), np.float16)]
    ledger = batched_gemm(batch, m, n, k, dtype="fp16")
    assert ledger.read_bytes == sum(a.nbytes for a in arrays)
    assert ledger.write_bytes == np.empty((batch, m, n), np.float16).nbytes
    assert ledger.roof == "tensor_core.fp16"


def test_batched_gemm_flops_hand_count() -> None:
    # 2 * 3 * 64 * 32 * 16 = 196,608
    assert batched_gemm(3, 64, 32, 16, dtype="fp16").flops == 196_608


def test_scales_rejected_for_bf16() -> None:
    with pytest.raises(InputError, match="scale"):
        gemm(8, 8, 8, dtype="bf16", scale="row")
