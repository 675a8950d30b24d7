"""End to end, whole process: `roofwise analyze` against a per-row script and a hand-written
polars pipeline, on the same records in CSV, JSONL and Parquet.

Each contender runs as its own process (Python start-up, imports, reading, judging, writing to
/dev/null), median of `--runs` runs, all in one run of this script, so that the ratios compare
like with like on whatever load the machine carries (the load is printed with the results).

- `roofwise analyze FILE --machine h200` with `--json`, `--csv` and the table;
- the per-row script: what a user writes in 40 lines (csv/json modules, a loop, one dict per
  row, the same sums and thresholds, json.dumps per row); Parquet through pyarrow's to_pylist;
- the hand-written polars pipeline doing the same job (`by_hand_same_output.py`): it writes
  what `--json` writes (every field but `lint`, the same verdicts, reasons word for word), which
  this script checks, row for row, before it times anything;
- a lighter hand-written polars pipeline: 18 of the fields and five simpler sentences (no
  floor split or net-of-floor, no overlapped launches, no uncalibrated unit), as a floor under
  what any pipeline can cost.

Then, with `--stream-rows`, one streaming run of `roofwise analyze --json` over that many rows
(a folder of JSONL shards) with its peak RSS.

Run: python benchmarks/bench_end_to_end.py [--sizes 200000 1000000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

import roofwise

FORMATS = ("csv", "jsonl", "parquet")
OPS = ("rmsnorm", "gemm", "softmax", "qk_norm_rope_quant", "attention_decode", "silu_mul")
ROOFS = ("cuda_core.fp32", "tensor_core.bf16", "tensor_core.fp8", "sfu.fp32")


def records_frame(n: int, seed: int = 0) -> pl.DataFrame:
    """`n` records as a sweep writes them: op, workload, device, bytes split, roof, time,
    timing. Times spread so that every verdict occurs (mostly below/at ceiling, some under
    the floor, a few impossible)."""
    rng = np.random.default_rng(seed)
    read = rng.uniform(1e4, 4e9, n).round()
    write = (read * rng.uniform(0.05, 1.0, n)).round()
    total = read + write
    roof = rng.choice(len(ROOFS), n, p=[0.35, 0.45, 0.17, 0.03])  # few ops bind the SFU
    intensity = np.where(roof == 0, rng.uniform(0.5, 20, n), rng.uniform(1, 800, n))
    flops = (total * intensity).round()
    bandwidth = 4.5024e12
    sol = np.maximum(total / bandwidth, flops / np.array([5.7e13, 7.6e14, 1.38e15, 4.18e12])[roof])
    time_s = sol / rng.choice([0.95, 0.85, 0.6, 0.3, 0.1, 1.3], n,
                              p=[0.1, 0.3, 0.3, 0.2, 0.08, 0.02])
    tokens = rng.integers(1, 65536, n)
    return pl.DataFrame({
        "op": np.array(OPS)[rng.integers(0, len(OPS), n)],
        "workload": [f'{{"tokens": {t}, "hidden": 4096}}' for t in tokens.tolist()],
        "device": ["NVIDIA H200"] * n,
        "flops": flops, "bytes": total, "read_bytes": read, "write_bytes": write,
        "roof": np.array(ROOFS)[roof], "time_s": time_s, "timing": ["events"] * n,
    })


def write_files(frame: pl.DataFrame, folder: Path) -> dict[str, Path]:
    paths = {kind: folder / f"records.{kind}" for kind in FORMATS}
    frame.write_csv(paths["csv"])
    frame.write_parquet(paths["parquet"])
    # JSONL with the workload as an object, as roofwise bench writes it
    with paths["jsonl"].open("w") as out:
        for chunk in frame.iter_slices(200_000):
            lines = chunk.select(pl.struct(pl.exclude("workload")).struct.json_encode()
                                 .alias("j"), pl.col("workload"))
            for text, workload in lines.iter_rows():
                out.write(f'{{"workload": {workload}, {text[1:]}\n')
    return paths


PER_ROW = r'''
import csv, json, sys
path, kind, c = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
def rows():
    if kind == "csv":
        with open(path, newline="") as f:
            yield from csv.DictReader(f)
    elif kind == "jsonl":
        with open(path) as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)
    else:
        import pyarrow.parquet as pq
        yield from pq.read_table(path).to_pylist()
out = sys.stdout
for i, r in enumerate(rows(), 1):
    try:
        flops, nbytes, t = float(r["flops"]), float(r["bytes"]), float(r["time_s"])
        roof = r["roof"]
        m = c["by_device"][r["device"]] if "by_device" in c else c  # a fleet: per card
        rate, peak, calibrated = m["units"][roof]
    except (KeyError, ValueError, TypeError) as e:
        print(f"{path}:{i}: skipped ({e})", file=sys.stderr)
        continue
    mem, comp = nbytes / m["bw"], flops / rate
    sol = max(mem, comp)
    memory = mem >= comp
    eff = sol / t
    floor = m["floor"]
    if nbytes / t > m["theory_bw"] or flops / t > peak:
        verdict = "impossible"
        reasons = [f"bytes/time {nbytes / t / 1e9:.1f} GB/s exceeds hbm theoretical "
                   f"{m['theory_bw'] / 1e9:.0f} GB/s: physically impossible"]
    elif sol < floor and floor >= 0.5 * t:
        verdict = "latency_bound"
        reasons = [f"SOL {sol * 1e6:.3f} us is below the events floor {floor * 1e6:.3f} us"]
    elif eff > 1.05:
        verdict = "anomaly"
        reasons = [f"{eff:.1%} of the envelope ceiling: above 105%"]
    else:
        verdict = "at_ceiling" if eff >= 0.8 else "below"
        reasons = [f"{eff:.1%} of SOL; {'memory' if memory else 'compute'}-bound on "
                   f"{'hbm read mix' if memory else roof}"]
    row = dict(r)
    row.update(flops=flops, bytes=nbytes, time_s=t, machine=m["name"], memory_time_s=mem,
               compute_time_s=comp, sol_time_s=sol, bound="memory" if memory else "compute",
               efficiency=None if verdict in ("impossible", "latency_bound") else eff,
               verdict=verdict, reasons=reasons)
    out.write(json.dumps(row) + "\n")
'''

POLARS = r'''
import json, sys
import polars as pl
path, kind, c = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
read = {"csv": pl.scan_csv, "jsonl": pl.scan_ndjson, "parquet": pl.scan_parquet}[kind]
units = pl.DataFrame({"roof": list(c["units"]),
                      "rate": [v[0] for v in c["units"].values()],
                      "peak": [v[1] for v in c["units"].values()]})
f = read(path).join(units.lazy(), on="roof", how="left")
mem, comp = pl.col("bytes") / c["bw"], pl.col("flops") / pl.col("rate")
f = f.with_columns(memory_time_s=mem, compute_time_s=comp,
                   sol_time_s=pl.max_horizontal(mem, comp), memory=mem >= comp)
eff = pl.col("sol_time_s") / pl.col("time_s")
impossible = ((pl.col("bytes") / pl.col("time_s") > c["theory_bw"])
              | (pl.col("flops") / pl.col("time_s") > pl.col("peak")))
latency = (pl.col("sol_time_s") < c["floor"]) & (c["floor"] >= 0.5 * pl.col("time_s"))
pct = ((eff * 1000).round() / 10).cast(pl.String) + "%"
f = f.with_columns(efficiency=eff, verdict=pl.when(impossible).then(pl.lit("impossible"))
                   .when(latency).then(pl.lit("latency_bound"))
                   .when(eff > 1.05).then(pl.lit("anomaly"))
                   .when(eff >= 0.8).then(pl.lit("at_ceiling")).otherwise(pl.lit("below")))
bound = pl.when(pl.col("memory")).then(pl.lit("memory")).otherwise(pl.lit("compute"))
on = pl.when(pl.col("memory")).then(pl.lit("hbm read mix")).otherwise(pl.col("roof"))
gbs = ((pl.col("bytes") / pl.col("time_s") / 1e8).round() / 10).cast(pl.String)
reason = (pl.when(pl.col("verdict") == "impossible")
          .then(pl.format("bytes/time {} GB/s exceeds hbm theoretical {} GB/s: physically "
                          "impossible", gbs, pl.lit(round(c["theory_bw"] / 1e9))))
          .when(pl.col("verdict") == "latency_bound")
          .then(pl.format("SOL {} us is below the events floor {} us",
                          (pl.col("sol_time_s") * 1e6).round(3), pl.lit(c["floor"] * 1e6)))
          .when(pl.col("verdict") == "anomaly")
          .then(pl.format("{} of the envelope ceiling: above 105%", pct))
          .otherwise(pl.format("{} of SOL; {}-bound on {}", pct, bound, on)))
f = f.with_columns(machine=pl.lit("h200"), bound=bound, reasons=pl.concat_list(reason),
                   efficiency=pl.when(pl.col("verdict").is_in(["impossible", "latency_bound"]))
                   .then(None).otherwise(eff)).drop("rate", "peak", "memory")
f.collect().write_ndjson(sys.stdout.buffer)
'''


def constants(card: str = "h200") -> dict[str, object]:
    """The numbers of `card`'s profile the per-row script reads."""
    h200 = roofwise.builtin_machines()[card]
    return {"name": card, "bw": h200.dram.effective_bytes_per_s(),
            "theory_bw": h200.dram.theoretical_bytes_per_s,
            "l2_bytes": getattr(h200.memory.get("l2"), "capacity_bytes", None),
            "floor": h200.latency_floors.floor_s("events"),
            "units": {k: [h200.units[k].effective_ops_per_s(),
                          h200.units[k].theoretical_ops_per_s, h200.units[k].calibrated]
                      for k in ROOFS}}


def constants_full(card: str = "h200") -> dict[str, object]:
    """The h200 numbers `by_hand_same_output.py` needs, read from the profile as its author
    would: per roof its rate, envelope rate, theoretical rate, calibration and what its work is
    counted in; the bandwidths, the events and kernel floors, and the ceilings anomalies name."""
    from roofwise.base.fmt import op_name

    h200 = roofwise.builtin_machines()[card]

    def ceiling(memory: bool, key: str) -> list[object]:
        found = h200.ceiling(memory, key)
        fraction = "uncalibrated" if found.fraction is None else f"{found.fraction:.4f}"
        return [found.name, found.theoretical_per_s, fraction]

    return {"name": card, "bw": h200.dram.effective_bytes_per_s(),
            "memory": h200.dram.name, "memory_calibrated": bool(h200.dram.calibration_by_mix),
            "mix": h200.dram.envelope_mix or "theoretical",
            "envelope_bw": h200.dram.effective_bytes_per_s(None),
            "theory_bw": h200.dram.theoretical_bytes_per_s,
            "l2_bytes": getattr(h200.memory.get("l2"), "capacity_bytes", None),
            "events_floor": h200.latency_floors.floor_s("events"),
            "kernel_floor": h200.latency_floors.floor_s("kernel"),
            "units": {k: [h200.units[k].effective_ops_per_s(),
                          h200.units[k].effective_ops_per_s(None),
                          h200.units[k].theoretical_ops_per_s, h200.units[k].calibrated,
                          op_name(k)] for k in ROOFS},
            "memory_ceiling": ceiling(True, ""),
            "ceilings": {k: ceiling(False, k) for k in ROOFS}}


# A small launcher that runs the command as its own child and reports that child's peak RSS:
# a process forked straight from this script would count this script's memory in its own
# peak (Linux folds the forked image's high-water mark into the child's at exec).
# It times the command too, so that its own start-up is in no figure.
_PEAK = r"""
import os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(f"{time.perf_counter() - start} {usage.ru_maxrss}")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def timed(command: list[str], runs: int) -> tuple[float, float]:
    """Median wall seconds over `runs` whole-process runs, and the largest peak RSS (MB) of the
    command itself (measured by a small launcher, not inherited from this script)."""
    times, peak = [], 0.0
    for _ in range(runs):
        with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as measured:
            child = subprocess.run([sys.executable, "-c", _PEAK, measured.name, *command],
                                   stdout=subprocess.DEVNULL, stderr=err, check=False)
            if child.returncode not in (0, 1):
                err.seek(0)
                raise SystemExit(f"{' '.join(command[:4])}: exit {child.returncode}: "
                                 f"{err.read().decode()[-400:]}")
            seconds, rss_kb = measured.read().split()
            times.append(float(seconds))
            peak = max(peak, int(rss_kb) / 1024)
    return statistics.median(times), peak


def timed_rounds(commands: dict[str, list[str]], runs: int) -> dict[str, float]:
    """Median wall seconds of each command over `runs` rounds, each round running every
    command once in turn: a burst of load on a shared machine falls on all of them alike."""
    times: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(runs):
        for label, command in commands.items():
            times[label].append(timed(command, 1)[0])
    return {label: statistics.median(t) for label, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--stream-rows", type=int, default=10_000_000,
                        help="rows for the streaming run (0: skip)")
    parser.add_argument("--formats", nargs="+", default=list(FORMATS))
    parser.add_argument("--report-rows", type=int, default=1_000_000,
                        help="rows for the report and compare runs (0: skip)")
    args = parser.parse_args()
    python, c, full = sys.executable, json.dumps(constants()), json.dumps(constants_full())
    roofwise_cli = [str(Path(python).with_name("roofwise"))]  # the installed command
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
          f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"# whole process, median of {args.runs} rounds (each runs every contender "
          "once); output to /dev/null")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            paths = write_files(records_frame(n), Path(tmp))
            for kind in args.formats:
                path = str(paths[kind])
                _check_same_output(
                    [*roofwise_cli, "analyze", path, "-m", "h200", "--json"],
                    [python, str(SAME_OUTPUT), path, kind, full], Path(tmp))
                commands = {label: command for label, command in (
                        ("roofwise --json", [*roofwise_cli, "analyze", path, "-m", "h200",
                                             "--json"]),
                        ("roofwise --csv", [*roofwise_cli, "analyze", path, "-m", "h200",
                                            "--csv"]),
                        ("roofwise table", [*roofwise_cli, "analyze", path, "-m", "h200"]),
                        ("per-row script", [python, "-c", PER_ROW, path, kind, c]),
                        ("polars, same output", [python, str(SAME_OUTPUT), path, kind, full]),
                        ("polars, lighter job", [python, "-c", POLARS, path, kind, c]))}
                rows = timed_rounds(commands, args.runs)
                json_s = rows["roofwise --json"]
                print(f"{n:>9,} rows {kind:<7} " + "  ".join(
                    f"{k} {v:6.2f} s" for k, v in rows.items()))
                print(f"{'':>24}--json: {rows['per-row script'] / json_s:4.1f}x faster than "
                      f"the per-row script; {json_s / rows['polars, same output']:4.2f}x the "
                      f"hand-written polars pipeline with the same output "
                      f"({json_s / rows['polars, lighter job']:4.2f}x the lighter one)")
            sys.stdout.flush()
        if args.report_rows:
            report_and_compare(Path(tmp), args.report_rows, roofwise_cli, args.runs)
        if args.stream_rows:
            stream(Path(tmp), args.stream_rows, roofwise_cli)
    print(f"# load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


SAME_OUTPUT = Path(__file__).with_name("by_hand_same_output.py")


def _check_same_output(roofwise_json: list[str], by_hand: list[str], folder: Path) -> None:
    """Both commands' lines, read back by polars, equal row for row (roofwise's `lint` aside):
    a baseline that wrote less would time a lighter job."""
    outputs = []
    for name, command in (("roofwise", roofwise_json), ("by_hand", by_hand)):
        target = folder / f"{name}.jsonl"
        with target.open("wb") as out:
            subprocess.run(command, stdout=out, check=True)
        outputs.append(pl.read_ndjson(target, infer_schema_length=None))
        target.unlink()
    ours, theirs = outputs
    ours = ours.drop("lint")
    if ours.columns != theirs.columns or ours.height != theirs.height:
        raise SystemExit(f"the hand-written pipeline's fields or rows differ from roofwise's: "
                         f"{ours.columns} ({ours.height}) vs {theirs.columns} ({theirs.height})")
    differing = [c for c in ours.columns if not ours[c].equals(theirs[c])]
    if differing:
        raise SystemExit(f"the hand-written pipeline's output differs in {differing}")


def report_and_compare(folder: Path, total: int, roofwise_cli: list[str], runs: int) -> None:
    """`roofwise report` on `total` rows and `roofwise compare` of two runs of `total` rows
    (the second 2% slower), Parquet, beside `analyze --json` of the same file (a report reads
    and judges as much, then draws and writes a page): seconds, and the page's size."""
    base = folder / "report"
    base.mkdir()
    frame = records_frame(total, seed=7)
    frame.write_parquet(base / "base.parquet")
    frame.with_columns(pl.col("time_s") * 1.02).write_parquet(base / "new.parquet")
    page = base / "report.html"
    commands = {
        "analyze --json": [*roofwise_cli, "analyze", str(base / "base.parquet"), "-m", "h200",
                           "--json"],
        "report": [*roofwise_cli, "report", str(base / "base.parquet"), "-m", "h200", "-o",
                   str(page)],
        "compare": [*roofwise_cli, "compare", str(base / "base.parquet"),
                    str(base / "new.parquet"), "-m", "h200"]}
    seconds = timed_rounds(commands, runs)
    print(f"{total:>9,} rows parquet " + "  ".join(f"{k} {v:6.2f} s" for k, v in seconds.items())
          + f"  (report page {page.stat().st_size / 1e6:.1f} MB; compare reads two runs)")


def stream(folder: Path, total: int, roofwise_cli: list[str]) -> None:
    """`roofwise analyze --json` over a folder of JSONL shards of `total` rows: time, RSS."""
    shards = folder / "shards"
    shards.mkdir()
    per = 1_000_000
    for k, start in enumerate(range(0, total, per)):
        path = write_files(records_frame(min(per, total - start), seed=k), folder)["jsonl"]
        path.rename(shards / f"part-{k:04d}.jsonl")
    size = sum(p.stat().st_size for p in shards.iterdir()) / 1e9
    seconds, peak = timed([*roofwise_cli, "analyze", str(shards), "-m", "h200", "--json"], 1)
    print(f"stream {total:,} rows ({size:.1f} GB of JSONL in {total // per} shards), --json: "
          f"{seconds:.1f} s, peak RSS {peak:.0f} MB")


if __name__ == "__main__":
    main()
