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
