"""Fuzzed profiler traces through `analyze` (table, `--json`, `--records-out`) and `report`:
the contract holds, and what a trace run prints on success is a set of finite, non-negative
times whose shares add up, never a number made from a field that was not a duration.

Traces are drawn two ways: a small synthetic trace with the ops roofwise prices (GEMM,
elementwise, softmax, norms, attention, views, a collective, a memcpy), and the small real
traces under tests/fixtures/traces; then fields are set to what the format never gives them,
events are dropped, doubled or replaced, keys are repeated, names carry control characters,
and the text is written with a BOM, CR or CRLF whitespace, or gzipped."""

from __future__ import annotations

import copy
import gzip
import json
import math
from pathlib import Path
from typing import Any

from fuzzkit import NASTY_TEXT, examples, names, out_lines, run_cli
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "traces"
REAL = tuple(json.loads(gzip.decompress((FIXTURES / name).read_bytes()))
             for name in ("hta_triton_example.json.gz", "hta_mi250_minitoy_train.json.gz"))


def _op(name: str, ext: int, ts: int, dims: list, types: list, concrete: list | None = None
        ) -> dict[str, Any]:
    args: dict[str, Any] = {"External id": ext, "Input Dims": dims, "Input type": types}
    if concrete is not None:
        args["Concrete Inputs"] = concrete
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 30,
            "args": args}


def _launch(ext: int, corr: int, ts: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
            "ts": ts + 2, "dur": 2, "args": {"correlation": corr, "External id": ext}}


def _kernel(name: str, corr: int, ts: int, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts + 100,
            "dur": dur, "args": {"device": 0, "stream": 7, "correlation": corr,
                                 "grid": [1, 1, 1], "block": [128, 1, 1]}}


BF = ["c10::BFloat16"]
OPS: tuple[tuple[str, list, list, list | None, str], ...] = (
    ("aten::mm", [[64, 32], [32, 16]], ["float", "float"], None, "gemm"),
    ("aten::add", [[1, 64, 16], [1, 64, 16], []], [*BF, *BF, "Scalar"], ["", "", "1"], "add"),
    ("aten::softmax", [[4, 0, 8], [], []], [*BF, "Scalar", "ScalarType"], ["", "-1", ""],
     "softmax"),
    ("aten::linalg_vector_norm", [[8, 64], [], [], [], []], ["float", "Scalar", "", "Scalar", ""],
     ["", "2.", "[-1]", "True", ""], "norm"),
    ("aten::_scaled_dot_product_flash_attention", [[1, 8, 128, 64]] * 3 + [[], [], [], []],
     [*BF, *BF, *BF, "Scalar", "Scalar", "Scalar", ""], ["", "", "", "0.", "True", "False", ""],
     "flash_fwd_kernel"),
    ("aten::unbind", [[3, 4, 8], []], ["float", "Scalar"], ["", "0"], "unbind"),
    ("nccl:all_reduce", [[1024]], ["float"], None, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
    ("aten::copy_", [[64, 16], [64, 16], []], ["float", "float", "Scalar"], None,
     "Memcpy DtoD (Device -> Device)"),
)


def synthetic(kernel_us: list[float]) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    for k, ((name, dims, types, concrete, kernel), dur) in enumerate(
            zip(OPS, kernel_us, strict=True)):
        ts = 100 * k
        events += [_op(name, k + 1, ts, dims, types, concrete), _launch(k + 1, 500 + k, ts),
                   _kernel(kernel, 500 + k, ts, dur)]
        if name == "aten::add":  # its second operand expanded (stride 0), as PyTorch 2 records
            events[-3]["args"]["Input Strides"] = [[1024, 16, 1], [0, 0, 1], []]
    events[-1]["cat"] = "gpu_memcpy"
    return {"deviceProperties": [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150 << 30}],
            "traceEvents": events}


# what the format never puts in a field, and numbers at the edge of what it does
ODD_VALUES = (None, True, False, "abc", "", "NaN", "Infinity", "-1", "2.", -5, -1e-3, 0, 1e308,
              2**63, 2**64 + 1, 10**30, [1], [], {"a": 1}, {}, [[[[1]]]], "\x1b[31mred",
              "\u202e\ufeff", [[64, 32], "x"], [[-1, 8]], [[2**40, 2**40]], [[0, 0]])


def values() -> st.SearchStrategy[Any]:
    return st.one_of(st.sampled_from(ODD_VALUES), st.sampled_from(NASTY_TEXT), names(),
                     st.integers(-10**20, 10**20), st.floats(allow_nan=True))


def _paths(event: Any) -> list[tuple[str, ...]]:
    if not isinstance(event, dict):
        return []
    out = [(key,) for key in event]
    if isinstance(event.get("args"), dict):
        out += [("args", key) for key in event["args"]]
    return out


@st.composite
def traces(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.integers(0, 3)) == 0:
        doc = copy.deepcopy(draw(st.sampled_from(REAL)))
    else:
        doc = synthetic(draw(st.lists(st.floats(0.5, 500), min_size=len(OPS),
                                      max_size=len(OPS))))
    events = doc["traceEvents"]
    for _ in range(draw(st.integers(0, 4))):
        if not events:
            break
        k = draw(st.integers(0, len(events) - 1))
        how = draw(st.sampled_from(("field", "field", "field", "name", "drop", "double",
                                    "replace", "add_key")))
        if how == "field" and _paths(events[k]):
            path = draw(st.sampled_from(_paths(events[k])))
            node = events[k] if len(path) == 1 else events[k]["args"]
            node[path[-1]] = draw(values())
        elif how == "name" and isinstance(events[k], dict):
            events[k]["name"] = draw(st.one_of(names(), st.sampled_from(NASTY_TEXT)))
        elif how == "drop":
            del events[k]
        elif how == "double":
            events.insert(k, copy.deepcopy(events[k]))
        elif how == "replace":
            events[k] = draw(st.sampled_from((None, 1, "x", [], [1, 2], True)))
        elif isinstance(events[k], dict):
            events[k][draw(st.sampled_from(("dur", "ts", "args", "cat", "bogus")))] = draw(
                values())
    if draw(st.integers(0, 19)) == 0:
        doc["traceEvents"] = draw(st.sampled_from(({}, "x", None, 5)))
    if draw(st.integers(0, 9)) == 0:
        doc["deviceProperties"] = draw(st.sampled_from(
            ([], [{"id": [0], "name": "NVIDIA H200"}], {"id": 0}, [{"name": "\x1b[2J"}], None,
             [{"id": 0, "name": "Tesla V100-SXM2-32GB"}], [{"id": 0, "name": "AMD MI250X"}],
             # unnamed, as ROCm 7 writes it: told from its properties, or a near miss
             [{"id": 0, "name": "", "computeMajor": 9, "computeMinor": 4, "numSms": 304,
               "warpSize": 64, "totalGlobalMem": 206141652992}],
             [{"id": 0, "name": "", "computeMajor": True, "computeMinor": 4.0,
               "numSms": [304], "warpSize": None, "totalGlobalMem": -1}])))
    return doc


def _dumps(value: Any) -> str:
    """JSON as profilers write it, but with integers beyond 4,300 digits left out."""
    return json.dumps(value, allow_nan=True)


@st.composite
def trace_bytes(draw: st.DrawFn) -> bytes:
    text = _dumps(draw(traces()))
    if draw(st.integers(0, 5)) == 0:  # a repeated key: the reader sees the last value
        field = draw(st.sampled_from(('"dur": ', '"name": ', '"args": ', '"ts": ')))
        text = text.replace(field, field + _dumps(draw(values())) + ", " + field, 1)
    ending = draw(st.sampled_from(("", "", "\r", "\r\n", "\n")))
    if ending:
        text = text.replace(", ", "," + ending)
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 9)) == 0:
        data = b"\xef\xbb\xbf" + data
    if draw(st.integers(0, 14)) == 0:
        data = data[:draw(st.integers(0, len(data)))]
    if draw(st.booleans()):
        data = gzip.compress(data, compresslevel=1)
    return data


def check_trace_json(lines: list[str]) -> None:
    """Every time printed is finite and non-negative; shares are shares."""
    rows = [json.loads(line) for line in lines]
    summary = rows[-1]
    assert summary["op"] == "summary", summary
    for row in rows:
        for key, value in row.items():
            if key.endswith("_s") and value is not None:
                assert isinstance(value, (int, float)) and math.isfinite(value) and value >= 0, (
                    key, value, row)
    for row in rows[:-1]:
        assert isinstance(row["count"], int) and row["count"] >= 1, row
        assert 0 <= row["share_of_gpu_time"] <= 1 + 1e-9, row
        if row["efficiency"] is not None:
            assert math.isfinite(row["efficiency"]) and row["efficiency"] >= 0, row
    share = summary["priced_share_of_kernel_time"]
    assert share is None or 0 <= share <= 1 + 1e-9, summary
    assert summary["kernels"] >= 0 and summary["skipped_events"] >= 0, summary


@examples(70)
@given(data=trace_bytes(), gz=st.booleans())
def test_traces(tmp_path, data, gz):
    path = tmp_path / ("t.json.gz" if data[:2] == b"\x1f\x8b" else "t.json")
    path.write_bytes(data)
    run = run_cli("analyze", path, "--json", count="analyze trace --json")
    if run.code == 0:
        check_trace_json(out_lines(run))
    table = run_cli("analyze", path, count="analyze trace table")
    assert table.code == run.code, (table.code, run.code, table.err)
    assert "\x1b" not in table.out and "\x1b" not in table.err, "a raw escape reached the terminal"
    if gz:
        out = tmp_path / "derived.jsonl"
        written = run_cli("analyze", path, "--records-out", out, count="analyze trace records")
        assert written.code == run.code
        if written.code == 0 and out.stat().st_size:
            # what roofwise writes, roofwise reads back without a bad line
            back = run_cli("analyze", out, "--strict", "--json", count="records read back")
            assert back.code == 0, back.err
    else:
        report = tmp_path / "r.html"
        done = run_cli("report", path, "-o", report, count="report trace")
        # a report needs one priced op: a trace analyze reads may still have nothing to show
        assert done.code == run.code or (run.code == 0 and done.code == 2), done.err
        if done.code == 0:
            html = report.read_text(encoding="utf-8")
            assert "\x1b" not in html and "<script>alert" not in html
