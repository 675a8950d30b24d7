"""Progress: reading and judging records draws a bar on stderr when stderr is a terminal (the
bytes read out of the file's size, the records so far), and nothing at all when it is not."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from roofwise.records.write import write_records

ROOFWISE = str(Path(sys.executable).with_name("roofwise"))  # the console script


@pytest.fixture
def records(tmp_path):
    rows = [{"op": "rmsnorm", "flops": 1e9, "bytes": 4e8 + k, "roof": "cuda_core.fp32",
             "time_s": 1e-4, "device": "NVIDIA H200"} for k in range(20_000)]
    path = tmp_path / "r.jsonl"
    write_records(path, rows)
    return path


def _stderr_on_a_terminal(args: list[str], out_path) -> str:
    """`roofwise ARGS` with stderr on a pseudo-terminal (stdout to a file): what it drew."""
    leader, follower = pty.openpty()
    with open(out_path, "wb") as out:
        child = subprocess.Popen([ROOFWISE, *args], stdout=out,
                                 stderr=follower, env={**os.environ, "COLUMNS": "120"})
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    assert child.wait(timeout=120) == 0
    os.close(leader)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn.decode("utf-8", "replace"))


@pytest.mark.parametrize("command", [["analyze", "--json"], ["analyze", "--csv"],
                                     ["analyze"], ["report"]])
def test_a_terminal_gets_a_bar_over_the_file_size(records, tmp_path, command):
    size_mb = records.stat().st_size / 1e6
    args = [command[0], str(records), "-m", "h200", *command[1:]]
    if command[0] == "report":
        args += ["-o", str(tmp_path / "r.html")]
    drawn = _stderr_on_a_terminal(args, tmp_path / "out")
    verb = "reading" if command[0] == "report" else "judging"
    assert f"{verb} {records}" in drawn
    assert f"/{size_mb:.1f} MB" in drawn  # rich's DownloadColumn: done/total
    assert "━" in drawn  # the bar itself


def test_a_pipe_gets_no_bar(records):
    done = subprocess.run([ROOFWISE, "analyze", str(records), "-m", "h200", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == ""
