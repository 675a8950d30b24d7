"""One self-contained HTML report: chart, sortable verdict table, lint, the profile and its sources.

Nothing is fetched when the file is opened: CSS and JS are inline, the chart is inline SVG.
Every piece of text from records or profiles goes through `html.escape`. Each row's details
show its ledger where one is known (a `--reference` ledger or the operator library's, see
`row_ledgers`): the tensors with role, shape, dtype and read/write bytes, the work by unit and
class, the stages of a composed op, and where the record's numbers differ from it. Then its
price (bytes, FLOPs, memory and per-unit compute time, SOL) in words and numbers, its lint
findings, and the verdict JSON. A ledger shared by many rows is written once, in a
`<template>`, and copied into a row's details when they open: ten thousand rows of one op
cost one ledger, not ten thousand.

Layout: the page never scrolls sideways at 1280 px. Reasons (the most useful column) wrap, and
each row's details open full width in a row of their own below it. The table holds the worst
`DEFAULT_ROWS` rows (a million-row file reports in seconds); the summary, the verdict filter and
the chart count every row.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from roofwise.base import fmt, paths
from roofwise.base.errors import InputError
from roofwise.base.text import encodable
from roofwise.explain.reason_text import bound_label, efficiency_band_text, floor_line
from roofwise.ledgers.ledger import Ledger, Role
from roofwise.lint import Finding, check_stale_profiles, lint_rows
from roofwise.output.analysis import Analysis
from roofwise.profiles.machine import Machine
from roofwise.records.write import atomic_writer
from roofwise.render.chart import figure_svg, roofline_figure
from roofwise.render.row_ledgers import LedgerFinder, NoLedger, Reference, RowLedger
from roofwise.traces.analysis import TraceAnalysis, groups, summary_lines
from roofwise.verdicts.mismatch import mismatch_summary
from roofwise.verdicts.rules import NO_EFFICIENCY

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1d2125;
max-width:100%;overflow-wrap:anywhere} *{box-sizing:border-box}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 8px}
.muted{color:#66707a} .chart svg{width:100%;max-width:1300px;height:auto}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border-bottom:1px solid #e3e6e9;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f6f8;position:sticky;top:0} th.sortable{cursor:pointer;user-select:none}
th.sortable:after{content:" \\2195";color:#aab} th.asc:after{content:" \\25B2"}
th.desc:after{content:" \\25BC"}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap;
overflow-wrap:normal} th{overflow-wrap:normal}
#verdicts{table-layout:auto} #verdicts td{overflow-wrap:anywhere}
#verdicts th{overflow-wrap:normal}
#verdicts>tbody>tr.row>td:nth-child(11){min-width:14em;width:40%}
#verdicts>tbody>tr.row>td:nth-child(2){min-width:12em}
#verdicts>tbody>tr.row>td:nth-child(3){min-width:9em;max-width:16em}
#verdicts>tbody>tr.row>td:nth-child(4){white-space:nowrap}
#verdicts>tbody>tr.row>td:nth-child(9){min-width:10.5em}
#verdicts>tbody>tr.details-row>td{padding:0 8px 6px 32px;border-bottom:2px solid #e3e6e9}
#verdicts>tbody>tr.row>td{border-bottom:none}
details pre{max-width:100%;overflow-x:auto} .row-ledger,.price{max-width:100%;overflow-x:auto}
table.profile td:last-child{min-width:14em}
table.ledger{width:auto;font-size:12px;margin:4px 0} table.ledger th{position:static;
background:none;font-weight:600;white-space:nowrap} table.ledger td{white-space:nowrap}
tr.binding td{font-weight:600}
.v{font-weight:600;padding:1px 6px;border-radius:3px;white-space:nowrap}
.v-impossible{background:#d62728;color:#fff} .v-anomaly{background:#d61fd6;color:#fff}
.v-below{background:#f0a202;color:#1d2125} .v-at_ceiling{background:#2ca02c;color:#fff}
.v-latency_bound{background:#17a2b8;color:#fff} .v-blank{background:#ccd1d6;color:#333}
.v-cache_resident{background:#4c72b0;color:#fff} .nowrap{white-space:nowrap}
#groups td{overflow-wrap:anywhere} #groups td:nth-child(1){min-width:12em}
#groups td:nth-child(2){min-width:10em;max-width:22em} #groups td:nth-child(10){min-width:12em}
details pre{white-space:pre-wrap;font-size:12px;background:#f7f8fa;padding:8px;margin:4px 0}
.controls{margin:8px 0;display:flex;gap:12px;align-items:center}
input[type=search]{width:320px;padding:4px 6px} ul.reasons{margin:0;padding-left:18px}
.row-ledger table{width:auto;font-size:12px;margin:4px 0 8px} .row-ledger th{position:static}
.row-ledger p{margin:4px 0} table.ledger-tensors td:nth-child(n+5),
table.ledger-work td:nth-child(3),table.ledger-stages td:nth-child(n+3){text-align:right;
font-variant-numeric:tabular-nums;white-space:nowrap}
details h4{font-size:13px;margin:10px 0 2px} ul.differences{margin:2px 0;padding-left:18px;
color:#b0141b;font-weight:600} p.no-ledger{color:#66707a;font-style:italic}
"""

_JS = """
(function(){
  // one table: sort by a header click, filter by text and by verdict. A row may own the row
  // after it (its details); they show, hide and move together. Used by every table here.
  function table(t){
    var body=t.tBodies[0], filter=document.getElementById(t.dataset.filter),
        pick=document.getElementById(t.dataset.pick),
        shown=document.getElementById(t.dataset.shown);
    function rows(){return Array.prototype.filter.call(body.rows,function(r){
      return r.classList.contains('row');});}
    function partner(r){var d=r.nextElementSibling;
      return d&&d.classList.contains('details-row')?d:null;}
    function apply(){
      var text=filter.value.toLowerCase(), want=pick.value, n=0;
      rows().forEach(function(r){
        var ok=(!want||(' '+r.dataset.verdict+' ').indexOf(' '+want+' ')>=0)&&
               (!text||r.textContent.toLowerCase().indexOf(text)>=0), d=partner(r);
        r.style.display=ok?'':'none'; if(d)d.style.display=ok?'':'none'; if(ok)n++;});
      shown.textContent=n;
    }
    filter.addEventListener('input',apply); pick.addEventListener('change',apply);
    Array.prototype.forEach.call(t.tHead.rows[0].cells,function(th,col){
      if(!th.classList.contains('sortable'))return;
      th.addEventListener('click',function(){
        var asc=!th.classList.contains('asc');
        Array.prototype.forEach.call(t.tHead.rows[0].cells,function(c){
          c.classList.remove('asc','desc');});
        th.classList.add(asc?'asc':'desc');
        var sorted=rows();
        sorted.sort(function(a,b){
          var x=a.cells[col].dataset.sort, y=b.cells[col].dataset.sort;
          var fx=parseFloat(x), fy=parseFloat(y), c;
          if(x===''&&y==='')c=0; else if(x==='')return 1; else if(y==='')return -1;
          else if(!isNaN(fx)&&!isNaN(fy))c=fx-fy; else c=x<y?-1:(x>y?1:0);
          return asc?c:-c;});
        sorted.forEach(function(r){var d=partner(r); body.appendChild(r);
          if(d)body.appendChild(d);});
      });
    });
    apply();
  }
  Array.prototype.forEach.call(document.querySelectorAll('table.rw-table'),table);
  // a row's ledger lives once in a <template>; copy it in when its details first open
  document.body.addEventListener('toggle',function(e){
    var d=e.target; if(d.tagName!=='DETAILS'||!d.open)return;
    var slot=d.querySelector('[data-ledger]');
    if(slot&&!slot.hasChildNodes())
      slot.appendChild(document.getElementById(slot.dataset.ledger).content.cloneNode(true));
  },true);
})();
"""

# table order; every column but reasons sorts. Each row's details sit in a row of their own.
_HEADERS = ("#", "op", "workload", "machine", "verdict", "efficiency", "time", "SOL", "bound",
            "AI (FLOP/B)", "reasons")
_NUMERIC = frozenset({"#", "efficiency", "time", "SOL", "AI (FLOP/B)"})  # right, never wrap
DEFAULT_ROWS = 2000  # rows in the table, worst first; the summary counts every row


REPORT_SUFFIXES = (".html", ".htm")


def check_report_path(path: str | Path) -> None:
    """Refuse an output name that promises another format (`-o r.png` would hold HTML)."""
    if Path(path).suffix.lower() not in REPORT_SUFFIXES:
        raise InputError(str(path), "expected a report file ending in .html or .htm")
    paths.check_output(path)


def report_html(analysis: Analysis, title: str = "roofwise report", source: str = "",
                references: Sequence[Reference] = (), rows: int = DEFAULT_ROWS,
                before_chart: str = "") -> str:
    """The whole report as one HTML string; `references` are ledgers matched to rows by op.
    The table holds the `rows` worst rows (0: all); counts and the chart cover every row;
    `before_chart` is HTML of a section shown first (a trace's grouped view)."""
    fig = roofline_figure([(Path(source).stem or "records", analysis)])
    order = analysis.worst_first()
    shown = order if rows <= 0 else order[:rows]
    # lint reads only the rows the table holds: a million rows cost their counts, not their
    # sentences (the lint section says so when rows were left out)
    # the table's rows as their own analysis: walked in order, their records are built a block
    # at a time (walking a million rows worst first built a block per row)
    picked = analysis.take(shown)
    findings = lint_rows(picked, [r.ledger for r in references], path=source)
    templates: dict[int, tuple[str, Ledger]] = {}
    counts = ", ".join(f"{n:,} {name}" for name, n in analysis.counts().items() if n)
    mismatch = mismatch_summary(analysis)
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="muted" id="summary">{_e(source)} — {len(analysis):,} records: '
        f"{_e(counts)}</p>",
        f'<p class="warning" id="mismatch">{_e(mismatch)}</p>' if mismatch else "",
        before_chart,
        '<h2>Roofline</h2><div class="chart" id="chart">', figure_svg(fig), "</div>",
        _table(analysis, picked, LedgerFinder(references), findings, templates),
        *(f'<template id="{key}">{_ledger_view(ledger)}</template>'
          for key, ledger in templates.values()),
        _lint([*(f for row in findings for f in row), *check_stale_profiles(analysis)]),
        _profiles(analysis.machines.values()),
        f"<script>{_JS}</script></body></html>",
    ]
    return "\n".join(parts)


def write_report(analysis: Analysis, path: str | Path, title: str = "roofwise report",
                 source: str = "", references: Sequence[Reference] = (),
                 rows: int = DEFAULT_ROWS) -> None:
    """Write `report_html` atomically to `path` (.html or .htm)."""
    check_report_path(path)
    text = report_html(analysis, title, source, references, rows)
    with atomic_writer(path, "w") as handle:
        handle.write(encodable(text))  # a lone surrogate in a name (a JSON escape) as \udc80


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _table(analysis: Analysis, shown: Analysis, finder: LedgerFinder,
           findings: Sequence[Sequence[Finding]],
           templates: dict[int, tuple[str, Ledger]]) -> str:
    """The verdict table of `shown` (the rows of `analysis` it holds, worst first);
    `findings` are theirs, in order."""
    held = (f"the worst {len(shown):,} of {len(analysis):,} rows are in the table (--rows "
            "sets how many); " if len(shown) < len(analysis) else "")
    out = ["<h2>Verdicts</h2>",
           _table_head("verdicts", ("filter", "verdict-filter", "shown"), analysis.counts(),
                       held, _HEADERS, _NUMERIC, unsorted=("reasons",))]
    for rank, row in enumerate(shown.iter_rows()):  # one verdict frame for all of them
        out.append(_row(shown, rank, rank, row,
                        _row_ledger(finder.find(row), findings[rank], templates)))
    out.append("</tbody></table>")
    return "\n".join(out)


def _table_head(table_id: str, controls: tuple[str, str, str], counts: Mapping[str, int],
                held: str, headers: Sequence[str], numeric: frozenset[str],
                unsorted: Sequence[str] = ()) -> str:
    """A table's text and verdict filters and its header row, up to its open <tbody>: the
    one layout every sortable, filterable table of the report has (the page's script binds
    each `rw-table` to the controls its data-* attributes name)."""
    text_id, pick_id, shown_id = controls
    options = "".join(f'<option value="{_e(name)}">{_e(name)} ({n:,})</option>'
                      for name, n in counts.items() if n)
    def head(h: str) -> str:
        classes = [c for c, on in (("sortable", h not in unsorted), ("num", h in numeric)) if on]
        return f'<th class="{" ".join(classes)}">{_e(h)}</th>'

    heads = "".join(head(h) for h in headers)
    return (f'<div class="controls"><input type="search" id="{text_id}" '
            'placeholder="filter rows (any text)">'
            f'<select id="{pick_id}"><option value="">all verdicts</option>{options}</select>'
            f'<span class="muted">{_e(held)}<span id="{shown_id}"></span> rows shown; click a '
            f'header to sort</span></div><table id="{table_id}" class="rw-table" '
            f'data-filter="{text_id}" data-pick="{pick_id}" data-shown="{shown_id}"><thead><tr>'
            f"{heads}</tr></thead><tbody>")


def _badge(verdict: str) -> str:
    """A verdict as the report shows it everywhere: a coloured badge."""
    return f'<span class="v v-{_e(verdict)}">{_e(verdict)}</span>'


def _cell(sort_key: str, shown: str, numeric: bool = False) -> str:
    """One sortable cell: `sort_key` orders it (a number sorts numerically), `shown` is
    HTML already escaped."""
    cls = ' class="num"' if numeric else ""
    return f'<td{cls} data-sort="{_e(sort_key)}">{shown}</td>'


def _row(analysis: Analysis, i: int, rank: int, row: Mapping[str, Any], ledger: str) -> str:
    verdict = row["verdict"]
    efficiency = _shown_efficiency(analysis, i, row)
    workload_text = fmt.workload(row.get("workload"))
    ai = row["intensity_flops_per_byte"]
    cells = [
        (str(rank), str(rank + 1), "num"),
        (str(row["op"]), _e(row["op"]), ""),
        (workload_text, _e(workload_text), ""),
        (str(row["machine"] or ""), _e(row["machine"] or "—"), ""),
        (str(_SEVERITY_KEY.get(verdict, 9)), _badge(verdict), ""),
        (_num(efficiency), fmt.percent(efficiency), "num"),
        (_num(row["time_s"]), _e(_seconds(row["time_s"])), "num"),
        (_num(row["sol_time_s"]), _e(_seconds(row["sol_time_s"])), "num"),
        (str(row["bound"] or ""), _e(_bound(row)), ""),
        (_num(ai), _e(fmt.intensity(_float(ai))), "num"),
    ]
    tds = [_cell(key, shown, cls == "num") for key, shown, cls in cells]
    reasons = "".join(f"<li>{_e(r)}</li>" for r in row["reasons"])
    tds.append(f'<td data-sort=""><ul class="reasons">{reasons}</ul></td>')
    details = json.dumps(row, indent=2, default=str)
    below = (f'<tr class="details-row"><td colspan="{len(_HEADERS)}"><details>'
             f"<summary>ledger and price</summary>{ledger}"
             f'<h4>price</h4><div class="price">{_ledger(analysis, i, row, efficiency)}</div>'
             f"<pre>{_e(details)}</pre></details></td></tr>")
    return f'<tr class="row" data-verdict="{_e(verdict)}">{"".join(tds)}</tr>{below}'


def _shown_efficiency(analysis: Analysis, i: int, row: Mapping[str, Any]) -> float | None:
    """The efficiency a person may read: none for blank, latency-bound and impossible rows."""
    if int(analysis.judged.verdict[i]) in NO_EFFICIENCY or row["efficiency"] is None:
        return None
    return float(row["efficiency"])


def _row_ledger(found: RowLedger | NoLedger, findings: Sequence[Finding],
                templates: dict[int, tuple[str, Ledger]]) -> str:
    """The row's ledger section: where it came from, how the record differs, the lint findings
    on the row, and a slot the ledger's template fills when the details open."""
    lint = ""
    if findings:
        items = "".join(f"<li>{_e(f.code)} {_e(f.severity)}: {_e(f.reason)}</li>"
                        for f in findings)
        lint = f'<p>lint on this row:</p><ul class="reasons row-lint">{items}</ul>'
    if isinstance(found, NoLedger):
        return f'<h4>ledger</h4><p class="no-ledger">{_e(found.text)}</p>{lint}'
    key, _ = templates.setdefault(id(found.ledger), (f"ledger-{len(templates)}", found.ledger))
    said = [f"from the {found.source}"]
    if found.defaults:
        said.append(f"defaults for what the workload leaves out: {', '.join(found.defaults)}")
    if found.ignored:
        said.append(f"workload text ignored (not parameters): {', '.join(found.ignored)}")
    differs = ""
    if found.differences:
        items = "".join(f"<li>{_e(d)}</li>" for d in found.differences)
        differs = (f"<p>the record disagrees with this ledger:</p>"
                   f'<ul class="differences">{items}</ul>')
    return (f'<h4>ledger</h4><div class="row-ledger"><p class="muted">{_e("; ".join(said))}'
            f'</p>{differs}{lint}<div data-ledger="{key}"></div></div>')


def _ledger_view(ledger: Ledger) -> str:
    """One ledger in full: totals, tensors, work by unit and class, and its stages."""
    calls = f"{ledger.calls} calls" if ledger.calls != 1 else "one call"
    head = (f"<p><b>{_e(ledger.name)}</b>, {calls}, roof {_e(ledger.roof)}: moves "
            f"{_e(fmt.nbytes(ledger.bytes))} = {_e(fmt.exact(ledger.bytes))} B (read "
            f"{_e(fmt.exact(ledger.read_bytes))} B, of them lookups "
            f"{_e(fmt.exact(ledger.lookup_bytes))} B; write {_e(fmt.exact(ledger.write_bytes))}"
            f" B); computes {_e(fmt.count(ledger.flops, digits=3))} = "
            f"{_e(fmt.exact(ledger.flops))}; {_e(fmt.intensity(ledger.intensity_flops_per_byte))}"
            " FLOP/B</p>")
    tensors = [[t.name, _role(t.role, t.uses, t.bytes_per_use), "x".join(map(str, t.shape)),
                t.dtype, fmt.exact(t.read_bytes), fmt.exact(t.write_bytes)]
               for t in ledger.tensors]
    tensors.append(["total", "", "", "", fmt.exact(ledger.read_bytes),
                    fmt.exact(ledger.write_bytes)])
    work = [[w.unit, w.op_class, fmt.exact(w.ops), w.label] for w in ledger.work]
    by_unit = "; ".join(f"{k} {fmt.count(v, fmt.op_name(k), 3)} ({fmt.exact(v)})"
                        for k, v in ledger.ops_by_unit.items())
    by_class = "; ".join(f"{k} {fmt.exact(v)}" for k, v in ledger.ops_by_class.items())
    parts = [head,
             _html_table(("tensor", "role", "shape", "dtype", "read B", "write B"), tensors,
                         'class="ledger-tensors"'),
             _html_table(("unit", "class", "ops", "label"), work, 'class="ledger-work"'),
             f"<p>by unit: {_e(by_unit or '—')}</p><p>by class: {_e(by_class or '—')}</p>"]
    if ledger.stages:
        parts.append(_stages(ledger))
    parts += [f'<p class="muted">note: {_e(note)}</p>' for note in ledger.notes]
    return "".join(parts)


def _stages(ledger: Ledger) -> str:
    """Each stage's own bytes and FLOPs, and what composing them saved (or paid)."""
    rows = [[s.name, s.roof, fmt.exact(s.read_bytes), fmt.exact(s.write_bytes),
             fmt.exact(s.bytes), fmt.exact(s.flops)] for s in ledger.stages]
    alone = sum(s.bytes for s in ledger.stages)
    rows.append(["stages alone", "", "", "", fmt.exact(alone), ""])
    rows.append([f"{ledger.name} as composed", ledger.roof, fmt.exact(ledger.read_bytes),
                 fmt.exact(ledger.write_bytes), fmt.exact(ledger.bytes), fmt.exact(ledger.flops)])
    names = {t.name for t in ledger.tensors}
    dropped = list(dict.fromkeys(t.name for s in ledger.stages for t in s.tensors
                                 if t.name not in names and f"{s.name}/{t.name}" not in names))
    saved = ""
    if alone > ledger.bytes:
        between = f" ({', '.join(dropped)}: written by one stage, read back by the next)"
        saved = (f"<p>{_e(fmt.exact(alone - ledger.bytes))} B fewer than the stages as "
                 f"separate calls{_e(between) if dropped else ''}</p>")
    return (_html_table(("stage", "roof", "read B", "write B", "bytes", "FLOPs"), rows,
                        'class="ledger-stages"') + saved)


def _role(role: Role, uses: int, bytes_per_use: int) -> str:
    if uses:
        return f"{role.value}, {uses} uses x {bytes_per_use:,} B"
    return str(role.value)


def _ledger(analysis: Analysis, i: int, row: Mapping[str, Any],
            efficiency: float | None) -> str:
    """One row's ledger and price in words: what it moves and computes, what each costs."""
    priced = analysis.priced
    lines: list[tuple[str, str]] = []
    moved = f"{fmt.nbytes(_float(row['bytes']))} ({fmt.exact(_float(row['bytes']))} B)"
    if row.get("read_bytes") is not None and row.get("write_bytes") is not None:
        moved += (f": read {fmt.nbytes(_float(row['read_bytes']))}, "
                  f"write {fmt.nbytes(_float(row['write_bytes']))}")
    lines.append(("bytes", moved))
    flops = f"{fmt.count(_float(row['flops']), digits=3)} ({fmt.exact(_float(row['flops']))})"
    by_unit = row.get("flops_by_unit")
    if isinstance(by_unit, Mapping) and by_unit:
        flops += ": " + ", ".join(f"{k} {fmt.count(_float(v), fmt.op_name(k), 3)}"
                                  for k, v in by_unit.items())
    lines.append(("FLOPs", flops))
    lines.append(("intensity", f"{fmt.intensity(_float(row['intensity_flops_per_byte']))} FLOP/B"))
    bandwidth = float(priced.bandwidth_bytes_per_s[i])
    memory = _seconds(row["memory_time_s"])
    if row["memory_time_s"] is not None and math.isfinite(bandwidth):
        memory += f" at {fmt.rate(bandwidth, 'B/s', 2)} ({row['mix'] or 'theoretical'} mix)"
    lines.append(("memory time", memory))
    binding = str(priced.binding_unit[i] or "")
    units = [(key, float(ops[i]), float(priced.unit_time_s[key][i]))
             for key, ops in priced.unit_ops.items() if key in priced.unit_time_s
             and float(ops[i]) > 0]
    for key, ops, time_s in units:
        mark = " (binding)" if key == binding and row["compute_time_s"] is not None else ""
        name = fmt.op_name(key)
        with_rate = (f" ({fmt.count(ops, name, 3)} at {fmt.rate(ops / time_s, name + '/s')})"
                     if time_s > 0 and math.isfinite(time_s) else "")
        lines.append((f"compute time, {key}{mark}", f"{_seconds(time_s)}{with_rate}"))
    if len(units) > 1:
        lines.append(("compute time, pipes in series", _seconds(row["compute_serial_time_s"])))
    band = row.get("efficiency_band")
    if band and efficiency is not None and band[1] is not None:
        lines.append(("efficiency band", f"{efficiency_band_text(efficiency, band[1])} "
                      f"(overlapped pipes to serial sum {_seconds(row['serial_sol_time_s'])})"))
    lines.append(("SOL", f"{_seconds(row['sol_time_s'])} = max(memory, compute)"))
    lines.append(("bound", _bound(row) or "—"))
    lines.append(("mix, regime", f"{row['mix'] or '—'}, {row['regime'] or 'envelope'}"))
    lines.append(("measured", _seconds(row["time_s"])))
    lines.append(("efficiency", fmt.percent(efficiency) if efficiency is not None
                  else f"— ({row['verdict']}: not a reading; see the reasons)"))
    net = row.get("efficiency_net_of_floor")
    if net is not None:
        lines.append(("efficiency net of the floor", f"{fmt.percent(net)} (SOL over time minus "
                      f"the {row['timing_method']} floor {_seconds(row['floor_s'])})"))
    binding_row = ' class="binding"'
    body = "".join(f'<tr{binding_row if "(binding)" in k else ""}><th>{_e(k)}</th>'
                   f"<td>{_e(v)}</td></tr>" for k, v in lines)
    reasons = "".join(f"<li>{_e(r)}</li>" for r in row["reasons"])
    return (f'<table class="ledger">{body}</table>'
            f'<ul class="reasons">{reasons}</ul>')


# verdict column sorts by how urgently a person should look (same order as the terminal)
_SEVERITY_KEY = {"impossible": 0, "anomaly": 1, "blank": 2, "below": 3, "latency_bound": 4,
                 "cache_resident": 4, "at_ceiling": 5}


def _bound(row: Mapping[str, Any]) -> str:
    """`memory` or `compute (unit)`, naming every pipe near the binding one when they matter."""
    if not row["bound"]:
        return ""
    pipes = [(p["unit"], p["time_s"]) for p in row.get("pipes") or []]
    label = bound_label(row["bound"] == "memory", pipes, str(row["binding_unit"]))
    return label if row["bound"] == "memory" else f"compute ({label})"


def _seconds(value: Any) -> str:
    return fmt.seconds(_float(value), significant=3)


def _float(value: Any) -> float:
    return math.nan if value is None else float(value)


def _num(value: Any) -> str:
    return "" if value is None or not math.isfinite(float(value)) else repr(float(value))


def _lint(findings: list[Finding]) -> str:
    """The misuse checks' findings over the analysed rows, errors first."""
    if not findings:
        return '<h2>Lint</h2><p id="lint">no findings</p>'
    ordered = sorted(findings, key=lambda f: f.severity != "error")
    rows = ([f.code, f.severity, f.where, f.reason, f.fix] for f in ordered)
    return "<h2>Lint</h2>" + _html_table(("code", "severity", "where", "reason", "fix"), rows,
                                         'id="lint"')


def _html_table(headers: Iterable[str], rows: Iterable[Iterable[str]], attrs: str) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table {attrs}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _ceiling_rows(name: str, theory: float | None, fractions: Mapping[str, float],
                  envelope: str | None, unit: str, digits: int, source: str,
                  balance: Callable[[str | None], float | None] | None = None
                  ) -> Iterator[list[str]]:
    """One row per measured mix or regime of a memory level or unit: the same shape for both."""
    measured: dict[str, float | None] = dict(fractions) or {"(uncalibrated)": None}
    for name_of, frac in measured.items():
        effective = theory * (1.0 if frac is None else frac) if theory else None
        cells = [name, name_of + (" (envelope)" if name_of == envelope else ""),
                 fmt.rate(theory, unit, digits) if theory else "gap",
                 "—" if frac is None else f"{frac:.4f}",
                 fmt.rate(effective, unit, digits) if effective else "—"]
        if balance is not None:
            ridge = balance(name_of if frac is not None else None)
            cells.append(f"{ridge:.3g} FLOP/B" if ridge else "—")
        yield [*cells, source]


def _balance(machine: Machine, key: str, regime: str | None) -> float | None:
    return machine.balance_flops_per_byte(key, regime)


def _where(machine: Machine) -> str:
    """Where the profile came from, never as a local absolute path: a built-in by name, a
    file by its name (a path on one machine means nothing on another, and exposes it)."""
    if not machine.path:
        return "built in to the code"
    path = Path(machine.path)
    if path.parent.name == "machines" and path.parent.parent.name == "profiles":
        return f"built-in profile {machine.name}"
    return f"loaded from {path.name}"


def _profiles(machines: Iterable[Machine]) -> str:
    out = ["<h2>Machine profiles and their sources</h2>"]
    common = ("theoretical", "calibration", "effective")
    for m in machines:
        out.append(f"<h3>{_e(m.display_name)} ({_e(m.name)})</h3>"
                   f'<p class="muted">source: {_e(m.source or "—")} — {_e(_where(m))}</p>')
        memory = (row for level in m.memory.values() for row in _ceiling_rows(
            level.name, level.theoretical_bytes_per_s, level.calibration_by_mix,
            level.envelope_mix, "B/s", 2, level.source))
        out.append(_html_table(("memory level", "mix", *common, "source"), memory,
                               'class="profile"'))
        units = (row for unit in m.units.values() for row in _ceiling_rows(
            unit.key, unit.theoretical_ops_per_s, unit.calibration_by_regime,
            unit.envelope_regime, fmt.op_name(unit.key) + "/s", 1, unit.source,
            partial(_balance, m, unit.key)))
        out.append(_html_table(("unit", "regime", *common, "balance", "source"), units,
                               'class="profile"'))
        lines = (floor_line(t, f.per_call_s, f.per_kernel_s, f.assumed, f.source)
                 for t, f in m.latency_floors.by_timing.items())
        out += [f"<p>Latency floor, {_e(line)}</p>" for line in lines]
        out += [f'<p class="muted">note: {_e(note)}</p>' for note in m.notes]
    return "\n".join(out)


def trace_report_html(result: TraceAnalysis, title: str, source: str,
                      references: Sequence[Reference] = ()) -> str:
    """The records report of a trace's priced ops, its grouped view and summary first."""
    analysis = result.analysis()
    if analysis is None:  # no op priced (a trace without shapes): its time is still worth a
        return "\n".join([  # page, the grouped view with every group's reason
            "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
            f"<h1>{_e(title)}</h1>",
            f'<p class="muted" id="summary">{_e(source)} — no op could be priced, so no '
            "chart and no verdicts; where the time went, and why each group is blank:</p>",
            trace_groups_html(result), f"<script>{_JS}</script></body></html>"])
    return report_html(analysis, title, source, references,
                       before_chart=trace_groups_html(result))


_GROUP_HEADERS = ("op", "shapes", "n", "time", "SOL", "lost", "share", "eff.", "verdicts",
                  "note")
_GROUP_NUMERIC = frozenset({"n", "time", "SOL", "lost", "share", "eff."})


def trace_groups_html(result: TraceAnalysis, limit: int = 200) -> str:
    """The grouped view as an HTML section, for `roofwise report` on a trace: the records
    table's badges, filters and sorting (`_table_head`, `_badge`, `_cell`), one row a group."""
    shown = groups(result)[:limit]
    counts: dict[str, int] = {}
    for g in shown:
        for name, n in g.verdicts.items():
            counts[name] = counts.get(name, 0) + n
    held = (f"the {len(shown):,} groups losing most time are in the table; "
            if len(shown) < len(groups(result)) else "")
    rows = []
    for g in shown:
        ordered = sorted(g.verdicts.items(), key=lambda kv: (_SEVERITY_KEY.get(kv[0], 9),
                                                              -kv[1]))
        badges = " ".join(f'<span class="nowrap">{_badge(name)}&nbsp;{n:,}</span>'
                          for name, n in ordered)
        worst = ordered[0][0] if ordered else ""
        cells = [_cell(g.op, _e(g.op)), _cell(g.shapes, _e(g.shapes)),
                 _cell(str(g.count), f"{g.count:,}", True),
                 _cell(_num(g.time_s), _e(fmt.seconds(g.time_s)), True),
                 _cell(_num(g.sol_time_s), _e(fmt.seconds(g.sol_time_s)), True),
                 _cell(_num(g.time_lost_s), _e(fmt.seconds(g.time_lost_s)), True),
                 _cell(_num(g.share), _e(fmt.percent(g.share)), True),
                 _cell(_num(g.efficiency), _e(fmt.percent(g.efficiency)), True),
                 _cell(str(_SEVERITY_KEY.get(worst, 9)), badges),
                 _cell(g.reason, _e(g.reason))]
        rows.append(f'<tr class="row" data-verdict="{_e(" ".join(g.verdicts))}">'
                    f'{"".join(cells)}</tr>')
    lines = "".join(f"<p>{_e(line.strip())}</p>" for line in summary_lines(result))
    return ("<h2>Trace: ops by shape, most time lost first</h2>" + lines
            + _table_head("groups", ("group-filter", "group-verdict-filter", "group-shown"),
                          counts, held, _GROUP_HEADERS, _GROUP_NUMERIC)
            + "".join(rows) + "</tbody></table>")
