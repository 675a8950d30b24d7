from __future__ import annotations

import os
from pathlib import Path

import pytest

from roofwise.profiles.load import builtin_machines, builtin_paths

ROOT = Path(__file__).resolve().parents[1]

# `roofwise model` keeps its captures under ~/.cache by default: the suite (and every process
# it starts) captures each step afresh and writes nothing there; the store's own tests turn it
# on in a folder of their own (tests/models/test_capture_store.py).
os.environ["ROOFWISE_NO_CACHE"] = "1"


@pytest.fixture(scope="session")
def machines():
    return builtin_machines()


@pytest.fixture(scope="session")
def h200(machines):
    return machines["h200"]


@pytest.fixture
def examples() -> Path:
    return ROOT / "examples"


@pytest.fixture
def mi300x_gap_profile(tmp_path: Path) -> str:
    """The mi300x profile with its transcendental rate a gap (as it was before that rate was
    derived, and as a user's own profile may leave it): rows that need the rate are blank."""
    text = next(p for p in builtin_paths() if p.name == "mi300x.yaml").read_text()
    start = text.index("  vector.transcendental:\n")
    line_end = text.index("\n", text.index("theoretical_ops_per_s:", start))
    gap = tmp_path / "mi300x-gap.yaml"
    gap.write_text(text[:start] + "  vector.transcendental:\n    theoretical_ops_per_s: null"
                   + text[line_end:])
    return str(gap)
