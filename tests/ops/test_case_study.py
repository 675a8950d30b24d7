"""The seed's case study: its numbers pinned, its parameters validated, its conventions shared."""

import numpy as np
import pytest

from roofwise.base.errors import InputError
from roofwise.ops import (
    _common,
    build_op,
    case_study,
    op_parameters,
    qk_norm_rope_quant,
    qk_norm_rope_quant_split,
    qk_norm_rope_quant_stages,
    quant_fp8_per_token,
)

ELEMS = 4096 * (32 + 8) * 128  # q and k elements at the default shape


def test_the_seed_numbers_hold() -> None:
    assert qk_norm_rope_quant().bytes == 67_764_736
    assert qk_norm_rope_quant().flops == 189_235_200
    assert qk_norm_rope_quant_split().bytes == 151_650_816
    assert qk_norm_rope_quant(lookups="per_row").bytes == 315_228_160
    assert qk_norm_rope_quant(tokens=1).bytes == 17_056


def test_bad_lookups_is_an_input_error_naming_the_choices() -> None:
    with pytest.raises(InputError, match="lookups") as err:
        qk_norm_rope_quant(lookups="bogus")
    assert "per_call" in str(err.value) and "per_row" in str(err.value)


@pytest.mark.parametrize("size", ["tokens", "q_heads", "kv_heads", "head_dim"])
@pytest.mark.parametrize("bad", [0, -1, 4.5])
def test_sizes_must_be_positive_integers(size: str, bad: float) -> None:
    with pytest.raises(InputError, match=size):
        qk_norm_rope_quant_stages(**{size: bad})  # type: ignore[arg-type]
    with pytest.raises(InputError, match=size):
        qk_norm_rope_quant_split(**{size: bad})  # type: ignore[arg-type]


def test_dtypes_are_explicit_validated_and_settable_from_text() -> None:
    names = [p.name for p in op_parameters("qk_norm_rope_quant")]
    assert {"in_dtype", "out_dtype", "table_dtype"} <= set(names)
    assert "in_dtype" in [p.name for p in op_parameters("qk_norm_rope_quant_split")]
    # bf16 quant output: one more byte per element; bf16 tables: cos and sin halve
    wide = build_op("qk_norm_rope_quant", {"out_dtype": "bf16"})
    assert wide.bytes == 67_764_736 + ELEMS * 1
    narrow_tables = build_op("qk_norm_rope_quant", {"table_dtype": "bf16"})
    assert narrow_tables.bytes == 67_764_736 - 2 * 4096 * 128 * 2
    fp16 = build_op("qk_norm_rope_quant", {"in_dtype": "fp16"})
    assert fp16.tensor("q").dtype == "fp16" and fp16.bytes == 67_764_736
    with pytest.raises(InputError, match="table_dtype"):
        qk_norm_rope_quant(table_dtype="fp7")


def test_quant_stage_is_the_per_token_quant_of_the_rows() -> None:
    # the case study's fp8-quant stage and quant_fp8_per_token share one convention: the
    # stage over (tokens, heads, d) equals per-token quant of (tokens*heads, d) rows
    tokens, q_heads, kv_heads, d = 3, 4, 2, 16
    _, _, stage = qk_norm_rope_quant_stages(tokens, q_heads, kv_heads, d)
    per_token = quant_fp8_per_token(rows=tokens * (q_heads + kv_heads), cols=d)
    assert stage.ops_by_class == per_token.ops_by_class
    assert stage.ops_by_unit == per_token.ops_by_unit
    assert stage.bytes == per_token.bytes
    # recount: 3/elem + 2/row over 18 rows of 16
    rows = tokens * (q_heads + kv_heads)
    assert stage.flops == 3 * rows * d + 2 * rows
    assert stage.bytes == rows * d * 2 + rows * d * 1 + np.empty(rows, np.float32).nbytes


def test_units_come_from_the_common_module() -> None:
    assert case_study.CUDA is _common.CUDA and case_study.SFU is _common.SFU
    assert {w.unit for w in qk_norm_rope_quant().work} == {_common.CUDA, _common.SFU}
