"""What `roofwise model` says about public configs it refuses or reads with a caveat, each in
one line: a model type only remote code implements (InternLM2, ChatGLM, Baichuan, MiniCPM,
Orion, as mlc-llm's presets ship them), a Falcon-H1 config without its `mamba_d_ssm` (named,
not `model_type`), a `model_type` that disagrees with `architectures` (Megatron-Bridge's
GLM-4.5-Air test config: `glm` with Glm4MoeForCausalLM), a request with no decode step, and
`--mla expanded` on a model without latent attention."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

import transformers

from roofwise.cli import main

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "models"


def run(capsys, path, *args):
    code = main(["model", str(path), "-m", "h100", *map(str, args)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.mark.parametrize(("name", "model_type"), [
    ("internlm2_5_7b", "internlm2"), ("chatglm", "chatglm"), ("baichuan", "baichuan"),
    ("minicpm-moe-8x2b", "minicpm"), ("orion", "orion")])
def test_a_remote_code_model_type_is_named_as_such(capsys, name, model_type):
    path = CONFIGS / "mlc-llm" / f"{name}.json"
    code, out, err = run(capsys, path, "--phase", "decode")
    assert code == 2 and out == ""
    assert err == (f"roofwise: error: {path}: model_type: {model_type!r} is not a model type "
                   f"transformers {transformers.__version__} ships, and roofwise runs no "
                   "remote code (auto_map is never run)\n")


def test_falcon_h1_without_mamba_d_ssm_names_that_field(capsys, tmp_path):
    path = CONFIGS / "megatron-bridge" / "falcon-h1-0.5b.json"
    code, out, err = run(capsys, path, "--phase", "decode")
    assert code == 2 and out == "" and err.count("\n") == 1
    # transformers' default mamba_d_ssm (1,024) is not a multiple of the config's 24 heads;
    # its message speaks of mamba_expand x hidden_size, which mamba_d_ssm replaces
    assert err.startswith(f"roofwise: error: {path}: mamba_d_ssm: not given, and "
                          "transformers' default (1024) fails its check (ValueError: "
                          "mamba_n_heads must divide mamba_expand * hidden_size)"), err
    # given (1,536 = 24 heads x 64, as the checkpoint has it), it goes on to the recurrent
    # layer, refused as before
    config = json.loads(path.read_text())
    config["mamba_d_ssm"] = 24 * config["mamba_d_head"]
    given = tmp_path / "falcon-h1.json"
    given.write_text(json.dumps(config))
    code, _, err = run(capsys, given, "--phase", "decode")
    assert code == 2 and "mamba_d_ssm" not in err and "FalconH1Mixer: a recurrence" in err


def test_a_model_type_that_disagrees_with_architectures_is_one_warning(capsys, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setenv("ROOFWISE_CACHE_DIR", str(tmp_path / "cache"))
    path = CONFIGS / "megatron-bridge" / "glm-4.5-air.json"
    warning = (f"roofwise: {path}: model_type 'glm' disagrees with architectures "
               "(Glm4MoeForCausalLM, transformers' class for glm4_moe, param2moe, sarvam_moe); "
               "priced as model_type says")
    for _ in range(2):  # the second run reads its config back from the store: the same line
        code, out, err = run(capsys, path, "--phase", "decode", "--json")
        assert code == 0 and json.loads(out.splitlines()[-1])["op"] == "total"
        assert [line for line in err.splitlines() if "using profile" not in line] == [warning]
    code, _, err = run(capsys, EXAMPLES / "llama-3.2-1b.json", "--phase", "decode")
    assert code == 0 and "disagrees" not in err


def test_a_request_of_one_output_token_has_no_tpot(capsys):
    code, out, _ = run(capsys, EXAMPLES / "llama-3.2-1b.json", "--serve",
                       "input=2048,output=1", "--batch", "1", "--json")
    assert code == 0
    point = json.loads(out.splitlines()[0])
    assert point["output"] == 1 and point["tpot_s"] is None
    assert point["decode_context"] is None and point["decode_tokens_per_s"] is None
    assert point["request_time_s"] == point["ttft_s"]  # the prefill gives the only token
    code, out, _ = run(capsys, EXAMPLES / "llama-3.2-1b.json", "--serve",
                       "input=2048,output=1", "--batch", "1")
    assert "TPOT: none (output 1: the prefill gives the only token, no decode step runs)" in (
        " ".join(out.split()))
    assert "cached tokens" not in out and "launch-bound decode" not in out


@pytest.mark.parametrize("args", [("--phase", "decode", "--json"),
                                  ("--serve", "input=64,output=4", "--json")])
def test_mla_expanded_without_latent_attention_changes_nothing_and_says_so(capsys, args):
    note = ("--mla expanded changes nothing: the model has no multi-head latent attention "
            "(DeepSeek-V2/V3's), whose form it picks")
    _, plain, _ = run(capsys, EXAMPLES / "llama-3.2-1b.json", *args)
    code, expanded, _ = run(capsys, EXAMPLES / "llama-3.2-1b.json", *args, "--mla", "expanded")
    assert code == 0
    last = json.loads(expanded.splitlines()[-1])
    assert last["notes"].count(note) == 1
    without = json.loads(plain.splitlines()[-1])
    assert {k: v for k, v in last.items() if k != "notes"} == {
        k: v for k, v in without.items() if k != "notes"}
    _, latent, _ = run(capsys, EXAMPLES / "deepseek-v2-lite.json", "--phase", "decode",
                       "--json", "--mla", "expanded")
    assert note not in json.loads(latent.splitlines()[-1])["notes"]
