"""Strategies and the contract every command run must keep, for the fuzz tests.

The contract (README, "Bad input"): the exit code is 0, 1 or 2; nothing escapes as a
traceback; exit code 2 comes with exactly one line on stderr, under 300 characters; a lenient
read keeps every good row; an output file is written whole or not at all.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import EXAMPLES, SCALE
from hypothesis import settings
from hypothesis import strategies as st

from roofwise.cli import main

LOG = os.environ.get("ROOFWISE_FUZZ_LOG", "")  # where a long run writes its running count


def examples(n: int) -> settings:
    """`n` examples in CI, `n * ROOFWISE_FUZZ_SCALE` in the long profile."""
    return settings(max_examples=n * SCALE)


@dataclass(frozen=True)
class Run:
    args: tuple[str, ...]
    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return self.err.split("\n")[:-1] if self.err.endswith("\n") else self.err.split("\n")


def run_cli(*args: Any, count: str = "") -> Run:
    """The command in-process; whatever escapes `main` is a contract failure in itself."""
    argv = tuple(str(a) for a in args)
    if count:
        EXAMPLES[count] += 1
        if LOG and sum(EXAMPLES.values()) % 500 == 0:  # a long run's progress, if it is cut
            Path(LOG).write_text(f"{sum(EXAMPLES.values())} examples: {dict(EXAMPLES)}\n")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except BaseException as exc:
            trace = "".join(traceback.format_exception(exc))
            raise AssertionError(f"roofwise {' '.join(argv)[:500]} raised "
                                 f"{type(exc).__name__}: {exc!s:.300}\n{trace[-3000:]}"
                                 ) from None
    return check_contract(Run(argv, code, out.getvalue(), err.getvalue()))


def check_contract(run: Run) -> Run:
    shown = f"roofwise {' '.join(run.args)[:300]}"
    assert run.code in (0, 1, 2), f"{shown}: exit {run.code}\n{run.err[-2000:]}"
    assert "Traceback" not in run.err, f"{shown}: traceback\n{run.err[-3000:]}"
    if run.code == 2:
        lines = run.err_lines
        assert len(lines) == 1, f"{shown}: exit 2 with {len(lines)} stderr lines: {lines[:5]}"
        assert len(lines[0]) < 300, f"{shown}: {len(lines[0])} characters: {lines[0][:400]}"
        assert lines[0].startswith("roofwise: error: "), f"{shown}: {lines[0]}"
    return run


def assert_all_or_nothing(run: Run, path: Path, before: bytes | None) -> None:
    """An output is written whole (exit 0) or left as it was; no temporary file remains."""
    shown = f"roofwise {' '.join(run.args)[:300]}"
    leftovers = ([p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}.")]
                 if path.parent.is_dir() else [])
    assert not leftovers, f"{shown}: temporary files left: {leftovers}"
    if run.code == 0:
        assert path.is_file() and path.stat().st_size > 0, f"{shown}: exit 0, no {path}"
    elif before is None:
        assert not path.exists() or path.is_dir() or path.is_symlink(), (
            f"{shown}: exit {run.code} but {path} was written")
    elif path.is_file() and not path.is_symlink():
        assert path.read_bytes() == before, f"{shown}: exit {run.code} but {path} changed"


# ----------------------------------------------------------------------------- records

UNITS = ("cuda_core.fp32", "sfu.fp32", "tensor_core.bf16", "tensor_core.fp8", "tensor_core.int4",
         "ascend_vector.alu", "x.y")
DEVICES = ("NVIDIA H200", "h200", "H100", "NVIDIA A100-SXM4-80GB", "Ascend A5", "unknown gpu",
           "[/x]", "$\\frac{$")
TIMINGS = ("kernel", "graph", "events", "wall", "device")
NASTY_TEXT = ("[/x]", "[bold]", "$\\frac{$", "$x$", "\\", "a\nb", "a\r\nb", "é", "𝔁",
              "\u2028", "\x7f", "=", "x=1,y=2", "\"", "'", ",", "{}", "[1,2]", " padded ",
              # control and format characters: a terminal, a chart backend or a line splitter
              # would act on each of them (issue 20)
              "\x1b[31mred\x1b[0m", "\x1b]0;title\x07", "\u202ertl", "\ufeffbom", "a\rb",
              "\x00nul", "zero\u200bwidth", "\x85next", "\u2029para", "\x08\x08back",
              "9" * 5000)


def names(surrogates: bool = False) -> st.SearchStrategy[str]:
    """Op names and such: ordinary, nasty or random text (never empty, never only white
    space), NUL included. Lone surrogates (a JSON escape such as \\ud800) only with
    `surrogates`: the JSONL reader refuses their line (tests/contract/test_reader_findings.py)."""
    chars = st.characters() if surrogates else st.characters(blacklist_categories=("Cs",))
    return st.one_of(st.sampled_from(("gemm", "rmsnorm", "silu", "attention")),
                     st.sampled_from(NASTY_TEXT),
                     st.text(chars, min_size=1, max_size=30)).filter(lambda s: s.strip() != "")


def counts() -> st.SearchStrategy[float | int]:
    """Non-negative numbers a record may hold: floats in range and exact integers of any size
    that fits a float."""
    return st.one_of(st.floats(0, 1e30, allow_nan=False), st.integers(0, 10**12),
                     st.integers(0, 10**300), st.sampled_from((0, 0.0, 1, 2**63 + 1)))


@st.composite
def good_records(draw: st.DrawFn, surrogates: bool = False) -> dict[str, Any]:
    """A record the contract accepts: required fields valid, optional ones valid, null or
    blank, restated fields consistent."""
    flops = draw(st.one_of(st.integers(0, 10**15), st.floats(0, 1e18, allow_nan=False)))
    size = draw(st.one_of(st.integers(0, 10**15), counts()))
    record: dict[str, Any] = {
        "op": draw(names(surrogates)), "flops": flops, "bytes": size,
        "roof": draw(st.sampled_from(UNITS)),
        "time_s": draw(st.one_of(st.floats(0, 10, allow_nan=False), st.floats(1e-9, 1e-3),
                                 st.just(0))),
    }
    absent = st.sampled_from((None, ""))
    if draw(st.booleans()):
        record["device"] = draw(st.one_of(st.sampled_from(DEVICES), absent))
    if draw(st.booleans()):
        record["timing"] = draw(st.one_of(st.sampled_from(TIMINGS), absent))
    if draw(st.integers(0, 3)) == 0:
        record["cache_state"] = draw(st.one_of(st.sampled_from(("cold", "warm")), absent))
    if draw(st.booleans()):
        record["workload"] = draw(st.one_of(
            absent, st.dictionaries(st.sampled_from(("m", "n", "dtype", "[/x]", "$")),
                                    st.one_of(st.integers(0, 10**6), st.sampled_from(
                                        ("bf16", "fp8", "[/x]"))), max_size=3),
            names(surrogates)))
    if draw(st.booleans()) and isinstance(size, int):
        read = draw(st.integers(0, size))
        record["read_bytes"], record["write_bytes"] = read, size - read
    if draw(st.integers(0, 3)) == 0:  # a working set: at most the bytes, or something odd
        record["footprint_bytes"] = draw(st.one_of(
            st.integers(0, size) if isinstance(size, int) else absent, absent))
    elif draw(st.booleans()):
        record[draw(st.sampled_from(("read_bytes", "write_bytes")))] = draw(absent)
    if draw(st.booleans()):
        p10 = draw(st.floats(0, 1, allow_nan=False))
        record["time_p10_s"], record["time_p90_s"] = p10, p10 + draw(st.floats(0, 1))
    elif draw(st.booleans()):
        record["time_p90_s"] = draw(absent)
    if draw(st.booleans()) and isinstance(flops, int):
        part = draw(st.integers(0, flops))
        unit = record["roof"]
        record["flops_by_unit"] = ({unit: flops} if part in (0, flops) or unit == "sfu.fp32"
                                   else {unit: flops - part, "sfu.fp32": part})
    return record


BAD_JSON_LINES = ("null", "[]", "1", '"x"', "true", "{}", '{"op": "x"}', "{", "}",
                  "[" * 3000 + "]" * 3000,
                  '{"op": "x", "flops": ' + "9" * 5000 + ', "bytes": 1, "roof": "cuda_core.fp32", '
                  '"time_s": 1}', '{"op": "x", "flops": 1e999, "bytes": 1, '
                  '"roof": "cuda_core.fp32", "time_s": 1}', "\x00", "NaN")


@st.composite
def bad_records(draw: st.DrawFn) -> dict[str, Any]:
    """A record the contract refuses, for a reason drawn from the ways records go wrong."""
    record = draw(good_records())
    how = draw(st.sampled_from(("missing", "negative", "text", "bool", "huge", "nan", "timing",
                                "split", "spread", "units", "empty_units", "list", "null",
                                "footprint", "cache_state")))
    field = draw(st.sampled_from(("flops", "bytes", "time_s")))
    if how == "missing":
        del record[draw(st.sampled_from(("op", "flops", "bytes", "roof", "time_s")))]
    elif how == "null":
        record[draw(st.sampled_from(("op", "flops", "bytes", "roof", "time_s")))] = draw(
            st.sampled_from((None, "")))
    elif how == "negative":
        record[field] = -draw(st.floats(1e-300, 1e300))
    elif how == "text":
        record[field] = draw(st.sampled_from(("abc", "1,5", "0x10", "inf", "-1", "[/x]")))
    elif how == "bool":
        record[field] = draw(st.booleans())
    elif how == "huge":
        record[field] = 10**draw(st.integers(309, 4200))  # json.dumps stops at 4,300 digits
    elif how == "nan":
        record[field] = draw(st.sampled_from((math.nan, math.inf)))
    elif how == "timing":
        record["timing"] = draw(st.sampled_from(("gpu", "Kernel", "[/x]", 3)))
    elif how == "split":
        size = float(record["bytes"])
        record["read_bytes"], record["write_bytes"] = size + 10.0 + size * 1e-3, 0
    elif how == "cache_state":  # neither cold nor warm
        record["cache_state"] = draw(st.sampled_from(("hot", "Cold", "flushed", 1)))
    elif how == "footprint":  # more distinct bytes than bytes moved
        record["footprint_bytes"] = float(record["bytes"]) * 2 + 10.0
    elif how == "spread":
        record["time_p10_s"], record["time_p90_s"] = 2.0, 1.0
    elif how == "units":
        record["flops_by_unit"] = {"cuda_core.fp32": float(record["flops"]) * 2 + 10.0}
    elif how == "empty_units":
        record["flops_by_unit"] = draw(st.sampled_from(({}, [], "x", 5, "{")))
    else:  # a roof that is not a string is its JSON text ("[]"): an unknown unit, not bad
        record["roof"] = draw(st.sampled_from((" ", "\t", "")))
    return record


@dataclass(frozen=True)
class RecordFile:
    """Lines of a record file and which records in it are good, in order."""

    lines: tuple[bytes, ...]
    good: tuple[dict[str, Any], ...]
    bad: int


def json_line(record: dict[str, Any]) -> bytes:
    return json.dumps(record).encode("utf-8", "surrogatepass")


@st.composite
def jsonl_files(draw: st.DrawFn, max_rows: int = 12) -> RecordFile:
    lines: list[bytes] = []
    good: list[dict[str, Any]] = []
    bad = 0
    for _ in range(draw(st.integers(0, max_rows))):
        kind = draw(st.sampled_from(("good", "good", "good", "bad", "line", "bytes", "blank",
                                     "text", "surrogate", "duplicate", "not_text")))
        if kind == "duplicate":  # a key twice is ambiguous, even with the same value twice
            record = draw(good_records())
            key = draw(st.sampled_from(sorted(record)))
            again = draw(st.one_of(st.just(record[key]), st.none(), counts(), names()))
            text = json_line(record)[:-1] + b", " + json_line({key: again})[1:]
            lines.append(text)
            bad += 1
        elif kind == "not_text":  # op (or roof, device, timing) as a number, list or object
            record = draw(good_records())
            record[draw(st.sampled_from(("op", "op", "roof", "device", "timing")))] = draw(
                st.sampled_from(({"x": [1, 2]}, [1, 2], ["gemm"], 5, 1.5, True, {})))
            lines.append(json_line(record))
            bad += 1
        elif kind == "surrogate":  # a lone surrogate anywhere in a string costs its line
            record = draw(good_records())
            record["op"] = draw(names(surrogates=True))
            lines.append(json_line(record))
            if any(0xD800 <= ord(c) <= 0xDFFF for c in record["op"]):
                bad += 1
            else:
                good.append(record)
        elif kind == "good":
            record = draw(good_records())
            lines.append(json_line(record))
            good.append(record)
        elif kind == "bad":
            lines.append(json_line(draw(bad_records())))
            bad += 1
        elif kind == "line":
            lines.append(draw(st.sampled_from(BAD_JSON_LINES)).encode())
            bad += 1
        elif kind == "bytes":  # a good record with an invalid UTF-8 byte: one bad line
            raw = json_line(draw(good_records(surrogates=False)))
            at = draw(st.integers(0, len(raw)))
            lines.append(raw[:at] + draw(st.sampled_from((b"\xff", b"\xc3", b"\xed\xa0\x80")))
                         + raw[at:])
            bad += 1
        elif kind == "blank":
            lines.append(draw(st.sampled_from((b"", b"   ", b"\t"))))
        else:  # arbitrary text after a `#`: never JSON, never blank
            text = "#" + draw(st.text(max_size=40)).replace("\n", " ").replace("\r", " ")
            lines.append(text.encode("utf-8", "surrogatepass"))
            bad += 1
    return RecordFile(tuple(lines), tuple(good), bad)


LINE_ENDS = (b"\n", b"\r\n", b"\r")  # Unix, Windows, and Excel for Mac's "CSV (Macintosh)"


def line_ends() -> st.SearchStrategy[bytes]:
    return st.sampled_from(LINE_ENDS)


def write_lines(path: Path, lines: Sequence[bytes], newline: bytes = b"\n") -> Path:
    path.write_bytes(newline.join(lines) + (newline if lines else b""))
    return path


CSV_COLUMNS = ("op", "flops", "bytes", "roof", "time_s", "device", "timing", "workload",
               "read_bytes", "write_bytes", "time_p10_s", "time_p90_s", "flops_by_unit",
               "footprint_bytes", "cache_state")


def csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


@st.composite
def csv_files(draw: st.DrawFn, max_rows: int = 10) -> RecordFile:
    """CSV with every column; good rows, bad rows, rows with invalid UTF-8 and long cells."""
    import csv

    rows: list[bytes] = []
    good: list[dict[str, Any]] = []
    bad = 0
    for _ in range(draw(st.integers(0, max_rows))):
        kind = draw(st.sampled_from(("good", "good", "bad", "bytes", "long", "cells")))
        record = draw(good_records(surrogates=False) if kind != "bad" else bad_records())
        if kind == "bad" and any(isinstance(v, str) and any(0xD800 <= ord(c) <= 0xDFFF
                                                            for c in v)
                                 for v in record.values()):
            record = {**record, "op": "x"}
        if kind == "long":
            record["op"] = "L" * draw(st.sampled_from((131_073, 200_000)))
        buffer = io.StringIO()
        # a "\r\n" terminator makes the writer quote a cell holding a bare "\r" as well
        csv.writer(buffer, lineterminator="\r\n").writerow(
            [csv_cell(record.get(c)) for c in CSV_COLUMNS])
        raw = buffer.getvalue().removesuffix("\r\n").encode("utf-8", "surrogatepass")
        if kind == "bytes":  # inside a cell: a byte beside a quote would move the cells' bounds
            inside = [k for k in range(len(raw) + 1) if b'"' not in raw[max(k - 1, 0):k + 1]]
            at = draw(st.sampled_from(inside))
            raw = raw[:at] + b"\xff" + raw[at:]
            bad += 1
        elif kind == "cells":
            raw = raw + b",extra"
            bad += 1
        elif kind == "bad":
            bad += 1
        else:
            good.append(record)
        rows.append(raw)
    return RecordFile((",".join(CSV_COLUMNS).encode(), *rows), tuple(good), bad)


def analyze_ops(run: Run) -> list[str]:
    ops = []
    for line in out_lines(run):
        try:
            ops.append(json.loads(line)["op"])
        except ValueError as exc:
            raise AssertionError(f"not a JSON line ({exc}): {line[:300]!r}") from None
    return ops


def out_lines(run: Run) -> list[str]:
    """stdout's lines, split at newlines only (a JSON string may hold U+0085 or U+2028)."""
    return [line for line in run.out.split("\n") if line]
