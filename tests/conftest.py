from __future__ import annotations

from pathlib import Path

import pytest

from roofwise.profiles.load import builtin_machines

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def machines():
    return builtin_machines()


@pytest.fixture(scope="session")
def h200(machines):
    return machines["h200"]


@pytest.fixture
def examples() -> Path:
    return ROOT / "examples"
