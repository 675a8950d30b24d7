"""Read a PyTorch profiler trace (Kineto / Chrome trace JSON, gzipped or not) into compact events.

The format is told from the content, never the name: gzip by its magic bytes, a trace by a
JSON object holding `traceEvents` (or a bare JSON array of events with `ph`). The file streams
through once: the events array is cut into runs of whole events (about a MiB each) that msgspec
decodes in C against the few fields pricing reads (everything else is skipped unbuilt); a run
holding anything the fast schema does not fit is decoded again with `json` and judged event by
event (`_keep`), so that a malformed event is skipped and counted, never guessed at. What is
kept is columns of numbers (times, thread codes, ids) and one shared table of each distinct
name and op signature: memory grows by ~30 bytes per event kept, and each distinct op,
kernel name and shape list is held once. Durations and timestamps stay in the trace's
microseconds here; the records built from them are in seconds.
"""

from __future__ import annotations

import functools
import io
import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, NamedTuple, cast

import msgspec
import numpy as np
from isal import igzip, isal_zlib

from roofwise.base.built import BuiltRows
from roofwise.base.errors import InputError
from roofwise.traces.collectives import kernel_message
from roofwise.traces.devices import part_of

GZIP_MAGIC = b"\x1f\x8b"
SNIFF_BYTES = 1 << 20  # a trace names `traceEvents` (or an event's `ph`) well within 1 MiB
NONE_ID = np.iinfo(np.int64).min  # an id the event does not give, in an int64 id column


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
    comms: Any = None  # a collective kernel's recorded message (collectives.kernel_message)


KINDS = ("kernel", "memcpy", "memset")  # GpuColumns.kind codes


@dataclass(frozen=True)
class OpColumns:
    """Host ops in file order: `signature` indexes TraceEvents.signatures."""

    thread: np.ndarray  # int32 code into TraceEvents.threads
    ts_us: np.ndarray
    end_us: np.ndarray
    external_id: np.ndarray  # int64 (NONE_ID: not given), or object where ids are not ints
    signature: np.ndarray  # int32


@dataclass(frozen=True)
class CallColumns:
    """Launch API calls (`cudaLaunchKernel`, `hipLaunchKernel`, ...) that carry a correlation."""

    thread: np.ndarray
    ts_us: np.ndarray
    correlation: np.ndarray
    external_id: np.ndarray


@dataclass(frozen=True)
class GpuColumns:
    """Device activity in file order: `name` indexes TraceEvents.names, `kind` KINDS."""

    kind: np.ndarray  # int8
    name: np.ndarray  # int32
    thread: np.ndarray
    ts_us: np.ndarray
    dur_us: np.ndarray
    correlation: np.ndarray
    device: np.ndarray


@dataclass(frozen=True)
class FlowColumns:
    """One end of each `ac2g` flow arrow (host call -> device activity)."""

    id: np.ndarray
    thread: np.ndarray
    ts_us: np.ndarray


class Signature(NamedTuple):
    """What pricing reads of an op: one shared copy per distinct op and recorded inputs."""

    name: str
    dims: tuple[Any, ...]
    types: tuple[str, ...]
    concrete: tuple[str, ...]
    strides: tuple[Any, ...] = ()  # `Input Strides` (PyTorch 2.x): what an expanded input reads


# the columns each kind of event keeps, in the order _Pending appends them
_OP_FIELDS = ("thread", "ts_us", "end_us", "external_id", "signature")
_CALL_FIELDS = ("thread", "ts_us", "correlation", "external_id")
_GPU_FIELDS = ("kind", "name", "thread", "ts_us", "dur_us", "correlation", "device")
_FLOW_FIELDS = ("id", "thread", "ts_us")
_ID_FIELDS = {"external_id", "correlation", "device", "id"}
_FLOAT_FIELDS = {"ts_us", "end_us", "dur_us"}
_DTYPES = {"thread": np.int32, "signature": np.int32, "name": np.int32, "kind": np.int8}


class _Pending:
    """One kind's columns: Python lists for the run being read, one growing array per column
    for the runs before it (so that a run's lists are all that is ever held as Python
    objects)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.lists: tuple[list[Any], ...] = tuple([] for _ in names)
        self.done = tuple(_Growing() for _ in names)
        self.flushed = 0

    def __len__(self) -> int:
        return len(self.lists[0]) + self.flushed

    def flush(self) -> None:
        if self.lists[0]:
            self.flushed += len(self.lists[0])
            for name, values, done in zip(self.names, self.lists, self.done, strict=True):
                done.append(_column(name, values))
            for values in self.lists:
                values.clear()

    def arrays(self) -> list[np.ndarray]:
        self.flush()
        if not self.flushed:
            return [_column(n, []) for n in self.names]
        return [done.whole() for done in self.done]


class _Growing:
    """A column's runs in one array that grows in place (realloc), never a list of run-sized
    arrays: those, freed once joined, would leave holes all through the heap that the process
    cannot give back, doubling what a read holds."""

    FIRST = 1 << 16  # entries: a first array big enough to be mapped, not carved from the heap

    def __init__(self) -> None:
        self.array: np.ndarray | None = None
        self.size = 0

    def append(self, part: np.ndarray) -> None:
        if self.array is None:
            self.array = np.empty(max(self.FIRST, len(part)), dtype=part.dtype)
        elif (part.dtype == object) != (self.array.dtype == object):  # ids that are not ints
            if part.dtype != object:
                part = _as_objects(part)
            else:
                self.array = _as_objects(self.array[:self.size])
        end = self.size + len(part)
        if end > len(self.array):
            self._grow(max(end, 2 * len(self.array)))
        self.array[self.size:end] = part
        self.size = end

    def _grow(self, capacity: int) -> None:
        assert self.array is not None
        if self.array.dtype == object:  # a rare column; copied, its references kept
            grown = np.empty(capacity, dtype=object)
            grown[:self.size] = self.array[:self.size]
            self.array = grown
        else:  # no view of it is ever taken while it grows, hence no reference check
            self.array.resize(capacity, refcheck=False)

    def whole(self) -> np.ndarray:
        assert self.array is not None
        if self.array.dtype == object:
            return self.array[:self.size].copy()
        self.array.resize(self.size, refcheck=False)
        found, self.array = self.array, None
        return found


def _column(name: str, values: list[Any]) -> np.ndarray:
    if name in _FLOAT_FIELDS:
        return np.array(values, dtype=np.float64)
    if name in _ID_FIELDS:
        return _ids(values)
    return np.array(values, dtype=_DTYPES[name])


def _ids(values: list[Any]) -> np.ndarray:
    """Ids as int64 when every one is an int (None as NONE_ID), else as objects: an id keeps
    the equality JSON gave it (1 and "1" differ; 1 and 1.0, as in Python, do not)."""
    column = np.array(values) if values else np.zeros(0, dtype=np.int64)
    if column.dtype == np.int64:  # ints only (numpy infers floats, strings, boxes otherwise)
        if not (column == NONE_ID).any():
            return column
    elif column.dtype == object and all(type(v) is int or v is NONE_ID_BOX for v in values):
        try:  # ints with some not given
            column = np.array([NONE_ID if v is NONE_ID_BOX else v for v in values],
                              dtype=np.int64)
        except OverflowError:  # an id past int64: kept as it is
            pass
        else:
            return column
    out = np.empty(len(values), dtype=object)
    out[:] = [None if v is NONE_ID_BOX else v for v in values]
    return out


class _Box:
    """The None of an id column while it is a Python list (kept distinct from a real int)."""


NONE_ID_BOX: Any = _Box()


def _as_objects(column: np.ndarray) -> np.ndarray:
    out = np.empty(len(column), dtype=object)
    out[:] = [None if v == NONE_ID else v for v in column.tolist()]
    return out


def id_value(column: np.ndarray, i: int) -> Any:
    """Entry `i` of an id column as the trace gave it (None where it gave none)."""
    value = column[i]
    if column.dtype == object:
        return value
    return None if value == NONE_ID else int(value)


@dataclass
class TraceEvents:
    """The events of one trace that matter for pricing, as columns, in file order per kind.

    `ops` and `gpu` give them back one by one (CpuOp, GpuEvent) for code that wants a row."""

    path: str
    op_columns: OpColumns | None = None
    call_columns: CallColumns | None = None
    gpu_columns: GpuColumns | None = None
    flow_start_columns: FlowColumns | None = None
    flow_end_columns: FlowColumns | None = None
    threads: list[tuple[Any, Any]] = field(default_factory=list)  # code -> (pid, tid)
    names: list[str] = field(default_factory=list)  # kernel / memcpy / memset names
    signatures: list[Signature] = field(default_factory=list)
    device_names: dict[Any, str] = field(default_factory=dict)  # device id -> name
    # names told from deviceProperties' other fields where the trace gives none (devices.py)
    devices_from_properties: set[str] = field(default_factory=set)
    rank: int | None = None  # distributedInfo's rank, when the trace names one
    world_size: int | None = None  # distributedInfo's world_size: the ranks of its job
    # gpu index -> a collective kernel's recorded message (collectives.kernel_message): only
    # the few device events whose args name a collective
    comms: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)  # why -> events skipped for it
    kept: int = 0

    @property
    def ops(self) -> Sequence[CpuOp]:
        return BuiltRows(0 if self.op_columns is None else len(self.op_columns.ts_us),
                         functools.partial(_op_row, self))

    @property
    def gpu(self) -> Sequence[GpuEvent]:
        return BuiltRows(0 if self.gpu_columns is None else len(self.gpu_columns.ts_us),
                         functools.partial(_gpu_row, self))


def _op_row(events: TraceEvents, i: int) -> CpuOp:
    c = events.op_columns
    assert c is not None
    pid, tid = events.threads[int(c.thread[i])]
    sig = events.signatures[int(c.signature[i])]
    return CpuOp(i, pid, tid, float(c.ts_us[i]), float(c.end_us[i]), sig.name,
                 id_value(c.external_id, i), sig.dims, sig.types, sig.concrete)


def _gpu_row(events: TraceEvents, i: int) -> GpuEvent:
    c = events.gpu_columns
    assert c is not None
    pid, tid = events.threads[int(c.thread[i])]
    return GpuEvent(KINDS[int(c.kind[i])], events.names[int(c.name[i])], pid, tid,
                    float(c.ts_us[i]), float(c.dur_us[i]), id_value(c.correlation, i),
                    id_value(c.device, i), events.comms.get(i))


class _Sink:
    """Where events go as they are read: the kinds' pending columns, the shared tables."""

    def __init__(self, events: TraceEvents) -> None:
        self.events = events
        self.ops = _Pending(_OP_FIELDS)
        self.calls = _Pending(_CALL_FIELDS)
        self.gpu = _Pending(_GPU_FIELDS)
        self.flow_starts = _Pending(_FLOW_FIELDS)
        self.flow_ends = _Pending(_FLOW_FIELDS)
        self.thread_codes: dict[tuple[Any, Any], int] = {}
        self.name_codes: dict[str, int] = {}
        self.signature_codes: dict[Signature, int] = {}
        self.raw_signatures: dict[tuple[str, bytes, bytes, bytes, bytes], int] = {}
        self.shared: dict[Any, Any] = {}
        self.counted = 0  # events kept in the runs flushed so far

    def thread(self, pid: Any, tid: Any) -> int:
        key = (pid, tid)
        code = self.thread_codes.get(key)
        if code is None:
            code = self.thread_codes[key] = len(self.events.threads)
            self.events.threads.append(key)
        return code

    def name(self, name: str) -> int:
        code = self.name_codes.get(name)
        if code is None:
            code = self.name_codes[name] = len(self.events.names)
            self.events.names.append(name)
        return code

    def share(self, value: Any) -> Any:
        try:
            return self.shared.setdefault(value, value)
        except TypeError:  # something unhashable in the record: keep its own copy
            return value

    def signature(self, name: str, dims: Any, types: Any, concrete: Any,
                  strides: Any = None) -> int:
        sig = Signature(self.share(name), self.share(_frozen(dims or ())),
                        self.share(tuple(types or ())), self.share(tuple(concrete or ())),
                        self.share(_frozen(strides) if isinstance(strides, list) else ()))
        try:
            code = self.signature_codes.get(sig)
        except TypeError:  # unhashable: its own entry
            code = None
        if code is None:
            code = len(self.events.signatures)
            self.events.signatures.append(sig)
            with suppress(TypeError):
                self.signature_codes[sig] = code
        return code

    def comms(self, args: dict[str, Any]) -> None:
        """The collective message a device event's args record, kept under the index the
        event is about to take (only for the few events whose args name one)."""
        found = kernel_message(args)
        if found is not None:
            self.events.comms[len(self.gpu)] = found

    def end_run(self) -> None:
        """The run's lists become arrays; refused past MAX_EVENTS kept events."""
        kinds = (self.ops, self.calls, self.gpu, self.flow_starts, self.flow_ends)
        self.counted = sum(len(k) for k in kinds)
        if self.counted > MAX_EVENTS:
            raise _TooMuch(f"more than {MAX_EVENTS:,} ops, launches and device events; "
                           "expected one profiled step or a few (profile fewer steps)")
        for kind in kinds:
            kind.flush()

    def finish(self) -> TraceEvents:
        self.end_run()
        e = self.events
        e.op_columns = OpColumns(*self.ops.arrays())
        e.call_columns = CallColumns(*self.calls.arrays())
        e.gpu_columns = GpuColumns(*self.gpu.arrays())
        e.flow_start_columns = FlowColumns(*self.flow_starts.arrays())
        e.flow_end_columns = FlowColumns(*self.flow_ends.arrays())
        e.kept = self.counted
        return e


# Categories as PyTorch >= 1.10 writes them, then as PyTorch 1.8-1.9 did (`Operator`,
# `Runtime`, `Kernel`, ...; there the launches and device events name their op's id
# `external id`, in lower case): one schema to the code below.
_GPU_KINDS = {"kernel": 0, "gpu_memcpy": 1, "gpu_memset": 2,
              "Kernel": 0, "Memcpy": 1, "Memset": 2}
_CALL_CATEGORIES = ("cuda_runtime", "cuda_driver", "Runtime")
_OP_CATEGORIES = ("cpu_op", "Operator")
_OP, _CALL = -1, -2
_KIND_OF = {**{c: _OP for c in _OP_CATEGORIES}, **{c: _CALL for c in _CALL_CATEGORIES},
            **_GPU_KINDS}


def _external_id(args: dict[str, Any]) -> Any:
    found = args.get("External id")
    return args.get("external id") if found is None else found


# A file that cannot be read, or a gzip stream that cannot be inflated: a bad CRC or length
# (OSError), a truncated stream (EOFError), a bad block (ISA-L's own error, not zlib's; its
# stub types the class as an instance, hence the cast).
UNREADABLE_BYTES: tuple[type[Exception], ...] = (OSError, EOFError,
                                                 cast(type[Exception], isal_zlib.error))
UNREADABLE_TRACE: tuple[type[Exception], ...] = (ValueError, msgspec.DecodeError,
                                                 *UNREADABLE_BYTES)


@contextmanager
def _open_bytes(path: Path, wrap: Callable[[IO[bytes]], IO[bytes]] | None = None
                ) -> Iterator[IO[bytes]]:
    """The file's bytes, decompressed when it starts with gzip's magic number (by ISA-L,
    several times faster than zlib at inflating, with the same CRC and length checks)."""
    with path.open("rb") as plain:
        raw: IO[bytes] = plain if wrap is None else wrap(plain)
        head = raw.read(2)
        raw.seek(0)
        if head != GZIP_MAGIC:
            yield raw
            return
        with igzip.GzipFile(fileobj=raw) as unzipped:
            yield unzipped  # type: ignore[misc]


def _head_text(path: Path) -> str:
    """The first MiB of the (decompressed) file, as text; '' when it is not readable."""
    try:
        with path.open("rb") as raw:
            head = raw.read(SNIFF_BYTES)
            if head.startswith(GZIP_MAGIC):  # inflated by a decompressor object, which gives
                # what precedes a cut short stream (a file reader raises and gives nothing):
                # a truncated trace is then said to be one, not to be no trace
                inflate = isal_zlib.decompressobj(16 + isal_zlib.MAX_WBITS)
                head = inflate.decompress(head, SNIFF_BYTES)
    except UNREADABLE_BYTES:
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


def traces_in(folder: Path) -> list[Path]:
    """The profiler traces (.json, .json.gz, by content) directly in `folder`: a folder holding
    any is a job's ranks, not a records dataset."""
    return [p for p in folder.iterdir()
            if p.is_file() and p.name.endswith((".json", ".json.gz")) and is_trace(p)]


def read_trace(path: str | Path, progress: Callable[[int], None] | None = None,
               total: Callable[[int], None] | None = None) -> TraceEvents:
    """The trace's events; `progress(bytes_read)` is called as the file is consumed and
    `total(file_size)` once at the start (for a progress bar).

    The file is read once. An event whose fields are not of the type the format gives them (an
    event that is not an object, a duration that is not a finite number >= 0, a list where an id
    goes, ...) is skipped and counted in `skipped`, never turned into a number. What no sane
    trace holds (nesting deeper than MAX_DEPTH in what is read, a run of MAX_RUN_BYTES without
    a string, more than MAX_EVENTS kept events, ...) is refused as a whole: InputError."""
    target = Path(path)
    if not is_trace(target):
        raise InputError(str(target), "not a profiler trace; expected Kineto / Chrome trace "
                                      "JSON (an object with traceEvents), gzipped or not")
    size = target.stat().st_size
    if total is not None:
        total(size)
    sink = _Sink(TraceEvents(path=str(target)))
    wrap = _counting(progress) if progress is not None else None
    try:
        with _open_bytes(target, wrap) as handle:
            gzipped = isinstance(handle, igzip.GzipFile)
            limit = max(MIN_INFLATED_BYTES, MAX_GZIP_RATIO * size) if gzipped else None
            guarded = _Guard(handle, str(target), limit)
            _Scanner(io.BufferedReader(guarded, READ_BYTES), sink).document()
        return sink.finish()
    except InputError:
        raise
    except _TooMuch as exc:
        raise InputError(str(target), f"{exc}; refused") from None
    except RecursionError:
        raise InputError(str(target), f"nesting deeper than {MAX_DEPTH} levels; expected a "
                                      "Kineto / Chrome trace") from None
    except UNREADABLE_TRACE as exc:
        raise InputError(str(target), f"unreadable trace ({_first_line(exc)}); expected "
                                      "complete Kineto / Chrome trace JSON") from None


# Limits on what a trace may hold: beyond them a file is not a profile of a program but a
# stress on the reader (memory or time out of proportion to what is read), refused in one line.
MAX_DEPTH = 64  # JSON nesting of what is read: Kineto writes at most 5 (event, args, Input
#                 Dims, a list of shapes, a shape); values the reader does not read are skipped
#                 in C, unbuilt (past ~1,000 levels that too is refused)
MAX_RUN_BYTES = 16 << 20  # bytes with no `"` in them: a trace has a string every few dozen
#                 bytes; a 16 MiB name or run of white space is padding, and the JSON parser's
#                 cost grows with the square of a string's length
MAX_GZIP_RATIO = 200  # decompressed over compressed size: Kineto traces inflate 10-40x;
MIN_INFLATED_BYTES = 256 << 20  # ... more (past 256 MiB) is padding: a gzip bomb
MAX_EVENTS = 16_000_000  # events kept (ops, launches, device activity, flow arrows): a profiled
#                 step of a large model holds well under a million, a trace of several steps a few
#                 million; each costs ~65 B at the peak (4.5 M events: 364 MiB), so ~1 GiB here
MAX_NAME_CHARS = 65536  # an op or kernel name: demangled templated kernels run to a few thousand
MAX_DEVICES = 4096  # deviceProperties entries: one per GPU of the host
READ_BYTES = 1 << 20  # read size: also about the length of the runs of events decoded at once
RUN_WINDOW = 1 << 16  # where a run's end is looked for: the last 64 KiB read


class _TooMuch(Exception):
    """A limit above was crossed: refused (InputError) where the path is known."""


def _counting(report: Callable[[int], None]) -> Callable[[IO[bytes]], IO[bytes]]:
    def wrap(raw: IO[bytes]) -> IO[bytes]:
        return cast(IO[bytes], _Counting(raw, report))

    return wrap


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:160]


# -- the fast schema: the fields pricing reads, typed as the format gives them -------------
_Key = int | str | float | None


class _Args(msgspec.Struct, gc=False):
    external_id: _Key = msgspec.field(default=None, name="External id")
    external_id_lower: _Key = msgspec.field(default=None, name="external id")
    correlation: _Key = None
    device: _Key = None
    dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    # PyTorch 1.8 wrote `Input dims` (and no dtypes in `Input type`)
    dims_lower: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input dims")
    types: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    concrete: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Concrete Inputs")
    strides: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Strides")
    # a collective kernel's recorded message (PyTorch 2.1 on): raw, decoded only where the
    # name is there, so that a field of any type is judged as the slow path judges it
    collective: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Collective name")
    in_nelems: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="In msg nelems")
    out_nelems: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Out msg nelems")
    group_size: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Group size")
    dtype: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="dtype")


class _Event(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: str = ""
    pid: _Key = None
    tid: _Key = None
    ts: float | None = None
    dur: float | None = None
    id: _Key = None
    args: _Args | None = None


_RUN_DECODER = msgspec.json.Decoder(list[_Event])
_RUN_END = re.compile(rb"\}\s*,\s*\{")  # `}, {`: where one event ends and the next begins


class _Unfit(Exception):
    """A run holds something the fast schema does not take: judge it event by event."""


_WS = b" \t\r\n"
_TOKEN = re.compile(rb'[ \t\r\n]*(?:("(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*")'
                    rb"|([\[\]{},:])|(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
                    rb"|true|false|null)(?=[ \t\r\n,\]}:]))")


class _Scanner:
    """The document's structure, token by token (only outside the events array, and for an
    event the fast path cannot cut out), and the events array, run by run."""

    def __init__(self, handle: IO[bytes], sink: _Sink) -> None:
        self.handle = handle
        self.sink = sink
        self.buf = b""
        self.pos = 0
        self.mark: int | None = None  # where a value being captured starts
        self.eof = False

    # -- bytes ------------------------------------------------------------------------------
    def more(self) -> bool:
        """Read on (dropping what was consumed); False at the end of the file."""
        if self.eof:
            return False
        try:
            data = self.handle.read(READ_BYTES)
        except EOFError:  # a gzip stream cut short
            raise ValueError("the gzip stream ends early: a truncated file") from None
        if not data:
            self.eof = True
            return False
        cut = self.pos if self.mark is None else min(self.pos, self.mark)
        self.buf = self.buf[cut:] + data
        self.pos -= cut
        if self.mark is not None:
            self.mark -= cut
        return True

    def token(self) -> tuple[int, bytes]:
        """(start, text) of the next token; ValueError where the JSON is broken."""
        while True:
            m = _TOKEN.match(self.buf, self.pos)
            if m is not None and (m.end() < len(self.buf) or self.eof):
                self.pos = m.end()
                return m.start(m.lastindex or 0), m.group(m.lastindex or 0)
            if not self.more():
                if m is not None:
                    self.pos = m.end()
                    return m.start(m.lastindex or 0), m.group(m.lastindex or 0)
                rest = self.buf[self.pos:].lstrip(_WS)
                raise ValueError("the file ends inside a value" if not rest else
                                 f"not JSON at {rest[:20]!r}")

    def skip(self, first: bytes, depth: int) -> None:
        """Past the value whose first token is `first`, checking it is JSON."""
        if first == b"{" or first == b"[":
            if depth >= MAX_DEPTH:
                raise RecursionError
            close = b"}" if first == b"{" else b"]"
            _, t = self.token()
            if t == close:
                return
            while True:
                if first == b"{":
                    if not t.startswith(b'"') or self.token()[1] != b":":
                        raise ValueError("expected a key and a colon in an object")
                    t = self.token()[1]
                self.skip(t, depth + 1)
                t = self.token()[1]
                if t == close:
                    return
                if t != b",":
                    raise ValueError(f"expected , or {close.decode()}, got {t[:20]!r}")
                t = self.token()[1]
        if first in (b"}", b"]", b",", b":"):
            raise ValueError(f"unexpected {first.decode()}")

    def value(self, first: tuple[int, bytes], depth: int) -> Any:
        """The value whose first token is `first`, decoded (deviceProperties, odd events)."""
        self.mark = first[0]
        try:
            self.skip(first[1], depth)
            text = self.buf[self.mark:self.pos]
        finally:
            self.mark = None
        return json.loads(text)

    # -- the document -----------------------------------------------------------------------
    def document(self) -> None:
        path = self.sink.events.path
        _, t = self.token()
        if t == b"[":  # a bare array of events
            self.events()
            return
        if t != b"{":
            raise InputError(path, "expected a JSON object with traceEvents")
        seen = False
        t = self.token()[1]
        while t != b"}":
            if not t.startswith(b'"') or self.token()[1] != b":":
                raise ValueError("expected a key and a colon in the top-level object")
            key = json.loads(t)
            first = self.token()
            if key == "traceEvents":
                seen = True
                if first[1] == b"[":
                    self.events()
                else:
                    _event_list(self.value(first, 1), path)
            elif key == "deviceProperties":
                _devices(self.value(first, 1), self.sink.events)
            elif key == "distributedInfo":
                _distributed(self.value(first, 1), self.sink.events)
            else:
                self.skip(first[1], 1)
            t = self.token()[1]
            if t == b",":
                t = self.token()[1]
            elif t != b"}":
                raise ValueError(f"expected , or }} in the top-level object, got {t[:20]!r}")
        if not seen:
            raise InputError(path, "no traceEvents array; expected Kineto / Chrome trace "
                                   "JSON")

    def events(self) -> None:
        """The events array just opened, run by run: the longest run of whole events the buffer
        holds is cut at a `}, {` and decoded at once; where no cut decodes (the array's end, an
        event that is not an object, a `}, {` inside a string), one element is read by the
        token scanner instead.

        A file that ends inside the array (a job killed while its trace was written) is
        refused as truncated, not read in part: the launches and kernels after the cut would be
        missing from sums that look whole."""
        try:
            self._events()
        except ValueError as exc:
            if not self.eof:
                raise
            raise ValueError("the file ends inside the events array: a truncated trace, as a "
                             "job killed while writing it leaves") from exc

    def _events(self) -> None:
        alone = 0
        while True:
            while len(self.buf) - self.pos < READ_BYTES and self.more():
                pass
            rest = self.buf[self.pos:self.pos + 64].lstrip(_WS)
            if rest.startswith(b"]"):
                self.pos = self.buf.index(b"]", self.pos) + 1
                return
            if self.run():
                self.sink.end_run()
                continue
            self.element()
            alone += 1
            if alone % 4096 == 0:
                self.sink.end_run()
            _, t = self.token()
            if t == b"]":
                return
            if t != b",":
                raise ValueError(f"expected , or ] between events, got {t[:20]!r}")

    def run(self) -> bool:
        """Decode the longest run of whole events from `pos` the buffer holds; False when
        none could be cut."""
        window = max(self.pos, len(self.buf) - RUN_WINDOW)
        ends = [m.start() + 1 for m in _RUN_END.finditer(self.buf, window)]
        if not ends and window > self.pos:
            ends = [m.start() + 1 for m in _RUN_END.finditer(self.buf, self.pos)]
        for end in ends[::-1][:3]:
            text = b"[" + self.buf[self.pos:end] + b"]"
            try:
                decoded = _RUN_DECODER.decode(text)
            except msgspec.ValidationError:
                try:
                    loose = json.loads(text)
                except ValueError:
                    continue
                for e in loose:
                    _keep(e, self.sink)
            except msgspec.DecodeError:
                continue
            else:
                try:
                    mark = _marks(self.sink)
                    _fast(decoded, self.sink)
                except _Unfit:
                    _rewind(self.sink, mark)
                    for e in json.loads(text):
                        _keep(e, self.sink)
            self.pos = self.buf.index(b"{", end)
            return True
        return False

    def element(self) -> None:
        """One element of the events array, read by the token scanner and judged alone."""
        first = self.token()
        if first[1] in (b"{", b"["):
            _keep(self.value(first, 1), self.sink)
        else:
            self.skip(first[1], 1)
            _keep(json.loads(first[1]), self.sink)


def _marks(sink: _Sink) -> tuple[int, ...]:
    return tuple(len(k.lists[0]) for k in (sink.ops, sink.calls, sink.gpu, sink.flow_starts,
                                            sink.flow_ends))


def _rewind(sink: _Sink, mark: tuple[int, ...]) -> None:
    """Drop what a run half-read by the fast path appended (it is read again, loosely)."""
    for kind, n in zip((sink.ops, sink.calls, sink.gpu, sink.flow_starts, sink.flow_ends),
                       mark, strict=True):
        for values in kind.lists:
            del values[n:]
    dropped = [i for i in sink.events.comms if i >= sink.gpu.flushed + mark[2]]
    for i in dropped:
        del sink.events.comms[i]


def _fast(decoded: list[_Event], sink: _Sink) -> None:
    """A run the fast schema took whole: keep its events; _Unfit at anything it cannot judge
    alone (a bad duration, a long name, recorded inputs that are not lists)."""
    kind_of = _KIND_OF
    thread_codes = sink.thread_codes
    op_lists, call_lists, gpu_lists = sink.ops.lists, sink.calls.lists, sink.gpu.lists
    op_thread, op_ts, op_end, op_ext, op_sig = op_lists
    call_thread, call_ts, call_corr, call_ext = call_lists
    g_kind, g_name, g_thread, g_ts, g_dur, g_corr, g_dev = gpu_lists
    start_lists, end_lists = sink.flow_starts.lists, sink.flow_ends.lists
    raw_signatures = sink.raw_signatures
    name_codes = sink.name_codes
    box = NONE_ID_BOX
    for e in decoded:
        ph = e.ph
        if ph == "X":
            kind = kind_of.get(e.cat)  # type: ignore[arg-type]
            if kind is None:
                continue
            ts, dur, name = e.ts, e.dur, e.name
            if ts is None or dur is None or dur < 0 or len(name) > MAX_NAME_CHARS:
                raise _Unfit
            a = e.args
            if kind == _OP:
                if a is None:
                    key: tuple[str, bytes, bytes, bytes, bytes] = (name, b"", b"", b"", b"")
                    ext = None
                else:
                    key = (name, bytes(a.dims or a.dims_lower), bytes(a.types),
                           bytes(a.concrete), bytes(a.strides))
                    ext = a.external_id
                    if ext is None:
                        ext = a.external_id_lower
                sig = raw_signatures.get(key)
                if sig is None:
                    sig = raw_signatures[key] = _raw_signature(key, sink)
                where = thread_codes.get((e.pid, e.tid))
                op_thread.append(sink.thread(e.pid, e.tid) if where is None else where)
                op_ts.append(ts)
                op_end.append(ts + dur)
                op_ext.append(box if ext is None else ext)
                op_sig.append(sig)
            elif kind == _CALL:
                if a is None or a.correlation is None:
                    continue
                ext = a.external_id
                if ext is None:
                    ext = a.external_id_lower
                where = thread_codes.get((e.pid, e.tid))
                call_thread.append(sink.thread(e.pid, e.tid) if where is None else where)
                call_ts.append(ts)
                call_corr.append(a.correlation)
                call_ext.append(box if ext is None else ext)
            else:
                if a is not None and a.collective:  # before the append: the event's index
                    sink.comms(_collective_args(a))
                code = name_codes.get(name)
                g_kind.append(kind)
                g_name.append(sink.name(name) if code is None else code)
                where = thread_codes.get((e.pid, e.tid))
                g_thread.append(sink.thread(e.pid, e.tid) if where is None else where)
                g_ts.append(ts)
                g_dur.append(dur)
                if a is None:
                    g_corr.append(box)
                    g_dev.append(box)
                else:
                    g_corr.append(box if a.correlation is None else a.correlation)
                    g_dev.append(box if a.device is None else a.device)
        elif (ph == "s" or ph == "f") and e.cat == "ac2g":
            if e.ts is None:
                raise _Unfit
            flow_id, flow_thread, flow_ts = (start_lists if ph == "s" else end_lists)
            flow_id.append(box if e.id is None else e.id)
            where = thread_codes.get((e.pid, e.tid))
            flow_thread.append(sink.thread(e.pid, e.tid) if where is None else where)
            flow_ts.append(e.ts)


def _collective_args(a: _Args) -> dict[str, Any]:
    """The collective fields of a fast-path event's args, decoded as `json` would."""
    return {key: json.loads(bytes(raw)) for key, raw in (
        ("Collective name", a.collective), ("In msg nelems", a.in_nelems),
        ("Out msg nelems", a.out_nelems), ("Group size", a.group_size), ("dtype", a.dtype))
        if raw}


def _raw_signature(key: tuple[str, bytes, bytes, bytes, bytes], sink: _Sink) -> int:
    """The signature of recorded inputs first seen as raw JSON text (decoded once)."""
    name, *raw = key
    dims, types, concrete, strides = (json.loads(r) if r else None for r in raw)
    if dims is not None and not isinstance(dims, list):
        raise _Unfit
    if any(v is not None and not _strings(v) for v in (types, concrete)):
        raise _Unfit
    if _depth(dims) + 2 > MAX_DEPTH or _depth(strides) + 2 > MAX_DEPTH:  # the event and
        raise RecursionError                                               # its args hold them
    return sink.signature(name, dims, types, concrete, strides)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _event_list(found: Any, path: str) -> list[Any]:
    if not isinstance(found, list):
        raise InputError(f"{path}: traceEvents", f"expected an array of events, got "
                                                 f"{type(found).__name__}")
    return found


def _devices(properties: Any, events: TraceEvents) -> None:
    if not isinstance(properties, list):
        return
    if len(properties) > MAX_DEVICES:
        raise InputError(f"{events.path}: deviceProperties",
                         f"{len(properties):,} entries; expected at most {MAX_DEVICES:,} (one "
                         "per GPU)")
    for item in properties:
        # an entry without an id names no device a kernel could point at: left out
        if not (isinstance(item, dict) and item.get("id") is not None and _is_key(item["id"])):
            continue
        if isinstance(item.get("name"), str) and item["name"]:
            events.device_names[item["id"]] = item["name"][:MAX_NAME_CHARS]
            continue
        told = part_of(item)  # no name (ROCm 7): the part its properties single out, if any
        if told is not None:
            events.device_names[item["id"]] = told
            events.devices_from_properties.add(told)


def _distributed(info: Any, events: TraceEvents) -> None:
    rank = info.get("rank") if isinstance(info, dict) else None
    if isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < 1 << 31:
        events.rank = rank
    size = info.get("world_size") if isinstance(info, dict) else None
    if isinstance(size, int) and not isinstance(size, bool) and 0 < size < 1 << 31:
        events.world_size = size


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


def _keep(e: Any, sink: _Sink) -> None:
    """Keep the event in its kind's columns if pricing needs it; count it in `skipped` when
    its fields are not what the format gives them."""
    events = sink.events
    if not isinstance(e, dict):
        _skip(events, "an event that is not a JSON object")
        return
    ph = e.get("ph")
    cat = e.get("cat")
    if not isinstance(cat, str) or not isinstance(ph, str):
        if any(v is not None and not isinstance(v, str) for v in (cat, ph)):
            _skip(events, "an event whose cat or ph is not a string")
        return
    box = NONE_ID_BOX
    kind = _KIND_OF.get(cat)
    if ph == "X" and kind is not None:
        problem = _bad_complete(e, cat)
        if problem:
            _skip(events, problem)
            return
        args = e.get("args") or {}
        ts = _time(e["ts"])
        assert ts is not None
        dur = _time(e["dur"])
        assert dur is not None
        name = e.get("name", "")
        ext = _external_id(args)
        where = sink.thread(e.get("pid"), e.get("tid"))
        if kind == _OP:
            dims = _input_dims(args)
            if _depth(dims) + 2 > MAX_DEPTH or _depth(args.get("Input Strides")) + 2 > MAX_DEPTH:
                raise RecursionError
            values: tuple[Any, ...] = (where, ts, ts + dur, box if ext is None else ext,
                                       sink.signature(name, dims, args.get("Input type"),
                                                      args.get("Concrete Inputs"),
                                                      args.get("Input Strides")))
            target = sink.ops
        elif kind == _CALL:
            if args.get("correlation") is None:
                return
            values = (where, ts, args["correlation"], box if ext is None else ext)
            target = sink.calls
        else:
            corr, device = args.get("correlation"), args.get("device")
            if "Collective name" in args:
                sink.comms(args)
            values = (kind, sink.name(name), where, ts, dur, box if corr is None else corr,
                      box if device is None else device)
            target = sink.gpu
        for column, value in zip(target.lists, values, strict=True):
            column.append(value)
    elif cat == "ac2g" and ph in ("s", "f"):
        ts = _time(e.get("ts"))
        if ts is None or not all(_is_key(e.get(k)) for k in ("id", "pid", "tid")):
            _skip(events, "a flow arrow with an id, pid, tid or ts of the wrong type")
            return
        flow_id = e.get("id")
        target = sink.flow_starts if ph == "s" else sink.flow_ends
        for column, value in zip(target.lists, (box if flow_id is None else flow_id,
                                                sink.thread(e.get("pid"), e.get("tid")), ts),
                                 strict=True):
            column.append(value)


def _skip(events: TraceEvents, why: str) -> None:
    events.skipped[why] = events.skipped.get(why, 0) + 1


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
        dims = _input_dims(args)
        if dims is not None and not isinstance(dims, list):
            return "an op whose Input Dims is not an array"
        for name_ in ("Input type", "Concrete Inputs"):
            if args.get(name_) is not None and not _strings(args[name_]):
                return f"an op whose {name_} is not an array of strings"
    return ""


def _input_dims(args: dict[str, Any]) -> Any:
    """An op's recorded input sizes: `Input Dims`, or `Input dims` as PyTorch 1.8 wrote it."""
    dims = args.get("Input Dims")
    return args.get("Input dims") if dims is None else dims


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
