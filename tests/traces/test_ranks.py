"""Every rank of a distributed job (issue 21, item 6): `roofwise analyze DIR` or several traces.

The figures are recounted here from the raw events, independently of roofwise: time on the
clock by a per-microsecond grid (the synthetic set) or by merging sorted intervals in plain
Python (the real HTA pair), kernels linked to their op by brute force.
"""

from __future__ import annotations

import gzip
import json
import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from roofwise.cli import main
from roofwise.traces.timeline import union_s

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
RANK0 = TRACES / "hta_sampled_rank0.json.gz"
RANK1 = TRACES / "hta_sampled_rank1.json.gz"
WORLD = 8
US = 1e-6


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def json_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


# --- a synthetic 8-rank step ----------------------------------------------------------------

def _ev(cat, name, ts, dur, tid, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 0 if cat == "kernel" else 1,
            "tid": tid, "ts": ts, "dur": dur, "args": args}


def rank_events(r: int) -> list:
    """Rank r: an mm kernel [0, 100 + 10r) on stream 7; an all-reduce [50, 250 - 10r) on
    stream 20 (the faster ranks wait longer for the slowest); an add [300, 310). Epoch-sized
    timestamps, as real traces carry."""
    t0 = 1_683_564_901_554_112
    mm = 100 + 10 * r
    ar = 200 - 10 * r
    return [
        _ev("cpu_op", "aten::mm", t0 - 40, 20, 1, **{
            "External id": 1, "Input Dims": [[512, 1024], [1024, 1024]],
            "Input type": ["float", "float"]}),
        _ev("cuda_runtime", "cudaLaunchKernel", t0 - 35, 2, 1, correlation=10),
        _ev("kernel", "ampere_sgemm_128x64_nn", t0, mm, 7, device=0, correlation=10),
        _ev("cpu_op", "c10d::allreduce_", t0 - 15, 10, 1, **{
            "External id": 2, "Input Dims": [[512, 1024]], "Input type": ["float"]}),
        _ev("cuda_runtime", "cudaLaunchKernel", t0 - 12, 2, 1, correlation=11),
        _ev("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, "
                      "ncclWork*)", t0 + 50, ar, 20, device=0, correlation=11, **{
                          "Collective name": "allreduce", "In msg nelems": 512 * 1024,
                          "Out msg nelems": 512 * 1024, "Group size": WORLD,
                          "dtype": "Float"}),
        _ev("cpu_op", "aten::add", t0 - 5, 4, 1, **{
            "External id": 3, "Input Dims": [[512, 1024], [512, 1024]],
            "Input type": ["float", "float"]}),
        _ev("cuda_runtime", "cudaLaunchKernel", t0 - 4, 2, 1, correlation=12),
        _ev("kernel", "vectorized_elementwise_kernel", t0 + 300, 10, 7, device=0,
            correlation=12),
    ]


def write_rank(folder: Path, r: int, name: str, info: bool = True) -> Path:
    doc = {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
           "traceEvents": rank_events(r)}
    if info:
        doc["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": WORLD}
    path = folder / name
    path.write_text(json.dumps(doc))
    return path


def grid(events: list) -> dict[str, float]:
    """Compute, communication, hidden and idle microseconds, counted one microsecond at a
    time (every timestamp here is a whole microsecond)."""
    kernels = [e for e in events if e["cat"] == "kernel"]
    start = min(e["ts"] for e in kernels)
    end = max(e["ts"] + e["dur"] for e in kernels)
    compute, comm = set(), set()
    for e in kernels:
        cells = set(range(e["ts"] - start, e["ts"] + e["dur"] - start))
        (comm if e["name"].startswith("nccl") else compute).update(cells)
    return {"compute_s": len(compute) * US, "communication_s": len(comm) * US,
            "hidden_communication_s": len(compute & comm) * US,
            "idle_s": (end - start - len(compute | comm)) * US, "span_s": (end - start) * US}


@pytest.fixture
def eight(tmp_path: Path) -> Path:
    folder = tmp_path / "job"
    folder.mkdir()
    for r in (5, 0, 7, 2, 1, 6, 3, 4):  # file names say nothing of the order
        write_rank(folder, r, f"worker-{(r * 3) % WORLD}.pt.trace.json")
    (folder / "notes.txt").write_text("not a trace\n")  # a folder holds other files too
    return folder


def test_eight_ranks_compute_communication_hidden_and_idle(capsys, eight):
    code, out, _ = run(capsys, "analyze", eight, "--json")
    assert code == 0
    rows = json_lines(out)
    ranks = [r for r in rows if r["op"] == "rank"]
    assert [r["rank"] for r in ranks] == list(range(WORLD))
    assert {r["rank_from"] for r in ranks} == {"distributedInfo"}
    for row in ranks:
        expected = grid(rank_events(row["rank"]))
        for key, value in expected.items():
            assert row[key] == pytest.approx(value, abs=1e-12), (row["rank"], key)
        r = row["rank"]  # and by hand: hidden 50 + 10r of 200 - 10r; idle 50 + 10r
        assert row["hidden_communication_s"] == pytest.approx((50 + 10 * r) * US)
        assert row["hidden_share_of_communication"] == pytest.approx((50 + 10 * r) /
                                                                     (200 - 10 * r))
        assert row["idle_s"] == pytest.approx((50 + 10 * r) * US)
        assert row["summary"]["communication_time_s"] == pytest.approx((200 - 10 * r) * US)
    summary = rows[-1]
    assert summary["op"] == "ranks" and summary["ranks"] == list(range(WORLD))
    slowest = summary["slowest"]
    assert slowest["rank"] == WORLD - 1
    compute = [(110 + 10 * r) * US for r in range(WORLD)]
    assert slowest["compute_s"] == pytest.approx(max(compute))
    assert slowest["median_compute_s"] == pytest.approx(statistics.median(compute))
    assert slowest["culprits"][0]["name"] == "aten::mm"
    assert slowest["culprits"][0]["excess_s"] == pytest.approx((170 - 135) * US)
    mm = next(s for s in rows if s["op"] == "spread" and s["name"] == "aten::mm")
    assert (mm["min_s"], mm["median_s"], mm["max_s"]) == pytest.approx((100 * US, 135 * US,
                                                                         170 * US))
    assert (mm["min_rank"], mm["max_rank"], mm["ranks"]) == (0, WORLD - 1, WORLD)
    ar = next(s for s in rows if s["op"] == "spread" and s["name"] == "c10d::allreduce_")
    assert ar["communication"] and ar["max_rank"] == 0  # the fastest waits the longest


def test_the_table_names_the_slowest_rank(capsys, eight):
    code, out, _ = run(capsys, "analyze", eight)
    assert code == 0
    assert "8 rank(s)" in out and "slowest rank 7" in out and "aten::mm" in out
    assert "the others wait for it" in " ".join(out.split())


def test_ranks_from_file_names_and_several_files(capsys, tmp_path):
    paths = [write_rank(tmp_path, r, f"trace_rank{r}.json", info=False) for r in (1, 0)]
    code, out, _ = run(capsys, "analyze", *paths, "--json")
    assert code == 0
    ranks = [r for r in json_lines(out) if r["op"] == "rank"]
    assert [(r["rank"], r["rank_from"]) for r in ranks] == [(0, "file name"),
                                                            (1, "file name")]


@pytest.mark.parametrize("case", ["duplicate", "empty folder", "not a trace", "records out"])
def test_bad_rank_sets_are_one_line_and_exit_2(capsys, tmp_path, case):
    if case == "duplicate":
        args = [write_rank(tmp_path, 3, "a.json"), write_rank(tmp_path, 3, "b.json")]
        said = "rank 3"
    elif case == "empty folder":
        (tmp_path / "x.txt").write_text("x")
        args, said = [tmp_path], "no record files and no profiler trace"
    elif case == "not a trace":
        (tmp_path / "x.txt").write_text("x")
        args, said = [write_rank(tmp_path, 0, "a.json"), tmp_path / "x.txt"], "not a profiler"
    else:
        args = [write_rank(tmp_path, 0, "a.json"), write_rank(tmp_path, 1, "b.json"),
                "--records-out", tmp_path / "r.jsonl"]
        said = "--records-out"
    code, _, err = run(capsys, "analyze", *args)
    assert code == 2 and len(err.strip().splitlines()) == 1 and said in err


# --- the real pair: HTA's sampled ranks 0 and 1 of one 128-rank job -------------------------

def raw(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as handle:
        return json.load(handle)["traceEvents"]


def merged_length(intervals: list[tuple[float, float]]) -> float:
    total, reach, begin = 0.0, None, None
    for s, e in sorted(intervals):
        if reach is None or s > reach:
            if reach is not None:
                total += reach - begin
            begin, reach = s, e
        else:
            reach = max(reach, e)
    return total + (reach - begin if reach is not None else 0.0)


def test_real_ranks_match_the_raw_events(capsys):
    code, out, _ = run(capsys, "analyze", RANK1, RANK0, "--json")
    assert code == 0
    rows = json_lines(out)
    ranks = {r["rank"]: r for r in rows if r["op"] == "rank"}
    assert sorted(ranks) == [0, 1] and ranks[0]["trace"].endswith("rank0.json.gz")
    for number, path in ((0, RANK0), (1, RANK1)):
        events = raw(path)
        base = min(e["ts"] for e in events if e.get("cat") in ("kernel", "gpu_memcpy",
                                                                "gpu_memset"))
        kernels = [e for e in events if e.get("cat") == "kernel"]
        comm = [((e["ts"] - base) * US, (e["ts"] + e["dur"] - base) * US) for e in kernels
                if "nccl" in e["name"].lower()]
        compute = [((e["ts"] - base) * US, (e["ts"] + e["dur"] - base) * US) for e in kernels
                   if "nccl" not in e["name"].lower()]
        device = [((e["ts"] - base) * US, (e["ts"] + e["dur"] - base) * US) for e in events
                  if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
        row = ranks[number]
        assert row["compute_s"] == pytest.approx(merged_length(compute), rel=1e-9)
        assert row["communication_s"] == pytest.approx(merged_length(comm), rel=1e-9)
        hidden = merged_length(compute) + merged_length(comm) - merged_length(compute + comm)
        assert row["hidden_communication_s"] == pytest.approx(hidden, rel=1e-9, abs=1e-12)
        span = max(e for _, e in device) - min(s for s, _ in device)
        assert row["idle_s"] == pytest.approx(span - merged_length(device), rel=1e-9)
        assert 0 < row["hidden_share_of_communication"] < 1
    slowest = rows[-1]["slowest"]
    assert slowest["rank"] == max(ranks, key=lambda k: ranks[k]["compute_s"])
    # one op group's spread, recounted by brute-force linking on each rank
    mm = next(s for s in rows if s["op"] == "spread" and s["name"] == "aten::mm"
              and s["shapes"] == "[20, 327680] fp32, [327680, 606] fp32")
    for number, path in ((0, RANK0), (1, RANK1)):
        assert mm["time_s_by_rank"][str(number)] == pytest.approx(
            _group_time(raw(path), "aten::mm", [[20, 327680], [327680, 606]]) * US)


def _group_time(events: list[dict], name: str, dims: list) -> float:
    launch = {e["args"]["correlation"]: e for e in events
              if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and "correlation" in e.get("args", {})}
    ops_on = defaultdict(list)
    for e in events:
        if e.get("cat") == "cpu_op":
            ops_on[(e["pid"], e["tid"])].append(e)
    total = 0.0
    for k in events:
        call = launch.get(k.get("args", {}).get("correlation")) if k.get("cat") == "kernel" \
            else None
        if call is None:
            continue
        enclosing = [o for o in ops_on[(call["pid"], call["tid"])]
                     if o["ts"] <= call["ts"] <= o["ts"] + o["dur"]]
        if enclosing:
            op = min(enclosing, key=lambda o: o["dur"])
            if op["name"] == name and op["args"].get("Input Dims") == dims:
                total += k["dur"]
    return total


def test_union_of_intervals_by_hand():
    start = np.array([5.0, 0.0, 1.0, 10.0, 10.0])
    end = np.array([6.0, 2.0, 3.0, 12.0, 11.0])
    assert union_s(start, end) == pytest.approx(1 + 3 + 2)
    assert union_s(np.zeros(0), np.zeros(0)) == 0.0


def test_even_ranks_name_no_slowest(capsys, tmp_path):
    paths = []
    for r in range(2):
        events = rank_events(0)  # the same step on both
        doc = {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
               "traceEvents": events, "distributedInfo": {"rank": r}}
        paths.append(tmp_path / f"r{r}.json")
        paths[-1].write_text(json.dumps(doc))
    code, out, _ = run(capsys, "analyze", *paths)
    assert code == 0 and "no rank is slower" in " ".join(out.split())


def test_a_rank_that_waits_the_most_is_not_called_the_one_the_others_wait_for(capsys, tmp_path):
    # (param's 8-rank DLRM trace: the rank with the most compute also had the most exposed
    # communication, and was said to hold the others up.) Rank r: mm [0, 100 + 10r) and an
    # add [300, 310), its all-reduce [50, 250 + 30r): exposed, the all-reduce outside both:
    # r0 200 - 50 = 150, r1 230 - 60 = 170, r2 260 - 70 - 10 = 180, r3 290 - 80 - 10 = 200 us.
    # Rank 3 has the most compute (140 us) and waits 200 us, above the others' median 170;
    # rank 0 waits least, 150 us.
    paths = []
    for r in range(4):
        events = rank_events(r)
        nccl = next(e for e in events if e["name"].startswith("nccl"))
        nccl["dur"] = 200 + 30 * r
        doc = {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
               "traceEvents": events, "distributedInfo": {"rank": r, "world_size": 4}}
        paths.append(tmp_path / f"r{r}.json")
        paths[-1].write_text(json.dumps(doc))
    code, out, _ = run(capsys, "analyze", *paths)
    text = " ".join(out.split())
    assert code == 0 and "slowest rank 3" in text
    assert "the others wait for it" not in text
    assert ("but its exposed communication 200.000 us is above the others' median "
            "170.000 us: it waits more than they do") in text
    assert "the least exposed communication is rank 0's, 150.000 us" in text


def test_traces_of_different_cards_are_said_to_be_maybe_not_one_job(capsys, tmp_path):
    paths = []
    for r, card in enumerate(("NVIDIA H100 80GB HBM3", "AMD Instinct MI300X")):
        doc = {"deviceProperties": [{"id": 0, "name": card}], "traceEvents": rank_events(0)}
        paths.append(tmp_path / f"t{r}.json")
        paths[-1].write_text(json.dumps(doc))
    code, out, _ = run(capsys, "analyze", *paths)
    assert code == 0
    assert ("the traces name different devices (rank 0: NVIDIA H100 80GB HBM3; rank 1: AMD "
            "Instinct MI300X)") in " ".join(out.split())
    code, out, _ = run(capsys, "analyze", *paths, "--json")
    assert json_lines(out)[-1]["mixed_devices"].startswith("the traces name different")


DLRM = TRACES / "param_dlrm_8ranks"


def test_a_real_eight_rank_job_reads_its_waiting_the_right_way_round(capsys):
    """param's DLRM step on 8 V100s: every rank's exposed communication recounted from the
    raw intervals; the rank with the most compute also waits the most, so it is not said to
    hold the others up, and the rank that waits least is named (the reading was backwards)."""
    code, out, _ = run(capsys, "analyze", DLRM, "--json")
    assert code == 0
    rows = json_lines(out)
    ranks = {r["rank"]: r for r in rows if r["op"] == "rank"}
    assert sorted(ranks) == list(range(8))
    exposed = {}
    for path in sorted(DLRM.iterdir()):
        events = raw(path)
        kernels = [e for e in events if e.get("cat") == "kernel"]
        comm = [(e["ts"], e["ts"] + e["dur"]) for e in kernels if "nccl" in e["name"].lower()]
        compute = [(e["ts"], e["ts"] + e["dur"]) for e in kernels
                   if "nccl" not in e["name"].lower()]
        rank = json.loads(gzip.decompress(path.read_bytes()))["distributedInfo"]["rank"]
        hidden = merged_length(compute) + merged_length(comm) - merged_length(compute + comm)
        exposed[rank] = (merged_length(comm) - hidden) * US
        assert ranks[rank]["exposed_communication_s"] == pytest.approx(exposed[rank],
                                                                       rel=1e-9, abs=1e-12)
    slowest = rows[-1]["slowest"]["rank"]
    assert slowest == max(ranks, key=lambda k: (ranks[k]["compute_s"], -k))
    others = statistics.median(v for k, v in exposed.items() if k != slowest)
    assert exposed[slowest] > others  # it waits more than the median of the others
    least = min(exposed, key=lambda k: (exposed[k], k))
    code, out, _ = run(capsys, "analyze", DLRM)
    text = " ".join(out.split())
    assert f"slowest rank {slowest}:" in text and "the others wait for it" not in text
    assert "it waits more than they do" in text
    assert f"the least exposed communication is rank {least}'s" in text
