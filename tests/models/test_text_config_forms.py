"""A model type transformers knows as a text model, with the decoder's sizes under a
`text_config` its config class takes none of and no sizes at the top level (mlc-llm's
Ministral-3 preset: `model_type` ministral3, the multimodal layout of mistral3). transformers
keeps such an object as a plain dict and hands it back as the text decoder; roofwise ended in
a traceback on it. It is read as the decoder, as the same file with `model_type` mistral3 is,
and said so in a note; the weights below are counted by hand from the config values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main
from roofwise.models.config import load_config

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
BF16 = 2


def total(capsys, path):
    code = main(["model", str(path), "-m", "h100", "--phase", "decode", "--context", "1024",
                 "--json", "--no-cache"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Traceback" not in err
    return json.loads(out.splitlines()[-1])


def test_mlc_ministral3_is_priced_from_its_text_config(capsys):
    path = CONFIGS / "mlc_ministral3_3b_2512.json"
    config = load_config(path)
    assert config.hf.model_type == "ministral3"
    assert (config.layers, config.sizes.hidden_size) == (26, 3072)
    t = total(capsys, path)
    # by hand, from text_config: hidden 3072, 32 heads and 8 KV heads of 128, MLP 9216,
    # 26 layers, vocabulary 131072, embeddings tied (one matrix)
    #   attention per layer: q 3072x4096 + k, v 3072x1024 each + o 4096x3072 = 31,457,280
    #   MLP per layer: 3 x 3072 x 9216 = 84,934,656; two norms 2 x 3072 = 6,144
    #   26 layers x 116,398,080 = 3,026,350,080; embedding 131072 x 3072 = 402,653,184;
    #   final norm 3,072: 3,429,006,336 parameters, 6,858,012,672 bytes in bf16
    assert t["weight_bytes"] == 3_429_006_336 * BF16 == 6_858_012_672
    # KV cache: 26 layers x (K and V) x 8 heads x 128 x 1,025 positions x 2 bytes
    assert t["kv_cache_bytes"] == 26 * 2 * 8 * 128 * 1025 * BF16 == 109_158_400
    assert any(n.startswith("ministral3: priced from its text_config (ministral3) only")
               and "vision_config" in n for n in t["notes"]), t["notes"]


def test_the_same_file_as_mistral3_prices_the_same_decoder(capsys, tmp_path):
    config = json.loads((CONFIGS / "mlc_ministral3_3b_2512.json").read_text())
    loose = total(capsys, CONFIGS / "mlc_ministral3_3b_2512.json")
    config["model_type"] = "mistral3"
    path = tmp_path / "mistral3.json"
    path.write_text(json.dumps(config))
    composite = total(capsys, path)
    for key in ("flops", "bytes", "sol_time_s", "kv_cache_bytes"):
        assert loose[key] == composite[key], key
    # the composite also holds its Pixtral tower and projector resident, built by
    # transformers; the loose form, whose vision_config no class builds, says it leaves them
    # out. By hand: tower 403,305,472 (as Devstral's: the same vision_config), projector
    # 1,024 + 4 x 1024^2 + 1024 x 3072 + 3072^2 = 16,778,240; 420,083,712 in bf16
    assert composite["weight_bytes"] - loose["weight_bytes"] == 420_083_712 * BF16
    assert any("weights are not counted in the weights or memory" in n for n in loose["notes"])


def test_the_minimal_form_a_llama_under_text_config(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "text_config": {
        "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "vocab_size": 100, "intermediate_size": 128}}))
    t = total(capsys, path)
    # by hand: per layer q, k, v, o 4 x 64 x 64 = 16,384, MLP 3 x 64 x 128 = 24,576, norms
    # 128: 41,088; 2 layers 82,176; embedding and LM head (llama: untied) 2 x 100 x 64 =
    # 12,800; final norm 64: 95,040 parameters, 190,080 bytes
    assert t["weight_bytes"] == 95_040 * BF16 == 190_080
    assert "llama: priced from its text_config (llama) only" in t["notes"][0]


def test_a_text_config_nested_twice_is_read_down_to_the_decoder(tmp_path):
    inner = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "vocab_size": 100, "intermediate_size": 128}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "text_config": {"text_config": inner}}))
    config = load_config(path)
    assert (config.layers, config.sizes.hidden_size) == (2, 64)
    assert len(config.notes) == 2
