"""Short `repr`s and `_repr_html_` for notebooks: a price, an analysis, a machine.

The dataclasses' generated reprs print every field (a machine's is several KB); these say what a
person looks for first, with units, and the HTML forms are small tables.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from roofwise.base import fmt

if TYPE_CHECKING:
    from roofwise.pricing.core import LedgerPrice
    from roofwise.profiles.machine import Machine
    from roofwise.verdicts.analysis import Analysis

ANALYSIS_HTML_ROWS = 20  # worst rows shown inline; `roofwise.report` writes them all


def price_repr(p: LedgerPrice) -> str:
    bound = (f"memory-bound on {p.machine.dram.name} {p.mix} mix" if p.bound == "memory"
             else f"compute-bound on {p.binding_unit}")
    return (f"<LedgerPrice {p.ledger.name} on {p.machine.name}: SOL {fmt.seconds(p.sol_time_s)}, "
            f"{bound}; {fmt.nbytes(p.ledger.bytes)}, {fmt.count(p.ledger.flops)}, "
            f"AI {fmt.intensity(p.intensity_flops_per_byte)} FLOP/B>")


def price_html(p: LedgerPrice) -> str:
    rows = [("op", p.ledger.name), ("machine", f"{p.machine.name} ({p.machine.display_name})"),
            ("bytes", fmt.nbytes(p.ledger.bytes)), ("FLOPs", fmt.count(p.ledger.flops)),
            ("AI", f"{fmt.intensity(p.intensity_flops_per_byte)} FLOP/B"),
            ("memory time", fmt.seconds(p.memory_time_s)),
            ("compute time (slowest pipe)", fmt.seconds(p.compute_time_s)),
            ("SOL", fmt.seconds(p.sol_time_s)),
            ("bound", f"{p.bound} ({p.machine.dram.name} {p.mix} mix)" if p.bound == "memory"
             else f"{p.bound} ({p.binding_unit})"),
            ("regime", p.regime or "envelope")]
    return _pairs(rows)


def machine_repr(m: Machine) -> str:
    calibrated = sum(u.calibrated for u in m.units.values())
    return (f"<Machine {m.name}: {m.display_name}, {m.dram.name} "
            f"{fmt.rate(m.dram.theoretical_bytes_per_s, 'B/s')}, {len(m.units)} units "
            f"({calibrated} calibrated)>")


def machine_html(m: Machine) -> str:
    rows = [(f"{level.name} (memory)",
             f"{fmt.rate(level.theoretical_bytes_per_s, 'B/s')} theoretical, "
             f"{fmt.rate(level.effective_bytes_per_s(), 'B/s')} effective")
            for level in m.memory.values()]
    rows += [(unit.key, f"{fmt.unit_rate(unit.theoretical_ops_per_s, unit.key)} theoretical, "
                        f"{fmt.unit_rate(unit.effective_ops_per_s(), unit.key)} effective"
                        f"{'' if unit.calibrated else ' (uncalibrated)'}")
             for unit in m.units.values()]
    return f"<b>{escape(m.display_name)}</b> ({escape(m.name)})" + _pairs(rows)


def analysis_repr(a: Analysis) -> str:
    counts = ", ".join(f"{n} {name}" for name, n in a.counts().items() if n)
    machines = ", ".join(a.machines) or "no profile"
    return f"<Analysis {len(a)} records on {machines}: {counts}>"


def analysis_html(a: Analysis) -> str:
    from roofwise.render.table import NO_EFFICIENCY, worst_first

    head = "".join(f"<th>{h}</th>" for h in ("verdict", "op", "workload", "eff.", "time",
                                             "SOL", "why"))
    body = []
    for i in worst_first(a)[:ANALYSIS_HTML_ROWS]:
        i = int(i)
        row = a.columns.rows[i] if a.columns.rows is not None else {}
        code = int(a.judged.verdict[i])
        reasons = a.reasons(i)
        cells = (a.verdict_name(i), str(a.columns.op[i]), fmt.workload(row.get("workload")),
                 "—" if code in NO_EFFICIENCY else fmt.percent(a.judged.efficiency[i]),
                 fmt.seconds(float(a.columns.time_s[i]), significant=3),
                 fmt.seconds(float(a.priced.sol_time_s[i]), significant=3),
                 reasons[0] if reasons else "")
        body.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>")
    more = (f"<p>… {len(a) - ANALYSIS_HTML_ROWS} more rows: roofwise.report(analysis, "
            "'report.html') writes them all</p>" if len(a) > ANALYSIS_HTML_ROWS else "")
    return (f"<p>{escape(analysis_repr(a))}</p><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>{more}")


def _pairs(rows: list[tuple[str, str]]) -> str:
    return "<table>" + "".join(f"<tr><th style='text-align:left'>{escape(k)}</th>"
                               f"<td>{escape(v)}</td></tr>" for k, v in rows) + "</table>"
