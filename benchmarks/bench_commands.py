"""Every records command on the matrix's kinds of file (issue 23, item 1): `analyze` (the
table), `analyze --json`, `lint` (the table), `lint --json`, `compare --json` (against a copy
2% slower) and `report`, each beside the plain per-row script reading the same file, so that
no command falls off a cliff on a kind of file it was not tuned on (a million findings
written one object at a time, a table of every one).

Each command runs as a whole process (start-up, imports, reading, judging, writing to
/dev/null); the contenders run interleaved, round after round, the median of `--runs` kept,
with the command's largest peak RSS. `--src DIR` (repeatable) times the roofwise package
found under DIR (another checkout's `src`) instead of the installed one, each in turn in the
same rounds, so that two versions are compared under the same load.

Run: python benchmarks/bench_commands.py [--rows 200000] [--kinds contract wild fleet jsonl]
     [--runs 3] [--src OTHER/src --src src]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).parent))
import bench_end_to_end as e2e  # the per-row script and the timer
import bench_matrix as matrix  # the kinds of file

COMMANDS = ("analyze", "analyze --json", "lint", "lint --json", "compare --json", "report")


def slower_copy(path: Path, fmt: str) -> Path:
    """The same records, each 2% slower: the NEW run of `compare`."""
    out = path.with_name(f"new-{path.name}")
    if fmt == "csv":
        pl.read_csv(path).with_columns(pl.col("time_s") * 1.02).write_csv(out)
    elif fmt == "parquet":
        pl.read_parquet(path).with_columns(pl.col("time_s") * 1.02).write_parquet(out)
    else:
        pl.read_ndjson(path).with_columns(pl.col("time_s") * 1.02).write_ndjson(out)
    return out


def command_line(cli: list[str], name: str, path: Path, new: Path, page: Path,
                 machine: list[str]) -> list[str]:
    verb, *flags = name.split()
    if verb == "compare":
        return [*cli, "compare", str(path), str(new), *machine, *flags]
    if verb == "report":
        return [*cli, "report", str(path), *machine, "-o", str(page)]
    return [*cli, verb, str(path), *machine, *flags]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--kinds", nargs="+", default=["contract", "wild", "fleet", "jsonl"],
                        choices=list(matrix.KINDS))
    parser.add_argument("--commands", nargs="+", default=list(COMMANDS), choices=COMMANDS)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--src", action="append", default=None,
                        help="a folder holding the roofwise package to time (repeatable)")
    args = parser.parse_args()
    python = sys.executable
    cli = [python, "-c", "import sys; from roofwise.cli import run; sys.argv[0] = 'roofwise'; "
           "run()"]
    versions = {Path(s).resolve().parent.name + "/src": str(Path(s).resolve())
                for s in args.src} if args.src else {"installed": ""}
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
          f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"# whole processes, interleaved, median of {args.runs} rounds; output to /dev/null")
    print(f"# command: python benchmarks/bench_commands.py --rows {args.rows} --kinds "
          f"{' '.join(args.kinds)} --runs {args.runs}"
          + "".join(f" --src {s}" for s in (args.src or [])))
    print()
    heads = " | ".join(f"{v} | per-row / it | peak RSS" for v in versions)
    print(f"| kind | command | {heads} |")
    print(f"| --- | --- |{' ---: | ---: | ---: |' * len(versions)}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.kinds:
            kind = matrix.KINDS[name]
            path = matrix.write_kind(kind, args.rows, Path(tmp))
            new = slower_copy(path, kind.fmt)
            page = Path(tmp) / "report.html"
            machine = ["-m", kind.machine] if kind.machine else []
            lines = {"per-row": [python, "-c", e2e.PER_ROW, str(path), kind.fmt,
                                 matrix.constants(kind, False)]}
            for version in versions:
                for command in args.commands:
                    lines[f"{version}\0{command}"] = command_line(cli, command, path, new, page,
                                                                  machine)
            times = {k: [] for k in lines}
            peaks = dict.fromkeys(lines, 0.0)
            for _ in range(args.runs):
                for label, line in lines.items():
                    version = label.split("\0")[0]
                    if versions.get(version):
                        os.environ["PYTHONPATH"] = versions[version]
                    else:
                        os.environ.pop("PYTHONPATH", None)
                    seconds, peak = e2e.timed(line, 1)
                    times[label].append(seconds)
                    peaks[label] = max(peaks[label], peak)
            os.environ.pop("PYTHONPATH", None)
            median = {k: float(np.median(v)) for k, v in times.items()}
            for command in args.commands:
                cells = []
                for version in versions:
                    label = f"{version}\0{command}"
                    cells.append(f"{median[label]:.2f} s | {median['per-row'] / median[label]:.1f}x"
                                 f" | {peaks[label]:.0f} MB")
                print(f"| {name} ({kind.fmt}, {args.rows:,}) | `{command}` | "
                      f"{' | '.join(cells)} |", flush=True)
            print(f"| {name} ({kind.fmt}, {args.rows:,}) | per-row script | "
                  f"{median['per-row']:.2f} s | | |", flush=True)
            for p in (path, new, page):
                p.unlink(missing_ok=True)
    print(f"\n# load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
