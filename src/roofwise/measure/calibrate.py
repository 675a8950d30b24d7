"""Measure the card in front of us (GPU side; only runs where torch sees a CUDA device).

What is measured, and how (see docs/references.md, "How ceilings are measured well"):
- HBM per access mix (copy, triad, read, write) over arrays far above L2, non-constant data,
  through torch's vectorised kernels and, when Triton is importable, grid-stride Triton
  kernels at several block sizes; each mix keeps its best method;
- GEMM per dtype (fp16, bf16, tf32, fp8 via torch._scaled_mm), burst (the first few calls
  after an idle pause of seconds) and sustained (after the clocks settle under load), random
  data; the clocks and throttle reasons read in every window label the regime (a window at
  the power cap is sustained) and refuse only thermal throttling or a burst whose clock moved;
- CUDA-core FP32 FMA and the special-function unit (exp2, rsqrt): Triton kernels with many
  independent chains per thread (skipped, and said so, without Triton);
- the latency floor of each timing method (profiler kernel time, CUDA-graph replay, CUDA
  events, host clock): a tiny add, as one launch and as 20 launches per call;
- L2 bandwidth: one kernel re-reading a buffer a quarter of L2 many times (refused when
  launch-bound or no faster than HBM).
Clocks, throttle reasons, power limit and driver are read three times in every timed window.
The arithmetic and the refusals live in `calibration_math`, tested without a GPU.
"""

from __future__ import annotations

import datetime as dt
import math
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from roofwise.measure.calibration_math import (
    BURST_CALLS,
    BURST_WAKE_CALLS,
    Clocks,
    FloorMeasurement,
    Measurement,
    build_profile,
    burst_times,
    bytes_moved,
    gemm_flops,
    regime_from_clocks,
)
from roofwise.ops._common import CUDA, SFU, contraction_unit
from roofwise.profiles.machine import Machine

GiB = 1 << 30


@dataclass(frozen=True)
class Plan:
    """How long each part runs; `quick` fits in under a minute on an H200."""

    array_bytes: int
    gemm_n: int
    gemm_dtypes: tuple[str, ...]
    idle_s: float
    settle_s: float
    window_s: float
    block_sizes: tuple[int, ...]

    @classmethod
    def of(cls, quick: bool) -> Plan:
        if quick:
            return cls(array_bytes=GiB // 2, gemm_n=8192, gemm_dtypes=("bf16",), idle_s=1.0,
                       settle_s=3.0, window_s=0.3, block_sizes=(2048,))
        return cls(array_bytes=GiB, gemm_n=8192, gemm_dtypes=("fp16", "bf16", "tf32", "fp8"),
                   idle_s=3.0, settle_s=10.0, window_s=1.0, block_sizes=(1024, 2048, 4096))


@dataclass
class Log:
    """What a calibration saw: `lines` for the --log file (every window and event), `windows`
    as data (the table a person reads), `events` the lines that are not a window."""

    lines: list[str] = field(default_factory=list)
    windows: list[dict[str, Any]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    def say(self, text: str) -> None:
        self.lines.append(text)
        self.events.append(text)


# NVML clock-event ("throttle") reason bits (nvml.h, nvmlClocksThrottleReason*), by name.
THROTTLE_BITS = {0x4: "power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal",
                 0x80: "power_brake"}


def throttle_names(mask: int) -> tuple[str, ...]:
    """The reasons an NVML throttle bitmask holds, by name (idle and app clocks left out)."""
    return tuple(name for bit, name in THROTTLE_BITS.items() if mask & bit)


def read_clocks() -> Clocks:
    """SM and memory clock (MHz), power limit (W), driver and active throttle reasons: NVML
    when importable, else nvidia-smi, else nothing (the clock checks are then skipped)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        driver = pynvml.nvmlSystemGetDriverVersion()
        reasons = (getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                   or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons)
        return Clocks(
            sm_mhz=float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
            mem_mhz=float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)),
            power_limit_w=pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
            driver=driver.decode() if isinstance(driver, bytes) else str(driver),
            throttle=throttle_names(int(reasons(handle))))
    except Exception:
        pass
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return Clocks()
    try:
        out = subprocess.run(
            [smi, "--query-gpu=clocks.sm,clocks.mem,power.limit,driver_version,"
                  "clocks_throttle_reasons.active",
             "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        sm, mem, power, driver, mask = (x.strip() for x in out.splitlines()[0].split(","))
        return Clocks(_num(sm), _num(mem), _num(power), driver,
                      throttle_names(int(mask, 16)) if mask.startswith("0x") else ())
    except Exception:
        return Clocks()


def clocks_record(clocks: Clocks) -> dict[str, Any]:
    """One clock read as plain YAML/JSON values (the provenance of every window)."""
    return {"sm_mhz": clocks.sm_mhz, "mem_mhz": clocks.mem_mhz,
            "power_limit_w": clocks.power_limit_w, "driver": clocks.driver,
            "throttle": list(clocks.throttle)}


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def timed_window(call: Callable[[], Any], window_s: float, min_reps: int = 10,
                 ) -> tuple[tuple[float, ...], tuple[Clocks, ...]]:
    """Per-call CUDA-event times over a window of about `window_s`, and the clocks read
    while the queue is busy: near its start, in its middle and near its end."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    call()
    end.record()
    torch.cuda.synchronize()
    one_s = max(start.elapsed_time(end) * 1e-3, 1e-7)
    return timed_calls(call, max(min_reps, math.ceil(window_s / one_s)))


def timed_calls(call: Callable[[], Any], reps: int, first_sample: int = 1
                ) -> tuple[tuple[float, ...], tuple[Clocks, ...]]:
    """`reps` calls back to back, each between its own events (no warm-up: a burst is the
    first calls after an idle pause). Clocks are read when call `first_sample`, the middle
    call and the last but one have finished, so each read falls while a later call runs."""
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        starts[i].record()
        call()
        ends[i].record()
    samples: list[Clocks] = []
    for k in sorted({min(first_sample, reps - 1), reps // 2, max(reps - 2, 0)}):
        ends[k].synchronize()
        samples.append(read_clocks())
    torch.cuda.synchronize()
    times = tuple(s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends, strict=True))
    return times, tuple(samples)


def _measure(log: Log, kind: str, key: str, variant: str, amount: float, method: str,
             call: Callable[[], Any], window_s: float,
             timed: tuple[tuple[float, ...], tuple[Clocks, ...]] | None = None) -> Measurement:
    """One window (or the `timed` calls given) as a Measurement, logged with its clocks."""
    times, samples = timed if timed is not None else timed_window(call, window_s)
    m = Measurement(kind, key, variant, amount, times, samples[0], samples[-1], method,
                    samples)
    log.windows.append({"kind": kind, "key": key, "variant": variant, "method": method,
                        "reps": len(times),
                        "time_s": m.time_s, "rate_per_s": m.rate_per_s, "spread": m.spread,
                        "clocks": [clocks_record(c) for c in samples],
                        "regime_from_clocks": regime_from_clocks(m)})
    sm = "->".join(f"{c.sm_mhz:g}" if c.sm_mhz is not None else "?" for c in samples)
    capped = sorted({r for c in samples for r in c.throttle})
    log.lines.append(f"{key:18s} {variant:9s} {method:28s} {m.rate_per_s:12.4g}/s  "
            f"median {m.time_s * 1e3:9.4f} ms  spread {m.spread:.3f}  SM {sm} MHz  "
            f"mem {samples[0].mem_mhz}->{samples[-1].mem_mhz} MHz"
            + (f"  throttle {','.join(capped)}" if capped else ""))
    return m


# ---- HBM ----

def hbm_measurements(plan: Plan, log: Log) -> list[Measurement]:
    import torch

    n = plan.array_bytes // 4
    a = torch.rand(n, device="cuda")
    b = torch.rand(n, device="cuda")
    c = torch.rand(n, device="cuda")
    partial = torch.empty(4096, device="cuda")
    best: dict[str, Measurement] = {}

    def keep(m: Measurement) -> None:
        if m.variant not in best or m.rate_per_s > best[m.variant].rate_per_s:
            best[m.variant] = m

    torch_calls: dict[str, Callable[[], Any]] = {
        "copy": lambda: b.copy_(a), "triad": lambda: torch.add(b, c, alpha=1.5, out=a),
        "read": lambda: torch.sum(a),
        "write": lambda: torch.arange(n, out=a)}  # non-constant data: 0, 1, 2, ... (never a fill)
    for mix, call in torch_calls.items():
        keep(_measure(log, "memory", "hbm", mix, bytes_moved(mix, plan.array_bytes),
                      "torch", call, plan.window_s))
    try:
        from roofwise.measure import triton_kernels  # deferred: triton

        kernels = triton_kernels.STREAM
    except Exception as exc:  # no Triton, or it failed to compile here: torch's numbers stand
        log.say(f"hbm: Triton kernels unavailable ({type(exc).__name__}: {exc}); torch only")
        kernels = None
    if kernels is not None:
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        for block in plan.block_sizes:
            grid = (sms * 8,)
            calls = {"copy": _launch(kernels["copy"], grid, block, a, b, n),
                     "triad": _launch(kernels["triad"], grid, block, b, c, a, 1.5, n),
                     "read": _launch(kernels["read"], grid, block, a, partial, n),
                     "write": _launch(kernels["write"], grid, block, a, n)}
            for mix, call in calls.items():
                try:
                    keep(_measure(log, "memory", "hbm", mix, bytes_moved(mix, plan.array_bytes),
                                  f"triton grid-stride block {block}", call, plan.window_s))
                except Exception as exc:
                    log.say(f"hbm {mix} triton block {block} failed: {exc}")
    return list(best.values())


def _launch(kernel: Any, grid: tuple[int, ...], block: int, *args: Any) -> Callable[[], Any]:
    return lambda: kernel[grid](*args, BLOCK=block)


# ---- GEMM ----

def gemm_call(dtype: str, n: int) -> Callable[[], Any]:
    import torch

    if dtype == "fp8":
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()  # column-major
        one = torch.tensor(1.0, device="cuda")
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                        out_dtype=torch.bfloat16)
    torch_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32}[dtype]
    x = torch.randn(n, n, device="cuda", dtype=torch_dtype)
    y = torch.randn(n, n, device="cuda", dtype=torch_dtype)
    return lambda: torch.matmul(x, y)


def gemm_measurements(plan: Plan, log: Log) -> list[Measurement]:
    import torch

    out: list[Measurement] = []
    previous_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        for dtype in plan.gemm_dtypes:
            try:
                call = gemm_call(dtype, plan.gemm_n)
                call()
                torch.cuda.synchronize()
            except Exception as exc:
                log.say(f"gemm {dtype}: not run ({type(exc).__name__}: {exc})")
                continue
            flops = gemm_flops(plan.gemm_n, plan.gemm_n, plan.gemm_n)
            unit = contraction_unit(dtype, "calibrate gemm")  # the operator library's map
            time.sleep(plan.idle_s)  # idle (seconds): the first calls after it are the burst
            after_idle, samples = timed_calls(call, BURST_WAKE_CALLS + BURST_CALLS,
                                              first_sample=BURST_WAKE_CALLS)
            out.append(_measure(log, "unit", unit, "burst", flops, f"torch {dtype} {plan.gemm_n}",
                                call, 0.0, (burst_times(after_idle), samples)))
            deadline = time.perf_counter() + plan.settle_s
            while time.perf_counter() < deadline:  # load until the clocks settle
                for _ in range(20):
                    call()
                torch.cuda.synchronize()
            out.append(_measure(log, "unit", unit, "sustained", flops,
                                f"torch {dtype} {plan.gemm_n}", call, plan.window_s))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous_tf32
        torch.cuda.empty_cache()
    return out


# ---- CUDA cores and SFU (Triton) ----

CHAINS = 8
FMA_ITERS = 4096
SFU_ITERS = 512


def alu_measurements(plan: Plan, log: Log) -> list[Measurement]:
    import torch

    try:
        from roofwise.measure import triton_kernels  # deferred: triton

        kernels = triton_kernels.ALU
    except Exception as exc:
        log.say(f"{CUDA} / {SFU}: not measured, Triton unavailable ({exc})")
        return []
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    block, programs = 1024, sms * 16
    out_buf = torch.empty(block * programs, device="cuda")
    elements = block * programs
    found: list[Measurement] = []
    specs = (("fma", CUDA, FMA_ITERS, 2.0 * CHAINS * FMA_ITERS),
             ("sfu", SFU, SFU_ITERS, 2.0 * 4 * SFU_ITERS))
    for name, unit, iters, ops_per_element in specs:
        kernel = kernels[name]

        def call(k: Any = kernel, it: int = iters) -> Any:
            return k[(programs,)](out_buf, it, BLOCK=block, num_warps=8)

        try:
            call()
            torch.cuda.synchronize()
            found.append(_measure(log, "unit", unit, "sustained", elements * ops_per_element,
                                  f"triton {name} {CHAINS if name == 'fma' else 4} chains",
                                  call, plan.window_s))
        except Exception as exc:
            log.say(f"{unit}: not measured ({type(exc).__name__}: {exc})")
    return found


# ---- latency floor and L2 ----

FLOOR_KERNELS = 20  # launches in the many-kernel call that prices each further kernel


def latency_floors(log: Log, reps: int = 200) -> list[FloorMeasurement]:
    """The floor of every timing method, each measured on a real tiny kernel (an in-place add
    on one float) with the same timers `roofwise bench` uses: one launch per call, and
    FLOOR_KERNELS launches per call for what each further kernel adds."""
    import torch

    from roofwise.measure.timer import (  # deferred: torch
        profile_kernels,
        time_cuda_events,
        time_cuda_graph,
        time_host_synced,
    )

    x = torch.zeros(1, device="cuda")

    def one() -> None:
        x.add_(1.0)

    def many() -> None:
        for _ in range(FLOOR_KERNELS):
            x.add_(1.0)

    found: list[FloorMeasurement] = []
    for timing, timer in (("events", time_cuda_events), ("wall", time_host_synced)):
        one_times = timer(lambda _i: one(), reps)[reps // 10:]  # the first tenth warms up
        many_times = timer(lambda _i: many(), reps)[reps // 10:]
        found.append(FloorMeasurement(timing, tuple(one_times), FLOOR_KERNELS,
                                      tuple(many_times), "in-place add on 1 float, eager"))
    found.append(FloorMeasurement(
        "graph", tuple(time_cuda_graph([one], reps)), FLOOR_KERNELS,
        tuple(time_cuda_graph([many], reps)), "in-place add on 1 float, CUDA-graph replay"))
    found.append(FloorMeasurement(
        "kernel", (profile_kernels(lambda _i: one(), reps).kernel_time_s,), FLOOR_KERNELS,
        (profile_kernels(lambda _i: many(), reps).kernel_time_s,),
        "in-place add on 1 float, torch.profiler kernel durations"))
    for f in found:
        log.say(f"latency floor, {f.timing}: {f.per_call_s * 1e6:.2f} us per call + "
                f"{f.per_kernel_s * 1e6:.2f} us per further kernel")
    return found


L2_REPEATS = 200  # passes over the L2-resident buffer inside one kernel


def l2_measurements(plan: Plan, log: Log) -> list[Measurement]:
    """One Triton kernel reading a buffer a quarter of L2 L2_REPEATS times (each pass at a
    rotated offset, so no load can be hoisted): after the first pass every read is served
    by L2, and one launch is amortised over L2_REPEATS passes. `build_profile` refuses the
    figure if it is still within a few launch floors or no faster than HBM."""
    import torch

    try:
        from roofwise.measure import triton_kernels  # deferred: triton
    except Exception as exc:  # no Triton: no L2 figure, and the log says so
        log.say(f"l2: not measured, Triton unavailable ({type(exc).__name__}: {exc})")
        return []
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    n = max(l2 // 4, 1 << 20) // 4
    x = torch.rand(n, device="cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    partial = torch.empty(sms * 4, device="cuda")
    block = 1024

    def call() -> Any:
        return triton_kernels.l2_reread_k[(sms * 4,)](x, partial, n, L2_REPEATS, BLOCK=block)

    call()
    torch.cuda.synchronize()
    return [_measure(log, "memory", "l2", "read", float(n * 4 * L2_REPEATS),
                     f"triton re-read of {n * 4} B x {L2_REPEATS}", call, plan.window_s)]


# ---- the whole run ----

def run_calibration(theoretical: Machine, quick: bool, command: str,
                    progress: Callable[[str], None] | None = None) -> tuple[dict[str, Any], Log]:
    """Measure everything, judge it, and return the profile mapping and the log."""
    import torch

    plan = Plan.of(quick)
    log = Log()
    card = torch.cuda.get_device_name(0)
    first = read_clocks()
    steps: list[tuple[str, Callable[[], list[Measurement]]]] = [
        ("HBM per mix", lambda: hbm_measurements(plan, log)),
        ("L2 read", lambda: l2_measurements(plan, log)),
        ("CUDA-core FMA and SFU", lambda: alu_measurements(plan, log)),
        ("GEMM burst and sustained", lambda: gemm_measurements(plan, log)),
    ]
    measurements: list[Measurement] = []
    for label, step in steps:
        if progress is not None:
            progress(label)
        measurements.extend(step())
        torch.cuda.empty_cache()  # each step's buffers are gone once it returns
    if progress is not None:
        progress("latency floors")
    floors = latency_floors(log)
    provenance = {
        "card": card, "driver": first.driver or "unknown",
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command, "torch": torch.__version__, "quick": quick,
        "power_limit_w": first.power_limit_w, "theoretical_from": theoretical.name,
        "windows": log.windows,
    }
    profile = build_profile(card, measurements, theoretical, provenance, latency_floors=floors)
    return profile, log
