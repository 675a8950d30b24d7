"""Every rank of a distributed job: one trace per rank, read side by side.

Per rank: its time on the clock (`timeline.py`: compute, communication, the share of it hidden
under compute, idle). Across ranks: per op group (op and shapes, as `analysis.groups`) the
spread of its time (min, median, max and where); and the slowest rank, read as the rank with
the most compute time: in a synchronous job the others wait for it at the next collective,
which shows on them as longer communication, so its own communication is the shortest. Why it
is slow: the op groups whose time on it exceeds their median over the ranks the most.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofwise.base import fmt
from roofwise.base.errors import InputError
from roofwise.base.text import elide
from roofwise.traces.analysis import Group, TraceAnalysis, groups, summary_fields
from roofwise.traces.build import TraceSummary
from roofwise.traces.reader import is_trace
from roofwise.traces.timeline import Timeline

EVEN_SHARE = 0.01  # compute within 1% of the median on every rank: no rank is called slowest
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class Rank:
    """One rank's trace, kept as its groups and summary (its ops and events are freed)."""

    rank: int  # distributedInfo's rank, else the number in the file name, else its position
    rank_from: str  # "distributedInfo", "file name" or "position"
    path: str
    summary: TraceSummary
    groups: tuple[Group, ...]

    @property
    def timeline(self) -> Timeline:
        assert self.summary.timeline is not None
        return self.summary.timeline

    def as_json(self) -> dict[str, Any]:
        return {"op": "rank", "rank": self.rank, "rank_from": self.rank_from,
                "trace": self.path, **self.timeline.as_json(),
                "summary": {k: v for k, v in summary_fields(self.path, self.summary).items()
                            if k not in ("op", "trace")}}


@dataclass(frozen=True)
class Spread:
    """One op group's time across the ranks that ran it."""

    op: str
    shapes: str
    time_by_rank: Mapping[int, float]  # summed kernel time per rank; ranks without it absent
    count_by_rank: Mapping[int, int]
    communication: bool = False

    @property
    def min_s(self) -> float:
        return min(self.time_by_rank.values())

    @property
    def max_s(self) -> float:
        return max(self.time_by_rank.values())

    @property
    def median_s(self) -> float:
        return float(statistics.median(self.time_by_rank.values()))

    @property
    def max_rank(self) -> int:
        return max(self.time_by_rank, key=lambda r: (self.time_by_rank[r], -r))

    @property
    def min_rank(self) -> int:
        return min(self.time_by_rank, key=lambda r: (self.time_by_rank[r], r))

    def as_json(self) -> dict[str, Any]:
        return {"op": "spread", "name": self.op, "shapes": self.shapes,
                "communication": self.communication,
                "ranks": len(self.time_by_rank), "min_s": self.min_s,
                "median_s": self.median_s, "max_s": self.max_s, "min_rank": self.min_rank,
                "max_rank": self.max_rank,
                "time_s_by_rank": {str(r): t for r, t in sorted(self.time_by_rank.items())},
                "count_by_rank": {str(r): n for r, n in sorted(self.count_by_rank.items())}}


@dataclass(frozen=True)
class Slowest:
    rank: int
    compute_s: float
    median_compute_s: float
    culprits: tuple[tuple[Spread, float], ...]  # (group, its time here over its median)

    @property
    def excess_s(self) -> float:
        return self.compute_s - self.median_compute_s

    def text(self, by_rank: Mapping[int, Rank]) -> str:
        here = by_rank[self.rank].timeline
        others = [r.timeline.exposed_communication_s for k, r in by_rank.items()
                  if k != self.rank]
        if self.excess_s <= EVEN_SHARE * self.median_compute_s:
            return (f"no rank is slower: every rank's compute is within {EVEN_SHARE:.0%} of "
                    f"the median, {_ms(self.median_compute_s)} (the most: rank {self.rank})")
        line = (f"slowest rank {self.rank}: compute {_ms(self.compute_s)}, "
                f"{_ms(self.excess_s)} above the median rank's {_ms(self.median_compute_s)}")
        if self.culprits:
            line += "; most in " + ", ".join(
                f"{s.op} [{elide(s.shapes, 60)}] (+{_ms(d)})" for s, d in self.culprits)
        if not others:
            return line
        if not any(r.timeline.communication_s > 0 for r in by_rank.values()):
            return line + "; no rank communicates, so none waits for another"
        exposed = here.exposed_communication_s
        median = float(statistics.median(others))
        if exposed <= median:
            return line + (f"; its exposed communication {_ms(exposed)} against the others' "
                           f"median {_ms(median)} (the others wait for it)")
        # it waits more than the others: its extra compute is not what they wait for
        least = min(by_rank, key=lambda k: (by_rank[k].timeline.exposed_communication_s, k))
        return line + (
            f"; but its exposed communication {_ms(exposed)} is above the others' median "
            f"{_ms(median)}: it waits more than they do, so its extra compute does not hold "
            f"them up; the least exposed communication is rank {least}'s, "
            f"{_ms(by_rank[least].timeline.exposed_communication_s)} (the rank the others "
            "wait for, if the job is synchronous)")

    def as_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "compute_s": self.compute_s,
                "median_compute_s": self.median_compute_s, "excess_s": self.excess_s,
                "culprits": [{"name": s.op, "shapes": s.shapes, "excess_s": d}
                             for s, d in self.culprits]}


@dataclass(frozen=True)
class RankSet:
    ranks: tuple[Rank, ...]  # by rank
    spreads: tuple[Spread, ...]  # widest (max - min) first
    slowest: Slowest | None  # None for one rank

    @property
    def mixed_devices(self) -> str:
        """A sentence when the traces name different devices (ranks of one job run on one
        kind of card: these may not be one job's), else ""."""
        named = {r.rank: r.summary.devices for r in self.ranks}
        if len({devices for devices in named.values() if devices}) < 2:
            return ""
        listed = "; ".join(f"rank {k}: {', '.join(v) or 'none named'}" for k, v in named.items())
        return (f"the traces name different devices ({listed}): read as the ranks of one job, "
                "which they may not be")

    def as_json(self) -> dict[str, Any]:
        return {"op": "ranks", "ranks": [r.rank for r in self.ranks],
                "slowest": None if self.slowest is None else self.slowest.as_json(),
                "mixed_devices": self.mixed_devices or None}


def _ms(value: float) -> str:
    return fmt.seconds(value)


def trace_paths(paths: Sequence[str]) -> list[str]:
    """The traces named: files as given, a folder as the traces in it (by name)."""
    found: list[str] = []
    for given in paths:
        target = Path(given)
        if target.is_dir():
            inside = sorted(str(p) for p in target.iterdir() if p.is_file() and is_trace(p))
            if not inside:
                raise InputError(given, "no profiler trace in this folder; expected one "
                                        "Kineto trace per rank (.json or .json.gz)")
            found += inside
        elif not is_trace(target):
            raise InputError(given, "not a profiler trace; expected Kineto / Chrome trace "
                                    "JSON (an object with traceEvents), gzipped or not")
        else:
            found.append(given)
    return list(dict.fromkeys(found))


def read_ranks(paths: Sequence[str], analyze_one: Callable[[str], TraceAnalysis]) -> RankSet:
    """Each trace analysed (`analyze_one`), then lined up by rank; a rank named twice is
    refused, naming both files."""
    ranks: list[Rank] = []
    for position, path in enumerate(paths):
        # one rank's ops at a time: each is kept as its groups and summary only
        ranks.append(_rank(path, analyze_one(path), position))
    seen: dict[int, str] = {}
    sizes: dict[int, str] = {}  # world_size -> the first file that states it
    for r in ranks:
        if r.rank in seen:
            raise InputError(r.path, f"rank {r.rank} ({r.rank_from}) is also {seen[r.rank]}; "
                                     "expected one trace per rank")
        seen[r.rank] = r.path
        size = r.summary.world_size
        if size is not None:
            sizes.setdefault(size, r.path)
            if len(sizes) > 1:
                (first, where), *_ = sizes.items()
                raise InputError(r.path, f"distributedInfo world_size {size}, where {where} "
                                         f"says {first}: traces of different jobs; expected "
                                         "the ranks of one job")
    ranks.sort(key=lambda r: r.rank)
    return line_up_ranks(tuple(ranks))


def _rank(path: str, result: TraceAnalysis, position: int) -> Rank:
    if result.summary.rank is not None:
        number, source = result.summary.rank, "distributedInfo"
    else:
        named = _RANK_IN_NAME.findall(Path(path).name)
        number, source = (int(named[-1]), "file name") if named else (position, "position")
    return Rank(number, source, path, result.summary, tuple(groups(result)))


def line_up_ranks(ranks: tuple[Rank, ...]) -> RankSet:
    # a group is its op, its shapes and whether it communicates (as `analysis.groups`)
    time_by: dict[tuple[str, str, bool], dict[int, float]] = {}
    count_by: dict[tuple[str, str, bool], dict[int, int]] = {}
    for r in ranks:
        for g in r.groups:
            key = (g.op, g.shapes, g.communication)
            time_by.setdefault(key, {})[r.rank] = g.time_s
            count_by.setdefault(key, {})[r.rank] = g.count
    spreads = sorted((Spread(*key[:2], time_by[key], count_by[key], key[2]) for key in time_by),
                     key=lambda s: (-(s.max_s - s.min_s), s.op, s.shapes))
    return RankSet(ranks, tuple(spreads), _slowest(ranks, spreads))


def _slowest(ranks: tuple[Rank, ...], spreads: list[Spread], culprits: int = 3
             ) -> Slowest | None:
    if len(ranks) < 2:
        return None
    slow = max(ranks, key=lambda r: (r.timeline.compute_s, -r.rank))
    median = float(statistics.median(r.timeline.compute_s for r in ranks))
    # a group a rank did not run counts 0 there: its median is over every rank
    excess = []
    for s in spreads:
        if s.communication:  # waiting shows there, on the other ranks: not a cause
            continue
        values = [s.time_by_rank.get(r.rank, 0.0) for r in ranks]
        over = s.time_by_rank.get(slow.rank, 0.0) - float(statistics.median(values))
        if over > 0:
            excess.append((s, over))
    excess.sort(key=lambda pair: -pair[1])
    return Slowest(slow.rank, slow.timeline.compute_s, median, tuple(excess[:culprits]))

