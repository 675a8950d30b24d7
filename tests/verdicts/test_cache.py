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
    """1 GiB read once at 3.7 TB/s: the L2 can have held at most its 50 MiB of it before the
    call, so HBM moved at least 1024 - 50 = 974 MiB (1,021,313,024 B) in 2^30 / 3.7e12 s:
    3519.3 GB/s, above HBM's 3350 GB/s whatever the cache held."""
    gib = 2**30
    a = _judge(machines, [{"flops": 0, "bytes": gib, "read_bytes": gib, "write_bytes": 0,
                           "time_s": gib / 3.7e12}])
    assert a.verdict_name(0) == "impossible"
    said = " ".join(a.row(0)["reasons"])
    assert "exceeds hbm theoretical 3350 GB/s" in said
    assert ("its working set of 1.07 GB is larger than the 52.43 MB l2: holding up to 52.43 MB "
            "of what it reads before it runs and of what it writes after, that cache still "
            "leaves hbm at least 1.02 GB in the time, 3519.3 GB/s") in said


def test_a_set_larger_than_l2_may_be_served_by_it_in_part(machines):
    """64 MiB at 3.7 TB/s, above HBM's 3.35 TB/s. Without a read/write split each side may be
    up to the 50 MiB L2: it can all have been there (cache-resident in part, HBM's share 0).
    Read only, the L2 can hold 50 MiB of the 64 before the call: HBM moved at least 14 MiB
    (14,680,064 B) in 2^26 / 3.7e12 s = 18.14 us, 809.4 GB/s, within HBM: possible, so
    cache-resident in part, its reason naming both."""
    big = 64 * 2**20
    a = _judge(machines, [{"flops": 0, "bytes": big, "time_s": big / 3.7e12},
                          {"flops": 0, "bytes": big, "read_bytes": big, "write_bytes": 0,
                           "time_s": big / 3.7e12}])
    assert [a.verdict_name(i) for i in range(2)] == ["cache_resident"] * 2
    assert a.row(0)["efficiency"] is None and a.row(1)["efficiency"] is None
    first, second = (" ".join(a.row(i)["reasons"]) for i in range(2))
    assert ("its working set of 67.11 MB is larger than the 52.43 MB l2, but that cache can "
            "hold up to 52.43 MB of what it reads before it runs and as much of what it writes "
            "after, which can be all of it: cache-resident in part") in first
    assert "which leaves at least 14.68 MB to hbm, 809.4 GB/s, within its theoretical rate" in (
        second)
    assert "time it with the l2 flushed to tell" in second
    assert a.judged.cache_dram_bytes[1] == 14 * 2**20


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
    # 70 MB does not fit the 62.9 MB L2, and 4.75 TB/s is within HBM's theoretical 4.8: HBM
    # alone could have served it, so no cache is claimed and the envelope judges it
    assert a.verdict_name(1) == "anomaly"


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
    """The issue's case end to end through a trace, at 3.7 TB/s each (T = one tensor's bytes,
    C = the H100's 52,428,800 B L2; the add reads 2T and writes T):
    - [1, 5185, 1024] bf16 in 8.610 us: 3T = 31.86 MB fits: cache_resident;
    - [4, 5185, 1024] in 4 x 8.610 us: T = 42,475,520 B; 2T of reads exceed C by 32,522,240 B,
      the writes fit: HBM's 32.5 MB in 34.44 us is 944.3 GB/s: cache-resident in part;
    - [64, 5185, 1024] in 64 x 8.610 us: T = 679,608,320 B; HBM moved at least 3T - 2C =
      1,933,967,360 B in 551.04 us, 3509.7 GB/s > 3350: impossible."""
    import json

    from roofwise.cli import main

    seen, said = {}, {}
    for batch in (1, 4, 64):
        path = _trace_add(tmp_path, [batch, 5185, 1024], batch * 8.610, f"add{batch}.json")
        assert main(["analyze", str(path), "--json"]) == 0
        rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        (add,) = [r for r in rows if r.get("op") == "aten::add"]
        seen[batch] = add["verdicts"]
        # the call's own sentences: its record, written and read back
        records = tmp_path / f"add{batch}.jsonl"
        assert main(["analyze", str(path), "--records-out", str(records)]) == 0
        capsys.readouterr()
        assert main(["analyze", str(records), "--json"]) == 0
        (call,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        said[batch] = " ".join(call["reasons"])
    assert seen == {1: {"cache_resident": 1}, 4: {"cache_resident": 1}, 64: {"impossible": 1}}
    assert "fits in the 52.43 MB l2" in said[1]
    assert "leaves at least 32.52 MB to hbm, 944.3 GB/s" in said[4]
    assert "leaves hbm at least 1.93 GB in the time, 3509.7 GB/s" in said[64]


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


def test_the_least_dram_share_beside_a_cache_by_hand():
    """(distinct reads - C)+ + (distinct writes - C)+, split as the record allows in the
    cache's favour (reads at most read_bytes, writes at most write_bytes, both together at
    least the working set)."""
    import numpy as np

    from roofwise.verdicts.rules import dram_bytes_at_least

    nan = np.nan
    w = np.array([100.0, 50.0, 100.0, 100.0, 100.0, 300.0, 60.0])
    reads = np.array([nan, nan, 100.0, 0.0, 90.0, 200.0, 40.0])
    writes = np.array([nan, nan, 0.0, 100.0, 10.0, 100.0, 20.0])
    got = dram_bytes_at_least(w, reads, writes, 30.0)
    # no split: 100 - 2 x 30; 50 within 2 x 30: 0; read only: 100 - 30; write only the same;
    # 90 read and 10 written: 60 + 0; 300 distinct with reads <= 200 and writes <= 100 can
    # only be 200 and 100: 170 + 70; 60 distinct as 40 read and 20 written: 10 + 0
    assert got.tolist() == [40.0, 0.0, 70.0, 70.0, 60.0, 240.0, 10.0]
    # an in-place add of T read twice and written once over 2T distinct (T = 45): reads
    # between T and 2T, so (60 - 30) + (30 - 30) = 30 at best, i.e. 2T - 2C
    assert dram_bytes_at_least(np.array([90.0]), np.array([90.0]), np.array([45.0]),
                               30.0).tolist() == [30.0]


def test_the_mi300x_fill_beyond_its_infinity_cache_is_possible():
    """TraceLens' MI300X ResNet-18 trace fills [512, 64, 112, 112] bf16 (822,083,584 B,
    written only) in 144.918 us: 5672.7 GB/s, above the 5.3 TB/s HBM, and larger than the
    256 MiB (268,435,456 B) Infinity Cache. The cache can hold its last 268,435,456 B of writes
    after the call, so HBM wrote at least 553,648,128 B: 3820.4 GB/s, within 5.3 TB/s; every
    byte passes the Infinity Cache, 5672.7 GB/s within its 17.2 TB/s. Possible: cache-resident
    in part (it was impossible), read on both roofs: max(553,648,128 / 5.3e12, 822,083,584 /
    17.2e12) / 144.918 us = 104.46 / 144.918 = 72.1%."""
    from roofwise.profiles.load import builtin_machines

    size, time_s = 512 * 64 * 112 * 112 * 2, 144.918e-6
    analysis = _judge(builtin_machines(), [{"flops": 0, "bytes": size, "read_bytes": 0,
                                            "write_bytes": size, "time_s": time_s}],
                      device="AMD Instinct MI300X")
    row = analysis.row(0)
    assert row["verdict"] == "cache_resident"
    assert analysis.judged.cache_dram_bytes[0] == size - 256 * 2**20 == 553_648_128
    assert row["efficiency"] == pytest.approx(553_648_128 / 5.3e12 / time_s)
    assert row["efficiency"] == pytest.approx(0.7208, abs=1e-4)
    assert ("which leaves at least 553.65 MB to hbm, 3820.4 GB/s, within its theoretical rate"
            in row["reasons"][0])
    assert row["reasons"][0].endswith(
        "72.1% of SOL with those 553.65 MB on the hbm roof and every byte on the "
        "infinity_cache roof 17200 GB/s (theoretical)")


def test_the_least_dram_share_equals_a_search_over_every_split():
    """The closed form against an exhaustive search: every split of the working set into
    distinct reads r <= read_bytes and distinct writes w <= write_bytes, r + w >= the set
    (each at most the set), costs (r - C)+ + (w - C)+; the least of them is the bound."""
    import itertools

    import numpy as np

    from roofwise.verdicts.rules import dram_bytes_at_least

    cases = []
    for size, reads, writes, capacity in itertools.product(range(0, 13, 3), range(0, 13, 2),
                                                           range(0, 13, 2), (0, 2, 5, 9)):
        if reads + writes < size:  # a record whose split cannot cover its set: not valid
            continue
        best = min((max(r - capacity, 0) + max(w - capacity, 0)
                    for r in range(min(reads, size) + 1) for w in range(min(writes, size) + 1)
                    if r + w >= size), default=None)
        cases.append((size, reads, writes, capacity, best))
    assert len(cases) > 300
    for size, reads, writes, capacity, best in cases:
        got = dram_bytes_at_least(np.array([float(size)]), np.array([float(reads)]),
                                  np.array([float(writes)]), float(capacity))[0]
        assert got == best, (size, reads, writes, capacity)
        # no split known: the search over every split up to the whole set
        free = min(max(r - capacity, 0) + max(size - r - capacity, 0) for r in range(size + 1))
        assert dram_bytes_at_least(np.array([float(size)]), None, None,
                                   float(capacity))[0] == free
        # flushed first (cold): every read from DRAM, the writes beyond the capacity
        cold = min(r + max(w - capacity, 0)
                   for r in range(min(reads, size) + 1) for w in range(min(writes, size) + 1)
                   if r + w >= size)
        assert dram_bytes_at_least(np.array([float(size)]), np.array([float(reads)]),
                                   np.array([float(writes)]), float(capacity),
                                   np.array([True]))[0] == cold, (size, reads, writes, capacity)
