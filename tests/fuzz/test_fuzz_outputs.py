"""Fuzzed output paths and chart inputs: `plot`, `report` and `analyze --plot` either write
the whole file (exit 0) or leave the path as it was, with one line on stderr."""

from __future__ import annotations

import os
from pathlib import Path

from fuzzkit import assert_all_or_nothing, examples, jsonl_files, run_cli, write_lines
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
