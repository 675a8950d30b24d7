"""One model built for many steps (a sweep, a serving grid) records exactly what a fresh build
records for each step: the same ops, ledgers, cache and weights, whatever ran before it on
that model (an MLA prefill runs expanded and a decode after it absorbed; a sliding-window
cache is new for every step).

The configs run reduced to 2 layers (a copy written by the test; every other value is the
shipped config's), so that each capture takes well under a second.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.models.capture import Step, capture_step, capture_steps
from roofwise.models.config import load_config

ROOT = Path(__file__).resolve().parents[2]
STEPS = [Step("prefill", 1, 48, 0), Step("decode", 4, 1, 300), Step("decode", 1, 1, 300),
         Step("prefill", 2, 16, 40), Step("decode", 8, 2, 3000)]


def reduced(tmp_path, relative):
    config = json.loads((ROOT / relative).read_text())
    text = config.get("text_config", config)  # a multimodal config's decoder
    layers = text["num_hidden_layers"]
    text["num_hidden_layers"] = 2
    for key, value in list(text.items()):  # per-layer lists (layer_types) cut to match
        if isinstance(value, list) and len(value) == layers:
            text[key] = value[:2]
    if "sliding_window" in text:  # a window the steps above both fill and stay under
        text["sliding_window"] = 64
    path = tmp_path / Path(relative).name
    path.write_text(json.dumps(config))
    return load_config(path)


@pytest.mark.parametrize("relative", [
    "examples/models/deepseek-v2-lite.json",
    "tests/fixtures/configs/serve_phi-3-mini-4k-instruct.json",
    # per-layer KV heads and a global last layer; chunked attention and dense experts
    "tests/fixtures/configs/gemma-4-26b-a4b.json",
    "tests/fixtures/configs/llama-4-scout-17b-16e-instruct.json"])
def test_one_build_for_many_steps_records_what_fresh_builds_do(tmp_path, relative):
    config = reduced(tmp_path, relative)
    together = capture_steps(config, STEPS)
    assert len(together) == len(STEPS)
    for step, capture in zip(STEPS, together, strict=True):
        fresh = capture_step(reduced(tmp_path, relative), step.phase, step.batch, step.seq,
                             step.context)
        assert capture == fresh, step
        assert capture.tokens == step.batch * step.seq
    # the steps differ where their shapes do (not one capture repeated)
    assert together[1].kv_cache_bytes == 4 * together[2].kv_cache_bytes
    mla = "deepseek" in relative
    assert [c.mla for c in together[:2]] == (["expanded", "absorbed"] if mla else [None, None])


def test_no_step_runs_a_warm_up_forward_on_a_plain_static_cache(tmp_path):
    """The cache is warmed up in place (each layer as after a one-token update), not by a
    forward: three steps of a 2-layer model run each decoder layer three times, not six."""
    import torch

    config = reduced(tmp_path, "examples/models/llama-3.2-1b.json")
    calls = []

    def counted(module, args):
        if type(module).__name__.endswith("DecoderLayer"):
            calls.append(type(module).__name__)

    handle = torch.nn.modules.module.register_module_forward_pre_hook(counted)
    try:
        steps = [Step("decode", 1, 1, 100), Step("decode", 4, 1, 100), Step("prefill", 2, 8, 0)]
        captures = capture_steps(config, steps)
    finally:
        handle.remove()
    assert calls == ["LlamaDecoderLayer"] * 6
    # and the cache is the whole context, as after a warm-up: 2 layers x (100 + 1) positions
    # x 8 KV heads x 64 x 2 (K and V) x 2 bytes per sequence
    assert captures[0].kv_cache_bytes == 2 * 101 * 8 * 64 * 2 * 2
    assert captures[1].kv_cache_bytes == 4 * captures[0].kv_cache_bytes


@pytest.mark.parametrize("relative", [
    "tests/fixtures/configs/aiconfigurator/deepseek-ai--DeepSeek-V3.2.json",
    "tests/fixtures/configs/aiconfigurator/zai-org--GLM-5.1.json",
])
def test_an_indexed_cache_warmed_in_place_is_one_warmed_by_a_forward(tmp_path, monkeypatch,
                                                                     relative):
    """A sparse-attention model's cache (keys, values and the indexer's keys) warmed in place
    records the same steps as one warmed by a muted one-token forward; its size counts the
    indexer's keys."""
    from roofwise.models import capture

    steps = [Step("decode", 2, 1, 100), Step("decode", 3, 2, 40), Step("prefill", 1, 16, 0)]
    in_place = capture_steps(reduced(tmp_path, relative), steps, repeat_layers=False)
    monkeypatch.setattr(capture, "_warm_up_in_place", lambda cache, recorder: False)
    by_forward = capture_steps(reduced(tmp_path, relative), steps, repeat_layers=False)
    assert in_place == by_forward
    # the cache holds, per layer and position, the latent (kv_lora_rank 512 + rope 64) and
    # the indexer's key (index_head_dim 128), in bf16: 2 layers x (100 + 1) positions x 2
    # sequences in the first step
    assert in_place[0].kv_cache_bytes == 2 * 101 * 2 * (512 + 64 + 128) * 2
