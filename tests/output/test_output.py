"""Verdicts written by the engine's writer: the same fields and values as `Analysis.row`."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

import roofwise
from roofwise.output.analysis import analyze
from roofwise.output.frame import json_lines, write_csv, write_json_lines
from roofwise.profiles.load import builtin_machines
from roofwise.records.read import read_records
from roofwise.records.write import write_records

ROWS = [
    {"op": "a", "flops": 10, "bytes": 20, "roof": "cuda_core.fp32", "time_s": 1e-6,
     "flops_by_unit": {"cuda_core.fp32": 8, "sfu.fp32": 2}, "workload": {"n": 4},
     "device": "H200"},
    {"op": "b", "flops": 4e9, "bytes": 8e6, "roof": "tensor_core.bf16", "time_s": 2e-3,
     "device": "NVIDIA H200", "read_bytes": 6e6, "write_bytes": 2e6, "timing": "wall",
     "kernels": 3},
    {"op": "c", "flops": 1e6, "bytes": 1e9, "roof": "cuda_core.fp32", "time_s": 1e-6,
     "device": "H200", "note": "impossible: 1 PB/s"},
    {"op": "d", "flops": 1e6, "bytes": 1e6, "roof": "cuda_core.fp32", "time_s": 1e-3,
     "device": "tpu-v9"},
]


def _same(a, b):
    assert list(a) == list(b) or set(a) == set(b)
    for key, value in a.items():
        other = b[key]
        if isinstance(value, float) and isinstance(other, float):
            assert value == pytest.approx(other, rel=1e-15) or (math.isnan(value)
                                                                 and math.isnan(other)), key
        else:
            assert value == other, key


@pytest.mark.parametrize("suffix", ["jsonl", "csv", "parquet"])
def test_json_lines_hold_what_analysis_row_holds(tmp_path, suffix):
    path = tmp_path / f"r.{suffix}"
    write_records(path, ROWS)
    analysis = analyze(read_records(path).columns, builtin_machines())
    written = [json.loads(line) for line in json_lines(analysis)]
    assert [w["verdict"] for w in written] == ["latency_bound", "below", "impossible", "blank"]
    for i, row in enumerate(written):
        _same(row, analysis.row(i))
    assert written[3]["machine"] is None and written[3]["efficiency"] is None
    assert written[2]["efficiency"] is None and written[2]["sol_time_s"] > 0
    assert "read_bytes" not in written[0] and written[1]["read_bytes"] == 6e6


@pytest.mark.parametrize("complete", [True, False])
def test_the_writer_writes_the_lines_json_lines_builds(tmp_path, complete):
    """Where every row has every field (one with JSON text among them), the engine's CSV
    writer joins the pieces of each line; else they are joined first. Both write the lines
    `json_lines` builds, each the row's object."""
    rows = [{"workload": {"n": k, "shape": [k, 2]}, "op": f"op{k}", "flops": 1e9 * (k + 1),
             "bytes": 1e6, "roof": "cuda_core.fp32", "time_s": 1e-3, "device": "H200"}
            for k in range(5)]
    if not complete:
        del rows[2]["device"], rows[3]["workload"]
    path = tmp_path / "r.jsonl"
    write_records(path, rows)
    analysis = analyze(read_records(path).columns, builtin_machines())
    into_bytes = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    write_json_lines(analysis, into_bytes)
    into_bytes.flush()
    into_text = io.StringIO()
    write_json_lines(analysis, into_text)
    lines = list(json_lines(analysis))
    assert into_bytes.buffer.getvalue().decode().splitlines() == lines
    assert into_text.getvalue().splitlines() == lines
    written = [json.loads(line) for line in lines]
    assert [w["workload"] for w in written if "workload" in w] == [
        r["workload"] for r in rows if "workload" in r]
    assert ["device" in w for w in written] == ["device" in r for r in rows]
    for i, row in enumerate(written):
        _same(row, analysis.row(i))


def test_the_example_file_verbatim(examples):
    analysis = analyze(read_records(examples / "records.jsonl").columns, builtin_machines())
    for i, line in enumerate(json_lines(analysis)):
        assert json.loads(line) == analysis.row(i)


def test_csv_holds_the_same_cells(tmp_path):
    path = tmp_path / "r.jsonl"
    write_records(path, ROWS)
    analysis = analyze(read_records(path).columns, builtin_machines())
    out = io.StringIO()
    write_csv(analysis, out)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert len(rows) == 4
    for i, cells in enumerate(rows):
        expected = analysis.row(i)
        assert cells["reasons"] == "; ".join(expected["reasons"])
        assert cells["verdict"] == expected["verdict"]
        assert (float(cells["sol_time_s"]) if cells["sol_time_s"] else None) == (
            pytest.approx(expected["sol_time_s"]) if expected["sol_time_s"] is not None
            else None)
    assert json.loads(rows[0]["workload"]) == {"n": 4}
    assert json.loads(rows[0]["flops_by_unit"]) == {"cuda_core.fp32": 8, "sfu.fp32": 2}
    assert rows[3]["machine"] == "" and rows[1]["kernels"] == "3"


def test_analyze_file_and_frames(tmp_path):
    path = tmp_path / "r.jsonl"
    write_records(path, ROWS)
    path.write_text(path.read_text() + "{broken\n")
    analysis = roofwise.analyze_file(path, machine="h200")
    assert len(analysis) == 4 and [s.where for s in analysis.skipped] == [f"{path}:5"]
    frame = analysis.to_polars()
    assert frame["verdict"].to_list() == ["latency_bound", "below", "impossible", "below"]
    assert frame["machine"].to_list() == ["h200"] * 4
    assert frame["reasons"][2][0].startswith(
        "bytes/time 1e+06 GB/s exceeds hbm theoretical 4800 GB/s")
    with pytest.raises(roofwise.InputError, match=":5: not valid JSON"):
        roofwise.analyze_file(path, strict=True)
    pandas = pytest.importorskip("pandas")
    table = analysis.to_pandas()
    assert isinstance(table, pandas.DataFrame) and list(table["op"]) == ["a", "b", "c", "d"]


def _varied_rows(n, seed):
    """Records that carry every flag the templates render: several machines (by device), a
    device judged on the wrong card, unknown roofs, zero bytes, impossible rates, wall timing,
    uncalibrated units, kernels per call, rows under and around the floors."""
    import numpy as np

    rng = np.random.default_rng(seed)
    devices = ["NVIDIA H200", "NVIDIA H100 80GB HBM3", "RTX 4090", "", "tpu-v9"]
    roofs = ["cuda_core.fp32", "tensor_core.bf16", "sfu.fp32", "tensor_core.fp8", "npu.x"]
    rows = []
    for k in range(n):
        nbytes = float(rng.choice([0.0, 1e3, 1e6, 3e8, 4e9]))
        flops = float(rng.choice([0.0, 1e5, 1e9, 1e12, 5e13]))
        row = {"op": f"op{k % 7}", "flops": flops, "bytes": nbytes,
               "roof": roofs[int(rng.integers(0, len(roofs)))],
               "time_s": float(rng.choice([1e-7, 2e-6, 1.5e-5, 4e-5, 1e-3, 0.05])),
               "device": devices[int(rng.integers(0, len(devices)))],
               "timing": str(rng.choice(["events", "wall", "kernel", "graph", "device"]))}
        if rng.random() < 0.3:
            row["kernels"] = int(rng.integers(1, 40))
        if rng.random() < 0.3 and nbytes:
            row["read_bytes"], row["write_bytes"] = nbytes * 0.75, nbytes * 0.25
        rows.append(row)
    return rows


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("options", [{}, {"machine": "h200"}, {"regime": "sustained"},
                                     {"machine": "h200", "mix": "copy"}, {"mix": "auto"}])
def test_reasons_built_over_columns_are_the_per_row_sentences(tmp_path, seed, options):
    from roofwise.explain.reason_columns import reasons_column
    from roofwise.profiles.load import resolve_machine

    path = tmp_path / "r.jsonl"
    write_records(path, _varied_rows(400, seed))
    chosen = resolve_machine(options["machine"]) if "machine" in options else None
    analysis = analyze(read_records(path).columns, builtin_machines(), chosen,
                       options.get("regime"), options.get("mix"))
    columnar = reasons_column(analysis).to_list()
    assert columnar == [analysis.reasons(i) for i in range(len(analysis))]
    verdicts = {analysis.verdict_name(i) for i in range(len(analysis))}
    assert {"blank", "impossible", "below"} <= verdicts
    # the sentences built from floor and rate columns are among them
    from roofwise.pricing.reasons import Reason

    flags = [int(f) for f in analysis.judged.flags]
    for flag in (Reason.FLOOR_SPLIT, Reason.FLOOR_SHARE, Reason.BELOW_LATENCY_FLOOR,
                 Reason.FLOOR_OVERLAPPED, Reason.ABOVE_THEORETICAL_RATE):
        assert any(f & flag for f in flags), flag


def test_sentence_lists_keep_saying_order_and_give_a_silent_row_none():
    """The lists are built from templates said over scattered rows: each row's sentences in
    the order the templates came, and [] for a row no template covers (the grouping then
    lacks that row)."""
    import numpy as np
    import polars as pl

    from roofwise.explain.reason_columns import _lists

    frame = pl.DataFrame({"x": ["a", "b", "c", "d"]})
    texts = [(np.array([3, 0]), pl.lit("first ") + pl.col("x")),
             (np.array([0, 2]), pl.lit("second")),
             (np.array([3]), pl.col("x") + pl.lit(" last"))]
    assert _lists(frame, texts).to_list() == [
        ["first a", "second"], [], ["second"], ["first d", "d last"]]
    # every row covered: the groups are the rows themselves
    assert _lists(frame, [(np.arange(4), pl.col("x"))]).to_list() == [["a"], ["b"], ["c"],
                                                                      ["d"]]
    assert _lists(frame, []).to_list() == [[], [], [], []]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_json_output_escapes_line_and_paragraph_separators(tmp_path, capsys, suffix):
    """Issue 20: U+2028/U+2029 inside a JSON string are written `\\u2028`, as json.dumps
    writes them, in both of the engine's writer paths (JSONL with JSON text, CSV without)."""
    import json as _json

    from roofwise.cli import main

    names = ["ls\u2028op", "ps\u2029op", "plain"]
    path = tmp_path / f"r{suffix}"
    if suffix == ".jsonl":
        path.write_text("\n".join(_json.dumps({"op": n, "flops": 1e9, "bytes": 1e8,
                                               "roof": "cuda_core.fp32", "time_s": 1e-4,
                                               "workload": {"n": n}}) for n in names) + "\n")
    else:
        path.write_text("op,flops,bytes,roof,time_s\n" + "".join(
            f"{n},1e9,1e8,cuda_core.fp32,1e-4\n" for n in names), encoding="utf-8")
    assert main(["analyze", str(path), "-m", "h200", "--json"]) == 0
    out = capsys.readouterr().out
    assert "\u2028" not in out and "\u2029" not in out
    assert '"op":"ls\\u2028op"' in out and '"op":"ps\\u2029op"' in out
    assert [_json.loads(line)["op"] for line in out.split("\n") if line] == names
