"""Records that older readers misread (issue 20): bare-CR line ends, duplicate keys, text
fields that are not text. Both readers (the columnar screen and `validate_record` row by row)
read them alike, and each costs its own line only."""

from __future__ import annotations

import json

import pytest

from roofwise.base.errors import InputError
from roofwise.cli import main
from roofwise.records import read
from roofwise.records.read import iter_batches, read_records

GOOD = {"op": "a", "flops": 10, "bytes": 20, "roof": "cuda_core.fp32", "time_s": 1e-6}
CSV_HEADER = "op,flops,bytes,roof,time_s"


def _line(**fields) -> str:
    return json.dumps({**GOOD, **fields})


def _row(op: str, flops: object = 10) -> str:
    return f"{op},{flops},20,cuda_core.fp32,1e-06"


def _both(path, **kwargs):
    """The columnar and the per-record read of `path`: (ops, lines, skipped) each."""
    out = []
    for columnar in (True, False):
        loaded = read_records(path, columnar=columnar, **kwargs)
        out.append((loaded.columns.op.tolist(), loaded.columns.line.tolist(),
                    [str(s) for s in loaded.skipped]))
    return out


# 1. Bare CR line ends ---------------------------------------------------------------------


@pytest.mark.parametrize("ends", [("\r", "\r", "\r", "\r"), ("\r\n", "\r", "\n", "\r"),
                                  ("\r", "\r\n", "\r", "")])
def test_csv_with_bare_cr_line_ends_reads_every_row_with_its_line(tmp_path, ends):
    path = tmp_path / "mac.csv"
    rows = [CSV_HEADER, _row("a"), _row("b", "x"), _row("c")]
    path.write_bytes("".join(r + e for r, e in zip(rows, ends, strict=True)).encode())
    skipped = [f"{path}:3: flops: expected a non-negative finite number, got 'x'"]
    assert _both(path) == [(["a", "c"], [2, 4], skipped)] * 2
    with pytest.raises(InputError, match=":3: flops"):
        read_records(path, strict=True)


def test_jsonl_with_bare_cr_line_ends_numbers_lines_as_python_does(tmp_path):
    path = tmp_path / "mac.jsonl"
    text = "\r".join([_line(op="a"), '{"op": "x"}', _line(op="b"), "", _line(op="c")])
    path.write_bytes(text.encode() + b"\r")
    skipped = [f"{path}:2: flops: missing required field"]
    assert _both(path) == [(["a", "b", "c"], [1, 3, 5], skipped)] * 2


def test_bare_cr_in_batches_across_chunk_ends(tmp_path, monkeypatch):
    """A CRLF or a bare CR cut at a chunk's end is one line end, never two or none."""
    path = tmp_path / "many.csv"
    ends = ["\r", "\r\n", "\n"]
    rows = [CSV_HEADER] + [_row(f"op{k}") for k in range(300)]
    path.write_bytes("".join(r + ends[k % 3] for k, r in enumerate(rows)).encode())
    monkeypatch.setattr(read, "CHUNK_BYTES", 97)
    for size in (7, 1000):
        parts = list(iter_batches(path, batch_rows=size))
        ops = [op for p in parts for op in p.columns.op.tolist()]
        lines = [line for p in parts for line in p.columns.line.tolist()]
        assert ops == [f"op{k}" for k in range(300)] and lines == list(range(2, 302))
        assert not any(p.skipped for p in parts)


def test_cli_reads_a_mac_csv(tmp_path, capsys):
    path = tmp_path / "mac.csv"
    path.write_bytes(f"{CSV_HEADER}\r{_row('a')}\r{_row('b')}\r".encode())
    assert main(["analyze", str(path), "-m", "h200", "--csv"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(",")[0] for line in out] == ["op", "a", "b"]


def test_a_csv_header_with_an_open_quote_is_one_error(tmp_path):
    path = tmp_path / "quote.csv"
    path.write_bytes(b'"op,flops,bytes,roof,time_s\r' + _row("a").encode() + b"\r")
    for columnar in (True, False):
        with pytest.raises(InputError, match=":1: header lacks"):
            read_records(path, columnar=columnar)
