"""`roofwise model --tp 2`: one device's linear FLOPs are half of --tp 1's, as a hand count from
the config values says, for architectures that name their sizes differently: no `head_dim`
(Qwen2, GPT-NeoX, OPT, Falcon, Phi-3: head size = hidden / heads, pinned before the heads are
split), the MLP width as `intermediate_size`, OPT's `ffn_dim` or Falcon's 4 x hidden, fused
QKV and gate-up projections (GPT-NeoX, Falcon, Phi-3), and attention blocks that size their
heads from hidden_size whatever the config says (GPT-NeoX, OPT, Falcon).

Sizes are the published ones (Qwen2-7B, Pythia-6.9B, OPT-125M, Phi-3-mini, Llama-3.2-1B;
Falcon-7B from tests/fixtures/configs, with 32 heads instead of its 71, which no --tp 2
splits), 2 layers; a prefill of 64 tokens, the LM head on the last one.

Hand count per layer and device, h hidden, d head size, q/k query and KV heads per device,
f MLP width per device: q h*q*d, k and v h*k*d each (fused or not), out q*d*h, MLP up (and
gate) h*f, down f*h; LM head h*vocab/tp. FLOPs = 2 x tokens x weights.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main

ROOT = Path(__file__).resolve().parents[2]
LAYERS, TOKENS = 2, 64


def falcon():
    config = json.loads((ROOT / "tests" / "fixtures" / "configs" /
                         "falcon-7b-instruct.json").read_text())
    return {**config, "num_hidden_layers": LAYERS, "num_attention_heads": 32}


def llama():
    config = json.loads((ROOT / "examples" / "models" / "llama-3.2-1b.json").read_text())
    return {**config, "num_hidden_layers": LAYERS}


# name: (config, hidden, query heads, KV heads (None: one, replicated), head size,
#        MLP width, MLP matrices (2: up, down; 3: gate, up, down), vocabulary)
CASES = {
    "qwen2": ({"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28,
               "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064,
               "num_hidden_layers": LAYERS}, 3584, 28, 4, 128, 18944, 3, 152064),
    "gpt_neox": ({"model_type": "gpt_neox", "hidden_size": 4096, "num_attention_heads": 32,
                  "intermediate_size": 16384, "vocab_size": 50432, "rotary_pct": 0.25,
                  "num_hidden_layers": LAYERS}, 4096, 32, 32, 128, 16384, 2, 50432),
    "opt": ({"model_type": "opt", "hidden_size": 768, "num_attention_heads": 12,
             "ffn_dim": 3072, "vocab_size": 50272, "word_embed_proj_dim": 768,
             "do_layer_norm_before": True, "num_hidden_layers": LAYERS},
            768, 12, 12, 64, 3072, 2, 50272),
    "falcon": (falcon(), 4544, 32, None, 142, 4 * 4544, 2, 65024),
    "phi3": ({"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32,
              "num_key_value_heads": 32, "intermediate_size": 8192, "vocab_size": 32064,
              "num_hidden_layers": LAYERS}, 3072, 32, 32, 96, 8192, 3, 32064),
    "llama": (llama(), 2048, 32, 8, 64, 8192, 3, 128256),
}


def hand_linear_flops(hidden, heads, kv, head, mlp, mlp_matrices, vocab, tp):
    q, k = heads // tp, (1 if kv is None else kv // tp)
    attention = hidden * (q + 2 * k) * head + q * head * hidden
    per_layer = attention + mlp_matrices * hidden * mlp // tp
    return 2 * (TOKENS * LAYERS * per_layer + hidden * vocab // tp)


def linear_flops(capsys, tmp_path, config, tp):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code = main(["model", str(path), "-m", "h200", "--phase", "prefill", "--seq", str(TOKENS),
                 "--tp", str(tp), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()][:-1]
    return sum(r["flops"] for r in rows if r["op"] in ("aten::mm", "aten::addmm"))


@pytest.mark.parametrize("name", list(CASES))
def test_one_device_of_tp_2_does_half_the_linear_work(capsys, tmp_path, name):
    config, *sizes = CASES[name]
    one = linear_flops(capsys, tmp_path, config, 1)
    two = linear_flops(capsys, tmp_path, config, 2)
    # biases (GPT-NeoX, OPT) add one FLOP per output element: under 0.1% of the GEMMs
    assert one == pytest.approx(hand_linear_flops(*sizes, tp=1), rel=1e-3)
    assert two == pytest.approx(hand_linear_flops(*sizes, tp=2), rel=1e-3)
    # Falcon's one K and one V head are replicated on both devices: a little over half
    assert two / one == pytest.approx(0.5, abs=0.01 if name == "falcon" else 1e-3)


def test_qwen2_at_tp_2_keeps_heads_of_128(capsys, tmp_path):
    """It used to keep q_proj at its full width and make 14 heads of 256."""
    config = CASES["qwen2"][0]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["model", str(path), "-m", "h200", "--phase", "decode", "--context", "16",
                 "--tp", "2", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    q_proj = next(r for r in rows if r["layer"].endswith("q_proj"))
    assert "[3584, 1792]" in q_proj["shapes"]
    attention = next(r for r in rows if r["op"] == "attention (fused)")
    assert "x14x128" in attention["shapes"]


def test_heads_that_do_not_divide_are_one_line(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**falcon(), "num_attention_heads": 71}))
    code = main(["model", str(path), "-m", "h200", "--phase", "decode", "--tp", "2"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines() == [f"roofwise: error: {path}: num_attention_heads: 71 does not "
                                "divide over --tp 2"]


@pytest.mark.parametrize(("model_type", "why"), [
    ("helium", "its output projection is sized from hidden_size, its heads from head_dim"),
    ("persimmon", "its heads and per-head q/k norms are sized from hidden_size"),
])
def test_blocks_sized_from_hidden_size_are_narrowed_too(capsys, tmp_path, model_type, why):
    """transformers' defaults for the type (2 layers): --tp 2 did half the linear work
    (biases aside), where it used to end in a shape error."""
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type, num_hidden_layers=LAYERS).to_dict()
    config.pop("transformers_version", None)
    one = linear_flops(capsys, tmp_path, config, 1)
    two = linear_flops(capsys, tmp_path, config, 2)
    assert two / one == pytest.approx(0.5, abs=1e-3), why


def test_per_layer_mlp_widths_split_layer_by_layer(capsys, tmp_path):
    """Gemma-3n lists one MLP width per layer: each is split (a list ended in a traceback).
    Its MLP halves; its per-layer input projections, outside attention and MLP, stay whole."""
    from transformers import AutoConfig

    config = AutoConfig.for_model("gemma3n_text").to_dict()
    config.pop("transformers_version", None)
    config.update(num_hidden_layers=LAYERS, num_kv_shared_layers=0,
                  intermediate_size=[8192, 16384])
    for key in ("layer_types", "activation_sparsity_pattern"):
        config[key] = config[key][:LAYERS]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    mlp = {}
    for tp in (1, 2):
        assert main(["model", str(path), "-m", "h200", "--phase", "prefill", "--seq",
                     str(TOKENS), "--tp", str(tp), "--json"]) == 0
        rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()][:-1]
        mlp[tp] = sum(r["flops"] for r in rows if ".mlp." in r["layer"]
                      and r["op"] in ("aten::mm", "aten::addmm"))
    hidden = config["hidden_size"]
    assert mlp[1] == 2 * TOKENS * 3 * hidden * (8192 + 16384)
    assert mlp[2] == mlp[1] / 2
