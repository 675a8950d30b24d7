"""Activations and elementwise arithmetic: bytes from the bound arrays, FLOPs by hand."""

import numpy as np
import pytest

from roofwise.base.errors import InputError
from roofwise.ops import add, gelu, mul, silu, swiglu

SHAPE = (6, 10)


def test_silu_bytes_recount() -> None:
    x = np.empty(SHAPE, np.float16)
    assert silu(SHAPE).bytes == 2 * x.nbytes


def test_silu_flops_hand_count() -> None:
    # 60 elems: 2 arithmetic + 2 transcendental each
    assert silu(SHAPE).ops_by_unit == {"cuda_core.fp32": 120.0, "sfu.fp32": 120.0}


def test_gelu_bytes_recount() -> None:
    x = np.empty(SHAPE, np.float32)
    y = np.empty(SHAPE, np.float16)
    assert gelu(SHAPE, dtype="fp32", out_dtype="bf16").bytes == x.nbytes + y.nbytes


def test_gelu_flops_hand_count() -> None:
    # tanh: 8 arithmetic + 1 tanh per elem; erf: 4 + 1
    assert gelu(SHAPE).ops_by_unit == {"cuda_core.fp32": 480.0, "sfu.fp32": 60.0}
    assert gelu(SHAPE, approximate="erf").ops_by_unit == {"cuda_core.fp32": 240.0,
                                                          "sfu.fp32": 60.0}


def test_swiglu_bytes_recount() -> None:
    gate_up = np.empty((6, 20), np.float16)
    out = np.empty((6, 10), np.float16)
    assert swiglu(SHAPE).read_bytes == gate_up.nbytes
    assert swiglu(SHAPE).write_bytes == out.nbytes


def test_swiglu_flops_hand_count() -> None:
    # 60 outputs: SiLU 2 + 1 multiply = 3 arithmetic, 2 transcendental
    assert swiglu(SHAPE).ops_by_unit == {"cuda_core.fp32": 180.0, "sfu.fp32": 120.0}


def test_add_broadcast_bytes_recount() -> None:
    a = np.empty((4, 1, 8), np.float32)
    b = np.empty((3, 1), np.float32)
    out = np.empty(np.broadcast_shapes(a.shape, b.shape), np.float32)  # (4, 3, 8)
    ledger = add((4, 1, 8), (3, 1), dtype="fp32")
    assert (ledger.read_bytes, ledger.write_bytes) == (a.nbytes + b.nbytes, out.nbytes)


def test_add_and_mul_flops_hand_count() -> None:
    # one op per output element: 4 x 3 x 8 = 96
    assert add((4, 1, 8), (3, 1)).flops == 96
    assert mul((4, 1, 8), (3, 1)).flops == 96


def test_mul_bytes_recount() -> None:
    a = np.empty((5, 7), np.float16)
    assert mul((5, 7), (5, 7)).bytes == 3 * a.nbytes


def test_shapes_that_do_not_broadcast() -> None:
    with pytest.raises(InputError, match="broadcast"):
        add((4, 3), (5,))
