"""A Hugging Face style config.json in, a transformers config out (no weights, no network), and
its tensor-parallel shard: what one of N devices holds.

Sharding follows Megatron-style tensor parallelism as serving stacks run it: attention heads
(query and KV; KV heads are replicated when there are fewer of them than devices), MLP and
expert intermediate columns, and the vocabulary (embedding and LM head) split N ways; hidden
size, norms, router and MLA latent projections stay whole on every device.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofwise.base.errors import InputError

_SHARDED = ("intermediate_size", "moe_intermediate_size", "vocab_size")
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


@dataclass(frozen=True)
class ModelConfig:
    path: str
    raw: dict[str, Any]
    hf: Any  # transformers.PretrainedConfig

    @property
    def layers(self) -> int:
        return int(self.hf.num_hidden_layers)


def load_config(path: str | Path) -> ModelConfig:
    """Read config.json and build the transformers config offline."""
    target = Path(path)
    if not target.is_file():
        raise InputError(str(target), "no such file; expected a Hugging Face config.json")
    try:
        raw = json.loads(target.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(str(target), f"not JSON ({exc}); expected a config.json") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("model_type"), str):
        raise InputError(f"{target}: model_type", "expected a config.json naming its "
                                                  "model_type (llama, mixtral, deepseek_v2, ...)")
    offline_transformers()
    try:
        from transformers import AutoConfig
    except ImportError:
        raise InputError("roofwise model", "needs transformers: pip install 'roofwise[models]'"
                         ) from None
    fields = {k: v for k, v in raw.items()
              if k not in ("model_type", "architectures", *_CODE_KEYS)}
    try:
        hf = AutoConfig.for_model(raw["model_type"], **fields)
    except (ValueError, KeyError, TypeError) as exc:
        text = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
        raise InputError(f"{target}: model_type", f"transformers cannot build it ({text})"
                         ) from None
    return ModelConfig(str(target), raw, hf)


def shard(config: ModelConfig, tp: int) -> ModelConfig:
    """The config one of `tp` devices runs; InputError naming a size that does not divide."""
    if tp == 1:
        return config
    import copy

    hf = copy.deepcopy(config.hf)
    heads = int(hf.num_attention_heads)
    if hasattr(hf, "head_dim") and not hasattr(hf, "qk_nope_head_dim"):  # MLA sets its own
        hf.head_dim = hf.head_dim or hf.hidden_size // heads  # fixed before heads are split
    _divide(hf, "num_attention_heads", tp, config.path)
    kv = getattr(hf, "num_key_value_heads", None)
    if kv is not None:
        if kv >= tp:
            _divide(hf, "num_key_value_heads", tp, config.path)
        elif tp % kv:
            raise InputError(f"{config.path}: num_key_value_heads",
                             f"{kv} KV heads can be neither split nor replicated over {tp} "
                             "devices; expected --tp a multiple of it")
        else:
            hf.num_key_value_heads = 1  # each device keeps one replicated KV head
    for name in _SHARDED:
        if getattr(hf, name, None):
            _divide(hf, name, tp, config.path)
    return ModelConfig(config.path, config.raw, hf)


def _divide(hf: Any, name: str, tp: int, path: str) -> None:
    value = int(getattr(hf, name))
    if value % tp:
        raise InputError(f"{path}: {name}", f"{value} does not divide over --tp {tp}")
    setattr(hf, name, value // tp)
