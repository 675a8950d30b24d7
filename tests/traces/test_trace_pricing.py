"""Trace ops priced from their recorded arguments: convolution, layer-norm backward, MSE loss,
index_select; and the ops a trace cannot price say exactly why. Counts by hand."""

from __future__ import annotations

import numpy as np
import pytest

from roofwise.traces.aten import make_call
from roofwise.traces.prices import price_call

BF16 = "c10::BFloat16"


def test_cudnn_convolution_with_recorded_stride_and_padding() -> None:
    # cudnn_convolution(self, weight, padding, stride, dilation, groups, benchmark,
    # deterministic, allow_tf32): x (8, 3, 224, 224), w (64, 3, 7, 7), padding 3, stride 2
    call = make_call("aten::cudnn_convolution",
                     [[8, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []],
                     [BF16, BF16, "ScalarList", "ScalarList", "ScalarList", "Scalar",
                      "Scalar", "Scalar", "Scalar"],
                     ["", "", "[3, 3]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"])
    price = price_call(call)
    ledger = price.ledger
    assert ledger is not None and price.source == "library" and price.reason == ""
    # out (224 + 6 - 6 - 1)//2 + 1 = 112; FLOPs 2 * 8*64*112*112 * 3*49
    assert ledger.flops == 2 * 8 * 64 * 112 * 112 * 3 * 49
    assert ledger.read_bytes == (np.empty((8, 3, 224, 224), np.float16).nbytes
                                 + np.empty((64, 3, 7, 7), np.float16).nbytes)
    assert ledger.write_bytes == np.empty((8, 64, 112, 112), np.float16).nbytes


def test_conv2d_without_stride_recorded_is_blank_and_says_why() -> None:
    # PyTorch before 1.10 records no list arguments: stride 2 would quarter the output of a
    # stride-1 count, which would then call the strided convolution impossible
    call = make_call("aten::conv2d", [[2, 32, 10, 10], [32, 1, 3, 3], [32], [], [], [], []],
                     ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList",
                      "Scalar"])
    price = price_call(call)
    assert price.ledger is None
    assert price.reason.startswith("stride and dilation not recorded")


def test_conv2d_with_only_the_padding_missing_counts_it_as_zero_a_low_count() -> None:
    # depthwise: x (2, 32, 10, 10), w (32, 1, 3, 3) -> groups 32 from the shapes; bias given;
    # stride 1 and dilation 1 recorded, padding not: counted 0, out 8x8 (padding 1 would give
    # 10x10, more work: the count can only be low)
    call = make_call("aten::conv2d", [[2, 32, 10, 10], [32, 1, 3, 3], [32], [], [], [], []],
                     ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList",
                      "Scalar"], ["", "", "", "[1, 1]", "", "[1, 1]", "32"])
    price = price_call(call)
    assert price.ledger is not None
    assert "padding not recorded: counted as 0" in price.reason
    outputs = 2 * 32 * 8 * 8
    # fp32 without TF32: contraction on the CUDA cores, 2*outputs*(1*9), plus bias adds
    assert price.ledger.ops_by_unit == {"cuda_core.fp32": 2 * outputs * 9 + outputs}
    assert price.ledger.write_bytes == outputs * 4
    assert price.ledger.read_bytes == (2 * 32 * 100 + 32 * 9 + 32) * 4


def test_a_winograd_kernel_is_priced_at_the_fewest_multiplies_of_the_transform() -> None:
    # cudnn_convolution(self, weight, padding, stride, dilation, groups, ...): the ResNet-50
    # layer x (32, 64, 56, 56), w (64, 64, 3, 3), padding 1, stride 1: out 56x56.
    # Direct: 2 * 32*64*56*56 * 64*9 = 7,398,752,256 FLOPs. F(6x6, 3x3) does 8*8 = 64
    # multiplies per 6*6 outputs of 9 taps (324 direct): 64/324 of the direct count.
    dims = [[32, 64, 56, 56], [64, 64, 3, 3], [], [], [], [], [], [], []]
    types = ["float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar",
             "Scalar", "Scalar"]
    concrete = ["", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False", "False", "False"]
    direct = 2 * 32 * 64 * 56 * 56 * 64 * 9
    assert direct == 7_398_752_256
    plain = price_call(make_call("aten::cudnn_convolution", dims, types, concrete))
    assert plain.ledger is not None and plain.ledger.flops == direct
    fast = price_call(make_call("aten::cudnn_convolution", dims, types, concrete),
                      winograd=True)
    assert fast.ledger is not None
    assert fast.ledger.flops == pytest.approx(direct * 64 / 324, rel=1e-12)
    assert "Winograd" in fast.reason and "0.198 of the direct count" in fast.reason
    # the bytes do not change: x and the weight read once, y written once
    assert fast.ledger.read_bytes == plain.ledger.read_bytes
    # a strided convolution is not Winograd's: the direct count stays
    strided = ["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False", "False"]
    kept = price_call(make_call("aten::cudnn_convolution", dims, types, strided),
                      winograd=True)
    assert kept.ledger is not None and kept.ledger.flops == 2 * 32 * 64 * 28 * 28 * 64 * 9


def test_transposed_convolution_is_blank_with_the_reason() -> None:
    call = make_call("aten::convolution",
                     [[1, 4, 8, 8], [4, 4, 3, 3], [], [], [], [], [], [], []],
                     ["float", "float", "", "ScalarList", "ScalarList", "ScalarList",
                      "Scalar", "ScalarList", "Scalar"],
                     ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "True", "[0, 0]", "1"])
    price = price_call(call, replay=False)
    assert price.ledger is None and "transposed" in price.reason


def test_layer_norm_backward_from_the_shipped_trace_shapes() -> None:
    # as recorded in hta_sampled_rank1: grad (2048, 160), input (2048, 160), mean and rstd
    # (2048, 1), weight and bias (160,), output_mask not recorded
    call = make_call("aten::native_layer_norm_backward",
                     [[2048, 160], [2048, 160], [], [2048, 1], [2048, 1], [160], [160], []],
                     ["float", "float", "", "float", "float", "float", "float", ""])
    price = price_call(call, replay=False)
    ledger = price.ledger
    assert ledger is not None and "output_mask not recorded" in price.reason
    rows, hidden = 2048, 160
    x = np.empty((rows, hidden), np.float32)
    stats = np.empty((rows,), np.float32)
    vec = np.empty((hidden,), np.float32)
    # read grad, x, mean, rstd, weight (the bias is never read); write dx, dw, db
    assert ledger.read_bytes == 2 * x.nbytes + 2 * stats.nbytes + vec.nbytes
    assert ledger.write_bytes == x.nbytes + 2 * vec.nbytes
    # 13/elem with weight and bias (see ops/norms.py) + 2/row
    assert ledger.flops == 13 * rows * hidden + 2 * rows


def test_mse_loss_and_backward_from_the_mi250_trace_shapes() -> None:
    fwd = price_call(make_call("aten::mse_loss", [[5, 128], [5, 128], []],
                               ["float", "float", "Scalar"], ["", "", "1"]), replay=False)
    assert fwd.ledger is not None and fwd.reason == ""
    assert (fwd.ledger.read_bytes, fwd.ledger.write_bytes) == (2 * 640 * 4, 4)  # mean: 1 out
    assert fwd.ledger.flops == 3 * 640
    bwd = price_call(make_call("aten::mse_loss_backward", [[], [5, 128], [5, 128], [], [5, 128]],
                               ["float", "float", "float", "Scalar", "float"],
                               ["", "", "", "1", ""]), replay=False)
    assert bwd.ledger is not None
    # read grad (a 0-d scalar, 4 bytes), self, target; write grad_input
    assert (bwd.ledger.read_bytes, bwd.ledger.write_bytes) == (4 + 2 * 640 * 4, 640 * 4)
    assert bwd.ledger.flops == 3 * 640


def test_index_select_1d_reads_at_most_the_source() -> None:
    # recorded: self (2048,) int64, dim not kept, index (6744,) int64 -> out (6744,)
    price = price_call(make_call("aten::index_select", [[2048], [], [6744]],
                                 ["long", "Scalar", "long"]), replay=False)
    assert price.ledger is not None
    assert price.ledger.read_bytes == 6744 * 8 + 2048 * 8  # index + all of self, once
    assert price.ledger.write_bytes == 6744 * 8


@pytest.mark.parametrize("name, dims, types, words", [
    ("aten::cat", [[], []], ["TensorList", "Scalar"], "TensorList"),
    ("aten::repeat_interleave", [[2048], []], ["long", "Scalar"], "repeat counts"),
    ("aten::pow", [[512, 2842], [512], [2048, 1421], [2048, 1421], []],
     ["float"] * 4 + ["Scalar"],
     "5 arguments were recorded where every schema of aten::pow takes at most 3"),
])
def test_unpriceable_ops_say_exactly_why(name, dims, types, words) -> None:
    price = price_call(make_call(name, dims, types))
    assert price.ledger is None and words in price.reason
