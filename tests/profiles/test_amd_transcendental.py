"""The AMD profiles' transcendental rate: derived, since AMD publishes none (LLVM's AMDGPU
scheduling model runs F16/F32 transcendental instructions at a quarter of the 64 lanes a CU
fills per clock: 16 results per CU per clock)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(("name", "compute_units", "clock_hz"), [
    ("mi300x", 304, 2.1e9),  # AMD MI300X data sheet: 304 CUs, 2100 MHz peak engine clock
    ("mi325x", 304, 2.1e9),  # AMD MI325X data sheet: the same CDNA 3 die and clock
    ("mi250x", 110, 1.7e9),  # one GCD of the MI250X: 220 CUs per package, 1700 MHz
])
def test_sixteen_results_per_compute_unit_per_clock(machines, name, compute_units, clock_hz):
    unit = machines[name].unit("vector.transcendental")
    assert unit is not None and not unit.calibrated
    assert unit.theoretical_ops_per_s == pytest.approx(compute_units * 16 * clock_hz, rel=1e-4)
    assert "derived" in unit.source and "quarter rate" in unit.source
