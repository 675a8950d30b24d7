"""Public Hugging Face configs a tester ran, third round (tests/fixtures/configs/round3, its
README section "Third round (2026-12-06)"): an embedding model's BERT config, llava-1.5 with
a text_config that leaves its sizes to transformers, OLMo-2 stored in float32, Llama-3.2-90B-
Vision's cross-attention layers, and the hand counts of Phi-4-mini, Qwen1.5-MoE, StarCoder2
and Voxtral. Each is cut to a few layers; every expected figure is counted here from the
config's values (parameters x bytes, 2 x parameters x tokens, K and V per cached token)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main

ROUND3 = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "round3"
DECODE = ("--phase", "decode", "--context", "64", "--json")


def fixture(name: str, layers: int = 2) -> dict:
    """A round-3 config with `layers` decoder layers (its text_config's, where it has one)."""
    config = json.loads((ROUND3 / name).read_text())
    text = config.get("text_config")
    part = text if isinstance(text, dict) and "num_hidden_layers" in text else config
    part["num_hidden_layers"] = layers
    return config


def run(capsys, tmp_path, config: dict, *args: str) -> tuple[int, str, str, Path]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code = main(["model", str(path), "-m", "h100-sxm", *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err, path


def total(out: str) -> dict:
    found = json.loads(out.splitlines()[-1])
    assert found["op"] == "total"
    return found


def rows(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()[:-1]]


# --- defects found, each fixed -------------------------------------------------------------


def test_an_encoder_is_refused_not_priced_as_a_causal_decoder(capsys, tmp_path):
    """Snowflake's arctic-embed-m is a BertModel (is_decoder false): every token attends to
    every other, no KV cache, no LM head. transformers' BertLMHeadModel builds from it without
    a word, and it was priced as a causal decoder: half its attention pairs, a 9.44 MB "KV
    cache" and an LM head it lacks. Refused in one line naming the layer."""
    config = fixture("mlc-llm/snowflake-arctic-embed-m.json")
    for args in (("--phase", "prefill", "--seq", "256"), ("--phase", "decode", "--context", "64"),
                 ("--serve", "input=256,output=16", "--batch", "1,8")):
        code, out, err, path = run(capsys, tmp_path, config, *args)
        assert code == 2 and not out and err.count("\n") == 1, err
        assert str(path) in err
        assert ("bert.encoder.layer.0.attention.self (BertSelfAttention) is not causal: an "
                "encoder") in err, err


def test_bert_run_as_a_decoder_is_priced_causal(capsys, tmp_path):
    """The same config with is_decoder true is a causal decoder: projected, its attention
    over the causal pairs of 256 tokens, 256 x 257 / 2 = 32,896 per head, QK^T and PV 2 FLOPs
    per pair per head dimension each: 4 x 32,896 x 12 heads x 64 = 101,056,512 per layer."""
    config = fixture("mlc-llm/snowflake-arctic-embed-m.json")
    config["is_decoder"] = True
    code, out, err, _ = run(capsys, tmp_path, config, "--phase", "prefill", "--seq", "256",
                            "--json")
    assert code == 0, err
    attention = [r for r in rows(out) if r["op"] == "attention (fused)"]
    assert len(attention) == 1 and attention[0]["count"] == 2
    assert attention[0]["flops_by_unit"]["tensor_core.bf16"] == 2 * 4 * (256 * 257 // 2) * 768


def test_a_missing_size_under_text_config_is_named_there(capsys, tmp_path):
    """llava-1.5's config names five fields of its Llama decoder under text_config and
    leaves the sizes to LlamaConfig's defaults. Refused (roofwise does not guess a size), but
    the line named a top-level `hidden_size`: it now names text_config's, and the default
    transformers would fill in (4,096)."""
    config = json.loads((ROUND3 / "mlc-llm" / "llava.json").read_text())
    code, out, err, path = run(capsys, tmp_path, config, *DECODE)
    assert code == 2 and not out and err.count("\n") == 1, err
    assert (f"{path}: text_config: hidden_size: missing; expected llama's hidden size as an "
            "integer (transformers would fill in its default, 4,096, without a word)") in err, err


def test_a_missing_top_level_size_names_transformers_default_under_its_own_name(capsys,
                                                                                tmp_path):
    """GPT-2's class keeps its hidden size as n_embd: the default it would fill in is read
    under that name (768)."""
    config = {"model_type": "gpt2", "n_layer": 2, "n_head": 12, "vocab_size": 1000}
    code, out, err, path = run(capsys, tmp_path, config, *DECODE)
    assert code == 2 and not out, err
    assert f"{path}: hidden_size: missing" in err and "its default, 768," in err, err


def test_a_float32_checkpoint_says_it_is_priced_at_the_narrower_dtype(capsys, tmp_path):
    """OLMo-2-7B's config says torch_dtype float32: the checkpoint is stored at 4 bytes a
    weight. It was priced at bf16 (--dtype's default) without a word; now a note says so.
    2 layers: per layer q, k, v, o 4 x 4,096^2 = 67,108,864, MLP 3 x 4,096 x 11,008 =
    135,266,304, four norms (q, k, post-attention, post-feedforward) 4 x 4,096; untied
    embedding and head 2 x 100,352 x 4,096; a final norm: 1,226,870,784 parameters."""
    params = 2 * (4 * 4096 * 4096 + 3 * 4096 * 11008 + 4 * 4096) + 2 * 100352 * 4096 + 4096
    assert params == 1_226_870_784
    config = fixture("mlc-llm/olmo2_7b.json")
    code, out, err, _ = run(capsys, tmp_path, config, *DECODE)
    assert code == 0, err
    found = total(out)
    assert found["weight_bytes"] == 2 * params
    assert found["kv_cache_bytes"] == 2 * 2 * 32 * 128 * 65 * 2  # K and V, 64 cached + 1 new
    assert ("the config's torch_dtype is float32 (4 bytes a weight as stored); weights, KV "
            "cache and activations priced in bf16 (--dtype), 2 bytes each") in found["notes"]
    code, out, err, _ = run(capsys, tmp_path, config, *DECODE, "--dtype", "fp32")
    assert code == 0, err
    found = total(out)
    assert found["weight_bytes"] == 4 * params
    assert not any("torch_dtype" in note for note in found["notes"])


def test_a_bfloat16_checkpoint_has_no_dtype_note(capsys, tmp_path):
    code, out, err, _ = run(capsys, tmp_path, fixture("mlc-llm/phi-4.json"), *DECODE)
    assert code == 0, err
    assert not any("torch_dtype" in note for note in total(out)["notes"])


def test_mllama_cross_attention_layers_are_said_to_do_no_work_on_text(capsys, tmp_path):
    """Llama-3.2-90B-Vision: 20 of its 100 layers cross-attend to image tokens only, and
    transformers skips them on a text step, so the step prices 80 layers while the weights
    count 100; nothing said so. Cut to 5 layers with layer 3 a cross-attention layer: 4 q_proj
    calls, K and V of 4 layers (2 x 8 heads x 128 x 65 tokens x 2 bytes each), and a note."""
    config = fixture("tt-metal/llama-3.2-90b-vision-instruct.json", layers=5)
    config["text_config"]["cross_attention_layers"] = [3]
    code, out, err, _ = run(capsys, tmp_path, config, *DECODE)
    assert code == 0, err
    found = total(out)
    assert found["kv_cache_bytes"] == 4 * 2 * 8 * 128 * 65 * 2
    q_proj = [r for r in rows(out) if r["layer"].endswith("self_attn.q_proj")]
    assert [r["count"] for r in q_proj] == [4]
    assert ("mllama_text_model: 1 of its 5 layers cross-attend to image tokens only "
            "(cross_attention_layers): a text step runs none of them (their weights count as "
            "resident), a request with an image runs them too") in found["notes"]
    # none of the listed layers among the 2 a cut config builds: no note
    code, out, err, _ = run(capsys, tmp_path,
                            fixture("tt-metal/llama-3.2-90b-vision-instruct.json"), *DECODE)
    assert code == 0, err
    assert not any("cross-attend" in note for note in total(out)["notes"])


# --- hand counts of the configs that project ------------------------------------------------

# 2 layers, decode of 1 token over 64 cached (65 positions), bf16: (weight bytes, KV cache
# bytes, tensor-core FLOPs), each counted from the config's values in the comment beside it.
HAND = {
    # Phi-4-mini: hidden 3,072, 24 heads and 8 KV heads of 128, MLP 8,192, vocabulary 200,064,
    # tied. A layer: qkv 3,072 x 5,120, o 3,072^2, gate_up 3,072 x 16,384, down 8,192 x 3,072,
    # 2 norms = 100,669,440; + embedding 614,596,608 + final norm. FLOPs: 2 x (2 x 100,663,296
    # + 614,596,608 head) + attention 4 x 24 x 128 x 65 x 2 layers.
    "mlc-llm/phi-4.json": (
        2 * (2 * 100_669_440 + 200_064 * 3072 + 3072),
        2 * 2 * 8 * 128 * 65 * 2,
        2 * (2 * 100_663_296 + 200_064 * 3072) + 4 * 24 * 128 * 65 * 2),
    # Qwen1.5-MoE-A2.7B: hidden 2,048, 16 heads of 128 (q, k, v biased), 60 experts of 1,408
    # (top 4), a shared expert of 5,632 with its 1-wide gate, vocabulary 151,936 untied. A
    # layer: attention 4 x 2,048^2 + 3 x 2,048 biases, experts 60 x 3 x 2,048 x 1,408, router
    # 60 x 2,048, shared 3 x 2,048 x 5,632 + 2,048, 2 norms. FLOPs: the 4 routed experts.
    "mlc-llm/qwen2moe.json": (
        2 * (2 * (4 * 2048**2 + 3 * 2048 + 60 * 3 * 2048 * 1408 + 60 * 2048
                  + 3 * 2048 * 5632 + 2048 + 2 * 2048) + 2 * 151_936 * 2048 + 2048),
        2 * 2 * 16 * 128 * 65 * 2,
        2 * (2 * (4 * 2048**2 + 4 * 3 * 2048 * 1408 + 60 * 2048 + 3 * 2048 * 5632 + 2048)
             + 151_936 * 2048) + 4 * 16 * 128 * 65 * 2),
    # StarCoder2-15B: hidden 4,608, 36 heads and 4 KV heads of 128, every linear biased, a
    # plain (ungated) MLP of 18,432, LayerNorms with biases, vocabulary 49,152 tied.
    "mlc-llm/starcoder2.json": (
        2 * (2 * (4608 * (4608 + 2 * 512) + 4608 + 2 * 512 + 4608 * 4608 + 4608
                  + 2 * 4608 * 18_432 + 18_432 + 4608 + 4 * 4608) + 49_152 * 4608 + 2 * 4608),
        2 * 2 * 4 * 128 * 65 * 2,
        2 * (2 * (4608 * (4608 + 2 * 512) + 4608 * 4608 + 2 * 4608 * 18_432)
             + 49_152 * 4608) + 4 * 36 * 128 * 65 * 2),
    # Voxtral-Mini-3B: a Llama decoder of hidden 3,072 with 32 heads of head_dim 128 (4,096
    # wide, not 3,072) and 8 KV heads, MLP 8,192, vocabulary 131,072 untied; its Whisper-style
    # audio tower and projector resident (32 layers of 19,676,160, convolutions 492,800 and
    # 4,916,480, positions 1,500 x 1,280, a final LayerNorm; projector 5,120 x 3,072 +
    # 3,072^2): 662,134,784 parameters.
    "tt-metal/voxtral-mini-3b-2507.json": (
        2 * (2 * (3072 * 4096 * 2 + 3072 * 1024 * 2 + 3 * 3072 * 8192 + 2 * 3072)
             + 2 * 131_072 * 3072 + 3072
             + 32 * 19_676_160 + 492_800 + 4_916_480 + 1500 * 1280 + 2 * 1280
             + 5120 * 3072 + 3072 * 3072),
        2 * 2 * 8 * 128 * 65 * 2,
        2 * (2 * (3072 * 4096 * 2 + 3072 * 1024 * 2 + 3 * 3072 * 8192) + 131_072 * 3072)
        + 4 * 32 * 128 * 65 * 2),
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_each_projects_at_the_hand_count(capsys, tmp_path, name):
    weights, kv, tensor = HAND[name]
    code, out, err, _ = run(capsys, tmp_path, fixture(name), *DECODE)
    assert code == 0, err
    found = total(out)
    assert found["weight_bytes"] == weights
    assert found["kv_cache_bytes"] == kv
    assert found["flops_by_unit"]["tensor_core.bf16"] == tensor
    assert found["fits"] is True and found["max_context_limited_by"] == "max_position_embeddings"


def test_the_voxtral_tower_is_the_hand_count():
    """The audio tower and projector in HAND, counted part by part, against the published
    sizes: a Whisper encoder layer (q, k, v, o of 1,280^2 with q, v, o biased; fc1 and fc2 of
    1,280 x 5,120 biased; 2 LayerNorms)."""
    layer = 4 * 1280 * 1280 + 3 * 1280 + 2 * 1280 * 5120 + 5120 + 1280 + 4 * 1280
    assert layer == 19_676_160
    tower = 32 * layer + (128 * 1280 * 3 + 1280) + (1280 * 1280 * 3 + 1280) + 1500 * 1280 + 2560
    assert tower + 5120 * 3072 + 3072 * 3072 == 662_134_784


# --- every round-3 config: projected or refused in one line, never a traceback --------------

REFUSED = {
    "mlc-llm/snowflake-arctic-embed-m.json": "is not causal: an encoder",
    "mlc-llm/llava.json": "text_config: hidden_size: missing",
    "megatron-bridge/qwen3-next-80b-a3b.json": "a recurrence",
}
NAMES = sorted(str(p.relative_to(ROUND3)) for p in ROUND3.glob("*/*.json"))


def test_the_round_is_whole():
    assert len(NAMES) == 13 and set(REFUSED) <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("how", [("--phase", "prefill", "--seq", "200"),
                                 ("--serve", "input=128,output=16", "--batch", "1,8")])
def test_each_projects_or_is_refused_in_one_line(capsys, tmp_path, name, how):
    code, out, err, path = run(capsys, tmp_path, fixture(name), *how)
    if name in REFUSED:
        assert code == 2 and not out and err.count("\n") == 1, err
        assert str(path) in err and REFUSED[name] in err, err
        return
    assert code == 0 and out, err
