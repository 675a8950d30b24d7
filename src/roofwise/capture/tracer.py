"""Ledgers traced from PyTorch: run a function on meta (or CPU) tensors under a dispatch mode,
record every aten op, and count it by the ledger convention.

Why a dispatch mode: it sees the aten ops a reference implementation really issues (after
autograd and composite decomposition), with shapes, dtypes and storages, without a GPU.

Conventions (they are the ledger's, see `roofwise.ledgers.ledger`):
- contractions (mm, bmm, addmm, convolution, attention, `_scaled_mm`, ...) are counted by
  PyTorch's own `torch.utils.flop_counter` registry, on `tensor_core.<compute dtype>`
  (fp32 on `cuda_core.fp32` unless `tf32=True`);
- elementwise and reduction ops count `ops per element` x the elements of the largest tensor the
  op touches: the output for elementwise ops, the input for reductions (sum, mean, amax);
  arithmetic and compare on `cuda_core.fp32`, transcendentals on `sfu.fp32`;
- data movement (copies, casts, cat, gather, fills) costs no FLOPs: a dtype cast is counted as
  0, because the quantising arithmetic around it (scale, saturate) is counted where it happens;
- view ops launch no kernel and are skipped in the unfused ledger;
- an aten op in no table, that does not decompose into ops that are, is listed in
  `Traced.uncounted` and in the ledgers' notes: never silently dropped.

The fused ledger is the ideal one call: each function input it reads, read once (its own
bytes, even when it views a larger storage), each output written once, nothing in between.
The unfused ledger is one call per kernel-launching aten op, every intermediate written and
read back, composed with `roofwise.ledgers.ledger.separate`.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils import flop_counter
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from roofwise.base.dtypes import BYTES_PER_ELEMENT
from roofwise.base.errors import InputError
from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work, separate
from roofwise.ops._common import CUDA, SFU, contraction_unit
from roofwise.ops.classes import MOVEMENT_OPS, OP_CLASS_TABLE, TRACED_ONLY_OPS, VIEW_OPS

DEFAULT_UNITS: dict[str, str] = {"arithmetic": CUDA, "compare": CUDA, "transcendental": SFU}

_A, _T = "arithmetic", "transcendental"
_WRITE_ONLY = frozenset(("copy", "fill", "zero"))  # in-place ops that do not read `self`
_METADATA_OPS = frozenset(("size", "sym_size", "stride", "sym_stride", "storage_offset",
                           "sym_storage_offset", "numel", "sym_numel", "dim", "is_contiguous",
                           "sym_is_contiguous", "is_strides_like_format",
                           "is_non_overlapping_and_dense", "layout", "device"))
_TORCH_TO_LEDGER = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp64",
                    "float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2"}


@dataclass(frozen=True)
class TensorRef:
    """One tensor an op touched: its storage (identity), the region it views, its dtype."""

    storage: int
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str

    @property
    def distinct_shape(self) -> tuple[int, ...]:
        """The shape of the data behind it: broadcast (stride 0) dimensions read once."""
        return tuple(1 if st == 0 else s for s, st in zip(self.shape, self.stride, strict=True))

    @property
    def nbytes(self) -> int:
        return math.ceil(math.prod(self.distinct_shape) * BYTES_PER_ELEMENT[self.dtype])

    def span(self) -> tuple[int, int]:
        """Element range [first, last] of its storage it can address."""
        dims = zip(self.shape, self.stride, strict=True)
        return self.offset, self.offset + sum((s - 1) * abs(st) for s, st in dims if s > 0)

    def overlaps(self, other: TensorRef) -> bool:
        a, b = self.span(), other.span()
        return self.storage == other.storage and a[0] <= b[1] and b[0] <= a[1]


@dataclass(frozen=True)
class TracedOp:
    """One aten op as the trace saw it: what it read, what it wrote, how it is counted."""

    index: int
    name: str                      # e.g. "aten.mul.Tensor"
    kind: str                      # "view", "movement", "counted", "contraction", "uncounted"
    reads: tuple[TensorRef, ...]
    writes: tuple[TensorRef, ...]  # outputs it allocates, and arguments it mutates
    mutates: tuple[TensorRef, ...]
    work: tuple[Work, ...]

    @property
    def launches_kernel(self) -> bool:
        return self.kind != "view"


@dataclass(frozen=True)
class Traced:
    """Both ledgers of a traced function, and the ops they were built from."""

    fused: Ledger
    unfused: Ledger
    ops: tuple[TracedOp, ...]
    uncounted: tuple[str, ...] = field(default=())


def trace(fn: Callable[..., Any], *example_args: Any, lookups: Iterable[str | int] = (),
          output_names: Sequence[str] | None = None, roof: str | None = None,
          name: str | None = None, units: Mapping[str, str] | None = None,
          tf32: bool = False, example_kwargs: Mapping[str, Any] | None = None) -> Traced:
    """Run `fn(*example_args)` under the counting mode; return its fused and unfused ledgers.

    `lookups` names (or positions of) arguments that are lookup tables (weights, cos/sin);
    `units` overrides the unit of a class ("arithmetic", "compare", "transcendental",
    "contraction"); `roof` defaults to the unit with the most contraction work, or the
    arithmetic unit when there is none.
    """
    unit_of = {**DEFAULT_UNITS, **(units or {})}
    kwargs = dict(example_kwargs or {})
    wanted = set(lookups)
    args = _named_args(fn, example_args, kwargs, wanted)
    unknown = sorted(str(w) for w in wanted
                     if isinstance(w, str) and not any(a.name.split("[")[0] == w for a in args))
    if unknown:
        raise InputError("trace lookups", f"no tensor argument named {', '.join(unknown)}; "
                                          f"arguments: {', '.join(a.name for a in args)}")
    recorder = _Recorder(unit_of, tf32)
    with recorder:
        result = fn(*example_args, **kwargs)
    wrote = any(a.ref.overlaps(m) for op in recorder.ops for m in op.mutates for a in args)
    outputs = _output_tensors(result, wrote)
    out_names = list(output_names or ([] if len(outputs) != 1 else ["out"]))
    if len(out_names) < len(outputs):
        out_names += [f"out{i}" for i in range(len(out_names), len(outputs))]
    elif len(out_names) > len(outputs):
        raise InputError("trace output_names", f"{len(out_names)} names for "
                                               f"{len(outputs)} output tensors")
    ops = tuple(recorder.ops)
    title = str(name or getattr(fn, "__name__", "traced"))
    fused, unfused = _build(title, args, list(zip(out_names, map(_ref, outputs), strict=True)), ops,
                            roof, unit_of)
    uncounted = tuple(dict.fromkeys(op.name for op in ops if op.kind == "uncounted"))
    return Traced(fused=fused, unfused=unfused, ops=ops, uncounted=uncounted)


def _output_tensors(result: Any, wrote_an_argument: bool) -> list[torch.Tensor]:
    """The returned tensors: a tensor, or a tuple, list or dict of them. A returned number (or
    any non-tensor) is an error; so is returning nothing unless the function wrote into an
    argument (in place), for a ledger without outputs would be empty."""
    # an output the call was asked not to compute (convolution_backward's output_mask) is None
    leaves = [leaf for leaf in (tree_flatten(result)[0] if result is not None else [])
              if leaf is not None]
    stray = [leaf for leaf in leaves if not isinstance(leaf, torch.Tensor)]
    if stray or not (leaves or wrote_an_argument):
        got = type(stray[0] if stray else result).__name__
        raise InputError("trace output", f"the function returned {got}; expected a tensor "
                                         "or a tuple, list or dict of tensors (the outputs it "
                                         "writes), or None after writing into an argument")
    return list(leaves)


def trace_ledger(fn: Callable[..., Any], *example_args: Any, mode: str = "fused",
                 **options: Any) -> Ledger:
    """The fused (default) or unfused ledger of `fn(*example_args)`; options as for `trace`."""
    if mode not in ("fused", "unfused"):
        raise InputError("trace mode", f"expected 'fused' or 'unfused', got {mode!r}")
    traced = trace(fn, *example_args, **options)
    return traced.fused if mode == "fused" else traced.unfused


@dataclass(frozen=True)
class _Arg:
    name: str
    ref: TensorRef
    lookup: bool


def _named_args(fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any],
                lookups: set[str | int]) -> list[_Arg]:
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
        items = list(bound.arguments.items())
    except (TypeError, ValueError):
        items = [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())
    named: list[_Arg] = []
    for position, (pname, value) in enumerate(items):
        leaves = [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]
        for j, t in enumerate(leaves):
            label = pname if len(leaves) == 1 else f"{pname}[{j}]"
            named.append(_Arg(label, _ref(t), pname in lookups or position in lookups))
    return named


def _dtype(dtype: torch.dtype) -> str:
    text = str(dtype).removeprefix("torch.")
    text = _TORCH_TO_LEDGER.get(text, text)
    if text not in BYTES_PER_ELEMENT:
        raise InputError("trace dtype", f"tensor dtype {dtype} has no element size in roofwise")
    return text


def _ref(t: torch.Tensor) -> TensorRef:
    return TensorRef(storage=t.untyped_storage()._cdata, offset=int(t.storage_offset()),
                     shape=tuple(t.shape), stride=tuple(t.stride()), dtype=_dtype(t.dtype))


def _tensors_in(value: Any) -> list[torch.Tensor]:
    """The tensors an argument holds: itself, those of a list (`cat`'s), or any nested."""
    if isinstance(value, torch.Tensor):
        return [value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return []
    return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]


@functools.lru_cache(maxsize=4096)
def _kind_of(func: Any) -> tuple[str, bool, bool]:
    """An op overload's base name, whether it only reads metadata (a size, a stride), and
    whether roofwise counts it itself (else it is decomposed), once per overload."""
    base = _base_name(func)
    metadata = base in _METADATA_OPS or func._overloadpacket.__name__ in _METADATA_OPS
    known = (base in OP_CLASS_TABLE or base in TRACED_ONLY_OPS or base in MOVEMENT_OPS
             or base in VIEW_OPS or func._overloadpacket in flop_counter.flop_registry)
    return base, metadata, known


@functools.lru_cache(maxsize=4096)
def _schema_of(func: Any, base: str
               ) -> tuple[tuple[tuple[str, bool, bool], ...], tuple[bool, ...]]:
    """What `_op` reads of an op's schema, once per op overload: per argument its name,
    whether the op writes it and whether it reads it (an `out=` or a `fill_`'s self is
    written, not read); per return whether it aliases an input."""
    arguments = []
    for arg in func._schema.arguments:
        writes = arg.alias_info is not None and arg.alias_info.is_write
        arguments.append((arg.name, writes,
                          not (writes and (arg.kwarg_only or base in _WRITE_ONLY))))
    return tuple(arguments), tuple(r.alias_info is not None for r in func._schema.returns)


def _base_name(func: Any) -> str:
    return str(func._overloadpacket.__name__).removesuffix("_")


class _Recorder(TorchDispatchMode):
    """Records each aten op; holds every tensor it sees so storage identities stay unique."""

    def __init__(self, unit_of: Mapping[str, str], tf32: bool) -> None:
        super().__init__()
        self.unit_of = unit_of
        self.tf32 = tf32
        self.ops: list[TracedOp] = []
        self._alive: list[Any] = []

    def release(self) -> None:
        """Drop every tensor and op held for the recording, once its ops have been read: the
        tensors sit in reference cycles (fake tensors and their mode), so without this a
        many-step capture holds each step's until the cycle collector runs."""
        self._alive.clear()
        self.ops.clear()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        base, metadata, known = _kind_of(func)
        if metadata:
            return func(*args, **kwargs)
        if not known:  # as FlopCounterMode does: count what it decomposes into
            with self:
                decomposed = func.decompose(*args, **kwargs)
            if decomposed is not NotImplemented:
                return decomposed
        out = func(*args, **kwargs)
        self._alive.append((args, kwargs, out))
        self.ops.append(self._op(func, base, args, kwargs, out))
        return out

    def _op(self, func: Any, base: str, args: Any, kwargs: Any, out: Any) -> TracedOp:
        if base in VIEW_OPS:  # an alias or an allocation: no kernel, nothing moved
            return TracedOp(index=len(self.ops), name=str(func), kind="view", reads=(),
                            writes=(), mutates=(), work=())
        arguments, aliased = _schema_of(func, base)
        mutated: list[TensorRef] = []
        read: list[TensorRef] = []
        for k, (name, writes, is_read) in enumerate(arguments):
            value = args[k] if k < len(args) else kwargs.get(name)
            tensors = _tensors_in(value)
            if writes:
                mutated += map(_ref, tensors)
            if is_read:
                read += map(_ref, tensors)
        outs = [out] if isinstance(out, torch.Tensor) else tree_flatten(out)[0]
        fresh = [_ref(t) for t, alias in zip(outs, aliased + (False,) * len(outs), strict=False)
                 if isinstance(t, torch.Tensor) and not alias]
        kind, work = self._count(func, base, args, kwargs, out, read, [*fresh, *mutated])
        return TracedOp(index=len(self.ops), name=str(func), kind=kind, reads=tuple(read),
                        writes=tuple(dict.fromkeys([*fresh, *mutated])),
                        mutates=tuple(mutated), work=tuple(work))

    def _count(self, func: Any, base: str, args: Any, kwargs: Any, out: Any,
               read: list[TensorRef], written: list[TensorRef]) -> tuple[str, list[Work]]:
        label = f"{len(self.ops)} {func}"
        if func._overloadpacket in flop_counter.flop_registry:
            flops = flop_counter.flop_registry[func._overloadpacket](*args, **kwargs,
                                                                     out_val=out)
            unit = self.unit_of.get("contraction") or self._contraction_unit(func, read)
            return "contraction", [Work(unit, "contraction", float(flops), label)]
        if base in MOVEMENT_OPS:
            return "movement", []
        mix = OP_CLASS_TABLE.get(base) or TRACED_ONLY_OPS.get(base)
        if mix is None:
            return "uncounted", []
        if base == "pow":
            mix = {_A if _integer_exponent(args) else _T: 1}
        elements = max((math.prod(r.shape) for r in [*read, *written]), default=0)
        return "counted", [Work(self.unit_of[c], c, float(n * elements), label)
                           for c, n in mix.items()]

    def _contraction_unit(self, func: Any, read: list[TensorRef]) -> str:
        """The operator library's map (`ops._common.contraction_unit`); a dtype it has no
        unit for is an error naming the op, never an invented unit key."""
        dtype = read[0].dtype if read else "fp32"
        return contraction_unit(dtype, f"trace {func}", allow_tf32=self.tf32)


def _integer_exponent(args: Any) -> bool:
    exponent = args[1] if len(args) > 1 else None
    return isinstance(exponent, (int, float)) and float(exponent).is_integer()


def _build(title: str, args: list[_Arg], outputs: list[tuple[str, TensorRef]],
           ops: tuple[TracedOp, ...], roof: str | None,
           unit_of: Mapping[str, str]) -> tuple[Ledger, Ledger]:
    kernels = [op for op in ops if op.launches_kernel]
    work = tuple(w for op in kernels for w in op.work)
    roof = roof or _default_roof(work, unit_of)
    uncounted = sorted({op.name for op in ops if op.kind == "uncounted"})
    notes = (f"traced from PyTorch: {len(kernels)} kernel op(s), {len(ops) - len(kernels)} "
             "view op(s)",
             *([f"uncounted aten ops (no FLOPs counted): {', '.join(uncounted)}"]
               if uncounted else []))
    names = _Namer(args, outputs, ops)
    fused = Ledger(name=title, roof=roof, tensors=_fused_tensors(args, outputs, kernels, names),
                   work=work, notes=notes)
    calls = [_op_ledger(op, names, roof) for op in kernels]
    unfused = separate(f"{title} (unfused, {len(calls)} calls)", calls, roof=roof)
    unfused = Ledger(unfused.name, unfused.roof, unfused.tensors, unfused.work, unfused.calls,
                     unfused.stages, notes)
    return fused, unfused


def _default_roof(work: tuple[Work, ...], unit_of: Mapping[str, str]) -> str:
    contraction: dict[str, float] = {}
    for w in work:
        if w.op_class == "contraction":
            contraction[w.unit] = contraction.get(w.unit, 0.0) + w.ops
    return max(contraction, key=lambda u: contraction[u]) if contraction else unit_of[_A]


class _Namer:
    """Stable names: arguments by parameter name, outputs by output name, the rest t0, t1..."""

    def __init__(self, args: list[_Arg], outputs: list[tuple[str, TensorRef]],
                 ops: tuple[TracedOp, ...]) -> None:
        self.args = args
        self.outputs = outputs
        self._by_storage: dict[int, str] = {}
        for op in ops:
            for w in op.writes:
                if w.storage not in self._by_storage and self._arg(w) is None:
                    self._by_storage[w.storage] = f"t{len(self._by_storage)}"

    def _arg(self, ref: TensorRef) -> _Arg | None:
        hits = [a for a in self.args if a.ref.overlaps(ref)]
        return hits[0] if hits else None

    def args_touched(self, ref: TensorRef) -> list[_Arg]:
        return [a for a in self.args if a.ref.overlaps(ref)]

    def name(self, ref: TensorRef) -> tuple[str, bool]:
        """(name, is a lookup argument)."""
        arg = self._arg(ref)
        if arg is not None:
            return arg.name, arg.lookup
        for out_name, out in self.outputs:
            if out.overlaps(ref):
                return out_name, False
        if ref.storage not in self._by_storage:  # a tensor the function captured, not an arg
            self._by_storage[ref.storage] = f"captured{len(self._by_storage)}"
        return self._by_storage[ref.storage], False


def _fused_tensors(args: list[_Arg], outputs: list[tuple[str, TensorRef]],
                   kernels: list[TracedOp], names: _Namer) -> tuple[Tensor, ...]:
    read: set[str] = set()
    written: set[str] = set()
    # an `out=` argument the op resized (the profiler records `arange.start_out`'s out as the
    # empty [0] it was passed; the op wrote 512 elements into it): charged as written
    grown: dict[str, TensorRef] = {}
    captured: dict[str, TensorRef] = {}
    produced = {w.storage for op in kernels for w in op.writes if not names.args_touched(w)}
    for op in kernels:
        for r in op.reads:
            touched = names.args_touched(r)
            read.update(a.name for a in touched)
            if not touched and r.storage not in produced:
                captured.setdefault(names.name(r)[0], r)
        for w in op.mutates:
            for a in names.args_touched(w):
                written.add(a.name)
                if w.nbytes > grown.get(a.name, a.ref).nbytes:
                    grown[a.name] = w
    tensors: list[Tensor] = []
    for a in args:
        if a.name in written:
            role = Role.INOUT if a.name in read else Role.OUTPUT
        elif a.name in read:
            role = Role.LOOKUP if a.lookup else Role.INPUT
        else:
            continue  # never read: not charged
        tensors.append(_tensor(a.name, grown.get(a.name, a.ref), role))
    tensors += [_tensor(n, r, Role.INPUT) for n, r in captured.items()]
    seen: set[TensorRef] = set()
    for out_name, ref in outputs:
        if ref in seen or names.args_touched(ref):
            continue  # the same tensor twice, or an argument passed through (charged above)
        seen.add(ref)
        tensors.append(_tensor(out_name, ref, Role.OUTPUT))
    return tuple(tensors)


def _op_ledger(op: TracedOp, names: _Namer, roof: str) -> Ledger:
    tensors: dict[str, Tensor] = {}
    mutated = set(op.mutates)
    for ref in op.reads:
        if ref in mutated:
            continue
        name, lookup = names.name(ref)
        key = _unique(name, ref, tensors)
        tensors[key] = _tensor(key, ref, Role.LOOKUP if lookup else Role.INPUT)
    for ref in op.writes:
        name, _ = names.name(ref)
        key = _unique(name, ref, tensors)
        in_place = ref in mutated and ref in op.reads
        tensors[key] = _tensor(key, ref, Role.INOUT if in_place else Role.OUTPUT)
    op_roof = op.work[0].unit if op.work else roof
    return Ledger(name=f"{op.index} {op.name}", roof=op_roof, tensors=tuple(tensors.values()),
                  work=op.work)


def _unique(name: str, ref: TensorRef, taken: Mapping[str, Tensor]) -> str:
    return name if name not in taken else f"{name}@{ref.offset}:{'x'.join(map(str, ref.shape))}"


def _tensor(name: str, ref: TensorRef, role: Role) -> Tensor:
    return Tensor(name=name, shape=ref.distinct_shape, dtype=ref.dtype, role=role)
