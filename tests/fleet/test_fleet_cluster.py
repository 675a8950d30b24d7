"""`roofwise fleet` on a real Dask cluster (a local one, two worker processes) says what
`roofwise analyze` says on the same files: every verdict, reason and lint field (the --json
lines byte for byte), the counts, the worst rows and the skipped records; and bad input is one
line, exit 2, with nothing written.

The dataset is the fleet benchmark's own generator (benchmarks/bench_fleet.py): several
Parquet shards, five cards (one no profile knows), impossible, anomaly, latency-bound and
blank rows, and one malformed record.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from pathlib import Path

import polars as pl
import pytest

import roofwise.cli.analyze as analyze_cli
from roofwise.cli import main

if os.environ.get("ROOFWISE_REQUIRE_FLEET"):  # CI installs the fleet extra: never skip there
    import distributed
else:
    distributed = pytest.importorskip("distributed")

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
ROWS, SHARDS = 4_000, 4


def _bench():
    spec = importlib.util.spec_from_file_location("bench_fleet", BENCHMARKS / "bench_fleet.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scheduler():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", silence_logs=logging.ERROR) as cluster:
        with distributed.Client(cluster) as client:
            assert len(client.scheduler_info()["workers"]) == 2  # two worker processes
        yield cluster.scheduler_address


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fleet") / "history"
    paths = _bench().write_dataset(folder, ROWS, SHARDS, seed=23)
    broken = pl.read_parquet(paths[2])
    broken[5, "bytes"] = -1.0  # row 6 of the third shard: skipped, named by file and row
    broken.write_parquet(paths[2])
    return folder


@pytest.fixture(scope="module")
def alone_json(dataset):
    """`roofwise analyze DATASET --json` on one process: exit code, stdout, stderr."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["analyze", str(dataset), "--json"])
    return code, out.getvalue(), err.getvalue()


def _run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_verdict_is_analyze_s(capsys, dataset, scheduler, alone_json):
    fleet = _run(capsys, "fleet", dataset, "--scheduler", scheduler, "--json")
    assert fleet == alone_json  # exit code, every line byte for byte, every stderr line
    assert fleet[0] == 0
    rows = [json.loads(line) for line in fleet[1].splitlines()]
    assert len(rows) == ROWS - 1
    verdicts = {v: sum(r["verdict"] == v for r in rows) for v in
                ("impossible", "anomaly", "latency_bound", "blank", "below", "at_ceiling")}
    assert all(verdicts.values()), verdicts  # every kind of row is in the dataset
    # an H200 row that moved its bytes faster than the datasheet's 4.8 TB/s is impossible
    fast = [r for r in rows if r["device"] == "NVIDIA H200" and r["bytes"] >= 1e6
            and r["bytes"] / r["time_s"] > 4.8e12]
    assert fast and all(r["verdict"] == "impossible" for r in fast)
    assert (f"roofwise: skipped {dataset}/night-00002.parquet:row 6: bytes: expected a "
            "non-negative finite number, got -1.0") in fleet[2]


def test_counts_and_worst_rows_are_analyze_s(capsys, monkeypatch, dataset, scheduler,
                                            alone_json):
    monkeypatch.setenv("COLUMNS", "120")
    fleet = _run(capsys, "fleet", dataset, "--scheduler", scheduler, "--limit", "12")
    alone = _run(capsys, "analyze", dataset, "--limit", "12")
    assert fleet == alone
    title = fleet[1].splitlines()[0]
    counted = {}
    for line in alone_json[1].splitlines():
        verdict = json.loads(line)["verdict"]
        counted[verdict] = counted.get(verdict, 0) + 1
    assert title.startswith(f"{ROWS - 1} records: ")
    said = dict(reversed(part.split()) for part in title.split(": ", 1)[1].split(", "))
    assert {k: int(v) for k, v in said.items()} == counted
    shown = [line.split()[0] for line in fleet[1].splitlines()[3:] if line[:1].isalpha()]
    assert shown[:12] == ["impossible"] * 12  # the worst first: more than 12 are impossible


def test_small_batches_and_the_judged_dataset(capsys, monkeypatch, dataset, scheduler,
                                              tmp_path):
    """Shards cut into batches as analyze cuts them; the judged rows written as Parquet."""
    from roofwise.fleet import judge_dataset
    from roofwise.lint import lint_columns

    lines: list[bytes] = []
    out = tmp_path / "judged"
    result = judge_dataset(dataset, scheduler=scheduler, batch_rows=300, out=out,
                           on_json=lines.append, row_lint=lambda a, shard: lint_columns(
                               a, [], path=str(dataset), machine_level=True, shard=shard))
    monkeypatch.setattr(analyze_cli, "BATCH_ROWS", 300)
    _, alone, _ = _run(capsys, "analyze", dataset, "--json")
    assert b"".join(lines).decode() == alone
    assert result.shards == SHARDS and result.batches == 16  # 1,000 rows: 4 batches a shard
    assert result.records == ROWS - 1 and result.skipped_count == 1
    assert result.skipped_line == (f"{dataset}: skipped 1 malformed record(s) of {ROWS}; "
                                   "--strict fails the file instead")
    written = sorted(out.iterdir())
    assert [p.name for p in written[:5]] == [f"part-00000-000{k}.parquet" for k in range(4)] + [
        "part-00001-0000.parquet"]
    judged = pl.concat([pl.read_parquet(p) for p in written], how="diagonal_relaxed")
    rows = [json.loads(line) for line in alone.splitlines()]
    assert judged["verdict"].to_list() == [r["verdict"] for r in rows]
    assert judged["reasons"].to_list() == [r["reasons"] for r in rows]
    assert judged["op"].to_list() == [r["op"] for r in rows]
    assert sum(result.counts.values()) == ROWS - 1


def test_a_local_cluster_of_its_own(capsys, monkeypatch):
    """--local N starts N worker processes for the run, and stops them."""
    monkeypatch.setenv("COLUMNS", "120")
    records = BENCHMARKS.parent / "examples" / "records.jsonl"
    fleet = _run(capsys, "fleet", records, "--local", "1")
    assert fleet == _run(capsys, "analyze", records) and fleet[0] == 0


def test_a_url_dataset_names_its_shards_by_url(capsys, dataset, scheduler, alone_json):
    """fsspec URLs (file:// here, s3:// or gs:// with their package): each worker fetches a
    shard and says a bad record by the shard's URL."""
    url = f"file://{dataset}"
    fleet = _run(capsys, "fleet", url, "--scheduler", scheduler, "--json")
    assert fleet[0] == 0 and fleet[1] == alone_json[1]
    assert f"roofwise: skipped {url}/night-00002.parquet:row 6: bytes:" in fleet[2]


def _one_error(capsys, *args):
    code, out, err = _run(capsys, *args)
    assert code == 2 and out == "", (code, out, err)
    assert err.count("\n") == 1 and err.startswith("roofwise: error: ")
    return err.strip()


def test_bad_input_is_one_line_and_nothing_written(capsys, dataset, scheduler, tmp_path):
    missing = tmp_path / "nothing-here"
    assert _one_error(capsys, "fleet", missing, "--scheduler", scheduler) == (
        f"roofwise: error: {missing}: no such file or folder; expected a records file or a "
        "folder of shards")
    broken = tmp_path / "broken"
    broken.mkdir()
    for path in sorted(dataset.iterdir())[:2]:
        (broken / path.name).write_bytes(path.read_bytes())
    (broken / "night-00009.parquet").write_bytes(b"PAR1 this is not a Parquet file")
    out = tmp_path / "out"
    err = _one_error(capsys, "fleet", broken, "--scheduler", scheduler, "--json", "--out", out)
    assert err.startswith(f"roofwise: error: {broken}/night-00009.parquet: not a readable "
                          "Parquet file")
    assert not out.exists()  # checked on the workers before anything is written
    err = _one_error(capsys, "fleet", dataset, "--scheduler", "nonsense")
    assert err.startswith("roofwise: error: --scheduler nonsense: no Dask scheduler answered")
    used = tmp_path / "used"
    used.mkdir()
    (used / "keep.txt").write_text("mine")
    err = _one_error(capsys, "fleet", dataset, "--scheduler", scheduler, "--out", used)
    assert err == (f"roofwise: error: {used}: exists and is not an empty folder; expected a "
                   "new folder for the judged rows")
    err = _one_error(capsys, "fleet", dataset, "--scheduler", scheduler, "--json", "--strict")
    assert err == (f"roofwise: error: {dataset}/night-00002.parquet:row 6: bytes: expected a "
                   "non-negative finite number, got -1.0")


def test_no_scheduler_at_the_address():
    from roofwise.base.errors import InputError
    from roofwise.fleet import judge_dataset

    with pytest.raises(InputError, match=r"^--scheduler tcp://127\.0\.0\.1:9: no Dask "
                                         r"scheduler answered \(Timed out"):
        judge_dataset(BENCHMARKS.parent / "examples" / "records.jsonl",
                      scheduler="tcp://127.0.0.1:9", connect_timeout_s=1.0)


def test_names_as_many_skipped_records_as_analyze():
    from roofwise.cli.common import MAX_SKIPPED_LINES
    from roofwise.fleet.worker import SAY_AT_MOST

    assert SAY_AT_MOST == MAX_SKIPPED_LINES == 20
