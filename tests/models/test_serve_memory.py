"""Memory fits of `roofwise model`, against byte counts made here from the config values:
weights (parameters x 2 bytes), KV cache (layers x 2 x KV heads x head size x positions x
batch x 2 bytes), the activation estimate of models/memory.py, and the card's datasheet
capacity (h200: 141 GB)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main
from roofwise.models.config import load_config, shard
from roofwise.models.memory import memory_fit

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
H200_BYTES = 141e9  # NVIDIA H200 SXM datasheet: 141GB
BF16 = 2


def llama_params(c, tp=1):
    h, hq, hk = c["hidden_size"], c["num_attention_heads"] // tp, c["num_key_value_heads"]
    hk = max(1, hk // tp)
    d = c.get("head_dim") or h // c["num_attention_heads"]
    inter, vocab = c["intermediate_size"] // tp, c["vocab_size"] // tp
    layer = h * hq * d + 2 * h * hk * d + hq * d * h + 3 * h * inter + 2 * h
    heads = 1 if c["tie_word_embeddings"] else 2
    return heads * vocab * h + c["num_hidden_layers"] * layer + h


def llama_kv_per_position(c, tp=1):
    d = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    return c["num_hidden_layers"] * 2 * max(1, c["num_key_value_heads"] // tp) * d * BF16


def llama_activations(c, batch, seq, tp=1):
    """2 hidden rows + the widest intermediate per token, and fp32 logits per sequence."""
    h = c["hidden_size"]
    d = c.get("head_dim") or h // c["num_attention_heads"]
    hq, hk = c["num_attention_heads"] // tp, max(1, c["num_key_value_heads"] // tp)
    widest = max(2 * hq * d + 2 * hk * d, 3 * c["intermediate_size"] // tp)
    return batch * seq * (2 * h + widest) * BF16 + batch * (c["vocab_size"] // tp) * 4


def fit_of(name, batch, seq, context, tp=1):
    raw = json.loads((CONFIGS / name).read_text())
    config = shard(load_config(CONFIGS / name), tp)
    kv_layers = ((llama_kv_per_position(raw, tp) // raw["num_hidden_layers"] // BF16, None),
                 ) * raw["num_hidden_layers"]
    weights = llama_params(raw, tp) * BF16
    return raw, memory_fit(config, kv_layers, weights, H200_BYTES, "datasheet", batch, seq,
                           context, "bf16", "bf16")


def test_llama_3_1_70b_at_batch_32_does_not_fit_on_one_h200():
    raw, fit = fit_of("serve_r1-distill-llama-70b.json", batch=32, seq=1, context=4095)
    weights = llama_params(raw) * BF16
    assert weights == pytest.approx(141.1e9, rel=1e-3)  # 70.55 B parameters
    kv = 32 * 4096 * llama_kv_per_position(raw)
    assert kv == 42_949_672_960  # 32 x 4,096 positions x 327,680 B
    assert fit.kv_cache_bytes == kv
    assert fit.activation_peak_bytes == llama_activations(raw, 32, 1)
    assert fit.resident_bytes == pytest.approx(weights + kv + llama_activations(raw, 32, 1))
    assert fit.fits is False
    assert fit.headroom_bytes == pytest.approx(H200_BYTES - fit.resident_bytes)
    assert fit.max_batch == 0  # the bf16 weights alone exceed 141 GB
    assert fit.max_context is None and fit.max_context_limited_by == "nothing fits"


def test_llama_3_1_70b_over_two_h200s_fits_up_to_the_hand_counted_batch():
    raw, fit = fit_of("serve_r1-distill-llama-70b.json", batch=32, seq=1, context=4095, tp=2)
    weights = llama_params(raw, 2) * BF16
    per_sequence = 4096 * llama_kv_per_position(raw, 2) + llama_activations(raw, 1, 1, 2)
    largest = int((H200_BYTES - weights) // per_sequence)
    assert fit.max_batch == largest
    assert fit.fits is (largest >= 32)
    _, at_largest = fit_of("serve_r1-distill-llama-70b.json", largest, 1, 4095, tp=2)
    _, past_it = fit_of("serve_r1-distill-llama-70b.json", largest + 1, 1, 4095, tp=2)
    assert at_largest.fits is True and past_it.fits is False
    # the longest context at batch 32: the most positions whose cache fits, less the new token
    budget = (H200_BYTES - weights - llama_activations(raw, 32, 1, 2)) / 32
    assert fit.max_context == int(budget // llama_kv_per_position(raw, 2)) - 1
    assert fit.max_context_limited_by == "memory"


def test_a_1b_model_fits_and_the_cli_reports_it_in_the_total(capsys):
    code = main(["model", str(MODELS / "llama-3.2-1b.json"), "-m", "h200", "--phase",
                 "decode", "--batch", "8", "--context", "2047", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    total = json.loads(out.splitlines()[-1])
    raw = json.loads((MODELS / "llama-3.2-1b.json").read_text())
    weights = llama_params(raw) * BF16
    kv = 8 * 2048 * llama_kv_per_position(raw)
    assert total["weight_bytes"] == weights
    assert total["kv_cache_bytes"] == kv
    assert total["activation_peak_bytes"] == llama_activations(raw, 8, 1)
    assert total["capacity_bytes"] == H200_BYTES
    assert total["fits"] is True
    assert total["headroom_bytes"] == pytest.approx(
        H200_BYTES - weights - kv - llama_activations(raw, 8, 1))
    per_sequence = 2048 * llama_kv_per_position(raw) + llama_activations(raw, 1, 1)
    assert total["max_batch_at_context"] == int((H200_BYTES - weights) // per_sequence)
    assert total["max_context_at_batch"] == 131072 - 1  # the position limit binds first
    assert total["max_context_limited_by"] == "max_position_embeddings"


def test_gpt2_past_its_1024_positions_is_refused_in_one_line(capsys):
    code = main(["model", str(CONFIGS / "serve_gpt2.json"), "-m", "h200", "--phase",
                 "prefill", "--seq", "4096"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "max_position_embeddings" in lines[0] and "4,096" in lines[0]
    assert "1,024" in lines[0] and "--allow-long-context" in lines[0]
    code = main(["model", str(CONFIGS / "serve_gpt2.json"), "-m", "h200", "--phase",
                 "decode", "--context", "1024"])  # 1,025 positions: one past the limit
    assert code == 2
    assert "1,025" in capsys.readouterr().err


def test_a_sliding_window_caps_the_cache_and_leaves_the_context_unbounded():
    config = load_config(CONFIGS / "serve_phi-3-mini-4k-instruct.json")
    per_position = 2 * 32 * 96  # keys and values, 32 heads of 96, per layer
    layers = ((per_position, 2047),) * 32
    fit = memory_fit(config, layers, 7.6e9, H200_BYTES, "datasheet", 4, 1, 4095,
                     "bf16", "bf16")
    assert fit.kv_cache_bytes == 4 * 32 * per_position * 2047 * BF16
    assert fit.max_context == 4096 - 1  # memory never binds: the position limit does
    assert fit.max_context_limited_by == "max_position_embeddings"
