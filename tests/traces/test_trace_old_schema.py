"""Traces written by PyTorch 1.8-1.9 (issue 21): categories `Operator`, `Runtime`, `Kernel`,
`Memcpy`, `Memset`, launches and device events naming their op's id `external id` (lower case),
thread ids as strings. A real one (kineto's ResNet-50 sample, one profiler step, see
tests/fixtures/traces/README.md) must read as a current trace does: every number below is
recounted here from the raw events, by the 1.x convention (device event -> launch by
`correlation` -> op by `external id`), not by roofwise's code."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from roofwise.cli import main

FIXTURE = (Path(__file__).parent.parent / "fixtures" / "traces"
           / "kineto_resnet50_v100_torch19_step6.json.gz")


def raw_events() -> list[dict]:
    return json.loads(gzip.decompress(FIXTURE.read_bytes()))["traceEvents"]


def run_json(capsys, path: Path) -> tuple[int, list[dict], str]:
    code = main(["analyze", str(path), "--json"])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


def recount() -> dict:
    """The fixture's figures, from the raw events by the 1.x convention."""
    events = raw_events()
    ops = {e["args"]["External id"]: e for e in events if e.get("cat") == "Operator"}
    launches = {e["args"]["correlation"]: e for e in events if e.get("cat") == "Runtime"}
    per_op: dict[str, list[float]] = defaultdict(list)  # op name -> per op: kernel time
    time_of_op: dict[int, float] = defaultdict(float)
    kernels = [e for e in events if e.get("cat") == "Kernel"]
    for k in kernels:
        launch = launches[k["args"]["correlation"]]
        op = ops[launch["args"]["external id"]]
        # the op the launch names runs on the launch's thread and encloses it in time
        assert (op["pid"], op["tid"]) == (launch["pid"], launch["tid"])
        assert op["ts"] <= launch["ts"] <= op["ts"] + op["dur"]
        time_of_op[op["args"]["External id"]] += k["dur"]
    for ext, t in time_of_op.items():
        per_op[ops[ext]["name"]].append(t)
    return {"kernels": len(kernels), "kernel_us": sum(k["dur"] for k in kernels),
            "memcpy_us": sum(e["dur"] for e in events if e.get("cat") == "Memcpy"),
            "memset_us": sum(e["dur"] for e in events if e.get("cat") == "Memset"),
            "ops": len(time_of_op), "per_op": per_op}


def test_a_pytorch_1_9_trace_reads_and_links_as_the_raw_events_say(capsys):
    expected = recount()
    assert expected["kernels"] == 1462 and expected["ops"] == 1266  # the fixture, as trimmed
    code, rows, _ = run_json(capsys, FIXTURE)
    assert code == 0
    s = rows[-1]
    assert s["kernels"] == expected["kernels"]
    assert s["ops"] == expected["ops"]
    assert s["kernel_time_s"] == pytest.approx(expected["kernel_us"] * 1e-6, rel=1e-12)
    assert s["memcpy_time_s"] == pytest.approx(expected["memcpy_us"] * 1e-6, rel=1e-12)
    assert s["memset_time_s"] == pytest.approx(expected["memset_us"] * 1e-6, rel=1e-12)
    assert s["unattributed_time_s"] == 0.0  # every kernel's launch names an op that encloses it
    assert s["devices"] == ["Tesla V100-DGXS-32GB"]
    assert s["skipped_events"] == 0
    got: dict[str, list[float]] = defaultdict(list)
    for g in rows[:-1]:
        got[g["op"]].append(g["time_s"])
        got[g["op"] + " calls"].append(g["count"])
    for name, times in expected["per_op"].items():
        assert sum(got[name + " calls"]) == len(times), name
        assert sum(got[name]) == pytest.approx(sum(times) * 1e-6, rel=1e-9), name
    assert {k for k in got if not k.endswith(" calls")} == set(expected["per_op"])
    # and the ops that carry shapes are priced: the convolutions and the linear layer's addmm
    addmm = [g for g in rows if g.get("op") == "aten::addmm"]
    assert addmm and all(g["priced_by"] for g in addmm)


def test_a_pytorch_1_9_trace_without_kernels_is_one_line(capsys, tmp_path):
    doc = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if e.get("cat") not in ("Kernel", "Memcpy", "Memset")]
    path = tmp_path / "host_only.json"
    path.write_text(json.dumps(doc))
    code = main(["analyze", str(path), "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and "no kernel events" in err
