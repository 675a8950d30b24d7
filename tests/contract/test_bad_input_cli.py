"""Each class of bad input the fuzzing of issue 9 found, through the command: one line on
stderr under 300 characters, exit code 2, no traceback; or the right number, exit code 0."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from roofwise.cli import main
from roofwise.ops.attention import causal_pairs


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def one_error(capsys, *args) -> str:
    code, out, err = run(capsys, *args)
    assert code == 2, (code, out, err)
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and len(lines[0]) < 300, lines
    return lines[0]


LEDGER_HEAD = "name: x\nroof: cuda_core.fp32\ntensors: []\n"


def ledger(tmp_path, body: str, name: str = "l.yaml"):
    path = tmp_path / name
    path.write_text(body)
    return path


def test_alias_bomb_under_notes_is_refused_fast(tmp_path, capsys):
    levels = ["&a [" + ", ".join(['"lol"'] * 9) + "]"]
    levels += [f"&{chr(98 + k)} [" + ", ".join([f"*{chr(97 + k)}"] * 9) + "]"
               for k in range(8)]  # 9^9 = 387 million strings once expanded
    path = ledger(tmp_path, LEDGER_HEAD + "notes: [" + ", ".join(levels) + "]\n")
    start = time.perf_counter()
    line = one_error(capsys, "price", path, "-m", "h200")
    assert time.perf_counter() - start < 2.0
    assert "alias" in line and str(path) in line


def test_self_referring_alias_is_refused(tmp_path, capsys):
    line = one_error(capsys, "price", ledger(tmp_path, LEDGER_HEAD + "notes: &n [*n]\n"),
                     "-m", "h200")
    assert "refers to itself" in line


def test_float_tag_on_text_names_the_line(tmp_path, capsys):
    body = LEDGER_HEAD + "work: [{unit: cuda_core.fp32, class: arithmetic, ops: !!float abc}]\n"
    line = one_error(capsys, "price", ledger(tmp_path, body), "-m", "h200")
    assert "l.yaml:4" in line and "expected a YAML float, got 'abc'" in line


def test_five_thousand_nested_brackets_are_refused(tmp_path, capsys):
    line = one_error(capsys, "price", ledger(tmp_path, "name: " + "[" * 5000 + "]" * 5000),
                     "-m", "h200")
    assert "nested deeper than 64 levels" in line


@pytest.mark.parametrize("digits", [400, 5000])
def test_huge_yaml_integers_are_named(tmp_path, capsys, digits):
    body = (LEDGER_HEAD + "work: [{unit: cuda_core.fp32, class: arithmetic, ops: "
            + "7" * digits + "}]\n")
    line = one_error(capsys, "price", ledger(tmp_path, body), "-m", "h200")
    assert "work[0].ops" in line and "beyond float range" in line


def test_huge_profile_number_is_named(tmp_path, capsys):
    path = tmp_path / "m.yaml"
    path.write_text("name: m\nmemory:\n  hbm: {theoretical_bytes_per_s: " + "9" * 400 + "}\n"
                    "units: {}\n")
    line = one_error(capsys, "machine", path)
    assert "theoretical_bytes_per_s" in line and "beyond float range" in line


def test_wide_silu_is_priced_exactly_not_wrapped(capsys):
    side = 2**32 + 1
    code, out, err = run(capsys, "price", "silu", "--shape", f"shape={side}x{side}",
                         "-m", "h200", "--json")
    assert code == 0, err
    data = json.loads(out)
    elements = side * side  # 18,446,744,082,299,486,209: above int64's 9.2e18
    assert data["ops_by_unit"] == {"cuda_core.fp32": 2.0 * elements, "sfu.fp32": 2.0 * elements}
    assert data["flops"] == pytest.approx(4 * elements, rel=1e-15)  # ~7.4e19, never 3.4e10
    assert data["bytes"] == 2 * 2 * elements  # bf16 in and out, exact integers in JSON


@pytest.mark.parametrize("shape, problem", [
    ("shape=" + "x".join(["1" + "0" * 20] * 2), "above the largest count"),
    ("shape=" + "9" * 5000, "integers of up to|above the largest count"),
])
def test_shapes_beyond_the_ceiling_are_one_line(capsys, shape, problem):
    import re

    line = one_error(capsys, "price", "silu", "--shape", shape, "-m", "h200")
    assert re.search(problem, line), line


def test_huge_expert_count_is_one_line(capsys):
    line = one_error(capsys, "price", "moe", "--shape",
                     f"expert_tokens={'9' * 40},1,top_k=1", "-m", "h200")
    assert "moe.expert_tokens" in line and "above the largest count" in line


def test_causal_pairs_closed_form_matches_counting():
    for q_len in range(1, 40):
        for kv_len in range(1, 40):
            counted = sum(min(max(i + 1 + kv_len - q_len, 0), kv_len) for i in range(q_len))
            assert causal_pairs(q_len, kv_len) == counted
    n = 300_000_000
    assert causal_pairs(n, n) == n * (n + 1) // 2


def test_long_causal_attention_is_priced_fast(capsys):
    start = time.perf_counter()
    code, out, err = run(capsys, "price", "attention", "--shape",
                         "q_len=300000000,kv_len=300000000", "-m", "h200", "--json")
    assert code == 0, err
    assert time.perf_counter() - start < 2.0  # was 33 s and 4.7 GB: an array over the sequence
    data = json.loads(out)
    pairs = 300_000_000 * 300_000_001 // 2
    # QK^T and PV: 2 * head_dim * pairs each, 32 heads, batch 1
    assert data["ops_by_class"]["contraction"] == pytest.approx(2 * 2 * 128 * 32 * pairs)


def test_attention_q_len_1e12_is_one_line(capsys):
    line = one_error(capsys, "price", "attention", "--shape", "q_len=1e12", "-m", "h200")
    assert "q_len" in line and "expected an integer" in line


def test_overlong_shape_and_kernel_names_are_elided(capsys):
    line = one_error(capsys, "price", "silu", "--shape", "shape=" + "4x" * 3000, "-m", "h200")
    assert "..." in line
    line = one_error(capsys, "price", "z" * 4000, "-m", "h200")
    assert "unknown operator" in line and "..." in line


def test_newline_in_a_key_stays_on_one_line(capsys):
    line = one_error(capsys, "price", "silu", "--shape", "sha\npe=4", "-m", "h200")
    assert "sha\\npe" in line


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0,
                    reason="root reads files whatever their mode")
def test_unreadable_files_are_one_line(tmp_path, capsys, examples):
    for name, command in (("r.jsonl", "analyze"), ("l.yaml", "price")):
        path = tmp_path / name
        path.write_bytes((examples / ("records.jsonl" if name.endswith("jsonl")
                                      else "qk_norm_rope_quant.yaml")).read_bytes())
        path.chmod(0)
        line = one_error(capsys, command, path, *(["-m", "h200"] if command == "price" else []))
        assert str(path) in line and "ermission denied" in line


@pytest.mark.parametrize("command", ["analyze", "price"])
def test_path_over_255_characters_is_one_line(tmp_path, capsys, command):
    path = tmp_path / ("a" * 300 + (".jsonl" if command == "analyze" else ".yaml"))
    args = [command, path] + (["-m", "h200"] if command == "price" else [])
    line = one_error(capsys, *args)
    assert "name too long" in line.lower() or "no such file" in line.lower()


@pytest.mark.parametrize("command, name", [("analyze", "r.jsonl"), ("price", "l.yaml"),
                                           ("machine", "m.yaml")])
def test_permission_denied_is_one_line_even_as_root(tmp_path, capsys, monkeypatch, examples,
                                                    command, name):
    """Root reads any file, so the refusal is simulated where every reader opens files."""
    import builtins
    import io
    import pathlib

    path = tmp_path / name
    path.write_text("x")

    real = {name: getattr(pathlib.Path, name) for name in ("open", "read_bytes", "read_text")}
    real_open = builtins.open

    def patched(name):
        def denied(self, *args, **kwargs):
            if str(self) == str(path):
                raise PermissionError(13, "Permission denied", str(self))
            return real[name](self, *args, **kwargs)
        return denied

    def open_denied(file, *args, **kwargs):
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    for name in real:
        monkeypatch.setattr(pathlib.Path, name, patched(name))
    monkeypatch.setattr(builtins, "open", open_denied)
    monkeypatch.setattr(io, "open", open_denied)
    args = [command, path] + (["-m", "h200"] if command == "price" else [])
    line = one_error(capsys, *args)
    assert str(path) in line and "Permission denied" in line
