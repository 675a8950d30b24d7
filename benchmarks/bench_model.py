"""End to end, whole process: how long `roofwise model` takes, as a user runs it.

Each command runs as its own process (Python start-up, imports of torch and transformers, the
config, the capture on fake tensors, pricing, JSON to /dev/null), median of `--runs` runs:

- one projection: `roofwise model CONFIG -m h200 --phase decode --context 4096 --json`;
- a sweep of 9 batch sizes: the same with `--sweep batch=1,2,4,...,256`;
- the ratio of the two (issue 22's goal: a sweep under 2x one projection, one projection
  under 2.5 s), with the machine's load average beside them;

each first as the first run of a config on a machine: every run on its own new, empty
capture store (every step captured, and written to the store, as a first run does), then
again on a warm store (the steps read back, as every later run of the same steps does, on
any card, regime or output format): the single projection is timed on the warm store on
another card (b200) than the one that stored it.

Python writes its bytecode as usual (`PYTHONDONTWRITEBYTECODE` is dropped from the runs'
environment, and one untimed run comes first): an installed package has its modules compiled,
so a run that compiled roofwise's own on every start (0.1 s) would time what no user waits for.

Each figure is given as wall time and as the CPU time of the process (user + system, from
its resource usage): on a shared, loaded machine the wall time moves with the load, the CPU
time much less, so compare CPU times. `--src DIR` (repeatable) times the roofwise package
found under DIR instead of the installed one (e.g. another checkout's `src`), each in turn in
the same run, so that two versions are compared under the same load.

Run: python benchmarks/bench_model.py [--config examples/models/llama-3.2-1b.json] [--runs 3]
     [--src OTHER/src --src src]
     python benchmarks/bench_model.py --corpus tests/fixtures/configs/aiconfigurator --runs 1
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BATCHES = "1,2,4,8,16,32,64,128,256"


def timed(argv: list[str], runs: int, src: str | None,
          store: str | None = None, untimed_first: bool = True) -> tuple[float, float]:
    """Median (wall, CPU) seconds of `runs` runs of a whole `roofwise` process, with the
    capture store in folder `store` (None: a new, empty one for each run); SystemExit when a
    run fails."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    env.pop("ROOFWISE_NO_CACHE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    walls, cpus = [], []
    if untimed_first:
        env["ROOFWISE_NO_CACHE"] = "1"
        subprocess.run([sys.executable, "-m", "roofwise", *argv], env=env, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # bytecode
        del env["ROOFWISE_NO_CACHE"]
    for _ in range(runs):
        if store is None:
            fresh = tempfile.mkdtemp(prefix="roofwise-store-")
            env["ROOFWISE_CACHE_DIR"] = fresh
        else:
            env["ROOFWISE_CACHE_DIR"] = store
        started = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "roofwise", *argv], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        walls.append(time.perf_counter() - started)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"roofwise {' '.join(argv)} failed (PYTHONPATH={src})")
        cpus.append(usage.ru_utime + usage.ru_stime)
        if store is None:
            shutil.rmtree(fresh)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "examples" / "models" /
                                                 "llama-3.2-1b.json"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--src", action="append", default=None,
                        help="a folder holding the roofwise package to time (repeatable)")
    parser.add_argument("--corpus", type=Path, default=None,
                        help="a folder of configs: one projection of each, as a first run")
    args = parser.parse_args()
    if args.corpus is not None:
        corpus(args.corpus, args.runs)
        return
    base = ["model", args.config, "-m", "h200", "--phase", "decode", "--context", "4096",
            "--json"]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.config}; "
          f"median of {args.runs} runs")
    for src in args.src or [None]:
        sweep = [*base, "--sweep", f"batch={BATCHES}"]
        one_wall, one_cpu = timed(base, args.runs, src)
        sweep_wall, sweep_cpu = timed(sweep, args.runs, src)
        with tempfile.TemporaryDirectory() as store:
            timed(sweep, 1, src, store)  # fills the store with every step below
            warm_wall, warm_cpu = timed([*base[:3], "b200", *base[4:]], args.runs, src, store)
            warm_sweep_wall, warm_sweep_cpu = timed(sweep, args.runs, src, store)
        print(f"{src or 'installed roofwise'}:")
        print(f"  one projection      CPU {one_cpu:6.2f} s, wall {one_wall:6.2f} s "
              "(goal under 2.5 s)")
        print(f"  sweep of 9 batches  CPU {sweep_cpu:6.2f} s = {sweep_cpu / one_cpu:.2f} x one "
              f"projection, wall {sweep_wall:6.2f} s = {sweep_wall / one_wall:.2f} x "
              "(goal under 2x)")
        print(f"  stored steps: one projection (another card) CPU {warm_cpu:6.2f} s, wall "
              f"{warm_wall:6.2f} s; sweep of 9 CPU {warm_sweep_cpu:6.2f} s, wall "
              f"{warm_sweep_wall:6.2f} s")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


def corpus(folder: Path, runs: int) -> None:
    """One projection (decode, context 4,096, h200) of every config in `folder` that
    projects, each as a first run (median of `runs`): how the time spreads over configs
    written by others. A config refused in one line (rc 2) is named and left out."""
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; every config in "
          f"{folder}; one projection each, median of {runs} runs, a new empty store per run")
    walls: dict[str, float] = {}
    refused = []
    for k, path in enumerate(sorted(folder.glob("*.json"))):
        argv = ["model", str(path), "-m", "h200", "--phase", "decode", "--context", "4096",
                "--json"]
        try:
            walls[path.stem], cpu = timed(argv, runs, None, untimed_first=k == 0)
        except SystemExit:
            refused.append(path.stem)
            continue
        print(f"  wall {walls[path.stem]:5.2f} s  CPU {cpu:5.2f} s  {path.stem}", flush=True)
    ordered = sorted(walls.values())
    under = sum(w < 2.5 for w in ordered)
    print(f"{len(ordered)} configs projected ({len(refused)} refused: {', '.join(refused)})")
    print(f"wall: median {statistics.median(ordered):.2f} s, 90th percentile "
          f"{ordered[int(0.9 * (len(ordered) - 1))]:.2f} s, max {ordered[-1]:.2f} s; "
          f"{under} of {len(ordered)} under 2.5 s")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
