"""The ledger of one aten op as a profiler recorded it: its name, input shapes and dtypes.

In order of preference:
1. the operator library, for the ops it knows (mm, addmm, bmm, baddbmm, linear, matmul,
   `_scaled_mm`, scaled-dot-product attention, convolution, layer norm and its backward,
   RMS norm, softmax, MSE loss and its backward, a 1-D index_select): the same counts
   `roofwise price` uses;
2. elementwise ops and reductions by class (`ops/classes.py`), torch-free: inputs read once,
   the (broadcast) output written once, work per element;
3. the meta-tensor tracer replaying the aten op with the recorded shapes, dtypes and (where
   the profiler kept them) concrete arguments (`replay.py`, needs torch; `prices.py` tries
   it after this module);
4. otherwise unpriced, with the reason. An unpriced op's time is still counted.

fp32 contractions are priced on the CUDA cores unless `allow_tf32` (PyTorch's default for
matmul is no TF32); the trace does not say which the program chose.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from roofwise.base.errors import InputError
from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work
from roofwise.ops import _common as c
from roofwise.ops.attention import attention
from roofwise.ops.classes import (
    MOVEMENT_OPS,
    OP_CLASS_TABLE,
    REDUCTION_OPS,
    TERNARY_OPS,
    UNARY_OPS,
    VIEW_OPS,
)
from roofwise.ops.conv import conv
from roofwise.ops.gemm import batched_gemm
from roofwise.ops.norms import layernorm, layernorm_backward, rmsnorm, softmax

# The profiler's `Input type` strings -> roofwise dtypes (anything else is not a tensor).
TRACE_DTYPES = {
    "float": "fp32", "double": "fp64", "c10::Half": "fp16", "c10::BFloat16": "bf16",
    "half": "fp16", "bfloat16": "bf16", "long": "int64", "long int": "int64", "int": "int32",
    "short": "int16", "signed char": "int8", "unsigned char": "uint8", "bool": "bool",
    "c10::Float8_e4m3fn": "fp8_e4m3", "c10::Float8_e5m2": "fp8_e5m2",
    "c10::Float8_e4m3fnuz": "float8_e4m3fnuz", "c10::Float8_e5m2fnuz": "float8_e5m2fnuz",
}
MAX_DIM = 1 << 48  # one dimension of a recorded shape: beyond it no tensor fits any memory, so
#                  the list is not a shape (its op is unpriced, not counted in overflowing units)
MAX_RANK = 16  # dimensions of one shape (PyTorch's CUDA kernels take at most 25): with MAX_DIM,
#                 a tensor's element count stays within a float
_BOOL_RESULT = frozenset(("gt", "lt", "ge", "le", "eq", "ne", "isnan", "isinf", "logical_and",
                          "logical_or", "logical_not"))
# Position of `is_causal` in each attention op's arguments (as the profiler records them).
_ATTENTION_CAUSAL_ARG = {
    "scaled_dot_product_attention": 5, "_scaled_dot_product_flash_attention": 4,
    "_scaled_dot_product_efficient_attention": 6, "_scaled_dot_product_cudnn_attention": 6,
    "_scaled_dot_product_flash_attention_for_cpu": 4,
}
_LAYER_NORMS = frozenset(("layer_norm", "native_layer_norm"))
# Ops whose bytes depend on values a trace never records: said, not guessed (nor replayed).
_UNPRICEABLE = {
    "repeat_interleave": "its output size depends on the repeat counts' values, which a trace "
                         "does not record",
    "_index_put_impl_": "its indices come as a list of tensors, for which the profiler records "
                        "no shapes or dtypes",
    "index_put_": "its indices come as a list of tensors, for which the profiler records no "
                  "shapes or dtypes",
    "nonzero": "its output size depends on the input's values, which a trace does not record",
}
_MSE_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}  # at::Reduction
_RMS_NORMS = frozenset(("rms_norm", "_fused_rms_norm"))
_SOFTMAXES = frozenset(("softmax", "_softmax", "_safe_softmax", "log_softmax", "_log_softmax"))


@dataclass(frozen=True)
class _ConvArgs:
    """Where a convolution op keeps its arguments (None: the op has no such argument)."""

    bias: int | None
    stride: int
    padding: int
    dilation: int
    groups: int
    transposed: int | None = None
    allow_tf32: int | None = None


# aten's signatures: convolution(input, weight, bias, stride, padding, dilation, transposed,
# output_padding, groups); _convolution adds benchmark, deterministic, cudnn_enabled,
# allow_tf32; convNd(input, weight, bias, stride, padding, dilation, groups);
# cudnn_convolution(self, weight, padding, stride, dilation, groups, benchmark, deterministic,
# allow_tf32) (its bias is a separate add op).
_CONV_ARGS = {
    "convolution": _ConvArgs(2, 3, 4, 5, 8, 6),
    "_convolution": _ConvArgs(2, 3, 4, 5, 8, 6, 12),
    **{f"conv{n}d": _ConvArgs(2, 3, 4, 5, 6) for n in (1, 2, 3)},
    "cudnn_convolution": _ConvArgs(None, 3, 2, 4, 5, None, 8),
}


@dataclass(frozen=True)
class OpPrice:
    """How one recorded op is counted: a ledger and where it came from, or why there is none."""

    ledger: Ledger | None
    source: str  # "library", "class", "tracer"; "" when unpriced
    reason: str = ""  # why unpriced, or a caveat of the count

    @property
    def priced(self) -> bool:
        return self.ledger is not None


def unpriced(reason: str) -> OpPrice:
    return OpPrice(None, "", reason)


@dataclass(frozen=True)
class Call:
    """The recorded arguments of one op: shape and type per position, concrete values if any."""

    name: str  # e.g. "aten::mm"
    dims: tuple[tuple[int, ...] | None, ...]  # None where the argument is not a shape
    types: tuple[str, ...]
    concrete: tuple[str, ...]

    @property
    def base(self) -> str:
        return self.name.split("::", 1)[-1]

    def tensor_positions(self) -> list[int]:
        return [i for i, t in enumerate(self.types) if t in TRACE_DTYPES and
                i < len(self.dims) and self.dims[i] is not None]

    def shape(self, i: int) -> tuple[int, ...]:
        dims = self.dims[i] if i < len(self.dims) else None
        return dims if dims is not None else ()

    def dtype(self, i: int) -> str:
        return TRACE_DTYPES[self.types[i]]

    def is_tensor(self, i: int) -> bool:
        return i in self.tensor_positions()

    def value(self, i: int) -> Any:
        """The concrete value of argument i, parsed; None when not recorded."""
        text = self.concrete[i] if i < len(self.concrete) else ""
        if text == "":
            return None
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text


def make_call(name: str, dims: Sequence[Any], types: Sequence[Any],
              concrete: Sequence[Any] = ()) -> Call:
    """A hashable Call from the profiler's lists (dims that are not lists of ints become None)."""
    frozen = (tuple(tuple(d) if isinstance(d, list) else d for d in dims), tuple(types),
              tuple(concrete))
    try:
        return _make_call(name, *frozen)
    except TypeError:  # something unhashable in the record: build it uncached
        return _make_call.__wrapped__(name, *frozen)


@lru_cache(maxsize=65536)
def _make_call(name: str, dims: tuple[Any, ...], types: tuple[Any, ...],
               concrete: tuple[Any, ...]) -> Call:
    shapes: list[tuple[int, ...] | None] = []
    for d in dims:
        ok = isinstance(d, tuple) and len(d) <= MAX_RANK and all(
            type(x) is int and 0 <= x <= MAX_DIM for x in d)
        shapes.append(d if ok else None)
    return Call(name, tuple(shapes), tuple(str(t) for t in types), tuple(str(x) for x in concrete))


@lru_cache(maxsize=65536)
def library_price(call: Call, allow_tf32: bool = False) -> OpPrice | None:
    """The ledger of a recorded op from the operator library (see the module docstring for
    the order tried), an unpriced one saying why it cannot be, or None when the library has no
    ledger for it (`traces.prices` then replays it)."""
    if not call.tensor_positions():
        if "TensorList" in call.types:
            return unpriced("its tensors come as a TensorList, for which the profiler records "
                            "no shapes or dtypes")
        return unpriced("no input shapes recorded (profile with record_shapes=True)"
                        if not call.types else "no tensor inputs with known dtypes recorded")
    if call.base in _UNPRICEABLE:
        return unpriced(_UNPRICEABLE[call.base])
    try:
        return _library(call, allow_tf32) or _by_class(call)
    except InputError as exc:
        return unpriced(f"the operator library refuses its shapes ({exc.problem})")


def _gemm(m: int, n: int, k: int, dtype: str, allow_tf32: bool, batch: int = 1,
          bias: bool = False, name: str = "gemm") -> OpPrice:
    ledger = batched_gemm(batch, m, n, k, dtype=dtype, bias=bias, allow_tf32=allow_tf32)
    return OpPrice(replace(ledger, name=name), "library")


def _with_addend(price: OpPrice, shape: tuple[int, ...], dtype: str) -> OpPrice:
    """A GEMM that adds a full matrix (addmm with a 2-D bias, baddbmm): read it, add per output."""
    assert price.ledger is not None
    ledger = price.ledger
    outputs = math.prod(ledger.tensor("c").shape)
    return OpPrice(replace(ledger, tensors=(*ledger.tensors, Tensor("self", shape, dtype,
                                                                    Role.INPUT)),
                           work=(*ledger.work, Work(c.CUDA, "arithmetic", outputs,
                                                    "beta*self + alpha*(A @ B), 1/output"))),
                   "library")


def _library(call: Call, allow_tf32: bool) -> OpPrice | None:
    base, t = call.base, call.tensor_positions()
    shape, dtype = call.shape, call.dtype
    if base == "mm" and t[:2] == [0, 1] and len(shape(0)) == 2 == len(shape(1)):
        (m, k), (_, n) = shape(0), shape(1)
        return _gemm(m, n, k, dtype(0), allow_tf32, name="mm")
    if base == "addmm" and t[:3] == [0, 1, 2] and len(shape(1)) == 2 == len(shape(2)):
        (m, k), (_, n) = shape(1), shape(2)
        if math.prod(shape(0)) == n:  # (n,) or (1, n): a broadcast bias row
            return _gemm(m, n, k, dtype(1), allow_tf32, bias=True, name="addmm")
        return _with_addend(_gemm(m, n, k, dtype(1), allow_tf32, name="addmm"), shape(0),
                            dtype(0))
    if base == "bmm" and t[:2] == [0, 1] and len(shape(0)) == 3 == len(shape(1)):
        (b, m, k), (_, _, n) = shape(0), shape(1)
        return _gemm(m, n, k, dtype(0), allow_tf32, batch=b, name="bmm")
    if base == "baddbmm" and t[:3] == [0, 1, 2] and len(shape(1)) == 3 == len(shape(2)):
        (b, m, k), (_, _, n) = shape(1), shape(2)
        return _with_addend(_gemm(m, n, k, dtype(1), allow_tf32, batch=b, name="baddbmm"),
                            shape(0), dtype(0))
    if base == "linear" and t[:2] == [0, 1] and len(shape(1)) == 2 and shape(0):
        x, (n, k) = shape(0), shape(1)
        has_bias = 2 in t and math.prod(shape(2)) == n
        return _gemm(math.prod(x[:-1]), n, k, dtype(0), allow_tf32, bias=has_bias,
                     name="linear")
    if base == "matmul" and t[:2] == [0, 1]:
        return _matmul(shape(0), shape(1), dtype(0), allow_tf32)
    if base == "_scaled_mm" and t[:2] == [0, 1] and len(shape(0)) == 2 == len(shape(1)):
        (m, k), (_, n) = shape(0), shape(1)
        row = 2 in t and math.prod(shape(2)) > 1
        ledger = batched_gemm(1, m, n, k, dtype=dtype(0), scale="row" if row else "tensor")
        return OpPrice(replace(ledger, name="_scaled_mm"), "library")
    if base in _ATTENTION_CAUSAL_ARG and t[:3] == [0, 1, 2]:
        return _attention(call)
    if base in _CONV_ARGS and t[:2] == [0, 1]:
        return _convolution(call, _CONV_ARGS[base], allow_tf32)
    if base == "native_layer_norm_backward" and t[:2] == [0, 1] and {3, 4} <= set(t):
        return _layernorm_backward(call)
    if base in ("mse_loss", "mse_loss_backward"):
        return _mse_loss(call)
    if base == "index_select" and t[:1] == [0] and 2 in t:
        return _index_select(call)
    if base in _LAYER_NORMS and t[:1] == [0] and shape(0):
        x = shape(0)
        ledger = layernorm(rows=max(1, math.prod(x[:-1])), hidden=x[-1], dtype=dtype(0),
                           weight=2 in t, bias=3 in t)
        return OpPrice(ledger, "library")
    if base in _RMS_NORMS and t[:1] == [0] and shape(0):
        x = shape(0)
        return OpPrice(rmsnorm(rows=max(1, math.prod(x[:-1])), hidden=x[-1], dtype=dtype(0),
                               weight=2 in t), "library")
    if base in _SOFTMAXES and t[:1] == [0] and shape(0):
        x = shape(0)
        dim = call.value(1)
        cols = x[dim] if isinstance(dim, int) and -len(x) <= dim < len(x) else x[-1]
        if cols == 0 or math.prod(x) == 0:
            return unpriced(f"{base} over an empty tensor {list(x)}: no element to count")
        return OpPrice(replace(softmax(rows=max(1, math.prod(x) // cols), cols=cols,
                                       dtype=dtype(0)), name=base), "library")
    return None


def _convolution(call: Call, where: _ConvArgs, allow_tf32: bool) -> OpPrice:
    """A forward convolution from x (batch, c_in, *spatial) and weight (c_out, c_in/groups,
    *kernel); groups from the shapes, stride/padding/dilation from Concrete Inputs where the
    profiler kept them, else PyTorch's defaults (stride 1, padding 0, dilation 1), said."""
    x, w = call.shape(0), call.shape(1)
    dims = len(x) - 2
    if dims not in (1, 2, 3) or len(w) != len(x) or w[1] == 0 or x[1] % w[1]:
        return unpriced(f"convolution shapes {list(x)} and {list(w)} are not "
                        "(batch, c_in, *spatial) and (c_out, c_in/groups, *kernel)")
    if where.transposed is not None and call.value(where.transposed) is True:
        return unpriced("transposed convolution: the operator library has no ledger for it")
    kernel = tuple(w[2:])
    defaults = {"stride": (1,), "padding": (0,), "dilation": (1,)}
    settings: dict[str, tuple[int, ...]] = {}
    guessed = []
    for name in defaults:
        value = call.value(getattr(where, name))
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if name == "padding" and value == "valid":
            value = [0]
        if name == "padding" and value == "same":
            dilation = call.value(where.dilation)
            dilation = dilation if isinstance(dilation, (list, int)) else 1
            d = [dilation] if isinstance(dilation, int) else list(dilation)
            d = d * dims if len(d) == 1 else d
            if len(d) != dims or not all(isinstance(di, int) for di in d):
                return unpriced(f"padding='same' with dilation {dilation!r}: not one size "
                                f"per spatial dim")
            totals = [di * (k - 1) for di, k in zip(d, kernel, strict=True)]
            if any(total % 2 for total in totals):
                return unpriced("padding='same' with an odd total padding (asymmetric): "
                                "the operator library pads symmetrically")
            value = [total // 2 for total in totals]
        if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
            settings[name] = tuple(value)
        else:
            settings[name] = defaults[name]
            guessed.append(name)
    groups = x[1] // w[1]
    recorded_groups = call.value(where.groups)
    if isinstance(recorded_groups, int) and recorded_groups != groups:
        return unpriced(f"groups={recorded_groups} disagrees with the shapes (c_in {x[1]}, "
                        f"weight c_in/groups {w[1]})")
    has_bias = where.bias is not None and call.is_tensor(where.bias)
    tf32 = call.value(where.allow_tf32) if where.allow_tf32 is not None else None
    ledger = conv(batch=x[0], c_in=x[1], c_out=w[0], spatial=tuple(x[2:]), kernel=kernel,
                  groups=groups, bias=has_bias, dtype=call.dtype(0),
                  allow_tf32=tf32 if isinstance(tf32, bool) else allow_tf32,
                  stride=settings["stride"], padding=settings["padding"],
                  dilation=settings["dilation"])
    note = (f"{', '.join(guessed)} not recorded: counted as PyTorch's default"
            f"{'s' if len(guessed) > 1 else ''} (stride 1, padding 0, dilation 1); the count "
            "may be off either way" if guessed else "")
    return OpPrice(replace(ledger, name=call.base), "library", note)


def _layernorm_backward(call: Call) -> OpPrice | None:
    """native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
    output_mask): rows from the saved mean's size, the normalized width from the input's."""
    x, rows = call.shape(1), math.prod(call.shape(3))
    if not x or rows == 0 or math.prod(x) % rows or call.shape(0) != x:
        return None
    mask = call.value(7)
    wants = mask if isinstance(mask, list) and len(mask) == 3 else [True, True, True]
    ledger = layernorm_backward(rows=rows, hidden=math.prod(x) // rows, dtype=call.dtype(1),
                                weight=call.is_tensor(5) and bool(wants[1]),
                                bias=call.is_tensor(6) and bool(wants[2]),
                                stats_dtype=call.dtype(3))
    note = "" if wants is mask else ("output_mask not recorded: grad_weight and grad_bias "
                                     "counted as written wherever weight and bias are given")
    return OpPrice(replace(ledger, name=call.base), "library", note)


def _mse_loss(call: Call) -> OpPrice | None:
    """mse_loss(self, target, reduction): per element a subtract and a square-accumulate (FMA)
    (a subtract and a square with reduction none); mse_loss_backward(grad, self, target,
    reduction): grad_input = scale * (self - target) * grad, 3 per element."""
    backward = call.base == "mse_loss_backward"
    first = 1 if backward else 0
    if [i for i in call.tensor_positions() if i <= first + 1][-2:] != [first, first + 1]:
        return None
    x, target = call.shape(first), call.shape(first + 1)
    if x != target:
        return None  # broadcasting losses are left to the tracer
    reduction = _MSE_REDUCTIONS.get(call.value(first + 2), "")
    note = "" if reduction else "reduction not recorded: counted as mean, PyTorch's default"
    reduction = reduction or "mean"
    dtype = call.dtype(first)
    tensors = [Tensor("self", x, dtype, Role.INPUT), Tensor("target", x, dtype, Role.INPUT)]
    if backward:
        grad = call.shape(0) if call.is_tensor(0) else ()
        tensors += [Tensor("grad_out", grad, call.dtype(0) if call.is_tensor(0) else dtype,
                           Role.INPUT), Tensor("grad_input", x, dtype, Role.OUTPUT)]
        per_elem, what = 3, "subtract, times scale*grad; 3/elem"
    else:
        tensors.append(Tensor("out", x if reduction == "none" else (), dtype, Role.OUTPUT))
        per_elem = 2 if reduction == "none" else 3
        what = ("subtract, square; 2/elem" if reduction == "none"
                else "subtract, square-accumulate (FMA); 3/elem")
    work = (Work(c.CUDA, "arithmetic", per_elem * math.prod(x), what),)
    return OpPrice(Ledger(call.base, c.CUDA, tuple(tensors), work), "library", note)


def _index_select(call: Call) -> OpPrice | None:
    """index_select(self, dim, index): reads the index and the selected slices of self (never
    more than all of self), writes them. The dim comes from Concrete Inputs, or is 0 for a 1-D
    self; otherwise the op goes to the tracer."""
    x, index = call.shape(0), call.shape(2)
    dim = call.value(1)
    if len(x) == 1 and dim is None:
        dim = 0
    if not isinstance(dim, int) or not -len(x) <= dim < len(x) or len(index) > 1:
        return None
    dim %= len(x)
    out = (*x[:dim], math.prod(index), *x[dim + 1:])
    gathered = min(math.prod(x), math.prod(out))
    tensors = (Tensor("index", index, call.dtype(2), Role.INPUT),
               Tensor("self_selected", (gathered,), call.dtype(0), Role.INPUT),
               Tensor("out", out, call.dtype(0), Role.OUTPUT))
    return OpPrice(Ledger("index_select", c.CUDA, tensors, ()), "library",
                   "self counted as read once per selected element, at most all of self")


def _matmul(a: tuple[int, ...], b: tuple[int, ...], dtype: str,
            allow_tf32: bool) -> OpPrice | None:
    """torch.matmul's cases that are a GEMM or a batched GEMM; the rest go to the tracer."""
    if len(a) >= 2 and len(b) == 2:
        return _gemm(math.prod(a[:-1]), b[1], a[-1], dtype, allow_tf32, name="matmul")
    if len(a) >= 3 and len(b) >= 3 and a[:-2] == b[:-2]:
        return _gemm(a[-2], b[-1], a[-1], dtype, allow_tf32, batch=math.prod(a[:-2]),
                     name="matmul")
    return None


def _attention(call: Call) -> OpPrice | None:
    """SDPA and its flash / efficient / cuDNN forms: q (b, hq, sq, d), k and v (b, hk, skv, d)."""
    q, k = call.shape(0), call.shape(1)
    if len(q) != 4 or len(k) != 4:
        return None
    b, hq, sq, d = q
    hk, skv = k[1], k[2]
    causal = call.value(_ATTENTION_CAUSAL_ARG[call.base])
    note = ""
    if not isinstance(causal, bool):
        causal = True
        note = "is_causal not recorded: counted causal (the smaller count, so SOL stays a bound)"
    ledger = attention(batch=b, q_len=sq, kv_len=skv, q_heads=hq, kv_heads=hk, head_dim=d,
                       causal=causal, dtype=call.dtype(0), kv_dtype=call.dtype(1))
    return OpPrice(replace(ledger, name=call.base), "library", note)


def _by_class(call: Call) -> OpPrice | None:
    """Elementwise ops, reductions and plain copies/fills from their recorded shapes."""
    base = call.base.removesuffix("_")
    in_place = call.base.endswith("_") and not call.base.startswith("_")
    t = call.tensor_positions()
    if base in VIEW_OPS:
        return None  # launches no kernel of its own; the tracer says what it does
    if base in ("copy", "fill", "zero", "clone", "contiguous") and t[:1] == [0]:
        return _movement(call, base)
    if base in MOVEMENT_OPS:
        return None  # its output size depends on arguments the profiler rarely keeps
    mix = OP_CLASS_TABLE.get(base)
    if mix is None or not t:
        return None
    if base in REDUCTION_OPS and len(t) == 1:
        return _reduction(call, base, mix)
    arity = 1 if base in UNARY_OPS else 3 if base in TERNARY_OPS else 2
    inputs, buffers = t[:arity], t[arity:]  # extra tensors: out= buffers, written only
    try:
        out_shape = tuple(int(x) for x in np.broadcast_shapes(*(call.shape(i) for i in inputs)))
    except ValueError:
        shapes = ", ".join(str(list(call.shape(i))) for i in t)
        return unpriced(f"its {len(t)} tensor arguments ({shapes}) do not broadcast as one "
                        f"{base} call; the record does not say how they pair")
    tensors = [Tensor(f"in{j}", call.shape(i), call.dtype(i),
                      Role.INOUT if in_place and j == 0 else Role.INPUT)
               for j, i in enumerate(inputs)]
    if not in_place:
        out_dtype = "bool" if base in _BOOL_RESULT else call.dtype(t[0])
        if buffers and math.prod(call.shape(buffers[0])) == math.prod(out_shape):
            out_dtype = call.dtype(buffers[0])
        tensors.append(Tensor("out", out_shape, out_dtype, Role.OUTPUT))
    elements = math.prod(out_shape)
    return OpPrice(Ledger(base, c.CUDA, tuple(tensors), _class_work(base, mix, elements)),
                   "class")


def _class_work(base: str, mix: dict[str, int], elements: int) -> tuple[Work, ...]:
    units = {"arithmetic": c.CUDA, "compare": c.CUDA, "transcendental": c.SFU}
    return tuple(Work(units[k], k, n * elements, f"{base}, {n}/elem") for k, n in mix.items())


def _reduction(call: Call, base: str, mix: dict[str, int]) -> OpPrice:
    i = call.tensor_positions()[0]
    x = call.shape(i)
    out_shape, note = _reduced_shape(x, call.value(i + 1), call.value(i + 2))
    tensors = (Tensor("x", x, call.dtype(i), Role.INPUT),
               Tensor("out", out_shape, "int64" if base.startswith("arg") else call.dtype(i),
                      Role.OUTPUT))
    return OpPrice(Ledger(base, c.CUDA, tensors, _class_work(base, mix, math.prod(x))),
                   "class", note)


def _reduced_shape(x: tuple[int, ...], dims: Any, keepdim: Any) -> tuple[tuple[int, ...], str]:
    if dims is None or dims == []:
        if dims is None and len(x) > 0:
            return (), "reduced dimensions not recorded: output counted as 1 element"
        return ((1,) * len(x) if keepdim is True else ()), ""
    axes = {d % len(x) for d in ([dims] if isinstance(dims, int) else dims)
            if isinstance(d, int)} if x else set()
    kept = tuple(1 if j in axes else s for j, s in enumerate(x) if keepdim is True or j not in axes)
    return kept, ""


def _movement(call: Call, base: str) -> OpPrice:
    """copy_ (dst, src), fill_/zero_ (write only), clone/contiguous (read and write)."""
    t = call.tensor_positions()
    dst = Tensor("dst", call.shape(t[0]), call.dtype(t[0]), Role.OUTPUT)
    if base == "copy" and len(t) > 1:
        tensors: tuple[Tensor, ...] = (Tensor("src", call.shape(t[1]), call.dtype(t[1]),
                                              Role.INPUT), dst)
    elif base in ("fill", "zero"):
        tensors = (dst,)
    else:
        tensors = (Tensor("src", call.shape(t[0]), call.dtype(t[0]), Role.INPUT),
                   Tensor("dst", call.shape(t[0]), call.dtype(t[0]), Role.OUTPUT))
    return OpPrice(Ledger(base, c.CUDA, tensors, ()), "class")
