"""Findings as one frame (`findings_frame`), folded by kind (`finding_kinds`), and R2 judged
over a whole file read in batches (`BatchFindings`, `file_finding_kinds`): what `roofwise lint`
and analyze's summary read, with no Python object per finding.

The records are those of tests/lint/test_lint_columns.py (every check fires there); the R2
counts below are recounted by hand from the rows written for them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from test_lint_columns import FP8_KV, FUSED, analysis_of, every_check_records, fma_row

from roofwise.cli import main
from roofwise.lint import (
    BatchFindings,
    Finding,
    check_stale_profiles,
    file_finding_kinds,
    finding_kinds,
    findings_frame,
    lint_analysis,
    lint_rows,
)
from roofwise.lint.stale_checks import stale_findings, stale_groups, stale_rows
from roofwise.output.analysis import Analysis

FIELDS = ["code", "severity", "where", "reason", "fix"]


@pytest.fixture(scope="module")
def every() -> Analysis:
    return analysis_of(every_check_records())


def test_frame_is_the_findings_by_row_then_r2(every: Analysis) -> None:
    """The frame, row for row, is what the per-row path gives (`lint_rows`, each a `Finding`
    with its where), then R2 as `check_stale_profiles` says it: two independent paths."""
    frame = findings_frame(every, [FUSED, FP8_KV], path="runs.jsonl")
    assert frame.columns == FIELDS
    by_rows = [f for row in lint_rows(every, [FUSED, FP8_KV], path="runs.jsonl") for f in row]
    expected = [*by_rows, *check_stale_profiles(every)]
    assert [Finding(*r) for r in frame.iter_rows()] == expected
    assert lint_analysis(every, [FUSED, FP8_KV], path="runs.jsonl") == expected
    assert frame.row(-1)[:3] == ("R2", "warning", "h200 cuda_core.fp32 sustained")
    # without a path, the op and its record number
    assert findings_frame(every)["where"][0] == "qk_norm_rope_quant (record 1)"


def test_kinds_fold_by_code_and_fix_and_add_up(every: Analysis) -> None:
    frame = findings_frame(every, [FUSED, FP8_KV], path="runs.jsonl")
    kinds = finding_kinds(frame)
    assert int(kinds["count"].sum()) == len(frame)
    # one kind per distinct (code, fix), R2's where aside
    assert len(kinds) == frame.select("code", "fix").unique().height
    first = kinds.row(0, named=True)
    assert (first["code"], first["where"]) == (frame["code"][0], frame["where"][0])
    # folds fold again: twice the frame is twice each count, the same kinds
    twice = finding_kinds(pl.concat([kinds, kinds]))
    assert twice.drop("count").equals(kinds.drop("count"))
    assert (twice["count"] == 2 * kinds["count"]).all()


def r2_records(n_above: int, n_below: int) -> list[dict[str, Any]]:
    """FMA rows on the h200's sustained cuda_core.fp32 ceiling (67.0e12 x 0.8548): `n_above`
    at 0.88 of theoretical (1.0295 of the ceiling), `n_below` at 0.80 of it (0.936)."""
    rows = [fma_row(0.88, 1e-3) for _ in range(n_above)]
    rows += [fma_row(0.80, 1e-3) for _ in range(n_below)]
    return [{**r, "device": "NVIDIA H200"} for r in rows]


def test_r2_counts_the_whole_file_not_a_batch() -> None:
    """Three batches: the first with every row above (6 of 6), then two with none above
    (0 of 4 each). Judged alone, only the first batch makes an R2, and it says 6 of 6; over
    the file the ceiling's rows are 14, 6 above: fewer than half, so no R2 at all."""
    batches = [analysis_of(r2_records(6, 0)), analysis_of(r2_records(0, 4)),
               analysis_of(r2_records(0, 4))]
    alone = check_stale_profiles(batches[0])
    assert [f.reason.split(" rows")[0] for f in alone] == ["6 of 6"]
    kinds = file_finding_kinds([BatchFindings.of(b) for b in batches])
    assert "R2" not in kinds["code"].to_list()
    # with 8 above out of 14 (two batches of 4 above), the one R2 counts them all
    batches = [analysis_of(r2_records(4, 3)), analysis_of(r2_records(4, 3))]
    kinds = file_finding_kinds([BatchFindings.of(b) for b in batches])
    r2 = kinds.filter(pl.col("code") == "R2")
    assert r2["count"].to_list() == [1] and kinds["code"][0] == "R2"  # first, once
    assert r2["reason"][0].startswith("8 of 14 rows bound by cuda_core.fp32 sustained")
    implied = 0.8548 * (0.88 / 0.8548)  # the median row above, times the profile's fraction
    assert f"imply {implied:.4f} of theoretical" in r2["reason"][0]


def test_r2_leaves_a_nan_efficiency_out() -> None:
    """The engine orders NaN above every number; numpy compares it False. A row whose
    envelope efficiency is NaN is not a row above the ceiling."""
    analysis = analysis_of(r2_records(3, 3))
    rows = stale_rows(analysis)
    nan = rows.with_columns(pl.when(pl.col("row") >= 3).then(float("nan"))
                            .otherwise(pl.col("efficiency")).alias("efficiency"))
    [(finding, key)] = stale_findings(stale_groups(nan), analysis.machines)
    assert finding.reason.startswith("3 of 6 rows") and "median nan" not in finding.reason
    assert math.isfinite(float(finding.reason.split("median ")[1].split("%")[0]))
    assert key == ("h200", "cuda_core.fp32")


def write_csv(path: Path, records: list[dict[str, Any]]) -> None:
    fields = ["op", "flops", "bytes", "roof", "time_s", "timing", "device"]
    pl.DataFrame([{k: r[k] for k in fields} for r in records]).write_csv(path)


def test_analyze_says_r2_once_for_a_file_read_in_batches(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "runs.csv"
    write_csv(path, r2_records(4, 3) + r2_records(4, 3) + r2_records(4, 3))
    monkeypatch.setattr("roofwise.cli.analyze.BATCH_ROWS", 7)  # three batches
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    lint = out[out.index("lint: "):]
    assert lint.count("R2 ") == 1 and "12 of 21 rows bound by" in lint


def test_lint_table_shows_the_first_findings_and_counts_the_rest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = "runs.csv"
    write_csv(tmp_path / path, [{**fma_row(1.2, 1e-3), "device": "NVIDIA H200"}] * 60)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["lint", path]) == 1  # 60 rows above theoretical: M8 errors
    out = capsys.readouterr().out
    assert "60 finding(s): 60 error(s), 0 warning(s), of 1 kind(s)" in out
    # more findings than --limit: one row per kind, its first finding and how many are like it
    assert out.count(path + ":") == 1 and "runs.csv:2 (fma) (+59 more like it)" in out
    assert "every finding: --limit 0 (a table) or --json (one object each)" in out
    assert main(["lint", "--limit", "0", path]) == 1
    out = capsys.readouterr().out
    assert out.count(path + ":") == 60 and "more like it" not in out
    assert main(["lint", "--limit", "60", path]) == 1  # as many as the limit: each shown
    assert capsys.readouterr().out.count(path + ":") == 60


def test_lint_table_puts_r2_first(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """R2 comes last in the findings (after every row's), but a table cut at --limit would
    hide it: the table shows it first."""
    monkeypatch.chdir(tmp_path)
    write_csv(tmp_path / "runs.csv", r2_records(4, 3)
              + [{**fma_row(1.2, 1e-3), "device": "NVIDIA H200"}] * 60)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["lint", "--limit", "3", "runs.csv"]) == 1
    out = capsys.readouterr().out
    rows = [line.split()[0] for line in out.splitlines() if line[:3] in ("M8 ", "R2 ")]
    assert rows == ["R2", "M8"]  # 61 findings folded into 2 kinds, R2 first


def test_lint_json_keeps_one_finding_per_line_whatever_the_op_name(
        tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    """An op named with U+2028 and U+0085 (line breaks to `str.splitlines`, raw-legal in JSON)
    and one beyond ASCII: one finding per line, each read back with its name."""
    path = tmp_path / "odd.jsonl"
    names = ["a\u2028b\x85", "h\u00e9llo"]
    path.write_text("".join(json.dumps({**fma_row(1.2, 1e-3), "op": name,
                                        "device": "NVIDIA H200"}) + "\n" for name in names))
    assert main(["lint", "--json", str(path)]) == 1
    lines = capsysbinary.readouterr().out.decode("utf-8").splitlines()
    assert [json.loads(line)["where"] for line in lines] == [
        f"{path}:{n} ({name})" for n, name in enumerate(names, 1)]


def test_json_rows_carry_the_r2_of_their_batch_and_say_its_lines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`analyze --json` writes a batch before it reads the next: each row carries the R2 of
    its batch, whose sentence names the lines it counted (CSV data starts on line 2)."""
    path = tmp_path / "runs.csv"
    write_csv(path, r2_records(4, 3) + r2_records(4, 3) + r2_records(4, 3))
    monkeypatch.setattr("roofwise.cli.analyze.BATCH_ROWS", 7)
    assert main(["analyze", "--json", str(path)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    said = [next(f["reason"] for f in row["lint"] if f["code"] == "R2") for row in rows]
    for batch, first in enumerate((2, 9, 16)):
        expected = (f"4 of 7 rows bound by cuda_core.fp32 sustained in lines {first}-"
                    f"{first + 6} sit above it")
        assert all(s.startswith(expected) for s in said[7 * batch:7 * batch + 7])


def test_a_folder_of_shards_names_each_finding_by_its_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines restart in each shard, so a finding is where its own file says (not the folder's
    line 2 twice), and R2 counts every shard: 4 of 7 rows in each, 8 of 14 in all."""
    folder = tmp_path / "runs"
    folder.mkdir()
    above = {**fma_row(1.2, 1e-3), "device": "NVIDIA H200"}  # M8: above theoretical
    for k in (1, 2):
        write_csv(folder / f"part-{k}.csv", [above, *r2_records(4, 3)])
    assert main(["lint", "--json", str(folder)]) == 1
    found = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    m8 = [f["where"] for f in found if f["code"] == "M8"]
    assert m8 == [f"{folder / 'part-1.csv'}:2 (fma)", f"{folder / 'part-2.csv'}:2 (fma)"]
    assert [f["reason"].split(" rows")[0] for f in found if f["code"] == "R2"] == ["8 of 14"]
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["analyze", str(folder)]) == 0
    lint = capsys.readouterr().out.split("lint: ")[1]
    assert f"M8 {folder / 'part-1.csv'}:2 (fma) (+1 more like it)" in lint
    assert "R2 " in lint and "8 of 14 rows bound by" in lint
    # --json writes a shard's rows at a time: each carries its shard's R2, which says so
    assert main(["analyze", "--json", str(folder)]) == 0
    said = [[f["reason"] for f in json.loads(line)["lint"] if f["code"] == "R2"]
            for line in capsys.readouterr().out.splitlines()]
    assert said[0] == said[8] == []  # each shard's impossible row is no reading for R2
    for k, reasons in ((1, [r for [r] in said[1:8]]), (2, [r for [r] in said[9:]])):
        assert len(reasons) == 7
        assert all(r.startswith("4 of 7 rows bound by cuda_core.fp32 sustained in lines 2-9 "
                                f"of {folder / f'part-{k}.csv'} sit above it") for r in reasons)
    # the report reads the folder whole: each row keeps its own file
    page = tmp_path / "report.html"
    assert main(["report", str(folder), "-o", str(page)]) == 0
    html = page.read_text()
    assert f"{folder / 'part-1.csv'}:2 (fma)" in html and f"{folder / 'part-2.csv'}:2 (fma)" in html
    assert f"{folder}:2 (fma)" not in html


def test_lint_json_writes_nothing_when_a_later_batch_is_bad(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """lint reads a batch at a time and spools its lines: a bad record in the last batch is
    one line and exit 2, with none of the earlier batches' findings written."""
    path = tmp_path / "runs.csv"
    above = {**fma_row(1.2, 1e-3), "device": "NVIDIA H200"}
    write_csv(path, [above] * 20)
    path.write_text(path.read_text() + "fma,1,1,cuda_core.fp32,-1,kernel,NVIDIA H200\n")
    monkeypatch.setattr("roofwise.cli.lint.BATCH_ROWS", 7)
    assert main(["lint", "--json", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and f"{path}:22" in err
    path.write_text(path.read_text().rsplit("fma,1,1", 1)[0])  # the bad line gone
    assert main(["lint", "--json", str(path)]) == 1
    assert len(capsys.readouterr().out.splitlines()) == 20  # every batch's findings
