"""`roofwise misuse` prints every figure of the seed's output, with the three corrections."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from roofwise.lint.misuse import render

SEED = Path(__file__).resolve().parents[1] / "fixtures" / "seed"  # a copy, so a clone stands alone

# The card's name is not a figure; everything else, the seed's citations included, must appear.
CITATION = re.compile(r"\bH200\b")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def seed_sections() -> dict[int, str]:
    """The seed's output split into its header (0) and its eight sections (1..8)."""
    text = CITATION.sub(" ", (SEED / "expected_output.txt").read_text())
    parts = re.split(r"^={20,}\nM(\d) .*\n={20,}$", text, flags=re.M)
    sections = {0: parts[0]}
    for number, body in zip(parts[1::2], parts[2::2], strict=True):
        sections[int(number)] = body
    return sections


def figures(text: str) -> list[str]:
    return sorted({n.rstrip(",") for n in NUMBER.findall(text)})


CASES = [(section, figure) for section, body in seed_sections().items()
         for figure in figures(body)]


@pytest.fixture(scope="module")
def output() -> str:
    return render()


def test_seed_has_eight_sections_and_their_figures():
    sections = seed_sections()
    assert sorted(sections) == list(range(9))
    assert {"4502.4", "163840"} <= set(figures(sections[0]))
    assert {"134.87", "1.99"} <= set(figures(sections[4]))
    assert {"2.075", "6.38"} <= set(figures(sections[5]))


@pytest.mark.parametrize(("section", "figure"), CASES)
def test_every_seed_figure_appears_in_its_own_section(section, figure):
    """Each figure must appear where the seed printed it: in the same misuse's section."""
    text = render(section) if section else render(1).split("=" * 84)[0]
    if section:
        text = text.split("=" * 84, 1)[1]  # the section alone, without the shared header
    assert re.search(rf"(?<![\d.]){re.escape(figure)}(?!\d)", text), (section, figure)


def test_corrections_show_honest_figures_beside_the_seeds(output):
    # NOTES 1: the natural two-kernel split
    assert "151.65 MB, AI = 1.25" in output and "151,650,816 B" in output
    assert "the original demonstration's two-kernel figure, 134.87 MB" in output
    # NOTES 2: the decode step with its lookups
    assert "17056 B" in output
    assert "the original demonstration's decode step counted only the payload: 15520 B" in output
    # NOTES 3: both regimes, the burst one labelled as the seed's
    assert "sustained fp16 tensor      661.4 TFLOP/s" in output
    assert "(the figure the original demonstration called 'calibrated')" in output


def test_real_verdicts(output):
    assert "4.0 us decode kernel: latency_bound" in output
    assert "-> impossible" in output and "-> at_ceiling" in output


@pytest.mark.parametrize("only", range(1, 9))
def test_only_one(only):
    text = render(only)
    assert text.count("=" * 84) == 2
    assert f"M{only} " in text


def test_output_names_the_case_study_never_the_seed(output):
    """The user never had "the seed": the output names the demonstration and the case study."""
    assert "seed" not in output.lower()
    assert "QK-Norm + RoPE + fp8 quant" in output


@pytest.mark.parametrize("only", ["M5", "m5", "5"])
def test_only_takes_the_lint_code_or_the_number(capsys, only):
    from roofwise.cli import main

    assert main(["misuse", "--only", only]) == 0
    out = capsys.readouterr().out
    assert "M5" in out and "M4" not in out


@pytest.mark.parametrize("only", ["M9", "0", "five"])
def test_only_refuses_what_is_not_a_misuse(capsys, only):
    from roofwise.cli import main

    assert main(["misuse", "--only", only]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "expected a misuse M1-M8" in err
