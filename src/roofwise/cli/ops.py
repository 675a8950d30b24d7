"""`roofwise ops`: the library's operators, their parameters and defaults."""

from __future__ import annotations

import inspect

import click
from rich.table import Table

from ..ops import OPS, op_parameters
from .common import console, echo_json


@click.command("ops")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per operator.")
def ops_command(as_json: bool) -> None:
    """List the library operators `roofwise price OP --shape key=value` can price."""
    rows = [(name, _summary(name), op_parameters(name)) for name in OPS]
    if as_json:
        for name, summary, params in rows:
            echo_json({"op": name, "summary": summary,
                       "parameters": {p.name: {"kind": p.kind, "default": p.default_text}
                                      for p in params}})
        return
    table = Table(title="Operators (roofwise price OP -m NAME --shape key=value ...)",
                  title_justify="left")
    for col in ("op", "parameters (default)", "what"):
        table.add_column(col)
    for name, summary, params in rows:
        table.add_row(name, " ".join(f"{p.name}={p.default_text}" for p in params), summary)
    console().print(table)


def _summary(name: str) -> str:
    doc = inspect.getdoc(OPS[name]) or ""
    return doc.splitlines()[0] if doc else ""
