"""The terminal table: worst rows first, numbers with units, readable in a pipe."""

from __future__ import annotations

import io
import re

from rich.console import Console

from roofwise.report.table import intensity, render_analysis, seconds3


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


def test_narrow_console_drops_low_value_columns(example_analysis):
    text = _render(example_analysis, 80)
    header = next(ln for ln in text.splitlines() if " op " in f" {ln} ")
    assert "verdict" in header and "eff." in header and "why" in header
    assert "workload" not in header and "machine" not in header
    assert max(len(ln) for ln in text.splitlines()) <= 80


def test_number_formats():
    assert seconds3(13e-6) == "13.0 us"
    assert seconds3(1.35e-3) == "1.35 ms"
    assert seconds3(112e-6) == "112 us"
    assert seconds3(3.788e-9) == "3.79 ns"
    assert intensity(2.7925) == "2.79" and intensity(12.71) == "12.7"
    assert intensity(5461.33) == "5,461"
