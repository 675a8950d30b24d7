"""Every table designed for 80 columns: at 80, 100 and 160 no line is wider than the console,
nothing is cut with "…", and the numbers and unit names that tell rows apart are whole."""

from __future__ import annotations

import re

import pytest

from roofwise.cli import main

WIDTHS = (80, 100, 160)


def run_at(capsys, monkeypatch, width, *args):
    monkeypatch.setenv("COLUMNS", str(width))
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= width
    return out


@pytest.mark.parametrize("width", WIDTHS)
def test_machine_a100_keeps_every_unit_name_and_rate(capsys, monkeypatch, width):
    out = run_at(capsys, monkeypatch, width, "machine", "a100-sxm")
    for unit, rate in (("tensor_core.fp16", "312.0 TFLOP/s"), ("tensor_core.bf16", "312.0 TFLOP/s"),
                       ("tensor_core.tf32", "156.0 TFLOP/s"), ("cuda_core.fp32", "19.5 TFLOP/s"),
                       ("sfu.fp32", "2.4 Top/s")):
        assert re.search(rf"^{re.escape(unit)}\s+{re.escape(rate)}\s", out, re.MULTILINE), unit
    assert "2.0 TB/s" in out
    # the sources are always shown: in their column, or listed under the tables
    assert "NVIDIA A100 80GB SXM datasheet" in " ".join(out.split())


@pytest.mark.parametrize("width", WIDTHS)
def test_machine_h200_marks_the_envelope_and_explains_the_mark(capsys, monkeypatch, width):
    out = run_at(capsys, monkeypatch, width, "machine", "h200")
    assert re.search(r"^\s+989\.5 TFLOP/s\s+burst\*\s", out, re.MULTILINE)
    assert "* the envelope" in out


@pytest.mark.parametrize("width", WIDTHS)
def test_price_names_the_regime_and_rate_and_keeps_times_whole(capsys, monkeypatch, width):
    out = run_at(capsys, monkeypatch, width, "price", "examples/qk_norm_rope_quant.yaml",
                 "-m", "h200")
    total = [line for line in out.splitlines() if line.startswith("total")][-1]
    assert "67.76 MB" in total and "15.051 us" in total and "hbm read" in total
    joined = " ".join(out.split())
    # 67.0 TFLOP/s x 0.8548 sustained (the only measured regime of cuda_core.fp32)
    assert ("compute: cuda_core.fp32 at 57.3 TFLOP/s, envelope regime (sustained, 0.8548 of "
            "theoretical)") in joined
    assert "memory: 4.50 TB/s (hbm, read mix)" in joined


@pytest.mark.parametrize("width", WIDTHS)
def test_machines_lists_every_profile_with_its_source(capsys, monkeypatch, width):
    out = run_at(capsys, monkeypatch, width, "machines")
    joined = " ".join(out.split())
    for name in ("b200", "mi300x", "mi325x", "h100-pcie", "l40s", "rtx-4090"):
        assert re.search(rf"^{name}\s", out, re.MULTILINE)
    assert "NVIDIA L40S datasheet (dense peaks)" in joined.replace("- ", "")


def test_price_drops_the_least_useful_columns_at_80_and_says_so(capsys, monkeypatch):
    out = run_at(capsys, monkeypatch, 80, "price", "examples/qk_norm_rope_quant.yaml",
                 "-m", "h200")
    header = next(line for line in out.splitlines() if line.startswith("call"))
    assert header.split() == ["call", "bytes", "AI", "memory", "compute", "SOL", "bound", "by"]
    assert "(left out at this width: FLOPs, serial" in out
    wide = run_at(capsys, monkeypatch, 160, "price", "examples/qk_norm_rope_quant.yaml",
                  "-m", "h200")
    assert "left out" not in wide


def test_machine_says_the_latency_floor_once(capsys, monkeypatch):
    out = run_at(capsys, monkeypatch, 160, "machine", "h200")
    floor = [line for line in out.splitlines() if line.startswith("Latency floor")]
    assert floor == ["Latency floors per timing method (a call of k kernels pays per call + "
                     "(k - 1) x per kernel):"]
    lines = out.splitlines()
    start = lines.index(floor[0])
    # one line per timing method, each with its figures once (issue 8)
    assert [ln.split(":")[0].strip() for ln in lines[start + 1:start + 5]] == [
        "kernel", "graph", "events", "wall"]
    assert lines[start + 3].startswith("  events: 20.0 us + 5.00 us per further kernel "
                                       "(assumed: TileOPs' measured < 20 us rule")


def test_one_unit_vocabulary_flop_per_s_op_per_s_and_bytes_per_s(capsys, monkeypatch):
    from roofwise.base import fmt

    assert fmt.unit_rate(989.5e12, "tensor_core.bf16") == "989.5 TFLOP/s"
    assert fmt.unit_rate(4.18e12, "sfu.fp32") == "4.2 Top/s"  # an exp is an op, not a FLOP
    assert fmt.unit_rate(1.0e12, "vector.transcendental") == "1.0 Top/s"
    assert fmt.tera_rate(1099.51e12, "tensor_core.bf16") == "1099.51 TFLOP/s"
    assert fmt.rate(4.5024e12, "B/s", 2) == "4.50 TB/s"
    outs = [run_at(capsys, monkeypatch, 100, *args) for args in (
        ("machine", "h200"), ("price", "examples/qk_norm_rope_quant.yaml", "-m", "h200"),
        ("analyze", "examples/records.jsonl"),
        ("lint", "src/roofwise/profiles/machines/h200.yaml"))]
    for out in outs:
        assert not re.search(r"\d (T|G)/s|Top/s \(tensor|\bT/s\b", out)
    assert "Top/s" in outs[0] and "TFLOP/s" in outs[0]


GATED = {"lint": 1, "compare": 0, "audit": 0}  # lint exits 1 on these records' errors


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("args", [
    ("ops",),
    ("lint", "examples/qk_norm_rope_quant.yaml", "examples/records.jsonl"),
    ("compare", "examples/records.jsonl", "examples/records.jsonl"),
    ("audit", "--ncu-csv", "tests/fixtures/ncu/synthetic_rmsnorm_h200.csv", "--op", "rmsnorm",
     "--shape", "rows=8192,hidden=4096"),
    ("analyze", "examples/records.jsonl")])
def test_other_tables_fit_and_cut_nothing(capsys, monkeypatch, width, args):
    monkeypatch.setenv("COLUMNS", str(width))
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == GATED.get(args[0], 0), err
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= width
    if args[0] == "audit":  # the numbers whole; a long kernel name may fold, never drop
        assert "67.12 MB" in out and "UNJUDGED" in out
        assert "rmsnorm_time_only" in "".join(out.split())
    if args[0] == "ops":
        joined = " ".join(out.split())
        assert "qk_norm_rope_quant" in joined and "tokens=4096" in joined


LLAMA = ("model", "examples/models/llama-3.2-1b.json", "-m", "h200", "--phase", "decode",
         "--batch", "8", "--context", "4096", "--limit", "10")


@pytest.mark.parametrize("width", (80, 160))
def test_model_table_fits_and_keeps_names_times_and_what_binds(capsys, monkeypatch, width):
    out = run_at(capsys, monkeypatch, width, *LLAMA)
    # q_proj: 16 calls, 30.043 us in all (README), 1.878 us a call < the 3 us kernel floor: *
    assert re.search(r"^\*\.self_attn\.q_proj\s+aten::mm\s.*\s30\.043 us\*\s+.*memory: hbm",
                     out, re.MULTILINE)
    assert re.search(r"^\*\.self_attn\s+attention \(fused\)\s.*\s238\.773 us\s", out,
                     re.MULTILINE)
    assert "layer *: model.layers.*" in out
    joined = " ".join(out.split())
    assert "*: each call is under the kernel latency floor of 3.000 us (assumed)" in joined
    if width == 80:
        assert "(left out at this width: FLOP, bytes;" in joined
    else:
        assert "left out" not in out and "4.3 GFLOP" in out


def test_model_sweep_tables_fit_80_columns(capsys, monkeypatch):
    out = run_at(capsys, monkeypatch, 80, "model", "examples/models/mixtral-8x7b.json", "-m",
                 "h200", "--phase", "decode", "--context", "2048", "--sweep", "batch=1,16,256")
    assert re.search(r"^2\s+256\s+1\s+2048\s+37\.136 ms\s+6,894\s+37\.051 ms\s+6,909$", out,
                     re.MULTILINE)
    assert re.search(r"^\*\.mlp\.gate\s+8 x 4096\s+never\s+none\s+never\s+none$", out,
                     re.MULTILINE)
    assert re.search(r"^lm_head\s+32000 x 4096\s+163\s+#2\s+178\s+#2$", out, re.MULTILINE)


def test_model_layer_prefix_only_when_one_stack():
    from roofwise.cli.model import layer_prefix, short_layer

    one = ["model.layers.*.mlp.up_proj", "model.layers.*", "lm_head"]
    assert layer_prefix(one) == "model.layers.*"
    assert [short_layer(n, "model.layers.*") for n in one] == ["*.mlp.up_proj", "*", "lm_head"]
    assert layer_prefix(["encoder.layers.*.fc1", "decoder.layers.*.fc1"]) is None


NCU_ROW = ('"{id}","1","a","h","{name}","1","7","(256, 1, 1)","(1, 1, 1)","0","9.0",'
           '"Command line profiler metrics","dram__bytes_{rw}.sum","byte","{value}"')
LONG = ("void at::native::vectorized_elementwise_kernel<4, at::native::{f}<float>, "
        "at::detail::Array<char*, 2> >(int, at::native::{f}<float>, at::detail::Array<char*, 2>)")


@pytest.mark.parametrize("width", WIDTHS)
def test_audit_shortens_templated_kernel_names_by_rule(capsys, monkeypatch, tmp_path, width):
    header = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
              '"Block Size","Grid Size","Device","CC","Section Name","Metric Name",'
              '"Metric Unit","Metric Value"')
    lines = [header]
    for i, functor in enumerate(("FillFunctor", "CUDAFunctor_add")):
        for rw, value in (("read", "33,554,432"), ("write", "0")):
            lines.append(NCU_ROW.format(id=i, name=LONG.format(f=functor), rw=rw, value=value))
    report = tmp_path / "ncu.csv"
    report.write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("COLUMNS", str(width))
    code = main(["audit", "--ncu-csv", str(report), "--op", "rmsnorm", "--shape",
                 "rows=8192,hidden=4096", "--per-kernel"])
    out, err = capsys.readouterr()
    assert code == 1, err  # 33.55 MB read of a 67.12 MB ledger: FAIL
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= width
    rows = [line for line in out.splitlines() if " 0.500 " in line]
    assert len(rows) == 2 and all("33.55 MB" in r and "FAIL" in r for r in rows)
    labels = [r.split("  ")[0] for r in rows]
    assert labels[0] != labels[1]  # the functor tells them apart, at every width
    assert all("void" not in label and "(int" not in label for label in labels)
    if width == 80:  # told apart by a number, each listed in full beneath
        assert labels == ["vectorized_el..._kernel<...> [1]", "vectorized_el..._kernel<...> [2]"]
        assert "[2] " + LONG.format(f="CUDAFunctor_add") in " ".join(out.split())


def test_short_kernels_keeps_names_apart():
    from roofwise.base.text import short_kernel, short_kernels

    fill, add = LONG.format(f="FillFunctor"), LONG.format(f="CUDAFunctor_add")
    assert short_kernel(fill, 40) == "vectorized_elementwise_kernel<...>"
    labels = short_kernels([fill, add], 40)
    assert labels == {fill: "vectorized_elementwise_kernel<...> [1]",
                      add: "vectorized_elementwise_kernel<...> [2]"}
    assert short_kernels(["rmsnorm_pass"], 40) == {"rmsnorm_pass": "rmsnorm_pass"}


def test_analyze_lint_does_not_repeat_a_reason_printed_under_its_row(capsys, monkeypatch):
    out = run_at(capsys, monkeypatch, 80, "analyze", "examples/records.jsonl")
    joined = " ".join(out.split())
    # the latency_bound row (4.000 us measured, 1.33 x the 3 us kernel floor) says why once
    assert len(re.findall(r"1\.33 ?x the kernel floor", joined)) == 1
    assert ("M7 examples/records.jsonl:3 (qk_norm_rope_quant): a number read from a row below "
            "the latency floor (why: under its row above)") in joined
    lint = out[out.index("lint: "):].splitlines()[1:]
    assert all(line.startswith("  M") or line.startswith("    ") for line in lint)


def test_machine_lists_each_source_once_with_a_hanging_indent(capsys, monkeypatch):
    out = run_at(capsys, monkeypatch, 80, "machine", "b200")
    joined = " ".join(out.split())
    # the hbm source sat in the memory table's column and again under Sources
    assert joined.count("the launch table said 8 TB/s") == 1
    lines = out.splitlines()
    start = lines.index("Sources")
    assert lines[start + 1].startswith("  hbm: NVIDIA HGX B200 table (revised)")
    assert lines[start + 2].startswith("    ")  # its continuation, indented under it
    # balance in the unit's own work: an exp is an op (4.7 Top/s / 7.7 TB/s = 0.61 op/B)
    assert re.search(r"^sfu\.fp32\s+4\.7 Top/s\s.*\s0\.61 op/B$", out, re.MULTILINE)
    assert re.search(r"^cuda_core\.fp32\s+75\.0 TFLOP/s\s.*\s9\.74 FLOP/B$", out, re.MULTILINE)


@pytest.mark.parametrize("width", (80, 100))
def test_trace_view_fits_and_keeps_shapes_whole(capsys, monkeypatch, width):
    out = run_at(capsys, monkeypatch, width, "analyze",
                 "tests/fixtures/traces/hta_a100_80gb_rank0.json.gz", "-m", "a100-sxm",
                 "--limit", "8")
    # the copy of two [4, 4096, 2798] fp32 tensors: 530.688 us lost, 62.9% of its SOL
    copy = re.search(r"^aten::copy_\s+\[4,4096,2798\] fp32,\s.*\s530\.688 us\s.*62\.9%.*\n"
                     r"\s+\[4,4096,2798\] fp32\s*$", out, re.MULTILINE)
    assert copy, out
    # a shape never parts from its dtype nor breaks inside its brackets
    assert not re.search(r"\[[^\]]*$|^\s+fp(32|64)\b", out, re.MULTILINE)
    assert "note, aten::sum: reduced dimensions not recorded: output counted as 1 element" in out
    assert re.search(r"^  NVIDIA A100-SXM4-80GB; profile\(s\): a100-sxm$|"
                     r"device\(s\): NVIDIA\s*\n?\s*A100-SXM4-80GB", out, re.MULTILINE)


def test_compact_shapes_keeps_each_tensor_on_one_line():
    from roofwise.cli.traces import compact_shapes

    assert compact_shapes("[1, 4096] fp32") == "[1,4096] fp32"
    assert compact_shapes("[4, 4096, 2798] fp32, [4, 4096, 2798] fp32") == (
        "[4,4096,2798] fp32,\n[4,4096,2798] fp32")


def _clocks(sm_mhz, throttle=()):
    return {"sm_mhz": sm_mhz, "mem_mhz": 2619, "power_limit_w": 700.0, "driver": "x",
            "throttle": list(throttle)}


WINDOWS = [  # as measure.calibrate logs them; the figures are made up for the layout only
    {"kind": "memory", "key": "hbm", "variant": "read", "method": "triton read block 2048",
     "reps": 50, "time_s": 2.4e-4, "rate_per_s": 4.4736e12, "spread": 0.012,
     "clocks": [_clocks(1980), _clocks(1980)]},
    {"kind": "unit", "key": "tensor_core.bf16", "variant": "burst", "method": "torch bf16 8192",
     "reps": 12, "time_s": 1.445e-3, "rate_per_s": 7.6e14, "spread": 0.031,
     "clocks": [_clocks(1980), _clocks(1755, ("power_cap",))]},
    {"kind": "unit", "key": "sfu.fp32", "variant": "sustained", "method": "triton exp",
     "reps": 20, "time_s": 1e-3, "rate_per_s": 3.9e12, "spread": 0.005,
     "clocks": [_clocks(1980)]}]


@pytest.mark.parametrize("width", WIDTHS)
def test_calibrate_windows_table_fits_with_units_from_the_one_formatter(width):
    import io

    from rich.console import Console

    from roofwise.cli.calibrate import render_windows

    buf = io.StringIO()
    render_windows(Console(file=buf, width=width, color_system=None), WINDOWS)
    out = buf.getvalue()
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= width
    assert re.search(r"^hbm\s+read\s.*\s4\.47 TB/s(\s|$)", out, re.MULTILINE)
    assert re.search(r"^tensor_core\.bf16\s+burst\s.*\s760\.0 TFLOP/s(\s|$)", out, re.MULTILINE)
    assert re.search(r"^sfu\.fp32\s+sustained\s.*\s3\.9 Top/s(\s|$)", out, re.MULTILINE)
    assert not re.search(r"\de[+-]\d+/s", out)  # no bare 4.474e+12/s
    if width == 160:
        assert "1980 -> 1755" in out and "power_cap" in out and "left out" not in out
    if width == 80:
        assert "(left out at this width:" in " ".join(out.split())


@pytest.mark.parametrize("width", (80, 160))
def test_compare_shows_workloads_as_key_value(capsys, monkeypatch, width):
    out = run_at(capsys, monkeypatch, width, "compare", "examples/records.jsonl",
                 "examples/records.jsonl")
    joined = " ".join(out.split())
    assert '{"' not in out and '":' not in out  # no JSON
    assert re.search(r"gemm_bf16\s+k=8192 m=8192\s", out) and "n=8192" in out
    assert "tokens=16384" in joined
