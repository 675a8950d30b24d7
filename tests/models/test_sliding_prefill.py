"""Models that mix sliding-window and full attention layers (EXAONE-4.0-32B and
OLMo-3.1-32B: three sliding layers in four, Gemma-2-9B: every other layer), priced layer by
layer in prefill, decode and serving. Two faults priced every layer's attention as
sliding-window before:

- a prefill from an empty cache past the window: sliding and full layers read as many keys,
  so their kernels had one shapes text and one row, priced as its first (sliding) layer;
- EXAONE-4 keeps the config's window on every attention module and hands the kernel None on
  its full layers: the module's window was read instead.

And a sliding layer in a prefill over cached tokens read only the step's own keys and one
more (the cache is warmed by one token), not the window - 1 cached ones before them.

Hand counts: causal attention FLOPs per layer on the tensor cores = 4 x heads x head_dim x
sum over query positions i (1-based) of the keys it attends, keys = i for a full layer and
min(i, window) for a sliding one (QK^T and PV, 2 FLOPs per multiply-add each). The configs run
whole (64 and 42 layers), as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


def run(capsys, name, *args):
    code = main(["model", str(CONFIGS / name), "-m", "h100", "--json", "--no-cache",
                 *map(str, args)])
    out, err = capsys.readouterr()
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def attention(rows):
    """Per attention row: (calls, tensor-core FLOPs of all of them, windowed or not)."""
    return sorted((r["count"], r["flops_by_unit"]["tensor_core.bf16"], "window" in r["shapes"])
                  for r in rows if r["op"] == "attention (fused)")


def pairs(seq, window=None, first=0):
    """(query, key) pairs of queries at 1-based positions first+1 .. first+seq."""
    return sum(min(i, window) if window else i for i in range(first + 1, first + seq + 1))


def test_hand_counts_of_the_pairs():
    # full: 16,384 x 16,385 / 2; sliding: 4,096 x 4,097 / 2 + (16,384 - 4,096) x 4,096
    assert pairs(16384) == 134_225_920
    assert pairs(16384, 4096) == 8_390_656 + 50_331_648 == 58_722_304
    # Gemma-2 at 8,192: full 8,192 x 8,193 / 2; sliding 4,096 x 4,097 / 2 + 4,096 x 4,096
    assert pairs(8192) == 33_558_528
    assert pairs(8192, 4096) == 8_390_656 + 16_777_216 == 25_167_872


@pytest.mark.parametrize(("name", "seq", "full", "sliding", "expected"), [
    # 40 heads of 128: 4 x 40 x 128 = 20,480 per pair; 16 full + 48 sliding layers
    #   16 x 20,480 x 134,225,920 = 43,983,149,465,600
    # + 48 x 20,480 x 58,722,304 = 57,726,373,724,160: 101.7 TFLOP (77.7 before)
    ("exaone-4.0-32b.json", 16384, 16, 48, 101_709_523_189_760),
    ("olmo-3.1-32b.json", 16384, 16, 48, 101_709_523_189_760),
    # 16 heads of 256: 16,384 per pair; 21 full + 21 sliding layers
    #   21 x 16,384 x 33,558,528 + 21 x 16,384 x 25,167,872 = 20.21 TFLOP (17.40 before)
    ("gemma-2-9b.json", 8192, 21, 21, 20_205_640_089_600),
])
def test_an_empty_cache_prefill_splits_sliding_and_full_layers(capsys, name, seq, full,
                                                               sliding, expected):
    rows = run(capsys, name, "--phase", "prefill", "--seq", seq)
    found = attention(rows)
    config = json.loads((CONFIGS / name).read_text())
    heads = config["num_attention_heads"]
    head = config.get("head_dim") or config["hidden_size"] // heads
    window = config["sliding_window"]
    per_pair = 4 * heads * head
    assert found == sorted([(full, full * per_pair * pairs(seq), False),
                            (sliding, sliding * per_pair * pairs(seq, window), True)])
    assert sum(f for _, f, _ in found) == expected


def test_exaone_over_a_cached_context(capsys):
    # prefill of 4,096 over 8,192 cached: a full layer's queries at 8,193 .. 12,288 see
    # every earlier key, 41,945,088 pairs; a sliding one's see 4,096 keys each (the last
    # 4,095 cached and itself), 16,777,216 pairs (before: 8,394,751, only the step's own)
    rows = run(capsys, "exaone-4.0-32b.json", "--phase", "prefill", "--seq", 4096,
               "--context", 8192)
    assert pairs(4096, first=8192) == 41_945_088 and pairs(4096, 4096, 8192) == 16_777_216
    assert attention(rows) == sorted([(16, 16 * 20_480 * 41_945_088, False),
                                      (48, 48 * 20_480 * 16_777_216, True)])
    # decode over 8,192 cached: a full layer reads 8,193 keys (before: the window, 4,096), a
    # sliding one the 4,096 its cache keeps (its kernel's shape: no window to cut)
    rows = run(capsys, "exaone-4.0-32b.json", "--phase", "decode", "--context", 8192)
    assert attention(rows) == sorted([(16, 16 * 20_480 * 8193, False),
                                      (48, 48 * 20_480 * 4096, False)])


def test_serve_ttft_is_the_prefill_with_both_kinds_of_layer(capsys):
    prefill = run(capsys, "exaone-4.0-32b.json", "--phase", "prefill", "--seq", 16384)[-1]
    serving = run(capsys, "exaone-4.0-32b.json", "--serve", "input=16384,output=2",
                  "--batch", 1)
    (point,) = [r for r in serving if r["op"] == "serve"]
    assert point["ttft_s"] == prefill["sol_time_s"]
    assert prefill["flops_by_unit"]["tensor_core.bf16"] > 101_709_523_189_760  # + the GEMMs


def _priced(ledger):
    """What a row prices of an op: bytes read and written, work per unit."""
    if ledger is None:
        return None
    work: dict[str, float] = {}
    for w in ledger.work:
        work[w.unit] = work.get(w.unit, 0) + w.ops
    return (sum(t.read_bytes for t in ledger.tensors),
            sum(t.write_bytes for t in ledger.tensors), sorted(work.items()))


@pytest.mark.parametrize("name", ["exaone-4.0-32b.json", "gemma-2-9b.json",
                                  "llama-4-scout-17b-16e-instruct.json"])
def test_one_row_never_holds_ops_that_price_differently(tmp_path, name):
    """A row is the ops of one (layer, op, shapes text), priced as its first: the text must
    tell apart every op that prices differently (a windowed or chunked kernel; an arange,
    which reads no tensor, by what it writes: 8 bytes of positions are not 1,600)."""
    from roofwise.models.capture import Step, capture_steps
    from roofwise.models.config import load_config

    config = json.loads((CONFIGS / name).read_text())
    text = config.get("text_config", config)
    text["num_hidden_layers"] = 4
    if isinstance(text.get("layer_types"), list):
        text["layer_types"] = text["layer_types"][:4]
    for key in ("sliding_window", "attention_chunk_size"):
        if key in text:
            text[key] = 64
    path = tmp_path / name
    path.write_text(json.dumps(config))
    steps = [Step("prefill", 1, 200, 0), Step("prefill", 1, 100, 100),
             Step("decode", 2, 1, 300)]
    for capture in capture_steps(load_config(path), steps):
        groups: dict[tuple[str, str, str], set[str]] = {}
        for op in capture.ops:
            groups.setdefault((op.layer, op.op, op.shapes), set()).add(repr(_priced(op.ledger)))
        assert {key: found for key, found in groups.items() if len(found) > 1} == {}
