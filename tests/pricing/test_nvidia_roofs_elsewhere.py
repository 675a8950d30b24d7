"""A record names NVIDIA units (tensor_core.bf16, cuda_core.fp32): on a card that has none
by that name, its roof is the pipe the profile's pipes_by_class gives the unit family's
class, never a blank row (an MI300X's GEMM runs on its matrix cores)."""

from __future__ import annotations

import json

import pytest

from roofwise.cli import main


@pytest.mark.parametrize(("roof", "rate_flops_per_s"), [
    ("tensor_core.bf16", 1307.4e12),  # MI300X data sheet: BF16 dense, matrix cores
    ("cuda_core.fp32", 163.4e12),  # MI300X data sheet: FP32 vector
])
def test_an_nvidia_roof_is_priced_on_the_amd_pipe(tmp_path, capsys, roof, rate_flops_per_s):
    flops = 2e12  # compute-bound: 1 kB moved
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"op": "gemm", "flops": flops, "bytes": 1000, "roof": roof,
                                "time_s": 0.05}) + "\n")
    assert main(["analyze", str(path), "-m", "mi300x", "--json"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert row["sol_time_s"] == pytest.approx(flops / rate_flops_per_s, rel=1e-9)
    assert row["verdict"] == "below"


def test_a_family_the_card_has_no_pipe_for_stays_unknown(tmp_path, capsys):
    """The Ascend vector profile has no cube unit: a tensor-core roof stays blank."""
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"op": "gemm", "flops": 2e12, "bytes": 1000,
                                "roof": "tensor_core.bf16", "time_s": 0.05}) + "\n")
    assert main(["analyze", str(path), "-m", "ascend-a5-vector", "--json"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert row["verdict"] == "blank"
