"""The record checks as columns (`lint_columns`): the same findings as `lint_findings`, finding
for finding, on records where every check fires; the sentences written per column are the
ones a person reads (hand-computed here); `analyze --json` carries them per row.

Numbers come from the H200 profile (hbm 4800 GB/s x 0.9380 read mix; cuda_core.fp32 67.0e12 x
0.8548 sustained; sfu.fp32 4.18176e12, datasheet) and the seed's case study (67,764,736 B,
189,235,200 FLOPs; its decode step 17,056 B), as in tests/test_lint.py.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl
import pytest

from roofwise.explain.reason_text import CeilingFacts, above_envelope_what
from roofwise.lint import ROW_CHECKS, lint_columns, lint_findings, lint_rows
from roofwise.lint.findings import nbytes_text, nbytes_text_column
from roofwise.ops import attention_decode, gemm, qk_norm_rope_quant, qk_norm_rope_quant_stages
from roofwise.ops.attention import attention
from roofwise.output.analysis import Analysis, analyze
from roofwise.output.frame import json_lines
from roofwise.pricing.core import equal_to, uniform
from roofwise.pricing.reasons import Reason
from roofwise.profiles.load import builtin_machines
from roofwise.profiles.machine import ComputeUnit
from roofwise.records.read import columns_from_valid, validate_record

MACHINES = builtin_machines()
H200 = MACHINES["h200"]
FUSED = qk_norm_rope_quant()
DECODE = qk_norm_rope_quant(tokens=1)
FP8_KV = attention_decode(kv_dtype="fp8_e4m3")
GEMM = gemm(8192, 8192, 8192)
QUANT_STAGE = qk_norm_rope_quant_stages()[2]
ROWS = 4096 * (32 + 8)
ELEMS = ROWS * 128
H200_UNITS = ("cuda_core.fp32, sfu.fp32, tensor_core.fp16, tensor_core.bf16, tensor_core.tf32, "
              "tensor_core.fp8")


def fp8_everywhere(ledger: Any) -> Any:
    """Roof and contraction work rewritten to follow the fp8 KV dtype (the seed's M3)."""
    return replace(ledger, roof="tensor_core.fp8", work=tuple(
        replace(w, unit="tensor_core.fp8") if w.op_class == "contraction" else w
        for w in ledger.work))


def fma_row(fraction_of_peak: float, time_s: float) -> dict[str, Any]:
    return {"op": "fma", "flops": 67.0e12 * fraction_of_peak * time_s, "bytes": 1e6,
            "roof": "cuda_core.fp32", "time_s": time_s, "timing": "kernel"}


def without_split_bytes(record: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = {**record, **changes}
    del out["read_bytes"], out["write_bytes"]
    return out


def every_check_records() -> list[dict[str, Any]]:
    """One or more rows for each check (comment: the row's index), on h200 unless said."""
    split_fp8 = fp8_everywhere(FP8_KV).to_record(time_s=10e-3)
    typo_split = {"cuda_core.fp32": 1.0e8, "tpu.y": FUSED.flops - 1.0e8}
    rows = [
        # 0: M1, memory at the datasheet figure (h100-sxm measured no mix)
        {**FUSED.to_record(time_s=25e-6), "device": "NVIDIA H100 SXM 80GB"},
        # 1: M1 (sfu.fp32 is a datasheet rate) and M5 (it binds alone)
        {"op": "sfu_heavy", "flops": 1.1e9, "bytes": 1e5, "roof": "cuda_core.fp32",
         "time_s": 3e-4, "flops_by_unit": {"cuda_core.fp32": 1e8, "sfu.fp32": 1e9}},
        # 2: M2 from the row's own split; 3: M2 against the reference
        {**FUSED.to_record(time_s=20e-6), "roof": "tensor_core.fp16"},
        {"op": FUSED.name, "flops": FUSED.flops, "bytes": FUSED.bytes,
         "roof": "tensor_core.bf16", "time_s": 20e-6},
        # 4: M3 from the split; 5, 6: M3 against the reference (split, totals only)
        {"op": "attn", "flops": 1e12, "bytes": 1e9, "roof": "tensor_core.fp8", "time_s": 1e-3,
         "flops_by_unit": {"tensor_core.bf16": 1e12}},
        split_fp8, {k: v for k, v in split_fp8.items() if k != "flops_by_unit"},
        # 7: M4, the 2-call total; 8: M4, the quant stage's bytes and FLOPs
        without_split_bytes(FUSED.to_record(time_s=40e-6), bytes=151_650_816),
        {"op": FUSED.name, "flops": QUANT_STAGE.flops, "bytes": QUANT_STAGE.bytes,
         "roof": FUSED.roof, "time_s": 20e-6, "timing": "kernel"},
        # 9: M5, the SFU binds alone; 10: M5, two pipes near each other (and M1)
        {"op": "softmax", "flops": 5 * 8192000, "bytes": 8 * 8192000, "roof": "cuda_core.fp32",
         "time_s": 1e-4, "flops_by_unit": {"cuda_core.fp32": 4 * 8192000, "sfu.fp32": 8192000}},
        attention(batch=1, q_len=8192, kv_len=8192, q_heads=32, kv_heads=8, head_dim=64,
                  causal=False).to_record(time_s=1.0e-3, timing="kernel"),
        # 11: M6 without its lookups; 12: M6 on read_bytes only
        without_split_bytes(FUSED.to_record(time_s=20e-6),
                            bytes=FUSED.bytes - FUSED.lookup_bytes),
        {**FUSED.to_record(time_s=20e-6), "read_bytes": FUSED.read_bytes - 1000,
         "write_bytes": FUSED.write_bytes + 1000},
        # 13: M7 under the kernel floor; 14: M7 under the events floor
        DECODE.to_record(time_s=4e-6),
        {**DECODE.to_record(time_s=30e-6), "timing": "events"},
        # 15: M8 bandwidth; 16: M8 rate; 17: M8 above the envelope only
        qk_norm_rope_quant(tokens=32768).to_record(time_s=80e-6),
        {**GEMM.to_record(time_s=2e-3), "flops": 2.0**41},
        FUSED.to_record(time_s=14.2e-6),
        # 18: R1 roof; 19: R1 split; 20: R1 both
        {**FUSED.to_record(time_s=20e-6), "roof": "tpu.x"},
        {**FUSED.to_record(time_s=20e-6), "flops_by_unit": typo_split},
        {**FUSED.to_record(time_s=20e-6), "roof": "tpu.x", "flops_by_unit": typo_split},
        # 21-24: R2 (and M8), four FMA rows above the sustained envelope
        *(fma_row(f, t) for f, t in ((0.975, 1e-3), (0.98, 2e-3), (0.98, 4e-3),
                                     (0.985, 8e-3))),
        # 25: no profile (blank); 26: HBM above its read mix, alone (M8, no R2)
        {**FUSED.to_record(time_s=17.5e-6), "device": "no such card"},
        {"op": "read", "flops": 0, "bytes": 4.8e12 * 0.99 * 1e-3, "roof": "cuda_core.fp32",
         "time_s": 1e-3, "timing": "kernel"},
    ]
    return [r if "device" in r else {**r, "device": "NVIDIA H200"} for r in rows]


def analysis_of(records: list[dict[str, Any]], **kwargs: Any) -> Analysis:
    rows = [validate_record(r, f"t:{n}") for n, r in enumerate(records, 1)]
    return analyze(columns_from_valid(rows), kwargs.get("machines", MACHINES),
                   kwargs.get("machine"))


@pytest.fixture(scope="module")
def every() -> Analysis:
    return analysis_of(every_check_records())


def as_tuples(frame: pl.DataFrame) -> list[tuple[int, str, str, str, str]]:
    return list(frame.select("row", "code", "severity", "reason", "fix").iter_rows())


def from_findings(analysis: Analysis, **kwargs: Any) -> list[tuple[int, str, str, str, str]]:
    return [(i, f.code, f.severity, f.reason, f.fix)
            for i, found in lint_findings(analysis, **kwargs).items() for f in found]


@pytest.mark.parametrize("machine_level", [False, True])
@pytest.mark.parametrize("references", [[FUSED, FP8_KV], None])
def test_columns_and_findings_agree_finding_for_finding(every: Analysis, machine_level: bool,
                                                       references: Any) -> None:
    frame = lint_columns(every, references, path="runs.jsonl", machine_level=machine_level)
    assert frame.columns == ["row", "code", "severity", "reason", "fix"]
    assert frame.schema["row"] == pl.Int64
    assert as_tuples(frame) == from_findings(every, ledgers=references, path="runs.jsonl",
                                             machine_level=machine_level)
    codes = set(frame["code"])
    with_references = {"M2", "M3", "M4", "M6"} if references else {"M2", "M3"}
    assert codes == {"M1", "M5", "M7", "M8", "R1", *with_references,
                     *(["R2"] if machine_level else [])}


def test_every_check_fires_on_the_rows_built_for_it(every: Analysis) -> None:
    frame = lint_columns(every, [FUSED, FP8_KV], machine_level=True)
    codes_by_row: dict[int, list[str]] = {}
    for row, code in frame.select("row", "code").iter_rows():
        codes_by_row.setdefault(row, []).append(code)
    # by row, and within a row in check order, R2 after the row's own
    assert codes_by_row == {
        0: ["M1"], 1: ["M1", "M5"], 2: ["M2", "M7"], 3: ["M2", "M7"], 4: ["M3", "M8"],
        5: ["M3"], 6: ["M3"], 7: ["M4"], 8: ["M4"], 9: ["M5"], 10: ["M1", "M5"],
        11: ["M6", "M7"], 12: ["M6", "M7"], 13: ["M7"], 14: ["M7"], 15: ["M8"], 16: ["M8"],
        17: ["M8"], 18: ["R1"], 19: ["R1"], 20: ["R1"], 21: ["M8", "R2"], 22: ["M8", "R2"],
        23: ["M8", "R2"], 24: ["M8", "R2"], 26: ["M8"]}
    assert set(ROW_CHECKS) <= set(frame["code"])


def reason(frame: pl.DataFrame, row: int, code: str) -> tuple[str, str, str]:
    (found,) = frame.filter((pl.col("row") == row) & (pl.col("code") == code)).select(
        "severity", "reason", "fix").iter_rows()
    return found


def test_sentences_written_per_column(every: Analysis) -> None:
    frame = lint_columns(every, [FUSED, FP8_KV], machine_level=True)
    # 67,764,736 B / 3.35e12 B/s = 20.228 us: all of SOL
    assert reason(frame, 0, "M1") == (
        "warning", "h100-sxm hbm 3350 GB/s is the datasheet figure (no measured mix); memory "
        "time 20.228 us is 100% of SOL", "measure hbm access mixes on the card (roofwise "
        "calibrate) before trusting SOL")
    # 1e9 / 4.18176e12 = 239.134 us on the SFU, 1e8 / (67e12 x 0.8548) = 1.746 us on FP32
    assert reason(frame, 1, "M1")[1] == (
        "sfu.fp32 on h200 is the datasheet rate 4.18 Top/s (uncalibrated); its time 239.134 us "
        "is 100% of SOL")
    assert reason(frame, 1, "M5") == (
        "warning", "sfu.fp32 binds: 1,000,000,000 transcendentals take 239.134 us against "
        "1.746 us on cuda_core.fp32", "judge this op against sfu.fp32, per pipe; calibrate "
        "sfu.fp32 before trusting it")
    # the kernel floor 3 us explains 4 us: 4 / 3 = 1.33; SOL 17,056 B / 4502.4 GB/s
    assert reason(frame, 13, "M7") == (
        "warning", "the 4.000 us measured is 1.33 x the kernel floor 3.000 us (assumed; the "
        "time is under the events floor, so launches overlapped) and SOL is 3.788 ns: a "
        "kernel's fixed cost, not its work, sets the time, so efficiency is no reading",
        "give each launch more work (batch, fuse)")
    # 542,114,304 B / 80 us = 6776.4 GB/s (HBM's least share beside the 62.91 MB L2,
    # 416,285,184 B, is 5203.6 GB/s: above theoretical too); 2^41 / 2 ms = 1099.51 T/s
    assert reason(frame, 15, "M8")[:2] == (
        "error", "542,114,304 B in 80.000 us is 6776.4 GB/s, above hbm theoretical 4800 GB/s")
    assert reason(frame, 16, "M8")[1] == ("tensor_core.bf16 at 1099.51 TFLOP/s, above its "
                                          "theoretical 989.50 TFLOP/s")
    # 15.051 us / 14.2 us = 106.0% of the envelope; 4772.2 / 4800 = 0.9942 of theoretical
    assert reason(frame, 17, "M8")[:2] == (
        "warning", "106.0% of the envelope ceiling: above 105% yet below theoretical, so "
        "bytes, FLOPs or timer are wrong, or the profile is calibrated below this card "
        "(implies 0.9942 of hbm read mix theoretical, profile 0.9380)")
    assert reason(frame, 20, "R1")[1] == (
        f"units tpu.x, tpu.y are not on h200 (its units: {H200_UNITS}): nothing can price "
        "them there")
    assert reason(frame, 11, "M6")[1] == (
        "bytes 63,569,920 B are 4,194,816 B below reference qk_norm_rope_quant's 67,764,736 B "
        "(exactly its lookups)")
    # median 0.98 / 0.8548 = 114.6% of the sustained envelope, in each of the four rows
    r2 = frame.filter(pl.col("code") == "R2")
    assert r2["row"].to_list() == [21, 22, 23, 24]
    assert r2["reason"].unique().to_list() == [
        "4 of 4 rows bound by cuda_core.fp32 sustained in lines 1-27 sit above it (median "
        "114.6% of it, below theoretical): they imply 0.9800 of theoretical where h200 says "
        "0.8548; the profile looks calibrated below this card"]


def test_multi_pipe_m5_is_the_pipes_sentence(every: Analysis) -> None:
    # tensor cores 2 x (2 x 64 x 2^31) / (989.5e12 x 0.7680) = 723.424 us; exp 513.599 us
    severity, why, fix = reason(lint_columns(every), 10, "M5")
    assert severity == "warning"
    assert why.startswith("pipes at >= 50% of the binding one: tensor_core.bf16 723.424 us "
                          "(binding), sfu.fp32 513.599 us (71%)")
    assert fix == ("calibrate sfu.fp32 on the card (`roofwise calibrate`) and read this op by "
                   "its band, never by one pipe")


def test_a_sparse_peak_is_an_error_on_every_row_that_uses_it() -> None:
    doubled = ComputeUnit("tensor_core.fp16", 1979.0e12, {"burst": 0.7370}, source="datasheet")
    sparse = replace(H200, units={**H200.units, doubled.key: doubled})
    analysis = analysis_of([
        {**GEMM.to_record(time_s=2e-3), "roof": "tensor_core.fp16",
         "flops_by_unit": {"tensor_core.fp16": 2.0**40}},
        FUSED.to_record(time_s=20e-6)], machines={**MACHINES, "h200": sparse}, machine=sparse)
    frame = lint_columns(analysis)
    assert as_tuples(frame) == from_findings(analysis)
    assert reason(frame, 0, "M1") == (
        "error", "tensor_core.fp16 theoretical 1979.0 TFLOP/s is 2x the dense H100/H200 SXM "
        "datasheet figure 989.5 TFLOP/s (a sparse peak)",
        "use the dense datasheet figure (half the sparse one) and calibrate it")


def test_lint_rows_and_findings_keep_where(every: Analysis) -> None:
    per_row = lint_rows(every, [FUSED], path="runs.jsonl")
    assert [f.where for f in per_row[1]] == ["runs.jsonl:2 (sfu_heavy)"] * 2
    assert per_row[25] == []
    r2 = lint_findings(every, machine_level=True)[21][-1]
    assert (r2.code, r2.where) == ("R2", "h200 cuda_core.fp32 sustained")


def test_no_findings_is_an_empty_frame_and_empty_lint_lists() -> None:
    analysis = analysis_of([FUSED.to_record(time_s=17.5e-6, timing="kernel")])
    frame = lint_columns(analysis, machine_level=True)
    assert frame.height == 0 and frame.schema["row"] == pl.Int64
    assert json.loads(json_lines(analysis, frame)[0])["lint"] == []


def test_json_lines_read_the_columns_as_they_read_findings(every: Analysis) -> None:
    frame = lint_columns(every, [FUSED, FP8_KV], machine_level=True)
    found = lint_findings(every, [FUSED, FP8_KV], machine_level=True)
    assert json_lines(every, frame).to_list() == json_lines(every, found).to_list()
    line = json.loads(json_lines(every, frame)[1])
    assert [f["code"] for f in line["lint"]] == ["M1", "M5"]
    assert set(line["lint"][0]) == {"code", "reason", "fix"}


def test_a_lone_surrogate_in_a_unit_name_is_written_escaped() -> None:
    analysis = analysis_of([{**FUSED.to_record(time_s=20e-6), "roof": "tpu.\udc80"}],
                           machine=H200)
    frame = lint_columns(analysis)
    assert frame["reason"][0].startswith("unit tpu.\\udc80 is not on h200")
    assert lint_findings(analysis)[0][0].reason.startswith("unit tpu.\udc80 is not on h200")


def test_nbytes_text_column_matches_its_scalar() -> None:
    values = [0.0, 17_056.0, 67_764_736.0, 1e19, math.nan, -4.5, 1e18 - 128]
    for copies in (1, 1000):  # by Python, then by the engine
        column = nbytes_text_column(np.array(values * copies)).to_list()
        assert column == [nbytes_text(v) for v in values] * copies


def test_equal_to_compares_a_uniform_column_once() -> None:
    assert equal_to(uniform("h200", 3), "h200").tolist() == [True] * 3
    assert equal_to(uniform("h200", 2), "b200").tolist() == [False] * 2
    column = np.array(["a", "b", "a"], dtype=object)
    assert equal_to(column, "a").tolist() == [True, False, True]
    assert equal_to(np.array([], dtype=object), "a").tolist() == []


def test_above_envelope_sentence_keeps_its_words() -> None:
    assert above_envelope_what(math.inf, None).startswith("unbounded of the envelope ceiling")
    assert above_envelope_what(1.1, CeilingFacts("hbm", math.nan, None)).endswith(
        "calibrated below this card")
    assert above_envelope_what(1.1, CeilingFacts("hbm", 0.99, None)).endswith(
        "(implies 0.9900 of hbm theoretical, profile uncalibrated)")


def test_thousands_of_rows_with_a_second_pipe_say_each_rows_own_pipes() -> None:
    """A file of fused kernels whose transcendentals take 30-70% of the binding pipe's time
    (the seed's QK-Norm + RoPE + quant, timed many times): every row carries a second pipe.
    Their `pipes` field, reasons and M5 finding, written as columns (the engine fills each
    template), say per row what the one-row functions say; 200,000 such rows took 10 s, each
    written one at a time."""
    from roofwise.explain.reason_columns import reason_lists
    from roofwise.explain.reason_text import bound_label, pipes_text
    from roofwise.lint.findings import is_sfu_unit
    from roofwise.pricing.core import pipes_near_binding

    rng = np.random.default_rng(23)
    records = []
    for k in range(6000):
        cuda = float(rng.uniform(1e9, 5e9))
        # tensor cores for some rows: the SFU beside a contraction (and ties of two pipes)
        roof = "tensor_core.bf16" if k % 3 == 0 else "cuda_core.fp32"
        rate = 989.5e12 * 0.7680 if k % 3 == 0 else 67.0e12 * 0.8548
        sfu = cuda / rate * 4.18176e12 * float(rng.choice([0.3, 0.55, 0.7, 1.0, 1.6]))
        busiest = max(cuda / rate, sfu / 4.18176e12)
        records.append({
            "op": f"fused{k % 9}", "flops": cuda + sfu, "bytes": float(rng.uniform(1e5, 1e6)),
            "roof": roof, "time_s": busiest * float(rng.uniform(1.05, 2.5)),
            "flops_by_unit": {roof: cuda, "sfu.fp32": sfu}, "timing": "kernel",
            "device": "NVIDIA H200"})
    analysis = analysis_of(records)
    priced, judged = analysis.priced, analysis.judged
    second = np.flatnonzero((priced.flags & np.int32(Reason.SECOND_PIPE)) != 0)
    assert len(second) >= 4096  # the engine's path (fmt.ENGINE_FROM_VALUES)
    said = reason_lists(analysis)
    lines = [json.loads(line) for line in json_lines(analysis).to_list()]
    m5 = {row: (why, fix) for row, code, _, why, fix in as_tuples(lint_columns(analysis))
          if code == "M5"}
    assert priced.serial_sol_time_s is not None and judged.serial_efficiency is not None
    for i in second.tolist():
        pipes = pipes_near_binding(priced, i)
        assert len(pipes) > 1
        assert lines[i]["pipes"] == [{"unit": k, "time_s": t} for k, t in pipes]
        band = pipes_text(pipes, float(priced.sol_time_s[i]),
                          float(priced.serial_sol_time_s[i]), float(judged.efficiency[i]),
                          float(judged.serial_efficiency[i]))
        assert band in said[i]
        if lines[i]["verdict"] in ("below", "at_ceiling") and not priced.bound_memory[i]:
            assert said[i][0].endswith("compute-bound on " + bound_label(
                False, pipes, str(priced.binding_unit[i])))
        sfus = [k for k, _ in pipes if is_sfu_unit(k)] or [str(priced.binding_unit[i])]
        assert m5[i] == (band, f"calibrate {', '.join(sfus)} on the card (`roofwise calibrate`)"
                               " and read this op by its band, never by one pipe")
    others = sorted(set(range(len(records))) - set(second.tolist()))
    assert others and all(lines[i]["pipes"] is None for i in others)


def test_units_a_card_lacks_are_named_per_row_in_the_files_order() -> None:
    """Each row names the units of its own split that the card lacks (and no other), by name
    (the order the split columns are kept in): one text per row, written by the engine."""
    from roofwise.explain.reason_columns import reason_lists

    splits = [{"cuda_core.fp32": 1e9, "tpu.x": 1e8}, {"cuda_core.fp32": 1e9, "npu.y": 2e8},
              {"tpu.x": 1e8, "npu.y": 2e8, "cuda_core.fp32": 1e9}, {"cuda_core.fp32": 1e9}]
    analysis = analysis_of([{"op": "k", "flops": sum(s.values()), "bytes": 1e8,
                             "roof": "cuda_core.fp32", "time_s": 1e-3, "flops_by_unit": s,
                             "device": "NVIDIA H200"} for s in splits])
    said = reason_lists(analysis)
    lacks = [[r for r in reasons if r.startswith("flops_by_unit names units")]
             for reasons in said]
    assert lacks == [["flops_by_unit names units h200 lacks: tpu.x"],
                     ["flops_by_unit names units h200 lacks: npu.y"],
                     ["flops_by_unit names units h200 lacks: npu.y, tpu.x"], []]
