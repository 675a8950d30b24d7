"""A Hugging Face style config.json in, a transformers config out (no weights, no network), and
its tensor-parallel shard: what one of N devices holds.

Sharding follows Megatron-style tensor parallelism as serving stacks run it: attention heads
(query and KV; KV heads are replicated when there are fewer of them than devices), MLP and
expert intermediate columns, and the vocabulary (embedding and LM head) split N ways; hidden
size, norms, router and MLA latent projections stay whole on every device.
"""

from __future__ import annotations

import copy
import logging
import os
import re
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from roofwise.base.errors import InputError
from roofwise.base.numbers import DuplicateKey, kind, parse_json
from roofwise.base.text import shown

# MLP widths (by each architecture's name for them) and the vocabulary: split N ways.
_SHARDED = ("intermediate_size", "ffn_dim", "ffn_hidden_size", "n_inner",
            "moe_intermediate_size", "vocab_size")
# Keys that point transformers at code or files outside the config: a config's folder may hold
# `modeling_*.py` that `auto_map` would import (and run), or hub references it would download.
# roofwise reads sizes only, so they are dropped before transformers sees the config.
_CODE_KEYS = ("auto_map", "_name_or_path", "name_or_path", "trust_remote_code",
              "custom_pipelines", "_commit_hash")


def offline_transformers() -> None:
    """Keep the hub and transformers offline for this process: a projection reads one local
    file, and no config may make it open a connection (set before transformers is imported,
    which reads these once)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    # No compiled kernels from the hub either. transformers' kernelize is off; and importing
    # some modeling files (GPT-Neo's) probes for flash attention by loading the hub's
    # flash-attention kernels, offline from the local cache: the `kernels` package is pointed
    # at a cache that can hold none (a path under the null device), and at no local kernels.
    os.environ["USE_HUB_KERNELS"] = "NO"
    os.environ["KERNELS_CACHE"] = os.devnull
    os.environ.pop("LOCAL_KERNELS", None)
    # its warning that offline it cannot check a kernel's publisher is about a load that
    # then finds nothing: not a line for the user
    logging.getLogger("kernels").setLevel(logging.ERROR)


def import_models_package() -> None:
    """Import `transformers.models` with its folder scanned once, not twice.

    transformers builds the import structure of its `models` folder (some 400 model folders,
    every file read for its `__all__`) on `import transformers` and again on importing
    `transformers.models`: the same folder under two cache keys (the folder, then the
    package's `__init__.py`), 0.23 s each on a 2-core machine, a tenth of a projection. The
    second build is handed the first's structure (the same folder's, equal by construction
    and checked in tests/models/test_config_import.py); the function is restored at once."""
    import sys

    if "transformers.models" in sys.modules:
        return
    import transformers
    from transformers.utils import import_utils

    build = getattr(import_utils, "define_import_structure", None)
    if build is None:  # another transformers: its own way
        return
    folder = Path(transformers.__file__).parent / "models"

    def once(module_path: Any, prefix: str | None = None) -> Any:
        if prefix is None and Path(module_path) == folder / "__init__.py":
            return build(folder)
        return build(module_path, prefix)

    import_utils.define_import_structure = once  # type: ignore[assignment]
    try:
        import transformers.models
    finally:
        import_utils.define_import_structure = build


# Sizes a config may set, with the largest roofwise accepts: generous for any real model (the
# largest public ones have 126 layers, a hidden size of 18,432, 128 heads, 256 experts and a
# 262,144 vocabulary), small enough that a typo (1e6 layers) is refused at once instead of
# building a million modules. The lower bound is 1 unless said (0: may be absent in effect).
SIZE_LIMITS: dict[str, tuple[int, int]] = {
    "num_hidden_layers": (1, 1024), "hidden_size": (1, 1 << 20),
    "num_attention_heads": (1, 1 << 14), "num_key_value_heads": (1, 1 << 14),
    "head_dim": (1, 1 << 16), "intermediate_size": (1, 1 << 24), "ffn_dim": (1, 1 << 24),
    "ffn_hidden_size": (1, 1 << 24), "n_inner": (1, 1 << 24),
    "moe_intermediate_size": (1, 1 << 24), "shared_expert_intermediate_size": (0, 1 << 24),
    "vocab_size": (1, 1 << 24), "max_position_embeddings": (1, 1 << 30),
    "num_local_experts": (1, 1 << 14), "num_experts": (1, 1 << 14),
    "n_routed_experts": (1, 1 << 14), "num_experts_per_tok": (1, 1 << 14),
    "n_shared_experts": (0, 1 << 14), "first_k_dense_replace": (0, 1024),
    "kv_lora_rank": (1, 1 << 20), "q_lora_rank": (1, 1 << 20),
    "qk_nope_head_dim": (1, 1 << 16), "qk_rope_head_dim": (1, 1 << 16),
    "v_head_dim": (1, 1 << 16), "sliding_window": (0, 1 << 30),
    "num_kv_heads": (1, 1 << 14), "multi_query_group_num": (1, 1 << 14),
}
_PER_LAYER = ("intermediate_size",)  # a list, one per layer, in some configs (Gemma-3n)
ACTIVATION_KEYS = ("hidden_act", "hidden_activation", "activation_function")
ROPE_KEYS = ("rope_scaling", "rope_parameters")
MAX_CONFIG_BYTES = 4 << 20  # a config.json is a few kB; the largest (id2label maps) < 1 MB
MAX_DEPTH = 32  # configs nest 3 or 4 levels (text_config, rope_parameters)


@dataclass(frozen=True)
class DecoderSizes:
    """The sizes of the priced decoder (one shard's) that are read after its capture: the
    memory fit's activation estimate and the position limit. Plain values, so that a stored
    capture (models/stored.py) brings them back without transformers."""

    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int | None
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    qk_nope_head_dim: int = 0  # multi-head latent attention's head parts; 0 without MLA
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    intermediate_size: int | tuple[int, ...] | None = None  # a tuple: one per layer
    moe_intermediate_size: int | None = None
    num_experts_per_tok: int | None = None
    n_shared_experts: int = 0
    vocab_size: int = 0
    max_position_embeddings: int | None = None


def per_layer_names(hf: Any) -> set[str]:
    """The attributes a heterogeneous config (transformers' per-layer configs: Gemma-4's
    global layers have other KV heads and head size than its sliding ones) keeps per layer;
    empty for every other config."""
    try:
        names = getattr(hf, "per_layer_attributes", None)
    except Exception:  # a config class of its own: no per-layer attributes
        return set()
    return set(names) if isinstance(names, (set, frozenset, list, tuple)) else set()


def config_values(hf: Any, name: str) -> list[Any]:
    """Every value `name` takes in `hf`, layer by layer where it is kept per layer (each
    distinct value once, in layer order), else `[hf.name]`; [] when absent. A heterogeneous
    config refuses to read a per-layer attribute globally, so it is never read that way."""
    if name in per_layer_names(hf):
        return list(dict.fromkeys(getattr(layer, name, None) for layer in hf.per_layer_config))
    value = getattr(hf, name, None)
    return [] if value is None else [value]


def config_value(hf: Any, name: str) -> Any:
    """`hf.name`, None when absent; for an attribute kept per layer, its largest value (a
    size read here bounds the step: the widest layer sets an activation peak)."""
    values = config_values(hf, name)
    if len(values) > 1 and all(isinstance(v, int) for v in values):
        return max(values)
    return values[0] if values else None


def sizes_of(hf: Any) -> DecoderSizes:
    """`hf`'s sizes as transformers resolves them (aliases such as GPT-2's `n_embd` read
    through the config's attribute map; a per-layer size, its largest layer's)."""

    def whole(name: str) -> int | None:
        value = config_value(hf, name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    inter = config_value(hf, "intermediate_size")
    return DecoderSizes(
        int(hf.num_hidden_layers), int(hf.hidden_size), whole("num_attention_heads"),
        whole("num_key_value_heads"), whole("head_dim"), whole("qk_nope_head_dim") or 0,
        whole("qk_rope_head_dim") or 0, whole("v_head_dim") or 0,
        tuple(int(v) for v in inter) if isinstance(inter, (list, tuple)) else whole(
            "intermediate_size"),
        whole("moe_intermediate_size"), whole("num_experts_per_tok"),
        whole("n_shared_experts") or 0, whole("vocab_size") or 0,
        whole("max_position_embeddings"))


@dataclass(frozen=True)
class ModelConfig:
    path: str
    raw: dict[str, Any]
    # transformers.PretrainedConfig: the decoder that is priced; None for a config brought
    # back with its stored captures (`models/stored.py`), loaded again if a step is missing
    hf: Any
    sizes: DecoderSizes
    notes: tuple[str, ...] = ()  # what of the config is not priced (a vision tower)
    causal_lm_key: type | None = None  # the config class transformers' causal-LM map knows
    tp: int = 1  # tensor-parallel devices `hf` is one shard of
    # the multimodal config `hf` is the text decoder of (Mistral-3's, with a Pixtral vision
    # tower): its other parts hold weights resident beside the decoder; None otherwise
    outer: Any = None
    # about the file itself, for the user (a model_type its architectures disagree with)
    warnings: tuple[str, ...] = ()

    @property
    def layers(self) -> int:
        return self.sizes.num_hidden_layers


def load_config(path: str | Path) -> ModelConfig:
    """Read config.json and build the transformers config offline; InputError (one line,
    naming the file and the field) for anything transformers or roofwise would refuse later."""
    target = Path(path)
    raw = read_config_json(target)
    offline_transformers()
    try:
        import_models_package()
        from transformers import AutoConfig  # noqa: F401  (its absence is the ImportError)
    except ImportError:
        raise InputError("roofwise model", "needs transformers: pip install 'roofwise[models]'"
                         ) from None
    # a copy: transformers writes into the nested dicts it is given (rope_scaling gains a
    # rope_theta), and `raw` stays the file as read (what a stored capture is keyed by)
    fields = copy.deepcopy({k: v for k, v in raw.items()
                            if k not in ("model_type", "architectures", *_CODE_KEYS)})
    from transformers.utils import logging as hf_logging

    _check_fields(str(target), raw["model_type"], fields)
    hf_logging.set_verbosity_error()  # its warnings would be lines on stderr beside ours
    built = _build(str(target), raw["model_type"], fields)
    built, where, built_raw, loose = _loose_text_config(str(target), built, raw, fields)
    hf, key, notes = _decoder(where, built)
    text = decoder_of(hf)
    _check_built(_decoder_where(where, built, text), text,
                 _decoder_fields(built, text, built_raw))
    return ModelConfig(str(target), raw, hf, sizes_of(text),
                       (*loose, *notes, *_cross_attention_note(text)), key,
                       outer=built if hf is not built else None,
                       warnings=architecture_warnings(str(target), raw))


def _cross_attention_note(text: Any) -> tuple[str, ...]:
    """A note for a decoder whose `cross_attention_layers` attend to image tokens only
    (Llama-3.2-Vision's mllama: 20 of its 100 layers): transformers skips them on a text step,
    so the step prices the other layers' work while the weights count all of them; a request
    with an image runs them too (their attention over the image's tokens, their MLP)."""
    listed = getattr(text, "cross_attention_layers", None)
    total = text.num_hidden_layers
    cross = sum(isinstance(i, int) and 0 <= i < total for i in listed or ()) if isinstance(
        listed, (list, tuple)) else 0
    if not cross:  # none, or none of them among the layers the config builds
        return ()
    return (f"{text.model_type}: {cross} of its {total} layers cross-attend to image tokens "
            "only (cross_attention_layers): a text step runs none of them (their weights count "
            "as resident), a request with an image runs them too",)


def architecture_warnings(path: str, raw: dict[str, Any]) -> tuple[str, ...]:
    """A line where the file's `architectures` names a class transformers ships for other
    model types than its `model_type` (GLM-4.5-Air shipped as `glm` with
    Glm4MoeForCausalLM): the config is built and priced as `model_type` says, which may not
    be the model the checkpoint holds. Nothing for a class transformers does not ship (remote
    code's, never run)."""
    from transformers.models.auto import modeling_auto

    names = raw.get("architectures")
    if not isinstance(names, list) or not names or not isinstance(names[0], str):
        return ()
    types: set[str] = set()
    for attribute in dir(modeling_auto):
        mapping = getattr(modeling_auto, attribute)
        if not attribute.endswith("_MAPPING_NAMES") or not isinstance(mapping, dict):
            continue
        for model_type, found in mapping.items():
            if names[0] in (found if isinstance(found, (list, tuple)) else (found,)):
                types.add(model_type)
    model_type = raw["model_type"]
    if not types or model_type in types:
        return ()
    listed = ", ".join(sorted(types)[:3]) + (", ..." if len(types) > 3 else "")
    return (f"{path}: model_type {shown(model_type, 40)} disagrees with architectures "
            f"({shown(names[0], 60)[1:-1]}, transformers' class for {listed}); priced as "
            "model_type says",)


def _build(path: str, model_type: str, fields: dict[str, Any]) -> Any:
    """transformers' config of `model_type` from `fields` (checked), offline; InputError
    naming the field transformers' validator names (`path`: the file, and the object in it
    the fields are)."""
    import transformers
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if model_type not in CONFIG_MAPPING:  # transformers would list its 500 model types
        raise InputError(f"{path}: model_type",
                         f"{shown(model_type, 60)} is not a model type transformers "
                         f"{transformers.__version__} ships, and roofwise runs no remote code "
                         "(auto_map is never run)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return AutoConfig.for_model(model_type, **fields)
    except Exception as exc:  # transformers' validators raise their own classes, and others
        field = _FIELD.search(str(exc))
        if field is None:
            found = _validator_fault(CONFIG_MAPPING[model_type], fields, str(exc))
            if found is not None:
                raise InputError(f"{path}: {found[0]}", found[1]) from None
        raise InputError(f"{path}: {field.group(1) if field else 'model_type'}",
                         f"transformers cannot build the config ({reason_of(exc)})") from None


_VALIDATOR = re.compile(r"validator '(\w+)'")
_READS = re.compile(r"\bself\.(\w+)")


def _validator_fault(config_class: type, fields: dict[str, Any], text: str
                     ) -> tuple[str, str] | None:
    """The field a config class's validator refused, where its message names none
    (Falcon-H1's "mamba_n_heads must divide mamba_expand * hidden_size" is about
    `mamba_d_ssm` when that is set, and transformers' default 1,024 stands in when the file
    lacks it): of the fields the validator reads, the first the file does not give (its
    default failed the check), else the first its message names; None when neither is
    found. The field and the reason, for an InputError."""
    import inspect

    found = _VALIDATOR.search(text)
    method = getattr(config_class, found.group(1), None) if found else None
    try:
        source = inspect.getsource(method) if method is not None else ""
    except (OSError, TypeError):
        source = ""
    reads = [name for name in dict.fromkeys(_READS.findall(source))
             if hasattr(config_class, name) and not callable(getattr(config_class, name))]
    why = reason_of(Exception(text))
    aliases = getattr(config_class, "attribute_map", {})
    given = {*fields, *(aliases[key] for key in fields if key in aliases)}
    default = next((name for name in reads if name not in given), None)
    if default is not None:
        return default, (f"not given, and transformers' default "
                         f"({shown(getattr(config_class, default), 30)}) fails its check "
                         f"({why}); expected the checkpoint's {default}")
    named = next((name for name in reads if re.search(rf"\b{name}\b", text)), None)
    if named is not None:
        return named, f"transformers cannot build the config ({why})"
    return None


# The names transformers' `get_text_config` looks under for a model's text decoder.
_TEXT_CONFIG_NAMES = ("text_config", "decoder", "generator")


def _loose_text_config(path: str, built: Any, raw: dict[str, Any], fields: dict[str, Any]
                       ) -> tuple[Any, str, dict[str, Any], tuple[str, ...]]:
    """The config to price, where in the file it is (`path`, or `path: text_config`), the
    fields of the file it was built from, and a note, where `built`'s class takes no text
    sub-config yet the file gives one (mlc-llm's Ministral-3 names the text model's type,
    `ministral3`, at the top level and its sizes under `text_config`): transformers then keeps
    the object as a plain dict, which its own `get_text_config` hands back as the decoder. A
    `text_config` object with no decoder sizes beside it is the decoder, built as its own
    `model_type` (else the top level's); anything else left loose (a `decoder` or `generator`
    value, a `text_config` beside top-level sizes) is ambiguous and refused naming it.
    `built` unchanged when nothing is loose."""
    from transformers import PretrainedConfig

    loose = [name for name in _TEXT_CONFIG_NAMES if name in raw and getattr(
        built, name, None) is not None and not isinstance(getattr(built, name), PretrainedConfig)]
    if not loose:
        return built, path, raw, ()
    name = loose[0]
    model_type = raw["model_type"]
    aliases = getattr(built, "attribute_map", {})
    sized = [key for key in ("hidden_size", "num_hidden_layers")
             if key in raw or any(alias in raw for alias, to in aliases.items() if to == key)]
    value = raw[name]
    if name != "text_config" or len(loose) > 1 or sized or not isinstance(value, dict):
        beside = (f"beside a top-level {sized[0]}" if sized else
                  f"not an object ({_got(value)})" if not isinstance(value, dict) else
                  f"beside {', '.join(loose[1:])}")
        raise InputError(f"{path}: {name}",
                         f"{model_type!r} has no {name} of its own and this one is {beside}; "
                         "expected the decoder's fields at the top level, or under "
                         "text_config with none at the top")
    nested = value.get("model_type")
    text_type = nested if isinstance(nested, str) else model_type
    text_fields = {k: v for k, v in fields[name].items()
                   if k not in ("model_type", "architectures", *_CODE_KEYS)}
    where = f"{path}: {name}"
    _check_fields(where, text_type, text_fields)
    text, where, text_raw, inner = _loose_text_config(
        where, _build(where, text_type, text_fields), {**value, "model_type": text_type},
        text_fields)
    towers = [key for key, found in raw.items()
              if key.endswith("_config") and key != name and isinstance(found, dict)
              and key != "quantization_config"]
    rest = (f"; the rest ({', '.join(towers)}) is not priced (a decode step runs none of it) "
            "and its weights are not counted in the weights or memory" if towers else "")
    return text, where, text_raw, (
        f"{model_type}: priced from its text_config ({text_type}) only, as {model_type!r} "
        f"takes no text_config of its own and the top level names no decoder sizes{rest}",
        *inner)


def decoder_of(hf: Any) -> Any:
    """The text decoder's config of the config that is built: itself, or, for a multimodal
    model built whole (Qwen3-VL), its text config, where the sizes that are priced live."""
    text = hf.get_text_config(decoder=True)
    return text if text is not None else hf


_FIELD = re.compile(r"(?:for field|Field) '(\w+)'")
_VALIDATOR_PREFIX = re.compile(r"^(?:Class validation error for validator '\w+':|"
                               r"Validation error for field '\w+':)\s*")


def reason_of(exc: BaseException) -> str:
    """An exception from transformers or torch as one short clause: its text, or its class
    when it has none (transformers' validators spread one reason over indented lines, after
    a header naming the validator)."""
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    text = _VALIDATOR_PREFIX.sub("", text)
    return shown(text, 110)[1:-1] if text else type(exc).__name__


def _decoder_fields(built: Any, hf: Any, raw: dict[str, Any]) -> dict[str, Any]:
    """The fields of `raw` that the priced decoder config came from: the top level, or the
    sub-config (text_config) it was built from."""
    if hf is built:
        return raw
    for key in getattr(built, "sub_configs", {}):
        if getattr(built, key, None) is hf:
            found = raw.get(key)
            return found if isinstance(found, dict) else {}
    return raw  # a view of the top level (BART's decoder)


def _decoder_where(where: str, built: Any, hf: Any) -> str:
    """Where in the file the priced decoder's fields are: `where`, or `where: text_config`
    when it is a sub-config (llava-1.5's config names only a few of its Llama decoder's
    fields under text_config, and a refusal must say that is where one is missing)."""
    if hf is built:
        return where
    for key in getattr(built, "sub_configs", {}):
        if getattr(built, key, None) is hf:
            return f"{where}: {key}"
    return where  # a view of the top level (BART's decoder)


def read_config_json(target: Path) -> dict[str, Any]:
    """The JSON object of a config file, read within limits: UTF-8 (a BOM allowed), at most
    MAX_CONFIG_BYTES and MAX_DEPTH levels, no key named twice, a `model_type` string."""
    if not target.is_file():
        raise InputError(str(target), "no such file; expected a Hugging Face config.json")
    size = target.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise InputError(str(target), f"{size:,} bytes; expected a config.json of at most "
                                      f"{MAX_CONFIG_BYTES:,}")
    data = target.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(str(target), f"byte {exc.start} is not UTF-8; expected a config.json "
                                      "in UTF-8") from None
    try:
        raw = parse_json(text, unique_keys=True)
    except DuplicateKey as exc:
        raise InputError(f"{target}: {shown(exc.key)}", "named twice; which value is meant is "
                                                        "ambiguous: give each key once") from None
    except RecursionError:
        raise InputError(str(target), f"nesting deeper than {MAX_DEPTH} levels; expected a "
                                      "config.json") from None
    except ValueError as exc:  # JSONDecodeError, or an integer of over a million digits
        raise InputError(str(target), f"not JSON ({shown(str(exc), 120)}); expected a "
                                      "config.json") from None
    if _depth(raw) > MAX_DEPTH:
        raise InputError(str(target), f"nesting deeper than {MAX_DEPTH} levels; expected a "
                                      "config.json")
    if not isinstance(raw, dict) or not isinstance(raw.get("model_type"), str):
        raise InputError(f"{target}: model_type", "expected a config.json naming its "
                                                  "model_type (llama, mixtral, deepseek_v2, ...)")
    return raw


def _depth(value: Any) -> int:
    """Nesting levels of parsed JSON, without recursion (the parser already bounds it)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = (item.values() if isinstance(item, dict) else item
                    if isinstance(item, list) else ())
        for child in children:
            if isinstance(child, (dict, list)):
                if level + 1 > MAX_DEPTH:
                    return level + 1
                stack.append((child, level + 1))
        deepest = max(deepest, level)
    return deepest


def _check_fields(path: str, model_type: str, fields: dict[str, Any]) -> None:
    """Sizes and activations checked (and whole sizes written as floats made integers) before
    transformers sees them, top level and nested decoder configs alike; transformers itself
    would refuse them deep inside model construction, if at all."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    try:
        aliases = {alias: name for name, alias in CONFIG_MAPPING[model_type].attribute_map.items()}
    except KeyError:
        aliases = {}  # an unknown model_type: AutoConfig says so
    for key, value in list(fields.items()):
        where = f"{path}: {key}"
        name = aliases.get(key, key)
        if name in SIZE_LIMITS and isinstance(value, list) and name in _PER_LAYER:
            fields[key] = [_size(v, f"{where}[{i}]", *SIZE_LIMITS[name])
                           for i, v in enumerate(value)]
        elif name in SIZE_LIMITS and value is not None:
            fields[key] = _size(value, where, *SIZE_LIMITS[name])
        elif name in ACTIVATION_KEYS and value is not None:
            _activation(value, where)
        elif key.endswith("_config") and isinstance(value, dict):
            nested = value.get("model_type")
            _check_fields(f"{path}: {key}", nested if isinstance(nested, str) else "", value)


def _size(value: Any, where: str, low: int, high: int) -> int:
    expected = f"an integer from {low:,} to {high:,}"
    if isinstance(value, float) and value.is_integer() and low <= value <= high:
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InputError(where, f"expected {expected}, got {_got(value)}")
    return value


def _got(value: Any) -> str:
    return kind(value) if isinstance(value, (str, type(None), dict, list)) else shown(value)


def _activation(value: Any, where: str) -> None:
    from transformers.activations import ACT2FN

    if not isinstance(value, str) or value not in ACT2FN:
        raise InputError(where, f"got {_got(value)}; expected an activation transformers "
                                "knows (silu, gelu, gelu_new, gelu_pytorch_tanh, relu, ...)")


def _check_rope(path: str, hf: Any, raw: dict[str, Any]) -> None:
    """Every rope type of the built config (flat, or one per layer type) is one transformers
    has a rotary embedding for; it would refuse it only inside model construction."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    found = getattr(hf, "rope_parameters", None)
    if not isinstance(found, dict):
        return
    groups = [v for v in found.values() if isinstance(v, dict)] or [found]
    known = ("default", *sorted(ROPE_INIT_FUNCTIONS))
    for group in groups:
        rope_type = group.get("rope_type", "default")
        if rope_type not in (*known, getattr(hf, "default_rope_type", "default")):
            key = next((k for k in ROPE_KEYS if k in raw), ROPE_KEYS[1])
            raise InputError(f"{path}: {key}.rope_type", f"expected a rope type transformers "
                                                         f"knows ({', '.join(known)}), got "
                                                         f"{_got(rope_type)}")


def _decoder(path: str, hf: Any) -> tuple[Any, type, tuple[str, ...]]:
    """The decoder config to build and price, the config class whose causal-LM entry builds
    it, and notes: the config itself when transformers has a causal LM for it, else its text
    decoder (a multimodal config's language model, whose vision tower is then not priced, and
    said so)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING,
    )

    text = hf.get_text_config(decoder=True)
    text_class = MODEL_FOR_CAUSAL_LM_MAPPING.get(type(text), None) if text is not hf else None
    own = MODEL_FOR_CAUSAL_LM_MAPPING.get(type(hf), None)
    if text_class is not None and getattr(text_class, "config_class", None) is type(text):
        key = type(text)
    elif own is not None and getattr(own, "config_class", None) is type(hf):
        return hf, type(hf), ()
    elif own is not None and text is not hf and getattr(own, "config_class", None) is type(text):
        key = type(hf)  # mllama: the outer config's entry builds from its text config
    elif own is not None and text is hf:
        # a model type transformers runs with another family's class (EXAONE 3.5 and
        # InternLM3 with Llama's, Sarvam-M with DeepSeek-V3's): built as transformers builds it
        return hf, type(hf), ()
    elif text is not hf and type(hf) in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING:
        # no causal LM for its text decoder alone (Qwen3-VL): the whole model is built and
        # run on text, which takes none of its vision tower's work
        found = MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING[type(hf)]
        whole = getattr(found[0] if isinstance(found, (tuple, list)) else found, "__name__",
                        "its image-text-to-text class")
        return hf, type(hf), (f"{hf.model_type}: built whole ({whole}) and run on text: its "
                              "vision tower does no work in a step, its weights are resident",)
    else:
        raise InputError(f"{path}: model_type",
                         f"transformers has no causal-LM model for {hf.model_type!r}; "
                         "expected a decoder-only language model (llama, qwen2, mixtral, ...)")
    return text, key, (f"{hf.model_type}: its text decoder ({text.model_type}) only; the rest "
                  "(a vision or audio tower) is not priced: a decode step runs none of it",)


def _check_built(path: str, hf: Any, raw: dict[str, Any]) -> None:
    """What every decoder needs, on the config transformers built (aliases resolved). The
    hidden size and the layer count must be the config's own: transformers would fill in its
    defaults (4,096 and 32 for llama) without a word."""
    aliases = getattr(hf, "attribute_map", {})  # either way round: GPT-2's maps the usual
    for name in ("hidden_size", "num_hidden_layers"):  # name to its own (n_layer), EXAONE's
        value = config_value(hf, name)                 # its own (num_layers) to the usual
        named = {name, aliases.get(name), *(k for k, v in aliases.items() if v == name)}
        # or a property of the class, worked out from fields the config names (LongCat-Flash's
        # layers from its `num_layers` of two sublayers each, Nemotron-H's from its pattern)
        derived = isinstance(getattr(type(hf), name, None), property)
        if value is None or (named.isdisjoint(raw) and not derived):
            # the class's default (a class attribute; GPT-2's under its own name, n_embd)
            default = next((getattr(type(hf), key, None) for key in named
                            if isinstance(key, str) and isinstance(getattr(type(hf), key, None),
                                                                   int)), None)
            unsaid = (f" (transformers would fill in its default, {default:,}, without a word)"
                      if isinstance(default, int) and not isinstance(default, bool) else "")
            raise InputError(f"{path}: {name}", f"missing; expected {hf.model_type}'s "
                                                f"{name.replace('_', ' ')} as an integer"
                                                f"{unsaid}")
        _size(value, f"{path}: {name}", *SIZE_LIMITS[name])
    for heads in config_values(hf, "num_attention_heads"):
        for kv in config_values(hf, "num_key_value_heads"):
            if isinstance(heads, int) and isinstance(kv, int) and kv > 0 and heads % kv:
                raise InputError(f"{path}: num_key_value_heads",
                                 f"{kv} KV heads do not divide {heads} query heads; expected a "
                                 "divisor")
    heads = config_value(hf, "num_attention_heads")
    if (isinstance(heads, int) and config_value(hf, "head_dim") is None
            and hf.hidden_size % heads):
        raise InputError(f"{path}: num_attention_heads",
                         f"{heads} heads do not divide hidden_size {hf.hidden_size} and there "
                         "is no head_dim; expected a divisor or a head_dim")
    _check_rope(path, hf, raw)


def shard(config: ModelConfig, tp: int) -> ModelConfig:
    """The config one of `tp` devices runs; InputError naming a size that does not divide.

    The head size is pinned before the heads are split (a config without `head_dim` would
    otherwise make half the heads twice as wide); the MLP width is split under whichever name
    the architecture gives it (`intermediate_size`, OPT's `ffn_dim`, Falcon's
    `ffn_hidden_size`, GPT-2's `n_inner`, 4 x hidden when unset). Attention modules that size
    their heads from `hidden_size` whatever the config says (GPT-NeoX, OPT, Falcon) are
    narrowed once built (`capture.shard_attention`), from `tp` and the pinned `head_dim`."""
    if tp == 1:
        return config
    if decoder_of(config.hf) is not config.hf:
        raise InputError(f"{config.path}: model_type",
                         f"a multimodal model built whole ({config.hf.model_type}); --tp {tp} is "
                         "not priced for it yet; expected --tp 1")
    per_layer = per_layer_names(config.hf)
    if per_layer:
        raise InputError(f"{config.path}: {sorted(per_layer)[0]}",
                         f"kept per layer ({', '.join(sorted(per_layer))}: a heterogeneous "
                         f"config); --tp {tp} is not priced for it yet; expected --tp 1")
    hf = copy.deepcopy(config.hf)
    heads = getattr(hf, "num_attention_heads", None)
    if not isinstance(heads, int):  # no attention (an SSM): the capture says what it is
        return replace(config, hf=hf, sizes=sizes_of(hf), tp=tp)
    if not hasattr(hf, "qk_nope_head_dim"):  # MLA sets its own head sizes
        _pin_head_dim(hf, getattr(hf, "head_dim", None) or hf.hidden_size // heads)
    _divide(hf, "num_attention_heads", tp, config.path)
    kv_name = next((n for n in ("num_key_value_heads", "num_kv_heads")
                    if getattr(hf, n, None) is not None), None)
    if kv_name is not None and not _multi_query(hf):
        kv = int(getattr(hf, kv_name))
        if kv >= tp:
            _divide(hf, kv_name, tp, config.path)
        elif tp % kv:
            raise InputError(f"{config.path}: {kv_name}",
                             f"{kv} KV heads can be neither split nor replicated over {tp} "
                             "devices; expected --tp a multiple of it")
        else:
            setattr(hf, kv_name, 1)  # each device keeps one replicated KV head
    if getattr(hf, "n_inner", 0) is None:  # GPT-2 style: 4 x hidden when unset
        hf.n_inner = 4 * int(hf.hidden_size)
    for name in _SHARDED:
        if getattr(hf, name, None):
            _divide(hf, name, tp, config.path)
    pad = getattr(hf, "pad_token_id", None)
    if isinstance(pad, int) and pad >= getattr(hf, "vocab_size", pad + 1):
        hf.pad_token_id = 0  # its row is on another device's share; which row costs nothing
    return replace(config, hf=hf, sizes=sizes_of(hf), tp=tp)


def _pin_head_dim(hf: Any, value: int) -> None:
    """Set the head size of a config, also where it is a read-only property computed from
    hidden_size and the heads (Falcon): a subclass of this one config then states it."""
    try:
        hf.head_dim = value
    except AttributeError:
        hf.__class__ = type(type(hf).__name__, (type(hf),), {"head_dim": value})


def _multi_query(hf: Any) -> bool:
    """Falcon's multi-query attention: one KV head whatever `num_kv_heads` says."""
    return bool(getattr(hf, "multi_query", False)) and not getattr(
        hf, "new_decoder_architecture", False)


def _divide(hf: Any, name: str, tp: int, path: str) -> None:
    """`name` split over `tp` devices: a size, or a list of sizes (one per layer)."""
    found = getattr(hf, name)
    values = [int(v) for v in found] if isinstance(found, list) else [int(found)]
    for value in values:
        if value % tp:
            raise InputError(f"{path}: {name}", f"{value} does not divide over --tp {tp}")
    split = [v // tp for v in values]
    setattr(hf, name, split if isinstance(found, list) else split[0])
