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
import math
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
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

    skipped: dict[str, int] = field(default_factory=dict)  # why -> events skipped for it
    kept: int = 0

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def keep(self, into: list[Any], item: Any) -> None:
        if self.kept >= MAX_EVENTS:
            raise _TooMuch(f"more than {MAX_EVENTS:,} ops, launches and device events; "
                           "expected one profiled step or a few (profile fewer steps)")
        self.kept += 1
        into.append(item)

    def share(self, value: Any) -> Any:
        try:
            return self.shared.setdefault(value, value)
        except TypeError:  # something unhashable in the record: keep its own copy
            return value


# Categories as PyTorch >= 1.10 writes them, then as PyTorch 1.8-1.9 did (`Operator`,
# `Runtime`, `Kernel`, ...; there the launches and device events name their op's id
# `external id`, in lower case): one schema to the code below.
_GPU_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
              "Kernel": "kernel", "Memcpy": "memcpy", "Memset": "memset"}
_CALL_CATEGORIES = ("cuda_runtime", "cuda_driver", "Runtime")
_OP_CATEGORIES = ("cpu_op", "Operator")


def _external_id(args: dict[str, Any]) -> Any:
    found = args.get("External id")
    return args.get("external id") if found is None else found


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
    `total(file_size)` once at the start (for a progress bar).

    The file is read once. An event whose fields are not of the type the format gives them (an
    event that is not an object, a duration that is not a finite number >= 0, a list where an id
    goes, ...) is skipped and counted in `skipped`, never turned into a number. What no sane
    trace holds (nesting deeper than MAX_DEPTH, a run of MAX_RUN_BYTES without a string, more
    than MAX_EVENTS kept events, ...) is refused as a whole: InputError."""
    target = Path(path)
    if not is_trace(target):
        raise InputError(str(target), "not a profiler trace; expected Kineto / Chrome trace "
                                      "JSON (an object with traceEvents), gzipped or not")
    size = target.stat().st_size
    if total is not None:
        total(size)
    events = TraceEvents(path=str(target))
    wrap = _counting(progress) if progress is not None else None
    try:
        with _open_bytes(target, wrap) as handle:
            gzipped = isinstance(handle, gzip.GzipFile)
            limit = max(MIN_INFLATED_BYTES, MAX_GZIP_RATIO * size) if gzipped else None
            guarded = _Guard(handle, str(target), limit)
            for event in _iter_events(io.BufferedReader(guarded, READ_BYTES), events):
                _keep(event, events)
    except InputError:
        raise
    except _TooMuch as exc:
        raise InputError(str(target), f"{exc}; refused") from None
    except RecursionError:
        raise InputError(str(target), f"nesting deeper than {MAX_DEPTH} levels; expected a "
                                      "Kineto / Chrome trace") from None
    except _parse_errors() as exc:
        raise InputError(str(target), f"unreadable trace ({_first_line(exc)}); expected "
                                      "complete Kineto / Chrome trace JSON") from None
    return events


# Limits on what a trace may hold: beyond them a file is not a profile of a program but a
# stress on the reader (memory or time out of proportion to what is read), refused in one line.
MAX_DEPTH = 64  # JSON nesting: Kineto writes at most 5 (event, args, Input Dims, a list of
#                 shapes, a shape); every level costs the parser memory
MAX_RUN_BYTES = 16 << 20  # bytes with no `"` in them: a trace has a string every few dozen
#                 bytes; a 16 MiB name or run of white space is padding, and the JSON parser's
#                 cost grows with the square of a string's length
MAX_GZIP_RATIO = 200  # decompressed over compressed size: Kineto traces inflate 10-40x;
MIN_INFLATED_BYTES = 256 << 20  # ... more (past 256 MiB) is padding: a gzip bomb
MAX_EVENTS = 4_000_000  # events kept (ops, launches, device activity, flow arrows): a profiled
#                 step of a large model holds well under a million; each costs ~250 B to keep
MAX_NAME_CHARS = 65536  # an op or kernel name: demangled templated kernels run to a few thousand
MAX_DEVICES = 4096  # deviceProperties entries: one per GPU of the host
READ_BYTES = 1 << 20  # parser buffer: large reads keep a long string's cost linear


class _TooMuch(Exception):
    """A limit above was crossed: refused (InputError) where the path is known."""


def _parse_errors() -> tuple[type[Exception], ...]:
    """What a truncated or malformed file raises, through gzip, json or ijson."""
    base: tuple[type[Exception], ...] = (ValueError, OSError, EOFError, zlib.error,
                                         UnicodeDecodeError)
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


_SCALARS = ("string", "number", "boolean", "null")
_OPEN = ("start_map", "start_array")


def _iter_events(handle: IO[bytes], events: TraceEvents) -> Iterator[Any]:
    """Each element of traceEvents (whatever its type: `_keep` judges it); deviceProperties
    into `events.device_names`, wherever it comes in the object. One pass over the file."""
    try:
        import ijson
    except ImportError:  # parse whole: correct, only not bounded in memory
        data = json.loads(handle.read().decode("utf-8-sig"))
        if isinstance(data, dict):
            _devices(data.get("deviceProperties"), events)
            data = _event_list(data.get("traceEvents"), events.path)
        yield from data
        return
    parsed = ijson.basic_parse(handle)
    kind, _ = next(parsed)
    if kind == "start_array":  # a bare array of events
        yield from _items(parsed, 1)
        return
    if kind != "start_map":
        raise InputError(events.path, "expected a JSON object with traceEvents")
    seen = False
    for kind, value in parsed:
        if kind == "end_map":
            break
        first = next(parsed)
        if value == "traceEvents":
            if first[0] != "start_array":
                _event_list(_build(first, parsed, 1), events.path)
            seen = True
            yield from _items(parsed, 1)
        elif value == "deviceProperties":
            _devices(_build(first, parsed, 1), events)
        else:
            _build(first, parsed, 1, keep=False)
    if not seen:
        raise InputError(events.path, "no traceEvents array; expected Kineto / Chrome trace "
                                      "JSON")


def _event_list(found: Any, path: str) -> list[Any]:
    if not isinstance(found, list):
        raise InputError(f"{path}: traceEvents", f"expected an array of events, got "
                                                 f"{type(found).__name__}")
    return found


def _items(parsed: Iterator[tuple[str, Any]], depth: int) -> Iterator[Any]:
    """The elements of the array just opened, each built whole (depth-bounded)."""
    for first in parsed:
        if first[0] == "end_array":
            return
        yield _build(first, parsed, depth + 1)


def _build(first: tuple[str, Any], parsed: Iterator[tuple[str, Any]], depth: int,
           keep: bool = True) -> Any:
    """One JSON value from its first parse event on; refused past MAX_DEPTH levels. With
    `keep` False it is only skipped (nothing built)."""
    kind, value = first
    if kind not in _OPEN:
        return value
    root: Any = ({} if kind == "start_map" else []) if keep else None
    stack = [root]
    key = None
    for kind, value in parsed:
        if kind == "map_key":
            key = value
            continue
        if kind == "end_map" or kind == "end_array":
            done = stack.pop()
            if not stack:
                return done
            continue
        if kind in _OPEN:
            if depth + len(stack) > MAX_DEPTH:
                raise RecursionError
            new: Any = ({} if kind == "start_map" else []) if keep else None
        else:
            new = value
        if keep:
            container = stack[-1]
            if type(container) is list:
                container.append(new)
            else:
                container[key] = new
        if kind in _OPEN:
            stack.append(new)
    raise ValueError("the file ends inside a value")


def _devices(properties: Any, events: TraceEvents) -> None:
    if not isinstance(properties, list):
        return
    if len(properties) > MAX_DEVICES:
        raise InputError(f"{events.path}: deviceProperties",
                         f"{len(properties):,} entries; expected at most {MAX_DEVICES:,} (one "
                         "per GPU)")
    for item in properties:
        if isinstance(item, dict) and _is_key(item.get("id")) and isinstance(
                item.get("name"), str) and item["name"]:
            events.device_names[item["id"]] = item["name"][:MAX_NAME_CHARS]


def _is_key(value: Any) -> bool:
    """An id, pid, tid, correlation: a JSON scalar (never a list or an object)."""
    return value is None or isinstance(value, (str, int, float, Decimal))


def _time(value: Any) -> float | None:
    """A timestamp or duration in microseconds: a finite JSON number, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _frozen(value: Any) -> Any:
    """Lists as tuples, all the way down: recorded shapes become hashable (and cacheable)."""
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _keep(e: Any, events: TraceEvents) -> None:
    """Append the event to its kind's list if pricing needs it; count it in `skipped` when
    its fields are not what the format gives them."""
    if not isinstance(e, dict):
        events.skip("an event that is not a JSON object")
        return
    ph = e.get("ph")
    cat = e.get("cat")
    if not isinstance(cat, str) or not isinstance(ph, str):
        if any(v is not None and not isinstance(v, str) for v in (cat, ph)):
            events.skip("an event whose cat or ph is not a string")
        return
    if ph == "X" and (cat in _OP_CATEGORIES or cat in _CALL_CATEGORIES or cat in _GPU_KINDS):
        problem = _bad_complete(e, cat)
        if problem:
            events.skip(problem)
            return
        args = e.get("args") or {}
        ts = _time(e["ts"])
        assert ts is not None
        dur = _time(e["dur"])
        assert dur is not None
        if cat in _OP_CATEGORIES:
            share = events.share
            events.keep(events.ops, CpuOp(
                len(events.ops), e.get("pid"), e.get("tid"), ts, ts + dur,
                share(e.get("name", "")), _external_id(args),
                share(_frozen(args.get("Input Dims") or ())),
                share(tuple(args.get("Input type") or ())),
                share(tuple(args.get("Concrete Inputs") or ()))))
        elif cat in _CALL_CATEGORIES:
            if args.get("correlation") is not None:
                events.keep(events.calls, RuntimeCall(e.get("pid"), e.get("tid"), ts,
                                                      args.get("correlation"),
                                                      _external_id(args)))
        else:
            events.keep(events.gpu, GpuEvent(_GPU_KINDS[cat], events.share(e.get("name", "")),
                                             e.get("pid"), e.get("tid"), ts, dur,
                                             args.get("correlation"), args.get("device")))
    elif cat == "ac2g" and ph in ("s", "f"):
        ts = _time(e.get("ts"))
        if ts is None or not all(_is_key(e.get(k)) for k in ("id", "pid", "tid")):
            events.skip("a flow arrow with an id, pid, tid or ts of the wrong type")
            return
        flow = Flow(e.get("id"), e.get("pid"), e.get("tid"), ts)
        events.keep(events.flow_starts if ph == "s" else events.flow_ends, flow)


def _bad_complete(e: dict[str, Any], cat: str) -> str:
    """Why a complete event (op, launch, device activity) cannot be used; '' when it can."""
    if _time(e.get("ts")) is None:
        return "an event whose ts is not a finite number"
    dur = _time(e.get("dur"))
    if dur is None or dur < 0:
        return "an event whose dur is not a finite number >= 0"
    name = e.get("name", "")
    if not isinstance(name, str):
        return "an event whose name is not a string"
    if len(name) > MAX_NAME_CHARS:
        raise _TooMuch(f"an event name of {len(name):,} characters; expected at most "
                       f"{MAX_NAME_CHARS:,}")
    if not _is_key(e.get("pid")) or not _is_key(e.get("tid")):
        return "an event whose pid or tid is a list or an object"
    args = e.get("args")
    if args is None:
        return ""
    if not isinstance(args, dict):
        return "an event whose args is not an object"
    keys = ("External id", "external id", "correlation") + (
        ("device",) if cat in _GPU_KINDS else ())
    if not all(_is_key(args.get(k)) for k in keys):
        return "an event whose External id, correlation or device is a list or an object"
    if cat in _OP_CATEGORIES:
        dims = args.get("Input Dims")
        if dims is not None and not isinstance(dims, list):
            return "an op whose Input Dims is not an array"
        for name_ in ("Input type", "Concrete Inputs"):
            if args.get(name_) is not None and not _strings(args[name_]):
                return f"an op whose {name_} is not an array of strings"
    return ""


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



class _Guard(io.RawIOBase):
    """The decompressed bytes on their way to the parser: a leading UTF-8 byte-order mark
    dropped; refused (`_TooMuch`) past `limit` bytes, or past MAX_RUN_BYTES without a `"`."""

    def __init__(self, raw: IO[bytes], path: str, limit: int | None) -> None:
        super().__init__()
        self._raw = raw
        self._limit = limit
        self._done = 0
        self._run = 0  # bytes since the last `"`
        self._started = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._raw.read(len(buffer))
        if not self._started:
            self._started = True
            if data.startswith(b"\xef\xbb\xbf"):
                data = data[3:] or self._raw.read(len(buffer))
        self._done += len(data)
        if self._limit is not None and self._done > self._limit:
            raise _TooMuch(f"it inflates to more than {self._limit:,} bytes, over "
                           f"{MAX_GZIP_RATIO} times its compressed size (a gzip bomb)")
        quote = data.rfind(b'"')
        self._run = len(data) - 1 - quote if quote >= 0 else self._run + len(data)
        if self._run > MAX_RUN_BYTES:
            raise _TooMuch(f"more than {MAX_RUN_BYTES:,} bytes without a string (padding, "
                           "or one string too long)")
        buffer[:len(data)] = data
        return len(data)
