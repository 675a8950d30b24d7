"""A malformed profile names the file and the key, and says what was expected."""

from __future__ import annotations

import textwrap

import pytest

from roofwise.base.errors import InputError
from roofwise.profiles.load import load_machine

GOOD = """
name: test
memory:
  hbm:
    theoretical_bytes_per_s: 1.0e+12
    calibration_by_mix: {read: 0.9}
units:
  cuda_core.fp32:
    theoretical_ops_per_s: 1.0e+13
    calibration_by_regime: {sustained: 0.8}
"""


def write(tmp_path, text):
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_good_profile_loads_with_numeric_strings(tmp_path):
    machine = load_machine(write(tmp_path, GOOD.replace("1.0e+12", "'1000e9'")))
    assert machine.dram.effective_bytes_per_s() == pytest.approx(0.9e12)


@pytest.mark.parametrize(("old", "new", "where", "expected"), [
    ("calibration_by_mix: {read: 0.9}", "calibration_by_mix: {read: 1.2}",
     "memory.hbm.calibration_by_mix.read", "fraction in (0, 1]"),
    ("theoretical_ops_per_s: 1.0e+13", "theoretical_ops_per_s: -5",
     "units.cuda_core.fp32.theoretical_ops_per_s", "positive number"),
    ("theoretical_ops_per_s: 1.0e+13", "theoretical_ops_per_s: 0",
     "units.cuda_core.fp32.theoretical_ops_per_s", "positive number"),
    ("theoretical_ops_per_s: 1.0e+13", "theoretical_ops_per_s: .nan",
     "units.cuda_core.fp32.theoretical_ops_per_s", "positive number"),
    ("calibration_by_regime: {sustained: 0.8}",
     "calibration_by_regime: {sustained: 0.8}\n    speed: 3",
     "units.cuda_core.fp32.speed", "unknown key"),
    ("cuda_core.fp32:", "cuda core:", "units.cuda core", "family.variant"),
    ("{read: 0.9}", "{reed: 0.9}", "calibration_by_mix.reed", "unknown access mix"),
    ("name: test", "name: test\ncolour: red", "colour", "unknown key"),
])
def test_each_fault_names_file_and_key(tmp_path, old, new, where, expected):
    path = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(InputError) as info:
        load_machine(path)
    message = str(info.value)
    assert str(path) in message
    assert where in message
    assert expected in message


def test_missing_theoretical_key_says_null_marks_a_gap(tmp_path):
    path = write(tmp_path, GOOD.replace("    theoretical_bytes_per_s: 1.0e+12\n", ""))
    with pytest.raises(InputError, match="write null to mark a gap"):
        load_machine(path)


def test_malformed_yaml_names_the_line(tmp_path):
    path = write(tmp_path, "name: x\nmemory: [unclosed\n")
    with pytest.raises(InputError, match=rf"{path}:\d+: malformed YAML"):
        load_machine(path)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="cannot read file"):
        load_machine(tmp_path / "nope.yaml")


def test_unknown_regime_in_a_profile(tmp_path):
    path = write(tmp_path, GOOD.replace("{sustained: 0.8}", "{turbo: 0.9}"))
    with pytest.raises(InputError, match=r"calibration_by_regime\.turbo: unknown regime"):
        load_machine(path)


def test_a_profile_that_is_not_utf8(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_bytes(b"name: x\n\xe9t\xe9: 1\n")
    with pytest.raises(InputError, match=r"not UTF-8 text \(byte 8\)"):
        load_machine(path)


def test_a_ledger_is_not_a_profile(examples):
    with pytest.raises(InputError, match="this is a ledger, not a machine profile"):
        load_machine(examples / "qk_norm_rope_quant.yaml")
