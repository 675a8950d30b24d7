"""`roofwise fleet` on a local Dask cluster beside `roofwise analyze` on one process, over the
same sharded Parquet dataset (a benchmark history: several cards, every verdict).

The dataset is generated with a fixed seed under a temporary folder (never the repository):
`--rows` records in `--shards` Parquet shards. Each contender runs as its own process, whole
command, median of `--runs`, in turns (a burst of load falls on all of them alike):

- `roofwise analyze DATASET` (the table: counts and the worst 50 rows; one process);
- `roofwise fleet DATASET --local N` (the same table; starts and stops its cluster);
- `roofwise fleet DATASET --scheduler ADDRESS` on a cluster started before (judging only);
- the same with `--out` (the judged rows written back as a Parquet dataset).

Before timing, the fleet's table is checked equal to analyze's. The rows per shard and the
load of the machine are printed with the table.

Run: python benchmarks/bench_fleet.py [--rows 10000000] [--shards 50] [--workers 2] [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

# A fleet's cards, as `nvidia-smi`/`rocm-smi` name them, with the memory bandwidth of their
# datasheets (B/s); the last is a card no built-in profile knows (its rows are blank).
DEVICES = (("NVIDIA H200", 4.8e12), ("NVIDIA H100 80GB HBM3", 3.35e12),
           ("NVIDIA A100-SXM4-80GB", 2.039e12), ("AMD Instinct MI300X", 5.3e12),
           ("Acme Tensor 9", 1.0e12))
ROOFS = ("cuda_core.fp32", "cuda_core.fp32", "cuda_core.fp32", "vector.fp32", "cuda_core.fp32")
OPS = ("rmsnorm", "softmax", "silu_mul", "layernorm", "rope", "dequant")
# Time as a share of the datasheet memory time: mostly a fair share of it, some rows faster
# than the card's own memory allows (impossible), a few within the datasheet but above the
# calibrated envelope (anomaly: only the h200 profile is calibrated, its envelope 93.8% of the
# datasheet, and 99.5% is above 105% of that), and tiny rows that the launch floor explains
# (latency_bound).
SHARES = (0.9, 0.7, 0.45, 0.2, 0.995, 0.33)
SHARE_WEIGHTS = (0.25, 0.3, 0.2, 0.12, 0.05, 0.08)
IMPOSSIBLE_SHARE = 3.0  # three times the datasheet bandwidth: no card does that


def fleet_frame(n: int, seed: int, start: int = 0) -> pl.DataFrame:
    """`n` records of a nightly history: memory-bound kernels (fp32 vector work, at most 4
    FLOP per byte, under every card's ridge) on five cards; about 1% tiny rows at the launch
    floor and 1% impossible ones (time for three times the datasheet bandwidth)."""
    rng = np.random.default_rng(seed)
    device = rng.choice(len(DEVICES), n, p=(0.3, 0.25, 0.2, 0.2, 0.05))
    bandwidth = np.array([b for _, b in DEVICES])[device]
    tiny = rng.random(n) < 0.01
    nbytes = np.where(tiny, rng.uniform(1e3, 6.4e4, n), rng.uniform(1e6, 4e9, n)).round()
    read = (nbytes * rng.uniform(0.5, 0.9, n)).round()
    flops = (nbytes * rng.uniform(0.25, 4.0, n)).round()
    share = np.array(SHARES)[rng.choice(len(SHARES), n, p=SHARE_WEIGHTS)]
    share = np.where(rng.random(n) < 0.01, IMPOSSIBLE_SHARE, share)
    time_s = np.where(tiny, rng.uniform(6e-6, 2e-5, n), nbytes / bandwidth / share)
    night = start + np.arange(n)
    return pl.DataFrame({
        "op": np.array(OPS)[rng.integers(0, len(OPS), n)],
        "device": np.array([d for d, _ in DEVICES])[device],
        "flops": flops, "bytes": nbytes, "read_bytes": read, "write_bytes": nbytes - read,
        "roof": np.array(ROOFS)[device], "time_s": time_s, "timing": ["events"] * n,
        "night": night // 10_000,  # a field outside the contract, passed through
    })


def write_dataset(folder: Path, rows: int, shards: int, seed: int) -> list[Path]:
    """`rows` records in `shards` Parquet files (`night-00000.parquet`, ...), each with its
    own seed (`seed` + k), so a dataset is the same whatever machine writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    per = -(-rows // shards)
    paths = []
    for k in range(shards):
        start = k * per
        n = min(per, rows - start)
        if n <= 0:
            break
        path = folder / f"night-{k:05d}.parquet"
        fleet_frame(n, seed + k, start).write_parquet(path)
        paths.append(path)
    return paths


def timed(command: list[str]) -> tuple[float, str]:
    """Seconds the whole command took, and what it printed (the table: a few kB)."""
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          env={**os.environ, "COLUMNS": "160"})
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}: {done.stderr[-500:]}")
    return time.perf_counter() - start, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--shards", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--only-local", action="store_true",
                        help="time analyze and `fleet --local` only (no warm cluster, no --out)")
    args = parser.parse_args()

    import distributed  # the fleet extra's

    roofwise = [sys.executable, "-m", "roofwise"]
    root = Path(tempfile.mkdtemp(prefix="roofwise-fleet-bench-"))
    try:
        started = time.perf_counter()
        paths = write_dataset(root / "history", args.rows, args.shards, args.seed)
        size = sum(p.stat().st_size for p in paths)
        print(f"dataset: {args.rows:,} rows in {len(paths)} Parquet shards "
              f"({size / 1e6:.0f} MB), seed {args.seed}, written in "
              f"{time.perf_counter() - started:.1f} s", flush=True)
        dataset = str(root / "history")
        share = str(max(1, (os.cpu_count() or 1) // args.workers))
        with contextlib.ExitStack() as stack:
            commands = {
                "analyze (1 process)": [*roofwise, "analyze", dataset],
                f"fleet --local {args.workers} (cluster start included)":
                    [*roofwise, "fleet", dataset, "--local", str(args.workers)],
            }
            if not args.only_local:
                cluster = stack.enter_context(distributed.LocalCluster(
                    n_workers=args.workers, threads_per_worker=1, processes=True,
                    dashboard_address=":0", silence_logs=logging.ERROR,
                    env={"POLARS_MAX_THREADS": share}))
                address = cluster.scheduler_address
                commands[f"fleet --scheduler (warm cluster, {args.workers} workers)"] = [
                    *roofwise, "fleet", dataset, "--scheduler", address]
                commands["fleet --scheduler --out (rows written as Parquet)"] = [
                    *roofwise, "fleet", dataset, "--scheduler", address, "--out", "OUT"]
            times: dict[str, list[float]] = {name: [] for name in commands}
            tables: set[str] = set()
            for run in range(args.runs):
                for name, command in commands.items():
                    out = root / f"out-{run}"
                    took, table = timed([str(out) if c == "OUT" else c for c in command])
                    times[name].append(took)
                    tables.add(table)
                    shutil.rmtree(out, ignore_errors=True)
                    print(f"  {name}: {took:.1f} s (load {os.getloadavg()[0]:.1f})", flush=True)
                print(f"round {run + 1} done", flush=True)
        if len(tables) != 1:
            raise SystemExit("the commands printed different tables: figures void")
        print(next(iter(tables)).splitlines()[0])
        print("every command printed the same table")
        base = statistics.median(times["analyze (1 process)"])
        print(f"\nload average after the runs: {os.getloadavg()[0]:.1f} "
              f"(cores: {os.cpu_count()})")
        print(f"| command ({args.rows:,} rows, {len(paths)} shards) | median of {args.runs} | "
              "runs | vs analyze |")
        print("| --- | ---: | --- | ---: |")
        for name, values in times.items():
            median = statistics.median(values)
            print(f"| {name} | {median:.1f} s | "
                  f"{', '.join(f'{v:.1f}' for v in values)} | {base / median:.2f}x |")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
