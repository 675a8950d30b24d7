"""A tiny program for Nsight Compute, and the splitter of the report it leads to.

`python3 ncu_driver.py run` (under `ncu --profile-from-start off ...`): builds RMSNorm
(8192 x 4096 bf16) and the case study (qk_norm_rope_quant at its defaults) from roofwise's
bench references, warms each up (torch.compile's compilation included) outside the profiled
window, then profiles one call of each section in order:

    rmsnorm (eager) | marker | qk_norm_rope_quant (eager) | marker | rmsnorm (torch.compile)

A marker is `torch.cuda._sleep`, whose kernel (`spin_kernel`) separates the sections in the
report. A section that fails to build (torch.compile unavailable, say) is left out and said so
on stderr; nothing is printed on stdout, which ncu shares with its CSV.

`python3 ncu_driver.py split REPORT.csv DIR`: writes DIR/part1.csv, part2.csv, ... (the header
and each section's rows, verbatim, markers dropped), one per section, for `roofwise audit`
(which sums the kernels of the one profiled call).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

MARKER = "spin_kernel"
RMSNORM = {"rows": "8192", "hidden": "4096", "dtype": "bf16"}


def run() -> int:
    import torch

    from roofwise.measure.torch_ops import build_case

    sections = []
    for op, params, compiled in (("rmsnorm", RMSNORM, False), ("qk_norm_rope_quant", {}, False),
                                 ("rmsnorm", RMSNORM, True)):
        try:
            case = build_case(op, params, "cuda", compile_fn=compiled)
            for _ in range(3):  # warm-up (and compilation) outside the profiled window
                case.fn(*case.args)
            torch.cuda.synchronize()
        except Exception as exc:
            print(f"ncu_driver: {op} compiled={compiled} left out: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
            continue
        sections.append((op, compiled, case))
    print("ncu_driver: sections " + ", ".join(
        f"part{i + 1}={op}{' (compiled)' if c else ''}" for i, (op, c, _) in
        enumerate(sections)), file=sys.stderr)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for i, (_, _, case) in enumerate(sections):
        if i:
            torch.cuda._sleep(1000)
        case.fn(*case.args)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


def split(report: str, folder: str) -> int:
    lines = Path(report).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    header = lines[start]
    column = next(csv.reader([header])).index("Kernel Name")
    parts: list[list[str]] = [[]]
    marker_ids: set[str] = set()
    for line in lines[start + 1:]:
        if not line.startswith('"'):
            continue
        fields = next(csv.reader([line]))
        if MARKER in fields[column]:
            if fields[0] not in marker_ids:
                marker_ids.add(fields[0])
                parts.append([])
            continue
        parts[-1].append(line)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(parts, 1):
        (out / f"part{i}.csv").write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
        print(f"part{i}.csv: {len({r.split(',', 1)[0] for r in rows})} kernel launch(es)",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["run"]:
        sys.exit(run())
    if sys.argv[1:2] == ["split"] and len(sys.argv) == 4:
        sys.exit(split(sys.argv[2], sys.argv[3]))
    sys.exit("usage: ncu_driver.py run | split REPORT.csv DIR")
