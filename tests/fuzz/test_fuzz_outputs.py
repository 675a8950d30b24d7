"""Fuzzed output paths and chart inputs: `plot`, `report` and `analyze --plot` either write
the whole file (exit 0) or leave the path as it was, with one line on stderr."""

from __future__ import annotations

import csv
import io
import json
import os
import unicodedata
from pathlib import Path

from fuzzkit import (
    analyze_ops,
    assert_all_or_nothing,
    examples,
    jsonl_files,
    line_ends,
    out_lines,
    run_cli,
    write_lines,
)
from hypothesis import given
from hypothesis import strategies as st

SUFFIXES = {"plot": (".png", ".svg", ".pdf", ".jpg", ""), "report": (".html", ".htm", ".png"),
            "analyze": (".svg", ".png", ".txt")}
PLACES = ("plain", "existing", "missing_folder", "folder", "symlink", "read_only", "long_name",
          "under_a_file")


def place(tmp_path: Path, where: str, suffix: str) -> tuple[Path, bytes | None]:
    """An output path of one kind, and its bytes before the run (None when absent)."""
    for old in list(tmp_path.iterdir()):
        if old.is_dir() and not old.is_symlink():
            for inner in old.iterdir():
                inner.unlink()
            old.rmdir()
        else:
            old.chmod(0o644) if not old.is_symlink() else None
            old.unlink()
    target = tmp_path / f"out{suffix}"
    if where == "existing":
        target.write_bytes(b"old")
    elif where == "missing_folder":
        target = tmp_path / "nowhere" / f"out{suffix}"
    elif where == "folder":
        target.mkdir()
    elif where == "symlink":
        real = tmp_path / f"real{suffix}"
        real.write_bytes(b"real")
        target.symlink_to(real)
    elif where == "read_only":
        target.write_bytes(b"old")
        target.chmod(0o444)
    elif where == "long_name":
        target = tmp_path / ("n" * 300 + suffix)
    elif where == "under_a_file":
        (tmp_path / "file").write_bytes(b"x")
        target = tmp_path / "file" / f"out{suffix}"
    before = (target.read_bytes() if len(target.name) < 255 and target.is_file() else None)
    return target, before


@examples(30)
@given(f=jsonl_files(max_rows=6), command=st.sampled_from(sorted(SUFFIXES)),
       where=st.sampled_from(PLACES), data=st.data())
def test_outputs_are_all_or_nothing(tmp_path_factory, f, command, where, data):
    tmp = tmp_path_factory.mktemp("out")
    records = write_lines(tmp / "records.jsonl", f.lines)
    folder = tmp / "o"
    folder.mkdir()
    suffix = data.draw(st.sampled_from(SUFFIXES[command]))
    target, before = place(folder, where, suffix)
    title = ["--title", data.draw(st.sampled_from(("t", "$\\frac{$", "[/x]", "\udc80")))]
    args = {"plot": ["plot", records, "-m", "h200", "-o", target, *title],
            "report": ["report", records, "-m", "h200", "-o", target, *title],
            "analyze": ["analyze", records, "-m", "h200", "--json", "--plot", target]}[command]
    run = run_cli(*args, count=f"{command} output")
    if len(target.name) < 255:
        assert_all_or_nothing(run, target, before)
    if run.code != 0:
        assert run.out == "", "a failed command printed its results first"
    if where == "symlink":
        assert target.is_symlink() and (folder / f"real{suffix}").read_bytes() == b"real"
    if where == "read_only":
        assert target.read_bytes() == b"old"
    os.chmod(folder, 0o755)


def _raw_controls(text: str, keep: str = "\n") -> set[str]:
    """Characters a terminal or a line splitter acts on: controls (C0, C1, DEL) and the
    Unicode line and paragraph separators, other than those in `keep`."""
    return {ch for ch in text if ch not in keep and (
        unicodedata.category(ch) == "Cc" or ch in "\u2028\u2029")}


@examples(60)
@given(f=jsonl_files(max_rows=6), newline=line_ends())
def test_text_outputs_escape_control_characters(tmp_path, f, newline):
    """The table escapes every control character of an op name; `--json` escapes what
    JSON must and U+2028/U+2029 too; `--csv` quotes what it must: each reads back as
    the names that went in."""
    records = write_lines(tmp_path / "r.jsonl", f.lines, newline)
    table = run_cli("analyze", records, "-m", "h200", count="analyze table")
    assert not _raw_controls(table.out), sorted(_raw_controls(table.out))
    assert not _raw_controls(table.err), sorted(_raw_controls(table.err))
    as_json = run_cli("analyze", records, "-m", "h200", "--json", count="analyze json")
    assert as_json.code == table.code
    if as_json.code != 0:
        return
    # JSON escapes every control below U+0020; DEL and C1 are valid raw, but the line
    # breaks of str.splitlines among them are escaped, as U+2028 and U+2029 are
    breaks = {ch for ch in as_json.out if ch in "\x85\u2028\u2029"}
    assert not breaks, sorted(breaks)
    assert analyze_ops(as_json) == [g["op"] for g in f.good]
    assert len(out_lines(as_json)) == len(as_json.out.splitlines())  # no hidden line breaks
    as_csv = run_cli("analyze", records, "-m", "h200", "--csv", count="analyze csv")
    assert as_csv.code == 0, as_csv.err
    rows = list(csv.DictReader(io.StringIO(as_csv.out, newline="")))
    assert [r["op"] for r in rows] == [g["op"] for g in f.good]
    for line in out_lines(as_json):
        json.loads(line)
