"""A recorded op's arguments read against its operator schema, by name, never by position.

The profiler records every argument of the schema the op was dispatched with, in schema
order (keyword-only ones included): per argument a type (`Input type`: a dtype name for a
tensor, "Scalar", "ScalarList", "TensorList", or "" for None and for what it does not
record), a shape (`Input Dims`) and, in newer PyTorch, the value of small arguments
(`Concrete Inputs`). Reading `dim` as "the argument after the first tensor" breaks as soon as
an op's schema has something else there (`linalg_vector_norm(self, ord, dim, keepdim)`), so
each recorded list is matched against the op's overloads: the first whose every argument
fits the recorded one names them. A list that fits no overload is not guessed at: the op
is left blank with the reason.

Schemas come from `schema_table.py`, generated from torch's own schemas by
`scripts/gen_schema_table.py` for the ops roofwise prices without torch (and the
`flash_attn` package's ops, which torch does not know), and, where another torch than the
one that wrote the table is installed, from it too (`torch._C._jit_get_schemas_for_operator`):
a trace may come from either's PyTorch, and the first overload that fits is the one read.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from roofwise.traces.schema_table import SCHEMAS, TORCH_VERSION

# The profiler's `Input type` strings -> roofwise dtypes (anything else is not a tensor).
TRACE_DTYPES = {
    "float": "fp32", "double": "fp64", "c10::Half": "fp16", "c10::BFloat16": "bf16",
    "half": "fp16", "bfloat16": "bf16", "long": "int64", "long int": "int64", "int": "int32",
    "short": "int16", "signed char": "int8", "unsigned char": "uint8", "bool": "bool",
    "c10::Float8_e4m3fn": "fp8_e4m3", "c10::Float8_e5m2": "fp8_e5m2",
    "c10::Float8_e4m3fnuz": "float8_e4m3fnuz", "c10::Float8_e5m2fnuz": "float8_e5m2fnuz",
}
# The profiler's `Input type` strings that are not a tensor's dtype.
NOT_TENSOR_TYPES = frozenset(("", "Scalar", "ScalarList", "TensorList", "GenericList"))
# Schema types whose values are ints at the dispatcher (enums included).
# PyTorch 1.8-1.9 wrote a value argument's IValue tag instead ("Int" for `Scalar alpha` and
# `int dim` alike, "GenericList" for an int[]): read as the 2.x profiler's words for them.
_OLD_VALUE_TAGS = {"Int": "Scalar", "Double": "Scalar", "Bool": "Scalar"}
_INT_TYPES = frozenset(("int", "SymInt", "ScalarType", "Layout", "MemoryFormat"))
_NUMBER_TYPES = frozenset(("float", "Scalar", "complex"))
# Ops of these namespaces are one op under two spellings (the flash-attn package renamed its
# `flash_attn::` custom ops `flashattn::`); the table keeps the newer one.
_NAMESPACE_ALIASES = {"flash_attn": "flashattn"}


class _Unknown:
    """The value of an argument the profiler did not record (no Concrete Inputs)."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Any = _Unknown()


@dataclass(frozen=True)
class Arg:
    """One schema argument: `int[1]? dim=None` is name "dim", base "int", a list of 1."""

    name: str
    type_text: str
    base: str  # the element type, without alias annotation, list or optional marks
    optional: bool
    is_list: bool
    has_default: bool
    default: Any  # parsed default, UNKNOWN where the text is not a literal
    kwarg_only: bool
    mutable: bool  # `Tensor(a!)`: written in place or an out= buffer

    @property
    def is_tensor(self) -> bool:
        return self.base == "Tensor" and not self.is_list


@dataclass(frozen=True)
class Schema:
    name: str  # "aten::sum"
    overload: str  # "dim_IntList", "" for the default overload
    args: tuple[Arg, ...]
    text: str

    @property
    def full_name(self) -> str:
        return f"{self.name}.{self.overload}" if self.overload else self.name


@dataclass(frozen=True)
class TensorArg:
    """A recorded tensor argument: its shape and its dtype (None when unknown to roofwise)."""

    shape: tuple[int, ...]
    type_text: str
    strides: tuple[int, ...] | None = None  # `Input Strides`, where the trace records them

    @property
    def dtype(self) -> str | None:
        return TRACE_DTYPES.get(self.type_text)

    @property
    def read_shape(self) -> tuple[int, ...]:
        """The shape of what a kernel reads of this tensor: a dimension of stride 0 (an
        `expand`ed tensor, a broadcast gradient) repeats one element, so it counts once. The
        logical shape where no strides were recorded, or they do not fit the shape."""
        strides = self.strides
        if strides is None or len(strides) != len(self.shape) or 0 not in strides:
            return self.shape
        return tuple(1 if s == 0 else d for d, s in zip(self.shape, strides, strict=True))


@dataclass(frozen=True)
class Bound:
    """A recorded call's arguments by schema name: TensorArg, a value, None, or UNKNOWN."""

    schema: Schema
    values: Mapping[str, Any]

    def tensor(self, name: str) -> TensorArg | None:
        value = self.values.get(name)
        return value if isinstance(value, TensorArg) else None

    def value(self, name: str, default: Any = UNKNOWN) -> Any:
        """The recorded value; `default` when not recorded (or when the schema has no such
        argument); the schema's own default when the trace's PyTorch did not pass it."""
        value = self.values.get(name, default)
        return default if value is UNKNOWN else value

    def tensors(self, inputs_only: bool = True) -> list[tuple[Arg, TensorArg]]:
        """The recorded tensors in schema order; inputs only leaves out out= buffers."""
        found = []
        for arg in self.schema.args:
            value = self.values.get(arg.name)
            if isinstance(value, TensorArg) and not (inputs_only and arg.kwarg_only
                                                     and arg.mutable):
                found.append((arg, value))
        return found

    def out_buffers(self) -> list[TensorArg]:
        return [t for a, t in self.tensors(inputs_only=False) if a.kwarg_only and a.mutable]


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets, parentheses and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts


def _default(text: str) -> Any:
    mapping = {"None": None, "True": True, "False": False, "inf": math.inf, "-inf": -math.inf}
    if text in mapping:
        return mapping[text]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return UNKNOWN  # e.g. contiguous_format, Mean: an enum the trace records as an int


@lru_cache(maxsize=4096)
def parse_schema(text: str) -> Schema:
    """A schema from its text as torch prints it: `ns::name.overload(args) -> returns`."""
    head, _, rest = text.partition("(")
    depth, end = 1, 0
    for i, ch in enumerate(rest):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            end = i
            break
    name, _, overload = head.strip().partition(".")
    args: list[Arg] = []
    kwarg_only = False
    for part in _split_top(rest[:end]):
        if part == "*":
            kwarg_only = True
            continue
        declared, _, default_text = part.partition("=")
        type_text, _, arg_name = declared.strip().rpartition(" ")
        mutable = "!" in type_text
        bare = type_text.split("(")[0] + (type_text.split(")")[-1] if "(" in type_text else "")
        optional = bare.endswith("?")
        bare = bare.rstrip("?")
        is_list = bare.endswith("]")
        base = bare.split("[")[0].rstrip("?")
        optional = optional or type_text.rstrip().endswith("?")
        has_default = bool(default_text)
        args.append(Arg(arg_name, type_text, base, optional, is_list, has_default,
                        _default(default_text.strip()) if has_default else UNKNOWN,
                        kwarg_only, mutable))
    return Schema(name, overload, tuple(args), text)


def _torch_version() -> str:
    """The installed torch's version without importing it (an import takes seconds)."""
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python 3.8+
        return ""
    try:
        return version("torch")
    except PackageNotFoundError:
        return ""


@lru_cache(maxsize=4096)
def _torch_schemas(name: str) -> tuple[str, ...]:
    """torch's own schemas of `name`, where torch is installed; () where it is not."""
    if not _torch_version():
        return ()
    try:
        import torch  # deferred: torch is optional and slow to import
    except ImportError:
        return ()
    try:
        return tuple(str(s) for s in torch._C._jit_get_schemas_for_operator(name))
    except Exception:  # an op name torch cannot look up: no schema from torch
        return ()


def canonical_name(name: str) -> str:
    namespace, sep, op = name.partition("::")
    return f"{_NAMESPACE_ALIASES.get(namespace, namespace)}{sep}{op}"


# ops of PyTorch 1.x that today's aten no longer has, as PyTorch 1.9 declared them
# (aten/src/ATen/native/native_functions.yaml, v1.9.0): a 1.x trace binds them like any op
LEGACY_SCHEMAS: dict[str, tuple[str, ...]] = {
    "aten::cudnn_convolution_backward_input": (
        "aten::cudnn_convolution_backward_input(int[] self_size, Tensor grad_output, "
        "Tensor weight, int[] padding, int[] stride, int[] dilation, int groups, "
        "bool benchmark, bool deterministic, bool allow_tf32) -> Tensor",),
}


@lru_cache(maxsize=8192)
def schemas_for(name: str, use_torch: bool = True) -> tuple[Schema, ...]:
    """The overloads of op `name` (e.g. "aten::sum"): the shipped table's, then, where
    torch is installed and wanted, torch's own that the table lacks (the trace may come from
    another PyTorch than either)."""
    name = canonical_name(name)
    texts = list(SCHEMAS.get(name, ()))
    # the very torch the table was written from adds nothing to the table's ops
    if use_torch and (not texts or _torch_version() != TORCH_VERSION):
        texts += [t for t in _torch_schemas(name) if t not in texts]
    if not texts:  # an op PyTorch dropped: as the PyTorch that wrote the trace declared it
        texts = list(LEGACY_SCHEMAS.get(name, ()))
    return tuple(parse_schema(t) for t in texts)


def recorded_value(text: str) -> Any:
    """A Concrete Inputs entry parsed: numbers, bools and lists as Python values, else text."""
    if text in ("inf", "-inf", "nan"):
        return float(text)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return text


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, complex)) and not isinstance(x, bool)


def _fits_scalar(base: str, value: Any) -> bool:
    if base in _INT_TYPES:
        return _is_int(value)
    if base == "float":
        return _is_number(value) and not isinstance(value, complex)
    if base in ("Scalar", "complex"):
        return _is_number(value) or isinstance(value, bool)
    if base == "bool":
        return isinstance(value, bool)
    if base == "str":
        return isinstance(value, str)
    return True  # Device, Generator, Dimname, ...: whatever the profiler made of it


def _describe(kind: str, dims: Any, concrete: str) -> str:
    kind = _OLD_VALUE_TAGS.get(kind, kind)
    if kind in NOT_TENSOR_TYPES:
        what = {"": "nothing", "Scalar": "a scalar", "ScalarList": "a list of scalars",
                "TensorList": "a list of tensors", "GenericList": "a list"}[kind]
        return f"{what} {concrete}" if concrete else what
    return f"a tensor of type {kind} and shape {list(dims) if dims is not None else '?'}"


def _bind_one(arg: Arg, dims: tuple[int, ...] | None, kind: str, concrete: str,
              strides: tuple[int, ...] | None = None) -> tuple[bool, Any]:
    """Whether one recorded argument fits its schema argument, and its value if so."""
    kind = _OLD_VALUE_TAGS.get(kind, kind)
    if arg.base == "Tensor" and arg.is_list:
        return kind in ("TensorList", "GenericList", ""), UNKNOWN
    if arg.is_tensor:
        if kind == "":
            return dims in (None, ()), None  # None or an undefined tensor
        if kind in NOT_TENSOR_TYPES or dims is None:
            return False, None
        return True, TensorArg(dims, kind, strides)
    if kind not in ("", "Scalar", "ScalarList") and not (kind == "GenericList" and arg.is_list):
        return False, None  # a tensor where the schema wants a value
    if concrete == "":
        # Not recorded: None, or a value the profiler does not record (strings, devices)
        return True, UNKNOWN
    value = recorded_value(concrete)
    if arg.is_list:
        if _is_int(value) and arg.base in _INT_TYPES:  # int[1] takes a bare int
            return True, [value]
        ok = isinstance(value, (list, tuple)) and all(_fits_scalar(arg.base, x) for x in value)
        return ok, list(value) if ok else None
    return _fits_scalar(arg.base, value), value


def bind_schema(schema: Schema, dims: Sequence[tuple[int, ...] | None], types: Sequence[str],
                concrete: Sequence[str], strides: Sequence[tuple[int, ...] | None] = ()
                ) -> Bound | str:
    """The recorded arguments named by `schema`, or why they do not fit it."""
    recorded = len(types)
    if recorded > len(schema.args):
        return (f"{recorded} arguments were recorded where {schema.full_name} takes "
                f"{len(schema.args)}")
    values: dict[str, Any] = {}
    for i, arg in enumerate(schema.args):
        if i >= recorded:  # the trace's PyTorch had no such argument yet: its default
            if not arg.has_default and not arg.kwarg_only:
                return f"argument {arg.name} of {schema.full_name} was not recorded"
            values[arg.name] = arg.default if arg.has_default else UNKNOWN
            continue
        d = dims[i] if i < len(dims) else None
        text = concrete[i] if i < len(concrete) else ""
        ok, value = _bind_one(arg, d, types[i], text, strides[i] if i < len(strides) else None)
        if not ok:
            return (f"argument {i} ({arg.type_text} {arg.name}) of {schema.full_name} was "
                    f"recorded as {_describe(types[i], d, text)}")
        values[arg.name] = value
    return Bound(schema, values)


def bind(name: str, dims: Sequence[tuple[int, ...] | None], types: Sequence[str],
         concrete: Sequence[str], use_torch: bool = True,
         strides: Sequence[tuple[int, ...] | None] = ()) -> Bound | str:
    """The recorded arguments of op `name` bound to the first overload they fit (one that
    takes exactly as many arguments first; then an out= overload with its outputs recorded
    first, as PyTorch 1.x's profiler wrote them, in C++ argument order), or a sentence saying
    why none fits."""
    shipped = schemas_for(name, use_torch=False)
    found = _bind_first(name, shipped, dims, types, concrete, strides) if shipped else None
    if isinstance(found, Bound) or not use_torch:
        return found or f"no schema for {name} is known here"
    # torch's own schemas, imported only when the shipped ones do not fit (an import of
    # torch takes seconds): another PyTorch than the table's may know the recorded form
    more = tuple(s for s in schemas_for(name, use_torch=True) if s not in shipped)
    if not more:
        return found or f"no schema for {name} is known here"
    return _bind_first(name, shipped + more, dims, types, concrete, strides)


def _bind_first(name: str, schemas: tuple[Schema, ...],
                dims: Sequence[tuple[int, ...] | None], types: Sequence[str],
                concrete: Sequence[str], strides: Sequence[tuple[int, ...] | None] = ()
                ) -> Bound | str:
    most = max(len(s.args) for s in schemas)
    if len(types) > most:
        return (f"{len(types)} arguments were recorded where every schema of {name} takes at "
                f"most {most}")
    # exact counts first, then the overloads that take the fewest more than were recorded
    ordered = sorted(schemas, key=lambda s: (len(s.args) < len(types),
                                             abs(len(s.args) - len(types))))
    reasons = []
    for schema in ordered:
        bound = bind_schema(schema, dims, types, concrete, strides)
        if isinstance(bound, Bound):
            return bound
        reasons.append(bound)
    for schema in ordered:  # PyTorch 1.x recorded an out= variant's outputs first
        outs = sum(1 for a in schema.args if a.kwarg_only and a.mutable)
        if outs and len(types) == len(schema.args) and all(
                a.kwarg_only and a.mutable for a in schema.args[-outs:]):
            bound = bind_schema(schema, [*dims[outs:], *dims[:outs]],
                                [*types[outs:], *types[:outs]],
                                [*concrete[outs:], *concrete[:outs]] if concrete else (),
                                [*strides[outs:], *strides[:outs]] if strides else ())
            if isinstance(bound, Bound):
                return bound
    return (f"its recorded arguments fit none of the {len(schemas)} schemas of {name} "
            f"({reasons[0]})")
