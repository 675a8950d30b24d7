"""`bench(fn, *args, ledger=...)`: time one operator call the way a roofline needs it timed.

On CUDA: warm-up, the kernels launched and their busy time from the profiler, then CUDA
events around each call (`timing="events"`), or CUDA-graph replay (`timing="graph"`) when the
kernels' own time is under 80% of the event time (launch and dispatch gaps would otherwise be
read as the kernels'); the L2 flushed before every timed call; median with p10/p90, and wall
time around the call. The record carries the method and the kernel count observed, which
set its latency floor. On the host: the same structure with perf_counter_ns, reported as
`timing="wall"`.

Graph mode and the cache (the choice): each graph holds ONE call, and the flush runs (eagerly,
outside the timed window) before every replay, so every timed call starts with a cold L2 and
nothing is subtracted. Capturing many calls per graph would leave all but the first warm
(a 4 MB RMSNorm rotated over 8 copies, 32 MB, fits in a 60 MB L2) and report impossible
speeds; capturing the flush inside the graph would need its time subtracted from every
window, a difference of two noisy numbers. With the flush on, CUDA inputs are not rotated
(the flush already evicts them); with `flush_l2=False`, inputs rotate over copies and graph
mode captures one graph per copy. `timer.replay_plan` is that order, as a pure function.
"""

from __future__ import annotations

import math
import platform
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from roofwise.ledgers.ledger import Ledger
from roofwise.measure.timer import (
    CPU_FLUSH_BYTES,
    CacheFlusher,
    profile_kernels,
    spread_of,
    time_cuda_events,
    time_cuda_graph,
    time_host,
    time_host_synced,
)

# Auto mode: graph replay when the kernels' own time is under this share of the event time,
# i.e. launch and dispatch gaps are a fifth of it or more (an absolute threshold, "under
# 50 us", missed long eager calls of many small kernels and sent single long kernels to
# graphs for nothing).
GRAPH_BELOW_KERNEL_SHARE = 0.8
MAX_INPUT_COPIES = 8
PROFILED_CALLS = 5


@dataclass(frozen=True)
class BenchResult:
    """One timed operator call. Times are per call, in seconds."""

    time_s: float  # median
    time_p10_s: float
    time_p90_s: float
    wall_time_s: float  # median host time around one call (synchronised on CUDA)
    kernels: int | None  # kernels launched per call (CUDA profiler); None on the host
    reps: int
    timing: str  # how the time was taken: "events", "graph" or "wall" (host clock)
    device: str  # device name as the driver reports it
    kernel_time_s: float | None = None  # summed kernel busy time per call (profiler)
    input_copies: int = 1
    flushed: bool = False
    ledger: Ledger | None = None

    def to_record(self, ledger: Ledger | None = None, machine_name: str | None = None,
                  op: str | None = None, workload: Any = None) -> dict[str, Any]:
        """A benchmark record in the contract of docs/records.md, with the ledger's read/write
        split."""
        chosen = ledger if ledger is not None else self.ledger
        if chosen is None:
            raise ValueError("to_record needs the ledger of the timed call")
        extra: dict[str, Any] = {
            "timing": self.timing, "device": self.device,
            "time_p10_s": self.time_p10_s, "time_p90_s": self.time_p90_s,
            "wall_time_s": self.wall_time_s, "reps": self.reps,
        }
        if self.kernels is not None:
            extra["kernels"] = self.kernels
        if self.flushed:  # every timed call started with the caches flushed
            extra["cache_state"] = "cold"
        if self.kernel_time_s is not None:
            extra["kernel_time_s"] = self.kernel_time_s
        if machine_name is not None:
            extra["profile"] = machine_name
        if workload is not None:
            extra["workload"] = dict(workload) if isinstance(workload, Mapping) else workload
        record = chosen.to_record(time_s=self.time_s, **extra)
        if op is not None:
            record["op"] = op
        return record


def bench(fn: Callable[..., Any], *args: Any, ledger: Ledger | None = None, warmup: int = 10,
          reps: int = 50, flush_l2: bool = True, rotate_inputs: bool = True,
          use_cuda_graph: bool | None = None, device: str | None = None) -> BenchResult:
    """Time `fn(*args)`; see the module docstring for how."""
    if reps < 1 or warmup < 0:
        raise ValueError(f"need reps >= 1 and warmup >= 0, got reps={reps}, warmup={warmup}")
    where = device or _infer_device(args)
    if where.startswith("cuda"):
        return _bench_cuda(fn, args, ledger, warmup, reps, flush_l2, rotate_inputs,
                           use_cuda_graph, where)
    return _bench_host(fn, args, ledger, warmup, reps, flush_l2, rotate_inputs)


def _bench_host(fn: Callable[..., Any], args: Sequence[Any], ledger: Ledger | None, warmup: int,
                reps: int, flush: bool, rotate: bool) -> BenchResult:
    copies = _rotated(args, CPU_FLUSH_BYTES, rotate)
    call = _caller(fn, copies)
    for i in range(warmup):
        call(i)
    flusher = CacheFlusher("cpu") if flush else None
    times = time_host(call, reps, flusher.flush if flusher else None)
    s = spread_of(times)
    return BenchResult(time_s=s.median_s, time_p10_s=s.p10_s, time_p90_s=s.p90_s,
                       wall_time_s=s.median_s, kernels=None, reps=reps, timing="wall",
                       device=host_name(), input_copies=len(copies),
                       flushed=flush, ledger=ledger)


def _bench_cuda(fn: Callable[..., Any], args: Sequence[Any], ledger: Ledger | None,
                warmup: int, reps: int, flush: bool, rotate: bool, use_graph: bool | None,
                device: str) -> BenchResult:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device is visible to torch")
    flusher = CacheFlusher(device) if flush else None
    cache_bytes = flusher.nbytes if flusher else 2 * _l2_bytes(device)
    copies = _rotated(args, cache_bytes, rotate and not flush)  # a flush already evicts them
    call = _caller(fn, copies)
    for i in range(max(warmup, 1)):
        call(i)
    torch.cuda.synchronize()
    before = flusher.flush if flusher else None
    probe = time_cuda_events(call, min(reps, 5), before)
    kernels = profile_kernels(call, PROFILED_CALLS)
    graph = use_graph if use_graph is not None else use_graph_replay(
        spread_of(probe).median_s, kernels.kernel_time_s)
    method = "events"
    if graph:
        graph_calls = [_bound(fn, c) for c in copies]  # one graph per copy, one call each
        try:
            times = time_cuda_graph(graph_calls, reps, before)
            method = "graph"
        except Exception:  # capture refuses some ops (host syncs); events still time them
            if use_graph:
                raise
            graph = False
    if not graph:
        times = time_cuda_events(call, reps, before)
    s = spread_of(times)
    wall = spread_of(time_host_synced(call, min(reps, 20), before)).median_s
    return BenchResult(time_s=s.median_s, time_p10_s=s.p10_s, time_p90_s=s.p90_s,
                       wall_time_s=wall, kernels=kernels.kernels_per_call, reps=reps,
                       timing=method, device=torch.cuda.get_device_name(device),
                       kernel_time_s=kernels.kernel_time_s,
                       input_copies=len(copies), flushed=flush, ledger=ledger)


def use_graph_replay(event_time_s: float, kernel_time_s: float) -> bool:
    """Time by graph replay when the kernels' own time is under GRAPH_BELOW_KERNEL_SHARE of
    the event time: the rest is launch and dispatch, which replay removes. No kernel seen
    (kernel_time_s 0, a host-only call) keeps events."""
    if not (event_time_s > 0 and kernel_time_s > 0):
        return False
    return kernel_time_s < GRAPH_BELOW_KERNEL_SHARE * event_time_s


def _bound(fn: Callable[..., Any], args: Sequence[Any]) -> Callable[[], Any]:
    return lambda: fn(*args)


def _caller(fn: Callable[..., Any], copies: Sequence[Sequence[Any]]) -> Callable[[int], Any]:
    n = len(copies)
    return lambda i: fn(*copies[i % n])


def _rotated(args: Sequence[Any], cache_bytes: int, rotate: bool) -> list[tuple[Any, ...]]:
    """Copies of the tensor arguments, enough that cycling through them exceeds the cache."""
    first = tuple(args)
    size = sum(_nbytes(a) for a in args)
    if not rotate or size == 0:
        return [first]
    wanted = min(MAX_INPUT_COPIES, math.ceil(cache_bytes / size) + 1)
    if wanted <= 1:
        return [first]
    return [first] + [tuple(_clone(a) for a in args) for _ in range(wanted - 1)]


def _nbytes(value: Any) -> int:
    if _is_tensor(value):
        return int(value.numel() * value.element_size())
    nbytes = getattr(value, "nbytes", None)
    return int(nbytes) if isinstance(nbytes, int) else 0


def _clone(value: Any) -> Any:
    if _is_tensor(value):
        return value.clone()
    copy = getattr(value, "copy", None)
    return copy() if callable(copy) and hasattr(value, "nbytes") else value


def _is_tensor(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "element_size")


def _infer_device(args: Sequence[Any]) -> str:
    for a in args:
        if _is_tensor(a) and a.device.type == "cuda":
            return str(a.device)
    return "cpu"


def _l2_bytes(device: str) -> int:
    import torch

    return int(torch.cuda.get_device_properties(torch.device(device)).L2_cache_size)


def host_name() -> str:
    """The host processor's name, for records timed on the CPU."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"
