"""Where one rank's device time went on the clock: compute, communication, idle, overlap.

Summed durations (the summary's figures) count two streams busy at once twice; a rank's time
on the clock is the union of its intervals. Compute is the union of the kernels that are not
communication, communication the union of the collective kernels, and the communication
hidden under compute the length of their intersection (comm kernels running while a compute
kernel runs on another stream: within one stream kernels never overlap). Idle is the span from
the first device event's start to the last one's end minus the union of all device activity
(kernels, memcpy, memset). All in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Timeline:
    span_s: float  # first device event's start to the last one's end
    busy_s: float  # the union of all device activity
    compute_s: float  # the union of non-communication kernels
    communication_s: float  # the union of communication kernels
    hidden_s: float  # communication overlapped by compute
    copy_s: float  # the union of memcpy and memset

    @property
    def idle_s(self) -> float:
        return max(self.span_s - self.busy_s, 0.0)

    @property
    def exposed_communication_s(self) -> float:
        return self.communication_s - self.hidden_s

    @property
    def hidden_share(self) -> float | None:
        """Of communication time, the share hidden under compute; None without any."""
        return self.hidden_s / self.communication_s if self.communication_s > 0 else None

    def as_json(self) -> dict[str, float | None]:
        return {"span_s": self.span_s, "busy_s": self.busy_s, "compute_s": self.compute_s,
                "communication_s": self.communication_s, "hidden_communication_s": self.hidden_s,
                "exposed_communication_s": self.exposed_communication_s,
                "hidden_share_of_communication": self.hidden_share, "copy_s": self.copy_s,
                "idle_s": self.idle_s}


def union_s(start: np.ndarray, end: np.ndarray) -> float:
    """The length of the union of intervals [start, end) (any order, any overlap)."""
    if len(start) == 0:
        return 0.0
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)  # the furthest end of the intervals up to each one
    # a new run starts where an interval begins after everything before it has ended
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    run_start = s[new]
    last = np.append(np.flatnonzero(new)[1:] - 1, len(s) - 1)
    return float((reach[last] - run_start).sum())


def timeline(start_s: np.ndarray, dur_s: np.ndarray, kernel: np.ndarray,
             communication: np.ndarray) -> Timeline:
    """One rank's timeline from its device events (`kernel`, `communication`: masks)."""
    end_s = start_s + dur_s
    if len(start_s) == 0:
        return Timeline(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    compute = kernel & ~communication
    comm = kernel & communication
    compute_s = union_s(start_s[compute], end_s[compute])
    comm_s = union_s(start_s[comm], end_s[comm])
    both = compute | comm
    either_s = union_s(start_s[both], end_s[both])
    copies = ~kernel
    return Timeline(span_s=float(end_s.max() - start_s.min()),
                    busy_s=union_s(start_s, end_s), compute_s=compute_s,
                    communication_s=comm_s, hidden_s=max(compute_s + comm_s - either_s, 0.0),
                    copy_s=union_s(start_s[copies], end_s[copies]))
