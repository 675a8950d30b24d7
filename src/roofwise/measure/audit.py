"""The bytes audit: a ledger's read bytes against Nsight Compute's DRAM counters.

Only reads are judged. Writes still resident in L2 when a kernel ends never reach the DRAM
counter inside that kernel's window, so a low write count proves nothing; writes are reported
beside the reads and left unjudged. FAIL: DRAM reads below 0.95x the ledger's (the ledger
counts bytes the kernel does not move, or the inputs were served from L2: flush it). WARN:
above 1.5x (re-reads, uncoalesced access, spills, or lookups the ledger charges once).

A ledger prices one call, and one call may launch several kernels: by default the kernels of
one call are summed and judged together, each shown beneath. A call is a run of launches in
one NVTX range (a report column named for NVTX, or ncu's `...Push/Pop_Range...` and
`...Start/Stop_Range...` columns); without one, the launches in order
are one call, unless their kernel names repeat exactly with a shorter period (the report then
holds that call several times).
Where the reads exceed the ledger's, the excess is matched in size against the ledger's
tensors, and then against sets of two or three of them, lookups first (a lookup read by both
kernels is the typical case).
"""

from __future__ import annotations

import csv
import itertools
import math
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from roofwise.base.errors import InputError

READ_METRIC = "dram__bytes_read.sum"
WRITE_METRIC = "dram__bytes_write.sum"
# the same counters as ncu names them on GPUs that lack the names above (an RTX 5070, sm_120,
# under ncu 2026.2: `dram__bytes_op_read.sum`): read as those
READ_METRICS = (READ_METRIC, "dram__bytes_op_read.sum")
WRITE_METRICS = (WRITE_METRIC, "dram__bytes_op_write.sum")
# columns ncu appends when rules fire; a metric row ends before them (its rule fields absent)
_RULE_COLUMN = re.compile(r"^(Rule |Estimated Speedup)")
# NVTX columns: "NVTX Range" in some exports, `thread Domain:Push/Pop_Range:...` and
# `Id:Domain:Start/Stop_Range:...` as `ncu --nvtx --csv` writes them
_NVTX_COLUMN = re.compile(r"nvtx|Push/Pop_Range|Start/Stop_Range", re.IGNORECASE)
FAIL_BELOW = 0.95
WARN_ABOVE = 1.5

# Nsight Compute prints decimal (SI) prefixes: 1 Kbyte = 1000 bytes.
UNIT_BYTES = {"byte": 1.0, "bytes": 1.0, "b": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9,
              "tbyte": 1e12}

PASS, FAIL, WARN, UNJUDGED = "PASS", "FAIL", "WARN", "UNJUDGED"


@dataclass(frozen=True)
class KernelCounters:
    """One profiled kernel launch and its DRAM counters in bytes (None: missing or n/a)."""

    launch_id: str
    kernel: str
    read_bytes: float | None
    write_bytes: float | None
    problems: tuple[str, ...] = ()
    nvtx: str = ""  # the NVTX range the launch ran in; "" where the report names none


@dataclass(frozen=True)
class KernelPart:
    """One launch of a call that was judged as a sum: shown beneath it, never judged alone."""

    launch_id: str
    kernel: str
    dram_read_bytes: float | None
    dram_write_bytes: float | None

    def to_dict(self) -> dict[str, object]:
        return {"launch_id": self.launch_id, "kernel": self.kernel,
                "dram_read_bytes": self.dram_read_bytes,
                "dram_write_bytes": self.dram_write_bytes}


@dataclass(frozen=True)
class AuditRow:
    kernel: str
    launch_ids: tuple[str, ...]
    ledger_read_bytes: float
    dram_read_bytes: float | None
    read_ratio: float | None
    verdict: str  # PASS, FAIL, WARN or UNJUDGED
    reason: str
    ledger_write_bytes: float | None = None
    dram_write_bytes: float | None = None  # reported, never judged
    parts: tuple[KernelPart, ...] = ()  # the launches of a summed call, in launch order
    excess_matches: str = ""  # the ledger tensor the read excess matches in size, if any

    def to_dict(self) -> dict[str, object]:
        return {"kernel": self.kernel, "launch_ids": list(self.launch_ids),
                "ledger_read_bytes": self.ledger_read_bytes,
                "dram_read_bytes": self.dram_read_bytes, "read_ratio": self.read_ratio,
                "verdict": self.verdict, "reason": self.reason,
                "ledger_write_bytes": self.ledger_write_bytes,
                "dram_write_bytes": self.dram_write_bytes,
                "kernels": [p.to_dict() for p in self.parts],
                "excess_matches": self.excess_matches or None}


def to_bytes(value: str, unit: str, where: str = "") -> float:
    """'2,816' byte -> 2816.0; '1.5' Gbyte -> 1.5e9. Unknown units raise, never guess; so do
    NaN, infinities (1e400 included) and negative counts, which no counter can read.

    Errors name `where` (the report's line) and the column at fault: Metric Unit or Metric
    Value.
    """
    prefix = f"{where}: " if where else ""
    try:
        scale = UNIT_BYTES[unit.strip().lower()]
    except KeyError:
        raise InputError(f"{prefix}Metric Unit", f"unknown byte unit {unit!r}; expected one of "
                                                 "byte, Kbyte, Mbyte, Gbyte, Tbyte") from None
    text = value.strip().replace(",", "")
    try:
        number = float(text) * scale
    except ValueError:
        raise InputError(f"{prefix}Metric Value", f"expected a number, got {value!r}") from None
    if not (math.isfinite(number) and number >= 0):
        raise InputError(f"{prefix}Metric Value", "expected a non-negative finite number")
    return number


REQUIRED_COLUMNS = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")


def parse_ncu_csv(text: str, origin: str = "ncu report") -> list[KernelCounters]:
    """Kernels of an `ncu --csv` report in the long format (one row per kernel and metric).

    Lines before the header (`==PROF==` progress, program output) are skipped, and so are
    lines after it that are not quoted CSV rows (ncu quotes every field). A quoted row with
    more fields than the header, or fewer where what it lacks is not ncu's rule columns, is
    malformed: an error naming its line, never a counter read as missing. Errors name
    `origin:LINE`. A report that holds no DRAM read counter at all is refused, naming the
    DRAM counters it has: nothing in it could be judged.
    """
    lines = text.removeprefix("\ufeff").splitlines()
    start = next((i for i, line in enumerate(lines)
                  if line.lstrip().startswith('"ID"') and '"Metric Name"' in line), None)
    if start is None:
        raise InputError(origin, _no_header(lines))
    header = [h.strip() for h in next(csv.reader([lines[start]]))]
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise InputError(f"{origin}:{start + 1}", f"header lacks column(s) {', '.join(missing)}")
    nvtx_columns = [h for h in header if _NVTX_COLUMN.search(h)]
    shortest = max(header.index(c) for c in REQUIRED_COLUMNS) + 1
    while shortest < len(header) and not _RULE_COLUMN.match(header[shortest]):
        shortest += 1  # a row may end only where the rule columns begin
    order: list[str] = []
    names: dict[str, str] = {}
    ranges: dict[str, str] = {}
    values: dict[str, dict[str, float | None]] = {}
    problems: dict[str, list[str]] = {}
    dram_metrics: set[str] = set()
    for index in range(start + 1, len(lines)):
        line = lines[index]
        if not line.lstrip().startswith('"'):
            continue  # ==PROF== lines and program output around the table
        number = index + 1
        fields = next(csv.reader([line]), [])
        if len(fields) < len(header) and len(fields) >= shortest and all(
                _RULE_COLUMN.match(h) for h in header[len(fields):]):
            fields += [""] * (len(header) - len(fields))  # a metric row: no rule fired on it
        elif len(fields) == len(header) + 1 and fields[-1] == "" and any(
                _RULE_COLUMN.match(h) for h in header):
            fields.pop()  # the trailing comma ncu ends a rule-free row with
        if len(fields) != len(header):
            raise InputError(f"{origin}:{number}", f"malformed line: {len(fields)} field(s), "
                                                   f"the header has {len(header)}")
        row = dict(zip(header, fields, strict=True))
        launch = row["ID"].strip()
        if not launch:
            raise InputError(f"{origin}:{number}: ID", "expected a launch ID, got an empty field")
        if launch not in names:
            order.append(launch)
            names[launch] = row["Kernel Name"].strip()
            ranges[launch] = " | ".join(row[c].strip() for c in nvtx_columns)
            values[launch] = {}
            problems[launch] = []
        metric = row["Metric Name"].strip()
        if metric.startswith("dram__"):
            dram_metrics.add(metric)
        key = (READ_METRIC if metric in READ_METRICS else
               WRITE_METRIC if metric in WRITE_METRICS else None)
        if key is None or (key in values[launch] and metric not in (READ_METRIC,
                                                                      WRITE_METRIC)):
            continue  # not a counter read here, or an alias of one the launch already has
        raw = row["Metric Value"].strip()
        if raw.lower() in ("", "n/a"):
            values[launch][key] = None
            problems[launch].append(f"{metric} is {raw or 'empty'} (counter not available)")
            continue
        values[launch][key] = to_bytes(raw, row["Metric Unit"], f"{origin}:{number}")
    if not order:
        raise InputError(origin, "the report has a header but no kernel rows (did ncu "
                                 "profile any kernel?)")
    if not any(READ_METRIC in v for v in values.values()):
        has = ", ".join(sorted(dram_metrics)) or "no dram__ counter"
        raise InputError(origin, f"no DRAM read counter ({READ_METRIC}) in the report, which "
                                 f"has {has}: nothing to judge (read and write bytes "
                                 f"together cannot be); profile with --metrics "
                                 f"{READ_METRIC},{WRITE_METRIC}")
    return [KernelCounters(launch, names[launch], values[launch].get(READ_METRIC),
                           values[launch].get(WRITE_METRIC), tuple(problems[launch]),
                           ranges[launch])
            for launch in order]


def _no_header(lines: list[str]) -> str:
    """Why no long-format header was found: ncu's own error where it wrote one, the wide
    (`--page raw`) layout where that is what the report holds."""
    error = next((line.strip() for line in lines if line.lstrip().startswith("==ERROR==")),
                 None)
    if error:
        return f"ncu reported an error and wrote no table: {error[:200]}"
    if any(line.lstrip().startswith('"ID"') and '"Kernel Name"' in line for line in lines):
        return ('a wide report (one row per kernel, a column per metric: `--page raw`); '
                'expected the long format, one row per kernel and metric: ncu --csv '
                '--page details --metrics ' + f"{READ_METRIC},{WRITE_METRIC}")
    return ('no ncu --csv header found; expected a line starting with "ID" and naming '
            '"Metric Name", "Metric Unit", "Metric Value" (run ncu with --csv, long format)')


def judge_reads(ledger_read_bytes: float,
                dram_read_bytes: float) -> tuple[str, float | None, str]:
    """(verdict, ratio, reason) for DRAM reads against the ledger's read bytes; the ratio is
    None when the ledger reads nothing (no ratio, never NaN)."""
    if not ledger_read_bytes > 0:
        return UNJUDGED, None, "the ledger reads no bytes; nothing to compare"
    ratio = dram_read_bytes / ledger_read_bytes
    if ratio < FAIL_BELOW:
        return FAIL, ratio, (f"DRAM read {ratio:.3f}x the ledger (< {FAIL_BELOW}): the ledger "
                             "counts bytes never read from DRAM, or the inputs sat in L2")
    if ratio > WARN_ABOVE:
        return WARN, ratio, (f"DRAM read {ratio:.3f}x the ledger (> {WARN_ABOVE}): re-reads, "
                             "uncoalesced access, spills, or lookups charged once")
    return PASS, ratio, f"DRAM read {ratio:.3f}x the ledger"


SHOWN_NAMES = 5  # kernel names an unmatched --kernel lists


def audit(kernels: Sequence[KernelCounters], ledger_read_bytes: float,
          ledger_write_bytes: float | None = None, kernel_pattern: str | None = None,
          per_kernel: bool = False, origin: str = "the report",
          ledger_reads: Sequence[LedgerRead] = ()) -> list[AuditRow]:
    """One row per call (its launches summed, each shown beneath: see `calls_of`), or with
    `per_kernel` one row per launch. `ledger_reads` (tensor name, read bytes) name what a read
    excess matches in size.

    A pattern that matches no kernel is an InputError listing the names there are: a typo
    must fail (exit 2), never pass as an unjudged row.
    """
    matched = _match(kernels, kernel_pattern)
    if not matched and not kernel_pattern:
        raise InputError(origin, "holds no kernel to audit")
    if not matched:
        names = list(dict.fromkeys(k.kernel for k in kernels))
        shown = ", ".join(names[:SHOWN_NAMES]) + (", ..." if len(names) > SHOWN_NAMES else "")
        raise InputError(f"--kernel {kernel_pattern!r}",
                         f"matches none of the {len(names)} kernel(s) in {origin}: {shown}")
    groups: Iterable[Sequence[KernelCounters]] = (
        [[k] for k in matched] if per_kernel else calls_of(matched))
    return [_row(group, ledger_read_bytes, ledger_write_bytes, ledger_reads)
            for group in groups]


def calls_of(kernels: Sequence[KernelCounters]) -> list[list[KernelCounters]]:
    """The launches of each call, in order. Consecutive launches in one NVTX range are one
    call; without NVTX the launches are one call in launch order, unless their kernel names
    repeat exactly with a shorter period (the report holds the same call several times)."""
    ranges: list[list[KernelCounters]] = []
    for k in kernels:
        if ranges and ranges[-1][-1].nvtx == k.nvtx:
            ranges[-1].append(k)
        else:
            ranges.append([k])
    if len(ranges) > 1 or (ranges and ranges[0][0].nvtx):
        return ranges
    names = [k.kernel for k in kernels]
    n = len(names)
    period = next((p for p in range(1, n) if n % p == 0
                   and all(names[i] == names[i % p] for i in range(n))), n)
    return [list(kernels[start:start + period]) for start in range(0, n, period)]


# The excess is matched within this fraction of a tensor's bytes (counters round to ~0.1%).
EXCESS_MATCH_TOLERANCE = 0.05
# An excess under this share of the ledger's reads is counter noise, not a tensor read again.
EXCESS_MIN_SHARE = 0.01


# Sets of up to this many ledger tensors are tried for an excess no single tensor explains
# (two kernels of one call each reading both RoPE tables: cos + sin read once more).
EXCESS_SET_SIZE = 3
LedgerRead = tuple[str, float] | tuple[str, float, bool]  # name, read bytes[, is a lookup]


def excess_match(excess_bytes: float, ledger_reads: Sequence[LedgerRead],
                 launches: int) -> str:
    """What the read excess matches within EXCESS_MATCH_TOLERANCE, "" when nothing does: one
    ledger tensor read once more (or up to once per further launch), else a set of up to
    EXCESS_SET_SIZE tensors each read once more, lookups first (a lookup read by every kernel
    of a call is the usual cause), the closest match among sets of the same kind."""
    reads = [(r[0], float(r[1]), bool(r[2]) if len(r) > 2 else False)
             for r in ledger_reads if float(r[1]) > 0]
    best: tuple[float, str] = (math.inf, "")
    for name, nbytes, _ in reads:
        for times in range(1, max(launches - 1, 1) + 1):
            error = abs(excess_bytes - times * nbytes) / (times * nbytes)
            if error <= EXCESS_MATCH_TOLERANCE and error < best[0]:
                again = "once more" if times == 1 else f"{times} more times"
                best = (error, f"{name} ({nbytes:,.0f} B) read {again}")
    if best[1]:
        return best[1]
    ranked: list[tuple[int, int, float, str]] = []
    for size in range(2, min(EXCESS_SET_SIZE, len(reads)) + 1):
        for chosen in itertools.combinations(reads, size):
            total = sum(nbytes for _, nbytes, _ in chosen)
            error = abs(excess_bytes - total) / total
            if error <= EXCESS_MATCH_TOLERANCE:
                lookups = all(lookup for _, _, lookup in chosen)
                names = " + ".join(name for name, _, _ in chosen)
                kind = "lookups " if lookups else ""
                ranked.append((0 if lookups else 1, size, error,
                               f"{kind}{names} ({total:,.0f} B together) read once more"))
    return min(ranked)[3] if ranked else ""


def _row(group: Sequence[KernelCounters], ledger_read: float,
         ledger_write: float | None, ledger_reads: Sequence[LedgerRead] = ()
         ) -> AuditRow:
    names = list(dict.fromkeys(k.kernel for k in group))
    label = names[0] if len(group) == 1 else (
        f"call of {len(group)} kernels ({', '.join(names)})")
    ids = tuple(k.launch_id for k in group)
    parts = tuple(KernelPart(k.launch_id, k.kernel, k.read_bytes, k.write_bytes)
                  for k in group) if len(group) > 1 else ()
    reads = [k.read_bytes for k in group]
    writes = [k.write_bytes for k in group]
    write_total = None if any(w is None for w in writes) else float(sum(w or 0.0 for w in writes))
    if any(r is None for r in reads):
        lacking = [k for k in group if k.read_bytes is None]
        detail = "; ".join(p for k in lacking for p in k.problems) or (
            f"{READ_METRIC} missing from the report")
        return AuditRow(label, ids, float(ledger_read), None, None, UNJUDGED,
                        f"metric missing: {detail}", ledger_write, write_total, parts)
    total = float(sum(r or 0.0 for r in reads))
    verdict, ratio, reason = judge_reads(float(ledger_read), total)
    matches = ""
    if ledger_read > 0 and total > ledger_read * (1 + EXCESS_MIN_SHARE):
        matches = excess_match(total - ledger_read, ledger_reads, len(group))
        if matches:
            reason += (f"; the excess {total - ledger_read:,.0f} B matches {matches} (a "
                       "lookup read by more than one kernel?)")
    return AuditRow(label, ids, float(ledger_read), total, ratio, verdict, reason, ledger_write,
                    write_total, parts, matches)


def _match(kernels: Sequence[KernelCounters], pattern: str | None) -> list[KernelCounters]:
    if not pattern:
        return list(kernels)
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise InputError("--kernel", f"not a regular expression ({exc})") from None
    return [k for k in kernels if regex.search(k.kernel)]


def ncu_available() -> str | None:
    return shutil.which("ncu")


def run_ncu(command: Sequence[str], kernel_pattern: str | None = None,
            timeout_s: float = 600.0) -> str:
    """Profile `command` under ncu (DRAM counters only, clocks left alone); its CSV text."""
    ncu = ncu_available()
    if ncu is None:
        raise InputError("--run", "ncu (Nsight Compute) is not on PATH; profile elsewhere and "
                                  "pass the report with --ncu-csv")
    argv = [ncu, "--csv", "--page", "details", "--metrics", f"{READ_METRIC},{WRITE_METRIC}",
            "--clock-control", "none", "--cache-control", "all"]
    if kernel_pattern:
        argv += ["--kernel-name", f"regex:{kernel_pattern}"]
    done = subprocess.run([*argv, *command], capture_output=True, text=True, timeout=timeout_s,
                          check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise InputError("--run", f"ncu exited {done.returncode}: {tail[0]}")
    return done.stdout
