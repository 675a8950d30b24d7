"""The HTML report in a real headless browser (Debian chromium via playwright)."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

import pytest

from roofwise.cli import main
from roofwise.ledgers.files import load_ledger
from roofwise.output.analysis import analyze
from roofwise.profiles.load import builtin_machines
from roofwise.records.read import read_records
from roofwise.render.html import report_html, write_report
from roofwise.render.row_ledgers import NO_LEDGER, Reference

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "records.jsonl"
FUSED = EXAMPLES.with_name("qk_norm_rope_quant.yaml")
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]


def test_report_is_self_contained_and_escaped(example_analysis):
    text = report_html(example_analysis, title="<b>x</b>", source="ex.jsonl")
    assert "&lt;b&gt;x&lt;/b&gt;" in text and "<b>x</b>" not in text
    # nothing to fetch: no external scripts, styles, images or fonts (SVG namespaces are names)
    for fetch in ("<link", "src=", 'href="http', "url(http", "@import"):
        assert fetch not in text
    assert text.count('<tr class="row" data-verdict="') == len(example_analysis)
    assert text.count("<details>") == len(example_analysis)
    # the profile and its sources: every hbm mix and every unit regime of the h200
    for needle in ("copy", "triad", "read (envelope)", "write", "tensor_core.fp8",
                   "burst (envelope)", "TileOPs h200.yaml (cuBLAS)", "sfu.fp32"):
        assert needle in text


TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "hta_a100_80gb_rank0.json.gz"
# every numeric cell and header of a table, with the lines its text takes in the browser
_LINES_JS = """(id) => [...document.querySelectorAll(
    '#' + id + ' td.num, #' + id + ' th.num')].filter(e => e.offsetParent !== null).map(e => {
  const range = document.createRange(); range.selectNodeContents(e);
  const tops = new Set([...range.getClientRects()].filter(r => r.width > 0)
                        .map(r => Math.round(r.top)));
  return [e.innerText, tops.size]; })"""


def _wrapped_numbers(page, table_id: str) -> list:
    """The numeric cells and headers of `table_id` whose text takes more than one line."""
    cells = page.evaluate(_LINES_JS, table_id)
    assert cells, f"no numeric cell in #{table_id}"
    return [(text, lines) for text, lines in cells if lines > 1]


def _browser():
    """playwright's sync API with Debian chromium, or a skip (a failure under .ci/run)."""
    required = bool(os.environ.get("ROOFWISE_REQUIRE_BROWSER"))
    if not os.path.exists(CHROMIUM):
        if required:
            pytest.fail(f"Debian chromium not installed at {CHROMIUM}")
        pytest.skip(f"Debian chromium not installed at {CHROMIUM}")
    if required:
        from playwright import sync_api
        return sync_api
    return pytest.importorskip("playwright.sync_api",
                               reason="the playwright python package is not installed")


def test_report_in_headless_chromium(example_analysis, tmp_path):
    sync_api = _browser()  # .ci/run sets ROOFWISE_REQUIRE_BROWSER: a missing one fails
    path = tmp_path / "report.html"
    write_report(example_analysis, path, source="examples/records.jsonl",
                 references=[Reference(load_ledger(FUSED), "examples/qk_norm_rope_quant.yaml")])
    n = len(example_analysis)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.route("**/*", lambda route: route.abort()
                       if not route.request.url.startswith("file://") else route.continue_())
            page.goto(path.as_uri())
            def overflow() -> int:  # pixels the page would scroll sideways
                return int(page.evaluate("document.documentElement.scrollWidth - "
                                         "document.documentElement.clientWidth"))

            assert overflow() == 0  # at 1280 px the table fits: the reasons wrap
            assert _wrapped_numbers(page, "verdicts") == []
            reasons = page.locator("#verdicts > tbody > tr.row > td:nth-child(11)").first
            cell = reasons.bounding_box()
            assert cell is not None and cell["x"] + cell["width"] <= 1280
            assert cell["width"] >= 14 * 13  # the reasons keep at least 14em of 13 px
            # names and headers never break inside a word: an op name, a profile name and
            # "compute (tensor_core.bf16)" wrap only at spaces (or not at all)
            one_line = page.evaluate("""() => {
                const words = [];
                for (const sel of ['td:nth-child(2)', 'td:nth-child(4)', 'td:nth-child(9)']) {
                  const cells = '#verdicts > tbody > tr.row > ' + sel;
                  for (const td of document.querySelectorAll(cells)) {
                    const range = document.createRange();
                    range.selectNodeContents(td);
                    const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
                    words.push([td.innerText, lines.size, td.innerText.split(/\\s+/).length]);
                  }
                }
                return words; }""")
            assert one_line and all(lines <= words for _, lines, words in one_line), one_line
            assert all(t.strip() != "" for t, _, _ in one_line[:3])
            box = page.locator("#chart svg").bounding_box()
            assert box is not None and box["width"] > 300 and box["height"] > 200
            rows = page.locator("#verdicts > tbody > tr.row")
            assert rows.count() == n

            def efficiencies() -> list[str]:
                cells = page.locator("#verdicts > tbody > tr.row > td:nth-child(6)")
                return cells.all_inner_texts()

            before = efficiencies()
            page.locator("#verdicts > thead th", has_text="efficiency").click()
            after = efficiencies()
            numbers = [float(x.rstrip("%")) for x in after if x != "—"]
            assert numbers == sorted(numbers) and len(numbers) == 4
            # impossible, cache-resident, latency-bound and blank rows show no efficiency,
            # and sort last
            assert after != before and after[-4:] == ["—"] * 4
            page.locator("#verdicts > thead th", has_text="efficiency").click()
            desc = [float(x.rstrip("%")) for x in efficiencies() if x != "—"]
            assert desc == sorted(desc, reverse=True)

            page.fill("#filter", "gemm")
            assert page.locator("#verdicts > tbody > tr.row:visible").count() == 2
            page.fill("#filter", "")
            page.select_option("#verdict-filter", "impossible")
            assert page.locator("#verdicts > tbody > tr.row:visible").count() == 1
            page.select_option("#verdict-filter", "")
            assert page.locator("#verdicts > tbody > tr.row:visible").count() == n

            first = page.locator("#verdicts > tbody > tr details").first
            assert not first.locator("table.ledger").is_visible()
            first.locator("summary").click()
            assert first.locator("table.ledger").is_visible()
            assert "SOL" in first.locator("table.ledger").inner_text()
            assert '"verdict":' in first.locator("pre").inner_text()
            # the payload-only qk record: its reference ledger, copied in from its template
            # only when the details open, and where the record falls short of it
            split = page.locator("#verdicts > tbody > tr.row", has_text="two-kernel split").locator(
                "xpath=following-sibling::tr[1]")
            assert split.locator("table.ledger-tensors").count() == 0  # not opened, not copied
            payload = page.locator("#verdicts > tbody > tr.row", has_text="payload-only").locator(
                "xpath=following-sibling::tr[1]")
            payload.locator("summary").click()
            tensors = payload.locator("table.ledger-tensors")
            tensors.wait_for(state="visible", timeout=5000)  # the toggle event is queued
            cells = tensors.locator("tbody tr").first.locator("td").all_inner_texts()
            assert cells == ["q", "input", "4096x32x128", "bf16", "33,554,432", "0"]
            assert "moves 67.76 MB = 67,764,736 B" in payload.locator(".row-ledger").inner_text()
            assert payload.locator("ul.differences").inner_text() == (
                "bytes: the record counts 63,569,920 B, this ledger 67,764,736 B "
                "(the record 4,194,816 B fewer)")
            assert payload.locator("table.ledger-stages tbody tr").count() == 5
            assert "M6 error" in payload.locator("ul.row-lint").inner_text()
            gemm = page.locator("#verdicts > tbody > tr.row", has_text="double-counted").locator(
                "xpath=following-sibling::tr[1]")
            gemm.locator("summary").click()
            assert gemm.locator("p.no-ledger").inner_text() == NO_LEDGER
            # opened details sit full width below their row, and still nothing overflows
            opened = payload.locator("details").bounding_box()
            table = page.locator("#verdicts").bounding_box()
            assert opened is not None and table is not None
            assert opened["width"] > 0.8 * table["width"]
            assert overflow() == 0
            payload.scroll_into_view_if_needed()
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "report-1280.png"), full_page=True)
        finally:
            browser.close()
    assert (ARTIFACTS / "report-1280.png").stat().st_size > 10_000


def test_trace_report_in_headless_chromium(tmp_path):
    """The trace page at 1280 px: no number wraps ("9 / 6", "2.680 / ms" were), the grouped
    table has the records table's badges, filters and sorting, and so does its verdict table."""
    page_path = tmp_path / "trace.html"
    assert main(["report", str(TRACE), "--rows", "150", "-o", str(page_path)]) == 0
    text = page_path.read_text()
    assert text.count("function table(t)") == 1  # one table script for both tables
    # both tables are `rw-table`s: numeric headers marked (n, time, SOL, lost, share, eff.
    # in the groups; #, efficiency, time, SOL, AI in the records), verdicts as badges
    assert '<table id="groups" class="rw-table"' in text
    assert '<table id="verdicts" class="rw-table"' in text
    assert text.count('<th class="sortable num">') == 6 + 5
    groups_html = text[text.index('<table id="groups"'):text.index("<h2>Roofline</h2>")]
    assert groups_html.count('class="v v-') >= groups_html.count('<tr class="row"') > 10
    sync_api = _browser()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.route("**/*", lambda route: route.abort()
                       if not route.request.url.startswith("file://") else route.continue_())
            page.goto(page_path.as_uri())
            assert int(page.evaluate("document.documentElement.scrollWidth - "
                                     "document.documentElement.clientWidth")) == 0
            assert _wrapped_numbers(page, "groups") == []
            assert _wrapped_numbers(page, "verdicts") == []
            groups = page.locator("#groups > tbody > tr.row")
            n = groups.count()
            assert n > 10
            assert page.locator("#group-shown").inner_text() == str(n)
            # every group shows its verdicts as badges, worst first
            assert groups.first.locator("span.v").count() >= 1
            # sort by time: ascending, then descending (data-sort holds the seconds)
            def times() -> list[float]:
                keys = page.eval_on_selector_all(
                    "#groups > tbody > tr.row > td:nth-child(4)",
                    "tds => tds.map(td => td.dataset.sort)")
                return [float(k) for k in keys]

            page.locator("#groups > thead th", has_text="time").first.click()
            assert times() == sorted(times())
            page.locator("#groups > thead th", has_text="time").first.click()
            assert times() == sorted(times(), reverse=True)
            # filter by text: only the groups of aten::addmm; by verdict: groups holding it
            page.fill("#group-filter", "aten::addmm")
            visible = page.locator("#groups > tbody > tr.row:visible")
            shown = visible.count()
            assert 0 < shown < n
            assert all("aten::addmm" in t for t in visible.locator("td:nth-child(1)")
                       .all_inner_texts())
            assert page.locator("#group-shown").inner_text() == str(shown)
            page.fill("#group-filter", "")
            verdicts = page.eval_on_selector_all(
                "#groups > tbody > tr.row", "rs => rs.map(r => r.dataset.verdict.split(' '))")
            want = verdicts[-1][0]
            page.select_option("#group-verdict-filter", want)
            assert visible.count() == sum(want in v for v in verdicts)
            page.select_option("#group-verdict-filter", "")
            assert visible.count() == n
            # the verdict table on the same page still filters on its own controls
            held = page.eval_on_selector_all("#verdicts > tbody > tr.row",
                                             "rs => rs.map(r => r.dataset.verdict)")
            page.select_option("#verdict-filter", held[-1])
            assert page.locator("#verdicts > tbody > tr.row:visible").count() == (
                held.count(held[-1]))
            assert visible.count() == n  # the groups table is not touched
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "trace-report-1280.png"), full_page=False)
        finally:
            browser.close()


def test_report_cli_shows_reference_ledgers_on_demand(tmp_path):
    out = tmp_path / "r.html"
    assert main(["report", str(EXAMPLES), "--reference", str(FUSED), "-o", str(out)]) == 0
    text = out.read_text()
    # one ledger per distinct ledger, not per row: the reference (four qk rows) and the
    # library's softmax; rows of no known op say so
    templates = re.findall(r'<template id="(ledger-\d+)">(.*?)</template>', text, re.S)
    assert [key for key, _ in templates] == ["ledger-0", "ledger-1"]
    # numbered as the worst-first table first shows them: the blank softmax row comes before
    # the first qk row (cache_resident)
    fused = _text(templates[1][1])
    assert "|softmax|" in _text(templates[0][1])
    q_b = 4096 * 32 * 128 * 2  # bf16
    assert q_b == 33_554_432
    for tensor in (f"|q|input|4096x32x128|bf16|{q_b:,}|0|", "|k|input|4096x8x128|bf16|8,388,608|0|",
                   "|cos|lookup|4096x128|fp32|2,097,152|0|",
                   "|q_fp8|output|4096x32x128|fp8_e4m3|0|16,777,216|",
                   "|q_scale|output|4096x32|fp32|0|524,288|",
                   "|total|46,137,856|21,626,880|"):
        assert tensor in fused
    assert "moves 67.76 MB = 67,764,736 B (read 46,137,856 B, of them lookups 4,194,816 B; " \
           "write 21,626,880 B)" in fused
    assert "|sfu.fp32|transcendental|163,840|qk_norm: rsqrt, 1/row|" in fused
    assert "by unit: cuda_core.fp32 189.071 MFLOP (189,071,360); sfu.fp32 163.840 kop (163,840)" \
        in fused
    # per stage: qk_norm reads q, k and the weights (41,943,552 B), writes q/k_normed
    assert "|qk_norm|cuda_core.fp32|41,943,552|41,943,040|83,886,592|63,078,400|" in fused
    assert "|qk_norm_rope_quant as composed|cuda_core.fp32|46,137,856|21,626,880|67,764,736|" \
           "189,235,200|" in fused
    # four intermediates of 33,554,432 + 8,388,608 B each written once and read once
    assert f"{4 * (q_b + 8_388_608):,} B fewer than the stages as separate calls (q_normed, " \
           "k_normed, q_roped, k_roped" in fused
    rows = _rows(text)
    qk = [r for found in rows.values() for r in found if "qk_norm_rope_quant" in r]
    assert len(qk) == 4 and all('data-ledger="ledger-1"' in r for r in qk)
    assert all("from the reference " in r and "qk_norm_rope_quant.yaml" in r for r in qk)
    split = next(r for r in qk if "151,650,816" in r)
    details = _text(split.split("<h4>price</h4>")[0])
    assert "bytes: the record counts 151,650,816 B, this ledger 67,764,736 B (the record " \
           "83,886,080 B more)" in details
    assert "|M4 error: bytes 151,650,816 B and FLOPs 189,235,200 are the 2-call total" in details
    (rmsnorm,) = [r for found in rows.values() for r in found if ">rmsnorm<" in r]
    assert f"{NO_LEDGER}; workload key 'tokens' is not a parameter" in _text(rmsnorm)
    assert text.count(f"<p class=\"no-ledger\">{html.escape(NO_LEDGER)}</p>") == 2  # gemm_bf16


def test_report_refuses_two_references_of_one_op(tmp_path, capsys):
    twin = tmp_path / "twin.yaml"
    twin.write_text(FUSED.read_text())
    out = tmp_path / "r.html"
    assert main(["report", str(EXAMPLES), "--reference", str(FUSED), "--reference", str(twin),
                 "-o", str(out)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (f"roofwise: error: {twin}: ledger 'qk_norm_rope_quant' is also given by "
                    f"{FUSED}; expected one --reference per op name")
    assert not out.exists()
    assert main(["report", str(EXAMPLES), "--reference", str(tmp_path / "none.yaml"),
                 "-o", str(out)]) == 2
    assert not out.exists() and "none.yaml" in capsys.readouterr().err


def _text(fragment: str) -> str:
    """Markup to text with `|` where tags were, runs of them folded: cells read |a|b|."""
    return re.sub(r"\|+", "|", html.unescape(re.sub(r"<[^>]+>", "|", fragment)))


def _rows(text: str) -> dict[str, list[str]]:
    """verdict -> the HTML of each of its table rows."""
    out: dict[str, list[str]] = {}
    for chunk in text.split('<tr class="row" data-verdict="')[1:]:
        verdict, body = chunk.split('"', 1)
        out.setdefault(verdict, []).append(body)  # to the next row: the details included
    return out


def _cells(row_html: str) -> list[str]:
    """The visible text of the first ten cells (no nested markup survives but spans)."""
    cells = [c.split(">", 1)[1].split("</td>", 1)[0] for c in row_html.split("<td")[1:11]]
    return [re.sub(r"<[^>]+>", "", c) for c in cells]


def test_efficiency_cell_is_a_dash_where_it_is_not_a_reading(example_analysis):
    rows = _rows(report_html(example_analysis, source="ex.jsonl"))
    efficiency = {v: [_cells(r)[5] for r in found] for v, found in rows.items()}
    assert efficiency["impossible"] == ["—"] and efficiency["cache_resident"] == ["—"]
    assert efficiency["latency_bound"] == ["—"] and efficiency["blank"] == ["—"]
    sol = 1099511627776 / (989.5e12 * 0.7680)  # the anomalous gemm, one decimal as the table
    assert efficiency["anomaly"] == [f"{sol / 1.35e-3:.1%}"] == ["107.2%"]
    assert efficiency["at_ceiling"] == ["86.0%"]


def test_each_row_details_its_ledger_and_price():
    analysis = analyze(read_records(EXAMPLES).columns, builtin_machines(), regime="sustained")
    rows = _rows(report_html(analysis, source="ex.jsonl"))
    (gemm,) = rows["anomaly"]
    ledger = html.unescape(re.sub(r"<[^>]+>", "|", gemm.split('<table class="ledger">')[1]
                                  .split("</table>")[0]))
    # 2*8192^3 FLOP on tensor_core.bf16 at 989.5e12 * 0.7077 (sustained): 1.5701 ms
    compute_s = 1099511627776 / (989.5e12 * 0.7077)
    assert f"compute time, tensor_core.bf16 (binding)||{compute_s * 1e3:.2f} ms" in ledger
    assert "(1.100 TFLOP at 700.3 TFLOP/s)" in ledger
    assert "|bytes||402.65 MB (402,653,184 B)|" in ledger
    assert "|FLOPs||1.100 TFLOP (1,099,511,627,776)|" in ledger
    # memory: 402,653,184 B at 4.8e12 * 0.9380 B/s (the read envelope) = 89.43 us
    assert f"|memory time||{402653184 / (4.8e12 * 0.938) * 1e6:.1f} us at 4.50 TB/s (read mix)|" \
        in ledger
    assert "|SOL||1.57 ms = max(memory, compute)|" in ledger
    assert "|bound||compute (tensor_core.bf16)|" in ledger
    assert "|mix, regime||read, sustained|" in ledger
    sol = compute_s
    assert f"|efficiency||{sol / 1.35e-3:.1%}|" in ledger  # 116.3%
    assert "the envelope ceiling" in gemm.split('<table class="ledger">')[1]  # the reasons
    fused = next(r for r in rows["at_ceiling"])
    assert "67.76 MB (67,764,736 B): read 46.14 MB, write 21.63 MB" in fused  # the read/write split
    (impossible_gemm,) = rows["impossible"]
    assert "— (impossible: not a reading; see the reasons)" in impossible_gemm
    (blank,) = rows["blank"]
    assert "|SOL||— = max" in html.unescape(re.sub(r"<[^>]+>", "|", blank))


def test_lint_section_lists_findings_with_their_fields(example_analysis):
    text = report_html(example_analysis, source="examples/records.jsonl")
    lint = text.split('<table id="lint">')[1].split("</table>")[0]
    heads = re.findall(r"<th>([^<]*)</th>", lint.split("</thead>")[0])
    assert heads == ["code", "severity", "where", "reason", "fix"]
    first = re.findall(r"<td>([^<]*)</td>", lint.split("<tbody>")[1])[:3]
    assert first[:2] == ["M8", "error"] and first[2].startswith("examples/records.jsonl:")


def test_report_refuses_an_output_that_is_not_html(tmp_path, capsys):
    for name in ("r.png", "r", "r.svg"):
        assert main(["report", str(EXAMPLES), "-o", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(ln.startswith("roofwise: error: ") for ln in err)
    assert err[0].endswith("r.png: expected a report file ending in .html or .htm")
    assert not list(tmp_path.iterdir())
    assert main(["report", str(EXAMPLES), "-o", str(tmp_path / "r.HTM")]) == 0
    assert (tmp_path / "r.HTM").read_text().startswith("<!DOCTYPE html>")


def test_ledger_lists_every_unit_with_work_and_marks_the_binding_one():
    from roofwise.records.read import columns_from_valid

    row = {"op": "softmax_like", "device": "NVIDIA H200", "flops": 1.1e9, "bytes": 1e6,
           "roof": "cuda_core.fp32", "time_s": 50e-6, "timing": "device",
           "flops_by_unit": {"cuda_core.fp32": 1e9, "sfu.fp32": 1e8}}
    analysis = analyze(columns_from_valid([row]), builtin_machines())
    (found,) = [r for rows in _rows(report_html(analysis)).values() for r in rows]
    ledger = html.unescape(re.sub(r"<[^>]+>", "|", found.split('<table class="ledger">')[1]
                                  .split("</table>")[0]))
    fp32_s = 1e9 / (67.0e12 * 0.8548)  # 17.46 us
    sfu_s = 1e8 / 4.18176e12  # 23.91 us, uncalibrated: the datasheet rate
    assert f"|compute time, cuda_core.fp32||{fp32_s * 1e6:.1f} us (1.000 GFLOP at 57.3 TFLOP/s)|" \
        in ledger
    assert f"|compute time, sfu.fp32 (binding)||{sfu_s * 1e6:.1f} us (100.000 Mop at 4.2 Top/s)|" \
        in ledger
    assert f"|compute time, pipes in series||{(fp32_s + sfu_s) * 1e6:.1f} us|" in ledger
    assert "|FLOPs||1.100 GFLOP (1,100,000,000): cuda_core.fp32 1.000 GFLOP, " \
           "sfu.fp32 100.000 Mop|" in ledger


def test_report_with_no_priced_row_exits_2_and_writes_nothing(tmp_path, capsys):
    records = tmp_path / "dev.jsonl"
    records.write_text('{"op":"x","flops":1e9,"bytes":1e9,"roof":"cuda_core.fp32",'
                       '"time_s":1e-3,"device":"H300"}\n')
    out = tmp_path / "r.html"
    assert main(["report", str(records), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"roofwise: error: {records}: no row could be priced (the only row is blank); the "
        "first: no profile matches device 'H300'; pass --machine NAME (`roofwise machines` "
        "lists them)"]
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["dev.jsonl"]
    # with the machine named, the same row is priced and the report is written
    assert main(["report", str(records), "--machine", "h200", "-o", str(out)]) == 0
    assert out.exists()


def test_workloads_read_as_key_value_and_no_local_path_is_printed(example_analysis):
    text = report_html(example_analysis, source="examples/records.jsonl")
    assert ">m=8192 n=8192 k=8192 note=&quot;flops double-counted&quot;<" in text
    assert '{"m":8192' not in text.split("<pre>")[0]  # JSON only in the raw verdict object
    machines = builtin_machines()
    assert machines["h200"].path.startswith("/")  # loaded from an absolute path here ...
    assert machines["h200"].path not in text  # ... which the report never prints
    assert str(Path(machines["h200"].path).parent) not in text
    assert "built-in profile h200" in text


def test_report_table_holds_the_worst_rows_and_counts_every_row(example_analysis):
    text = report_html(example_analysis, source="examples/records.jsonl", rows=3)
    assert text.count('<tr class="row"') == 3
    assert "the worst 3 of 8 rows are in the table" in text
    summary = text.split('id="summary">')[1].split("</p>")[0]
    assert "8 records: 1 at_ceiling, 2 below, 1 anomaly, 1 latency_bound, 1 impossible, " \
           "1 blank, 1 cache_resident" in summary
    first = text.split('<tr class="row" data-verdict="')[1:4]
    assert [c.split('"', 1)[0] for c in first] == ["impossible", "anomaly", "blank"]


def test_report_says_a_device_mismatch(example_analysis_h200):
    text = report_html(example_analysis_h200, source="examples/records.jsonl")
    assert ("1 of 8 record(s) were judged on a profile their device does not name: "
            "&#x27;NVIDIA GeForce RTX 3090&#x27; (1)") in text


def test_report_cli_rows_option_and_a_large_file(tmp_path):
    """60,000 rows: the table holds --rows of them, the summary counts all, the chart bins."""
    import numpy as np
    import polars as pl

    n = 60_000
    rng = np.random.default_rng(0)
    bytes_ = rng.uniform(1e6, 1e9, n)
    sol = bytes_ / (4.8e12 * 0.938)  # memory-bound at 1 FLOP/B on the h200 read envelope
    pl.DataFrame({"op": [f"k{i % 7}" for i in range(n)], "flops": bytes_, "bytes": bytes_,
                  "roof": ["cuda_core.fp32"] * n, "time_s": sol / rng.uniform(0.3, 0.99, n),
                  "timing": ["events"] * n, "device": ["NVIDIA H200"] * n}
                 ).write_parquet(tmp_path / "big.parquet")
    out = tmp_path / "big.html"
    assert main(["report", str(tmp_path / "big.parquet"), "-o", str(out), "--rows", "500"]) == 0
    text = out.read_text()
    assert text.count('<tr class="row"') == 500
    assert "the worst 500 of 60,000 rows are in the table" in text
    assert "60,000 records:" in text.split('id="summary">')[1].split("</p>")[0]
    assert 'id="density"' in text  # the cloud binned in the chart
