"""Records that older readers misread (issue 20): bare-CR line ends, duplicate keys, text
fields that are not text. Both readers (the columnar screen and `validate_record` row by row)
read them alike, and each costs its own line only."""

from __future__ import annotations

import json

import polars as pl
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


@pytest.mark.parametrize("end", ["\n", "\r", "\r\n"])
@pytest.mark.parametrize("inside", ["\r", "\n", "\r\n", "a\rb\rc"])
def test_a_line_end_inside_a_quoted_csv_cell_is_the_cells_text(tmp_path, end, inside):
    """Issue 20: `"0\r"` read back as `0\n`. A bare CR ends a line outside quotes only; the
    csv module counts it as a line all the same, so the later rows' lines move down by it."""
    path = tmp_path / "quoted.csv"
    cell = '"' + inside + '"'
    rows = [CSV_HEADER, _row(cell), _row("b", "x"), _row("c")]
    path.write_bytes((end.join(rows) + end).encode())
    breaks = inside.count("\r") + inside.count("\n") - inside.count("\r\n")
    skipped = [f"{path}:{3 + breaks}: flops: expected a non-negative finite number, got 'x'"]
    assert _both(path) == [([inside, "c"], [2 + breaks, 4 + breaks], skipped)] * 2


def test_a_quoted_cell_over_a_chunk_end_is_one_record(tmp_path, monkeypatch):
    """Batches end where records do, never inside a quoted cell holding line ends."""
    path = tmp_path / "cells.csv"
    rows = [CSV_HEADER] + [_row(f'"op\n{k}\r"') if k % 3 == 0 else _row(f'"o""p{k}"')
                           for k in range(200)]
    path.write_bytes(("\n".join(rows) + "\n").encode())
    reference = read_records(path, columnar=False)
    assert len(reference.columns) == 200 and not reference.skipped
    monkeypatch.setattr(read, "CHUNK_BYTES", 97)
    for size in (1, 7, 1000):
        parts = list(iter_batches(path, batch_rows=size))
        assert [op for p in parts for op in p.columns.op.tolist()] == \
            reference.columns.op.tolist()
        assert [line for p in parts for line in p.columns.line.tolist()] == \
            reference.columns.line.tolist()
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


# 2. Duplicate keys ------------------------------------------------------------------------


def _jsonl(tmp_path, lines, name="r.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


DUPLICATES = [
    ('{"op": "a", "flops": 1e9, "bytes": 20, "roof": "cuda_core.fp32", "time_s": 1e-6, '
     '"flops": 5e12}', "flops"),
    ('{"op": "a", "flops": 10, "bytes": 20, "roof": "cuda_core.fp32", "time_s": 1e-6, '
     '"op": null}', "op"),
    ('{"op": null, "flops": 10, "bytes": 20, "roof": "cuda_core.fp32", "time_s": 1e-6, '
     '"op": "a"}', "op"),
    ('{"op": "a", "flops": 10, "bytes": 20, "roof": "cuda_core.fp32", "time_s": 1e-6, '
     '"flops" : 10}', "flops"),
    ('{"op": "a", "flops": 10, "bytes": 20, "roof": "cuda_core.fp32", "time_s": 1e-6, '
     '"\\u006fp": "b"}', "op"),
    ('{"op": "a", "flops": 10, "bytes": 20, "roof": "cuda_core.fp32", "time_s": 1e-6, '
     '"note": 1, "note": 2}', "note"),
    ('{"op": "a", "flops": 10, "bytes": 20, "roof": "cuda_core.fp32", "time_s": 1e-6, '
     '"workload": {"n": 1, "n": 2}}', "n"),
    ('{"op": "a", "flops": 10, "bytes": 20, "roof": "cuda_core.fp32", "time_s": 1e-6, '
     '"flops_by_unit": {"cuda_core.fp32": 10, "cuda_core.fp32": 0}}', "cuda_core.fp32"),
]


@pytest.mark.parametrize(("line", "key"), DUPLICATES)
@pytest.mark.parametrize("at", [0, 1])
def test_a_duplicate_key_skips_its_line_in_both_readers(tmp_path, line, key, at):
    lines = [_line(op="b", flops=7), _line(op="c", workload={"n": {"x": 1}, "m": {"x": 2}})]
    lines.insert(at, line)
    path = _jsonl(tmp_path, lines)
    skipped = [f"{path}:{at + 1}: duplicate key {key!r}; expected each key once per object"]
    kept = [2, 3] if at == 0 else [1, 3]
    assert _both(path) == [(["b", "c"], kept, skipped)] * 2
    assert read_records(path).columns.flops.tolist() == [7.0, 10.0]
    for columnar in (True, False):
        with pytest.raises(InputError, match=f":{at + 1}: duplicate key"):
            read_records(path, strict=True, columnar=columnar)


def test_duplicate_keys_among_many_rows_cost_their_lines_only(tmp_path):
    lines = [_line(op=f"op{k}", flops=k) for k in range(5000)]
    for k, (line, _) in zip((17, 2500, 4999), DUPLICATES, strict=False):
        lines[k] = line
    path = _jsonl(tmp_path, lines)
    for columnar in (True, False):
        loaded = read_records(path, columnar=columnar)
        assert [s.where for s in loaded.skipped] == [f"{path}:18", f"{path}:2501",
                                                      f"{path}:5000"]
        assert len(loaded.columns) == 4997 and 17.0 not in loaded.columns.flops.tolist()


def test_a_duplicate_key_on_line_one_with_null_is_one_line_on_the_cli(tmp_path, capsys):
    path = _jsonl(tmp_path, [DUPLICATES[1][0], _line(op="b")])
    assert main(["analyze", str(path), "-m", "h200", "--csv"]) == 0
    captured = capsys.readouterr()
    assert [line.split(",")[0] for line in captured.out.splitlines()] == ["op", "b"]
    assert f"{path}:1: duplicate key 'op'" in captured.err
    assert main(["analyze", str(path), "-m", "h200", "--csv", "--strict"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and f"{path}:1: duplicate key 'op'" in err[0]


# 3. Text fields that are not text ---------------------------------------------------------

NOT_TEXT = [({"x": [1, 2]}, "an object"), ([1, 2], "an array"), (5, "the number 5"),
            (1.5e3, "the number 1500.0"), (True, "true"), (False, "false")]


@pytest.mark.parametrize(("value", "kind"), NOT_TEXT)
@pytest.mark.parametrize("name", ["op", "roof", "device", "timing"])
def test_a_text_field_that_is_not_a_string_is_refused_by_name(tmp_path, name, value, kind):
    path = _jsonl(tmp_path, [_line(op="a"), _line(**{name: value}), _line(op="c", device="5")])
    skipped = [f"{path}:2: {name}: expected text (a string), got {kind}"]
    assert _both(path) == [(["a", "c"], [1, 3], skipped)] * 2
    assert read_records(path).columns.device.tolist() == ["", "5"]


def test_text_that_looks_like_json_is_still_text(tmp_path):
    names = ["5", "-1", "true", "[1, 2]", '{"x": 1}', "false"]
    path = _jsonl(tmp_path, [_line(op=n) for n in names])
    assert _both(path) == [(names, [1, 2, 3, 4, 5, 6], [])] * 2


@pytest.mark.parametrize("column", [
    pl.Series("op", [1, 2, None], dtype=pl.Int64),
    pl.Series("op", [{"x": 1}, {"x": 2}, None]),
    pl.Series("device", [True, False, None]),
    pl.Series("roof", [1.5, 2.5, None])])
def test_a_typed_parquet_column_for_a_text_field_is_refused(tmp_path, column):
    frame = pl.DataFrame({**{k: [v] * 3 for k, v in GOOD.items()}}).with_columns(column)
    path = tmp_path / "typed.parquet"
    frame.write_parquet(path)
    name = column.name
    required = name in ("op", "roof")
    for columnar in (True, False):
        loaded = read_records(path, columnar=columnar) if not required else None
        if required:
            with pytest.raises(InputError, match=f"row 1: {name}: expected text"):
                read_records(path, columnar=columnar)
            continue
        assert loaded.columns.line.tolist() == [3]
        assert [str(s) for s in loaded.skipped] == [
            f"{path}:row 1: device: expected text (a string), got true",
            f"{path}:row 2: device: expected text (a string), got false"]


def test_tens_of_thousands_of_op_names_read_alike(tmp_path):
    """Beyond `read._MANY_NAMES` distinct ops a batch codes each row by its position: the
    same ops, lines and skipped rows as the per-record reader, an empty op still skipped."""
    path = tmp_path / "ops.csv"
    ops = [f"op{k % 9000}" if k % 997 else "" for k in range(20_000)]
    path.write_text(CSV_HEADER + "\n" + "".join(_row(op) + "\n" for op in ops))
    (columnar, by_row) = _both(path)
    assert columnar == by_row
    assert columnar[0] == [op for op in ops if op]
    assert len(columnar[2]) == ops.count("") > 0
