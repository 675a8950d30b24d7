"""The latency floor per timing method and kernel count (issue 8, section 1).

Every case is built from numbers derived here: the H200 profile's read-mix envelope
(4800 GB/s x 0.9380 = 4502.4 GB/s) and its assumed floors (events 20 us per call + 5 us per
further launch; kernel 3 us + 2 us), never from a file of measurements.
"""

from __future__ import annotations

from typing import Any

import pytest

from roofwise.base.errors import InputError
from roofwise.lint import lint_analysis
from roofwise.ops.attention import attention_decode
from roofwise.output.analysis import Analysis, analyze
from roofwise.profiles.load import builtin_machines, parse_machine
from roofwise.records.read import columns_from_valid, validate_record

MACHINES = builtin_machines()
H200 = MACHINES["h200"]
BW = 4800e9 * 0.9380  # 4502.4 GB/s


def analysis_of(records: list[dict[str, Any]], machine: Any = H200) -> Analysis:
    rows = [validate_record(r, f"test:{n}") for n, r in enumerate(records, 1)]
    return analyze(columns_from_valid(rows), MACHINES, machine)


def one(record: dict[str, Any], machine: Any = H200) -> dict[str, Any]:
    return analysis_of([record], machine).row(0)


def test_gqa_decode_for_one_sequence_timed_with_events_is_latency_bound() -> None:
    # Llama-3-8B-like GQA decode, one sequence, 8192 cached tokens, paged by 16:
    # q and out 32 x 128 x 2 B = 8,192 B each; k and v 8192 x 8 x 128 x 2 B = 16,777,216 B
    # each; 512 pages x 4 B of page table; 4 B of sequence length.
    decode = attention_decode(batch=1, kv_len=8192, q_heads=32, kv_heads=8, head_dim=128)
    assert decode.bytes == 8_192 + 2 * 16_777_216 + 2_048 + 4 + 8_192 == 33_572_868
    sol_s = 33_572_868 / BW
    assert sol_s == pytest.approx(7.4567e-6, rel=1e-4)  # ~7 us, memory-bound
    # timed with CUDA events around one eager call at 30 us: the one-kernel events floor,
    # 20 us, is 2/3 of it (>= 1/2), and SOL is under it
    row = one({**decode.to_record(time_s=30e-6), "timing": "events"})
    assert row["verdict"] == "latency_bound" and row["efficiency"] is None
    assert row["floor_s"] == 20e-6 and row["timing_method"] == "events"
    # one sentence: what the time is made of (30 / 20 = 1.50 floors), then what to do
    assert row["reasons"][0] == (
        "the 30.000 us measured is 1.50 x the events floor 20.000 us (assumed) and SOL is "
        "7.457 us: launches, not the kernel, set the time, so efficiency is no reading; "
        "re-time with graph replay or kernel durations, or fuse or graph-capture the call")
    assert not any("floor" in r for r in row["reasons"][1:])  # said once
    # the same kernel's own duration from a profiler (floor 3 us, below SOL) reads normally:
    # 7.457 / 9 us = 82.9%, at the ceiling
    timed_right = one({**decode.to_record(time_s=9e-6), "timing": "kernel"})
    assert timed_right["verdict"] == "at_ceiling"
    assert timed_right["efficiency"] == pytest.approx(sol_s / 9e-6)


def test_forty_small_kernels_whose_floors_explain_the_time_are_latency_bound() -> None:
    # an op of 4 KB moved and 1024 FLOP: SOL 4096 B / 4502.4 GB/s = 0.91 ns, run eagerly as
    # 40 small kernels in 400 us. Floor: 20 us + 39 x 5 us = 215 us, 53.75% of the time.
    record = {"op": "tiny_chain", "flops": 1024, "bytes": 4096, "roof": "cuda_core.fp32",
              "time_s": 400e-6, "timing": "events", "kernels": 40}
    row = one(record)
    assert row["verdict"] == "latency_bound"
    assert row["floor_s"] == pytest.approx(215e-6)
    assert row["kernels"] == 40
    assert row["reasons"][0].startswith(
        "the 400.000 us measured is 1.86 x the events floor 215.000 us for 40 kernels "
        "(20.000 us + 39 x 5.000 us, assumed) and SOL is 0.910 ns")
    # told it was one kernel, the same time is far above the 20 us floor: below, with the
    # split 400 = 20 floor + 380 rest, and efficiency net of the floor 0.91 ns / 380 us
    single = one({**record, "kernels": 1})
    assert single["verdict"] == "below"
    assert single["efficiency_net_of_floor"] == pytest.approx(4096 / BW / 380e-6)
    assert any("the 400.000 us measured is that floor plus 380.000 us more" in r
               for r in single["reasons"])


def test_a_measured_floor_reads_latency_bound_on_its_own_measurement() -> None:
    # a profile whose events floor was measured: a tiny add on one float, 6.5 us median
    # (p10 6.3 us, p90 6.9 us) as one launch
    data = {"name": "card", "memory": {"hbm": {"theoretical_bytes_per_s": 4.8e12,
                                                "calibration_by_mix": {"read": 0.938}}},
            "units": {"cuda_core.fp32": {"theoretical_ops_per_s": 67e12}},
            "latency_floor": {"events": {"per_call_s": 6.5e-6, "per_kernel_s": 5e-6,
                                         "assumed": False,
                                         "source": "measured: tiny add, events"}}}
    card = parse_machine(data, "card.yaml")
    add = {"op": "add", "flops": 1, "bytes": 8, "read_bytes": 4, "write_bytes": 4,
           "roof": "cuda_core.fp32", "timing": "events"}
    # the very measurement: time == floor (the old rule, measured < floor, missed it)
    exact = one({**add, "time_s": 6.5e-6, "time_p10_s": 6.3e-6, "time_p90_s": 6.9e-6}, card)
    assert exact["verdict"] == "latency_bound" and exact["floor_s"] == 6.5e-6
    assert "the events floor 6.500 us (measured)" in exact["reasons"][0]
    # a run at its p10, just under the floor, is still read against the events floor (its
    # p90 reaches it), not dismissed as overlapped launches
    low = one({**add, "time_s": 6.3e-6, "time_p10_s": 6.2e-6, "time_p90_s": 6.9e-6}, card)
    assert low["verdict"] == "latency_bound" and low["floor_s"] == 6.5e-6
    # and without a spread, 5% of noise is allowed: 6.3 us x 1.05 = 6.615 us >= 6.5 us
    assert one({**add, "time_s": 6.3e-6}, card)["floor_s"] == 6.5e-6
    # the kernel method was not measured: that floor stays assumed, and says so
    kernel = one({**add, "time_s": 3e-6, "timing": "kernel"}, card)
    assert kernel["verdict"] == "latency_bound"
    assert "the kernel floor 3.000 us (assumed)" in kernel["reasons"][0]


def test_a_long_unfused_eager_call_far_above_its_floor_stays_below_with_the_split() -> None:
    # an ideal (fused) ledger of 45,024,000 B: SOL 45,024,000 / 4502.4 GB/s = 10 us; run
    # eagerly unfused as 12 kernels in 1 ms. Floor 20 + 11 x 5 = 75 us: 7.5% of the time,
    # so the floor does not explain it; the rest, 925 us, is the kernels' own traffic.
    row = one({"op": "unfused_norm", "flops": 0, "bytes": 45_024_000, "roof": "cuda_core.fp32",
               "time_s": 1e-3, "timing": "events", "kernels": 12})
    assert row["verdict"] == "below"
    assert row["efficiency"] == pytest.approx(0.01)
    assert row["floor_s"] == pytest.approx(75e-6)
    assert row["efficiency_net_of_floor"] == pytest.approx(10e-6 / 925e-6)
    # the net efficiency is said once, in the split; the split ends with what to do
    assert row["reasons"] == [
        "1.0% of SOL; memory-bound on hbm read mix",
        "SOL 10.000 us is under the events floor 75.000 us for 12 kernels (20.000 us + 11 x "
        "5.000 us, assumed), yet the 1.000 ms measured is that floor plus 925.000 us more, "
        "1.1% of SOL net of the floor; fuse the kernels, or re-time with kernel durations to "
        "tell the kernels' own time from overhead above the floor"]
    assert [f.code for f in lint_analysis(analysis_of([{
        "op": "unfused_norm", "flops": 0, "bytes": 45_024_000, "roof": "cuda_core.fp32",
        "time_s": 1e-3, "timing": "events", "kernels": 12}]))] == []  # not M7: it reads


def test_where_the_floor_does_not_bind_nothing_changes() -> None:
    # the seed's fused prefill, 67,764,736 B: SOL 15.051 us, above the 3 us kernel floor
    record = {"op": "qk", "flops": 189_235_200, "bytes": 67_764_736,
              "roof": "cuda_core.fp32", "timing": "kernel"}
    for time_s in (17.5e-6, 30e-6, 100e-6):
        row = one({**record, "time_s": time_s})
        assert row["efficiency"] == pytest.approx(67_764_736 / BW / time_s)
        assert row["efficiency_net_of_floor"] is None  # 3 us is under a fifth of each time
        assert not any("floor" in r for r in row["reasons"])


def test_floor_share_gives_net_efficiency_beside_efficiency() -> None:
    # SOL 33.682 us (151,650,816 B) timed with events at 60 us: the 20 us floor is 1/3 of it,
    # so 33.682 / (60 - 20) = 84.2% net of the floor is shown beside 56.1%
    row = one({"op": "split", "flops": 0, "bytes": 151_650_816, "roof": "cuda_core.fp32",
               "time_s": 60e-6, "timing": "device"})
    assert row["verdict"] == "below" and row["timing_method"] == "events"
    assert row["efficiency"] == pytest.approx(151_650_816 / BW / 60e-6)
    assert row["efficiency_net_of_floor"] == pytest.approx(151_650_816 / BW / 40e-6)
    # said once, beside the efficiency: the floor, its share (20 / 60) and the net figure
    assert row["reasons"] == [
        "56.1% of SOL, 84.2% net of the events floor 20.000 us (assumed), 33.3% of the time; "
        "memory-bound on hbm read mix"]


def test_a_time_clearly_under_its_floor_is_read_against_the_kernel_floor() -> None:
    # back-to-back eager calls averaged: 14.2 us per call is under the 20 us events floor,
    # so launches overlapped; against the 3 us kernel floor SOL 15.051 us is readable, and
    # 106.0% of the envelope is an anomaly, not a latency-bound row
    row = one({"op": "qk", "flops": 189_235_200, "bytes": 67_764_736,
               "roof": "cuda_core.fp32", "time_s": 14.2e-6, "timing": "events"})
    assert row["verdict"] == "anomaly" and row["floor_s"] == 3e-6


def test_wall_and_graph_floors_follow_their_method() -> None:
    record = {"op": "tiny", "flops": 1, "bytes": 8, "roof": "cuda_core.fp32",
              "time_s": 40e-6, "kernels": 3}
    # wall: 30 + 2 x 5 = 40 us; graph: 5 + 2 x 2 = 9 us (40 us is then far above it)
    assert one({**record, "timing": "wall"})["floor_s"] == pytest.approx(40e-6)
    graph = one({**record, "timing": "graph"})
    assert graph["floor_s"] == pytest.approx(9e-6) and graph["verdict"] == "below"


@pytest.mark.parametrize("kernels", [0, 2.5, -1, "two"])
def test_kernel_count_must_be_a_whole_number_of_launches(kernels: Any) -> None:
    with pytest.raises(InputError, match="kernels"):
        validate_record({"op": "x", "flops": 1, "bytes": 1, "roof": "cuda_core.fp32",
                         "time_s": 1e-6, "kernels": kernels}, "r.jsonl:1")


def test_timing_methods_are_accepted_and_device_means_events() -> None:
    for timing in ("kernel", "graph", "events", "wall", "device"):
        validate_record({"op": "x", "flops": 1, "bytes": 1, "roof": "cuda_core.fp32",
                         "time_s": 1e-6, "timing": timing}, "r.jsonl:1")
    with pytest.raises(InputError, match="timing: expected one of kernel, graph, events"):
        validate_record({"op": "x", "flops": 1, "bytes": 1, "roof": "cuda_core.fp32",
                         "time_s": 1e-6, "timing": "cupti"}, "r.jsonl:1")


def test_profile_floor_keys_are_checked() -> None:
    base = {"name": "c", "memory": {"hbm": {"theoretical_bytes_per_s": 1e12}}, "units": {}}
    with pytest.raises(InputError, match=r"latency_floor\.sol_s: unknown key"):
        parse_machine({**base, "latency_floor": {"sol_s": 3e-6}}, "c.yaml")
    with pytest.raises(InputError, match=r"latency_floor\.events\.source: missing"):
        parse_machine({**base, "latency_floor": {"events": {"per_call_s": 1e-5}}}, "c.yaml")
    with pytest.raises(InputError, match=r"latency_floor\.graph\.per_call_s"):
        parse_machine({**base, "latency_floor": {"graph": {"per_call_s": -1, "source": "x"}}},
                      "c.yaml")


def test_an_at_ceiling_reading_under_the_floor_stands() -> None:
    # the seed's prefill (SOL 15.051 us) timed with events at 17.5 us: SOL is under the
    # 20 us events floor, but 86.0% is a lower bound on the kernel no floor can spoil
    row = one({"op": "qk", "flops": 189_235_200, "bytes": 67_764_736,
               "roof": "cuda_core.fp32", "time_s": 17.5e-6, "timing": "events"})
    assert row["verdict"] == "at_ceiling"
    assert row["efficiency"] == pytest.approx(67_764_736 / BW / 17.5e-6)
    assert row["efficiency_net_of_floor"] is None  # 15.051 / (17.5 - 20) means nothing
    # at 20 us the floor explains the whole time and 75.3% is no reading: latency_bound
    assert one({"op": "qk", "flops": 189_235_200, "bytes": 67_764_736,
                "roof": "cuda_core.fp32", "time_s": 20e-6, "timing": "events"}
               )["verdict"] == "latency_bound"


def test_a_floor_without_assumed_is_read_as_assumed_never_as_measured() -> None:
    # a typed-in floor (no `assumed` key) must not pass for a measurement on the card;
    # `assumed: false` (as `roofwise calibrate` writes it) is what makes a floor measured
    base = {"name": "c", "memory": {"hbm": {"theoretical_bytes_per_s": 1e12}}, "units": {}}
    typed = parse_machine({**base, "latency_floor": {"events": {
        "per_call_s": 8e-6, "source": "my guess"}}}, "c.yaml")
    assert typed.latency_floors.floor("events").assumed is True
    measured = parse_machine({**base, "latency_floor": {"events": {
        "per_call_s": 8e-6, "assumed": False, "source": "measured: tiny add"}}}, "c.yaml")
    assert measured.latency_floors.floor("events").assumed is False
    # and the section calibrate writes says so explicitly
    from roofwise.measure.calibration_math import FloorMeasurement, floors_section

    section = floors_section([FloorMeasurement("events", (8e-6, 8e-6), 4,
                                               (23e-6, 23e-6))], "measured 2026-12-01")
    assert section["events"]["assumed"] is False
    assert section["events"]["per_kernel_s"] == pytest.approx(5e-6)  # (23 - 8) / 3
    assert parse_machine({**base, "latency_floor": section}, "c.yaml").latency_floors.floor(
        "events").assumed is False


def test_a_split_under_a_profiler_names_the_rest_as_the_kernels_own_time() -> None:
    # the same unfused 12-kernel call (SOL 10 us) as summed kernel durations: floor 3 + 11 x 2
    # = 25 us, rest 975 us. Under a profiler no host overhead is in it: fuse the kernels
    row = one({"op": "unfused_norm", "flops": 0, "bytes": 45_024_000, "roof": "cuda_core.fp32",
               "time_s": 1e-3, "timing": "kernel", "kernels": 12})
    assert row["verdict"] == "below" and row["floor_s"] == pytest.approx(25e-6)
    assert row["efficiency_net_of_floor"] == pytest.approx(10e-6 / 975e-6)
    assert row["reasons"][1] == (
        "SOL 10.000 us is under the kernel floor 25.000 us for 12 kernels (3.000 us + 11 x "
        "2.000 us, assumed), yet the 1.000 ms measured is that floor plus 975.000 us more, "
        "1.0% of SOL net of the floor; the rest is the kernels' own time: fuse them")


def test_kernel_durations_under_their_floor_are_not_called_overlapped_launches() -> None:
    # a profiler's duration has no host launch in it: 1.8 us under the assumed 3 us kernel
    # floor is a kernel cheaper than the assumed floor, not launches that overlapped
    # (SOL 8192 B / 4502.4 GB/s = 1.819 ns; 1.8 / 3 = 0.60 floors)
    row = one({"op": "tiny", "flops": 1024, "bytes": 8192, "roof": "cuda_core.fp32",
               "time_s": 1.8e-6, "timing": "kernel"})
    assert row["verdict"] == "latency_bound" and row["floor_s"] == 3e-6
    assert row["reasons"][0] == (
        "the 1.800 us measured is 0.60 x the kernel floor 3.000 us (assumed) and SOL is "
        "1.819 ns: a kernel's fixed cost, not its work, sets the time, so efficiency is no "
        "reading; give each launch more work (batch, fuse)")


def test_floor_sentences_of_many_rows_are_each_rows_own_sentence() -> None:
    """Thousands of latency-bound, floor-split and floor-share rows in one analysis (their
    sentences filled by the engine, one template per floor) say, row for row, what the
    one-row sentence functions say of that row's numbers and floor; and what one-row
    analyses of the same records say (the sentences written one at a time)."""
    import math

    import numpy as np

    from roofwise.explain import reason_text
    from roofwise.explain.facts import floor_facts
    from roofwise.explain.reason_columns import reason_lists
    from roofwise.pricing.reasons import Reason

    rng = np.random.default_rng(8)
    n = 15_000
    timings = ["events", "kernel", "graph", "wall", "device"]
    records = []
    for k in range(n):
        population = k % 3
        sol_s = {0: 1e-9, 1: 2e-9, 2: 36e-6}[population]  # tiny, tiny, above the floors
        time_s = float({0: rng.uniform(2e-6, 12e-6), 1: rng.uniform(60e-6, 400e-6),
                        2: rng.uniform(75e-6, 100e-6)}[population])
        # a floor share needs a floor near the time: the events floor (20 us and up)
        timing = "events" if population == 2 else timings[k % len(timings)]
        records.append({"op": f"op{k % 7}", "flops": 0.0, "bytes": round(sol_s * BW),
                        "roof": "cuda_core.fp32", "time_s": time_s, "timing": timing,
                        "kernels": 1 + k % 4})
    a = analysis_of(records)
    said = reason_lists(a)
    flags, net = a.judged.flags, a.judged.net_efficiency
    assert net is not None
    counts = {"latency": 0, "split": 0, "beside": 0}
    for i in range(n):
        facts = floor_facts(a, i, H200)
        sol_s, time_s = float(a.priced.sol_time_s[i]), float(a.columns.time_s[i])
        if flags[i] & Reason.BELOW_LATENCY_FLOOR:
            assert reason_text.latency_bound_text(sol_s, time_s, facts) in said[i]
            counts["latency"] += 1
        elif flags[i] & Reason.FLOOR_SPLIT:
            assert reason_text.floor_split_text(sol_s, time_s, facts, float(net[i])) in said[i]
            counts["split"] += 1
        elif math.isfinite(net[i]):
            beside = reason_text.net_beside_text(float(net[i]), time_s, facts)
            assert beside in said[i][0], (said[i], beside)
            counts["beside"] += 1
    assert min(counts.values()) >= 4096, counts  # each many enough for the engine's path
    # the same records a few at a time: the same sentences, written one by one
    picked = rng.choice(n, 40, replace=False).tolist()
    few = reason_lists(analysis_of([records[i] for i in picked]))
    assert few == [said[i] for i in picked]
