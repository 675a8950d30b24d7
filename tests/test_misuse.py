"""`roofwise misuse` prints every figure of the seed's output, with the three corrections."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from roofwise.misuse import render

SEED = Path(__file__).resolve().parents[2] / "shared" / "seed"

# Citations in the seed's prose (file:line ranges, an arXiv id, a chapter) are not figures.
CITATION = re.compile(r"\w+\.(?:yaml|md):\d+(?:-\d+)?|arXiv [\d.]+|code/\d+|H200,")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def seed_figures() -> list[str]:
    text = CITATION.sub(" ", (SEED / "expected_output.txt").read_text())
    return sorted({n.rstrip(",") for n in NUMBER.findall(text)})


@pytest.fixture(scope="module")
def output() -> str:
    return render()


def test_seed_output_has_figures():
    figures = seed_figures()
    assert {"4502.4", "15.051", "161.97", "134.87", "2.075", "79.8", "0.655"} <= set(figures)


@pytest.mark.parametrize("figure", seed_figures())
def test_every_seed_figure_appears(output, figure):
    assert re.search(rf"(?<![\d.]){re.escape(figure)}(?!\d)", output), figure


def test_corrections_show_honest_figures_beside_the_seeds(output):
    # NOTES 1: the natural two-kernel split
    assert "151.65 MB, AI = 1.25" in output and "151,650,816 B" in output
    assert "the seed's two-kernel figure, 134.87 MB" in output
    # NOTES 2: the decode step with its lookups
    assert "17056 B" in output
    assert "the seed's decode step counted only the payload: 15520 B" in output
    # NOTES 3: both regimes, the burst one labelled as the seed's
    assert "sustained fp16 tensor      661.4 TFLOP/s" in output
    assert "(the seed's 'calibrated' figure)" in output


def test_real_verdicts(output):
    assert "4.0 us decode kernel: latency_bound" in output
    assert "-> impossible" in output and "-> at_ceiling" in output


@pytest.mark.parametrize("only", range(1, 9))
def test_only_one(only):
    text = render(only)
    assert text.count("=" * 84) == 2
    assert f"M{only} " in text
