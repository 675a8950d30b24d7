"""Convolution ledgers: bytes recounted from the arrays a call binds, FLOPs and sizes by hand."""

import numpy as np
import pytest

from roofwise.base.errors import InputError
from roofwise.ops import build_op, conv


def test_conv2d_resnet_stem_bytes_and_flops() -> None:
    # ResNet stem: x (8, 3, 224, 224), w (64, 3, 7, 7), stride 2, padding 3 -> out 112x112:
    # (224 + 6 - 6 - 1) // 2 + 1 = 112
    x = np.empty((8, 3, 224, 224), np.float16)
    w = np.empty((64, 3, 7, 7), np.float16)
    y = np.empty((8, 64, 112, 112), np.float16)
    ledger = conv(8, 3, 64, (224, 224), (7, 7), stride=(2,), padding=(3,), dtype="bf16")
    assert ledger.tensor("y").shape == (8, 64, 112, 112)
    assert ledger.read_bytes == x.nbytes + w.nbytes == 2_408_448 + 18_816
    assert ledger.write_bytes == y.nbytes == 12_845_056
    # 2 * 8*64*112*112 outputs * 3*7*7 taps = 2 * 6_422_528 * 147 = 1_888_223_232
    assert ledger.ops_by_unit == {"tensor_core.bf16": 1_888_223_232.0}
    assert ledger.roof == "tensor_core.bf16"
    assert ledger.name == "conv2d"


def test_conv1d_grouped_dilated_with_bias_fp32() -> None:
    # depthwise-ish: c_in 16, c_out 32, groups 8 -> weight (32, 2, 5); dilation 2, padding 4:
    # out = (100 + 8 - 2*4 - 1) // 1 + 1 = 100
    x = np.empty((2, 16, 100), np.float32)
    w = np.empty((32, 2, 5), np.float32)
    b = np.empty((32,), np.float32)
    y = np.empty((2, 32, 100), np.float32)
    ledger = conv(2, 16, 32, (100,), (5,), padding=(4,), dilation=(2,), groups=8, bias=True,
                  dtype="fp32")
    assert ledger.tensor("y").shape == y.shape
    assert ledger.read_bytes == x.nbytes + w.nbytes + b.nbytes
    assert ledger.write_bytes == y.nbytes
    # outputs 2*32*100 = 6400; taps 16/8 * 5 = 10: contraction 2*6400*10 = 128,000 on the
    # CUDA cores (fp32, no TF32), plus 6400 bias adds
    assert ledger.ops_by_unit == {"cuda_core.fp32": 128_000.0 + 6_400.0}
    assert ledger.roof == "cuda_core.fp32"
    assert conv(2, 16, 32, (100,), (5,), padding=(4,), dilation=(2,), groups=8,
                dtype="fp32", allow_tf32=True).roof == "tensor_core.tf32"


def test_conv3d_per_dim_stride_and_padding() -> None:
    # x (1, 4, 8, 16, 16), kernel (3, 3, 3), stride (1, 2, 2), padding (1, 0, 0):
    # out = ((8+2-2-1)//1+1, (16-2-1)//2+1, (16-2-1)//2+1) = (8, 7, 7)
    ledger = conv(1, 4, 6, (8, 16, 16), (3, 3, 3), stride=(1, 2, 2), padding=(1, 0, 0),
                  dtype="fp16")
    assert ledger.tensor("y").shape == (1, 6, 8, 7, 7)
    assert ledger.write_bytes == np.empty((1, 6, 8, 7, 7), np.float16).nbytes
    assert ledger.flops == 2 * (6 * 8 * 7 * 7) * (4 * 27)


def test_conv_from_cli_text() -> None:
    ledger = build_op("conv", {"batch": "1", "c_in": "8", "c_out": "8", "spatial": "10x10",
                               "kernel": "3x3", "padding": "1"})
    assert ledger.tensor("y").shape == (1, 8, 10, 10)
    assert ledger.flops == 2 * 8 * 100 * 8 * 9


@pytest.mark.parametrize("kwargs, field", [
    ({"groups": 3}, "conv.groups"),
    ({"kernel": (3,)}, "conv.kernel"),
    ({"spatial": (2, 2), "kernel": (5, 5)}, "conv.kernel"),
    ({"stride": (0,)}, "conv.stride"),
    ({"padding": (1, 1, 1)}, "conv.padding"),
])
def test_conv_rejects_bad_geometry(kwargs: dict, field: str) -> None:
    with pytest.raises(InputError) as info:
        conv(**{"c_in": 64, "c_out": 64, **kwargs})
    assert info.value.where == field
