"""The terminal table: worst rows first, numbers with units, readable in a pipe."""

from __future__ import annotations

import io
import re

from rich.console import Console

from roofwise.report import fmt
from roofwise.report.fmt import intensity
from roofwise.report.table import reason_lines, render_analysis, worst_first


def _render(analysis, width):
    out = io.StringIO()
    render_analysis(analysis, Console(file=out, width=width, color_system=None), None)
    return out.getvalue()


def test_worst_rows_first_with_units(example_analysis):
    text = _render(example_analysis, 160)
    # a row's first line starts with its op; wrapped reasons continue on indented lines
    lines = [ln for ln in text.splitlines() if re.match(r" (qk_norm|gemm|rmsnorm|softmax)", ln)]
    verdicts = [re.search(r"\b(impossible|anomaly|blank|below|latency_bound|at_ceiling)\b",
                          ln).group(1) for ln in lines]
    assert verdicts == ["impossible", "impossible", "anomaly", "blank", "below", "below",
                        "latency_bound", "at_ceiling"]
    # below rows: lower efficiency first (53.2% rmsnorm before 56.1% split)
    below = [ln for ln, v in zip(lines, verdicts, strict=True) if v == "below"]
    assert "rmsnorm" in below[0] and "53.2%" in below[0] and "56.1%" in below[1]
    assert "17.5 us" in lines[-1] and "86.0%" in lines[-1]
    assert "2.00 ms" in text and "3.79 ns" in text and "5,461" in text
    assert len(lines) == 8


def _why_column(text):
    """The `why` cells, joined across wrapped lines, keyed by each row's first line."""
    lines = text.splitlines()
    header = next(ln for ln in lines if ln.rstrip().endswith("why"))
    start = header.index("why")
    cells: list[str] = []
    for ln in lines[lines.index(header) + 2:]:
        if not ln.strip():
            continue
        part = ln[start:].strip()
        if ln[:start].strip():
            cells.append(part)
        elif cells:
            cells[-1] += " " + part
    return header, cells


def test_why_keeps_the_whole_first_reason_at_160_columns(example_analysis):
    """The reason is the most useful column: workload gives way before it is cut."""
    text = _render(example_analysis, 160)
    header, cells = _why_column(text)
    assert "workload" not in header and "bound" in header and "AI" in header
    first = [example_analysis.reasons(int(i))[0] for i in worst_first(example_analysis)]
    assert cells == first  # every reason whole, none cut with "…"
    assert all("…" not in c for c in cells)
    latency = first[6]
    assert latency.startswith("SOL 3.788 ns") and len(latency) > 150  # so it had to wrap
    assert max(len(ln) for ln in text.splitlines()) <= 160


def test_why_is_cut_only_on_narrow_consoles(example_analysis):
    text = _render(example_analysis, 90)
    _, cells = _why_column(text)
    assert len(cells) == 8 and len(text.splitlines()) < 14  # one line per row, no wrapping
    assert cells[0] == "bytes/time 4890.0 GB/…"  # 22 characters: the room left at 90
    assert max(len(ln) for ln in text.splitlines()) <= 90


def test_workload_is_truncated_to_twenty_characters_on_wide_consoles(example_analysis):
    text = _render(example_analysis, 240)
    header, cells = _why_column(text)
    assert "workload" in header
    row = next(ln for ln in text.splitlines() if "at_ceiling" in ln and "86.0%" in ln)
    assert '{"tokens":4096,"q_h…' in row  # 19 characters and the ellipsis
    assert all("…" not in c for c in cells)


def test_reason_lines_wrap_then_cut():
    assert reason_lines("aa bb cc dd", 5, 3) == ["aa bb", "cc dd"]
    assert reason_lines("aa bb cc dd ee ff", 5, 2) == ["aa bb", "cc d…"]
    assert reason_lines("abcdefghij", 4, 1) == ["abc…"]
    assert reason_lines("", 10, 2) == [""]


def test_markup_in_plain_cells_is_shown_not_interpreted():
    from roofwise.analysis import analyze
    from roofwise.profiles import builtin_machines
    from roofwise.records import columns_from_valid
    rows = [{"op": "[bold]x[/]", "workload": {"k": [1, 2]}, "device": "NVIDIA H200",
             "flops": 1e9, "bytes": 1e9, "roof": "cuda_core.fp32", "time_s": 1e-3,
             "timing": "device"}]
    text = _render(analyze(columns_from_valid(rows), builtin_machines()), 240)
    assert "[bold]x[/]" in text and '{"k":[1,2]}' in text


def test_huge_and_infinite_numbers_never_show_as_walls_of_digits():
    from roofwise.analysis import analyze
    from roofwise.profiles import builtin_machines
    from roofwise.records import columns_from_valid
    rows = [{"op": "huge", "device": "NVIDIA H200", "flops": 1e300, "bytes": 1.0,
             "roof": "cuda_core.fp32", "time_s": 2.2e295, "timing": "device"}]
    text = _render(analyze(columns_from_valid(rows), builtin_machines()), 200)
    row = next(ln for ln in text.splitlines() if ln.startswith(" huge"))
    sol = 1e300 / (67.0e12 * 0.8548)  # compute-bound on fp32: 1.746e286 s
    assert row.split()[3:7] == ["2.2e+295", "s", f"{sol:.3g}", "s"] == [
        "2.2e+295", "s", "1.75e+286", "s"]
    assert " 1e+300 " in row  # intensity: 1e300 FLOP over 1 B
    assert not re.search(r"\d{8}", row) and "inf" not in row


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


def test_huge_tiny_and_non_finite_formats():
    assert fmt.seconds(2.2e295) == "2.2e+295 s"
    assert fmt.seconds(2.2e295, significant=3) == "2.2e+295 s"
    assert fmt.seconds(1e-300, significant=3) == "1e-300 s"
    assert fmt.seconds(1e6, significant=3) == "1e+06 s"  # a million of the largest unit
    assert fmt.seconds(999e3, significant=3) == "999000 s"
    inf, nan = float("inf"), float("nan")
    for f in (fmt.seconds, fmt.rate, fmt.nbytes, fmt.count, fmt.percent, fmt.exact):
        assert f(inf) == f(-inf) == f(nan) == f(None) == "—"
    assert fmt.rate(2.2e295) == "2.2e+295 FLOP/s"
    assert fmt.rate(5.73e19) == "5.7e+19 FLOP/s" and fmt.rate(5.73e16) == "57300.0 TFLOP/s"
    assert fmt.nbytes(3e30) == "3e+30 B" and fmt.nbytes(4.5e12) == "4.50 TB"
    assert fmt.count(1.5e300, "op") == "1.5e+300 op"
    assert fmt.percent(2.2e295) == "2.2e+297%" and fmt.percent(0.532) == "53.2%"
    assert fmt.exact(1e300) == "1e+300" and fmt.exact(402653184) == "402,653,184"
    assert intensity(1e300) == "1e+300" and intensity(float("inf")) == "—"


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
