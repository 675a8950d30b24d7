"""The datasheet profiles for more cards: each number against the vendor figure (typed here
from the datasheet tables in docs/references.md and the profile comments, not read from the
YAML), the dense figure where the datasheet prints a sparse one, and per-SM arithmetic."""

from __future__ import annotations

import re

import pytest

from roofwise.lint import lint_machine
from roofwise.ops import gemm, softmax
from roofwise.pricing.core import placed, price_ledger, price_ledger_cycles
from roofwise.profiles.load import builtin_paths

T = 1e12
# (profile, unit or memory level, vendor figure in the unit's rate, why this figure)
DATASHEET = [
    ("b200", "hbm", 7.7 * T), ("b200", "tensor_core.bf16", 36e15 / 8 / 2),
    ("b200", "tensor_core.fp16", 36e15 / 8 / 2), ("b200", "tensor_core.fp8", 72e15 / 8 / 2),
    ("b200", "tensor_core.fp4", 144e15 / 8 / 2), ("b200", "tensor_core.tf32", 18e15 / 8 / 2),
    ("b200", "cuda_core.fp32", 600 * T / 8),
    ("mi300x", "hbm", 5.3 * T), ("mi300x", "matrix_core.bf16", 1307.4 * T),
    ("mi300x", "matrix_core.fp16", 1307.4 * T), ("mi300x", "matrix_core.fp8", 2614.9 * T),
    ("mi300x", "matrix_core.tf32", 653.7 * T), ("mi300x", "vector.fp32", 163.4 * T),
    ("mi325x", "hbm", 6.0 * T), ("mi325x", "matrix_core.bf16", 1307.4 * T),
    ("mi325x", "matrix_core.fp8", 2614.9 * T), ("mi325x", "vector.fp32", 163.4 * T),
    ("h100-pcie", "hbm", 2.0 * T), ("h100-pcie", "tensor_core.bf16", 1513 * T / 2),
    ("h100-pcie", "tensor_core.fp8", 3026 * T / 2), ("h100-pcie", "tensor_core.tf32", 756 * T / 2),
    ("h100-pcie", "cuda_core.fp32", 51 * T),
    ("l40s", "gddr6", 864e9), ("l40s", "tensor_core.bf16", 362.05 * T),
    ("l40s", "tensor_core.fp8", 1466 * T / 2), ("l40s", "tensor_core.tf32", 366 * T / 2),
    ("l40s", "cuda_core.fp32", 91.6 * T),
    ("rtx-4090", "gddr6x", 21e9 * 384 / 8), ("rtx-4090", "tensor_core.fp16", 165.2 * T),
    ("rtx-4090", "tensor_core.bf16", 165.2 * T), ("rtx-4090", "tensor_core.fp8", 330.3 * T),
    ("rtx-4090", "tensor_core.tf32", 82.6 * T), ("rtx-4090", "cuda_core.fp32", 82.6 * T),
]
# (profile, SM count, boost clock Hz) for the FP32 cross-check: SMs x 128 lanes x 2 x clock
SM_CLOCK = [("h100-pcie", 114, 1.755e9), ("l40s", 142, 2.52e9), ("rtx-4090", 128, 2.52e9)]
NEW = ("b200", "mi300x", "mi325x", "h100-pcie", "l40s", "rtx-4090")


@pytest.mark.parametrize(("name", "key", "figure"), DATASHEET)
def test_profile_number_is_the_datasheet_figure(machines, name, key, figure):
    machine = machines[name]
    if key in machine.memory:
        assert machine.memory[key].theoretical_bytes_per_s == pytest.approx(figure, rel=1e-9)
    else:
        assert machine.units[key].theoretical_ops_per_s == pytest.approx(figure, rel=1e-9)


@pytest.mark.parametrize(("name", "sms", "clock_hz"), SM_CLOCK)
def test_fp32_rate_is_sms_times_lanes_times_clock(machines, name, sms, clock_hz):
    machine = machines[name]
    assert machine.clock_hz == clock_hz
    rate = machine.units["cuda_core.fp32"].theoretical_ops_per_s
    assert rate == pytest.approx(sms * 128 * 2 * clock_hz, rel=5e-3)  # datasheets round


@pytest.mark.parametrize("name", ["b200", "h100-pcie", "l40s", "rtx-4090"])
def test_sfu_rate_is_a_sixteenth_of_the_fp32_fma_rate(machines, name):
    """Guide table: 16 special functions vs 128 FP32 FMAs (256 FLOP) per SM per clock."""
    units = machines[name].units
    assert units["sfu.fp32"].theoretical_ops_per_s == pytest.approx(
        units["cuda_core.fp32"].theoretical_ops_per_s * 16 / 256, rel=1e-9)
    assert units["sfu.fp32"].ops_per_cycle == 16


@pytest.mark.parametrize("name", NEW)
def test_new_profiles_are_uncalibrated_and_say_which_figure(machines, name):
    machine = machines[name]
    assert not any(u.calibrated for u in machine.units.values())
    assert not machine.dram.calibration_by_mix
    assert machine.dram.choice  # decimal or binary, revised or launch: said
    tensor = [u for u in machine.units.values() if u.key.split(".")[0] in
              ("tensor_core", "matrix_core")]
    assert tensor and all(u.choice for u in tensor)


def test_every_number_in_a_builtin_profile_has_a_comment():
    number = re.compile(r"^\s*\w+:\s*-?[0-9.]+(e[+-]?\d+)?\s*(#.*)?$")
    for path in builtin_paths():
        for k, line in enumerate(path.read_text().splitlines(), 1):
            if number.match(line):
                assert "#" in line, f"{path.name}:{k} has a number without a source: {line}"


def test_rtx_4090_m1_explains_the_accumulate_choice(machines):
    findings = [f for f in lint_machine(machines["rtx-4090"]) if "tensor_core.fp16" in f.where]
    assert len(findings) == 1
    assert "FP16 accumulate" in findings[0].reason
    assert findings[0].severity == "warning"  # 165.2 is dense, not a sparse peak


def test_softmax_on_ascend_runs_on_the_vector_pipes_in_cycles(machines):
    ascend = machines["ascend-a5-vector"]
    ledger = placed(softmax(rows=4096, cols=8192), ascend)
    elems = 4096 * 8192
    assert ledger.ops_by_unit == {"ascend_vector.alu": 4 * elems,  # 1 compare + 3 arithmetic
                                  "ascend_vector.sfu": elems + 4096}  # exp + 1/sum per row
    cycles = price_ledger_cycles(softmax(rows=4096, cols=8192), ascend)
    assert cycles.cycles_by_unit["ascend_vector.sfu"] == pytest.approx((elems + 4096) / 8)
    assert cycles.binding_unit == "ascend_vector.sfu"  # 8/cycle against the ALU's 51


def test_gemm_on_ascend_keeps_its_dtype_on_the_cube(machines):
    ledger = placed(gemm(m=1024, n=1024, k=1024, dtype="fp8"), machines["ascend-a5-vector"])
    assert ledger.ops_by_unit["ascend_cube.fp8"] == 2 * 1024**3
    assert set(ledger.ops_by_unit) == {"ascend_cube.fp8", "ascend_vector.alu"}  # fp8 scales
    assert ledger.roof == "ascend_cube.fp8"


def test_gemm_on_mi300x_is_priced_on_the_matrix_cores(machines):
    price = price_ledger(gemm(m=8192, n=8192, k=8192, dtype="bf16"), machines["mi300x"])
    assert price.binding_unit == "matrix_core.bf16"
    assert price.compute_time_s == pytest.approx(2 * 8192**3 / 1307.4e12)


def test_machines_on_nvidia_names_are_unchanged(machines):
    ledger = softmax()
    assert placed(ledger, machines["h200"]) is ledger


def test_m1_calls_the_fp16_accumulate_figure_what_it_is(machines):
    from dataclasses import replace

    rtx = machines["rtx-4090"]
    fast = replace(rtx.units["tensor_core.fp16"], theoretical_ops_per_s=330.4e12, choice="")
    findings = lint_machine(replace(rtx, units={"tensor_core.fp16": fast}))
    assert findings[-1].severity == "error"
    assert "FP16-accumulate figure" in findings[-1].reason


# The cards in people's traces (issue 21, item 8): each figure typed from the vendor document
# the profile cites (URL in the profile's header), dense where the document prints sparse.
CARDS = [
    # NVIDIA Tesla V100 datasheet (SXM2): 900 GB/s, FP32 15.7 TFLOPS, tensor 125 TFLOPS
    ("v100-sxm2", "hbm", 900e9), ("v100-sxm2", "cuda_core.fp32", 15.7 * T),
    ("v100-sxm2", "tensor_core.fp16", 125 * T),
    # NVIDIA A10 datasheet: 600 GB/s, FP32 31.2, TF32 62.5 | 125*, BF16/FP16 125 | 250*
    ("a10", "gddr6", 600e9), ("a10", "cuda_core.fp32", 31.2 * T),
    ("a10", "tensor_core.tf32", 125 * T / 2), ("a10", "tensor_core.bf16", 250 * T / 2),
    ("a10", "tensor_core.fp16", 250 * T / 2),
    # NVIDIA L4 datasheet: 300 GB/s, FP32 30.3, TF32 120*, BF16/FP16 242*, FP8 485* (sparse)
    ("l4", "gddr6", 300e9), ("l4", "cuda_core.fp32", 30.3 * T),
    ("l4", "tensor_core.tf32", 120 * T / 2), ("l4", "tensor_core.bf16", 242 * T / 2),
    ("l4", "tensor_core.fp16", 242 * T / 2), ("l4", "tensor_core.fp8", 485 * T / 2),
    # NVIDIA T4 datasheet (MAR19, p.1): FP32 8.1, mixed-precision FP16/FP32 65 TFLOPS;
    # bandwidth from the T4 product page, "320+ GB/s" (the datasheet PDF prints 300 GB/s;
    # the ceiling takes the higher)
    ("t4", "gddr6", 320e9), ("t4", "cuda_core.fp32", 8.1 * T), ("t4", "tensor_core.fp16", 65 * T),
    # NVIDIA RTX A6000 datasheet: 768 GB/s, FP32 38.7, tensor 309.7 TFLOPS with sparsity
    ("rtx-a6000", "gddr6", 768e9), ("rtx-a6000", "cuda_core.fp32", 38.7 * T),
    ("rtx-a6000", "tensor_core.fp16", 309.7 * T / 2),
    ("rtx-a6000", "tensor_core.bf16", 309.7 * T / 2),
    ("rtx-a6000", "tensor_core.tf32", 309.7 * T / 4),
    # AMD MI200 data sheet (MI250X, per package; the profile is one of its two GCDs): 3276.8
    # GB/s (footnote MI200-07, 3.2768 TB/s), FP32 vector 47.9, FP32 matrix 95.7, FP16/BF16 383
    # TFLOPS (CDNA 2 white paper endnote MI200-05: 383.0 BF16 at 1,700 MHz)
    ("mi250x", "hbm", 3276.8e9 / 2), ("mi250x", "vector.fp32", 47.9 * T / 2),
    ("mi250x", "matrix_core.fp32", 95.7 * T / 2), ("mi250x", "matrix_core.fp16", 383 * T / 2),
    ("mi250x", "matrix_core.bf16", 383 * T / 2),
]
CARD_NAMES = ("v100-sxm2", "a10", "l4", "t4", "rtx-a6000", "mi250x")
# (profile, SMs or CUs, FP32 lanes per SM/CU, boost clock Hz): FP32 = units x lanes x 2 x clock
CARD_CLOCKS = [("v100-sxm2", 80, 64, 1.53e9), ("t4", 40, 64, 1.59e9),
               ("rtx-a6000", 84, 128, 1.8e9), ("mi250x", 110, 64, 1.7e9)]
# the device name a trace's deviceProperties (or torch.cuda.get_device_name) gives each card
DEVICE_NAMES = [("Tesla V100-SXM2-32GB", "v100-sxm2"), ("Tesla V100-SXM2-16GB", "v100-sxm2"),
                ("NVIDIA A10", "a10"), ("NVIDIA L4", "l4"), ("Tesla T4", "t4"),
                ("NVIDIA RTX A6000", "rtx-a6000"), ("AMD Instinct MI250X", "mi250x"),
                ("AMD Instinct MI250X/MI250", "mi250x")]
# L2 capacity per profile in bytes, as the cited document states it (binary MB: SRAM sizes)
MIB = 1 << 20
L2_BYTES = [("v100-sxm2", 6144 * 1024), ("a10", 6144 * 1024), ("rtx-a6000", 6144 * 1024),
            ("t4", 4096 * 1024), ("l4", 48 * MIB), ("mi250x", 8 * MIB),
            ("h100-sxm", 50 * MIB), ("h100-pcie", 50 * MIB), ("h200", 60 * MIB),
            ("a100-sxm", 40 * MIB), ("l40s", 98304 * 1024), ("rtx-4090", 73728 * 1024),
            ("mi300x", 32 * MIB), ("mi325x", 32 * MIB)]


@pytest.mark.parametrize(("name", "key", "figure"), CARDS)
def test_card_number_is_the_datasheet_figure(machines, name, key, figure):
    test_profile_number_is_the_datasheet_figure(machines, name, key, figure)


@pytest.mark.parametrize(("name", "units", "lanes", "clock_hz"), CARD_CLOCKS)
def test_card_fp32_is_units_times_lanes_times_clock(machines, name, units, lanes, clock_hz):
    machine = machines[name]
    assert machine.clock_hz == clock_hz
    key = "vector.fp32" if "vector.fp32" in machine.units else "cuda_core.fp32"
    assert machine.units[key].theoretical_ops_per_s == pytest.approx(
        units * lanes * 2 * clock_hz, rel=1e-2)  # the T4 datasheet rounds 8.14 to 8.1


@pytest.mark.parametrize(("device", "name"), DEVICE_NAMES)
def test_trace_device_name_selects_the_card(machines, device, name):
    from roofwise.profiles.load import match_device

    assert match_device(device, machines.values()).machine.name == name


@pytest.mark.parametrize("name", CARD_NAMES)
def test_cards_are_uncalibrated_and_say_which_figure(machines, name):
    test_new_profiles_are_uncalibrated_and_say_which_figure(machines, name)
    assert any("uncalibrated" in u.source for u in machines[name].units.values())


@pytest.mark.parametrize(("name", "capacity"), L2_BYTES)
def test_l2_capacity_is_the_documented_size(machines, name, capacity):
    assert machines[name].memory["l2"].capacity_bytes == capacity


def test_no_l2_bandwidth_is_invented(machines):
    """Only the MI300X's Infinity Cache has a published cache bandwidth (CDNA 3 white paper,
    17.2 TB/s); every other cache level's bandwidth is a gap until `roofwise calibrate`."""
    known = {(m.name, c.name): c.theoretical_bytes_per_s for m in machines.values()
             for c in m.caches if c.theoretical_bytes_per_s is not None}
    assert known == {("mi300x", "infinity_cache"): 17.2e12}


def test_volta_and_turing_have_no_bf16_roof(machines):
    for name in ("v100-sxm2", "t4"):
        assert set(machines[name].units) == {"cuda_core.fp32", "sfu.fp32", "tensor_core.fp16"}


def test_mi250x_sfu_free_work_runs_on_its_vector_and_matrix_pipes(machines):
    price = price_ledger(gemm(m=4096, n=4096, k=4096, dtype="bf16"), machines["mi250x"])
    assert price.binding_unit == "matrix_core.bf16"
    assert price.compute_time_s == pytest.approx(2 * 4096**3 / 191.5e12)


# DRAM capacity, typed from each vendor's datasheet (decimal GB as printed): `roofwise model`
# says whether a model fits on these figures
DRAM_CAPACITY_GB = {"t4": 16, "a10": 24, "l4": 24, "rtx-a6000": 48, "v100-sxm2": 32,
                    "mi250x": 64, "h200": 141, "h100-sxm": 80, "a100-sxm": 80, "mi300x": 192}


@pytest.mark.parametrize("name", sorted(DRAM_CAPACITY_GB))
def test_dram_capacity_is_the_datasheet_figure_with_its_source(name):
    from roofwise.profiles.load import builtin_paths, load_machine

    machine = load_machine(next(p for p in builtin_paths() if p.stem == name))
    assert machine.dram.capacity_bytes == DRAM_CAPACITY_GB[name] * 1e9
    assert machine.dram.capacity_source
