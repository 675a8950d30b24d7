"""Inputs read through stride 0: an `expand`ed tensor (a broadcast gradient, a repeated
index) is read once per distinct element, not once per element of its shape. PyTorch 2.x
traces record `Input Strides`; without them the shape is all roofwise has (an upper count).

On the real MI300X ResNet-18 training trace (TraceLens, MIT), average pooling's backward
divides a gradient expanded from [512, 512, 1, 1] to [512, 512, 7, 7] (strides [512, 1, 0, 0]):
by its shape it read 25.7 MB, in memory 0.5 MB, so its efficiency read twice the truth.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from roofwise.cli import main
from roofwise.profiles.load import builtin_machines
from roofwise.traces.aten import library_price, make_call
from roofwise.traces.schemas import TensorArg

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def analyze_rows(capsys, path):
    code = main(["analyze", str(path), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()][:-1]  # the last: the summary


def test_read_shape_counts_a_stride_0_dimension_once():
    assert TensorArg((512, 512, 7, 7), "c10::BFloat16", (512, 1, 0, 0)).read_shape == (
        512, 512, 1, 1)
    assert TensorArg((4, 8), "float", (8, 1)).read_shape == (4, 8)
    assert TensorArg((4, 8), "float").read_shape == (4, 8)  # no strides recorded
    assert TensorArg((4, 8), "float", (0,)).read_shape == (4, 8)  # strides that do not fit


def test_an_expanded_operand_is_read_once_per_distinct_element():
    bf16 = "c10::BFloat16"
    call = make_call("aten::add", [[4096, 4096], [4096, 4096], []], [bf16, bf16, "Scalar"],
                     ["", "", "1"], [[4096, 1], [0, 1], []])
    price = library_price(call)
    assert price.ledger is not None
    assert price.ledger.read_bytes == 2 * (4096 * 4096 + 4096)  # the row once, not 4096 times
    assert price.ledger.write_bytes == 2 * 4096 * 4096
    # the work is per output element, whatever was read
    assert sum(w.ops for w in price.ledger.work) == 4096 * 4096
    # strides that are not sizes (negative, text, too many) are no strides: the shape counts
    for bad in ([[4096, 1], [-1, 1], []], [[4096, 1], "x", []], [[4096, 1], [0, 1, 1], []]):
        odd = library_price(make_call(call.name, [[4096, 4096], [4096, 4096], []],
                                      [bf16, bf16, "Scalar"], ["", "", "1"], bad))
        assert odd.ledger is not None and odd.ledger.read_bytes == 2 * 2 * 4096 * 4096


def _recorded(name, dims, types):
    """The first event of the fixture with this op, dims and types, read by json alone."""
    doc = json.loads(gzip.decompress((TRACES / "tracelens_mi300x_resnet18_train.json.gz")
                                     .read_bytes()))
    for e in doc["traceEvents"]:
        args = e.get("args", {})
        if e.get("name") == name and args.get("Input Dims") == dims and args.get(
                "Input type") == types:
            return args
    raise AssertionError((name, dims, types))


def test_pooling_backward_divide_on_mi300x_reads_its_expanded_gradient_once(capsys):
    # div.Tensor by a 0-dim int64 tensor (the trace also holds div.Scalar by 49)
    args = _recorded("aten::div", [[512, 512, 7, 7], []], ["c10::BFloat16", "long int"])
    assert args["Input Strides"][0] == [512, 1, 0, 0]
    price = library_price(make_call("aten::div", args["Input Dims"], args["Input type"],
                                    args.get("Concrete Inputs", ()), args["Input Strides"]))
    # read once per channel, written in full; the divisor is a 0-dim int64 tensor
    moved = 2 * 512 * 512 + 2 * 512 * 512 * 49 + 8
    assert price.ledger is not None
    assert price.ledger.read_bytes + price.ledger.write_bytes == moved
    rows = analyze_rows(capsys, TRACES / "tracelens_mi300x_resnet18_train.json.gz")
    (div,) = [r for r in rows if r["op"] == "aten::div"
              and r["shapes"] == "[512, 512, 7, 7] bf16, [] int64"]
    mi300x = builtin_machines()["mi300x"]
    assert div["sol_time_s"] == pytest.approx(
        div["count"] * moved / mi300x.dram.effective_bytes_per_s(), rel=1e-9)
    # 0.61 by its shape: half of what it moved was never in memory
    assert 0.25 < div["efficiency"] < 0.4


def test_an_embedding_gather_by_an_expanded_index_is_possible_on_mi300x(capsys):
    """SGLang's Qwen3-8B on MI300X (TraceLens, MIT) looks its 15,360 tokens up with a gather
    whose int64 index is one column expanded over the hidden size (strides [1, 0]). Priced
    by the index's shape it read 503 MB and ran at 215% of SOL, "impossible"; it reads 123 kB
    of index, 126 MB of rows and writes 126 MB: 72% of SOL."""
    rows = analyze_rows(capsys, TRACES / "tracelens_mi300x_sglang_qwen3_8b_prefill_decode.json.gz")
    (gather,) = [r for r in rows if r["op"] == "aten::gather"]
    assert gather["shapes"] == "[151936, 4096] bf16, [15360, 4096] int64, [15360, 4096] bf16"
    moved = 15360 * 8 + 2 * (15360 * 4096 * 2)
    mi300x = builtin_machines()["mi300x"]
    assert gather["sol_time_s"] == pytest.approx(moved / mi300x.dram.effective_bytes_per_s(),
                                                 rel=1e-9)
    assert gather["verdicts"] == {"below": 1}
    assert gather["efficiency"] == pytest.approx(gather["sol_time_s"] / gather["time_s"])
    assert 0.7 < gather["efficiency"] < 0.75


def test_a_gemm_reads_an_expanded_operand_once():
    """bmm of [8, 512, 256] by one [256, 1024] matrix expanded over the batch (strides
    [0, 1024, 1]): the kernel reads 8 x 512 x 256 + 256 x 1024 elements and writes
    8 x 512 x 1024, bf16; the FLOPs stay 2 x 8 x 512 x 1024 x 256."""
    bf16 = "c10::BFloat16"
    call = make_call("aten::bmm", [[8, 512, 256], [8, 256, 1024]], [bf16, bf16], ["", ""],
                     [[131072, 256, 1], [0, 1024, 1]])
    price = library_price(call)
    assert price.ledger is not None
    assert price.ledger.read_bytes == 2 * (8 * 512 * 256 + 256 * 1024)
    assert price.ledger.write_bytes == 2 * 8 * 512 * 1024
    assert price.ledger.flops == 2 * 8 * 512 * 1024 * 256
    # an mm whose first operand is one row expanded over 4096 rows, and an addmm alike
    row = library_price(make_call("aten::mm", [[4096, 1024], [1024, 1024]], [bf16, bf16],
                                  ["", ""], [[0, 1], [1024, 1]]))
    assert row.ledger is not None
    assert row.ledger.read_bytes == 2 * (1024 + 1024 * 1024)
    addmm = library_price(make_call("aten::addmm", [[1024], [4096, 1024], [1024, 1024], [], []],
                                    [bf16, bf16, bf16, "Scalar", "Scalar"], ["", "", "", "1", "1"],
                                    [[1], [0, 1], [1024, 1], [], []]))
    assert addmm.ledger is not None
    assert addmm.ledger.read_bytes == 2 * (1024 + 1024 * 1024 + 1024)  # row, weight, bias
    # the same calls without strides count every element of the shapes
    plain = library_price(make_call("aten::bmm", [[8, 512, 256], [8, 256, 1024]], [bf16, bf16],
                                    ["", ""]))
    assert plain.ledger is not None
    assert plain.ledger.read_bytes == 2 * (8 * 512 * 256 + 8 * 256 * 1024)


def test_the_meta_tensor_replay_reads_an_expanded_input_once():
    """An op priced by replaying it on meta tensors: the expanded operand is built as an
    expanded view (stride 0), so the tracer counts the row once, as the library does."""
    pytest.importorskip("torch")
    from roofwise.traces.replay import replay_call

    bf16 = "c10::BFloat16"
    expanded = replay_call(make_call("aten::add", [[4096, 4096], [4096, 4096], []],
                                     [bf16, bf16, "Scalar"], ["", "", "1"],
                                     [[4096, 1], [0, 1], []]))
    assert expanded.source == "tracer" and expanded.ledger is not None
    assert expanded.ledger.read_bytes == 2 * (4096 * 4096 + 4096)
    assert expanded.ledger.write_bytes == 2 * 4096 * 4096
    whole = replay_call(make_call("aten::add", [[4096, 4096], [4096, 4096], []],
                                  [bf16, bf16, "Scalar"], ["", "", "1"]))
    assert whole.ledger is not None and whole.ledger.read_bytes == 2 * 2 * 4096 * 4096
