"""Read a PyTorch profiler trace (Kineto / Chrome trace JSON, gzipped or not) into compact events.

The format is told from the content, never the name: gzip by its magic bytes, a trace by a
JSON object holding `traceEvents` (or a bare JSON array of events with `ph`). Events stream
through ijson when it is installed (a trace of hundreds of MB never becomes one Python object
tree); without it the file is parsed whole. Only what linking and pricing need is kept, as
small tuples. Durations and timestamps stay in the trace's microseconds here; the records
built from them are in seconds.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple, cast

from roofwise.base.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
SNIFF_BYTES = 1 << 20  # a trace names `traceEvents` (or an event's `ph`) well within 1 MiB


class CpuOp(NamedTuple):
    """A host-side op (`cat: cpu_op`): an aten op, a custom op, a compiled region."""

    number: int  # position in TraceEvents.ops
    pid: Any
    tid: Any
    ts_us: float
    end_us: float
    name: str
    external_id: Any
    dims: tuple[Any, ...]
    types: tuple[str, ...]
    concrete: tuple[str, ...]


class RuntimeCall(NamedTuple):
    """A launch API call (`cudaLaunchKernel`, `hipLaunchKernel`, `cuLaunchKernel`, ...)."""

    pid: Any
    tid: Any
    ts_us: float
    correlation: Any
    external_id: Any


class GpuEvent(NamedTuple):
    """Device-side activity: a kernel, a memcpy or a memset."""

    kind: str  # "kernel", "memcpy", "memset"
    name: str
    pid: Any
    tid: Any
    ts_us: float
    dur_us: float
    correlation: Any
    device: Any


class Flow(NamedTuple):
    """One end of an `ac2g` flow arrow (host call -> device activity)."""

    id: Any
    pid: Any
    tid: Any
    ts_us: float


@dataclass
class TraceEvents:
    """The events of one trace that matter for pricing, in file order within each kind."""

    path: str
    ops: list[CpuOp] = field(default_factory=list)
    calls: list[RuntimeCall] = field(default_factory=list)
    gpu: list[GpuEvent] = field(default_factory=list)
    flow_starts: list[Flow] = field(default_factory=list)
    flow_ends: list[Flow] = field(default_factory=list)
    device_names: dict[Any, str] = field(default_factory=dict)  # device id -> name
    # one shared copy of each distinct name, shape list, type list: a million calls of a few
    # hundred distinct ops keep a few hundred tuples, not a million
    shared: dict[Any, Any] = field(default_factory=dict, repr=False)

    def share(self, value: Any) -> Any:
        try:
            return self.shared.setdefault(value, value)
        except TypeError:  # something unhashable in the record: keep its own copy
            return value


_GPU_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
_CALL_CATEGORIES = ("cuda_runtime", "cuda_driver")


@contextmanager
def _open_bytes(path: Path, wrap: Callable[[IO[bytes]], IO[bytes]] | None = None
                ) -> Iterator[IO[bytes]]:
    """The file's bytes, decompressed when it starts with gzip's magic number."""
    with path.open("rb") as plain:
        raw: IO[bytes] = plain if wrap is None else wrap(plain)
        head = raw.read(2)
        raw.seek(0)
        if head != GZIP_MAGIC:
            yield raw
            return
        with gzip.GzipFile(fileobj=raw) as unzipped:
            yield unzipped  # type: ignore[misc]


def _head_text(path: Path) -> str:
    """The first MiB of the (decompressed) file, as text; '' when it is not readable."""
    try:
        with _open_bytes(path) as handle:
            head = handle.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):
        return ""
    return head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")


def is_trace(path: str | Path) -> bool:
    """Whether `path` holds a profiler trace (told from its content, gzipped or not)."""
    target = Path(path)
    if not target.is_file():
        return False
    head = _head_text(target)
    if head.startswith("{"):
        return '"traceEvents"' in head
    return head.startswith("[") and '"ph"' in head


def read_trace(path: str | Path, progress: Callable[[int], None] | None = None,
               total: Callable[[int], None] | None = None) -> TraceEvents:
    """The trace's events; `progress(bytes_read)` is called as the file is consumed and
    `total(file_size)` once at the start (for a progress bar)."""
    target = Path(path)
    if not is_trace(target):
        raise InputError(str(target), "not a profiler trace; expected Kineto / Chrome trace "
                                      "JSON (an object with traceEvents), gzipped or not")
    if total is not None:
        total(target.stat().st_size)
    events = TraceEvents(path=str(target))
    wrap = _counting(progress) if progress is not None else None
    try:
        for event in _iter_events(target, events, wrap):
            _keep(event, events)
    except _parse_errors() as exc:
        raise InputError(str(target), f"unreadable trace ({_first_line(exc)}); expected "
                                      "complete Kineto / Chrome trace JSON") from None
    return events


def _parse_errors() -> tuple[type[Exception], ...]:
    """What a truncated or malformed file raises, through gzip, json or ijson."""
    base: tuple[type[Exception], ...] = (ValueError, OSError, EOFError, zlib.error)
    try:
        import ijson
    except ImportError:
        return base
    return (*base, ijson.JSONError)


def _counting(report: Callable[[int], None]) -> Callable[[IO[bytes]], IO[bytes]]:
    def wrap(raw: IO[bytes]) -> IO[bytes]:
        return cast(IO[bytes], _Counting(raw, report))

    return wrap


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:160]


def _iter_events(path: Path, events: TraceEvents,
                 wrap: Callable[[IO[bytes]], IO[bytes]] | None) -> Iterator[dict[str, Any]]:
    try:
        import ijson
    except ImportError:  # parse whole: correct, only not bounded in memory
        with _open_bytes(path, wrap) as handle:
            data = json.load(handle)
        if isinstance(data, dict):
            _devices(data.get("deviceProperties"), events)
            data = data.get("traceEvents", [])
        yield from (e for e in data if isinstance(e, dict))
        return
    if _head_text(path).startswith("["):
        with _open_bytes(path, wrap) as handle:
            yield from ijson.items(handle, "item", use_float=True)
        return
    found = _header_devices(path, ijson)
    with _open_bytes(path, wrap) as handle:
        yield from ijson.items(handle, "traceEvents.item", use_float=True)
    if found is None:  # deviceProperties after traceEvents (Kineto writes it before)
        with _open_bytes(path) as handle:
            found = list(ijson.items(handle, "deviceProperties.item", use_float=True))
    _devices(found, events)


def _header_devices(path: Path, ijson: Any) -> list[Any] | None:
    """deviceProperties when it comes before traceEvents; None when not seen by then."""
    builder = None
    found: list[Any] | None = None
    with _open_bytes(path) as handle:
        for prefix, event, value in ijson.parse(handle, use_float=True):
            if prefix == "traceEvents":
                return found
            if prefix == "deviceProperties" and event == "start_array":
                builder = ijson.ObjectBuilder()
            if builder is not None:
                builder.event(event, value)
                if prefix == "deviceProperties" and event == "end_array":
                    found = builder.value
                    builder = None
    return found


def _devices(properties: Any, events: TraceEvents) -> None:
    for item in properties or ():
        if isinstance(item, dict) and "id" in item and item.get("name"):
            events.device_names[item["id"]] = str(item["name"])


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def _frozen(value: Any) -> Any:
    """Lists as tuples, all the way down: recorded shapes become hashable (and cacheable)."""
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def _keep(e: dict[str, Any], events: TraceEvents) -> None:
    """Append the event to its kind's list if pricing needs it."""
    ph = e.get("ph")
    cat = e.get("cat")
    if ph == "X":
        args = e.get("args") or {}
        ts = _number(e.get("ts"))
        if cat == "cpu_op":
            share = events.share
            events.ops.append(CpuOp(
                len(events.ops), e.get("pid"), e.get("tid"), ts, ts + _number(e.get("dur")),
                share(str(e.get("name", ""))), args.get("External id"),
                share(_frozen(args.get("Input Dims") or ())),
                share(tuple(args.get("Input type") or ())),
                share(tuple(str(c) for c in (args.get("Concrete Inputs") or ())))))
        elif cat in _CALL_CATEGORIES:
            if args.get("correlation") is not None:
                events.calls.append(RuntimeCall(e.get("pid"), e.get("tid"), ts,
                                                args.get("correlation"),
                                                args.get("External id")))
        elif cat in _GPU_KINDS:
            events.gpu.append(GpuEvent(_GPU_KINDS[cat], events.share(str(e.get("name", ""))),
                                       e.get("pid"),
                                       e.get("tid"), ts, _number(e.get("dur")),
                                       args.get("correlation"), args.get("device")))
    elif cat == "ac2g" and ph in ("s", "f"):
        flow = Flow(e.get("id"), e.get("pid"), e.get("tid"), _number(e.get("ts")))
        (events.flow_starts if ph == "s" else events.flow_ends).append(flow)


class _Counting(io.RawIOBase):
    """A read-only file that reports how many bytes it has given out (for a progress bar)."""

    def __init__(self, raw: IO[bytes], report: Callable[[int], None] | None) -> None:
        super().__init__()
        self._raw = raw
        self._report = report
        self._done = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self._done = self._raw.seek(offset, whence)
        return self._done

    def tell(self) -> int:
        return self._raw.tell()

    def readinto(self, buffer: Any) -> int:
        data = self._raw.read(len(buffer))
        buffer[:len(data)] = data
        self._done += len(data)
        if self._report is not None:
            self._report(self._done)
        return len(data)

