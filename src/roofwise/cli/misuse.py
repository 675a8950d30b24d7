"""`roofwise misuse`: the seed's eight readings, rebuilt from the library."""

from __future__ import annotations

import click

from ..misuse import DEMOS, render


@click.command("misuse")
@click.option("--only", type=click.IntRange(1, len(DEMOS)), default=None,
              help="Show one misuse, 1..8.")
def misuse_command(only: int | None) -> None:
    """Eight ways to read a roofline wrong, each priced on the seed's case study."""
    click.echo(render(only), nl=False)
