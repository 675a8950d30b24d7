"""Real traces that misled roofwise (a third round: HTA, param and TraceLens files not read
before), each checked against an independent parse and the physics of the case:

- an `out=` tensor the op resizes (`arange.start_out`, recorded as the empty `[0]` it was
  passed) was charged at its recorded size: "zero bytes", blank, for a kernel that wrote
  every element;
- a trace with no op priced (recorded without shapes) said `profile(s): -` for a card roofwise
  has a profile for, as for one it has none for.
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


def test_a_trace_with_nothing_priced_names_the_profile_its_card_selects(capsys):
    # HTA's AlexNet on an A100-PG509-200, recorded without shapes: nothing is priced, yet
    # the card is known (the profile every other A100-PG509-200 trace is judged on)
    assert main(["analyze", str(TRACES / "hta_alexnet_a100_noshapes.json.gz")]) == 0
    out = capsys.readouterr().out
    assert "(0 priced); device(s): NVIDIA A100-PG509-200; profile(s): a100-sxm-40gb\n" in out


def test_a_gpu_only_trace_of_a_card_with_no_profile_says_so(capsys):
    # TraceLens's MI210 trace has kernels and their launches but no cpu_op: 562 kernels,
    # 5343.422 us, none launched by a traced op (an independent parse); no built-in profile
    # is an MI210
    assert main(["analyze", str(TRACES / "tracelens_mi210_gpu_only.json.gz")]) == 0
    out = capsys.readouterr().out
    assert ("kernel time 5.343 ms in 562 kernels from 0 ops (0 priced); device(s): AMD Instinct "
            "MI210; profile(s): -\n") in out
    _rows, summary = analyze(capsys, TRACES / "tracelens_mi210_gpu_only.json.gz")
    assert summary["kernels"] == 562
    assert summary["unattributed_time_s"] == pytest.approx(5343.422e-6, rel=1e-9)


def test_group_norm_and_the_fused_rms_norm_backward_are_priced(capsys, tmp_path):
    """TraceLens's normalization-layer trace (MI300X, [8, 16, 32, 32] fp32, 131,072
    elements): group norm and its backward, and RMS norm's fused backward, were blank ("the
    tracer has no count"). Each is now priced as batch norm is, per element of its largest
    input, every input read once and one output of that shape written: forward 6 operations
    per element, group norm's backward 8, RMS norm's fused backward 9."""
    records = tmp_path / "norms.jsonl"
    rows, _ = analyze(capsys, TRACES / "tracelens_mi300x_normalization_layers.json.gz",
                      "--records-out", str(records))
    by_op: dict[str, list[dict]] = {}
    for line in records.read_text().splitlines():
        record = json.loads(line)
        by_op.setdefault(record["op"], []).append(record)
    elements, x_bytes = 8 * 16 * 32 * 32, 8 * 16 * 32 * 32 * 4
    forward = {(r["read_bytes"], r["write_bytes"], r["flops"])
               for r in by_op["aten::native_group_norm"]}
    # with weight and bias [16] fp32 (64 B each), and without
    assert forward == {(x_bytes + 2 * 64, x_bytes, 6 * elements), (x_bytes, x_bytes, 6 * elements)}
    backward = {(r["read_bytes"], r["write_bytes"], r["flops"])
                for r in by_op["aten::native_group_norm_backward"]}
    # grad and input, mean and rstd [8, 4] fp32 (128 B each), weight [16] where affine
    assert backward == {(2 * x_bytes + 2 * 128 + 64, x_bytes, 8 * elements),
                        (2 * x_bytes + 2 * 128, x_bytes, 8 * elements)}
    rms = {(r["read_bytes"], r["write_bytes"], r["flops"])
           for r in by_op["aten::_fused_rms_norm_backward"]}
    # grad and input, rstd [8, 16, 1, 1] fp32 (512 B), weight [32, 32] fp32 (4,096 B) where given
    assert rms == {(2 * x_bytes + 512 + 4096, x_bytes, 9 * elements),
                   (2 * x_bytes + 512, x_bytes, 9 * elements)}
    for row in rows:
        if row["op"] in ("aten::native_group_norm", "aten::native_group_norm_backward",
                         "aten::_fused_rms_norm_backward"):
            assert row["priced_by"] == "library" and "blank" not in row["verdicts"]
            assert "impossible" not in row["verdicts"]  # 1-2 MB in ~5 us: 0.2-0.4 TB/s
