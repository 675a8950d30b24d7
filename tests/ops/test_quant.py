"""fp8 quantisation: bytes from the bound arrays, FLOPs by hand, per granularity."""

import numpy as np

from roofwise.ops import quant_fp8_per_block, quant_fp8_per_tensor, quant_fp8_per_token

R, C = 8, 256


def _payload() -> int:
    return np.empty((R, C), np.float16).nbytes + np.empty((R, C), np.uint8).nbytes


def test_per_token_bytes_recount() -> None:
    assert quant_fp8_per_token(R, C).bytes == _payload() + np.empty((R,), np.float32).nbytes


def test_per_token_flops_hand_count() -> None:
    # 2048 elems x 3 (amax, scale, saturate) + 8 rows x 2 = 6,160
    assert quant_fp8_per_token(R, C).flops == 6_160


def test_per_block_bytes_recount() -> None:
    # 1 x 128 groups: 8 x 2 scales; 128 x 128 tiles over 8 x 256: 1 x 2
    assert quant_fp8_per_block(R, C).bytes == _payload() + np.empty((8, 2), np.float32).nbytes
    assert quant_fp8_per_block(R, C, block_rows=128).bytes == _payload() + 2 * 4


def test_per_block_flops_hand_count() -> None:
    # 2048 x 3 + 16 groups x 2 = 6,176; block 100: ceil(256/100) = 3 groups per row -> 24
    assert quant_fp8_per_block(R, C).flops == 6_176
    assert quant_fp8_per_block(R, C, block_size=100).flops == 6_144 + 48


def test_per_tensor_bytes_recount_dynamic_reads_twice() -> None:
    x = np.empty((R, C), np.float16).nbytes
    out = np.empty((R, C), np.uint8).nbytes
    assert quant_fp8_per_tensor(R, C).bytes == 2 * x + out + 4
    assert quant_fp8_per_tensor(R, C, dynamic=False).bytes == x + out + 4


def test_per_tensor_flops_hand_count() -> None:
    # dynamic: 2048 x 3 + 2 = 6,146; static: no amax, 2048 x 2 + 1 reciprocal = 4,097
    assert quant_fp8_per_tensor(R, C).flops == 6_146
    assert quant_fp8_per_tensor(R, C, dynamic=False).flops == 4_097
