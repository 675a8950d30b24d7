"""The HTML report in a real headless browser (Debian chromium via playwright)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from roofwise.report.html import report_html, write_report

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
    assert text.count('<tr data-verdict="') == len(example_analysis)
    assert text.count("<details>") == len(example_analysis)
    # the profile and its sources: every hbm mix and every unit regime of the h200
    for needle in ("copy", "triad", "read (envelope)", "write", "tensor_core.fp8",
                   "burst (envelope)", "TileOPs h200.yaml (cuBLAS)", "sfu.fp32"):
        assert needle in text


def test_report_in_headless_chromium(example_analysis, tmp_path):
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"Debian chromium not installed at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="the playwright python package is not installed")
    path = tmp_path / "report.html"
    write_report(example_analysis, path, source="examples/records.jsonl")
    n = len(example_analysis)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.route("**/*", lambda route: route.abort()
                       if not route.request.url.startswith("file://") else route.continue_())
            page.goto(path.as_uri())
            box = page.locator("#chart svg").bounding_box()
            assert box is not None and box["width"] > 300 and box["height"] > 200
            rows = page.locator("#verdicts tbody tr")
            assert rows.count() == n

            def efficiencies() -> list[str]:
                return page.locator("#verdicts tbody tr td:nth-child(6)").all_inner_texts()

            before = efficiencies()
            page.locator("#verdicts th", has_text="efficiency").click()
            after = efficiencies()
            numbers = [float(x.rstrip("%")) for x in after if x != "—"]
            assert numbers == sorted(numbers) and len(numbers) == 6
            assert after != before and after[-2:] == ["—", "—"]  # blank/latency rows last
            page.locator("#verdicts th", has_text="efficiency").click()
            desc = [float(x.rstrip("%")) for x in efficiencies() if x != "—"]
            assert desc == sorted(desc, reverse=True)

            page.fill("#filter", "gemm")
            assert page.locator("#verdicts tbody tr:visible").count() == 2
            page.fill("#filter", "")
            page.select_option("#verdict-filter", "impossible")
            assert page.locator("#verdicts tbody tr:visible").count() == 2
            page.select_option("#verdict-filter", "")
            assert page.locator("#verdicts tbody tr:visible").count() == n

            first = page.locator("#verdicts tbody tr details").first
            first.locator("summary").click()
            assert '"verdict":' in first.locator("pre").inner_text()
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
        finally:
            browser.close()
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000

