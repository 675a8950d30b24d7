"""`roofwise compare A.json.gz B.json.gz`: two traces lined up by op group (issue 21, item 6).

The per-call means and the noise (twice the standard error of the difference of the means,
from each group's own calls) are recomputed here from the kernel durations written or read.
"""

from __future__ import annotations

import gzip
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from roofwise.cli import main

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
RANK0 = TRACES / "hta_sampled_rank0.json.gz"
RANK1 = TRACES / "hta_sampled_rank1.json.gz"
US = 1e-6


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def json_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def write(tmp_path: Path, name: str, calls: dict[str, list[float]],
          device: str = "NVIDIA H100 80GB HBM3") -> Path:
    """One op per call, each launching one kernel of the given microseconds, in sequence."""
    conv = ([[32, 64, 56, 56], [64, 64, 3, 3]], ["c10::BFloat16", "c10::BFloat16"])
    dims = {"aten::cudnn_convolution": conv, "aten::miopen_convolution": conv,
            "aten::mm": ([[512, 1024], [1024, 1024]], ["float", "float"]),
            "aten::add": ([[512, 1024], [512, 1024]], ["float", "float"]),
            "aten::mul": ([[512, 1024], [512, 1024]], ["float", "float"]),
            "aten::sub": ([[512, 1024], [512, 1024]], ["float", "float"]),
            "aten::relu": ([[512, 1024]], ["float"])}
    events, t, corr = [], 0, 100
    for op, durations in calls.items():
        for dur in durations:
            d, types = dims[op]
            events += [
                {"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": t,
                 "dur": 10, "args": {"External id": corr, "Input Dims": d,
                                     "Input type": types}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                 "tid": 1, "ts": t + 2, "dur": 2, "args": {"correlation": corr}},
                {"ph": "X", "cat": "kernel", "name": f"k_{op[6:]}", "pid": 0, "tid": 7,
                 "ts": t + 1000, "dur": dur, "args": {"device": 0, "correlation": corr}}]
            t += 1000
            corr += 1
    path = tmp_path / name
    path.write_text(json.dumps({"deviceProperties": [{"id": 0, "name": device}],
                                "traceEvents": events}))
    return path


BASE = {"aten::mm": [101, 99, 100, 102, 98], "aten::add": [10, 30, 10, 30],
        "aten::mul": [50], "aten::sub": [40, 40]}
NEW = {"aten::mm": [111, 109, 110, 112, 108], "aten::add": [12, 32, 12, 32],
       "aten::mul": [60], "aten::relu": [20, 20]}


def noise(a: list[float], b: list[float]) -> float:
    return 2 * math.sqrt(statistics.pstdev(a) ** 2 / len(a) + statistics.pstdev(b) ** 2
                         / len(b)) * US


def test_changes_beyond_the_noise_and_within_it(capsys, tmp_path):
    code, out, _ = run(capsys, "compare", write(tmp_path, "a.json", BASE),
                       write(tmp_path, "b.json", NEW), "--json")
    assert code == 0
    rows = {r["op"]: r for r in json_lines(out)}
    mm = rows["aten::mm"]  # +10% per call, calls within 2 us of each other: beyond
    assert mm["per_call_change"] == pytest.approx(0.10)
    assert mm["noise_s"] == pytest.approx(noise(BASE["aten::mm"], NEW["aten::mm"]))
    assert mm["beyond_noise"] is True and mm["status"] == "regression"
    add = rows["aten::add"]  # +10% per call, but its calls vary by 10 us: within the noise
    assert add["per_call_change"] == pytest.approx(0.10)
    assert add["noise_s"] == pytest.approx(noise(BASE["aten::add"], NEW["aten::add"]))
    assert add["beyond_noise"] is False and add["status"] == "unchanged"
    # one call a side: no spread; what is left is the clock (whole microseconds here, one
    # kernel per call: 1 us), which 50 -> 60 us is well beyond
    mul = rows["aten::mul"]
    assert mul["noise_s"] == pytest.approx(1 * US) and mul["beyond_noise"] is True
    assert mul["status"] == "regression" and mul["per_call_change"] == pytest.approx(0.2)
    assert rows["aten::sub"]["status"] == "only_base"
    assert rows["aten::relu"]["status"] == "only_new"
    assert mm["base_time_s"] == pytest.approx(500 * US) and mm["new_count"] == 5


def test_a_cudnn_and_a_miopen_convolution_of_the_same_tensors_are_one_group(capsys, tmp_path):
    """An H100 trace against an MI300X trace of one model: the convolution is cuDNN's op on
    one and MIOpen's on the other, with the same inputs; it was two groups, `only_base` and
    `only_new`. Now one, named by both, its change read: 100 -> 80 us per call, -20%."""
    base = write(tmp_path, "h100.json", {"aten::cudnn_convolution": [101, 99, 100, 100],
                                         "aten::mm": [100, 100]})
    new = write(tmp_path, "mi300x.json", {"aten::miopen_convolution": [81, 79, 80, 80],
                                          "aten::mm": [90, 90]}, "AMD Instinct MI300X")
    code, out, _ = run(capsys, "compare", base, new, "--json")
    assert code == 0
    rows = {r["op"]: r for r in json_lines(out)}
    assert set(rows) == {"aten::cudnn_convolution / aten::miopen_convolution", "aten::mm"}
    conv = rows["aten::cudnn_convolution / aten::miopen_convolution"]
    assert conv["shapes"] == "[32, 64, 56, 56] bf16, [64, 64, 3, 3] bf16"
    assert conv["base_count"] == conv["new_count"] == 4
    assert conv["per_call_change"] == pytest.approx(80 / 100 - 1)
    assert conv["status"] == "improvement"
    # the other direction names them the other way round
    code, out, _ = run(capsys, "compare", new, base, "--json")
    assert {r["op"] for r in json_lines(out)} == {
        "aten::miopen_convolution / aten::cudnn_convolution", "aten::mm"}


def test_one_tick_of_a_whole_microsecond_clock_is_no_change(capsys, tmp_path):
    # param's DLRM ranks: `aten::mm` 5 -> 6 us per call was "+20%, regression" in a trace
    # that writes whole microseconds; one kernel a call, so one tick a call is the clock's
    # resolution, not a change. 5 -> 7 us is two ticks: beyond it.
    base = {"aten::mm": [5, 5, 5], "aten::add": [5, 5, 5], "aten::mul": [5]}
    new = {"aten::mm": [6, 6, 6], "aten::add": [7, 7, 7], "aten::mul": [6]}
    code, out, _ = run(capsys, "compare", write(tmp_path, "a.json", base),
                       write(tmp_path, "b.json", new), "--json")
    rows = {r["op"]: r for r in json_lines(out)}
    assert code == 0
    for op in ("aten::mm", "aten::mul"):
        assert rows[op]["noise_s"] == pytest.approx(1 * US)
        assert rows[op]["beyond_noise"] is False and rows[op]["status"] == "unchanged"
    assert rows["aten::add"]["beyond_noise"] is True
    assert rows["aten::add"]["status"] == "regression"
    # a clock of nanoseconds (fractional microseconds, as Kineto writes today) resolves it
    frac = {"aten::mm": [5.0, 5.0, 5.0], "aten::add": [5.5, 5.5, 5.5], "aten::mul": [5.0]}
    code, out, _ = run(capsys, "compare", write(tmp_path, "c.json", frac),
                       write(tmp_path, "d.json", {**new, "aten::sub": [2.5]}), "--json")
    rows = {r["op"]: r for r in json_lines(out)}
    assert rows["aten::mm"]["noise_s"] == pytest.approx(1e-9)
    assert rows["aten::mm"]["status"] == "regression"


def test_verdicts_are_those_analyze_gives_each_side(capsys, tmp_path):
    a, b = write(tmp_path, "a.json", BASE), write(tmp_path, "b.json", NEW)
    _, out, _ = run(capsys, "compare", a, b, "--json")
    rows = {r["op"]: r for r in json_lines(out)}
    for path, side in ((a, "base_verdict"), (b, "new_verdict")):
        _, analyzed, _ = run(capsys, "analyze", path, "--json")
        for group in json_lines(analyzed)[:-1]:
            top = max(group["verdicts"].items(), key=lambda kv: kv[1])[0]
            assert rows[group["op"]][side] == top
    for row in rows.values():
        assert row["verdict_changed"] == (row["base_verdict"] != row["new_verdict"])


def test_the_gate_and_the_table(capsys, tmp_path):
    a, b = write(tmp_path, "a.json", BASE), write(tmp_path, "b.json", NEW)
    code, _, err = run(capsys, "compare", a, b, "--fail-on-regression")
    assert code == 1 and "2 op group(s) slower per call" in err and "missing from NEW" in err
    code, out, _ = run(capsys, "compare", a, a, "--fail-on-regression")
    assert code == 0 and "regression" not in out and "unchanged" in out


def test_a_trace_against_records_is_one_line(capsys, tmp_path):
    records = tmp_path / "r.jsonl"
    records.write_text(json.dumps({"op": "x", "time_s": 1e-3, "flops": 1, "bytes": 1,
                                   "device": "h100-sxm"}) + "\n")
    code, _, err = run(capsys, "compare", write(tmp_path, "a.json", BASE), records)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "r.jsonl" in err


def _calls(path: Path, name: str, dims: list) -> list[float]:
    """Per-call summed kernel time of one op and shapes, linked by brute force."""
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    launch = {e["args"]["correlation"]: e for e in events
              if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and "correlation" in e.get("args", {})}
    ops_on = defaultdict(list)
    for e in events:
        if e.get("cat") == "cpu_op":
            ops_on[(e["pid"], e["tid"])].append(e)
    per_op: dict[int, float] = defaultdict(float)
    for k in events:
        call = (launch.get(k.get("args", {}).get("correlation"))
                if k.get("cat") == "kernel" else None)
        if call is None:
            continue
        enclosing = [o for o in ops_on[(call["pid"], call["tid"])]
                     if o["ts"] <= call["ts"] <= o["ts"] + o["dur"]]
        if enclosing:
            op = min(enclosing, key=lambda o: o["dur"])
            if op["name"] == name and op["args"].get("Input Dims") == dims:
                per_op[id(op)] += k["dur"]
    return list(per_op.values())


def test_real_ranks_compared_by_group_match_the_raw_calls(capsys):
    code, out, _ = run(capsys, "compare", RANK0, RANK1, "--json")
    assert code == 0
    dims = [[10, 327680], [327680, 606]]
    row = next(r for r in json_lines(out) if r["op"] == "aten::mm"
               and r["shapes"] == "[10, 327680] fp32, [327680, 606] fp32")
    a, b = _calls(RANK0, "aten::mm", dims), _calls(RANK1, "aten::mm", dims)
    assert (row["base_count"], row["new_count"]) == (len(a), len(b))
    assert row["base_per_call_s"] == pytest.approx(statistics.mean(a) * US)
    assert row["new_per_call_s"] == pytest.approx(statistics.mean(b) * US)
    assert row["noise_s"] == pytest.approx(noise(a, b))
    beyond = abs(statistics.mean(b) - statistics.mean(a)) * US > noise(a, b)
    assert row["beyond_noise"] is beyond


def test_real_whole_microsecond_traces_report_no_change_of_one_tick(capsys):
    # param's DLRM ranks 0 and 1 (whole-microsecond durations): 18 of the 21 changes were
    # one tick a call (5 -> 6 us read as +20%); every change left is more than a tick per
    # kernel of a call
    folder = TRACES / "param_dlrm_8ranks"
    a, b = sorted(folder.iterdir())[:2]
    code, out, _ = run(capsys, "compare", a, b, "--json")
    assert code == 0
    changed = [r for r in json_lines(out) if r["status"] in ("regression", "improvement")]
    assert changed
    for r in changed:
        assert r["noise_s"] >= 1 * US
        assert abs(r["new_per_call_s"] - r["base_per_call_s"]) > r["noise_s"]
