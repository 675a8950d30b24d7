"""Collectives are communication, priced on the interconnect (issue 21, item 5).

Every pattern of the registry is tested on the real name it was written for, and compute
kernels and aten ops on none. The bounds are recomputed here by hand from the recorded message
(bytes a GPU must at least move one way) and the profile's datasheet link rate.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from roofwise.cli import main
from roofwise.profiles.load import builtin_machines
from roofwise.traces import collectives as c

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
H100 = "NVIDIA H100 80GB HBM3"  # an alias of h100-sxm: NVLink 4, 900 GB/s both ways
ONE_WAY = 450e9
US = 1e-6
FLOOR_S = 3e-6 + 1e-6  # h100-sxm's assumed kernel floor for one kernel, plus one NVLink hop

COMPUTE_KERNELS = [
    "ampere_sgemm_128x64_nn",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
    "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>>>>",
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>",
    "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>",
    "void (anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>",
    "void at::native::index_elementwise_kernel<128, 4>",
]
COMPUTE_OPS = ["aten::mm", "aten::all", "aten::sum", "aten::copy_", "aten::reduce_scatter",
               "triton_poi_fused_add_0", "vllm::unified_attention", "ProfilerStep#3"]


@pytest.mark.parametrize("pattern", c.KERNEL_PATTERNS, ids=lambda p: p.family)
def test_every_kernel_pattern_matches_its_real_name(pattern):
    assert pattern.regex.search(pattern.example)
    assert c.is_collective_kernel(pattern.example)


@pytest.mark.parametrize("pattern", c.OP_PATTERNS, ids=lambda p: p.family)
def test_every_op_pattern_matches_its_real_name(pattern):
    assert pattern.regex.search(pattern.example)
    assert c.is_collective_op(pattern.example)


@pytest.mark.parametrize("name", [
    "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
    "void rcclGenericKernel<1, false>(ncclDevComm*, unsigned long, ncclWork*)",
    "void c10d::symmetric_memory::multimem_one_shot_all_reduce_kernel<float, 16, 8>(...)",
    "void c10d::symmetric_memory::one_shot_all_reduce_kernel<c10::BFloat16, 16, 8>(...)",
    "void vllm::cross_device_reduce_2stage<__nv_bfloat16, 8>(...)",
    "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<...>",
    "void tensorrt_llm::kernels::twoShotAllReduceKernel<half, 8>(...)",
])
def test_more_real_collective_kernels(name):
    assert c.is_collective_kernel(name)


@pytest.mark.parametrize("name", ["c10d::_allgather_base_", "c10d::broadcast_",
                                  "c10d_functional::all_gather_into_tensor",
                                  "_c10d_functional::reduce_scatter_tensor",
                                  "symm_mem::two_shot_all_reduce_", "nccl:all_reduce",
                                  "vllm::all_reduce", "trtllm::allreduce",
                                  "sgl_kernel::all_reduce", "_C_custom_ar::all_reduce"])
def test_more_real_collective_ops(name):
    assert c.is_collective_op(name)


@pytest.mark.parametrize("name", COMPUTE_KERNELS)
def test_compute_kernels_are_not_collectives(name):
    assert not c.is_collective_kernel(name)


@pytest.mark.parametrize("name", COMPUTE_OPS)
def test_aten_and_compute_ops_are_not_collectives(name):
    assert not c.is_collective_op(name)


def test_wire_bytes_are_the_least_any_algorithm_moves():
    m = 1 << 20
    assert c.Message(c.ALL_REDUCE, m, m, 8, "").wire_bytes()[0] == m
    assert c.Message(c.ALL_GATHER, m, 8 * m, None, "").wire_bytes()[0] == 7 * m
    assert c.Message(c.ALL_GATHER, m, None, 4, "").wire_bytes()[0] == 3 * m
    assert c.Message(c.REDUCE_SCATTER, 8 * m, m, None, "").wire_bytes()[0] == 7 * m
    assert c.Message(c.ALL_TO_ALL, 8 * m, None, 8, "").wire_bytes()[0] == 7 * m
    none, why = c.Message(c.ALL_TO_ALL, 8 * m, None, None, "").wire_bytes()
    assert none is None and "not recorded" in why
    none, why = c.Message(c.ALL_REDUCE, m, m, 1, "").wire_bytes()
    assert none is None and "one rank" in why
    assert c.Message(c.OTHER, m, m, 2, "").wire_bytes()[0] is None


def test_message_from_kernel_args_and_from_op_shapes():
    recorded = c.kernel_message({"Collective name": "allreduce", "In msg nelems": 2049000,
                                 "Out msg nelems": 2049000, "Group size": 2, "dtype": "Float"})
    msg = c.message_of("c10d::allreduce_", (), (), recorded)
    assert (msg.kind, msg.in_bytes, msg.group_size) == (c.ALL_REDUCE, 2049000 * 4, 2)
    assert c.kernel_message({"Collective name": ["x"]}) is None
    assert c.kernel_message({"Collective name": "allreduce", "In msg nelems": "many"})[1] is None
    msg = c.message_of("symm_mem::multimem_all_reduce_", ([16, 4096], [], []),
                       ("c10::BFloat16", "", ""), None)
    assert (msg.kind, msg.in_bytes, msg.group_size) == (c.ALL_REDUCE, 16 * 4096 * 2, None)
    msg = c.message_of("c10d::_allgather_base_", ([65536, 64], [8192, 64], []),
                       ("float", "float", ""), None)
    assert (msg.in_bytes, msg.out_bytes) == (8192 * 64 * 4, 65536 * 64 * 4)
    msg = c.message_of("c10d::_reduce_scatter_base_", ([8192, 384], [65536, 384]),
                       ("float", "float"), None)
    assert (msg.in_bytes, msg.out_bytes) == (65536 * 384 * 4, 8192 * 384 * 4)
    # NCCL's SendRecv kernel runs all-to-alls too: its kernel name does not say which
    assert c.message_of("record_param_comms", ([3145728],), ("float",), None,
                        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t").kind == c.OTHER


# --- whole traces ---------------------------------------------------------------------------

def _op(name, ts, dur, ext, dims=(), types=()):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": {"External id": ext, "Input Dims": list(dims), "Input type": list(types)}}


def _launch(ts, corr, ext):
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
            "ts": ts, "dur": 2, "args": {"correlation": corr, "External id": ext}}


def _kernel(name, ts, dur, corr, stream=7, **more):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts,
            "dur": dur, "args": {"device": 0, "correlation": corr, "stream": stream, **more}}


def write_trace(tmp_path: Path, events, device: str, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"deviceProperties": [{"id": 0, "name": device}],
                                "traceEvents": events}))
    return path


def tp_step(ar_us: float) -> list:
    """A tensor-parallel step as vLLM records it: an mm (80 us), the symmetric-memory
    all-reduce of its [16, 4096] bf16 output (`ar_us`), a custom all-reduce whose kernel
    name says nothing (5 us), and an add (2 us)."""
    return [
        _op("aten::mm", 0, 20, 1, [[16, 4096], [4096, 4096]], ["c10::BFloat16"] * 2),
        _launch(5, 100, 1), _kernel("sm90_xmma_gemm_bf16bf16", 100, 80, 100),
        _op("symm_mem::multimem_all_reduce_", 30, 20, 2, [[16, 4096], [], []],
            ["c10::BFloat16", "", ""]),
        _launch(35, 101, 2),
        _kernel("void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, 8>",
                200, ar_us, 101),
        _op("_C_custom_ar::all_reduce", 60, 10, 3, [[], [16, 4096], [16, 4096], [], []],
            ["int", "c10::BFloat16", "c10::BFloat16", "int", "int"]),
        _launch(62, 102, 3), _kernel("void unnamed_kernel<8>", 400, 5, 102),
        _op("aten::add", 80, 10, 4, [[16, 4096], [16, 4096]], ["c10::BFloat16"] * 2),
        _launch(82, 103, 4), _kernel("vectorized_elementwise_kernel", 500, 2, 103),
    ]


def analyze_json(capsys, path: Path, *more) -> list[dict]:
    code = main(["analyze", str(path), "--json", *more])
    out, err = capsys.readouterr()
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def test_the_symmetric_memory_all_reduce_is_communication_not_a_custom_op(capsys, tmp_path):
    """The B200 vLLM case: the all-reduce's time is communication, not unpriced custom time;
    B200's profile has no interconnect figure, so it is blank with that reason."""
    rows = analyze_json(capsys, write_trace(tmp_path, tp_step(25), "NVIDIA B200"))
    summary = rows[-1]
    assert summary["communication_time_s"] == pytest.approx((25 + 5) * 1e-6)
    assert summary["unpriced_time_s"] == pytest.approx(0)  # mm and add priced
    ar = next(r for r in rows if r["op"] == "symm_mem::multimem_all_reduce_")
    assert ar["verdicts"] == {"blank": 1}
    assert "no interconnect" in ar["reason"] and "not an aten op" not in ar["reason"]
    assert builtin_machines()["b200"].interconnect is None


@pytest.mark.parametrize("ar_us, verdict", [(25, "below"), (4, "latency_bound")])
def test_an_all_reduce_is_priced_on_nvlink(capsys, tmp_path, ar_us, verdict):
    rows = analyze_json(capsys, write_trace(tmp_path, tp_step(ar_us), H100))
    ar = next(r for r in rows if r["op"] == "symm_mem::multimem_all_reduce_")
    sol = 16 * 4096 * 2 / ONE_WAY
    assert ar["sol_time_s"] == pytest.approx(sol)
    assert ar["priced_by"] == "interconnect" and ar["verdicts"] == {verdict: 1}
    assert ar["efficiency"] == pytest.approx(sol / (ar_us * 1e-6))
    assert (0.5 * ar_us * 1e-6 <= FLOOR_S) == (verdict == "latency_bound")
    custom = next(r for r in rows if r["op"] == "_C_custom_ar::all_reduce")
    assert custom["sol_time_s"] == pytest.approx(sol)  # its first tensor argument


def _nccl_trace(tmp_path: Path, dur_us: float, group: int) -> Path:
    return write_trace(tmp_path, [
        _op("c10d::allreduce_", 0, 50, 1, [[], [], [], []], ["TensorList", "", "", "Scalar"]),
        _launch(5, 100, 1),
        _kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, "
                "ncclWork*)", 100, dur_us, 100, **{
                    "Collective name": "allreduce", "In msg nelems": 2049000,
                    "Out msg nelems": 2049000, "Group size": group, "dtype": "Float"}),
    ], H100)


def test_a_time_below_the_link_on_a_known_group_is_impossible(capsys, tmp_path):
    sol = 2049000 * 4 / ONE_WAY  # 18.2 us
    rows = analyze_json(capsys, _nccl_trace(tmp_path, 2636.669, 2))
    assert rows[0]["sol_time_s"] == pytest.approx(sol) and rows[0]["verdicts"] == {"below": 1}
    rows = analyze_json(capsys, _nccl_trace(tmp_path, 10, 2))
    assert rows[0]["verdicts"] == {"impossible": 1}
    rows = analyze_json(capsys, _nccl_trace(tmp_path, 10, 1))  # a group of one moves nothing
    assert rows[0]["verdicts"] == {"blank": 1} and "one rank" in rows[0]["reason"]


def test_real_a100_trace_all_gathers_priced_from_their_shapes(capsys):
    """HTA's 16-rank A100 trace: the c10d all-gathers' bounds equal (out - in) bytes over
    NVLink (recounted from the raw events), and the NCCL time is all communication."""
    path = TRACES / "hta_a100_80gb_rank0.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    rows = analyze_json(capsys, path, "-m", "h100-sxm")
    nccl_us = sum(e["dur"] for e in raw if e.get("cat") == "kernel"
                  and e["name"].startswith("ncclKernel"))
    assert rows[-1]["communication_time_s"] == pytest.approx(nccl_us * 1e-6)
    gathers = [r for r in rows if r["op"] == "c10d::_allgather_base_"]
    assert gathers
    for r in gathers:
        out_dims, in_dims = next(e["args"]["Input Dims"][:2] for e in raw
                                 if e.get("name") == "c10d::_allgather_base_"
                                 and _shapes(e) == r["shapes"])
        wire = 4 * (out_dims[0] * out_dims[1] - in_dims[0] * in_dims[1])
        assert r["sol_time_s"] == pytest.approx(r["count"] * wire / ONE_WAY)
        assert "impossible" not in r["verdicts"]


def _shapes(e: dict) -> str:
    dims, types = e["args"]["Input Dims"], e["args"]["Input type"]
    return ", ".join(f"{d} fp32" for d, t in zip(dims, types, strict=True) if t == "float")


def test_real_nccl_kernels_priced_from_their_recorded_messages(capsys):
    """HTA's NCCL trace (rank 0 of 2, A100): every all-reduce and broadcast group's bound is
    its kernels' recorded elements x 4 B (fp32) or 8 B (int64) over NVLink's one way, recounted
    from the raw kernel args; the NCCL kernel time is all communication."""
    path = TRACES / "hta_nccl_a100_rank0.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    nccl = [e for e in raw if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
    rows = analyze_json(capsys, path, "-m", "h100-sxm")
    assert rows[-1]["communication_time_s"] == pytest.approx(sum(e["dur"] for e in nccl) * US)
    size = {"Float": 4, "Long": 8}
    expected: dict[str, float] = {}
    for e in nccl:
        a = e["args"]
        label = (f"{a['Collective name']} {a['In msg nelems']} x {a['dtype']}, group of "
                 f"{a['Group size']}")
        expected[label] = expected.get(label, 0.0) + a["In msg nelems"] * size[a["dtype"]]
    comms = {r["shapes"]: r for r in rows if r.get("priced_by") == "interconnect"}
    assert set(comms) == set(expected)
    for label, wire in expected.items():
        assert comms[label]["sol_time_s"] == pytest.approx(wire / ONE_WAY)
        assert "impossible" not in comms[label]["verdicts"]
    assert comms["broadcast 53 x Long, group of 2"]["verdicts"] == {"latency_bound": 3}


def test_a_call_that_launched_a_collective_is_its_own_group(capsys, tmp_path):
    """Two calls of one op with the same shapes, one of which launched an NCCL kernel (a
    custom op that all-reduces on some steps): two groups, one communication (its 30 us) and
    one priced on the roofline (its 2 us); before, they were one group and the command ended
    in a KeyError."""
    dims, types = [[16, 4096], [16, 4096]], ["c10::BFloat16"] * 2
    rows = analyze_json(capsys, write_trace(tmp_path, [
        _op("aten::add_", 0, 10, 1, dims, types), _launch(2, 100, 1),
        _kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, "
                "ncclWork*)", 100, 30, 100),
        _op("aten::add_", 20, 10, 2, dims, types), _launch(22, 101, 2),
        _kernel("vectorized_elementwise_kernel", 200, 2, 101)], H100))
    adds = sorted((r for r in rows if r["op"] == "aten::add_"), key=lambda r: r["time_s"])
    assert [(r["count"], r["time_s"]) for r in adds] == [(1, pytest.approx(2e-6)),
                                                         (1, pytest.approx(30e-6))]
    assert adds[0]["priced_by"] == "class" and adds[1]["priced_by"] == "interconnect"
    assert rows[-1]["communication_time_s"] == pytest.approx(30e-6)
