"""Time and peak memory of `roofwise analyze` on a generated profiler trace of N events.

Writes a gzipped Kineto-style trace (new linking convention: each launch carries its op's
External id; kernels carry the launch's correlation) of N/3 ops, N/3 launches and N/3
kernels over a few dozen distinct shapes, then runs `roofwise analyze` on it in a child
process and reports the child's wall time and peak RSS (whole process, from getrusage).

    python benchmarks/bench_trace_memory.py 1500000
"""

from __future__ import annotations

import gzip
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHAPES = [(m, 1024, 4096) for m in (1, 8, 64, 512, 2048, 4096)]
ELEMENTWISE = [("aten::add", [[4096, 1024], [4096, 1024]]), ("aten::mul", [[512, 4096], []]),
               ("aten::silu", [[8192, 2048]])]


def write_trace(path: Path, events: int) -> None:
    ops = events // 3
    with gzip.open(path, "wt", compresslevel=1) as out:
        out.write('{"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],\n'
                  '"traceEvents": [\n')
        for i in range(ops):
            ts = 10.0 * i
            if i % 2:
                m, n, k = SHAPES[i % len(SHAPES)]
                name, dims, types = "aten::mm", [[m, k], [k, n]], ["c10::BFloat16"] * 2
            else:
                name, dims = ELEMENTWISE[i % len(ELEMENTWISE)]
                types = ["float" if d else "Scalar" for d in dims]
            rows = [
                {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts,
                 "dur": 8, "args": {"External id": i, "Input Dims": dims,
                                    "Input type": types}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                 "tid": 1, "ts": ts + 1, "dur": 3,
                 "args": {"External id": i, "correlation": 100000 + i}},
                {"ph": "X", "cat": "kernel", "name": f"kernel_{name[6:]}", "pid": 0, "tid": 7,
                 "ts": ts + 5, "dur": 4.5,
                 "args": {"External id": i, "correlation": 100000 + i, "device": 0}}]
            out.write(",\n".join(json.dumps(r) for r in rows))
            out.write(",\n" if i + 1 < ops else "\n")
        out.write("]}\n")


def main() -> None:
    events = int(sys.argv[1]) if len(sys.argv) > 1 else 1_500_000
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "generated.json.gz"
        write_trace(trace, events)
        size_mb = trace.stat().st_size / 1e6
        start = time.perf_counter()
        command = [str(Path(sys.executable).with_name("roofwise")), "analyze", str(trace),
                   "--limit", "3"]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wall_s = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"analyze failed: {done.stderr.strip()}")
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    print(f"{events:,} events ({size_mb:.1f} MB gzipped): analyze {wall_s:.1f} s, "
          f"peak RSS {peak_mib:.0f} MiB")
    print(done.stdout.strip().splitlines()[-3])


if __name__ == "__main__":
    main()
