"""Operators by name, and their parameters parsed from `key=value` text (the CLI's --shape).

A parameter's kind comes from its annotation: int, float, bool, str, or a tuple of ints
(written `4096x14336`, `1,0,3`, `[1,0,3]` or `(1,0,3)`: one separator kind throughout, every
item an integer). Parameters of any other kind (a routing array) are Python-only.
Parsing is strict: a malformed tuple, a non-integer size, a non-finite number or a key given
twice is an InputError naming the parameter; nothing is guessed.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from roofwise.base import numbers
from roofwise.base.errors import InputError
from roofwise.base.text import one_line, shown
from roofwise.ledgers.ledger import Ledger
from roofwise.ops.activations import add, gelu, mul, silu, swiglu
from roofwise.ops.attention import attention, attention_decode, attention_prefill
from roofwise.ops.case_study import qk_norm_rope_quant, qk_norm_rope_quant_split
from roofwise.ops.conv import conv
from roofwise.ops.gemm import batched_gemm, gemm
from roofwise.ops.moe import moe
from roofwise.ops.norms import layernorm, layernorm_backward, rmsnorm, softmax
from roofwise.ops.quant import quant_fp8_per_block, quant_fp8_per_tensor, quant_fp8_per_token
from roofwise.ops.rope import rope

OPS: dict[str, Callable[..., Ledger]] = {
    "gemm": gemm, "batched_gemm": batched_gemm, "conv": conv,
    "attention": attention, "attention_prefill": attention_prefill,
    "attention_decode": attention_decode,
    "softmax": softmax, "rmsnorm": rmsnorm, "layernorm": layernorm,
    "layernorm_backward": layernorm_backward, "rope": rope,
    "quant_fp8_per_token": quant_fp8_per_token, "quant_fp8_per_tensor": quant_fp8_per_tensor,
    "quant_fp8_per_block": quant_fp8_per_block,
    "silu": silu, "gelu": gelu, "swiglu": swiglu, "add": add, "mul": mul,
    "moe": moe,
    "qk_norm_rope_quant": qk_norm_rope_quant, "qk_norm_rope_quant_split": qk_norm_rope_quant_split,
}

_KINDS = ("tuple", "bool", "int", "float", "str")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
# split "m=1,n=2" on the commas that start a new key, so "expert_tokens=1,0,3" stays whole
_PAIR_SPLIT = re.compile(r",(?=\s*[A-Za-z_]\w*\s*=)")
_INT = re.compile(r"[+-]?\d+", re.ASCII)
# integers joined by one kind of separator: 4096x128, 1,0,3 (optionally in [] or ())
_TUPLE = re.compile(r"\d+(?:\s*x\s*\d+)*|\d+(?:\s*,\s*\d+)*", re.ASCII)
_BRACKETS = {"[": "]", "(": ")"}


@dataclass(frozen=True)
class Param:
    """One settable parameter of an operator."""

    name: str
    kind: str  # one of _KINDS
    default: Any

    @property
    def default_text(self) -> str:
        if isinstance(self.default, tuple):
            return "x".join(map(str, self.default)) if self.default else "(required)"
        return str(self.default).lower() if isinstance(self.default, bool) else str(
            self.default)


def op_function(name: str) -> Callable[..., Ledger]:
    try:
        return OPS[name]
    except KeyError:
        raise InputError("op", f"unknown operator {shown(name)}; expected one of: "
                               f"{', '.join(sorted(OPS))}") from None


def op_parameters(name: str) -> tuple[Param, ...]:
    """The CLI-settable parameters of `name`, in signature order."""
    params = []
    for p in inspect.signature(op_function(name)).parameters.values():
        if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        kind = _kind(str(p.annotation))
        if kind is not None:
            params.append(Param(p.name, kind, p.default))
    return tuple(params)


def parse_shape_args(args: Iterable[str]) -> dict[str, str]:
    """`["m=4096,n=4096", "k=4096"]` -> {"m": "4096", "n": "4096", "k": "4096"}.

    A key given twice (in one --shape or across several) is an error, never last-one-wins.
    """
    pairs: dict[str, str] = {}
    for arg in args:
        for item in _PAIR_SPLIT.split(arg):
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or not key:
                raise InputError("--shape", f"expected key=value, got {shown(item)}")
            if key in pairs:
                raise InputError(f"--shape {one_line(key, 40)}",
                                 f"given twice ({shown(pairs[key])} and "
                                 f"{shown(value.strip())}); give it once")
            pairs[key] = value.strip()
    return pairs


def parse_op_params(name: str, texts: Mapping[str, str]) -> dict[str, Any]:
    """Typed keyword arguments for `name` from text values; InputError naming a bad key."""
    params = {p.name: p for p in op_parameters(name)}
    kwargs: dict[str, Any] = {}
    for key, text in texts.items():
        if key not in params:
            raise InputError(f"{name}: --shape {one_line(key, 40)}",
                             f"unknown parameter; expected one of: {', '.join(params)}")
        kwargs[key] = _convert(text, params[key].kind, f"{name}: --shape {key}")
    return kwargs


def build_op(name: str, texts: Mapping[str, str] | None = None) -> Ledger:
    """The ledger of operator `name` with parameters given as text."""
    return op_function(name)(**parse_op_params(name, texts or {}))


def _kind(annotation: str) -> str | None:
    first = annotation.split("|")[0].strip()
    if first.startswith("tuple[int"):
        return "tuple"
    return first if first in _KINDS else None


def _convert(text: str, kind: str, where: str) -> Any:
    if kind == "str":
        return text
    if kind == "bool":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise InputError(where, f"expected true or false, got {shown(text)}")
    if kind == "tuple":
        return _tuple(text, where)
    if kind == "int":
        if not _INT.fullmatch(text):
            raise InputError(where, f"expected an integer, got {shown(text)}")
        return numbers.to_int(text, where)
    return numbers.to_float(text, where)


def _tuple(text: str, where: str) -> tuple[int, ...]:
    """Integers like 4096x128, 1,0,3 or [1,0,3]; anything else (4xx4, 4.5x4) is an error."""
    body = text.strip()
    if body[:1] in _BRACKETS:
        if body[-1:] != _BRACKETS[body[0]]:
            raise InputError(where, f"unbalanced brackets in {shown(text)}")
        body = body[1:-1].strip()
    if not _TUPLE.fullmatch(body):
        raise InputError(where, f"expected integers like 4096x128 or 1,0,3, got {shown(text)}")
    return tuple(numbers.to_int(p, where) for p in re.split(r"\s*[x,]\s*", body))
