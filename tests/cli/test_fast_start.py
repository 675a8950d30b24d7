"""`roofwise --help`, `machines` and `analyze` on a small file load no plotting or GPU library."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from roofwise.cli import COMMANDS, cli, docstring

PROBE = """
import sys
from roofwise.cli import main
code = main(sys.argv[1:])
heavy = sorted(m for m in ("matplotlib", "torch", "triton") if m in sys.modules)
print("HEAVY=" + ",".join(heavy), file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.parametrize("args", [["--help"], ["machines"], ["analyze", "EXAMPLE", "--json"],
                                  ["analyze", "EXAMPLE"]])
def test_light_commands_import_no_plotting_or_gpu_library(examples, args):
    args = [str(examples / "records.jsonl") if a == "EXAMPLE" else a for a in args]
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "HEAVY=\n" in done.stderr


def test_help_lists_each_command_as_its_own_docstring_says():
    """What `--help` reads from the sources (so that it imports nothing) is what the commands
    themselves say."""
    ctx = cli.make_context("roofwise", [])
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
        listed = click.Command(name, help=docstring(name)).get_short_help_str(300)
        assert listed and command.get_short_help_str(300) == listed, name


def test_import_roofwise_loads_nothing_heavy_until_a_name_is_used():
    probe = ("import sys, roofwise; heavy = [m for m in ('numpy', 'polars', 'matplotlib', "
             "'torch') if m in sys.modules]; f = roofwise.analyze_file; "
             "print(heavy, callable(f), callable(roofwise.machine), callable(roofwise.report), "
             "'matplotlib' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split() == ["[]", "True", "True", "True", "False"], done.stderr


def test_python_dash_m_runs_the_same_command(examples):
    """`python -m roofwise` is the console script: the same verdicts, the same exit code."""
    done = subprocess.run([sys.executable, "-m", "roofwise", "analyze",
                           str(examples / "records.jsonl"), "--json"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 8 and all(line.startswith('{"') for line in lines)
    bad = subprocess.run([sys.executable, "-m", "roofwise", "analyze", "no-such-file.jsonl"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "no-such-file.jsonl" in bad.stderr


ENDS = """
import atexit, sys
import torch  # a process that imported torch ends without the interpreter's teardown
sys.argv = ["roofwise", *sys.argv[1:]]
atexit.register(lambda: print("EXIT HOOK RAN", file=sys.stderr))
from roofwise.cli import run
run()
"""


@pytest.mark.parametrize(("args", "code"), [
    (["analyze", "EXAMPLE", "--json"], 0), (["analyze", "no-such-file.jsonl"], 2)])
def test_a_process_that_imported_torch_ends_with_its_output_and_code(examples, args, code):
    """Its exit hooks run, every line written to a pipe arrives, and the exit code is the
    command's."""
    pytest.importorskip("torch")
    args = [str(examples / "records.jsonl") if a == "EXAMPLE" else a for a in args]
    done = subprocess.run([sys.executable, "-c", ENDS, *args], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == code, done.stderr
    assert "EXIT HOOK RAN" in done.stderr
    if code == 0:
        lines = done.stdout.splitlines()
        assert len(lines) == 8 and all(line.startswith('{"') for line in lines)
        assert lines[-1].endswith("}")
