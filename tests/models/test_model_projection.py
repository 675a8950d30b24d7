"""`roofwise model`: totals of the shipped configs against counts made here from the config
values alone (parameters x tokens x 2, attention pairs, KV cache bytes from layers, KV heads,
head size and dtype), prefill and decode, with and without --tp 2.

The configs run reduced to 2 layers (a copy written by the test; every other value is the
shipped config's) so that each projection takes about a second.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
LAYERS = 2
BF16 = 2  # bytes


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def reduced(tmp_path, name):
    config = json.loads((MODELS / f"{name}.json").read_text())
    config["num_hidden_layers"] = LAYERS
    path = tmp_path / f"{name}-{LAYERS}-layers.json"
    path.write_text(json.dumps(config))
    return path, config


def project(capsys, path, phase, batch, seq, context, tp, *extra):
    code, out, err = run(capsys, "model", path, "--machine", "h200", "--phase", phase,
                         "--batch", batch, "--seq", seq, "--context", context, "--tp", tp,
                         "--json", *extra)
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1]["op"] == "total"
    return lines[:-1], lines[-1]


def causal_pairs(q_len, kv_len):
    """Unmasked (query, key) pairs of one head, queries the last q_len of kv_len positions."""
    return sum(min(kv_len, kv_len - q_len + i + 1) for i in range(q_len))


CASES = [("prefill", 1, 64, 0), ("decode", 4, 1, 256)]


@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize(("phase", "batch", "seq", "context"), CASES)
def test_dense_gqa_llama(capsys, tmp_path, phase, batch, seq, context, tp):
    path, c = reduced(tmp_path, "llama-3.2-1b")
    h, d, vocab = c["hidden_size"], c["head_dim"], c["vocab_size"]
    hq, hk, inter = c["num_attention_heads"] // tp, c["num_key_value_heads"] // tp, (
        c["intermediate_size"] // tp)
    tokens = batch * seq
    per_layer = h * hq * d + 2 * h * hk * d + hq * d * h + 3 * h * inter
    linear = 2 * tokens * LAYERS * per_layer + 2 * batch * h * (vocab // tp)
    attention = LAYERS * 2 * 2 * d * hq * batch * causal_pairs(seq, context + seq)
    rows, total = project(capsys, path, phase, batch, seq, context, tp)
    assert total["flops_by_unit"]["tensor_core.bf16"] == pytest.approx(linear + attention,
                                                                       rel=0.01)
    assert total["flops"] == pytest.approx(linear + attention, rel=0.01)
    kv = LAYERS * 2 * batch * hk * (context + seq) * d * BF16
    assert total["kv_cache_bytes"] == pytest.approx(kv, rel=0.01)
    params = (vocab // tp) * h + LAYERS * (per_layer + 2 * h) + h  # tied head, 2 norms/layer
    assert total["weight_bytes"] == pytest.approx(params * BF16, rel=0.01)
    attention_rows = [r for r in rows if r["op"] == "attention (fused)"]
    assert sum(r["count"] for r in attention_rows) == LAYERS
    if tp == 2:
        reduce = [r for r in rows if r["op"] == "tp all-reduce"]
        assert reduce[0]["count"] == 2 * LAYERS
        # a ring of 2 sends the whole message one way: tokens x hidden x 2 bytes per reduce
        assert total["collective_bytes"] == pytest.approx(2 * LAYERS * tokens * h * BF16)
        assert reduce[0]["sol_time_s"] > 2 * LAYERS * tokens * h * BF16 / 450e9
    else:
        assert total["collective_bytes"] == 0


@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize(("phase", "batch", "seq", "context"), CASES)
def test_moe_mixtral(capsys, tmp_path, phase, batch, seq, context, tp):
    path, c = reduced(tmp_path, "mixtral-8x7b")
    h, vocab, experts, top_k = (c["hidden_size"], c["vocab_size"], c["num_local_experts"],
                                c["num_experts_per_tok"])
    d = h // c["num_attention_heads"]
    hq, hk, inter = c["num_attention_heads"] // tp, c["num_key_value_heads"] // tp, (
        c["intermediate_size"] // tp)
    tokens = batch * seq
    attention_params = 2 * h * hq * d + 2 * h * hk * d
    per_layer = (2 * tokens * attention_params + 2 * tokens * h * experts  # router
                 + 2 * tokens * top_k * 3 * h * inter)  # active experts: gate, up, down
    linear = LAYERS * per_layer + 2 * batch * h * (vocab // tp)
    attention = LAYERS * 2 * 2 * d * hq * batch * causal_pairs(seq, context + seq)
    rows, total = project(capsys, path, phase, batch, seq, context, tp)
    assert total["flops_by_unit"]["tensor_core.bf16"] == pytest.approx(linear + attention,
                                                                       rel=0.01)
    assert total["flops"] == pytest.approx(linear + attention, rel=0.01)
    assert total["kv_cache_bytes"] == pytest.approx(
        LAYERS * 2 * batch * hk * (context + seq) * d * BF16, rel=0.01)
    params = (2 * (vocab // tp) * h + LAYERS * (attention_params + h * experts
                                                + experts * 3 * h * inter + 2 * h) + h)
    assert total["weight_bytes"] == pytest.approx(params * BF16, rel=0.01)
    moe = [r for r in rows if r["op"] == "moe experts (fused)"]
    assert sum(r["count"] for r in moe) == LAYERS and "balanced routing" in moe[0]["reason"]


@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize(("phase", "batch", "seq", "context"), CASES)
def test_mla_deepseek_v2_lite(capsys, tmp_path, phase, batch, seq, context, tp):
    """Layer 0 dense, layer 1 MoE (first_k_dense_replace 1); MLA as transformers runs it
    (--mla expanded): the latent cache (kv_lora_rank + rope dims, one 'head') expanded by
    kv_b_proj every step. The absorbed form: tests/models/test_mla_forms.py."""
    path, c = reduced(tmp_path, "deepseek-v2-lite")
    h, vocab, heads = c["hidden_size"], c["vocab_size"], c["num_attention_heads"] // tp
    nope, rope, dv, rank = (c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"],
                            c["kv_lora_rank"])
    tokens, cached = batch * seq, batch * (context + seq)
    attention_linear = (2 * tokens * (h * heads * (nope + rope) + h * (rank + rope)
                                      + heads * dv * h)
                        + 2 * cached * rank * heads * (nope + dv))
    pairs = batch * causal_pairs(seq, context + seq)
    attention = 2 * (nope + rope) * pairs * heads + 2 * dv * pairs * heads
    dense = 2 * tokens * 3 * h * (c["intermediate_size"] // tp)
    moe_inter = c["moe_intermediate_size"] // tp
    moe = (2 * tokens * h * c["n_routed_experts"]
           + 2 * tokens * c["num_experts_per_tok"] * 3 * h * moe_inter
           + 2 * tokens * 3 * h * moe_inter * c["n_shared_experts"])
    expected = (LAYERS * (attention_linear + attention) + dense + moe
                + 2 * batch * h * (vocab // tp))
    rows, total = project(capsys, path, phase, batch, seq, context, tp, "--mla", "expanded")
    assert sum(r["count"] for r in rows if r["op"] == "attention (fused)") == LAYERS
    assert total["flops_by_unit"]["tensor_core.bf16"] == pytest.approx(expected, rel=0.01)
    assert total["flops"] == pytest.approx(expected, rel=0.01)
    assert total["kv_cache_bytes"] == pytest.approx(
        LAYERS * batch * (rank + rope) * (context + seq) * BF16, rel=0.01)


@pytest.mark.parametrize(("batch", "tp"), [(1, 1), (8, 2)])
def test_decode_of_a_long_context_is_memory_bound_and_weights_plus_cache_bound_it(
        capsys, tmp_path, batch, tp):
    """Physics: one decode token reads every weight and the whole cache; the step can be no
    faster than those bytes at the H200's envelope bandwidth (4.8e12 x 0.938), per device
    under --tp; and the tokens per second are the step's tokens over the step's time."""
    path, _ = reduced(tmp_path, "llama-3.2-1b")
    rows, total = project(capsys, path, "decode", batch, 1, 8192, tp)
    assert len(rows) > 10
    floor = (total["weight_bytes"] + total["kv_cache_bytes"]) / (4.8e12 * 0.9380)
    assert total["sol_time_s"] >= floor * 0.99
    assert total["sol_time_s"] <= floor * 1.10  # nothing else of weight at a long context
    assert total["tokens"] == batch
    assert total["tokens_per_s"] == pytest.approx(batch / total["sol_time_s"], rel=1e-9)
    mm = [r for r in rows if r["op"] == "aten::mm"]
    assert mm and all(r["bound"] == "memory" for r in mm)


def test_unfused_shows_transformers_eager_attention(capsys, tmp_path):
    path, _ = reduced(tmp_path, "llama-3.2-1b")
    code, out, err = run(capsys, "model", path, "-m", "h200", "--phase", "prefill", "--seq",
                         64, "--unfused", "--json")
    assert code == 0, err
    ops = {json.loads(line)["op"] for line in out.splitlines()}
    assert "attention (fused)" not in ops and "rmsnorm (fused)" not in ops
    assert {"aten::_softmax", "aten::bmm"} <= ops or {"aten::_softmax", "aten::matmul"} <= ops


def test_sweep_finds_where_gemms_turn_compute_bound(capsys, tmp_path):
    path, c = reduced(tmp_path, "llama-3.2-1b")
    code, out, err = run(capsys, "model", path, "-m", "h200", "--phase", "decode",
                         "--sweep", "batch=1,512", "--context", 16, "--json")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    down = next(r for r in lines if r.get("layer") == "model.layers.*.mlp.down_proj")
    sustained = down["compute_bound_from_tokens"]["sustained"]
    burst = down["compute_bound_from_tokens"]["burst"]
    # balance point by hand: 2mnk / (989.5e12 x f) = 2(mk + kn + mn) / (4.8e12 x 0.938)
    n, k = c["hidden_size"], c["intermediate_size"]

    def bound_at(m, fraction):
        return 2 * m * n * k / (989.5e12 * fraction) >= 2 * (m * k + k * n + m * n) / (
            4.8e12 * 0.9380)

    for m, fraction in ((sustained, 0.7077), (burst, 0.7680)):
        assert bound_at(m, fraction) and not bound_at(m - 1, fraction)
    assert burst > sustained  # a faster tensor core stays memory-bound for more tokens
    assert down["first_compute_bound_point"] == {"sustained": 1, "burst": 1}


def test_bad_config_is_one_line(capsys, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": 8}')
    code, _, err = run(capsys, "model", bad, "-m", "h200", "--phase", "decode")
    assert code == 2 and err.count("\n") == 1 and "model_type" in err
    path, _ = reduced(tmp_path, "llama-3.2-1b")
    code, _, err = run(capsys, "model", path, "-m", "h200", "--phase", "decode", "--tp", 3)
    assert code == 2 and "does not divide over --tp 3" in err


def test_fp8_kv_cache_halves_the_cache_and_attention_reads_it_in_fp8(capsys, tmp_path):
    path, c = reduced(tmp_path, "llama-3.2-1b")
    rows16, total16 = project(capsys, path, "decode", 4, 1, 1024, 1)
    code, out, err = run(capsys, "model", path, "-m", "h200", "--phase", "decode", "--batch", 4,
                         "--context", 1024, "--kv-dtype", "fp8", "--json")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    rows8, total8 = lines[:-1], lines[-1]
    assert total8["kv_cache_bytes"] * 2 == total16["kv_cache_bytes"]
    attention16 = next(r for r in rows16 if r["op"] == "attention (fused)")
    attention8 = next(r for r in rows8 if r["op"] == "attention (fused)")
    kv_bf16 = LAYERS * 2 * 4 * c["num_key_value_heads"] * 1025 * c["head_dim"] * BF16
    assert attention16["bytes"] - attention8["bytes"] == pytest.approx(kv_bf16 / 2, rel=0.001)


def test_tp_on_a_profile_without_interconnect_leaves_the_all_reduces_unpriced(capsys,
                                                                              tmp_path):
    path, c = reduced(tmp_path, "llama-3.2-1b")
    code, out, err = run(capsys, "model", path, "-m", "a100-sxm", "--phase", "decode",
                         "--tp", 2, "--json")
    assert code == 0 and "has no interconnect" in err
    lines = [json.loads(line) for line in out.splitlines()]
    reduce = next(r for r in lines if r["op"] == "tp all-reduce")
    assert reduce["sol_time_s"] is None and "no interconnect" in reduce["reason"]
    assert lines[-1]["unpriced_ops"] == 2 * LAYERS
    assert lines[-1]["collective_bytes"] == 2 * LAYERS * c["hidden_size"] * BF16


def test_a_profile_priced_in_cycles_cannot_project_seconds(capsys, tmp_path):
    path, _ = reduced(tmp_path, "llama-3.2-1b")
    code, out, err = run(capsys, "model", path, "-m", "ascend-a5-vector", "--phase", "decode")
    assert code == 2 and out == "" and err.count("\n") == 1 and "cycles" in err


def test_h100_and_h200_profiles_carry_a_sourced_nvlink_and_an_assumed_hop_latency(capsys):
    for name in ("h100-sxm", "h200"):
        code, out, _ = run(capsys, "machine", name, "--json")
        link = json.loads(out)["interconnect"]
        assert code == 0 and link["bytes_per_s"] == 900e9 and "datasheet" in link["source"]
        assert link["hop_latency_assumed"] is True and "Demystifying NCCL" in link[
            "hop_latency_source"]
    code, out, _ = run(capsys, "machine", "a100-sxm", "--json")
    assert json.loads(out)["interconnect"] is None


def test_a_malformed_interconnect_is_named_in_one_line(tmp_path):
    import yaml

    from roofwise.base.errors import InputError
    from roofwise.profiles.load import builtin_paths, parse_machine

    path = next(p for p in builtin_paths() if p.name == "h200.yaml")
    data = yaml.safe_load(path.read_text())
    data["interconnect"]["bytes_per_s"] = -1
    with pytest.raises(InputError) as bad:
        parse_machine(data, "my.yaml")
    assert "interconnect.bytes_per_s" in str(bad.value)
    data["interconnect"] = {"name": "x", "bytes_per_s": 1e9, "source": "s",
                            "hop_latency_s": 1e-6, "hop_latency_source": "s", "speed": 3}
    with pytest.raises(InputError) as bad:
        parse_machine(data, "my.yaml")
    assert "speed" in str(bad.value)


@pytest.mark.parametrize(("context", "said"), [(0, True), (4096, False)])
def test_decode_over_an_empty_cache_says_so(capsys, tmp_path, context, said):
    # --context defaults to 0: a decode step that reads no KV cache, a step no generation
    # takes after its first token; the projection says so where it is the one asked for
    path, _ = reduced(tmp_path, "llama-3.2-1b")
    _, total = project(capsys, path, "decode", 1, 1, context, 1)
    notes = [n for n in total["notes"] if "empty KV cache" in n]
    assert bool(notes) == said
