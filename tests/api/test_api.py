"""The Python top level: a few documented calls with units, short reprs for notebooks."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import roofwise

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_every_public_name_is_documented():
    for name in roofwise.__all__:
        obj = getattr(roofwise, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert (obj.__doc__ or "").strip(), f"roofwise.{name} has no docstring"


def test_price_an_operator_by_name_with_python_parameters():
    p = roofwise.price("gemm", "h200", m=4096, n=4096, k=4096, dtype="bf16")
    # 2*4096^3 FLOP at bf16 burst 989.5e12 x 0.768; bytes 3 x 4096^2 x 2
    assert p.compute_time_s == pytest.approx(2 * 4096**3 / (989.5e12 * 0.768))
    assert p.ledger.bytes == 3 * 4096 * 4096 * 2
    assert p.bound == "compute" and p.binding_unit == "tensor_core.bf16"


def test_price_a_ledger_file_and_a_ledger_object_alike():
    from_file = roofwise.price(EXAMPLES / "qk_norm_rope_quant.yaml", "h200")
    from_object = roofwise.price(roofwise.op("qk_norm_rope_quant", tokens=4096), "h200")
    assert from_file.sol_time_s == pytest.approx(from_object.sol_time_s)
    assert from_file.sol_time_s == pytest.approx(67764736 / 4502.4e9)  # 15.051 us


def test_analyze_file_picks_profiles_by_device():
    analysis = roofwise.analyze_file(EXAMPLES / "records.jsonl")
    assert len(analysis) == 8
    # one impossible (the double-counted GEMM's FLOP rate); the payload-only row above HBM's
    # theoretical rate fits the L2 in part (tests/verdicts/test_cache.py)
    assert analysis.counts()["impossible"] == 1 and analysis.counts()["blank"] == 1
    assert analysis.counts()["cache_resident"] == 1


def test_short_reprs_say_what_a_person_looks_for():
    p = roofwise.price("qk_norm_rope_quant", "h200")
    assert repr(p) == ("<LedgerPrice qk_norm_rope_quant on h200: SOL 15.051 us, memory-bound "
                       "on hbm read mix; 67.76 MB, 189.2 MFLOP, AI 2.79 FLOP/B>")
    assert repr(roofwise.machine("h100")) == ("<Machine h100-sxm: NVIDIA H100 SXM 80GB, hbm "
                                              "3.4 TB/s, 6 units (0 calibrated)>")
    analysis = roofwise.analyze_file(EXAMPLES / "records.jsonl")
    assert repr(analysis) == ("<Analysis 8 records on h200: 1 at_ceiling, 2 below, 1 anomaly, "
                              "1 latency_bound, 1 impossible, 1 blank, 1 cache_resident>")
    assert len(repr(p)) < 200 and len(repr(roofwise.machine("h200"))) < 200


def test_notebook_html_is_a_small_table():
    p = roofwise.price("qk_norm_rope_quant", "h200")
    html = p._repr_html_()
    assert html.startswith("<table>") and "15.051 us" in html and len(html) < 2000
    assert "hbm" in roofwise.machine("h200")._repr_html_()
    analysis = roofwise.analyze_file(EXAMPLES / "records.jsonl")
    page = analysis._repr_html_()
    assert page.count("<tr>") == 9  # header and 8 rows
    assert "m=8192 n=8192 k=8192" in page


def test_plot_and_report_from_python(tmp_path):
    analysis = roofwise.analyze_file(EXAMPLES / "records.jsonl")
    fig = roofwise.plot(analysis, tmp_path / "chart.svg")
    assert fig.axes and (tmp_path / "chart.svg").read_text().startswith("<?xml")
    out = roofwise.report(analysis, tmp_path / "report.html")
    assert out.read_text().count("<tr") >= 8


def test_parameters_on_a_ledger_are_refused():
    with pytest.raises(roofwise.InputError, match="parameters apply to operator names"):
        roofwise.price(EXAMPLES / "qk_norm_rope_quant.yaml", "h200", tokens=1)
