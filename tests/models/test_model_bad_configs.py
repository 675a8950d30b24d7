"""`roofwise model`: no config ends in a traceback. Each bad config, step size or model class
transformers refuses is one line on stderr, exit 2, naming the config file (or the option) and
the field, and what was expected; sizes are checked before any model is built, so that 10^6
layers is refused at once.

Each case is a copy of the shipped Llama-3.2-1B config with one field made bad (or a config
that transformers refuses as a whole), run in-process.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"


def llama(**changes):
    config = json.loads((MODELS / "llama-3.2-1b.json").read_text())
    config["num_hidden_layers"] = 1
    config.update(changes)
    return config


def without(name):
    config = llama()
    del config[name]
    return config


def refused(capsys, tmp_path, config, *extra):
    path = tmp_path / "config.json"
    path.write_bytes(config if isinstance(config, bytes) else
                     (config if isinstance(config, str) else json.dumps(config)).encode())
    code = main(["model", str(path), "-m", "h200", "--phase", "decode", "--json", *extra])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("roofwise: error: ")
    return lines[0], str(path)


# (case, config, what the line must hold besides the file's name)
FIELD_CASES = [
    ("negative size", llama(hidden_size=-5),
     "hidden_size: expected an integer from 1 to 1,048,576, got -5"),
    ("zero KV heads", llama(num_key_value_heads=0), "num_key_value_heads: expected an integer"),
    ("zero head_dim", llama(head_dim=0), "head_dim: expected an integer from 1 to 65,536"),
    ("zero heads", llama(num_attention_heads=0), "num_attention_heads: expected an integer"),
    ("float where an int goes", llama(intermediate_size=8192.5), "intermediate_size: expected"
                                                                 " an integer"),
    ("string where an int goes", llama(hidden_size="2048"), "hidden_size: expected an integer"),
    ("true where an int goes", llama(vocab_size=True), "vocab_size: expected an integer"),
    ("a million layers", llama(num_hidden_layers=10**6),
     "num_hidden_layers: expected an integer from 1 to 1,024, got 1000000"),
    ("a 400-digit vocabulary", llama(vocab_size=10**400), "vocab_size: expected an integer"),
    ("unknown activation", llama(hidden_act="nonsense"),
     "hidden_act: got the string 'nonsense'; expected an activation transformers knows"),
    ("activation not a string", llama(hidden_act=3), "hidden_act: got 3"),
    ("unknown rope type", llama(rope_scaling={"rope_type": "bogus", "factor": 2.0}),
     "rope_scaling.rope_type: expected a rope type transformers knows"),
    ("rope settings not an object", llama(rope_scaling="x"), "rope_parameters: transformers "
                                                             "cannot build the config"),
    ("missing hidden_size", without("hidden_size"), "hidden_size: missing; expected llama's"),
    ("missing layer count", without("num_hidden_layers"), "num_hidden_layers: missing"),
    ("KV heads that do not divide", llama(num_key_value_heads=3),
     "num_key_value_heads: 3 KV heads do not divide 32 query heads"),
    ("null heads", llama(num_attention_heads=None), "num_attention_heads: transformers cannot "
                                                    "build the config"),
    ("a string epsilon", llama(rms_norm_eps="x"), "rms_norm_eps: transformers cannot build"),
    ("a string rope theta", llama(rope_theta="abc"), "transformers cannot build a llama model"),
    ("a pad token past the vocabulary", llama(pad_token_id=10**9),
     "transformers cannot build a llama model from it"),
    ("nested sizes", {"model_type": "llava", "text_config": {"model_type": "llama",
                                                             "hidden_size": -1}},
     "text_config: hidden_size: expected an integer"),
    # a text_config given to a model type that takes none: read as the decoder only where
    # nothing else could be (tests/models/test_text_config_forms.py); else refused, naming it
    ("a loose text_config beside the decoder's sizes", llama(text_config={"hidden_size": 64}),
     "text_config: 'llama' has no text_config of its own and this one is beside a top-level "
     "hidden_size"),
    ("a loose text_config that is a list", {"model_type": "llama", "text_config": [1]},
     "text_config: 'llama' has no text_config of its own and this one is not an object (list)"),
    ("a loose decoder object", llama(decoder={"hidden_size": 64}),
     "decoder: 'llama' has no decoder of its own"),
    ("a loose generator value", llama(generator=5), "generator: 'llama' has no generator"),
    ("a loose text_config without sizes", {"model_type": "llama", "text_config": {}},
     "text_config: hidden_size: missing; expected llama's hidden size"),
    ("a loose text_config of a model type transformers lacks",
     {"model_type": "ministral3", "text_config": {"model_type": "nope"}},
     "text_config: model_type: 'nope' is not a model type transformers"),
]


@pytest.mark.parametrize(("config", "expected"), [c[1:] for c in FIELD_CASES],
                         ids=[c[0] for c in FIELD_CASES])
def test_a_bad_field_is_one_line_naming_the_file_and_the_field(capsys, tmp_path, config,
                                                               expected):
    line, path = refused(capsys, tmp_path, config)
    assert path in line
    assert expected in line, line


FILE_CASES = [
    ("2,000-deep JSON", "[" * 2000 + "]" * 2000, "nesting deeper than 32 levels"),
    ("40-deep JSON in a field", json.dumps(llama(extra=json.loads("[" * 40 + "]" * 40))),
     "nesting deeper than 32 levels"),
    ("a key named twice", '{"model_type": "llama", "model_type": "qwen2"}',
     "'model_type': named twice"),
    ("bytes that are not UTF-8", b'{"model_type": "llama", "x": "\xff"}', "byte 30 is not UTF-8"),
    ("not JSON", "{", "not JSON"),
    ("no model_type", "{}", "model_type: expected a config.json naming its model_type"),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in FILE_CASES],
                         ids=[c[0] for c in FILE_CASES])
def test_a_bad_file_is_one_line(capsys, tmp_path, text, expected):
    line, path = refused(capsys, tmp_path, text)
    assert path in line and expected in line, line


def test_a_config_over_4_mib_is_refused_unread(capsys, tmp_path):
    config = json.dumps(llama(id2label={str(i): "x" * 64 for i in range(70_000)}))
    assert len(config) > 4 << 20
    line, path = refused(capsys, tmp_path, config)
    assert f"{path}: {len(config):,} bytes; expected a config.json of at most 4,194,304" in line


def test_a_bom_and_cr_line_ends_are_read(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(llama(), indent=1).replace("\n", "\r").encode())
    code = main(["model", str(path), "-m", "h200", "--phase", "decode", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["op"] == "total"


@pytest.mark.parametrize(("option", "value", "expected"), [
    ("--batch", str(10**20), "--batch: expected an integer from 1 to 1,048,576"),
    ("--context", str(10**20), "--context: expected an integer from 0 to 134,217,728"),
    ("--seq", str(10**20), "--seq: expected an integer from 1 to 16,777,216"),
    ("--seq", "1e20", "'1e20' is not a valid integer"),
    ("--batch", str(2**62), "--batch: expected an integer"),
])
def test_a_step_size_out_of_range_is_one_line_naming_the_option(capsys, tmp_path, option,
                                                                value, expected):
    line, _ = refused(capsys, tmp_path, llama(), option, value)
    assert expected in line, line


def test_too_many_tokens_per_step_is_refused(capsys, tmp_path):
    line, _ = refused(capsys, tmp_path, llama(), "--batch", str(1 << 20), "--seq", "32")
    assert "--batch x --seq: 33,554,432 new tokens per step; expected at most 16,777,216" in line


def test_a_million_layers_is_refused_at_once(capsys, tmp_path):
    started = time.perf_counter()
    refused(capsys, tmp_path, llama(num_hidden_layers=10**6))
    assert time.perf_counter() - started < 10  # it used to build layers for over a minute


def default_config(model_type, **changes):
    """transformers' own defaults for a model type (each mirrors a published model), as a
    config.json would hold them."""
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type).to_dict()
    config.update(changes)
    return {k: v for k, v in config.items() if k != "transformers_version"}


@pytest.mark.parametrize(("model_type", "what"), [
    ("mamba", "the model class is MambaForCausalLM: a recurrence"),
    ("mamba2", "the model class is Mamba2ForCausalLM: a recurrence"),
    ("rwkv", "the model class is RwkvForCausalLM: a recurrence"),
    ("falcon_mamba", "the model class is FalconMambaForCausalLM: a recurrence"),
])
@pytest.mark.parametrize("tp", ["1", "2"])
def test_a_state_space_model_is_refused_naming_what_is_missing(capsys, tmp_path, model_type,
                                                               what, tp):
    line, path = refused(capsys, tmp_path, default_config(model_type, num_hidden_layers=2),
                         "--tp", tp)  # --tp 2 ended in a traceback: no heads to split
    assert path in line and what in line, line
    assert "operator library has no ledger for yet" in line


def test_a_hybrid_model_is_refused_naming_its_recurrent_layer(capsys, tmp_path):
    config = default_config("jamba", num_hidden_layers=2, attn_layer_period=2,
                            attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1)
    line, _ = refused(capsys, tmp_path, config)
    assert "model.layers.0 is JambaMambaDecoderLayer: a recurrence" in line, line


@pytest.mark.parametrize("model_type", ["t5", "clip", "vit", "siglip"])
def test_a_model_type_without_a_decoder_is_refused(capsys, tmp_path, model_type):
    line, path = refused(capsys, tmp_path, default_config(model_type))
    assert f"{path}: model_type: transformers has no causal-LM model for {model_type!r}" in line


def test_an_unknown_regime_is_named_with_the_known_ones(capsys):
    """It used to be reported as a fault of the profile ("prices in cycles")."""
    code = main(["model", str(MODELS / "llama-3.2-1b.json"), "-m", "h200", "--phase", "decode",
                 "--regime", "nonsense"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines() == ["roofwise: error: --regime: expected one of sustained, burst, "
                                "unspecified, got 'nonsense'"]


def test_a_model_that_routes_on_tensor_values_is_refused_saying_why(capsys, tmp_path):
    # JetMoE's experts loop over the tokens each expert was given, read from the router's
    # output: no fake tensor holds them. Its config is transformers' own default, cut to two
    # layers; the refusal says what the bare op name did not.
    from transformers import CONFIG_MAPPING

    config = CONFIG_MAPPING["jetmoe"]().to_dict()
    config.update(num_hidden_layers=2, architectures=["JetMoeForCausalLM"])
    err, _ = refused(capsys, tmp_path, config)
    assert "(aten._local_scalar_dense.default: the step reads tensor values" in err
