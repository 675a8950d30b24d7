"""`analyze` on the shipped example: each verdict computed here by hand."""

from __future__ import annotations

import pytest

from roofwise.analysis import analyze
from roofwise.recordio import read_records
from roofwise.records import columns_from_valid, validate_record

BW = 4800e9 * 0.9380  # h200 hbm, read mix (the envelope)
CUDA = 67.0e12 * 0.8548
BF16_BURST = 989.5e12 * 0.7680


@pytest.fixture
def example(examples, machines):
    loaded = read_records(examples / "records.jsonl")
    assert not loaded.skipped
    return analyze(loaded.columns, machines)


def test_one_row_of_each_verdict(example):
    assert example.counts() == {"at_ceiling": 1, "below": 2, "anomaly": 1, "latency_bound": 1,
                                "impossible": 2, "blank": 1}


def test_verdicts_row_by_row(example):
    rows = list(example.iter_rows())
    verdicts = [r["verdict"] for r in rows]
    assert verdicts == ["at_ceiling", "below", "latency_bound", "impossible", "anomaly",
                        "impossible", "below", "blank"]
    # fused prefill: 67,764,736 B at 4502.4 GB/s = 15.0508 us, measured 17.5 us
    assert rows[0]["efficiency"] == pytest.approx(67_764_736 / BW / 17.5e-6)
    assert rows[0]["efficiency"] == pytest.approx(0.8600, abs=1e-4)
    # the two-kernel split: 151,650,816 B, measured 60 us
    assert rows[1]["efficiency"] == pytest.approx(151_650_816 / BW / 60e-6)
    # payload-only bytes at 13 us imply 4890 GB/s > 4800 GB/s theoretical
    assert 63_569_920 / 13e-6 > 4800e9
    assert "exceeds hbm theoretical 4800 GB/s" in rows[3]["reasons"][0]
    # GEMM 2^40 FLOP at burst bf16: 1.4469 ms SOL against 1.35 ms measured = 107%
    assert rows[4]["efficiency"] == pytest.approx(2**40 / BF16_BURST / 1.35e-3)
    assert rows[4]["bound"] == "compute"
    # double-counted GEMM: 2^41 FLOP in 2 ms is 1099.5 TFLOP/s > 989.5 theoretical
    assert "exceeds its theoretical 989.50 T/s" in rows[5]["reasons"][0]
    assert rows[6]["efficiency"] == pytest.approx(268_443_648 / BW / 112e-6)
    assert rows[7]["machine"] is None and "no profile matches device" in rows[7]["reasons"][0]
    assert rows[7]["efficiency"] is None


def test_latency_row_says_floor_was_assumed(example):
    row = example.row(2)
    assert "assumed: TileOPs constants" in row["reasons"][0]


def test_forced_machine_overrides_device(examples, machines):
    loaded = read_records(examples / "records.jsonl")
    result = analyze(loaded.columns, machines, machine=machines["h100-sxm"])
    assert result.row(7)["verdict"] != "blank"
    # on the uncalibrated H100 the fused prefill prices at 3.35 TB/s
    assert result.row(0)["efficiency"] == pytest.approx(67_764_736 / 3.35e12 / 17.5e-6)
    assert any("uncalibrated" in r for r in result.row(0)["reasons"])


def _one(record, machines, **kw):
    clean = validate_record(record, "t")
    return analyze(columns_from_valid([clean]), machines, **kw).row(0)


def test_sustained_regime_changes_efficiency_not_anomaly(machines):
    record = {"op": "g", "flops": 2**40, "bytes": 1e6, "roof": "tensor_core.bf16",
              "time_s": 1.45e-3, "device": "h200"}
    envelope = _one(record, machines)
    sustained = _one(record, machines, regime="sustained")
    assert envelope["verdict"] == "at_ceiling"
    assert sustained["efficiency"] == pytest.approx(2**40 / (989.5e12 * 0.7077) / 1.45e-3)
    assert sustained["verdict"] == "at_ceiling"  # 107% of sustained, within the envelope
    assert any("within the envelope" in r for r in sustained["reasons"])


@pytest.mark.parametrize(("record", "reason"), [
    ({"bytes": 0}, "zero bytes"),
    ({"time_s": 0}, "non-positive time_s"),
    ({"roof": "tensor_core.fp4"}, "unknown roof"),
])
def test_blank_rows_say_why(machines, record, reason):
    base = {"op": "x", "flops": 1e9, "bytes": 1e6, "roof": "cuda_core.fp32", "time_s": 1e-3,
            "device": "h200"}
    row = _one({**base, **record}, machines)
    assert row["verdict"] == "blank"
    assert any(reason in r for r in row["reasons"])


def test_fp8_roof_on_a100_is_blank(machines):
    row = _one({"op": "x", "flops": 1e9, "bytes": 1e6, "roof": "tensor_core.fp8",
                "time_s": 1e-3, "device": "NVIDIA A100-SXM4-80GB"}, machines)
    assert row["verdict"] == "blank"
