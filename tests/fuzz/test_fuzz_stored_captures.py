"""Fuzzed capture-store entries (`models/stored.py`): a real entry, its JSON mutated as a file
on disk goes wrong (a value of another type, a key dropped or added, a list cut or grown,
bytes cut off), is read back as a miss (None) or as a capture equal to what was stored,
never an exception: a damaged store must never end a projection."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES
from fuzzkit import examples
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("transformers")

from roofwise.models import stored
from roofwise.models.capture import Step, capture_steps
from roofwise.models.config import load_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def entry(tmp_path_factory):
    """One stored MLA + MoE decode step (stages, notes, every field in use) and its body."""
    config = json.loads((ROOT / "examples" / "models" / "deepseek-v2-lite.json").read_text())
    config["num_hidden_layers"] = 2
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    path.write_text(json.dumps(config))
    captured = capture_steps(load_config(path), [Step("decode", 2, 1, 40)])[0]
    return Entry(captured, json.loads(json.dumps(stored.capture_data(captured))))


ODD = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                st.floats(allow_nan=False), st.text(max_size=5), st.just([]), st.just({}),
                st.lists(st.integers(0, 3), max_size=3))


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value[:4]):  # the first few of each list: enough shapes
            found += paths(item, (*prefix, i))
    return found


def locate(body: Any, where: tuple[Any, ...]) -> tuple[Any, Any] | None:
    """The container holding the spot `where` and the spot's key, if it is still there."""
    parent = body
    for key in where[:-1]:
        if (isinstance(parent, dict) and key in parent) or (
                isinstance(parent, list) and isinstance(key, int) and key < len(parent)):
            parent = parent[key]
        else:
            return None
    last = where[-1]
    if isinstance(parent, dict) and last in parent:
        return parent, last
    if isinstance(parent, list) and isinstance(last, int) and last < len(parent):
        return parent, last
    return None


class Entry:
    """The stored step and its body, with a short repr (hypothesis prints its arguments)."""

    def __init__(self, captured: Any, body: Any) -> None:
        self.captured, self.body = captured, body

    def __repr__(self) -> str:
        return "Entry(deepseek-v2-lite, 2 layers, decode 2x1 over 40)"


@examples(300)
@given(data=st.data())
def test_a_mutated_entry_is_a_miss_or_the_capture(entry, tmp_path_factory, data):
    captured, body = entry.captured, json.loads(json.dumps(entry.body))
    spots = paths(body)
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(spots[1:]))
        found = locate(body, where)
        if found is None:  # an earlier mutation took this spot away
            continue
        parent, last = found
        how = data.draw(st.sampled_from(("replace", "drop", "add", "grow")))
        if how == "replace":
            parent[last] = data.draw(ODD)
        elif how == "drop":
            del parent[last]
        elif how == "add" and isinstance(parent, dict):
            parent[data.draw(st.text(min_size=1, max_size=4))] = data.draw(ODD)
        elif how == "grow" and isinstance(parent, list):
            parent.append(data.draw(ODD))
    EXAMPLES["stored capture"] += 1
    try:
        back = stored.capture_from_data(body)
    except stored._Unreadable:
        return
    assert back == stored.capture_from_data(json.loads(json.dumps(body)))  # deterministic
    assert back == captured or json.dumps(stored.capture_data(back)) != json.dumps(
        stored.capture_data(captured))  # read as written, or a capture that says what it is


@examples(60)
@given(cut=st.integers(0, 10_000), flip=st.integers(0, 10_000))
def test_a_damaged_file_is_a_miss(entry, tmp_path_factory, cut, flip):
    captured = entry.captured
    directory = tmp_path_factory.mktemp("store")
    store = stored.CaptureStore(directory, "code")
    stored.save_capture(store, "k", captured)
    (path,) = directory.glob("*.json.gz")
    raw = path.read_bytes()
    damaged = bytearray(raw[: cut % (len(raw) + 1)])
    if damaged:
        damaged[flip % len(damaged)] ^= 0x55
    path.write_bytes(bytes(damaged))
    EXAMPLES["stored file"] += 1
    back = stored.load_capture(store, "k")
    assert back is None or back == captured
    if back is None:
        stored.save_capture(store, "k", captured)
        assert stored.load_capture(store, "k") == captured
    gzip.decompress(path.read_bytes())  # replaced whole, never left half-written
