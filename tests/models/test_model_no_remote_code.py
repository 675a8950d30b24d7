"""`roofwise model` never runs code from a config's folder, never prompts, never opens a socket.

A config.json may carry `auto_map` (transformers' pointer to `modeling_*.py` beside it, or to a
hub repository) and `"_name_or_path": "."`. For a model type transformers knows without a
causal-LM class (t5), `AutoModelForCausalLM.from_config` falls back to that code and asks
"Do you wish to run the custom code? [y/N]" on stdout; answering y imports the file. Each test
puts a `modeling_*.py` that writes a marker file beside the config, answers "y" on stdin, and
runs from the config's own folder (where "." points), with every socket connection refused and
recorded.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from roofwise.cli import main

MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"
EVIL = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n"


def evil_folder(tmp_path: Path, config: dict) -> tuple[Path, Path]:
    marker = tmp_path / "MARKER"
    for name in ("modeling_evil.py", "configuration_evil.py", "__init__.py"):
        (tmp_path / name).write_text(EVIL.format(marker=str(marker)))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path, marker


T5 = {"model_type": "t5", "_name_or_path": ".", "d_model": 64, "num_layers": 2,
      "num_heads": 2, "d_kv": 32, "d_ff": 128, "vocab_size": 100,
      "auto_map": {"AutoConfig": "configuration_evil.EvilConfig",
                   "AutoModelForCausalLM": "modeling_evil.EvilModel"}}


def llama_with_hub_code() -> dict:
    config = json.loads((MODELS / "llama-3.2-1b.json").read_text())
    config["num_hidden_layers"] = 1
    config["_name_or_path"] = "."
    config["trust_remote_code"] = True
    config["auto_map"] = {"AutoConfig": "someone/evil--configuration_evil.EvilConfig",
                          "AutoModelForCausalLM": "someone/evil--modeling_evil.EvilModel"}
    return config


@pytest.fixture
def no_network(monkeypatch):
    attempts: list[object] = []

    def refuse(self, address, *args, **kwargs):
        attempts.append(address)
        raise OSError("network refused by the test")

    def refuse_create(address, *args, **kwargs):
        attempts.append(address)
        raise OSError("network refused by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse_create)
    return attempts


def run_in(monkeypatch, capsys, folder: Path, *args: str) -> tuple[int, str, str]:
    monkeypatch.chdir(folder)
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n" * 10))
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_config_type_without_a_causal_lm_is_refused_without_running_its_code(
        tmp_path, no_network, monkeypatch, capsys):
    path, marker = evil_folder(tmp_path, T5)
    code, out, err = run_in(monkeypatch, capsys, tmp_path, "model", str(path), "-m", "h200",
                            "--phase", "decode", "--json")
    assert code == 2
    assert not marker.exists()
    assert no_network == []
    assert out == ""
    assert "[y/N]" not in err
    assert err.count("\n") == 1 and "no causal-LM model for 't5'" in err


def test_auto_map_to_the_hub_is_ignored_and_the_model_built_from_transformers(
        tmp_path, no_network, monkeypatch, capsys):
    path, marker = evil_folder(tmp_path, llama_with_hub_code())
    code, out, err = run_in(monkeypatch, capsys, tmp_path, "model", str(path), "-m", "h200",
                            "--phase", "decode", "--json")
    assert code == 0, err
    assert not marker.exists()
    assert no_network == []
    assert sys.stdin.read() == "y\n" * 10  # the command read none of it
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1]["op"] == "total"  # stdout is JSON lines only: no prompt on it


def test_the_command_sets_the_hub_offline_and_reads_no_stdin(tmp_path):
    """A whole process, its stdin a stream of "y": the prompt never appears, nothing runs."""
    path, marker = evil_folder(tmp_path, T5)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    done = subprocess.run([sys.executable, "-m", "roofwise", "model", str(path), "-m", "h200",
                           "--phase", "decode", "--json"], input="y\n" * 10, text=True,
                          capture_output=True, cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1
    assert not marker.exists()


def test_load_config_keeps_no_code_pointers():
    from roofwise.models.config import load_config

    config = load_config(MODELS / "llama-3.2-1b.json")
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert not getattr(config.hf, "auto_map", None)


def test_no_hub_kernel_is_looked_for(tmp_path, monkeypatch):
    """Importing GPT-Neo's modeling file makes transformers probe for flash attention by
    loading the hub's flash-attention kernels (compiled code), from the local cache when
    offline, and print three warnings about their publishers. The `kernels` package is
    pointed at a cache that holds nothing and at no local kernels: nothing is loaded or said."""
    from transformers import CONFIG_MAPPING

    from roofwise.models.config import offline_transformers

    monkeypatch.setenv("LOCAL_KERNELS", f"kernels-community/flash-attn2={tmp_path}")
    offline_transformers()
    assert os.environ["KERNELS_CACHE"] == os.devnull
    assert os.environ["USE_HUB_KERNELS"] == "NO"
    assert "LOCAL_KERNELS" not in os.environ
    config = CONFIG_MAPPING["gpt_neo"]().to_dict()  # transformers' own default config
    config.update(architectures=["GPTNeoForCausalLM"])
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "TRANSFORMERS_", "KERNELS_", "USE_HUB"))}
    done = subprocess.run([sys.executable, "-m", "roofwise", "model", str(path), "-m", "h200",
                           "--phase", "decode", "--json", "--no-cache"], text=True,
                          capture_output=True, cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
