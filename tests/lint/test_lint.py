"""The linter: for each misuse M1..M8 and R1, a wrong case that fires and a right case that is
silent.

Numbers in the assertions are hand-computed from the seed (tests/fixtures/seed/NOTES.md):
case study 67,764,736 B = payload 63,569,920 B + lookups 4,194,816 B; 189,235,200 FLOPs;
the natural split 151,650,816 B; the decode step (1 token) 17,056 B; H200 HBM envelope
4800e9 x 0.9380 = 4502.4 GB/s.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from roofwise.cli import main
from roofwise.ledgers.files import ledger_to_yaml_data
from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work
from roofwise.lint import (
    ANALYSIS_CHECKS,
    CODES,
    ERROR,
    LEDGER_CHECKS,
    ROW_CHECKS,
    WARNING,
    Finding,
    decompositions,
    lint_analysis,
    lint_ledger,
    lint_machine,
    lint_rows,
)
from roofwise.ops import (
    attention_decode,
    gemm,
    qk_norm_rope_quant,
    qk_norm_rope_quant_split,
    qk_norm_rope_quant_stages,
    rmsnorm,
)
from roofwise.output.analysis import Analysis, analyze
from roofwise.profiles.load import builtin_machines
from roofwise.profiles.machine import ComputeUnit, Machine
from roofwise.records.read import columns_from_valid, validate_record
from roofwise.records.write import write_records

MACHINES = builtin_machines()
H200 = MACHINES["h200"]
FUSED = qk_norm_rope_quant()
SPLIT = qk_norm_rope_quant_split()
DECODE = qk_norm_rope_quant(tokens=1)
# 32,768 tokens: 542,114,304 B, of which 369,099,264 read and 173,015,040 written; beside the
# H200's 62,914,560 B L2, HBM moves at least (369,099,264 - 62,914,560) + (173,015,040 -
# 62,914,560) = 416,285,184 B: above 4800 GB/s under 86.73 us whatever the cache held
BIG = qk_norm_rope_quant(tokens=32768)
ROWS = 4096 * (32 + 8)
ELEMS = ROWS * 128
LOOKUP_BYTES = 2 * 128 * 2 + 2 * 4096 * 128 * 4  # two bf16 weight vectors + fp32 cos and sin


def codes(findings: list[Finding], code: str) -> list[Finding]:
    return [f for f in findings if f.code == code]


def analysis_of(records: list[dict[str, Any]], machine: Machine = H200) -> Analysis:
    rows = [validate_record(r, f"test:{n}") for n, r in enumerate(records, 1)]
    return analyze(columns_from_valid(rows), MACHINES, machine)


def test_the_case_study_is_the_seed_operator() -> None:
    assert FUSED.bytes == 67_764_736 == ELEMS * 2 + ELEMS + ROWS * 4 + LOOKUP_BYTES
    assert FUSED.lookup_bytes == LOOKUP_BYTES == 4_194_816
    assert FUSED.flops == 189_235_200 == 1155 * ROWS
    assert SPLIT.bytes == 151_650_816
    assert DECODE.bytes == 17_056 == 40 * 128 * 3 + 40 * 4 + 2 * 128 * 2 + 2 * 128 * 4


def test_every_code_is_registered() -> None:
    assert list(ROW_CHECKS) == [*(f"M{k}" for k in range(1, 9)), "R1"]
    # M8 needs a measured time
    assert list(LEDGER_CHECKS) == [*(f"M{k}" for k in range(1, 8)), "R1"]
    assert list(ANALYSIS_CHECKS) == ["R2"]  # machine-level, from many rows together
    assert set(CODES) == {*ROW_CHECKS, *ANALYSIS_CHECKS}


def test_the_package_keeps_the_public_imports() -> None:
    import roofwise.lint as lint

    for name in ("lint_analysis", "lint_ledger", "lint_machine", "Finding", "lint_rows"):
        assert callable(getattr(lint, name))


# ---------------------------------------------------------------------------- M1


def test_m1_fires_on_a_datasheet_bandwidth() -> None:
    found = codes(lint_ledger(FUSED, MACHINES["h100-sxm"]), "M1")
    assert [f.severity for f in found] == [WARNING]
    assert "3350 GB/s" in found[0].reason
    # 67,764,736 B / 3.35e12 B/s = 20.228 us: the whole SOL rests on the datasheet figure
    assert "20.228 us" in found[0].reason and "100%" in found[0].reason


def test_m1_fires_on_a_sparse_peak_and_a_sparse_source() -> None:
    doubled = ComputeUnit("tensor_core.fp16", 1979.0e12, {"burst": 0.7370}, source="datasheet")
    worded = ComputeUnit("tensor_core.bf16", 989.5e12, source="datasheet 2:4 sparse peak")
    machine = replace(H200, units={**H200.units, doubled.key: doubled, worded.key: worded})
    found = [f for f in lint_machine(machine) if f.severity == ERROR]
    assert [f.where for f in found] == ["h200 tensor_core.fp16", "h200 tensor_core.bf16"]
    assert "1979.0 TFLOP/s is 2x" in found[0].reason and "989.5 TFLOP/s" in found[0].reason
    assert "sparse" in found[1].reason
    gemm = Ledger("gemm", "tensor_core.fp16", (Tensor("a", (4096, 4096), "fp16", Role.INPUT),),
                  (Work("tensor_core.fp16", "contraction", 2 * 4096**3),))
    assert [f.severity for f in codes(lint_ledger(gemm, machine), "M1")] == [ERROR]


def test_m1_silent_on_calibrated_h200_ceilings() -> None:
    assert codes(lint_ledger(FUSED, H200), "M1") == []
    # the only datasheet ceiling the h200 profile holds is the special-function pipe
    assert [f.where for f in lint_machine(H200)] == ["h200 sfu.fp32"]
    assert "4.18 Top/s" in lint_machine(H200)[0].reason  # an exp is an op, not a FLOP


def test_m1_on_records_priced_on_an_uncalibrated_machine() -> None:
    analysis = analysis_of([FUSED.to_record(time_s=25e-6)], MACHINES["h100-sxm"])
    assert [f.code for f in lint_analysis(analysis)] == ["M1"]
    assert codes(lint_analysis(analysis_of([FUSED.to_record(time_s=17.5e-6)])), "M1") == []


# ---------------------------------------------------------------------------- M2


def test_m2_fires_on_an_elementwise_op_on_the_tensor_core_roof() -> None:
    found = codes(lint_ledger(replace(FUSED, roof="tensor_core.fp16"), H200), "M2")
    assert [f.severity for f in found] == [ERROR]
    # balance: 989.5e12 x 0.7370 / 4502.4e9 = 161.97; 67.0e12 x 0.8548 / 4502.4e9 = 12.72
    assert "189,235,200" in found[0].reason
    assert "161.97" in found[0].reason and "12.72" in found[0].reason
    assert found[0].fix.endswith("cuda_core.fp32")


def test_m2_silent_on_the_cuda_core_roof() -> None:
    assert codes(lint_ledger(FUSED, H200), "M2") == []


def test_m2_on_records() -> None:
    wrong = {**FUSED.to_record(time_s=20e-6), "roof": "tensor_core.fp16"}
    found = codes(lint_analysis(analysis_of([wrong, FUSED.to_record(time_s=20e-6)])), "M2")
    assert [f.where for f in found] == ["qk_norm_rope_quant (record 1)"]
    assert "cuda_core.fp32 189,071,360" in found[0].reason  # 1155*ROWS less the ROWS rsqrts
    # a record without flops_by_unit is judged against a reference ledger of its op
    bare = {"op": "qk_norm_rope_quant", "flops": FUSED.flops, "bytes": FUSED.bytes,
            "roof": "tensor_core.bf16", "time_s": 20e-6}
    assert len(codes(lint_analysis(analysis_of([bare]), [FUSED]), "M2")) == 1
    assert codes(lint_analysis(analysis_of([bare])), "M2") == []  # undecidable without one


# ---------------------------------------------------------------------------- M3

KV_LEN, HEADS, DIM = 4096, 32, 128
QK_OPS = 2 * HEADS * KV_LEN * DIM  # one decode query per head: QK^T then PV, 2 FLOP per MAC


def fp8_kv_decode(roof: str) -> Ledger:
    """An fp8-KV attention decode step whose contractions run in bf16 (KV upcast on load)."""
    return Ledger(
        "attention_decode_fp8kv", roof,
        (Tensor("q", (HEADS, DIM), "bf16", Role.INPUT),
         Tensor("k_cache", (KV_LEN, 8, DIM), "fp8_e4m3", Role.INPUT),
         Tensor("v_cache", (KV_LEN, 8, DIM), "fp8_e4m3", Role.INPUT),
         Tensor("out", (HEADS, DIM), "bf16", Role.OUTPUT)),
        (Work("tensor_core.bf16", "contraction", QK_OPS, "QK^T"),
         Work("tensor_core.bf16", "contraction", QK_OPS, "PV"),
         Work("cuda_core.fp32", "arithmetic", 4 * HEADS * KV_LEN, "softmax"),
         Work("sfu.fp32", "transcendental", HEADS * KV_LEN, "exp")))


def test_m3_fires_on_a_roof_that_follows_the_fp8_kv_dtype() -> None:
    found = codes(lint_ledger(fp8_kv_decode("tensor_core.fp8"), H200), "M3")
    assert [f.severity for f in found] == [ERROR]
    # QK^T and PV: 2 x (2 x 32 heads x 4096 keys x 128) = 67,108,864
    assert fp8_kv_decode("tensor_core.fp8").ops_by_class["contraction"] == 67_108_864
    assert "(67,108,864 ops)" in found[0].reason
    assert "k_cache (fp8_e4m3)" in found[0].reason and "tensor_core.bf16" in found[0].reason
    assert codes(lint_ledger(fp8_kv_decode("tensor_core.fp8"), H200), "M2") == []


def test_m3_silent_on_the_algorithms_roof() -> None:
    assert codes(lint_ledger(fp8_kv_decode("tensor_core.bf16"), H200), "M3") == []


def test_m3_on_records() -> None:
    record = {"op": "attn", "flops": 1e12, "bytes": 1e9, "roof": "tensor_core.fp8",
              "time_s": 1e-3, "flops_by_unit": {"tensor_core.bf16": 1e12}}
    found = codes(lint_analysis(analysis_of([record])), "M3")
    assert len(found) == 1 and "1,000,000,000,000" in found[0].reason
    right = {**record, "roof": "tensor_core.bf16"}
    assert codes(lint_analysis(analysis_of([right])), "M3") == []


# attention_decode defaults: batch 64, 32 q heads, 4096 cached keys, d 128, one query: 64 x 32
# x 4096 = 8,388,608 scores; QK^T and PV 2 x 128 each per score: 4,294,967,296 contraction ops
DECODE_CONTRACTION = 2 * (2 * 128 * 64 * 32 * 4096)
FP8_KV = attention_decode(kv_dtype="fp8_e4m3")


def fp8_everywhere(ledger: Ledger) -> Ledger:
    """The seed's M3: roof AND contraction work rewritten to follow the fp8 KV dtype."""
    return replace(ledger, roof="tensor_core.fp8", work=tuple(
        replace(w, unit="tensor_core.fp8") if w.op_class == "contraction" else w
        for w in ledger.work))


def test_m3_fires_against_the_reference_when_the_work_follows_the_kv_dtype() -> None:
    assert FP8_KV.roof == "tensor_core.bf16"
    assert FP8_KV.ops_by_class["contraction"] == DECODE_CONTRACTION == 4_294_967_296
    wrong = fp8_everywhere(FP8_KV)
    found = codes(lint_ledger(wrong, H200, reference=FP8_KV), "M3")
    assert [f.severity for f in found] == [ERROR]
    assert "k_cache (fp8_e4m3)" in found[0].reason
    assert "counted on tensor_core.fp8" in found[0].reason
    assert "(4,294,967,296 ops) runs on tensor_core.bf16" in found[0].reason
    # seed balance points: fp8 1979e12 x 0.6977 / 4502.4e9 = 306.67, bf16 x 0.7680 = 168.78
    assert "306.67 vs 168.78" in found[0].reason
    assert found[0].fix.endswith("tensor_core.bf16")
    # without a reference the rewritten ledger agrees with itself: nothing can tell
    assert codes(lint_ledger(wrong, H200), "M3") == []


def test_m3_silent_when_the_ledger_agrees_with_its_reference() -> None:
    assert codes(lint_ledger(FP8_KV, H200, reference=FP8_KV), "M3") == []
    assert codes(lint_ledger(FP8_KV, H200), "M3") == []


def test_m3_fires_on_a_roof_named_after_the_input_dtype() -> None:
    norm = rmsnorm()  # bf16 x and weight; all arithmetic on cuda_core.fp32, rsqrt on sfu.fp32
    found = codes(lint_ledger(replace(norm, roof="cuda_core.bf16"), None), "M3")
    # 4 ops per element of 4096 x 4096, plus 2 per row: 67,117,056 on cuda_core.fp32
    assert len(found) == 1 and "follows input(s) x (bf16)" in found[0].reason
    assert "(67,117,056 ops) runs on cuda_core.fp32" in found[0].reason
    assert codes(lint_ledger(norm, None), "M3") == []
    # a contracting op priced on the vector unit named after its q dtype
    found = codes(lint_ledger(replace(FP8_KV, roof="cuda_core.bf16"), None), "M3")
    assert len(found) == 1 and "runs on tensor_core.bf16" in found[0].reason


def test_m3_fires_on_roof_and_work_named_after_the_dtype_against_the_reference() -> None:
    norm = rmsnorm()
    moved = replace(norm, roof="cuda_core.bf16", work=tuple(
        replace(w, unit="cuda_core.bf16") if w.unit == "cuda_core.fp32" else w
        for w in norm.work))
    assert codes(lint_ledger(moved, None), "M3") == []  # consistent with itself
    found = codes(lint_ledger(moved, None, reference=norm), "M3")
    assert len(found) == 1 and "reference rmsnorm's work" in found[0].reason
    assert found[0].fix.endswith("cuda_core.fp32")
    assert codes(lint_ledger(norm, None, reference=norm), "M3") == []


def test_m3_on_records_against_a_reference() -> None:
    split = fp8_everywhere(FP8_KV).to_record(time_s=10e-3)
    bare = {k: v for k, v in split.items() if k != "flops_by_unit"}
    right = FP8_KV.to_record(time_s=10e-3)
    analysis = analysis_of([split, bare, right])
    found = codes(lint_analysis(analysis, [FP8_KV]), "M3")
    assert [f.where for f in found] == ["attention_decode (record 1)",
                                        "attention_decode (record 2)"]
    assert "matrix work counted on tensor_core.fp8" in found[0].reason
    assert all("(4,294,967,296 ops) runs on tensor_core.bf16" in f.reason for f in found)
    assert codes(lint_analysis(analysis), "M3") == []  # undecidable without the reference


# ---------------------------------------------------------------------------- M4


def test_m4_fires_on_one_call_priced_with_the_split_total() -> None:
    found = codes(lint_ledger(replace(SPLIT, calls=1), H200), "M4")
    assert [f.severity for f in found] == [ERROR]
    # AI 189,235,200 / 151,650,816 = 1.25 against 189,235,200 / 67,764,736 = 2.79
    assert "151,650,816" in found[0].reason and "67,764,736" in found[0].reason
    assert "AI 1.25" in found[0].reason and "2.79" in found[0].reason


def test_m4_fires_on_a_composed_ledger_that_carries_one_stages_tensors() -> None:
    norm, _, _ = qk_norm_rope_quant_stages()
    wrong = Ledger(FUSED.name, FUSED.roof, norm.tensors, FUSED.work, stages=FUSED.stages)
    found = codes(lint_ledger(wrong, H200), "M4")
    # norm stage: q and k read and written in bf16, plus two bf16 weight vectors of 128
    assert norm.bytes == 2 * ELEMS * 2 + 2 * 128 * 2 == 83_886_592
    assert len(found) == 1 and "83,886,592" in found[0].reason and "qk_norm" in found[0].reason


def test_m4_silent_on_fused_and_on_split() -> None:
    assert codes(lint_ledger(FUSED, H200), "M4") == []
    assert codes(lint_ledger(SPLIT, H200), "M4") == []


def test_decompositions_recount_the_split() -> None:
    fused, readings = decompositions(FUSED)
    assert fused is not None and fused.bytes == FUSED.bytes
    two_call = [r for r in readings if r.calls == 2]
    # both ways to cut three stages in two move the same bytes: one label, 151,650,816 B
    assert [r.bytes for r in two_call] == [151_650_816]
    three_call = [r for r in readings if r.calls == 3]
    assert [r.bytes for r in three_call] == [83_886_592 + 88_080_384 + 63_569_920]


def test_m4_on_records_with_a_reference() -> None:
    wrong = {**FUSED.to_record(time_s=40e-6), "bytes": SPLIT.bytes}
    del wrong["read_bytes"], wrong["write_bytes"]
    analysis = analysis_of([wrong, FUSED.to_record(time_s=17.5e-6)])
    found = codes(lint_analysis(analysis, [FUSED]), "M4")
    assert [f.where for f in found] == ["qk_norm_rope_quant (record 1)"]
    assert "151,650,816" in found[0].reason and "2-call total" in found[0].reason


QUANT_STAGE = qk_norm_rope_quant_stages()[2]


def test_m4_on_records_needs_a_stages_bytes_and_flops() -> None:
    # payload only: 2 B in + 1 B out per element + a 4 B scale per row: the same bytes as
    # the quant stage (bf16 in, fp8 out, scales), but the whole op's FLOPs
    payload = ELEMS * 2 + ELEMS + ROWS * 4
    assert QUANT_STAGE.bytes == payload == 63_569_920
    assert QUANT_STAGE.flops == 386 * ROWS == 63_242_240  # 3/elem + 2/row
    # timed as kernel durations: 20 us sits far above that floor (3 us), so only M4/M6 speak
    payload_only = {"op": FUSED.name, "flops": FUSED.flops, "bytes": payload,
                    "roof": FUSED.roof, "time_s": 20e-6, "timing": "kernel"}
    stage = {**payload_only, "flops": QUANT_STAGE.flops}
    per_row = lint_rows(analysis_of([payload_only, stage]), [FUSED])
    assert [f.code for f in per_row[0]] == ["M6"]  # left out its lookups: not a stage
    assert [f.code for f in per_row[1]] == ["M4"]
    assert "stage fp8_quant's" in per_row[1][0].reason
    assert "63,242,240" in per_row[1][0].reason


def test_m4_silent_on_a_payload_only_ledger() -> None:
    payload_only = replace(FUSED, tensors=tuple(t for t in FUSED.tensors
                                                if t.role is not Role.LOOKUP))
    assert payload_only.bytes == QUANT_STAGE.bytes
    assert codes(lint_ledger(payload_only, H200), "M4") == []
    # the quant stage's own bytes and FLOPs in the composed op's name are M4
    found = codes(lint_ledger(replace(payload_only, work=QUANT_STAGE.work), H200), "M4")
    assert len(found) == 1 and "bytes and FLOPs are stage fp8_quant's" in found[0].reason


# ---------------------------------------------------------------------------- M5

SCORES = 8192


def softmax(unit_alu: str, unit_exp: str) -> Ledger:
    return Ledger("softmax_row", unit_alu,
                  (Tensor("x", (SCORES,), "fp32", Role.INPUT),
                   Tensor("y", (SCORES,), "fp32", Role.OUTPUT)),
                  (Work(unit_alu, "arithmetic", 4 * SCORES, "scale, max, subtract, sum"),
                   Work(unit_exp, "transcendental", SCORES, "exp")))


def test_m5_fires_when_the_exp_pipe_binds_per_pipe_on_ascend() -> None:
    found = codes(lint_ledger(softmax("ascend_vector.alu", "ascend_vector.sfu"),
                              MACHINES["ascend-a5-vector"]), "M5")
    # seed: 4 x 8192 / 51 = 642.5 cycles, 8192 / 8 = 1024 cycles, serial 1666.5
    assert [f.severity for f in found] == [WARNING]
    assert "1,024.0 cycles" in found[0].reason and "642.5 cycles" in found[0].reason
    assert "1,666.5 cycles" in found[0].reason


def test_m5_fires_when_transcendentals_are_charged_like_a_multiply() -> None:
    found = codes(lint_ledger(softmax("cuda_core.fp32", "cuda_core.fp32"), H200), "M5")
    assert [f.severity for f in found] == [ERROR]
    # on sfu.fp32: 8192 / 4.18176e12 = 1.959 ns; all on cuda: 40,960 / (67e12 x 0.8548) = 0.715 ns
    assert "8,192" in found[0].reason and "sfu.fp32" in found[0].reason
    assert "1.959 ns" in found[0].reason and "0.715 ns" in found[0].reason


def test_m5_silent_when_the_sfu_does_not_bind() -> None:
    # case study: 163,840 rsqrt on sfu.fp32 take 39 ns against 3.3 us on cuda_core.fp32
    assert codes(lint_ledger(FUSED, H200), "M5") == []


def test_m5_on_records() -> None:
    record = {"op": "softmax", "flops": 5 * SCORES * 1000, "bytes": 8 * SCORES * 1000,
              "roof": "cuda_core.fp32", "time_s": 1e-4,
              "flops_by_unit": {"cuda_core.fp32": 4 * SCORES * 1000, "sfu.fp32": SCORES * 1000}}
    found = codes(lint_analysis(analysis_of([record])), "M5")
    assert len(found) == 1 and "8,192,000" in found[0].reason
    assert codes(lint_analysis(analysis_of([FUSED.to_record(time_s=17.5e-6)])), "M5") == []


# ---------------------------------------------------------------------------- M6


def test_m6_fires_on_the_case_study_without_its_lookups() -> None:
    payload_only = replace(FUSED, tensors=tuple(t for t in FUSED.tensors
                                                if t.role is not Role.LOOKUP))
    found = codes(lint_ledger(payload_only, H200, reference=FUSED), "M6")
    assert [f.severity for f in found] == [ERROR]
    assert "63,569,920" in found[0].reason and "4,194,816" in found[0].reason
    assert "exactly its lookups" in found[0].reason and "cos" in found[0].reason


def test_m6_silent_on_the_full_ledger() -> None:
    assert codes(lint_ledger(FUSED, H200, reference=FUSED), "M6") == []
    assert codes(lint_ledger(SPLIT, H200, reference=FUSED), "M6") == []  # more, not less


def test_m6_on_records() -> None:
    wrong = {**FUSED.to_record(time_s=20e-6), "bytes": FUSED.bytes - LOOKUP_BYTES}
    del wrong["read_bytes"], wrong["write_bytes"]
    found = codes(lint_analysis(analysis_of([wrong]), [FUSED]), "M6")
    assert len(found) == 1 and "4,194,816 B below" in found[0].reason
    # another shape of the same op (other FLOPs) is not judged against this reference
    decode = DECODE.to_record(time_s=4e-6)
    assert codes(lint_analysis(analysis_of([decode]), [FUSED]), "M6") == []
    assert codes(lint_analysis(analysis_of([FUSED.to_record(time_s=20e-6)]), [FUSED]),
                 "M6") == []


RMS_NAMES = {"x": "input", "y": "out", "weight": "gamma"}


def renamed_rmsnorm() -> Ledger:
    norm = rmsnorm()
    return replace(norm, tensors=tuple(replace(t, name=RMS_NAMES[t.name])
                                       for t in norm.tensors))


def test_m6_is_decided_on_bytes_not_names() -> None:
    assert [t.name for t in rmsnorm().tensors] == list(RMS_NAMES)
    assert codes(lint_ledger(renamed_rmsnorm(), None, reference=rmsnorm()), "M6") == []


def test_m6_fires_on_a_renamed_ledger_without_its_weight() -> None:
    no_gamma = replace(renamed_rmsnorm(), tensors=tuple(
        t for t in renamed_rmsnorm().tensors if t.name != "gamma"))
    found = codes(lint_ledger(no_gamma, None, reference=rmsnorm()), "M6")
    # x is 4096 x 4096 bf16 = 33,554,432 B read; the bf16 weight of 4096 is 8,192 B
    assert len(found) == 1
    assert "reads 33,554,432 B" in found[0].reason and "8,192 B below" in found[0].reason
    assert "exactly its lookups" in found[0].reason
    assert found[0].reason.endswith("not found here by name or size: weight")


def test_m6_fires_on_lookups_read_as_inputs() -> None:
    as_input = replace(FUSED, tensors=tuple(
        replace(t, role=Role.INPUT) if t.role is Role.LOOKUP else t for t in FUSED.tensors))
    assert as_input.read_bytes == FUSED.read_bytes
    found = codes(lint_ledger(as_input, None, reference=FUSED), "M6")
    assert len(found) == 1 and found[0].reason.startswith("lookups 0 B")
    assert "4,194,816 B in 4 lookup tensor(s)" in found[0].reason


# ---------------------------------------------------------------------------- M7


def test_m7_fires_on_the_decode_step() -> None:
    found = codes(lint_analysis(analysis_of([DECODE.to_record(time_s=4e-6)])), "M7")
    assert [f.severity for f in found] == [WARNING]
    # SOL 17,056 B / 4502.4 GB/s = 3.788 ns; efficiency 3.788 ns / 4 us = 0.1%
    assert "3.788 ns" in found[0].reason and "4.000 us" in found[0].reason
    # the finding is what (the time is 4 / 3 = 1.33 kernel floors) and the fix, each once
    assert "is 1.33 x the kernel floor 3.000 us" in found[0].reason
    assert found[0].fix == "give each launch more work (batch, fuse)"
    assert "batch" not in found[0].reason
    assert len(codes(lint_ledger(DECODE, H200), "M7")) == 1


def test_ledger_m7_says_what_a_timed_row_will_read() -> None:
    # the decode step's SOL (3.788 ns) is under every floor; the finding's claim holds on rows:
    # events at 40 us (2 x the 20 us floor) is latency_bound, at 60 us (3 x) a `below` split
    (found,) = codes(lint_ledger(DECODE, H200), "M7")
    assert "a time up to twice its method's floor reads latency_bound" in found.reason
    at_two = analysis_of([{**DECODE.to_record(time_s=40e-6), "timing": "events"}])
    at_three = analysis_of([{**DECODE.to_record(time_s=60e-6), "timing": "events"}])
    assert at_two.row(0)["verdict"] == "latency_bound"
    assert at_three.row(0)["verdict"] == "below"
    # the 40 us above the floor may be the kernel or host overhead: the reason says how to
    # tell them apart, not that the kernel is slow
    assert any("is that floor plus 40.000 us more" in r and r.endswith(
        "; re-time with kernel durations to tell the kernel's own time from overhead above "
        "the floor") for r in at_three.row(0)["reasons"])


def test_m7_silent_on_the_prefill() -> None:
    assert codes(lint_analysis(analysis_of([FUSED.to_record(time_s=17.5e-6)])), "M7") == []
    assert codes(lint_ledger(FUSED, H200), "M7") == []


# ---------------------------------------------------------------------------- M8


def test_m8_fires_above_theoretical_bandwidth() -> None:
    assert (BIG.bytes, BIG.read_bytes, BIG.write_bytes) == (542_114_304, 369_099_264,
                                                          173_015_040)
    found = codes(lint_analysis(analysis_of([BIG.to_record(time_s=80e-6)])), "M8")
    # 542,114,304 B / 80 us = 6776.4 GB/s; HBM's least share 416,285,184 B / 80 us = 5203.6
    # GB/s > 4800 GB/s: impossible with the L2's help too
    assert [f.severity for f in found] == [ERROR]
    assert "6776.4 GB/s" in found[0].reason and "4800 GB/s" in found[0].reason


def test_m8_warns_above_theoretical_bandwidth_that_the_l2_may_explain() -> None:
    """67,764,736 B in 14 us is 4840.3 GB/s, above the H200's 4800 GB/s HBM; its 46,137,856 B
    of reads and 21,626,880 B of writes each fit in the 62,914,560 B L2, so the time is
    possible only with the L2 warm (or the accounting is wrong): a warning, not an error."""
    found = codes(lint_analysis(analysis_of([FUSED.to_record(time_s=14.0e-6)])), "M8")
    assert [f.severity for f in found] == [WARNING]
    assert found[0].reason == (
        "67,764,736 B in 14.000 us is 4840.3 GB/s, above hbm theoretical 4800 GB/s; with a "
        "working set of 67.76 MB larger than the 62.91 MB l2: possible only if that cache held "
        "nearly all it can of what the call reads before it and of what it writes after")
    assert "flushed" in found[0].fix
    # at 100 us the big call needs 416,285,184 B / 100 us = 4162.9 GB/s of HBM: a warning too
    big = codes(lint_analysis(analysis_of([BIG.to_record(time_s=100e-6)])), "M8")
    assert [f.severity for f in big] == [WARNING]


def test_m8_above_the_envelope_but_below_theoretical_is_two_readings() -> None:
    found = codes(lint_analysis(analysis_of([FUSED.to_record(time_s=14.2e-6)])), "M8")
    # SOL 15.051 us / 14.2 us = 106.0%; 67,764,736 B / 14.2 us = 4772.2 GB/s is below 4800:
    # possible, so either the accounting is wrong or the card beats the profile's 0.9380 of
    # theoretical: it implies 4772.2 / 4800 = 0.9942
    assert [f.severity for f in found] == [WARNING]
    assert "106.0% of the envelope ceiling: above 105% yet below theoretical" in found[0].reason
    assert "implies 0.9942 of hbm read mix theoretical, profile 0.9380" in found[0].reason
    assert "roofwise calibrate" in found[0].fix and "recount" in found[0].fix


def test_m8_silent_at_17_5_us() -> None:
    analysis = analysis_of([FUSED.to_record(time_s=17.5e-6)])
    assert analysis.verdict_name(0) == "at_ceiling"  # 15.051 / 17.5 = 86%
    assert lint_analysis(analysis) == []


GEMM = gemm(8192, 8192, 8192)  # 2 x 8192^3 = 2^40 FLOP on tensor_core.bf16


def test_m8_fires_above_a_theoretical_compute_rate() -> None:
    assert GEMM.flops == 2**40
    doubled = {**GEMM.to_record(time_s=2e-3), "flops": 2.0**41}
    found = codes(lint_analysis(analysis_of([doubled])), "M8")
    # 2^41 / 2 ms = 1099.51 T/s, above the 989.5 T/s datasheet rate
    assert [f.severity for f in found] == [ERROR]
    assert found[0].reason == ("tensor_core.bf16 at 1099.51 TFLOP/s, above its theoretical "
                               "989.50 TFLOP/s")


def test_m8_silent_below_the_compute_ceiling() -> None:
    # 2^40 / 1.5 ms = 733.0 T/s; SOL 2^40 / (989.5e12 x 0.7680) = 1.447 ms: 96.5%
    analysis = analysis_of([GEMM.to_record(time_s=1.5e-3)])
    assert analysis.verdict_name(0) == "at_ceiling"
    assert codes(lint_analysis(analysis), "M8") == []


# ---------------------------------------------------------------------------- R1


def tpu_typo() -> Ledger:
    return replace(FUSED, work=tuple(replace(w, unit="tpu.x") if w.unit == "cuda_core.fp32"
                                     else w for w in FUSED.work), stages=())


@pytest.mark.parametrize(("ledger", "machine", "missing"), [
    (tpu_typo(), "h200", "unit tpu.x is"),
    (gemm(dtype="fp8_e4m3"), "a100-sxm", "unit tensor_core.fp8 is"),
    (rmsnorm(), "h20", "units cuda_core.fp32, sfu.fp32 are"),
])
def test_r1_fires_on_a_unit_the_machine_lacks(ledger: Ledger, machine: str,
                                              missing: str) -> None:
    found = codes(lint_ledger(ledger, MACHINES[machine]), "R1")
    assert [f.severity for f in found] == [ERROR]
    assert found[0].reason.startswith(f"{missing} not on {machine} (its units: ")
    assert found[0].fix == "declare a unit the profile has, or use a profile that has it"


def test_r1_silent_on_units_the_machine_has() -> None:
    assert codes(lint_ledger(FUSED, H200), "R1") == []
    assert codes(lint_ledger(gemm(dtype="fp8_e4m3"), H200), "R1") == []
    assert codes(lint_ledger(tpu_typo(), None), "R1") == []  # no machine, nothing to check


def test_r1_on_records() -> None:
    typo = {**FUSED.to_record(time_s=20e-6), "roof": "tpu.x"}
    split = {**FUSED.to_record(time_s=20e-6),
             "flops_by_unit": {"cuda_core.fp32": 1.0e8, "tpu.y": FUSED.flops - 1.0e8}}
    # kernel durations: SOL 15 us is above that floor (3 us), so M7 stays out of it
    good = FUSED.to_record(time_s=20e-6, timing="kernel")
    per_row = lint_rows(analysis_of([typo, split, good]))
    assert [[f.code for f in row] for row in per_row] == [["R1"], ["R1"], []]
    assert per_row[0][0].reason.startswith("unit tpu.x is not on h200")
    assert per_row[1][0].reason.startswith("unit tpu.y is not on h200")


def test_where_names_file_and_line() -> None:
    analysis = analysis_of([FUSED.to_record(time_s=17.5e-6), FUSED.to_record(time_s=14e-6)])
    found = lint_analysis(analysis, path="runs.jsonl")
    assert [f.where for f in found] == ["runs.jsonl:2 (qk_norm_rope_quant)"]


# ---------------------------------------------------------------------------- CLI


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {"bad": tmp_path / "bad.jsonl", "good": tmp_path / "good.jsonl",
           "ledger": tmp_path / "tc.yaml", "reference": tmp_path / "ref.yaml",
           "broken": tmp_path / "broken.jsonl"}
    write_records(out["bad"], [BIG.to_record(time_s=80e-6, device="NVIDIA H200"),
                               DECODE.to_record(time_s=4e-6, device="NVIDIA H200")])
    write_records(out["good"], [FUSED.to_record(time_s=17.5e-6, device="NVIDIA H200")])
    out["ledger"].write_text(yaml.safe_dump(ledger_to_yaml_data(
        replace(FUSED, roof="tensor_core.fp16"))))
    out["reference"].write_text(yaml.safe_dump(ledger_to_yaml_data(FUSED)))
    out["broken"].write_text("{not json\n")
    return out


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_cli_exit_1_on_errors(files: dict[str, Path], capsys: pytest.CaptureFixture[str]
                              ) -> None:
    assert main(["lint", "--json", str(files["bad"])]) == 1
    found = json_lines(capsys.readouterr().out)
    assert [(f["code"], f["severity"]) for f in found] == [("M8", "error"), ("M7", "warning")]
    assert found[0]["where"] == f"{files['bad']}:1 (qk_norm_rope_quant)"


def test_cli_exit_0_when_clean(files: dict[str, Path], capsys: pytest.CaptureFixture[str]
                               ) -> None:
    assert main(["lint", str(files["good"])]) == 0
    assert "clean" in capsys.readouterr().out
    assert main(["lint", "--machine", "h200", str(files["reference"])]) == 0


def test_cli_ledger_yaml_and_reference(files: dict[str, Path],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--json", "-m", "h200", str(files["ledger"])]) == 1
    assert [f["code"] for f in json_lines(capsys.readouterr().out)] == ["M2"]
    assert main(["lint", "--json", "--reference", str(files["reference"]),
                 str(files["good"])]) == 0


def test_cli_machine_only_warns(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--json", "--machine", "h100-sxm"]) == 0
    found = json_lines(capsys.readouterr().out)
    assert {f["code"] for f in found} == {"M1"} and len(found) == 7  # hbm + six units


@pytest.mark.parametrize("name", ["broken", "missing", "unknown"])
def test_cli_exit_2_on_bad_input(files: dict[str, Path], tmp_path: Path, name: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = {"broken": files["broken"], "missing": tmp_path / "nope.jsonl",
            "unknown": tmp_path / "x.txt"}[name]
    assert main(["lint", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("roofwise: error:") and len(err.strip().splitlines()) == 1


def test_analyze_shows_lint(files: dict[str, Path], capsys: pytest.CaptureFixture[str]
                            ) -> None:
    assert main(["analyze", "--json", str(files["bad"])]) == 0
    rows = json_lines(capsys.readouterr().out)
    assert [[f["code"] for f in row["lint"]] for row in rows] == [["M8"], ["M7"]]
    assert "6776.4 GB/s" in rows[0]["lint"][0]["reason"]
    assert main(["analyze", str(files["bad"])]) == 0
    out = capsys.readouterr().out
    assert "lint: 2 finding(s)" in out and "M8 " in out and "M7 " in out


def test_cli_says_what_was_skipped_only_for_ledgers(
        files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = tmp_path / "h200.yaml"
    profile.write_text(Path(H200.path or "").read_text())
    assert main(["lint", "--json", str(profile)]) == 0
    out, err = capsys.readouterr()
    assert [f["where"] for f in json_lines(out)] == ["h200 sfu.fp32"]
    assert err == ""
    assert main(["lint", str(files["reference"])]) == 0
    assert "M1, M5, M7 and R1 of 1 ledger(s) need a machine" in capsys.readouterr().err


def test_cli_r1_on_a_typo_unit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(ledger_to_yaml_data(tpu_typo())))
    assert main(["lint", "--json", "-m", "h200", str(path)]) == 1
    found = json_lines(capsys.readouterr().out)
    assert [(f["code"], f["where"]) for f in found] == [("R1", str(path))]
    assert main(["lint", "--json", "-m", "h200", str(EXAMPLES / "qk_norm_rope_quant.yaml")]) == 0


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_lint_examples_with_the_reference(capsys: pytest.CaptureFixture[str]) -> None:
    records = str(EXAMPLES / "records.jsonl")
    reference = str(EXAMPLES / "qk_norm_rope_quant.yaml")
    assert main(["lint", "--json", "--reference", reference, records]) == 1
    by_line: dict[int, list[str]] = {}
    for f in json_lines(capsys.readouterr().out):
        by_line.setdefault(int(f["where"].split(":")[-1].split(" ")[0]), []).append(f["code"])
    # line 2: the two-kernel split total; line 4: payload only (bytes = the quant stage's,
    # FLOPs the whole op's) read in 13 us, 4890.0 GB/s: M6 and M8, not M4
    assert by_line[2] == ["M4"] and by_line[4] == ["M6", "M8"]


def test_analyze_reference_feeds_lint(capsys: pytest.CaptureFixture[str]) -> None:
    records = str(EXAMPLES / "records.jsonl")
    reference = str(EXAMPLES / "qk_norm_rope_quant.yaml")
    assert main(["analyze", "--json", "--reference", reference, records]) == 0
    rows = json_lines(capsys.readouterr().out)
    assert [f["code"] for f in rows[1]["lint"]] == ["M4"]
    assert [f["code"] for f in rows[3]["lint"]] == ["M6", "M8"]
    assert main(["analyze", "--json", records]) == 0  # without it, no reference checks
    rows = json_lines(capsys.readouterr().out)
    assert rows[1]["lint"] == [] and [f["code"] for f in rows[3]["lint"]] == ["M8"]
    assert main(["analyze", "--reference", reference, records]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert "lint: 6 finding(s)" in out
    assert "M4 " in out and "M6 " in out and "exactly its lookups" in out


def test_r1_names_the_stage_whose_roof_is_a_typo() -> None:
    from dataclasses import replace

    from roofwise.ledgers.ledger import fuse
    from roofwise.ops import qk_norm_rope_quant_stages

    norm, rope, quant = qk_norm_rope_quant_stages()
    ledger = fuse("typo", [norm, replace(rope, roof="cuda_core.fp33"), quant],
                  roof="cuda_core.fp32")
    found = codes(lint_ledger(ledger, MACHINES["h200"], where="t.yaml"), "R1")
    assert [(f.where, f.severity) for f in found] == [("t.yaml: stages[1].roof", ERROR)]
    assert "unit cuda_core.fp33 is not on h200" in found[0].reason
