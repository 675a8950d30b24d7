"""The working set a cache must hold: the distinct bytes a call touches, each once.

An in-place `add_(x, y)` reads x and y and writes x: it moves 3 tensors' bytes but touches 2.
On HTA's A100 (40 GB) training trace, `add_` on two [19410, 256] fp32 tensors moves 59.6 MB
in about 35 us, 1.70 TB/s, above the HBM's theoretical 1,555 GB/s: roofwise called its 6
calls impossible because 59.6 MB is more than the 41.9 MB L2. The 39.8 MB it touches fit, so
the L2 could have served it: cache-resident. A `tanh` of [1024, 9375] fp32 (38.4 MB in, 38.4 MB
out) touches 76.8 MB, more than the L2; but its input can have been in the L2 before the call
and its output can stay there after it (dirty lines not yet written back), each 38.4 MB within
41.9 MB: cache-resident in part, HBM's share possibly nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

from roofwise.cli import main
from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
A100_40GB_L2 = 41_943_040  # the A100 whitepaper's 40 MiB


def test_footprint_counts_an_in_place_tensor_and_a_re_read_table_once():
    x = Tensor("x", (19410, 256), "fp32", Role.INOUT)
    y = Tensor("y", (19410, 256), "fp32", Role.INPUT)
    add_ = Ledger("add_", "cuda_core.fp32", (x, y), (Work("cuda_core.fp32", "arithmetic",
                                                          19410 * 256),))
    size = 19410 * 256 * 4
    assert add_.bytes == 3 * size and add_.footprint_bytes == 2 * size
    assert add_.to_record()["footprint_bytes"] == 2 * size
    # a 1 KiB table re-read 1,000 times moves 1 MiB, touches 1 KiB
    table = Tensor("table", (256,), "fp32", Role.LOOKUP).charged_per_use(1000, 1024)
    out = Tensor("out", (1024,), "fp32", Role.OUTPUT)
    lookup = Ledger("lut", "cuda_core.fp32", (table, out), ())
    assert lookup.bytes == 1000 * 1024 + 4096 and lookup.footprint_bytes == 1024 + 4096
    # a call that touches each tensor once says nothing more
    plain = Ledger("copy", "cuda_core.fp32", (y, Tensor("o", (19410, 256), "fp32",
                                                       Role.OUTPUT)), ())
    assert plain.footprint_bytes == plain.bytes and "footprint_bytes" not in plain.to_record()


def _analyze(capsys, path, *args):
    code = main(["analyze", str(path), "--json", *args])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


def test_a_record_whose_working_set_fits_l2_is_cache_resident(tmp_path, capsys):
    moved, touched, time_s = 59_639_040, 39_759_360, 35e-6  # 1,704 GB/s
    assert touched < A100_40GB_L2 < moved and moved / time_s > 1555e9
    common = {"flops": 4969920, "bytes": moved, "roof": "cuda_core.fp32", "time_s": time_s,
              "device": "NVIDIA A100-SXM4-40GB", "timing": "kernel"}
    # read only, ten times as much in ten times the time: the L2 can hold 41,943,040 B of it
    # before the call, so HBM moved at least 596,390,400 - 41,943,040 = 554,447,360 B in
    # 350 us, 1584.1 GB/s, above its 1555 GB/s: impossible
    read_only = {**common, "bytes": 10 * moved, "read_bytes": 10 * moved, "write_bytes": 0,
                 "time_s": 10 * time_s}
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (
        {"op": "in_place", **common, "footprint_bytes": touched},
        {"op": "unsaid", **common},
        {"op": "read_only", **read_only})) + "\n")
    code, rows, _ = _analyze(capsys, path)
    assert code == 0
    by_op = {r["op"]: r for r in rows}
    assert by_op["in_place"]["verdict"] == "cache_resident"
    assert by_op["in_place"]["footprint_bytes"] == touched  # passed through to --json
    assert "its working set of 39.76 MB fits in the 41.94 MB l2" in by_op["in_place"]["reasons"][0]
    # bytes is the working set, 59.64 MB, with no split: each side may be within the L2
    assert by_op["unsaid"]["verdict"] == "cache_resident"
    assert ("its working set of 59.64 MB is larger than the 41.94 MB l2, but that cache can "
            "hold up to 41.94 MB of what it reads before it runs and as much of what it writes "
            "after, which can be all of it") in by_op["unsaid"]["reasons"][0]
    assert by_op["read_only"]["verdict"] == "impossible"
    assert "still leaves hbm at least 554.45 MB in the time, 1584.1 GB/s" in (
        by_op["read_only"]["reasons"][0])
    # CSV reads it the same way
    csv = tmp_path / "r.csv"
    csv.write_text("op,flops,bytes,footprint_bytes,roof,time_s,device,timing\n"
                   f"in_place,4969920,{moved},{touched},cuda_core.fp32,{time_s},"
                   "NVIDIA A100-SXM4-40GB,kernel\n")
    code, rows, _ = _analyze(capsys, csv)
    assert code == 0 and rows[0]["verdict"] == "cache_resident"


def test_a_working_set_larger_than_the_bytes_is_refused(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"op": "x", "flops": 1, "bytes": 100, "footprint_bytes": 200,
                                "roof": "cuda_core.fp32", "time_s": 1e-3}) + "\n")
    code, _, err = _analyze(capsys, path, "--strict")
    assert code == 2
    assert err.strip().splitlines() == [
        f"roofwise: error: {path}:1: footprint_bytes: 200 distinct bytes, expected at most "
        "bytes = 100 (a byte touched is read or written)"]


def test_in_place_adds_on_the_a100_trace_fit_its_l2(capsys, tmp_path):
    trace = TRACES / "hta_a100pg509_rank3_tf32.json.gz"
    code, rows, err = _analyze(capsys, trace, "--limit", "0")
    assert code == 0, err
    groups = {(r["op"], r["shapes"]): r for r in rows[:-1]}
    add_ = groups[("aten::add_", "[19410, 256] fp32, [19410, 256] fp32")]
    assert add_["verdicts"] == {"cache_resident": 6}  # were 6 impossible
    assert 2 * 19410 * 256 * 4 < A100_40GB_L2 < 3 * 19410 * 256 * 4
    tanh = groups[("aten::tanh", "[1024, 9375] fp32")]
    # 76.8 MB touched, above the L2, but 38.4 MB in and 38.4 MB out each fit it: the 5 calls
    # above HBM's rate are cache-resident in part (they were impossible), the rest below it
    assert 1024 * 9375 * 4 < A100_40GB_L2 < 2 * 1024 * 9375 * 4
    assert tanh["verdicts"] == {"at_ceiling": 7, "cache_resident": 5}
    # the records it writes carry the working set, and read back judge the same
    records = tmp_path / "ops.jsonl"
    assert main(["analyze", str(trace), "--records-out", str(records)]) == 0
    capsys.readouterr()
    written = [json.loads(line) for line in records.read_text().splitlines()]
    in_place = [r for r in written if r["op"] == "aten::add_"
                and r["workload"]["shapes"][0] == [19410, 256]]
    assert len(in_place) == 6
    assert {r["footprint_bytes"] for r in in_place} == {2 * 19410 * 256 * 4}
    code, back, _ = _analyze(capsys, records)
    assert code == 0
    assert [r["verdict"] for r in back if r["op"] == "aten::add_"
            and r["footprint_bytes"] == 2 * 19410 * 256 * 4] == ["cache_resident"] * 6
