"""One self-contained HTML report: chart, sortable verdict table, lint, the profile and its sources.

Nothing is fetched when the file is opened: CSS and JS are inline, the chart is inline SVG.
Every piece of text from records or profiles goes through `html.escape`.
"""

from __future__ import annotations

import html
import importlib
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from ..analysis import Analysis
from ..machine import Machine
from ..recordio import atomic_writer
from . import fmt
from .chart import figure_svg, roofline_figure
from .table import intensity, seconds3, worst_first

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1d2125}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 8px}
.muted{color:#66707a} .chart svg{width:100%;max-width:1300px;height:auto}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border-bottom:1px solid #e3e6e9;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f6f8;position:sticky;top:0} th.sortable{cursor:pointer;user-select:none}
th.sortable:after{content:" \\2195";color:#aab} th.asc:after{content:" \\25B2"}
th.desc:after{content:" \\25BC"}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td:nth-child(11){min-width:340px}
td:nth-child(3){min-width:220px;max-width:320px;overflow-wrap:anywhere}
details pre{max-width:520px}
.v{font-weight:600;padding:1px 6px;border-radius:3px;white-space:nowrap}
.v-impossible{background:#d62728;color:#fff} .v-anomaly{background:#d61fd6;color:#fff}
.v-below{background:#f0a202;color:#1d2125} .v-at_ceiling{background:#2ca02c;color:#fff}
.v-latency_bound{background:#17a2b8;color:#fff} .v-blank{background:#ccd1d6;color:#333}
details pre{white-space:pre-wrap;font-size:12px;background:#f7f8fa;padding:8px;margin:4px 0}
.controls{margin:8px 0;display:flex;gap:12px;align-items:center}
input[type=search]{width:320px;padding:4px 6px} ul.reasons{margin:0;padding-left:18px}
"""

_JS = """
(function(){
  var table=document.getElementById('verdicts'), body=table.tBodies[0];
  var filter=document.getElementById('filter'), pick=document.getElementById('verdict-filter');
  var shown=document.getElementById('shown');
  function apply(){
    var text=filter.value.toLowerCase(), want=pick.value, n=0;
    Array.prototype.forEach.call(body.rows,function(r){
      var ok=(!want||r.dataset.verdict===want)&&
             (!text||r.textContent.toLowerCase().indexOf(text)>=0);
      r.style.display=ok?'':'none'; if(ok)n++;});
    shown.textContent=n;
  }
  filter.addEventListener('input',apply); pick.addEventListener('change',apply);
  Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,col){
    if(!th.classList.contains('sortable'))return;
    th.addEventListener('click',function(){
      var asc=!th.classList.contains('asc');
      Array.prototype.forEach.call(table.tHead.rows[0].cells,function(c){c.classList.remove('asc','desc');});
      th.classList.add(asc?'asc':'desc');
      var rows=Array.prototype.slice.call(body.rows);
      rows.sort(function(a,b){
        var x=a.cells[col].dataset.sort, y=b.cells[col].dataset.sort;
        var fx=parseFloat(x), fy=parseFloat(y), c;
        if(x===''&&y==='')c=0; else if(x==='')return 1; else if(y==='')return -1;
        else if(!isNaN(fx)&&!isNaN(fy))c=fx-fy; else c=x<y?-1:(x>y?1:0);
        return asc?c:-c;});
      rows.forEach(function(r){body.appendChild(r);});
    });
  });
  apply();
})();
"""

# (header, sortable) in table order
_HEADERS = ("#", "op", "workload", "machine", "verdict", "efficiency", "time", "SOL", "bound",
            "AI (FLOP/B)", "reasons", "details")


def report_html(analysis: Analysis, title: str = "roofwise report", source: str = "") -> str:
    """The whole report as one HTML string."""
    fig = roofline_figure([(Path(source).stem or "records", analysis)])
    counts = ", ".join(f"{n} {name}" for name, n in analysis.counts().items() if n)
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="muted">{_e(source)} — {len(analysis)} records: {_e(counts)}</p>',
        '<h2>Roofline</h2><div class="chart" id="chart">', figure_svg(fig), "</div>",
        _table(analysis), _lint(analysis), _profiles(analysis.machines.values()),
        f"<script>{_JS}</script></body></html>",
    ]
    return "\n".join(parts)


def write_report(analysis: Analysis, path: str | Path, title: str = "roofwise report",
                 source: str = "") -> None:
    text = report_html(analysis, title, source)
    with atomic_writer(path, "w") as handle:
        handle.write(text)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _table(analysis: Analysis) -> str:
    out = ['<h2>Verdicts</h2><div class="controls">',
           '<input type="search" id="filter" placeholder="filter rows (any text)">',
           '<select id="verdict-filter"><option value="">all verdicts</option>']
    out += [f'<option value="{_e(name)}">{_e(name)} ({n})</option>'
            for name, n in analysis.counts().items() if n]
    out += ['</select><span class="muted"><span id="shown"></span> rows shown; click a header '
            "to sort</span></div>", '<table id="verdicts"><thead><tr>']
    out += [f'<th class="{"" if h in ("details", "reasons") else "sortable"}">{_e(h)}</th>'
            for h in _HEADERS]
    out.append("</tr></thead><tbody>")
    for rank, i in enumerate(worst_first(analysis)):
        out.append(_row(analysis, int(i), rank))
    out.append("</tbody></table>")
    return "\n".join(out)


def _row(analysis: Analysis, i: int, rank: int) -> str:
    row = analysis.row(i)
    verdict = row["verdict"]
    efficiency = row["efficiency"]
    workload = row.get("workload")
    workload_text = "" if workload is None else (
        workload if isinstance(workload, str) else json.dumps(workload, separators=(",", ":")))
    show_eff = efficiency is not None and verdict not in ("latency_bound", "blank")
    ai = row["intensity_flops_per_byte"]
    cells = [
        (str(rank), str(rank + 1), "num"),
        (str(row["op"]), _e(row["op"]), ""),
        (workload_text, _e(workload_text), ""),
        (str(row["machine"] or ""), _e(row["machine"] or "—"), ""),
        (str(_SEVERITY_KEY.get(verdict, 9)), f'<span class="v v-{_e(verdict)}">{_e(verdict)}'
                                             "</span>", ""),
        (_num(efficiency if show_eff else None),
         fmt.percent(efficiency) if show_eff else "—", "num"),
        (_num(row["time_s"]), _e(seconds3(float(row["time_s"]))), "num"),
        (_num(row["sol_time_s"]), _e(seconds3(_float(row["sol_time_s"]))), "num"),
        (str(row["bound"] or ""), _e(_bound(row)), ""),
        (_num(ai), _e(intensity(_float(ai))), "num"),
    ]
    tds = [f'<td class="{cls}" data-sort="{_e(key)}">{shown}</td>' for key, shown, cls in cells]
    reasons = "".join(f"<li>{_e(r)}</li>" for r in row["reasons"])
    tds.append(f'<td data-sort=""><ul class="reasons">{reasons}</ul></td>')
    details = json.dumps(row, indent=2, default=str)
    tds.append(f'<td data-sort=""><details><summary>verdict JSON</summary><pre>{_e(details)}'
               "</pre></details></td>")
    return f'<tr data-verdict="{_e(verdict)}">{"".join(tds)}</tr>'


# verdict column sorts by how urgently a person should look (same order as the terminal)
_SEVERITY_KEY = {"impossible": 0, "anomaly": 1, "blank": 2, "below": 3, "latency_bound": 4,
                 "at_ceiling": 5}


def _bound(row: dict[str, Any]) -> str:
    if not row["bound"]:
        return ""
    return "memory" if row["bound"] == "memory" else f"compute ({row['binding_unit']})"


def _float(value: Any) -> float:
    return math.nan if value is None else float(value)


def _num(value: Any) -> str:
    return "" if value is None or not math.isfinite(float(value)) else repr(float(value))


def _lint(analysis: Analysis) -> str:
    """Lint findings when `roofwise.lint` is installed; says so plainly when it is not."""
    try:
        lint = importlib.import_module("roofwise.lint")
    except ImportError:
        lint = None
    linter = getattr(lint, "lint_analysis", None)
    if linter is None:
        return '<h2>Lint</h2><p class="muted" id="lint">lint unavailable</p>'
    findings = list(linter(analysis))
    if not findings:
        return '<h2>Lint</h2><p id="lint">no findings</p>'
    rows = [_finding_fields(f) for f in findings]
    keys = list(dict.fromkeys(k for r in rows for k in r))
    head = "".join(f"<th>{_e(k)}</th>" for k in keys)
    body = "".join("<tr>" + "".join(f"<td>{_e(r.get(k, ''))}</td>" for k in keys) + "</tr>"
                   for r in rows)
    return f'<h2>Lint</h2><table id="lint"><thead><tr>{head}</tr></thead><tbody>{body}</tbody>' \
           "</table>"


def _finding_fields(finding: Any) -> dict[str, Any]:
    """A finding of any shape (dataclass, mapping, text) as named fields."""
    if is_dataclass(finding) and not isinstance(finding, type):
        return {k: getattr(v, "value", v) for k, v in asdict(finding).items()}
    if isinstance(finding, dict):
        return dict(finding)
    return {"finding": str(finding)}


def _profiles(machines: Sequence[Machine] | Any) -> str:
    out = ["<h2>Machine profiles and their sources</h2>"]
    for m in machines:
        out.append(f"<h3>{_e(m.display_name)} ({_e(m.name)})</h3>"
                   f'<p class="muted">source: {_e(m.source or "—")}'
                   f'{" — loaded from " + _e(m.path) if m.path else ""}</p>')
        out.append('<table class="profile"><thead><tr><th>memory level</th><th>mix</th>'
                   "<th>theoretical</th><th>calibration</th><th>effective</th><th>source</th>"
                   "</tr></thead><tbody>")
        for level in m.memory.values():
            theory = level.theoretical_bytes_per_s
            mixes = dict(level.calibration_by_mix) or {"(uncalibrated)": None}
            for mix, frac in mixes.items():
                envelope = " (envelope)" if mix == level.envelope_mix else ""
                effective = theory * (frac if frac is not None else 1.0) if theory else None
                out.append(
                    f"<tr><td>{_e(level.name)}</td><td>{_e(mix + envelope)}</td>"
                    f"<td>{_e(fmt.rate(theory, 'B/s', 2) if theory else 'gap')}</td>"
                    f"<td>{_e('—' if frac is None else f'{frac:.4f}')}</td>"
                    f"<td>{_e(fmt.rate(effective, 'B/s', 2) if effective else '—')}</td>"
                    f"<td>{_e(level.source)}</td></tr>")
        out.append("</tbody></table>")
        out.append('<table class="profile"><thead><tr><th>unit</th><th>regime</th>'
                   "<th>theoretical</th><th>calibration</th><th>effective</th>"
                   "<th>balance</th><th>source</th></tr></thead><tbody>")
        for unit in m.units.values():
            theory = unit.theoretical_ops_per_s
            regimes = dict(unit.calibration_by_regime) or {"(uncalibrated)": None}
            for regime, frac in regimes.items():
                envelope = " (envelope)" if regime == unit.envelope_regime else ""
                effective = theory * (frac if frac is not None else 1.0) if theory else None
                balance = m.balance_flops_per_byte(unit.key,
                                                   regime if frac is not None else None)
                out.append(
                    f"<tr><td>{_e(unit.key)}</td><td>{_e(regime + envelope)}</td>"
                    f"<td>{_e(fmt.rate(theory, 'op/s') if theory else 'gap')}</td>"
                    f"<td>{_e('—' if frac is None else f'{frac:.4f}')}</td>"
                    f"<td>{_e(fmt.rate(effective, 'op/s') if effective else '—')}</td>"
                    f"<td>{_e(f'{balance:.3g} FLOP/B' if balance else '—')}</td>"
                    f"<td>{_e(unit.source)}</td></tr>")
        out.append("</tbody></table>")
        floor = m.latency_floor
        out.append(f"<p>Latency floor: SOL &lt; {_e(fmt.seconds(floor.sol_s))}, measured &lt; "
                   f"{_e(fmt.seconds(floor.measured_s))} ({_e(floor.source)})</p>")
        out += [f'<p class="muted">note: {_e(note)}</p>' for note in m.notes]
    return "\n".join(out)
