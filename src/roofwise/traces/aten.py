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

The recorded arguments are read by name against the op's schema (`schemas.py`), never by
position: a list that fits none of the op's overloads leaves it unpriced, with the reason.

fp32 contractions are priced on the CUDA cores unless `allow_tf32` (PyTorch's default for
matmul is no TF32), or unless a kernel the op launched is named as a TF32 tensor-core kernel
(`is_tf32_kernel`: cuBLAS's and CUTLASS's `s1688gemm`, `..._tf32...`): the program chose TF32,
and the CUDA-core roof would call its possible rate impossible.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from roofwise.base.errors import InputError
from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work
from roofwise.ops import _common as c
from roofwise.ops.classes import (
    MOVEMENT_OPS,
    OP_CLASS_TABLE,
    REDUCTION_OPS,
    VIEW_OPS,
)
from roofwise.ops.conv import conv
from roofwise.ops.gemm import batched_gemm
from roofwise.ops.norms import layernorm, layernorm_backward, rmsnorm, softmax
from roofwise.traces.attention import is_attention, price_attention
from roofwise.traces.schemas import TRACE_DTYPES, UNKNOWN, Bound, TensorArg, bind

MAX_DIM = 1 << 48  # one dimension of a recorded shape: beyond it no tensor fits any memory, so
#                  the list is not a shape (its op is unpriced, not counted in overflowing units)
MAX_RANK = 16  # dimensions of one shape (PyTorch's CUDA kernels take at most 25): with MAX_DIM,
#                 a tensor's element count stays within a float
_BOOL_RESULT = frozenset(("gt", "lt", "ge", "le", "eq", "ne", "isnan", "isinf", "logical_and",
                          "logical_or", "logical_not"))
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


# aten's convolutions, by schema argument names: convolution / _convolution (input, weight,
# bias, stride, padding, dilation, transposed, output_padding, groups[, ..., allow_tf32]),
# convNd (input, weight, bias, stride, padding, dilation, groups), cudnn_convolution (self,
# weight, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32; its bias
# is a separate add op).
_CONVOLUTIONS = frozenset(("convolution", "_convolution", "conv1d", "conv2d", "conv3d",
                           "cudnn_convolution", "miopen_convolution"))
COMPILED_REGION = "Torch-Compiled Region"  # the span torch.compile's code runs in
# Ops whose tensors do not broadcast (per-channel statistics beside the activations), priced
# per element of their largest input: every input read once, one output of that shape written
# (their few per-channel outputs left out), and this work per element. Batch norm, training:
# the per-channel sum and sum of squares (2), then (x - mean) * rstd * weight + bias (4); its
# backward: the sums of grad and grad * x-hat (3), then grad_input from them (5); group norm
# is the same per group of channels instead of per channel. RMS norm's fused backward: grad *
# weight (1), its dot with x per row (2), grad_input = rstd * (grad * weight) - x * coef (3),
# and grad_weight's sum of grad * x * rstd (3). Max pooling's backward adds each grad into
# the input position its max came from. x read once is the least a fused kernel can read.
_LARGEST_INPUT_OPS: dict[str, dict[str, int]] = {
    **{n: {"arithmetic": 6} for n in (
        "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
        "cudnn_batch_norm", "miopen_batch_norm", "native_group_norm")},
    **{n: {"arithmetic": 8} for n in (
        "native_batch_norm_backward", "cudnn_batch_norm_backward", "miopen_batch_norm_backward",
        "native_group_norm_backward")},
    "_fused_rms_norm_backward": {"arithmetic": 9},
    "max_pool2d_with_indices_backward": {"arithmetic": 1},
}
# The ops the operator library prices by name (beside the elementwise and reduction classes).
LIBRARY_OPS = frozenset((
    "mm", "addmm", "bmm", "baddbmm", "linear", "matmul", "_scaled_mm", *_CONVOLUTIONS,
    "native_layer_norm_backward", "mse_loss", "mse_loss_backward", "index_select", "gather",
    "layer_norm", "native_layer_norm", "rms_norm", "_fused_rms_norm", "softmax", "_softmax",
    "_safe_softmax", "log_softmax", "_log_softmax", "copy_", "fill_", "zero_", "clone",
    "contiguous", "cudnn_convolution_backward_input", *_LARGEST_INPUT_OPS))


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
    strides: tuple[tuple[int, ...] | None, ...] = ()  # `Input Strides`, where recorded

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
              concrete: Sequence[Any] = (), strides: Sequence[Any] = ()) -> Call:
    """A hashable Call from the profiler's lists (dims or strides that are not lists of ints
    become None)."""
    frozen = (tuple(tuple(d) if isinstance(d, list) else d for d in dims), tuple(types),
              tuple(concrete), tuple(tuple(s) if isinstance(s, list) else s for s in strides))
    try:
        return _make_call(name, *frozen)
    except TypeError:  # something unhashable in the record: build it uncached
        return _make_call.__wrapped__(name, *frozen)


@lru_cache(maxsize=65536)
def _make_call(name: str, dims: tuple[Any, ...], types: tuple[Any, ...],
               concrete: tuple[Any, ...], strides: tuple[Any, ...] = ()) -> Call:
    return Call(name, _int_tuples(dims), tuple(str(t) for t in types),
                tuple(str(x) for x in concrete), _int_tuples(strides))


def _int_tuples(values: tuple[Any, ...]) -> tuple[tuple[int, ...] | None, ...]:
    """Each recorded list of sizes (or strides) as a tuple of ints, None where it is not one
    (too long, not ints, negative, beyond any real size)."""
    return tuple(v if isinstance(v, tuple) and len(v) <= MAX_RANK and all(
        type(x) is int and 0 <= x <= MAX_DIM for x in v) else None for v in values)


@lru_cache(maxsize=1)
def priced_by_name() -> frozenset[str]:
    """The aten ops (overload packets) this module prices without torch: the ones whose
    schemas `scripts/gen_schema_table.py` ships in `schema_table.py`."""
    classes = {*OP_CLASS_TABLE, "copy", "fill", "zero", "clone", "contiguous"}
    return frozenset({*LIBRARY_OPS, *classes, *(f"{n}_" for n in classes), *_UNPRICEABLE})


@lru_cache(maxsize=65536)
def library_price(call: Call, allow_tf32: bool = False,
                  use_torch: bool = True, winograd: bool = False) -> OpPrice | None:
    """The ledger of a recorded op from the operator library (see the module docstring for
    the order tried), an unpriced one saying why it cannot be, or None when the library has no
    ledger for it (`traces.prices` then replays it). `use_torch` lets torch's schemas, where
    installed, read the arguments beside the shipped table's; `winograd`: a kernel the op
    launched is named as a Winograd convolution (`is_winograd_kernel`)."""
    if is_attention(call.name):
        return _attention(call, use_torch)
    if call.name.startswith(COMPILED_REGION):
        return unpriced("a torch.compile region: its kernels (Triton, library GEMMs) are "
                        "launched by compiled code, with no aten op to price them by")
    if not call.tensor_positions():
        if "TensorList" in call.types:
            return unpriced("its tensors come as a TensorList, for which the profiler records "
                            "no shapes or dtypes")
        if call.types:
            return unpriced("no tensor inputs with known dtypes recorded")
        if any(d for d in call.dims):
            return unpriced("input shapes recorded without their dtypes (as PyTorch 1.8 "
                            "wrote them): neither the bytes nor the roof can be told")
        return unpriced("no input shapes recorded (profile with record_shapes=True)")
    if call.base in _UNPRICEABLE:
        return unpriced(_UNPRICEABLE[call.base])
    if not call.name.startswith("aten::") or not _known(call.base):
        return None
    bound = bind(call.name, call.dims, call.types, call.concrete, use_torch, call.strides)
    if isinstance(bound, str):
        return unpriced(bound)
    for name, tensor in bound.values.items():
        if isinstance(tensor, TensorArg) and tensor.dtype is None:
            return unpriced(f"its tensor {name} is recorded as {tensor.type_text!r}, a dtype "
                            "roofwise does not price")
    try:
        return (_library(call.base, bound, allow_tf32, winograd)
                or _by_class(call.base, bound))
    except InputError as exc:
        return unpriced(f"the operator library refuses its shapes ({exc.problem})")


def _known(base: str) -> bool:
    return base in priced_by_name()


def _attention(call: Call, use_torch: bool) -> OpPrice:
    bound = bind(call.name, call.dims, call.types, call.concrete, use_torch, call.strides)
    if isinstance(bound, str):
        return unpriced(bound)
    try:
        priced = price_attention(call.name, bound)
    except InputError as exc:
        return unpriced(f"the operator library refuses its shapes ({exc.problem})")
    if isinstance(priced, str):
        return unpriced(priced)
    ledger, note = priced
    return OpPrice(ledger, "library", note)


def _gemm(m: int, n: int, k: int, dtype: str, allow_tf32: bool, batch: int = 1,
          bias: bool = False, name: str = "gemm") -> OpPrice:
    ledger = batched_gemm(batch, m, n, k, dtype=dtype, bias=bias, allow_tf32=allow_tf32)
    return OpPrice(replace(ledger, name=name), "library")


def _with_addend(price: OpPrice, addend: TensorArg) -> OpPrice:
    """A GEMM that adds a full matrix (addmm with a 2-D bias, baddbmm): read it, add per output."""
    assert price.ledger is not None and addend.dtype is not None
    ledger = price.ledger
    outputs = math.prod(ledger.tensor("c").shape)
    return OpPrice(replace(ledger, tensors=(*ledger.tensors, Tensor("self", addend.read_shape,
                                                                    addend.dtype, Role.INPUT)),
                           work=(*ledger.work, Work(c.CUDA, "arithmetic", outputs,
                                                    "beta*self + alpha*(A @ B), 1/output"))),
                   "library")


def _read_operands(price: OpPrice, a: TensorArg, b: TensorArg) -> OpPrice:
    """A GEMM whose operand is expanded (a stride-0 dimension: one matrix broadcast over the
    batch, one row over the rows) reads it once per distinct element, as any input."""
    ledger = price.ledger
    assert ledger is not None
    shapes = {"a": a.read_shape, "b": b.read_shape}
    tensors = tuple(replace(t, shape=shapes[t.name])
                    if t.name in shapes and len(shapes[t.name]) == len(t.shape) else t
                    for t in ledger.tensors)
    if tensors == ledger.tensors:
        return price
    return OpPrice(replace(ledger, tensors=tensors), price.source, price.reason)


def _dt(t: TensorArg) -> str:
    assert t.dtype is not None  # library_price refuses unknown dtypes first
    return t.dtype


def _rank(t: TensorArg | None, n: int) -> bool:
    return t is not None and len(t.shape) == n


def _library(base: str, b: Bound, allow_tf32: bool, winograd: bool = False
             ) -> OpPrice | None:
    x, other = b.tensor("self") or b.tensor("input"), b.tensor("mat2") or b.tensor("other")
    if base == "mm" and _rank(x, 2) and _rank(other, 2):
        assert x is not None and other is not None
        (m, k), (_, n) = x.shape, other.shape
        return _read_operands(_gemm(m, n, k, _dt(x), allow_tf32, name="mm"), x, other)
    if base == "addmm":
        a, bb = b.tensor("mat1"), b.tensor("mat2")
        if x is not None and _rank(a, 2) and _rank(bb, 2):
            assert a is not None and bb is not None
            (m, k), (_, n) = a.shape, bb.shape
            if math.prod(x.shape) == n:  # (n,) or (1, n): a broadcast bias row
                return _read_operands(_gemm(m, n, k, _dt(a), allow_tf32, bias=True,
                                            name="addmm"), a, bb)
            return _with_addend(_read_operands(_gemm(m, n, k, _dt(a), allow_tf32,
                                                     name="addmm"), a, bb), x)
    if base == "bmm" and _rank(x, 3) and _rank(other, 3):
        assert x is not None and other is not None
        (bt, m, k), (_, _, n) = x.shape, other.shape
        return _read_operands(_gemm(m, n, k, _dt(x), allow_tf32, batch=bt, name="bmm"), x,
                              other)
    if base == "baddbmm":
        a, bb = b.tensor("batch1"), b.tensor("batch2")
        if x is not None and _rank(a, 3) and _rank(bb, 3):
            assert a is not None and bb is not None
            (bt, m, k), (_, _, n) = a.shape, bb.shape
            return _with_addend(_read_operands(_gemm(m, n, k, _dt(a), allow_tf32, batch=bt,
                                                     name="baddbmm"), a, bb), x)
    if base == "linear":
        w, bias = b.tensor("weight"), b.tensor("bias")
        if x is not None and x.shape and _rank(w, 2):
            assert w is not None
            n, k = w.shape
            has_bias = bias is not None and math.prod(bias.shape) == n
            return _gemm(math.prod(x.shape[:-1]), n, k, _dt(x), allow_tf32, bias=has_bias,
                         name="linear")
    if base == "matmul" and x is not None and other is not None:
        return _matmul(x.shape, other.shape, _dt(x), allow_tf32)
    if base == "_scaled_mm" and _rank(x, 2) and _rank(other, 2):
        assert x is not None and other is not None
        (m, k), (_, n) = x.shape, other.shape
        scale_a = b.tensor("scale_a")
        row = scale_a is not None and math.prod(scale_a.shape) > 1
        ledger = batched_gemm(1, m, n, k, dtype=_dt(x), scale="row" if row else "tensor")
        return OpPrice(replace(ledger, name="_scaled_mm"), "library")
    if base in _CONVOLUTIONS and x is not None and b.tensor("weight") is not None:
        return _convolution(base, b, x, allow_tf32, winograd)
    if base == "cudnn_convolution_backward_input":
        return _convolution_backward_input(b, allow_tf32, winograd)
    if base == "native_layer_norm_backward":
        return _layernorm_backward(b)
    if base in ("mse_loss", "mse_loss_backward"):
        return _mse_loss(base, b)
    if base == "index_select" and x is not None and b.tensor("index") is not None:
        return _index_select(b, x)
    if base == "gather" and x is not None and b.tensor("index") is not None:
        return _gather(b, x)
    if base in _LARGEST_INPUT_OPS:
        return _largest_input(base, b)
    if base in _LAYER_NORMS and x is not None and x.shape:
        ledger = layernorm(rows=max(1, math.prod(x.shape[:-1])), hidden=x.shape[-1],
                           dtype=_dt(x), weight=b.tensor("weight") is not None,
                           bias=b.tensor("bias") is not None)
        return OpPrice(ledger, "library")
    if base in _RMS_NORMS and x is not None and x.shape:
        return OpPrice(rmsnorm(rows=max(1, math.prod(x.shape[:-1])), hidden=x.shape[-1],
                               dtype=_dt(x), weight=b.tensor("weight") is not None), "library")
    if base in _SOFTMAXES and x is not None and x.shape:
        shape = x.shape
        dim = b.value("dim", None)
        cols = shape[dim] if isinstance(dim, int) and -len(shape) <= dim < len(shape) else shape[-1]
        if cols == 0 or math.prod(shape) == 0:
            return unpriced(f"{base} over an empty tensor {list(shape)}: no element to count")
        return OpPrice(replace(softmax(rows=max(1, math.prod(shape) // cols), cols=cols,
                                       dtype=_dt(x)), name=base), "library")
    return None


def _convolution(base: str, b: Bound, x_arg: TensorArg, allow_tf32: bool,
                 winograd: bool = False) -> OpPrice:
    """A forward convolution from x (batch, c_in, *spatial) and weight (c_out, c_in/groups,
    *kernel); groups from the shapes, stride/padding/dilation from Concrete Inputs where the
    profiler kept them. A padding not recorded is counted as 0 (the fewest outputs: a count
    that can only be low, so the bound holds); a stride or dilation not recorded leaves the op
    blank, since either can shrink the output many times over (PyTorch before 1.10 records no
    list arguments), and a count taken at 1 would call a strided convolution impossible."""
    w_arg = b.tensor("weight")
    assert w_arg is not None
    x, w = x_arg.shape, w_arg.shape
    dims = len(x) - 2
    if dims not in (1, 2, 3) or len(w) != len(x) or w[1] == 0 or x[1] % w[1]:
        return unpriced(f"convolution shapes {list(x)} and {list(w)} are not "
                        "(batch, c_in, *spatial) and (c_out, c_in/groups, *kernel)")
    if b.value("transposed", False) is True:
        return unpriced("transposed convolution: the operator library has no ledger for it")
    kernel = tuple(w[2:])
    defaults = {"stride": (1,), "padding": (0,), "dilation": (1,)}
    settings: dict[str, tuple[int, ...]] = {}
    guessed = []
    for name in defaults:
        value = b.value(name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if name == "padding" and value == "valid":
            value = [0]
        if name == "padding" and value == "same":
            dilation = b.value("dilation", 1)
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
    unknown = [name for name in guessed if name != "padding"]
    if unknown:
        return unpriced(f"{' and '.join(unknown)} not recorded (PyTorch before 1.10 records "
                        "no list arguments): the output size, and with it the count, "
                        "depends on them (a stride of 2 quarters a 2-d output), so no "
                        "count is a bound")
    groups = x[1] // w[1]
    recorded_groups = b.value("groups", None)
    if isinstance(recorded_groups, int) and recorded_groups != groups:
        return unpriced(f"groups={recorded_groups} disagrees with the shapes (c_in {x[1]}, "
                        f"weight c_in/groups {w[1]})")
    has_bias = b.tensor("bias") is not None
    tf32 = b.value("allow_tf32", None)
    ledger = conv(batch=x[0], c_in=x[1], c_out=w[0], spatial=tuple(x[2:]), kernel=kernel,
                  groups=groups, bias=has_bias, dtype=_dt(x_arg),
                  allow_tf32=tf32 if isinstance(tf32, bool) else allow_tf32,
                  stride=settings["stride"], padding=settings["padding"],
                  dilation=settings["dilation"])
    notes = (["padding not recorded: counted as 0, the fewest outputs, so the count can only "
              "be low"] if guessed else [])
    if winograd:
        unit_steps = all(v == 1 for v in (*settings["stride"], *settings["dilation"]))
        ledger, said = _winograd(ledger, kernel, unit_steps)
        notes.append(said)
    return OpPrice(replace(ledger, name=base), "library", "; ".join(notes))


# Winograd's minimal filtering F(m, r): (m + r - 1) multiplies give m outputs of an r-tap
# filter, per dimension (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks",
# 2016). The largest tile in libraries' use is F(6x6, 3x3) (NNPACK; cuDNN's and MIOpen's are
# F(2x2, 3x3) and F(4x4, 3x3)): its multiplies are the fewest any of them does.
WINOGRAD_TILE = 6


def _winograd(ledger: Ledger, kernel: tuple[int, ...], unit_steps: bool
              ) -> tuple[Ledger, str]:
    """A convolution a Winograd kernel ran: its contraction counted at F(6, r)'s multiplies
    per dimension, so that the bound never exceeds what the transform does (the direct count
    would call a Winograd kernel faster than the unit's peak impossible). `unit_steps`:
    stride and dilation 1, the only ones the transform takes."""
    if not unit_steps:
        return ledger, ("a Winograd kernel ran it with a stride or dilation the transform "
                        "does not take: the direct count is kept")
    m = WINOGRAD_TILE
    ratio = math.prod(Fraction(m + r - 1, m * r) for r in kernel)
    if ratio >= 1:
        return ledger, "a Winograd kernel ran it; the direct count is kept"
    work = tuple(replace(item, ops=item.ops * ratio.numerator / ratio.denominator,
                         label=f"{item.label} * {ratio} (Winograd F({m}, r))")
                 if item.op_class == "contraction" else item for item in ledger.work)
    shape = "x".join(str(r) for r in kernel)
    return replace(ledger, work=work), (
        f"a Winograd kernel ran it: the contraction counted at F({m}, {shape})'s multiplies, "
        f"{float(ratio):.3f} of the direct count (the fewest any library's transform does), "
        "so the bound holds whatever tile it used")


def _convolution_backward_input(b: Bound, allow_tf32: bool, winograd: bool
                                ) -> OpPrice | None:
    """PyTorch 1.x's `cudnn_convolution_backward_input(self_size, grad_output, weight, ...)`:
    the data gradient. Its contraction is the forward's, 2*prod(grad_output)*(c_in/groups)*
    prod(kernel) whatever the stride (each output gradient reaches every tap once); grad_output
    and the weight are read. The input gradient's size is `self_size`, a list PyTorch 1.x did
    not record: its writes are left out, so the bytes can only be low."""
    grad, w_arg = b.tensor("grad_output"), b.tensor("weight")
    if grad is None or w_arg is None:
        return None
    g, w = grad.shape, w_arg.shape
    if len(g) not in (3, 4, 5) or len(w) != len(g) or g[1] != w[0]:
        return unpriced(f"convolution gradient shapes {list(g)} and {list(w)} are not "
                        "(batch, c_out, *spatial) and (c_out, c_in/groups, *kernel)")
    tf32 = b.value("allow_tf32", None)
    unit = c.contraction_unit(_dt(grad), "conv.dtype",
                              tf32 if isinstance(tf32, bool) else allow_tf32)
    flops = 2 * math.prod(g) * w[1] * math.prod(w[2:])
    work = Work(unit, "contraction", flops,
                "2*prod(grad_output)*(c_in/groups)*prod(kernel)")
    notes = ["grad_input's size (self_size) not recorded: its writes are left out, so the "
             "bytes can only be low"]
    ledger = Ledger("cudnn_convolution_backward_input", unit, (
        Tensor("grad_output", g, _dt(grad), Role.INPUT),
        Tensor("weight", w, _dt(w_arg), Role.LOOKUP)), (work,))
    if winograd:  # cuDNN runs Winograd at stride 1 only: the transform's count holds
        ledger, said = _winograd(ledger, tuple(w[2:]), unit_steps=True)
        notes.append(said)
    return OpPrice(ledger, "library", "; ".join(notes))


def _layernorm_backward(b: Bound) -> OpPrice | None:
    """native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
    output_mask): rows from the saved mean's size, the normalized width from the input's."""
    grad, x_arg, mean = b.tensor("grad_out"), b.tensor("input"), b.tensor("mean")
    if grad is None or x_arg is None or mean is None or b.tensor("rstd") is None:
        return None
    x, rows = x_arg.shape, math.prod(mean.shape)
    if not x or rows == 0 or math.prod(x) % rows or grad.shape != x:
        return None
    mask = b.value("output_mask", None)
    recorded = isinstance(mask, list) and len(mask) == 3
    wants = mask if recorded else [True, True, True]
    ledger = layernorm_backward(rows=rows, hidden=math.prod(x) // rows, dtype=_dt(x_arg),
                                weight=b.tensor("weight") is not None and bool(wants[1]),
                                bias=b.tensor("bias") is not None and bool(wants[2]),
                                stats_dtype=_dt(mean))
    note = "" if recorded else ("output_mask not recorded: grad_weight and grad_bias "
                                "counted as written wherever weight and bias are given")
    return OpPrice(replace(ledger, name="native_layer_norm_backward"), "library", note)


def _mse_loss(base: str, b: Bound) -> OpPrice | None:
    """mse_loss(self, target, reduction): per element a subtract and a square-accumulate (FMA)
    (a subtract and a square with reduction none); mse_loss_backward(grad_output, self,
    target, reduction): grad_input = scale * (self - target) * grad, 3 per element."""
    backward = base == "mse_loss_backward"
    x_arg, target = b.tensor("self"), b.tensor("target")
    if x_arg is None or target is None:
        return None
    x = x_arg.shape
    if x != target.shape:
        return None  # broadcasting losses are left to the tracer
    reduction = _MSE_REDUCTIONS.get(b.value("reduction", None), "")
    note = "" if reduction else "reduction not recorded: counted as mean, PyTorch's default"
    reduction = reduction or "mean"
    dtype = _dt(x_arg)
    tensors = [Tensor("self", x_arg.read_shape, dtype, Role.INPUT),
               Tensor("target", target.read_shape, dtype, Role.INPUT)]
    if backward:
        grad = b.tensor("grad_output")
        tensors += [Tensor("grad_out", grad.read_shape if grad else (),
                           _dt(grad) if grad else dtype, Role.INPUT),
                    Tensor("grad_input", x, dtype, Role.OUTPUT)]
        per_elem, what = 3, "subtract, times scale*grad; 3/elem"
    else:
        tensors.append(Tensor("out", x if reduction == "none" else (), dtype, Role.OUTPUT))
        per_elem = 2 if reduction == "none" else 3
        what = ("subtract, square; 2/elem" if reduction == "none"
                else "subtract, square-accumulate (FMA); 3/elem")
    work = (Work(c.CUDA, "arithmetic", per_elem * math.prod(x), what),)
    return OpPrice(Ledger(base, c.CUDA, tuple(tensors), work), "library", note)


def _largest_input(base: str, b: Bound) -> OpPrice | None:
    """`_LARGEST_INPUT_OPS`: the work per element of the largest input."""
    inputs = b.tensors()
    if not inputs:
        return None
    largest = max((t for _, t in inputs), key=lambda t: math.prod(t.shape))
    tensors = (*(Tensor(f"in{j}", t.read_shape, _dt(t), Role.INPUT)
                 for j, (_, t) in enumerate(inputs)),
               Tensor("out", largest.shape, _dt(largest), Role.OUTPUT))
    return OpPrice(Ledger(base, c.CUDA, tensors, _class_work(
        base, _LARGEST_INPUT_OPS[base], math.prod(largest.shape))), "library",
        "per element of its largest input, each input read once (per-channel outputs left out)")


def _gather(b: Bound, x_arg: TensorArg) -> OpPrice:
    """gather(self, dim, index): one element of self per element of the index, whatever the
    dim: reads the index and that many elements of self (never more than all of self), writes
    an output of the index's shape. (An index expanded with stride 0 reads less than its
    shape says: counted once where the trace records strides, else an upper count.)"""
    index = b.tensor("index")
    assert index is not None
    picked = min(math.prod(x_arg.read_shape), math.prod(index.shape))
    tensors = (Tensor("index", index.read_shape, _dt(index), Role.INPUT),
               Tensor("self_gathered", (picked,), _dt(x_arg), Role.INPUT),
               Tensor("out", index.shape, _dt(x_arg), Role.OUTPUT))
    return OpPrice(Ledger("gather", c.CUDA, tensors, ()), "library",
                   "self counted as read once per gathered element, at most all of self")


def _index_select(b: Bound, x_arg: TensorArg) -> OpPrice | None:
    """index_select(self, dim, index): reads the index and the selected slices of self (never
    more than all of self), writes them. The dim comes from Concrete Inputs, or is 0 for a 1-D
    self; otherwise the op goes to the tracer."""
    index = b.tensor("index")
    assert index is not None
    x = x_arg.shape
    dim = b.value("dim", None)
    if len(x) == 1 and dim is None:
        dim = 0
    if not isinstance(dim, int) or not -len(x) <= dim < len(x) or len(index.shape) > 1:
        return None
    dim %= len(x)
    out = (*x[:dim], math.prod(index.shape), *x[dim + 1:])
    gathered = min(math.prod(x_arg.read_shape), math.prod(out))
    tensors = (Tensor("index", index.read_shape, _dt(index), Role.INPUT),
               Tensor("self_selected", (gathered,), _dt(x_arg), Role.INPUT),
               Tensor("out", out, _dt(x_arg), Role.OUTPUT))
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


def _by_class(name: str, b: Bound) -> OpPrice | None:
    """Elementwise ops, reductions and plain copies/fills from their recorded shapes."""
    base = name.removesuffix("_")
    in_place = name.endswith("_") and not name.startswith("_")
    if base in VIEW_OPS:
        return None  # launches no kernel of its own; the tracer says what it does
    inputs = b.tensors()
    if base in ("copy", "fill", "zero", "clone", "contiguous") and b.tensor("self"):
        return _movement(b, base)
    if base in MOVEMENT_OPS:
        return None  # its output size depends on arguments the profiler rarely keeps
    mix = OP_CLASS_TABLE.get(base)
    if mix is None or not inputs:
        return None
    if base in REDUCTION_OPS and len(inputs) == 1:
        return _reduction(b, base, mix, inputs[0][1])
    buffers = b.out_buffers()
    try:
        out_shape = tuple(int(x) for x in np.broadcast_shapes(*(t.shape for _, t in inputs)))
    except ValueError:
        shapes = ", ".join(str(list(t.shape)) for _, t in inputs)
        return unpriced(f"its {len(inputs)} tensor inputs ({shapes}) do not broadcast as one "
                        f"{base} call")
    # an input read through stride 0 (expanded) is read once per distinct element
    tensors = [Tensor(f"in{j}", t.shape if in_place and j == 0 else t.read_shape, _dt(t),
                      Role.INOUT if in_place and j == 0 else Role.INPUT)
               for j, (_, t) in enumerate(inputs)]
    if not in_place:
        out_dtype = "bool" if base in _BOOL_RESULT else _dt(inputs[0][1])
        if buffers and math.prod(buffers[0].shape) == math.prod(out_shape):
            out_dtype = _dt(buffers[0])
        tensors.append(Tensor("out", out_shape, out_dtype, Role.OUTPUT))
    elements = math.prod(out_shape)
    return OpPrice(Ledger(base, c.CUDA, tuple(tensors), _class_work(base, mix, elements)),
                   "class")


def _class_work(base: str, mix: dict[str, int], elements: int) -> tuple[Work, ...]:
    units = {"arithmetic": c.CUDA, "compare": c.CUDA, "transcendental": c.SFU}
    return tuple(Work(units[k], k, n * elements, f"{base}, {n}/elem") for k, n in mix.items())


def _reduction(b: Bound, base: str, mix: dict[str, int], x_arg: TensorArg) -> OpPrice:
    x = x_arg.shape
    out_shape, note = _reduced_shape(x, b.value("dim"), b.value("keepdim", False),
                                     "dim" in b.values)
    tensors = (Tensor("x", x_arg.read_shape, _dt(x_arg), Role.INPUT),
               Tensor("out", out_shape, "int64" if base.startswith("arg") else _dt(x_arg),
                      Role.OUTPUT))
    return OpPrice(Ledger(base, c.CUDA, tensors, _class_work(base, mix, math.prod(x))),
                   "class", note)


def _reduced_shape(x: tuple[int, ...], dims: Any, keepdim: Any,
                   has_dim: bool) -> tuple[tuple[int, ...], str]:
    """The output of a reduction over `dims` (an int, a list of ints, None or [] for all;
    UNKNOWN when the schema has one the trace did not record)."""
    if dims is UNKNOWN and has_dim and x:
        return (), "reduced dimensions not recorded: output counted as 1 element"
    if dims is UNKNOWN or dims is None or dims == []:
        return ((1,) * len(x) if keepdim is True else ()), ""
    axes = {d % len(x) for d in ([dims] if isinstance(dims, int) else dims)} if x else set()
    kept = tuple(1 if j in axes else s for j, s in enumerate(x) if keepdim is True or j not in axes)
    return kept, ""


def _movement(b: Bound, base: str) -> OpPrice:
    """copy_ (self <- src), fill_/zero_ (write only), clone/contiguous (read and write)."""
    x = b.tensor("self")
    assert x is not None
    dst = Tensor("dst", x.shape, _dt(x), Role.OUTPUT)
    src = b.tensor("src")
    if base == "copy" and src is not None:
        tensors: tuple[Tensor, ...] = (Tensor("src", src.read_shape, _dt(src), Role.INPUT),
                                       dst)
    elif base in ("fill", "zero"):
        tensors = (dst,)
    else:
        tensors = (Tensor("src", x.read_shape, _dt(x), Role.INPUT),
                   Tensor("dst", x.shape, _dt(x), Role.OUTPUT))
    return OpPrice(Ledger(base, c.CUDA, tensors, ()), "class")


_TF32_KERNEL = re.compile(r"tf32|s1688gemm|_s1688", re.IGNORECASE)


_WINOGRAD_KERNEL = re.compile(r"winograd", re.IGNORECASE)


def is_winograd_kernel(name: str) -> bool:
    """Whether a kernel's name says it convolved by Winograd's transform (cuDNN's
    `volta_scudnn_winograd_128x128_...`, `..._winograd_nonfused_...`, MIOpen's
    `...Winograd...`): fewer multiplies than the direct count."""
    return _WINOGRAD_KERNEL.search(name) is not None


def is_tf32_kernel(name: str) -> bool:
    """Whether a kernel's name says it ran fp32 inputs on TF32 tensor cores (cuBLAS and
    CUTLASS: `cutlass_80_tensorop_s1688gemm_...`, `sm80_xmma_gemm_f32f32_tf32f32_...`,
    `..._tf32...` convolutions); SIMT sgemm kernels (`ampere_sgemm_...`) are not."""
    return _TF32_KERNEL.search(name) is not None
