"""Where `roofwise analyze --json` spends its time: each stage timed with the stages run one
after another on one thread (no read-ahead, no background writer), on the benchmark's records
(`bench_end_to_end.records_frame`) in CSV, JSONL and Parquet.

Each run is its own process, so the first batch pays what a user's command pays (imports
aside: `total` starts once the command module is loaded). The engine still uses every core
inside a stage. The table in docs/columnar-engine.md comes from this script.

Run: python benchmarks/bench_stages.py [--rows 200000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_end_to_end import FORMATS, records_frame, write_files

# Run in the child: the command with its stages wrapped in timers and made serial.
_CHILD = r"""
import collections, json, sys, time
import roofwise.cli.analyze as command
import roofwise.output.stream as stream

spent = collections.Counter()

def timed(name, work):
    def run(*args, **kwargs):
        start = time.perf_counter()
        try:
            return work(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - start
    return run

class WriteHere:  # `BackgroundWriter` without the thread: each write runs when submitted
    def submit(self, write):
        timed("write", write)()
    def wait(self):
        pass
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        pass

command.BackgroundWriter = WriteHere
# reading and judging run in output/stream.py (`judged_batches`); the names are looked up
# there, so they are replaced there
stream.in_order = lambda jobs, workers=0: (timed("read and screen", job)() for job in jobs)
stream.analyze = timed("price and judge", stream.analyze)
command.analyze = timed("price and judge", command.analyze)
command.lint_columns = timed("lint", command.lint_columns)
command.json_writer = timed("verdict frame", command.json_writer)
from roofwise.cli import main
sys.stdout = open("/dev/null", "w")
start = time.perf_counter()
code = main(["analyze", sys.argv[1], "-m", "h200", "--json"])
spent["total"] = time.perf_counter() - start
for stage in ("read and screen", "price and judge", "lint", "verdict frame", "write"):
    if not spent[stage]:  # a stage that moved: the table would show 0 for it
        raise SystemExit(f"stage {stage!r} was not timed: the instrumented names moved")
print(json.dumps(spent), file=sys.stderr)
sys.exit(code)
"""

STAGES = ("read and screen", "price and judge", "lint", "verdict frame", "write", "total")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_files(records_frame(args.rows), Path(tmp))
        print(f"# {args.rows:,} rows, {args.runs} runs per format; seconds, lowest-highest")
        print(f"| stage | {' | '.join(FORMATS)} |")
        print(f"| --- |{' ---: |' * len(FORMATS)}")
        found: dict[str, list[dict[str, float]]] = {}
        for kind in FORMATS:
            found[kind] = []
            for _ in range(args.runs):
                done = subprocess.run([sys.executable, "-c", _CHILD, str(paths[kind])],
                                      capture_output=True, text=True, check=True)
                found[kind].append(json.loads(done.stderr.strip().splitlines()[-1]))
        for stage in STAGES:
            cells = []
            for kind in FORMATS:
                times = sorted(run.get(stage, 0.0) for run in found[kind])
                cells.append(f"{times[0]:.2f}-{times[-1]:.2f} s")
            print(f"| {stage} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
