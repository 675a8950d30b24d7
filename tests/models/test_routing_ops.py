"""DeepSeek-V3's group-limited routing (and GLM-5's sparse-attention indexer) select with
`topk` and mask with `bitwise_not`: both were "unpriced" rows of every MoE projection (690
calls a GLM-5 decode step). Counted here by hand from the config: a top-k reads its input and
writes k values and k int64 indices, with at least one comparison per input element (a lower
bound: a selection does more); a bitwise not reads and writes one byte per bool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
BATCH = 4


def test_deepseek_v3_routing_is_priced_as_counted_by_hand(capsys, tmp_path):
    config = json.loads((CONFIGS / "serve_deepseek-v3.json").read_text())
    config.update(num_hidden_layers=2, first_k_dense_replace=1)  # layer 1 is the MoE
    path = tmp_path / "dsv3.json"
    path.write_text(json.dumps(config))
    code = main(["model", str(path), "-m", "h200", "--phase", "decode", "--batch",
                 str(BATCH), "--context", "64", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()][:-1]
    assert not [r for r in rows if r["sol_time_s"] is None]
    experts, groups = config["n_routed_experts"], config["n_group"]
    per_group = experts // groups

    def topk(shape, k):  # fp32 scores in; k fp32 values and k int64 indices per row out
        elements = BATCH * (shape[0] if len(shape) == 1 else shape[0] * shape[1])
        rows_ = elements // shape[-1]
        return float(elements), 4 * elements + rows_ * k * (4 + 8)

    expected = {
        f"[{BATCH}, {groups}, {per_group}] fp32": topk((groups, per_group), 2),  # group score
        f"[{BATCH}, {groups}] fp32": topk((groups,), config["topk_group"]),  # best groups
        f"[{BATCH}, {experts}] fp32": topk((experts,), config["num_experts_per_tok"]),
    }
    found = {r["shapes"]: (r["flops"], r["bytes"]) for r in rows if r["op"] == "aten::topk"}
    assert found == expected
    (mask,) = [r for r in rows if r["op"] == "aten::bitwise_not"]
    assert (mask["shapes"], mask["flops"], mask["bytes"]) == (
        f"[{BATCH}, {experts}] bool", BATCH * experts, 2 * BATCH * experts)


def test_experts_without_a_gate_are_priced_as_the_moe_kernel(capsys, tmp_path):
    # transformers' Ergo (its own default config, cut to one dense and one MoE layer): relu2
    # experts holding 3-D `up_proj` and `down_proj`, no gate. They ran transformers'
    # grouped-GEMM path and were two unpriced `_grouped_mm` rows and a `histc`; priced now as
    # the MoE kernel, two matrices per expert, 8 of 256 experts for the one token of a
    # batch-1 decode step.
    from transformers import CONFIG_MAPPING

    config = CONFIG_MAPPING["ergo"]().to_dict()
    config.update(num_hidden_layers=2, layer_types=config["layer_types"][:2],
                  mlp_layer_types=config["mlp_layer_types"][:2], architectures=["ErgoForCausalLM"])
    path = tmp_path / "ergo.json"
    path.write_text(json.dumps(config))
    code = main(["model", str(path), "-m", "h200", "--phase", "decode", "--context", "64",
                 "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()][:-1]
    assert not [r for r in rows if r["sol_time_s"] is None]
    (experts,) = [r for r in rows if r["op"] == "moe experts (fused)"]
    h, inter, k = config["hidden_size"], config["moe_intermediate_size"], 8
    assert experts["shapes"] == f"1 tokens x top-{k} of 256, {h}->{inter} bf16"
    assert experts["flops_by_unit"]["tensor_core.bf16"] == k * 2 * (2 * h * inter)
    weights = k * 2 * h * inter * 2  # the 8 experts' up and down matrices, bf16
    assert weights < experts["bytes"] < weights * 1.001  # plus one token's activations
