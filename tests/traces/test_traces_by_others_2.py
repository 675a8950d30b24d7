"""Real traces that misled roofwise (found by running it on 30 traces from TraceLens, HTA,
kineto, GPUPuzzlers and param; four kept here, see tests/fixtures/traces/README.md), each
checked against the physics of the case:

- fp32 GEMMs that cuBLAS ran on the A100's TF32 tensor cores (kernels `..._s1688gemm_...`):
  priced on the CUDA cores, 497 calls were "impossible" (up to 5.7x); 2*M*N*K over the time
  is 111 TFLOP/s, under the 156 TFLOP/s TF32 peak: possible, and priced so now;
- `aten::gather` read its whole 145 MB source: "impossible" at 483%; one element of the
  source per element of the index is what it reads, and its index, expanded with stride 0,
  is read once per distinct value (20 MB by its shape, 7 KB in memory);
- ROCm kernels on device 2 of a process whose deviceProperties lists only device 0: every
  row was blank for want of a device name;
- `convolution_backward` asked for two of its three outputs returns None for the third: the
  replay refused it as "returned NoneType".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofwise.cli import main
from roofwise.profiles.load import builtin_machines

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def analyze(capsys, name, *args):
    code = main(["analyze", str(TRACES / name), "--json", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    return [r for r in rows if r.get("op") != "summary"], rows[-1]


def test_fp32_gemms_on_tf32_tensor_cores_are_possible(capsys):
    # the trace's "NVIDIA A100-PG509-200" (40 GB of memory) is judged on a100-sxm-40gb
    rows, summary = analyze(capsys, "hta_a100pg509_rank3_tf32.json.gz")
    assert summary["devices"] == ["NVIDIA A100-PG509-200"]
    gemms = [r for r in rows if r["op"] in ("aten::mm", "aten::addmm", "aten::bmm")]
    assert len(gemms) > 100
    assert not [r for r in gemms if "impossible" in (r["verdicts"] or {})]
    # by hand: [2048, 1024] x [1024, 4864], 6 calls, compute-bound on the TF32 roof
    (mm,) = [r for r in gemms if r["shapes"] == "[2048, 1024] fp32, [1024, 4864] fp32"]
    a100 = builtin_machines()["a100-sxm-40gb"]
    flops = 2 * 2048 * 1024 * 4864
    compute = flops / a100.unit("tensor_core.tf32").effective_ops_per_s(None)
    memory = 4 * (2048 * 1024 + 1024 * 4864 + 2048 * 4864) / a100.dram.effective_bytes_per_s()
    assert compute > memory
    assert mm["count"] == 6 and mm["sol_time_s"] == pytest.approx(6 * compute, rel=1e-9)
    assert 0.6 < mm["efficiency"] < 1  # 111 TFLOP/s of 156


@pytest.mark.parametrize("machine", [(), ("-m", "b200")])
def test_gather_reads_one_source_element_per_index_element(capsys, machine):
    rows, _ = analyze(capsys, "tracelens_b200_eager.json.gz", *machine)
    (gather,) = [r for r in rows if r["op"] == "aten::gather"]
    assert gather["shapes"] == "[25136, 2880] bf16, [888, 2880] int64, [888, 2880] bf16"
    elements = 888 * 2880
    # the index is expanded along its last dimension (recorded strides [1, 0]): 888 distinct
    # int64 values are read; then the bf16 elements gathered and the output written
    moved = 888 * 8 + elements * (2 + 2)
    b200 = builtin_machines()["b200"]
    assert gather["sol_time_s"] == pytest.approx(moved / b200.dram.effective_bytes_per_s(),
                                                 rel=1e-9)
    assert "impossible" not in gather["verdicts"]


def test_kernels_on_an_unlisted_device_id_take_the_one_card_listed(capsys):
    rows, summary = analyze(capsys, "tracelens_mi300x_compile_device2.json.gz")
    assert summary["devices"] == ["AMD Instinct MI300X"]
    # judged on the mi300x profile with no --machine: [32768, 2048] x [2048, 8192] bf16
    wide = "[32768, 2048] bf16, [2048, 8192]"
    (mm,) = [r for r in rows if r["op"] == "aten::mm" and r["shapes"].startswith(wide)]
    mi300x = builtin_machines()["mi300x"]
    flops = 2 * 32768 * 2048 * 8192
    assert mm["sol_time_s"] == pytest.approx(
        mm["count"] * flops / mi300x.unit("tensor_core.bf16").effective_ops_per_s(None),
        rel=1e-9)
    assert mm["verdicts"] == {"below": 2}


def test_an_op_that_returns_none_for_an_output_it_was_not_asked_for_is_replayed(capsys):
    rows, _ = analyze(capsys, "tracelens_mi300x_resnet_act_ckpt.json.gz", "-m", "mi300x")
    backward = [r for r in rows if r["op"] == "aten::convolution_backward"]
    assert backward and all(r["priced_by"] == "tracer" and r["sol_time_s"] > 0
                            for r in backward)


def test_a_blank_group_shows_no_reading_and_says_why(capsys, mi300x_gap_profile):
    """On a profile whose transcendental rate is a gap, the flash-attention call is blank:
    its group showed an SOL and a 23% efficiency with no reason before."""
    rows, _ = analyze(capsys, "tracelens_mi300x_compile_device2.json.gz", "-m",
                      mi300x_gap_profile)
    (flash,) = [r for r in rows if r["op"] == "aten::_flash_attention_forward"]
    assert flash["verdicts"] == {"blank": 1}
    assert flash["sol_time_s"] is None and flash["efficiency"] is None
    # the unit it lacks is named, and nothing is said of a bound it does not have (a floor,
    # a datasheet rate: the reason used to claim both)
    assert flash["reason"] == ("mi300x has no known rate for sfu.fp32 (on vector.transcendental "
                               "here) (a gap in its sources; `roofwise calibrate` measures it)")


def test_flash_attention_on_mi300x_is_judged_on_its_matrix_cores(capsys):
    """With the derived transcendental rate (16 results per CU per clock: 304 x 16 x 2.1 GHz)
    the same call is judged. Non-causal (`is_causal` False in its Concrete Inputs), B=8,
    S=4096, H=16, D=128: 4*B*H*S^2*D FLOPs on the bf16 matrix cores (1307.4 TFLOP/s) bind;
    its B*H*S^2 exponentials take a quarter of that time on the vector ALUs."""
    rows, _ = analyze(capsys, "tracelens_mi300x_compile_device2.json.gz")
    (flash,) = [r for r in rows if r["op"] == "aten::_flash_attention_forward"]
    flops = 4 * 8 * 16 * 4096**2 * 128
    exps = 8 * 16 * 4096**2
    assert exps / (304 * 16 * 2.1e9) < flops / 1307.4e12
    assert flash["sol_time_s"] == pytest.approx(flops / 1307.4e12, rel=1e-6)
    assert flash["efficiency"] == pytest.approx(flops / 1307.4e12 / flash["time_s"], rel=1e-6)
    assert flash["verdicts"] == {"below": 1}  # 298 TFLOP/s of 1307.4: 23%


def test_traces_of_different_jobs_are_not_read_as_one_jobs_ranks(capsys, tmp_path):
    """Rank 3 of an 8-rank A100 job beside rank 1 of a 128-rank job: the per-rank view named
    a slowest rank of a job that never ran; now refused in one line naming both."""
    import shutil

    folder = tmp_path / "two-jobs"
    folder.mkdir()
    shutil.copy(TRACES / "hta_a100pg509_rank3_tf32.json.gz", folder)
    shutil.copy(TRACES / "hta_sampled_rank1.json.gz", folder)
    code = main(["analyze", str(folder)])
    out, err = capsys.readouterr()
    assert code == 2 and not out and err.count("\n") == 1
    assert "world_size" in err and "traces of different jobs" in err
    # the two ranks of one job still read as one
    assert main(["analyze", str(TRACES / "hta_sampled_rank0.json.gz"),
                 str(TRACES / "hta_sampled_rank1.json.gz"), "--json"]) == 0


def test_a_report_of_a_trace_with_nothing_priced_still_shows_its_time(capsys, tmp_path):
    """A trace without shapes prices no op: `analyze` shows where its time went, and
    `report` exited 2 ("nothing to report") and dropped it; it writes that page now."""
    out = tmp_path / "alexnet.html"
    assert main(["report", str(TRACES / "hta_alexnet_a100_noshapes.json.gz"), "-o",
                 str(out)]) == 0
    capsys.readouterr()
    page = out.read_text()
    assert "no op could be priced" in page and "<h2>Trace: ops by shape" in page
    assert page.count('<tr class="row"') > 1


def test_report_of_a_folder_of_traces_says_what_to_run(capsys, tmp_path):
    import shutil

    for name in ("hta_sampled_rank0.json.gz", "hta_sampled_rank1.json.gz"):
        shutil.copy(TRACES / name, tmp_path)
    code = main(["report", str(tmp_path), "-o", str(tmp_path / "r.html")])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1
    assert "a folder of 2 profiler trace(s)" in err and "roofwise analyze" in err
    assert not (tmp_path / "r.html").exists()


def test_a_compiled_region_says_what_it_is():
    """xDiT's FLUX trace spends 85% of its kernel time in `Torch-Compiled Region: 0/0`,
    recorded with shapes on; the note blamed record_shapes."""
    from roofwise.traces.aten import library_price, make_call

    price = library_price(make_call("Torch-Compiled Region: 0/0", (), (), ()))
    assert price is not None and not price.priced
    assert price.reason.startswith("a torch.compile region: its kernels")


def test_resnet_training_on_mi300x_is_priced(capsys):
    """Batch norm (forward and backward), MIOpen's convolution and max pooling's backward had
    no count: 94% of this ResNet-18 step's kernel time was unpriced."""
    rows, summary = analyze(capsys, "tracelens_mi300x_resnet18_train.json.gz", "-m", "mi300x")
    assert summary["priced_share_of_kernel_time"] > 0.98
    # by hand: batch norm of [512, 64, 112, 112] bf16 reads x once and writes y once
    (bn,) = [r for r in rows if r["op"] == "aten::native_batch_norm"
             and r["shapes"].startswith("[512, 64, 112, 112] bf16")]
    mi300x = builtin_machines()["mi300x"]
    moved = 2 * 2 * 512 * 64 * 112 * 112 + 4 * 64 * 2  # x, y; weight, bias, running stats
    assert bn["sol_time_s"] == pytest.approx(
        bn["count"] * moved / mi300x.dram.effective_bytes_per_s(), rel=1e-9)
    assert bn["verdicts"] == {"below": bn["count"]}
    convolutions = [r for r in rows if r["op"] == "aten::miopen_convolution"]
    assert convolutions and {r["priced_by"] for r in convolutions} == {"library"}
