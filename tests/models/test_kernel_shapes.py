"""What the fused kernels read and compute, counted here from the config values: GQA prefill
attention on the KV heads (no `repeat_kv` copy), a sliding window in prefill (Phi-3-mini: 2,047
positions), LayerNorm priced as one fused kernel (GPT-2). Configs cut to 2 layers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
LAYERS, BF16 = 2, 2


def prefill(capsys, tmp_path, path, seq):
    config = json.loads(path.read_text())
    config["num_hidden_layers"] = LAYERS
    if "n_layer" in config:
        config["n_layer"] = LAYERS
    cut = tmp_path / path.name
    cut.write_text(json.dumps(config))
    code = main(["model", str(cut), "-m", "h200", "--phase", "prefill", "--seq", str(seq),
                 "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    return config, lines[:-1], lines[-1]


def test_gqa_prefill_attention_reads_the_kv_heads_and_makes_no_copy(capsys, tmp_path):
    c, rows, _ = prefill(capsys, tmp_path, MODELS / "llama-3.2-1b.json", 512)
    heads, kv_heads, d = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    attention = [r for r in rows if r["op"] == "attention (fused)"]
    assert len(attention) == 1 and attention[0]["count"] == LAYERS
    # q and out over 32 heads, K and V over the 8 KV heads, once each
    expected = 512 * (2 * heads * d + 2 * kv_heads * d) * BF16
    assert attention[0]["bytes"] == LAYERS * expected
    groups = heads // kv_heads
    assert not any(f"{kv_heads}, {groups}, 512, {d}" in r["shapes"] for r in rows), (
        "repeat_kv's expanded copy is priced")


def windowed(seq, window):
    return sum(min(p + 1, window) for p in range(seq))


def test_a_sliding_window_is_honoured_in_prefill(capsys, tmp_path):
    c, rows, _ = prefill(capsys, tmp_path, CONFIGS / "serve_phi-3-mini-4k-instruct.json",
                         4096)
    heads, d = c["num_attention_heads"], c["hidden_size"] // c["num_attention_heads"]
    pairs = windowed(4096, c["sliding_window"])
    attention = [r for r in rows if r["op"] == "attention (fused)"]
    flops = sum(r["flops_by_unit"]["tensor_core.bf16"] for r in attention)
    assert flops == pytest.approx(LAYERS * 4 * d * heads * pairs, rel=1e-9)
    full = 4096 * 4097 // 2
    assert full / pairs == pytest.approx(1.334, abs=5e-4)  # without it: a third more work


def test_layernorm_is_priced_as_one_fused_kernel(capsys, tmp_path):
    c, rows, total = prefill(capsys, tmp_path, CONFIGS / "serve_gpt2.json", 128)
    norms = [r for r in rows if r["op"] == "layernorm (fused)"]
    assert sum(r["count"] for r in norms) == 2 * LAYERS + 1  # ln_1, ln_2 per block, ln_f
    h = c["n_embd"]
    one = 128 * h * BF16 * 2 + 2 * h * BF16  # x in, y out, weight and bias
    assert sum(r["bytes"] for r in norms) == (2 * LAYERS + 1) * one
    assert all(r["sol_time_s"] is not None for r in norms)
    assert total["unpriced_ops"] == 0
