"""Traces with fields of the wrong type, bounds crossed, numbers that are not durations and
names that drive a terminal (issue 20): each ends in exit 0 with the bad events skipped and
counted, or in one line and exit 2; never a traceback, never a made-up number."""

from __future__ import annotations

import copy
import gzip
import json
import time
from pathlib import Path

import pytest
from isal import isal_zlib

from roofwise.cli import main
from roofwise.traces import reader

MM_DIMS = [[64, 32], [32, 16]]


def base_events() -> list:
    """mm (8 us kernel, priced) and add (2 us kernel), each launched from its own op."""
    return [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 50,
         "args": {"External id": 1, "Input Dims": MM_DIMS, "Input type": ["float", "float"]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 10, "dur": 2, "args": {"correlation": 500, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 100, "dur": 8,
         "args": {"device": 0, "correlation": 500}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 60,
         "dur": 30, "args": {"External id": 2, "Input Dims": [[64, 16], [64, 16]],
                             "Input type": ["float", "float"]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 70, "dur": 2, "args": {"correlation": 501, "External id": 2}},
        {"ph": "X", "cat": "kernel", "name": "add_kernel", "pid": 0, "tid": 7, "ts": 120,
         "dur": 2, "args": {"device": 0, "correlation": 501}},
    ]


def write(tmp_path: Path, events, name: str = "t.json", devices=None, extra=None) -> Path:
    doc = {"deviceProperties": devices if devices is not None else
           [{"id": 0, "name": "NVIDIA H200"}], "traceEvents": events, **(extra or {})}
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    if code == 2:
        assert len(err.splitlines()) == 1 and len(err) < 300, err
        assert err.startswith("roofwise: error: ")
    return code, out, err


def summary(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def analyze_json(capsys, path: Path, *more):
    return run(capsys, "analyze", path, "--json", *more)


# one field of one event set to what the format never gives it: (event index, where, value)
WRONG_TYPES = [
    (5, "args", [1]),  # the add kernel
    (3, "args.Input Dims", "[[64, 16]]"),
    (3, "args.Input type", "float"),
    (3, "args.Concrete Inputs", {"0": "1"}),
    (3, "cat", ["cpu_op"]),
    (3, "pid", [1]),
    (3, "tid", {"t": 1}),
    (4, "args.correlation", [501]),
    (3, "args.External id", [2]),
    (5, "args.device", {"id": 0}),
    (5, "name", ["add_kernel"]),
]


def mutate(events: list, index: int, where: str, value) -> list:
    events = copy.deepcopy(events)
    target = events[index]
    *path, last = where.split(".")
    for key in path:
        target = target[key]
    target[last] = value
    return events


@pytest.mark.parametrize(("index", "where", "value"), WRONG_TYPES)
def test_a_field_of_the_wrong_type_skips_its_event_and_says_so(capsys, tmp_path, index, where,
                                                                 value):
    code, out, err = analyze_json(capsys, write(tmp_path, mutate(base_events(), index, where,
                                                                 value)))
    assert code == 0
    s = summary(out)
    assert s["skipped_events"] == 1
    assert "1 malformed event(s) skipped" in err and len(err.splitlines()) == 1
    assert s["kernel_time_s"] == pytest.approx(10e-6 if index != 5 else 8e-6)
    mm = [json.loads(line) for line in out.splitlines()[:-1]]
    assert [g["time_s"] for g in mm if g["op"] == "aten::mm"] == [pytest.approx(8e-6)]


def test_events_that_are_not_objects_are_skipped_and_counted(capsys, tmp_path):
    code, out, err = analyze_json(capsys, write(tmp_path, [*base_events(), 5, "x", [1], None]))
    assert code == 0
    assert summary(out)["skipped_events"] == 4
    assert summary(out)["kernel_time_s"] == pytest.approx(10e-6)
    assert "4 x an event that is not a JSON object" in err


def test_flow_and_device_ids_of_the_wrong_type(capsys, tmp_path):
    events = [*base_events(), {"ph": "s", "cat": "ac2g", "id": [1], "pid": 1, "tid": 1,
                               "ts": 10}]
    code, out, _ = analyze_json(capsys, write(tmp_path, events,
                                              devices=[{"id": [0], "name": "NVIDIA H200"}]))
    assert code == 0
    s = summary(out)
    assert s["skipped_events"] == 1 and s["devices"] == []


@pytest.mark.parametrize("dur", ["abc", None, True, -5, "NaN", 12345.678, "8"])
def test_a_kernel_duration_that_is_not_a_finite_number_at_least_0_is_never_a_number(
        capsys, tmp_path, dur):
    events = mutate(base_events(), 5, "dur", dur)
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}).replace("12345.678", "1e400"))
    records = tmp_path / "r.jsonl"
    code, out, err = analyze_json(capsys, path, "-m", "h200", "--records-out", records)
    assert code == 0
    s = summary(out)
    assert s["kernel_time_s"] == pytest.approx(8e-6)  # the mm kernel alone
    assert s["priced_share_of_kernel_time"] == pytest.approx(1.0)
    assert s["skipped_events"] == 1 and "dur is not a finite number >= 0" in err
    times = [json.loads(line)["time_s"] for line in records.read_text().splitlines()]
    assert times == [pytest.approx(8e-6)]
    assert run(capsys, "analyze", records, "-m", "h200", "--json")[0] == 0  # reads it back


def test_trace_events_not_an_array_is_refused(capsys, tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": {"ph": "X"}}))
    code, _, err = analyze_json(capsys, path)
    assert code == 2 and "traceEvents: expected an array of events, got dict" in err


def test_a_trace_with_no_kernel_is_one_line(capsys, tmp_path):
    events = [e for e in base_events() if e["cat"] != "kernel"]
    code, _, err = analyze_json(capsys, write(tmp_path, events))
    assert code == 2 and "no kernel events" in err


def test_a_byte_order_mark_and_a_huge_integer_never_read_keep_a_trace_readable(capsys,
                                                                                tmp_path):
    plain = write(tmp_path, base_events(), "plain.json")
    expected = summary(analyze_json(capsys, plain)[1])
    text = json.dumps({"traceEvents": base_events(), "unread": 2 ** 70, "big": -(10 ** 30)})
    odd = tmp_path / "bom.json.gz"
    odd.write_bytes(gzip.compress(b"\xef\xbb\xbf" + text.encode()))
    code, out, _ = analyze_json(capsys, odd)
    assert code == 0
    got = summary(out)
    assert got["kernel_time_s"] == expected["kernel_time_s"] == pytest.approx(10e-6)
    assert got["priced_time_s"] == expected["priced_time_s"] > 0


@pytest.mark.parametrize("depth", [2000, 50000])
def test_deep_nesting_is_refused_in_one_line_without_building_it(capsys, tmp_path, depth):
    path = tmp_path / "t.json"
    events = json.dumps(base_events())
    path.write_text('{"traceEvents": ' + events[:-1] + ', {"ph": "i", "args": '
                    + "[" * depth + "]" * depth + "}]}")
    started = time.perf_counter()
    code, _, err = analyze_json(capsys, path)
    assert code == 2 and f"nesting deeper than {reader.MAX_DEPTH} levels" in err
    assert time.perf_counter() - started < 5


def test_softmax_over_an_empty_dimension_is_unpriced_not_a_crash(capsys, tmp_path):
    events = mutate(mutate(base_events(), 3, "name", "aten::softmax"), 3, "args",
                    {"External id": 2, "Input Dims": [[64, 0], []],
                     "Input type": ["float", "Scalar"], "Concrete Inputs": ["", "-1"]})
    code, out, _ = analyze_json(capsys, write(tmp_path, events))
    assert code == 0
    soft = next(json.loads(line) for line in out.splitlines() if "softmax" in line)
    assert soft["reason"] == "softmax over an empty tensor [64, 0]: no element to count"
    assert soft["time_s"] == pytest.approx(2e-6)


def test_an_unbind_over_twenty_million_is_not_replayed(capsys, tmp_path):
    events = mutate(mutate(base_events(), 3, "name", "aten::unbind"), 3, "args",
                    {"External id": 2, "Input Dims": [[20_000_000, 2], []],
                     "Input type": ["float", "Scalar"], "Concrete Inputs": ["", "0"]})
    code, out, _ = analyze_json(capsys, write(tmp_path, events))
    assert code == 0
    row = next(json.loads(line) for line in out.splitlines() if "unbind" in line)
    assert row["reason"] == ("a replay would build 20,000,000 output tensors (more than "
                             "65,536); not replayed")


def test_a_huge_device_properties_array_is_refused(capsys, tmp_path):
    devices = [{"id": i, "name": "g"} for i in range(reader.MAX_DEVICES + 1)]
    code, _, err = analyze_json(capsys, write(tmp_path, base_events(), devices=devices))
    assert code == 2 and "deviceProperties: 4,097 entries; expected at most 4,096" in err


def test_an_overlong_name_is_refused(capsys, tmp_path):
    code, _, err = analyze_json(capsys, write(tmp_path, mutate(base_events(), 5, "name",
                                                               "k" * 100_000)))
    assert code == 2 and "an event name of 100,000 characters; expected at most 65,536" in err


def test_a_run_without_a_string_is_refused_and_the_file_read_once(capsys, tmp_path,
                                                                  monkeypatch):
    """White space (or one string) past MAX_RUN_BYTES: refused, as it streams, on one read."""
    opened = []
    real = reader._open_bytes

    def counting(*args, **kwargs):
        opened.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(reader, "_open_bytes", counting)
    text = '{"traceEvents": ' + json.dumps(base_events()) + " " * (17 << 20) + "}"
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text.encode(), 1))
    code, _, err = analyze_json(capsys, path)
    assert code == 2 and "more than 16,777,216 bytes without a string" in err
    # one read (the command's and the reader's sniffs read 1 MiB each, on their own)
    assert len([p for p in opened if p == path]) == 1
    opened.clear()
    ok = write(tmp_path, base_events(), "ok.json")  # no deviceProperties: still one read
    ok.write_text(json.dumps({"traceEvents": base_events()}))
    assert analyze_json(capsys, ok)[0] == 0 and opened == [ok]


def test_a_gzip_bomb_and_too_many_events_are_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "MIN_INFLATED_BYTES", 1 << 20)
    filler = json.dumps(["a"] * 400_000)  # 2 MB that gzip packs into a few kB
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(('{"traceEvents": ' + json.dumps(base_events())
                                    + ', "pad": ' + filler + "}").encode()))
    code, _, err = analyze_json(capsys, path)
    assert code == 2 and "times its compressed size (a gzip bomb)" in err
    monkeypatch.setattr(reader, "MAX_EVENTS", 5)
    code, _, err = analyze_json(capsys, write(tmp_path, base_events()))
    assert code == 2 and "more than 5 ops, launches and device events" in err


def test_escape_sequences_in_names_never_reach_the_terminal_raw(capsys, tmp_path):
    events = mutate(base_events(), 3, "name", "aten::\x1b[31mred\x1b]0;title\x07\x9b2J")
    code, out, _ = run(capsys, "analyze", write(tmp_path, events), "-m", "h200", "--limit", "0")
    assert code == 0
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert "\\x1b[31mred" in out.replace("\n", "")


@pytest.mark.parametrize(("content", "problem"), [
    (b"\xff\xfe{}", "not UTF-8 text (byte 0)"),
    (b"PAR1\x00\x00", "a Parquet file; expected the JSONL projection"),
    (b'{"op": "mm", "workload": {"shapes": "-", "count": 1e999}, "predicted_time_s": 1}\n',
     "a count of 1 to"),
    (b'{"op": "mm", "workload": {"shapes": "-", "count": 1}, "predicted_time_s": "1"}\n',
     "predicted_time_s a finite number >= 0 or null"),
])
def test_a_projection_that_is_not_one_is_one_line(capsys, tmp_path, content, problem):
    projection = tmp_path / "p.jsonl"
    projection.write_bytes(content)
    code, _, err = run(capsys, "analyze", write(tmp_path, base_events()), "--projection",
                       projection)
    assert code == 2 and problem in err


def test_a_device_entry_without_an_id_is_left_out(tmp_path, capsys):
    """Found by the trace fuzz: `{"name": ...}` with no id raised KeyError."""
    path = write(tmp_path, base_events(), devices=[{"name": "NVIDIA H200"}])
    code, out, err = analyze_json(capsys, path)
    assert code == 0, err
    assert summary(out)["kernels"] == 2


def test_unpriced_time_is_never_a_negative_rounding():
    """Found by the long trace fuzz: kernel time less priced time less communication,
    summed in other orders, gave -8.4e-20 s."""
    from roofwise.traces.build import TraceSummary

    fields = {f: 0 for f in TraceSummary.__dataclass_fields__}
    summary = TraceSummary(**{**fields, "kernel_time_s": 0.1 + 0.2, "priced_time_s": 0.3,
                              "communication_time_s": 0.0, "devices": (), "skipped": ()})
    assert 0.1 + 0.2 - 0.3 > 0 and summary.unpriced_time_s == 0.0


def test_a_broken_deflate_block_past_the_sniff_is_one_line(capsys, tmp_path):
    """A gzipped trace whose deflate stream breaks after the first MiB (the sniff reads it
    whole; the reader meets the bad block, and ISA-L, which inflates it, says so in an error
    of its own): one line naming the file, exit 2."""
    events = [dict(e, ts=e["ts"] + 1000 * k) for k in range(6000) for e in base_events()]
    data = bytearray(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    for at in range(len(data) * 3 // 4, len(data)):  # the first flip that breaks a block
        data[at] ^= 0xFF
        try:
            isal_zlib.decompressobj(31).decompress(bytes(data))
        except isal_zlib.error as exc:
            if "Invalid deflate" in str(exc):  # not a checksum: gzip's own check says that
                break
        data[at] ^= 0xFF
    else:
        pytest.fail("no byte flip broke the deflate stream")
    path = tmp_path / "t.json.gz"
    path.write_bytes(bytes(data))
    code, out, err = analyze_json(capsys, path)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"roofwise: error: {path}: unreadable trace")
