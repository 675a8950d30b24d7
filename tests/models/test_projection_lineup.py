"""`roofwise model --records-out` then `roofwise analyze --projection PROJ TRACE`: a trace of
three decode steps, written here with every GEMM taking twice its projected SOL and attention
three times, lines up op by op with exactly those ratios."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
STEPS = 3


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def trace_from(projected, path):
    """cpu_op + launch + kernel per call; GEMMs at 2x SOL, attention at 3x, one stray op."""
    events, t, corr = [], 0.0, 0

    def call(name, dims, types, dur_us):
        nonlocal t, corr
        corr += 1
        events.extend([
            {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": t, "dur": 10,
             "args": {"Input Dims": dims, "Input type": types}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": t + 1, "dur": 2, "args": {"correlation": corr}},
            {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": t + 5,
             "dur": dur_us, "args": {"correlation": corr, "device": 0}}])
        t += 20

    for _ in range(STEPS):
        for row in projected:
            per_call_us = row["predicted_time_s"] * 1e6
            if row["op"] == "aten::mm":
                dims = [[int(x) for x in d.split(",")]
                        for d in re.findall(r"\[([\d, ]+)\]", row["workload"]["shapes"])]
                for _ in range(row["workload"]["count"]):
                    call("aten::mm", dims, ["c10::BFloat16"] * 2, 2 * per_call_us)
            elif row["op"] == "attention (fused)":
                for _ in range(row["workload"]["count"]):
                    call("aten::_scaled_dot_product_flash_attention",
                         [[2, 32, 1, 64], [2, 8, 129, 64], [2, 8, 129, 64]],
                         ["c10::BFloat16"] * 3, 3 * per_call_us)
    call("aten::stray", [[4]], ["float"], 1.0)
    path.write_text(json.dumps({"deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],
                                "traceEvents": events}))


def test_projection_lines_up_with_a_measured_trace(capsys, tmp_path):
    config = json.loads((MODELS / "llama-3.2-1b.json").read_text())
    config["num_hidden_layers"] = 2
    config_path = tmp_path / "llama-2-layers.json"
    config_path.write_text(json.dumps(config))
    proj = tmp_path / "proj.jsonl"
    code, _, err = run(capsys, "model", config_path, "-m", "h200", "--phase", "decode",
                       "--batch", 2, "--context", 128, "--records-out", proj)
    assert code == 0, err
    projected = [json.loads(line) for line in proj.read_text().splitlines()]
    assert projected and all(r["time_s"] is None for r in projected)
    assert all(r["predicted_time_s"] > 0 for r in projected)
    trace = tmp_path / "trace.json"
    trace_from(projected, trace)
    code, out, err = run(capsys, "analyze", trace, "--projection", proj, "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    gemms = [r for r in rows if r["op"] == "aten::mm"]
    assert gemms and all(r["measured_over_predicted"] == pytest.approx(2.0, rel=1e-6)
                         for r in gemms)
    assert all(r["measured_calls"] == STEPS * r["predicted_calls"] for r in gemms)
    attention = next(r for r in rows if r["op"] == "attention (fused)")
    assert attention["measured_over_predicted"] == pytest.approx(3.0, rel=1e-6)
    stray = next(r for r in rows if r["op"] == "aten::stray")
    assert stray["predicted_calls"] == 0 and stray["measured_over_predicted"] is None
    unmeasured = [r for r in rows if r["measured_calls"] == 0]
    assert unmeasured and rows.index(stray) > rows.index(gemms[-1])  # one-sided rows last
    code, out, _ = run(capsys, "analyze", trace, "--projection", proj)
    assert code == 0 and "2.00x" in out and "3.00x" in out


def test_projection_on_a_records_file_is_a_usage_error(capsys, tmp_path, examples):
    code, _, err = run(capsys, "analyze", examples / "records.jsonl", "--projection",
                       tmp_path / "p.jsonl")
    assert code == 2 and "apply to a profiler trace" in err
