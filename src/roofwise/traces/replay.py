"""Replay one recorded aten op on meta tensors through the tracer (`capture/tracer.py`).

The profiler keeps each argument's shape and type, and with newer PyTorch the concrete value of
small arguments (dims, flags, scalars). Tensors become meta tensors of the recorded shape and
dtype, recorded scalars are passed as they were; without recorded values, only the arguments
up to the last tensor are passed (scalars as 1, others as None), which is enough for most
elementwise and reduction ops. What the tracer cannot count is unpriced, never guessed: an op
that fails to replay, or whose aten ops the tracer has no count for.
"""

from __future__ import annotations

from typing import Any

from roofwise.traces.aten import Call, OpPrice, unpriced

_TORCH_DTYPES = {
    "fp32": "float32", "fp64": "float64", "fp16": "float16", "bf16": "bfloat16",
    "int64": "int64", "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8",
    "bool": "bool", "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2",
    "float8_e4m3fnuz": "float8_e4m3fnuz", "float8_e5m2fnuz": "float8_e5m2fnuz",
}


def replay_call(call: Call, allow_tf32: bool = False) -> OpPrice:
    namespace, _, op_name = call.name.partition("::")
    if namespace != "aten" or not op_name:
        return unpriced(f"not an aten op (custom or compiled kernel: {call.name})")
    try:
        import torch

        from roofwise.capture.tracer import trace
    except ImportError:
        return unpriced("not in the operator library; replaying it needs torch "
                        "(pip install 'roofwise[gpu]')")
    packet = getattr(torch.ops.aten, op_name, None)
    if packet is None:
        return unpriced(f"no aten op {op_name} in this PyTorch")
    args = _arguments(call, torch)
    if isinstance(args, str):
        return unpriced(args)

    def run(*tensors: Any) -> Any:
        return packet(*tensors)

    try:
        traced = trace(run, *args, name=call.base, tf32=allow_tf32)
    except Exception as exc:  # any failure of the replay leaves the op unpriced, with why
        text = (str(exc).splitlines() or [type(exc).__name__])[0][:120]
        return unpriced(f"meta-tensor replay failed ({text})")
    if traced.uncounted:
        return unpriced(f"the tracer has no count for {', '.join(traced.uncounted)}")
    return OpPrice(traced.fused, "tracer")


def _arguments(call: Call, torch: Any) -> list[Any] | str:
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
            args.append(torch.empty(call.shape(i), dtype=dtype, device="meta"))
        elif kind in ("TensorList", "GenericList"):
            return "a list of tensors whose shapes the profiler did not record"
        else:
            value = call.value(i)
            args.append(1 if value is None and kind == "Scalar" else value)
    return args
