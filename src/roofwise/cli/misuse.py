"""`roofwise misuse`: the eight wrong readings of a roofline, rebuilt from the library."""

from __future__ import annotations

import click

from roofwise.base.errors import InputError
from roofwise.lint.misuse import DEMOS, render


def misuse_number(text: str | None) -> int | None:
    """`M5`, `m5` or `5` -> 5: the lint codes name the misuses M1-M8, so both forms work."""
    if text is None:
        return None
    digits = text.strip().upper().removeprefix("M")
    if not digits.isdigit() or not 1 <= int(digits) <= len(DEMOS):
        raise InputError("--only", f"expected a misuse M1-M{len(DEMOS)} (or 1-{len(DEMOS)}), "
                                   f"got {text!r}")
    return int(digits)


@click.command("misuse")
@click.option("--only", default=None, metavar="M1..M8",
              help="Show one misuse: M1-M8 (the lint codes) or 1-8.")
def misuse_command(only: str | None) -> None:
    """Eight ways to read a roofline wrong, each priced on the case study (QK-Norm + RoPE +
    fp8 quant, 4,096 tokens on the h200)."""
    click.echo(render(misuse_number(only)), nl=False)
