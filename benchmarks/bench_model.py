"""End to end, whole process: how long `roofwise model` takes, as a user runs it.

Each command runs as its own process (Python start-up, imports of torch and transformers, the
config, the capture on fake tensors, pricing, JSON to /dev/null), median of `--runs` runs:

- one projection: `roofwise model CONFIG -m h200 --phase decode --context 4096 --json`;
- a sweep of 9 batch sizes: the same with `--sweep batch=1,2,4,...,256`;
- the ratio of the two (issue 22's goal: a sweep under 2x one projection, one projection
  under 2.5 s), with the machine's load average beside them, since the figures move with it.

Run: python benchmarks/bench_model.py [--config examples/models/llama-3.2-1b.json] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BATCHES = "1,2,4,8,16,32,64,128,256"


def timed(argv: list[str], runs: int) -> float:
    """Median wall time of `runs` runs of a whole `roofwise` process, in seconds."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "roofwise", *argv], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "examples" / "models" /
                                                 "llama-3.2-1b.json"))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    base = ["model", args.config, "-m", "h200", "--phase", "decode", "--context", "4096",
            "--json"]
    load = os.getloadavg()[0]
    one_s = timed(base, args.runs)
    sweep_s = timed([*base, "--sweep", f"batch={BATCHES}"], args.runs)
    print(f"load average {load:.1f} on {os.cpu_count()} cores; {args.config}")
    print(f"one projection        {one_s:6.2f} s (goal under 2.5 s)")
    print(f"sweep of 9 batches    {sweep_s:6.2f} s = {sweep_s / one_s:.2f} x one projection "
          "(goal under 2x)")


if __name__ == "__main__":
    main()
