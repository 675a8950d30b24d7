"""Record-reader cases the fuzz suite found (issue 9), fixed here or written down.

Fixed in this issue: a roof that is not a string kept by the screen and refused when its row
was shown; `"workload": ""` beside object workloads written as `"workload":` (not JSON); a
workload that is a string in one row and an object in another written unquoted; a CSV cell
over 131,072 characters failing the whole file; an invalid byte inside a quoted multi-line
CSV cell costing a neighbouring line and conjuring a row from the rest.
A lone-surrogate escape in a JSONL string costs its line, as a byte that is not UTF-8 does.
A NUL character in a CSV cell (read as empty by an earlier reader) now survives.
"""

from __future__ import annotations

import json

import pytest

from roofwise.cli import main


def analyze_json(capsys, path, *extra):
    code = main(["analyze", str(path), "--json", *extra])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.split("\n") if line], err


ROW = {"op": "gemm", "flops": 0, "bytes": 0, "roof": "cuda_core.fp32", "time_s": 0.0}


def test_a_roof_that_is_not_a_string_is_a_skipped_row_not_a_lost_file(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (ROW, None, {**ROW, "roof": []})) + "\n")
    code, rows, err = analyze_json(capsys, path)
    assert code == 0, err
    assert [r["roof"] for r in rows] == ["cuda_core.fp32"]
    assert [r["verdict"] for r in rows] == ["blank"]
    assert f"{path}:3: roof: expected text (a string), got an array" in err


def test_json_workloads_stay_json(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    path.write_text('{"op": "x", "flops": 1e999, "bytes": 1, "roof": "cuda_core.fp32", '
                    '"time_s": 1}\n'
                    + "\n".join(json.dumps({**ROW, "workload": w})
                                for w in ("", {}, "gemm", "{abc", "NaN", {"m": [1, 2]}))
                    + "\n")
    code, rows, err = analyze_json(capsys, path)
    assert code == 0, err
    assert [r.get("workload", "absent") for r in rows][:2] == ["absent", {}]
    assert [r.get("workload") for r in rows][2:] == ["gemm", "{abc", "NaN", {"m": [1, 2]}]


def test_a_csv_cell_over_131072_characters_is_a_good_row(tmp_path, capsys):
    path = tmp_path / "r.csv"
    long = "L" * 200_000
    path.write_text("op,flops,bytes,roof,time_s\n"
                    f"{long},0,0,cuda_core.fp32,0\nshort,0,0,cuda_core.fp32,0\n")
    code, rows, err = analyze_json(capsys, path)
    assert code == 0, err
    assert [r["op"] for r in rows] == [long, "short"]


def test_a_bad_byte_in_a_multi_line_csv_cell_costs_its_record_only(tmp_path, capsys):
    path = tmp_path / "r.csv"
    path.write_bytes(b"op,flops,bytes,roof,time_s\n"
                     b'"a\n\xffb",0,0,cuda_core.fp32,0.0\n'
                     b"gemm,0,0,cuda_core.fp32,0.0\n")
    code, rows, err = analyze_json(capsys, path)
    assert code == 0, err
    assert [r["op"] for r in rows] == ["gemm"]  # never a row made of `b"` and what follows
    assert "not UTF-8 text" in err and err.count("skipped") == 2  # the record, the count


@pytest.mark.parametrize("op", ["\ud800", "a\udfffb"])
def test_a_lone_surrogate_escape_costs_its_line_not_the_file(tmp_path, capsys, op):
    # polars read "\ud800" as "\x00" (or ""), a silently different op; no UTF-8 writer can
    # hold the real one, so the line is refused like a line with a byte that is not UTF-8
    path = tmp_path / "r.jsonl"
    lines = [json.dumps(r) for r in (ROW, {**ROW, "op": op}, {**ROW, "op": "\U0001d4c1"})]
    path.write_text("\n".join(lines) + "\n")
    code, rows, err = analyze_json(capsys, path)
    assert code == 0, err
    assert [r["op"] for r in rows] == ["gemm", "\U0001d4c1"]  # a surrogate pair is text
    assert f"{path}:2: a string holds a lone surrogate escape" in err
    code = main(["analyze", str(path), "--json", "--strict"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and f"{path}:2" in err


def test_a_nul_in_a_csv_op_survives(tmp_path, capsys):
    path = tmp_path / "r.csv"
    path.write_bytes(b"op,flops,bytes,roof,time_s\n\x00,0,0,cuda_core.fp32,0.0\n")
    code, rows, err = analyze_json(capsys, path)
    assert code == 0, err
    assert [r["op"] for r in rows] == ["\x00"]
