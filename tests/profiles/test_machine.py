"""Built-in profiles: numbers from REFERENCES.md, derived figures from the seed's output."""

from __future__ import annotations

import pytest

from roofwise.profiles.load import match_device, resolve_machine
from roofwise.profiles.machine import ASSUMED_FLOORS, TIMINGS


def test_builtin_profiles_present(machines):
    assert set(machines) == {"h200", "h100-sxm", "a100-sxm", "a100-sxm-40gb", "h20",
                             "ascend-a5-vector",
                             "b200", "mi300x", "mi325x", "h100-pcie", "l40s", "rtx-4090",
                             "v100-sxm2", "a10", "l4", "t4", "rtx-a6000", "mi250x"}


def test_h200_effective_is_theoretical_times_envelope(h200):
    hbm = h200.dram
    assert hbm.envelope_mix == "read"
    assert hbm.effective_bytes_per_s() == pytest.approx(4800e9 * 0.9380)  # 4502.4 GB/s (seed)
    assert hbm.effective_bytes_per_s("copy") == pytest.approx(4800e9 * 0.8183)
    fp16 = h200.units["tensor_core.fp16"]
    assert fp16.envelope_regime == "burst"
    assert fp16.effective_ops_per_s() == pytest.approx(989.5e12 * 0.7370)
    assert fp16.effective_ops_per_s("sustained") == pytest.approx(989.5e12 * 0.6684)


@pytest.mark.parametrize(("unit", "balance"), [
    ("tensor_core.fp16", 161.97), ("tensor_core.bf16", 168.78),
    ("tensor_core.fp8", 306.67), ("cuda_core.fp32", 12.72)])
def test_h200_balance_points_match_seed(h200, unit, balance):
    assert round(h200.balance_flops_per_byte(unit), 2) == balance


def test_single_regime_unit_reads_its_only_regime(h200):
    unit = h200.units["cuda_core.fp32"]
    assert unit.effective_ops_per_s("burst") == pytest.approx(67.0e12 * 0.8548)


def test_uncalibrated_unit_uses_theoretical(machines):
    h100 = machines["h100-sxm"]
    assert not h100.units["tensor_core.bf16"].calibrated
    assert h100.units["tensor_core.bf16"].effective_ops_per_s() == 989.5e12
    assert h100.dram.effective_bytes_per_s() == 3.35e12


def test_sfu_rate_is_guide_arithmetic(h200):
    assert h200.units["sfu.fp32"].theoretical_ops_per_s == pytest.approx(16 * 132 * 1.98e9)


def test_ascend_rates_are_gaps_with_per_cycle_figures(machines):
    ascend = machines["ascend-a5-vector"]
    assert ascend.units["ascend_vector.alu"].theoretical_ops_per_s is None
    assert [ascend.units[f"ascend_vector.{k}"].ops_per_cycle for k in ("alu", "div", "sfu")] == [
        51, 13, 8]
    assert ascend.dram.effective_bytes_per_s() is None


def test_no_profile_has_a_measured_floor_yet(machines):
    """Every built-in states all four floors, each marked assumed with its source."""
    for machine in machines.values():
        floors = machine.latency_floors.by_timing
        assert tuple(floors) == TIMINGS
        for timing, floor in floors.items():
            assert floor.assumed and floor.source.startswith("assumed:")
            default = ASSUMED_FLOORS[timing]
            assert (floor.per_call_s, floor.per_kernel_s) == (default.per_call_s,
                                                              default.per_kernel_s)


def test_floor_grows_per_extra_kernel(machines):
    floors = machines["h200"].latency_floors
    # events: 20 us for the call + 39 further launches x 5 us = 215 us
    assert floors.floor_s("events", 40) == pytest.approx(20e-6 + 39 * 5e-6)
    assert floors.floor_s("device", 1) == floors.floor_s("events", 1) == 20e-6
    assert floors.floor_s("", 1) == 20e-6  # no timing stated reads as events
    # cheapest first: a profiler's kernel time < graph replay < events < host clock
    assert [floors.floor_s(t) for t in TIMINGS] == sorted(floors.floor_s(t) for t in TIMINGS)


@pytest.mark.parametrize(("device", "expected"), [
    ("NVIDIA H200", "h200"), ("nvidia h200", "h200"), ("h200", "h200"),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA A100-SXM4-80GB", "a100-sxm"),
    ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb"), ("NVIDIA A100-PG509-200", "a100-sxm-40gb")])
def test_device_names_match_exactly_or_by_alias(machines, device, expected):
    match = match_device(device, machines.values())
    assert match.machine is not None and match.machine.name == expected


@pytest.mark.parametrize("device", ["NVIDIA H200 NVL", "NVIDIA A100-PCIE-40GB", "H2", "", None])
def test_unmatched_device_is_an_explicit_blank(machines, device):
    match = match_device(device, machines.values())
    assert match.machine is None
    assert match.reason


def test_resolve_by_alias_and_by_path(machines):
    assert resolve_machine("NVIDIA H200").name == "h200"
    assert resolve_machine(machines["h20"].path).name == "h20"


def test_profiles_are_read_only(h200):
    with pytest.raises(TypeError):
        h200.dram.calibration_by_mix["read"] = 1.0  # type: ignore[index]
    with pytest.raises(TypeError):
        h200.units["cuda_core.fp32"] = h200.units["sfu.fp32"]  # type: ignore[index]


def test_built_in_profiles_read_by_libyaml_equal_the_limited_reader():
    # built-ins are parsed by libyaml (ten times faster at start-up); a user's profile by the
    # pure-Python reader with depth and alias limits: both must build the same machines
    from roofwise.profiles.load import builtin_paths, load_machine

    for path in builtin_paths():
        assert load_machine(path, packaged=True) == load_machine(path), path
