"""Every model config ai-dynamo/aiconfigurator vendors (85 public Hugging Face configs of
2025-2026 models: dense, GQA, MoE, MLA, sliding and chunked attention, per-layer sizes,
multimodal, SSM hybrids, fp8/NVFP4/MXFP4/int4 checkpoints; tests/fixtures/configs/
aiconfigurator, Apache-2.0), cut to 2 layers, projected as a user would: each either projects
(exit 0, JSON lines closing on a total with a positive step time) or is refused in one line
naming the file and what is missing (exit 2), never a traceback; and each does what it did
when this list was written, so that a config that projected cannot start refusing unseen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "aiconfigurator"
LAYERS = 2

# Refused, and why (the words the one line must hold); every other config projects.
REFUSED = {
    "MiniMaxAI--MiniMax-M3": "hidden_act",  # 'swigluoai': no activation of transformers'
    "moonshotai--Kimi-K3": "hidden_act",  # 'situ'
    "XiaomiMiMo--MiMo-7B-Base": "'mimo' is not a model type transformers",  # remote code only
    "moonshotai--Kimi-K2-Instruct": "'kimi_k2' is not a model type transformers",
    "nvidia--Llama-3_3-Nemotron-Super-49B-v1": "'nemotron-nas' is not a model type transformers",
    "sgl-project--DeepSeek-V4-Flash-FP8": "'deepseek_ref' is not a model type transformers",
    "sgl-project--DeepSeek-V4-Pro-FP8": "'deepseek_ref' is not a model type transformers",
    # flat, where transformers' step3p7 keeps its decoder's sizes in a text_config
    "stepfun-ai--Step-3.7-Flash": "hidden_size: missing",
    "stepfun-ai--Step-3.7-Flash-FP8": "hidden_size: missing",
    # hybrids with a recurrent layer (gated delta net, Mamba-2): no ledger for it yet
    "Qwen--Qwen3.5-122B-A10B": "a recurrence",
    "Qwen--Qwen3.5-27B": "a recurrence",
    "Qwen--Qwen3.5-35B-A3B": "a recurrence",
    "Qwen--Qwen3.5-397B-A17B": "a recurrence",
    "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": "a recurrence",
    "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4": "a recurrence",
    "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8": "a recurrence",
    "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4": "a recurrence",
    "nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4": "a recurrence",
    "nvidia--Nemotron-H-56B-Base-8K": "a recurrence",
    "nvidia--Qwen3.5-122B-A10B-NVFP4": "a recurrence",
    "nvidia--Qwen3.5-397B-A17B-NVFP4": "a recurrence",
    # two quantization groups (fp8 for the delta net's projections, NVFP4 elsewhere)
    "nvidia--Qwen3.6-27B-NVFP4": "2 groups",
    "nvidia--Qwen3.6-35B-A3B-NVFP4": "2 groups",
    # its layer count is the length of layers_block_type, read as transformers reads it
    # (it was refused as "num_hidden_layers: missing"): a Mamba hybrid all the same
    "nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16": "a recurrence",
    "nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8": "a recurrence",
    "nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-NVFP4": "a recurrence",
    # compressed attention (compress ratio 128 from the first layer): no static cache layer
    "deepseek-ai--DeepSeek-V4-Pro": "no layer for its 'heavily_compressed_attention' layers",
    "nvidia--DeepSeek-V4-Pro-NVFP4": "no layer for its 'heavily_compressed_attention' layers",
}


def cut(config: dict) -> dict:
    """The config with 2 layers, each per-layer list cut to match."""
    for part in (config, *(v for v in config.values() if isinstance(v, dict))):
        layers = part.get("num_hidden_layers")
        if not isinstance(layers, int):
            continue
        part["num_hidden_layers"] = LAYERS
        for key, value in list(part.items()):
            if isinstance(value, list) and len(value) == layers:
                part[key] = value[:LAYERS]
    return config


NAMES = sorted(p.stem for p in CORPUS.glob("*.json"))


def test_the_corpus_is_whole():
    assert len(NAMES) == 85
    assert set(REFUSED) <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_each_config_projects_or_is_refused_in_one_line(capsys, tmp_path, name):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cut(json.loads((CORPUS / f"{name}.json").read_text()))))
    code = main(["model", str(path), "-m", "b200", "--phase", "decode", "--batch", "2",
                 "--context", "64", "--json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    if name in REFUSED:
        assert code == 2 and not out, err
        assert err.count("\n") == 1 and str(path) in err and REFUSED[name] in err, err
        return
    assert code == 0, err
    total = json.loads(out.splitlines()[-1])
    assert total["op"] == "total" and total["sol_time_s"] > 0
    assert total["weight_bytes"] > 0 and total["kv_cache_bytes"] >= 0


@pytest.mark.parametrize("name", [n for n in NAMES if n not in REFUSED])
@pytest.mark.parametrize("how", [("--serve", "input=512,output=64", "--batch", "1,16"),
                                 ("--phase", "prefill", "--seq", "300", "--tp", "2"),
                                 ("--phase", "decode", "--context", "2048", "--tp", "8")])
def test_each_config_serves_and_shards_or_says_why(capsys, tmp_path, name, how):
    """The serving grid and tensor parallelism on every config that projects: figures, or one
    line naming what --tp cannot split (a size that does not divide, per-layer sizes, a
    multimodal model built whole); never a traceback."""
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cut(json.loads((CORPUS / f"{name}.json").read_text()))))
    code = main(["model", str(path), "-m", "b200", *how])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    if code == 2:
        assert "--tp" in how and not out and err.count("\n") == 1, err
        assert "--tp" in err or "does not divide" in err or "replicated" in err, err
    else:
        assert code == 0 and out, err


def test_compressed_attention_at_full_size_is_refused_in_one_line(capsys):
    """DeepSeek-V4's compressed sparse attention layers (its `compress_ratios` of 4 and 128)
    have no layer in transformers' static cache, so they cannot run on fake tensors: refused
    naming the layer type, never a traceback (cut to its first two layers, which compress
    nothing, it projects above)."""
    path = CORPUS / "deepseek-ai--DeepSeek-V4-Flash.json"
    code = main(["model", str(path), "-m", "b200", "--phase", "decode", "--context", "64"])
    out, err = capsys.readouterr()
    assert code == 2 and not out and err.count("\n") == 1
    assert f"{path}: layer_types" in err and "'compressed_sparse_attention'" in err
