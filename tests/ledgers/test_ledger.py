"""Ledgers: the case study's bytes and FLOPs, fusing and splitting, lookups per use, YAML."""

from __future__ import annotations

import pytest

from roofwise.base.errors import InputError
from roofwise.ledgers.files import ledger_to_yaml_data, load_ledger, parse_ledger
from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work, fuse, separate
from roofwise.ops import qk_norm_rope_quant, qk_norm_rope_quant_split, qk_norm_rope_quant_stages

TOKENS, HEADS, D = 4096, 40, 128
ROWS = TOKENS * HEADS
ELEMS = ROWS * D


def test_case_study_fused_bytes_recounted_by_hand():
    ledger = qk_norm_rope_quant()
    payload = ELEMS * 2 + ELEMS * 1 + ROWS * 4  # bf16 in, fp8 out, fp32 scale per row
    lookups = 2 * D * 2 + 2 * TOKENS * D * 4  # two bf16 weights, fp32 cos and sin
    assert ledger.payload_bytes == payload == 63_569_920
    assert ledger.lookup_bytes == lookups == 4_194_816
    assert ledger.bytes == 67_764_736
    assert ledger.read_bytes == ELEMS * 2 + lookups
    assert ledger.write_bytes == ELEMS + ROWS * 4


def test_case_study_flops_1155_per_row():
    ledger = qk_norm_rope_quant()
    assert ledger.flops == 1155 * ROWS == 189_235_200
    assert ledger.ops_by_unit == {"cuda_core.fp32": 1154 * ROWS, "sfu.fp32": ROWS}
    assert ledger.ops_by_class["transcendental"] == ROWS
    assert round(ledger.intensity_flops_per_byte, 2) == 2.79


def test_split_pays_for_the_intermediate():
    split = qk_norm_rope_quant_split()
    norm_rope = ELEMS * 2 + 512 + 2 * TOKENS * D * 4 + ELEMS * 2
    quant = ELEMS * 2 + ELEMS + ROWS * 4
    assert split.bytes == norm_rope + quant == 151_650_816
    assert split.calls == 2
    assert round(split.bytes / qk_norm_rope_quant().bytes, 2) == 2.24


def test_three_separate_calls_pay_two_intermediates():
    three = separate("three", qk_norm_rope_quant_stages())
    assert three.bytes == qk_norm_rope_quant_split().bytes + 2 * ELEMS * 2
    assert three.calls == 3


def test_lookups_per_row_match_notes():
    per_row = qk_norm_rope_quant(lookups="per_row")
    assert per_row.bytes == 315_228_160
    assert per_row.lookup_bytes == ROWS * (512 + 1024)
    assert round(per_row.bytes / qk_norm_rope_quant().bytes, 2) == 4.65
    assert round(per_row.lookup_bytes / per_row.bytes * 100, 1) == 79.8


def test_decode_step_keeps_its_lookups():
    decode = qk_norm_rope_quant(tokens=1)
    assert decode.payload_bytes == 15_520
    assert decode.bytes == 17_056


def test_fuse_keeps_an_intermediate_asked_for():
    a = Ledger("a", "cuda_core.fp32", (Tensor("x", (10,), "fp32", Role.INPUT),
                                       Tensor("y", (10,), "fp32", Role.OUTPUT)), ())
    b = Ledger("b", "cuda_core.fp32", (Tensor("y", (10,), "fp32", Role.INPUT),
                                       Tensor("z", (10,), "fp32", Role.OUTPUT)), ())
    assert fuse("ab", [a, b]).bytes == 80
    assert fuse("ab", [a, b], keep=["y"]).bytes == 120


def test_fuse_of_differing_roofs_needs_a_declared_roof():
    a = Ledger("a", "cuda_core.fp32", (), ())
    b = Ledger("b", "tensor_core.bf16", (), ())
    with pytest.raises(InputError, match="declare the fused roof"):
        fuse("ab", [a, b])
    assert fuse("ab", [a, b], roof="tensor_core.bf16").roof == "tensor_core.bf16"


def test_work_rejects_unknown_class_and_negative_ops():
    with pytest.raises(InputError, match="unknown class"):
        Work("cuda_core.fp32", "magic", 1)
    with pytest.raises(InputError, match="non-negative"):
        Work("cuda_core.fp32", "arithmetic", -1)


def test_yaml_roundtrip_of_case_study(tmp_path):
    import yaml

    fused = qk_norm_rope_quant()
    path = tmp_path / "l.yaml"
    path.write_text(yaml.safe_dump(ledger_to_yaml_data(fused)))
    loaded = load_ledger(path)
    assert (loaded.bytes, loaded.flops, loaded.roof) == (fused.bytes, fused.flops, fused.roof)


def test_shipped_example_ledger_composes_like_the_library(examples):
    fused = load_ledger(examples / "qk_norm_rope_quant.yaml")
    split = load_ledger(examples / "qk_norm_rope_quant_split.yaml")
    assert fused.bytes == 67_764_736 and fused.flops == 189_235_200
    assert split.bytes == 151_650_816 and split.calls == 2


@pytest.mark.parametrize(("data", "where", "expected"), [
    ({"name": "x", "tensors": []}, "roof", "missing required key"),
    ({"name": "x", "roof": "cuda_core.fp32", "tensors": [
        {"name": "a", "shape": [4], "dtype": "fp33", "role": "input"}]},
     "tensors[0].dtype", "unknown dtype"),
    ({"name": "x", "roof": "cuda_core.fp32", "tensors": [
        {"name": "a", "shape": [4], "dtype": "fp32", "role": "scratch"}]},
     "tensors[0].role", "expected one of"),
    ({"name": "x", "roof": "cuda_core.fp32", "tensors": [
        {"name": "a", "shape": [-4], "dtype": "fp32", "role": "input"}]},
     "tensors[0].shape[0]", "positive number"),
    ({"name": "x", "roof": "cuda_core.fp32", "tensors": [], "work": [
        {"unit": "cuda_core.fp32", "class": "arithmetic", "ops": "many"}]},
     "work[0].ops", "non-negative number"),
    ({"name": "x", "roof": "gpu", "tensors": []}, "roof", "unit key"),
    ({"name": "x", "roof": "cuda_core.fp32", "tensors": [], "colour": 1}, "colour", "unknown key"),
])
def test_bad_ledger_names_the_field(data, where, expected):
    with pytest.raises(InputError) as info:
        parse_ledger(data, "l.yaml")
    assert f"l.yaml: {where}" in str(info.value) or f"l.yaml.{where}" in str(info.value)
    assert expected in str(info.value)


@pytest.mark.parametrize(("data", "where", "expected"), [
    ({"name": "x", "roof": "cuda_core.fp32", "tensors": [
        {"name": "a", "shape": [1.5, 4], "dtype": "fp32", "role": "input"}]},
     "tensors[0].shape[0]", "whole number"),
    ({"name": "x", "roof": "cuda_core.fp32", "tensors": [
        {"name": "a", "shape": [4], "dtype": "fp32", "role": "input"},
        {"name": "a", "shape": [4], "dtype": "fp32", "role": "output"}]},
     "tensors[1].name", "listed twice"),
])
def test_more_bad_ledgers(data, where, expected):
    with pytest.raises(InputError) as info:
        parse_ledger(data, "l.yaml")
    assert f"l.yaml: {where}" in str(info.value) and expected in str(info.value)


def test_a_profile_is_not_a_ledger(h200):
    from roofwise.base.schema import load_yaml
    from roofwise.profiles.load import builtin_paths

    path = next(p for p in builtin_paths() if p.name == "h200.yaml")
    with pytest.raises(InputError, match="machine profile, not a ledger"):
        parse_ledger(load_yaml(path), str(path))


def test_huge_sizes_stay_exact():
    ledger = parse_ledger({"name": "x", "roof": "cuda_core.fp32", "tensors": [
        {"name": "a", "shape": [10**30], "dtype": "int8", "role": "input"}]}, "l.yaml")
    assert ledger.tensors[0].shape == (10**30,) and ledger.bytes == 10**30


def test_free_text_that_yaml_reads_as_a_huge_integer_is_its_digits(tmp_path):
    """Issue 20: a 5,000-digit label (an int to YAML) is text, never a ValueError."""
    from roofwise.ledgers.files import load_ledger

    digits = "9" + "1" * 4999
    path = tmp_path / "l.yaml"
    path.write_text(f"name: x\nroof: cuda_core.fp32\ntensors:\n  - {{name: a, shape: [4], "
                    f"dtype: fp32, role: input}}\nwork:\n  - {{unit: cuda_core.fp32, class: "
                    f"arithmetic, ops: 4, label: {digits}}}\nnotes: [{digits}, yes, 1.5]\n")
    ledger = load_ledger(path)
    assert ledger.work[0].label == digits
    assert ledger.notes == (digits, "true", "1.5")
