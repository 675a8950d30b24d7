"""Above the envelope vs above theoretical, the stale-profile finding (R2), and every pipe
that matters named with the serial-sum band (issue 8, sections 2 and 3).

Numbers come from the H200 profile: cuda_core.fp32 67.0e12 x 0.8548 (sustained), hbm
4800 GB/s x 0.9380 (read), tensor_core.bf16 989.5e12 x 0.7680 (burst), sfu.fp32 4.18176e12
(datasheet-derived).
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from roofwise.lint import lint_analysis, lint_ledger
from roofwise.ops.attention import attention
from roofwise.output.analysis import Analysis, analyze
from roofwise.profiles.load import builtin_machines
from roofwise.records.read import columns_from_valid, validate_record
from roofwise.render.html import report_html
from roofwise.render.table import render_analysis

MACHINES = builtin_machines()
H200 = MACHINES["h200"]
FP32_PEAK = 67.0e12


def analysis_of(records: list[dict[str, Any]]) -> Analysis:
    rows = [validate_record(r, f"test:{n}") for n, r in enumerate(records, 1)]
    return analyze(columns_from_valid(rows), MACHINES, H200)


def fma_row(fraction_of_peak: float, time_s: float) -> dict[str, Any]:
    """An FMA-bound row that runs at `fraction_of_peak` of the FP32 theoretical rate."""
    return {"op": "fma", "flops": FP32_PEAK * fraction_of_peak * time_s, "bytes": 1e6,
            "roof": "cuda_core.fp32", "time_s": time_s, "timing": "kernel"}


# ---------------------------------------------------------------- section 2


def test_above_envelope_below_theoretical_gives_both_readings() -> None:
    # 0.98 of theoretical where the profile says 0.8548: 0.98 / 0.8548 = 114.6% of the
    # envelope, an anomaly, but not impossible
    a = analysis_of([fma_row(0.98, 1e-3)])
    row = a.row(0)
    assert row["verdict"] == "anomaly"
    assert row["efficiency"] == pytest.approx(0.98 / 0.8548)
    assert row["reasons"][0] == (
        "114.6% of the envelope ceiling: above 105% yet below theoretical, so bytes, FLOPs or "
        "timer are wrong, or the profile is calibrated below this card (implies 0.9800 of "
        "cuda_core.fp32 sustained theoretical, profile 0.8548): recount, or run `roofwise "
        "calibrate`")
    (m8,) = [f for f in lint_analysis(a) if f.code == "M8"]
    assert m8.severity == "warning" and "roofwise calibrate" in m8.fix
    # the finding says what, the fix what to do: neither repeats the other
    assert "`roofwise calibrate`" not in m8.reason and "0.9800" in m8.reason


def test_above_theoretical_stays_impossible_and_an_error() -> None:
    a = analysis_of([fma_row(1.10, 1e-3)])
    row = a.row(0)
    assert row["verdict"] == "impossible"
    assert row["reasons"][0] == ("cuda_core.fp32 at 73.70 TFLOP/s exceeds its theoretical "
                                 "67.00 TFLOP/s: physically impossible")
    assert "calibrated below this card" not in " ".join(row["reasons"])
    (m8,) = [f for f in lint_analysis(a) if f.code == "M8"]
    assert m8.severity == "error" and "calibrate" not in m8.fix


def test_stale_profile_fires_on_a_set_of_rows_above_one_units_envelope() -> None:
    # four FMA rows at 0.975-0.985 of theoretical: median 0.98 / 0.8548 = 114.6%
    rows = [fma_row(f, t) for f, t in ((0.975, 1e-3), (0.98, 2e-3), (0.98, 4e-3),
                                       (0.985, 8e-3))]
    analysis = analysis_of(rows)
    found = [f for f in lint_analysis(analysis) if f.code == "R2"]
    assert len(found) == 1
    html = report_html(analysis, source="fma.jsonl")  # the report's lint section too
    assert "the profile looks calibrated below this card" in html
    assert found[0].where == "h200 cuda_core.fp32 sustained"
    assert found[0].reason.startswith(
        "4 of 4 rows bound by cuda_core.fp32 sustained sit above it (median 114.6% of it, "
        "below theoretical): they imply 0.9800 of theoretical where h200 says 0.8548")


def test_stale_profile_silent_on_one_noisy_row_and_on_a_minority() -> None:
    assert [f for f in lint_analysis(analysis_of([fma_row(0.98, 1e-3)])) if f.code == "R2"] == []
    # three above, four at 0.80 of theoretical (93.6% of the envelope): not most of them
    rows = [fma_row(0.98, 1e-3)] * 3 + [fma_row(0.80, 1e-3)] * 4
    assert [f for f in lint_analysis(analysis_of(rows)) if f.code == "R2"] == []


def test_stale_profile_reads_the_envelope_not_the_priced_regime() -> None:
    # GEMMs at 0.74 of 989.5 T/s priced on the sustained regime (0.7077): 104.6% of it, but
    # below the burst envelope (0.7680): a burst-length run, not a stale profile
    rows = [{"op": "gemm", "flops": 989.5e12 * 0.74 * t, "bytes": 1e8,
             "roof": "tensor_core.bf16", "time_s": t, "timing": "kernel"}
            for t in (1e-3, 1.5e-3, 2e-3)]
    validated = [validate_record(r, f"t:{n}") for n, r in enumerate(rows, 1)]
    sustained = analyze(columns_from_valid(validated), MACHINES, H200, regime="sustained")
    assert sustained.judged.efficiency[0] == pytest.approx(0.74 / 0.7077)
    assert [f for f in lint_analysis(sustained) if f.code == "R2"] == []


def test_stale_profile_on_a_memory_mix_and_a_burst_regime() -> None:
    # HBM: 0.99 of 4800 GB/s where the read mix says 0.9380 (105.5% each)
    hbm = [{"op": "read", "flops": 0, "bytes": 4.8e12 * 0.99 * t, "roof": "cuda_core.fp32",
            "time_s": t, "timing": "kernel"} for t in (1e-3, 2e-3, 3e-3)]
    # GEMM burst a few percent above the profile's: 0.79 of 989.5 T/s where burst is 0.7680
    # (102.9%: not an anomaly, but consistently above)
    gemm = [{"op": "gemm", "flops": 989.5e12 * 0.79 * t, "bytes": 1e8,
             "roof": "tensor_core.bf16", "time_s": t, "timing": "kernel"}
            for t in (1e-3, 1.5e-3, 2e-3)]
    found = {f.where: f for f in lint_analysis(analysis_of(hbm + gemm)) if f.code == "R2"}
    assert set(found) == {"h200 hbm read mix", "h200 tensor_core.bf16 burst"}
    assert "imply 0.9900 of theoretical where h200 says 0.9380" in found[
        "h200 hbm read mix"].reason
    assert "imply 0.7900 of theoretical where h200 says 0.7680" in found[
        "h200 tensor_core.bf16 burst"].reason


# ---------------------------------------------------------------- section 3

# Attention, one sequence of 8192, no mask, 32 heads (8 KV heads) of 64: 2^31 scores.
SCORES = 32 * 8192 * 8192
TC_S = 2 * (2 * 64 * SCORES) / (989.5e12 * 0.7680)  # QK^T and PV: 723.4 us
SFU_S = (SCORES + 32 * 8192) / 4.18176e12  # exp per score, 1/row sum per row: 513.6 us
CUDA_S = (4 * SCORES + 32 * 8192 * 64) / (67.0e12 * 0.8548)  # 150.3 us
SERIAL_S = TC_S + SFU_S + CUDA_S  # 1.387 ms


def attention_row(time_s: float, head_dim: int = 64) -> dict[str, Any]:
    ledger = attention(batch=1, q_len=8192, kv_len=8192, q_heads=32, kv_heads=8,
                       head_dim=head_dim, causal=False)
    return ledger.to_record(time_s=time_s, timing="kernel")


def test_attention_names_both_pipes_with_the_serial_band() -> None:
    assert pytest.approx(723.4e-6, rel=1e-4) == TC_S
    assert pytest.approx(513.6e-6, rel=1e-4) == SFU_S  # 71% of the tensor cores' time
    a = analysis_of([attention_row(1.0e-3)])
    row = a.row(0)
    assert row["verdict"] == "below"
    assert [p["unit"] for p in row["pipes"]] == ["tensor_core.bf16", "sfu.fp32"]
    assert row["pipes"][1]["time_s"] == pytest.approx(SFU_S)
    assert row["serial_sol_time_s"] == pytest.approx(SERIAL_S)
    assert row["efficiency_band"] == pytest.approx([TC_S / 1e-3, SERIAL_S / 1e-3])
    assert row["reasons"][0] == "72.3% of SOL; compute-bound on tensor_core.bf16 + sfu.fp32"
    assert row["reasons"][1] == (
        "pipes at >= 50% of the binding one: tensor_core.bf16 723.424 us (binding), sfu.fp32 "
        "513.599 us (71%); the call measures between the overlapped bound 723.424 us and the "
        "serial sum 1.387 ms: efficiency 72.3% overlapped, 138.7% serial (over 100%: the "
        "pipes overlapped)")
    m5 = [f for f in lint_analysis(a) if f.code == "M5"]
    assert len(m5) == 1 and "sfu.fp32 513.599 us (71%)" in m5[0].reason
    # the fix is the action only: the band is in the reason, not said again
    assert m5[0].fix == ("calibrate sfu.fp32 on the card (`roofwise calibrate`) and read this "
                         "op by its band, never by one pipe")
    # the terminal table's bound column and efficiency band
    out = io.StringIO()
    render_analysis(a, Console(file=out, width=200, color_system=None), None)
    assert "tensor_core.bf16 + sfu.fp32" in out.getvalue()
    assert "72.3%-138.7%" in out.getvalue()
    # the HTML row details
    html = report_html(a, source="attn.jsonl")
    assert "compute (tensor_core.bf16 + sfu.fp32)" in html
    assert "efficiency band" in html and "72.3%-138.7%" in html


def test_a_second_pipe_under_half_is_not_named() -> None:
    # head_dim 128: the tensor cores take 1.447 ms, the SFU still 513.6 us (35%)
    row = analysis_of([attention_row(2.0e-3, head_dim=128)]).row(0)
    assert row["pipes"] is None and row["efficiency_band"] is None
    assert row["reasons"][0].endswith("compute-bound on tensor_core.bf16")


def test_ledger_m5_names_the_sfu_when_it_does_not_bind() -> None:
    ledger = attention(batch=1, q_len=8192, kv_len=8192, q_heads=32, kv_heads=8,
                       head_dim=64, causal=False)
    (m5,) = [f for f in lint_ledger(ledger, H200) if f.code == "M5"]
    assert m5.reason == (
        "sfu.fp32 takes >= 50% of the binding pipe's time: tensor_core.bf16 723.424 us "
        "(binding), sfu.fp32 513.599 us (71%); the call runs between the overlapped bound "
        "723.424 us and the serial sum 1.387 ms")


def test_analyze_json_carries_the_stale_profile_finding_in_its_rows(tmp_path, capsys) -> None:
    """R2 is machine-level, yet `analyze --json` is one object per record: each row bound by
    the stale ceiling carries it in its `lint`, beside its own findings."""
    import json

    from roofwise.cli import main

    # three FMA rows at 0.975 / 0.98 / 0.978 of theoretical and one at 0.80: 3 of 4 above the
    # 0.8548 envelope, median 0.978 / 0.8548 = 114.4%, implying 0.9780 of theoretical
    rows = [fma_row(f, 1e-3) for f in (0.975, 0.98, 0.978, 0.80)]
    path = tmp_path / "fma.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["analyze", str(path), "--json", "-m", "h200"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(out) == 4  # one object per record, no summary line
    r2 = [[f for f in row["lint"] if f["code"] == "R2"] for row in out]
    assert all(len(found) == 1 for found in r2)
    assert r2[0][0]["reason"].startswith(  # the lines it counted: the file is written a
        # batch at a time, each batch's rows carrying that batch's R2
        "3 of 4 rows bound by cuda_core.fp32 sustained in lines 1-4 sit above it (median "
        "114.4% of it, "
        "below theoretical): they imply 0.9780 of theoretical where h200 says 0.8548")
    assert [f["code"] for f in out[0]["lint"]] == ["M8", "R2"]  # its own finding first
    assert [f["code"] for f in out[3]["lint"]] == ["R2"]  # 93.6%: no M8, but read on it too
    # one noisy row among rows at the envelope: no R2 anywhere
    path.write_text("".join(json.dumps(r) + "\n" for r in
                            [fma_row(f, 1e-3) for f in (0.98, 0.80, 0.80, 0.80)]))
    main(["analyze", str(path), "--json", "-m", "h200"])
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(out) == 4 and not any(f["code"] == "R2" for row in out for f in row["lint"])


def test_serial_efficiency_over_100_percent_is_said_to_be_overlap() -> None:
    # at 1.0 ms the call beats the serial sum (1.387 ms): the pipes overlapped, said so; at
    # 1.5 ms it is slower than the serial sum (92.5%) and nothing is added
    fast = analysis_of([attention_row(1.0e-3)]).row(0)["reasons"][1]
    slow = analysis_of([attention_row(1.5e-3)]).row(0)["reasons"][1]
    assert fast.endswith("138.7% serial (over 100%: the pipes overlapped)")
    assert slow.endswith("48.2% overlapped, 92.5% serial")
