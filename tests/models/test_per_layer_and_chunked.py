"""Real configs that broke `roofwise model` (found by running every config ai-dynamo's
aiconfigurator vendors): Gemma-4, whose config keeps KV heads and head size per layer
(transformers refuses to read them globally: a traceback before), and Llama-4, whose experts
take every token (priced routed, as a serving kernel runs them) and whose local layers attend
within 8,192-token chunks. Totals are checked against counts made here from the config
values. The configs run reduced to 2 layers (a copy written by the test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main
from roofwise.models.capture import chunked_pairs

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
BF16 = 2


def project(capsys, path, *args):
    code = main(["model", str(path), "-m", "h200", "--json", *map(str, args)])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    return rows[:-1], rows[-1]


def reduced(tmp_path, name, **changes):
    config = json.loads((CONFIGS / name).read_text())
    text = config["text_config"]
    text.update(changes)
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path, text


def attention_rows(rows):
    return sorted((r for r in rows if r["op"] == "attention (fused)"),
                  key=lambda r: r["shapes"])


def test_gemma_4_per_layer_heads_price_each_layer_as_built(capsys, tmp_path):
    path, c = reduced(tmp_path, "gemma-4-26b-a4b.json", num_hidden_layers=2,
                      layer_types=["sliding_attention", "full_attention"])
    batch, context = 2, 2000
    rows, total = project(capsys, path, "--phase", "decode", "--batch", batch, "--context",
                          context)
    heads, window = c["num_attention_heads"], c["sliding_window"]
    by_head = {r["shapes"].split(",")[0].rsplit("x", 1)[1]: r for r in attention_rows(rows)}
    sliding, full = by_head["256"], by_head["512"]
    # sliding layer: 8 KV heads of 256, the last 1,024 positions; full: 2 KV heads of 512
    assert sliding["shapes"] == f"q {batch}x1x{heads}x256, kv {batch}x{window}x8x256 bf16"
    assert full["shapes"] == f"q {batch}x1x{heads}x512, kv {batch}x{context + 1}x2x512 bf16"
    # QK^T and PV: 2 x 2 x head size per (query, key) pair and head
    assert sliding["flops_by_unit"]["tensor_core.bf16"] == 4 * 256 * heads * batch * window
    assert full["flops_by_unit"]["tensor_core.bf16"] == 4 * 512 * heads * batch * (context + 1)
    # what the step reads of the two caches, keys and values (bf16), at least
    kv_read = BF16 * 2 * batch * (8 * 256 * window + 2 * 512 * (context + 1))
    assert kv_read <= sliding["bytes"] + full["bytes"] <= kv_read * 1.01
    assert total["fits"] is True


def test_gemma_4_under_tensor_parallelism_is_refused_in_one_line(capsys, tmp_path):
    path, _ = reduced(tmp_path, "gemma-4-26b-a4b.json", num_hidden_layers=2,
                      layer_types=["sliding_attention", "full_attention"])
    code = main(["model", str(path), "-m", "h200", "--phase", "decode", "--tp", "2"])
    out, err = capsys.readouterr()
    assert code == 2 and not out
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "kept per layer (head_dim, num_key_value_heads" in err and "--tp 1" in err


@pytest.mark.parametrize(("phase", "batch", "seq", "context"),
                         [("decode", 8, 1, 1024), ("prefill", 1, 600, 0)])
def test_llama_4_dense_experts_are_priced_routed(capsys, tmp_path, phase, batch, seq, context):
    path, c = reduced(tmp_path, "llama-4-scout-17b-16e-instruct.json", num_hidden_layers=2)
    rows, _ = project(capsys, path, "--phase", phase, "--batch", batch, "--seq", seq,
                      "--context", context)
    hidden, inter, experts = c["hidden_size"], c["intermediate_size"], c["num_local_experts"]
    top_k, tokens = c["num_experts_per_tok"], batch * seq
    (moe,) = [r for r in rows if r["op"] == "moe experts (fused)"]
    assert moe["count"] == 2
    # each token through its top-1 expert: gate, up and down, 2 FLOPs per multiply-add
    assert moe["flops_by_unit"]["tensor_core.bf16"] == 2 * 2 * tokens * top_k * 3 * hidden * inter
    # the experts that get a token are read whole (balanced: min(tokens x top_k, 16) of them)
    weights = min(tokens * top_k, experts) * 3 * hidden * inter * BF16
    assert weights * 2 <= moe["bytes"] <= weights * 2 * 1.02
    # the dense form's copy of every token per expert, its scaling and its sum are not priced
    assert not [r for r in rows if r["layer"] == "model.layers.*.feed_forward"]


@pytest.mark.parametrize(("phase", "seq", "context"),
                         [("decode", 1, 20000), ("decode", 1, 1000), ("prefill", 9000, 0),
                          ("prefill", 100, 8150)])
def test_llama_4_chunked_layers_see_their_own_chunk(capsys, tmp_path, phase, seq, context):
    path, c = reduced(tmp_path, "llama-4-scout-17b-16e-instruct.json", num_hidden_layers=2)
    chunk, heads, head = c["attention_chunk_size"], c["num_attention_heads"], c["head_dim"]
    rows, _ = project(capsys, path, "--phase", phase, "--seq", seq, "--context", context)
    (attention,) = attention_rows(rows)  # layers 0 and 1 are both chunked
    first, last = context, context + seq - 1
    keys = last + 1 - (first // chunk) * chunk  # from the first query's chunk start on
    assert f"kv 1x{keys}x{c['num_key_value_heads']}x{head}" in attention["shapes"]
    # pairs counted here query by query, independently of chunked_pairs
    pairs = sum(p % chunk + 1 for p in range(first, last + 1))
    assert chunked_pairs(first, seq, chunk) == pairs
    assert attention["flops_by_unit"]["tensor_core.bf16"] == pytest.approx(
        2 * 4 * head * heads * pairs, rel=1e-9)


def test_qwen3_vl_is_built_whole_and_priced_on_its_text_decoder(capsys, tmp_path):
    """transformers has no causal LM for Qwen3-VL's text decoder alone: the whole model is
    built and run on text (its vision tower idle, its weights resident)."""
    config = json.loads((CONFIGS / "aiconfigurator" / "Qwen--Qwen3-VL-2B-Instruct.json")
                        .read_text())
    c = config["text_config"]
    c["num_hidden_layers"] = LAYERS = 2
    path = tmp_path / "qwen3-vl.json"
    path.write_text(json.dumps(config))
    batch, context = 8, 1024
    rows, total = project(capsys, path, "--phase", "decode", "--batch", batch, "--context",
                          context)
    h, inter, vocab = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    hq, hk, d = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    per_layer = h * hq * d + 2 * h * hk * d + hq * d * h + 3 * h * inter
    linear = 2 * batch * (LAYERS * per_layer + h * vocab)  # the LM head on the last token
    attention = LAYERS * 4 * d * hq * batch * (context + 1)
    assert total["flops_by_unit"]["tensor_core.bf16"] == pytest.approx(linear + attention,
                                                                       rel=1e-6)
    assert total["kv_cache_bytes"] == LAYERS * 2 * batch * hk * (context + 1) * d * BF16
    # resident: the text decoder (tied embedding) and the vision tower, which no row reads
    text = vocab * h + LAYERS * (per_layer + 2 * h + 2 * d) + h  # norms, q/k norms, final
    assert total["weight_bytes"] > text * BF16
    assert not [r for r in rows if "visual" in r["layer"]]
    assert any("built whole (Qwen3VLForConditionalGeneration)" in n for n in total["notes"])


def test_deepseek_v32_under_tensor_parallelism_keeps_its_indexer_whole(capsys, tmp_path):
    """DeepSeek Sparse Attention's indexer (index_n_heads heads of index_head_dim) is
    replicated on every device, as serving stacks run it; the attention's heads are split.
    (Its indexer was cut like an attention block before, and the prefill failed.)"""
    config = json.loads((CONFIGS / "aiconfigurator" / "deepseek-ai--DeepSeek-V3.2.json")
                        .read_text())
    config["num_hidden_layers"] = 2
    path = tmp_path / "ds32.json"
    path.write_text(json.dumps(config))
    tp, seq = 2, 64
    rows, _ = project(capsys, path, "--phase", "prefill", "--seq", seq, "--tp", tp)
    q_lora, heads = config["q_lora_rank"], config["num_attention_heads"] // tp
    q_width = config["qk_nope_head_dim"] + config["qk_rope_head_dim"]
    index_width = config["index_n_heads"] * config["index_head_dim"]

    def mm(layer):
        (found,) = [r for r in rows if r["layer"] == layer and r["op"] == "aten::mm"]
        return found["shapes"]

    # the weights as DeepSeek-V3.2's fp8 checkpoint stores them (block scales), the
    # activations bf16
    assert mm("model.layers.*.self_attn.q_b_proj") == (
        f"[{seq}, {q_lora}] bf16, [{q_lora}, {heads * q_width}] fp8_e4m3")
    assert mm("model.layers.*.self_attn.indexer.wq_b") == (
        f"[{seq}, {q_lora}] bf16, [{q_lora}, {index_width}] fp8_e4m3")
