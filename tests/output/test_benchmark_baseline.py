"""The end-to-end benchmark's hand-written pipeline still writes what `analyze --json` writes.

`benchmarks/by_hand_same_output.py` is the baseline roofwise's speed is read against; the
benchmark refuses to time it when its output differs, and this test says so sooner: on a few
thousand of the benchmark's own records, in all three formats, its rows equal roofwise's field
for field (lint aside). A change to roofwise's output that the baseline does not follow fails
here, not in a benchmark run hours later.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from roofwise.cli import main

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_end_to_end",
                                                  BENCHMARKS / "bench_end_to_end.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("kind", ["csv", "jsonl", "parquet"])
def test_hand_written_pipeline_writes_roofwise_output(bench, tmp_path, capsysbinary, kind):
    paths = bench.write_files(bench.records_frame(6000, seed=3), tmp_path)
    assert main(["analyze", str(paths[kind]), "-m", "h200", "--json"]) == 0
    ours = pl.read_ndjson(capsysbinary.readouterr().out, infer_schema_length=None)
    done = subprocess.run([sys.executable, str(bench.SAME_OUTPUT), str(paths[kind]), kind,
                           json.dumps(bench.constants_full())], capture_output=True,
                          check=True, timeout=300)
    theirs = pl.read_ndjson(done.stdout, infer_schema_length=None)
    # the records reach every verdict and the rarer sentences the baseline must match
    assert set(ours["verdict"]) == {"at_ceiling", "below", "anomaly", "latency_bound",
                                    "impossible", "cache_resident"}
    said = ours["reasons"].explode()
    for phrase in ("net of the events floor", "so launches overlapped", "is under the",
                   "uncalibrated unit(s)", "exceeds its theoretical", "of the envelope ceiling",
                   "cache-resident in part", "that cache still leaves hbm at least"):
        assert said.str.contains(phrase, literal=True).any(), phrase
    assert ours.drop("lint").equals(theirs)


def test_a_different_output_is_refused_before_timing(bench, tmp_path):
    """The lighter pipeline (fewer fields and simpler sentences) is no baseline for `--json`."""
    paths = bench.write_files(bench.records_frame(500, seed=4), tmp_path)
    roofwise = [str(Path(sys.executable).with_name("roofwise")), "analyze", str(paths["csv"]),
                "-m", "h200", "--json"]
    lighter = [sys.executable, "-c", bench.POLARS, str(paths["csv"]), "csv",
               json.dumps(bench.constants())]
    with pytest.raises(SystemExit, match="differ"):
        bench._check_same_output(roofwise, lighter, tmp_path)


@pytest.fixture(scope="module")
def matrix():
    import sys as _sys

    _sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("bench_matrix", BENCHMARKS / "bench_matrix.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    _sys.modules["bench_matrix"] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("kind", "rows"), [
    ("contract", 3000), ("extras", 3000), ("many_ops", 3000), ("fleet", 3000), ("wild", 3000),
    # ~5,000 cache-resident rows in one batch: their sentences are filled by the engine, not
    # one by one (fmt.ENGINE_FROM_VALUES)
    ("wild", 40_000)])
def test_hand_written_pipeline_writes_roofwise_output_on_each_matrix_kind(matrix, tmp_path,
                                                                          kind, rows):
    """The matrix times the same-output pipeline on every kind of file; on each (the
    contract's fields only, extra text fields, p10/p90, six cards, mostly impossible rows) it
    still writes what `--json` writes."""
    spec = matrix.KINDS[kind]
    path = matrix.write_kind(spec, rows, tmp_path)
    ours = [str(Path(sys.executable).with_name("roofwise")), "analyze", str(path), "--json",
            *(["-m", spec.machine] if spec.machine else [])]
    by_hand = [sys.executable, str(matrix.e2e.SAME_OUTPUT), str(path), spec.fmt,
               matrix.constants(spec, True)]
    matrix.e2e._check_same_output(ours, by_hand, tmp_path)  # SystemExit where they differ
