"""A checkpoint's ignore list (`modules_to_not_convert`, `ignore`, `exclude_modules`) read
through a set of its plain names gives, for every weight, what matching each entry in turn
(`quant._names`, the reference) gives: on the ignore lists of every quantized config in the
corpus and on generated names and patterns (globs, `re:`, multimodal prefixes, trailing
dots)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from roofwise.models.quant import WeightScheme, _names

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


def by_each_entry(ignore, name):
    module = name.rsplit(".", 1)[0]
    return not any(_names(module, pattern) for pattern in ignore)


def scheme(ignore):
    return WeightScheme("test", "int4", ignore=tuple(ignore))


def ignore_lists():
    found = []
    for path in sorted(CONFIGS.rglob("*.json")):
        raw = json.loads(path.read_text())
        for q in (raw.get("quantization_config"),
                  *(v.get("quantization_config") for v in raw.values() if isinstance(v, dict))):
            if isinstance(q, dict):
                for key in ("modules_to_not_convert", "ignore", "exclude_modules"):
                    if isinstance(q.get(key), list) and q[key]:
                        found.append((path.name, tuple(q[key])))
    return found


def names_for(ignore):
    """Weight names a decoder has, and names near each entry (itself, below it, above it,
    with a prefix, a near miss)."""
    names = [f"model.layers.{i}.{part}.weight" for i in range(4) for part in (
        "self_attn.q_proj", "self_attn.kv_b_proj", "mlp.gate", "mlp.gate_proj",
        "mlp.experts.gate_up_proj", "mlp.shared_experts.down_proj", "input_layernorm")]
    names += ["lm_head.weight", "model.embed_tokens.weight", "model.norm.weight"]
    for entry in ignore[::max(1, len(ignore) // 40)]:  # 40 entries of a long list, spread
        plain = entry.removeprefix("re:").replace("*", "").replace("?", "x")
        names += [f"{plain}.weight", f"{plain}.sub.weight", f"model.{plain}.weight",
                  f"{plain}x.weight", f"{plain}0.mlp.weight", f"{plain[:-1]}.weight",
                  f"model.language_model.{plain}.weight"]
    return names


def test_the_corpus_ignore_lists_read_as_entry_by_entry():
    lists = ignore_lists()
    assert len(lists) >= 20  # FP8, NVFP4, AWQ checkpoints of the corpus and fixtures
    checked = 0
    for _, ignore in lists:
        s = scheme(ignore)
        for name in names_for(ignore):
            assert s.stores_quantized(name) == by_each_entry(ignore, name), (ignore[:3], name)
            checked += 1
    assert checked > 3_000


PART = st.sampled_from(["model", "layers", "0", "1", "12", "mlp", "gate", "gate_proj",
                        "self_attn", "q_proj", "lm_head", "language_model", "experts",
                        "visual", "norm"])
NAME = st.lists(PART, min_size=1, max_size=6).map(".".join)
PATTERN = st.one_of(
    NAME,
    NAME.map(lambda n: n + "."),
    NAME.map(lambda n: "model.language_model." + n),
    NAME.map(lambda n: "language_model." + n),
    NAME.map(lambda n: n.replace("0", "*")),
    NAME.map(lambda n: n + "*"),
    NAME.map(lambda n: n[:-2] + "*"),
    NAME.map(lambda n: "language_model." + n + "*"),
    NAME.map(lambda n: "*" + n),
    NAME.map(lambda n: n.replace("1", "?")),
    NAME.map(lambda n: n.replace("gate", "[gu]ate")),
    NAME.map(lambda n: "re:.*" + n.replace(".", r"\.")),
    st.just("."), st.just(""), st.just("re:("))


@settings(max_examples=300, deadline=None)
@given(st.lists(PATTERN, max_size=8), st.lists(NAME, min_size=1, max_size=8))
def test_generated_ignore_lists_read_as_entry_by_entry(ignore, modules):
    s = scheme(ignore)
    for module in modules:
        name = module + ".weight"
        assert s.stores_quantized(name) == by_each_entry(tuple(ignore), name)
