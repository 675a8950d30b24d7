"""Lenient reading (issue 9's record bullets) and batches: one bad line costs that line only."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from roofwise.base.errors import InputError
from roofwise.records.read import concat_loaded, iter_batches, read_records

GOOD = {"op": "a", "flops": 10, "bytes": 20, "roof": "cuda_core.fp32", "time_s": 1e-6}
HEADER = "op,flops,bytes,roof,time_s,read_bytes,write_bytes"


def _jsonl(tmp_path, lines, name="r.jsonl"):
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _line(**fields):
    return json.dumps({**GOOD, **fields}).encode()


@pytest.mark.parametrize("first", [b"null", b"5", b"[1, 2]", b'"text"'])
def test_a_first_line_that_is_not_an_object_is_one_skipped_line(tmp_path, first):
    path = _jsonl(tmp_path, [first, _line(op="b")])
    loaded = read_records(path)
    assert loaded.columns.op.tolist() == ["b"]
    assert [str(s) for s in loaded.skipped] == [
        f"{path}:1: expected a JSON object (a record), got "
        f"{type(json.loads(first)).__name__ if first != b'null' else 'null'}"]
    with pytest.raises(InputError, match=f"{path}:1: expected a JSON object"):
        read_records(path, strict=True)


@pytest.mark.parametrize("absent", [None, ""])
def test_null_or_empty_optional_numbers_are_absent(tmp_path, absent):
    path = _jsonl(tmp_path, [_line(read_bytes=absent, write_bytes=absent, time_p10_s=absent,
                                   time_p90_s=absent)])
    for columnar in (True, False):
        loaded = read_records(path, columnar=columnar)
        assert not loaded.skipped
        assert np.isnan(loaded.columns.read_bytes[0]) and np.isnan(loaded.columns.time_p90_s[0])
        assert "read_bytes" not in loaded.columns.rows[0]


def test_invalid_utf8_in_a_jsonl_line_skips_that_line_only(tmp_path):
    path = _jsonl(tmp_path, [_line(op="a"), _line(op="b").replace(b'"b"', b'"\xff"'),
                             _line(op="c")])
    for columnar in (True, False):
        loaded = read_records(path, columnar=columnar)
        assert loaded.columns.op.tolist() == ["a", "c"]
        assert loaded.columns.line.tolist() == [1, 3]
        assert [str(s) for s in loaded.skipped] == [
            f"{path}:2: not UTF-8 text (at character 9); expected UTF-8 records"]


def test_invalid_utf8_in_a_csv_row_skips_that_row_only(tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes(f"{HEADER}\na,10,20,cuda_core.fp32,1e-6,,\n".encode()
                     + b"\xe9,10,20,cuda_core.fp32,1e-6,,\n"
                     + b"c,10,20,cuda_core.fp32,1e-6,15,5\n")
    for columnar in (True, False):
        loaded = read_records(path, columnar=columnar)
        assert loaded.columns.op.tolist() == ["a", "c"]
        assert loaded.columns.line.tolist() == [2, 4]
        assert loaded.columns.read_bytes[1] == 15.0
        assert [str(s) for s in loaded.skipped] == [
            f"{path}:3: not UTF-8 text (at character 1); expected UTF-8 records"]


def test_parquet_struct_with_missing_keys_is_zero_work_on_that_unit(tmp_path):
    """What pyarrow's from_pylist writes: one struct naming every unit, null where a row's
    split lacks it."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [{**GOOD, "flops_by_unit": {"cuda_core.fp32": 10.0}},
            {**GOOD, "op": "b", "flops_by_unit": {"sfu.fp32": 4.0, "cuda_core.fp32": 6.0}},
            {**GOOD, "op": "c", "flops_by_unit": {"sfu.fp32": 10.0}}]
    path = tmp_path / "r.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    for columnar in (True, False):
        loaded = read_records(path, columnar=columnar)
        assert not loaded.skipped
        assert loaded.columns.flops_by_unit["cuda_core.fp32"].tolist() == [10.0, 6.0, 0.0]
        assert loaded.columns.flops_by_unit["sfu.fp32"].tolist() == [0.0, 4.0, 10.0]
        assert dict(loaded.columns.rows[2])["flops_by_unit"] == {"sfu.fp32": 10.0}


def test_a_csv_cell_over_the_csv_module_limit(tmp_path):
    """Both readers keep the row: the per-row reader lifts the csv module's cell limit."""
    path = tmp_path / "r.csv"
    path.write_text(f"{HEADER},note\na,10,20,cuda_core.fp32,1e-6,,,{'x' * 140_000}\n"
                    f"b,10,20,cuda_core.fp32,1e-6,,,short\n")
    for columnar in (True, False):
        loaded = read_records(path, columnar=columnar)
        assert loaded.columns.op.tolist() == ["a", "b"] and not loaded.skipped


def test_invalid_utf8_inside_a_parquet_string_column_is_one_line(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    raw = pa.array([b"a", b"\xff\xfe"], pa.binary())
    text = pa.Array.from_buffers(pa.string(), 2, raw.buffers())  # bytes that are not UTF-8
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({"op": text, "flops": [1.0, 2.0], "bytes": [1.0, 2.0],
                             "roof": ["cuda_core.fp32"] * 2, "time_s": [1e-6, 1e-6]}), path)
    with pytest.raises(InputError) as caught:
        read_records(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: not a readable Parquet file") and "UTF-8" in message
    assert "\n" not in message


@pytest.mark.parametrize(("text", "problem"), [
    ("1" * 5000, "flops: expected a non-negative finite number, got an integer of about 5,000 "
                 "digits: beyond float range (about 1.8e308)"),
    ("1" * 400, "flops: expected a non-negative finite number, got 11111111111...1111111111 "
                "(400 digits): beyond float range (about 1.8e308)"),
    ("1e400", "flops: expected a non-negative finite number, got inf"),
])
def test_numbers_beyond_range_are_one_named_error_per_row(tmp_path, text, problem):
    bad = _line().replace(b'"flops": 10', f'"flops": {text}'.encode())
    path = _jsonl(tmp_path, [_line(), bad, bad, _line(op="z")])
    for columnar in (True, False):
        loaded = read_records(path, columnar=columnar)
        assert loaded.columns.op.tolist() == ["a", "z"]
        assert [str(s) for s in loaded.skipped] == [f"{path}:2: {problem}",
                                                    f"{path}:3: {problem}"]


def test_a_broken_line_among_many_costs_only_that_line(tmp_path):
    """The engine refuses the batch; halving finds the line and the rest stay columnar."""
    lines = [_line(op=f"r{k}", time_s=(k + 1) * 1e-6) for k in range(300)]
    lines[137] = b'{"op": "r137", "flops": NaN'
    path = _jsonl(tmp_path, lines)
    loaded = read_records(path)
    assert len(loaded.columns) == 299 and 137 + 1 not in loaded.columns.line.tolist()
    assert [s.where for s in loaded.skipped] == [f"{path}:138"]
    assert loaded.columns.time_s[137] == pytest.approx(139e-6)


@pytest.mark.parametrize("suffix", ["jsonl", "csv", "parquet"])
def test_small_batches_give_the_same_columns_as_one(tmp_path, suffix):
    from roofwise.records.write import write_records

    rows = [{**GOOD, "op": f"r{k}", "time_s": (k + 1) * 1e-6, "device": ["H200", "A100"][k % 2],
             "workload": {"n": k}} for k in range(23)]
    rows[5]["bytes"] = -1
    rows[17]["timing"] = "gpu"
    path = tmp_path / f"r.{suffix}"
    write_records(path, rows)
    whole = read_records(path)
    batches = list(iter_batches(path, batch_rows=4))
    assert len(batches) == 6
    joined = concat_loaded(batches)
    assert [str(s) for s in joined.skipped] == [str(s) for s in whole.skipped]
    assert len(whole.skipped) == 2
    for name in ("op", "device", "line", "time_s", "flops"):
        assert list(getattr(joined.columns, name)) == list(getattr(whole.columns, name))
    assert joined.columns.device_categories()[1] == ("H200", "A100")
    assert [r["workload"] for r in joined.columns.rows] == [
        r["workload"] for r in whole.columns.rows]


def test_a_folder_of_shards_is_read_in_name_order(tmp_path):
    from roofwise.records.write import write_records

    folder = tmp_path / "shards"
    folder.mkdir()
    write_records(folder / "part-1.csv", [{**GOOD, "op": "c"}])
    write_records(folder / "part-0.jsonl", [{**GOOD, "op": "a"}, {**GOOD, "op": "b"}])
    write_records(folder / "part-2.parquet", [{**GOOD, "op": "d"}])
    (folder / "notes.txt").write_text("not a shard")
    loaded = read_records(folder)
    assert loaded.columns.op.tolist() == ["a", "b", "c", "d"]
    assert loaded.columns.line.tolist() == [1, 2, 2, 1]


def test_extras_pass_through_as_read(tmp_path):
    path = _jsonl(tmp_path, [_line(workload={"n": 1, "m": [1, 2]}, note="x", kernels=3),
                             _line(op="b", workload={"k": "v"})])
    extras = read_records(path).columns.extras
    assert isinstance(extras, pl.DataFrame)
    assert [json.loads(w) for w in extras["workload"]] == [{"n": 1, "m": [1, 2]}, {"k": "v"}]
    assert extras["note"].to_list() == ["x", None] and "kernels" not in extras.columns
    assert read_records(path).columns.kernel_counts().tolist() == [3.0, 1.0]


def test_an_empty_object_among_refused_lines_never_shifts_rows(tmp_path):
    """Found by the long fuzz run: `{}` read alone is a frame of no columns, which a concat
    dropped, so every later row took the previous line's place (a good row twice, two bad
    lines never named)."""
    huge = (b'{"op": "x", "flops": ' + b"9" * 5000
            + b', "bytes": 1, "roof": "cuda_core.fp32", "time_s": 1}')
    no_op = json.dumps({k: v for k, v in GOOD.items() if k != "op"}).encode()
    path = _jsonl(tmp_path, [b"{}", _line(op="b"), huge, _line(op="c", workload=None), no_op])
    loaded = read_records(path)
    assert loaded.columns.op.tolist() == ["b", "c"]
    assert loaded.columns.line.tolist() == [2, 4]
    named = [str(s).split(": ")[0] for s in loaded.skipped]
    assert named == [f"{path}:1", f"{path}:3", f"{path}:5"]


@pytest.mark.parametrize("batch_rows", [None, 1])
def test_a_bom_that_starts_a_cell_is_the_cells_own(tmp_path, batch_rows):
    """Found by the long fuzz run: a CSV whose first record (or a batch's first line) starts
    with U+FEFF lost it, as the engine drops a BOM at the start of the bytes it reads; only
    the file's own first three bytes are a BOM."""
    path = tmp_path / "r.csv"
    path.write_bytes(b"\xef\xbb\xbfop,flops,bytes,roof,time_s\n"
                     b"\xef\xbb\xbfbom,0,0,cuda_core.fp32,1e-6\n"
                     b"\xef\xbb\xbfagain,0,0,cuda_core.fp32,1e-6\n")
    batches = list(iter_batches(path, batch_rows=batch_rows))
    assert list(concat_loaded(batches).columns.op) == ["\ufeffbom", "\ufeffagain"]


def test_extras_of_many_records_are_one_pass():
    """A trace's 259,280 op records took minutes: each extra field's column was made again
    for every value it held (a default argument built per call), quadratic in the records.
    100,000 records take a few hundredths of a second in one pass, minutes in the old way."""
    import time

    from roofwise.records.read import extras_of_records

    records = [{"op": "a", "shapes": "[1]", "k": k} for k in range(100_000)]
    start = time.process_time()
    frame, as_json = extras_of_records(records)
    assert time.process_time() - start < 3.0
    assert frame is not None and frame["k"].to_list()[-3:] == [99_997, 99_998, 99_999]
    assert frame.columns == ["shapes", "k"] and as_json == ()
