"""Convolution over N spatial dimensions (conv1d / conv2d / conv3d), as cuDNN runs it.

Convention:
- x (batch, c_in, *spatial), weight (c_out, c_in/groups, *kernel) and the optional bias
  (c_out,) are each read once, y (batch, c_out, *out_spatial) written once: an implicit-GEMM
  kernel re-reads x from cache, never from memory more than once at the bound;
- out_spatial[i] = floor((spatial[i] + 2*padding[i] - dilation[i]*(kernel[i]-1) - 1)
  / stride[i]) + 1, PyTorch's formula;
- the contraction is 2*batch*c_out*prod(out_spatial)*(c_in/groups)*prod(kernel) on the tensor
  cores of the input dtype (fp32 on tf32 only with `allow_tf32`, else the CUDA cores): every
  output sums c_in/groups * prod(kernel) products, padding taps included (a kernel computes
  them; counting them keeps the count independent of the border);
- bias: 1 add per output on cuda_core.fp32; the weight and bias are lookups.
"""

from __future__ import annotations

from roofwise.base.errors import InputError
from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work
from roofwise.ops import _common as c


def conv_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """One spatial output size by PyTorch's formula (may be <= 0 for a kernel too large)."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _per_dim(value: tuple[int, ...], dims: int, name: str, minimum: int) -> tuple[int, ...]:
    """A per-spatial-dim setting: one value for all dims, or one per dim."""
    values = value * dims if len(value) == 1 else value
    if len(values) != dims or any(isinstance(v, bool) or not isinstance(v, int) or v < minimum
                                  for v in values):
        raise InputError(f"conv.{name}", f"expected 1 or {dims} integers >= {minimum}, "
                                         f"got {value}")
    return tuple(values)


def conv(batch: int = 8, c_in: int = 64, c_out: int = 64,
         spatial: tuple[int, ...] = (56, 56), kernel: tuple[int, ...] = (3, 3),
         stride: tuple[int, ...] = (1,), padding: tuple[int, ...] = (0,),
         dilation: tuple[int, ...] = (1,), groups: int = 1, bias: bool = False,
         dtype: str = "bf16", out_dtype: str = "auto", allow_tf32: bool = False) -> Ledger:
    """Convolution with len(spatial) spatial dims (1, 2 or 3: conv1d, conv2d, conv3d)."""
    for name, size in (("batch", batch), ("c_in", c_in), ("c_out", c_out), ("groups", groups)):
        c.positive(size, f"conv.{name}")
    dims = len(c.shape(spatial, "conv.spatial"))
    if dims not in (1, 2, 3):
        raise InputError("conv.spatial", f"expected 1, 2 or 3 spatial sizes, got {dims}")
    if len(c.shape(kernel, "conv.kernel")) != dims:
        raise InputError("conv.kernel", f"expected {dims} sizes (one per spatial dim), "
                                        f"got {kernel}")
    strides = _per_dim(stride, dims, "stride", 1)
    pads = _per_dim(padding, dims, "padding", 0)
    dilations = _per_dim(dilation, dims, "dilation", 1)
    if c_in % groups or c_out % groups:
        raise InputError("conv.groups", f"groups={groups} must divide c_in={c_in} and "
                                        f"c_out={c_out}")
    out_spatial = tuple(conv_output_size(*args) for args in
                        zip(spatial, kernel, strides, pads, dilations, strict=True))
    if any(s <= 0 for s in out_spatial):
        raise InputError("conv.kernel", f"the dilated kernel {kernel} does not fit the padded "
                                        f"input {spatial}; output would be {out_spatial}")
    in_dtype = c.dtype(dtype, "conv.dtype")
    out = (("fp32" if in_dtype == "tf32" else in_dtype) if out_dtype == "auto"
           else c.dtype(out_dtype, "conv.out_dtype"))
    unit = c.contraction_unit(in_dtype, "conv.dtype", allow_tf32)
    tensors = [Tensor("x", (batch, c_in, *spatial), in_dtype, Role.INPUT),
               Tensor("weight", (c_out, c_in // groups, *kernel), in_dtype, Role.LOOKUP),
               Tensor("y", (batch, c_out, *out_spatial), out, Role.OUTPUT)]
    outputs = c.elements((batch, c_out, *out_spatial))
    taps = (c_in // groups) * c.elements(kernel)
    work = [Work(unit, "contraction", 2 * outputs * taps,
                 "2*batch*c_out*prod(out)*(c_in/groups)*prod(kernel)")]
    if bias:
        tensors.append(Tensor("bias", (c_out,), out, Role.LOOKUP))
        work.append(Work(c.CUDA, "arithmetic", outputs, "bias add, 1/output"))
    return Ledger(name=f"conv{dims}d", roof=unit, tensors=tuple(tensors), work=tuple(work),
                  notes=(f"stride {strides}, padding {pads}, dilation {dilations}, "
                         f"groups {groups}; output {out_spatial}",))
