"""R2: a profile calibrated below the card in front of you, seen across many rows.

One row above the envelope is noise, a miscount or a faster card; the rows cannot tell which.
Several rows bound by the same envelope ceiling (a unit's highest regime, or memory's highest
mix), most of that ceiling's rows, above it by a margin beyond run-to-run noise, say the
profile's fraction is stale for this card: one machine-level finding, with the fraction the
rows imply. Read against the envelope, never the regime or mix a row was priced with: a
burst-length run above the sustained rate is no sign of a stale profile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from roofwise.lint.findings import WARNING, Finding
from roofwise.output.analysis import Analysis
from roofwise.pricing.core import equal_to
from roofwise.pricing.reasons import IMPOSSIBLE_REASONS
from roofwise.verdicts.rules import BLANK, LATENCY_BOUND

STALE_MIN_ROWS = 3  # fewer rows above a ceiling than this is not a pattern
STALE_MARGIN = 1.02  # their median efficiency against it: beyond run-to-run noise (~1-2%)


def check_stale_profiles(analysis: Analysis) -> list[Finding]:
    """One R2 finding per (machine, ceiling) whose rows sit consistently above it."""
    return [finding for finding, _ in stale_profile_groups(analysis)]


def stale_profile_groups(analysis: Analysis) -> list[tuple[Finding, np.ndarray]]:
    """Each R2 finding with the rows it reads (every readable row bound by that ceiling, the
    ones above it and the rest): `analyze --json` carries the finding in those rows' `lint`."""
    a = analysis
    out: list[tuple[Finding, np.ndarray]] = []
    readable = ((a.judged.verdict != BLANK) & (a.judged.verdict != LATENCY_BOUND)
                & ((a.judged.flags & np.int32(IMPOSSIBLE_REASONS)) == 0))
    above_any = readable & (a.judged.envelope_efficiency > 1.0)  # NaN compares False
    if np.count_nonzero(above_any) < STALE_MIN_ROWS:
        return out  # no ceiling has enough rows above it
    memory = a.priced.bound_memory
    binding = a.priced.binding_unit
    for name, machine in a.machines.items():
        mine = readable & a.on_machine(name)
        for is_memory in (True, False):
            rows = mine & (memory == is_memory)
            # memory is one ceiling; a unit's is stale only with rows above it, so its key
            # is among theirs (a few rows, not every row's unit as a string)
            keys = [""] if is_memory else sorted(
                {str(k) for k in np.asarray(binding[rows & above_any]).tolist()})
            for key in keys:
                group = np.flatnonzero(rows if is_memory else rows & equal_to(binding, key))
                efficiency = a.judged.envelope_efficiency[group]
                above = efficiency[efficiency > 1.0]
                if (len(above) < STALE_MIN_ROWS or 2 * len(above) < len(group)
                        or float(np.median(above)) < STALE_MARGIN):
                    continue
                ceiling = machine.ceiling(bool(is_memory), str(key))
                if ceiling.fraction is None:
                    continue  # an uncalibrated ceiling is M1's business
                implied = ceiling.fraction * float(np.median(above))
                out.append((Finding(
                    "R2", WARNING, f"{machine.name} {ceiling.name}",
                    f"{len(above)} of {len(group)} rows bound by {ceiling.name} sit above it "
                    f"(median {float(np.median(above)):.1%} of it, below theoretical): they "
                    f"imply {implied:.4f} of theoretical where {machine.name} says "
                    f"{ceiling.fraction:.4f}; the profile looks calibrated below this card",
                    "run `roofwise calibrate` on this card and read its rows with the profile "
                    "it writes (or recount, if the rows share an accounting slip)"), group))
    return out


ANALYSIS_CHECKS: Mapping[str, Callable[[Analysis], list[Finding]]] = {
    "R2": check_stale_profiles}
