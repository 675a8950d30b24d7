"""Fuzzed record files (JSONL, CSV, Parquet) through `analyze` and `compare`: the contract
holds, and a lenient read keeps every good row, in order."""

from __future__ import annotations

import json
import math
import unicodedata

from fuzzkit import (
    RecordFile,
    analyze_ops,
    csv_files,
    examples,
    good_records,
    jsonl_files,
    line_ends,
    out_lines,
    run_cli,
    write_lines,
)
from hypothesis import example, given
from hypothesis import strategies as st

from roofwise.compare.runs import INCOMPARABLE, STATUS_ORDER


def expect_lenient(run, f: RecordFile, strict: bool) -> None:
    if not f.good or (strict and f.bad):
        assert run.code == 2, (run.code, run.err)
    else:
        assert run.code == 0, (run.code, run.err[-1000:])
        assert analyze_ops(run) == [g["op"] for g in f.good]


@examples(300)
@given(f=jsonl_files(), strict=st.booleans(), newline=line_ends())
def test_jsonl_analyze_keeps_every_good_row(tmp_path, f, strict, newline):
    path = write_lines(tmp_path / "r.jsonl", f.lines, newline)
    run = run_cli("analyze", path, "--json", *(["--strict"] if strict else []),
                  count="jsonl analyze")
    expect_lenient(run, f, strict)


@examples(200)
@given(f=csv_files(), strict=st.booleans(), newline=line_ends())
@example(f=RecordFile((b"op,flops,bytes,roof,time_s", b'"0\r",1,1,cuda_core.fp32,1'),
                      ({"op": "0\r", "flops": 1, "bytes": 1, "roof": "cuda_core.fp32",
                        "time_s": 1},), 0), strict=False, newline=b"\n")  # issue 20: CR read as LF
def test_csv_analyze_keeps_every_good_row(tmp_path, f, strict, newline):
    path = write_lines(tmp_path / "r.csv", f.lines, newline)
    run = run_cli("analyze", path, "--json", *(["--strict"] if strict else []),
                  count="csv analyze")
    expect_lenient(run, f, strict)


BAD_PARQUET = ({"time_s": -1.0}, {"op": None}, {"bytes": math.nan}, {"roof": " "},
               {"flops": math.inf}, {"time_p10_s": 2.0, "time_p90_s": 1.0}, {"timing": "gpu"},
               {"flops_by_unit": {"cuda_core.fp32": -5.0}})


@st.composite
def parquet_rows(draw):
    """Rows for a Parquet file: one type per column (numbers as floats, workloads as JSON
    text), the unit split a struct whose keys differ per row, as `pa.Table.from_pylist`
    writes it (a key a row lacks is null there)."""
    rows, good = [], []
    for _ in range(draw(st.integers(1, 8))):
        record = draw(good_records(surrogates=False))
        row = {k: (float(v) if isinstance(v, int) and not isinstance(v, bool) else v)
               for k, v in record.items()}
        if isinstance(row.get("workload"), (dict, list)):
            row["workload"] = json.dumps(row["workload"])
        if isinstance(record.get("flops_by_unit"), dict):
            row["flops_by_unit"] = {u: float(v) for u, v in record["flops_by_unit"].items()}
        for k in ("read_bytes", "write_bytes", "time_p10_s", "time_p90_s", "device", "timing",
                  "workload", "footprint_bytes", "cache_state"):
            if row.get(k) == "" and k not in ("device", "timing", "workload", "cache_state"):
                row[k] = None
        if draw(st.integers(0, 3)):
            good.append(record)
        else:
            row.update(draw(st.sampled_from(BAD_PARQUET)))
        rows.append(row)
    return rows, good


@examples(80)
@given(data=parquet_rows())
def test_parquet_analyze_keeps_every_good_row(tmp_path, data):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows, good = data
    keys = list(dict.fromkeys(k for row in rows for k in row))  # from_pylist: the first row's
    table = pa.Table.from_pylist([{k: row.get(k) for k in keys} for row in rows])
    path = tmp_path / "r.parquet"
    pq.write_table(table, path)
    run = run_cli("analyze", path, "--json", count="parquet analyze")
    if not good:
        assert run.code == 2
        return
    assert run.code == 0, run.err
    assert analyze_ops(run) == [g["op"] for g in good]


@examples(60)
@given(data=st.binary(max_size=300), truncate=st.integers(0, 400))
def test_corrupt_parquet_is_one_line(tmp_path, data, truncate):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "r.parquet"
    if truncate:
        pq.write_table(pa.table({"op": ["x"], "flops": [1.0], "bytes": [1.0],
                                 "roof": ["cuda_core.fp32"], "time_s": [1.0]}), path)
        path.write_bytes(path.read_bytes()[:truncate] + data)
    else:
        path.write_bytes(data)
    run_cli("analyze", path, count="parquet corrupt")


@examples(150)
@given(base=jsonl_files(max_rows=8), new=jsonl_files(max_rows=8), gate=st.booleans(),
       threshold=st.sampled_from(("0", "0.05", "0.5", "1e9")))
def test_compare_pairs(tmp_path, base, new, gate, threshold):
    a = write_lines(tmp_path / "a.jsonl", base.lines)
    b = write_lines(tmp_path / "b.jsonl", new.lines)
    run = run_cli("compare", a, b, "--json", "--threshold", threshold,
                  *(["--fail-on-regression"] if gate else []), count="compare")
    if not base.good or not new.good:
        assert run.code == 2
        return
    assert run.code in ((0, 1) if gate else (0,)), run.err
    for line in out_lines(run):
        change = json.loads(line)
        assert change["status"] in STATUS_ORDER
        verdicts = {change["base_verdict"], change["new_verdict"]}
        if None not in verdicts and verdicts & {"impossible", "blank", "latency_bound"}:
            assert change["status"] == INCOMPARABLE, change
        for key in ("time_change", "efficiency_change", "base_time_s", "new_time_s"):
            assert change[key] is None or math.isfinite(change[key])
    table = run_cli("compare", a, b, "--threshold", threshold, count="compare table")
    raw = {ch for ch in table.out + table.err if unicodedata.category(ch) == "Cc" and ch != "\n"}
    assert not raw, f"raw control characters reached the terminal: {sorted(raw)}"
    if gate and run.code == 0:
        assert not [ln for ln in out_lines(run)
                    if json.loads(ln)["status"] in ("regression", "incomparable", "only_base")]


@examples(150)
@given(f=jsonl_files(), newline=line_ends(), table=st.booleans())
def test_lint_records_finds_what_analyze_finds(tmp_path, f, newline, table):
    """`lint` reads strictly: a bad row (or none good) is one line and exit 2. Otherwise its
    findings, in order, are those `analyze --json` carries row by row (R2 aside: one per
    ceiling there, in each row it reads here), each where its row is, and it exits 1 exactly
    when one of them is an error."""
    path = write_lines(tmp_path / "r.jsonl", f.lines, newline)
    run = run_cli("lint", path, *([] if table else ["--json"]), count="lint records")
    if not f.good or f.bad:
        assert run.code == 2 and len(run.err_lines) == 1, (run.code, run.err)
        return
    assert run.code in (0, 1), (run.code, run.err[-1000:])
    if table:
        return
    found = [json.loads(line) for line in out_lines(run)]
    analyzed = run_cli("analyze", path, "--json")
    per_row = [[x["code"] for x in json.loads(line)["lint"] if x["code"] != "R2"]
               for line in out_lines(analyzed)]
    own = [x for x in found if x["code"] != "R2"]
    assert [x["code"] for x in own] == [code for row in per_row for code in row]
    assert all(x["where"].startswith(f"{path}:") for x in own)
    assert run.code == (1 if any(x["severity"] == "error" for x in found) else 0)
