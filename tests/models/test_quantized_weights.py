"""Quantized weights priced at their stored bytes, counted here from the config values: AWQ
int4 (Qwen2.5-7B-Instruct-AWQ: 4 bits a weight, an fp16 scale and a 4-bit zero point per group
of 128 inputs and output column), fp8 e4m3 with 128 x 128 block scales (DeepSeek-V3: 1 byte a
weight, an fp32 scale a block) and `--weights int4:64`. Embeddings, norms, biases, routers and
the LM head stay bf16. Configs cut to 2 layers (DeepSeek-V3: layer 0 dense, layer 1 MoE)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
BF16 = 2


def reduced(tmp_path, path, **changes):
    config = json.loads(path.read_text())
    config.update(num_hidden_layers=2, **changes)
    out = tmp_path / path.name
    out.write_text(json.dumps(config))
    return out, config


def project(capsys, path, *extra):
    code = main(["model", str(path), "-m", "h200", "--phase", "decode", "--batch", "4",
                 "--context", "1023", "--json", *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    return lines[:-1], lines[-1]


def int4(out, inp, group):
    groups = math.ceil(inp / group) * out
    return out * inp / 2 + groups * 2 + groups / 2  # weights, fp16 scales, 4-bit zeros


def fp8_block(out, inp):
    return out * inp + math.ceil(out / 128) * math.ceil(inp / 128) * 4


def row(rows, layer, op="aten::mm"):
    found = [r for r in rows if r["layer"] == layer and r["op"] == op]
    assert len(found) == 1
    return found[0]


def test_awq_int4_weights_are_priced_at_their_stored_bytes(capsys, tmp_path):
    path, c = reduced(tmp_path, CONFIGS / "serve_qwen2.5-7b-instruct-awq.json")
    rows, total = project(capsys, path)
    h, inter, vocab = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    d = h // c["num_attention_heads"]
    kv = c["num_key_value_heads"] * d
    layer = (int4(h, h, 128) + 2 * int4(kv, h, 128) + int4(h, h, 128)  # q, k, v, o
             + 2 * int4(inter, h, 128) + int4(h, inter, 128)  # gate, up, down
             + (h + 2 * kv) * BF16 + 2 * h * BF16)  # q/k/v biases, two norms
    expected = 2 * vocab * h * BF16 + 2 * layer + h * BF16  # embedding, LM head, final norm
    assert total["weight_bytes"] == pytest.approx(expected, rel=1e-9)
    assert total["weights"] == "awq int4, group 128"
    # the MLP's up projection: 4 tokens, bf16 activations, int4 weights dequantised once
    up = row(rows, "model.layers.*.mlp.up_proj")
    assert up["bytes"] == pytest.approx(2 * (4 * h * BF16 + int4(inter, h, 128)
                                             + 4 * inter * BF16))
    assert up["flops_by_unit"]["tensor_core.bf16"] == 2 * 2 * 4 * inter * h
    assert up["flops_by_unit"]["cuda_core.fp32"] == 2 * 3 * inter * h
    assert row(rows, "lm_head")["bytes"] == pytest.approx(
        vocab * h * BF16 + 4 * h * BF16 + 4 * vocab * BF16)  # the LM head stays bf16


def test_weights_override_int4_with_group_64(capsys, tmp_path):
    path, c = reduced(tmp_path, MODELS / "llama-3.2-1b.json")
    _, total = project(capsys, path, "--weights", "int4:64")
    h, inter, vocab, d = c["hidden_size"], c["intermediate_size"], c["vocab_size"], 64
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    layer = (int4(q, h, 64) + 2 * int4(kv, h, 64) + int4(h, q, 64)
             + 2 * int4(inter, h, 64) + int4(h, inter, 64) + 2 * h * BF16)
    # tied embeddings: the one table is the embedding and the (unquantized) LM head
    assert total["weight_bytes"] == pytest.approx(vocab * h * BF16 + 2 * layer + h * BF16,
                                                  rel=1e-9)
    assert "group 64" in total["weights"]


def test_fp8_block_scaled_weights_and_gemms_on_the_fp8_tensor_cores(capsys, tmp_path):
    path, c = reduced(tmp_path, CONFIGS / "serve_deepseek-v3.json", first_k_dense_replace=1)
    rows, total = project(capsys, path)
    h, inter, vocab = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    heads, nope, rope, v = (c["num_attention_heads"], c["qk_nope_head_dim"],
                            c["qk_rope_head_dim"], c["v_head_dim"])
    q_rank, kv_rank = c["q_lora_rank"], c["kv_lora_rank"]
    experts, moe_inter = c["n_routed_experts"], c["moe_intermediate_size"]
    attention = (fp8_block(q_rank, h) + fp8_block(heads * (nope + rope), q_rank)
                 + fp8_block(kv_rank + rope, h) + fp8_block(heads * (nope + v), kv_rank)
                 + fp8_block(h, heads * v) + (q_rank + kv_rank + 2 * h) * BF16)
    dense = 2 * fp8_block(inter, h) + fp8_block(h, inter)
    shared = moe_inter * c["n_shared_experts"]
    moe = (experts * (fp8_block(2 * moe_inter, h) + fp8_block(h, moe_inter))
           + 2 * fp8_block(shared, h) + fp8_block(h, shared) + experts * h * BF16)  # router
    expected = 2 * vocab * h * BF16 + 2 * attention + dense + moe + h * BF16
    # the router's score-correction bias (256 values) is the only parameter not counted here
    assert total["weight_bytes"] == pytest.approx(expected, rel=1e-6)
    assert total["weights"] == "fp8 e4m3, 128x128 block scales"
    up = row(rows, "model.layers.*.mlp.up_proj")  # layer 0's dense MLP, 4 tokens
    assert up["flops_by_unit"]["tensor_core.fp8"] == 2 * 4 * inter * h
    assert "tensor_core.bf16" not in up["flops_by_unit"]
    assert up["bytes"] == pytest.approx(4 * h * BF16 + fp8_block(inter, h) + 4 * inter * BF16)
    experts_row = row(rows, "model.layers.*.mlp.experts", "moe experts (fused)")
    assert "tensor_core.fp8" in experts_row["flops_by_unit"]


def test_an_unpriced_quant_method_is_refused_in_one_line(capsys, tmp_path):
    path, _ = reduced(tmp_path, MODELS / "llama-3.2-1b.json",
                      quantization_config={"quant_method": "hqq", "nbits": 4})
    assert main(["model", str(path), "-m", "h200", "--phase", "decode"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "quantization_config.quant_method" in err[0] and "hqq" in err[0]
    assert main(["model", str(path), "-m", "h200", "--phase", "decode", "--weights",
                 "int3"]) == 2
    assert "expected fp8, int8, int4 or int4:GROUP" in capsys.readouterr().err


def test_gptq_and_nf4_matrix_bytes_by_hand():
    from roofwise.models.quant import scheme_from_config

    gptq = scheme_from_config({"quantization_config": {"quant_method": "gptq", "bits": 4,
                                                       "group_size": -1}}, "c.json")
    # 4096 x 11008: 4 bits a weight; per column one fp16 scale and one 4-bit zero; g_idx int32
    assert gptq.matrix_bytes(4096, 11008) == 4096 * 11008 / 2 + 4096 * 2 + 4096 / 2 + 11008 * 4
    nf4 = scheme_from_config({"quantization_config": {
        "quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": True}}, "c.json")
    blocks = 4096 * 4096 // 64  # one absmax per 64 weights, in 8 bits, fp32 per 256 of them
    assert nf4.matrix_bytes(4096, 4096) == 4096 * 4096 / 2 + blocks + blocks // 256 * 4
    fp8 = scheme_from_config({"quantization_config": {
        "quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}}, "c.json")
    assert fp8.matrix_bytes(576, 7168) == 576 * 7168 + 5 * 56 * 4  # 576 rows: 5 blocks


def int8_gptq(out, inp, group):
    groups = math.ceil(inp / group) * out
    return out * inp + groups * 2 + groups + inp * 4  # weights, fp16 scales, 8-bit zeros, g_idx


def test_gptq_int8_weights_are_priced_at_their_stored_bytes(capsys, tmp_path):
    # the quantization_config Qwen publishes with its GPTQ-Int8 checkpoints (8 bits, group
    # 128, symmetric, no act-order), on the Qwen2.5-7B config the AWQ test reads
    path, c = reduced(tmp_path, CONFIGS / "serve_qwen2.5-7b-instruct-awq.json",
                      quantization_config={"bits": 8, "damp_percent": 0.01, "desc_act": False,
                                           "group_size": 128, "quant_method": "gptq",
                                           "static_groups": False, "sym": True,
                                           "true_sequential": True})
    rows, total = project(capsys, path)
    h, inter, vocab = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    kv = c["num_key_value_heads"] * (h // c["num_attention_heads"])
    layer = (2 * int8_gptq(h, h, 128) + 2 * int8_gptq(kv, h, 128)  # q, o; k, v
             + 2 * int8_gptq(inter, h, 128) + int8_gptq(h, inter, 128)  # gate, up, down
             + (h + 2 * kv) * BF16 + 2 * h * BF16)  # q/k/v biases, two norms
    expected = 2 * vocab * h * BF16 + 2 * layer + h * BF16
    assert total["weight_bytes"] == pytest.approx(expected, rel=1e-9)
    assert total["weights"] == "gptq int8, group 128"
    up = row(rows, "model.layers.*.mlp.up_proj")  # weight-only: bf16 tensor cores, dequantised
    assert up["bytes"] == pytest.approx(2 * (4 * h * BF16 + int8_gptq(inter, h, 128)
                                             + 4 * inter * BF16))
    assert up["flops_by_unit"]["tensor_core.bf16"] == 2 * 2 * 4 * inter * h
    assert up["flops_by_unit"]["cuda_core.fp32"] == 2 * 3 * inter * h


def test_fbgemm_fp8_rowwise_weights_and_per_token_activations(capsys, tmp_path):
    # Meta's FP8 Llama-3.1 checkpoints: `fbgemm_fp8`, the layers named in
    # modules_to_not_convert (here layer 0's MLP, as the 405B lists its first and last
    # layers' MLPs, and the LM head) stay bf16
    path, c = reduced(tmp_path, MODELS / "llama-3.2-1b.json", quantization_config={
        "activation_scale_ub": 1200.0, "quant_method": "fbgemm_fp8",
        "modules_to_not_convert": ["model.layers.0.mlp.down_proj",
                                   "model.layers.0.mlp.gate_proj",
                                   "model.layers.0.mlp.up_proj", "lm_head"]})
    rows, total = project(capsys, path)
    h, inter, vocab, d = c["hidden_size"], c["intermediate_size"], c["vocab_size"], 64
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d

    def rowwise(out, inp):  # 1 byte a weight, one fp32 scale per output channel
        return out * inp + out * 4

    attention = rowwise(q, h) + 2 * rowwise(kv, h) + rowwise(h, q)
    mlp_fp8 = 2 * rowwise(inter, h) + rowwise(h, inter)
    mlp_bf16 = 3 * inter * h * BF16
    expected = (vocab * h * BF16 + 2 * attention + mlp_fp8 + mlp_bf16  # tied embeddings
                + 2 * 2 * h * BF16 + h * BF16)  # norms
    assert total["weight_bytes"] == pytest.approx(expected, rel=1e-9)
    assert total["weights"] == "fp8 e4m3, one scale per output channel, per-token activations"
    o = row(rows, "model.layers.*.self_attn.o_proj")  # quantized in both layers
    assert o["flops_by_unit"]["tensor_core.fp8"] == 2 * 2 * 4 * h * q
    assert "tensor_core.bf16" not in o["flops_by_unit"]
    up = row(rows, "model.layers.*.mlp.up_proj")  # quantized in layer 1: priced fp8 in both
    assert up["flops_by_unit"]["tensor_core.fp8"] == 2 * 2 * 4 * inter * h
    notes = " ".join(total.get("notes", []))
    assert "activations quantized per token" in notes
