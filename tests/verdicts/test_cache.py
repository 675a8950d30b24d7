"""Rows above the DRAM ceiling whose bytes fit in a cache (issue 21, item 4): cache_resident,
never impossible; above every level that could have served them, still impossible.

Physics, by hand: the trace's elementwise add reads two [1, 5185, 1024] bf16 tensors and
writes one: 3 x 5185 x 1024 x 2 B = 31,856,640 B, within the H100's 50 MiB (52,428,800 B)
L2; at 3.7 TB/s that is 31,856,640 / 3.7e12 = 8.610 us, and 3.7 TB/s is above the H100 SXM's
3.35 TB/s HBM, so HBM alone could not have fed it in that time.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from roofwise.output.analysis import analyze
from roofwise.records.read import columns_from_valid, validate_record

ADD_BYTES = 3 * 5185 * 1024 * 2  # two bf16 operands read, one written
ADD_FLOPS = 5185 * 1024  # one add per element
H100_L2_BYTES = 50 * 2**20


def _records(rows, device="NVIDIA H100 80GB HBM3"):
    roof = "vector.fp32" if "AMD" in device else "cuda_core.fp32"
    good = [validate_record({"op": "add", "device": device, "roof": roof,
                             "timing": "kernel", **row}, f"row {k}")
            for k, row in enumerate(rows)]
    return columns_from_valid(good)


def _judge(machines, rows, device="NVIDIA H100 80GB HBM3", machine=None):
    return analyze(_records(rows, device), machines, machine)


def test_the_trace_add_is_cache_resident_not_impossible(machines):
    assert ADD_BYTES == 31_856_640 and ADD_BYTES < H100_L2_BYTES
    time_s = ADD_BYTES / 3.7e12
    assert time_s == pytest.approx(8.610e-6, rel=1e-3)
    a = _judge(machines, [{"flops": ADD_FLOPS, "bytes": ADD_BYTES, "time_s": time_s}])
    row = a.row(0)
    assert row["verdict"] == "cache_resident"
    assert row["efficiency"] is None  # no L2 bandwidth is published for the H100: no reading
    said = " ".join(row["reasons"])
    assert "3700.0 GB/s" in said and "3350 GB/s" in said  # the rate and the HBM ceiling
    assert "working set of 31.86 MB fits in the 52.43 MB l2" in said  # set, cache


def test_above_dram_and_larger_than_l2_is_still_impossible(machines):
    # the same rate with 64 MiB moved: no H100 level but HBM could hold it, and HBM can't
    big = 64 * 2**20
    a = _judge(machines, [{"flops": 0, "bytes": big, "time_s": big / 3.7e12}])
    assert a.verdict_name(0) == "impossible"
    said = " ".join(a.row(0)["reasons"])
    assert "exceeds hbm theoretical 3350 GB/s" in said
    assert "its working set of 67.11 MB is larger than the 52.43 MB l2" in said


def test_below_dram_rate_is_judged_as_before(machines):
    # 3.0 TB/s fits under HBM's 3.35: an ordinary memory-bound reading, 89.6% of SOL
    a = _judge(machines, [{"flops": ADD_FLOPS, "bytes": ADD_BYTES,
                           "time_s": ADD_BYTES / 3.0e12}])
    assert a.verdict_name(0) == "at_ceiling"
    assert a.row(0)["efficiency"] == pytest.approx(3.0 / 3.35)


def test_a_flop_rate_above_the_unit_peak_stays_impossible(machines):
    # in the cache but 1e9 FLOP in 8.6 us is 116 TFLOP/s on a 67 TFLOP/s FP32 unit
    a = _judge(machines, [{"flops": 1e9, "bytes": ADD_BYTES, "time_s": ADD_BYTES / 3.7e12}])
    assert a.verdict_name(0) == "impossible"
    assert "exceeds its theoretical 67.00 TFLOP/s" in " ".join(a.row(0)["reasons"])


def test_rate_above_a_known_cache_bandwidth_is_impossible(machines):
    """MI300X: HBM 5.3 TB/s; its 256 MiB Infinity Cache peaks at 17.2 TB/s (AMD CDNA 3 white
    paper). 100 MiB (too big for the 32 MiB L2) at 20 TB/s: above both, impossible; at 10 TB/s
    the Infinity Cache serves it, read against its roof: 10 / 17.2 = 58.1%."""
    mib100 = 100 * 2**20
    a = _judge(machines, [{"flops": 0, "bytes": mib100, "time_s": mib100 / 20e12},
                          {"flops": 0, "bytes": mib100, "time_s": mib100 / 10e12}],
               device="AMD Instinct MI300X")
    assert [a.verdict_name(i) for i in range(2)] == ["impossible", "cache_resident"]
    assert "and infinity_cache theoretical 17200 GB/s, where its 104.86 MB would fit" in (
        " ".join(a.row(0)["reasons"]))
    assert a.row(1)["efficiency"] == pytest.approx(10 / 17.2)
    assert "58.1% of SOL on the infinity_cache roof" in " ".join(a.row(1)["reasons"])


def test_a_small_set_on_mi300x_may_come_from_the_l2_of_unknown_bandwidth(machines):
    # 16 MiB at 20 TB/s: above the Infinity Cache's 17.2 TB/s but within the 32 MiB L2, whose
    # bandwidth no source gives: possible, so cache_resident with no reading
    mib16 = 16 * 2**20
    a = _judge(machines, [{"flops": 0, "bytes": mib16, "time_s": mib16 / 20e12}],
               device="AMD Instinct MI300X")
    assert a.verdict_name(0) == "cache_resident"
    assert a.row(0)["efficiency"] is None
    assert "fits in the 33.55 MB l2" in " ".join(a.row(0)["reasons"])


def test_a_calibrated_l2_judges_the_row_against_its_roof(machines):
    """`roofwise calibrate` measured 7.0 TB/s of L2 re-read on the H100: the add at 3.7 TB/s
    is 3.7 / 7.0 = 52.9% of that roof; at 8 TB/s it outruns the measurement (no theoretical
    rate exists, so it stays possible: 114.3% of the measured roof)."""
    h100 = machines["h100-sxm"]
    l2 = replace(h100.memory["l2"], measured_bytes_per_s=7.0e12)
    calibrated = replace(h100, memory={**h100.memory, "l2": l2})
    a = _judge(machines, [{"flops": ADD_FLOPS, "bytes": ADD_BYTES, "time_s": ADD_BYTES / 3.7e12},
                          {"flops": ADD_FLOPS, "bytes": ADD_BYTES, "time_s": ADD_BYTES / 8e12}],
               machine=calibrated)
    assert a.verdict_name(0) == a.verdict_name(1) == "cache_resident"
    assert a.row(0)["efficiency"] == pytest.approx(3.7 / 7.0)
    assert a.row(1)["efficiency"] == pytest.approx(8 / 7.0)


def test_a_calibrated_dram_anomaly_that_fits_in_l2_is_cache_resident(machines):
    """H200: HBM envelope 4.8 TB/s x 0.938 = 4.502 TB/s; 105% of it is 4.728 TB/s. 30 MB at
    4.75 TB/s is above that (an anomaly for a DRAM-served row) yet under the 4.8 TB/s
    theoretical; it fits the 60 MiB L2, so the cache explains it."""
    mb30 = 30_000_000
    a = _judge(machines, [{"flops": 0, "bytes": mb30, "time_s": mb30 / 4.75e12},
                          {"flops": 0, "bytes": 70_000_000, "time_s": 70_000_000 / 4.75e12}],
               device="NVIDIA H200")
    assert a.verdict_name(0) == "cache_resident"
    assert a.verdict_name(1) == "anomaly"  # 70 MB does not fit the 62.9 MB L2: as before


def test_the_cache_verdict_reaches_every_output(machines):
    from roofwise.output.frame import verdict_frame

    a = _judge(machines, [{"flops": ADD_FLOPS, "bytes": ADD_BYTES, "time_s": ADD_BYTES / 3.7e12}])
    frame = verdict_frame(a)
    assert frame["verdict"].to_list() == ["cache_resident"]
    assert frame["efficiency"].to_list() == [None]
    assert a.counts()["cache_resident"] == 1


def _trace_add(tmp_path, dims, dur_us, name):
    """A profiler trace of one `aten::add` on two tensors of `dims` (bf16), its kernel
    `dur_us` long, on an H100 SXM as the driver names it."""
    import json

    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0,
         "dur": 30, "args": {"External id": 1, "Input Dims": [dims, dims],
                             "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 5, "dur": 2, "args": {"correlation": 500, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": "elementwise_kernel", "pid": 0, "tid": 7,
         "ts": 100, "dur": dur_us, "args": {"device": 0, "correlation": 500}}]
    path = tmp_path / name
    path.write_text(json.dumps({"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
                                "traceEvents": events}))
    return path


def test_a_trace_reads_the_l2_add_as_cache_resident(tmp_path, capsys):
    """The issue's case end to end through a trace: the add on [1, 5185, 1024] bf16 in
    8.610 us (3.7 TB/s) is cache_resident; four times the elements (127.4 MB, larger than L2)
    at the same rate are impossible."""
    import json

    from roofwise.cli import main

    small = _trace_add(tmp_path, [1, 5185, 1024], 8.610, "small.json")
    large = _trace_add(tmp_path, [4, 5185, 1024], 4 * 8.610, "large.json")
    seen = {}
    for path in (small, large):
        assert main(["analyze", str(path), "--json"]) == 0
        rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        (add,) = [r for r in rows if r.get("op") == "aten::add"]
        seen[path.name] = add
    assert seen["small.json"]["verdicts"] == {"cache_resident": 1}
    assert seen["large.json"]["verdicts"] == {"impossible": 1}


def test_a_compute_anomaly_that_fits_in_l2_keeps_its_compute_reading(machines):
    """13.15 MB in 2.569 us is 5.12 TB/s, above H200's 4.8 TB/s HBM, and fits its 60 MiB L2;
    but 2.338 GFLOP in that time is 910 TFLOP/s, above the bf16 envelope (989.5 TFLOP/s x
    0.768, TileOPs' sustained fraction) yet below the peak: a compute anomaly, read on the
    compute roof that binds it (119.7%), never an efficiency left unbounded."""
    flops, size, time_s = 2_337_796_025, 13_151_877, 2.5689762838793493e-06
    assert size / time_s > 4.8e12 and size < 60 * 2**20
    envelope_s = flops / (989.5e12 * 0.768)
    good = [validate_record({"op": "softmax", "device": "NVIDIA H200", "roof": "tensor_core.bf16",
                             "flops": flops, "bytes": size, "time_s": time_s}, "row 0")]
    row = analyze(columns_from_valid(good), machines, None).row(0)
    assert row["verdict"] == "anomaly"
    assert row["efficiency"] == pytest.approx(envelope_s / time_s, rel=1e-3)
    assert envelope_s / time_s == pytest.approx(1.197, abs=1e-3)
    assert "119.7% of the envelope ceiling" in " ".join(row["reasons"])
