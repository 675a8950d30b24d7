"""Record files: three formats, bad rows skipped with their line, or the file failed."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from roofwise.base.errors import InputError
from roofwise.records.read import LazyRows, read_records
from roofwise.records.write import write_records

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
    (json.dumps({**GOOD, "timing": "gpu"}),
     "timing: expected one of kernel, graph, events, wall, device"),
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
    # the usual slips of a file saved from a spreadsheet, each named
    ("op;flops;bytes;roof;time_s", "a;1;2;cuda_core.fp32;3", "separated by semicolons"),
    ("op\tflops\tbytes\troof\ttime_s", "a\t1\t2\tcuda_core.fp32\t3", "separated by tabs"),
    ("Op,flops,bytes,Roof,time_s", "a,1,2,cuda_core.fp32,3",
     r"header lacks op, roof \(names are case- and space-sensitive: 'Op' for op, 'Roof' for "),
    ("op,flops,bytes,roof,time_s,,", "a,1,2,cuda_core.fp32,3,,",
     ":1: header names no field for columns 6, 7; expected a name for every column"),
])
def test_csv_structure(tmp_path, header, row, problem):
    path = tmp_path / "r.csv"
    path.write_text(f"{header}\n{row}\n")
    with pytest.raises(InputError, match=problem):
        read_records(path, strict=True)


def test_a_utf16_csv_is_named(tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes("op,flops,bytes,roof,time_s\na,1,2,cuda_core.fp32,3\n".encode("utf-16"))
    with pytest.raises(InputError, match=r":1: header lacks .* \(its text holds NUL bytes: "
                                         "UTF-16"):
        read_records(path)


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


# The columnar path (pyarrow) against the per-row path, on the same malformed files.

MIXED = [
    {**GOOD},
    {**GOOD, "bytes": -5.0},
    {k: v for k, v in GOOD.items() if k != "time_s"},
    {**GOOD, "timing": "gpu"},
    {**GOOD, "read_bytes": 15, "write_bytes": 2},
    {**GOOD, "flops_by_unit": {"cuda_core.fp32": 5}},
    {**GOOD, "time_p10_s": 2e-6, "time_p90_s": 1e-6},
    {**GOOD, "op": "b", "device": "H200", "read_bytes": 12, "write_bytes": 8, "timing": "wall"},
    {**GOOD, "roof": "  "},
    {"op": "c", "flops": 3.5, "bytes": 7, "roof": " tensor_core.bf16 ", "time_s": 2e-6,
     "device": "H200", "timing": "device"},
    {**GOOD, "flops": float("nan")},
]
# (index in MIXED, field, problem); the value shown differs by format (CSV cells are text).
MIXED_BAD = [
    (1, "bytes", {"jsonl": "-5.0", "csv": "'-5.0'", "parquet": "-5.0"}),
    (2, "time_s", None),
    (3, "timing", None),
    (4, "read_bytes", None),
    (5, "flops_by_unit", None),
    (6, "time_p10_s", None),
    (8, "roof", None),
    (10, "flops", {"jsonl": "nan", "csv": "'nan'", "parquet": "nan"}),
]
PROBLEMS = {
    "time_s": "missing required field",
    "timing": "expected one of kernel, graph, events, wall, device, got 'gpu'",
    "read_bytes": "read_bytes + write_bytes = 17, expected bytes = 20",
    "flops_by_unit": "sums to 5, expected flops = 10",
    "time_p10_s": "2e-06 is above time_p90_s 1e-06; expected p10 <= p90",
    "roof": "expected a unit key such as cuda_core.fp32, got '  '",
}


def _mixed_file(tmp_path, suffix):
    """MIXED in one file, with a blank line after the first record where the format has lines;
    returns the path and each record's line (or Parquet row)."""
    path = tmp_path / f"mixed.{suffix}"
    if suffix == "parquet":
        write_records(path, MIXED)
        return path, list(range(1, len(MIXED) + 1))
    write_records(path, MIXED)
    lines = path.read_text().splitlines()
    head = 1 if suffix == "csv" else 0
    lines.insert(head + 1, "")
    path.write_text("\n".join(lines) + "\n")
    return path, [head + 1] + [head + k + 2 for k in range(1, len(MIXED))]


def _same_columns(a, b):
    for name in ("op", "roof", "timing", "device"):
        assert list(getattr(a, name)) == list(getattr(b, name)), name
    for name in ("flops", "bytes", "time_s", "read_bytes", "write_bytes", "time_p10_s",
                 "time_p90_s", "has_unit_split", "line"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert sorted(a.flops_by_unit) == sorted(b.flops_by_unit)
    for unit, values in a.flops_by_unit.items():
        np.testing.assert_array_equal(values, b.flops_by_unit[unit])
    assert a.roof_categories()[1] == b.roof_categories()[1]
    np.testing.assert_array_equal(a.roof_categories()[0], b.roof_categories()[0])
    assert a.device_categories()[1] == b.device_categories()[1]
    np.testing.assert_array_equal(a.device_categories()[0], b.device_categories()[0])
    assert [dict(r) for r in a.rows] == [dict(r) for r in b.rows]


@pytest.mark.parametrize("suffix", ["jsonl", "csv", "parquet"])
def test_columnar_and_per_row_paths_agree(tmp_path, suffix):
    path, line = _mixed_file(tmp_path, suffix)
    fast = read_records(path)
    slow = read_records(path, columnar=False)
    assert isinstance(fast.columns.rows, LazyRows) and isinstance(slow.columns.rows, list)
    where = f"{path}:row " if suffix == "parquet" else f"{path}:"
    expected = []
    for k, name, shown in MIXED_BAD:
        problem = (f"expected a non-negative finite number, got {shown[suffix]}" if shown
                   else PROBLEMS[name])
        expected.append(f"{where}{line[k]}: {name}: {problem}")
    assert [str(s) for s in fast.skipped] == expected
    assert [str(s) for s in slow.skipped] == expected
    _same_columns(fast.columns, slow.columns)
    columns = fast.columns
    assert columns.op.tolist() == ["a", "b", "c"]
    assert columns.line.tolist() == [line[0], line[7], line[9]]
    assert columns.flops.tolist() == [10.0, 10.0, 3.5]
    assert columns.roof.tolist() == ["cuda_core.fp32", "cuda_core.fp32", "tensor_core.bf16"]
    assert columns.timing.tolist() == ["", "wall", "device"]
    assert columns.device.tolist() == ["", "H200", "H200"]
    assert columns.device_categories()[1] == ("", "H200")
    assert columns.read_bytes[1] == 12.0 and np.isnan(columns.read_bytes[0])
    assert columns.flops_by_unit["sfu.fp32"].tolist() == [2.0, 2.0, 0.0]
    assert columns.has_unit_split.tolist() == [True, True, False]


@pytest.mark.parametrize("suffix", ["jsonl", "csv", "parquet"])
def test_columnar_strict_fails_on_the_first_bad_row_as_per_row(tmp_path, suffix):
    path, line = _mixed_file(tmp_path, suffix)
    messages = []
    for columnar in (True, False):
        with pytest.raises(InputError) as caught:
            read_records(path, strict=True, columnar=columnar)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    assert messages[0].startswith(f"{path}:{'row ' if suffix == 'parquet' else ''}{line[1]}: bytes")


def test_csv_cells_float_reads_but_the_screen_does_not(tmp_path):
    """Cells such as ' 12 ' or '1_0' are numbers to float(): the flagged row is kept."""
    path = tmp_path / "r.csv"
    path.write_text("op,flops,bytes,roof,time_s\n"
                    "a, 12 ,1_0,cuda_core.fp32,1e-6\n"
                    "b,abc,2,cuda_core.fp32,1e-6\n"
                    "c,3,4,cuda_core.fp32,2e-6\n")
    for columnar in (True, False):
        loaded = read_records(path, columnar=columnar)
        assert loaded.columns.op.tolist() == ["a", "c"]
        assert loaded.columns.flops.tolist() == [12.0, 3.0]
        assert loaded.columns.bytes.tolist() == [10.0, 4.0]
        assert loaded.columns.line.tolist() == [2, 4]
        assert [str(s) for s in loaded.skipped] == [
            f"{path}:3: flops: expected a non-negative finite number, got 'abc'"]
        assert dict(loaded.columns.rows[0]) == {"op": "a", "flops": 12.0, "bytes": 10.0,
                                               "roof": "cuda_core.fp32", "time_s": 1e-6}


def test_jsonl_values_are_shown_as_written(tmp_path):
    """A number too large for a double: the message shows the line's own text."""
    big = "1" + "0" * 30
    path = _write_lines(tmp_path, [json.dumps(GOOD), json.dumps(GOOD)[:-1] + ', "n": 1}',
                                   json.dumps(GOOD).replace('"flops": 10', f'"flops": {big}')])
    for columnar in (True, False):
        loaded = read_records(path, columnar=columnar)
        assert [str(s) for s in loaded.skipped] == [
            f"{path}:3: flops_by_unit: sums to 10, expected flops = 1e+30"]
        assert loaded.columns.rows[1]["n"] == 1 and "n" not in loaded.columns.rows[0]
        assert loaded.columns.rows[0]["workload"] == {"n": 4}


@pytest.mark.parametrize("suffix", ["jsonl", "csv", "parquet"])
def test_lazy_rows_take_and_index(tmp_path, suffix):
    path = tmp_path / f"r.{suffix}"
    write_records(path, [{**GOOD, "op": name, "time_s": t}
                         for name, t in zip("pqrst", (1e-6, 2e-6, 3e-6, 4e-6, 5e-6), strict=True)])
    rows = read_records(path).columns.rows
    assert isinstance(rows, LazyRows) and len(rows) == 5
    assert rows[-1]["op"] == "t" and rows[1]["time_s"] == 2e-6
    assert [r["op"] for r in rows] == ["p", "q", "r", "s", "t"]
    assert [r["op"] for r in rows[1:4]] == ["q", "r", "s"]
    with pytest.raises(IndexError):
        rows[5]
    columns = read_records(path).columns
    picked = columns.take(np.array([4, 0, 2]))
    assert isinstance(picked.rows, LazyRows)
    assert [r["op"] for r in picked.rows] == ["t", "p", "r"]
    assert picked.op.tolist() == ["t", "p", "r"]
    again = picked.take(np.array([False, True, True]))
    assert [r["op"] for r in again.rows] == ["p", "r"]
    assert again.rows[0]["flops_by_unit"] == {"cuda_core.fp32": 8.0, "sfu.fp32": 2.0}


def test_lazy_rows_walk_blocks_in_order():
    fetched = []

    def fetch(at):
        fetched.append(len(at))
        return [{"i": int(p)} for p in at]

    rows = LazyRows(fetch, np.arange(600)[::-1])
    assert [r["i"] for r in rows][:3] == [599, 598, 597] and len(list(rows)) == 600
    assert fetched[:3] == [256, 256, 88]


@pytest.mark.parametrize("suffix", ["jsonl", "csv", "parquet"])
def test_without_pyarrow_the_columnar_path_reads(tmp_path, monkeypatch, suffix):
    """polars is the engine: a plain install (no pyarrow) gets the columnar reader."""
    path, _ = _mixed_file(tmp_path, suffix)
    expected = read_records(path, columnar=False)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    loaded = read_records(path)
    assert isinstance(loaded.columns.rows, LazyRows)
    assert [str(s) for s in loaded.skipped] == [str(s) for s in expected.skipped]
    assert loaded.columns.op.tolist() == ["a", "b", "c"]


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_integers_above_2_to_the_53_are_read(tmp_path, suffix):
    path = tmp_path / f"r.{suffix}"
    write_records(path, [{**GOOD, "flops": 10**16 + 1, "flops_by_unit": {"cuda_core.fp32": 1e16}}])
    loaded = read_records(path)
    assert not loaded.skipped and loaded.columns.flops.tolist() == [1e16]


def test_directory_without_a_suffix(tmp_path):
    (tmp_path / "dd").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        read_records(tmp_path / "dd")


def test_writing_into_a_missing_folder_creates_nothing(tmp_path):
    with pytest.raises(InputError, match="cannot write here: no folder"):
        write_records(tmp_path / "typo" / "r.jsonl", [GOOD])
    assert not (tmp_path / "typo").exists()


def test_writing_under_a_file_says_so(tmp_path):
    (tmp_path / "f.txt").write_text("")
    with pytest.raises(InputError, match=r"f\.txt is a file, not a folder"):
        write_records(tmp_path / "f.txt" / "r.jsonl", [GOOD])


@pytest.mark.parametrize("suffix", ["jsonl", "csv", "parquet"])
def test_many_distinct_ops_and_devices_keep_their_names(tmp_path, suffix):
    """A text field with tens of thousands of distinct values (an op per shape, say) is read
    with every row's own value, in order, and blanks still read as absent."""
    n = 30_000
    rows = [{"op": f"op{k}", "flops": 1.0, "bytes": 2.0, "roof": "cuda_core.fp32",
             "time_s": 1e-3, "device": f"card {k % 7}" if k % 5 else ""} for k in range(n)]
    path = tmp_path / f"r.{suffix}"
    write_records(path, rows)
    cols = read_records(path).columns
    assert list(cols.op) == [f"op{k}" for k in range(n)]
    assert list(cols.device) == [r["device"] for r in rows]
    codes, names = cols.device_categories()
    assert [names[c] for c in codes[:6]] == ["", "card 1", "card 2", "card 3", "card 4", ""]


def test_repeated_keys_looked_at_per_distinct_text_flag_the_same_rows():
    """The JSONL screen looks for a key named twice in each workload object; where the texts
    repeat (a sweep timed on every commit) it looks at each distinct text once. Both ways
    flag the same rows, with and without escapes, nulls included."""
    import polars as pl

    from roofwise.records.read import _repeated_keys, _repeated_keys_by_value

    texts = ['{"m": 1, "m": 2}', '{"m": 1, "n": 2}', None, '{"a": {"m": 1}, "b": {"m": 1}}',
             '{"k": "x:y"}', '{"\\u006d": 1, "m": 2}', "[1, 2]"]
    column = pl.Series([texts[(7 * k) % len(texts)] for k in range(70)])
    for escaped in (False, True):
        once = _repeated_keys(column, escaped)
        assert _repeated_keys_by_value(column, escaped).tolist() == once.tolist()
        assert once[[k for k in range(70) if column[k] == texts[0]]].all()
        assert not once[[k for k in range(70) if column[k] is None]].any()
