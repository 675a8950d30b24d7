"""`roofwise price OP` and `roofwise ops` through the command's entry point."""

import json
from pathlib import Path

import pytest

from roofwise.base.errors import InputError
from roofwise.cli import main
from roofwise.ops import OPS, build_op, gemm, parse_shape_args


def test_price_gemm_by_name_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["price", "gemm", "-m", "h200", "--shape", "m=4096,n=4096,k=4096",
                 "--shape", "dtype=bf16", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["flops"] == 2 * 4096**3
    assert out["bytes"] == 3 * 4096 * 4096 * 2
    assert out["roof"] == "tensor_core.bf16" and out["bound"] == "compute"


def test_price_moe_with_a_count_list(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["price", "moe", "-m", "h200", "--shape",
                 "expert_tokens=4,0,3,3,top_k=2,hidden=16", "--shape", "intermediate=32",
                 "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["flops"] == 33_345  # the hand count of tests/ops/test_moe.py


def test_price_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["price", "rmsnorm", "-m", "h200", "--shape", "rows=8", "--shape",
                 "hidden=128"]) == 0
    assert "rmsnorm" in capsys.readouterr().out


def test_unknown_op_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["price", "gemmm", "-m", "h200"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "gemmm" in err and "attention_decode" in err


def test_unknown_parameter_names_it_and_the_valid_ones(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["price", "gemm", "-m", "h200", "--shape", "q=3"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "q" in err and "allow_tf32" in err


def test_bad_value_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["price", "gemm", "-m", "h200", "--shape", "m=big"]) == 2
    assert "integer" in capsys.readouterr().err


def test_yaml_path_still_a_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["price", "missing-ledger.yaml", "-m", "h200"]) == 2
    err = capsys.readouterr().err  # a .yaml argument is a ledger file, never an op name
    assert "missing-ledger.yaml" in err and "unknown operator" not in err
    ledger = tmp_path / "rope"  # an existing file without a suffix is a ledger too
    ledger.write_text("name: tiny\nroof: cuda_core.fp32\ntensors:\n"
                      "  - {name: x, shape: [4], dtype: fp32, role: input}\n")
    assert main(["price", str(ledger), "-m", "h200", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bytes"] == 16


def test_ops_lists_every_operator(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["op"] for r in rows] == list(OPS)
    gemm_row = rows[0]
    assert gemm_row["parameters"]["m"] == {"kind": "int", "default": "4096"}


def test_shape_parsing_helpers() -> None:
    assert parse_shape_args(["m=1,n=2", "expert_tokens=1,0,3"]) == {
        "m": "1", "n": "2", "expert_tokens": "1,0,3"}
    assert build_op("gemm", {"m": "8", "n": "16", "k": "4", "bias": "true"}) == gemm(
        8, 16, 4, bias=True)
    assert build_op("add", {"a_shape": "4x3", "b_shape": "[3]"}).flops == 12


@pytest.mark.parametrize(("key", "text"), [
    ("a_shape", "4xx4"), ("a_shape", "4.5x4"), ("a_shape", "4x3,2"), ("a_shape", "[4,4"),
    ("a_shape", "x4"), ("a_shape", ""), ("b_shape", "4 4")])
def test_malformed_tuple_names_the_parameter(key: str, text: str) -> None:
    with pytest.raises(InputError, match=f"add: --shape {key}"):
        build_op("add", {key: text})


@pytest.mark.parametrize("text", ["4.0", "4.5", "1e3", "1_000", "4x4", ""])
def test_non_integer_size_names_the_parameter(text: str) -> None:
    with pytest.raises(InputError, match="gemm: --shape m: expected an integer"):
        build_op("gemm", {"m": text})


def test_well_formed_tuples_still_parse() -> None:
    for text in ("4x3", "4 x 3", "4,3", "[4, 3]", "(4,3)"):
        assert build_op("add", {"a_shape": text, "b_shape": "3"}).tensor("a").shape == (4, 3)


def test_duplicate_shape_key_is_an_error() -> None:
    with pytest.raises(InputError, match=r"m.*twice"):
        parse_shape_args(["m=4,m=8"])
    with pytest.raises(InputError, match=r"n.*twice"):
        parse_shape_args(["n=4", "k=2,n=4"])


@pytest.mark.parametrize("shape", ["a_shape=4xx4", "a_shape=4.5x4", "m=4,m=8"])
def test_strict_shape_errors_are_one_line_exit_2(
        shape: str, capsys: pytest.CaptureFixture[str]) -> None:
    op = "add" if shape.startswith("a_shape") else "gemm"
    assert main(["price", op, "-m", "h200", "--shape", shape]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "\n" not in err and shape.split("=")[0] in err and captured.out == ""


def test_case_study_bad_lookups_and_dtype_from_the_command_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["price", "qk_norm_rope_quant", "-m", "h200", "--shape",
                 "lookups=bogus"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "lookups" in err and "per_row" in err
    assert main(["price", "qk_norm_rope_quant", "-m", "h200", "--shape", "in_dtype=fp16",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bytes"] == 67_764_736
