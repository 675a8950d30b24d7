"""A projection prints the same bytes on every run. transformers builds a model's masks for
`set(config.layer_types)` (Llama-4, Gemma-2/3 and 18 more), in an order Python's hash seed
picks anew in each process; the rows must not follow that order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

CONFIG = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / \
    "llama-4-scout-17b-16e-instruct.json"


def test_the_rows_do_not_follow_the_hash_seed(tmp_path):
    config = json.loads(CONFIG.read_text())
    text = config["text_config"]
    text["num_hidden_layers"] = 4  # chunked, chunked, chunked, full: both kinds of mask
    path = tmp_path / "llama-4-cut.json"
    path.write_text(json.dumps(config))
    outputs = []
    for seed in ("0", "1", "2"):  # seed 0 orders the two layer types apart from 1 and 2
        env = {**os.environ, "PYTHONHASHSEED": seed, "ROOFWISE_NO_CACHE": "1"}
        done = subprocess.run([sys.executable, "-m", "roofwise", "model", str(path), "-m",
                               "h200", "--phase", "decode", "--context", "512", "--batch", "2",
                               "--json"], env=env, capture_output=True, text=True, check=True)
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    rows = [json.loads(line) for line in outputs[0].splitlines()]
    masks = [r for r in rows if r.get("layer") == "model"]
    assert len(masks) >= 4  # both masks' ops are there, at the model's level
