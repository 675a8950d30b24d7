"""Torch reference implementations of the operators `roofwise bench` times, with their ledgers.

Each op builds its inputs (random, never zeros: zeros run faster and hide bugs) on a device
and returns the callable, the arguments and the ledger of one call. The ledger comes from the
operator registry `roofwise.ops.OPS` when it has the op; otherwise from the small local
builders below, and `BenchCase.ledger_source` says which.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..ledger import Ledger, Role, Tensor, Work

CUDA = "cuda_core.fp32"
SFU = "sfu.fp32"
FP8_E4M3_MAX = 448.0

TORCH_DTYPES = {"fp32": "float32", "float32": "float32", "bf16": "bfloat16",
                "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16"}


@dataclass(frozen=True)
class BenchCase:
    op: str
    params: Mapping[str, Any]
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    ledger: Ledger
    ledger_source: str


def _torch_dtype(name: str) -> Any:
    import torch

    try:
        return getattr(torch, TORCH_DTYPES[name])
    except KeyError:
        raise InputError("--shape dtype", f"unsupported dtype {name!r}; expected one of "
                                          f"{', '.join(sorted(TORCH_DTYPES))}") from None


def _randn(shape: tuple[int, ...], dtype: Any, device: str, seed: int) -> Any:
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)


# ---- ledgers (local fallback when roofwise.ops has no entry) ----

def gemm_ledger(m: int = 4096, n: int = 4096, k: int = 4096, dtype: str = "bf16") -> Ledger:
    roof = {"bf16": "tensor_core.bf16", "bfloat16": "tensor_core.bf16",
            "fp16": "tensor_core.fp16", "float16": "tensor_core.fp16"}.get(dtype, CUDA)
    return Ledger(
        name="gemm", roof=roof,
        tensors=(Tensor("a", (m, k), dtype, Role.INPUT), Tensor("b", (k, n), dtype, Role.INPUT),
                 Tensor("c", (m, n), dtype, Role.OUTPUT)),
        work=(Work(roof, "contraction", 2.0 * m * n * k, "2*M*N*K"),))


def rmsnorm_ledger(rows: int = 8192, hidden: int = 4096, dtype: str = "bf16") -> Ledger:
    elems = rows * hidden
    return Ledger(
        name="rmsnorm", roof=CUDA,
        tensors=(Tensor("x", (rows, hidden), dtype, Role.INPUT),
                 Tensor("weight", (hidden,), dtype, Role.LOOKUP),
                 Tensor("y", (rows, hidden), dtype, Role.OUTPUT)),
        work=(Work(CUDA, "arithmetic", 3.0 * elems, "sum of squares (FMA) and scale, 3/elem"),
              Work(SFU, "transcendental", float(rows), "rsqrt, 1/row")))


def softmax_ledger(rows: int = 8192, cols: int = 4096, dtype: str = "bf16") -> Ledger:
    elems = rows * cols
    return Ledger(
        name="softmax", roof=CUDA,
        tensors=(Tensor("x", (rows, cols), dtype, Role.INPUT),
                 Tensor("y", (rows, cols), dtype, Role.OUTPUT)),
        work=(Work(CUDA, "compare", float(elems), "row max, 1/elem"),
              Work(CUDA, "arithmetic", 3.0 * elems, "subtract max, sum, divide, 3/elem"),
              Work(SFU, "transcendental", float(elems), "exp, 1/elem")))


def case_study_ledger(tokens: int = 4096, q_heads: int = 32, kv_heads: int = 8,
                      head_dim: int = 128) -> Ledger:
    from ..ops.case_study import qk_norm_rope_quant

    return qk_norm_rope_quant(tokens=tokens, q_heads=q_heads, kv_heads=kv_heads,
                              head_dim=head_dim)


# ---- torch implementations ----

def gemm(a: Any, b: Any) -> Any:
    import torch

    return torch.matmul(a, b)


def rmsnorm(x: Any, weight: Any, eps: float = 1e-6) -> Any:
    import torch

    xf = x.float()
    inv = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * inv * weight.float()).to(x.dtype)


def softmax(x: Any) -> Any:
    import torch

    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def qk_norm_rope_quant(q: Any, k: Any, q_weight: Any, k_weight: Any, cos: Any,
                       sin: Any) -> tuple[Any, Any, Any, Any]:
    """RMSNorm per head, rotate-half RoPE with (tokens, d) fp32 tables, fp8 e4m3 per row."""
    import torch

    def one(x: Any, weight: Any) -> tuple[Any, Any]:
        normed = rmsnorm(x, weight).float()
        half = normed.shape[-1] // 2
        rotated = torch.cat((-normed[..., half:], normed[..., :half]), dim=-1)
        roped = normed * cos[:, None, :] + rotated * sin[:, None, :]
        roped = roped.to(x.dtype).float()  # the seed's stages hand bf16 from RoPE to quant
        amax = roped.abs().amax(dim=-1).clamp(min=1e-12)
        scale = amax / FP8_E4M3_MAX
        quant = (roped / scale[..., None]).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX)
        return quant.to(torch.float8_e4m3fn), scale

    q8, qs = one(q, q_weight)
    k8, ks = one(k, k_weight)
    return q8, k8, qs, ks


def _gemm_args(p: Mapping[str, Any], device: str) -> tuple[Any, ...]:
    dt = _torch_dtype(p["dtype"])
    return (_randn((p["m"], p["k"]), dt, device, 1), _randn((p["k"], p["n"]), dt, device, 2))


def _rmsnorm_args(p: Mapping[str, Any], device: str) -> tuple[Any, ...]:
    dt = _torch_dtype(p["dtype"])
    return (_randn((p["rows"], p["hidden"]), dt, device, 1),
            _randn((p["hidden"],), dt, device, 2))


def _softmax_args(p: Mapping[str, Any], device: str) -> tuple[Any, ...]:
    return (_randn((p["rows"], p["cols"]), _torch_dtype(p["dtype"]), device, 1),)


def _case_args(p: Mapping[str, Any], device: str) -> tuple[Any, ...]:
    import torch

    t, hq, hk, d = p["tokens"], p["q_heads"], p["kv_heads"], p["head_dim"]
    bf = torch.bfloat16
    angle = _randn((t, d), torch.float32, device, 5)
    return (_randn((t, hq, d), bf, device, 1), _randn((t, hk, d), bf, device, 2),
            _randn((d,), bf, device, 3), _randn((d,), bf, device, 4),
            torch.cos(angle), torch.sin(angle))


@dataclass(frozen=True)
class OpSpec:
    defaults: Mapping[str, Any]
    ledger: Callable[..., Ledger]
    fn: Callable[..., Any]
    args: Callable[[Mapping[str, Any], str], tuple[Any, ...]]


BENCH_OPS: dict[str, OpSpec] = {
    "gemm": OpSpec({"m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"}, gemm_ledger, gemm,
                   _gemm_args),
    "rmsnorm": OpSpec({"rows": 8192, "hidden": 4096, "dtype": "bf16"}, rmsnorm_ledger,
                      rmsnorm, _rmsnorm_args),
    "softmax": OpSpec({"rows": 8192, "cols": 4096, "dtype": "bf16"}, softmax_ledger, softmax,
                      _softmax_args),
    "qk_norm_rope_quant": OpSpec({"tokens": 4096, "q_heads": 32, "kv_heads": 8,
                                  "head_dim": 128}, case_study_ledger, qk_norm_rope_quant,
                                 _case_args),
}


def resolve_params(op: str, given: Mapping[str, Any]) -> dict[str, Any]:
    spec = _spec(op)
    unknown = sorted(set(given) - set(spec.defaults))
    if unknown:
        raise InputError(f"--shape {unknown[0]}", f"unknown parameter for {op}; expected "
                                                  f"{', '.join(spec.defaults)}")
    params = dict(spec.defaults)
    for key, value in given.items():
        default = spec.defaults[key]
        if isinstance(default, int):
            try:
                params[key] = int(value)
            except (TypeError, ValueError):
                raise InputError(f"--shape {key}", f"expected an integer, got {value!r}"
                                 ) from None
            if params[key] <= 0:
                raise InputError(f"--shape {key}", f"expected a positive integer, got {value!r}")
        else:
            params[key] = str(value)
    return params


def build_ledger(op: str, params: Mapping[str, Any]) -> tuple[Ledger, str]:
    """The op's ledger: the registry's when it knows the op and these parameters."""
    from .. import ops

    registry = getattr(ops, "OPS", None)
    if isinstance(registry, Mapping) and op in registry:
        try:
            return registry[op](**params), "roofwise.ops.OPS"
        except TypeError:
            pass  # the registry names its parameters differently: use the local builder
    return _spec(op).ledger(**params), "roofwise.measure.torch_ops"


def build_case(op: str, given: Mapping[str, Any], device: str,
               compile_fn: bool = False) -> BenchCase:
    spec = _spec(op)
    params = resolve_params(op, given)
    ledger, source = build_ledger(op, params)
    fn = spec.fn
    if compile_fn:
        import torch

        fn = torch.compile(fn)
    return BenchCase(op, params, fn, spec.args(params, device), ledger, source)


def _spec(op: str) -> OpSpec:
    try:
        return BENCH_OPS[op]
    except KeyError:
        raise InputError("OP", f"unknown operator {op!r}; expected one of "
                               f"{', '.join(BENCH_OPS)}") from None
