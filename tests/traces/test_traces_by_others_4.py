"""Real traces that misled roofwise (a third round: HTA, param and TraceLens files not read
before), each checked against an independent parse and the physics of the case:

- an `out=` tensor the op resizes (`arange.start_out`, recorded as the empty `[0]` it was
  passed) was charged at its recorded size: "zero bytes", blank, for a kernel that wrote
  every element;
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofwise.cli import main

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def analyze(capsys, path, *args):
    code = main(["analyze", str(path), "--json", "--limit", "0", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    return [r for r in rows if r.get("op") != "summary"], rows[-1]


def test_an_out_tensor_the_op_resizes_is_charged_as_written(capsys):
    # SGLang decode on MI300X: torch.arange(238, 270) runs aten::arange.start_out with the
    # empty int64 out the profiler records as [0] (Concrete Inputs '238', '270', '1'); its one
    # kernel wrote 32 int64 = 256 bytes
    rows, summary = analyze(capsys, TRACES / "tracelens_mi300x_sglang_qwen3_8b_decode.json.gz")
    (arange,) = [r for r in rows if r["op"] == "aten::arange"]
    assert arange["shapes"] == "[0] int64" and arange["count"] == 1
    assert arange["time_s"] == pytest.approx(4.246e-06, rel=1e-12)  # its one kernel, 4.246 us
    assert arange["sol_time_s"] == pytest.approx(256 / 5.3e12, rel=1e-12)  # HBM3 5.3 TB/s
    assert arange["verdicts"] == {"latency_bound": 1}
    assert arange["reason"] is None
    # as an independent parse counts them: 555 kernels, 547 of them (9673.987 us) launched by a
    # HIP graph replay with no aten op around it
    assert (summary["kernels"], summary["ops"]) == (555, 8)
    assert summary["kernel_time_s"] == pytest.approx(9765.437e-6, rel=1e-9)
    assert summary["unattributed_time_s"] == pytest.approx(9673.987e-6, rel=1e-9)
    assert summary["devices"] == ["AMD Instinct MI300X"]
