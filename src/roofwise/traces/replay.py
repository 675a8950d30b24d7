"""Replay one recorded aten op on meta tensors through the tracer (`capture/tracer.py`).

The profiler keeps each argument's shape and type, and with newer PyTorch the concrete value of
small arguments (dims, flags, scalars). Tensors become meta tensors of the recorded shape and
dtype, recorded scalars are passed as they were, each by its schema name where the schema
has it keyword-only (`schemas.py`), to the overload the recorded list fits; without recorded
values, only the arguments up to the last tensor are passed (scalars as 1, others as None),
which is enough for most elementwise and reduction ops. What the tracer cannot count is
unpriced, never guessed: an op that fails to replay, or whose aten ops the tracer has no
count for; the reason is the error's first sentence, whole.
"""

from __future__ import annotations

from typing import Any

from roofwise.traces.aten import Call, OpPrice, unpriced
from roofwise.traces.schemas import UNKNOWN, Bound, TensorArg, bind

_TORCH_DTYPES = {
    "fp32": "float32", "fp64": "float64", "fp16": "float16", "bf16": "bfloat16",
    "int64": "int64", "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8",
    "bool": "bool", "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2",
    "float8_e4m3fnuz": "float8_e4m3fnuz", "float8_e5m2fnuz": "float8_e5m2fnuz",
}


# Outputs one replayed op may make: each is a Python tensor object (~1 kB); an unbind over a
# dimension of 20 million would take gigabytes for an op that moves no byte (a view).
MAX_REPLAY_OUTPUTS = 65536
_SPLITS = frozenset(("split", "unsafe_split", "split_copy", "unsafe_split_copy"))
_CHUNKS = frozenset(("chunk", "unsafe_chunk", "tensor_split"))


def _outputs(call: Call) -> int:
    """How many tensors the op returns, at most, for the ops whose count comes from a size or
    an argument (unbind, split, chunk); 1 for the rest."""
    base = call.base.removesuffix("_")
    shape = call.shape(0) if call.is_tensor(0) else ()
    if base not in {"unbind", "unbind_copy", "split_with_sizes", *_SPLITS, *_CHUNKS}:
        return 1
    dim = call.value(2 if base not in ("unbind", "unbind_copy") else 1)
    dim = dim if isinstance(dim, int) and shape and -len(shape) <= dim < len(shape) else 0
    size = shape[dim] if shape else 0
    how = call.value(1)
    if base in ("unbind", "unbind_copy"):
        return size
    if isinstance(how, list):
        return len(how) + (1 if base == "tensor_split" else 0)
    if isinstance(how, int) and not isinstance(how, bool) and how > 0:
        if base in _SPLITS:
            return -(-size // how)
        return how if base == "tensor_split" else min(how, max(size, 1))
    return size  # not recorded: at most one per element along the dim


def replay_call(call: Call, allow_tf32: bool = False) -> OpPrice:
    namespace, _, op_name = call.name.partition("::")
    if namespace != "aten" or not op_name:
        return unpriced(f"not an aten op (custom or compiled kernel: {call.name})")
    try:
        import torch

        from roofwise.capture.tracer import trace  # deferred: torch
    except ImportError:
        return unpriced("not in the operator library; replaying it needs torch "
                        "(pip install 'roofwise[gpu]')")
    packet = getattr(torch.ops.aten, op_name, None)
    if packet is None:
        return unpriced(f"no aten op {op_name} in this PyTorch")
    outputs = _outputs(call)
    if outputs > MAX_REPLAY_OUTPUTS:
        return unpriced(f"a replay would build {outputs:,} output tensors (more than "
                        f"{MAX_REPLAY_OUTPUTS:,}); not replayed")
    bound = bind(call.name, call.dims, call.types, call.concrete, strides=call.strides)
    if isinstance(bound, Bound):
        target = getattr(packet, bound.schema.overload or "default", packet)
        found = _bound_arguments(call, bound, torch)
    else:
        target, found = packet, _arguments(call, torch)
    if isinstance(found, str):
        return unpriced(found)
    args, kwargs = found

    def run(*tensors: Any, **named: Any) -> Any:
        return target(*tensors, **named)

    try:
        traced = trace(run, *args, name=call.base, tf32=allow_tf32, example_kwargs=kwargs)
    except Exception as exc:  # any failure of the replay leaves the op unpriced, with why
        return unpriced(f"meta-tensor replay failed: {first_sentence(exc)}")
    if traced.uncounted:
        return unpriced(f"the tracer has no count for {', '.join(traced.uncounted)}")
    return OpPrice(traced.fused, "tracer")


def first_sentence(exc: BaseException) -> str:
    """The error's first sentence, whole (a torch message's first line may end in ':' before
    a list of schemas: the sentence is then the line, said to be cut short there)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    cut = text.find(". ")
    if cut > 0:
        text = text[:cut + 1]
    text = text.rstrip(":").rstrip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _bound_arguments(call: Call, bound: Bound, torch: Any
                     ) -> tuple[list[Any], dict[str, Any]] | str:
    """Positional and keyword arguments for the overload the recorded list fits: recorded
    values as they were, keyword-only ones by name, unrecorded ones as the schema's defaults
    (or 1 for a scalar, None for the rest)."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for i, arg in enumerate(bound.schema.args):
        if i >= len(call.types):
            break  # the trace's PyTorch had no such argument: this one's default
        value = bound.values.get(arg.name)
        if isinstance(value, TensorArg):
            dtype = getattr(torch, _TORCH_DTYPES.get(value.dtype or "", ""), None)
            if dtype is None:
                return f"dtype {value.type_text} has no torch equivalent here"
            value = _meta_tensor(torch, value, dtype)
        elif arg.base == "Tensor" and arg.is_list and value is UNKNOWN:
            return "a list of tensors whose shapes the profiler did not record"
        elif value is UNKNOWN:
            if arg.kwarg_only:
                continue
            value = arg.default if arg.has_default and arg.default is not UNKNOWN else (
                1 if call.types[i] == "Scalar" else None)
        if arg.kwarg_only:
            kwargs[arg.name] = value
        else:
            args.append(value)
    return args, kwargs



def _arguments(call: Call, torch: Any) -> tuple[list[Any], dict[str, Any]] | str:
    """Positional arguments for the replay, or a string saying why there are none."""
    tensors = call.tensor_positions()
    recorded = any(call.concrete)
    last = len(call.types) if recorded else max(tensors) + 1
    args: list[Any] = []
    for i in range(last):
        kind = call.types[i]
        if i in tensors:
            dtype = getattr(torch, _TORCH_DTYPES.get(call.dtype(i), ""), None)
            if dtype is None:
                return f"dtype {call.dtype(i)} has no torch equivalent here"
            strides = call.strides[i] if i < len(call.strides) else None
            args.append(_meta_tensor(torch, TensorArg(call.shape(i), kind, strides), dtype))
        elif kind in ("TensorList", "GenericList"):
            return "a list of tensors whose shapes the profiler did not record"
        else:
            value = call.value(i)
            args.append(1 if value is None and kind == "Scalar" else value)
    return args, {}


def _meta_tensor(torch: Any, arg: TensorArg, dtype: Any) -> Any:
    """A meta tensor of the recorded shape, expanded where the recorded strides are 0, so
    that the tracer reads what the op read (one element along a broadcast dimension)."""
    read = arg.read_shape
    tensor = torch.empty(read, dtype=dtype, device="meta")
    return tensor if read == arg.shape else tensor.expand(arg.shape)
