"""Several ranks' traces merged into one file (as trace-merging scripts write them, one
process per rank) read as the ranks read apart.

Each process numbers its launches' correlation ids on its own, from about the same start, so
in a merged file one id names a launch of every rank. Linking by the id alone gave one rank's
kernels to another rank's ops, and an op that so received a collective kernel was grouped with
its ordinary calls and ended the command in a KeyError. The two fixture ranks were sampled
(their ids barely overlap), so rank 1's ids are moved onto rank 0's range here, as in a full
trace.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from roofwise.cli import main

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
SUMMED = ("kernels", "ops", "priced_ops", "kernel_time_s", "priced_time_s",
          "communication_time_s", "unattributed_time_s", "memcpy_time_s")


def _load(name: str) -> dict:
    return json.loads(gzip.decompress((TRACES / name).read_bytes()))


def _correlations(trace: dict) -> list[int]:
    return [e["args"]["correlation"] for e in trace["traceEvents"]
            if isinstance(e.get("args"), dict) and "correlation" in e["args"]]


def _analyze(capsys, path: Path) -> tuple[list[dict], dict]:
    code = main(["analyze", str(path), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    return rows[:-1], rows[-1]


def _by_group(rows: list[dict]) -> tuple[Counter, Counter]:
    count, time_s = Counter(), Counter()
    for r in rows:
        count[(r["op"], r["shapes"])] += r["count"]
        time_s[(r["op"], r["shapes"])] += r["time_s"]
    return count, time_s


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> tuple[Path, Path]:
    """Rank 1 with its ids on rank 0's range, and the two merged into one file."""
    rank0, rank1 = _load("hta_sampled_rank0.json.gz"), _load("hta_sampled_rank1.json.gz")
    shift = min(_correlations(rank0)) - min(_correlations(rank1))
    for event in rank1["traceEvents"]:
        if isinstance(event.get("args"), dict) and "correlation" in event["args"]:
            event["args"]["correlation"] += shift
        if event.get("cat") == "ac2g":
            event["id"] += shift
    shared = set(_correlations(rank0)) & set(_correlations(rank1))
    assert len(shared) >= 50  # launches (and their kernels) of both ranks share these ids
    folder = tmp_path_factory.mktemp("merged")
    moved = folder / "rank1.json.gz"
    moved.write_bytes(gzip.compress(json.dumps(rank1).encode()))
    merged = folder / "merged.json.gz"
    both = {**rank0, "traceEvents": rank0["traceEvents"] + rank1["traceEvents"]}
    merged.write_bytes(gzip.compress(json.dumps(both).encode()))
    return moved, merged


def test_a_merged_trace_is_the_sum_of_its_ranks(capsys, ranks):
    moved, merged = ranks
    rows0, summary0 = _analyze(capsys, TRACES / "hta_sampled_rank0.json.gz")
    rows1, summary1 = _analyze(capsys, moved)
    rows, summary = _analyze(capsys, merged)
    for field in SUMMED:
        assert summary[field] == pytest.approx(summary0[field] + summary1[field], abs=1e-12)
    count0, time0 = _by_group(rows0)
    count1, time1 = _by_group(rows1)
    count, time_s = _by_group(rows)
    assert count == count0 + count1
    for group in count:
        assert time_s[group] == pytest.approx(time0[group] + time1[group], abs=1e-12)
