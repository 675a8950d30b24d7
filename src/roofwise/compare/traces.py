"""Two profiler traces, op group by op group: what got slower beyond the noise, what faster.

Groups (op and input shapes, as `traces.analysis.groups`) are matched by name and shapes. The
change read is the mean time per call, so a step that runs an op more often is not called a
slower op (the counts are shown beside). The noise is the calls' own spread: the calls of one
group in one trace run the same kernel on the same shapes, so their standard deviation is how
much one call varies. A change is beyond the noise when the difference of the means exceeds
twice its standard error, sqrt(sd_base^2 / n_base + sd_new^2 / n_new) (about 95% for normal
noise); with a single call on either side the spread is unknown and the threshold alone
decides, as for records without p10/p90. Below either sits the clock: a trace that writes
whole microseconds cannot tell per-call means apart by less than one tick per kernel a call
launches (5 us against 6 us is one tick, not +20%), so the noise is never less than that.
Either way the relative change must exceed the threshold.

Two cards of two vendors run the same aten op under each vendor's library name (cuDNN's
`aten::cudnn_convolution` on NVIDIA, MIOpen's `aten::miopen_convolution` on AMD, with the same
recorded tensors): such a pair is one group, named by both, so that an H100 trace and an
MI300X trace of one model line up op for op. The verdicts (the most common of
each group) are shown beside the change; a trace group's change is read whatever its
verdict, since its time is measured either way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from roofwise.compare.runs import IMPROVEMENT, ONLY_BASE, ONLY_NEW, REGRESSION, UNCHANGED
from roofwise.traces.analysis import Group

NOISE_SIGMAS = 2.0
_ORDER = {REGRESSION: 0, IMPROVEMENT: 1, ONLY_BASE: 2, ONLY_NEW: 3, UNCHANGED: 4}


def main_verdict(verdicts: Mapping[str, int]) -> str:
    """The most common verdict of a group (ties: the name first in order)."""
    return min(verdicts.items(), key=lambda kv: (-kv[1], kv[0]))[0] if verdicts else "-"


@dataclass(frozen=True)
class GroupChange:
    op: str
    shapes: str
    status: str
    base: Group | None
    new: Group | None
    change: float  # new mean per call over base mean, minus 1; NaN on one side only
    noise_s: float | None  # twice the standard error of the difference; None when unknown

    @property
    def base_per_call_s(self) -> float | None:
        return None if self.base is None else self.base.time_s / self.base.count

    @property
    def new_per_call_s(self) -> float | None:
        return None if self.new is None else self.new.time_s / self.new.count

    @property
    def beyond_noise(self) -> bool | None:
        if self.noise_s is None or self.base_per_call_s is None or self.new_per_call_s is None:
            return None
        return _beyond(self.new_per_call_s - self.base_per_call_s, self.noise_s)

    @property
    def time_added_s(self) -> float:
        """Total time on the new side minus the base side (counts included)."""
        return ((self.new.time_s if self.new else 0.0)
                - (self.base.time_s if self.base else 0.0))

    @property
    def verdicts(self) -> tuple[str, str]:
        return (main_verdict(self.base.verdicts) if self.base else "-",
                main_verdict(self.new.verdicts) if self.new else "-")

    def as_json(self) -> dict[str, Any]:
        b, n = self.verdicts
        return {"op": self.op, "shapes": self.shapes, "status": self.status,
                "base_count": self.base.count if self.base else None,
                "new_count": self.new.count if self.new else None,
                "base_time_s": self.base.time_s if self.base else None,
                "new_time_s": self.new.time_s if self.new else None,
                "base_per_call_s": self.base_per_call_s, "new_per_call_s": self.new_per_call_s,
                "per_call_change": self.change if math.isfinite(self.change) else None,
                "noise_s": self.noise_s, "beyond_noise": self.beyond_noise,
                "time_added_s": self.time_added_s, "base_verdict": b, "new_verdict": n,
                "verdict_changed": b != n}


def compare_groups(base: Sequence[Group], new: Sequence[Group],
                   threshold: float, tick_s: float = 0.0) -> list[GroupChange]:
    """Every group of either side, regressions first (most time added first). `tick_s`: the
    coarser of the two traces' clock steps in kernel durations."""
    by_key = {_key(g): g for g in new}
    seen: set[tuple[str, str, bool]] = set()
    changes = []
    for g in base:
        key = _key(g)
        seen.add(key)
        changes.append(_pair(g.shapes, g, by_key.get(key), threshold, tick_s))
    changes += [_pair(g.shapes, None, g, threshold, tick_s) for g in new
                if _key(g) not in seen]
    return sorted(changes, key=lambda c: (_ORDER[c.status], -abs(c.time_added_s)))


# The MIOpen name of each aten op that has a cuDNN one, with the same recorded inputs.
_MIOPEN_AS_CUDNN = {f"aten::miopen_{name}": f"aten::cudnn_{name}" for name in (
    "convolution", "convolution_transpose", "convolution_relu", "convolution_add_relu",
    "batch_norm", "batch_norm_backward")}


def _key(group: Group) -> tuple[str, str, bool]:
    """A group's identity: its op (a vendor's library op by its cuDNN name), its shapes, and
    whether it is communication (an op's calls that launched a collective are a group apart
    from its other calls)."""
    return _MIOPEN_AS_CUDNN.get(group.op, group.op), group.shapes, group.communication


def _pair(shapes: str, base: Group | None, new: Group | None,
          threshold: float, tick_s: float = 0.0) -> GroupChange:
    # the op's name on each side, once: two where two vendors name the same op
    key = (" / ".join(dict.fromkeys(g.op for g in (base, new) if g is not None)), shapes)
    if base is None or new is None:
        return GroupChange(*key, ONLY_NEW if base is None else ONLY_BASE, base, new,
                           math.nan, None)
    b, n = base.time_s / base.count, new.time_s / new.count
    change = n / b - 1 if b > 0 else math.nan
    noise = (NOISE_SIGMAS * math.sqrt(base.call_std_s ** 2 / base.count
                                      + new.call_std_s ** 2 / new.count)
             if base.count > 1 and new.count > 1 else None)
    # each kernel's duration is read to the clock's tick: a call of k kernels to k ticks
    kernels_per_call = max(base.kernels / base.count, new.kernels / new.count, 1.0)
    resolution = tick_s * kernels_per_call
    if resolution > 0:
        noise = resolution if noise is None else max(noise, resolution)
    beyond = noise is None or _beyond(n - b, noise)
    status = UNCHANGED
    if math.isfinite(change) and beyond and abs(change) > threshold:
        status = REGRESSION if change > 0 else IMPROVEMENT
    return GroupChange(*key, status, base, new, change, noise)


def _beyond(difference_s: float, noise_s: float) -> bool:
    """Beyond the noise; a difference of exactly the noise (one tick: 6 us - 5 us, which
    binary floats make a hair more) is within."""
    return abs(difference_s) > noise_s * (1 + 1e-9)
