"""`judge_dataset`: a records dataset judged on a Dask cluster, one task per shard, with the
answer `roofwise analyze` gives for the same files.

The client lists the shards, checks them on the workers (nothing is written if one cannot be
read), then keeps a few shard tasks in flight per worker thread and takes their results in
dataset order: the `--json` lines come out in the order analyze writes them, and the counts,
the first skipped records and each batch's worst rows add up as analyze's stream adds them
(`output.stream.StreamTotals`). A verdict depends on its row alone and the shards are cut
into the same batches as analyze cuts them, so every verdict, reason and lint field is the
one analyze gives.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofwise.base.errors import InputError
from roofwise.fleet.shards import dataset_shards, is_url, said
from roofwise.fleet.worker import (
    SAY_AT_MOST,
    ShardJob,
    ShardVerdicts,
    check_shard,
    judge_shard,
)
from roofwise.output.analysis import Analysis
from roofwise.output.frame import Lint
from roofwise.output.stream import StreamTotals
from roofwise.profiles.load import builtin_machines, resolve_machine
from roofwise.profiles.machine import Machine
from roofwise.records.read import BATCH_ROWS, Skipped

CONNECT_TIMEOUT_S = 10.0
IN_FLIGHT_PER_THREAD = 2  # shard tasks queued per worker thread: busy, yet memory bounded


@dataclass(frozen=True)
class FleetResult:
    """A dataset's verdicts, as `roofwise analyze` sums them up."""
    dataset: str
    records: int  # valid records judged
    counts: dict[str, int]  # rows per verdict, every row counted
    worst: Analysis | None  # the worst `limit` rows of the dataset, judged again (None: none
    # kept, as for --json)
    skipped: tuple[Skipped, ...]  # the first malformed records, by shard file and row
    skipped_count: int
    mismatched: dict[str, int]  # rows judged on a profile their device does not name
    findings: tuple[Any, ...]  # what `findings` gave for each batch, in dataset order
    shards: int
    batches: int
    parts: tuple[str, ...]  # the Parquet files written under `out`
    skipped_line: str | None  # the line `roofwise analyze` says about the skipped records


def judge_dataset(path: str | Path, machine: str | Machine | None = None, *,
                  scheduler: Any = None, workers: int | None = None,
                  regime: str | None = None, mix: str | None = None, strict: bool = False,
                  limit: int | None = 50, out: str | Path | None = None,
                  on_json: Callable[[bytes], Any] | None = None,
                  row_lint: Callable[..., Lint] | None = None,
                  findings: Callable[..., Any] | None = None,
                  connect_timeout_s: float = CONNECT_TIMEOUT_S,
                  batch_rows: int = BATCH_ROWS) -> FleetResult:
    """Judge every record of a dataset (a records file, a folder of shards or a glob, local
    or an fsspec URL such as `s3://bucket/history/`) on a Dask cluster.

    `scheduler` is a scheduler address (`tcp://host:8786`) or a `distributed.Client`; without
    one, a local cluster of `workers` processes (default: one per core) starts and stops
    here. `machine`, `regime`, `mix` and `strict` are `roofwise analyze`'s. `limit` worst rows
    are kept (None: all). `out` (a folder or URL, absent or empty) receives the judged rows as
    Parquet, `part-<shard>-<batch>.parquet` in dataset order. `on_json` is called with each
    shard's `--json` lines (bytes, in dataset order); `row_lint` (called with `shard=` the
    shard's name) gives their `lint` field
    (`functools.partial(roofwise.lint.lint_columns, machine_level=True)` as analyze does) and
    `findings` the findings of each batch (`roofwise.lint.BatchFindings.of`, called with
    `path=` the shard's name). Bad input (no such
    dataset, an unreadable shard, no scheduler at the address) raises InputError, and
    nothing is left under `out`."""
    name = str(path)
    distributed = _distributed()
    shards = dataset_shards(name)
    chosen = resolve_machine(machine) if isinstance(machine, str) else machine
    target = None if out is None else str(out)
    if target is not None:
        _check_out(target)
        if not is_url(target):  # the workers' working folder need not be this one
            target = str(Path(target).resolve())
    jobs = [ShardJob(shard, k, chosen, regime, mix, strict, limit, on_json is not None,
                     target, row_lint, findings, batch_rows) for k, shard in enumerate(shards)]
    with _client(distributed, scheduler, workers, connect_timeout_s) as client:
        for problem in client.gather(client.map(check_shard, jobs, pure=False)):
            if problem is not None:
                raise InputError("", problem)
        if target is not None:
            _make_out(target)
        try:
            totals, parts = _judged(client, name, jobs, on_json)
        except BaseException:
            if target is not None:
                _remove_out(target)
            raise
    kept = any(len(k.columns) for k in totals.kept)
    return FleetResult(
        dataset=name, records=totals.good, counts=dict(totals.verdicts),
        worst=totals.worst(builtin_machines(), chosen, regime, mix) if kept else None,
        skipped=tuple(totals.skipped),
        skipped_count=totals.skipped_count, mismatched=dict(totals.mismatched),
        findings=tuple(parts[1]), shards=len(shards), batches=totals.batches,
        parts=tuple(parts[0]), skipped_line=totals.finish())


def _judged(client: Any, name: str, jobs: list[ShardJob],
            on_json: Callable[[bytes], Any] | None
            ) -> tuple[StreamTotals, tuple[list[str], list[Any]]]:
    """Every shard's verdicts, taken in dataset order, with a bounded number in flight."""
    totals = StreamTotals(name)
    totals.skipped = []  # here: the first SAY_AT_MOST of the dataset, not only the first one
    parts: list[str] = []
    findings: list[Any] = []
    threads = max(1, sum(client.nthreads().values()))
    pending: deque[Any] = deque()
    queued = iter(jobs)
    try:
        for job in queued:
            pending.append(client.submit(judge_shard, job, pure=False))
            if len(pending) >= IN_FLIGHT_PER_THREAD * threads:
                break
        while pending:
            done = pending.popleft().result()
            following = next(queued, None)
            if following is not None:
                pending.append(client.submit(judge_shard, following, pure=False))
            if isinstance(done, str):
                raise InputError("", done)
            _add(totals, done)
            parts += done.parts
            findings += done.findings
            if on_json is not None and done.json:
                on_json(done.json)
    finally:
        for future in pending:
            future.cancel()
    return totals, (parts, findings)


def _add(totals: StreamTotals, shard: ShardVerdicts) -> None:
    """One shard's share, added as analyze's stream adds each batch."""
    totals.good += shard.good
    totals.skipped += shard.said[:max(0, SAY_AT_MOST - totals.skipped_count)]
    totals.skipped_count += shard.skipped_count
    for name, n in shard.verdicts.items():
        totals.verdicts[name] = totals.verdicts.get(name, 0) + n
    for device, n in shard.mismatched.items():
        totals.mismatched[device] = totals.mismatched.get(device, 0) + n
    totals.kept += shard.kept
    totals.batches += shard.batches


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise InputError("roofwise fleet", "needs Dask: pip install 'roofwise[fleet]'"
                         ) from None
    return distributed


@contextlib.contextmanager
def _client(distributed: Any, scheduler: Any, workers: int | None, timeout_s: float
            ) -> Iterator[Any]:
    """A client of the cluster at `scheduler`, of the one given, or of a local cluster of
    `workers` processes started for this call."""
    if scheduler is not None and not isinstance(scheduler, str):
        yield scheduler  # a Client the caller holds (and closes)
        return
    if scheduler is not None:
        try:
            client = distributed.Client(scheduler, timeout=timeout_s, set_as_default=False)
        except (OSError, TimeoutError, ValueError, TypeError) as exc:
            raise InputError(f"--scheduler {scheduler}", f"no Dask scheduler answered "
                             f"({said(exc)}); expected tcp://HOST:PORT of a running "
                             "scheduler") from None
        with client:
            yield client
        return
    count = workers or os.cpu_count() or 1
    if count < 1:
        raise InputError("--local", f"expected at least one worker, got {count}")
    # Each worker process runs one shard at a time; its engine (polars) gets its share of
    # the cores, not all of them each. The scheduler's HTTP port is any free one: a second
    # cluster on the machine never collides on 8787 (and says so on stderr).
    share = str(max(1, (os.cpu_count() or 1) // count))
    with distributed.LocalCluster(n_workers=count, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", silence_logs=logging.ERROR,
                                  env={"POLARS_MAX_THREADS": share}) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        yield client


def _check_out(out: str) -> None:
    """The output folder must be absent or empty: parts of an earlier run never mix in."""
    fs, root = _fs(out)
    try:
        if fs.exists(root) and (not fs.isdir(root) or fs.ls(root)):
            raise InputError(out, "exists and is not an empty folder; expected a new folder "
                                  "for the judged rows")
    except OSError as exc:
        raise InputError(out, f"cannot be checked ({said(exc)})") from None


def _make_out(out: str) -> None:
    fs, root = _fs(out)
    try:
        fs.makedirs(root, exist_ok=True)
    except OSError as exc:
        raise InputError(out, f"cannot be created ({said(exc)})") from None


def _remove_out(out: str) -> None:
    """What a failed run wrote under `out`: nothing half-written stays."""
    fs, root = _fs(out)
    with contextlib.suppress(OSError):
        fs.rm(root, recursive=True)


def _fs(out: str) -> tuple[Any, str]:
    import fsspec  # the fleet extra's (Dask's dependency)

    if not is_url(out):
        return fsspec.filesystem("file"), str(Path(out).resolve())
    try:
        fs, root = fsspec.core.url_to_fs(out)
    except (ValueError, ImportError) as exc:
        raise InputError(out, f"cannot be written ({said(exc)})") from None
    return fs, root
