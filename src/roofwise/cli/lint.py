"""`roofwise lint PATH...`: the eight misuses (M1-M8) and R1 over ledgers, profiles, records."""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import textwrap
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TextIO

import click
import polars as pl
from rich.console import Console
from rich.text import Text

from roofwise.base import schema
from roofwise.base.text import for_terminal
from roofwise.cli.common import all_machines, console, load_machine_arg, machine_option
from roofwise.ledgers.files import load_ledger, parse_ledger
from roofwise.ledgers.ledger import Ledger
from roofwise.lint import (
    ANALYSIS_CHECKS,
    CODES,
    ERROR,
    FINDING_FIELDS,
    file_stale_findings,
    finding_frame,
    finding_kinds,
    findings_frame,
    lint_ledger,
    lint_machine,
)
from roofwise.lint.stale_checks import StaleGroups, stale_groups, stale_rows
from roofwise.output.analysis import analyze
from roofwise.output.frame import json_rows_writer
from roofwise.profiles.load import parse_machine
from roofwise.profiles.machine import Machine
from roofwise.records.read import (
    BATCH_ROWS,
    Loaded,
    check_not_empty,
    columns_from_valid,
    iter_batches,
)
from roofwise.render.layout import Column, fit_table

_YAML_SUFFIXES = (".yaml", ".yml")
_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow"}


@click.command("lint")
@click.argument("paths", nargs=-1, metavar="PATH...")
@machine_option()
@click.option("--reference", "--ledger", "reference_paths", multiple=True,
              metavar="LEDGER.yaml",
              help="A ledger of the operator as it should be counted; records are matched to it "
                   "by op name (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per finding.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=0),
              help="Findings shown one by one in the table; more than this are shown one "
                   "row per kind (code and fix), counted (0: every finding).")
def lint_command(paths: tuple[str, ...], machine_name: str | None,
                 reference_paths: tuple[str, ...], as_json: bool, limit: int = 50) -> int:
    """Flag the eight roofline misuses (and units a profile lacks) in ledgers, profiles, records.

    Records (JSONL, CSV, Parquet) are judged as `roofwise analyze` judges them. Exit code 1
    when any finding is an error, 0 otherwise, 2 on bad input.
    """
    machine = load_machine_arg(machine_name)
    references = [load_ledger(p) for p in reference_paths]
    if not paths and machine is None:
        raise click.UsageError("give ledger, profile or record files, or --machine to lint "
                               "a profile")
    kinds: list[str] = []
    with contextlib.ExitStack() as stack:
        spool = None
        if as_json:
            spool = io.TextIOWrapper(stack.enter_context(tempfile.TemporaryFile()),
                                     encoding="utf-8", newline="")
            stack.callback(spool.detach)  # before the file closes (callbacks run last first)
        found = _Findings(spool, None if limit == 0 else limit)
        if not paths and machine is not None:
            found.add(finding_frame(lint_machine(machine)))
        for path in paths:
            kinds.append(lint_path(path, machine, references, found.add))
        if spool is not None:
            found.write_spooled(sys.stdout)
        else:
            render_findings(found, console(), len(paths) or 1)
    ledgers = kinds.count("ledger")
    if machine is None and ledgers:
        console(err=True).print(f"roofwise: no --machine: checks M1, M5, M7 and R1 of "
                                f"{ledgers} ledger(s) need a machine and were skipped",
                                markup=False)
    return 1 if found.errors else 0


class _Findings:
    """What lint keeps of its findings as it reads: with --json, their lines spooled to a
    temporary file and written out once every input has been read (a bad record later on
    leaves nothing half-written); for the table, the first `limit` findings, every finding
    folded by kind, and the counts. A million records' findings are never held at once."""

    def __init__(self, spool: TextIO | None, limit: int | None) -> None:
        self.spool, self.limit = spool, limit
        self.head = finding_frame([])
        self.kinds = finding_kinds(self.head)
        self.total = self.errors = 0

    def add(self, frame: pl.DataFrame) -> None:
        self.total += len(frame)
        self.errors += int((frame["severity"] == ERROR).sum())
        if self.spool is not None:
            json_rows_writer(frame)(self.spool)
            return
        if self.limit is None or len(self.head) < self.limit:
            self.head = pl.concat([self.head, frame if self.limit is None
                                   else frame.head(self.limit - len(self.head))])
        self.kinds = finding_kinds(pl.concat([self.kinds, finding_kinds(frame)]))

    def write_spooled(self, out: TextIO) -> None:
        assert self.spool is not None
        self.spool.flush()
        self.spool.seek(0)
        while text := self.spool.read(1 << 20):
            out.write(text)


def lint_path(path: str, machine: Machine | None, references: Sequence[Ledger],
              add: Callable[[pl.DataFrame], None]) -> str:
    """What one file is ("profile", "ledger" or "records"); its findings go to `add`, as
    `findings_frame` columns (a records file a batch at a time, then R2 over all of it)."""
    if Path(path).suffix.lower() in _YAML_SUFFIXES:
        data = schema.load_yaml(path)
        if isinstance(data, dict) and "units" in data and "memory" in data:
            add(finding_frame(lint_machine(parse_machine(data, path))))
            return "profile"
        ledger = parse_ledger(data, path)
        add(finding_frame(lint_ledger(ledger, machine, _reference_for(ledger, references),
                                      where=path)))
        return "ledger"
    # each finding where its own file says (a folder's lines restart in each shard)
    stale: list[StaleGroups] = []
    machines: dict[str, Machine] = {}
    rows = 0
    for loaded in iter_batches(path, strict=True, keep_rows=False, batch_rows=BATCH_ROWS):
        rows += len(loaded.columns)
        analysis = analyze(loaded.columns, all_machines(), machine)
        add(findings_frame(analysis, references, loaded.source or path, machine_level=[]))
        stale.append(stale_groups(stale_rows(analysis)))
        machines.update(analysis.machines)
    if not rows:  # no valid record is bad input (a strict read raised on a bad one already)
        check_not_empty(path, Loaded(columns_from_valid([]), ()))
    add(finding_frame(file_stale_findings(stale, machines)))
    return "records"


def _reference_for(ledger: Ledger, references: Sequence[Ledger]) -> Ledger | None:
    if len(references) == 1:
        return references[0]
    return next((r for r in references if r.name.lower() == ledger.name.lower()), None)


def render_findings(found: _Findings, out: Console, files: int) -> None:
    """The findings as a table, the machine-level ones (R2) first (a few lines that explain
    many rows), then the rest in order; titled with how many there are, and what each code
    shown means. More than `limit` findings (a records file with one on most rows) are shown
    one row per kind (`finding_kinds`: a code and its fix, the first finding with how many
    more are like it), the first `limit` kinds."""
    if not found.total:
        out.print(f"clean: no misuse found in {files} input(s)", markup=False)
        return
    limit = found.limit
    title = (f"{found.total} finding(s): {found.errors} error(s), "
             f"{found.total - found.errors} warning(s)")
    machine_level = pl.col("code").is_in(list(ANALYSIS_CHECKS))
    folded = limit is not None and found.total > limit
    if folded:
        kinds = pl.concat([found.kinds.filter(machine_level), found.kinds.filter(~machine_level)])
        more = pl.col("count") - 1
        table = kinds.with_columns(pl.when(more > 0).then(
            pl.col("where") + " (+" + more.cast(pl.Utf8) + " more like it)"
        ).otherwise(pl.col("where")).alias("where"))
        title += f", of {len(table)} kind(s) (a code and its fix): the first of each kind shown"
    else:
        table = pl.concat([found.head.filter(machine_level), found.head.filter(~machine_level)])
    shown = table if limit is None else table.head(limit)
    rows: list[list[str | Text]] = [
        [code, Text(severity, style=_SEVERITY_STYLE.get(severity, "")), where, reason, fix]
        for code, severity, where, reason, fix in shown.select(FINDING_FIELDS).iter_rows()]
    fitted = fit_table((Column("code"), Column("severity"), Column("where", wrap=True,
                                                                   min_width=14),
                        Column("reason", wrap=True, min_width=24),
                        Column("fix", wrap=True, min_width=16)), rows, out.width, title)
    out.print(fitted.table)
    if len(shown) < len(table):
        out.print(f"{len(table) - len(shown)} more kind(s) (--limit 0 for all)",
                  markup=False)
    if folded:
        out.print("every finding: --limit 0 (a table) or --json (one object each)",
                  markup=False)
    seen = shown["code"].unique(maintain_order=True).to_list()
    out.print("; ".join(f"{code}: {CODES[code]}" for code in seen), style="dim",
              markup=False)


def render_findings_brief(kinds: pl.DataFrame, out: Console, limit: int = 20,
                          shown: Collection[str] = frozenset()) -> None:
    """`code where (+n more like it): reason — fix`, one line per kind of finding
    (`finding_kinds`: a code and its fix; the first finding shown, the rest counted), wrapped
    with a hanging indent, for analyze. A finding whose reason is already printed under its
    row (`shown`: the reasons the verdict table printed) is named by its code's meaning
    instead, so that the same sentence is not read twice."""
    total = int(kinds["count"].sum()) if len(kinds) else 0
    if not total:
        return
    out.print(f"lint: {total} finding(s)" + (f" of {len(kinds)} kinds" if len(kinds) < total
                                              else ""), style="bold", markup=False)
    for code, _, where, reason, fix, count in kinds.head(limit).iter_rows():
        more = f" (+{count - 1} more like it)" if count > 1 else ""
        said = any(reason in text for text in shown)
        body = (f"{CODES[code]} (why: under its row above)" if said else f"{reason} — {fix}")
        text = for_terminal(f"{code} {where}{more}: {body}")
        for k, line in enumerate(textwrap.wrap(text, max(20, out.width - 4),
                                               break_on_hyphens=False)):
            out.print(("  " if k == 0 else "    ") + line, markup=False, highlight=False)
    if len(kinds) > limit:
        out.print(f"  and {len(kinds) - limit} more kinds (roofwise lint for all)",
                  markup=False)
