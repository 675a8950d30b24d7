"""Quantization schemes of real serving checkpoints (configs from ai-dynamo/aiconfigurator,
which refused before: one line, "not priced"): gpt-oss's MXFP4 experts, NVIDIA ModelOpt's
NVFP4 (Gemma-4-31B-IT) and static per-tensor FP8 (Qwen3-32B), and a compressed-tensors scheme
nested in a multimodal config's text decoder (priced as bf16 without a word before). Each
stored size is checked as the change from the same config without its quantization_config,
counted here from the config values: the quantized matrices' elements times the difference
in bytes per weight, plus their scales. Configs cut to 2 layers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main
from roofwise.models.quant import WeightScheme, _names, scheme_from_config

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
BF16 = 2
LAYERS = 2


def write(tmp_path, name, config):
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path


def cut(config):
    text = config.get("text_config", config)
    text["num_hidden_layers"] = LAYERS
    if isinstance(text.get("layer_types"), list):
        text["layer_types"] = text["layer_types"][:LAYERS]
    return config, text


def total(capsys, path, machine="h200"):
    code = main(["model", str(path), "-m", machine, "--phase", "decode", "--batch", "4",
                 "--context", "255", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    return lines[:-1], lines[-1]


def quantized_and_plain(capsys, tmp_path, name, machine="h200", edit=None):
    config, text = cut(json.loads((CONFIGS / name).read_text()))
    if edit:
        edit(config)
    rows, quantized = total(capsys, write(tmp_path, "q-" + name, config), machine)
    plain_config = json.loads(json.dumps(config))
    plain_config.pop("quantization_config", None)
    plain_config.get("text_config", {}).pop("quantization_config", None)
    _, plain = total(capsys, write(tmp_path, "p-" + name, plain_config), machine)
    return rows, quantized, plain, text


def test_gpt_oss_mxfp4_experts_only(capsys, tmp_path):
    rows, q, plain, c = quantized_and_plain(capsys, tmp_path, "gpt-oss-20b-mxfp4.json")
    h, inter, experts = c["hidden_size"], c["intermediate_size"], c["num_local_experts"]
    elements = LAYERS * experts * (h * 2 * inter + inter * h)  # gate_up and down
    # 4-bit e2m1 and one e8m0 byte per 32 inputs, in place of 2 bytes; attention, router,
    # embeddings and LM head stay bf16 (modules_to_not_convert)
    assert q["weight_bytes"] == plain["weight_bytes"] - elements * (BF16 - 0.5 - 1 / 32)
    assert q["weights"].startswith("mxfp4")
    # attention projections stay bf16 GEMMs; the experts read their packed weights
    assert all(r["roof"] == "tensor_core.bf16" for r in rows if r["op"] == "aten::mm")


def test_gemma_4_nvfp4_keeps_the_layers_its_ignore_list_names(capsys, tmp_path):
    def drop_layer_1_attention(config):
        ignore = config["quantization_config"]["ignore"]
        ignore.remove("model.language_model.layers.1.self_attn*")

    rows, q, plain, c = quantized_and_plain(capsys, tmp_path, "gemma-4-31b-it-nvfp4.json",
                                            "b200", drop_layer_1_attention)
    h, inter, heads = c["hidden_size"], c["intermediate_size"], c["num_attention_heads"]
    # Gemma's last layer is always a full-attention one (transformers makes it so): global
    # heads of global_head_dim, num_global_key_value_heads KV heads, and K = V (no v_proj)
    kv, d = c["num_global_key_value_heads"], c["global_head_dim"]
    assert c["attention_k_eq_v"] is True

    def nvfp4_saving(out, inp):  # 2 bytes a weight become 0.5, + an fp8 per 16, + fp32
        return out * inp * (BF16 - 0.5) - math.ceil(inp / 16) * out - 4

    mlp = 2 * nvfp4_saving(inter, h) + nvfp4_saving(h, inter)  # gate, up, down
    attention = (nvfp4_saving(heads * d, h) + nvfp4_saving(kv * d, h)
                 + nvfp4_saving(h, heads * d))  # q, k (= v), o of layer 1 only
    assert q["weight_bytes"] == pytest.approx(plain["weight_bytes"] - LAYERS * mlp
                                              - attention, abs=1)
    # w4a4: the MLP GEMMs on the fp4 tensor cores; the embedding and LM head stay bf16
    mlp_rows = [r for r in rows if ".mlp." in r["layer"] and r["op"] == "aten::mm"]
    assert mlp_rows and all(r["roof"] == "tensor_core.fp4" for r in mlp_rows)
    assert [r["roof"] for r in rows if r["layer"] == "lm_head"] == ["tensor_core.bf16"]


def test_nvfp4_on_a_card_without_fp4_tensor_cores_leaves_those_gemms_blank(capsys, tmp_path):
    rows, q, _, _ = quantized_and_plain(capsys, tmp_path, "gemma-4-31b-it-nvfp4.json", "h200")
    blank = [r for r in rows if ".mlp." in r["layer"] and r["op"] == "aten::mm"]
    assert blank and all(r["sol_time_s"] is None and r["reason"] == "cannot price on h200: "
                         "it has no tensor_core.fp4" for r in blank)
    assert q["unpriced_ops"] >= len(blank)


def test_qwen3_static_fp8_per_tensor(capsys, tmp_path):
    rows, q, plain, c = quantized_and_plain(capsys, tmp_path,
                                            "qwen3-32b-fp8-static-per-tensor.json")
    h, inter, heads = c["hidden_size"], c["intermediate_size"], c["num_attention_heads"]
    kv, d = c["num_key_value_heads"], c["head_dim"]
    shapes = [(heads * d, h), (kv * d, h), (kv * d, h), (h, heads * d),
              (inter, h), (inter, h), (h, inter)]
    # 1 byte a weight in place of 2, one fp32 scale per matrix; lm_head ignored
    saving = sum(out * inp * (BF16 - 1) - 4 for out, inp in shapes)
    assert q["weight_bytes"] == plain["weight_bytes"] - LAYERS * saving
    assert q["weights"] == "fp8 e4m3, one scale per matrix, static per-tensor activations"
    mm = [r for r in rows if r["op"] == "aten::mm" and r["layer"] != "lm_head"]
    assert mm and all(r["roof"] == "tensor_core.fp8" for r in mm)


def test_a_text_decoders_own_quantization_config_is_read(capsys, tmp_path):
    """compressed-tensors int4, symmetric, group 32 (Kimi-K2.5's scheme), inside the
    text_config of a multimodal config: priced, never bf16 in silence."""
    def nest(config):
        config["text_config"]["quantization_config"] = {
            "quant_method": "compressed-tensors", "ignore": ["lm_head", "re:.*self_attn.*"],
            "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None,
                                          "weights": {"type": "int", "num_bits": 4,
                                                      "group_size": 32, "strategy": "group",
                                                      "symmetric": True}}}}

    _, q, plain, c = quantized_and_plain(capsys, tmp_path, "gemma-3-4b.json", edit=nest)
    h, inter = c["hidden_size"], c["intermediate_size"]
    # 4 bits in place of 16 less one fp16 scale per 32 inputs per row (symmetric: no zeros)
    saving = 2 * (h * inter * (BF16 - 0.5) - math.ceil(h / 32) * inter * 2) + (
        h * inter * (BF16 - 0.5) - math.ceil(inter / 32) * h * 2)  # gate, up: in h; down
    assert q["weight_bytes"] == pytest.approx(plain["weight_bytes"] - LAYERS * saving, abs=1)
    assert q["weights"] == "int4 weight-only, group 32"


@pytest.mark.parametrize(("pattern", "module", "named"), [
    ("gate", "model.layers.3.block_sparse_moe.gate", True),
    ("gate", "model.layers.3.mlp.gate_proj", False),
    ("lm_head", "lm_head", True),
    ("model.layers.*.self_attn", "model.layers.7.self_attn.q_proj", True),
    ("model.layers.1.*", "model.layers.1.mlp.down_proj", True),
    ("model.layers.1.*", "model.layers.11.mlp.down_proj", False),
    ("model.layers.0*", "model.layers.0.mlp.down_proj", True),
    ("model.language_model.layers.0.self_attn*", "model.layers.0.self_attn.o_proj", True),
    ("model.language_model.layers.0.self_attn*", "model.layers.1.self_attn.o_proj", False),
    ("re:.*mlp\\.(gate|up|gate_up|down)_proj.*", "model.layers.2.mlp.up_proj", True),
    ("re:.*mlp\\.(gate|up|gate_up|down)_proj.*", "model.layers.2.mlp.experts", False),
    ("re:(", "model.layers.2.mlp.up_proj", False),  # a broken regex names nothing
])
def test_ignore_list_entries(pattern, module, named):
    assert _names(module, pattern) is named


@pytest.mark.parametrize(("q", "expected"), [
    ({"quant_method": "modelopt", "config_groups": {"a": {}, "b": {}}}, "2 groups"),
    ({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}, "quant_algo"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {
        "type": "int", "num_bits": 8}}}}, "not priced"),
    ({"quant_method": "mxfp4", "modules_to_not_convert": "lm_head"}, "modules_to_not_convert"),
    ({"quant_method": "hqq"}, "'hqq' is not priced"),
    ({"bits": 4}, "none given is not priced"),
])
def test_schemes_not_priced_are_refused_by_name(q, expected):
    from roofwise.base.errors import InputError

    with pytest.raises(InputError) as caught:
        scheme_from_config({"quantization_config": q}, "c.json")
    assert expected in str(caught.value)


def test_an_nvfp4_matrix_is_stored_as_counted_by_hand():
    scheme = scheme_from_config({"quantization_config": {"quant_method": "modelopt",
                                                          "quant_algo": "NVFP4"}}, "c.json")
    assert isinstance(scheme, WeightScheme) and scheme.activations == "fp4"
    # 4,096 x 5,120: half a byte a weight, one fp8 scale per 16 inputs per row, one fp32
    assert scheme.matrix_bytes(4096, 5120) == 4096 * 5120 / 2 + 4096 * 320 + 4


def devstral_decode(capsys, *args):
    code = main(["model", str(CONFIGS / "devstral-small-2-24b-fp8.json"), "-m", "h100",
                 "--json", "--no-cache", *map(str, args)])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    return lines[:-1], lines[-1]


def test_devstral_static_fp8_runs_on_the_fp8_tensor_cores(capsys):
    """Devstral-Small-2-24B's FP8 (`quant_method` fp8, `activation_scheme` static, no
    `weight_block_size`): W8A8 as vLLM serves it, one fp32 scale per weight matrix (it was
    priced weight-only on the bf16 tensor cores, labelled one scale per output channel).
    The whole config (40 layers), as shipped."""
    rows, total = devstral_decode(capsys, "--phase", "prefill", "--seq", 2048)
    assert total["weights"] == "fp8 e4m3, one scale per matrix, static per-tensor activations"
    # by hand, text_config: hidden 5120, 32 heads and 8 KV heads of 128, MLP 32768, 40
    # layers, vocabulary 131072, untied; per layer the quantized matrices are q 4096x5120,
    # k and v 1024x5120, o 5120x4096, gate and up 32768x5120, down 5120x32768:
    #   20,971,520 + 2 x 5,242,880 + 20,971,520 + 3 x 167,772,160 = 555,745,280 weights
    # stored: 40 x 555,745,280 x 1 byte = 22,229,811,200, and 40 x 7 fp32 scales = 1,120;
    # bf16: embedding and LM head 2 x 131072 x 5120 = 1,342,177,280, norms 81 x 5120 =
    # 414,720: 1,342,592,000 x 2 = 2,685,184,000. Total 24,914,996,320 (24.91 GB; it was
    # 24,928,102,400 with a scale per output row, 40 x 81,920 x 4 = 13,107,200 more); and
    # the vision tower and projector, resident in bf16 (modules_to_not_convert), 877,916,160
    # (test_devstral_vision_tower_is_resident)
    assert 22_229_811_200 + 1_120 + 2_685_184_000 == 24_914_996_320
    assert total["weight_bytes"] == 24_914_996_320 + 877_916_160
    # the decoder's GEMMs on the fp8 tensor cores, 2 x tokens x weights: 2 x 2,048 x
    # 555,745,280 x 40 = 91,055,306,342,400; the LM head (left unquantized) in bf16
    mm = [r for r in rows if r["op"] == "aten::mm"]
    assert {r["roof"] for r in mm if r["layer"] != "lm_head"} == {"tensor_core.fp8"}
    assert [r["roof"] for r in mm if r["layer"] == "lm_head"] == ["tensor_core.bf16"]
    assert total["flops_by_unit"]["tensor_core.fp8"] == 2 * 2048 * 555_745_280 * 40
    assert any("GEMMs on the fp8 tensor cores, activations quantized per tensor" in n
               for n in total["notes"]), total["notes"]
    # each row shows its weight as stored and priced (it showed the bf16 of the fake model):
    # q_proj's 5120 x 4096 weight, the activations of 2,048 tokens still bf16
    (q,) = [r for r in mm if r["layer"].endswith("self_attn.q_proj")]
    assert q["shapes"] == "[2048, 5120] bf16, [5120, 4096] fp8_e4m3"
    (head,) = [r for r in mm if r["layer"] == "lm_head"]
    assert head["shapes"].endswith("bf16")


@pytest.mark.parametrize(("activation_scheme", "label"), [
    ("dynamic", "fp8 e4m3, one scale per matrix"), (None, "fp8 e4m3, one scale per matrix")])
def test_fp8_without_block_scales_and_dynamic_activations(capsys, tmp_path, activation_scheme,
                                                          label):
    """vLLM's and transformers' default activation scheme is dynamic: fp8 GEMMs as well."""
    config, _ = cut(json.loads((CONFIGS / "devstral-small-2-24b-fp8.json").read_text()))
    if activation_scheme is None:
        del config["quantization_config"]["activation_scheme"]
    else:
        config["quantization_config"]["activation_scheme"] = activation_scheme
    rows, q = total(capsys, write(tmp_path, "c.json", config), "h100")
    assert q["weights"] == label
    assert {r["roof"] for r in rows if r["op"] == "aten::mm" and r["layer"] != "lm_head"} == {
        "tensor_core.fp8"}


def test_an_unknown_fp8_activation_scheme_is_refused(capsys, tmp_path):
    config = json.loads((CONFIGS / "devstral-small-2-24b-fp8.json").read_text())
    config["quantization_config"]["activation_scheme"] = "weekly"
    path = write(tmp_path, "c.json", config)
    code = main(["model", str(path), "-m", "h100", "--phase", "decode"])
    out, err = capsys.readouterr()
    assert code == 2 and not out and err.count("\n") == 1
    assert ("quantization_config.activation_scheme: expected dynamic or static, got 'weekly'"
            in err)


def pixtral_and_projector(vision, text_hidden, merge):
    """Mistral-3's vision tower (Pixtral) and projector, parameter by parameter, as its model
    card's architecture (and transformers' modules) have them; no biases."""
    h, inter, layers = vision["hidden_size"], vision["intermediate_size"], vision[
        "num_hidden_layers"]
    patch_conv = vision["num_channels"] * vision["patch_size"] ** 2 * h  # Conv2d, no bias
    per_layer = 4 * h * h + 3 * h * inter + 2 * h  # q, k, v, o; gate, up, down; two norms
    tower = patch_conv + h + layers * per_layer  # + ln_pre
    # projector: RMSNorm over the vision width, the patch merger (merge x merge patches
    # into one, merge^2 x h -> h), linear_1 (h -> text hidden), linear_2 (text hidden square)
    projector = h + merge * merge * h * h + h * text_hidden + text_hidden * text_hidden
    return tower, projector


def test_devstral_vision_tower_is_resident(capsys):
    """The Pixtral tower and projector a server holds beside the decoder: counted in the
    resident weights (fits, headroom, largest batch) though a text step runs none of them."""
    config = json.loads((CONFIGS / "devstral-small-2-24b-fp8.json").read_text())
    tower, projector = pixtral_and_projector(config["vision_config"], 5120,
                                             config["spatial_merge_size"])
    # by hand: patch conv 3 x 14 x 14 x 1024 = 602,112; ln_pre 1,024; per layer
    # 4 x 1024^2 + 3 x 1024 x 4096 + 2 x 1024 = 16,779,264, x 24 = 402,702,336:
    # 403,305,472. Projector 1,024 + 4 x 1024^2 + 1024 x 5120 + 5120^2 = 35,652,608
    assert (tower, projector) == (403_305_472, 35_652_608)
    assert tower + projector == 438_958_080  # 0.44 B parameters, bf16: 877,916,160 bytes
    _, total = devstral_decode(capsys, "--phase", "decode", "--context", 1024)
    assert total["weight_bytes"] == 24_914_996_320 + 438_958_080 * 2
    assert total["resident_bytes"] == (total["weight_bytes"] + total["kv_cache_bytes"]
                                       + total["activation_peak_bytes"])
    assert total["headroom_bytes"] == 80e9 - total["resident_bytes"]
    assert any(n.startswith("mistral3: its multi_modal_projector, vision_tower (438,958,080 "
                            "parameters) count in the weights and memory") for n in
               total["notes"]), total["notes"]
    # under --tp 2 each weight of two or more dimensions is split in two, the 50 norms of
    # 1,024 (ln_pre, 2 per layer, the projector's) stay whole on each device:
    # (438,958,080 - 51,200) / 2 + 51,200 = 219,504,640
    _, shard = devstral_decode(capsys, "--phase", "decode", "--context", 1024, "--tp", 2)
    assert any("(219,504,640 parameters per device (split over 2))" in n
               for n in shard["notes"]), shard["notes"]


def test_a_gemm_rows_shapes_give_its_activation_dtype_whatever_the_weight_shows():
    from roofwise.models.sweep import gemm_shape

    # (n, k, the dtype its activations run in): the crossover is found for that GEMM
    assert gemm_shape("[1, 5120] bf16, [5120, 4096] fp8_e4m3") == (4096, 5120, "bf16")
    assert gemm_shape("[8, 4096] bf16, [4096, 1024] bf16") == (1024, 4096, "bf16")
    assert gemm_shape("[8, 4096] bf16") is None
