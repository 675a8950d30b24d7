"""polars against pyarrow on the reads and writes roofwise needs (docs/columnar-engine.md).

Generates 1,000,000 records with bench_end_to_end.records_frame, then times each engine's CSV,
JSONL and Parquet reader and the writers, median of 3. Needs pyarrow.
Run: python benchmarks/bench_engines.py
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.json as pj
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from bench_end_to_end import records_frame, write_files

TEXT = ["op", "workload", "device", "flops", "bytes", "read_bytes", "write_bytes", "roof",
        "time_s", "timing"]


def median_s(run, n: int = 3) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        p = write_files(records_frame(1_000_000), Path(tmp))
        contract = {c: pl.String for c in TEXT}
        rows = [
            ("csv", "polars read_csv (all text)",
             lambda: pl.read_csv(p["csv"], infer_schema=False)),
            ("csv", "pyarrow csv.read_csv (all text)", lambda: pcsv.read_csv(
                p["csv"], convert_options=pcsv.ConvertOptions(
                    column_types={c: pa.string() for c in TEXT}))),
            ("jsonl", "polars read_ndjson (infer all)",
             lambda: pl.read_ndjson(p["jsonl"], infer_schema_length=None)),
            ("jsonl", "polars read_ndjson (schema)",
             lambda: pl.read_ndjson(p["jsonl"], schema=contract)),
            ("jsonl", "pyarrow json.read_json", lambda: pj.read_json(p["jsonl"])),
            ("parquet", "polars read_parquet", lambda: pl.read_parquet(p["parquet"])),
            ("parquet", "pyarrow parquet.read_table", lambda: pq.read_table(p["parquet"])),
        ]
        print(f"# 1,000,000 records, median of 3, load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cores")
        for kind, name, run in rows:
            print(f"{kind:8} {name:36} {median_s(run):6.2f} s")
        frame, table = pl.read_parquet(p["parquet"]), pq.read_table(p["parquet"])
        for name, run in (("polars write_ndjson", lambda: frame.write_ndjson(os.devnull)),
                          ("polars write_csv", lambda: frame.write_csv(os.devnull)),
                          ("pyarrow csv.write_csv", lambda: pcsv.write_csv(table, os.devnull))):
            print(f"{'write':8} {name:36} {median_s(run):6.2f} s")


if __name__ == "__main__":
    main()
