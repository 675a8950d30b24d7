"""MLA (DeepSeek-V2-Lite, 2 layers) at decode: the absorbed form (default) against the expanded
one (`--mla expanded`, transformers' re-expansion through kv_b_proj), FLOPs and bytes counted
here from the config values: h = 16 heads, kv_lora_rank r = 512, qk_rope 64, qk_nope 128,
v_head_dim 128."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
LAYERS, BATCH, CONTEXT = 2, 4, 4095
KV = CONTEXT + 1  # cached tokens the step attends to, its own included
BF16 = 2


def project(capsys, tmp_path, *extra):
    config = json.loads((MODELS / "deepseek-v2-lite.json").read_text())
    config["num_hidden_layers"] = LAYERS
    path = tmp_path / "dsv2-lite-2.json"
    path.write_text(json.dumps(config))
    code = main(["model", str(path), "-m", "h200", "--phase", "decode", "--batch", str(BATCH),
                 "--context", str(CONTEXT), "--json", *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    return config, lines[:-1], lines[-1]


def only(rows, op, layer="model.layers.*.self_attn"):
    found = [r for r in rows if r["op"] == op and r["layer"] == layer]
    assert len(found) == 1, [(r["op"], r["layer"]) for r in rows]
    return found[0]


def test_absorbed_and_expanded_mla_differ_as_the_hand_count_says(capsys, tmp_path):
    c, absorbed, a_total = project(capsys, tmp_path)
    _, expanded, e_total = project(capsys, tmp_path, "--mla", "expanded")
    h, r, rope = c["num_attention_heads"], c["kv_lora_rank"], c["qk_rope_head_dim"]
    nope, v = c["qk_nope_head_dim"], c["v_head_dim"]
    tokens, pairs = BATCH, BATCH * h * KV  # one query per sequence sees all KV keys
    assert a_total["mla"] == "absorbed" and e_total["mla"] == "expanded"
    assert any("MLA absorbed" in n for n in a_total["notes"])

    # absorbed: W_UK into the query, attention on the latent (keys r + rope, values r), W_UV
    q_absorb = 2 * tokens * h * nope * r
    latent_flops = pairs * (2 * (r + rope) + 2 * r)
    out_absorb = 2 * tokens * h * r * v
    latent = only(absorbed, "attention (fused, MLA latent)")
    assert latent["flops_by_unit"]["tensor_core.bf16"] == LAYERS * latent_flops
    latent_bytes = (BATCH * KV * (r + rope)  # the latent cache, read once
                    + tokens * h * (r + rope) + tokens * h * r) * BF16  # q in, out
    assert latent["read_bytes"] + latent["write_bytes"] == LAYERS * latent_bytes
    assert only(absorbed, "mla q absorb (W_UK)")["flops"] == LAYERS * q_absorb
    assert only(absorbed, "mla out absorb (W_UV)")["flops"] == LAYERS * out_absorb
    assert only(absorbed, "mla q absorb (W_UK)")["bytes"] == LAYERS * BF16 * (
        tokens * h * nope + h * nope * r + tokens * h * r)
    assert not any(r_["layer"].endswith("kv_b_proj") for r_ in absorbed)

    # expanded: the whole latent cache through kv_b_proj, then attention over h heads
    expand = 2 * BATCH * KV * r * h * (nope + v)
    kv_b = only(expanded, "aten::mm", "model.layers.*.self_attn.kv_b_proj")
    assert kv_b["flops"] == LAYERS * expand
    assert kv_b["bytes"] == LAYERS * BF16 * (BATCH * KV * r + r * h * (nope + v)
                                             + BATCH * KV * h * (nope + v))
    wide_flops = pairs * (2 * (nope + rope) + 2 * v)
    wide = only(expanded, "attention (fused)")
    assert wide["flops_by_unit"]["tensor_core.bf16"] == LAYERS * wide_flops
    assert wide["read_bytes"] >= LAYERS * BATCH * KV * h * (nope + rope + v) * BF16

    # everything else is the same step: the totals differ by exactly these kernels
    difference = LAYERS * (expand + wide_flops - q_absorb - latent_flops - out_absorb)
    assert (e_total["flops_by_unit"]["tensor_core.bf16"]
            - a_total["flops_by_unit"]["tensor_core.bf16"]) == pytest.approx(difference,
                                                                             rel=1e-9)
    assert e_total["sol_time_s"] > 2 * a_total["sol_time_s"]
    # the cache is the latent either way: r + rope per token and layer
    assert a_total["kv_cache_bytes"] == e_total["kv_cache_bytes"] == (
        LAYERS * BATCH * KV * (r + rope) * BF16)


def test_prefill_keeps_the_expanded_form_and_says_so(capsys, tmp_path):
    config = json.loads((MODELS / "deepseek-v2-lite.json").read_text())
    config["num_hidden_layers"] = LAYERS
    path = tmp_path / "dsv2-lite-2.json"
    path.write_text(json.dumps(config))
    assert main(["model", str(path), "-m", "h200", "--phase", "prefill", "--seq", "64",
                 "--json"]) == 0
    total = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert total["mla"] == "expanded"
    assert any("prefill runs the expanded form" in n for n in total["notes"])
