"""Torch reference implementations of the operators `roofwise bench` times.

Each op builds its inputs (random, never zeros: zeros run faster and hide bugs) on a device
and returns the callable, the arguments and the ledger of one call. The ledger always comes
from the operator registry `roofwise.ops.OPS` (one set of counting conventions in the
project); an op the registry does not know cannot be benchmarked. Each op exposes only the
registry parameters its torch reference implements; the rest keep the registry's defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from roofwise.base.errors import InputError
from roofwise.ledgers.ledger import Ledger
from roofwise.ops import OPS, op_parameters, parse_op_params

FP8_E4M3_MAX = 448.0

TORCH_DTYPES = {"fp32": "float32", "float32": "float32", "bf16": "bfloat16",
                "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16"}
LEDGER_SOURCE = "roofwise.ops.OPS"


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
    """A torch reference: the registry parameters it implements, its function, its inputs."""

    params: tuple[str, ...]
    fn: Callable[..., Any]
    args: Callable[[Mapping[str, Any], str], tuple[Any, ...]]


BENCH_OPS: dict[str, OpSpec] = {
    "gemm": OpSpec(("m", "n", "k", "dtype"), gemm, _gemm_args),
    "rmsnorm": OpSpec(("rows", "hidden", "dtype"), rmsnorm, _rmsnorm_args),
    "softmax": OpSpec(("rows", "cols", "dtype"), softmax, _softmax_args),
    "qk_norm_rope_quant": OpSpec(("tokens", "q_heads", "kv_heads", "head_dim"),
                                 qk_norm_rope_quant, _case_args),
}


def resolve_params(op: str, given: Mapping[str, Any], option: str = "--shape") -> dict[str, Any]:
    """Typed parameters of `op` (the registry's defaults, overridden by `given`, values as
    text or typed); InputError naming `option` and the parameter at fault."""

    spec = _spec(op)
    defaults = {p.name: p.default for p in op_parameters(op) if p.name in spec.params}
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise InputError(f"{option} {unknown[0]}", f"unknown parameter for {op}; expected "
                                                    f"{', '.join(defaults)}")
    params = dict(defaults)
    for key, value in given.items():
        where = f"{option} {key}"
        try:
            typed = parse_op_params(op, {key: str(value)})[key]
        except InputError as exc:
            raise InputError(where, exc.problem) from None
        if isinstance(typed, int) and not isinstance(typed, bool) and typed <= 0:
            raise InputError(where, f"expected a positive integer, got {value!r}")
        if key == "dtype" and str(typed).lower() not in TORCH_DTYPES:
            raise InputError(where, f"the torch reference of {op} runs in "
                                    f"{', '.join(sorted(TORCH_DTYPES))}; got {value!r}")
        params[key] = typed
    return params


def build_ledger(op: str, params: Mapping[str, Any]) -> Ledger:
    """The op's ledger from the registry `roofwise.ops.OPS`, the only source of ledgers."""

    if op not in OPS:
        raise InputError("OP", f"{op!r} has no ledger in roofwise.ops.OPS; bench times only "
                               "operators the registry counts")
    return OPS[op](**params)


def build_case(op: str, given: Mapping[str, Any], device: str,
               compile_fn: bool = False) -> BenchCase:
    spec = _spec(op)
    params = resolve_params(op, given)
    ledger = build_ledger(op, params)
    fn = spec.fn
    if compile_fn:
        import torch

        fn = torch.compile(fn)
    return BenchCase(op, params, fn, spec.args(params, device), ledger, LEDGER_SOURCE)


def _spec(op: str) -> OpSpec:

    if op not in BENCH_OPS:
        raise InputError("OP", f"unknown operator {op!r}; expected one of "
                               f"{', '.join(BENCH_OPS)}")
    if op not in OPS:
        raise InputError("OP", f"{op!r} has no ledger in roofwise.ops.OPS; bench times only "
                               "operators the registry counts")
    return BENCH_OPS[op]
