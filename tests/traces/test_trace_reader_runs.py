"""The reader's run-by-run decoding (issue 21, scale): whatever the layout, wherever the read
boundaries fall, and whatever odd event sits among thousands of good ones, what is kept is what
a plain `json.load` of the file says, event for event."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from roofwise.traces import reader
from roofwise.traces.build import build_ops
from roofwise.traces.link import launching_ops
from roofwise.traces.reader import NONE_ID, read_trace

FIXTURES = Path(__file__).parent.parent / "fixtures" / "traces"


def events(n: int, tid="1") -> list[dict]:
    """n ops, each with one launch, one kernel and a flow arrow (2.x convention)."""
    out = []
    for i in range(n):
        ts = 100.0 * i
        out += [
            {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 7}", "pid": 1, "tid": tid,
             "ts": ts, "dur": 50, "args": {"External id": i, "Input Dims": [[i % 5 + 1, 3]],
                                           "Input type": ["float"]}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
             "tid": tid, "ts": ts + 10, "dur": 5,
             "args": {"External id": i, "correlation": 10_000 + i}},
            {"ph": "s", "cat": "ac2g", "id": 10_000 + i, "pid": 1, "tid": tid, "ts": ts + 10},
            {"ph": "X", "cat": "kernel", "name": f"k{i % 3}", "pid": 0, "tid": 7,
             "ts": ts + 60, "dur": 1 + i % 4, "args": {"correlation": 10_000 + i,
                                                       "device": 0}},
            {"ph": "f", "cat": "ac2g", "id": 10_000 + i, "pid": 0, "tid": 7, "ts": ts + 60}]
    return out


def kept(path: Path) -> dict:
    """What the reader kept, as plain lists, for comparing two reads."""
    read = read_trace(path)
    return {"ops": [tuple(o) for o in read.ops], "gpu": [tuple(g) for g in read.gpu],
            "calls": len(read.call_columns.ts_us), "skipped": read.skipped,
            "op_of": launching_ops(read).tolist(), "devices": read.device_names}


def recount(doc: dict) -> dict:
    """The same from the parsed document, by hand."""
    ev = doc["traceEvents"]
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    gpu = [e for e in ev if e.get("cat") == "kernel"]
    ext_index = {o["args"]["External id"]: i for i, o in reversed(list(enumerate(ops)))}
    calls = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "cuda_runtime"}
    return {"ops": [(o["name"], float(o["ts"]), float(o["ts"] + o["dur"])) for o in ops],
            "gpu": [(g["name"], float(g["dur"])) for g in gpu],
            "op_of": [ext_index[calls[g["args"]["correlation"]]["args"]["External id"]]
                      for g in gpu]}


def write(tmp_path: Path, doc, name="t.json", indent=None, gz=False) -> Path:
    text = json.dumps(doc, indent=indent).encode()
    path = tmp_path / name
    path.write_bytes(gzip.compress(text) if gz else text)
    return path


@pytest.mark.parametrize("indent", [None, 2])
@pytest.mark.parametrize("read_bytes", [64, 4096, 1 << 20])
def test_runs_read_what_json_load_reads_wherever_the_reads_fall(tmp_path, monkeypatch,
                                                                  indent, read_bytes):
    monkeypatch.setattr(reader, "READ_BYTES", read_bytes)
    monkeypatch.setattr(reader, "RUN_WINDOW", 64)
    doc = {"deviceProperties": [{"id": 0, "name": "NVIDIA H200"}], "traceEvents": events(300)}
    got = kept(write(tmp_path, doc, indent=indent))
    want = recount(doc)
    assert [(o[5], o[3], o[4]) for o in got["ops"]] == want["ops"]
    assert [(g[1], g[5]) for g in got["gpu"]] == want["gpu"]
    assert got["op_of"] == want["op_of"]
    assert got["calls"] == 300 and got["skipped"] == {}
    assert got["devices"] == {0: "NVIDIA H200"}


@pytest.mark.parametrize("read_bytes", [1 << 20, 300])
def test_odd_events_among_many_are_judged_alone_and_the_rest_kept(tmp_path, monkeypatch,
                                                                   read_bytes):
    monkeypatch.setattr(reader, "READ_BYTES", read_bytes)
    monkeypatch.setattr(reader, "RUN_WINDOW", 200)
    good = events(2000)
    odd = [*good[:5000], {"ph": "X", "cat": "kernel", "name": "bad", "pid": 0, "tid": 7,
                          "ts": 1, "dur": -3}, 7, "text", [1, 2],
           {"ph": "X", "cat": "kernel", "name": "}, {\"ph\": \"X\"}, {", "pid": 0, "tid": 7,
            "ts": 2, "dur": 1, "args": {"correlation": 10_000, "device": 0}},
           *good[5000:]]
    got = kept(write(tmp_path, {"traceEvents": odd}))
    base = kept(write(tmp_path, {"traceEvents": good}, name="good.json"))
    assert got["ops"] == base["ops"]
    assert got["skipped"] == {"an event whose dur is not a finite number >= 0": 1,
                              "an event that is not a JSON object": 3}
    # the kernel whose name holds `}, {` is kept whole, in file order, linked by correlation
    names = [g[1] for g in got["gpu"]]
    assert names.count('}, {"ph": "X"}, {') == 1
    assert len(names) == len(base["gpu"]) + 1
    strange = names.index('}, {"ph": "X"}, {')
    assert got["op_of"][strange] == 0
    assert got["op_of"][:strange] + got["op_of"][strange + 1:] == base["op_of"]


def test_string_and_mixed_ids_link_as_python_compares_them(tmp_path):
    ev = events(4)
    for e in ev:  # string ids throughout for op 1; a float correlation for op 2
        a = e.get("args", {})
        if a.get("External id") == 1:
            a["External id"] = "1"
        if a.get("correlation") == 10_002:
            a["correlation"] = 10_002.0
    path = write(tmp_path, {"traceEvents": ev})
    read = read_trace(path)
    assert read.op_columns.external_id.dtype == object
    assert launching_ops(read).tolist() == [0, 1, 2, 3]
    assert [g.correlation for g in read.gpu] == [10_000, 10_001, 10_002.0, 10_003]


@pytest.mark.parametrize("odd_at", [0, 150, 299])
def test_columns_grown_over_many_runs_keep_each_id_as_the_file_gives_it(tmp_path, monkeypatch,
                                                                        odd_at):
    # many small runs into columns that start tiny and grow; one op's id is a string, in the
    # first run, a middle one or the last, so the id column turns from ints to objects there
    monkeypatch.setattr(reader, "READ_BYTES", 512)
    monkeypatch.setattr(reader, "RUN_WINDOW", 16)
    monkeypatch.setattr(reader._Growing, "FIRST", 3)
    ev = events(300)
    for e in ev:
        a = e.get("args", {})
        if a.get("External id") == odd_at:
            a["External id"] = str(odd_at)
    doc = {"traceEvents": ev}
    read = read_trace(write(tmp_path, doc))
    ids = [str(i) if i == odd_at else i for i in range(300)]
    assert [o.external_id for o in read.ops] == ids
    assert [g.correlation for g in read.gpu] == [10_000 + i for i in range(300)]
    assert [o.ts_us for o in read.ops] == [100.0 * i for i in range(300)]
    assert read.op_columns.external_id.dtype == object
    assert read.gpu_columns.correlation.dtype == np.int64
    assert launching_ops(read).tolist() == recount(doc)["op_of"] == list(range(300))


def test_ids_a_trace_does_not_give_stay_none(tmp_path):
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0,
           "dur": 10},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
           "ts": 2, "dur": 1, "args": {"correlation": 5}},
          {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 3}]
    read = read_trace(write(tmp_path, {"traceEvents": ev}))
    assert read.ops[0].external_id is None and read.gpu[0].correlation is None
    assert read.gpu[0].device is None
    assert read.op_columns.external_id[0] == NONE_ID
    assert launching_ops(read).tolist() == [-1]  # no correlation, no flow: launched by none


def test_device_properties_after_the_events_and_keys_around_them(tmp_path):
    doc = {"schemaVersion": 1, "traceEvents": events(50), "traceName": "x",
           "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}], "pad": [{"a": [1]}] * 50,
           "big": 2 ** 70}
    assert kept(write(tmp_path, doc))["devices"] == {0: "NVIDIA H200"}
    bare = kept(write(tmp_path, events(50), name="bare.json"))
    assert bare["op_of"] == kept(write(tmp_path, doc, name="d.json"))["op_of"]


@pytest.mark.parametrize("cut", [1, 1000, 7777, -3])
def test_a_truncated_trace_is_refused_not_half_read(tmp_path, cut):
    text = json.dumps({"traceEvents": events(100)}).encode()
    path = tmp_path / "t.json"
    path.write_bytes(text[:cut])
    with pytest.raises(reader.InputError, match=r"unreadable trace|not a profiler trace"):
        read_trace(path)


def test_every_real_fixture_keeps_what_json_load_finds(tmp_path):
    """The HTA fixtures (real Kineto layout): counts and summed durations per kind."""
    for path in sorted(FIXTURES.glob("hta_*.json.gz")):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        ev = doc["traceEvents"]
        read = read_trace(path)
        for cat, kind in (("kernel", 0), ("gpu_memcpy", 1), ("gpu_memset", 2)):
            mine = [e for e in ev if e.get("cat") == cat and e.get("ph") == "X"]
            column = read.gpu_columns.dur_us[read.gpu_columns.kind == kind]
            assert len(column) == len(mine), (path.name, cat)
            assert float(np.sum(column)) == pytest.approx(sum(e["dur"] for e in mine),
                                                          rel=1e-12)
        assert len(read.ops) == sum(1 for e in ev if e.get("cat") == "cpu_op"
                                    and e.get("ph") == "X")
        built = build_ops(read, replay=False)
        assert built.summary.kernels == sum(1 for e in ev if e.get("cat") == "kernel")


def test_ops_are_columns_and_one_price_per_distinct_signature(tmp_path):
    # 2,000 ops of 7 names and 5 shapes, i % 7 and i % 5: 35 distinct signatures, each priced
    # once; each op read back from the columns is the op the file recorded
    built = build_ops(read_trace(write(tmp_path, {"traceEvents": events(2000)})), replay=False)
    assert len(built.ops) == 2000 and len(built.prices) == 35 and not built.own
    assert len({(o.op, o.shapes) for o in built.ops}) == 35
    for i in (0, 1, 34, 35, 1999):
        op = built.ops[i]
        assert (op.op, op.shapes[0], op.kernels) == (f"aten::op{i % 7}", (i % 5 + 1, 3), 1)
        assert op.time_s == pytest.approx((1 + i % 4) * 1e-6, rel=1e-12)
        assert op.price is built.prices[int(built.table.signature[i])]
    assert built.ops[-1] == built.ops[1999] and len(built.ops[10:13]) == 3
    assert built.table.priced.tolist() == [o.price.priced for o in built.ops]
    with pytest.raises(IndexError):
        built.ops[2000]
