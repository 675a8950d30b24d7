"""Notes on stderr, held until the command ends: a command that fails with bad input prints
exactly one line (the error), not the notes it wrote while reading (skipped rows, a profile
chosen) before it found the fault. Any other ending prints them, in order."""

from __future__ import annotations

import click

_held: list[str] | None = None


def note(line: str) -> None:
    """One line on stderr, never wrapped: CI logs and grep read it whole."""
    if _held is not None:
        _held.append(line)
    else:
        click.echo(line, err=True)


def hold() -> None:
    global _held
    _held = []


def release(show: bool) -> None:
    """Print the held notes (`show`) or drop them (the command failed on bad input)."""
    global _held
    lines, _held = _held or [], None
    if show:
        for line in lines:
            click.echo(line, err=True)
