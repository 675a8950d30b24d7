"""Fuzzed `--shape` strings, ledgers, machine profiles and Nsight Compute CSVs: the contract
holds, and what is printed on success is a consistent number, never a wrapped or infinite one."""

from __future__ import annotations

import json
import math
from pathlib import Path

import yaml
from fuzzkit import NASTY_TEXT, UNITS, examples, names, out_lines, run_cli
from hypothesis import given
from hypothesis import strategies as st

from roofwise.ops import OPS
from roofwise.profiles.load import builtin_paths

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "ncu"
PARAMS = ("m", "n", "k", "shape", "batch", "q_len", "kv_len", "seq_len", "q_heads", "kv_heads",
          "head_dim", "dtype", "kv_dtype", "out_dtype", "causal", "page_size", "tokens",
          "hidden", "expert_tokens", "top_k", "num_experts", "gated", "approximate", "a_shape",
          "b_shape", "rows", "cols", "block", "bogus", "")


def values() -> st.SearchStrategy[str]:
    """What a user (or a script gone wrong) puts after `key=`."""
    integer = st.one_of(st.integers(-5, 5000), st.integers(2**31 - 2, 2**64 + 2),
                        st.integers(10**29, 10**31), st.integers(0, 10**4000))
    number = integer.map(str)
    return st.one_of(
        number,
        st.lists(number, min_size=1, max_size=5).map("x".join),
        st.lists(number, min_size=1, max_size=5).map(",".join),
        st.lists(number, min_size=1, max_size=4).map(lambda p: "[" + ",".join(p) + "]"),
        st.sampled_from(("1e12", "1.5", "nan", "inf", "-0", "4294967297x4294967297",
                         "4xx4", "(1,2]", "[]", "", "true", "no", "bf16", "fp8", "fp32",
                         "float8_e4m3fn", "int4", "tanh", "erf", "٣", "4 x 4", "9" * 5000)),
        st.sampled_from(NASTY_TEXT),
        st.text(max_size=20),
    )


@st.composite
def shape_args(draw: st.DrawFn) -> list[str]:
    pairs = [f"{draw(st.sampled_from(PARAMS))}={draw(values())}"
             for _ in range(draw(st.integers(0, 4)))]
    if draw(st.booleans()):
        return [",".join(pairs)] if pairs else []
    return pairs


def check_price_json(out: str) -> None:
    """A price printed is a consistent, finite set of numbers."""
    data = json.loads(out)
    assert data["bytes"] == data["read_bytes"] + data["write_bytes"]
    assert data["bytes"] >= 0 and data["flops"] >= 0
    assert math.isclose(data["flops"], sum(data["ops_by_unit"].values()), rel_tol=1e-9)
    for key in ("sol_time_s", "memory_time_s", "compute_time_s"):
        if data.get(key) is not None:
            assert math.isfinite(data[key]) and data[key] >= 0, (key, data[key])


@examples(500)
@given(op=st.one_of(st.sampled_from(sorted(OPS)), names()), shapes=shape_args(),
       machine=st.sampled_from(("h200", "ascend-a5-vector", "a100-sxm")))
def test_shape_strings(op, shapes, machine):
    args = [a for s in shapes for a in ("--shape", s)]
    run = run_cli("price", op, *args, "-m", machine, "--json", count="price --shape")
    assert run.code in (0, 2)
    if run.code == 0 and '"priced_in": "cycles"' not in run.out:
        check_price_json(run.out)


# ----------------------------------------------------------------------------- ledgers

def scalars() -> st.SearchStrategy[object]:
    return st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6),
                     st.integers(10**300, 10**400), st.floats(allow_nan=True),
                     st.sampled_from(("bf16", "fp32", "fp8", "input", "output", "lookup",
                                      "inout", "arithmetic", "contraction", "[/x]", "$x$",
                                      "", "1e3", "4096")),
                     st.text(st.characters(blacklist_categories=("Cs",)), max_size=12))


@st.composite
def tensors(draw: st.DrawFn) -> dict[str, object]:
    tensor: dict[str, object] = {
        "name": draw(st.one_of(st.sampled_from(("x", "y", "w", "x")), names(False))),
        "shape": draw(st.one_of(st.lists(st.one_of(st.integers(0, 10**6),
                                                   st.integers(2**32, 2**70), scalars()),
                                         max_size=5), scalars())),
        "dtype": draw(st.one_of(st.sampled_from(("bf16", "fp32", "fp8", "int32", "int4")),
                                scalars())),
        "role": draw(st.one_of(st.sampled_from(("input", "output", "inout", "lookup")),
                               scalars())),
    }
    if draw(st.booleans()):
        tensor["uses"] = draw(st.one_of(st.integers(0, 10**6), scalars()))
        tensor["bytes_per_use"] = draw(st.one_of(st.integers(0, 10**6), scalars()))
    return tensor


@st.composite
def ledgers(draw: st.DrawFn, depth: int = 0) -> dict[str, object]:
    body: dict[str, object] = {
        "name": draw(st.one_of(names(False), scalars())),
        "roof": draw(st.one_of(st.sampled_from(UNITS), scalars())),
        "tensors": draw(st.lists(tensors(), max_size=4)),
        "work": draw(st.lists(st.fixed_dictionaries({
            "unit": st.one_of(st.sampled_from(UNITS), scalars()),
            "class": st.one_of(st.sampled_from(("arithmetic", "transcendental", "compare",
                                                "contraction")), scalars()),
            "ops": st.one_of(st.integers(0, 10**15), st.floats(0, 1e30), scalars())}),
            max_size=3)),
    }
    if draw(st.booleans()):
        body["notes"] = draw(st.lists(st.one_of(names(False), scalars()), max_size=3))
    if depth < 1 and draw(st.integers(0, 4)) == 0:
        body["stages"] = draw(st.lists(ledgers(depth + 1), max_size=3))
        body["compose"] = draw(st.one_of(st.sampled_from(("fused", "separate")), scalars()))
    for key in draw(st.lists(st.sampled_from(("name", "roof", "tensors", "work")),
                             max_size=2)):
        body.pop(key, None)
    if draw(st.integers(0, 9)) == 0:
        body[draw(st.sampled_from(("bogus", "Name", "memory", "units")))] = 1
    return body


BOMB = ("notes: [&a [lol, lol, lol, lol, lol, lol, lol, lol, lol], "
        + ", ".join(f"&{chr(98 + k)} [" + ", ".join([f"*{chr(97 + k)}"] * 9) + "]"
                    for k in range(8)) + "]\n")
YAML_MUTATIONS = ("", "ops: !!float abc\n", "name: !!int x\n", BOMB, "name: " + "[" * 5000,
                  "x: &a [*a]\n", "name: \"\\udc80\"\n", "\t- bad indent\n", "---\n---\n",
                  "ops: " + "9" * 5000 + "\n", "? [a]\n: b\n", "name: !!binary x\n",
                  "<<: *undefined\n", "%YAML 9.9\n---\n", "name: 2002-13-45\n",
                  # free text that YAML reads as a number past Python's 4,300-digit limit
                  "name: " + "9" * 5000 + "\n", "notes: [" + "9" * 5000 + "]\n",
                  "work:\n- {unit: cuda_core.fp32, class: arithmetic, ops: 1, label: "
                  + "9" * 5000 + "}\n", "name: \"\\e[31mred\\r\\u202e\"\n")


@st.composite
def ledger_texts(draw: st.DrawFn) -> str:
    text = yaml.safe_dump(draw(ledgers()), allow_unicode=True, sort_keys=False)
    mutation = draw(st.sampled_from(YAML_MUTATIONS))
    where = draw(st.sampled_from(("end", "start", "replace", "cut")))
    if where == "end":
        return text + mutation
    if where == "start":
        return mutation + text
    if where == "cut":
        return text[:draw(st.integers(0, len(text)))]
    return mutation or text


@examples(300)
@given(text=ledger_texts(), machine=st.sampled_from(("h200", "ascend-a5-vector")))
def test_ledgers(tmp_path, text, machine):
    path = tmp_path / "l.yaml"
    path.write_text(text, encoding="utf-8")
    run = run_cli("price", path, "-m", machine, "--json", count="price ledger")
    assert run.code in (0, 2)
    if run.code == 0 and '"priced_in": "cycles"' not in run.out:
        check_price_json(run.out)
    run_cli("price", path, "-m", machine, count="price ledger table")
    run_cli("lint", path, "-m", machine, count="lint ledger")


# ----------------------------------------------------------------------------- profiles

H200 = yaml.safe_load(next(p for p in builtin_paths() if p.stem == "h200").read_text())


def _paths(node: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for k, value in enumerate(node):
            out += _paths(value, (*prefix, k))
    return out


PROFILE_PATHS = _paths(H200)


@st.composite
def profile_texts(draw: st.DrawFn) -> str:
    import copy

    data = copy.deepcopy(H200)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PROFILE_PATHS))
        node = data
        try:
            for key in path[:-1]:
                node = node[key]
            action = draw(st.sampled_from(("set", "set", "delete", "add")))
            if action == "set":
                node[path[-1]] = draw(st.one_of(scalars(), st.lists(scalars(), max_size=2),
                                                st.dictionaries(st.sampled_from(
                                                    ("sustained", "burst", "copy", "read", "x")),
                                                    scalars(), max_size=2)))
            elif action == "delete":
                del node[path[-1]]
            elif isinstance(node, dict):
                node[draw(st.sampled_from(("bogus", "read", "burst", "tensor_core.bf16")))] = (
                    draw(scalars()))
        except (KeyError, IndexError, TypeError):
            continue
    text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
    return text + draw(st.sampled_from(("", "", "", "notes: !!float abc\n", BOMB)))


@examples(200)
@given(text=profile_texts())
def test_profiles(tmp_path, text):
    path = tmp_path / "p.yaml"
    path.write_text(text, encoding="utf-8")
    run = run_cli("machine", path, "--json", count="machine profile")
    assert run.code in (0, 2)
    run_cli("machine", path, count="machine profile table")
    run = run_cli("price", "gemm", "--shape", "m=64,n=64,k=64", "-m", path, "--json",
                  count="price on profile")
    if run.code == 0 and '"priced_in": "cycles"' not in run.out:
        check_price_json(run.out)
    run = run_cli("analyze", ROOT / "examples" / "records.jsonl", "-m", path, "--json",
                  count="analyze on profile")
    if run.code == 0:
        assert len(out_lines(run)) == 8
    run_cli("lint", path, count="lint profile")


# ----------------------------------------------------------------------------- ncu CSVs

NCU = (FIXTURES / "branch_cc75_real.csv").read_text()
NCU_SYNTHETIC = (FIXTURES / "synthetic_rmsnorm_h200.csv").read_text()
# reports by others: rule columns (short metric rows); a BOM, CRLF and program output first
NCU_RULES = (FIXTURES / "llm_perf_opt_kernel_0009_metrics.csv").read_text()
NCU_WINDOWS = (FIXTURES / "gpu_roofline_profiler_saxpy.csv").read_text(encoding="utf-8")


@st.composite
def ncu_texts(draw: st.DrawFn) -> bytes:
    lines = draw(st.sampled_from((NCU, NCU_SYNTHETIC, NCU_RULES, NCU_WINDOWS))).splitlines()
    for _ in range(draw(st.integers(0, 4))):
        k = draw(st.integers(0, max(len(lines) - 1, 0)))
        action = draw(st.sampled_from(("value", "unit", "drop", "dup", "cut", "text", "cells")))
        if not lines:
            break
        cells = lines[k].split('","')
        if action == "value" and len(cells) > 2:
            cells[-1] = draw(st.one_of(
                st.sampled_from(("n/a", "-1", "1e999", "9" * 5000, "1,2,3", "", "[/x]", "inf",
                                 "2,816.5", "NaN")), st.text(max_size=8)).map(str)) + '"'
            lines[k] = '","'.join(cells)
        elif action == "unit" and len(cells) > 2:
            cells[-2] = draw(st.sampled_from(("Gbyte", "Tbyte", "byte/s", "", "[/x]", "%")))
            lines[k] = '","'.join(cells)
        elif action == "drop":
            del lines[k]
        elif action == "dup":
            lines.insert(k, lines[k])
        elif action == "cut":
            lines[k] = lines[k][:draw(st.integers(0, len(lines[k])))]
        elif action == "text":
            lines.insert(k, draw(st.text(max_size=30)).replace("\n", " "))
        else:
            lines[k] = lines[k] + ',"extra"'
    ending = draw(st.sampled_from(("\n", "\r\n")))
    bom = "\ufeff" if draw(st.integers(0, 4)) == 0 else ""
    data = (bom + ending.join(lines)).encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 9)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + b"\xff" + data[at:]
    return data


@examples(150)
@given(data=ncu_texts(), how=st.sampled_from(("ledger", "op", "kernel", "per-kernel")))
def test_ncu_csvs(tmp_path, data, how):
    path = tmp_path / "ncu.csv"
    path.write_bytes(data)
    extra = {"ledger": ["--ledger", ROOT / "examples" / "qk_norm_rope_quant.yaml"],
             "op": ["--op", "rmsnorm", "--shape", "rows=4096,cols=4096"],
             "kernel": ["--op", "rmsnorm", "--kernel", "rms.*("],
             "per-kernel": ["--op", "rmsnorm", "--per-kernel"]}[how]
    run_cli("audit", "--ncu-csv", path, *extra, count="audit ncu csv")
    run_cli("audit", "--ncu-csv", path, *extra, "--json", count="audit ncu csv json")
