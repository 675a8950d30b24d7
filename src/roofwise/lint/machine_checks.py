"""Checks on a machine profile (M1), and the machine facts the other checks read.

`sparse_reason` and the datasheet margin decide M1 on ledgers and records as well;
`units_missing` decides R1 (a unit the profile does not have) on both.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping

from roofwise.base import fmt
from roofwise.lint.findings import ERROR, WARNING, Finding
from roofwise.profiles.machine import ComputeUnit, Machine

# Calibrations on record run 0.63-0.94 of the datasheet, so a datasheet ceiling whose time is
# within 2x of the speed of light could decide the reading once measured.
DATASHEET_MARGIN = 0.5
_SPARSE_TOLERANCE = 1e-3  # relative
# Dense datasheet peaks (ops/s) by unit key, from docs/references.md; sparse peaks are 2x.
KNOWN_DENSE_PEAKS: Mapping[str, tuple[tuple[str, float], ...]] = {
    "tensor_core.fp16": (("H100/H200 SXM", 989.5e12), ("A100 SXM", 312e12), ("H20", 148e12),
                         ("B200", 2.25e15), ("H100 PCIe", 756.5e12), ("L40S", 362.05e12),
                         ("RTX 4090 (FP32 accumulate)", 165.2e12)),
    "tensor_core.bf16": (("H100/H200 SXM", 989.5e12), ("A100 SXM", 312e12), ("H20", 148e12),
                         ("B200", 2.25e15), ("H100 PCIe", 756.5e12), ("L40S", 362.05e12),
                         ("RTX 4090", 165.2e12)),
    "tensor_core.tf32": (("H100/H200 SXM", 494.7e12), ("A100 SXM", 156e12), ("H20", 74e12),
                         ("B200", 1.125e15), ("H100 PCIe", 378e12), ("L40S", 183e12),
                         ("RTX 4090", 82.6e12)),
    "tensor_core.fp8": (("H100/H200 SXM", 1979e12), ("H20", 296e12), ("B200", 4.5e15),
                        ("H100 PCIe", 1513e12), ("L40S", 733e12),
                        ("RTX 4090 (FP32 accumulate)", 330.3e12)),
    "matrix_core.fp16": (("MI300X/MI325X", 1307.4e12),),
    "matrix_core.bf16": (("MI300X/MI325X", 1307.4e12),),
    "matrix_core.tf32": (("MI300X/MI325X", 653.7e12),),
    "matrix_core.fp8": (("MI300X/MI325X", 2614.9e12),),
}
# A figure 2x a dense one that is not a sparse peak: GeForce cards' FP16-accumulate rate.
_FP16_ACCUMULATE = ("RTX 4090 (FP32 accumulate)",)
_SPARSE_WORDS = re.compile(r"\bsparse\b|\bsparsity\b|\b2:4\b", re.IGNORECASE)
_DENSE_WORDS = re.compile(r"\bdense\b|\bno (structured )?sparsity\b", re.IGNORECASE)

SPARSE_FIX = "use the dense datasheet figure (half the sparse one) and calibrate it"


def sparse_reason(unit: ComputeUnit) -> str | None:
    """Why `unit`'s theoretical rate looks like a sparse (2:4) peak; None when it does not."""
    rate = unit.theoretical_ops_per_s
    if rate is not None:
        known = KNOWN_DENSE_PEAKS.get(unit.key, ())
        if not any(math.isclose(rate, dense, rel_tol=_SPARSE_TOLERANCE) for _, dense in known):
            for part, dense in known:
                if math.isclose(rate, 2 * dense, rel_tol=_SPARSE_TOLERANCE):
                    also = (" or the FP16-accumulate figure, which FP32-accumulate kernels "
                            "never reach" if part in _FP16_ACCUMULATE else "")
                    return (f"{unit.key} theoretical {fmt.tera_rate(rate, unit.key, '.1f')} is 2x "
                            f"the dense {part} datasheet figure "
                            f"{fmt.tera_rate(dense, unit.key, '.1f')} (a sparse "
                            f"peak{also})")
    if _SPARSE_WORDS.search(unit.source) and not _DENSE_WORDS.search(unit.source):
        return f"{unit.key} source says sparse: {unit.source!r}"
    return None


def uncalibrated_unit_fix(key: str) -> str:
    return f"measure {key} on the card (roofwise calibrate) and read verdicts with that rate"


def uncalibrated_memory_fix(level: str) -> str:
    return f"measure {level} access mixes on the card (roofwise calibrate) before trusting SOL"


def units_missing(machine: Machine, keys: Iterable[str]) -> list[str]:
    """The keys (in order, once each) that name no compute unit of `machine`."""
    return [k for k in dict.fromkeys(keys) if machine.unit(k) is None]


def units_missing_reason(machine: Machine, missing: list[str]) -> str:
    one = len(missing) == 1
    return (f"{'unit' if one else 'units'} {', '.join(missing)} {'is' if one else 'are'} not "
            f"on {machine.name} (its units: {', '.join(machine.units)}): nothing can price "
            f"{'it' if one else 'them'} there")


def check_machine_m1(machine: Machine) -> list[Finding]:
    out: list[Finding] = []
    for level in machine.memory.values():
        if level.theoretical_bytes_per_s is not None and not level.calibration_by_mix:
            out.append(Finding(
                "M1", WARNING, f"{machine.name} {level.name}",
                f"{level.name} {level.theoretical_bytes_per_s / 1e9:.0f} GB/s is the datasheet "
                f"figure: no access mix was measured{_chose(level.choice)}",
                uncalibrated_memory_fix(level.name)))
    for unit in machine.units.values():
        sparse = sparse_reason(unit)
        if sparse is not None:
            out.append(Finding("M1", ERROR, f"{machine.name} {unit.key}", sparse, SPARSE_FIX))
        elif unit.theoretical_ops_per_s is not None and not unit.calibrated:
            out.append(Finding(
                "M1", WARNING, f"{machine.name} {unit.key}",
                f"{unit.key} {fmt.tera_rate(unit.theoretical_ops_per_s, unit.key)} is the "
                f"datasheet rate: no regime was measured{_chose(unit.choice)}",
                uncalibrated_unit_fix(unit.key)))
    return out


def _chose(choice: str) -> str:
    """Which vendor figure the profile took where two exist (sparse or dense, FP16 or FP32
    accumulate, GB or GiB, launch or revised), as the profile says."""
    return f" (the profile took {choice})" if choice else ""


MACHINE_CHECKS: Mapping[str, Callable[[Machine], list[Finding]]] = {"M1": check_machine_m1}


def lint_machine(machine: Machine) -> list[Finding]:
    """M1 on a profile: every datasheet ceiling and every sparse peak it holds."""
    return [f for check in MACHINE_CHECKS.values() for f in check(machine)]
