"""What one worker does with one shard: judge it batch by batch exactly as `roofwise analyze`
does (`output.stream.judged_batches`, the same batches, screen and verdicts), and send back
only what the whole dataset's answer needs: counts, the first skipped records, the worst rows
of each batch, the lint findings, and, when asked, the `--json` lines and the judged rows
written as Parquet next to the others.

Nothing here raises across the wire: a bad shard comes back as the line that says why (an
`InputError` does not survive pickling, and the client must say it as one line anyway).
"""

from __future__ import annotations

import dataclasses
import io
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from roofwise.base.errors import InputError
from roofwise.fleet.shards import Shard, said
from roofwise.output.frame import Lint, json_writer, verdict_frame
from roofwise.output.stream import StreamTotals, judged_batches
from roofwise.profiles.load import builtin_machines
from roofwise.profiles.machine import Machine
from roofwise.records.read import BATCH_ROWS, Loaded, Skipped, iter_batches
from roofwise.verdicts.mismatch import mismatch_counts

# skipped records named per shard; the client names the first of them all (as many as
# `roofwise analyze` names: cli.common.MAX_SKIPPED_LINES)
SAY_AT_MOST = 20


@dataclass(frozen=True)
class ShardJob:
    """One shard to judge, and how (the same choices `roofwise analyze` takes)."""
    shard: Shard
    index: int  # the shard's place in the dataset: its output parts are named by it
    machine: Machine | None = None
    regime: str | None = None
    mix: str | None = None
    strict: bool = False
    limit: int | None = 50  # worst rows kept per batch (None: all)
    json: bool = False
    out: str | None = None  # folder or URL the judged rows are written under
    # the `lint` field of each --json line (`lint.lint_columns`, bound by the caller: this
    # stage sits below lint)
    row_lint: Callable[..., Lint] | None = None  # called with `shard=` the shard's name
    # the table's lint findings of a batch, told the shard's name (`path=`)
    findings: Callable[..., Any] | None = None
    batch_rows: int = BATCH_ROWS


@dataclass(frozen=True)
class ShardVerdicts:
    """One shard's share of the dataset's answer."""
    shard: str
    good: int = 0
    said: tuple[Skipped, ...] = ()  # the first skipped records, to be named
    skipped_count: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    mismatched: dict[str, int] = field(default_factory=dict)
    kept: tuple[Loaded, ...] = ()  # each batch's worst rows
    findings: tuple[Any, ...] = ()
    batches: int = 0
    json: bytes | None = None
    parts: tuple[str, ...] = ()  # the Parquet files written


def check_shard(job: ShardJob) -> str | None:
    """Why the shard cannot be judged (None: it can), before any output is written: a Parquet
    shard's footer is read; with `strict`, every record is validated, as analyze --strict
    does before it writes a row."""
    return _guarded(job.shard, lambda path: _checked(job, path))


def judge_shard(job: ShardJob) -> ShardVerdicts | str:
    """The shard judged (or the line saying why it cannot be)."""
    return _guarded(job.shard, lambda path: _judged(job, path))


def _guarded(shard: Shard, work: Callable[[str], Any]) -> Any:
    """`work(local path)`, or the one line saying why it failed, naming the shard as the
    dataset does (not by its absolute path, nor a fetched copy by its own)."""
    try:
        with _local(shard) as path:
            try:
                return work(path)
            except (InputError, OSError) as exc:
                return _line(exc, path).replace(path, shard.name)
    except (InputError, OSError) as exc:
        return _line(exc, shard.name)


def _line(exc: InputError | OSError, name: str) -> str:
    if isinstance(exc, InputError):
        return str(exc)
    return f"{exc.filename or name}: {exc.strerror or said(exc)}"


def _checked(job: ShardJob, path: str) -> None:
    if job.strict:
        for _ in iter_batches(path, strict=True, keep_rows=False, batch_rows=job.batch_rows):
            pass
    elif path.endswith((".parquet", ".pq")):
        try:
            pl.read_parquet_schema(path)
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise InputError(path, f"not a readable Parquet file ({said(exc)})") from None


def _judged(job: ShardJob, path: str) -> ShardVerdicts:
    machines = builtin_machines()
    totals = StreamTotals(path)
    named: list[Skipped] = []
    findings: list[Any] = []
    parts: list[str] = []
    text = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="") if job.json else None
    for loaded, analysis in judged_batches(path, machines, job.machine, job.regime, job.mix,
                                           job.strict, job.batch_rows):
        named += totals.count(loaded, SAY_AT_MOST)
        if analysis is None:
            continue
        for device, count in mismatch_counts(analysis).items():
            totals.mismatched[device] = totals.mismatched.get(device, 0) + count
        totals.keep_worst(analysis, 0 if job.json else job.limit)
        if text is not None:
            lint = None if job.row_lint is None else job.row_lint(analysis,
                                                                  shard=job.shard.name)
            json_writer(analysis, lint)(text)
        if job.findings is not None and not job.json:
            findings.append(job.findings(analysis, path=job.shard.name))
        if job.out is not None:
            parts.append(_write_part(verdict_frame(analysis), job.out, job.index, len(parts)))
    lines = None
    if text is not None:
        text.flush()
        lines = text.buffer.getvalue()
    name = job.shard.name
    return ShardVerdicts(
        shard=name, good=totals.good, said=tuple(_renamed(s, path, name) for s in named),
        skipped_count=totals.skipped_count, verdicts=totals.verdicts,
        mismatched=totals.mismatched, kept=tuple(totals.kept), findings=tuple(findings),
        batches=totals.batches, json=lines, parts=tuple(parts))


def part_name(out: str, index: int, batch: int) -> str:
    """The file a shard's batch of judged rows goes to: in dataset order by name."""
    return f"{out.rstrip('/')}/part-{index:05d}-{batch:04d}.parquet"


def _write_part(frame: pl.DataFrame, out: str, index: int, batch: int) -> str:
    target = part_name(out, index, batch)
    if "://" in target:
        import fsspec  # the fleet extra's: remote output goes through it

        with fsspec.open(target, "wb") as handle:
            frame.write_parquet(handle)
    else:
        frame.write_parquet(target)
    return target


@contextmanager
def _local(shard: Shard) -> Iterator[str]:
    """A local path to the shard's bytes: the shard itself, or a copy of a remote one fetched
    whole (the reader reads local files, a batch at a time)."""
    if not shard.remote:
        yield shard.location
        return
    import fsspec

    with tempfile.TemporaryDirectory(prefix="roofwise-shard-") as folder:
        local = str(Path(folder) / Path(shard.name.rstrip("/")).name)
        try:
            fs, remote = fsspec.core.url_to_fs(shard.location)
            fs.get_file(remote, local)
        except (OSError, ValueError, ImportError) as exc:
            raise InputError(shard.name, f"cannot fetch ({said(exc)})") from None
        yield local


def _renamed(skipped: Skipped, local: str, name: str) -> Skipped:
    """A skipped record named by the shard's name (not its absolute path or fetched copy)."""
    if local == name or not skipped.where.startswith(local):
        return skipped
    return dataclasses.replace(skipped, where=name + skipped.where[len(local):])
