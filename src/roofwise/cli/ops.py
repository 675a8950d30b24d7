"""`roofwise ops`: the library's operators, their parameters and defaults."""

from __future__ import annotations

import inspect

import click

from roofwise.cli.common import console, echo_json
from roofwise.ops import OPS, op_parameters
from roofwise.render.layout import Column, fit_table


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
    out = console()
    cells = [[name, " ".join(f"{p.name}={p.default_text}" for p in params), summary]
             for name, summary, params in rows]
    fitted = fit_table((Column("op"), Column("parameters (default)", wrap=True, min_width=20),
                        Column("what", wrap=True, min_width=16)), cells, out.width,
                       "Operators: roofwise price OP -m NAME --shape key=value")
    out.print(fitted.table)


def _summary(name: str) -> str:
    doc = inspect.getdoc(OPS[name]) or ""
    return doc.splitlines()[0] if doc else ""
