"""The benchmark matrix (issue 23): `roofwise analyze --json` on every kind of records file a
user brings, against the plain per-row script and the hand-written same-output pipeline.

Kinds (each generated with its own seed, so no kind is tuned on another's numbers):

- contract:  CSV with only the five required fields (no workload, device or timing);
- extras:    CSV with fields outside the contract (workload JSON, run id, commit, batch);
- jsonl:     JSONL with workload objects, device, timing and a read/write split;
- parquet:   Parquet of the same records (workload as JSON text);
- ordinary:  CSV with a workload, nearly every row below or at its ceiling;
- wild:      CSV with a workload, most rows impossible or anomalies;
- many_ops:  CSV, 30,000 distinct op names, with p10/p90 percentiles;
- fleet:     CSV whose `device` names six cards (and a `profile` field): no --machine, each
             row judged on its card's profile.

Each contender runs as a whole process (start-up, imports, reading, judging, writing to
/dev/null); the contenders run interleaved, round after round, and the median of `--runs`
rounds is kept, with roofwise's largest peak RSS. Before timing a kind, the same-output
pipeline's lines are checked equal to roofwise's, row for row (`bench_end_to_end`).

Goals, on every kind (not on average): >= 3x the per-row script at 200,000 rows, >= 5x at
1,000,000; within 1.5x of the same-output pipeline; peak RSS under 1 GB at 1,000,000 rows.

Run: python benchmarks/bench_matrix.py [--sizes 200000 1000000] [--kinds contract fleet]
     [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).parent))
import bench_end_to_end as e2e  # the per-row script, the timers, the output check

ROOFS = e2e.ROOFS
# The cards of the fleet kind: every one has all of ROOFS, as a real fleet's records would.
FLEET = {"NVIDIA H200": "h200", "NVIDIA H100 80GB HBM3": "h100-sxm",
         "NVIDIA H100 PCIe": "h100-pcie", "NVIDIA B200": "b200", "NVIDIA L40S 48GB": "l40s",
         "NVIDIA GeForce RTX 4090": "rtx-4090"}


def _times(rng: np.random.Generator, sol: np.ndarray, spread: str) -> np.ndarray:
    """Measured times from speed-of-light times: a ratio drawn per row. `mixed` reaches every
    verdict, `ordinary` keeps nearly every row below or at its ceiling, `wild` makes most rows
    impossible (far above the ceiling) or anomalies (just above it)."""
    n = len(sol)
    ratios, weights = {
        "mixed": ([0.95, 0.85, 0.6, 0.3, 0.1, 1.3], [0.1, 0.3, 0.3, 0.2, 0.08, 0.02]),
        "ordinary": ([0.97, 0.85, 0.6, 0.3, 0.1], [0.15, 0.3, 0.3, 0.2, 0.05]),
        "wild": ([1.08, 1.2, 1.6, 3.0, 0.5], [0.3, 0.2, 0.2, 0.2, 0.1]),
    }[spread]
    return sol / rng.choice(ratios, n, p=weights) * rng.uniform(0.995, 1.005, n)


def _work(rng: np.random.Generator, n: int, tiny: float = 0.0
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """read bytes, write bytes, flops and roof index per row (`tiny`: the share of rows small
    enough to sit under the launch floor)."""
    read = rng.uniform(1e4, 4e9, n).round()
    small = rng.random(n) < tiny
    read[small] = rng.uniform(1e2, 1e5, int(small.sum())).round()
    write = (read * rng.uniform(0.05, 1.0, n)).round()
    roof = rng.choice(len(ROOFS), n, p=[0.35, 0.45, 0.17, 0.03])
    intensity = np.where(roof == 0, rng.uniform(0.5, 20, n), rng.uniform(1, 800, n))
    return read, write, ((read + write) * intensity).round(), roof


def _sol(card: str, flops: np.ndarray, nbytes: np.ndarray, roof: np.ndarray) -> np.ndarray:
    import roofwise

    machine = roofwise.builtin_machines()[card]
    rates = np.array([machine.units[k].effective_ops_per_s() for k in ROOFS])
    return np.maximum(nbytes / machine.dram.effective_bytes_per_s(), flops / rates[roof])


def _base(n: int, seed: int, spread: str = "mixed", ops: int = 0, card: str = "h200"
          ) -> tuple[np.random.Generator, dict[str, object]]:
    rng = np.random.default_rng(seed)
    read, write, flops, roof = _work(rng, n, tiny=0.02 if spread == "mixed" else 0.0)
    total = read + write
    time_s = _times(rng, _sol(card, flops, total, roof), spread)
    names = (np.array(e2e.OPS) if not ops else
             np.array([f"{e2e.OPS[k % len(e2e.OPS)]}_{k:05d}" for k in range(ops)]))
    columns: dict[str, object] = {
        "op": names[rng.integers(0, len(names), n)], "flops": flops, "bytes": total,
        "read_bytes": read, "write_bytes": write, "roof": np.array(ROOFS)[roof],
        "time_s": time_s}
    return rng, columns


def _workloads(rng: np.random.Generator, n: int) -> list[str]:
    tokens = rng.integers(1, 65536, n).tolist()
    hidden = rng.choice([2048, 4096, 8192], n).tolist()
    return [f'{{"tokens": {t}, "hidden": {h}}}' for t, h in zip(tokens, hidden, strict=True)]


def contract(n: int, seed: int) -> pl.DataFrame:
    _, c = _base(n, seed)
    return pl.DataFrame({k: c[k] for k in ("op", "flops", "bytes", "roof", "time_s")})


def extras(n: int, seed: int) -> pl.DataFrame:
    rng, c = _base(n, seed)
    return pl.DataFrame({
        "op": c["op"], "workload": _workloads(rng, n),
        "run_id": [f"run-{k}" for k in rng.integers(0, 500, n).tolist()],
        "commit": np.array([f"{zlib.crc32(bytes([k])):08x}" for k in range(40)])[
            rng.integers(0, 40, n)],
        "batch": rng.integers(1, 256, n),
        **{k: c[k] for k in ("flops", "bytes", "roof", "time_s")}})


def sweep(n: int, seed: int, spread: str = "mixed") -> pl.DataFrame:
    """Records as `roofwise bench` writes them: workload, device, split, timing."""
    rng, c = _base(n, seed, spread)
    return pl.DataFrame({
        "op": c["op"], "workload": _workloads(rng, n), "device": ["NVIDIA H200"] * n,
        **{k: c[k] for k in ("flops", "bytes", "read_bytes", "write_bytes", "roof",
                             "time_s")},
        "timing": ["events"] * n})


def many_ops(n: int, seed: int) -> pl.DataFrame:
    rng, c = _base(n, seed, ops=30_000)
    time_s = np.asarray(c["time_s"])
    spread = rng.uniform(0.01, 0.3, n)
    return pl.DataFrame({
        "op": c["op"], **{k: c[k] for k in ("flops", "bytes", "roof")}, "time_s": time_s,
        "time_p10_s": time_s * (1 - spread / 2), "time_p90_s": time_s * (1 + spread)})


def fleet(n: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    devices = np.array(list(FLEET))
    on = rng.integers(0, len(devices), n)
    read, write, flops, roof = _work(rng, n, tiny=0.02)
    total = read + write
    sol = np.zeros(n)
    for k, device in enumerate(devices):
        at = on == k
        sol[at] = _sol(FLEET[str(device)], flops[at], total[at], roof[at])
    return pl.DataFrame({
        "op": np.array(e2e.OPS)[rng.integers(0, len(e2e.OPS), n)],
        "workload": _workloads(rng, n), "device": devices[on],
        "profile": np.array(list(FLEET.values()))[on], "flops": flops, "bytes": total,
        "read_bytes": read, "write_bytes": write, "roof": np.array(ROOFS)[roof],
        "time_s": _times(rng, sol, "mixed"), "timing": ["events"] * n})


@dataclass(frozen=True)
class Kind:
    name: str
    fmt: str  # csv, jsonl or parquet
    make: Callable[[int, int], pl.DataFrame]
    machine: str | None = "h200"  # --machine, or None: each row's device picks


KINDS = {k.name: k for k in (
    Kind("contract", "csv", contract),
    Kind("extras", "csv", extras),
    Kind("jsonl", "jsonl", sweep),
    Kind("parquet", "parquet", sweep),
    Kind("ordinary", "csv", lambda n, seed: sweep(n, seed, "ordinary")),
    Kind("wild", "csv", lambda n, seed: sweep(n, seed, "wild")),
    Kind("many_ops", "csv", many_ops),
    Kind("fleet", "csv", fleet, machine=None),
)}


def seed_of(kind: str, n: int) -> int:
    """Each kind (and size) its own seed, fixed from its name."""
    return zlib.crc32(f"{kind}:{n}".encode())


def write_kind(kind: Kind, n: int, folder: Path) -> Path:
    frame = kind.make(n, seed_of(kind.name, n))
    path = folder / f"{kind.name}-{n}.{kind.fmt}"
    if kind.fmt == "csv":
        frame.write_csv(path)
    elif kind.fmt == "parquet":
        frame.write_parquet(path)
    else:  # JSON objects for the workload, as roofwise bench writes them
        with path.open("w") as out:
            for chunk in frame.iter_slices(200_000):
                lines = chunk.select(pl.struct(pl.exclude("workload")).struct.json_encode()
                                     .alias("j"), pl.col("workload"))
                for text, workload in lines.iter_rows():
                    out.write(f'{{"workload": {workload}, {text[1:]}\n')
    return path


def constants(kind: Kind, full: bool) -> str:
    """What the per-row script (or with `full` the same-output pipeline) reads: the h200's
    numbers, or each fleet card's by device."""
    of = e2e.constants_full if full else e2e.constants
    if kind.machine is not None:
        return json.dumps(of(kind.machine))
    return json.dumps({"by_device": {d: of(card) for d, card in FLEET.items()}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200_000, 1_000_000])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=list(KINDS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-check", action="store_true",
                        help="skip checking the same-output pipeline's lines first")
    args = parser.parse_args()
    python = sys.executable
    roofwise_cli = [str(Path(python).with_name("roofwise"))]
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
          f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"# whole processes, interleaved, median of {args.runs} rounds; output to /dev/null; "
          "peak RSS of roofwise")
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):  # the contenders inherit the change
        print("# PYTHONDONTWRITEBYTECODE unset: an installed package has its bytecode, so no "
              "run pays for compiling its modules")
    print("# command: python benchmarks/bench_matrix.py --sizes "
          f"{' '.join(map(str, args.sizes))} --kinds {' '.join(args.kinds)} --runs {args.runs}")
    print()
    print("| kind | rows | `analyze --json` | per-row script | ratio | same-output pipeline "
          "| ratio | peak RSS | goals |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            for name in args.kinds:
                kind = KINDS[name]
                path = str(write_kind(kind, n, Path(tmp)))
                ours = [*roofwise_cli, "analyze", path, "--json",
                        *(["-m", kind.machine] if kind.machine else [])]
                by_hand = [python, str(e2e.SAME_OUTPUT), path, kind.fmt, constants(kind, True)]
                if not args.no_check:
                    e2e._check_same_output(ours, by_hand, Path(tmp))
                commands = {"roofwise": ours, "by hand": by_hand,
                            "per-row": [python, "-c", e2e.PER_ROW, path, kind.fmt,
                                        constants(kind, False)]}
                seconds, peaks = _rounds(commands, args.runs)
                ratio = seconds["per-row"] / seconds["roofwise"]
                against = seconds["roofwise"] / seconds["by hand"]
                goal = 3.0 if n < 1_000_000 else 5.0
                met = [ratio >= goal, against <= 1.5, n < 1_000_000 or peaks["roofwise"] < 1024]
                print(f"| {name} ({kind.fmt}) | {n:,} | {seconds['roofwise']:.2f} s | "
                      f"{seconds['per-row']:.2f} s | {ratio:.1f}x | {seconds['by hand']:.2f} s | "
                      f"{against:.2f}x | {peaks['roofwise']:.0f} MB | "
                      f"{'met' if all(met) else 'MISSED'} |", flush=True)
                Path(path).unlink()
    print(f"\n# load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def _rounds(commands: dict[str, list[str]], runs: int
            ) -> tuple[dict[str, float], dict[str, float]]:
    """Median seconds and largest peak RSS (MB) per command, over `runs` interleaved rounds."""
    times: dict[str, list[float]] = {k: [] for k in commands}
    peaks = dict.fromkeys(commands, 0.0)
    for _ in range(runs):
        for label, command in commands.items():
            seconds, peak = e2e.timed(command, 1)
            times[label].append(seconds)
            peaks[label] = max(peaks[label], peak)
    return {k: float(np.median(v)) for k, v in times.items()}, peaks


if __name__ == "__main__":
    main()
