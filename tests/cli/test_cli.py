"""The command: each subcommand runs, and bad input is one line on stderr with exit code 2."""

from __future__ import annotations

import json

import pytest

from roofwise.cli import main


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_machines_lists_builtins(capsys):
    code, out, _ = run(capsys, "machines", "--json")
    assert code == 0
    names = [json.loads(line)["name"] for line in out.splitlines()]
    assert names == ["a10", "a100-sxm-40gb", "a100-sxm", "ascend-a5-vector", "b200",
                     "h100-pcie", "h100-sxm", "h20", "h200", "l4", "l40s", "mi250x", "mi300x",
                     "mi325x", "rtx-4090", "rtx-a6000", "t4", "v100-sxm2"]


def test_machine_shows_regimes_mixes_balance_and_sources(capsys):
    code, out, _ = run(capsys, "machine", "h200")
    assert code == 0
    for text in ("0.9380", "read*", "burst*", "161.97 FLOP/B",
                 "TileOPs h200.yaml", "assumed"):
        assert text in out
    code, out, _ = run(capsys, "machine", "h200", "--json")
    data = json.loads(out)
    assert data["memory"]["hbm"]["effective_bytes_per_s"] == pytest.approx(4502.4e9)
    assert data["units"]["sfu.fp32"]["calibration_by_regime"] == {}


def test_price_json_per_stage_and_total(capsys, examples):
    code, out, _ = run(capsys, "price", str(examples / "qk_norm_rope_quant_split.yaml"),
                       "--machine", "h200", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["bytes"] == 151_650_816
    assert [s["bytes"] for s in data["stages"]] == [88_080_896, 63_569_920]
    assert data["bound"] == "memory"
    assert data["sol_time_s"] == pytest.approx(151_650_816 / 4502.4e9)


def test_price_table_names_tensors(capsys, examples):
    code, out, _ = run(capsys, "price", str(examples / "qk_norm_rope_quant.yaml"), "-m", "h200")
    assert code == 0
    assert "cos" in out and "lookup" in out and "15.051 us" in out


def test_analyze_json_one_object_per_record(capsys, examples):
    code, out, _ = run(capsys, "analyze", str(examples / "records.jsonl"), "--json")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 8
    assert {r["verdict"] for r in rows} == {"at_ceiling", "below", "anomaly", "latency_bound",
                                            "impossible", "blank", "cache_resident"}


def test_analyze_table_worst_first(capsys, examples):
    code, out, _ = run(capsys, "analyze", str(examples / "records.jsonl"))
    assert code == 0
    table = out.split("\n", 1)[1]  # after the title, which counts verdicts
    assert table.index("impossible") < table.index("at_ceiling")


def test_misuse_only(capsys):
    code, out, _ = run(capsys, "misuse", "--only", "6")
    assert code == 0 and "79.8%" in out


def one_line_error(capsys, *args, expect=()):
    code, _, err = run(capsys, *args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for text in expect:
        assert text in lines[0]
    return lines[0]


def test_unknown_machine(capsys, examples):
    one_line_error(capsys, "analyze", str(examples / "records.jsonl"), "-m", "tpu-v9",
                   expect=("--machine", "unknown machine 'tpu-v9'", "h200"))


def test_unknown_command_and_option(capsys):
    one_line_error(capsys, "analyse", expect=("No such command",))
    one_line_error(capsys, "misuse", "--only", "9", expect=("--only",))


def test_malformed_profile_file(capsys, tmp_path, examples):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmemory: {hbm: {theoretical_bytes_per_s: -1}}\nunits: {}\n")
    one_line_error(capsys, "price", str(examples / "qk_norm_rope_quant.yaml"), "-m", str(bad),
                   expect=(str(bad), "memory.hbm.theoretical_bytes_per_s", "positive number"))


def test_malformed_ledger_file(capsys, tmp_path):
    bad = tmp_path / "l.yaml"
    bad.write_text("name: x\nroof: cuda_core.fp32\ntensors:\n  - {name: a, shape: [2], "
                   "dtype: fp32, role: sideways}\n")
    one_line_error(capsys, "price", str(bad), "-m", "h200",
                   expect=(str(bad), "tensors[0].role", "expected one of"))


def test_unknown_mix(capsys, examples):
    one_line_error(capsys, "analyze", str(examples / "records.jsonl"), "-m", "h200", "--mix",
                   "scatter", expect=("--mix", "no measured 'scatter' mix"))


def test_bad_record_skipped_then_strict(capsys, tmp_path, examples):
    path = tmp_path / "r.jsonl"
    lines = (examples / "records.jsonl").read_text().splitlines()
    path.write_text("\n".join([lines[0], "{oops", lines[1]]) + "\n")
    code, out, err = run(capsys, "analyze", str(path), "--json")
    assert code == 0
    assert len(out.splitlines()) == 2
    assert f"{path}:2" in err and "skipped 1 malformed record(s) of 3" in err
    one_line_error(capsys, "analyze", str(path), "--strict", expect=(f"{path}:2", "not valid JSON"))


def test_missing_field_names_it(capsys, tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"op": "x", "flops": 1, "bytes": 1, "time_s": 1}) + "\n")
    one_line_error(capsys, "analyze", str(path), "--strict",
                   expect=(f"{path}:1: roof", "missing required field"))


def test_bare_command_prints_help(capsys):
    code, out, err = run(capsys)
    assert code == 0 and "Commands:" in out and not err
    commands = [line.split()[0] for line in out.split("Commands:")[1].strip().splitlines()]
    assert commands[:2] == ["machines", "machine"]  # the data-flow order, not alphabetical
    assert commands.index("price") < commands.index("analyze") < commands.index("calibrate")


def test_price_refuses_a_unit_the_machine_lacks(capsys, tmp_path):
    ledger = tmp_path / "l.yaml"
    ledger.write_text("name: x\nroof: cuda_core.fp32\ntensors:\n  - {name: a, shape: [4], "
                      "dtype: fp32, role: input}\nwork:\n  - {unit: tpu.x, class: arithmetic, "
                      "ops: 8}\n")
    one_line_error(capsys, "price", str(ledger), "-m", "h200",
                   expect=(f"{ledger}: work 'arithmetic'", "unit tpu.x is not on machine h200"))
    one_line_error(capsys, "price", "gemm", "-m", "a100-sxm", "--shape", "dtype=fp8",
                   expect=("gemm: roof", "unit tensor_core.fp8 is not on machine a100-sxm"))


def test_price_on_a_clockless_machine_is_in_cycles(capsys, tmp_path):
    ledger = tmp_path / "softmax.yaml"
    ledger.write_text("name: softmax_row\nroof: ascend_vector.alu\ntensors:\n"
                      "  - {name: s, shape: [8192], dtype: fp32, role: input}\n"
                      "  - {name: p, shape: [8192], dtype: fp32, role: output}\n"
                      "work:\n  - {unit: ascend_vector.sfu, class: transcendental, ops: 8192}\n"
                      "  - {unit: ascend_vector.alu, class: arithmetic, ops: 32768}\n")
    code, out, _ = run(capsys, "price", str(ledger), "-m", "ascend-a5-vector", "--json")
    data = json.loads(out)
    assert code == 0 and data["priced_in"] == "cycles"
    assert data["cycles_by_unit"] == {"ascend_vector.sfu": 1024.0,
                                      "ascend_vector.alu": pytest.approx(642.5098, abs=1e-4)}
    assert data["compute_serial_cycles"] == pytest.approx(1666.5098, abs=1e-4)
    assert data["binding_unit"] == "ascend_vector.sfu"
    assert data["memory_cycles"] == pytest.approx(8192 * 4 / 100)  # GM-UB 100 B/cycle
    code, out, _ = run(capsys, "price", str(ledger), "-m", "ascend-a5-vector")
    assert "1,024.0" in out and "1,666.5" in out


def test_bad_regime_is_one_line(capsys, examples):
    one_line_error(capsys, "analyze", str(examples / "records.jsonl"), "--regime", "turbo",
                   expect=("--regime", "expected one of sustained, burst, unspecified"))


def test_empty_record_file_is_one_line(capsys, tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_text("")
    one_line_error(capsys, "analyze", str(path), expect=(str(path), "no records"))


@pytest.mark.filterwarnings("error")  # a warning, on any thread, fails the command
def test_overflowing_record_warns_nobody(capsys, tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps({"op": "x", "flops": 1e308, "bytes": 1e308,
                                "roof": "cuda_core.fp32", "time_s": 1e-320,
                                "device": "h200"}) + "\n")
    code, out, err = run(capsys, "analyze", str(path), "--json")
    row = json.loads(out)
    assert code == 0 and not err
    assert row["verdict"] == "impossible" and row["efficiency"] is None
    assert "an infinite rate" in row["reasons"][0]


def test_a_stage_on_a_missing_unit(capsys, tmp_path):
    ledger = tmp_path / "l.yaml"
    ledger.write_text("name: t\nroof: cuda_core.fp32\nstages:\n- name: s\n  roof: cuda_core.fp33\n"
                      "  tensors:\n  - {name: x, shape: [4], dtype: bf16, role: input}\n")
    one_line_error(capsys, "price", str(ledger), "-m", "h200",
                   expect=(f"{ledger}: stages[0].roof", "unit cuda_core.fp33 is not on machine"))


@pytest.mark.parametrize(("short", "chosen"), [("h100", "h100-sxm"), ("a100", "a100-sxm"),
                                                ("4090", "rtx-4090"), ("L40S", "l40s")])
def test_short_machine_name_is_accepted_and_says_which(capsys, short, chosen):
    code, out, err = run(capsys, "machine", short, "--json")
    assert code == 0 and json.loads(out)["name"] == chosen
    assert f"using profile {chosen}" in err


@pytest.mark.parametrize(("short", "candidates"), [("h2", "h20, h200"),
                                                    ("mi3", "mi300x, mi325x")])
def test_ambiguous_short_name_is_refused_with_the_candidates(capsys, short, candidates):
    code, out, err = run(capsys, "price", "gemm", "-m", short)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and f"fits several profiles: {candidates}; name one" in err


def test_exact_name_says_nothing_about_the_choice(capsys):
    code, _, err = run(capsys, "machine", "h100-sxm", "--json")
    assert code == 0 and err == ""


def test_softmax_prices_on_the_ascend_vector_pipes_in_cycles(capsys):
    code, out, err = run(capsys, "price", "softmax", "-m", "ascend-a5-vector", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert "work declared on sfu.fp32 runs on ascend_vector.sfu" in err
    elems = 4096 * 8192
    assert data["priced_in"] == "cycles"
    assert data["cycles_by_unit"] == {"ascend_vector.alu": 4 * elems / 51,
                                      "ascend_vector.sfu": (elems + 4096) / 8}
    assert data["binding_unit"] == "ascend_vector.sfu"


def test_compare_help_lists_the_gate_one_item_a_line(capsys):
    code, out, _ = run(capsys, "compare", "--help")
    assert code == 0
    items = [line.strip() for line in out.splitlines() if line.strip().startswith("- ")]
    assert [i.split()[1] for i in items] == ["a", "an", "a", "a", "a"]
    assert items[0] == "- a regression;"
    assert max(len(line) for line in out.splitlines()) <= 80


def test_analyze_json_says_the_device_mismatch_on_stderr(capsys, examples):
    code, out, err = run(capsys, "analyze", str(examples / "records.jsonl"), "-m", "h200",
                         "--json")
    assert code == 0
    assert err == ("roofwise: warning: 1 of 8 record(s) were judged on a profile their device "
                   "does not name: 'NVIDIA GeForce RTX 3090' (1); pass the matching --machine, "
                   "or none to let each record's device choose\n")
    softmax = json.loads(out.splitlines()[7])
    assert softmax["reasons"][0].startswith("device mismatch: the record was measured on "
                                            "'NVIDIA GeForce RTX 3090'")


def _builtin_names() -> list[str]:
    from roofwise.profiles.load import builtin_machines

    return sorted(builtin_machines())


@pytest.mark.parametrize("machine", _builtin_names())
def test_the_example_ledgers_lint_and_price_on_every_builtin_card(capsys, examples, machine):
    """`roofwise lint LEDGER -m mi300x` ended in a KeyError: lint M5 looked the ledger's
    declared units (cuda_core.fp32) up among the card's own pipes, not through the class
    mapping that places them on an AMD card's vector ALUs. Every card: a verdict (0 or 1),
    or one line saying what the card lacks (2), never a traceback."""
    for ledger in ("qk_norm_rope_quant.yaml", "qk_norm_rope_quant_split.yaml"):
        for command in ("lint", "price"):
            code = main([command, str(examples / ledger), "-m", machine])
            out, err = capsys.readouterr()
            assert "Traceback" not in err
            assert code in (0, 1) or (code == 2 and not out and err.count("\n") == 1), (
                command, ledger, code, err)
    if machine == "mi300x":  # M5 reads the pipes as the card places them: no finding here
        assert main(["lint", str(examples / "qk_norm_rope_quant.yaml"), "-m", machine,
                     "--json"]) == 0
        codes = [json.loads(line)["code"] for line in capsys.readouterr().out.splitlines()]
        assert codes == ["M1"]
