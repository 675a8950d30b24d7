"""Fuzzed `roofwise model` configs: real configs (examples/models, tests/fixtures/configs) cut
to one layer, then mutated as files go wrong (a field dropped, a value of the wrong type, a
huge or negative size, deep nesting, bytes that are not UTF-8, a key named twice, CR line
ends, a BOM) and run with drawn step sizes. The contract holds: exit 0 with JSON lines ending
in the total, or exit 2 with one line; never a traceback."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from fuzzkit import examples, out_lines, run_cli
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
BASES = sorted([*(ROOT / "examples" / "models").glob("*.json"),
                *(ROOT / "tests" / "fixtures" / "configs").glob("*.json")])


NEST = "<nested here>"


def one_layer(path: Path) -> dict[str, Any]:
    config = json.loads(path.read_text())
    decoder = config.get("text_config", config)
    decoder["num_hidden_layers"] = 1
    if isinstance(decoder.get("layer_types"), list):
        decoder["layer_types"] = decoder["layer_types"][:1]
    return config


def wrong_values() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(), st.booleans(), st.floats(allow_nan=False, allow_infinity=False),
        st.integers(-10**6, -1), st.integers(10**7, 10**12),
        st.integers(20, 400).map(lambda k: 10**k),
        st.sampled_from(("", "abc", "4096", "1e20", "silu", "\x00", "\u202e", "[/x]")),
        st.lists(st.integers(0, 5), max_size=3), st.dictionaries(st.sampled_from(("a", "type")),
                                                                 st.integers(0, 3), max_size=2))


@st.composite
def config_bytes(draw: st.DrawFn) -> bytes:
    config = one_layer(draw(st.sampled_from(BASES)))
    if "text_config" not in config and draw(st.integers(0, 3)) == 0:
        # the decoder's fields nested under a text_config its model type takes none of (as
        # mlc-llm's Ministral-3 ships): it ended in a traceback once
        config = {"model_type": config["model_type"],
                  "text_config": {k: v for k, v in config.items() if k != "model_type"}}
    target = config.get("text_config", config) if draw(st.booleans()) else config
    depth = 0
    for _ in range(draw(st.integers(0, 3))):
        keys = sorted(target)
        if not keys:  # every field dropped already (a text_config of two fields, say)
            break
        key = draw(st.sampled_from(keys))
        how = draw(st.sampled_from(("drop", "wrong", "nest", "zero")))
        if how == "drop":
            target.pop(key)
        elif how == "wrong":
            target[key] = draw(wrong_values())
        elif how == "nest":  # written as text below: json cannot build 2,000 levels
            depth = draw(st.sampled_from((3, 31, 40, 2000)))
            target[key] = NEST
        else:
            target[key] = 0
    text = json.dumps(config, indent=draw(st.sampled_from((None, 1))))
    text = text.replace(json.dumps(NEST), "[" * depth + "1" + "]" * depth)
    if config and draw(st.booleans()):  # a key named twice, the second value a wrong one
        key = draw(st.sampled_from(sorted(config)))
        text = text.rstrip().rstrip("}") + f', "{key}": {json.dumps(draw(wrong_values()))}}}'
    data = text.encode()
    line_end = draw(st.sampled_from((b"\n", b"\r", b"\r\n")))
    data = data.replace(b"\n", line_end)
    if draw(st.integers(0, 5)) == 0:  # bytes that are not UTF-8 inside a string value
        at = data.find(b'": "')
        data = data[:at + 4] + draw(st.sampled_from((b"\xff", b"\xc3", b"\xed\xa0\x80"))) + \
            data[at + 4:] if at >= 0 else data + b"\xff"
    if draw(st.integers(0, 5)) == 0:
        data = b"\xef\xbb\xbf" + data
    return data


def step_args() -> st.SearchStrategy[list[str]]:
    size = st.one_of(st.integers(0, 64), st.sampled_from((2**31, 10**20, -1))).map(str)
    return st.lists(st.tuples(st.sampled_from(("--batch", "--seq", "--context", "--tp")), size),
                    max_size=2).map(lambda pairs: [a for pair in pairs for a in pair])


@examples(30)
@given(data=config_bytes(), phase=st.sampled_from(("decode", "prefill")), extra=step_args())
def test_configs(tmp_path, data, phase, extra):
    path = tmp_path / "config.json"
    path.write_bytes(data)
    args = ["model", path, "-m", "h200", "--phase", phase, "--json", *extra]
    if phase == "prefill" and "--seq" not in extra:
        args += ["--seq", "4"]
    run = run_cli(*args, count="model CONFIG")
    assert run.code in (0, 2), run.err
    if run.code == 0:
        lines = [json.loads(line) for line in out_lines(run)]
        total = lines[-1]
        assert total["op"] == "total"
        assert math.isfinite(total["sol_time_s"]) and total["sol_time_s"] > 0
        assert total["flops"] >= 0 and total["bytes"] > 0
    else:
        assert run.out == ""
