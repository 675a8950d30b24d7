from __future__ import annotations

import os
from pathlib import Path

import pytest

from roofwise.profiles.load import builtin_machines

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
