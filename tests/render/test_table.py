"""The terminal table: worst rows first, numbers with units, readable in a pipe."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from roofwise.base import fmt
from roofwise.base.fmt import intensity
from roofwise.render.table import render_analysis


def _render(analysis, width):
    out = io.StringIO()
    render_analysis(analysis, Console(file=out, width=width, color_system=None), None)
    return out.getvalue()


VERDICT_AT_START = re.compile(
    r"^(impossible|anomaly|blank|below|latency_bound|cache_resident|at_ceiling)\s")


def _main_lines(text):
    return [ln for ln in text.splitlines() if VERDICT_AT_START.match(ln)]


def test_worst_rows_first_with_units(example_analysis):
    text = _render(example_analysis, 160)
    lines = _main_lines(text)
    verdicts = [VERDICT_AT_START.match(ln).group(1) for ln in lines]
    assert verdicts == ["impossible", "anomaly", "blank", "below", "below", "latency_bound",
                        "cache_resident", "at_ceiling"]
    # below rows: lower efficiency first (53.2% rmsnorm before 56.1% split)
    below = [ln for ln in lines if ln.startswith("below")]
    assert "rmsnorm" in below[0] and "53.2%" in below[0] and "56.1%" in below[1]
    assert "17.5 us" in lines[-1] and "86.0%" in lines[-1]
    assert "2.00 ms" in text and "3.79 ns" in text and "5,461" in text
    assert len(lines) == 8


def _details(text):
    """Per row (in order), the indented lines under it, joined into one string."""
    out: list[str] = []
    for ln in text.splitlines():
        if VERDICT_AT_START.match(ln):
            out.append("")
        elif out and ln.startswith("   ") and ln.strip():
            out[-1] += " " + ln.strip()
    return [d.strip() for d in out]


@pytest.mark.parametrize("width", [80, 100, 160])
def test_every_width_keeps_numbers_units_workloads_and_reasons_whole(example_analysis, width):
    """Designed for 80 columns: nothing is cut with "…", no line is wider than the console,
    each row shows its workload as key=value and every reason in full under it."""
    text = _render(example_analysis, width)
    assert "…" not in text
    assert max(len(ln) for ln in text.splitlines()) <= width
    order = [int(i) for i in example_analysis.worst_first()]
    details = _details(text)
    assert len(details) == 8
    for i, detail in zip(order, details, strict=True):
        for reason in example_analysis.reasons(i):
            assert reason in detail  # the whole sentence, rejoined across wrapped lines
    assert details[0].startswith('m=8192 n=8192 k=8192 note="flops double-counted"')
    assert details[-2].startswith('tokens=4096 note="payload-only ledger, timing broken"')
    assert details[-1].startswith("tokens=4096 q_heads=32 kv_heads=8 head_dim=128")
    lines = _main_lines(text)
    assert lines[-2].split()[:6] == ["cache_resident", "qk_norm_rope_quant", "—", "13.0",
                                     "us", "14.1"]
    assert re.search(r"107\.2%\s+1\.35 ms\s+1\.45 ms", lines[1])


def test_narrow_console_drops_the_least_useful_columns_and_says_so(example_analysis):
    text = _render(example_analysis, 80)
    header = next(ln for ln in text.splitlines() if ln.startswith("verdict"))
    assert header.split() == ["verdict", "op", "eff.", "time", "SOL", "AI"]
    assert "(left out at this width: bound; --json has every field)" in text
    wide = _render(example_analysis, 100)
    header = next(ln for ln in wide.splitlines() if ln.startswith("verdict"))
    assert header.split() == ["verdict", "op", "eff.", "time", "SOL", "bound", "AI"]
    assert "left out" not in wide


def test_rows_that_read_alike_show_their_input_line():
    from roofwise.output.analysis import analyze
    from roofwise.profiles.load import builtin_machines
    from roofwise.records.read import columns_from_valid
    row = {"op": "gemm", "workload": {"m": 512, "n": 512, "k": 512, "dtype": "bf16"},
           "device": "NVIDIA H200", "flops": 2 * 512**3, "bytes": 3 * 512 * 512 * 2,
           "roof": "tensor_core.bf16", "time_s": 2e-5, "timing": "device"}
    other = {**row, "workload": {**row["workload"], "dtype": "fp16"},
             "roof": "tensor_core.fp16"}
    analysis = analyze(columns_from_valid([row, row, other], [3, 7, 9]), builtin_machines())
    text = _render(analysis, 80)
    labels = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("m=512")]
    assert sorted(labels) == ["m=512 n=512 k=512 dtype=bf16  (line 3)",
                              "m=512 n=512 k=512 dtype=bf16  (line 7)",
                              "m=512 n=512 k=512 dtype=fp16"]  # its dtype tells it apart


def test_device_mismatch_is_said_per_row_and_in_the_summary(example_analysis_h200):
    text = _render(example_analysis_h200, 100)
    joined = " ".join(text.split())
    assert ("warning: 1 of 8 record(s) were judged on a profile their device does not name: "
            "'NVIDIA GeForce RTX 3090' (1)") in joined
    softmax = [d for d in _details(text) if d.startswith("rows=4096 cols=8192")]
    assert len(softmax) == 1 and ("device mismatch: the record was measured on "
                                  "'NVIDIA GeForce RTX 3090' (no built-in profile) but "
                                  "is judged on h200") in softmax[0]


def test_no_mismatch_when_each_device_chooses_its_profile(example_analysis):
    assert "mismatch" not in _render(example_analysis, 100)


def test_markup_in_plain_cells_is_shown_not_interpreted():
    from roofwise.output.analysis import analyze
    from roofwise.profiles.load import builtin_machines
    from roofwise.records.read import columns_from_valid
    rows = [{"op": "[bold]x[/]", "workload": {"k": [1, 2]}, "device": "NVIDIA H200",
             "flops": 1e9, "bytes": 1e9, "roof": "cuda_core.fp32", "time_s": 1e-3,
             "timing": "device"}]
    text = _render(analyze(columns_from_valid(rows), builtin_machines()), 240)
    assert "[bold]x[/]" in text and "k=[1,2]" in text


def test_huge_and_infinite_numbers_never_show_as_walls_of_digits():
    from roofwise.output.analysis import analyze
    from roofwise.profiles.load import builtin_machines
    from roofwise.records.read import columns_from_valid
    rows = [{"op": "huge", "device": "NVIDIA H200", "flops": 1e300, "bytes": 1.0,
             "roof": "cuda_core.fp32", "time_s": 2.2e295, "timing": "device"}]
    text = _render(analyze(columns_from_valid(rows), builtin_machines()), 200)
    row = next(ln for ln in text.splitlines() if " huge " in ln)
    sol = 1e300 / (67.0e12 * 0.8548)  # compute-bound on fp32: 1.746e286 s
    assert row.split()[3:7] == ["2.2e+295", "s", f"{sol:.3g}", "s"] == [
        "2.2e+295", "s", "1.75e+286", "s"]
    assert row.endswith(" 1e+300")  # intensity: 1e300 FLOP over 1 B
    assert not re.search(r"\d{8}", row) and "inf" not in row


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


def test_host_timed_cpu_records_judged_on_a_gpu_profile_are_flagged():
    """`bench --device cpu` writes the host's name and wall timing; -m h200 must say so."""
    from roofwise.output.analysis import analyze
    from roofwise.profiles.load import builtin_machines
    from roofwise.records.read import columns_from_valid
    from roofwise.verdicts.mismatch import mismatch_summary

    row = {"op": "rmsnorm", "workload": {"rows": 256, "hidden": 1024}, "device": "x86_64",
           "flops": 1.3e6, "bytes": 1.05e6, "roof": "cuda_core.fp32", "time_s": 4e-4,
           "timing": "wall"}
    machines = builtin_machines()
    analysis = analyze(columns_from_valid([row, row]), machines, machines["h200"])
    assert analysis.reasons(0)[0] == ("device mismatch: the record was measured on 'x86_64' "
                                      "(no built-in profile) but is judged on h200")
    assert mismatch_summary(analysis).startswith(
        "warning: 2 of 2 record(s) were judged on a profile their device does not name: "
        "'x86_64' (2)")
