"""The README works as written: its Python blocks run in order (notebook style) and print what
they say, and every roofwise command in it is complete and runs (from a checkout's root)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from roofwise.cli import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
# commands whose exit 1 is their documented gate (lint errors, compare regressions, audit FAIL)
GATES = {"lint", "compare", "audit"}


def fenced_blocks() -> list[tuple[str, str]]:
    """(language, text) of every fenced block, fences paired line by line."""
    blocks: list[tuple[str, str]] = []
    language: str | None = None
    lines: list[str] = []
    for line in README.splitlines():
        if line.startswith("```"):
            if language is None:
                language, lines = line[3:].strip(), []
            else:
                blocks.append((language, "\n".join(lines) + "\n"))
                language = None
        elif language is not None:
            lines.append(line)
    assert language is None, "an unclosed code fence in README.md"
    return blocks


def python_blocks() -> list[str]:
    return [text for language, text in fenced_blocks() if language == "python"]


def commands() -> list[str]:
    """Every `roofwise ...` invocation: the tour table's, other inline code spans with arguments
    (a bare `roofwise lint` in prose names the command), the `roofwise` parts of shell blocks,
    and `$ roofwise` lines of output blocks. Headings are titles, not commands."""
    found: list[str] = []
    in_block = False
    for line in README.splitlines():
        if line.startswith("```"):
            in_block = not in_block
        if in_block or line.startswith("#"):
            continue
        found += [span for span in re.findall(r"`(roofwise [^`]+)`", line)
                  if line.startswith("|") or len(span.split()) > 2]
    for language, block in fenced_blocks():
        if language not in ("", "bash"):
            continue
        for line in block.splitlines():
            line = line.removeprefix("$ ")
            found += [part.strip() for part in line.split("&&")
                      if part.strip().startswith("roofwise ")]
    return list(dict.fromkeys(found))


@pytest.fixture()
def in_checkout_copy(tmp_path, monkeypatch):
    """A folder that looks like the checkout's root (examples/, tests/fixtures/) so commands
    run as written, and whatever they write lands in tmp_path."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "fixtures").symlink_to(ROOT / "tests" / "fixtures")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "100")
    return tmp_path


def test_readme_has_a_walkthrough_and_a_tour():
    assert len(python_blocks()) >= 4
    assert len(commands()) >= 18


def test_no_readme_command_is_left_incomplete():
    for command in commands():
        assert "..." not in command and "…" not in command, command
        assert not re.search(r"\b[A-Z]{3,}[A-Z_.]*\b(?![a-z])", command.split(" ", 2)[-1]
                             .replace("M5", "")), f"placeholder in: {command}"


def test_python_blocks_run_in_order_and_print_what_they_say(in_checkout_copy):
    namespace: dict[str, object] = {}
    for block in python_blocks():
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, "README.md", "exec"), namespace)
        lines = block.splitlines()
        expected = [lines[k][2:] for k in range(1, len(lines))
                    if lines[k].startswith("# <") and lines[k - 1].startswith("print(")]
        for text in expected:
            assert text in out.getvalue().splitlines(), text
    assert (in_checkout_copy / "chart.svg").is_file()
    assert (in_checkout_copy / "report.html").is_file()


@pytest.mark.parametrize("command", commands())
def test_readme_command_runs(in_checkout_copy, capsys, command):
    argv = shlex.split(command)[1:]
    code = main(argv)
    _, err = capsys.readouterr()
    if argv[0] == "calibrate" and code == 2:
        assert "no CUDA GPU" in err or "needs torch with CUDA" in err  # says why, one line
        assert err.count("\n") == 1
        return
    allowed = {0, 1} if argv[0] in GATES else {0}
    assert code in allowed, f"{command}: exit {code}: {err}"


def output_blocks() -> list[tuple[str, list[str]]]:
    """(command, printed lines) of every block that shows a `$ roofwise` command and what it
    prints."""
    found = []
    for language, block in fenced_blocks():
        lines = block.rstrip("\n").splitlines()
        if language == "" and lines and lines[0].startswith("$ roofwise "):
            found.append((lines[0][2:], [line.rstrip() for line in lines[1:]]))
    return found


def test_readme_shows_its_outputs():
    assert len(output_blocks()) >= 4


@pytest.mark.parametrize(("command", "shown"), output_blocks(),
                         ids=[c[:60] for c, _ in output_blocks()])
def test_a_readme_output_is_what_the_command_prints(in_checkout_copy, capsys, monkeypatch,
                                                    command, shown):
    """Each block's lines are what its command prints today: at 100 columns, or at the
    width a pipe gets (the block says which by its width)."""
    printed = []
    for columns in ("100", None):
        if columns is None:
            monkeypatch.delenv("COLUMNS")
        main(shlex.split(command)[1:])
        out, err = capsys.readouterr()
        printed.append([line.rstrip() for line in (out + err).rstrip("\n").splitlines()])
    assert shown in printed, "\n".join(printed[0])
