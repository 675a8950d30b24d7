"""`roofwise model CONFIG --serve input=N,output=N --batch ...`: the serving figures composed as
the docs say (TTFT the prompt's prefill, TPOT the decode step at the mean context), the
launch floors from the profile's floors and the step's kernel count, and the batch where the
decode GEMMs turn compute-bound, counted here from the GEMM shapes and the h200 profile's
rates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
# h200 profile: bf16 tensor cores 989.5 TFLOP/s x 0.7077 sustained; HBM 4.8 TB/s x 0.9380
# (the read mix, its envelope)
BF16_RATE = 989.5e12 * 0.7077
HBM_RATE = 4.8e12 * 0.9380
# the h200 profile's assumed floors: events 20 us + 5 us per further kernel, graph 5 + 2 us
EVENTS, EVENTS_EACH, GRAPH, GRAPH_EACH = 20e-6, 5e-6, 5e-6, 2e-6


def reduced(tmp_path):
    config = json.loads((MODELS / "llama-3.2-1b.json").read_text())
    config["num_hidden_layers"] = 2
    path = tmp_path / "llama-2-layers.json"
    path.write_text(json.dumps(config))
    return path, config


def crossover(n, k):
    """The fewest tokens m at which (m x k) @ (k x n) in bf16 takes longer on the tensor
    cores than moving A, B and C through HBM."""
    m = 1
    while 2 * m * n * k / BF16_RATE < 2 * (m * k + k * n + m * n) / HBM_RATE:
        m += 1
    return m


def test_serve_figures_compose_as_documented(capsys, tmp_path):
    path, c = reduced(tmp_path)
    code = main(["model", str(path), "-m", "h200", "--serve", "input=128,output=16",
                 "--batch", "1,4", "--tp", "2", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    points, summary = lines[:-1], lines[-1]
    assert [p["batch"] for p in points] == [1, 4]
    for p in points:
        assert p["bound"] == "speed of light"
        assert p["decode_context"] == 128 + 7  # input + (output - 2) / 2
        request = p["ttft_s"] + 15 * p["tpot_s"]
        assert p["request_time_s"] == pytest.approx(request)
        assert p["throughput_tokens_per_s"] == pytest.approx(p["batch"] * 16 / request)
        assert p["tokens_per_s_per_gpu"] == pytest.approx(p["batch"] * 16 / request / 2)
        assert p["decode_tokens_per_s"] == pytest.approx(p["batch"] / p["tpot_s"])
        for phase in ("prefill", "decode"):
            launch = p[f"{phase}_launch"]
            kernels = launch["kernels"]
            assert kernels > 2 * 9  # at least the 9 GEMMs, 2 norms and attention per layer
            assert launch["eager_floor_s"] == pytest.approx(EVENTS + (kernels - 1) * EVENTS_EACH)
            assert launch["graph_floor_s"] == pytest.approx(GRAPH + (kernels - 1) * GRAPH_EACH)
        assert p["tpot_with_cuda_graph_s"] == pytest.approx(
            max(p["tpot_s"], p["decode_launch"]["graph_floor_s"]))
        assert p["fits"] is True
        assert p["decode_bound"] == "memory"
    # batch 4 costs more per step and yields more tokens per second than batch 1
    assert points[1]["tpot_s"] > points[0]["tpot_s"]
    assert points[1]["throughput_tokens_per_s"] > points[0]["throughput_tokens_per_s"]
    # memory at the last token: 4 sequences of 144 positions, 2 layers, 4 KV heads of 64
    assert points[1]["memory_kv_cache_bytes"] == 4 * 144 * 2 * 2 * 4 * 64 * 2
    h, inter, vocab = c["hidden_size"], c["intermediate_size"] // 2, c["vocab_size"] // 2
    q, kv = 16 * 64, 4 * 64  # per device: 16 query heads, 4 KV heads of 64
    shapes = [(q, h), (kv, h), (h, q), (inter, h), (h, inter), (vocab, h)]
    assert summary["decode_first_gemm_compute_bound_batch"] == min(
        crossover(n, k) for n, k in shapes)
    assert summary["decode_compute_bound_batch"] == max(crossover(n, k) for n, k in shapes)
    assert summary["crossover_regime"] == "sustained"
    assert any("speed-of-light" in n for n in summary["notes"])


def test_serve_needs_a_request_shape_and_keeps_single_batches_elsewhere(capsys, tmp_path):
    path, _ = reduced(tmp_path)
    assert main(["model", str(path), "-m", "h200", "--serve", "input=128"]) == 2
    assert "expected both input=N and output=N" in capsys.readouterr().err
    assert main(["model", str(path), "-m", "h200", "--phase", "decode", "--batch", "1,8"]) == 2
    assert "--sweep" in capsys.readouterr().err
    assert main(["model", str(path), "-m", "h200", "--serve", "input=131000,output=256"]) == 2
    assert "max_position_embeddings" in capsys.readouterr().err


def test_serve_on_a_profile_priced_in_cycles_is_refused_in_one_line(capsys, tmp_path):
    """ascend-a5-vector gives rates per cycle, none per second: a step costs 0 s, and
    `--serve` divided the batch's tokens by that request time (ZeroDivisionError); `--phase`
    already refused it. Both say so in one line now."""
    path, _ = reduced(tmp_path)
    for args in (["--serve", "input=128,output=16", "--batch", "1,8"],
                 ["--phase", "decode", "--context", "256"]):
        assert main(["model", str(path), "-m", "ascend-a5-vector", *args]) == 2
        out, err = capsys.readouterr()
        assert not out and err.count("\n") == 1
        assert "prices no op of the step in seconds" in err
