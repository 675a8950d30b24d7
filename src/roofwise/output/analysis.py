"""`Analysis`: the judged records with their readings, all from one verdict frame.

`verdicts.analysis.Verdicts` holds the judged columns; this is the same value with what people
read of it: each row's reasons (the explanation engine, `explain.reason_columns`), the verdict
frame and its rows (what `--json` writes, so a row read in Python is the JSON line), and a
notebook view. The table, the HTML report, `--json` and the notebook view all read these.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import fields
from html import escape
from typing import TYPE_CHECKING, Any

import numpy as np

from roofwise.base import fmt
from roofwise.explain.reason_columns import reason_lists
from roofwise.output.frame import json_lines, verdict_frame
from roofwise.profiles.machine import Machine
from roofwise.verdicts import analysis as verdicts
from roofwise.verdicts.rules import NO_EFFICIENCY

if TYPE_CHECKING:
    import polars as pl

    from roofwise.records.read import RecordColumns

NOTEBOOK_ROWS = 20  # worst rows shown inline; `roofwise.report` writes them all


class Analysis(verdicts.Verdicts):
    """Verdicts per benchmark record, with their reasons, frame, rows and notebook view."""

    @classmethod
    def of(cls, judged: verdicts.Verdicts) -> Analysis:
        return cls(**{f.name: getattr(judged, f.name) for f in fields(judged)})

    def reasons(self, i: int) -> list[str]:
        """Why row `i` got its verdict, with the numbers that decided it."""
        return reason_lists(self.take(np.array([i])))[0]

    def row(self, i: int) -> dict[str, Any]:
        """Row `i` as `--json` writes it: the record's fields plus the judgement."""
        return next(self.take(np.array([i])).iter_rows())

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        """Every row as `--json` writes it."""
        for line in json_lines(self).to_list():
            yield json.loads(line)

    def to_polars(self) -> pl.DataFrame:
        """The verdicts as a polars frame: one row per record, the `--json` fields as columns
        (reasons a list of sentences; null where a reading is not one)."""
        return verdict_frame(self)

    def to_pandas(self) -> Any:
        """The verdicts as a pandas DataFrame (needs pandas installed)."""
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise ImportError("Analysis.to_pandas needs pandas: pip install pandas") from None
        return self.to_polars().to_pandas()

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in ("verdict", "op", "workload", "eff.", "time",
                                                 "SOL", "why"))
        order = self.worst_first()[:NOTEBOOK_ROWS]
        shown = self.take(order)
        reasons = reason_lists(shown)
        body = []
        workloads = shown.columns.field_values("workload", np.arange(len(shown)))
        for k in range(len(shown)):
            code = int(shown.judged.verdict[k])
            cells = (shown.verdict_name(k), str(shown.columns.op[k]), fmt.workload(workloads[k]),
                     "—" if code in NO_EFFICIENCY else fmt.percent(shown.judged.efficiency[k]),
                     fmt.seconds(float(shown.columns.time_s[k]), significant=3),
                     fmt.seconds(float(shown.priced.sol_time_s[k]), significant=3),
                     reasons[k][0] if reasons[k] else "")
            body.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>")
        more = (f"<p>… {len(self) - NOTEBOOK_ROWS} more rows: roofwise.report(analysis, "
                "'report.html') writes them all</p>" if len(self) > NOTEBOOK_ROWS else "")
        return (f"<p>{escape(repr(self))}</p><table><thead><tr>{head}</tr></thead>"
                f"<tbody>{''.join(body)}</tbody></table>{more}")


def analyze(columns: RecordColumns, machines: Mapping[str, Machine],
            machine: Machine | None = None, regime: str | None = None,
            mix: str | None = None) -> Analysis:
    """Judge every record; with `machine` all rows use it, else each row's `device` picks one."""
    return Analysis.of(verdicts.analyze(columns, machines, machine, regime, mix))
