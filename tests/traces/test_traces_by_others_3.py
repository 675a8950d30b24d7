"""Real traces that misled roofwise (a second round, 26 traces from TraceLens, HTA, kineto and
param), each checked against the physics of the case:

- convolutions recorded by PyTorch 1.9, which keeps no list arguments: counted at stride 1,
  the strided ones (a stride of 2 quarters the output) were "impossible"; no count is a bound
  when the stride is unknown, so they are blank and say why;
- a 3x3 convolution that cuDNN ran by Winograd's transform (fewer multiplies than the direct
  count) was "impossible" on the fp32 roof: it is priced at the fewest multiplies any
  library's transform does;
- PyTorch 1.8 wrote `Input dims` (lower-case d) and no dtypes: the shapes were ignored and the
  advice was to record them;
- the V100 of a DGX Station ("Tesla V100-DGXS-32GB") matched no profile;
- ROCm 7 names no device (vLLM's MI300X traces): told from the properties it records.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from roofwise.cli import main
from roofwise.profiles.load import builtin_machines
from roofwise.traces.aten import make_call
from roofwise.traces.devices import part_of
from roofwise.traces.prices import price_call

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def analyze(capsys, path, *args):
    code = main(["analyze", str(path), "--json", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    return [r for r in rows if r.get("op") != "summary"], rows[-1]


def test_a_pytorch_1_9_convolution_is_never_impossible(capsys):
    rows, summary = analyze(capsys, TRACES / "kineto_resnet50_v100_torch19_step6.json.gz")
    assert summary["devices"] == ["Tesla V100-DGXS-32GB"]
    # the DGX Station's V100 is judged on the V100 SXM2 profile: ops are priced without -m
    assert any(r["sol_time_s"] is not None for r in rows)
    assert not any(r["verdicts"].get("impossible") for r in rows)
    convs = [r for r in rows if r["op"] == "aten::cudnn_convolution"]
    assert convs and all(set(r["verdicts"]) == {"blank"} for r in convs)
    assert all(r["reason"].startswith("stride and dilation not recorded") for r in convs)


def _conv_trace(tmp_path, kernel_name: str, dur_us: float) -> Path:
    """One cudnn_convolution of the ResNet-50 layer x (32, 64, 56, 56) fp32, w (64, 64, 3, 3),
    stride 1, padding 1, recorded with its arguments (PyTorch 2.x), its kernel `dur_us`
    long on a V100 SXM2."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::cudnn_convolution", "pid": 1, "tid": 1,
         "ts": 0, "dur": 40, "args": {
             "External id": 1,
             "Input Dims": [[32, 64, 56, 56], [64, 64, 3, 3], [], [], [], [], [], [], []],
             "Input type": ["float", "float", "ScalarList", "ScalarList", "ScalarList",
                            "Scalar", "Scalar", "Scalar", "Scalar"],
             "Concrete Inputs": ["", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False", "False",
                                 "False"]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 5, "dur": 3, "args": {"correlation": 9, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": kernel_name, "pid": 0, "tid": 7, "ts": 50,
         "dur": dur_us, "args": {"device": 0, "correlation": 9}}]
    path = tmp_path / "conv.json"
    path.write_text(json.dumps({"deviceProperties": [{"id": 0, "name": "Tesla V100-SXM2-16GB"}],
                                "traceEvents": events}))
    return path


def test_a_winograd_convolution_faster_than_the_direct_count_is_possible(capsys, tmp_path):
    # as measured in kineto's ResNet-50 sample (V100, PyTorch 1.9): 353.8 us for this layer.
    # Direct: 2 * 32*64*56*56 * 64*9 = 7.399e9 FLOPs, 20.9 TFLOP/s in 353.8 us: above the
    # V100's 15.67 TFLOP/s fp32 peak, so a direct kernel that fast is impossible; a Winograd
    # kernel does at least 64/324 of those multiplies (F(6x6, 3x3)): 1.461e9 FLOPs, 4.13
    # TFLOP/s, possible.
    direct = 2 * 32 * 64 * 56 * 56 * 64 * 9
    peak = builtin_machines()["v100-sxm2"].unit("cuda_core.fp32").theoretical_ops_per_s
    assert direct / 353.8e-6 > peak > direct * 64 / 324 / 353.8e-6
    rows, _ = analyze(capsys, _conv_trace(tmp_path, "volta_scudnn_winograd_128x128_ldg1_ldg4_"
                                          "relu_tile148t_nt_v1", 353.8))
    (row,) = rows
    assert "impossible" not in row["verdicts"] and "blank" not in row["verdicts"]
    assert "Winograd" in row["reason"]
    rows, _ = analyze(capsys, _conv_trace(tmp_path, "volta_scudnn_128x64_relu_interior_nn_v1",
                                          353.8))
    (row,) = rows
    assert row["verdicts"] == {"impossible": 1}


def test_pytorch_1_8_input_dims_are_read_and_the_missing_dtypes_said(capsys):
    path = TRACES / "kineto_resnet50_torch18_window.json.gz"
    rows, _ = analyze(capsys, path)
    # an independent count: each kernel's launch names its op by `external id`
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    ops = {e["args"]["External id"]: e for e in events if e.get("cat") == "Operator"}
    op_of_call = {e["args"]["correlation"]: e["args"]["external id"] for e in events
                  if e.get("cat") == "Runtime" and "correlation" in e["args"]}
    time_us: dict[tuple[str, str], float] = defaultdict(float)
    for e in events:
        if e.get("cat") == "Kernel":
            op = ops[op_of_call[e["args"]["correlation"]]]
            dims = ", ".join(f"{list(d)}" for d in op["args"]["Input dims"] if d) or "-"
            time_us[op["name"], dims] += e["dur"]
    got = {(r["op"], r["shapes"]): r["time_s"] for r in rows}
    assert got.keys() == time_us.keys()
    assert all(abs(got[k] - time_us[k] * 1e-6) < 1e-12 for k in got)
    conv = got["aten::cudnn_convolution", "[32, 512, 28, 28], [128, 512, 1, 1]"]
    assert conv > 0
    shaped = [r for r in rows if r["shapes"] != "-"]
    assert shaped and all(r["reason"].startswith("input shapes recorded without their dtypes")
                          for r in shaped)


def test_the_summary_tells_priced_time_from_time_judged_against_a_bound(capsys,
                                                                      mi300x_gap_profile):
    # on an mi300x profile whose transcendental rate is a gap the flash-attention call is
    # priced (a ledger) but blank (no bound): the priced share used to count it as if judged
    gap = mi300x_gap_profile
    rows, summary = analyze(capsys, TRACES / "tracelens_mi300x_compile_device2.json.gz",
                            "-m", gap)
    assert all(len(r["verdicts"]) == 1 or "blank" not in r["verdicts"] for r in rows)
    judged = [r["time_s"] for r in rows if "blank" not in r["verdicts"]
              and r["sol_time_s"] is not None]
    assert abs(summary["bounded_time_s"] - sum(judged)) < 1e-12
    flash = next(r for r in rows if r["op"] == "aten::_flash_attention_forward")
    assert flash["priced_by"] and flash["verdicts"] == {"blank": 1}
    assert summary["bounded_time_s"] < summary["priced_time_s"]
    assert summary["bounded_share_of_kernel_time"] == (summary["bounded_time_s"]
                                                       / summary["kernel_time_s"])
    code = main(["analyze", str(TRACES / "tracelens_mi300x_compile_device2.json.gz"), "-m", gap])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0 and "of which judged against a bound" in out


def test_a_gzipped_json_that_is_no_trace_is_said_to_be_none(capsys, tmp_path):
    # a rocprofiler-sdk JSON (TraceLens tests/rocprof): "unknown record format" said nothing
    # of the trace that was looked for
    path = tmp_path / "908_results.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"rocprofiler-sdk-tool": [{}]}).encode()))
    code = main(["analyze", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "not a PyTorch profiler trace" in err and str(path) in err


# vLLM on ROCm 7 (TraceLens tests/traces/inference/vllm_decode_full): the entry as recorded
MI300X_PROPERTIES = {"id": 0, "name": "", "totalGlobalMem": 206141652992, "computeMajor": 9,
                     "computeMinor": 4, "maxThreadsPerBlock": 1024, "warpSize": 64,
                     "numSms": 304}


@pytest.mark.parametrize(("change", "told"), [
    ({}, "AMD Instinct MI300X"),                       # gfx942, 304 CUs, 192 GiB
    ({"totalGlobalMem": 256 * 2**30}, "AMD Instinct MI325X"),  # the same with 256 GiB
    ({"numSms": 228}, None),                           # MI300A's CUs: no profile, no guess
    ({"warpSize": 32}, None),                          # not an AMD wavefront
    ({"computeMinor": 0}, None),                       # gfx90a (MI250X) has 9.0 and 104 CUs
    ({"totalGlobalMem": 64 * 2**30}, None),            # no part of that memory
    ({"numSms": "304"}, None),                         # not a number
])
def test_an_unnamed_device_is_told_only_when_every_property_fits(change, told):
    assert part_of({**MI300X_PROPERTIES, **change}) == told


def test_an_unnamed_mi300x_is_judged_on_its_profile_and_said_to_be_told(capsys, tmp_path):
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0,
         "dur": 30, "args": {"External id": 1, "Input Dims": [[4096, 4096], [4096, 4096]],
                             "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 1, "tid": 1,
         "ts": 5, "dur": 2, "args": {"correlation": 500, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": "elementwise_kernel", "pid": 0, "tid": 7,
         "ts": 100, "dur": 40.0, "args": {"device": 0, "correlation": 500}}]
    path = tmp_path / "rocm.json"
    path.write_text(json.dumps({"deviceProperties": [MI300X_PROPERTIES],
                                "traceEvents": events}))
    rows, summary = analyze(capsys, path)
    assert summary["devices"] == ["AMD Instinct MI300X"]
    assert summary["devices_from_properties"] == ["AMD Instinct MI300X"]
    (row,) = rows
    # 3 x 4096^2 bf16 = 100,663,296 B at the MI300X's 5.3 TB/s: 18.99 us
    assert row["sol_time_s"] == pytest.approx(3 * 4096 * 4096 * 2 / 5.3e12, rel=1e-9)
    code = main(["analyze", str(path)])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0 and ("AMD Instinct MI300X (told from deviceProperties: the trace names "
                          "none); profile(s): mi300x") in out


def test_a_pytorch_1_x_data_gradient_convolution_is_priced_from_its_recorded_shapes(capsys):
    # cudnn_convolution_backward_input (PyTorch 1.9; gone from today's aten) as kineto's V100
    # sample records it: self_size, grad_output [32, 1024, 14, 14], weight [1024, 256, 1, 1]
    call = make_call("aten::cudnn_convolution_backward_input",
                     [[], [32, 1024, 14, 14], [1024, 256, 1, 1], [], [], [], [], [], [], []],
                     ["GenericList", "float", "float", "GenericList", "GenericList",
                      "GenericList", "Int", "Bool", "Bool", "Bool"])
    price = price_call(call, replay=False)
    assert price.ledger is not None and price.source == "library"
    # each of the 32*1024*14*14 output gradients reaches 256 inputs through a 1x1 tap
    flops = 2 * 32 * 1024 * 14 * 14 * 256
    assert price.ledger.ops_by_unit == {"cuda_core.fp32": flops}
    assert price.ledger.read_bytes == (32 * 1024 * 14 * 14 + 1024 * 256) * 4
    assert price.ledger.write_bytes == 0 and "self_size" in price.reason
    rows, _ = analyze(capsys, TRACES / "kineto_resnet50_v100_torch19_step6.json.gz")
    (group,) = [r for r in rows if r["op"] == "aten::cudnn_convolution_backward_input"
                and r["shapes"] == "[32, 1024, 14, 14] fp32, [1024, 256, 1, 1] fp32"]
    peak = builtin_machines()["v100-sxm2"].unit("cuda_core.fp32").theoretical_ops_per_s
    assert group["sol_time_s"] == pytest.approx(group["count"] * flops / peak, rel=1e-6)
    assert "blank" not in group["verdicts"] and "impossible" not in group["verdicts"]
