"""A grid of steps (batch, seq, context) and where each GEMM of the model turns compute-bound.

A GEMM (m tokens x k) @ (k x n) reads its weights once whatever m is, so it is memory-bound
for few tokens and turns compute-bound once m passes a crossover that depends on the regime
(sustained or burst tensor-core rates). The crossover is found exactly, by bisection on m
over the operator library's `gemm` ledger priced on the machine; the grid says at which of
its points each GEMM row is already compute-bound.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from roofwise.base.errors import InputError
from roofwise.models.project import Projection
from roofwise.ops.gemm import gemm
from roofwise.pricing.core import price_ledger
from roofwise.profiles.machine import Machine

SWEEP_KEYS = ("batch", "seq", "context")
REGIMES = ("sustained", "burst")
MAX_TOKENS = 1 << 24


def parse_sweeps(texts: Sequence[str]) -> dict[str, list[int]]:
    """`["batch=1,8,64", "context=1024,8192"]` -> {"batch": [1, 8, 64], ...}."""
    found: dict[str, list[int]] = {}
    for text in texts:
        key, sep, values = text.partition("=")
        key = key.strip()
        if not sep or key not in SWEEP_KEYS:
            raise InputError(f"--sweep {text}", f"expected KEY=v1,v2,... with KEY one of "
                                                f"{', '.join(SWEEP_KEYS)}")
        if key in found:
            raise InputError(f"--sweep {key}", "given twice; give it once")
        try:
            numbers = [int(v) for v in values.split(",") if v.strip()]
        except ValueError:
            raise InputError(f"--sweep {key}", f"expected integers, got {values!r}") from None
        if not numbers or any(n < (0 if key == "context" else 1) for n in numbers):
            raise InputError(f"--sweep {key}", f"expected positive integers, got {values!r}")
        found[key] = numbers
    return found


def grid(base: Mapping[str, int], sweeps: Mapping[str, list[int]]) -> list[dict[str, int]]:
    keys = list(sweeps)
    return [{**base, **dict(zip(keys, values, strict=True))}
            for values in itertools.product(*(sweeps[k] for k in keys))]


@dataclass(frozen=True)
class Crossover:
    layer: str
    op: str
    n: int
    k: int
    dtype: str
    tokens_by_regime: Mapping[str, int | None]  # None: memory-bound up to MAX_TOKENS
    first_point_by_regime: Mapping[str, int | None]  # index into the grid, None: never


def gemm_shape(row_shapes: str) -> tuple[int, int, str] | None:
    """(n, k, dtype) of an mm row's shapes text `[m, k] bf16, [k, n] bf16`; None otherwise.
    The dtype is the activations' (a quantized weight is shown as stored: `[k, n] int4`)."""
    found = re.findall(r"\[(\d+), (\d+)\] (\w+)", row_shapes)
    if len(found) != 2:
        return None
    k, n, _ = found[1]
    return int(n), int(k), found[0][2]


def crossover_tokens(machine: Machine, n: int, k: int, dtype: str, regime: str) -> int | None:
    """The fewest tokens m at which an (m x k) @ (k x n) GEMM is compute-bound."""
    def compute_bound(m: int) -> bool:
        return price_ledger(gemm(m, n, k, dtype=dtype), machine, regime).bound == "compute"

    if not compute_bound(MAX_TOKENS):
        return None
    low, high = 1, MAX_TOKENS
    while low < high:
        middle = (low + high) // 2
        if compute_bound(middle):
            high = middle
        else:
            low = middle + 1
    return low


def crossovers(points: list[dict[str, int]],
               projections_by_regime: Mapping[str, list[Projection]],
               machine: Machine) -> list[Crossover]:
    """For each GEMM row (aten::mm) of the model: its exact crossover and first grid point."""
    first = projections_by_regime[REGIMES[0]][0]
    found: list[Crossover] = []
    seen: set[tuple[str, str]] = set()
    for row in first.rows:
        if row.op != "aten::mm" or (row.layer, row.op) in seen:
            continue
        shape = gemm_shape(row.shapes)
        if shape is None:
            continue
        seen.add((row.layer, row.op))
        n, k, dtype = shape
        tokens: dict[str, int | None] = {}
        first_point: dict[str, int | None] = {}
        for regime in REGIMES:
            tokens[regime] = crossover_tokens(machine, n, k, dtype, regime)
            first_point[regime] = next(
                (i for i, p in enumerate(projections_by_regime[regime])
                 if any(r.layer == row.layer and r.op == row.op and r.bound == "compute"
                        for r in p.rows)), None)
        found.append(Crossover(row.layer, row.op, n, k, dtype, tokens, first_point))
    return found


def run_grid(points: list[dict[str, int]],
             step: Callable[[dict[str, int], str | None], Projection]
             ) -> dict[str, list[Projection]]:
    return {regime: [step(p, regime) for p in points] for regime in REGIMES}
