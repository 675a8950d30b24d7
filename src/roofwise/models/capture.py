"""Run one prefill or decode step of a transformers model on fake tensors and record every op.

Why FakeTensorMode: the model runs with shapes and dtypes only, no weights, no memory, no
GPU (a forward on the meta device fails in transformers' mask code; see docs/references.md).
It is built on the meta device (no dispatch per weight), and the weights a step runs on are
made fake tensors before it (`_make_fake`). The meta-tensor tracer's dispatch mode
(`capture/tracer.py`) records each aten op with the tensors it reads and writes and counts
its work; each op becomes one ledger. A static KV cache of `context + seq` tokens is
preallocated, so a decode step reads the cache and writes only its new tokens, as a serving
stack's paged cache does.

What a serving stack fuses is priced as the fused kernel from its shapes (operator library):
- attention (`F.scaled_dot_product_attention`): the flash / paged-decode kernel, causal and
  bottom-right aligned, on the KV heads it reads (SDPA is called with `enable_gqa`, so
  transformers' `repeat_kv` copy, which no fused kernel makes, never runs); a layer's
  `sliding_window` limits each query to its last `window` keys, prefill included;
  transformers' GQA folding of query heads into the query length for a decode step is undone
  (the heads and tokens are what the kernel sees); a chunked layer (Llama-4's local layers)
  reads the keys from its first query's chunk start and scores each query's own chunk only;
- RMSNorm and LayerNorm modules: one fused norm kernel;
- MoE experts (modules holding 3-D `down_proj` and `gate_up_proj`, or `up_proj` where the
  experts are not gated: Nemotron-H's and Ergo's relu2 experts): `ops.moe` with a
  balanced routing (every expert gets tokens*top_k/num_experts, the fewest tokens per
  expert); the router's own ops are recorded as they run. Experts that take every token
  (Llama-4's dense form) are priced routed with the config's top-k, and their block's copy
  of each token per expert, scaling and sum, which no serving kernel makes, are not recorded.
A class that refuses SDPA but calls attention through transformers' attention interface
(Gemma-2, gpt-oss) is built eager and run through the SDPA path, so that its attention is
still priced as the fused kernel; one with its attention written inline (BLOOM) runs eager and
is priced op by op; a recurrent layer (an SSM's scan) is refused by name. The notes say which.
With `fused=False` attention runs transformers' eager (matmul, softmax, matmul) form and norms
run op by op; the experts are always priced by `ops.moe` (their data-dependent routing cannot
run without data).

A decoder's layers of one kind (`models/repeats.py`: same modules, sizes, window, layer
type) are recorded once per step and their ops repeated for the others, as the forward
through every layer would have recorded them (the tests compare the two on real configs).

The LM head is applied to the last token of each sequence only (`logits_to_keep=1`), as in
serving. Multi-head latent attention decodes in the absorbed form serving stacks run
(`models/attention_forms.py`); `mla="expanded"` keeps transformers' form, the latent cache
re-expanded through `kv_b_proj` every step. Prefill runs expanded in both.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import math
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from roofwise.base.dtypes import bytes_per_element
from roofwise.base.errors import InputError
from roofwise.base.text import shown
from roofwise.ledgers.ledger import Ledger, Role, Tensor
from roofwise.models import attention_forms, repeats
from roofwise.models.config import ModelConfig, config_value, decoder_of, reason_of
from roofwise.ops.attention import attention, causal_pairs
from roofwise.ops.moe import moe
from roofwise.ops.norms import layernorm, rmsnorm

TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
PHASES = ("prefill", "decode")


@dataclass(frozen=True)
class CapturedOp:
    """One kernel of the step: where in the model it ran, what it is, its ledger."""

    layer: str  # module path, layer indices as "*" (identical layers share it)
    op: str  # "aten::mm", "attention (fused)", "rmsnorm (fused)", "moe experts (fused)"
    shapes: str
    ledger: Ledger | None
    reason: str = ""  # why there is no ledger, or the caveat of the one there is
    cache_write: bool = False


@dataclass(frozen=True)
class Capture:
    ops: tuple[CapturedOp, ...]
    weight_bytes: int
    kv_cache_bytes: int
    tokens: int  # new tokens this step (batch * seq)
    layers: int
    hidden: int
    dtype: str
    kv_dtype: str
    # per cache layer: elements one sequence stores per position (keys and values), and the
    # positions it keeps (a sliding window) or None (all of them); what memory fits read
    kv_layers: tuple[tuple[int, int | None], ...] = ()
    # every parameter: (name, shape, stored quantized by a quantized checkpoint: the weights
    # of linear layers and of experts; embeddings, norms, biases and routers stay as they are)
    weights: tuple[tuple[str, tuple[int, ...], bool], ...] = ()
    mla: str | None = None  # the form multi-head latent attention ran in; None: no MLA
    notes: tuple[str, ...] = ()  # how the step was priced, and what of the model was not


# torch's fake-tensor exceptions for an op whose result depends on tensor values
_DATA_DEPENDENT = frozenset(("DataDependentOutputException", "DynamicOutputShapeException"))


def layer_pattern(path: str) -> str:
    return re.sub(r"\.\d+(?=\.|$)", ".*", path) or "(model)"


# Step sizes roofwise accepts: far beyond any serving batch or context (Llama 4 Scout's 10 M
# tokens fit), small enough that no product of them wraps an int64 inside torch.
STEP_LIMITS = {"--batch": (1, 1 << 20), "--seq": (1, 1 << 24), "--context": (0, 1 << 27)}
MAX_STEP_TOKENS = 1 << 24  # new tokens per step (batch x seq)
# Layers whose work is a recurrence (an SSM's selective scan, RWKV's time mixing, a gated delta
# net): transformers' reference form runs them token by token, and the operator library has
# no fused ledger for them yet, so they are refused by name rather than priced wrong.
_RECURRENT = re.compile(r"Mamba|Mixer|Rwkv|Recurrent|Delta(Net|Attention)|LinearAttention|"
                        r"ShortConv|[Ll]stm|LSTM|SSM|Ssm")


def check_step(batch: int, seq: int, context: int) -> None:
    """InputError naming the option when a step's sizes are out of range."""
    for option, value in (("--batch", batch), ("--seq", seq), ("--context", context)):
        low, high = STEP_LIMITS[option]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InputError(option, f"expected an integer from {low:,} to {high:,}, got "
                                     f"{shown(value)}")
    if batch * seq > MAX_STEP_TOKENS:
        raise InputError("--batch x --seq", f"{batch * seq:,} new tokens per step; expected at "
                                            f"most {MAX_STEP_TOKENS:,}")


def attention_plan(model_class: Any, fused: bool) -> tuple[str, str, str]:
    """(implementation to build with, implementation to run with, the note that says how
    attention is priced). transformers refuses SDPA for some classes (Gemma-2 and gpt-oss:
    softcapping and sinks, which SDPA lacks; BLOOM, GPT-Neo, MPT: attention written inline).
    Those whose attention goes through transformers' attention interface are built eager and
    run through the SDPA path, which gives the fused kernel's shapes; the others run eager and
    are priced op by op, and the note says which."""
    name = model_class.__name__
    if not fused:
        return "eager", "eager", ("attention priced op by op as transformers' eager form runs "
                                  "it (matmul, softmax, matmul), not as a fused kernel (--unfused)")
    fused_note = "attention priced as one fused kernel per layer (flash prefill / paged decode)"
    if getattr(model_class, "_supports_sdpa", False):
        return "sdpa", "sdpa", fused_note
    if getattr(model_class, "_supports_attention_backend", False):
        return "eager", "sdpa", (f"{fused_note}; {name} refuses SDPA, so it is built eager and "
                                 "its attention priced from the fused kernel's shapes")
    return "eager", "eager", (f"{name} has no fused attention path in transformers: its "
                              "attention priced op by op as its eager form runs it (matmul, "
                              "softmax, matmul), more traffic than a fused kernel")


def capture_step(config: ModelConfig, phase: str, batch: int, seq: int, context: int,
                 dtype: str = "bf16", kv_dtype: str | None = None,
                 fused: bool = True, mla: str = "absorbed") -> Capture:
    """Record one step: `seq` new tokens per sequence over `context` cached ones. `mla`: the
    form of multi-head latent attention at decode (models/attention_forms.py)."""
    return capture_steps(config, [Step(phase, batch, seq, context)], dtype, kv_dtype, fused,
                         mla)[0]


@dataclass(frozen=True)
class Step:
    """The shape of one step: `seq` new tokens per sequence over `context` cached ones."""

    phase: str
    batch: int
    seq: int
    context: int


def capture_steps(config: ModelConfig, steps: Sequence[Step], dtype: str = "bf16",
                  kv_dtype: str | None = None, fused: bool = True,
                  mla: str = "absorbed", repeat_layers: bool = True) -> list[Capture]:
    """Record each step, in order, on one model built once (a sweep or a serving grid: the
    model's build is the same for every step, each step runs on its own new cache).
    `repeat_layers`: record one decoder layer of each kind and repeat its ops for the others
    (`models/repeats.py`); False records every layer (what the tests compare it with)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from transformers.utils import logging as hf_logging

    if dtype not in TORCH_DTYPES:
        raise InputError("--dtype", f"expected one of {', '.join(TORCH_DTYPES)}, got {dtype!r}")
    for step in steps:
        check_step(step.batch, step.seq, step.context)
    kv = kv_dtype or dtype
    bytes_per_element(kv, "--kv-dtype")
    hf = config.hf
    model_class = causal_lm_class(config)
    _refuse_recurrent(config.path, None, model_class)
    build_with, run_with, attention_note = attention_plan(model_class, fused)
    hf._attn_implementation = build_with
    hf_logging.set_verbosity_error()
    if mla not in attention_forms.MLA_FORMS:
        raise InputError("--mla", f"expected one of {', '.join(attention_forms.MLA_FORMS)}, "
                                  f"got {mla!r}")
    with warnings.catch_warnings(), _quiet_torch():
        warnings.simplefilter("ignore")
        try:
            model = _built(model_class, hf, getattr(torch, TORCH_DTYPES[dtype]))
        except Exception as exc:  # transformers or torch refusing a size, a type, a value
            raise InputError(config.path, f"transformers cannot build a {hf.model_type} model "
                                          f"from it ({reason_of(exc)})") from None
        tower, tower_note = resident_rest(config, getattr(torch, TORCH_DTYPES[dtype]))
    with warnings.catch_warnings(), _quiet_torch(), FakeTensorMode(allow_non_fake_inputs=True):
        warnings.simplefilter("ignore")
        _refuse_recurrent(config.path, model)
        _refuse_bidirectional(config.path, model, config.layers)
        # MLA sets its own head sizes (the config's head_dim is its rope part), and a
        # DeepSeek-V3.2 indexer, replicated on every device as serving stacks run it, would
        # pass for a block that sized its heads from hidden_size
        if config.tp > 1 and not hasattr(hf, "qk_nope_head_dim"):
            shard_attention(config.path, model, int(hf.head_dim), config.tp)
        model.eval()
        if run_with != build_with:
            model.config._attn_implementation = run_with
            attention_note += _without_softcap(model)
        has_mla = any(attention_forms.is_mla(m) for m in model.modules())
        size = torch.empty((), dtype=getattr(torch, TORCH_DTYPES[dtype])).element_size()
        weights = int(sum(p.numel() * p.element_size() for p in model.parameters())
                      + sum(math.prod(shape) for _, shape, _ in tower) * size)
        weight_list = (*_weights(model), *tower)
        layers = repeats.layer_list(model, config.layers)
        chosen = _representatives(layers, config) if repeat_layers else None
        hooked = _hook_plan(model, fused)
        built = _Model(model, layers, hooked, frozenset(_dense_moe_blocks(hooked)), {})
        captures = []
        for step in steps:
            absorb = has_mla and mla == "absorbed" and fused and step.phase == "decode"
            ops, cache, patched = _run_step(config, built, step, kv, fused, absorb, chosen)
            kv_elements = sum(t.numel() for layer in getattr(cache, "layers", ())
                              for t in _cache_tensors(layer))
            kv_layers = _kv_layers(cache, step.batch,
                                   config_value(decoder_of(hf), "sliding_window"))
            captures.append(Capture(
                ops, weights, math.ceil(kv_elements * bytes_per_element(kv)),
                step.batch * step.seq, config.layers, config.sizes.hidden_size, dtype, kv,
                kv_layers,
                weight_list, ("absorbed" if patched else "expanded") if has_mla else None,
                (*config.notes, *_dtype_note(config.raw, dtype), *tower_note,
                 attention_note)))
    return captures


# A checkpoint's stored dtype as config.json names it (torch_dtype; transformers 5: dtype)
_STORED_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


def _dtype_note(raw: dict[str, Any], dtype: str) -> tuple[str, ...]:
    """A note where the config says its weights are stored at another width than `--dtype`
    prices them (OLMo-2's and BERT's float32 checkpoints, at bf16 by default): the weights,
    memory and traffic are of the priced dtype, which halves a float32 checkpoint without a
    word otherwise. The text decoder's own dtype where the top level names none."""
    found = [(key, part.get(key)) for part in (raw, raw.get("text_config"))
             if isinstance(part, dict) for key in ("torch_dtype", "dtype")]
    key, stored = next(((k, v) for k, v in found if isinstance(v, str) and v in _STORED_BYTES),
                       ("", None))
    priced = TORCH_DTYPES.get(dtype)
    if stored is None or priced is None or _STORED_BYTES[stored] == _STORED_BYTES[priced]:
        return ()
    return (f"the config's {key} is {stored} ({_STORED_BYTES[stored]} bytes a weight as "
            f"stored); weights, KV cache and activations priced in {dtype} (--dtype), "
            f"{_STORED_BYTES[priced]} bytes each",)


Weights = tuple[tuple[str, tuple[int, ...], bool], ...]


def resident_rest(config: ModelConfig, dtype: Any) -> tuple[Weights, tuple[str, ...]]:
    """The weights of the multimodal model the priced decoder is the text decoder of that the
    decoder does not hold (Mistral-3's Pixtral vision tower and projector), as `_weights`
    lists them, and a note: a text step runs none of them, yet a server holds them. Counted
    from the model transformers builds (on the meta device, its text decoder cut to one
    layer, whose modules are left out with the LM head); quantized only by a quantization_config
    of the whole model's, less its ignore list. Under --tp each 2-D or wider weight
    is split over the devices along its first dimension, as vLLM's default
    (mm_encoder_tp_mode weights) splits the tower's linear layers."""
    import torch
    from transformers.initialization import no_init_weights
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING,
        MODEL_MAPPING,
    )

    outer = config.outer
    if outer is None:
        return (), ()
    text = outer.get_text_config(decoder=True)
    try:
        whole = copy.deepcopy(outer)
        cut = whole.get_text_config(decoder=True)
        cut.num_hidden_layers = 1
        if isinstance(getattr(cut, "layer_types", None), list):
            cut.layer_types = cut.layer_types[:1]
        mapping = (MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING
                   if type(whole) in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING else MODEL_MAPPING)
        found = mapping[type(whole)]
        model_class: Any = found[0] if isinstance(found, (tuple, list)) else found
        if not str(model_class.__module__).startswith("transformers."):
            return (), (f"{outer.model_type}: the weights of the rest of the model (a vision "
                        "or audio tower) are not counted in the weights or memory",)
        with torch.device("meta"), no_init_weights():
            model = model_class._from_config(whole, dtype=dtype)
    except Exception as exc:  # a model transformers cannot build whole on the meta device
        return (), (f"{outer.model_type}: the weights of the rest of the model (a vision or "
                    f"audio tower) are not counted in the weights or memory: transformers "
                    f"cannot build it whole ({reason_of(exc)})",)
    decoder = {name for name, module in model.named_modules()
               if type(getattr(module, "config", None)) is type(text) and name}
    head = model.get_output_embeddings()
    left_out = {id(p) for p in head.parameters()} if head is not None else set()
    # stored quantized only under a quantization_config of the whole model's (a text
    # decoder's own, or --weights, leaves the tower in the model's dtype)
    whole_quantized = isinstance(config.raw.get("quantization_config"), dict)
    rest = tuple((name, _split(shape, config.tp), quantized and whole_quantized)
                 for name, shape, quantized in _weights(model)
                 if not any(name.startswith(f"{prefix}.") for prefix in decoder)
                 and id(model.get_parameter(name)) not in left_out)
    if not rest:
        return (), ()
    parts = sorted({name.split(".")[1] if name.startswith("model.") else name.split(".")[0]
                    for name, _, _ in rest})
    count = sum(math.prod(shape) for _, shape, _ in rest)
    share = f" per device (split over {config.tp})" if config.tp > 1 else ""
    return rest, (f"{outer.model_type}: its {', '.join(parts)} ({count:,} parameters{share}) "
                  "count in the weights and memory: resident, though a text step runs none "
                  "of them",)


def _split(shape: tuple[int, ...], tp: int) -> tuple[int, ...]:
    """One device's share of a weight split along its first dimension (when it divides)."""
    if tp > 1 and len(shape) >= 2 and shape[0] % tp == 0:
        return (shape[0] // tp, *shape[1:])
    return shape


def _built(model_class: Any, hf: Any, dtype: Any) -> Any:
    """The model on the meta device: shapes and dtypes, no dispatch through the fake mode per
    weight (a tenth of a second for DeepSeek-V3's 61 layers); `_make_fake` makes fake the
    weights a step runs on. No initialiser runs (there are no values to initialise); the
    tying `init_weights` would have done (an output projection sharing the embedding) is
    kept."""
    import torch
    from transformers.initialization import no_init_weights

    with torch.device("meta"), no_init_weights():
        model = model_class._from_config(hf, dtype=dtype)
    model.tie_weights()
    return model


@dataclass(frozen=True)
class _Model:
    """The model as built once for a capture's steps, and what every step reuses of it."""

    model: Any
    layers: Any  # the decoder's list of layers (repeats.layer_list), or None
    hooked: tuple[tuple[str, Any, Callable[..., CapturedOp] | None], ...]  # `_hook_plan`
    quiet: frozenset[str]  # `_dense_moe_blocks`
    made: dict[int, tuple[Any, Any]]  # a meta tensor's id -> it and its fake tensor


def _skipped(layers: Any, chosen: list[int] | None) -> set[int]:
    """The ids of the modules of every layer a step skips (one whose representative is
    another layer): none of them runs."""
    skipped: set[int] = set()
    if chosen is not None and layers is not None:
        for i, layer in enumerate(layers):
            if chosen[i] != i:
                skipped.update(id(m) for m in layer.modules())
    return skipped


def _make_fake(built: _Model, skipped: set[int]) -> None:
    """Every meta tensor a step can touch made a fake one, inside the fake mode: the
    parameters, buffers and tensor attributes of every module but those of the layers the
    step skips. A tensor held in two places (tied weights) becomes one fake tensor; a later
    step makes only what the earlier ones left."""
    import torch

    made = built.made

    def fake(tensor: torch.Tensor) -> torch.Tensor:
        if id(tensor) not in made:  # the meta tensor kept beside it: its id stays its own
            empty = torch.empty(tensor.shape, dtype=tensor.dtype)
            made[id(tensor)] = (tensor, torch.nn.Parameter(
                empty, requires_grad=tensor.requires_grad)
                if isinstance(tensor, torch.nn.Parameter) else empty)
        return made[id(tensor)][1]

    for module in built.model.modules():
        if id(module) in skipped:
            continue
        for table in (module._parameters, module._buffers):
            for name, tensor in table.items():
                if tensor is not None and tensor.is_meta:
                    table[name] = fake(tensor)
        for name, value in list(vars(module).items()):
            if isinstance(value, torch.Tensor) and value.is_meta:
                setattr(module, name, fake(value))


def _representatives(layers: Any, config: ModelConfig) -> list[int] | None:
    """Per decoder layer (`layers`: the decoder's list of them, or None), the layer recorded
    for it (`models/repeats.py`); None when every layer is recorded (no single list of
    decoder layers, or no two of a kind)."""
    if layers is None:
        return None
    text = decoder_of(config.hf)
    chosen = repeats.representatives([repeats.kind_of(layer, i, text, config.layers)
                                      for i, layer in enumerate(layers)])
    return chosen if chosen != list(range(config.layers)) else None


def _warm_up_in_place(cache: Any, recorder: Any) -> bool:
    """Leave a new cache of transformers' plain static layers as a one-token update of each
    layer would (one position written, the layer initialized), without a forward: each layer's
    backing tensors are made, muted, by its own first update inside the recorded step, when
    their shapes (heads, widths, dtypes: per layer, per tensor-parallel shard, per MLA form)
    are known; a sparse-attention layer's indexer keys (DeepSeek-V3.2, GLM-5) likewise, by
    its first indexer update. False (nothing done) for a cache with any other layer type (a
    linear-attention layer): that one warms up by a forward."""
    import torch
    from transformers import cache_utils
    from transformers.cache_utils import StaticLayer, StaticSlidingWindowLayer

    indexed = getattr(cache_utils, "StaticIndexedLayer", None)
    known = (StaticLayer, StaticSlidingWindowLayer, *([indexed] if indexed else []))
    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer) not in known for layer in layers):
        return False
    for layer in layers:  # before the recorded forward: nothing here is recorded
        layer.cumulative_length.add_(1)
        if isinstance(layer, StaticSlidingWindowLayer):
            layer.cumulative_length_int += 1
        layer.is_initialized = True
        if getattr(layer, "keys", None) is None:  # until its first update makes them: a
            # layer the step never updates reads as holding nothing (Mllama's cross-attention
            # layers, skipped on text, ask whether they hold the image's states)
            layer.keys = layer.values = torch.empty(0, device="meta")
        layer.update = _first_call(layer, "update", recorder, functools.partial(
            _first_keys_and_values, layer))
        if indexed is not None and isinstance(layer, indexed):
            layer.update_indexer = _first_call(layer, "update_indexer", recorder,
                                               functools.partial(_first_indexer_keys, layer))
    return True


def _first_keys_and_values(layer: Any, key_states: Any, value_states: Any, *_: Any) -> None:
    """A static layer's key and value buffers allocated, in the shapes of its first update."""
    layer.lazy_initialization(key_states, value_states)


def _first_indexer_keys(layer: Any, indexer_key_states: Any, *_: Any) -> None:
    """An indexed layer's indexer key buffer allocated and one position counted as written,
    as a one-token update would leave it."""
    layer.lazy_initialization_indexer(indexer_key_states)
    layer.indexer_cumulative_length.add_(1)


def _first_call(layer: Any, method: str, recorder: Any, initialize: Callable[..., Any]
                ) -> Callable[..., Any]:
    """A cache layer's `method` for its first call: `initialize` on the call's arguments
    (muted: a serving stack's cache exists before the step), then the class's own method,
    from then on."""
    def first(*args: Any, **kwargs: Any) -> Any:
        delattr(layer, method)
        recorder.muted += 1
        try:
            initialize(*args)
        finally:
            recorder.muted -= 1
        return getattr(layer, method)(*args, **kwargs)
    return first


def _run_step(config: ModelConfig, built: _Model, step: Step, kv: str, fused: bool,
              absorb_mla: bool, chosen: list[int] | None
              ) -> tuple[tuple[CapturedOp, ...], Any, bool]:
    """One recorded forward of `step` on a new static cache of context + seq positions: its
    ops, the cache and whether MLA ran absorbed. The model's hooks and patches last for this
    step only, so that the next step runs on the model as built.

    The cache is warmed up first (a one-token update of each layer, muted: transformers
    attends a cache's first update over the new tokens only, where a step over `context`
    cached tokens reads them all): in place on a cache of plain static layers, by a muted
    one-token forward on any other.

    With `chosen` (each layer's representative) and a cache warmed in place, only the
    representatives run and their ops are repeated for the others; a run that does not fit
    that (`Repeats.ops`) is recorded again whole."""
    import torch
    from transformers import StaticCache

    batch, seq, context = step.batch, step.seq, step.context
    model = built.model
    recorder = _recorder_class()(seq, kv)
    recorder.positions = context + seq
    hooks: list[Any] = []
    patched: list[tuple[Any, Any]] = []
    skipping = None
    try:
        try:
            cache = StaticCache(config=model.config, max_cache_len=context + seq)
        except KeyError as exc:  # a layer type transformers' static cache has no layer for
            raise InputError(f"{config.path}: layer_types", f"transformers' static cache has "
                             f"no layer for its {shown(exc.args[0], 80)} layers: that attention "
                             "cannot be run on fake tensors, so it is not priced") from None
        ids = torch.zeros((batch, seq), dtype=torch.long)
        position = torch.arange(context, context + seq)
        in_place = _warm_up_in_place(cache, recorder)
        if not in_place:
            chosen = None
        skipped = _skipped(built.layers, chosen)
        _make_fake(built, skipped)
        running = [(name, module, price) for name, module, price in built.hooked
                   if id(module) not in skipped]
        recorder.quiet = built.quiet
        hooks = _hook_modules(running, recorder)
        if absorb_mla and fused and step.phase == "decode":
            patched = attention_forms.absorb(running, recorder, CapturedOp, layer_pattern,
                                             _torch_dtype_name)
        with torch.no_grad():  # allocates the cache (its zero-fill is not part of a step)
            recorder.muted += 1
            if not in_place:
                model(input_ids=ids[:, :1], past_key_values=cache,
                      cache_position=position[:1], use_cache=True, logits_to_keep=1)
            recorder.muted -= 1
        if chosen is not None:
            skipping = repeats.Repeats(built.layers, chosen)
            skipping.install(recorder.captured)
        with torch.no_grad(), _AttentionMode(recorder, fused), _sdpa_kernels(recorder, fused), \
                recorder:
            model(input_ids=ids, past_key_values=cache, cache_position=position,
                  use_cache=True, logits_to_keep=1)
    except InputError:
        raise
    except Exception as exc:  # transformers or torch refusing this model on fake tensors
        why = reason_of(exc)
        if type(exc).__name__ in _DATA_DEPENDENT:  # its text is only the op's name
            why = f"{why}: the step reads tensor values, which fake tensors lack"
        raise InputError(config.path, f"transformers could not run one {step.phase} step on "
                                      f"fake tensors ({why})") from None
    finally:
        for hook in hooks:
            hook.remove()
        attention_forms.restore(patched)
        if skipping is not None:
            skipping.remove()
    captured = list(recorder.captured)
    recorder.release()
    if skipping is not None:
        laid = skipping.ops(captured, cache)
        if laid is None:  # not a run that repeating fits: every layer recorded
            return _run_step(config, built, step, kv, fused, absorb_mla, None)
        captured = laid
    return tuple(captured), cache, bool(patched)


def _cache_tensors(layer: Any) -> list[Any]:
    """The tensors a cache layer holds (its keys and values, and a sparse-attention layer's
    indexer keys, which a serving stack keeps beside them)."""
    return [t for t in (getattr(layer, name, None) for name in repeats.CACHE_TENSORS)
            if t is not None]


def _kv_layers(cache: Any, batch: int, window: int | None
               ) -> tuple[tuple[int, int | None], ...]:
    """Per cache layer, elements per sequence and position, and its window (None: full;
    a sliding layer keeps the config's `sliding_window` positions)."""
    found = []
    for layer in getattr(cache, "layers", ()):
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        if keys is None or values is None or keys.dim() < 3:
            continue
        positions = int(keys.shape[-2])
        elements = sum(t.numel() for t in _cache_tensors(layer)) // max(1, batch * positions)
        sliding = "Sliding" in type(layer).__name__
        found.append((int(elements), int(window or positions) if sliding else None))
    return tuple(found)


def _weights(model: Any) -> tuple[tuple[str, tuple[int, ...], bool], ...]:
    """Each parameter once (tied ones once), and whether a quantized checkpoint stores it
    quantized: a linear layer's 2-D weight or an experts module's 3-D weights."""
    import torch

    quantized: set[int] = set()
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and not name.endswith("lm_head"):
            quantized.add(id(module.weight))
        elif _is_experts(module):
            quantized.update(id(p) for p in module.parameters(recurse=False) if p.ndim == 3)
    return tuple((name, tuple(int(s) for s in p.shape), id(p) in quantized)
                 for name, p in model.named_parameters())


# Output projections of an attention block (tensor parallel: split along their input); every
# other linear layer of the block projects into the heads (split along its output).
_ROW_PARALLEL = ("o_proj", "out_proj", "dense", "c_proj", "o", "wo")
_HEAD_SIZE_ATTRS = ("head_dim", "head_size")
_PER_HEAD_ATTRS = ("rotary_ndims",)  # widths computed from the head size at construction


def shard_attention(path: str, model: Any, head_dim: int, tp: int) -> None:
    """Narrow the attention blocks that sized their heads from `hidden_size` to one device's
    share: such a block, built with 1/tp of the heads, made each head tp times `head_dim`
    wide (GPT-NeoX, OPT, Falcon, Persimmon); its projections into the heads are cut to 1/tp of
    their outputs, its output projection to 1/tp of its inputs and its per-head norms to
    `head_dim`, so that it holds heads/tp heads of `head_dim`. A block that reads `head_dim`
    from the config but sizes its output projection from `hidden_size` (Helium) has that one
    narrowed to its query width. Other blocks are left as built."""
    import torch

    for module in model.modules():
        attr = next((a for a in _HEAD_SIZE_ATTRS
                     if isinstance(getattr(module, a, None), int)), None)
        linears = [(n, c) for n, c in module.named_children() if isinstance(c, torch.nn.Linear)]
        if attr is None or not linears:
            continue
        if getattr(module, attr) == head_dim * tp:
            for name, linear in linears:
                _narrow(path, module, name, linear, tp, row=name in _ROW_PARALLEL)
            for child in module.children():
                weight = getattr(child, "weight", None)
                if getattr(weight, "shape", None) == (head_dim * tp,):
                    _narrow_norm(child, head_dim)
            setattr(module, attr, head_dim)
            for name in _PER_HEAD_ATTRS:
                if isinstance(getattr(module, name, None), int):
                    setattr(module, name, getattr(module, name) // tp)
        elif getattr(module, attr) == head_dim:
            query = dict(linears).get("q_proj")
            for name, linear in linears:
                if (query is not None and name in _ROW_PARALLEL
                        and linear.in_features == query.out_features * tp):
                    _narrow(path, module, name, linear, tp, row=True)


def _narrow(path: str, module: Any, name: str, linear: Any, tp: int, row: bool) -> None:
    """One linear layer cut to 1/tp of its inputs (row) or of its outputs (column)."""
    import torch

    size = linear.in_features if row else linear.out_features
    if size % tp:
        raise InputError(f"{path}: --tp {tp}", f"{type(module).__name__}.{name} has {size} "
                                               f"features, which do not divide over {tp} "
                                               "devices")
    shape = (linear.out_features, size // tp) if row else (size // tp, linear.in_features)
    dtype = linear.weight.dtype
    linear.weight = torch.nn.Parameter(torch.empty(shape, dtype=dtype), requires_grad=False)
    if linear.bias is not None and not row:
        linear.bias = torch.nn.Parameter(torch.empty(shape[0], dtype=dtype),
                                         requires_grad=False)
    linear.in_features, linear.out_features = shape[1], shape[0]


def _narrow_norm(norm: Any, width: int) -> None:
    """A per-head norm (Persimmon's q/k LayerNorm) cut to `width`."""
    import torch

    for name in ("weight", "bias"):
        old = getattr(norm, name, None)
        if old is not None:
            setattr(norm, name, torch.nn.Parameter(torch.empty(width, dtype=old.dtype),
                                                   requires_grad=False))
    if hasattr(norm, "normalized_shape"):
        norm.normalized_shape = (width,)


@contextlib.contextmanager
def _quiet_torch() -> Iterator[None]:
    """torch logs a fake-tensor op that fails (with its traceback) before raising it; the
    raise becomes our one line, so the log, which would be more lines on stderr, is held."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def _refuse_recurrent(path: str, model: Any, model_class: Any = None) -> None:
    """InputError naming the first recurrent layer of a model (or its class, before it is
    built: RWKV's defaults do not even build on fake tensors)."""
    found = ([("the model class", model_class.__name__)] if model is None else
             [(name, type(module).__name__) for name, module in model.named_modules()
              if name and not type(module).__name__.endswith(("Model", "ForCausalLM"))])
    for name, kind in found:
        if _RECURRENT.search(kind):
            raise InputError(path, f"{name} is {kind}: a recurrence (selective scan or linear "
                                   "attention) that roofwise's operator library has no ledger "
                                   "for yet; expected attention and MLP layers")


def _refuse_bidirectional(path: str, model: Any, layers: int) -> None:
    """InputError naming the first self-attention of the decoder's layers that attends both
    ways: an encoder (BERT, RoBERTa, an embedding model's BertModel config with `is_decoder`
    false; EmbeddingGemma's `use_bidirectional_attention`), which transformers' causal-LM
    class for it builds without a word and runs with every token attending to every other.
    roofwise prices causal attention over a KV cache and an LM head on the last token: such a
    model would be priced as a decoder it is not (half its attention, a cache and a head it
    lacks). Read from the built model: its config not a decoder (BART's and BigBird-Pegasus's
    causal LMs set `is_decoder` on their copy; their self-attention's `is_causal` is False yet
    their mask is causal) and a self-attention module not causal. Cross-attention (Mllama's,
    BART's `encoder_attn`) passes; so does a vision or audio tower's attention, should its
    block list be the one as long as the decoder's."""
    found = repeats.layer_list(model, layers)
    if found is None or getattr(model.config, "is_decoder", False) is True:
        return
    for index, layer in enumerate(found):
        for name, module in layer.named_modules():
            kind = type(module).__name__
            if (getattr(module, "is_causal", None) is False and kind.endswith("Attention")
                    and not any(w in kind for w in ("Cross", "Vision", "Visual", "Audio"))
                    and not getattr(module, "is_cross_attention", False)
                    and "cross" not in name.lower() and not name.endswith("encoder_attn")):
                where = ".".join(part for part in (_path_of(model, found), str(index), name)
                                 if part)
                raise InputError(path, f"{where} ({kind}) is not causal: an encoder; "
                                       "expected a decoder-only language model (or is_decoder "
                                       "true)")


def _path_of(model: Any, target: Any) -> str:
    """The dotted name of `target` among `model`'s modules ('' when not found)."""
    return next((name for name, module in model.named_modules() if module is target), "")


def _without_softcap(model: Any) -> str:
    """Gemma-2's attention softcaps its logits (one tanh per score), which SDPA refuses and the
    fused kernels serving stacks run (FlashAttention, FlashInfer) support: the softcap is
    dropped from the fake model so that its attention runs the SDPA path, and the note says
    its tanh is not priced; so are gpt-oss's sinks (SDPA's path ignores them)."""
    capped = sinks = 0
    for module in model.modules():
        if getattr(module, "attn_logit_softcapping", None) is not None:
            module.attn_logit_softcapping = None
            capped += 1
        sinks += getattr(module, "sinks", None) is not None
    return (("; its logit softcapping (one tanh per score) not priced" if capped else "")
            + ("; its attention sinks (one more logit per head and query) not priced"
               if sinks else ""))


def causal_lm_class(config: ModelConfig) -> Any:
    """transformers' own causal-LM class for this config type, looked up in its mapping.

    Never through `AutoModelForCausalLM.from_config`: for a config type without a causal-LM
    class it falls back to the config's `auto_map`, which asks on stdin whether to run (and
    then imports) `modeling_*.py` from the config's folder or the hub."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING,
    )

    key = config.causal_lm_key or type(config.hf)
    try:  # a multimodal model built whole when its text decoder has no causal LM of its own
        found = (MODEL_FOR_CAUSAL_LM_MAPPING[key] if key in MODEL_FOR_CAUSAL_LM_MAPPING
                 else MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING[key])
    except KeyError:
        raise InputError(f"{config.path}: model_type",
                         f"transformers has no causal-LM model for {config.hf.model_type!r}; "
                         "expected a decoder-only language model (llama, qwen2, mixtral, ...)"
                         ) from None
    model_class = found[0] if isinstance(found, (tuple, list)) else found
    if not str(model_class.__module__).startswith("transformers."):
        raise InputError(f"{config.path}: model_type", "its causal-LM class is registered "
                                                       "from outside transformers; refused")
    return model_class


def _recorder_class() -> Any:
    """The tracer's dispatch mode, extended with muting (inside fused regions) and places."""
    from roofwise.capture.tracer import DEFAULT_UNITS, _Recorder  # deferred: torch

    class Recorder(_Recorder):
        def __init__(self, seq: int, kv_dtype: str) -> None:
            super().__init__(DEFAULT_UNITS, False)
            self.seq = seq
            self.kv_dtype = kv_dtype
            self.muted = 0
            self.skip_attention = 0  # attention calls an absorbed MLA form already priced
            self.window: int | None = None  # the sliding window of the attention call
            self.chunk: int | None = None  # its attention chunk (Llama-4's local layers)
            self.positions = 0  # context + seq: the most keys a query of the step can see
            self.where = [""]
            self.captured: list[CapturedOp] = []
            # modules whose own ops (not their children's) a serving kernel fuses away
            self.quiet: frozenset[str] = frozenset()

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            if self.muted or self.where[-1] in self.quiet:
                return func(*args, **(kwargs or {}))
            before = len(self.ops)
            out = super().__torch_dispatch__(func, types, args, kwargs)
            for op in self.ops[before:]:
                if op.launches_kernel:
                    self.captured.append(_from_traced(op, layer_pattern(self.where[-1]),
                                                      self.kv_dtype))
            return out

    return Recorder


def _shapes(refs: Any) -> str:
    return ", ".join(f"{list(r.shape)} {r.dtype}" for r in refs)


def _from_traced(op: Any, layer: str, kv_dtype: str) -> CapturedOp:
    """A ledger from one recorded aten op: what it read (inputs), what it wrote (outputs)."""
    base = op.name.split(".")[1] if op.name.startswith("aten.") else op.name
    name = f"aten::{base}"
    # an op that reads no tensor (arange, full) is told apart by what it writes: rows group
    # ops by their shapes text, and 8 bytes of positions are not 1,600
    shapes = _shapes(op.reads) or (f"-> {_shapes(op.writes)}" if op.writes else "")
    if base == "embedding":  # reads the rows it gathers, not the table
        weight, indices = op.reads[0], op.reads[1]
        out = op.writes[0]
        tensors: tuple[Tensor, ...] = (
            Tensor("indices", indices.distinct_shape, indices.dtype, Role.INPUT),
            Tensor("rows", out.shape, weight.dtype, Role.INPUT),
            Tensor("out", out.shape, out.dtype, Role.OUTPUT))
        return CapturedOp(layer, name, shapes, Ledger("embedding", "cuda_core.fp32", tensors, ()))
    if base in ("index_copy_", "index_copy", "index_put_", "index_put"):  # a cache write
        source = op.reads[-1]
        index = op.reads[1] if base.startswith("index_copy") else op.reads[-2]
        tensors = (Tensor("index", index.distinct_shape, index.dtype, Role.INPUT),
                   Tensor("new", source.shape, source.dtype, Role.INPUT),
                   Tensor("cache_slots", source.shape, kv_dtype, Role.OUTPUT))
        return CapturedOp(layer, name, shapes, Ledger(base, "cuda_core.fp32", tensors, ()),
                          cache_write=True)
    if op.kind == "uncounted":
        return CapturedOp(layer, name, shapes, None,
                          f"the tracer has no count for {op.name}")
    mutated = set(op.mutates)
    seen: set[Any] = set()
    parts: list[Tensor] = []
    for ref in op.reads:
        if ref in seen:
            continue
        seen.add(ref)
        role = Role.INOUT if ref in mutated else Role.INPUT
        parts.append(Tensor(f"t{len(parts)}", ref.distinct_shape, ref.dtype, role))
    for ref in op.writes:
        if ref not in seen:
            seen.add(ref)
            parts.append(Tensor(f"t{len(parts)}", ref.distinct_shape, ref.dtype, Role.OUTPUT))
    roof = op.work[0].unit if op.work else "cuda_core.fp32"
    return CapturedOp(layer, name, shapes, Ledger(base, roof, tuple(parts), tuple(op.work)))


class _AttentionMode:
    """Prices F.scaled_dot_product_attention as one fused kernel; mutes the ops inside."""

    def __init__(self, recorder: Any, fused: bool) -> None:
        from torch.overrides import TorchFunctionMode

        outer = self

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func: Any, types: Any, args: Any = (),
                                   kwargs: Any = None) -> Any:
                return outer.handle(func, args, kwargs or {})

        self.mode = Mode()
        self.recorder = recorder
        self.fused = fused

    def __enter__(self) -> _AttentionMode:
        self.mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.mode.__exit__(*exc)

    def handle(self, func: Any, args: Any, kwargs: Any) -> Any:
        import torch.nn.functional as F

        if func is not F.scaled_dot_product_attention or not self.fused:
            return func(*args, **kwargs)
        q, k, v = args[:3]
        rec = self.recorder
        if rec.skip_attention:
            rec.skip_attention -= 1
            rec.muted += 1
            try:
                return func(*args, **kwargs)
            finally:
                rec.muted -= 1
        rec.captured.append(_attention_op(rec.where[-1], q, k, v, rec.seq, rec.kv_dtype,
                                          rec.window, rec.positions, rec.chunk))
        rec.muted += 1
        try:
            return func(*args, **kwargs)
        finally:
            rec.muted -= 1


def _torch_dtype_name(t: Any) -> str:
    from roofwise.capture.tracer import _dtype  # deferred: torch

    return str(_dtype(t.dtype))


@contextlib.contextmanager
def _sdpa_kernels(recorder: Any, fused: bool) -> Iterator[None]:
    """transformers' SDPA path as a fused kernel sees it, for this step only: GQA through
    `enable_gqa` (K and V on their own heads, no `repeat_kv` copy) and each call's
    `sliding_window` kept on the recorder for `_attention_op`."""
    if not fused:
        yield
        return
    from transformers.integrations import sdpa_attention
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    original = ALL_ATTENTION_FUNCTIONS["sdpa"]
    local = "sdpa" in getattr(ALL_ATTENTION_FUNCTIONS, "_local_mapping", {})
    gqa = sdpa_attention.use_gqa_in_sdpa

    def forward(module: Any, *args: Any, **kwargs: Any) -> Any:
        recorder.window = attention_window(module, kwargs)
        recorder.chunk = attention_chunk(module)
        try:
            return original(module, *args, **kwargs)
        finally:
            recorder.window = recorder.chunk = None

    ALL_ATTENTION_FUNCTIONS["sdpa"] = forward
    sdpa_attention.use_gqa_in_sdpa = lambda *args, **kwargs: True
    try:
        yield
    finally:
        if local:
            ALL_ATTENTION_FUNCTIONS["sdpa"] = original
        else:
            del ALL_ATTENTION_FUNCTIONS["sdpa"]  # the library-wide entry shows through again
        sdpa_attention.use_gqa_in_sdpa = gqa


def attention_window(module: Any, kwargs: dict[str, Any]) -> int | None:
    """The sliding window one attention call runs with: the `sliding_window` it is handed
    (None on a full layer), else its module's; None on a layer the config types as full.
    EXAONE-4's modules all keep the config's window and hand None on their full layers."""
    window = (kwargs["sliding_window"] if "sliding_window" in kwargs
              else getattr(module, "sliding_window", None))
    config = getattr(module, "config", None)
    index = getattr(module, "layer_idx", None)
    types = getattr(config, "layer_types", None)
    if (isinstance(index, int) and isinstance(types, (list, tuple)) and 0 <= index < len(types)
            and types[index] == "full_attention"):
        return None
    return window if isinstance(window, int) and not isinstance(window, bool) else None


def attention_chunk(module: Any) -> int | None:
    """The chunk of a chunked-attention layer (Llama-4's local layers: a query sees the keys
    of its own `attention_chunk_size` block up to itself), None for any other layer."""
    config = getattr(module, "config", None)
    index = getattr(module, "layer_idx", None)
    types = getattr(config, "layer_types", None)
    chunk = getattr(config, "attention_chunk_size", None)
    if (isinstance(index, int) and isinstance(types, (list, tuple)) and 0 <= index < len(types)
            and types[index] == "chunked_attention" and isinstance(chunk, int) and chunk > 0):
        return chunk
    return None


def chunked_pairs(first: int, q_len: int, chunk: int) -> int:
    """(query, key) pairs of the queries at positions first .. first+q_len-1 when each sees
    its own chunk's keys up to itself: per chunk touched, an arithmetic series."""
    pairs = 0
    last = first + q_len - 1
    for block in range(first // chunk, last // chunk + 1):
        start = block * chunk
        low, high = max(first, start), min(last, start + chunk - 1)
        pairs += (high - low + 1) * (low - start + 1 + high - start + 1) // 2
    return pairs


def windowed_pairs(q_len: int, kv_len: int, window: int) -> int:
    """(query, key) pairs when the queries are the last q_len of kv_len positions and each
    sees itself and the window - 1 keys before it (transformers' sliding window)."""
    def seen(n: int) -> int:  # pairs of the first n positions
        return n * (n + 1) // 2 if n <= window else window * (window + 1) // 2 + (
            n - window) * window

    return seen(kv_len) - seen(max(kv_len - q_len, 0))


def _windowed(ledger: Ledger, pairs: int, full: int, window: int,
              kind: str = "sliding window") -> Ledger:
    """The attention ledger with its per-score work scaled to the window's pairs."""
    ratio = pairs / full
    work = tuple(replace(w, ops=w.ops * ratio)
                 if w.label.startswith(("QK^T", "PV", "softmax")) else w
                 for w in ledger.work)
    return replace(ledger, work=work,
                   notes=(*ledger.notes, f"{kind} {window}: {pairs} of {full} causal "
                                         "pairs per head"))


def _attention_op(where: str, q: Any, k: Any, v: Any, seq: int, kv_dtype: str,
                  window: int | None = None, positions: int = 0,
                  chunk: int | None = None) -> CapturedOp:
    """The fused kernel from q (b, hq', sq', d), k (b, hk, skv, d), v (b, hk, skv, dv).

    transformers folds a decode step's query heads into its query length (sq' = groups*seq);
    the kernel's heads are hq'*sq'/seq over `seq` queries. A chunked layer's kernel reads the
    keys from the first query's chunk start on (transformers' cache holds the last chunk's
    worth of positions, across a chunk boundary too) and scores only each query's own chunk."""
    b, hq_folded, sq_folded, d = (int(x) for x in q.shape)
    hk, skv, dv = int(k.shape[1]), int(k.shape[2]), int(v.shape[3])
    if positions:  # a sliding cache layer hands back its warm-up token too: never more keys
        skv = min(skv, positions)  # than the step's positions
    if window is not None and positions:
        # a sliding layer's kernel reads the keys from its first query's window on: the last
        # window - 1 cached ones and the step's own. The cache warmed by one token hands back
        # only that one beside the step's (a cache that held the context would hand back all)
        skv = min(positions, seq + int(window) - 1)
    first = positions - seq  # the absolute position of the step's first query
    # a chunked layer's keys start at its first query's chunk (the cache may hold fewer)
    chunk_start = (first // chunk) * chunk if chunk and positions and first >= 0 else None
    if chunk_start is not None:
        skv = positions - chunk_start
    q_heads = hq_folded * sq_folded // seq
    dtype = _torch_dtype_name(q)
    ledger = attention(batch=b, q_len=seq, kv_len=skv, q_heads=q_heads, kv_heads=hk,
                       head_dim=d, causal=True, dtype=dtype, kv_dtype=kv_dtype)
    if dv != d:  # MLA: values narrower than the query/key heads
        ledger = _narrow_values(ledger, b, seq, skv, q_heads, hk, d, dv, dtype, kv_dtype)
    # a window or chunk that cuts the pairs is part of the kernel's shape: rows group ops by
    # this text, and a sliding layer over as many keys as a full one does less work (an
    # empty-cache prefill past the window: every layer holds all its positions)
    bound = ""
    if window is not None and int(window) < skv:
        full = causal_pairs(seq, skv)
        ledger = _windowed(ledger, windowed_pairs(seq, skv, int(window)), full, int(window))
        bound = f", window {int(window)}"
    elif chunk and chunk_start is not None:
        full = causal_pairs(seq, skv)
        pairs = chunked_pairs(first, seq, chunk)
        if pairs < full:
            ledger = _windowed(ledger, pairs, full, chunk, "attention chunk")
            bound = f", chunk {chunk}"
    shapes = (f"q {b}x{seq}x{q_heads}x{d}, kv {b}x{skv}x{hk}x{d}"
              + (f" (v {dv})" if dv != d else "") + f" {kv_dtype}{bound}")
    return CapturedOp(layer_pattern(where), "attention (fused)", shapes,
                      replace(ledger, name="attention"))


def _narrow_values(ledger: Ledger, b: int, seq: int, skv: int, q_heads: int, hk: int, d: int,
                   dv: int, dtype: str, kv_dtype: str) -> Ledger:
    """Attention whose V (and output) heads are dv wide while Q and K are d wide."""
    tensors = tuple(
        replace(t, shape=(b, skv, hk, dv)) if t.name == "v" else
        replace(t, shape=(b, seq, q_heads, dv)) if t.name == "out" else t
        for t in ledger.tensors)
    work = tuple(replace(w, ops=w.ops * dv / d, label=w.label.replace("2*d", "2*dv"))
                 if w.label.startswith(("PV", "output normalisation")) else w
                 for w in ledger.work)
    return replace(ledger, tensors=tensors, work=work,
                   notes=(*ledger.notes, f"values {dv} wide, queries and keys {d}"))


def _hook_plan(model: Any, fused: bool
               ) -> tuple[tuple[str, Any, Callable[..., CapturedOp] | None], ...]:
    """Each module with its path and its fused ledger (None: its ops are recorded one by
    one), once per model: every step hooks the modules it runs from this."""
    top_k = config_value(model.config, "num_experts_per_tok")
    zero = config_value(model.config, "zero_expert_num")
    return tuple((name, module, _fused_module(module, fused,
                                              top_k if isinstance(top_k, int) else None,
                                              zero if isinstance(zero, int) else 0))
                 for name, module in model.named_modules())


def _hook_modules(running: Sequence[tuple[str, Any, Callable[..., CapturedOp] | None]],
                  recorder: Any) -> list[Any]:
    """Forward hooks on the modules a step runs: the module path of every op, and the fused
    modules' ledgers."""
    hooks = []
    for name, module, fused_ledger in running:

        def enter(mod: Any, args: Any, kwargs: Any, name: str = name,
                  price: Callable[..., CapturedOp | None] | None = fused_ledger) -> None:
            recorder.where.append(name)
            if price is not None and not recorder.muted:
                recorder.captured.append(price(layer_pattern(name), args, kwargs))
                recorder.muted += 1
                mod._roofwise_muted = True

        def leave(mod: Any, args: Any, kwargs: Any, output: Any) -> None:
            recorder.where.pop()
            if getattr(mod, "_roofwise_muted", False):
                recorder.muted -= 1
                mod._roofwise_muted = False

        hooks.append(module.register_forward_pre_hook(enter, with_kwargs=True))
        hooks.append(module.register_forward_hook(leave, with_kwargs=True))
    return hooks


def _dense_moe_blocks(hooked: Sequence[tuple[str, Any, Any]]) -> list[str]:
    """The MoE blocks whose experts take every token (Llama-4: the block copies its tokens
    once per expert, scales each copy by its routing score and sums the experts' outputs).
    Their experts are priced routed (`_experts_op`), as a serving kernel runs them, so the
    block's own copy, scale and sum, which no serving kernel makes, are not recorded; the
    router's and the shared expert's ops (children of the block) still are."""
    import inspect

    found = []
    for name, module, _ in hooked:
        for child in module.children():
            if _is_experts(child) and "top_k_index" not in inspect.signature(
                    type(child).forward).parameters:
                found.append(name)
                break
    return found


def _fused_module(module: Any, fused: bool, top_k: int | None = None, zero_experts: int = 0
                  ) -> Callable[..., CapturedOp] | None:
    if _is_experts(module):
        return lambda layer, args, kwargs: _experts_op(layer, module, args, kwargs, top_k,
                                                       zero_experts)
    if fused and type(module).__name__.endswith("RMSNorm") and hasattr(module, "weight"):
        return lambda layer, args, kwargs: _rmsnorm_op(layer, args, kwargs)
    if fused and type(module).__name__.endswith("LayerNorm") and (
            hasattr(module, "weight") or hasattr(module, "normalized_shape")):
        # OLMo's LayerNorm has neither weight nor bias
        weight = getattr(module, "weight", None) is not None
        bias = getattr(module, "bias", None) is not None
        return lambda layer, args, kwargs: _layernorm_op(layer, args, kwargs, weight, bias)
    return None


def _is_experts(module: Any) -> bool:
    down = getattr(module, "down_proj", None)
    return getattr(down, "ndim", 0) == 3 and (_is_gated(module) or getattr(
        getattr(module, "up_proj", None), "ndim", 0) == 3)


def _is_gated(module: Any) -> bool:
    """Experts whose first projection is gate and up in one (3-D `gate_up_proj`)."""
    return getattr(getattr(module, "gate_up_proj", None), "ndim", 0) == 3


def _first_tensor(args: Any, kwargs: Any, name: str) -> Any:
    return args[0] if args else kwargs[name]


def _rmsnorm_op(layer: str, args: Any, kwargs: Any) -> CapturedOp:
    x = _first_tensor(args, kwargs, "hidden_states")
    hidden = int(x.shape[-1])
    rows = max(1, int(x.numel()) // hidden)
    dtype = _torch_dtype_name(x)
    return CapturedOp(layer, "rmsnorm (fused)", f"{list(x.shape)} {dtype}",
                      rmsnorm(rows=rows, hidden=hidden, dtype=dtype))


def _layernorm_op(layer: str, args: Any, kwargs: Any, weight: bool, bias: bool
                  ) -> CapturedOp:
    x = _first_tensor(args, kwargs, "input")
    hidden = int(x.shape[-1])
    rows = max(1, int(x.numel()) // hidden)
    dtype = _torch_dtype_name(x)
    return CapturedOp(layer, "layernorm (fused)", f"{list(x.shape)} {dtype}",
                      layernorm(rows=rows, hidden=hidden, dtype=dtype, weight=weight,
                                bias=bias))


def balanced_counts(tokens: int, top_k: int, experts: int) -> tuple[int, ...]:
    """tokens*top_k assignments spread as evenly as the experts allow (first ones get one
    more when it does not divide)."""
    total = tokens * top_k
    return tuple(total // experts + (1 if e < total % experts else 0) for e in range(experts))


_ROUTER_WORK = ("router GEMM", "router softmax", "top-k selection")


def _experts_op(layer: str, module: Any, args: Any, kwargs: Any,
                top_k: int | None = None, zero_experts: int = 0) -> CapturedOp:
    """The experts of one MoE layer by `ops.moe`, balanced routing, router work left to the
    router's own recorded ops.

    Two calling forms: the routed one (the tokens and their `top_k_index`: Mixtral, Qwen-MoE,
    DeepSeek) and the dense one (Llama-4: every expert handed every token, scaled by its
    routing score, so the input holds experts x tokens rows); a serving kernel runs each token
    through its top-k experts only, so the dense form is priced as routed, with the config's
    `num_experts_per_tok` (`top_k`).

    LongCat-Flash's router also chooses among `zero_experts` that compute nothing (the token
    passes through); transformers runs those slots through real experts at weight 0, a serving
    kernel skips them. Routing balanced over every slot sends top_k x E / (E + zero) of a
    token's top_k to real experts (8 of 12 for LongCat-Flash): that many are priced."""
    x = _first_tensor(args, kwargs, "hidden_states")
    hidden = int(x.shape[-1])
    experts = int(module.down_proj.shape[0])
    # (E, hidden, I) in transformers' fused experts, (E, I, hidden) in Llama-4's
    intermediate = next((int(d) for d in module.down_proj.shape[1:] if int(d) != hidden), hidden)
    top_k_index = args[1] if len(args) > 1 else kwargs.get("top_k_index")
    if top_k_index is not None:
        tokens, top_k = int(x.shape[0]), int(top_k_index.shape[-1])
    elif top_k:
        tokens = int(x.shape[0]) // experts
    else:
        raise InputError(layer, "experts called without their routing (top_k_index) and no "
                                "num_experts_per_tok in the config; expected one of them")
    dtype = _torch_dtype_name(x)
    real = max(1, top_k * experts // (experts + zero_experts)) if zero_experts > 0 else top_k
    ledger = moe(expert_tokens=balanced_counts(tokens, real, experts), top_k=real,
                 hidden=hidden, intermediate=intermediate, dtype=dtype,
                 gated=_is_gated(module))
    ledger = replace(ledger, name="moe_experts",
                     tensors=tuple(t for t in ledger.tensors if t.name != "router_weight"),
                     work=tuple(w for w in ledger.work if not w.label.startswith(_ROUTER_WORK)),
                     notes=(*ledger.notes, "balanced routing assumed; router priced from its "
                                           "recorded ops"))
    shapes = (f"{tokens} tokens x top-{top_k} of {experts}"
              + (f" and {zero_experts} zero-computation ({real} real)" if real != top_k else "")
              + f", {hidden}->{intermediate} {dtype}")
    return CapturedOp(layer, "moe experts (fused)", shapes, ledger,
                      "balanced routing assumed")
