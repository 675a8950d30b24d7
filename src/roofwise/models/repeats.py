"""Identical decoder layers recorded once: a step's forward runs one layer of each kind and
repeats its ops where the others ran.

A decoder of 16 to 126 layers is mostly one layer repeated, and a capture spends its time
per op, so recording every layer costs most of a projection. Two layers are of one kind when
everything that can shape their ops is equal: each submodule's class and plain attributes
(sizes, window, layer type, flags; the layer's own index excepted), each parameter's and
buffer's shape and dtype, and the layer's entry in every per-layer list of the config. The
first and the last layer are always recorded themselves (a model may treat either apart at
run time). A layer not recorded hands on its kind's last output (fake tensors: shapes only),
and its cache layer is given its kind's cache tensors; `Repeats.ops` lays the recorded ops
out as the full forward would have recorded them.

Anything that does not fit (no single list of decoder layers, a layer run twice or not at
all, a cache layer written by another layer than its own) leaves the step to be recorded
whole: `Repeats.ops` returns None and the caller runs the forward again without skipping.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# A module's own index among the layers: the one attribute that may differ between layers of
# one kind (its cache slot follows from it).
_INDEX_ATTRS = frozenset({"layer_idx", "layer_id", "layer_index", "layer_number", "idx"})
_PLAIN = (bool, int, float, str, type(None))
# A cache layer's tensors: its keys and values, and a sparse-attention layer's indexer keys
# (DeepSeek-V3.2, GLM-5). A skipped layer is given its kind's.
CACHE_TENSORS = ("keys", "values", "indexer_keys")


def layer_list(model: Any, layers: int) -> Any | None:
    """The decoder's list of `layers` layers: the one ModuleList of that length (None when
    there is none, or more than one)."""
    import torch

    found = [m for m in model.modules()
             if isinstance(m, torch.nn.ModuleList) and len(m) == layers]
    return found[0] if len(found) == 1 else None


def _holds(keys: Any) -> bool:
    """Whether a cache layer's keys were written: there, and not the empty stand-in."""
    return keys is not None and (not hasattr(keys, "numel") or keys.numel() > 0)


def _plain(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    return isinstance(value, _PLAIN)


def kind_of(layer: Any, index: int, text_config: Any, layers: int) -> str:
    """Everything about layer `index` that can shape its ops, as one text."""
    parts: list[Any] = []
    for name, module in layer.named_modules():
        attrs = sorted((k, repr(v)) for k, v in vars(module).items()
                       if not k.startswith("_") and k not in _INDEX_ATTRS and _plain(v))
        parts.append((name, type(module).__module__, type(module).__qualname__, attrs))
    for name, tensor in (*layer.named_parameters(), *layer.named_buffers()):
        parts.append((name, tuple(tensor.shape), str(tensor.dtype)))
    for key, value in sorted(vars(text_config).items()):
        # a per-layer list; not a list of layer indices that holds them all (Llama-4's
        # moe_layers), whose entry at `index` is `index`
        if (isinstance(value, (list, tuple)) and len(value) == layers
                and list(value) != list(range(layers))):
            parts.append((key, repr(value[index])))
    return repr(parts)


def representatives(kinds: Sequence[str]) -> list[int]:
    """For each layer, the layer recorded for it: itself for the first, the last and the
    first of each kind among the others; else the first earlier layer of its kind."""
    first: dict[str, int] = {}
    chosen = []
    for i, kind in enumerate(kinds):
        if i in (0, len(kinds) - 1):
            chosen.append(i)
        else:
            chosen.append(first.setdefault(kind, i))
    return chosen


@dataclass
class Repeats:
    """One step's skipping: which layers run, where each layer's ops fell in the record."""

    layers: Any
    chosen: list[int]
    hooks: list[Any] = field(default_factory=list)
    outputs: dict[int, Any] = field(default_factory=dict)
    spans: list[tuple[int, int, int]] = field(default_factory=list)  # (layer, start, end)
    _open: dict[int, int] = field(default_factory=dict)

    @property
    def skipped(self) -> int:
        return sum(1 for i, r in enumerate(self.chosen) if r != i)

    def install(self, record: list[Any]) -> None:
        """Stub the layers not recorded; note where each layer's ops start and end in
        `record` (the recorder's list, appended to as ops are recorded)."""
        for i, layer in enumerate(self.layers):
            def enter(mod: Any, args: Any, i: int = i) -> None:
                self._open[i] = len(record)

            def leave(mod: Any, args: Any, output: Any, i: int = i) -> None:
                self.spans.append((i, self._open.pop(i), len(record)))
                if self.chosen[i] == i:
                    self.outputs[i] = output

            self.hooks.append(layer.register_forward_pre_hook(enter))
            self.hooks.append(layer.register_forward_hook(leave))
            if self.chosen[i] != i:
                layer.forward = self._stub(self.chosen[i])

    def _stub(self, chosen: int) -> Callable[..., Any]:
        def forward(*args: Any, **kwargs: Any) -> Any:
            return self.outputs[chosen]
        return forward

    def remove(self) -> None:
        for hook in self.hooks:
            hook.remove()
        for i, layer in enumerate(self.layers):
            if self.chosen[i] != i:
                del layer.forward

    def ops(self, record: Sequence[Any], cache: Any) -> list[Any] | None:
        """The record laid out as a forward of every layer would have made it, with each
        skipped layer's cache layer given its kind's tensors; None when the run does not fit
        (see the module's docstring)."""
        if sorted(i for i, _, _ in self.spans) != list(range(len(self.chosen))):
            return None
        cache_layers = getattr(cache, "layers", None)
        if cache_layers is None or len(cache_layers) != len(self.chosen):
            return None
        # a layer the step never updated holds nothing: no keys, or the empty stand-in a
        # cache made ready in place gives it (models/capture.py)
        written = [_holds(getattr(layer, "keys", None)) for layer in cache_layers]
        if written != [r == i for i, r in enumerate(self.chosen)]:
            return None  # a layer wrote another's cache, or none (KV sharing): record whole
        for i, r in enumerate(self.chosen):
            if r != i:
                if type(cache_layers[i]) is not type(cache_layers[r]):
                    return None
                for name in CACHE_TENSORS:
                    if hasattr(cache_layers[r], name):
                        setattr(cache_layers[i], name, getattr(cache_layers[r], name))
        own = {i: (start, end) for i, start, end in self.spans}
        laid: list[Any] = []
        cursor = 0
        for i, start, end in self.spans:  # in the order the layers ran
            laid += record[cursor:start]
            first, last = own[self.chosen[i]]
            laid += record[first:last]
            cursor = end
        return laid + list(record[cursor:])
