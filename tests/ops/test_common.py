"""ops._common: the one home of the unit keys and the dtype -> tensor-core map."""

import pytest

from roofwise.base.errors import InputError
from roofwise.ops import _common as c


def test_unit_keys() -> None:
    assert (c.CUDA, c.SFU, c.TF32) == ("cuda_core.fp32", "sfu.fp32", "tensor_core.tf32")


def test_tensor_core_map_covers_ledger_and_torch_spellings() -> None:
    units = c.TENSOR_CORE_UNITS
    assert units["bf16"] == units["bfloat16"] == "tensor_core.bf16"
    assert units["fp16"] == units["float16"] == units["half"] == "tensor_core.fp16"
    assert {units[d] for d in ("fp8_e4m3", "fp8_e5m2", "float8_e4m3fn", "float8_e5m2",
                               "float8_e4m3fnuz", "float8_e5m2fnuz")} == {"tensor_core.fp8"}
    assert "fp32" not in units  # fp32 is CUDA cores or TF32, the caller's choice
    with pytest.raises(TypeError):
        units["int8"] = "tensor_core.int8"  # type: ignore[index]


def test_contraction_unit_uses_the_map() -> None:
    assert c.contraction_unit("BF16", "w") == "tensor_core.bf16"
    assert c.contraction_unit("fp32", "w") == c.CUDA
    assert c.contraction_unit("fp32", "w", allow_tf32=True) == c.TF32
    with pytest.raises(InputError, match="int8"):
        c.contraction_unit("int8", "w")
