"""The numbers a row's floor sentences are made of, gathered from its columns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from roofwise.explain import reason_text
from roofwise.pricing.reasons import Reason
from roofwise.profiles.machine import Machine, timing_method

if TYPE_CHECKING:
    from roofwise.verdicts.analysis import Verdicts


def floor_facts(verdicts: Verdicts, i: int, machine: Machine) -> reason_text.FloorFacts:
    """The floor row `i` was read against, in parts."""
    stated = timing_method(str(verdicts.columns.timing[i]))
    overlapped = bool(int(verdicts.judged.flags[i]) & Reason.FLOOR_OVERLAPPED)
    timing = "kernel" if overlapped else stated
    kernels = verdicts.columns.kernel_count(i)
    floor = machine.latency_floors.floor(timing)
    return reason_text.FloorFacts(timing, kernels, floor.per_call_s, floor.per_kernel_s,
                                  floor.floor_s(kernels), floor.assumed, floor.source,
                                  stated if overlapped else "")
