"""Time and peak memory of `roofwise analyze TRACE --json` on a generated 1.5 M-event profiler
trace, beside Holistic Trace Analysis' kernel breakdown on the same file.

The trace (fixed seed) is what a training step of a small transformer looks like to Kineto:
per layer, nested host ops (`aten::linear` over `aten::addmm`, `aten::layer_norm` over
`aten::native_layer_norm`, elementwise adds and muls, a `aten::copy_` with a host-to-device
memcpy), each launch a `cudaLaunchKernel` / `cudaMemcpyAsync` carrying its op's External id and
a correlation, each kernel or memcpy carrying the correlation, and an `ac2g` flow arrow per
launch; durations drawn at random, a few dozen distinct shapes. Each contender runs as its own
child process; wall time, CPU time (user + sys) and peak RSS are that child's (os.wait4).

    python benchmarks/bench_trace_scale.py [EVENTS] [--rounds N] [--no-hta]
        [--also-src DIR]   # time another checkout's roofwise too (its src/ on PYTHONPATH)
        [--keep PATH]      # keep the generated trace at PATH (reused when it is there)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HIDDEN = (512, 768, 1024, 2048)
TOKENS = (256, 512, 1024, 2048, 4096)
LAUNCH_EVENTS = 4  # a launch, its kernel (or memcpy), the flow arrow's two ends


class Writer:
    """Events written as they are made (never the whole trace in memory)."""

    def __init__(self, out, rng: random.Random) -> None:
        self.out, self.rng = out, rng
        self.events = 0
        self.ext = 0
        self.corr = 1_000_000
        self.gpu_ts = 0.0
        self.first = True

    def emit(self, event: dict) -> None:
        self.out.write(("" if self.first else ",\n") + json.dumps(event))
        self.first = False
        self.events += 1

    def op(self, name: str, ts: float, dur: float, dims: list, types: list) -> int:
        self.ext += 1
        self.emit({"ph": "X", "cat": "cpu_op", "name": name, "pid": 11, "tid": 11, "ts": ts,
                   "dur": dur, "args": {"External id": self.ext, "Input Dims": dims,
                                        "Input type": types, "Record function id": 0}})
        return self.ext

    def launch(self, ext: int, ts: float, kernel: str, cat: str = "kernel",
               api: str = "cudaLaunchKernel") -> None:
        self.corr += 1
        self.emit({"ph": "X", "cat": "cuda_runtime", "name": api, "pid": 11, "tid": 11,
                   "ts": ts, "dur": 4.0, "args": {"External id": ext, "correlation": self.corr,
                                                  "cbid": 211}})
        self.gpu_ts = max(self.gpu_ts, ts + 5.0)
        dur = round(self.rng.uniform(2.0, 60.0), 3)
        self.emit({"ph": "X", "cat": cat, "name": kernel, "pid": 0, "tid": 7,
                   "ts": self.gpu_ts, "dur": dur,
                   "args": {"External id": ext, "correlation": self.corr, "device": 0,
                            "stream": 7, "grid": [132, 1, 1], "block": [256, 1, 1]}})
        self.emit({"ph": "s", "id": self.corr, "pid": 11, "tid": 11, "ts": ts, "cat": "ac2g",
                   "name": "ac2g"})
        self.emit({"ph": "f", "id": self.corr, "pid": 0, "tid": 7, "ts": self.gpu_ts,
                   "cat": "ac2g", "name": "ac2g", "bp": "e"})
        self.gpu_ts += dur + 1.0


def layer(w: Writer, ts: float) -> float:
    """One transformer-ish layer's host ops from `ts`; returns where the next starts."""
    rng = w.rng
    t, h = rng.choice(TOKENS), rng.choice(HIDDEN)
    bf16 = "c10::BFloat16"
    ext = w.op("aten::layer_norm", ts, 40, [[t, h], [h], [h], [h], []],
               [bf16, "", bf16, bf16, "Scalar"])
    inner = w.op("aten::native_layer_norm", ts + 2, 35, [[t, h], [h], [h], [h], []],
                 [bf16, "", bf16, bf16, "Scalar"])
    w.launch(inner, ts + 10, "vectorized_layer_norm_kernel")
    del ext
    ts += 50
    for out in (3 * h, h, 4 * h, h):
        w.op("aten::linear", ts, 60, [[t, h], [out, h], [out]], [bf16, bf16, bf16])
        mm = w.op("aten::addmm", ts + 5, 50, [[out], [t, h], [h, out], [], []],
                  [bf16, bf16, bf16, "Scalar", "Scalar"])
        w.launch(mm, ts + 20, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64")
        ts += 70
    for name in ("aten::add", "aten::mul"):
        ext = w.op(name, ts, 20, [[t, h], [t, h]], [bf16, bf16])
        w.launch(ext, ts + 8, f"vectorized_elementwise_kernel<{name[6:]}>")
        ts += 25
    if rng.random() < 0.1:
        ext = w.op("aten::copy_", ts, 30, [[t, h], [t, h], []], [bf16, bf16, "Scalar"])
        w.launch(ext, ts + 5, "Memcpy HtoD (Pinned -> Device)", cat="gpu_memcpy",
                 api="cudaMemcpyAsync")
        ts += 35
    return ts + 5


def write_trace(path: Path, events: int, seed: int = 21) -> int:
    rng = random.Random(seed)
    with gzip.open(path, "wt", compresslevel=1) as out:
        out.write('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": '
                  '"NVIDIA H100 80GB HBM3", "totalGlobalMem": 85520809984}],\n'
                  '"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},\n'
                  '"traceEvents": [\n')
        w = Writer(out, rng)
        ts = 1_000_000.0
        while w.events < events:
            ts = layer(w, ts)
        out.write('\n],\n"traceName": "generated", "displayTimeUnit": "ms"}\n')
    return w.events


def count_events(path: Path) -> int:
    """The events of a kept trace (one a line, as `write_trace` writes them)."""
    with gzip.open(path, "rt") as lines:
        return sum(1 for line in lines if line.startswith("{\"ph\""))


def run_child(command: list[str], env: dict[str, str] | None = None) -> dict:
    """Wall, CPU (user + sys) and peak RSS of `command` as one child process."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(command, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        wall_s = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        return {"wall_s": wall_s, "cpu_s": usage.ru_utime + usage.ru_stime,
                "rss_mib": usage.ru_maxrss / 1024, "rc": os.waitstatus_to_exitcode(status),
                "out": out.read().decode(), "err": err.read().decode()[-2000:]}


HTA_SCRIPT = """
import sys, time
from hta.trace_analysis import TraceAnalysis
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
by_type, by_kernel = analyzer.get_gpu_kernel_breakdown(visualize=False)
column = next(c for c in by_type.columns if str(c).startswith("sum"))  # "sum" or "sum (us)"
total_us = float(by_type[column].sum())
print(f"{len(by_type)} kernel types, {len(by_kernel)} kernel rows, "
      f"GPU time {total_us / 1e6:.3f} s")
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("events", nargs="?", type=int, default=1_500_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-hta", action="store_true")
    parser.add_argument("--also-src", action="append", default=[])
    parser.add_argument("--keep", type=Path, default=None,
                        help="write the trace here and keep it; reuse it if it exists")
    args = parser.parse_args()
    roofwise = str(Path(sys.executable).with_name("roofwise"))
    here_src = str(Path(__file__).resolve().parent.parent / "src")
    with tempfile.TemporaryDirectory() as folder:
        trace = (args.keep if args.keep is not None
                 else Path(folder) / "rank0" / "generated.pt.trace.json.gz")
        trace.parent.mkdir(parents=True, exist_ok=True)
        made = (count_events(trace) if args.keep is not None and trace.exists()
                else write_trace(trace, args.events))
        contenders: list[tuple[str, list[str], dict[str, str] | None]] = [
            ("roofwise analyze --json (this checkout)", [roofwise, "analyze", str(trace),
                                                         "--json"],
             {**os.environ, "PYTHONPATH": here_src})]
        for n, other in enumerate(args.also_src, 1):
            contenders.append((f"roofwise analyze --json (other checkout {n})",
                               [roofwise, "analyze", str(trace), "--json"],
                               {**os.environ, "PYTHONPATH": str(Path(other) / "src")}))
        hta_note = ""
        if not args.no_hta:
            try:
                import hta  # noqa: F401
            except ImportError:
                hta_note = ("Holistic Trace Analysis is not installed (pip install "
                            "holistictraceanalysis): not measured")
            else:
                contenders.append(("HTA get_gpu_kernel_breakdown",
                                   [sys.executable, "-c", HTA_SCRIPT, str(trace.parent)], None))
        results: dict[str, list[dict]] = {name: [] for name, _, _ in contenders}
        for _ in range(args.rounds):  # each round runs every contender once, in turn
            for name, command, env in contenders:
                results[name].append(run_child(command, env))
        size_mb = trace.stat().st_size / 1e6
    print(f"trace: {made:,} events, {size_mb:.1f} MB gzipped (seed 21); "
          f"{args.rounds} round(s), median shown; machine load at the end: "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'contender':<52} {'wall s':>8} {'cpu s':>8} {'peak RSS MiB':>13}")
    for name, runs in results.items():
        failed = [r for r in runs if r["rc"] != 0]
        if failed:
            print(f"{name:<52} failed (exit {failed[0]['rc']}): "
                  f"{failed[0]['err'].strip().splitlines()[-1:]}")
            continue
        med = {k: sorted(r[k] for r in runs)[len(runs) // 2] for k in ("wall_s", "cpu_s",
                                                                        "rss_mib")}
        print(f"{name:<52} {med['wall_s']:>8.1f} {med['cpu_s']:>8.1f} {med['rss_mib']:>13.0f}")
    if hta_note:
        print(hta_note)
    for name, runs in results.items():
        if runs and runs[0]["rc"] == 0 and "roofwise" in name:
            summary = json.loads(runs[0]["out"].strip().splitlines()[-1])
            print(f"{name}: {summary['kernels']:,} kernels from {summary['ops']:,} ops, "
                  f"kernel time {summary['kernel_time_s']:.3f} s, memcpy "
                  f"{summary['memcpy_time_s']:.3f} s")
        elif runs and runs[0]["rc"] == 0:
            print(f"{name}: {runs[0]['out'].strip().splitlines()[-1]}")


if __name__ == "__main__":
    main()
