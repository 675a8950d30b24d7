"""Shared fixtures: the shipped example records, analysed against the built-in profiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofwise.output.analysis import Analysis, analyze
from roofwise.profiles.load import builtin_machines
from roofwise.records.read import read_records

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "records.jsonl"


@pytest.fixture()
def example_analysis() -> Analysis:
    return analyze(read_records(EXAMPLES).columns, builtin_machines())



@pytest.fixture()
def example_analysis_h200() -> Analysis:
    """`analyze -m h200`: the RTX 3090 softmax record is judged on the wrong card."""
    machines = builtin_machines()
    return analyze(read_records(EXAMPLES).columns, machines, machines["h200"])
