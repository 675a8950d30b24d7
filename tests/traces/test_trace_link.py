"""Linking kernels to ops under each convention, and pricing recorded ops, on small traces
written here by hand (the numbers are chosen so each expected value is obvious)."""

from __future__ import annotations

import json

import pytest

from roofwise.ledgers.ledger import Role
from roofwise.traces.aten import make_call
from roofwise.traces.build import build_ops
from roofwise.traces.prices import price_call
from roofwise.traces.reader import is_trace, read_trace


def op(name, ts, dur, ext, dims=(), types=(), tid=1):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts,
            "dur": dur, "args": {"External id": ext, "Input Dims": list(dims),
                                 "Input type": list(types)}}


def launch(ts, corr, ext=None, tid=1):
    args = {"correlation": corr}
    if ext is not None:
        args["External id"] = ext
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid,
            "ts": ts, "dur": 2, "args": args}


def kernel(ts, dur, corr=None, name="k"):
    args = {"device": 0}
    if corr is not None:
        args["correlation"] = corr
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": args}


def write(tmp_path, events, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],
                                "traceEvents": events}))
    return path


MM = dict(dims=[[64, 32], [32, 16]], types=["float", "float"])


def test_innermost_enclosing_op_when_calls_carry_no_op_id(tmp_path):
    """Old convention: linear encloses addmm encloses the launch; the kernel is addmm's."""
    events = [op("aten::linear", 0, 100, 1), op("aten::mm", 10, 50, 2, **MM),
              launch(20, corr=500), kernel(200, 8, corr=500),
              launch(80, corr=501), kernel(210, 3, corr=501)]  # after mm ends: linear's
    built = build_ops(read_trace(write(tmp_path, events)))
    by_name = {o.op: o for o in built.ops}
    assert by_name["aten::mm"].kernels == 1 and by_name["aten::mm"].time_s == pytest.approx(8e-6)
    assert by_name["aten::linear"].kernels == 1
    assert by_name["aten::mm"].device == "NVIDIA H200"


def test_external_id_names_the_op_when_it_encloses_the_call(tmp_path):
    """New convention: the call's External id is its op's, even when another op is inside."""
    events = [op("aten::mm", 0, 100, 7, **MM), op("aten::inner", 10, 50, 8),
              launch(20, corr=900, ext=7), kernel(300, 5, corr=900),
              # an External id that is really a correlation number (old traces) is ignored
              launch(30, corr=901, ext=901), kernel(310, 4, corr=901)]
    built = build_ops(read_trace(write(tmp_path, events)))
    by_name = {o.op: o for o in built.ops}
    assert by_name["aten::mm"].time_s == pytest.approx(5e-6)
    assert by_name["aten::inner"].time_s == pytest.approx(4e-6)


def test_ac2g_flow_links_a_kernel_without_correlation(tmp_path):
    flows = [{"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 42, "pid": 1, "tid": 1, "ts": 20},
             {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 42, "pid": 0, "tid": 7, "ts": 400,
              "bp": "e"}]
    events = [op("aten::mm", 0, 100, 1, **MM), launch(20, corr=None), kernel(400, 6), *flows]
    events[1]["args"] = {"correlation": 77}  # the call has one, the kernel does not
    built = build_ops(read_trace(write(tmp_path, events)))
    assert [(o.op, o.kernels) for o in built.ops] == [("aten::mm", 1)]
    assert built.summary.unattributed_time_s == 0


def test_kernels_no_op_launched_are_counted_as_unpriced(tmp_path):
    events = [launch(20, corr=1, tid=99), kernel(100, 9, corr=1), kernel(200, 1)]
    built = build_ops(read_trace(write(tmp_path, events)))
    assert list(built.ops) == []
    assert built.summary.unattributed_time_s == pytest.approx(10e-6)
    assert built.summary.unpriced_time_s == pytest.approx(10e-6)


def test_a_bare_event_array_is_a_trace_and_a_records_file_is_not(tmp_path, examples):
    path = tmp_path / "array.json"
    path.write_text(json.dumps([op("aten::mm", 0, 100, 1, **MM), launch(20, corr=3),
                                kernel(50, 2, corr=3)]))
    assert is_trace(path)
    assert [o.op for o in build_ops(read_trace(path)).ops] == ["aten::mm"]
    assert not is_trace(examples / "records.jsonl")


def test_out_buffer_is_written_not_read():
    """mul(self, other, out): two inputs read, the out= buffer written, once each."""
    price = price_call(make_call("aten::mul", [[512, 256], [], [512, 256]],
                                 ["float", "double", "float"]))
    ledger = price.ledger
    assert ledger is not None and price.source == "class"
    assert ledger.read_bytes == 512 * 256 * 4 + 8
    assert ledger.write_bytes == 512 * 256 * 4
    assert ledger.flops == 512 * 256


def test_in_place_add_reads_and_writes_self_once():
    ledger = price_call(make_call("aten::add_", [[1000], [1000]], ["float", "float"])).ledger
    assert ledger is not None
    assert [t.role for t in ledger.tensors] == [Role.INOUT, Role.INPUT]
    assert ledger.bytes == 3 * 4000


def test_reduction_with_recorded_dims_and_without():
    with_dims = price_call(make_call("aten::sum", [[5, 128], [], [], []],
                                     ["float", "ScalarList", "Scalar", ""],
                                     ["", "[0]", "True", ""]))
    assert with_dims.ledger is not None
    assert with_dims.ledger.write_bytes == 128 * 4 and with_dims.reason == ""
    without = price_call(make_call("aten::sum", [[5, 128], [], [], []],
                                   ["float", "", "Scalar", ""]))
    assert without.ledger is not None and without.ledger.write_bytes == 4
    assert "not recorded" in without.reason


def test_attention_from_sdpa_shapes_is_the_library_ledger():
    from roofwise.ops import attention

    q = [2, 32, 1024, 128]
    kv = [2, 8, 1024, 128]
    price = price_call(make_call("aten::_scaled_dot_product_flash_attention", [q, kv, kv, [],
                                                                               [], [], []],
                                 ["c10::BFloat16"] * 3 + ["Scalar"] * 4,
                                 ["", "", "", "0.0", "True", "False", ""]))
    expected = attention(batch=2, q_len=1024, kv_len=1024, q_heads=32, kv_heads=8,
                         head_dim=128, causal=True, dtype="bf16")
    assert price.ledger is not None
    assert price.ledger.flops == expected.flops and price.ledger.bytes == expected.bytes
    assert price.ledger.roof == "tensor_core.bf16"


def test_convolution_with_recorded_arguments_is_the_library_conv_and_agrees_with_the_tracer():
    """The library conv: 2*N*Cout*H*W*Cin*kh*kw on the bf16 tensor cores plus 1 bias add per
    output; input, weight and bias read once, output written once. The meta-tensor tracer,
    replaying the same call, counts the same contraction."""
    from roofwise.traces.replay import replay_call

    n, c_in, hw, c_out = 8, 64, 56, 128
    dims = [[n, c_in, hw, hw], [c_out, c_in, 3, 3], [c_out], [], [], [], [], [], []]
    types = ["c10::BFloat16"] * 3 + ["", "", "", "Scalar", "", "Scalar"]
    call = make_call("aten::convolution", dims, types,
                     ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"])
    price = price_call(call)
    assert price.source == "library" and price.ledger is not None and price.reason == ""
    contraction = 2 * n * c_out * hw * hw * c_in * 9
    assert price.ledger.ops_by_unit == {"tensor_core.bf16": contraction,
                                        "cuda_core.fp32": n * c_out * hw * hw}
    assert price.ledger.roof == "tensor_core.bf16"
    elements = n * c_in * hw * hw + c_out * c_in * 9 + c_out + n * c_out * hw * hw
    assert price.ledger.bytes == 2 * elements
    replayed = replay_call(call, False)
    assert replayed.ledger is not None
    assert replayed.ledger.ops_by_unit["tensor_core.bf16"] == contraction
    assert replayed.ledger.bytes == price.ledger.bytes
    without = price_call(make_call("aten::convolution", dims, types))  # no stride, padding
    # a stride not recorded could shrink the output many times over: no count is a bound
    assert without.ledger is None and "stride and dilation not recorded" in without.reason


def test_reading_reports_progress_up_to_the_file_size(tmp_path):
    """The progress bar's feed: the file's size first, then bytes read, rising to all of it."""
    import gzip

    events = [op("aten::mm", 20 * i, 10, i, **MM) for i in range(2000)]
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    sizes, done = [], []
    read = read_trace(path, progress=done.append, total=sizes.append)
    assert sizes == [path.stat().st_size] and len(read.ops) == 2000
    assert done == sorted(done) and done[-1] == path.stat().st_size


def test_repeated_names_and_shapes_are_kept_once(tmp_path):
    """Memory: a million calls of a few distinct ops keep one copy of each name and shape
    list (the same object), not one per event; distinct shapes stay distinct."""
    other = dict(dims=[[64, 32], [32, 8]], types=["float", "float"])
    events = [op("aten::mm", 0, 10, 1, **MM), op("aten::mm", 20, 10, 2, **MM),
              op("aten::mm", 40, 10, 3, **other),
              kernel(100, 1, corr=1, name="gemm_k"), kernel(110, 1, corr=2, name="gemm_k")]
    read = read_trace(write(tmp_path, events))
    first, second, third = read.ops
    assert first.dims is second.dims and first.types is second.types
    assert first.name is second.name
    assert third.dims == ((64, 32), (32, 8)) and third.dims is not first.dims
    assert read.gpu[0].name is read.gpu[1].name
