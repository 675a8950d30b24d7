"""`analyze` on the shipped example: each verdict computed here by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from roofwise.output.analysis import analyze
from roofwise.records.read import columns_from_valid, read_records, validate_record

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
                                "impossible": 1, "blank": 1, "cache_resident": 1}


def test_verdicts_row_by_row(example):
    rows = list(example.iter_rows())
    verdicts = [r["verdict"] for r in rows]
    assert verdicts == ["at_ceiling", "below", "latency_bound", "cache_resident", "anomaly",
                        "impossible", "below", "blank"]
    # fused prefill: 67,764,736 B at 4502.4 GB/s = 15.0508 us, measured 17.5 us
    assert rows[0]["efficiency"] == pytest.approx(67_764_736 / BW / 17.5e-6)
    assert rows[0]["efficiency"] == pytest.approx(0.8600, abs=1e-4)
    # the two-kernel split: 151,650,816 B, measured 60 us
    assert rows[1]["efficiency"] == pytest.approx(151_650_816 / BW / 60e-6)
    # payload-only bytes at 13 us imply 63,569,920 / 13e-6 = 4890.0 GB/s > 4800 GB/s, above
    # HBM; but with no read/write split each side can be up to the 62,914,560 B L2, which can
    # hold all of it: possible only with a warm L2, so cache-resident in part, no reading
    assert rows[3]["reasons"][0].startswith(
        "bytes/time 4890.0 GB/s is above hbm theoretical 4800 GB/s, and its working set of "
        "63.57 MB is larger than the 62.91 MB l2, but that cache can hold up to 62.91 MB of "
        "what it reads before it runs and as much of what it writes after, which can be all "
        "of it: cache-resident in part")
    assert rows[3]["efficiency"] is None  # never shown as a fast kernel
    # said once: its 108.6% of the envelope is not repeated as a second "error" sentence
    assert len(rows[3]["reasons"]) == 1 and len(rows[5]["reasons"]) == 1
    # GEMM 2^40 FLOP at burst bf16: 1.4469 ms SOL against 1.35 ms measured = 107%
    assert rows[4]["efficiency"] == pytest.approx(2**40 / BF16_BURST / 1.35e-3)
    assert rows[4]["bound"] == "compute"
    # double-counted GEMM: 2^41 FLOP in 2 ms is 1099.5 TFLOP/s > 989.5 theoretical
    assert "exceeds its theoretical 989.50 TFLOP/s" in rows[5]["reasons"][0]
    assert rows[6]["efficiency"] == pytest.approx(268_443_648 / BW / 112e-6)
    assert rows[7]["machine"] is None and "no profile matches device" in rows[7]["reasons"][0]
    assert rows[7]["efficiency"] is None


def test_latency_row_says_floor_was_assumed(example):
    row = example.row(2)
    # timed as `device` (= events), 4 us is far under the 20 us events floor: the launches
    # overlapped, so the row is read against the kernel floor, 3 us; 4 / 3 = 1.33 floors
    assert row["reasons"][0] == (
        "the 4.000 us measured is 1.33 x the kernel floor 3.000 us (assumed; the time is under "
        "the events floor, so launches overlapped) and SOL is 3.788 ns: a kernel's fixed "
        "cost, not its work, sets the time, so efficiency is no reading; give each launch "
        "more work (batch, fuse)")
    assert row["timing_method"] == "events" and row["floor_s"] == 3e-6


def test_forced_machine_overrides_device(examples, machines):
    loaded = read_records(examples / "records.jsonl")
    result = analyze(loaded.columns, machines, machine=machines["h100-sxm"])
    assert result.row(7)["verdict"] != "blank"
    # on the H100 (3.35 TB/s) 67,764,736 B in 17.5 us would be 3872 GB/s, above HBM: its
    # 46,137,856 B of reads and 21,626,880 B of writes each fit the 52,428,800 B L2, so only a
    # warm L2 makes it possible, and its 115.6% "efficiency" is never reported as a reading
    row = result.row(0)
    assert row["verdict"] == "cache_resident" and row["efficiency"] is None
    assert row["reasons"][0] == ("device mismatch: the record was measured on 'NVIDIA H200' "
                                 "(the h200 profile) but is judged on h100-sxm")
    assert row["reasons"][1].startswith(
        "bytes/time 3872.3 GB/s is above hbm theoretical 3350 GB/s, and its working set of "
        "67.76 MB is larger than the 52.43 MB l2")
    assert any("uncalibrated" in r for r in row["reasons"])
    # the split's 151,650,816 B in 60 us is possible there: 45.3 us SOL, 75.4%
    assert result.row(1)["efficiency"] == pytest.approx(151_650_816 / 3.35e12 / 60e-6)


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


# Precedence: blank > impossible > latency_bound > anomaly > at_ceiling / below.
BASE = {"op": "x", "roof": "cuda_core.fp32", "device": "h200", "flops": 0.0}


def test_blank_beats_impossible(machines):
    row = _one({**BASE, "roof": "tensor_core.fp4", "bytes": 1e9, "time_s": 1e-6}, machines)
    assert row["verdict"] == "blank"


def test_impossible_beats_latency_bound(machines):
    # 1e8 FLOP in 0.1 us is 1e15 FLOP/s > 67e12 on cuda_core.fp32, although SOL (1e8 / 57.27e12
    # = 1.75 us) and time are under the 3 us kernel floor
    row = _one({**BASE, "flops": 1e8, "bytes": 1e6, "time_s": 1e-7}, machines)
    assert row["verdict"] == "impossible"
    assert any("x the kernel floor 3.000 us (assumed" in r for r in row["reasons"])


def test_above_hbm_within_l2_is_cache_resident_not_impossible(machines):
    # 1 MB in 0.1 us is 1e13 B/s > 4.8e12 HBM, but 1 MB fits in the H200's 60 MiB L2, whose
    # bandwidth no source gives: it could have come from L2, so it is not called impossible
    row = _one({**BASE, "bytes": 1e6, "time_s": 1e-7}, machines)
    assert row["verdict"] == "cache_resident" and row["efficiency"] is None
    assert row["reasons"][0].startswith("bytes/time 10000.0 GB/s is above hbm theoretical 4800 "
                                        "GB/s, but its working set of 1.00 MB fits in the "
                                        "62.91 MB l2")


def test_latency_bound_beats_anomaly(machines):
    # 9,004,800 B is 2.000 us at 4502.4 GB/s; measured 1.88 us is 106.4% of SOL but 4790 GB/s
    # stays under 4800 GB/s, and both times are under the assumed floor. Without its L2 (which
    # would explain a rate above the envelope: cache_resident, below) the H200 reads it
    # latency-bound, not an anomaly
    h200 = machines["h200"]
    no_cache = replace(h200, memory={"hbm": h200.memory["hbm"]})
    row = _one({**BASE, "bytes": 9_004_800, "time_s": 1.88e-6}, machines, machine=no_cache)
    assert row["verdict"] == "latency_bound" and row["efficiency"] is None
    with_l2 = _one({**BASE, "bytes": 9_004_800, "time_s": 1.88e-6}, machines)
    assert with_l2["verdict"] == "cache_resident"
    assert "above 105% of the hbm envelope 4502 GB/s" in with_l2["reasons"][0]


def test_anomaly_above_105_percent(machines):
    row = _one({**BASE, "bytes": 4502.4e9 * 100e-6, "time_s": 100e-6 / 1.06}, machines)
    assert row["verdict"] == "anomaly"
    assert any("106.0% of the envelope ceiling: above 105% yet below theoretical" in r
               for r in row["reasons"])


def test_reason_names_the_mix_when_above_it_within_the_envelope(machines):
    copy_bw = 4800e9 * 0.8183
    record = {**BASE, "bytes": 2e9, "read_bytes": 1e9, "write_bytes": 1e9,
              "time_s": 2e9 / copy_bw / 1.10}
    row = _one(record, machines, mix="auto")
    assert row["mix"] == "copy" and row["verdict"] == "at_ceiling"
    assert row["efficiency"] == pytest.approx(1.10)
    assert any("hbm copy mix it was priced with, but within the envelope" in r
               for r in row["reasons"])


def test_unknown_regime_is_bad_input(machines):
    from roofwise.base.errors import InputError

    with pytest.raises(InputError, match="--regime: expected one of sustained, burst"):
        _one({**BASE, "bytes": 1e9, "time_s": 1e-3}, machines, regime="turbo")


def test_absurd_numbers_read_as_words_not_digit_walls(machines):
    row = _one({**BASE, "flops": 1e300, "bytes": 1e-10, "time_s": 1e-300}, machines)
    assert row["verdict"] == "impossible"
    # 1e-10 B fits in any cache, so the bytes alone are no proof (L2 bandwidth is a gap); the
    # FLOPs are: 1e300 FLOP in 1e-300 s is above any unit's peak
    assert row["reasons"][:1] == [
        "cuda_core.fp32 at an infinite rate exceeds its theoretical 67.00 TFLOP/s: physically "
        "impossible"]


def test_unknown_roof_is_blank_even_when_the_work_is_split(machines):
    row = _one({**BASE, "roof": "bogus.unit", "flops": 100, "bytes": 1000, "time_s": 1e-3,
                "flops_by_unit": {"cuda_core.fp32": 100}}, machines)
    assert row["verdict"] == "blank"
    assert any("unknown roof 'bogus.unit'" in r for r in row["reasons"])
