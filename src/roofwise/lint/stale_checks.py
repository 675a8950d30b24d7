"""R2: a profile calibrated below the card in front of you, seen across many rows.

One row above the envelope is noise, a miscount or a faster card; the rows cannot tell which.
Several rows bound by the same envelope ceiling (a unit's highest regime, or memory's highest
mix), most of that ceiling's rows, above it by a margin beyond run-to-run noise, say the
profile's fraction is stale for this card: one machine-level finding, with the fraction the
rows imply. Read against the envelope, never the regime or mix a row was priced with: a
burst-length run above the sustained rate is no sign of a stale profile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np
import polars as pl

from roofwise.base.text_columns import coded
from roofwise.lint.findings import WARNING, Finding
from roofwise.output.analysis import Analysis
from roofwise.pricing.reasons import IMPOSSIBLE_REASONS
from roofwise.profiles.machine import Machine
from roofwise.verdicts.rules import BLANK, LATENCY_BOUND

STALE_MIN_ROWS = 3  # fewer rows above a ceiling than this is not a pattern
STALE_MARGIN = 1.02  # their median efficiency against it: beyond run-to-run noise (~1-2%)


def check_stale_profiles(analysis: Analysis) -> list[Finding]:
    """One R2 finding per (machine, ceiling) whose rows sit consistently above it, the
    analysis read as a whole."""
    groups = stale_groups(stale_rows(analysis))
    return [finding for finding, _ in stale_findings(groups, analysis.machines)]


def stale_profile_groups(analysis: Analysis, shard: str = ""
                         ) -> list[tuple[Finding, np.ndarray]]:
    """Each R2 finding with the rows it reads (every readable row bound by that ceiling, the
    ones above it and the rest): `analyze --json` carries the finding in those rows' `lint`.
    A file is written a batch at a time, so each batch's rows carry the R2 of that batch: the
    sentence names the lines it counted, and `shard`, the file of a folder they are in (the
    summary of `analyze` and `lint` count the whole input, `file_finding_kinds`)."""
    a = analysis
    above = (a.judged.envelope_efficiency > 1.0) & (a.judged.verdict != BLANK)
    if np.count_nonzero(above) < STALE_MIN_ROWS:
        return []  # no ceiling has rows enough above it (most batches: skip the grouping)
    lines = a.columns.line
    scope = ""  # rows of several files at once are the whole input: no lines to name
    if a.columns.file_codes is None and len(lines) and lines.min() > 0:
        scope = f" in lines {int(lines.min()):,}-{int(lines.max()):,}" + (
            f" of {shard}" if shard else "")
    rows = stale_rows(analysis)
    return [(finding, rows.filter((pl.col("machine") == machine)
                                  & (pl.col("ceiling") == ceiling))["row"].to_numpy())
            for finding, (machine, ceiling) in stale_findings(stale_groups(rows), a.machines,
                                                              scope)]


def stale_rows(analysis: Analysis) -> pl.DataFrame:
    """What R2 reads of each row that can show a stale profile (judged, above no floor, not
    impossible), as columns: `row`, `machine`, `ceiling` ("" for memory's, else the binding
    unit) and `efficiency` against the envelope."""
    a = analysis
    readable = ((a.judged.verdict != BLANK) & (a.judged.verdict != LATENCY_BOUND)
                & ((a.judged.flags & np.int32(IMPOSSIBLE_REASONS)) == 0))
    rows = np.flatnonzero(readable)
    names = list(a.machines)
    memory = a.priced.bound_memory[rows]
    binding = np.asarray(a.priced.binding_unit)[rows]
    return pl.DataFrame({
        "row": pl.Series(rows, dtype=pl.Int64),
        "machine": coded("machine", a.machine_index[rows], names),
        "ceiling": pl.Series("ceiling", np.where(memory, "", binding), dtype=pl.Utf8),
        "efficiency": pl.Series(a.judged.envelope_efficiency[rows], dtype=pl.Float64),
    })


# (machine, ceiling) -> (the rows bound by that ceiling, the efficiencies of those above it)
StaleGroups = dict[tuple[str, str], tuple[int, np.ndarray]]


def stale_groups(rows: pl.DataFrame) -> StaleGroups:
    """`stale_rows` by ceiling: how many rows each binds and the efficiencies above it (all
    R2 needs: a file read in batches keeps these of each batch, eight bytes a row above a
    ceiling, and judges them together, `merged_stale_groups`)."""
    if not len(rows):
        return {}
    ordered = rows.sort("machine", "ceiling")
    keys = ordered.group_by("machine", "ceiling", maintain_order=True).len()
    efficiency = ordered["efficiency"].to_numpy()
    ends = np.cumsum(keys["len"].to_numpy())
    out: StaleGroups = {}
    for (machine, ceiling, n), end in zip(keys.iter_rows(), ends.tolist(), strict=True):
        part = efficiency[end - n:end]
        out[(machine, ceiling)] = (n, part[part > 1.0])  # NaN compares False
    return out


def merged_stale_groups(parts: Iterable[StaleGroups]) -> StaleGroups:
    """Several batches' groups as one file's: counts added, efficiencies joined."""
    counts: dict[tuple[str, str], int] = {}
    above: dict[tuple[str, str], list[np.ndarray]] = {}
    for part in parts:
        for key, (n, values) in part.items():
            counts[key] = counts.get(key, 0) + n
            above.setdefault(key, []).append(values)
    return {key: (counts[key], np.concatenate(above[key])) for key in counts}


def stale_findings(groups: StaleGroups, machines: Mapping[str, Machine],
                   scope: str = "") -> list[tuple[Finding, tuple[str, str]]]:
    """The R2 findings of `stale_groups` (of one batch or a whole file), each with its
    (machine, ceiling), by machine (in `machines` order), memory's ceiling before the units'.
    `scope`: the part of the input the rows are, said after the ceiling (" in lines 2-8")."""
    order = {name: k for k, name in enumerate(machines)}
    out: list[tuple[Finding, tuple[str, str]]] = []
    for key in sorted(groups, key=lambda g: (order.get(g[0], len(order)), g[1] != "", g[1])):
        n_rows, above = groups[key]
        if len(above) < STALE_MIN_ROWS or 2 * len(above) < n_rows:
            continue
        median = float(np.median(above))
        if median < STALE_MARGIN:
            continue
        name, unit = key
        machine = machines[name]
        ceiling = machine.ceiling(unit == "", unit)
        if ceiling.fraction is None:
            continue  # an uncalibrated ceiling is M1's business
        implied = ceiling.fraction * median
        out.append((Finding(
            "R2", WARNING, f"{machine.name} {ceiling.name}",
            f"{len(above)} of {n_rows} rows bound by {ceiling.name}{scope} sit above it "
            f"(median {median:.1%} of it, below theoretical): they "
            f"imply {implied:.4f} of theoretical where {machine.name} says "
            f"{ceiling.fraction:.4f}; the profile looks calibrated below this card",
            "run `roofwise calibrate` on this card and read its rows with the profile "
            "it writes (or recount, if the rows share an accounting slip)"), key))
    return out


ANALYSIS_CHECKS: Mapping[str, Callable[[Analysis], list[Finding]]] = {
    "R2": check_stale_profiles}
