"""`compare` reads a change beside both verdicts: an impossible, blank or latency-bound row is
never an improvement or a regression, and the CI gate fails on it; matching is vectorised."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from roofwise.cli import main
from roofwise.compare.runs import (
    IMPROVEMENT,
    INCOMPARABLE,
    ONLY_BASE,
    ONLY_NEW,
    REGRESSION,
    UNCHANGED,
    Changes,
    compare,
)
from roofwise.output.analysis import analyze
from roofwise.output.frame import json_rows_writer
from roofwise.profiles.load import builtin_machines
from roofwise.records.read import columns_from_valid
from roofwise.records.write import write_records

MACHINES = builtin_machines()
H200 = MACHINES["h200"]


def _analysis(rows):
    return analyze(columns_from_valid(rows), MACHINES, H200)


def _row(op, bytes_, time_s, **extra):
    return {"op": op, "device": "NVIDIA H200", "flops": 1e6, "bytes": bytes_,
            "roof": "cuda_core.fp32", "time_s": time_s, **extra}


def test_an_impossible_new_row_is_not_an_improvement_and_fails_the_gate(tmp_path, capsys):
    # 2e11 B in 100 ms is 2 TB/s (below the 4.8 TB/s theoretical); in 1 ms, 200 TB/s
    base_rows = [_row("copy", 2e11, 100e-3)]
    new_rows = [_row("copy", 2e11, 1e-3)]  # 200 TB/s on an H200: impossible
    result = compare(_analysis(base_rows), _analysis(new_rows))
    (change,) = result.changes
    assert (change.base.verdict, change.new.verdict) == ("below", "impossible")
    assert change.status == INCOMPARABLE and not result.by_status(IMPROVEMENT)
    assert change.time_change == pytest.approx(-0.99)  # still shown: the measured change
    assert "new row is impossible" in change.reason
    base, new = tmp_path / "base.jsonl", tmp_path / "new.jsonl"
    write_records(base, base_rows)
    write_records(new, new_rows)
    assert main(["compare", str(base), str(new), "--fail-on-regression"]) == 1
    out, err = capsys.readouterr()
    assert "improvement" not in out and "below → impossible" in out
    assert "1 incomparable row(s)" in err


@pytest.mark.parametrize("base_row, new_row, verdicts", [
    # blank: a roof the profile does not have
    (_row("b", 1e9, 1e-3, roof="tensor_core.int4"), _row("b", 1e9, 2e-3, roof="tensor_core.int4"),
     ("blank", "blank")),
    # latency-bound: SOL 0.2 ns, 1 us and then 2.5 us measured, under every floor of the h200
    (_row("t", 1e3, 1e-6), _row("t", 1e3, 2.5e-6), ("latency_bound", "latency_bound")),
    # an impossible base row "improving" into a possible one is no regression either
    (_row("i", 2e11, 1e-3), _row("i", 2e11, 100e-3), ("impossible", "below")),
])
def test_unjudged_rows_are_never_called_changes(base_row, new_row, verdicts):
    result = compare(_analysis([base_row]), _analysis([new_row]))
    (change,) = result.changes
    assert (change.base.verdict, change.new.verdict) == verdicts
    assert change.status == INCOMPARABLE
    assert np.isfinite(change.time_change) and abs(change.time_change) > 0.5
    assert change.reason.endswith("its change in time is not the kernel's to judge")
    data = change.to_json()
    assert data["status"] == INCOMPARABLE and data["efficiency_change"] is None


def json_text(changes: Changes) -> str:
    """What `compare --json` writes of the changes."""
    out = io.StringIO()
    json_rows_writer(changes.json_frame(), raw={"workload"})(out)
    return out.getvalue()


def test_json_lines_equal_to_json_of_each_change(tmp_path):
    base_rows = [_row("a", 1e9, 1e-3, workload={"n": 1, "d": "bf16"}),
                 _row("a", 1e9, 1e-3, workload={"n": 1, "d": "bf16"}),  # repeated key
                 _row("gone", 1e9, 1e-3), _row("z", 2e11, 100e-3),
                 _row("s", 1e9, 1e-3, time_p10_s=0.9e-3, time_p90_s=1.1e-3)]
    new_rows = [_row("a", 1e9, 2e-3, workload={"d": "bf16", "n": 1}),
                _row("a", 1e9, 0.5e-3, workload={"d": "bf16", "n": 1}),
                _row("z", 2e11, 1e-3), _row("fresh", 1e9, 0.0),
                _row("s", 1e9, 1.2e-3, time_p10_s=1.0e-3, time_p90_s=1.3e-3)]
    result = compare(_analysis(base_rows), _analysis(new_rows))
    assert [c.status for c in result.changes] == [
        REGRESSION, INCOMPARABLE, IMPROVEMENT, UNCHANGED, ONLY_BASE, ONLY_NEW]
    assert [(d.side, d.line, d.first_line) for d in result.duplicates] == [
        ("base", 2, 1), ("new", 2, 1)]
    lines = [json.loads(line) for line in json_text(result.changes).splitlines()]
    assert lines == [c.to_json() for c in result.changes]
    assert result.counts() == {REGRESSION: 1, INCOMPARABLE: 1, IMPROVEMENT: 1, UNCHANGED: 1,
                               ONLY_BASE: 1, ONLY_NEW: 1}


def test_a_large_comparison_pairs_every_row():
    """50,000 rows a side, listed in another order by the new run: every pair found, every
    slower one a regression (its speed is measured in benchmarks/, not here)."""
    n = 50_000
    rng = np.random.default_rng(9)
    ops = np.array([f"op{k % 97}" for k in range(n)], dtype=object)
    workloads = [{"m": int(k), "dtype": "bf16"} for k in range(n)]
    rows = [{"op": ops[k], "workload": workloads[k], "device": "NVIDIA H200", "flops": 2e9,
             "bytes": 3e9, "roof": "tensor_core.bf16", "time_s": 1e-3} for k in range(n)]
    base = _analysis(rows)
    order = rng.permutation(n)  # the new run lists the same benchmarks in another order
    slower = rng.random(n) < 0.1
    new_rows = [{**rows[k], "time_s": 1.5e-3 if slower[k] else 1e-3} for k in order]
    new = _analysis(new_rows)
    result = compare(base, new)
    lines = len(json_text(result.changes).splitlines())
    assert result.counts()[REGRESSION] == int(slower.sum())
    assert result.counts()[UNCHANGED] == n - int(slower.sum()) and lines == n
