"""`roofwise model` on real configs of architectures that transformers will not run with SDPA
(Gemma-2, gpt-oss, BLOOM) or that hold more than a decoder (Gemma-3 with its vision tower):
each projects, its attention priced as the notes say, the notes true with and without
--unfused. Configs in tests/fixtures/configs (see its README), reduced to 2 layers.

Gemma-2-9B, hand count of one decode step over a context of C = 512 cached tokens, per layer:
q 3584 -> 16 x 256, k and v 3584 -> 8 x 256, o 4096 -> 3584, gate and up 3584 -> 14336, down
14336 -> 3584; LM head 3584 -> 256,000 (its default vocabulary). Attention: 16 query heads of
256 over C + 1 keys, QK and PV 2 x 16 x 513 x 256 FLOP each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
LAYERS = 2
CONTEXT = 512
FUSED = "attention priced as one fused kernel per layer"


def reduced(tmp_path, name):
    config = json.loads((CONFIGS / f"{name}.json").read_text())
    decoder = config.get("text_config", config)
    decoder["num_hidden_layers"] = LAYERS
    if "layer_types" in decoder:
        decoder["layer_types"] = decoder["layer_types"][:LAYERS]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(config))
    return path


def project(capsys, path, *extra):
    code = main(["model", str(path), "-m", "h200", "--phase", "decode", "--context",
                 str(CONTEXT), "--json", *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1]["op"] == "total"
    return lines[:-1], lines[-1]


def transformers_default(tmp_path, model_type, architecture, **changes):
    """transformers' own default config of `model_type` (written by its maintainers), with
    `changes`, as a file."""
    from transformers import CONFIG_MAPPING

    config = CONFIG_MAPPING[model_type]().to_dict()
    config.update(architectures=[architecture], **changes)
    path = tmp_path / f"{model_type}.json"
    path.write_text(json.dumps(config))
    return path, config


def gemma2_linear_flops():
    hidden, heads, kv, head, inter, vocab = 3584, 16, 8, 256, 14336, 256000
    per_layer = hidden * (heads + 2 * kv) * head + heads * head * hidden + 3 * hidden * inter
    return 2 * (LAYERS * per_layer + hidden * vocab)


def test_gemma2_builds_eager_and_its_attention_is_priced_as_the_fused_kernel(capsys, tmp_path):
    rows, total = project(capsys, reduced(tmp_path, "gemma-2-9b"))
    attention = [r for r in rows if r["op"] == "attention (fused)"]
    assert len(attention) == 1 and attention[0]["count"] == LAYERS
    assert attention[0]["flops"] == pytest.approx(LAYERS * 2 * 2 * 16 * (CONTEXT + 1) * 256,
                                                  rel=0.02)
    mm = sum(r["flops"] for r in rows if r["op"] in ("aten::mm", "aten::addmm"))
    assert mm == pytest.approx(gemma2_linear_flops(), rel=1e-6)
    notes = " ".join(total["notes"])
    assert FUSED in notes
    assert "Gemma2ForCausalLM refuses SDPA, so it is built eager" in notes
    assert "logit softcapping (one tanh per score) not priced" in notes
    assert not any(r["op"] in ("aten::bmm", "aten::_softmax") for r in rows)


def test_unfused_notes_say_attention_runs_op_by_op(capsys, tmp_path):
    rows, total = project(capsys, reduced(tmp_path, "gemma-2-9b"), "--unfused")
    notes = " ".join(total["notes"])
    assert FUSED not in notes  # the notes used to claim the fused kernel under --unfused
    assert "attention priced op by op as transformers' eager form runs it" in notes
    assert not any(r["op"] == "attention (fused)" for r in rows)
    assert any(r["op"] == "aten::_softmax" for r in rows)


def test_unfused_llama_notes_too(capsys):
    config = Path(__file__).resolve().parents[2] / "examples" / "models" / "llama-3.2-1b.json"
    _, fused = project(capsys, config)
    _, unfused = project(capsys, config, "--unfused")
    assert FUSED in " ".join(fused["notes"])
    assert FUSED not in " ".join(unfused["notes"])


def test_gpt_oss_projects_with_its_sinks_said_unpriced(capsys, tmp_path):
    rows, total = project(capsys, reduced(tmp_path, "gpt-oss-20b"))
    assert sum(r["count"] for r in rows if r["op"] == "attention (fused)") == LAYERS
    assert any(r["op"] == "moe experts (fused)" for r in rows)
    notes = " ".join(total["notes"])
    assert "GptOssForCausalLM refuses SDPA" in notes
    assert "attention sinks (one more logit per head and query) not priced" in notes


def test_gemma3_multimodal_projects_its_text_decoder_and_says_so(capsys, tmp_path):
    rows, total = project(capsys, reduced(tmp_path, "gemma-3-4b"))
    assert total["kv_cache_bytes"] == LAYERS * 2 * 4 * 256 * (CONTEXT + 1) * 2  # 4 KV heads
    assert "gemma3: its text decoder (gemma3_text) only" in " ".join(total["notes"])
    assert not any("vision" in r["layer"] for r in rows)


def test_bloom_has_no_fused_path_and_the_notes_say_op_by_op(capsys, tmp_path):
    """transformers' BLOOM writes its ALiBi attention inline: no SDPA, no attention
    interface (it ended in a traceback)."""
    from transformers import AutoConfig

    config = AutoConfig.for_model("bloom", n_layer=LAYERS, hidden_size=1024, n_head=16,
                                  vocab_size=250880).to_dict()
    path = tmp_path / "bloom.json"
    path.write_text(json.dumps({k: v for k, v in config.items()
                                if k != "transformers_version"}))
    rows, total = project(capsys, path)
    notes = " ".join(total["notes"])
    assert "BloomForCausalLM has no fused attention path in transformers" in notes
    assert FUSED not in notes
    assert any(r["op"] == "aten::_softmax" for r in rows)


def test_falcon_projects(capsys, tmp_path):
    rows, total = project(capsys, reduced(tmp_path, "falcon-7b-instruct"))
    hidden, heads, vocab = 4544, 71, 65024
    head = hidden // heads
    qkv = hidden * (heads + 2) * head  # multi-query: one K and one V head
    per_layer = qkv + hidden * hidden + 2 * hidden * 4 * hidden
    mm = sum(r["flops"] for r in rows if r["op"] in ("aten::mm", "aten::addmm"))
    assert mm == pytest.approx(2 * (LAYERS * per_layer + hidden * vocab), rel=1e-6)
    assert FUSED in " ".join(total["notes"])


@pytest.mark.parametrize("model_type", ["exaone", "internlm3"])
def test_a_model_type_transformers_runs_with_llamas_class_projects(capsys, tmp_path,
                                                                   model_type):
    # EXAONE 3.5 and InternLM3 checkpoints name their own model_type (and remote code in
    # auto_map, never run); transformers 5 builds them with LlamaForCausalLM. They were
    # refused ("no causal-LM model"). EXAONE's config in the field names LG publishes
    # (num_layers, activation_function, layer_norm_epsilon), with a 2.4B model's sizes.
    h, inter, heads, kv_heads, vocab = 2560, 7168, 32, 8, 102400
    config = {"architectures": ["ExaoneForCausalLM"], "model_type": model_type,
              "auto_map": {"AutoModelForCausalLM": "modeling_exaone.ExaoneForCausalLM"},
              "hidden_size": h, "intermediate_size": inter, "num_attention_heads": heads,
              "num_key_value_heads": kv_heads, "vocab_size": vocab,
              "head_dim": h // heads, "max_position_embeddings": 32768,
              "tie_word_embeddings": True,
              "rope_theta": 1000000.0, "torch_dtype": "bfloat16"}
    config.update({"num_layers": 2, "activation_function": "silu", "layer_norm_epsilon": 1e-5}
                  if model_type == "exaone" else
                  {"num_hidden_layers": 2, "hidden_act": "silu", "rms_norm_eps": 1e-5})
    path = tmp_path / f"{model_type}.json"
    path.write_text(json.dumps(config))
    rows, total = project(capsys, path)
    kv = kv_heads * (h // heads)
    layer = 2 * h * h + 2 * kv * h + 3 * inter * h + 2 * h  # q, o; k, v; MLP; two norms
    assert total["weight_bytes"] == 2 * (vocab * h + 2 * layer + h)  # tied head, final norm
    assert not [r for r in rows if r["sol_time_s"] is None]


def test_olmo_layernorm_without_weight_or_bias_is_one_fused_kernel(capsys, tmp_path):
    # OLMo's LayerNorm holds no weight and no bias: it ran op by op and its
    # `native_layer_norm` was unpriced. transformers' own OLMo config, two layers.
    path, config = transformers_default(tmp_path, "olmo", "OlmoForCausalLM",
                                        num_hidden_layers=2)
    rows, _ = project(capsys, path)
    assert not [r for r in rows if r["sol_time_s"] is None]
    h = config["hidden_size"]
    (final,) = [r for r in rows if r["layer"] == "model.norm"]
    # one token: read and write h bf16 values, no weight; 5 operations an element, 3 per
    # row and an rsqrt
    assert (final["op"], final["bytes"], final["flops"]) == ("layernorm (fused)", 4 * h,
                                                             5 * h + 3 + 1)


def test_a_layer_count_worked_out_from_the_configs_own_fields_is_read(capsys, tmp_path):
    # LongCat-Flash names `num_layers` (each of two attention and MLP sublayers); transformers
    # works num_hidden_layers out from it. It was refused as "num_hidden_layers: missing".
    path, config = transformers_default(tmp_path, "longcat_flash", "LongcatFlashForCausalLM",
                                        num_layers=2)
    rows, _ = project(capsys, path)
    q = [r for r in rows if r["layer"] == "model.layers.*.self_attn.*.q_a_proj"]
    assert [r["count"] for r in q] == [2 * 2]  # two layers of two attention sublayers
    (experts,) = [r for r in rows if r["op"] == "moe experts (fused)"]
    assert experts["count"] == 2
    # its router picks 12 of 512 experts and 256 that compute nothing: routing balanced over
    # the 768 leaves 12 x 512 / 768 = 8 real experts a token, gate, up and down each
    h, inter = config["hidden_size"], config["expert_ffn_hidden_size"]
    assert experts["shapes"] == (f"1 tokens x top-12 of 512 and 256 zero-computation (8 real),"
                                 f" {h}->{inter} bf16")
    assert experts["flops_by_unit"]["tensor_core.bf16"] == 2 * 8 * 3 * 2 * h * inter


def test_mllama_runs_its_text_layers_and_skips_the_cross_attention_ones(capsys, tmp_path):
    # Llama-3.2-Vision (transformers' own Mllama config, one self-attention and one
    # cross-attention layer): on text, the cross-attention layer asks the cache whether it
    # holds the image's states; a cache made ready without a forward answered with a crash
    # ("'NoneType' object has no attribute 'numel'"). It holds none: the layer is skipped.
    from transformers import CONFIG_MAPPING

    text = CONFIG_MAPPING["mllama"]().text_config.to_dict()
    text.update(num_hidden_layers=2, cross_attention_layers=[1])
    path, _ = transformers_default(tmp_path, "mllama", "MllamaForConditionalGeneration",
                                   text_config=text)
    rows, _ = project(capsys, path)
    assert not [r for r in rows if r["sol_time_s"] is None]
    attention = [r for r in rows if r["op"] == "attention (fused)"]
    assert [r["count"] for r in attention] == [1]  # the self-attention layer only
    assert not [r for r in rows if "cross_attn" in r["layer"]]


@pytest.mark.parametrize(("model_type", "layer"), [
    # Ling's hybrid: its delta-rule layers (a gated linear attention) ran op by op from
    # transformers' reference form, and were priced as if those ops were the kernel
    ("bailing_hybrid", "model.layers.0.self_attn is BailingHybridDeltaAttention"),
    ("qwen3_next", "model.layers.0.linear_attn is Qwen3NextGatedDeltaNet"),
])
def test_a_delta_rule_layer_is_refused_by_name(capsys, tmp_path, monkeypatch, model_type,
                                               layer):
    from transformers import CONFIG_MAPPING

    config = CONFIG_MAPPING[model_type]().to_dict()  # transformers' own default config
    monkeypatch.chdir(tmp_path)  # a short path: the one line keeps the layer's name whole
    Path("c.json").write_text(json.dumps(config))
    code = main(["model", "c.json", "-m", "h200", "--phase", "decode", "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"{layer}: a recurrence" in err
