"""Rules shared by the ledger and the record checks, so both decide M3 and M4 the same way.

Each rule reads counts (bytes, FLOPs, a roof, the units contraction is counted on) against a
ledger that says how the operator should be counted: the ledger's own stages and work, or a
reference ledger the user gave.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from roofwise.base.errors import InputError
from roofwise.ledgers.ledger import Ledger, Role, fuse
from roofwise.lint.findings import busiest, dtype_family, is_matrix_unit, is_sfu_unit, same_count

MAX_STAGES_SPLIT = 8  # 2**(n-1) ways to cut n stages into consecutive calls


@dataclass(frozen=True)
class Reading:
    """One way to misprice a composed call: part of its stages, or its stages cut into calls."""

    label: str
    bytes: int
    flops: float
    calls: int


def decompositions(ledger: Ledger) -> tuple[Ledger | None, list[Reading]]:
    """The stages fused into one call, and every partial group or multi-call split of them.

    Groups and calls are runs of consecutive stages, each run fused; the empty list when the
    ledger has fewer than two stages (or too many to enumerate). A split carries the FLOPs
    of all the stages; a partial group carries its own.
    """
    stages = ledger.stages
    n = len(stages)
    if n < 2 or n > MAX_STAGES_SPLIT:
        return None, []
    groups: dict[tuple[int, int], Ledger] = {}
    try:
        for i in range(n):
            for j in range(i + 1, n + 1):
                groups[i, j] = (stages[i] if j - i == 1 else
                                fuse("+".join(s.name for s in stages[i:j]), stages[i:j],
                                     roof=ledger.roof))
    except InputError:
        return None, []
    out = [Reading(f"stage {g.name}'s" if j - i == 1 else f"stages {g.name} fused", g.bytes,
                   g.flops, 1) for (i, j), g in groups.items() if (i, j) != (0, n)]
    total_flops = sum(s.flops for s in stages)
    splits: dict[tuple[int, int], list[str]] = {}  # (calls, bytes) -> the cuts that give it
    for mask in range(1, 2 ** (n - 1)):
        bounds = [0, *[k for k in range(1, n) if mask >> (k - 1) & 1], n]
        calls = [groups[a, b] for a, b in itertools.pairwise(bounds)]
        splits.setdefault((len(calls), sum(c.bytes for c in calls)), []).append(
            " | ".join(c.name for c in calls))
    out += [Reading(f"the {calls}-call total ({' or '.join(cuts)})", nbytes, total_flops, calls)
            for (calls, nbytes), cuts in splits.items()]
    return groups[0, n], out


def misreadings(fused: Ledger, readings: Iterable[Reading], counted_bytes: int
                ) -> list[Reading]:
    """The readings a count could be: those whose bytes differ from the one fused call's and
    from `counted_bytes` (what the ledger, or reference, itself declares)."""
    return [r for r in readings if r.bytes not in (fused.bytes, counted_bytes)]


def misread(nbytes: float, flops: float, readings: Iterable[Reading]) -> Reading | None:
    """The reading whose bytes AND FLOPs these are, else None.

    Equal bytes alone can be a coincidence: the case study's payload (no lookups) equals its
    quant stage's bytes, but carries the whole operator's FLOPs; that is an M6, not an M4.
    """
    for r in readings:
        if same_count(nbytes, r.bytes) and same_count(flops, r.flops):
            return r
    return None


def contraction_units(ledger: Ledger) -> dict[str, float]:
    units: dict[str, float] = {}
    for w in ledger.work:
        if w.op_class == "contraction" and w.ops > 0:
            units[w.unit] = units.get(w.unit, 0.0) + w.ops
    return units


def busiest_vector_unit(ledger: Ledger) -> str:
    candidates = {k: v for k, v in ledger.ops_by_unit.items()
                  if v > 0 and not is_matrix_unit(k) and not is_sfu_unit(k)}
    return busiest(candidates) if candidates else "cuda_core.fp32"


def dtype_followers(ledger: Ledger, roof: str) -> list[str]:
    """Input tensors whose dtype family names the roof (fp8 inputs, tensor_core.fp8 roof)."""
    roof_family = dtype_family(roof.partition(".")[2])
    return [f"{t.name} ({t.dtype})" for t in ledger.tensors
            if t.role in (Role.INPUT, Role.INOUT, Role.LOOKUP)
            and dtype_family(t.dtype) == roof_family]


@dataclass(frozen=True)
class RoofCall:
    """What `source` says the roof should be, and the ops that say it."""

    runs_on: str
    ops: float
    what: str  # "contraction" or "work"


def expected_roof(roof: str, counted_on: Iterable[str], source: Ledger) -> RoofCall | None:
    """The unit `source` runs the operator on, when `roof` (or contraction counted on
    `counted_on`) disagrees with it; None when they agree or `source` cannot say.

    When `source` contracts, a matrix roof must be a unit it contracts on, and contraction
    may be counted on no other. A roof named after one of `source`'s input dtypes
    (tensor_core.fp8 for fp8 KV, cuda_core.bf16 for bf16 inputs) on which `source` does no
    work is wrong too, when `source` contracts or works on the same unit at another
    precision: the roof followed the dtype, not the algorithm.
    """
    contraction = contraction_units(source)
    if contraction:
        idle_namesake = (source.ops_by_unit.get(roof, 0.0) <= 0
                         and bool(dtype_followers(source, roof)))
        wrong_roof = roof not in contraction and (is_matrix_unit(roof) or idle_namesake)
        wrong_work = any(u not in contraction for u in counted_on)
        if wrong_roof or wrong_work:
            runs_on = busiest(contraction)
            return RoofCall(runs_on, contraction[runs_on], "contraction")
        return None
    if (is_matrix_unit(roof) or source.ops_by_unit.get(roof, 0.0) > 0
            or not dtype_followers(source, roof) or source.flops <= 0):
        return None
    runs_on = busiest_vector_unit(source)
    if runs_on.partition(".")[0] != roof.partition(".")[0]:
        return None  # another unit altogether, not another precision of the same one
    return RoofCall(runs_on, source.ops_by_unit.get(runs_on, 0.0), "work")
