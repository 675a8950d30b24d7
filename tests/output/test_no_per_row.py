"""No per-record Python on the path of a valid file (issue 23): the commands never rebuild a
record from its file (`validate_record`) to write, compare, report or lint it, whatever fields
the file has. The cliff this guards: a file with only the contract's fields had no extras
columns, and the writers read every record back one at a time to look for some."""

from __future__ import annotations

import json

import pytest

from roofwise.cli import main
from roofwise.records import read

CONTRACT = "op,flops,bytes,roof,time_s\n" + "".join(
    f"op{k % 7},{1e9 * (k + 1)},{2e8 * (k + 1)},cuda_core.fp32,{1e-3 * (1 + k % 5)}\n"
    for k in range(600))


@pytest.fixture
def counted(monkeypatch):
    """The number of records `validate_record` checked, counted on every thread."""
    calls = []
    real = read.validate_record

    def validate(record, where):
        calls.append(where)
        return real(record, where)

    monkeypatch.setattr(read, "validate_record", validate)
    return calls


def _files(tmp_path):
    contract = tmp_path / "contract.csv"
    contract.write_text(CONTRACT)
    jsonl = tmp_path / "objects.jsonl"
    jsonl.write_text("".join(json.dumps({
        "op": f"op{k % 7}", "workload": {"n": k}, "flops": 1e9, "bytes": 1e8,
        "read_bytes": 6e7, "write_bytes": 4e7, "roof": "tensor_core.bf16", "time_s": 1e-3,
        "time_p10_s": 9e-4, "time_p90_s": 1.1e-3, "device": "NVIDIA H200"}) + "\n"
        for k in range(600)))
    return contract, jsonl


@pytest.mark.parametrize("command", [
    ["analyze", "{f}", "-m", "h200", "--json"], ["analyze", "{f}", "-m", "h200", "--csv"],
    ["analyze", "{f}", "-m", "h200"], ["compare", "{f}", "{f}", "-m", "h200"],
    ["compare", "{f}", "{f}", "-m", "h200", "--json"], ["lint", "{f}", "-m", "h200", "--json"],
    ["lint", "{f}", "-m", "h200"], ["report", "{f}", "-m", "h200", "-o", "{out}.html"],
    ["plot", "{f}", "-m", "h200", "-o", "{out}.png"]])
def test_a_valid_file_is_never_read_back_record_by_record(tmp_path, capsys, counted, command):
    for path in _files(tmp_path):
        args = [a.format(f=path, out=tmp_path / "out") for a in command]
        assert main(args) in (0, 1), capsys.readouterr().err
        assert counted == [], (args, counted[:3])


def test_the_passed_through_fields_are_the_same_read_either_way(tmp_path):
    """The per-row reader gives the fields outside the contract as columns too, typed as the
    columnar reader types them (so no writer needs the rows)."""
    _, jsonl = _files(tmp_path)
    columnar = read.read_records(jsonl).columns
    by_row = read.read_records(jsonl, columnar=False).columns
    assert by_row.extras is not None and columnar.extras is not None
    assert by_row.extras.columns == columnar.extras.columns == ["workload"]
    assert [json.loads(t) for t in by_row.extras["workload"]] == [{"n": k} for k in range(600)]
    assert by_row.extras_json == ("workload",)
    contract = tmp_path / "contract.csv"
    assert read.read_records(contract, columnar=False).columns.extras is None
