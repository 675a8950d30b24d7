"""Pricing and judging a million records: vectorised roofwise against a plain per-row loop.

Prints both times and their ratio (measured in the same run), and how long reading a million
records from disk takes in each supported format: the columnar path (polars, see
docs/columnar-engine.md) and, for comparison, the per-row reader.
Run: python benchmarks/bench_pricing.py
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from roofwise.output.analysis import analyze
from roofwise.pricing.core import uniform
from roofwise.profiles.load import builtin_machines
from roofwise.records.read import RecordColumns, read_records
from roofwise.records.write import write_records
from roofwise.verdicts.rules import (
    ANOMALY_EFFICIENCY,
    AT_CEILING_EFFICIENCY,
    FLOOR_EXPLAINS_SHARE,
    FLOOR_NOISE,
)


def synthetic(n: int, seed: int = 0) -> RecordColumns:
    rng = np.random.default_rng(seed)
    nan = np.full(n, np.nan)
    names = ("cuda_core.fp32", "tensor_core.bf16", "tensor_core.fp8", "sfu.fp32")
    roof_codes = rng.integers(0, len(names), n).astype(np.int32)
    roofs = np.array(names, dtype=object)[roof_codes]
    return RecordColumns(
        op=np.full(n, "op", dtype=object), flops=rng.uniform(1e6, 1e13, n),
        bytes=rng.uniform(1e3, 1e10, n), roof=roofs,
        time_s=rng.uniform(1e-6, 1e-1, n), timing=uniform("device", n),
        device=np.full(n, "NVIDIA H200", dtype=object), read_bytes=nan, write_bytes=nan,
        time_p10_s=nan, time_p90_s=nan, flops_by_unit={}, has_unit_split=np.zeros(n, bool),
        line=np.arange(n), rows=None, roof_codes=roof_codes, roof_names=names,
        device_codes=np.zeros(n, dtype=np.int32), device_names=("NVIDIA H200",))


def loop_baseline(columns: RecordColumns, machine) -> list[str]:
    """What a straightforward script does: one Python iteration per record."""
    bw = machine.dram.effective_bytes_per_s()
    theory_bw = machine.dram.theoretical_bytes_per_s
    events_floor = machine.latency_floors.floor_s("events")
    kernel_floor = machine.latency_floors.floor_s("kernel")
    out = []
    for i in range(len(columns)):
        unit = machine.units[columns.roof[i]]
        rate = unit.effective_ops_per_s()
        mem = columns.bytes[i] / bw
        comp = columns.flops[i] / rate
        sol = max(mem, comp)
        t = columns.time_s[i]
        eff = sol / t
        if columns.bytes[i] / t > theory_bw or columns.flops[i] / t > unit.theoretical_ops_per_s:
            out.append("impossible")
        elif sol < (floor := kernel_floor if t * (1 + FLOOR_NOISE) < events_floor
                    else events_floor) and floor >= FLOOR_EXPLAINS_SHARE * t and not (
                AT_CEILING_EFFICIENCY <= eff <= ANOMALY_EFFICIENCY):
            out.append("latency_bound")
        elif eff > ANOMALY_EFFICIENCY:
            out.append("anomaly")
        elif eff >= AT_CEILING_EFFICIENCY and math.isfinite(eff):
            out.append("at_ceiling")
        else:
            out.append("below")
    return out


def best_of(fn, repeats: int) -> tuple[float, object]:
    best, result = math.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--read-rows", type=int, default=1_000_000)
    args = parser.parse_args()
    machines = builtin_machines()
    h200 = machines["h200"]
    columns = synthetic(args.rows)

    vector_s, analysis = best_of(lambda: analyze(columns, machines), 3)
    loop_s, verdicts = best_of(lambda: loop_baseline(columns, h200), 1)
    fast = [analysis.verdict_name(i) for i in range(0, args.rows, max(1, args.rows // 1000))]
    slow = verdicts[:: max(1, args.rows // 1000)]
    assert fast == slow, "vectorised and loop verdicts disagree"
    print(f"price + judge {args.rows:,} records (device matched per row, 2-core machine):")
    print(f"  roofwise (numpy columns): {vector_s:8.3f} s")
    print(f"  per-row Python loop     : {loop_s:8.3f} s")
    print(f"  speed-up                : {loop_s / vector_s:8.1f} x")

    source = columns if args.read_rows <= args.rows else synthetic(args.read_rows)
    rows = [{"op": "op", "flops": float(source.flops[i]), "bytes": float(source.bytes[i]),
             "roof": str(source.roof[i]), "time_s": float(source.time_s[i]),
             "device": "NVIDIA H200", "timing": "device"} for i in range(args.read_rows)]
    paths = ((True, "columnar (polars)"), (False, "per-row reader"))
    print(f"read {args.read_rows:,} records from disk (parse + validate into columns):")
    with tempfile.TemporaryDirectory() as folder:
        for suffix in ("jsonl", "csv", "parquet"):
            path = Path(folder) / f"records.{suffix}"
            write_records(path, rows)
            size_mb = path.stat().st_size / 1e6
            for columnar, label in paths:
                seconds, loaded = best_of(
                    lambda p=path, c=columnar: read_records(p, keep_rows=False, columnar=c), 1)
                assert len(loaded.columns) == args.read_rows
                print(f"  {suffix:<8} {label:<20} {seconds:8.2f} s  ({size_mb:7.1f} MB)")

if __name__ == "__main__":
    main()
