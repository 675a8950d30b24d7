"""Batches: `analyze` over a file read a few rows at a time says what it says over the whole
file (tests/fleet runs the same batches on a cluster's workers)."""

from __future__ import annotations

import json

import pytest

import roofwise.cli.analyze as analyze_cli
from roofwise.cli import main
from roofwise.records.write import write_records

ROWS = [{"op": f"op{k}", "flops": 1e9 * (k + 1), "bytes": 4e8 * (k % 5 + 1),
         "roof": ["cuda_core.fp32", "tensor_core.bf16", "sfu.fp32"][k % 3],
         "time_s": [2e-4, 1e-3, 5e-6, 8e-5, 1e-5][k % 5], "device": "NVIDIA H200",
         "workload": {"k": k}} for k in range(17)]


def _run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def records(tmp_path):
    rows = [dict(r) for r in ROWS]
    rows[6]["bytes"] = -1  # a bad row in the third batch of three
    path = tmp_path / "r.jsonl"
    write_records(path, rows)
    return path


@pytest.mark.parametrize("mode", ["--json", "--csv", "table"])
def test_small_batches_say_what_one_batch_says(capsys, monkeypatch, records, mode):
    args = ["analyze", str(records), "-m", "h200", *([] if mode == "table" else [mode])]
    whole = _run(capsys, *args)
    monkeypatch.setattr(analyze_cli, "BATCH_ROWS", 3)
    batched = _run(capsys, *args)
    assert whole[0] == batched[0] == 0
    if mode == "table":
        assert batched[1].splitlines()[0] == whole[1].splitlines()[0]  # every row counted
        assert "16 records:" in batched[1] and "read in batches" not in whole[1]
        shown = [line.split()[:2] for line in whole[1].splitlines() if line[:1].isalpha()]
        assert shown == [line.split()[:2] for line in batched[1].splitlines()
                         if line[:1].isalpha()]
    else:
        assert batched[1] == whole[1]
    assert batched[2] == whole[2]
    assert f"{records}:7: bytes" in batched[2]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_chunks_that_cut_lines_say_what_one_read_says(capsys, monkeypatch, tmp_path, suffix):
    """Text is read a chunk of bytes at a time (the first chunk smaller): a chunk that ends
    inside a line carries the rest to the next, and lines keep their numbers across chunks."""
    import roofwise.records.read as records_module

    rows = [dict(r) for r in ROWS]
    rows[6]["bytes"] = -1
    rows[13]["time_s"] = "soon"
    path = tmp_path / f"r{suffix}"
    write_records(path, rows)
    args = ["analyze", str(path), "-m", "h200", "--json"]
    whole = _run(capsys, *args)
    monkeypatch.setattr(records_module, "CHUNK_BYTES", 97 * 4)  # first chunk 97 bytes
    cut = _run(capsys, *args)
    assert whole == cut
    line = 1 if suffix == ".jsonl" else 2  # the CSV header is line 1
    assert f"{path}:{7 + line - 1}: bytes" in cut[2]
    assert f"{path}:{14 + line - 1}: time_s" in cut[2]
    assert len(cut[1].splitlines()) == 15


def test_table_keeps_the_worst_rows_across_batches(capsys, monkeypatch, records):
    monkeypatch.setattr(analyze_cli, "BATCH_ROWS", 4)
    _, out, _ = _run(capsys, "analyze", str(records), "-m", "h200", "--limit", "3")
    _, whole, _ = _run(capsys, "analyze", str(records), "-m", "h200", "--json")
    verdicts = [json.loads(line)["verdict"] for line in whole.splitlines()]
    assert out.splitlines()[0].startswith("16 records:")
    assert "(read in batches: every record counted, the worst 3 shown)" in out
    worst = sorted(verdicts, key=["impossible", "anomaly", "blank", "below", "latency_bound",
                                  "at_ceiling"].index)[:3]
    shown = [line.split()[0] for line in out.splitlines() if line.split()
             and line.split()[0] in verdicts]
    assert shown[:3] == worst


def test_strict_writes_nothing_when_a_later_batch_is_bad(capsys, monkeypatch, records):
    monkeypatch.setattr(analyze_cli, "BATCH_ROWS", 3)
    code, out, err = _run(capsys, "analyze", str(records), "-m", "h200", "--json", "--strict")
    assert code == 2 and out == ""
    assert err.strip() == (f"roofwise: error: {records}:7: bytes: expected a non-negative "
                           "finite number, got -1")


def test_csv_batches_keep_the_first_header(capsys, monkeypatch, tmp_path):
    """A field first met in a later batch has no column; a field a later batch lacks is an
    empty cell under its column, never a shifted row."""
    rows = [{k: v for k, v in r.items() if k != "workload"} for r in ROWS[:6]]
    rows[0]["note"] = "first"
    rows[4]["late"] = "only here"
    path = tmp_path / "r.jsonl"
    write_records(path, rows)
    monkeypatch.setattr(analyze_cli, "BATCH_ROWS", 2)
    code, out, err = _run(capsys, "analyze", str(path), "-m", "h200", "--csv")
    assert code == 0
    assert err == (f"roofwise: {path}: field(s) first met after the CSV header was written, "
                   "left out of the CSV: 'late'; --json keeps them\n")
    import csv
    import io

    read = list(csv.reader(io.StringIO(out)))
    header = read[0]
    assert "note" in header and "late" not in header
    assert all(len(row) == len(header) for row in read[1:]) and len(read) == 7
    assert [row[header.index("note")] for row in read[1:]] == ["first", "", "", "", "", ""]


@pytest.mark.parametrize("mode", ["--json", "--csv"])
def test_a_device_mismatch_in_a_later_batch_is_said_with_the_stream_total(
        capsys, monkeypatch, tmp_path, mode):
    rows = [dict(r) for r in ROWS]
    for k in (14, 16):  # in the last batch of six (three rows each)
        rows[k]["device"] = "NVIDIA GeForce RTX 4090"
    path = tmp_path / "r.jsonl"
    write_records(path, rows)
    args = ["analyze", str(path), "-m", "h200", mode]
    whole = _run(capsys, *args)
    monkeypatch.setattr(analyze_cli, "BATCH_ROWS", 3)
    batched = _run(capsys, *args)
    assert whole == batched
    assert ("roofwise: warning: 2 of 17 record(s) were judged on a profile their device does "
            "not name: 'NVIDIA GeForce RTX 4090' (2)") in batched[2]
