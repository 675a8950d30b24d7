"""`compare`: regressions beyond the spread are found and gate CI; noise within it is not."""

from __future__ import annotations

import json

from roofwise.analysis import analyze
from roofwise.cli import main
from roofwise.compare import IMPROVEMENT, ONLY_BASE, ONLY_NEW, REGRESSION, UNCHANGED, compare
from roofwise.profiles import builtin_machines
from roofwise.recordio import write_records
from roofwise.records import columns_from_valid

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
    assert main(["compare", str(base), str(new), "--json", "--threshold", "0.5",
                 "--fail-on-regression"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == 6 and not any(x["status"] == REGRESSION for x in lines)
    assert main(["compare", str(base), str(base), "--fail-on-regression"]) == 0


def test_cli_bad_input_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"op": "x"}\n')
    good = tmp_path / "good.jsonl"
    write_records(good, BASE)
    assert main(["compare", str(tmp_path / "missing.jsonl"), str(good)]) == 2
    assert main(["compare", str(good), str(good), "--threshold", "-1"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("roofwise: error:") == 2
