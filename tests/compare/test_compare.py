"""`compare`: regressions beyond the spread are found and gate CI; noise within it is not."""

from __future__ import annotations

import json

from roofwise.cli import main
from roofwise.compare.runs import (
    IMPROVEMENT,
    INCOMPARABLE,
    ONLY_BASE,
    ONLY_NEW,
    REGRESSION,
    UNCHANGED,
    compare,
)
from roofwise.output.analysis import analyze
from roofwise.profiles.load import builtin_machines
from roofwise.records.read import columns_from_valid
from roofwise.records.write import write_records

H200 = builtin_machines()["h200"]


def _row(op, tokens, time_s, p10=None, p90=None, device="NVIDIA H200"):
    row = {"op": op, "workload": {"tokens": tokens, "dtype": "bf16"}, "device": device,
           "flops": 1e9, "bytes": 1e9, "roof": "cuda_core.fp32", "time_s": time_s,
           "timing": "device"}
    if p10 is not None:
        row.update(time_p10_s=p10, time_p90_s=p90)
    return row


BASE = [
    _row("rmsnorm", 4096, 300e-6, 295e-6, 310e-6),   # planted regression: +20%, beyond spread
    _row("softmax", 4096, 300e-6, 250e-6, 350e-6),   # +10% but inside a wide spread: noise
    _row("gelu", 4096, 300e-6),                      # no spread, +3%: under the threshold
    _row("silu", 4096, 300e-6),                      # no spread, -30%: improvement
    _row("dropped", 1, 1e-3),                        # only in base
]
NEW = [
    {**_row("silu", 4096, 210e-6)},
    # workload key order differs: still the same benchmark
    {**_row("rmsnorm", 4096, 360e-6, 355e-6, 370e-6),
     "workload": {"dtype": "bf16", "tokens": 4096}},
    _row("softmax", 4096, 330e-6, 260e-6, 380e-6),
    _row("gelu", 4096, 309e-6),
    _row("rmsnorm", 8192, 1e-3),                     # different workload: only in new
]


def _analysis(rows):
    return analyze(columns_from_valid(rows), builtin_machines(), H200)


def test_planted_regression_found_and_noise_ignored():
    result = compare(_analysis(BASE), _analysis(NEW), threshold=0.05)
    status = {(c.key[0], json.loads(c.key[1])["tokens"]): c.status for c in result.changes}
    assert status == {("rmsnorm", 4096): REGRESSION, ("softmax", 4096): UNCHANGED,
                      ("gelu", 4096): UNCHANGED, ("silu", 4096): IMPROVEMENT,
                      ("dropped", 1): ONLY_BASE, ("rmsnorm", 8192): ONLY_NEW}
    # order: regressions, improvements, unchanged, unmatched
    assert [c.status for c in result.changes] == [REGRESSION, IMPROVEMENT, UNCHANGED, UNCHANGED,
                                                  ONLY_BASE, ONLY_NEW]
    (reg,) = result.regressions
    assert abs(reg.time_change - 0.20) < 1e-12
    assert reg.beyond_spread is True
    # efficiency: SOL = max(1e9/4.5024e12, 1e9/57.27e12) = 222.1 us; 222.1/300 -> 222.1/360
    sol = 1e9 / (4.8e12 * 0.9380)
    assert abs(reg.efficiency_change - (sol / 360e-6 - sol / 300e-6)) < 1e-12
    softmax = next(c for c in result.changes if c.key[0] == "softmax")
    assert softmax.beyond_spread is False and softmax.time_change > 0.05


def test_threshold_alone_decides_without_spreads():
    strict = compare(_analysis(BASE), _analysis(NEW), threshold=0.01)
    gelu = next(c for c in strict.changes if c.key[0] == "gelu")
    assert gelu.status == REGRESSION  # +3% > 1%
    loose = compare(_analysis(BASE), _analysis(NEW), threshold=0.25)
    assert not loose.regressions  # +20% rmsnorm is under a 25% threshold


def test_cli_gates_on_regression(tmp_path, capsys):
    base, new = tmp_path / "base.jsonl", tmp_path / "new.jsonl"
    write_records(base, BASE)
    write_records(new, NEW)
    assert main(["compare", str(base), str(new), "--fail-on-regression"]) == 1
    assert main(["compare", str(base), str(new)]) == 0
    capsys.readouterr()
    # no regression at 50%, but BASE's "dropped" row vanished from NEW: the gate still fails
    assert main(["compare", str(base), str(new), "--json", "--threshold", "0.5",
                 "--fail-on-regression"]) == 1
    out, err = capsys.readouterr()
    lines = [json.loads(x) for x in out.splitlines()]
    assert len(lines) == 6 and not any(x["status"] == REGRESSION for x in lines)
    assert err.count("\n") == 1 and "1 row(s) of BASE missing from NEW" in err
    assert "regression" not in err
    assert main(["compare", str(base), str(base), "--fail-on-regression"]) == 0
    # a row only in NEW is new coverage, not a failure
    kept = tmp_path / "kept.jsonl"
    write_records(kept, BASE[:4])
    assert main(["compare", str(kept), str(new), "--threshold", "0.5",
                 "--fail-on-regression"]) == 0


def test_malformed_row_in_new_is_reported_and_fails_the_gate(tmp_path, capsys):
    """The regressed rmsnorm row is malformed in NEW: it must not pass as merely 'only_base'."""
    base, new = tmp_path / "base.jsonl", tmp_path / "new.jsonl"
    write_records(base, BASE[:4])
    rows = [{**r} for r in NEW[:4]]
    rows[1]["time_s"] = "slow"  # the regressed rmsnorm row
    new.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["compare", str(base), str(new)]) == 0  # no gate: report, do not fail
    err = capsys.readouterr().err
    assert f"roofwise: skipped {new}:2" in err and "time_s" in err
    assert f"{new}: skipped 1 malformed record(s) of 4" in err
    assert main(["compare", str(base), str(new), "--fail-on-regression"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == ("roofwise: compare failed: 1 malformed record(s) skipped (a skipped row "
                       "cannot be compared); 1 row(s) of BASE missing from NEW (a vanished "
                       "benchmark cannot be shown not to regress)")
    assert main(["compare", str(base), str(new), "--strict"]) == 2
    err = capsys.readouterr().err
    assert err.count("roofwise: error:") == 1 and f"{new}:2" in err and "Traceback" not in err


def test_efficiency_change_is_not_shown_where_efficiency_is_not_a_reading(tmp_path, capsys):
    tiny = {"op": "tiny", "device": "NVIDIA H200", "flops": 1e3, "bytes": 1e3,
            "roof": "cuda_core.fp32", "timing": "device"}  # SOL 0.2 ns: below the floor
    # 1e12 B in 1 ms is 1000 TB/s: above HBM's theoretical 4.8 TB/s
    fast = {"op": "fast", "device": "NVIDIA H200", "flops": 1e3, "bytes": 1e12,
            "roof": "cuda_core.fp32", "timing": "device"}
    base_rows = [{**tiny, "time_s": 4.0e-6}, {**fast, "time_s": 1e-3}]
    new_rows = [{**tiny, "time_s": 4.1e-6}, {**fast, "time_s": 1.1e-3}]
    result = compare(_analysis(base_rows), _analysis(new_rows))
    verdicts = {c.key[0]: (c.base.verdict, c.new.verdict) for c in result.changes
                if c.base and c.new}
    assert verdicts == {"tiny": ("latency_bound", "latency_bound"),
                        "fast": ("impossible", "impossible")}
    for change in result.changes:
        data = change.to_json()
        assert data["efficiency_change"] is None
        assert data["base_efficiency"] is None and data["new_efficiency"] is None
    base, new = tmp_path / "base.jsonl", tmp_path / "new.jsonl"
    write_records(base, base_rows)
    write_records(new, new_rows)
    assert main(["compare", str(base), str(new), "--threshold", "0.5"]) == 0
    out = capsys.readouterr().out
    assert " pt" not in out  # neither "-0.0 pt" nor any other efficiency change
    tiny_line = next(ln for ln in out.splitlines() if " tiny " in ln)
    assert "+2.5%" in tiny_line and tiny_line.count("—") >= 1


def test_cli_bad_input_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"op": "x"}\n')
    good = tmp_path / "good.jsonl"
    write_records(good, BASE)
    assert main(["compare", str(tmp_path / "missing.jsonl"), str(good)]) == 2
    assert main(["compare", str(good), str(good), "--threshold", "-1"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("roofwise: error:") == 2


def test_non_positive_time_is_incomparable_and_fails_the_gate(tmp_path, capsys):
    """0 s -> 5 ms is no ratio at all: not 'unchanged', and never a pass under the gate."""
    row = {"op": "x", "flops": 1e9, "bytes": 1e9, "roof": "cuda_core.fp32",
           "device": "NVIDIA H200", "timing": "device"}
    result = compare(_analysis([{**row, "time_s": 0.0}, {**row, "op": "y", "time_s": 1e-3}]),
                     _analysis([{**row, "time_s": 5e-3}, {**row, "op": "y", "time_s": 1e-3}]))
    assert [(c.key[0], c.status) for c in result.changes] == [("x", INCOMPARABLE),
                                                              ("y", UNCHANGED)]
    bad = result.changes[0]
    assert bad.reason == "base time 0 s is not positive: no change in time can be measured"
    data = bad.to_json()
    assert data["status"] == "incomparable" and data["reason"] == bad.reason
    assert data["time_change"] is None and data["efficiency_change"] is None
    assert result.counts()[INCOMPARABLE] == 1 and not result.regressions

    base, new = tmp_path / "b0.jsonl", tmp_path / "n5.jsonl"
    base.write_text(json.dumps({**row, "time_s": 0}) + "\n")
    new.write_text(json.dumps({**row, "time_s": 5e-3}) + "\n")
    assert main(["compare", str(base), str(new)]) == 0  # reported, not gated
    out = capsys.readouterr().out
    assert "incomparable" in out and "base time 0 s is not positive" in out
    assert main(["compare", str(base), str(new), "--fail-on-regression"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == ["roofwise: compare failed: 1 incomparable row(s) (a time that is not "
                   "positive, or an impossible, blank or latency-bound row, cannot be shown not "
                   "to regress)"]
    # both sides bad: both named
    both = compare(_analysis([{**row, "time_s": 0.0}]), _analysis([{**row, "time_s": 0.0}]))
    assert both.changes[0].reason == ("base time 0 s is not positive; new time 0 s is not "
                                      "positive: no change in time can be measured")


def test_duplicate_keys_are_reported_and_fail_the_gate(tmp_path, capsys):
    row = {"op": "x", "flops": 1e9, "bytes": 1e9, "roof": "cuda_core.fp32", "device": "h200"}
    base, new = tmp_path / "bdup.jsonl", tmp_path / "n9.jsonl"
    base.write_text(json.dumps({**row, "time_s": 1e-3}) + "\n"
                    + json.dumps({**row, "op": "y", "time_s": 1e-3}) + "\n"
                    + json.dumps({**row, "time_s": 9e-3}) + "\n")
    new.write_text(json.dumps({**row, "time_s": 1e-3}) + "\n"
                   + json.dumps({**row, "op": "y", "time_s": 1e-3}) + "\n"
                   + json.dumps({**row, "time_s": 9e-3}) + "\n")
    result = compare(_analysis([json.loads(x) for x in base.read_text().splitlines()]),
                     _analysis([json.loads(x) for x in new.read_text().splitlines()]))
    assert [(d.side, d.line, d.first_line) for d in result.duplicates] == [("base", 3, 1),
                                                                           ("new", 3, 1)]
    # still paired in file order: 1 ms with 1 ms, 9 ms with 9 ms
    assert [c.status for c in result.changes] == [UNCHANGED] * 3
    assert main(["compare", str(base), str(new)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [f"roofwise: {p}: duplicate key: line 3 repeats line 1 (op 'x', workload "
                   "none, device 'h200'); paired in file order" for p in (base, new)]
    assert main(["compare", str(base), str(new), "--fail-on-regression"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and err[-1] == (
        "roofwise: compare failed: 2 duplicate key(s) (rows repeated within a file cannot be "
        "matched with certainty)")
