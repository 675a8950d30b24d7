"""The terminal table: worst rows first, numbers with units, readable in a pipe."""

from __future__ import annotations

import io
import re

from rich.console import Console

from roofwise.report import fmt
from roofwise.report.table import intensity, render_analysis


def _render(analysis, width):
    out = io.StringIO()
    render_analysis(analysis, Console(file=out, width=width, color_system=None), None)
    return out.getvalue()


def test_worst_rows_first_with_units(example_analysis):
    text = _render(example_analysis, 160)
    lines = [ln for ln in text.splitlines()
             if re.search(r"\b(impossible|anomaly|blank|below|latency_bound|at_ceiling)\b", ln)
             and not ln.startswith("8 records")]
    verdicts = [re.search(r"\b(impossible|anomaly|blank|below|latency_bound|at_ceiling)\b",
                          ln).group(1) for ln in lines]
    assert verdicts == ["impossible", "impossible", "anomaly", "blank", "below", "below",
                        "latency_bound", "at_ceiling"]
    # below rows: lower efficiency first (53.2% rmsnorm before 56.1% split)
    below = [ln for ln in lines if " below " in ln]
    assert "rmsnorm" in below[0] and "53.2%" in below[0] and "56.1%" in below[1]
    assert "17.5 us" in lines[-1] and "86.0%" in lines[-1]
    assert "2.00 ms" in text and "3.79 ns" in text and "5,461" in text
    # one line per row at a generous width: nothing wraps
    assert len(lines) == 8


def test_efficiency_is_a_dash_where_it_is_not_a_reading(example_analysis):
    text = _render(example_analysis, 200)
    rows = {}
    for ln in text.splitlines():
        found = re.search(r"\b(impossible|anomaly|blank|below|latency_bound|at_ceiling)\b"
                          r"\s+(\S+)", ln)
        if found and not ln.startswith("8 records"):
            rows.setdefault(found.group(1), []).append(found.group(2))
    assert rows["impossible"] == ["—", "—"]
    assert rows["latency_bound"] == ["—"] and rows["blank"] == ["—"]
    # the anomalous gemm: SOL = 2*8192^3 / (989.5e12 * 0.7680) = 1.4469 ms against 1.35 ms
    sol = 1099511627776 / (989.5e12 * 0.7680)
    assert rows["anomaly"] == [f"{sol / 1.35e-3 * 100:.1f}%"] == ["107.2%"]
    assert rows["at_ceiling"] == ["86.0%"]


def test_narrow_console_drops_low_value_columns(example_analysis):
    text = _render(example_analysis, 80)
    header = next(ln for ln in text.splitlines() if " op " in f" {ln} ")
    assert "verdict" in header and "eff." in header and "why" in header
    assert "workload" not in header and "machine" not in header
    assert max(len(ln) for ln in text.splitlines()) <= 80


def test_number_formats():
    assert fmt.seconds(13e-6, significant=3) == "13.0 us"
    assert fmt.seconds(1.35e-3, significant=3) == "1.35 ms"
    assert fmt.seconds(112e-6, significant=3) == "112 us"
    assert fmt.seconds(3.788e-9, significant=3) == "3.79 ns"
    assert fmt.seconds(999.6e-6, significant=3) == "1.00 ms"  # rounds up a prefix, not "1000 us"
    assert fmt.seconds(1e-12, significant=3) == "0.00100 ns"
    assert fmt.seconds(float("nan"), significant=3) == "—"
    # the fixed-decimals form other modules use is unchanged
    assert fmt.seconds(1.75e-5) == "17.500 us" and fmt.seconds(20e-6, 0) == "20 us"
    assert intensity(2.7925) == "2.79" and intensity(12.71) == "12.7"
    assert intensity(5461.33) == "5,461"
