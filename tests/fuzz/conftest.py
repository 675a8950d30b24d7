"""Hypothesis profiles for the fuzzed input contract.

`ROOFWISE_FUZZ` picks one:
- unset or `ci`: each test runs its CI share of examples (a few thousand in all, under two
  minutes on two cores), derandomised so that CI is repeatable;
- `long`: each test runs `ROOFWISE_FUZZ_SCALE` (default 100) times its CI share, with fresh
  random seeds, for a run on demand:
  `ROOFWISE_FUZZ=long python -m pytest tests/fuzz -q -p no:cacheprovider`.
The number of examples each test ran is printed at the end of the session.
"""

from __future__ import annotations

import os
from collections import Counter

from hypothesis import HealthCheck, settings

MODE = os.environ.get("ROOFWISE_FUZZ", "ci")
SCALE = int(os.environ.get("ROOFWISE_FUZZ_SCALE", "100")) if MODE == "long" else 1
EXAMPLES: Counter[str] = Counter()

settings.register_profile(
    "roofwise-ci", deadline=None, derandomize=True, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])
settings.register_profile(
    "roofwise-long", deadline=None, derandomize=False, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])
settings.load_profile("roofwise-long" if MODE == "long" else "roofwise-ci")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if EXAMPLES:
        total = sum(EXAMPLES.values())
        terminalreporter.write_line(
            f"roofwise fuzz ({MODE}): {total} examples: "
            + ", ".join(f"{name} {n}" for name, n in sorted(EXAMPLES.items())))
