"""Record files: three formats, bad rows skipped with their line, or the file failed."""

from __future__ import annotations

import json

import pytest

from roofwise.errors import InputError
from roofwise.recordio import read_records, write_records

GOOD = {"op": "a", "flops": 10, "bytes": 20, "roof": "cuda_core.fp32", "time_s": 1e-6,
        "flops_by_unit": {"cuda_core.fp32": 8, "sfu.fp32": 2}, "workload": {"n": 4}}


@pytest.mark.parametrize("suffix", ["jsonl", "csv", "parquet"])
def test_roundtrip_each_format(tmp_path, suffix):
    path = tmp_path / f"r.{suffix}"
    assert write_records(path, [GOOD, {**GOOD, "op": "b", "time_s": 2e-6}]) == 2
    loaded = read_records(path)
    assert list(loaded.columns.op) == ["a", "b"]
    assert list(loaded.columns.time_s) == [1e-6, 2e-6]
    assert loaded.columns.flops_by_unit["sfu.fp32"].tolist() == [2.0, 2.0]


def test_append_keeps_earlier_rows(tmp_path):
    path = tmp_path / "r.jsonl"
    write_records(path, [GOOD])
    write_records(path, [{**GOOD, "op": "b"}], append=True)
    assert list(read_records(path).columns.op) == ["a", "b"]


def _write_lines(tmp_path, lines):
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


BAD_CASES = [
    ("{not json", "not valid JSON"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "time_s"}), "time_s: missing required"),
    (json.dumps({**GOOD, "bytes": -5}), "bytes: expected a non-negative finite number"),
    (json.dumps({**GOOD, "flops": "NaN"}), "flops: expected a non-negative finite number"),
    (json.dumps({**GOOD, "timing": "gpu"}), "timing: expected one of device, wall"),
    ("[1, 2]", "expected a JSON object"),
]


@pytest.mark.parametrize(("line", "problem"), BAD_CASES)
def test_bad_row_skipped_with_file_and_line(tmp_path, line, problem):
    path = _write_lines(tmp_path, [json.dumps(GOOD), line, json.dumps(GOOD)])
    loaded = read_records(path)
    assert len(loaded.columns) == 2
    assert len(loaded.skipped) == 1
    text = str(loaded.skipped[0])
    assert f"{path}:2" in text and problem in text


@pytest.mark.parametrize(("line", "problem"), BAD_CASES)
def test_strict_fails_the_file(tmp_path, line, problem):
    path = _write_lines(tmp_path, [json.dumps(GOOD), line])
    with pytest.raises(InputError, match=problem):
        read_records(path, strict=True)


def test_unknown_format(tmp_path):
    with pytest.raises(InputError, match=r"expected \.jsonl, \.csv or \.parquet"):
        read_records(tmp_path / "r.txt")


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    path = tmp_path / "r.jsonl"
    write_records(path, [GOOD])
    with pytest.raises(TypeError):
        write_records(path, [{"op": object()}])
    assert read_records(path).columns.op.tolist() == ["a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl"]


def test_written_files_are_readable_by_others(tmp_path):
    path = tmp_path / "r.jsonl"
    write_records(path, [GOOD])
    assert path.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize(("record", "problem"), [
    ({**GOOD, "flops": int("1" + "0" * 400)}, "flops: expected a non-negative finite number"),
    ({**GOOD, "read_bytes": 10, "write_bytes": 5},
     "read_bytes + write_bytes = 15, expected bytes = 20"),
    ({**GOOD, "flops_by_unit": {"cuda_core.fp32": 5}}, "sums to 5, expected flops = 10"),
    ({**GOOD, "time_p10_s": 2e-6, "time_p90_s": 1e-6}, "expected p10 <= p90"),
])
def test_inconsistent_records_are_malformed(tmp_path, record, problem):
    path = _write_lines(tmp_path, [json.dumps(GOOD), json.dumps(record)])
    loaded = read_records(path)
    assert len(loaded.columns) == 1 and problem in str(loaded.skipped[0])


def test_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(GOOD) + "\n", encoding="utf-8-sig")
    assert read_records(path).columns.op.tolist() == ["a"]


def test_not_utf8(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(json.dumps(GOOD).replace("a", "\xe9").encode("latin-1") + b"\n")
    with pytest.raises(InputError, match="not UTF-8 text"):
        read_records(path)


@pytest.mark.parametrize(("text", "problem"), [
    ("", "no records"),
    ("{oops\n", "not valid JSON"),
])
def test_a_file_without_valid_records_is_bad_input(tmp_path, text, problem):
    path = tmp_path / "r.jsonl"
    path.write_text(text)
    with pytest.raises(InputError, match=problem):
        read_records(path)


def test_directory_is_not_a_record_file(tmp_path):
    (tmp_path / "d.jsonl").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        read_records(tmp_path / "d.jsonl")


@pytest.mark.parametrize(("header", "row", "problem"), [
    ("op,flops,bytes,time_s", "a,1,2,3", ":1: header lacks roof"),
    ("op,flops,bytes,roof,time_s,op", "a,1,2,cuda_core.fp32,3,b", ":1: header repeats op"),
    ("op,flops,bytes,roof,time_s", "a,1,2,cuda_core.fp32,3,9", ":2: 6 cells under a header of 5"),
])
def test_csv_structure(tmp_path, header, row, problem):
    path = tmp_path / "r.csv"
    path.write_text(f"{header}\n{row}\n")
    with pytest.raises(InputError, match=problem):
        read_records(path, strict=True)


def test_parquet_rows_are_numbered(tmp_path):
    path = tmp_path / "r.parquet"
    write_records(path, [GOOD, {**GOOD, "bytes": -1}, GOOD])
    loaded = read_records(path)
    assert loaded.columns.line.tolist() == [1, 3]
    assert str(loaded.skipped[0]).startswith(f"{path}:row 2: bytes")


def test_jsonl_append_keeps_a_malformed_line_where_it_was(tmp_path):
    path = _write_lines(tmp_path, [json.dumps(GOOD), "{oops"])
    write_records(path, [{**GOOD, "op": "b"}], append=True)
    lines = path.read_text().splitlines()
    assert lines[1] == "{oops" and json.loads(lines[2])["op"] == "b"


def test_writing_to_a_directory_is_bad_input(tmp_path):
    (tmp_path / "d.jsonl").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        write_records(tmp_path / "d.jsonl", [GOOD])
