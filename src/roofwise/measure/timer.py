"""Timers: a host clock for any callable, CUDA events and CUDA-graph replay for device work.

torch is imported inside the functions that need it, so that `import roofwise` stays light.
Each timer returns one time per call in seconds; the caller takes the median and spread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

CPU_FLUSH_BYTES = 32 * 1024 * 1024  # above the last-level cache of common hosts


@dataclass(frozen=True)
class Spread:
    median_s: float
    p10_s: float
    p90_s: float


def spread_of(times_s: Sequence[float]) -> Spread:
    """Median with p10/p90 (numpy's linear interpolation)."""
    arr = np.asarray(times_s, dtype=np.float64)
    if arr.size == 0:
        raise ValueError("no times to summarise")
    p10, p50, p90 = np.percentile(arr, [10, 50, 90])
    return Spread(float(p50), float(p10), float(p90))


class CacheFlusher:
    """Writes a buffer larger than the cache between iterations so each starts cold.

    On CUDA the buffer is twice the L2 the driver reports; on the host, a fixed size above a
    typical last-level cache. Writing (not reading) evicts dirty and clean lines alike.
    """

    def __init__(self, device: str, nbytes: int | None = None) -> None:
        self.device = device
        if device.startswith("cuda"):
            import torch

            index = torch.device(device).index
            props = torch.cuda.get_device_properties(
                index if index is not None else torch.cuda.current_device())
            self.nbytes = int(nbytes or 2 * props.L2_cache_size)
            self._buffer: Any = torch.empty(self.nbytes, dtype=torch.uint8, device=device)
        else:
            self.nbytes = int(nbytes or CPU_FLUSH_BYTES)
            self._buffer = np.empty(self.nbytes, dtype=np.uint8)
        self._value = 0

    def flush(self) -> None:
        self._value = (self._value + 1) % 251  # a changing value: nothing can skip the write
        self._buffer.fill(self._value) if isinstance(self._buffer, np.ndarray) else (
            self._buffer.fill_(self._value))


def time_host(call: Callable[[int], Any], reps: int,
              before: Callable[[], None] | None = None) -> list[float]:
    """Host clock around each call (perf_counter_ns); `call(i)` runs iteration i."""
    times: list[float] = []
    for i in range(reps):
        if before is not None:
            before()
        start = time.perf_counter_ns()
        call(i)
        times.append((time.perf_counter_ns() - start) * 1e-9)
    return times


def time_host_synced(call: Callable[[int], Any], reps: int,
                     before: Callable[[], None] | None = None) -> list[float]:
    """Wall time around each CUDA call: synchronise before the start and after the end."""
    import torch

    def synced(i: int) -> None:
        call(i)
        torch.cuda.synchronize()

    def prepare() -> None:
        if before is not None:
            before()
        torch.cuda.synchronize()

    return time_host(synced, reps, prepare)


def time_cuda_events(call: Callable[[int], Any], reps: int,
                     before: Callable[[], None] | None = None) -> list[float]:
    """CUDA events around each call, the flush (if any) outside the timed region."""
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        if before is not None:
            before()
        starts[i].record()
        call(i)
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends, strict=True)]


@dataclass(frozen=True)
class Step:
    """One action of a graph-timing run: `kind` is "flush", "start" (record the start event
    of `rep`), "replay" (replay graph `graph`) or "end" (record the end event of `rep`)."""

    kind: str
    rep: int
    graph: int = -1


def replay_plan(reps: int, graphs: int, flush: bool) -> tuple[Step, ...]:
    """The order of flushes, events and replays for `time_cuda_graph`, as data.

    Each timed window (start .. end) holds exactly one replay of a graph of exactly one call,
    so every timed call starts from the state the flush left: with `flush`, a cold L2 before
    every timed call, whatever the call's size. Graphs (one per rotated input copy) are
    replayed in turn; nothing is subtracted from any window.
    """
    if reps < 1 or graphs < 1:
        raise ValueError(f"need reps >= 1 and graphs >= 1, got {reps}, {graphs}")
    steps: list[Step] = []
    for rep in range(reps):
        if flush:
            steps.append(Step("flush", rep))
        steps += [Step("start", rep), Step("replay", rep, rep % graphs), Step("end", rep)]
    return tuple(steps)


def time_cuda_graph(calls: Sequence[Callable[[], Any]], reps: int,
                    before: Callable[[], None] | None = None) -> list[float]:
    """Capture each of `calls` (one call each: one per rotated input copy) in its own CUDA
    graph and time every replay with events, the flush (if any) before each, outside the
    window; see `replay_plan`. One time per call, nothing subtracted.

    A graph launches a multi-kernel call with the graph's gaps instead of Python's, which is
    the point for calls of a few microseconds; one call per graph keeps the flush between
    every pair of timed calls.
    """
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm the captured path on a side stream, as torch asks
        for call in calls:
            call()
    torch.cuda.current_stream().wait_stream(stream)
    graphs: list[Any] = []
    pool = None
    for call in calls:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            call()
        pool = graph.pool()
        graphs.append(graph)
    for graph in graphs:
        graph.replay()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for step in replay_plan(reps, len(graphs), before is not None):
        if step.kind == "flush" and before is not None:
            before()
        elif step.kind == "start":
            starts[step.rep].record()
        elif step.kind == "replay":
            graphs[step.graph].replay()
        elif step.kind == "end":
            ends[step.rep].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends, strict=True)]


@dataclass(frozen=True)
class KernelProfile:
    kernels_per_call: int
    kernel_time_s: float  # summed kernel busy time of one call, median over the profiled calls


def profile_kernels(call: Callable[[int], Any], calls: int) -> KernelProfile:
    """Kernels launched and their summed device time per call, from torch.profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            call(i)
        torch.cuda.synchronize()
    events = [e for e in prof.events() if _is_kernel(e)]
    total_us = sum(_device_us(e) for e in events)
    return KernelProfile(kernels_per_call=round(len(events) / calls),
                         kernel_time_s=total_us * 1e-6 / calls)


def _is_kernel(event: Any) -> bool:
    """A device-side activity (kernel, memset, copy): its device_type is CUDA."""
    return "CUDA" in str(getattr(event, "device_type", ""))


def _device_us(event: Any) -> float:
    """Duration of a device-side event in microseconds (its own time range)."""
    span = getattr(event, "time_range", None)
    if span is not None:
        return float(span.elapsed_us())
    return float(getattr(event, "device_time_total", 0.0) or 0.0)
