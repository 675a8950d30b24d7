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
