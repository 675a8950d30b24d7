"""Quantized weights: what a checkpoint's `quantization_config` (or `--weights`) stores, and the
kernels that read it.

Stored bytes per quantized weight matrix (out x in; an experts tensor is E such matrices):
- fp8 e4m3 with block scales (DeepSeek-V3's `weight_block_size` [128, 128]): 1 byte per
  weight and one fp32 scale per 128 x 128 block (ceil-divided at the edges);
- AWQ int4 (group g along the input): 4 bits per weight, one fp16 scale and one 4-bit zero
  point per group of g inputs and output column (qzeros packs eight to an int32);
- GPTQ int4 or int8 (Qwen's official GPTQ-Int8 checkpoints): as AWQ at that width (zero points
  packed at the weights' width), plus `g_idx`, one int32 per input row (its act-order map);
  group_size -1 is one group per column;
- bitsandbytes nf4: 4 bits per weight and one fp32 absmax per 64 weights
  (`bnb_4bit_use_double_quant`: the absmax in 8 bits, one fp32 per 256 of them);
- `--weights int8`: 1 byte per weight and one fp16 scale per output channel;
- MXFP4 (gpt-oss's `quant_method` mxfp4): 4-bit e2m1 weights, one e8m0 byte per 32 inputs;
- NVFP4 (NVIDIA ModelOpt, compressed-tensors: float, 4 bits, group 16): 4-bit e2m1 weights,
  one fp8 e4m3 scale per 16 inputs and one fp32 scale per matrix;
- FP8 per tensor (ModelOpt's static FP8; `quant_method` fp8 without `weight_block_size`):
  1 byte per weight, one fp32 scale per matrix;
- FBGEMM FP8 (`fbgemm_fp8`, Meta's Llama-3.1-405B-Instruct-FP8): 1 byte per weight, one fp32
  scale per output channel, activations quantized per token at run time;
- compressed-tensors int4 groups (Kimi-K2.5): as AWQ, without zero points when symmetric.
Quantized: the weights of linear layers and experts, less the modules the config leaves
unquantized (`modules_to_not_convert`, `ignore`, `exclude_modules`: names, globs or `re:`
patterns). Embeddings, norms, biases, routers and the LM head stay in the model dtype, as the
schemes ship them. A pattern naming some layers' copies of a module (GLM's first layers) is
honoured in the stored bytes; the step's GEMMs of a module quantized in any layer are priced
quantized in all (fewer bytes: the bound stays a lower bound).

Kernels: with fp8 weights and dynamic activations (`activation_scheme` dynamic, DeepSeek-V3),
the GEMM runs on the fp8 tensor cores; its activations are quantized per 1 x 128 group in its
prologue (read in bf16, quantisation work of ops/quant.py) and the block scales are applied
per 128-deep slice of the contraction (2 operations per output and slice). Static activations
(`activation_scheme` static, Devstral-Small-2's FP8; ModelOpt's static FP8) run there too,
quantized with one calibrated scale per tensor, as vLLM runs them (W8A8). NVFP4 with 4-bit
activations runs on the fp4 tensor cores (activations quantized per 1 x 16 group, the scales
applied by the block-scaled MMA itself); a card without them (Hopper) has that roof blank, as
an fp8 roof is blank on an A100. Weight-only schemes (int4, int8, nf4, mxfp4, NVFP4 without
activations) run on the tensor cores of the activation dtype and dequantise each weight once
(unpack, subtract the zero point, multiply by the scale: 3 operations per weight on the CUDA
cores), reading the packed weights and their scales and zero points.
"""

from __future__ import annotations

import fnmatch
import functools
import math
import re
from dataclasses import dataclass, replace
from typing import Any

from roofwise.base.dtypes import bytes_per_element
from roofwise.base.errors import InputError
from roofwise.ledgers.ledger import Ledger, Role, Tensor, Work
from roofwise.models.capture import layer_pattern
from roofwise.ops.gemm import gemm
from roofwise.ops.quant import quant_work

CUDA = "cuda_core.fp32"
DEQUANT_OPS = 3  # per weight: unpack, subtract the zero point, multiply by the scale
ACT_GROUP = 128  # fp8 activations: one scale per 1 x 128 group
PER_TENSOR = 1 << 30  # an activation "group" as wide as any row: one static scale


@dataclass(frozen=True)
class WeightScheme:
    """How quantized weights are stored and which kernel reads them."""

    name: str  # "fp8 e4m3, 128x128 block scales", "awq int4, group 128", ...
    weight_dtype: str  # "fp8_e4m3", "int4", "nf4", "int8"
    block: tuple[int, int] | None = None  # fp8: (out, in) rows and columns per fp32 scale
    group: int | None = None  # weight-only: inputs per scale (None: one per output channel)
    scale_dtype: str = "fp16"
    zero_points: bool = False  # a zero point per group, packed at the weights' width
    g_idx: bool = False  # GPTQ's int32 per input row
    double_quant: bool = False  # bitsandbytes nf4 absmax in 8 bits
    activations: str | None = None  # "fp8", "fp4": activations quantized, the GEMM on those
    act_group: int = ACT_GROUP  # tensor cores; inputs per activation scale
    act_per_token: bool = False  # one activation scale per token (row), found at run time
    matrix_scale_bytes: int = 0  # one more scale per matrix (NVFP4's fp32 global scale)
    ignore: tuple[str, ...] = ()  # modules left unquantized (names, globs, `re:` patterns)
    source: str = "quantization_config"

    @property
    def act_groups_label(self) -> str:
        if self.act_per_token:
            return "per token"
        return "per tensor" if self.act_group >= PER_TENSOR else f"1x{self.act_group} group"

    @property
    def contraction_unit(self) -> str | None:
        """The tensor cores the GEMM runs on when activations are quantized too."""
        return None if self.activations is None else f"tensor_core.{self.activations}"

    def matrix_bytes(self, out: int, inp: int) -> float:
        """Bytes one out x in weight matrix is stored in, scales and zero points included."""
        weights = out * inp * bytes_per_element(self.weight_dtype)
        if self.block is not None:
            blocks = math.ceil(out / self.block[0]) * math.ceil(inp / self.block[1])
            return weights + blocks * bytes_per_element(self.scale_dtype)
        if self.weight_dtype == "nf4":
            blocks = math.ceil(out * inp / 64)
            if self.double_quant:
                return weights + blocks * 1 + math.ceil(blocks / 256) * 4
            return weights + blocks * 4
        groups = math.ceil(inp / (self.group or inp)) * out
        extra = groups * bytes_per_element(self.scale_dtype) + self.matrix_scale_bytes
        if self.zero_points:
            extra += groups * bytes_per_element(self.weight_dtype)
        if self.g_idx:
            extra += inp * 4
        return weights + extra

    def stores_quantized(self, name: str) -> bool:
        """Whether the parameter `name` (a module path and `.weight`) is not left out by
        the config's ignore list."""
        module = name.rsplit(".", 1)[0]
        plain, starts, other = _split_ignore(self.ignore)
        if plain and not plain.isdisjoint(_dotted_parts(module)):
            return False
        if starts and any(part[:n] in starts for part in _dotted_suffixes(module)
                          for n in range(len(part) + 1)):
            return False
        return not any(_names(module, pattern) for pattern in other)


@functools.lru_cache(maxsize=16)
def _split_ignore(ignore: tuple[str, ...]
                  ) -> tuple[frozenset[str], frozenset[str], tuple[str, ...]]:
    """The ignore list as `_names` reads it, in three parts: plain dotted names; what globs
    that end in their only `*` start with ("model.layers.1.self_attn*"); the other globs and
    `re:` patterns. A checkpoint lists hundreds of the first two (a Qwen3-235B FP8 283 names,
    a Kimi-K2.6 NVFP4 124 globs), which sets answer at once for each weight."""
    plain, starts, other = set(), set(), []
    for pattern in ignore:
        if pattern.startswith("re:"):
            other.append(pattern)
            continue
        text = _text_decoder_name(pattern).removesuffix(".")
        special = [c for c in text if c in "*?["]
        if not special:
            plain.add(text)
        elif special == ["*"] and text.endswith("*"):
            starts.add(text[:-1])
        else:
            other.append(pattern)
    return frozenset(plain), frozenset(starts), tuple(other)


def _dotted_parts(module: str) -> set[str]:
    """The names a plain ignore entry may give `module` by (`_names`): the path itself and
    each dotted suffix (its last parts), and each dotted prefix (a module above it)."""
    return {*_dotted_suffixes(module),
            *(module[:at] for at, char in enumerate(module) if char == ".")}


def _dotted_suffixes(module: str) -> list[str]:
    """The path and each of its dotted suffixes: a glob `X*` names `module` when one of them
    starts with X (`_names`: `X*`, `X*.*` and `*.X*`)."""
    return [module, *(module[at + 1:] for at, char in enumerate(module) if char == ".")]


def _text_decoder_name(pattern: str) -> str:
    """A multimodal checkpoint's `model.language_model.` (or `language_model.`) prefix read
    as the text decoder's `model.`."""
    for prefix in ("model.language_model.", "language_model.model.", "language_model."):
        if pattern.startswith(prefix):
            return ("model." if prefix != "language_model." else "") + pattern[len(prefix):]
    return pattern


def _names(module: str, pattern: str) -> bool:
    """Whether an ignore-list entry names `module` (or a module above it): a regex after
    `re:` (compressed-tensors), else a glob or a dotted name, matched whole, as a prefix of
    the path or as its last parts ("lm_head", "mlp.gate": never "gate_proj"). A multimodal
    checkpoint's `model.language_model.` prefix is read as the text decoder's `model.`."""
    if pattern.startswith("re:"):
        try:
            return re.fullmatch(pattern[3:], module) is not None or re.fullmatch(
                pattern[3:], module + ".weight") is not None
        except re.error:
            return False
    pattern = _text_decoder_name(pattern).removesuffix(".")
    return (fnmatch.fnmatchcase(module, pattern) or fnmatch.fnmatchcase(module, pattern + ".*")
            or fnmatch.fnmatchcase(module, "*." + pattern))


def scheme_from_config(raw: dict[str, Any], path: str) -> WeightScheme | None:
    """The scheme a config.json's `quantization_config` names; None without one. A method
    roofwise does not price is refused in one line (never priced as bf16 silently)."""
    q, where = raw.get("quantization_config"), f"{path}: quantization_config"
    if q is None:  # a multimodal config may keep its text decoder's inside that decoder's
        inner = [(k, v["quantization_config"]) for k, v in raw.items()
                 if isinstance(v, dict) and v.get("quantization_config") is not None]
        if not inner:
            return None
        key, q = inner[0]
        where = f"{path}: {key}.quantization_config"
    if not isinstance(q, dict):
        raise InputError(where, "expected an object")
    ignore = _ignore_list(q, where)
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8":
        block = q.get("weight_block_size")
        # both schemes vLLM and transformers run fp8 with (dynamic, their default, and
        # static) quantize the activations to fp8: the GEMM runs on the fp8 tensor cores
        scheme = q.get("activation_scheme", "dynamic")
        if scheme not in ("dynamic", "static"):
            raise InputError(f"{where}.activation_scheme",
                             f"expected dynamic or static, got {_got(scheme)}")
        if block is None:
            # no weight_block_size: one fp32 scale per weight matrix (transformers' FP8Linear
            # keeps a scalar weight_scale_inv, vLLM a per-tensor scale); static activations
            # are scaled by one calibrated scale per tensor, as ModelOpt's static FP8
            if scheme == "static":
                return WeightScheme("fp8 e4m3, one scale per matrix, static per-tensor "
                                    "activations", "fp8_e4m3", block=(1 << 30, 1 << 30),
                                    scale_dtype="fp32", activations="fp8",
                                    act_group=PER_TENSOR, ignore=ignore)
            return WeightScheme("fp8 e4m3, one scale per matrix", "fp8_e4m3",
                                block=(1 << 30, 1 << 30), scale_dtype="fp32",
                                activations="fp8", ignore=ignore)
        if not _is_block(block):
            raise InputError(f"{where}.weight_block_size",
                             f"expected [rows, cols] positive integers, got {block!r}")
        if scheme == "static":
            return WeightScheme(f"fp8 e4m3, {block[0]}x{block[1]} block scales, static "
                                "per-tensor activations", "fp8_e4m3",
                                block=(block[0], block[1]), scale_dtype="fp32",
                                activations="fp8", act_group=PER_TENSOR, ignore=ignore)
        return WeightScheme(f"fp8 e4m3, {block[0]}x{block[1]} block scales", "fp8_e4m3",
                            block=(block[0], block[1]), scale_dtype="fp32",
                            activations="fp8", ignore=ignore)
    if method == "fbgemm_fp8":
        return WeightScheme("fp8 e4m3, one scale per output channel, per-token activations",
                            "fp8_e4m3", block=(1, 1 << 30), scale_dtype="fp32",
                            activations="fp8", act_group=PER_TENSOR, act_per_token=True,
                            ignore=ignore)
    if method in ("awq", "gptq"):
        bits = q.get("bits", q.get("w_bit", 4))
        widths = (4, 8) if method == "gptq" else (4,)
        if bits not in widths:
            raise InputError(f"{where}.bits", f"expected {' or '.join(map(str, widths))} "
                                              f"({method} int{'/int'.join(map(str, widths))})"
                                              f", got {bits!r}")
        group = q.get("group_size", q.get("q_group_size", 128))
        if not isinstance(group, int) or (group < 1 and group != -1):
            raise InputError(f"{where}.group_size",
                             f"expected a positive integer or -1, got {group!r}")
        size = None if group == -1 else group
        label = f"group {group}" if size else "per channel"
        return WeightScheme(f"{method} int{bits}, {label}", f"int{bits}", group=size,
                            zero_points=True, g_idx=method == "gptq", ignore=ignore)
    if method == "bitsandbytes":
        if q.get("load_in_4bit") and str(q.get("bnb_4bit_quant_type", "nf4")) == "nf4":
            double = bool(q.get("bnb_4bit_use_double_quant", False))
            return WeightScheme("bitsandbytes nf4" + (", double quant" if double else ""),
                                "nf4", double_quant=double, scale_dtype="fp32")
        raise InputError(where, "expected bitsandbytes with load_in_4bit and nf4 (the only "
                                "bitsandbytes scheme roofwise prices)")
    if method == "mxfp4":
        return _mxfp4(ignore)
    if method in ("modelopt", "compressed-tensors") or (not method and "quant_algo" in q):
        return _grouped_scheme(q, where, ignore)
    raise InputError(f"{where}.quant_method",
                     f"{_got(method) if method else 'none given'} is not priced; expected fp8, "
                     "fbgemm_fp8, awq, gptq, bitsandbytes (nf4), mxfp4, modelopt or "
                     "compressed-tensors, or --weights to override")


def _mxfp4(ignore: tuple[str, ...]) -> WeightScheme:
    """MXFP4, weight-only: gpt-oss's `mxfp4`, compressed-tensors' mxfp4-pack-quantized."""
    return WeightScheme("mxfp4 (e2m1, one e8m0 scale per 32), weight-only", "fp4_e2m1",
                        group=32, scale_dtype="uint8", ignore=ignore)


def _is_block(value: Any) -> bool:
    """Whether a config's block size is [rows, cols], positive integers."""
    return isinstance(value, list) and len(value) == 2 and all(
        isinstance(b, int) and b > 0 for b in value)


def _got(value: Any) -> str:
    return repr(value) if isinstance(value, str) else f"{type(value).__name__} {value!r}"


def _ignore_list(q: dict[str, Any], where: str) -> tuple[str, ...]:
    for key in ("modules_to_not_convert", "ignore", "exclude_modules"):
        found = q.get(key)
        if found is None:
            continue
        if not isinstance(found, list) or not all(isinstance(p, str) for p in found):
            raise InputError(f"{where}.{key}", "expected a list of module names or patterns")
        return tuple(found)
    return ()


def _grouped_scheme(q: dict[str, Any], where: str, ignore: tuple[str, ...]) -> WeightScheme:
    """ModelOpt's and compressed-tensors' schemes: one `config_groups` entry (its weights and
    input activations), or ModelOpt's bare `quant_algo` (FP8, NVFP4)."""
    groups = q.get("config_groups")
    if groups is None:
        algo = str(q.get("quant_algo", "")).upper()
        found: dict[str, Any] = {
            "FP8": {"weights": {"type": "float", "num_bits": 8},
                    "input_activations": {"type": "float", "num_bits": 8}},
            "NVFP4": {"weights": {"type": "float", "num_bits": 4, "group_size": 16},
                      "input_activations": {"type": "float", "num_bits": 4,
                                            "group_size": 16}}}.get(algo, {})
        if not found:
            raise InputError(f"{where}.quant_algo", f"{_got(q.get('quant_algo'))} is not "
                                                    "priced; expected FP8 or NVFP4")
    elif not isinstance(groups, dict) or len(groups) != 1:
        count = len(groups) if isinstance(groups, dict) else 0
        raise InputError(f"{where}.config_groups",
                         f"{count} groups; expected one (mixed schemes are not priced yet: "
                         "--weights to override)")
    else:
        found = next(iter(groups.values()))
    if not isinstance(found, dict) or not isinstance(found.get("weights"), dict):
        raise InputError(f"{where}.config_groups", "expected a group with its weights")
    w, a = found["weights"], found.get("input_activations")
    kind, bits, size = w.get("type"), w.get("num_bits"), w.get("group_size")
    acts = (a.get("type"), a.get("num_bits")) if isinstance(a, dict) else None
    if kind == "float" and bits == 4 and size in (16, 32):
        if size == 16:  # NVFP4
            return WeightScheme("nvfp4 (e2m1, fp8 scale per 16, fp32 per matrix)"
                                + (", fp4 activations" if acts == ("float", 4) else
                                   ", weight-only"), "fp4_e2m1", group=16,
                                scale_dtype="fp8_e4m3", matrix_scale_bytes=4,
                                activations="fp4" if acts == ("float", 4) else None,
                                act_group=16, ignore=ignore)
        if acts is None:  # MXFP4 weight-only (compressed-tensors' mxfp4-pack-quantized)
            return _mxfp4(ignore)
    if kind == "float" and bits == 8:
        fp8 = acts == ("float", 8)
        strategy = w.get("strategy") or "tensor"
        block = w.get("block_structure")
        if strategy == "block" and _is_block(block):
            rows, cols, label = block[0], block[1], f"{block[0]}x{block[1]} block scales"
        elif strategy == "channel":
            rows, cols, label = 1, 1 << 30, "one scale per output channel"
        elif strategy == "tensor":  # static: one activation scale per tensor too
            rows, cols, label = 1 << 30, 1 << 30, "one scale per matrix"
            if fp8 and isinstance(a, dict) and a.get("dynamic") is False:
                return WeightScheme("fp8 e4m3, one scale per matrix, static per-tensor "
                                    "activations", "fp8_e4m3", block=(rows, cols),
                                    scale_dtype="fp32", activations="fp8",
                                    act_group=PER_TENSOR, ignore=ignore)
        else:
            raise InputError(f"{where}.config_groups.weights.strategy",
                             f"{_got(strategy)} is not priced; expected tensor, channel or "
                             "block")
        return WeightScheme(f"fp8 e4m3, {label}" + ("" if fp8 else ", weight-only"),
                            "fp8_e4m3", block=(rows, cols), scale_dtype="fp32",
                            activations="fp8" if fp8 else None, ignore=ignore)
    if kind == "int" and bits == 4 and acts is None and (
            (isinstance(size, int) and size > 0) or size is None):
        symmetric = w.get("symmetric", True) is not False
        label = f"group {size}" if size else "per channel"
        return WeightScheme(f"int4 weight-only, {label}"
                            + ("" if symmetric else ", zero points"), "int4", group=size,
                            zero_points=not symmetric, ignore=ignore)
    raise InputError(f"{where}.config_groups",
                     f"weights {_got(kind)} {bits!r}-bit, group {size!r}, activations "
                     f"{acts!r} are not priced; expected NVFP4, MXFP4, FP8 or int4 weight-only "
                     "(--weights to override)")


def parse_weights(text: str) -> WeightScheme:
    """`--weights fp8`, `int8`, `int4` or `int4:64` (the group size, default 128)."""
    name, _, group_text = text.partition(":")
    if name == "fp8" and not group_text:
        return WeightScheme("fp8 e4m3, 128x128 block scales (--weights)", "fp8_e4m3",
                            block=(128, 128), scale_dtype="fp32", activations="fp8",
                            source="--weights")
    if name == "int8" and not group_text:
        return WeightScheme("int8 weight-only, per-channel scales (--weights)", "int8",
                            source="--weights")
    if name == "int4":
        try:
            group = int(group_text) if group_text else 128
        except ValueError:
            group = 0
        if group < 1:
            raise InputError("--weights", f"expected int4:GROUP with a positive group, got "
                                          f"{text!r}")
        return WeightScheme(f"int4 weight-only, group {group}, zero points (--weights)",
                            "int4", group=group, zero_points=True, source="--weights")
    raise InputError("--weights", f"expected fp8, int8, int4 or int4:GROUP, got {text!r}")


def stored_weight_bytes(weights: tuple[tuple[str, tuple[int, ...], bool], ...],
                        scheme: WeightScheme, dtype: str) -> float:
    """Every parameter's stored bytes: quantized ones by the scheme, the rest in `dtype`."""
    total = 0.0
    for name, shape, quantized in weights:
        if quantized and len(shape) >= 2 and scheme.stores_quantized(name):
            matrices = math.prod(shape[:-2])
            total += matrices * scheme.matrix_bytes(shape[-2], shape[-1])
        else:
            total += math.prod(shape) * bytes_per_element(dtype)
    return total


def quantized_linear_layers(weights: tuple[tuple[str, tuple[int, ...], bool], ...],
                            scheme: WeightScheme) -> set[str]:
    """Layer patterns (indices as *) whose linear weight is quantized in some layer."""
    return {layer_pattern(name.rsplit(".", 1)[0]) for name, shape, quantized in weights
            if quantized and len(shape) == 2 and scheme.stores_quantized(name)}


def quantized_experts_layers(weights: tuple[tuple[str, tuple[int, ...], bool], ...],
                             scheme: WeightScheme) -> set[str]:
    """Layer patterns of the experts modules whose 3-D weights are quantized in some layer."""
    return {layer_pattern(name.rsplit(".", 1)[0]) for name, shape, quantized in weights
            if quantized and len(shape) == 3 and scheme.stores_quantized(name)}


_MM = re.compile(r"^(\[\d+\] \w+, )?\[(\d+), (\d+)\] (\w+), \[(\d+), (\d+)\] (\w+)$")
WEIGHT_GEMMS = ("aten::mm", "aten::addmm")
_WEIGHT_DTYPE = re.compile(r"(\[\d+, \d+\]) \w+$")  # the weight, last in `_MM`'s shapes


def quantized_gemm(shapes: str, scheme: WeightScheme) -> Ledger | None:
    """A weight GEMM `[m, k] dt, [k, n] dt` (addmm: `[n] dt, ` first, the bias) as the
    scheme's kernel; None for other shapes."""
    found = _MM.match(shapes)
    if found is None:
        return None
    m, k, dtype, k2, n = (int(found[2]), int(found[3]), found[4], int(found[5]),
                          int(found[6]))
    if k != k2:
        return None
    base = gemm(m, n, k, dtype=dtype, bias=found[1] is not None)
    a, _, c, *bias = base.tensors
    b = Tensor("b", (k, n), scheme.weight_dtype, Role.INPUT)
    tensors = [a, b, c, *bias, *_scale_tensors(scheme, n, k)]
    work = list(base.work)
    unit = scheme.contraction_unit
    if unit is not None:
        contraction = Work(unit, "contraction", 2 * m * n * k,
                           f"A @ B in {scheme.activations}, 2*m*n*k")
        groups = m * math.ceil(k / min(scheme.act_group, k))
        applied = []  # block scales per slice; a group scale is applied by the MMA itself
        if scheme.block is not None:
            slices = math.ceil(k / scheme.block[1])
            applied = [Work(CUDA, "arithmetic", 2 * m * n * slices,
                            f"block scales per {min(scheme.block[1], k)}-deep slice, "
                            "2/output/slice")]
        work = [contraction, *quant_work(m * k, groups, scheme.act_groups_label),
                *applied, *(w for w in base.work if w.label.startswith("bias"))]
        roof = unit
    else:
        work.append(Work(CUDA, "arithmetic", DEQUANT_OPS * k * n,
                         "dequantise: unpack, - zero, * scale, 3/weight"))
        roof = base.roof
    return Ledger(name=f"gemm_{scheme.weight_dtype}", roof=roof, tensors=tuple(tensors),
                  work=tuple(work), notes=(scheme.name,))


def _scale_tensors(scheme: WeightScheme, n: int, k: int) -> list[Tensor]:
    """The scales (and zero points, g_idx) a (k x n) stored weight is read with."""
    if scheme.block is not None:
        return [Tensor("b_scales", (math.ceil(n / scheme.block[0]),
                                    math.ceil(k / min(scheme.block[1], k))),
                       scheme.scale_dtype, Role.LOOKUP)]
    if scheme.weight_dtype == "nf4":
        blocks = math.ceil(n * k / 64)
        if scheme.double_quant:
            return [Tensor("absmax_8bit", (blocks,), "uint8", Role.LOOKUP),
                    Tensor("absmax_scales", (math.ceil(blocks / 256),), "fp32", Role.LOOKUP)]
        return [Tensor("absmax", (blocks,), "fp32", Role.LOOKUP)]
    groups = math.ceil(k / (scheme.group or k))
    found = [Tensor("b_scales", (groups, n), scheme.scale_dtype, Role.LOOKUP)]
    if scheme.matrix_scale_bytes:
        found.append(Tensor("b_matrix_scale", (scheme.matrix_scale_bytes,), "uint8",
                            Role.LOOKUP))
    if scheme.zero_points:
        found.append(Tensor("b_zeros", (groups, n), scheme.weight_dtype, Role.LOOKUP))
    if scheme.g_idx:
        found.append(Tensor("g_idx", (k,), "int32", Role.LOOKUP))
    return found


def quantized_experts(ledger: Ledger, scheme: WeightScheme) -> Ledger:
    """The fused experts' weights stored by the scheme, and its GEMMs on the scheme's roof."""
    tensors: list[Tensor] = []
    weight_elements = 0
    for t in ledger.tensors:
        if t.name in ("w_gate_up", "w_down"):
            experts, out, inp = t.shape
            weight_elements += t.elements
            tensors.append(replace(t, dtype=scheme.weight_dtype))
            extra = experts * (scheme.matrix_bytes(out, inp)
                               - out * inp * bytes_per_element(scheme.weight_dtype))
            tensors.append(Tensor(f"{t.name}_scales", (math.ceil(extra),), "uint8",
                                  Role.LOOKUP))
        else:
            tensors.append(t)
    unit = scheme.contraction_unit
    work = []
    for w in ledger.work:
        if unit is not None and w.op_class == "contraction":
            work.append(replace(w, unit=unit))
        else:
            work.append(w)
    if unit is None:
        work.append(Work(CUDA, "arithmetic", DEQUANT_OPS * weight_elements,
                         "dequantise the touched experts' weights, 3/weight"))
    roof = unit or ledger.roof
    return replace(ledger, roof=roof, tensors=tuple(tensors), work=tuple(work),
                   notes=(*ledger.notes, scheme.name))


def quantize_capture(capture: Any, scheme: WeightScheme) -> Any:
    """The captured step with its weight GEMMs and experts read as the scheme stores them,
    and its weight bytes as stored."""
    linear = quantized_linear_layers(capture.weights, scheme)
    experts = quantized_experts_layers(capture.weights, scheme)
    done: dict[int, Any] = {}  # id of an op -> its quantized form: a repeated layer's ops
    ops = []                   # are the same objects (models/repeats.py), read once
    for op in capture.ops:
        if id(op) not in done:
            ledger = op.ledger
            shapes = op.shapes
            if ledger is not None and op.op in WEIGHT_GEMMS and op.layer in linear:
                quantized = quantized_gemm(op.shapes, scheme)
                if quantized is not None:  # the weight shown as stored, as it is priced
                    ledger, shapes = quantized, _WEIGHT_DTYPE.sub(
                        rf"\1 {scheme.weight_dtype}", op.shapes)
            elif ledger is not None and op.op == "moe experts (fused)" and op.layer in experts:
                ledger = quantized_experts(ledger, scheme)
            done[id(op)] = (op if ledger is op.ledger else
                            replace(op, ledger=ledger, shapes=shapes))
        ops.append(done[id(op)])
    return replace(capture, ops=tuple(ops),
                   weight_bytes=stored_weight_bytes(capture.weights, scheme, capture.dtype))
