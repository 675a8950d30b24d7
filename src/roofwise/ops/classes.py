"""How many operations of each class an elementwise or reduction aten op costs per element.

Torch-free, so that pricing a profiler trace needs no PyTorch: the meta-tensor tracer
(`capture/tracer.py`) and the trace reader (`traces/aten.py`) read the same tables.
Keys are aten overload-packet names with the trailing `_` of in-place variants removed.
"""

from __future__ import annotations

_A, _T, _C = "arithmetic", "transcendental", "compare"

# op name -> ops per element by class
OP_CLASS_TABLE: dict[str, dict[str, int]] = {
    **{n: {_A: 1} for n in (
        "add", "sub", "rsub", "mul", "div", "true_divide", "neg", "where", "sum", "mean",
        "cumsum", "prod", "remainder", "fmod", "floor_divide", "square", "lerp",
        "pow")},  # pow by an integer; any other exponent is a transcendental (see the tracer)
    **{n: {_A: 2} for n in ("addcmul", "addcdiv")},
    **{n: {_T: 1} for n in (
        "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "rsqrt", "sqrt", "sigmoid",
        "tanh", "erf", "erfc", "erfinv", "sin", "cos", "tan", "atan", "reciprocal")},
    **{n: {_C: 1} for n in (
        "abs", "max", "min", "amax", "amin", "maximum", "minimum", "clamp", "clamp_min",
        "clamp_max", "clip", "gt", "lt", "ge", "le", "eq", "ne", "argmax", "argmin", "relu",
        "sign", "logical_and", "logical_or", "logical_not", "isnan", "isinf", "floor", "ceil",
        "round", "trunc", "masked_fill", "bitwise_not", "bitwise_and", "bitwise_or",
        "bitwise_xor")},
    # composites with a fixed mix: softmax = max, sub, exp, sum, div
    **{n: {_C: 1, _T: 1, _A: 3} for n in ("_softmax", "_safe_softmax", "_log_softmax")},
    "silu": {_T: 1, _A: 1},    # x * sigmoid(x)
    "gelu": {_T: 1, _A: 4},    # 0.5 * x * (1 + erf(x / sqrt 2))
    # backward of activations, from the forward output y: grad * y * (1 - y), grad * (1 - y^2)
    "sigmoid_backward": {_A: 3}, "tanh_backward": {_A: 3},
    "threshold_backward": {_C: 1},  # grad where x > threshold, else 0
    "sgn": {_C: 1},
    "nan_to_num": {_C: 3},  # three tests and selects: NaN, +inf, -inf
    "logit": {_T: 1, _A: 2},  # log(x / (1 - x))
    "logit_backward": {_A: 3},  # grad / (x * (1 - x))
    "_softmax_backward_data": {_A: 4},  # y * (grad - sum(grad * y)): 4 per element
    "linalg_vector_norm": {_A: 2},  # the 2-norm: square-accumulate per element
    "softplus": {_T: 2, _C: 1},  # log1p(exp(x)), x itself past the threshold
    **{n: {_A: 3} for n in ("std", "var")},  # accumulate the mean, subtract, square-add
    "polar": {_T: 2, _A: 2},  # abs * cos(angle), abs * sin(angle)
    "_is_all_true": {_C: 1},  # an assertion's check, reduced to one bool
}
# Tensor inputs of the elementwise ops that take other than two (a profiler records an out=
# buffer as one more tensor argument; the arity tells it from an input).
UNARY_OPS = frozenset((
    "neg", "square", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "rsqrt", "sqrt",
    "sigmoid", "tanh", "erf", "erfc", "erfinv", "sin", "cos", "tan", "atan", "reciprocal",
    "abs", "relu", "sign", "sgn", "logical_not", "bitwise_not", "isnan", "isinf", "floor",
    "ceil", "round", "trunc", "silu", "gelu", "clamp", "clamp_min", "clamp_max", "clip", "cumsum",
    "nan_to_num", "logit", "softplus",
    "_softmax", "_safe_softmax", "_log_softmax"))
TERNARY_OPS = frozenset(("where", "addcmul", "addcdiv", "lerp"))
# Reductions: the work runs over the input's elements and the output is smaller.
REDUCTION_OPS = frozenset((
    "sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "max", "min",
    "linalg_vector_norm", "std", "var", "_is_all_true"))
MOVEMENT_OPS = frozenset((  # a kernel that moves or fills data, no FLOPs
    "clone", "copy", "_to_copy", "_to_dtype", "to", "cat", "stack", "index", "index_select",
    "gather", "scatter", "scatter_add", "index_put", "index_copy", "contiguous", "repeat",
    "fill", "zero", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "arange",
    "embedding", "constant_pad_nd", "flip", "roll", "tril", "triu", "masked_select",
    "_unsafe_index", "select_scatter", "slice_scatter", "new_ones", "new_zeros", "new_full",
    "scalar_tensor", "_local_scalar_dense", "eye"))  # the last: `.item()`, one element to the host
# Ops counted by the meta-tensor tracer only, from the outputs it sees written: one
# comparison per input element, the least any top-k, sort or histogram does, so the bound
# stays a bound. The trace reader does not price them by class: a profiler records neither k
# nor the bins, so it cannot size their outputs (they are replayed on meta tensors instead).
TRACED_ONLY_OPS: dict[str, dict[str, int]] = {"topk": {_C: 1}, "sort": {_C: 1},
                                              "histc": {_C: 1}}
VIEW_OPS = frozenset((  # no kernel: aliases or allocations
    "view", "_unsafe_view", "reshape", "_reshape_alias", "transpose", "permute", "t", "expand",
    "slice", "select", "unsqueeze", "squeeze", "split", "split_with_sizes", "chunk", "unbind",
    "narrow", "alias", "detach", "as_strided", "diagonal", "unfold", "view_as_real",
    "view_as_complex", "lift_fresh", "empty", "empty_like", "empty_strided", "new_empty",
    "numpy_T", "movedim"))
