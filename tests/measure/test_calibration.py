"""Calibration arithmetic, plausibility refusals, and the profile it writes."""

from __future__ import annotations

import pytest
import yaml

from roofwise.base.errors import InputError
from roofwise.cli import main
from roofwise.measure.calibration_math import (
    Clocks,
    FloorMeasurement,
    Measurement,
    RefusedMeasurement,
    bandwidth_bytes_per_s,
    build_profile,
    burst_times,
    bytes_moved,
    check_l2,
    check_plausible,
    choose_theoretical,
    envelope,
    fraction,
    gemm_flops,
    judge_measurements,
    regime_from_clocks,
)
from roofwise.profiles.load import builtin_machines, parse_machine

GiB = 1 << 30
STEADY = Clocks(sm_mhz=1980, mem_mhz=3201, power_limit_w=700, driver="580.159.04")


def test_bytes_per_mix():
    assert bytes_moved("copy", GiB) == 2 * 1_073_741_824
    assert bytes_moved("triad", GiB) == 3 * 1_073_741_824
    assert bytes_moved("read", GiB) == 1_073_741_824
    assert bytes_moved("write", GiB) == 1_073_741_824
    with pytest.raises(ValueError):
        bytes_moved("scale", GiB)


def test_bandwidth_uses_the_median():
    # copy of 2 GiB arrays moves 4 GiB = 4,294,967,296 B; median of (1.1, 1.0, 5.0) ms is 1.1 ms
    assert bandwidth_bytes_per_s(bytes_moved("copy", 2 * GiB), [1.1e-3, 1.0e-3, 5.0e-3]) == (
        pytest.approx(4_294_967_296 / 1.1e-3, rel=1e-12))  # 3.904515724e12 B/s


def test_gemm_flops_and_fraction():
    assert gemm_flops(8192, 8192, 8192) == 1_099_511_627_776.0  # 2 * 8192^3
    # 1.0995e12 FLOP in 1.5 ms = 733.0078e12 FLOP/s; over 989.5e12 = 0.740786
    rate = gemm_flops(8192, 8192, 8192) / 1.5e-3
    assert fraction(rate, 989.5e12) == pytest.approx(0.740786, abs=1e-6)


def test_envelope_is_the_max():
    assert envelope({"copy": 0.81, "triad": 0.84, "read": 0.93, "write": 0.89}) == ("read", 0.93)


def hbm(mix, seconds, start=STEADY, end=STEADY, array=2 * GiB):
    return Measurement("memory", "hbm", mix, bytes_moved(mix, array), tuple(seconds), start, end,
                       "test")


def test_plausible_measurement_gives_its_fraction():
    m = hbm("read", [0.5e-3] * 9)  # 2 GiB / 0.5 ms = 4.295e12 B/s; / 4.8e12 = 0.894785
    assert check_plausible(m, 4.8e12) == pytest.approx(2 * GiB / 0.5e-3 / 4.8e12, rel=1e-12)


def test_refuses_a_fraction_above_one():
    m = hbm("read", [0.4e-3] * 9)  # 5.37e12 B/s over a 4.8e12 theoretical: 1.118
    with pytest.raises(RefusedMeasurement, match=r"1\.118x the theoretical"):
        check_plausible(m, 4.8e12)


def test_memory_clock_that_moved_is_refused_but_an_sm_clock_under_hbm_is_not():
    hot = Clocks(sm_mhz=1980, mem_mhz=3201)
    memory_moved = Clocks(sm_mhz=1980, mem_mhz=2619)
    with pytest.raises(RefusedMeasurement, match="memory clock moved 3201 -> 2619"):
        check_plausible(hbm("read", [0.5e-3] * 9, hot, memory_moved), 4.8e12)
    # an HBM read whose SM clock fell (power cap) still measured HBM: accepted
    sm_fell = Clocks(sm_mhz=1755, mem_mhz=3201)
    assert check_plausible(hbm("read", [0.5e-3] * 9, hot, sm_fell), 4.8e12) is not None


def test_refuses_a_wide_spread():
    # p10..p90 of 1.0..2.0 ms is 1.1..1.9 around a 1.5 ms median: 0.533 > 0.10
    times = [1.0e-3 + i * 0.125e-3 for i in range(9)]
    with pytest.raises(RefusedMeasurement, match="spread"):
        check_plausible(hbm("read", times), 4.8e12)


def measurements():
    gemm = gemm_flops(8192, 8192, 8192)
    return [
        hbm("read", [0.5e-3] * 9),                        # 0.894785
        hbm("copy", [1.1e-3] * 9),                        # 3.905e12 / 4.8e12 = 0.813439
        Measurement("unit", "tensor_core.bf16", "burst", gemm, (1.45e-3,) * 9, STEADY, STEADY),
        Measurement("unit", "tensor_core.bf16", "sustained", gemm, (1.55e-3,) * 9, STEADY,
                    STEADY),
        Measurement("unit", "tensor_core.fp16", "sustained", gemm, (0.9e-3,) * 9, STEADY,
                    STEADY),                              # 1.2217e15 > 989.5e12: refused
        # 40 GB / 4 ms = 1e13 B/s; the l2 level has no theoretical rate
        Measurement("memory", "l2", "read", 40e9, (4e-3,) * 9, STEADY, STEADY),
    ]


def test_built_profile_loads_and_gives_back_the_measured_rates(tmp_path):
    h200 = builtin_machines()["h200"]
    profile = build_profile("NVIDIA H200", measurements(), h200,
                            {"card": "NVIDIA H200", "driver": "580.159.04",
                             "date": "2026-11-20", "command": "roofwise calibrate"},
                            latency_floors=[FloorMeasurement(
                                "graph", (2.0e-6, 2.1e-6, 2.2e-6), 20,
                                (21.0e-6, 21.1e-6, 21.2e-6), "tiny add"),
                                FloorMeasurement("events", (6.4e-6, 6.5e-6, 6.9e-6), 20,
                                                 (101.5e-6,), "tiny add")])
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    machine = parse_machine(yaml.safe_load(path.read_text()), str(path))
    assert machine.matches("NVIDIA H200")
    assert machine.dram.effective_bytes_per_s("read") == pytest.approx(2 * GiB / 0.5e-3,
                                                                      rel=1e-12)
    assert machine.dram.effective_bytes_per_s("copy") == pytest.approx(4 * GiB / 1.1e-3,
                                                                      rel=1e-12)
    assert machine.dram.envelope_mix == "read"
    bf16 = machine.units["tensor_core.bf16"]
    assert bf16.effective_ops_per_s("burst") == pytest.approx(2 * 8192**3 / 1.45e-3, rel=1e-12)
    assert bf16.effective_ops_per_s("sustained") == pytest.approx(2 * 8192**3 / 1.55e-3,
                                                                  rel=1e-12)
    # refused: fp16 keeps no calibration (its theoretical rate stands), and a note says why
    assert not machine.units["tensor_core.fp16"].calibrated
    assert any("refused: tensor_core.fp16 sustained" in n for n in machine.notes)
    # L2 has no theoretical rate: the measurement is no fraction but the measured roof that
    # cache-resident rows are read against (40 GB / 4 ms = 1e13 B/s), its size kept
    l2 = machine.memory["l2"]
    assert l2.calibration_by_mix == {}
    assert l2.theoretical_bytes_per_s is None
    assert l2.measured_bytes_per_s == pytest.approx(1e13)
    assert l2.effective_bytes_per_s() == pytest.approx(1e13)
    assert l2.capacity_bytes == 60 * 2**20
    assert "measured, no theoretical rate published" in l2.source
    floors = machine.latency_floors
    # graph: median one-kernel 2.1 us; (21.1 - 2.1) / 19 further kernels = 1.0 us each
    graph = floors.floor("graph")
    assert (graph.per_call_s, graph.assumed) == (2.1e-6, False)
    assert graph.per_kernel_s == pytest.approx(1.0e-6, rel=1e-12)
    # events: 6.5 us; (101.5 - 6.5) / 19 = 5.0 us per further launch
    assert floors.floor_s("events", 20) == pytest.approx(101.5e-6, rel=1e-12)
    # methods not measured keep the assumed floor, and say so
    assert floors.floor("kernel").assumed and floors.floor("wall").assumed
    assert profile["provenance"]["driver"] == "580.159.04"


def test_calibrate_without_gpu_is_one_line(tmp_path, capsys):
    out = tmp_path / "p.yaml"
    code = main(["calibrate", "--out", str(out), "--quick"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "GPU" in err
    assert not out.exists()


def test_refuses_a_fraction_below_the_floor():
    # an A100's 2.039e12 B/s read divided by the H200's 4.8e12: 0.4248, plausible; a third of
    # it (0.6797e12 B/s) is 0.1416 < 0.30: another card's theoretical rate
    ok = hbm("read", [2 * GiB / 2.039e12] * 9)
    assert check_plausible(ok, 4.8e12) == pytest.approx(2.039e12 / 4.8e12, rel=1e-12)
    slow = hbm("read", [3 * 2 * GiB / 2.039e12] * 9)
    with pytest.raises(RefusedMeasurement, match=r"0\.142x the theoretical.*another card"):
        check_plausible(slow, 4.8e12)
    # at the floor exactly it stands: 0.30 x 4.8e12 = 1.44e12 B/s
    edge = hbm("read", [2 * GiB / 1.44e12] * 9)
    assert check_plausible(edge, 4.8e12) == pytest.approx(0.30, rel=1e-12)


def test_theoretical_rates_come_from_the_matching_profile():
    machines = builtin_machines()
    assert choose_theoretical("NVIDIA H200", None, False, machines).name == "h200"
    assert choose_theoretical("NVIDIA A100-SXM4-80GB", None, False, machines).name == "a100-sxm"
    assert choose_theoretical("NVIDIA H200", "h200", False, machines).name == "h200"


def test_no_matching_profile_needs_theoretical_from():
    with pytest.raises(InputError, match=r"^--theoretical-from: no built-in profile matches "
                                         r"this card 'NVIDIA A40'"):
        choose_theoretical("NVIDIA A40", None, False, builtin_machines())
    # given explicitly (and forced, since an A40 is no A100), it is used
    assert choose_theoretical("NVIDIA A40", "a100-sxm", True, builtin_machines()).name == (
        "a100-sxm")


def test_another_cards_profile_needs_force():
    machines = builtin_machines()
    with pytest.raises(InputError, match=r"profile h200 does not match this card "
                                         r"'NVIDIA A100-SXM4-80GB' \(built-in a100-sxm does\)"):
        choose_theoretical("NVIDIA A100-SXM4-80GB", "h200", False, machines)
    assert choose_theoretical("NVIDIA A100-SXM4-80GB", "h200", True, machines).name == "h200"
    with pytest.raises(InputError, match=r"^--theoretical-from: unknown machine 'h900'"):
        choose_theoretical("NVIDIA H200", "h900", False, machines)


def calibrate_err(capsys, monkeypatch, *args):
    """Run calibrate with the GPU check made to fail loudly: an option error must come first."""
    import roofwise.cli.calibrate as calibrate_cli

    def no_gpu_check():
        raise AssertionError("looked for a GPU before checking the options")

    monkeypatch.setattr(calibrate_cli, "require_gpu", no_gpu_check)
    code = main(["calibrate", *args])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1
    return err.removeprefix("roofwise: error: ").rstrip("\n")


def test_options_are_checked_before_the_gpu(tmp_path, capsys, monkeypatch):
    out = str(tmp_path / "p.yaml")
    err = calibrate_err(capsys, monkeypatch, "--out", out, "--theoretical-from", "h300")
    assert err.startswith("--theoretical-from: unknown machine 'h300'; expected a profile file "
                          "or one of a10, a100-sxm")
    assert calibrate_err(capsys, monkeypatch, "--out", out, "--log", str(tmp_path)) == (
        f"--log: expected a .txt or .log path, got {str(tmp_path)!r}")
    assert calibrate_err(capsys, monkeypatch, "--out", out, "--log", "l.csv") == (
        "--log: expected a .txt or .log path, got 'l.csv'")
    folder = tmp_path / "d.txt"
    folder.mkdir()
    assert calibrate_err(capsys, monkeypatch, "--out", out, "--log", str(folder)) == (
        f"--log {folder}: is a directory; expected a file path to write")
    plain = tmp_path / "f"
    plain.write_text("")
    assert calibrate_err(capsys, monkeypatch, "--out", str(plain / "p.yaml")) == (
        f"--out {plain / 'p.yaml'}: cannot write here: {plain} is a file, not a folder")
    assert calibrate_err(capsys, monkeypatch, "--out", str(tmp_path / "p.json")) == (
        f"--out: expected a .yaml or .yml path, got {str(tmp_path / 'p.json')!r}")
    assert calibrate_err(capsys, monkeypatch, "--out", out, "--log", out.replace(
        ".yaml", ".yaml.txt"), "--theoretical-from", str(tmp_path / "nope.yaml")).startswith(
        str(tmp_path / "nope.yaml"))
    assert not list(tmp_path.glob("p.*"))


def test_theoretical_from_a_bad_file_keeps_its_file_in_the_error(tmp_path):
    from roofwise.measure.calibration_math import resolve_theoretical

    bad = tmp_path / "m.yaml"
    bad.write_text("name: m\n")
    with pytest.raises(InputError) as caught:
        resolve_theoretical(str(bad), builtin_machines())
    assert caught.value.where.startswith(str(bad))
    assert resolve_theoretical("h200", builtin_machines()).name == "h200"
    # an already-resolved profile is used as given
    h20 = builtin_machines()["h20"]
    assert choose_theoretical("NVIDIA H20-3e", h20, False, builtin_machines()) is h20


def test_good_options_reach_the_gpu_check(tmp_path, capsys):
    if __import__("torch").cuda.is_available():
        pytest.skip("a GPU is present")
    code = main(["calibrate", "--out", str(tmp_path / "p.yaml"), "--log",
                 str(tmp_path / "l.log"), "--theoretical-from", "h200"])
    err = capsys.readouterr().err
    assert code == 2 and "no CUDA GPU" in err
    assert list(tmp_path.iterdir()) == []  # the check wrote nothing
    # outputs never create folders, so a missing one is refused before any measuring, not
    # after it, when the profile could not be written
    code = main(["calibrate", "--out", str(tmp_path / "new" / "p.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and "no folder" in err and "no CUDA GPU" not in err


# ---- issue 8: clocks label regimes, bursts are the first calls, L2 and floors ----

GEMM_8K = gemm_flops(8192, 8192, 8192)  # 1.0995e12 FLOP


def gemm_window(variant, times, samples):
    return Measurement("unit", "tensor_core.bf16", variant, GEMM_8K, tuple(times),
                       samples[0], samples[-1], "torch bf16 8192", tuple(samples))


def test_clocks_falling_under_a_power_cap_are_the_sustained_regime_not_refused():
    # a sustained GEMM window: the SM clock falls 1980 -> 1410 MHz as the board holds its
    # 700 W cap (REFERENCES.md: sustained GEMMs hold the cap at ~1.2-1.4 GHz). The old check
    # refused any window whose SM clock moved more than 15 MHz.
    capped = [Clocks(sm_mhz=mhz, mem_mhz=3201, power_limit_w=700, throttle=("power_cap",))
              for mhz in (1980, 1755, 1530, 1410)]
    times = [1.80e-3] * 9  # 1.0995e12 / 1.8 ms = 610.8 TFLOP/s: 0.6173 of 989.5
    m = gemm_window("sustained", times, capped)
    assert check_plausible(m, 989.5e12) == pytest.approx(GEMM_8K / 1.8e-3 / 989.5e12)
    assert regime_from_clocks(m) == "sustained"
    judged = judge_measurements([m], builtin_machines()["h200"])
    assert judged.refused == () and judged.accepted[0][0].variant == "sustained"


def test_a_burst_window_the_clocks_show_capped_is_labelled_sustained():
    steady_capped = [Clocks(sm_mhz=1410, mem_mhz=3201, throttle=("power_cap",))] * 3
    m = gemm_window("burst", [1.8e-3] * 5, steady_capped)
    judged = judge_measurements([m], builtin_machines()["h200"])
    assert [a.variant for a, _ in judged.accepted] == ["sustained"]


def test_a_clock_that_moves_inside_one_burst_is_refused():
    moving = [Clocks(sm_mhz=1980, mem_mhz=3201), Clocks(sm_mhz=1830, mem_mhz=3201)]
    with pytest.raises(RefusedMeasurement, match="SM clock moved 1980 -> 1830 MHz"):
        check_plausible(gemm_window("burst", [1.45e-3] * 5, moving), 989.5e12)


def test_thermal_throttling_is_refused_whatever_the_regime():
    hot = [Clocks(sm_mhz=1980, mem_mhz=3201),
           Clocks(sm_mhz=1980, mem_mhz=3201, throttle=("power_cap", "hw_thermal"))]
    for variant in ("burst", "sustained"):
        with pytest.raises(RefusedMeasurement, match=r"throttled for temperature \(hw_thermal\)"):
            check_plausible(gemm_window(variant, [1.5e-3] * 5, hot), 989.5e12)


def test_burst_is_the_first_calls_after_idle_not_a_window_median():
    # after an idle pause: five calls at burst clocks (1.40 ms), then the clocks fall and the
    # next 0.1 s of back-to-back calls slow to 1.55 ms. The old burst, the median of ~0.1 s,
    # read the falling clocks; the first five are the burst.
    # The very first call wakes the clocks from idle (2.1 ms) and is left out.
    after_idle = ([2.1e-3] + [1.40e-3] * 5
                  + [1.40e-3 + 0.15e-3 * min(i, 20) / 20 for i in range(1, 70)])
    assert sorted(after_idle)[len(after_idle) // 2] > 1.5e-3  # what a window median gave
    first = burst_times(after_idle)
    assert first == (1.40e-3,) * 5
    m = gemm_window("burst", first, [STEADY, STEADY])
    assert m.rate_per_s == pytest.approx(GEMM_8K / 1.40e-3)  # 785.4 TFLOP/s: 0.7937
    assert check_plausible(m, 989.5e12) == pytest.approx(GEMM_8K / 1.40e-3 / 989.5e12)
    with pytest.raises(ValueError, match="at least 6"):
        burst_times(after_idle[:4])


def test_a_launch_bound_l2_figure_is_refused_as_implausible():
    # the old "L2 bandwidth": an eager torch.sum over a quarter of a 60 MB L2 (15 MB), timed
    # per call at ~20 us: 0.75 TB/s, i.e. the launch floor, slower even than HBM
    eager_sum = Measurement("memory", "l2", "read", 15e6, (20e-6,) * 9, STEADY, STEADY)
    with pytest.raises(RefusedMeasurement, match="within 10 launch floors"):
        check_l2(eager_sum, hbm_bytes_per_s=4.4e12, launch_floor_s=6.5e-6)
    # long enough, but no faster than HBM: not served from L2
    slow = Measurement("memory", "l2", "read", 15e6 * 100, (0.5e-3,) * 9, STEADY, STEADY)
    with pytest.raises(RefusedMeasurement, match="no faster than HBM"):
        check_l2(slow, hbm_bytes_per_s=4.4e12, launch_floor_s=6.5e-6)
    # one kernel re-reading the 15 MB buffer 200 times (3 GB) in 0.3 ms: 10 TB/s, plausible
    reread = Measurement("memory", "l2", "read", 15e6 * 200, (0.3e-3,) * 9, STEADY, STEADY)
    check_l2(reread, hbm_bytes_per_s=4.4e12, launch_floor_s=6.5e-6)
    judged = judge_measurements([hbm("read", [0.5e-3] * 9), eager_sum],
                                builtin_machines()["h200"], launch_floor_s=6.5e-6)
    assert [m.key for m, _ in judged.refused] == ["l2"]


def test_floors_are_measured_per_timing_method_and_written_to_the_profile(tmp_path):
    h200 = builtin_machines()["h200"]
    floors = [
        # one tiny add, then 20 per call: per further kernel = (many - one) / 19
        FloorMeasurement("kernel", (1.9e-6,), 20, (1.9e-6 + 19 * 1.2e-6,), "profiler"),
        FloorMeasurement("graph", (2.6e-6,) * 3, 20, (2.6e-6 + 19 * 1.4e-6,) * 3, "replay"),
        FloorMeasurement("events", (7.0e-6, 7.2e-6, 7.4e-6), 20, (7.2e-6 + 19 * 4.5e-6,),
                         "eager"),
        FloorMeasurement("wall", (15.0e-6,), 20, (15.0e-6 + 19 * 4.6e-6,), "host clock"),
    ]
    profile = build_profile("NVIDIA H200", [], h200, {"date": "2026-12-01"},
                            latency_floors=floors)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    loaded = parse_machine(yaml.safe_load(path.read_text()), str(path)).latency_floors
    expected = {"kernel": (1.9e-6, 1.2e-6), "graph": (2.6e-6, 1.4e-6),
                "events": (7.2e-6, 4.5e-6), "wall": (15.0e-6, 4.6e-6)}
    for timing, (per_call, per_kernel) in expected.items():
        floor = loaded.floor(timing)
        assert not floor.assumed and "roofwise calibrate on NVIDIA H200" in floor.source
        assert floor.per_call_s == pytest.approx(per_call, rel=1e-9)
        assert floor.per_kernel_s == pytest.approx(per_kernel, rel=1e-9)
    # a many-kernel call faster than one kernel (overlap) prices further kernels at 0, never
    # below
    assert FloorMeasurement("graph", (3e-6,), 20, (2e-6,)).per_kernel_s == 0.0


def test_throttle_reasons_are_named_from_the_nvml_bitmask():
    from roofwise.measure.calibrate import throttle_names

    # nvml.h: SwPowerCap 0x4, HwSlowdown 0x8, SwThermalSlowdown 0x20, HwThermalSlowdown 0x40;
    # GpuIdle 0x1 is not a throttle of a loaded window
    assert throttle_names(0x4 | 0x40 | 0x1) == ("power_cap", "hw_thermal")
    assert throttle_names(0) == ()


def test_a_windows_clocks_dump_as_plain_yaml():
    from roofwise.measure.calibrate import clocks_record

    capped = Clocks(sm_mhz=1410, mem_mhz=3201, power_limit_w=700, driver="580",
                    throttle=("power_cap",))
    text = yaml.safe_dump({"windows": [{"clocks": [clocks_record(capped)]}]})
    assert yaml.safe_load(text)["windows"][0]["clocks"][0]["throttle"] == ["power_cap"]
