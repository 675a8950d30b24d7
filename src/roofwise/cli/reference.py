"""The CLI reference (docs/cli.md), generated from the click commands so it cannot drift.

    python -m roofwise.cli.reference docs/cli.md

writes it; `tests/project/test_docs.py` fails when the file differs from what the commands say.
"""

from __future__ import annotations

import sys

import click

from roofwise.cli import cli
from roofwise.records.write import atomic_writer

WIDTH = 80  # the help text as an 80-column terminal shows it

HEADER = """# CLI reference

Generated from the commands themselves by `python -m roofwise.cli.reference docs/cli.md`;
a test fails when this file and the commands disagree. Exit codes: 0 success; 1 the command
found what it gates on (lint errors, audit FAIL rows, compare regressions); 2 bad input (one
line on stderr naming the file, line or field).
"""


def cli_reference() -> str:
    """Every command's --help, in the order `roofwise --help` lists them, as Markdown."""
    root = click.Context(cli, info_name="roofwise", terminal_width=WIDTH,
                         max_content_width=WIDTH, help_option_names=["-h", "--help"])
    parts = [HEADER, "## roofwise\n", "```text", cli.get_help(root), "```\n"]
    for name in cli.list_commands(root):
        command = cli.get_command(root, name)
        if command is None:  # listed but not loadable: say so rather than drop it silently
            raise RuntimeError(f"roofwise {name} is listed but cannot be loaded")
        ctx = click.Context(command, info_name=name, parent=root, terminal_width=WIDTH,
                            max_content_width=WIDTH, help_option_names=["-h", "--help"])
        parts += [f"## roofwise {name}\n", "```text", command.get_help(ctx), "```\n"]
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    text = cli_reference()
    if not argv:
        sys.stdout.write(text)
        return 0

    with atomic_writer(argv[0]) as handle:
        handle.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
