"""Records timed with the caches flushed first (`cache_state: cold`, as `roofwise bench`
writes): nothing the call reads was in a cache when it started, so a cache can explain a rate
above DRAM's only by holding what the call writes after it ends.

By hand, on the H100 SXM (HBM 3.35 TB/s, L2 52,428,800 B):
- 30,000,000 B read once at 3.7 TB/s: warm, it fits the L2 (cache_resident); cold, HBM moved
  all 30 MB in 8.108 us, 3.7 TB/s: impossible.
- the add on [1, 5185, 1024] bf16 (21,237,760 B read, 10,618,880 B written) at 3.7 TB/s: cold,
  HBM read 21,237,760 B in 8.610 us (2,466.7 GB/s) and the writes can stay in the L2: possible,
  cache-resident in part.
"""

from __future__ import annotations

import json

import pytest

from roofwise.cli import main
from roofwise.output.analysis import analyze
from roofwise.records.read import columns_from_valid, validate_record

H100 = "NVIDIA H100 80GB HBM3"
READ = 30_000_000
ADD_READ, ADD_WRITE = 2 * 5185 * 1024 * 2, 5185 * 1024 * 2


def _rows(machines, rows, device=H100):
    good = [validate_record({"op": "k", "device": device, "roof": "cuda_core.fp32",
                             "timing": "kernel", "flops": 0, **row}, f"row {k}")
            for k, row in enumerate(rows)]
    return analyze(columns_from_valid(good), machines)


def test_a_flushed_read_cannot_come_from_the_cache(machines):
    row = {"bytes": READ, "read_bytes": READ, "write_bytes": 0, "time_s": READ / 3.7e12}
    a = _rows(machines, [row, {**row, "cache_state": "cold"}, {**row, "cache_state": "warm"}])
    assert [a.verdict_name(i) for i in range(3)] == ["cache_resident", "impossible",
                                                     "cache_resident"]
    said = " ".join(a.row(1)["reasons"])
    assert ("bytes/time 3700.0 GB/s exceeds hbm theoretical 3350 GB/s, and its caches were "
            "flushed before it ran (cache_state cold), so of its working set of 30.00 MB it "
            "read every byte it reads from hbm, and the 52.43 MB l2 can hold up to 52.43 MB of "
            "what it writes after: that still leaves hbm at least 30.00 MB in the time, "
            "3700.0 GB/s: physically impossible") in said
    assert a.judged.cache_dram_bytes[1] == READ


def test_a_flushed_call_may_still_leave_its_writes_in_the_cache(machines):
    assert (ADD_READ, ADD_WRITE) == (21_237_760, 10_618_880)
    total = ADD_READ + ADD_WRITE
    time_s = total / 3.7e12
    a = _rows(machines, [{"bytes": total, "read_bytes": ADD_READ, "write_bytes": ADD_WRITE,
                          "time_s": time_s, "cache_state": "cold"}])
    assert a.verdict_name(0) == "cache_resident" and a.row(0)["efficiency"] is None
    assert a.judged.cache_dram_bytes[0] == ADD_READ
    assert ADD_READ / time_s == pytest.approx(2466.7e9, rel=1e-4)
    said = a.row(0)["reasons"][0]
    assert said.startswith(
        "bytes/time 3700.0 GB/s is above hbm theoretical 3350 GB/s; its caches were flushed "
        "before it ran (cache_state cold), so of its working set of 31.86 MB it read every "
        "byte it reads from hbm, but the 52.43 MB l2 can hold up to 52.43 MB of what it writes "
        "after, which leaves at least 21.24 MB to hbm, 2466.7 GB/s, within its theoretical "
        "rate: cache-resident in part")


def test_a_flushed_anomaly_is_not_read_as_the_cache(machines):
    """H200: 30 MB at 4.75 TB/s is above 105% of the HBM envelope (4.728 TB/s) but within
    its 4.8 TB/s theoretical rate, and fits the L2: warm, cache_resident; cold, HBM alone
    served it, so the envelope judges it: anomaly."""
    mb30 = 30_000_000
    row = {"bytes": mb30, "time_s": mb30 / 4.75e12}
    a = _rows(machines, [row, {**row, "cache_state": "cold"}], device="NVIDIA H200")
    assert [a.verdict_name(i) for i in range(2)] == ["cache_resident", "anomaly"]


def test_the_field_is_read_checked_and_passed_through(tmp_path, capsys):
    common = {"op": "k", "flops": 0, "bytes": READ, "read_bytes": READ, "write_bytes": 0,
              "roof": "cuda_core.fp32", "time_s": READ / 3.7e12, "device": H100,
              "timing": "kernel"}
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in (
        {**common, "cache_state": "cold"}, {**common, "cache_state": ""}, common)) + "\n")
    csv = tmp_path / "r.csv"
    csv.write_text("op,flops,bytes,read_bytes,write_bytes,roof,time_s,device,timing,"
                   "cache_state\r\n"
                   f"k,0,{READ},{READ},0,cuda_core.fp32,{READ / 3.7e12!r},{H100},kernel,cold\r\n"
                   f"k,0,{READ},{READ},0,cuda_core.fp32,{READ / 3.7e12!r},{H100},kernel,\r\n")
    for path in (jsonl, csv):
        assert main(["analyze", str(path), "--json"]) == 0
        rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert rows[0]["cache_state"] == "cold" and rows[0]["verdict"] == "impossible"
        assert "cache_state" not in rows[1] and rows[1]["verdict"] == "cache_resident"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**common, "cache_state": "hot"}) + "\n")
    assert main(["analyze", str(bad), "--strict"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"roofwise: error: {bad}:1: cache_state: expected one of cold, warm, got 'hot'"]


def test_lint_warns_on_a_flushed_call_only_its_writes_can_explain(machines):
    from roofwise.lint import lint_analysis

    total = ADD_READ + ADD_WRITE
    a = _rows(machines, [{"bytes": total, "read_bytes": ADD_READ, "write_bytes": ADD_WRITE,
                          "time_s": total / 3.7e12, "cache_state": "cold"}])
    (m8,) = [f for f in lint_analysis(a) if f.code == "M8"]
    assert m8.severity == "warning"
    assert m8.reason.endswith(
        "with its caches flushed before it ran (cache_state cold): possible only if the "
        "52.43 MB l2 held nearly all it can of what the call writes after")
    assert m8.fix.startswith("recount bytes and check the timer: the cache was flushed")
