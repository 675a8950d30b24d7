"""A decoder's identical layers recorded once and repeated (`models/repeats.py`) give exactly
the capture of a forward through every layer: the same ops in the same order, ledgers, cache
and weights, on configs whose layers differ by kind (alternating sliding and global layers,
a dense first layer before MoE ones, per-layer KV heads, chunked and no-rope layers).

Configs are cut to 8 layers (a copy written by the test; every other value is the shipped
config's), enough for every kind to repeat; the op labels (the tracer's running count) are
the one thing left out of the comparison, since fewer ops run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")

from roofwise.models import repeats
from roofwise.models.capture import Step, _representatives, capture_steps, causal_lm_class
from roofwise.models.config import load_config

ROOT = Path(__file__).resolve().parents[2]
STEPS = [Step("prefill", 1, 48, 0), Step("decode", 4, 1, 300), Step("decode", 8, 2, 3000),
         Step("prefill", 1, 200, 100)]
LAYERS = 8


def cut(tmp_path, relative, **changes):
    config = json.loads((ROOT / relative).read_text())
    text = config.get("text_config", config)
    layers = text["num_hidden_layers"]
    text["num_hidden_layers"] = LAYERS
    for key, value in list(text.items()):  # per-layer lists (layer_types) cut to match
        if isinstance(value, list) and len(value) == layers:
            text[key] = value[:LAYERS]
    if text.get("sliding_window"):  # a window the steps above both fill and stay under
        text["sliding_window"] = 64
    text.update(changes)
    path = tmp_path / Path(relative).name
    path.write_text(json.dumps(config))
    return load_config(path)


def without_counts(captures):
    return re.sub(r"label='\d+ ", "label='", repr(captures))


@pytest.mark.parametrize(("relative", "changes", "chosen"), [
    # every middle layer of one kind: the first and the last recorded on their own
    ("examples/models/llama-3.2-1b.json", {}, [0, 1, 1, 1, 1, 1, 1, 7]),
    # sliding and global layers alternate (layer_types)
    ("tests/fixtures/configs/gemma-2-9b.json", {}, [0, 1, 2, 1, 2, 1, 2, 7]),
    # two dense layers, then MoE ones (different modules)
    ("examples/models/deepseek-v2-lite.json", {"first_k_dense_replace": 2},
     [0, 1, 2, 2, 2, 2, 2, 7]),
    # per-layer KV heads and head sizes on the global layers (every sixth); layer 6, the last
    # sliding one, is marked to hand its keys and values on to layers that share them
    # (kv_sharing_modes "store"), so it is a kind of its own
    ("tests/fixtures/configs/gemma-4-26b-a4b.json", {}, [0, 1, 1, 1, 1, 5, 6, 7]),
    # chunked local layers and a global no-rope layer every fourth (its moe_layers, every
    # layer's index, sets no layer apart)
    ("tests/fixtures/configs/llama-4-scout-17b-16e-instruct.json", {},
     [0, 1, 1, 3, 1, 1, 1, 7]),
    # sparse attention with an indexer key cache (DSA), three dense layers, then MoE ones
    ("tests/fixtures/configs/aiconfigurator/deepseek-ai--DeepSeek-V3.2.json", {},
     [0, 1, 1, 3, 3, 3, 3, 7]),
    ("tests/fixtures/configs/aiconfigurator/zai-org--GLM-5.1.json", {},
     [0, 1, 1, 3, 3, 3, 3, 7]),
])
def test_repeated_layers_capture_what_every_layer_does(tmp_path, relative, changes, chosen):
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    config = cut(tmp_path, relative, **changes)
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = causal_lm_class(config)._from_config(config.hf, dtype=torch.bfloat16)
    assert _representatives(repeats.layer_list(model, config.layers), config) == chosen
    once = capture_steps(config, STEPS)
    every = capture_steps(cut(tmp_path, relative, **changes), STEPS, repeat_layers=False)
    assert without_counts(once) == without_counts(every)
    assert all(c.layers == LAYERS for c in once)


def test_representatives_by_hand():
    # first and last always their own; each other layer the first earlier one of its kind
    assert repeats.representatives(list("aaaa")) == [0, 1, 1, 3]
    assert repeats.representatives(list("abab")) == [0, 1, 2, 3]
    assert repeats.representatives(list("aababa")) == [0, 1, 2, 1, 2, 5]
    assert repeats.representatives(list("ab")) == [0, 1]


def _run(chosen, spans, written):
    """A `Repeats` after a run: which layers ran where, which cache layers were written."""
    cache = SimpleNamespace(layers=[
        SimpleNamespace(keys=f"k{i}" if w else None, values=f"v{i}" if w else None)
        for i, w in enumerate(written)])
    run = repeats.Repeats(layers=[None] * len(chosen), chosen=chosen)
    run.spans = spans
    return run, cache


def test_the_record_is_laid_out_as_every_layer_ran():
    # ops: e0 | layer0: a b | layer1: c | layer2 (skipped, kind of 1) | m | layer3: d | h
    record = ["e0", "a", "b", "c", "m", "d", "h"]
    run, cache = _run([0, 1, 1, 3], [(0, 1, 3), (1, 3, 4), (2, 4, 4), (3, 5, 6)],
                      [True, True, False, True])
    assert run.ops(record, cache) == ["e0", "a", "b", "c", "c", "m", "d", "h"]
    assert cache.layers[2].keys == "k1" and cache.layers[2].values == "v1"


@pytest.mark.parametrize(("spans", "written"), [
    # a layer that never ran
    ([(0, 0, 1), (1, 1, 2), (3, 2, 3)], [True, True, False, True]),
    # a skipped layer's cache written by it anyway (or by another layer: KV sharing)
    ([(0, 0, 1), (1, 1, 2), (2, 2, 2), (3, 2, 3)], [True, True, True, True]),
    # a recorded layer that wrote no cache of its own
    ([(0, 0, 1), (1, 1, 2), (2, 2, 2), (3, 2, 3)], [True, False, False, True]),
])
def test_a_run_that_does_not_fit_is_recorded_whole(spans, written):
    run, cache = _run([0, 1, 1, 3], spans, written)
    assert run.ops(["a", "b", "c"], cache) is None


def test_a_step_repeating_cannot_fit_is_recorded_whole(tmp_path, monkeypatch):
    """When the laid-out record is refused, the step runs again through every layer."""
    relative = "examples/models/llama-3.2-1b.json"
    every = capture_steps(cut(tmp_path, relative), STEPS[:2], repeat_layers=False)
    refused = []

    def refuse(self, record, cache):
        refused.append(self.skipped)
        return None

    monkeypatch.setattr(repeats.Repeats, "ops", refuse)
    again = capture_steps(cut(tmp_path, relative), STEPS[:2])
    assert refused == [5, 5]  # layers 2 to 6 skipped in each step (all of layer 1's kind)
    assert without_counts(again) == without_counts(every)
