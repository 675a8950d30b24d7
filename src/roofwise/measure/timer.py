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


def time_cuda_graph(call: Callable[[int], Any], reps: int, calls_per_graph: int,
                    before: Callable[[], None] | None = None) -> list[float]:
    """Capture `calls_per_graph` calls (iterations 0..n-1, so rotated inputs rotate inside the
    graph) and time each replay with events; one time per call is replay time / n.

    Launch gaps between the captured calls shrink to the graph's, which is the point for
    kernels of a few microseconds. A flush runs between replays, not between captured calls.
    """
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm the captured path on a side stream, as torch asks
        for i in range(calls_per_graph):
            call(i)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls_per_graph):
            call(i)
    graph.replay()
    torch.cuda.synchronize()
    per_replay = time_cuda_events(lambda _i: graph.replay(), reps, before)
    return [t / calls_per_graph for t in per_replay]


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
